/*
 * test_checkpoint.c - the public checkpoint reader (dcr_checkpoint_*): SPEC.md §2
 * (kinds, strict parsing) and §7 (tensor hashes, state ids).
 *
 * The golden vectors give the state ids to expect: every valid vector that ships
 * its base and target names both in IDEN, so the ids computed from the files must
 * be the ones the bundle carries. Vectors are found in $DCR_TESTVECTORS, else
 * testvectors/ (run from the repository root, as `make unit` does).
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "dcr.h"

static char vectors[1024]; /* testvectors/ */
static char tmpdir[256];

static void hex(const uint8_t *p, char out[33]) {
  for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", p[i]);
}

static void assert_same_id(const uint8_t *got, const uint8_t *want, const char *what) {
  char g[33], w[33];
  hex(got, g), hex(want, w);
  if (memcmp(got, want, 16)) fail_msg("%s: state id %s, expected %s", what, g, w);
}

static int state_of(const char *path, int kind, unsigned threads, uint8_t out[16]) {
  dcr_checkpoint *ck;
  dcr_detail d;
  int rc = dcr_checkpoint_open(&ck, path, kind, NULL, &d);
  if (!rc) rc = dcr_checkpoint_state_id(ck, threads, out, &d);
  if (rc) print_error("%s: %s: %s\n", path, dcr_error_name(rc), d.message);
  dcr_checkpoint_free(ck);
  return rc;
}

/* §7: the target file's tensors and hashes are the manifest's target entries. */
static void check_tensors(const char *path, dcr_reader *r, const dcr_bundle_info *bi) {
  dcr_checkpoint *ck;
  uint8_t id[16];
  dcr_checkpoint_summary ci;
  assert_int_equal(dcr_checkpoint_open(&ck, path, bi->kind, NULL, NULL), DCR_OK);
  dcr_checkpoint_info(ck, &ci);
  assert_int_equal(ci.kind, bi->kind);
  assert_int_equal(ci.prefix_length, bi->prefix_length);
  assert_int_equal(ci.file_size, bi->target_size);
  assert_int_equal(dcr_checkpoint_state_id(ck, 2, id, NULL), DCR_OK);
  uint64_t j = 0;
  for (uint64_t i = 0; i < bi->entry_count; i++) {
    dcr_tensor_info e;
    dcr_reader_tensor(r, i, &e);
    if (!e.target.present) continue;
    assert_true(j < ci.tensor_count);
    dcr_tensor_side s;
    const char *name;
    size_t n;
    dcr_checkpoint_tensor(ck, j++, &s, &name, &n);
    assert_int_equal(n, e.name_length);
    assert_memory_equal(name, e.name, n);
    assert_int_equal(s.present, 1);
    assert_int_equal(s.dtype, e.target.dtype);
    assert_int_equal(s.rank, e.target.rank);
    assert_int_equal(s.byte_length, e.target.byte_length);
    assert_int_equal(s.offset, e.target.offset);
    if (s.rank) assert_memory_equal(s.dims, e.target.dims, s.rank * sizeof *s.dims);
    assert_memory_equal(s.hash, e.target.hash, 16);
  }
  assert_int_equal(j, ci.tensor_count);
  dcr_checkpoint_free(ck);
}

/* Every valid vector with both files: the target's state id is target_state, the
 * base's is base_state (or target_state, where the "base" given is the target
 * already, §10.2); whatever the number of threads. */
