#!/usr/bin/env bash
# Listing and planning large data sets (issue #16): wall time and peak RSS of a run of two
# steps whose start lists (or, with dataset.skip_listing, names) every training file, plans the
# epoch and sizes the data set for the memory rule. Target: 10^7 files in under 10 s and 1 GiB.
#
#   bash bench/listing.sh
#
# 1. FILES=10000000 with skip_listing: only the files the run touches exist (every
#    listing_validation_interval-th, which the run checks, and each rank's first batches), as 10^7 real
#    files would take 40 GB of 4 KiB blocks and 10^7 inodes here.
# 2. LISTED=1170301 real files (retinanet_b200's count) in one folder, listed from the file system.
#
# Knobs: WORK=/tmp/dlio-listing KEEP=0 (keep the data) FILES=10000000 LISTED=1170301
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
WORK=${WORK:-/tmp/dlio-listing}
KEEP=${KEEP:-0}
FILES=${FILES:-10000000}
LISTED=${LISTED:-1170301}
INTERVAL=1000000
mkdir -p "$WORK"
cleanup() { [ "$KEEP" = 1 ] || rm -rf "$WORK"; }
trap cleanup EXIT

cargo build --release --locked -p dlio --manifest-path "$REPO/Cargo.toml" >/dev/null 2>&1
DLIO=$REPO/target/release/dlio
echo "== dlio $(git -C "$REPO" rev-parse --short HEAD), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(date -u +%Y-%m-%d)"

# One sample of 4 KiB per npy file; two steps of batch 4, no compute, no shuffle.
common=(workload=unet3d_h100 ++workload.dataset.format=npy ++workload.dataset.num_samples_per_file=1
  ++workload.dataset.record_length_bytes=4096 ++workload.dataset.record_length_bytes_stdev=0
  ++workload.dataset.num_files_eval=0 ++workload.reader.batch_size=4
  ++workload.train.total_training_steps=2 ++workload.train.computation_time=0 ++workload.train.epochs=1
  ++workload.reader.file_shuffle=off ++workload.reader.sample_shuffle=off
  ++workload.workflow.checkpoint=False ++workload.workflow.evaluation=False)

measure() { # LABEL FILES ARGS...
  local label=$1 files=$2; shift 2
  local log=$WORK/$label.log
  /usr/bin/time -f "%e %M" -o "$WORK/$label.time" "$DLIO" run "${common[@]}" \
    ++workload.dataset.num_files_train="$files" ++workload.output.folder="$WORK/out-$label" "$@" >"$log" 2>&1 \
    || { echo "$label failed:"; tail -5 "$log"; exit 1; }
  read -r wall rss <"$WORK/$label.time"
  local verdict=met
  awk -v w="$wall" -v r="$rss" 'BEGIN { exit !(w < 10 && r < 1048576) }' || verdict="not met"
  printf '%-28s %10d files  %6.2f s  %7.0f MiB peak RSS  (target < 10 s, < 1024 MiB: %s)\n' \
    "$label" "$files" "$wall" "$(echo "$rss / 1024" | bc -l)" "$verdict"
}

# 1. Named, not listed.
data=$WORK/named
python3 - "$FILES" "$data" "$INTERVAL" <<'EOF'
import os, sys
n, root, step = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
os.makedirs(f"{root}/train", exist_ok=True)
width = len(str(n))
# An npy header of 128 bytes and 4096 bytes of zeros, as numpy writes a 4096-byte uint8 array.
header = b"\x93NUMPY\x01\x00v\x00{'descr': '|u1', 'fortran_order': False, 'shape': (4096,), }"
header = header + b" " * (127 - len(header)) + b"\n"
# The first batches of each of up to 8 ranks (rank r starts at sample r * n / 8).
first = {r * (n // 8) + k for r in range(8) for k in range(64)}
for i in set(range(0, n, step)) | {n - 1} | first:
    with open(f"{root}/train/img_{i:0{width}d}_of_{n}.npy", "wb") as f:
        f.write(header + bytes(4096))
EOF
measure "skip_listing" "$FILES" ++workload.dataset.data_folder="$data" \
  ++workload.dataset.skip_listing=True ++workload.dataset.listing_validation_interval=$INTERVAL
measure "skip_listing, 8 ranks" "$FILES" ++workload.dataset.data_folder="$data" \
  ++workload.dataset.skip_listing=True ++workload.dataset.listing_validation_interval=$INTERVAL --ranks 8
rm -rf "$data"

# 2. Listed.
data=$WORK/listed
echo "   (generating $LISTED files of 4 KiB for the listing run)"
"$DLIO" generate "${common[@]}" ++workload.dataset.num_files_train="$LISTED" \
  ++workload.dataset.data_folder="$data" ++workload.output.folder="$WORK/gen" >"$WORK/gen.log" 2>&1
sync
measure "listed" "$LISTED" ++workload.dataset.data_folder="$data"
measure "listed, again" "$LISTED" ++workload.dataset.data_folder="$data"
