/*
 * test_format.c - the container layer (format/): error codes, dtypes, names,
 * the bundle header, section headers, the manifest, metadata, and whole bundles
 * in memory, corrupted bit by bit. Test names say which SPEC.md rule they check.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "checkpoint.h"
#include "codec.h"
#include "format.h"

/* ---- helpers -------------------------------------------------------------- */

static dcr_limits limits(void) {
  dcr_limits l;
  dcr_limits_default(&l);
  return l;
}

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;

static uint64_t rng(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Dull;
}

static uint8_t rng_byte(void) { return (uint8_t)(rng() >> 56); }

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  assert_non_null(p);
  return p;
}

static uint8_t *dup_bytes(const uint8_t *p, size_t n) {
  uint8_t *q = xmalloc(n);
  if (n) memcpy(q, p, n);
  return q;
}

static void flip_bit(uint8_t *p, size_t offset, unsigned bit) {
  p[offset] = (uint8_t)(p[offset] ^ (1u << bit));
}

/* ---- error codes (§13) --------------------------------------------------- */

static void test_err_names_and_messages(void **state) {
  (void)state;
  assert_int_equal(DCR_ERROR_COUNT_, 30);
  assert_string_equal(dcr_error_name(DCR_E_CHECKSUM), "DCR_E_CHECKSUM");
  assert_string_equal(dcr_error_name(DCR_OK), "DCR_OK");
  assert_string_equal(dcr_error_name(DCR_E_INTERRUPTED), "DCR_E_INTERRUPTED");
  /* the numbers of §13 */
  static const struct {
    int code;
    const char *name;
  } table[] = {
      {0, "DCR_OK"},           {1, "DCR_E_IO"},          {2, "DCR_E_NOMEM"},
      {3, "DCR_E_ARGUMENT"},   {4, "DCR_E_TRUNCATED"},   {5, "DCR_E_MAGIC"},
      {6, "DCR_E_VERSION"},    {7, "DCR_E_RESERVED"},    {8, "DCR_E_CHECKSUM"},
      {9, "DCR_E_LIMIT"},      {10, "DCR_E_STRUCTURE"},  {11, "DCR_E_UNKNOWN_SECTION"},
      {12, "DCR_E_MANIFEST"},  {13, "DCR_E_NAME"},       {14, "DCR_E_DTYPE"},
      {15, "DCR_E_SHAPE"},     {16, "DCR_E_LAYOUT"},     {17, "DCR_E_INDEX"},
      {18, "DCR_E_ENCODING"},  {19, "DCR_E_POSITION"},   {20, "DCR_E_DECOMPRESS"},
      {21, "DCR_E_BASE_MISMATCH"}, {22, "DCR_E_TARGET_MISMATCH"}, {23, "DCR_E_CHECKPOINT"},
      {24, "DCR_E_INTERRUPTED"},
      {25, "DCR_E_JOURNAL"},   {26, "DCR_E_ARCHIVE"},   {27, "DCR_E_SIGNATURE"},
      {28, "DCR_E_FETCH"},     {29, "DCR_E_CHANGED"},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    assert_string_equal(dcr_error_name(table[i].code), table[i].name);
  for (int i = 0; i < 30; i++) {
    const char *n = dcr_error_name(i), *m = dcr_error_message(i);
    assert_non_null(n);
    assert_non_null(m);
    assert_true(m[0] != '\0');
    assert_int_equal(strncmp(n, "DCR_", 4), 0);
    for (int j = 0; j < i; j++) {
      assert_string_not_equal(n, dcr_error_name(j));
      assert_string_not_equal(m, dcr_error_message(j));
    }
  }
  const int out[] = {-1, 30, 31, 1000, -1000};
  for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) {
    assert_string_equal(dcr_error_name(out[i]), "DCR_E_UNKNOWN");
    assert_non_null(dcr_error_message(out[i]));
  }
}

static void test_version(void **state) {
  (void)state;
  assert_string_equal(dcr_version_string(), DCR_VERSION_STRING);
  assert_int_equal(dcr_version_number(), DCR_VERSION_NUMBER);
  char want[32];
  snprintf(want, sizeof want, "%d.%d.%d", DCR_VERSION_MAJOR, DCR_VERSION_MINOR,
           DCR_VERSION_PATCH);
  assert_string_equal(dcr_version_string(), want);
}

static void test_detail_keeps_first_failure(void **state) {
  (void)state;
  dcr_detail d;
  dcr__detail_init(&d);
  assert_int_equal(d.code, DCR_OK);
  assert_int_equal(d.offset, DCR_NONE);
  assert_int_equal(d.tensor, DCR_NONE);
  assert_int_equal(d.chunk, DCR_NONE);
  assert_int_equal(dcr__fail(&d, DCR_E_SHAPE, "inner %d", 1), DCR_E_SHAPE);
  assert_int_equal(dcr__fail(&d, DCR_E_MANIFEST, "outer"), DCR_E_MANIFEST);
  assert_int_equal(d.code, DCR_E_SHAPE);
  assert_string_equal(d.message, "inner 1");
  assert_int_equal(dcr__fail(NULL, DCR_E_IO, "no detail"), DCR_E_IO);
}

/* ---- dtypes (§3, R-DT-1) -------------------------------------------------- */

static void test_dt1_dtype_table(void **state) {
  (void)state;
  static const struct {
    const char *name;
    unsigned size;
  } table[23] = {
      {NULL, 0},       {"BOOL", 1}, {"U8", 1},  {"I8", 1},   {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I16", 2},      {"U16", 2},  {"F16", 2}, {"BF16", 2}, {"I32", 4},     {"U32", 4},
      {"F32", 4},      {"I64", 8},  {"U64", 8}, {"F64", 8},
      /* 1.1; the packed ones are bytes to chunks and encodings (R-DT-2) */
      {"F8_E8M0", 1},  {"F8_E4M3FNUZ", 1}, {"F8_E5M2FNUZ", 1}, {"C64", 8},
      {"F4", 1},       {"F6_E2M3", 1},     {"F6_E3M2", 1},
  };
  static const unsigned bits[23] = {0, 8, 8, 8, 8, 8, 16, 16, 16, 16, 32, 32,
                                    32, 64, 64, 64, 8, 8, 8, 64, 4, 6, 6};
  for (int code = 1; code <= 22; code++) {
    assert_int_equal(dcr_dtype_bits(code), bits[code]);
    /* R-VER-4: a 1.0 bundle knows the first 15 only */
    assert_int_equal(dcr__dtype_lookup(table[code].name, strlen(table[code].name), 0),
                     code <= 15 ? code : 0);
    assert_int_equal(dcr__dtype_lookup(table[code].name, strlen(table[code].name), 1), code);
  }
  for (int code = 1; code <= 22; code++) {
    assert_string_equal(dcr_dtype_name(code), table[code].name);
    assert_int_equal(dcr_dtype_size(code), table[code].size);
    assert_int_equal(dcr_dtype_from_name(table[code].name, strlen(table[code].name)), code);
    /* every size divides the smallest chunk size (§8.1) */
    assert_int_equal(DCR__MIN_CHUNK_SIZE % dcr_dtype_size(code), 0);
  }
  const int bad[] = {0, 23, 24, 255, -1, 1000};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_null(dcr_dtype_name(bad[i]));
    assert_int_equal(dcr_dtype_bits(bad[i]), 0);
    assert_int_equal(dcr_dtype_size(bad[i]), 0);
  }
  assert_int_equal(dcr_dtype_from_name("bf16", 4), 0);
  assert_int_equal(dcr_dtype_from_name("BF16", 3), 0);   /* "BF1" */
  assert_int_equal(dcr_dtype_from_name("BF16x", 5), 0);
  assert_int_equal(dcr_dtype_from_name("F128", 4), 0);
  assert_int_equal(dcr_dtype_from_name("", 0), 0);
  assert_int_equal(dcr_dtype_from_name("U8\0", 3), 0);
  assert_int_equal(dcr_dtype_from_name("U8 trailing", 2), 2);
}

static int desc_check(int dtype, unsigned rank, uint64_t *dims, uint64_t byte_length,
                      const dcr_limits *lim) {
  dcr__desc t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  t.rank = rank;
  t.dims = dims;
  t.byte_length = byte_length;
  dcr_detail d;
  dcr__detail_init(&d);
  int rc = dcr__desc_check(&t, lim, &d);
  if (rc) assert_int_equal(d.code, rc);
  return rc;
}

static void test_man5_desc_check(void **state) {
  (void)state;
  dcr_limits lim = limits();
  uint64_t ok[] = {2, 3};
  assert_int_equal(desc_check(9, 2, ok, 12, &lim), DCR_OK);
  assert_int_equal(desc_check(9, 2, ok, 13, &lim), DCR_E_SHAPE);
  assert_int_equal(desc_check(9, 2, ok, 6, &lim), DCR_E_SHAPE);
  assert_int_equal(desc_check(9, 2, ok, 0, &lim), DCR_E_SHAPE);
  /* a scalar is one element */
  assert_int_equal(desc_check(15, 0, NULL, 8, &lim), DCR_OK);
  assert_int_equal(desc_check(15, 0, NULL, 0, &lim), DCR_E_SHAPE);
  /* overflow of the element count, and of count × size */
  uint64_t big[] = {(uint64_t)1 << 32, (uint64_t)1 << 32, 2};
  assert_int_equal(desc_check(2, 3, big, 0, &lim), DCR_E_SHAPE);
  uint64_t big2[] = {(uint64_t)1 << 32, (uint64_t)1 << 32};
  assert_int_equal(desc_check(2, 2, big2, 0, &lim), DCR_E_SHAPE);
  uint64_t big3[] = {(uint64_t)1 << 62};
  assert_int_equal(desc_check(12, 1, big3, 0, &lim), DCR_E_SHAPE);
  uint64_t over[] = {(uint64_t)1 << 61}; /* 2^61 × 8 = 2^64: overflows */
  assert_int_equal(desc_check(15, 1, over, 0, &lim), DCR_E_SHAPE);
  uint64_t fits2[] = {(uint64_t)1 << 60};
  assert_int_equal(desc_check(15, 1, fits2, (uint64_t)1 << 63, &lim), DCR_OK);
  /* a zero dimension empties the tensor, but the others must not overflow */
  uint64_t zero_huge[] = {0, (uint64_t)1 << 63, 4};
  assert_int_equal(desc_check(9, 3, zero_huge, 0, &lim), DCR_E_SHAPE);
  uint64_t zero_ok[] = {(uint64_t)1 << 40, 0, (uint64_t)1 << 20};
  assert_int_equal(desc_check(9, 3, zero_ok, 0, &lim), DCR_OK);
  assert_int_equal(desc_check(9, 3, zero_ok, 2, &lim), DCR_E_SHAPE);
  /* rank limit */
  uint64_t ones[32];
  for (size_t i = 0; i < 32; i++) ones[i] = 1;
  assert_int_equal(desc_check(2, 16, ones, 1, &lim), DCR_OK);
  assert_int_equal(desc_check(2, 17, ones, 1, &lim), DCR_E_LIMIT);
  lim.max_rank = 2;
  assert_int_equal(desc_check(2, 3, ones, 1, &lim), DCR_E_LIMIT);
  /* dtype */
  assert_int_equal(desc_check(0, 1, ones, 1, &lim), DCR_E_DTYPE);
  assert_int_equal(desc_check(23, 1, ones, 1, &lim), DCR_E_DTYPE);
  /* R-DT-2: packed elements fill whole bytes: 4 F4 are 2 bytes, 3 are not whole */
  uint64_t four = 4, three = 3, six = 6;
  assert_int_equal(desc_check(20, 1, &four, 2, &lim), DCR_OK);
  assert_int_equal(desc_check(20, 1, &three, 2, &lim), DCR_E_SHAPE);
  assert_int_equal(desc_check(20, 1, &three, 1, &lim), DCR_E_SHAPE);
  assert_int_equal(desc_check(21, 1, &four, 3, &lim), DCR_OK);
  assert_int_equal(desc_check(22, 1, &six, 4, &lim), DCR_E_SHAPE); /* 36 bits */
  assert_int_equal(desc_check(19, 1, &four, 32, &lim), DCR_OK);     /* C64 */
}

/* ---- names (§6.2 R-MAN-4) ------------------------------------------------ */

static int utf8(const char *s, size_t n) { return dcr__utf8_valid((const uint8_t *)s, n); }

static void test_man4_utf8(void **state) {
  (void)state;
  static const char *const valid[] = {
      "",
      "abc",
      "layers.0.weight",
      "h\xc3\xa9llo",             /* é */
      "\xe2\x82\xac",             /* € */
      "\xf0\x9f\x98\x80",         /* U+1F600 */
      "\xef\xbf\xbf",             /* U+FFFF */
      "\xf4\x8f\xbf\xbf",         /* U+10FFFF */
      "\xed\x9f\xbf",             /* U+D7FF */
      "\xee\x80\x80",             /* U+E000 */
      "\xc2\x80",                 /* U+0080 */
      "\xe0\xa0\x80",             /* U+0800 */
      "\xf0\x90\x80\x80",         /* U+10000 */
  };
  for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++)
    assert_true(utf8(valid[i], strlen(valid[i])));
  static const char *const invalid[] = {
      "\xc0\x80",                 /* overlong NUL */
      "\xc1\xbf",                 /* overlong */
      "\xe0\x80\x80",             /* overlong */
      "\xe0\x9f\xbf",             /* overlong U+07FF */
      "\xf0\x80\x80\x80",         /* overlong */
      "\xf0\x8f\xbf\xbf",         /* overlong U+FFFF */
      "\xed\xa0\x80",             /* U+D800 surrogate */
      "\xed\xbf\xbf",             /* U+DFFF surrogate */
      "\xf4\x90\x80\x80",         /* U+110000 */
      "\xf5\x80\x80\x80",
      "\xf8\x88\x80\x80\x80",     /* 5-byte form */
      "\xff",
      "\xfe",
      "\x80",                     /* lone continuation */
      "a\xbf",
      "\xc3",                     /* truncated */
      "\xe2\x82",
      "\xf0\x9f\x98",
      "\xc3(",                    /* bad continuation */
      "\xe2\x28\xa1",
  };
  for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++)
    assert_false(utf8(invalid[i], strlen(invalid[i])));
  /* truncated by length, not by content */
  assert_false(utf8("\xe2\x82\xac", 2));
  /* embedded NUL */
  assert_false(utf8("a\0b", 3));
  assert_false(utf8("\0", 1));
}

static void test_man4_name_order_is_bytewise(void **state) {
  (void)state;
  assert_true(dcr__name_cmp("a", 1, "b", 1) < 0);
  assert_true(dcr__name_cmp("b", 1, "a", 1) > 0);
  assert_true(dcr__name_cmp("a", 1, "ab", 2) < 0);
  assert_true(dcr__name_cmp("ab", 2, "a", 1) > 0);
  assert_int_equal(dcr__name_cmp("ab", 2, "ab", 2), 0);
  assert_true(dcr__name_cmp("Z", 1, "a", 1) < 0);
  assert_true(dcr__name_cmp("z", 1, "\xc3\xa9", 2) < 0); /* unsigned bytes */
  assert_true(dcr__name_cmp("a.10", 4, "a.9", 3) < 0);
}

/* ---- bundle header (§4.1) ------------------------------------------------ */

static int header_parse(const uint8_t *p, uint64_t available, unsigned *minor) {
  dcr_detail d;
  dcr__detail_init(&d);
  int rc = dcr__header_parse(p, available, minor, &d);
  if (rc) assert_int_equal(d.code, rc);
  return rc;
}

static void rehash_header(uint8_t *h) { dcr__put64(h + 56, XXH3_64bits(h, 56)); }

static void test_hdr_round_trip(void **state) {
  (void)state;
  uint8_t h[DCR__HEADER_SIZE];
  dcr__header_write(h, 0);
  static const uint8_t magic[8] = {0x89, 0x44, 0x43, 0x52, 0x0D, 0x0A, 0x1A, 0x0A};
  assert_memory_equal(h, magic, 8);
  assert_int_equal(dcr__le16(h + 8), 1);
  assert_int_equal(dcr__le16(h + 10), 0);
  for (int i = 12; i < 56; i++) assert_int_equal(h[i], 0);
  assert_int_equal(dcr__le64(h + 56), XXH3_64bits(h, 56));
  unsigned minor = 99;
  assert_int_equal(header_parse(h, 64, &minor), DCR_OK);
  assert_int_equal(minor, 0);
  /* more bytes after the header are the caller's business */
  assert_int_equal(header_parse(h, 1000, &minor), DCR_OK);
  /* any minor is accepted (§12) */
  dcr__put16(h + 10, 7);
  rehash_header(h);
  assert_int_equal(header_parse(h, 64, &minor), DCR_OK);
  assert_int_equal(minor, 7);
  dcr__put16(h + 10, 0xFFFF);
  rehash_header(h);
  assert_int_equal(header_parse(h, 64, &minor), DCR_OK);
  assert_int_equal(minor, 0xFFFF);
}

static void test_hdr1_wrong_magic_is_rejected(void **state) {
  (void)state;
  unsigned minor;
  for (int i = 0; i < 8; i++)
    for (unsigned bit = 0; bit < 8; bit++) {
      uint8_t h[DCR__HEADER_SIZE];
      dcr__header_write(h, 0);
      flip_bit(h, (size_t)i, bit);
      assert_int_equal(header_parse(h, 64, &minor), DCR_E_MAGIC);
      /* even with the check recomputed */
      rehash_header(h);
      assert_int_equal(header_parse(h, 64, &minor), DCR_E_MAGIC);
    }
  /* a file that is not a bundle: MAGIC, whatever its size */
  const uint8_t zip[] = "PK\x03\x04 not a bundle at all, and long enough to be a header........";
  assert_int_equal(header_parse(zip, 64, &minor), DCR_E_MAGIC);
  assert_int_equal(header_parse(zip, 10, &minor), DCR_E_MAGIC);
  assert_int_equal(header_parse(zip, 1, &minor), DCR_E_MAGIC);
}

