/*
 * classed.c - DELTA_CLASSED, the base-conditioned encoding of format 1.2 (SPEC.md
 * §9.4). An optimizer moves a weight by an amount that depends little on its
 * magnitude, while a float's unit in the last place is proportional to it: small
 * exponents change far more often, and by more units, than large ones. Every
 * other encoding codes changes as if each element were equally likely to change;
 * this one splits a chunk's elements into classes by their *base* bits (the
 * exponent field, which the decoder holds), codes the changes' ranks within each
 * class with that class's own Rice parameter, and their ULP deltas with an
 * adaptive range coder whose probabilities are the class's own.
 *
 * Decoding is in two halves, as the stages of §15 need: the streams (class table,
 * rank streams, values) are checked and the values decoded without the base; the
 * walk over the base's elements then finds each change, since a rank names the
 * r-th element of a class, and applies it.
 */
#include <stdlib.h>

#include "codec.h"
#include "rangecoder.h"
#include "walk.h"

/* §9.4: the class of an element is the field (u >> shift) & (2^bits - 1) of the
 * element read as a little-endian unsigned integer: the exponent for floats (the
 * real part's for C64), the whole byte for F8_E8M0, and one class (bits 0) for
 * integers, BOOL and the packed dtypes, whose bytes are not single elements. */
static const struct {
  uint8_t shift, bits;
} class_field[] = {
    [4] = {2, 5},  /* F8_E5M2 */     [5] = {3, 4},  /* F8_E4M3 */
    [8] = {10, 5}, /* F16 */         [9] = {7, 8},  /* BF16 */
    [12] = {23, 8}, /* F32 */        [15] = {52, 11}, /* F64 */
    [16] = {0, 8}, /* F8_E8M0 */     [17] = {3, 4}, /* F8_E4M3FNUZ */
    [18] = {2, 5}, /* F8_E5M2FNUZ */ [19] = {23, 8}, /* C64 */
};

unsigned dcr__class_bits(int dtype, unsigned *shift) {
  int known = dtype > 0 && dtype < (int)(sizeof class_field / sizeof class_field[0]);
  *shift = known ? class_field[dtype].shift : 0;
  return known ? class_field[dtype].bits : 0;
}

/* ---- values (§9.4): sign, then m = |delta| ≥ 1 as an adaptive Elias gamma code:
 * the length L = floor(log2 m) in unary, each of its bits with a context of its
 * own, then the L bits of m under its leading one, each of probability 1/2. */
#define CTX_PER_CLASS 64 /* the sign, and one per unary bit of L (at most 63) */

static void contexts_reset(dcr__rc_prob *ctx) {
  for (unsigned i = 0; i < CTX_PER_CLASS; i++) ctx[i] = DCR__RC_ONE / 2;
}

static void encode_value(dcr__rc_encoder *rc, dcr__rc_prob *ctx, uint64_t z, unsigned B) {
  unsigned negative = (unsigned)(z & 1);
  uint64_t m = negative ? (z >> 1) + 1 : z >> 1; /* z = 2m (up) or 2m - 1 (down) */
  unsigned L = 63u - (unsigned)__builtin_clzll(m);
  dcr__rc_encode(rc, &ctx[0], negative);
  for (unsigned i = 0; i < B - 1; i++) {
    dcr__rc_encode(rc, &ctx[1 + i], i < L);
    if (i >= L) break;
  }
  for (unsigned i = L; i-- > 0;) dcr__rc_encode_direct(rc, (unsigned)(m >> i) & 1);
}

/* The zigzag value, or 0 (never a valid one) for one outside B bits. */
static uint64_t decode_value(dcr__rc_decoder *rc, dcr__rc_prob *ctx, unsigned B) {
  unsigned negative = dcr__rc_decode(rc, &ctx[0]), L = 0;
  while (L < B - 1 && dcr__rc_decode(rc, &ctx[1 + L])) L++;
  uint64_t m = 1;
  for (unsigned i = 0; i < L; i++) m = (m << 1) | dcr__rc_decode_direct(rc);
  uint64_t half = (uint64_t)1 << (B - 1); /* a B-bit delta is at most 2^(B-1) down, less up */
  if (m > half || (m == half && !negative)) return 0;
  return negative ? 2 * m - 1 : 2 * m;
}

/* ---- encoder */

