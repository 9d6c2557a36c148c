/*
 * test_refit.c - the refit room (refit/, SPEC.md §10.3, §18): dcr_patch_memory,
 * dcr_patch_file and its journal, dcr_journal_recover, dcr_changes. Test names
 * say which rule they check.
 *
 * The fixture writes small safetensors checkpoints (BF16, F32 and U8 tensors,
 * chunks of 4 KiB) into a temporary directory and encodes bundles between them:
 *   base -> target      same layout; 4 changed chunks of 9: one ulp on every
 *                        element of one, new values in another, a few elements
 *                        in two (the encoder picks at least two encodings)
 *   base -> target_meta the same, and the header's metadata differs (same length),
 *                        so that the in-place journal carries the prefix too
 *   base -> target_add  a tensor added (the layout changes)
 *   base -> target_rem  a tensor removed
 * and "other", a checkpoint of the same shapes and size with other values.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <jansson.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../refit/refit.h"

/* ---- checkpoints -------------------------------------------------------- */

enum { CHUNK = 4096 };

static uint64_t rng_state;

static uint64_t rng(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Dull;
}

typedef struct {
  const char *name, *dtype;
  unsigned esize;
  size_t n;      /* elements */
  uint8_t *data; /* n * esize bytes */
} tensor;

typedef struct {
  const char *step; /* __metadata__ value: 4 characters, so the header length stays */
  size_t count;
  tensor t[4];
} model;

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  assert_non_null(p);
  return p;
}

static void model_free(model *m) {
  for (size_t i = 0; i < m->count; i++) free(m->t[i].data);
  m->count = 0;
}

static model model_copy(const model *m) {
  model c = *m;
  for (size_t i = 0; i < m->count; i++) {
    size_t bytes = m->t[i].n * m->t[i].esize;
    c.t[i].data = xmalloc(bytes);
    memcpy(c.t[i].data, m->t[i].data, bytes);
  }
  return c;
}

static tensor *model_find(model *m, const char *name) {
  for (size_t i = 0; i < m->count; i++)
    if (!strcmp(m->t[i].name, name)) return &m->t[i];
  fail_msg("no tensor %s", name);
  return NULL;
}

static void add_tensor(model *m, const char *name, const char *dtype, unsigned esize, size_t n) {
  tensor *t = &m->t[m->count++];
  *t = (tensor){name, dtype, esize, n, xmalloc(n * esize)};
  for (size_t i = 0; i < n * esize; i++) t->data[i] = (uint8_t)(rng() >> 56);
  if (esize == 2) /* BF16 weights of small magnitude: exponent bytes near 0x3c */
    for (size_t i = 0; i < n; i++) t->data[2 * i + 1] = (uint8_t)(0x3c + (t->data[2 * i + 1] & 1));
}

/* The base: a.weight BF16 [8192] (4 chunks), b.bias F32 [3000] (3 chunks, the
 * last short), c.mask U8 [5000] (2 chunks). Names are written in order. */
static model make_base(uint64_t seed) {
  model m = {.step = "0001"};
  rng_state = seed;
  add_tensor(&m, "a.weight", "BF16", 2, 8192);
  add_tensor(&m, "b.bias", "F32", 4, 3000);
  add_tensor(&m, "c.mask", "U8", 1, 5000);
  return m;
}

static void bump16(uint8_t *p, int by) {
  unsigned v = (unsigned)(p[0] | p[1] << 8) + (unsigned)by;
  p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8);
}

/* The target: one optimizer-like step, in a.weight chunks 0 (sparse) and 2
 * (dense, each element one ulp), b.bias chunk 1 (dense, new values) and c.mask
 * chunk 1 (sparse). a.weight chunks 1 and 3, b.bias 0 and 2, c.mask 0 do not change. */
static model make_target(const model *base) {
  model m = model_copy(base);
  rng_state = 77;
  tensor *a = model_find(&m, "a.weight"), *b = model_find(&m, "b.bias"),
         *c = model_find(&m, "c.mask");
  for (size_t i = 0; i < 6; i++) bump16(a->data + 2 * (i * 311 + 5), 1);
  for (size_t i = 2 * CHUNK; i < 3 * CHUNK; i += 2) bump16(a->data + i, (rng() & 1) ? 1 : -1);
  for (size_t i = CHUNK; i < 2 * CHUNK; i++) b->data[i] = (uint8_t)(rng() >> 56);
  c->data[CHUNK + 3] ^= 1, c->data[CHUNK + 400] ^= 0x10, c->data[4999] += 7;
  return m;
}

static const unsigned CHANGED_CHUNKS = 4;
static const size_t DATA_BYTES = 8192 * 2 + 3000 * 4 + 5000;
/* A byte of a changed chunk, and one of an unchanged chunk (in a.weight). */
static const size_t FLIP_CHANGED = 2 * CHUNK + 10, FLIP_UNCHANGED = CHUNK + 100;

static void write_bytes(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  if (n) assert_int_equal(fwrite(p, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

static uint8_t *read_bytes(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  long size = ftell(f);
  assert_true(size >= 0);
  rewind(f);
  uint8_t *p = xmalloc((size_t)size);
  assert_int_equal(fread(p, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  *n = (size_t)size;
  return p;
}

static int exists(const char *path) { return access(path, F_OK) == 0; }

static int same_file(const char *a, const char *b) {
  size_t na, nb;
  uint8_t *pa = read_bytes(a, &na), *pb = read_bytes(b, &nb);
  int same = pa && pb && na == nb && !memcmp(pa, pb, na);
  free(pa), free(pb);
  return same;
}

static void copy_file(const char *from, const char *to) {
  size_t n;
  uint8_t *p = read_bytes(from, &n);
  assert_non_null(p);
  write_bytes(to, p, n);
  free(p);
}

/* A safetensors file: the header (padded with spaces to 8 bytes), then the data. */
static void write_model(const char *path, const model *m) {
  char h[2048];
  size_t at = 0;
  uint64_t off = 0;
  at += (size_t)snprintf(h + at, sizeof h - at, "{\"__metadata__\":{\"step\":\"%s\"}", m->step);
  for (size_t i = 0; i < m->count; i++) {
    const tensor *t = &m->t[i];
    uint64_t bytes = t->n * t->esize;
    at += (size_t)snprintf(h + at, sizeof h - at,
                           ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%zu],\"data_offsets\":[%llu,%llu]}",
                           t->name, t->dtype, t->n, (unsigned long long)off,
                           (unsigned long long)(off + bytes));
    off += bytes;
  }
  h[at++] = '}';
  while (at % 8) h[at++] = ' ';
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  uint8_t len[8];
  for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)at >> (8 * i));
  assert_int_equal(fwrite(len, 1, 8, f), 8);
  assert_int_equal(fwrite(h, 1, at, f), at);
  for (size_t i = 0; i < m->count; i++)
    assert_int_equal(fwrite(m->t[i].data, 1, m->t[i].n * m->t[i].esize, f),
                     m->t[i].n * m->t[i].esize);
  assert_int_equal(fclose(f), 0);
}

/* ---- fixture ------------------------------------------------------------- */

static char dir[256];
static char p_base[320], p_target[320], p_meta[320], p_add[320], p_rem[320], p_other[320];
static char p_work[320], p_journal[340];
static char b_main[320], b_meta[320], b_add[320], b_rem[320];
static model m_base, m_target, m_meta, m_add, m_rem, m_other;

static int file_sink(void *opaque, const void *p, size_t n) {
  return fwrite(p, 1, n, opaque) == n ? 0 : 1;
}

static void encode(const char *base, const char *target, const char *out) {
  dcr_encode_options o;
  dcr_encode_options_default(&o);
  o.chunk_size = CHUNK;
  o.threads = 1;
  FILE *f = fopen(out, "wb");
  assert_non_null(f);
  dcr_detail d;
  int rc = dcr_encode(base, target, &o, file_sink, f, NULL, &d);
  if (rc) fail_msg("encode %s: %s: %s", out, dcr_error_name(rc), d.message);
  assert_int_equal(fclose(f), 0);
}

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "%s/dcr-test-refit-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(dir)) return -1;
#define P(var, name) snprintf(var, sizeof var, "%s/%s", dir, name)
  P(p_base, "base.safetensors"), P(p_target, "target.safetensors");
  P(p_meta, "meta.safetensors"), P(p_add, "add.safetensors"), P(p_rem, "rem.safetensors");
  P(p_other, "other.safetensors"), P(p_work, "work.safetensors");
  P(b_main, "main.dcr"), P(b_meta, "meta.dcr"), P(b_add, "add.dcr"), P(b_rem, "rem.dcr");
#undef P
  snprintf(p_journal, sizeof p_journal, "%s%s", p_work, DCR__JOURNAL_SUFFIX);
  m_base = make_base(1);
  m_other = make_base(2);
  m_target = make_target(&m_base);
  m_meta = model_copy(&m_target);
  m_meta.step = "0002";
  m_add = model_copy(&m_target);
  rng_state = 5;
  add_tensor(&m_add, "d.new", "F32", 4, 700);
  m_rem = model_copy(&m_target);
  free(m_rem.t[2].data); /* c.mask, the last */
  m_rem.count = 2;
  write_model(p_base, &m_base), write_model(p_target, &m_target), write_model(p_meta, &m_meta);
  write_model(p_add, &m_add), write_model(p_rem, &m_rem), write_model(p_other, &m_other);
  encode(p_base, p_target, b_main), encode(p_base, p_meta, b_meta);
  encode(p_base, p_add, b_add), encode(p_base, p_rem, b_rem);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  const char *all[] = {p_base, p_target, p_meta, p_add, p_rem, p_other, p_work, p_journal,
                       b_main, b_meta, b_add, b_rem};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) unlink(all[i]);
  rmdir(dir);
  model_free(&m_base), model_free(&m_target), model_free(&m_meta);
  model_free(&m_add), model_free(&m_rem), model_free(&m_other);
  return 0;
}

static dcr_reader *open_bundle(const char *path) {
  dcr_reader *r;
  dcr_detail d;
  int rc = dcr_reader_open_file(&r, path, NULL, &d);
  if (rc) fail_msg("%s: %s: %s", path, dcr_error_name(rc), d.message);
  return r;
}

/* The same bundle as a reader over memory (its bytes stay in *keep). */
static dcr_reader *open_bundle_memory(const char *path, uint8_t **keep) {
  size_t n;
  *keep = read_bytes(path, &n);
  assert_non_null(*keep);
  dcr_reader *r;
  assert_int_equal(dcr_reader_open_memory(&r, *keep, n, NULL, NULL), DCR_OK);
  return r;
}

static dcr_patch *new_patch(dcr_reader *r, int level, unsigned threads) {
  dcr_patch *p;
  assert_int_equal(dcr_patch_create(&p, r, NULL), DCR_OK);
  assert_int_equal(dcr_patch_set_verify(p, level), DCR_OK);
  dcr_patch_set_threads(p, threads);
  return p;
}

static dcr_patch_stats stats_of(const dcr_patch *p) {
  dcr_patch_stats s;
  dcr_patch_stats_get(p, &s, sizeof s);
  return s;
}

static const char *level_name(int level) {
  return level == DCR_VERIFY_FULL ? "FULL" : level == DCR_VERIFY_CHUNK ? "CHUNK" : "NONE";
}

/* ---- memory apply: buffers loaded from a checkpoint file ------------------ */

typedef struct {
  char name[64];
  uint8_t *data;
  size_t size;
} named;

typedef struct {
  size_t count;
  named t[8];
} buffers;

