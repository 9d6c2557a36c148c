/*
 * mkseeds.c - regenerates the seed corpora under fuzz/corpus/ (`make fuzz-seeds`).
 *
 * Makes targets against the fixed bases of fuzz_common.h, encodes them, and cuts
 * the bundles into each harness's input format; and apply journals, written with
 * the library's own writer (refit/journal.c), for fuzz_journal. Deterministic: the
 * same library gives the same files.
 */
#include <errno.h>
#include <sys/mman.h>

#include "../history/history.h"
#include "../refit/refit.h"
#include "fuzz_common.h"

static const char *root = "fuzz/corpus";
static unsigned chunk_seeds;

static void save(const char *harness, const char *name, const void *p, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", root, harness);
  if (mkdir(path, 0777) && errno != EEXIST) perror(path), exit(1);
  snprintf(path, sizeof path, "%s/%s/%s", root, harness, name);
  fuzz_write_file(path, p, n);
}

/* The stored payload of section i. */
static const uint8_t *payload(const dcr_reader *r, const uint8_t *bundle, uint64_t i) {
  return bundle + r->sections[i].offset + DCR__SECTION_HEADER_SIZE;
}

static void cut(const char *name, const fuzz_buf *b, int for_apply, int for_index) {
  char file[256];
  dcr_reader *r;
  dcr_detail d;
  if (dcr_reader_open_memory(&r, b->p, b->n, NULL, &d) != DCR_OK) {
    fprintf(stderr, "mkseeds: %s: %s\n", name, d.message);
    exit(1);
  }
  snprintf(file, sizeof file, "%s.dcr", name);
  save("validate", file, b->p, b->n);
  if (for_apply) save("apply", file, b->p, b->n);

  /* manifest harness: header + section headers, MANI stored or zstd, META */
  fuzz_buf m = {0};
  uint8_t mode = 0;
  fuzz_put(&m, &mode, 1);
  fuzz_put(&m, b->p, DCR__HEADER_SIZE);
  for (uint64_t i = 0; i < r->section_count; i++)
    fuzz_put(&m, b->p + r->sections[i].offset, DCR__SECTION_HEADER_SIZE);
  snprintf(file, sizeof file, "%s.headers", name);
  save("manifest", file, m.p, m.n);
  for (uint64_t i = 0; i < r->section_count; i++) {
    const dcr__section *s = &r->sections[i];
    if (s->type != DCR__SEC_MANI && s->type != DCR__SEC_META) continue;
    m.n = 0;
    mode = s->type == DCR__SEC_META ? 3 : s->compression ? 2 : 1;
    if (mode == 3 && s->compression) continue;
    fuzz_put(&m, &mode, 1);
    fuzz_put(&m, payload(r, b->p, i), (size_t)s->length);
    snprintf(file, sizeof file, "%s.%s", name, mode == 3 ? "meta" : mode == 2 ? "mani-zstd" : "mani");
    save("manifest", file, m.p, m.n);
    if (mode == 2) { /* the inflated manifest too */
      uint8_t *raw;
      size_t len;
      FUZZ_ASSERT(dcr__section_inflate(payload(r, b->p, i), (size_t)s->length, 1u << 30, UINT64_MAX, 0, NULL, &raw,
                                       &len, NULL) == DCR_OK);
      m.n = 0;
      mode = 1;
      fuzz_put(&m, &mode, 1);
      fuzz_put(&m, raw, len);
      free(raw);
      snprintf(file, sizeof file, "%s.mani", name);
      save("manifest", file, m.p, m.n);
    }
  }

  /* chunk harness: every CHNK, with its geometry */
  for (uint64_t i = 0; i < r->chunk_count && chunk_seeds < 48; i++) {
    const dcr__chunk *c = &r->chunks[i];
    const dcr__entry *e = &r->man.entries[c->tensor];
    unsigned esize = dcr_dtype_size(e->target.dtype);
    uint64_t left = e->target.byte_length - (uint64_t)c->chunk * r->man.chunk_size;
    size_t n = (left < r->man.chunk_size ? (size_t)left : r->man.chunk_size) / esize;
    uint8_t h[10] = {c->encoding, c->compression, (uint8_t)(e->target.dtype - 1)};
    dcr__put32(h + 3, c->count);
    dcr__put16(h + 7, (uint16_t)(n - 1));
    h[9] = (uint8_t)i;
    m.n = 0;
    fuzz_put(&m, h, sizeof h);
    fuzz_put(&m, b->p + c->offset + DCR__SECTION_HEADER_SIZE + DCR__RECORD_SIZE,
             (size_t)c->payload_length - DCR__RECORD_SIZE);
    snprintf(file, sizeof file, "%s.%llu", name, (unsigned long long)i);
    save("chunk", file, m.p, m.n);
    chunk_seeds++;
  }

  /* index harness: only for bundles of the skeleton's manifest */
  if (for_index) {
    for (int variant = 0; variant < 3; variant++) {
      uint64_t count = r->chunk_count < 15 ? r->chunk_count : 15;
      uint8_t flags = (uint8_t)(count | (variant == 1 ? 16 : 0) | (variant == 2 ? 32 : 0));
      m.n = 0;
      fuzz_put(&m, &flags, 1);
      for (uint64_t i = 0; i < count; i++) {
        uint8_t len[2];
        dcr__put16(len, (uint16_t)r->chunks[i].payload_length);
        fuzz_put(&m, len, 2);
        fuzz_put(&m, b->p + r->chunks[i].offset + DCR__SECTION_HEADER_SIZE,
                 (size_t)r->chunks[i].payload_length);
      }
      if (variant != 1)
        for (uint64_t i = 0; i < count; i++) {
          uint8_t rec[DCR__RECORD_SIZE];
          dcr__chunk c = r->chunks[i]; /* offsets right for the level-3 skeleton */
          dcr__index_record_write(rec, &c);
          fuzz_put(&m, rec, sizeof rec);
        }
      snprintf(file, sizeof file, "%s.v%d", name, variant);
      save("index", file, m.p, m.n);
    }
  }
  fuzz_buf_free(&m);
  dcr_reader_free(r);
}

static void make(const char *name, const fuzz_buf *base, const fuzz_buf *target, int raw,
                 uint32_t chunk_size, int level, const dcr_meta *meta, size_t meta_count,
                 int for_apply, int for_index) {
  fuzz_write_file(fuzz_path(0, "base"), base->p, base->n);
  fuzz_write_file(fuzz_path(1, "target"), target->p, target->n);
  dcr_encode_options o;
  dcr_encode_options_default(&o);
  o.chunk_size = chunk_size;
  o.level = level;
  o.threads = 1;
  o.raw = raw;
  o.meta = meta;
  o.meta_count = meta_count;
  fuzz_buf b = {0};
  dcr_detail d;
  if (dcr_encode(fuzz_path(0, "base"), fuzz_path(1, "target"), &o, fuzz_sink, &b, NULL, &d)) {
    fprintf(stderr, "mkseeds: encode %s: %s\n", name, d.message);
    exit(1);
  }
  cut(name, &b, for_apply, for_index);
  fuzz_buf_free(&b);
}

