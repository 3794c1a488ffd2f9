#!/usr/bin/env bash
# Characterise a real training job and score its emulation (#17): a PyTorch DataLoader with two
# worker processes over npy files (bench/programs/torch_loader.py, run with the reference
# virtualenv's torch) is traced with `dlio trace`, characterised with `dlio characterize`,
# replayed with `dlio run --trace` and scored with `dlio fidelity`; then the same workload with
# what the paper's method keeps, the medians only (one request size, the median pause as the
# compute, no loader time per sample), is replayed and scored the same way. The tests'
# three numpy programs (crates/cli/tests/programs) are run the same way with the release build.
#
# Usage: bash bench/fidelity.sh [DIR]   (default /work/bench-tmp)
# Needs ../shared/bench/reference-dlio.sh's virtualenv (torch) at $VENV (/opt/dlio-reference/venv).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
DIR=${1:-/work/bench-tmp}/fidelity
VENV=${VENV:-/opt/dlio-reference/venv}
[ -x "$VENV/bin/python" ] || { echo "no virtualenv with torch at $VENV: run ../shared/bench/reference-dlio.sh setup"; exit 1; }
cargo build --release --locked -p dlio -p dlio-interpose >/dev/null
DLIO=$PWD/target/release/dlio
rm -rf "$DIR" && mkdir -p "$DIR"

score() { # NAME TRACES WORKLOAD -> prints the fidelity line
  local name=$1 traces=$2 workload=$3
  "$DLIO" run "workload=$workload" "++workload.dataset.data_folder=$DIR/$name/emulated" \
    "++workload.checkpoint.checkpoint_folder=$DIR/$name/checkpoints" \
    "hydra.run.dir=$DIR/$name/run" --trace >"$DIR/$name.run.log" 2>&1
  "$DLIO" fidelity "$traces" "$DIR/$name/run" >"$DIR/$name.fidelity.txt"
  python3 - "$DIR/$name/run/fidelity.json" "$name" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]:<28} cosine {f['cosine_similarity']:.4f}  end-to-end error "
      f"{100 * f['end_to_end_error']:5.2f}%  fetch CDF similarity {f['fetch_cdf_similarity']:.3f}  "
      f"(real {f['real']['end_to_end_s']:.3f} s, emulated {f['emulated']['end_to_end_s']:.3f} s)")
PY
}

medians_only() { # WORKLOAD.yaml CHARACTERIZE.json OUT.yaml
  python3 - "$@" <<'PY'
import json, sys, yaml
src, char, out = sys.argv[1:]
w = yaml.safe_load(open(src))
c = json.load(open(char))
r = w["reader"]
for key in ("sample_requests", "transfer_size_distribution", "preprocess_time", "transfer_size"):
    r.pop(key, None)
sizes = sorted(s["size"] for s in c["transfer_sizes"] for _ in range(s["count"]))
median = sizes[len(sizes) // 2]
if median < w["dataset"]["record_length_bytes"]:
    r["transfer_size"] = median
w["train"]["computation_time"] = round(c["compute_s"]["median"], 6)
yaml.safe_dump(w, open(out, "w"), sort_keys=False)
PY
}

run_case() { # NAME PYTHON PROGRAM
  local name=$1 py=$2 prog=$3
  "$py" "$prog" "$DIR/$name/data" --make
  "$DLIO" trace --out "$DIR/$name/traces" -- "$py" "$prog" "$DIR/$name/data" 2>"$DIR/$name.trace.log"
  "$DLIO" characterize "$DIR/$name/traces" --out "$DIR/$name/workload/characterized.yaml" >"$DIR/$name.characterize.txt"
  score "$name" "$DIR/$name/traces" "$DIR/$name/workload/characterized.yaml"
  medians_only "$DIR/$name/workload/characterized.yaml" "$DIR/$name/workload/characterize.json" \
    "$DIR/$name/workload/medians.yaml"
  score "$name-medians" "$DIR/$name/traces" "$DIR/$name/workload/medians.yaml"
}

echo "== dlio $(git rev-parse --short HEAD), $(date -u +%F)"
run_case torch_loader "$VENV/bin/python" bench/programs/torch_loader.py
for p in npz_loop chunked_reader thread_pool; do
  run_case "$p" python3 "crates/cli/tests/programs/$p.py"
done
echo "(feature tables: $DIR/*.fidelity.txt; derived workloads: $DIR/*/workload/)"
[ "${KEEP:-0}" = 1 ] || rm -rf "$DIR"/*/data "$DIR"/*/emulated "$DIR"/*/checkpoints
