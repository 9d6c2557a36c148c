/*
 * changes.c - dcr_changes: each changed chunk decoded into positions and whole
 * values, for callers that apply the change themselves (an accelerator kernel), and
 * dcr_change_apply, the CPU reference of what such a kernel must do. A
 * DELTA_CLASSED chunk's positions depend on its base (SPEC.md §9.4): with a base
 * resolver set, they are found by walking the caller's base bytes, once those have
 * given the chunk's base_check.
 */
#include <stdlib.h>

#include "refit.h"

struct dcr_changes {
  dcr_reader *r;
  uint64_t next;
  dcr__chunk_decoder dec;
  uint8_t *scratch, *values;
  size_t scratch_capacity;
  dcr_change change;
  dcr_resolve_fn resolve; /* dcr_changes_set_base: the base, for DELTA_CLASSED */
  void *opaque;
  uint64_t held;          /* the entry whose base `base` is, or UINT64_MAX */
  dcr_buffer base;
  uint8_t *base_chunk, *digests; /* a chunk's base when not the caller's bytes; its pieces */
  uint32_t *pos;                 /* a DELTA_CLASSED chunk's positions */
  size_t pos_capacity;
};

int dcr_changes_open(dcr_changes **out, dcr_reader *r, dcr_detail *d) {
  if (d) dcr__detail_init(d);
  *out = NULL;
  if (!r) return dcr__fail(d, DCR_E_ARGUMENT, "no reader");
  dcr_changes *it = calloc(1, sizeof *it);
  size_t cs = dcr__max_chunk_bytes(&r->man);
  if (!it || !(it->values = malloc(cs)) || dcr__chunk_decoder_init(&it->dec, cs, r->minor)) {
    if (it) free(it->values);
    free(it);
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate a decoder");
  }
  it->r = r;
  it->held = UINT64_MAX;
  *out = it;
  return DCR_OK;
}

void dcr_changes_set_base(dcr_changes *it, dcr_resolve_fn resolve, void *opaque) {
  it->resolve = resolve;
  it->opaque = opaque;
  it->held = UINT64_MAX;
}

void dcr_changes_free(dcr_changes *it) {
  if (!it) return;
  dcr__chunk_decoder_free(&it->dec);
  free(it->scratch);
  free(it->values);
  free(it->base_chunk);
  free(it->digests);
  free(it->pos);
  free(it);
}

/* The chunk's base bytes (SPEC.md §9.4: the zero base where §8.1 says so, the
 * resized base of §6.5), from the caller's base tensor, checked against base_check;
 * or `given`, the chunk's base bytes that a caller has checked. */
static int chunk_base(dcr_changes *it, const dcr__chunk *c, size_t bytes, const uint8_t *given,
                      const uint8_t **out, dcr_detail *d) {
  if (given) return *out = given, DCR_OK;
  const dcr_reader *r = it->r;
  const dcr__entry *e = &r->man.entries[c->tensor];
  uint64_t at = (uint64_t)c->chunk * r->man.chunk_size;
  size_t kept = (size_t)dcr__entry_base_span(e, at, bytes);
  if (kept && !it->resolve)
    return dcr__fail(d, DCR_E_ARGUMENT, "chunk is %s (format 1.%d), whose positions depend on "
                     "the base: give the base (dcr_changes_set_base), apply it with the library "
                     "(dcr_patch_memory), or encode the bundle with format 1.1",
                     dcr_encoding_name(c->encoding), c->encoding == DCR_ENC_DELTA_BANDED ? 3 : 2);
  if (kept && it->held != c->tensor) {
    dcr_tensor_info t;
    dcr_reader_tensor(r, c->tensor, &t);
    it->base = (dcr_buffer){0};
    if (it->resolve(it->opaque, c->tensor, &t, &it->base))
      return dcr__fail(d, DCR_E_ARGUMENT, "the base resolver has no buffer for this tensor");
    if (!it->base.data || it->base.size != e->base.byte_length)
      return dcr__fail(d, DCR_E_ARGUMENT, "base buffer of %llu bytes for a base tensor of %llu",
                       (unsigned long long)it->base.size,
                       (unsigned long long)e->base.byte_length);
    it->held = c->tensor;
  }
  size_t cs = dcr__max_chunk_bytes(&r->man);
  if ((kept < bytes && !it->base_chunk && !(it->base_chunk = malloc(cs))) ||
      (!it->digests && !(it->digests = malloc(16 * DCR__PIECES(cs)))))
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate a chunk's base");
  const uint8_t *from = kept ? (const uint8_t *)it->base.data + at : NULL;
  if (kept < bytes) {
    if (kept) memcpy(it->base_chunk, from, kept);
    memset(it->base_chunk + kept, 0, bytes - kept);
    from = it->base_chunk;
  }
  size_t pieces = dcr__pieces(from, bytes, it->digests);
  if (!DCR__CHECKSUM_OK(dcr__pieces_check(it->digests, pieces) == c->base_check))
    return dcr__fail(d, DCR_E_BASE_MISMATCH, "the base given does not match the chunk's "
                     "base_check");
  *out = from;
  return DCR_OK;
}

/* A DELTA_CLASSED chunk's positions, found by walking its base, and its values,
 * reordered from class order into theirs. */
