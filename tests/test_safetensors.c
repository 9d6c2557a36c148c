/*
 * test_safetensors.c - the strict safetensors parser (SPEC.md §2.1), opening
 * checkpoints, and the synthetic checkpoint generator.
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
#include <math.h>
#include <unistd.h>

#include "cli.h"
#include "checkpoint.h"

/* ---- helpers -------------------------------------------------------------- */

static dcr_limits limits(void) {
  dcr_limits l;
  dcr_limits_default(&l);
  return l;
}

/* Parses `json` as a header (8-byte length + the text) with a data region of
 * data_length bytes; on failure also checks that `ck` was left empty. */
static int parse_with(const char *json, size_t json_length, uint64_t data_length,
                      const dcr_limits *lim, dcr__checkpoint *ck, dcr_detail *d) {
  uint8_t *prefix = malloc(8 + json_length);
  assert_non_null(prefix);
  dcr__put64(prefix, json_length);
  memcpy(prefix + 8, json, json_length);
  dcr__detail_init(d);
  int rc = dcr__safetensors_parse(prefix, 8 + json_length, data_length, lim, DCR_FORMAT_MINOR, ck, d);
  if (!rc && (rc = dcr__safetensors_check_layout(ck, data_length, d))) dcr__checkpoint_free(ck);
  free(prefix);
  if (rc) {
    static const dcr__checkpoint empty;
    assert_memory_equal(ck, &empty, sizeof empty);
    assert_int_equal(d->code, rc);
    assert_true(d->message[0] != '\0');
  }
  return rc;
}

static int parse(const char *json, uint64_t data_length) {
  dcr__checkpoint ck;
  dcr_detail d;
  dcr_limits lim = limits();
  int rc = parse_with(json, strlen(json), data_length, &lim, &ck, &d);
  if (rc) print_message("    %s: %s [%s]\n", dcr_error_name(rc), d.message, d.tensor_name);
  dcr__checkpoint_free(&ck);
  return rc;
}

#define T(dtype, shape, b, e) \
  "{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

/* ---- accepted ------------------------------------------------------------- */

static void test_valid(void **state) {
  (void)state;
  const char *json = "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"x\"},"
                     "\"w\":" T("BF16", "[2, 3]", 0, 12) ","
                     "\"a\":" T("F32", "[4]", 12, 28) ","
                     "\"s\":" T("U8", "[]", 28, 29) ","
                     "\"e\":" T("I64", "[0, 5]", 29, 29) ","
                     "\"\xc3\xa9\":" T("F8_E4M3", "[3]", 29, 32) "}    ";
  size_t json_length = strlen(json);
  dcr__checkpoint ck;
  dcr_detail d;
  dcr_limits lim = limits();
  assert_int_equal(parse_with(json, json_length, 32, &lim, &ck, &d), DCR_OK);
  assert_int_equal(ck.kind, DCR_KIND_SAFETENSORS);
  assert_int_equal(ck.prefix_length, 8 + json_length);
  assert_int_equal(ck.file_size, 8 + json_length + 32);
  assert_int_equal(dcr__le64(ck.prefix), json_length);
  assert_memory_equal(ck.prefix + 8, json, json_length);
  assert_int_equal(ck.count, 5);
  static const struct {
    const char *name;
    int dtype;
    unsigned rank;
    uint64_t dims[2], offset, length;
  } want[] = {
      {"a", 12, 1, {4, 0}, 12, 16},      {"e", 13, 2, {0, 5}, 29, 0}, {"s", 2, 0, {0, 0}, 28, 1},
      {"w", 9, 2, {2, 3}, 0, 12}, {"\xc3\xa9", 5, 1, {3, 0}, 29, 3},
  };
  for (size_t i = 0; i < 5; i++) {
    const dcr__tensor *t = &ck.tensors[i];
    assert_string_equal(t->name, want[i].name);
    assert_int_equal(t->name_length, strlen(want[i].name));
    assert_int_equal(t->desc.dtype, want[i].dtype);
    assert_int_equal(t->desc.rank, want[i].rank);
    for (unsigned k = 0; k < want[i].rank; k++) assert_int_equal(t->desc.dims[k], want[i].dims[k]);
    assert_int_equal(t->desc.offset, want[i].offset);
    assert_int_equal(t->desc.byte_length, want[i].length);
    static const uint8_t zero[16];
    assert_memory_equal(t->desc.hash, zero, 16);
  }
  dcr__checkpoint_free(&ck);
  dcr__checkpoint_free(&ck); /* freeing twice is harmless: free zeroes */
}

