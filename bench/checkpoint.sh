#!/usr/bin/env bash
# Checkpoint write/read bandwidth: dlio vs fio (same bytes, sequential, fsync / cache dropped)
# and vs Python DLIO 2.0.0 on the same scaled llama_8b_zero3 config (duration, peak RSS).
#
#   bash bench/checkpoint.sh              # DP=25 -> one rank writes ~4.2 GiB
#   DP=50 SKIP_REFERENCE=1 bash bench/checkpoint.sh
#
# Knobs: DP (model.parallelism.data; smaller = bigger checkpoint), WORK=/tmp/dlio-bench-ckpt
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
DP=${DP:-25}
WORK=${WORK:-/tmp/dlio-bench-ckpt}
VENV=${DLIO_VENV:-/opt/dlio-reference/venv}
mkdir -p "$WORK"
command -v fio >/dev/null || { apt-get update -qq && apt-get install -y -qq fio >/dev/null; }
[ -x /usr/bin/time ] || { apt-get update -qq && apt-get install -y -qq time >/dev/null; }
(cd "$REPO" && cargo build --release --locked -q --bin dlio)
DLIO=$REPO/target/release/dlio
C=(workload=llama_8b_zero3 ++workload.model.parallelism.data="$DP" ++workload.checkpoint.mode=subset
   ++workload.checkpoint.time_between_checkpoints=0 ++workload.checkpoint.num_checkpoints_write=1
   ++workload.checkpoint.num_checkpoints_read=1)
field() { grep -E "$2" "$1" | head -1 | sed -E 's/.*: //'; }
metric() { python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['metric'][sys.argv[2]])" "$1" "$2"; }

bytes=$("$DLIO" checkpoint-plan "${C[@]}" | awk '$1=="all"{print $2}')
gib=$(echo "$bytes / 1073741824" | bc -l)
printf "== llama_8b_zero3, subset, DP=%s, 1 rank: %d bytes (%.2f GiB) per checkpoint\n" "$DP" "$bytes" "$gib"

# Both sides write unique bytes (fio: --refill_buffers): storage and hypervisors may compress or
# dedupe repeated buffers, and on this VM the page-cache path is far slower for unique data.
declare -A O_SAVE O_LOAD O_RSS F_W F_R
for mode in buffered direct; do
  engine=posix; fio_direct=0
  [ "$mode" = direct ] && { engine=direct; fio_direct=1; }
  echo "== dlio, $mode (engine $engine, fsync on; the read phase drops the files' page cache first)"
  rm -rf "$WORK/ours" "$WORK/out-ours"
  /usr/bin/time -v -o "$WORK/ours.time" "$DLIO" run "${C[@]}" ++workload.checkpoint.fsync=True \
    ++workload.storage.io_engine=$engine \
    ++workload.checkpoint.checkpoint_folder="$WORK/ours" ++workload.output.folder="$WORK/out-ours" > "$WORK/ours-$mode.log" 2>&1
  O_SAVE[$mode]=$(metric "$WORK/out-ours/summary.json" save_checkpoint_duration_mean_seconds)
  O_LOAD[$mode]=$(metric "$WORK/out-ours/summary.json" load_checkpoint_duration_mean_seconds)
  O_RSS[$mode]=$(echo "$(field "$WORK/ours.time" "Maximum resident") / 1024" | bc -l)
  rm -rf "$WORK/ours"
  echo "== fio, $mode (psync, 16 MiB sequential, end_fsync, refill_buffers; read with invalidate=1)"
  rm -f "$WORK/fio.dat"
  fio --name=w --filename="$WORK/fio.dat" --rw=write --bs=16M --size="$bytes" --ioengine=psync \
    --direct=$fio_direct --refill_buffers=1 --end_fsync=1 --output-format=json > "$WORK/fio-w.json"
  fio --name=r --filename="$WORK/fio.dat" --rw=read --bs=16M --size="$bytes" --ioengine=psync \
    --direct=$fio_direct --invalidate=1 --output-format=json > "$WORK/fio-r.json"
  rm -f "$WORK/fio.dat"
  F_W[$mode]=$(python3 -c "import json;j=json.load(open('$WORK/fio-w.json'))['jobs'][0]['write'];print(j['io_bytes']/(j['runtime']/1000)/2**30)")
  F_R[$mode]=$(python3 -c "import json;j=json.load(open('$WORK/fio-r.json'))['jobs'][0]['read'];print(j['io_bytes']/(j['runtime']/1000)/2**30)")
