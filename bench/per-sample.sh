#!/usr/bin/env bash
# System calls, CPU and bytes per sample of every format (issue #31): for each format, under
# MLPerf Storage's fork semantics (the default) and under `--semantics upstream` where the two
# differ (npz, npy, hdf5, jpeg, png decode upstream; tfrecord parses and checks CRCs), with a
# layout typical of the format (one sample per file for npz, npy, jpeg, png; many per file for
# the rest), batch 32, read_threads 1, computation_time 0, files in the page cache.
#
# Start-up is taken out by running 1 and 3 epochs and dividing the difference by the samples
# of the two extra epochs:
#   - opens, reads and all system calls: `strace -f -c` of one 1-epoch and one 3-epoch run
#     (opens = open + openat + openat2; reads = read + readv + pread64 + preadv + preadv2);
#   - CPU: user + system seconds from `/usr/bin/time`, median of REPEATS runs of each length
#     without strace, in microseconds;
#   - bytes: dlio_rs.bytes_read and dlio_rs.samples of the runs' summary.json.
# Prints a markdown table, one row per format and semantics; a case that fails prints its
# error in its row and the script goes on.
#
#   bash bench/per-sample.sh                        # every format
#   CASES="npz:mlperf hdf5:upstream" bash bench/per-sample.sh
#
# Knobs: DLIO=target/release/dlio SAMPLES=4096 RECLEN=65536 (bytes per sample) CSV_RECLEN=1024
# (csv is text, parsed) SPF_MANY=128 (samples per file of the many-sample formats)
# SPF_COLUMNAR=1024 (parquet, arrow) ROW_GROUP=128 REPEATS=3 WORK=/tmp/dlio-per-sample KEEP=0
# Needs strace and /usr/bin/time (Debian: apt-get install strace time).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
DLIO=${DLIO:-target/release/dlio}
case $DLIO in /*) ;; *) DLIO=$REPO/$DLIO ;; esac
SAMPLES=${SAMPLES:-4096}
RECLEN=${RECLEN:-65536}
CSV_RECLEN=${CSV_RECLEN:-1024}
SPF_MANY=${SPF_MANY:-128}
SPF_COLUMNAR=${SPF_COLUMNAR:-1024}
ROW_GROUP=${ROW_GROUP:-128}
REPEATS=${REPEATS:-3}
WORK=${WORK:-/tmp/dlio-per-sample}
KEEP=${KEEP:-0}
ALL_CASES="npz:mlperf npz:upstream npy:mlperf npy:upstream hdf5:mlperf hdf5:upstream csv:mlperf
  jpeg:mlperf jpeg:upstream png:mlperf png:upstream tfrecord:mlperf tfrecord:upstream
  indexed_binary:mlperf mmap_indexed_binary:mlperf parquet:mlperf parquet_columns:mlperf
  arrow:mlperf synthetic:mlperf"
CASES=${CASES:-$ALL_CASES}
[ -x "$DLIO" ] || { echo "no dlio binary at $DLIO (build it, or set DLIO=...)" >&2; exit 1; }
command -v strace >/dev/null || { echo "strace is needed (apt-get install strace)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "/usr/bin/time is needed (apt-get install time)" >&2; exit 1; }
mkdir -p "$WORK"

# The workload every case starts from (not a built-in name: those differ between semantics).
cat >"$WORK/per_sample.yaml" <<'YAML'
model:
  name: per_sample
framework: pytorch
workflow:
  generate_data: False
  train: True
  evaluation: False
  checkpoint: False
dataset:
  format: npz
  num_files_train: 1
  num_samples_per_file: 1
  record_length_bytes: 65536
reader:
  data_loader: pytorch
  batch_size: 32
  read_threads: 1
train:
  epochs: 1
  computation_time: 0
YAML

# A dlrm-like schema: a few columns, some never read, several row groups per file.
COLUMNS='[{name: label, dtype: float32, read: true}, {name: dense, dtype: float32, size: 13, read: true},
 {name: sparse, dtype: int32, size: 26, read: true}, {name: extra, dtype: float64, size: 16, read: false},
 {name: blob, dtype: uint8, size: 256, read: false}]'

spf_of() {
  case $1 in
    npz|npy|jpeg|png) echo 1 ;;
    parquet|parquet_columns|arrow) echo "$SPF_COLUMNAR" ;;
    *) echo "$SPF_MANY" ;;
  esac
}

# The overrides of a case (without epochs, semantics and output folder): one line per word.
overrides() {  # case
  local c=$1 fmt=$1 spf loader=pytorch reclen=$RECLEN
  spf=$(spf_of "$c")
  [ "$c" = parquet_columns ] && fmt=parquet
  [ "$c" = tfrecord ] && loader=tensorflow
  [ "$c" = csv ] && reclen=$CSV_RECLEN
  printf '%s\n' workload="$WORK/per_sample.yaml" ++workload.framework=$loader ++workload.reader.data_loader=$loader \
    ++workload.workflow.checkpoint=False ++workload.workflow.evaluation=False \
    ++workload.dataset.format=$fmt ++workload.dataset.num_files_train=$((SAMPLES / spf)) \
    ++workload.dataset.num_samples_per_file="$spf" ++workload.dataset.num_files_eval=0 \
    ++workload.dataset.num_subfolders_train=0 ++workload.dataset.record_length_bytes="$reclen" \
    ++workload.dataset.record_length_bytes_stdev=0 ++workload.dataset.record_length_bytes_resize=0 \
    ++workload.dataset.data_folder="$WORK/data/$c" ++workload.reader.batch_size=32 \
    ++workload.reader.read_threads=1 ++workload.train.computation_time=0
  case $c in
    parquet) echo ++workload.dataset.parquet.row_group_size="$ROW_GROUP" ;;
    parquet_columns) echo ++workload.dataset.parquet.row_group_size=$((ROW_GROUP * 2))
      echo "++workload.dataset.parquet.columns=$(tr -d '\n' <<<"$COLUMNS")" ;;
    arrow) echo ++workload.dataset.arrow.generation_batch_size="$ROW_GROUP" ;;
  esac
}

calls() {  # strace -c file, syscall-name regex -> number of calls
  awk -v re="$2" '$1 ~ /^[0-9.]+$/ && NF >= 5 && $NF ~ re { n += $4 } END { print n + 0 }' "$1"
}
summary() {  # summary.json key of dlio_rs
  python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['dlio_rs'][sys.argv[2]])" "$1" "$2"
}
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
err_of() { grep -m1 -iE '^error|panic|\[ERROR\]' "$1" | cut -c1-100 | tr '|' '/' || tail -1 "$1" | cut -c1-100; }

run_case() {  # case semantics -> one table row
  local c=$1 sem=$2 d=$WORK/runs/$1-$2 spf
  spf=$(spf_of "$c")
  local -a args
  mapfile -t args < <(overrides "$c")
  rm -rf "$d"; mkdir -p "$d"
  # dlio generate keeps the files of a complete data set of the same config (its manifest).
  "$DLIO" generate "${args[@]}" ++workload.output.folder="$d/gen" >"$d/gen.log" 2>&1 \
    || { echo "| $c | $sem | $spf | generate failed: $(err_of "$d/gen.log") | | | | |"; return; }
  find "$WORK/data/$c" -type f -exec cat {} + >/dev/null   # the data set in the page cache
  local e r
  for e in 1 3; do
    strace -f -c -o "$d/strace-$e.txt" "$DLIO" run --semantics "$sem" "${args[@]}" ++workload.train.epochs=$e \
      ++workload.output.folder="$d/strace-$e" >"$d/strace-$e.log" 2>&1 \
      || { echo "| $c | $sem | $spf | run failed: $(err_of "$d/strace-$e.log") | | | | |"; return; }
    for r in $(seq "$REPEATS"); do
      /usr/bin/time -f '%U %S' -o "$d/time-$e-$r.txt" "$DLIO" run --semantics "$sem" "${args[@]}" \
        ++workload.train.epochs=$e ++workload.output.folder="$d/out-$e" >"$d/out-$e.log" 2>&1 \
        || { echo "| $c | $sem | $spf | run failed: $(err_of "$d/out-$e.log") | | | | |"; return; }
    done
  done
  [ -f "$d/out-1/summary.json" ] && [ -f "$d/out-3/summary.json" ] \
    || { echo "| $c | $sem | $spf | no summary.json (see $d) | | | | |"; return; }
  local s1 s3 extra
  s1=$(summary "$d/out-1/summary.json" samples); s3=$(summary "$d/out-3/summary.json" samples)
  extra=$((s3 - s1))
  [ "$extra" -gt 0 ] || { echo "| $c | $sem | $spf | no samples read ($s1, $s3) | | | | |"; return; }
  per() { echo "($2 - $1) / $extra" | bc -l | xargs printf "%.${3:-3}f"; }
  local opens reads all cpu1 cpu3 cpu bytes
  opens=$(per "$(calls "$d/strace-1.txt" '^(open|openat|openat2)$')" "$(calls "$d/strace-3.txt" '^(open|openat|openat2)$')")
  reads=$(per "$(calls "$d/strace-1.txt" '^(read|readv|pread64|preadv|preadv2)$')" \
    "$(calls "$d/strace-3.txt" '^(read|readv|pread64|preadv|preadv2)$')")
  all=$(per "$(calls "$d/strace-1.txt" '^total$')" "$(calls "$d/strace-3.txt" '^total$')")
  cpu1=$(for r in $(seq "$REPEATS"); do awk '{ print $1 + $2 }' "$d/time-1-$r.txt"; done | median)
  cpu3=$(for r in $(seq "$REPEATS"); do awk '{ print $1 + $2 }' "$d/time-3-$r.txt"; done | median)
  cpu=$(echo "($cpu3 - $cpu1) * 1000000 / $extra" | bc -l | xargs printf '%.1f')
  bytes=$(per "$(summary "$d/out-1/summary.json" bytes_read)" "$(summary "$d/out-3/summary.json" bytes_read)" 0)
  echo "| $c | $sem | $spf | $opens | $reads | $all | $cpu | $bytes |"
}

echo "== dlio $("$DLIO" --version | awk '{ print $2, $3, $4 }'), $(nproc) cores, $(date -u +%Y-%m-%d)," \
  "load before $(cut -d' ' -f1-3 /proc/loadavg); $SAMPLES samples of $RECLEN B (csv $CSV_RECLEN B)," \
  "batch 32, read_threads 1, 1 vs 3 epochs; CPU resolution $(echo "10000 / (2 * $SAMPLES)" | bc -l | xargs printf '%.1f') us/sample" \
  "(/usr/bin/time counts 10 ms)"
echo "| format | semantics | samples/file | opens/sample | reads/sample | syscalls/sample | CPU us/sample | bytes/sample |"
echo "|---|---|---|---|---|---|---|---|"
for cs in $CASES; do
  run_case "${cs%%:*}" "${cs##*:}"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg); logs and strace tables under $WORK/runs"
[ "$KEEP" = 1 ] || rm -rf "$WORK/data"