static void test_hdr_short_file(void **state) {
  (void)state;
  unsigned minor;
  uint8_t h[DCR__HEADER_SIZE];
  dcr__header_write(h, 0);
  for (uint64_t n = 0; n < DCR__HEADER_SIZE; n++)
    assert_int_equal(header_parse(h, n, &minor), DCR_E_TRUNCATED);
  /* 10 bytes: MAGIC if the magic differs, else TRUNCATED */
  h[3] = 'X';
  assert_int_equal(header_parse(h, 10, &minor), DCR_E_MAGIC);
  assert_int_equal(header_parse(h, 4, &minor), DCR_E_MAGIC);
  assert_int_equal(header_parse(h, 3, &minor), DCR_E_TRUNCATED); /* "\x89DC" is a prefix */
}

static void test_hdr2_bad_check_is_rejected(void **state) {
  (void)state;
  unsigned minor;
  for (int i = 8; i < 64; i++) {
    uint8_t h[DCR__HEADER_SIZE];
    dcr__header_write(h, 0);
    flip_bit(h, (size_t)i, (unsigned)i % 8);
    assert_int_equal(header_parse(h, 64, &minor), DCR_E_CHECKSUM);
  }
  /* the check is verified before the version */
  uint8_t h[DCR__HEADER_SIZE];
  dcr__header_write(h, 0);
  dcr__put16(h + 8, 2);
  assert_int_equal(header_parse(h, 64, &minor), DCR_E_CHECKSUM);
}

static void test_hdr3_major_2_is_rejected(void **state) {
  (void)state;
  unsigned minor;
  const uint16_t majors[] = {0, 2, 0x100, 0xFFFF};
  for (size_t i = 0; i < sizeof majors / sizeof majors[0]; i++) {
    uint8_t h[DCR__HEADER_SIZE];
    dcr__header_write(h, 0);
    dcr__put16(h + 8, majors[i]);
    rehash_header(h);
    assert_int_equal(header_parse(h, 64, &minor), DCR_E_VERSION);
    /* the version is checked before reserved bytes */
    h[20] = 1;
    rehash_header(h);
    assert_int_equal(header_parse(h, 64, &minor), DCR_E_VERSION);
  }
}

static void test_res1_header_reserved_byte_is_rejected(void **state) {
  (void)state;
  unsigned minor;
  for (int i = 12; i < 56; i++) {
    uint8_t h[DCR__HEADER_SIZE];
    dcr__header_write(h, 0);
    h[i] = (uint8_t)(1u << (i % 8));
    rehash_header(h);
    assert_int_equal(header_parse(h, 64, &minor), DCR_E_RESERVED);
  }
}

/* ---- section headers (§4.2) ---------------------------------------------- */

static int section_parse(const uint8_t *p, uint64_t offset, dcr__section *s) {
  dcr_detail d;
  dcr__detail_init(&d);
  int rc = dcr__section_header_parse(p, offset, s, &d);
  if (rc) assert_int_equal(d.code, rc);
  return rc;
}

static void rehash_section(uint8_t *h) { dcr__put64(h + 24, XXH3_64bits(h, 24)); }

static void test_sec_header_round_trip(void **state) {
  (void)state;
  const dcr__section in = {.type = DCR__SEC_CHNK, .flags = DCR__FLAG_CRITICAL,
                           .compression = 0, .offset = 0, .length = 0x0123456789ABull,
                           .payload_check = 0xFEDCBA9876543210ull};
  uint8_t h[DCR__SECTION_HEADER_SIZE];
  dcr__section_header_write(h, &in);
  assert_memory_equal(h, "CHNK", 4);
  assert_int_equal(dcr__le16(h + 4), 1);
  assert_int_equal(h[6], 0);
  assert_int_equal(h[7], 0);
  assert_int_equal(dcr__le64(h + 8), in.length);
  assert_int_equal(dcr__le64(h + 16), in.payload_check);
  assert_int_equal(dcr__le64(h + 24), XXH3_64bits(h, 24));
  dcr__section out;
  assert_int_equal(section_parse(h, 4096, &out), DCR_OK);
  assert_int_equal(out.type, in.type);
  assert_int_equal(out.flags, in.flags);
  assert_int_equal(out.compression, in.compression);
  assert_int_equal(out.length, in.length);
  assert_int_equal(out.payload_check, in.payload_check);
  assert_int_equal(out.offset, 4096);
  /* an ancillary, compressed one */
  const dcr__section meta = {.type = DCR__SEC_META, .flags = 0, .compression = 1,
                             .length = 5, .payload_check = 1};
  dcr__section_header_write(h, &meta);
  assert_int_equal(section_parse(h, 64, &out), DCR_OK);
  assert_int_equal(out.type, DCR__SEC_META);
  assert_int_equal(out.flags, 0);
  assert_int_equal(out.compression, 1);
  char name[5];
  dcr__section_type_name(DCR__SEC_MANI, name);
  assert_string_equal(name, "MANI");
  dcr__section_type_name(DCR__FOURCC('a', 0x01, 0x7F, 'Z'), name);
  assert_string_equal(name, "a??Z");
}

static void test_sec2_flipped_bit_is_rejected(void **state) {
  (void)state;
  const dcr__section in = {.type = DCR__SEC_MANI, .flags = DCR__FLAG_CRITICAL,
                           .compression = 1, .length = 1234, .payload_check = 42};
  for (size_t i = 0; i < DCR__SECTION_HEADER_SIZE; i++)
    for (unsigned bit = 0; bit < 8; bit++) {
      uint8_t h[DCR__SECTION_HEADER_SIZE];
      dcr__section_header_write(h, &in);
      flip_bit(h, i, bit);
      dcr__section out;
      assert_int_equal(section_parse(h, 64, &out), DCR_E_CHECKSUM);
    }
}

static void test_res1_section_reserved_flag_or_byte_is_rejected(void **state) {
  (void)state;
  for (unsigned bit = 1; bit < 16; bit++) {
    const dcr__section in = {.type = DCR__SEC_IDEN,
                             .flags = (uint16_t)(DCR__FLAG_CRITICAL | (1u << bit)),
                             .length = 64, .payload_check = 7};
    uint8_t h[DCR__SECTION_HEADER_SIZE];
    dcr__section_header_write(h, &in);
    dcr__section out;
    assert_int_equal(section_parse(h, 64, &out), DCR_E_RESERVED);
  }
  const dcr__section in = {.type = DCR__SEC_IDEN, .flags = 1, .length = 64};
  uint8_t h[DCR__SECTION_HEADER_SIZE];
  dcr__section_header_write(h, &in);
  h[7] = 0x80;
  rehash_section(h);
  dcr__section out;
  assert_int_equal(section_parse(h, 64, &out), DCR_E_RESERVED);
}

static int inflate(const uint8_t *p, size_t n, uint64_t max, size_t *out_length) {
  uint8_t *out = (uint8_t *)p; /* must be reset to NULL on failure */
  dcr_detail d;
  dcr__detail_init(&d);
  int rc = dcr__section_inflate(p, n, max, UINT64_MAX, 0, NULL, &out, out_length, &d);
  if (rc) {
    assert_int_equal(d.code, rc);
    assert_null(out);
  }
  free(rc ? NULL : out);
  return rc;
}

static void test_cmp1_section_inflate(void **state) {
  (void)state;
  uint8_t content[1000], frame[2048];
  for (size_t i = 0; i < sizeof content; i++) content[i] = (uint8_t)(i % 13);
  size_t z = ZSTD_compress(frame, sizeof frame, content, sizeof content, 3);
  assert_false(ZSTD_isError(z));
  size_t n = 0;
  assert_int_equal(inflate(frame, z, 1 << 30, &n), DCR_OK);
  assert_int_equal(n, sizeof content);
  /* not exactly one frame: a byte after it, two frames, a cut frame, garbage */
  frame[z] = 0;
  assert_int_equal(inflate(frame, z + 1, 1 << 30, &n), DCR_E_DECOMPRESS);
  memcpy(frame + z, frame, z);
  assert_int_equal(inflate(frame, 2 * z, 1 << 30, &n), DCR_E_DECOMPRESS);
  assert_int_equal(inflate(frame, z - 1, 1 << 30, &n), DCR_E_DECOMPRESS);
  assert_int_equal(inflate(content, 100, 1 << 30, &n), DCR_E_DECOMPRESS);
  assert_int_equal(inflate(frame, 0, 1 << 30, &n), DCR_E_DECOMPRESS);
  /* a declared size above the limit, before allocating (R-CMP-2) */
  assert_int_equal(inflate(frame, z, 999, &n), DCR_E_LIMIT);
  assert_int_equal(inflate(frame, z, 1000, &n), DCR_OK);
  /* no declared size */
  ZSTD_CCtx *cc = ZSTD_createCCtx();
  assert_non_null(cc);
  ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 0);
  ZSTD_inBuffer in = {content, sizeof content, 0};
  ZSTD_outBuffer o = {frame, sizeof frame, 0};
  size_t left;
  do left = ZSTD_compressStream2(cc, &o, &in, ZSTD_e_end);
  while (left && !ZSTD_isError(left));
  assert_false(ZSTD_isError(left));
  ZSTD_freeCCtx(cc);
  assert_int_equal(ZSTD_getFrameContentSize(frame, o.pos), ZSTD_CONTENTSIZE_UNKNOWN);
  assert_int_equal(inflate(frame, o.pos, 1 << 30, &n), DCR_E_DECOMPRESS);
}

/* A frame inflated a few blocks at a time, looking at a cancel flag (issue 32):
 * the same bytes as in one call, over several steps of 512 blocks and every kind
 * of block; a set flag stops it; damage is found the same way; the first bytes
 * can be had alone. */
static void test_cmp_inflate_watched(void **state) {
  (void)state;
  size_t size = (size_t)80 << 20, cap = ZSTD_compressBound(size);
  uint8_t *content = malloc(size), *frame = malloc(cap), *out = malloc(size);
  assert_true(content && frame && out);
  uint32_t x = 1;
  for (size_t i = 0; i < size; i++) { /* runs of a byte (RLE blocks), noise (raw), text */
    size_t block = i >> 17;
    x = x * 1103515245u + 12345u;
    content[i] = block % 3 == 0 ? 7 : block % 3 == 1 ? (uint8_t)(x >> 24) : (uint8_t)(i % 61);
  }
  ZSTD_CCtx *cc = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
  size_t z = ZSTD_compress2(cc, frame, cap, content, size);
  ZSTD_freeCCtx(cc);
  assert_false(ZSTD_isError(z));
  ZSTD_DCtx *dctx = ZSTD_createDCtx();
  volatile int stop = 0;
  dcr_detail d;
  dcr__detail_init(&d);
  assert_int_equal(dcr__zframe_inflate(dctx, frame, z, out, size, &stop, &d), DCR_OK);
  assert_memory_equal(out, content, size);
  /* the context is left for the next frame, in one call or stepped */
  memset(out, 0, size);
  assert_int_equal(dcr__zframe_decompress(dctx, frame, z, out, size, &d), DCR_OK);
  assert_memory_equal(out, content, size);
  stop = 1;
  assert_int_equal(dcr__zframe_inflate(dctx, frame, z, out, size, &stop, &d), DCR_E_INTERRUPTED);
  stop = 0;
  dcr__detail_init(&d);
  frame[z / 2] ^= 0x40; /* caught by a block or by the checksum */
  assert_int_equal(dcr__zframe_inflate(dctx, frame, z, out, size, &stop, &d), DCR_E_DECOMPRESS);
  frame[z / 2] ^= 0x40;
  dcr__detail_init(&d);
  assert_int_equal(dcr__zframe_inflate(dctx, frame, z, out, size - 1, &stop, &d), DCR_E_DECOMPRESS);
  dcr__detail_init(&d);
  assert_int_equal(dcr__zframe_inflate(dctx, frame, z, out, size, &stop, &d), DCR_OK);
  uint8_t head[DCR__MANIFEST_HEAD];
  assert_int_equal(dcr__zframe_head(frame, z, head, sizeof head), 0);
  assert_memory_equal(head, content, sizeof head);
  assert_int_equal(dcr__zframe_head(content, 100, head, sizeof head), -1);
  ZSTD_freeDCtx(dctx);
  free(content), free(frame), free(out);
}

/* What a manifest's parse needs, from its fixed fields alone: in proportion to the
 * bytes after the prefix; nothing where the fields fail first. */
static void test_manifest_need(void **state) {
  (void)state;
  dcr_limits lim;
  dcr_limits_default(&lim);
  uint8_t head[DCR__MANIFEST_HEAD] = {1, 0, 0, 0, 0, 0x10, 0, 0}; /* one entry, 4096 */
  uint64_t need = dcr__manifest_need(head, (uint64_t)1 << 20, &lim, DCR_FORMAT_MINOR);
  assert_true(need >= ((uint64_t)1 << 20) - DCR__MANIFEST_HEAD);
  head[16] = 0x00, head[18] = 0x08; /* a prefix of 512 KiB: half as much */
  uint64_t less = dcr__manifest_need(head, (uint64_t)1 << 20, &lim, DCR_FORMAT_MINOR);
  assert_true(less < need && less >= ((uint64_t)1 << 19) - DCR__MANIFEST_HEAD);
  head[5] = 0x11; /* chunk size not a power of two */
  assert_int_equal(dcr__manifest_need(head, (uint64_t)1 << 20, &lim, DCR_FORMAT_MINOR), 0);
  head[5] = 0x10, head[18] = 0x20; /* a prefix longer than the manifest */
  assert_int_equal(dcr__manifest_need(head, (uint64_t)1 << 20, &lim, DCR_FORMAT_MINOR), 0);
  assert_int_equal(dcr__manifest_need(head, 31, &lim, DCR_FORMAT_MINOR), 0);
}

/* A frame written byte by byte (RFC 8878): magic, frame header descriptor, the
 * optional window descriptor, dictionary id and content size fields, then blocks. */
typedef struct {
  uint8_t p[256];
  size_t n;
} zbuild;

static void zb_put(zbuild *z, const void *p, size_t n) {
  assert_true(z->n + n <= sizeof z->p);
  memcpy(z->p + z->n, p, n);
  z->n += n;
}

static void zb_header(zbuild *z, uint8_t fhd, const uint8_t *rest, size_t rest_length) {
  static const uint8_t magic[4] = {0x28, 0xB5, 0x2F, 0xFD};
  z->n = 0;
  zb_put(z, magic, 4);
  zb_put(z, &fhd, 1);
  zb_put(z, rest, rest_length);
}

/* type 0 raw (then `size` bytes of `fill`), 1 RLE (one byte of `fill`) */
static void zb_block(zbuild *z, int type, uint32_t size, int last, uint8_t fill) {
  uint32_t h = size << 3 | (uint32_t)type << 1 | (uint32_t)last;
  uint8_t b[3] = {(uint8_t)h, (uint8_t)(h >> 8), (uint8_t)(h >> 16)};
  zb_put(z, b, 3);
  for (uint32_t i = 0; i < (type ? 1 : size); i++) zb_put(z, &fill, 1);
}