/* ---- apply journals (SPEC.md §18) for fuzz_journal: made against the checkpoint
 * that fuzz_journal.c builds for option byte 0 (JOURNAL_CKPT bytes of
 * fuzz_pattern(JOURNAL_SEED, i): keep both in step with FUZZ_CKPT_SEED there). */
#define JOURNAL_CKPT 6000
#define JOURNAL_SEED 21

typedef struct {
  uint64_t offset, length;
  int form;        /* DCR__JREC_BYTES or DCR__JREC_ELEMENTS */
  unsigned esize;  /* ELEMENTS */
  int zstd;        /* the compression the record must get (BYTES: chosen here) */
} jregion;

/* Writes the journal of before -> after over the regions into a file and returns
 * its bytes in out; commit 0 leaves the trailer off. Checks that replaying it on
 * `before` gives `after`. */
static void journal_bytes(const uint8_t *before, const uint8_t *after, const jregion *rg,
                          size_t count, int commit, fuzz_buf *out) {
  const char *path = fuzz_path(2, "seed.dcr-journal");
  static const uint8_t base_state[16] = {1, 2, 3}, target_state[16] = {4, 5, 6};
  dcr__jwriter w;
  dcr__jbuilder b;
  dcr_detail d;
  unlink(path);
  FUZZ_ASSERT(dcr__journal_create(&w, path, JOURNAL_CKPT, base_state, target_state, NULL, &d) == DCR_OK);
  FUZZ_ASSERT(dcr__jbuilder_init(&b, JOURNAL_CKPT) == DCR_OK);
  ZSTD_CCtx *cctx = ZSTD_createCCtx();
  FUZZ_ASSERT(cctx);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_dictIDFlag, 0);
  uint8_t packed[2 * JOURNAL_CKPT];
  for (size_t i = 0; i < count; i++) {
    dcr__jrecord rec;
    const uint8_t *payload;
    if (rg[i].form == DCR__JREC_ELEMENTS) {
      FUZZ_ASSERT(dcr__jbuilder_elements(&b, before + rg[i].offset, after + rg[i].offset,
                                         (size_t)rg[i].length, rg[i].esize, &rec, &payload, &d) == DCR_OK);
      FUZZ_ASSERT(rec.count && rec.compression == rg[i].zstd);
      rec.offset += rg[i].offset;
    } else {
      memset(&rec, 0, sizeof rec);
      rec.offset = rg[i].offset;
      rec.length = rg[i].length;
      rec.form = DCR__JREC_BYTES;
      rec.element_size = 1;
      rec.region_check = XXH3_64bits(after + rec.offset, (size_t)rec.length);
      rec.stored_length = rec.length;
      payload = after + rec.offset;
      if (rg[i].zstd) {
        size_t z = ZSTD_compress2(cctx, packed, sizeof packed, payload, (size_t)rec.length);
        FUZZ_ASSERT(!ZSTD_isError(z) && z < rec.length);
        rec.compression = DCR_COMP_ZSTD;
        rec.stored_length = z;
        payload = packed;
      }
    }
    FUZZ_ASSERT(dcr__journal_append(&w, &rec, payload, &d) == DCR_OK);
  }
  if (commit) FUZZ_ASSERT(dcr__journal_commit(&w, &d) == DCR_OK);
  close(w.fd);
  ZSTD_freeCCtx(cctx);
  dcr__jbuilder_free(&b);

  /* it reads back, and replays before into after */
  /* never published: the journal is read under its temporary name (§18.1) */
  int fd = open(w.temp, O_RDONLY | O_CLOEXEC), ckpt = memfd_create("seed", MFD_CLOEXEC);
  FUZZ_ASSERT(fd >= 0 && ckpt >= 0);
  dcr__journal j;
  FUZZ_ASSERT(dcr__journal_read(fd, &j, &d) == DCR_OK && j.committed == commit && j.count == (commit ? count : 0));
  if (commit) {
    uint8_t got[JOURNAL_CKPT];
    FUZZ_ASSERT(dcr__pwrite_full(ckpt, before, JOURNAL_CKPT, 0, &d) == DCR_OK);
    FUZZ_ASSERT(dcr__journal_replay(&j, fd, ckpt, 1, UINT64_MAX, NULL, 0, NULL, &d) == DCR_OK);
    FUZZ_ASSERT(dcr__pread_full(ckpt, got, JOURNAL_CKPT, 0, &d) == DCR_OK);
    FUZZ_ASSERT(!memcmp(got, after, JOURNAL_CKPT));
  }
  dcr__journal_free(&j);
  close(ckpt);
  close(fd);
  FUZZ_ASSERT(fuzz_read_file(w.temp, out) == 0);
  unlink(w.temp);
}

/* Saves option byte + the first `keep` bytes of the journal (all: SIZE_MAX). */
static void save_journal(const char *name, uint8_t opt, const fuzz_buf *j, size_t keep) {
  fuzz_buf m = {0};
  fuzz_put(&m, &opt, 1);
  fuzz_put(&m, j->p, keep < j->n ? keep : j->n);
  save("journal", name, m.p, m.n);
  fuzz_buf_free(&m);
}

