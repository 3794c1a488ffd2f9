#!/usr/bin/env bash
# Object storage at line rate (#19): dlio's S3 engine against s3dlio (PyPI, the MLPerf Storage
# fork's default client) on the same local S3 server (s3s-fs over a folder, loopback), the same
# objects, alternating runs. Reads: dlio trains one epoch with no compute (8 reader threads,
# whole-object GETs, the fork's window of 64 in flight) against s3dlio `get_many_stats` with 64
# in flight (dlio's MiB/s over its training block, s3dlio's over the get_many call). Writes:
# dlio's generation of the objects (random bytes made per object, as DLIO does) against
# s3dlio `put_many` of as many objects of one payload. A raw GET loop (curl, signed, 64 at
# once, bytes dropped) shows what the server gives a client with no logic at all. Client CPU (user + system of the whole
# client process, start-up included) per GiB moved.
#
#   bash bench/s3.sh            # REPS=3 SIZES="16M 256K"
#
# Needs s3s-fs (cargo install s3s-fs --version 0.14.1 --features binary --locked) and s3dlio
# (pip install s3dlio). The folder is removed at the end unless KEEP=1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
WORK=${WORK:-/work/bench-tmp/s3}
REPS=${REPS:-3}
SIZES=${SIZES:-"16M 256K"}
command -v s3s-fs >/dev/null || { echo "s3s-fs is needed: cargo install s3s-fs --version 0.14.1 --features binary --locked"; exit 1; }
python3 -c "import s3dlio" 2>/dev/null || { echo "s3dlio is needed: pip install s3dlio"; exit 1; }
cargo build --release --locked -p dlio >/dev/null 2>&1
DLIO=$PWD/target/release/dlio
rm -rf "$WORK" && mkdir -p "$WORK/root/bench"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export AWS_ACCESS_KEY_ID=benchkey AWS_SECRET_ACCESS_KEY=benchsecret AWS_REGION=us-east-1
export AWS_ENDPOINT_URL=http://127.0.0.1:$PORT
s3s-fs --host 127.0.0.1 --port "$PORT" --access-key benchkey --secret-key benchsecret "$WORK/root" \
  >"$WORK/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; [ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"' EXIT
for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null && break; sleep 0.1; done

bytes_of() { case $1 in 16M) echo $((16 << 20));; 256K) echo $((256 << 10));; *) echo "size $1?"; exit 1;; esac; }
count_of() { case $1 in 16M) echo 48;; 256K) echo 1024;; esac; }

words() { # SIZE -> the dlio words for that data set
  local size=$1 bytes count
  bytes=$(bytes_of "$size"); count=$(count_of "$size")
  # npy of exactly BYTES: a 128-byte header and BYTES-128 bytes of uint8.
  echo workload=default ++workload.storage.storage_type=s3 ++workload.storage.storage_root=bench \
    ++workload.dataset.data_folder=s3://bench/d$size ++workload.storage.storage_options.s3_force_path_style=True \
    ++workload.storage.storage_options.endpoint_url="$AWS_ENDPOINT_URL" \
    ++workload.dataset.format=npy "++workload.dataset.record_dims=[$((bytes - 128))]" \
    ++workload.dataset.record_length_bytes=$((bytes - 128)) ++workload.dataset.num_files_train="$count" \
    ++workload.dataset.num_files_eval=0 ++workload.dataset.num_subfolders_train=0 \
    ++workload.workflow.evaluation=False ++workload.train.computation_time=0 ++workload.train.epochs=1 \
    ++workload.reader.batch_size=8 ++workload.reader.read_threads=8 ++workload.output.folder="$WORK/out"
}

# "MiB/s CPU_s_per_GiB" of one dlio run (ARGS after the words); MODE read or write.
dlio_run() {
  local mode=$1 size=$2; shift 2
  local bytes total
  bytes=$(bytes_of "$size"); total=$((bytes * $(count_of "$size")))
  # shellcheck disable=SC2046
  /usr/bin/time -f "%e %U %S" -o "$WORK/time" "$DLIO" run $(words "$size") "$@" >"$WORK/dlio.log" 2>&1 \
    || { tail -5 "$WORK/dlio.log"; exit 1; }
  python3 - "$WORK" "$mode" "$total" <<'PY'
import json, re, sys
work, mode, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
wall, user, sys_ = map(float, open(f"{work}/time").read().split())
gib = total / 2**30
if mode == "write":
    line = [l for l in open(f"{work}/dlio.log") if "Generation done" in l][0]
    mib_s = float(re.search(r"([0-9.]+) MiB/s", line).group(1))
else:
    s = json.load(open(f"{work}/out/summary.json"))
    moved = sum(p["bytes_read"] for p in s["dlio_rs"]["io_engine"]["per_process"])
    assert moved == total, (moved, total)
    # The epoch's one block: from its start to its end (microsecond timestamps).
    from datetime import datetime
    block = json.load(open(f"{work}/out/per_epoch_stats.json"))["1"]["block1"]
    secs = (datetime.fromisoformat(block["end"]) - datetime.fromisoformat(block["start"])).total_seconds()
    mib_s = moved / 2**20 / secs
print(f"{mib_s:.1f} {(user + sys_) / gib:.2f}")
PY
}

