#!/usr/bin/env bash
# fio and dlio's engines on the same file: sequential and random reads of 1 MiB and 128 KiB
# blocks; O_DIRECT with psync (fio) / direct (dlio) at depth 1, io_uring with O_DIRECT at
# depths 1, 8 and 32, and buffered psync / posix after dropping the file's page cache.
# Prints a Markdown table (MiB/s, and dlio as a percentage of fio) for bench/RESULTS.md.
#
#   bash bench/vs-fio.sh [DIR] [SIZE_MIB]     (DIR must not be tmpfs; default: a temp dir)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v fio >/dev/null || { apt-get install -y -qq fio >/dev/null; }
dir=${1:-$(mktemp -d)}
size_mib=${2:-1024}
file=$dir/engines-bench.bin
cargo build --release -q -p dlio-storage --example engine_bench
bench=${CARGO_TARGET_DIR:-target}/release/examples/engine_bench
[ -f "$file" ] || head -c $((size_mib << 20)) /dev/urandom > "$file"
sync

fio_mib() { # rw bs engine depth direct
  fio --name=x --filename="$file" --rw="$1" --bs="$2" --ioengine="$3" --iodepth="$4" \
      --direct="$5" --invalidate=1 --size=${size_mib}M --output-format=json 2>/dev/null |
    python3 -c 'import json,sys; print("%.1f" % (json.load(sys.stdin)["jobs"][0]["read"]["bw_bytes"]/2**20))'
}
ours_mib() { # pattern bs engine depth [odirect]
  "$bench" "$file" "$2" "$1" "$3" "$4" ${5:-} |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["bw_mib_s"])'
}

echo "file: $size_mib MiB on $(df -T "$dir" | awk 'NR==2 {print $2}'); load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| pattern | block | mode | depth | fio MiB/s | dlio MiB/s | dlio/fio |"
echo "|---|---|---|---|---:|---:|---:|"
for pattern in seq rand; do
  rw=read; [ $pattern = rand ] && rw=randread
  for bs in 1048576 131072; do
    label=$([ $bs = 1048576 ] && echo 1MiB || echo 128KiB)
    while read -r mode fio_engine depth direct ours_engine odirect; do
      f=$(fio_mib $rw $bs $fio_engine $depth $direct)
      o=$(ours_mib $pattern $bs $ours_engine $depth $odirect)
      pct=$(python3 -c "print('%.0f%%' % (100*$o/$f))")
      echo "| $pattern | $label | $mode | $depth | $f | $o | $pct |"
    done <<'CELLS'
O_DIRECT_psync psync 1 1 direct
O_DIRECT_io_uring io_uring 1 1 io_uring odirect
O_DIRECT_io_uring io_uring 8 1 io_uring odirect
O_DIRECT_io_uring io_uring 32 1 io_uring odirect
buffered_psync psync 1 0 posix
CELLS
  done
done
[ -n "${1:-}" ] || rm -rf "$dir"
