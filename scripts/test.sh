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

if ! command -v moto_server >/dev/null || ! python3 -c "import boto3" 2>/dev/null; then
  echo "== installing moto's S3 server and boto3 for the S3 engine tests"
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore 'moto[server]' boto3 \
    || python3 -m pip install --quiet --disable-pip-version-check 'moto[server]' boto3
fi

if ! command -v mpirun >/dev/null || ! dpkg -s libopenmpi-dev libclang-dev >/dev/null 2>&1; then
  echo "== installing Open MPI for the MPI tests (feature mpi)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends libopenmpi-dev openmpi-bin libclang-dev >/dev/null
fi

if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  echo "== installing chromium for the analysis.html test (dlio-analyze)"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium) >/dev/null \
    || echo "   (chromium not installed: the headless-browser check will be skipped)"
fi

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
if make_venv "$TOOLS/dftracer" "dftracer.python, numpy" dftracer==2.2.0 pydftracer==2.0.6 dftracer-utils==0.0.14 numpy; then
  export DLIO_DFTRACER_VENV=$TOOLS/dftracer
else
  echo "   (dftracer not installed: the dftracer tool checks will be skipped)"
fi
if make_venv "$TOOLS/dfanalyzer" dftracer.analyzer dftracer-utils==0.0.12 dftracer-analyzer==0.0.9; then
  export DLIO_DFANALYZER_VENV=$TOOLS/dfanalyzer
else
  echo "   (dfanalyzer not installed: the dfanalyzer comparison will be skipped)"
fi

# The suite writes up to about 2 GiB under TMPDIR at once (the 1 GiB checkpoint test); say what
# there is, so that a full disk reads as one.
echo "== disk: $(df -h "${TMPDIR:-/tmp}" | awk 'NR==2 {print $4 " free under " $6}') (TMPDIR), $(df -h . | awk 'NR==2 {print $4 " free under " $6}') (checkout)"

echo "== cargo build -p dlio-interpose (dlio trace's LD_PRELOAD library, used by tests/characterize.rs)"
cargo build --locked -p dlio-interpose

echo "== cargo test (workspace)"
cargo test --workspace --locked --features dlio-format/hdf5

echo "== cargo test: the same binary under mpirun (feature mpi)"
cargo test --locked -p dlio --features mpi --test mpi
