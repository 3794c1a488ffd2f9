#!/usr/bin/env bash
# MLPerf Storage v3's CLOSED workloads retinanet_b200 (jpeg) and unet3d_b200 (npz) at reduced
# size, computation_time 0 (the client's own ceiling), page cache warm: samples/s and client
# CPU per sample with the fork's semantics (dlio's default: read every byte, decode nothing)
# and with upstream's (`--semantics upstream`: decode every JPEG pixel and npz array), and Python
# DLIO 2.0.0 (which decodes) side by side when its venv exists.
#
#   bash bench/mlperf-decode.sh                    # dlio both ways (+ Python DLIO if installed)
#   REFERENCE=0 bash bench/mlperf-decode.sh        # dlio only
#   bash ../shared/bench/reference-dlio.sh setup   # installs Python DLIO once (~7 GB, outside the repo)
#
# Knobs: RET_FILES=2048 UNET_FILES=48 UNET_RECLEN=16777216 EPOCHS=2 REPS=3 WORK=/tmp/dlio-mlperf-decode
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
RET_FILES=${RET_FILES:-2048}
UNET_FILES=${UNET_FILES:-48}
UNET_RECLEN=${UNET_RECLEN:-16777216}
EPOCHS=${EPOCHS:-2}
REPS=${REPS:-3}
WORK=${WORK:-/tmp/dlio-mlperf-decode}
VENV=${DLIO_VENV:-/opt/dlio-reference/venv}
REFERENCE=${REFERENCE:-1}
CONFIG_DIR=$REPO/crates/config/workloads/mlperf-v3
mkdir -p "$WORK"
[ -x /usr/bin/time ] || { apt-get update -qq && apt-get install -y -qq time >/dev/null; }

cargo build --release --locked -p dlio --manifest-path "$REPO/Cargo.toml" >/dev/null 2>&1
DLIO=$REPO/target/release/dlio

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
field() { grep -E "$2" "$1" | head -1 | sed -E 's/.*: //'; }

# The overrides of workload $1 at reduced size (both programs read the legacy key names).
overrides() {
  case $1 in
    retinanet_b200) echo "++workload.dataset.num_files_train=$RET_FILES ++workload.dataset.record_length=322957" ;;
    unet3d_b200) echo "++workload.dataset.num_files_train=$UNET_FILES ++workload.dataset.record_length=$UNET_RECLEN ++workload.dataset.record_length_stdev=0" ;;
  esac
}

# One measured run: label, samples read in all, command...; appends "samples/s cpu_ms_per_sample"
# to $WORK/<label>.tsv and prints the run.
measure() {
  local label=$1 samples=$2 out=$3; shift 3
  rm -rf "$out"
  /usr/bin/time -v -o "$WORK/$label.time" "$@" > "$WORK/$label.log" 2>&1 || {
    echo "   $label failed:"; tail -5 "$WORK/$label.log"; return 1; }
  local user sys sps
  user=$(field "$WORK/$label.time" "User time")
  sys=$(field "$WORK/$label.time" "System time")
  sps=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['metric']['train_throughput_mean_samples_per_second'])" "$out/summary.json")
  local cpu_ms
  cpu_ms=$(echo "($user + $sys) * 1000 / $samples" | bc -l)
  printf "%s\t%s\n" "$sps" "$cpu_ms" >> "$WORK/$label.tsv"
  printf "   %-28s samples/s %10.1f  CPU ms/sample %8.3f  (user %ss sys %ss)\n" "$label" "$sps" "$cpu_ms" "$user" "$sys"
}

summarise() {  # label -> "median_sps median_cpu_ms"
  local sps cpu
  sps=$(cut -f1 "$WORK/$1.tsv" | median)
  cpu=$(cut -f2 "$WORK/$1.tsv" | median)
  echo "$sps $cpu"
}

echo "== dlio $(git -C "$REPO" rev-parse --short HEAD), $(nproc) cores, $(date -u +%Y-%m-%d)"
for workload in retinanet_b200 unet3d_b200; do
  data=$WORK/data/$workload
  read -r -a sized <<<"$(overrides $workload)"
  common=(workload=$workload "${sized[@]}" ++workload.dataset.data_folder="$data"
    ++workload.train.epochs="$EPOCHS" ++workload.train.computation_time=0
    ++workload.dataset.record_length_resize=0)
  if [ ! -d "$data/train" ]; then
    "$DLIO" run "${common[@]}" ++workload.workflow.generate_data=True ++workload.workflow.train=False \
      hydra.run.dir="$WORK/out/gen-$workload" > "$WORK/gen-$workload.log" 2>&1
  fi
  cat "$data"/train/* > /dev/null   # the data set in the page cache
  files=$(find "$data/train" -type f | wc -l)
  batch=$("$DLIO" config workload=$workload --query reader.batch_size 2>/dev/null)
  samples=$(( files / batch * batch * EPOCHS ))
  echo "== $workload: $files files ($(du -sh "$data/train" | cut -f1)), batch $batch, $EPOCHS epochs, computation_time 0, read_threads $("$DLIO" config workload=$workload --query reader.read_threads 2>/dev/null)"
  for mode in mlperf upstream; do
    : > "$WORK/$workload-$mode.tsv"
    for r in $(seq 1 "$REPS"); do
      measure "$workload-$mode" "$samples" "$WORK/out/$workload-$mode" \
        "$DLIO" run --semantics "$mode" "${common[@]}" hydra.run.dir="$WORK/out/$workload-$mode"
    done
  done
  : > "$WORK/$workload-python.tsv"
  if [ "$REFERENCE" = 1 ] && [ -x "$VENV/bin/dlio_benchmark" ]; then
    for r in $(seq 1 "$REPS"); do
      measure "$workload-python" "$samples" "$WORK/out/$workload-python" \
        env DFTRACER_ENABLE=0 TF_CPP_MIN_LOG_LEVEL=2 "$VENV/bin/dlio_benchmark" "${common[@]}" \
        ++workload.workflow.generate_data=False ++workload.output.folder="$WORK/out/$workload-python" \
        hydra.run.dir="$WORK/out/$workload-python" --config-dir="$CONFIG_DIR" || break
    done
  fi
done

echo
echo "== medians of $REPS runs (samples/s | client CPU ms per sample)"
printf "%-16s %-26s %-26s %-26s %s\n" workload "dlio, fork (no decode)" "dlio, upstream (decode)" "Python DLIO 2.0.0" "no-decode gain"
for workload in retinanet_b200 unet3d_b200; do
  read -r m_sps m_cpu <<<"$(summarise "$workload-mlperf")"
  read -r u_sps u_cpu <<<"$(summarise "$workload-upstream")"
  py="not run"
  if [ -s "$WORK/$workload-python.tsv" ]; then
    read -r p_sps p_cpu <<<"$(summarise "$workload-python")"
    py=$(printf "%9.1f | %7.3f" "$p_sps" "$p_cpu")
  fi
  printf "%-16s %9.1f | %7.3f          %9.1f | %7.3f          %-26s %.1fx samples/s, %.1fx less CPU\n" \
    "$workload" "$m_sps" "$m_cpu" "$u_sps" "$u_cpu" "$py" \
    "$(echo "$m_sps / $u_sps" | bc -l)" "$(echo "$u_cpu / $m_cpu" | bc -l)"
done
