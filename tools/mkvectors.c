/*
 * mkvectors.c - writes the DCR golden test vectors (testvectors/, SPEC.md §12).
 *
 *   mkvectors OUTDIR      writes OUTDIR/index.json and OUTDIR/v1/...
 *
 * `make vectors` runs it on testvectors/; `make test` runs it on a temporary
 * folder and fails if a byte differs from what is committed.
 *
 * This is a second, independent writer of the format: every bundle is built here
 * from the bytes up with xxHash and zstd only, not with libdcr, so that the corpus
 * checks the library instead of repeating it. Valid vectors choose each chunk's
 * encoding and compression explicitly (SPEC.md §9: readers accept any valid
 * choice), so they do not change when the reference encoder's choices do. Each
 * invalid vector breaks exactly one rule: the sections around the broken field
 * keep correct lengths and checksums (recomputed here), so that a reader gets as
 * far as the check the vector targets.
 *
 * Everything is deterministic: data comes from one fixed-seed PRNG in program
 * order; zstd output depends only on the libzstd version (recorded in the index);
 * the invalid vectors' zstd frames are written by hand and depend on nothing.
 */
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
#include <zstd.h>

#define SEED 0x4443523176656374ull /* "DCR1vect" */
#define ZLEVEL 3                   /* zstd level of the valid vectors' frames */

/* ------------------------------------------------------------------------ */
/* Basics                                                                    */

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "mkvectors: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

static void *xmalloc(size_t n) {
  void *p = calloc(1, n ? n : 1);
  if (!p) die("out of memory (%zu bytes)", n);
  return p;
}

typedef struct {
  uint8_t *p;
  size_t n, cap;
} buf;

static void bgrow(buf *b, size_t extra) {
  if (b->n + extra <= b->cap) return;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->n + extra) cap *= 2;
  uint8_t *p = realloc(b->p, cap);
  if (!p) die("out of memory");
  b->p = p;
  b->cap = cap;
}
static void bput(buf *b, const void *p, size_t n) {
  bgrow(b, n);
  if (n) memcpy(b->p + b->n, p, n);
  b->n += n;
}
static void bfill(buf *b, uint8_t v, size_t n) {
  bgrow(b, n);
  memset(b->p + b->n, v, n);
  b->n += n;
}
static void put16(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 2; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put32(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const uint8_t *p) { return get32(p) | (uint64_t)get32(p + 4) << 32; }
static void bu8(buf *b, uint64_t v) {
  uint8_t x = (uint8_t)v;
  bput(b, &x, 1);
}
static void bu16(buf *b, uint64_t v) {
  uint8_t x[2];
  put16(x, v);
  bput(b, x, 2);
}
static void bu32(buf *b, uint64_t v) {
  uint8_t x[4];
  put32(x, v);
  bput(b, x, 4);
}
static void bu64(buf *b, uint64_t v) {
  uint8_t x[8];
  put64(x, v);
  bput(b, x, 8);
}
static void bset(buf *b, const void *p, size_t n) {
  b->n = 0;
  bput(b, p, n);
}
static buf bdup(const buf *b) {
  buf c = {0};
  bput(&c, b->p, b->n);
  return c;
}
static void bfree(buf *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}
/* Replaces bytes [at, at + old) of b with n bytes from p. */
static void bsplice(buf *b, size_t at, size_t old, const void *p, size_t n) {
  if (at + old > b->n) die("splice out of range");
  buf c = {0};
  bput(&c, b->p, at);
  bput(&c, p, n);
  bput(&c, b->p + at + old, b->n - at - old);
  bfree(b);
  *b = c;
}

static uint64_t rng_state = SEED;
static uint64_t rng(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static uint8_t rbyte(void) { return (uint8_t)(rng() >> 56); }
static uint8_t rnonzero(void) {
  uint8_t b;
  do b = rbyte(); while (!b);
  return b;
}

static uint64_t xxh64(const void *p, size_t n) { return XXH3_64bits(p, n); }
static void xxh128(const void *p, size_t n, uint8_t out[16]) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits(p, n));
  memcpy(out, c.digest, 16);
}

/* pieces(bytes), SPEC.md §1: XXH3-128 of each 4096-byte piece, concatenated. */
static void piece_list(const uint8_t *p, size_t n, buf *out) {
  for (size_t at = 0; at < n; at += 4096) {
    uint8_t h[16];
    xxh128(p + at, n - at < 4096 ? n - at : 4096, h);
    bput(out, h, 16);
  }
}

/* A tensor hash (§7) and a chunk check (§8.2). */
static void tensor_hash(const uint8_t *p, size_t n, uint8_t out[16]) {
  buf b = {0};
  piece_list(p, n, &b);
  xxh128(b.p, b.n, out);
  bfree(&b);
}

