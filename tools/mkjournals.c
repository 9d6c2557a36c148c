/*
 * mkjournals.c - writes the golden test vectors of the apply journal, the
 * companion format of SPEC.md §18: 1.0 (testvectors/journal-v1/, frozen), 1.1
 * (testvectors/journal-v1.1/: what a reader does with a journal it cannot replay,
 * which depends on the checkpoint's state id, so its checkpoints are safetensors)
 * and 1.2 (testvectors/journal-v1.2/: a set's journal of member records, §18.6,
 * each vector a directory's files).
 *
 *   mkjournals OUTDIR
 *
 * writes OUTDIR/journal-v1/index.json (and journal-v1.1/index.json) and, beside
 * each, the files of every vector:
 *
 *   ckpt/NAME.bin              checkpoints: each vector's "before" and, for the
 *                              journals that replay, its expected "after"
 *   replayed/ uncommitted/ error/   the journals (NAME.dcr-journal)
 *
 * A runner copies "before" to a file CKPT, the journal to CKPT.dcr-journal, and
 * recovers CKPT (SPEC.md §18.3, R-JNL-3): "replayed" gives "after" and removes the
 * journal; "uncommitted" removes the journal and leaves CKPT as it was; "error" is
 * DCR_E_JOURNAL with both files left byte for byte as they were.
 *
 * This is a writer of the journal made from the text of SPEC.md alone, with
 * xxHash and zstd only: it does not use libdcr nor read its journal code, so that
 * the vectors check the library instead of repeating it. Each record is held
 * here by what it means (the new bytes of a form 0 region; the positions and
 * values of a form 1 one) and serialized with every length and checksum
 * recomputed, so that an invalid vector breaks the one rule it names and a reader
 * gets as far as the check it targets. The few vectors that cannot break a rule
 * alone (a region over 2^31 bytes needs a larger checkpoint) say which earlier
 * rule answers first; vectors with "check_order" break two rules on purpose, to
 * test the order of the checks of §18.3 where it changes the outcome.
 *
 * Everything is deterministic: data comes from one fixed-seed PRNG in program
 * order; zstd frames of the valid vectors depend only on the libzstd version
 * (recorded in the index); the frames of the other vectors that break the zstd
 * profile are written by hand and depend on nothing.
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

#define SEED 0x44434a726e6c3130ull   /* "DCJrnl10" */
#define SEED11 0x44434a726e6c3131ull /* "DCJrnl11": the 1.1 vectors */
#define ZLEVEL 3                   /* zstd level of libzstd-written frames */
#define VECGEN_NAME "mkjournals"
#include "vecgen.h"

/* ------------------------------------------------------------------------ */
/* Basics                                                                    */



/* ------------------------------------------------------------------------ */
/* Position streams (SPEC.md §9.1) and zstd frames (§4.4)                    */

/* The gaps of strictly increasing positions: v0 = p0, vi = pi - p(i-1) - 1. */
static uint64_t gap_at(const uint64_t *pos, size_t i) {
  return i ? pos[i] - pos[i - 1] - 1 : pos[0];
}

static uint64_t rice_bits(const uint64_t *pos, size_t count, unsigned k) {
  uint64_t bits = 0;
  for (size_t i = 0; i < count; i++) bits += (gap_at(pos, i) >> k) + 1 + k;
  return bits;
}

/* R-POS-3: the smallest k in 0..31 with the fewest bits. */
static unsigned rice_canonical(const uint64_t *pos, size_t count) {
  unsigned best = 0;
  uint64_t best_bits = UINT64_MAX;
  for (unsigned k = 0; k < 32; k++) {
    uint64_t b = rice_bits(pos, count, k);
    if (b < best_bits) best_bits = b, best = k;
  }
  return best;
}

/* The byte k, then per gap q = v >> k one-bits, a zero-bit and the k low bits
 * of v, least significant first; bits fill each byte from bit 0. Any k (even one
 * over 31), so that invalid streams can be written. Returns the bit count. */
static uint64_t rice_write(buf *b, unsigned k, const uint64_t *pos, size_t count) {
  unsigned acc = 0, nbits = 0;
  uint64_t total = 0;
  bu8(b, k);
#define PUT_BIT(bit)                                                                             \
  do {                                                                                           \
    acc |= (unsigned)(bit) << nbits;                                                             \
    total++;                                                                                     \
    if (++nbits == 8) bu8(b, acc), acc = 0, nbits = 0;                                           \
  } while (0)
  for (size_t i = 0; i < count; i++) {
    uint64_t v = gap_at(pos, i);
    for (uint64_t q = k < 64 ? v >> k : 0; q; q--) PUT_BIT(1);
    PUT_BIT(0);
    for (unsigned j = 0; j < k; j++) PUT_BIT(j < 64 ? (v >> j) & 1 : 0);
  }
#undef PUT_BIT
  if (nbits) bu8(b, acc);
  return total;
}

/* A frame by libzstd (the valid vectors): checked against the profile of §4.4
 * steps 1-4, so that a libzstd that wrote something else is caught here. */
static void zframe(buf *out, const uint8_t *p, size_t n) {
  size_t cap = ZSTD_compressBound(n), at = out->n;
  bgrow(out, cap);
  size_t z = ZSTD_compress(out->p + out->n, cap, p, n, ZLEVEL);
  if (ZSTD_isError(z)) die("zstd: %s", ZSTD_getErrorName(z));
  out->n += z;
  const uint8_t *f = out->p + at;
  if (z < 6 || f[0] != 0x28 || f[1] != 0xB5 || f[2] != 0x2F || f[3] != 0xFD)
    die("libzstd wrote no zstd frame");
  unsigned fhd = f[4];
  int single = (fhd >> 5) & 1;
  if (fhd & 0x08) die("libzstd set the reserved bit");
  if (fhd & 0x03) die("libzstd wrote a dictionary id");
  if (!single && !(fhd >> 6)) die("libzstd wrote no content size");
  if (!single) {
    unsigned wd = f[5], wlog = 10 + (wd >> 3);
    uint64_t window = ((uint64_t)1 << wlog) + (((uint64_t)1 << wlog) / 8) * (wd & 7);
    uint64_t bound = 1024;
    while (bound < n) bound *= 2;
    if (window > bound) die("libzstd wrote a window over the bound of §4.4");
  }
  if (ZSTD_getFrameContentSize(f, z) != n) die("libzstd declared another content size");
}

/* Frames written by hand (RFC 8878), so that every field can be chosen. All zero
 * gives a frame the profile allows: single segment, an 8-byte Frame_Content_Size,
 * no dictionary id, no checksum, raw blocks of at most 128 KiB. */
typedef struct {
  uint32_t magic;        /* 0: 28 B5 2F FD */
  int no_size;           /* no Frame_Content_Size (then a window descriptor) */
  int multi;             /* a window descriptor although the size is given */
  int window_over;       /* with a window descriptor: window log above the bound */
  int dict;              /* a 1-byte Dictionary_ID holding dict_id */
  uint8_t dict_id;
  int checksum;          /* 1: a content checksum; 2: one that does not match */
  int reserved_bit;      /* set bit 3 of the frame header descriptor */
  int block_type;        /* type of the first block: 0 raw (default), 1 RLE, 3 reserved */
  size_t split;          /* > 0: raw blocks of this size */
  int fcs;               /* Frame_Content_Size field of 1, 2 or 4 bytes; 0: 8 bytes */
  int unused_bit;        /* set bit 4 of the frame header descriptor (to be ignored) */
} zopts;

static unsigned window_log_bound(uint64_t n) {
  unsigned l = 10;
  while (((uint64_t)1 << l) < n) l++;
  return l;
}

static void zblock(buf *out, unsigned type, int last, size_t size, const uint8_t *p) {
  uint32_t h = (uint32_t)(size << 3) | type << 1 | (last ? 1u : 0u);
  uint8_t hb[3] = {(uint8_t)h, (uint8_t)(h >> 8), (uint8_t)(h >> 16)};
  bput(out, hb, 3);
  bput(out, p, type == 1 ? 1 : type == 3 ? 0 : size);
}

/* A frame declaring `declared` bytes around the n bytes at p. */
static void zhand(buf *out, const zopts *o, uint64_t declared, const uint8_t *p, size_t n) {
  int single = !o->no_size && !o->multi;
  bu32(out, o->magic ? o->magic : 0xFD2FB528u);
  unsigned fcs_flag = o->no_size ? 0u : o->fcs == 1 ? 0u : o->fcs == 2 ? 1u : o->fcs == 4 ? 2u : 3u;
  if (o->fcs == 1 && !single) die("zhand: a 1-byte content size needs a single segment");
  bu8(out, fcs_flag << 6 | (single ? 0x20u : 0u) | (o->unused_bit ? 0x10u : 0u) |
               (o->reserved_bit ? 0x08u : 0u) | (o->checksum ? 0x04u : 0u) | (o->dict ? 1u : 0u));
  if (!single) bu8(out, (unsigned)((int)window_log_bound(n) + o->window_over - 10) << 3);
  if (o->dict) bu8(out, o->dict_id);
  if (!o->no_size) {
    if (o->fcs == 1) bu8(out, declared);
    else if (o->fcs == 2) bu16(out, declared - 256);
    else if (o->fcs == 4) bu32(out, declared);
    else bu64(out, declared);
  }
  if (o->block_type == 3) {
    zblock(out, 3, 1, n, p);
  } else if (o->block_type == 1) { /* an RLE block of n bytes p[0] */
    zblock(out, 1, 1, n, p);
  } else {
    size_t step = o->split ? o->split : 131072, at = 0;
    do {
      size_t k = n - at < step ? n - at : step;
      zblock(out, 0, at + k == n, k, p + at);
      at += k;
    } while (at < n);
  }
  if (o->checksum) bu32(out, (uint32_t)XXH64(p, n, 0) ^ (o->checksum == 2 ? 1u : 0u));
}

/* ------------------------------------------------------------------------ */
/* Journals (SPEC.md §18.2)                                                  */

static const uint8_t MAGIC[8] = {0x89, 0x44, 0x43, 0x4A, 0x0D, 0x0A, 0x1A, 0x0A};
static const uint8_t ENDMARK[8] = {0x44, 0x43, 0x4A, 0x45, 0x4E, 0x44, 0x0D, 0x0A};
#define HEADER 64
#define RECHDR 40
#define TRAILER 32

/* A record, by what it means and how it is written. */
typedef struct {
  uint64_t offset, length;
  uint8_t form, esize, comp, reserved;
  uint32_t count;
  buf data;       /* form 0: the region's new bytes; form 1: count * esize values */
  uint64_t *pos;  /* form 1: the positions (strictly increasing) */
  size_t npos;    /* how many: count, unless a vector writes another count */
  int k;          /* form 1: Rice parameter; -1: the canonical one */
  buf payload;    /* set (payload_set) to write these bytes instead of the content */
  int payload_set;
  int stored_set; /* stored_length as given instead of the payload's size */
  uint64_t stored_length;
  int check_set; /* region_check as given instead of computed */
  uint64_t region_check;
} rec;

#define MAXREC 128
typedef struct {
  uint8_t magic[8];
  uint16_t major, minor;
  uint32_t reserved;
  uint64_t file_size;
  uint8_t base_state[16], target_state[16];
  int header_check_set; /* header_check as given */
  uint64_t header_check;
  rec r[MAXREC];
  size_t n;
  buf gap;             /* bytes between the last payload and the trailer */
  int count_set;       /* record_count as given */
  uint64_t record_count;
  int length_set;      /* journal_length as given */
  uint64_t journal_length;
  uint64_t journal_check_xor;
  uint8_t endmark[8];
} jnl;

static void jinit(jnl *j, uint64_t file_size) {
  memset(j, 0, sizeof *j);
  memcpy(j->magic, MAGIC, 8);
  memcpy(j->endmark, ENDMARK, 8);
  j->major = 1;
  j->file_size = file_size;
  for (int i = 0; i < 16; i++) j->base_state[i] = rbyte();
  for (int i = 0; i < 16; i++) j->target_state[i] = rbyte();
}

static rec *radd(jnl *j) {
  if (j->n == MAXREC) die("too many records");
  rec *r = &j->r[j->n++];
  memset(r, 0, sizeof *r);
  r->k = -1;
  return r;
}

/* A form 0 record: the region [offset, offset + length) becomes `bytes`. */
static rec *rec_bytes(jnl *j, uint64_t offset, const buf *bytes, int comp) {
  rec *r = radd(j);
  r->offset = offset;
  r->length = bytes->n;
  r->form = 0;
  r->esize = 1;
  r->comp = (uint8_t)comp;
  r->data = bdup(bytes);
  return r;
}

/* A form 1 record: elements pos[i] of size esize become values i. */
static rec *rec_elems(jnl *j, uint64_t offset, uint64_t length, unsigned esize, const uint64_t *pos,
                      size_t count, const buf *values, int comp) {
  if (values->n != count * esize)
    die("rec_elems: %zu value bytes for %zu elements", values->n, count);
  rec *r = radd(j);
  r->offset = offset;
  r->length = length;
  r->form = 1;
  r->esize = (uint8_t)esize;
  r->comp = (uint8_t)comp;
  r->count = (uint32_t)count;
  r->npos = count;
  r->pos = malloc((count ? count : 1) * sizeof *r->pos);
  if (!r->pos) die("out of memory");
  if (count) memcpy(r->pos, pos, count * sizeof *pos);
  r->data = bdup(values);
  return r;
}

static void rfree(rec *r) {
  bfree(&r->data);
  bfree(&r->payload);
  free(r->pos);
  r->pos = NULL;
}

static void jfree(jnl *j) {
  for (size_t i = 0; i < j->n; i++) rfree(&j->r[i]);
  bfree(&j->gap);
  j->n = 0;
}

static void jcopy(jnl *dst, const jnl *src) {
  *dst = *src;
  for (size_t i = 0; i < src->n; i++) {
    rec *d = &dst->r[i];
    const rec *s = &src->r[i];
    d->data = bdup(&s->data);
    d->payload = bdup(&s->payload);
    d->pos = malloc((s->npos ? s->npos : 1) * sizeof *d->pos);
    if (!d->pos) die("out of memory");
    if (s->npos) memcpy(d->pos, s->pos, s->npos * sizeof *s->pos);
  }
  dst->gap = bdup(&src->gap);
}

/* The record's content (§18.2): form 0 its new bytes; form 1 its position stream
 * (canonical Rice parameter unless r->k says otherwise), then its values. */
static void rec_content(const rec *r, buf *out) {
  if (r->form == 0) {
    bput(out, r->data.p, r->data.n);
    return;
  }
  unsigned k = r->k >= 0 ? (unsigned)r->k : rice_canonical(r->pos, r->npos);
  rice_write(out, k, r->pos, r->npos);
  bput(out, r->data.p, r->data.n);
}

