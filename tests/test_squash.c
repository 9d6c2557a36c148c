/*
 * test_squash.c - the squash room (squash/, SPEC.md §10.4): the composition of
 * one chunk's changes (compose.c), and dcr_squash on chains whose tensors are
 * added, resized, recoded and removed along the way, or whose overwrites compose.
 * Each chain is made of small safetensors files (chunks of 4 KiB) written here and
 * bundles encoded between them; a squashed bundle must apply to step 0 and give
 * the last step byte for byte.
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

#include "../squash/squash.h"

/* ---- the composer ------------------------------------------------------- */

/* Adds one sparse change of 2-byte values to c. */
static int add2(dcr__composer *c, int op, size_t k, const uint32_t *pos, const uint16_t *v) {
  uint8_t planes[64];
  for (size_t i = 0; i < k; i++) planes[i] = (uint8_t)v[i], planes[k + i] = (uint8_t)(v[i] >> 8);
  return dcr__compose_add(c, op, pos, planes, k, NULL);
}

static void test_compose_cancel_and_wrap(void **state) {
  (void)state;
  dcr__composer c;
  assert_int_equal(dcr__composer_init(&c, 64), DCR_OK);
  dcr__compose_start(&c, 8, 2);
  /* deltas +1 (zigzag 2) then -1 (zigzag 1) at 1: back at the base, dropped;
   * -32768 (zigzag 0xffff) then -32768 again at 3: 2^16, zero modulo 2^w;
   * +1 then +2 at 5: +3, zigzag 6 */
  uint32_t p1[] = {1, 3, 5}, p2[] = {1, 3, 5};
  uint16_t v1[] = {2, 0xffff, 2}, v2[] = {1, 0xffff, 4};
  assert_int_equal(add2(&c, DCR__OP_DELTA, 3, p1, v1), DCR_OK);
  assert_int_equal(add2(&c, DCR__OP_DELTA, 3, p2, v2), DCR_OK);
  uint32_t pos[8];
  uint8_t values[16];
  size_t count;
  int op;
  assert_int_equal(dcr__compose_end(&c, &op, pos, values, &count, NULL), DCR_OK);
  assert_int_equal(op, DCR__OP_DELTA);
  assert_int_equal(count, 1);
  assert_int_equal(pos[0], 5);
  assert_int_equal(values[0] | values[1] << 8, 6);
  /* XOR, and an element back at its base value starts afresh: then overwritten
   * once more, as its only change */
  dcr__compose_start(&c, 8, 2);
  uint16_t x[] = {0x40};
  uint32_t at[] = {2};
  assert_int_equal(add2(&c, DCR__OP_XOR, 1, at, x), DCR_OK);
  assert_int_equal(add2(&c, DCR__OP_XOR, 1, at, x), DCR_OK);
  assert_int_equal(dcr__compose_end(&c, &op, pos, values, &count, NULL), DCR_OK);
  assert_int_equal(count, 0);
  uint16_t w[] = {0x1234};
  assert_int_equal(add2(&c, DCR__OP_OVERWRITE, 1, at, w), DCR_OK);
  assert_int_equal(dcr__compose_end(&c, &op, pos, values, &count, NULL), DCR_OK);
  assert_int_equal(op, DCR__OP_OVERWRITE);
  assert_int_equal(count, 1);
  assert_int_equal(values[0] | values[1] << 8, 0x1234);
  dcr__composer_free(&c);
}

static void test_compose_refuses_what_needs_the_base(void **state) {
  (void)state;
  dcr__composer c;
  dcr_detail d;
  uint32_t at[] = {4}, other[] = {6}, pos[8];
  uint16_t v[] = {3};
  uint8_t values[16], dense[16] = {1};
  size_t count;
  int op;
  dcr__detail_init(&d);
  assert_int_equal(dcr__composer_init(&c, 64), DCR_OK);
  /* XOR then delta on one element */
  dcr__compose_start(&c, 8, 2);
  assert_int_equal(add2(&c, DCR__OP_XOR, 1, at, v), DCR_OK);
  assert_int_equal(dcr__compose_add(&c, DCR__OP_DELTA, at, (const uint8_t[]){3, 0}, 1, &d),
                   DCR_E_ARGUMENT);
  assert_non_null(strstr(d.message, "needs the base"));
  /* an overwritten element changed again, and a change then overwritten */
  dcr__compose_start(&c, 8, 2);
  assert_int_equal(add2(&c, DCR__OP_OVERWRITE, 1, at, v), DCR_OK);
  assert_int_equal(add2(&c, DCR__OP_XOR, 1, at, v), DCR_E_ARGUMENT);
  dcr__compose_start(&c, 8, 2);
  assert_int_equal(add2(&c, DCR__OP_DELTA, 1, at, v), DCR_OK);
  assert_int_equal(add2(&c, DCR__OP_OVERWRITE, 1, at, v), DCR_E_ARGUMENT);
  /* two kinds left in one chunk */
  dcr__compose_start(&c, 8, 2);
  assert_int_equal(add2(&c, DCR__OP_XOR, 1, at, v), DCR_OK);
  assert_int_equal(add2(&c, DCR__OP_DELTA, 1, other, v), DCR_OK);
  assert_int_equal(dcr__compose_end(&c, &op, pos, values, &count, &d), DCR_E_ARGUMENT);
  /* a dense overwrite */
  dcr__compose_start(&c, 8, 2);
  assert_int_equal(dcr__compose_add(&c, DCR__OP_OVERWRITE, NULL, dense, 8, NULL), DCR_E_ARGUMENT);
  dcr__composer_free(&c);
}

