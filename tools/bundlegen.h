/*
 * bundlegen.h - the bundle builder that the bundle test vector generators share
 * (tools/mkvectors.c writes the 1.0 vectors, testvectors/v1/; tools/mkvectors11.c
 * those of 1.1, testvectors/v1.1/): checkpoints, manifests and identities, chunk
 * encodings, zstd frames (by libzstd and by hand), sections and bundles, each
 * built from the bytes up with xxHash and zstd only, not with libdcr; and the
 * index of the vectors, their files and their repaired variants. tools/mkvectors12.c
 * (testvectors/v1.2/) adds DELTA_CLASSED, with a range encoder of its own here;
 * tools/mkvectors13.c (testvectors/v1.3/) DELTA_BANDED, with band tables, canonical
 * prefix codes and Golomb streams of its own, written from SPEC.md §9.5 alone.
 *
 * Included once, after vecgen.h, with ZLEVEL defined (the zstd level of the valid
 * vectors' frames). The vectors are frozen (SPEC.md R-VER-2, R-VER-3): a change
 * here (as the 1.1 additions: dtypes 16 to 22, the views of sets, RSIZ; and 1.2's
 * DELTA_CLASSED) must leave every byte that mkvectors.c and mkvectors11.c write as
 * it was; `make vectors-check` proves it.
 */
#ifndef DCR_BUNDLEGEN_H
#define DCR_BUNDLEGEN_H

#include <zstd.h>

/* Not every generator uses every helper. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-const-variable"

/* ------------------------------------------------------------------------ */
/* Basics                                                                    */

/* Opens a zeroed element at index `at` of the first *n of an array of `size`-byte
 * elements (a sorted table: tensors, sections, members), moving those after it up
 * by one; the caller has checked that there is room. */
static void *slot_insert(void *array, size_t *n, size_t at, size_t size) {
  uint8_t *p = (uint8_t *)array + at * size;
  memmove(p + size, p, (*n - at) * size);
  ++*n;
  memset(p, 0, size);
  return p;
}

static uint8_t rnonzero(void) {
  uint8_t b;
  do b = rbyte(); while (!b);
  return b;
}

static uint64_t chunk_check(const uint8_t *p, size_t n) {
  buf b = {0};
  piece_list(p, n, &b);
  uint64_t h = xxh64(b.p, b.n);
  bfree(&b);
  return h;
}


/* ------------------------------------------------------------------------ */
/* Checkpoints (SPEC.md §2, §3)                                              */

enum { BOOL = 1, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, I64, U64, F64 };
/* 1.1 (SPEC.md §3): F4, F6_E2M3 and F6_E3M2 are packed (4 and 6 bits an element). */
enum { F8_E8M0 = 16, F8_E4M3FNUZ, F8_E5M2FNUZ, C64, F4, F6_E2M3, F6_E3M2 };
#define DT_LAST_1_0 F64
#define DT_LAST F6_E3M2
static const char *const dt_name[DT_LAST + 1] = {
    NULL,  "BOOL", "U8",  "I8",  "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32", "U32",
    "F32", "I64",  "U64", "F64", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "C64", "F4",
    "F6_E2M3", "F6_E3M2"};
/* The element of chunks and encodings (§8.1, §9): one byte for the packed dtypes. */
static const unsigned dt_size[DT_LAST + 1] = {0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4,
                                              4, 8, 8, 8, 1, 1, 1, 8, 1, 1, 1};
/* Bits of a shape's element (§3, R-DT-2): 8 x the size, except the packed dtypes. */
static const unsigned dt_bits[DT_LAST + 1] = {0,  8,  8,  8,  8, 8, 16, 16, 16, 16, 32, 32,
                                              32, 64, 64, 64, 8, 8, 8,  64, 4,  6,  6};
static int dt_packed(int dtype) { return dtype >= F4 && dtype <= F6_E3M2; }
enum { KIND_RAW = 0, KIND_ST = 1, KIND_SET = 3 };

#define MAXRANK 32
typedef struct {
  char *name;
  size_t nlen;
  int dtype;
  unsigned rank;
  uint64_t dims[MAXRANK];
  uint64_t len, off; /* off: in the data region */
  uint8_t *data;
  int raw_member; /* in the view of a set (mkvectors11.c): a raw member, named by its path */
} tensor;

