#!/usr/bin/env bash
# Owns: the one command that runs every benchmark (after the same bootstrap as the tests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/python bench/bench.py "$@"