static void test_valid_edge(void **state) {
  (void)state;
  assert_int_equal(parse("{}", 0), DCR_OK);
  assert_int_equal(parse("  {\"__metadata__\":{}}  ", 0), DCR_OK);
  /* zero-length tensors may share an offset */
  assert_int_equal(parse("{\"a\":" T("F16", "[0]", 0, 0) ",\"b\":" T("F16", "[0]", 0, 0)
                         ",\"c\":" T("F16", "[1]", 0, 2) "}",
                         2),
                   DCR_OK);
  /* a name spelled with escapes is the decoded name */
  dcr__checkpoint ck;
  dcr_detail d;
  dcr_limits lim = limits();
  const char *json = "{\"a\\u00e9\\\"\":" T("U8", "[1]", 0, 1) "}";
  assert_int_equal(parse_with(json, strlen(json), 1, &lim, &ck, &d), DCR_OK);
  assert_string_equal(ck.tensors[0].name, "a\xc3\xa9\"");
  dcr__checkpoint_free(&ck);
}

/* ---- rejected: one test per rule ----------------------------------------- */

static void test_duplicate_name(void **state) {
  (void)state;
  dcr__checkpoint ck;
  dcr_detail d;
  dcr_limits lim = limits();
  const char *json = "{\"dup\":" T("U8", "[1]", 0, 1) ",\"dup\":" T("U8", "[1]", 1, 2) "}";
  assert_int_equal(parse_with(json, strlen(json), 2, &lim, &ck, &d), DCR_E_NAME);
  assert_string_equal(d.tensor_name, "dup");
  /* the same name spelled two ways is still the same name */
  assert_int_equal(
      parse("{\"a\":" T("U8", "[1]", 0, 1) ",\"\\u0061\":" T("U8", "[1]", 1, 2) "}", 2),
      DCR_E_NAME);
  /* a key repeated inside a tensor's object is a malformed tensor, not a name */
  assert_int_equal(parse("{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],"
                         "\"data_offsets\":[0,1]}}",
                         1),
                   DCR_E_CHECKPOINT);
}

static void test_unknown_dtype(void **state) {
  (void)state;
  dcr__checkpoint ck;
  dcr_detail d;
  dcr_limits lim = limits();
  const char *json = "{\"a\":" T("F31", "[16]", 0, 64) "}";
  assert_int_equal(parse_with(json, strlen(json), 64, &lim, &ck, &d), DCR_E_DTYPE);
  assert_string_equal(d.tensor_name, "a");
  assert_int_equal(parse("{\"a\":" T("bf16", "[1]", 0, 2) "}", 2), DCR_E_DTYPE);
  assert_int_equal(parse("{\"a\":" T("", "[1]", 0, 2) "}", 2), DCR_E_DTYPE);
  /* not a string at all: rule 2 */
  assert_int_equal(parse("{\"a\":{\"dtype\":9,\"shape\":[1],\"data_offsets\":[0,2]}}", 2),
                   DCR_E_CHECKPOINT);
}