/* Sets the payload to the given content, compressed by libzstd if the record
 * says so. */
static void rec_set_content(rec *r, const buf *content) {
  bfree(&r->payload);
  if (r->comp == 1) zframe(&r->payload, content->p, content->n);
  else bput(&r->payload, content->p, content->n);
  r->payload_set = 1;
}

/* The region once the record is applied to `file` (length bytes), into out. */
static int rec_apply(const rec *r, const buf *file, uint8_t *region) {
  if (r->offset > file->n || r->length > file->n - r->offset) return 0;
  memcpy(region, file->p + r->offset, r->length);
  if (r->form == 0) {
    memcpy(region, r->data.p, r->data.n < r->length ? r->data.n : r->length);
  } else {
    for (size_t i = 0; i < r->npos; i++)
      if ((r->pos[i] + 1) * r->esize <= r->length)
        memcpy(region + r->pos[i] * r->esize, r->data.p + i * r->esize, r->esize);
  }
  return 1;
}

/* The journal's bytes. Region checks are computed on `wbase`, the file its writer
 * saw, unless a record gives its own. */
static void serialize(const jnl *j, const buf *wbase, buf *out) {
  out->n = 0;
  bput(out, j->magic, 8);
  bu16(out, j->major);
  bu16(out, j->minor);
  bu32(out, j->reserved);
  bu64(out, j->file_size);
  bput(out, j->base_state, 16);
  bput(out, j->target_state, 16);
  bu64(out, j->header_check_set ? j->header_check : xxh64(out->p, 56));
  for (size_t i = 0; i < j->n; i++) {
    const rec *r = &j->r[i];
    buf payload = {0};
    if (r->payload_set) {
      bput(&payload, r->payload.p, r->payload.n);
    } else {
      buf content = {0};
      rec_content(r, &content);
      if (r->comp == 1) zframe(&payload, content.p, content.n);
      else bput(&payload, content.p, content.n);
      bfree(&content);
    }
    uint64_t check = r->region_check;
    if (!r->check_set) {
      uint8_t *region = malloc(r->length ? r->length : 1);
      if (!region) die("out of memory");
      check = rec_apply(r, wbase, region) ? xxh64(region, r->length) : 0;
      free(region);
    }
    bu64(out, r->offset);
    bu64(out, r->length);
    bu8(out, r->form);
    bu8(out, r->esize);
    bu8(out, r->comp);
    bu8(out, r->reserved);
    bu32(out, r->count);
    bu64(out, r->stored_set ? r->stored_length : payload.n);
    bu64(out, check);
    bput(out, payload.p, payload.n);
    bfree(&payload);
  }
  bput(out, j->gap.p, j->gap.n);
  bput(out, j->endmark, 8);
  bu64(out, j->count_set ? j->record_count : j->n);
  bu64(out, j->length_set ? j->journal_length : out->n + 16);
  bu64(out, xxh64(out->p, out->n) ^ j->journal_check_xor);
}

/* Recomputes the trailer's journal_check of finished journal bytes. */
static void recheck(buf *b) {
  if (b->n < 8) die("recheck: short journal");
  put64(b->p + b->n - 8, xxh64(b->p, b->n - 8));
}
/* Recomputes header_check, then journal_check. */
static void recheck_all(buf *b) {
  put64(b->p + 56, xxh64(b->p, 56));
  recheck(b);
}

/* The expected result of replaying j onto `file`: every record applied. */
static buf replay(const jnl *j, const buf *file) {
  buf out = bdup(file);
  for (size_t i = 0; i < j->n; i++) {
    const rec *r = &j->r[i];
    if (!rec_apply(r, file, out.p + r->offset)) die("replay: a region beyond the file");
  }
  return out;
}

/* ------------------------------------------------------------------------ */
/* Output                                                                    */

static const char *root;
static json_t *vectors;
static int counts[3];
static const char *const outcomes[3] = {"replayed", "uncommitted", "error"};


static const char *folder = "journal-v1"; /* then journal-v1.1 */

static void write_file(const char *rel, const buf *b, char sha[65]) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s/%s", root, folder, rel);
  write_sha(path, b->p, b->n, sha);
}

/* Checkpoints are shared: a checkpoint with the bytes of one already written is
 * the same file. */
#define MAXCK 256
static struct {
  char rel[256], sha[65];
} cks[MAXCK];
static size_t ncks;

static const char *ckpt_file(const char *name, const buf *b, const char **sha) {
  char s[65];
  sha256_hex(b->p, b->n, s);
  for (size_t i = 0; i < ncks; i++)
    if (!strcmp(cks[i].sha, s)) {
      *sha = cks[i].sha;
      return cks[i].rel;
    }
  if (ncks == MAXCK) die("too many checkpoints");
  snprintf(cks[ncks].rel, sizeof cks[ncks].rel, "ckpt/%s.bin", name);
  for (size_t i = 0; i < ncks; i++)
    if (!strcmp(cks[i].rel, cks[ncks].rel)) die("two checkpoints named %s", name);
  write_file(cks[ncks].rel, b, cks[ncks].sha);
  *sha = cks[ncks].sha;
  return cks[ncks++].rel;
}

typedef struct {
  const char *name;    /* "<outcome>/<short name>" */
  const char *covers;  /* comma-separated SPEC.md ids and sections */
  const char *text;    /* what the vector is and why it has its outcome */
  int order;           /* breaks two rules on purpose: tests the order of §18.3 */
} vec;

/* Writes one vector: `before`, the journal, and for "replayed" the expected
 * `after` (computed here from the journal's meaning). */
static void emit(const vec *v, const buf *before, const buf *journal, const buf *after) {
  int o = 0;
  size_t len = 0;
  while (o < 3 && (len = strlen(outcomes[o]), strncmp(v->name, outcomes[o], len) ||
                                                  v->name[len] != '/'))
    o++;
  if (o == 3) die("%s: the name must start with its outcome", v->name);
  if ((o == 0) != (after != NULL)) die("%s: an after file iff replayed", v->name);
  size_t i;
  json_t *x;
  json_array_foreach(vectors, i, x) {
    if (!strcmp(json_string_value(json_object_get(x, "name")), v->name))
      die("%s: two vectors of that name", v->name);
  }
  const char *short_name = v->name + len + 1;
  char jrel[512], jsha[65], nb[300];
  const char *bsha, *asha = NULL;
  snprintf(jrel, sizeof jrel, "%s.dcr-journal", v->name);
  write_file(jrel, journal, jsha);
  snprintf(nb, sizeof nb, "%s-before", short_name);
  const char *brel = ckpt_file(nb, before, &bsha);
  const char *arel = NULL;
  if (after) {
    snprintf(nb, sizeof nb, "%s-after", short_name);
    arel = ckpt_file(nb, after, &asha);
  }
  json_t *obj = json_pack("{s:s, s:s, s:o, s:s, s:s, s:o}", "name", v->name, "outcome", outcomes[o],
                          "error", o == 2 ? json_string("DCR_E_JOURNAL") : json_null(), "before",
                          brel, "journal", jrel, "after", arel ? json_string(arel) : json_null());
  json_object_set_new(obj, "sha256",
                      json_pack("{s:s, s:s, s:o}", "before", bsha, "journal", jsha, "after",
                                asha ? json_string(asha) : json_null()));
  json_object_set_new(obj, "check_order", json_boolean(v->order));
  json_object_set_new(obj, "covers", csv(v->covers));
  json_object_set_new(obj, "description", json_string(v->text));
  json_array_append_new(vectors, obj);
  counts[o]++;
}

#define V(...) (&(vec){__VA_ARGS__})

/* A valid journal: writes it with its replayed result, after checking that the
 * region checks it carries are those of the result (the generator's own check). */
static void emit_replayed(const vec *v, const buf *before, const jnl *j, const buf *wbase) {
  buf jb = {0};
  serialize(j, wbase, &jb);
  buf after = replay(j, before);
  for (size_t i = 0; i < j->n; i++) {
    const rec *r = &j->r[i];
    buf region = bmem(after.p + r->offset, r->length);
    uint64_t want = r->check_set ? r->region_check : 0;
    if (!r->check_set) {
      uint8_t *reg = malloc(r->length ? r->length : 1);
      if (!reg || !rec_apply(r, wbase, reg)) die("%s: record %zu", v->name, i);
      want = xxh64(reg, r->length);
      free(reg);
    }
    if (xxh64(region.p, region.n) != want)
      die("%s: record %zu does not replay to its check", v->name, i);
    bfree(&region);
  }
  if (before->n != j->file_size) die("%s: file_size is not the checkpoint's", v->name);
  emit(v, before, &jb, &after);
  bfree(&jb);
  bfree(&after);
}

static void emit_journal(const vec *v, const buf *before, const jnl *j, const buf *wbase) {
  buf jb = {0};
  serialize(j, wbase, &jb);
  emit(v, before, &jb, NULL);
  bfree(&jb);
}

/* ------------------------------------------------------------------------ */
/* Data                                                                      */

/* `count` sorted distinct positions below n, drawn at random. */
static uint64_t *rpositions(uint64_t n, size_t count) {
  if (count > n) die("rpositions: %zu of %llu", count, (unsigned long long)n);
  uint8_t *taken = calloc(n, 1);
  uint64_t *pos = malloc((count ? count : 1) * sizeof *pos);
  if (!taken || !pos) die("out of memory");
  for (size_t i = 0; i < count; i++) {
    uint64_t p;
    do p = rbelow(n); while (taken[p]);
    taken[p] = 1;
  }
  size_t k = 0;
  for (uint64_t p = 0; p < n; p++)
    if (taken[p]) pos[k++] = p;
  free(taken);
  return pos;
}

/* New values for positioned elements: each differs from the current element. */
static buf rvalues(const buf *file, uint64_t offset, unsigned esize, const uint64_t *pos,
                   size_t count) {
  buf v = rbytes(count * esize);
  for (size_t i = 0; i < count; i++) {
    const uint8_t *cur = file->p + offset + pos[i] * esize;
    if (!memcmp(v.p + i * esize, cur, esize)) v.p[i * esize] ^= 0x5A;
  }
  return v;
}

/* Bytes that compress: a few short random words repeated. */
static buf compressible(size_t n) {
  buf words = rbytes(24), b = {0};
  while (b.n < n) {
    size_t w = (size_t)rbelow(4) * 6;
    bput(&b, words.p + w, n - b.n < 6 ? n - b.n : 6);
  }
  bfree(&words);
  return b;
}

/* A region of n new bytes that each differ from the file's. */
static buf rnew(const buf *file, uint64_t offset, size_t n) {
  buf b = rbytes(n);
  for (size_t i = 0; i < n; i++)
    if (b.p[i] == file->p[offset + i]) b.p[i] ^= 0xA5;
  return b;
}

/* ------------------------------------------------------------------------ */
/* The model journal: most vectors are a copy of it with one thing changed.  */

#define A_SIZE 4133u /* not a multiple of 8: a region ends exactly at an odd end */
static buf A;        /* the checkpoint of most vectors */
static jnl M;        /* the model journal on A */

/* r0: form 0 stored, [16, 116); r1: form 1 elements of 2 bytes, zstd, [200, 712),
 * 20 of 256 elements; r2: form 1 elements of 4 bytes, stored, [712, 1112) right
 * after r1, 7 of 100 elements; r3: form 0 zstd, [3833, 4133), ending at the end of
 * the file. */
static void make_model(void) {
  A = rbytes(A_SIZE);
  jinit(&M, A_SIZE);
  buf b0 = rnew(&A, 16, 100);
  rec_bytes(&M, 16, &b0, 0);
  uint64_t *p1 = rpositions(256, 20);
  buf v1 = rvalues(&A, 200, 2, p1, 20);
  rec_elems(&M, 200, 512, 2, p1, 20, &v1, 1);
  uint64_t *p2 = rpositions(100, 7);
  buf v2 = rvalues(&A, 712, 4, p2, 7);
  rec_elems(&M, 712, 400, 4, p2, 7, &v2, 0);
  buf b3 = compressible(300);
  rec_bytes(&M, A_SIZE - 300, &b3, 1);
  bfree(&b0);
  bfree(&v1);
  bfree(&v2);
  bfree(&b3);
  free(p1);
  free(p2);
}

/* A copy of the model to change. */
static jnl *model(void) {
  static jnl j;
  jfree(&j);
  jcopy(&j, &M);
  return &j;
}

static buf model_bytes(void) {
  buf b = {0};
  serialize(&M, &A, &b);
  return b;
}

/* The offset of record i's header in the serialized journal j. */
static size_t rec_at(const jnl *j, size_t i) {
  buf b = {0};
  serialize(j, &A, &b);
  size_t at = HEADER;
  for (size_t k = 0; k < i; k++) {
    uint64_t stored = 0;
    for (int s = 0; s < 8; s++) stored |= (uint64_t)b.p[at + 24 + (size_t)s] << (8 * s);
    at += RECHDR + stored;
  }
  bfree(&b);
  return at;
}

/* ------------------------------------------------------------------------ */
/* Vectors: replayed                                                         */

