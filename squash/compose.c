/*
 * compose.c - one chunk's changes along a chain of bundles, composed without the
 * base (SPEC.md §10.4): XOR values XOR together, ULP deltas add in key space
 * (modulo 2^w), an overwrite replaces whatever came before, and an XOR or a delta
 * after an overwrite transforms the overwritten value. The composition is kept
 * per element, so that changes on other elements never interfere; what cannot be
 * told without the base is refused, never guessed.
 */
#include <stdlib.h>

#include "squash.h"

int dcr__composer_init(dcr__composer *c, size_t chunk_size) {
  memset(c, 0, sizeof *c);
  c->state = malloc(chunk_size);
  c->acc = malloc(chunk_size);
  if (c->state && c->acc) return DCR_OK;
  dcr__composer_free(c);
  return DCR_E_NOMEM;
}

void dcr__composer_free(dcr__composer *c) {
  free(c->state);
  free(c->acc);
  memset(c, 0, sizeof *c);
}

void dcr__compose_start(dcr__composer *c, size_t n, unsigned esize) {
  c->n = n;
  c->esize = esize;
  memset(c->state, 0, n);
}

static int is_zero(const uint8_t *v, unsigned esize) {
  uint8_t any = 0;
  for (unsigned b = 0; b < esize; b++) any |= v[b];
  return !any;
}

/* acc = zigzag(unzigzag(acc) + unzigzag(z)) modulo 2^w: two deltas in key space. */
#define ADD(T)                                                         \
  {                                                                    \
    T a, b;                                                            \
    memcpy(&a, acc, sizeof a);                                         \
    memcpy(&b, z, sizeof b);                                           \
    a = (T)(DCR__UNZIGZAG(T, a) + DCR__UNZIGZAG(T, b));                \
    a = DCR__ZIGZAG(T, a);                                             \
    memcpy(acc, &a, sizeof a);                                         \
  }

static void add_deltas(uint8_t *acc, const uint8_t *z, unsigned esize) {
  switch (esize) {
    case 1: ADD(uint8_t) break;
    case 2: ADD(uint16_t) break;
    case 4: ADD(uint32_t) break;
    default: ADD(uint64_t) break;
  }
}

static const char *const op_name[] = {"XOR", "overwrite", "ULP delta"};

/* Element p takes one more change, of op with value v. An overwrite whose element
 * changes again, or that replaces an earlier change, could end at the element's
 * base value, which would then not be a change (§9.2): only the base can say. */
static int add_one(dcr__composer *c, int op, size_t p, const uint8_t *v, dcr_detail *d) {
  uint8_t *acc = c->acc + p * c->esize;
  int was = c->state[p] - 1; /* -1: unchanged so far */
  if (was < 0) {
    c->state[p] = (uint8_t)(op + 1);
    memcpy(acc, v, c->esize);
    return DCR_OK;
  }
  if (was == DCR__OP_OVERWRITE || op == DCR__OP_OVERWRITE)
    return dcr__fail(d, DCR_E_ARGUMENT, "element %zu takes a %s after a %s: whether it ends at "
                     "its base value (and so is no change) needs the base", p, op_name[op],
                     op_name[was]);
  if (was != op)
    return dcr__fail(d, DCR_E_ARGUMENT, "element %zu takes a %s after a %s: they compose only "
                     "through its value, which needs the base", p, op_name[op], op_name[was]);
  if (op == DCR__OP_XOR)
    for (unsigned b = 0; b < c->esize; b++) acc[b] ^= v[b];
  else
    add_deltas(acc, v, c->esize);
  /* back at its base value: unchanged, so that what comes next starts afresh */
  if (is_zero(acc, c->esize)) c->state[p] = 0;
  return DCR_OK;
}

int dcr__compose_add(dcr__composer *c, int op, const uint32_t *pos, const uint8_t *planes,
                     size_t k, dcr_detail *d) {
  if (!pos && op == DCR__OP_OVERWRITE)
    return dcr__fail(d, DCR_E_ARGUMENT, "a dense overwrite does not say which of its elements "
                     "change: that needs the base");
  uint8_t v[8];
  for (size_t i = 0; i < k; i++) {
    for (unsigned b = 0; b < c->esize; b++) v[b] = planes[b * k + i];
    if (!pos && is_zero(v, c->esize)) continue; /* dense XOR or delta: unchanged */
    int rc = add_one(c, op, pos ? pos[i] : i, v, d);
    if (rc) return rc;
  }
  return DCR_OK;
}

int dcr__compose_end(const dcr__composer *c, int *op, uint32_t *pos, uint8_t *values,
                     size_t *count, dcr_detail *d) {
  size_t m = 0;
  int kind = -1;
  for (size_t p = 0; p < c->n; p++) {
    if (!c->state[p]) continue;
    int o = c->state[p] - 1;
    if (kind >= 0 && o != kind)
      return dcr__fail(d, DCR_E_ARGUMENT, "the chunk ends with both %s and %s changes, and a "
                       "chunk has one encoding: recoding one kind as the other needs the base",
                       op_name[kind], op_name[o]);
    kind = o;
    pos[m] = (uint32_t)p;
    memcpy(values + m * c->esize, c->acc + p * c->esize, c->esize);
    m++;
  }
  *op = kind < 0 ? DCR__OP_XOR : kind;
  *count = m;
  return DCR_OK;
}
