#!/usr/bin/env python3
"""An independent scorer of a DLIO emulation against the real program it emulates.

    score.py REAL_TRACES EMULATED_RUN_DIR --real-data DIR --emulated-data DIR [--json OUT]

REAL_TRACES: the folder (or files) of the real program's traces, as `dlio trace` writes them
(.pfw: a JSON array, one event per line, `args.fname` on every file call). EMULATED_RUN_DIR:
the `dlio run --trace` output folder (trace-*.pfw or .pfw.gz: dftracer's layout, file calls
carry `args.fhash` and "FH" metadata events map hashes to paths). Both sides are read the
same way: every complete event ("ph": "X") whose file path is known.

Data reads: read-like calls (read, pread, pread64, readv, preadv, preadv64, preadv2, fread)
that returned more than 0 bytes, on files under the side's data folder (--real-data,
--emulated-data), minus every file that the same side wrote to (checkpoints, logs) and
minus paths matching --exclude. Figures per side:

  data bytes read, read calls, distinct files read,
  I/O phase: first data read's start to the last data read's end,
  read sizes: their distribution (two-sample Kolmogorov-Smirnov distance between the sides),
  bursts: data reads (all threads and processes together) merged while the pause between
      one read's end and the next read's start is at most --burst-gap-ms (default 2 ms);
      the gaps between consecutive bursts are compared by their KS distance (gap_ks, the
      bound; gap_ks_tol1ms, for information, lets each gap move by 1 ms first: sleeps of a
      fixed length give so narrow a distribution that a shift of 50 us moves the raw KS by
      0.4),
  steps: the bursts, with each burst's I/O time (the union of its read calls' intervals);
      the emulated side's `compute` events count its steps too.

Bounds (pass/fail): bytes within 2%, I/O phase within 5%, read-size KS <= 0.10, gap KS <=
0.20, read calls within 10%. The rest is shown for information. Exit status 0 when every
bound holds, 1 when one fails, 2 when the traces cannot be read.
Needs numpy only.
"""
import argparse
import gzip
import json
import os
import re
import sys

import numpy as np

READS = {"read", "pread", "pread64", "readv", "preadv", "preadv64", "preadv2", "fread"}
WRITES = {"write", "pwrite", "pwrite64", "writev", "pwritev", "pwritev64", "pwritev2", "fwrite"}
BOUNDS = {  # metric -> (kind, limit)
    "bytes": ("rel", 0.02),
    "io_phase_s": ("rel", 0.05),
    "read_size_ks": ("abs", 0.10),
    "gap_ks": ("abs", 0.20),
    "read_calls": ("rel", 0.10),
}


def trace_files(paths):
    out = []
    for p in paths:
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                out += [os.path.join(root, n) for n in names
                        if n.endswith(".pfw") or n.endswith(".pfw.gz")]
        elif os.path.isfile(p):
            out.append(p)
    return sorted(out)


def events_of(path):
    """The events of one trace file; lines that are not events ([, ], blanks) are skipped."""
    opener = gzip.open if path.endswith(".gz") else open
    bad = 0
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip().rstrip(",")
            if not line.startswith("{"):
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                bad += 1
    if bad:
        print(f"warning: {path}: {bad} lines that are not JSON events", file=sys.stderr)


class Side:
    """The file calls of one side's traces: (path, name, start_us, end_us, bytes, pid, tid)."""

    def __init__(self, paths):
        self.files = trace_files(paths)
        if not self.files:
            raise SystemExit(f"error: no .pfw or .pfw.gz traces in {' '.join(paths)}")
        hashes = {}
        raw = []
        self.compute_events = 0
        for tf in self.files:
            for e in events_of(tf):
                a = e.get("args") or {}
                if e.get("name") == "FH" and e.get("ph") == "M":
                    hashes[a.get("value")] = a.get("name")
                    continue
                if e.get("ph") != "X":
                    continue
                if e.get("cat") == "compute" or e.get("name") == "compute":
                    self.compute_events += 1
                name = e.get("name")
                if name not in READS and name not in WRITES:
                    continue
                ret = a.get("ret")
                n = ret if isinstance(ret, (int, float)) and ret > 0 else 0
                start = float(e.get("ts", 0))
                raw.append((a.get("fname"), a.get("fhash"), name, start,
                            start + float(e.get("dur", 0)), int(n), e.get("pid"), e.get("tid")))
        self.calls = []
        for fname, fhash, name, s, t, n, pid, tid in raw:
            path = fname if fname else hashes.get(fhash)
            if path:
                self.calls.append((os.path.normpath(path), name, s, t, n, pid, tid))

    def data_reads(self, folder, exclude):
        roots = {os.path.normpath(os.path.abspath(folder)), os.path.realpath(folder)}
        written = {c[0] for c in self.calls if c[1] in WRITES and c[4] > 0}

        def under(p):
            return any(p.startswith(r + os.sep) for r in roots)

        rx = re.compile(exclude) if exclude else None
        out = [c for c in self.calls
               if c[1] in READS and c[4] > 0 and under(c[0]) and c[0] not in written
               and not (rx and rx.search(c[0]))]
        out.sort(key=lambda c: c[2])
        return out, sorted(p for p in written if under(p))