/* Every tensor of a checkpoint file, in malloc'd buffers. */
static buffers load_buffers(const char *path) {
  buffers b = {0};
  dcr_checkpoint *ck;
  dcr_checkpoint_summary info;
  assert_int_equal(dcr_checkpoint_open(&ck, path, DCR_KIND_SAFETENSORS, NULL, NULL), DCR_OK);
  dcr_checkpoint_info(ck, &info);
  size_t n;
  uint8_t *file = read_bytes(path, &n);
  assert_non_null(file);
  assert_true(info.tensor_count <= 8);
  for (uint64_t i = 0; i < info.tensor_count; i++) {
    dcr_tensor_side s;
    const char *name;
    size_t length;
    dcr_checkpoint_tensor(ck, i, &s, &name, &length);
    named *t = &b.t[b.count++];
    snprintf(t->name, sizeof t->name, "%.*s", (int)length, name);
    t->size = (size_t)s.byte_length;
    t->data = xmalloc(t->size);
    memcpy(t->data, file + info.prefix_length + s.offset, t->size);
  }
  free(file);
  dcr_checkpoint_free(ck);
  return b;
}

static void buffers_free(buffers *b) {
  for (size_t i = 0; i < b->count; i++) free(b->t[i].data);
  b->count = 0;
}

static buffers buffers_copy(const buffers *b) {
  buffers c = *b;
  for (size_t i = 0; i < b->count; i++) {
    c.t[i].data = xmalloc(b->t[i].size);
    memcpy(c.t[i].data, b->t[i].data, b->t[i].size);
  }
  return c;
}

static named *buffers_find(buffers *b, const char *name, size_t length) {
  for (size_t i = 0; i < b->count; i++)
    if (strlen(b->t[i].name) == length && !memcmp(b->t[i].name, name, length)) return &b->t[i];
  return NULL;
}

static int buffers_equal(const buffers *a, const buffers *b) {
  if (a->count != b->count) return 0;
  for (size_t i = 0; i < a->count; i++)
    if (strcmp(a->t[i].name, b->t[i].name) || a->t[i].size != b->t[i].size ||
        memcmp(a->t[i].data, b->t[i].data, a->t[i].size))
      return 0;
  return 1;
}

/* The resolver: delta-coded tensors from `held`, new ones in fresh buffers (which
 * join `held` once the apply is done), removed ones as NULL or their bytes. */
typedef struct {
  buffers *held;
  uint8_t *fresh[8];
  uint64_t fresh_size[8];
  char fresh_name[8][64];
  int give_removed;       /* 1: a removed tensor's bytes; 0: NULL */
  uint64_t wrong_size;    /* entry to give a buffer one byte short, or DCR_NONE */
  uint64_t refuse;        /* entry to return non-zero for, or DCR_NONE */
  uint64_t calls;
  uint64_t last_entry;
} resolver;

static resolver make_resolver(buffers *held) {
  resolver rs = {.held = held, .wrong_size = DCR_NONE, .refuse = DCR_NONE,
                 .last_entry = DCR_NONE};
  return rs;
}

static int resolve(void *opaque, uint64_t entry, const dcr_tensor_info *t, dcr_buffer *b) {
  resolver *rs = opaque;
  /* called once per entry, in entry order; a resized one twice, its base first */
  if (t->resized && !t->base.present) assert_int_equal(entry, rs->last_entry);
  else assert_int_equal(entry, rs->last_entry == DCR_NONE ? 0 : rs->last_entry + 1);
  rs->last_entry = entry;
  rs->calls++;
  if (entry == rs->refuse) return 1;
  named *h = buffers_find(rs->held, t->name, t->name_length);
  if (!h && t->raw) { /* a set's raw member the caller does not hold: skipped */
    *b = (dcr_buffer){NULL, 0};
    return 0;
  }
  if (t->resized && !t->target.present) {
    assert_non_null(h);
    *b = (dcr_buffer){h->data, h->size};
  } else if (t->target.present && !t->delta_coded) {
    assert_true(entry < 8);
    rs->fresh[entry] = xmalloc((size_t)t->target.byte_length);
    memset(rs->fresh[entry], 0xAA, (size_t)t->target.byte_length); /* to be ignored */
    rs->fresh_size[entry] = t->target.byte_length;
    snprintf(rs->fresh_name[entry], 64, "%.*s", (int)t->name_length, t->name);
    *b = (dcr_buffer){rs->fresh[entry], t->target.byte_length};
  } else if (t->target.present) {
    assert_non_null(h);
    *b = (dcr_buffer){h->data, h->size};
  } else {
    *b = rs->give_removed && h ? (dcr_buffer){h->data, h->size} : (dcr_buffer){NULL, 0};
  }
  if (entry == rs->wrong_size) b->size--;
  return 0;
}

/* After an apply: the tensors the caller would hold, the target's set (removed
 * ones dropped, new ones taken from the fresh buffers), sorted by name. */
static buffers result_of(resolver *rs, dcr_reader *r) {
  buffers out = {0};
  dcr_bundle_info info;
  dcr_reader_info(r, &info);
  for (uint64_t i = 0; i < info.entry_count; i++) {
    dcr_tensor_info t;
    dcr_reader_tensor(r, i, &t);
    named *h = buffers_find(rs->held, t.name, t.name_length);
    if (!t.target.present || (!rs->fresh[i] && !h)) continue; /* removed, or skipped */
    named *o = &out.t[out.count++];
    snprintf(o->name, sizeof o->name, "%.*s", (int)t.name_length, t.name);
    o->size = (size_t)t.target.byte_length;
    o->data = xmalloc(o->size);
    if (rs->fresh[i]) memcpy(o->data, rs->fresh[i], o->size);
    else memcpy(o->data, h->data, o->size);
  }
  return out;
}

static void resolver_free(resolver *rs) {
  for (int i = 0; i < 8; i++) free(rs->fresh[i]), rs->fresh[i] = NULL;
}

/* Applies bundle `r` to `held` at `level`; returns the code and, in *out,
 * what the caller would hold after it. */
static int memory_apply(dcr_reader *r, buffers *held, int level, unsigned threads,
                        dcr_patch_stats *st, buffers *out, dcr_detail *d) {
  dcr_patch *p = new_patch(r, level, threads);
  resolver rs = make_resolver(held);
  int rc = dcr_patch_memory(p, resolve, &rs, d);
  if (st) *st = stats_of(p);
  if (out) *out = result_of(&rs, r);
  resolver_free(&rs);
  dcr_patch_free(p);
  return rc;
}

static size_t changed_chunk_bytes(dcr_reader *r) {
  dcr_bundle_info info;
  dcr_reader_info(r, &info);
  size_t total = 0;
  for (uint64_t k = 0; k < info.chunk_count; k++) {
    dcr_chunk_info c;
    dcr_tensor_info t;
    dcr_reader_chunk(r, k, &c);
    dcr_reader_tensor(r, c.tensor, &t);
    uint64_t at = (uint64_t)c.chunk * CHUNK;
    total += (size_t)(t.target.byte_length - at < CHUNK ? t.target.byte_length - at : CHUNK);
  }
  return total;
}

/* §10.3: every level rebuilds the target exactly, on 1 or 3 threads, from a file
 * or a memory bundle; the stats count the changed chunks and the bytes each level
 * reads (FULL every byte, CHUNK the changed chunks, NONE none). */
static void test_memory_apply_every_level_gives_target(void **state) {
  (void)state;
  uint8_t *keep;
  dcr_reader *rf = open_bundle(b_main), *rm = open_bundle_memory(b_main, &keep);
  buffers target = load_buffers(p_target);
  dcr_bundle_info info;
  dcr_reader_info(rf, &info);
  assert_int_equal(info.chunk_count, CHANGED_CHUNKS);
  /* the fixture covers several encodings */
  int seen[DCR_ENC_COUNT] = {0}, kinds = 0;
  for (uint64_t k = 0; k < info.chunk_count; k++) {
    dcr_chunk_info c;
    dcr_reader_chunk(rf, k, &c);
    if (!seen[c.encoding]++) kinds++;
    print_message("fixture chunk %llu: entry %u chunk %u %s, %u elements\n",
                  (unsigned long long)k, c.tensor, c.chunk, dcr_encoding_name(c.encoding), c.count);
  }
  assert_true(kinds >= 2);
  for (int level = DCR_VERIFY_FULL; level <= DCR_VERIFY_NONE; level++) {
    buffers results[4];
    int i = 0;
    for (int memory = 0; memory <= 1; memory++)
      for (unsigned threads = 1; threads <= 3; threads += 2, i++) {
        buffers held = load_buffers(p_base);
        dcr_patch_stats st;
        dcr_detail d;
        int rc = memory_apply(memory ? rm : rf, &held, level, threads, &st, &results[i], &d);
        if (rc) fail_msg("%s: %s: %s", level_name(level), dcr_error_name(rc), d.message);
        if (!buffers_equal(&results[i], &target))
          fail_msg("%s, %u threads: not the target", level_name(level), threads);
        assert_int_equal(st.chunks_patched, CHANGED_CHUNKS);
        assert_int_equal(st.already_target, 0);
        assert_int_equal(st.recovered, 0);
        assert_int_equal(st.bytes_checked, level == DCR_VERIFY_FULL    ? DATA_BYTES
                                           : level == DCR_VERIFY_CHUNK ? changed_chunk_bytes(rf)
                                                                       : 0);
        assert_int_equal(st.bytes_written, changed_chunk_bytes(rf));
        buffers_free(&held);
      }
    for (int k = 1; k < 4; k++) assert_true(buffers_equal(&results[0], &results[k]));
    for (int k = 0; k < 4; k++) buffers_free(&results[k]);
  }
  buffers_free(&target);
  dcr_reader_free(rf), dcr_reader_free(rm);
  free(keep);
}

/* §10.2, §10.3: the target given as the base is accepted as it is at every level
 * (NONE by its look at one chunk): nothing is written and already_target is 1. */
static void test_memory_apply_twice_is_noop(void **state) {
  (void)state;
  dcr_reader *r = open_bundle(b_main);
  buffers target = load_buffers(p_target);
  for (int level = DCR_VERIFY_FULL; level <= DCR_VERIFY_NONE; level++) {
    buffers held = load_buffers(p_base), once, twice;
    dcr_patch_stats st;
    assert_int_equal(memory_apply(r, &held, level, 2, &st, &once, NULL), DCR_OK);
    assert_true(buffers_equal(&once, &target));
    assert_int_equal(memory_apply(r, &held, level, 2, &st, &twice, NULL), DCR_OK);
    assert_int_equal(st.already_target, 1);
    assert_int_equal(st.chunks_patched, 0);
    assert_int_equal(st.bytes_written, 0);
    assert_true(buffers_equal(&twice, &target));
    buffers_free(&held), buffers_free(&once), buffers_free(&twice);
  }
  buffers_free(&target);
  dcr_reader_free(r);
}

/* Flips one byte of a tensor's buffer. */
static void flip(buffers *b, const char *name, size_t at) {
  named *t = buffers_find(b, name, strlen(name));
  assert_non_null(t);
  t->data[at] ^= 0x40;
}

/* §10.3: a wrong base at FULL or CHUNK is DCR_E_BASE_MISMATCH and every buffer is
 * left as it was, for a checkpoint of the same shapes with other values and for a
 * base wrong in one byte of a changed chunk. A byte wrong in an unchanged chunk:
 * FULL finds it (tensor hash); CHUNK does not look there (dcr.h: "unchanged chunks
 * ... are not checked"), so it patches, and the flipped byte stays flipped. */