/* §4.4, R-CMP-4 and R-CMP-5: the zstd profile, on frames libzstd would not write. */
static void test_cmp4_zstd_profile(void **state) {
  (void)state;
  zbuild z;
  size_t n;
  const uint8_t five = 5, seven[2] = {7, 5};
  /* the smallest valid frame: single segment, 1-byte content size, one raw block */
  zb_header(&z, 0x20, &five, 1);
  zb_block(&z, 0, 5, 1, 'h');
  assert_int_equal(inflate(z.p, z.n, 1 << 30, &n), DCR_OK);
  assert_int_equal(n, 5);
  /* a skippable frame and a legacy (v0.7) magic */
  static const uint8_t skippable[] = {0x50, 0x2A, 0x4D, 0x18, 1, 0, 0, 0, 0};
  assert_int_equal(inflate(skippable, sizeof skippable, 1 << 30, &n), DCR_E_DECOMPRESS);
  uint8_t legacy[sizeof z.p];
  memcpy(legacy, z.p, z.n);
  legacy[0] = 0x27;
  assert_int_equal(inflate(legacy, z.n, 1 << 30, &n), DCR_E_DECOMPRESS);
  /* the reserved bit of the frame header descriptor */
  zb_header(&z, 0x28, &five, 1);
  zb_block(&z, 0, 5, 1, 'h');
  assert_int_equal(inflate(z.p, z.n, 1 << 30, &n), DCR_E_DECOMPRESS);
  /* a dictionary id (1 byte, 7) */
  zb_header(&z, 0x21, seven, 2);
  zb_block(&z, 0, 5, 1, 'h');
  assert_int_equal(inflate(z.p, z.n, 1 << 30, &n), DCR_E_DECOMPRESS);
  /* no content size: not single segment, window descriptor 0 (1 KiB) */
  const uint8_t window_1k = 0x00;
  zb_header(&z, 0x00, &window_1k, 1);
  zb_block(&z, 0, 5, 1, 'h');
  assert_int_equal(inflate(z.p, z.n, 1 << 30, &n), DCR_E_DECOMPRESS);
  /* 300 bytes (2-byte content size: 300 - 256): a 1 KiB window is allowed (the
   * floor), a 1 MiB one is not (above 512, the content size rounded up) */
  const uint8_t w1k[3] = {0x00, 44, 0}, w1m[3] = {10 << 3, 44, 0};
  zb_header(&z, 0x40, w1k, 3);
  zb_block(&z, 1, 300, 1, 'a');
  assert_int_equal(inflate(z.p, z.n, 1 << 30, &n), DCR_OK);
  assert_int_equal(n, 300);
  zb_header(&z, 0x40, w1m, 3);
  zb_block(&z, 1, 300, 1, 'a');
  assert_int_equal(inflate(z.p, z.n, 1 << 30, &n), DCR_E_DECOMPRESS);
  /* 1 MiB from 8 RLE blocks of 128 KiB in 41 bytes: within 32768 times the frame;
   * declaring 2 MiB in those bytes is not (R-CMP-5), whatever the blocks say */
  for (uint32_t declared = 1u << 20; declared <= 1u << 21; declared <<= 1) {
    const uint8_t fcs[4] = {0, 0, (uint8_t)(declared >> 16), (uint8_t)(declared >> 24)};
    zb_header(&z, 0xA0, fcs, 4);
    for (int i = 0; i < 8; i++) zb_block(&z, 1, 1u << 17, i == 7, 'r');
    assert_int_equal(z.n, 41);
    assert_int_equal(inflate(z.p, z.n, 1 << 30, &n), declared == 1u << 20 ? DCR_OK : DCR_E_DECOMPRESS);
  }
  /* a content checksum: the low 4 bytes of XXH64 of the content, checked */
  zb_header(&z, 0x24, &five, 1);
  zb_block(&z, 0, 5, 1, 'h');
  uint32_t sum = (uint32_t)XXH64("hhhhh", 5, 0);
  uint8_t le[4] = {(uint8_t)sum, (uint8_t)(sum >> 8), (uint8_t)(sum >> 16), (uint8_t)(sum >> 24)};
  zb_put(&z, le, 4);
  assert_int_equal(inflate(z.p, z.n, 1 << 30, &n), DCR_OK);
  z.p[z.n - 1] ^= 1;
  assert_int_equal(inflate(z.p, z.n, 1 << 30, &n), DCR_E_DECOMPRESS);
  /* the limit comes after the header rules: a dictionary id wins over the size */
  zb_header(&z, 0x21, seven, 2);
  zb_block(&z, 0, 5, 1, 'h');
  assert_int_equal(inflate(z.p, z.n, 4, &n), DCR_E_DECOMPRESS);
  zb_header(&z, 0x20, &five, 1);
  zb_block(&z, 0, 5, 1, 'h');
  assert_int_equal(inflate(z.p, z.n, 4, &n), DCR_E_LIMIT);
  /* content sizes above 2^63 (found by fuzz_chunk: rounding one up to a power of
   * two looped forever) are refused by the limit, even with no limit to speak of */
  static const uint8_t huge[2][8] = {{1, 0, 0, 0, 0, 0, 0, 0x80},
                                     {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
  for (int i = 0; i < 2; i++) {
    zb_header(&z, 0xE0, huge[i], 8);
    zb_block(&z, 0, 5, 1, 'h');
    assert_int_equal(inflate(z.p, z.n, 1 << 30, &n), DCR_E_LIMIT);
    /* 2^63 + 1 under no limit: the ratio rule (R-CMP-5) */
    if (!i) assert_int_equal(inflate(z.p, z.n, UINT64_MAX, &n), DCR_E_DECOMPRESS);
  }
}

/* ---- manifest (§6) ------------------------------------------------------- */

/* A manifest built by hand; entries and dims live in the struct. */
typedef struct {
  dcr__manifest m;
  dcr__entry e[8];
  uint64_t dims[8][2][4];
  uint8_t prefix[512];
} mbuild;

static void mb_init(mbuild *b, int kind, uint64_t data_length) {
  memset(b, 0, sizeof *b);
  b->m.chunk_size = 4096;
  b->m.kind = kind;
  b->m.data_length = data_length;
  b->m.entries = b->e;
}

static void mb_desc(dcr__desc *t, uint64_t *dims, int dtype, unsigned rank, const uint64_t *shape,
                    uint64_t offset) {
  t->dtype = dtype;
  t->rank = rank;
  t->dims = dims;
  uint64_t n = 1;
  for (unsigned i = 0; i < rank; i++) dims[i] = shape[i], n *= shape[i];
  t->byte_length = n * dcr_dtype_size(dtype);
  t->offset = offset;
}

/* Adds an entry; base_dtype / target_dtype 0 mean absent. */
static dcr__entry *mb_entry(mbuild *b, const char *name, int base_dtype, unsigned base_rank,
                            const uint64_t *base_shape, int target_dtype, unsigned target_rank,
                            const uint64_t *target_shape, uint64_t offset) {
  size_t i = (size_t)b->m.entry_count++;
  assert_true(i < 8);
  dcr__entry *e = &b->e[i];
  e->name = name;
  e->name_length = (uint16_t)strlen(name);
  if (base_dtype) {
    e->presence |= DCR__HAS_BASE;
    mb_desc(&e->base, b->dims[i][0], base_dtype, base_rank, base_shape, 0);
  }
  if (target_dtype) {
    e->presence |= DCR__HAS_TARGET;
    mb_desc(&e->target, b->dims[i][1], target_dtype, target_rank, target_shape, offset);
  }
  return e;
}

static void mb_prefix(mbuild *b, const char *json) {
  size_t n = strlen(json), padded = (n + 7) / 8 * 8;
  assert_true(8 + padded <= sizeof b->prefix);
  dcr__put64(b->prefix, padded);
  memcpy(b->prefix + 8, json, n);
  memset(b->prefix + 8 + n, ' ', padded - n);
  b->m.prefix = b->prefix;
  b->m.prefix_length = 8 + padded;
}

/* raw: one entry "raw", U8 [nb] on the base side and U8 [nt] on the target side */
static void mb_raw(mbuild *b, uint64_t nb, uint64_t nt) {
  mb_init(b, DCR_KIND_RAW, nt);
  mb_entry(b, "raw", 2, 1, &nb, 2, 1, &nt, 0);
}

#define ST_JSON                                                                 \
  "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"          \
  "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[12,28]}}"

/* safetensors: "a" reshaped [6] -> [2,3], "b" added, "c" removed */
static void mb_st(mbuild *b) {
  static const uint64_t six[] = {6}, two_three[] = {2, 3}, four[] = {4}, five[] = {5};
  mb_init(b, DCR_KIND_SAFETENSORS, 28);
  mb_prefix(b, ST_JSON);
  mb_entry(b, "a", 9, 1, six, 9, 2, two_three, 0);
  mb_entry(b, "b", 0, 0, NULL, 12, 1, four, 12);
  mb_entry(b, "c", 2, 1, five, 0, 0, NULL, 0);
}

static void serialize(const dcr__manifest *m, uint8_t **out, size_t *length) {
  assert_int_equal(dcr__manifest_serialize(m, out, length), DCR_OK);
}

/* Parses a copy of bytes[0..length) with `lim` (NULL: defaults). */
static int parse_bytes_lim(const uint8_t *bytes, size_t length, const dcr_limits *lim,
                           dcr__manifest *out) {
  dcr_limits def = limits();
  dcr_detail d;
  dcr__detail_init(&d);
  uint8_t *copy = dup_bytes(bytes, length);
  int rc = dcr__manifest_parse(copy, length, lim ? lim : &def, DCR_FORMAT_MINOR, out, &d);
  if (rc) {
    assert_int_equal(d.code, rc);
    assert_true(d.message[0] != '\0');
    static const dcr__manifest empty;
    assert_memory_equal(out, &empty, sizeof empty);
  }
  return rc;
}

static int parse_bytes(const uint8_t *bytes, size_t length, dcr__manifest *out) {
  return parse_bytes_lim(bytes, length, NULL, out);
}

/* Serializes and parses; returns the parse's code (the parsed manifest is freed). */
static int round_trip_code_lim(const mbuild *b, const dcr_limits *lim) {
  uint8_t *buf;
  size_t n;
  serialize(&b->m, &buf, &n);
  dcr__manifest out;
  int rc = parse_bytes_lim(buf, n, lim, &out);
  free(buf);
  dcr__manifest_free(&out);
  return rc;
}

static int round_trip_code(const mbuild *b) { return round_trip_code_lim(b, NULL); }

static void assert_desc_equal(const dcr__desc *a, const dcr__desc *b, int with_offset) {
  assert_int_equal(a->dtype, b->dtype);
  assert_int_equal(a->rank, b->rank);
  for (unsigned i = 0; i < a->rank; i++) assert_int_equal(a->dims[i], b->dims[i]);
  assert_int_equal(a->byte_length, b->byte_length);
  if (with_offset) assert_int_equal(a->offset, b->offset);
}

static void assert_manifest_equal(const dcr__manifest *a, const dcr__manifest *b) {
  assert_int_equal(a->chunk_size, b->chunk_size);
  assert_int_equal(a->kind, b->kind);
  assert_int_equal(a->prefix_length, b->prefix_length);
  assert_int_equal(a->data_length, b->data_length);
  if (a->prefix_length) assert_memory_equal(a->prefix, b->prefix, (size_t)a->prefix_length);
  assert_int_equal(a->entry_count, b->entry_count);
  for (uint64_t i = 0; i < a->entry_count; i++) {
    const dcr__entry *x = &a->entries[i], *y = &b->entries[i];
    assert_int_equal(x->name_length, y->name_length);
    assert_memory_equal(x->name, y->name, x->name_length);
    assert_int_equal(x->presence, y->presence);
    if (x->presence & DCR__HAS_BASE) assert_desc_equal(&x->base, &y->base, 0);
    if (x->presence & DCR__HAS_TARGET) assert_desc_equal(&x->target, &y->target, 1);
  }
}

static void test_man_raw_round_trip(void **state) {
  (void)state;
  const uint64_t sizes[][2] = {{1000, 1000}, {0, 5}, {5, 0}, {0, 0}, {1u << 20, 12345}};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    mbuild b;
    mb_raw(&b, sizes[i][0], sizes[i][1]);
    uint8_t *buf;
    size_t n;
    serialize(&b.m, &buf, &n);
    /* 32 fixed + 2 + "raw" + 2 + base (2+8+8) + target (2+8+8+8) */
    assert_int_equal(n, 32 + 2 + 3 + 2 + 18 + 26);
    assert_int_equal(dcr__le32(buf), 1);
    assert_int_equal(dcr__le32(buf + 4), 4096);
    assert_int_equal(buf[8], DCR_KIND_RAW);
    for (int k = 9; k < 16; k++) assert_int_equal(buf[k], 0);
    dcr__manifest out;
    assert_int_equal(parse_bytes(buf, n, &out), DCR_OK);
    assert_manifest_equal(&out, &b.m);
    assert_int_equal(dcr__entry_delta_coded(&out.entries[0]), sizes[i][0] == sizes[i][1]);
    dcr__manifest_free(&out);
    free(buf);
  }
}

static void test_man_safetensors_round_trip(void **state) {
  (void)state;
  mbuild b;
  mb_st(&b);
  uint8_t *buf;
  size_t n;
  serialize(&b.m, &buf, &n);
  dcr__manifest out;
  assert_int_equal(parse_bytes(buf, n, &out), DCR_OK);
  assert_manifest_equal(&out, &b.m);
  assert_true(dcr__entry_delta_coded(&out.entries[0]));  /* a reshape keeps its bytes */
  assert_false(dcr__entry_delta_coded(&out.entries[1])); /* added */
  assert_false(dcr__entry_delta_coded(&out.entries[2])); /* removed */
  /* the same bytes again */
  uint8_t *again;
  size_t m;
  serialize(&out, &again, &m);
  assert_int_equal(m, n);
  assert_memory_equal(again, buf, n);
  free(again);
  dcr__manifest_free(&out);
  free(buf);
  /* a dtype change with the same byte length is not delta-coded */
  mbuild c;
  static const uint64_t six[] = {6}, three[] = {3};
  mb_st(&c);
  mb_desc(&c.e[0].base, c.dims[0][0], 12, 1, three, 0); /* F32 [3]: 12 bytes */
  assert_int_equal(round_trip_code(&c), DCR_OK);
  assert_false(dcr__entry_delta_coded(&c.e[0]));
  mb_desc(&c.e[0].base, c.dims[0][0], 9, 1, six, 0);
  assert_true(dcr__entry_delta_coded(&c.e[0]));
  assert_int_equal(dcr__chunk_count(0, 4096), 0);
  assert_int_equal(dcr__chunk_count(1, 4096), 1);
  assert_int_equal(dcr__chunk_count(4096, 4096), 1);
  assert_int_equal(dcr__chunk_count(4097, 4096), 2);
}

static void test_man4_names_unsorted_or_duplicate_are_rejected(void **state) {
  (void)state;
  static const uint64_t one[] = {1};
  /* raw kind rules would also fail; the name rule is checked as entries parse */
  mbuild b;
  mb_init(&b, DCR_KIND_RAW, 1);
  mb_entry(&b, "raw", 2, 1, one, 0, 0, NULL, 0);
  mb_entry(&b, "abc", 0, 0, NULL, 2, 1, one, 0);
  assert_int_equal(round_trip_code(&b), DCR_E_NAME);
  mb_init(&b, DCR_KIND_RAW, 1);
  mb_entry(&b, "raw", 2, 1, one, 0, 0, NULL, 0);
  mb_entry(&b, "raw", 0, 0, NULL, 2, 1, one, 0);
  assert_int_equal(round_trip_code(&b), DCR_E_NAME);
  /* a prefix sorts first */
  mb_init(&b, DCR_KIND_RAW, 1);
  mb_entry(&b, "rawx", 2, 1, one, 0, 0, NULL, 0);
  mb_entry(&b, "raw", 0, 0, NULL, 2, 1, one, 0);
  assert_int_equal(round_trip_code(&b), DCR_E_NAME);
  /* in order, the same entries pass the name rule (R-MAN-7 does not say whether
   * a raw tensor must keep its name on both sides) */
  mb_init(&b, DCR_KIND_RAW, 1);
  mb_entry(&b, "raw", 2, 1, one, 0, 0, NULL, 0);
  mb_entry(&b, "rawx", 0, 0, NULL, 2, 1, one, 0);
  int rc = round_trip_code(&b);
  assert_true(rc == DCR_OK || rc == DCR_E_MANIFEST);
}

static void test_man4_bad_names_are_rejected(void **state) {
  (void)state;
  static const char *const bad[] = {"\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "r\xff",
                                    ""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    mbuild b;
    mb_raw(&b, 4, 4);
    b.e[0].name = bad[i];
    b.e[0].name_length = (uint16_t)strlen(bad[i]);
    assert_int_equal(round_trip_code(&b), DCR_E_NAME);
  }
  /* embedded NUL */
  mbuild b;
  mb_raw(&b, 4, 4);
  b.e[0].name = "r\0w";
  b.e[0].name_length = 3;
  assert_int_equal(round_trip_code(&b), DCR_E_NAME);
  /* over the name length limit */
  dcr_limits lim = limits();
  lim.max_name_length = 2;
  mb_raw(&b, 4, 4);
  assert_int_equal(round_trip_code_lim(&b, &lim), DCR_E_LIMIT);
  lim.max_name_length = 3;
  assert_int_equal(round_trip_code_lim(&b, &lim), DCR_OK);
}

static void test_man5_unknown_dtype_is_rejected(void **state) {
  (void)state;
  const int bad[] = {0, 23, 200, 255};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    mbuild b;
    mb_raw(&b, 4, 4);
    b.e[0].target.dtype = bad[i];
    assert_int_equal(round_trip_code(&b), DCR_E_DTYPE);
    mb_raw(&b, 4, 4);
    b.e[0].base.dtype = bad[i];
    assert_int_equal(round_trip_code(&b), DCR_E_DTYPE);
  }
}

static void test_man5_shape_and_rank_are_checked(void **state) {
  (void)state;
  mbuild b;
  mb_raw(&b, 4, 4);
  b.e[0].target.byte_length = 5;
  b.m.data_length = 5;
  assert_int_equal(round_trip_code(&b), DCR_E_SHAPE);
  mb_raw(&b, 4, 4);
  b.e[0].base.byte_length = 3;
  assert_int_equal(round_trip_code(&b), DCR_E_SHAPE);
  /* overflow */
  static const uint64_t huge[] = {(uint64_t)1 << 32, (uint64_t)1 << 32, 2};
  mb_raw(&b, 4, 4);
  mb_desc(&b.e[0].base, b.dims[0][0], 2, 3, huge, 0);
  b.e[0].base.byte_length = 0;
  assert_int_equal(round_trip_code(&b), DCR_E_SHAPE);
  /* rank 17 */
  uint64_t ones[17];
  for (size_t i = 0; i < 17; i++) ones[i] = 1;
  mb_raw(&b, 4, 4);
  b.e[0].base.rank = 17;
  b.e[0].base.dims = ones;
  b.e[0].base.byte_length = 1;
  assert_int_equal(round_trip_code(&b), DCR_E_LIMIT);
}

