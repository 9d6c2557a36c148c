/*
 * banded.c - DELTA_BANDED, encoding 8 of format 1.3 (SPEC.md §9.5): what
 * DELTA_CLASSED (§9.4) saves, at a cost a rollout worker pays every step.
 *
 * 1.2 ranks each change within its exponent class, so the walk that finds it
 * keeps a count for each of some twenty active classes, and values go through a
 * bit-serial adaptive range coder (~13 ns a change). Measured on optimizer steps
 * (256 MiB BF16 at 1%), classes save 2.8 bits a change on positions (8.05 → 5.21)
 * and eight *bands* of adjacent classes, chosen per chunk, keep all but 0.06 of
 * them; the walk tests a band with one vector compare. Values are coded per band
 * with a canonical Huffman code (one table lookup a value) and the bits of the
 * magnitude under its leading one, stored.
 *
 * The writer chooses the bands by dynamic programming over the chunk's classes
 * (at most ATOMS_MAX groups of them), minimizing an estimate of the bits: the
 * entropy of each band's change/no-change split and of its value symbols, plus
 * its table. Only the estimate is floating point; the bytes follow from the
 * choice, which is the same on every run of a build.
 */
#include <math.h>
#include <stdlib.h>

#include "codec.h"
#include "walk.h"

#define CODE_MAX 11            /* the longest value code (§9.5) */
#define SYMS_MAX 128           /* 2B symbols for B = 64 bits */
#define ATOMS_MAX 64           /* groups of classes the band choice works on */
#define LOG2_BITS 8
#define LOG2_STEPS (1u << LOG2_BITS)

/* A value's symbol: 2L + neg, M = 2^L + the L stored bits (§9.5). */
static inline unsigned symbol_of(uint64_t z, uint64_t *m) {
  unsigned neg = (unsigned)(z & 1);
  *m = (z >> 1) + neg; /* z = 2M - neg */
  return 2 * (63u - (unsigned)__builtin_clzll(*m)) + neg;
}

static inline unsigned reverse_bits(unsigned code, unsigned length) {
  unsigned r = 0;
  for (unsigned i = 0; i < length; i++) r |= ((code >> i) & 1) << (length - 1 - i);
  return r;
}

/* Canonical codes from lengths (RFC 1951 §3.2.2): shorter codes first, and in a
 * length, lower symbols first. Returns each code bit-reversed, as a stream whose
 * first bit is bit 0 holds it. */
static void canonical_codes(const uint8_t *len, unsigned nsym, unsigned *code) {
  unsigned count[CODE_MAX + 1] = {0}, next[CODE_MAX + 2];
  for (unsigned s = 0; s < nsym; s++) count[len[s]]++;
  count[0] = 0;
  next[1] = 0;
  for (unsigned l = 1; l <= CODE_MAX; l++) next[l + 1] = (next[l] + count[l]) << 1;
  for (unsigned s = 0; s < nsym; s++)
    if (len[s]) code[s] = reverse_bits(next[len[s]]++, len[s]);
}

/* ---- encoder ------------------------------------------------------------- */

typedef struct {
  uint32_t elems[DCR__CLASSES_MAX];         /* elements of each class in the chunk */
  uint8_t atom_of[DCR__CLASSES_MAX];         /* class -> atom */
  uint16_t atom_lo[ATOMS_MAX];               /* an atom's first class */
  uint64_t atom_n[ATOMS_MAX + 1];            /* prefix sums over atoms: elements */
  uint64_t atom_k[ATOMS_MAX + 1];            /* changes */
  uint32_t hist[ATOMS_MAX + 1][SYMS_MAX];    /* value symbols (prefix sums) */
  double cost[ATOMS_MAX + 1][ATOMS_MAX + 1]; /* bits of a band of atoms [i, j) */
  double log2_at[LOG2_STEPS + 1];            /* log2(1 + i / LOG2_STEPS) */
  dcr__bands bw; /* the bands chosen, for the ranks' walk */
} workspace;

/* x log2 x for a count x: log2 of the mantissa interpolated in a table of
 * LOG2_STEPS steps, within 3e-6 of log2 (close enough for a choice). The choice
 * costs every pair of atoms this for each of its symbols, and log2() was a tenth
 * of an encode's time at 1% (256 MiB BF16). */
