/*
 * fuzz_sign.c - the SIGN section (SPEC.md §20): its parser, and the check of a
 * signed table against the bundle it is in.
 *
 * At start-up the harness encodes the fixed base against fuzz_index's target,
 * signs the bundle with a key made from a fixed seed (so runs are repeatable) in
 * both scopes, and keeps the bundle's bytes before SIGN (the same for both), its
 * two valid SIGN payloads (a checkpoint signature, format 1.0, and a bundle
 * signature, 2.0) and its footer. Input: byte 0 selects
 *   bit 0 clear: the rest is a SIGN payload for dcr__sign_parse alone;
 *   bit 0 set:   the rest is the SIGN payload of the skeleton bundle, which is
 *                opened and checked with the fixed key as trusted;
 *   bit 1 (with bit 0): the rest is XORed into a valid payload instead (its
 *                bytes past the payload's end extend it), so that the fuzzer
 *                starts from a signature that verifies; mode 1 cuts payloads;
 *   bit 2 (with bit 1): that valid payload is the bundle signature's.
 * In a production build an input of bits 0 and 1 (and 2) and nothing else must
 * verify. A bundle signature that verifies must refuse any checkpoint check.
 */
#include <sodium.h>

#include "../sign/sign.h"
#include "fuzz_common.h"

#define FUZZ_MAX_INPUT (1u << 16)

static fuzz_buf before; /* the signed bundle's bytes up to its SIGN section */
static fuzz_buf sign_payload, bundle_payload, foot; /* the two valid payloads */
static dcr_keyring ring;
static uint8_t ring_id[DCR_KEY_ID_SIZE], ring_key[32];

static void write_secret_key(const char *path, const uint8_t seed[32], const uint8_t id[16]) {
  char hex[33], b64[64], text[160];
  dcr__hex(id, 16, hex);
  sodium_bin2base64(b64, sizeof b64, seed, 32, sodium_base64_VARIANT_ORIGINAL);
  int n = snprintf(text, sizeof text, "dcr-ed25519-secret-key v1\n%s\n%s\n", hex, b64);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  FUZZ_ASSERT(fd >= 0 && write(fd, text, (size_t)n) == n && !close(fd));
}