static void journals(void) {
  static uint8_t before[JOURNAL_CKPT], after[JOURNAL_CKPT];
  for (size_t i = 0; i < JOURNAL_CKPT; i++) before[i] = fuzz_pattern(JOURNAL_SEED, i);
  memcpy(after, before, sizeof after);
  /* [0, 64): a new header, as an in-place apply writes it (a BYTES record) */
  for (size_t i = 0; i < 64; i++) after[i] = (uint8_t)('a' + i % 26);
  /* [100, 600), U8: a few bytes */
  for (size_t i = 117; i < 600; i += 61) after[i] ^= 0x5a;
  /* [1024, 3072), U16: every 37th element gets an incompressible new value (raw) */
  for (size_t i = 1024; i < 3072; i += 2 * 37) after[i] ^= 0x3c, after[i + 1] ^= 0xa5;
  /* [3072, 5120), U32: all the same new value (zstd) */
  for (size_t i = 3072; i < 5120; i += 4) dcr__put32(after + i, 0x3f800000u);
  /* [5120, 5632): bytes that compress (a zstd BYTES record) */
  for (size_t i = 5120; i < 5632; i++) after[i] = (uint8_t)(i / 64);
  /* [5632, 6000), U64: one ULP up in every fifth */
  for (size_t i = 5632; i < 6000; i += 5 * 8) dcr__put64(after + i, dcr__le64(after + i) + 1);

  static const jregion all[] = {
      {0, 64, DCR__JREC_BYTES, 1, 0},          {100, 500, DCR__JREC_ELEMENTS, 1, 0},
      {1024, 2048, DCR__JREC_ELEMENTS, 2, 0},  {3072, 2048, DCR__JREC_ELEMENTS, 4, 1},
      {5120, 512, DCR__JREC_BYTES, 1, 1},      {5632, 368, DCR__JREC_ELEMENTS, 8, 0},
  };
  fuzz_buf j = {0};
  uint8_t only[JOURNAL_CKPT];
  /* one record each, over a checkpoint with only that region changed */
  static const char *names[] = {"bytes", "elements-u8", "elements-raw", "elements-zstd",
                                "bytes-zstd", "elements-u64"};
  for (size_t r = 0; r < sizeof all / sizeof all[0]; r++) {
    memcpy(only, before, sizeof only);
    memcpy(only + all[r].offset, after + all[r].offset, (size_t)all[r].length);
    journal_bytes(before, only, &all[r], 1, 1, &j);
    save_journal(names[r], r % 2 ? 0x00 : 0x08, &j, SIZE_MAX);
  }
  /* every record form and compression in one journal, and its torn versions */
  journal_bytes(before, after, all, sizeof all / sizeof all[0], 1, &j);
  save_journal("mixed", 0x08, &j, SIZE_MAX);
  save_journal("mixed.4096", 0x0a, &j, SIZE_MAX); /* a checkpoint of another size */
  save_journal("mixed.zeros", 0x0c, &j, SIZE_MAX); /* a checkpoint of other bytes */
  save_journal("torn-trailer", 0x08, &j, j.n - 5);
  save_journal("torn-header", 0x08, &j, 37);
  journal_bytes(before, after, all, sizeof all / sizeof all[0], 0, &j);
  save_journal("uncommitted", 0x08, &j, SIZE_MAX);
  journal_bytes(before, before, NULL, 0, 1, &j);
  save_journal("empty", 0x08, &j, SIZE_MAX);
  fuzz_buf_free(&j);
}

static void flip(fuzz_buf *b, size_t from_end, uint8_t mask) { b->p[b->n - from_end] ^= mask; }

/* ---- checkpoint sets (format 1.1) for fuzz_set: set bundles encoded from small
 * directories (their MANI and RSIZ payloads; the bundles also seed validate and
 * manifest), MANI payloads of the other kinds, and directory descriptions. */

/* Writes p[0..n) at dir/rel, making the directories above it. */
static void put_file(const char *dir, const char *rel, const void *p, size_t n) {
  char path[512];
  if (mkdir(dir, 0777) && errno != EEXIST) perror(dir), exit(1);
  snprintf(path, sizeof path, "%s/%s", dir, rel);
  for (char *s = path + strlen(dir) + 1; (s = strchr(s, '/')); *s++ = '/') {
    *s = '\0';
    if (mkdir(path, 0777) && errno != EEXIST) perror(path), exit(1);
  }
  fuzz_write_file(path, p, n);
}
static void put_text(const char *dir, const char *rel, const char *text) {
  put_file(dir, rel, text, strlen(text));
}

/* The MANI payload (inflated) and the RSIZ payload (empty if none) of bundle b. */
static void bundle_parts(const char *name, const fuzz_buf *b, fuzz_buf *mani, fuzz_buf *rsiz) {
  dcr_reader *r;
  dcr_detail d;
  if (dcr_reader_open_memory(&r, b->p, b->n, NULL, &d) != DCR_OK) {
    fprintf(stderr, "mkseeds: %s: %s\n", name, d.message);
    exit(1);
  }
  mani->n = rsiz->n = 0;
  for (uint64_t i = 0; i < r->section_count; i++) {
    const dcr__section *s = &r->sections[i];
    if (s->type == DCR__SEC_RSIZ) fuzz_put(rsiz, payload(r, b->p, i), (size_t)s->length);
    if (s->type != DCR__SEC_MANI) continue;
    if (!s->compression) {
      fuzz_put(mani, payload(r, b->p, i), (size_t)s->length);
      continue;
    }
    uint8_t *raw;
    size_t len;
    FUZZ_ASSERT(dcr__section_inflate(payload(r, b->p, i), (size_t)s->length, 1u << 30, UINT64_MAX, 0, NULL, &raw,
                                     &len, NULL) == DCR_OK);
    fuzz_put(mani, raw, len);
    free(raw);
  }
  FUZZ_ASSERT(mani->n && rsiz->n < 256);
  dcr_reader_free(r);
}

/* Saves a fuzz_set seed: the mode byte, then the parts. */
static void save_set(const char *name, uint8_t mode, const fuzz_buf *a, const fuzz_buf *b) {
  fuzz_buf m = {0};
  fuzz_put(&m, &mode, 1);
  if (mode == FUZZ_SET_TABLE) {
    uint8_t l = (uint8_t)b->n;
    fuzz_put(&m, &l, 1);
    fuzz_put(&m, b->p, b->n);
  }
  fuzz_put(&m, a->p, a->n);
  save("set", name, m.p, m.n);
  fuzz_buf_free(&m);
}

/* Encodes base -> target (files or directories) with 4 KiB chunks, and saves the
 * bundle's seeds: table mode (and minors mode) for fuzz_set; sets also for
 * validate and manifest. */
static void set_bundle(const char *name, const char *base, const char *target, int raw, int minors) {
  fuzz_buf b = {0}, mani = {0}, rsiz = {0};
  char file[128];
  dcr_detail d;
  dcr_encode_options o;
  dcr_encode_options_default(&o);
  o.chunk_size = 4096;
  o.threads = 1;
  o.raw = raw;
  if (dcr_encode(base, target, &o, fuzz_sink, &b, NULL, &d)) {
    fprintf(stderr, "mkseeds: encode %s: %s\n", name, d.message);
    exit(1);
  }
  bundle_parts(name, &b, &mani, &rsiz);
  int set = mani.n > 8 && mani.p[8] == DCR_KIND_SET;
  if (set) {
    snprintf(file, sizeof file, "%s.table", name);
    save_set(file, FUZZ_SET_TABLE, &mani, &rsiz);
    snprintf(file, sizeof file, "%s.dcr", name);
    save("validate", file, b.p, b.n);
    uint8_t mode = 1;
    fuzz_buf m = {0};
    fuzz_put(&m, &mode, 1);
    fuzz_put(&m, mani.p, mani.n);
    snprintf(file, sizeof file, "%s.mani", name);
    save("manifest", file, m.p, m.n);
    fuzz_buf_free(&m);
  }
  if (minors || !set) {
    snprintf(file, sizeof file, "%s.minors", name);
    save_set(file, FUZZ_SET_MINORS, &mani, NULL);
  }
  fuzz_buf_free(&b);
  fuzz_buf_free(&mani);
  fuzz_buf_free(&rsiz);
}

