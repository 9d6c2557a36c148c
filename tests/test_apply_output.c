/*
 * test_apply_output.c - where dcr_apply's output goes, and inputs that change
 * under it (issues #15, #18): a base truncated or modified during the apply fails
 * it cleanly (no signal, no file left, never "verified" bytes that are not the
 * target), a file created at the output meanwhile is kept unless replacing is
 * asked for, a replaced file keeps its mode, names near NAME_MAX work, the sink
 * of dcr_apply_to gets exactly the target, all-zero chunks stay holes, and the
 * caller's cap on the target size holds.
 *
 * The changes happen from the progress callback, which the library calls on the
 * calling thread after each chunk: a hook into a running apply with no test
 * build of the library.
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
#include <ftw.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic.h"
#include "dcr.h"

#include "test_sink.h"

enum { N = 64 * 4096 };
static char dir[64], base_path[128], target_path[128], out_path[128], zbase_path[128],
    ztarget_path[128];
static buf bundle, zbundle;
static uint8_t b[N], t[N];

static void write_file(const char *path, const uint8_t *p, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(p, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

static buf read_file(const char *path) {
  buf r = {0};
  FILE *f = fopen(path, "rb");
  if (!f) return r;
  uint8_t tmp[65536];
  size_t k;
  while ((k = fread(tmp, 1, sizeof tmp, f)) > 0) sink(&r, tmp, k);
  fclose(f);
  return r;
}

static long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) ? -1 : (long)st.st_size;
}

/* Raw files, 4 KiB chunks, stored, one thread: small and quick bundles. */
static dcr_encode_options raw_options(void) {
  dcr_encode_options o;
  dcr_encode_options_default(&o);
  o.chunk_size = 4096;
  o.level = 0;
  o.threads = 1;
  o.raw = 1;
  return o;
}

static int encode(const char *from, const char *to, buf *out) {
  dcr_encode_options o = raw_options();
  return dcr_encode(from, to, &o, sink, out, NULL, NULL);
}

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/dcr-test-apply-output-XXXXXX");
  if (!mkdtemp(dir)) return -1;
  snprintf(base_path, sizeof base_path, "%s/base", dir);
  snprintf(target_path, sizeof target_path, "%s/target", dir);
  snprintf(out_path, sizeof out_path, "%s/out", dir);
  snprintf(zbase_path, sizeof zbase_path, "%s/zbase", dir);
  snprintf(ztarget_path, sizeof ztarget_path, "%s/ztarget", dir);
  for (size_t i = 0; i < N; i++) b[i] = t[i] = (uint8_t)(i * 7 + i / 300);
  for (size_t i = 100; i < N; i += 3 * 4096) t[i] ^= 1; /* every third chunk changes */
  write_file(base_path, b, N);
  write_file(target_path, t, N);
  /* a raw base of one chunk and a 16 MiB target of zeros but one byte: the tensor
   * is recoded against zeros, and all of its chunks but one are unchanged zeros */
  uint8_t one[4096] = {1};
  write_file(zbase_path, one, sizeof one);
  int fd = open(ztarget_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || ftruncate(fd, 16 << 20) || pwrite(fd, "x", 1, 5 << 20) != 1 || close(fd))
    return -1;
  return encode(base_path, target_path, &bundle) || encode(zbase_path, ztarget_path, &zbundle);
}

static void remove_dir(void) {
  DIR *d = opendir(dir);
  struct dirent *e;
  char p[512];
  while (d && (e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name), unlink(p);
  if (d) closedir(d);
  rmdir(dir);
}

static int teardown(void **state) {
  (void)state;
  remove_dir();
  free(bundle.p);
  free(zbundle.p);
  return 0;
}

/* The directory holds exactly the files named (a temporary file left would show). */
static void assert_dir_holds(int with_out) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  struct dirent *e;
  int count = 0;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    int known = !strcmp(e->d_name, "base") || !strcmp(e->d_name, "target") ||
                !strcmp(e->d_name, "zbase") || !strcmp(e->d_name, "ztarget") ||
                (with_out && !strcmp(e->d_name, "out"));
    if (!known) fprintf(stderr, "left behind: %s\n", e->d_name);
    assert_true(known);
    count++;
  }
  closedir(d);
  assert_int_equal(count, 4 + with_out);
}

static dcr_reader *open_bundle(const buf *bb) {
  dcr_reader *r = NULL;
  assert_int_equal(dcr_reader_open_memory(&r, bb->p, bb->n, NULL, NULL), DCR_OK);
  return r;
}

