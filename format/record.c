/*
 * record.c - chunk records (SPEC.md §8.2) and index records (§8.3).
 */
#include <stdlib.h>

#include "format.h"

dcr__chunk *dcr__index_push(dcr__index_builder *x, dcr_detail *d) {
  if (x->count == x->capacity) {
    uint64_t cap = x->capacity ? 2 * x->capacity : 256;
    dcr__chunk *p = realloc(x->records, (size_t)cap * sizeof *p);
    if (!p) return dcr__fail(d, DCR_E_NOMEM, "cannot grow the chunk index"), NULL;
    x->records = p;
    x->capacity = cap;
  }
  return &x->records[x->count++];
}

void dcr__chunk_record_write(uint8_t out[DCR__RECORD_SIZE], const dcr__chunk *c) {
  dcr__put32(out, c->tensor);
  dcr__put32(out + 4, c->chunk);
  out[8] = c->encoding;
  out[9] = c->compression;
  dcr__put16(out + 10, 0);
  dcr__put32(out + 12, c->count);
  dcr__put64(out + 16, c->base_check);
  dcr__put64(out + 24, c->target_check);
}

void dcr__chunk_record_parse(const uint8_t *p, dcr__chunk *c) {
  c->tensor = dcr__le32(p);
  c->chunk = dcr__le32(p + 4);
  c->encoding = p[8];
  c->compression = p[9];
  c->reserved = dcr__le16(p + 10);
  c->count = dcr__le32(p + 12);
  c->base_check = dcr__le64(p + 16);
  c->target_check = dcr__le64(p + 24);
}

void dcr__index_record_write(uint8_t out[DCR__RECORD_SIZE], const dcr__chunk *c) {
  dcr__put64(out, c->offset);
  dcr__put32(out + 8, c->tensor);
  dcr__put32(out + 12, c->chunk);
  out[16] = c->encoding;
  out[17] = c->compression;
  dcr__put16(out + 18, 0);
  dcr__put32(out + 20, c->count);
  dcr__put64(out + 24, c->payload_length);
}

void dcr__index_record_parse(const uint8_t *p, dcr__chunk *c) {
  c->offset = dcr__le64(p);
  c->tensor = dcr__le32(p + 8);
  c->chunk = dcr__le32(p + 12);
  c->encoding = p[16];
  c->compression = p[17];
  c->reserved = dcr__le16(p + 18);
  c->count = dcr__le32(p + 20);
  c->payload_length = dcr__le64(p + 24);
}

int dcr__chunk_check(const dcr__chunk *c, const dcr__manifest *m, dcr_detail *d) {
  if (c->tensor >= m->entry_count)
    return dcr__fail(d, DCR_E_INDEX, "tensor index %u out of range (%llu entries)", c->tensor,
                     (unsigned long long)m->entry_count);
  const dcr__entry *e = &m->entries[c->tensor];
  dcr__detail_tensor(d, c->tensor, e->name, e->name_length);
  dcr__detail_chunk(d, c->chunk);
  if (!(e->presence & DCR__HAS_TARGET))
    return dcr__fail(d, DCR_E_INDEX, "chunk of a tensor the target does not have");
  uint64_t chunks = dcr__chunk_count(e->target.byte_length, m->chunk_size);
  if (c->chunk >= chunks)
    return dcr__fail(d, DCR_E_INDEX, "chunk %u out of range (tensor has %llu chunks)",
                     c->chunk, (unsigned long long)chunks);
  if (c->reserved)
    return dcr__fail(d, DCR_E_RESERVED, "chunk record reserved field is 0x%04x", c->reserved);
  uint64_t n = dcr__chunk_bytes(m, e, c->chunk) / dcr_dtype_size(e->target.dtype);
  if (c->count == 0 || c->count > n)
    return dcr__fail(d, DCR_E_INDEX, "count %u outside 1..%llu", c->count,
                     (unsigned long long)n);
  return DCR_OK;
}

const char *dcr_encoding_name(int encoding) {
  static const char *const names[DCR_ENC_COUNT] = {
      NULL, "XOR_DENSE", "XOR_SPARSE", "OVERWRITE_DENSE", "OVERWRITE_SPARSE", "DELTA_DENSE",
      "DELTA_SPARSE", "DELTA_CLASSED", "DELTA_BANDED"};
  return encoding > 0 && encoding < DCR_ENC_COUNT ? names[encoding] : NULL;
}