static double xlog2x(const workspace *w, uint64_t x) {
  if (x < 2) return 0;
  unsigned e = 63u - (unsigned)__builtin_clzll(x);
  uint64_t frac = (e >= 52 ? x >> (e - 52) : x << (52 - e)) & (((uint64_t)1 << 52) - 1);
  unsigned i = (unsigned)(frac >> (52 - LOG2_BITS));
  double t = (double)(frac & (((uint64_t)1 << (52 - LOG2_BITS)) - 1)) /
             (double)((uint64_t)1 << (52 - LOG2_BITS));
  return (double)x * ((double)e + w->log2_at[i] + (w->log2_at[i + 1] - w->log2_at[i]) * t);
}

/* The estimated bits of a band of atoms [i, j): its positions' entropy
 * n·H(k/n) = n log n − k log k − (n − k) log(n − k), its values' symbols'
 * entropy k log k − Σ f log f (the stored bits are the same in any band; the
 * k log k terms cancel), its table record and code lengths. */
static double band_cost(const workspace *w, unsigned i, unsigned j, unsigned nsym) {
  uint64_t n = w->atom_n[j] - w->atom_n[i], k = w->atom_k[j] - w->atom_k[i];
  double bits = 48; /* its threshold and k */
  if (k == 0) return bits;
  bits += xlog2x(w, n) - xlog2x(w, n - k);
  unsigned top = 0;
  for (unsigned s = 0; s < nsym; s++) {
    uint32_t f = w->hist[j][s] - w->hist[i][s];
    if (f) bits -= xlog2x(w, f), top = s + 1;
  }
  return bits + 8 + 4.0 * top + 16; /* nsym, lengths, the rank stream's k and last byte */
}

/* The bands (returns how many; thresholds into t) minimizing the summed cost over
 * the p atoms: best[b][j] is the least cost of atoms [0, j) in b bands. Ties go to
 * fewer bands and, in a count, to the earlier split: the same choice every run. */
static unsigned choose_bands(workspace *w, unsigned p, unsigned nsym, uint16_t *t) {
  static const double none = 1e300;
  double best[DCR__BANDS_MAX + 1][ATOMS_MAX + 1];
  uint8_t from[DCR__BANDS_MAX + 1][ATOMS_MAX + 1];
  for (unsigned i = 0; i < p; i++)
    for (unsigned j = i + 1; j <= p; j++) w->cost[i][j] = band_cost(w, i, j, nsym);
  unsigned most = p < DCR__BANDS_MAX ? p : DCR__BANDS_MAX;
  for (unsigned j = 0; j <= p; j++) best[0][j] = j ? none : 0;
  for (unsigned b = 1; b <= most; b++)
    for (unsigned j = 0; j <= p; j++) {
      best[b][j] = none;
      for (unsigned i = b - 1; i < j; i++) {
        double c = best[b - 1][i] + w->cost[i][j];
        if (c < best[b][j]) best[b][j] = c, from[b][j] = (uint8_t)i;
      }
    }
  unsigned bands = 1;
  for (unsigned b = 2; b <= most; b++)
    if (best[b][p] < best[bands][p]) bands = b;
  for (unsigned b = bands, j = p; b > 1; b--) {
    j = from[b][j];
    t[b - 2] = w->atom_lo[j];
  }
  return bands;
}

/* Code lengths of at most CODE_MAX bits for the frequencies f[0..nsym) (at least
 * one non-zero): Huffman's, built with two queues over the symbols sorted by
 * (frequency, symbol); if a code comes out longer than CODE_MAX, the frequencies
 * are halved (rounding up, so none becomes 0) and it is built again. A single
 * symbol gets length 1. */
