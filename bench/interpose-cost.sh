#!/usr/bin/env bash
# What `dlio trace`'s interposer adds to a program's calls: two Python loops, each run
# without the tracer, with it, and (when BASE_LIB names another build of
# libdlio_interpose.so, such as an older commit's) with that one, alternating, REPS times;
# prints the median wall time of each and the cost per traced call.
#   small: open, read and close 10,000 cached files of 4 KiB (the reads land in buffers too
#          small to hold a whole page: no residency check);
#   large: 4,000 reads of 256 KiB from a cached file into one bytearray (each read's
#          destination is 64 whole pages, whose residency the interposer asks `mincore`).
# Usage: bash bench/interpose-cost.sh     # REPS=9 WORK=/tmp/dlio-bench-interpose BASE_LIB=
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPS=${REPS:-9}
WORK=${WORK:-/tmp/dlio-bench-interpose}
(cd "$REPO" && cargo build --release --locked -q -p dlio -p dlio-interpose)
DLIO=${CARGO_TARGET_DIR:-$REPO/target}/release/dlio
mkdir -p "$WORK/small"
cat > "$WORK/loops.py" <<'PY'
import os, sys, time
kind, folder = sys.argv[1], sys.argv[2]
start = time.perf_counter()
if kind == "small":
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as f:
            f.read()
else:
    buf = bytearray(256 << 10)
    with open(os.path.join(folder, "large.bin"), "rb", buffering=0) as f:
        for i in range(4000):
            f.seek((i % 16) << 18)
            f.readinto(buf)
print(f"{time.perf_counter() - start:.6f}")
PY
if [ ! -f "$WORK/small/f09999" ]; then
  python3 -c "
import os
for i in range(10000):
    open(os.path.join('$WORK/small', f'f{i:05d}'), 'wb').write(os.urandom(4096))"
fi
[ -f "$WORK/large.bin" ] || head -c $((4 << 20)) /dev/urandom > "$WORK/large.bin"
cat "$WORK"/small/* "$WORK/large.bin" > /dev/null
echo "== dlio $(cd "$REPO" && git rev-parse --short HEAD), $(date -u '+%F %H:%M') UTC; loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
for kind in small large; do
  folder=$WORK; [ "$kind" = small ] && folder=$WORK/small
  : > "$WORK/$kind-plain"; : > "$WORK/$kind-traced"; : > "$WORK/$kind-base"; : > "$WORK/$kind-calls"
  for _ in $(seq 1 "$REPS"); do
    python3 "$WORK/loops.py" "$kind" "$folder" >> "$WORK/$kind-plain"
    rm -rf "$WORK/traces"
    "$DLIO" trace --out "$WORK/traces" -- python3 "$WORK/loops.py" "$kind" "$folder" 2>/dev/null >> "$WORK/$kind-traced"
    python3 -c "import json; print(json.load(open('$WORK/traces/dlio-trace.json'))['events'])" >> "$WORK/$kind-calls"
    if [ -n "${BASE_LIB:-}" ]; then
      rm -rf "$WORK/traces"
      DLIO_INTERPOSE_LIB=$BASE_LIB "$DLIO" trace --out "$WORK/traces" -- python3 "$WORK/loops.py" "$kind" "$folder" 2>/dev/null >> "$WORK/$kind-base"
    fi
  done
  python3 - "$kind" "$WORK/$kind-plain" "$WORK/$kind-traced" "$WORK/$kind-base" "$WORK/$kind-calls" <<'PY'
import statistics as st, sys
kind, plain, traced, base, calls = sys.argv[1:]
read = lambda p: [float(x) for x in open(p) if x.strip()]
p, t, b, c = read(plain), read(traced), read(base), st.median(read(calls))
line = (f"{kind}: {c:.0f} events; median s without the tracer {st.median(p):.4f} "
        f"({min(p):.4f}-{max(p):.4f}), with it {st.median(t):.4f} ({min(t):.4f}-{max(t):.4f}): "
        f"{1e6 * (st.median(t) - st.median(p)) / c:.2f} us per traced call")
if b:
    line += (f"; with BASE_LIB {st.median(b):.4f} ({min(b):.4f}-{max(b):.4f}): "
             f"{1e6 * (st.median(b) - st.median(p)) / c:.2f} us per call")
print(line)
PY
done
