/*
 * golomb.c - rank streams of DELTA_BANDED (SPEC.md §9.5): gaps Golomb-coded with
 * any divisor m, where the position streams of §9.1 are Rice codes (m a power of
 * two). Gaps between the changes of a band are close to geometric, for which the
 * best Golomb code is within a fraction of a percent of the entropy; the best
 * Rice code was measured 4-7% above it (5.50 bits a change where the entropy is
 * 5.27, on a 256 MiB BF16 step at 1%), and ranks are three quarters of a bundle.
 *
 * A gap v is q = v / m one-bits, a zero-bit, then r = v mod m in truncated
 * binary: with b the bits of m - 1 (2^(b-1) < m <= 2^b) and u = 2^b - m, the
 * first b - 1 bits read as x; r = x if x < u, else r = u + 2(x - u) + the next
 * bit. Bits go into bytes from bit 0 up, as in §9.1.
 */
#include <math.h>

#include "codec.h"

typedef struct {
  uint64_t m;
  unsigned b; /* bits of the longest remainder: 0 for m = 1 */
  uint64_t u; /* remainders below u take b - 1 bits */
} divisor;

static divisor divisor_of(uint64_t m) {
  divisor g = {m, 0, 0};
  while (((uint64_t)1 << g.b) < m) g.b++;
  g.u = ((uint64_t)1 << g.b) - m;
  return g;
}

/* The divisor of the best Golomb code for geometric gaps of the mean that k
 * positions up to `last` have (Gallager and Van Voorhis, 1975): the smallest m
 * with θ^m + θ^(m+1) <= 1, θ the chance that an element does not change. */
static uint64_t best_divisor(uint32_t last, size_t k) {
  double theta = 1.0 - (double)k / ((double)last + 1.0);
  if (theta <= 0) return 1;
  double m = ceil(log(1.0 + theta) / -log(theta));
  return m < 1 ? 1 : m > (double)DCR__GOLOMB_MAX ? DCR__GOLOMB_MAX : (uint64_t)m;
}

size_t dcr__golomb_write(uint8_t *out, const uint32_t *pos, size_t count) {
  divisor g = divisor_of(best_divisor(pos[count - 1], count));
  dcr__put32(out, (uint32_t)g.m);
  dcr__bit_writer w = {out + 4, 0, 0};
  uint32_t next = 0;
  for (size_t i = 0; i < count; i++) {
    /* 32-bit division (gaps and m fit): pipelined across gaps, where a loop of
     * subtractions mispredicted about once a gap */
    uint32_t v32 = pos[i] - next, q32 = v32 / (uint32_t)g.m;
    uint64_t q = q32, r = v32 - q32 * (uint32_t)g.m;
    next = pos[i] + 1;
    /* the remainder's bits: b - 1, or b with the extra bit last */
    uint64_t rem = 0;
    unsigned bits = 0;
    if (g.b) {
      int more = r >= g.u;
      rem = more ? (g.u + ((r - g.u) >> 1)) | ((r - g.u) & 1) << (g.b - 1) : r;
      bits = g.b - 1 + (unsigned)more;
    }
    for (; q >= 32; q -= 32) dcr__put_bits(&w, 0xFFFFFFFFu, 32);
    if (q + 1 + bits <= 32) { /* most gaps: q ones, a zero and the remainder at once */
      dcr__put_bits(&w, (((uint64_t)1 << q) - 1) | rem << (q + 1), (unsigned)q + 1 + bits);
    } else {
      dcr__put_bits(&w, ((uint64_t)1 << q) - 1, (unsigned)q + 1);
      dcr__put_bits(&w, rem, bits);
    }
  }
  return (size_t)(dcr__put_end(&w) - out);
}

/* One gap from bit *at: GAP_OK and *v, or the rule it breaks, as a bit-by-bit
 * reader would find it (slow_gap). Most codes are read from one window of 57
 * bits (gap); a longer one, or one that meets the stream's end, a window at a
 * time. */
