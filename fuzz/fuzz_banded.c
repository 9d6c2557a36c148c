/*
 * fuzz_banded.c - DELTA_BANDED (SPEC.md §9.5, format 1.3), differentially: its
 * reader (banded.c, golomb.c) and its walk (band_walk.c), for every dtype. Input:
 * fuzz_banded_input (fuzz_common.h).
 *
 * Decode: the data is decoded as one chunk of n elements against a base made from
 * the header, through the chunk decoder of a 1.3 bundle, by every walk (portable
 * C, AVX2, the CPU's best: dcr__classed_vector 0, 2, 1), each over the whole chunk
 * in place (as apply and its check pass do) and in pieces of `step` elements into
 * another buffer; every one must give the same error code and the same bytes. dcr_changes' walk (dcr__classed_collect) must then meet the same
 * changes, in element order: applied one by one they give those bytes.
 *
 * Round trip: a target made from the base by the recipes is written by
 * dcr__banded_write, the same bytes by every walk (its ranks come from the walk's
 * masks); its data must check without a base and give the target exactly by
 * every walk, and collect must list exactly its changes.
 */
#include "fuzz_common.h"

#define FUZZ_MAX_INPUT (FUZZ_BANDED_HEADER + 16 * FUZZ_BANDED_BYTES)

static const int walks[] = {0, 2, 1}; /* dcr__classed_vector */
#define WALKS (sizeof walks / sizeof walks[0])

typedef struct {
  dcr__chunk_decoder dd;
  dcr__chunk c;
  const fuzz_banded_input *in;
  const uint8_t *base;
  uint8_t *out;
  uint32_t *pos;
  uint8_t *values;
} state;

/* The whole chunk, in place (dcr__decode_chunk, as apply does). */
static int walk_whole(state *s, const uint8_t *data, size_t length, uint8_t *out) {
  dcr_detail d;
  memcpy(out, s->base, s->in->n * s->in->esize);
  return dcr__decode_chunk(&s->dd, &s->c, data, length, s->in->dtype, s->in->n, out, &d);
}

/* In pieces of `step` elements, read from the base, written to out. */
static int walk_steps(state *s, const uint8_t *data, size_t length, uint8_t *out) {
  dcr_detail d;
  const uint8_t *planes;
  size_t n = s->in->n;
  memcpy(out, s->base, n * s->in->esize);
  int rc = dcr__chunk_streams(&s->dd, &s->c, data, length, s->in->dtype, n, &planes, &d);
  if (rc) return rc;
  for (size_t at = 0; at < n; at += s->in->step)
    dcr__classed_walk(s->dd.cls, planes, s->base, out, at,
                      at + s->in->step < n ? at + s->in->step : n);
  return dcr__classed_end(s->dd.cls, &d);
}

/* Every walk gives `expect` (rc) and `want` (bytes); collect meets the changes
 * that make want, and, where `z` is given, exactly positions pos0 with values z. */
static void check(state *s, const uint8_t *data, size_t length, int expect, const uint8_t *want,
                  const uint32_t *pos0, const uint8_t *z) {
  static int (*const kinds[])(state *, const uint8_t *, size_t, uint8_t *) = {walk_whole,
                                                                             walk_steps};
  const fuzz_banded_input *in = s->in;
  size_t bytes = in->n * in->esize;
  for (size_t w = 0; w < WALKS; w++)
    for (size_t k = 0; k < 2; k++) {
      dcr__classed_vector = walks[w];
      int rc = kinds[k](s, data, length, s->out);
      FUZZ_DEBUG("walk %d, kind %zu: %s\n", walks[w], k, dcr_error_name(rc));
      FUZZ_ASSERT(rc == expect);
      FUZZ_ASSERT(memcmp(s->out, want, bytes) == 0);
    }
  /* dcr_changes' walk, by every walk: changes in element order that make want */
  for (size_t w = 0; w < WALKS; w++) {
    dcr_detail d;
    const uint8_t *planes;
    dcr__classed_vector = walks[w];
    int rc = dcr__chunk_streams(&s->dd, &s->c, data, length, in->dtype, in->n, &planes, &d);
    if (rc) {
      FUZZ_ASSERT(rc == expect);
      continue;
    }
    size_t met = dcr__classed_collect(s->dd.cls, planes, s->base, in->n, s->pos, s->values);
    FUZZ_ASSERT(dcr__classed_end(s->dd.cls, &d) == expect);
    FUZZ_ASSERT(met <= s->c.count);
    if (expect == DCR_OK) FUZZ_ASSERT(met == s->c.count);
    memcpy(s->out, s->base, bytes);
    for (size_t j = 0; j < met; j++) {
      FUZZ_ASSERT(s->pos[j] < in->n && (j == 0 || s->pos[j - 1] < s->pos[j]));
      dcr__delta_apply(s->out + (size_t)s->pos[j] * in->esize, s->values + j * in->esize,
                       in->esize);
    }
    FUZZ_ASSERT(memcmp(s->out, want, bytes) == 0);
    if (z) {
      FUZZ_ASSERT(met == s->c.count);
      FUZZ_ASSERT(memcmp(s->pos, pos0, met * sizeof *pos0) == 0);
      FUZZ_ASSERT(memcmp(s->values, z, met * in->esize) == 0);
    }
  }
  dcr__classed_vector = 1;
}