static void code_lengths(const uint32_t *f, unsigned nsym, uint8_t *len) {
  uint64_t freq[SYMS_MAX];
  unsigned order[SYMS_MAX], m = 0;
  for (unsigned s = 0; s < nsym; s++) {
    len[s] = 0;
    freq[s] = f[s];
    if (f[s]) order[m++] = s;
  }
  if (m == 1) {
    len[order[0]] = 1;
    return;
  }
  for (;;) {
    for (unsigned a = 1; a < m; a++) /* insertion sort: m <= 128, usually ~12 */
      for (unsigned b = a; b > 0 && (freq[order[b - 1]] > freq[order[b]] ||
                                     (freq[order[b - 1]] == freq[order[b]] &&
                                      order[b - 1] > order[b]));
           b--) {
        unsigned x = order[b];
        order[b] = order[b - 1], order[b - 1] = x;
      }
    uint64_t weight[2 * SYMS_MAX];
    unsigned parent[2 * SYMS_MAX], depth[2 * SYMS_MAX];
    for (unsigned i = 0; i < m; i++) weight[i] = freq[order[i]];
    unsigned leaf = 0, node = m, next = m;
    for (unsigned k = 0; k + 1 < m; k++) { /* internal nodes m .. 2m-2, root last */
      unsigned pick[2];
      for (unsigned j = 0; j < 2; j++)
        pick[j] = leaf < m && (node >= next || weight[leaf] <= weight[node]) ? leaf++ : node++;
      weight[next] = weight[pick[0]] + weight[pick[1]];
      parent[pick[0]] = parent[pick[1]] = next++;
    }
    depth[2 * m - 2] = 0;
    unsigned longest = 0;
    for (unsigned i = 2 * m - 2; i-- > 0;) {
      depth[i] = depth[parent[i]] + 1;
      if (i < m && depth[i] > longest) longest = depth[i];
    }
    if (longest <= CODE_MAX) {
      for (unsigned i = 0; i < m; i++) len[order[i]] = (uint8_t)depth[i];
      return;
    }
    for (unsigned i = 0; i < m; i++) freq[order[i]] = (freq[order[i]] + 1) / 2;
  }
}

void *dcr__banded_workspace(void) {
  workspace *w = malloc(sizeof(workspace));
  if (w)
    for (unsigned i = 0; i <= LOG2_STEPS; i++) w->log2_at[i] = log2(1.0 + (double)i / LOG2_STEPS);
  return w;
}

#define CLASS_OF(T, i) (size_t)((uint64_t)load_##T(base + (i) * sizeof(T)) >> shift & mask)
/* The class histogram of every SAMPLE-th group of 64 elements (the choice of bands
 * needs the classes' sizes only roughly; the ranks' pass then counts exactly), in
 * four tables filled in turn (seen + k * classes), so that neighbours of one class
 * do not wait on each other. */
#define SAMPLE 4
#define HISTOGRAM(T)                                                              \
  for (size_t g = 0; g < n; g += SAMPLE * 64) {                                   \
    size_t i = g, end = g + 64 < n ? g + 64 : n;                                  \
    for (; i + 4 <= end; i += 4) {                                                \
      h0[CLASS_OF(T, i)]++;                                                       \
      h1[CLASS_OF(T, i + 1)]++;                                                   \
      h2[CLASS_OF(T, i + 2)]++;                                                   \
      h3[CLASS_OF(T, i + 3)]++;                                                   \
    }                                                                             \
    for (; i < end; i++) h0[CLASS_OF(T, i)]++;                                    \
  }

static inline uint8_t load_uint8_t(const uint8_t *p) { return *p; }
static inline uint16_t load_uint16_t(const uint8_t *p) { uint16_t u; memcpy(&u, p, 2); return u; }
static inline uint32_t load_uint32_t(const uint8_t *p) { uint32_t u; memcpy(&u, p, 4); return u; }
static inline uint64_t load_uint64_t(const uint8_t *p) { uint64_t u; memcpy(&u, p, 8); return u; }