enum { GAP_OK, GAP_ENDS, GAP_PAST };
static int slow_gap(const uint8_t *bits, size_t bytes, uint64_t *at, const divisor *g,
                    uint64_t room, uint64_t *v) {
  uint64_t total = (uint64_t)bytes * 8, from = *at, q = 0;
  for (;;) { /* the quotient's ones, 56 at most a window */
    uint64_t b = from + q;
    if (b >= total || q > room / g->m) break;
    unsigned run = (unsigned)__builtin_ctzll(
        ~(dcr__bits_window(bits, bytes, (size_t)(b >> 3)) >> (b & 7)) | (uint64_t)1 << 56);
    q += run;
    if (run < 56) break;
  }
  if (q > room / g->m) return GAP_PAST; /* q·m alone is past the chunk */
  uint64_t end = from + q + 1;
  if (end > total) return GAP_ENDS;
  uint64_t r = 0;
  if (g->b) {
    if (end + g->b - 1 > total) return GAP_ENDS;
    uint64_t x = g->b > 1 ? (dcr__bits_window(bits, bytes, (size_t)(end >> 3)) >> (end & 7)) &
                                (((uint64_t)1 << (g->b - 1)) - 1)
                          : 0;
    end += g->b - 1;
    if (x < g->u) {
      r = x;
    } else {
      if (end + 1 > total) return GAP_ENDS;
      r = g->u + 2 * (x - g->u) + (bits[end >> 3] >> (end & 7) & 1);
      end++;
    }
  }
  *v = q * g->m + r;
  if (*v > room) return GAP_PAST;
  *at = end;
  return GAP_OK;
}

static inline __attribute__((always_inline)) int gap(const uint8_t *bits, size_t bytes,
                                                     uint64_t *at, const divisor *g,
                                                     uint64_t room, uint64_t *v) {
  uint64_t from = *at;
  if (__builtin_expect(bytes - (from >> 3) >= 8 && g->b, 1)) {
    uint64_t w = dcr__le64(bits + (from >> 3)) >> (from & 7);
    unsigned q = (unsigned)__builtin_ctzll(~w | (uint64_t)1 << 56), b = g->b;
    if (q + 1 + b <= 56) {
      uint64_t x = (w >> (q + 1)) & (((uint64_t)1 << (b - 1)) - 1), r = x, used = b - 1;
      if (x >= g->u) r = g->u + 2 * (x - g->u) + (w >> (q + b) & 1), used = b;
      uint64_t value = q * g->m + r;
      if (value <= room) {
        *v = value;
        *at = from + q + 1 + used;
        return GAP_OK;
      }
    }
  }
  return slow_gap(bits, bytes, at, g, room, v);
}

/* While 16 bytes remain past the one read from, a run of gaps from a 64-bit
 * buffer, refilled by one load when fewer bits remain than the longest remainder
 * and a few of quotient need; it stops before anything else (a long quotient, a
 * gap past the chunk), which gap() reads and says what is wrong. Returns 1 if a
 * rank after a gap taken would be past the chunk.
 *
 * r is x or u + 2(x - u) + the next bit, and which is as likely as not for some
 * divisors, where a branch is mispredicted every other gap; for others one side
 * is nearly certain and the branch is cheaper than the mask. `masked` (a
 * constant at each call, so that each is compiled apart) picks the mask. */
