#!/usr/bin/env bash
# The reliability fuzzers at full budget (the test suite runs them with a small fixed one):
#   - configs: mutated built-in workload files and random overrides, loaded, validated and set
#     up as a run would before any I/O (crates/trainer/tests/fuzz_config.rs), CONFIG_CASES per
#     property (two properties);
#   - files: every format's reader, decoded and undecoded, on damaged copies of a generated file
#     (crates/format/tests/fuzz_readers.rs), FILE_CASES per format and semantics (20 pairs with
#     HDF5).
# A panic, a signal or a read that hangs fails the run; the figures printed are the cases run.
#
#   bash bench/fuzz.sh                         # 10^5 configs per property, 10^4 files in all
#   SEED=7 bash bench/fuzz.sh                  # another seed (default: a random one, printed)
#
# Knobs: CONFIG_CASES=100000 FILE_CASES=500 SEED=<random>
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
CONFIG_CASES=${CONFIG_CASES:-100000}
FILE_CASES=${FILE_CASES:-500}
SEED=${SEED:-$RANDOM$RANDOM}
cd "$REPO"

cargo test --release --locked -p dlio-trainer --test fuzz_config --no-run >/dev/null 2>&1
cargo test --release --locked -p dlio-format --features hdf5 --test fuzz_readers --no-run >/dev/null 2>&1
echo "seed $SEED"
start=$(date +%s)
DLIO_FUZZ_SEED=$SEED DLIO_FUZZ_CASES=$CONFIG_CASES \
  cargo test --release --locked -p dlio-trainer --test fuzz_config -- --test-threads 2
configs_done=$(date +%s)
DLIO_FUZZ_SEED=$SEED DLIO_FUZZ_CASES=$FILE_CASES \
  cargo test --release --locked -p dlio-format --features hdf5 --test fuzz_readers
files_done=$(date +%s)

pairs=20
echo
echo "configs: $((2 * CONFIG_CASES)) cases (mutated files + overrides), 0 panics, $((configs_done - start)) s"
echo "files:   $((pairs * FILE_CASES)) damaged files ($pairs format x semantics pairs), 0 panics, 0 hangs, $((files_done - configs_done)) s"
echo "seed $SEED"