static void test_shape_mismatch(void **state) {
  (void)state;
  dcr__checkpoint ck;
  dcr_detail d;
  dcr_limits lim = limits();
  const char *json = "{\"x\":" T("BF16", "[3, 4]", 0, 20) "}";
  assert_int_equal(parse_with(json, strlen(json), 20, &lim, &ck, &d), DCR_E_SHAPE);
  assert_string_equal(d.tensor_name, "x");
  assert_non_null(strstr(d.message, "[3, 4]"));
  assert_int_equal(parse("{\"x\":" T("F32", "[]", 0, 8) "}", 8), DCR_E_SHAPE);
  assert_int_equal(parse("{\"x\":" T("F32", "[0]", 0, 4) "}", 4), DCR_E_SHAPE);
}

static void test_shape_overflow(void **state) {
  (void)state;
  assert_int_equal(parse("{\"x\":" T("U8", "[4294967296, 4294967296, 2]", 0, 0) "}", 0),
                   DCR_E_SHAPE);
  /* 2^62 elements fit, 2^62 × 8 bytes do not */
  assert_int_equal(parse("{\"x\":" T("F64", "[4611686018427387904]", 0, 0) "}", 0), DCR_E_SHAPE);
}

static void test_rank_limit(void **state) {
  (void)state;
  dcr__checkpoint ck;
  dcr_detail d;
  dcr_limits lim = limits();
  lim.max_rank = 2;
  const char *json = "{\"x\":" T("U8", "[1, 1, 1]", 0, 1) "}";
  assert_int_equal(parse_with(json, strlen(json), 1, &lim, &ck, &d), DCR_E_LIMIT);
}

static void test_gap(void **state) {
  (void)state;
  assert_int_equal(parse("{\"a\":" T("F32", "[16]", 0, 64) ",\"b\":" T("U8", "[32]", 72, 104) "}",
                         104),
                   DCR_E_LAYOUT);
}

static void test_overlap(void **state) {
  (void)state;
  assert_int_equal(parse("{\"a\":" T("F32", "[16]", 0, 64) ",\"b\":" T("U8", "[32]", 60, 92) "}",
                         92),
                   DCR_E_LAYOUT);
  /* the same range twice */
  assert_int_equal(parse("{\"a\":" T("U8", "[4]", 0, 4) ",\"b\":" T("U8", "[4]", 0, 4) "}", 4),
                   DCR_E_LAYOUT);
}

static void test_not_from_zero(void **state) {
  (void)state;
  dcr__checkpoint ck;
  dcr_detail d;
  dcr_limits lim = limits();
  const char *json = "{\"a\":" T("F32", "[16]", 8, 72) ",\"b\":" T("U8", "[32]", 72, 104) "}";
  assert_int_equal(parse_with(json, strlen(json), 104, &lim, &ck, &d), DCR_E_LAYOUT);
  assert_string_equal(d.tensor_name, "a");
}

static void test_not_covering(void **state) {
  (void)state;
  const char *json = "{\"a\":" T("F32", "[16]", 0, 64) ",\"b\":" T("U8", "[32]", 64, 96) "}";
  assert_int_equal(parse(json, 96), DCR_OK);
  assert_int_equal(parse(json, 104), DCR_E_LAYOUT); /* trailing bytes */
  assert_int_equal(parse(json, 90), DCR_E_LAYOUT);  /* data region cut short */
  assert_int_equal(parse("{}", 1), DCR_E_LAYOUT);
}

static void test_extra_key(void **state) {
  (void)state;
  dcr__checkpoint ck;
  dcr_detail d;
  dcr_limits lim = limits();
  const char *json = "{\"a\":{\"dtype\":\"F32\",\"shape\":[16],\"data_offsets\":[0,64],\"x\":1}}";
  assert_int_equal(parse_with(json, strlen(json), 64, &lim, &ck, &d), DCR_E_CHECKPOINT);
  assert_string_equal(d.tensor_name, "a");
  assert_non_null(strstr(d.message, "\"x\""));
}

static void test_missing_key(void **state) {
  (void)state;
  assert_int_equal(parse("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,64]}}", 64),
                   DCR_E_CHECKPOINT);
  assert_int_equal(parse("{\"a\":{\"shape\":[16],\"data_offsets\":[0,64]}}", 64),
                   DCR_E_CHECKPOINT);
  assert_int_equal(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[16]}}", 64), DCR_E_CHECKPOINT);
  assert_int_equal(parse("{\"a\":[]}", 0), DCR_E_CHECKPOINT);
}

