#!/usr/bin/env bash
# io_uring across samples (#16): a reader thread keeps storage.io_depth whole-file reads in
# flight across sample boundaries. 4096 files of exactly 128 KiB (npy), read once in a
# shuffled order with O_DIRECT, the page cache dropped: dlio's io_uring engine at depth 8
# and 1 and its direct (pread) engine, against fio's io_uring randread over the same files
# at the same depths. Runs alternate, REPS times each; medians and every run are printed.
#
# Usage: bash bench/uring-samples.sh [DIR]   (DIR on the disk to measure; default /work/bench-tmp)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
DIR=${1:-/work/bench-tmp}/uring-samples
REPS=${REPS:-3}
FILES=4096
command -v fio >/dev/null || { echo "fio is needed (apt install fio)"; exit 1; }
cargo build --release --locked -p dlio >/dev/null
DLIO=$PWD/target/release/dlio
rm -rf "$DIR" && mkdir -p "$DIR"
common=(workload=default ++workload.dataset.format=npy "++workload.dataset.record_dims=[130944]"
  ++workload.dataset.record_length_bytes=130944 ++workload.dataset.num_files_train=$FILES
  ++workload.dataset.num_files_eval=0 ++workload.dataset.num_subfolders_train=0
  ++workload.dataset.data_folder="$DIR/data" ++workload.output.folder="$DIR/out")
"$DLIO" run "${common[@]}" ++workload.workflow.generate_data=True ++workload.workflow.train=False >/dev/null
size=$(stat -c %s "$DIR/data/train/img_0000_of_$FILES.npy")
[ "$size" = 131072 ] || { echo "expected 128 KiB files, got $size bytes"; exit 1; }

dlio_mib() { # ARGS... -> MiB/s: samples/s of the epoch times the 128 KiB each read
  "$DLIO" run "${common[@]}" ++workload.workflow.evaluation=False ++workload.train.computation_time=0 \
    ++workload.train.epochs=1 ++workload.reader.batch_size=8 ++workload.reader.read_threads=1 \
    ++workload.reader.file_shuffle=seed ++workload.reader.odirect=True \
    ++workload.storage.drop_page_cache=True "$@" >/dev/null 2>&1
  python3 - "$DIR/out" <<'PY'
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
t = s["metric"]["train_throughput_mean_samples_per_second"]
print(f"{t * 131072 / 2**20:.1f}")
PY
}
fio_mib() { # DEPTH -> MiB/s
  fio --name=r --opendir="$DIR/data/train" --rw=randread --bs=128k --direct=1 --ioengine=io_uring \
    --iodepth="$1" --file_service_type=random --runtime=8 --time_based --invalidate=1 \
    --output-format=json | sed -n "/^{/,\$p" | python3 -c 'import json,sys; print("%.1f" % (json.load(sys.stdin)["jobs"][0]["read"]["bw"] / 1024))'
}
declare -A runs
for r in $(seq "$REPS"); do
  runs[fio8]+="$(fio_mib 8) "
  runs[dlio8]+="$(dlio_mib ++workload.storage.io_engine=io_uring ++workload.storage.io_depth=8) "
  runs[fio1]+="$(fio_mib 1) "
  runs[dlio1]+="$(dlio_mib ++workload.storage.io_engine=io_uring ++workload.storage.io_depth=1) "
  runs[direct]+="$(dlio_mib ++workload.storage.io_engine=direct) "
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '| reader | depth | MiB/s (median of %s) | runs |\n|---|---:|---:|---|\n' "$REPS"
for k in fio8 dlio8 fio1 dlio1 direct; do
  case $k in fio8) n="fio io_uring randread"; d=8;; dlio8) n="dlio io_uring (window of whole-file reads)"; d=8;;
    fio1) n="fio io_uring randread"; d=1;; dlio1) n="dlio io_uring"; d=1;; direct) n="dlio direct (pread)"; d=1;; esac
  printf '| %s | %s | %s | %s|\n' "$n" "$d" "$(echo "${runs[$k]}" | median)" "${runs[$k]}"
done
f8=$(echo "${runs[fio8]}" | median); d8=$(echo "${runs[dlio8]}" | median)
echo "dlio/fio at depth 8: $(python3 -c "print(f'{100*$d8/$f8:.0f}%')")"
[ "${KEEP:-0}" = 1 ] || rm -rf "$DIR"
