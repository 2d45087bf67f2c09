#!/usr/bin/env bash
# Owns: the whole test job — lint, format check, type check, the full pytest suite (unit, cli, integration against a
# real docker-registry the suite starts itself), then the CLI and integration suites again with every CLI call going
# through a resident server (OCIVENDIR_TEST_SERVER=on: same stdout, stderr, exit codes and trees). CI runs exactly
# this. Arguments go to the first pytest run only, and skip the second.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
.venv/bin/ruff check cli tests bench scripts
.venv/bin/ruff format --check cli tests bench scripts
.venv/bin/mypy
if [ $# -gt 0 ]; then
    exec .venv/bin/python -m pytest "$@"
fi
.venv/bin/python -m pytest
echo "test: the CLI and integration suites again, every CLI call through a resident server" >&2
# left out: the server's own tests, and the modules that make no CLI call (the transport tested directly, the docs
# and the JSON contract read from the code): a second pass would run them exactly as the first did
OCIVENDIR_TEST_SERVER=on exec .venv/bin/python -m pytest tests/cli tests/integration -m "not dist" \
    --ignore tests/integration/test_server.py --ignore tests/integration/test_connections.py \
    --ignore tests/integration/test_connections_tls.py --ignore tests/cli/test_docs.py \
    --ignore tests/cli/test_json_contract.py
