#!/usr/bin/env bash
# abi_test.sh BUILD - the shared library's binary interface, against abi/libdcr.symbols:
#   - the exported (dynamic, defined) symbols of BUILD/libdcr.so are exactly the list;
#   - every exported symbol starts with dcr_ (nothing internal leaks out);
#   - every function include/dcr.h declares with DCR_API is exported, and only those;
#   - the soname (readelf -d) is libdcr.so.DCR_ABI_VERSION (include/dcr.h), and
#     BUILD/libdcr.so.DCR_ABI_VERSION links to the real file.
# The ABI policy is at the top of include/dcr.h ("Growing structs").
set -u
BUILD=${1:?usage: abi_test.sh BUILD}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LIST=$ROOT/abi/libdcr.symbols
HEADER=$ROOT/include/dcr.h
SO=$BUILD/libdcr.so
export LC_ALL=C
failed=0
fail() { echo "abi_test: FAIL: $*" >&2; failed=1; }
indent() { sed 's/^/    /' >&2; }

for tool in nm readelf; do
  command -v "$tool" >/dev/null 2>&1 || { echo "abi_test: $tool not found (binutils)" >&2; exit 1; }
done
[ -e "$SO" ] || { echo "abi_test: $SO not found; build it first (make lib BUILD=$BUILD)" >&2; exit 1; }

abi=$(sed -n 's/^#define DCR_ABI_VERSION \([0-9][0-9]*\).*/\1/p' "$HEADER")
[ -n "$abi" ] || { echo "abi_test: no DCR_ABI_VERSION in $HEADER" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dcr-abi.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# 1. Exported symbols against the list.
nm -D --defined-only "$SO" | awk 'NF >= 3 { print $3 }' | sed 's/@.*//' | sort -u >"$tmp/built"
grep -v '^#' "$LIST" | sed '/^[[:space:]]*$/d' >"$tmp/listed"
if ! sort -uc "$tmp/listed" 2>/dev/null; then
  fail "abi/libdcr.symbols is not sorted (LC_ALL=C sort -u)"
fi
sort -u "$tmp/listed" -o "$tmp/listed"
added=$(comm -23 "$tmp/built" "$tmp/listed")
removed=$(comm -13 "$tmp/built" "$tmp/listed")
if [ -n "$added" ]; then
  fail "libdcr.so exports symbols that abi/libdcr.symbols does not list:"
  indent <<<"$added"
  echo "  Adding a function is compatible: add its name to abi/libdcr.symbols (sorted)." >&2
  echo "  If it was not meant to be public, drop its DCR_API (the build hides everything else)." >&2
fi
if [ -n "$removed" ]; then
  fail "abi/libdcr.symbols lists symbols that libdcr.so no longer exports:"
  indent <<<"$removed"
  echo "  Removing a function (or changing a function's signature or a struct's layout) breaks" >&2
  echo "  programs linked against libdcr.so.$abi: bump DCR_ABI_VERSION in include/dcr.h (the" >&2
  echo "  soname follows it) and update abi/libdcr.symbols." >&2
fi

# 2. Only dcr_ names.
bad=$(grep -v '^dcr_' "$tmp/built")
[ -z "$bad" ] || { fail "exported symbols without the dcr_ prefix (hide them: static, or no DCR_API):"; indent <<<"$bad"; }

# 3. The header's DCR_API functions are the exported ones.
tr '\n' ' ' <"$HEADER" | grep -o 'DCR_API[^;{]*(' | sed 's/($//; s/.*[^A-Za-z0-9_]//' | sort -u >"$tmp/declared"
undef=$(comm -13 "$tmp/built" "$tmp/declared")
undecl=$(comm -23 "$tmp/built" "$tmp/declared")
[ -z "$undef" ] || { fail "declared DCR_API in include/dcr.h but not exported by libdcr.so:"; indent <<<"$undef"; }
[ -z "$undecl" ] || { fail "exported by libdcr.so but not declared DCR_API in include/dcr.h:"; indent <<<"$undecl"; }

# 4. The soname follows DCR_ABI_VERSION.
soname=$(readelf -d "$SO" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
[ "$soname" = "libdcr.so.$abi" ] ||
  fail "soname of $SO is '$soname', expected libdcr.so.$abi (DCR_ABI_VERSION in include/dcr.h)"
if [ ! -e "$BUILD/libdcr.so.$abi" ]; then
  fail "$BUILD/libdcr.so.$abi missing"
elif ! cmp -s "$BUILD/libdcr.so.$abi" "$SO"; then
  fail "$BUILD/libdcr.so.$abi and $SO are not the same library"
fi

if [ "$failed" = 0 ]; then
  echo "abi_test: $(wc -l <"$tmp/built") exported symbols match abi/libdcr.symbols; soname $soname"
fi
exit "$failed"
