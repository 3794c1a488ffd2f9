#!/usr/bin/env bash
# Object storage at line rate (#19): dlio's S3 engine against the clients MLPerf Storage v3
# names (s3dlio, and s3torchconnector's client) and a raw GET loop, on the same local S3 server
# (s3s-fs over a folder, loopback), the same objects, alternating runs.
#
# Reads, each over one pass of every object:
# - dlio, fork window: one epoch with no compute, 8 reader threads, whole-object GETs with the
#   fork's window of 64 per thread (512 in flight: as 8 DataLoader workers of the fork, each
#   with its own s3dlio client, would keep them);
# - dlio, 64 in flight: the same with prefetch_window 8 (8 x 8), the concurrency of the others;
# - s3dlio `get_many_stats(uris, 64)`;
# - s3torchconnector's client (s3torchconnectorclient's MountpointS3Client, what
#   S3MapDataset reads through): get_object of every object from 64 Python threads;
# - raw: curl, SigV4-signed GETs, 64 at once, bytes dropped (a client with no logic at all).
# dlio's MiB/s is over its training block, the others' over their read loop.
# Writes: dlio's generation of the objects (random bytes made per object, as DLIO does)
# against s3dlio `put_many` and s3torchconnector's `put_object` (64 threads) of as many
# objects of one payload, and a raw PUT loop (curl, SigV4 with an unsigned payload, 64 at once).
# Verdicts (#34): dlio's 64-in-flight reads and its generation at >= 95% of the raw loops, and
# its client CPU per GiB at <= 0.5x s3torchconnector's and s3dlio's.
# CPU: user + system of the client process per GiB moved, start-up included; and the server's
# CPU per GiB for each (from /proc/PID/stat around the run): on this 2-core machine the client
# and the server share the cores, so the server's share says whether the server is the limit.
#
#   bash bench/s3.sh            # REPS=3 SIZES="16M 256K 315K"
#
# Needs s3s-fs (cargo install s3s-fs --version 0.14.1 --features binary --locked) and s3dlio
# (pip install s3dlio); s3torchconnectorclient (pip install s3torchconnectorclient) is used
# where it installs. The folder is removed at the end unless KEEP=1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
WORK=${WORK:-/work/bench-tmp/s3}
REPS=${REPS:-3}
SIZES=${SIZES:-"16M 256K 315K"}
command -v s3s-fs >/dev/null || { echo "s3s-fs is needed: cargo install s3s-fs --version 0.14.1 --features binary --locked"; exit 1; }
python3 -c "import s3dlio" 2>/dev/null || { echo "s3dlio is needed: pip install s3dlio"; exit 1; }
TORCH=0
python3 -c "import s3torchconnectorclient" 2>/dev/null && TORCH=1
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
TICK=$(getconf CLK_TCK)
server_ticks() { awk '{print $14 + $15}' "/proc/$SERVER/stat"; }

bytes_of() { case $1 in 16M) echo $((16 << 20));; 256K) echo $((256 << 10));; 315K) echo $((315 << 10));; *) echo "size $1?"; exit 1;; esac; }
count_of() { case $1 in 16M) echo 48;; 256K|315K) echo 4096;; esac; }
gib_of() { python3 -c "print($(bytes_of "$1") * $(count_of "$1") / 2**30)"; }

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

# Runs "$@" under /usr/bin/time and prints "CLIENT_CPU_S_PER_GIB SERVER_CPU_S_PER_GIB" for SIZE.
cpu_of() { # SIZE OUT CMD...
  local size=$1 out=$2; shift 2
  local before after
  before=$(server_ticks)
  /usr/bin/time -f "%U %S" -o "$WORK/time" "$@" >"$out" 2>"$out.err" || { tail -5 "$out" "$out.err"; exit 1; }
  after=$(server_ticks)
  python3 -c "
u, s = map(float, open('$WORK/time').read().split()); gib = $(gib_of "$size")
print(f'{(u + s) / gib:.2f} {($after - $before) / $TICK / gib:.2f}')"
}

# "MiB/s CLIENT_CPU SERVER_CPU" of one dlio run (ARGS after the words); MODE read or write.
dlio_run() {
  local mode=$1 size=$2; shift 2
  local total cpu
  total=$(($(bytes_of "$size") * $(count_of "$size")))
  # shellcheck disable=SC2046
  cpu=$(cpu_of "$size" "$WORK/dlio.log" "$DLIO" run $(words "$size") "$@")
  python3 - "$WORK" "$mode" "$total" <<'PY' | tr '\n' ' '
import json, re, sys
work, mode, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "write":
    lines = open(f"{work}/dlio.log").readlines() + open(f"{work}/dlio.log.err").readlines()
    line = [l for l in lines if "Generation done" in l][0]
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
print(f"{mib_s:.1f}")
PY
  echo "$cpu"
}

