/*
 * test_codec.c - the codec's internals (codec/codec.h): byte planes, position
 * streams, change detection, the chunk encoder and decoder (SPEC.md §9) and the
 * worker pool. Test names say which SPEC.md rule they check.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <stdatomic.h>
#include <zstd.h>

#include "codec.h"

/* ---- helpers -------------------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static void rng_seed(uint64_t s) { rng_state = s ? s : 1; }

static uint64_t rng(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Dull;
}

static uint8_t rng_byte(void) { return (uint8_t)(rng() >> 56); }

static uint8_t rng_nonzero_byte(void) {
  uint8_t b;
  do b = rng_byte(); while (!b);
  return b;
}

static void fill_random(uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = rng_byte();
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  assert_non_null(p);
  return p;
}

/* Changes element i of `target` (esize bytes) so that its bits differ. */
static void change_element(uint8_t *target, size_t i, unsigned esize) {
  size_t b = (size_t)(rng() % esize);
  target[i * esize + b] = (uint8_t)(target[i * esize + b] ^ rng_nonzero_byte());
}

/* Makes target = base with exactly `k` of the n elements changed, spread at random. */
static void make_changes(const uint8_t *base, uint8_t *target, size_t n, unsigned esize,
                         size_t k) {
  memcpy(target, base, n * esize);
  if (k == n) {
    for (size_t i = 0; i < n; i++) change_element(target, i, esize);
    return;
  }
  uint8_t *mark = calloc(n ? n : 1, 1);
  assert_non_null(mark);
  for (size_t done = 0; done < k;) {
    size_t i = (size_t)(rng() % n);
    if (mark[i]) continue;
    mark[i] = 1;
    change_element(target, i, esize);
    done++;
  }
  free(mark);
}

/* Appends one stream, stored or as one zstd frame, to out (which has room). */
static size_t put_stream(uint8_t *out, int compression, const uint8_t *s, size_t length) {
  if (compression == DCR_COMP_NONE) {
    if (length) memcpy(out, s, length);
    return length;
  }
  size_t z = ZSTD_compress(out, ZSTD_compressBound(length), s, length, 3);
  assert_false(ZSTD_isError(z));
  return z;
}

/* Capacity for the encoded data of a chunk of n elements of esize bytes. */
static size_t encoded_capacity(size_t n, unsigned esize) {
  return ZSTD_compressBound(DCR__POSITIONS_BOUND(n) + 16) + ZSTD_compressBound(n * esize + 16) + 64;
}

/* Builds, by hand, the encoded data of base -> target with a given encoding and
 * compression (SPEC.md §9.1, §9.3). Returns its length; *count gets the count. */
/* An independent model of a DELTA value (§9.1): zigzag(key(t) - key(b)) mod 2^bits,
 * with key(u) = u ^ (2^(bits-1) - 1) when the top bit of u is set. */
static void delta_value(const uint8_t *b, const uint8_t *t, unsigned esize, uint8_t *out) {
  unsigned bits = 8 * esize;
  uint64_t top = (uint64_t)1 << (bits - 1), all = bits == 64 ? ~(uint64_t)0 : (top << 1) - 1;
  uint64_t ub = 0, ut = 0;
  for (unsigned i = 0; i < esize; i++) ub |= (uint64_t)b[i] << (8 * i), ut |= (uint64_t)t[i] << (8 * i);
  if (ub & top) ub ^= top - 1;
  if (ut & top) ut ^= top - 1;
  uint64_t d = (ut - ub) & all;
  uint64_t z = ((d << 1) ^ ((d & top) ? all : 0)) & all;
  for (unsigned i = 0; i < esize; i++) out[i] = (uint8_t)(z >> (8 * i));
}

static size_t build_encoded(int encoding, int compression, const uint8_t *base,
                            const uint8_t *target, size_t n, unsigned esize, uint8_t *out,
                            uint32_t *count) {
  uint32_t *pos = xmalloc(n * sizeof *pos);
  uint8_t *values = xmalloc(n * esize), *planes = xmalloc(n * esize);
  uint8_t *varints = xmalloc(DCR__POSITIONS_BOUND(n));
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (memcmp(base + i * esize, target + i * esize, esize)) pos[k++] = (uint32_t)i;
  *count = (uint32_t)k;
  int sparse = !(encoding & 1);
  int is_xor = encoding == DCR_ENC_XOR_DENSE || encoding == DCR_ENC_XOR_SPARSE;
  int is_delta = encoding == DCR_ENC_DELTA_DENSE || encoding == DCR_ENC_DELTA_SPARSE;
  size_t m = sparse ? k : n;
  for (size_t j = 0; j < m; j++) {
    size_t i = sparse ? pos[j] : j;
    if (is_delta) {
      delta_value(base + i * esize, target + i * esize, esize, values + j * esize);
      continue;
    }
    for (unsigned b = 0; b < esize; b++)
      values[j * esize + b] = (uint8_t)(is_xor ? base[i * esize + b] ^ target[i * esize + b]
                                               : target[i * esize + b]);
  }
  dcr__planes_split(planes, values, m, esize);
  size_t length = 0;
  if (sparse) {
    size_t v = dcr__positions_write(varints, pos, k);
    length += put_stream(out + length, compression, varints, v);
  }
  length += put_stream(out + length, compression, planes, m * esize);
  free(pos);
  free(values);
  free(planes);
  free(varints);
  return length;
}

static dcr__chunk record(int encoding, int compression, uint32_t count) {
  dcr__chunk c;
  memset(&c, 0, sizeof c);
  c.encoding = (uint8_t)encoding;
  c.compression = (uint8_t)compression;
  c.count = count;
  return c;
}

/* A dtype of each element size, for the chunk coders, which take dtypes: floats
 * but the first, so that DELTA_CLASSED (§9.4) sees exponent classes. */
static int dtype_of(unsigned esize) {
  return esize == 1 ? dcr_dtype_from_name("U8", 2)
         : esize == 2 ? dcr_dtype_from_name("BF16", 4)
         : esize == 4 ? dcr_dtype_from_name("F32", 3) : dcr_dtype_from_name("F64", 3);
}

/* Decodes with a fresh decoder sized for chunk_size; checks that the detail
 * agrees with the code returned. */
static int decode_with(size_t chunk_size, const dcr__chunk *c, const uint8_t *data,
                       size_t length, unsigned esize, size_t n, uint8_t *chunk) {
  dcr__chunk_decoder dd;
  assert_int_equal(dcr__chunk_decoder_init(&dd, chunk_size, DCR_FORMAT_MINOR), DCR_OK);
  dcr_detail d;
  dcr__detail_init(&d);
  int rc = dcr__decode_chunk(&dd, c, data, length, dtype_of(esize), n, chunk, &d);
  if (rc) {
    assert_int_equal(d.code, rc);
    assert_true(d.message[0] != '\0');
  } else {
    assert_int_equal(d.code, DCR_OK);
  }
  dcr__chunk_decoder_free(&dd);
  return rc;
}

static int decode(const dcr__chunk *c, const uint8_t *data, size_t length, unsigned esize,
                  size_t n, uint8_t *chunk) {
  return decode_with(n * esize < 4096 ? 4096 : n * esize, c, data, length, esize, n, chunk);
}

static const unsigned esizes[] = {1, 2, 4, 8};

/* ---- DELTA_CLASSED and DELTA_BANDED walks (§9.4, §9.5) ------------------- */

/* For both encodings, every walk (portable C, and the vector walks where the CPU
 * has them: AVX2; AVX-512BW for classes, AVX-512 VBMI, GFNI and VPOPCNTDQ for
 * bands) finds the same changes: for each dtype class, a base whose class field
 * spans `spread` classes (20: the group walks; 256 and more: past their limit, so
 * the scalar walk starts and hands over once classes run out of changes; for
 * bands, every byte-sized class, the upper 128 included), changes of 1 to 3 units
 * at several rates, walked in pieces of 4096 bytes and of an odd number of
 * elements (4101: blocks of 2048 and a tail past the last group of 64); each
 * gives the target, and every way agrees (at 80% the bands are inverted). The
 * DELTA_BANDED writer, whose ranks come from the same walk, writes the same bytes
 * by each. The walk of dcr_changes finds each change's position and value, in
 * element order. */
