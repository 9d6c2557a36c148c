/*
 * band_walk.c - where DELTA_BANDED's changes are (SPEC.md §9.5, "Applying"). A
 * change is named by its rank among the chunk's base elements of its band, so
 * finding it takes a count of each band's elements up to it: a walk over every
 * base element, which a rollout worker pays at every step.
 *
 * The walk takes the base a block of BLOCK_GROUPS groups of 64 elements at a
 * time, in two steps. The masks (fill): for each group, each band's 64-bit mask
 * of its elements there, and each band's count of elements before each group.
 * With AVX-512 VBMI, GFNI and VPOPCNTDQ that is about a dozen instructions a group
 * for all eight bands (fill_vbmi); AVX2 and portable C give the same masks, more
 * slowly. Then each band on its own (locate): each of its ranks that falls in the
 * block is found by the group counts (two compares and a popcount, or a binary
 * search) and a select in the group's mask (PDEP); then the band's changes in the
 * block are applied by scatter.c's loop for the element size. Before, an
 * element-by-element walk with a rare path per change (classed.c's) spent about
 * 40 ns a change and 1 ns an element; here a change costs about 6 ns.
 *
 * The streams' reader decodes each band's ranks once, into `pos` at the indexes
 * of their values (band by band, in rank order: the order of §9.5's value
 * stream); the walk turns them into positions where they lie. A block's masks are
 * made before any of its changes is applied, so a walk in place reads every class
 * of the block before it writes there. The writer's ranks (dcr__bands_rank) come
 * from the same masks, so both sides agree by construction.
 */
#include <stdlib.h>

#include "codec.h"
#include "walk.h"

#define GROUP 64
#define BLOCK_GROUPS 32 /* a power of two: the binary search's range */
/* A block is a page of BF16 elements, and the hardware's prefetch does not cross
 * pages: the fills ask for the base this far ahead of each group, so that a
 * block's first lines are on their way while the previous block's changes are
 * located. Memory apply of a 256 MiB BF16 pair at 1%, idle Intel Xeon VM: 58 ms
 * without, 52 with 512 bytes, 46 with 1536 to 3072 (within noise of each other). */
#define PREFETCH_AHEAD 2048 /* bytes */
/* The address as an integer: near a chunk's end it is past the buffer, which a
 * prefetch may name (it never faults) but pointer arithmetic may not. */
#define PREFETCH_GROUP(p, esize)                                                     \
  for (unsigned line = 0; line < GROUP * (esize); line += 64)                         \
  __builtin_prefetch((const void *)((uintptr_t)(p) + PREFETCH_AHEAD + line))

struct dcr__band_block {
  uint64_t masks[BLOCK_GROUPS][DCR__BANDS_MAX];
  /* Band b's elements before group g, g in 0..groups (band by band, so that a
   * band's counts are a vector; 8 more for fill_vbmi's transposes). */
  uint32_t before[DCR__BANDS_MAX][BLOCK_GROUPS + 8];
  uint8_t held[BLOCK_GROUPS]; /* bit b: band b has elements in group g */
};
typedef struct dcr__band_block block;

int dcr__bands_reserve(dcr__bands *bw, size_t ranks) {
  if (ranks <= bw->pos_capacity) return DCR_OK;
  uint32_t *grown = realloc(bw->pos, ranks * sizeof *grown);
  if (!grown) return DCR_E_NOMEM;
  bw->pos = grown, bw->pos_capacity = ranks;
  return DCR_OK;
}

void dcr__bands_free(dcr__bands *bw) { free(bw->pos); }

void dcr__bands_record(dcr__bands *bw, uint32_t *pos, uint8_t *values) {
  bw->rec_pos = pos;
  bw->rec_values = values;
}

/* ---- the masks of a block's groups: masks[g][b] and before[b][g + 1] from
 * before[b][g], for groups [0, groups) of 64 elements at p */