static void test_vector_state_ids(void **state) {
  (void)state;
  char path[4096], root[2048], base[4096], target[4096];
  snprintf(path, sizeof path, "%s/index.json", vectors);
  json_error_t e;
  json_t *index = json_load_file(path, 0, &e);
  if (!index) fail_msg("cannot load %s: %s", path, e.text);
  snprintf(root, sizeof root, "%s/%s", vectors, json_string_value(json_object_get(index, "root")));
  const json_t *all = json_object_get(index, "vectors");
  size_t checked = 0, raw = 0, own_target = 0;
  for (size_t i = 0; i < json_array_size(all); i++) {
    const json_t *v = json_array_get(all, i), *f = json_object_get(v, "files");
    if (strcmp(json_string_value(json_object_get(v, "result")), "valid") ||
        !json_object_get(f, "base") || !json_object_get(f, "target"))
      continue;
    const char *id = json_string_value(json_object_get(v, "id"));
#define FILE_OF(role) json_string_value(json_object_get(json_object_get(f, role), "path"))
    snprintf(path, sizeof path, "%s/%s", root, FILE_OF("bundle"));
    snprintf(base, sizeof base, "%s/%s", root, FILE_OF("base"));
    snprintf(target, sizeof target, "%s/%s", root, FILE_OF("target"));
#undef FILE_OF
    dcr_reader *r;
    dcr_bundle_info bi;
    assert_int_equal(dcr_reader_open_file(&r, path, NULL, NULL), DCR_OK);
    dcr_reader_info(r, &bi);
    uint8_t b1[16], b4[16], t1[16];
    assert_int_equal(state_of(base, bi.kind, 1, b1), DCR_OK);
    assert_int_equal(state_of(base, bi.kind, 4, b4), DCR_OK);
    assert_int_equal(state_of(target, bi.kind, 1, t1), DCR_OK);
    assert_same_id(b4, b1, id);
    assert_same_id(t1, bi.target_state, id);
    if (memcmp(b1, bi.base_state, 16)) {
      assert_same_id(b1, bi.target_state, id); /* the base given is the target */
      own_target++;
    }
    check_tensors(target, r, &bi);
    raw += bi.kind == DCR_KIND_RAW;
    checked++;
    dcr_reader_free(r);
  }
  json_decref(index);
  assert_true(checked >= 30);
  assert_true(raw >= 1);
  assert_int_equal(own_target, 2); /* apply-to-own-target, apply-already-applied */
}

/* ---- files made here --------------------------------------------------------- */