/* A model directory as Hugging Face tooling saves one: shards, their index,
 * configuration; `step` 1 is the next save (changed bytes, a grown tensor, an
 * added one, another configuration). */
static void model_dir(const char *dir, int step, int with_old_notes) {
  static const fuzz_tensor first[] = {
      {"a", "BF16", 1, {2500, 0}, NULL, 1},
      {"b", "F32", 2, {25, 44}, NULL, 2},
  };
  static const fuzz_tensor first_grown[] = {
      {"a", "BF16", 1, {2500, 0}, NULL, 1},
      {"b", "F32", 2, {27, 44}, NULL, 2}, /* two rows more: resized (RSIZ) */
  };
  static const fuzz_tensor second[] = {
      {"c", "U8", 1, {10, 0}, NULL, 3},
      {"d", "I64", 1, {600, 0}, NULL, 4},
      {"e", "U16", 1, {0, 0}, NULL, 5},
  };
  static const fuzz_tensor second_added[] = {
      {"c", "U8", 1, {10, 0}, NULL, 3},
      {"d", "I64", 1, {600, 0}, NULL, 4},
      {"e", "U16", 1, {0, 0}, NULL, 5},
      {"f", "F8_E8M0", 1, {64, 0}, NULL, 6}, /* a dtype of 1.1 */
  };
  fuzz_buf t = {0};
  fuzz_safetensors(&t, step ? first_grown : first, 2, 0);
  if (step) t.p[8 + dcr__le64(t.p) + 77] ^= 0x10; /* "a" changed */
  put_file(dir, "model-00001-of-00002.safetensors", t.p, t.n);
  fuzz_safetensors(&t, step ? second_added : second, step ? 4 : 3, 1);
  put_file(dir, "model-00002-of-00002.safetensors", t.p, t.n);
  put_text(dir, "model.safetensors.index.json",
           step ? "{\"metadata\":{\"total_size\":14738},\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\","
                  "\"b\":\"model-00001-of-00002.safetensors\",\"c\":\"model-00002-of-00002.safetensors\","
                  "\"d\":\"model-00002-of-00002.safetensors\",\"e\":\"model-00002-of-00002.safetensors\","
                  "\"f\":\"model-00002-of-00002.safetensors\"}}\n"
                : "{\"metadata\":{\"total_size\":14210},\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\","
                  "\"b\":\"model-00001-of-00002.safetensors\",\"c\":\"model-00002-of-00002.safetensors\","
                  "\"d\":\"model-00002-of-00002.safetensors\",\"e\":\"model-00002-of-00002.safetensors\"}}\n");
  put_text(dir, "config.json", step ? "{\"hidden_size\": 16, \"vocab_size\": 27}\n" : "{\"hidden_size\": 16}\n");
  put_text(dir, "tokenizer/special_tokens_map.json", "{\"eos_token\": \"</s>\"}\n");
  if (with_old_notes) put_text(dir, "notes.txt", "trained for one step\n");
  fuzz_buf_free(&t);
}