static void replayed_vectors(void) {
  const char *R = "R-JNL-1,R-JNL-3,§18.2,§18.3,§18.4";

  emit_replayed(V(.name = "replayed/model",
                  .covers = "R-JNL-1,R-JNL-3,R-POS-3,R-CMP-4,§18.2,§18.3,§18.4",
                  .text = "the journal most other vectors are made from: four records on a "
                          "4133-byte checkpoint, form 0 stored at [16, 116), form 1 with 2-byte "
                          "elements zstd-compressed at [200, 712), form 1 with 4-byte elements "
                          "stored at [712, 1112) (starting where the previous region ends), "
                          "form 0 zstd at [3833, 4133) (ending at the end of the file)"),
                &A, &M, &A);

  { /* form 0, one record, stored and zstd */
    for (int comp = 0; comp < 2; comp++) {
      jnl j;
      jinit(&j, A_SIZE);
      buf b = comp ? compressible(1500) : rnew(&A, 1000, 1500);
      rec_bytes(&j, 1000, &b, comp);
      emit_replayed(comp ? V(.name = "replayed/form0-zstd",
                             .covers = "R-JNL-1,R-JNL-3,R-CMP-4,§18.2",
                             .text = "one form 0 record, its 1500 new bytes in a zstd frame "
                                     "written by libzstd")
                         : V(.name = "replayed/form0-stored", .covers = R,
                             .text = "one form 0 record (bytes), stored: the region [1000, 2500) "
                                     "is the payload"),
                    &A, &j, &A);
      bfree(&b);
      jfree(&j);
    }
  }

  { /* form 1, element sizes 1, 2, 4, 8; stored and zstd */
    static const unsigned sizes[4] = {1, 2, 4, 8};
    for (int s = 0; s < 4; s++)
      for (int comp = 0; comp < 2; comp++) {
        unsigned e = sizes[s];
        uint64_t offset = 64 + 8 * (uint64_t)s, n = 2048 / e;
        size_t count = (size_t)(n / 10 + 3);
        uint64_t *pos = rpositions(n, count);
        buf vals = rvalues(&A, offset, e, pos, count);
        jnl j;
        jinit(&j, A_SIZE);
        rec_elems(&j, offset, n * e, e, pos, count, &vals, comp);
        char name[128], text[512];
        snprintf(name, sizeof name, "replayed/form1-e%u-%s", e, comp ? "zstd" : "stored");
        snprintf(text, sizeof text,
                 "one form 1 record (elements) of %u-byte elements, %s: %zu of the %llu "
                 "elements of [%llu, %llu) set, every other byte of the region kept",
                 e, comp ? "a zstd frame written by libzstd" : "stored", count,
                 (unsigned long long)n, (unsigned long long)offset,
                 (unsigned long long)(offset + n * e));
        emit_replayed(V(.name = name,
                        .covers = comp ? "R-JNL-1,R-JNL-3,R-POS-1,R-POS-3,R-CMP-4,§18.2"
                                       : "R-JNL-1,R-JNL-3,R-POS-1,R-POS-3,§18.2",
                        .text = text),
                      &A, &j, &A);
        bfree(&vals);
        free(pos);
        jfree(&j);
      }
  }

  { /* half written: the model after a crash during its replay */
    buf half = bdup(&A);
    const rec *r = M.r;
    memcpy(half.p + r[0].offset, r[0].data.p, r[0].data.n); /* r0 done */
    for (size_t i = 0; i < r[1].count / 2; i++)            /* r1: half its elements */
      memcpy(half.p + r[1].offset + r[1].pos[i] * 2, r[1].data.p + i * 2, 2);
    /* r2: one element torn, 2 of its 4 bytes written */
    memcpy(half.p + r[2].offset + r[2].pos[3] * 4, r[2].data.p + 3 * 4, 2);
    memcpy(half.p + r[3].offset, r[3].data.p, 150); /* r3: its first half */
    emit_replayed(V(.name = "replayed/half-written", .covers = R,
                    .text = "the model journal on a checkpoint left by a replay that was "
                            "interrupted: the first region written, half the elements of the "
                            "second, one element of the third torn (2 of its 4 bytes), the "
                            "first 150 bytes of the fourth. Records write values, so replaying "
                            "gives the same result (§18.4)"),
                  &half, &M, &A);
    bfree(&half);
  }

  { /* fully written: replayed already, journal not yet removed */
    buf done = replay(&M, &A);
    emit_replayed(V(.name = "replayed/fully-written", .covers = R,
                    .text = "the model journal on a checkpoint where every region is already "
                            "written (a crash after the replay, before the journal was removed): "
                            "replaying changes nothing and removes the journal"),
                  &done, &M, &A);
    bfree(&done);
  }

  { /* zero records */
    jnl j;
    jinit(&j, A_SIZE);
    emit_replayed(V(.name = "replayed/zero-records", .covers = R,
                    .text = "a committed journal of no records (96 bytes: header and trailer): "
                            "it replays to the checkpoint unchanged, and is removed"),
                  &A, &j, &A);
    jfree(&j);
  }

  { /* an empty checkpoint */
    jnl j;
    jinit(&j, 0);
    buf empty = {0};
    emit_replayed(V(.name = "replayed/empty-checkpoint", .covers = R,
                    .text = "file_size 0, no records, on an empty checkpoint"),
                  &empty, &j, &empty);
    jfree(&j);
  }

  { /* the whole file, one byte, adjacent regions */
    jnl j;
    jinit(&j, A_SIZE);
    buf all = rnew(&A, 0, A_SIZE);
    rec_bytes(&j, 0, &all, 0);
    emit_replayed(V(.name = "replayed/whole-file", .covers = R,
                    .text = "one form 0 record over the whole file, [0, file_size)"),
                  &A, &j, &A);
    jfree(&j);
    bfree(&all);

    jinit(&j, A_SIZE);
    buf one = rnew(&A, A_SIZE - 1, 1);
    rec_bytes(&j, A_SIZE - 1, &one, 0);
    emit_replayed(V(.name = "replayed/last-byte", .covers = R,
                    .text = "one form 0 record of one byte, the last byte of the file"),
                  &A, &j, &A);
    jfree(&j);
    bfree(&one);
  }

  { /* many small records, mixed, adjacent and apart */
    jnl j;
    jinit(&j, A_SIZE);
    uint64_t at = 0;
    for (int i = 0; i < 100; i++) {
      at += rbelow(3) * 7; /* adjacent about a third of the time */
      uint64_t len = 1 + rbelow(8);
      if (i % 3 == 1) {
        unsigned e = (unsigned)(1u << rbelow(4));
        len = e * (1 + rbelow(4));
        uint64_t n = len / e;
        size_t count = (size_t)(1 + rbelow(n));
        uint64_t *pos = rpositions(n, count);
        buf vals = rvalues(&A, at, e, pos, count);
        rec_elems(&j, at, len, e, pos, count, &vals, 0);
        bfree(&vals);
        free(pos);
      } else {
        buf b = rnew(&A, at, (size_t)len);
        rec_bytes(&j, at, &b, i % 7 == 0);
        bfree(&b);
      }
      at += len;
    }
    if (at > A_SIZE) die("many-records runs past the file");
    emit_replayed(V(.name = "replayed/many-records", .covers = R,
                    .text = "100 small records (1 to 32 bytes), forms 0 and 1, every element "
                            "size, some compressed, some regions adjacent: a reader may check "
                            "them in any order or on several threads (§18.3)"),
                  &A, &j, &A);
    jfree(&j);
  }

  { /* form 1 details */
    jnl j;
    /* every element: k = 0, all gaps 0 */
    jinit(&j, A_SIZE);
    uint64_t *pos = rpositions(64, 64);
    buf vals = rvalues(&A, 2600, 4, pos, 64);
    rec_elems(&j, 2600, 256, 4, pos, 64, &vals, 0);
    emit_replayed(V(.name = "replayed/form1-every-element", .covers = "R-JNL-1,R-POS-3,§18.2",
                    .text = "form 1 with count = length / element_size (64 of 64 4-byte "
                            "elements): every gap 0, Rice parameter 0"),
                  &A, &j, &A);
    jfree(&j);
    bfree(&vals);
    free(pos);

    /* one element, the last one: one large gap */
    jinit(&j, A_SIZE);
    uint64_t last = 1023;
    vals = rvalues(&A, 100, 2, &last, 1);
    rec_elems(&j, 100, 2048, 2, &last, 1, &vals, 0);
    emit_replayed(V(.name = "replayed/form1-last-element",
                    .covers = "R-JNL-1,R-POS-1,R-POS-3,§18.2",
                    .text = "form 1, one element set: the last of 1024 (position n - 1 = 1023, "
                            "the largest allowed), Rice parameter 9"),
                  &A, &j, &A);
    jfree(&j);
    bfree(&vals);

    /* the example of §9.1: positions 1, 4, 8, k = 1, stream 01 A6 */
    jinit(&j, A_SIZE);
    uint64_t ex[3] = {1, 4, 8};
    vals = rvalues(&A, 3000, 1, ex, 3);
    rec_elems(&j, 3000, 16, 1, ex, 3, &vals, 0);
    emit_replayed(V(.name = "replayed/form1-spec-example", .covers = "R-JNL-1,R-POS-3,§9.1",
                    .text = "form 1 with the positions of the example of §9.1 (1, 4, 8 in 16 "
                            "one-byte elements): the content is 01 A6 and the 3 values"),
                  &A, &j, &A);
    jfree(&j);
    bfree(&vals);

    /* a tie: gap 2 costs 3 bits with k = 0 and with k = 1; the canonical k is 0 */
    jinit(&j, A_SIZE);
    uint64_t two = 2;
    vals = rvalues(&A, 3100, 1, &two, 1);
    rec_elems(&j, 3100, 8, 1, &two, 1, &vals, 0);
    emit_replayed(V(.name = "replayed/form1-rice-tie", .covers = "R-JNL-1,R-POS-3",
                    .text = "form 1, one position 2 (gap 2): bits(0) = bits(1) = 3, so the "
                            "canonical Rice parameter is 0, the smaller (R-POS-3)"),
                  &A, &j, &A);
    jfree(&j);
    bfree(&vals);

    /* unaligned 8-byte elements */
    jinit(&j, A_SIZE);
    pos = rpositions(40, 9);
    vals = rvalues(&A, 3, 8, pos, 9);
    rec_elems(&j, 3, 320, 8, pos, 9, &vals, 1);
    emit_replayed(V(.name = "replayed/form1-unaligned", .covers = "R-JNL-1,§18.2",
                    .text = "form 1 with 8-byte elements in a region at offset 3: nothing "
                            "asks a region to be aligned to its element size"),
                  &A, &j, &A);
    jfree(&j);
    bfree(&vals);
    free(pos);

    /* values equal to the current ones */
    jinit(&j, A_SIZE);
    pos = rpositions(100, 10);
    vals = bmem(A.p + 0, 0);
    for (size_t i = 0; i < 10; i++) bput(&vals, A.p + 500 + pos[i] * 2, 2);
    rec_elems(&j, 500, 200, 2, pos, 10, &vals, 0);
    emit_replayed(V(.name = "replayed/form1-same-values", .covers = "R-JNL-1,§18.2",
                    .text = "form 1 whose values are the elements' current values: records "
                            "write values, and nothing asks a written value to differ"),
                  &A, &j, &A);
    jfree(&j);
    bfree(&vals);
    free(pos);
  }

  { /* versions and informative fields */
    jnl *j = model();
    j->minor = 1;
    emit_replayed(V(.name = "replayed/minor-1", .covers = "R-JNL-1,§18.5",
                    .text = "the model journal with minor version 1: a reader of 1.0 reads a "
                            "later minor version, and fails only on a form or compression it "
                            "does not know (§18.5)"),
                  &A, j, &A);
    j->minor = 0xFFFF;
    emit_replayed(V(.name = "replayed/minor-65535", .covers = "R-JNL-1,§18.5",
                    .text = "the model journal with minor version 65535"),
                  &A, j, &A);
    j->minor = 0;
    memset(j->base_state, 0, 16);
    memset(j->target_state, 0xFF, 16);
    emit_replayed(V(.name = "replayed/states-informative", .covers = "R-JNL-1,§18.2",
                    .text = "the model journal with base_state all zero and target_state all "
                            "0xFF: the state ids are not checked when replaying (the journal "
                            "carries no bundle and does not read safetensors)"),
                  &A, j, &A);
  }

  { /* a form 0 journal replayed onto another file of the same size */
    buf other = rbytes(A_SIZE);
    jnl j;
    jinit(&j, A_SIZE);
    buf b = rnew(&A, 40, 300);
    rec_bytes(&j, 40, &b, 0);
    emit_replayed(V(.name = "replayed/form0-other-file", .covers = "R-JNL-1,§18.3",
                    .text = "a form 0 journal made for one file, found beside another file of "
                            "the same size: a form 0 record's region_check depends on its "
                            "content only, so nothing in §18.3 tells the files apart and the "
                            "journal replays (compare error/form1-other-file)"),
                  &other, &j, &A);
    jfree(&j);
    bfree(&b);
    bfree(&other);
  }

  { /* hand-made zstd frames the profile allows, on the model's last record */
    const rec *r3 = &M.r[3];
    static const struct {
      const char *name, *text;
      zopts o;
    } hand[] = {
        {"zstd-raw-blocks", "the last record's frame written by hand: single segment, 8-byte "
                            "content size, raw blocks of 100 bytes",
         {.split = 100}},
        {"zstd-checksum", "the last record's frame with a content checksum that matches",
         {.checksum = 1}},
        {"zstd-window-at-bound", "the last record's frame with a window descriptor (not single "
                                 "segment) whose window is exactly the bound of §4.4 step 4, 1024",
         {.multi = 1}},
        {"zstd-dictionary-id-0", "the last record's frame with a 1-byte Dictionary_ID field of 0 "
                                 "(allowed: absent or 0)",
         {.dict = 1}},
        {"zstd-content-size-2-bytes", "the last record's frame with a 2-byte Frame_Content_Size "
                                      "field (300 stored as 300 - 256 = 44)",
         {.fcs = 2}},
        {"zstd-unused-bit", "the last record's frame with the unused bit (bit 4) of its frame "
                            "header descriptor set: ignored, as RFC 8878 and §4.4 step 1 say",
         {.unused_bit = 1}},
    };
    for (size_t h = 0; h < sizeof hand / sizeof hand[0]; h++) {
      jnl *j = model();
      rec *r = &j->r[3];
      bfree(&r->payload);
      zhand(&r->payload, &hand[h].o, r3->data.n, r3->data.p, r3->data.n);
      r->payload_set = 1;
      char name[128];
      snprintf(name, sizeof name, "replayed/%s", hand[h].name);
      emit_replayed(V(.name = name, .covers = "R-JNL-1,R-CMP-1,R-CMP-4,§4.4",
                      .text = hand[h].text),
                    &A, j, &A);
    }
    /* a 1-byte content size: a region under 256 bytes */
    jnl j;
    jinit(&j, A_SIZE);
    buf small = rnew(&A, 2900, 200);
    rec *r = rec_bytes(&j, 2900, &small, 1);
    zhand(&r->payload, &(zopts){.fcs = 1}, 200, small.p, 200);
    r->payload_set = 1;
    emit_replayed(V(.name = "replayed/zstd-content-size-1-byte", .covers = "R-JNL-1,R-CMP-4,§4.4",
                    .text = "a form 0 record of 200 bytes whose frame (single segment) has a "
                            "1-byte Frame_Content_Size field"),
                  &A, &j, &A);
    jfree(&j);
    bfree(&small);
    /* an RLE block */
    jinit(&j, A_SIZE);
    buf run = {0};
    bfill(&run, 0x7E, 700);
    r = rec_bytes(&j, 2000, &run, 1);
    zhand(&r->payload, &(zopts){.block_type = 1}, 700, run.p, 700);
    r->payload_set = 1;
    emit_replayed(V(.name = "replayed/zstd-rle-block", .covers = "R-JNL-1,R-CMP-1,R-CMP-4,§4.4",
                    .text = "a form 0 record of 700 bytes 0x7E, its frame one RLE block "
                            "written by hand"),
                  &A, &j, &A);
    jfree(&j);
    bfree(&run);
  }
}

/* ------------------------------------------------------------------------ */
/* Vectors: uncommitted                                                      */

