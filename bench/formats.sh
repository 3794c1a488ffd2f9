#!/usr/bin/env bash
# Every data format, dlio and Python DLIO 2.0.0 side by side with the same overrides:
# generation rate (files/s and MB/s of the files written, wall time of the whole command) and
# page-cache read rate (DLIO's train samples/s from summary.json: batch 2, read_threads 1,
# computation_time 0, 2 epochs, files in the page cache). Prints a markdown table with ratios.
#
#   bash bench/formats.sh                         # every format, both tools
#   FORMATS="npz hdf5" bash bench/formats.sh      # some formats
#   SKIP_REFERENCE=1 bash bench/formats.sh        # dlio only
#
# Knobs: NFILES=16 SPF=2 RECLEN=65536 WORK=/tmp/dlio-bench-formats SKIP_BUILD=1 (use the
# binary already in $CARGO_TARGET_DIR or target/)
# The Python side runs the venv of ../shared/bench/reference-dlio.sh (create it with
# `bash ../shared/bench/reference-dlio.sh setup`). Python DLIO has no parquet: that row is ours
# only. tfrecord uses the tensorflow loader (Python DLIO refuses pytorch + tfrecord), every
# other format the pytorch loader.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
VENV=${DLIO_VENV:-/opt/dlio-reference/venv}
NFILES=${NFILES:-16}; SPF=${SPF:-2}; RECLEN=${RECLEN:-65536}
WORK=${WORK:-/tmp/dlio-bench-formats}
FORMATS=${FORMATS:-npz npy hdf5 csv jpeg png tfrecord indexed_binary mmap_indexed_binary parquet}
mkdir -p "$WORK"

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  echo "== building dlio (release, with HDF5)"
  (cd "$REPO" && cargo build --release --quiet -p dlio --features dlio-format/hdf5)
fi
DLIO=${CARGO_TARGET_DIR:-$REPO/target}/release/dlio

# The same overrides for both tools (DLIO 2.0.0 reads the legacy record_length names; dlio
# accepts them too).
args() {  # format loader data_folder out_folder
  local fw=$2
  echo workload=unet3d_a100 ++workload.framework=$fw ++workload.reader.data_loader=$fw \
    ++workload.workflow.checkpoint=False ++workload.workflow.evaluation=False \
    ++workload.dataset.format=$1 ++workload.dataset.num_files_train=$NFILES \
    ++workload.dataset.num_files_eval=0 ++workload.dataset.num_subfolders_train=0 \
    ++workload.dataset.num_samples_per_file=$SPF ++workload.dataset.record_length=$RECLEN \
    ++workload.dataset.record_length_stdev=0 ++workload.dataset.record_length_resize=0 \
    ++workload.dataset.data_folder=$3 ++workload.reader.batch_size=2 \
    ++workload.reader.read_threads=1 ++workload.train.epochs=2 ++workload.train.computation_time=0 \
    ++workload.output.folder=$4 hydra.run.dir=$4
}

now() { date +%s.%N; }
sps() { python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['metric']['train_throughput_mean_samples_per_second'],1))" "$1"; }
mb() { du -sb "$1" | awk '{printf "%.1f", $1/1048576}'; }

run_tool() {  # tool format -> prints "gen_s MB read_sps"
  local tool=$1 fmt=$2 fw=pytorch
  [ "$fmt" = tfrecord ] && fw=tensorflow
  local d="$WORK/$tool/$fmt"; rm -rf "$d"; mkdir -p "$d"
  local cmd
  # Python DLIO's tfrecord generator runs `tfrecord2idx` from the venv's bin folder.
  if [ "$tool" = dlio ]; then cmd=("$DLIO" run); else cmd=(env PATH="$VENV/bin:$PATH" "$VENV/bin/dlio_benchmark"); fi
  local s e
  s=$(now)
  # shellcheck disable=SC2046
  "${cmd[@]}" $(args "$fmt" $fw "$d/data" "$d/gen") ++workload.workflow.generate_data=True \
    ++workload.workflow.train=False > "$d/gen.log" 2>&1 || { echo "fail fail fail"; return; }
  e=$(now)
  local gen; gen=$(echo "$e - $s" | bc)
  local size; size=$(mb "$d/data/train")
  cat "$d"/data/train/* > /dev/null 2>&1 || true
  # shellcheck disable=SC2046
  "${cmd[@]}" $(args "$fmt" $fw "$d/data" "$d/train") ++workload.workflow.generate_data=False \
    ++workload.workflow.train=True > "$d/train.log" 2>&1 || { echo "$gen $size fail"; return; }
  echo "$gen $size $(sps "$d/train/summary.json")"
}

echo "== $NFILES files x $SPF samples x $RECLEN B per format; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "| format | dlio gen files/s | dlio gen MB/s | Python gen files/s | Python gen MB/s | gen ratio | dlio read samples/s | Python read samples/s | read ratio |\n"
printf "|---|---|---|---|---|---|---|---|---|\n"
export DFTRACER_ENABLE=0 TF_CPP_MIN_LOG_LEVEL=2
for fmt in $FORMATS; do
  read -r og osz ors <<<"$(run_tool dlio "$fmt")"
  if [ "${SKIP_REFERENCE:-0}" = 1 ] || [ "$fmt" = parquet ]; then
    pg=-; psz=-; prs=-
  else
    read -r pg psz prs <<<"$(run_tool python "$fmt")"
  fi
  python3 - "$fmt" "$NFILES" "$og" "$osz" "$ors" "$pg" "$psz" "$prs" <<'EOF'
import sys
fmt, n, og, osz, ors, pg, psz, prs = sys.argv[1:]
n = int(n)
def num(x):
    try: return float(x)
    except ValueError: return None
og, osz, ors, pg, psz, prs = map(num, (og, osz, ors, pg, psz, prs))
def rate(files_or_mb, secs): return files_or_mb / secs if files_or_mb is not None and secs else None
f = lambda v: "-" if v is None else f"{v:,.1f}"
r = lambda a, b: "-" if a is None or b is None or b == 0 else f"{a / b:,.1f}x"
ogf, pgf = rate(n, og), rate(n, pg)
print(f"| {fmt} | {f(ogf)} | {f(rate(osz, og))} | {f(pgf)} | {f(rate(psz, pg))} | {r(ogf, pgf)} | {f(ors)} | {f(prs)} | {r(ors, prs)} |")
EOF
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg); logs under $WORK"
