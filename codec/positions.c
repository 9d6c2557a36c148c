/*
 * positions.c - position streams (SPEC.md §9.1): the gaps between changed
 * elements, Rice-coded. At realistic change rates the gaps are close to
 * geometric, for which a Rice code with the right parameter is within a few
 * percent of the entropy (about 8.1 bits at 1%); byte-oriented codes lose ~10%
 * more because a byte cannot carry fractions of a bit. "p + 1 + gap" makes
 * unsorted or repeated positions impossible to express.
 */
#include "codec.h"

static uint64_t rice_bits(const uint32_t *pos, size_t count, unsigned k) {
  uint64_t bits = (uint64_t)count * (k + 1);
  uint32_t next = 0;
  for (size_t i = 0; i < count; i++) {
    bits += (pos[i] - next) >> k;
    next = pos[i] + 1;
  }
  return bits;
}

/* The lowest Rice parameter with the fewest bits. The cost is convex in k, so a
 * walk from the mean gap's logarithm (where geometric gaps put the optimum, give
 * or take one) ends at the same k as a scan from 0, in two or three passes. */
static unsigned best_k(const uint32_t *pos, size_t count) {
  if (!count) return 0;
  uint64_t mean = ((uint64_t)pos[count - 1] + 1) / count;
  unsigned k = 0;
  while (k < 31 && ((uint64_t)2 << k) <= mean) k++;
  uint64_t here = rice_bits(pos, count, k);
  while (k > 0) {
    uint64_t lower = rice_bits(pos, count, k - 1);
    if (lower > here) break;
    k--, here = lower;
  }
  while (k < 31) {
    uint64_t higher = rice_bits(pos, count, k + 1);
    if (higher >= here) break;
    k++, here = higher;
  }
  return k;
}

typedef struct {
  uint8_t *p;
  uint64_t acc;
  unsigned n; /* bits in acc, < 8 between calls */
} bit_writer;

static inline void put_bits(bit_writer *w, uint64_t bits, unsigned length) {
  w->acc |= bits << w->n;
  w->n += length;
  while (w->n >= 8) {
    *w->p++ = (uint8_t)w->acc;
    w->acc >>= 8;
    w->n -= 8;
  }
}

size_t dcr__positions_write(uint8_t *out, const uint32_t *pos, size_t count) {
  unsigned k = best_k(pos, count);
  bit_writer w = {out + 1, 0, 0};
  out[0] = (uint8_t)k;
  uint32_t next = 0; /* smallest position the next one may take */
  for (size_t i = 0; i < count; i++) {
    uint32_t v = pos[i] - next, q = v >> k;
    next = pos[i] + 1;
    for (; q >= 32; q -= 32) put_bits(&w, 0xFFFFFFFFu, 32);
    put_bits(&w, ((uint64_t)1 << q) - 1, q + 1); /* q ones, then a zero */
    put_bits(&w, v & (((uint64_t)1 << k) - 1), k);
  }
  if (w.n) *w.p++ = (uint8_t)w.acc;
  return (size_t)(w.p - out);
}

int dcr__positions_read(const uint8_t *in, size_t length, size_t count, size_t n,
                        uint32_t *pos, size_t *used, dcr_detail *d) {
  if (!length) return dcr__fail(d, DCR_E_POSITION, "position stream is empty");
  unsigned k = in[0];
  if (k > 31) return dcr__fail(d, DCR_E_POSITION, "Rice parameter %u exceeds 31", k);
  size_t at = 1;
  uint64_t acc = 0, next = 0;
  unsigned have = 0; /* unread bits in acc */
  for (size_t i = 0; i < count; i++) {
    uint64_t q = 0, low = 0;
    for (;;) { /* the unary quotient */
      if (!have) {
        if (at == length)
          return dcr__fail(d, DCR_E_POSITION, "position %zu: stream ends inside it", i);
        acc = in[at++], have = 8;
      }
      unsigned ones = (unsigned)__builtin_ctzll(~acc);
      if (ones < have) {
        q += ones;
        acc >>= ones + 1, have -= ones + 1;
        break;
      }
      q += have, acc = 0, have = 0;
      if (q >= n) break; /* already out of range: fail below, without reading on */
    }
    for (unsigned got = 0; got < k && q < n;) {
      if (!have) {
        if (at == length)
          return dcr__fail(d, DCR_E_POSITION, "position %zu: stream ends inside it", i);
        acc = in[at++], have = 8;
      }
      unsigned take = k - got < have ? k - got : have;
      low |= (acc & (((uint64_t)1 << take) - 1)) << got;
      acc >>= take, have -= take, got += take;
    }
    uint64_t p = next + (q << k) + low; /* q < n <= 2^32 and k <= 31: no overflow */
    if (q >= n || p >= n)
      return dcr__fail(d, DCR_E_POSITION, "position %zu is past the %zu-element chunk", i, n);
    pos[i] = (uint32_t)p;
    next = p + 1;
  }
  if (acc) return dcr__fail(d, DCR_E_POSITION, "padding bits after the last position are not zero");
  *used = at;
  return DCR_OK;
}
