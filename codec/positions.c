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

size_t dcr__positions_size(const uint32_t *pos, size_t count) {
  return 1 + (size_t)((rice_bits(pos, count, best_k(pos, count)) + 7) / 8);
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

/* Reads bits LSB-first. acc holds `have` unread bits (at most 63); the bits above
 * them may already hold the next bytes' bits, which a later refill ORs in again
 * unchanged, so a refill can load 8 bytes at once. */
typedef struct {
  const uint8_t *p, *end;
  uint64_t acc;
  unsigned have;
} bit_reader;

static inline void refill(bit_reader *b) {
  if (b->end - b->p >= 8) {
    uint64_t w = 0;
    for (unsigned i = 0; i < 8; i++) w |= (uint64_t)b->p[i] << (8 * i);
    unsigned bytes = (63 - b->have) >> 3;
    b->acc |= w << b->have;
    b->p += bytes;
    b->have += 8 * bytes;
  } else {
    while (b->have <= 55 && b->p < b->end) b->acc |= (uint64_t)*b->p++ << b->have, b->have += 8;
  }
}

static inline void consume(bit_reader *b, unsigned bits) {
  b->acc = bits < 64 ? b->acc >> bits : 0;
  b->have -= bits;
}

/* A unary quotient: *q one-bits, then the zero-bit that ends them, consumed. Stops
 * early, with *q ≥ limit, once the count reaches limit (a position already out of
 * range is not read on). Returns 0 if the stream ends first. */
static inline int quotient(bit_reader *b, uint64_t limit, uint64_t *q) {
  *q = 0;
  for (;;) {
    if (!b->have) refill(b);
    if (!b->have) return 0;
    unsigned ones = (unsigned)__builtin_ctzll(~b->acc | (uint64_t)1 << b->have);
    if (ones < b->have) {
      *q += ones;
      consume(b, ones + 1);
      return 1;
    }
    *q += b->have;
    consume(b, b->have);
    if (*q >= limit) return 1;
  }
}

int dcr__positions_read(const uint8_t *in, size_t length, size_t count, size_t n,
                        uint32_t *pos, size_t *used, dcr_detail *d) {
  if (!length) return dcr__fail(d, DCR_E_POSITION, "position stream is empty");
  unsigned k = in[0];
  if (k > 31) return dcr__fail(d, DCR_E_POSITION, "Rice parameter %u exceeds 31", k);
  bit_reader b = {in + 1, in + length, 0, 0};
  uint64_t next = 0, low_mask = ((uint64_t)1 << k) - 1;
  uint64_t below = 0, at = 0, above = 0; /* sums of gap >> (k - 1), >> k, >> (k + 1) */
  for (size_t i = 0; i < count; i++) {
    uint64_t q;
    if (!quotient(&b, n, &q))
      return dcr__fail(d, DCR_E_POSITION, "position %zu: stream ends inside it", i);
    if (q >= n)
      return dcr__fail(d, DCR_E_POSITION, "position %zu is past the %zu-element chunk", i, n);
    if (b.have < k) refill(&b);
    if (b.have < k) return dcr__fail(d, DCR_E_POSITION, "position %zu: stream ends inside it", i);
    uint64_t gap = (q << k) + (b.acc & low_mask), p = next + gap; /* q < n <= 2^32, k <= 31 */
    consume(&b, k);
    below += k ? gap >> (k - 1) : 0;
    at += q;
    above += gap >> (k + 1);
    if (p >= n)
      return dcr__fail(d, DCR_E_POSITION, "position %zu is past the %zu-element chunk", i, n);
    if (pos) pos[i] = (uint32_t)p; /* NULL: checked only, read again by a cursor */
    next = p + 1;
  }
  /* Whole bytes loaded ahead are given back; the rest of the last byte is padding. */
  if (b.acc & (((uint64_t)1 << (b.have & 7)) - 1))
    return dcr__fail(d, DCR_E_POSITION, "padding bits after the last position are not zero");
  /* §9.1: k must be the smallest parameter with the fewest bits. The cost
   * count·(k+1) + Σ(gap >> k) is convex in k, so its two neighbours decide:
   * cost(k-1) - cost(k) = below - at - count, cost(k+1) - cost(k) = count + above - at. */
  if ((k > 0 && below <= at + count) || (k < 31 && count + above < at))
    return dcr__fail(d, DCR_E_POSITION, "Rice parameter %u is not the smallest with the fewest "
                     "bits", k);
  *used = (size_t)(b.p - in) - b.have / 8;
  return DCR_OK;
}

/* A second reading of a stream that dcr__positions_read has accepted: no checks,
 * the positions in batches, so that a chunk whose count is near n needs no array
 * of n positions (4 bytes each: 4 GiB for a sparse 1 GiB U8 chunk). */
void dcr__positions_start(dcr__positions_cursor *c, const uint8_t *in, size_t length) {
  c->p = in + 1;
  c->end = in + length;
  c->acc = 0;
  c->have = 0;
  c->k = in[0];
  c->next = 0;
}

void dcr__positions_take(dcr__positions_cursor *c, uint32_t *out, size_t count) {
  bit_reader b = {c->p, c->end, c->acc, c->have};
  uint64_t next = c->next, low_mask = ((uint64_t)1 << c->k) - 1;
  unsigned k = c->k;
  for (size_t i = 0; i < count; i++) {
    uint64_t q;
    quotient(&b, UINT64_MAX, &q); /* accepted already: it neither ends nor runs long */
    if (b.have < k) refill(&b);
    uint64_t p = next + (q << k) + (b.acc & low_mask);
    consume(&b, k);
    out[i] = (uint32_t)p;
    next = p + 1;
  }
  c->p = b.p, c->acc = b.acc, c->have = b.have, c->next = next;
}
