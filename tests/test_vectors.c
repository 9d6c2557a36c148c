/*
 * test_vectors.c - the conformance runner: plays every golden test vector of
 * testvectors/index.json (format 1.0), testvectors/v1.1/index.json (format 1.1),
 * testvectors/v1.2/index.json (format 1.2) and testvectors/v1.3/index.json (format
 * 1.3, SPEC.md §12) through the library, one
 * cmocka test per vector, and checks the outcome and the stage it appears at
 * against the index.
 *
 *   open (file and memory) -> verify_all -> apply to BASE -> compare with TARGET
 *   -> dcr_check_target(TARGET)
 *
 *   usage: test_vectors [DIR]
 *
 * DIR is the folder holding index.json: the argument, else $DCR_TESTVECTORS; with
 * neither, testvectors/, testvectors/v1.1/, testvectors/v1.2/ and testvectors/v1.3/
 * (run from the repository root). `make vectors-check` also plays the repaired
 * variants that `mkvectors --repaired DIR` and mkvectors11, mkvectors12 and
 * mkvectors13 with `--repaired DIR` write (an index in the same form, every vector valid). tests/conformance.sh does the same through the dcr CLI and checks
 * the indexes.
 *
 * A base or target that is a checkpoint set (1.1, kind 3) is a directory: the index
 * gives it as {path, members: {member path: sha256}, ignored}. It is applied to a
 * new output directory, which must then hold exactly the target's members, byte for
 * byte (hidden files are not members, so the output has none); a failed apply must
 * leave no output directory (R-APL-4).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <jansson.h>

#include "dcr.h"
#include "vectors_runner.h"
#include "../format/format.h"


static int code_of(const char *name) {
  for (int c = 0; c < DCR_ERROR_COUNT_; c++)
    if (!strcmp(dcr_error_name(c), name)) return c;
  return -1;
}

static const char *file_path(const json_t *v, const char *role, char *out, size_t size) {
  const json_t *f = json_object_get(json_object_get(v, "files"), role);
  if (!f) return NULL;
  snprintf(out, size, "%s/%s", root, json_string_value(json_object_get(f, "path")));
  return out;
}

/* ---- output directories of checkpoint sets (1.1) */

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

/* Removes a file or a directory tree, if there is one. */
static void remove_tree(const char *path) {
  struct stat st;
  if (lstat(path, &st)) return;
  if (S_ISDIR(st.st_mode)) nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  else unlink(path);
}

static size_t tree_files;
static int count_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)path, (void)st, (void)ftw;
  if (flag != FTW_D && flag != FTW_DP) tree_files++;
  return 0;
}

/* Whether two files hold the same bytes. */
static int same_file(const char *a, const char *b) {
  size_t n1 = 0, n2 = 0;
  uint8_t *p = slurp(a, &n1), *q = slurp(b, &n2);
  int same = p && q && n1 == n2 && !memcmp(p, q, n1);
  free(p);
  free(q);
  return same;
}

/* Whether directory `out` holds exactly the members of target `t` (its index
 * object), each the bytes of the target directory's file at `dir`; 0 and a
 * message if not. */
static int same_set(const char *out, const json_t *t, const char *dir, char *why, size_t size) {
  const json_t *members = json_object_get(t, "members");
  const char *m;
  const json_t *sha;
  json_object_foreach((json_t *)members, m, sha) {
    char a[8192], b[8192];
    (void)sha; /* the runner compares bytes with the target's files */
    snprintf(a, sizeof a, "%s/%s", out, m);
    snprintf(b, sizeof b, "%s/%s", dir, m);
    if (!same_file(a, b)) {
      snprintf(why, size, "member %s of the output is not the target's", m);
      return 0;
    }
  }
  tree_files = 0;
  nftw(out, count_entry, 16, FTW_PHYS);
  if (tree_files != json_object_size(members)) {
    snprintf(why, size, "the output holds %zu files, the target %zu members", tree_files,
             json_object_size(members));
    return 0;
  }
  return 1;
}


typedef struct {
  int codes[64];
  uint64_t chunks[64], offsets[64];
  size_t count;
} problems;

static int collect(void *opaque, const dcr_detail *d) {
  problems *p = opaque;
  if (p->count < 64) {
    p->codes[p->count] = d->code;
    p->chunks[p->count] = d->chunk;
    p->offsets[p->count++] = d->offset;
  }
  return 0;
}