static void uncommitted_vectors(void) {
  const char *U = "R-JNL-1,R-JNL-3,§18.3";
  buf mb = model_bytes();
  buf b;

  b = (buf){0};
  emit(V(.name = "uncommitted/empty", .covers = U,
         .text = "an empty journal file (a crash right after it was created): step 1, shorter "
                 "than 64 bytes"),
       &A, &b, NULL);

  b = bmem(mb.p, 40);
  emit(V(.name = "uncommitted/40-bytes", .covers = U,
         .text = "the first 40 bytes of the model journal (its header cut short): step 1"),
       &A, &b, NULL);
  bfree(&b);

  b = bmem(mb.p, 63);
  emit(V(.name = "uncommitted/63-bytes", .covers = U,
         .text = "the first 63 bytes of the model journal: step 1, one byte short of a header"),
       &A, &b, NULL);
  bfree(&b);

  b = bdup(&mb);
  memset(b.p, 0, 8);
  recheck_all(&b);
  emit(V(.name = "uncommitted/zero-magic", .covers = U,
         .text = "the model journal with its first 8 bytes zero (a header whose first block "
                 "never reached the disk), header_check and journal_check recomputed: step 1"),
       &A, &b, NULL);
  bfree(&b);

  b = (buf){0};
  bfill(&b, 0, 4096);
  emit(V(.name = "uncommitted/all-zero", .covers = U,
         .text = "4096 zero bytes (a file whose size reached the disk but not its data): step 1"),
       &A, &b, NULL);
  bfree(&b);

  b = bmem(mb.p, 64);
  emit(V(.name = "uncommitted/header-only", .covers = U,
         .text = "the model journal's 64-byte header alone: step 6, shorter than 96 bytes"),
       &A, &b, NULL);
  bfree(&b);

  b = bdup(&mb);
  b.p[56] ^= 0x01;
  recheck(&b);
  emit(V(.name = "uncommitted/torn-header-check", .covers = U,
         .text = "the model journal with header_check off by one bit (journal_check recomputed "
                 "over the file as it is): step 4, a torn header, although the trailer checks"),
       &A, &b, NULL);
  bfree(&b);

  b = bdup(&mb);
  b.p[20] ^= 0x40; /* file_size */
  recheck(&b);
  emit(V(.name = "uncommitted/torn-header-field", .covers = U,
         .text = "the model journal with a bit of file_size flipped, header_check left as it "
                 "was (journal_check recomputed): step 4"),
       &A, &b, NULL);
  bfree(&b);

  b = bmem(mb.p, mb.n - TRAILER);
  emit(V(.name = "uncommitted/no-trailer", .covers = U,
         .text = "the model journal without its trailer (a crash before the trailer was "
                 "written): step 6"),
       &A, &b, NULL);
  bfree(&b);

  b = bmem(mb.p, rec_at(&M, 1) + 50);
  emit(V(.name = "uncommitted/cut-in-records", .covers = U,
         .text = "the model journal cut 50 bytes into its second record: step 6 (the last 32 "
                 "bytes are not a trailer)"),
       &A, &b, NULL);
  bfree(&b);

  b = bmem(mb.p, mb.n - 1);
  emit(V(.name = "uncommitted/cut-in-trailer", .covers = U,
         .text = "the model journal less its last byte: step 6"),
       &A, &b, NULL);
  bfree(&b);

  b = bdup(&mb);
  memset(b.p + b.n - TRAILER, 0, TRAILER);
  emit(V(.name = "uncommitted/trailer-zero", .covers = U,
         .text = "the model journal with its 32 trailer bytes zero (the size reached the disk, "
                 "the trailer did not): step 6, no end mark"),
       &A, &b, NULL);
  bfree(&b);

  b = bdup(&mb);
  b.p[b.n - TRAILER + 7] = 0x00;
  recheck(&b);
  emit(V(.name = "uncommitted/wrong-end-mark", .covers = U,
         .text = "the model journal with the end mark's last byte 00 (journal_check "
                 "recomputed): step 6"),
       &A, &b, NULL);
  bfree(&b);

  for (int d = -1; d <= 1; d += 2) {
    b = bdup(&mb);
    put64(b.p + b.n - 16, (uint64_t)((int64_t)b.n + d));
    recheck(&b);
    emit(d < 0 ? V(.name = "uncommitted/journal-length-short", .covers = U,
                   .text = "the model journal with journal_length one less than the file's size "
                           "(journal_check recomputed): step 6")
               : V(.name = "uncommitted/journal-length-long", .covers = U,
                   .text = "the model journal with journal_length one more than the file's size "
                           "(journal_check recomputed): step 6"),
         &A, &b, NULL);
    bfree(&b);
  }

  b = bdup(&mb);
  b.p[b.n - 1] ^= 0x80;
  emit(V(.name = "uncommitted/wrong-journal-check", .covers = U,
         .text = "the model journal with journal_check off by one bit: step 6"),
       &A, &b, NULL);
  bfree(&b);

  b = bdup(&mb);
  b.p[rec_at(&M, 2) + 45] ^= 0x10; /* a payload byte of record 2 */
  emit(V(.name = "uncommitted/payload-bit-flip", .covers = U,
         .text = "the model journal with one bit of a record's payload flipped: journal_check "
                 "does not match, step 6 (a record that was not fully written)"),
       &A, &b, NULL);
  bfree(&b);

  b = bdup(&mb);
  bu8(&b, 0);
  emit(V(.name = "uncommitted/byte-after-trailer", .covers = U,
         .text = "the model journal followed by one zero byte: its last 32 bytes do not start "
                 "with the end mark, step 6"),
       &A, &b, NULL);
  bfree(&b);

  b = bdup(&mb);
  bfill(&b, 0, 4096 - mb.n % 4096);
  emit(V(.name = "uncommitted/zero-padded", .covers = U,
         .text = "the model journal padded with zero bytes to a multiple of 4096 (a file system "
                 "that extended the file without its data): step 6"),
       &A, &b, NULL);
  bfree(&b);

  bfree(&mb);
}

/* ------------------------------------------------------------------------ */
/* Vectors: errors (DCR_E_JOURNAL)                                           */

static void header_error_vectors(void) {
  const char *E2 = "R-JNL-1,R-JNL-3,§18.3";
  buf mb = model_bytes(), b;

  b = bdup(&mb);
  b.p[7] = 0x0B;
  recheck_all(&b);
  emit(V(.name = "error/bad-magic", .covers = E2,
         .text = "step 2: the magic's last byte 0B instead of 0A (checksums recomputed): not a "
                 "journal, neither replayed nor removed"),
       &A, &b, NULL);
  bfree(&b);

  b = bdup(&mb);
  static const uint8_t png[8] = {0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A};
  memcpy(b.p, png, 8);
  recheck_all(&b);
  emit(V(.name = "error/png-magic", .covers = E2,
         .text = "step 2: the PNG magic 89 'PNG' 0D 0A 1A 0A in place of the journal's (checksums "
                 "recomputed)"),
       &A, &b, NULL);
  bfree(&b);

  b = rbytes(200);
  b.p[0] |= 1;
  emit(V(.name = "error/random-bytes", .covers = E2,
         .text = "step 2: 200 random bytes (a file that is not a journal, at least 64 bytes "
                 "long, its first 8 bytes not zero): neither replayed nor removed"),
       &A, &b, NULL);
  bfree(&b);

  static const uint16_t majors[3] = {2, 0, 0xFFFF};
  static const char *const mnames[3] = {"error/major-2", "error/major-0", "error/major-65535"};
  for (int m = 0; m < 3; m++) {
    jnl *j = model();
    j->major = majors[m];
    char text[256];
    snprintf(text, sizeof text,
             "step 3: the model journal with major version %u (checksums recomputed): a layout "
             "this reader does not know is never dropped as torn",
             majors[m]);
    emit_journal(V(.name = mnames[m], .covers = "R-JNL-1,R-JNL-3,§18.3,§18.5", .text = text), &A,
                 j, &A);
  }

  static const uint32_t res[2] = {1, 0x80000000u};
  static const char *const rnames[2] = {"error/header-reserved-bit-0",
                                        "error/header-reserved-bit-31"};
  for (int i = 0; i < 2; i++) {
    jnl *j = model();
    j->reserved = res[i];
    char text[256];
    snprintf(text, sizeof text,
             "step 5: the model journal with reserved = 0x%08x, header_check and journal_check "
             "recomputed",
             res[i]);
    emit_journal(V(.name = rnames[i], .covers = E2, .text = text), &A, j, &A);
  }
  bfree(&mb);
}

/* Step 7: the layout of the records. */
static void record_error_vectors(void) {
  const char *E7 = "R-JNL-1,R-JNL-3,§18.3";
  jnl *j;
  size_t space; /* bytes between header and trailer in the model */
  {
    buf mb = model_bytes();
    space = mb.n - HEADER - TRAILER;
    bfree(&mb);
  }

  j = model();
  j->count_set = 1;
  j->record_count = space / RECHDR + 1;
  emit_journal(V(.name = "error/record-count-does-not-fit", .covers = E7,
                 .text = "step 7: record_count one more than the records of 40 bytes that fit "
                         "between the header and the trailer"),
               &A, j, &A);

  j = model();
  j->count_set = 1;
  j->record_count = 5;
  emit_journal(V(.name = "error/record-count-one-more", .covers = E7,
                 .text = "step 7: record_count 5 with 4 records (5 record headers would fit): "
                         "the fifth record's header does not lie before the trailer"),
               &A, j, &A);

  j = model();
  j->count_set = 1;
  j->record_count = (uint64_t)1 << 61;
  emit_journal(V(.name = "error/record-count-2-61", .covers = E7,
                 .text = "step 7: record_count 2^61, whose product with 40 is 0 modulo 2^64: a "
                         "reader must compare without overflow (and must not allocate for it)"),
               &A, j, &A);

  j = model();
  j->count_set = 1;
  j->record_count = UINT64_MAX;
  emit_journal(V(.name = "error/record-count-max", .covers = E7,
                 .text = "step 7: record_count 2^64 - 1 (must not be allocated for)"),
               &A, j, &A);

  j = model();
  j->count_set = 1;
  j->record_count = 3;
  emit_journal(V(.name = "error/record-count-one-less", .covers = E7,
                 .text = "step 7: record_count 3 with 4 records: the third record's payload "
                         "does not end where the trailer starts"),
               &A, j, &A);

  j = model();
  bfill(&j->gap, 0, 1);
  emit_journal(V(.name = "error/byte-before-trailer", .covers = E7,
                 .text = "step 7: one zero byte between the last record's payload and the "
                         "trailer"),
               &A, j, &A);

  j = model();
  bfill(&j->gap, 0, RECHDR);
  emit_journal(V(.name = "error/zero-record-before-trailer", .covers = E7,
                 .text = "step 7: 40 zero bytes (what an empty record header would be) between "
                         "the last record and the trailer, record_count 4"),
               &A, j, &A);

  {
    jnl z;
    jinit(&z, A_SIZE);
    bfill(&z.gap, 0, 8);
    emit_journal(V(.name = "error/zero-records-with-bytes", .covers = E7,
                   .text = "step 7: record_count 0 and 8 bytes between the header and the "
                           "trailer. §18.2: a journal is a header, records and a trailer, so "
                           "with no records the trailer starts at 64 (§18.3 step 7 says so "
                           "only of a last record: see the report on this vector)"),
                 &A, &z, &A);
    jfree(&z);
  }

  j = model();
  j->count_set = 1;
  j->record_count = 0;
  emit_journal(V(.name = "error/record-count-zero-with-records", .covers = E7,
                 .text = "step 7: record_count 0 in a journal that holds 4 records"),
               &A, j, &A);

  /* The fields of one record, each alone. */
  j = model();
  j->r[1].form = 2;
  emit_journal(V(.name = "error/form-2", .covers = E7,
                 .text = "step 7: the second record's form is 2 (unknown to a 1.0 reader, §18.5)"),
               &A, j, &A);

  j = model();
  j->r[3].form = 0xFF;
  emit_journal(V(.name = "error/form-255", .covers = E7,
                 .text = "step 7: the last record's form is 255"),
               &A, j, &A);

  j = model();
  j->r[2].comp = 2;
  emit_journal(V(.name = "error/compression-2", .covers = E7,
                 .text = "step 7: the third record's compression is 2 (unknown, §18.5); its "
                         "payload is the stored content"),
               &A, j, &A);

  j = model();
  j->r[0].reserved = 1;
  emit_journal(V(.name = "error/record-reserved", .covers = E7,
                 .text = "step 7: the first record's reserved byte is 1"),
               &A, j, &A);

  j = model();
  j->r[0].esize = 2;
  emit_journal(V(.name = "error/form0-element-size-2", .covers = E7,
                 .text = "step 7: a form 0 record with element_size 2 (form 0 has 1)"),
               &A, j, &A);

  j = model();
  j->r[0].count = 1;
  emit_journal(V(.name = "error/form0-count-1", .covers = E7,
                 .text = "step 7: a form 0 record with count 1 (form 0 has 0)"),
               &A, j, &A);

  static const uint8_t bad_sizes[3] = {0, 3, 16};
  for (int s = 0; s < 3; s++) {
    j = model();
    rec *r = &j->r[2]; /* length 400: a multiple of 16 too */
    buf c = {0};
    rec_content(r, &c);
    rec_set_content(r, &c);
    bfree(&c);
    r->esize = bad_sizes[s];
    if (bad_sizes[s] == 3) r->length = 396; /* a multiple of 3, so that only the size is wrong */
    r->check_set = 1;
    r->region_check = 0;
    char name[64], text[256];
    snprintf(name, sizeof name, "error/form1-element-size-%u", bad_sizes[s]);
    snprintf(text, sizeof text,
             "step 7: the third record (form 1, length %u) with element_size %u (form 1 has "
             "1, 2, 4 or 8); its payload is the content written for 4-byte elements",
             bad_sizes[s] == 3 ? 396u : 400u, bad_sizes[s]);
    emit_journal(V(.name = name, .covers = E7, .text = text), &A, j, &A);
  }

  j = model();
  j->r[2].count = 0;
  {
    buf c = {0};
    bu8(&c, 0); /* the content of no positions: a Rice parameter byte, no values */
    rec_set_content(&j->r[2], &c);
    bfree(&c);
    j->r[2].check_set = 1;
    j->r[2].region_check = xxh64(A.p + 712, 400); /* the region as it is */
  }
  emit_journal(V(.name = "error/form1-count-0", .covers = E7,
                 .text = "step 7: a form 1 record with count 0 (form 1 has 1 to length / "
                         "element_size); its payload is a Rice parameter byte alone"),
               &A, j, &A);

  j = model();
  {
    rec *r = &j->r[2];
    buf c = {0};
    rec_content(r, &c);
    rec_set_content(r, &c);
    bfree(&c);
    r->count = 101; /* n = 100 */
  }
  emit_journal(V(.name = "error/form1-count-over-n", .covers = E7,
                 .text = "step 7: a form 1 record of 100 4-byte elements with count 101; its "
                         "payload is the content of its 7 positions"),
               &A, j, &A);

  j = model();
  j->r[0].length = 0;
  j->r[0].stored_set = 1;
  j->r[0].stored_length = j->r[0].data.n;
  emit_journal(V(.name = "error/length-0", .covers = E7,
                 .text = "step 7: a form 0 record with length 0 (its payload still the 100 "
                         "bytes its stored_length says)"),
               &A, j, &A);

  j = model();
  j->r[2].length = 402; /* 4-byte elements; n would be 100 */
  emit_journal(V(.name = "error/length-not-multiple", .covers = E7,
                 .text = "step 7: a form 1 record of 4-byte elements with length 402, not a "
                         "multiple of 4 (its region check is that of the 402 bytes)"),
               &A, j, &A);

  {
    jnl big;
    jinit(&big, (uint64_t)1 << 34);
    buf b = rbytes(100);
    rec *r = rec_bytes(&big, 0, &b, 0);
    r->length = ((uint64_t)1 << 31) + 1;
    r->check_set = 1;
    r->region_check = 0;
    emit_journal(V(.name = "error/length-over-2-31", .covers = E7,
                   .text = "step 7: a form 0 record with length 2^31 + 1 (over the limit of "
                           "2^31), in a journal whose file_size is 2^34 so that the region "
                           "lies within it. No small file can break this rule alone: the "
                           "payload is 100 bytes and file_size is not the checkpoint's, rules "
                           "of step 8, which step 7 comes before"),
                 &A, &big, &A);
    jfree(&big);
    bfree(&b);
  }

  /* Regions: order, overlap, bounds. */
  j = model();
  j->r[2].offset = 711; /* r1 ends at 712 */
  emit_journal(V(.name = "error/regions-overlap", .covers = E7,
                 .text = "step 7: the third region starts at 711, one byte before the end of "
                         "the second (712)"),
               &A, j, &A);

  j = model();
  {
    rec t = j->r[2];
    j->r[2] = j->r[3];
    j->r[3] = t;
  }
  emit_journal(V(.name = "error/regions-unsorted", .covers = E7,
                 .text = "step 7: the model's last two records swapped: [3833, 4133) then "
                         "[712, 1112), apart but out of order"),
               &A, j, &A);

  j = model();
  j->r[3].offset = A_SIZE - 300 + 1;
  emit_journal(V(.name = "error/region-beyond-file-size", .covers = E7,
                 .text = "step 7: the last region [3834, 4134) ends one byte past file_size "
                         "4133"),
               &A, j, &A);

  j = model();
  j->r[3].offset = UINT64_MAX - 99; /* + 300 wraps to 200 */
  emit_journal(V(.name = "error/region-wraps", .covers = E7,
                 .text = "step 7: the last region starts at 2^64 - 100 and is 300 bytes long: "
                         "offset + length wraps to 200 in 64 bits, but the region ends beyond "
                         "file_size"),
               &A, j, &A);

  {
    jnl s;
    jinit(&s, A_SIZE);
    buf b = rnew(&A, 100, 50);
    rec_bytes(&s, 100, &b, 0);
    rec_bytes(&s, 100, &b, 0);
    emit_journal(V(.name = "error/regions-same", .covers = E7,
                   .text = "step 7: two identical form 0 records of [100, 150)"),
                 &A, &s, &A);
    jfree(&s);
    bfree(&b);
  }

  j = model();
  j->r[3].stored_set = 1;
  {
    buf c = {0};
    rec_content(&j->r[3], &c);
    rec_set_content(&j->r[3], &c);
    bfree(&c);
    j->r[3].stored_length = j->r[3].payload.n + 1;
  }
  emit_journal(V(.name = "error/payload-into-trailer", .covers = E7,
                 .text = "step 7: the last record's stored_length one more than its payload, "
                         "so that the payload would end one byte into the trailer"),
               &A, j, &A);

  j = model();
  j->r[3].stored_set = 1;
  j->r[3].stored_length = UINT64_MAX - 20;
  emit_journal(V(.name = "error/payload-length-wraps", .covers = E7,
                 .text = "step 7: the last record's stored_length 2^64 - 21: where its payload "
                         "would end wraps in 64 bits (must not be allocated for)"),
               &A, j, &A);
}

