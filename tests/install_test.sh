#!/usr/bin/env bash
# install_test.sh BUILD - 'make install' into a temporary DESTDIR with PREFIX=/usr and a
# multiarch LIBDIR, then:
#   - exactly the expected files are installed, the library with its soname links;
#   - libdcr.pc names the LIBDIR; a C program compiles against the installed header
#     and links against the installed library through pkg-config (shared, and static
#     with --static), and runs;
#   - the README's first readme-test block runs with the installed dcr;
#   - 'make uninstall' with the same variables leaves no file or link behind.
set -u
BUILD=${1:?usage: install_test.sh BUILD}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export LC_ALL=C
VERSION=$(sed -n 's/^#define DCR_VERSION_[A-Z]* \([0-9][0-9]*\)[[:space:]]*$/\1/p' "$ROOT/include/dcr.h" | paste -s -d. -)
ABI=$(sed -n 's/^#define DCR_ABI_VERSION \([0-9][0-9]*\).*/\1/p' "$ROOT/include/dcr.h")
PREFIX=/usr
LIBDIR=/usr/lib/dcr-test-multiarch
CC=${CC:-cc}

W=$(mktemp -d "${TMPDIR:-/tmp}/dcr-install.XXXXXX") || exit 3
trap 'rm -rf "$W"' EXIT
trap 'exit 130' INT TERM
D=$W/root

PASS=0 FAIL=0
ok() { PASS=$((PASS + 1)); echo "ok - $*"; }
notok() { FAIL=$((FAIL + 1)); echo "not ok - $*"; }
finish() { echo "$PASS passed, $FAIL failed"; [ "$FAIL" = 0 ]; exit; }

vars=(BUILD="$BUILD" DESTDIR="$D" PREFIX="$PREFIX" LIBDIR="$LIBDIR")
if make -s -C "$ROOT" install "${vars[@]}" >"$W/install.log" 2>&1; then
  ok "make install PREFIX=$PREFIX LIBDIR=$LIBDIR DESTDIR=..."
else
  notok "make install failed: $(tail -n 5 "$W/install.log" | tr '\n' '|')"
  finish
fi

# 1. The files.
expected=$(sort <<EOF
$PREFIX/bin/dcr
$PREFIX/include/dcr.h
$LIBDIR/libdcr.a
$LIBDIR/libdcr.so
$LIBDIR/libdcr.so.$ABI
$LIBDIR/libdcr.so.$VERSION
$LIBDIR/pkgconfig/libdcr.pc
$PREFIX/share/man/man1/dcr.1
$PREFIX/share/bash-completion/completions/dcr
$PREFIX/share/zsh/site-functions/_dcr
EOF
)
found=$(cd "$D" && find . \( -type f -o -type l \) | sed 's/^\.//' | sort)
if [ "$found" = "$expected" ]; then ok "the 10 expected files are installed, and nothing else"
else notok "installed files differ from the expected ones: $(diff <(echo "$expected") <(echo "$found") | grep '^[<>]' | tr '\n' ' ')"; fi

bad=
[ -x "$D$PREFIX/bin/dcr" ] || bad+=" bin/dcr not executable;"
[ -f "$D$LIBDIR/libdcr.so.$VERSION" ] && [ ! -L "$D$LIBDIR/libdcr.so.$VERSION" ] || bad+=" libdcr.so.$VERSION not a regular file;"
[ "$(readlink "$D$LIBDIR/libdcr.so.$ABI")" = "libdcr.so.$VERSION" ] || bad+=" libdcr.so.$ABI does not link to libdcr.so.$VERSION;"
[ "$(readlink -f "$D$LIBDIR/libdcr.so")" = "$(readlink -f "$D$LIBDIR/libdcr.so.$VERSION")" ] || bad+=" libdcr.so does not lead to libdcr.so.$VERSION;"
soname=$(readelf -d "$D$LIBDIR/libdcr.so.$VERSION" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
[ "$soname" = "libdcr.so.$ABI" ] || bad+=" soname '$soname', expected libdcr.so.$ABI;"
for f in "$PREFIX/include/dcr.h" "$LIBDIR/pkgconfig/libdcr.pc" "$PREFIX/share/man/man1/dcr.1"; do
  [ "$(stat -c %a "$D$f")" = 644 ] || bad+=" $f mode $(stat -c %a "$D$f");"
done
cmp -s "$D$PREFIX/share/man/man1/dcr.1" "$ROOT/doc/dcr.1" || bad+=" the man page differs from doc/dcr.1;"
if [ -z "$bad" ]; then ok "library links (libdcr.so -> libdcr.so.$ABI -> libdcr.so.$VERSION), soname, modes"
else notok "installed files:$bad"; fi

if command -v man >/dev/null 2>&1; then
  if [ "$(MANPATH="$D$PREFIX/share/man" man -w dcr 2>/dev/null)" = "$D$PREFIX/share/man/man1/dcr.1" ]; then
    ok "man finds dcr(1) under MANDIR"
  else notok "MANPATH=$D$PREFIX/share/man man -w dcr: $(MANPATH="$D$PREFIX/share/man" man -w dcr 2>&1)"; fi
fi

# 2. pkg-config and a program built against the installed library.
pc=$D$LIBDIR/pkgconfig/libdcr.pc
if grep -qx "libdir=$LIBDIR" "$pc" && grep -qx "includedir=$PREFIX/include" "$pc" &&
   grep -qx "Version: $VERSION" "$pc"; then
  ok "libdcr.pc: libdir=$LIBDIR, includedir, Version $VERSION"
else
  notok "libdcr.pc: $(tr '\n' '|' <"$pc")"
fi
export PKG_CONFIG_PATH=$D$LIBDIR/pkgconfig PKG_CONFIG_SYSROOT_DIR=$D
cat >"$W/t.c" <<'EOF'
#include <dcr.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  printf("%s %s %u\n", dcr_version_string(), dcr_error_name(DCR_E_CHECKSUM), dcr_default_threads());
  return strcmp(dcr_version_string(), DCR_VERSION_STRING) != 0 || dcr_version_number() != DCR_VERSION_NUMBER;
}
EOF
# A sanitized build's library needs its runtime in the program too.
extra=()
readelf -d "$D$LIBDIR/libdcr.so.$VERSION" | grep -q 'libasan' && extra+=(-fsanitize=address)
readelf -d "$D$LIBDIR/libdcr.so.$VERSION" | grep -q 'libubsan' && extra+=(-fsanitize=undefined)
cflags=$(pkg-config --cflags libdcr 2>"$W/pc.err") libs=$(pkg-config --libs libdcr 2>>"$W/pc.err")
if [ -s "$W/pc.err" ] || [[ " $libs " != *" -L$D$LIBDIR "* ]] || [[ " $cflags " != *" -I$D$PREFIX/include "* ]]; then
  notok "pkg-config --cflags/--libs libdcr: '$cflags' '$libs' $(tr '\n' '|' <"$W/pc.err")"