done

r_save=""; r_load=""; r_rss=""
if [ "${SKIP_REFERENCE:-0}" != 1 ] && [ -x "$VENV/bin/dlio_benchmark" ]; then
  echo "== Python DLIO 2.0.0 (its fsync setting is ignored upstream; its reads follow its writes)"
  rm -rf "$WORK/ref" "$WORK/out-ref"
  # DLIO 2.0.0 does not ship the llama workloads: hand it the spec's copy.
  mkdir -p "$WORK/refconf/workload" "$WORK/data/train" "$WORK/data/valid"   # 2.0.0 lists data/ even here
  cp "$REPO/../shared/spec/dlio-workloads/llama_8b_zero3.yaml" "$WORK/refconf/workload/"
  ( source "$VENV/bin/activate"; export DFTRACER_ENABLE=0 TF_CPP_MIN_LOG_LEVEL=2; cd "$WORK"
    /usr/bin/time -v -o "$WORK/ref.time" dlio_benchmark --config-dir "$WORK/refconf" "${C[@]}" ++workload.checkpoint.fsync=True \
      ++workload.checkpoint.checkpoint_folder="$WORK/ref" ++workload.output.folder="$WORK/out-ref" \
      hydra.run.dir="$WORK/out-ref" > "$WORK/ref.log" 2>&1 ) || echo "   reference failed: see $WORK/ref.log"
  if [ -f "$WORK/out-ref/summary.json" ]; then
    r_save=$(metric "$WORK/out-ref/summary.json" save_checkpoint_duration_mean_seconds)
    r_load=$(metric "$WORK/out-ref/summary.json" load_checkpoint_duration_mean_seconds)
    r_rss=$(echo "$(field "$WORK/ref.time" "Maximum resident") / 1024" | bc -l)
  fi
  rm -rf "$WORK/ref"
fi

echo
printf "%-10s %-12s %10s %10s %10s %8s\n" "mode" "" "dlio" "fio" "Python" "dlio/fio"
for mode in buffered direct; do
  ow=$(echo "$gib / ${O_SAVE[$mode]}" | bc -l); orr=$(echo "$gib / ${O_LOAD[$mode]}" | bc -l)
  printf "%-10s %-12s %10.3f %10.3f %10s %7.0f%%\n" "$mode" "write GiB/s" "$ow" "${F_W[$mode]}" \
    "$( [ "$mode" = buffered ] && [ -n "$r_save" ] && printf %.3f "$(echo "$gib / $r_save" | bc -l)" || echo -)" \
    "$(echo "100 * $ow / ${F_W[$mode]}" | bc -l)"
  printf "%-10s %-12s %10.3f %10.3f %10s %7.0f%%\n" "$mode" "read GiB/s" "$orr" "${F_R[$mode]}" \
    "$( [ "$mode" = buffered ] && [ -n "$r_load" ] && printf %.3f "$(echo "$gib / $r_load" | bc -l)" || echo -)" \
    "$(echo "100 * $orr / ${F_R[$mode]}" | bc -l)"
  printf "%-10s %-12s %10.1f %10s %10s\n" "$mode" "peak RSS MiB" "${O_RSS[$mode]}" "-" \
    "$( [ "$mode" = buffered ] && [ -n "$r_rss" ] && printf %.1f "$r_rss" || echo -)"
done