/* Step 8: the checkpoint and the contents. */
static void content_error_vectors(void) {
  const char *E8 = "R-JNL-1,R-JNL-3,§18.3";
  jnl *j;

  {
    buf big = bdup(&A);
    bu8(&big, 0x42);
    emit_journal(V(.name = "error/checkpoint-larger", .covers = E8,
                   .text = "step 8: the model journal (file_size 4133) on a checkpoint of 4134 "
                           "bytes, the first 4133 of them its own"),
                 &big, &M, &A);
    bfree(&big);
  }
  {
    jnl s;
    jinit(&s, A_SIZE);
    buf b = rnew(&A, 16, 100);
    rec_bytes(&s, 16, &b, 0);
    buf small = bmem(A.p, A_SIZE - 1);
    emit_journal(V(.name = "error/checkpoint-smaller", .covers = E8,
                   .text = "step 8: a journal of one region [16, 116) with file_size 4133 on a "
                           "checkpoint of 4132 bytes"),
                 &small, &s, &A);
    jfree(&s);
    bfree(&b);
    bfree(&small);

    jinit(&s, A_SIZE + 1);
    emit_journal(V(.name = "error/zero-records-checkpoint-size", .covers = E8,
                   .text = "step 8: a journal of no records with file_size 4134 on a checkpoint "
                           "of 4133 bytes: the size is checked even with nothing to write"),
                 &A, &s, &A);
    jfree(&s);
  }

  /* form 0 content of the wrong length */
  for (int d = -1; d <= 1; d += 2) {
    j = model();
    rec *r = &j->r[0];
    buf c = bdup(&r->data);
    if (d < 0) c.n--;
    else bu8(&c, 0x33);
    rec_set_content(r, &c);
    bfree(&c);
    emit_journal(d < 0 ? V(.name = "error/form0-content-short", .covers = E8,
                           .text = "step 8: a stored form 0 record of length 100 whose payload "
                                   "is 99 bytes")
                       : V(.name = "error/form0-content-long", .covers = E8,
                           .text = "step 8: a stored form 0 record of length 100 whose payload "
                                   "is 101 bytes"),
                 &A, j, &A);
  }

  /* zstd frames of the last record (form 0, 300 bytes) */
  {
    const rec *m3 = &M.r[3];
    const uint8_t *c = m3->data.p;
    const size_t n = m3->data.n;
    buf extra = bdup(&m3->data);
    bu8(&extra, 0x11);
    static const char *const ZC = "R-JNL-1,R-JNL-3,R-CMP-1,R-CMP-4,§4.4,§18.2";
    struct {
      const char *name, *text, *covers;
      buf frame;
    } z[24];
    size_t nz = 0;
#define ZV(nm, cv, tx)                                                                           \
  (z[nz].name = (nm), z[nz].covers = (cv), z[nz].text = (tx), z[nz].frame = (buf){0},             \
   &z[nz++].frame)
    buf *f;
    f = ZV("error/zstd-not-a-frame", ZC, "step 8: the last record (form 0, zstd) whose payload is "
                                         "its 300 content bytes, not a zstd frame (§4.4 step 1)");
    bput(f, c, n);
    f = ZV("error/zstd-skippable-frame", ZC,
           "step 8: the last record's payload a skippable frame (magic 50 2A 4D 18) holding the "
           "content (§4.4 step 1)");
    bu32(f, 0x184D2A50u);
    bu32(f, n);
    bput(f, c, n);
    f = ZV("error/zstd-empty", ZC, "step 8: the last record, compression 1, with stored_length 0 "
                                   "(an empty stored stream, §4.4 step 1)");
    f = ZV("error/zstd-reserved-bit", ZC,
           "step 8: the last record's frame with the reserved bit (bit 3) of its frame header "
           "descriptor set (§4.4 step 1)");
    zhand(f, &(zopts){.reserved_bit = 1}, n, c, n);
    f = ZV("error/zstd-header-cut", ZC,
           "step 8: the last record's payload the first 8 bytes of a frame whose header is 13 "
           "bytes (§4.4 step 1: the header is not complete)");
    zhand(f, &(zopts){0}, n, c, n);
    f->n = 8;
    f = ZV("error/zstd-no-content-size", ZC,
           "step 8: the last record's frame without Frame_Content_Size (§4.4 step 2)");
    zhand(f, &(zopts){.no_size = 1}, n, c, n);
    f = ZV("error/zstd-dictionary", ZC,
           "step 8: the last record's frame with Dictionary_ID 7 (§4.4 step 3)");
    zhand(f, &(zopts){.dict = 1, .dict_id = 7}, n, c, n);
    f = ZV("error/zstd-window-over-bound", ZC,
           "step 8: the last record's frame with a window of 2048 bytes for 300 bytes of "
           "content (the bound is 1024, §4.4 step 4)");
    zhand(f, &(zopts){.multi = 1, .window_over = 1}, n, c, n);
    f = ZV("error/zstd-cut", ZC, "step 8: the last record's frame without its last byte, "
                                 "stored_length one less (§4.4 step 6)");
    zhand(f, &(zopts){0}, n, c, n);
    f->n--;
    f = ZV("error/zstd-byte-after-frame", ZC,
           "step 8: the last record's payload a valid frame then one more byte: the frame does "
           "not end at the end of the payload (§4.4 step 6)");
    zhand(f, &(zopts){0}, n, c, n);
    bu8(f, 0);
    f = ZV("error/zstd-two-frames", ZC,
           "step 8: the last record's payload two frames of 150 bytes each: the content is "
           "exactly one frame");
    zhand(f, &(zopts){0}, 150, c, 150);
    zhand(f, &(zopts){0}, 150, c + 150, 150);
    f = ZV("error/zstd-reserved-block-type", ZC,
           "step 8: the last record's frame whose only block has the reserved block type 3 "
           "(§4.4 step 8: it does not decompress)");
    zhand(f, &(zopts){.block_type = 3}, n, c, n);
    f = ZV("error/zstd-gives-fewer", ZC,
           "step 8: the last record's frame declaring 300 bytes whose blocks hold 299 (§4.4 "
           "step 8)");
    zhand(f, &(zopts){0}, n, c, n - 1);
    f = ZV("error/zstd-gives-more", ZC,
           "step 8: the last record's frame declaring 300 bytes whose blocks hold 301 (§4.4 "
           "step 8)");
    zhand(f, &(zopts){0}, n, extra.p, n + 1);
    f = ZV("error/zstd-bad-checksum", ZC,
           "step 8: the last record's frame with a content checksum that does not match (§4.4 "
           "step 8)");
    zhand(f, &(zopts){.checksum = 2}, n, c, n);
    f = ZV("error/zstd-declares-less", "R-JNL-1,R-JNL-3,§18.2",
           "step 8: the last record (form 0, length 300) whose frame is valid and holds 299 "
           "bytes: the content is not length bytes");
    zhand(f, &(zopts){0}, n - 1, c, n - 1);
    f = ZV("error/zstd-declares-more", "R-JNL-1,R-JNL-3,§18.2",
           "step 8: the last record (form 0, length 300) whose frame is valid and holds 301 "
           "bytes: a declared content size over the bound (length)");
    zhand(f, &(zopts){0}, n + 1, extra.p, n + 1);
    f = ZV("error/zstd-declares-2-40", "R-JNL-1,R-JNL-3,R-CMP-5,§18.2",
           "step 8: the last record's frame declares 2^40 bytes and holds 300: over the bound "
           "of §18.2 and the ratio of §4.4 step 7 (must not be allocated for)");
    zhand(f, &(zopts){0}, (uint64_t)1 << 40, c, n);
#undef ZV
    for (size_t i = 0; i < nz; i++) {
      j = model();
      rec *r = &j->r[3];
      bfree(&r->payload);
      r->payload = z[i].frame;
      r->payload_set = 1;
      emit_journal(V(.name = z[i].name, .covers = z[i].covers, .text = z[i].text), &A, j, &A);
    }
    bfree(&extra);
  }

  /* form 1 contents: the third record (4-byte elements, stored, n = 100) */
  {
    const rec *m2 = &M.r[2];
    unsigned kc = rice_canonical(m2->pos, m2->count);
    static const char *const PC = "R-JNL-1,R-JNL-3,R-POS-1,§9.1,§18.2";

    for (int d = -1; d <= 1; d += 2) {
      if (d < 0 && kc == 0) die("the model's third record has Rice parameter 0");
      j = model();
      j->r[2].k = (int)kc + d;
      char name[64], text[256];
      snprintf(name, sizeof name, "error/form1-rice-k-%s", d < 0 ? "minus-1" : "plus-1");
      snprintf(text, sizeof text,
               "step 8: the third record's positions written with Rice parameter %d, the "
               "canonical one being %u (R-POS-3)",
               (int)kc + d, kc);
      emit_journal(V(.name = name, .covers = "R-JNL-1,R-JNL-3,R-POS-3,§18.2", .text = text), &A,
                   j, &A);
    }

    {
      jnl t;
      jinit(&t, A_SIZE);
      uint64_t two = 2;
      buf vals = rvalues(&A, 3100, 1, &two, 1);
      rec *r = rec_elems(&t, 3100, 8, 1, &two, 1, &vals, 0);
      r->k = 1;
      emit_journal(V(.name = "error/form1-rice-tie-larger", .covers = "R-JNL-1,R-JNL-3,R-POS-3",
                     .text = "step 8: the one position 2 written with Rice parameter 1, which "
                             "costs as many bits as 0: on a tie the canonical one is the "
                             "smaller (compare replayed/form1-rice-tie)"),
                   &A, &t, &A);
      jfree(&t);
      bfree(&vals);
    }

    j = model();
    {
      const rec *m1 = &M.r[1];
      unsigned k1 = rice_canonical(m1->pos, m1->count);
      j->r[1].k = (int)k1 + 1;
    }
    emit_journal(V(.name = "error/form1-zstd-rice-k", .covers = "R-JNL-1,R-JNL-3,R-POS-3,§18.2",
                   .text = "step 8: the second record (form 1, zstd) whose decompressed "
                           "positions use the canonical Rice parameter plus one"),
                 &A, j, &A);

    j = model();
    j->r[2].k = 32;
    emit_journal(V(.name = "error/form1-rice-k-32", .covers = PC,
                   .text = "step 8: the third record's position stream with Rice parameter 32 "
                           "(above 31, R-POS-1)"),
                 &A, j, &A);

    j = model();
    {
      rec *r = &j->r[2];
      buf c = {0};
      rec_set_content(r, &c);
    }
    emit_journal(V(.name = "error/form1-no-content", .covers = PC,
                   .text = "step 8: the third record (form 1, stored, count 7) with "
                           "stored_length 0: a position stream with no byte at all (R-POS-1)"),
                 &A, j, &A);

    j = model();
    {
      rec *r = &j->r[2];
      buf c = {0};
      rice_write(&c, kc, r->pos, r->count);
      c.n--; /* the byte with the last gap's last bit; no values */
      rec_set_content(r, &c);
      bfree(&c);
    }
    emit_journal(V(.name = "error/form1-ends-inside-gap", .covers = PC,
                   .text = "step 8: the third record's content is its position stream less "
                           "its last byte, and no values: the stream ends inside a gap "
                           "(R-POS-1)"),
                 &A, j, &A);

    {
      jnl t;
      jinit(&t, A_SIZE);
      uint64_t pos[3] = {5, 20, 100}; /* n = 100: 100 is out of range */
      buf vals = rbytes(12);
      rec_elems(&t, 1200, 400, 4, pos, 3, &vals, 0); /* region check: the first two set */
      emit_journal(V(.name = "error/form1-position-n", .covers = PC,
                     .text = "step 8: a form 1 record of 100 4-byte elements with positions 5, "
                             "20, 100: the last is not below n (R-POS-1)"),
                   &A, &t, &A);
      jfree(&t);
      bfree(&vals);

      uint64_t ok[3] = {5, 20, 99};
      jinit(&t, A_SIZE);
      vals = rvalues(&A, 1200, 4, ok, 3);
      rec_elems(&t, 1200, 400, 4, ok, 3, &vals, 0);
      emit_replayed(V(.name = "replayed/form1-position-n-minus-1", .covers = "R-JNL-1,R-POS-1",
                      .text = "the same record with positions 5, 20, 99: the last element of "
                              "the region (compare error/form1-position-n)"),
                    &A, &t, &A);
      jfree(&t);
      bfree(&vals);
    }

    {
      /* positions 1, 4, 8, 9: gaps 1, 2, 3, 0, 10 bits with k = 0 (canonical: k = 1
       * costs 10 too), so the last byte of the stream has 6 unused bits */
      uint64_t pos[4] = {1, 4, 8, 9};
      if (rice_canonical(pos, 4) != 0 || rice_bits(pos, 4, 0) != 10) die("unused-bit positions");
      jnl t;
      jinit(&t, A_SIZE);
      buf vals = rvalues(&A, 1200, 4, pos, 4);
      rec *w = rec_elems(&t, 1200, 400, 4, pos, 4, &vals, 0);
      buf c = {0};
      rice_write(&c, 0, pos, 4);
      c.p[c.n - 1] |= 0x80;
      bput(&c, vals.p, vals.n);
      rec_set_content(w, &c);
      bfree(&c);
      emit_journal(V(.name = "error/form1-unused-bit", .covers = PC,
                     .text = "step 8: a form 1 record (positions 1, 4, 8, 9: 10 bits with Rice "
                             "parameter 0) whose position stream has the top unused bit of its "
                             "last byte set (R-POS-1)"),
                   &A, &t, &A);
      jfree(&t);
      bfree(&vals);
    }

    for (int d = -1; d <= 1; d += 2) {
      j = model();
      rec *w = &j->r[2];
      buf c = {0};
      rec_content(w, &c);
      if (d < 0) c.n--;
      else bu8(&c, 0);
      rec_set_content(w, &c);
      bfree(&c);
      emit_journal(d < 0 ? V(.name = "error/form1-values-short",
                             .covers = "R-JNL-1,R-JNL-3,R-POS-2,§18.2",
                             .text = "step 8: the third record (7 4-byte values) with its last "
                                     "value byte missing: the values do not fill the rest "
                                     "exactly")
                         : V(.name = "error/form1-values-long",
                             .covers = "R-JNL-1,R-JNL-3,R-POS-2,§18.2",
                             .text = "step 8: the third record (7 4-byte values) with one byte "
                                     "after its values"),
                   &A, j, &A);
    }

    j = model();
    {
      rec *w = &j->r[1]; /* form 1, zstd */
      buf c = {0};
      rec_content(w, &c);
      bu8(&c, 0);
      rec_set_content(w, &c);
      bfree(&c);
    }
    emit_journal(V(.name = "error/form1-zstd-values-long",
                   .covers = "R-JNL-1,R-JNL-3,R-POS-2,§18.2",
                   .text = "step 8: the second record (form 1, zstd) whose decompressed content "
                           "has one byte after its values (within the bound of §18.2)"),
                 &A, j, &A);

    j = model();
    {
      rec *w = &j->r[2];
      uint64_t n = w->length / w->esize;
      buf c = {0};
      rec_content(w, &c);
      uint64_t bound = 1 + (n + 7) / 8 + (uint64_t)w->count * w->esize;
      bfill(&c, 0, (size_t)(bound + 1 - c.n));
      w->comp = 1;
      rec_set_content(w, &c);
      bfree(&c);
    }
    emit_journal(V(.name = "error/form1-zstd-over-bound", .covers = "R-JNL-1,R-JNL-3,§18.2",
                   .text = "step 8: the third record made zstd, its content padded with zero "
                           "bytes to 1 + ceil(n / 8) + count * element_size + 1, one over the "
                           "bound of §18.2"),
                 &A, j, &A);
  }

  /* region checks */
  j = model();
  j->r[3].check_set = 1;
  {
    uint8_t reg[300];
    rec_apply(&M.r[3], &A, reg);
    j->r[3].region_check = xxh64(reg, 300) ^ 1;
  }
  emit_journal(V(.name = "error/region-check-last", .covers = E8,
                 .text = "step 8: the last record's region_check off by one bit (journal_check "
                         "recomputed): no record may be written, the first three included, "
                         "before every record is checked (§18.4)"),
               &A, j, &A);

  {
    buf other = bdup(&A);
    const rec *r1 = &M.r[1];
    /* change one byte of r1's region that no position of r1 writes */
    uint64_t e = 0;
    for (size_t i = 0; i < r1->count && r1->pos[i] == e; i++) e++;
    other.p[r1->offset + e * 2 + 1] ^= 0x01;
    emit_journal(V(.name = "error/form1-other-file", .covers = E8,
                   .text = "step 8: the model journal on a checkpoint that differs from its "
                           "own in one byte of the second region that the record does not "
                           "write: the region applied does not give region_check (a journal "
                           "for another file)"),
                 &other, &M, &A);
    bfree(&other);
  }
}