else
  ok "pkg-config libdcr points into the install: $cflags $libs"
fi
# shellcheck disable=SC2086
if "$CC" "${extra[@]}" $cflags -o "$W/t" "$W/t.c" $libs 2>"$W/cc.err"; then
  if out=$(LD_LIBRARY_PATH=$D$LIBDIR "$W/t" 2>&1) && [[ $out == "$VERSION DCR_E_CHECKSUM "* ]]; then
    lib=$(LD_LIBRARY_PATH=$D$LIBDIR ldd "$W/t" | sed -n 's/^[[:space:]]*libdcr\.so[^ ]* => \([^ ]*\).*/\1/p')
    if [ "$lib" = "$D$LIBDIR/libdcr.so.$ABI" ]; then ok "a program built with pkg-config runs against $LIBDIR/libdcr.so.$ABI: $out"
    else notok "the program loads libdcr from '$lib', not $D$LIBDIR/libdcr.so.$ABI"; fi
  else
    notok "the program built against the installed library failed: $out"
  fi
else
  notok "cannot build against the installed library: $(head -n 5 "$W/cc.err" | tr '\n' '|')"
fi
# Static: libdcr.a plus what 'pkg-config --static' adds (Requires.private, Libs.private).
# shellcheck disable=SC2086
if slibs=$(pkg-config --static --libs libdcr) &&
   "$CC" "${extra[@]}" $cflags -o "$W/ts" "$W/t.c" "$D$LIBDIR/libdcr.a" ${slibs//-ldcr/} 2>"$W/cc.err" &&
   "$W/ts" >/dev/null 2>&1; then
  ok "a program linked with libdcr.a and pkg-config --static --libs runs"
else
  notok "static link with pkg-config --static --libs libdcr ($slibs): $(head -n 5 "$W/cc.err" | tr '\n' '|')"
fi
unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR

# 3. The README's first example, with the installed dcr first on PATH.
block=$(awk '
    /^```/ && inblock { exit }
    inblock { print; next }
    /^```sh[ \t]*$/ { if (armed) inblock = 1; armed = 0; next }
    index($0, "<!-- readme-test -->") == 1 { armed = 1; next }
    NF { armed = 0 }
  ' "$ROOT/README.md")
mkdir "$W/run"
if [ -z "$block" ]; then
  notok "README.md has no sh block after <!-- readme-test -->"
elif (cd "$W/run" && PATH="$D$PREFIX/bin:$PATH" LD_LIBRARY_PATH="$D$LIBDIR" bash -e -o pipefail -c \
        '[ "$(command -v dcr)" = "$1" ] || { echo "dcr is $(command -v dcr)"; exit 1; }; eval "$2"' \
        _ "$D$PREFIX/bin/dcr" "$block") >"$W/run.log" 2>&1; then
  ok "the README's first example runs with the installed dcr"
else
  notok "the README's first example failed with the installed dcr: $(tail -n 5 "$W/run.log" | tr '\n' '|')"
fi

# 4. Uninstall.
if make -s -C "$ROOT" uninstall "${vars[@]}" >"$W/uninstall.log" 2>&1; then
  left=$(cd "$D" && find . \( -type f -o -type l \) | sed 's/^\.//')
  if [ -z "$left" ]; then ok "make uninstall removes every installed file"
  else notok "make uninstall left: $(echo "$left" | tr '\n' ' ')"; fi
else
  notok "make uninstall failed: $(tail -n 5 "$W/uninstall.log" | tr '\n' '|')"
fi
finish