static uint64_t chunk_check(const uint8_t *p, size_t n) {
  buf b = {0};
  piece_list(p, n, &b);
  uint64_t h = xxh64(b.p, b.n);
  bfree(&b);
  return h;
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

static uint32_t ror(uint32_t x, int n) { return x >> n | x << (32 - n); }

static void sha_block(uint32_t h[8], const uint8_t *p) {
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

static void sha256_hex(const uint8_t *p, size_t n, char out[65]) {
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

/* ------------------------------------------------------------------------ */
/* Checkpoints (SPEC.md §2, §3)                                              */

enum { BOOL = 1, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, I64, U64, F64 };
static const char *const dt_name[16] = {NULL,  "BOOL", "U8",  "I8",  "F8_E5M2", "F8_E4M3",
                                        "I16", "U16",  "F16", "BF16", "I32",    "U32",
                                        "F32", "I64",  "U64", "F64"};
static const unsigned dt_size[16] = {0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8};
enum { KIND_RAW = 0, KIND_ST = 1 };

#define MAXRANK 32
typedef struct {
  char *name;
  size_t nlen;
  int dtype;
  unsigned rank;
  uint64_t dims[MAXRANK];
  uint64_t len, off; /* off: in the data region */
  uint8_t *data;
} tensor;

#define MAXT 24
typedef struct {
  const char *file; /* relative to v1/ */
  int kind;
  size_t n;
  tensor t[MAXT];   /* sorted by name, bytewise */
  const char *meta; /* JSON object text for __metadata__, or NULL */
  int reverse;      /* data region in reverse name order */
  size_t extra_pad; /* spaces after the 8-byte alignment */
  buf prefix, bytes;
  int written;
  char sha[65];
} ckpt;

static int name_cmp(const void *a, size_t na, const void *b, size_t nb) {
  int c = memcmp(a, b, na < nb ? na : nb);
  return c ? c : (na > nb) - (na < nb);
}

static tensor *ck_add(ckpt *c, const char *name, int dtype, unsigned rank, const uint64_t *dims) {
  if (c->n == MAXT) die("too many tensors");
  size_t nlen = strlen(name), at = c->n;
  while (at && name_cmp(c->t[at - 1].name, c->t[at - 1].nlen, name, nlen) > 0) at--;
  memmove(c->t + at + 1, c->t + at, (c->n - at) * sizeof *c->t);
  c->n++;
  tensor *t = &c->t[at];
  memset(t, 0, sizeof *t);
  t->name = strdup(name);
  t->nlen = nlen;
  t->dtype = dtype;
  t->rank = rank;
  uint64_t len = dt_size[dtype];
  for (unsigned i = 0; i < rank; i++) t->dims[i] = dims[i], len *= dims[i];
  t->len = len;
  t->data = xmalloc((size_t)len);
  return t;
}

static tensor *ck_get(ckpt *c, const char *name) {
  for (size_t i = 0; i < c->n; i++)
    if (!strcmp(c->t[i].name, name)) return &c->t[i];
  die("no tensor %s", name);
}

static void ck_remove(ckpt *c, const char *name) {
  tensor *t = ck_get(c, name);
  size_t i = (size_t)(t - c->t);
  free(t->name);
  free(t->data);
  memmove(c->t + i, c->t + i + 1, (c->n - i - 1) * sizeof *c->t);
  c->n--;
}

static void fill_random(tensor *t) {
  for (uint64_t i = 0; i < t->len; i++) t->data[i] = rbyte();
}

/* Changes about `per10k`/10000 of the elements of t (at least one if per10k > 0),
 * each in some bits; 10000 changes every element. */
static void mutate(tensor *t, unsigned per10k) {
  unsigned e = dt_size[t->dtype];
  uint64_t n = t->len / e, changed = 0;
  for (uint64_t i = 0; i < n; i++) {
    if (per10k < 10000 && rng() % 10000 >= per10k) continue;
    t->data[i * e + rng() % e] ^= rnonzero();
    changed++;
  }
  if (!changed && per10k && n) t->data[(rng() % n) * e] ^= rnonzero();
}

static void ck_clone(ckpt *dst, const ckpt *src, const char *file) {
  memset(dst, 0, sizeof *dst);
  dst->file = file;
  dst->kind = src->kind;
  dst->meta = src->meta;
  dst->reverse = src->reverse;
  dst->extra_pad = src->extra_pad;
  dst->n = src->n;
  for (size_t i = 0; i < src->n; i++) {
    dst->t[i] = src->t[i];
    dst->t[i].name = strdup(src->t[i].name);
    dst->t[i].data = xmalloc((size_t)src->t[i].len);
    if (src->t[i].len) memcpy(dst->t[i].data, src->t[i].data, (size_t)src->t[i].len);
  }
}

static void json_str(buf *b, const char *s, size_t n) {
  bu8(b, '"');
  for (size_t i = 0; i < n; i++) {
    uint8_t c = (uint8_t)s[i];
    if (c == '"' || c == '\\') {
      bu8(b, '\\');
      bu8(b, c);
    } else if (c < 0x20) {
      char e[8];
      snprintf(e, sizeof e, "\\u%04x", c);
      bput(b, e, 6);
    } else {
      bu8(b, c);
    }
  }
  bu8(b, '"');
}

static void bprintf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bprintf(buf *b, const char *fmt, ...) {
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  bput(b, tmp, (size_t)n);
}

/* Lays the data region out and writes the file's bytes. */
static void ck_finish(ckpt *c) {
  uint64_t off = 0;
  for (size_t k = 0; k < c->n; k++) {
    tensor *t = &c->t[c->reverse ? c->n - 1 - k : k];
    t->off = off;
    off += t->len;
  }
  bfree(&c->prefix);
  bfree(&c->bytes);
  if (c->kind == KIND_RAW) {
    if (c->n != 1 || strcmp(c->t[0].name, "raw")) die("raw checkpoints hold one tensor");
    bput(&c->bytes, c->t[0].data, (size_t)c->t[0].len);
    return;
  }
  buf j = {0};
  bu8(&j, '{');
  if (c->meta) {
    bprintf(&j, "\"__metadata__\":%s", c->meta);
    if (c->n) bu8(&j, ',');
  }
  for (size_t i = 0; i < c->n; i++) {
    tensor *t = &c->t[i];
    if (i) bu8(&j, ',');
    json_str(&j, t->name, t->nlen);
    bprintf(&j, ":{\"dtype\":\"%s\",\"shape\":[", dt_name[t->dtype]);
    for (unsigned k = 0; k < t->rank; k++)
      bprintf(&j, "%s%llu", k ? "," : "", (unsigned long long)t->dims[k]);
    bprintf(&j, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)t->off,
            (unsigned long long)(t->off + t->len));
  }
  bu8(&j, '}');
  while ((8 + j.n) % 8) bu8(&j, ' ');
  bfill(&j, ' ', c->extra_pad);
  bu64(&c->prefix, j.n);
  bput(&c->prefix, j.p, j.n);
  bfree(&j);
  bput(&c->bytes, c->prefix.p, c->prefix.n);
  for (size_t k = 0; k < c->n; k++) {
    const tensor *t = &c->t[c->reverse ? c->n - 1 - k : k];
    bput(&c->bytes, t->data, (size_t)t->len);
  }
}

/* ------------------------------------------------------------------------ */
/* Manifest and identities (SPEC.md §6, §7)                                  */

typedef struct {
  int dtype;
  unsigned rank;
  uint64_t dims[MAXRANK];
  uint64_t len, off;
  uint8_t hash[16];
} desc;

typedef struct {
  uint8_t *name;
  size_t nlen;
  int nlen_set; /* name_length field differs from nlen */
  uint64_t nlen_field;
  uint8_t presence, resv;
  desc b, t;
  const tensor *bt, *tt; /* sources of the bytes */
} mentry;

#define MAXE 48
typedef struct {
  int count_set;
  uint64_t count_field;
  uint64_t chunk_size;
  uint8_t kind;
  uint8_t resv[7];
  int plen_set;
  uint64_t plen_field;
  uint64_t dlen;
  buf prefix;
  size_t n;
  mentry e[MAXE];
} manifest;

static void desc_from(desc *d, const tensor *t) {
  memset(d, 0, sizeof *d);
  d->dtype = t->dtype;
  d->rank = t->rank;
  memcpy(d->dims, t->dims, sizeof d->dims);
  d->len = t->len;
  d->off = t->off;
  tensor_hash(t->data, (size_t)t->len, d->hash);
}

static void put_desc(buf *b, const desc *d, int with_offset) {
  bu8(b, (uint64_t)d->dtype);
  bu8(b, d->rank);
  for (unsigned i = 0; i < d->rank && i < MAXRANK; i++) bu64(b, d->dims[i]); /* at most 32 */
  bu64(b, d->len);
  if (with_offset) bu64(b, d->off);
}

static void manifest_bytes(const manifest *m, buf *b) {
  b->n = 0;
  bu32(b, m->count_set ? m->count_field : m->n);
  bu32(b, m->chunk_size);
  bu8(b, m->kind);
  bput(b, m->resv, 7);
  bu64(b, m->plen_set ? m->plen_field : m->prefix.n);
  bu64(b, m->dlen);
  bput(b, m->prefix.p, m->prefix.n);
  for (size_t i = 0; i < m->n; i++) {
    const mentry *e = &m->e[i];
    bu16(b, e->nlen_set ? e->nlen_field : e->nlen);
    bput(b, e->name, e->nlen);
    bu8(b, e->presence);
    bu8(b, e->resv);
    if (e->presence & 1) put_desc(b, &e->b, 0);
    if (e->presence & 2) put_desc(b, &e->t, 1);
  }
}

static void state_id(const manifest *m, unsigned side, uint8_t out[16]) {
  buf b = {0};
  for (size_t i = 0; i < m->n; i++) {
    const mentry *e = &m->e[i];
    if (!(e->presence & side)) continue;
    const desc *d = side == 1 ? &e->b : &e->t;
    bu16(&b, e->nlen);
    bput(&b, e->name, e->nlen);
    put_desc(&b, d, 0);
    bput(&b, d->hash, 16);
  }
  xxh128(b.p, b.n, out);
  bfree(&b);
}

static void iden_bytes(const manifest *m, buf *b) {
  uint8_t id[16];
  b->n = 0;
  state_id(m, 1, id);
  bput(b, id, 16);
  state_id(m, 2, id);
  bput(b, id, 16);
  for (size_t i = 0; i < m->n; i++) {
    if (m->e[i].presence & 1) bput(b, m->e[i].b.hash, 16);
    if (m->e[i].presence & 2) bput(b, m->e[i].t.hash, 16);
  }
}

static int delta_coded(const mentry *e) {
  return e->presence == 3 && e->b.dtype == e->t.dtype && e->b.len == e->t.len;
}

/* ------------------------------------------------------------------------ */
/* Encodings (SPEC.md §9)                                                    */

enum { XOR_DENSE = 1, XOR_SPARSE, OVERWRITE_DENSE, OVERWRITE_SPARSE, DELTA_DENSE, DELTA_SPARSE };
#define ENC_LAST DELTA_SPARSE
static const char *const enc_name[ENC_LAST + 1] = {NULL, "xor-dense", "xor-sparse",
                                                   "overwrite-dense", "overwrite-sparse",
                                                   "delta-dense", "delta-sparse"};

/* SPEC.md §9 delta value of one element: zigzag(key(t) - key(b)) mod 2^(8e), where
 * key flips the magnitude bits of patterns whose top bit is set. */
static void delta_value(const uint8_t *b, const uint8_t *t, unsigned e, uint8_t *out) {
  unsigned bits = 8 * e;
  uint64_t top = (uint64_t)1 << (bits - 1), all = bits == 64 ? ~(uint64_t)0 : (top << 1) - 1;
  uint64_t ub = 0, ut = 0;
  for (unsigned i = 0; i < e; i++) ub |= (uint64_t)b[i] << (8 * i), ut |= (uint64_t)t[i] << (8 * i);
  if (ub & top) ub ^= top - 1;
  if (ut & top) ut ^= top - 1;
  uint64_t d = (ut - ub) & all;
  uint64_t z = ((d << 1) ^ ((d & top) ? all : 0)) & all;
  for (unsigned i = 0; i < e; i++) out[i] = (uint8_t)(z >> (8 * i));
}

/* A position stream (SPEC.md §9.1) with Rice parameter k: the byte k, then per
 * gap its quotient in unary (ones, then a zero) and its k low bits, LSB first.
 * Gaps may be anything, so that invalid streams can be written too. */
static void rice(buf *b, unsigned k, const uint64_t *gaps, size_t count) {
  uint64_t acc = 0;
  unsigned nbits = 0;
  bu8(b, k);
#define PUT_BIT(bit) \
  do { acc |= (uint64_t)(bit) << nbits; if (++nbits == 8) bu8(b, acc), acc = 0, nbits = 0; } while (0)
  for (size_t i = 0; i < count; i++) {
    for (uint64_t q = gaps[i] >> k; q; q--) PUT_BIT(1);
    PUT_BIT(0);
    for (unsigned j = 0; j < k; j++) PUT_BIT((gaps[i] >> j) & 1);
  }
#undef PUT_BIT
  if (nbits) bu8(b, acc);
}

/* The k a writer picks: fewest bits, the smallest k on a tie. */
static unsigned rice_k(const uint64_t *gaps, size_t count) {
  unsigned best = 0;
  uint64_t best_bits = UINT64_MAX;
  for (unsigned k = 0; k < 32; k++) {
    uint64_t bits = 0;
    for (size_t i = 0; i < count; i++) bits += (gaps[i] >> k) + 1 + k;
    if (bits < best_bits) best_bits = bits, best = k;
  }
  return best;
}

static void zframe(buf *out, const uint8_t *p, size_t n) {
  size_t cap = ZSTD_compressBound(n);
  bgrow(out, cap);
  size_t z = ZSTD_compress(out->p + out->n, cap, p, n, ZLEVEL);
  if (ZSTD_isError(z)) die("zstd: %s", ZSTD_getErrorName(z));
  out->n += z;
}

/* A zstd frame written by hand (RFC 8878): single segment, 8-byte content size
 * `declared`, the bytes `p` in raw blocks of at most 128 KiB. With
 * declared == UINT64_MAX, no content size (and a 128 KiB window). */
static void zframe_raw(buf *out, uint64_t declared, const uint8_t *p, size_t n) {
  bu32(out, 0xFD2FB528u);
  if (declared == UINT64_MAX) {
    bu8(out, 0x00); /* no FCS, not single segment */
    bu8(out, 0x38); /* window 2^(10+7) */
  } else {
    bu8(out, 0xE0); /* FCS 8 bytes, single segment */
    bu64(out, declared);
  }
  size_t at = 0;
  do {
    size_t k = n - at < 131072 ? n - at : 131072;
    uint32_t h = (uint32_t)(k << 3) | (at + k == n); /* raw block; last? */
    uint8_t hb[3] = {(uint8_t)h, (uint8_t)(h >> 8), (uint8_t)(h >> 16)};
    bput(out, hb, 3);
    bput(out, p + at, k);
    at += k;
  } while (at < n);
}

/* Streams of one chunk, before compression. */
typedef struct {
  buf pos, planes;
  uint32_t count;
} streams;

static void make_streams(streams *s, const uint8_t *base, const uint8_t *tgt, size_t n,
                         unsigned e, int enc) {
  memset(s, 0, sizeof *s);
  int sparse = !(enc & 1);
  int xor = enc == XOR_DENSE || enc == XOR_SPARSE;
  int delta = enc == DELTA_DENSE || enc == DELTA_SPARSE;
  buf vals = {0}, gaps = {0};
  uint64_t next = 0;
  for (size_t i = 0; i < n; i++) {
    int diff = memcmp(base + i * e, tgt + i * e, e) != 0;
    s->count += (uint32_t)diff;
    if (sparse && !diff) continue;
    if (sparse) {
      uint64_t g = i - next;
      bput(&gaps, &g, sizeof g);
      next = i + 1;
    }
    uint8_t v[8];
    if (delta) delta_value(base + i * e, tgt + i * e, e, v);
    for (unsigned b = 0; b < e; b++)
      bu8(&vals, delta ? v[b] : xor ? base[i * e + b] ^ tgt[i * e + b] : tgt[i * e + b]);
  }
  if (sparse) {
    const uint64_t *g = (const uint64_t *)(const void *)gaps.p;
    size_t gc = gaps.n / sizeof *g;
    rice(&s->pos, rice_k(g, gc), g, gc);
  }
  size_t k = vals.n / e;
  for (unsigned b = 0; b < e; b++)
    for (size_t i = 0; i < k; i++) bu8(&s->planes, vals.p[i * e + b]);
  bfree(&vals);
  bfree(&gaps);
}

static void join_streams(buf *out, streams *s, int comp) {
  out->n = 0;
  if (comp) {
    if (s->pos.n) zframe(out, s->pos.p, s->pos.n);
    zframe(out, s->planes.p, s->planes.n);
  } else {
    bput(out, s->pos.p, s->pos.n);
    bput(out, s->planes.p, s->planes.n);
  }
  bfree(&s->pos);
  bfree(&s->planes);
}

/* ------------------------------------------------------------------------ */
/* Bundles (SPEC.md §4, §5, §8)                                              */

#define T4(s)                                                                   \
  ((uint32_t)(uint8_t)(s)[0] | (uint32_t)(uint8_t)(s)[1] << 8 |                \
   (uint32_t)(uint8_t)(s)[2] << 16 | (uint32_t)(uint8_t)(s)[3] << 24)

typedef struct {
  uint32_t type;
  uint16_t flags;
  uint8_t comp, resv;
  buf pl;
  int len_set;
  uint64_t len_field;
  int bad_pcheck, bad_hcheck;
  int pad_set;
  uint8_t pad;
  uint64_t off;
} section;

#define MAXS 64
typedef struct {
  unsigned major, minor;
  uint32_t hflags;
  uint8_t hresv[40];
  int bad_hcheck;
  size_t n;
  section s[MAXS];
  manifest man;
  int mani_comp;
  int auto_index, auto_foot;
} bundle;

typedef struct {
  uint8_t enc, comp;
} choice;
typedef choice (*policy_fn)(void *ctx, size_t entry, uint32_t chunk, size_t n, uint32_t count);

static choice pol_default(void *ctx, size_t entry, uint32_t chunk, size_t n, uint32_t count) {
  (void)ctx, (void)entry, (void)chunk;
  return (choice){(uint8_t)(4 * (size_t)count <= n ? XOR_SPARSE : XOR_DENSE), 0};
}
static choice pol_fixed(void *ctx, size_t entry, uint32_t chunk, size_t n, uint32_t count) {
  (void)entry, (void)chunk, (void)n, (void)count;
  return *(const choice *)ctx;
}
/* Cycles through every (encoding, compression) pair, chunk after chunk. */
static choice pol_cycle(void *ctx, size_t entry, uint32_t chunk, size_t n, uint32_t count) {
  (void)entry, (void)chunk, (void)n, (void)count;
  unsigned *k = ctx;
  choice c = {(uint8_t)(1 + *k % 4), (uint8_t)(*k / 4 % 2)};
  ++*k;
  return c;
}

static section *sec_insert(bundle *B, size_t at, const char *type, uint16_t flags, uint8_t comp,
                           const void *p, size_t n) {
  if (B->n == MAXS || at > B->n) die("section table");
  memmove(B->s + at + 1, B->s + at, (B->n - at) * sizeof *B->s);
  B->n++;
  section *s = &B->s[at];
  memset(s, 0, sizeof *s);
  s->type = T4(type);
  s->flags = flags;
  s->comp = comp;
  bput(&s->pl, p, n);
  return s;
}

static void sec_remove(bundle *B, size_t at) {
  bfree(&B->s[at].pl);
  memmove(B->s + at, B->s + at + 1, (B->n - at - 1) * sizeof *B->s);
  B->n--;
}

/* Index of the nth (from 0) section of a type. */
static size_t sec_find(const bundle *B, const char *type, unsigned nth) {
  for (size_t i = 0; i < B->n; i++)
    if (B->s[i].type == T4(type) && !nth--) return i;
  die("no section %s", type);
}
static section *sec(bundle *B, const char *type, unsigned nth) {
  return &B->s[sec_find(B, type, nth)];
}

static void rebuild_mani(bundle *B) {
  section *s = sec(B, "MANI", 0);
  buf m = {0};
  manifest_bytes(&B->man, &m);
  s->pl.n = 0;
  s->comp = (uint8_t)B->mani_comp;
  if (B->mani_comp) zframe(&s->pl, m.p, m.n);
  else bput(&s->pl, m.p, m.n);
  bfree(&m);
}

static void rebuild_iden(bundle *B) { iden_bytes(&B->man, &sec(B, "IDEN", 0)->pl); }

static void layout(bundle *B) {
  uint64_t off = 64;
  for (size_t i = 0; i < B->n; i++) {
    B->s[i].off = off;
    off += (32 + B->s[i].pl.n + 63) / 64 * 64;
  }
}

/* INDX from the CHNK sections in file order (SPEC.md §8.3). */
static void fix_index(bundle *B) {
  layout(B);
  buf x = {0};
  for (size_t i = 0; i < B->n; i++) {
    const section *s = &B->s[i];
    if (s->type != T4("CHNK") || s->pl.n < 32) continue;
    const uint8_t *r = s->pl.p;
    bu64(&x, s->off);
    bput(&x, r, 8);       /* tensor, chunk */
    bput(&x, r + 8, 2);   /* encoding, compression */
    bu16(&x, 0);
    bput(&x, r + 12, 4);  /* count */
    bu64(&x, s->pl.n);
  }
  for (size_t i = 0; i < B->n; i++)
    if (B->s[i].type == T4("INDX")) bset(&B->s[i].pl, x.p, x.n);
  bfree(&x);
}

static void fix_foot(bundle *B) {
  layout(B);
  uint64_t iden = 0, indx = 0, chunks = 0;
  for (size_t i = 0; i < B->n; i++) {
    if (B->s[i].type == T4("IDEN") && !iden) iden = B->s[i].off;
    if (B->s[i].type == T4("INDX") && !indx) indx = B->s[i].off;
    chunks += B->s[i].type == T4("CHNK");
  }
  for (size_t i = 0; i < B->n; i++)
    if (B->s[i].type == T4("FOOT")) {
      buf f = {0};
      bu64(&f, 64);
      bu64(&f, iden);
      bu64(&f, indx);
      bu64(&f, chunks);
      bset(&B->s[i].pl, f.p, f.n);
      bfree(&f);
    }
}

static void serialize(bundle *B, buf *out) {
  if (B->auto_index) fix_index(B);
  if (B->auto_foot) fix_foot(B);
  layout(B);
  out->n = 0;
  uint8_t h[64] = {0x89, 'D', 'C', 'R', '\r', '\n', 0x1A, '\n'};
  put16(h + 8, B->major);
  put16(h + 10, B->minor);
  put32(h + 12, B->hflags);
  memcpy(h + 16, B->hresv, 40);
  put64(h + 56, xxh64(h, 56) ^ (uint64_t)B->bad_hcheck);
  bput(out, h, 64);
  for (size_t i = 0; i < B->n; i++) {
    section *s = &B->s[i];
    uint8_t sh[32];
    put32(sh, s->type);
    put16(sh + 4, s->flags);
    sh[6] = s->comp;
    sh[7] = s->resv;
    put64(sh + 8, s->len_set ? s->len_field : s->pl.n);
    put64(sh + 16, xxh64(s->pl.p, s->pl.n) ^ (uint64_t)s->bad_pcheck);
    put64(sh + 24, xxh64(sh, 24) ^ (uint64_t)s->bad_hcheck);
    bput(out, sh, 32);
    bput(out, s->pl.p, s->pl.n);
    size_t pad = (size_t)((64 - out->n % 64) % 64);
    if (pad && s->pad_set) {
      bu8(out, s->pad);
      pad--;
    }
    bfill(out, 0, pad);
  }
}

/* Adds one CHNK section for chunk c of entry i (base and target bytes given). */
static void add_chunk(bundle *B, size_t at, uint32_t i, uint32_t c, const uint8_t *base,
                      const uint8_t *tgt, size_t bytes, unsigned e, choice ch) {
  streams s;
  make_streams(&s, base, tgt, bytes / e, e, ch.enc);
  uint8_t rec[32] = {0};
  put32(rec, i);
  put32(rec + 4, c);
  rec[8] = ch.enc;
  rec[9] = ch.comp;
  put32(rec + 12, s.count);
  put64(rec + 16, chunk_check(base, bytes));
  put64(rec + 24, chunk_check(tgt, bytes));
  buf data = {0};
  join_streams(&data, &s, ch.comp);
  section *sc = sec_insert(B, at, "CHNK", 1, 0, rec, 32);
  bput(&sc->pl, data.p, data.n);
  bfree(&data);
}

/* A bundle from base to target, chunks encoded as `pol` says. */
static void build(bundle *B, const ckpt *base, const ckpt *tgt, uint32_t chunk_size,
                  policy_fn pol, void *ctx) {
  memset(B, 0, sizeof *B);
  B->major = 1;
  B->auto_index = B->auto_foot = 1;
  manifest *m = &B->man;
  m->chunk_size = chunk_size;
  m->kind = (uint8_t)tgt->kind;
  bput(&m->prefix, tgt->prefix.p, tgt->prefix.n);
  m->dlen = tgt->bytes.n - tgt->prefix.n;
  size_t i = 0, j = 0;
  while (i < base->n || j < tgt->n) {
    const tensor *x = i < base->n ? &base->t[i] : NULL, *y = j < tgt->n ? &tgt->t[j] : NULL;
    int c = !x ? 1 : !y ? -1 : name_cmp(x->name, x->nlen, y->name, y->nlen);
    if (m->n == MAXE) die("too many entries");
    mentry *en = &m->e[m->n++];
    const tensor *named = c <= 0 ? x : y;
    en->name = xmalloc(named->nlen);
    memcpy(en->name, named->name, named->nlen);
    en->nlen = named->nlen;
    if (c <= 0) en->presence |= 1, desc_from(&en->b, x), en->bt = x, i++;
    if (c >= 0) en->presence |= 2, desc_from(&en->t, y), en->tt = y, j++;
  }
  sec_insert(B, 0, "MANI", 1, 0, NULL, 0);
  rebuild_mani(B);
  for (size_t k = 0; k < m->n; k++) {
    mentry *en = &m->e[k];
    if (!(en->presence & 2)) continue;
    unsigned e = dt_size[en->t.dtype];
    uint8_t *zeros = xmalloc((size_t)(en->t.len < chunk_size ? en->t.len : chunk_size));
    for (uint64_t at = 0, c = 0; at < en->t.len; at += chunk_size, c++) {
      size_t bytes = (size_t)(en->t.len - at < chunk_size ? en->t.len - at : chunk_size);
      const uint8_t *bb = delta_coded(en) ? en->bt->data + at : zeros;
      const uint8_t *tb = en->tt->data + at;
      if (!memcmp(bb, tb, bytes)) continue;
      uint32_t count = 0;
      for (size_t q = 0; q < bytes / e; q++) count += memcmp(bb + q * e, tb + q * e, e) != 0;
      choice ch = pol(ctx, k, (uint32_t)c, bytes / e, count);
      add_chunk(B, B->n, (uint32_t)k, (uint32_t)c, bb, tb, bytes, e, ch);
    }
    free(zeros);
  }
  sec_insert(B, B->n, "IDEN", 1, 0, NULL, 0);
  rebuild_iden(B);
  sec_insert(B, B->n, "INDX", 1, 0, NULL, 0);
  uint8_t foot[32] = {0};
  sec_insert(B, B->n, "FOOT", 1, 0, foot, 32);
}

static void bundle_free(bundle *B) {
  for (size_t i = 0; i < B->n; i++) bfree(&B->s[i].pl);
  for (size_t i = 0; i < B->man.n; i++) free(B->man.e[i].name);
  bfree(&B->man.prefix);
  memset(B, 0, sizeof *B);
}

static void bundle_copy(bundle *dst, const bundle *src) {
  *dst = *src;
  for (size_t i = 0; i < src->n; i++) dst->s[i].pl = bdup(&src->s[i].pl);
  for (size_t i = 0; i < src->man.n; i++) {
    dst->man.e[i].name = xmalloc(src->man.e[i].nlen);
    memcpy(dst->man.e[i].name, src->man.e[i].name, src->man.e[i].nlen);
  }
  dst->man.prefix = bdup(&src->man.prefix);
}

/* Metadata payload (SPEC.md §6.4) from "k", "v", ..., NULL. */
static void meta_bytes(buf *b, const char *const *kv) {
  size_t n = 0;
  while (kv[2 * n]) n++;
  b->n = 0;
  bu32(b, n);
  for (size_t i = 0; i < n; i++) {
    bu16(b, strlen(kv[2 * i]));
    bput(b, kv[2 * i], strlen(kv[2 * i]));
    bu32(b, strlen(kv[2 * i + 1]));
    bput(b, kv[2 * i + 1], strlen(kv[2 * i + 1]));
  }
}

static section *add_meta(bundle *B, const char *const *kv, int comp) {
  buf m = {0}, z = {0};
  meta_bytes(&m, kv);
  if (comp) zframe(&z, m.p, m.n);
  section *s = sec_insert(B, 1, "META", 0, (uint8_t)comp, comp ? z.p : m.p, comp ? z.n : m.n);
  bfree(&m);
  bfree(&z);
  return s;
}

/* The CHNK section carrying (tensor entry, chunk). */
static section *chunk_sec(bundle *B, uint32_t entry, uint32_t chunk) {
  for (size_t i = 0; i < B->n; i++)
    if (B->s[i].type == T4("CHNK") && get32(B->s[i].pl.p) == entry &&
        get32(B->s[i].pl.p + 4) == chunk)
      return &B->s[i];
  die("no chunk %u/%u", entry, chunk);
}

/* Replaces a chunk's encoded data and record fields; the checks stay. */
static void set_chunk(section *s, int enc, int comp, uint32_t count, const buf *data) {
  s->pl.p[8] = (uint8_t)enc;
  s->pl.p[9] = (uint8_t)comp;
  put32(s->pl.p + 12, count);
  s->pl.n = 32;
  bput(&s->pl, data->p, data->n);
}

static size_t entry_index(const bundle *B, const char *name) {
  for (size_t i = 0; i < B->man.n; i++)
    if (B->man.e[i].nlen == strlen(name) && !memcmp(B->man.e[i].name, name, B->man.e[i].nlen))
      return i;
  die("no entry %s", name);
}

/* ------------------------------------------------------------------------ */
/* The index and the files                                                   */

static const char *out_root;
static json_t *vectors;
static int counts[3];

static void mkdirs(const char *path) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char *p = tmp + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      if (mkdir(tmp, 0777) && errno != EEXIST) die("mkdir %s: %s", tmp, strerror(errno));
      *p = '/';
    }
}

static void write_file(const char *rel, const void *p, size_t n, char sha[65]) {
  char path[4096];
  snprintf(path, sizeof path, "%s/v1/%s", out_root, rel);
  mkdirs(path);
  FILE *f = fopen(path, "wb");
  if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f)) die("cannot write %s", path);
  sha256_hex(p, n, sha);
}

static json_t *file_ref(const char *rel, const char *sha) {
  return json_pack("{s:s, s:s}", "path", rel, "sha256", sha);
}

static json_t *ck_ref(ckpt *c) {
  if (!c->written) {
    write_file(c->file, c->bytes.p, c->bytes.n, c->sha);
    c->written = 1;
  }
  return file_ref(c->file, c->sha);
}

static json_t *csv(const char *s) {
  json_t *a = json_array();
  while (s && *s) {
    const char *e = strchr(s, ',');
    size_t n = e ? (size_t)(e - s) : strlen(s);
    json_array_append_new(a, json_stringn(s, n));
    s = e ? e + 1 : s + n;
  }
  return a;
}

