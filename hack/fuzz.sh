#!/usr/bin/env bash
# Runs every Go fuzz target in the module for a short time each.
# Usage: hack/fuzz.sh [duration]   (default 10s)
set -euo pipefail
t=${1:-10s}
cd "$(dirname "$0")/.."
fail=0
while IFS= read -r file; do
  pkg=./$(dirname "$file")
  for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)' "$file" | awk '{print $2}'); do
    echo "fuzz $pkg $target ($t)"
    if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$t" "$pkg" >/tmp/fuzz.$$.log 2>&1; then
      cat /tmp/fuzz.$$.log
      fail=1
    fi
  done
done < <(git ls-files '*_test.go' 2>/dev/null | xargs grep -l '^func Fuzz' || true)
rm -f /tmp/fuzz.$$.log
exit $fail
