#!/usr/bin/env bash
# dlio vs Python DLIO under the same mpirun: samples/s and client CPU per sample for 1, 2 and
# 4 MPI processes (one rank each), npz, NFILES x RECLEN, batch 4, read_threads 1,
# computation_time 0, 2 epochs, page cache warm.
#
#   bash bench/mpi.sh                    # both (the reference venv must exist: ../shared/bench/reference-dlio.sh setup)
#   SKIP_REFERENCE=1 bash bench/mpi.sh   # dlio only
#
# Knobs: NFILES=512 RECLEN=1048576 NPS="1 2 4" WORK=/tmp/dlio-bench-mpi
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
NFILES=${NFILES:-512}; RECLEN=${RECLEN:-1048576}; NPS=${NPS:-1 2 4}
WORK=${WORK:-/tmp/dlio-bench-mpi}
VENV=${DLIO_VENV:-/opt/dlio-reference/venv}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$WORK"
if ! command -v mpirun >/dev/null; then
  apt-get update -qq && apt-get install -y -qq --no-install-recommends libopenmpi-dev openmpi-bin libclang-dev >/dev/null
fi
[ -x /usr/bin/time ] || { apt-get update -qq && apt-get install -y -qq time >/dev/null; }
(cd "$REPO" && cargo build --release --locked -q --features mpi --bin dlio)
DLIO=$REPO/target/release/dlio
data=$WORK/data
C=(workload=unet3d_a100 ++workload.workflow.checkpoint=False ++workload.dataset.format=npz
   ++workload.dataset.num_files_train="$NFILES" ++workload.dataset.num_samples_per_file=1
   ++workload.dataset.record_length_bytes="$RECLEN" ++workload.dataset.record_length_bytes_stdev=0
   ++workload.dataset.record_length_bytes_resize=0 ++workload.dataset.data_folder="$data"
   ++workload.reader.batch_size=4 ++workload.reader.read_threads=1
   ++workload.train.epochs=2 ++workload.train.computation_time=0)
if [ ! -d "$data/train" ]; then
  "$DLIO" generate "${C[@]}" ++workload.output.folder="$WORK/out-gen" > /dev/null 2>&1
fi
mkdir -p "$data/valid"   # Python DLIO lists valid/ even without evaluation
cat "$data"/train/* > /dev/null
field() { grep -E "$2" "$1" | head -1 | sed -E 's/.*: //'; }
sps() { python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['metric']['train_throughput_mean_samples_per_second'])" "$1"; }
cpu() { echo "$(field "$1" "User time") + $(field "$1" "System time")" | bc -l; }
samples=$((NFILES * 2))

printf "%-4s %14s %14s %16s %16s %8s %8s\n" "np" "dlio samples/s" "ref samples/s" "dlio CPU ms/smp" "ref CPU ms/smp" "x s/s" "x CPU"
for np in $NPS; do
  o=$WORK/ours-$np; rm -rf "$o"
  /usr/bin/time -v -o "$WORK/ours-$np.time" mpirun --oversubscribe -np "$np" "$DLIO" run "${C[@]}" \
    ++workload.output.folder="$o" > "$WORK/ours-$np.log" 2>&1
  s_ours=$(sps "$o/summary.json"); c_ours=$(cpu "$WORK/ours-$np.time")
  s_ref=""; c_ref=""
  if [ "${SKIP_REFERENCE:-0}" != 1 ] && [ -x "$VENV/bin/dlio_benchmark" ]; then
    r=$WORK/ref-$np; rm -rf "$r"
    ( source "$VENV/bin/activate"; export DFTRACER_ENABLE=0 TF_CPP_MIN_LOG_LEVEL=2; cd "$WORK"
      /usr/bin/time -v -o "$WORK/ref-$np.time" mpirun --oversubscribe -np "$np" -x DFTRACER_ENABLE \
        -x TF_CPP_MIN_LOG_LEVEL dlio_benchmark "${C[@]}" ++workload.output.folder="$r" hydra.run.dir="$r" \
        > "$WORK/ref-$np.log" 2>&1 ) || echo "reference np=$np failed: $WORK/ref-$np.log"
    if [ -f "$r/summary.json" ]; then s_ref=$(sps "$r/summary.json"); c_ref=$(cpu "$WORK/ref-$np.time"); fi
  fi
  if [ -n "$s_ref" ]; then
    printf "%-4s %14.1f %14.1f %16.3f %16.3f %7.1fx %7.1fx\n" "$np" "$s_ours" "$s_ref" \
      "$(echo "$c_ours*1000/$samples" | bc -l)" "$(echo "$c_ref*1000/$samples" | bc -l)" \
      "$(echo "$s_ours/$s_ref" | bc -l)" "$(echo "$c_ref/$c_ours" | bc -l)"
  else
    printf "%-4s %14.1f %14s %16.3f %16s\n" "$np" "$s_ours" "-" "$(echo "$c_ours*1000/$samples" | bc -l)" "-"
  fi
done