# Python clients: the script prints MiB/s; "MiB/s CLIENT_CPU SERVER_CPU".
python_run() { # SIZE SCRIPT ARGS...
  local size=$1 script=$2 cpu; shift 2
  cpu=$(cpu_of "$size" "$WORK/py.out" python3 -c "$script" "$(bytes_of "$size")" "$(count_of "$size")" "$@")
  echo "$(cat "$WORK/py.out") $cpu"
}

S3DLIO='
import os, sys, time
import s3dlio
nbytes, count, mode, size = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
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
'

# s3torchconnector reads through s3torchconnectorclient: get_object per object, its stream
# iterated to the end (what S3MapDataset does per sample), 64 objects at once.
S3TORCH='
import os, sys, time
from concurrent.futures import ThreadPoolExecutor
from s3torchconnectorclient._mountpoint_s3_client import MountpointS3Client
nbytes, count, mode, size = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
client = MountpointS3Client("us-east-1", endpoint=os.environ["AWS_ENDPOINT_URL"], force_path_style=True)
if mode == "read":
    keys = [f"d{size}/train/img_{i:0{len(str(count - 1))}d}_of_{count}.npy" for i in range(count)]
    def one(key):
        return sum(len(part) for part in client.get_object("bench", key))
else:
    payload = os.urandom(nbytes)
    keys = [f"t{size}/obj_{i}" for i in range(count)]
    def one(key):
        stream = client.put_object("bench", key)
        stream.write(payload)
        stream.close()
        return len(payload)
start = time.perf_counter()
with ThreadPoolExecutor(64) as pool:
    moved = sum(pool.map(one, keys))
took = time.perf_counter() - start
assert moved == nbytes * count, (moved, nbytes * count)
print(f"{moved / 2**20 / took:.1f}")
'

raw_run() { # SIZE -> "MiB/s CLIENT_CPU SERVER_CPU" of curl's signed GETs of every object, 64 at once
  local size=$1 count last cfg=$WORK/curl.cfg cpu
  count=$(count_of "$size"); last=$((count - 1)); : >"$cfg"
  for i in $(seq 0 "$last"); do
    printf 'url = "%s/bench/d%s/train/img_%0*d_of_%d.npy"\noutput = /dev/null\n' \
      "$AWS_ENDPOINT_URL" "$size" "${#last}" "$i" "$count" >>"$cfg"
  done
  local start end
  start=$(date +%s.%N)
  cpu=$(cpu_of "$size" "$WORK/codes" curl -s --parallel --parallel-max 64 --aws-sigv4 "aws:amz:us-east-1:s3" \
    --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
    -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
    -K "$cfg" -w '%{http_code}\n')
  end=$(date +%s.%N)
  [ "$(grep -vc '^200$' "$WORK/codes")" = 0 ] || { echo "curl: $(sort "$WORK/codes" | uniq -c)"; exit 1; }
  echo "$(python3 -c "print(f'{$(bytes_of "$size") * $count / 2**20 / ($end - $start):.1f}')") $cpu"
}

raw_put_run() { # SIZE -> "MiB/s CLIENT_CPU SERVER_CPU" of curl's signed PUTs of one payload, 64 at once
  local size=$1 count cfg=$WORK/curl-put.cfg cpu start end
  count=$(count_of "$size"); : >"$cfg"
  head -c "$(bytes_of "$size")" /dev/urandom >"$WORK/payload"
  for i in $(seq 0 $((count - 1))); do
    printf 'url = "%s/bench/r%s/obj_%d"\nupload-file = "%s"\noutput = /dev/null\n' \
      "$AWS_ENDPOINT_URL" "$size" "$i" "$WORK/payload" >>"$cfg"
  done
  start=$(date +%s.%N)
  cpu=$(cpu_of "$size" "$WORK/codes" curl -s --parallel --parallel-max 64 --aws-sigv4 "aws:amz:us-east-1:s3" \
    --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
    -K "$cfg" -w '%{http_code}\n')
  end=$(date +%s.%N)
  [ "$(grep -vc '^200$' "$WORK/codes")" = 0 ] || { echo "curl PUT: $(sort "$WORK/codes" | uniq -c)"; exit 1; }
  echo "$(python3 -c "print(f'{$(bytes_of "$size") * $count / 2**20 / ($end - $start):.1f}')") $cpu"
}

