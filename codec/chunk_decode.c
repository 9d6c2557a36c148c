/*
 * chunk_decode.c - decodes one chunk's encoded data and applies it (SPEC.md §9).
 * Every size is checked against the chunk's geometry before a byte is
 * decompressed or written, so a hostile chunk can only fail, never overrun.
 */
#include <stdlib.h>

#include "codec.h"

int dcr__chunk_decoder_init(dcr__chunk_decoder *dd, size_t chunk_size) {
  memset(dd, 0, sizeof *dd);
  dd->dctx = ZSTD_createDCtx();
  dd->pos = malloc(chunk_size * sizeof *dd->pos);
  /* It also holds a chunk's joined elements (below), so it is never shorter than one. */
  size_t bound = DCR__POSITIONS_BOUND(chunk_size);
  dd->pos_stream = malloc(bound > chunk_size ? bound : chunk_size);
  dd->planes = malloc(chunk_size);
  if (!dd->dctx || !dd->pos || !dd->pos_stream || !dd->planes) {
    dcr__chunk_decoder_free(dd);
    return DCR_E_NOMEM;
  }
  return DCR_OK;
}

void dcr__chunk_decoder_free(dcr__chunk_decoder *dd) {
  ZSTD_freeDCtx(dd->dctx);
  free(dd->pos);
  free(dd->pos_stream);
  free(dd->planes);
  memset(dd, 0, sizeof *dd);
}

typedef struct {
  const uint8_t *p;
  size_t left;
} input;

/* Takes the next stored stream. `exact` is its required size; otherwise `max`
 * bounds it (position streams, whose size only their count bounds). Stored
 * streams are returned in place; compressed ones are inflated into `buf`. */
static int next_stream(dcr__chunk_decoder *dd, input *in, int compression, size_t exact,
                       size_t max, uint8_t *buf, const uint8_t **out, size_t *length,
                       dcr_detail *d) {
  if (compression == DCR_COMP_NONE) {
    size_t n = exact ? exact : (in->left < max ? in->left : max);
    if (in->left < n)
      return dcr__fail(d, DCR_E_ENCODING, "stream of %zu bytes but %zu remain", n, in->left);
    *out = in->p;
    *length = n;
    if (exact) in->p += n, in->left -= n; /* a position stream advances once parsed */
    return DCR_OK;
  }
  uint64_t size;
  size_t frame;
  int rc = dcr__zframe_check(in->p, in->left, exact ? exact : max, DCR_E_DECOMPRESS,
                             exact ? exact : UINT64_MAX, &size, &frame, d);
  if (rc || (rc = dcr__zframe_decompress(dd->dctx, in->p, frame, buf, (size_t)size, d))) return rc;
  in->p += frame;
  in->left -= frame;
  *out = buf;
  *length = (size_t)size;
  return DCR_OK;
}

static int read_positions(dcr__chunk_decoder *dd, input *in, int compression, size_t count,
                          size_t n, dcr_detail *d) {
  const uint8_t *s;
  size_t length, used;
  int rc = next_stream(dd, in, compression, 0, DCR__POSITIONS_BOUND(n), dd->pos_stream, &s,
                       &length, d);
  if (rc || (rc = dcr__positions_read(s, length, count, n, dd->pos, &used, d))) return rc;
  if (compression == DCR_COMP_NONE) in->p += used, in->left -= used;
  else if (used != length)
    return dcr__fail(d, DCR_E_POSITION, "%zu bytes left after the last position", length - used);
  return DCR_OK;
}

static int apply_sparse(const dcr__chunk_decoder *dd, const uint8_t *planes, size_t count,
                        unsigned esize, int op, uint8_t *chunk, dcr_detail *d) {
  /* Without a chunk only zero values can be caught: a vectorizable count first,
   * the element-by-element loop only to say which one. */
  if (!chunk && (op == DCR__OP_OVERWRITE || dcr__planes_nonzero(planes, count, esize) == count))
    return DCR_OK;
  if (chunk && op != DCR__OP_OVERWRITE && dcr__planes_nonzero(planes, count, esize) == count) {
    dcr__scatter(chunk, dd->pos, planes, count, esize, op);
    return DCR_OK;
  }
  for (size_t i = 0; i < count; i++) {
    uint8_t *e = chunk ? chunk + (size_t)dd->pos[i] * esize : NULL;
    uint8_t v[8], any = 0, same = 1;
    for (unsigned b = 0; b < esize; b++) {
      v[b] = planes[b * count + i];
      any |= v[b];
      if (e) same &= e[b] == v[b];
    }
    /* a zero XOR or delta, or an overwrite with the same bits, changes nothing */
    if (op == DCR__OP_OVERWRITE ? (e && same) : !any)
      return dcr__fail(d, DCR_E_ENCODING, "position %zu (element %u) does not change", i,
                       dd->pos[i]);
    if (!e) continue;
    if (op == DCR__OP_XOR)
      for (unsigned b = 0; b < esize; b++) e[b] ^= v[b];
    else if (op == DCR__OP_OVERWRITE)
      memcpy(e, v, esize);
    else
      dcr__delta_apply(e, v, esize);
  }
  return DCR_OK;
}