static void test_negative_number(void **state) {
  (void)state;
  assert_int_equal(parse("{\"a\":" T("F32", "[-16]", 0, 64) "}", 64), DCR_E_CHECKPOINT);
  assert_int_equal(parse("{\"a\":" T("U8", "[0]", -1, -1) "}", 0), DCR_E_CHECKPOINT);
  /* and other numbers that are not non-negative integers */
  assert_int_equal(parse("{\"a\":" T("F32", "[16.0]", 0, 64) "}", 64), DCR_E_CHECKPOINT);
  assert_int_equal(parse("{\"a\":" T("F32", "[true]", 0, 4) "}", 4), DCR_E_CHECKPOINT);
  assert_int_equal(parse("{\"a\":" T("U8", "[18446744073709551615]", 0, 0) "}", 0),
                   DCR_E_CHECKPOINT);
  assert_int_equal(parse("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,2]}}", 1),
                   DCR_E_CHECKPOINT);
  /* begin after end */
  assert_int_equal(parse("{\"a\":" T("U8", "[0]", 64, 0) ",\"b\":" T("F32", "[16]", 0, 64) "}", 64),
                   DCR_E_CHECKPOINT);
}

static void test_header_limit(void **state) {
  (void)state;
  dcr__checkpoint ck;
  dcr_detail d;
  dcr_limits lim = limits();
  const char *json = "{\"a\":" T("U8", "[1]", 0, 1) "}";
  lim.max_header_size = strlen(json) - 1;
  assert_int_equal(parse_with(json, strlen(json), 1, &lim, &ck, &d), DCR_E_LIMIT);
  lim.max_header_size = strlen(json);
  assert_int_equal(parse_with(json, strlen(json), 1, &lim, &ck, &d), DCR_OK);
  dcr__checkpoint_free(&ck);

  /* a declared length past the limit is refused before it is compared with anything */
  uint8_t prefix[16] = {0};
  dcr__put64(prefix, (uint64_t)1 << 40);
  lim = limits();
  dcr__detail_init(&d);
  assert_int_equal(dcr__safetensors_parse(prefix, sizeof prefix, 0, &lim, DCR_FORMAT_MINOR, &ck, &d), DCR_E_LIMIT);
  /* within the limit but not the prefix's length */
  dcr__put64(prefix, 7);
  dcr__detail_init(&d);
  assert_int_equal(dcr__safetensors_parse(prefix, sizeof prefix, 0, &lim, DCR_FORMAT_MINOR, &ck, &d),
                   DCR_E_CHECKPOINT);
  dcr__detail_init(&d);
  assert_int_equal(dcr__safetensors_parse(prefix, 7, 0, &lim, DCR_FORMAT_MINOR, &ck, &d), DCR_E_CHECKPOINT);
}

static void test_tensor_limit(void **state) {
  (void)state;
  dcr__checkpoint ck;
  dcr_detail d;
  dcr_limits lim = limits();
  lim.max_tensors = 1;
  const char *json = "{\"__metadata__\":{},\"a\":" T("U8", "[1]", 0, 1) "}";
  assert_int_equal(parse_with(json, strlen(json), 1, &lim, &ck, &d), DCR_OK);
  dcr__checkpoint_free(&ck);
  json = "{\"a\":" T("U8", "[1]", 0, 1) ",\"b\":" T("U8", "[1]", 1, 2) "}";
  assert_int_equal(parse_with(json, strlen(json), 2, &lim, &ck, &d), DCR_E_LIMIT);
}

