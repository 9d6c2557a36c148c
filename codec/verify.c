/*
 * verify.c - dcr_reader_verify: decodes every chunk without a base and checks
 * every rule of SPEC.md §9 that needs none.
 */
#include <stdlib.h>

#include "codec.h"

int dcr_reader_verify(dcr_reader *r, dcr_detail *d) {
  dcr_detail scratch;
  if (!d) d = &scratch;
  dcr__detail_init(d);
  dcr__chunk_decoder dec;
  if (dcr__chunk_decoder_init(&dec, r->man.chunk_size))
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate a decoder");
  uint8_t *buf = NULL;
  size_t cap = 0;
  int rc = DCR_OK;
  for (uint64_t i = 0; i < r->chunk_count && !rc; i++) {
    const dcr__chunk *c = &r->chunks[i];
    const dcr__entry *e = &r->man.entries[c->tensor];
    unsigned esize = dcr_dtype_size(e->target.dtype);
    uint64_t left = e->target.byte_length - (uint64_t)c->chunk * r->man.chunk_size;
    size_t bytes = left < r->man.chunk_size ? (size_t)left : r->man.chunk_size;
    const uint8_t *p = NULL;
    rc = dcr__source_get(&r->src, c->offset + DCR__SECTION_HEADER_SIZE,
                         (size_t)c->payload_length, &buf, &cap, &p, d);
    if (!rc)
      rc = dcr__decode_chunk(&dec, c, p + DCR__RECORD_SIZE,
                             (size_t)c->payload_length - DCR__RECORD_SIZE, esize, bytes / esize,
                             NULL, d);
    if (rc) {
      dcr__detail_at(d, "CHNK", c->offset);
      dcr__detail_tensor(d, c->tensor, e->name, e->name_length);
      dcr__detail_chunk(d, c->chunk);
    }
  }
  if (rc) dcr__detail_file(d, r->path);
  free(buf);
  dcr__chunk_decoder_free(&dec);
  return rc;
}
