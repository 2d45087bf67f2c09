#!/usr/bin/env bash
# Owns: the native thin client's build (client/ocivendir-client.c) and the build id it is compiled with.
#   scripts/client.sh OUTPUT BUILD_ID [EXTRA_CFLAG...]   compiles the client alone into OUTPUT
#   scripts/client.sh --build-id DIR                     prints the build id of the frozen build in DIR
# BUILD_ID is 16 lowercase hex digits: the socket name's build (server protocol v1), so a client and a server of
# different builds never meet. dist.sh builds dist/ocivendir/vendir with the frozen build's id and writes it to
# dist/ocivendir/BUILD_ID; the client's tests build their own with a test id. $CC picks the compiler.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"

if [ "${1:-}" = --build-id ] && [ $# = 2 ]; then
    # the first 16 hex digits of a sha256 over every file's name and content and every symlink's target, BUILD_ID
    # and the client itself excluded (they are written after): any change of the build changes its id
    cd "$2"
    { find . -type f ! -path ./BUILD_ID ! -path ./vendir -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum
      find . -type l ! -path ./vendir -printf 'link %p -> %l\n' | LC_ALL=C sort; } | sha256sum | cut -c1-16
    exit 0
fi
if [ $# -lt 2 ] || [ "${1:0:1}" = - ]; then
    echo "usage: scripts/client.sh OUTPUT BUILD_ID [EXTRA_CFLAG...] | scripts/client.sh --build-id DIR" >&2
    exit 2
fi
output=$1 build=$2
shift 2
[[ "$build" =~ ^[0-9a-f]{16}$ ]] || { echo "client: BUILD_ID must be 16 lowercase hex digits, not '$build'" >&2; exit 2; }
cc=${CC:-cc}
command -v "$cc" >/dev/null 2>&1 || { echo "client: no C compiler ('$cc'); apt-get install gcc libc6-dev" >&2; exit 1; }

# Written next to the output, then renamed: a failed build never leaves a half-written client behind.
# Linked statically (as a position-independent executable, so ASLR stays): nothing to load or relocate at each of
# kapp-controller's calls — 0.2 ms less CPU and 0.3 ms less wall per call than the dynamic build, a third of the
# client's cost. Where the C library has no static archive (libc.a), the client is linked dynamically, as before; so
# it is where the linker warns (--fatal-warnings): static glibc cannot load what getpwuid(), getaddrinfo() or iconv
# need at run time, and a client built so would fail on a machine with another glibc.
build_with() {
    "$cc" -std=c11 -Wall -Wextra -Werror -O2 -D_FORTIFY_SOURCE=2 -s -DOCIVENDIR_BUILD="\"$build\"" "$@" \
        -o "$output.tmp" "$here/client/ocivendir-client.c"
}
trap 'rm -f "$output.log"' EXIT
if ! build_with -static-pie -Wl,--fatal-warnings "$@" 2>"$output.log"; then
    echo "client: not linked statically, linking it dynamically ($(grep -m1 -E 'warning|error' "$output.log" ||
        echo 'no static C library here: apt-get install libc6-dev'))" >&2
    build_with "$@"
fi
mv -f "$output.tmp" "$output"