int dcr__classed_encoder_init(dcr__classed_encoder *ws) {
  memset(ws, 0, sizeof *ws);
  ws->offset = malloc((DCR__CLASSES_MAX + 1) * sizeof *ws->offset);
  ws->seen = malloc(4 * DCR__CLASSES_MAX * sizeof *ws->seen);
  ws->bands = dcr__banded_workspace();
  if (!ws->offset || !ws->seen || !ws->bands) {
    dcr__classed_encoder_free(ws);
    return DCR_E_NOMEM;
  }
  return DCR_OK;
}

void dcr__classed_encoder_free(dcr__classed_encoder *ws) {
  free(ws->offset);
  free(ws->seen);
  free(ws->bands);
  free(ws->listed);
  memset(ws, 0, sizeof *ws);
}

#define CLASS_AT(T, i) (size_t)((uint64_t)load_##T(base + (i) * sizeof(T)) >> shift & mask)
#define RANKS(T) DCR__RANKS(T, CLASS_AT)

static inline uint8_t load_uint8_t(const uint8_t *p) { return *p; }
static inline uint16_t load_uint16_t(const uint8_t *p) { uint16_t u; memcpy(&u, p, 2); return u; }
static inline uint32_t load_uint32_t(const uint8_t *p) { uint32_t u; memcpy(&u, p, 4); return u; }
static inline uint64_t load_uint64_t(const uint8_t *p) { uint64_t u; memcpy(&u, p, 8); return u; }

size_t dcr__classed_write(dcr__classed_encoder *ws, uint8_t *out, size_t capacity,
                          const uint8_t *base, int dtype, const uint32_t *pos,
                          const uint8_t *old, const uint8_t *z, size_t count,
                          uint32_t *ranks, uint8_t *sorted) {
  unsigned esize = dcr_dtype_size(dtype), shift, bits = dcr__class_bits(dtype, &shift);
  uint64_t mask = ((uint64_t)1 << bits) - 1;
  size_t classes = (size_t)1 << bits;
  uint32_t *offset = ws->offset, *seen = ws->seen;
  memset(offset, 0, (classes + 1) * sizeof *offset);
  for (size_t j = 0; j < count; j++) offset[((dcr__elem_load(old + j * esize, esize) >> shift) & mask) + 1]++;
  size_t m = 0;
  for (size_t c = 0; c < classes; c++) m += offset[c + 1] != 0;
  size_t table = 2 + 6 * m;
  if (table > capacity) return SIZE_MAX;
  dcr__put16(out, (uint16_t)m);
  uint8_t *t = out + 2;
  for (size_t c = 0; c < classes; c++) {
    if (offset[c + 1]) dcr__put16(t, (uint16_t)c), dcr__put32(t + 2, offset[c + 1]), t += 6;
    offset[c + 1] += offset[c]; /* now: where class c's changes start */
  }
  /* Each change's rank in its class: the elements of that class before it. */
  memset(seen, 0, 4 * classes * sizeof *seen);
  uint32_t *h0 = seen, *h1 = seen + classes, *h2 = seen + 2 * classes, *h3 = seen + 3 * classes;
  switch (esize) {
    case 1: RANKS(uint8_t) break;
    case 2: RANKS(uint16_t) break;
    case 4: RANKS(uint32_t) break;
    default: RANKS(uint64_t) break;
  }
  /* offset[c] is now where class c's changes end. */
  size_t length = table, start = 0;
  for (size_t c = 0; c < classes; c++) {
    size_t k = offset[c] - start;
    if (!k) continue;
    if (length + DCR__POSITIONS_BOUND(ranks[offset[c] - 1] + 1) > capacity) return SIZE_MAX;
    length += dcr__positions_write(out + length, ranks + start, k);
    start = offset[c];
  }
  dcr__rc_encoder rc;
  dcr__rc_prob ctx[CTX_PER_CLASS];
  dcr__rc_encoder_init(&rc, out + length, capacity - length);
  start = 0;
  for (size_t c = 0; c < classes; c++) {
    if (offset[c] == start) continue;
    contexts_reset(ctx);
    for (size_t i = start; i < offset[c]; i++)
      encode_value(&rc, ctx, dcr__elem_load(sorted + i * esize, esize), 8 * esize);
    start = offset[c];
  }
  size_t values = dcr__rc_finish(&rc, out + length);
  return values == SIZE_MAX ? SIZE_MAX : length + values;
}

/* ---- decoder */