#define MAXT 40
typedef struct {
  const char *file; /* relative to v1/ */
  int kind;
  size_t n;
  tensor t[MAXT];   /* sorted by name, bytewise */
  const char *meta; /* JSON object text for __metadata__, or NULL */
  int reverse;      /* data region in reverse name order */
  size_t extra_pad; /* spaces after the 8-byte alignment */
  buf prefix, bytes;
  int written[2]; /* in the corpus, in the repaired folder */
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
  tensor *t = slot_insert(c->t, &c->n, at, sizeof *c->t);
  t->name = strdup(name);
  t->nlen = nlen;
  t->dtype = dtype;
  t->rank = rank;
  uint64_t len = dt_size[dtype];
  if (dt_packed(dtype)) { /* (product x bits) / 8; the vectors' shapes keep it exact */
    len = dt_bits[dtype];
    for (unsigned i = 0; i < rank; i++) len *= dims[i];
    if (len % 8) die("%s: %llu bits", name, (unsigned long long)len);
    len /= 8;
    for (unsigned i = 0; i < rank; i++) t->dims[i] = dims[i];
  } else
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

static void json_str(buf *b, const void *text, size_t n) {
  const char *s = text;
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

/* One tensor member of a safetensors header: "name":{"dtype":..,"shape":[..],..}. */
static void json_tensor(buf *j, const void *name, size_t nlen, int dtype, unsigned rank,
                        const uint64_t *dims, uint64_t off, uint64_t len) {
  json_str(j, name, nlen);
  bprintf(j, ":{\"dtype\":\"%s\",\"shape\":[", dt_name[dtype]);
  for (unsigned k = 0; k < rank; k++)
    bprintf(j, "%s%llu", k ? "," : "", (unsigned long long)dims[k]);
  bprintf(j, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
          (unsigned long long)(off + len));
}

/* A safetensors prefix holding header text verbatim, with its length field
 * `n_field` (the text's length unless given). */
static void text_prefix(buf *prefix, const void *json, size_t n, uint64_t n_field) {
  prefix->n = 0;
  bu64(prefix, n_field ? n_field : n);
  bput(prefix, json, n);
}

/* A safetensors prefix from header text: the 8-byte length, then the text padded
 * with spaces to a multiple of 8 (as the reference writer does), then extra_pad. */
static void st_prefix(buf *prefix, buf *json, size_t extra_pad) {
  while ((8 + json->n) % 8) bu8(json, ' ');
  bfill(json, ' ', extra_pad);
  text_prefix(prefix, json->p, json->n, 0);
}

/* The file's bytes: its prefix, then its data region. */
static void ck_data(ckpt *c) {
  c->bytes.n = 0;
  bput(&c->bytes, c->prefix.p, c->prefix.n);
  for (size_t k = 0; k < c->n; k++) {
    const tensor *t = &c->t[c->reverse ? c->n - 1 - k : k];
    bput(&c->bytes, t->data, (size_t)t->len);
  }
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
    const tensor *t = &c->t[i];
    if (i) bu8(&j, ',');
    json_tensor(&j, t->name, t->nlen, t->dtype, t->rank, t->dims, t->off, t->len);
  }
  bu8(&j, '}');
  st_prefix(&c->prefix, &j, c->extra_pad);
  bfree(&j);
  ck_data(c);
}

/* Gives a finished safetensors checkpoint the header text `json` instead (same
 * tensors and offsets): for targets whose header is written in an unusual way. */
static void ck_set_header(ckpt *c, const char *json) {
  text_prefix(&c->prefix, json, strlen(json), 0);
  ck_data(c);
}

/* ------------------------------------------------------------------------ */
/* Manifest and identities (SPEC.md §6, §7)                                  */

typedef struct {
  int dtype;
  unsigned rank;
  uint64_t dims[MAXRANK];
  uint64_t len, off;
  uint8_t hash[16];
  unsigned rank_field; /* if non-zero, the rank byte written instead of rank (the
                          dims written are still rank's) */
} desc;

typedef struct {
  uint8_t *name;
  size_t nlen;
  int nlen_set; /* name_length field differs from nlen */
  uint64_t nlen_field;
  uint8_t presence, resv;
  desc b, t;
  const tensor *bt, *tt; /* sources of the bytes */
  uint8_t excl;  /* sides (bit 0 base, bit 1 target) left out of the state id: the raw
                    members of a set (SPEC.md R-SET-3) */
  int resized;   /* listed in RSIZ (§6.5): coded against its resized base */
} mentry;

#define MAXE 64
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
  bu8(b, d->rank_field ? d->rank_field : d->rank);
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
    if (!(e->presence & side) || (e->excl & side)) continue;
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

/* The carried safetensors prefix written from the target entries (names, dtypes,
 * shapes, offsets), as ck_finish writes a header: for vectors that change an
 * entry and keep the carried header in agreement with it (SPEC.md R-MAN-8). */
static void prefix_from_entries(manifest *m) {
  buf j = {0};
  bu8(&j, '{');
  for (size_t i = 0, first = 1; i < m->n; i++) {
    const mentry *e = &m->e[i];
    if (!(e->presence & 2)) continue;
    if (!first) bu8(&j, ',');
    first = 0;
    json_tensor(&j, e->name, e->nlen, e->t.dtype, e->t.rank, e->t.dims, e->t.off, e->t.len);
  }
  bu8(&j, '}');
  st_prefix(&m->prefix, &j, 0);
  bfree(&j);
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

/* zstd frames written by hand (RFC 8878), so that every field can be chosen:
 * libzstd writes only what it likes. One block: a 3-byte header (last flag,
 * type 0 raw or 1 RLE, size) and its content (size bytes, or one byte for RLE). */
static void zblock(buf *out, unsigned type, int last, size_t size, const uint8_t *p) {
  uint32_t h = (uint32_t)(size << 3) | type << 1 | (last ? 1u : 0u);
  uint8_t hb[3] = {(uint8_t)h, (uint8_t)(h >> 8), (uint8_t)(h >> 16)};
  bput(out, hb, 3);
  bput(out, p, type ? 1 : size);
}

/* The frame header fields a vector may change; all zero gives the default, a
 * frame that SPEC.md §4.4 allows: single segment (so the window is the content
 * size), an 8-byte Frame_Content_Size, no dictionary id, no checksum. */
typedef struct {
  uint32_t magic;      /* 0: the zstd magic 28 B5 2F FD */
  int no_size;         /* no Frame_Content_Size (then a window descriptor) */
  int multi;           /* a window descriptor although the size is given */
  unsigned window_over; /* with a window descriptor: the window's log above the bound */
  int dict;            /* a 1-byte Dictionary_ID field holding dict_id */
  uint8_t dict_id;
  int checksum;        /* 1: a content checksum; 2: one that does not match */
} zopts;

/* The smallest window log SPEC.md §4.4 allows for n bytes: max(1024, n rounded up
 * to a power of two). */
static unsigned window_log_bound(uint64_t n) {
  unsigned l = 10;
  while (((uint64_t)1 << l) < n) l++;
  return l;
}

static void zheader(buf *out, const zopts *o, uint64_t declared, uint64_t content) {
  int single = !o->no_size && !o->multi;
  bu32(out, o->magic ? o->magic : 0xFD2FB528u);
  bu8(out, (o->no_size ? 0u : 0xC0u) | (single ? 0x20u : 0u) | (o->checksum ? 0x04u : 0u) |
               (o->dict ? 1u : 0u));
  if (!single) bu8(out, (window_log_bound(content) + o->window_over - 10) << 3);
  if (o->dict) bu8(out, o->dict_id);
  if (!o->no_size) bu64(out, declared);
}

/* A frame declaring `declared` bytes around the bytes p, in raw blocks of at most
 * 128 KiB (the block size limit). */
static void zframe_hand(buf *out, const zopts *o, uint64_t declared, const uint8_t *p, size_t n) {
  zheader(out, o, declared, n);
  size_t at = 0;
  do {
    size_t k = n - at < 131072 ? n - at : 131072;
    zblock(out, 0, at + k == n, k, p + at);
    at += k;
  } while (at < n);
  if (o->checksum) bu32(out, (uint32_t)XXH64(p, n, 0) ^ (o->checksum == 2 ? 1u : 0u));
}

static void zframe_raw(buf *out, uint64_t declared, const uint8_t *p, size_t n) {
  zframe_hand(out, &(zopts){0}, declared, p, n);
}

/* A frame that really holds head[0..nh), `count` bytes `fill`, then tail[0..nt):
 * head and tail in raw blocks (of at most 128 KiB), the run in RLE blocks of
 * 128 KiB, 4 bytes each: the densest frame there is (SPEC.md §4.4's ratio bound of
 * 32768). For contents too large to store raw. */
static void zframe_rle(buf *out, const uint8_t *head, size_t nh, uint8_t fill, uint64_t count,
                       const uint8_t *tail, size_t nt) {
  if (nh > 131072 || nt > 131072) die("zframe_rle: head or tail over one block");
  zheader(out, &(zopts){0}, nh + count + nt, nh + count + nt);
  zblock(out, 0, !count && !nt, nh, head);
  for (uint64_t at = 0; at < count; at += 131072) {
    uint64_t k = count - at < 131072 ? count - at : 131072;
    zblock(out, 1, at + k == count && !nt, (size_t)k, &fill);
  }
  if (nt) zblock(out, 0, 1, nt, tail);
}

/* Streams of one chunk, before compression. */
typedef struct {
  buf pos, planes;
  buf gaps; /* the position stream's gaps (uint64_t), for vectors that re-code them */
  uint32_t count;
} streams;

static const uint64_t *gaps_of(const streams *s) {
  return (const uint64_t *)(const void *)s->gaps.p;
}

static void streams_free(streams *s) {
  bfree(&s->pos);
  bfree(&s->planes);
  bfree(&s->gaps);
}

static void make_streams(streams *s, const uint8_t *base, const uint8_t *tgt, size_t n,
                         unsigned e, int enc) {
  memset(s, 0, sizeof *s);
  int sparse = !(enc & 1);
  int xor = enc == XOR_DENSE || enc == XOR_SPARSE;
  int delta = enc == DELTA_DENSE || enc == DELTA_SPARSE;
  buf vals = {0};
  uint64_t next = 0;
  for (size_t i = 0; i < n; i++) {
    int diff = memcmp(base + i * e, tgt + i * e, e) != 0;
    s->count += (uint32_t)diff;
    if (sparse && !diff) continue;
    if (sparse) {
      uint64_t g = i - next;
      bput(&s->gaps, &g, sizeof g);
      next = i + 1;
    }
    uint8_t v[8];
    if (delta) delta_value(base + i * e, tgt + i * e, e, v);
    for (unsigned b = 0; b < e; b++)
      bu8(&vals, delta ? v[b] : xor ? base[i * e + b] ^ tgt[i * e + b] : tgt[i * e + b]);
  }
  if (sparse) rice(&s->pos, rice_k(gaps_of(s), s->count), gaps_of(s), s->count);
  size_t k = vals.n / e;
  for (unsigned b = 0; b < e; b++)
    for (size_t i = 0; i < k; i++) bu8(&s->planes, vals.p[i * e + b]);
  bfree(&vals);
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
  streams_free(s);
}

/* ------------------------------------------------------------------------ */
/* DELTA_CLASSED (SPEC.md §9.4, format 1.2)                                  */

/* Not in enc_name: ENC_LAST bounds loops of the frozen generators. */
#define DELTA_CLASSED 7
#define CLASSES_MAX 2048 /* F64's 11-bit exponent */

/* §9.4's table: an element's class is (u >> *shift) & (2^width - 1); width 0 (one
 * class) for the dtypes without a class field. */
static unsigned class_width(int dtype, unsigned *shift) {
  static const struct {
    int dtype;
    unsigned shift, width;
  } field[] = {{F8_E5M2, 2, 5}, {F8_E5M2FNUZ, 2, 5}, {F8_E4M3, 3, 4}, {F8_E4M3FNUZ, 3, 4},
               {F16, 10, 5},    {BF16, 7, 8},        {F32, 23, 8},    {F64, 52, 11},
               {C64, 23, 8},    {F8_E8M0, 0, 8}};
  *shift = 0;
  for (size_t i = 0; i < sizeof field / sizeof *field; i++)
    if (field[i].dtype == dtype) {
      *shift = field[i].shift;
      return field[i].width;
    }
  return 0;
}

/* An e-byte element as the unsigned little-endian integer of §9. */
static uint64_t elem_le(const uint8_t *p, unsigned e) {
  uint64_t u = 0;
  for (unsigned i = 0; i < e; i++) u |= (uint64_t)p[i] << (8 * i);
  return u;
}

static uint64_t class_of(const uint8_t *p, int dtype) {
  unsigned shift, width = class_width(dtype, &shift);
  return (elem_le(p, dt_size[dtype]) >> shift) & (((uint64_t)1 << width) - 1);
}

/* LZMA's range encoder, whose decoder §9.4 defines. low keeps a 33rd bit for a
 * carry; a byte that leaves low is held back (cache), with the 0xFF bytes after
 * it (cache_size counts them all), until no carry can reach it. It starts with
 * the byte 0 held, which is why a stream's first byte is 0. */
typedef struct {
  uint64_t low;
  uint32_t range;
  uint8_t cache;
  uint64_t cache_size;
  buf *out;
} rc_enc;

static void rc_start(rc_enc *rc, buf *out) { *rc = (rc_enc){0, 0xFFFFFFFFu, 0, 1, out}; }

static void rc_shift_low(rc_enc *rc) {
  if ((uint32_t)rc->low < 0xFF000000u || rc->low >> 32) {
    uint8_t carry = (uint8_t)(rc->low >> 32), held = rc->cache;
    for (; rc->cache_size; rc->cache_size--, held = 0xFF) bu8(rc->out, (uint8_t)(held + carry));
    rc->cache = (uint8_t)(rc->low >> 24);
  }
  rc->cache_size++;
  rc->low = (rc->low & 0x00FFFFFFu) << 8;
}

static void rc_normalize(rc_enc *rc) {
  for (; rc->range < (1u << 24); rc->range <<= 8) rc_shift_low(rc);
}

/* A bit with probability *p (of a 0, in 2048ths), which then moves 1/32 of the
 * way toward the bit. */
static void rc_bit(rc_enc *rc, uint16_t *p, unsigned bit) {
  uint32_t bound = (rc->range >> 11) * *p;
  if (bit) {
    rc->low += bound;
    rc->range -= bound;
    *p = (uint16_t)(*p - (*p >> 5));
  } else {
    rc->range = bound;
    *p = (uint16_t)(*p + ((2048 - *p) >> 5));
  }
  rc_normalize(rc);
}

static void rc_direct(rc_enc *rc, unsigned bit) {
  rc->range >>= 1;
  if (bit) rc->low += rc->range;
  rc_normalize(rc);
}

/* LZMA's flush: five shifts, after which the decoder has read every byte and its
 * code is 0. */
static void rc_flush(rc_enc *rc) {
  for (int i = 0; i < 5; i++) rc_shift_low(rc);
}

/* A change of a DELTA_CLASSED chunk: its rank in its class and its value as the
 * sign and M of §9.4 (z = 2M - 1 if neg, else 2M), so that a value of 2^B or more
 * can be written too. */
typedef struct {
  uint64_t rank, M;
  unsigned neg;
} cchange;

/* A record of the class table: its class and its changes (cchange), by rank. */
typedef struct {
  uint32_t cls;
  buf ch;
} crec;

/* What a chunk's DELTA_CLASSED data codes, record by record in table order; one
 * record more than a dtype has classes, for vectors that list one too many. */
typedef struct {
  unsigned bits; /* B */
  size_t m;
  crec r[CLASSES_MAX + 1];
} cplan;

static size_t crec_k(const crec *r) { return r->ch.n / sizeof(cchange); }
static cchange *crec_at(const crec *r, size_t j) { return (cchange *)(void *)r->ch.p + j; }

/* The plan of n elements from base to tgt: each changed element's rank among the
 * base elements of its class before it, and its delta value (§9). */
static cplan *cplan_make(const uint8_t *base, const uint8_t *tgt, size_t n, int dtype) {
  unsigned e = dt_size[dtype], shift, width = class_width(dtype, &shift);
  size_t classes = (size_t)1 << width;
  cplan *P = xmalloc(sizeof *P);
  crec *by = xmalloc(classes * sizeof *by);
  uint64_t *seen = xmalloc(classes * sizeof *seen);
  P->bits = 8 * e;
  for (size_t i = 0; i < n; i++) {
    size_t c = (size_t)class_of(base + i * e, dtype);
    if (memcmp(base + i * e, tgt + i * e, e)) {
      uint8_t zb[8];
      delta_value(base + i * e, tgt + i * e, e, zb);
      uint64_t z = elem_le(zb, e);
      cchange x = {seen[c], z & 1 ? (z >> 1) + 1 : z >> 1, (unsigned)(z & 1)};
      bput(&by[c].ch, &x, sizeof x);
    }
    seen[c]++;
  }
  for (size_t c = 0; c < classes; c++)
    if (by[c].ch.n) {
      by[c].cls = (uint32_t)c;
      P->r[P->m++] = by[c];
    }
  free(by);
  free(seen);
  return P;
}

static size_t cplan_count(const cplan *P) {
  size_t count = 0;
  for (size_t j = 0; j < P->m; j++) count += crec_k(&P->r[j]);
  return count;
}

static void cplan_free(cplan *P) {
  for (size_t j = 0; j < P->m; j++) bfree(&P->r[j].ch);
  free(P);
}

/* A record's rank stream: a position stream (§9.1) of its ranks with Rice
 * parameter k, or with the canonical one if k < 0. */
static void rank_stream(buf *out, const crec *r, int k) {
  size_t n = crec_k(r);
  uint64_t *g = xmalloc(n * sizeof *g);
  for (size_t j = 0; j < n; j++)
    g[j] = crec_at(r, j)->rank - (j ? crec_at(r, j - 1)->rank + 1 : 0);
  rice(out, k < 0 ? rice_k(g, n) : (unsigned)k, g, n);
  free(g);
}

/* One value (§9.4): neg with s; L = floor(log2 M) as L one-bits with l0, l1, ...
 * and a closing zero-bit unless L = B - 1; then the L bits of M under its leading
 * one, most significant first, as direct bits. */
static void rc_value(rc_enc *rc, uint16_t *ctx, unsigned bits, const cchange *x) {
  unsigned L = 63u - (unsigned)__builtin_clzll(x->M);
  if (L > bits - 1) die("a value of %u bits in a %u-bit element", L + 1, bits);
  rc_bit(rc, &ctx[0], x->neg);
  for (unsigned i = 0; i < L; i++) rc_bit(rc, &ctx[1 + i], 1);
  if (L < bits - 1) rc_bit(rc, &ctx[1 + L], 0);
  while (L--) rc_direct(rc, (unsigned)(x->M >> L) & 1);
}

/* The value stream: every record's values in turn, each record's contexts (s and
 * l0 .. l(B-2)) starting at 1/2. */
static void value_stream(buf *out, const cplan *P) {
  rc_enc rc;
  rc_start(&rc, out);
  for (size_t j = 0; j < P->m; j++) {
    uint16_t ctx[64];
    for (size_t i = 0; i < 64; i++) ctx[i] = 1024;
    for (size_t i = 0; i < crec_k(&P->r[j]); i++) rc_value(&rc, ctx, P->bits, crec_at(&P->r[j], i));
  }
  rc_flush(&rc);
}

/* A plan's data as its three parts, which a vector may change one by one: the
 * class table, the rank stream of each record, the value stream. */
typedef struct {
  buf table, values;
  size_t m;
  buf rank[CLASSES_MAX + 1];
} cparts;

static cparts *cparts_make(const cplan *P) {
  cparts *X = xmalloc(sizeof *X);
  X->m = P->m;
  bu16(&X->table, P->m);
  for (size_t j = 0; j < P->m; j++) {
    bu16(&X->table, P->r[j].cls);
    bu32(&X->table, crec_k(&P->r[j]));
    rank_stream(&X->rank[j], &P->r[j], -1);
  }
  value_stream(&X->values, P);
  return X;
}

/* The data: the parts back to back; frees X. */
static void cparts_join(buf *out, cparts *X) {
  out->n = 0;
  bput(out, X->table.p, X->table.n);
  for (size_t j = 0; j < X->m; j++) bput(out, X->rank[j].p, X->rank[j].n), bfree(&X->rank[j]);
  bput(out, X->values.p, X->values.n);
  bfree(&X->table);
  bfree(&X->values);
  free(X);
}

/* The DELTA_CLASSED data of n elements of `dtype`; returns their count. */
static uint32_t classed_data(buf *out, const uint8_t *base, const uint8_t *tgt, size_t n,
                             int dtype) {
  cplan *P = cplan_make(base, tgt, n, dtype);
  uint32_t count = (uint32_t)cplan_count(P);
  cparts_join(out, cparts_make(P));
  cplan_free(P);
  return count;
}

/* ------------------------------------------------------------------------ */
/* DELTA_BANDED (SPEC.md §9.5, format 1.3), written from the spec's text alone */

#define DELTA_BANDED 8
#define BANDS_MAX 8
#define NSYM_MAX 128 /* 2B for B = 64 */
#define CODE_LEN_MAX 11

/* An LSB-first bit writer (§9.1's order: bit 0 of each byte first). */
typedef struct {
  buf *out;
  uint64_t acc;
  unsigned n;
} bitw;

static void bw_put(bitw *w, unsigned bit) {
  w->acc |= (uint64_t)(bit & 1) << w->n;
  if (++w->n == 8) bu8(w->out, (uint8_t)w->acc), w->acc = 0, w->n = 0;
}
/* The `count` low bits of x, least significant first. */
static void bw_bits(bitw *w, uint64_t x, unsigned count) {
  for (unsigned i = 0; i < count; i++) bw_put(w, (unsigned)(x >> i) & 1);
}
/* The byte holding the last bit, its unused high bits 0. */
static void bw_end(bitw *w) {
  if (w->n) bu8(w->out, (uint8_t)w->acc);
  w->acc = 0, w->n = 0;
}

/* One band of a chunk: its changes (cchange: the rank in the band, M and neg of
 * §9.5's value), its base elements, and how it is coded. A vector may set any of
 * these to what the spec forbids before the band's bytes are made. */
typedef struct {
  buf ch;                /* cchange, by rank */
  uint64_t pop;          /* the band's elements in the chunk's base */
  int inverted;          /* listed by the ranks that do not change */
  unsigned nsym;         /* the value code: nsym lengths */
  uint8_t len[NSYM_MAX]; /* 0..11 (more, only for a vector that breaks R-BND-3) */
  uint64_t m;            /* the Golomb divisor of the rank stream */
} bband;

typedef struct {
  unsigned bits; /* B */
  uint32_t C;    /* classes */
  unsigned nb;
  uint32_t t[BANDS_MAX + 1]; /* t[0] = 0, thresholds, t[nb] = C */
  bband b[BANDS_MAX];
} bplan;

static size_t bband_k(const bband *b) { return b->ch.n / sizeof(cchange); }
static cchange *bband_at(const bband *b, size_t j) { return (cchange *)(void *)b->ch.p + j; }

/* §9.5's symbol of a value: s = 2L + neg, L = floor(log2 M). */
static unsigned band_symbol(const cchange *x) {
  return 2 * (63u - (unsigned)__builtin_clzll(x->M)) + x->neg;
}

/* Huffman code lengths of the symbols of b's values (any prefix code of complete
 * lengths would do: §9.5 leaves the choice to the writer): two smallest weights
 * merged at a time, lower index first on a tie; if a length passes 11, every
 * weight is halved (rounding up) and the code built again. One symbol: length 1. */
static void band_lengths(bband *b) {
  uint64_t f[NSYM_MAX] = {0};
  b->nsym = 0;
  memset(b->len, 0, sizeof b->len);
  for (size_t j = 0; j < bband_k(b); j++) {
    unsigned s = band_symbol(bband_at(b, j));
    f[s]++;
    if (s + 1 > b->nsym) b->nsym = s + 1;
  }
  unsigned used = 0;
  for (unsigned s = 0; s < b->nsym; s++) used += f[s] > 0;
  if (used == 1) {
    b->len[b->nsym - 1] = 1;
    return;
  }
  for (;;) {
    uint64_t w[2 * NSYM_MAX];
    int parent[2 * NSYM_MAX], alive[2 * NSYM_MAX];
    unsigned nodes = b->nsym;
    for (unsigned s = 0; s < b->nsym; s++) w[s] = f[s], alive[s] = f[s] > 0, parent[s] = -1;
    for (unsigned left = used; left > 1; left--) {
      int x = -1, y = -1;
      for (unsigned i = 0; i < nodes; i++) {
        if (!alive[i]) continue;
        if (x < 0 || w[i] < w[x]) y = x, x = (int)i;
        else if (y < 0 || w[i] < w[y]) y = (int)i;
      }
      w[nodes] = w[x] + w[y], alive[nodes] = 1, parent[nodes] = -1;
      alive[x] = alive[y] = 0, parent[x] = parent[y] = (int)nodes++;
    }
    unsigned longest = 0;
    for (unsigned s = 0; s < b->nsym; s++) {
      unsigned d = 0;
      if (f[s])
        for (int p = parent[s]; p >= 0; p = parent[p]) d++;
      b->len[s] = (uint8_t)(d > 255 ? 255 : d);
      if (d > longest) longest = d;
    }
    if (longest <= CODE_LEN_MAX) return;
    for (unsigned s = 0; s < b->nsym; s++) f[s] = (f[s] + 1) / 2;
  }
}

/* The bits of a Golomb stream's gaps with divisor m (§9.5): b = ceil(log2 m),
 * u = 2^b - m; the quotient in unary, then the remainder in b - 1 bits (x), and,
 * when x >= u, one more bit. Without `out`, only counts them. */
static uint64_t golomb_gap(bitw *w, uint64_t m, uint64_t v) {
  unsigned b = 0;
  while (((uint64_t)1 << b) < m) b++;
  uint64_t u = ((uint64_t)1 << b) - m, q = v / m, r = v % m, bits = q + 1;
  if (w) {
    for (uint64_t i = 0; i < q; i++) bw_put(w, 1);
    bw_put(w, 0);
  }
  if (!b) return bits;
  uint64_t x = r < u ? r : u + (r - u) / 2;
  if (w) bw_bits(w, x, b - 1);
  bits += b - 1;
  if (r >= u) {
    if (w) bw_put(w, (unsigned)(r - u) & 1);
    bits++;
  }
  return bits;
}

/* A Golomb stream: u32 m, then the gaps between the ranks (any ranks: a vector
 * may pass a bound). */
static void golomb(buf *out, uint64_t m, const uint64_t *ranks, size_t count) {
  bu32(out, (uint32_t)m);
  bitw w = {out, 0, 0};
  for (size_t j = 0; j < count; j++) golomb_gap(&w, m, ranks[j] - (j ? ranks[j - 1] + 1 : 0));
  bw_end(&w);
}

/* The divisor with the fewest bits for these ranks, the smallest on a tie, tried
 * up to twice the mean gap (a Golomb code's best divisor is below the mean). */
static uint64_t golomb_m(const uint64_t *ranks, size_t count) {
  uint64_t span = count ? ranks[count - 1] + 1 : 1, best = 1, best_bits = UINT64_MAX;
  for (uint64_t m = 1; m <= 2 * span / (count ? count : 1) + 1; m++) {
    uint64_t bits = 0;
    for (size_t j = 0; j < count; j++) bits += golomb_gap(NULL, m, ranks[j] - (j ? ranks[j - 1] + 1 : 0));
    if (bits < best_bits) best_bits = bits, best = m;
  }
  return best;
}

/* The ranks a band's stream lists: its changes', or, inverted, the others'. */
static uint64_t *band_ranks(const bband *b, size_t *count) {
  size_t k = bband_k(b);
  uint64_t *r = xmalloc((b->inverted ? b->pop - k : k) * sizeof *r + 1);
  *count = 0;
  if (!b->inverted) {
    for (size_t j = 0; j < k; j++) r[(*count)++] = bband_at(b, j)->rank;
  } else {
    size_t j = 0;
    for (uint64_t x = 0; x < b->pop; x++)
      if (j < k && bband_at(b, j)->rank == x) j++;
      else r[(*count)++] = x;
  }
  return r;
}

/* The coding a writer would choose for band b as planned: inverted when more than
 * half its elements change, Huffman lengths, the divisor of fewest bits. */
static void band_code(bband *b) {
  b->inverted = 2 * bband_k(b) > b->pop;
  band_lengths(b);
  size_t count;
  uint64_t *r = band_ranks(b, &count);
  b->m = golomb_m(r, count);
  free(r);
}

static uint32_t band_of(const bplan *P, uint64_t cls) {
  uint32_t b = 0;
  while (b + 1 < P->nb && cls >= P->t[b + 1]) b++;
  return b;
}

/* The plan of n elements from base to tgt in the bands that thresholds t[1..nb-1]
 * name (nb = 0: the bands chosen here), each band coded as band_code says. */
static bplan *bplan_make(const uint8_t *base, const uint8_t *tgt, size_t n, int dtype,
                         unsigned nb, const uint32_t *t) {
  unsigned e = dt_size[dtype], shift, width = class_width(dtype, &shift);
  bplan *P = xmalloc(sizeof *P);
  P->bits = 8 * e;
  P->C = (uint32_t)1 << width;
  if (nb) {
    P->nb = nb;
    for (unsigned b = 1; b < nb; b++) P->t[b] = t[b];
  } else { /* up to 4 bands of about equal numbers of changes */
    size_t *k = xmalloc(P->C * sizeof *k), total = 0, run = 0;
    for (size_t i = 0; i < n; i++)
      if (memcmp(base + i * e, tgt + i * e, e)) k[class_of(base + i * e, dtype)]++, total++;
    unsigned want = P->C < 4 ? P->C : 4;
    P->nb = 1;
    for (uint32_t c = 0; c + 1 < P->C && P->nb < want; c++) {
      run += k[c];
      if (run * want >= total * P->nb && run) P->t[P->nb++] = c + 1;
    }
    free(k);
  }
  P->t[0] = 0;
  P->t[P->nb] = P->C;
  for (size_t i = 0; i < n; i++) {
    bband *b = &P->b[band_of(P, class_of(base + i * e, dtype))];
    if (memcmp(base + i * e, tgt + i * e, e)) {
      uint8_t zb[8];
      delta_value(base + i * e, tgt + i * e, e, zb);
      uint64_t z = elem_le(zb, e);
      cchange x = {b->pop, z & 1 ? (z >> 1) + 1 : z >> 1, (unsigned)(z & 1)};
      bput(&b->ch, &x, sizeof x);
    }
    b->pop++;
  }
  for (unsigned b = 0; b < P->nb; b++) band_code(&P->b[b]);
  return P;
}

static size_t bplan_count(const bplan *P) {
  size_t count = 0;
  for (unsigned b = 0; b < P->nb; b++) count += bband_k(&P->b[b]);
  return count;
}

static void bplan_free(bplan *P) {
  for (unsigned b = 0; b < P->nb; b++) bfree(&P->b[b].ch);
  free(P);
}

/* A band's value code: nsym, then the lengths two to a byte, low half first. */
static void value_code(buf *out, const bband *b) {
  bu8(out, b->nsym);
  for (unsigned s = 0; s < b->nsym; s += 2)
    bu8(out, (uint8_t)((b->len[s] & 15) | (s + 1 < b->nsym ? (b->len[s + 1] & 15) << 4 : 0)));
}

/* RFC 1951 §3.2.2's canonical codes of a band's lengths. */
static void canonical_codes(const bband *b, uint32_t *code) {
  uint32_t count[16] = {0}, next[16] = {0};
  for (unsigned s = 0; s < b->nsym; s++) count[b->len[s] & 15]++;
  count[0] = 0;
  for (unsigned l = 1, c = 0; l < 16; l++) next[l] = c = (c + count[l - 1]) << 1;
  for (unsigned s = 0; s < b->nsym; s++)
    if (b->len[s]) code[s] = next[b->len[s]]++;
}

/* A value: its symbol's code, first bit first (the code's most significant),
 * then the L bits of M under its leading one, least significant first. */
static void band_value(bitw *w, const bband *b, const uint32_t *code, const cchange *x) {
  unsigned s = band_symbol(x), L = s / 2;
  if (s >= b->nsym || !b->len[s]) die("symbol %u has no code", s);
  for (unsigned i = b->len[s]; i--;) bw_put(w, (code[s] >> i) & 1);
  bw_bits(w, x->M, L);
}

/* A plan's data as its parts, which a vector may change one by one: the band
 * table, each band's value code and rank stream (empty for a band without
 * changes), the value stream. */
typedef struct {
  buf table, values;
  unsigned nb;
  buf code[BANDS_MAX], rank[BANDS_MAX];
} bparts;

static bparts *bparts_make(const bplan *P) {
  bparts *X = xmalloc(sizeof *X);
  uint8_t inverted = 0;
  X->nb = P->nb;
  bu8(&X->table, P->nb);
  for (unsigned b = 1; b < P->nb; b++) bu16(&X->table, P->t[b]);
  for (unsigned b = 0; b < P->nb; b++) bu32(&X->table, bband_k(&P->b[b]));
  bitw w = {&X->values, 0, 0};
  for (unsigned b = 0; b < P->nb; b++) {
    const bband *B = &P->b[b];
    if (!bband_k(B)) continue;
    inverted |= (uint8_t)(B->inverted ? 1u << b : 0);
    value_code(&X->code[b], B);
    size_t count;
    uint64_t *r = band_ranks(B, &count);
    if (B->inverted) bu32(&X->rank[b], count);
    if (!B->inverted || count) golomb(&X->rank[b], B->m, r, count);
    free(r);
    uint32_t code[NSYM_MAX] = {0};
    canonical_codes(B, code);
    for (size_t j = 0; j < bband_k(B); j++) band_value(&w, B, code, bband_at(B, j));
  }
  bw_end(&w);
  bu8(&X->table, inverted);
  return X;
}

/* The data: the parts back to back; frees X. */
static void bparts_join(buf *out, bparts *X) {
  out->n = 0;
  bput(out, X->table.p, X->table.n);
  for (unsigned b = 0; b < X->nb; b++) bput(out, X->code[b].p, X->code[b].n);
  for (unsigned b = 0; b < X->nb; b++) bput(out, X->rank[b].p, X->rank[b].n);
  bput(out, X->values.p, X->values.n);
  for (unsigned b = 0; b < X->nb; b++) bfree(&X->code[b]), bfree(&X->rank[b]);
  bfree(&X->table);
  bfree(&X->values);
  free(X);
}

/* The DELTA_BANDED data of n elements of `dtype`, in bands chosen here; returns
 * their count. */
static uint32_t banded_data(buf *out, const uint8_t *base, const uint8_t *tgt, size_t n,
                            int dtype) {
  bplan *P = bplan_make(base, tgt, n, dtype, 0, NULL);
  uint32_t count = (uint32_t)bplan_count(P);
  bparts_join(out, bparts_make(P));
  bplan_free(P);
  return count;
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
/* The next of the (encoding, compression) pairs of encodings 1 to `encodings`,
 * *k counting the chunks: a policy that cycles through them all. */
static choice cycle_choice(unsigned *k, unsigned encodings) {
  choice c = {(uint8_t)(1 + *k % encodings), (uint8_t)(*k / encodings % 2)};
  ++*k;
  return c;
}
/* Cycles through the (encoding, compression) pairs of XOR and OVERWRITE, chunk
 * after chunk (the frozen v1 vectors made with it have no delta encodings). */
static choice pol_cycle(void *ctx, size_t entry, uint32_t chunk, size_t n, uint32_t count) {
  (void)entry, (void)chunk, (void)n, (void)count;
  return cycle_choice(ctx, 4);
}

static section *sec_insert(bundle *B, size_t at, const char *type, uint16_t flags, uint8_t comp,
                           const void *p, size_t n) {
  if (B->n == MAXS || at > B->n) die("section table");
  section *s = slot_insert(B->s, &B->n, at, sizeof *B->s);
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

/* After a vector changes the manifest: IDEN's state ids are computed from the
 * entries as written (SPEC.md §7), so that they stay correct. */
static void remanifest(bundle *B) {
  rebuild_mani(B);
  rebuild_iden(B);
}

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
    if (s->type != T4("CHNK") || s->pl.n < 16) continue; /* the fields it copies */
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
  buf data = {0};
  uint32_t count;
  if (ch.enc == DELTA_CLASSED) {
    count = classed_data(&data, base, tgt, bytes / e, B->man.e[i].t.dtype);
  } else if (ch.enc == DELTA_BANDED) {
    count = banded_data(&data, base, tgt, bytes / e, B->man.e[i].t.dtype);
  } else {
    streams s;
    make_streams(&s, base, tgt, bytes / e, e, ch.enc);
    count = s.count;
    join_streams(&data, &s, ch.comp);
  }
  uint8_t rec[32] = {0};
  put32(rec, i);
  put32(rec + 4, c);
  rec[8] = ch.enc;
  rec[9] = ch.comp;
  put32(rec + 12, count);
  put64(rec + 16, chunk_check(base, bytes));
  put64(rec + 24, chunk_check(tgt, bytes));
  section *sc = sec_insert(B, at, "CHNK", 1, 0, rec, 32);
  bput(&sc->pl, data.p, data.n);
  bfree(&data);
}

/* Which entries a 1.1 bundle lists in RSIZ (SPEC.md §6.5), asked only of those
 * present on both sides with the same dtype and different byte lengths. */
typedef int (*resize_fn)(const mentry *e);

/* The reference writer's choice (§6.5): the same rank, and a shape that differs
 * in its first dimension only (a raw tensor is rank 1: always). */
static int resize_first_dim(const mentry *e) {
  if (e->b.rank != e->t.rank || !e->b.rank) return 0;
  for (unsigned i = 1; i < e->b.rank; i++)
    if (e->b.dims[i] != e->t.dims[i]) return 0;
  return 1;
}

static int resizable(const mentry *e) {
  return e->presence == 3 && e->b.dtype == e->t.dtype && e->b.len != e->t.len;
}

/* The resized base of an entry (§6.5, R-RSZ-2): the first min(Lb, Lt) bytes of
 * its base tensor, then zeros up to Lt. */
static uint8_t *resized_base(const mentry *e) {
  uint8_t *p = xmalloc((size_t)e->t.len);
  uint64_t keep = e->b.len < e->t.len ? e->b.len : e->t.len;
  if (keep) memcpy(p, e->bt->data, (size_t)keep);
  return p;
}

/* The RSIZ payload (§6.5): count, then the indices of the resized entries. */
static void rsiz_bytes(const manifest *m, buf *b) {
  b->n = 0;
  uint32_t n = 0;
  for (size_t i = 0; i < m->n; i++) n += m->e[i].resized != 0;
  bu32(b, n);
  for (size_t i = 0; i < m->n; i++)
    if (m->e[i].resized) bu32(b, i);
}

/* A bundle from base to target, chunks encoded as `pol` says; the entries that
 * `rs` chooses (none if NULL) listed in an RSIZ section right after MANI. Sets
 * (kind 3) are given as views (mkvectors11.c): their raw members are left out of
 * the state ids (R-SET-3). `minor` is the lowest the bundle needs (R-WRT-4): 3 for
 * a DELTA_BANDED chunk, else 2 for a DELTA_CLASSED chunk, else 1 for a set, an RSIZ
 * section or a dtype of 1.1, else 0. */
static void build_ex(bundle *B, const ckpt *base, const ckpt *tgt, uint32_t chunk_size,
                     policy_fn pol, void *ctx, resize_fn rs) {
  memset(B, 0, sizeof *B);
  B->major = 1;
  B->auto_index = B->auto_foot = 1;
  manifest *m = &B->man;
  m->chunk_size = chunk_size;
  m->kind = (uint8_t)tgt->kind;
  bput(&m->prefix, tgt->prefix.p, tgt->prefix.n);
  m->dlen = tgt->bytes.n - tgt->prefix.n;
  int v11 = m->kind == KIND_SET, resized = 0;
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
    if (c <= 0) {
      en->presence |= 1, desc_from(&en->b, x), en->bt = x, i++;
      en->excl |= x->raw_member ? 1 : 0;
      v11 |= x->dtype > DT_LAST_1_0;
    }
    if (c >= 0) {
      en->presence |= 2, desc_from(&en->t, y), en->tt = y, j++;
      en->excl |= y->raw_member ? 2 : 0;
      v11 |= y->dtype > DT_LAST_1_0;
    }
    if (rs && resizable(en) && rs(en)) en->resized = resized = 1;
  }
  B->minor = v11 || resized ? 1 : 0;
  sec_insert(B, 0, "MANI", 1, 0, NULL, 0);
  rebuild_mani(B);
  if (resized) {
    buf r = {0};
    rsiz_bytes(m, &r);
    sec_insert(B, 1, "RSIZ", 1, 0, r.p, r.n);
    bfree(&r);
  }
  for (size_t k = 0; k < m->n; k++) {
    mentry *en = &m->e[k];
    if (!(en->presence & 2)) continue;
    unsigned e = dt_size[en->t.dtype];
    uint8_t *zeros = xmalloc((size_t)(en->t.len < chunk_size ? en->t.len : chunk_size));
    uint8_t *rbase = en->resized ? resized_base(en) : NULL;
    const uint8_t *src = delta_coded(en) ? en->bt->data : rbase;
    for (uint64_t at = 0, c = 0; at < en->t.len; at += chunk_size, c++) {
      size_t bytes = (size_t)(en->t.len - at < chunk_size ? en->t.len - at : chunk_size);
      const uint8_t *bb = src ? src + at : zeros;
      const uint8_t *tb = en->tt->data + at;
      if (!memcmp(bb, tb, bytes)) continue;
      uint32_t count = 0;
      for (size_t q = 0; q < bytes / e; q++) count += memcmp(bb + q * e, tb + q * e, e) != 0;
      choice ch = pol(ctx, k, (uint32_t)c, bytes / e, count);
      add_chunk(B, B->n, (uint32_t)k, (uint32_t)c, bb, tb, bytes, e, ch);
      if (ch.enc == DELTA_CLASSED && B->minor < 2) B->minor = 2;
      if (ch.enc == DELTA_BANDED) B->minor = 3;
    }
    free(zeros);
    free(rbase);
  }
  sec_insert(B, B->n, "IDEN", 1, 0, NULL, 0);
  rebuild_iden(B);
  sec_insert(B, B->n, "INDX", 1, 0, NULL, 0);
  uint8_t foot[32] = {0};
  sec_insert(B, B->n, "FOOT", 1, 0, foot, 32);
}

/* A bundle from base to target, chunks encoded as `pol` says. */
static void build(bundle *B, const ckpt *base, const ckpt *tgt, uint32_t chunk_size,
                  policy_fn pol, void *ctx) {
  build_ex(B, base, tgt, chunk_size, pol, ctx, NULL);
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
  size_t at = B->n > 1 && B->s[1].type == T4("RSIZ") ? 2 : 1; /* after MANI (and RSIZ) */
  section *s = sec_insert(B, at, "META", 0, (uint8_t)comp, comp ? z.p : m.p, comp ? z.n : m.n);
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

/* ------------------------------------------------------------------------ */
/* The index and the files                                                   */

/* Two sinks: the corpus, and the repaired variants (--repaired DIR, never
 * committed). Each is a folder holding its index.json, with the files it names
 * in the index's root below it. */
enum { CORPUS, REPAIRED };
static char sink_dir[2][4096]; /* "": the sink is not written */
static char roots[2][4200];    /* the folder of its files */
static const char *index_root; /* that folder, relative to the index */
static json_t *vectors, *repaired;
static int counts[2], repair_count;

/* Every file written, so that no two checkpoints share a path. */
#define MAXFILES 1024
static const void *owners[2][MAXFILES];
static char *owned[2][MAXFILES];
static size_t nowned[2];

static void claim(int sink, const char *rel, const void *owner) {
  for (size_t i = 0; i < nowned[sink]; i++)
    if (!strcmp(owned[sink][i], rel)) {
      if (owners[sink][i] != owner) die("%s is written by two checkpoints", rel);
      return;
    }
  if (nowned[sink] == MAXFILES) die("too many files");
  owned[sink][nowned[sink]] = strdup(rel);
  owners[sink][nowned[sink]++] = owner;
}

static void write_file(int sink, const char *rel, const void *p, size_t n, char sha[65]) {
  char path[8192];
  snprintf(path, sizeof path, "%s/%s", roots[sink], rel);
  write_sha(path, p, n, sha);
}

static json_t *file_ref(const char *rel, const char *sha) {
  return json_pack("{s:s, s:s}", "path", rel, "sha256", sha);
}

static json_t *ck_ref(int sink, ckpt *c) {
  if (!c->written[sink]) {
    claim(sink, c->file, c);
    write_file(sink, c->file, c->bytes.p, c->bytes.n, c->sha);
    c->written[sink] = 1;
  }
  return file_ref(c->file, c->sha);
}

/* A vector's files in a sink, its bundle (ID.dcr) first: the generator adds the
 * base and the target, which it holds in its own ways. */
static json_t *bundle_ref(int sink, const char *id, const buf *bundle_bytes) {
  char rel[512], sha[65];
  snprintf(rel, sizeof rel, "%s.dcr", id);
  claim(sink, rel, id);
  write_file(sink, rel, bundle_bytes->p, bundle_bytes->n, sha);
  return json_pack("{s:o}", "bundle", file_ref(rel, sha));
}

/* The flags a generator declares (the index's "flags"): every vector's flags
 * must be among them, and each must be used. */
typedef struct {
  const char *name, *kind, *text;
} flag_def;
#define MAXFLAGS 64
static const flag_def *flag_table;
static size_t nflags;
static int flag_used[MAXFLAGS];

static void check_flags(const char *flags) {
  json_t *a = csv(flags);
  size_t i;
  json_t *f;
  json_array_foreach(a, i, f) {
    size_t k = 0;
    while (k < nflags && strcmp(flag_table[k].name, json_string_value(f))) k++;
    if (k == nflags) die("undeclared flag %s", json_string_value(f));
    flag_used[k] = 1;
  }
  json_decref(a);
}

/* A vector. all_errors (a few 1.0 vectors): every error a validator that goes on
 * past a bad chunk finds, or NULL. */
typedef struct {
  const char *id, *result, *error, *stage, *flags, *covers, *text, *all_errors;
} vec;

#define INVALID(...) (&(vec){.result = "invalid", __VA_ARGS__})
#define VALID(...) (&(vec){.result = "valid", __VA_ARGS__})

static json_t *vector_json(const vec *v, const char *result, json_t *files) {
  json_t *o = json_pack("{s:s, s:s, s:s}", "id", v->id, "description", v->text, "result", result);
  int valid = !strcmp(result, "valid");
  json_object_set_new(o, "error", valid ? json_null() : json_string(v->error));
  json_object_set_new(o, "stage", valid ? json_null() : json_string(v->stage));
  if (v->all_errors) json_object_set_new(o, "all_errors", csv(v->all_errors));
  json_object_set_new(o, "flags", csv(v->flags));
  json_object_set_new(o, "covers", csv(v->covers));
  if (!valid) json_object_set_new(o, "repair_checked", json_false());
  json_object_set_new(o, "files", files);
  return o;
}

/* What every vector must be before it is written: declared flags, an id that
 * starts with its result, an error and a stage if and only if it is invalid.
 * Returns whether it is valid. */
static int vector_check(const vec *v) {
  check_flags(v->flags);
  int valid = !strcmp(v->result, "valid");
  if (!valid && strcmp(v->result, "invalid")) die("%s: result %s", v->id, v->result);
  if (strncmp(v->id, v->result, strlen(v->result)) || v->id[strlen(v->result)] != '/')
    die("%s: id must start with its result", v->id);
  if (valid != !v->error || valid != !v->stage) die("%s: error and stage iff not valid", v->id);
  return valid;
}

/* Appends a checked vector, its files written to the corpus, to the index. */
static void add_vector(const vec *v, json_t *files) {
  json_array_append_new(vectors, vector_json(v, v->result, files));
  counts[strcmp(v->result, "valid") != 0]++;
}

/* The repair check (testvectors/README.md): invalid vector v made again by the
 * same code with its faulty field at a valid value must be valid (and apply to its
 * base and give its target where they are given); if it is not, v breaks a second
 * rule. Marks v, the vector just emitted, as repair-checked in the index; returns
 * whether the repaired variants are written (--repaired DIR: a corpus of its own,
 * which tests/test_vectors plays), for add_repaired to add this one. */
static int repair_checked(const vec *v) {
  json_t *o = json_array_get(vectors, json_array_size(vectors) - 1);
  if (!o || strcmp(json_string_value(json_object_get(o, "id")), v->id) ||
      strcmp(v->result, "invalid"))
    die("%s: a repaired variant follows its invalid vector", v->id);
  json_object_set_new(o, "repair_checked", json_true());
  repair_count++;
  return sink_dir[REPAIRED][0] != 0;
}

static void add_repaired(const vec *v, json_t *files) {
  json_array_append_new(repaired, vector_json(v, "valid", files));
}

/* Places a sink in the folder dir/sub (dir if sub is NULL), its files in the
 * index root below it. */
static void sink_at(int sink, const char *dir, const char *sub) {
  int beside = !strcmp(index_root, ".");
  snprintf(sink_dir[sink], sizeof sink_dir[sink], "%s%s%s", dir, sub ? "/" : "", sub ? sub : "");
  snprintf(roots[sink], sizeof roots[sink], "%s%s%s", sink_dir[sink], beside ? "" : "/",
           beside ? "" : index_root);
}

/* Starts a bundle generator from its command line, `OUTDIR [--repaired DIR]`: the
 * corpus in OUTDIR/sub (OUTDIR if sub is NULL), the repaired variants in DIR, the
 * files of each in `root` below its index ("." for beside it); vectors may carry
 * the `n` flags of `flags`. Returns 0 if the command line is not that. */
static int index_open(int argc, char **argv, const char *sub, const char *root,
                      const flag_def *flags, size_t n) {
  if (n > MAXFLAGS) die("too many flags");
  index_root = root;
  if (argc == 4 && !strcmp(argv[2], "--repaired")) sink_at(REPAIRED, argv[3], NULL);
  else if (argc != 2) return 0;
  sink_at(CORPUS, argv[1], sub);
  flag_table = flags;
  nflags = n;
  vectors = json_array();
  repaired = json_array();
  return 1;
}

static void write_index(int sink, json_t *index) {
  char path[4200];
  snprintf(path, sizeof path, "%s/index.json", sink_dir[sink]);
  write_json(path, index);
}

/* What an index says beside its vectors. */
typedef struct {
  const char *schema, *format_version, *generator;
  const char *usage; /* how to play the vectors, beyond testvectors/README.md; or NULL */
  const char *nomem; /* why no vector gives DCR_E_NOMEM */
  json_t *no_vectors; /* requirements_without_vectors (the reference is taken) */
  const char *repaired_text; /* the description of the repaired variants' index */
} index_info;

/* Writes the indexes of both sinks, once every vector is emitted. */
static void index_close(const index_info *x) {
  for (size_t i = 0; i < nflags; i++)
    if (!flag_used[i]) die("flag %s is declared but no vector uses it", flag_table[i].name);
  json_t *flags = json_object();
  for (size_t i = 0; i < nflags; i++)
    json_object_set_new(flags, flag_table[i].name,
                        json_pack("{s:s, s:s}", "kind", flag_table[i].kind, "description",
                                  flag_table[i].text));
  json_t *untestable = json_pack(
      "{s:s, s:s, s:s, s:s}", "DCR_E_IO",
      "a file cannot be opened, read, written or renamed: a property of the environment, "
      "not of any bundle",
      "DCR_E_NOMEM", x->nomem,
      "DCR_E_ARGUMENT", "an invalid argument or option from the caller, not in any file",
      "DCR_E_INTERRUPTED", "a signal during an operation: a property of the run, not of any file");
  char zver[32];
  snprintf(zver, sizeof zver, "%s", ZSTD_versionString());
  json_t *index = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "$schema", x->schema,
                            "format", "DCR delta bundle", "format_version", x->format_version,
                            "root", index_root, "spec", "SPEC.md", "generator", x->generator,
                            "zstd_version", zver);
  if (x->usage) json_object_set_new(index, "usage", json_string(x->usage));
  json_object_set_new(index, "flags", flags);
  json_object_set_new(index, "codes_without_vectors", untestable);
  json_object_set_new(index, "requirements_without_vectors", x->no_vectors);
  json_object_set_new(index, "counts",
                      json_pack("{s:i, s:i, s:i}", "valid", counts[0], "invalid", counts[1],
                                "repair_checked", repair_count));
  json_object_set_new(index, "vectors", vectors);
  write_index(CORPUS, index);
  if (sink_dir[REPAIRED][0])
    write_index(REPAIRED, json_pack("{s:s, s:s, s:o}", "description", x->repaired_text, "root",
                                    index_root, "vectors", repaired));
  else
    json_decref(repaired);
  for (size_t s = 0; s < 2; s++)
    for (size_t i = 0; i < nowned[s]; i++) free(owned[s][i]);
  fprintf(stderr, "%s: %d valid, %d invalid vectors (%d with a repair check) in %s\n",
          VECGEN_NAME, counts[0], counts[1], repair_count, sink_dir[CORPUS]);
}

#pragma GCC diagnostic pop

#endif