static void test_memory_wrong_base_leaves_buffers_untouched(void **state) {
  (void)state;
  dcr_reader *r = open_bundle(b_main);
  buffers target = load_buffers(p_target);
  for (int level = DCR_VERIFY_FULL; level <= DCR_VERIFY_CHUNK; level++)
    for (int kind = 0; kind < 3; kind++) {
      buffers held = load_buffers(kind == 0 ? p_other : p_base);
      if (kind == 1) flip(&held, "a.weight", FLIP_CHANGED);
      if (kind == 2) flip(&held, "a.weight", FLIP_UNCHANGED);
      buffers before = buffers_copy(&held), after;
      dcr_patch_stats st;
      dcr_detail d;
      int rc = memory_apply(r, &held, level, 3, &st, &after, &d);
      if (kind == 2 && level == DCR_VERIFY_CHUNK) {
        assert_int_equal(rc, DCR_OK);
        buffers expect = buffers_copy(&target);
        flip(&expect, "a.weight", FLIP_UNCHANGED);
        assert_true(buffers_equal(&after, &expect));
        buffers_free(&expect);
      } else {
        if (rc != DCR_E_BASE_MISMATCH)
          fail_msg("%s, case %d: %s", level_name(level), kind, dcr_error_name(rc));
        assert_true(buffers_equal(&held, &before));
        assert_int_equal(st.chunks_patched, 0);
        assert_int_equal(st.bytes_written, 0);
        if (kind) assert_string_equal(d.tensor_name, "a.weight");
      }
      buffers_free(&held), buffers_free(&before), buffers_free(&after);
    }
  buffers_free(&target);
  dcr_reader_free(r);
}

/* The resolver's contract (dcr.h): a buffer of the wrong size, or a resolver that
 * fails, is DCR_E_ARGUMENT naming the tensor, before anything is written. */
static void test_memory_resolver_errors_name_the_tensor(void **state) {
  (void)state;
  dcr_reader *r = open_bundle(b_main);
  for (int level = DCR_VERIFY_FULL; level <= DCR_VERIFY_NONE; level++)
    for (int how = 0; how < 2; how++)
      for (uint64_t entry = 0; entry < 3; entry++) {
        buffers held = load_buffers(p_base), before = buffers_copy(&held);
        dcr_patch *p = new_patch(r, level, 2);
        resolver rs = make_resolver(&held);
        if (how) rs.refuse = entry;
        else rs.wrong_size = entry;
        dcr_detail d;
        assert_int_equal(dcr_patch_memory(p, resolve, &rs, &d), DCR_E_ARGUMENT);
        assert_int_equal(d.code, DCR_E_ARGUMENT);
        assert_int_equal(d.tensor, entry);
        assert_string_equal(d.tensor_name, held.t[entry].name);
        assert_int_equal(rs.calls, entry + 1); /* stops at the bad one */
        assert_true(buffers_equal(&held, &before));
        resolver_free(&rs);
        dcr_patch_free(p);
        buffers_free(&held), buffers_free(&before);
      }
  /* no resolver at all */
  dcr_patch *p = new_patch(r, DCR_VERIFY_FULL, 1);
  assert_int_equal(dcr_patch_memory(p, NULL, NULL, NULL), DCR_E_ARGUMENT);
  dcr_patch_free(p);
  assert_int_equal(dcr_patch_create(&p, r, NULL), DCR_OK);
  assert_int_equal(dcr_patch_set_verify(p, 3), DCR_E_ARGUMENT);
  assert_int_equal(dcr_patch_set_verify(p, -1), DCR_E_ARGUMENT);
  dcr_patch_free(p);
  dcr_reader_free(r);
}

/* A NULL buffer for a tensor the target keeps, of non-zero size: DCR_E_ARGUMENT. */
static int resolve_null_for_b(void *opaque, uint64_t entry, const dcr_tensor_info *t,
                              dcr_buffer *b) {
  int rc = resolve(opaque, entry, t, b);
  if (t->name_length == 6 && !memcmp(t->name, "b.bias", 6)) *b = (dcr_buffer){NULL, 0};
  return rc;
}

static void test_memory_null_buffer_for_kept_tensor_is_argument(void **state) {
  (void)state;
  dcr_reader *r = open_bundle(b_main);
  buffers held = load_buffers(p_base), before = buffers_copy(&held);
  dcr_patch *p = new_patch(r, DCR_VERIFY_NONE, 1);
  resolver rs = make_resolver(&held);
  dcr_detail d;
  assert_int_equal(dcr_patch_memory(p, resolve_null_for_b, &rs, &d), DCR_E_ARGUMENT);
  assert_string_equal(d.tensor_name, "b.bias");
  assert_true(buffers_equal(&held, &before));
  resolver_free(&rs);
  dcr_patch_free(p);
  buffers_free(&held), buffers_free(&before);
  dcr_reader_free(r);
}

/* §10.1: an added tensor starts from zeros: the caller's new buffer is filled with
 * the target's bytes whatever it held (0xAA here); the others are patched. */
static void test_memory_added_tensor_fills_new_buffer(void **state) {
  (void)state;
  dcr_reader *r = open_bundle(b_add);
  buffers target = load_buffers(p_add);
  for (int level = DCR_VERIFY_FULL; level <= DCR_VERIFY_NONE; level++) {
    buffers held = load_buffers(p_base), out;
    dcr_patch_stats st;
    dcr_detail d;
    int rc = memory_apply(r, &held, level, 2, &st, &out, &d);
    if (rc) fail_msg("%s: %s: %s", level_name(level), dcr_error_name(rc), d.message);
    assert_int_equal(out.count, 4);
    assert_true(buffers_equal(&out, &target));
    buffers_free(&held), buffers_free(&out);
  }
  buffers_free(&target);
  dcr_reader_free(r);
}

/* Every tensor from `held` (a buffers *), whatever the bundle asks: no new buffers. */
static int resolve_held_only(void *opaque, uint64_t entry, const dcr_tensor_info *t,
                             dcr_buffer *b) {
  (void)entry;
  named *h = buffers_find(opaque, t->name, t->name_length);
  *b = h ? (dcr_buffer){h->data, h->size} : (dcr_buffer){NULL, 0};
  return 0;
}

/* A resized tensor (format 1.1, §6.5), grown or shrunk: the resolver gives the
 * tensor it holds, then a new buffer that gets the target; at every level the
 * result is the target's bytes. Applied again to the result, FULL and CHUNK find
 * it the target already (nothing written); a wrong base is DCR_E_BASE_MISMATCH
 * with nothing written. The file apply agrees. */
static void test_memory_resized_tensor_gets_new_buffer(void **state) {
  (void)state;
  char p_grow[300], b_grow[300];
  snprintf(p_grow, sizeof p_grow, "%s/grow.safetensors", dir);
  snprintf(b_grow, sizeof b_grow, "%s/grow.dcr", dir);
  for (int shrink = 0; shrink < 2; shrink++) {
    model m = model_copy(&m_target);
    tensor *a = model_find(&m, "b.bias"); /* 3 chunks, the last short: a chunk straddles */
    size_t n = shrink ? a->n - 1000 : a->n + 500;
    uint8_t *resized = xmalloc(n * a->esize);
    memcpy(resized, a->data, (shrink ? n : a->n) * a->esize);
    if (!shrink) memset(resized + a->n * a->esize, 0x3c, 500 * a->esize);
    free(a->data);
    a->data = resized, a->n = n;
    write_model(p_grow, &m);
    encode(p_base, p_grow, b_grow);
    dcr_reader *r = open_bundle(b_grow);
    dcr_tensor_info t;
    dcr_reader_tensor(r, 1, &t);
    assert_true(t.resized);
    buffers target = load_buffers(p_grow);
    for (int level = DCR_VERIFY_FULL; level <= DCR_VERIFY_NONE; level++) {
      buffers held = load_buffers(p_base), before = buffers_copy(&held), out;
      dcr_patch_stats st;
      dcr_detail d;
      int rc = memory_apply(r, &held, level, 2, &st, &out, &d);
      if (rc) fail_msg("%s: %s: %s", level_name(level), dcr_error_name(rc), d.message);
      assert_true(buffers_equal(&out, &target));
      named *ha = buffers_find(&held, "b.bias", 6), *ba = buffers_find(&before, "b.bias", 6);
      assert_memory_equal(ha->data, ba->data, ba->size); /* the held b.bias is only read */
      if (level != DCR_VERIFY_NONE) {
        buffers again = buffers_copy(&out);
        assert_int_equal(memory_apply(r, &again, level, 2, &st, NULL, &d), DCR_OK);
        assert_int_equal(st.already_target, 1);
        assert_true(buffers_equal(&again, &target));
        buffers_free(&again);
        buffers wrong = load_buffers(p_other), wrong_before = buffers_copy(&wrong);
        assert_int_equal(memory_apply(r, &wrong, level, 2, NULL, NULL, &d), DCR_E_BASE_MISMATCH);
        assert_true(buffers_equal(&wrong, &wrong_before));
        buffers_free(&wrong), buffers_free(&wrong_before);
      }
      buffers_free(&held), buffers_free(&before), buffers_free(&out);
    }
    /* a resolver that holds the resized tensor but gives no new buffer for it */
    buffers held = load_buffers(p_base);
    dcr_patch *p = new_patch(r, DCR_VERIFY_CHUNK, 1);
    dcr_detail d;
    assert_int_equal(dcr_patch_memory(p, resolve_held_only, &held, &d), DCR_E_ARGUMENT);
    assert_string_equal(d.tensor_name, "b.bias");
    assert_non_null(strstr(d.message, "new buffer"));
    dcr_patch_free(p);
    buffers_free(&held);
    copy_file(p_base, p_work);
    assert_int_equal(dcr_apply(r, p_base, p_work, NULL, &d), DCR_OK);
    assert_true(same_file(p_work, p_grow));
    buffers_free(&target);
    dcr_reader_free(r);
    model_free(&m);
  }
  unlink(p_grow), unlink(b_grow), unlink(p_work);
}

/* The tensors of a model as a caller holds them, sorted by name, and, with
 * `raw`, the file `raw` as the tensor named `raw_name`. */
static buffers buffers_of(const model *m, const char *raw_name, const char *raw) {
  buffers b = {0};
  for (size_t i = 0; i < m->count; i++) {
    named *t = &b.t[b.count++];
    snprintf(t->name, sizeof t->name, "%s", m->t[i].name);
    t->size = m->t[i].n * m->t[i].esize;
    t->data = xmalloc(t->size);
    memcpy(t->data, m->t[i].data, t->size);
  }
  if (raw) {
    named *t = &b.t[b.count++];
    snprintf(t->name, sizeof t->name, "%s", raw_name);
    t->data = read_bytes(raw, &t->size);
  }
  return b;
}

static void write_set(const char *path, const model *m, size_t split, const char *config) {
  char p[400];
  model first = *m, second = *m;
  first.count = split;
  second.count = m->count - split;
  memmove(second.t, m->t + split, second.count * sizeof *m->t);
  mkdir(path, 0755);
  snprintf(p, sizeof p, "%s/model-1.safetensors", path);
  write_model(p, &first);
  snprintf(p, sizeof p, "%s/model-2.safetensors", path);
  write_model(p, &second);
  snprintf(p, sizeof p, "%s/config.json", path);
  write_bytes(p, config, strlen(config));
}

/* A set's bundle (§2.3) applied to the weights alone: its raw member (config.json,
 * changed and resized) given no buffer is skipped, the weights become the
 * target's at every level though c.mask moves to the other shard and b.bias
 * grows; given, config.json is patched too. A wrong weight is refused at FULL and
 * CHUNK, nothing written. */