static void set_seeds(void) {
  char base[320], target[320], file[320];
  snprintf(base, sizeof base, "%s", fuzz_path(2, "set-base"));
  snprintf(target, sizeof target, "%s", fuzz_path(3, "set-target"));
  fuzz_buf t = {0}, b = {0}, none = {0};

  /* sharded model, one step: changed, resized, added tensors; a raw member removed */
  model_dir(base, 0, 1);
  model_dir(target, 1, 0);
  set_bundle("set-step", base, target, 0, 1);
  set_bundle("set-same", base, base, 0, 0);
  fuzz_rmtree(target);
  /* one file to two shards: tensors move between members */
  fuzz_base_safetensors(&t);
  put_file(target, "model.safetensors", t.p, t.n);
  put_text(target, "config.json", "{\"hidden_size\": 16}\n");
  set_bundle("set-reshard", target, base, 0, 0);
  fuzz_rmtree(base);
  fuzz_rmtree(target);
  /* raw members only, one in a subdirectory */
  put_text(base, "a.txt", "alpha\n");
  put_text(base, "sub/b.bin", "\x01\x02\x03\x04");
  put_text(target, "a.txt", "alpha, beta\n");
  put_text(target, "c.txt", "gamma\n");
  set_bundle("set-raw", base, target, 0, 0);
  fuzz_rmtree(base);
  fuzz_rmtree(target);

  /* manifests of the other kinds, for the minor versions */
  fuzz_base_safetensors(&b);
  fuzz_write_file(base, b.p, b.n);
  fuzz_index_target(&t);
  fuzz_write_file(target, t.p, t.n);
  set_bundle("safetensors", base, target, 0, 1);
  static const fuzz_tensor new_dtype[] = {{"a", "F8_E8M0", 1, {300, 0}, NULL, 7}};
  fuzz_safetensors(&t, new_dtype, 1, 0);
  fuzz_write_file(target, t.p, t.n);
  set_bundle("safetensors-1.1-dtype", base, target, 0, 1);
  fuzz_base_raw(&b);
  fuzz_write_file(base, b.p, b.n);
  fuzz_put(&b, "grown", 5);
  fuzz_write_file(target, b.p, b.n);
  set_bundle("raw-resized", base, target, 1, 1);
  unlink(base);
  unlink(target);
  (void)none;

  /* directory descriptions (fuzz_common.h, FUZZ_SET_*) */
  /* flags, then per tensor: name (a & 15, digit a >> 5 if a & 16), dtype (b & 15 in
   * fuzz_set.c's list) and rank (b >> 4), dims (x & 7, x >> 3 & 7) */
  static const uint8_t shard1[] = {1, 0x00, 0x20, 0x3a, 0x01, 0x11, 0x07}; /* a BF16 [2,7], b F32 [7] */
  static const uint8_t shard2[] = {2, 0x02, 0x12, 0x05, 0x33, 0x23, 0x13, 0x04, 0x1c, 0x04}; /* c U8 [5], d1 I64 [3,2], e F4 [16] */
  static const uint8_t twice[] = {0, 0x00, 0x12, 0x01}; /* a U8 [1]: "a" again */
  static const uint8_t right = 0, wrong_shard = 3, link_to_config[] = {FUZZ_SET_LINK, 3};
  static const uint8_t fifo = FUZZ_SET_FIFO, dangling = FUZZ_SET_DANGLING, dirlink = FUZZ_SET_DIRLINK,
                       mkdir_ = FUZZ_SET_MKDIR;
  static const char config[] = "{\"hidden_size\": 16}\n", special[] = "{\"eos_token\": \"</s>\"}\n";
  struct {
    const char *name;
    uint8_t mode;
    int variant;
  } dirs[] = {
      {"dir-model", FUZZ_SET_DIR, 0},         {"dir-model-1.0", FUZZ_SET_DIR_1_0, 0},
      {"dir-index-wrong-shard", FUZZ_SET_DIR, 1}, {"dir-name-twice", FUZZ_SET_DIR, 2},
      {"dir-fifo", FUZZ_SET_DIR, 3},          {"dir-dangling", FUZZ_SET_DIR, 4},
      {"dir-link-to-dir", FUZZ_SET_DIR, 5},   {"dir-verbatim", FUZZ_SET_DIR, 6},
      {"dir-subdirectory", FUZZ_SET_DIR, 7},  {"dir-empty", FUZZ_SET_DIR, 8},
      {"dir-path-over-limit", FUZZ_SET_DIR | FUZZ_SET_SHORT_NAMES, 9},
  };
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    int v = dirs[i].variant;
    t.n = 0;
    fuzz_put(&t, &dirs[i].mode, 1);
    if (v == 8) {
      save("set", dirs[i].name, t.p, t.n);
      continue;
    }
    if (v == 6) { /* a fuzzed-bytes shard and a verbatim index, as a save writes them */
      static const fuzz_tensor one[] = {{"w", "BF16", 2, {4, 8}, NULL, 9}, {"x", "U8", 1, {5, 0}, NULL, 10}};
      fuzz_safetensors(&b, one, 2, 0);
      uint8_t h[2];
      dcr__put16(h, (uint16_t)dcr__le64(b.p));
      fuzz_buf c = {0};
      fuzz_put(&c, h, 2);
      fuzz_put(&c, b.p + 8, b.n - 8);
      fuzz_set_record(&t, FUZZ_SET_ST, "model", c.p, c.n);
      fuzz_buf_free(&c);
      static const char index[] = "{\"metadata\":{\"total_size\":69},\"weight_map\":{\"w\":\"model.safetensors\","
                                  "\"x\":\"model.safetensors\"}}\n";
      fuzz_set_record(&t, FUZZ_SET_INDEX, "model", index, strlen(index));
      fuzz_set_record(&t, FUZZ_SET_RAW, "config.json", config, strlen(config));
      save("set", dirs[i].name, t.p, t.n);
      continue;
    }
    const char *dir = v == 7 ? "sub/" : "";
    snprintf(file, sizeof file, "%smodel-00001-of-00002", dir);
    fuzz_set_record(&t, FUZZ_SET_GEN_ST, file, shard1, sizeof shard1);
    snprintf(file, sizeof file, "%smodel-00002-of-00002", dir);
    fuzz_set_record(&t, FUZZ_SET_GEN_ST, file, v == 2 ? twice : shard2, v == 2 ? sizeof twice : sizeof shard2);
    snprintf(file, sizeof file, "%smodel", dir);
    fuzz_set_record(&t, FUZZ_SET_GEN_INDEX, file, v == 1 ? &wrong_shard : &right, 1);
    fuzz_set_record(&t, FUZZ_SET_RAW, "config.json", config, strlen(config));
    fuzz_set_record(&t, FUZZ_SET_RAW_TOO, "tokenizer/special_tokens_map.json", special, strlen(special));
    fuzz_set_record(&t, FUZZ_SET_RAW, ".cache/hidden", "x", 1);
    fuzz_set_record(&t, FUZZ_SET_SPECIAL, "tokenizer.json", link_to_config, sizeof link_to_config);
    if (v == 9) /* 43 bytes, over max_name_length 40 */
      fuzz_set_record(&t, FUZZ_SET_RAW, "tokenizer/added_tokens/special_tokens.json", special, strlen(special));
    else if (v >= 3 && v <= 5)
      fuzz_set_record(&t, FUZZ_SET_SPECIAL, v == 3 ? "pipe" : v == 4 ? "nowhere-link" : "dir-link",
                      v == 3 ? &fifo : v == 4 ? &dangling : &dirlink, 1);
    else
      fuzz_set_record(&t, FUZZ_SET_SPECIAL, "empty-dir", &mkdir_, 1);
    save("set", dirs[i].name, t.p, t.n);
  }
  fuzz_buf_free(&t);
  fuzz_buf_free(&b);
}


/* ---- append journals (SPEC.md §19.6) for fuzz_append: written by the append
 * writer (dcr__happend_begin) beside an archive of fuzz_append's pattern, as the
 * harness rebuilds it; option byte 0 (the archive as declared) and 1 (too short). */
static void append_seeds(void) {
  static const uint64_t layouts[][4] = { /* index_offset, index_length, members_end, archive_size */
      {512, 3072, 10752, 20480}, {1536, 66048, 200704, 201728}, {512, 1, 512 * 3, 512 * 3}};
  for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
    dcr__happend j = {.index_offset = layouts[l][0], .index_length = layouts[l][1], .members_end = layouts[l][2],
                      .archive_size = layouts[l][3]};
    fuzz_buf a = {0}, jb = {0};
    for (uint64_t i = 0; i < j.archive_size; i++) {
      uint8_t v = fuzz_pattern(3, i);
      fuzz_put(&a, &v, 1);
    }
    const char *archive = fuzz_path(0, "A.tar"), *journal = fuzz_path(1, "A.tar" DCR__APPEND_SUFFIX);
    fuzz_write_file(archive, a.p, a.n);
    int fd = open(archive, O_RDWR);
    FUZZ_ASSERT(fd >= 0 && dcr__happend_begin(archive, fd, &j, 0, NULL) == DCR_OK);
    close(fd);
    FUZZ_ASSERT(!fuzz_read_file(journal, &jb));
    unlink(journal);
    for (uint8_t opt = 0; opt < 2; opt++) {
      fuzz_buf m = {0};
      char name[32];
      fuzz_put(&m, &opt, 1);
      fuzz_put(&m, jb.p, jb.n);
      snprintf(name, sizeof name, "layout%zu-%u", l, opt);
      save("append", name, m.p, m.n);
      fuzz_buf_free(&m);
    }
    fuzz_buf_free(&a), fuzz_buf_free(&jb);
  }
}

/* ---- history archives (SPEC.md §19) for fuzz_history: option byte 1 (verify)
 * or 3 (extract step first + 1), then a two-step run of the fixed base kept in
 * each container; option byte 0, then an index document. */
