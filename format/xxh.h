/*
 * xxh.h - XXH3 for libdcr. On x86-64, xxHash's runtime dispatch picks the widest
 * vector unit the CPU has (SSE2, AVX2, AVX-512); digests are the same on every
 * path, only faster.
 */
#ifndef DCR_XXH_H
#define DCR_XXH_H

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>
#if defined(__x86_64__) && defined(__has_include)
#if __has_include(<xxh_x86dispatch.h>)
#include <xxh_x86dispatch.h>
#endif
#endif

#endif
