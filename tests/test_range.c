/*
 * test_range.c - range readers (SPEC.md §21): the HTTP response rules of
 * net/response.c one by one, URLs as they are shown, and the random-access
 * profile over a file with tensor selections (dcr_reader_select_tensors), against
 * the v1 model vector.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../net/remote.h"

#define V1 "testvectors/v1/"

static dcr__response parse(const char *const *lines) {
  dcr__response r;
  memset(&r, 0, sizeof r);
  for (; *lines; lines++) dcr__response_header(&r, *lines, strlen(*lines));
  return r;
}

static int judge(const char *const *lines, dcr__object *obj, int first, uint64_t offset,
                 uint64_t length, int *code) {
  dcr__response r = parse(lines);
  dcr_detail d;
  return dcr__response_judge(&r, obj, first, offset, length, code, &d);
}

static void test_response_rules(void **state) {
  (void)state;
  dcr__object obj;
  int code;
  memset(&obj, 0, sizeof obj);
  /* the first answer, to a suffix: it must end the object, and tells its size */
  const char *first[] = {"HTTP/1.1 206 Partial Content\r\n", "Content-Range: bytes 900-999/1000\r\n",
                         "ETag: \"v1\"\r\n", "Content-Length: 100\r\n", NULL};
  assert_int_equal(judge(first, &obj, 1, 0, 0, &code), DCR__RESP_PART);
  assert_int_equal(obj.size, 1000);
  assert_string_equal(obj.etag, "\"v1\"");
  /* later answers: exactly the range asked, the same object */
  const char *part[] = {"HTTP/2 206\r\n", "content-range: bytes 0-99/1000\r\n", "etag: \"v1\"\r\n", NULL};
  assert_int_equal(judge(part, &obj, 0, 0, 100, &code), DCR__RESP_PART);
  assert_int_equal(judge(part, &obj, 0, 1, 100, &code), DCR__RESP_FAIL);
  assert_int_equal(code, DCR_E_FETCH);
  const char *other[] = {"HTTP/1.1 206 x\r\n", "Content-Range: bytes 0-99/1000\r\n", "ETag: \"v2\"\r\n", NULL};
  assert_int_equal(judge(other, &obj, 0, 0, 100, &code), DCR__RESP_FAIL);
  assert_int_equal(code, DCR_E_CHANGED);
  const char *grown[] = {"HTTP/1.1 206 x\r\n", "Content-Range: bytes 0-99/1001\r\n", "ETag: \"v1\"\r\n", NULL};
  assert_int_equal(judge(grown, &obj, 0, 0, 100, &code), DCR__RESP_FAIL);
  assert_int_equal(code, DCR_E_CHANGED);
  const char *no_tag[] = {"HTTP/1.1 206 x\r\n", "Content-Range: bytes 0-99/1000\r\n", NULL};
  assert_int_equal(judge(no_tag, &obj, 0, 0, 100, &code), DCR__RESP_FAIL);
  assert_int_equal(code, DCR_E_CHANGED);
  const char *gone[] = {"HTTP/1.1 412 Precondition Failed\r\n", NULL};
  assert_int_equal(judge(gone, &obj, 0, 0, 100, &code), DCR__RESP_FAIL);
  assert_int_equal(code, DCR_E_CHANGED);
  /* a server that ignores Range: the whole object, of the same size and tag */
  const char *whole[] = {"HTTP/1.1 200 OK\r\n", "Content-Length: 1000\r\n", "ETag: \"v1\"\r\n", NULL};
  assert_int_equal(judge(whole, &obj, 0, 0, 100, &code), DCR__RESP_WHOLE);
  const char *chunked[] = {"HTTP/1.1 200 OK\r\n", "ETag: \"v1\"\r\n", NULL};
  assert_int_equal(judge(chunked, &obj, 0, 0, 100, &code), DCR__RESP_FAIL);
  /* transient and final statuses */
  const char *busy[] = {"HTTP/1.1 503 Service Unavailable\r\n", NULL};
  assert_int_equal(judge(busy, &obj, 0, 0, 100, &code), DCR__RESP_RETRY);
  const char *slow[] = {"HTTP/1.1 429 Too Many Requests\r\n", NULL};
  assert_int_equal(judge(slow, &obj, 0, 0, 100, &code), DCR__RESP_RETRY);
  const char *denied[] = {"HTTP/1.1 403 Forbidden\r\n", NULL};
  assert_int_equal(judge(denied, &obj, 0, 0, 100, &code), DCR__RESP_FAIL);
  assert_int_equal(code, DCR_E_FETCH);
  /* redirects are followed by the fetcher, to their Location (R-RAN-12) */
  const char *found[] = {"HTTP/1.1 302 Found\r\n", "Location: /b.dcr\r\n", NULL};
  assert_int_equal(judge(found, &obj, 0, 0, 100, &code), DCR__RESP_REDIRECT);
  const char *nowhere[] = {"HTTP/1.1 307 Temporary Redirect\r\n", NULL};
  assert_int_equal(judge(nowhere, &obj, 0, 0, 100, &code), DCR__RESP_FAIL);
  assert_int_equal(code, DCR_E_FETCH);
  static char far[DCR__LOCATION_MAX + 32] = "Location: http://h/";
  memset(far + strlen(far), 'a', DCR__LOCATION_MAX);
  const char *too_far[] = {"HTTP/1.1 301 Moved Permanently\r\n", far, NULL};
  assert_int_equal(judge(too_far, &obj, 0, 0, 100, &code), DCR__RESP_FAIL);
  /* a redirect's headers do not count: the last status line starts over */
  const char *moved[] = {"HTTP/1.1 302 Found\r\n", "ETag: \"v9\"\r\n", "HTTP/1.1 206 x\r\n",
                         "Content-Range: bytes 0-99/1000\r\n", "ETag: \"v1\"\r\n", NULL};
  assert_int_equal(judge(moved, &obj, 0, 0, 100, &code), DCR__RESP_PART);
}