median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "== dlio $(git rev-parse --short HEAD), s3dlio $(python3 -c 'import importlib.metadata as m; print(m.version("s3dlio"))'), s3torchconnectorclient $( [ $TORCH = 1 ] && python3 -c 'import importlib.metadata as m; print(m.version("s3torchconnectorclient"))' || echo '(not installed)'), s3s-fs 0.14.1, $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M') UTC"
CLIENTS="dlio_fork dlio_64 s3dlio s3torch raw"
label() { case $1 in dlio_fork) echo "dlio, fork window (8 x 64)";; dlio_64) echo "dlio, 64 in flight (8 x 8)";;
  s3dlio) echo "s3dlio get_many (64)";; s3torch) echo "s3torchconnector client (64 threads)";; raw) echo "raw GET loop, curl (64)";;
  dlio_gen) echo "dlio generation";; s3dlio_put) echo "s3dlio put_many (64)";;
  s3torch_put) echo "s3torchconnector put_object (64 threads)";; raw_put) echo "raw PUT loop, curl (64)";; esac; }
for size in $SIZES; do
  declare -A r=()
  record() { # KEY "MiB/s CLIENT SERVER"
    local mib cpu srv; read -r mib cpu srv <<<"$2"
    r[$1]+="$mib "; r[$1c]+="$cpu "; r[$1s]+="$srv "
  }
  for rep in $(seq "$REPS"); do
    # Writes: dlio generates the data set afresh (the objects are removed first); s3dlio puts as many.
    rm -rf "$WORK/root/bench/d$size" "$WORK/root/bench/w$size" "$WORK/root/bench/t$size" "$WORK/root/bench/r$size"
    record dlio_gen "$(dlio_run write "$size" ++workload.workflow.generate_data=True ++workload.workflow.train=False)"
    record s3dlio_put "$(python_run "$size" "$S3DLIO" write "$size")"
    [ $TORCH = 1 ] && record s3torch_put "$(python_run "$size" "$S3TORCH" write "$size")"
    record raw_put "$(raw_put_run "$size")"
    record s3dlio "$(python_run "$size" "$S3DLIO" read "$size")"
    record dlio_fork "$(dlio_run read "$size")"
    [ $TORCH = 1 ] && record s3torch "$(python_run "$size" "$S3TORCH" read "$size")"
    record dlio_64 "$(dlio_run read "$size" ++workload.storage.storage_options.prefetch_window=8)"
    record raw "$(raw_run "$size")"
  done
  echo
  echo "### $(count_of "$size") x $size objects"
  printf '| client | op | MiB/s (median) | client CPU s/GiB | server CPU s/GiB | runs MiB/s |\n|---|---|---:|---:|---:|---|\n'
  for key in $CLIENTS dlio_gen s3dlio_put s3torch_put raw_put; do
    [ -n "${r[$key]:-}" ] || continue
    op=read; case $key in dlio_gen|*_put) op=write;; esac
    printf '| %s | %s | %s | %s | %s | %s|\n' "$(label $key)" "$op" "$(echo "${r[$key]}" | median)" \
      "$(echo "${r[${key}c]}" | median)" "$(echo "${r[${key}s]}" | median)" "${r[$key]}"
  done
  m() { echo "${r[$1]}" | median; }
  ratio() { python3 -c "print(f'{$(m "$1") / $(m "$2"):.2f}x')"; }
  echo
  echo "dlio (64 in flight) / s3dlio: $(ratio dlio_64 s3dlio); / raw loop: $(ratio dlio_64 raw); dlio (fork window) / s3dlio: $(ratio dlio_fork s3dlio); generation / s3dlio put_many: $(ratio dlio_gen s3dlio_put)$( [ $TORCH = 1 ] && echo "; dlio (64) / s3torchconnector: $(ratio dlio_64 s3torch)")"
  # The issue's bars: rate against the raw loops, client CPU per GiB against the Python clients.
  c() { echo "${r[${1}c]}" | median; }
  verdict() { python3 -c "print('met' if $1 else 'NOT met')"; }
  echo "bars: read $(ratio dlio_64 raw) of raw GET (>= 0.95: $(verdict "$(m dlio_64) >= 0.95 * $(m raw)")); write $(ratio dlio_gen raw_put) of raw PUT (>= 0.95: $(verdict "$(m dlio_gen) >= 0.95 * $(m raw_put)"))"
  echo "      read CPU $(c dlio_64) s/GiB vs s3dlio $(c s3dlio)$( [ $TORCH = 1 ] && echo ", s3torchconnector $(c s3torch)") (<= 0.5x: $(verdict "$(c dlio_64) <= 0.5 * min($(c s3dlio)$( [ $TORCH = 1 ] && echo ", $(c s3torch)"))"))"
  echo "      write CPU $(c dlio_gen) s/GiB vs s3dlio $(c s3dlio_put)$( [ $TORCH = 1 ] && echo ", s3torchconnector $(c s3torch_put)") (<= 0.5x: $(verdict "$(c dlio_gen) <= 0.5 * min($(c s3dlio_put)$( [ $TORCH = 1 ] && echo ", $(c s3torch_put)"))"))"
  unset r
done
