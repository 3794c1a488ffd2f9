#!/usr/bin/env bash
# dlio analyze on a 10^7-event trace: events/s and peak memory (bounded-memory check).
#   bash bench/analyze.sh            # EVENTS=10000000 RANKS=2 WORK=/tmp/dlio-bench-analyze
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
EVENTS=${EVENTS:-10000000}
RANKS=${RANKS:-2}
WORK=${WORK:-/tmp/dlio-bench-analyze}
cargo build --release -q -p dlio-analyze --example bench_analyze
BIN=${CARGO_TARGET_DIR:-target}/release/examples/bench_analyze
rm -rf "$WORK"; mkdir -p "$WORK/trace"
echo "== loadavg before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
/usr/bin/time -f "generation (dlio-trace writer): wall=%es cpu=%Us+%Ss maxrss=%MKB" "$BIN" gen "$WORK/trace" "$EVENTS" "$RANKS"
du -sh "$WORK/trace"
/usr/bin/time -f "analysis: wall=%es cpu=%Us+%Ss maxrss=%MKB" "$BIN" run "$WORK/trace" "$WORK/report" | tail -3
rm -rf "$WORK"
