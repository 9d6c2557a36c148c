/*
 * chunk_encode.c - picks the smallest encoding of one chunk (SPEC.md §9). Every
 * candidate is built and measured, compressed and not; the first smallest wins
 * (lowest encoding id, then no compression), so the choice is deterministic.
 */
#include <stdlib.h>

#include "codec.h"

/* Sparse encodings cannot win above 1/2 of elements changed (each position costs
 * at least a byte more than dense), and dense ones have never won below 1/16 in
 * measurements: skipping them there halves the encoder's compression work. */
#define SPARSE_MAX_NUM 1
#define SPARSE_MAX_DEN 2
#define DENSE_MIN_DEN 16

int dcr__chunk_encoder_init(dcr__chunk_encoder *ce, size_t chunk_size, int level,
                            int classed) {
  memset(ce, 0, sizeof *ce);
  ce->level = level;
  ce->classed = classed;
  if (classed && dcr__classed_encoder_init(&ce->cw)) return DCR_E_NOMEM;
  /* Worst cases: one-byte elements (n = chunk_size positions) and eight-byte ones
   * (8 planes). Pages are touched only as far as data goes. */
  ce->trial_capacity = ZSTD_compressBound(DCR__POSITIONS_BOUND(chunk_size)) +
                       8 * ZSTD_compressBound(chunk_size);
  ce->pos = malloc(chunk_size * sizeof *ce->pos);
  ce->base_pieces = malloc(16 * DCR__PIECES(chunk_size));
  ce->target_pieces = malloc(16 * DCR__PIECES(chunk_size));
  ce->old = malloc(chunk_size);
  ce->new = malloc(chunk_size);
  ce->values = malloc(chunk_size);
  ce->planes = malloc(chunk_size);
  ce->pos_stream = malloc(DCR__POSITIONS_BOUND(chunk_size));
  ce->zpos = malloc(ZSTD_compressBound(DCR__POSITIONS_BOUND(chunk_size)));
  ce->trial = malloc(ce->trial_capacity);
  ce->best = malloc(ce->trial_capacity);
  if (level > 0 && (ce->cctx = ZSTD_createCCtx())) {
    ZSTD_CCtx_setParameter(ce->cctx, ZSTD_c_compressionLevel, level);
    /* Streams are mostly small-alphabet symbols (gap bytes, delta planes) whose
     * short repeats cost more as matches than as Huffman-coded literals. */
    ZSTD_CCtx_setParameter(ce->cctx, ZSTD_c_minMatch, 7);
  }
  if (!ce->pos || !ce->zpos || !ce->base_pieces || !ce->target_pieces || !ce->old ||
      !ce->new || !ce->values || !ce->planes || !ce->pos_stream || !ce->trial || !ce->best ||
      (level > 0 && !ce->cctx)) {
    dcr__chunk_encoder_free(ce);
    return DCR_E_NOMEM;
  }
  return DCR_OK;
}

void dcr__chunk_encoder_free(dcr__chunk_encoder *ce) {
  ZSTD_freeCCtx(ce->cctx);
  dcr__classed_encoder_free(&ce->cw);
  free(ce->pos);
  free(ce->base_pieces);
  free(ce->target_pieces);
  free(ce->old);
  free(ce->new);
  free(ce->values);
  free(ce->planes);
  free(ce->pos_stream);
  free(ce->zpos);
  free(ce->trial);
  free(ce->best);
  memset(ce, 0, sizeof *ce);
}

typedef struct {
  const uint8_t *data[2];
  size_t length[2];
  unsigned count;
} streams;

static void keep_trial(dcr__chunk_encoder *ce, dcr__encoded *best, uint8_t encoding,
                       uint8_t compression, size_t length) {
  uint8_t *t = ce->best;
  ce->best = ce->trial;
  ce->trial = t;
  best->encoding = encoding;
  best->compression = compression;
  best->length = length;
  best->data = ce->best;
}

/* The position stream of `length` bytes compressed into ce->zpos, once a chunk:
 * the sparse encodings share it. */
static int compress_positions(dcr__chunk_encoder *ce, size_t length) {
  if (ce->zpos_length != SIZE_MAX) return DCR_OK;
  size_t n = ZSTD_compress2(ce->cctx, ce->zpos, ZSTD_compressBound(length), ce->pos_stream, length);
  if (ZSTD_isError(n)) return DCR_E_NOMEM;
  ce->zpos_length = n;
  return DCR_OK;
}

/* Whether a candidate beats the best so far: smaller, or as small with a lower
 * encoding id, then no compression (§9.3), whatever order they are tried in. */
static int better(size_t length, uint8_t encoding, uint8_t compression, const dcr__encoded *best) {
  if (length != best->length) return length < best->length;
  return encoding != best->encoding ? encoding < best->encoding : compression < best->compression;
}