static void test_man3_chunk_size_kind_presence(void **state) {
  (void)state;
  const uint32_t bad[] = {0, 1, 2048, 4095, 4097, 5000, 12288, 3u << 20};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    mbuild b;
    mb_raw(&b, 4, 4);
    b.m.chunk_size = bad[i];
    assert_int_equal(round_trip_code(&b), DCR_E_MANIFEST);
  }
  /* §11: over max_chunk_size is a limit, checked before the value's own rules */
  const uint32_t over[] = {1u << 31, 0xFFFFFFFFu, (1u << 30) + 1};
  for (size_t i = 0; i < sizeof over / sizeof over[0]; i++) {
    mbuild b;
    mb_raw(&b, 4, 4);
    b.m.chunk_size = over[i];
    assert_int_equal(round_trip_code(&b), DCR_E_LIMIT);
  }
  const uint32_t good[] = {4096, 8192, 1u << 20, 1u << 30};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    mbuild b;
    mb_raw(&b, 4, 4);
    b.m.chunk_size = good[i];
    assert_int_equal(round_trip_code(&b), DCR_OK);
  }
  /* a tighter max_chunk_size */
  mbuild b;
  mb_raw(&b, 4, 4);
  b.m.chunk_size = 8192;
  dcr_limits lim = limits();
  lim.max_chunk_size = 4096;
  assert_int_equal(round_trip_code_lim(&b, &lim), DCR_E_LIMIT);
  /* unknown kind */
  mb_raw(&b, 4, 4);
  b.m.kind = 2;
  assert_int_equal(round_trip_code(&b), DCR_E_MANIFEST);
  /* presence 0 */
  uint8_t *buf;
  size_t n;
  mb_raw(&b, 4, 4);
  serialize(&b.m, &buf, &n);
  size_t presence_at = 32 + 2 + 3;
  assert_int_equal(buf[presence_at], 3);
  dcr__manifest out;
  buf[presence_at] = 0;
  assert_int_equal(parse_bytes(buf, n, &out), DCR_E_MANIFEST);
  /* reserved presence bits, reserved entry byte */
  buf[presence_at] = 3 | 4;
  assert_int_equal(parse_bytes(buf, n, &out), DCR_E_RESERVED);
  buf[presence_at] = 3 | 0x80;
  assert_int_equal(parse_bytes(buf, n, &out), DCR_E_RESERVED);
  buf[presence_at] = 3;
  buf[presence_at + 1] = 1;
  assert_int_equal(parse_bytes(buf, n, &out), DCR_E_RESERVED);
  buf[presence_at + 1] = 0;
  assert_int_equal(parse_bytes(buf, n, &out), DCR_OK);
  dcr__manifest_free(&out);
  /* reserved manifest bytes 9..15 */
  for (size_t k = 9; k < 16; k++) {
    buf[k] = 1;
    assert_int_equal(parse_bytes(buf, n, &out), DCR_E_RESERVED);
    buf[k] = 0;
  }
  free(buf);
}

static void test_man1_entry_count_zero_only_for_empty_safetensors(void **state) {
  (void)state;
  /* §6.1: two safetensors files without tensors give 0 entries; R-MAN-7: a raw
   * checkpoint always has its one entry. */
  mbuild b;
  mb_init(&b, DCR_KIND_SAFETENSORS, 0);
  mb_prefix(&b, "{}");
  assert_int_equal(round_trip_code(&b), DCR_OK);
  mb_init(&b, DCR_KIND_RAW, 0);
  assert_int_equal(round_trip_code(&b), DCR_E_MANIFEST);
}

static void test_man6_target_layout_is_checked(void **state) {
  (void)state;
  mbuild b;
  /* gap before the only tensor */
  mb_raw(&b, 4, 4);
  b.e[0].target.offset = 1;
  b.m.data_length = 5;
  assert_int_equal(round_trip_code(&b), DCR_E_LAYOUT);
  /* the data region is longer than the tensors (gap at the end) */
  mb_raw(&b, 4, 4);
  b.m.data_length = 5;
  assert_int_equal(round_trip_code(&b), DCR_E_LAYOUT);
  /* or shorter (the tensor runs past it) */
  mb_raw(&b, 4, 4);
  b.m.data_length = 3;
  assert_int_equal(round_trip_code(&b), DCR_E_LAYOUT);
  /* overlap and gap between two target tensors */
  static const uint64_t six[] = {6}, two_three[] = {2, 3}, four[] = {4};
  mb_st(&b);
  b.e[1].target.offset = 8;
  assert_int_equal(round_trip_code(&b), DCR_E_LAYOUT);
  mb_st(&b);
  b.e[1].target.offset = 16;
  b.m.data_length = 32;
  assert_int_equal(round_trip_code(&b), DCR_E_LAYOUT);
  /* offsets need not follow name order: b first, then a */
  mb_init(&b, DCR_KIND_SAFETENSORS, 28);
  mb_prefix(&b, "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[16,28]},"
                "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}");
  mb_entry(&b, "a", 9, 1, six, 9, 2, two_three, 16);
  mb_entry(&b, "b", 0, 0, NULL, 12, 1, four, 0);
  assert_int_equal(round_trip_code(&b), DCR_OK);
  /* prefix + data above max_file_size */
  dcr_limits lim = limits();
  lim.max_file_size = 100;
  mb_raw(&b, 100, 100);
  assert_int_equal(round_trip_code_lim(&b, &lim), DCR_OK);
  mb_raw(&b, 100, 101);
  assert_int_equal(round_trip_code_lim(&b, &lim), DCR_E_LIMIT);
  /* a tensor end past 2^64 */
  static const uint64_t big[] = {(uint64_t)1 << 63};
  mb_init(&b, DCR_KIND_RAW, 0);
  mb_entry(&b, "a", 0, 0, NULL, 2, 1, big, 0);
  mb_entry(&b, "b", 0, 0, NULL, 2, 1, big, (uint64_t)1 << 63);
  assert_int_equal(round_trip_code(&b), DCR_E_LAYOUT);
}

static void test_man7_raw_kind_rules(void **state) {
  (void)state;
  static const uint64_t four[] = {4}, two_two[] = {2, 2}, one[] = {1};
  mbuild b;
  /* a prefix */
  mb_raw(&b, 4, 4);
  memset(b.prefix, 0, 8);
  b.m.prefix = b.prefix;
  b.m.prefix_length = 8;
  assert_int_equal(round_trip_code(&b), DCR_E_MANIFEST);
  /* another dtype, another rank */
  mb_init(&b, DCR_KIND_RAW, 4);
  mb_entry(&b, "raw", 2, 1, four, 3, 1, four, 0);
  assert_int_equal(round_trip_code(&b), DCR_E_MANIFEST);
  mb_init(&b, DCR_KIND_RAW, 4);
  mb_entry(&b, "raw", 2, 2, two_two, 2, 1, four, 0);
  assert_int_equal(round_trip_code(&b), DCR_E_MANIFEST);
  mb_init(&b, DCR_KIND_RAW, 1);
  mb_entry(&b, "raw", 2, 1, four, 4, 1, one, 0);
  assert_int_equal(round_trip_code(&b), DCR_E_MANIFEST);
  /* a side without the tensor */
  mb_init(&b, DCR_KIND_RAW, 4);
  mb_entry(&b, "raw", 0, 0, NULL, 2, 1, four, 0);
  assert_int_equal(round_trip_code(&b), DCR_E_MANIFEST);
  mb_init(&b, DCR_KIND_RAW, 0);
  mb_entry(&b, "raw", 2, 1, four, 0, 0, NULL, 0);
  assert_int_equal(round_trip_code(&b), DCR_E_MANIFEST);
  /* two tensors on the base side */
  mb_init(&b, DCR_KIND_RAW, 4);
  mb_entry(&b, "old", 2, 1, four, 0, 0, NULL, 0);
  mb_entry(&b, "raw", 2, 1, four, 2, 1, four, 0);
  assert_int_equal(round_trip_code(&b), DCR_E_MANIFEST);
  /* the name is not checked: any one U8 rank-1 tensor per side */
  mb_init(&b, DCR_KIND_RAW, 4);
  mb_entry(&b, "x", 2, 1, four, 0, 0, NULL, 0);
  mb_entry(&b, "y", 0, 0, NULL, 2, 1, four, 0);
  int rc = round_trip_code(&b);
  assert_true(rc == DCR_OK || rc == DCR_E_MANIFEST);
}

static void test_man8_safetensors_prefix_must_match_entries(void **state) {
  (void)state;
  static const uint64_t three_two[] = {3, 2}, eight[] = {8}, four[] = {4};
  mbuild b;
  /* shape differs */
  mb_st(&b);
  mb_desc(&b.e[0].target, b.dims[0][1], 9, 2, three_two, 0);
  assert_int_equal(round_trip_code(&b), DCR_E_MANIFEST);
  /* dtype differs (same size) */
  mb_st(&b);
  b.e[0].target.dtype = 8;
  assert_int_equal(round_trip_code(&b), DCR_E_MANIFEST);
  /* offsets differ */
  mb_init(&b, DCR_KIND_SAFETENSORS, 28);
  mb_prefix(&b, ST_JSON);
  mb_entry(&b, "a", 0, 0, NULL, 9, 2, (const uint64_t[]){2, 3}, 16);
  mb_entry(&b, "b", 0, 0, NULL, 12, 1, four, 0);
  assert_int_equal(round_trip_code(&b), DCR_E_MANIFEST);
  /* a name differs */
  mb_st(&b);
  b.e[1].name = "bb";
  b.e[1].name_length = 2;
  assert_int_equal(round_trip_code(&b), DCR_E_MANIFEST);
  /* the prefix has a tensor the entries do not */
  mb_init(&b, DCR_KIND_SAFETENSORS, 28);
  mb_prefix(&b, ST_JSON);
  mb_entry(&b, "a", 0, 0, NULL, 9, 2, (const uint64_t[]){2, 3}, 0);
  b.m.data_length = 28;
  int rc = round_trip_code(&b);
  assert_true(rc == DCR_E_MANIFEST || rc == DCR_E_LAYOUT);
  /* the entries have a tensor the prefix does not */
  mb_init(&b, DCR_KIND_SAFETENSORS, 36);
  mb_prefix(&b, ST_JSON);
  mb_entry(&b, "a", 0, 0, NULL, 9, 2, (const uint64_t[]){2, 3}, 0);
  mb_entry(&b, "b", 0, 0, NULL, 12, 1, four, 12);
  mb_entry(&b, "c", 0, 0, NULL, 2, 1, eight, 28);
  rc = round_trip_code(&b);
  assert_true(rc == DCR_E_MANIFEST || rc == DCR_E_LAYOUT);
  /* the declared header length is not prefix_length - 8 */
  mb_st(&b);
  dcr__put64(b.prefix, dcr__le64(b.prefix) - 1);
  rc = round_trip_code(&b);
  assert_true(rc == DCR_E_MANIFEST || rc == DCR_E_CHECKPOINT);
  /* not JSON */
  mb_st(&b);
  b.prefix[8] = '[';
  rc = round_trip_code(&b);
  assert_true(rc == DCR_E_MANIFEST || rc == DCR_E_CHECKPOINT);
  /* shorter than 8 bytes */
  mb_st(&b);
  b.m.prefix_length = 4;
  rc = round_trip_code(&b);
  assert_true(rc == DCR_E_MANIFEST || rc == DCR_E_CHECKPOINT);
  /* a prefix dtype unknown: the specific code of §2.1 */
  mb_st(&b);
  memcpy(strstr((char *)b.prefix + 8, "BF16"), "BF17", 4);
  assert_int_equal(round_trip_code(&b), DCR_E_DTYPE);
}

static void test_man1_trailing_byte_is_rejected(void **state) {
  (void)state;
  mbuild b;
  mb_st(&b);
  uint8_t *buf;
  size_t n;
  serialize(&b.m, &buf, &n);
  uint8_t *longer = xmalloc(n + 1);
  memcpy(longer, buf, n);
  longer[n] = 0;
  dcr__manifest out;
  assert_int_equal(parse_bytes(longer, n + 1, &out), DCR_E_MANIFEST);
  free(longer);
  free(buf);
}

static void check_every_cut(const mbuild *b) {
  uint8_t *buf;
  size_t n;
  serialize(&b->m, &buf, &n);
  size_t truncated = 0;
  for (size_t cut = 0; cut < n; cut++) {
    dcr__manifest out;
    int rc = parse_bytes(buf, cut, &out); /* a copy of exactly `cut` bytes */
    assert_int_not_equal(rc, DCR_OK);
    if (rc == DCR_E_TRUNCATED) truncated++;
    else print_message("    cut at %zu of %zu: %s\n", cut, n, dcr_error_name(rc));
  }
  assert_int_equal(truncated, n);
  free(buf);
}

static void test_man1_truncated_at_every_length_is_rejected(void **state) {
  (void)state;
  mbuild b;
  mb_st(&b);
  check_every_cut(&b);
  mb_raw(&b, 300, 7);
  check_every_cut(&b);
}

static void test_man2_huge_counts_are_rejected_before_allocating(void **state) {
  (void)state;
  mbuild b;
  mb_raw(&b, 4, 4);
  uint8_t *buf;
  size_t n;
  serialize(&b.m, &buf, &n);
  dcr__manifest out;
  dcr__put32(buf, 0xFFFFFFFFu);
  int rc = parse_bytes(buf, n, &out);
  assert_true(rc == DCR_E_LIMIT || rc == DCR_E_TRUNCATED);
  assert_int_equal(rc, DCR_E_LIMIT); /* above max_tensors */
  /* within the limit but not within the payload */
  dcr_limits lim = limits();
  lim.max_tensors = UINT64_MAX;
  assert_int_equal(parse_bytes_lim(buf, n, &lim, &out), DCR_E_TRUNCATED);
  dcr__put32(buf, (uint32_t)(1u << 20));
  assert_int_equal(parse_bytes(buf, n, &out), DCR_E_TRUNCATED);
  dcr__put32(buf, 1);
  /* a huge prefix length: over max_file_size (a limit, checked first), then not there */
  dcr__put64(buf + 16, UINT64_MAX);
  assert_int_equal(parse_bytes(buf, n, &out), DCR_E_LIMIT);
  dcr__put64(buf + 16, (uint64_t)1 << 40);
  assert_int_equal(parse_bytes(buf, n, &out), DCR_E_TRUNCATED);
  dcr__put64(buf + 16, 0);
  /* a huge name length: over max_name_length, then within it but not there */
  dcr__put16(buf + 32, 0xFFFF);
  assert_int_equal(parse_bytes(buf, n, &out), DCR_E_LIMIT);
  lim = limits();
  lim.max_name_length = 0xFFFF;
  assert_int_equal(parse_bytes_lim(buf, n, &lim, &out), DCR_E_TRUNCATED);
  dcr__put16(buf + 32, 3);
  /* a rank of 255 with few bytes left */
  size_t rank_at = 32 + 2 + 3 + 2 + 1;
  assert_int_equal(buf[rank_at], 1);
  buf[rank_at] = 255;
  assert_int_equal(parse_bytes(buf, n, &out), DCR_E_LIMIT);
  lim = limits();
  lim.max_rank = 255;
  assert_int_equal(parse_bytes_lim(buf, n, &lim, &out), DCR_E_TRUNCATED);
  buf[rank_at] = 1;
  assert_int_equal(parse_bytes(buf, n, &out), DCR_OK);
  dcr__manifest_free(&out);
  free(buf);
  /* a declared count above the limit is reported before the payload is read */
  lim = limits();
  lim.max_tensors = 1;
  mb_st(&b);
  assert_int_equal(round_trip_code_lim(&b, &lim), DCR_E_LIMIT);
}

/* ---- metadata (§6.4) ----------------------------------------------------- */

static int meta_parse(const uint8_t *p, size_t n, dcr__metadata *out) {
  dcr_limits lim = limits();
  dcr_detail d;
  dcr__detail_init(&d);
  uint8_t *copy = dup_bytes(p, n); /* exactly n bytes, for the sanitizers */
  int rc = dcr__meta_parse(copy, n, &lim, out, &d);
  free(copy);
  if (rc) {
    assert_int_equal(d.code, rc);
    assert_null(out->pairs);
    assert_int_equal(out->count, 0);
  }
  return rc;
}

static int meta_serialize(const dcr_meta *pairs, size_t count, uint8_t **out, size_t *n) {
  dcr_detail d;
  dcr__detail_init(&d);
  *out = NULL;
  int rc = dcr__meta_serialize(pairs, count, out, n, &d);
  if (rc) {
    assert_int_equal(d.code, rc);
    assert_null(*out);
  }
  return rc;
}

static void test_meta_round_trip_sorts_keys(void **state) {
  (void)state;
  const dcr_meta in[] = {{"zeta", "last"}, {"alpha", "first"}, {"m\xc3\xa9ta", ""},
                         {"beta", "\xe2\x82\xac 2"}};
  uint8_t *buf;
  size_t n;
  assert_int_equal(meta_serialize(in, 4, &buf, &n), DCR_OK);
  assert_int_equal(dcr__le32(buf), 4);
  assert_int_equal(dcr__le16(buf + 4), 5);
  assert_memory_equal(buf + 6, "alpha", 5);
  dcr__metadata m;
  assert_int_equal(meta_parse(buf, n, &m), DCR_OK);
  assert_int_equal(m.count, 4);
  assert_string_equal(m.pairs[0].key, "alpha");
  assert_string_equal(m.pairs[0].value, "first");
  assert_string_equal(m.pairs[1].key, "beta");
  assert_string_equal(m.pairs[1].value, "\xe2\x82\xac 2");
  assert_string_equal(m.pairs[2].key, "m\xc3\xa9ta");
  assert_string_equal(m.pairs[2].value, "");
  assert_string_equal(m.pairs[3].key, "zeta");
  dcr__meta_free(&m);
  free(buf);
  /* no pairs */
  assert_int_equal(meta_serialize(in, 0, &buf, &n), DCR_OK);
  assert_int_equal(n, 4);
  assert_int_equal(meta_parse(buf, n, &m), DCR_OK);
  assert_int_equal(m.count, 0);
  dcr__meta_free(&m);
  free(buf);
}

