/*
 * positions.c - position streams (SPEC.md §9.1): the gaps between changed
 * elements, Rice-coded. At realistic change rates the gaps are close to
 * geometric, for which a Rice code with the right parameter is within a few
 * percent of the entropy (about 8.1 bits at 1%); byte-oriented codes lose ~10%
 * more because a byte cannot carry fractions of a bit. "p + 1 + gap" makes
 * unsorted or repeated positions impossible to express.
 */
#include "codec.h"

/* The bits of the Rice codes of the gaps with parameters k - 1, k and k + 1 (as
 * far as they are in 0..31) in one pass: bits[0], bits[1], bits[2]. */
static void rice_bits3(const uint32_t *pos, size_t count, unsigned k, uint64_t bits[3]) {
  unsigned lo = k ? k - 1 : k, hi = k < 31 ? k + 1 : k;
  uint64_t a = 0, b = 0, c = 0;
  for (size_t i = 0; i < count; i++) {
    uint32_t gap = pos[i] - (i ? pos[i - 1] + 1 : 0);
    a += gap >> lo, b += gap >> k, c += gap >> hi;
  }
  bits[0] = a + (uint64_t)count * (lo + 1);
  bits[1] = b + (uint64_t)count * (k + 1);
  bits[2] = c + (uint64_t)count * (hi + 1);
}

/* The lowest Rice parameter with the fewest bits. The cost is convex in k, so a
 * walk from the mean gap's logarithm (where geometric gaps put the optimum, give
 * or take one) ends at the same k as a scan from 0: each step measures k and its
 * two neighbours in one pass over the gaps, and one step is usually enough. */
static unsigned best_k(const uint32_t *pos, size_t count, uint64_t *cost) {
  *cost = 0;
  if (!count) return 0;
  uint64_t mean = ((uint64_t)pos[count - 1] + 1) / count;
  unsigned k = 0;
  while (k < 31 && ((uint64_t)2 << k) <= mean) k++;
  int moved = 0; /* -1 walking down, 1 up */
  for (;;) {
    uint64_t bits[3];
    rice_bits3(pos, count, k, bits);
    if (moved <= 0 && k > 0 && bits[0] <= bits[1]) {
      k--, moved = -1; /* lower is no longer: prefer it */
    } else if (moved >= 0 && k < 31 && bits[2] < bits[1]) {
      k++, moved = 1;
    } else {
      *cost = bits[1];
      return k;
    }
  }
}

size_t dcr__positions_size(const uint32_t *pos, size_t count) {
  uint64_t bits;
  best_k(pos, count, &bits);
  return 1 + (size_t)((bits + 7) / 8);
}

size_t dcr__positions_write(uint8_t *out, const uint32_t *pos, size_t count) {
  uint64_t bits;
  unsigned k = best_k(pos, count, &bits);
  dcr__bit_writer w = {out + 1, 0, 0};
  out[0] = (uint8_t)k;
  uint32_t next = 0; /* smallest position the next one may take */
  for (size_t i = 0; i < count; i++) {
    uint32_t v = pos[i] - next, q = v >> k;
    next = pos[i] + 1;
    for (; q >= 32; q -= 32) dcr__put_bits(&w, 0xFFFFFFFFu, 32);
    dcr__put_bits(&w, ((uint64_t)1 << q) - 1, q + 1); /* q ones, then a zero */
    dcr__put_bits(&w, v & (((uint64_t)1 << k) - 1), k);
  }
  return (size_t)(dcr__put_end(&w) - out);
}

/* Reading takes the codes from 64-bit words of the stream, loaded at the byte
 * where the next code starts: each word holds several codes of typical streams
 * (k + 1 + q bits a code, around 8 at 1% change), taken one after another with a
 * ctz for the quotient and a shift for the low bits, without refilling between
 * them. A code that no word holds whole (a long quotient, or the stream's end)
 * goes to long_gap, which reads it as a bit-by-bit reader would, errors included. */

enum { GAP_OK, GAP_ENDS, GAP_PAST };