/* Measures one encoding stored and compressed; keeps it if better. */
static int consider(dcr__chunk_encoder *ce, uint8_t encoding, const streams *s,
                    dcr__encoded *best) {
  size_t raw = 0;
  for (unsigned i = 0; i < s->count; i++) raw += s->length[i];
  if (better(raw, encoding, DCR_COMP_NONE, best)) {
    uint8_t *p = ce->trial;
    for (unsigned i = 0; i < s->count; i++) memcpy(p, s->data[i], s->length[i]), p += s->length[i];
    keep_trial(ce, best, encoding, DCR_COMP_NONE, raw);
  }
  if (!ce->cctx) return DCR_OK;
  size_t z = 0;
  for (unsigned i = 0; i < s->count; i++) {
    size_t n;
    if (s->data[i] == ce->pos_stream) {
      if (compress_positions(ce, s->length[i])) return DCR_E_NOMEM;
      memcpy(ce->trial + z, ce->zpos, n = ce->zpos_length);
    } else {
      n = ZSTD_compress2(ce->cctx, ce->trial + z, ce->trial_capacity - z, s->data[i],
                         s->length[i]);
      if (ZSTD_isError(n)) return DCR_E_NOMEM;
    }
    z += n;
  }
  if (better(z, encoding, DCR_COMP_ZSTD, best)) keep_trial(ce, best, encoding, DCR_COMP_ZSTD, z);
  return DCR_OK;
}

/* One candidate from its k values, packed: split into planes, behind the position
 * stream (ce->pos_stream, varlen bytes) when sparse. */
static int consider_values(dcr__chunk_encoder *ce, uint8_t encoding, const uint8_t *elems,
                           size_t k, unsigned esize, size_t varlen, dcr__encoded *best) {
  streams s = {.count = 0};
  dcr__planes_split(ce->planes, elems, k, esize);
  if (dcr__enc_sparse(encoding)) s.data[s.count] = ce->pos_stream, s.length[s.count++] = varlen;
  s.data[s.count] = ce->planes, s.length[s.count++] = k * esize;
  return consider(ce, encoding, &s, best);
}

/* Hashes, compares and gathers the changed elements in blocks that stay in L1, so
 * that each input byte comes from memory once for the piece digests, the change
 * detection and the sparse encodings together. */
#define SCAN_BLOCK (8 * DCR__PIECE)

static size_t scan(dcr__chunk_encoder *ce, const uint8_t *base, const uint8_t *target,
                   size_t bytes, unsigned esize, dcr__encoded *out) {
  size_t count = 0, pieces = 0;
  for (size_t at = 0; at < bytes; at += SCAN_BLOCK) {
    size_t len = bytes - at < SCAN_BLOCK ? bytes - at : SCAN_BLOCK;
    dcr__pieces(base + at, len, ce->base_pieces + 16 * pieces);
    pieces += dcr__pieces(target + at, len, ce->target_pieces + 16 * pieces);
    size_t first = at / esize, k = dcr__detect(base + at, target + at, len / esize, esize,
                                               ce->pos + count);
    for (size_t i = count; i < count + k; i++) {
      size_t in = (size_t)ce->pos[i] * esize;
      memcpy(ce->old + i * esize, base + at + in, esize);
      memcpy(ce->new + i * esize, target + at + in, esize);
      ce->pos[i] += (uint32_t)first;
    }
    count += k;
  }
  out->base_pieces = ce->base_pieces;
  out->target_pieces = ce->target_pieces;
  out->pieces = pieces;
  out->base_check = dcr__pieces_check(ce->base_pieces, pieces);
  out->target_check = dcr__pieces_check(ce->target_pieces, pieces);
  return count;
}

/* DELTA_CLASSED (§9.4) or, in a 1.3 bundle, DELTA_BANDED (§9.5), stored: their
 * values are entropy-coded already. Returns its length, left in ce->trial. Its
 * scratch is buffers free when it runs: the ranks go where planes are made (4
 * bytes a change: the caller lets at most a quarter of the chunk's bytes change),
 * the values sorted by class or band into `sorted` (count elements). */
static size_t ranked_trial(dcr__chunk_encoder *ce, const uint8_t *base, size_t n, int dtype,
                           size_t count, uint8_t *sorted) {
  unsigned esize = dcr_dtype_size(dtype);
  uint32_t *ranks = (uint32_t *)(void *)ce->planes;
  dcr__delta_make(ce->values, ce->old, ce->new, count, esize);
  if (ce->classed >= 3)
    return dcr__banded_write(&ce->cw, ce->trial, ce->trial_capacity, base, n, dtype, ce->pos,
                             ce->old, ce->values, count, ranks, sorted);
  return dcr__classed_write(&ce->cw, ce->trial, ce->trial_capacity, base, dtype, ce->pos,
                            ce->old, ce->values, count, ranks, sorted);
}