static void test_response_malformed(void **state) {
  (void)state;
  dcr__object obj = {.size = 1000, .etag = "\"v1\""};
  int code;
  static const char *const ranges[] = {
      "Content-Range: bytes 0-99/999\r\n",   /* past the end: total 999 < 1000 is a change, */
      "Content-Range: bytes 99-0/1000\r\n",  /* backwards */
      "Content-Range: bytes 0-99/*\r\n",     /* no size */
      "Content-Range: bytes=0-99/1000\r\n",  /* not the syntax */
      "Content-Range: bytes 0-99/10000000000000000000000\r\n",
      "Content-Range: bytes -1-99/1000\r\n",
      "Content-Range: bytes 0-1000/1000\r\n",
  };
  for (size_t i = 0; i < sizeof ranges / sizeof *ranges; i++) {
    const char *lines[] = {"HTTP/1.1 206 x\r\n", ranges[i], "ETag: \"v1\"\r\n", NULL};
    assert_int_equal(judge(lines, &obj, 0, 0, 100, &code), DCR__RESP_FAIL);
  }
  const char *lengths[] = {"HTTP/1.1 206 x\r\n", "Content-Range: bytes 0-99/1000\r\n", "ETag: \"v1\"\r\n",
                           "Content-Length: 99\r\n", NULL};
  assert_int_equal(judge(lengths, &obj, 0, 0, 100, &code), DCR__RESP_FAIL);
  const char *status[] = {"HTTP/1.1 2060 x\r\n", NULL};
  assert_int_equal(judge(status, &obj, 0, 0, 100, &code), DCR__RESP_FAIL);
  char tag[300] = "ETag: \"";
  memset(tag + 7, 'a', 250);
  const char *long_tag[] = {"HTTP/1.1 206 x\r\n", "Content-Range: bytes 0-99/1000\r\n", tag, NULL};
  assert_int_equal(judge(long_tag, &obj, 0, 0, 100, &code), DCR__RESP_FAIL);
}

static void test_url_shown(void **state) {
  (void)state;
  char out[256];
  dcr__url_shown("https://user:pw@bucket.s3.amazonaws.com/run/7.dcr?X-Amz-Signature=abc#f", out, sizeof out);
  assert_string_equal(out, "https://bucket.s3.amazonaws.com/run/7.dcr?...");
  dcr__url_shown("http://host:8080/a/b.dcr", out, sizeof out);
  assert_string_equal(out, "http://host:8080/a/b.dcr");
  dcr__url_shown("http://host?token=x", out, sizeof out);
  assert_string_equal(out, "http://host?...");
}