/* The gap whose code starts at bit `from`, whatever its length, with the outcome
 * of a bit-by-bit reading: a stream that ends before any of the code's bits, or
 * inside it, ends inside it, but a quotient that reaches n (which the stream's end
 * may cut short) is past the chunk first. On GAP_OK, *q < n, *low and *end (the
 * bit just past the code) are set. */
static int long_gap(const uint8_t *bits, size_t bytes, uint64_t from, uint64_t n, unsigned k,
                    uint64_t *q, uint64_t *low, uint64_t *end) {
  uint64_t total = (uint64_t)bytes * 8, ones = 0;
  if (from == total) return GAP_ENDS;
  for (;;) { /* 56 bits a step: a word shifted by up to 7 still holds them */
    uint64_t b = from + ones;
    unsigned run = (unsigned)__builtin_ctzll(
        ~(dcr__bits_window(bits, bytes, (size_t)(b >> 3)) >> (b & 7)) | (uint64_t)1 << 56);
    ones += run;
    if (run < 56 || ones >= n) break; /* past the end, bits read as zeros: runs stop there */
  }
  if (ones >= n) return GAP_PAST;
  if (total - from - ones < 1 + (uint64_t)k) return GAP_ENDS;
  uint64_t b = from + ones + 1;
  *q = ones;
  *low = (dcr__bits_window(bits, bytes, (size_t)(b >> 3)) >> (b & 7)) & (((uint64_t)1 << k) - 1);
  *end = b + k;
  return GAP_OK;
}

/* What a reading carries from code to code: the bit where the next code starts,
 * the smallest position it may give, and two sums for R-POS-3 (see
 * dcr__positions_read): Σ(low & half), half being the low bits' top bit, and the
 * number of odd quotients. */
typedef struct {
  uint64_t at, next, tops, odd;
} reading;

/* Keeps gap q << k | low as position j, unless it is past n (returns 1). */
static inline __attribute__((always_inline)) int keep(reading *g, uint64_t q, uint64_t low,
                                                      unsigned k, uint64_t half, uint64_t n,
                                                      uint32_t *pos, size_t j) {
  uint64_t p = g->next + (q << k | low); /* q < 64, or q < n <= 2^32 from long_gap */
  if (p >= n) return 1;                  /* also when q >= n: p >= q */
  g->tops += low & half;
  g->odd += q & 1;
  if (pos) pos[j] = (uint32_t)p; /* NULL: checked only, read again by a cursor */
  g->next = p + 1;
  return 0;
}

/* Reads positions *i..count-1 into pos; GAP_OK once there, else GAP_ENDS or
 * GAP_PAST, the first rule of §9.1 that position *i breaks. Inlined into both
 * callers, so that the reading stays in registers and take's n is a constant. */
static inline __attribute__((always_inline)) int gaps(const uint8_t *bits, size_t bytes,
                                                      unsigned k, uint64_t n, reading *g,
                                                      uint32_t *pos, size_t *i, size_t count) {
  size_t j = *i;
  unsigned k1 = k + 1;
  uint64_t mask = ((uint64_t)1 << k) - 1, half = k ? (uint64_t)1 << (k - 1) : 0;
  int rc = GAP_OK;
  while (j < count) {
    size_t byte = (size_t)(g->at >> 3);
    uint64_t w = dcr__bits_window(bits, bytes, byte);
    /* Codes end by bit 62 of the word, so that bit 63, set in zeros, stands for
     * "no zero-bit left" and is never taken for a terminator; at the stream's end,
     * by its last bit. */
    uint64_t zeros = ~w | (uint64_t)1 << 63;
    unsigned lim = bytes - byte >= 8 ? 63 : 8 * (unsigned)(bytes - byte);
    unsigned first = (unsigned)(g->at & 7), o = first;
    while (j < count) {
      unsigned tz = (unsigned)__builtin_ctzll(zeros >> o), t = o + tz;
      if (t + k1 > lim) break;
      if (keep(g, tz, (w >> (t + 1)) & mask, k, half, n, pos, j)) {
        rc = GAP_PAST;
        break;
      }
      o = t + k1;
      j++;
    }
    g->at += o - first;
    if (rc) break;
    if (o != first) continue;
    uint64_t q, low, end;
    if ((rc = long_gap(bits, bytes, g->at, n, k, &q, &low, &end))) break;
    g->at = end;
    if (keep(g, q, low, k, half, n, pos, j)) {
      rc = GAP_PAST;
      break;
    }
    j++;
  }
  *i = j;
  return rc;
}