/* ---- the random-access profile (SPEC.md §21) over the vector's bytes */

static int memory_read(void *ctx, uint64_t offset, size_t length, uint8_t *out, dcr_detail *d) {
  (void)d;
  if (length) memcpy(out, (const uint8_t *)ctx + offset, length); /* ctx: NULL for an empty file */
  return DCR_OK;
}
static void memory_plan(void *ctx, const dcr__range *ranges, size_t count) {
  (void)ctx, (void)ranges, (void)count;
}
static void memory_close(void *ctx) { (void)ctx; }
static const dcr__source_ops memory_ops = {memory_read, memory_plan, memory_close};

/* A range reader that uses every chunk: open, verify, then apply when there is a
 * base. Its verdict must be the walk's (R-RAN-5); *stage as play() names them. */
static int range_outcome(const uint8_t *mem, size_t size, const char *base, const char *out,
                         const char **stage, dcr_detail *d) {
  dcr_reader *r = NULL;
  int rc = dcr__reader_open_ops(&r, &memory_ops, (void *)mem, size, "<range>", 0, NULL, d);
  *stage = rc ? "structure" : NULL;
  if (!rc && (rc = dcr_reader_verify(r, d))) *stage = "chunks";
  if (!rc && base) {
    dcr_apply_options opt;
    dcr_apply_options_default(&opt);
    opt.sync = 0;
    opt.threads = 2;
    if ((rc = dcr_apply(r, base, out, &opt, d))) *stage = "apply";
  }
  dcr_reader_free(r);
  return rc;
}