static void history_seeds(const fuzz_buf *base) {
  fuzz_buf t1 = {0}, t2 = {0}, b = {0};
  fuzz_put(&t1, base->p, base->n);
  flip(&t1, 4800 + 10 + 100, 0x01);
  fuzz_put(&t2, t1.p, t1.n);
  flip(&t2, 4800 + 3, 0x10);
  const char *k = fuzz_path(0, "step0"), *s1 = fuzz_path(1, "step1"), *s2 = fuzz_path(2, "step2");
  fuzz_write_file(k, base->p, base->n);
  fuzz_write_file(s1, t1.p, t1.n);
  fuzz_write_file(s2, t2.p, t2.n);
  static const char *const names[] = {"b1.dcr", "b2.dcr"};
  char bundles[2][320];
  for (int i = 0; i < 2; i++) {
    dcr_encode_options o;
    dcr_encode_options_default(&o);
    o.chunk_size = 4096;
    o.threads = 1;
    dcr_meta meta[] = {{"run_id", "fuzz"}, {"step", i ? "2" : "1"}};
    o.meta = meta;
    o.meta_count = 2;
    snprintf(bundles[i], sizeof bundles[i], "%s", fuzz_path(3, names[i]));
    FUZZ_ASSERT(dcr_encode_file(i ? s1 : k, i ? s2 : s1, bundles[i], &o, NULL, NULL) == DCR_OK);
  }
  static const char *const archives[] = {"run.tar", "run.tar.zst", "run.zip"};
  const char *chain[] = {bundles[0], bundles[1]};
  for (int c = 0; c < 3; c++) {
    char path[400];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir(), archives[c]);
    dcr_history_options o;
    dcr_history_options_default(&o);
    o.threads = 1;
    o.sync = 0;
    o.keyframe_every = c == 0 ? 2 : 0;
    FUZZ_ASSERT(dcr_history_create(path, k, chain, 2, &o, NULL) == DCR_OK);
    FILE *f = fopen(path, "rb");
    FUZZ_ASSERT(f);
    for (uint8_t opt = 1; opt <= 7; opt += 2) { /* verify; extract steps 0 and 1; verify again */
      b.n = 0;
      fuzz_put(&b, &opt, 1);
      rewind(f);
      uint8_t buf[4096];
      size_t n;
      while ((n = fread(buf, 1, sizeof buf, f)) > 0) fuzz_put(&b, buf, n);
      char name[64];
      snprintf(name, sizeof name, "%s-%u", archives[c], opt);
      if (opt != 7) save("history", name, b.p, b.n);
      if (c == 0 && opt == 1) { /* the index alone: the tar's first member */
        size_t size = (size_t)strtoull((const char *)b.p + 1 + 124, NULL, 8);
        uint8_t zero = 0;
        fuzz_buf x = {0};
        fuzz_put(&x, &zero, 1);
        fuzz_put(&x, b.p + 1 + 512, size);
        save("history", "index.json", x.p, x.n);
        fuzz_buf_free(&x);
      }
    }
    fclose(f);
  }
  fuzz_buf_free(&t1);
  fuzz_buf_free(&t2);
  fuzz_buf_free(&b);
}

/* fuzz_sign: mode bytes 3 and 7 (XOR into the skeleton's valid payloads, a
 * checkpoint and a bundle signature), and well-formed payloads of their own for
 * the parser (mode 0) and the bundle (mode 1), of both majors. */
static void sign_seeds(void) {
  uint8_t m[1 + 16 + 112 + 88] = {0};
  save("sign", "valid", "\x03", 1);
  save("sign", "valid-bundle", "\x07", 1);
  m[0] = 3;
  m[1 + 16 + 112 + 30] = 0x01; /* a byte of the table's first section record */
  save("sign", "xor-table", m, 1 + 16 + 112 + 31);
  memset(m, 0, sizeof m);
  m[0] = 3, m[1 + 4] = 0x03; /* signature count 1 -> 2 */
  save("sign", "xor-count", m, 1 + 5);
  memset(m, 0, sizeof m);
  uint8_t *p = m + 1;
  dcr__put16(p, 1);
  dcr__put32(p + 4, 1);
  dcr__put64(p + 8, 112);
  memcpy(p + 16, "DCR-SIGN-TABLE-1", 16);
  p[16 + 112] = 1; /* Ed25519 */
  for (int i = 0; i < 16; i++) p[16 + 112 + 8 + i] = (uint8_t)(i + 1);
  save("sign", "parse-minimal", m, sizeof m);
  m[0] = 1;
  save("sign", "bundle-minimal", m, sizeof m);
  dcr__put16(p, 2); /* a bundle signature's: major 2, its domain */
  memcpy(p + 16, "DCR-SIGN-TABLE-2", 16);
  save("sign", "bundle-minimal-2", m, sizeof m);
  m[0] = 0;
  save("sign", "parse-minimal-2", m, sizeof m);
}

/* fuzz_http: one response of status/headers and the bytes [from, to) of b. */
static void response(fuzz_buf *out, const char *status, const char *headers, const fuzz_buf *b,
                     size_t from, size_t to, size_t body, const char *etag) {
  char head[512];
  int n = snprintf(head, sizeof head,
                   "HTTP/1.1 %s\r\nContent-Range: bytes %zu-%zu/%zu\r\nContent-Length: %zu\r\n"
                   "ETag: \"%s\"\r\n%s\r\n", status, from, to - 1, b->n, to - from, etag, headers);
  if (!strncmp(status, "200", 3))
    n = snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nETag: \"%s\"\r\n%s\r\n",
                 b->n, etag, headers);
  if (strncmp(status, "20", 2))
    n = snprintf(head, sizeof head, "HTTP/1.1 %s\r\nContent-Length: 0\r\n%s\r\n", status, headers);
  uint8_t len[2] = {(uint8_t)((size_t)n + body), (uint8_t)(((size_t)n + body) >> 8)};
  fuzz_put(out, len, 2);
  fuzz_put(out, head, (size_t)n);
  fuzz_put(out, b->p + from, body);
}

/* fuzz_http: the skeleton bundle served whole, in two ranges, after faults, a
 * redirect; and a 200 that is not a bundle. */
