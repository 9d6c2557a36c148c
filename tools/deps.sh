#!/bin/sh
# Installs what dcr needs to build and test, from Debian's packages, if missing.
# Needs root (or sudo) only when something is missing.
#   sh tools/deps.sh        build and test dependencies
#   sh tools/deps.sh fuzz   the fuzzers as well: AFL++ (afl-clang-fast) and clang
#                           with libFuzzer (fuzz/README.md); exits 1 if they cannot
#                           be installed
set -eu
need=""
if [ "${1:-}" = fuzz ]; then
  command -v afl-fuzz >/dev/null 2>&1 && command -v afl-clang-fast >/dev/null 2>&1 || need="$need afl++"
  command -v clang >/dev/null 2>&1 || need="$need clang"
  if ! sh "$(dirname "$0")/../fuzz/fuzz.sh" has-libfuzzer 2>/dev/null; then
    v=$(clang --version 2>/dev/null | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -n 1)
    [ -n "$v" ] && need="$need libclang-rt-$v-dev"
  fi
fi
command -v cc >/dev/null 2>&1 || need="$need gcc"
command -v make >/dev/null 2>&1 || need="$need make"
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
command -v python3 >/dev/null 2>&1 || need="$need python3"
# make python-test: the Python package's tests run with Debian's python3 and its packages
/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1 || need="$need python3-numpy"
/usr/bin/python3 -c 'import pytest' >/dev/null 2>&1 || need="$need python3-pytest"
# python/tests/test_placement.py: placements over torch tensors (BF16 state_dicts, TP slices)
/usr/bin/python3 -c 'import torch' >/dev/null 2>&1 || need="$need python3-torch"
# python/tests/test_install.py: the offline 'pip install --no-build-isolation --no-index'
/usr/bin/python3 -m pip --version >/dev/null 2>&1 || need="$need python3-pip"
/usr/bin/python3 -c 'import setuptools' >/dev/null 2>&1 || need="$need python3-setuptools"
/usr/bin/python3 -c 'import wheel' >/dev/null 2>&1 || need="$need python3-wheel"
command -v xxh128sum >/dev/null 2>&1 || need="$need xxhash"   # tests cross-check hashes
command -v zstd >/dev/null 2>&1 || need="$need zstd"   # tools/spec_example.py decompresses frames
command -v groff >/dev/null 2>&1 || need="$need groff-base"   # tests/readme_test.sh renders doc/dcr.1
command -v readelf >/dev/null 2>&1 || need="$need binutils"   # tests/abi_test.sh: nm, readelf
command -v valgrind >/dev/null 2>&1 || need="$need valgrind"   # tests/valgrind_test.sh
# tests/http_test.sh: an origin and caching relays (proxy_cache, slice)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need="$need nginx"
for pair in libzstd:libzstd-dev libxxhash:libxxhash-dev jansson:libjansson-dev cmocka:libcmocka-dev \
            libarchive:libarchive-dev libsodium:libsodium-dev libcrypto:libssl-dev \
            libcurl:libcurl4-openssl-dev; do
  pkg-config --exists "${pair%%:*}" 2>/dev/null || need="$need ${pair#*:}"
done
# tests/install_test.sh links statically too: libarchive's own libraries, as .a files
for pair in acl:libacl1-dev lz4:liblz4-dev bz2:libbz2-dev xml2:libxml2-dev nettle:nettle-dev; do
  [ "$(cc -print-file-name="lib${pair%%:*}.a" 2>/dev/null)" != "lib${pair%%:*}.a" ] || need="$need ${pair#*:}"
done
[ -z "$need" ] && exit 0
echo "deps: installing$need" >&2
if [ "$(id -u)" -eq 0 ]; then sudo=""; elif command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
  echo "deps: missing$need; install them as root (apt-get install$need)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $need >/dev/null
