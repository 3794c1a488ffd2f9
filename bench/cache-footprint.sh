#!/usr/bin/env bash
# How long a pread from the page cache takes when the CPU caches are warm (a tight loop, as
# dlio's readers make their requests) and when work between the reads walks through memory
# (as a Python loader's interpreter and decoding do): why a traced Python program's small
# reads take two to five times as long as the replay's on the same machine (`dlio fidelity`'s
# "I/O time per step" on page-cache reads; see bench/HISTORY.md).
#
# Usage: bash bench/cache-footprint.sh [FILE_MB] [REPEATS]
# Needs a C compiler (cc). The file is made in a temporary folder, read once to warm the page
# cache, then each (request size, bytes touched between reads) cell is 5,000 preads at random
# page-aligned offsets, timed around the call alone; the cell prints the median over REPEATS
# runs of the per-run median, and the spread of those.
set -euo pipefail
FILE_MB=${1:-64}
REPEATS=${2:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat >"$work/footprint.c" <<'EOF'
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* footprint FILE TOUCH_BYTES REQUEST_BYTES: prints the median pread time in microseconds.
   TOUCH_BYTES 0 spins 20 us between reads instead (work that touches no memory); -1 reads
   back to back, as a reader thread in a tight loop does. */
int main(int argc, char **argv) {
    if (argc != 4) return 2;
    int fd = open(argv[1], O_RDONLY);
    long touch = atol(argv[2]);
    long size = atol(argv[3]);
    if (fd < 0 || size <= 0) return 2;
    char *buf = malloc(size);
    volatile char *scratch = malloc(touch > 0 ? touch : 1);
    long file = lseek(fd, 0, SEEK_END);
    enum { N = 5000 };
    static long took[N];
    unsigned state = 1;
    for (int i = 0; i < N; i++) {
        state = state * 1103515245u + 12345u;
        long offset = ((long)(state >> 4) % (file - size)) & ~4095L;
        if (touch > 0) {
            for (long k = 0; k < touch; k += 64) scratch[k]++;
        } else if (touch == 0) {
            long start = now_ns();
            while (now_ns() - start < 20000) {}
        }
        long start = now_ns();
        if (pread(fd, buf, size, offset) != size) return 1;
        took[i] = now_ns() - start;
    }
    qsort(took, N, sizeof took[0], by_value);
    printf("%.2f\n", took[N / 2] / 1000.0);
    return 0;
}
EOF
cc -O2 -o "$work/footprint" "$work/footprint.c"
head -c $((FILE_MB << 20)) /dev/urandom >"$work/data.bin"
cat "$work/data.bin" >/dev/null

echo "pread from the page cache, median us per call (median of $REPEATS runs, min-max)"
printf '%-10s %-22s %-22s %-22s %-22s %-22s\n' request "back to back" "20 us spin" "1 MiB touched" "4 MiB touched" "16 MiB touched"
for size in 4096 16384 65536; do
  row=$(printf '%-10s' "$size")
  for touch in -1 0 1048576 4194304 16777216; do
    runs=()
    for _ in $(seq "$REPEATS"); do runs+=("$("$work/footprint" "$work/data.bin" "$touch" "$size")"); done
    cell=$(printf '%s\n' "${runs[@]}" | sort -g | awk '{v[NR]=$1} END {printf "%.2f (%.2f-%.2f)", v[int((NR+1)/2)], v[1], v[NR]}')
    row+=$(printf ' %-22s' "$cell")
  done
  echo "$row"
done
