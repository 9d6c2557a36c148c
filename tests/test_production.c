/*
 * test_production.c - the production build keeps every checksum: the fuzzing
 * switch (FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION, format/common.h), which makes
 * checksum comparisons always match, must not reach build/ or build-asan/.
 *
 * A valid bundle is made, then each kind of checksum is broken while everything
 * else is kept consistent (the checksums covering the broken one are recomputed),
 * so that only the check under test can reject it: the bundle header (§4.1), a
 * section header and payload (§4.2), the state ids (§7), and the chunk checks
 * and tensor hashes that apply compares (§10).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "format.h"

#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#error "the unit tests are a production build: FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION is set"
#endif

#include "test_sink.h"

static char dir[64], base_path[128], target_path[128], out_path[128];
static buf bundle;

static void write_file(const char *path, const uint8_t *p, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(p, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/dcr-test-production-XXXXXX");
  if (!mkdtemp(dir)) return -1;
  snprintf(base_path, sizeof base_path, "%s/base", dir);
  snprintf(target_path, sizeof target_path, "%s/target", dir);
  snprintf(out_path, sizeof out_path, "%s/out", dir);
  enum { N = 10000 };
  static uint8_t b[N], t[N];
  for (size_t i = 0; i < N; i++) b[i] = t[i] = (uint8_t)(i * 7 + i / 300);
  t[10] ^= 1, t[5000] ^= 0x80; /* two changed chunks of 4 KiB */
  write_file(base_path, b, N);
  write_file(target_path, t, N);
  dcr_encode_options o;
  dcr_encode_options_default(&o);
  o.chunk_size = 4096;
  o.level = 0;
  o.threads = 1;
  o.raw = 1;
  return dcr_encode(base_path, target_path, &o, sink, &bundle, NULL, NULL) == DCR_OK ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  unlink(base_path);
  unlink(target_path);
  unlink(out_path);
  rmdir(dir);
  free(bundle.p);
  return 0;
}

/* A copy of the bundle and the offsets of its sections. */
typedef struct {
  uint8_t *p;
  size_t n;
  uint64_t mani, chnk, iden;
} copy;

static copy fresh(void) {
  copy c = {malloc(bundle.n), bundle.n, 0, 0, 0};
  assert_non_null(c.p);
  memcpy(c.p, bundle.p, bundle.n);
  for (uint64_t at = DCR__HEADER_SIZE; at < c.n;) {
    uint32_t type = dcr__le32(c.p + at);
    if (type == DCR__SEC_MANI) c.mani = at;
    if (type == DCR__SEC_CHNK && !c.chnk) c.chnk = at;
    if (type == DCR__SEC_IDEN) c.iden = at;
    at = dcr__align64(at + DCR__SECTION_HEADER_SIZE + dcr__le64(c.p + at + 8));
  }
  assert_true(c.mani && c.chnk && c.iden);
  return c;
}

/* Recomputes the payload and header checks of the section at `at`. */
static void reseal(copy *c, uint64_t at) {
  uint8_t *h = c->p + at;
  dcr__put64(h + 16, XXH3_64bits(h + DCR__SECTION_HEADER_SIZE, (size_t)dcr__le64(h + 8)));
  dcr__put64(h + 24, XXH3_64bits(h, 24));
}

static int open_code(const copy *c, dcr_reader **r) {
  dcr_detail d;
  return dcr_reader_open_memory(r, c->p, c->n, NULL, &d);
}

static void test_valid_bundle_opens_and_applies(void **state) {
  (void)state;
  copy c = fresh();
  dcr_reader *r;
  assert_int_equal(open_code(&c, &r), DCR_OK);
  assert_int_equal(dcr_reader_verify(r, NULL), DCR_OK);
  assert_int_equal(dcr_apply(r, base_path, out_path, NULL, NULL), DCR_OK);
  assert_int_equal(dcr_check_target(r, out_path, NULL, NULL), DCR_OK);
  unlink(out_path);
  dcr_reader_free(r);
  free(c.p);
}

static void test_hdr2_bad_header_check_is_rejected(void **state) {
  (void)state;
  copy c = fresh();
  dcr_reader *r;
  c.p[56] ^= 1;
  assert_int_equal(open_code(&c, &r), DCR_E_CHECKSUM);
  free(c.p);
}