size_t dcr__banded_write(dcr__classed_encoder *ws, uint8_t *out, size_t capacity,
                         const uint8_t *base, size_t n, int dtype, const uint32_t *pos,
                         const uint8_t *old, const uint8_t *z, size_t count, uint32_t *ranks,
                         uint8_t *sorted) {
  workspace *w = ws->bands;
  unsigned esize = dcr_dtype_size(dtype), shift, bits = dcr__class_bits(dtype, &shift);
  unsigned nsym = 16 * esize; /* 2B */
  uint64_t mask = ((uint64_t)1 << bits) - 1;
  size_t classes = (size_t)1 << bits;
  /* The classes' sizes, then atoms: the classes present, in groups if many. */
  uint32_t *seen = ws->seen, *h0 = seen, *h1 = seen + classes, *h2 = seen + 2 * classes,
           *h3 = seen + 3 * classes;
  if (classes > 1) {
    memset(seen, 0, 4 * classes * sizeof *seen);
    switch (esize) {
      case 1: HISTOGRAM(uint8_t) break;
      case 2: HISTOGRAM(uint16_t) break;
      case 4: HISTOGRAM(uint32_t) break;
      default: HISTOGRAM(uint64_t) break;
    }
  } else {
    h0[0] = (uint32_t)n, h1[0] = h2[0] = h3[0] = 0;
  }
  /* A class has at least its changes' elements, sampled or not. */
  uint32_t *changes = ws->offset;
  memset(changes, 0, classes * sizeof *changes);
  for (size_t c = 0; c < classes; c++) w->elems[c] = SAMPLE * (h0[c] + h1[c] + h2[c] + h3[c]);
  for (size_t j = 0; j < count; j++) {
    size_t c = (size_t)((dcr__elem_load(old + j * esize, esize) >> shift) & mask);
    if (++changes[c] > w->elems[c]) w->elems[c] = changes[c];
  }
  size_t present = 0;
  for (size_t c = 0; c < classes; c++) present += w->elems[c] != 0;
  unsigned p = 0;
  memset(w->atom_n, 0, sizeof w->atom_n);
  memset(w->atom_k, 0, sizeof w->atom_k);
  memset(w->hist, 0, sizeof w->hist);
  for (size_t c = 0, seen_classes = 0; c < classes; c++) {
    if (!w->elems[c]) continue;
    unsigned a = (unsigned)(seen_classes++ * ATOMS_MAX / (present > ATOMS_MAX ? present : ATOMS_MAX));
    if (present <= ATOMS_MAX) a = p;
    if (a == p) w->atom_lo[p++] = (uint16_t)c; /* a new atom starts here */
    w->atom_of[c] = (uint8_t)(p - 1);
    w->atom_n[p] += w->elems[c];
  }
  for (size_t j = 0; j < count; j++) {
    uint64_t m;
    unsigned a = w->atom_of[(dcr__elem_load(old + j * esize, esize) >> shift) & mask];
    w->atom_k[a + 1]++;
    w->hist[a + 1][symbol_of(dcr__elem_load(z + j * esize, esize), &m)]++;
  }
  for (unsigned a = 1; a <= p; a++) {
    w->atom_n[a] += w->atom_n[a - 1];
    w->atom_k[a] += w->atom_k[a - 1];
    for (unsigned s = 0; s < nsym; s++) w->hist[a][s] += w->hist[a - 1][s];
  }
  uint16_t t[DCR__BANDS_MAX];
  unsigned bands = choose_bands(w, p, nsym, t);

  uint16_t lo[DCR__BANDS_MAX + 1] = {0};
  for (unsigned b = 1; b < bands; b++) lo[b] = t[b - 1];
  lo[bands] = (uint16_t)classes;
  dcr__bands *bw = &w->bw;
  dcr__bands_layout(bw, dtype, bands, lo);
  /* Each change's value sorted by band (ranks keep order), then its rank. */
  uint32_t offset[DCR__BANDS_MAX + 1] = {0}, at[DCR__BANDS_MAX];
  for (size_t j = 0; j < count; j++)
    offset[dcr__band_at(bw, old + j * esize) + 1]++;
  uint32_t k[DCR__BANDS_MAX];
  for (unsigned b = 0; b < bands; b++) k[b] = offset[b + 1], offset[b + 1] += offset[b];
  memcpy(at, offset, sizeof at);
  for (size_t j = 0; j < count; j++) {
    size_t b = dcr__band_at(bw, old + j * esize);
    memcpy(sorted + (size_t)at[b]++ * esize, z + j * esize, esize);
  }
  uint64_t elems[DCR__BANDS_MAX];
  dcr__bands_rank(bw, base, n, pos, count, ranks, offset, elems);
  size_t table = 1 + 2 * (bands - 1) + 4 * (size_t)bands + 1;
  if (table > capacity) return SIZE_MAX;
  out[0] = (uint8_t)bands;
  for (unsigned b = 0; b + 1 < bands; b++) dcr__put16(out + 1 + 2 * b, t[b]);
  /* A band where most elements change lists the others (inverted): a gap code
   * spends at least a bit a change, the entropy far less where nearly all do. */
  uint8_t inverted = 0;
  for (unsigned b = 0; b < bands; b++) {
    dcr__put32(out + 1 + 2 * (bands - 1) + 4 * b, k[b]);
    if (2 * (uint64_t)k[b] > elems[b]) inverted |= (uint8_t)(1u << b);
  }
  out[table - 1] = inverted;
  /* offset[b] is now where band b's changes end. Code tables, from the symbols
   * counted per atom: a band's are the difference of two prefix sums. */
  size_t length = table;
  uint8_t len[DCR__BANDS_MAX][SYMS_MAX];
  unsigned code[DCR__BANDS_MAX][SYMS_MAX];
  for (unsigned b = 0, first = 0; b < bands; b++) {
    unsigned last = b + 1 < bands ? w->atom_of[t[b]] : p; /* atoms [first, last) */
    if (k[b]) {
      uint32_t f[SYMS_MAX];
      unsigned top = 0;
      for (unsigned s = 0; s < nsym; s++)
        if ((f[s] = w->hist[last][s] - w->hist[first][s])) top = s + 1;
      code_lengths(f, top, len[b]);
      canonical_codes(len[b], top, code[b]);
      if (length + 1 + (top + 1) / 2 > capacity) return SIZE_MAX;
      out[length++] = (uint8_t)top;
      for (unsigned s = 0; s < top; s += 2)
        out[length++] = (uint8_t)(len[b][s] | (s + 1 < top ? len[b][s + 1] << 4 : 0));
    }
    first = last;
  }
  for (unsigned b = 0, start = 0; b < bands; start = offset[b++]) {
    if (!k[b]) continue;
    const uint32_t *list = ranks + start;
    size_t listed = k[b];
    if (inverted >> b & 1) { /* the ranks of the unchanged elements, and their count */
      listed = (size_t)(elems[b] - k[b]);
      if (listed > ws->listed_capacity) {
        uint32_t *grown = realloc(ws->listed, listed * sizeof *grown);
        if (!grown) return SIZE_MAX; /* not a candidate then; the others remain */
        ws->listed = grown, ws->listed_capacity = listed;
      }
      for (uint32_t r = 0, i = 0, j = 0; j < listed; r++) {
        if (i < k[b] && list[i] == r) i++;
        else ws->listed[j++] = r;
      }
      list = ws->listed;
      if (length + 4 > capacity) return SIZE_MAX;
      dcr__put32(out + length, (uint32_t)listed);
      length += 4;
      if (!listed) continue;
    }
    /* a Golomb code is at most 31 bits longer a gap than the unary code */
    if (length + 4 + DCR__POSITIONS_BOUND(list[listed - 1] + 1) + 4 * listed > capacity)
      return SIZE_MAX;
    length += dcr__golomb_write(out + length, list, listed);
  }
  /* Values: at most 11 + 63 bits each, after at most 31 not yet stored, so the
   * bound is checked a value at a time against 14 bytes of slack. */
  dcr__bit_writer vw = {out + length, 0, 0};
  const uint8_t *stop = capacity - length >= 14 ? out + capacity - 14 : out;
  for (unsigned b = 0, i = 0; b < bands; b++)
    for (; i < offset[b]; i++) {
      uint64_t m;
      unsigned s = symbol_of(dcr__elem_load(sorted + (size_t)i * esize, esize), &m), L = s >> 1;
      if (vw.p > stop) return SIZE_MAX;
      dcr__put_bits(&vw, code[b][s], len[b][s]);
      if (L > 32) dcr__put_bits(&vw, m & 0xFFFFFFFFu, 32), m >>= 32, L -= 32;
      dcr__put_bits(&vw, m & (((uint64_t)1 << L) - 1), L);
    }
  dcr__put_end(&vw);

  return (size_t)(vw.p - out);
}

