/*
 * test_sign.c - signatures (SPEC.md §20, sign/): the SIGN parser's rules one by
 * one, key files, and signing and verifying real bundles, with tampering.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <sodium.h>

#include "../sign/sign.h"
#include "cli.h"

static char dir[64], base[96], target[96], bundle[96], key[96], pub[96], key2[96], pub2[96], out[96];

/* A minimal well-formed SIGN payload: an empty table, one signature record. */
static size_t minimal(uint8_t *p) {
  memset(p, 0, 16 + 112 + 88);
  dcr__put16(p, 1);
  dcr__put32(p + 4, 1);
  dcr__put64(p + 8, 112);
  memcpy(p + 16, dcr__sign_domain(DCR__SIGN_CHECKPOINTS), 16);
  p[16 + 112] = DCR__SIGN_ED25519;
  return 16 + 112 + 88;
}

static void test_parse_rules(void **state) {
  (void)state;
  uint8_t p[16 + 112 + 88 * 2];
  dcr__sign s;
  dcr_detail d;
  size_t n = minimal(p);
  assert_int_equal(dcr__sign_parse(p, n, &s, &d), DCR_OK);
  assert_int_equal(s.signature_count, 1);
  assert_int_equal(dcr__sign_parse(p, 15, &s, &d), DCR_E_SIGNATURE); /* short head */
  assert_int_equal(dcr__sign_parse(p, n - 1, &s, &d), DCR_E_SIGNATURE); /* lengths */
  /* each single change breaks one rule */
  static const struct { size_t at; uint8_t value; } bad[] = {
      {0, 3},                  /* major 3 */
      {4, 0},                  /* no signature */
      {8, 113},                /* table length */
      {16, 'd'},               /* domain */
      {16 + 104, 1},           /* table reserved */
      {16 + 88, 1},            /* one section record the table has no room for */
      {16 + 112, 2},           /* algorithm */
      {16 + 112 + 7, 1},       /* record reserved */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    minimal(p);
    p[bad[i].at] = bad[i].value;
    assert_int_equal(dcr__sign_parse(p, n, &s, &d), DCR_E_SIGNATURE);
    assert_int_equal(d.code, DCR_E_SIGNATURE);
  }
  minimal(p);
  p[2] = 9; /* a later minor version is read */
  assert_int_equal(dcr__sign_parse(p, n, &s, &d), DCR_OK);
  /* two records: key ids strictly increasing */
  minimal(p);
  dcr__put32(p + 4, 2);
  memcpy(p + n, p + 16 + 112, 88);
  assert_int_equal(dcr__sign_parse(p, n + 88, &s, &d), DCR_E_SIGNATURE); /* the same id twice */
  p[n + 8] = 1;
  assert_int_equal(dcr__sign_parse(p, n + 88, &s, &d), DCR_OK);
  /* a bundle signature (§20.6): major 2, its own domain, no tensor digest */
  minimal(p);
  dcr__put16(p, 2);
  assert_int_equal(dcr__sign_parse(p, n, &s, &d), DCR_E_SIGNATURE); /* major 2, domain 1 */
  memcpy(p + 16, dcr__sign_domain(DCR__SIGN_BUNDLE), 16);
  assert_int_equal(dcr__sign_parse(p, n, &s, &d), DCR_OK);
  assert_int_equal(s.major, DCR__SIGN_BUNDLE);
  dcr__put16(p, 1);
  assert_int_equal(dcr__sign_parse(p, n, &s, &d), DCR_E_SIGNATURE); /* major 1, domain 2 */
  /* major 2 with one tensor digest, the lengths consistent */
  uint8_t q[16 + 112 + 32 + 88];
  memset(q, 0, sizeof q);
  dcr__put16(q, 2);
  dcr__put32(q + 4, 1);
  dcr__put64(q + 8, 112 + 32);
  memcpy(q + 16, dcr__sign_domain(DCR__SIGN_BUNDLE), 16);
  dcr__put64(q + 16 + 96, 1);
  q[16 + 112 + 32] = DCR__SIGN_ED25519;
  assert_int_equal(dcr__sign_parse(q, sizeof q, &s, &d), DCR_E_SIGNATURE);
  dcr__put16(q, 1); /* the same table of major 1 (its domain aside) is read */
  memcpy(q + 16, dcr__sign_domain(DCR__SIGN_CHECKPOINTS), 16);
  assert_int_equal(dcr__sign_parse(q, sizeof q, &s, &d), DCR_OK);
}

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "%s/dcr-sign-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(dir)) return -1;
  snprintf(base, sizeof base, "%s/base.st", dir);
  snprintf(target, sizeof target, "%s/target.st", dir);
  snprintf(bundle, sizeof bundle, "%s/b.dcr", dir);
  snprintf(out, sizeof out, "%s/out.dcr", dir);
  snprintf(key, sizeof key, "%s/k.key", dir);
  snprintf(pub, sizeof pub, "%s/k.pub", dir);
  snprintf(key2, sizeof key2, "%s/o.key", dir);
  snprintf(pub2, sizeof pub2, "%s/o.pub", dir);
  dcr_synth_options o;
  dcr_synth_options_default(&o);
  o.size = 1 << 20;
  if (cli_synth_files(&o, base, target, 1, NULL)) return -1;
  dcr_encode_options eo;
  dcr_encode_options_default(&eo);
  eo.chunk_size = 64 << 10;
  return dcr_encode_file(base, target, bundle, &eo, NULL, NULL) ||
         dcr_keygen(key, pub, NULL, NULL) || dcr_keygen(key2, pub2, NULL, NULL);
}

