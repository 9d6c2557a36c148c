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

/* Zero XOR or delta values change nothing (R-ENC-2): a vectorizable count first,
 * the element-by-element loop only to say which one. */
static int check_nonzero(const dcr__chunk_decoder *dd, const uint8_t *planes, size_t count,
                         unsigned esize, dcr_detail *d) {
  if (dcr__planes_nonzero(planes, count, esize) == count) return DCR_OK;
  for (size_t i = 0; i < count; i++) {
    uint8_t any = 0;
    for (unsigned b = 0; b < esize; b++) any |= planes[b * count + i];
    if (!any)
      return dcr__fail(d, DCR_E_ENCODING, "position %zu (element %u) does not change", i,
                       dd->pos[i]);
  }
  return DCR_OK;
}

/* Applies values first..last-1 of a sparse chunk's `count` to chunk's bytes (XOR
 * and delta values already checked). An overwrite with the bits already there
 * changes nothing (R-ENC-3). */
static int apply_range(const dcr__chunk_decoder *dd, const uint8_t *planes, size_t count,
                       size_t first, size_t last, unsigned esize, int op, uint8_t *chunk,
                       dcr_detail *d) {
  if (op != DCR__OP_OVERWRITE) {
    dcr__scatter(chunk, dd->pos, planes, count, first, last, esize, op);
    return DCR_OK;
  }
  for (size_t i = first; i < last; i++) {
    uint8_t *e = chunk + (size_t)dd->pos[i] * esize, v[8], same = 1;
    for (unsigned b = 0; b < esize; b++) {
      v[b] = planes[b * count + i];
      same &= e[b] == v[b];
    }
    if (same)
      return dcr__fail(d, DCR_E_ENCODING, "position %zu (element %u) does not change", i,
                       dd->pos[i]);
    memcpy(e, v, esize);
  }
  return DCR_OK;
}

static int apply_sparse(const dcr__chunk_decoder *dd, const uint8_t *planes, size_t count,
                        unsigned esize, int op, uint8_t *chunk, dcr_detail *d) {
  int rc = op == DCR__OP_OVERWRITE ? DCR_OK : check_nonzero(dd, planes, count, esize, d);
  if (rc || !chunk) return rc;
  return apply_range(dd, planes, count, 0, count, esize, op, chunk, d);
}

int dcr__apply_sparse_pieces(const dcr__chunk_decoder *dd, const dcr__chunk *c,
                             const uint8_t *planes, unsigned esize, size_t n,
                             const uint8_t *from, uint8_t *out, uint8_t *input_digests,
                             uint8_t *out_digests, dcr_detail *d) {
  size_t count = c->count, bytes = n * esize, k = 0, piece = 0;
  int op = dcr__enc_op(c->encoding);
  int rc = op == DCR__OP_OVERWRITE ? DCR_OK : check_nonzero(dd, planes, count, esize, d);
  for (size_t at = 0; at < bytes; at += DCR__PIECE, piece++) {
    size_t length = bytes - at < DCR__PIECE ? bytes - at : DCR__PIECE, end = (at + length) / esize;
    dcr__pieces(from + at, length, input_digests + 16 * piece);
    memcpy(out + at, from + at, length);
    size_t next = k;
    while (next < count && dd->pos[next] < end) next++;
    if (!rc) rc = apply_range(dd, planes, count, k, next, esize, op, out, d);
    k = next;
    dcr__pieces(out + at, length, out_digests + 16 * piece);
  }
  return rc;
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