/* ---- decoder ------------------------------------------------------------- */

#define TABLE_SIZE (1u << CODE_MAX)

/* Reads band b's code lengths at *p (checked against end): fills *nsym and, unless
 * NULL, the lookup table (entry: symbol << 4 | length; 0 where no code starts). */
static int read_code(const uint8_t **p, const uint8_t *end, unsigned most, uint16_t *table,
                     unsigned *nsym, size_t b, dcr_detail *d) {
  if (*p == end) return dcr__fail(d, DCR_E_ENCODING, "band %zu's code cut short", b);
  unsigned top = *(*p)++;
  if (top == 0 || top > most)
    return dcr__fail(d, DCR_E_ENCODING, "band %zu codes %u symbols, not 1..%u", b, top, most);
  if ((size_t)(end - *p) < (top + 1) / 2)
    return dcr__fail(d, DCR_E_ENCODING, "band %zu's code cut short", b);
  uint8_t len[SYMS_MAX];
  unsigned kraft = 0, coded = 0;
  for (unsigned s = 0; s < top; s++) {
    len[s] = (uint8_t)((*p)[s / 2] >> (4 * (s & 1)) & 15);
    if (len[s] > CODE_MAX)
      return dcr__fail(d, DCR_E_ENCODING, "band %zu: a code of %u bits; at most %u", b, len[s],
                       CODE_MAX);
    if (len[s]) kraft += TABLE_SIZE >> len[s], coded++;
  }
  if ((top & 1) && (*p)[top / 2] >> 4)
    return dcr__fail(d, DCR_E_ENCODING, "band %zu: the code's last byte is not padded with 0", b);
  *p += (top + 1) / 2;
  if (!len[top - 1])
    return dcr__fail(d, DCR_E_ENCODING, "band %zu: its last symbol has no code", b);
  if (kraft != TABLE_SIZE && !(coded == 1 && kraft == TABLE_SIZE / 2))
    return dcr__fail(d, DCR_E_ENCODING, "band %zu: the code lengths are not a complete code", b);
  *nsym = top;
  if (!table) return DCR_OK;
  unsigned code[SYMS_MAX];
  canonical_codes(len, top, code);
  memset(table, 0, TABLE_SIZE * sizeof *table);
  for (unsigned s = 0; s < top; s++)
    if (len[s])
      for (unsigned j = code[s]; j < TABLE_SIZE; j += 1u << len[s])
        table[j] = (uint16_t)(s << 4 | len[s]);
  return DCR_OK;
}

