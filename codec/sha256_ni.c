/*
 * sha256_ni.c - the SHA-256 digests of whole 4096-byte pieces, four at a time,
 * with the x86 SHA extensions: the signed piece digests of SPEC.md §20.2, which
 * signing makes for both checkpoints whole.
 *
 * libcrypto (sha256.c) hashes one message at a time, and each round waits for the
 * one before it: 1.6 GB/s per core on this project's machine (AMD EPYC), where
 * the CPU could run several rounds at once. Pieces are independent messages of
 * one length, so four of them go through the rounds side by side, interleaved:
 * 2.5-2.7 GB/s on the same core. libcrypto stays the reference: it hashes every
 * other piece (a short last one, the pieces left over from a group of four) and
 * everything on a CPU without the extensions; a unit test compares the two
 * (test_codec.c).
 */
#include "codec.h"

int dcr__sha256_vector = 1;

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>

#define WAYS 4
#define BLOCKS (DCR__PIECE / 64)

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
static const uint32_t H0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                               0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
/* The block after a piece's 64: the padding bit, then its length, 32768 bits,
 * big-endian. */
static const uint8_t PAD[64] = {0x80, [62] = 0x80};

static int has_sha, has_avx;
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

static void probe(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSSE3) || !(c & bit_SSE4_1)) return;
  has_avx = (c & bit_AVX) && (c & bit_OSXSAVE);
  has_sha = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_SHA);
}

/* The SHA instructions have no VEX form: they are SSE, which waits on the upper
 * halves of the vector registers when AVX code before (the chunk encoder's,
 * libc's) left them in use. That made the pieces 4x slower inside an encode than
 * alone; clearing them first costs one instruction. */
__attribute__((target("avx"))) static void clear_upper(void) { _mm256_zeroupper(); }

/* WAYS pieces at p, one after the other, into out (32 bytes each). The state is
 * kept as the SHA instructions want it: ABEF and CDGH. */
__attribute__((target("sha,sse4.1,ssse3"))) static void hash_ways(const uint8_t *p, uint8_t *out) {
  const __m128i order = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  __m128i abef[WAYS], cdgh[WAYS];
  for (int k = 0; k < WAYS; k++) {
    __m128i dcba = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)H0), 0xB1);
    __m128i hgfe = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)(H0 + 4)), 0x1B);
    abef[k] = _mm_alignr_epi8(dcba, hgfe, 8);
    cdgh[k] = _mm_blend_epi16(hgfe, dcba, 0xF0);
  }
  for (size_t b = 0; b <= BLOCKS; b++) {
    __m128i abef0[WAYS], cdgh0[WAYS], w[WAYS][4];
    for (int k = 0; k < WAYS; k++) abef0[k] = abef[k], cdgh0[k] = cdgh[k];
    /* unrolled, so that the ways' rounds interleave and w stays in registers */
    _Pragma("GCC unroll 16") for (int j = 0; j < 16; j++) {
      __m128i kj = _mm_loadu_si128((const __m128i *)(K + 4 * j));
      _Pragma("GCC unroll 4") for (int k = 0; k < WAYS; k++) {
        const uint8_t *block = b < BLOCKS ? p + (size_t)k * DCR__PIECE + 64 * b : PAD;
        __m128i x;
        if (j < 4) x = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(block + 16 * j)), order);
        else /* the schedule: w[t-16] + s0(w[t-15]) + w[t-7] + s1(w[t-2]) */
          x = _mm_sha256msg2_epu32(
              _mm_add_epi32(_mm_sha256msg1_epu32(w[k][j & 3], w[k][(j + 1) & 3]),
                            _mm_alignr_epi8(w[k][(j + 3) & 3], w[k][(j + 2) & 3], 4)),
              w[k][(j + 3) & 3]);
        w[k][j & 3] = x;
        __m128i m = _mm_add_epi32(x, kj);
        cdgh[k] = _mm_sha256rnds2_epu32(cdgh[k], abef[k], m);
        abef[k] = _mm_sha256rnds2_epu32(abef[k], cdgh[k], _mm_shuffle_epi32(m, 0x0E));
      }
    }
    for (int k = 0; k < WAYS; k++)
      abef[k] = _mm_add_epi32(abef[k], abef0[k]), cdgh[k] = _mm_add_epi32(cdgh[k], cdgh0[k]);
  }
  for (int k = 0; k < WAYS; k++) { /* back to A..H, each word big-endian */
    __m128i feba = _mm_shuffle_epi32(abef[k], 0x1B), dchg = _mm_shuffle_epi32(cdgh[k], 0xB1);
    __m128i abcd = _mm_blend_epi16(feba, dchg, 0xF0), efgh = _mm_alignr_epi8(dchg, feba, 8);
    _mm_storeu_si128((__m128i *)(out + 32 * k), _mm_shuffle_epi8(abcd, order));
    _mm_storeu_si128((__m128i *)(out + 32 * k + 16), _mm_shuffle_epi8(efgh, order));
  }
}

size_t dcr__pieces_sha256_ni(const uint8_t *p, size_t count, uint8_t *out) {
  pthread_once(&probe_once, probe);
  if (!has_sha || !dcr__sha256_vector) return 0;
  if (has_avx) clear_upper();
  size_t done = count / WAYS * WAYS;
  for (size_t i = 0; i < done; i += WAYS) hash_ways(p + i * DCR__PIECE, out + 32 * i);
  return done;
}
#else
size_t dcr__pieces_sha256_ni(const uint8_t *p, size_t count, uint8_t *out) {
  (void)p, (void)count, (void)out;
  return 0;
}
#endif