static void test_memory_set_weights_alone(void **state) {
  (void)state;
  char d_base[300], d_target[300], b_set[300], cfg_base[340], cfg_target[340], cmd[1000];
  snprintf(d_base, sizeof d_base, "%s/set-base", dir);
  snprintf(d_target, sizeof d_target, "%s/set-target", dir);
  snprintf(b_set, sizeof b_set, "%s/set.dcr", dir);
  snprintf(cfg_base, sizeof cfg_base, "%s/config.json", d_base);
  snprintf(cfg_target, sizeof cfg_target, "%s/config.json", d_target);
  model m = model_copy(&m_target);
  tensor *bias = model_find(&m, "b.bias");
  uint8_t *grown = xmalloc((bias->n + 500) * bias->esize);
  memcpy(grown, bias->data, bias->n * bias->esize);
  memset(grown + bias->n * bias->esize, 0x3c, 500 * bias->esize);
  free(bias->data);
  bias->data = grown, bias->n += 500;
  write_set(d_base, &m_base, 2, "{\"vocab_size\": 3000}\n");
  write_set(d_target, &m, 1, "{\"vocab_size\": 3500, \"step\": 2}\n");
  encode(d_base, d_target, b_set);
  dcr_reader *r = open_bundle(b_set);
  dcr_bundle_info info;
  dcr_reader_info(r, &info);
  assert_int_equal(info.kind, DCR_KIND_SET);
  for (int give_raw = 0; give_raw < 2; give_raw++) {
    buffers target = buffers_of(&m, "config.json", give_raw ? cfg_target : NULL);
    for (int level = DCR_VERIFY_FULL; level <= DCR_VERIFY_NONE; level++) {
      buffers held = buffers_of(&m_base, "config.json", give_raw ? cfg_base : NULL), out;
      dcr_patch_stats st;
      dcr_detail d;
      int rc = memory_apply(r, &held, level, 2, &st, &out, &d);
      if (rc) fail_msg("%s: %s: %s", level_name(level), dcr_error_name(rc), d.message);
      assert_true(buffers_equal(&out, &target));
      buffers_free(&held), buffers_free(&out);
      if (level == DCR_VERIFY_NONE) continue;
      buffers wrong = buffers_of(&m_base, "config.json", give_raw ? cfg_base : NULL), before;
      wrong.t[2].data[4000] ^= 1; /* c.mask, in a chunk the bundle does not change */
      wrong.t[0].data[level == DCR_VERIFY_FULL ? 0 : 2 * CHUNK] ^= 1; /* a.weight */
      before = buffers_copy(&wrong);
      assert_int_equal(memory_apply(r, &wrong, level, 2, NULL, NULL, &d), DCR_E_BASE_MISMATCH);
      assert_true(buffers_equal(&wrong, &before));
      buffers_free(&wrong), buffers_free(&before);
    }
    buffers_free(&target);
  }
  dcr_reader_free(r);
  model_free(&m);
  snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s' '%s'", d_base, d_target, b_set);
  assert_int_equal(system(cmd), 0);
}

/* A removed tensor: NULL skips it; its bytes, given, are hashed at FULL (dcr.h:
 * "every base byte given is hashed"), so wrong ones are DCR_E_BASE_MISMATCH there
 * and nothing is written; CHUNK does not read them. */
static void test_memory_removed_tensor_null_or_checked(void **state) {
  (void)state;
  dcr_reader *r = open_bundle(b_rem);
  buffers target = load_buffers(p_rem);
  for (int level = DCR_VERIFY_FULL; level <= DCR_VERIFY_NONE; level++)
    for (int give = 0; give <= 2; give++) { /* NULL, its bytes, wrong bytes */
      buffers held = load_buffers(p_base), before;
      if (give == 2) flip(&held, "c.mask", 17);
      before = buffers_copy(&held);
      dcr_patch *p = new_patch(r, level, 2);
      resolver rs = make_resolver(&held);
      rs.give_removed = give != 0;
      dcr_detail d;
      int rc = dcr_patch_memory(p, resolve, &rs, &d);
      if (give == 2 && level == DCR_VERIFY_FULL) {
        assert_int_equal(rc, DCR_E_BASE_MISMATCH);
        assert_string_equal(d.tensor_name, "c.mask");
        assert_true(buffers_equal(&held, &before));
      } else {
        if (rc) fail_msg("%s, give %d: %s: %s", level_name(level), give, dcr_error_name(rc),
                         d.message);
        buffers out = result_of(&rs, r);
        assert_true(buffers_equal(&out, &target));
        buffers_free(&out);
        /* the removed tensor's bytes are only read */
        named *c = buffers_find(&held, "c.mask", 6), *c0 = buffers_find(&before, "c.mask", 6);
        assert_memory_equal(c->data, c0->data, c->size);
      }
      resolver_free(&rs);
      dcr_patch_free(p);
      buffers_free(&held), buffers_free(&before);
    }
  buffers_free(&target);
  dcr_reader_free(r);
}

/* Cancels at the first progress report. */
typedef struct {
  volatile int cancel;
  unsigned reports;
} canceller;

static void cancel_now(void *opaque, uint64_t done, uint64_t total) {
  (void)done, (void)total;
  canceller *c = opaque;
  c->reports++;
  c->cancel = 1;
}

/* dcr.h: "Non-zero *cancel stops with DCR_E_INTERRUPTED; state is then as before
 * the call (memory)". So a cancelled call either is DCR_E_INTERRUPTED with the
 * buffers as they were, or finished (DCR_OK, the target): never in between.
 * Cancelled before the call (FULL and CHUNK stop in their check), and at the first
 * progress report, which comes once the first changed chunk is patched. */
static void test_memory_cancel_leaves_base_or_target(void **state) {
  (void)state;
  dcr_reader *r = open_bundle(b_main);
  buffers target = load_buffers(p_target);
  for (int level = DCR_VERIFY_FULL; level <= DCR_VERIFY_NONE; level++)
    for (int when = 0; when < 2; when++) {
      buffers held = load_buffers(p_base), before = buffers_copy(&held);
      dcr_patch *p = new_patch(r, level, when ? 1 : 2);
      canceller c = {.cancel = when == 0};
      dcr_patch_set_cancel(p, &c.cancel);
      dcr_patch_set_progress(p, cancel_now, &c);
      resolver rs = make_resolver(&held);
      dcr_detail d;
      int rc = dcr_patch_memory(p, resolve, &rs, &d);
      if (when == 0 && level != DCR_VERIFY_NONE) assert_int_equal(rc, DCR_E_INTERRUPTED);
      if (when == 1) assert_true(c.reports > 0);
      if (rc == DCR_E_INTERRUPTED) {
        if (!buffers_equal(&held, &before))
          fail_msg("%s: DCR_E_INTERRUPTED with %llu of %u chunks patched", level_name(level),
                   (unsigned long long)stats_of(p).chunks_patched, CHANGED_CHUNKS);
      } else {
        assert_int_equal(rc, DCR_OK);
        buffers out = result_of(&rs, r);
        assert_true(buffers_equal(&out, &target));
        buffers_free(&out);
      }
      resolver_free(&rs);
      dcr_patch_free(p);
      buffers_free(&held), buffers_free(&before);
    }
  buffers_free(&target);
  dcr_reader_free(r);
}

/* ---- dcr_changes ---------------------------------------------------------- */

/* §9.1 through the iterator: every change, applied by dcr_change_apply to a copy of
 * the base, gives the target; exactly chunk_count changes, in index order (entry,
 * then chunk, increasing), sparse positions strictly increasing, the checks those
 * of the index. */
static void test_changes_iterator_rebuilds_target(void **state) {
  (void)state;
  const char *bundles[] = {b_main, b_add, b_rem};
  const char *targets[] = {p_target, p_add, p_rem};
  for (int which = 0; which < 3; which++) {
    dcr_reader *r = open_bundle(bundles[which]);
    dcr_bundle_info info;
    dcr_reader_info(r, &info);
    buffers held = load_buffers(p_base), target = load_buffers(targets[which]), out = {0};
    /* the caller's tensors as the target has them: new ones start from zeros */
    uint8_t *mem[8] = {0};
    for (uint64_t i = 0; i < info.entry_count; i++) {
      dcr_tensor_info t;
      dcr_reader_tensor(r, i, &t);
      if (!t.target.present) continue;
      mem[i] = calloc(1, (size_t)t.target.byte_length + 1);
      assert_non_null(mem[i]);
      if (t.delta_coded)
        memcpy(mem[i], buffers_find(&held, t.name, t.name_length)->data,
               (size_t)t.target.byte_length);
    }
    dcr_changes *it;
    assert_int_equal(dcr_changes_open(&it, r, NULL), DCR_OK);
    const dcr_change *c;
    uint64_t n = 0, last_entry = 0, last_chunk = 0;
    for (;;) {
      dcr_detail d;
      assert_int_equal(dcr_changes_next(it, &c, &d), DCR_OK);
      if (!c) break;
      dcr_chunk_info ci;
      dcr_reader_chunk(r, n, &ci);
      assert_int_equal(c->entry, ci.tensor);
      assert_int_equal(c->chunk, ci.chunk);
      assert_int_equal(c->count, ci.count);
      assert_int_equal(c->base_check, ci.base_check);
      assert_int_equal(c->target_check, ci.target_check);
      if (n) assert_true(c->entry > last_entry || (c->entry == last_entry && c->chunk > last_chunk));
      last_entry = c->entry, last_chunk = c->chunk;
      assert_int_equal(c->offset, (uint64_t)c->chunk * CHUNK);
      if (c->positions)
        for (uint32_t i = 1; i < c->count; i++) assert_true(c->positions[i] > c->positions[i - 1]);
      assert_non_null(mem[c->entry]);
      /* a wrong length changes nothing */
      assert_int_equal(dcr_change_apply(c, mem[c->entry] + c->offset, (size_t)c->length + 1, &d),
                       DCR_E_ARGUMENT);
      assert_int_equal(dcr_change_apply(c, mem[c->entry] + c->offset, (size_t)c->length, &d),
                       DCR_OK);
      n++;
    }
    assert_int_equal(n, info.chunk_count);
    assert_int_equal(dcr_changes_next(it, &c, NULL), DCR_OK); /* stays at the end */
    assert_null(c);
    dcr_changes_free(it);
    for (uint64_t i = 0; i < info.entry_count; i++) {
      dcr_tensor_info t;
      dcr_reader_tensor(r, i, &t);
      if (!mem[i]) continue;
      named *o = &out.t[out.count++];
      snprintf(o->name, sizeof o->name, "%.*s", (int)t.name_length, t.name);
      o->size = (size_t)t.target.byte_length;
      o->data = mem[i];
    }
    assert_true(buffers_equal(&out, &target));
    buffers_free(&out), buffers_free(&held), buffers_free(&target);
    dcr_reader_free(r);
  }
}

/* ---- in-place file apply ---------------------------------------------------- */

static int patch_file(dcr_reader *r, int level, int sync, dcr__faults *f, dcr_patch_stats *st,
                      dcr_detail *d) {
  dcr_patch *p = new_patch(r, level, 1);
  dcr_patch_set_sync(p, sync);
  if (f) dcr__patch_set_faults(p, f);
  int rc = dcr_patch_file(p, p_work, d);
  if (st) *st = stats_of(p);
  dcr_patch_free(p);
  return rc;
}

/* §18: at every level the file ends as the target byte for byte, header included
 * (metadata that differs in the same number of bytes), and no journal is left. */
static void test_inplace_every_level_gives_target_file(void **state) {
  (void)state;
  const char *bundles[] = {b_main, b_meta}, *targets[] = {p_target, p_meta};
  for (int which = 0; which < 2; which++) {
    dcr_reader *r = open_bundle(bundles[which]);
    for (int level = DCR_VERIFY_FULL; level <= DCR_VERIFY_NONE; level++)
      for (int sync = 0; sync <= 1; sync++) {
        copy_file(p_base, p_work);
        dcr_patch_stats st;
        dcr_detail d;
        int rc = patch_file(r, level, sync, NULL, &st, &d);
        if (rc) fail_msg("%s: %s: %s", level_name(level), dcr_error_name(rc), d.message);
        assert_true(same_file(p_work, targets[which]));
        assert_false(exists(p_journal));
        assert_int_equal(st.already_target, 0);
        assert_int_equal(st.recovered, 0);
        assert_int_equal(st.chunks_patched, CHANGED_CHUNKS);
        assert_true(st.journal_bytes > 0);
        assert_true(st.bytes_written > 0 && st.bytes_written <= changed_chunk_bytes(r) + 1024);
      }
    dcr_reader_free(r);
  }
}