static const struct {
  const char *name, *kind, *text;
} flag_table[] = {
    {"encoding", "basic", "exercises a chunk encoding (SPEC.md §9.1)"},
    {"compression", "basic", "zstd-compressed streams or sections (§4.4, §9.3)"},
    {"dtype", "basic", "tensors of every dtype (§3)"},
    {"tensor-set", "basic", "tensors added, removed, reshaped or recoded (§6.2)"},
    {"metadata", "basic", "META section or safetensors __metadata__ (§6.4)"},
    {"ancillary", "basic", "ancillary sections a reader must skip (§4.3)"},
    {"raw", "basic", "a raw (non-safetensors) checkpoint (§2)"},
    {"zero-length", "edge-case", "scalars, zero-length tensors or no tensors at all"},
    {"change-rate", "edge-case", "0% or 100% of the elements changed"},
    {"chunk-geometry", "edge-case",
     "unusual chunk sizes, a last chunk shorter than the others, positions at chunk edges"},
    {"limit-edge", "edge-case", "a value exactly at a limit of §11 (accepted)"},
    {"version", "edge-case", "format version fields (§4.1, §12)"},
    {"handmade-zstd", "edge-case", "zstd frames written by hand (raw blocks), not by libzstd"},
    {"layout", "edge-case", "base and target lay their data regions out differently"},
    {"structure-only", "edge-case",
     "no checkpoints ship: only the checks that need no base apply (the target is too large)"},
    {"shape-overflow", "known-bug-class",
     "a shape whose element count overflows 64 bits or wraps to 0"},
    {"byte-length", "known-bug-class", "a byte length that is not shape x dtype size"},
    {"offsets", "known-bug-class",
     "tensor offsets out of range, overlapping, unsorted or leaving gaps"},
    {"duplicate-name", "known-bug-class", "a tensor name that appears twice"},
    {"unknown-dtype", "known-bug-class", "a dtype code or name that does not exist"},
    {"size-as-allocation", "known-bug-class",
     "a declared size or count far beyond the bytes present (must not be allocated)"},
    {"decompressed-size", "known-bug-class",
     "a zstd frame that gives more or fewer bytes than declared, or declares none"},
    {"positions", "known-bug-class", "sparse positions out of range, wrapping or badly encoded"},
    {"truncation", "known-bug-class", "the bundle cut at or inside a structure"},
    {"bit-flip", "known-bug-class", "one flipped bit, caught by the checksum that covers it"},
    {"wrong-base", "known-bug-class",
     "a bundle applied to a base it was not made for (state id or chunk base hash)"},
    {"reserved", "malformed-field", "a reserved field, bit or padding byte set"},
    {"unknown-critical", "malformed-field", "a critical section of unknown type"},
    {"malformed-field", "malformed-field", "a field with a value the format forbids"},
    {"name", "malformed-field", "a tensor name that is empty, too long, not UTF-8 or unsorted"},
    {"limit", "malformed-field", "a declared value above a limit of §11"},
    {"order", "malformed-field", "sections missing, repeated or out of order"},
    {"index", "malformed-field", "chunk records or index records that disagree or are out of range"},
    {"footer", "malformed-field", "a footer that is misplaced or disagrees with the sections"},
    {"checkpoint", "malformed-field", "a safetensors header (carried or in the base) that is invalid"},
    {"target-mismatch", "malformed-field", "a bundle whose chunks or hashes do not give its target"},
    {"multiple-errors", "malformed-field",
     "more than one bad chunk: a validator that reports all finds every one (all_errors)"},
};
#define NFLAGS (sizeof flag_table / sizeof flag_table[0])
static int flag_used[NFLAGS];

static void check_flags(const char *flags) {
  json_t *a = csv(flags);
  size_t i;
  json_t *f;
  json_array_foreach(a, i, f) {
    size_t k = 0;
    while (k < NFLAGS && strcmp(flag_table[k].name, json_string_value(f))) k++;
    if (k == NFLAGS) die("undeclared flag %s", json_string_value(f));
    flag_used[k] = 1;
  }
  json_decref(a);
}

typedef struct {
  const char *id, *result, *error, *stage, *flags, *covers, *text, *all_errors;
} vec;

/* Writes a vector's bundle (and checkpoints) and appends it to the index. */
static void emit(const vec *v, const buf *bundle_bytes, ckpt *base, ckpt *target) {
  char rel[512], sha[65];
  snprintf(rel, sizeof rel, "%s.dcr", v->id);
  write_file(rel, bundle_bytes->p, bundle_bytes->n, sha);
  check_flags(v->flags);
  json_t *files = json_pack("{s:o}", "bundle", file_ref(rel, sha));
  if (base) json_object_set_new(files, "base", ck_ref(base));
  if (target) json_object_set_new(files, "target", ck_ref(target));
  json_t *o = json_pack("{s:s, s:s, s:s}", "id", v->id, "description", v->text, "result",
                        v->result);
  json_object_set_new(o, "error", v->error ? json_string(v->error) : json_null());
  json_object_set_new(o, "stage", v->stage ? json_string(v->stage) : json_null());
  if (v->all_errors) json_object_set_new(o, "all_errors", csv(v->all_errors));
  json_object_set_new(o, "flags", csv(v->flags));
  json_object_set_new(o, "covers", csv(v->covers));
  json_object_set_new(o, "files", files);
  json_array_append_new(vectors, o);
  counts[!strcmp(v->result, "valid") ? 0 : !strcmp(v->result, "invalid") ? 1 : 2]++;
  if (strncmp(v->id, v->result, strlen(v->result)) || v->id[strlen(v->result)] != '/')
    die("%s: id must start with its result", v->id);
  if (!strcmp(v->result, "valid") != !v->error) die("%s: error iff not valid", v->id);
}

static void emit_bundle(const vec *v, bundle *B, ckpt *base, ckpt *target) {
  buf out = {0};
  serialize(B, &out);
  emit(v, &out, base, target);
  bfree(&out);
}

/* An invalid vector: a copy of `model` changed by the caller, then written. */
#define INVALID(...) (&(vec){.result = "invalid", __VA_ARGS__})
#define VALID(...) (&(vec){.result = "valid", __VA_ARGS__})
#define ACCEPTABLE(...) (&(vec){.result = "acceptable", __VA_ARGS__})

/* ------------------------------------------------------------------------ */
/* Checkpoint pairs                                                          */

static void dims1(uint64_t *d, uint64_t a) { d[0] = a; }

/* "enc": one BF16 tensor of 6194 elements = 3 full 4 KiB chunks and a 100-byte
 * last chunk: few changes, many changes, none, and changes at both chunk edges. */
static void pair_enc(ckpt *b, ckpt *t) {
  uint64_t d[1] = {6194};
  b->file = "ckpt/enc-base.safetensors";
  b->kind = KIND_ST;
  fill_random(ck_add(b, "w", BF16, 1, d));
  ck_finish(b);
  ck_clone(t, b, "ckpt/enc-target.safetensors");
  tensor *w = ck_get(t, "w");
  uint8_t *p = w->data;
  for (int k = 0; k < 40; k++) p[(rng() % 2048) * 2] ^= rnonzero();       /* chunk 0: sparse */
  for (size_t k = 0; k < 2048; k++)
    if (rng() % 10 < 7) p[4096 + k * 2 + 1] ^= rnonzero();               /* chunk 1: dense */
  p[12288] ^= 0x80;                                                       /* chunk 3: first */
  p[12388 - 1] ^= 0x01;                                                   /* and last element */
  p[12300] ^= 0x10;
  ck_finish(t);
}

static void pair_dtypes(ckpt *b, ckpt *t) {
  b->file = "ckpt/dtypes-base.safetensors";
  b->kind = KIND_ST;
  for (int dt = 1; dt <= 15; dt++) {
    char name[32];
    uint64_t d[2] = {8, 9};
    snprintf(name, sizeof name, "t%02d.%s", dt, dt_name[dt]);
    tensor *x = ck_add(b, name, dt, 2, d);
    fill_random(x);
  }
  /* F32: +0 in the base becomes -0; a NaN changes payload (bits, not values). */
  tensor *f = ck_get(b, "t12.F32");
  put32(f->data, 0x00000000);
  put32(f->data + 4, 0x7FC00001);
  ck_finish(b);
  ck_clone(t, b, "ckpt/dtypes-target.safetensors");
  for (size_t i = 0; i < t->n; i++) mutate(&t->t[i], 2500);
  f = ck_get(t, "t12.F32");
  put32(f->data, 0x80000000);
  put32(f->data + 4, 0x7FC00002);
  ck_finish(t);
}

static void pair_tensors(ckpt *b, ckpt *t) {
  uint64_t d[2];
  b->file = "ckpt/tensors-base.safetensors";
  t->file = "ckpt/tensors-target.safetensors";
  b->kind = t->kind = KIND_ST;
  dims1(d, 32);
  tensor *keep = ck_add(b, "a.keep", F32, 1, d);
  fill_random(keep);
  dims1(d, 16);
  fill_random(ck_add(b, "b.removed", F16, 1, d));
  d[0] = 8, d[1] = 160;
  tensor *rs = ck_add(b, "c.reshaped", BF16, 2, d);
  fill_random(rs);
  dims1(d, 10);
  fill_random(ck_add(b, "d.recoded", F32, 1, d));
  dims1(d, 10);
  fill_random(ck_add(b, "e.resized", I32, 1, d));
  ck_finish(b);
  dims1(d, 32);
  memcpy(ck_add(t, "a.keep", F32, 1, d)->data, keep->data, 128);
  d[0] = 160, d[1] = 8;
  tensor *rt = ck_add(t, "c.reshaped", BF16, 2, d);
  memcpy(rt->data, rs->data, (size_t)rs->len);
  mutate(rt, 100);
  dims1(d, 10);
  fill_random(ck_add(t, "d.recoded", F16, 1, d));
  dims1(d, 12);
  tensor *er = ck_add(t, "e.resized", I32, 1, d);
  memcpy(er->data, ck_get(b, "e.resized")->data, 40);
  fill_random(ck_add(t, "f.added", U8, 1, (dims1(d, 300), d)));
  ck_finish(t);
}

static void pair_empty(ckpt *b, ckpt *t) {
  uint64_t d[3];
  b->file = "ckpt/empty-base.safetensors";
  b->kind = KIND_ST;
  fill_random(ck_add(b, "scalar.changed", F32, 0, d));
  fill_random(ck_add(b, "scalar.same", I64, 0, d));
  dims1(d, 0);
  ck_add(b, "zero.1d", F32, 1, d);
  d[0] = 3, d[1] = 0, d[2] = 5;
  ck_add(b, "zero.3d", BF16, 3, d);
  dims1(d, 0);
  ck_add(b, "zero.removed", U8, 1, d);
  dims1(d, 24);
  fill_random(ck_add(b, "dense", F16, 1, d));
  ck_finish(b);
  ck_clone(t, b, "ckpt/empty-target.safetensors");
  mutate(ck_get(t, "scalar.changed"), 10000);
  mutate(ck_get(t, "dense"), 3000);
  ck_remove(t, "zero.removed");
  d[0] = 0, d[1] = 7;
  ck_add(t, "zero.added", I32, 2, d);
  ck_finish(t);
}

static void pair_none(ckpt *b, ckpt *t) {
  b->file = "ckpt/none-base.safetensors";
  b->kind = KIND_ST;
  ck_finish(b);
  ck_clone(t, b, "ckpt/none-target.safetensors");
  ck_finish(t);
}

static void pair_full(ckpt *b, ckpt *t) {
  uint64_t d[1] = {2500};
  b->file = "ckpt/full-base.safetensors";
  b->kind = KIND_ST;
  fill_random(ck_add(b, "all", F32, 1, d));
  ck_finish(b);
  ck_clone(t, b, "ckpt/full-target.safetensors");
  mutate(ck_get(t, "all"), 10000);
  ck_finish(t);
}

/* chunk size 32 KiB: U8 tensor of 40000 bytes = a full chunk and a 7232-byte one;
 * positions with gaps of 0, long gaps and at both chunk edges. */
static void pair_positions(ckpt *b, ckpt *t) {
  uint64_t d[1] = {40000};
  b->file = "ckpt/positions-base.safetensors";
  b->kind = KIND_ST;
  fill_random(ck_add(b, "bytes", U8, 1, d));
  ck_finish(b);
  ck_clone(t, b, "ckpt/positions-target.safetensors");
  uint8_t *p = ck_get(t, "bytes")->data;
  static const unsigned at[] = {0, 1, 2, 20000, 32767, 32768, 32769, 39999};
  for (size_t k = 0; k < sizeof at / sizeof *at; k++) p[at[k]] ^= rnonzero();
  ck_finish(t);
}

static void pair_raw(ckpt *b, ckpt *t) {
  uint64_t d[1] = {10000};
  b->file = "ckpt/raw-base.bin";
  b->kind = KIND_RAW;
  fill_random(ck_add(b, "raw", U8, 1, d));
  ck_finish(b);
  ck_clone(t, b, "ckpt/raw-target.bin");
  mutate(ck_get(t, "raw"), 20);
  ck_finish(t);
}

/* Names that sort differently bytewise and by code point or locale, JSON escapes,
 * a name of exactly max_name_length bytes, a rank of exactly max_rank, and
 * __metadata__ in the header. */
