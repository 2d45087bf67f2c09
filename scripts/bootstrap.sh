#!/usr/bin/env bash
# Owns: preparing a machine to run ocivendir's demo and tests — a Python >= 3.11, Debian's docker-registry, skopeo,
# groff and musl-tools (installed with apt when missing and running as root), and the project venv in .venv.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v docker-registry >/dev/null 2>&1 || need_apt+=(docker-registry)
command -v skopeo >/dev/null 2>&1 || need_apt+=(skopeo)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
command -v groff >/dev/null 2>&1 || need_apt+=(groff-base)   # the man-page lint in tests/cli/test_docs.py
command -v musl-gcc >/dev/null 2>&1 || need_apt+=(musl-tools)  # the native client's C library (scripts/client.sh)

pick_python() {
    local cand
    for cand in "${OCIVENDIR_PYTHON:-}" python3 python3.13 python3.12 python3.11 /usr/bin/python3; do
        [ -n "$cand" ] || continue
        command -v "$cand" >/dev/null 2>&1 || continue
        if "$cand" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
            readlink -f "$(command -v "$cand")"; return 0  # not .venv's own link: an active venv is rebuilt below
        fi
    done
    return 1
}

if ! PY=$(pick_python); then
    found=$(python3 --version 2>&1 || echo "no python3")
    echo "ocivendir needs Python 3.11 or newer; found: ${found}." >&2
    echo "On Debian 12 or Ubuntu 24.04: apt-get install python3 python3-venv" >&2
    exit 1
fi
if ! "$PY" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    need_apt+=("python3-venv")
fi

if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "bootstrap: installing ${need_apt[*]} with apt-get" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >/dev/null
        apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
    else
        echo "bootstrap: missing ${need_apt[*]}; install them (apt-get install ${need_apt[*]}) or run as root" >&2
        case " ${need_apt[*]} " in *" python3-venv "*) exit 1;; esac
    fi
fi

stamp=.venv/.ocivendir-stamp
want="$("$PY" -c 'import sys; print(sys.version)') $(sha256sum pyproject.toml | cut -c1-64)"
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "bootstrap: creating .venv with $PY" >&2
    rm -rf .venv
    "$PY" -m venv .venv
    .venv/bin/python -m pip install -q --upgrade pip >/dev/null
    .venv/bin/python -m pip install -q -e '.[test]'
    echo "$want" > "$stamp"
fi
# .pyc for the editable package: start-up then reads bytecode even where PYTHONDONTWRITEBYTECODE is set (issue 12)
.venv/bin/python -m compileall -q cli/ocivendir >/dev/null