/* One group of `count` (at most 64) elements, in portable C. */
static void group_scalar(const dcr__bands *bw, const uint8_t *p, size_t count, block *blk,
                         size_t g) {
  uint64_t m[DCR__BANDS_MAX] = {0};
  unsigned esize = bw->esize;
  for (size_t k = 0; k < count; k++)
    m[dcr__band_at(bw, p + k * esize)] |= (uint64_t)1 << k;
  blk->held[g] = 0;
  for (size_t b = 0; b < DCR__BANDS_MAX; b++) {
    blk->masks[g][b] = m[b];
    blk->before[b][g + 1] = blk->before[b][g] + (uint32_t)__builtin_popcountll(m[b]);
    blk->held[g] |= (uint8_t)((m[b] != 0) << b);
  }
}

static void fill_scalar(const dcr__bands *bw, const uint8_t *p, size_t groups, block *blk) {
  for (size_t g = 0; g < groups; g++) {
    PREFETCH_GROUP(p + g * GROUP * bw->esize, bw->esize);
    group_scalar(bw, p + g * GROUP * bw->esize, GROUP, blk, g);
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define VECTOR_FILL 1

/* The class bytes of a group (classes fit a byte here). */
#define CLASS_BYTES(T)                                                             \
  for (unsigned k = 0; k < GROUP; k++) {                                           \
    T u;                                                                           \
    memcpy(&u, p + k * sizeof(T), sizeof(T));                                      \
    cb[k] = (uint8_t)(((uint64_t)u >> shift) & mask);                              \
  }

/* AVX2: band b's elements are those whose class byte is at least its first class
 * and below the next band's: max(x, t) = x is x >= t, unsigned. */
#define GE_HALF(v, t) ((uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_max_epu8(v, t), v)))
#define GE(t) (GE_HALF(lo, t) | (uint64_t)GE_HALF(hi, t) << 32)
__attribute__((target("avx2,popcnt"))) static void fill_avx2(const dcr__bands *bw,
                                                             const uint8_t *base, size_t groups,
                                                             block *blk) {
  unsigned shift = bw->shift;
  uint64_t mask = bw->mask;
  __m256i first[DCR__BANDS_MAX];
  for (size_t b = 0; b < bw->bands; b++) first[b] = _mm256_set1_epi8((char)bw->lo[b]);
  uint8_t cb[GROUP];
  for (size_t g = 0; g < groups; g++) {
    const uint8_t *p = base + g * GROUP * bw->esize;
    PREFETCH_GROUP(p, bw->esize);
    switch (bw->esize) {
      case 1: CLASS_BYTES(uint8_t) break;
      case 2: CLASS_BYTES(uint16_t) break;
      case 4: CLASS_BYTES(uint32_t) break;
      default: CLASS_BYTES(uint64_t) break;
    }
    __m256i lo = _mm256_loadu_si256((const __m256i *)(const void *)cb);
    __m256i hi = _mm256_loadu_si256((const __m256i *)(const void *)(cb + 32));
    uint64_t below = ~(uint64_t)0; /* not yet in a later band */
    blk->held[g] = 0;
    for (size_t b = bw->bands; b-- > 0;) {
      uint64_t ge = b ? GE(first[b]) : ~(uint64_t)0, m = ge & below;
      below &= ~ge;
      blk->masks[g][b] = m;
      blk->before[b][g + 1] = blk->before[b][g] + (uint32_t)__builtin_popcountll(m);
      blk->held[g] |= (uint8_t)((m != 0) << b);
    }
    for (size_t b = bw->bands; b < DCR__BANDS_MAX; b++)
      blk->masks[g][b] = 0, blk->before[b][g + 1] = blk->before[b][g];
  }
}

/* AVX-512 VBMI, GFNI and VPOPCNTDQ: each element's class byte looks up a one-hot
 * byte, 1 << its band; a GF(2) affine transform with the one-hot bytes as its
 * matrix transposes each 8x8 block of bits, and a byte permutation gathers band
 * b's bits of the 64 elements into 64-bit lane b: its mask. One VPOPCNTQ counts
 * all eight. The transpose reverses the bit order of a byte, so the class bytes
 * are taken in reverse order within each run of eight. */
#define GATHER_BYTE(i) ((i) % 8 * 8 + (i) / 8) /* lane b's byte j: run j's byte b */
#define REVERSED(i) ((i) / 8 * 8 + 7 - (i) % 8)
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,gfni,avx512vpopcntdq"))) static void
fill_vbmi(const dcr__bands *bw, const uint8_t *base, size_t groups, block *blk) {
  unsigned esize = bw->esize;
  uint8_t idx[GROUP], gather[GROUP], bit[GROUP];
  for (unsigned i = 0; i < GROUP; i++) {
    unsigned e = REVERSED(i);
    idx[i] = (uint8_t)(esize == 2 ? 2 * e : e); /* esize 2: the low byte of element e */
    gather[i] = (uint8_t)GATHER_BYTE(i);
    bit[i] = (uint8_t)(1u << (i % 8));
  }
  const __m128i shift = _mm_cvtsi32_si128((int)bw->shift);
  const __m512i pick = _mm512_loadu_si512((const void *)idx);
  const __m512i lanes = _mm512_loadu_si512((const void *)gather);
  const __m512i unit = _mm512_loadu_si512((const void *)bit);
  const __m512i low = _mm512_set1_epi8((char)bw->mask);
  const __m512i t0 = _mm512_loadu_si512((const void *)bw->onehot);
  const __m512i t1 = _mm512_loadu_si512((const void *)(bw->onehot + 64));
  const __m512i t2 = _mm512_loadu_si512((const void *)(bw->onehot + 128));
  const __m512i t3 = _mm512_loadu_si512((const void *)(bw->onehot + 192));
  uint32_t runs[BLOCK_GROUPS + 8][DCR__BANDS_MAX]; /* before, group by group */
  __m256i run = _mm256_setzero_si256();
  _mm256_storeu_si256((__m256i *)(void *)runs[0], run);
  for (size_t g = 0; g < groups; g++) {
    const uint8_t *p = base + g * GROUP * esize;
    PREFETCH_GROUP(p, esize);
    __m512i cb;
    if (esize == 1) { /* the word shift's bits from the next byte are masked off */
      cb = _mm512_permutexvar_epi8(pick, _mm512_loadu_si512((const void *)p));
      cb = _mm512_and_si512(_mm512_srl_epi16(cb, shift), low);
    } else if (esize == 2) {
      __m512i a = _mm512_srl_epi16(_mm512_loadu_si512((const void *)p), shift);
      __m512i b = _mm512_srl_epi16(_mm512_loadu_si512((const void *)(p + 64)), shift);
      cb = _mm512_and_si512(_mm512_permutex2var_epi8(a, pick, b), low);
    } else {
      __m128i q[4];
      for (unsigned k = 0; k < 4; k++)
        q[k] = _mm512_cvtepi32_epi8(
            _mm512_srl_epi32(_mm512_loadu_si512((const void *)(p + 64 * k)), shift));
      __m256i h0 = _mm256_inserti128_si256(_mm256_castsi128_si256(q[0]), q[1], 1);
      __m256i h1 = _mm256_inserti128_si256(_mm256_castsi128_si256(q[2]), q[3], 1);
      cb = _mm512_inserti64x4(_mm512_castsi256_si512(h0), h1, 1);
      cb = _mm512_and_si512(_mm512_permutexvar_epi8(pick, cb), low);
    }
    __m512i lo = _mm512_permutex2var_epi8(t0, cb, t1), hi = _mm512_permutex2var_epi8(t2, cb, t3);
    __m512i onehot = _mm512_mask_blend_epi8(_mm512_movepi8_mask(cb), lo, hi);
    __m512i m = _mm512_permutexvar_epi8(lanes, _mm512_gf2p8affine_epi64_epi8(unit, onehot, 0));
    _mm512_storeu_si512((void *)blk->masks[g], m);
    blk->held[g] = (uint8_t)_mm512_test_epi64_mask(m, m);
    run = _mm256_add_epi32(run, _mm512_cvtepi64_epi32(_mm512_popcnt_epi64(m)));
    _mm256_storeu_si256((__m256i *)(void *)runs[g + 1], run);
  }
  /* runs[g][b] to before[b][g], eight groups at a time: each 8x8 block of
   * counts transposed in two rounds of two-source permutes. */
  memset(runs[groups + 1], 0, 7 * sizeof runs[0]); /* the last eight's padding */
  uint32_t lo[16], hi[16], out[4][16];
  for (unsigned e = 0; e < 16; e++) { /* round 1: bands 0-3 (lo) or 4-7 (hi) of 4 rows */
    unsigned row = e % 4, band = e / 4;
    lo[e] = row < 2 ? row * 8 + band : 16 + (row - 2) * 8 + band;
    hi[e] = lo[e] + 4;
  }
  for (unsigned k = 0; k < 4; k++) /* round 2: bands 2k, 2k + 1 (of lo's four, mod 4), 8 rows */
    for (unsigned e = 0; e < 16; e++) {
      unsigned band = (2 * k + e / 8) % 4, row = e % 8;
      out[k][e] = row < 4 ? band * 4 + row : 16 + band * 4 + row - 4;
    }
  const __m512i first = _mm512_loadu_si512((const void *)lo), second = _mm512_loadu_si512((const void *)hi);
  const __m512i pair[2] = {_mm512_loadu_si512((const void *)out[0]),
                           _mm512_loadu_si512((const void *)out[1])};
  for (size_t g = 0; g <= groups; g += 8) {
    __m512i a = _mm512_loadu_si512((const void *)runs[g]), b = _mm512_loadu_si512((const void *)runs[g + 2]);
    __m512i c = _mm512_loadu_si512((const void *)runs[g + 4]), d = _mm512_loadu_si512((const void *)runs[g + 6]);
    __m512i ab[2] = {_mm512_permutex2var_epi32(a, first, b), _mm512_permutex2var_epi32(a, second, b)};
    __m512i cd[2] = {_mm512_permutex2var_epi32(c, first, d), _mm512_permutex2var_epi32(c, second, d)};
    for (unsigned k = 0; k < 4; k++) { /* bands 2k and 2k + 1 */
      __m512i t = _mm512_permutex2var_epi32(ab[k / 2], pair[k % 2], cd[k / 2]);
      _mm256_storeu_si256((__m256i *)(void *)(blk->before[2 * k] + g), _mm512_castsi512_si256(t));
      _mm256_storeu_si256((__m256i *)(void *)(blk->before[2 * k + 1] + g),
                          _mm512_extracti64x4_epi64(t, 1));
    }
  }
}

static int has_vbmi(void) {
  return __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("gfni") &&
         __builtin_cpu_supports("avx512vpopcntdq") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512bw");
}
#endif

/* The masks' code for this walk: by dcr__classed_vector and the CPU. */
static dcr__band_fill_fn *filler(const dcr__bands *bw) {
#ifdef VECTOR_FILL
  if (dcr__classed_vector && bw->mask <= 0xFF) {
    if (dcr__classed_vector == 1 && bw->esize <= 4 && has_vbmi()) return fill_vbmi;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt")) return fill_avx2;
  }
#endif
  return fill_scalar;
}

/* ---- locate: each band's ranks in the block made positions */

/* The k-th set bit of m (k below its popcount). */
static inline unsigned select_portable(uint64_t m, unsigned k) {
  for (; k; k--) m &= m - 1;
  return (unsigned)__builtin_ctzll(m);
}

/* Bit g: band b has elements in group g of the block. */
static inline uint32_t held_portable(const block *blk, size_t b) {
  uint32_t gm = 0;
  for (size_t g = 0; g < BLOCK_GROUPS; g++) gm |= (uint32_t)(blk->held[g] >> b & 1) << g;
  return gm;
}

#ifdef VECTOR_FILL
/* Bit b of each of the 32 bytes, gathered by PEXT eight at a time. */
__attribute__((target("bmi2"), always_inline)) static inline uint32_t held_bmi2(const block *blk,
                                                                               size_t b) {
  uint64_t q[4], bit = 0x0101010101010101ull << b;
  memcpy(q, blk->held, sizeof q);
  return (uint32_t)(_pext_u64(q[0], bit) | _pext_u64(q[1], bit) << 8 |
                    _pext_u64(q[2], bit) << 16 | _pext_u64(q[3], bit) << 24);
}
#endif
_Static_assert(BLOCK_GROUPS == 32, "held_* gather 32 groups");

/* The group of rank r of band b in the block: the last g with before[b][g] <= r
 * (before[b][groups] > r; the groups past it read as UINT32_MAX). */
static inline size_t group_search(const block *blk, size_t b, uint64_t r) {
  const uint32_t *c = blk->before[b];
  size_t g = 0;
  for (size_t step = BLOCK_GROUPS / 2; step; step >>= 1) g += c[g + step] <= r ? step : 0;
  return g;
}

#ifdef VECTOR_FILL
/* The same counted: the groups whose count before them is at most r, less one.
 * Two compares, not five dependent loads. */
__attribute__((target("avx512f,avx512vl,popcnt"), always_inline)) static inline size_t
group_count(const block *blk, size_t b, uint64_t r) {
  __m512i rv = _mm512_set1_epi32((int)r);
  const uint32_t *c = blk->before[b];
  return (size_t)__builtin_popcount(
             _mm512_cmple_epu32_mask(_mm512_loadu_si512((const void *)c), rv) |
             (unsigned)_mm512_cmple_epu32_mask(_mm512_loadu_si512((const void *)(c + 16)), rv) << 16) -
         1;
}
#endif

/* The positions of band b's changes among the block's `groups` groups, whose
 * first element is element `first` of the chunk, into pos at their values'
 * indexes (bd->v moves past them): a band that is not inverted has its next ranks
 * there; an inverted one changes every element but those its list names. Only
 * positions are written here, so that the compiler keeps the band's state in
 * registers (a store of an element's bytes may alias anything); walk_block then
 * applies them in one loop for the element size. */
#define LOCATE(NAME, ATTR, SELECT, HELD, GROUP_OF)                                                   \
  ATTR static void NAME(dcr__bands *bw, size_t b, const block *blk, size_t groups,   \
                        size_t first) {                                              \
    dcr__band *bd = &bw->band[b];                                                    \
    uint32_t total = blk->before[b][groups], *pos = bw->pos;                         \
    uint64_t seen = bd->seen;                                                        \
    bd->seen = seen + total;                                                         \
    if (!total) return;                                                              \
    if (!bd->inverted) {                                                             \
      uint32_t v = bd->v, end = bd->end;                                             \
      for (; v < end; v++) {                                                         \
        uint64_t r = pos[v] - seen; /* ranks before the block were found in theirs */ \
        if (r >= total) break;                                                       \
        size_t g = GROUP_OF(blk, b, r);                                              \
        pos[v] = (uint32_t)(first + g * GROUP +                                      \
                            SELECT(blk->masks[g][b], (unsigned)(r - blk->before[b][g]))); \
      }                                                                              \
      bd->v = v;                                                                     \
      return;                                                                        \
    }                                                                                \
    uint32_t v = bd->v, end = bd->end, taken = bd->taken, listed = bd->listed;         \
    const uint32_t *list = bd->list;                                                 \
    uint64_t r = taken < listed ? list[taken] - seen : UINT64_MAX;                   \
    for (uint32_t gm = HELD(blk, b); gm; gm &= gm - 1) {                             \
      size_t g = (size_t)__builtin_ctz(gm);                                          \
      uint64_t all = blk->masks[g][b], m = all;                                      \
      for (; r < blk->before[b][g + 1]; /* its unchanged elements here */            \
           r = ++taken < listed ? list[taken] - seen : UINT64_MAX)                   \
        m &= ~((uint64_t)1 << SELECT(all, (unsigned)(r - blk->before[b][g])));       \
      for (; m; m &= m - 1) {                                                        \
        if (v == end) { /* more elements than its changes and list */                \
          bd->overflow = 1;                                                          \
          break;                                                                     \
        }                                                                            \
        pos[v++] = (uint32_t)(first + g * GROUP + (unsigned)__builtin_ctzll(m));     \
      }                                                                              \
      if (bd->overflow) break;                                                       \
    }                                                                                \
    bd->v = v, bd->taken = taken;                                                    \
  }

LOCATE(locate_portable, , select_portable, held_portable, group_search)
#ifdef VECTOR_FILL
LOCATE(locate_bmi2, __attribute__((target("bmi2"))), dcr__select_bmi2, held_bmi2, group_search)
LOCATE(locate_vbmi, __attribute__((target("avx512f,avx512vl,bmi2,popcnt"))), dcr__select_bmi2,
       held_bmi2, group_count)
#endif

void dcr__bands_layout(dcr__bands *bw, int dtype, size_t bands, const uint16_t *lo) {
  unsigned shift, bits = dcr__class_bits(dtype, &shift);
  bw->esize = dcr_dtype_size(dtype);
  bw->shift = shift;
  bw->mask = ((uint64_t)1 << bits) - 1;
  bw->bands = bands;
  memset(bw->onehot, 0, sizeof bw->onehot);
  for (size_t b = 0; b < bands; b++) {
    for (size_t c = lo[b]; c < lo[b + 1]; c++) {
      bw->band_of[c] = (uint8_t)b;
      if (c < sizeof bw->onehot) bw->onehot[c] = (uint8_t)(1u << b);
    }
    bw->lo[b] = (uint8_t)lo[b];
  }
  bw->fill = filler(bw);
  bw->locate = locate_portable;
#ifdef VECTOR_FILL
  if (__builtin_cpu_supports("bmi2")) bw->locate = locate_bmi2;
  if (bw->fill == fill_vbmi && __builtin_cpu_supports("bmi2")) bw->locate = locate_vbmi;
#endif
}

void dcr__bands_begin(dcr__bands *bw) {
  dcr__bands_record(bw, NULL, NULL);
  for (size_t b = 0; b < bw->bands; b++) {
    bw->band[b].v = bw->band[b].first;
    bw->band[b].seen = 0;
    bw->band[b].taken = 0;
    bw->band[b].overflow = 0;
  }
}

/* ---- the walk */

/* The block of `elems` elements (at most BLOCK_GROUPS groups) from element
 * `first`: its masks, then each band's changes there found (and applied to out,
 * unless NULL). blk->before[b][0] is 0. */
static void walk_block(dcr__bands *bw, block *blk, const uint8_t *values, const uint8_t *base,
                       uint8_t *out, size_t first, size_t elems) {
  unsigned esize = bw->esize;
  size_t full = elems / GROUP, groups = (elems + GROUP - 1) / GROUP;
  const uint8_t *p = base + first * esize;
  bw->fill(bw, p, full, blk);
  if (groups > full) group_scalar(bw, p + full * GROUP * esize, elems % GROUP, blk, full);
  for (size_t g = groups; g < BLOCK_GROUPS; g++) {
    blk->held[g] = 0;
    if (g > groups)
      for (size_t b = 0; b < DCR__BANDS_MAX; b++) blk->before[b][g] = UINT32_MAX;
  }
  for (size_t b = 0; b < bw->bands; b++) {
    dcr__band *bd = &bw->band[b];
    uint32_t total = blk->before[b][groups], from = bd->v;
    if (!bd->inverted && (bd->v == bd->end || bw->pos[bd->v] - bd->seen >= total)) {
      bd->seen += total; /* no change of it here: not worth a call */
      continue;
    }
    bw->locate(bw, b, blk, groups, first);
    if (out && bd->v > from)
      dcr__scatter_packed(out, bw->pos + from, values + (size_t)from * esize, bd->v - from,
                          esize, DCR__OP_DELTA);
  }
}

void dcr__bands_walk(dcr__bands *bw, const uint8_t *values, const uint8_t *base, uint8_t *out,
                     size_t first, size_t last) {
  if (bw->impossible) return; /* dcr__bands_end says so */
  unsigned esize = bw->esize;
  block blk;
  for (size_t b = 0; b < DCR__BANDS_MAX; b++) blk.before[b][0] = 0;
  while (first < last) {
    size_t elems = last - first < BLOCK_GROUPS * GROUP ? last - first : BLOCK_GROUPS * GROUP;
    walk_block(bw, &blk, values, base, out, first, elems);
    first += elems;
  }
  if (bw->rec_pos && last == bw->n) /* the chunk's end: its changes, as found */
    for (size_t b = 0; b < bw->bands; b++) {
      size_t from = bw->band[b].first, met = bw->band[b].v - from;
      memcpy(bw->rec_pos + from, bw->pos + from, met * sizeof *bw->pos);
      memcpy(bw->rec_values + from * esize, values + from * esize, met * esize);
    }
}

int dcr__bands_end(const dcr__bands *bw, dcr_detail *d) {
  if (bw->impossible)
    return dcr__fail(d, DCR_E_POSITION, "the bands' changes and listed unchanged elements "
                     "name more elements than the chunk has");
  for (size_t b = 0; b < bw->bands; b++) {
    const dcr__band *bd = &bw->band[b];
    if (bd->inverted && (bd->overflow || bd->v < bd->end || bd->taken < bd->listed))
      return dcr__fail(d, DCR_E_POSITION, "inverted band %zu has %s elements in the base than "
                       "its %u changes and %u listed ranks say", b,
                       bd->overflow ? "more" : "fewer", bd->end - bd->first, bd->listed);
    if (!bd->inverted && bd->v < bd->end)
      return dcr__fail(d, DCR_E_POSITION, "band %zu has fewer elements in the base than its "
                       "change at rank %u needs", b, bw->pos[bd->v]);
  }
  return DCR_OK;
}

/* The changes found in a block, in element order: each band's since from[b] (its
 * positions increase, and no element is in two bands) marked in a bitmap of the
 * block, read back in order, each change's band told by its element's class and
 * its value the next of that band's (cursor). Appends to pos and out_values at
 * met; returns the new count. */
static size_t emit_block(const dcr__bands *bw, const uint32_t *from, const uint8_t *values,
                         const uint8_t *base, size_t first, size_t elems, uint32_t *cursor,
                         uint32_t *pos, uint8_t *out_values, size_t met) {
  unsigned esize = bw->esize;
  uint64_t marks[BLOCK_GROUPS] = {0};
  for (size_t b = 0; b < bw->bands; b++)
    for (uint32_t v = from[b]; v < bw->band[b].v; v++) {
      size_t at = bw->pos[v] - first;
      marks[at / GROUP] |= (uint64_t)1 << (at % GROUP);
    }
  for (size_t g = 0; g < (elems + GROUP - 1) / GROUP; g++)
    for (uint64_t m = marks[g]; m; m &= m - 1) {
      size_t at = first + g * GROUP + (unsigned)__builtin_ctzll(m);
      size_t b = dcr__band_at(bw, base + at * esize);
      pos[met] = (uint32_t)at;
      memcpy(out_values + met++ * esize, values + (size_t)cursor[b]++ * esize, esize);
    }
  return met;
}

size_t dcr__bands_collect(dcr__bands *bw, const uint8_t *values, const uint8_t *base, size_t n,
                          uint32_t *pos, uint8_t *out_values) {
  if (bw->impossible) return 0;
  /* block by block, so that the order comes from a block's bitmap (a k-way merge
   * of the bands' positions cost some 20 ns a change) */
  block blk;
  uint32_t from[DCR__BANDS_MAX], cursor[DCR__BANDS_MAX];
  size_t met = 0;
  for (size_t b = 0; b < DCR__BANDS_MAX; b++) blk.before[b][0] = 0;
  for (size_t b = 0; b < bw->bands; b++) cursor[b] = bw->band[b].first;
  for (size_t first = 0; first < n;) {
    size_t elems = n - first < BLOCK_GROUPS * GROUP ? n - first : BLOCK_GROUPS * GROUP;
    for (size_t b = 0; b < bw->bands; b++) from[b] = bw->band[b].v;
    walk_block(bw, &blk, values, base, NULL, first, elems);
    met = emit_block(bw, from, values, base, first, elems, cursor, pos, out_values, met);
    first += elems;
  }
  return met;
}

/* ---- the writer's side: the rank of each change in its band */

/* RANK(NAME, ATTR): the loop, compiled where POPCNT is the CPU's instruction and
 * where it is not. */
#define RANK(NAME, ATTR)                                                             \
  ATTR static void NAME(dcr__bands *bw, const uint8_t *base, size_t n, const uint32_t *pos, \
                        size_t count, uint32_t *ranks, uint32_t *offset, uint64_t *elems) { \
    unsigned esize = bw->esize;                                                     \
    uint64_t seen[DCR__BANDS_MAX] = {0};                                             \
    block blk;                                                                       \
    for (size_t b = 0; b < DCR__BANDS_MAX; b++) blk.before[b][0] = 0;                \
    for (size_t first = 0, j = 0; first < n;) {                                      \
      size_t here = n - first < BLOCK_GROUPS * GROUP ? n - first : BLOCK_GROUPS * GROUP; \
      size_t full = here / GROUP, groups = (here + GROUP - 1) / GROUP;               \
      const uint8_t *p = base + first * esize;                                       \
      bw->fill(bw, p, full, &blk);                                                   \
      if (groups > full) group_scalar(bw, p + full * GROUP * esize, here % GROUP, &blk, full); \
      for (; j < count && pos[j] < first + here; j++) {                              \
        size_t at = pos[j] - first, g = at / GROUP;                                  \
        size_t b = dcr__band_at(bw, base + (size_t)pos[j] * esize);                 \
        uint64_t below = blk.masks[g][b] & (((uint64_t)1 << (at % GROUP)) - 1);      \
        ranks[offset[b]++] =                                                         \
            (uint32_t)(seen[b] + blk.before[b][g] + (uint64_t)__builtin_popcountll(below)); \
      }                                                                              \
      for (size_t b = 0; b < bw->bands; b++) seen[b] += blk.before[b][groups];       \
      first += here;                                                                 \
    }                                                                                \
    for (size_t b = 0; b < bw->bands; b++) elems[b] = seen[b];                       \
  }

RANK(rank_portable, )
#ifdef VECTOR_FILL
RANK(rank_popcnt, __attribute__((target("popcnt"))))
#endif

void dcr__bands_rank(dcr__bands *bw, const uint8_t *base, size_t n, const uint32_t *pos,
                     size_t count, uint32_t *ranks, uint32_t *offset, uint64_t *elems) {
#ifdef VECTOR_FILL
  if (__builtin_cpu_supports("popcnt")) {
    rank_popcnt(bw, base, n, pos, count, ranks, offset, elems);
    return;
  }
#endif
  rank_portable(bw, base, n, pos, count, ranks, offset, elems);
}
