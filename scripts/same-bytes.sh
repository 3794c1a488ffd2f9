#!/usr/bin/env bash
# Generates one small data set per format (and per codec where a format has several) with two
# dlio binaries and compares every file's bytes: a refactoring of formats, layouts or generation
# must leave what lands on disk unchanged.
#
#   bash scripts/same-bytes.sh OLD_DLIO NEW_DLIO [WORK_DIR]
#
# Prints "same" or "DIFF" per case and exits 1 on any difference or failed generation.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OLD_DLIO NEW_DLIO [WORK_DIR]" >&2; exit 2; }
old=$1 new=$2 work=${3:-$(mktemp -d)}
mkdir -p "$work"
cases="npz npy hdf5 csv jpeg png tfrecord indexed_binary mmap_indexed_binary parquet synthetic
       npz:zip csv:gzip hdf5:gzip parquet:snappy"
status=0
for c in $cases; do
  format=${c%%:*} codec=none
  [[ $c == *:* ]] && codec=${c#*:}
  for side in old new; do
    bin=$old; [ "$side" = new ] && bin=$new
    dir=$work/$side/$format-$codec
    rm -rf "$dir"
    # Sizes spread (stdev) so that every file has its own layout; 3 training files, 1 eval.
    if ! "$bin" generate workload=default ++workload.dataset.format="$format" \
        ++workload.dataset.compression="$codec" ++workload.dataset.data_folder="$dir" \
        ++workload.dataset.num_files_train=3 ++workload.dataset.num_files_eval=1 \
        ++workload.dataset.num_samples_per_file=4 ++workload.dataset.record_length_bytes=3000 \
        ++workload.dataset.record_length_bytes_stdev=500 \
        ++workload.output.folder="$work/out-$side-$format-$codec" \
        >"$work/$side-$format-$codec.log" 2>&1; then
      echo "FAIL  $c: $side generation failed (see $work/$side-$format-$codec.log)"
      status=1
    fi
  done
  digest() { (cd "$1" && find . -type f | sort | xargs sha256sum | sha256sum); }
  files=$(find "$work/new/$format-$codec" -type f 2>/dev/null | wc -l)
  if [ "$files" -eq 0 ]; then
    echo "FAIL  $c: no files generated"
    status=1
  elif [ "$(digest "$work/old/$format-$codec")" = "$(digest "$work/new/$format-$codec")" ]; then
    echo "same  $c ($files files)"
  else
    echo "DIFF  $c"
    status=1
  fi
done
exit $status
