/*
 * test_journal_vectors.c - plays every apply journal test vector of
 * testvectors/journal-v1/ and journal-v1.1/ (SPEC.md §18) through
 * dcr_journal_recover_known, one cmocka test per vector, by the rules of journal
 * 1.1:
 *
 *   before -> CKPT, journal -> CKPT.dcr-journal, journal_tmp -> CKPT.dcr-journal.tmp,
 *   dcr_journal_recover_known(CKPT, known_states)
 *
 *   replayed:    rc 0, outcome REPLAYED, CKPT is `after`, no journal left; then
 *                again from `after` with the journal put back (idempotence, §18.4)
 *   discarded:   rc 0, outcome DISCARDED, CKPT is `before`, no journal left (R-JNL-4)
 *   unpublished: rc 0, outcome NONE, CKPT is `before`, the .tmp journal gone
 *   kept, error: rc is the code (DCR_E_JOURNAL), CKPT is `before` byte for byte,
 *                the journal still there, unchanged (R-JNL-3); the same again
 *   uncommitted: (1.0) as kept since journal 1.1 (§18.5)
 *
 *   usage: test_journal_vectors [DIR]      (DCR_JOURNAL_VERBOSE=1: print each answer)
 *
 * DIR is the folder holding index.json: the argument, else $DCR_JOURNAL_VECTORS,
 * else both folders (run from the repository root).
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

/* The known states of a 1.1 vector (R-JNL-4), at most 4. */
static size_t known_states(const json_t *v, uint8_t out[4][16]) {
  const json_t *a = json_object_get(v, "known_states");
  size_t n = json_array_size(a);
  if (n > 4) fail_msg("more than 4 known states");
  for (size_t i = 0; i < n; i++) {
    const char *h = json_string_value(json_array_get(a, i));
    if (!h || strlen(h) != 32) fail_msg("a known state is not 32 hex digits");
    for (int k = 0; k < 16; k++) {
      unsigned x;
      if (sscanf(h + 2 * k, "%2x", &x) != 1) fail_msg("bad hex in a known state");
      out[i][k] = (uint8_t)x;
    }
  }
  return n;
}

typedef struct {
  char ckpt[8192], jpath[8300], tpath[8300];
  blob before, journal, temp, after;
  uint8_t known[4][16];
  size_t known_count;
} scene;

/* Puts the checkpoint `state` and the vector's journals in place and recovers;
 * returns the code. */
static int recover(scene *sc, const blob *state, int *outcome, dcr_detail *d) {
  unlink(sc->jpath), unlink(sc->tpath);
  if (spit(sc->ckpt, state->p, state->n) ||
      (sc->journal.present && spit(sc->jpath, sc->journal.p, sc->journal.n)) ||
      (sc->temp.present && spit(sc->tpath, sc->temp.p, sc->temp.n)))
    fail_msg("cannot write to %s", workdir);
  *outcome = -1;
  memset(d, 0, sizeof *d);
  return dcr_journal_recover_known(sc->ckpt, 0, sc->known[0], sc->known_count, outcome, d);
}

/* A journal kept: DCR_E_JOURNAL, the checkpoint and the journal byte for byte as
 * they were (a journal under the temporary name gone), twice. */
static void expect_kept(const char *name, scene *sc, int rc, const char *why, int want) {
  dcr_detail d;
  int outcome;
  for (int again = 0; again < 2; again++) {
    if (again) rc = recover(sc, &sc->before, &outcome, &d), why = d.message;
    if (rc != want)
      fail_msg("%s: expected %s, got %s (%s)", name, dcr_error_name(want),
               rc ? dcr_error_name(rc) : "success", why);
    if (!same(sc->ckpt, &sc->before)) fail_msg("%s: a journal that fails changed the checkpoint", name);
    if (!same(sc->jpath, &sc->journal)) fail_msg("%s: a journal that fails was removed or changed", name);
    if (access(sc->tpath, F_OK) == 0) fail_msg("%s: the unpublished journal was left", name);
  }
}

