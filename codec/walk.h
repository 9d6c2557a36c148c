/*
 * walk.h - what DELTA_CLASSED (classed.c, §9.4) and DELTA_BANDED (banded.c, §9.5)
 * share: both name a chunk's changes by their rank within a *unit* of base
 * elements (a class in 1.2, a band of classes in 1.3), and one walk over the base
 * (classed.c) finds them. The streams' readers fill this state through
 * dcr__walk_begin; only the walk reads it after that.
 */
#ifndef DCR_WALK_H
#define DCR_WALK_H

#include "codec.h"

#define RANKS_AHEAD 16
/* Elements of a piece of the band walk (classed.c), which meets their changes band
 * by band. */

struct dcr__classed {
  unsigned esize, shift;
  uint64_t mask;
  size_t slots;
  /* The walk's hot state, by unit: elements of the unit still to pass before
   * its next change (UINT32_MAX for units without one: a chunk has fewer
   * elements, so it never runs out). One decrement per element, no lookup. */
  uint32_t left[DCR__CLASSES_MAX];
  uint16_t map[DCR__CLASSES_MAX]; /* unit -> slot, for the listed units */
  struct {
    uint64_t next;         /* rank of the next change */
    uint32_t changes;      /* changes not yet met */
    uint32_t value;        /* index of its next value */
    union {
      dcr__positions_cursor cursor; /* classes: §9.1's streams */
      dcr__golomb_cursor golomb;    /* bands: §9.5's */
    };
    uint8_t have, used;    /* ranks[used..have) are the next ranks, read ahead */
    /* An inverted band (§9.5): its stream lists the ranks of its unchanged
     * elements, `listed` of them still to meet, the next at rank `next`; `seen`
     * counts its elements met, `overflow` says one came past them all. */
    uint8_t inverted, overflow;
    uint32_t listed;
    uint64_t seen;
  } slot[DCR__CLASSES_MAX];
  /* Ranks read from each unit's stream RANKS_AHEAD at a time: a rank read alone
   * costs a call into the stream reader per change (~20 ns). */
  uint32_t ranks[DCR__CLASSES_MAX][RANKS_AHEAD];
  /* The group walk's units: those listed with changes still to meet. */
  uint16_t active[DCR__CLASSES_MAX];
  size_t nactive;
  uint32_t *taken_pos; /* dcr__classed_record: where the changes met go, or NULL */
  uint8_t *taken_values;
  size_t taken;
  /* What the streams list, for dcr__walk_begin: unit[s] has changes[s] changes
   * (at least one), their ranks in stream[s] (stream_length[s] bytes, checked;
   * for an inverted band, the ranks of its listed[s] unchanged elements, and no
   * stream at all if that is 0). */
  uint16_t unit[DCR__CLASSES_MAX];
  uint32_t changes[DCR__CLASSES_MAX];
  uint32_t listed[DCR__BANDS_MAX]; /* bands: an inverted band's listed unchanged ranks;
                                    * UINT32_MAX for the others */
  const uint8_t *stream[DCR__CLASSES_MAX];
  size_t stream_length[DCR__CLASSES_MAX];
  /* Bands (1.3): the units are `bands` bands of classes; band_of maps a class to
   * its band, whose classes start at band_lo[b] (the group walk's test, for class
   * fields of at most 8 bits). */
  int banded;
  size_t bands;
  uint8_t band_of[DCR__CLASSES_MAX];
  uint8_t band_lo[DCR__BANDS_MAX];
};

/* The writer's side: each of the count changes at pos (increasing) gets its rank
 * in its unit, UNIT(T, i) being element i's unit, from four histograms h0..h3
 * filled in turn (so that neighbours of one unit do not wait on each other's
 * increments); offset[u] is where unit u's changes go in ranks and in sorted,
 * which takes the change's value from z, and is left where they end. */
#define DCR__RANKS(T, UNIT)                                                       \
  for (size_t j = 0, at = 0; j < count; j++, at++) {                              \
    size_t stop = pos[j];                                                         \
    for (; at + 4 <= stop; at += 4) {                                             \
      h0[UNIT(T, at)]++;                                                          \
      h1[UNIT(T, at + 1)]++;                                                      \
      h2[UNIT(T, at + 2)]++;                                                      \
      h3[UNIT(T, at + 3)]++;                                                      \
    }                                                                             \
    for (; at < stop; at++) h0[UNIT(T, at)]++;                                    \
    size_t u = UNIT(T, at), slot = offset[u]++;                                   \
    ranks[slot] = h0[u]++ + h1[u] + h2[u] + h3[u];                                \
    memcpy(sorted + slot * sizeof(T), z + j * sizeof(T), sizeof(T));              \
  }

/* Begins a chunk's walk over the `slots` units the streams listed (of `units` in
 * all), their values from index Σ changes[0..s) on, in slot order. For bands,
 * band_of and the band ranges are the caller's to have set. */
DCR_HIDDEN void dcr__walk_begin(dcr__classed *cls, int dtype, size_t units, size_t slots);

#endif
