/*
 * chunk_decode.c - decodes one chunk's encoded data and applies it (SPEC.md §9).
 * Every size is checked against the chunk's geometry before a byte is
 * decompressed or written, so a hostile chunk can only fail, never overrun.
 */
#include <stdlib.h>

#include "codec.h"

/* Positions a decoder holds at once: every one for small chunks, else a sixteenth
 * of the chunk's bytes as 4-byte positions (a quarter of the chunk). */
static size_t pos_capacity(size_t chunk_size) {
  size_t cap = chunk_size / 16;
  if (cap < ((size_t)1 << 16)) cap = (size_t)1 << 16;
  return cap < chunk_size ? cap : chunk_size;
}

static size_t join_bytes(size_t chunk_size) {
  size_t most = (size_t)DCR__JOIN_BLOCK * 8;
  return chunk_size < most ? chunk_size : most;
}

uint64_t dcr__chunk_decoder_bytes(size_t chunk_size) {
  return (uint64_t)chunk_size + DCR__POSITIONS_BOUND(chunk_size) + join_bytes(chunk_size) +
         (uint64_t)pos_capacity(chunk_size) * sizeof(uint32_t);
}

static uint64_t larger(uint64_t a, uint64_t b) { return a > b ? a : b; }
static uint64_t smaller(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* The bytes of a slot's buffers that chunk c touches, from what its record and the
 * manifest declare (§9.1): its payload where the source has to read it, the
 * streams that are inflated (stored ones are used in place), positions and
 * joined values. Each goes into the matching field of `most`, which keeps the
 * largest: a slot's buffers are sized once, so it holds as much of each as the
 * chunk that needs most of it. Returns the chunk's own total. */
static uint64_t chunk_need(const dcr_reader *r, const dcr__chunk *c, size_t decoder_size,
                           uint64_t most[5]) {
  const dcr__entry *e = &r->man.entries[c->tensor];
  size_t bytes = dcr__chunk_bytes(&r->man, e, c->chunk);
  uint64_t esize = dcr_dtype_size(e->target.dtype), n = bytes / esize;
  int sparse = dcr__enc_sparse(c->encoding), classed = dcr__enc_ranked(c->encoding);
  int inflated = c->compression == DCR_COMP_ZSTD && !classed;
  uint64_t part[5] = {
      r->src.data ? 0
      : r->random ? dcr__align64(c->offset + DCR__SECTION_HEADER_SIZE + c->payload_length) - c->offset
                  : c->payload_length,
      classed || inflated ? (sparse || classed ? c->count : n) * esize : 0,
      sparse && inflated ? DCR__POSITIONS_BOUND(n) : 0,
      /* DELTA_BANDED's ranks and listed unchanged ones: one a chunk element at most */
      c->encoding == DCR_ENC_DELTA_BANDED ? n * sizeof(uint32_t)
      : sparse ? smaller(c->count, pos_capacity(decoder_size)) * sizeof(uint32_t)
               : 0,
      sparse || classed ? 0 : join_bytes(bytes)};
  uint64_t total = 0;
  for (int i = 0; i < 5; i++) most[i] = larger(most[i], part[i]), total += part[i];
  return total;
}

uint64_t dcr__decode_bytes(const dcr_reader *r, size_t *largest, const dcr__chunk **neediest) {
  *largest = 1;
  for (uint64_t i = 0; i < r->chunk_count; i++) {
    const dcr__chunk *c = &r->chunks[i];
    size_t bytes = dcr__chunk_bytes(&r->man, &r->man.entries[c->tensor], c->chunk);
    if (dcr__selected(r, c->tensor) && bytes > *largest) *largest = bytes;
  }
  uint64_t most[5] = {0}, worst = 0, sum = 0;
  *neediest = NULL;
  for (uint64_t i = 0; i < r->chunk_count; i++) {
    if (!dcr__selected(r, r->chunks[i].tensor)) continue;
    uint64_t own = chunk_need(r, &r->chunks[i], *largest, most);
    if (!*neediest || own > worst) *neediest = &r->chunks[i], worst = own;
  }
  for (int i = 0; i < 5; i++) sum += most[i];
  return sum;
}

int dcr__decode_fits(const dcr_reader *r, uint64_t need, const dcr__chunk *c, size_t bytes,
                     const char *work, dcr_detail *d) {
  if (need <= r->lim.max_memory) return DCR_OK;
  if (c) {
    const dcr__entry *e = &r->man.entries[c->tensor];
    dcr__detail_tensor(d, c->tensor, e->name, e->name_length);
    dcr__detail_chunk(d, c->chunk);
  }
  dcr__detail_file(d, r->path);
  return dcr__fail(d, DCR_E_NOMEM, "%s needs %llu MiB on one thread (chunks of up to %zu bytes), "
                   "over the memory budget of %llu MiB (dcr_limits.max_memory, dcr --memory)",
                   work, (unsigned long long)((need + (1 << 20) - 1) >> 20), bytes,
                   (unsigned long long)(r->lim.max_memory >> 20));
}

int dcr__chunk_decoder_init(dcr__chunk_decoder *dd, size_t chunk_size, unsigned minor) {
  memset(dd, 0, sizeof *dd);
  dd->minor = minor;
  dd->pos_capacity = pos_capacity(chunk_size);
  dd->dctx = ZSTD_createDCtx();
  dd->pos = malloc(dd->pos_capacity * sizeof *dd->pos);
  dd->pos_stream = malloc(DCR__POSITIONS_BOUND(chunk_size));
  dd->planes = malloc(chunk_size);
  dd->join = malloc(join_bytes(chunk_size));
  int classed = minor < 2 || !dcr__classed_decoder_init(&dd->cls);
  if (!dd->dctx || !dd->pos || !dd->pos_stream || !dd->planes || !dd->join || !classed) {
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
  free(dd->join);
  dcr__classed_decoder_free(dd->cls);
  memset(dd, 0, sizeof *dd);
}

static int stopped(const dcr__chunk_decoder *dd, dcr_detail *d) {
  return dd->cancel && *dd->cancel ? dcr__fail(d, DCR_E_INTERRUPTED, "interrupted") : DCR_OK;
}

/* Makes position i (read in order: i is at most pos_end) one that dd->pos holds;
 * returns where it is there. */
static inline size_t pos_window(dcr__chunk_decoder *dd, size_t i, size_t count) {
  if (i >= dd->pos_end) { /* batched only: the next batch */
    size_t m = count - dd->pos_end < dd->pos_capacity ? count - dd->pos_end : dd->pos_capacity;
    dcr__positions_take(&dd->cursor, dd->pos, m);
    dd->pos_first = dd->pos_end;
    dd->pos_end += m;
  }
  return i - dd->pos_first;
}

/* Position i, for an error message: batched, the stream is read again up to it. */
static uint32_t position_of(dcr__chunk_decoder *dd, size_t i) {
  if (i >= dd->pos_first && i < dd->pos_end) return dd->pos[i - dd->pos_first];
  dcr__positions_cursor c = dd->stream_start;
  uint32_t p = 0;
  for (size_t j = 0; j <= i; j++) dcr__positions_take(&c, &p, 1);
  return p;
}

/* Back to position 0, for a second pass over the values. */
static void pos_rewind(dcr__chunk_decoder *dd) {
  if (!dd->batched || dd->pos_first == 0) return;
  dd->cursor = dd->stream_start;
  dd->pos_first = dd->pos_end = 0;
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
  if (rc || (rc = dcr__zframe_inflate(dd->dctx, in->p, frame, buf, (size_t)size, dd->cancel, d)))
    return rc;
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
  if (rc) return rc;
  /* More positions than the decoder holds: checked whole now, read in batches as
   * they are applied (the same rules, in the same order, with the same codes). */
  dd->batched = count > dd->pos_capacity;
  if ((rc = dcr__positions_watched(s, length, count, n, dd->batched ? NULL : dd->pos, &used,
                                   dd->cancel, d)))
    return rc;
  dd->pos_first = 0;
  dd->pos_end = dd->batched ? 0 : count;
  if (dd->batched) {
    dcr__positions_start(&dd->stream_start, s, used);
    dd->cursor = dd->stream_start;
  }
  if (compression == DCR_COMP_NONE) in->p += used, in->left -= used;
  else if (used != length)
    return dcr__fail(d, DCR_E_POSITION, "%zu bytes left after the last position", length - used);
  return DCR_OK;
}

/* Zero XOR or delta values change nothing (R-ENC-2): a vectorizable count first,
 * the element-by-element loop only to say which one. */
static int check_nonzero(dcr__chunk_decoder *dd, const uint8_t *planes, size_t count,
                         unsigned esize, dcr_detail *d) {
  if (dcr__planes_nonzero(planes, count, esize) == count) return DCR_OK;
  for (size_t i = 0; i < count; i++) {
    uint8_t any = 0;
    for (unsigned b = 0; b < esize; b++) any |= planes[b * count + i];
    if (!any)
      return dcr__fail(d, DCR_E_ENCODING, "position %zu (element %u) does not change", i,
                       position_of(dd, i));
  }
  return DCR_OK;
}

/* Applies values first..last-1 of a sparse chunk's `count` to chunk's bytes (XOR
 * and delta values already checked), reading positions in order. An overwrite
 * with the bits already there changes nothing (R-ENC-3). */
static int apply_range(dcr__chunk_decoder *dd, const uint8_t *planes, size_t count,
                       size_t first, size_t last, unsigned esize, int op, uint8_t *chunk,
                       dcr_detail *d) {
  while (first < last) {
    int rc = stopped(dd, d);
    if (rc) return rc;
    size_t at = pos_window(dd, first, count);
    size_t stop = last < dd->pos_end ? last : dd->pos_end;
    const uint32_t *pos = dd->pos + at;
    if (op != DCR__OP_OVERWRITE) {
      dcr__scatter(chunk, pos, planes, count, first, stop, esize, op);
    } else {
      for (size_t i = first; i < stop; i++) {
        uint8_t *e = chunk + (size_t)pos[i - first] * esize, v[8], same = 1;
        for (unsigned b = 0; b < esize; b++) {
          v[b] = planes[b * count + i];
          same &= e[b] == v[b];
        }
        if (same)
          return dcr__fail(d, DCR_E_ENCODING, "position %zu (element %u) does not change", i,
                           pos[i - first]);
        memcpy(e, v, esize);
      }
    }
    first = stop;
  }
  return DCR_OK;
}

static int apply_sparse(dcr__chunk_decoder *dd, const uint8_t *planes, size_t count,
                        unsigned esize, int op, uint8_t *chunk, dcr_detail *d) {
  pos_rewind(dd);
  int rc = op == DCR__OP_OVERWRITE ? DCR_OK : check_nonzero(dd, planes, count, esize, d);
  if (rc || !chunk) return rc;
  return apply_range(dd, planes, count, 0, count, esize, op, chunk, d);
}

int dcr__apply_sparse_pieces(dcr__chunk_decoder *dd, const dcr__chunk *c,
                             const uint8_t *planes, int dtype, size_t n,
                             const uint8_t *from, uint8_t *out, uint8_t *input_digests,
                             uint8_t *out_digests, dcr_detail *d) {
  unsigned esize = dcr_dtype_size(dtype);
  size_t count = c->count, bytes = n * esize, k = 0, piece = 0;
  int op = dcr__enc_op(c->encoding);
  pos_rewind(dd);
  int rc = op == DCR__OP_OVERWRITE ? DCR_OK : check_nonzero(dd, planes, count, esize, d);
  for (size_t at = 0; at < bytes; at += DCR__PIECE, piece++) {
    size_t length = bytes - at < DCR__PIECE ? bytes - at : DCR__PIECE, end = (at + length) / esize;
    int interrupted = at % DCR__WATCH_BYTES ? DCR_OK : stopped(dd, d);
    if (interrupted) return interrupted;
    if (input_digests) dcr__pieces(from + at, length, input_digests + 16 * piece);
    memcpy(out + at, from + at, length);
    while (k < count) { /* the positions in this piece, a batch at a time */
      size_t w = pos_window(dd, k, count), next = k;
      while (next < dd->pos_end && dd->pos[w + (next - k)] < end) next++;
      if (!rc && next > k) rc = apply_range(dd, planes, count, k, next, esize, op, out, d);
      k = next;
      if (k < dd->pos_end) break;
    }
    dcr__pieces(out + at, length, out_digests + 16 * piece);
  }
  return rc;
}

int dcr__chunk_streams(dcr__chunk_decoder *dd, const dcr__chunk *c, const uint8_t *data,
                       size_t length, int dtype, size_t n, const uint8_t **planes,
                       dcr_detail *d) {
  unsigned esize = dcr_dtype_size(dtype);
  if (c->compression > DCR_COMP_ZSTD)
    return dcr__fail(d, DCR_E_ENCODING, "unknown compression %u", c->compression);
  /* R-VER-4: an encoding is known from the minor version that added it. */
  int last = dd->minor >= 3   ? DCR_ENC_DELTA_BANDED
             : dd->minor == 2 ? DCR_ENC_DELTA_CLASSED
                              : DCR_ENC_DELTA_SPARSE;
  if (c->encoding < DCR_ENC_XOR_DENSE || c->encoding > last)
    return dcr__fail(d, DCR_E_ENCODING, "unknown encoding %u", c->encoding);
  /* The index checks this too; repeated so that no caller can make the buffers
   * sized for n overflow. */
  if (c->count == 0 || c->count > n)
    return dcr__fail(d, DCR_E_INDEX, "count %u outside 1..%zu", c->count, n);
  if (dcr__enc_ranked(c->encoding)) {
    if (c->compression != DCR_COMP_NONE)
      return dcr__fail(d, DCR_E_ENCODING, "%s is stored with compression 0, not %u",
                       dcr_encoding_name(c->encoding), c->compression);
    *planes = dd->planes;
    dd->batched = 0;
    return (c->encoding == DCR_ENC_DELTA_BANDED ? dcr__banded_streams : dcr__classed_streams)(
        dd->cls, data, length, dtype, n, c->count, dd->planes, dd->cancel, d);
  }
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

static int apply_streams(dcr__chunk_decoder *dd, const dcr__chunk *c, const uint8_t *planes,
                         unsigned esize, size_t n, uint8_t *chunk, dcr_detail *d);

int dcr__decode_chunk(dcr__chunk_decoder *dd, const dcr__chunk *c, const uint8_t *data,
                      size_t length, int dtype, size_t n, uint8_t *chunk, dcr_detail *d) {
  const uint8_t *planes;
  int rc = dcr__chunk_streams(dd, c, data, length, dtype, n, &planes, d);
  return rc ? rc : apply_streams(dd, c, planes, dcr_dtype_size(dtype), n, chunk, d);
}

int dcr__apply_streams(dcr__chunk_decoder *dd, const dcr__chunk *c, const uint8_t *planes,
                       int dtype, size_t n, uint8_t *chunk, dcr_detail *d) {
  unsigned esize = dcr_dtype_size(dtype);
  int rc = apply_streams(dd, c, planes, esize, n, chunk, d);
  if (rc || chunk || !dcr__enc_sparse(c->encoding) || !dd->batched) return rc;
  /* Checked, not applied: the caller takes the positions from dd->pos (dcr_changes
   * hands them out), so every one is read into it, grown to hold them. */
  size_t count = c->count;
  if (count > dd->pos_capacity) {
    uint32_t *grown = realloc(dd->pos, count * sizeof *dd->pos);
    if (!grown) return dcr__fail(d, DCR_E_NOMEM, "cannot hold %zu positions", count);
    dd->pos = grown;
    dd->pos_capacity = count;
  }
  dd->cursor = dd->stream_start;
  dcr__positions_take(&dd->cursor, dd->pos, count);
  dd->pos_first = 0;
  dd->pos_end = count;
  dd->batched = 0;
  return DCR_OK;
}

static int apply_streams(dcr__chunk_decoder *dd, const dcr__chunk *c, const uint8_t *planes,
                         unsigned esize, size_t n, uint8_t *chunk, dcr_detail *d) {
  int op = dcr__enc_op(c->encoding);
  size_t k = dcr__enc_sparse(c->encoding) ? c->count : n;
  if (dcr__enc_ranked(c->encoding)) { /* positions need the base: none without it */
    if (!chunk) return DCR_OK;
    dcr__classed_walk(dd->cls, planes, chunk, chunk, 0, n);
    return dcr__classed_end(dd->cls, d);
  }
  if (dcr__enc_sparse(c->encoding)) return apply_sparse(dd, planes, k, esize, op, chunk, d);
  /* Joined a block at a time (dd->join), so that a chunk is untouched when a check
   * fails and no buffer of a whole chunk's joined elements is needed. */
  uint8_t *joined = dd->join;
  if (op != DCR__OP_OVERWRITE) {
    size_t changed = dcr__planes_nonzero(planes, n, esize);
    if (changed != c->count)
      return dcr__fail(d, DCR_E_ENCODING, "%s changes %zu elements; count says %u",
                       op == DCR__OP_XOR ? "XOR" : "delta", changed, c->count);
    if (!chunk) return DCR_OK;
    if (op == DCR__OP_XOR) {
      dcr__planes_xor_into(chunk, planes, n, esize);
    } else {
      for (size_t first = 0; first < n; first += DCR__JOIN_BLOCK) {
        size_t m = n - first < DCR__JOIN_BLOCK ? n - first : DCR__JOIN_BLOCK;
        int rc = (first * esize) % DCR__WATCH_BYTES ? DCR_OK : stopped(dd, d);
        if (rc) return rc;
        dcr__planes_join_part(joined, planes + first, n, m, esize);
        uint8_t *e = chunk + first * esize;
        for (size_t i = 0; i < m; i++) dcr__delta_apply(e + i * esize, joined + i * esize, esize);
      }
    }
    return DCR_OK;
  }
  /* Overwrite: the count can only be checked against the bytes it replaces. */
  if (!chunk) return DCR_OK;
  size_t changed = 0;
  for (size_t first = 0; first < n; first += DCR__JOIN_BLOCK) {
    size_t m = n - first < DCR__JOIN_BLOCK ? n - first : DCR__JOIN_BLOCK;
    int rc = (first * esize) % DCR__WATCH_BYTES ? DCR_OK : stopped(dd, d);
    if (rc) return rc;
    dcr__planes_join_part(joined, planes + first, n, m, esize);
    changed += dcr__count_changed(chunk + first * esize, joined, m, esize);
  }
  if (changed != c->count)
    return dcr__fail(d, DCR_E_ENCODING, "overwrite changes %zu elements; count says %u",
                     changed, c->count);
  for (size_t first = 0; first < n; first += DCR__JOIN_BLOCK) {
    size_t m = n - first < DCR__JOIN_BLOCK ? n - first : DCR__JOIN_BLOCK;
    dcr__planes_join_part(chunk + first * esize, planes + first, n, m, esize);
  }
  return DCR_OK;
}
