#!/usr/bin/env bash
# The static checks, before any test: ruff (lint, import order, statements per function; the
# settings in pyproject.toml's [tool.ruff]) over the code, the tests, the benchmarks and scripts,
# and mypy over src/vlmocr (pyproject.toml's [tool.mypy]: strict on the spine) with a cache kept
# between runs (~/.cache/vlmocr/mypy: seconds when little changed, not a cold minute).
# scripts/test.sh runs it first; .pre-commit-config.yaml runs the same before a commit.
#
#   bash scripts/check.sh          both; exit 1 when either finds something
#   bash scripts/check.sh --fix    ruff puts the imports in order (and what else it can) first
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
fix=()
[[ "${1:-}" == "--fix" ]] && fix=(--fix)
python -m ruff check --quiet "${fix[@]}" src tests benchmarks scripts || { echo "check.sh: ruff found the above" >&2; status=1; }
cache="${XDG_CACHE_HOME:-$HOME/.cache}/vlmocr/mypy"
mkdir -p "$cache"
if ! out=$(python -m mypy src/vlmocr --cache-dir "$cache" 2>&1); then
  echo "$out" >&2
  echo "check.sh: mypy found the above" >&2
  status=1
fi
exit "$status"