/* Slot s's next rank (it has one: its changes are not all met). */
static inline uint32_t next_rank(dcr__classed *cls, size_t s) {
  if (cls->slot[s].used == cls->slot[s].have) {
    uint32_t unread = cls->slot[s].changes;
    uint32_t k = unread < RANKS_AHEAD ? unread : RANKS_AHEAD;
    dcr__positions_take(&cls->slot[s].cursor, cls->ranks[s], k);
    cls->slot[s].have = (uint8_t)k;
    cls->slot[s].used = 0;
  }
  return cls->ranks[s][cls->slot[s].used++];
}

int dcr__classed_decoder_init(dcr__classed **cls) {
  *cls = calloc(1, sizeof **cls);
  return *cls ? DCR_OK : DCR_E_NOMEM;
}

void dcr__classed_decoder_free(dcr__classed *cls) {
  if (cls) dcr__bands_free(&cls->bw);
  free(cls);
}

static void walk_begin(dcr__classed *cls, int dtype, size_t units, size_t slots);

int dcr__classed_streams(dcr__classed *cls, const uint8_t *data, size_t length, int dtype,
                         size_t n, size_t count, uint8_t *values, const volatile int *cancel,
                         dcr_detail *d) {
  unsigned esize = dcr_dtype_size(dtype), shift, bits = dcr__class_bits(dtype, &shift);
  size_t classes = (size_t)1 << bits;
  (void)shift;
  if (length < 2) return dcr__fail(d, DCR_E_ENCODING, "class table cut short");
  size_t m = (size_t)dcr__le16(data);
  if (m == 0 || m > classes)
    return dcr__fail(d, DCR_E_ENCODING, "%zu classes listed; the dtype has %zu", m, classes);
  if (length - 2 < 6 * m) return dcr__fail(d, DCR_E_ENCODING, "class table cut short");
  uint16_t *unit = cls->unit;
  uint32_t *changes = cls->changes;
  const uint8_t *p = data + 2 + 6 * m, *end = data + length;
  uint64_t total = 0;
  for (size_t s = 0; s < m; s++) {
    size_t c = (size_t)dcr__le16(data + 2 + 6 * s), k = (size_t)dcr__le32(data + 4 + 6 * s);
    if (c >= classes || (s && c <= unit[s - 1]))
      return dcr__fail(d, DCR_E_ENCODING, "class %zu out of order or past the dtype's %zu", c,
                       classes);
    if (!k) return dcr__fail(d, DCR_E_ENCODING, "class %zu is listed with no change", c);
    total += k;
    if (total > count)
      return dcr__fail(d, DCR_E_ENCODING, "classes list more changes than count %zu", count);
    unit[s] = (uint16_t)c;
    changes[s] = (uint32_t)k;
  }
  if (total != count)
    return dcr__fail(d, DCR_E_ENCODING, "classes list %llu changes; count says %zu",
                     (unsigned long long)total, count);
  /* The rank streams: checked whole now (§9.1 rules, ranks below n), read again one
   * rank at a time by the walk. */
  for (size_t s = 0; s < m; s++) {
    int rc = dcr__positions_watched(p, (size_t)(end - p), changes[s], n, NULL,
                                    &cls->stream_length[s], cancel, d);
    if (rc) return rc;
    cls->stream[s] = p;
    p += cls->stream_length[s];
  }
  dcr__rc_decoder rc;
  if (!dcr__rc_decoder_init(&rc, p, (size_t)(end - p)))
    return dcr__fail(d, DCR_E_ENCODING, "value stream does not start with a zero byte");
  dcr__rc_prob ctx[CTX_PER_CLASS];
  size_t at = 0;
  for (size_t s = 0; s < m; s++) {
    contexts_reset(ctx);
    for (uint32_t i = 0; i < changes[s]; i++, at++) {
      if (!(at & 0xFFFFF) && cancel && *cancel) /* every 2^20 values: ~10 ms */
        return dcr__fail(d, DCR_E_INTERRUPTED, "interrupted");
      uint64_t z = decode_value(&rc, ctx, 8 * esize);
      if (!z) return dcr__fail(d, DCR_E_ENCODING, "value %zu does not fit %u bits", at, 8 * esize);
      dcr__elem_store(values + at * esize, z, esize);
    }
  }
  if (!dcr__rc_finished(&rc))
    return dcr__fail(d, DCR_E_ENCODING, "value stream does not end where its last value does");
  cls->banded = 0;
  walk_begin(cls, dtype, classes, m);
  return DCR_OK;
}

/* Begins a chunk's walk over the `slots` classes the streams listed (of `units`
 * in all), their values from index Σ changes[0..s) on, in slot order. */
