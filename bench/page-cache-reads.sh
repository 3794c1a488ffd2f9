#!/usr/bin/env bash
# Reads served by the page cache: what dlio's client costs when the storage costs nothing.
# 48 npy files of 4 MiB (192 MiB, cached after generation) are read by one dlio reader thread
# over 6 epochs with no compute, and by fio (psync, 4 MiB blocks, buffered, the page cache
# kept) over the same files, alternately, REPS times (default 5). The kernel's copy into the
# reader's memory is the whole cost here, so the two should be close. fio runs twice: with
# page-aligned buffers (--iomem_align=4096, the reference) and with its default malloc'd
# buffers, which sit a few bytes past a cache line, where the kernel's copy is about twice as
# slow on this VM; dlio's buffers start on 64-byte boundaries since 0b42454 (before, they sat
# 16 bytes past a page). BEFORE=/path/to/an/older/dlio adds that build's figure.
#
#   bash bench/page-cache-reads.sh [DIR]      (default DIR /work/bench-tmp)
#   REPS=7 BEFORE=/tmp/dlio-old bash bench/page-cache-reads.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v fio >/dev/null || { apt-get install -y -qq fio >/dev/null; }
dir=${1:-/work/bench-tmp}/page-cache-reads
reps=${REPS:-5}
cargo build --release --locked -q -p dlio
dlio=target/release/dlio
mkdir -p "$dir"
args=(workload=default "++workload.dataset.data_folder=$dir/data" ++workload.dataset.format=npy
  ++workload.dataset.num_files_train=48 ++workload.dataset.num_samples_per_file=1
  ++workload.dataset.record_length_bytes=4194304 ++workload.dataset.record_length_bytes_stdev=0
  ++workload.dataset.num_files_eval=0 ++workload.dataset.num_subfolders_train=0
  ++workload.workflow.evaluation=False
  ++workload.reader.batch_size=4 ++workload.reader.read_threads=1
  ++workload.train.computation_time=0 ++workload.train.epochs=6
  "++workload.output.folder=$dir/out")
[ -d "$dir/data/train" ] || "$dlio" run "${args[@]}" ++workload.workflow.generate_data=True \
  ++workload.workflow.train=False >/dev/null 2>&1
files=$(ls "$dir"/data/train/*.npy | paste -sd:)
# Warm the page cache once.
cat "$dir"/data/train/*.npy >/dev/null

dlio_mib() { # BINARY: the bytes it counted over the epochs' summed durations, MiB/s
  "$1" run "${args[@]}" >/dev/null 2>&1
  python3 -c 'import json,sys; d=sys.argv[1]
s=json.load(open(d+"/summary.json")); e=json.load(open(d+"/per_epoch_stats.json"))
from datetime import datetime as t
secs=sum((t.fromisoformat(v["end"])-t.fromisoformat(v["start"])).total_seconds() for v in e.values())
print("%.1f" % (s["dlio_rs"]["bytes_read"] / secs / 2**20))' "$dir/out"
}
fio_mib() { # [fio options]
  fio --name=x --filename="$files" --rw=read --bs=4M --ioengine=psync --direct=0 \
    --invalidate=0 --loops=6 "$@" --output-format=json 2>/dev/null |
    python3 -c 'import json,sys; print("%.1f" % (json.load(sys.stdin)["jobs"][0]["read"]["bw_bytes"]/2**20))'
}
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

ours=() theirs=() unaligned=() before=()
for _ in $(seq "$reps"); do
  ours+=("$(dlio_mib "$dlio")")
  theirs+=("$(fio_mib --iomem_align=4096)")
  unaligned+=("$(fio_mib)")
  [ -z "${BEFORE:-}" ] || before+=("$(dlio_mib "$BEFORE")")
done
sorted() { printf '%s\n' "$@" | sort -g | paste -sd' '; }
d=$(median "${ours[@]}") f=$(median "${theirs[@]}")
echo "== page-cache reads, 48 x 4 MiB npy, 6 epochs, one reader: $(git rev-parse --short HEAD), $(date -u '+%F %H:%M') UTC"
echo "dlio (1 reader thread, no compute):     median $d MiB/s (runs: $(sorted "${ours[@]}"))"
echo "fio (psync, bs 4M, page-aligned):      median $f MiB/s (runs: $(sorted "${theirs[@]}"))"
echo "fio (psync, bs 4M, default buffers):   median $(median "${unaligned[@]}") MiB/s (runs: $(sorted "${unaligned[@]}"))"
[ -z "${BEFORE:-}" ] || echo "dlio $BEFORE:  median $(median "${before[@]}") MiB/s (runs: $(sorted "${before[@]}"))"
python3 -c "print('dlio / fio (page-aligned): %.2f' % ($d / $f))"
