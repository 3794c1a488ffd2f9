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
# 3. A whole epoch over EPOCH_FILES=10000000 names, computed (skip_listing) or read from a file
#    list (dataset.file_list_train), on 1 and 8 ranks: format synthetic (the readers name and
#    open nothing on storage, so the run measures the names and the plan, not the disk), batch
#    1024, one reader thread, shuffled files and samples. Only the checked files exist.
# 4. NESTED=10000000 files in 1000 subfolders (`num_subfolders_train`), listed from the file
#    system by process 0 (no file list, no skip_listing): sparse files of a whole file's size
#    but for those the two steps read (10^7 inodes of the disk's 16.7M here; making them takes
#    about 30 minutes). Listed twice: as generation names them (kept as one bit per file),
#    then with the subfolders renamed (names kept as names).
#
# Knobs: WORK=/tmp/dlio-listing KEEP=0 (keep the data) FILES=10000000 LISTED=1170301
#        EPOCH_FILES=10000000 NESTED=10000000 SECTIONS="1 2 3" (4 only when named)
#        MPI_DLIO=path (a dlio built with --features mpi: section 3 also runs the file list as 8
#        MPI processes of one rank each, so that the peak RSS is one rank's, the largest)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
WORK=${WORK:-/tmp/dlio-listing}
KEEP=${KEEP:-0}
FILES=${FILES:-10000000}
LISTED=${LISTED:-1170301}
EPOCH_FILES=${EPOCH_FILES:-10000000}
NESTED=${NESTED:-10000000}
SECTIONS=${SECTIONS:-1 2 3}
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
  /usr/bin/time -f "%e %M" -o "$WORK/$label.time" ${LAUNCH:-} "${RUN_DLIO:-$DLIO}" run "${common[@]}" \
    ++workload.dataset.num_files_train="$files" ++workload.output.folder="$WORK/out-$label" "$@" >"$log" 2>&1 \
    || { echo "$label failed:"; tail -5 "$log"; exit 1; }
  read -r wall rss <"$WORK/$label.time"
  local verdict=met limit=${WALL_TARGET:-10}
  awk -v w="$wall" -v r="$rss" -v l="$limit" 'BEGIN { exit !((l == 0 || w < l) && r < 1048576) }' || verdict="not met"
  local target="< $limit s, < 1024 MiB"
  [ "$limit" = 0 ] && target="< 1024 MiB per process"
  printf '%-32s %10d files  %6.2f s  %7.0f MiB peak RSS  (target %s: %s)\n' \
    "$label" "$files" "$wall" "$(echo "$rss / 1024" | bc -l)" "$target" "$verdict"
}

section() { case " $SECTIONS " in *" $1 "*) return 0 ;; esac; return 1; }

# 1. Named, not listed.
if section 1; then
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
fi

# 2. Listed.
if section 2; then
data=$WORK/listed
echo "   (generating $LISTED files of 4 KiB for the listing run)"
"$DLIO" generate "${common[@]}" ++workload.dataset.num_files_train="$LISTED" \
  ++workload.dataset.data_folder="$data" ++workload.output.folder="$WORK/gen" >"$WORK/gen.log" 2>&1
sync
measure "listed" "$LISTED" ++workload.dataset.data_folder="$data"
measure "listed, again" "$LISTED" ++workload.dataset.data_folder="$data"
rm -rf "$data"
fi

# 3. A whole epoch over names that are computed or read from a file list.
if section 3; then
data=$WORK/epoch
echo "   (writing the checked files and a file list of $EPOCH_FILES names)"
python3 - "$EPOCH_FILES" "$data" "$INTERVAL" <<'EOF'
import os, sys
n, root, step = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
os.makedirs(f"{root}/train", exist_ok=True)
width = len(str(n))
name = lambda i: f"img_{i:0{width}d}_of_{n}.synthetic"
for i in set(range(0, n, step)) | {n - 1}:
    with open(f"{root}/train/{name(i)}", "w") as f:
        f.write(str(i))
with open(f"{root}/train.txt", "w") as f:
    for start in range(0, n, 100000):
        f.write("".join(name(i) + "\n" for i in range(start, min(n, start + 100000))))
EOF
echo "   (file list: $(du -h "$data/train.txt" | cut -f1))"
epoch=(++workload.dataset.format=synthetic ++workload.dataset.record_length_bytes=64
  ++workload.dataset.record_length_bytes_resize=0
  ++workload.dataset.data_folder="$data" ++workload.dataset.listing_validation_interval=$INTERVAL
  ++workload.reader.batch_size=1024 ++workload.reader.read_threads=1
  ++workload.reader.file_shuffle=seed ++workload.reader.sample_shuffle=seed
  ++workload.train.total_training_steps=-1)
# A whole epoch's wall time grows with the files, so only the memory has a target here.
WALL_TARGET=0
for ranks in 1 8; do
  measure "computed, epoch, $ranks rank(s)" "$EPOCH_FILES" "${epoch[@]}" \
    ++workload.dataset.skip_listing=True --ranks $ranks
  measure "file list, epoch, $ranks rank(s)" "$EPOCH_FILES" "${epoch[@]}" \
    ++workload.dataset.file_list_train="$data/train.txt" --ranks $ranks
done
if [ -n "${MPI_DLIO:-}" ]; then
  LAUNCH="mpirun --oversubscribe --allow-run-as-root -np 8" RUN_DLIO=$MPI_DLIO \
    measure "file list, epoch, 8 MPI procs" "$EPOCH_FILES" "${epoch[@]}" \
    ++workload.dataset.file_list_train="$data/train.txt"
fi
rm -rf "$data"
fi

# 4. A listing of nested folders.
if section 4; then
data=$WORK/nested
echo "   (making $NESTED files in 1000 subfolders)"
python3 - "$NESTED" "$data" <<'EOF'
import os, sys
n, root = int(sys.argv[1]), sys.argv[2]
width, subs = len(str(n)), 1000
# Generation's names: subfolders padded to the digits of their count (0000-0999).
sub_width = len(str(subs))
for d in range(subs):
    os.makedirs(f"{root}/train/{d:0{sub_width}d}", exist_ok=True)
header = b"\x93NUMPY\x01\x00v\x00{'descr': '|u1', 'fortran_order': False, 'shape': (4096,), }"
header = header + b" " * (127 - len(header)) + b"\n"
for i in range(n):
    path = f"{root}/train/{i % subs:0{sub_width}d}/img_{i:0{width}d}_of_{n}.npy"
    if i < 64 or (i % subs == 0 and i < 64 * subs):  # the first files in either order
        with open(path, "wb") as f:
            f.write(header + bytes(4096))
    else:  # sparse: a whole file's size, no blocks
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
        os.ftruncate(fd, len(header) + 4096)
        os.close(fd)
EOF
measure "nested, generation's names" "$NESTED" ++workload.dataset.data_folder="$data" \
  ++workload.dataset.num_subfolders_train=1000
# The same files under folders named otherwise (000-999): names generation does not give,
# which the listing keeps as names.
(cd "$data/train" && for d in 0???; do mv "$d" "${d#0}"; done)
measure "nested, other names" "$NESTED" ++workload.dataset.data_folder="$data" \
  ++workload.dataset.num_subfolders_train=1000
echo "   (removing them)"
rm -rf "$data"
fi