static void walk_begin(dcr__classed *cls, int dtype, size_t units, size_t slots) {
  unsigned shift, bits = dcr__class_bits(dtype, &shift);
  dcr__classed_record(cls, NULL, NULL);
  cls->esize = dcr_dtype_size(dtype);
  cls->shift = shift;
  cls->mask = ((uint64_t)1 << bits) - 1;
  cls->slots = slots;
  for (size_t u = 0; u < units; u++) cls->left[u] = UINT32_MAX;
  uint32_t at = 0;
  for (size_t s = 0; s < slots; s++) {
    uint16_t u = cls->unit[s];
    cls->map[u] = (uint16_t)s;
    cls->slot[s].changes = cls->changes[s];
    cls->slot[s].value = at;
    at += cls->changes[s];
    cls->slot[s].have = cls->slot[s].used = 0;
    cls->active[s] = u;
    dcr__positions_start(&cls->slot[s].cursor, cls->stream[s], cls->stream_length[s]);
    uint32_t r = next_rank(cls, s);
    cls->slot[s].next = r;
    cls->left[u] = r;
  }
  cls->nactive = slots;
}

/* The rare path of the walk: element i (of class c) is its class's next change:
 * applied to out (unless NULL), recorded if dcr__classed_record asked for it. */
static inline __attribute__((always_inline)) void change(dcr__classed *cls, size_t c, size_t i, uint8_t *out, const uint8_t *values) {
  unsigned esize = cls->esize;
  size_t s = cls->map[c];
  const uint8_t *v = values + (size_t)cls->slot[s].value++ * esize;
  if (out) dcr__delta_apply(out + i * esize, v, esize);
  if (cls->taken_pos) {
    cls->taken_pos[cls->taken] = (uint32_t)i;
    memcpy(cls->taken_values + cls->taken++ * esize, v, esize);
  }
  if (--cls->slot[s].changes) {
    uint32_t r = next_rank(cls, s);
    cls->left[c] = (uint32_t)(r - cls->slot[s].next - 1);
    cls->slot[s].next = r;
  } else {
    cls->left[c] = UINT32_MAX;
  }
}

/* SHIFT and MASK are constants where the dtype is known (BY_DTYPE), so that the
 * class costs a shift by an immediate, not one by a register the loop must load. */
#define WALK(T, SHIFT, MASK)                                                     \
  for (size_t i = first; i < last; i++) {                                        \
    T u;                                                                         \
    memcpy(&u, base + i * sizeof(T), sizeof(T));                                 \
    size_t c = (size_t)(((uint64_t)u >> (SHIFT)) & (MASK));                      \
    if (__builtin_expect(left[c]-- == 0, 0)) change(cls, c, i, out, values);     \
  }

/* BODY(T, SHIFT, MASK) for cls's element type, BF16 (the common case) with its
 * constants; the others with the locals shift and mask. */
#define BY_DTYPE(BODY)                                                           \
  if (cls->esize == 2 && shift == 7 && mask == 0xFF) {                           \
    BODY(uint16_t, 7, 0xFF)                                                      \
    return;                                                                      \
  }                                                                              \
  switch (cls->esize) {                                                          \
    case 1: BODY(uint8_t, shift, mask) break;                                    \
    case 2: BODY(uint16_t, shift, mask) break;                                   \
    case 4: BODY(uint32_t, shift, mask) break;                                   \
    default: BODY(uint64_t, shift, mask) break;                                  \
  }

static void walk_scalar(dcr__classed *cls, const uint8_t *values, const uint8_t *base,
                        uint8_t *out, size_t first, size_t last) {
  unsigned shift = cls->shift;
  uint64_t mask = cls->mask;
  uint32_t *left = cls->left;
  BY_DTYPE(WALK)
}

/* The count changes met put in element order: met in order but within a group of
 * 64 unit by unit, an insertion sort moves each past the few of its group met
 * before it (at most 63: bounded however dense the chunk). */
static void sort_met(uint32_t *pos, uint8_t *values, size_t count, unsigned esize) {
  for (size_t i = 1; i < count; i++) {
    uint32_t p = pos[i];
    if (pos[i - 1] < p) continue;
    uint8_t v[8];
    memcpy(v, values + i * esize, esize);
    size_t j = i;
    for (; j && pos[j - 1] > p; j--) {
      pos[j] = pos[j - 1];
      memcpy(values + j * esize, values + (j - 1) * esize, esize);
    }
    pos[j] = p;
    memcpy(values + j * esize, v, esize);
  }
}

