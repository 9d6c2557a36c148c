/*
 * vectors_runner.h - what the test vector runners share (test_vectors.c for
 * bundles, test_journal_vectors.c for apply journals): the folders, reading a file
 * whole, and a main() body that loads DIR/index.json, makes a work folder and runs
 * the runner's `play` once per vector, each as a cmocka test named by the vector's
 * `name_key` field. Included once, after cmocka.h.
 */
#ifndef DCR_VECTORS_RUNNER_H
#define DCR_VECTORS_RUNNER_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static char root[4096];    /* the folder the index's paths are relative to */
static char workdir[4096]; /* a temporary folder */

/* One vector; state is its object in the index. */
static void play(void **state);

/* The whole file, or NULL if it cannot be opened; *size its length. */
static uint8_t *slurp(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  uint8_t *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n == cap) {
      cap = cap ? 2 * cap : 65536;
      uint8_t *p = realloc(buf, cap);
      if (!p) break;
      buf = p;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (!got) break;
  }
  fclose(f);
  *size = n;
  return buf;
}

/* Runs the vectors of dir/index.json; `tag` names the runner in messages and the
 * work folder. Returns the number of failed vectors (or 1 if none could run). */
static int run_vectors(const char *tag, const char *dir, const char *name_key) {
  char path[4096 + 16];
  snprintf(path, sizeof path, "%s/index.json", dir);
  json_error_t e;
  json_t *index = json_load_file(path, 0, &e);
  if (!index) {
    fprintf(stderr, "%s: cannot load %s: %s\n", tag, path, e.text);
    return 1;
  }
  const char *r = json_string_value(json_object_get(index, "root"));
  snprintf(root, sizeof root, "%s/%s", dir, r ? r : ".");
  snprintf(workdir, sizeof workdir, "%s/dcr-%s.XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", tag);
  if (!mkdtemp(workdir)) {
    perror("mkdtemp");
    json_decref(index);
    return 1;
  }
  const json_t *vectors = json_object_get(index, "vectors");
  size_t n = json_array_size(vectors);
  struct CMUnitTest *tests = calloc(n ? n : 1, sizeof *tests);
  if (!tests) return json_decref(index), 1;
  for (size_t i = 0; i < n; i++) {
    json_t *v = json_array_get(vectors, i);
    tests[i].name = json_string_value(json_object_get(v, name_key));
    tests[i].test_func = play;
    tests[i].initial_state = v;
  }
  int failed = _cmocka_run_group_tests(tag, tests, n, NULL, NULL);
  free(tests);
  json_decref(index);
  return failed;
}

#endif
