/*
 * changes.c - dcr_changes: each changed chunk decoded into positions and whole
 * values, for callers that apply the change themselves (an accelerator kernel), and
 * dcr_change_apply, the CPU reference of what such a kernel must do.
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
  *out = it;
  return DCR_OK;
}

void dcr_changes_free(dcr_changes *it) {
  if (!it) return;
  dcr__chunk_decoder_free(&it->dec);
  free(it->scratch);
  free(it->values);
  free(it);
}

int dcr_changes_next(dcr_changes *it, const dcr_change **out, dcr_detail *d) {
  if (d) dcr__detail_init(d);
  *out = NULL;
  const dcr_reader *r = it->r;
  while (it->next < r->chunk_count && !dcr__selected(r, r->chunks[it->next].tensor)) it->next++;
  if (it->next >= r->chunk_count) return DCR_OK;
  const dcr__chunk *c = &r->chunks[it->next];
  const dcr__entry *e = &r->man.entries[c->tensor];
  unsigned esize = dcr_dtype_size(e->target.dtype);
  size_t bytes = dcr__chunk_bytes(&r->man, e, c->chunk), n = bytes / esize;
  const uint8_t *payload, *planes;
  int rc = dcr__chunk_payload(r, c, &it->scratch, &it->scratch_capacity, &payload, d);
  const uint8_t *data = payload + DCR__RECORD_SIZE;
  size_t length = (size_t)c->payload_length - DCR__RECORD_SIZE;
  /* A DELTA_CLASSED chunk names its changes by rank among base elements of a
   * class: without the base there are no positions to hand out. */
  if (!rc && c->encoding == DCR_ENC_DELTA_CLASSED)
    rc = dcr__fail(d, DCR_E_ARGUMENT, "chunk is DELTA_CLASSED (format 1.2), whose positions "
                   "depend on the base: apply it with the library (dcr_patch_memory), or "
                   "encode the bundle with format 1.1 for callers that scatter changes");
  if (!rc) rc = dcr__chunk_streams(&it->dec, c, data, length, e->target.dtype, n, &planes, d);
  if (!rc) rc = dcr__apply_streams(&it->dec, c, planes, e->target.dtype, n, NULL, d);
  if (rc) {
    dcr__detail_at(d, "CHNK", c->offset);
    dcr__detail_tensor(d, c->tensor, e->name, e->name_length);
    dcr__detail_chunk(d, c->chunk);
    dcr__detail_file(d, r->path);
    return rc;
  }
  int sparse = dcr__enc_sparse(c->encoding);
  size_t k = sparse ? c->count : n;
  dcr__planes_join(it->values, planes, k, esize);
  it->change = (dcr_change){.entry = c->tensor, .chunk = c->chunk,
                            .offset = (uint64_t)c->chunk * r->man.chunk_size, .length = bytes,
                            .element_size = esize, .op = dcr__enc_op(c->encoding),
                            .count = c->count, .positions = sparse ? it->dec.pos : NULL,
                            .values = it->values, .base_check = c->base_check,
                            .target_check = c->target_check};
  it->next++;
  *out = &it->change;
  return DCR_OK;
}

/* One element (§9.1); a zero XOR or delta changes nothing. */
static void apply_one(int op, uint8_t *elem, const uint8_t *v, unsigned esize) {
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
      apply_one(c->op, p + (size_t)c->positions[i] * esize, v + i * esize, esize);
    return DCR_OK;
  }
  /* A dense overwrite's count says how many elements it changes (R-ENC-3). */
  if (c->op == DCR_OP_OVERWRITE && dcr__count_changed(p, v, n, esize) != c->count)
    return dcr__fail(d, DCR_E_ENCODING, "overwrite changes %zu elements; count says %u",
                     dcr__count_changed(p, v, n, esize), c->count);
  for (size_t i = 0; i < n; i++) apply_one(c->op, p + i * esize, v + i * esize, esize);
  return DCR_OK;
}
