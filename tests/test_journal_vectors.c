/*
 * test_journal_vectors.c - plays every apply journal test vector of
 * testvectors/journal-v1/index.json (SPEC.md §18) through dcr_journal_recover,
 * one cmocka test per vector:
 *
 *   before -> CKPT, journal -> CKPT.dcr-journal, dcr_journal_recover(CKPT)
 *
 *   replayed:    rc 0, recovered 1, CKPT is `after`, no journal left; then again
 *                from `after` with the journal put back (idempotence, §18.4)
 *   uncommitted: rc 0, recovered 0, CKPT is `before`, the journal removed
 *   error:       rc is the code (DCR_E_JOURNAL), CKPT is `before` byte for byte,
 *                the journal still there, unchanged (R-JNL-3); the same again
 *
 *   usage: test_journal_vectors [DIR]      (DCR_JOURNAL_VERBOSE=1: print each answer)
 *
 * DIR is the folder holding index.json: the argument, else $DCR_JOURNAL_VECTORS,
 * else testvectors/journal-v1 (run from the repository root).
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


static int spit(const char *path, const uint8_t *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  int ok = (!n || fwrite(p, 1, n, f) == n);
  return fclose(f) == 0 && ok ? 0 : -1;
}

typedef struct {
  uint8_t *p;
  size_t n;
  int present;
} blob;

static blob load(const json_t *v, const char *role) {
  blob b = {NULL, 0, 0};
  const json_t *rel = json_object_get(v, role);
  if (!json_is_string(rel)) return b;
  char path[8192];
  snprintf(path, sizeof path, "%s/%s", root, json_string_value(rel));
  b.p = slurp(path, &b.n);
  if (!b.p) fail_msg("cannot read %s", path);
  b.present = 1;
  return b;
}

/* Whether the file at path holds exactly the bytes of b. */
static int same(const char *path, const blob *b) {
  size_t n = 0;
  uint8_t *p = slurp(path, &n);
  int eq = p && n == b->n && (!n || !memcmp(p, b->p, n));
  free(p);
  return eq;
}

/* Puts ckpt and journal in place and recovers; returns the code. */
static int recover(const char *ckpt, const char *jpath, const blob *state, const blob *journal,
                   int *recovered, dcr_detail *d) {
  if (spit(ckpt, state->p, state->n) || spit(jpath, journal->p, journal->n))
    fail_msg("cannot write to %s", workdir);
  *recovered = -1;
  memset(d, 0, sizeof *d);
  return dcr_journal_recover(ckpt, 0, recovered, d);
}

static void play(void **state) {
  const json_t *v = *state;
  const char *name = json_string_value(json_object_get(v, "name"));
  const char *outcome = json_string_value(json_object_get(v, "outcome"));
  const json_t *err = json_object_get(v, "error");
  blob before = load(v, "before"), journal = load(v, "journal"), after = load(v, "after");
  if (!before.present || !journal.present) fail_msg("%s: no before or journal file", name);

  char ckpt[8192], jpath[8300];
  snprintf(ckpt, sizeof ckpt, "%s/ckpt", workdir);
  snprintf(jpath, sizeof jpath, "%s.dcr-journal", ckpt);
  int recovered;
  dcr_detail d;
  int rc = recover(ckpt, jpath, &before, &journal, &recovered, &d);
  int journal_left = access(jpath, F_OK) == 0;
  char why[600] = "";
  if (rc) snprintf(why, sizeof why, " (%s: %s)", dcr_error_name(rc), d.message);
  if (getenv("DCR_JOURNAL_VERBOSE"))
    printf("%s: %s, recovered %d%s\n", name, rc ? dcr_error_name(rc) : "ok", recovered, why);

  if (!strcmp(outcome, "replayed")) {
    if (!after.present) fail_msg("%s: a replayed vector without an after file", name);
    if (rc) fail_msg("%s: expected replayed, got %s%s", name, dcr_error_name(rc), why);
    if (recovered != 1) fail_msg("%s: replayed, but recovered = %d", name, recovered);
    if (!same(ckpt, &after)) fail_msg("%s: the replayed checkpoint is not the after file", name);
    if (journal_left) fail_msg("%s: the journal was not removed after the replay", name);
    /* idempotence: replaying onto the result gives the result (§18.4) */
    rc = recover(ckpt, jpath, &after, &journal, &recovered, &d);
    if (rc)
      fail_msg("%s: replaying again onto the after file: %s (%s)", name, dcr_error_name(rc),
               d.message);
    if (recovered != 1) fail_msg("%s: replaying again: recovered = %d", name, recovered);
    if (!same(ckpt, &after)) fail_msg("%s: replaying again changed the after file", name);
    if (access(jpath, F_OK) == 0) fail_msg("%s: replaying again left the journal", name);
  } else if (!strcmp(outcome, "uncommitted")) {
    if (rc) fail_msg("%s: expected uncommitted, got %s%s", name, dcr_error_name(rc), why);
    if (recovered != 0) fail_msg("%s: uncommitted, but recovered = %d", name, recovered);
    if (!same(ckpt, &before)) fail_msg("%s: an uncommitted journal changed the checkpoint", name);
    if (journal_left) fail_msg("%s: the uncommitted journal was not removed", name);
  } else if (!strcmp(outcome, "error")) {
    int want = json_is_string(err) ? code_of(json_string_value(err)) : -1;
    if (want <= 0) fail_msg("%s: an error vector without a known error code", name);
    if (rc != want)
      fail_msg("%s: expected %s, got %s%s", name, dcr_error_name(want),
               rc ? dcr_error_name(rc) : "success",
               rc ? why : recovered ? " (replayed)" : " (discarded)");
    if (!same(ckpt, &before)) fail_msg("%s: a journal that fails changed the checkpoint", name);
    if (!journal_left) fail_msg("%s: a journal that fails was removed", name);
    if (!same(jpath, &journal)) fail_msg("%s: a journal that fails was changed", name);
    /* the same answer the second time */
    rc = recover(ckpt, jpath, &before, &journal, &recovered, &d);
    if (rc != want) fail_msg("%s: the second recovery gives %s", name, dcr_error_name(rc));
  } else {
    fail_msg("%s: unknown outcome %s", name, outcome ? outcome : "(none)");
  }
  unlink(ckpt);
  unlink(jpath);
  free(before.p);
  free(journal.p);
  free(after.p);
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : getenv("DCR_JOURNAL_VECTORS");
  if (!dir || !*dir) dir = "testvectors/journal-v1";
  int failed = run_vectors("journal-vectors", dir, "name");
  char ck[8192];
  snprintf(ck, sizeof ck, "%s/ckpt", workdir);
  unlink(ck);
  snprintf(ck, sizeof ck, "%s/ckpt.dcr-journal", workdir);
  unlink(ck);
  rmdir(workdir);
  return failed;
}