/* Positions read between two looks at a cancel flag: ~50 ms of work. */
#define WATCH_POSITIONS ((size_t)1 << 24)

int dcr__positions_watched(const uint8_t *in, size_t length, size_t count, size_t n,
                           uint32_t *pos, size_t *used, const volatile int *cancel,
                           dcr_detail *d) {
  if (!length) return dcr__fail(d, DCR_E_POSITION, "position stream is empty");
  unsigned k = in[0];
  if (k > 31) return dcr__fail(d, DCR_E_POSITION, "Rice parameter %u exceeds 31", k);
  const uint8_t *bits = in + 1;
  reading r = {0, 0, 0, 0};
  size_t i = 0;
  int rc = GAP_OK;
  while (!rc && i < count) {
    if (i && cancel && *cancel) return dcr__fail(d, DCR_E_INTERRUPTED, "interrupted");
    rc = gaps(bits, length - 1, k, n, &r, pos, &i,
              cancel && count - i > WATCH_POSITIONS ? i + WATCH_POSITIONS : count);
  }
  if (rc == GAP_ENDS)
    return dcr__fail(d, DCR_E_POSITION, "position %zu: stream ends inside it", i);
  if (rc == GAP_PAST)
    return dcr__fail(d, DCR_E_POSITION, "position %zu is past the %zu-element chunk", i, n);
  if ((r.at & 7) && bits[r.at >> 3] >> (r.at & 7))
    return dcr__fail(d, DCR_E_POSITION, "padding bits after the last position are not zero");
  /* §9.1: k must be the smallest parameter with the fewest bits. The cost
   * count·(k+1) + Σ(gap >> k) is convex in k, so its two neighbours decide:
   * cost(k-1) - cost(k) = Σ(gap >> (k-1)) - Σq - count with gap >> (k-1) = 2q + its
   * low bits' top bit, and cost(k+1) - cost(k) = count + Σ(gap >> (k+1)) - Σq with
   * gap >> (k+1) = (q - (q & 1)) / 2. Σq is the bits read less count·(k+1). */
  uint64_t quotients = r.at - (uint64_t)count * (k + 1);
  if ((k > 0 && quotients + (r.tops >> (k - 1)) <= count) ||
      (k < 31 && count + (quotients - r.odd) / 2 < quotients))
    return dcr__fail(d, DCR_E_POSITION, "Rice parameter %u is not the smallest with the fewest "
                     "bits", k);
  *used = 1 + (size_t)((r.at + 7) >> 3);
  return DCR_OK;
}

int dcr__positions_read(const uint8_t *in, size_t length, size_t count, size_t n,
                        uint32_t *pos, size_t *used, dcr_detail *d) {
  return dcr__positions_watched(in, length, count, n, pos, used, NULL, d);
}

/* A second reading of a stream that dcr__positions_read has accepted: no checks,
 * the positions in batches, so that a chunk whose count is near n needs no array
 * of n positions (4 bytes each: 4 GiB for a sparse 1 GiB U8 chunk). */
void dcr__positions_start(dcr__positions_cursor *c, const uint8_t *in, size_t length) {
  c->bits = in + 1;
  c->bytes = length - 1;
  c->at = 0;
  c->next = 0;
  c->k = in[0];
}

void dcr__positions_take(dcr__positions_cursor *c, uint32_t *out, size_t count) {
  reading r = {c->at, c->next, 0, 0};
  size_t i = 0;
  gaps(c->bits, c->bytes, c->k, UINT64_MAX, &r, out, &i, count); /* accepted: GAP_OK */
  c->at = r.at;
  c->next = r.next;
}
