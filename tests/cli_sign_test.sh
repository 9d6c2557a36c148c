#!/usr/bin/env bash
# cli_sign_test.sh DCR - signed bundles through the CLI (SPEC.md §20): dcr keygen,
# sign, verify, encode --sign (either scope), and --require-signature on validate and apply where
# they take it. Output: "ok - ..." / "not ok - ...", then a count; exit 1 on a failure.
set -u
DCR=${1:?usage: cli_sign_test.sh DCR}
case $DCR in /*) ;; *) DCR=$PWD/$DCR ;; esac
NAME=sign
. "$(dirname "$0")/cli_lib.sh"

"$DCR" synth --size 1M --seed 3 base.st target.st >/dev/null 2>&1 &&
  "$DCR" synth --size 1M --seed 4 other.st other-t.st >/dev/null 2>&1 &&
  "$DCR" encode -q base.st target.st -o b.dcr && cp b.dcr unsigned.dcr || { echo "not ok - setup"; exit 1; }
# flip BUNDLE OFFSET: one bit of a section's payload, its XXH3 checks made right again
# (what anyone who can write the bundle can do: XXH3 is no MAC)
flip() {
  python3 - "$1" "$2" <<'PY'
import ctypes, struct, sys
x = ctypes.CDLL("libxxhash.so.0"); x.XXH3_64bits.restype = ctypes.c_uint64
h = lambda b: x.XXH3_64bits(bytes(b), len(b))
b = bytearray(open(sys.argv[1], "rb").read()); at = int(sys.argv[2])
sec = 64
while True:  # the section holding `at`
    n, = struct.unpack_from("<Q", b, sec + 8); end = (sec + 32 + n + 63) // 64 * 64
    if at < end: break
    sec = end
b[at] ^= 1
b[sec + 16:sec + 24] = struct.pack("<Q", h(b[sec + 32:sec + 32 + n]))
b[sec + 24:sec + 32] = struct.pack("<Q", h(b[sec:sec + 24]))
open(sys.argv[1], "wb").write(b)
PY
}
# chunk_at BUNDLE: an offset inside the first CHNK's record: its target_check
chunk_at() { "$DCR" inspect --json "$1" | python3 -c 'import json,sys; j=json.load(sys.stdin); print([s["offset"] for s in j["sections"] if s["type"] == "CHNK"][0] + 32 + 24)' 2>/dev/null; }

t_keygen() {
  run keygen k; want_rc 0 "keygen"
  [ "$(stat -c %a k.key)" = 600 ] || fail "k.key has mode $(stat -c %a k.key)"
  [ "$(stat -c %a k.pub)" = 644 ] || fail "k.pub has mode $(stat -c %a k.pub)"
  has k.pub "dcr-ed25519-public-key v1" "public key file"
  local secret; secret=$(sed -n 3p k.key)
  ! grep -qF -- "$secret" o e || fail "keygen printed the secret key"
  has o "$(sed -n 2p k.pub)" "the key id printed"
  run keygen k; want_rc 3 "keygen over existing files"
  cmp -s k.key <(sed -n 1,3p k.key) || fail "k.key changed"
  run keygen other; want_rc 0 "second key"
}
t_modes() {
  cp k.key loose.key && chmod 644 loose.key
  run sign b.dcr --key loose.key --base base.st --target target.st -o x.dcr
  want_rc 2 "a secret key readable by others"; has e "chmod 600" "the mode error"
  [ ! -e x.dcr ] || fail "an output was written"
  run sign b.dcr --key k.pub --base base.st --target target.st -o x.dcr
  want_rc 2 "a public key given as the secret one"
  run verify b.dcr --pubkey k.key; want_rc 2 "a secret key given as a public one"
  ! grep -qF -- "$(sed -n 3p k.key)" o e || fail "an error printed the secret key"
}
t_sign_verify() {
  run verify b.dcr --pubkey k.pub; want_rc 1 "an unsigned bundle"; has e DCR_E_SIGNATURE "unsigned"
  run sign b.dcr --key k.key --base base.st --target target.st; want_rc 0 "sign in place"
  run verify b.dcr --pubkey k.pub --base base.st --target target.st; want_rc 0 "verify"
  run validate b.dcr --base base.st --target target.st; want_rc 0 "a signed bundle is valid"
  run verify b.dcr --pubkey other.pub; want_rc 1 "another key"; has e "no signature by a trusted key" "wrong key"
  run verify b.dcr --pubkey other.pub --pubkey k.pub; want_rc 0 "one of two keys"
  cp b.dcr once.dcr
  run sign b.dcr --key k.key --base base.st --target target.st; want_rc 0 "the same key again"
  cmp -s b.dcr once.dcr || fail "signing twice with one key changed the bundle"
  run sign b.dcr --key other.key --base base.st --target target.st -o two.dcr; want_rc 0 "a second key"
  run verify --json two.dcr --pubkey other.pub; want_rc 0 "verify the second"
  [ "$(jget o 'j["signatures"]')" = 2 ] || fail "two signatures: $(shown o)"
  run verify two.dcr --pubkey k.pub; want_rc 0 "the first signature still verifies"
  run validate two.dcr; want_rc 0 "twice signed is valid"
}
t_wrong_inputs() {
  cp b.dcr keep.dcr
  run sign b.dcr --key other.key --base other.st --target target.st; want_rc 1 "a wrong base"
  has e DCR_E_BASE_MISMATCH "wrong base"
  run sign b.dcr --key other.key --base base.st --target base.st; want_rc 1 "a wrong target"
  has e DCR_E_TARGET_MISMATCH "wrong target"
  cmp -s b.dcr keep.dcr || fail "a failed sign changed the bundle"
  ls -a | grep -q '^\.dcr-' && fail "a temporary file was left"
  run verify b.dcr --pubkey k.pub --base other.st; want_rc 1 "verify --base with other bytes"
  has e "the base tensor's SHA-256 digest is not the signed one" "verify --base"
  run verify b.dcr --pubkey k.pub --target base.st; want_rc 1 "verify --target with other bytes"
}
t_tamper() {
  cp b.dcr t.dcr
  local at; at=$(chunk_at t.dcr)
  [ -n "$at" ] || { fail "no chunk offset from inspect --json"; return; }
  flip t.dcr "$at"
  run validate t.dcr; want_rc 0 "a changed chunk's record still has a valid structure"
  run verify t.dcr --pubkey k.pub; want_rc 1 "a changed chunk"; has e "CHNK" "names the section"
  has e "signed SHA-256 digest" "says why"
  head -c "$(( $(stat -c %s unsigned.dcr) ))" unsigned.dcr >stripped.dcr
  run verify stripped.dcr --pubkey k.pub; want_rc 1 "a stripped signature"; has e "not signed" "stripped"
}
# SPEC.md §20.2: a bundle signed in the encode's pass is byte for byte the one
# that encode, then sign (which hashes the checkpoints again), makes, whatever
# the thread count, the chunk size or the output (a file or a pipe).
t_encode_sign() {
  run encode base.st target.st -o e.dcr --sign k.key; want_rc 0 "encode --sign"
  run verify e.dcr --pubkey k.pub --base base.st --target target.st; want_rc 0 "the encoded bundle is signed"
  run encode -q base.st target.st -o es2.dcr --threads 1 && run sign es2.dcr --key k.key --base base.st --target target.st
  want_rc 0 "encode, then sign"
  cmp -s e.dcr es2.dcr || fail "encode --sign and encode then sign differ"
  for t in 1 3; do
    run encode base.st target.st -o et$t.dcr --sign k.key --threads "$t"; want_rc 0 "encode --sign --threads $t"
    cmp -s e.dcr et$t.dcr || fail "encode --sign --threads $t differs"
  done
  run encode other.st other-t.st -o o1.dcr --sign k.key --chunk-size 4K; want_rc 0 "4K chunks"
  run encode -q other.st other-t.st -o o2.dcr --chunk-size 4K --threads 3 && run sign o2.dcr --key k.key --base other.st --target other-t.st
  cmp -s o1.dcr o2.dcr || fail "4K chunks: encode --sign and encode then sign differ"
  run encode base.st target.st -o - --sign k.key; want_rc 0 "encode --sign to standard output"
  cmp -s o e.dcr || fail "encode --sign to standard output is not the file's bytes"
  run validate e.dcr --require-signature k.pub; want_rc 0 "validate --require-signature"
  run apply base.st e.dcr -o out-e.st --require-signature k.pub; want_rc 0 "apply --require-signature"
  cmp -s out-e.st target.st || fail "apply's output"
  run encode base.st target.st -o f.dcr --sign loose.key; want_rc 2 "encode --sign with a loose key"
  [ ! -e f.dcr ] || fail "an unsigned bundle was left at f.dcr"
  run encode base.st target.st -o f.dcr --sign k.pub; want_rc 2 "encode --sign with a public key"
  [ ! -e f.dcr ] || fail "an unsigned bundle was left at f.dcr"
}
# Bundle signatures (SPEC.md §20.6): the bundle alone, no checkpoint hashed; the
# same bytes whichever way they are made; no checkpoint check against them
# (R-SIG-10); a signature of the other scope cannot join them.
t_bundle_scope() {
  run encode base.st target.st -o bs.dcr --sign k.key --sign-scope bundle; want_rc 0 "encode --sign-scope bundle"
  run verify --json bs.dcr --pubkey k.pub; want_rc 0 "verify a bundle signature"
  [ "$(jget o 'j["scope"]')" = bundle ] || fail "scope: $(shown o)"
  run verify --json e.dcr --pubkey k.pub
  [ "$(jget o 'j["scope"]')" = checkpoints ] || fail "scope of a checkpoint signature: $(shown o)"
  run apply base.st bs.dcr -o out-bs.st --require-signature k.pub; want_rc 0 "apply --require-signature"
  cmp -s out-bs.st target.st || fail "apply's output"
  run verify --json bs.dcr --pubkey k.pub --base base.st; want_rc 1 "no base check against a bundle signature"
  [ "$(jget o 'j["error"]["stage"]')" = base ] && [ "$(jget o 'j["error"]["code"]')" = DCR_E_SIGNATURE ] ||
    fail "the base check: $(shown o)"
  run verify bs.dcr --pubkey k.pub --target target.st; want_rc 1 "no target check against a bundle signature"
  has e "signs the bundle alone" "says why"
  run sign unsigned.dcr --key k.key --scope bundle -o bs2.dcr; want_rc 0 "sign --scope bundle, no checkpoints"
  cmp -s bs.dcr bs2.dcr || fail "encode --sign-scope bundle and sign --scope bundle differ"
  run sign unsigned.dcr --key k.key --scope bundle --base other.st -o x.dcr; want_rc 1 "a wrong base, checked"
  has e DCR_E_BASE_MISMATCH "wrong base"
  [ ! -e x.dcr ] || fail "an output was written"
  for t in 1 3; do
    run encode base.st target.st -o bt$t.dcr --sign k.key --sign-scope bundle --threads "$t"
    cmp -s bs.dcr bt$t.dcr || fail "--threads $t differs"
  done
  cp bs.dcr keep-bs.dcr
  run sign bs.dcr --key other.key --base base.st --target target.st; want_rc 1 "a checkpoint signature joining"
  has e "bundle alone" "says why"; cmp -s bs.dcr keep-bs.dcr || fail "a failed sign changed the bundle"
  run sign bs.dcr --key other.key --scope bundle -o bs3.dcr; want_rc 0 "a second bundle signature"
  run verify --json bs3.dcr --pubkey other.pub --pubkey k.pub; want_rc 0 "two bundle signatures"
  [ "$(jget o 'j["signatures"]')" = 2 ] || fail "two signatures: $(shown o)"
  cp bs.dcr tb.dcr
  flip tb.dcr "$(chunk_at tb.dcr)"
  run verify tb.dcr --pubkey k.pub; want_rc 1 "a changed chunk"; has e "CHNK" "names the section"
  run encode base.st target.st -o x.dcr --sign-scope bundle; want_rc 2 "--sign-scope without --sign"
  run encode base.st target.st -o x.dcr --sign k.key --sign-scope all; want_rc 2 "an unknown scope"
  run sign unsigned.dcr --key k.key -o x.dcr; want_rc 2 "checkpoint scope needs --base and --target"
  [ ! -e x.dcr ] || fail "an output was written"
}
t_require() {
  if ! "$DCR" validate --help | grep -q -- --require-signature; then return 0; fi
  run validate --json unsigned.dcr --require-signature k.pub; want_rc 1 "validate: unsigned"
  [ "$(jget o 'j["errors"][0]["stage"]')" = signature ] || fail "stage: $(shown o)"
  run validate b.dcr --require-signature k.pub; want_rc 0 "validate: signed"
  run apply base.st unsigned.dcr -o out.st --require-signature k.pub; want_rc 1 "apply: unsigned"
  [ ! -e out.st ] || fail "apply wrote an unsigned bundle's target"
  run apply base.st b.dcr -o out.st --require-signature other.pub; want_rc 1 "apply: untrusted"
  run apply base.st b.dcr -o out.st --require-signature k.pub; want_rc 0 "apply: signed"
  cmp -s out.st target.st || fail "apply's output"
}
tcase "keygen: modes 0600/0644, never replaces, never prints the secret" t_keygen
tcase "secret key modes and kinds are checked" t_modes
tcase "sign, verify, a second signature, idempotent signing" t_sign_verify
tcase "sign refuses a wrong base or target and keeps the bundle" t_wrong_inputs
tcase "a changed chunk and a stripped signature are caught" t_tamper
tcase "encode --sign" t_encode_sign
tcase "bundle signatures (--sign-scope bundle, sign --scope bundle)" t_bundle_scope
tcase "--require-signature on validate and apply" t_require
echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
