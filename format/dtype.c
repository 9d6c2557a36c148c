/*
 * dtype.c - the dtype table (SPEC.md §3) and shape checks.
 */
#include "common.h"

/* bits: the element's width; 4 and 6 are the packed dtypes of 1.1 (§3), stored as
 * bytes, whose "element" for chunks and encodings is one byte. */
static const struct {
  const char *name;
  unsigned bits;
} dtypes[] = {
    [1] = {"BOOL", 8},         [2] = {"U8", 8},           [3] = {"I8", 8},
    [4] = {"F8_E5M2", 8},      [5] = {"F8_E4M3", 8},      [6] = {"I16", 16},
    [7] = {"U16", 16},         [8] = {"F16", 16},         [9] = {"BF16", 16},
    [10] = {"I32", 32},        [11] = {"U32", 32},        [12] = {"F32", 32},
    [13] = {"I64", 64},        [14] = {"U64", 64},        [15] = {"F64", 64},
    [16] = {"F8_E8M0", 8},     [17] = {"F8_E4M3FNUZ", 8}, [18] = {"F8_E5M2FNUZ", 8},
    [19] = {"C64", 64},        [20] = {"F4", 4},          [21] = {"F6_E2M3", 6},
    [22] = {"F6_E3M2", 6},
};
#define DTYPE_COUNT (int)(sizeof dtypes / sizeof dtypes[0])
#define DTYPE_LAST_1_0 15 /* §12, R-VER-4: later codes are unknown in a 1.0 bundle */

int dcr__dtype_max(unsigned minor) { return minor ? DTYPE_COUNT - 1 : DTYPE_LAST_1_0; }

int dcr__dtype_lookup(const char *name, size_t length, unsigned minor) {
  int code = dcr_dtype_from_name(name, length);
  return code <= dcr__dtype_max(minor) ? code : 0;
}

int dcr_dtype_from_name(const char *name, size_t length) {
  for (int i = 1; i < DTYPE_COUNT; i++)
    if (strlen(dtypes[i].name) == length && !memcmp(dtypes[i].name, name, length)) return i;
  return 0;
}

const char *dcr_dtype_name(int dtype) {
  return dtype > 0 && dtype < DTYPE_COUNT ? dtypes[dtype].name : NULL;
}

unsigned dcr_dtype_bits(int dtype) {
  return dtype > 0 && dtype < DTYPE_COUNT ? dtypes[dtype].bits : 0;
}

unsigned dcr_dtype_size(int dtype) {
  unsigned bits = dcr_dtype_bits(dtype);
  return bits < 8 ? (bits ? 1 : 0) : bits / 8;
}

int dcr__desc_check(const dcr__desc *t, const dcr_limits *lim, dcr_detail *d) {
  unsigned bits = dcr_dtype_bits(t->dtype);
  if (!bits) return dcr__fail(d, DCR_E_DTYPE, "unknown dtype code %d", t->dtype);
  if (t->rank > lim->max_rank)
    return dcr__fail(d, DCR_E_LIMIT, "rank %u exceeds the limit %llu", t->rank,
                     (unsigned long long)lim->max_rank);
  /* A zero anywhere makes the tensor empty, but the other dimensions must still
   * not overflow: [0, 2^63, 4] is as malformed as [2^63, 4]. Packed dtypes
   * (R-DT-2) are counted in bits, the others in bytes, as §2.1 step 3.6 says. */
  unsigned packed = bits % 8 != 0, unit = packed ? bits : bits / 8;
  uint64_t elements = 1, total;
  int overflow = 0;
  for (unsigned i = 0; i < t->rank; i++) {
    uint64_t dim = t->dims[i] ? t->dims[i] : 1;
    overflow |= dcr__mul_overflow(elements, dim, &elements);
  }
  overflow |= dcr__mul_overflow(elements, unit, &total);
  if (overflow)
    return dcr__fail(d, DCR_E_SHAPE, "shape of %u dimensions overflows 64 bits", t->rank);
  for (unsigned i = 0; i < t->rank; i++)
    if (!t->dims[i]) total = 0;
  if (packed && total % 8)
    return dcr__fail(d, DCR_E_SHAPE, "%llu elements of %s are %llu bits, not whole bytes",
                     (unsigned long long)elements, dcr_dtype_name(t->dtype),
                     (unsigned long long)total);
  if (packed) total /= 8;
  if (total != t->byte_length)
    return dcr__fail(d, DCR_E_SHAPE, "shape gives %llu bytes of %s but byte length is %llu",
                     (unsigned long long)total, dcr_dtype_name(t->dtype),
                     (unsigned long long)t->byte_length);
  return DCR_OK;
}
