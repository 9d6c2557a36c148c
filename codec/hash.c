/*
 * hash.c - tensor hashes and chunk checks (SPEC.md §7, §8.2), both built on the
 * digests of 4096-byte pieces: each piece is hashed once, by whichever worker
 * holds it while it is in cache, and the tensor hash then costs one small
 * sequential pass over the digests instead of one over the tensor's bytes.
 */
#include <stdlib.h>

#include "codec.h"

#define RANGE_BUFFER (1u << 20) /* a multiple of DCR__PIECE */

/* Chunks start at multiples of the chunk size, so they hold whole pieces. */
_Static_assert(DCR__MIN_CHUNK_SIZE % DCR__PIECE == 0, "chunks must hold whole pieces");

size_t dcr__pieces(const uint8_t *p, size_t bytes, uint8_t *out) {
  size_t count = 0;
  for (size_t at = 0; at < bytes; at += DCR__PIECE, count++) {
    XXH128_canonical_t c;
    size_t n = bytes - at < DCR__PIECE ? bytes - at : DCR__PIECE;
    XXH128_canonicalFromHash(&c, XXH3_128bits(p + at, n));
    memcpy(out + 16 * count, c.digest, 16);
  }
  return count;
}

size_t dcr__pieces_copy(uint8_t *dst, const uint8_t *src, size_t bytes, uint8_t *out) {
  size_t count = 0;
  for (size_t at = 0; at < bytes; at += DCR__PIECE, count++) {
    size_t n = bytes - at < DCR__PIECE ? bytes - at : DCR__PIECE;
    dcr__pieces(src + at, n, out + 16 * count);
    memcpy(dst + at, src + at, n); /* from L1, where hashing just brought it */
  }
  return count;
}

size_t dcr__pieces_zero(size_t bytes, uint8_t *out) {
  static const uint8_t zero[DCR__PIECE];
  uint8_t full[16];
  size_t count = DCR__PIECES(bytes), whole = bytes / DCR__PIECE;
  if (whole) dcr__pieces(zero, DCR__PIECE, full);
  for (size_t i = 0; i < whole; i++) memcpy(out + 16 * i, full, 16);
  if (whole < count) dcr__pieces(zero, bytes - whole * DCR__PIECE, out + 16 * whole);
  return count;
}

uint64_t dcr__pieces_check(const uint8_t *pieces, size_t count) {
  return XXH3_64bits(pieces, 16 * count);
}

void dcr__digest128(XXH3_state_t *st, uint8_t out[16]) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
  memcpy(out, c.digest, 16);
}

/* Feeds the piece digests of p[0..n) to a tensor hash; n is whole pieces unless
 * p ends the tensor. */
static void update_pieces(XXH3_state_t *st, const uint8_t *p, size_t n) {
  uint8_t digests[16 * 64];
  for (size_t at = 0; at < n; at += 64 * DCR__PIECE) {
    size_t k = n - at < 64 * DCR__PIECE ? n - at : 64 * DCR__PIECE;
    XXH3_128bits_update(st, digests, 16 * dcr__pieces(p + at, k, digests));
  }
}

void dcr__hash_memory(const uint8_t *p, uint64_t length, uint8_t out[16]) {
  XXH3_state_t st;
  XXH3_INITSTATE(&st);
  XXH3_128bits_reset(&st);
  update_pieces(&st, p, (size_t)length);
  dcr__digest128(&st, out);
}

int dcr__hash_range(const dcr__checkpoint *c, uint64_t start, uint64_t length, uint8_t out[16],
                    dcr__tensor_sha256 *sha, dcr_detail *d) {
  uint8_t *buf = malloc(RANGE_BUFFER);
  if (!buf) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate a read buffer");
  XXH3_state_t st;
  XXH3_INITSTATE(&st);
  XXH3_128bits_reset(&st);
  int rc = DCR_OK;
  for (uint64_t at = 0; at < length && !rc; at += RANGE_BUFFER) {
    size_t n = length - at < RANGE_BUFFER ? (size_t)(length - at) : RANGE_BUFFER;
    rc = dcr__checkpoint_pread(c, buf, n, start + at, d);
    if (!rc) update_pieces(&st, buf, n);
    if (!rc && sha) dcr__tensor_sha256_update(sha, buf, n);
  }
  if (!rc) dcr__digest128(&st, out);
  free(buf);
  return rc;
}
