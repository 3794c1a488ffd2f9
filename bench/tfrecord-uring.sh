#!/usr/bin/env bash
# io_uring across the records of a TFRecord stream (#16): one rank reads 32 resnet50_h100
# files (250 records of 112 KiB each) with O_DIRECT through io_uring at storage.io_depth 8,
# computation 0, with 1 and 8 reader threads; fio reads the same files in order in 256 KiB
# O_DIRECT io_uring requests at depth 8 and 1. Runs alternate, REPS times each; every run is
# printed with dlio's MiB/s of records and fio's MiB/s.
#
# Usage: bash bench/tfrecord-uring.sh [DIR]   (DIR on the disk to measure; default /work/bench-tmp)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
DIR=${1:-/work/bench-tmp}/tfrecord-uring
REPS=${REPS:-3}
command -v fio >/dev/null || { echo "fio is needed (apt install fio)"; exit 1; }
cargo build --release --locked -p dlio >/dev/null
DLIO=$PWD/target/release/dlio
common=(workload=resnet50_h100 ++workload.dataset.num_files_train=32 ++workload.dataset.num_samples_per_file=250
  ++workload.dataset.num_files_eval=0 ++workload.dataset.data_folder="$DIR/data"
  ++workload.workflow.checkpoint=False ++workload.workflow.evaluation=False ++workload.output.folder="$DIR/out")
[ -d "$DIR/data/train" ] || { "$DLIO" generate --ranks 2 "${common[@]}" >/dev/null && sync; }
files=$(ls "$DIR"/data/train/* | paste -sd: -)
total=$(ls "$DIR"/data/train/* | xargs stat -c %s | paste -sd+ | bc)

dlio_mib() { # READ_THREADS -> MiB/s of records over the epoch
  "$DLIO" run --ranks 1 "${common[@]}" ++workload.train.epochs=1 ++workload.train.computation_time=0 \
    ++workload.storage.io_engine=io_uring ++workload.storage.io_depth=8 ++workload.reader.odirect=True \
    ++workload.reader.read_threads="$1" >/dev/null 2>&1
  python3 -c 'import json,sys; m = json.load(open(sys.argv[1]))["metric"]; print("%.1f" % m["train_io_mean_MB_per_second"])' "$DIR/out/summary.json"
}
fio_mib() { # DEPTH -> MiB/s
  fio --name=r --filename="$files" --rw=read --bs=256k --direct=1 --ioengine=io_uring --iodepth="$1" \
    --size="$total" --file_service_type=sequential --output-format=json 2>/dev/null |
    python3 -c 'import json,sys; r = json.load(sys.stdin)["jobs"][0]["read"]; print("%.1f" % (r["bw"] / 1024))'
}

echo "== dlio $(git rev-parse --short HEAD), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ); $total bytes in 32 files"
for rep in $(seq "$REPS"); do
  echo "run $rep: dlio 1 reader $(dlio_mib 1), dlio 8 readers $(dlio_mib 8), fio depth 8 $(fio_mib 8), fio depth 1 $(fio_mib 1) MiB/s"
done
[ "${KEEP:-0}" = 1 ] || rm -rf "$DIR"