/* §10.2, §10.3 in place: a file at the target already is left alone at every
 * level (already_target, nothing written, no journal). */
static void test_inplace_twice_is_noop(void **state) {
  (void)state;
  dcr_reader *r = open_bundle(b_main);
  for (int level = DCR_VERIFY_FULL; level <= DCR_VERIFY_NONE; level++) {
    copy_file(p_base, p_work);
    dcr_patch_stats st;
    assert_int_equal(patch_file(r, level, 0, NULL, &st, NULL), DCR_OK);
    assert_int_equal(patch_file(r, level, 0, NULL, &st, NULL), DCR_OK);
    assert_false(exists(p_journal));
    assert_int_equal(st.already_target, 1);
    assert_int_equal(st.bytes_written, 0);
    assert_int_equal(st.chunks_patched, 0);
    assert_true(same_file(p_work, p_target));
  }
  dcr_reader_free(r);
}

/* dcr.h: a target whose layout differs (a tensor added; or removed) cannot be
 * applied in place: DCR_E_ARGUMENT, the file untouched, no journal. */
static void test_inplace_layout_change_is_argument(void **state) {
  (void)state;
  const char *bundles[] = {b_add, b_rem};
  for (int which = 0; which < 2; which++) {
    dcr_reader *r = open_bundle(bundles[which]);
    for (int level = DCR_VERIFY_FULL; level <= DCR_VERIFY_NONE; level++) {
      copy_file(p_base, p_work);
      dcr_detail d;
      assert_int_equal(patch_file(r, level, 1, NULL, NULL, &d), DCR_E_ARGUMENT);
      assert_non_null(strstr(d.message, "in place"));
      assert_true(same_file(p_work, p_base));
      assert_false(exists(p_journal));
    }
    dcr_reader_free(r);
  }
}

/* A wrong base in place: DCR_E_BASE_MISMATCH, the file untouched, no journal left;
 * a flip in an unchanged chunk is found at FULL only (CHUNK patches around it). */
static void test_inplace_wrong_base_leaves_file_untouched(void **state) {
  (void)state;
  dcr_reader *r = open_bundle(b_main);
  size_t prefix = 0;
  {
    dcr_checkpoint *ck;
    dcr_checkpoint_summary ci;
    assert_int_equal(dcr_checkpoint_open(&ck, p_base, DCR_KIND_SAFETENSORS, NULL, NULL), DCR_OK);
    dcr_checkpoint_info(ck, &ci);
    prefix = (size_t)ci.prefix_length; /* a.weight is the first tensor, at 0 */
    dcr_checkpoint_free(ck);
  }
  char p_bad[340];
  snprintf(p_bad, sizeof p_bad, "%s/bad.safetensors", dir);
  for (int level = DCR_VERIFY_FULL; level <= DCR_VERIFY_CHUNK; level++)
    for (int kind = 0; kind < 3; kind++) {
      size_t n;
      uint8_t *bytes = read_bytes(kind ? p_base : p_other, &n);
      if (kind == 1) bytes[prefix + FLIP_CHANGED] ^= 0x40;
      if (kind == 2) bytes[prefix + FLIP_UNCHANGED] ^= 0x40;
      write_bytes(p_bad, bytes, n);
      copy_file(p_bad, p_work);
      dcr_detail d;
      int rc = patch_file(r, level, 1, NULL, NULL, &d);
      if (kind == 2 && level == DCR_VERIFY_CHUNK) {
        assert_int_equal(rc, DCR_OK);
        uint8_t *t = read_bytes(p_target, &n);
        t[prefix + FLIP_UNCHANGED] ^= 0x40;
        write_bytes(p_bad, t, n);
        free(t);
        assert_true(same_file(p_work, p_bad));
      } else {
        if (rc != DCR_E_BASE_MISMATCH)
          fail_msg("%s, case %d: %s", level_name(level), kind, dcr_error_name(rc));
        assert_true(same_file(p_work, p_bad));
        assert_string_equal(d.file, p_work);
      }
      assert_false(exists(p_journal));
      free(bytes);
    }
  unlink(p_bad);
  dcr_reader_free(r);
}

/* In place, a cancel during the check (the only step it can stop) leaves the file
 * as it was and no journal (dcr.h: "recoverable by the next dcr_patch_file"). */
static void test_inplace_cancel_leaves_file_untouched(void **state) {
  (void)state;
  dcr_reader *r = open_bundle(b_main);
  for (int level = DCR_VERIFY_FULL; level <= DCR_VERIFY_NONE; level++) {
    copy_file(p_base, p_work);
    dcr_patch *p = new_patch(r, level, 1);
    canceller c = {0};
    dcr_patch_set_cancel(p, &c.cancel);
    dcr_patch_set_progress(p, cancel_now, &c);
    assert_int_equal(dcr_patch_file(p, p_work, NULL), DCR_E_INTERRUPTED);
    assert_true(c.reports > 0);
    assert_true(same_file(p_work, p_base));
    assert_false(exists(p_journal));
    dcr_patch_free(p);
    /* and the next call applies */
    assert_int_equal(patch_file(r, level, 0, NULL, NULL, NULL), DCR_OK);
    assert_true(same_file(p_work, p_target));
  }
  dcr_reader_free(r);
}

/* ---- fault injection ------------------------------------------------------ */

/* Whether a committed journal lies beside the work file. */
static int journal_committed(void) {
  int fd = open(p_journal, O_RDONLY);
  if (fd < 0) return 0;
  dcr__journal j;
  int rc = dcr__journal_read(fd, &j, NULL);
  int committed = !rc && j.committed;
  dcr__journal_free(&j);
  close(fd);
  return committed;
}

typedef struct {
  unsigned cases, failures, left_base, left_target, left_journal;
} fault_tally;

/* One injected failure, then the state it leaves, then a clean run. */
static void fault_case(dcr_reader *r, const char *target, int level, int sync, dcr__faults f,
                       const char *what, fault_tally *tally) {
  tally->cases++;
  copy_file(p_base, p_work);
  unlink(p_journal);
  dcr_detail d;
  int rc = patch_file(r, level, sync, &f, NULL, &d);
  int is_base = same_file(p_work, p_base), is_target = same_file(p_work, target);
  int committed = journal_committed(), journal = exists(p_journal);
  const char *problem = NULL;
  if (rc != DCR_E_IO) problem = "the call did not return DCR_E_IO";
  else if (!is_base && !is_target && !committed)
    problem = "the file is neither base nor target, and no committed journal is left";
  tally->left_base += (unsigned)is_base, tally->left_target += (unsigned)is_target;
  tally->left_journal += (unsigned)committed;
  dcr_patch_stats st;
  dcr_detail d2;
  int rc2 = DCR_OK;
  if (!problem) {
    rc2 = patch_file(r, level, sync, NULL, &st, &d2);
    if (rc2) problem = "the clean run after it failed";
    else if (!same_file(p_work, target)) problem = "the clean run did not give the target";
    else if (exists(p_journal)) problem = "the clean run left a journal";
    else if (committed && !st.recovered) problem = "the clean run did not report the recovery";
  }
  if (problem) {
    tally->failures++;
    print_message("FAULT %s level %s sync %d: %s (call: %s \"%s\"; base %d target %d journal %d "
                  "committed %d; clean run: %s \"%s\")\n",
                  what, level_name(level), sync, problem, dcr_error_name(rc), d.message, is_base,
                  is_target, journal, committed, dcr_error_name(rc2), rc2 ? d2.message : "");
  }
}

/* §18.4: whatever write or fsync of an in-place apply fails (EIO, ENOSPC, a write
 * torn after a few bytes), the call is DCR_E_IO and the file is the base, the
 * target, or finished by a committed journal beside it; the same call without
 * faults then gives the target and removes the journal. */
static void test_inplace_fault_injection_every_write_and_fsync(void **state) {
  (void)state;
  const char *bundles[] = {b_main, b_meta}, *targets[] = {p_target, p_meta};
  fault_tally tally = {0};
  for (int which = 0; which < 2; which++) {
    dcr_reader *r = open_bundle(bundles[which]);
    for (int level = DCR_VERIFY_FULL; level <= DCR_VERIFY_NONE; level++)
      for (int sync = 0; sync <= 1; sync++) {
        /* a clean run counts the writes and fsyncs */
        copy_file(p_base, p_work);
        dcr__faults clean = {0};
        assert_int_equal(patch_file(r, level, sync, &clean, NULL, NULL), DCR_OK);
        assert_true(same_file(p_work, targets[which]));
        assert_true(clean.writes > 0);
        assert_int_equal(clean.syncs, sync ? 4 : 0);
        struct {
          int error;
          size_t torn;
          const char *name;
        } modes[] = {{EIO, 0, "EIO"}, {ENOSPC, 0, "ENOSPC"}, {EIO, 3, "torn"}};
        for (size_t m = 0; m < 3; m++)
          for (uint64_t k = 1; k <= clean.writes; k++) {
            char what[96];
            snprintf(what, sizeof what, "%s write %llu/%llu", modes[m].name,
                     (unsigned long long)k, (unsigned long long)clean.writes);
            dcr__faults f = {.fail_write = k, .torn = modes[m].torn, .error = modes[m].error};
            fault_case(r, targets[which], level, sync, f, what, &tally);
          }
        for (uint64_t k = 1; k <= clean.syncs; k++) {
          char what[64];
          snprintf(what, sizeof what, "fsync %llu/%llu", (unsigned long long)k,
                   (unsigned long long)clean.syncs);
          dcr__faults f = {.fail_sync = k, .error = EIO};
          fault_case(r, targets[which], level, sync, f, what, &tally);
        }
      }
    dcr_reader_free(r);
  }
  print_message("fault injection: %u cases, %u failures (left: base %u, target %u, committed "
                "journal %u)\n", tally.cases, tally.failures, tally.left_base, tally.left_target,
                tally.left_journal);
  assert_int_equal(tally.failures, 0);
}

/* ---- journal recovery ------------------------------------------------------- */

/* A committed journal of b_main for the base: the first write into the checkpoint
 * after the commit fails, so the journal stays and the file is still the base. */
static uint8_t *committed_journal(size_t *n) {
  dcr_reader *r = open_bundle(b_main);
  copy_file(p_base, p_work);
  unlink(p_journal);
  dcr__faults clean = {0};
  dcr_patch_stats st;
  assert_int_equal(patch_file(r, DCR_VERIFY_FULL, 0, &clean, &st, NULL), DCR_OK);
  uint64_t records = st.chunks_patched; /* the base's header is the target's */
  copy_file(p_base, p_work);
  dcr__faults f = {.fail_write = clean.writes - records + 1, .error = EIO};
  assert_int_equal(patch_file(r, DCR_VERIFY_FULL, 0, &f, NULL, NULL), DCR_E_IO);
  dcr_reader_free(r);
  assert_true(same_file(p_work, p_base));
  if (!journal_committed()) fail_msg("no committed journal is left when the first write into "
                                     "the checkpoint fails");
  uint8_t *j = read_bytes(p_journal, n);
  assert_non_null(j);
  unlink(p_journal);
  return j;
}