static void pair_names(ckpt *b, ckpt *t) {
  uint64_t d[16];
  b->file = "ckpt/names-base.safetensors";
  b->kind = KIND_ST;
  b->meta = "{\"format\":\"pt\",\"note\":\"caf\xc3\xa9 \\\"quoted\\\"\"}";
  static const char *const names[] = {"B", "a", "a.b", "a\"q\\b", "\xc3\xa9t\xc3\xa9",
                                      "\xe2\x82\xac", "\xf0\x9f\x98\x80", "z z", "\x7f"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    fill_random(ck_add(b, names[i], I8, 1, (dims1(d, 5 + i), d)));
  char *longname = xmalloc(4097);
  memset(longname, 'n', 4096);
  fill_random(ck_add(b, longname, U16, 1, (dims1(d, 3), d)));
  free(longname);
  for (int i = 0; i < 16; i++) d[i] = i == 3 ? 3 : i == 9 ? 2 : 1;
  fill_random(ck_add(b, "rank16", F16, 16, d));
  ck_finish(b);
  ck_clone(t, b, "ckpt/names-target.safetensors");
  for (size_t i = 0; i < t->n; i++) mutate(&t->t[i], 3000);
  ck_finish(t);
}

/* Base in name order, target in reverse order with extra header padding. */
static void pair_layout(ckpt *b, ckpt *t) {
  uint64_t d[1];
  b->file = "ckpt/layout-base.safetensors";
  b->kind = KIND_ST;
  for (int i = 0; i < 4; i++) {
    char name[16];
    snprintf(name, sizeof name, "l%d", i);
    fill_random(ck_add(b, name, I16, 1, (dims1(d, 100u + 37u * (unsigned)i), d)));
  }
  ck_finish(b);
  ck_clone(t, b, "ckpt/layout-target.safetensors");
  t->reverse = 1;
  t->extra_pad = 13;
  for (size_t i = 0; i < t->n; i += 2) mutate(&t->t[i], 500);
  ck_finish(t);
}

/* The model pair most invalid vectors are made from. */
static void pair_model(ckpt *b, ckpt *t) {
  uint64_t d[1];
  b->file = "ckpt/model-base.safetensors";
  b->kind = KIND_ST;
  fill_random(ck_add(b, "a", BF16, 1, (dims1(d, 4096), d)));
  fill_random(ck_add(b, "b", F32, 1, (dims1(d, 100), d)));
  fill_random(ck_add(b, "c", U8, 1, (dims1(d, 64), d)));
  fill_random(ck_add(b, "e", F32, 1, (dims1(d, 1024), d)));
  ck_finish(b);
  ck_clone(t, b, "ckpt/model-target.safetensors");
  ck_remove(t, "c");
  fill_random(ck_add(t, "d", I16, 1, (dims1(d, 50), d)));
  tensor *a = ck_get(t, "a");
  for (int k = 0; k < 30; k++) a->data[(rng() % 2048) * 2 + 1] ^= rnonzero();
  for (size_t k = 2048; k < 4096; k++)
    if (rng() % 2) a->data[k * 2] ^= rnonzero();
  tensor *bb = ck_get(t, "b");
  for (int k = 0; k < 100; k += 9) bb->data[k * 4 + 3] ^= 0x40;
  ck_finish(t);
}

/* Chunk choices of the model bundle: one of each encoding, zstd on two. */
static choice pol_model(void *ctx, size_t entry, uint32_t chunk, size_t n, uint32_t count) {
  (void)ctx, (void)n, (void)count;
  if (entry == 0) return chunk ? (choice){XOR_DENSE, 1} : (choice){XOR_SPARSE, 0};
  if (entry == 1) return (choice){OVERWRITE_SPARSE, 0};
  return (choice){OVERWRITE_DENSE, 1};
}

/* ------------------------------------------------------------------------ */
/* Valid vectors                                                             */

static void valid_vectors(void) {
  static ckpt eb, et, db, dt, tb, tt, mb, mt, nb, nt, fb, ft, pb, pt, rb, rt, ab, at, lb, lt;
  bundle B;
  char id[128], text[256];

  pair_enc(&eb, &et);
  for (int comp = 0; comp < 2; comp++)
    for (int enc = 1; enc <= ENC_LAST; enc++) {
      choice ch = {(uint8_t)enc, (uint8_t)comp};
      build(&B, &eb, &et, 4096, pol_fixed, &ch);
      snprintf(id, sizeof id, "valid/encoding-%s-%s", enc_name[enc], comp ? "zstd" : "stored");
      snprintf(text, sizeof text, "every changed chunk %s, %s; 4 chunks of BF16, the last "
               "100 bytes; one chunk unchanged", enc_name[enc],
               comp ? "each stream one zstd frame" : "streams stored");
      emit_bundle(VALID(.id = id, .text = text, .flags = comp ? "encoding,compression,chunk-geometry"
                                                                : "encoding,chunk-geometry",
                        .covers = comp ? "§9.1,§9.3,R-ENC-1,R-CMP-3,R-APL-2" : "§9.1,R-ENC-1,R-APL-2"),
                  &B, &eb, &et);
      bundle_free(&B);
    }
  unsigned k = 0;
  build(&B, &eb, &et, 4096, pol_cycle, &k);
  B.mani_comp = 1;
  rebuild_mani(&B);
  emit_bundle(VALID(.id = "valid/encoding-mixed", .flags = "encoding,compression",
                    .text = "a different encoding and compression per chunk; MANI stored as zstd",
                    .covers = "§9.1,§9.3,§4.4,R-CMP-1"),
              &B, &eb, &et);
  bundle_free(&B);

  pair_dtypes(&db, &dt);
  choice sparse = {XOR_SPARSE, 0}, dense = {OVERWRITE_DENSE, 1};
  build(&B, &db, &dt, 4096, pol_fixed, &sparse);
  emit_bundle(VALID(.id = "valid/dtypes-xor-sparse", .flags = "dtype,encoding",
                    .text = "every dtype of §3 (element sizes 1, 2, 4, 8), XOR_SPARSE; an F32 +0 "
                            "becomes -0 and a NaN changes payload",
                    .covers = "§3,R-DT-1,§9.1"),
              &B, &db, &dt);
  bundle_free(&B);
  build(&B, &db, &dt, 4096, pol_fixed, &dense);
  emit_bundle(VALID(.id = "valid/dtypes-overwrite-dense-zstd", .flags = "dtype,encoding,compression",
                    .text = "every dtype of §3, OVERWRITE_DENSE with zstd",
                    .covers = "§3,R-DT-1,§9.1,§9.3"),
              &B, &db, &dt);
  bundle_free(&B);

  pair_tensors(&tb, &tt);
  build(&B, &tb, &tt, 4096, pol_default, NULL);
  emit_bundle(VALID(.id = "valid/tensors-added-removed-reshaped", .flags = "tensor-set",
                    .text = "a tensor unchanged, removed, reshaped (delta-coded, same bytes), "
                            "recoded (dtype change), resized, added (zero base)",
                    .covers = "§6.2,§6.3,§8.1,R-APL-1"),
              &B, &tb, &tt);
  bundle_free(&B);

  pair_empty(&mb, &mt);
  build(&B, &mb, &mt, 4096, pol_default, NULL);
  emit_bundle(VALID(.id = "valid/zero-length-tensors", .flags = "zero-length",
                    .text = "scalars (shape []), shapes [0] and [3,0,5] sharing offsets, a "
                            "zero-length tensor removed and one added",
                    .covers = "R-ST-4,R-ST-6,§8.1,R-MAN-5,R-MAN-6"),
              &B, &mb, &mt);
  bundle_free(&B);

  pair_none(&nb, &nt);
  build(&B, &nb, &nt, 4096, pol_default, NULL);
  emit_bundle(VALID(.id = "valid/no-tensors", .flags = "zero-length",
                    .text = "two checkpoints with no tensors: no entries, no chunks",
                    .covers = "§6.1,§4"),
              &B, &nb, &nt);
  bundle_free(&B);

  build(&B, &eb, &eb, 4096, pol_default, NULL);
  emit_bundle(VALID(.id = "valid/change-none", .flags = "change-rate",
                    .text = "0% changed: base and target identical, no CHNK sections",
                    .covers = "§8.1,§10"),
              &B, &eb, &eb);
  bundle_free(&B);

  pair_full(&fb, &ft);
  build(&B, &fb, &ft, 4096, pol_default, NULL);
  emit_bundle(VALID(.id = "valid/change-all", .flags = "change-rate,chunk-geometry",
                    .text = "100% of the elements changed (count = n in every chunk)",
                    .covers = "§9.2,R-ENC-2"),
              &B, &fb, &ft);
  bundle_free(&B);

  pair_positions(&pb, &pt);
  unsigned pk = 1; /* XOR_SPARSE stored, then OVERWRITE_SPARSE... */
  build(&B, &pb, &pt, 32768, pol_cycle, &pk);
  emit_bundle(VALID(.id = "valid/chunk-size-32k-positions", .flags = "chunk-geometry,encoding",
                    .text = "chunk size 32 KiB, last chunk 7232 bytes; sparse positions 0, 1, 2 "
                            "(gaps of 0), a gap of 19997, the first and last element of a chunk",
                    .covers = "§8.1,§9.1,R-POS-1,R-MAN-3"),
              &B, &pb, &pt);
  bundle_free(&B);

  build(&B, &eb, &et, 1u << 30, pol_default, NULL);
  emit_bundle(VALID(.id = "valid/chunk-size-max", .flags = "chunk-geometry,limit-edge",
                    .text = "chunk size 2^30 (max_chunk_size) with a 12 KiB tensor: one short chunk",
                    .covers = "R-MAN-3,R-LIM-1,§8.1"),
              &B, &eb, &et);
  bundle_free(&B);

  pair_raw(&rb, &rt);
  build(&B, &rb, &rt, 4096, pol_default, NULL);
  emit_bundle(VALID(.id = "valid/raw", .flags = "raw",
                    .text = "raw checkpoints of 10000 bytes: one U8 tensor named raw",
                    .covers = "§2,R-MAN-7"),
              &B, &rb, &rt);
  bundle_free(&B);

  static const char *const meta[] = {"dcr.step", "1200", "model", "caf\xc3\xa9",
                                     "z-empty", "", NULL};
  pair_names(&ab, &at);
  build(&B, &ab, &at, 4096, pol_default, NULL);
  add_meta(&B, meta, 0);
  emit_bundle(VALID(.id = "valid/names-and-limits", .flags = "metadata,limit-edge",
                    .text = "UTF-8 names sorted bytewise, JSON escapes, a name of exactly 4096 "
                            "bytes, rank exactly 16, __metadata__ in the header, a META section",
                    .covers = "R-MAN-4,R-MAN-5,R-ST-2,R-ST-5,§6.4,R-LIM-1"),
              &B, &ab, &at);
  bundle_free(&B);

  build(&B, &eb, &et, 4096, pol_default, NULL);
  add_meta(&B, meta, 1);
  B.mani_comp = 1;
  rebuild_mani(&B);
  emit_bundle(VALID(.id = "valid/metadata-zstd", .flags = "metadata,compression",
                    .text = "MANI and META sections stored as zstd frames",
                    .covers = "§4.4,§6.4,R-CMP-1"),
              &B, &eb, &et);
  bundle_free(&B);

  pair_layout(&lb, &lt);
  build(&B, &lb, &lt, 4096, pol_default, NULL);
  emit_bundle(VALID(.id = "valid/layout-differs", .flags = "layout",
                    .text = "target data region in reverse name order, base in name order; "
                            "target header padded with 13 extra spaces (offsets are not compared)",
                    .covers = "§6.3,R-APL-1,R-ST-6,R-MAN-8"),
              &B, &lb, &lt);
  bundle_free(&B);

  /* Ancillary sections. */
  build(&B, &eb, &et, 4096, pol_default, NULL);
  {
    uint8_t junk[100];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = rbyte();
    sec_insert(&B, 1, "XTRA", 0, 0, junk, sizeof junk);
    sec_insert(&B, sec_find(&B, "CHNK", 1), "x\x01y\xff", 0, 7, junk, 40);
    sec_insert(&B, sec_find(&B, "INDX", 0), "EMTY", 0, 0, NULL, 0);
    sec_insert(&B, sec_find(&B, "FOOT", 0), "SIGN", 0, 0, junk, 64);
  }
  emit_bundle(VALID(.id = "valid/ancillary-sections", .flags = "ancillary",
                    .text = "unknown ancillary sections after MANI, between CHNKs (odd type "
                            "bytes, compression 7), before INDX (empty), and SIGN before FOOT",
                    .covers = "R-SEC-7,§4.3,§14"),
              &B, &eb, &et);
  bundle_free(&B);

  build(&B, &eb, &et, 4096, pol_default, NULL);
  {
    buf m = {0};
    meta_bytes(&m, meta);
    sec_insert(&B, sec_find(&B, "INDX", 0), "META", 0, 0, m.p, m.n);
    bfree(&m);
  }
  emit_bundle(VALID(.id = "valid/meta-late", .flags = "metadata,ancillary",
                    .text = "META between IDEN and INDX: ancillary sections may stand anywhere "
                            "between MANI and FOOT",
                    .covers = "§4,§4.3,§6.4"),
              &B, &eb, &et);
  bundle_free(&B);

  build(&B, &eb, &et, 4096, pol_default, NULL);
  B.minor = 9;
  emit_bundle(VALID(.id = "valid/minor-version-future", .flags = "version",
                    .text = "format 1.9: a reader of 1.0 accepts any minor version",
                    .covers = "R-HDR-6,§12"),
              &B, &eb, &et);
  bundle_free(&B);

  /* Hand-made zstd frames: raw blocks, a frame split over two blocks. */
  build(&B, &eb, &et, 4096, pol_default, NULL);
  {
    buf m = {0}, z = {0};
    manifest_bytes(&B.man, &m);
    zframe_raw(&z, m.n, m.p, m.n);
    section *s = sec(&B, "MANI", 0);
    s->comp = 1;
    bset(&s->pl, z.p, z.n);
    section *c = chunk_sec(&B, 0, 1);
    streams st;
    uint32_t cnt = get32(c->pl.p + 12);
    const mentry *e0 = &B.man.e[0];
    make_streams(&st, e0->bt->data + 4096, e0->tt->data + 4096, 2048, 2, XOR_DENSE);
    z.n = 0;
    zframe_raw(&z, st.planes.n, st.planes.p, st.planes.n);
    set_chunk(c, XOR_DENSE, 1, cnt, &z);
    bfree(&st.pos), bfree(&st.planes), bfree(&m), bfree(&z);
  }
  emit_bundle(VALID(.id = "valid/zstd-raw-blocks", .flags = "handmade-zstd,compression",
                    .text = "MANI and one chunk stream as zstd frames of raw blocks written by "
                            "hand: any valid frame with a content size is accepted",
                    .covers = "§4.4,§9.3,R-CMP-1,R-CMP-3"),
              &B, &eb, &et);
  bundle_free(&B);

  /* max_file_size exactly: raw, 2^48 bytes, nothing changed. */
  {
    bundle R;
    build(&R, &rb, &rb, 4096, pol_default, NULL);
    mentry *e = &R.man.e[0];
    e->b.dims[0] = e->b.len = e->t.dims[0] = e->t.len = (uint64_t)1 << 48;
    R.man.dlen = (uint64_t)1 << 48;
    memset(e->b.hash, 0xAB, 16);
    memset(e->t.hash, 0xAB, 16);
    rebuild_mani(&R);
    rebuild_iden(&R);
    emit_bundle(VALID(.id = "valid/file-size-max", .flags = "limit-edge,structure-only,raw",
                      .text = "raw target of exactly 2^48 bytes (max_file_size), unchanged: "
                              "valid; no checkpoints ship",
                      .covers = "R-MAN-6,R-LIM-1"),
                &R, NULL, NULL);
    R.man.dlen++;
    e->b.dims[0]++, e->b.len++, e->t.dims[0]++, e->t.len++;
    rebuild_mani(&R);
    rebuild_iden(&R);
    emit_bundle(INVALID(.id = "invalid/file-size-over-max", .error = "DCR_E_LAYOUT",
                        .stage = "structure", .flags = "limit,structure-only,raw",
                        .text = "raw target of 2^48 + 1 bytes: prefix_length + data_length "
                                "above max_file_size",
                        .covers = "R-MAN-6,R-LIM-1"),
                &R, NULL, NULL);
    bundle_free(&R);
  }
}

/* ------------------------------------------------------------------------ */
/* Invalid vectors                                                           */

static ckpt MB, MT;  /* the model pair */
static bundle M;     /* the model bundle: MANI META CHNK*4 IDEN INDX FOOT */

static void model(bundle *B) { bundle_copy(B, &M); }

/* Apply-stage vectors ship the base; target-stage ones the base and the target. */
static void emit_model(const vec *v, bundle *B) {
  int target = v->stage && !strcmp(v->stage, "target");
  int apply = target || (v->stage && !strcmp(v->stage, "apply"));
  emit_bundle(v, B, apply ? &MB : NULL, target ? &MT : NULL);
  bundle_free(B);
}

static void emit_bytes(const vec *v, buf *b) {
  emit(v, b, NULL, NULL);
  bfree(b);
}

static const char *const sec_types[] = {"MANI", "META", "CHNK", "IDEN", "INDX", "FOOT"};

static void header_vectors(void) {
  bundle B;
  buf b = {0};
  emit_bytes(INVALID(.id = "invalid/header-empty-file", .error = "DCR_E_TRUNCATED",
                     .stage = "structure", .flags = "truncation",
                     .text = "a file of 0 bytes", .covers = "R-HDR-4"),
             &b);
  model(&B);
  serialize(&B, &b);
  b.n = 40;
  emit_bytes(INVALID(.id = "invalid/header-short", .error = "DCR_E_TRUNCATED", .stage = "structure",
                     .flags = "truncation", .text = "the first 40 bytes of a bundle",
                     .covers = "R-HDR-4"),
             &b);
  bundle_free(&B);
  bset(&b, "PK\x03\x04\x14\x00\x00\x00", 8);
  bfill(&b, 0, 92);
  emit_bytes(INVALID(.id = "invalid/header-not-a-bundle", .error = "DCR_E_MAGIC",
                     .stage = "structure", .flags = "malformed-field",
                     .text = "a 100-byte file that starts like a zip archive", .covers = "R-HDR-1"),
             &b);
  bset(&b, "dcr?\n", 5);
  emit_bytes(INVALID(.id = "invalid/header-short-not-a-bundle", .error = "DCR_E_MAGIC",
                     .stage = "structure", .flags = "malformed-field,truncation",
                     .text = "a 5-byte file that is not a bundle: the magic is compared over "
                             "the bytes present before the length",
                     .covers = "R-HDR-1,R-HDR-4"),
             &b);
  model(&B);
  serialize(&B, &b);
  bsplice(&b, 4, 2, "\n", 1); /* CR LF -> LF, as a text-mode transfer does */
  emit_bytes(INVALID(.id = "invalid/header-magic-text-mode", .error = "DCR_E_MAGIC",
                     .stage = "structure", .flags = "malformed-field",
                     .text = "the bundle after a text-mode transfer turned the magic's CR LF "
                             "into LF",
                     .covers = "R-HDR-1"),
             &b);
  bundle_free(&B);
  model(&B);
  serialize(&B, &b);
  b.p[10] ^= 1;
  emit_bytes(INVALID(.id = "invalid/header-bit-flip", .error = "DCR_E_CHECKSUM", .stage = "structure",
                     .flags = "bit-flip", .text = "one bit of the minor version flipped",
                     .covers = "R-HDR-2"),
             &b);
  bundle_free(&B);
  static const unsigned majors[] = {0, 2, 0xFFFF};
  for (int i = 0; i < 3; i++) {
    char id[64];
    model(&B);
    B.major = majors[i];
    snprintf(id, sizeof id, "invalid/header-major-%u", majors[i]);
    emit_model(INVALID(.id = id, .error = "DCR_E_VERSION", .stage = "structure",
                       .flags = "version", .text = "major version other than 1 (header check correct)",
                       .covers = "R-HDR-3,§12"),
               &B);
  }
  model(&B);
  B.hflags = 1;
  emit_model(INVALID(.id = "invalid/header-flags-bit", .error = "DCR_E_RESERVED", .stage = "structure",
                     .flags = "reserved", .text = "header flags bit 0 set", .covers = "R-HDR-5,R-RES-1"),
             &B);
  model(&B);
  B.hresv[39] = 0x80;
  emit_model(INVALID(.id = "invalid/header-reserved-byte", .error = "DCR_E_RESERVED",
                     .stage = "structure", .flags = "reserved",
                     .text = "header byte 55 (reserved) set", .covers = "R-HDR-5,R-RES-1"),
             &B);
  model(&B);
  B.major = 2;
  B.hflags = 1;
  emit_model(INVALID(.id = "invalid/header-major-before-reserved", .error = "DCR_E_VERSION",
                     .stage = "structure", .flags = "version,reserved",
                     .text = "major 2 and a flag bit: the version is checked first",
                     .covers = "R-HDR-3"),
             &B);
}

static void section_walk_vectors(void) {
  bundle B;
  buf b = {0};
  char id[128], text[256];
  for (size_t k = 0; k < 6; k++) {
    const char *t = sec_types[k];
    char lt[5];
    for (int q = 0; q < 5; q++) lt[q] = (char)(t[q] >= 'A' && t[q] <= 'Z' ? t[q] + 32 : t[q]);
    model(&B);
    serialize(&B, &b);
    const section *s = sec(&B, t, 0);
    size_t off = (size_t)s->off, len = s->pl.n;
    buf c = bdup(&b);
    c.n = off;
    snprintf(id, sizeof id, "invalid/truncated-before-%s", lt);
    snprintf(text, sizeof text, "the bundle cut where the %s section starts (offset %zu): no footer",
             t, off);
    emit_bytes(INVALID(.id = id, .error = "DCR_E_TRUNCATED", .stage = "structure",
                       .flags = "truncation", .text = text, .covers = "R-SEC-9,§5"),
               &c);
    c = bdup(&b);
    c.n = off + 20;
    snprintf(id, sizeof id, "invalid/truncated-in-%s-header", lt);
    snprintf(text, sizeof text, "the bundle cut 20 bytes into the %s section header", t);
    emit_bytes(INVALID(.id = id, .error = "DCR_E_TRUNCATED", .stage = "structure",
                       .flags = "truncation", .text = text, .covers = "R-SEC-1"),
               &c);
    c = bdup(&b);
    c.n = off + 32 + len / 2;
    snprintf(id, sizeof id, "invalid/truncated-in-%s-payload", lt);
    snprintf(text, sizeof text, "the bundle cut in the middle of the %s payload", t);
    emit_bytes(INVALID(.id = id, .error = "DCR_E_TRUNCATED", .stage = "structure",
                       .flags = "truncation", .text = text, .covers = "R-SEC-3"),
               &c);
    c = bdup(&b);
    c.p[off + 9] ^= 0x04; /* in the length field */
    snprintf(id, sizeof id, "invalid/bit-flip-%s-header", lt);
    snprintf(text, sizeof text, "one bit of the %s section header's length flipped", t);
    emit_bytes(INVALID(.id = id, .error = "DCR_E_CHECKSUM", .stage = "structure",
                       .flags = "bit-flip", .text = text, .covers = "R-SEC-2"),
               &c);
    c = bdup(&b);
    c.p[off + 32 + len - 1] ^= 0x20;
    snprintf(id, sizeof id, "invalid/bit-flip-%s-payload", lt);
    snprintf(text, sizeof text, "one bit of the last %s payload byte flipped", t);
    emit_bytes(INVALID(.id = id, .error = "DCR_E_CHECKSUM", .stage = "structure",
                       .flags = "bit-flip", .text = text,
                       .covers = "R-SEC-4"),
               &c);
    bundle_free(&B);
  }
  model(&B);
  serialize(&B, &b);
  b.n--;
  emit_bytes(INVALID(.id = "invalid/truncated-last-byte", .error = "DCR_E_TRUNCATED",
                     .stage = "structure", .flags = "truncation",
                     .text = "the bundle without its last byte", .covers = "R-SEC-3"),
             &b);
  bundle_free(&B);

  model(&B);
  sec(&B, "MANI", 0)->flags = 3;
  emit_model(INVALID(.id = "invalid/section-flags-reserved", .error = "DCR_E_RESERVED",
                     .stage = "structure", .flags = "reserved",
                     .text = "MANI flags 0x0003: bit 1 is reserved", .covers = "R-SEC-10,R-RES-1"),
             &B);
  model(&B);
  sec(&B, "IDEN", 0)->resv = 1;
  emit_model(INVALID(.id = "invalid/section-reserved-byte", .error = "DCR_E_RESERVED",
                     .stage = "structure", .flags = "reserved",
                     .text = "IDEN section header byte 7 set", .covers = "R-SEC-10,R-RES-1"),
             &B);
  model(&B);
  sec(&B, "META", 0)->flags = 0x8000;
  emit_model(INVALID(.id = "invalid/section-flags-reserved-ancillary", .error = "DCR_E_RESERVED",
                     .stage = "structure", .flags = "reserved",
                     .text = "META flags bit 15 set", .covers = "R-SEC-10"),
             &B);
  model(&B);
  {
    section *s = sec(&B, "MANI", 0);
    s->len_set = 1;
    s->len_field = (1u << 30) + 1;
  }
  emit_model(INVALID(.id = "invalid/section-length-over-limit", .error = "DCR_E_LIMIT",
                     .stage = "structure", .flags = "limit,size-as-allocation",
                     .text = "MANI declares 2^30 + 1 payload bytes (max_section_size is 2^30)",
                     .covers = "R-SEC-3,R-LIM-1"),
             &B);
  model(&B);
  {
    section *s = sec(&B, "CHNK", 0);
    s->len_set = 1;
    s->len_field = UINT64_MAX - 16;
  }
  emit_model(INVALID(.id = "invalid/section-length-wraps", .error = "DCR_E_LIMIT",
                     .stage = "structure", .flags = "limit,size-as-allocation",
                     .text = "a CHNK declares 2^64 - 17 payload bytes: offset + length wraps",
                     .covers = "R-SEC-3,R-LIM-1"),
             &B);
  model(&B);
  {
    section *s = sec(&B, "MANI", 0);
    s->len_set = 1;
    s->len_field = (1u << 30) - 64;
  }
  emit_model(INVALID(.id = "invalid/section-length-beyond-file", .error = "DCR_E_TRUNCATED",
                     .stage = "structure", .flags = "size-as-allocation,truncation",
                     .text = "MANI declares 2^30 - 64 payload bytes (within the limit) in a "
                             "small file: must fail without allocating",
                     .covers = "R-SEC-3"),
             &B);
  model(&B);
  {
    section *s = sec(&B, "MANI", 0);
    if ((32 + s->pl.n) % 64 == 0) die("MANI has no padding");
    s->pad_set = 1;
    s->pad = 0x01;
  }
  emit_model(INVALID(.id = "invalid/section-padding-nonzero", .error = "DCR_E_RESERVED",
                     .stage = "structure", .flags = "reserved",
                     .text = "the first padding byte after MANI is 0x01", .covers = "R-SEC-5"),
             &B);
  model(&B);
  {
    section *s = sec(&B, "CHNK", 1);
    if ((32 + s->pl.n) % 64 == 0) die("CHNK has no padding");
    s->pad_set = 1;
    s->pad = 0x80;
  }
  emit_model(INVALID(.id = "invalid/section-padding-nonzero-chunk", .error = "DCR_E_RESERVED",
                     .stage = "structure", .flags = "reserved",
                     .text = "the first padding byte after a CHNK is 0x80", .covers = "R-SEC-5"),
             &B);

  /* Unknown sections. */
  uint8_t junk[24];
  for (size_t i = 0; i < sizeof junk; i++) junk[i] = rbyte();
  model(&B);
  sec_insert(&B, 1, "XCRT", 1, 0, junk, sizeof junk);
  emit_model(INVALID(.id = "invalid/unknown-critical-section", .error = "DCR_E_UNKNOWN_SECTION",
                     .stage = "structure", .flags = "unknown-critical",
                     .text = "a critical section of type XCRT after MANI", .covers = "R-SEC-6,§12"),
             &B);
  model(&B);
  sec_insert(&B, sec_find(&B, "FOOT", 0), "\0\0\0\0", 1, 0, NULL, 0);
  emit_model(INVALID(.id = "invalid/unknown-critical-section-empty", .error = "DCR_E_UNKNOWN_SECTION",
                     .stage = "structure", .flags = "unknown-critical",
                     .text = "an empty critical section of type 00 00 00 00 before FOOT",
                     .covers = "R-SEC-6"),
             &B);
  model(&B);
  sec_insert(&B, 2, "XTRA", 0, 0, junk, sizeof junk)->bad_pcheck = 1;
  emit_model(INVALID(.id = "invalid/ancillary-payload-checksum", .error = "DCR_E_CHECKSUM",
                     .stage = "structure", .flags = "ancillary,bit-flip",
                     .text = "an unknown ancillary section whose payload check is wrong: skipped "
                             "only after its checks pass",
                     .covers = "R-SEC-7,R-SEC-4"),
             &B);
  model(&B);
  {
    section *s = sec_insert(&B, 2, "XTRA", 0, 0, junk, sizeof junk);
    s->pad_set = 1;
    s->pad = 0xFF;
  }
  emit_model(INVALID(.id = "invalid/ancillary-padding-nonzero", .error = "DCR_E_RESERVED",
                     .stage = "structure", .flags = "ancillary,reserved",
                     .text = "an unknown ancillary section with a non-zero padding byte",
                     .covers = "R-SEC-7,R-SEC-5"),
             &B);
}

static void order_vectors(void) {
  bundle B;
  uint8_t junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  model(&B);
  {
    section t = B.s[0];
    B.s[0] = B.s[1];
    B.s[1] = t;
  }
  emit_model(INVALID(.id = "invalid/order-meta-first", .error = "DCR_E_STRUCTURE",
                     .stage = "structure", .flags = "order",
                     .text = "META before MANI: MANI must be first", .covers = "R-SEC-8"),
             &B);
  model(&B);
  sec_insert(&B, 0, "XTRA", 0, 0, junk, sizeof junk);
  emit_model(INVALID(.id = "invalid/order-ancillary-first", .error = "DCR_E_STRUCTURE",
                     .stage = "structure", .flags = "order,ancillary",
                     .text = "an unknown ancillary section before MANI", .covers = "R-SEC-8,§4"),
             &B);
  model(&B);
  {
    const section *m = sec(&B, "MANI", 0);
    sec_insert(&B, 2, "MANI", 1, m->comp, m->pl.p, m->pl.n);
  }
  emit_model(INVALID(.id = "invalid/order-mani-twice", .error = "DCR_E_STRUCTURE",
                     .stage = "structure", .flags = "order", .text = "MANI appears twice",
                     .covers = "R-SEC-8"),
             &B);
  model(&B);
  {
    const section *m = sec(&B, "META", 0);
    sec_insert(&B, 2, "META", 0, m->comp, m->pl.p, m->pl.n);
  }
  emit_model(INVALID(.id = "invalid/order-meta-twice", .error = "DCR_E_STRUCTURE",
                     .stage = "structure", .flags = "order", .text = "META appears twice",
                     .covers = "R-SEC-8,§4.3"),
             &B);
  model(&B);
  sec_remove(&B, sec_find(&B, "IDEN", 0));
  emit_model(INVALID(.id = "invalid/order-iden-missing", .error = "DCR_E_STRUCTURE",
                     .stage = "structure", .flags = "order",
                     .text = "no IDEN section: INDX follows the last CHNK", .covers = "R-SEC-8"),
             &B);
  model(&B);
  {
    const section *m = sec(&B, "IDEN", 0);
    sec_insert(&B, sec_find(&B, "INDX", 0), "IDEN", 1, 0, m->pl.p, m->pl.n);
  }
  emit_model(INVALID(.id = "invalid/order-iden-twice", .error = "DCR_E_STRUCTURE",
                     .stage = "structure", .flags = "order", .text = "IDEN appears twice",
                     .covers = "R-SEC-8"),
             &B);
  model(&B);
  sec_remove(&B, sec_find(&B, "INDX", 0));
  emit_model(INVALID(.id = "invalid/order-indx-missing", .error = "DCR_E_STRUCTURE",
                     .stage = "structure", .flags = "order", .text = "no INDX: FOOT follows IDEN",
                     .covers = "R-SEC-8"),
             &B);
  model(&B);
  {
    size_t i = sec_find(&B, "CHNK", 3);
    section c = B.s[i];
    memmove(B.s + i, B.s + i + 1, sizeof *B.s);
    B.s[i + 1] = c; /* IDEN, then the last CHNK */
  }
  emit_model(INVALID(.id = "invalid/order-chunk-after-iden", .error = "DCR_E_STRUCTURE",
                     .stage = "structure", .flags = "order", .text = "a CHNK section after IDEN",
                     .covers = "R-SEC-8"),
             &B);
  model(&B);
  sec_insert(&B, sec_find(&B, "INDX", 0), "SIGN", 0, 0, junk, sizeof junk);
  emit_model(INVALID(.id = "invalid/order-sign-early", .error = "DCR_E_STRUCTURE",
                     .stage = "structure", .flags = "order,ancillary",
                     .text = "SIGN before INDX: it must stand immediately before FOOT",
                     .covers = "R-SEC-8,§4.3"),
             &B);
  model(&B);
  {
    size_t f = sec_find(&B, "FOOT", 0);
    sec_insert(&B, f, "XTRA", 0, 0, junk, sizeof junk);
    sec_insert(&B, f, "SIGN", 0, 0, junk, sizeof junk);
  }
  emit_model(INVALID(.id = "invalid/order-sign-not-last", .error = "DCR_E_STRUCTURE",
                     .stage = "structure", .flags = "order,ancillary",
                     .text = "an ancillary section between SIGN and FOOT", .covers = "§4.3"),
             &B);

  /* Flags and compression of known sections (§4.3). */
  static const struct {
    const char *type, *id, *text;
    uint16_t flags;
    uint8_t comp;
    const char *code;
  } fl[] = {
      {"MANI", "invalid/flags-mani-not-critical", "MANI without the critical flag", 0, 0,
       "DCR_E_STRUCTURE"},
      {"META", "invalid/flags-meta-critical", "META with the critical flag", 1, 0,
       "DCR_E_STRUCTURE"},
      {"CHNK", "invalid/flags-chunk-compressed", "a CHNK section with section compression 1", 1, 1,
       "DCR_E_STRUCTURE"},
      {"INDX", "invalid/flags-index-compressed", "INDX with section compression 1", 1, 1,
       "DCR_E_STRUCTURE"},
      {"FOOT", "invalid/flags-foot-not-critical", "FOOT without the critical flag", 0, 0,
       "DCR_E_STRUCTURE"},
      {"MANI", "invalid/compression-unknown-mani", "MANI with section compression 2", 1, 2,
       "DCR_E_ENCODING"},
      {"IDEN", "invalid/compression-unknown-iden", "IDEN with section compression 255", 1, 255,
       "DCR_E_ENCODING"},
  };
  for (size_t i = 0; i < sizeof fl / sizeof *fl; i++) {
    model(&B);
    section *s = sec(&B, fl[i].type, 0);
    s->flags = fl[i].flags;
    s->comp = fl[i].comp;
    emit_model(INVALID(.id = fl[i].id, .error = fl[i].code, .stage = "structure",
                       .flags = "malformed-field", .text = fl[i].text, .covers = "R-SEC-11,§4.3"),
               &B);
  }

  /* Footer (§5). */
  model(&B);
  fix_foot(&B);
  B.auto_foot = 0;
  bfill(&sec(&B, "FOOT", 0)->pl, 0, 16);
  emit_model(INVALID(.id = "invalid/footer-length-48", .error = "DCR_E_STRUCTURE",
                     .stage = "structure", .flags = "footer",
                     .text = "a FOOT payload of 48 bytes", .covers = "R-FTR-1"),
             &B);
  model(&B);
  {
    buf b = {0};
    serialize(&B, &b);
    bfill(&b, 0, 64);
    emit_bytes(INVALID(.id = "invalid/footer-not-last", .error = "DCR_E_STRUCTURE",
                       .stage = "structure", .flags = "footer",
                       .text = "64 zero bytes after FOOT", .covers = "R-FTR-1"),
               &b);
    bundle_free(&B);
  }
  static const struct {
    const char *id, *text;
    unsigned field;
    uint64_t delta;
  } ft[] = {
      {"invalid/footer-mani-offset", "FOOT names MANI at 128, not 64", 0, 64},
      {"invalid/footer-iden-offset", "FOOT names IDEN 64 bytes after it is", 1, 64},
      {"invalid/footer-indx-offset", "FOOT names INDX 64 bytes before it is", 2, (uint64_t)-64},
      {"invalid/footer-chunk-count", "FOOT counts one chunk more than there are", 3, 1},
  };
  for (size_t i = 0; i < sizeof ft / sizeof *ft; i++) {
    model(&B);
    fix_foot(&B);
    B.auto_foot = 0;
    uint8_t *p = sec(&B, "FOOT", 0)->pl.p + 8 * ft[i].field;
    put64(p, get64(p) + ft[i].delta);
    emit_model(INVALID(.id = ft[i].id, .error = "DCR_E_STRUCTURE", .stage = "structure",
                       .flags = "footer", .text = ft[i].text, .covers = "R-FTR-2"),
               &B);
  }

  /* Identities (§7). */
  model(&B);
  sec(&B, "IDEN", 0)->pl.n -= 16;
  emit_model(INVALID(.id = "invalid/iden-length", .error = "DCR_E_STRUCTURE", .stage = "structure",
                     .flags = "malformed-field", .text = "IDEN 16 bytes short of one hash per side per entry",
                     .covers = "R-IDN-2"),
             &B);
  model(&B);
  sec(&B, "IDEN", 0)->pl.p[3] ^= 1;
  emit_model(INVALID(.id = "invalid/iden-base-state", .error = "DCR_E_CHECKSUM", .stage = "structure",
                     .flags = "malformed-field", .text = "base_state_id is not the one the hashes give",
                     .covers = "R-IDN-1"),
             &B);
  model(&B);
  sec(&B, "IDEN", 0)->pl.p[40] ^= 1; /* a tensor hash: the target state id no longer fits */
  emit_model(INVALID(.id = "invalid/iden-tensor-hash", .error = "DCR_E_CHECKSUM", .stage = "structure",
                     .flags = "malformed-field",
                     .text = "a base tensor hash changed, state ids left: base_state_id disagrees",
                     .covers = "R-IDN-1"),
             &B);
  model(&B);
  sec(&B, "IDEN", 0)->pl.p[16] ^= 1;
  emit_model(INVALID(.id = "invalid/iden-target-state", .error = "DCR_E_CHECKSUM",
                     .stage = "structure", .flags = "malformed-field",
                     .text = "target_state_id is not the one the hashes give", .covers = "R-IDN-1"),
             &B);
}

/* A manifest entry's descriptor by name and side. */
static desc *mdesc(bundle *B, const char *name, int target) {
  mentry *e = &B->man.e[entry_index(B, name)];
  return target ? &e->t : &e->b;
}

static void manifest_vectors(void) {
  bundle B;
  model(&B);
  sec(&B, "MANI", 0)->pl.n = 20;
  emit_model(INVALID(.id = "invalid/manifest-truncated-fixed", .error = "DCR_E_TRUNCATED",
                     .stage = "structure", .flags = "truncation",
                     .text = "a MANI payload of 20 bytes: shorter than its fixed fields",
                     .covers = "R-MAN-1"),
             &B);
  model(&B);
  sec(&B, "MANI", 0)->pl.n -= 9;
  emit_model(INVALID(.id = "invalid/manifest-truncated-entry", .error = "DCR_E_TRUNCATED",
                     .stage = "structure", .flags = "truncation",
                     .text = "a MANI payload cut inside the last entry's descriptor",
                     .covers = "R-MAN-1"),
             &B);
  model(&B);
  bfill(&sec(&B, "MANI", 0)->pl, 0, 3);
  emit_model(INVALID(.id = "invalid/manifest-trailing-bytes", .error = "DCR_E_MANIFEST",
                     .stage = "structure", .flags = "malformed-field",
                     .text = "3 bytes after the last manifest entry", .covers = "R-MAN-1"),
             &B);
  model(&B);
  B.man.resv[0] = 1;
  rebuild_mani(&B);
  emit_model(INVALID(.id = "invalid/manifest-reserved-byte", .error = "DCR_E_RESERVED",
                     .stage = "structure", .flags = "reserved",
                     .text = "manifest byte 9 (reserved) set", .covers = "R-MAN-1,R-RES-1"),
             &B);
  model(&B);
  B.man.e[1].presence |= 4;
  rebuild_mani(&B);
  emit_model(INVALID(.id = "invalid/manifest-presence-reserved-bit", .error = "DCR_E_RESERVED",
                     .stage = "structure", .flags = "reserved",
                     .text = "presence bit 2 (reserved) set", .covers = "R-MAN-1,R-RES-1"),
             &B);
  model(&B);
  B.man.e[0].resv = 0x10;
  rebuild_mani(&B);
  emit_model(INVALID(.id = "invalid/manifest-entry-reserved-byte", .error = "DCR_E_RESERVED",
                     .stage = "structure", .flags = "reserved",
                     .text = "an entry's reserved byte set", .covers = "R-MAN-1,R-RES-1"),
             &B);
  model(&B);
  B.man.count_set = 1;
  B.man.count_field = (1u << 20) + 1;
  rebuild_mani(&B);
  emit_model(INVALID(.id = "invalid/manifest-count-over-limit", .error = "DCR_E_LIMIT",
                     .stage = "structure", .flags = "limit,size-as-allocation",
                     .text = "entry_count 2^20 + 1 (max_tensors is 2^20)",
                     .covers = "R-MAN-2,R-LIM-1"),
             &B);
  model(&B);
  B.man.count_set = 1;
  B.man.count_field = 1u << 20;
  rebuild_mani(&B);
  emit_model(INVALID(.id = "invalid/manifest-count-beyond-payload", .error = "DCR_E_TRUNCATED",
                     .stage = "structure", .flags = "size-as-allocation,truncation",
                     .text = "entry_count 2^20 (at the limit) in a payload that holds 5 entries: "
                             "must fail without allocating 2^20 entries",
                     .covers = "R-MAN-2"),
             &B);
  model(&B);
  B.man.plen_set = 1;
  B.man.plen_field = (uint64_t)1 << 40;
  rebuild_mani(&B);
  emit_model(INVALID(.id = "invalid/manifest-prefix-length-beyond-payload", .error = "DCR_E_TRUNCATED",
                     .stage = "structure", .flags = "size-as-allocation,truncation",
                     .text = "prefix_length 2^40", .covers = "R-MAN-2"),
             &B);
  model(&B);
  B.man.e[B.man.n - 1].nlen_set = 1;
  B.man.e[B.man.n - 1].nlen_field = 60000;
  rebuild_mani(&B);
  emit_model(INVALID(.id = "invalid/manifest-name-length-beyond-payload", .error = "DCR_E_TRUNCATED",
                     .stage = "structure", .flags = "size-as-allocation,truncation",
                     .text = "the last entry's name_length is 60000", .covers = "R-MAN-2"),
             &B);
  static const struct {
    const char *id, *text;
    uint64_t cs;
  } cs[] = {
      {"invalid/manifest-chunk-size-not-power-of-two", "chunk_size 5000", 5000},
      {"invalid/manifest-chunk-size-too-small", "chunk_size 2048 (below 4096)", 2048},
      {"invalid/manifest-chunk-size-zero", "chunk_size 0", 0},
      {"invalid/manifest-chunk-size-over-limit", "chunk_size 2^31 (max_chunk_size is 2^30)",
       (uint64_t)1 << 31},
  };
  for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
    model(&B);
    B.man.chunk_size = cs[i].cs;
    rebuild_mani(&B);
    emit_model(INVALID(.id = cs[i].id, .error = "DCR_E_MANIFEST", .stage = "structure",
                       .flags = "malformed-field", .text = cs[i].text, .covers = "R-MAN-3"),
               &B);
  }
  model(&B);
  B.man.kind = 2;
  rebuild_mani(&B);
  emit_model(INVALID(.id = "invalid/manifest-kind-unknown", .error = "DCR_E_MANIFEST",
                     .stage = "structure", .flags = "malformed-field",
                     .text = "checkpoint kind 2", .covers = "R-MAN-3"),
             &B);
  model(&B);
  B.man.e[2].presence = 0;
  rebuild_mani(&B);
  emit_model(INVALID(.id = "invalid/manifest-presence-zero", .error = "DCR_E_MANIFEST",
                     .stage = "structure", .flags = "malformed-field",
                     .text = "an entry present on neither side", .covers = "R-MAN-3"),
             &B);

  /* Names (§6.2, R-MAN-4): the last entry "e" renamed. */
  static const struct {
    const char *id, *text, *name;
    size_t n;
  } nm[] = {
      {"invalid/name-empty", "an empty name", "", 0},
      {"invalid/name-not-utf8", "a name with byte 0xFF", "e\xff", 2},
      {"invalid/name-overlong-utf8", "a name with the overlong encoding C0 AF of '/'", "e\xc0\xaf", 3},
      {"invalid/name-surrogate", "a name with the UTF-8 encoded surrogate U+D800", "e\xed\xa0\x80", 4},
      {"invalid/name-above-unicode", "a name with F4 90 80 80 (above U+10FFFF)", "e\xf4\x90\x80\x80", 5},
      {"invalid/name-truncated-utf8", "a name ending inside a UTF-8 sequence", "e\xe2\x82", 3},
      {"invalid/name-nul", "a name containing U+0000", "e\0x", 3},
      {"invalid/name-unsorted", "the last entry's name sorts before the previous one", "a0", 2},
      {"invalid/name-duplicate", "the last entry has the previous entry's name", "d", 1},
  };
  for (size_t i = 0; i < sizeof nm / sizeof *nm; i++) {
    model(&B);
    mentry *e = &B.man.e[B.man.n - 1];
    free(e->name);
    e->name = xmalloc(nm[i].n);
    memcpy(e->name, nm[i].name, nm[i].n);
    e->nlen = nm[i].n;
    rebuild_mani(&B);
    int dup = strstr(nm[i].id, "duplicate") != NULL;
    emit_model(INVALID(.id = nm[i].id, .error = "DCR_E_NAME", .stage = "structure",
                       .flags = dup ? "duplicate-name,name" : "name", .text = nm[i].text,
                       .covers = "R-MAN-4"),
               &B);
  }
  model(&B);
  {
    mentry *e = &B.man.e[B.man.n - 1];
    free(e->name);
    e->name = xmalloc(4097);
    memset(e->name, 'e', 4097);
    e->nlen = 4097;
    rebuild_mani(&B);
  }
  emit_model(INVALID(.id = "invalid/name-too-long", .error = "DCR_E_NAME", .stage = "structure",
                     .flags = "name,limit", .text = "a name of 4097 bytes (max_name_length is 4096)",
                     .covers = "R-MAN-4,R-LIM-1"),
             &B);

  /* Dtypes, ranks, shapes (R-MAN-5). */
  static const int bad_dt[] = {0, 16, 255};
  for (int i = 0; i < 3; i++) {
    char id[64], text[64];
    model(&B);
    mdesc(&B, "b", 1)->dtype = bad_dt[i];
    rebuild_mani(&B);
    snprintf(id, sizeof id, "invalid/dtype-%d", bad_dt[i]);
    snprintf(text, sizeof text, "a target descriptor with dtype code %d", bad_dt[i]);
    emit_model(INVALID(.id = id, .error = "DCR_E_DTYPE", .stage = "structure",
                       .flags = "unknown-dtype", .text = text, .covers = "R-MAN-5,R-DT-1"),
               &B);
  }
  model(&B);
  mdesc(&B, "c", 0)->dtype = 99;
  rebuild_mani(&B);
  emit_model(INVALID(.id = "invalid/dtype-base-side", .error = "DCR_E_DTYPE", .stage = "structure",
                     .flags = "unknown-dtype", .text = "a removed tensor's base dtype code 99",
                     .covers = "R-MAN-5,R-DT-1"),
             &B);
  model(&B);
  {
    desc *d = mdesc(&B, "b", 1);
    d->rank = 17;
    for (int i = 0; i < 17; i++) d->dims[i] = 1;
    d->dims[0] = 100;
    rebuild_mani(&B);
  }
  emit_model(INVALID(.id = "invalid/rank-over-limit", .error = "DCR_E_LIMIT", .stage = "structure",
                     .flags = "limit", .text = "rank 17 (max_rank is 16)", .covers = "R-MAN-5,R-LIM-1"),
             &B);
  model(&B);
  mdesc(&B, "b", 1)->rank = 255;
  rebuild_mani(&B);
  emit_model(INVALID(.id = "invalid/rank-beyond-payload", .error = "DCR_E_LIMIT", .stage = "structure",
                     .flags = "limit,size-as-allocation",
                     .text = "rank 255 with only 32 dims present: over the limit, checked before the dims are read",
                     .covers = "R-MAN-5,R-LIM-1"),
             &B);
  static const struct {
    const char *id, *text, *name;
    int target;
    unsigned rank;
    uint64_t dims[3];
    uint64_t len;
    const char *flags;
  } sh[] = {
      {"invalid/shape-overflow", "U8 shape [2^32, 2^32, 2]: the product overflows 64 bits", "c", 0,
       3, {1ull << 32, 1ull << 32, 2}, 0, "shape-overflow"},
      {"invalid/shape-wraps-to-zero", "U8 shape [2^32, 2^32] with byte length 0: the product "
       "wraps to exactly 0", "c", 0, 2, {1ull << 32, 1ull << 32, 0}, 0, "shape-overflow"},
      {"invalid/shape-overflow-with-zero", "F32 shape [0, 2^62, 8] with byte length 0: a zero "
       "does not excuse the overflow", "b", 1, 3, {0, 1ull << 62, 8}, 0, "shape-overflow"},
      {"invalid/shape-dtype-size-overflow", "F32 shape [2^62]: elements fit, bytes overflow", "b",
       1, 1, {1ull << 62, 0, 0}, 0, "shape-overflow"},
      {"invalid/shape-byte-length", "F32 shape [100] with byte length 401", "b", 1, 1,
       {100, 0, 0}, 401, "byte-length"},
      {"invalid/shape-byte-length-base", "base U8 shape [64] with byte length 63", "c", 0, 1,
       {64, 0, 0}, 63, "byte-length"},
      {"invalid/shape-reshape-lies", "F32 shape [10, 11] (440 bytes) with byte length 400", "b",
       1, 2, {10, 11, 0}, 400, "byte-length"},
  };
  for (size_t i = 0; i < sizeof sh / sizeof *sh; i++) {
    model(&B);
    desc *d = mdesc(&B, sh[i].name, sh[i].target);
    d->rank = sh[i].rank;
    memcpy(d->dims, sh[i].dims, sizeof sh[i].dims);
    d->len = sh[i].len;
    rebuild_mani(&B);
    emit_model(INVALID(.id = sh[i].id, .error = "DCR_E_SHAPE", .stage = "structure",
                       .flags = sh[i].flags, .text = sh[i].text, .covers = "R-MAN-5,R-ST-4"),
               &B);
  }

  /* Layout (R-MAN-6): target entries a(8192) b(400) d(100) e(4096). */
  static const struct {
    const char *id, *text, *name;
    uint64_t off;
    int64_t dlen;
  } ly[] = {
      {"invalid/layout-gap", "tensor d starts 2 bytes after b ends; data_length covers it", "d",
       2, 2},
      {"invalid/layout-overlap", "tensor d starts 2 bytes before b ends", "d", (uint64_t)-2, 0},
      {"invalid/layout-not-from-zero", "the first tensor starts at 8, the others moved up", NULL,
       8, 8},
      {"invalid/layout-short-data", "data_length 1 byte more than the tensors cover", NULL, 0, 1},
      {"invalid/layout-past-data", "data_length 1 byte less than the tensors cover", NULL, 0, -1},
      {"invalid/layout-offset-out-of-range", "tensor e's offset is 2^64 - 101", "e",
       0, 0},
  };
  for (size_t i = 0; i < sizeof ly / sizeof *ly; i++) {
    model(&B);
    if (i == 2) {
      for (size_t k = 0; k < B.man.n; k++)
        if (B.man.e[k].presence & 2) B.man.e[k].t.off += 8;
    } else if (i == 5) {
      mdesc(&B, "e", 1)->off = UINT64_MAX - 100;
    } else if (ly[i].name) {
      mdesc(&B, ly[i].name, 1)->off += ly[i].off;
    }
    B.man.dlen = (uint64_t)((int64_t)B.man.dlen + ly[i].dlen);
    rebuild_mani(&B);
    emit_model(INVALID(.id = ly[i].id, .error = "DCR_E_LAYOUT", .stage = "structure",
                       .flags = "offsets", .text = ly[i].text, .covers = "R-MAN-6"),
               &B);
  }
}

