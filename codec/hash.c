/*
 * hash.c - tensor hashes (SPEC.md §7): XXH3-128 stored in canonical big-endian
 * form, over bytes fed in order or read from a file.
 */
#include "codec.h"

void dcr__digest128(XXH3_state_t *st, uint8_t out[16]) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
  memcpy(out, c.digest, 16);
}

int dcr__hash_range(int fd, uint64_t start, uint64_t length, uint8_t *buf, size_t size,
                    uint8_t out[16], dcr_detail *d) {
  XXH3_state_t st;
  XXH3_INITSTATE(&st);
  XXH3_128bits_reset(&st);
  for (uint64_t at = 0; at < length; at += size) {
    size_t n = length - at < size ? (size_t)(length - at) : size;
    int rc = dcr__pread_full(fd, buf, n, start + at, d);
    if (rc) return rc;
    XXH3_128bits_update(&st, buf, n);
  }
  dcr__digest128(&st, out);
  return DCR_OK;
}
