/*
 * source.c - random access to a bundle held in memory or in a file. Files are
 * read with pread rather than mapped, so that a file truncated under our feet is
 * an error code, not a SIGBUS. Other sources (net/) bring their own read.
 */
#include <stdlib.h>

#include "format.h"

int dcr__source_get(const dcr__source *s, uint64_t offset, size_t length, uint8_t **scratch,
                    size_t *capacity, const uint8_t **out, dcr_detail *d) {
  if (offset > s->size || length > s->size - offset)
    return dcr__fail(d, DCR_E_TRUNCATED, "%zu bytes at offset %llu run past the end (%llu)",
                     length, (unsigned long long)offset, (unsigned long long)s->size);
  if (s->data) {
    *out = s->data + offset;
    return DCR_OK;
  }
  if (*capacity < length) {
    uint8_t *p = realloc(*scratch, length);
    if (!p) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate %zu bytes", length);
    *scratch = p;
    *capacity = length;
  }
  int rc = s->ops ? s->ops->read(s->ctx, offset, length, *scratch, d)
                 : dcr__pread_full(s->fd, *scratch, length, offset, d);
  if (rc) return rc;
  *out = *scratch;
  return DCR_OK;
}
