#!/usr/bin/env bash
# dftracer-utils' dftracer_gen_dlio_config on the corpus's traces, beside our characterisation
# (#30). For each program folder that bench/fidelity.sh left (NAME/traces, the real program's
# `dlio trace` output; NAME/data, its data set; NAME/run/fidelity.json and NAME/score.json, our
# scores), the tool is run twice:
#   as-is:    on NAME/traces, untouched;
#   remapped: on a copy of them in the tool's input dialect (one event a line, integer ts and
#             dur, gzip: .pfw.gz) with an --event-map that takes the program's most frequent
#             read call on its data set (cat lowercase: the tool's aggregation lowercases
#             categories) for the DataLoader's fetch_block span, which POSIX-only traces lack.
# The YAML it writes (as-is first, else remapped) is replayed with `dlio run --trace` as
# bench/fidelity.sh replays ours (nothing in it changed; only the data and checkpoint folders
# are set on the command line) and scored by `dlio fidelity` and bench/corpus/score.py.
# One line per program: the tool's outcome, the replay's verdict and failed bounds, and ours.
#
# Usage: bash bench/dftracer-gen.sh [FIDELITY_DIR] [NAME...]
#   FIDELITY_DIR default /work/bench-tmp/fidelity (a bench/fidelity.sh run made with KEEP=1, so
#   that NAME/data is still there for score.py). $DLIO: the dlio binary (default
#   target/release/dlio; this script builds nothing). $GEN: dftracer_gen_dlio_config (default:
#   the one on PATH, else ~/.cache/dlio-test-tools/dftracer/bin/). Output per program:
#   NAME/dftracer-gen/{as-is.log,remapped.log,*.yaml,run.log,fidelity.txt,score.txt}.
#   KEEP=1 keeps the replays' data sets.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
DIR=${1:-/work/bench-tmp/fidelity}
shift || true
DLIO=${DLIO:-$ROOT/target/release/dlio}
GEN=${GEN:-$(command -v dftracer_gen_dlio_config || echo "$HOME/.cache/dlio-test-tools/dftracer/bin/dftracer_gen_dlio_config")}
[ -x "$DLIO" ] || { echo "no dlio binary at $DLIO (build it, or set DLIO)" >&2; exit 2; }
[ -x "$GEN" ] || { echo "no dftracer_gen_dlio_config at $GEN (set GEN)" >&2; exit 2; }

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for t in "$DIR"/*/traces; do [ -d "$t" ] && names+=("$(basename "$(dirname "$t")")"); done
fi

# The tool's outcome from its log: the YAML's computation_time type, or its error.
outcome() {  # LOG YAML
  if [ -s "$2" ]; then
    printf 'YAML (computation_time %s, %s)' \
      "$(python3 -c 'import sys; import re; t=open(sys.argv[1]).read(); m=re.search(r"computation_time:\s*\n\s*type:\s*(\S+)", t); print(m.group(1) if m else "?")' "$2")" \
      "$(grep -m1 -o 'computation_times: [0-9]* samples' "$1" || echo '? samples')"
  else
    local idx err
    idx=$(grep -o 'indexed=[0-9]* skipped=[0-9]* failed=[0-9]*' "$1" | tail -1 || true)
    err=$(grep -m1 'ERROR' "$1" | sed -e 's/.*ERROR *//' -e 's/ ([a-z_]*\.cpp:[0-9]*)$//' -e 's/ found in .*/ found/' || true)
    printf 'no YAML: %s [%s]' "${err:-exit status, no message}" "${idx:-index ?}"
  fi
}

echo "== dlio $(git rev-parse --short HEAD 2>/dev/null || echo ?), $("$GEN" --version 2>/dev/null | head -1 | sed 's/^/dftracer_gen_dlio_config /'), $(date -u '+%F %H:%M') UTC"
printf '%-24s | %s | %s | %s\n' program "dftracer_gen_dlio_config (as-is; remapped)" \
  "its replay: dlio, score.py" "ours: dlio, score.py"