/* Most values of a step are one or two units in the last place, coded in a bit or
 * two: a lookup of the next MULTI_BITS bits gives every value whose code and
 * stored bits lie wholly in them (up to 8 bytes of values, packed as they are
 * stored), so one lookup and one shift take several. Entries with n = 0 (the
 * next value is longer) go to the lookup of one value. Built only for bands with
 * enough values to repay the table (MULTI_MIN), and not with dcr__classed_vector
 * 0, where each value is read alone: the reference the fuzzer compares with. */
#define MULTI_BITS 8
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#define MULTI_MIN 1 /* the fuzzer's chunks are small: both paths on every band */
#else
#define MULTI_MIN 512
#endif
typedef struct {
  uint64_t values; /* n values of esize bytes each, from the lowest byte up */
  uint8_t n, bits;
} multi_entry;

static void build_multi(const uint16_t *table, unsigned B, unsigned esize, multi_entry *multi) {
  unsigned most = 8 / esize;
  for (unsigned w = 0; w < 1u << MULTI_BITS; w++) {
    multi_entry me = {0, 0, 0};
    unsigned used = 0;
    while (me.n < most) {
      unsigned e = table[(w >> used) & (TABLE_SIZE - 1)], l = e & 15, s = e >> 4, L = s >> 1;
      if (!l || l + L > MULTI_BITS - used) break; /* no code, or bits not in w */
      uint64_t x = (w >> (used + l)) & ((1u << L) - 1);
      if (L == B - 1 && (x || !(s & 1))) break; /* too large: the slow path says so */
      me.values |= (((uint64_t)1 << L | x) * 2 - (s & 1)) << (8 * esize * me.n);
      me.n++;
      used += l + L;
    }
    me.bits = (uint8_t)used;
    multi[w] = me;
  }
}

/* The values of elements of up to 4 bytes (a code and at most 31 stored bits: 42
 * bits) while 16 bytes of the stream remain past the one read from: from a 64-bit
 * buffer that holds at least 42 unread bits, refilled by one load when it runs
 * low, so a value costs one table lookup and a shift, and a run of short ones
 * (multi, unless NULL) a lookup together. Stops at the first value with no code
 * or too large (read_values says which). */
#define FAST_VALUES(T)                                                             \
  {                                                                                \
    const uint8_t *p = v + (bit >> 3);                                             \
    uint64_t buf = dcr__le64(p) >> (bit & 7);                                      \
    unsigned avail = 64 - (unsigned)(bit & 7);                                     \
    while (i < k) {                                                                \
      if (avail < CODE_MAX + 31) {                                                 \
        if ((bit >> 3) + 16 > bytes) break;                                        \
        buf = dcr__le64(v + (bit >> 3)) >> (bit & 7);                              \
        avail = 64 - (unsigned)(bit & 7);                                          \
      }                                                                            \
      if (multi && i + 8 / sizeof(T) <= k) {                                       \
        const multi_entry *me = &multi[buf & ((1u << MULTI_BITS) - 1)];            \
        if (me->n) {                                                               \
          memcpy(values + (size_t)i * sizeof(T), &me->values, 8);                  \
          i += me->n;                                                              \
          buf >>= me->bits;                                                        \
          avail -= me->bits;                                                       \
          bit += me->bits;                                                         \
          continue;                                                                \
        }                                                                          \
      }                                                                            \
      unsigned e = table[buf & (TABLE_SIZE - 1)], l = e & 15, s = e >> 4, L = s >> 1; \
      uint64_t x = (buf >> l) & (((uint64_t)1 << L) - 1);                          \
      if (!l || (L == B - 1 && (x || !(s & 1)))) break;                            \
      buf >>= l + L;                                                               \
      avail -= l + L;                                                              \
      bit += l + L;                                                                \
      T z = (T)(((uint64_t)1 << L | x) * 2 - (s & 1));                             \
      memcpy(values + (size_t)i++ * sizeof(T), &z, sizeof(T));                     \
    }                                                                              \
  }