/* ---- the group walk: the same changes, found 64 elements at a time.
 *
 * The scalar walk's cost is a load-increment-store chain on one class's count per
 * element (~1-2 ns). Here the classes of 64 elements are taken at once (as bytes),
 * and each class that still has changes gets the 64-bit mask of its elements in
 * the group: if the mask has no more of them than the class must still pass, its
 * count drops by the mask's popcount; otherwise the change is the mask's left[c]-th
 * set bit. Its cost grows with the classes still active (a chunk of realistic
 * weights lists some twenty), so past GROUP_CLASSES_MAX the scalar walk goes on.
 * It needs AVX2 (or AVX-512BW), BMI2 and POPCNT, chosen at run time; elsewhere
 * (and in portable C the masks cost more than the scalar walk) the scalar walk
 * runs. (Bands, 1.3, have a walk of their own: band_walk.c.) */
int dcr__classed_vector = 1;

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define GROUP_WALK 1
#define GROUP 64
#define GROUP_CLASSES_MAX 48

/* The class bytes of GROUP elements from p. */
#define CLASS_BYTES(T, SHIFT, MASK)                                               \
  for (unsigned k = 0; k < GROUP; k++) {                                          \
    T u;                                                                          \
    memcpy(&u, p + k * sizeof(T), sizeof(T));                                     \
    cb[k] = (uint8_t)(((uint64_t)u >> (SHIFT)) & (MASK));                         \
  }

static inline void class_bytes(const dcr__classed *cls, const uint8_t *p, uint8_t *cb) {
  unsigned shift = cls->shift;
  uint64_t mask = cls->mask;
  BY_DTYPE(CLASS_BYTES)
}

/* The changes in the group at element i: pending[0..np) are the active classes
 * (index a, mask m of their elements in the group) with more elements in the group
 * than they must still pass, in increasing a. Taken from the last, so that a class
 * whose last change this is can leave the active list by taking the list's last
 * (already counted) in its place. */
typedef struct {
  uint64_t m;
  size_t a;
} pending;

/* Inlined into each walk, so that popcounts are the CPU's instruction there. */
/* The changes of unit c among the group's elements m (at element i): those past
 * the left[c] it must still pass; left[c] is then what it must pass after m. */
__attribute__((target("bmi2,popcnt"), always_inline)) static inline void unit_changes(
    dcr__classed *cls, size_t c, uint64_t m, size_t i, uint8_t *out, const uint8_t *values) {
  uint32_t *left = cls->left;
  uint32_t cnt = (uint32_t)__builtin_popcountll(m);
  while (cnt > left[c]) {
    unsigned bit = dcr__select_bmi2(m, left[c]); /* its left[c]-th element here */
    change(cls, c, i + bit, out, values);
    m = bit == GROUP - 1 ? 0 : m & (~(uint64_t)0 << (bit + 1));
    cnt = (uint32_t)__builtin_popcountll(m);
  }
  if (left[c] != UINT32_MAX) left[c] -= cnt;
}

__attribute__((target("bmi2,popcnt"), always_inline)) static inline void group_changes(
    dcr__classed *cls, const pending *pend, size_t np, size_t i, uint8_t *out,
    const uint8_t *values) {
  while (np--) {
    size_t c = cls->active[pend[np].a];
    unit_changes(cls, c, pend[np].m, i, out, values);
    if (cls->left[c] == UINT32_MAX) cls->active[pend[np].a] = cls->active[--cls->nactive];
  }
}

/* The group walk around MASK(a), the mask of active class a's elements among the
 * class bytes cb (PREPARE runs once cb is filled): the hot loop only counts. */
#define GROUPS(PREPARE, MASK)                                                    \
  uint8_t cb[GROUP];                                                               \
  pending pend[GROUP_CLASSES_MAX];                                                 \
  uint32_t *left = cls->left;                                                      \
  for (size_t i = first; i < last; i += GROUP) {                                   \
    class_bytes(cls, base + i * cls->esize, cb);                                   \
    PREPARE;                                                                       \
    size_t np = 0, n = cls->nactive;                                               \
    for (size_t a = 0; a < n; a++) {                                               \
      uint64_t m = MASK(a);                                                        \
      uint32_t cnt = (uint32_t)__builtin_popcountll(m), *l = &left[cls->active[a]]; \
      size_t here = cnt > *l; /* without a branch: at 5% changes, one in 3 groups */ \
      pend[np].m = m, pend[np].a = a, np += here;                                  \
      *l -= here ? 0 : cnt;                                                        \
    }                                                                              \
    if (np) group_changes(cls, pend, np, i, out, values);                          \
  }

