/*
 * planes.c - byte planes (SPEC.md §9.1): byte b of every element together, so
 * that zstd sees like bytes side by side (the low byte of a BF16 XOR is nearly
 * always 1, 3, 7 or 15; the high byte nearly always 0). Loops are written per
 * element size so the compiler can vectorize them.
 */
#include "codec.h"

#define PLANE_LOOP(E, BODY)                                               \
  case E:                                                                 \
    for (size_t i = 0; i < count; i++)                                    \
      for (unsigned b = 0; b < E; b++) BODY;                              \
    break;

void dcr__planes_split(uint8_t *planes, const uint8_t *elems, size_t count, unsigned esize) {
  switch (esize) {
    PLANE_LOOP(1, planes[i] = elems[i])
    PLANE_LOOP(2, planes[b * count + i] = elems[2 * i + b])
    PLANE_LOOP(4, planes[b * count + i] = elems[4 * i + b])
    PLANE_LOOP(8, planes[b * count + i] = elems[8 * i + b])
  }
}

void dcr__planes_xor_into(uint8_t *elems, const uint8_t *planes, size_t count, unsigned esize) {
  switch (esize) {
    PLANE_LOOP(1, elems[i] ^= planes[i])
    PLANE_LOOP(2, elems[2 * i + b] ^= planes[b * count + i])
    PLANE_LOOP(4, elems[4 * i + b] ^= planes[b * count + i])
    PLANE_LOOP(8, elems[8 * i + b] ^= planes[b * count + i])
  }
}

void dcr__planes_join(uint8_t *elems, const uint8_t *planes, size_t count, unsigned esize) {
  switch (esize) {
    PLANE_LOOP(1, elems[i] = planes[i])
    PLANE_LOOP(2, elems[2 * i + b] = planes[b * count + i])
    PLANE_LOOP(4, elems[4 * i + b] = planes[b * count + i])
    PLANE_LOOP(8, elems[8 * i + b] = planes[b * count + i])
  }
}

/* Elements first..first+count-1 of planes of `stride` elements (planes points at
 * element `first` of plane 0): a piece of a join, so that no caller needs room for
 * a whole chunk's joined elements. */
void dcr__planes_join_part(uint8_t *elems, const uint8_t *planes, size_t stride, size_t count,
                           unsigned esize) {
  switch (esize) {
    PLANE_LOOP(1, elems[i] = planes[i])
    PLANE_LOOP(2, elems[2 * i + b] = planes[b * stride + i])
    PLANE_LOOP(4, elems[4 * i + b] = planes[b * stride + i])
    PLANE_LOOP(8, elems[8 * i + b] = planes[b * stride + i])
  }
}

#define NONZERO(E)                                                        \
  case E:                                                                 \
    for (size_t i = 0; i < count; i++) {                                  \
      uint8_t any = 0;                                                    \
      for (unsigned b = 0; b < E; b++) any |= planes[b * count + i];      \
      n += any != 0;                                                      \
    }                                                                     \
    break;

size_t dcr__planes_nonzero(const uint8_t *planes, size_t count, unsigned esize) {
  size_t n = 0;
  switch (esize) {
    NONZERO(1)
    NONZERO(2)
    NONZERO(4)
    NONZERO(8)
  }
  return n;
}