int dcr__chunk_streams(dcr__chunk_decoder *dd, const dcr__chunk *c, const uint8_t *data,
                       size_t length, unsigned esize, size_t n, const uint8_t **planes,
                       dcr_detail *d) {
  if (c->compression > DCR_COMP_ZSTD)
    return dcr__fail(d, DCR_E_ENCODING, "unknown compression %u", c->compression);
  if (c->encoding < DCR_ENC_XOR_DENSE || c->encoding >= DCR_ENC_COUNT)
    return dcr__fail(d, DCR_E_ENCODING, "unknown encoding %u", c->encoding);
  /* The index checks this too; repeated so that no caller can make the buffers
   * sized for n overflow. */
  if (c->count == 0 || c->count > n)
    return dcr__fail(d, DCR_E_INDEX, "count %u outside 1..%zu", c->count, n);
  int is_sparse = dcr__enc_sparse(c->encoding);
  size_t k = is_sparse ? c->count : n, plane_bytes;
  input in = {data, length};
  int rc = DCR_OK;
  if (is_sparse && (rc = read_positions(dd, &in, c->compression, c->count, n, d))) return rc;
  if ((rc = next_stream(dd, &in, c->compression, k * esize, 0, dd->planes, planes, &plane_bytes,
                        d)))
    return rc;
  if (in.left)
    return dcr__fail(d, DCR_E_ENCODING, "%zu bytes left after the last stream", in.left);
  return DCR_OK;
}

int dcr__decode_chunk(dcr__chunk_decoder *dd, const dcr__chunk *c, const uint8_t *data,
                      size_t length, unsigned esize, size_t n, uint8_t *chunk, dcr_detail *d) {
  const uint8_t *planes;
  int rc = dcr__chunk_streams(dd, c, data, length, esize, n, &planes, d);
  return rc ? rc : dcr__apply_streams(dd, c, planes, esize, n, chunk, d);
}

int dcr__apply_streams(dcr__chunk_decoder *dd, const dcr__chunk *c, const uint8_t *planes,
                       unsigned esize, size_t n, uint8_t *chunk, dcr_detail *d) {
  int op = dcr__enc_op(c->encoding);
  size_t k = dcr__enc_sparse(c->encoding) ? c->count : n;
  if (dcr__enc_sparse(c->encoding)) return apply_sparse(dd, planes, k, esize, op, chunk, d);
  /* The spare position buffer holds joined elements, so that a chunk is untouched
   * when a check fails. */
  uint8_t *joined = dd->pos_stream;
  if (op != DCR__OP_OVERWRITE) {
    size_t changed = dcr__planes_nonzero(planes, n, esize);
    if (changed != c->count)
      return dcr__fail(d, DCR_E_ENCODING, "%s changes %zu elements; count says %u",
                       op == DCR__OP_XOR ? "XOR" : "delta", changed, c->count);
    if (!chunk) return DCR_OK;
    if (op == DCR__OP_XOR) {
      dcr__planes_xor_into(chunk, planes, n, esize);
    } else {
      dcr__planes_join(joined, planes, n, esize);
      for (size_t i = 0; i < n; i++) dcr__delta_apply(chunk + i * esize, joined + i * esize, esize);
    }
    return DCR_OK;
  }
  /* Overwrite: the count can only be checked against the bytes it replaces. */
  if (!chunk) return DCR_OK;
  dcr__planes_join(joined, planes, n, esize);
  size_t changed = dcr__count_changed(chunk, joined, n, esize);
  if (changed != c->count)
    return dcr__fail(d, DCR_E_ENCODING, "overwrite changes %zu elements; count says %u",
                     changed, c->count);
  memcpy(chunk, joined, n * esize);
  return DCR_OK;
}