/* Decodes k values of band b from bit *at of the value stream into values. */
static int read_values(const uint8_t *v, size_t bytes, uint64_t *at, const uint16_t *table,
                       const multi_entry *multi, unsigned B, uint32_t k, uint8_t *values,
                       unsigned esize, size_t b, dcr_detail *d) {
  uint64_t bit = *at, total = (uint64_t)bytes * 8, half = (uint64_t)1 << (B - 1);
  uint32_t i = 0;
  if ((bit >> 3) + 16 <= bytes) switch (esize) {
      case 1: FAST_VALUES(uint8_t) break;
      case 2: FAST_VALUES(uint16_t) break;
      case 4: FAST_VALUES(uint32_t) break;
      default: break;
    }
  for (; i < k; i++) {
    uint64_t w = dcr__bits_window(v, bytes, (size_t)(bit >> 3)) >> (bit & 7);
    unsigned e = table[w & (TABLE_SIZE - 1)], l = e & 15, s = e >> 4, L = s >> 1;
    if (!l) return dcr__fail(d, DCR_E_ENCODING, "band %zu: no value code here", b);
    uint64_t low;
    if (l + L <= 56) {
      low = (w >> l) & (((uint64_t)1 << L) - 1);
    } else { /* a long magnitude: two more windows */
      uint64_t from = bit + l;
      low = 0;
      for (unsigned got = 0; got < L;) {
        unsigned take = L - got < 32 ? L - got : 32;
        uint64_t x = dcr__bits_window(v, bytes, (size_t)((from + got) >> 3)) >> ((from + got) & 7);
        low |= (x & (((uint64_t)1 << take) - 1)) << got;
        got += take;
      }
    }
    bit += l + L;
    if (bit > total)
      return dcr__fail(d, DCR_E_ENCODING, "band %zu: the value stream ends inside a value", b);
    uint64_t m = L == 64 ? low : (uint64_t)1 << L | low;
    if (m > half || (m == half && !(s & 1)))
      return dcr__fail(d, DCR_E_ENCODING, "band %zu: a value does not fit %u bits", b, B);
    dcr__elem_store(values + (size_t)i * esize, 2 * m - (s & 1), esize);
  }
  *at = bit;
  return DCR_OK;
}

