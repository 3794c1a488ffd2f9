#!/usr/bin/env bash
# Characterisation on programs it has never seen (#30): every program of bench/corpus/programs
# (114 training-style programs: PyTorch DataLoader, tf.data, h5py, numpy memmap, PIL, pyarrow,
# pickle, torch.load, json lines, pandas csv, zarr-like chunks, webdataset tars, random crops,
# pools of threads and processes, weighted draws with replacement, HDF5 opened per worker, tf.data
# cache(), readv by token budget, staged shard caches, spawned workers, FFCV-like index files,
# Arrow IPC and datasets, Kaldi archives, shared-memory rings, gzip TFRecords and json lines,
# SQLite blobs, stored zips, gzip-filtered HDF5 curricula, CIFAR's fixed-length records, packed
# token streams, two ranks of a LiDAR loader, DLRM rows, video segments, tar.gz shards in a
# process pool, tf.data snapshots, variable-length HDF5, hive-partitioned parquet curricula,
# shelve stores, object-store range reads, bz2 json lines, tf.data CsvDataset, mixed-format
# ConcatDatasets, page files read with os.preadv, MDS shards, a B-tree page file, FASTQ through
# tf.data.from_generator, fairseq indexed datasets, sharded checkpoints resumed, a spectrogram
# cache written in the first epoch, multi-page TIFF stacks, point clouds with JSON sidecars and
# dropped records, safetensors fine-tunes with rotated checkpoints, h5py generators in tf.data,
# CSR graphs sampled through memory maps, a RAM budget that keeps half the shards, a DALI-like
# reader of class folders in list order, tile trees rescanned every epoch, packed blobs behind
# a CSV index, torch.load of a memory-mapped store, ...)
# and the twelve of crates/cli/tests/programs is made,
# traced with `dlio trace`, characterised with `dlio characterize`, replayed with
# `dlio run --trace` (release build) and scored twice: by `dlio fidelity` (its verdict and the
# bounds that failed; the program is traced twice, and the second trace is its `--repeat`, how
# far the program is from itself) and by bench/corpus/score.py, an independent scorer written apart from
# dlio (numpy only; its own reading of both traces, its own bursts and KS).
#
# Usage: bash bench/fidelity.sh [DIR] [NAME...]   (DIR default /work/bench-tmp)
# Programs that need torch or tensorflow run with $VENV/bin/python (default
# /opt/dlio-reference/venv, made by ../shared/bench/reference-dlio.sh setup, plus pyarrow);
# without it they are listed as not run. KEEP=1 keeps the data sets; TRACE_LIMIT_S (default 600)
# stops a traced run that goes on longer.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
DIR=${1:-/work/bench-tmp}/fidelity
shift || true
VENV=${VENV:-/opt/dlio-reference/venv}
cargo build --release --locked -p dlio -p dlio-interpose --features dlio-format/hdf5 >/dev/null
DLIO=$ROOT/target/release/dlio
rm -rf "$DIR" && mkdir -p "$DIR"