/* Writes n bytes to a file `name` in the test's folder; its path goes to path. */
static void make_file(char path[512], const char *name, const void *data, size_t n) {
  snprintf(path, 512, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

/* §7 from first principles: XXH3-128 over the 16-byte canonical digests of the
 * 4096-byte pieces. */
static void tensor_hash(const uint8_t *p, size_t n, uint8_t out[16]) {
  size_t pieces = (n + 4095) / 4096;
  uint8_t *digests = malloc(16 * pieces + 1);
  assert_non_null(digests);
  for (size_t i = 0; i < pieces; i++) {
    size_t len = n - 4096 * i < 4096 ? n - 4096 * i : 4096;
    XXH128_canonicalFromHash((XXH128_canonical_t *)(digests + 16 * i),
                             XXH3_128bits(p + 4096 * i, len));
  }
  XXH128_canonicalFromHash((XXH128_canonical_t *)out, XXH3_128bits(digests, 16 * pieces));
  free(digests);
}

/* §2: raw is one U8 tensor "raw" of the file's size; several ranges are hashed in
 * parallel (the file spans more than two 4 MiB ranges) and give the §7 hash. */
static void test_raw(void **state) {
  (void)state;
  char path[512];
  size_t n = (9u << 20) + 123;
  uint8_t *data = malloc(n);
  assert_non_null(data);
  for (size_t i = 0; i < n; i++) data[i] = (uint8_t)(i * 2654435761u >> 13);
  make_file(path, "raw.bin", data, n);

  uint8_t hash[16], want[16], buf[2 + 3 + 2 + 8 + 8 + 16];
  tensor_hash(data, n, hash);
  memcpy(buf, "\x03\x00raw\x02\x01", 7); /* u16 name length, name, dtype U8 = 2, rank 1 */
  for (int i = 0; i < 8; i++) buf[7 + i] = buf[15 + i] = (uint8_t)((uint64_t)n >> (8 * i));
  memcpy(buf + 23, hash, 16);
  XXH128_canonicalFromHash((XXH128_canonical_t *)want, XXH3_128bits(buf, sizeof buf));

  dcr_checkpoint *ck;
  dcr_checkpoint_summary info;
  dcr_tensor_side s;
  const char *name;
  size_t name_length;
  uint8_t id[16], again[16];
  assert_int_equal(dcr_checkpoint_open(&ck, path, DCR_KIND_RAW, NULL, NULL), DCR_OK);
  dcr_checkpoint_info(ck, &info);
  assert_int_equal(info.kind, DCR_KIND_RAW);
  assert_int_equal(info.file_size, n);
  assert_int_equal(info.prefix_length, 0);
  assert_int_equal(info.tensor_count, 1);
  dcr_checkpoint_tensor(ck, 0, &s, &name, &name_length);
  assert_int_equal(name_length, 3);
  assert_memory_equal(name, "raw", 3);
  assert_int_equal(s.dtype, dcr_dtype_from_name("U8", 2));
  assert_int_equal(s.rank, 1);
  assert_int_equal(s.dims[0], n);
  assert_int_equal(s.byte_length, n);
  assert_int_equal(s.offset, 0);
  static const uint8_t zeros[16];
  assert_memory_equal(s.hash, zeros, 16); /* not hashed yet */
  assert_int_equal(dcr_checkpoint_state_id(ck, 3, id, NULL), DCR_OK);
  assert_same_id(id, want, "raw, 3 threads");
  dcr_checkpoint_tensor(ck, 0, &s, &name, &name_length);
  assert_memory_equal(s.hash, hash, 16);
  assert_int_equal(dcr_checkpoint_state_id(ck, 1, again, NULL), DCR_OK); /* kept */
  assert_same_id(again, want, "raw, again");
  dcr_checkpoint_free(ck);
  assert_int_equal(state_of(path, DCR_KIND_RAW, 1, id), DCR_OK);
  assert_same_id(id, want, "raw, 1 thread");
  free(data);
  remove(path);
}

/* §7: an empty tensor's hash is XXH3-128 of nothing. */
static void test_empty_raw(void **state) {
  (void)state;
  char path[512];
  make_file(path, "empty.bin", "", 0);
  dcr_checkpoint *ck;
  dcr_tensor_side s;
  const char *name;
  size_t n;
  uint8_t id[16];
  char h[33];
  assert_int_equal(dcr_checkpoint_open(&ck, path, DCR_KIND_RAW, NULL, NULL), DCR_OK);
  assert_int_equal(dcr_checkpoint_state_id(ck, 0, id, NULL), DCR_OK);
  dcr_checkpoint_tensor(ck, 0, &s, &name, &n);
  hex(s.hash, h);
  assert_string_equal(h, "99aa06d3014798d86001c324468d497f");
  dcr_checkpoint_free(ck);
  dcr_detail d;
  assert_int_equal(dcr_checkpoint_open(&ck, path, DCR_KIND_SAFETENSORS, NULL, &d),
                   DCR_E_CHECKPOINT); /* §2.1 rule 1: fewer than 8 bytes */
  assert_null(ck);
  remove(path);
}

/* §2.1: a file that is not safetensors is DCR_E_CHECKPOINT, with the file named
 * (here a header length that fits, then a header that is not JSON). */
static void test_not_safetensors(void **state) {
  (void)state;
  char path[512];
  const char text[] = "\x10\0\0\0\0\0\0\0not JSON, text!\n";
  make_file(path, "text.bin", text, sizeof text - 1);
  dcr_checkpoint *ck = (dcr_checkpoint *)1;
  dcr_detail d;
  assert_int_equal(dcr_checkpoint_open(&ck, path, DCR_KIND_SAFETENSORS, NULL, &d),
                   DCR_E_CHECKPOINT);
  assert_null(ck);
  assert_int_equal(d.code, DCR_E_CHECKPOINT);
  assert_string_equal(d.file, path);
  assert_true(d.message[0] != '\0');
  /* the same bytes are a fine raw checkpoint */
  uint8_t id[16];
  assert_int_equal(state_of(path, DCR_KIND_RAW, 1, id), DCR_OK);
  remove(path);
}

/* A safetensors file with tensors out of name order in its header: the reader
 * lists them by name (§7) with their data-region offsets, and the state id does not
 * depend on the layout. */
static void test_name_order(void **state) {
  (void)state;
  static const char h1[] = "{\"b\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]},"
                           "\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[3,5]}}";
  static const char h2[] = "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
                           "\"b\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[2,5]}}  ";
  char p1[512], p2[512];
  uint8_t f[256];
  size_t n = sizeof h1 - 1;
  memset(f, 0, 8), f[0] = (uint8_t)n;
  memcpy(f + 8, h1, n), memcpy(f + 8 + n, "BBBAA", 5);
  make_file(p1, "ba.safetensors", f, 8 + n + 5);
  n = sizeof h2 - 1;
  memset(f, 0, 8), f[0] = (uint8_t)n;
  memcpy(f + 8, h2, n), memcpy(f + 8 + n, "AABBB", 5);
  make_file(p2, "ab.safetensors", f, 8 + n + 5);

  dcr_checkpoint *ck;
  dcr_tensor_side s;
  const char *name;
  size_t len;
  dcr_checkpoint_summary info;
  assert_int_equal(dcr_checkpoint_open(&ck, p1, DCR_KIND_SAFETENSORS, NULL, NULL), DCR_OK);
  dcr_checkpoint_info(ck, &info);
  assert_int_equal(info.kind, DCR_KIND_SAFETENSORS);
  assert_int_equal(info.tensor_count, 2);
  assert_int_equal(info.prefix_length, 8 + sizeof h1 - 1);
  assert_int_equal(info.file_size, info.prefix_length + 5);
  dcr_checkpoint_tensor(ck, 0, &s, &name, &len);
  assert_true(len == 1 && name[0] == 'a' && s.offset == 3 && s.byte_length == 2);
  dcr_checkpoint_tensor(ck, 1, &s, &name, &len);
  assert_true(len == 1 && name[0] == 'b' && s.offset == 0 && s.byte_length == 3);
  dcr_checkpoint_free(ck);
  uint8_t id1[16], id2[16];
  assert_int_equal(state_of(p1, DCR_KIND_SAFETENSORS, 1, id1), DCR_OK);
  assert_int_equal(state_of(p2, DCR_KIND_SAFETENSORS, 2, id2), DCR_OK);
  assert_same_id(id1, id2, "same tensors, other layout");
  remove(p1), remove(p2);
}

static void test_errors(void **state) {
  (void)state;
  char path[512];
  dcr_checkpoint *ck;
  dcr_detail d;
  snprintf(path, sizeof path, "%s/missing.safetensors", tmpdir);
  assert_int_equal(dcr_checkpoint_open(&ck, path, DCR_KIND_SAFETENSORS, NULL, &d), DCR_E_IO);
  assert_string_equal(d.file, path);
  /* an input of the wrong form (SPEC.md §2.3): a directory for a file, and back */
  assert_int_equal(dcr_checkpoint_open(&ck, tmpdir, DCR_KIND_RAW, NULL, &d), DCR_E_CHECKPOINT);
  make_file(path, "some.bin", "0123456789", 10);
  assert_int_equal(dcr_checkpoint_open(&ck, path, DCR_KIND_SET, NULL, &d), DCR_E_CHECKPOINT);
  assert_int_equal(dcr_checkpoint_open(&ck, path, 7, NULL, &d), DCR_E_ARGUMENT);
  dcr_limits lim;
  dcr_limits_default(&lim);
  lim.max_file_size = 9;
  assert_int_equal(dcr_checkpoint_open(&ck, path, DCR_KIND_RAW, &lim, &d), DCR_E_LIMIT);
  lim.max_file_size = 10;
  assert_int_equal(dcr_checkpoint_open(&ck, path, DCR_KIND_RAW, &lim, NULL), DCR_OK);
  dcr_checkpoint_free(ck);
  remove(path);
}

/* A set of more members than the process may open at once (SPEC.md §2.3): its
 * members are opened when read, a bounded number at a time, and one that is
 * another file, or modified, when it is opened again fails with DCR_E_IO
 * (§2.3), naming it, rather than being read as if it were the same. */
enum { SET_MEMBERS = 200 };

static void set_path(char out[512], int i) {
  if (i < 0) snprintf(out, 512, "%s/many", tmpdir);
  else snprintf(out, 512, "%s/many/m%03d.bin", tmpdir, i);
}

static void write_member(int i, char fill) {
  char path[512], data[64];
  set_path(path, i);
  memset(data, fill, sizeof data);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, sizeof data, f), sizeof data);
  assert_int_equal(fclose(f), 0);
}