static int teardown(void **state) {
  (void)state;
  const char *files[] = {base, target, bundle, out, key, pub, key2, pub2};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) unlink(files[i]);
  return rmdir(dir);
}

static uint8_t *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  rewind(f);
  uint8_t *p = malloc(*n);
  assert_int_equal(fread(p, 1, *n, f), *n);
  fclose(f);
  return p;
}

static int verify_memory(const uint8_t *p, size_t n, const dcr_keyring *ring, dcr_detail *d) {
  dcr_reader *r;
  int rc = dcr_reader_open_memory(&r, p, n, NULL, d);
  if (!rc) rc = dcr_reader_verify_signature(r, ring, NULL, d);
  dcr_reader_free(r);
  return rc;
}

static void test_keys(void **state) {
  (void)state;
  uint8_t id[16], again[16], sk[64];
  dcr_detail d;
  struct stat st;
  assert_int_equal(stat(key, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  assert_int_equal(dcr_keygen(key, pub, NULL, &d), DCR_E_IO); /* never replaced */
  dcr_keyring *ring;
  assert_int_equal(dcr_keyring_create(&ring, &d), DCR_OK);
  assert_int_equal(dcr_keyring_add_file(ring, pub, id, &d), DCR_OK);
  assert_int_equal(dcr_keyring_add_file(ring, key, NULL, &d), DCR_E_ARGUMENT); /* a secret key */
  assert_int_equal(dcr__secret_key_read(key, sk, again, &d), DCR_OK);
  assert_memory_equal(id, again, 16);
  assert_int_equal(dcr__secret_key_read(pub, sk, again, &d), DCR_E_ARGUMENT);
  assert_int_equal(chmod(key, 0640), 0);
  dcr__detail_init(&d);
  assert_int_equal(dcr__secret_key_read(key, sk, again, &d), DCR_E_ARGUMENT);
  assert_non_null(strstr(d.message, "chmod 600"));
  assert_int_equal(chmod(key, 0600), 0);
  dcr_keyring_free(ring);
}

static void test_sign_and_tamper(void **state) {
  (void)state;
  dcr_detail d;
  dcr_keyring *ring, *other;
  assert_int_equal(dcr_keyring_create(&ring, &d), DCR_OK);
  assert_int_equal(dcr_keyring_create(&other, &d), DCR_OK);
  assert_int_equal(dcr_keyring_add_file(ring, pub, NULL, &d), DCR_OK);
  assert_int_equal(dcr_keyring_add_file(other, pub2, NULL, &d), DCR_OK);
  dcr_sign_options o;
  dcr_sign_options_default(&o);
  o.no_sync = 1;
  /* wrong inputs: nothing written */
  assert_int_equal(dcr_sign_file(bundle, key, target, target, out, &o, &d), DCR_E_BASE_MISMATCH);
  assert_int_equal(access(out, F_OK), -1);
  assert_int_equal(dcr_sign_file(bundle, key, base, target, out, &o, &d), DCR_OK);
  size_t n, m;
  uint8_t *p = slurp(out, &n);
  assert_int_equal(verify_memory(p, n, ring, &d), DCR_OK);
  assert_int_equal(verify_memory(p, n, other, &d), DCR_E_SIGNATURE);
  /* the same key again changes nothing; another adds a signature both verify */
  assert_int_equal(dcr_sign_file(out, key, base, target, NULL, &o, &d), DCR_OK);
  uint8_t *q = slurp(out, &m);
  assert_int_equal(m, n);
  assert_memory_equal(p, q, n);
  free(q);
  assert_int_equal(dcr_sign_file(out, key2, base, target, NULL, &o, &d), DCR_OK);
  q = slurp(out, &m);
  assert_true(m > n);
  assert_int_equal(verify_memory(q, m, ring, &d), DCR_OK);
  assert_int_equal(verify_memory(q, m, other, &d), DCR_OK);
  dcr_reader *r;
  assert_int_equal(dcr_reader_open_memory(&r, q, m, NULL, &d), DCR_OK);
  assert_int_equal(dcr_reader_verify_signed_checkpoint(r, ring, base, 0, 1, &d), DCR_OK);
  assert_int_equal(dcr_reader_verify_signed_checkpoint(r, ring, target, 1, 1, &d), DCR_OK);
  /* the same tensors, other bytes */
  assert_int_equal(dcr_reader_verify_signed_checkpoint(r, ring, base, 1, 1, &d), DCR_E_SIGNATURE);
  /* every section before SIGN is covered: one bit of each, checksums made right */
  uint64_t sections = r->section_count;
  for (uint64_t i = 0; i + 2 < sections; i++) {
    dcr__section s = r->sections[i];
    uint8_t *t = malloc(m);
    memcpy(t, q, m);
    uint8_t *payload = t + s.offset + DCR__SECTION_HEADER_SIZE;
    payload[s.length / 2] ^= 0x10;
    s.payload_check = XXH3_64bits(payload, (size_t)s.length);
    dcr__section_header_write(t + s.offset, &s);
    dcr_reader *tr;
    int rc = dcr_reader_open_memory(&tr, t, m, NULL, &d);
    if (rc == DCR_OK) { /* a change the structure does not see: the signature does */
      assert_int_equal(dcr_reader_verify_signature(tr, ring, NULL, &d), DCR_E_SIGNATURE);
      assert_true(d.offset == s.offset);
    }
    dcr_reader_free(tr);
    free(t);
  }
  /* the signature itself */
  dcr__section s = r->sections[sections - 2];
  q[s.offset + 32 + s.length - 1] ^= 1; /* the last signature's last byte */
  s.payload_check = XXH3_64bits(q + s.offset + 32, (size_t)s.length);
  dcr__section_header_write(q + s.offset, &s);
  assert_int_equal(dcr_keyring_add_file(other, pub, NULL, &d), DCR_OK); /* both keys trusted */
  assert_int_equal(verify_memory(q, m, other, &d), DCR_E_SIGNATURE);
  assert_non_null(strstr(d.message, "does not verify"));
  /* stripped: the bundle as encoded */
  free(p);
  p = slurp(bundle, &n);
  assert_int_equal(verify_memory(p, n, ring, &d), DCR_E_SIGNATURE);
  assert_non_null(strstr(d.message, "not signed"));
  dcr_reader_free(r);
  free(p);
  free(q);
  dcr_keyring_free(ring);
  dcr_keyring_free(other);
}

/* A bundle signature (§20.6) from the encode and from dcr_sign_file without
 * checkpoints: the same bytes, verified, and no checkpoint checked against it
 * (R-SIG-10); a checkpoint signature cannot join it. */
static void test_bundle_scope(void **state) {
  (void)state;
  dcr_detail d;
  dcr_keyring *ring;
  assert_int_equal(dcr_keyring_create(&ring, &d), DCR_OK);
  assert_int_equal(dcr_keyring_add_file(ring, pub, NULL, &d), DCR_OK);
  dcr_encode_options eo;
  dcr_encode_options_default(&eo);
  eo.chunk_size = 64 << 10;
  eo.no_sync = 1;
  eo.sign_key = key;
  eo.sign_scope = 2; /* neither scope */
  assert_int_equal(dcr_encode_file(base, target, out, &eo, NULL, &d), DCR_E_ARGUMENT);
  eo.sign_scope = DCR_SIGN_BUNDLE;
  assert_int_equal(dcr_encode_file(base, target, out, &eo, NULL, &d), DCR_OK);
  size_t n, m;
  uint8_t *p = slurp(out, &n);
  dcr_sign_options o;
  dcr_sign_options_default(&o);
  o.no_sync = 1;
  assert_int_equal(dcr_sign_file(bundle, key, NULL, NULL, out, &o, &d), DCR_E_ARGUMENT);
  o.scope = DCR_SIGN_BUNDLE;
  assert_int_equal(dcr_sign_file(bundle, key, NULL, NULL, out, &o, &d), DCR_OK);
  uint8_t *q = slurp(out, &m);
  assert_int_equal(m, n);
  assert_memory_equal(p, q, n);
  dcr_reader *r;
  dcr_signature_result res;
  assert_int_equal(dcr_reader_open_memory(&r, q, m, NULL, &d), DCR_OK);
  assert_int_equal(dcr_reader_verify_signature(r, ring, &res, &d), DCR_OK);
  assert_int_equal(res.scope, DCR_SIGN_BUNDLE);
  assert_int_equal(dcr_reader_verify_signed_checkpoint(r, ring, base, 0, 1, &d), DCR_E_SIGNATURE);
  assert_non_null(strstr(d.message, "bundle alone"));
  assert_int_equal(dcr_reader_verify_signed_checkpoint(r, ring, target, 1, 1, &d), DCR_E_SIGNATURE);
  dcr_reader_free(r);
  o.scope = DCR_SIGN_CHECKPOINTS;
  assert_int_equal(dcr_sign_file(out, key2, base, target, NULL, &o, &d), DCR_E_SIGNATURE);
  o.scope = DCR_SIGN_BUNDLE;
  assert_int_equal(dcr_sign_file(out, key2, target, NULL, NULL, &o, &d), DCR_E_BASE_MISMATCH);
  assert_int_equal(dcr_sign_file(out, key2, base, target, NULL, &o, &d), DCR_OK);
  free(q);
  q = slurp(out, &m);
  assert_true(m > n); /* one record more */
  assert_int_equal(verify_memory(q, m, ring, &d), DCR_OK);
  free(p);
  free(q);
  dcr_keyring_free(ring);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_rules),
      cmocka_unit_test(test_keys),
      cmocka_unit_test(test_sign_and_tamper),
      cmocka_unit_test(test_bundle_scope),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
