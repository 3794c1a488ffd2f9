#!/usr/bin/env bash
# Counts the suite's skips and ignored tests and fails on any that scripts/allowed-skips does
# not list. Usage: count-skips.sh ALLOWED SKIP_LOG CARGO_OUTPUT...
#   SKIP_LOG: the lines dlio_testkit::skip appended (key<TAB>test<TAB>what).
#   CARGO_OUTPUT: cargo test's output, for its `test NAME ... ignored` lines.
# Ends with the line `skipped: N (allowed: KEY xCOUNT, ...)`.
set -euo pipefail
allowed=$1 log=$2
shift 2
keys=$(grep -vE '^\s*(#|$)' "$allowed" | awk '{print $1}')
is_allowed() { grep -qxF -- "$1" <<<"$keys"; }

bad=0
# Ignored tests: `test NAME ... ignored` (with or without a reason after it).
ignored=0
while IFS= read -r name; do
  [ -n "$name" ] || continue
  ignored=$((ignored + 1))
  if ! is_allowed "ignored:$name"; then
    echo "NOT ALLOWED: the test $name is ignored (#[ignore]): run it, or list it in $allowed with why" >&2
    bad=1
  fi
done < <(cat "$@" 2>/dev/null | sed -nE 's/^test (.+) \.\.\. ignored.*$/\1/p')

declare -A counts=()
total=0
while IFS=$'\t' read -r key test what; do
  [ -n "$key" ] || continue
  total=$((total + 1))
  counts[$key]=$(( ${counts[$key]:-0} + 1 ))
  if ! is_allowed "$key"; then
    echo "NOT ALLOWED: $test skipped [$key]: $what" >&2
    bad=1
  fi
done <"$log"

summary=()
for key in "${!counts[@]}"; do summary+=("$key x${counts[$key]}"); done
listed=$(grep -vE '^\s*(#|$)' "$allowed" | awk '$1 !~ /^ignored:/ {printf "%s%s", sep, $1; sep=", "}')
echo "ignored: $ignored"
if [ ${#summary[@]} -eq 0 ]; then
  echo "skipped: $total (allowed: $listed)"
else
  echo "skipped: $total ($(IFS=,; echo "${summary[*]}" | sed 's/,/, /g'); allowed: $listed)"
fi
exit $bad
