#!/usr/bin/env bash
# Owns: the whole test job — lint, format check, type check, then the full pytest suite (unit, cli, integration
# against a real docker-registry the suite starts itself). CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
.venv/bin/ruff check cli tests bench scripts
.venv/bin/ruff format --check cli tests bench scripts
.venv/bin/mypy
exec .venv/bin/python -m pytest "$@"