static void http_seeds(void) {
  fuzz_buf base = {0}, t = {0}, b = {0}, s = {0}, text = {0};
  fuzz_base_safetensors(&base);
  fuzz_index_target(&t);
  fuzz_write_file(fuzz_path(0, "base"), base.p, base.n);
  fuzz_write_file(fuzz_path(1, "target"), t.p, t.n);
  if (fuzz_encode(fuzz_path(0, "base"), fuzz_path(1, "target"), 4096, 3, 1, 0, &b)) exit(1);
  size_t n = b.n, cut = n - 300;
  static const struct {
    const char *name;
    int steps; /* which responses, below */
  } seeds[] = {{"whole-206", 1}, {"whole-200", 2}, {"tail-then-rest", 3}, {"503-then-whole", 4},
               {"cut-then-resume", 5}, {"etag-changes", 6}, {"whole-206-open-only", 7},
               {"redirect-then-whole", 8}, {"200-not-a-bundle", 9}};
  for (int i = 0; i < 100; i++) fuzz_put(&text, "x", 1);
  for (size_t k = 0; k < sizeof seeds / sizeof seeds[0]; k++) {
    s.n = 0;
    uint8_t mode = seeds[k].steps == 7 ? 0 : 1;
    fuzz_put(&s, &mode, 1);
    switch (seeds[k].steps) {
      case 1: case 7: response(&s, "206 Partial Content", "", &b, 0, n, n, "5f-d3"); break;
      case 2: response(&s, "200 OK", "", &b, 0, n, n, "5f-d3"); break;
      case 3:
        response(&s, "206 Partial Content", "", &b, cut, n, n - cut, "5f-d3");
        response(&s, "206 Partial Content", "", &b, 0, cut, cut, "5f-d3");
        break;
      case 4:
        response(&s, "503 Service Unavailable", "Retry-After: 0\r\n", &b, 0, 0, 0, "");
        response(&s, "206 Partial Content", "", &b, 0, n, n, "5f-d3");
        break;
      case 5:
        response(&s, "206 Partial Content", "", &b, 0, n, n / 2, "5f-d3");
        response(&s, "206 Partial Content", "", &b, n / 2, n, n - n / 2, "5f-d3");
        break;
      case 6:
        response(&s, "206 Partial Content", "", &b, cut, n, n - cut, "5f-d3");
        response(&s, "206 Partial Content", "", &b, 0, cut, cut, "5f-d4");
        break;
      case 8:
        response(&s, "302 Found", "Location: http://other.invalid/b.dcr\r\n", &b, 0, 0, 0, "");
        response(&s, "206 Partial Content", "", &b, 0, n, n, "5f-d3");
        break;
      case 9: response(&s, "200 OK", "", &text, 0, text.n, text.n, "1"); break;
    }
    save("http", seeds[k].name, s.p, s.n);
  }
  fuzz_buf_free(&base), fuzz_buf_free(&t), fuzz_buf_free(&b), fuzz_buf_free(&s);
  fuzz_buf_free(&text);
  unlink(fuzz_path(0, "base"));
  unlink(fuzz_path(1, "target"));
}

/* fuzz_banded: round trips (fuzz_banded_input) and, decoded, the DELTA_BANDED
 * data they write: several dtypes; one band or many; an inverted band (most of
 * its elements change), one-symbol value codes (every change alike), long
 * magnitudes; pieces of an odd number of elements. */
static void banded_seeds(void) {
  static const struct {
    const char *name, *dtype;
    uint16_t n, step;
    uint8_t shape, seed;
    const char *recipes; /* hex */
  } seeds[] = {
      {"bf16-bands", "BF16", 4101, 333, 8, 1, "0000000100000000c3000040"},
      {"bf16-inverted", "BF16", 3000, 100, 2, 2, "01010101410101"},
      {"f32-one-symbol", "F32", 2500, 77, 3, 3, "010000"},
      {"f32-long", "F32", 2049, 2048, 255, 4, "8500000000bf0000"},
      {"f64-bands", "F64", 3000, 1000, 7, 5, "0100410000c8"},
      {"f16-inverted", "F16", 1500, 65, 5, 6, "0141024201"},
      {"f8-bands", "F8_E4M3", 5000, 129, 4, 7, "0100000041"},
      {"u8-one-class", "U8", 700, 13, 0, 8, "000102"},
      {"c64-long", "C64", 900, 31, 6, 9, "9f000001"},
  };
  for (size_t k = 0; k < sizeof seeds / sizeof seeds[0]; k++) {
    uint8_t h[FUZZ_BANDED_HEADER] = {1};
    h[1] = (uint8_t)(dcr_dtype_from_name(seeds[k].dtype, strlen(seeds[k].dtype)) - 1);
    fuzz_banded_input in;
    fuzz_banded_read(h, &in);
    dcr__put16(h + 6, (uint16_t)((seeds[k].n - 1) % (FUZZ_BANDED_BYTES / in.esize)));
    h[8] = seeds[k].seed;
    dcr__put16(h + 9, (uint16_t)(seeds[k].step - 1));
    h[11] = seeds[k].shape;
    fuzz_banded_read(h, &in);
    uint8_t recipes[64];
    size_t length = strlen(seeds[k].recipes) / 2;
    for (size_t i = 0; i < length; i++) sscanf(seeds[k].recipes + 2 * i, "%2hhx", &recipes[i]);
    fuzz_buf b = {0};
    fuzz_put(&b, h, sizeof h);
    fuzz_put(&b, recipes, length);
    char file[128];
    snprintf(file, sizeof file, "rt-%s", seeds[k].name);
    save("banded", file, b.p, b.n);
    /* the same chunk decoded */
    uint8_t *base = malloc(in.n * in.esize), *target = malloc(in.n * in.esize);
    if (!base || !target) perror("mkseeds"), exit(1);
    fuzz_banded_base(&in, base);
    fuzz_banded_target(&in, base, recipes, length, target);
    fuzz_banded_written w;
    fuzz_banded_write(&in, base, target, &w);
    if (!w.count || w.length == SIZE_MAX) fprintf(stderr, "mkseeds: %s: no data\n", file), exit(1);
    h[0] = 0;
    dcr__put32(h + 2, (uint32_t)w.count);
    b.n = 0;
    fuzz_put(&b, h, sizeof h);
    fuzz_put(&b, w.data, w.length);
    snprintf(file, sizeof file, "dec-%s", seeds[k].name);
    save("banded", file, b.p, b.n);
    fuzz_banded_written_free(&w);
    fuzz_buf_free(&b);
    free(base), free(target);
  }
}

/* fuzz_place: the rows and columns of a 41 x 81 tensor w and a 101-element n held
 * in blocks: row and column slices, one bundle per format; blocks that overlap
 * and blocks outside the tensor. */
static void place_seeds(void) {
  static const uint8_t seeds[][5 + 3 * 7] = {
      {0x00, 40, 80, 100, 10, 0, 0, 20, 0, 81, 0, 0, 0, 20, 21, 0, 40, 1, 2, 1, 0, 50, 0, 1, 0, 0},
      {0x05, 40, 80, 100, 10, 0, 0, 20, 0, 81, 0, 0, 0, 20, 21, 0, 40, 1, 2, 1, 0, 50, 0, 1, 0, 0},
      {0x11, 40, 80, 100, 30, 0, 0, 41, 40, 41, 3, 1, 1, 50, 51, 0, 1, 0, 0},
      {0x00, 40, 80, 100, 10, 0, 0, 20, 0, 81, 0, 0, 0, 10, 20, 0, 10, 0, 0},
      {0x00, 40, 80, 100, 10, 0, 40, 5, 0, 81, 0, 0},
      {0x4a, 40, 80, 100, 60, 0, 0, 41, 40, 41, 3, 1},
  };
  for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
    char file[32];
    size_t n = sizeof seeds[i];
    while (n > 5 && !seeds[i][n - 1]) n--;
    n = 5 + (n - 5 + 6) / 7 * 7; /* whole blocks */
    snprintf(file, sizeof file, "seed%zu", i);
    save("place", file, seeds[i], n);
  }
}

