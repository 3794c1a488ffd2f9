#!/usr/bin/env bash
# fio and dlio's engines on the same file: sequential and random reads of 1 MiB and 128 KiB
# blocks; O_DIRECT with psync (fio) / direct (dlio) at depth 1, io_uring with O_DIRECT at
# depths 1, 8 and 32, and buffered psync / posix after dropping the file's page cache.
# Each cell runs fio and dlio alternately REPS times (default 3), so both see the same
# conditions, and reports the medians. Prints a Markdown table (MiB/s, and dlio as a
# percentage of fio) for bench/RESULTS.md. dlio reads every cell as one read_stream over
# DEPTH blocks of memory (engine_bench's default): like fio, its queue never drains before
# the last block.
#
#   bash bench/vs-fio.sh [DIR] [SIZE_MIB]     (DIR must not be tmpfs; default: a temp dir)
#   REPS=5 bash bench/vs-fio.sh /work/bench-tmp 1024
#
# MODE=explain measures instead what separates dlio's io_uring figures from fio's: the
# buffer memory (dlio at depth 1 cycling through 1, 64 and 256 blocks of memory, with
# engine_bench's batch=N), and the queue draining at the end of every read_batch (dlio with
# batch=DEPTH; fio with iodepth_batch_submit and iodepth_batch_complete_min = DEPTH drains
# the same way) at depths 8 and 32, beside dlio's stream, which does not drain.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v fio >/dev/null || { apt-get install -y -qq fio >/dev/null; }
dir=${1:-$(mktemp -d)}
size_mib=${2:-1024}
reps=${REPS:-3}
file=$dir/engines-bench.bin
cargo build --release -q -p dlio-storage --example engine_bench
bench=${CARGO_TARGET_DIR:-target}/release/examples/engine_bench
[ -f "$file" ] || head -c $((size_mib << 20)) /dev/urandom > "$file"
sync

fio_mib() { # rw bs engine depth direct [fio options]
  fio --name=x --filename="$file" --rw="$1" --bs="$2" --ioengine="$3" --iodepth="$4" \
      --direct="$5" --invalidate=1 --size=${size_mib}M --output-format=json "${@:6}" 2>/dev/null |
    python3 -c 'import json,sys; print("%.1f" % (json.load(sys.stdin)["jobs"][0]["read"]["bw_bytes"]/2**20))'
}
ours_mib() { # pattern bs engine depth [odirect] [batch=N]
  "$bench" "$file" "$2" "$1" "$3" "$4" "${@:5}" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["bw_mib_s"])'
}
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

if [ "${MODE:-table}" = explain ]; then
  echo "io_uring, O_DIRECT, $size_mib MiB file; medians of $reps alternating runs [min-max]; load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "Buffer memory at depth 1 (random 128 KiB reads; only the memory the batches cycle through differs):"
  echo
  echo "| dlio blocks per batch | buffer | MiB/s |"
  echo "|---:|---:|---:|"
  declare -A mem=()
  for _ in $(seq "$reps"); do
    for n in 1 64 256; do mem[$n]+="$(ours_mib rand 131072 io_uring 1 odirect batch=$n) "; done
  done
  for n in 1 64 256; do
    v=(${mem[$n]})
    echo "| $n | $((n * 128)) KiB | $(median "${v[@]}") [$(printf '%s\n' "${v[@]}" | sort -g | sed -n '1p;$p' | paste -sd-)] |"
  done
  echo
  echo "Queue drained after every DEPTH requests (dlio's read_batch returns when its requests are done; its read_stream does not):"
  echo
  echo "| pattern | block | depth | fio | fio, drained every DEPTH | dlio read_batch of DEPTH | dlio batch / fio drained | dlio read_stream |"
  echo "|---|---|---|---:|---:|---:|---:|---:|"
  for pattern in seq rand; do
    rw=read; [ $pattern = rand ] && rw=randread
    for bs in 1048576 131072; do
      label=$([ $bs = 1048576 ] && echo 1MiB || echo 128KiB)
      for depth in 8 32; do
        a=(); b=(); c=(); d=()
        for _ in $(seq "$reps"); do
          a+=("$(fio_mib $rw $bs io_uring $depth 1)")
          b+=("$(fio_mib $rw $bs io_uring $depth 1 --iodepth_batch_submit=$depth --iodepth_batch_complete_min=$depth)")
          c+=("$(ours_mib $pattern $bs io_uring $depth odirect batch=$depth)")
          d+=("$(ours_mib $pattern $bs io_uring $depth odirect)")
        done
        fa=$(median "${a[@]}"); fb=$(median "${b[@]}"); oc=$(median "${c[@]}"); od=$(median "${d[@]}")
        echo "| $pattern | $label | $depth | $fa | $fb ($(python3 -c "print('%.0f%%' % (100*$fb/$fa))") of fio) | $oc ($(python3 -c "print('%.0f%%' % (100*$oc/$fa))") of fio) | $(python3 -c "print('%.0f%%' % (100*$oc/$fb))") | $od ($(python3 -c "print('%.0f%%' % (100*$od/$fa))") of fio) |"
      done
    done
  done
  echo
  echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
  [ -n "${1:-}" ] || rm -rf "$dir"
  exit 0
fi

echo "file: $size_mib MiB on $(df -T "$dir" | awk 'NR==2 {print $2}'); medians of $reps alternating runs; load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| pattern | block | mode | depth | fio MiB/s | dlio MiB/s | dlio/fio | fio runs | dlio runs |"
echo "|---|---|---|---|---:|---:|---:|---|---|"
for pattern in seq rand; do
  rw=read; [ $pattern = rand ] && rw=randread
  for bs in 1048576 131072; do
    label=$([ $bs = 1048576 ] && echo 1MiB || echo 128KiB)
    while read -r mode fio_engine depth direct ours_engine odirect; do
      fs=(); os=()
      for _ in $(seq "$reps"); do
        fs+=("$(fio_mib $rw $bs $fio_engine $depth $direct)")
        os+=("$(ours_mib $pattern $bs $ours_engine $depth $odirect)")
      done
      f=$(median "${fs[@]}"); o=$(median "${os[@]}")
      pct=$(python3 -c "print('%.0f%%' % (100*$o/$f))")
      echo "| $pattern | $label | $mode | $depth | $f | $o | $pct | ${fs[*]} | ${os[*]} |"
    done <<'CELLS'
O_DIRECT_psync psync 1 1 direct
O_DIRECT_io_uring io_uring 1 1 io_uring odirect
O_DIRECT_io_uring io_uring 8 1 io_uring odirect
O_DIRECT_io_uring io_uring 32 1 io_uring odirect
buffered_psync psync 1 0 posix
CELLS
  done
done
echo
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
[ -n "${1:-}" ] || rm -rf "$dir"
