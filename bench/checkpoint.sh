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

echo "== dlio (fsync on; the read phase drops the files' page cache first)"
rm -rf "$WORK/ours" "$WORK/out-ours"
/usr/bin/time -v -o "$WORK/ours.time" "$DLIO" run "${C[@]}" ++workload.checkpoint.fsync=True \
  ++workload.checkpoint.checkpoint_folder="$WORK/ours" ++workload.output.folder="$WORK/out-ours" > "$WORK/ours.log" 2>&1
o_save=$(metric "$WORK/out-ours/summary.json" save_checkpoint_duration_mean_seconds)
o_load=$(metric "$WORK/out-ours/summary.json" load_checkpoint_duration_mean_seconds)
o_rss=$(echo "$(field "$WORK/ours.time" "Maximum resident") / 1024" | bc -l)
rm -rf "$WORK/ours"

echo "== fio (psync, 16 MiB sequential, end_fsync; read with invalidate=1)"
rm -f "$WORK/fio.dat"
fio --name=w --filename="$WORK/fio.dat" --rw=write --bs=16M --size="$bytes" --ioengine=psync \
  --end_fsync=1 --output-format=json > "$WORK/fio-w.json"
fio --name=r --filename="$WORK/fio.dat" --rw=read --bs=16M --size="$bytes" --ioengine=psync \
  --invalidate=1 --output-format=json > "$WORK/fio-r.json"
rm -f "$WORK/fio.dat"
f_w=$(python3 -c "import json;j=json.load(open('$WORK/fio-w.json'))['jobs'][0]['write'];print(j['io_bytes']/(j['runtime']/1000)/2**30)")
f_r=$(python3 -c "import json;j=json.load(open('$WORK/fio-r.json'))['jobs'][0]['read'];print(j['io_bytes']/(j['runtime']/1000)/2**30)")

r_save=""; r_load=""; r_rss=""
if [ "${SKIP_REFERENCE:-0}" != 1 ] && [ -x "$VENV/bin/dlio_benchmark" ]; then
  echo "== Python DLIO 2.0.0 (its fsync setting is ignored upstream; its reads follow its writes)"
  rm -rf "$WORK/ref" "$WORK/out-ref"
  ( source "$VENV/bin/activate"; export DFTRACER_ENABLE=0 TF_CPP_MIN_LOG_LEVEL=2; cd "$WORK"
    /usr/bin/time -v -o "$WORK/ref.time" dlio_benchmark "${C[@]}" ++workload.checkpoint.fsync=True \
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
printf "%-34s %12s %12s %12s\n" "" "dlio" "fio" "Python DLIO"
printf "%-34s %12.3f %12s %12s\n" "write duration, s" "$o_save" "-" "${r_save:--}"
printf "%-34s %12.3f %12.3f %12s\n" "write GiB/s" "$(echo "$gib / $o_save" | bc -l)" "$f_w" \
  "$( [ -n "$r_save" ] && printf %.3f "$(echo "$gib / $r_save" | bc -l)" || echo -)"
printf "%-34s %12.3f %12s %12s\n" "read duration, s" "$o_load" "-" "${r_load:--}"
printf "%-34s %12.3f %12.3f %12s\n" "read GiB/s" "$(echo "$gib / $o_load" | bc -l)" "$f_r" \
  "$( [ -n "$r_load" ] && printf %.3f "$(echo "$gib / $r_load" | bc -l)" || echo -)"
printf "%-34s %12.1f %12s %12s\n" "peak RSS, MiB" "$o_rss" "-" "$( [ -n "$r_rss" ] && printf %.1f "$r_rss" || echo -)"
printf "dlio / fio: write %.0f%%, read %.0f%%\n" "$(echo "100 * $gib / $o_save / $f_w" | bc -l)" "$(echo "100 * $gib / $o_load / $f_r" | bc -l)"