/* §18.3-18.4 via dcr_journal_recover: a journal cut before its trailer never
 * committed, so the file was never touched: it is removed, recovered = 0; a
 * committed one is replayed (recovered = 1), and again onto a file that a first
 * replay finished (idempotent); one whose regions do not fit the file (a checkpoint
 * of the same size with other values) is DCR_E_JOURNAL and changes nothing. */
static void test_journal_recover_uncommitted_committed_and_foreign(void **state) {
  (void)state;
  size_t n;
  uint8_t *j = committed_journal(&n);
  int recovered;
  dcr_detail d;
  /* uncommitted: trailer dropped, or torn inside it */
  for (size_t cut = 1; cut <= DCR__JOURNAL_TRAILER_SIZE; cut += DCR__JOURNAL_TRAILER_SIZE - 1) {
    copy_file(p_base, p_work);
    write_bytes(p_journal, j, n - cut);
    recovered = -1;
    assert_int_equal(dcr_journal_recover(p_work, 0, &recovered, &d), DCR_OK);
    assert_int_equal(recovered, 0);
    assert_false(exists(p_journal));
    assert_true(same_file(p_work, p_base));
  }
  /* committed, onto the base and onto the target (a replay that had finished) */
  for (int onto = 0; onto < 2; onto++)
    for (int sync = 0; sync <= 1; sync++) {
      copy_file(onto ? p_target : p_base, p_work);
      write_bytes(p_journal, j, n);
      recovered = -1;
      int rc = dcr_journal_recover(p_work, sync, &recovered, &d);
      if (rc) fail_msg("%s: %s", dcr_error_name(rc), d.message);
      assert_int_equal(recovered, 1);
      assert_false(exists(p_journal));
      assert_true(same_file(p_work, p_target));
    }
  /* no journal: nothing to do */
  assert_int_equal(dcr_journal_recover(p_work, 1, &recovered, &d), DCR_OK);
  assert_int_equal(recovered, 0);
  /* foreign: the journal applied to another checkpoint of the same size */
  copy_file(p_other, p_work);
  write_bytes(p_journal, j, n);
  assert_int_equal(dcr_journal_recover(p_work, 1, &recovered, &d), DCR_E_JOURNAL);
  assert_int_equal(recovered, 0);
  assert_true(same_file(p_work, p_other));
  assert_true(exists(p_journal)); /* a committed journal is never dropped silently */
  /* and dcr_patch_file stops there too, rather than patching past it */
  dcr_reader *r = open_bundle(b_main);
  assert_int_equal(patch_file(r, DCR_VERIFY_FULL, 0, NULL, NULL, &d), DCR_E_JOURNAL);
  assert_true(same_file(p_work, p_other));
  unlink(p_journal);
  /* a checkpoint of another size */
  copy_file(p_add, p_work);
  write_bytes(p_journal, j, n);
  assert_int_equal(dcr_journal_recover(p_work, 0, &recovered, &d), DCR_E_JOURNAL);
  assert_true(same_file(p_work, p_add));
  unlink(p_journal);
  /* a file that is not a journal (full header, other magic) is neither replayed nor removed */
  copy_file(p_base, p_work);
  write_bytes(p_journal, j + 8, n - 8);
  assert_int_equal(dcr_journal_recover(p_work, 0, &recovered, &d), DCR_E_JOURNAL);
  assert_true(exists(p_journal));
  assert_true(same_file(p_work, p_base));
  unlink(p_journal);
  dcr_reader_free(r);
  free(j);
}

/* dcr.h: dcr_patch_file finishes a journal it finds, whatever bundle it is given:
 * with the bundle the journal came from, the file is then the target and the call
 * succeeds with recovered = 1 and already_target = 1 (FULL, CHUNK). */
static void test_inplace_rerun_finishes_committed_journal(void **state) {
  (void)state;
  size_t n;
  uint8_t *j = committed_journal(&n);
  dcr_reader *r = open_bundle(b_main);
  for (int level = DCR_VERIFY_FULL; level <= DCR_VERIFY_CHUNK; level++) {
    copy_file(p_base, p_work);
    write_bytes(p_journal, j, n);
    dcr_patch_stats st;
    dcr_detail d;
    int rc = patch_file(r, level, 1, NULL, &st, &d);
    if (rc) fail_msg("%s: %s: %s", level_name(level), dcr_error_name(rc), d.message);
    assert_int_equal(st.recovered, 1);
    assert_int_equal(st.already_target, 1);
    assert_true(same_file(p_work, p_target));
    assert_false(exists(p_journal));
  }
  dcr_reader_free(r);
  free(j);
}

/* A record larger than the memory budget is DCR_E_NOMEM before anything is read
 * or written (a journal may declare a 2^31-byte region and a frame that fills it),
 * and the journal stays for a run with more memory. */
static void test_journal_replay_within_the_budget(void **state) {
  (void)state;
  size_t n;
  uint8_t *jb = committed_journal(&n);
  copy_file(p_base, p_work);
  write_bytes(p_journal, jb, n);
  int jfd = open(p_journal, O_RDONLY), cfd = open(p_work, O_RDWR);
  dcr__journal j;
  dcr_detail d;
  dcr__detail_init(&d);
  assert_int_equal(dcr__journal_read(jfd, &j, &d), DCR_OK);
  assert_int_equal(dcr__journal_replay(&j, jfd, cfd, 2, 1024, NULL, 0, NULL, &d), DCR_E_NOMEM);
  if (!strstr(d.message, "memory budget")) fail_msg("%s", d.message);
  assert_true(same_file(p_work, p_base));
  assert_int_equal(dcr__journal_replay(&j, jfd, cfd, 2, 1u << 20, NULL, 0, NULL, &d), DCR_OK);
  assert_true(same_file(p_work, p_target));
  dcr__journal_free(&j);
  close(jfd), close(cfd);
  unlink(p_journal);
  free(jb);
}

/* ---- damaged journals (SPEC.md §18.4, R-JNL-4, R-JNL-5) ------------------- */

/* The journal of `bundle` for the base, published and committed, and the file a
 * crash part way through its replay leaves: each record's region either written
 * (the target's bytes) or not, and perhaps one torn after a random number of
 * bytes, as threads writing regions in any order leave it. */
typedef struct {
  uint8_t *journal, *damaged, *file, *base, *target;
  size_t journal_size, damaged_size, file_size;
  dcr__journal j;
} crashed;

static void crash_mid_replay(crashed *c, const char *bundle, const char *target) {
  dcr_reader *r = open_bundle(bundle);
  copy_file(p_base, p_work);
  unlink(p_journal);
  dcr__faults clean = {0};
  assert_int_equal(patch_file(r, DCR_VERIFY_FULL, 0, &clean, NULL, NULL), DCR_OK);
  copy_file(p_base, p_work);
  dcr__faults f = {.fail_write = clean.writes, .error = EIO}; /* the last region write */
  assert_int_equal(patch_file(r, DCR_VERIFY_FULL, 0, &f, NULL, NULL), DCR_E_IO);
  dcr_reader_free(r);
  assert_true(journal_committed());
  c->journal = read_bytes(p_journal, &c->journal_size);
  c->base = read_bytes(p_base, &c->file_size);
  size_t n;
  c->target = read_bytes(target, &n);
  assert_int_equal(n, c->file_size);
  int fd = open(p_journal, O_RDONLY);
  assert_int_equal(dcr__journal_read(fd, &c->j, NULL), DCR_OK);
  close(fd);
  c->file = xmalloc(c->file_size);
  c->damaged = xmalloc(c->journal_size);
}

static void crashed_free(crashed *c) {
  free(c->journal), free(c->damaged), free(c->file), free(c->base), free(c->target);
  dcr__journal_free(&c->j);
}

/* A random replay state of the file, and a random damage of the journal that
 * changes at least one byte: a bit flipped, the file cut short, a 512-byte block
 * zeroed, or its trailer or header rewritten with garbage. */
static void damage(crashed *c) {
  memcpy(c->file, c->base, c->file_size);
  uint64_t torn = rng() % (3 * c->j.count); /* one in three cases tears a region */
  for (uint64_t i = 0; i < c->j.count; i++) {
    const dcr__jrecord *rec = &c->j.records[i];
    size_t length = i == torn ? (size_t)(rng() % rec->length) : rng() & 1 ? (size_t)rec->length : 0;
    memcpy(c->file + rec->offset, c->target + rec->offset, length);
  }
  do {
    memcpy(c->damaged, c->journal, c->journal_size);
    c->damaged_size = c->journal_size;
    size_t at = (size_t)(rng() % c->journal_size);
    switch (rng() % 5) {
      case 0: c->damaged[at] ^= (uint8_t)(1u << (rng() & 7)); break;
      case 1: c->damaged_size = at; break;
      case 2: memset(c->damaged + (at & ~(size_t)511), 0,
                     c->journal_size - (at & ~(size_t)511) < 512 ? c->journal_size - (at & ~(size_t)511) : 512);
        break;
      case 3: for (size_t i = c->journal_size - DCR__JOURNAL_TRAILER_SIZE; i < c->journal_size; i++)
                c->damaged[i] = (uint8_t)rng();
        break;
      default: c->damaged[rng() % DCR__JOURNAL_HEADER_SIZE] = (uint8_t)rng(); break;
    }
  } while (c->damaged_size == c->journal_size && !memcmp(c->damaged, c->journal, c->journal_size));
}

typedef struct {
  unsigned cases, failures, whole, foreign, kept, discarded, salvaged, torn_refused;
} damage_tally;

static int data_equal(const uint8_t *file, const uint8_t *want, size_t size, size_t prefix) {
  return !memcmp(file + prefix, want + prefix, size - prefix);
}

/* The three ways a run meets the damaged journal: recovering alone, applying the
 * bundle, and applying it with salvage. */
static void damage_case(crashed *c, const char *bundle, size_t prefix, damage_tally *t) {
  damage(c);
  t->cases++;
  int whole = data_equal(c->file, c->base, c->file_size, prefix) ||
              data_equal(c->file, c->target, c->file_size, prefix);
  int header_ok = c->damaged_size >= DCR__JOURNAL_HEADER_SIZE &&
                  !memcmp(c->damaged, c->journal, DCR__JOURNAL_HEADER_SIZE);
  /* a header whose magic or major version the damage changed reads as another
   * program's file, or a newer dcr's: §18.3 steps 2-3, never removed */
  static const uint8_t zeros[8];
  int foreign = c->damaged_size >= DCR__JOURNAL_HEADER_SIZE && memcmp(c->damaged, zeros, 8) &&
                memcmp(c->damaged, c->journal, 10);
  t->whole += (unsigned)whole;
  t->foreign += (unsigned)foreign;
  const char *problem = NULL;
  dcr_detail d;
  int outcome = -1;
  for (int run = 0; run < 3 && !problem; run++) {
    write_bytes(p_work, c->file, c->file_size);
    write_bytes(p_journal, c->damaged, c->damaged_size);
    dcr_patch_stats st = {0};
    int rc;
    dcr__detail_init(&d);
    if (run == 0) {
      rc = dcr_journal_recover_known(p_work, 0, NULL, 0, &outcome, &d);
    } else {
      dcr_reader *r = open_bundle(bundle);
      dcr_patch *p = new_patch(r, DCR_VERIFY_FULL, 1);
      dcr_patch_set_sync(p, 0);
      dcr_patch_set_salvage(p, run == 2);
      rc = dcr_patch_file(p, p_work, &d);
      st = stats_of(p);
      dcr_patch_free(p);
      dcr_reader_free(r);
    }
    size_t fn = 0, jn = 0;
    uint8_t *file = read_bytes(p_work, &fn), *journal = read_bytes(p_journal, &jn);
    int unchanged = fn == c->file_size && !memcmp(file, c->file, fn) && journal &&
                    jn == c->damaged_size && !memcmp(journal, c->damaged, jn);
    int at_target = fn == c->file_size && !memcmp(file, c->target, fn) && !journal;
    if (run == 0) {
      /* never removed unless the file is whole; removed when the header proves it */
      if (rc == DCR_OK && outcome == DCR_JOURNAL_DISCARDED) {
        if (!whole) problem = "recover removed the journal of a part-written file";
        else if (journal || fn != c->file_size || memcmp(file, c->file, fn))
          problem = "recover changed the file";
        else t->discarded++;
      } else if (rc != DCR_E_JOURNAL || !unchanged) {
        problem = "recover did not keep both files as they were with DCR_E_JOURNAL";
      } else if (whole && header_ok && !foreign) {
        problem = "recover kept the journal of a whole file whose header proves it";
      } else {
        t->kept++;
      }
    } else if (run == 1) {
      if (whole && !foreign ? rc != DCR_OK || !at_target || !st.journal_discarded
                            : rc != DCR_E_JOURNAL || !unchanged)
        problem = whole && !foreign
                      ? "apply did not discard the journal of a whole file and finish"
                      : "apply did not stop with DCR_E_JOURNAL, both files as they were";
    } else {
      if (rc == DCR_OK && at_target) t->salvaged += (unsigned)!whole;
      else if (rc == DCR_E_BASE_MISMATCH && unchanged && !whole) t->torn_refused++;
      else problem = "salvage neither finished the target nor refused, both files as they were";
    }
    if (problem)
      print_message("DAMAGE case %u run %d: %s (%s \"%s\"; whole %d header %d)\n", t->cases, run,
                    problem, dcr_error_name(rc), d.message, whole, header_ok);
    free(file), free(journal);
  }
  t->failures += problem != NULL;
}

