#!/usr/bin/env bash
# Side-by-side: Python DLIO 2.0.0 (via ../shared/bench/reference-dlio.sh) and dlio, the same
# workload back to back: npz, NFILES x RECLEN files, batch 4, read_threads 2,
# computation_time 0, 2 epochs, page cache warm. Prints samples/s, CPU seconds, peak RSS of both
# and the ratios; also times the generation of the data set by both.
#
#   bash bench/vs-reference.sh            # both (installs the reference venv once, ~7 GB, outside the repo)
#   SKIP_REFERENCE=1 bash bench/vs-reference.sh   # only dlio (reuses the last reference figures)
#
# Knobs: NFILES=1024 RECLEN=1048576 BATCH=4 THREADS=2 EPOCHS=2 REPS=3 WORK=/tmp/dlio-bench
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
REF_SCRIPT=${REF_SCRIPT:-$REPO/../shared/bench/reference-dlio.sh}
NFILES=${NFILES:-1024}; RECLEN=${RECLEN:-1048576}; BATCH=${BATCH:-4}; THREADS=${THREADS:-2}
EPOCHS=${EPOCHS:-2}; REPS=${REPS:-3}
WORK=${WORK:-/tmp/dlio-bench}
REF_WORK=$WORK/reference
OURS_WORK=$WORK/dlio
mkdir -p "$REF_WORK" "$OURS_WORK"
[ -x /usr/bin/time ] || { apt-get update -qq && apt-get install -y -qq time >/dev/null; }

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
field() { grep -E "$2" "$1" | head -1 | sed -E 's/.*: //'; }
wall_s() { awk -F: '{ if (NF==3) print $1*3600+$2*60+$3; else print $1*60+$2 }' <<<"$1"; }

# ---------------------------------------------------------------- reference
if [ "${SKIP_REFERENCE:-0}" != 1 ]; then
  echo "== Python DLIO 2.0.0 (reference)"
  rm -rf "$REF_WORK/data"   # so that generation is timed too
  NFILES=$NFILES RECLEN=$RECLEN BATCH=$BATCH THREADS=$THREADS EPOCHS=$EPOCHS COMPUTE=0 REPS=$REPS \
    MPI_NP=0 FORMAT=npz WORK=$REF_WORK bash "$REF_SCRIPT" measure | tee "$WORK/reference.txt"
fi
[ -f "$WORK/reference.txt" ] || { echo "no reference figures: run without SKIP_REFERENCE=1"; exit 1; }
ref_gen=$(grep -E "gen: .*Elapsed" "$WORK/reference.txt" | sed -E 's/.*: //' || true)
ref_line=$(grep "np1 MEDIAN" "$WORK/reference.txt")
ref_cpu=$(sed -E 's/.*cpu\(user\+sys\)= *([0-9.]+)s.*/\1/' <<<"$ref_line")
ref_sps=$(sed -E 's/.*DLIO samples\/s= *([0-9.]+).*/\1/' <<<"$ref_line")
ref_tree=$(grep "np1 tree" "$WORK/reference.txt" | sed -E 's/.*peak sum RSS=([0-9.]+) MiB.*/\1/')

# ---------------------------------------------------------------- dlio
echo "== dlio (this repository)"
(cd "$REPO" && cargo build --release --locked -q --bin dlio)
DLIO=$REPO/target/release/dlio
data=$OURS_WORK/data/npz_${NFILES}x${RECLEN}
C=(workload=unet3d_a100 ++workload.workflow.checkpoint=False ++workload.dataset.format=npz
   ++workload.dataset.num_files_train="$NFILES" ++workload.dataset.num_samples_per_file=1
   ++workload.dataset.record_length_bytes="$RECLEN" ++workload.dataset.record_length_bytes_stdev=0
   ++workload.dataset.record_length_bytes_resize=0 ++workload.dataset.data_folder="$data"
   ++workload.reader.batch_size="$BATCH" ++workload.reader.read_threads="$THREADS"
   ++workload.train.epochs="$EPOCHS" ++workload.train.computation_time=0)
rm -rf "$data"
/usr/bin/time -v -o "$OURS_WORK/gen.time" "$DLIO" generate "${C[@]}" \
  ++workload.output.folder="$OURS_WORK/out/gen" > "$OURS_WORK/gen.log" 2>&1
our_gen=$(field "$OURS_WORK/gen.time" "Elapsed \(wall")
sync; cat "$data"/train/* > /dev/null
: > "$OURS_WORK/runs.tsv"
for r in $(seq 1 "$REPS"); do
  o=$OURS_WORK/out/r$r; rm -rf "$o"
  /usr/bin/time -v -o "$OURS_WORK/r$r.time" "$DLIO" run "${C[@]}" ++workload.output.folder="$o" \
    > "$OURS_WORK/r$r.log" 2>&1
  t=$OURS_WORK/r$r.time
  w=$(wall_s "$(field "$t" "Elapsed \(wall")")
  cpu=$(echo "$(field "$t" "User time") + $(field "$t" "System time")" | bc -l)
  rss=$(echo "$(field "$t" "Maximum resident") / 1024" | bc -l)
  sps=$(python3 -c "import json;print(json.load(open('$o/summary.json'))['metric']['train_throughput_mean_samples_per_second'])")
  mbs=$(python3 -c "import json;print(json.load(open('$o/summary.json'))['dlio_rs']['train_bytes_read_per_second']/1048576)")
  printf "dlio run%d  wall=%6.2fs cpu=%6.2fs maxrss=%7.1fMiB samples/s=%9.1f measured MiB/s=%8.1f\n" \
    "$r" "$w" "$cpu" "$rss" "$sps" "$mbs"
  printf "%s\t%s\t%s\t%s\n" "$w" "$cpu" "$rss" "$sps" >> "$OURS_WORK/runs.tsv"
done
our_cpu=$(cut -f2 "$OURS_WORK/runs.tsv" | median)
our_rss=$(cut -f3 "$OURS_WORK/runs.tsv" | median)
our_sps=$(cut -f4 "$OURS_WORK/runs.tsv" | median)

samples=$((NFILES * EPOCHS))
echo
echo "== $NFILES x $RECLEN B npz, batch $BATCH, read_threads $THREADS, $EPOCHS epochs, computation_time 0, page cache warm (median of $REPS)"
printf "%-28s %14s %14s %10s\n" "" "Python DLIO" "dlio" "ratio"
printf "%-28s %14.1f %14.1f %9.1fx\n" "samples/s (DLIO formula)" "$ref_sps" "$our_sps" "$(echo "$our_sps / $ref_sps" | bc -l)"
printf "%-28s %14.3f %14.3f %9.1fx\n" "CPU ms per sample" "$(echo "$ref_cpu * 1000 / $samples" | bc -l)" \
  "$(echo "$our_cpu * 1000 / $samples" | bc -l)" "$(echo "$ref_cpu / $our_cpu" | bc -l)"
printf "%-28s %14.1f %14.1f %9.1fx\n" "peak RSS MiB (process tree)" "$ref_tree" "$our_rss" "$(echo "$ref_tree / $our_rss" | bc -l)"
if [ -n "$ref_gen" ]; then
  rg=$(wall_s "$ref_gen"); og=$(wall_s "$our_gen")
  printf "%-28s %14.2f %14.2f %9.1fx\n" "generation wall s" "$rg" "$og" "$(echo "$rg / $og" | bc -l)"
fi
