/*
 * delta.c - ULP deltas (SPEC.md §9.1, DELTA_* encodings). An optimizer step moves
 * most changed values by one or two units in the last place; the XOR of such a
 * step spreads over a carry chain (1, 3, 7, 15...), but the difference of the
 * values' order-preserving keys is mostly +1 or -1, which codes in fewer bits.
 *
 * key(u) flips the magnitude bits of a pattern whose top bit is set, so keys sort
 * like the floats they encode; it is its own inverse. Deltas are taken modulo
 * 2^bits and stored zigzagged (0, -1, 1, -2... as 0, 1, 2, 3...), little-endian.
 */
#include "codec.h"

#define KEY DCR__KEY
#define ZIGZAG DCR__ZIGZAG

#define MAKE(T)                                                        \
  for (size_t i = 0; i < count; i++) {                                 \
    T b, t, z;                                                         \
    memcpy(&b, base + i * sizeof(T), sizeof(T));                       \
    memcpy(&t, target + i * sizeof(T), sizeof(T));                     \
    z = ZIGZAG(T, (T)(KEY(T, t) - KEY(T, b)));                         \
    memcpy(out + i * sizeof(T), &z, sizeof(T));                        \
  }

void dcr__delta_make(uint8_t *out, const uint8_t *base, const uint8_t *target, size_t count,
                     unsigned esize) {
  switch (esize) {
    case 1: MAKE(uint8_t) break;
    case 2: MAKE(uint16_t) break;
    case 4: MAKE(uint32_t) break;
    default: MAKE(uint64_t) break;
  }
}
