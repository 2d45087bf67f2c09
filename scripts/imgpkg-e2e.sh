#!/usr/bin/env bash
# Owns: running imgpkg's own end-to-end tests for `pull` (carvel-dev/imgpkg test/e2e) with `pull` routed to ocivendir.
#
# A wrapper named as IMGPKG_BINARY sends `pull` to ocivendir, run under the name `imgpkg` (imgpkg mode: imgpkg's name,
# exit codes and error frames), and every other subcommand (push, copy, tag, …) to the real imgpkg, against a
# throwaway local docker-registry on a random 127.0.0.1 port. It runs only when the Go tools are already there — a Go
# toolchain, imgpkg's source tree (with its vendor/ directory) and a real imgpkg binary — and never builds or downloads
# them (`go test` compiles only the test package, offline, from vendor/). Without them it says what is missing and
# exits 0.
#
#   scripts/imgpkg-e2e.sh                 # the pull tests, `pull` by ocivendir: prints pass/fail counts
#   scripts/imgpkg-e2e.sh --baseline      # the same tests with the real imgpkg for everything
#   scripts/imgpkg-e2e.sh -run 'TestPull$'  # extra arguments go to `go test` (a later -run wins)
#
# Locations (defaults are the development machine's): IMGPKG_E2E_GO (/work/tools/gov/bin/go, else `go`),
# IMGPKG_E2E_SRC (/work/tools/src/imgpkg), IMGPKG_E2E_REAL (/work/tools/bin/imgpkg, else `imgpkg`);
# IMGPKG_E2E_PYTHONPATH runs another ocivendir tree with this venv (e.g. an older commit's cli/, for before/after).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

mode=ocivendir
if [ "${1:-}" = "--baseline" ]; then mode=imgpkg; shift; fi

go_bin=${IMGPKG_E2E_GO:-/work/tools/gov/bin/go}
[ -x "$go_bin" ] || go_bin=$(command -v go || true)
src=${IMGPKG_E2E_SRC:-/work/tools/src/imgpkg}
real=${IMGPKG_E2E_REAL:-/work/tools/bin/imgpkg}
[ -x "$real" ] || real=$(command -v imgpkg || true)
registry_bin=$(command -v docker-registry || true)
missing=()
[ -n "$go_bin" ] || missing+=("a Go toolchain (IMGPKG_E2E_GO)")
[ -d "$src/test/e2e" ] && [ -d "$src/vendor" ] || missing+=("imgpkg's source with vendor/ (IMGPKG_E2E_SRC)")
[ -n "$real" ] || missing+=("a real imgpkg binary (IMGPKG_E2E_REAL)")
[ -n "$registry_bin" ] || missing+=("docker-registry")
[ -x .venv/bin/python ] || missing+=(".venv (run scripts/bootstrap.sh)")
if [ ${#missing[@]} -gt 0 ]; then
    echo "imgpkg-e2e: skipped, missing: $(IFS=';'; echo "${missing[*]}")" >&2
    exit 0
fi

# The top-level tests that run `pull` (auth, bundles, copies, debug, images, pull itself).
PULL_TESTS='TestAuthErr|TestKeychainErrors|TestAuth|TestPushPullBundle|TestBundlePushPullAnnotation|TestPushWithFileExclusion|TestBundleLockFile|TestImagePullOnBundleError|TestBundlePullOnImageError|TestCopyBundleToDifferentRepository|TestCopyRepoToTarAndThenCopyFromTarToRepo|TestDebugDisabled|TestDebugEnabled|TestPushPull|TestPushMultipleFiles|TestPullImageLockRewrite|TestPullImageLockRewriteBundleOfBundles|TestPullBundleOfBundles|TestPullImageFromSlowServerShouldTimeout|TestPullImageIndexShouldError|TestPullImageOfBundle|TestPull'

work=$(mktemp -d "${TMPDIR:-/tmp}/ocivendir-imgpkg-e2e.XXXXXX")
registry_pid=""
cleanup() {
    local rc=$?
    if [ -n "$registry_pid" ]; then kill "$registry_pid" 2>/dev/null || true; wait "$registry_pid" 2>/dev/null || true; fi
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap "exit 130" INT TERM

port=$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$work/registry.yml" <<YAML
version: 0.1
log: {level: error, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: $work/storage}, delete: {enabled: true}}
http: {addr: 127.0.0.1:$port}
YAML
"$registry_bin" serve "$work/registry.yml" > "$work/registry.log" 2>&1 &
registry_pid=$!
for _ in $(seq 100); do
    .venv/bin/python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/v2/', timeout=1)" \
        2>/dev/null && break
    sleep 0.1
done

mkdir -p "$work/bin" "$work/imgpkg-mode"
wrapper="$work/bin/imgpkg"
if [ "$mode" = ocivendir ]; then
    # ocivendir's console script under the name imgpkg: argv[0] puts it in imgpkg mode (imgpkg's name and frames)
    ln -s "$repo/.venv/bin/ocivendir" "$work/imgpkg-mode/imgpkg"
    cat > "$wrapper" <<SH
#!/bin/sh
if [ "\$1" = pull ]; then
    PYTHONPATH="${IMGPKG_E2E_PYTHONPATH:-}" OCIVENDIR_CACHE_DIR="$work/cache" exec "$work/imgpkg-mode/imgpkg" "\$@"
fi
exec "$real" "\$@"
SH
else
    printf '#!/bin/sh\nexec "%s" "$@"\n' "$real" > "$wrapper"
fi
chmod +x "$wrapper"

echo "imgpkg-e2e: pull by $mode, registry 127.0.0.1:$port" >&2
status=0
(
    cd "$src"
    IMGPKG_BINARY="$wrapper" IMGPKG_E2E_IMAGE="127.0.0.1:$port/imgpkg-test" \
    IMGPKG_E2E_RELOCATION_REPO="127.0.0.1:$port/imgpkg-test-relocation" \
    GOFLAGS=-mod=vendor GOTOOLCHAIN=local GOPROXY=off CGO_ENABLED=0 \
    "$go_bin" test ./test/e2e/ -count=1 -timeout 30m -v -run "^($PULL_TESTS)\$" "$@"
) > "$work/go-test.log" 2>&1 || status=$?

out=${IMGPKG_E2E_LOG:-imgpkg-e2e-$mode.log}
cp "$work/go-test.log" "$out"
count() { grep -cE "^$1--- $2:" "$work/go-test.log" || true; }
echo "imgpkg-e2e ($mode): tests passed $(count '' PASS), failed $(count '' FAIL), skipped $(count '' SKIP);" \
     "subtests passed $(count ' +' PASS), failed $(count ' +' FAIL); log: $out"
grep -E "^--- FAIL" "$work/go-test.log" || true
exit "$status"
