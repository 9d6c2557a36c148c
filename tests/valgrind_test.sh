#!/usr/bin/env bash
# valgrind_test.sh DCR - memcheck on the CLI where its error reports come from:
# opens that fail, by the walk (validate) and by the random-access profile (apply
# --tensors, dcr_reader_open_file_ranged), whose first failure is confirmed by a
# second walk into a scratch detail (issue 32: that detail was never initialised,
# and its stack bytes were printed as the tensor and chunk); failing chunks and
# applies; valid ones. Any read of uninitialised memory, invalid access or leak
# fails the case (--error-exitcode). A few seconds a case.
#
# Under sanitizers (make asan passes SANITIZE) there is nothing to do: valgrind
# cannot run an ASan binary, and MSan's job here is valgrind's.
DCR=${1:?usage: valgrind_test.sh DCR}
DCR=$(cd "$(dirname "$DCR")" && pwd)/$(basename "$DCR")
V=$(cd "$(dirname "$0")/.." && pwd)/testvectors/v1
NAME=valgrind
. "$(dirname "$0")/cli_lib.sh"

if [ -n "${SANITIZE:-}" ]; then
  echo "# skipped: valgrind does not run a sanitized build (SANITIZE=$SANITIZE)"
  echo "0 passed, 0 failed"
  exit 0
fi
command -v valgrind >/dev/null 2>&1 || { echo "not ok - valgrind is not installed (sh tools/deps.sh)"; echo "0 passed, 1 failed"; exit 1; }

# memcheck RC ARGS: dcr ARGS under memcheck exits RC (99: memcheck found an error).
memcheck() {
  local rc=$1
  shift
  valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
    --track-origins=yes "$DCR" "$@" >o 2>e
  RC=$?
  [ "$RC" != 99 ] || fail "memcheck: $(grep -m 3 -E '==[0-9]+== [A-Z]' e | tr '\n' '|')"
  want_rc "$rc" "dcr $*"
}
# ranged NAME CODE: apply --tensors opens vector NAME by the random-access
# profile and fails with CODE, as the walk does, without a word of stack memory.
ranged() {
  memcheck 1 apply --tensors '*' "$V/ckpt/enc-base.safetensors" "$V/invalid/$1.dcr" -o out.st -f
  has e "$2" "the walk's code"
  ! grep -q 'tensor\|chunk [0-9]' e || fail "a tensor or chunk named for a structure error: $(shown e)"
}

for v in header-bit-flip:DCR_E_CHECKSUM bit-flip-mani-header:DCR_E_CHECKSUM \
         bit-flip-foot-payload:DCR_E_CHECKSUM footer-iden-offset:DCR_E_STRUCTURE \
         truncated-in-foot-payload:DCR_E_TRUNCATED header-major-2:DCR_E_VERSION; do
  tcase "ranged open of ${v%%:*}: ${v#*:}, no uninitialised bytes" ranged "${v%%:*}" "${v#*:}"
done

walked() {
  memcheck 1 validate "$V/invalid/$1.dcr"
  has e "$2" "the code"
}
for v in bit-flip-mani-payload:DCR_E_CHECKSUM mani-zstd-gives-less:DCR_E_DECOMPRESS \
         index-unsorted:DCR_E_INDEX position-out-of-range:DCR_E_POSITION \
         xor-sparse-zero-value:DCR_E_ENCODING chunk-frame-declares-more:DCR_E_DECOMPRESS; do
  tcase "validate ${v%%:*}: ${v#*:}" walked "${v%%:*}" "${v#*:}"
done

t_apply_valid() {
  memcheck 0 apply "$V/ckpt/enc-base.safetensors" "$V/valid/encoding-mixed.dcr" -o out.st -f
  cmp -s out.st "$V/ckpt/enc-target.safetensors" || fail "the output is not the target"
}
tcase "apply of a valid bundle" t_apply_valid
t_apply_tensors() {
  memcheck 0 apply --tensors '*' "$V/ckpt/enc-base.safetensors" "$V/valid/encoding-mixed.dcr" -o out.st -f
}
tcase "apply --tensors of a valid bundle" t_apply_tensors
t_wrong_base() {
  memcheck 1 apply "$V/ckpt/enc-target.safetensors" "$V/invalid/apply-chunk-base-check.dcr" -o out.st -f
}
tcase "apply to a wrong base" t_wrong_base

echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
