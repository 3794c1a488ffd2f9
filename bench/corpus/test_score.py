#!/usr/bin/env python3
"""Tests of score.py on synthetic traces (both layouts: `dlio trace`'s fname events and
`dlio run --trace`'s gzipped fhash events). Run: python3 test_score.py (or pytest)."""
import gzip
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import score  # noqa: E402


def real_trace(path, data, steps, per_step, size, gap_us, t0=1e6):
    ev, t, i = [], t0, 0
    for s in range(steps):
        for k in range(per_step):
            f = f"{data}/f{(s * per_step + k) % 7}.bin"
            ev.append({"id": i, "name": "read", "cat": "POSIX", "pid": 1, "tid": 1, "ts": t,
                       "dur": 10.0, "ph": "X", "args": {"fname": f, "ret": size}})
            i += 1
            t += 20.0
        t += gap_us
    # a checkpoint written and read back: excluded
    ev.append({"id": i, "name": "write", "cat": "POSIX", "pid": 1, "tid": 1, "ts": t,
               "dur": 5.0, "ph": "X", "args": {"fname": f"{data}/ckpt.pt", "ret": 999}})
    ev.append({"id": i + 1, "name": "read", "cat": "POSIX", "pid": 1, "tid": 1, "ts": t + 9,
               "dur": 5.0, "ph": "X", "args": {"fname": f"{data}/ckpt.pt", "ret": 999}})
    with open(path, "w") as f:
        f.write("[\n" + "\n".join(json.dumps(e) for e in ev) + "\n]\n")


def emu_trace(path, data, steps, per_step, size, gap_us, t0=5e6):
    lines = []
    for k in range(7):
        lines.append({"name": "FH", "cat": "dftracer", "ph": "M", "pid": 2, "tid": 2,
                      "args": {"name": f"{data}/train/f{k}.npz", "value": f"h{k}"}})
    t, i = t0, 0
    for s in range(steps):
        lines.append({"id": i, "name": "compute", "cat": "compute", "pid": 2, "tid": 2,
                      "ts": int(t), "dur": 5, "ph": "X", "args": {"step": s}})
        for k in range(per_step):
            lines.append({"id": i, "name": "pread", "cat": "POSIX", "pid": 2, "tid": 3,
                          "ts": int(t), "dur": 10, "ph": "X",
                          "args": {"fhash": f"h{(s * per_step + k) % 7}", "ret": size,
                                   "count": size, "offset": 0}})
            t += 20
        t += gap_us
    with gzip.open(path, "wt") as f:
        f.write("\n".join(json.dumps(e) for e in lines) + "\n")


def run(real_kw, emu_kw):
    d = tempfile.mkdtemp()
    rd, ed = os.path.join(d, "data"), os.path.join(d, "emu")
    os.makedirs(os.path.join(d, "rt"))
    os.makedirs(os.path.join(d, "run"))
    real_trace(os.path.join(d, "rt", "trace-1.pfw"), rd, **real_kw)
    emu_trace(os.path.join(d, "run", "trace-0-of-1.pfw.gz"), ed, **emu_kw)
    out = os.path.join(d, "s.json")
    rc = subprocess.call([sys.executable, os.path.join(HERE, "score.py"), os.path.join(d, "rt"),
                          os.path.join(d, "run"), "--real-data", rd, "--emulated-data", ed,
                          "--json", out], stdout=subprocess.DEVNULL)
    return rc, json.load(open(out))


def test_identical_workloads_pass():
    kw = dict(steps=20, per_step=4, size=4096, gap_us=20_000)
    rc, s = run(kw, kw)
    rows = {r["metric"]: r for r in s["rows"]}
    assert rc == 0 and s["pass"], s["failed"]
    assert s["real"]["bytes"] == 20 * 4 * 4096  # the checkpoint is excluded
    assert s["real"]["read_calls"] == 80 and s["real"]["files"] == 7
    assert s["real"]["bursts"] == 20 and s["emulated"]["bursts"] == 20
    assert rows["read_size_ks"]["error"] == 0.0 and rows["gap_ks"]["error"] == 0.0
    assert s["emulated_compute_events"] == 20


def test_differences_fail_the_right_bounds():
    rc, s = run(dict(steps=20, per_step=4, size=4096, gap_us=20_000),
                dict(steps=20, per_step=8, size=2048, gap_us=40_000))
    assert rc == 1
    assert set(s["failed"]) == {"read_calls", "io_phase_s", "read_size_ks", "gap_ks"}, s["failed"]


def test_ks():
    rng = np.random.default_rng(0)
    a = rng.normal(0, 1, 4000)
    assert score.ks(a, a) == 0.0
    assert abs(score.ks(a, rng.normal(0, 1, 4000))) < 0.05
    assert abs(score.ks(a, rng.normal(0.5, 1, 4000)) - 0.197) < 0.03
    assert score.ks([1, 2], []) == 1.0 and score.ks([], []) == 0.0
    assert score.ks([10.0] * 5, [10.0004] * 5) == 1.0
    assert score.ks([10.0] * 5, [10.0004] * 5, tol=0.001) == 0.0


if __name__ == "__main__":
    for name, fn in list(globals().items()):
        if name.startswith("test_"):
            fn()
            print("ok", name)