static void test_select(void **state) {
  (void)state;
  dcr_reader *r;
  dcr_detail d;
  uint64_t n = 0;
  assert_int_equal(dcr_reader_open_file_ranged(&r, V1 "valid/model.dcr", NULL, &d), DCR_OK);
  const char *two[] = {"a", "[bd]"}, *none[] = {"a", "zz*"};
  assert_int_equal(dcr_reader_select_tensors(r, two, 2, &n, &d), DCR_OK);
  assert_int_equal(n, 3);
  /* a pattern that matches nothing is an error and changes nothing */
  assert_int_equal(dcr_reader_select_tensors(r, none, 2, &n, &d), DCR_E_ARGUMENT);
  assert_non_null(strstr(d.message, "zz*"));
  /* calls that make a whole target refuse a selection */
  assert_int_equal(dcr_apply(r, V1 "ckpt/model-base.safetensors", NULL, NULL, &d), DCR_E_ARGUMENT);
  assert_int_equal(dcr_check_target(r, V1 "ckpt/model-target.safetensors", NULL, &d), DCR_E_ARGUMENT);
  assert_int_equal(dcr_reader_verify(r, &d), DCR_OK);
  assert_int_equal(dcr_reader_select_tensors(r, NULL, 0, &n, &d), DCR_OK);
  assert_int_equal(n, 5);
  assert_int_equal(dcr_apply(r, V1 "ckpt/model-base.safetensors", NULL, NULL, &d), DCR_OK);
  dcr_reader_free(r);
}

/* dcr_patch_memory with a selection: one tensor's buffer, patched and checked
 * by its own hashes; a wrong base byte in it is found at FULL. */
typedef struct {
  uint8_t *a;
  size_t a_size;
  int asked_other;
} one_tensor;

static int resolve_a(void *opaque, uint64_t entry, const dcr_tensor_info *t, dcr_buffer *b) {
  (void)entry;
  one_tensor *o = opaque;
  if (t->name_length != 1 || t->name[0] != 'a') return o->asked_other = 1, -1;
  b->data = o->a;
  b->size = o->a_size;
  return 0;
}

static uint8_t *tensor_bytes(const char *path, const char *name, size_t *size) {
  dcr_checkpoint *ck;
  assert_int_equal(dcr_checkpoint_open(&ck, path, DCR_KIND_SAFETENSORS, NULL, NULL), DCR_OK);
  dcr_checkpoint_summary info;
  dcr_checkpoint_info(ck, &info);
  uint8_t *p = NULL;
  for (uint64_t i = 0; i < info.tensor_count; i++) {
    dcr_tensor_side s;
    const char *n;
    size_t nl;
    dcr_checkpoint_tensor(ck, i, &s, &n, &nl);
    if (nl != strlen(name) || memcmp(n, name, nl)) continue;
    FILE *f = fopen(path, "rb");
    p = malloc(s.byte_length);
    assert_true(f && p && !fseek(f, (long)(info.prefix_length + s.offset), SEEK_SET) &&
                fread(p, 1, s.byte_length, f) == s.byte_length);
    fclose(f);
    *size = s.byte_length;
  }
  dcr_checkpoint_free(ck);
  assert_non_null(p);
  return p;
}

static void test_patch_selected(void **state) {
  (void)state;
  for (int level = DCR_VERIFY_FULL; level <= DCR_VERIFY_NONE; level++) {
    dcr_reader *r;
    dcr_patch *p;
    dcr_detail d;
    size_t n, m;
    one_tensor o = {tensor_bytes(V1 "ckpt/model-base.safetensors", "a", &n), n, 0};
    uint8_t *want = tensor_bytes(V1 "ckpt/model-target.safetensors", "a", &m);
    const char *a[] = {"a"};
    assert_int_equal(dcr_reader_open_file_ranged(&r, V1 "valid/model.dcr", NULL, &d), DCR_OK);
    assert_int_equal(dcr_reader_select_tensors(r, a, 1, NULL, &d), DCR_OK);
    assert_int_equal(dcr_patch_create(&p, r, &d), DCR_OK);
    assert_int_equal(dcr_patch_set_verify(p, level), DCR_OK);
    if (level == DCR_VERIFY_FULL) { /* a byte the bundle does not change, wrong */
      o.a[n - 1] ^= 1;
      assert_int_equal(dcr_patch_memory(p, resolve_a, &o, &d), DCR_E_BASE_MISMATCH);
      o.a[n - 1] ^= 1;
    }
    assert_int_equal(dcr_patch_memory(p, resolve_a, &o, &d), DCR_OK);
    assert_false(o.asked_other);
    assert_int_equal(n, m);
    assert_memory_equal(o.a, want, n);
    dcr_patch_free(p);
    dcr_reader_free(r);
    free(o.a), free(want);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_response_rules),   cmocka_unit_test(test_response_malformed),
      cmocka_unit_test(test_url_shown),        cmocka_unit_test(test_select),
      cmocka_unit_test(test_patch_selected),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