s3dlio_run() { # MODE SIZE -> "MiB/s CPU_s_per_GiB"
  local mode=$1 size=$2
  /usr/bin/time -f "%e %U %S" -o "$WORK/time" python3 - "$mode" "$size" "$(bytes_of "$size")" "$(count_of "$size")" \
    >"$WORK/s3dlio.out" 2>"$WORK/s3dlio.err" <<'PY' || { cat "$WORK/s3dlio.err"; exit 1; }
import os, sys, time
import s3dlio
mode, size, nbytes, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
s3dlio.configure_s3(endpoint_url=os.environ["AWS_ENDPOINT_URL"], region="us-east-1")
if mode == "read":
    uris = [f"s3://bench/d{size}/train/img_{i:0{len(str(count - 1))}d}_of_{count}.npy" for i in range(count)]
    start = time.perf_counter()
    s3dlio.get_many_stats(uris, 64)
    took = time.perf_counter() - start
else:
    payload = os.urandom(nbytes)
    items = [(f"s3://bench/w{size}/obj_{i}", payload) for i in range(count)]
    start = time.perf_counter()
    s3dlio.put_many(items, 64)
    took = time.perf_counter() - start
print(f"{nbytes * count / 2**20 / took:.1f}")
PY
  python3 - "$WORK" "$(bytes_of "$size")" "$(count_of "$size")" <<'PY'
import sys
work, nbytes, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
wall, user, sys_ = map(float, open(f"{work}/time").read().split())
print(open(f"{work}/s3dlio.out").read().split()[0], f"{(user + sys_) / (nbytes * count / 2**30):.2f}")
PY
}

raw_run() { # SIZE -> MiB/s of curl's signed GETs of every object, 64 at once (no client logic)
  local size=$1 count last cfg=$WORK/curl.cfg
  count=$(count_of "$size"); last=$((count - 1)); : >"$cfg"
  for i in $(seq 0 "$last"); do
    printf 'url = "%s/bench/d%s/train/img_%0*d_of_%d.npy"\noutput = /dev/null\n' \
      "$AWS_ENDPOINT_URL" "$size" "${#last}" "$i" "$count" >>"$cfg"
  done
  local start end
  start=$(date +%s.%N)
  curl -s --parallel --parallel-max 64 --aws-sigv4 "aws:amz:us-east-1:s3" \
    --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
    -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
    -K "$cfg" -w '%{http_code}\n' 2>/dev/null >"$WORK/codes"
  end=$(date +%s.%N)
  [ "$(grep -vc '^200$' "$WORK/codes")" = 0 ] || { echo "curl: $(sort "$WORK/codes" | uniq -c)"; exit 1; }
  python3 -c "print(f'{$(bytes_of "$size") * $count / 2**20 / ($end - $start):.1f}')"
}

median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "== dlio $(git rev-parse --short HEAD), s3dlio $(python3 -c 'import importlib.metadata as m; print(m.version("s3dlio"))'), s3s-fs 0.14.1, $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M') UTC"
printf '| objects | op | dlio MiB/s | s3dlio MiB/s | dlio/s3dlio | dlio CPU s/GiB | s3dlio CPU s/GiB | dlio runs | s3dlio runs |\n|---|---|---:|---:|---:|---:|---:|---|---|\n'
for size in $SIZES; do
  declare -A r=()
  for rep in $(seq "$REPS"); do
    # Writes: dlio generates the data set afresh (the objects are removed first); s3dlio puts as many.
    rm -rf "$WORK/root/bench/d$size" "$WORK/root/bench/w$size"
    read -r mib cpu <<<"$(dlio_run write "$size" ++workload.workflow.generate_data=True ++workload.workflow.train=False)"
    r[dw]+="$mib "; r[dwc]+="$cpu "
    read -r mib cpu <<<"$(s3dlio_run write "$size")"
    r[sw]+="$mib "; r[swc]+="$cpu "
    read -r mib cpu <<<"$(s3dlio_run read "$size")"
    r[sr]+="$mib "; r[src]+="$cpu "
    read -r mib cpu <<<"$(dlio_run read "$size")"
    r[dr]+="$mib "; r[drc]+="$cpu "
    r[raw]+="$(raw_run "$size") "
  done
  echo "raw signed GET loop (curl --parallel-max 64), $(count_of "$size") x $size: $(echo "${r[raw]}" | median) MiB/s (runs ${r[raw]})"
  for op in r w; do
    d=$(echo "${r[d$op]}" | median); s=$(echo "${r[s$op]}" | median)
    printf '| %s x %s | %s | %s | %s | %s | %s | %s | %s| %s|\n' "$(count_of "$size")" "$size" \
      "$([ $op = r ] && echo read || echo write)" "$d" "$s" "$(python3 -c "print(f'{$d/$s:.2f}x')")" \
      "$(echo "${r[d${op}c]}" | median)" "$(echo "${r[s${op}c]}" | median)" "${r[d$op]}" "${r[s$op]}"
  done
done