/* R-JNL-4 and R-JNL-5, as an adversary found them broken: a committed journal,
 * the file part way through its replay, then the journal damaged (a bit, a cut,
 * a zeroed block, garbage). No run may remove the journal while the file is not
 * whole, nor change either file when it stops; a salvage finishes the file or
 * stops. DCR_DAMAGE_CASES sets the count (default 1000). */
static void test_journal_damaged_after_crash_mid_replay(void **state) {
  (void)state;
  const char *count_env = getenv("DCR_DAMAGE_CASES");
  unsigned count = count_env ? (unsigned)strtoul(count_env, NULL, 10) : 1000;
  damage_tally t = {0};
  const char *bundles[] = {b_main, b_meta}, *targets[] = {p_target, p_meta};
  rng_state = 0x6a6f75726e616cull;
  for (int which = 0; which < 2; which++) {
    crashed c = {0};
    crash_mid_replay(&c, bundles[which], targets[which]);
    size_t prefix = (size_t)c.file_size - DATA_BYTES; /* the state id leaves it out */
    for (unsigned i = (unsigned)which; i < count; i += 2) damage_case(&c, bundles[which], prefix, &t);
    crashed_free(&c);
  }
  unlink(p_journal);
  print_message("damaged journals: %u cases, %u failures; %u whole files, %u foreign-looking "
                "journals; recover kept %u, discarded %u; salvage finished %u part-written "
                "files, refused %u torn\n", t.cases, t.failures, t.whole, t.foreign, t.kept,
                t.discarded, t.salvaged, t.torn_refused);
  assert_int_equal(t.failures, 0);
}

/* dcr.h: "running the same command again finishes the job". At NONE too: a rerun
 * that finds a committed journal of the very bundle it is given finishes that
 * journal, and the file is then the target; applying the bundle again on top
 * (which NONE cannot detect) would corrupt it. The journal names its target
 * state, so the call can tell. */
static void test_inplace_none_rerun_after_recovery_is_target(void **state) {
  (void)state;
  size_t n;
  uint8_t *j = committed_journal(&n);
  dcr_reader *r = open_bundle(b_main);
  copy_file(p_base, p_work);
  write_bytes(p_journal, j, n);
  dcr_patch_stats st;
  dcr_detail d;
  int rc = patch_file(r, DCR_VERIFY_NONE, 1, NULL, &st, &d);
  if (rc) fail_msg("%s: %s", dcr_error_name(rc), d.message);
  assert_int_equal(st.recovered, 1);
  assert_false(exists(p_journal));
  assert_int_equal(st.already_target, 1);
  assert_true(same_file(p_work, p_target));
  dcr_reader_free(r);
  free(j);
}

/* ---- DELTA_BANDED and DELTA_CLASSED (§9.5, §9.4; formats 1.3, 1.2) ---------- */

/* A step as an optimizer makes it, on weights whose exponents vary (a.weight of the
 * base is too uniform for that): small values move often, large ones rarely, so
 * DELTA_BANDED (1.3) or DELTA_CLASSED (1.2) codes the chunks. Every way to apply
 * it gives the target; the accelerator iterator refuses it without the base (its
 * positions need it), and given the base yields the positions and values of the
 * same step encoded as format 1.1, bit for bit; a wrong base is refused. */
static void ranked_chunks_apply_everywhere(int minor) {
  int ranked = minor == 3 ? DCR_ENC_DELTA_BANDED : DCR_ENC_DELTA_CLASSED;
  char pb[320], pt[320], bundle[320], b11[320];
  snprintf(pb, sizeof pb, "%s/cls-base.safetensors", dir);
  snprintf(pt, sizeof pt, "%s/cls-target.safetensors", dir);
  snprintf(bundle, sizeof bundle, "%s/cls.dcr", dir);
  snprintf(b11, sizeof b11, "%s/cls11.dcr", dir);
  model mb = {.step = "0001"}, mt;
  rng_state = 91;
  add_tensor(&mb, "w", "BF16", 2, 4 * CHUNK);
  tensor *w = &mb.t[0];
  for (size_t i = 0; i < w->n; i++) /* exponents 0x78..0x7b: magnitudes 2^-7..2^-4 */
    w->data[2 * i + 1] = (uint8_t)(0x3c + (rng() >> 63)), w->data[2 * i] |= 0x80 & (uint8_t)rng();
  mt = model_copy(&mb);
  for (size_t i = 0; i < w->n; i++) {
    unsigned exponent = (unsigned)(w->data[2 * i + 1] & 0x7f) << 1 | w->data[2 * i] >> 7;
    if ((rng() >> 56) < (exponent < 0x7a ? 32u : 2u)) bump16(mt.t[0].data + 2 * i, (rng() & 1) ? 1 : -1);
  }
  write_model(pb, &mb), write_model(pt, &mt);
  dcr_encode_options o;
  dcr_encode_options_default(&o);
  o.chunk_size = CHUNK;
  o.max_minor = minor;
  dcr_detail d;
  assert_int_equal(dcr_encode_file(pb, pt, bundle, &o, NULL, &d), DCR_OK);
  o.max_minor = 1;
  assert_int_equal(dcr_encode_file(pb, pt, b11, &o, NULL, &d), DCR_OK);

  dcr_reader *r = open_bundle(bundle);
  dcr_bundle_info info;
  dcr_reader_info(r, &info);
  assert_int_equal(info.format_minor, minor);
  size_t classed = 0;
  for (uint64_t k = 0; k < info.chunk_count; k++) {
    dcr_chunk_info c;
    dcr_reader_chunk(r, k, &c);
    classed += c.encoding == ranked;
  }
  assert_true(classed >= 2);
  assert_int_equal(dcr_reader_verify(r, &d), DCR_OK);
  buffers target = load_buffers(pt);
  for (int level = DCR_VERIFY_FULL; level <= DCR_VERIFY_NONE; level++)
    for (unsigned threads = 1; threads <= 3; threads += 2) {
      buffers held = load_buffers(pb), out;
      int rc = memory_apply(r, &held, level, threads, NULL, &out, &d);
      if (rc) fail_msg("%s: %s: %s", level_name(level), dcr_error_name(rc), d.message);
      assert_true(buffers_equal(&out, &target));
      buffers_free(&out);
      buffers_free(&held);
    }
  copy_file(pb, p_work);
  assert_int_equal(patch_file(r, DCR_VERIFY_FULL, 0, NULL, NULL, &d), DCR_OK);
  assert_true(same_file(p_work, pt));

  dcr_changes *it;
  const dcr_change *c;
  assert_int_equal(dcr_changes_open(&it, r, NULL), DCR_OK);
  int rc = DCR_OK;
  while (!(rc = dcr_changes_next(it, &c, &d)) && c) continue;
  assert_int_equal(rc, DCR_E_ARGUMENT);
  assert_non_null(strstr(d.message, dcr_encoding_name(ranked)));
  assert_non_null(strstr(d.message, "dcr_changes_set_base"));
  dcr_changes_free(it);

  /* Given the base, the iterator yields what the 1.1 bundle of the same step does. */
  dcr_reader *r11 = open_bundle(b11);
  dcr_reader_info(r11, &info);
  assert_int_equal(info.format_minor, 0);
  buffers base = load_buffers(pb);
  uint8_t *one = xmalloc(CHUNK), *other = xmalloc(CHUNK);
  dcr_changes *it11;
  assert_int_equal(dcr_changes_open(&it, r, NULL), DCR_OK);
  dcr_changes_set_base(it, resolve_held_only, &base);
  assert_int_equal(dcr_changes_open(&it11, r11, NULL), DCR_OK);
  size_t n = 0, seen = 0;
  for (;; n++) {
    const dcr_change *c11;
    rc = dcr_changes_next(it, &c, &d);
    if (rc) fail_msg("%s: %s", dcr_error_name(rc), d.message);
    assert_int_equal(dcr_changes_next(it11, &c11, &d), DCR_OK);
    if (!c) break;
    dcr_chunk_info ci;
    dcr_reader_chunk(r, n, &ci);
    assert_non_null(c11);
    assert_int_equal(c->entry, c11->entry);
    assert_int_equal(c->chunk, c11->chunk);
    assert_int_equal(c->count, c11->count);
    assert_int_equal(c->base_check, c11->base_check);
    assert_int_equal(c->target_check, c11->target_check);
    named *h = buffers_find(&base, "w", 1);
    assert_int_equal(c->length, CHUNK);
    memcpy(one, h->data + c->offset, CHUNK);
    memcpy(other, one, CHUNK);
    assert_int_equal(dcr_change_apply(c, one, CHUNK, &d), DCR_OK);
    assert_int_equal(dcr_change_apply(c11, other, CHUNK, &d), DCR_OK);
    assert_memory_equal(one, other, CHUNK);
    if (ci.encoding != ranked) continue;
    seen++;
    assert_int_equal(c->op, DCR_OP_DELTA);
    assert_non_null(c->positions);
    /* the same step at 1.1: a sparse chunk, position for position; each value the
     * zigzag ULP delta of §9.1 from base to target, bit for bit */
    assert_non_null(c11->positions);
    assert_memory_equal(c->positions, c11->positions, c->count * sizeof *c->positions);
    if (c11->op == DCR_OP_DELTA)
      assert_memory_equal(c->values, c11->values, (size_t)c->count * c->element_size);
    const uint8_t *tw = buffers_find(&target, "w", 1)->data + c->offset;
    for (uint32_t i = 0; i < c->count; i++) {
      size_t at = 2 * (size_t)c->positions[i];
      uint16_t b = (uint16_t)(h->data[c->offset + at] | h->data[c->offset + at + 1] << 8);
      uint16_t t = (uint16_t)(tw[at] | tw[at + 1] << 8), v;
      memcpy(&v, (const uint8_t *)c->values + 2 * i, 2);
      uint16_t kb = b & 0x8000 ? b ^ 0x7FFF : b, kt = t & 0x8000 ? t ^ 0x7FFF : t;
      uint16_t delta = (uint16_t)(kt - kb);
      assert_int_equal(v, (uint16_t)((uint16_t)(delta << 1) ^ (delta & 0x8000 ? 0xFFFF : 0)));
    }
  }
  assert_int_equal(n, info.chunk_count);
  assert_true(seen >= 2);
  dcr_changes_free(it);
  dcr_changes_free(it11);
  dcr_reader_free(r11);

  /* A base wrong in one byte of such a chunk is refused, not walked. */
  for (uint64_t k = 0;; k++) {
    dcr_chunk_info ci;
    dcr_reader_chunk(r, k, &ci);
    if (ci.encoding != ranked) continue;
    flip(&base, "w", (size_t)ci.chunk * CHUNK + 7);
    break;
  }
  assert_int_equal(dcr_changes_open(&it, r, NULL), DCR_OK);
  dcr_changes_set_base(it, resolve_held_only, &base);
  while (!(rc = dcr_changes_next(it, &c, &d)) && c) continue;
  assert_int_equal(rc, DCR_E_BASE_MISMATCH);
  dcr_changes_free(it);
  free(one), free(other);
  buffers_free(&base);
  dcr_reader_free(r);
  buffers_free(&target);
  model_free(&mb), model_free(&mt);
  unlink(pb), unlink(pt), unlink(bundle), unlink(b11), unlink(p_work);
}

