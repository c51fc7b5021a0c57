#!/usr/bin/env bash
# run_tests.sh — the README's test command: set up, build, run every test.
#   extra arguments go to ctest, e.g. scripts/run_tests.sh -L unit
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cd "${DG_BUILD_DIR:-build}"
ctest --output-on-failure --timeout 600 "$@"