/* ---- chains of checkpoints ---------------------------------------------- */

typedef struct {
  const char *name, *dtype;
  unsigned esize;
  size_t n;
  uint8_t *data;
} tensor;

typedef struct {
  size_t count;
  tensor t[4];
} model;

static char dir[64];
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Dull;
}

static const char *path(const char *name) {
  static char p[8][128];
  static unsigned k;
  char *out = p[k++ % 8];
  snprintf(out, 128, "%s/%s", dir, name);
  return out;
}

static tensor *find(model *m, const char *name) {
  for (size_t i = 0; i < m->count; i++)
    if (!strcmp(m->t[i].name, name)) return &m->t[i];
  return NULL;
}

/* Adds (or replaces) a tensor of random values. */
static void put(model *m, const char *name, const char *dtype, unsigned esize, size_t n) {
  tensor *t = find(m, name);
  if (!t) t = &m->t[m->count++];
  else free(t->data);
  *t = (tensor){name, dtype, esize, n, malloc(n * esize)};
  assert_non_null(t->data);
  for (size_t i = 0; i < n * esize; i++) t->data[i] = (uint8_t)rng();
}

static void drop(model *m, const char *name) {
  tensor *t = find(m, name);
  free(t->data);
  *t = m->t[--m->count];
}

/* n elements grow (or shrink): the first ones kept, the new ones random. */
static void resize(model *m, const char *name, size_t n) {
  tensor *t = find(m, name);
  t->data = realloc(t->data, n * t->esize);
  assert_non_null(t->data);
  for (size_t i = t->n * t->esize; i < n * t->esize; i++) t->data[i] = (uint8_t)rng();
  t->n = n;
}

/* Every k-th element from `first`: op 0 flips bit 6 of its first byte, 1 sets it
 * to zero, 2 adds one to its low byte (an ULP or so). */
static void touch(model *m, const char *name, size_t first, size_t k, int op) {
  tensor *t = find(m, name);
  for (size_t i = first; i < t->n; i += k) {
    uint8_t *e = t->data + i * t->esize;
    if (op == 0) e[0] ^= 0x40;
    else if (op == 1) memset(e, 0, t->esize);
    else e[0]++;
  }
}

static void save(const model *m, const char *name) {
  char h[1024];
  size_t at = (size_t)snprintf(h, sizeof h, "{");
  uint64_t off = 0;
  for (size_t i = 0; i < m->count; i++) {
    const tensor *t = &m->t[i];
    at += (size_t)snprintf(h + at, sizeof h - at,
                           "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%zu],\"data_offsets\":[%llu,%llu]}",
                           i ? "," : "", t->name, t->dtype, t->n, (unsigned long long)off,
                           (unsigned long long)(off + t->n * t->esize));
    off += t->n * t->esize;
  }
  h[at++] = '}';
  while (at % 8) h[at++] = ' ';
  FILE *f = fopen(path(name), "wb");
  assert_non_null(f);
  uint8_t len[8];
  for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)at >> (8 * i));
  assert_int_equal(fwrite(len, 1, 8, f), 8);
  assert_int_equal(fwrite(h, 1, at, f), at);
  for (size_t i = 0; i < m->count; i++)
    assert_int_equal(fwrite(m->t[i].data, 1, m->t[i].n * m->t[i].esize, f), m->t[i].n * m->t[i].esize);
  assert_int_equal(fclose(f), 0);
}