int dcr__encode_chunk(dcr__chunk_encoder *ce, const uint8_t *base, const uint8_t *target,
                      size_t bytes, int dtype, dcr__encoded *out) {
  unsigned esize = dcr_dtype_size(dtype);
  size_t n = bytes / esize;
  memset(out, 0, sizeof *out);
  size_t count = scan(ce, base, target, bytes, esize, out);
  out->count = (uint32_t)count;
  if (!count) return DCR_OK;
  out->length = SIZE_MAX;
  int sparse = count * SPARSE_MAX_DEN <= n * SPARSE_MAX_NUM;
  int dense = count * DENSE_MIN_DEN >= n;
  size_t varlen = sparse ? dcr__positions_size(ce->pos, count) : 0;
  int written = 0;
  ce->zpos_length = SIZE_MAX;
  int rc = DCR_OK;
  /* Pruning that keeps the choice exact: every sparse candidate of 1.0 holds the
   * position stream, stored or compressed, and at least a byte more, so if
   * DELTA_CLASSED is no longer than that stream it beats them all (usually by a
   * third: its ranks cost about 5.5 bits a change where positions cost 8). */
  int classed = sparse && ce->classed && count * 4 <= bytes;
  uint8_t ranked = ce->classed >= 3 ? DCR_ENC_DELTA_BANDED : DCR_ENC_DELTA_CLASSED;
  if (classed) { /* before any candidate: ce->best is free */
    size_t length = ranked_trial(ce, base, n, dtype, count, ce->best), z = varlen;
    if (length <= varlen) {
      dcr__positions_write(ce->pos_stream, ce->pos, count);
      written = 1;
      if (ce->cctx) {
        if (compress_positions(ce, varlen)) return DCR_E_NOMEM;
        z = ce->zpos_length;
      }
      if (length <= z) {
        keep_trial(ce, out, ranked, DCR_COMP_NONE, length);
        if (!dense) return DCR_OK;
        sparse = classed = 0; /* only the dense candidates can still win: tried below */
      }
    }
  }
  if (sparse && !written) dcr__positions_write(ce->pos_stream, ce->pos, count);
  for (uint8_t enc = 1; enc <= DCR_ENC_DELTA_SPARSE && !rc; enc++) {
    int is_sparse = dcr__enc_sparse(enc), op = dcr__enc_op(enc);
    if (is_sparse ? !sparse : !dense) continue;
    size_t k = is_sparse ? count : n;
    const uint8_t *b = is_sparse ? ce->old : base, *t = is_sparse ? ce->new : target;
    const uint8_t *elems = ce->values;
    if (op == DCR__OP_DELTA) {
      dcr__delta_make(ce->values, b, t, k, esize);
    } else if (op == DCR__OP_XOR) {
      for (size_t i = 0; i < k * esize; i++) ce->values[i] = b[i] ^ t[i];
    } else {
      elems = t;
    }
    rc = consider_values(ce, enc, elems, k, esize, is_sparse ? varlen : 0, out);
  }
  if (!rc && classed) { /* not pruned: measured again after the others, with the
                         * target elements, now used, as scratch */
    size_t length = ranked_trial(ce, base, n, dtype, count, ce->new);
    if (better(length, ranked, DCR_COMP_NONE, out))
      keep_trial(ce, out, ranked, DCR_COMP_NONE, length);
  }
  return rc;
}

int dcr__encode_changes(dcr__chunk_encoder *ce, int op, const uint32_t *pos,
                        const uint8_t *values, size_t count, size_t n, unsigned esize,
                        dcr__encoded *out) {
  memset(out, 0, sizeof *out);
  out->count = (uint32_t)count;
  if (!count) return DCR_OK;
  out->length = SIZE_MAX;
  /* The pruning of dcr__encode_chunk, except that an overwrite is dense only when
   * every element changes (the others' values are the base's, not known here) and
   * so is sparse at any other count. */
  int dense = op == DCR__OP_OVERWRITE ? count == n : count * DENSE_MIN_DEN >= n;
  int sparse = count < n && (op == DCR__OP_OVERWRITE || count * SPARSE_MAX_DEN <= n * SPARSE_MAX_NUM);
  ce->zpos_length = SIZE_MAX;
  uint8_t dense_id = (uint8_t)(2 * op + 1), sparse_id = (uint8_t)(2 * op + 2);
  int rc = DCR_OK;
  if (dense) { /* zeros (XOR, delta) leave the other elements as they are */
    memset(ce->values, 0, n * esize);
    for (size_t i = 0; i < count; i++)
      memcpy(ce->values + (size_t)pos[i] * esize, values + i * esize, esize);
    rc = consider_values(ce, dense_id, ce->values, n, esize, 0, out);
  }
  if (!rc && sparse) {
    size_t varlen = dcr__positions_write(ce->pos_stream, pos, count);
    rc = consider_values(ce, sparse_id, values, count, esize, varlen, out);
  }
  return rc;
}