for name in "${names[@]}"; do
  d=$DIR/$name
  o=$d/dftracer-gen
  [ -d "$d/traces" ] || { printf '%-24s | no traces in %s\n' "$name" "$d"; continue; }
  rm -rf "$o" && mkdir -p "$o"

  # As-is: the traces exactly as `dlio trace` wrote them.
  "$GEN" -d "$d/traces" -o "$o/as-is.yaml" --index-dir "$o/index-as-is" >"$o/as-is.log" 2>&1 || true
  asis=$(outcome "$o/as-is.log" "$o/as-is.yaml")

  # Remapped: the same events in the tool's dialect, the data reads standing for fetch_block.
  call=$(python3 - "$d/traces" "$o/traces" "$d/data" <<'PY'
import collections, glob, gzip, json, os, sys
src, dst, data = sys.argv[1:]
data = os.path.realpath(data) + os.sep
reads = {"read", "pread", "pread64", "readv", "preadv", "preadv64", "preadv2", "fread"}
os.makedirs(dst, exist_ok=True)
calls = collections.Counter()
for path in sorted(glob.glob(os.path.join(src, "*.pfw"))):
    with open(path) as f, gzip.open(os.path.join(dst, os.path.basename(path) + ".gz"), "wt") as out:
        out.write("[\n")
        for line in f:
            line = line.strip().rstrip(",")
            if not line.startswith("{"):
                continue
            e = json.loads(line)
            for k in ("ts", "dur"):
                if isinstance(e.get(k), float):
                    e[k] = int(round(e[k]))
            out.write(json.dumps(e, separators=(",", ":")) + "\n")
            fname = (e.get("args") or {}).get("fname", "")
            if e.get("name") in reads and os.path.realpath(fname).startswith(data):
                calls[e["name"]] += 1
        out.write("]\n")
print(calls.most_common(1)[0][0] if calls else "read")
PY
)
  printf 'fetch_block:\n  cat: posix\n  name: %s\n' "$call" >"$o/event-map.yaml"
  "$GEN" -d "$o/traces" -o "$o/remapped.yaml" --index-dir "$o/index-remapped" \
    --event-map "$o/event-map.yaml" >"$o/remapped.log" 2>&1 || true
  remapped="posix/$call -> $(outcome "$o/remapped.log" "$o/remapped.yaml")"
  rm -rf "$o/traces" "$o"/index-*

  yaml=
  if [ -s "$o/as-is.yaml" ]; then yaml=$o/as-is.yaml; elif [ -s "$o/remapped.yaml" ]; then yaml=$o/remapped.yaml; fi
  replay=
  if [ -z "$yaml" ]; then
    replay="nothing to replay"
  elif ! "$DLIO" run "workload=$yaml" "++workload.dataset.data_folder=$o/emulated" \
      "++workload.checkpoint.checkpoint_folder=$o/checkpoints" "hydra.run.dir=$o/run" --trace \
      >"$o/run.log" 2>&1; then
    replay="dlio run refuses $(basename "$yaml"): $(grep -m1 -i error "$o/run.log" | sed 's/^error: workload file [^,]*, //' || tail -1 "$o/run.log")"
  else
    "$DLIO" fidelity "$d/traces" "$o/run" >"$o/fidelity.txt" 2>&1 || true
    python3 bench/corpus/score.py "$d/traces" "$o/run" --real-data "$d/data" \
      --emulated-data "$o/emulated" --json "$o/score.json" >"$o/score.txt" 2>&1 || true
  fi

  python3 - "$d" "$o" "$name" "$asis" "$remapped" "$replay" <<'PY' || true
import json, os, sys
d, o, name, asis, remapped, replay = sys.argv[1:]
def off(b):
    e = b["error"]  # null: infinite (the real side had none of it)
    if e is None:
        return f"{b['name']} inf"
    return f"{b['name']} {100 * e:.0f}%" if b["measure"] == "relative_error" else f"{b['name']} {e:.2f}"
def scores(run, score):
    try:
        f = json.load(open(os.path.join(run, "fidelity.json")))
        dv = f"{f['verdict']} ({', '.join(off(b) for b in f['bounds'] if not b['pass']) or '-'})"
    except (OSError, ValueError, KeyError):
        dv = "no fidelity.json"
    try:
        s = json.load(open(score))
        sv = f"{'pass' if s['pass'] else 'FAIL'} ({', '.join(s['failed']) or '-'})"
    except (OSError, ValueError, KeyError):
        sv = "no score.json"
    return f"{dv}, {sv}"
theirs = replay or scores(os.path.join(o, "run"), os.path.join(o, "score.json"))
ours = scores(os.path.join(d, "run"), os.path.join(d, "score.json"))
print(f"{name:<24} | {asis}; {remapped} | {theirs} | {ours}")
PY
  [ "${KEEP:-0}" = 1 ] || rm -rf "$o/emulated" "$o/checkpoints"
done
echo "(per program: $DIR/NAME/dftracer-gen/{as-is.log,remapped.log,event-map.yaml,*.yaml,run.log})"