static void decode(state *s, const uint8_t *data, size_t length) {
  const fuzz_banded_input *in = s->in;
  size_t bytes = in->n * in->esize;
  s->c.count = in->count;
  dcr_detail d;
  int verified = dcr__decode_chunk(&s->dd, &s->c, data, length, in->dtype, in->n, NULL, &d);
  uint8_t *want = malloc(bytes);
  FUZZ_ASSERT(want);
  int applied = walk_whole(s, data, length, want); /* the scalar walk's, the reference */
  FUZZ_DEBUG("verify: %s, apply: %s %s\n", dcr_error_name(verified), dcr_error_name(applied),
             applied ? d.message : "");
  if (verified != DCR_OK) FUZZ_ASSERT(applied == verified);
  if (applied == DCR_OK) FUZZ_ASSERT(dcr__count_changed(s->base, want, in->n, in->esize) == in->count);
  check(s, data, length, applied, want, NULL, NULL);
  free(want);
}

static void round_trip(state *s, const uint8_t *recipes, size_t length) {
  const fuzz_banded_input *in = s->in;
  uint8_t *target = malloc(in->n * in->esize);
  FUZZ_ASSERT(target);
  fuzz_banded_target(in, s->base, recipes, length, target);
  fuzz_banded_written w;
  fuzz_banded_write(in, s->base, target, &w);
  if (w.count) {
    const uint8_t *data = w.data;
    FUZZ_DEBUG("round trip: %zu changes of %zu, %zu bytes, %u bands, inverted 0x%02x\n", w.count,
               in->n, w.length, data[0],
               w.length == SIZE_MAX ? 0 : data[1 + 2 * (data[0] - 1) + 4 * data[0]]);
    FUZZ_ASSERT(w.length != SIZE_MAX);
    for (size_t m = 0; m < WALKS; m++) { /* the writer's ranks come from the walk's masks */
      fuzz_banded_written again;
      dcr__classed_vector = walks[m];
      fuzz_banded_write(in, s->base, target, &again);
      FUZZ_ASSERT(again.length == w.length && memcmp(again.data, w.data, w.length) == 0);
      fuzz_banded_written_free(&again);
    }
    dcr__classed_vector = 1;
    s->c.count = (uint32_t)w.count;
    dcr_detail d;
    FUZZ_ASSERT(dcr__decode_chunk(&s->dd, &s->c, data, w.length, in->dtype, in->n, NULL, &d) ==
                DCR_OK);
    check(s, data, w.length, DCR_OK, target, w.pos, w.z);
  }
  fuzz_banded_written_free(&w);
  free(target);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < FUZZ_BANDED_HEADER || size > FUZZ_MAX_INPUT) return 0;
  fuzz_banded_input in;
  fuzz_banded_read(data, &in);
  const uint8_t *rest = data + FUZZ_BANDED_HEADER;
  size_t length = size - FUZZ_BANDED_HEADER, bytes = in.n * in.esize;
  if (in.roundtrip && !length) return 0;
  state s;
  memset(&s, 0, sizeof s);
  s.in = &in;
  s.c.encoding = DCR_ENC_DELTA_BANDED;
  s.c.compression = DCR_COMP_NONE;
  s.c.payload_length = DCR__RECORD_SIZE + length;
  FUZZ_ASSERT(dcr__chunk_decoder_init(&s.dd, bytes, 3) == DCR_OK);
  uint8_t *base = malloc(bytes);
  s.out = malloc(bytes);
  s.pos = malloc(in.n * sizeof *s.pos);
  s.values = malloc(bytes);
  FUZZ_ASSERT(base && s.out && s.pos && s.values);
  fuzz_banded_base(&in, base);
  s.base = base;
  if (in.roundtrip)
    round_trip(&s, rest, length);
  else
    decode(&s, rest, length);
  free(base), free(s.out), free(s.pos), free(s.values);
  dcr__chunk_decoder_free(&s.dd);
  return 0;
}
