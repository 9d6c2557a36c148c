/*
 * scatter.c - sparse XOR and delta values applied at their positions (SPEC.md
 * §9.1), one loop per element size so that each element is one load, one
 * operation and one store: a patch in memory touches only the changed elements,
 * and this loop is most of its time, waiting for memory: it prefetches ahead.
 */
#include "codec.h"

/* Elements are little-endian in checkpoints, and read here as host integers (as
 * delta.c does). */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "dcr needs a little-endian host");

#define AHEAD 16 /* elements: changes are ~100 apart, so each is a cache miss */

/* VALUE(T, i) is the i-th value (planes: byte b of value i is planes[b·count + i];
 * packed: the i-th element of values). */
#define FROM_PLANES(T, i) from_planes_##T(planes, count, i)
#define FROM_PACKED(T, i) from_packed_##T(planes, i)
/* ADDR(T, i): where the i-th value goes. */
#define AT_POSITION(T, i) (chunk + (size_t)pos[(i) - first] * sizeof(T))
#define AT_ADDRESS(T, i) (at[i])
#define SCATTER_TO(T, VALUE, ADDR)                                               \
  for (size_t i = first; i < last; i++) {                                        \
    T v = VALUE(T, i), e;                                                        \
    if (i + AHEAD < last) __builtin_prefetch(ADDR(T, i + AHEAD), 1);             \
    uint8_t *p = ADDR(T, i);                                                     \
    memcpy(&e, p, sizeof(T));                                                    \
    e = op == DCR__OP_XOR ? (T)(e ^ v)                                           \
                          : DCR__KEY(T, (T)(DCR__KEY(T, e) + DCR__UNZIGZAG(T, v))); \
    memcpy(p, &e, sizeof(T));                                                    \
  }
#define SCATTER(T, VALUE) SCATTER_TO(T, VALUE, AT_POSITION)
#define LOADERS(T)                                                               \
  static inline T from_planes_##T(const uint8_t *planes, size_t count, size_t i) { \
    T v = 0;                                                                     \
    for (unsigned b = 0; b < sizeof(T); b++) v |= (T)((T)planes[b * count + i] << (8 * b)); \
    return v;                                                                    \
  }                                                                              \
  static inline T from_packed_##T(const uint8_t *values, size_t i) {             \
    T v;                                                                         \
    memcpy(&v, values + i * sizeof(T), sizeof(T));                               \
    return v;                                                                    \
  }
LOADERS(uint8_t)
LOADERS(uint16_t)
LOADERS(uint32_t)
LOADERS(uint64_t)

void dcr__scatter(uint8_t *chunk, const uint32_t *pos, const uint8_t *planes, size_t count,
                  size_t first, size_t last, unsigned esize, int op) {
  switch (esize) {
    case 1: SCATTER(uint8_t, FROM_PLANES) break;
    case 2: SCATTER(uint16_t, FROM_PLANES) break;
    case 4: SCATTER(uint32_t, FROM_PLANES) break;
    default: SCATTER(uint64_t, FROM_PLANES) break;
  }
}

void dcr__scatter_packed(uint8_t *chunk, const uint32_t *pos, const uint8_t *planes,
                         size_t count, unsigned esize, int op) {
  size_t first = 0, last = count;
  switch (esize) {
    case 1: SCATTER(uint8_t, FROM_PACKED) break;
    case 2: SCATTER(uint16_t, FROM_PACKED) break;
    case 4: SCATTER(uint32_t, FROM_PACKED) break;
    default: SCATTER(uint64_t, FROM_PACKED) break;
  }
}

void dcr__scatter_to(uint8_t *const *at, const uint8_t *planes, size_t count, unsigned esize,
                     int op) {
  size_t first = 0, last = count;
  switch (esize) {
    case 1: SCATTER_TO(uint8_t, FROM_PACKED, AT_ADDRESS) break;
    case 2: SCATTER_TO(uint16_t, FROM_PACKED, AT_ADDRESS) break;
    case 4: SCATTER_TO(uint32_t, FROM_PACKED, AT_ADDRESS) break;
    default: SCATTER_TO(uint64_t, FROM_PACKED, AT_ADDRESS) break;
  }
}