static void test_classed_walks_agree(void **state) {
  (void)state;
  static const char *dtypes[] = {"BF16", "F16", "F32", "F64", "C64", "F8_E4M3", "F8_E5M2",
                                 "F8_E8M0", "I32", "U8"};
  static const int modes[] = {0, 2, 1};
  static const unsigned spreads[] = {20, 4096};
  static const unsigned per_mille[] = {2, 50, 300, 800};
  const size_t n = 4101; /* a tail past the last group of 64 */
  rng_seed(31);
  for (int enc = DCR_ENC_DELTA_CLASSED; enc <= DCR_ENC_DELTA_BANDED; enc++)
  for (size_t t = 0; t < sizeof dtypes / sizeof dtypes[0]; t++)
    for (size_t sp = 0; sp < 2; sp++)
      for (size_t pr = 0; pr < 4; pr++) {
        int dtype = dcr_dtype_from_name(dtypes[t], strlen(dtypes[t]));
        unsigned esize = dcr_dtype_size(dtype), shift, bits = dcr__class_bits(dtype, &shift);
        uint64_t field = bits ? (((uint64_t)1 << bits) - 1) << shift : 0;
        uint64_t top = (uint64_t)1 << (8 * esize - 1), all = top | (top - 1);
        uint8_t *base = xmalloc(n * esize), *target = xmalloc(n * esize);
        uint8_t *old = xmalloc(n * esize), *z = xmalloc(n * esize), *sorted = xmalloc(n * esize);
        uint8_t *out = xmalloc(n * esize), *values = xmalloc(n * esize);
        uint32_t *pos = xmalloc(n * sizeof *pos), *ranks = xmalloc(n * sizeof *ranks);
        size_t count = 0;
        for (size_t i = 0; i < n; i++) {
          uint64_t u = rng() & all, c = (uint64_t)(100 + rng() % spreads[sp]) << shift;
          u = (u & ~field) | (c & field);
          for (unsigned b = 0; b < esize; b++) base[i * esize + b] = (uint8_t)(u >> (8 * b));
          uint64_t v = u;
          if (rng() % 1000 < per_mille[pr]) { /* a step of 1..3 units on the key (§9.1) */
            uint64_t key = u & top ? u ^ (top - 1) : u, step = 1 + rng() % 3;
            uint64_t moved = (rng() & 1 ? key + step : key - step) & all;
            uint64_t d = (moved - key) & all;
            v = moved & top ? moved ^ (top - 1) : moved;
            uint64_t zz = ((d << 1) ^ (d & top ? all : 0)) & all;
            memcpy(old + count * esize, base + i * esize, esize);
            for (unsigned b = 0; b < esize; b++) z[count * esize + b] = (uint8_t)(zz >> (8 * b));
            pos[count++] = (uint32_t)i;
          }
          for (unsigned b = 0; b < esize; b++) target[i * esize + b] = (uint8_t)(v >> (8 * b));
        }
        if (!count) continue;
        dcr__classed_encoder ws;
        assert_int_equal(dcr__classed_encoder_init(&ws), DCR_OK);
        size_t capacity = 64 + 16 * n * esize;
        uint8_t *data = xmalloc(capacity);
        size_t length =
            enc == DCR_ENC_DELTA_BANDED
                ? dcr__banded_write(&ws, data, capacity, base, n, dtype, pos, old, z, count, ranks,
                                    sorted)
                : dcr__classed_write(&ws, data, capacity, base, dtype, pos, old, z, count, ranks,
                                     sorted);
        assert_true(length != SIZE_MAX);
        if (enc == DCR_ENC_DELTA_BANDED) /* the writer's ranks come from the walk's masks */
          for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
            uint8_t *again = xmalloc(capacity);
            dcr__classed_vector = modes[m];
            assert_int_equal(dcr__banded_write(&ws, again, capacity, base, n, dtype, pos, old, z,
                                               count, ranks, sorted),
                             length);
            assert_memory_equal(again, data, length);
            free(again);
          }
        dcr__classed_vector = 1;
        int (*streams)(dcr__classed *, const uint8_t *, size_t, int, size_t, size_t, uint8_t *,
                       const volatile int *, dcr_detail *) =
            enc == DCR_ENC_DELTA_BANDED ? dcr__banded_streams : dcr__classed_streams;
        if (enc == DCR_ENC_DELTA_BANDED && per_mille[pr] == 800) /* the inverted bands' byte */
          assert_int_not_equal(data[1 + 2 * (data[0] - 1) + 4 * data[0]], 0);
        dcr__classed *cls;
        assert_int_equal(dcr__classed_decoder_init(&cls), DCR_OK);
        for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++)
          for (size_t piece = 0; piece < 2; piece++) {
            dcr_detail d;
            dcr__detail_init(&d);
            dcr__classed_vector = modes[m];
            assert_int_equal(streams(cls, data, length, dtype, n, count, values, NULL, &d), DCR_OK);
            memcpy(out, base, n * esize);
            size_t step = piece ? 333 : 4096 / esize;
            for (size_t at = 0; at < n; at += step)
              dcr__classed_walk(cls, values, out, out, at, at + step < n ? at + step : n);
            assert_int_equal(dcr__classed_end(cls, &d), DCR_OK);
            if (memcmp(out, target, n * esize))
              fail_msg("encoding %d, %s, %u classes, %u per mille, walk %d, pieces of %zu: not "
                       "the target", enc, dtypes[t], spreads[sp], per_mille[pr], modes[m], step);
          }
        /* dcr_changes' walk: every change, in element order, with its value */
        dcr_detail d;
        dcr__detail_init(&d);
        uint32_t *met = xmalloc(n * sizeof *met);
        assert_int_equal(streams(cls, data, length, dtype, n, count, values, NULL, &d), DCR_OK);
        assert_int_equal(dcr__classed_collect(cls, values, base, n, met, sorted), count);
        assert_int_equal(dcr__classed_end(cls, &d), DCR_OK);
        assert_memory_equal(met, pos, count * sizeof *pos);
        assert_memory_equal(sorted, z, count * esize);
        free(met);
        dcr__classed_vector = 1;
        dcr__classed_decoder_free(cls);
        dcr__classed_encoder_free(&ws);
        free(data), free(base), free(target), free(old), free(z), free(sorted), free(out);
        free(values), free(pos), free(ranks);
      }
}

/* ---- SHA-256 piece digests (§20.2) -------------------------------------- */

/* The SHA extensions' path (sha256_ni.c) against libcrypto's, which is the
 * reference: random bytes of lengths around the groups of four whole pieces,
 * and a known answer (SHA-256 of 4096 zero bytes) through both. */
static void test_sign2_piece_digests_vector_equals_libcrypto(void **state) {
  (void)state;
  static const size_t lengths[] = {0, 1, 4095, 4096, 3 * 4096, 4 * 4096, 4 * 4096 + 1,
                                   5 * 4096 - 1, 9 * 4096 + 100, 64 * 4096};
  uint8_t *p = xmalloc(64 * 4096), *a = xmalloc(32 * 64), *b = xmalloc(32 * 64);
  dcr__sha256 s;
  assert_int_equal(dcr__sha256_init(&s, NULL), DCR_OK);
  rng_seed(33);
  for (size_t i = 0; i < 64 * 4096; i++) p[i] = (uint8_t)rng();
  for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
    dcr__sha256_vector = 0;
    size_t n = dcr__pieces_sha256(&s, p, lengths[l], a);
    dcr__sha256_vector = 1;
    assert_int_equal(dcr__pieces_sha256(&s, p, lengths[l], b), n);
    assert_int_equal(n, DCR__PIECES(lengths[l]));
    if (memcmp(a, b, 32 * n)) fail_msg("%zu bytes: the piece digests differ", lengths[l]);
  }
  static const uint8_t zero_piece[32] = {
      0xad, 0x7f, 0xac, 0xb2, 0x58, 0x6f, 0xc6, 0xe9, 0x66, 0xc0, 0x04, 0xd7, 0xd1, 0xd1, 0x6b, 0x02,
      0x4f, 0x58, 0x05, 0xff, 0x7c, 0xb4, 0x7c, 0x7a, 0x85, 0xda, 0xbd, 0x8b, 0x48, 0x89, 0x2c, 0xa7};
  memset(p, 0, 4 * 4096);
  for (int v = 0; v < 2; v++) {
    dcr__sha256_vector = v;
    assert_int_equal(dcr__pieces_sha256(&s, p, 4 * 4096, a), 4);
    for (int k = 0; k < 4; k++) assert_memory_equal(a + 32 * k, zero_piece, 32);
  }
  dcr__sha256_vector = 1;
  dcr__sha256_free(&s);
  free(p), free(a), free(b);
}

/* dcr_changes' walk over DELTA_BANDED where every element changes and every band
 * is inverted: each group of 64 meets its changes band by band, put back in
 * element order (fuzz/regressions/banded/slow-collect-8-inverted-bands: a walk
 * a piece of 2048 elements at a time once took 1.8 million moves a piece). */
