#!/usr/bin/env bash
# large_chunk.sh - the largest chunk end to end (SPEC.md R-WRT-2, §11): a 1 GiB raw
# pair whose only chunk changes almost everywhere, at chunk size 2^30. Its CHNK
# payload is the 32-byte record plus 2^30 bytes of XOR values, more than 2^30: the
# bundle that the writer makes must be one that a reader with the default limits
# accepts, applies and checks. Needs ~3 GiB of disk and ~12 GiB of memory.
#
# usage: tests/large_chunk.sh [path/to/dcr]
set -u
DCR=${1:-build/dcr}
W=$(mktemp -d "${TMPDIR:-/tmp}/dcr-large.XXXXXX") || exit 1
trap 'rm -rf "$W"' EXIT
passed=0 failed=0
check() { # NAME COMMAND...
  local name=$1
  shift
  if "$@"; then passed=$((passed + 1)); echo "ok - $name"
  else failed=$((failed + 1)); echo "not ok - $name"; fi
}

truncate -s 1G "$W/base"
# deterministic incompressible bytes, so that no encoding is smaller than dense XOR
python3 -c '
import random, sys
r = random.Random(20261203)
with open(sys.argv[1], "wb") as f:
    for _ in range(16):
        f.write(r.randbytes(1 << 26))' "$W/target"
check "encode --raw --chunk-size 1G" "$DCR" encode -q --raw --chunk-size 1G --level 0 "$W/base" \
  "$W/target" -o "$W/b.dcr"
size=$(stat -c %s "$W/b.dcr" 2>/dev/null || echo 0)
check "the CHNK payload is over 2^30 bytes (bundle of $size bytes)" test "$size" -gt $((1073741824 + 32))
# The format's default limits; a memory budget that one chunk's work fits (its
# payload, and to apply it the chunk's input and output: ~3 GiB). The default
# budget of 1 GiB refuses it up front (DCR_E_NOMEM, exit 3: not a verdict).
check "validate under the default budget: exit 3 before decoding" test "$("$DCR" validate -q \
  "$W/b.dcr" 2>/dev/null; echo $?)" = 3
check "validate (default limits, --memory 4G)" "$DCR" validate -q --memory 4G "$W/b.dcr"
check "apply (--memory 4G)" "$DCR" apply -q --memory 4G "$W/base" "$W/b.dcr" -o "$W/out"
check "the output is the target" cmp -s "$W/out" "$W/target"
echo "large chunk: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
