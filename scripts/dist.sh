#!/usr/bin/env bash
# Owns: the one build command. Writes into dist/:
#   ocivendir/                               self-contained onedir build (PyInstaller), needs only glibc >= 2.17..2.36
#     ocivendir/vendir, ocivendir/BUILD_ID   the native thin client (client/, scripts/client.sh), compiled with the
#                                            build's id, and that id (what the frozen server names its socket by);
#     ocivendir/modes/{vendir,imgpkg}        links to ../ocivendir: the client's fallback argv[0] where /proc is absent
#   ocivendir-<version>-linux-<arch>.tar.gz  that directory, reproducibly packed (what a Dockerfile ADDs)
#   ocivendir-<version>-py3-none-any.whl, ocivendir-<version>.tar.gz   wheel and sdist (python -m build)
# `--frozen` builds dist/ocivendir only (the sidecar test's need); `--prepare` only installs the freezer into .venv
# (scripts/test.sh, before its parallel workers start: an install changes the venv's build id under them). Unchanged inputs are not rebuilt; everything
# cached lives in build/ (ignored): the freezer wheel with its zlib-free bootloader, PyInstaller's work dir.
set -euo pipefail
cd "$(dirname "$0")/.."

frozen_only=0
prepare_only=0
case "${1:-}" in
    --frozen) frozen_only=1 ;;
    --prepare) prepare_only=1 ;;
    "") ;;
    *) echo "usage: scripts/dist.sh [--frozen | --prepare]" >&2; exit 2 ;;
esac

fail() { echo "dist: $*" >&2; exit 1; }

bash scripts/bootstrap.sh
PY=.venv/bin/python
cache=build/dist-cache
mkdir -p "$cache" dist
pyi_version=$("$PY" scripts/dist/freezer.py pin)

# A C compiler: for PyInstaller's bootloader (once) and the native client (client/).
ensure_cc() {
    command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || {
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            echo "dist: installing gcc and libc6-dev with apt-get (the bootloader and the client are C)" >&2
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc libc6-dev >/dev/null
        else
            fail "a C compiler is needed for PyInstaller's bootloader and the native client (apt-get install gcc)"
        fi
    }
    command -v cc >/dev/null 2>&1 || export CC=gcc
}

# The freezer: PyInstaller built from its sdist with the bootloader linking zlib statically (PyPI's prebuilt
# bootloader needs the system libz.so.1, which photon's sidecar may lack). Built once, kept in build/.
ensure_freezer() {
    if "$PY" scripts/dist/freezer.py check "$pyi_version" 2>/dev/null; then
        return
    fi
    local wheel
    wheel=$(ls "$cache"/wheels/pyinstaller-"$pyi_version"-*.whl 2>/dev/null | head -1 || true)
    if [ -z "$wheel" ]; then
        ensure_cc
        echo "dist: building PyInstaller $pyi_version with a static-zlib bootloader (once)" >&2
        PYI_STATIC_ZLIB=1 PYINSTALLER_COMPILE_BOOTLOADER=1 \
            "$PY" -m pip wheel -q --no-deps --no-binary pyinstaller "pyinstaller==$pyi_version" -w "$cache/wheels" \
            >"$cache/freezer.log" 2>&1 || { cat "$cache/freezer.log" >&2; fail "building PyInstaller failed"; }
        wheel=$(ls "$cache"/wheels/pyinstaller-"$pyi_version"-*.whl | head -1)
    fi
    # the dist extra's requirements, without reinstalling the project itself (a test run may be using the venv)
    # shellcheck disable=SC2046 # one word per requirement
    "$PY" -m pip install -q "$wheel" $("$PY" scripts/dist/freezer.py requirements) 2>&1 \
        | { grep -v "^WARNING: Location" || true; } >&2
    "$PY" scripts/dist/freezer.py check "$pyi_version" || fail "the installed PyInstaller is not the static-zlib build"
}

inputs_hash() {
    { echo "$pyi_version"; "$PY" -c 'import sys; print(sys.version)'
      find "$@" -type f ! -name '*.pyc' -print0 \
          | sort -z | xargs -0 sha256sum; } | sha256sum | cut -c1-64
}

version=$("$PY" -c 'import sys; sys.path.insert(0, "cli"); import ocivendir; print(ocivendir.__version__)')
arch=$(uname -m)
tarball="dist/ocivendir-$version-linux-$arch.tar.gz"
want=$(inputs_hash cli scripts/dist scripts/dist.sh pyproject.toml)  # what the frozen build is made of
# the sdist holds the README; the tarball holds the client
want_packages=$(inputs_hash cli scripts/dist scripts/dist.sh pyproject.toml README.md client scripts/client.sh)