static void test_meta_serialize_rejects_bad_pairs(void **state) {
  (void)state;
  uint8_t *buf;
  size_t n;
  const dcr_meta dup[] = {{"a", "1"}, {"b", "2"}, {"a", "3"}};
  assert_int_equal(meta_serialize(dup, 3, &buf, &n), DCR_E_ARGUMENT);
  const dcr_meta empty[] = {{"", "1"}};
  assert_int_equal(meta_serialize(empty, 1, &buf, &n), DCR_E_ARGUMENT);
  const dcr_meta bad_key[] = {{"\xc0\x80", "1"}};
  assert_int_equal(meta_serialize(bad_key, 1, &buf, &n), DCR_E_ARGUMENT);
  const dcr_meta bad_value[] = {{"k", "\xed\xa0\x80"}};
  assert_int_equal(meta_serialize(bad_value, 1, &buf, &n), DCR_E_ARGUMENT);
}

/* count, then (key, value) pairs as given */
static size_t meta_bytes(uint8_t *out, uint32_t count, const char *const *kv, size_t pairs) {
  uint8_t *p = out;
  dcr__put32(p, count);
  p += 4;
  for (size_t i = 0; i < pairs; i++) {
    size_t k = strlen(kv[2 * i]), v = strlen(kv[2 * i + 1]);
    dcr__put16(p, (uint16_t)k);
    memcpy(p + 2, kv[2 * i], k);
    p += 2 + k;
    dcr__put32(p, (uint32_t)v);
    memcpy(p + 4, kv[2 * i + 1], v);
    p += 4 + v;
  }
  return (size_t)(p - out);
}

static void test_meta_parse_rejections(void **state) {
  (void)state;
  uint8_t buf[256];
  dcr__metadata m;
  const char *const unsorted[] = {"b", "1", "a", "2"};
  size_t n = meta_bytes(buf, 2, unsorted, 2);
  assert_int_equal(meta_parse(buf, n, &m), DCR_E_MANIFEST);
  const char *const dup[] = {"a", "1", "a", "2"};
  n = meta_bytes(buf, 2, dup, 2);
  assert_int_equal(meta_parse(buf, n, &m), DCR_E_MANIFEST);
  const char *const empty_key[] = {"", "1"};
  n = meta_bytes(buf, 1, empty_key, 1);
  assert_int_equal(meta_parse(buf, n, &m), DCR_E_MANIFEST);
  const char *const bad_value[] = {"k", "\xff"};
  n = meta_bytes(buf, 1, bad_value, 1);
  assert_int_equal(meta_parse(buf, n, &m), DCR_E_MANIFEST);
  const char *const nul_value[] = {"k", "a"};
  n = meta_bytes(buf, 1, nul_value, 1);
  buf[n - 1] = 0;
  assert_int_equal(meta_parse(buf, n, &m), DCR_E_MANIFEST);
  /* a byte left over */
  const char *const good[] = {"a", "1", "bb", "22"};
  n = meta_bytes(buf, 2, good, 2);
  assert_int_equal(meta_parse(buf, n, &m), DCR_OK);
  dcr__meta_free(&m);
  buf[n] = 0;
  assert_int_equal(meta_parse(buf, n + 1, &m), DCR_E_MANIFEST);
  /* every cut */
  for (size_t cut = 0; cut < n; cut++) assert_int_equal(meta_parse(buf, cut, &m), DCR_E_TRUNCATED);
  /* a huge count or length */
  dcr__put32(buf, 0xFFFFFFFFu);
  assert_int_equal(meta_parse(buf, n, &m), DCR_E_TRUNCATED);
  dcr__put32(buf, 2);
  dcr__put32(buf + 4 + 2 + 1, 0xFFFFFFFFu);
  assert_int_equal(meta_parse(buf, n, &m), DCR_E_TRUNCATED);
}

/* ---- whole bundles in memory --------------------------------------------- */

typedef struct {
  uint8_t *data;
  size_t size, capacity;
  int fail_after; /* fail the write after this many calls; -1 never */
  int calls;
} sink;

static int sink_write(void *opaque, const void *data, size_t size) {
  sink *s = opaque;
  if (s->fail_after >= 0 && s->calls >= s->fail_after) return -1;
  s->calls++;
  if (s->size + size > s->capacity) {
    size_t cap = s->capacity ? s->capacity : 4096;
    while (cap < s->size + size) cap *= 2;
    uint8_t *p = realloc(s->data, cap);
    if (!p) return -1;
    s->data = p;
    s->capacity = cap;
  }
  memcpy(s->data + s->size, data, size);
  s->size += size;
  return 0;
}

typedef struct {
  char dir[64];
  char base[128], target[128], out[128];
} tmpdir;

static void tmp_make(tmpdir *t) {
  snprintf(t->dir, sizeof t->dir, "/tmp/dcr-test-format-XXXXXX");
  assert_non_null(mkdtemp(t->dir));
  snprintf(t->base, sizeof t->base, "%s/base.bin", t->dir);
  snprintf(t->target, sizeof t->target, "%s/target.bin", t->dir);
  snprintf(t->out, sizeof t->out, "%s/out.bin", t->dir);
}