static int files_equal(const char *x, const char *y) {
  buf a = read_file(x), c = read_file(y);
  int eq = a.p && c.p && a.n == c.n && !memcmp(a.p, c.p, a.n);
  free(a.p), free(c.p);
  return eq;
}

/* ---- a base that changes under the apply */

typedef struct {
  int calls;
  int what; /* 0 truncate the base, 1 flip a byte of a later chunk, 2 create out */
} hook;

static void change_base(void *opaque, uint64_t done, uint64_t total) {
  (void)done, (void)total;
  hook *h = opaque;
  if (h->calls++ != 1) return;
  if (h->what == 0) assert_int_equal(truncate(base_path, 8192), 0);
  if (h->what == 1) {
    int fd = open(base_path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t x = (uint8_t)(b[40 * 4096 + 5] ^ 0x10);
    assert_int_equal(pwrite(fd, &x, 1, 40 * 4096 + 5), 1);
    close(fd);
  }
  if (h->what == 2) write_file(out_path, (const uint8_t *)"mine", 4);
}

static int apply_with_hook(int what, int no_replace) {
  dcr_reader *r = open_bundle(&bundle);
  hook h = {0, what};
  dcr_apply_options o;
  dcr_apply_options_default(&o);
  o.threads = 1;
  o.progress = change_base;
  o.progress_opaque = &h;
  o.no_replace = no_replace;
  dcr_detail d;
  int rc = dcr_apply(r, base_path, out_path, &o, &d);
  dcr_reader_free(r);
  write_file(base_path, b, N); /* restored for the next test */
  return rc;
}

static void test_base_truncated_during_apply_fails_cleanly(void **state) {
  (void)state;
  unlink(out_path);
  int rc = apply_with_hook(0, 0);
  assert_int_not_equal(rc, DCR_OK);
  assert_true(rc == DCR_E_IO || rc == DCR_E_BASE_MISMATCH);
  assert_dir_holds(0);
}

static void test_base_modified_during_apply_is_never_verified(void **state) {
  (void)state;
  unlink(out_path);
  int rc = apply_with_hook(1, 0);
  /* Read before the change, the bytes were right and the output is the target;
   * read after, the hashes must say so. Never a wrong output called verified. */
  if (rc == DCR_OK) {
    assert_true(files_equal(out_path, target_path));
    unlink(out_path);
  } else {
    assert_true(rc == DCR_E_BASE_MISMATCH || rc == DCR_E_TARGET_MISMATCH);
  }
  assert_dir_holds(0);
}

/* ---- committing */

static void test_file_created_meanwhile_is_kept_without_replace(void **state) {
  (void)state;
  unlink(out_path);
  assert_int_equal(apply_with_hook(2, 1), DCR_E_IO);
  buf got = read_file(out_path);
  assert_int_equal(got.n, 4);
  assert_memory_equal(got.p, "mine", 4);
  free(got.p);
  assert_dir_holds(1);
  /* the default replaces (as dcr_apply always did) */
  assert_int_equal(apply_with_hook(2, 0), DCR_OK);
  assert_true(files_equal(out_path, target_path));
  unlink(out_path);
}

static void test_existing_output_fails_at_once_without_replace(void **state) {
  (void)state;
  write_file(out_path, (const uint8_t *)"old", 3);
  dcr_reader *r = open_bundle(&bundle);
  dcr_apply_options o;
  dcr_apply_options_default(&o);
  o.no_replace = 1;
  dcr_detail d;
  assert_int_equal(dcr_apply(r, base_path, out_path, &o, &d), DCR_E_IO);
  assert_non_null(strstr(d.message, "exists"));
  assert_string_equal(d.file, out_path);
  dcr_reader_free(r);
  assert_int_equal(file_size(out_path), 3);
  unlink(out_path);
  assert_dir_holds(0);
}

static void test_replaced_output_keeps_its_mode(void **state) {
  (void)state;
  write_file(out_path, (const uint8_t *)"old", 3);
  assert_int_equal(chmod(out_path, 0640), 0);
  dcr_reader *r = open_bundle(&bundle);
  assert_int_equal(dcr_apply(r, base_path, out_path, NULL, NULL), DCR_OK);
  struct stat st;
  assert_int_equal(stat(out_path, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0640);
  assert_true(files_equal(out_path, target_path));
  unlink(out_path);
  /* a new file: 0666 less the umask, which is left as it was */
  mode_t mask = umask(027);
  assert_int_equal(dcr_apply(r, base_path, out_path, NULL, NULL), DCR_OK);
  assert_int_equal(umask(mask), 027);
  assert_int_equal(stat(out_path, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0640);
  unlink(out_path);
  dcr_reader_free(r);
  assert_dir_holds(0);
}

/* dcr_encode_file: the bundle dcr_encode makes, committed atomically; no_replace
 * keeps an existing file; replacing keeps its mode. */
static void test_encode_file_is_atomic(void **state) {
  (void)state;
  dcr_encode_options o = raw_options();
  dcr_encode_stats st;
  assert_int_equal(dcr_encode_file(base_path, target_path, out_path, &o, &st, NULL), DCR_OK);
  buf got = read_file(out_path);
  assert_int_equal(got.n, bundle.n);
  assert_memory_equal(got.p, bundle.p, bundle.n);
  assert_int_equal(st.bundle_size, bundle.n);
  free(got.p);
  write_file(out_path, (const uint8_t *)"keep", 4);
  assert_int_equal(chmod(out_path, 0600), 0);
  o.no_replace = 1;
  dcr_detail d;
  assert_int_equal(dcr_encode_file(base_path, target_path, out_path, &o, NULL, &d), DCR_E_IO);
  assert_string_equal(d.file, out_path);
  assert_int_equal(file_size(out_path), 4);
  o.no_replace = 0;
  assert_int_equal(dcr_encode_file(base_path, target_path, out_path, &o, NULL, NULL), DCR_OK);
  struct stat sb;
  assert_int_equal(stat(out_path, &sb), 0);
  assert_int_equal(sb.st_mode & 07777, 0600);
  assert_int_equal(file_size(out_path), (long)bundle.n);
  /* an input that does not exist: nothing is left at the output */
  unlink(out_path);
  assert_int_not_equal(dcr_encode_file("/nonexistent", target_path, out_path, &o, NULL, NULL), DCR_OK);
  assert_int_equal(file_size(out_path), -1);
  assert_dir_holds(0);
}

static void test_output_name_at_name_max_works(void **state) {
  (void)state;
  char name[NAME_MAX + 1], path[NAME_MAX + 128];
  memset(name, 'n', NAME_MAX);
  name[NAME_MAX] = 0;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  dcr_reader *r = open_bundle(&bundle);
  assert_int_equal(dcr_apply(r, base_path, path, NULL, NULL), DCR_OK);
  assert_true(files_equal(path, target_path));
  assert_int_equal(unlink(path), 0);
  dcr_reader_free(r);
  assert_dir_holds(0);
}

/* The atomic output module itself, both ways: nameless (O_TMPFILE) and hidden name. */
static int hidden_entries(void) {
  DIR *d = opendir(dir);
  struct dirent *e;
  int n = 0;
  while (d && (e = readdir(d))) n += !strncmp(e->d_name, ".dcr-", 5);
  if (d) closedir(d);
  return n;
}

static void atomic_cases(unsigned named) {
  dcr__atomic a;
  dcr_detail d;
  dcr__detail_init(&d);
  /* no replace: a file that appears meanwhile is kept, nothing else is left */
  unlink(out_path);
  assert_int_equal(dcr__atomic_open(&a, out_path, named | DCR__ATOMIC_SYNC, &d), DCR_OK);
  assert_int_equal(hidden_entries(), named ? 1 : 0);
  assert_int_equal(pwrite(a.fd, "new", 3, 0), 3);
  write_file(out_path, (const uint8_t *)"mine", 4);
  assert_int_equal(dcr__atomic_commit(&a, &d), DCR_E_IO);
  assert_string_equal(d.file, out_path);
  assert_int_equal(file_size(out_path), 4);
  assert_int_equal(hidden_entries(), 0);
  /* replace */
  assert_int_equal(dcr__atomic_open(&a, out_path, named | DCR__ATOMIC_REPLACE, &d), DCR_OK);
  assert_int_equal(pwrite(a.fd, "new", 3, 0), 3);
  assert_int_equal(dcr__atomic_commit(&a, &d), DCR_OK);
  assert_int_equal(file_size(out_path), 3);
  dcr__atomic_abort(&a); /* after a commit: nothing to do */
  /* abort leaves nothing, and the existing file as it was */
  assert_int_equal(dcr__atomic_open(&a, out_path, named | DCR__ATOMIC_REPLACE, &d), DCR_OK);
  dcr__atomic_abort(&a);
  assert_int_equal(file_size(out_path), 3);
  assert_int_equal(hidden_entries(), 0);
  /* no replace over an existing file fails at open */
  assert_int_equal(dcr__atomic_open(&a, out_path, named, &d), DCR_E_IO);
  assert_int_equal(a.fd, -1);
  /* no room */
  assert_int_equal(dcr__atomic_open(&a, out_path, named | DCR__ATOMIC_REPLACE, &d), DCR_OK);
  dcr__detail_init(&d);
  assert_int_equal(dcr__atomic_check_space(&a, UINT64_MAX, &d), DCR_E_IO);
  assert_non_null(strstr(d.message, "needs"));
  assert_int_equal(dcr__atomic_check_space(&a, 1, &d), DCR_OK);
  dcr__atomic_abort(&a);
  unlink(out_path);
  assert_int_equal(dcr__atomic_open(&a, dir, named | DCR__ATOMIC_REPLACE, &d), DCR_E_IO);
  char slash[160];
  snprintf(slash, sizeof slash, "%s/", dir);
  assert_int_equal(dcr__atomic_open(&a, slash, named, &d), DCR_E_ARGUMENT);
  assert_dir_holds(0);
}

static void test_atomic_output_nameless(void **state) {
  (void)state;
  atomic_cases(0);
}

static void test_atomic_output_hidden_name(void **state) {
  (void)state;
  atomic_cases(DCR__ATOMIC_NAMED);
}

/* ---- a set's output (SPEC.md §2.3) that becomes a link during an apply that
 * replaces it: what the output's open refuses, so the commit refuses it too,
 * puts it back, and leaves no hidden .dcr-XXXXXX entry (the link, before). */

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *f) {
  (void)st, (void)flag, (void)f;
  return remove(path);
}

static void remove_tree(const char *path) {
  assert_int_equal(nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS), 0);
}

static void make_set(const char *path, uint8_t flip) {
  char member[256];
  assert_int_equal(mkdir(path, 0755), 0);
  snprintf(member, sizeof member, "%s/a.bin", path);
  write_file(member, b, N);
  snprintf(member, sizeof member, "%s/b.bin", path);
  b[100] ^= flip;
  write_file(member, b, N);
  b[100] ^= flip;
}

static void swap_for_link(void *opaque, uint64_t done, uint64_t total) {
  (void)done, (void)total;
  char moved[192];
  snprintf(moved, sizeof moved, "%s.moved", out_path);
  if (++*(int *)opaque != 2) return;
  assert_int_equal(rename(out_path, moved), 0);
  assert_int_equal(symlink("out.moved", out_path), 0);
}

static void test_set_output_swapped_for_a_link_is_left_as_it_was(void **state) {
  (void)state;
  char sb[160], st[160], old[192], base_member[192], link[64];
  snprintf(sb, sizeof sb, "%s/sb", dir);
  snprintf(st, sizeof st, "%s/st", dir);
  make_set(sb, 0), make_set(st, 1);
  make_set(out_path, 0);
  dcr_encode_options eo = raw_options();
  eo.raw = 0;
  buf set_bundle = {0};
  assert_int_equal(dcr_encode(sb, st, &eo, sink, &set_bundle, NULL, NULL), DCR_OK);
  dcr_reader *r = open_bundle(&set_bundle);
  int calls = 0;
  dcr_apply_options o;
  dcr_apply_options_default(&o);
  o.threads = 1;
  o.progress = swap_for_link;
  o.progress_opaque = &calls;
  dcr_detail d;
  assert_int_equal(dcr_apply(r, sb, out_path, &o, &d), DCR_E_IO);
  assert_non_null(strstr(d.message, "not a directory"));
  assert_string_equal(d.file, out_path);
  assert_int_equal(readlink(out_path, link, sizeof link), 9);
  assert_memory_equal(link, "out.moved", 9);
  snprintf(old, sizeof old, "%s.moved/b.bin", out_path);
  snprintf(base_member, sizeof base_member, "%s/b.bin", sb);
  assert_true(files_equal(old, base_member)); /* the old set, untouched */
  assert_int_equal(hidden_entries(), 0);
  dcr_reader_free(r);
  free(set_bundle.p);
  assert_int_equal(unlink(out_path), 0);
  snprintf(old, sizeof old, "%s.moved", out_path);
  remove_tree(old), remove_tree(sb), remove_tree(st);
  assert_dir_holds(0);
}

/* ---- streaming */

static int failing_sink(void *opaque, const void *p, size_t n) {
  (void)p, (void)n;
  return ++*(int *)opaque > 3;
}

static void test_apply_to_sink_gives_the_target(void **state) {
  (void)state;
  dcr_reader *r = open_bundle(&bundle);
  buf got = {0};
  assert_int_equal(dcr_apply_to(r, base_path, NULL, sink, &got, NULL), DCR_OK);
  assert_int_equal(got.n, N);
  assert_memory_equal(got.p, t, N);
  free(got.p);
  /* a target given as the base is recognized before anything was sent */
  got = (buf){0};
  assert_int_equal(dcr_apply_to(r, target_path, NULL, sink, &got, NULL), DCR_OK);
  assert_int_equal(got.n, N);
  assert_memory_equal(got.p, t, N);
  free(got.p);
  int calls = 0;
  dcr_detail d;
  assert_int_equal(dcr_apply_to(r, base_path, NULL, failing_sink, &calls, &d), DCR_E_IO);
  dcr_reader_free(r);
  assert_dir_holds(0);
}

/* ---- zeros and size */

static void test_zero_chunks_are_holes_and_streamed(void **state) {
  (void)state;
  dcr_reader *r = open_bundle(&zbundle);
  assert_int_equal(dcr_apply(r, zbase_path, out_path, NULL, NULL), DCR_OK);
  struct stat st;
  assert_int_equal(stat(out_path, &st), 0);
  assert_int_equal(st.st_size, 16 << 20);
  assert_true((uint64_t)st.st_blocks * 512 < (1u << 20)); /* sparse (16 MiB of zeros) */
  assert_true(files_equal(out_path, ztarget_path));
  assert_int_equal(dcr_check_target(r, out_path, NULL, NULL), DCR_OK);
  unlink(out_path);
  buf got = {0};
  assert_int_equal(dcr_apply_to(r, zbase_path, NULL, sink, &got, NULL), DCR_OK);
  buf want = read_file(ztarget_path);
  assert_int_equal(got.n, want.n);
  assert_memory_equal(got.p, want.p, want.n);
  free(got.p), free(want.p);
  dcr_reader_free(r);
  assert_dir_holds(0);
}

static void test_target_over_the_cap_is_refused_before_writing(void **state) {
  (void)state;
  dcr_reader *r = open_bundle(&zbundle);
  dcr_apply_options o;
  dcr_apply_options_default(&o);
  o.max_target_size = (16 << 20) - 1;
  dcr_detail d;
  assert_int_equal(dcr_apply(r, zbase_path, out_path, &o, &d), DCR_E_LIMIT);
  int calls = 0;
  assert_int_equal(dcr_apply_to(r, zbase_path, &o, failing_sink, &calls, &d), DCR_E_LIMIT);
  assert_int_equal(calls, 0);
  o.max_target_size = 16 << 20;
  assert_int_equal(dcr_apply(r, zbase_path, NULL, &o, &d), DCR_OK);
  dcr_reader_free(r);
  assert_dir_holds(0);
}

static int cancel_now = 1;

static void test_check_target_honours_cancel_and_progress(void **state) {
  (void)state;
  dcr_reader *r = open_bundle(&bundle);
  dcr_apply_options o;
  dcr_apply_options_default(&o);
  hook h = {0, -1};
  o.progress = change_base;
  o.progress_opaque = &h;
  assert_int_equal(dcr_check_target(r, target_path, &o, NULL), DCR_OK);
  assert_true(h.calls > 0);
  o.cancel = &cancel_now;
  assert_int_equal(dcr_check_target(r, target_path, &o, NULL), DCR_E_INTERRUPTED);
  dcr_reader_free(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_base_truncated_during_apply_fails_cleanly),
      cmocka_unit_test(test_base_modified_during_apply_is_never_verified),
      cmocka_unit_test(test_file_created_meanwhile_is_kept_without_replace),
      cmocka_unit_test(test_existing_output_fails_at_once_without_replace),
      cmocka_unit_test(test_replaced_output_keeps_its_mode),
      cmocka_unit_test(test_output_name_at_name_max_works),
      cmocka_unit_test(test_encode_file_is_atomic),
      cmocka_unit_test(test_atomic_output_nameless),
      cmocka_unit_test(test_atomic_output_hidden_name),
      cmocka_unit_test(test_set_output_swapped_for_a_link_is_left_as_it_was),
      cmocka_unit_test(test_apply_to_sink_gives_the_target),
      cmocka_unit_test(test_zero_chunks_are_holes_and_streamed),
      cmocka_unit_test(test_target_over_the_cap_is_refused_before_writing),
      cmocka_unit_test(test_check_target_honours_cancel_and_progress),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
