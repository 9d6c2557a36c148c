/*
 * chunk_read.c - the one door through which the codec reads a chunk section.
 * A bundle opened whole (reader.c's walk) had every section checked at open, so
 * this is a plain read. A bundle opened by the random-access profile (SPEC.md
 * §21) had only its index read, so each chunk section is checked here, as it
 * arrives and before any of it is used (R-RAN-3), and its record's two checks,
 * which the index does not carry, are filled in.
 */
#include <stdlib.h>

#include "format.h"

void dcr__chunk_plan(const dcr_reader *r) {
  if (!r->src.ops) return;
  dcr__range *ranges = malloc((size_t)r->chunk_count * sizeof *ranges + 1);
  size_t n = 0;
  if (!ranges) return; /* a plan only makes reads faster: without one they still work */
  for (uint64_t k = 0; k < r->chunk_count; k++) {
    const dcr__chunk *c = &r->chunks[k];
    if (!dcr__selected(r, c->tensor)) continue;
    uint64_t end = dcr__align64(c->offset + DCR__SECTION_HEADER_SIZE + c->payload_length);
    ranges[n++] = (dcr__range){c->offset, end - c->offset};
  }
  r->src.ops->plan(r->src.ctx, ranges, n);
  free(ranges);
}

/* R-RAN-3, in the order a walking reader meets the same bytes: section header,
 * flags, payload check, padding, then the record against the index record. */
static int check_section(const dcr_reader *r, const dcr__chunk *c, const uint8_t *p,
                         dcr__chunk *rec, dcr_detail *d) {
  dcr__section s;
  int rc = dcr__section_header_parse(p, c->offset, &s, d);
  if (rc) return rc;
  char type[5];
  dcr__section_type_name(s.type, type);
  if (s.type != DCR__SEC_CHNK)
    return dcr__fail(d, DCR_E_INDEX, "the index points at a %s section", type);
  if (s.flags != DCR__FLAG_CRITICAL || s.compression != DCR_COMP_NONE)
    return dcr__fail(d, DCR_E_STRUCTURE, "section has flags 0x%x and compression %u", s.flags,
                     s.compression);
  if (s.length != c->payload_length)
    return dcr__fail(d, DCR_E_INDEX, "CHNK payload of %llu bytes; the index says %llu",
                     (unsigned long long)s.length, (unsigned long long)c->payload_length);
  const uint8_t *payload = p + DCR__SECTION_HEADER_SIZE;
  if (!DCR__CHECKSUM_OK(XXH3_64bits(payload, (size_t)s.length) == s.payload_check))
    return dcr__fail(d, DCR_E_CHECKSUM, "section payload checksum does not match");
  uint64_t end = c->offset + DCR__SECTION_HEADER_SIZE + s.length;
  for (uint64_t i = end; i < dcr__align64(end); i++)
    if (p[i - c->offset]) {
      if (d) d->offset = i;
      return dcr__fail(d, DCR_E_RESERVED, "padding byte is 0x%02x", p[i - c->offset]);
    }
  dcr__chunk_record_parse(payload, rec);
  if ((rc = dcr__chunk_check(rec, &r->man, d))) return rc;
  if (rec->tensor != c->tensor || rec->chunk != c->chunk || rec->encoding != c->encoding ||
      rec->compression != c->compression || rec->count != c->count)
    return dcr__fail(d, DCR_E_INDEX, "the index record disagrees with the CHNK section at "
                     "offset %llu", (unsigned long long)c->offset);
  return DCR_OK;
}

int dcr__chunk_payload(const dcr_reader *r, const dcr__chunk *c, uint8_t **scratch,
                       size_t *capacity, const uint8_t **out, dcr_detail *d) {
  if (!r->random)
    return dcr__source_get(&r->src, c->offset + DCR__SECTION_HEADER_SIZE,
                           (size_t)c->payload_length, scratch, capacity, out, d);
  uint64_t length = dcr__align64(c->offset + DCR__SECTION_HEADER_SIZE + c->payload_length) -
                    c->offset;
  const uint8_t *p;
  dcr__chunk rec;
  int rc = dcr__source_get(&r->src, c->offset, (size_t)length, scratch, capacity, &p, d);
  if (!rc && (rc = check_section(r, c, p, &rec, d))) {
    if (d && d->offset == DCR_NONE) d->offset = c->offset;
    rc = dcr__confirm_by_walk(r, rc, d);
  }
  if (rc) return rc;
  /* The index has no room for the checks. Every reader of this chunk stores the
   * same two values before it uses them, and other threads look at them only
   * after the pool has handed them this chunk's result. */
  dcr__chunk *fill = (dcr__chunk *)c;
  fill->base_check = rec.base_check;
  fill->target_check = rec.target_check;
  *out = p + DCR__SECTION_HEADER_SIZE;
  return DCR_OK;
}

int dcr__chunk_checks(const dcr_reader *r, const dcr__chunk *c, dcr_detail *d) {
  if (!r->random) return DCR_OK;
  uint8_t *scratch = NULL;
  size_t capacity = 0;
  const uint8_t *p;
  int rc = dcr__chunk_payload(r, c, &scratch, &capacity, &p, d);
  free(scratch);
  return rc;
}
