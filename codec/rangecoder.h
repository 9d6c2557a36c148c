/*
 * rangecoder.h - the adaptive binary range coder of SPEC.md §9.4 (format 1.2),
 * the one of LZMA: 32-bit range, 11-bit probabilities moved by 1/32 of the
 * distance after each bit, byte-wise output with a carry cache. It is chosen
 * because it is well understood, has no tables to transmit, and codes a bit whose
 * probability is near 0 or 1 in a small fraction of a bit, which byte planes under
 * zstd cannot (a ±1 ULP step costs them 2.4 bits; this coder about 1.4).
 *
 * Only codec/classed.c includes it; everything is static inline so that the hot
 * loops see through it.
 */
#ifndef DCR_RANGECODER_H
#define DCR_RANGECODER_H

#include <stdint.h>
#include <string.h>

#define DCR__RC_BITS 11
#define DCR__RC_ONE (1u << DCR__RC_BITS) /* probability 1 */
#define DCR__RC_MOVE 5
#define DCR__RC_TOP (1u << 24)

typedef uint16_t dcr__rc_prob; /* P(bit = 0) in 1/2048ths; starts at 1/2 */

typedef struct {
  uint64_t low;
  uint32_t range;
  uint8_t cache;
  uint64_t pending; /* bytes held back: the cache byte and the 0xFF bytes after it */
  uint8_t *p, *end;
  int overflow; /* the output would pass end: the candidate is abandoned */
} dcr__rc_encoder;

static inline void dcr__rc_encoder_init(dcr__rc_encoder *rc, uint8_t *out, size_t capacity) {
  *rc = (dcr__rc_encoder){.range = 0xFFFFFFFFu, .pending = 1, .p = out, .end = out + capacity};
}

static inline void dcr__rc_put(dcr__rc_encoder *rc, uint8_t byte) {
  if (rc->p < rc->end) *rc->p++ = byte;
  else rc->overflow = 1;
}

/* A byte leaves low; it is held while a later carry could still reach it. */
static inline void dcr__rc_shift_low(dcr__rc_encoder *rc) {
  if ((uint32_t)rc->low < 0xFF000000u || (rc->low >> 32)) {
    uint8_t carry = (uint8_t)(rc->low >> 32), held = rc->cache;
    for (; rc->pending; rc->pending--, held = 0xFF) dcr__rc_put(rc, (uint8_t)(held + carry));
    rc->cache = (uint8_t)(rc->low >> 24);
  }
  rc->pending++;
  rc->low = (rc->low & 0x00FFFFFFu) << 8;
}

static inline void dcr__rc_encode(dcr__rc_encoder *rc, dcr__rc_prob *p, unsigned bit) {
  uint32_t bound = (rc->range >> DCR__RC_BITS) * *p;
  if (!bit) {
    rc->range = bound;
    *p = (dcr__rc_prob)(*p + ((DCR__RC_ONE - *p) >> DCR__RC_MOVE));
  } else {
    rc->low += bound;
    rc->range -= bound;
    *p = (dcr__rc_prob)(*p - (*p >> DCR__RC_MOVE));
  }
  while (rc->range < DCR__RC_TOP) rc->range <<= 8, dcr__rc_shift_low(rc);
}

/* A bit of probability 1/2, not adapted (the mantissa of a long delta). */
static inline void dcr__rc_encode_direct(dcr__rc_encoder *rc, unsigned bit) {
  rc->range >>= 1;
  if (bit) rc->low += rc->range;
  while (rc->range < DCR__RC_TOP) rc->range <<= 8, dcr__rc_shift_low(rc);
}

/* Returns the stream's length, or SIZE_MAX if it did not fit. */
static inline size_t dcr__rc_finish(dcr__rc_encoder *rc, uint8_t *start) {
  for (int i = 0; i < 5; i++) dcr__rc_shift_low(rc);
  return rc->overflow ? SIZE_MAX : (size_t)(rc->p - start);
}

typedef struct {
  uint32_t range, code;
  const uint8_t *p, *end;
  int short_; /* a byte was needed past the end */
} dcr__rc_decoder;

static inline uint8_t dcr__rc_next(dcr__rc_decoder *rc) {
  if (rc->p < rc->end) return *rc->p++;
  rc->short_ = 1;
  return 0;
}

/* Returns 0 if the first byte is not zero (a valid stream's never is: the coded
 * value lies in [0, 1)). */
static inline int dcr__rc_decoder_init(dcr__rc_decoder *rc, const uint8_t *in, size_t length) {
  *rc = (dcr__rc_decoder){.range = 0xFFFFFFFFu, .p = in, .end = in + length};
  if (dcr__rc_next(rc) != 0) return 0;
  for (int i = 0; i < 4; i++) rc->code = (rc->code << 8) | dcr__rc_next(rc);
  return 1;
}

/* Without branches on the bit: a sign is a coin toss, which a branch predictor
 * would miss half the time. */
static inline unsigned dcr__rc_decode(dcr__rc_decoder *rc, dcr__rc_prob *p) {
  uint32_t bound = (rc->range >> DCR__RC_BITS) * *p;
  unsigned bit = rc->code >= bound;
  uint32_t mask = 0u - (uint32_t)bit;
  rc->code -= bound & mask;
  rc->range = (bound & ~mask) | ((rc->range - bound) & mask);
  unsigned up = (unsigned)(DCR__RC_ONE - *p) >> DCR__RC_MOVE, down = (unsigned)*p >> DCR__RC_MOVE;
  *p = (dcr__rc_prob)(bit ? *p - down : *p + up);
  while (rc->range < DCR__RC_TOP) rc->range <<= 8, rc->code = (rc->code << 8) | dcr__rc_next(rc);
  return bit;
}

static inline unsigned dcr__rc_decode_direct(dcr__rc_decoder *rc) {
  rc->range >>= 1;
  unsigned bit = rc->code >= rc->range;
  if (bit) rc->code -= rc->range;
  while (rc->range < DCR__RC_TOP) rc->range <<= 8, rc->code = (rc->code << 8) | dcr__rc_next(rc);
  return bit;
}

/* §9.4: a stream ends where the encoder's flush ends it, every byte read and the
 * code at zero; then no other byte string decodes to the same bits. */
static inline int dcr__rc_finished(const dcr__rc_decoder *rc) {
  return !rc->short_ && rc->p == rc->end && rc->code == 0;
}

#endif
