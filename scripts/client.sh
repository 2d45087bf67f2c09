#!/usr/bin/env bash
# Owns: the native thin client's build (client/ocivendir-client.c) and the build id it is compiled with.
#   scripts/client.sh OUTPUT BUILD_ID [EXTRA_CFLAG...]   compiles the client alone into OUTPUT
#   scripts/client.sh --build-id DIR                     prints the build id of the frozen build in DIR
#   scripts/client.sh --compiler                         prints what compiles it (the compiler, the C library)
# BUILD_ID is 16 lowercase hex digits: the socket name's build (server protocol v1), so a client and a server of
# different builds never meet. dist.sh builds dist/ocivendir/vendir with the frozen build's id and writes it to
# dist/ocivendir/BUILD_ID; the client's tests build their own with a test id. The C library is musl where Debian's
# musl-tools are installed (`musl-gcc`) and $CC is not set, else $CC's (cc: glibc). `--compiler` prints which.
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
musl_lib() {
    # the directory of musl's start files and libc.a, as the musl-gcc wrapper's specs name them (gcc's own
    # -print-file-name answers with glibc's): read from the link line of a probe program
    local probe
    command -v musl-gcc >/dev/null 2>&1 || return 1
    probe=$(mktemp -d)
    printf 'int main(void) { return 0; }\n' >"$probe/probe.c"
    musl-gcc -v -o "$probe/probe" "$probe/probe.c" 2>&1 | grep -o -m1 '/[^ ]*/Scrt1\.o' | sed 's#/Scrt1\.o$##' || true
    rm -rf "$probe"
}
if [ "${1:-}" = --compiler ] && [ $# = 1 ]; then
    # what builds the client: it names the compiler and the C library's archive, so a change of either rebuilds it
    if [ -z "${CC:-}" ] && lib=$(musl_lib) && [ -f "$lib/libc.a" ]; then
        echo "musl $(sha256sum "$lib/libc.a" | cut -c1-16) $(musl-gcc --version | head -1)"
    else
        echo "${CC:-cc} $("${CC:-cc}" --version | head -1)"
    fi
    exit 0
fi
if [ $# -lt 2 ] || [ "${1:0:1}" = - ]; then
    echo "usage: scripts/client.sh OUTPUT BUILD_ID [EXTRA_CFLAG...] | --build-id DIR | --compiler" >&2
    exit 2
fi
output=$1 build=$2
shift 2
[[ "$build" =~ ^[0-9a-f]{16}$ ]] || { echo "client: BUILD_ID must be 16 lowercase hex digits, not '$build'" >&2; exit 2; }
cc=${CC:-cc}

# Written next to the output, then renamed: a failed build never leaves a half-written client behind.
# Linked statically as a position-independent executable (ASLR stays): nothing to load or relocate at each of
# kapp-controller's calls. With musl where it is installed: a static glibc program probes the CPU's caches at every
# start (init_cacheinfo: dozens of CPUID instructions, each a trap to the hypervisor on a virtual machine), 0.41 ms of
# CPU and 0.50 ms of wall for a program that does nothing, on the CI machine (AMD EPYC under KVM); musl's start costs
# 0.15-0.19 ms and 0.23-0.26 ms, and a warm served call 0.5 ms of wall less (docs/performance.md). musl-gcc's specs
# know no -static-pie, so its parts are named: musl's rcrt1.o (which relocates the program itself), no interpreter.
# With glibc, where the C library has no static archive (libc.a), the client is linked dynamically, as before; so it
# is where the linker warns (--fatal-warnings): static glibc cannot load what getpwuid(), getaddrinfo() or iconv need
# at run time, and a client built so would fail on a machine with another glibc.
# Hardening: a stack protector in both; _FORTIFY_SOURCE and a read-only RELRO segment with glibc only (musl has
# neither; the client's input is its own caller's argv and environment, and its server's frames, bounded by length).
# musl's strerror words a few errors differently (ELOOP, ENAMETOOLONG, EMFILE): only the client's own messages show them.
flags=(-std=c11 -Wall -Wextra -Werror -O2 -s -fstack-protector-strong -DOCIVENDIR_BUILD="\"$build\"")
source=$here/client/ocivendir-client.c
build_with() {
    "$cc" "${flags[@]}" -D_FORTIFY_SOURCE=2 "$@" -o "$output.tmp" "$source"
}
build_musl() {
    local lib=$1
    shift
    musl-gcc "${flags[@]}" -fPIE -pie -nostartfiles "$lib/rcrt1.o" "$lib/crti.o" "$(musl-gcc -print-file-name=crtbeginS.o)" \
        "$source" "$@" "$(musl-gcc -print-file-name=crtendS.o)" "$lib/crtn.o" \
        -Wl,-static -Wl,--no-dynamic-linker -Wl,-z,text -Wl,--fatal-warnings -o "$output.tmp" || return 1
    local headers  # the result checked, not assumed: no interpreter, no library (readelf's own failure fails it)
    headers=$(readelf -l -d -W "$output.tmp") || return 1
    case $headers in *INTERP* | *NEEDED*) echo "not a static executable: $headers" >&2; return 1 ;; esac
}
trap 'rm -f "$output.log" "$output.tmp"' EXIT
musl=""  # musl's library directory, when the client is linked with musl (probed once)
if command -v musl-gcc >/dev/null 2>&1; then
    if [ -n "${CC:-}" ]; then
        echo "client: CC is set ($CC): linking with its C library, not musl" >&2
    elif lib=$(musl_lib) && [ -f "$lib/rcrt1.o" ]; then
        musl=$lib
    else
        echo "client: musl-gcc links with no rcrt1.o (static-pie) here: linking with cc" >&2
    fi
fi
if [ -n "$musl" ]; then
    if build_musl "$musl" "$@" 2>"$output.log"; then
        mv -f "$output.tmp" "$output"
        exit 0
    fi
    echo "client: not linked with musl, linking it with cc ($(grep -m1 -E 'warning|error' "$output.log" ||
        echo 'the result was not a static executable'))" >&2
fi
command -v "$cc" >/dev/null 2>&1 || { echo "client: no C compiler ('$cc'); apt-get install gcc libc6-dev" >&2; exit 1; }
if ! build_with -static-pie -Wl,--fatal-warnings "$@" 2>"$output.log"; then
    echo "client: not linked statically, linking it dynamically ($(grep -m1 -E 'warning|error' "$output.log" ||
        echo 'no static C library here: apt-get install libc6-dev'))" >&2
    build_with "$@"
fi
mv -f "$output.tmp" "$output"