int dcr__banded_streams(dcr__classed *cls, const uint8_t *data, size_t length, int dtype,
                        size_t n, size_t count, uint8_t *values, const volatile int *cancel,
                        dcr_detail *d) {
  unsigned esize = dcr_dtype_size(dtype), shift, bits = dcr__class_bits(dtype, &shift);
  size_t classes = (size_t)1 << bits;
  if (length < 1) return dcr__fail(d, DCR_E_ENCODING, "band table cut short");
  size_t bands = data[0];
  if (bands == 0 || bands > DCR__BANDS_MAX || bands > classes)
    return dcr__fail(d, DCR_E_ENCODING, "%zu bands; 1..%zu for this dtype", bands,
                     classes < DCR__BANDS_MAX ? classes : (size_t)DCR__BANDS_MAX);
  size_t table = 1 + 2 * (bands - 1) + 4 * bands + 1;
  if (length < table) return dcr__fail(d, DCR_E_ENCODING, "band table cut short");
  uint16_t lo[DCR__BANDS_MAX + 1];
  lo[0] = 0;
  lo[bands] = (uint16_t)classes;
  for (size_t b = 1; b < bands; b++) {
    lo[b] = dcr__le16(data + 1 + 2 * (b - 1));
    if (lo[b] <= lo[b - 1] || lo[b] >= classes)
      return dcr__fail(d, DCR_E_ENCODING, "band threshold %u not above the last or past the "
                       "dtype's %zu classes", lo[b], classes);
  }
  uint32_t k[DCR__BANDS_MAX];
  uint64_t total = 0;
  for (size_t b = 0; b < bands; b++) {
    k[b] = dcr__le32(data + 1 + 2 * (bands - 1) + 4 * b);
    if ((total += k[b]) > count)
      return dcr__fail(d, DCR_E_ENCODING, "bands list more changes than count %zu", count);
  }
  if (total != count)
    return dcr__fail(d, DCR_E_ENCODING, "bands list %llu changes; count says %zu",
                     (unsigned long long)total, count);
  unsigned inverted = data[table - 1];
  for (size_t b = 0; b < DCR__BANDS_MAX; b++)
    if (inverted >> b & 1 && (b >= bands || !k[b]))
      return dcr__fail(d, DCR_E_ENCODING, "band %zu is inverted but has no change", b);
  const uint8_t *p = data + table, *end = data + length;
  const uint8_t *codes = p;
  uint16_t lookup[TABLE_SIZE];
  multi_entry multi[1u << MULTI_BITS];
  unsigned nsym;
  for (size_t b = 0; b < bands; b++) { /* checked now, read again below */
    int rc = k[b] ? read_code(&p, end, 16 * esize, NULL, &nsym, b, d) : DCR_OK;
    if (rc) return rc;
  }
  /* The ranks, decoded once as they are checked: a band's go where its values
   * go, in bw->pos; an inverted band's unchanged ones after all of those. */
  dcr__bands *bw = &cls->bw;
  if (dcr__bands_reserve(bw, count))
    return dcr__fail(d, DCR_E_NOMEM, "cannot hold a chunk's %zu ranks", count);
  size_t listed_total = 0, list_at[DCR__BANDS_MAX];
  uint32_t first = 0;
  bw->impossible = 0;
  for (size_t b = 0; b < bands; b++) {
    dcr__band *bd = &bw->band[b];
    bd->first = first;
    bd->end = first += k[b];
    bd->inverted = (uint8_t)(inverted >> b & 1);
    bd->listed = 0;
    list_at[b] = 0;
    if (!k[b]) continue;
    size_t listed = k[b], below = n;
    uint32_t *out = bw->pos + bd->first;
    if (bd->inverted) { /* the band has k + listed elements; the stream lists the latter */
      if ((size_t)(end - p) < 4) return dcr__fail(d, DCR_E_POSITION, "band %zu's count cut short", b);
      listed = dcr__le32(p);
      p += 4;
      if (listed > n - k[b])
        return dcr__fail(d, DCR_E_POSITION, "inverted band %zu lists %zu unchanged elements; the "
                         "chunk has room for %zu", b, listed, n - k[b]);
      below = k[b] + listed;
      /* More changes and unchanged elements than the chunk has cannot apply to any
       * base (R-BND-7, found by the walk); the streams are still checked. */
      if (count + listed_total + listed > n) bw->impossible = 1;
      out = NULL;
      if (!bw->impossible && listed) {
        if (dcr__bands_reserve(bw, count + listed_total + listed))
          return dcr__fail(d, DCR_E_NOMEM, "cannot hold %zu unchanged ranks",
                           listed_total + listed);
        out = bw->pos + count + listed_total;
      }
      bd->listed = (uint32_t)listed;
      list_at[b] = listed_total;
      listed_total += listed;
    }
    size_t used = 0;
    int rc = listed ? dcr__golomb_read(p, (size_t)(end - p), listed, below, out, &used, d)
                    : DCR_OK;
    if (rc) return rc;
    p += used;
  }
  for (size_t b = 0; b < bands; b++) bw->band[b].list = bw->pos + count + list_at[b];
  uint64_t at = 0;
  size_t bytes = (size_t)(end - p), done = 0;
  for (size_t b = 0; b < bands; b++) {
    if (!k[b]) continue;
    if (cancel && *cancel) return dcr__fail(d, DCR_E_INTERRUPTED, "interrupted");
    (void)read_code(&codes, end, 16 * esize, lookup, &nsym, b, d);
    int fast = k[b] >= MULTI_MIN && esize <= 4 && dcr__classed_vector;
    if (fast) build_multi(lookup, 8 * esize, esize, multi);
    int rc = read_values(p, bytes, &at, lookup, fast ? multi : NULL, 8 * esize, k[b],
                         values + done * esize, esize, b, d);
    if (rc) return rc;
    done += k[b];
  }
  if ((at + 7) / 8 != bytes || ((at & 7) && p[bytes - 1] >> (at & 7)))
    return dcr__fail(d, DCR_E_ENCODING, "value stream does not end where its last value does");
  cls->banded = 1;
  bw->n = n;
  dcr__bands_layout(bw, dtype, bands, lo);
  dcr__bands_begin(bw);
  return DCR_OK;
}
