/*
 * vecgen.h - what the test vector generators share (tools/mkvectors.c and
 * tools/mkvectors11.c for bundles, with tools/bundlegen.h; tools/mkjournals.c for
 * apply journals): errors, growable byte buffers, little-endian fields, a seeded
 * splitmix64 stream, XXH3-64 and SHA-256, files and JSON indexes. Each generator
 * includes it once, after defining VECGEN_NAME (its name in errors) and SEED.
 * Nothing here comes from libdcr: the generators are independent writers.
 */
#ifndef DCR_VECGEN_H
#define DCR_VECGEN_H

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#define VECGEN_UNUSED __attribute__((unused))

static VECGEN_UNUSED void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static VECGEN_UNUSED void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", VECGEN_NAME);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

static VECGEN_UNUSED void *xmalloc(size_t n) {
  void *p = calloc(1, n ? n : 1);
  if (!p) die("out of memory (%zu bytes)", n);
  return p;
}

typedef struct {
  uint8_t *p;
  size_t n, cap;
} buf;

static VECGEN_UNUSED void bgrow(buf *b, size_t extra) {
  if (b->n + extra <= b->cap) return;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->n + extra) cap *= 2;
  uint8_t *p = realloc(b->p, cap);
  if (!p) die("out of memory");
  b->p = p;
  b->cap = cap;
}
static VECGEN_UNUSED void bput(buf *b, const void *p, size_t n) {
  bgrow(b, n);
  if (n) memcpy(b->p + b->n, p, n);
  b->n += n;
}
static VECGEN_UNUSED void bfill(buf *b, uint8_t v, size_t n) {
  bgrow(b, n);
  if (n) memset(b->p + b->n, v, n);
  b->n += n;
}
static VECGEN_UNUSED void put16(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 2; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static VECGEN_UNUSED void put32(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static VECGEN_UNUSED void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static VECGEN_UNUSED uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static VECGEN_UNUSED uint64_t get64(const uint8_t *p) { return get32(p) | (uint64_t)get32(p + 4) << 32; }
static VECGEN_UNUSED void bu8(buf *b, uint64_t v) {
  uint8_t x = (uint8_t)v;
  bput(b, &x, 1);
}
static VECGEN_UNUSED void bu16(buf *b, uint64_t v) {
  uint8_t x[2];
  put16(x, v);
  bput(b, x, 2);
}
static VECGEN_UNUSED void bu32(buf *b, uint64_t v) {
  uint8_t x[4];
  put32(x, v);
  bput(b, x, 4);
}
static VECGEN_UNUSED void bu64(buf *b, uint64_t v) {
  uint8_t x[8];
  put64(x, v);
  bput(b, x, 8);
}
static VECGEN_UNUSED void bset(buf *b, const void *p, size_t n) {
  b->n = 0;
  bput(b, p, n);
}
static VECGEN_UNUSED buf bdup(const buf *b) {
  buf c = {0};
  bput(&c, b->p, b->n);
  return c;
}
static VECGEN_UNUSED buf bmem(const void *p, size_t n) {
  buf c = {0};
  bput(&c, p, n);
  return c;
}
static VECGEN_UNUSED void bfree(buf *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}
/* Replaces bytes [at, at + old) of b with n bytes from p. */
static VECGEN_UNUSED void bsplice(buf *b, size_t at, size_t old, const void *p, size_t n) {
  if (at + old > b->n) die("splice out of range");
  buf c = {0};
  bput(&c, b->p, at);
  bput(&c, p, n);
  bput(&c, b->p + at + old, b->n - at - old);
  bfree(b);
  *b = c;
}

static VECGEN_UNUSED uint64_t rng_state = SEED;
static VECGEN_UNUSED uint64_t rng(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static VECGEN_UNUSED uint8_t rbyte(void) { return (uint8_t)(rng() >> 56); }
static VECGEN_UNUSED uint64_t rbelow(uint64_t n) { return rng() % n; }
static VECGEN_UNUSED buf rbytes(size_t n) {
  buf b = {0};
  for (size_t i = 0; i < n; i++) bu8(&b, rbyte());
  return b;
}
static VECGEN_UNUSED uint64_t xxh64(const void *p, size_t n) { return XXH3_64bits(p, n); }

/* XXH3-128 in its canonical (big-endian) bytes, SPEC.md §1. */
static VECGEN_UNUSED void xxh128(const void *p, size_t n, uint8_t out[16]) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits(p, n));
  memcpy(out, c.digest, 16);
}

/* pieces(bytes), SPEC.md §1: XXH3-128 of each 4096-byte piece, concatenated. */
static VECGEN_UNUSED void piece_list(const uint8_t *p, size_t n, buf *out) {
  for (size_t at = 0; at < n; at += 4096) {
    uint8_t h[16];
    xxh128(p + at, n - at < 4096 ? n - at : 4096, h);
    bput(out, h, 16);
  }
}

/* A tensor hash, SPEC.md §7: XXH3-128 of the piece list. */
static VECGEN_UNUSED void tensor_hash(const uint8_t *p, size_t n, uint8_t out[16]) {
  buf b = {0};
  piece_list(p, n, &b);
  xxh128(b.p, b.n, out);
  bfree(&b);
}

/* ---- SHA-256 (FIPS 180-4), for the index: no library needed to check it */

static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

static VECGEN_UNUSED uint32_t ror(uint32_t x, int n) { return x >> n | x << (32 - n); }

static VECGEN_UNUSED void sha_block(uint32_t h[8], const uint8_t *p) {
  uint32_t w[64], v[8];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
           p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  memcpy(v, h, sizeof v);
  for (int i = 0; i < 64; i++) {
    uint32_t t1 = v[7] + (ror(v[4], 6) ^ ror(v[4], 11) ^ ror(v[4], 25)) +
                  ((v[4] & v[5]) ^ (~v[4] & v[6])) + sha_k[i] + w[i];
    uint32_t t2 = (ror(v[0], 2) ^ ror(v[0], 13) ^ ror(v[0], 22)) +
                  ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
    memmove(v + 1, v, 7 * sizeof *v);
    v[4] += t1;
    v[0] = t1 + t2;
  }
  for (int i = 0; i < 8; i++) h[i] += v[i];
}

static VECGEN_UNUSED void sha256_hex(const uint8_t *p, size_t n, char out[65]) {
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  size_t i = 0;
  for (; i + 64 <= n; i += 64) sha_block(h, p + i);
  uint8_t last[128] = {0};
  size_t rest = n - i, total = rest + 9 <= 64 ? 64 : 128;
  if (rest) memcpy(last, p + i, rest);
  last[rest] = 0x80;
  uint64_t bits = (uint64_t)n * 8;
  for (int k = 0; k < 8; k++) last[total - 1 - (size_t)k] = (uint8_t)(bits >> (8 * k));
  for (size_t k = 0; k < total; k += 64) sha_block(h, last + k);
  for (int k = 0; k < 8; k++) snprintf(out + 8 * k, 9, "%08x", h[k]);
}

/* Creates the directories above path. */
static VECGEN_UNUSED void mkdirs(const char *path) {
  char *tmp = strdup(path);
  if (!tmp) die("out of memory");
  for (char *p = tmp + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      if (mkdir(tmp, 0777) && errno != EEXIST) die("mkdir %s: %s", tmp, strerror(errno));
      *p = '/';
    }
  free(tmp);
}

/* Writes n bytes to path, creating the directories above it, and gives their
 * SHA-256 (every index records the digest of each file it names). */
static VECGEN_UNUSED void write_sha(const char *path, const void *p, size_t n, char sha[65]) {
  mkdirs(path);
  FILE *f = fopen(path, "wb");
  if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f)) die("cannot write %s", path);
  sha256_hex(p, n, sha);
}

/* Writes a JSON document (an index) to path, indented, keys in insertion order;
 * takes the reference. */
static VECGEN_UNUSED void write_json(const char *path, json_t *doc) {
  mkdirs(path);
  char *text = json_dumps(doc, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
  FILE *f = fopen(path, "w");
  if (!text || !f || fputs(text, f) < 0 || fputc('\n', f) < 0 || fclose(f))
    die("cannot write %s", path);
  free(text);
  json_decref(doc);
}

/* The JSON array of the items of a comma-separated list (an index's flags,
 * covers...): none for NULL or "". */
static VECGEN_UNUSED json_t *csv(const char *s) {
  json_t *a = json_array();
  while (s && *s) {
    const char *e = strchr(s, ',');
    size_t n = e ? (size_t)(e - s) : strlen(s);
    json_array_append_new(a, json_stringn(s, n));
    s = e ? e + 1 : s + n;
  }
  return a;
}

#endif