static void test_banded_collect_inverted_bands(void **state) {
  (void)state;
  const char *name = "F8_E4M3FNUZ";
  int dtype = dcr_dtype_from_name(name, strlen(name));
  const size_t n = 32768 + 77; /* pieces of 2048, then a tail */
  uint8_t *base = xmalloc(n), *target = xmalloc(n), *z = xmalloc(n), *sorted = xmalloc(n);
  uint8_t *values = xmalloc(n), *met_values = xmalloc(n), *data = xmalloc(64 + 16 * n);
  uint32_t *pos = xmalloc(n * sizeof *pos), *ranks = xmalloc(n * sizeof *ranks);
  uint32_t *met = xmalloc(n * sizeof *met);
  rng_seed(57);
  for (size_t i = 0; i < n; i++) {
    base[i] = (uint8_t)rng();
    target[i] = base[i] ^ 0x40;
    pos[i] = (uint32_t)i;
  }
  dcr__delta_make(z, base, target, n, 1);
  dcr__classed_encoder ws;
  assert_int_equal(dcr__classed_encoder_init(&ws), DCR_OK);
  size_t length = dcr__banded_write(&ws, data, 64 + 16 * n, base, n, dtype, pos, base, z, n,
                                    ranks, sorted);
  assert_true(length != SIZE_MAX);
  unsigned bands = data[0]; /* 4 here: 4 runs a piece, merged in two passes */
  assert_true(bands >= 4);
  assert_int_equal(data[1 + 2 * (bands - 1) + 4 * bands], (1u << bands) - 1);
  dcr__classed *cls;
  assert_int_equal(dcr__classed_decoder_init(&cls), DCR_OK);
  static const int modes[] = {0, 2, 1};
  for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
    dcr_detail d;
    dcr__detail_init(&d);
    dcr__classed_vector = modes[m];
    assert_int_equal(dcr__banded_streams(cls, data, length, dtype, n, n, values, NULL, &d), DCR_OK);
    memset(met, 0xFF, n * sizeof *met);
    assert_int_equal(dcr__classed_collect(cls, values, base, n, met, met_values), n);
    assert_int_equal(dcr__classed_end(cls, &d), DCR_OK);
    assert_memory_equal(met, pos, n * sizeof *pos);
    assert_memory_equal(met_values, z, n);
  }
  dcr__classed_vector = 1;
  dcr__classed_decoder_free(cls);
  dcr__classed_encoder_free(&ws);
  free(base), free(target), free(z), free(sorted), free(values), free(met_values), free(data);
  free(pos), free(ranks), free(met);
}

/* ---- planes (§9.1) ------------------------------------------------------ */

static void test_planes_split_join_round_trip(void **state) {
  (void)state;
  static const size_t counts[] = {0, 1, 3, 7, 33, 1001};
  rng_seed(1);
  for (size_t e = 0; e < 4; e++)
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
      unsigned esize = esizes[e];
      size_t count = counts[c], bytes = count * esize;
      uint8_t *elems = xmalloc(bytes), *planes = xmalloc(bytes), *back = xmalloc(bytes);
      fill_random(elems, bytes);
      dcr__planes_split(planes, elems, count, esize);
      /* the layout of §9.1: all first bytes, then all second bytes, ... */
      for (size_t i = 0; i < count; i++)
        for (unsigned b = 0; b < esize; b++)
          assert_int_equal(planes[b * count + i], elems[i * esize + b]);
      memset(back, 0xA5, bytes);
      dcr__planes_join(back, planes, count, esize);
      if (bytes) assert_memory_equal(back, elems, bytes);
      free(elems);
      free(planes);
      free(back);
    }
}

static void test_planes_xor_into_applies_xor(void **state) {
  (void)state;
  static const size_t counts[] = {1, 5, 77, 513};
  rng_seed(2);
  for (size_t e = 0; e < 4; e++)
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
      unsigned esize = esizes[e];
      size_t count = counts[c], bytes = count * esize;
      uint8_t *base = xmalloc(bytes), *x = xmalloc(bytes), *planes = xmalloc(bytes);
      uint8_t *work = xmalloc(bytes);
      fill_random(base, bytes);
      fill_random(x, bytes);
      dcr__planes_split(planes, x, count, esize);
      memcpy(work, base, bytes);
      dcr__planes_xor_into(work, planes, count, esize);
      for (size_t i = 0; i < bytes; i++) assert_int_equal(work[i], (uint8_t)(base[i] ^ x[i]));
      /* xor twice is the identity */
      dcr__planes_xor_into(work, planes, count, esize);
      assert_memory_equal(work, base, bytes);
      free(base);
      free(x);
      free(planes);
      free(work);
    }
}

static void test_planes_nonzero_counts_nonzero_elements(void **state) {
  (void)state;
  static const size_t counts[] = {0, 1, 9, 255, 1000};
  rng_seed(3);
  for (size_t e = 0; e < 4; e++)
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
      unsigned esize = esizes[e];
      size_t count = counts[c], bytes = count * esize, want = 0;
      uint8_t *elems = calloc(bytes ? bytes : 1, 1), *planes = xmalloc(bytes);
      assert_non_null(elems);
      for (size_t i = 0; i < count; i++)
        if (rng() % 3 == 0) {
          /* one non-zero byte, in any position, is enough */
          elems[i * esize + rng() % esize] = rng_nonzero_byte();
          want++;
        }
      dcr__planes_split(planes, elems, count, esize);
      assert_int_equal(dcr__planes_nonzero(planes, count, esize), want);
      free(elems);
      free(planes);
    }
}

/* ---- positions (§9.1, R-POS-1) ------------------------------------------ */

static int read_positions(const uint8_t *in, size_t length, size_t count, size_t n,
                          uint32_t *pos, size_t *used) {
  dcr_detail d;
  dcr__detail_init(&d);
  int rc = dcr__positions_read(in, length, count, n, pos, used, &d);
  if (rc) assert_int_equal(d.code, rc);
  return rc;
}

/* The encoder's choice must be the lowest Rice parameter of least cost, found
 * here by trying all 32. */
static unsigned cheapest_rice_k(const uint32_t *pos, size_t count) {
  unsigned best_k = 0;
  uint64_t best = UINT64_MAX;
  for (unsigned k = 0; k < 32; k++) {
    uint64_t bits = 0, next = 0;
    for (size_t i = 0; i < count; i++) bits += k + 1 + ((pos[i] - next) >> k), next = pos[i] + 1ull;
    if (bits < best) best = bits, best_k = k;
  }
  return best_k;
}

static void check_positions_round_trip(const uint32_t *pos, size_t count, size_t n) {
  uint8_t *buf = xmalloc(DCR__POSITIONS_BOUND(n));
  uint32_t *back = xmalloc(count * sizeof *back + 4);
  size_t length = dcr__positions_write(buf, pos, count), used = 12345;
  assert_true(length >= 1 && length <= DCR__POSITIONS_BOUND(n));
  assert_int_equal(buf[0], cheapest_rice_k(pos, count));
  assert_int_equal(read_positions(buf, length, count, n, back, &used), DCR_OK);
  assert_int_equal(used, length);
  if (count) assert_memory_equal(back, pos, count * sizeof *pos);
  /* the stream is exactly `length` bytes: one byte less cannot hold it */
  if (count) assert_int_equal(read_positions(buf, length - 1, count, n, back, &used),
                              DCR_E_POSITION);
  free(buf);
  free(back);
}

static void test_pos_round_trip_random_sets(void **state) {
  (void)state;
  rng_seed(4);
  for (int trial = 0; trial < 200; trial++) {
    size_t n = 1 + (size_t)(rng() % 5000);
    uint32_t *pos = xmalloc(n * sizeof *pos);
    size_t count = 0;
    unsigned pct = (unsigned)(rng() % 101);
    for (size_t i = 0; i < n; i++)
      if (rng() % 100 < pct) pos[count++] = (uint32_t)i;
    /* include position 0 and n-1 in some sets */
    if (trial % 4 == 0) {
      count = 0;
      pos[count++] = 0;
      if (n > 2) pos[count++] = (uint32_t)(n / 2);
      if (n > 1) pos[count++] = (uint32_t)(n - 1);
    }
    check_positions_round_trip(pos, count, n);
    free(pos);
  }
}

static void test_pos_round_trip_large_gaps(void **state) {
  (void)state;
  /* small and huge gaps together: the quotients of the small parameter the
   * small gaps want run over many 32-bit words for the large ones */
  const uint32_t gaps[] = {0, 0, 127, 128, 16383, 16384, 2097151, 2097152, 268435455,
                           268435456, 1000000000};
  enum { G = sizeof gaps / sizeof gaps[0] };
  uint32_t pos[G + 1];
  uint64_t p = 0;
  for (size_t i = 0; i < G; i++) {
    p = i ? p + 1 + gaps[i] : gaps[i];
    assert_true(p < UINT32_MAX);
    pos[i] = (uint32_t)p;
  }
  pos[G] = UINT32_MAX;
  check_positions_round_trip(pos, G + 1, (size_t)1 << 32);
  /* a first position of 2^32 - 1 is the largest gap there is */
  const uint32_t last[] = {UINT32_MAX};
  check_positions_round_trip(last, 1, (size_t)1 << 32);
}

