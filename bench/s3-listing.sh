#!/usr/bin/env bash
# Listing and planning object data sets of 10^7 and 5x10^7 objects (issue #34): wall time and
# peak RSS of a two-step run whose process 0 lists every training object over S3
# (ListObjectsV2, 1000 keys a page) against bench/s3-listing-server.py, a simulated server that
# writes its pages from the index (no server here holds 5x10^7 objects) and serves the few
# objects the two steps read. Target: < 1 GiB.
#
#   bash bench/s3-listing.sh
#
# Knobs: COUNTS="10000000 50000000" LAYOUTS="1000 0" (subfolders; 0: one flat prefix)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
COUNTS=${COUNTS:-10000000 50000000}
LAYOUTS=${LAYOUTS:-1000 0}
WORK=${WORK:-/tmp/dlio-s3-listing}
mkdir -p "$WORK"
cargo build --release --locked -p dlio --manifest-path "$REPO/Cargo.toml" >/dev/null 2>&1
DLIO=${DLIO:-$REPO/target/release/dlio}
echo "== $("$DLIO" --version), $(nproc) cores, $(date -u '+%F %H:%M') UTC"
export AWS_ACCESS_KEY_ID=benchkey AWS_SECRET_ACCESS_KEY=benchsecret AWS_REGION=us-east-1
for count in $COUNTS; do
  for subs in $LAYOUTS; do
    PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    python3 "$HERE/s3-listing-server.py" "$PORT" "$count" "$subs" 4096 >"$WORK/server.log" 2>&1 &
    server=$!
    for _ in $(seq 100); do grep -q ready "$WORK/server.log" 2>/dev/null && break; sleep 0.1; done
    label="$count objects, $([ "$subs" -gt 1 ] && echo "$subs subfolders" || echo "one prefix")"
    start_ticks=$(awk '{print $14 + $15}' "/proc/$server/stat")
    if /usr/bin/time -f "%e %M %U %S" -o "$WORK/time" "$DLIO" run workload=unet3d_h100 \
      ++workload.storage.storage_type=s3 ++workload.storage.storage_root=bench \
      ++workload.dataset.data_folder=s3://bench/data \
      ++workload.storage.storage_options.s3_force_path_style=True \
      ++workload.storage.storage_options.endpoint_url="http://127.0.0.1:$PORT" \
      ++workload.dataset.format=npy ++workload.dataset.num_samples_per_file=1 \
      "++workload.dataset.record_dims=[4096]" \
      ++workload.dataset.record_length_bytes=4096 ++workload.dataset.record_length_bytes_stdev=0 \
      ++workload.dataset.num_files_train="$count" ++workload.dataset.num_subfolders_train="$subs" \
      ++workload.dataset.num_files_eval=0 ++workload.workflow.evaluation=False \
      ++workload.workflow.checkpoint=False ++workload.reader.batch_size=4 \
      ++workload.train.total_training_steps=2 ++workload.train.computation_time=0 \
      ++workload.train.epochs=1 ++workload.output.folder="$WORK/out" >"$WORK/run.log" 2>&1; then
      read -r wall rss user sys <"$WORK/time"
      server_s=$(( $(awk '{print $14 + $15}' "/proc/$server/stat") - start_ticks ))
      kill "$server"; wait "$server" 2>/dev/null || true
      printf '%-40s wall %7.2f s  peak RSS %6.0f MiB  dlio CPU %6.2f s  server CPU %6.2f s  (%s)  %s\n' \
        "$label" "$wall" "$(echo "$rss / 1024" | bc -l)" "$(echo "$user + $sys" | bc -l)" \
        "$(echo "$server_s / $(getconf CLK_TCK)" | bc -l)" "$(tail -1 "$WORK/server.log")" \
        "$(awk -v r="$rss" 'BEGIN { print (r < 1048576) ? "< 1 GiB: met" : "< 1 GiB: not met" }')"
    else
      kill "$server" 2>/dev/null || true
      echo "$label: the run failed:"; tail -5 "$WORK/run.log"
    fi
  done
done