static int classed_positions(dcr_changes *it, const dcr__chunk *c, const uint8_t *planes,
                             size_t n, const uint8_t *given, dcr_detail *d) {
  unsigned esize = dcr_dtype_size(it->r->man.entries[c->tensor].target.dtype);
  const uint8_t *base = NULL;
  int rc = chunk_base(it, c, n * esize, given, &base, d);
  if (rc) return rc;
  if (c->count > it->pos_capacity) {
    uint32_t *grown = realloc(it->pos, c->count * sizeof *it->pos);
    if (!grown) return dcr__fail(d, DCR_E_NOMEM, "cannot hold %u positions", c->count);
    it->pos = grown;
    it->pos_capacity = c->count;
  }
  dcr__classed_collect(it->dec.cls, planes, base, n, it->pos, it->values);
  return dcr__classed_end(it->dec.cls, d);
}

int dcr__changes_chunk(dcr_changes *it, uint64_t record, const uint8_t *base,
                       const dcr_change **out, dcr_detail *d) {
  const dcr_reader *r = it->r;
  const dcr__chunk *c = &r->chunks[record];
  const dcr__entry *e = &r->man.entries[c->tensor];
  unsigned esize = dcr_dtype_size(e->target.dtype);
  size_t bytes = dcr__chunk_bytes(&r->man, e, c->chunk), n = bytes / esize;
  const uint8_t *payload, *planes;
  int rc = dcr__chunk_payload(r, c, &it->scratch, &it->scratch_capacity, &payload, d);
  const uint8_t *data = payload + DCR__RECORD_SIZE;
  size_t length = (size_t)c->payload_length - DCR__RECORD_SIZE;
  int classed = dcr__enc_ranked(c->encoding);
  if (!rc) rc = dcr__chunk_streams(&it->dec, c, data, length, e->target.dtype, n, &planes, d);
  if (!rc) rc = classed ? classed_positions(it, c, planes, n, base, d)
                        : dcr__apply_streams(&it->dec, c, planes, e->target.dtype, n, NULL, d);
  if (rc) {
    dcr__detail_at(d, "CHNK", c->offset);
    dcr__detail_tensor(d, c->tensor, e->name, e->name_length);
    dcr__detail_chunk(d, c->chunk);
    dcr__detail_file(d, r->path);
    return rc;
  }
  int sparse = classed || dcr__enc_sparse(c->encoding);
  size_t k = sparse ? c->count : n;
  if (!classed) dcr__planes_join(it->values, planes, k, esize);
  it->change = (dcr_change){.entry = c->tensor, .chunk = c->chunk,
                            .offset = (uint64_t)c->chunk * r->man.chunk_size, .length = bytes,
                            .element_size = esize, .op = dcr__enc_op(c->encoding),
                            .count = c->count,
                            .positions = classed ? it->pos : sparse ? it->dec.pos : NULL,
                            .values = it->values, .base_check = c->base_check,
                            .target_check = c->target_check};
  *out = &it->change;
  return DCR_OK;
}

int dcr_changes_next(dcr_changes *it, const dcr_change **out, dcr_detail *d) {
  if (d) dcr__detail_init(d);
  *out = NULL;
  const dcr_reader *r = it->r;
  while (it->next < r->chunk_count && !dcr__selected(r, r->chunks[it->next].tensor)) it->next++;
  if (it->next >= r->chunk_count) return DCR_OK;
  int rc = dcr__changes_chunk(it, it->next, NULL, out, d);
  if (!rc) it->next++;
  return rc;
}

void dcr__apply_one(int op, uint8_t *elem, const uint8_t *v, unsigned esize) {
  if (op == DCR_OP_XOR)
    for (unsigned b = 0; b < esize; b++) elem[b] ^= v[b];
  else if (op == DCR_OP_OVERWRITE)
    memcpy(elem, v, esize);
  else
    dcr__delta_apply(elem, v, esize);
}

int dcr_change_apply(const dcr_change *c, void *chunk, size_t length, dcr_detail *d) {
  if (d) dcr__detail_init(d);
  unsigned esize = c->element_size;
  if (length != c->length || (esize != 1 && esize != 2 && esize != 4 && esize != 8) ||
      length % esize || c->op < DCR_OP_XOR || c->op > DCR_OP_DELTA)
    return dcr__fail(d, DCR_E_ARGUMENT, "chunk of %zu bytes for a change of %llu", length,
                     (unsigned long long)c->length);
  uint8_t *p = chunk;
  const uint8_t *v = c->values;
  size_t n = length / esize;
  if (c->positions) {
    for (size_t i = 0; i < c->count; i++)
      if (c->positions[i] >= n || (i && c->positions[i] <= c->positions[i - 1]))
        return dcr__fail(d, DCR_E_POSITION, "position %u out of order or range", c->positions[i]);
    for (size_t i = 0; i < c->count; i++)
      dcr__apply_one(c->op, p + (size_t)c->positions[i] * esize, v + i * esize, esize);
    return DCR_OK;
  }
  /* A dense overwrite's count says how many elements it changes (R-ENC-3). */
  if (c->op == DCR_OP_OVERWRITE && dcr__count_changed(p, v, n, esize) != c->count)
    return dcr__fail(d, DCR_E_ENCODING, "overwrite changes %zu elements; count says %u",
                     dcr__count_changed(p, v, n, esize), c->count);
  for (size_t i = 0; i < n; i++) dcr__apply_one(c->op, p + i * esize, v + i * esize, esize);
  return DCR_OK;
}