static void play(void **state) {
  const json_t *v = *state;
  const char *id = json_string_value(json_object_get(v, "id"));
  const char *result = json_string_value(json_object_get(v, "result"));
  const json_t *err = json_object_get(v, "error"), *stg = json_object_get(v, "stage");
  int want = json_is_string(err) ? code_of(json_string_value(err)) : DCR_OK;
  const char *want_stage = json_is_string(stg) ? json_string_value(stg) : NULL;
  char bundle[4200], base_buf[4200], target_buf[4200], out[4200];
  file_path(v, "bundle", bundle, sizeof bundle);
  const char *base = file_path(v, "base", base_buf, sizeof base_buf);
  const char *target = file_path(v, "target", target_buf, sizeof target_buf);
  snprintf(out, sizeof out, "%s/out", workdir);
  assert_true(want >= 0);

  /* Opening from a file and from memory must agree. */
  dcr_reader *r = NULL, *rm = NULL;
  dcr_detail d;
  int got = dcr_reader_open_file(&r, bundle, NULL, &d);
  size_t size = 0;
  uint8_t *mem = slurp(bundle, &size);
  assert_non_null(mem);
  dcr_detail dm;
  int got_mem = dcr_reader_open_memory(&rm, mem, size, NULL, &dm);
  if (got != got_mem)
    fail_msg("%s: open_file gives %s, open_memory %s", id, dcr_error_name(got),
             dcr_error_name(got_mem));
  dcr_reader_free(rm);
  const char *got_stage = got ? "structure" : NULL;
  problems all = {{0}, {0}, {0}, 0};
  if (!got) {
    /* verify and verify_all agree on the first problem */
    dcr_detail dv;
    int first = dcr_reader_verify(r, &dv);
    got = dcr_reader_verify_all(r, collect, &all);
    if (got != first || (got && (!all.count || all.codes[0] != got)))
      fail_msg("%s: dcr_reader_verify gives %s, dcr_reader_verify_all %s", id,
               dcr_error_name(first), dcr_error_name(got));
    /* the same problems in the same order, whatever the thread count */
    const unsigned threads[] = {1, 3};
    for (size_t t = 0; t < 2; t++) {
      problems again = {{0}, {0}, {0}, 0};
      dcr_reader_set_threads(r, threads[t]);
      if (dcr_reader_verify_all(r, collect, &again) != got || again.count != all.count ||
          memcmp(again.codes, all.codes, sizeof all.codes) ||
          memcmp(again.chunks, all.chunks, sizeof all.chunks) ||
          memcmp(again.offsets, all.offsets, sizeof all.offsets))
        fail_msg("%s: verify_all with %u threads reports other problems", id, threads[t]);
    }
    dcr_reader_set_threads(r, 0);
    if (got) got_stage = "chunks";
  }
  if (!got && base) {
    dcr_apply_options opt;
    dcr_apply_options_default(&opt);
    opt.sync = 0;
    opt.threads = 2; /* apply sizes per-thread buffers by chunk_size (up to 2^30) */
    remove_tree(out); /* a set's output directory must not exist yet */
    got = dcr_apply(r, base, out, &opt, &d);
    if (got) {
      got_stage = "apply";
      if (access(out, F_OK) == 0) {
        remove_tree(out);
        fail_msg("%s: failed apply left %s behind (R-APL-4)", id, out);
      }
    } else if (target && !strcmp(result, "valid")) {
      const json_t *t = json_object_get(json_object_get(v, "files"), "target");
      char why[512] = "the applied output differs from the target file";
      int same = json_object_get(t, "members") ? same_set(out, t, target, why, sizeof why)
                                               : same_file(out, target);
      remove_tree(out);
      if (!same) fail_msg("%s: %s", id, why);
    }
    remove_tree(out);
  }
  if (!got && target) {
    got = dcr_check_target(r, target, NULL, &d);
    if (got) got_stage = "target";
  }
  if (want_stage && strcmp(want_stage, "target") ? 1 : !strcmp(result, "valid")) {
    const char *range_stage;
    dcr_detail dr;
    remove_tree(out);
    int range = range_outcome(mem, size, base, out, &range_stage, &dr);
    if (!range && target && !strcmp(result, "valid") &&
        !json_object_get(json_object_get(json_object_get(v, "files"), "target"), "members") &&
        !same_file(out, target))
      fail_msg("%s: the range reader's output differs from the target", id);
    remove_tree(out);
    if ((range == DCR_OK) != (!strcmp(result, "valid") || (want_stage && !strcmp(want_stage, "target"))))
      fail_msg("%s: the range reader says %s (%s), the walk %s", id,
               range ? dcr_error_name(range) : "valid", range ? dr.message : "",
               strcmp(result, "valid") ? json_string_value(err) : "valid");
    if (range && range != want) /* R-RAN-4: a failure is confirmed by the walk */
      fail_msg("%s: the range reader says %s at %s (%s); the walk %s at %s", id,
               dcr_error_name(range), range_stage, dr.message, json_string_value(err), want_stage);
  }
  dcr_reader_free(r);
  free(mem);

  int ok = !strcmp(result, "valid")
               ? got == DCR_OK
               : got == want && got_stage && want_stage && !strcmp(got_stage, want_stage);
  if (!ok)
    fail_msg("%s: expected %s%s%s, got %s%s%s (%s)", id, want ? dcr_error_name(want) : "valid",
             want_stage ? " at " : "", want_stage ? want_stage : "",
             got ? dcr_error_name(got) : "valid", got_stage ? " at " : "",
             got_stage ? got_stage : "", got ? d.message : "");
  const json_t *list = json_object_get(v, "all_errors");
  if (list && got_stage && !strcmp(got_stage, "chunks")) {
    size_t i;
    const json_t *c;
    if (json_array_size(list) != all.count)
      fail_msg("%s: verify_all reports %zu problems, the index %zu", id, all.count,
               json_array_size(list));
    json_array_foreach(list, i, c) {
      if (code_of(json_string_value(c)) != all.codes[i])
        fail_msg("%s: problem %zu is %s, the index says %s", id, i,
                 dcr_error_name(all.codes[i]), json_string_value(c));
    }
  }
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : getenv("DCR_TESTVECTORS");
  if (dir && *dir) {
    int failed = run_vectors("vectors", dir, "id");
    rmdir(workdir);
    return failed;
  }
  /* The corpus of each version: 1.0, 1.1, 1.2, then 1.3. */
  int failed = run_vectors("vectors", "testvectors", "id");
  rmdir(workdir);
  failed += run_vectors("vectors-1.1", "testvectors/v1.1", "id");
  rmdir(workdir);
  failed += run_vectors("vectors-1.2", "testvectors/v1.2", "id");
  rmdir(workdir);
  failed += run_vectors("vectors-1.3", "testvectors/v1.3", "id");
  rmdir(workdir);
  return failed;
}