static int many_state(uint8_t id[16], dcr_detail *d) {
  char path[512];
  set_path(path, -1);
  dcr_checkpoint *ck;
  int rc = dcr_checkpoint_open(&ck, path, DCR_KIND_SET, NULL, d);
  if (!rc) rc = dcr_checkpoint_state_id(ck, 2, id, d);
  dcr_checkpoint_free(ck);
  return rc;
}

static void test_set_members_opened_as_needed(void **state) {
  (void)state;
  char path[512];
  set_path(path, -1);
  assert_int_equal(mkdir(path, 0755), 0);
  for (int i = 0; i < SET_MEMBERS; i++) write_member(i, 'a');
  struct rlimit was, low;
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &was), 0);
  low = was;
  low.rlim_cur = 64; /* well under the member count */
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
  uint8_t id[16], again[16];
  dcr_detail d;
  int rc = many_state(id, &d);
  if (rc) print_error("%s: %s: %s\n", d.file, dcr_error_name(rc), d.message);
  assert_int_equal(rc, DCR_OK);
  assert_int_equal(many_state(again, NULL), DCR_OK);
  assert_memory_equal(id, again, 16);
  /* member 0 replaced, by a file of the same size, after the open read it: the
   * hashes read it again, and find another file */
  dcr_checkpoint *ck;
  assert_int_equal(dcr_checkpoint_open(&ck, path, DCR_KIND_SET, NULL, NULL), DCR_OK);
  char from[512], to[512];
  snprintf(from, sizeof from, "%s/many/m000.new", tmpdir);
  set_path(to, 0);
  FILE *f = fopen(from, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", 1, 64, f), 64);
  assert_int_equal(fclose(f), 0);
  assert_int_equal(rename(from, to), 0);
  assert_int_equal(dcr_checkpoint_state_id(ck, 2, id, &d), DCR_E_IO);
  assert_string_equal(d.file, to);
  assert_non_null(strstr(d.message, "replaced or modified"));
  dcr_checkpoint_free(ck);
  /* member 1 modified in place: the same file, another modification time */
  assert_int_equal(dcr_checkpoint_open(&ck, path, DCR_KIND_SET, NULL, NULL), DCR_OK);
  set_path(to, 1);
  struct timespec times[2] = {{0, UTIME_OMIT}, {12345, 0}};
  assert_int_equal(utimensat(AT_FDCWD, to, times, 0), 0);
  assert_int_equal(dcr_checkpoint_state_id(ck, 1, id, &d), DCR_E_IO);
  assert_string_equal(d.file, to);
  dcr_checkpoint_free(ck);
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &was), 0);
  for (int i = 0; i < SET_MEMBERS; i++) set_path(path, i), assert_int_equal(unlink(path), 0);
  set_path(path, -1);
  assert_int_equal(rmdir(path), 0);
}

static void test_free_null(void **state) {
  (void)state;
  dcr_checkpoint_free(NULL);
}

static int setup(void **state) {
  (void)state;
  const char *base = getenv("TMPDIR");
  snprintf(tmpdir, sizeof tmpdir, "%s/dcr-ckpt-test-XXXXXX",
           base && *base && strlen(base) < 200 ? base : "/tmp");
  return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  return rmdir(tmpdir);
}

int main(void) {
  const char *dir = getenv("DCR_TESTVECTORS");
  snprintf(vectors, sizeof vectors, "%s", dir && *dir ? dir : "testvectors");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vector_state_ids),
      cmocka_unit_test(test_raw),
      cmocka_unit_test(test_empty_raw),
      cmocka_unit_test(test_not_safetensors),
      cmocka_unit_test(test_name_order),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_set_members_opened_as_needed),
      cmocka_unit_test(test_free_null),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
