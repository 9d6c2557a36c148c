/*
 * limits.c - default limits for untrusted input (SPEC.md §11).
 */
#include "common.h"

/* The limits' layout is the ABI ("Growing structs" in dcr.h). */
_Static_assert(sizeof(void *) != 8 || (sizeof(dcr_limits) == 128 &&
                                       offsetof(dcr_limits, reserved_) == 80),
               "dcr_limits changed size");

void dcr__limits_take(dcr_limits *out, const dcr_limits *given) {
  dcr_limits_default(out);
  if (!given) return;
  uint64_t budget = out->max_memory;
  *out = *given;
  /* a caller that fills the struct by hand, from before the budget existed, gets
   * the default budget rather than none ("Growing structs" in dcr.h) */
  if (!out->max_memory) out->max_memory = budget;
}

void dcr_limits_default(dcr_limits *l) {
  l->max_tensors = 1u << 20;
  l->max_name_length = 4096;
  l->max_rank = 16;
  l->max_chunk_size = 1u << 30;
  l->max_section_size = (uint64_t)1 << 31;
  l->max_header_size = 100000000;
  l->max_file_size = (uint64_t)1 << 48;
  l->max_bundle_size = (uint64_t)1 << 48;
  l->max_memory = (uint64_t)1 << 30;
  l->cancel = NULL;
  memset(l->reserved_, 0, sizeof l->reserved_);
}