#define AVX2_MASK(a)                                                                 \
  ((uint32_t)_mm256_movemask_epi8(                                                   \
       _mm256_cmpeq_epi8(lo, _mm256_set1_epi8((char)cls->active[a]))) |              \
   (uint64_t)(uint32_t)_mm256_movemask_epi8(                                         \
       _mm256_cmpeq_epi8(hi, _mm256_set1_epi8((char)cls->active[a])))               \
       << 32)
__attribute__((target("avx2,bmi2,popcnt"))) static void walk_groups_avx2(
    dcr__classed *cls, const uint8_t *values, const uint8_t *base, uint8_t *out, size_t first,
    size_t last) {
  __m256i lo, hi;
  GROUPS((lo = _mm256_loadu_si256((const __m256i *)cb),
          hi = _mm256_loadu_si256((const __m256i *)(cb + 32))),
         AVX2_MASK)
}

/* AVX-512BW: one compare gives the 64-bit mask. */
#define AVX512_MASK(a) _mm512_cmpeq_epi8_mask(all, _mm512_set1_epi8((char)cls->active[a]))
__attribute__((target("avx512f,avx512bw,bmi2,popcnt"))) static void walk_groups_avx512(
    dcr__classed *cls, const uint8_t *values, const uint8_t *base, uint8_t *out, size_t first,
    size_t last) {
  __m512i all;
  GROUPS(all = _mm512_loadu_si512((const void *)cb), AVX512_MASK)
}


/* Walks [first, end) in groups if this CPU can (end - first a multiple of GROUP);
 * returns whether it did. */
static int walk_groups(dcr__classed *cls, const uint8_t *values, const uint8_t *base,
                       uint8_t *out, size_t first, size_t end) {
  if (!__builtin_cpu_supports("bmi2") || !__builtin_cpu_supports("popcnt")) return 0;
  if (dcr__classed_vector == 1 && __builtin_cpu_supports("avx512bw"))
    walk_groups_avx512(cls, values, base, out, first, end);
  else if (__builtin_cpu_supports("avx2"))
    walk_groups_avx2(cls, values, base, out, first, end);
  else
    return 0;
  return 1;
}
#endif

void dcr__classed_walk(dcr__classed *cls, const uint8_t *values, const uint8_t *base,
                       uint8_t *out, size_t first, size_t last) {
  if (cls->banded) {
    dcr__bands_walk(&cls->bw, values, base, out, first, last);
    return;
  }
#ifdef GROUP_WALK
  /* Groups need class bytes (at most 2^8 classes); they meet a group's changes
   * class by class (an applied one touches its own element only; recorded ones
   * are put in order by dcr__classed_collect). */
  size_t end = first + (last - first) / GROUP * GROUP;
  if (cls->mask <= 0xFF && cls->nactive <= GROUP_CLASSES_MAX && dcr__classed_vector &&
      walk_groups(cls, values, base, out, first, end))
    first = end;
#endif
  walk_scalar(cls, values, base, out, first, last);
}

void dcr__classed_record(dcr__classed *cls, uint32_t *pos, uint8_t *values) {
  cls->taken_pos = pos;
  cls->taken_values = values;
  cls->taken = 0;
  dcr__bands_record(&cls->bw, pos, values);
}

size_t dcr__classed_collect(dcr__classed *cls, const uint8_t *values, const uint8_t *base,
                            size_t n, uint32_t *pos, uint8_t *out_values) {
  if (cls->banded) return dcr__bands_collect(&cls->bw, values, base, n, pos, out_values);
  dcr__classed_record(cls, pos, out_values);
  dcr__classed_walk(cls, values, base, NULL, 0, n);
  size_t met = cls->taken;
  dcr__classed_record(cls, NULL, NULL);
  sort_met(pos, out_values, met, cls->esize);
  return met;
}

int dcr__classed_end(const dcr__classed *cls, dcr_detail *d) {
  if (cls->banded) return dcr__bands_end(&cls->bw, d);
  for (size_t s = 0; s < cls->slots; s++)
    if (cls->slot[s].changes)
      return dcr__fail(d, DCR_E_POSITION, "a class has fewer elements in the base than its "
                       "change at rank %llu needs", (unsigned long long)cls->slot[s].next);
  return DCR_OK;
}