static void test_sec2_bad_section_header_check_is_rejected(void **state) {
  (void)state;
  copy c = fresh();
  dcr_reader *r;
  c.p[c.mani + 24] ^= 1;
  assert_int_equal(open_code(&c, &r), DCR_E_CHECKSUM);
  free(c.p);
}

static void test_sec4_bad_payload_check_is_rejected(void **state) {
  (void)state;
  copy c = fresh();
  dcr_reader *r;
  c.p[c.chnk + DCR__SECTION_HEADER_SIZE + DCR__RECORD_SIZE] ^= 1; /* encoded data */
  assert_int_equal(open_code(&c, &r), DCR_E_CHECKSUM);
  free(c.p);
}

static void test_idn1_bad_state_id_is_rejected(void **state) {
  (void)state;
  copy c = fresh();
  dcr_reader *r;
  c.p[c.iden + DCR__SECTION_HEADER_SIZE + 3] ^= 1; /* base state id */
  reseal(&c, c.iden);
  assert_int_equal(open_code(&c, &r), DCR_E_CHECKSUM);
  free(c.p);
}

static void test_apl2_bad_chunk_checks_are_rejected(void **state) {
  (void)state;
  for (unsigned field = 16; field <= 24; field += 8) { /* base_check, target_check */
    copy c = fresh();
    dcr_reader *r;
    c.p[c.chnk + DCR__SECTION_HEADER_SIZE + field] ^= 1;
    reseal(&c, c.chnk);
    assert_int_equal(open_code(&c, &r), DCR_OK);
    dcr_apply_options o;
    dcr_apply_options_default(&o);
    o.threads = 1;
    o.sync = 0;
    assert_int_equal(dcr_apply(r, base_path, out_path, &o, NULL),
                     field == 16 ? DCR_E_BASE_MISMATCH : DCR_E_TARGET_MISMATCH);
    assert_int_equal(access(out_path, F_OK), -1);
    dcr_reader_free(r);
    free(c.p);
  }
}

static void test_apl3_bad_tensor_hash_is_rejected(void **state) {
  (void)state;
  /* IDEN: base id, target id, then the raw tensor's base and target hashes. A
   * changed hash with recomputed state ids opens, and apply rejects it. */
  for (int side = 0; side < 2; side++) {
    copy c = fresh();
    dcr_reader *r;
    uint8_t *iden = c.p + c.iden + DCR__SECTION_HEADER_SIZE;
    iden[32 + 16 * side] ^= 1;
    assert_int_equal(open_code(&c, &r), DCR_E_CHECKSUM); /* the state id no longer fits */
    dcr__manifest *m = NULL;
    /* recompute the state ids with the library's own code, from a valid reader */
    copy ok = fresh();
    assert_int_equal(open_code(&ok, &r), DCR_OK);
    m = &r->man;
    memcpy(m->entries[0].base.hash, iden + 32, 16);
    memcpy(m->entries[0].target.hash, iden + 48, 16);
    dcr__state_id(m, DCR__HAS_BASE, iden);
    dcr__state_id(m, DCR__HAS_TARGET, iden + 16);
    dcr_reader_free(r);
    free(ok.p);
    reseal(&c, c.iden);
    assert_int_equal(open_code(&c, &r), DCR_OK);
    dcr_apply_options o;
    dcr_apply_options_default(&o);
    o.threads = 1;
    o.sync = 0;
    assert_int_equal(dcr_apply(r, base_path, out_path, &o, NULL),
                     side == 0 ? DCR_E_BASE_MISMATCH : DCR_E_TARGET_MISMATCH);
    assert_int_equal(access(out_path, F_OK), -1);
    dcr_reader_free(r);
    free(c.p);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_valid_bundle_opens_and_applies),
      cmocka_unit_test(test_hdr2_bad_header_check_is_rejected),
      cmocka_unit_test(test_sec2_bad_section_header_check_is_rejected),
      cmocka_unit_test(test_sec4_bad_payload_check_is_rejected),
      cmocka_unit_test(test_idn1_bad_state_id_is_rejected),
      cmocka_unit_test(test_apl2_bad_chunk_checks_are_rejected),
      cmocka_unit_test(test_apl3_bad_tensor_hash_is_rejected),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