/* Vectors whose outcome depends on the order of the checks of §18.3. */
static void order_vectors(void) {
  const char *O = "R-JNL-1,R-JNL-3,§18.3";
  buf mb = model_bytes(), b;
  jnl *j;

  b = bdup(&mb);
  b.p[12] = 0x01; /* reserved; header_check as it was */
  recheck(&b);
  emit(V(.name = "uncommitted/order-torn-header-reserved", .covers = O, .order = 1,
         .text = "the model journal with reserved = 1 and header_check not recomputed (a torn "
                 "header): step 4 comes before step 5, so it is uncommitted"),
       &A, &b, NULL);
  bfree(&b);

  b = bmem(mb.p, HEADER);
  b.p[7] = 0x0B;
  put64(b.p + 56, xxh64(b.p, 56));
  emit(V(.name = "error/order-bad-magic-header-only", .covers = O, .order = 1,
         .text = "a 64-byte header with a bad magic (header_check recomputed) and no trailer: "
                 "step 2 comes before step 6"),
       &A, &b, NULL);
  bfree(&b);

  b = bmem(mb.p, 40);
  memcpy(b.p, "this is not a journal at all, just text.", 40);
  emit(V(.name = "uncommitted/order-short-not-a-journal", .covers = O, .order = 1,
         .text = "40 bytes of text, no magic: step 1 (shorter than 64 bytes) comes before the "
                 "magic of step 2, so the file is uncommitted and removed"),
       &A, &b, NULL);
  bfree(&b);

  b = rbytes(300);
  memset(b.p, 0, 8);
  emit(V(.name = "uncommitted/order-zero-start-garbage", .covers = O, .order = 1,
         .text = "300 bytes whose first 8 are zero and the rest random: step 1 makes it "
                 "uncommitted before the magic is read"),
       &A, &b, NULL);
  bfree(&b);

  j = model();
  j->major = 2;
  j->header_check_set = 1;
  j->header_check = 0x0123456789ABCDEFull;
  emit_journal(V(.name = "error/order-major-2-torn-header", .covers = O, .order = 1,
                 .text = "major 2 with a header_check that does not match: step 3 comes before "
                         "step 4 (a newer layout is never dropped as torn)"),
               &A, j, &A);

  j = model();
  j->major = 2;
  {
    buf jb = {0};
    serialize(j, &A, &jb);
    jb.n = HEADER;
    emit(V(.name = "error/order-major-2-header-only", .covers = O, .order = 1,
           .text = "the 64-byte header of a major 2 journal, no trailer: step 3 comes before "
                   "step 6"),
         &A, &jb, NULL);
    bfree(&jb);
  }

  j = model();
  j->reserved = 1;
  {
    buf jb = {0};
    serialize(j, &A, &jb);
    jb.n -= TRAILER;
    emit(V(.name = "error/order-reserved-no-trailer", .covers = O, .order = 1,
           .text = "the model journal with reserved = 1 (header_check recomputed) and no "
                   "trailer: step 5 comes before step 6"),
         &A, &jb, NULL);
    bfree(&jb);
  }

  j = model();
  j->r[1].form = 2;
  {
    buf jb = {0};
    serialize(j, &A, &jb);
    jb.n -= TRAILER;
    emit(V(.name = "uncommitted/order-bad-record-no-trailer", .covers = O, .order = 1,
           .text = "the model journal with an unknown form in its second record and no "
                   "trailer: step 6 comes before step 7, so it is uncommitted"),
         &A, &jb, NULL);
    bfree(&jb);
  }

  {
    buf big = bdup(&A);
    bu8(&big, 0);
    b = bmem(mb.p, mb.n - TRAILER);
    emit(V(.name = "uncommitted/order-checkpoint-size-no-trailer", .covers = O, .order = 1,
           .text = "the model journal without its trailer on a checkpoint one byte longer than "
                   "its file_size: an uncommitted journal is removed without looking at the "
                   "checkpoint (step 6 before step 8)"),
         &big, &b, NULL);
    bfree(&b);
    bfree(&big);
  }

  j = model();
  j->r[0].form = 2;
  {
    buf big = bdup(&A);
    bu8(&big, 0);
    emit_journal(V(.name = "error/order-record-and-checkpoint-size", .covers = O, .order = 1,
                   .text = "an unknown form in the first record, on a checkpoint one byte "
                           "longer than file_size: both DCR_E_JOURNAL (step 7 before step 8)"),
                 &big, j, &A);
    bfree(&big);
  }
  bfree(&mb);
}

/* ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------ */
/* Journal 1.1 (testvectors/journal-v1.1/): what a reader does with a journal it
 * cannot replay (SPEC.md §18.4, R-JNL-3, R-JNL-4), which depends on the state of the
 * checkpoint beside it. The checkpoints are safetensors files, so that a reader
 * can compute their state ids (§7); the journal names the real ones. */

/* A safetensors file of two tensors: "b" F32 [1024], then "w" BF16 [2048]. */
typedef struct {
  buf file;
  size_t data_at; /* where the data region starts */
  uint8_t state[16];
} st_ckpt;

static void st_state(st_ckpt *c) {
  static const struct {
    const char *name;
    uint8_t dtype;
    uint64_t dim, offset, length;
  } t[2] = {{"b", 12, 1024, 0, 4096}, {"w", 9, 2048, 4096, 4096}};
  buf ser = {0};
  for (int i = 0; i < 2; i++) { /* bytewise name order */
    uint8_t h[16];
    bu16(&ser, strlen(t[i].name));
    bput(&ser, t[i].name, strlen(t[i].name));
    bu8(&ser, t[i].dtype);
    bu8(&ser, 1);
    bu64(&ser, t[i].dim);
    bu64(&ser, t[i].length);
    tensor_hash(c->file.p + c->data_at + t[i].offset, (size_t)t[i].length, h);
    bput(&ser, h, 16);
  }
  xxh128(ser.p, ser.n, c->state);
  bfree(&ser);
}

static st_ckpt st_make(const buf *data) {
  static const char json[] = "{\"b\":{\"dtype\":\"F32\",\"shape\":[1024],\"data_offsets\":[0,4096]},"
                             "\"w\":{\"dtype\":\"BF16\",\"shape\":[2048],\"data_offsets\":[4096,8192]}}";
  st_ckpt c = {0};
  size_t n = strlen(json), padded = (n + 7) & ~(size_t)7;
  bu64(&c.file, padded);
  bput(&c.file, json, n);
  bfill(&c.file, ' ', padded - n);
  c.data_at = c.file.n;
  bput(&c.file, data->p, data->n);
  st_state(&c);
  return c;
}

static void hex16(const uint8_t *p, char out[33]) {
  for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", p[i]);
}

static json_t *vectors11;
static int counts11[4];
static const char *const outcomes11[4] = {"replayed", "discarded", "kept", "unpublished"};

typedef struct {
  const char *name;   /* "<outcome>/<short name>" */
  const char *covers; /* comma-separated SPEC.md ids and sections */
  const char *text;
  const uint8_t *known[2]; /* states the reader is given (R-JNL-4), or NULL */
} vec11;

/* One vector: the checkpoint before, the journal at CKPT.dcr-journal and the one at
 * CKPT.dcr-journal.tmp (either may be NULL), and `after` for replayed ones. */