/* Number of entries in the directory besides . and .. */
static int dir_entries(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

static void tmp_remove(tmpdir *t) {
  DIR *d = opendir(t->dir);
  assert_non_null(d);
  for (struct dirent *e; (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", t->dir, e->d_name);
    unlink(path);
  }
  closedir(d);
  assert_int_equal(rmdir(t->dir), 0);
}

static void write_file(const char *path, const uint8_t *data, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  if (n) assert_int_equal(fwrite(data, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

static uint8_t *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  long size = ftell(f);
  assert_true(size >= 0);
  rewind(f);
  uint8_t *p = xmalloc((size_t)size);
  if (size) assert_int_equal(fread(p, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  *n = (size_t)size;
  return p;
}

#define RAW_SIZE (4 * 4096 + 1000)

/* A base and a target of RAW_SIZE bytes: chunk 0 has 1 changed byte, chunk 1
 * about 10%, chunk 2 none, chunk 3 about 60%, chunk 4 (short) three. */
static void make_raw_pair(uint8_t *base, uint8_t *target) {
  rng_state = 12345;
  for (size_t i = 0; i < RAW_SIZE; i++) base[i] = (uint8_t)((i % 2) ? 0x3F : rng_byte() & 0x1F);
  memcpy(target, base, RAW_SIZE);
  target[100] ^= 1;
  for (size_t i = 4096; i < 8192; i++)
    if (rng() % 10 == 0) target[i] = (uint8_t)(target[i] ^ 0x01);
  for (size_t i = 3 * 4096; i < 4 * 4096; i++)
    if (rng() % 10 < 6) target[i] = (uint8_t)(target[i] ^ (1 + rng() % 255));
  target[4 * 4096] ^= 0x80;
  target[4 * 4096 + 500] ^= 0x01;
  target[RAW_SIZE - 1] ^= 0x40;
}

static int encode_to(const char *base, const char *target, uint32_t chunk_size, int level,
                     int raw, unsigned threads, const dcr_meta *meta, size_t meta_count, sink *s,
                     dcr_encode_stats *stats) {
  dcr_encode_options o;
  dcr_encode_options_default(&o);
  o.chunk_size = chunk_size;
  o.level = level;
  o.raw = raw;
  o.threads = threads;
  o.meta = meta;
  o.meta_count = meta_count;
  memset(s, 0, sizeof *s);
  s->fail_after = -1;
  dcr_detail d;
  int rc = dcr_encode(base, target, &o, sink_write, s, stats, &d);
  if (rc) {
    assert_int_equal(d.code, rc);
    assert_true(d.message[0] != '\0');
  }
  return rc;
}

/* open_memory, then verify: the first error */
static int open_verify(const uint8_t *p, size_t n, dcr_detail *d) {
  dcr_reader *r = NULL;
  int rc = dcr_reader_open_memory(&r, p, n, NULL, d);
  if (rc) {
    assert_null(r);
    assert_int_equal(d->code, rc);
    return rc;
  }
  rc = dcr_reader_verify(r, d);
  dcr_reader_free(r);
  return rc;
}

/* The code a one-bit flip at `offset` must give (§4.1, §4.2): the magic, then
 * the header check; then, in whichever section holds it, the header check, the
 * payload check, or the zero padding. */
static int expected_flip_code(const dcr_reader *r, uint64_t offset) {
  if (offset < 8) return DCR_E_MAGIC;
  if (offset < 64) return DCR_E_CHECKSUM;
  dcr_bundle_info info;
  dcr_reader_info(r, &info);
  for (uint64_t i = 0; i < info.section_count; i++) {
    dcr_section_info s;
    dcr_reader_section(r, i, &s);
    uint64_t payload = s.offset + 32, end = payload + s.length;
    if (offset < s.offset || offset >= dcr__align64(end)) continue;
    return offset < end ? DCR_E_CHECKSUM : DCR_E_RESERVED;
  }
  fail_msg("offset %llu is in no section", (unsigned long long)offset);
  return -1;
}

static void corrupt_every_bit(const uint8_t *bundle, size_t n) {
  dcr_reader *r;
  assert_int_equal(dcr_reader_open_memory(&r, bundle, n, NULL, NULL), DCR_OK);
  uint8_t *copy = dup_bytes(bundle, n);
  size_t step = n <= (16u << 10) ? 1 : n / 4096;
  for (size_t off = 0; off < n; off += step) {
    /* every bit of the first 256 bytes, one bit of each byte after */
    unsigned bits = off < 256 ? 8 : 1;
    for (unsigned k = 0; k < bits; k++) {
      unsigned bit = bits == 8 ? k : (unsigned)(off * 5 % 8);
      flip_bit(copy, off, bit);
      dcr_detail d;
      int rc = open_verify(copy, n, &d);
      int want = expected_flip_code(r, off);
      if (rc != want)
        print_message("    bit %u of byte %zu: %s (%s), expected %s\n", bit, off,
                      dcr_error_name(rc), d.message, dcr_error_name(want));
      assert_int_equal(rc, want);
      flip_bit(copy, off, bit);
    }
  }
  assert_memory_equal(copy, bundle, n);
  free(copy);
  dcr_reader_free(r);
}

static void truncate_everywhere(const uint8_t *bundle, size_t n) {
  for (size_t cut = 0; cut < n; cut++) {
    uint8_t *copy = dup_bytes(bundle, cut); /* exactly `cut` bytes, for the sanitizers */
    dcr_detail d;
    int rc = open_verify(copy, cut, &d);
    free(copy);
    assert_int_not_equal(rc, DCR_OK);
    /* §4.1: under 64 bytes with the magic intact; §5 R-FTR-1: under 128 bytes */
    if (cut < 128) assert_int_equal(rc, DCR_E_TRUNCATED);
    /* §4.2 R-SEC-3 says TRUNCATED for a section that runs past the end, §5
     * R-FTR-1 STRUCTURE for a size not a multiple of 64 or no FOOT at the end */
    else assert_true(rc == DCR_E_TRUNCATED || rc == DCR_E_STRUCTURE);
  }
}

static void check_info(const uint8_t *bundle, size_t n, const dcr_encode_stats *stats,
                       uint64_t target_size, uint64_t meta_count) {
  dcr_reader *r;
  dcr_detail d;
  assert_int_equal(dcr_reader_open_memory(&r, bundle, n, NULL, &d), DCR_OK);
  assert_int_equal(dcr_reader_verify(r, &d), DCR_OK);
  dcr_bundle_info info;
  dcr_reader_info(r, &info);
  assert_int_equal(info.format_major, 1);
  assert_int_equal(info.format_minor, stats->format_minor);
  assert_int_equal(info.bundle_size, n);
  assert_int_equal(info.kind, DCR_KIND_RAW);
  assert_int_equal(info.chunk_size, 4096);
  assert_int_equal(info.entry_count, 1);
  assert_int_equal(info.chunk_count, stats->changed_chunks);
  assert_int_equal(info.prefix_length, 0);
  assert_int_equal(info.target_size, target_size);
  assert_int_equal(info.meta_count, meta_count);
  assert_int_equal(info.section_count, info.chunk_count + 4 + (meta_count ? 1 : 0) +
                                           stats->tensors_resized); /* RSIZ */
  assert_int_equal(n % 64, 0);
  assert_int_equal(stats->bundle_size, n);
  assert_int_equal(stats->target_size, target_size);
  dcr_tensor_info t;
  dcr_reader_tensor(r, 0, &t);
  assert_int_equal(t.name_length, 3);
  assert_memory_equal(t.name, "raw", 3);
  assert_true(t.base.present && t.target.present);
  assert_int_equal(t.target.byte_length, target_size);
  assert_int_equal(t.target.dtype, 2);
  uint64_t prev = 0;
  for (uint64_t i = 0; i < info.chunk_count; i++) {
    dcr_chunk_info c;
    dcr_reader_chunk(r, i, &c);
    assert_int_equal(c.tensor, 0);
    if (i) assert_true(c.chunk > prev);
    prev = c.chunk;
    assert_in_range(c.encoding, 1, DCR_ENC_COUNT - 1);
    assert_in_range(c.compression, 0, 1);
    assert_true(c.count >= 1 && c.count <= 4096);
    assert_int_equal(c.offset % 64, 0);
    assert_true(c.payload_length > 32);
  }
  dcr_section_info s;
  dcr_reader_section(r, 0, &s);
  assert_string_equal(s.type, "MANI");
  assert_int_equal(s.offset, 64);
  assert_true(s.critical);
  dcr_reader_section(r, info.section_count - 1, &s);
  assert_string_equal(s.type, "FOOT");
  assert_int_equal(s.offset, n - 64);
  assert_int_equal(s.length, 32);
  dcr_reader_section(r, info.section_count - 2, &s);
  assert_string_equal(s.type, "INDX");
  assert_int_equal(s.length, 32 * info.chunk_count);
  dcr_reader_section(r, info.section_count - 3, &s);
  assert_string_equal(s.type, "IDEN");
  assert_int_equal(s.length, 32 + 16 + 16);
  for (uint64_t i = 1; i < info.section_count - 3; i++) {
    dcr_reader_section(r, i, &s);
    if (stats->tensors_resized && i == 1) {
      assert_string_equal(s.type, "RSIZ"); /* right after MANI (§6.5) */
      assert_true(s.critical);
      assert_int_equal(s.length, 8);
    } else if (meta_count && i == 1 + stats->tensors_resized) {
      assert_string_equal(s.type, "META");
      assert_false(s.critical);
    } else {
      assert_string_equal(s.type, "CHNK");
      assert_int_equal(s.compression, 0);
    }
  }
  for (uint64_t i = 1; i < meta_count; i++) {
    dcr_meta a, b;
    dcr_reader_meta(r, i - 1, &a);
    dcr_reader_meta(r, i, &b);
    assert_true(strcmp(a.key, b.key) < 0);
  }
  dcr_reader_free(r);
}

static void apply_and_compare(const uint8_t *bundle, size_t n, const tmpdir *t,
                              const uint8_t *target, size_t target_size) {
  dcr_reader *r;
  dcr_detail d;
  assert_int_equal(dcr_reader_open_memory(&r, bundle, n, NULL, &d), DCR_OK);
  dcr_apply_options o;
  dcr_apply_options_default(&o);
  o.threads = 2;
  o.sync = 0;
  unlink(t->out);
  int rc = dcr_apply(r, t->base, t->out, &o, &d);
  if (rc) print_message("    apply: %s: %s\n", dcr_error_name(rc), d.message);
  assert_int_equal(rc, DCR_OK);
  size_t m;
  uint8_t *out = read_file(t->out, &m);
  assert_int_equal(m, target_size);
  if (m) assert_memory_equal(out, target, m);
  free(out);
  dcr_reader_free(r);
}

static void test_bundle_raw_round_trip_and_corruption(void **state) {
  (void)state;
  tmpdir t;
  tmp_make(&t);
  uint8_t *base = xmalloc(RAW_SIZE), *target = xmalloc(RAW_SIZE);
  make_raw_pair(base, target);
  write_file(t.base, base, RAW_SIZE);
  write_file(t.target, target, RAW_SIZE);
  const dcr_meta meta[] = {{"source", "unit test"}, {"run", "1"}};
  for (int level = 0; level <= 3; level += 3) {
    sink s;
    dcr_encode_stats stats;
    assert_int_equal(encode_to(t.base, t.target, 4096, level, 1, 2, meta, 2, &s, &stats), DCR_OK);
    assert_int_equal(stats.changed_chunks, 4);
    assert_int_equal(stats.chunks, 5);
    check_info(s.data, s.size, &stats, RAW_SIZE, 2);
    apply_and_compare(s.data, s.size, &t, target, RAW_SIZE);
    /* deterministic whatever the thread count */
    sink s1;
    assert_int_equal(encode_to(t.base, t.target, 4096, level, 1, 1, meta, 2, &s1, NULL), DCR_OK);
    assert_int_equal(s1.size, s.size);
    assert_memory_equal(s1.data, s.data, s.size);
    free(s1.data);
    print_message("    level %d: bundle of %zu bytes\n", level, s.size);
    corrupt_every_bit(s.data, s.size);
    truncate_everywhere(s.data, s.size);
    /* exact codes */
    dcr_detail d;
    uint8_t *copy = dup_bytes(s.data, 100);
    assert_int_equal(open_verify(copy, 100, &d), DCR_E_TRUNCATED);
    free(copy);
    copy = dup_bytes(s.data, s.size);
    flip_bit(copy, 64 + 32 + 3, 2); /* in the MANI payload */
    assert_int_equal(open_verify(copy, s.size, &d), DCR_E_CHECKSUM);
    assert_string_equal(d.section, "MANI");
    assert_int_equal(d.offset, 64);
    free(copy);
    free(s.data);
  }
  /* without metadata, and a target of another size (coded against zeros) */
  write_file(t.target, target, RAW_SIZE - 999);
  sink s;
  dcr_encode_stats stats;
  assert_int_equal(encode_to(t.base, t.target, 4096, 3, 1, 0, NULL, 0, &s, &stats), DCR_OK);
  assert_int_equal(stats.tensors_recoded, 0); /* resized (§6.5): against its base bytes */
  assert_int_equal(stats.tensors_resized, 1);
  assert_int_equal(stats.format_minor, 3); /* coded against base bytes: DELTA_BANDED may be used */
  check_info(s.data, s.size, &stats, RAW_SIZE - 999, 0);
  apply_and_compare(s.data, s.size, &t, target, RAW_SIZE - 999);
  free(s.data);
  free(base);
  free(target);
  tmp_remove(&t);
}

static void test_apl1_wrong_base_is_rejected_without_output(void **state) {
  (void)state;
  tmpdir t;
  tmp_make(&t);
  uint8_t *base = xmalloc(RAW_SIZE), *target = xmalloc(RAW_SIZE);
  make_raw_pair(base, target);
  write_file(t.base, base, RAW_SIZE);
  write_file(t.target, target, RAW_SIZE);
  sink s;
  assert_int_equal(encode_to(t.base, t.target, 4096, 3, 1, 2, NULL, 0, &s, NULL), DCR_OK);
  dcr_reader *r;
  dcr_detail d;
  assert_int_equal(dcr_reader_open_memory(&r, s.data, s.size, NULL, &d), DCR_OK);
  dcr_apply_options o;
  dcr_apply_options_default(&o);
  o.sync = 0;
  /* the target as base is a no-op (§10.2): the output is the target */
  assert_int_equal(dcr_apply(r, t.target, t.out, &o, &d), DCR_OK);
  size_t got_size;
  uint8_t *got = read_file(t.out, &got_size);
  assert_int_equal(got_size, RAW_SIZE);
  assert_memory_equal(got, target, RAW_SIZE);
  free(got);
  assert_int_equal(unlink(t.out), 0);
  assert_int_equal(dir_entries(t.dir), 2); /* no temporary file left */
  /* half applied (one changed chunk at its target, the others at their base):
   * neither the base nor the target */
  uint8_t *mixed = dup_bytes(base, RAW_SIZE);
  memcpy(mixed, target, 4096);
  assert_memory_not_equal(mixed, base, 4096);
  char other[160];
  snprintf(other, sizeof other, "%s/other.bin", t.dir);
  write_file(other, mixed, RAW_SIZE);
  assert_int_equal(dcr_apply(r, other, t.out, &o, &d), DCR_E_BASE_MISMATCH);
  assert_int_equal(access(t.out, F_OK), -1);
  assert_int_equal(dir_entries(t.dir), 3);
  /* a base of another size */
  snprintf(other, sizeof other, "%s/other.bin", t.dir);
  write_file(other, base, RAW_SIZE - 1);
  assert_int_equal(dcr_apply(r, other, t.out, &o, &d), DCR_E_BASE_MISMATCH);
  assert_int_equal(access(t.out, F_OK), -1);
  /* a base with one byte changed in a chunk the bundle does not carry */
  uint8_t *wrong = dup_bytes(base, RAW_SIZE);
  wrong[2 * 4096 + 7] ^= 1;
  write_file(other, wrong, RAW_SIZE);
  assert_int_equal(dcr_apply(r, other, t.out, &o, &d), DCR_E_BASE_MISMATCH);
  assert_int_equal(access(t.out, F_OK), -1);
  /* ... and in a chunk it carries */
  wrong[2 * 4096 + 7] ^= 1;
  wrong[4096 + 7] ^= 1;
  write_file(other, wrong, RAW_SIZE);
  assert_int_equal(dcr_apply(r, other, t.out, &o, &d), DCR_E_BASE_MISMATCH);
  /* an existing output file is left untouched on failure */
  write_file(t.out, (const uint8_t *)"keep", 4);
  write_file(other, mixed, RAW_SIZE);
  assert_int_equal(dcr_apply(r, other, t.out, &o, &d), DCR_E_BASE_MISMATCH);
  size_t m;
  uint8_t *kept = read_file(t.out, &m);
  assert_int_equal(m, 4);
  assert_memory_equal(kept, "keep", 4);
  free(kept);
  assert_int_equal(dir_entries(t.dir), 4);
  /* a missing base */
  char missing[160];
  snprintf(missing, sizeof missing, "%s/missing.bin", t.dir);
  assert_int_equal(dcr_apply(r, missing, t.out, &o, &d), DCR_E_IO);
  dcr_reader_free(r);
  free(wrong);
  free(mixed);
  free(s.data);
  free(base);
  free(target);
  tmp_remove(&t);
}

static void test_encode_rejects_bad_options(void **state) {
  (void)state;
  tmpdir t;
  tmp_make(&t);
  uint8_t data[100] = {0};
  write_file(t.base, data, sizeof data);
  write_file(t.target, data, sizeof data);
  const uint32_t bad[] = {1000, 0, 2048, 4095, 6000, 1u << 31};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    sink s;
    assert_int_equal(encode_to(t.base, t.target, bad[i], 3, 1, 1, NULL, 0, &s, NULL),
                     DCR_E_ARGUMENT);
    assert_int_equal(s.size, 0);
    free(s.data);
  }
  sink s;
  assert_int_equal(encode_to(t.base, t.target, 4096, -1, 1, 1, NULL, 0, &s, NULL), DCR_E_ARGUMENT);
  assert_int_equal(encode_to(t.base, t.target, 4096, 1000, 1, 1, NULL, 0, &s, NULL),
                   DCR_E_ARGUMENT);
  const dcr_meta dup[] = {{"k", "1"}, {"k", "2"}};
  assert_int_equal(encode_to(t.base, t.target, 4096, 3, 1, 1, dup, 2, &s, NULL), DCR_E_ARGUMENT);
  free(s.data);
  char missing[160];
  snprintf(missing, sizeof missing, "%s/missing.bin", t.dir);
  assert_int_equal(encode_to(missing, t.target, 4096, 3, 1, 1, NULL, 0, &s, NULL), DCR_E_IO);
  free(s.data);
  /* a failing sink */
  dcr_encode_options o;
  dcr_encode_options_default(&o);
  o.chunk_size = 4096;
  o.raw = 1;
  memset(&s, 0, sizeof s);
  s.fail_after = 1;
  assert_int_equal(dcr_encode(t.base, t.target, &o, sink_write, &s, NULL, NULL), DCR_E_IO);
  free(s.data);
  /* identical inputs: a bundle with no chunks */
  assert_int_equal(encode_to(t.base, t.target, 4096, 3, 1, 1, NULL, 0, &s, NULL), DCR_OK);
  dcr_reader *r;
  assert_int_equal(dcr_reader_open_memory(&r, s.data, s.size, NULL, NULL), DCR_OK);
  dcr_bundle_info info;
  dcr_reader_info(r, &info);
  assert_int_equal(info.chunk_count, 0);
  assert_int_equal(dcr_reader_verify(r, NULL), DCR_OK);
  dcr_reader_free(r);
  free(s.data);
  tmp_remove(&t);
}

/* Rewrites the payload check and header check of the section at `offset`. */
static void reseal_section(uint8_t *bundle, uint64_t offset) {
  uint8_t *h = bundle + offset;
  uint64_t length = dcr__le64(h + 8);
  dcr__put64(h + 16, XXH3_64bits(h + 32, (size_t)length));
  dcr__put64(h + 24, XXH3_64bits(h, 24));
}

/* Chunks whose checksums are right but whose encoded data is not: verify and
 * apply decode them (§9.2, §10 R-APL-2). */
static void test_enc2_verify_and_apply_decode_chunks(void **state) {
  (void)state;
  tmpdir t;
  tmp_make(&t);
  uint8_t *base = xmalloc(RAW_SIZE), *target = xmalloc(RAW_SIZE);
  make_raw_pair(base, target);
  write_file(t.base, base, RAW_SIZE);
  write_file(t.target, target, RAW_SIZE);
  sink s;
  assert_int_equal(encode_to(t.base, t.target, 4096, 0, 1, 1, NULL, 0, &s, NULL), DCR_OK);
  dcr_reader *r;
  assert_int_equal(dcr_reader_open_memory(&r, s.data, s.size, NULL, NULL), DCR_OK);
  dcr_chunk_info c;
  dcr_reader_chunk(r, 0, &c); /* chunk 0: one byte changed, XOR_SPARSE stored */
  dcr_reader_free(r);
  assert_int_equal(c.chunk, 0);
  assert_int_equal(c.count, 1);
  assert_int_equal(c.encoding, DCR_ENC_XOR_SPARSE);
  assert_int_equal(c.compression, 0);
  uint64_t last = c.offset + 32 + c.payload_length - 1; /* the XOR value */
  assert_int_equal(s.data[last], 1);
  dcr_apply_options o;
  dcr_apply_options_default(&o);
  o.sync = 0;
  dcr_detail d;
  /* an all-zero XOR value: verify fails */
  uint8_t *copy = dup_bytes(s.data, s.size);
  copy[last] = 0;
  reseal_section(copy, c.offset);
  assert_int_equal(dcr_reader_open_memory(&r, copy, s.size, NULL, &d), DCR_OK);
  assert_int_equal(dcr_reader_verify(r, &d), DCR_E_ENCODING);
  assert_string_equal(d.section, "CHNK");
  assert_int_equal(d.offset, c.offset);
  assert_int_equal(d.chunk, 0);
  assert_int_not_equal(dcr_apply(r, t.base, t.out, &o, &d), DCR_OK);
  assert_int_equal(access(t.out, F_OK), -1);
  dcr_reader_free(r);
  /* another non-zero value: verify passes, apply finds the wrong target */
  copy[last] = 2;
  reseal_section(copy, c.offset);
  assert_int_equal(dcr_reader_open_memory(&r, copy, s.size, NULL, &d), DCR_OK);
  assert_int_equal(dcr_reader_verify(r, &d), DCR_OK);
  assert_int_equal(dcr_apply(r, t.base, t.out, &o, &d), DCR_E_TARGET_MISMATCH);
  assert_int_equal(access(t.out, F_OK), -1);
  dcr_reader_free(r);
  /* the position moved to another element: verify passes (it cannot know), apply
   * finds the wrong target */
  copy[last] = 1;
  /* Rice k = 6, gap 100 = quotient 1 ("10") and low bits 36, LSB first: 0x91 */
  assert_int_equal(c.payload_length, 32 + 2 + 1);
  assert_int_equal(copy[last - 2], 6);
  assert_int_equal(copy[last - 1], 0x91);
  copy[last - 1] = 0x95; /* low bit 0 of the gap set: element 101 */
  reseal_section(copy, c.offset);
  assert_int_equal(dcr_reader_open_memory(&r, copy, s.size, NULL, &d), DCR_OK);
  assert_int_equal(dcr_reader_verify(r, &d), DCR_OK);
  assert_int_equal(dcr_apply(r, t.base, t.out, &o, &d), DCR_E_TARGET_MISMATCH);
  assert_int_equal(access(t.out, F_OK), -1);
  dcr_reader_free(r);
  free(copy);
  free(s.data);
  free(base);
  free(target);
  tmp_remove(&t);
}


/* ---- bundles rebuilt section by section (§4, §5, §8.3) ------------------- */

typedef struct {
  uint32_t type;
  uint16_t flags;
  uint8_t compression;
  const uint8_t *payload;
  size_t length;
} xsec;

typedef struct {
  uint8_t header[DCR__HEADER_SIZE];
  xsec s[64];
  size_t n;
} xbundle;

static void xb_load(xbundle *x, const uint8_t *data, size_t size) {
  memset(x, 0, sizeof *x);
  memcpy(x->header, data, DCR__HEADER_SIZE);
  dcr_reader *r;
  assert_int_equal(dcr_reader_open_memory(&r, data, size, NULL, NULL), DCR_OK);
  dcr_bundle_info info;
  dcr_reader_info(r, &info);
  assert_true(info.section_count <= 64);
  for (uint64_t i = 0; i < info.section_count; i++) {
    dcr_section_info si;
    dcr_reader_section(r, i, &si);
    const uint8_t *h = data + si.offset;
    xsec *s = &x->s[x->n++];
    s->type = dcr__le32(h);
    s->flags = dcr__le16(h + 4);
    s->compression = h[6];
    s->payload = h + 32;
    s->length = (size_t)si.length;
  }
  dcr_reader_free(r);
}

static size_t xb_find(const xbundle *x, uint32_t type) {
  for (size_t i = 0; i < x->n; i++)
    if (x->s[i].type == type) return i;
  fail_msg("no such section");
  return 0;
}

static void xb_insert(xbundle *x, size_t at, uint32_t type, uint16_t flags, uint8_t compression,
                      const void *payload, size_t length) {
  assert_true(x->n < 64 && at <= x->n);
  memmove(&x->s[at + 1], &x->s[at], (x->n - at) * sizeof x->s[0]);
  x->s[at] = (xsec){type, flags, compression, payload, length};
  x->n++;
}

static void xb_remove(xbundle *x, size_t at) {
  memmove(&x->s[at], &x->s[at + 1], (x->n - at - 1) * sizeof x->s[0]);
  x->n--;
}

/* Lays the sections out again; the index's CHNK offsets and the footer are
 * rewritten to match the new layout, so that only the change made differs. */
static uint8_t *xb_build(const xbundle *x, size_t *size) {
  uint64_t offset[64], at = DCR__HEADER_SIZE, iden = 0, indx = 0, chunks = 0;
  for (size_t i = 0; i < x->n; i++) {
    offset[i] = at;
    at = dcr__align64(at + DCR__SECTION_HEADER_SIZE + x->s[i].length);
    if (x->s[i].type == DCR__SEC_IDEN && !iden) iden = offset[i];
    if (x->s[i].type == DCR__SEC_INDX && !indx) indx = offset[i];
    chunks += x->s[i].type == DCR__SEC_CHNK;
  }
  uint8_t *out = calloc(1, (size_t)at);
  assert_non_null(out);
  memcpy(out, x->header, DCR__HEADER_SIZE);
  for (size_t i = 0; i < x->n; i++) {
    const xsec *s = &x->s[i];
    uint8_t *p = out + offset[i] + DCR__SECTION_HEADER_SIZE;
    if (s->length) memcpy(p, s->payload, s->length);
    if (s->type == DCR__SEC_INDX)
      for (size_t j = 0, k = 0; j + 1 <= s->length / DCR__RECORD_SIZE; j++) {
        while (k < x->n && x->s[k].type != DCR__SEC_CHNK) k++;
        if (k < x->n) dcr__put64(p + j * DCR__RECORD_SIZE, offset[k++]);
      }
    if (s->type == DCR__SEC_FOOT && s->length == 32) {
      dcr__put64(p + 8, iden);
      dcr__put64(p + 16, indx);
      dcr__put64(p + 24, chunks);
    }
    dcr__section h = {.type = s->type, .flags = s->flags, .compression = s->compression,
                      .length = s->length, .payload_check = XXH3_64bits(p, s->length)};
    dcr__section_header_write(out + offset[i], &h);
  }
  *size = (size_t)at;
  return out;
}

/* Builds the bundle and opens it with `lim` (NULL: defaults). */
static int xb_open_lim(const xbundle *x, const dcr_limits *lim, dcr_bundle_info *info) {
  size_t n;
  uint8_t *b = xb_build(x, &n);
  dcr_reader *r = NULL;
  dcr_detail d;
  int rc = dcr_reader_open_memory(&r, b, n, lim, &d);
  if (!rc) {
    if (info) dcr_reader_info(r, info);
    rc = dcr_reader_verify(r, &d);
  } else {
    assert_int_equal(d.code, rc);
  }
  dcr_reader_free(r);
  free(b);
  return rc;
}

static int xb_open(const xbundle *x) { return xb_open_lim(x, NULL, NULL); }

/* The raw pair's bundle at level 0 (4 CHNK sections, no META) in *s. */
static void raw_bundle(sink *s, int level) {
  tmpdir t;
  tmp_make(&t);
  uint8_t *base = xmalloc(RAW_SIZE), *target = xmalloc(RAW_SIZE);
  make_raw_pair(base, target);
  write_file(t.base, base, RAW_SIZE);
  write_file(t.target, target, RAW_SIZE);
  assert_int_equal(encode_to(t.base, t.target, 4096, level, 1, 1, NULL, 0, s, NULL), DCR_OK);
  free(base);
  free(target);
  tmp_remove(&t);
}

#define XTRA DCR__FOURCC('X', 'T', 'R', 'A')

static void test_sec_rebuilt_bundle_is_identical(void **state) {
  (void)state;
  sink s;
  raw_bundle(&s, 0);
  xbundle x;
  xb_load(&x, s.data, s.size);
  assert_int_equal(x.n, 4 + 4);
  size_t n;
  uint8_t *b = xb_build(&x, &n);
  assert_int_equal(n, s.size);
  assert_memory_equal(b, s.data, n);
  free(b);
  free(s.data);
}

static void test_sec7_unknown_ancillary_section_is_skipped(void **state) {
  (void)state;
  sink s;
  raw_bundle(&s, 0);
  xbundle x;
  const char payload[] = "anything at all, 37 bytes of payload";
  /* anywhere between MANI and FOOT (§4) */
  for (size_t at = 1; at < 8; at++) {
    xb_load(&x, s.data, s.size);
    xb_insert(&x, at, XTRA, 0, 0, payload, sizeof payload);
    dcr_bundle_info info;
    assert_int_equal(xb_open_lim(&x, NULL, &info), DCR_OK);
    assert_int_equal(info.section_count, 9);
    assert_int_equal(info.chunk_count, 4);
  }
  /* empty, and a compressed one (its content is not read) */
  xb_load(&x, s.data, s.size);
  xb_insert(&x, 1, XTRA, 0, 0, NULL, 0);
  xb_insert(&x, 2, XTRA, 0, 1, payload, sizeof payload);
  assert_int_equal(xb_open(&x), DCR_OK);
  free(s.data);
}

static void test_sec6_unknown_critical_section_is_rejected(void **state) {
  (void)state;
  sink s;
  raw_bundle(&s, 0);
  xbundle x;
  for (size_t at = 1; at < 8; at++) {
    xb_load(&x, s.data, s.size);
    xb_insert(&x, at, XTRA, DCR__FLAG_CRITICAL, 0, "x", 1);
    assert_int_equal(xb_open(&x), DCR_E_UNKNOWN_SECTION);
  }
  free(s.data);
}

static void test_sec8_order_of_known_sections(void **state) {
  (void)state;
  sink s;
  raw_bundle(&s, 0);
  xbundle x;
  /* the first section is not MANI */
  xb_load(&x, s.data, s.size);
  xb_insert(&x, 0, XTRA, 0, 0, "x", 1);
  assert_int_equal(xb_open(&x), DCR_E_STRUCTURE);
  /* MANI twice */
  xb_load(&x, s.data, s.size);
  xb_insert(&x, 1, x.s[0].type, x.s[0].flags, x.s[0].compression, x.s[0].payload, x.s[0].length);
  assert_int_equal(xb_open(&x), DCR_E_STRUCTURE);
  /* IDEN missing, twice, after INDX */
  xb_load(&x, s.data, s.size);
  size_t iden = xb_find(&x, DCR__SEC_IDEN);
  xb_remove(&x, iden);
  assert_int_equal(xb_open(&x), DCR_E_STRUCTURE);
  xb_load(&x, s.data, s.size);
  xb_insert(&x, iden, DCR__SEC_IDEN, 1, 0, x.s[iden].payload, x.s[iden].length);
  assert_int_equal(xb_open(&x), DCR_E_STRUCTURE);
  xb_load(&x, s.data, s.size);
  xsec tmp = x.s[iden];
  x.s[iden] = x.s[iden + 1];
  x.s[iden + 1] = tmp;
  assert_int_equal(xb_open(&x), DCR_E_STRUCTURE);
  /* INDX missing */
  xb_load(&x, s.data, s.size);
  xb_remove(&x, xb_find(&x, DCR__SEC_INDX));
  assert_int_equal(xb_open(&x), DCR_E_STRUCTURE);
  /* a CHNK after IDEN */
  xb_load(&x, s.data, s.size);
  tmp = x.s[iden - 1];
  xb_remove(&x, iden - 1);
  xb_insert(&x, iden, tmp.type, tmp.flags, tmp.compression, tmp.payload, tmp.length);
  assert_int_equal(xb_open(&x), DCR_E_STRUCTURE);
  /* FOOT missing: the file ends after INDX */
  xb_load(&x, s.data, s.size);
  xb_remove(&x, x.n - 1);
  int rc = xb_open(&x);
  assert_true(rc == DCR_E_STRUCTURE || rc == DCR_E_TRUNCATED);
  free(s.data);
}

static void test_sec_known_section_flags_and_compression(void **state) {
  (void)state;
  sink s;
  raw_bundle(&s, 0);
  xbundle x;
  for (size_t i = 0; i < 8; i++) {
    /* the critical flag flipped on every known section */
    xb_load(&x, s.data, s.size);
    x.s[i].flags ^= DCR__FLAG_CRITICAL;
    assert_int_equal(xb_open(&x), DCR_E_STRUCTURE);
    /* compression 1 where only 0 is allowed (all but MANI) */
    if (i) {
      xb_load(&x, s.data, s.size);
      x.s[i].compression = 1;
      assert_int_equal(xb_open(&x), DCR_E_STRUCTURE);
    }
    /* compression 2: unknown (§4.4) */
    xb_load(&x, s.data, s.size);
    x.s[i].compression = 2;
    assert_int_equal(xb_open(&x), DCR_E_ENCODING);
  }
  /* META and SIGN are ancillary */
  uint8_t *meta;
  size_t meta_length;
  const dcr_meta pairs[] = {{"k", "v"}};
  assert_int_equal(meta_serialize(pairs, 1, &meta, &meta_length), DCR_OK);
  xb_load(&x, s.data, s.size);
  xb_insert(&x, 1, DCR__SEC_META, DCR__FLAG_CRITICAL, 0, meta, meta_length);
  assert_int_equal(xb_open(&x), DCR_E_STRUCTURE);
  free(meta);
  free(s.data);
}

static void test_sec_meta_anywhere_once(void **state) {
  (void)state;
  sink s;
  raw_bundle(&s, 0);
  xbundle x;
  uint8_t *meta;
  size_t meta_length;
  const dcr_meta pairs[] = {{"b", "2"}, {"a", "1"}};
  assert_int_equal(meta_serialize(pairs, 2, &meta, &meta_length), DCR_OK);
  for (size_t at = 1; at < 8; at++) {
    xb_load(&x, s.data, s.size);
    xb_insert(&x, at, DCR__SEC_META, 0, 0, meta, meta_length);
    dcr_bundle_info info;
    assert_int_equal(xb_open_lim(&x, NULL, &info), DCR_OK);
    assert_int_equal(info.meta_count, 2);
  }
  /* twice */
  xb_load(&x, s.data, s.size);
  xb_insert(&x, 1, DCR__SEC_META, 0, 0, meta, meta_length);
  xb_insert(&x, 3, DCR__SEC_META, 0, 0, meta, meta_length);
  assert_int_equal(xb_open(&x), DCR_E_STRUCTURE);
  /* malformed: a reader that reads it rejects it (§6.4) */
  uint8_t bad[64];
  memcpy(bad, meta, meta_length);
  bad[meta_length] = 0;
  xb_load(&x, s.data, s.size);
  xb_insert(&x, 1, DCR__SEC_META, 0, 0, bad, meta_length + 1);
  assert_int_equal(xb_open(&x), DCR_E_MANIFEST);
  free(meta);
  free(s.data);
}

static void test_sec_sign_immediately_before_foot(void **state) {
  (void)state;
  sink s;
  raw_bundle(&s, 0);
  xbundle x;
  const char sig[] = "signature";
  xb_load(&x, s.data, s.size);
  xb_insert(&x, x.n - 1, DCR__SEC_SIGN, 0, 0, sig, sizeof sig);
  assert_int_equal(xb_open(&x), DCR_OK);
  /* SIGN earlier */
  xb_load(&x, s.data, s.size);
  xb_insert(&x, 1, DCR__SEC_SIGN, 0, 0, sig, sizeof sig);
  assert_int_equal(xb_open(&x), DCR_E_STRUCTURE);
  xb_load(&x, s.data, s.size);
  xb_insert(&x, x.n - 2, DCR__SEC_SIGN, 0, 0, sig, sizeof sig); /* before INDX */
  assert_int_equal(xb_open(&x), DCR_E_STRUCTURE);
  /* twice */
  xb_load(&x, s.data, s.size);
  xb_insert(&x, x.n - 1, DCR__SEC_SIGN, 0, 0, sig, sizeof sig);
  xb_insert(&x, x.n - 1, DCR__SEC_SIGN, 0, 0, sig, sizeof sig);
  assert_int_equal(xb_open(&x), DCR_E_STRUCTURE);
  /* a META between SIGN and FOOT */
  uint8_t *meta;
  size_t meta_length;
  const dcr_meta none[1] = {{"unused", ""}};
  assert_int_equal(meta_serialize(none, 0, &meta, &meta_length), DCR_OK);
  xb_load(&x, s.data, s.size);
  xb_insert(&x, x.n - 1, DCR__SEC_SIGN, 0, 0, sig, sizeof sig);
  xb_insert(&x, x.n - 1, DCR__SEC_META, 0, 0, meta, meta_length);
  assert_int_equal(xb_open(&x), DCR_E_STRUCTURE);
  /* an unknown ancillary section between SIGN and FOOT: SIGN is no longer
   * immediately before FOOT (§4.3), and those bytes would not be signed (§14) */
  xb_load(&x, s.data, s.size);
  xb_insert(&x, x.n - 1, DCR__SEC_SIGN, 0, 0, sig, sizeof sig);
  xb_insert(&x, x.n - 1, XTRA, 0, 0, "x", 1);
  int rc = xb_open(&x);
  if (rc == DCR_OK) print_message("    SIGN, XTRA (ancillary), FOOT accepted\n");
  assert_int_equal(rc, DCR_E_STRUCTURE);
  free(meta);
  free(s.data);
}

/* Edits the FOOT payload of a built bundle and reseals it. */
static int open_with_footer(const xbundle *x, size_t field, uint64_t value) {
  size_t n;
  uint8_t *b = xb_build(x, &n);
  dcr__put64(b + n - 32 + field, value);
  reseal_section(b, n - 64);
  dcr_detail d;
  int rc = open_verify(b, n, &d);
  free(b);
  return rc;
}

static void test_ftr_footer_must_name_the_sections(void **state) {
  (void)state;
  sink s;
  raw_bundle(&s, 0);
  xbundle x;
  xb_load(&x, s.data, s.size);
  size_t n;
  uint8_t *b = xb_build(&x, &n);
  uint64_t iden = dcr__le64(b + n - 32 + 8), indx = dcr__le64(b + n - 32 + 16);
  free(b);
  /* R-FTR-2 */
  assert_int_equal(open_with_footer(&x, 0, 64), DCR_OK);
  assert_int_equal(open_with_footer(&x, 0, 128), DCR_E_STRUCTURE);
  assert_int_equal(open_with_footer(&x, 0, 0), DCR_E_STRUCTURE);
  assert_int_equal(open_with_footer(&x, 8, iden + 64), DCR_E_STRUCTURE);
  assert_int_equal(open_with_footer(&x, 8, indx), DCR_E_STRUCTURE);
  assert_int_equal(open_with_footer(&x, 16, iden), DCR_E_STRUCTURE);
  assert_int_equal(open_with_footer(&x, 16, UINT64_MAX), DCR_E_STRUCTURE);
  assert_int_equal(open_with_footer(&x, 24, 3), DCR_E_STRUCTURE);
  assert_int_equal(open_with_footer(&x, 24, 5), DCR_E_STRUCTURE);
  /* R-FTR-1: a FOOT whose length is not 32 */
  static const uint8_t foot40[40];
  xb_load(&x, s.data, s.size);
  x.s[x.n - 1].payload = foot40;
  x.s[x.n - 1].length = 40;
  assert_int_equal(xb_open(&x), DCR_E_STRUCTURE);
  /* bytes after the footer */
  uint8_t *longer = calloc(1, s.size + 64);
  assert_non_null(longer);
  memcpy(longer, s.data, s.size);
  dcr_detail d;
  assert_int_equal(open_verify(longer, s.size + 64, &d), DCR_E_STRUCTURE);
  /* a complete section after the footer */
  memcpy(longer + s.size, s.data + s.size - 64, 64);
  assert_int_equal(open_verify(longer, s.size + 64, &d), DCR_E_STRUCTURE);
  free(longer);
  free(s.data);
}

static void test_idx1_index_must_match_chunk_sections(void **state) {
  (void)state;
  sink s;
  raw_bundle(&s, 0);
  xbundle x;
  xb_load(&x, s.data, s.size);
  size_t ix = xb_find(&x, DCR__SEC_INDX);
  assert_int_equal(x.s[ix].length, 4 * 32);
  uint8_t idx[4 * 32 + 32];
  memcpy(idx, x.s[ix].payload, 4 * 32);
  x.s[ix].payload = idx;
  /* a record's fields: tensor, chunk, encoding, compression, count, length */
  const size_t fields[] = {8, 12, 16, 17, 20, 24};
  for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
    idx[32 + fields[f]] = (uint8_t)(idx[32 + fields[f]] ^ 1);
    assert_int_equal(xb_open(&x), DCR_E_INDEX);
    idx[32 + fields[f]] = (uint8_t)(idx[32 + fields[f]] ^ 1);
  }
  assert_int_equal(xb_open(&x), DCR_OK);
  /* reserved bytes */
  idx[32 + 18] = 1;
  assert_int_equal(xb_open(&x), DCR_E_RESERVED);
  idx[32 + 18] = 0;
  /* a record short, a record too many, a partial record */
  x.s[ix].length = 3 * 32;
  assert_int_equal(xb_open(&x), DCR_E_INDEX);
  memcpy(idx + 4 * 32, idx + 3 * 32, 32);
  x.s[ix].length = 5 * 32;
  assert_int_equal(xb_open(&x), DCR_E_INDEX);
  x.s[ix].length = 4 * 32 + 1;
  assert_int_equal(xb_open(&x), DCR_E_INDEX);
  x.s[ix].length = 4 * 32;
  /* two CHNK sections swapped (the index follows the file order) */
  xsec tmp = x.s[1];
  x.s[1] = x.s[2];
  x.s[2] = tmp;
  uint8_t rec[32];
  memcpy(rec, idx, 32);
  memcpy(idx, idx + 32, 32);
  memcpy(idx + 32, rec, 32);
  assert_int_equal(xb_open(&x), DCR_E_INDEX);
  /* the same CHNK twice */
  xb_load(&x, s.data, s.size);
  memcpy(idx, x.s[ix].payload, 4 * 32);
  x.s[2] = x.s[1];
  x.s[ix].payload = idx;
  memcpy(idx + 32, idx, 32);
  assert_int_equal(xb_open(&x), DCR_E_INDEX);
  free(s.data);
}

static void test_chunk_record_rules(void **state) {
  (void)state;
  sink s;
  raw_bundle(&s, 0);
  xbundle x;
  xb_load(&x, s.data, s.size);
  size_t ix = xb_find(&x, DCR__SEC_INDX);
  uint8_t idx[4 * 32], chnk[64 * 1024];
  memcpy(idx, x.s[ix].payload, sizeof idx);
  const size_t chnk_length = x.s[1].length;
  assert_true(chnk_length <= sizeof chnk);
  memcpy(chnk, x.s[1].payload, chnk_length);
  x.s[ix].payload = idx;
  x.s[1].payload = chnk;
  assert_int_equal(xb_open(&x), DCR_OK);
  /* reserved field of the chunk record */
  chnk[10] = 1;
  assert_int_equal(xb_open(&x), DCR_E_RESERVED);
  chnk[10] = 0;
  /* count 0, count > n, in both the record and the index */
  const uint32_t counts[] = {0, 4097};
  for (size_t i = 0; i < 2; i++) {
    dcr__put32(chnk + 12, counts[i]);
    dcr__put32(idx + 20, counts[i]);
    assert_int_equal(xb_open(&x), DCR_E_INDEX);
  }
  dcr__put32(chnk + 12, 1);
  dcr__put32(idx + 20, 1);
  /* a chunk number past the tensor's, a tensor index past the manifest */
  dcr__put32(chnk + 4, 5);
  dcr__put32(idx + 12, 5);
  assert_int_equal(xb_open(&x), DCR_E_INDEX);
  dcr__put32(chnk + 4, 0);
  dcr__put32(idx + 12, 0);
  dcr__put32(chnk, 1);
  dcr__put32(idx + 8, 1);
  assert_int_equal(xb_open(&x), DCR_E_INDEX);
  dcr__put32(chnk, 0);
  dcr__put32(idx + 8, 0);
  /* a CHNK payload shorter than its record */
  x.s[1].length = 31;
  dcr__put64(idx + 24, 31);
  assert_int_not_equal(xb_open(&x), DCR_OK);
  /* an unknown encoding, in both: found by verify */
  x.s[1].length = chnk_length;
  dcr__put64(idx + 24, chnk_length);
  assert_int_equal(xb_open(&x), DCR_OK);
  chnk[8] = 9;
  idx[16] = 9;
  assert_int_equal(xb_open(&x), DCR_E_ENCODING);
  chnk[8] = DCR_ENC_XOR_SPARSE;
  idx[16] = DCR_ENC_XOR_SPARSE;
  chnk[9] = 2;
  idx[17] = 2;
  assert_int_equal(xb_open(&x), DCR_E_ENCODING);
  free(s.data);
}

static void test_idn1_identities_are_checked(void **state) {
  (void)state;
  sink s;
  raw_bundle(&s, 0);
  xbundle x;
  xb_load(&x, s.data, s.size);
  size_t id = xb_find(&x, DCR__SEC_IDEN);
  uint8_t iden[64 + 16];
  assert_int_equal(x.s[id].length, 64);
  memcpy(iden, x.s[id].payload, 64);
  x.s[id].payload = iden;
  for (size_t i = 0; i < 64; i += 7) {
    iden[i] ^= 0x10;
    assert_int_equal(xb_open(&x), DCR_E_CHECKSUM);
    iden[i] ^= 0x10;
  }
  assert_int_equal(xb_open(&x), DCR_OK);
  x.s[id].length = 48;
  assert_int_equal(xb_open(&x), DCR_E_STRUCTURE);
  x.s[id].length = 80;
  assert_int_equal(xb_open(&x), DCR_E_STRUCTURE);
  free(s.data);
}

static void test_lim_limits_are_enforced(void **state) {
  (void)state;
  sink s;
  raw_bundle(&s, 3);
  xbundle x;
  xb_load(&x, s.data, s.size);
  dcr_limits lim = limits();
  assert_int_equal(xb_open_lim(&x, &lim, NULL), DCR_OK);
  lim.max_bundle_size = s.size - 1;
  assert_int_equal(xb_open_lim(&x, &lim, NULL), DCR_E_LIMIT);
  lim = limits();
  lim.max_section_size = 1000; /* the CHNK sections are larger */
  size_t largest = 0;
  for (size_t i = 0; i < x.n; i++)
    if (x.s[i].length > largest) largest = x.s[i].length;
  assert_true(largest > 1000);
  assert_int_equal(xb_open_lim(&x, &lim, NULL), DCR_E_LIMIT);
  /* R-CMP-2: a compressed MANI that declares more than max_section_size */
  uint8_t content[2000], frame[2100];
  memset(content, 0, sizeof content);
  size_t z = ZSTD_compress(frame, sizeof frame, content, sizeof content, 3);
  assert_false(ZSTD_isError(z));
  xb_load(&x, s.data, s.size);
  x.s[0].payload = frame;
  x.s[0].length = z;
  x.s[0].compression = 1;
  lim = limits();
  lim.max_section_size = 1999;
  for (size_t i = 0; i < x.n; i++)
    if (x.s[i].length > 1999) xb_remove(&x, i--);
  assert_int_equal(xb_open_lim(&x, &lim, NULL), DCR_E_LIMIT);
  /* and with the limit it is a manifest of zeros: chunk size 0 */
  lim.max_section_size = 2000;
  assert_int_equal(xb_open_lim(&x, &lim, NULL), DCR_E_MANIFEST);
  /* a compressed MANI that is not a frame */
  x.s[0].payload = content;
  x.s[0].length = 100;
  assert_int_equal(xb_open(&x), DCR_E_DECOMPRESS);
  free(s.data);
}

static void test_hdr_any_minor_is_accepted(void **state) {
  (void)state;
  sink s;
  raw_bundle(&s, 0);
  xbundle x;
  xb_load(&x, s.data, s.size);
  dcr__put16(x.header + 10, 5);
  rehash_header(x.header);
  dcr_bundle_info info;
  assert_int_equal(xb_open_lim(&x, NULL, &info), DCR_OK);
  assert_int_equal(info.format_minor, 5);
  dcr__put16(x.header + 8, 2);
  rehash_header(x.header);
  assert_int_equal(xb_open(&x), DCR_E_VERSION);
  free(s.data);
}

/* dcr_check_target on a raw bundle. Last in the run: under UBSan it stops the
 * program if the library passes a null prefix to memcmp. */
static void test_apl_check_target_raw(void **state) {
  (void)state;
  tmpdir t;
  tmp_make(&t);
  uint8_t *base = xmalloc(RAW_SIZE), *target = xmalloc(RAW_SIZE);
  make_raw_pair(base, target);
  write_file(t.base, base, RAW_SIZE);
  write_file(t.target, target, RAW_SIZE);
  sink s;
  assert_int_equal(encode_to(t.base, t.target, 4096, 3, 1, 2, NULL, 0, &s, NULL), DCR_OK);
  dcr_reader *r;
  dcr_detail d;
  assert_int_equal(dcr_reader_open_memory(&r, s.data, s.size, NULL, &d), DCR_OK);
  dcr_apply_options o;
  dcr_apply_options_default(&o);
  o.sync = 0;
  assert_int_equal(dcr_apply(r, t.base, t.out, &o, &d), DCR_OK);
  assert_int_equal(dcr_check_target(r, t.out, &o, &d), DCR_OK);
  assert_int_equal(dcr_check_target(r, t.target, &o, &d), DCR_OK);
  assert_int_equal(dcr_check_target(r, t.base, &o, &d), DCR_E_TARGET_MISMATCH);
  dcr_reader_free(r);
  free(s.data);
  free(base);
  free(target);
  tmp_remove(&t);
}


/* ---- memory (issue 18) ----------------------------------------------------- */

static uint64_t mem_rng = 0x9E3779B97F4A7C15u;
static uint64_t mem_next(void) {
  uint64_t z = (mem_rng += 0x9E3779B97F4A7C15u);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
  return z ^ (z >> 31);
}

static int parse_header_as(const char *mode, const uint8_t *text, size_t n, dcr_detail *d) {
  setenv("DCR_TEST_JSON_MEMBERS", mode, 1);
  uint8_t *p = malloc(8 + n + 1);
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)((uint64_t)n >> (8 * i));
  memcpy(p + 8, text, n);
  dcr_limits lim = limits();
  dcr__checkpoint ck;
  dcr__detail_init(d);
  int rc = dcr__safetensors_parse(p, 8 + n, 12, &lim, DCR_FORMAT_MINOR, &ck, d);
  if (!rc) dcr__checkpoint_free(&ck);
  free(p);
  unsetenv("DCR_TEST_JSON_MEMBERS");
  return rc;
}

/* A header too large to parse as one document is read member by member: on
 * mutated headers, that gives the verdict of the whole parse, whatever it is. */
static void test_lim_json_members_match_whole(void **state) {
  (void)state;
  static const char *const seeds[] = {
      "{\"__metadata__\":{\"k\":\"v\"},\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"a\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[8,9]},\"c\":{\"dtype\":\"U8\","
      "\"shape\":[3,1],\"data_offsets\":[9,12]}}",
      "{ \"x\" : {\"data_offsets\":[0,12],\"shape\":[3],\"dtype\":\"I32\"} , \"__metadata__\" : {} }",
      "{\"\\u00e9\\\"\":{\"dtype\":\"U8\",\"shape\":[12],\"data_offsets\":[0,12]}}\n  ",
  };
  static const char alphabet[] = "{}[],:\" \\u0123456789abcdefx\x80\xc3\xff\t";
  unsigned differ = 0, tried = 0;
  for (size_t s = 0; s < sizeof seeds / sizeof *seeds; s++) {
    size_t len = strlen(seeds[s]);
    uint8_t text[512];
    dcr_detail d0, d2;
    assert_int_equal(parse_header_as("0", (const uint8_t *)seeds[s], len, &d0), DCR_OK);
    assert_int_equal(parse_header_as("2", (const uint8_t *)seeds[s], len, &d2), DCR_OK);
    for (unsigned iter = 0; iter < 4000; iter++) {
      size_t n = len;
      memcpy(text, seeds[s], n);
      for (unsigned k = 1 + (unsigned)(mem_next() % 3); k--;) {
        size_t at = (size_t)(mem_next() % (n + 1));
        char c = alphabet[mem_next() % (sizeof alphabet - 1)];
        switch (mem_next() % 4) {
          case 0: if (at < n) text[at] = (uint8_t)c; break;
          case 1: if (n < sizeof text - 1) memmove(text + at + 1, text + at, n - at), text[at] = (uint8_t)c, n++; break;
          case 2: if (at < n) memmove(text + at, text + at + 1, n - at - 1), n--; break;
          default: { /* a copy of a stretch elsewhere: repeated keys and members */
            size_t from = (size_t)(mem_next() % (n + 1)), m = (size_t)(mem_next() % 24);
            if (from + m > n) m = n - from;
            if (n + m < sizeof text) {
              uint8_t tmp[32];
              memcpy(tmp, text + from, m);
              memmove(text + at + m, text + at, n - at);
              memcpy(text + at, tmp, m);
              n += m;
            }
          }
        }
      }
      int a = parse_header_as("0", text, n, &d0), b = parse_header_as("2", text, n, &d2);
      tried++;
      if (a != b) {
        if (differ++ < 5)
          print_message("    %.*s\n      whole %s (%s), member by member %s (%s)\n", (int)n, text,
                        dcr_error_name(a), d0.message, dcr_error_name(b), d2.message);
      }
    }
  }
  print_message("    %u mutated headers, %u verdicts differ\n", tried, differ);
  assert_int_equal(differ, 0);
}

/* A sparse chunk with more positions than a bounded decoder holds is read in
 * batches: the same bytes, the same failures, as a decoder that holds them all. */
static void test_enc_bounded_decoder_matches_full(void **state) {
  (void)state;
  const size_t cs = (size_t)1 << 18; /* U8: n = 262144, more than the 65536 held */
  uint8_t *base = malloc(cs), *out_a = malloc(cs), *out_b = malloc(cs), *data = malloc(2 * cs + 64);
  uint8_t *planes = malloc(cs), *dig[4];
  uint32_t *pos = malloc(cs * sizeof *pos);
  for (int i = 0; i < 4; i++) dig[i] = malloc(16 * DCR__PIECES(cs));
  for (size_t i = 0; i < cs; i++) base[i] = (uint8_t)mem_next();
  dcr__chunk_decoder full, bounded;
  assert_int_equal(dcr__chunk_decoder_init(&full, cs, DCR_FORMAT_MINOR), DCR_OK);
  assert_int_equal(dcr__chunk_decoder_init(&bounded, cs, DCR_FORMAT_MINOR), DCR_OK);
  full.pos = realloc(full.pos, cs * sizeof *full.pos); /* as large as every position */
  full.pos_capacity = cs;
  assert_true(bounded.pos_capacity < cs);
  assert_true(dcr__chunk_decoder_bytes((size_t)1 << 30) < ((uint64_t)3 << 29)); /* 1.5 GiB */
  static const size_t counts[] = {1, 1000, 65536, 65537, 200000, 262144};
  static const int encodings[] = {DCR_ENC_XOR_SPARSE, DCR_ENC_DELTA_SPARSE, DCR_ENC_OVERWRITE_SPARSE};
  for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++)
    for (size_t ei = 0; ei < 3; ei++)
      for (int broken = 0; broken < 2; broken++) {
        size_t count = counts[ci], k = 0;
        /* count positions out of cs, spread at random */
        for (size_t i = 0; i < cs && k < count; i++)
          if (mem_next() % (cs - i) < count - k) pos[k++] = (uint32_t)i;
        assert_int_equal(k, count);
        for (size_t i = 0; i < count; i++) {
          uint8_t v = (uint8_t)(1 + mem_next() % 255); /* nonzero XOR and delta */
          planes[i] = encodings[ei] == DCR_ENC_OVERWRITE_SPARSE ? (uint8_t)(base[pos[i]] ^ v) : v;
        }
        if (broken) { /* one value that changes nothing, late in the chunk */
          size_t i = count - 1 - count / 7;
          planes[i] = encodings[ei] == DCR_ENC_OVERWRITE_SPARSE ? base[pos[i]] : 0;
        }
        size_t used = dcr__positions_write(data, pos, count);
        memcpy(data + used, planes, count);
        dcr__chunk c = {.encoding = (uint8_t)encodings[ei], .compression = DCR_COMP_NONE,
                        .count = (uint32_t)count};
        const uint8_t *pa, *pb;
        dcr_detail da, db;
        dcr__detail_init(&da);
        dcr__detail_init(&db);
        /* in place, as memory apply does */
        memcpy(out_a, base, cs);
        memcpy(out_b, base, cs);
        int ra = dcr__decode_chunk(&full, &c, data, used + count, 1, cs, out_a, &da);
        int rb = dcr__decode_chunk(&bounded, &c, data, used + count, 1, cs, out_b, &db);
        assert_int_equal(ra, broken ? DCR_E_ENCODING : DCR_OK);
        assert_int_equal(ra, rb);
        assert_string_equal(da.message, db.message);
        if (!broken) assert_memory_equal(out_a, out_b, cs);
        /* piece by piece, as the apply pass does */
        ra = dcr__chunk_streams(&full, &c, data, used + count, 1, cs, &pa, &da);
        rb = dcr__chunk_streams(&bounded, &c, data, used + count, 1, cs, &pb, &db);
        assert_int_equal(ra, DCR_OK);
        assert_int_equal(rb, DCR_OK);
        ra = dcr__apply_sparse_pieces(&full, &c, pa, 1, cs, base, out_a, dig[0], dig[1], &da);
        rb = dcr__apply_sparse_pieces(&bounded, &c, pb, 1, cs, base, out_b, dig[2], dig[3], &db);
        assert_int_equal(ra, rb);
        assert_string_equal(da.message, db.message);
        assert_memory_equal(dig[0], dig[2], 16 * DCR__PIECES(cs));
        if (!broken) {
          assert_memory_equal(out_a, out_b, cs);
          assert_memory_equal(dig[1], dig[3], 16 * DCR__PIECES(cs));
        }
        /* check only, as validate does */
        ra = dcr__decode_chunk(&full, &c, data, used + count, 1, cs, NULL, &da);
        rb = dcr__decode_chunk(&bounded, &c, data, used + count, 1, cs, NULL, &db);
        assert_int_equal(ra, rb);
        /* checked for dcr_changes: every position in dd->pos */
        ra = dcr__chunk_streams(&bounded, &c, data, used + count, 1, cs, &pb, &db);
        if (!ra) ra = dcr__apply_streams(&bounded, &c, pb, 1, cs, NULL, &db);
        assert_int_equal(ra, broken && encodings[ei] != DCR_ENC_OVERWRITE_SPARSE ? DCR_E_ENCODING : DCR_OK);
        if (!ra) assert_memory_equal(bounded.pos, pos, count * sizeof *pos);
      }
  dcr__chunk_decoder_free(&full);
  dcr__chunk_decoder_free(&bounded);
  for (int i = 0; i < 4; i++) free(dig[i]);
  free(base), free(out_a), free(out_b), free(data), free(planes), free(pos);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lim_json_members_match_whole),
      cmocka_unit_test(test_enc_bounded_decoder_matches_full),
      cmocka_unit_test(test_err_names_and_messages),
      cmocka_unit_test(test_version),
      cmocka_unit_test(test_detail_keeps_first_failure),
      cmocka_unit_test(test_dt1_dtype_table),
      cmocka_unit_test(test_man5_desc_check),
      cmocka_unit_test(test_man4_utf8),
      cmocka_unit_test(test_man4_name_order_is_bytewise),
      cmocka_unit_test(test_hdr_round_trip),
      cmocka_unit_test(test_hdr1_wrong_magic_is_rejected),
      cmocka_unit_test(test_hdr_short_file),
      cmocka_unit_test(test_hdr2_bad_check_is_rejected),
      cmocka_unit_test(test_hdr3_major_2_is_rejected),
      cmocka_unit_test(test_res1_header_reserved_byte_is_rejected),
      cmocka_unit_test(test_sec_header_round_trip),
      cmocka_unit_test(test_sec2_flipped_bit_is_rejected),
      cmocka_unit_test(test_res1_section_reserved_flag_or_byte_is_rejected),
      cmocka_unit_test(test_cmp1_section_inflate),
      cmocka_unit_test(test_cmp_inflate_watched),
      cmocka_unit_test(test_manifest_need),
      cmocka_unit_test(test_cmp4_zstd_profile),
      cmocka_unit_test(test_man_raw_round_trip),
      cmocka_unit_test(test_man_safetensors_round_trip),
      cmocka_unit_test(test_man4_names_unsorted_or_duplicate_are_rejected),
      cmocka_unit_test(test_man4_bad_names_are_rejected),
      cmocka_unit_test(test_man5_unknown_dtype_is_rejected),
      cmocka_unit_test(test_man5_shape_and_rank_are_checked),
      cmocka_unit_test(test_man3_chunk_size_kind_presence),
      cmocka_unit_test(test_man1_entry_count_zero_only_for_empty_safetensors),
      cmocka_unit_test(test_man6_target_layout_is_checked),
      cmocka_unit_test(test_man7_raw_kind_rules),
      cmocka_unit_test(test_man8_safetensors_prefix_must_match_entries),
      cmocka_unit_test(test_man1_trailing_byte_is_rejected),
      cmocka_unit_test(test_man1_truncated_at_every_length_is_rejected),
      cmocka_unit_test(test_man2_huge_counts_are_rejected_before_allocating),
      cmocka_unit_test(test_meta_round_trip_sorts_keys),
      cmocka_unit_test(test_meta_serialize_rejects_bad_pairs),
      cmocka_unit_test(test_meta_parse_rejections),
      cmocka_unit_test(test_bundle_raw_round_trip_and_corruption),
      cmocka_unit_test(test_apl1_wrong_base_is_rejected_without_output),
      cmocka_unit_test(test_encode_rejects_bad_options),
      cmocka_unit_test(test_enc2_verify_and_apply_decode_chunks),
      cmocka_unit_test(test_sec_rebuilt_bundle_is_identical),
      cmocka_unit_test(test_sec7_unknown_ancillary_section_is_skipped),
      cmocka_unit_test(test_sec6_unknown_critical_section_is_rejected),
      cmocka_unit_test(test_sec8_order_of_known_sections),
      cmocka_unit_test(test_sec_known_section_flags_and_compression),
      cmocka_unit_test(test_sec_meta_anywhere_once),
      cmocka_unit_test(test_sec_sign_immediately_before_foot),
      cmocka_unit_test(test_ftr_footer_must_name_the_sections),
      cmocka_unit_test(test_idx1_index_must_match_chunk_sections),
      cmocka_unit_test(test_chunk_record_rules),
      cmocka_unit_test(test_idn1_identities_are_checked),
      cmocka_unit_test(test_lim_limits_are_enforced),
      cmocka_unit_test(test_hdr_any_minor_is_accepted),
      cmocka_unit_test(test_apl_check_target_raw),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