static void test_pos_rice_bytes_exactly(void **state) {
  (void)state;
  uint8_t buf[16];
  /* gaps 1, 2, 3 (positions 1, 4, 8): k = 1 costs 3*2 + (0+1+1) = 8 bits, k = 0
   * costs 3 + 6 = 9, k = 2 costs 9: k = 1. Bits, LSB first: gap 1 = "0" "1",
   * gap 2 = "10" "0", gap 3 = "10" "1" -> 0,1,1,0,0,1,0,1 = 0xA6. */
  const uint32_t pos[] = {1, 4, 8};
  const uint8_t want[] = {0x01, 0xA6};
  assert_int_equal(dcr__positions_write(buf, pos, 3), sizeof want);
  assert_memory_equal(buf, want, sizeof want);
  /* one position 0 with k = 0: a single zero bit, padded */
  const uint32_t zero[] = {0};
  const uint8_t want0[] = {0x00, 0x00};
  assert_int_equal(dcr__positions_write(buf, zero, 1), sizeof want0);
  assert_memory_equal(buf, want0, sizeof want0);
}

static void test_pos1_empty_stream_or_bad_parameter_is_rejected(void **state) {
  (void)state;
  uint32_t pos[2];
  size_t used;
  assert_int_equal(read_positions((const uint8_t *)"", 0, 1, 10, pos, &used), DCR_E_POSITION);
  const uint8_t k32[] = {32, 0x00};
  assert_int_equal(read_positions(k32, 2, 1, 10, pos, &used), DCR_E_POSITION);
  /* position 0 costs 1 bit with k = 0 and 32 with k = 31: only k = 0 is canonical */
  const uint8_t k31[] = {31, 0x00, 0x00, 0x00, 0x00};
  assert_int_equal(read_positions(k31, 5, 1, 10, pos, &used), DCR_E_POSITION);
  const uint8_t k0[] = {0, 0x00};
  assert_int_equal(read_positions(k0, 2, 1, 10, pos, &used), DCR_OK);
  assert_int_equal(pos[0], 0);
  assert_int_equal(used, 2);
}

/* §9.1: positions 1, 4, 8 (gaps 1, 2, 3) cost 9, 8 and 9 bits with k = 0, 1, 2;
 * only k = 1 is accepted, and a tie goes to the smaller k. */
static void test_pos1_only_the_smallest_best_parameter_is_accepted(void **state) {
  (void)state;
  uint32_t pos[3];
  size_t used;
  const uint8_t k1[] = {1, 0xA6}, k0[] = {0, 0xED, 0x00}, k2[] = {2, 0xA2, 0x01};
  assert_int_equal(read_positions(k1, sizeof k1, 3, 10, pos, &used), DCR_OK);
  assert_int_equal(pos[2], 8);
  assert_int_equal(read_positions(k0, sizeof k0, 3, 10, pos, &used), DCR_E_POSITION);
  assert_int_equal(read_positions(k2, sizeof k2, 3, 10, pos, &used), DCR_E_POSITION);
  /* gaps 1 and 2 cost 5 bits with k = 0 and with k = 1: k = 0 */
  const uint32_t tie[] = {1, 4};
  uint8_t buf[8];
  dcr__positions_write(buf, tie, 2);
  assert_int_equal(buf[0], 0);
  const uint8_t tie1[] = {1, 0x06};
  assert_int_equal(read_positions(tie1, sizeof tie1, 2, 10, pos, &used), DCR_E_POSITION);
}

static void test_pos1_stream_ending_inside_a_gap_is_rejected(void **state) {
  (void)state;
  uint32_t pos[16];
  size_t used;
  /* k = 0 and eight ones: the unary quotient never ends */
  const uint8_t ones[] = {0x00, 0xFF};
  assert_int_equal(read_positions(ones, 2, 1, 100, pos, &used), DCR_E_POSITION);
  /* k = 8: the quotient ends, the 8 low bits do not fit */
  const uint8_t cut[] = {0x08, 0x00};
  assert_int_equal(read_positions(cut, 2, 1, 1000, pos, &used), DCR_E_POSITION);
  /* two gaps of 0 fit in one byte; a third does not exist */
  const uint8_t two[] = {0x00, 0x00};
  assert_int_equal(read_positions(two, 2, 2, 10, pos, &used), DCR_OK);
  assert_int_equal(read_positions(two, 2, 9, 10, pos, &used), DCR_E_POSITION);
}

static void test_pos1_nonzero_padding_is_rejected(void **state) {
  (void)state;
  uint32_t pos[1];
  size_t used;
  const uint8_t pad[] = {0x00, 0x02}; /* gap 0 = "0", then a stray 1 bit */
  assert_int_equal(read_positions(pad, 2, 1, 10, pos, &used), DCR_E_POSITION);
}

static void test_pos1_position_past_chunk_is_rejected(void **state) {
  (void)state;
  uint32_t pos[2];
  size_t used;
  const uint32_t in[] = {0, 9};
  uint8_t buf[16];
  size_t length = dcr__positions_write(buf, in, 2);
  assert_int_equal(read_positions(buf, length, 2, 10, pos, &used), DCR_OK);
  assert_int_equal(read_positions(buf, length, 2, 9, pos, &used), DCR_E_POSITION);
  /* a run of ones longer than the chunk stops at once */
  const uint8_t run[] = {0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0x00};
  assert_int_equal(read_positions(run, sizeof run, 1, 12, pos, &used), DCR_E_POSITION);
}

/* ---- change detection (§3) --------------------------------------------- */

static void test_dt_signed_zero_is_a_change(void **state) {
  (void)state;
  const uint8_t plus[4] = {0, 0, 0, 0x00}, minus[4] = {0, 0, 0, 0x80}; /* F32, LE */
  uint32_t pos[1] = {77};
  assert_int_equal(dcr__detect(plus, minus, 1, 4, pos), 1);
  assert_int_equal(pos[0], 0);
  assert_int_equal(dcr__count_changed(plus, minus, 1, 4), 1);
  /* BF16 / F16 and F64 too */
  const uint8_t p2[2] = {0, 0}, m2[2] = {0, 0x80};
  assert_int_equal(dcr__count_changed(p2, m2, 1, 2), 1);
  const uint8_t p8[8] = {0}, m8[8] = {0, 0, 0, 0, 0, 0, 0, 0x80};
  assert_int_equal(dcr__count_changed(p8, m8, 1, 8), 1);
}

static void test_dt_nan_payload_is_a_change(void **state) {
  (void)state;
  /* F32 0x7FC00000 and 0x7FC00001: both NaN, different bits */
  const uint8_t a[8] = {0x00, 0x00, 0xC0, 0x7F, 0x00, 0x00, 0xC0, 0x7F};
  const uint8_t b[8] = {0x01, 0x00, 0xC0, 0x7F, 0x00, 0x00, 0xC0, 0x7F};
  uint32_t pos[2];
  assert_int_equal(dcr__detect(a, b, 2, 4, pos), 1);
  assert_int_equal(pos[0], 0);
  assert_int_equal(dcr__count_changed(a, b, 2, 4), 1);
  /* the same NaN bits are no change, though NaN != NaN as a number */
  assert_int_equal(dcr__detect(a, a, 2, 4, pos), 0);
  assert_int_equal(dcr__count_changed(a, a, 2, 4), 0);
}

static void test_dt_count_changed_agrees_with_detect(void **state) {
  (void)state;
  rng_seed(5);
  for (size_t e = 0; e < 4; e++)
    for (int trial = 0; trial < 20; trial++) {
      unsigned esize = esizes[e];
      size_t n = (size_t)(rng() % 3000), bytes = n * esize;
      uint8_t *a = xmalloc(bytes), *b = xmalloc(bytes);
      uint32_t *pos = xmalloc(n * sizeof *pos + 4);
      fill_random(a, bytes);
      make_changes(a, b, n, esize, n ? (size_t)(rng() % (n + 1)) : 0);
      size_t k = dcr__detect(a, b, n, esize, pos), want = 0;
      for (size_t i = 0; i < n; i++)
        if (memcmp(a + i * esize, b + i * esize, esize)) {
          assert_true(want < k);
          assert_int_equal(pos[want], i);
          want++;
        }
      assert_int_equal(k, want);
      assert_int_equal(dcr__count_changed(a, b, n, esize), k);
      assert_int_equal(dcr__count_changed(b, a, n, esize), k);
      assert_int_equal(dcr__count_changed(a, a, n, esize), 0);
      free(a);
      free(b);
      free(pos);
    }
}

