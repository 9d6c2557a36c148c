/*
 * verify.c - dcr_reader_verify and dcr_reader_verify_all: decode every chunk
 * without a base and check every rule of SPEC.md §9 that needs none.
 */
#include <stdlib.h>

#include "codec.h"

static size_t chunk_bytes(const dcr_reader *r, const dcr__chunk *c) {
  return dcr__chunk_bytes(&r->man, &r->man.entries[c->tensor], c->chunk);
}

int dcr_reader_verify_all(dcr_reader *r, dcr_problem_fn fn, void *opaque) {
  dcr_detail d;
  dcr__detail_init(&d);
  /* Buffers for the largest chunk carried, not for chunk_size: a small bundle
   * may declare chunks of up to 1 GiB. */
  size_t largest = 1;
  for (uint64_t i = 0; i < r->chunk_count; i++) {
    size_t bytes = chunk_bytes(r, &r->chunks[i]);
    if (bytes > largest) largest = bytes;
  }
  dcr__chunk_decoder dec;
  if (dcr__chunk_decoder_init(&dec, largest)) {
    int rc = dcr__fail(&d, DCR_E_NOMEM, "cannot allocate a decoder");
    dcr__detail_file(&d, r->path);
    if (fn) fn(opaque, &d);
    return rc;
  }
  uint8_t *buf = NULL;
  size_t cap = 0;
  int first = DCR_OK;
  for (uint64_t i = 0; i < r->chunk_count; i++) {
    const dcr__chunk *c = &r->chunks[i];
    const dcr__entry *e = &r->man.entries[c->tensor];
    unsigned esize = dcr_dtype_size(e->target.dtype);
    size_t bytes = chunk_bytes(r, c);
    const uint8_t *p = NULL;
    dcr__detail_init(&d);
    int rc = dcr__source_get(&r->src, c->offset + DCR__SECTION_HEADER_SIZE,
                             (size_t)c->payload_length, &buf, &cap, &p, &d);
    if (!rc)
      rc = dcr__decode_chunk(&dec, c, p + DCR__RECORD_SIZE,
                             (size_t)c->payload_length - DCR__RECORD_SIZE, esize, bytes / esize,
                             NULL, &d);
    if (!rc) continue;
    dcr__detail_at(&d, "CHNK", c->offset);
    dcr__detail_tensor(&d, c->tensor, e->name, e->name_length);
    dcr__detail_chunk(&d, c->chunk);
    dcr__detail_file(&d, r->path);
    if (!first) first = rc;
    /* An I/O or memory failure is not a property of this chunk: stop there. */
    if ((fn && fn(opaque, &d)) || rc == DCR_E_IO || rc == DCR_E_NOMEM) break;
  }
  free(buf);
  dcr__chunk_decoder_free(&dec);
  return first;
}

/* The first problem only. */
static int keep_first(void *opaque, const dcr_detail *d) {
  *(dcr_detail *)opaque = *d;
  return 1;
}

int dcr_reader_verify(dcr_reader *r, dcr_detail *d) {
  dcr_detail scratch;
  if (!d) d = &scratch;
  dcr__detail_init(d);
  return dcr_reader_verify_all(r, keep_first, d);
}
