/*
 * dtype.c - the dtype table (SPEC.md §3) and shape checks.
 */
#include "common.h"

static const struct {
  const char *name;
  unsigned size;
} dtypes[] = {
    [1] = {"BOOL", 1},    [2] = {"U8", 1},       [3] = {"I8", 1},  [4] = {"F8_E5M2", 1},
    [5] = {"F8_E4M3", 1}, [6] = {"I16", 2},      [7] = {"U16", 2}, [8] = {"F16", 2},
    [9] = {"BF16", 2},    [10] = {"I32", 4},     [11] = {"U32", 4}, [12] = {"F32", 4},
    [13] = {"I64", 8},    [14] = {"U64", 8},     [15] = {"F64", 8},
};
#define DTYPE_COUNT (int)(sizeof dtypes / sizeof dtypes[0])

int dcr_dtype_from_name(const char *name, size_t length) {
  for (int i = 1; i < DTYPE_COUNT; i++)
    if (strlen(dtypes[i].name) == length && !memcmp(dtypes[i].name, name, length)) return i;
  return 0;
}

const char *dcr_dtype_name(int dtype) {
  return dtype > 0 && dtype < DTYPE_COUNT ? dtypes[dtype].name : NULL;
}

unsigned dcr_dtype_size(int dtype) {
  return dtype > 0 && dtype < DTYPE_COUNT ? dtypes[dtype].size : 0;
}

int dcr__desc_check(const dcr__desc *t, const dcr_limits *lim, dcr_detail *d) {
  unsigned size = dcr_dtype_size(t->dtype);
  if (!size) return dcr__fail(d, DCR_E_DTYPE, "unknown dtype code %d", t->dtype);
  if (t->rank > lim->max_rank)
    return dcr__fail(d, DCR_E_LIMIT, "rank %u exceeds the limit %llu", t->rank,
                     (unsigned long long)lim->max_rank);
  /* A zero anywhere makes the tensor empty, but the other dimensions must still
   * not overflow: [0, 2^63, 4] is as malformed as [2^63, 4]. */
  uint64_t elements = 1, bytes;
  int overflow = 0;
  for (unsigned i = 0; i < t->rank; i++) {
    uint64_t dim = t->dims[i] ? t->dims[i] : 1;
    overflow |= dcr__mul_overflow(elements, dim, &elements);
  }
  overflow |= dcr__mul_overflow(elements, size, &bytes);
  if (overflow)
    return dcr__fail(d, DCR_E_SHAPE, "shape of %u dimensions overflows 64 bits", t->rank);
  for (unsigned i = 0; i < t->rank; i++)
    if (!t->dims[i]) bytes = 0;
  if (bytes != t->byte_length)
    return dcr__fail(d, DCR_E_SHAPE, "shape gives %llu bytes of %s but byte length is %llu",
                     (unsigned long long)bytes, dcr_dtype_name(t->dtype),
                     (unsigned long long)t->byte_length);
  return DCR_OK;
}