def figures(reads, gap_us):
    """The figures of one side's data reads (sorted by start)."""
    if not reads:
        return {"bytes": 0, "read_calls": 0, "files": 0, "io_phase_s": 0.0, "sizes": [],
                "gaps_s": [], "bursts": 0, "burst_io_s": [], "busy_s": 0.0}
    starts = np.array([r[2] for r in reads])
    ends = np.array([r[3] for r in reads])
    sizes = [r[4] for r in reads]
    # Bursts: merge while the next read starts at most gap_us after the furthest end so far.
    bursts = []  # [start, end, busy]
    busy_total = 0.0
    cur = None
    iv_end = None  # end of the current union interval inside the burst
    for s, t in zip(starts, ends):
        if cur is None or s > cur[1] + gap_us:
            if cur is not None:
                bursts.append(cur)
            cur = [s, t, t - s]
            iv_end = t
            continue
        # union of intervals for the busy time
        if s > iv_end:
            cur[2] += t - s
            iv_end = t
        elif t > iv_end:
            cur[2] += t - iv_end
            iv_end = t
        cur[1] = max(cur[1], t)
    bursts.append(cur)
    busy_total = sum(b[2] for b in bursts)
    gaps = [(bursts[i + 1][0] - bursts[i][1]) / 1e6 for i in range(len(bursts) - 1)]
    return {
        "bytes": int(sum(sizes)), "read_calls": len(reads),
        "files": len({r[0] for r in reads}),
        "io_phase_s": float((ends.max() - starts.min()) / 1e6),
        "sizes": sizes, "gaps_s": gaps, "bursts": len(bursts),
        "burst_io_s": [b[2] / 1e6 for b in bursts], "busy_s": busy_total / 1e6,
    }


def ks(a, b, tol=0.0):
    """Two-sample Kolmogorov-Smirnov distance: the largest gap between the empirical CDFs.

    With tol > 0, a value may move by up to tol before it counts (a Levy-style distance):
    sup over x of max(F_a(x) - F_b(x + tol), F_b(x) - F_a(x + tol)), at least 0.
    """
    a, b = np.sort(np.asarray(a, float)), np.sort(np.asarray(b, float))
    if len(a) == 0 and len(b) == 0:
        return 0.0
    if len(a) == 0 or len(b) == 0:
        return 1.0
    xs = np.concatenate([a, b])
    fa = lambda x: np.searchsorted(a, x, side="right") / len(a)  # noqa: E731
    fb = lambda x: np.searchsorted(b, x, side="right") / len(b)  # noqa: E731
    if tol <= 0:
        return float(np.max(np.abs(fa(xs) - fb(xs))))
    return float(max(0.0, np.max(fa(xs) - fb(xs + tol)), np.max(fb(xs) - fa(xs + tol))))


def rel(real, emu):
    if real == 0:
        return 0.0 if emu == 0 else float("inf")
    return (emu - real) / real


