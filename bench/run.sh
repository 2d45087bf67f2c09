#!/usr/bin/env bash
# Owns: the one command that runs every benchmark (after the same bootstrap as the tests). Options: --smoke, --out DIR,
# --only fleet,pull,... (see `bench/run.sh --help`). VENDIR_BIN and IMGPKG_BIN name real vendir/imgpkg to compare.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
PYTHONPATH="cli:.${PYTHONPATH:+:$PYTHONPATH}" exec .venv/bin/python -m bench "$@"