static void model_free(model *m) {
  for (size_t i = 0; i < m->count; i++) free(m->t[i].data);
  m->count = 0;
}

static uint8_t *slurp(const char *p, size_t *n) {
  FILE *f = fopen(p, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  rewind(f);
  uint8_t *b = malloc(*n + 1);
  assert_int_equal(fread(b, 1, *n, f), *n);
  fclose(f);
  return b;
}

static int same_file(const char *a, const char *b) {
  size_t na, nb;
  uint8_t *pa = slurp(a, &na), *pb = slurp(b, &nb);
  int same = na == nb && !memcmp(pa, pb, na);
  free(pa), free(pb);
  return same;
}

/* sI.st -> sJ.st as bI.dcr, chunks of 4 KiB, format 1.`minor`. */
static void encode(int i, int minor) {
  char a[16], b[16], out[16];
  snprintf(a, sizeof a, "s%d.st", i - 1);
  snprintf(b, sizeof b, "s%d.st", i);
  snprintf(out, sizeof out, "b%d.dcr", i);
  dcr_encode_options o;
  dcr_encode_options_default(&o);
  o.chunk_size = 4096;
  o.max_minor = minor;
  o.threads = 1;
  dcr_detail d;
  char pa[128], pb[128];
  snprintf(pa, sizeof pa, "%s", path(a));
  snprintf(pb, sizeof pb, "%s", path(b));
  int rc = dcr_encode_file(pa, pb, path(out), &o, NULL, &d);
  if (rc) fprintf(stderr, "encode %s: %s\n", out, d.message);
  assert_int_equal(rc, DCR_OK);
}

/* Squashes b{first..last}.dcr with `base` (NULL: none) into sq.dcr on `threads`. */
static int squash(int first, int last, const char *base, unsigned threads, dcr_encode_stats *st,
                  dcr_detail *d) {
  char names[24][128];
  const char *paths[24];
  for (int i = first; i <= last; i++) {
    char b[16];
    snprintf(b, sizeof b, "b%d.dcr", i);
    snprintf(names[i - first], sizeof names[0], "%s", path(b));
    paths[i - first] = names[i - first];
  }
  dcr_squash_options o;
  dcr_squash_options_default(&o);
  o.threads = threads;
  o.no_sync = 1;
  char bp[128], out[128];
  if (base) snprintf(bp, sizeof bp, "%s", path(base));
  snprintf(out, sizeof out, "%s", path("sq.dcr"));
  return dcr_squash(paths, (size_t)(last - first + 1), base ? bp : NULL, out, &o, st, d);
}

/* sq.dcr applied to `base` gives `target`, byte for byte. */
static void applies(const char *base, const char *target) {
  dcr_reader *r;
  dcr_detail d;
  char b[128], out[128];
  snprintf(b, sizeof b, "%s", path(base));
  snprintf(out, sizeof out, "%s", path("out.st"));
  assert_int_equal(dcr_reader_open_file(&r, path("sq.dcr"), NULL, &d), DCR_OK);
  assert_int_equal(dcr_reader_verify(r, &d), DCR_OK);
  int rc = dcr_apply(r, b, out, NULL, &d);
  if (rc) fprintf(stderr, "apply: %s\n", d.message);
  assert_int_equal(rc, DCR_OK);
  dcr_reader_free(r);
  assert_true(same_file(out, path(target)));
}

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/dcr-squash-XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd);
}

/* A tensor added at step 1 and changed at step 2 is rebuilt from the zeros it was
 * added as: no base needed, and XOR chunks of the others compose. */
static void test_added_tensor_needs_no_base(void **state) {
  (void)state;
  model m = {0};
  put(&m, "a", "BF16", 2, 8192);
  save(&m, "s0.st");
  put(&m, "d", "F32", 4, 3000);
  touch(&m, "a", 3, 50, 0);
  save(&m, "s1.st");
  touch(&m, "a", 7, 50, 0);
  touch(&m, "d", 0, 7, 0);
  save(&m, "s2.st");
  encode(1, 1), encode(2, 1);
  dcr_encode_stats st;
  dcr_detail d;
  int rc = squash(1, 2, NULL, 2, &st, &d);
  if (rc) fprintf(stderr, "squash: %s\n", d.message);
  assert_int_equal(rc, DCR_OK);
  assert_int_equal(st.tensors_added, 1);
  assert_int_equal(st.format_minor, 0);
  applies("s0.st", "s2.st");
  model_free(&m);
}

/* Overwrites of elements that no other bundle changes compose without the base,
 * and count exactly as a direct encode does. */
