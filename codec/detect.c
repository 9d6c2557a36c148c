/*
 * detect.c - change detection (SPEC.md §3): elements are compared as bit
 * patterns of their size, never as numbers, so +0/-0 and NaN payloads count.
 * The loops are branch-free so that a 1% change rate costs no mispredictions.
 */
#include "codec.h"

#define LOAD(T, p) ({ T v_; memcpy(&v_, (p), sizeof v_); v_; })

#define DETECT(T)                                                   \
  for (size_t i = 0; i < n; i++) {                                  \
    pos[k] = (uint32_t)i;                                           \
    k += LOAD(T, base + i * sizeof(T)) != LOAD(T, target + i * sizeof(T)); \
  }

size_t dcr__detect(const uint8_t *base, const uint8_t *target, size_t n, unsigned esize,
                   uint32_t *pos) {
  size_t k = 0;
  switch (esize) {
    case 1: DETECT(uint8_t) break;
    case 2: DETECT(uint16_t) break;
    case 4: DETECT(uint32_t) break;
    default: DETECT(uint64_t) break;
  }
  return k;
}

#define COUNT(T)                                                           \
  for (size_t i = 0; i < n; i++)                                           \
    k += LOAD(T, a + i * sizeof(T)) != LOAD(T, b + i * sizeof(T));

size_t dcr__count_changed(const uint8_t *a, const uint8_t *b, size_t n, unsigned esize) {
  size_t k = 0;
  switch (esize) {
    case 1: COUNT(uint8_t) break;
    case 2: COUNT(uint16_t) break;
    case 4: COUNT(uint32_t) break;
    default: COUNT(uint64_t) break;
  }
  return k;
}