static void emit11(const vec11 *v, const buf *before, const buf *journal, const buf *temp,
                   const buf *after) {
  int o = 0;
  size_t len = 0;
  while (o < 4 && (len = strlen(outcomes11[o]), strncmp(v->name, outcomes11[o], len) ||
                                                    v->name[len] != '/'))
    o++;
  if (o == 4) die("%s: the name must start with its outcome", v->name);
  if ((o == 0) != (after != NULL)) die("%s: an after file iff replayed", v->name);
  const char *short_name = v->name + len + 1;
  char jrel[512], trel[512], jsha[65], tsha[65], nb[300];
  const char *bsha, *asha = NULL, *arel = NULL;
  snprintf(jrel, sizeof jrel, "%s.dcr-journal", v->name);
  snprintf(trel, sizeof trel, "%s.dcr-journal.tmp", v->name);
  if (journal) write_file(jrel, journal, jsha);
  if (temp) write_file(trel, temp, tsha);
  snprintf(nb, sizeof nb, "%s-before", short_name);
  const char *brel = ckpt_file(nb, before, &bsha);
  if (after) {
    snprintf(nb, sizeof nb, "%s-after", short_name);
    arel = ckpt_file(nb, after, &asha);
  }
  json_t *known = json_array();
  for (int i = 0; i < 2 && v->known[i]; i++) {
    char h[33];
    hex16(v->known[i], h);
    json_array_append_new(known, json_string(h));
  }
  json_t *obj = json_pack(
      "{s:s, s:s, s:o, s:s, s:o, s:o, s:o, s:o}", "name", v->name, "outcome", outcomes11[o],
      "error", o == 2 ? json_string("DCR_E_JOURNAL") : json_null(), "before", brel, "journal",
      journal ? json_string(jrel) : json_null(), "journal_tmp",
      temp ? json_string(trel) : json_null(), "after", arel ? json_string(arel) : json_null(),
      "known_states", known);
  json_object_set_new(obj, "sha256",
                      json_pack("{s:s, s:o, s:o, s:o}", "before", bsha, "journal",
                                journal ? json_string(jsha) : json_null(), "journal_tmp",
                                temp ? json_string(tsha) : json_null(), "after",
                                asha ? json_string(asha) : json_null()));
  json_object_set_new(obj, "covers", csv(v->covers));
  json_object_set_new(obj, "description", json_string(v->text));
  json_array_append_new(vectors11, obj);
  counts11[o]++;
}

#define V11(n, c, t) (&(vec11){.name = n, .covers = c, .text = t})
/* ... given the base and target states */
#define V11K(n, c, t, b, tg) (&(vec11){.name = n, .covers = c, .text = t, .known = {b, tg}})

static void journal11_vectors(void) {
  /* base, target: a step that changes elements of both tensors */
  buf data = rbytes(8192);
  for (size_t i = 4096; i < 8192; i += 2) data.p[i + 1] = (uint8_t)(0x3c + (data.p[i + 1] & 1));
  st_ckpt base = st_make(&data);
  uint64_t bpos[5] = {3, 70, 71, 500, 1023}, wpos[4] = {0, 17, 1800, 2047};
  buf bvals = rbytes(5 * 4), wvals = {0};
  for (size_t i = 0; i < 4; i++) {
    const uint8_t *e = data.p + 4096 + 2 * wpos[i];
    unsigned v = (unsigned)(e[0] | e[1] << 8) + 1; /* one unit in the last place */
    bu16(&wvals, v & 0xffff);
  }
  buf tdata = bdup(&data);
  for (size_t i = 0; i < 5; i++) memcpy(tdata.p + 4 * bpos[i], bvals.p + 4 * i, 4);
  for (size_t i = 0; i < 4; i++) memcpy(tdata.p + 4096 + 2 * wpos[i], wvals.p + 2 * i, 2);
  st_ckpt target = st_make(&tdata);
  if (!memcmp(base.state, target.state, 16)) die("journal 1.1: the step changes nothing");

  /* The journal a 1.1 writer makes: form 1 records, one per tensor, minor 1. */
  jnl j;
  jinit(&j, base.file.n);
  j.minor = 1;
  memcpy(j.base_state, base.state, 16);
  memcpy(j.target_state, target.state, 16);
  uint64_t brel[5], wrel[4];
  for (size_t i = 0; i < 5; i++) brel[i] = bpos[i] - bpos[0];
  for (size_t i = 0; i < 4; i++) wrel[i] = wpos[i] - wpos[0];
  rec_elems(&j, base.data_at + 4 * bpos[0], 4 * (bpos[4] - bpos[0] + 1), 4, brel, 5, &bvals, 0);
  rec_elems(&j, base.data_at + 4096 + 2 * wpos[0], 2 * (wpos[3] - wpos[0] + 1), 2, wrel, 4, &wvals, 1);
  buf jb = {0};
  serialize(&j, &base.file, &jb);
  buf after = replay(&j, &base.file);
  if (after.n != target.file.n || memcmp(after.p, target.file.p, after.n))
    die("journal 1.1: the journal does not replay to the target");
  /* part way through the replay: the first record's region written, not the second */
  buf mid = bdup(&base.file);
  memcpy(mid.p + j.r[0].offset, target.file.p + j.r[0].offset, (size_t)j.r[0].length);

  /* damages that make the journal unusable */
  buf flipped = bdup(&jb); /* a bit of the second record's payload: step 6 */
  size_t second = HEADER + RECHDR + (size_t)get64(jb.p + HEADER + 24) + RECHDR;
  if (second + 2 >= jb.n - TRAILER) die("journal 1.1: no second payload");
  flipped.p[second + 2] ^= 0x10;
  buf cut = bmem(jb.p, jb.n - 9); /* cut inside its trailer: step 6 */
  buf torn_header = bdup(&jb);     /* header_check off by one bit: step 4 */
  torn_header.p[56] ^= 1;
  recheck(&torn_header);
  buf misfit = {0}; /* committed, but a region check that no file gives: step 8 */
  j.r[1].check_set = 1, j.r[1].region_check = 0x0123456789abcdefull;
  serialize(&j, &base.file, &misfit);
  j.r[1].check_set = 0;
  buf foreign = bdup(&jb); /* another program's file: step 2 */
  foreign.p[0] = 'X';
  buf newer = bdup(&jb); /* a newer major version: step 3 */
  newer.p[8] = 2;
  recheck_all(&newer);
  buf unparsable = bdup(&mid); /* a checkpoint whose header length is gone */
  memset(unparsable.p, 0, 8);
  buf junk = rbytes(700);

  emit11(V11("replayed/published", "R-JNL-1,R-JNL-3,§18.1,§18.4",
             "the journal a 1.1 writer publishes (minor 1, the real state ids of its base and "
             "target), replayed onto its base"),
         &base.file, &jb, NULL, &after);
  emit11(V11("replayed/part-written", "R-JNL-3,§18.4",
             "the same journal onto the file a crash left part way through its replay (the "
             "first record's region written, not the second): replaying finishes it"),
         &mid, &jb, NULL, &after);
  emit11(V11("replayed/temp-and-published", "R-JNL-3,§18.1",
             "the published journal, and beside it a journal under the temporary name (left by "
             "a writer killed before its rename): the temporary one goes, the other replays"),
         &base.file, &jb, &junk, &after);
  emit11(V11("discarded/damaged-beside-base", "R-JNL-4,§18.3",
             "a bit of the journal's payload flipped (step 6: uncommitted) beside its base: the "
             "header, which checks, names the file's state as the journal's base, so the journal "
             "never reached it and goes"),
         &base.file, &flipped, NULL, NULL);
  emit11(V11("discarded/cut-beside-target", "R-JNL-4,§18.3",
             "the journal cut inside its trailer beside its target: the replay had finished, so "
             "the journal goes"),
         &target.file, &cut, NULL, NULL);
  emit11(V11("discarded/misfit-beside-base", "R-JNL-4,§18.3",
             "a committed journal whose second record's region_check no file gives (step 8), "
             "beside its base: unusable, and the file is proven whole, so it goes"),
         &base.file, &misfit, NULL, NULL);
  emit11(V11K("discarded/torn-header-known-base", "R-JNL-4",
             "a torn header (step 4) beside the base, and the reader is given the base and "
             "target states (it is about to apply the bundle): the file's state is one of them",
             base.state, target.state),
         &base.file, &torn_header, NULL, NULL);
  emit11(V11("kept/damaged-part-written", "R-JNL-3,R-JNL-4",
             "a bit of the journal's payload flipped beside the file a crash left part way "
             "through its replay: removing it would leave a checkpoint nothing finishes, so "
             "both files stay as they are"),
         &mid, &flipped, NULL, NULL);
  emit11(V11("kept/cut-part-written", "R-JNL-3,R-JNL-4",
             "the journal cut inside its trailer beside the part-written file"),
         &mid, &cut, NULL, NULL);
  emit11(V11("kept/misfit-part-written", "R-JNL-3,R-JNL-4",
             "a committed journal that fails step 8 beside the part-written file"),
         &mid, &misfit, NULL, NULL);
  emit11(V11("kept/torn-header-base", "R-JNL-4",
             "a torn header beside the base, no states given: the header's states cannot be "
             "trusted, so nothing proves the file whole"),
         &base.file, &torn_header, NULL, NULL);
  emit11(V11K("kept/known-states-part-written", "R-JNL-4",
             "the damaged journal beside the part-written file, the base and target states "
             "given: the file is neither",
             base.state, target.state),
         &mid, &flipped, NULL, NULL);
  emit11(V11("kept/unreadable-checkpoint", "R-JNL-4",
             "the damaged journal beside a file that cannot be read as a checkpoint (its header "
             "length zeroed): it proves nothing"),
         &unparsable, &flipped, NULL, NULL);
  emit11(V11("kept/foreign-beside-base", "R-JNL-3,§18.3",
             "a file whose magic is not a journal's (step 2) beside the base: foreign, never "
             "removed, though the file is whole"),
         &base.file, &foreign, NULL, NULL);
  emit11(V11K("kept/newer-major-beside-target", "R-JNL-3,§18.3",
             "a journal of major version 2 (step 3) beside the target: foreign, never removed",
             base.state, target.state),
         &target.file, &newer, NULL, NULL);
  emit11(V11("unpublished/committed-temp-part-written", "R-JNL-3,§18.1",
             "a whole committed journal under the temporary name only, beside the part-written "
             "file: never published, so it never reached the file; it goes and is not replayed "
             "(the file stays as it is)"),
         &mid, NULL, &jb, NULL);
  emit11(V11("unpublished/garbage-temp", "R-JNL-3,§18.1",
             "700 random bytes under the temporary name beside the base: they go"),
         &base.file, NULL, &junk, NULL);

  bfree(&data), bfree(&tdata), bfree(&bvals), bfree(&wvals), bfree(&base.file);
  bfree(&target.file), bfree(&jb), bfree(&after), bfree(&mid), bfree(&flipped), bfree(&cut);
  bfree(&torn_header), bfree(&misfit), bfree(&foreign), bfree(&newer), bfree(&unparsable);
  bfree(&junk);
  jfree(&j);
}


/* ------------------------------------------------------------------------ */
/* Journal 1.2 (testvectors/journal-v1.2/): a set's journal of member records
 * (SPEC.md §18.6). A vector is a directory: its files (members, and what a
 * writer left under .dcr-*), a journal for DIR/.dcr-journal or none, and what
 * recovering DIR does.                                                       */

#define SEED12 0x44434a726e6c3132ull /* "DCJrnl12" */
static json_t *vectors12;
static int counts12[3];
static const char *const outcomes12[3] = {"replayed", "kept", "cleaned"};

typedef struct {
  const char *path;
  int op;         /* 0 patch, 1 replace, 2 remove */
  const buf *now; /* the member once done (patch, replace) */
  int form;       /* 2, or another to break the rule */
  uint64_t size_xor, check_xor;
} mrec;

typedef struct {
  const char *path;
  const buf *b;
} dfile;

static void put_header12(buf *out, uint64_t file_size) {
  static const uint8_t magic[8] = {0x89, 'D', 'C', 'J', '\r', '\n', 0x1A, '\n'};
  bput(out, magic, 8);
  bu16(out, 1);
  bu16(out, 2);
  bu32(out, 0);
  bu64(out, file_size);
  for (int i = 0; i < 32; i++) bu8(out, (uint8_t)(0x40 + i)); /* informative states */
  bu64(out, xxh64(out->p, 56));
}

static buf member_journal(const mrec *r, size_t n, uint64_t file_size) {
  buf out = {0};
  put_header12(&out, file_size);
  for (size_t i = 0; i < n; i++) {
    size_t len = strlen(r[i].path);
    uint64_t size = r[i].op == 2 ? 0 : r[i].now->n, check = r[i].op == 2 ? 0 : xxh64(r[i].now->p, r[i].now->n);
    bu64(&out, size ^ r[i].size_xor);
    bu64(&out, len);
    bu8(&out, (uint8_t)(r[i].form ? r[i].form : 2));
    bu8(&out, 1);
    bu8(&out, 0);
    bu8(&out, 0);
    bu32(&out, (uint32_t)r[i].op);
    bu64(&out, len);
    bu64(&out, check ^ r[i].check_xor);
    bput(&out, r[i].path, len);
  }
  static const uint8_t end[8] = {'D', 'C', 'J', 'E', 'N', 'D', '\r', '\n'};
  bput(&out, end, 8);
  bu64(&out, n);
  bu64(&out, out.n + 16);
  bu64(&out, xxh64(out.p, out.n));
  return out;
}

static json_t *dfiles(const char *vname, const char *role, const dfile *f, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; i < n; i++) {
    char name[200];
    const char *sha;
    snprintf(name, sizeof name, "%s-%s-%zu", vname, role, i);
    for (char *c = name; *c; c++)
      if (*c == '/') *c = '-';
    const char *rel = ckpt_file(name, f[i].b, &sha);
    json_array_append_new(a, json_pack("{s:s, s:s, s:s}", "path", f[i].path, "file", rel, "sha256", sha));
  }
  return a;
}

/* after: NULL for kept (the directory as it was, the journal too) */
static void emit12(const char *name, const char *covers, const char *text, const dfile *before,
                   size_t nb, const buf *journal, const dfile *after, size_t na) {
  int o = 0;
  while (o < 3 && strncmp(name, outcomes12[o], strlen(outcomes12[o]))) o++;
  if (o == 3) die("vector %s: no outcome", name);
  counts12[o]++;
  json_t *j = json_null();
  if (journal) {
    char rel[256], sha[65];
    snprintf(rel, sizeof rel, "journal/%s.dcr-journal", strchr(name, '/') + 1);
    write_file(rel, journal, sha);
    j = json_pack("{s:s, s:s}", "file", rel, "sha256", sha);
  }
  json_array_append_new(vectors12, json_pack("{s:s, s:o, s:s, s:s, s:o, s:o, s:o, s:o}", "name",
                                             name, "covers", csv(covers), "text", text, "outcome",
                                             outcomes12[o], "before", dfiles(name, "before", before, nb),
                                             "journal", j,
                                             "after", after ? dfiles(name, "after", after, na) : json_null(),
                                             "error", o == 1 ? json_string("DCR_E_JOURNAL") : json_null()));
}

static buf rbuf(size_t n) {
  buf b = {0};
  for (size_t i = 0; i < n; i++) bu8(&b, rbyte());
  return b;
}