/* ---- chunk encoder and decoder (§9) ------------------------------------- */

/* Encodes base -> target, checks the choice, decodes with and without a chunk,
 * and checks the result. Returns the encoding chosen (0: unchanged). */
static int encode_decode(dcr__chunk_encoder *ce, dcr__chunk_decoder *dd, const uint8_t *base,
                         const uint8_t *target, size_t bytes, unsigned esize) {
  size_t n = bytes / esize;
  dcr__encoded out;
  assert_int_equal(dcr__encode_chunk(ce, base, target, bytes, dtype_of(esize), &out), DCR_OK);
  assert_int_equal(out.count, dcr__count_changed(base, target, n, esize));
  if (!out.count) return 0;
  assert_in_range(out.encoding, DCR_ENC_XOR_DENSE, DCR_ENC_COUNT - 1);
  assert_in_range(out.compression, DCR_COMP_NONE, DCR_COMP_ZSTD);
  if (ce->level == 0) assert_int_equal(out.compression, DCR_COMP_NONE);
  uint8_t *copy = xmalloc(out.length);
  memcpy(copy, out.data, out.length);
  dcr__chunk c = record(out.encoding, out.compression, out.count);
  dcr_detail d;
  dcr__detail_init(&d);
  assert_int_equal(dcr__decode_chunk(dd, &c, copy, out.length, dtype_of(esize), n, NULL, &d), DCR_OK);
  uint8_t *work = xmalloc(bytes);
  memcpy(work, base, bytes);
  assert_int_equal(dcr__decode_chunk(dd, &c, copy, out.length, dtype_of(esize), n, work, &d), DCR_OK);
  assert_memory_equal(work, target, bytes);
  /* determinism: the same input gives the same bytes */
  dcr__encoded again;
  assert_int_equal(dcr__encode_chunk(ce, base, target, bytes, dtype_of(esize), &again), DCR_OK);
  assert_int_equal(again.encoding, out.encoding);
  assert_int_equal(again.compression, out.compression);
  assert_int_equal(again.count, out.count);
  assert_int_equal(again.length, out.length);
  assert_memory_equal(again.data, copy, out.length);
  free(work);
  free(copy);
  return out.encoding;
}

static void run_rates(int level, int classed) {
  const size_t chunk_size = 4096;
  dcr__chunk_encoder ce;
  dcr__chunk_decoder dd;
  assert_int_equal(dcr__chunk_encoder_init(&ce, chunk_size, level, classed), DCR_OK);
  assert_int_equal(dcr__chunk_decoder_init(&dd, chunk_size, DCR_FORMAT_MINOR), DCR_OK);
  uint8_t *base = xmalloc(chunk_size), *target = xmalloc(chunk_size);
  rng_seed(6 + (uint64_t)level + 10 * (uint64_t)classed);
  for (size_t e = 0; e < 4; e++) {
    unsigned esize = esizes[e];
    /* a full chunk, and a short last chunk with an odd element count */
    const size_t sizes[2] = {chunk_size, chunk_size - 3 * esize};
    for (int s = 0; s < 2; s++) {
      size_t bytes = sizes[s], n = bytes / esize;
      /* smooth-ish base data, as weights are: zstd has something to find */
      for (size_t i = 0; i < bytes; i++) base[i] = (uint8_t)((i % esize == esize - 1) ? 0x3F : rng_byte() & 0x0F);
      const size_t changes[] = {0, 1, n / 100 ? n / 100 : 1, n / 10, n / 2, n};
      for (size_t r = 0; r < sizeof changes / sizeof changes[0]; r++) {
        make_changes(base, target, n, esize, changes[r]);
        int enc = encode_decode(&ce, &dd, base, target, bytes, esize);
        if (changes[r] == 0) assert_int_equal(enc, 0);
        /* 1 element and 1%: sparse; 100%: dense (§9.1) */
        if (r == 1 || r == 2) assert_true(dcr__enc_sparse(enc));
        if (r == 5) assert_false(dcr__enc_sparse(enc));
        if (!classed) assert_true(enc != DCR_ENC_DELTA_CLASSED);
      }
    }
  }
  free(base);
  free(target);
  dcr__chunk_encoder_free(&ce);
  dcr__chunk_decoder_free(&dd);
}

static void test_enc_round_trip_all_rates_level0(void **state) {
  (void)state;
  run_rates(0, 0);
  run_rates(0, 1);
}

static void test_enc_round_trip_all_rates_level3(void **state) {
  (void)state;
  run_rates(3, 0);
  run_rates(3, 1);
}

static void test_enc_ties_prefer_lowest_id_and_no_compression(void **state) {
  (void)state;
  /* every element changed, stored: XOR_DENSE and OVERWRITE_DENSE are the same size,
   * so the lower id wins (§9.3) */
  dcr__chunk_encoder ce;
  assert_int_equal(dcr__chunk_encoder_init(&ce, 4096, 0, 0), DCR_OK);
  uint8_t base[4096], target[4096];
  rng_seed(7);
  fill_random(base, sizeof base);
  make_changes(base, target, 2048, 2, 2048);
  dcr__encoded out;
  assert_int_equal(dcr__encode_chunk(&ce, base, target, sizeof base, dtype_of(2), &out), DCR_OK);
  assert_int_equal(out.encoding, DCR_ENC_XOR_DENSE);
  assert_int_equal(out.compression, DCR_COMP_NONE);
  assert_int_equal(out.length, sizeof base);
  dcr__chunk_encoder_free(&ce);
}

static void test_enc_forced_encodings_decode(void **state) {
  (void)state;
  rng_seed(8);
  for (size_t e = 0; e < 4; e++) {
    unsigned esize = esizes[e];
    const size_t n = 301;
    uint8_t *base = xmalloc(n * esize), *target = xmalloc(n * esize), *work = xmalloc(n * esize);
    uint8_t *data = xmalloc(encoded_capacity(n, esize));
    fill_random(base, n * esize);
    memcpy(target, base, n * esize);
    const size_t changed[] = {0, 5, 17, 150, 299, 300};
    for (size_t i = 0; i < sizeof changed / sizeof changed[0]; i++)
      change_element(target, changed[i], esize);
    for (int enc = DCR_ENC_XOR_DENSE; enc <= DCR_ENC_DELTA_SPARSE; enc++)
      for (int comp = DCR_COMP_NONE; comp <= DCR_COMP_ZSTD; comp++) {
        uint32_t count;
        size_t length = build_encoded(enc, comp, base, target, n, esize, data, &count);
        assert_int_equal(count, 6);
        dcr__chunk c = record(enc, comp, count);
        assert_int_equal(decode(&c, data, length, esize, n, NULL), DCR_OK);
        memcpy(work, base, n * esize);
        assert_int_equal(decode(&c, data, length, esize, n, work), DCR_OK);
        assert_memory_equal(work, target, n * esize);
      }
    free(base);
    free(target);
    free(work);
    free(data);
  }
}

/* ---- decoder rejections -------------------------------------------------- */

/* A small fixture: esize 2, 100 elements, 4 changed. */
#define FX_N 100
#define FX_E 2
typedef struct {
  uint8_t base[FX_N * FX_E], target[FX_N * FX_E], work[FX_N * FX_E];
  uint8_t data[4096];
} fixture;

static void fixture_init(fixture *f) {
  rng_seed(9);
  fill_random(f->base, sizeof f->base);
  memcpy(f->target, f->base, sizeof f->base);
  change_element(f->target, 0, FX_E);
  change_element(f->target, 10, FX_E);
  change_element(f->target, 50, FX_E);
  change_element(f->target, 99, FX_E);
  memcpy(f->work, f->base, sizeof f->base);
}

static void test_enc1_unknown_encoding_or_compression_is_rejected(void **state) {
  (void)state;
  fixture f;
  fixture_init(&f);
  uint32_t count;
  size_t length = build_encoded(DCR_ENC_XOR_DENSE, 0, f.base, f.target, FX_N, FX_E, f.data, &count);
  const int bad_enc[] = {0, DCR_ENC_COUNT, 10, 255};
  for (size_t i = 0; i < sizeof bad_enc / sizeof bad_enc[0]; i++) {
    dcr__chunk c = record(bad_enc[i], 0, count);
    assert_int_equal(decode(&c, f.data, length, FX_E, FX_N, NULL), DCR_E_ENCODING);
    assert_int_equal(decode(&c, f.data, length, FX_E, FX_N, f.work), DCR_E_ENCODING);
  }
  const int bad_comp[] = {2, 3, 255};
  for (size_t i = 0; i < sizeof bad_comp / sizeof bad_comp[0]; i++) {
    dcr__chunk c = record(DCR_ENC_XOR_DENSE, bad_comp[i], count);
    assert_int_equal(decode(&c, f.data, length, FX_E, FX_N, NULL), DCR_E_ENCODING);
    assert_int_equal(decode(&c, f.data, length, FX_E, FX_N, f.work), DCR_E_ENCODING);
  }
  assert_memory_equal(f.work, f.base, sizeof f.base);
}

