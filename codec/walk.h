/*
 * walk.h - the walks over a chunk's base that find the changes of DELTA_CLASSED
 * (§9.4) and DELTA_BANDED (§9.5): both name a change by its rank within a *unit*
 * of base elements, a class in 1.2 (classed.c walks them element by element), a
 * band of classes in 1.3 (band_walk.c, 64 elements at a time for every band). The
 * streams' readers (classed.c, banded.c) fill this state; only the walks read it
 * after that.
 */
#ifndef DCR_WALK_H
#define DCR_WALK_H

#include "codec.h"

#define RANKS_AHEAD 16

/* An element of esize bytes read as (and written from) an unsigned integer; the
 * host is little-endian (scatter.c asserts it), and each size is a fixed-size
 * copy, not a call. */
static inline uint64_t dcr__elem_load(const uint8_t *p, unsigned esize) {
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;
  switch (esize) {
    case 1: return memcpy(&u8, p, 1), u8;
    case 2: return memcpy(&u16, p, 2), u16;
    case 4: return memcpy(&u32, p, 4), u32;
    default: return memcpy(&u64, p, 8), u64;
  }
}
static inline void dcr__elem_store(uint8_t *p, uint64_t u, unsigned esize) {
  uint8_t u8 = (uint8_t)u;
  uint16_t u16 = (uint16_t)u;
  uint32_t u32 = (uint32_t)u;
  switch (esize) {
    case 1: memcpy(p, &u8, 1); break;
    case 2: memcpy(p, &u16, 2); break;
    case 4: memcpy(p, &u32, 4); break;
    default: memcpy(p, &u, 8); break;
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
/* The k-th set bit of m (k below its popcount): BMI2's PDEP deposits 1 << k there. */
__attribute__((target("bmi2"), always_inline)) static inline unsigned dcr__select_bmi2(uint64_t m,
                                                                                      unsigned k) {
  return (unsigned)__builtin_ctzll(_pdep_u64((uint64_t)1 << k, m));
}
#endif

/* A band of 1.3: its changes' values are [first, end) of the chunk's, in rank
 * order; v is the next one to find, once seen of its elements are walked. An
 * inverted band changes every element but the `listed` ranks at list, of which
 * `taken` are passed; overflow: it had an element past its changes and list. */
typedef struct {
  uint32_t first, end, v;
  uint64_t seen;
  const uint32_t *list;
  uint32_t listed, taken;
  uint8_t inverted, overflow;
} dcr__band;

/* band_walk.c's: a block's masks, and the code that fills and reads them. */
struct dcr__band_block;
typedef struct dcr__bands dcr__bands;
typedef void dcr__band_fill_fn(const dcr__bands *, const uint8_t *, size_t, struct dcr__band_block *);
typedef void dcr__band_locate_fn(dcr__bands *, size_t, const struct dcr__band_block *, size_t,
                                 size_t);

struct dcr__bands {
  unsigned esize, shift;
  uint64_t mask;
  size_t n, bands; /* the chunk's elements */
  dcr__band_fill_fn *fill;   /* chosen by dcr__bands_begin */
  dcr__band_locate_fn *locate;
  dcr__band band[DCR__BANDS_MAX];
  uint8_t band_of[DCR__CLASSES_MAX]; /* class -> band */
  uint8_t onehot[256];               /* 1 << band_of[c], for class fields of a byte */
  uint8_t lo[DCR__BANDS_MAX];        /* each band's first class (the same) */
  /* By value index: each band's ranks, decoded by the streams' reader, made
   * positions by the walk; after the chunk's count of them, the inverted bands'
   * listed ranks (the whole at most one a chunk element: else `impossible`).
   * pos_capacity: as allocated. */
  uint32_t *pos;
  size_t pos_capacity;
  /* The streams list more changes and unchanged elements than the chunk has (a
   * bundle that R-BND-7 rejects whatever the base): nothing is walked. */
  int impossible;
  uint32_t *rec_pos; /* dcr__classed_record: at their values' indexes */
  uint8_t *rec_values;
};

/* The band of the element at p (after dcr__bands_layout). */
static inline size_t dcr__band_at(const dcr__bands *bw, const uint8_t *p) {
  return bw->band_of[(dcr__elem_load(p, bw->esize) >> bw->shift) & bw->mask];
}

/* band_walk.c. dcr__bands_layout sets the dtype's class field and the bands
 * (band b: classes lo[b] .. lo[b + 1] - 1) and chooses the walk's code. The
 * streams' reader then reserves room for the ranks (count, then listed ones),
 * fills each band's first, end, inverted, list and listed, and the ranks; then
 * dcr__bands_begin. The walk, record, collect and end are dcr__classed_*'s for a
 * banded chunk. */
DCR_HIDDEN void dcr__bands_layout(dcr__bands *bw, int dtype, size_t bands, const uint16_t *lo);
DCR_HIDDEN int dcr__bands_reserve(dcr__bands *bw, size_t ranks);
DCR_HIDDEN void dcr__bands_free(dcr__bands *bw);
DCR_HIDDEN void dcr__bands_begin(dcr__bands *bw);
DCR_HIDDEN void dcr__bands_record(dcr__bands *bw, uint32_t *pos, uint8_t *values);
DCR_HIDDEN void dcr__bands_walk(dcr__bands *bw, const uint8_t *values, const uint8_t *base,
                                uint8_t *out, size_t first, size_t last);
DCR_HIDDEN size_t dcr__bands_collect(dcr__bands *bw, const uint8_t *values, const uint8_t *base,
                                     size_t n, uint32_t *pos, uint8_t *out_values);
/* The writer's walk, after dcr__bands_layout: the rank of each of the count
 * changes at pos (increasing) among the n elements of base in its band b goes to
 * ranks[offset[b]++]; elems[b] gets band b's elements. */
DCR_HIDDEN void dcr__bands_rank(dcr__bands *bw, const uint8_t *base, size_t n,
                                const uint32_t *pos, size_t count, uint32_t *ranks,
                                uint32_t *offset, uint64_t *elems);
DCR_HIDDEN int dcr__bands_end(const dcr__bands *bw, dcr_detail *d);

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
    dcr__positions_cursor cursor; /* §9.1's stream */
    uint8_t have, used;    /* ranks[used..have) are the next ranks, read ahead */
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
  /* What the streams list, for walk_begin: class unit[s] has changes[s]
   * changes (at least one), their ranks in stream[s] (stream_length[s] bytes,
   * checked). */
  uint16_t unit[DCR__CLASSES_MAX];
  uint32_t changes[DCR__CLASSES_MAX];
  const uint8_t *stream[DCR__CLASSES_MAX];
  size_t stream_length[DCR__CLASSES_MAX];
  /* A DELTA_BANDED chunk's (1.3) state instead, when banded is set. */
  int banded;
  dcr__bands bw;
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

#endif