/* Replaces the carried safetensors prefix with JSON text `json` (N = its length,
 * unless n_field is given). */
static void set_prefix(bundle *B, const char *json, uint64_t n_field) {
  size_t n = strlen(json);
  B->man.prefix.n = 0;
  bu64(&B->man.prefix, n_field ? n_field : n);
  bput(&B->man.prefix, json, n);
  rebuild_mani(B);
}

static void prefix_vectors(void) {
  bundle B;
  /* The model target's header, with one thing changed each time. */
  char base_json[1024];
  {
    const buf *p = &M.man.prefix;
    size_t n = p->n - 8;
    while (n && p->p[8 + n - 1] == ' ') n--;
    memcpy(base_json, p->p + 8, n);
    base_json[n] = '\0';
  }
  static const struct {
    const char *id, *text, *from, *to, *code, *flags, *covers;
  } px[] = {
      {"invalid/prefix-shape-disagrees", "the carried header says b is [10, 10], the manifest [100]",
       "\"shape\":[100]", "\"shape\":[10,10]", "DCR_E_MANIFEST", "checkpoint", "R-MAN-8"},
      {"invalid/prefix-not-json", "the carried header is not JSON", "{\"a\"", "{\"a\"\"",
       "DCR_E_CHECKPOINT", "checkpoint", "R-MAN-8,R-ST-2"},
      {"invalid/prefix-extra-key", "a tensor object with a fourth key", "\"dtype\":\"F32\"",
       "\"dtype\":\"F32\",\"x\":1", "DCR_E_CHECKPOINT", "checkpoint", "R-MAN-8,R-ST-2"},
      {"invalid/prefix-negative-offset", "data_offsets with a negative number",
       "\"data_offsets\":[0,", "\"data_offsets\":[-1,", "DCR_E_CHECKPOINT", "checkpoint",
       "R-ST-2"},
      {"invalid/prefix-dtype-unknown", "the carried header's dtype \"F4\"", "\"dtype\":\"F32\"",
       "\"dtype\":\"F4\"", "DCR_E_DTYPE", "checkpoint,unknown-dtype", "R-MAN-8,R-ST-3"},
      {"invalid/prefix-dtype-lowercase", "the carried header's dtype \"bf16\"",
       "\"dtype\":\"BF16\"", "\"dtype\":\"bf16\"", "DCR_E_DTYPE", "checkpoint,unknown-dtype",
       "R-ST-3"},
      {"invalid/prefix-shape-byte-length", "the carried header's shape [101] for 400 bytes of F32",
       "\"shape\":[100]", "\"shape\":[101]", "DCR_E_SHAPE", "checkpoint,byte-length",
       "R-MAN-8,R-ST-4"},
      {"invalid/prefix-duplicate-name", "the carried header repeats the key \"a\"", "{\"a\":",
       "{\"a\":{},\"a\":", "DCR_E_NAME", "checkpoint,duplicate-name", "R-MAN-8,R-ST-5"},
  };
  for (size_t i = 0; i < sizeof px / sizeof *px; i++) {
    char json[1200];
    const char *at = strstr(base_json, px[i].from);
    if (!at) die("prefix vector %s: no %s in %s", px[i].id, px[i].from, base_json);
    snprintf(json, sizeof json, "%.*s%s%s", (int)(at - base_json), base_json, px[i].to,
             at + strlen(px[i].from));
    model(&B);
    set_prefix(&B, json, 0);
    emit_model(INVALID(.id = px[i].id, .error = px[i].code, .stage = "structure",
                       .flags = px[i].flags, .text = px[i].text, .covers = px[i].covers),
               &B);
  }
  model(&B);
  set_prefix(&B, base_json, strlen(base_json) + 1);
  emit_model(INVALID(.id = "invalid/prefix-header-length", .error = "DCR_E_CHECKPOINT",
                     .stage = "structure", .flags = "checkpoint",
                     .text = "the carried header's length field is prefix_length - 7",
                     .covers = "R-MAN-8,R-ST-1"),
             &B);
  model(&B);
  set_prefix(&B, base_json, 100000001);
  emit_model(INVALID(.id = "invalid/prefix-header-over-limit", .error = "DCR_E_LIMIT",
                     .stage = "structure", .flags = "checkpoint,limit,size-as-allocation",
                     .text = "the carried header's length field is 100000001 (max_header_size "
                             "is 10^8)",
                     .covers = "R-ST-1,R-LIM-1"),
             &B);
  model(&B);
  {
    /* Tensor d moved one byte up in the header only. */
    const desc *d = mdesc(&B, "d", 1);
    char from[64], to[64], json[1200];
    snprintf(from, sizeof from, "\"data_offsets\":[%llu,%llu]", (unsigned long long)d->off,
             (unsigned long long)(d->off + d->len));
    snprintf(to, sizeof to, "\"data_offsets\":[%llu,%llu]", (unsigned long long)d->off + 1,
             (unsigned long long)(d->off + d->len + 1));
    const char *at = strstr(base_json, from);
    if (!at) die("no %s", from);
    snprintf(json, sizeof json, "%.*s%s%s", (int)(at - base_json), base_json, to, at + strlen(from));
    set_prefix(&B, json, 0);
  }
  emit_model(INVALID(.id = "invalid/prefix-layout-gap", .error = "DCR_E_LAYOUT",
                     .stage = "structure", .flags = "checkpoint,offsets",
                     .text = "the carried header moves tensor d one byte up, leaving a gap and "
                             "ending past the data region",
                     .covers = "R-MAN-8,R-ST-6"),
             &B);
  model(&B);
  {
    char json[1200];
    snprintf(json, sizeof json, "%.*s,\"z\":{\"dtype\":\"U8\",\"shape\":[0],"
             "\"data_offsets\":[0,0]}}", (int)(strlen(base_json) - 1), base_json);
    set_prefix(&B, json, 0);
  }
  emit_model(INVALID(.id = "invalid/prefix-extra-tensor", .error = "DCR_E_MANIFEST",
                     .stage = "structure", .flags = "checkpoint",
                     .text = "the carried header has a zero-length tensor the manifest does not",
                     .covers = "R-MAN-8"),
             &B);
}