static void test_enc4_trailing_byte_after_last_stream_is_rejected(void **state) {
  (void)state;
  fixture f;
  fixture_init(&f);
  for (int enc = DCR_ENC_XOR_DENSE; enc <= DCR_ENC_DELTA_SPARSE; enc++)
    for (int comp = 0; comp <= 1; comp++) {
      uint32_t count;
      size_t length = build_encoded(enc, comp, f.base, f.target, FX_N, FX_E, f.data, &count);
      dcr__chunk c = record(enc, comp, count);
      assert_int_equal(decode(&c, f.data, length, FX_E, FX_N, NULL), DCR_OK);
      f.data[length] = 0;
      assert_int_equal(decode(&c, f.data, length + 1, FX_E, FX_N, NULL), DCR_E_ENCODING);
      memcpy(f.work, f.base, sizeof f.base);
      assert_int_equal(decode(&c, f.data, length + 1, FX_E, FX_N, f.work), DCR_E_ENCODING);
      assert_memory_equal(f.work, f.base, sizeof f.base);
    }
}

static void test_enc2_sparse_xor_value_all_zero_is_rejected(void **state) {
  (void)state;
  fixture f;
  fixture_init(&f);
  for (int comp = 0; comp <= 1; comp++) {
    /* positions 0, 10, 50, 99 but value of element 50 all zero */
    const uint32_t pos[4] = {0, 10, 50, 99};
    uint8_t varints[32], values[4 * FX_E], planes[4 * FX_E];
    size_t v = dcr__positions_write(varints, pos, 4);
    for (size_t i = 0; i < 4; i++)
      for (unsigned b = 0; b < FX_E; b++)
        values[i * FX_E + b] =
            (uint8_t)(f.base[pos[i] * FX_E + b] ^ f.target[pos[i] * FX_E + b]);
    memset(values + 2 * FX_E, 0, FX_E);
    dcr__planes_split(planes, values, 4, FX_E);
    size_t length = put_stream(f.data, comp, varints, v);
    length += put_stream(f.data + length, comp, planes, sizeof planes);
    dcr__chunk c = record(DCR_ENC_XOR_SPARSE, comp, 4);
    assert_int_equal(decode(&c, f.data, length, FX_E, FX_N, NULL), DCR_E_ENCODING);
    assert_int_equal(decode(&c, f.data, length, FX_E, FX_N, f.work), DCR_E_ENCODING);
  }
}

static void test_enc2_xor_dense_count_mismatch_is_rejected(void **state) {
  (void)state;
  fixture f;
  fixture_init(&f);
  for (int comp = 0; comp <= 1; comp++) {
    uint32_t count;
    size_t length = build_encoded(DCR_ENC_XOR_DENSE, comp, f.base, f.target, FX_N, FX_E, f.data,
                                  &count);
    assert_int_equal(count, 4);
    const uint32_t wrong[] = {1, 3, 5, FX_N};
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
      dcr__chunk c = record(DCR_ENC_XOR_DENSE, comp, wrong[i]);
      assert_int_equal(decode(&c, f.data, length, FX_E, FX_N, NULL), DCR_E_ENCODING);
      memcpy(f.work, f.base, sizeof f.base);
      assert_int_equal(decode(&c, f.data, length, FX_E, FX_N, f.work), DCR_E_ENCODING);
      assert_memory_equal(f.work, f.base, sizeof f.base);
    }
  }
}

static void test_enc3_overwrite_count_mismatch_is_rejected_at_apply(void **state) {
  (void)state;
  fixture f;
  fixture_init(&f);
  for (int comp = 0; comp <= 1; comp++) {
    uint32_t count;
    size_t length = build_encoded(DCR_ENC_OVERWRITE_DENSE, comp, f.base, f.target, FX_N, FX_E,
                                  f.data, &count);
    assert_int_equal(count, 4);
    const uint32_t wrong[] = {1, 3, 5, FX_N};
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
      dcr__chunk c = record(DCR_ENC_OVERWRITE_DENSE, comp, wrong[i]);
      /* without a base the count cannot be checked */
      assert_int_equal(decode(&c, f.data, length, FX_E, FX_N, NULL), DCR_OK);
      memcpy(f.work, f.base, sizeof f.base);
      assert_int_equal(decode(&c, f.data, length, FX_E, FX_N, f.work), DCR_E_ENCODING);
      /* and the chunk is left untouched */
      assert_memory_equal(f.work, f.base, sizeof f.base);
    }
    /* applied to bytes that are not the base: the count is wrong too */
    dcr__chunk c = record(DCR_ENC_OVERWRITE_DENSE, comp, 4);
    memcpy(f.work, f.target, sizeof f.target);
    assert_int_equal(decode(&c, f.data, length, FX_E, FX_N, f.work), DCR_E_ENCODING);
    assert_memory_equal(f.work, f.target, sizeof f.target);
  }
  /* OVERWRITE_SPARSE: a value equal to the bytes it replaces does not change */
  for (int comp = 0; comp <= 1; comp++) {
    uint32_t count;
    size_t length = build_encoded(DCR_ENC_OVERWRITE_SPARSE, comp, f.base, f.target, FX_N, FX_E,
                                  f.data, &count);
    dcr__chunk c = record(DCR_ENC_OVERWRITE_SPARSE, comp, count);
    assert_int_equal(decode(&c, f.data, length, FX_E, FX_N, NULL), DCR_OK);
    memcpy(f.work, f.target, sizeof f.target);
    assert_int_equal(decode(&c, f.data, length, FX_E, FX_N, f.work), DCR_E_ENCODING);
  }
}

static void test_cmp3_frame_size_differs_from_stream_is_rejected(void **state) {
  (void)state;
  fixture f;
  fixture_init(&f);
  uint8_t planes[FX_N * FX_E + 8];
  memset(planes, 0, sizeof planes);
  const size_t sizes[] = {FX_N * FX_E - 1, FX_N * FX_E + 1, 0, FX_N * FX_E + 8};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t length = put_stream(f.data, DCR_COMP_ZSTD, planes, sizes[i]);
    for (int enc = DCR_ENC_XOR_DENSE; enc <= DCR_ENC_OVERWRITE_DENSE; enc += 2) {
      dcr__chunk c = record(enc, DCR_COMP_ZSTD, 1);
      assert_int_equal(decode(&c, f.data, length, FX_E, FX_N, NULL), DCR_E_DECOMPRESS);
      assert_int_equal(decode(&c, f.data, length, FX_E, FX_N, f.work), DCR_E_DECOMPRESS);
    }
  }
  /* sparse: the value frame must hold count elements exactly */
  const uint32_t pos[2] = {3, 7};
  uint8_t varints[16], values[3 * FX_E];
  memset(values, 1, sizeof values);
  size_t v = dcr__positions_write(varints, pos, 2);
  size_t length = put_stream(f.data, DCR_COMP_ZSTD, varints, v);
  length += put_stream(f.data + length, DCR_COMP_ZSTD, values, 3 * FX_E);
  dcr__chunk c = record(DCR_ENC_XOR_SPARSE, DCR_COMP_ZSTD, 2);
  assert_int_equal(decode(&c, f.data, length, FX_E, FX_N, NULL), DCR_E_DECOMPRESS);
  /* a position frame above its bound for 2 positions: DCR_E_DECOMPRESS (§9.3) */
  uint8_t many[DCR__POSITIONS_BOUND(FX_N) + 1];
  memset(many, 0, sizeof many);
  length = put_stream(f.data, DCR_COMP_ZSTD, many, sizeof many);
  length += put_stream(f.data + length, DCR_COMP_ZSTD, values, 2 * FX_E);
  int rc = decode(&c, f.data, length, FX_E, FX_N, NULL);
  assert_true(rc == DCR_E_DECOMPRESS || rc == DCR_E_LIMIT);
}