static void init_skeleton(void) {
  FUZZ_ASSERT(sodium_init() >= 0);
  uint8_t seed[32], sk[64];
  for (int i = 0; i < 32; i++) seed[i] = (uint8_t)(i * 7 + 1);
  crypto_sign_seed_keypair(ring_key, sk, seed);
  dcr__key_id(ring_key, ring_id);
  ring = (dcr_keyring){1, &ring_id, &ring_key};
  fuzz_buf base = {0}, target = {0}, bundle = {0}, signed_ = {0};
  fuzz_base_safetensors(&base);
  fuzz_index_target(&target);
  fuzz_write_file(fuzz_path(0, "base"), base.p, base.n);
  fuzz_write_file(fuzz_path(1, "target"), target.p, target.n);
  FUZZ_ASSERT(fuzz_encode(fuzz_path(0, "base"), fuzz_path(1, "target"), 4096, 3, 1, 0, &bundle) == DCR_OK);
  fuzz_write_file(fuzz_path(2, "bundle"), bundle.p, bundle.n);
  write_secret_key(fuzz_path(3, "key"), seed, ring_id);
  dcr_sign_options o;
  dcr_sign_options_default(&o);
  o.threads = 1, o.no_sync = 1;
  for (int scope = DCR_SIGN_CHECKPOINTS; scope <= DCR_SIGN_BUNDLE; scope++) {
    o.scope = scope;
    FUZZ_ASSERT(dcr_sign_file(fuzz_path(2, "bundle"), fuzz_path(3, "key"), fuzz_path(0, "base"),
                              fuzz_path(1, "target"), fuzz_path(4, "signed"), &o, NULL) == DCR_OK);
    FUZZ_ASSERT(fuzz_read_file(fuzz_path(4, "signed"), &signed_) == 0);
    dcr_reader *r;
    FUZZ_ASSERT(dcr_reader_open_memory(&r, signed_.p, signed_.n, NULL, NULL) == DCR_OK);
    const dcr__section *s = &r->sections[r->section_count - 2];
    FUZZ_ASSERT(s->type == DCR__SEC_SIGN);
    if (!before.n) fuzz_put(&before, signed_.p, (size_t)s->offset);
    FUZZ_ASSERT(before.n == s->offset && !memcmp(before.p, signed_.p, before.n));
    fuzz_put(scope == DCR_SIGN_BUNDLE ? &bundle_payload : &sign_payload,
             signed_.p + s->offset + DCR__SECTION_HEADER_SIZE, (size_t)s->length);
    if (!foot.n) fuzz_put(&foot, signed_.p + signed_.n - DCR__FOOTER_SIZE, DCR__FOOTER_SIZE);
    dcr_reader_free(r);
    fuzz_buf_free(&signed_);
  }
  sodium_memzero(sk, sizeof sk);
  sodium_memzero(seed, sizeof seed);
  fuzz_buf_free(&base);
  fuzz_buf_free(&target);
  fuzz_buf_free(&bundle);
  static const char *const names[] = {"base", "target", "bundle", "key", "signed"};
  for (int i = 0; i < 5; i++) unlink(fuzz_path(i, names[i]));
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  init_skeleton();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > FUZZ_MAX_INPUT) return 0;
  if (!before.n) init_skeleton();
  const uint8_t *p = data + 1;
  size_t n = size - 1;
  dcr_detail d;
  if (!(data[0] & 1)) {
    dcr__sign s;
    int rc = dcr__sign_parse(p, n, &s, &d);
    FUZZ_ASSERT(rc == DCR_OK || rc == DCR_E_SIGNATURE);
    if (!rc) {
      FUZZ_ASSERT(s.table >= p && s.table_length <= n && s.signature_count >= 1);
      FUZZ_ASSERT(s.records + (size_t)s.signature_count * DCR__SIGN_RECORD == p + n);
    }
    return 0;
  }
  fuzz_buf payload = {0}, out = {0};
  if (data[0] & 2) {
    const fuzz_buf *valid = data[0] & 4 ? &bundle_payload : &sign_payload;
    fuzz_put(&payload, valid->p, valid->n);
    if (n > valid->n) fuzz_put(&payload, p + valid->n, n - valid->n);
    for (size_t i = 0; i < n && i < valid->n; i++) payload.p[i] ^= p[i];
  } else {
    fuzz_put(&payload, p, n);
  }
  fuzz_put(&out, before.p, before.n);
  dcr__writer w = {.write = fuzz_sink, .opaque = &out, .offset = out.n};
  FUZZ_ASSERT(dcr__writer_section(&w, DCR__SEC_SIGN, payload.p, payload.n, NULL, 0, NULL, NULL) == DCR_OK);
  fuzz_put(&out, foot.p, foot.n);
  dcr_reader *r = NULL;
  dcr_limits lim;
  fuzz_limits(&lim);
  int rc = dcr_reader_open_memory(&r, out.p, out.n, &lim, &d);
  FUZZ_DEBUG("open: %s %s\n", dcr_error_name(rc), rc ? d.message : "");
  if (rc == DCR_OK) {
    dcr_signature_result res;
    rc = dcr_reader_verify_signature(r, &ring, &res, &d);
    FUZZ_DEBUG("verify: %s %s\n", dcr_error_name(rc), rc ? d.message : "");
    FUZZ_ASSERT(rc == DCR_OK || rc == DCR_E_SIGNATURE || rc == DCR_E_NOMEM);
    FUZZ_ASSERT(res.present);
    if (!rc) FUZZ_ASSERT(res.verified_count >= 1 && !memcmp(res.key_id, ring_id, 16));
    if (!rc) FUZZ_ASSERT(res.scope == (dcr__le16(payload.p) == DCR__SIGN_BUNDLE ? DCR_SIGN_BUNDLE
                                                                               : DCR_SIGN_CHECKPOINTS));
    /* R-SIG-10: refused before the checkpoint is even opened */
    if (!rc && res.scope == DCR_SIGN_BUNDLE)
      FUZZ_ASSERT(dcr_reader_verify_signed_checkpoint(r, &ring, "/nonexistent/base", 0, 1, &d) ==
                  DCR_E_SIGNATURE);
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
    if (size == 1 && (data[0] & 2)) FUZZ_ASSERT(rc == DCR_OK); /* the signature as made */
#endif
    dcr_reader_free(r);
  }
  fuzz_buf_free(&payload);
  fuzz_buf_free(&out);
  return 0;
}
