#!/usr/bin/env bash
# Owns: the demo — a throwaway local registry seeded with sample content, then ocivendir run against it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/python scripts/demo.py "$@"