freeze() {
    if [ -x dist/ocivendir/ocivendir ] && [ "$(cat "$cache/frozen.stamp" 2>/dev/null)" = "$want" ]; then
        echo "dist: dist/ocivendir is up to date" >&2
        return
    fi
    ensure_freezer
    # `--debug noarchive` (its only effect: modules as .pyc files in _internal instead of one zlib archive) lets
    # CPython's own path finder import them, which starts faster than PyInstaller's archive importer.
    # Excluded: modules nothing at run time needs whose PyInstaller runtime hooks would import them at every start
    # (setuptools alone costs more than the whole warm sync; multiprocessing, for concurrent.futures' unused
    # ProcessPoolExecutor, 25 ms). ctypes is bundled (fs/swap.py calls renameat2 through it): the 8M instructions
    # PyInstaller's bootstrap spends on it at a start are paid once by the resident server, not per warm call.
    local work="$cache/pyinstaller"
    rm -rf "$work/dist"
    "$PY" -m PyInstaller --noconfirm --log-level WARN --onedir --name ocivendir --strip \
        --paths cli --runtime-hook scripts/dist/rth_environ.py --additional-hooks-dir scripts/dist/hooks \
        --exclude-module tkinter --exclude-module pytest --exclude-module _pytest \
        --exclude-module setuptools --exclude-module pkg_resources --exclude-module _distutils_hack \
        --exclude-module distutils --exclude-module multiprocessing \
        --debug noarchive --distpath "$work/dist" --workpath "$work/build" --specpath "$work" \
        scripts/dist/entry.py >"$cache/pyinstaller.log" 2>&1 \
        || { cat "$cache/pyinstaller.log" >&2; fail "PyInstaller failed"; }
    "$PY" scripts/dist/elfcheck.py "$work/dist/ocivendir" || fail "the build needs more than glibc from the system"
    rm -rf dist/ocivendir
    mv "$work/dist/ocivendir" dist/ocivendir
    echo "$want" >"$cache/frozen.stamp"
    rm -f "$cache/packaged.stamp"
}

# The native client, dist/ocivendir/vendir (what kapp-controller's sidecar runs as `vendir`), compiled with the frozen
# build's id, which also goes to dist/ocivendir/BUILD_ID for the frozen server. The id is taken over the files
# PyInstaller wrote, so rebuilding the build changes it; the client is rebuilt when its source, the id, the compiler
# or the C library changes. modes/vendir and modes/imgpkg (links to ../ocivendir, part of the build id) are the argv[0]
# of the client's in-process fallback where /proc is absent: PyInstaller's bootloader then finds its own executable
# through argv[0], and the name keeps the mode.
client() {
    local id want_client
    ensure_cc
    mkdir -p dist/ocivendir/modes
    ln -sfn ../ocivendir dist/ocivendir/modes/vendir
    ln -sfn ../ocivendir dist/ocivendir/modes/imgpkg
    id=$(bash scripts/client.sh --build-id dist/ocivendir)
    want_client=$({ echo "$id"; bash scripts/client.sh --compiler; cat client/ocivendir-client.c scripts/client.sh; } \
        | sha256sum | cut -c1-64)
    if [ -x dist/ocivendir/vendir ] && [ "$(cat dist/ocivendir/BUILD_ID 2>/dev/null)" = "$id" ] \
        && [ "$(cat "$cache/client.stamp" 2>/dev/null)" = "$want_client" ]; then
        echo "dist: dist/ocivendir/vendir is up to date (build $id)" >&2
        return
    fi
    bash scripts/client.sh dist/ocivendir/vendir "$id" || fail "compiling the client failed"
    "$PY" scripts/dist/elfcheck.py dist/ocivendir || fail "the client needs more than glibc from the system"
    printf '%s' "$id" >dist/ocivendir/BUILD_ID
    echo "$want_client" >"$cache/client.stamp"
    rm -f "$cache/packaged.stamp"
}

package() {
    if [ -f "$tarball" ] && [ "$(cat "$cache/packaged.stamp" 2>/dev/null)" = "$want_packages" ]; then
        echo "dist: $tarball and the wheel and sdist are up to date" >&2
        return
    fi
    rm -rf build/lib build/bdist.* cli/*.egg-info
    # reproducible: sorted names, fixed times and owners, no gzip timestamp
    tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C dist -cf - ocivendir \
        | gzip -n -9 >"$tarball.tmp"
    mv "$tarball.tmp" "$tarball"
    find dist -maxdepth 1 \( -name "ocivendir-*.whl" -o -name "ocivendir-[0-9]*.tar.gz" \) ! -name "${tarball#dist/}" \
        -delete  # earlier versions: a Dockerfile ADD with a wildcard must match one archive
    "$PY" -m build --no-isolation --sdist --wheel --outdir dist . >"$cache/build.log" 2>&1 \
        || { cat "$cache/build.log" >&2; fail "python -m build failed"; }
    echo "$want_packages" >"$cache/packaged.stamp"
}

if [ "$prepare_only" = 1 ]; then
    ensure_freezer
    exit 0
fi
freeze
client
[ "$frozen_only" = 1 ] || package
ls -1 dist >&2