static void test_bad_utf8_name(void **state) {
  (void)state;
  dcr__checkpoint ck;
  dcr_detail d;
  dcr_limits lim = limits();
  const char *json = "{\"ab\xff\":" T("U8", "[1]", 0, 1) "}";
  assert_int_equal(parse_with(json, strlen(json), 1, &lim, &ck, &d), DCR_E_NAME);
  assert_string_equal(d.tensor_name, "ab");
  assert_int_equal(d.offset, 8 + 4);
  assert_int_equal(parse("{\"\xc0\xaf\":" T("U8", "[1]", 0, 1) "}", 1), DCR_E_NAME); /* overlong */
  assert_int_equal(parse("{\"\xed\xa0\x80\":" T("U8", "[1]", 0, 1) "}", 1), DCR_E_NAME);
  assert_int_equal(parse("{\"a\xc3\":" T("U8", "[1]", 0, 1) "}", 1), DCR_E_NAME); /* cut short */
  assert_int_equal(parse("{\"\\ud800\":" T("U8", "[1]", 0, 1) "}", 1), DCR_E_NAME);
  assert_int_equal(parse("{\"a\\u0000b\":" T("U8", "[1]", 0, 1) "}", 1), DCR_E_NAME);
  /* bad bytes elsewhere make the header, not a name, invalid */
  assert_int_equal(parse("{\"__metadata__\":{\"k\":\"v\xff\"},\"a\":" T("U8", "[1]", 0, 1) "}", 1),
                   DCR_E_CHECKPOINT);
  assert_int_equal(parse("{\"a\":" T("U8\xff", "[1]", 0, 1) "}", 1), DCR_E_CHECKPOINT);
  assert_int_equal(parse("{\"a\":{\"dtype\":\"U8\",\"sh\xffpe\":[1],\"data_offsets\":[0,1]}}", 1),
                   DCR_E_CHECKPOINT);
  assert_int_equal(parse("{\"a\":" T("U8", "[1]", 0, 1) "} \xff", 1), DCR_E_CHECKPOINT);
}

static void test_empty_name(void **state) {
  (void)state;
  assert_int_equal(parse("{\"\":" T("F32", "[16]", 0, 64) "}", 64), DCR_E_NAME);
}

static void test_long_name(void **state) {
  (void)state;
  dcr__checkpoint ck;
  dcr_detail d;
  dcr_limits lim = limits();
  lim.max_name_length = 3;
  const char *json = "{\"abc\":" T("U8", "[1]", 0, 1) "}";
  assert_int_equal(parse_with(json, strlen(json), 1, &lim, &ck, &d), DCR_OK);
  dcr__checkpoint_free(&ck);
  json = "{\"abcd\":" T("U8", "[1]", 0, 1) "}";
  assert_int_equal(parse_with(json, strlen(json), 1, &lim, &ck, &d), DCR_E_LIMIT);
}

static void test_not_object(void **state) {
  (void)state;
  assert_int_equal(parse("[1,2,3]", 0), DCR_E_CHECKPOINT);
  assert_int_equal(parse("3", 0), DCR_E_CHECKPOINT);
  assert_int_equal(parse("", 0), DCR_E_CHECKPOINT);
  assert_int_equal(parse("{\"a\":" T("U8", "[1]", 0, 1) ",", 1), DCR_E_CHECKPOINT);
  assert_int_equal(parse("{\"a\":" T("U8", "[1]", 0, 1) "}{}", 1), DCR_E_CHECKPOINT);
  assert_int_equal(parse("{\"a\":" T("U8", "[1]", 0, 1) ",\"b\":null}", 1), DCR_E_CHECKPOINT);
  /* a raw NUL byte inside the header */
  dcr__checkpoint ck;
  dcr_detail d;
  dcr_limits lim = limits();
  assert_int_equal(parse_with("{}\0", 3, 0, &lim, &ck, &d), DCR_E_CHECKPOINT);
}

static void test_bad_metadata(void **state) {
  (void)state;
  assert_int_equal(parse("{\"__metadata__\":{\"k\":1}}", 0), DCR_E_CHECKPOINT);
  assert_int_equal(parse("{\"__metadata__\":[]}", 0), DCR_E_CHECKPOINT);
  assert_int_equal(parse("{\"__metadata__\":\"pt\"}", 0), DCR_E_CHECKPOINT);
}

