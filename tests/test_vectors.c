/*
 * test_vectors.c - the conformance runner: plays every golden test vector of
 * testvectors/index.json (SPEC.md §12) through the library, one cmocka test per
 * vector, and checks the outcome and the stage it appears at against the index.
 *
 *   open (file and memory) -> verify_all -> apply to BASE -> compare with TARGET
 *   -> dcr_check_target(TARGET)
 *
 *   usage: test_vectors [DIR]
 *
 * DIR is the folder holding index.json: the argument, else $DCR_TESTVECTORS, else
 * testvectors/ (run from the repository root). `make vectors-check` also plays
 * the repaired variants that `mkvectors --repaired DIR` writes (an index in the
 * same form, every vector valid). tests/conformance.sh does the same through the
 * dcr CLI and checks the index.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <jansson.h>

#include "dcr.h"
#include "vectors_runner.h"


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
    unlink(out);
    got = dcr_apply(r, base, out, &opt, &d);
    if (got) {
      got_stage = "apply";
      if (access(out, F_OK) == 0) fail_msg("%s: failed apply left %s behind (R-APL-4)", id, out);
    } else if (target && !strcmp(result, "valid")) {
      size_t n1 = 0, n2 = 0;
      uint8_t *a = slurp(out, &n1), *b = slurp(target, &n2);
      int same = a && b && n1 == n2 && !memcmp(a, b, n1);
      free(a);
      free(b);
      if (!same) fail_msg("%s: the applied output differs from the target file", id);
    }
    unlink(out);
  }
  if (!got && target) {
    got = dcr_check_target(r, target, NULL, &d);
    if (got) got_stage = "target";
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
  if (!dir || !*dir) dir = "testvectors";
  int failed = run_vectors("vectors", dir, "id");
  rmdir(workdir);
  return failed;
}