static void test_overwrites_compose(void **state) {
  (void)state;
  model m = {0};
  put(&m, "a", "BF16", 2, 8192);
  save(&m, "s0.st");
  touch(&m, "a", 97, 97, 1);
  save(&m, "s1.st");
  for (size_t i = 89; i < 8192; i += 89)
    if (i % 97) memset(find(&m, "a")->data + 2 * i, 0, 2);
  save(&m, "s2.st");
  encode(1, 1), encode(2, 1);
  dcr_encode_stats st, direct;
  dcr_detail d;
  assert_int_equal(squash(1, 2, NULL, 1, &st, &d), DCR_OK);
  assert_int_equal(st.chunks_by_encoding[DCR_ENC_OVERWRITE_SPARSE], 4);
  applies("s0.st", "s2.st");
  dcr_encode_options o;
  dcr_encode_options_default(&o);
  o.chunk_size = 4096;
  char a[128], b[128];
  snprintf(a, sizeof a, "%s", path("s0.st"));
  snprintf(b, sizeof b, "%s", path("s2.st"));
  assert_int_equal(dcr_encode_file(a, b, path("direct.dcr"), &o, &direct, &d), DCR_OK);
  assert_int_equal(st.changed_elements, direct.changed_elements);
  assert_int_equal(st.changed_chunks, direct.changed_chunks);
  model_free(&m);
}

/* Tensors added, resized, recoded and removed along a chain of 5: refused
 * without the base, naming the chunk; rebuilt from it, the same bytes on 1 and 2
 * threads. */
static void test_tensors_change_along_the_chain(void **state) {
  (void)state;
  model m = {0};
  put(&m, "a", "BF16", 2, 8192);
  put(&m, "b", "F32", 4, 3000);
  put(&m, "c", "U8", 1, 5000);
  save(&m, "s0.st");
  touch(&m, "a", 1, 40, 2), touch(&m, "b", 0, 33, 0);
  save(&m, "s1.st");
  put(&m, "d", "BF16", 2, 3000), touch(&m, "a", 5, 40, 2);
  save(&m, "s2.st");
  resize(&m, "b", 4000), touch(&m, "d", 2, 9, 0), touch(&m, "b", 1, 61, 1);
  save(&m, "s3.st");
  drop(&m, "c"), put(&m, "d", "F32", 4, 1500), touch(&m, "a", 9, 40, 2);
  save(&m, "s4.st");
  touch(&m, "a", 11, 40, 2), touch(&m, "d", 0, 5, 0), resize(&m, "b", 2500);
  save(&m, "s5.st");
  for (int i = 1; i <= 5; i++) encode(i, 2);
  dcr_encode_stats st;
  dcr_detail d;
  unlink(path("sq.dcr")); /* an earlier test's */
  assert_int_equal(squash(1, 5, NULL, 2, &st, &d), DCR_E_ARGUMENT);
  assert_non_null(strstr(d.message, "needs the base"));
  assert_true(d.tensor_name[0] && d.chunk != DCR_NONE);
  assert_false(access(path("sq.dcr"), F_OK) == 0);
  /* the base of the second bundle is not the first's */
  assert_int_equal(squash(1, 5, "s1.st", 2, &st, &d), DCR_E_BASE_MISMATCH);
  assert_false(access(path("sq.dcr"), F_OK) == 0);
  assert_int_equal(squash(1, 5, "s0.st", 1, &st, &d), DCR_OK);
  assert_int_equal(st.tensors_added, 1);   /* d */
  assert_int_equal(st.tensors_removed, 1); /* c */
  assert_int_equal(st.tensors_resized, 1); /* b */
  applies("s0.st", "s5.st");
  char one[128];
  snprintf(one, sizeof one, "%s", path("sq1.dcr"));
  assert_int_equal(rename(path("sq.dcr"), one), 0);
  assert_int_equal(squash(1, 5, "s0.st", 2, &st, &d), DCR_OK);
  assert_true(same_file(one, path("sq.dcr")));
  /* from step 2 on: d is added no more, b still resized */
  assert_int_equal(squash(3, 5, "s2.st", 2, &st, &d), DCR_OK);
  applies("s2.st", "s5.st");
  model_free(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_compose_cancel_and_wrap),
      cmocka_unit_test(test_compose_refuses_what_needs_the_base),
      cmocka_unit_test(test_added_tensor_needs_no_base),
      cmocka_unit_test(test_overwrites_compose),
      cmocka_unit_test(test_tensors_change_along_the_chain),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
