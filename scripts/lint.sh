#!/usr/bin/env bash
# House habits: ruff (lint and format check) and mypy over the crawler's code.
#
#   scripts/lint.sh          (run by `make lint` and `make test`, so by .ci/run)
#
# Configuration: [tool.ruff] and [tool.mypy] in pyproject.toml. `.venv/bin/ruff format squall agents topology`
# formats; `.venv/bin/ruff check --fix ...` fixes what it can. Exit status: non-zero if any check fails.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BIN=.venv/bin
PATHS=(squall agents topology)
rc=0
echo "lint: ruff check ${PATHS[*]}"
"$BIN/ruff" check "${PATHS[@]}" || rc=1
echo "lint: ruff format --check ${PATHS[*]}"
"$BIN/ruff" format --check "${PATHS[@]}" || rc=1
echo "lint: mypy ${PATHS[*]}"
"$BIN/mypy" "${PATHS[@]}" || rc=1
if [ "$rc" -ne 0 ]; then
    echo "lint: FAILED (see above)" >&2
fi
exit "$rc"