static void test_cmp3_frame_producing_fewer_bytes_than_declared_is_rejected(void **state) {
  (void)state;
  fixture f;
  fixture_init(&f);
  /* a frame of 199 bytes whose header is patched to declare 200 */
  uint8_t planes[FX_N * FX_E];
  for (size_t i = 0; i < sizeof planes; i++) planes[i] = (uint8_t)(i * 7);
  size_t length = put_stream(f.data, DCR_COMP_ZSTD, planes, sizeof planes - 1);
  uint8_t desc = f.data[4];
  /* single segment, 1-byte content size, no dictionary id, no checksum */
  if ((desc >> 6) != 0 || !((desc >> 5) & 1) || (desc & 3) || ((desc >> 2) & 1)) skip();
  assert_int_equal(f.data[5], sizeof planes - 1);
  f.data[5] = (uint8_t)sizeof planes;
  assert_int_equal(ZSTD_getFrameContentSize(f.data, length), sizeof planes);
  dcr__chunk c = record(DCR_ENC_OVERWRITE_DENSE, DCR_COMP_ZSTD, 1);
  assert_int_equal(decode(&c, f.data, length, FX_E, FX_N, NULL), DCR_E_DECOMPRESS);
  assert_int_equal(decode(&c, f.data, length, FX_E, FX_N, f.work), DCR_E_DECOMPRESS);
  assert_memory_equal(f.work, f.base, sizeof f.base);
}

/* One zstd frame without a content size, made by streaming compression. */
static size_t compress_unsized(uint8_t *out, size_t cap, const uint8_t *src, size_t length) {
  ZSTD_CCtx *cc = ZSTD_createCCtx();
  assert_non_null(cc);
  assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 0)));
  ZSTD_inBuffer in = {src, length, 0};
  ZSTD_outBuffer o = {out, cap, 0};
  size_t left;
  do {
    left = ZSTD_compressStream2(cc, &o, &in, ZSTD_e_end);
    assert_false(ZSTD_isError(left));
  } while (left);
  ZSTD_freeCCtx(cc);
  assert_int_equal(ZSTD_getFrameContentSize(out, o.pos), ZSTD_CONTENTSIZE_UNKNOWN);
  return o.pos;
}

static void test_cmp3_frame_without_content_size_is_rejected(void **state) {
  (void)state;
  fixture f;
  fixture_init(&f);
  uint8_t planes[FX_N * FX_E];
  memset(planes, 0, sizeof planes);
  planes[0] = 1;
  size_t length = compress_unsized(f.data, sizeof f.data, planes, sizeof planes);
  dcr__chunk c = record(DCR_ENC_XOR_DENSE, DCR_COMP_ZSTD, 1);
  assert_int_equal(decode(&c, f.data, length, FX_E, FX_N, NULL), DCR_E_DECOMPRESS);
  assert_int_equal(decode(&c, f.data, length, FX_E, FX_N, f.work), DCR_E_DECOMPRESS);
  assert_memory_equal(f.work, f.base, sizeof f.base);
  /* a sparse chunk whose position frame has no content size */
  const uint32_t pos[1] = {3};
  uint8_t varints[8];
  size_t v = dcr__positions_write(varints, pos, 1);
  length = compress_unsized(f.data, sizeof f.data, varints, v);
  length += put_stream(f.data + length, DCR_COMP_ZSTD, planes, FX_E);
  c = record(DCR_ENC_XOR_SPARSE, DCR_COMP_ZSTD, 1);
  assert_int_equal(decode(&c, f.data, length, FX_E, FX_N, NULL), DCR_E_DECOMPRESS);
}

static void test_cmp3_garbage_instead_of_frame_is_rejected(void **state) {
  (void)state;
  fixture f;
  fixture_init(&f);
  rng_seed(10);
  for (int enc = DCR_ENC_XOR_DENSE; enc <= DCR_ENC_DELTA_SPARSE; enc++) {
    fill_random(f.data, 300);
    dcr__chunk c = record(enc, DCR_COMP_ZSTD, 4);
    assert_int_equal(decode(&c, f.data, 300, FX_E, FX_N, NULL), DCR_E_DECOMPRESS);
    /* nothing at all where a frame should be */
    assert_int_equal(decode(&c, f.data, 0, FX_E, FX_N, NULL), DCR_E_DECOMPRESS);
    /* a frame cut short */
    uint32_t count;
    size_t length = build_encoded(enc, DCR_COMP_ZSTD, f.base, f.target, FX_N, FX_E, f.data, &count);
    c = record(enc, DCR_COMP_ZSTD, count);
    assert_int_equal(decode(&c, f.data, length - 1, FX_E, FX_N, NULL), DCR_E_DECOMPRESS);
  }
}

static void test_cmp3_position_frame_with_bytes_left_is_rejected(void **state) {
  (void)state;
  fixture f;
  fixture_init(&f);
  /* positions 0 and 1 (Rice k = 0: two zero bits), and an extra byte in the
   * position frame */
  const uint8_t varints[3] = {0x00, 0x00, 0x00};
  uint8_t values[2 * FX_E];
  memset(values, 1, sizeof values);
  size_t length = put_stream(f.data, DCR_COMP_ZSTD, varints, 3);
  length += put_stream(f.data + length, DCR_COMP_ZSTD, values, sizeof values);
  dcr__chunk c = record(DCR_ENC_XOR_SPARSE, DCR_COMP_ZSTD, 2);
  assert_int_equal(decode(&c, f.data, length, FX_E, FX_N, NULL), DCR_E_POSITION);
  /* stored, a position stream ends at the byte after its count-th gap (§9.3),
   * so the same two positions followed by the values decode */
  length = put_stream(f.data, DCR_COMP_NONE, varints, 2);
  length += put_stream(f.data + length, DCR_COMP_NONE, values, sizeof values);
  c = record(DCR_ENC_XOR_SPARSE, DCR_COMP_NONE, 2);
  assert_int_equal(decode(&c, f.data, length, FX_E, FX_N, NULL), DCR_OK);
}

static void test_enc_stored_stream_too_short_is_rejected(void **state) {
  (void)state;
  fixture f;
  fixture_init(&f);
  for (int enc = DCR_ENC_XOR_DENSE; enc <= DCR_ENC_DELTA_SPARSE; enc++) {
    uint32_t count;
    size_t length = build_encoded(enc, DCR_COMP_NONE, f.base, f.target, FX_N, FX_E, f.data, &count);
    dcr__chunk c = record(enc, DCR_COMP_NONE, count);
    int sparse = enc % 2 == 0;
    for (size_t cut = 0; cut < length; cut++) {
      int rc = decode(&c, f.data, cut, FX_E, FX_N, NULL);
      /* a cut inside the positions is a position error; inside the planes, a
       * short stream */
      if (sparse) assert_true(rc == DCR_E_ENCODING || rc == DCR_E_POSITION);
      else assert_int_equal(rc, DCR_E_ENCODING);
      if (!sparse || cut >= length - count * FX_E) assert_int_equal(rc, DCR_E_ENCODING);
    }
  }
}

/* The decoder must not write outside its buffers whatever the record says
 * (chunk_decode.c: "a hostile chunk can only fail, never overrun"). A count
 * above n is rejected by the index (§8.3) before the decoder runs, but the
 * decoder must not trust count alone to bound the position frame. zstd is not
 * instrumented, so the position buffer is swapped for one with a guard zone. */
static void test_cmp3_sparse_count_above_n_fails_without_overrun(void **state) {
  (void)state;
  const size_t chunk_size = 4096, n = 4096; /* esize 1: n = chunk_size */
  const uint32_t count = (uint32_t)n + 1;
  size_t declared = DCR__POSITIONS_BOUND(n); /* past the position buffer */
  uint8_t *varints = calloc(declared, 1);
  uint8_t *data = xmalloc(ZSTD_compressBound(declared) + 64);
  assert_non_null(varints);
  size_t length = put_stream(data, DCR_COMP_ZSTD, varints, declared);
  dcr__chunk c = record(DCR_ENC_XOR_SPARSE, DCR_COMP_ZSTD, count);

  dcr__chunk_decoder dd;
  assert_int_equal(dcr__chunk_decoder_init(&dd, chunk_size, DCR_FORMAT_MINOR), DCR_OK);
  const size_t room = DCR__POSITIONS_BOUND(chunk_size), guard = 64;
  uint8_t *own = dd.pos_stream, *guarded = xmalloc(room + guard);
  memset(guarded, 0xCD, room + guard);
  dd.pos_stream = guarded;
  dcr_detail d;
  dcr__detail_init(&d);
  int rc = dcr__decode_chunk(&dd, &c, data, length, 1, n, NULL, &d);
  dd.pos_stream = own;
  size_t overrun = 0;
  for (size_t i = room; i < room + guard; i++) overrun += guarded[i] != 0xCD;
  if (overrun)
    print_message("    decoder wrote %zu bytes past its %zu-byte varint buffer (rc %s)\n",
                  overrun, room, dcr_error_name(rc));
  dcr__chunk_decoder_free(&dd);
  free(guarded);
  free(varints);
  free(data);
  assert_int_not_equal(rc, DCR_OK);
  assert_int_equal(overrun, 0);
}