static inline __attribute__((always_inline)) int fast_gaps(const uint8_t *bits, size_t bytes,
                                                           const divisor *g, size_t count,
                                                           size_t n, uint32_t *out, size_t *ip,
                                                           uint64_t *atp, uint64_t *nextp,
                                                           int masked) {
  const uint64_t m = g->m, u = g->u, low = ((uint64_t)1 << (g->b - 1)) - 1;
  const unsigned b = g->b;
  uint64_t at = *atp, next = *nextp;
  uint64_t buf = dcr__le64(bits + (at >> 3)) >> (at & 7);
  unsigned avail = 64 - (unsigned)(at & 7);
  size_t i = *ip;
  int past = 0;
  for (; i < count; i++) {
    unsigned q = (unsigned)__builtin_ctzll(~buf | (uint64_t)1 << 63);
    if (q + b + 1 >= avail) {
      if ((at >> 3) + 16 > bytes) break;
      buf = dcr__le64(bits + (at >> 3)) >> (at & 7);
      avail = 64 - (unsigned)(at & 7);
      q = (unsigned)__builtin_ctzll(~buf | (uint64_t)1 << 63);
      if (q + b + 1 >= avail) break;
    }
    uint64_t x = (buf >> (q + 1)) & low, more = x >= u, r;
    if (masked)
      r = x + ((x - u + (buf >> (q + b) & 1)) & (0 - more));
    else
      r = more ? u + 2 * (x - u) + (buf >> (q + b) & 1) : x;
    uint64_t v = q * m + r;
    unsigned took = q + b + (unsigned)more;
    if (v > n - 1 - next) break;
    if (out) out[i] = (uint32_t)(next + v);
    next += v + 1;
    if (next >= n && i + 1 < count) {
      past = 1;
      i++;
      break;
    }
    buf >>= took;
    avail -= took;
    at += took;
  }
  *ip = i, *atp = at, *nextp = next;
  return past;
}

/* Each kind compiled on its own, out of line: inside the reader, the loop's
 * divisor and masks were spilled to the stack for want of registers. */
#define FAST_GAPS_OF(NAME, MASKED)                                                         \
  static __attribute__((noinline)) int NAME(const uint8_t *bits, size_t bytes,            \
                                            const divisor *g, size_t count, size_t n,     \
                                            uint32_t *out, size_t *ip, uint64_t *atp,     \
                                            uint64_t *nextp) {                            \
    return fast_gaps(bits, bytes, g, count, n, out, ip, atp, nextp, MASKED);              \
  }
FAST_GAPS_OF(fast_gaps_masked, 1)
FAST_GAPS_OF(fast_gaps_branched, 0)

int dcr__golomb_read(const uint8_t *in, size_t length, size_t count, size_t n, uint32_t *out,
                     size_t *used, dcr_detail *d) {
  if (length < 4) return dcr__fail(d, DCR_E_POSITION, "rank stream has no divisor");
  uint64_t m = dcr__le32(in);
  if (m == 0 || m > DCR__GOLOMB_MAX)
    return dcr__fail(d, DCR_E_POSITION, "rank stream divisor %llu outside 1..2^31",
                     (unsigned long long)m);
  divisor g = divisor_of(m);
  const uint8_t *bits = in + 4;
  size_t bytes = length - 4;
  uint64_t at = 0, next = 0;
  /* The mask where r < u has a chance between about 0.15 and 0.85: for
   * geometric gaps under the best divisor that chance is 2(1 - 2^(-u/m)). */
  int masked = 9 * g.u > g.m && 5 * g.u < 4 * g.m;
  for (size_t i = 0; i < count; i++) {
    if ((at >> 3) + 16 <= bytes && g.b) {
      int past = (masked ? fast_gaps_masked : fast_gaps_branched)(bits, bytes, &g, count, n,
                                                                  out, &i, &at, &next);
      if (past)
        return dcr__fail(d, DCR_E_POSITION, "rank %zu is past the chunk's %zu elements", i, n);
      if (i == count) break;
    }
    uint64_t v;
    int rc = gap(bits, bytes, &at, &g, n - 1 - next, &v); /* next <= n - 1 here */
    if (rc == GAP_ENDS) return dcr__fail(d, DCR_E_POSITION, "rank stream ends inside rank %zu", i);
    if (rc == GAP_PAST)
      return dcr__fail(d, DCR_E_POSITION, "rank %zu is past the chunk's %zu elements", i, n);
    if (out) out[i] = (uint32_t)(next + v);
    next += v + 1;
    if (next >= n && i + 1 < count)
      return dcr__fail(d, DCR_E_POSITION, "rank %zu is past the chunk's %zu elements", i + 1, n);
  }
  size_t end = (size_t)((at + 7) / 8);
  if ((at & 7) && bits[end - 1] >> (at & 7))
    return dcr__fail(d, DCR_E_POSITION, "rank stream's last byte has bits set past its end");
  *used = 4 + end;
  return DCR_OK;
}