static void test_classed_chunks_apply_everywhere(void **state) {
  (void)state;
  ranked_chunks_apply_everywhere(3);
  ranked_chunks_apply_everywhere(2);
}

/* ---- a model directory in place (SPEC.md §18.6) ----------------------------- */

/* A set: a.safetensors (model a), config.json (text), and either tok/extra.txt
 * (the base's) or new.txt (the targets'). */
static void write_place_set(const char *root, const model *a, const char *config, int base) {
  char path[512];
  mkdir(root, 0777);
  snprintf(path, sizeof path, "%s/a.safetensors", root), write_model(path, a);
  snprintf(path, sizeof path, "%s/config.json", root), write_bytes(path, config, strlen(config));
  snprintf(path, sizeof path, "%s/%s", root, base ? "tok" : "new.txt");
  if (base) mkdir(path, 0777), strcat(path, "/extra.txt");
  write_bytes(path, base ? "hello" : "new", base ? 5 : 3);
}

__attribute__((format(printf, 1, 2))) static int shell(const char *fmt, ...) {
  char cmd[1400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  return system(cmd);
}

static int same_tree(const char *a, const char *b) {
  return shell("diff -r '%s' '%s' >/dev/null 2>&1", a, b) == 0;
}

/* §18.6: a set in place gives the copy apply's files byte for byte, whether a
 * member is patched (same size), replaced (resized, added) or removed; again is a
 * no-op; and whatever write or fsync fails, the call is DCR_E_IO, the directory is
 * the base or the target or has its journal, and a clean call then gives the
 * target with nothing of the apply left. */
static void test_inplace_directory_faults(void **state) {
  (void)state;
  char sb[400], st_[400], sa[400], w[400], copy[400], bt[400], ba[400];
  snprintf(sb, sizeof sb, "%s/SB", dir), snprintf(st_, sizeof st_, "%s/ST", dir);
  snprintf(sa, sizeof sa, "%s/SA", dir), snprintf(w, sizeof w, "%s/W", dir);
  snprintf(copy, sizeof copy, "%s/C", dir), snprintf(bt, sizeof bt, "%s/set.dcr", dir);
  snprintf(ba, sizeof ba, "%s/seta.dcr", dir);
  write_place_set(sb, &m_base, "{\"v\": 1}", 1);
  write_place_set(st_, &m_target, "{\"v\": 22}", 0);
  write_place_set(sa, &m_add, "{\"v\": 22}", 0);
  encode(sb, st_, bt), encode(sb, sa, ba);
  const char *bundles[] = {bt, ba}, *targets[] = {st_, sa};
  for (int which = 0; which < 2; which++) {
    dcr_reader *r = open_bundle(bundles[which]);
    dcr_detail d;
    shell("rm -rf '%s' '%s'", w, copy);
    dcr_apply_options o;
    dcr_apply_options_default(&o);
    assert_int_equal(dcr_apply(r, sb, copy, &o, &d), DCR_OK);
    assert_true(same_tree(copy, targets[which]));
    unsigned tried = 0, journals = 0, failures = 0;
    for (int kind = 0; kind < 3; kind++) /* 0: clean, counting; 1: writes; 2: fsyncs */
      for (uint64_t k = 1;; k++) {
        static dcr__faults clean;
        if (kind == 0 && k > 1) break;
        if (kind && k > (kind == 1 ? clean.writes : clean.syncs)) break;
        dcr__faults f = {.fail_write = kind == 1 ? k : 0, .fail_sync = kind == 2 ? k : 0,
                         .torn = 3, .error = EIO};
        shell("rm -rf '%s'", w), shell("cp -r '%s' '%s'", sb, w);
        dcr_patch *p = new_patch(r, DCR_VERIFY_FULL, 1);
        if (kind) dcr__patch_set_faults(p, &f);
        else dcr__patch_set_faults(p, &clean), memset(&clean, 0, sizeof clean);
        int rc = dcr_patch_file(p, w, &d);
        dcr_patch_free(p);
        if (!kind) {
          if (rc) fail_msg("%s: %s", dcr_error_name(rc), d.message);
          assert_true(same_tree(w, copy));
          continue;
        }
        tried++;
        char journal[420];
        snprintf(journal, sizeof journal, "%s/.dcr-journal", w);
        int has_journal = exists(journal);
        journals += (unsigned)has_journal;
        int whole = shell("diff -r -x '.*' '%s' '%s' >/dev/null", w, sb) == 0 ||
                    shell("diff -r -x '.*' '%s' '%s' >/dev/null", w, targets[which]) == 0;
        p = new_patch(r, DCR_VERIFY_FULL, 1);
        int rc2 = dcr_patch_file(p, w, &d);
        dcr_patch_stats st = stats_of(p);
        dcr_patch_free(p);
        if (rc != DCR_E_IO || (!whole && !has_journal) || rc2 || !same_tree(w, copy) ||
            (has_journal && !st.recovered)) {
          failures++;
          print_message("FAULT set %d kind %d k %llu: rc %s, whole %d, journal %d, rerun %s "
                        "(%s)\n", which, kind, (unsigned long long)k, dcr_error_name(rc), whole,
                        has_journal, dcr_error_name(rc2), d.message);
        }
      }
    /* again: nothing to do */
    dcr_patch *p = new_patch(r, DCR_VERIFY_FULL, 1);
    assert_int_equal(dcr_patch_file(p, w, &d), DCR_OK);
    assert_int_equal(stats_of(p).already_target, 1);
    dcr_patch_free(p);
    assert_true(same_tree(w, copy));
    print_message("set %d: %u faults injected, %u left a journal\n", which, tried, journals);
    assert_true(tried > 4 && journals > 0);
    assert_int_equal(failures, 0);
    dcr_reader_free(r);
  }
  shell("rm -rf '%s' '%s'", sb, st_), shell("rm -rf '%s' '%s'", sa, w);
  shell("rm -rf '%s' '%s'", copy, bt), unlink(ba);
}

/* testvectors/journal-v1.2 (SPEC.md §18.6, R-JNL-7): each vector's directory
 * recovered through the public call, its files compared with the outcome. */
static void put_files(const char *root, const char *vdir, const json_t *files) {
  size_t i;
  const json_t *f;
  json_array_foreach(files, i, f) {
    char from[700], to[700];
    snprintf(from, sizeof from, "%s/%s", vdir, json_string_value(json_object_get(f, "file")));
    snprintf(to, sizeof to, "%s/%s", root, json_string_value(json_object_get(f, "path")));
    assert_int_equal(shell("mkdir -p \"$(dirname '%s')\" && cp '%s' '%s'", to, from, to), 0);
  }
}

static void test_journal_v12_vectors(void **state) {
  (void)state;
  const char *vdir = "testvectors/journal-v1.2";
  char path[600], got[400], want[400];
  snprintf(path, sizeof path, "%s/index.json", vdir);
  json_error_t e;
  json_t *index = json_load_file(path, 0, &e);
  if (!index) fail_msg("%s: %s (run from the source tree)", path, e.text);
  snprintf(got, sizeof got, "%s/V", dir), snprintf(want, sizeof want, "%s/E", dir);
  size_t i, played = 0;
  const json_t *v;
  json_array_foreach(json_object_get(index, "vectors"), i, v) {
    const char *name = json_string_value(json_object_get(v, "name"));
    const char *outcome = json_string_value(json_object_get(v, "outcome"));
    const json_t *journal = json_object_get(v, "journal");
    shell("rm -rf '%s' '%s' && mkdir '%s' '%s'", got, want, got, want);
    put_files(got, vdir, json_object_get(v, "before"));
    if (json_is_object(journal))
      shell("cp '%s/%s' '%s/.dcr-journal'", vdir,
            json_string_value(json_object_get(journal, "file")), got);
    if (!strcmp(outcome, "kept")) shell("cp -r '%s/.' '%s'", got, want);
    else put_files(want, vdir, json_object_get(v, "after"));
    int outcome_got = -1;
    dcr_detail d;
    int rc = dcr_journal_recover_known(got, 0, NULL, 0, &outcome_got, &d);
    int want_rc = !strcmp(outcome, "kept") ? DCR_E_JOURNAL : DCR_OK;
    int want_outcome = !strcmp(outcome, "replayed") ? DCR_JOURNAL_REPLAYED : DCR_JOURNAL_NONE;
    if (rc != want_rc || (!rc && outcome_got != want_outcome) || !same_tree(got, want))
      fail_msg("journal-v1.2 %s: %s (%s), outcome %d, files %s", name, dcr_error_name(rc),
               d.message, outcome_got, same_tree(got, want) ? "as expected" : "differ");
    played++;
  }
  assert_true(played >= 13);
  shell("rm -rf '%s' '%s'", got, want);
  json_decref(index);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_memory_apply_every_level_gives_target),
      cmocka_unit_test(test_memory_apply_twice_is_noop),
      cmocka_unit_test(test_memory_wrong_base_leaves_buffers_untouched),
      cmocka_unit_test(test_memory_resolver_errors_name_the_tensor),
      cmocka_unit_test(test_memory_null_buffer_for_kept_tensor_is_argument),
      cmocka_unit_test(test_memory_added_tensor_fills_new_buffer),
      cmocka_unit_test(test_memory_resized_tensor_gets_new_buffer),
      cmocka_unit_test(test_memory_set_weights_alone),
      cmocka_unit_test(test_memory_removed_tensor_null_or_checked),
      cmocka_unit_test(test_memory_cancel_leaves_base_or_target),
      cmocka_unit_test(test_changes_iterator_rebuilds_target),
      cmocka_unit_test(test_classed_chunks_apply_everywhere),
      cmocka_unit_test(test_inplace_every_level_gives_target_file),
      cmocka_unit_test(test_inplace_twice_is_noop),
      cmocka_unit_test(test_inplace_layout_change_is_argument),
      cmocka_unit_test(test_inplace_wrong_base_leaves_file_untouched),
      cmocka_unit_test(test_inplace_cancel_leaves_file_untouched),
      cmocka_unit_test(test_inplace_fault_injection_every_write_and_fsync),
      cmocka_unit_test(test_journal_recover_uncommitted_committed_and_foreign),
      cmocka_unit_test(test_inplace_rerun_finishes_committed_journal),
      cmocka_unit_test(test_inplace_none_rerun_after_recovery_is_target),
      cmocka_unit_test(test_journal_replay_within_the_budget),
      cmocka_unit_test(test_journal_damaged_after_crash_mid_replay),
      cmocka_unit_test(test_inplace_directory_faults),
      cmocka_unit_test(test_journal_v12_vectors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
