#!/usr/bin/env bash
# The whole test suite, on a fresh Debian machine with a Rust toolchain.
# Installs what the tests need (numpy for the interop tests), then runs every test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! python3 -c "import numpy" 2>/dev/null; then
  echo "== installing numpy for the Python interop tests"
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore numpy \
    || python3 -m pip install --quiet --disable-pip-version-check numpy
fi

if ! python3 -c "import h5py, pandas, PIL, pyarrow, yaml" 2>/dev/null; then
  echo "== installing h5py, pandas, Pillow and pyarrow for the format interop tests"
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore h5py pandas pillow pyarrow pyyaml \
    || python3 -m pip install --quiet --disable-pip-version-check h5py pandas pillow pyarrow pyyaml
fi

if ! pkg-config --exists hdf5 2>/dev/null; then
  echo "== installing libhdf5-dev for the hdf5 format (feature dlio-format/hdf5)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends libhdf5-dev pkg-config >/dev/null
fi

if ! python3 -c "import moto.server, boto3, flask" 2>/dev/null; then
  echo "== installing moto's S3 server and boto3 for the S3 engine tests"
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore 'moto[server]' boto3 \
    || python3 -m pip install --quiet --disable-pip-version-check 'moto[server]' boto3
fi
# The S3 tests start moto themselves (crates/testkit/src/moto_server.py); they fail without it.
python3 -c "import moto.server, boto3, flask" \
  || { echo "moto's S3 server cannot be imported after installing it: the S3 tests would fail" >&2; exit 1; }

if ! command -v mpirun >/dev/null || ! dpkg -s libopenmpi-dev libclang-dev >/dev/null 2>&1; then
  echo "== installing Open MPI for the MPI tests (feature mpi)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends libopenmpi-dev openmpi-bin libclang-dev >/dev/null
fi

if ! command -v chromium >/dev/null 2>&1; then
  echo "== installing chromium for the analysis.html test (dlio-analyze)"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium) >/dev/null
fi
chromium --headless --no-sandbox --disable-gpu --version >/dev/null \
  || { echo "chromium does not start: the analysis.html test would fail" >&2; exit 1; }

# dftracer's own tools, to check our traces with them (crates/cli/tests/dftracer_tools.rs).
# Two virtualenvs, pinned: dftracer-analyzer 0.0.9 (the newest) needs dftracer-utils 0.0.12,
# while dftracer 2.2.0's tracer and the current tools come with dftracer-utils 0.0.14.
TOOLS=${DLIO_TEST_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/dlio-test-tools}
make_venv() { # DIR IMPORTS PACKAGES...
  local dir=$1 imports=$2; shift 2
  [ -x "$dir/bin/python" ] && "$dir/bin/python" -c "import $imports" 2>/dev/null && return 0
  rm -rf "$dir"
  python3 -m venv "$dir" 2>/dev/null || {
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
    python3 -m venv "$dir"
  }
  "$dir/bin/pip" install --quiet --disable-pip-version-check "$@"
}
echo "== installing dftracer's tools (dftracer 2.2.0, dftracer-utils, dftracer-analyzer) in $TOOLS"
make_venv "$TOOLS/dftracer" "dftracer.python, numpy" dftracer==2.2.0 pydftracer==2.0.6 dftracer-utils==0.0.14 numpy \
  || { echo "dftracer's tools could not be installed in $TOOLS/dftracer: crates/cli/tests/dftracer_tools.rs would fail" >&2; exit 1; }
export DLIO_DFTRACER_VENV=$TOOLS/dftracer
make_venv "$TOOLS/dfanalyzer" dftracer.analyzer dftracer-utils==0.0.12 dftracer-analyzer==0.0.9 \
  || { echo "dfanalyzer could not be installed in $TOOLS/dfanalyzer: crates/cli/tests/dftracer_tools.rs would fail" >&2; exit 1; }
export DLIO_DFANALYZER_VENV=$TOOLS/dfanalyzer

# The suite writes up to about 2 GiB under TMPDIR at once (the 1 GiB checkpoint test); say what
# there is, so that a full disk reads as one.
echo "== disk: $(df -h "${TMPDIR:-/tmp}" | awk 'NR==2 {print $4 " free under " $6}') (TMPDIR), $(df -h . | awk 'NR==2 {print $4 " free under " $6}') (checkout)"

echo "== cargo build -p dlio-interpose (dlio trace's LD_PRELOAD library, used by tests/characterize.rs)"
cargo build --locked -p dlio-interpose

# Every skip goes to this log (crates/testkit/src/skip.rs); the cargo output is kept for the
# ignored tests. Both are checked against scripts/allowed-skips at the end.
# No incremental caches: the suite builds once, and they double the target folder.
export CARGO_INCREMENTAL=0
LOGS=$(mktemp -d)
trap 'rm -rf "$LOGS"' EXIT
export DLIO_SKIP_LOG=$LOGS/skips
: >"$DLIO_SKIP_LOG"
status=0

echo "== cargo test (workspace)"
cargo test --workspace --locked --no-fail-fast --features dlio-format/hdf5 2>&1 | tee "$LOGS/workspace.out" || status=1

echo "== cargo test: the same binary under mpirun (feature mpi)"
cargo test --locked --no-fail-fast -p dlio --features mpi,hdf5 --test mpi 2>&1 | tee "$LOGS/mpi.out" || status=1

bash scripts/count-skips.sh scripts/allowed-skips "$DLIO_SKIP_LOG" "$LOGS"/*.out || status=1
exit $status