static void play(void **state) {
  const json_t *v = *state;
  const char *name = json_string_value(json_object_get(v, "name"));
  const char *outcome_name = json_string_value(json_object_get(v, "outcome"));
  const json_t *err = json_object_get(v, "error");
  scene sc = {.before = load(v, "before"), .journal = load(v, "journal"),
              .temp = load(v, "journal_tmp"), .after = load(v, "after")};
  if (!sc.before.present || (!sc.journal.present && !sc.temp.present))
    fail_msg("%s: no before or journal file", name);
  sc.known_count = known_states(v, sc.known);
  snprintf(sc.ckpt, sizeof sc.ckpt, "%s/ckpt", workdir);
  snprintf(sc.jpath, sizeof sc.jpath, "%s.dcr-journal", sc.ckpt);
  snprintf(sc.tpath, sizeof sc.tpath, "%s.dcr-journal.tmp", sc.ckpt);
  int outcome;
  dcr_detail d;
  int rc = recover(&sc, &sc.before, &outcome, &d);
  int journal_left = access(sc.jpath, F_OK) == 0 || access(sc.tpath, F_OK) == 0;
  char why[600] = "";
  if (rc) snprintf(why, sizeof why, " (%s: %s)", dcr_error_name(rc), d.message);
  if (getenv("DCR_JOURNAL_VERBOSE"))
    printf("%s: %s, outcome %d%s\n", name, rc ? dcr_error_name(rc) : "ok", outcome, why);

  if (!strcmp(outcome_name, "replayed")) {
    if (!sc.after.present) fail_msg("%s: a replayed vector without an after file", name);
    if (rc) fail_msg("%s: expected replayed, got %s%s", name, dcr_error_name(rc), why);
    if (outcome != DCR_JOURNAL_REPLAYED) fail_msg("%s: replayed, but outcome = %d", name, outcome);
    if (!same(sc.ckpt, &sc.after)) fail_msg("%s: the replayed checkpoint is not the after file", name);
    if (journal_left) fail_msg("%s: a journal was left after the replay", name);
    /* idempotence: replaying onto the result gives the result (§18.4) */
    rc = recover(&sc, &sc.after, &outcome, &d);
    if (rc)
      fail_msg("%s: replaying again onto the after file: %s (%s)", name, dcr_error_name(rc),
               d.message);
    if (outcome != DCR_JOURNAL_REPLAYED) fail_msg("%s: replaying again: outcome = %d", name, outcome);
    if (!same(sc.ckpt, &sc.after)) fail_msg("%s: replaying again changed the after file", name);
    if (access(sc.jpath, F_OK) == 0) fail_msg("%s: replaying again left the journal", name);
  } else if (!strcmp(outcome_name, "discarded") || !strcmp(outcome_name, "unpublished")) {
    int want = outcome_name[0] == 'd' ? DCR_JOURNAL_DISCARDED : DCR_JOURNAL_NONE;
    if (rc) fail_msg("%s: expected %s, got %s%s", name, outcome_name, dcr_error_name(rc), why);
    if (outcome != want) fail_msg("%s: %s, but outcome = %d", name, outcome_name, outcome);
    if (!same(sc.ckpt, &sc.before)) fail_msg("%s: the checkpoint changed", name);
    if (journal_left) fail_msg("%s: a journal was left", name);
  } else if (!strcmp(outcome_name, "uncommitted")) {
    /* journal 1.0's outcome, which 1.1 turns into kept (SPEC.md §18.5): these
     * checkpoints are not safetensors files, so nothing proves them whole */
    expect_kept(name, &sc, rc, why, DCR_E_JOURNAL);
  } else if (!strcmp(outcome_name, "error") || !strcmp(outcome_name, "kept")) {
    int want = json_is_string(err) ? code_of(json_string_value(err)) : -1;
    if (want <= 0) fail_msg("%s: an error vector without a known error code", name);
    expect_kept(name, &sc, rc, why, want);
  } else {
    fail_msg("%s: unknown outcome %s", name, outcome_name ? outcome_name : "(none)");
  }
  unlink(sc.ckpt), unlink(sc.jpath), unlink(sc.tpath);
  free(sc.before.p), free(sc.journal.p), free(sc.temp.p), free(sc.after.p);
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : getenv("DCR_JOURNAL_VECTORS");
  int failed;
  if (dir && *dir) {
    failed = run_vectors("journal-vectors", dir, "name");
  } else { /* both versions, each by the rules of 1.1 (SPEC.md §18.5) */
    failed = run_vectors("journal-vectors", "testvectors/journal-v1", "name");
    rmdir(workdir);
    failed += run_vectors("journal-vectors", "testvectors/journal-v1.1", "name");
  }
  rmdir(workdir);
  return failed;
}