/* ---- pool ---------------------------------------------------------------- */

typedef struct {
  atomic_uint *hits;
  unsigned threads;
  atomic_uint bad_worker;
  atomic_size_t furthest; /* 1 + the highest job started */
} pool_ctx;

static void count_job(void *ctx, size_t job, unsigned worker) {
  pool_ctx *p = ctx;
  atomic_fetch_add(&p->hits[job], 1u);
  if (worker >= p->threads) atomic_fetch_add(&p->bad_worker, 1u);
  size_t f = atomic_load(&p->furthest);
  while (f < job + 1 && !atomic_compare_exchange_weak(&p->furthest, &f, job + 1)) {
  }
}

static void pool_ctx_init(pool_ctx *ctx, size_t jobs, unsigned threads) {
  ctx->hits = calloc(jobs + 1, sizeof *ctx->hits);
  assert_non_null(ctx->hits);
  ctx->threads = threads;
  atomic_init(&ctx->bad_worker, 0u);
  atomic_init(&ctx->furthest, 0);
  for (size_t j = 0; j < jobs; j++) atomic_init(&ctx->hits[j], 0u);
}

typedef struct {
  pool_ctx *ctx;
  size_t window, taken, stop_at;
} taker;

/* The caller's side: each job is done when taken, in order, and nothing runs
 * more than a window ahead of it. */
static int take_counted(void *opaque, size_t job, dcr_detail *d) {
  (void)d;
  taker *t = opaque;
  assert_int_equal(job, t->taken);
  assert_int_equal(atomic_load(&t->ctx->hits[job]), 1);
  assert_true(atomic_load(&t->ctx->furthest) <= job + t->window);
  t->taken++;
  return job + 1 == t->stop_at ? DCR_E_IO : DCR_OK;
}

typedef struct {
  pool_ctx *ctx;
  taker *taker;
} both;

static void run_counted(void *opaque, size_t job, unsigned worker) {
  count_job(((both *)opaque)->ctx, job, worker);
}

static int take_both(void *opaque, size_t job, dcr_detail *d) {
  return take_counted(((both *)opaque)->taker, job, d);
}

static void test_pool_runs_every_job_once_in_a_window(void **state) {
  (void)state;
  const unsigned threads[] = {1, 2, 7};
  const size_t jobs[] = {0, 1, 3, 1000, 7};
  for (size_t t = 0; t < 3; t++) {
    dcr__pool *pool = NULL;
    assert_int_equal(dcr__pool_create(&pool, threads[t]), DCR_OK);
    size_t window = dcr__pool_window(pool);
    assert_true(window >= 1 && window <= 2 * threads[t]);
    /* the same pool runs stream after stream */
    for (size_t b = 0; b < sizeof jobs / sizeof jobs[0]; b++) {
      pool_ctx ctx;
      pool_ctx_init(&ctx, jobs[b], threads[t]);
      taker tk = {&ctx, window, 0, SIZE_MAX};
      both bo = {&ctx, &tk};
      assert_int_equal(dcr__pool_stream(pool, jobs[b], run_counted, take_both, &bo, NULL, NULL),
                       DCR_OK);
      assert_int_equal(tk.taken, jobs[b]);
      for (size_t j = 0; j < jobs[b]; j++) assert_int_equal(atomic_load(&ctx.hits[j]), 1);
      assert_int_equal(atomic_load(&ctx.bad_worker), 0);
      free(ctx.hits);
    }
    dcr__pool_free(pool);
  }
  dcr__pool_free(NULL);
  assert_true(dcr_default_threads() >= 1);
}

/* A take that fails, or a cancel, ends the stream: no job starts after it
 * returns, and the pool runs the next stream from its start. */
static void test_pool_stops_early(void **state) {
  (void)state;
  dcr__pool *pool = NULL;
  assert_int_equal(dcr__pool_create(&pool, 3), DCR_OK);
  size_t window = dcr__pool_window(pool);
  pool_ctx ctx;
  pool_ctx_init(&ctx, 1000, 3);
  taker tk = {&ctx, window, 0, 2};
  both bo = {&ctx, &tk};
  assert_int_equal(dcr__pool_stream(pool, 1000, run_counted, take_both, &bo, NULL, NULL),
                   DCR_E_IO);
  assert_int_equal(tk.taken, 2);
  size_t started = atomic_load(&ctx.furthest);
  assert_true(started >= 2 && started <= 1 + window);
  usleep(20000);
  assert_int_equal(atomic_load(&ctx.furthest), started);
  for (size_t j = started; j < 1000; j++) assert_int_equal(atomic_load(&ctx.hits[j]), 0);
  free(ctx.hits);

  volatile int cancel = 1;
  dcr_detail d;
  pool_ctx_init(&ctx, 5, 3);
  tk = (taker){&ctx, window, 0, SIZE_MAX};
  assert_int_equal(dcr__pool_stream(pool, 5, run_counted, take_both, &bo, &cancel, &d),
                   DCR_E_INTERRUPTED);
  assert_int_equal(tk.taken, 0);
  free(ctx.hits); /* the jobs started before the cancel was seen ran: a fresh count */
  pool_ctx_init(&ctx, 5, 3);
  tk = (taker){&ctx, window, 0, SIZE_MAX};
  cancel = 0;
  assert_int_equal(dcr__pool_stream(pool, 5, run_counted, take_both, &bo, &cancel, &d), DCR_OK);
  assert_int_equal(tk.taken, 5);
  for (size_t j = 0; j < 5; j++) assert_int_equal(atomic_load(&ctx.hits[j]), 1);
  free(ctx.hits);
  dcr__pool_free(pool);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_classed_walks_agree),
      cmocka_unit_test(test_banded_collect_inverted_bands),
      cmocka_unit_test(test_planes_split_join_round_trip),
      cmocka_unit_test(test_planes_xor_into_applies_xor),
      cmocka_unit_test(test_planes_nonzero_counts_nonzero_elements),
      cmocka_unit_test(test_pos_round_trip_random_sets),
      cmocka_unit_test(test_pos_round_trip_large_gaps),
      cmocka_unit_test(test_pos_rice_bytes_exactly),
      cmocka_unit_test(test_pos1_empty_stream_or_bad_parameter_is_rejected),
      cmocka_unit_test(test_pos1_only_the_smallest_best_parameter_is_accepted),
      cmocka_unit_test(test_pos1_stream_ending_inside_a_gap_is_rejected),
      cmocka_unit_test(test_pos1_nonzero_padding_is_rejected),
      cmocka_unit_test(test_pos1_position_past_chunk_is_rejected),
      cmocka_unit_test(test_dt_signed_zero_is_a_change),
      cmocka_unit_test(test_dt_nan_payload_is_a_change),
      cmocka_unit_test(test_dt_count_changed_agrees_with_detect),
      cmocka_unit_test(test_enc_round_trip_all_rates_level0),
      cmocka_unit_test(test_enc_round_trip_all_rates_level3),
      cmocka_unit_test(test_enc_ties_prefer_lowest_id_and_no_compression),
      cmocka_unit_test(test_enc_forced_encodings_decode),
      cmocka_unit_test(test_enc1_unknown_encoding_or_compression_is_rejected),
      cmocka_unit_test(test_enc4_trailing_byte_after_last_stream_is_rejected),
      cmocka_unit_test(test_enc2_sparse_xor_value_all_zero_is_rejected),
      cmocka_unit_test(test_enc2_xor_dense_count_mismatch_is_rejected),
      cmocka_unit_test(test_enc3_overwrite_count_mismatch_is_rejected_at_apply),
      cmocka_unit_test(test_cmp3_frame_size_differs_from_stream_is_rejected),
      cmocka_unit_test(test_cmp3_frame_producing_fewer_bytes_than_declared_is_rejected),
      cmocka_unit_test(test_cmp3_frame_without_content_size_is_rejected),
      cmocka_unit_test(test_cmp3_garbage_instead_of_frame_is_rejected),
      cmocka_unit_test(test_cmp3_position_frame_with_bytes_left_is_rejected),
      cmocka_unit_test(test_enc_stored_stream_too_short_is_rejected),
      cmocka_unit_test(test_pool_runs_every_job_once_in_a_window),
      cmocka_unit_test(test_pool_stops_early),
      cmocka_unit_test(test_sign2_piece_digests_vector_equals_libcrypto),
      /* last: if it overruns, a sanitizer stops the run here */
      cmocka_unit_test(test_cmp3_sparse_count_above_n_fails_without_overrun),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
