/*
 * test_hostile.c - tiny inputs that ask for a lot of memory (issue 18): a MANI
 * section whose zstd frame inflates to more than the memory budget, and
 * safetensors headers whose JSON would take gigabytes to parse. Each must fail
 * before it allocates, with DCR_E_NOMEM (a budget, not a verdict) or with the code
 * a full parse would give, and the process's peak memory must stay small.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sys/resource.h>
#include <xxhash.h>
#include <zstd.h>

#include "checkpoint.h"
#include "format.h"

/* Peak resident memory so far, in MiB. */
static double peak_mib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_maxrss / 1024.0;
}

/* A zstd frame of `size` zero bytes, compressed piecewise (nothing of `size`
 * bytes is ever held). */
static uint8_t *zero_frame(uint64_t size, size_t *length) {
  ZSTD_CCtx *c = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 19);
  ZSTD_CCtx_setPledgedSrcSize(c, size);
  static uint8_t zeros[1 << 20];
  size_t cap = (size_t)(size / 20000) + (1 << 16);
  uint8_t *out = malloc(cap);
  ZSTD_outBuffer o = {out, cap, 0};
  for (uint64_t done = 0; done < size;) {
    size_t n = size - done < sizeof zeros ? (size_t)(size - done) : sizeof zeros;
    ZSTD_inBuffer in = {zeros, n, 0};
    done += n;
    while (in.pos < in.size)
      assert_false(ZSTD_isError(ZSTD_compressStream2(c, &o, &in, ZSTD_e_continue)));
  }
  ZSTD_inBuffer none = {NULL, 0, 0};
  while (ZSTD_compressStream2(c, &o, &none, ZSTD_e_end)) {}
  ZSTD_freeCCtx(c);
  *length = o.pos;
  return out;
}

/* A bundle header followed by a critical MANI section whose stored payload is
 * `frame`, checksums right: enough for a reader to reach the inflation. */
static uint8_t *bundle_with_mani(const uint8_t *frame, size_t length, size_t *size) {
  size_t padded = (length + 63) & ~(size_t)63;
  *size = DCR__HEADER_SIZE + DCR__SECTION_HEADER_SIZE + padded + 64;
  uint8_t *b = calloc(1, *size);
  dcr__header_write(b, 0);
  dcr__section s = {.type = DCR__SEC_MANI, .flags = DCR__FLAG_CRITICAL, .compression = 1,
                    .offset = DCR__HEADER_SIZE, .length = length,
                    .payload_check = XXH3_64bits(frame, length)};
  dcr__section_header_write(b + DCR__HEADER_SIZE, &s);
  memcpy(b + DCR__HEADER_SIZE + DCR__SECTION_HEADER_SIZE, frame, length);
  return b;
}

/* 40 KB of bundle whose MANI declares 1.25 GiB: refused by the default budget
 * (1 GiB) before the 1.25 GiB is allocated; a tighter budget refuses a smaller one. */
static void test_mani_bomb(void **state) {
  (void)state;
  size_t length, size;
  uint8_t *frame = zero_frame((uint64_t)5 << 28, &length);
  uint8_t *b = bundle_with_mani(frame, length, &size);
  print_message("    %zu-byte bundle, MANI inflating to 1.25 GiB\n", size);
  dcr_reader *r = NULL;
  dcr_detail d;
  assert_int_equal(dcr_reader_open_memory(&r, b, size, NULL, &d), DCR_E_NOMEM);
  assert_null(r);
  assert_non_null(strstr(d.message, "memory budget"));
  dcr_limits lim;
  dcr_limits_default(&lim);
  lim.max_memory = 64u << 20;
  free(frame), free(b);
  frame = zero_frame(100u << 20, &length);
  b = bundle_with_mani(frame, length, &size);
  assert_int_equal(dcr_reader_open_memory(&r, b, size, &lim, &d), DCR_E_NOMEM);
  /* inflating it would have touched 1.25 GiB; the test's own buffers, and under
   * ASan its shadow, take some hundreds of MiB */
  print_message("    peak %.1f MiB\n", peak_mib());
  assert_true(peak_mib() < 640);
  free(frame), free(b);
}

/* An 8-byte length and `text`: a safetensors prefix. */
static uint8_t *prefix_of(const char *text, size_t n) {
  uint8_t *p = malloc(8 + n);
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)((uint64_t)n >> (8 * i));
  memcpy(p + 8, text, n);
  return p;
}

/* n copies of `item` joined by commas between `open` and `close`. */
static char *repeat(const char *open, const char *item, size_t n, const char *close, size_t *len) {
  size_t a = strlen(open), b = strlen(item), c = strlen(close);
  *len = a + n * (b + 1) - (n ? 1 : 0) + c;
  char *s = malloc(*len + 1), *p = s;
  memcpy(p, open, a), p += a;
  for (size_t i = 0; i < n; i++) {
    if (i) *p++ = ',';
    memcpy(p, item, b), p += b;
  }
  memcpy(p, close, c + 1);
  return s;
}

static int parse(const char *text, size_t n, uint64_t budget, dcr_detail *d) {
  dcr_limits lim;
  dcr_limits_default(&lim);
  lim.max_memory = budget;
  dcr__detail_init(d);
  uint8_t *p = prefix_of(text, n);
  dcr__checkpoint ck;
  int rc = dcr__safetensors_parse(p, 8 + n, 0, &lim, DCR_FORMAT_MINOR, &ck, d);
  if (!rc) dcr__checkpoint_free(&ck);
  free(p);
  return rc;
}

/* Headers that jansson would have turned into gigabytes: a root that is not an
 * object is DCR_E_CHECKPOINT at once (as any parse of it ends); the rest are
 * DCR_E_NOMEM at the budget, before parsing. */
static void test_json_bombs(void **state) {
  (void)state;
  dcr_detail d;
  size_t n;
  char *t = repeat("[", "{}", 30000000, "]", &n); /* 90 MB */
  assert_int_equal(parse(t, n, (uint64_t)1 << 30, &d), DCR_E_CHECKPOINT);
  free(t);
  t = repeat("{\"a\":[", "{}", 13u << 20, "]}", &n); /* 39 MB: ~3 GiB as a document */
  assert_int_equal(parse(t, n, (uint64_t)1 << 30, &d), DCR_E_NOMEM);
  assert_non_null(strstr(d.message, "memory budget"));
  free(t);
  t = repeat("{\"a\":{\"dtype\":\"U8\",\"shape\":[", "1", 49500000, "],\"data_offsets\":[0,1]}}", &n);
  assert_int_equal(parse(t, n, (uint64_t)1 << 30, &d), DCR_E_NOMEM); /* 49.5 M integers */
  free(t);
  /* within the budget, the same text gets its verdict: the rank is over the limit */
  t = repeat("{\"a\":{\"dtype\":\"U8\",\"shape\":[", "1", 20, "],\"data_offsets\":[0,1]}}", &n);
  assert_int_equal(parse(t, n, (uint64_t)1 << 30, &d), DCR_E_LIMIT);
  free(t);
  /* parsed, the documents would have taken several GiB */
  print_message("    peak %.1f MiB\n", peak_mib());
  assert_true(peak_mib() < 1024);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mani_bomb),
      cmocka_unit_test(test_json_bombs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
