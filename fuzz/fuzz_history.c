/*
 * fuzz_history.c - history archives (SPEC.md §19, history/): the index parser,
 * and whole archives read through libarchive, verified and extracted.
 *
 * Input: one option byte, then:
 *   bit 0 = 0  an index document (JSON), parsed by dcr__hindex_parse
 *   bit 0 = 1  an archive's bytes (tar, tar.zst or zip), opened from memory, then
 *              bit 1 = 0: verified (every member read); 1: the step given by the
 *              option byte's top bits (0..63 past the first) extracted to a file
 *
 * Invariants, beyond no crash and no ASan/UBSan report:
 * - every failure returns a code among those §13 gives the layout (ARCHIVE,
 *   VERSION, TRUNCATED, LIMIT, CHECKSUM, NOMEM, and the bundle and checkpoint
 *   codes for a member that is one), with the detail's code set to it;
 * - an index that parses is written back by dcr__hindex_write, and that document
 *   parses to the same index (members, kinds, steps, sizes, digests, states,
 *   metadata), and passes dcr__hindex_check: the writer never writes what the
 *   reader refuses, nor reads back something else;
 * - an extract that fails leaves no output file.
 * In a fuzzing build (FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION) member digests
 * and bundle checksums always match (DCR__CHECKSUM_OK), so members get parsed.
 */
#include <unistd.h>

#include "../history/history.h"
#include "fuzz_common.h"

#define FUZZ_MAX_INPUT (1u << 20)

static int same_member(const dcr__hmember *a, const dcr__hmember *b) {
  if (a->kind != b->kind || a->step != b->step || a->size != b->size || strcmp(a->name, b->name) ||
      memcmp(a->digest, b->digest, 16) || memcmp(a->state, b->state, 16) || memcmp(a->base, b->base, 16) ||
      memcmp(a->target, b->target, 16) || a->meta_count != b->meta_count)
    return 0;
  for (size_t k = 0; k < a->meta_count; k++)
    if (strcmp(a->meta_key[k], b->meta_key[k]) || strcmp(a->meta_value[k], b->meta_value[k])) return 0;
  if (a->directory != b->directory || a->file_count != b->file_count) return 0;
  for (size_t f = 0; f < a->file_count; f++)
    if (strcmp(a->files[f].path, b->files[f].path) || a->files[f].size != b->files[f].size ||
        memcmp(a->files[f].digest, b->files[f].digest, 16))
      return 0;
  return 1;
}


static void check_code(int rc, const dcr_detail *d) {
  if (d->code != rc) fprintf(stderr, "fuzz_history: %s returned, detail says %s: %s\n", dcr_error_name(rc),
                             dcr_error_name(d->code), d->message);
  FUZZ_ASSERT(d->code == rc);
  FUZZ_ASSERT(rc > 0 && rc < DCR_ERROR_COUNT_ && rc != DCR_E_ARGUMENT && rc != DCR_E_INTERRUPTED &&
              rc != DCR_E_JOURNAL);
}

static void index_mode(const uint8_t *p, size_t n) {
  dcr__hindex x, y;
  dcr_detail d;
  dcr_limits lim;
  fuzz_limits(&lim);
  dcr__detail_init(&d);
  int rc = dcr__hindex_parse(&x, (const char *)p, n, lim.max_memory, &d);
  if (rc) {
    check_code(rc, &d);
    FUZZ_ASSERT(rc == DCR_E_ARCHIVE || rc == DCR_E_VERSION || rc == DCR_E_NOMEM);
    return;
  }
  FUZZ_ASSERT(x.count >= 1 && x.m[0].kind == DCR_HISTORY_KEYFRAME);
  FUZZ_ASSERT(dcr__hindex_check(&x, &d) == DCR_OK);
  char *json;
  size_t len;
  FUZZ_ASSERT(dcr__hindex_write(&x, &json, &len, &d) == DCR_OK);
  /* The same document, written longer (indented, non-ASCII escaped): its text
   * counts for more against a budget, which is no verdict on it. */
  rc = dcr__hindex_parse(&y, json, len, 4 * lim.max_memory, &d);
  if (rc) fprintf(stderr, "fuzz_history: the written index does not parse: %s\n%s\n", d.message, json);
  FUZZ_ASSERT(rc == DCR_OK);
  FUZZ_ASSERT(y.count == x.count && y.keyframe_every == x.keyframe_every && !x.run_id == !y.run_id);
  FUZZ_ASSERT(!x.run_id || !strcmp(x.run_id, y.run_id));
  for (size_t i = 0; i < x.count; i++) FUZZ_ASSERT(same_member(&x.m[i], &y.m[i]));
  free(json);
  dcr__hindex_free(&x);
  dcr__hindex_free(&y);
}

static void archive_mode(const uint8_t *p, size_t n, uint8_t option) {
  dcr_limits lim;
  fuzz_limits(&lim);
  dcr_history *h;
  dcr_detail d;
  int rc = dcr__history_open(&h, NULL, -1, n ? p : (const uint8_t *)"", n, &lim, &d);
  if (rc) {
    check_code(rc, &d);
    FUZZ_ASSERT(!h);
    return;
  }
  dcr_history_summary s;
  dcr_history_info(h, &s);
  FUZZ_ASSERT(s.member_count >= 1 && s.first_step <= s.last_step);
  dcr_history_options o;
  dcr_history_options_default(&o);
  o.threads = 1;
  o.sync = 0;
  o.temp_dir = fuzz_dir();
  o.max_target_size = 1u << 22;
  if (!(option & 2)) {
    rc = dcr_history_verify(h, &o, &d);
    if (rc) check_code(rc, &d);
  } else {
    const char *out = fuzz_path(0, "extracted");
    fuzz_rmtree(out); /* a file, or a directory keyframe's step */
    rc = dcr_history_extract(h, s.first_step + (option >> 2), out, &o, &d);
    if (rc && rc != DCR_E_ARGUMENT) check_code(rc, &d); /* ARGUMENT: a step past the last */
    if (rc) FUZZ_ASSERT(access(out, F_OK) != 0);
  }
  dcr_history_free(h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > FUZZ_MAX_INPUT) return 0;
  if (data[0] & 1) archive_mode(data + 1, size - 1, data[0]);
  else index_mode(data + 1, size - 1);
  return 0;
}