int main(int argc, char **argv) {
  if (argc > 1) root = argv[1];
  if (mkdir(root, 0777) && errno != EEXIST) perror(root), exit(1);
  fuzz_buf base = {0}, t = {0}, raw = {0}, rt = {0};
  fuzz_base_safetensors(&base);
  fuzz_base_raw(&raw);

  /* the index harness's skeleton target: every kind of change */
  fuzz_index_target(&t);
  make("mixed", &base, &t, 0, 4096, 3, NULL, 0, 1, 1);
  make("mixed-stored", &base, &t, 0, 4096, 0, NULL, 0, 1, 1);

  /* sparse edits in place (same layout), and metadata */
  t.n = 0;
  fuzz_put(&t, base.p, base.n);
  flip(&t, 1, 0x01);             /* d */
  flip(&t, 4800 + 3, 0x10);      /* c */
  flip(&t, 4800 + 10 + 100, 0x22); /* b */
  flip(&t, 4800 + 10 + 4400 + 4999, 0x80); /* a */
  static const dcr_meta meta[] = {{"creator", "fuzz"}, {"step", "1"}};
  make("sparse-meta", &base, &t, 0, 4096, 3, meta, 2, 1, 0);

  /* no change at all */
  make("same", &base, &base, 0, 4096, 0, NULL, 0, 1, 0);

  /* dense changes, a removed and a reshaped tensor, 8 KiB chunks */
  static const fuzz_tensor dense[] = {
      {"a", "BF16", 2, {50, 50}, NULL, 31},
      {"b", "F32", 2, {44, 25}, NULL, 32},
      {"d", "I64", 1, {600, 0}, NULL, 4},
      {"e", "U16", 1, {0, 0}, NULL, 5},
  };
  fuzz_safetensors(&t, dense, 4, 0);
  make("dense", &base, &t, 0, 8192, 3, NULL, 0, 1, 0);

  /* ULP steps, as an optimizer makes them: +1 in the last place of every third
   * BF16 of "a", -1 in every 50th F32 of "b" (DELTA_DENSE, DELTA_SPARSE) */
  t.n = 0;
  fuzz_put(&t, base.p, base.n);
  size_t data = 8 + (size_t)dcr__le64(base.p);
  for (size_t i = 0; i < 2500; i += 3) dcr__put16(t.p + data + 2 * i, (uint16_t)(dcr__le16(t.p + data + 2 * i) + 1));
  for (size_t i = 0; i < 1100; i += 50)
    dcr__put32(t.p + data + 5000 + 4 * i, dcr__le32(t.p + data + 5000 + 4 * i) - 1);
  make("ulp", &base, &t, 0, 4096, 3, NULL, 0, 1, 0);

  /* DELTA_CLASSED (1.2): "a" given two exponents, the smaller changing ten times
   * as often, as an optimizer's steps do (SPEC.md §9.4) */
  fuzz_buf cb = {0};
  fuzz_put(&cb, base.p, base.n);
  for (size_t i = 0; i < 2500; i++) cb.p[data + 2 * i + 1] = (uint8_t)(0x3c + (i % 3 == 0));
  t.n = 0;
  fuzz_put(&t, cb.p, cb.n);
  for (size_t i = 0; i < 2500; i++)
    if ((i % 7 == 0 && i % 3) || i % 97 == 0)
      dcr__put16(t.p + data + 2 * i, (uint16_t)(dcr__le16(t.p + data + 2 * i) + (i % 2 ? 1 : 0xFFFF)));
  make("classed", &cb, &t, 0, 4096, 3, NULL, 0, 1, 0);
  fuzz_buf_free(&cb);
  make("ulp-stored", &base, &t, 0, 4096, 0, NULL, 0, 0, 0);
  banded_seeds();

  /* raw: a few bytes, then a longer target */
  rt.n = 0;
  fuzz_put(&rt, raw.p, raw.n);
  rt.p[5] ^= 1, rt.p[4096] ^= 0xff, rt.p[8999] ^= 7;
  make("raw-sparse", &raw, &rt, 1, 4096, 3, NULL, 0, 1, 0);
  make("raw-sparse-stored", &raw, &rt, 1, 4096, 0, NULL, 0, 0, 0);
  for (int i = 0; i < 3000; i++) {
    uint8_t v = fuzz_pattern(77, (uint64_t)i);
    fuzz_put(&rt, &v, 1);
  }
  make("raw-longer", &raw, &rt, 1, 4096, 3, NULL, 0, 1, 0);

  /* roundtrip harness: option byte + description + edits */
  static const uint8_t rt_seeds[][24] = {
      {0x01, 0x28, 0x23, 0x28, 0x23, 7, 0x10, 0x00, 0x55, 0x20, 0x10, 0xaa},
      {0x07, 0x00, 0x10, 0x00, 0x30, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9},
      {0x02, 0x03, 3, 8, 0xc4, 0x09, 8, 0xc4, 0x09, 1, 11, 0x20, 0, 2, 3, 0, 0, 0x10, 0x00, 0x01},
      {0x1c, 0x04, 3, 1, 0x10, 0x00, 9, 0x10, 0x00, 1, 2, 0, 0, 0, 0, 2, 14, 3, 0, 13, 4, 0, 3, 12},
      {0x48, 0x02, 3, 12, 0xd0, 0x07, 12, 0xd0, 0x07, 3, 5, 0x10, 0x00, 5, 0x10, 0x00, 0xff, 0x01},
      {0x20, 0x00},
  };
  for (size_t i = 0; i < sizeof rt_seeds / sizeof rt_seeds[0]; i++) {
    char file[32];
    size_t n = sizeof rt_seeds[i];
    while (n > 1 && !rt_seeds[i][n - 1]) n--;
    snprintf(file, sizeof file, "seed%zu", i);
    save("roundtrip", file, rt_seeds[i], n);
  }
  place_seeds();
  journals();
  set_seeds();
  history_seeds(&base);
  append_seeds();
  sign_seeds();
  http_seeds();
  fuzz_buf_free(&base);
  fuzz_buf_free(&t);
  fuzz_buf_free(&raw);
  fuzz_buf_free(&rt);
  return 0;
}