static void raw_vectors(void) {
  static ckpt rb, rt;
  bundle R0, B;
  uint64_t d[1] = {3000};
  rb.file = "ckpt/raw-small-base.bin";
  rb.kind = KIND_RAW;
  fill_random(ck_add(&rb, "raw", U8, 1, d));
  ck_finish(&rb);
  ck_clone(&rt, &rb, "ckpt/raw-small-target.bin");
  mutate(ck_get(&rt, "raw"), 50);
  ck_finish(&rt);
  build(&R0, &rb, &rt, 4096, pol_default, NULL);
  bundle_copy(&B, &R0);
  bput(&B.man.prefix, "12345678", 8);
  rebuild_mani(&B);
  emit_bundle(INVALID(.id = "invalid/raw-prefix", .error = "DCR_E_MANIFEST", .stage = "structure",
                      .flags = "raw,malformed-field", .text = "kind raw with an 8-byte prefix",
                      .covers = "R-MAN-7"),
              &B, NULL, NULL);
  bundle_free(&B);
  bundle_copy(&B, &R0);
  B.man.e[0].name[2] = 'x';
  rebuild_mani(&B);
  rebuild_iden(&B);
  emit_bundle(INVALID(.id = "invalid/raw-name", .error = "DCR_E_MANIFEST", .stage = "structure",
                      .flags = "raw,malformed-field", .text = "kind raw with the tensor named \"rax\"",
                      .covers = "R-MAN-7"),
              &B, NULL, NULL);
  bundle_free(&B);
  bundle_copy(&B, &R0);
  B.man.e[0].t.dtype = I8;
  B.man.e[0].b.dtype = I8;
  rebuild_mani(&B);
  rebuild_iden(&B);
  emit_bundle(INVALID(.id = "invalid/raw-dtype", .error = "DCR_E_MANIFEST", .stage = "structure",
                      .flags = "raw,malformed-field", .text = "kind raw with an I8 tensor",
                      .covers = "R-MAN-7"),
              &B, NULL, NULL);
  bundle_free(&B);
  bundle_copy(&B, &R0);
  B.man.e[0].presence = 2;
  rebuild_mani(&B);
  rebuild_iden(&B);
  emit_bundle(INVALID(.id = "invalid/raw-target-only", .error = "DCR_E_MANIFEST", .stage = "structure",
                      .flags = "raw,malformed-field",
                      .text = "kind raw with the tensor on the target side only", .covers = "R-MAN-7"),
              &B, NULL, NULL);
  bundle_free(&B);
  /* Applied to a raw base of another size. */
  {
    static ckpt wb;
    ck_clone(&wb, &rb, "ckpt/raw-small-base-longer.bin");
    tensor *t = &wb.t[0];
    t->data = realloc(t->data, 3001);
    t->data[3000] = 0;
    t->len = t->dims[0] = 3001;
    ck_finish(&wb);
    bundle_copy(&B, &R0);
    emit_bundle(INVALID(.id = "invalid/raw-apply-wrong-size", .error = "DCR_E_BASE_MISMATCH",
                        .stage = "apply", .flags = "raw,wrong-base",
                        .text = "a raw bundle applied to a base one byte longer",
                        .covers = "R-APL-1"),
                &B, &wb, NULL);
    bundle_free(&B);
  }
  bundle_free(&R0);
}