programs=("$@")
if [ ${#programs[@]} -eq 0 ]; then
  for p in bench/corpus/programs/*.py crates/cli/tests/programs/*.py; do programs+=("$p"); done
fi

# A name is a program of the corpus or of the characterize tests; a name that is neither
# stops the run before anything is traced.
for i in "${!programs[@]}"; do
  prog=${programs[$i]}
  for place in "$prog" "bench/corpus/programs/$prog.py" "crates/cli/tests/programs/$prog.py"; do
    if [ -f "$place" ]; then programs[$i]=$place; continue 2; fi
  done
  echo "fidelity.sh: no program $prog (a path, or a name in bench/corpus/programs or crates/cli/tests/programs)" >&2
  exit 2
done

echo "== dlio $(git rev-parse --short HEAD), $(date -u '+%F %H:%M') UTC, release build"
printf '%-24s %-8s %-8s %-8s %-60s %s\n' program dlio repeat score.py "dlio's failed bounds" "score.py's failed bounds"
for prog in "${programs[@]}"; do
  name=$(basename "$prog" .py)
  d=$DIR/$name
  mkdir -p "$d"
  py=python3
  needs=$(python3 "$prog" /nonexistent --truth 2>/dev/null \
    | python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin).get("needs", [])))' 2>/dev/null || true)
  if [ -n "$needs" ]; then
    if [ -x "$VENV/bin/python" ]; then py=$VENV/bin/python; else
      printf '%-24s not run: needs %s (no virtualenv at %s)\n' "$name" "$needs" "$VENV"; continue
    fi
  fi
  "$py" "$prog" "$d/data" --make >"$d/make.log" 2>&1
  # Each traced run is stopped after TRACE_LIMIT_S seconds (default 600; the corpus programs
  # run in seconds), it and its children (timeout signals its process group): a program that
  # hangs under the tracer is reported, and the rest of the corpus goes on.
  trace_limit=${TRACE_LIMIT_S:-600}
  if ! timeout --kill-after=10 "$trace_limit" "$DLIO" trace --out "$d/traces" -- "$py" "$prog" "$d/data" >"$d/trace.log" 2>&1; then
    printf '%-24s the program failed or ran over %s s under dlio trace (%s)\n' "$name" "$trace_limit" "$d/trace.log"; continue
  fi
  # A second run of the program, traced the same way: how far it is from itself.
  if ! timeout --kill-after=10 "$trace_limit" "$DLIO" trace --out "$d/traces2" -- "$py" "$prog" "$d/data" >"$d/trace2.log" 2>&1; then
    printf '%-24s the program failed or ran over %s s under dlio trace, second run (%s)\n' "$name" "$trace_limit" "$d/trace2.log"; continue
  fi
  if ! "$DLIO" characterize "$d/traces" --out "$d/workload/characterized.yaml" >"$d/characterize.log" 2>&1; then
    printf '%-24s characterize failed: %s\n' "$name" "$(tail -1 "$d/characterize.log")"; continue
  fi
  # A replay that runs ten times as long as the program's traced run (and over a minute) is
  # stopped and reported: a wrong workload must not hold up the rest of the corpus.
  traced_s=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(int(m.get("wall_seconds", 30)))' \
    "$d/traces/dlio-trace.json" 2>/dev/null || echo 30)
  limit_s=$(( traced_s * 10 > 60 ? traced_s * 10 : 60 ))
  status=0
  timeout "$limit_s" "$DLIO" run "workload=$d/workload/characterized.yaml" "++workload.dataset.data_folder=$d/emulated" \
      "++workload.checkpoint.checkpoint_folder=$d/checkpoints" "hydra.run.dir=$d/run" --trace \
      >"$d/run.log" 2>&1 || status=$?
  if [ "$status" = 124 ]; then
    printf '%-24s the replay ran over %s s (ten times the traced run), stopped: the workload is wrong\n' "$name" "$limit_s"; continue
  elif [ "$status" != 0 ]; then
    printf '%-24s the replay failed: %s\n' "$name" "$(grep -m1 -i error "$d/run.log" || tail -1 "$d/run.log")"; continue
  fi
  "$DLIO" fidelity "$d/traces" "$d/run" >"$d/fidelity.txt" 2>&1 || true
  mkdir -p "$d/repeat"
  "$DLIO" fidelity "$d/traces" "$d/run" --repeat "$d/traces2" --out "$d/repeat" \
    >"$d/fidelity-repeat.txt" 2>&1 || true
  python3 bench/corpus/score.py "$d/traces" "$d/run" --real-data "$d/data" \
    --emulated-data "$d/emulated" --json "$d/score.json" >"$d/score.txt" 2>&1 || true
  python3 - "$d" "$name" <<'PY' || true
import json, os, sys
d, name = sys.argv[1:]
f = json.load(open(os.path.join(d, "run", "fidelity.json")))
try:
    s = json.load(open(os.path.join(d, "score.json")))
    sv, sf = ("pass" if s["pass"] else "FAIL"), ", ".join(s["failed"]) or "-"
except (OSError, ValueError, KeyError):
    sv, sf = "error", "-"
def off(b):
    e = b["error"]  # null: infinite (the real side had none of it)
    if e is None:
        return f"{b['name']} inf"
    return f"{b['name']} {100 * e:.0f}%" if b["measure"] == "relative_error" else f"{b['name']} {e:.2f}"
names = {b["name"] for b in f["bounds"]}
failed = ", ".join([off(b) for b in f["bounds"] if not b["pass"]]
                   + [x for x in f["failed"] if x not in names]) or "-"
try:
    rv = json.load(open(os.path.join(d, "repeat", "fidelity.json")))["verdict"]
except (OSError, ValueError, KeyError):
    rv = "error"
print(f"{name:<24} {f['verdict']:<8} {rv:<8} {sv:<8} {failed:<60} {sf}")
PY

done
echo "(dlio: the verdict on the bounds alone; repeat: with the program's second run as --repeat;"
echo " per program: $DIR/NAME/{fidelity.txt,fidelity-repeat.txt,score.txt,workload/characterized.yaml})"
[ "${KEEP:-0}" = 1 ] || rm -rf "$DIR"/*/data "$DIR"/*/emulated "$DIR"/*/checkpoints
