/*
 * detect.c - change detection (SPEC.md §3): elements are compared as bit
 * patterns of their size, never as numbers, so +0/-0 and NaN payloads count.
 * Element loops are branch-free so that scattered changes cost no mispredictions.
 */
#include "codec.h"

#define LOAD(T, p) ({ T v_; memcpy(&v_, (p), sizeof v_); v_; })

/* Whole 8-byte words are compared first: at realistic change rates almost every
 * word is unchanged, so the per-element work is done for a few percent of them. */
size_t dcr__detect(const uint8_t *base, const uint8_t *target, size_t n, unsigned esize,
                   uint32_t *pos) {
  size_t k = 0, per = 8 / esize, words = n / per;
  unsigned bits = 8 * esize;
  uint64_t lane = esize == 8 ? ~(uint64_t)0 : ((uint64_t)1 << bits) - 1;
  for (size_t w = 0; w < words; w++) {
    uint64_t x = LOAD(uint64_t, base + 8 * w) ^ LOAD(uint64_t, target + 8 * w);
    if (!x) continue;
    for (unsigned l = 0; l < per; l++) {
      pos[k] = (uint32_t)(w * per + l);
      k += ((x >> (l * bits)) & lane) != 0;
    }
  }
  for (size_t i = words * per; i < n; i++) {
    pos[k] = (uint32_t)i;
    k += memcmp(base + i * esize, target + i * esize, esize) != 0;
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
