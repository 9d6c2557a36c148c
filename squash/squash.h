/*
 * squash.h - the squash room: bundles b1 … bn that follow one another composed
 * into one bundle from b1's base to bn's target (SPEC.md §10.4). Its one door is
 * dcr_squash in dcr.h; this header is shared by its files and the unit tests.
 *
 *   squash.c   dcr_squash: the chain's checks, the result's manifest, the chunk
 *              jobs (copied, composed, or rebuilt from the base) and the output
 *   compose.c  the composition of one chunk's changes without the base
 */
#ifndef DCR_SQUASH_H
#define DCR_SQUASH_H

#include "../codec/codec.h"

/* One chunk's changes along the chain, element by element, in the space of the
 * encodings' values (§9.1): each element is unchanged, or XOR-ed, moved by a ULP
 * delta, or overwritten, with the value that the composition of every change so
 * far gives. */
typedef struct {
  uint8_t *state; /* n: DCR__OP_* + 1, or 0: unchanged */
  uint8_t *acc;   /* n · esize: the composed value */
  size_t n;
  unsigned esize;
} dcr__composer;

DCR_HIDDEN int dcr__composer_init(dcr__composer *c, size_t chunk_size);
DCR_HIDDEN void dcr__composer_free(dcr__composer *c);
/* Every element of an n-element chunk of esize-byte elements unchanged. */
DCR_HIDDEN void dcr__compose_start(dcr__composer *c, size_t n, unsigned esize);
/* The next bundle's change of the chunk, as decoded without the base: `k` values
 * of op (DCR__OP_*) in planes (§9.1), at positions pos (NULL: dense, k = n).
 * DCR_E_ARGUMENT, saying why, where the result would need the base: an XOR and a
 * delta on one element; an overwritten element changed again, or an element
 * overwritten after a change (either may end at its base value, no change by
 * §9.2); a dense overwrite (which of its values change is known only from the
 * bytes it replaces). */
DCR_HIDDEN int dcr__compose_add(dcr__composer *c, int op, const uint32_t *pos,
                                const uint8_t *planes, size_t k, dcr_detail *d);
/* The composed change: its op, and the *count elements that change, at
 * increasing positions pos with their values packed in values (room for n each).
 * Elements whose XOR values or deltas cancel are left out. DCR_E_ARGUMENT where
 * changes of two kinds remain: a chunk has one encoding. */
DCR_HIDDEN int dcr__compose_end(const dcr__composer *c, int *op, uint32_t *pos,
                                uint8_t *values, size_t *count, dcr_detail *d);

#endif