/* Encoded data helpers for chunk vectors: `entry`/`chunk` of the model bundle. */
static void chunk_data(bundle *B, uint32_t entry, uint32_t chunk, int enc, int comp,
                       uint32_t count, const void *p, size_t n) {
  buf d = {0};
  bput(&d, p, n);
  set_chunk(chunk_sec(B, entry, chunk), enc, comp, count, &d);
  bfree(&d);
}

static void chunk_vectors(void) {
  bundle B;
  /* Model chunks: a/0 XOR_SPARSE stored, a/1 XOR_DENSE zstd, b/0 OVERWRITE_SPARSE
   * stored (F32, n = 100), d/0 OVERWRITE_DENSE zstd (I16, n = 50). Entries:
   * a=0 b=1 c=2 d=3 e=4. */
  static const struct {
    const char *id, *text, *code;
    int field; /* 0 tensor, 1 chunk, 2 count, 3 reserved */
    uint64_t value;
    const char *flags, *covers;
  } rc[] = {
      {"invalid/chunk-tensor-out-of-range", "a chunk record names entry 99 of 5", "DCR_E_INDEX", 0,
       99, "index", "R-IDX-1,R-CHK-2"},
      {"invalid/chunk-tensor-removed", "a chunk record names the removed tensor c", "DCR_E_INDEX", 0,
       2, "index", "R-IDX-1,R-CHK-2"},
      {"invalid/chunk-number-out-of-range", "chunk 1 of b, which has one chunk", "DCR_E_INDEX", 1, 1,
       "index", "R-IDX-1,R-CHK-2"},
      {"invalid/chunk-count-zero", "a chunk record with count 0", "DCR_E_INDEX", 2, 0, "index",
       "R-IDX-1,R-CHK-2"},
      {"invalid/chunk-count-over-n", "count 101 for a chunk of 100 elements", "DCR_E_INDEX", 2,
       101, "index", "R-IDX-1,R-CHK-2"},
      {"invalid/chunk-record-reserved", "a chunk record's reserved field set", "DCR_E_RESERVED", 3,
       1, "reserved", "R-RES-1"},
  };
  for (size_t i = 0; i < sizeof rc / sizeof *rc; i++) {
    model(&B);
    uint8_t *r = chunk_sec(&B, 1, 0)->pl.p;
    if (rc[i].field == 0) put32(r, rc[i].value);
    else if (rc[i].field == 1) put32(r + 4, rc[i].value);
    else if (rc[i].field == 2) put32(r + 12, rc[i].value);
    else put16(r + 10, rc[i].value);
    emit_model(INVALID(.id = rc[i].id, .error = rc[i].code, .stage = "structure",
                       .flags = rc[i].flags, .text = rc[i].text, .covers = rc[i].covers),
               &B);
  }
  model(&B);
  sec(&B, "CHNK", 0)->pl.n = 31;
  emit_model(INVALID(.id = "invalid/chunk-payload-short", .error = "DCR_E_STRUCTURE",
                     .stage = "structure", .flags = "truncation",
                     .text = "a CHNK payload of 31 bytes: shorter than its record",
                     .covers = "R-CHK-1"),
             &B);

  /* Index (§8.3). */
  model(&B);
  fix_index(&B);
  B.auto_index = 0;
  sec(&B, "INDX", 0)->pl.n -= 32;
  emit_model(INVALID(.id = "invalid/index-record-missing", .error = "DCR_E_INDEX",
                     .stage = "structure", .flags = "index",
                     .text = "INDX holds 3 records for 4 CHNK sections", .covers = "R-IDX-1"),
             &B);
  model(&B);
  fix_index(&B);
  B.auto_index = 0;
  bfill(&sec(&B, "INDX", 0)->pl, 0, 5);
  emit_model(INVALID(.id = "invalid/index-length-not-multiple", .error = "DCR_E_INDEX",
                     .stage = "structure", .flags = "index",
                     .text = "INDX of 4 records and 5 bytes", .covers = "R-IDX-1"),
             &B);
  model(&B);
  {
    size_t i = sec_find(&B, "CHNK", 1);
    section t = B.s[i];
    B.s[i] = B.s[i + 1];
    B.s[i + 1] = t;
  }
  emit_model(INVALID(.id = "invalid/index-unsorted", .error = "DCR_E_INDEX", .stage = "structure",
                     .flags = "index,offsets",
                     .text = "CHNK sections (and index) in the order a/0, b/0, a/1",
                     .covers = "R-IDX-1"),
             &B);
  model(&B);
  {
    size_t i = sec_find(&B, "CHNK", 1);
    section *s = sec_insert(&B, i + 1, "CHNK", 1, 0, B.s[i].pl.p, B.s[i].pl.n);
    (void)s;
  }
  emit_model(INVALID(.id = "invalid/index-duplicate-chunk", .error = "DCR_E_INDEX",
                     .stage = "structure", .flags = "index,duplicate-name",
                     .text = "chunk a/1 carried twice", .covers = "R-IDX-1"),
             &B);
  static const struct {
    const char *id, *text;
    size_t at;
    int width;
    uint64_t delta;
  } ix[] = {
      {"invalid/index-offset", "index record 1 points 64 bytes past its CHNK", 0, 8, 64},
      {"invalid/index-count", "index record 1's count differs from its CHNK record", 20, 4, 1},
      {"invalid/index-length", "index record 1's payload length differs", 24, 8, 1},
      {"invalid/index-encoding", "index record 1's encoding differs", 16, 1, 1},
      {"invalid/index-chunk", "index record 1's chunk number differs", 12, 4, 1},
  };
  for (size_t i = 0; i < sizeof ix / sizeof *ix; i++) {
    model(&B);
    fix_index(&B);
    B.auto_index = 0;
    uint8_t *p = sec(&B, "INDX", 0)->pl.p + 32 + ix[i].at;
    if (ix[i].width == 8) put64(p, get64(p) + ix[i].delta);
    else if (ix[i].width == 4) put32(p, get32(p) + ix[i].delta);
    else p[0] = (uint8_t)(p[0] + ix[i].delta);
    emit_model(INVALID(.id = ix[i].id, .error = "DCR_E_INDEX", .stage = "structure",
                       .flags = "index", .text = ix[i].text, .covers = "R-IDX-1"),
               &B);
  }
  model(&B);
  fix_index(&B);
  B.auto_index = 0;
  sec(&B, "INDX", 0)->pl.p[32 + 18] = 1;
  emit_model(INVALID(.id = "invalid/index-record-reserved", .error = "DCR_E_RESERVED",
                     .stage = "structure", .flags = "reserved,index",
                     .text = "an index record's reserved field set", .covers = "R-RES-1"),
             &B);

  /* Encoded data, checked without a base (stage "chunks"). b/0: F32, n = 100,
   * OVERWRITE_SPARSE stored; a/1: BF16, n = 2048, XOR_DENSE zstd. */
  const uint32_t bcount = get32(chunk_sec(&M, 1, 0)->pl.p + 12);
  static const struct {
    const char *id, *text;
    int enc;
  } ue[] = {
      {"invalid/encoding-zero", "encoding id 0", 0},
      {"invalid/encoding-unknown", "encoding id 200 (ids up to 4 are defined in 1.0)", 200},
  };
  for (size_t i = 0; i < 2; i++) {
    model(&B);
    section *s = chunk_sec(&B, 1, 0);
    s->pl.p[8] = (uint8_t)ue[i].enc;
    emit_model(INVALID(.id = ue[i].id, .error = "DCR_E_ENCODING", .stage = "chunks",
                       .flags = "malformed-field", .text = ue[i].text, .covers = "R-ENC-1,§12"),
               &B);
  }
  model(&B);
  chunk_sec(&B, 1, 0)->pl.p[9] = 2;
  emit_model(INVALID(.id = "invalid/chunk-compression-unknown", .error = "DCR_E_ENCODING",
                     .stage = "chunks", .flags = "malformed-field",
                     .text = "chunk compression 2", .covers = "R-ENC-6,§12"),
             &B);
  /* b/0 as XOR_SPARSE: positions 0, 1 then values; element 1's XOR all zero. */
  model(&B);
  {
    uint8_t v[] = {0, 0, /* planes of 2 F32 XOR values: */ 1, 0, 2, 0, 3, 0, 4, 0};
    chunk_data(&B, 1, 0, XOR_SPARSE, 0, 2, v, sizeof v);
  }
  emit_model(INVALID(.id = "invalid/xor-sparse-zero-value", .error = "DCR_E_ENCODING",
                     .stage = "chunks", .flags = "malformed-field",
                     .text = "an XOR_SPARSE value that is all zero bytes (changes nothing)",
                     .covers = "R-ENC-2"),
             &B);
  model(&B);
  {
    buf x = {0};
    bfill(&x, 0, 400);
    x.p[0] = 1, x.p[100 + 7] = 1, x.p[300 + 7] = 1, x.p[50] = 9;
    chunk_data(&B, 1, 0, XOR_DENSE, 0, 2, x.p, x.n); /* 3 elements change, count 2 */
    bfree(&x);
  }
  emit_model(INVALID(.id = "invalid/xor-dense-count", .error = "DCR_E_ENCODING", .stage = "chunks",
                     .flags = "malformed-field",
                     .text = "XOR_DENSE changes 3 elements, count says 2", .covers = "R-ENC-2"),
             &B);
  model(&B);
  {
    buf x = {0};
    bfill(&x, 7, 399);
    chunk_data(&B, 1, 0, OVERWRITE_DENSE, 0, bcount, x.p, x.n);
    bfree(&x);
  }
  emit_model(INVALID(.id = "invalid/stream-short", .error = "DCR_E_ENCODING", .stage = "chunks",
                     .flags = "truncation", .text = "an OVERWRITE_DENSE stream of 399 bytes for 400",
                     .covers = "R-ENC-5"),
             &B);
  model(&B);
  {
    section *s = chunk_sec(&B, 1, 0);
    bfill(&s->pl, 0, 1);
  }
  emit_model(INVALID(.id = "invalid/stream-trailing-byte", .error = "DCR_E_ENCODING",
                     .stage = "chunks", .flags = "malformed-field",
                     .text = "one byte after the last stream of a stored chunk", .covers = "R-ENC-4"),
             &B);
  model(&B);
  {
    section *s = chunk_sec(&B, 0, 1);
    bput(&s->pl, "\x28\xb5\x2f\xfd", 4);
  }
  emit_model(INVALID(.id = "invalid/stream-trailing-after-frame", .error = "DCR_E_ENCODING",
                     .stage = "chunks", .flags = "malformed-field,compression",
                     .text = "4 bytes (a zstd magic) after the last frame of a compressed chunk",
                     .covers = "R-ENC-4"),
             &B);

  /* Positions (§9.1, R-POS-1): b/0 OVERWRITE_SPARSE of F32, n = 100. Streams with
   * gaps are Rice-coded by rice(); malformed ones are bytes. Streams that end
   * inside a gap have no values after them (a stored position stream is not
   * length-delimited: it would run on into the values). */
  static const uint64_t g100[] = {100}, g50[] = {50, 49}, gwrap[] = {5, 0xFFFFFFFFu};
  static const struct {
    const char *id, *text;
    const uint64_t *gaps;
    unsigned k;
    uint8_t bytes[4];
    size_t n;
    uint32_t count;
    int values;
  } ps[] = {
      {"invalid/position-out-of-range", "position 100 in a chunk of 100 elements", g100, 7, {0}, 0,
       1, 1},
      {"invalid/position-gap-out-of-range", "positions 50 then 50 + 1 + 49 = 100", g50, 6, {0}, 0,
       2, 1},
      {"invalid/position-wraps-32-bit", "positions 5, then a gap of 2^32 - 1: computed in 32 bits "
       "it wraps to 5 again (duplicate, unsorted)", gwrap, 31, {0}, 0, 2, 1},
      {"invalid/position-rice-parameter-32", "a Rice parameter of 32 (at most 31)", NULL, 0,
       {32, 0x00}, 2, 1, 1},
      {"invalid/position-padding-not-zero", "position 0 (one zero bit), then a padding bit set",
       NULL, 0, {0x00, 0x02}, 2, 1, 1},
      {"invalid/position-quotient-unterminated", "the stream ends inside a unary quotient", NULL,
       0, {0x00, 0xFF, 0xFF}, 3, 1, 0},
      {"invalid/position-low-bits-cut", "the stream ends inside a gap's low bits (k = 8)", NULL, 0,
       {0x08, 0x00}, 2, 1, 0},
  };
  for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
    model(&B);
    buf x = {0};
    if (ps[i].gaps) rice(&x, ps[i].k, ps[i].gaps, ps[i].count);
    else bput(&x, ps[i].bytes, ps[i].n);
    if (ps[i].values) bfill(&x, 0x3F, 4 * (size_t)ps[i].count);
    chunk_data(&B, 1, 0, OVERWRITE_SPARSE, 0, ps[i].count, x.p, x.n);
    bfree(&x);
    emit_model(INVALID(.id = ps[i].id, .error = "DCR_E_POSITION", .stage = "chunks",
                       .flags = "positions", .text = ps[i].text, .covers = "R-POS-1"),
               &B);
  }
  model(&B);
  {
    static const uint64_t g12[] = {1, 2};
    buf x = {0}, pos = {0};
    uint8_t vals[8];
    memset(vals, 0x3F, sizeof vals);
    rice(&pos, 1, g12, 2);
    bu8(&pos, 9);
    zframe_raw(&x, pos.n, pos.p, pos.n);
    zframe_raw(&x, 8, vals, 8);
    chunk_data(&B, 1, 0, OVERWRITE_SPARSE, 1, 2, x.p, x.n);
    bfree(&x);
    bfree(&pos);
  }
  emit_model(INVALID(.id = "invalid/position-frame-leftover", .error = "DCR_E_POSITION",
                     .stage = "chunks", .flags = "positions,handmade-zstd",
                     .text = "a compressed position stream with a byte left after its 2 gaps",
                     .covers = "R-POS-2"),
             &B);

  /* Decompression of chunk streams (R-CMP-3): a/1 XOR_DENSE of 2048 BF16 = 4096 bytes. */
  const section *a1 = chunk_sec(&M, 0, 1);
  const uint32_t acount = get32(a1->pl.p + 12);
  streams st;
  make_streams(&st, MB.t[0].data + 4096, MT.t[0].data + 4096, 2048, 2, XOR_DENSE);
  static const struct {
    const char *id, *text;
    int kind;
  } dz[] = {
      {"invalid/chunk-frame-garbage", "the stream is not a zstd frame", 0},
      {"invalid/chunk-frame-no-content-size", "a frame that does not declare its content size", 1},
      {"invalid/chunk-frame-declares-more", "a frame declaring 4097 bytes for a 4096-byte stream", 2},
      {"invalid/chunk-frame-gives-less", "a frame declaring 4096 bytes that holds 4095", 3},
      {"invalid/chunk-frame-gives-more", "a frame declaring 4096 bytes that holds 4096 + 64 "
       "(a decoder must not write past the declared size)", 4},
      {"invalid/chunk-frame-truncated", "the frame cut short: its last block runs past the chunk", 5},
  };
  for (size_t i = 0; i < sizeof dz / sizeof *dz; i++) {
    model(&B);
    buf x = {0};
    switch (dz[i].kind) {
      case 0: for (int k = 0; k < 64; k++) bu8(&x, rbyte()); break;
      case 1: zframe_raw(&x, UINT64_MAX, st.planes.p, st.planes.n); break;
      case 2: zframe_raw(&x, 4097, st.planes.p, st.planes.n); break;
      case 3: zframe_raw(&x, 4096, st.planes.p, 4095); break;
      case 4: {
        buf big = bdup(&st.planes);
        bfill(&big, 0, 64);
        zframe_raw(&x, 4096, big.p, big.n);
        bfree(&big);
        break;
      }
      default: zframe_raw(&x, 4096, st.planes.p, st.planes.n); x.n -= 100; break;
    }
    chunk_data(&B, 0, 1, XOR_DENSE, 1, acount, x.p, x.n);
    bfree(&x);
    emit_model(INVALID(.id = dz[i].id, .error = "DCR_E_DECOMPRESS", .stage = "chunks",
                       .flags = "decompressed-size,handmade-zstd", .text = dz[i].text,
                       .covers = "R-CMP-3"),
               &B);
  }
  bfree(&st.pos);
  bfree(&st.planes);
  model(&B);
  {
    buf x = {0};
    /* at most 1 + ceil((32 * 2 + 100) / 8) = 22 bytes for 2 positions in 100 */
    uint8_t pos[23] = {0}, vals[8];
    memset(vals, 0x3F, sizeof vals);
    zframe_raw(&x, 23, pos, 23);
    zframe_raw(&x, 8, vals, 8);
    chunk_data(&B, 1, 0, OVERWRITE_SPARSE, 1, 2, x.p, x.n);
    bfree(&x);
  }
  emit_model(INVALID(.id = "invalid/position-frame-too-large", .error = "DCR_E_DECOMPRESS",
                     .stage = "chunks", .flags = "decompressed-size,handmade-zstd",
                     .text = "a position frame declaring 23 bytes for 2 positions in a 100-element "
                             "chunk (at most 22)",
                     .covers = "R-CMP-3"),
             &B);

  /* Two bad chunks: a validator that reports all names both. */
  model(&B);
  {
    buf x = {0};
    rice(&x, 7, g100, 1);
    bfill(&x, 0x3F, 4);
    chunk_data(&B, 1, 0, OVERWRITE_SPARSE, 0, 1, x.p, x.n);
    bfree(&x);
  }
  chunk_sec(&B, 3, 0)->pl.p[8] = 0;
  emit_model(INVALID(.id = "invalid/chunks-two-bad", .error = "DCR_E_POSITION", .stage = "chunks",
                     .all_errors = "DCR_E_POSITION,DCR_E_ENCODING", .flags = "multiple-errors,positions",
                     .text = "chunk b/0 has a position out of range and chunk d/0 encoding 0",
                     .covers = "R-POS-1,R-ENC-1"),
             &B);
}

