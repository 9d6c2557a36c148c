/*
 * positions.c - position streams (SPEC.md §9.1): gaps between changed elements
 * as minimal LEB128 varints. Gaps rather than indices keep most values below 128
 * at realistic change rates, and "p + 1 + gap" makes unsorted or repeated positions
 * impossible to express.
 */
#include "codec.h"

size_t dcr__positions_write(uint8_t *out, const uint32_t *pos, size_t count) {
  uint8_t *p = out;
  uint32_t next = 0; /* smallest position the next one may take */
  for (size_t i = 0; i < count; i++) {
    uint32_t v = pos[i] - next;
    next = pos[i] + 1;
    while (v >= 0x80) {
      *p++ = (uint8_t)(v | 0x80);
      v >>= 7;
    }
    *p++ = (uint8_t)v;
  }
  return (size_t)(p - out);
}

int dcr__positions_read(const uint8_t *in, size_t length, size_t count, size_t n,
                        uint32_t *pos, size_t *used, dcr_detail *d) {
  size_t at = 0;
  uint64_t next = 0;
  for (size_t i = 0; i < count; i++) {
    uint64_t v = 0;
    unsigned k = 0;
    if (at < length && in[at] < 0x80) { /* most gaps fit one byte */
      v = in[at++];
      goto have_gap;
    }
    for (;; k++) {
      if (at >= length)
        return dcr__fail(d, DCR_E_POSITION, "position %zu: varint runs past the stream", i);
      if (k == DCR__VARINT_MAX)
        return dcr__fail(d, DCR_E_POSITION, "position %zu: varint longer than 5 bytes", i);
      uint8_t byte = in[at++];
      v |= (uint64_t)(byte & 0x7F) << (7 * k);
      if (!(byte & 0x80)) {
        if (k && !byte)
          return dcr__fail(d, DCR_E_POSITION, "position %zu: varint is not minimal", i);
        break;
      }
    }
    if (v > UINT32_MAX)
      return dcr__fail(d, DCR_E_POSITION, "position %zu: gap %llu exceeds 2^32", i,
                       (unsigned long long)v);
  have_gap:;
    uint64_t p = next + v;
    if (p >= n)
      return dcr__fail(d, DCR_E_POSITION, "position %zu is element %llu of a %zu-element chunk",
                       i, (unsigned long long)p, n);
    pos[i] = (uint32_t)p;
    next = p + 1;
  }
  *used = at;
  return DCR_OK;
}
