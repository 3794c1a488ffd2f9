#!/usr/bin/env bash
# Client CPU per sample (issue #16): dlio and Python DLIO 2.0.0 on the same data, the same
# workload YAML and two accelerators (dlio --ranks 2; Python under mpirun -np 2), page cache
# warm. CPU is user + system time of the whole job; start-up (Python imports TensorFlow and
# PyTorch) is taken out by running 1 and 3 epochs and dividing the difference by the samples of
# two epochs.
#
#   bash bench/cpu-per-sample.sh                       # all four workloads
#   WORKLOADS="resnet50_h100" bash bench/cpu-per-sample.sh
#
# Needs the reference virtualenv (bash ../shared/bench/reference-dlio.sh setup); without it,
# only dlio's figures are printed. Knobs: WORK=/tmp/dlio-cpu KEEP=0 DLIO_VENV=/opt/dlio-reference/venv
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
WORK=${WORK:-/tmp/dlio-cpu}
KEEP=${KEEP:-0}
VENV=${DLIO_VENV:-/opt/dlio-reference/venv}
WORKLOADS=${WORKLOADS:-"resnet50_h100 cosmoflow_h100 unet3d_h100 retinanet_b200"}
mkdir -p "$WORK"

cargo build --release --locked -p dlio --manifest-path "$REPO/Cargo.toml" >/dev/null 2>&1
DLIO=$REPO/target/release/dlio
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# Reduced data sets (whole files and records as the workload sets them).
sized() {
  case $1 in
    resnet50_h100) echo "++workload.dataset.num_files_train=64 ++workload.dataset.num_samples_per_file=250" ;;
    cosmoflow_h100) echo "++workload.dataset.num_files_train=1000" ;;
    unet3d_h100) echo "++workload.dataset.num_files_train=42 ++workload.dataset.record_length_bytes_stdev=0" ;;
    retinanet_b200) echo "++workload.dataset.num_files_train=4800" ;;
  esac
}

cpu_of() { awk '{ printf "%.3f", $1 + $2 }' "$1"; }

echo "== dlio $(git -C "$REPO" rev-parse --short HEAD), $(nproc) cores, $(date -u +%Y-%m-%d); 2 accelerators"
printf '%-16s %12s %14s %14s %8s\n' workload samples/epoch "dlio us/smpl" "Python us/smpl" ratio
for workload in $WORKLOADS; do
  data=$WORK/data/$workload
  read -r -a size <<<"$(sized "$workload")"
  common=(workload="$workload" "${size[@]}" ++workload.dataset.data_folder="$data"
    ++workload.workflow.checkpoint=False ++workload.workflow.evaluation=False ++workload.dataset.num_files_eval=0)
  [ -d "$data/train" ] || "$DLIO" generate --ranks 2 "${common[@]}" ++workload.output.folder="$WORK/gen-$workload" \
    >"$WORK/gen-$workload.log" 2>&1
  cat "$data"/train/* >/dev/null
  samples=$("$DLIO" config "${common[@]}" --query dataset.num_files_train)
  per_file=$("$DLIO" config "${common[@]}" --query dataset.num_samples_per_file)
  samples=$((samples * per_file))
  for epochs in 1 3; do
    /usr/bin/time -f "%U %S" -o "$WORK/dlio-$workload-$epochs.time" "$DLIO" run --ranks 2 "${common[@]}" \
      ++workload.train.epochs=$epochs ++workload.output.folder="$WORK/out-dlio-$workload-$epochs" \
      >"$WORK/dlio-$workload-$epochs.log" 2>&1 || { echo "dlio failed: $(tail -3 "$WORK/dlio-$workload-$epochs.log")"; exit 1; }
    if [ -x "$VENV/bin/dlio_benchmark" ]; then
      /usr/bin/time -f "%U %S" -o "$WORK/py-$workload-$epochs.time" mpirun --oversubscribe -np 2 \
        "$VENV/bin/dlio_benchmark" --config-dir "$REPO/crates/config/workloads/mlperf-v3" "${common[@]}" \
        ++workload.workflow.generate_data=False ++workload.train.epochs=$epochs \
        hydra.run.dir="$WORK/out-py-$workload-$epochs" >"$WORK/py-$workload-$epochs.log" 2>&1 \
        || { rm -f "$WORK/py-$workload-$epochs.time"
             echo "   (Python DLIO failed on $workload: $(grep -m1 -iE 'error' "$WORK/py-$workload-$epochs.log"))"; }
    fi
  done
  per_sample() { # PREFIX
    local a=$WORK/$1-$workload-1.time b=$WORK/$1-$workload-3.time
    [ -s "$a" ] && [ -s "$b" ] || { echo "-"; return; }
    echo "($(cpu_of "$b") - $(cpu_of "$a")) * 1000000 / (2 * $samples)" | bc -l | xargs printf '%.1f'
  }
  ours=$(per_sample dlio)
  theirs=$(per_sample py)
  ratio=-
  [ "$theirs" != - ] && ratio=$(echo "$theirs / $ours" | bc -l | xargs printf '%.1fx')
  printf '%-16s %12d %14s %14s %8s\n' "$workload" "$samples" "$ours" "$theirs" "$ratio"
  [ "$KEEP" = 1 ] || rm -rf "$data"
done
