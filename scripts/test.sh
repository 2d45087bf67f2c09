#!/usr/bin/env bash
# Owns: the whole test job — lint, format check, type check, the full pytest suite (unit, cli, integration against a
# real docker-registry the suite starts itself), then the CLI and integration suites again with every CLI call going
# through one long-lived worker of a resident server (OCIVENDIR_TEST_SERVER=one: same stdout, stderr, exit codes and
# trees, each call after the others in the same reused process). CI runs exactly
# this. Arguments go to the first pytest run only, and skip the second. Both runs spread their tests over
# OCIVENDIR_TEST_WORKERS pytest-xdist workers (default 4: most of a test's time is spent waiting on a registry, a
# subprocess or a deadline, so 4 keep 2 cores busy; each worker starts its own registries and servers).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
if [ $# -eq 0 ]; then
    # the freezer goes into .venv now, beside the lint, not while the tests run: installing a package changes the
    # build id of the venv's program, and a test's server would then no longer be the one its clients look for
    prepare_log=$(mktemp)
    setsid bash scripts/dist.sh --prepare >"$prepare_log" 2>&1 &  # a group of its own: a failed lint stops it all
    prepare=$!
    trap 'kill -- -"$prepare" 2>/dev/null || true; wait "$prepare" 2>/dev/null || true; rm -f "$prepare_log"' EXIT
fi
.venv/bin/ruff check cli tests bench scripts
.venv/bin/ruff format --check cli tests bench scripts
.venv/bin/mypy
if [ $# -gt 0 ]; then
    exec .venv/bin/python -m pytest "$@"
fi
if ! wait "$prepare"; then
    cat "$prepare_log" >&2
    echo "test: scripts/dist.sh --prepare failed (installing the freezer the dist tests need)" >&2
    exit 1
fi
trap - EXIT
rm -f "$prepare_log"
workers=(-n "${OCIVENDIR_TEST_WORKERS:-4}")
.venv/bin/python -m pytest "${workers[@]}"
echo "test: the CLI and integration suites again, every CLI call through one reused worker of a resident server" >&2
# left out: the server's own tests, and the modules that make no CLI call (the transport tested directly, the docs
# and the JSON contract read from the code, the server's fork tested in-process): a second pass would run them
# exactly as the first did
OCIVENDIR_TEST_SERVER=one exec .venv/bin/python -m pytest "${workers[@]}" tests/cli tests/integration -m "not dist" \
    --ignore tests/integration/test_server.py --ignore tests/integration/test_server_fork.py \
    --ignore tests/integration/test_connections.py --ignore tests/integration/test_connections_tls.py \
    --ignore tests/integration/test_kept_connections.py \
    --ignore tests/cli/test_docs.py --ignore tests/cli/test_json_contract.py
