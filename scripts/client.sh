#!/usr/bin/env bash
# Owns: compiling the native thin client (client/ocivendir-client.c) alone: `scripts/client.sh OUTPUT BUILD_ID
# [EXTRA_CFLAG...]`. BUILD_ID is 16 lowercase hex digits, the socket name's build (server protocol v1). dist.sh
# builds dist/ocivendir/vendir with it; the client's tests build their own with a test id. $CC picks the compiler.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"

if [ $# -lt 2 ]; then
    echo "usage: scripts/client.sh OUTPUT BUILD_ID [EXTRA_CFLAG...]" >&2
    exit 2
fi
output=$1 build=$2
shift 2
[[ "$build" =~ ^[0-9a-f]{16}$ ]] || { echo "client: BUILD_ID must be 16 lowercase hex digits, not '$build'" >&2; exit 2; }
cc=${CC:-cc}
command -v "$cc" >/dev/null 2>&1 || { echo "client: no C compiler ('$cc'); apt-get install gcc libc6-dev" >&2; exit 1; }

# Written next to the output, then renamed: a failed build never leaves a half-written client behind.
"$cc" -std=c11 -Wall -Wextra -Werror -O2 -D_FORTIFY_SOURCE=2 -s -DOCIVENDIR_BUILD="\"$build\"" "$@" \
    -o "$output.tmp" "$here/client/ocivendir-client.c"
mv -f "$output.tmp" "$output"