static void section_zstd_vectors(void) {
  bundle B;
  buf m = {0};
  manifest_bytes(&M.man, &m);
  static const struct {
    const char *id, *text, *code, *flags;
    int kind;
  } zv[] = {
      {"invalid/mani-zstd-garbage", "MANI compression 1 over bytes that are not a zstd frame",
       "DCR_E_DECOMPRESS", "decompressed-size", 0},
      {"invalid/mani-zstd-two-frames", "MANI as two zstd frames (halves of the manifest)",
       "DCR_E_DECOMPRESS", "decompressed-size,handmade-zstd", 1},
      {"invalid/mani-zstd-no-content-size", "a MANI frame without a content size",
       "DCR_E_DECOMPRESS", "decompressed-size,handmade-zstd", 2},
      {"invalid/mani-zstd-declares-more", "a MANI frame declaring one byte more than it holds",
       "DCR_E_DECOMPRESS", "decompressed-size,handmade-zstd", 3},
      {"invalid/mani-zstd-gives-more", "a MANI frame holding 64 bytes more than it declares",
       "DCR_E_DECOMPRESS", "decompressed-size,handmade-zstd", 4},
      {"invalid/mani-zstd-declares-2-gib", "a MANI frame declaring 2^31 bytes (max_section_size "
       "is 2^30): refused before allocating", "DCR_E_LIMIT", "limit,size-as-allocation,handmade-zstd", 5},
      {"invalid/mani-zstd-trailing", "a MANI zstd frame followed by 3 more bytes",
       "DCR_E_DECOMPRESS", "decompressed-size,handmade-zstd", 6},
  };
  for (size_t i = 0; i < sizeof zv / sizeof *zv; i++) {
    model(&B);
    section *s = sec(&B, "MANI", 0);
    s->comp = 1;
    s->pl.n = 0;
    switch (zv[i].kind) {
      case 0: for (int k = 0; k < 50; k++) bu8(&s->pl, rbyte()); break;
      case 1:
        zframe_raw(&s->pl, m.n / 2, m.p, m.n / 2);
        zframe_raw(&s->pl, m.n - m.n / 2, m.p + m.n / 2, m.n - m.n / 2);
        break;
      case 2: zframe_raw(&s->pl, UINT64_MAX, m.p, m.n); break;
      case 3: zframe_raw(&s->pl, m.n + 1, m.p, m.n); break;
      case 4: {
        buf big = bdup(&m);
        bfill(&big, 0, 64);
        zframe_raw(&s->pl, m.n, big.p, big.n);
        bfree(&big);
        break;
      }
      case 5: zframe_raw(&s->pl, (uint64_t)1 << 31, m.p, m.n); break;
      default: zframe_raw(&s->pl, m.n, m.p, m.n); bput(&s->pl, "abc", 3); break;
    }
    emit_model(INVALID(.id = zv[i].id, .error = zv[i].code, .stage = "structure",
                       .flags = zv[i].flags, .text = zv[i].text,
                       .covers = zv[i].kind == 5 ? "R-CMP-2,R-LIM-1" : "R-CMP-1"),
               &B);
  }
  bfree(&m);
}

static void meta_vectors(void) {
  bundle B;
  static const struct {
    const char *id, *text, *code;
    const uint8_t *bytes;
    size_t n;
  } mv[] = {
      {"acceptable/meta-truncated-pair", "META ends inside its second pair", "DCR_E_TRUNCATED",
       (const uint8_t *)"\x02\0\0\0\x01\0k\x01\0\0\0v\x01\0", 14},
      {"acceptable/meta-count-beyond-payload", "META declares 10^6 pairs in 14 bytes",
       "DCR_E_TRUNCATED", (const uint8_t *)"\x40\x42\x0f\0\x01\0k\x01\0\0\0v\0\0", 14},
      {"acceptable/meta-trailing-bytes", "2 bytes after the last META pair", "DCR_E_MANIFEST",
       (const uint8_t *)"\x01\0\0\0\x01\0k\x01\0\0\0vxx", 14},
      {"acceptable/meta-keys-unsorted", "META keys \"b\" then \"a\"", "DCR_E_MANIFEST",
       (const uint8_t *)"\x02\0\0\0\x01\0b\0\0\0\0\x01\0a\0\0\0\0", 18},
      {"acceptable/meta-key-empty", "an empty META key", "DCR_E_MANIFEST",
       (const uint8_t *)"\x01\0\0\0\0\0\x01\0\0\0v", 11},
      {"acceptable/meta-value-not-utf8", "a META value with byte 0xFE", "DCR_E_MANIFEST",
       (const uint8_t *)"\x01\0\0\0\x01\0k\x01\0\0\0\xfe", 12},
  };
  for (size_t i = 0; i < sizeof mv / sizeof *mv; i++) {
    model(&B);
    section *s = sec(&B, "META", 0);
    s->comp = 0;
    bset(&s->pl, mv[i].bytes, mv[i].n);
    emit_model(ACCEPTABLE(.id = mv[i].id, .error = mv[i].code, .stage = "structure",
                          .flags = "metadata,malformed-field",
                          .text = mv[i].text,
                          .covers = "R-META-1"),
               &B);
  }
  model(&B);
  {
    section *s = sec(&B, "META", 0);
    s->comp = 1;
    bset(&s->pl, "\x28\xb5\x2f\xfd\x00", 5);
  }
  emit_model(ACCEPTABLE(.id = "acceptable/meta-zstd-garbage", .error = "DCR_E_DECOMPRESS",
                        .stage = "structure", .flags = "metadata,decompressed-size",
                        .text = "META compression 1 over a cut zstd frame header: a reader that "
                                "reads metadata rejects it, one that skips META accepts",
                        .covers = "R-META-1,R-CMP-1"),
             &B);
}

static void apply_vectors(void) {
  bundle B;
  /* Wrong bases. */
  static ckpt w[8];
  int nw = 0;
  struct {
    const char *id, *text, *covers, *flags;
    ckpt *base;
  } av[8];
#define WRONG(file_, id_, text_, covers_, flags_)                                      \
  (ck_clone(&w[nw], &MB, file_), av[nw].id = id_, av[nw].text = text_,                  \
   av[nw].covers = covers_, av[nw].flags = flags_, av[nw].base = &w[nw], &w[nw++])
  ckpt *c;
  uint64_t d1[1] = {4};
  c = WRONG("ckpt/model-base-extra-tensor.safetensors", "invalid/apply-base-extra-tensor",
            "the base has a tensor the manifest does not list", "R-APL-1", "wrong-base");
  fill_random(ck_add(c, "b2", F32, 1, d1));
  c = WRONG("ckpt/model-base-missing-tensor.safetensors", "invalid/apply-base-missing-tensor",
            "the base lacks the removed tensor c", "R-APL-1", "wrong-base");
  ck_remove(c, "c");
  c = WRONG("ckpt/model-base-reshaped.safetensors", "invalid/apply-base-shape",
            "the base's a is [64, 64], not [4096] (same bytes)", "R-APL-1", "wrong-base");
  ck_get(c, "a")->rank = 2, ck_get(c, "a")->dims[0] = 64, ck_get(c, "a")->dims[1] = 64;
  c = WRONG("ckpt/model-base-dtype.safetensors", "invalid/apply-base-dtype",
            "the base's b is I32, not F32 (same bytes)", "R-APL-1", "wrong-base");
  ck_get(c, "b")->dtype = I32;
  c = WRONG("ckpt/model-base-changed-chunk.safetensors", "invalid/apply-chunk-base-hash",
            "one byte of the base differs inside a changed chunk: its base hash does not match",
            "R-APL-2", "wrong-base");
  ck_get(c, "a")->data[100] ^= 1;
  c = WRONG("ckpt/model-base-unchanged-chunk.safetensors", "invalid/apply-base-tensor-hash",
            "one byte of the base differs in tensor e, which has no changed chunk: the tensor "
            "hash catches it", "R-APL-3", "wrong-base");
  ck_get(c, "e")->data[7] ^= 1;
  c = WRONG("ckpt/model-base-removed-differs.safetensors", "invalid/apply-base-removed-tensor",
            "one byte of the removed tensor c differs: its hash is part of the base state id",
            "R-APL-3", "wrong-base");
  ck_get(c, "c")->data[0] ^= 1;
  c = WRONG("ckpt/model-base-bad-header.safetensors", "invalid/apply-base-not-safetensors",
            "the base's header length runs past the end of the file", "R-ST-1", "checkpoint");
  for (int i = 0; i < nw; i++) {
    ck_finish(&w[i]);
    if (i == nw - 1) put64(w[i].bytes.p, w[i].bytes.n);
    model(&B);
    emit_bundle(INVALID(.id = av[i].id, .error = i == nw - 1 ? "DCR_E_CHECKPOINT"
                                                             : "DCR_E_BASE_MISMATCH",
                        .stage = "apply", .flags = av[i].flags, .text = av[i].text,
                        .covers = av[i].covers),
                &B, av[i].base, NULL);
    bundle_free(&B);
  }
#undef WRONG
  model(&B);
  emit_bundle(INVALID(.id = "invalid/apply-to-target", .error = "DCR_E_BASE_MISMATCH",
                      .stage = "apply", .flags = "wrong-base",
                      .text = "the model bundle applied to its own target: c is missing",
                      .covers = "R-APL-1"),
              &B, &MT, NULL);
  bundle_free(&B);
  {
    /* Same tensor set: every changed chunk is "already applied" (§10 step 3), so
     * only the final hashes tell that the base is wrong. */
    static ckpt eb, et;
    pair_enc(&eb, &et);
    eb.file = "ckpt/enc2-base.safetensors";
    et.file = "ckpt/enc2-target.safetensors";
    build(&B, &eb, &et, 4096, pol_default, NULL);
    emit_bundle(INVALID(.id = "invalid/apply-already-applied", .error = "DCR_E_BASE_MISMATCH",
                        .stage = "apply", .flags = "wrong-base",
                        .text = "applied to its target: each chunk matches target_check and is "
                                "left alone; the base state id does not match",
                        .covers = "R-APL-2,R-APL-3"),
                &B, &et, NULL);
    bundle_free(&B);
  }

  /* Bundles that pass every check without a base but do not give their target. */
  model(&B);
  {
    /* d/0 OVERWRITE_DENSE (zstd) with a count one short of what it changes. */
    section *s = chunk_sec(&B, 3, 0);
    put32(s->pl.p + 12, get32(s->pl.p + 12) - 1);
  }
  emit_model(INVALID(.id = "invalid/apply-overwrite-count", .error = "DCR_E_ENCODING",
                     .stage = "apply", .flags = "malformed-field",
                     .text = "an OVERWRITE_DENSE chunk whose count is one less than the elements "
                             "it changes (only the base can tell)",
                     .covers = "R-ENC-3"),
             &B);
  model(&B);
  {
    /* b/0 OVERWRITE_SPARSE: the first position's value replaced by the base's. */
    section *s = chunk_sec(&B, 1, 0);
    uint32_t count = get32(s->pl.p + 12);
    uint8_t *p = s->pl.p + 32;
    /* walk the stored Rice stream: the first gap is the first position, and the
     * planes start at the byte after the last gap */
    unsigned k = p[0];
    size_t bit = 8;
    uint32_t pos0 = 0;
    for (uint32_t i = 0; i < count; i++) {
      uint32_t q = 0, low = 0;
      while ((p[bit / 8] >> (bit % 8)) & 1) q++, bit++;
      bit++;
      for (unsigned j = 0; j < k; j++, bit++) low |= (uint32_t)((p[bit / 8] >> (bit % 8)) & 1) << j;
      if (i == 0) pos0 = (q << k) | low;
    }
    size_t vp = (bit + 7) / 8; /* planes start */
    const uint8_t *basev = MB.t[1].data + 4 * (size_t)pos0;
    for (unsigned b = 0; b < 4; b++) p[vp + b * count] = basev[b];
  }
  emit_model(INVALID(.id = "invalid/apply-overwrite-sparse-unchanged", .error = "DCR_E_ENCODING",
                     .stage = "apply", .flags = "malformed-field",
                     .text = "an OVERWRITE_SPARSE value equal to the base element it replaces",
                     .covers = "R-ENC-3"),
             &B);
  model(&B);
  chunk_sec(&B, 0, 0)->pl.p[24] ^= 1;
  emit_model(INVALID(.id = "invalid/apply-chunk-target-check", .error = "DCR_E_TARGET_MISMATCH",
                     .stage = "apply", .flags = "target-mismatch",
                     .text = "a chunk's target_check does not match what it decodes to",
                     .covers = "R-APL-2"),
             &B);
  model(&B);
  {
    B.man.e[entry_index(&B, "e")].t.hash[0] ^= 1;
    rebuild_iden(&B);
  }
  emit_model(INVALID(.id = "invalid/apply-target-tensor-hash", .error = "DCR_E_TARGET_MISMATCH",
                     .stage = "apply", .flags = "target-mismatch",
                     .text = "tensor e's target hash (and the target state id made from it) "
                             "is not that of the bytes the bundle gives",
                     .covers = "R-APL-3"),
             &B);
  model(&B);
  {
    B.man.e[entry_index(&B, "d")].t.hash[15] ^= 1;
    rebuild_iden(&B);
  }
  emit_model(INVALID(.id = "invalid/apply-added-tensor-hash", .error = "DCR_E_TARGET_MISMATCH",
                     .stage = "apply", .flags = "target-mismatch",
                     .text = "the added tensor d's target hash is wrong (state id consistent)",
                     .covers = "R-APL-3"),
             &B);

  /* A valid bundle checked against a target that is not its own. */
  static ckpt wt, wt2;
  ck_clone(&wt, &MT, "ckpt/model-target-one-byte.safetensors");
  ck_get(&wt, "e")->data[4095] ^= 0x80;
  ck_finish(&wt);
  model(&B);
  emit_bundle(INVALID(.id = "invalid/target-one-byte", .error = "DCR_E_TARGET_MISMATCH",
                      .stage = "target", .flags = "target-mismatch",
                      .text = "a valid bundle; the target file given differs in one byte",
                      .covers = "§10,R-APL-3"),
              &B, &MB, &wt);
  bundle_free(&B);
  ck_clone(&wt2, &MT, "ckpt/model-target-reordered.safetensors");
  wt2.reverse = 1;
  ck_finish(&wt2);
  model(&B);
  emit_bundle(INVALID(.id = "invalid/target-other-layout", .error = "DCR_E_TARGET_MISMATCH",
                      .stage = "target", .flags = "target-mismatch,layout",
                      .text = "a valid bundle; the target file holds the same tensors in another "
                              "layout (the prefix is part of the target's identity)",
                      .covers = "§7,§10"),
              &B, &MB, &wt2);
  bundle_free(&B);
}

/* ------------------------------------------------------------------------ */

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: mkvectors OUTDIR   (writes OUTDIR/index.json and OUTDIR/v1/)\n");
    return 2;
  }
  out_root = argv[1];
  vectors = json_array();

  valid_vectors();

  pair_model(&MB, &MT);
  build(&M, &MB, &MT, 4096, pol_model, NULL);
  static const char *const mmeta[] = {"dcr.step", "7", "origin", "mkvectors", NULL};
  add_meta(&M, mmeta, 0);
  if (M.n != 9) die("the model bundle has %zu sections", M.n);
  emit_bundle(VALID(.id = "valid/model", .flags = "encoding,compression,tensor-set,metadata",
                    .text = "the bundle most invalid vectors are made from: one chunk of each "
                            "encoding, a removed and an added tensor, an unchanged one, META",
                    .covers = "§4,§6,§7,§8,§9"),
              &M, &MB, &MT);

  header_vectors();
  section_walk_vectors();
  order_vectors();
  manifest_vectors();
  prefix_vectors();
  raw_vectors();
  chunk_vectors();
  section_zstd_vectors();
  meta_vectors();
  apply_vectors();

  for (size_t i = 0; i < NFLAGS; i++)
    if (!flag_used[i]) die("flag %s is declared but no vector uses it", flag_table[i].name);

  json_t *flags = json_object();
  for (size_t i = 0; i < NFLAGS; i++)
    json_object_set_new(flags, flag_table[i].name,
                        json_pack("{s:s, s:s}", "kind", flag_table[i].kind, "description",
                                  flag_table[i].text));
  json_t *untestable = json_pack(
      "{s:s, s:s, s:s, s:s}", "DCR_E_IO",
      "a file cannot be opened, read, written or renamed: a property of the environment, "
      "not of any bundle",
      "DCR_E_NOMEM", "allocation failure: a property of the environment; every bundle that "
      "declares huge sizes must fail with another code before allocating (size-as-allocation)",
      "DCR_E_ARGUMENT", "an invalid argument or option from the caller, not in any file",
      "DCR_E_INTERRUPTED", "a signal during an operation: a property of the run, not of any file");
  char zver[32];
  snprintf(zver, sizeof zver, "%s", ZSTD_versionString());
  json_t *index = json_pack(
      "{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:{s:i, s:i, s:i}, s:o}",
      "$schema", "schema.json", "format", "DCR delta bundle", "format_version", "1.0", "root",
      "v1", "spec", "SPEC.md", "generator",
      "tools/mkvectors.c (make vectors); seed 0x4443523176656374", "zstd_version", zver,
      "flags", flags, "codes_without_vectors", untestable, "counts", "valid", counts[0],
      "invalid", counts[1], "acceptable", counts[2], "vectors", vectors);
  char path[4096];
  snprintf(path, sizeof path, "%s/index.json", out_root);
  char *text = json_dumps(index, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
  FILE *f = fopen(path, "w");
  if (!text || !f || fputs(text, f) < 0 || fputc('\n', f) < 0 || fclose(f))
    die("cannot write %s", path);
  free(text);
  json_decref(index);
  fprintf(stderr, "mkvectors: %d valid, %d invalid, %d acceptable vectors in %s\n", counts[0],
          counts[1], counts[2], out_root);
  return 0;
}