def stats(v):
    if not len(v):
        return {"n": 0}
    v = np.asarray(v, float)
    return {"n": int(len(v)), "mean": float(v.mean()), "median": float(np.median(v)),
            "p10": float(np.percentile(v, 10)), "p90": float(np.percentile(v, 90)),
            "min": float(v.min()), "max": float(v.max())}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("real_traces")
    ap.add_argument("emulated_run_dir")
    ap.add_argument("--real-data", required=True, help="the real program's data folder")
    ap.add_argument("--emulated-data", required=True, help="the emulation's data folder")
    ap.add_argument("--json", help="write the figures and verdicts here")
    ap.add_argument("--burst-gap-ms", type=float, default=2.0,
                    help="longest pause between two reads of one burst (default 2 ms)")
    ap.add_argument("--exclude", default=r"/\.[^/]*$",
                    help="regex of paths not counted (default: hidden files)")
    args = ap.parse_args(argv)

    real_side = Side([args.real_traces])
    emu_side = Side([args.emulated_run_dir])
    real_reads, real_written = real_side.data_reads(args.real_data, args.exclude)
    emu_reads, emu_written = emu_side.data_reads(args.emulated_data, args.exclude)
    gap_us = args.burst_gap_ms * 1e3
    r, e = figures(real_reads, gap_us), figures(emu_reads, gap_us)

    rows = []  # (metric, real, emu, error, kind of error, bound, pass)

    def row(metric, rv, ev, err, kind):
        b = BOUNDS.get(metric)
        ok = None
        if b:
            ok = bool(abs(err) <= b[1]) if err is not None and np.isfinite(err) else False
        rows.append({"metric": metric, "real": rv, "emulated": ev, "error": err,
                     "error_kind": kind, "bound": b[1] if b else None, "pass": ok})

    for m in ("bytes", "read_calls", "files", "io_phase_s"):
        row(m, r[m], e[m], rel(r[m], e[m]), "relative")
    row("read_size_ks", stats(r["sizes"]).get("median"), stats(e["sizes"]).get("median"),
        ks(r["sizes"], e["sizes"]), "KS")
    row("gap_ks", stats(r["gaps_s"]).get("median"), stats(e["gaps_s"]).get("median"),
        ks(r["gaps_s"], e["gaps_s"]), "KS")
    gr, ge = stats(r["gaps_s"]).get("median", 0.0), stats(e["gaps_s"]).get("median", 0.0)
    row("gap_median_s", gr, ge, rel(gr, ge), "relative")
    row("gap_ks_tol1ms", None, None, ks(r["gaps_s"], e["gaps_s"], tol=1e-3), "KS")
    row("bursts", r["bursts"], e["bursts"], rel(r["bursts"], e["bursts"]), "relative")
    rs, es = stats(r["burst_io_s"]), stats(e["burst_io_s"])
    row("step_io_s_mean", rs.get("mean", 0.0), es.get("mean", 0.0),
        rel(rs.get("mean", 0.0), es.get("mean", 0.0)), "relative")
    row("step_io_ks", None, None, ks(r["burst_io_s"], e["burst_io_s"]), "KS")
    row("io_busy_s", r["busy_s"], e["busy_s"], rel(r["busy_s"], e["busy_s"]), "relative")
    verdict = all(x["pass"] for x in rows if x["pass"] is not None)

    def fmt(v):
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.6g}"
        return str(v)

    print(f"real:     {len(real_side.files)} trace files, data {args.real_data}: "
          f"{len(real_reads)} data reads")
    print(f"emulated: {len(emu_side.files)} trace files, data {args.emulated_data}: "
          f"{len(emu_reads)} data reads ({emu_side.compute_events} compute events)")
    print(f"bursts split at pauses over {args.burst_gap_ms} ms; written (excluded) files: "
          f"real {len(real_written)}, emulated {len(emu_written)}\n")
    print(f"{'metric':<16} {'real':>14} {'emulated':>14} {'error':>10}  {'bound':>7}  verdict")
    for x in rows:
        err = x["error"]
        if x["error_kind"] == "relative":
            es_ = "inf" if err is not None and not np.isfinite(err) else f"{100 * err:+.1f}%"
            bs = f"{100 * x['bound']:.0f}%" if x["bound"] else ""
        else:
            es_ = f"{err:.3f}"
            bs = f"{x['bound']:.2f}" if x["bound"] else ""
        v = "" if x["pass"] is None else ("pass" if x["pass"] else "FAIL")
        print(f"{x['metric']:<16} {fmt(x['real']):>14} {fmt(x['emulated']):>14} {es_:>10}  "
              f"{bs:>7}  {v}")
    print(f"\n(read_size_ks/gap_ks rows show the medians: bytes, seconds)")
    failed = [x["metric"] for x in rows if x["pass"] is False]
    print("verdict: " + ("PASS" if verdict else "FAIL (" + ", ".join(failed) + ")"))

    if args.json:
        out = {"real": {k: v for k, v in r.items() if k not in ("sizes", "gaps_s", "burst_io_s")},
               "emulated": {k: v for k, v in e.items()
                            if k not in ("sizes", "gaps_s", "burst_io_s")},
               "distributions": {
                   "read_size": {"real": stats(r["sizes"]), "emulated": stats(e["sizes"])},
                   "gap_s": {"real": stats(r["gaps_s"]), "emulated": stats(e["gaps_s"])},
                   "step_io_s": {"real": rs, "emulated": es}},
               "emulated_compute_events": emu_side.compute_events,
               "rows": rows, "pass": verdict, "failed": failed,
               "burst_gap_ms": args.burst_gap_ms}
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=float)
    return 0 if verdict else 1


if __name__ == "__main__":
    sys.exit(main())