/* ---- files ---------------------------------------------------------------- */

static char tmpdir[64];

static int setup_dir(void **state) {
  (void)state;
  const char *base = getenv("TMPDIR");
  snprintf(tmpdir, sizeof tmpdir, "%s/dcr-test-XXXXXX", base && strlen(base) < 40 ? base : "/tmp");
  return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_dir(void **state) {
  (void)state;
  DIR *dir = opendir(tmpdir);
  if (!dir) return -1;
  for (struct dirent *e; (e = readdir(dir));) {
    char p[384];
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
      remove(p);
    }
  }
  closedir(dir);
  return rmdir(tmpdir);
}

static void path(char *out, size_t cap, const char *name) {
  snprintf(out, cap, "%s/%s", tmpdir, name);
}

static void write_file(const char *p, const void *data, size_t n) {
  FILE *f = fopen(p, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

static uint8_t *read_file(const char *p, size_t *n) {
  FILE *f = fopen(p, "rb");
  assert_non_null(f);
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  long size = ftell(f);
  assert_true(size >= 0);
  rewind(f);
  uint8_t *data = malloc((size_t)size + 1);
  assert_non_null(data);
  assert_int_equal(fread(data, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  *n = (size_t)size;
  return data;
}

static int read_checkpoint(const char *p, int kind, dcr__checkpoint *ck, dcr_detail *d) {
  dcr_limits lim = limits();
  int fd = open(p, O_RDONLY);
  assert_true(fd >= 0);
  dcr__detail_init(d);
  int rc = dcr__checkpoint_read(fd, kind, &lim, DCR_FORMAT_MINOR, ck, d);
  close(fd);
  if (rc) print_message("    %s: %s\n", dcr_error_name(rc), d->message);
  return rc;
}

static void test_checkpoint_read(void **state) {
  (void)state;
  char p[128];
  dcr__checkpoint ck;
  dcr_detail d;
  path(p, sizeof p, "raw.bin");
  write_file(p, "hello, world", 12);
  assert_int_equal(read_checkpoint(p, DCR_KIND_RAW, &ck, &d), DCR_OK);
  assert_int_equal(ck.kind, DCR_KIND_RAW);
  assert_int_equal(ck.count, 1);
  assert_string_equal(ck.tensors[0].name, "raw");
  assert_int_equal(ck.tensors[0].desc.dtype, 2);
  assert_int_equal(ck.tensors[0].desc.rank, 1);
  assert_int_equal(ck.tensors[0].desc.dims[0], 12);
  assert_int_equal(ck.tensors[0].desc.byte_length, 12);
  assert_int_equal(ck.prefix_length, 0);
  assert_int_equal(ck.file_size, 12);
  dcr__checkpoint_free(&ck);

  /* not safetensors: its first 8 bytes make an absurd header length */
  assert_int_equal(read_checkpoint(p, DCR_KIND_SAFETENSORS, &ck, &d), DCR_E_LIMIT);
  /* fewer than 8 bytes */
  path(p, sizeof p, "short.safetensors");
  write_file(p, "\x02\0\0\0\0\0", 6);
  assert_int_equal(read_checkpoint(p, DCR_KIND_SAFETENSORS, &ck, &d), DCR_E_CHECKPOINT);

  /* a header that runs past the end of the file, and then one that fits */
  const char *json = "{\"a\":" T("U8", "[4]", 0, 4) "}";
  size_t n = strlen(json);
  uint8_t file[128];
  dcr__put64(file, n + 5);
  memcpy(file + 8, json, n);
  memcpy(file + 8 + n, "data", 4);
  path(p, sizeof p, "cut.safetensors");
  write_file(p, file, 8 + n + 4);
  assert_int_equal(read_checkpoint(p, DCR_KIND_SAFETENSORS, &ck, &d), DCR_E_CHECKPOINT);
  assert_non_null(strstr(d.message, "exceeds file size"));
  dcr__put64(file, n);
  write_file(p, file, 8 + n + 4);
  assert_int_equal(read_checkpoint(p, DCR_KIND_SAFETENSORS, &ck, &d), DCR_OK);
  assert_int_equal(ck.count, 1);
  assert_int_equal(ck.file_size, 8 + n + 4);
  dcr__checkpoint_free(&ck);
  write_file(p, file, 8 + n + 3); /* data cut short */
  assert_int_equal(read_checkpoint(p, DCR_KIND_SAFETENSORS, &ck, &d), DCR_E_LAYOUT);
}

/* ---- the synthetic generator --------------------------------------------- */

static int same_file(const char *a, const char *b) {
  size_t na, nb;
  uint8_t *x = read_file(a, &na), *y = read_file(b, &nb);
  int same = na == nb && !memcmp(x, y, na);
  free(x);
  free(y);
  return same;
}

/* Checks that both files parse, describe the same tensors, and differ in exactly
 * the fraction of elements that cli_synth_files reported. */
static void check_pair(const char *base, const char *target, unsigned es, double rate) {
  dcr__checkpoint b, t;
  dcr_detail d;
  assert_int_equal(read_checkpoint(base, DCR_KIND_SAFETENSORS, &b, &d), DCR_OK);
  assert_int_equal(read_checkpoint(target, DCR_KIND_SAFETENSORS, &t, &d), DCR_OK);
  assert_true(b.count >= 10);
  assert_int_equal(b.count, t.count);
  assert_int_equal(b.prefix_length % 8, 0);
  assert_int_equal(b.prefix_length, t.prefix_length);
  assert_memory_equal(b.prefix, t.prefix, b.prefix_length);
  assert_non_null(strstr((const char *)b.prefix + 8, "\"__metadata__\":{\"format\":\"pt\"}"));
  for (size_t i = 0; i < b.count; i++) {
    if (i) assert_true(strcmp(b.tensors[i - 1].name, b.tensors[i].name) < 0);
    assert_int_equal(dcr_dtype_size(b.tensors[i].desc.dtype), es);
  }

  size_t nb, nt;
  uint8_t *x = read_file(base, &nb), *y = read_file(target, &nt);
  assert_int_equal(nb, b.file_size);
  assert_int_equal(nt, nb);
  uint64_t elements = (nb - b.prefix_length) / es, changed = 0, one_ulp = 0;
  for (uint64_t i = 0; i < elements; i++) {
    const uint8_t *p = x + b.prefix_length + i * es, *q = y + b.prefix_length + i * es;
    if (memcmp(p, q, es)) {
      changed++;
      uint64_t u = 0, v = 0;
      for (unsigned k = 0; k < es; k++) u |= (uint64_t)p[k] << 8 * k, v |= (uint64_t)q[k] << 8 * k;
      one_ulp += u - v == 1 || v - u == 1;
    }
  }
  free(x);
  free(y);
  assert_true(fabs((double)changed / (double)elements - rate) <= 1e-12);
  print_message("    %.4f of the changes are 1 ulp\n",
                changed ? (double)one_ulp / (double)changed : 1.0);
  if (changed) assert_true(one_ulp * 10 >= changed * 7); /* mostly ±1 ulp */
  dcr__checkpoint_free(&b);
  dcr__checkpoint_free(&t);
}

static void test_synth(void **state) {
  (void)state;
  char base[128], target[128], base2[128], target2[128];
  path(base, sizeof base, "base.safetensors");
  path(target, sizeof target, "target.safetensors");
  path(base2, sizeof base2, "base2.safetensors");
  path(target2, sizeof target2, "target2.safetensors");

  dcr_synth_options o;
  dcr_synth_options_default(&o);
  assert_int_equal(o.size, 64u << 20);
  assert_int_equal(o.dtype, 9);
  o.size = 4u << 20;
  double rate = -1;
  assert_int_equal(cli_synth_files(&o, base, target, 1, &rate), CLI_OK);
  print_message("    4 MiB BF16 at 0.01: achieved %.5f\n", rate);
  assert_true(rate >= 0.008 && rate <= 0.012);
  check_pair(base, target, 2, rate);

  /* the same seed gives the same bytes; another seed does not */
  double again;
  assert_int_equal(cli_synth_files(&o, base2, target2, 1, &again), CLI_OK);
  assert_true(again == rate);
  assert_true(same_file(base, base2));
  assert_true(same_file(target, target2));
  o.seed = 2;
  assert_int_equal(cli_synth_files(&o, base2, target2, 1, &again), CLI_OK);
  assert_false(same_file(base, base2));
}

static void test_synth_rates(void **state) {
  (void)state;
  char base[128], target[128];
  path(base, sizeof base, "b.safetensors");
  path(target, sizeof target, "t.safetensors");
  dcr_synth_options o;
  dcr_synth_options_default(&o);
  o.size = 1u << 20;
  double rate;

  o.rate = 0;
  assert_int_equal(cli_synth_files(&o, base, target, 1, &rate), CLI_OK);
  assert_true(rate == 0.0);
  assert_true(same_file(base, target));

  o.rate = 1;
  o.dtype = 8; /* F16 */
  assert_int_equal(cli_synth_files(&o, base, target, 1, &rate), CLI_OK);
  assert_true(rate == 1.0);
  check_pair(base, target, 2, rate);

  o.rate = 0.05;
  o.dtype = 12; /* F32 */
  o.layers = 3;
  assert_int_equal(cli_synth_files(&o, base, target, 1, &rate), CLI_OK);
  assert_true(rate >= 0.04 && rate <= 0.06);
  check_pair(base, target, 4, rate);

  o.rate = 0.3;
  o.dtype = 9;
  o.layers = 0;
  assert_int_equal(cli_synth_files(&o, base, target, 1, &rate), CLI_OK);
  assert_true(rate >= 0.24 && rate <= 0.36);

  /* refused options and unwritable paths */
  o.dtype = 13;
  assert_int_equal(cli_synth_files(&o, base, target, 1, &rate), CLI_IO);
  o.dtype = 9;
  o.rate = 1.5;
  assert_int_equal(cli_synth_files(&o, base, target, 1, &rate), CLI_IO);
  o.rate = 0.01;
  char missing[160];
  snprintf(missing, sizeof missing, "%s/no/such/dir/t.safetensors", tmpdir);
  remove(base);
  assert_int_equal(cli_synth_files(&o, base, missing, 1, &rate), CLI_IO);
  assert_int_equal(access(base, F_OK), -1); /* nothing was written: the base was not committed */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_valid),
      cmocka_unit_test(test_valid_edge),
      cmocka_unit_test(test_duplicate_name),
      cmocka_unit_test(test_unknown_dtype),
      cmocka_unit_test(test_shape_mismatch),
      cmocka_unit_test(test_shape_overflow),
      cmocka_unit_test(test_rank_limit),
      cmocka_unit_test(test_gap),
      cmocka_unit_test(test_overlap),
      cmocka_unit_test(test_not_from_zero),
      cmocka_unit_test(test_not_covering),
      cmocka_unit_test(test_extra_key),
      cmocka_unit_test(test_missing_key),
      cmocka_unit_test(test_negative_number),
      cmocka_unit_test(test_header_limit),
      cmocka_unit_test(test_tensor_limit),
      cmocka_unit_test(test_bad_utf8_name),
      cmocka_unit_test(test_empty_name),
      cmocka_unit_test(test_long_name),
      cmocka_unit_test(test_not_object),
      cmocka_unit_test(test_bad_metadata),
      cmocka_unit_test(test_checkpoint_read),
      cmocka_unit_test(test_synth),
      cmocka_unit_test(test_synth_rates),
  };
  return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
