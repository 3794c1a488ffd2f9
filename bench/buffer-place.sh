#!/usr/bin/env bash
# How the place of a read's buffer past a page boundary sets the pace of a read from the page
# cache on this machine: a Python loop reads one cached 8 MiB file in 256 KiB `readinto`s into
# a memoryview of an anonymous map at each offset, REPS passes, and prints the median
# microseconds a read per offset (the figures behind `reader.buffer_page_offset`).
# Usage: bash bench/buffer-place.sh     # REPS=3 WORK=/tmp/dlio-bench-place
set -euo pipefail
REPS=${REPS:-3}
WORK=${WORK:-/tmp/dlio-bench-place}
mkdir -p "$WORK"
[ -f "$WORK/file.bin" ] || head -c $((8 << 20)) /dev/urandom > "$WORK/file.bin"
cat "$WORK/file.bin" > /dev/null
echo "== $(date -u '+%F %H:%M') UTC; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$WORK/file.bin" "$REPS" <<'PY'
import mmap, statistics, sys, time
path, reps = sys.argv[1], int(sys.argv[2])
window = mmap.mmap(-1, (256 << 10) + 8192)
view = memoryview(window)
offsets = [0, 4, 8, 12, 16, 20, 24, 28, 32, 48, 64, 1024, 2048, 4032, 4080]
for offset in offsets:
    buf, times = view[offset:offset + (256 << 10)], []
    for _ in range(reps):
        with open(path, "rb", buffering=0) as f:
            while True:
                start = time.perf_counter_ns()
                n = f.readinto(buf)
                times.append(time.perf_counter_ns() - start)
                if n == 0:
                    break
    print(f"buffer {offset:4d} bytes past a page: 256 KiB read in {statistics.median(times) / 1000:6.1f} us (median of {len(times)})")
PY
