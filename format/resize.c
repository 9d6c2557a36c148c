/*
 * resize.c - the RSIZ section (SPEC.md §6.5, format 1.1): the entries whose target
 * is coded against their base bytes over the common prefix, so that a tensor that
 * grows or shrinks (a vocabulary grown by a few rows) costs what changed.
 */
#include <stdlib.h>

#include "format.h"

int dcr__rsiz_parse(const uint8_t *p, size_t length, dcr__manifest *m, dcr_detail *d) {
  if (length < 4 || (length - 4) / 4 != dcr__le32(p) || (length - 4) % 4)
    return dcr__fail(d, DCR_E_STRUCTURE, "RSIZ payload of %zu bytes does not hold its count",
                     length);
  uint32_t count = dcr__le32(p);
  if (!count) return dcr__fail(d, DCR_E_MANIFEST, "RSIZ lists no entry");
  for (uint32_t i = 0; i < count; i++) {
    uint32_t k = dcr__le32(p + 4 + 4 * (size_t)i);
    const dcr__entry *e = k < m->entry_count ? &m->entries[k] : NULL;
    if (!e) return dcr__fail(d, DCR_E_MANIFEST, "RSIZ names entry %u of %llu", k,
                             (unsigned long long)m->entry_count);
    if (i && k <= dcr__le32(p + 4 * (size_t)i))
      return dcr__fail(d, DCR_E_MANIFEST, "RSIZ entries are not in increasing order");
    dcr__detail_tensor(d, k, e->name, e->name_length);
    if (e->presence != (DCR__HAS_BASE | DCR__HAS_TARGET) || e->base.dtype != e->target.dtype ||
        e->base.byte_length == e->target.byte_length)
      return dcr__fail(d, DCR_E_MANIFEST, "RSIZ lists a tensor that is not on both sides with "
                       "one dtype and two byte lengths");
    if (d) d->tensor = DCR_NONE, d->tensor_name[0] = '\0';
  }
  for (uint32_t i = 0; i < count; i++) m->entries[dcr__le32(p + 4 + 4 * (size_t)i)].resized = 1;
  return DCR_OK;
}

int dcr__rsiz_write(const dcr__manifest *m, uint8_t **out, size_t *length) {
  uint32_t count = 0;
  for (uint64_t i = 0; i < m->entry_count; i++) count += m->entries[i].resized;
  *out = NULL;
  *length = 0;
  if (!count) return DCR_OK;
  uint8_t *p = malloc(4 + 4 * (size_t)count);
  if (!p) return DCR_E_NOMEM;
  dcr__put32(p, count);
  for (uint64_t i = 0, n = 0; i < m->entry_count; i++)
    if (m->entries[i].resized) dcr__put32(p + 4 + 4 * n++, (uint32_t)i);
  *out = p;
  *length = 4 + 4 * (size_t)count;
  return DCR_OK;
}

/* §6.5: what the reference writer codes against its base's common prefix: the
 * same dtype and rank, a shape that differs in its first dimension only (rows
 * added or dropped), or a raw file that grew or shrank. */
int dcr__entry_resizable(const dcr__entry *en) {
  const dcr__desc *b = &en->base, *t = &en->target;
  return b->dtype == t->dtype && b->byte_length != t->byte_length && b->rank == t->rank &&
         b->rank >= 1 && b->byte_length && t->byte_length &&
         (b->rank == 1 || !memcmp(b->dims + 1, t->dims + 1, (b->rank - 1) * sizeof *b->dims));
}
