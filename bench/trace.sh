#!/usr/bin/env bash
# Issue #7's benchmark, two parts:
# 1. Trace overhead: samples/s of `dlio run` with and without `--trace` on a small-record
#    workload (target: <= 3 % lower with the trace), alternating runs, medians; the time
#    spent writing the trace after the run is reported too, and the last trace is analysed
#    with `dlio analyze` (size, event count).
# 2. Analysis speed: `bench/analyze.sh` (events/s and peak memory on a 10^7-event trace);
#    skip it with ANALYZE=0.
#   bash bench/trace.sh     # NFILES=8192 RECLEN=4096 BATCH=32 THREADS=2 EPOCHS=8 REPS=31
# (Sets of 31 alternating runs of one build spread over about two points on a 2-core VM;
# fewer runs spread more.)
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NFILES=${NFILES:-8192}
RECLEN=${RECLEN:-4096}
BATCH=${BATCH:-32}
THREADS=${THREADS:-2}
EPOCHS=${EPOCHS:-8}
REPS=${REPS:-31}
WORK=${WORK:-/tmp/dlio-bench-trace}
(cd "$REPO" && cargo build --release --locked -q --bin dlio)
DLIO=${CARGO_TARGET_DIR:-$REPO/target}/release/dlio
mkdir -p "$WORK"
data=$WORK/data-$NFILES-$RECLEN
C=(workload=unet3d_a100 ++workload.workflow.checkpoint=False ++workload.dataset.format=npy
   ++workload.dataset.num_files_train="$NFILES" ++workload.dataset.num_samples_per_file=1
   ++workload.dataset.record_length_bytes="$RECLEN" ++workload.dataset.record_length_bytes_stdev=0
   ++workload.dataset.record_length_bytes_resize=0 ++workload.dataset.data_folder="$data"
   ++workload.reader.batch_size="$BATCH" ++workload.reader.read_threads="$THREADS"
   ++workload.train.epochs="$EPOCHS" ++workload.train.computation_time=0)
if [ ! -d "$data/train" ]; then
  "$DLIO" generate "${C[@]}" ++workload.output.folder="$WORK/out/gen" > "$WORK/gen.log" 2>&1
fi
cat "$data"/train/* > /dev/null
echo "== $NFILES x $RECLEN B npy, batch $BATCH, read_threads $THREADS, $EPOCHS epochs, no compute; loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
sps() { python3 -c "import json;print(json.load(open('$1/summary.json'))['metric']['train_throughput_mean_samples_per_second'])"; }
: > "$WORK/plain.txt"; : > "$WORK/traced.txt"
for r in $(seq 1 "$REPS"); do
  o=$WORK/out/plain$r; rm -rf "$o"
  "$DLIO" run "${C[@]}" ++workload.output.folder="$o" > "$o.log" 2>&1
  sps "$o" >> "$WORK/plain.txt"
  o=$WORK/out/traced$r; rm -rf "$o"
  "$DLIO" run --trace "${C[@]}" ++workload.output.folder="$o" > "$o.log" 2>&1
  sps "$o" >> "$WORK/traced.txt"
  written=$(grep -o -m1 'written in [0-9.]* s after the run' "$o/dlio.log" || echo "written: not in the log")
  # Only the last run's trace is analysed below; the others would fill the disk.
  if [ "$r" -lt "$REPS" ]; then rm -f "$o"/trace-*.pfw*; fi
  echo "run $r: without $(tail -1 "$WORK/plain.txt") samples/s, with --trace $(tail -1 "$WORK/traced.txt") samples/s (trace $written)"
done
python3 - "$WORK/plain.txt" "$WORK/traced.txt" <<'PY'
import statistics as st, sys
p = [float(x) for x in open(sys.argv[1])]; t = [float(x) for x in open(sys.argv[2])]
mp, mt = st.median(p), st.median(t)
print(f"median samples/s: without {mp:.1f}, with --trace {mt:.1f}: overhead {100*(mp-mt)/mp:.2f}% (target <= 3%)")
losses = sorted(1 - b / a for a, b in zip(p, t)); q = len(losses) // 4
spread = "quartiles" if q > 0 else "range"
print(f"mean samples/s: without {st.mean(p):.1f}, with --trace {st.mean(t):.1f}: overhead {100*(1-st.mean(t)/st.mean(p)):.2f}%; "
      f"per-pair losses: median {100*st.median(losses):.1f}%, {spread} {100*losses[q]:.1f}..{100*losses[-q-1]:.1f}%")
PY
# The time one sample's read takes (open, reads, close: what tracing adds to), median over
# runs and epochs of each epoch's p50: less sensitive to other load than samples/s.
python3 - "$WORK/out" "$REPS" <<'PY'
import json, statistics as st, sys
def p50(kind):
    v = []
    for r in range(1, int(sys.argv[2]) + 1):
        d = json.load(open(f"{sys.argv[1]}/{kind}{r}/summary.json"))
        for rank in d["dlio_rs"]["per_rank"]:
            v += [e["train_latency"]["sample_read"]["p50_us"] for e in rank["epochs"]]
    return st.median(v)
a, b = p50("plain"), p50("traced")
print(f"sample read p50: without {a:.3f} us, with --trace {b:.3f} us: +{1000*(b-a):.0f} ns per sample ({100*(b-a)/a:.1f}%)")
PY
ls -l "$WORK/out/traced$REPS"/trace-*.pfw*
/usr/bin/time -f "dlio analyze: wall=%es maxrss=%MKB" "$DLIO" analyze "$WORK/out/traced$REPS" | head -12
if [ "${ANALYZE:-1}" != 0 ]; then
  bash "$REPO/bench/analyze.sh"
fi
