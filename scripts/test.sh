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

echo "== cargo test (workspace)"
cargo test --workspace --locked