static void journal12_vectors(void) {
  buf a = rbuf(4096), a2 = bdup(&a), cfg = rbuf(40), cfg2 = rbuf(57), d = rbuf(300), e = rbuf(512);
  for (size_t i = 100; i < a2.n; i += 700) a2.p[i] ^= 0x5A; /* same size: a patch */
  const mrec full[] = {{"a", 0, &a2, 0, 0, 0}, {"c/d", 2, NULL, 0, 0, 0},
                       {"config.json", 1, &cfg2, 0, 0, 0}, {"e", 1, &e, 0, 0, 0}};
  const dfile before[] = {{"a", &a}, {"c/d", &d}, {"config.json", &cfg},
                          {".dcr-stage/a", &a2}, {".dcr-stage/config.json", &cfg2},
                          {".dcr-stage/e", &e}};
  const dfile after[] = {{"a", &a2}, {"config.json", &cfg2}, {"e", &e}};
  buf j = member_journal(full, 4, 0);
  emit12("replayed/patch-replace-remove", "R-JNL-6,R-JNL-7,§18.6",
         "a patch (same size: the staged bytes that differ are written), two replaces (a "
         "member resized, one added: renamed in from .dcr-stage/), a remove (and the "
         "directory it empties); the journal and .dcr-stage/ go",
         before, 6, &j, after, 3);
  /* a crash after the renames and the removal, during the patch's writes */
  buf a_mid = bdup(&a);
  memcpy(a_mid.p, a2.p, 1000);
  const dfile mid[] = {{"a", &a_mid}, {"config.json", &cfg2}, {"e", &e}, {".dcr-stage/a", &a2}};
  emit12("replayed/after-a-crash", "R-JNL-7,§18.6",
         "the same journal after a crash part way: the replaces done (their staged files "
         "gone, the members the staged bytes), the removal done, the patch part written: "
         "replaying again finishes it",
         mid, 4, &j, after, 3);
  bfree(&j);

  /* kept: DCR_E_JOURNAL, nothing changes */
  const dfile no_stage[] = {{"a", &a}, {"config.json", &cfg}};
  const mrec patch_only[] = {{"a", 0, &a2, 0, 0, 0}};
  j = member_journal(patch_only, 1, 0);
  emit12("kept/patch-without-stage", "R-JNL-7,§18.6",
         "a patch whose staged file is gone: it cannot be finished (a patch reads it)",
         no_stage, 2, &j, NULL, 0);
  bfree(&j);
  const dfile staged_a[] = {{"a", &a}, {".dcr-stage/a", &a2}};
  mrec bad = {"a", 0, &a2, 0, 0, 1};
  j = member_journal(&bad, 1, 0);
  emit12("kept/staged-check", "R-JNL-7,§18.6",
         "the staged file does not give the record's region_check: not this directory's "
         "journal, or the stage changed; checked before anything is written",
         staged_a, 2, &j, NULL, 0);
  bfree(&j);
  bad = (mrec){"a", 0, &a2, 0, 1, 0};
  j = member_journal(&bad, 1, 0);
  emit12("kept/staged-size", "R-JNL-7,§18.6", "the staged file is not the record's size",
         staged_a, 2, &j, NULL, 0);
  bfree(&j);
  const mrec replace_gone[] = {{"config.json", 1, &cfg2, 0, 0, 0}};
  j = member_journal(replace_gone, 1, 0);
  emit12("kept/replace-neither", "R-JNL-7,§18.6",
         "a replace whose staged file is gone and whose member is not the staged bytes",
         no_stage, 2, &j, NULL, 0);
  bfree(&j);
  const mrec unordered[] = {{"e", 1, &e, 0, 0, 0}, {"a", 0, &a2, 0, 0, 0}};
  const dfile both[] = {{"a", &a}, {".dcr-stage/a", &a2}, {".dcr-stage/e", &e}};
  j = member_journal(unordered, 2, 0);
  emit12("kept/paths-out-of-order", "R-JNL-1,§18.6", "member paths not in increasing order",
         both, 3, &j, NULL, 0);
  bfree(&j);
  const mrec patch_absent[] = {{"a", 0, &a2, 0, 0, 0}, {"e", 0, &e, 0, 0, 0}};
  j = member_journal(patch_absent, 2, 0);
  emit12("kept/patch-without-member", "R-JNL-7,§18.6",
         "a patch of a, which could be done, then a patch of e, which is no member: every "
         "record is checked before the first is carried out, so a stays as it was (found by "
         "fuzz_journal: a reader that checked members as it wrote patched a, then failed)",
         both, 3, &j, NULL, 0);
  bfree(&j);
  const mrec dotted[] = {{".dcr-stage/a", 1, &a2, 0, 0, 0}};
  j = member_journal(dotted, 1, 0);
  emit12("kept/hidden-path", "R-JNL-1,§18.6",
         "a path with a component that begins with '.': no member path (§2.3)", both, 3, &j,
         NULL, 0);
  bfree(&j);
  const mrec form0[] = {{"a", 0, &a2, 0, 0, 0}, {"e", 1, &e, 0, 0, 0}};
  j = member_journal(form0, 2, 4096);
  emit12("kept/file-size-set", "R-JNL-1,§18.6",
         "member records in a journal whose file_size is not 0 (a file's journal)", both, 3,
         &j, NULL, 0);
  bfree(&j);
  mrec removal = {"a", 2, NULL, 0, 5, 0};
  j = member_journal(&removal, 1, 0);
  emit12("kept/remove-with-size", "R-JNL-1,§18.6", "a remove record whose offset is not 0",
         both, 3, &j, NULL, 0);
  bfree(&j);
  const mrec mixed[] = {{"a", 0, &a2, 0, 0, 0}, {"e", 1, &e, 1, 0, 0}};
  j = member_journal(mixed, 2, 0);
  emit12("kept/mixed-forms", "R-JNL-1,§18.6",
         "a member record, then a record of form 1: forms are not mixed", both, 3, &j, NULL, 0);
  bfree(&j);
  j = member_journal(full, 4, 0);
  j.n -= 1; /* the trailer cut: published whole, so damaged afterwards */
  emit12("kept/torn", "R-JNL-7,§18.6",
         "a journal not committed (its last byte gone): a set's journal is published whole, "
         "so it was damaged after: kept, the directory left as it is",
         before, 6, &j, NULL, 0);
  bfree(&j);

  /* cleaned: no journal; what a writer left before publishing goes */
  const dfile left[] = {{"a", &a}, {"config.json", &cfg}, {".dcr-stage/a", &a2},
                        {".dcr-stage/sub/x", &e}, {".dcr-journal.tmp", &d}, {".dcr-a1b2c3/y", &d}};
  const dfile members_only[] = {{"a", &a}, {"config.json", &cfg}};
  emit12("cleaned/unpublished", "R-JNL-7,§18.6",
         "no journal: a writer killed before publishing left a stage, a journal under its "
         "temporary name and a temporary directory; all go, the members stay as they are",
         left, 6, NULL, members_only, 2);
  bfree(&a), bfree(&a2), bfree(&cfg), bfree(&cfg2), bfree(&d), bfree(&e), bfree(&a_mid);
}

static void write_index(json_t *index) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s/index.json", root, folder);
  write_json(path, index);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: mkjournals OUTDIR\n"
                    "  writes OUTDIR/journal-v1/index.json and the files of the apply journal "
                    "vectors (SPEC.md §18)\n");
    return 2;
  }
  root = argv[1];
  vectors = json_array();

  make_model();
  {
    const char *sha;
    ckpt_file("a", &A, &sha); /* the checkpoint of most vectors */
  }
  replayed_vectors();
  uncommitted_vectors();
  header_error_vectors();
  record_error_vectors();
  content_error_vectors();
  order_vectors();
  jfree(&M);
  jfree(model());

  json_t *outcome_text = json_pack(
      "{s:s, s:s, s:s}", "replayed",
      "recovering CKPT succeeds and says it replayed a journal; CKPT is then exactly `after`, "
      "and CKPT.dcr-journal is gone. Replaying again (CKPT = after, the journal put back) gives "
      "`after` again",
      "uncommitted",
      "recovering CKPT succeeds and says nothing was replayed; CKPT is exactly `before` and "
      "CKPT.dcr-journal is gone (R-JNL-3: the checkpoint was never written)",
      "error",
      "recovering CKPT fails with `error` (DCR_E_JOURNAL); CKPT and CKPT.dcr-journal are both "
      "exactly as they were (R-JNL-3)");
  json_t *no_vectors = json_pack(
      "{s:s, s:s, s:s}", "R-APL-6",
      "a property of a process (no byte of the input changes before every check has passed), "
      "not of a file: tested by tests/test_refit.c, which injects failures into each check of "
      "an in-place apply and compares the input byte for byte",
      "R-APL-7",
      "a property of a process (finishing an in-place apply interrupted at any moment): tested "
      "by tests/test_refit.c fault injection and by tests/crash_test.sh, which kills -9 applies "
      "at random moments and recovers; the files such a crash can leave are the shapes of the "
      "uncommitted and replayed vectors here",
      "R-JNL-2",
      "a writer requirement about the order of writes and fsyncs, which no journal file can "
      "show: tested by tests/test_refit.c fault injection and tests/crash_test.sh kill -9 "
      "campaigns (the reader's side, what a journal left at each step means, is R-JNL-1 and "
      "R-JNL-3 here)");
  char zver[32];
  snprintf(zver, sizeof zver, "%s", ZSTD_versionString());
  write_index(json_pack(
      "{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:{s:i, s:i, s:i}, s:o}", "format",
      "DCR apply journal", "format_version", "1.0", "spec", "SPEC.md §18", "root", ".",
      "generator", "tools/mkjournals.c (make vectors); seed 0x44434a726e6c3130", "zstd_version",
      zver, "usage",
      "for each vector: copy `before` to a file CKPT and `journal` to CKPT.dcr-journal in the "
      "same folder, recover CKPT (SPEC.md §18.3, §18.4), and compare with `outcome`. Paths are "
      "relative to the folder of this index; sha256 gives each file's digest",
      "outcomes", outcome_text, "requirements_without_vectors", no_vectors, "counts", "replayed",
      counts[0], "uncommitted", counts[1], "error", counts[2], "vectors", vectors));
  fprintf(stderr, "mkjournals: %d replayed, %d uncommitted, %d error vectors in %s/journal-v1\n",
          counts[0], counts[1], counts[2], root);

  /* journal 1.1: its own folder, checkpoints and PRNG stream */
  folder = "journal-v1.1";
  ncks = 0;
  rng_state = SEED11;
  vectors11 = json_array();
  journal11_vectors();
  write_index(json_pack(
      "{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:{s:i, s:i, s:i, s:i}, s:o}", "format",
      "DCR apply journal", "format_version", "1.1", "spec", "SPEC.md §18", "root", ".",
      "generator", "tools/mkjournals.c (make vectors); seed 0x44434a726e6c3131", "zstd_version",
      zver, "usage",
      "for each vector: copy `before` to a file CKPT, `journal` (if not null) to "
      "CKPT.dcr-journal and `journal_tmp` (if not null) to CKPT.dcr-journal.tmp in the same "
      "folder, recover CKPT (SPEC.md §18.4) with `known_states` as the states the reader is "
      "given (R-JNL-4), and compare with `outcome`. The checkpoints are safetensors files "
      "(§2.1) whose state ids (§7) decide. Paths are relative to the folder of this index",
      "outcomes", json_pack(
          "{s:s, s:s, s:s, s:s}", "replayed",
          "recovering CKPT succeeds and says it replayed a journal; CKPT is then exactly `after`; "
          "neither journal file is left",
          "discarded",
          "recovering CKPT succeeds and says it removed a journal it could not replay (R-JNL-4: "
          "CKPT is a whole state the journal could be for); CKPT is exactly `before`; neither "
          "journal file is left",
          "kept",
          "recovering CKPT fails with `error` (DCR_E_JOURNAL); CKPT and CKPT.dcr-journal are both "
          "exactly as they were (R-JNL-3, R-JNL-4)",
          "unpublished",
          "recovering CKPT succeeds and replays nothing; CKPT is exactly `before`; "
          "CKPT.dcr-journal.tmp is gone (R-JNL-3: it never reached the file)"),
      "requirements_without_vectors", json_pack(
          "{s:s}", "R-JNL-5",
          "a salvage reads a bundle and proves its result before it writes: a property of a "
          "process over a bundle and a file, not of a journal; tested by tests/test_refit.c "
          "(1000 damaged journals after a crash part way through a replay, each salvaged or "
          "refused with both files as they were) and tests/cli_refit_test.sh"),
      "counts", "replayed", counts11[0], "discarded", counts11[1], "kept", counts11[2],
      "unpublished", counts11[3], "vectors", vectors11));
  fprintf(stderr, "mkjournals: %d replayed, %d discarded, %d kept, %d unpublished vectors in "
          "%s/journal-v1.1\n", counts11[0], counts11[1], counts11[2], counts11[3], root);
  /* journal 1.2: a set's journal (§18.6), its own folder and PRNG stream */
  folder = "journal-v1.2";
  ncks = 0;
  rng_state = SEED12;
  vectors12 = json_array();
  journal12_vectors();
  write_index(json_pack(
      "{s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:{s:i, s:i, s:i}, s:o}", "format",
      "DCR apply journal", "format_version", "1.2", "spec", "SPEC.md §18.6", "root", ".",
      "generator", "tools/mkjournals.c (make vectors); seed 0x44434a726e6c3132", "usage",
      "for each vector: make a directory DIR holding each file of `before` at its path, "
      "`journal` (if not null) at DIR/.dcr-journal, recover DIR (SPEC.md §18.6, R-JNL-7), and "
      "compare with `outcome`: the files under DIR afterwards, hidden ones included, are "
      "exactly `after` (for kept: `before` and the journal, byte for byte). Paths are "
      "relative to the folder of this index",
      "outcomes", json_pack(
          "{s:s, s:s, s:s}", "replayed",
          "recovering DIR succeeds and says it replayed a journal; DIR then holds exactly "
          "`after`",
          "kept", "recovering DIR fails with `error` (DCR_E_JOURNAL), changing nothing",
          "cleaned", "recovering DIR succeeds and replays nothing; DIR then holds exactly "
          "`after` (every .dcr-* name gone)"),
      "requirements_without_vectors", json_pack(
          "{s:s}", "R-JNL-6",
          "a writer's order of writes, renames and fsyncs, which no directory can show: "
          "tested by tests/test_refit.c (a failure injected into every write and fsync) and "
          "tests/crash_dir_test.sh (kill -9 at random moments of a 3-bundle series); what a "
          "crash leaves at each step is a vector here (R-JNL-7)"),
      "counts", "replayed", counts12[0], "kept", counts12[1], "cleaned", counts12[2], "vectors",
      vectors12));
  fprintf(stderr, "mkjournals: %d replayed, %d kept, %d cleaned vectors in %s/journal-v1.2\n",
          counts12[0], counts12[1], counts12[2], root);
  return 0;
}
