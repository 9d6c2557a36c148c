/*
 * encoder.c - dcr_encode: two checkpoints in, a bundle out (SPEC.md §4-§9).
 *
 * Both inputs are read once, chunk by chunk, in manifest order. Workers read,
 * hash and encode a batch of chunks into per-job slots; the calling thread then
 * consumes the slots in order, feeding the tensor hashes (which must see bytes in
 * order) and the writer. Memory is one batch of slots, whatever the checkpoint size.
 *
 * Signing (sign_key) rides the same pass: the workers also give each piece they
 * read its SHA-256 digest, the calling thread folds them into the signed tensor
 * digests as it does the XXH3 ones, and a signer between the writer and the sink
 * hashes the bundle's sections as they go out (sign/signer.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../format/checkpoint.h"
#include "../format/atomic.h"
#include "../sign/sign.h"
#include "codec.h"

#define NO_CHUNK UINT32_MAX /* a job that only marks an entry with no chunks */

typedef struct {
  uint32_t entry, chunk;
} job;

typedef struct {
  uint8_t *base_buffer, *target_buffer; /* the views' read buffers */
  dcr__view base, target;
  size_t bytes;
  dcr__chunk_encoder enc;
  dcr__encoded out;
  int rc;
  dcr_detail detail;
  dcr__sha256 sha;                /* signing: the pieces' SHA-256 digests, */
  uint8_t *base_sha, *target_sha; /* 32 bytes a piece */
} slot;

typedef struct {
  const dcr_encode_options *opt;
  dcr__checkpoint ck[2]; /* base, target */
  const char *path[2];
  dcr__manifest man;
  uint8_t *table; /* a set's table: the manifest's prefix */
  job *jobs;
  size_t job_count;
  uint8_t *sliced; /* per manifest entry: 1 = never ranked (options.sliced), or NULL */
  int classed;     /* the chunk encoders' `classed` (the bundle's minor, from 2) */
  slot *slots;
  size_t slot_count;
  size_t buffer_size; /* the largest target chunk */
  dcr__index_builder index;
  XXH3_state_t base_hash, target_hash;
  uint32_t current; /* the entry being hashed */
  uint64_t done;    /* bytes taken, for progress */
  dcr__writer w;
  dcr_encode_stats stats;
  dcr_limits lim; /* the inputs are read with: the defaults, the caller's budget */
  dcr__signer *signer;          /* signing, else NULL */
  int digesting;                /* signing the checkpoints: SHA-256 of every piece */
  dcr__tensor_sha256 base_sha;  /* digesting: the tensor digests being made */
  dcr__sha256 target_sha;       /* (the target's pieces are always the workers') */
  size_t digests;               /* tensor digests made */
} encoder;

static uint64_t tensor_start(const encoder *e, int side, const dcr__desc *t) {
  /* a file offset, or for a set one in its members read as one file */
  return e->ck[side].prefix_length + t->offset;
}

static void close_views(slot *s) {
  dcr__view_close(&s->base);
  dcr__view_close(&s->target);
}

static void encode_job(void *ctx, size_t j, unsigned worker) {
  (void)worker;
  encoder *e = ctx;
  const job *jb = &e->jobs[j];
  slot *s = &e->slots[j % e->slot_count];
  s->rc = DCR_OK;
  s->bytes = 0;
  dcr__detail_init(&s->detail);
  if (jb->chunk == NO_CHUNK) return;
  const dcr__entry *en = &e->man.entries[jb->entry];
  uint64_t at = (uint64_t)jb->chunk * e->man.chunk_size;
  s->bytes = dcr__chunk_bytes(&e->man, en, jb->chunk);
  size_t span = (size_t)dcr__entry_base_span(en, at, s->bytes); /* the rest: zeros */
  int rc = dcr__checkpoint_view(&s->target, &e->ck[1], tensor_start(e, 1, &en->target) + at,
                                s->bytes, s->target_buffer, &s->detail);
  if (rc && !s->detail.file[0]) dcr__detail_file(&s->detail, e->path[1]);
  if (!rc && span) {
    rc = dcr__checkpoint_view(&s->base, &e->ck[0], tensor_start(e, 0, &en->base) + at, span,
                              s->base_buffer, &s->detail);
    if (rc && !s->detail.file[0]) dcr__detail_file(&s->detail, e->path[0]);
  }
  if (!rc && span < s->bytes) {
    memset(s->base_buffer + span, 0, s->bytes - span);
    s->base = (dcr__view){.data = s->base_buffer};
  }
  if (!rc) {
    s->enc.classed = e->sliced && e->sliced[jb->entry] ? 0 : e->classed;
    rc = dcr__encode_chunk(&s->enc, s->base.data, s->target.data, s->bytes,
                           en->target.dtype, &s->out);
    if (rc) dcr__fail(&s->detail, rc, "cannot encode chunk");
  }
  if (!rc && e->digesting) { /* while the chunk is in cache */
    dcr__pieces_sha256(&s->sha, s->target.data, s->bytes, s->target_sha);
    if (dcr__entry_delta_coded(en)) dcr__pieces_sha256(&s->sha, s->base.data, s->bytes, s->base_sha);
  }
  s->rc = rc;
}

/* Merges the two name-sorted tensor lists into manifest entries (§6.1). */
static int build_manifest(encoder *e, dcr_detail *d) {
  const dcr__checkpoint *b = &e->ck[0], *t = &e->ck[1];
  size_t cap = b->count + t->count;
  e->man.entries = calloc(cap ? cap : 1, sizeof *e->man.entries);
  if (!e->man.entries) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate the manifest");
  size_t i = 0, j = 0, n = 0;
  while (i < b->count || j < t->count) {
    const dcr__tensor *x = i < b->count ? &b->tensors[i] : NULL;
    const dcr__tensor *y = j < t->count ? &t->tensors[j] : NULL;
    int c = !x ? 1 : !y ? -1 : dcr__name_cmp(x->name, x->name_length, y->name, y->name_length);
    dcr__entry *en = &e->man.entries[n];
    const dcr__tensor *named = c <= 0 ? x : y;
    if (named->name_length > UINT16_MAX)
      return dcr__fail(d, DCR_E_LIMIT, "tensor name of %zu bytes", named->name_length);
    en->name = named->name;
    en->name_length = (uint16_t)named->name_length;
    if (c <= 0) {
      en->presence |= DCR__HAS_BASE, en->base = x->desc, i++;
      if (x->raw_member) en->raw |= DCR__HAS_BASE;
    }
    if (c >= 0) {
      en->presence |= DCR__HAS_TARGET, en->target = y->desc, j++;
      if (y->raw_member) en->raw |= DCR__HAS_TARGET;
    }
    en->resized = !c && e->opt->max_minor > 0 && dcr__entry_resizable(en);
    e->stats.tensors_added += c > 0;
    e->stats.tensors_removed += c < 0;
    e->stats.tensors_recoded += !c && !dcr__entry_delta_coded(en) && !en->resized;
    e->stats.tensors_resized += en->resized;
    n++;
  }
  if (n > UINT32_MAX) return dcr__fail(d, DCR_E_LIMIT, "%zu tensors", n);
  if (!e->opt->unrelated && b->count && t->count && n == b->count + t->count)
    return dcr__fail(d, DCR_E_ARGUMENT, "base and target share no tensor name (the base has "
                     "%zu tensors, the target %zu): not two versions of one model, or two "
                     "shards that do not correspond? Every tensor would be sent whole; to do "
                     "that anyway, allow unrelated inputs (dcr encode --unrelated)",
                     b->count, t->count);
  e->man.entry_count = n;
  e->man.chunk_size = e->opt->chunk_size;
  e->man.kind = t->kind;
  e->man.prefix = t->prefix;
  e->man.prefix_length = t->prefix_length;
  e->man.data_length = t->file_size - t->prefix_length;
  if (t->kind == DCR_KIND_SET) {
    size_t length;
    int rc = dcr__set_table_write(t, b, &e->table, &length, d);
    if (rc) return rc;
    e->man.prefix = e->table;
    e->man.prefix_length = length;
  }
  unsigned minor = dcr__manifest_minor(&e->man);
  if (minor > (unsigned)e->opt->max_minor)
    return dcr__fail(d, DCR_E_ARGUMENT, "the bundle needs format 1.%u (%s), over the %d.%d "
                     "asked for", minor, t->kind == DCR_KIND_SET ? "a checkpoint set"
                                                                 : "a dtype added in 1.1",
                     DCR_FORMAT_MAJOR, e->opt->max_minor);
  /* R-WRT-4 as 1.2 and 1.3 word it: the header is written before any chunk is
   * coded, so a bundle is 1.2 (1.3) when its chunks may be DELTA_CLASSED
   * (DELTA_BANDED), which is when a tensor is coded against its base and that
   * version is allowed (tensors named by options.sliced aside: never ranked). */
  int rc = dcr__match_entries(&e->man, e->opt->sliced, e->opt->sliced_count, "the checkpoints",
                              &e->sliced, NULL, d);
  if (rc) return rc;
  if (e->opt->max_minor >= 2 && minor < 2 && dcr__manifest_has_base_coded(&e->man, e->sliced))
    minor = (unsigned)e->opt->max_minor; /* 2: DELTA_CLASSED; 3: DELTA_BANDED */
  e->w.minor = minor;
  e->stats.format_minor = minor;
  return DCR_OK;
}

static int build_jobs(encoder *e, dcr_detail *d) {
  size_t count = 0;
  for (uint64_t i = 0; i < e->man.entry_count; i++) {
    const dcr__entry *en = &e->man.entries[i];
    uint64_t c = en->presence & DCR__HAS_TARGET
                     ? dcr__chunk_count(en->target.byte_length, e->man.chunk_size) : 0;
    if (c > UINT32_MAX - 1)
      return dcr__fail(d, DCR_E_LIMIT, "tensor has %llu chunks; the limit is 2^32-1",
                       (unsigned long long)c);
    count += c ? (size_t)c : 1;
  }
  e->jobs = malloc(count * sizeof *e->jobs + 1);
  if (!e->jobs) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate %zu jobs", count);
  for (uint64_t i = 0; i < e->man.entry_count; i++) {
    const dcr__entry *en = &e->man.entries[i];
    uint64_t c = en->presence & DCR__HAS_TARGET
                     ? dcr__chunk_count(en->target.byte_length, e->man.chunk_size) : 0;
    if (!c) e->jobs[e->job_count++] = (job){(uint32_t)i, NO_CHUNK};
    for (uint64_t k = 0; k < c; k++) e->jobs[e->job_count++] = (job){(uint32_t)i, (uint32_t)k};
  }
  return DCR_OK;
}

/* A base tensor that is not delta-coded (removed or recoded) is read only for its
 * identity, here; the others are hashed as their chunks go by. */
static int begin_entry(encoder *e, uint32_t i, dcr_detail *d) {
  dcr__entry *en = &e->man.entries[i];
  XXH3_128bits_reset(&e->base_hash);
  XXH3_128bits_reset(&e->target_hash);
  if ((en->presence & DCR__HAS_BASE) && !dcr__entry_delta_coded(en)) {
    int rc = dcr__hash_range(&e->ck[0], tensor_start(e, 0, &en->base), en->base.byte_length,
                             en->base.hash, e->digesting ? &e->base_sha : NULL, d);
    if (rc) return dcr__detail_file(d, e->path[0]), rc;
  }
  return DCR_OK;
}

static void end_entry(encoder *e, uint32_t i) {
  dcr__entry *en = &e->man.entries[i];
  if (en->presence & DCR__HAS_TARGET) dcr__digest128(&e->target_hash, en->target.hash);
  if (dcr__entry_delta_coded(en)) dcr__digest128(&e->base_hash, en->base.hash);
  if (!e->digesting) return;
  uint8_t *out = dcr__signer_digests(e->signer); /* entry order, base first (§20.2) */
  if (en->presence & DCR__HAS_BASE) dcr__sha256_final(&e->base_sha.tensor, out + 32 * e->digests++);
  if (en->presence & DCR__HAS_TARGET) dcr__sha256_final(&e->target_sha, out + 32 * e->digests++);
}

static int emit_chunk(encoder *e, const job *jb, const slot *s, dcr_detail *d) {
  dcr__chunk *c = dcr__index_push(&e->index, d);
  if (!c) return DCR_E_NOMEM;
  *c = (dcr__chunk){.tensor = jb->entry, .chunk = jb->chunk, .encoding = s->out.encoding,
                    .compression = s->out.compression, .count = s->out.count,
                    .base_check = s->out.base_check, .target_check = s->out.target_check,
                    .payload_length = DCR__RECORD_SIZE + s->out.length};
  uint8_t rec[DCR__RECORD_SIZE];
  dcr__chunk_record_write(rec, c);
  e->stats.changed_chunks++;
  if (s->out.encoding == DCR_ENC_DELTA_CLASSED) e->stats.chunks_delta_classed++;
  else if (s->out.encoding == DCR_ENC_DELTA_BANDED) e->stats.chunks_delta_banded++;
  else e->stats.chunks_by_encoding[s->out.encoding]++;
  return dcr__writer_section(&e->w, DCR__SEC_CHNK, rec, sizeof rec, s->out.data, s->out.length,
                             &c->offset, d);
}

static int take_slot(encoder *e, const job *jb, const slot *s, dcr_detail *d) {
  int rc;
  if (jb->entry != e->current) {
    if (e->current != UINT32_MAX) end_entry(e, e->current);
    if ((rc = begin_entry(e, e->current = jb->entry, d))) return rc;
  }
  if (s->rc) return *d = s->detail, s->rc;
  if (jb->chunk == NO_CHUNK) return DCR_OK;
  const dcr__entry *en = &e->man.entries[jb->entry];
  size_t pieces = 16 * s->out.pieces;
  if (dcr__entry_delta_coded(en)) XXH3_128bits_update(&e->base_hash, s->out.base_pieces, pieces);
  XXH3_128bits_update(&e->target_hash, s->out.target_pieces, pieces);
  if (e->digesting) {
    size_t digests = 32 * s->out.pieces;
    if (dcr__entry_delta_coded(en)) dcr__sha256_update(&e->base_sha.tensor, s->base_sha, digests);
    dcr__sha256_update(&e->target_sha, s->target_sha, digests);
  }
  e->stats.chunks++;
  e->stats.elements += s->bytes / dcr_dtype_size(en->target.dtype);
  e->stats.changed_elements += s->out.count;
  return s->out.count ? emit_chunk(e, jb, s, d) : DCR_OK;
}

/* Takes job j (dcr__take_fn): tensor hashes (which must see bytes in order),
 * stats and the chunk's section. */
static int take_job(void *ctx, size_t j, dcr_detail *d) {
  encoder *e = ctx;
  const job *jb = &e->jobs[j];
  slot *s = &e->slots[j % e->slot_count];
  int rc = take_slot(e, jb, s, d);
  e->done += s->bytes;
  close_views(s);
  if (!rc && e->opt->progress) e->opt->progress(e->opt->progress_opaque, e->done,
                                                e->man.data_length);
  return rc;
}

static int run_jobs(encoder *e, dcr__pool *pool, dcr_detail *d) {
  e->current = UINT32_MAX;
  int rc = dcr__pool_stream(pool, e->job_count, encode_job, take_job, e, e->opt->cancel, d);
  if (!rc && e->current != UINT32_MAX) end_entry(e, e->current);
  return rc;
}

int dcr__write_tail(dcr__writer *w, const dcr__manifest *m, const dcr__chunk *index,
                    uint64_t index_count, dcr__signer *signer, dcr_detail *d) {
  size_t n = dcr__iden_size(m);
  uint8_t *iden = malloc(n);
  uint8_t *indx = malloc((size_t)index_count * DCR__RECORD_SIZE + 1);
  uint64_t iden_offset = 0, indx_offset = 0;
  int rc = DCR_OK;
  if (!iden || !indx) rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate identities and index");
  if (!rc) {
    dcr__iden_write(m, iden);
    for (uint64_t i = 0; i < index_count; i++)
      dcr__index_record_write(indx + i * DCR__RECORD_SIZE, &index[i]);
    rc = dcr__writer_section(w, DCR__SEC_IDEN, iden, n, NULL, 0, &iden_offset, d);
  }
  if (!rc)
    rc = dcr__writer_section(w, DCR__SEC_INDX, indx, (size_t)index_count * DCR__RECORD_SIZE,
                             NULL, 0, &indx_offset, d);
  if (!rc && signer) rc = dcr__signer_write(signer, w, d);
  if (!rc) rc = dcr__writer_footer(w, iden_offset, indx_offset, index_count, d);
  free(iden);
  free(indx);
  return rc;
}

/* §16.1 (R-WRT-2): a writer must not make a bundle that a reader with the default
 * limits rejects. Inputs read under looser limits could lead there (a 5000-byte
 * name, rank 20), so the manifest is read back as such a reader would. */
static int check_manifest(const uint8_t *buf, size_t n, const dcr_limits *inputs,
                          unsigned minor, dcr_detail *d) {
  dcr_limits lim;
  dcr__manifest m;
  dcr_limits_default(&lim);
  lim.max_memory = inputs->max_memory; /* a budget, not a rule of the format */
  uint8_t *copy = malloc(n ? n : 1);
  if (!copy) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate %zu bytes", n);
  memcpy(copy, buf, n);
  dcr_detail why;
  dcr__detail_init(&why);
  int rc = dcr__manifest_parse(copy, n, &lim, minor, &m, &why); /* takes copy */
  if (rc) return dcr__fail(d, rc, "a reader with the default limits would reject this bundle: %s",
                           why.message);
  dcr__manifest_free(&m);
  return DCR_OK;
}

int dcr__write_head(dcr__writer *w, const dcr__manifest *m, const dcr_limits *inputs,
                    const dcr_meta *meta, size_t meta_count, dcr_detail *d) {
  uint8_t *buf = NULL;
  size_t n = 0;
  int rc = dcr__writer_header(w, d);
  if (!rc && dcr__manifest_serialize(m, &buf, &n))
    rc = dcr__fail(d, DCR_E_NOMEM, "cannot serialize the manifest");
  if (!rc) rc = check_manifest(buf, n, inputs, w->minor, d);
  if (!rc) rc = dcr__writer_packed_section(w, DCR__SEC_MANI, buf, n, d);
  free(buf);
  buf = NULL;
  if (!rc && dcr__rsiz_write(m, &buf, &n)) rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  if (!rc && n) rc = dcr__writer_section(w, DCR__SEC_RSIZ, buf, n, NULL, 0, NULL, d);
  free(buf);
  buf = NULL;
  if (!rc && meta_count) {
    rc = dcr__meta_serialize(meta, meta_count, &buf, &n, d);
    if (!rc) rc = dcr__writer_packed_section(w, DCR__SEC_META, buf, n, d);
    free(buf);
  }
  return rc;
}

static int check_options(const dcr_encode_options *o, dcr_detail *d) {
  uint32_t cs = o->chunk_size;
  if (cs < DCR__MIN_CHUNK_SIZE || cs > (1u << 30) || (cs & (cs - 1)))
    return dcr__fail(d, DCR_E_ARGUMENT, "chunk size %u is not a power of two in 4096..2^30", cs);
  if (o->level < 0 || o->level > ZSTD_maxCLevel())
    return dcr__fail(d, DCR_E_ARGUMENT, "zstd level %d outside 0..%d", o->level, ZSTD_maxCLevel());
  if (o->threads > 1024) return dcr__fail(d, DCR_E_ARGUMENT, "%u threads", o->threads);
  if (o->max_minor < 0 || o->max_minor > DCR_FORMAT_MINOR)
    return dcr__fail(d, DCR_E_ARGUMENT, "format 1.%d: this library writes 1.0 to 1.%d",
                     o->max_minor, DCR_FORMAT_MINOR);
  if (o->sign_scope != DCR_SIGN_CHECKPOINTS && o->sign_scope != DCR_SIGN_BUNDLE)
    return dcr__fail(d, DCR_E_ARGUMENT, "signing scope %d: DCR_SIGN_CHECKPOINTS or DCR_SIGN_BUNDLE",
                     o->sign_scope);
  /* before the first byte reaches the sink */
  uint8_t *meta = NULL;
  size_t n;
  int rc = o->meta_count ? dcr__meta_serialize(o->meta, o->meta_count, &meta, &n, d) : DCR_OK;
  free(meta);
  return rc;
}

/* Two directories are sets; a directory and a file, a mistake. */
static int input_kind(const encoder *e, int *kind, dcr_detail *d) {
  struct stat st[2];
  for (int i = 0; i < 2; i++)
    if (stat(e->path[i], &st[i]))
      return dcr__detail_file(d, e->path[i]),
             dcr__fail(d, DCR_E_IO, "cannot open: %s", strerror(errno));
  int dirs = S_ISDIR(st[0].st_mode) + S_ISDIR(st[1].st_mode);
  if (dirs == 1)
    return dcr__detail_file(d, e->path[!S_ISDIR(st[0].st_mode)]),
           dcr__fail(d, DCR_E_ARGUMENT, "one input is a directory and the other is not: a "
                     "sharded model is encoded directory to directory");
  *kind = dirs ? DCR_KIND_SET : e->opt->raw ? DCR_KIND_RAW : DCR_KIND_SAFETENSORS;
  return DCR_OK;
}

static int open_inputs(encoder *e, dcr_detail *d) {
  int kind = DCR_KIND_SAFETENSORS, rc = input_kind(e, &kind, d);
  for (int i = 0; !rc && i < 2; i++)
    rc = kind == DCR_KIND_SET ? dcr__set_read(e->path[i], &e->lim, DCR_FORMAT_MINOR, 1, &e->ck[i], d)
                              : dcr__checkpoint_open(e->path[i], kind, &e->lim, DCR_FORMAT_MINOR,
                                                     &e->ck[i], d);
  return rc;
}

static int make_slots(encoder *e, size_t count, dcr_detail *d) {
  e->slot_count = count;
  e->buffer_size = dcr__max_chunk_bytes(&e->man);
  e->slots = calloc(count, sizeof *e->slots);
  if (!e->slots) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate slots");
  e->classed = e->w.minor >= 2 ? (int)e->w.minor : 0;
  for (size_t i = 0; i < e->slot_count; i++) {
    slot *s = &e->slots[i];
    s->base_buffer = malloc(e->buffer_size);
    s->target_buffer = malloc(e->buffer_size);
    if (!s->base_buffer || !s->target_buffer ||
        dcr__chunk_encoder_init(&s->enc, e->buffer_size, e->opt->level, e->classed))
      return dcr__fail(d, DCR_E_NOMEM, "cannot allocate chunk buffers");
    if (!e->digesting) continue;
    if (!(s->base_sha = malloc(32 * DCR__PIECES(e->buffer_size))) ||
        !(s->target_sha = malloc(32 * DCR__PIECES(e->buffer_size))))
      return dcr__fail(d, DCR_E_NOMEM, "cannot allocate digest buffers");
    int rc = dcr__sha256_init(&s->sha, d);
    if (rc) return rc;
  }
  return DCR_OK;
}

/* The signer, before the first byte is written (a refused key costs nothing),
 * between the writer and the sink. */
static int open_signer(encoder *e, dcr_detail *d) {
  unsigned major = e->opt->sign_scope == DCR_SIGN_BUNDLE ? DCR__SIGN_BUNDLE : DCR__SIGN_CHECKPOINTS;
  e->digesting = major == DCR__SIGN_CHECKPOINTS;
  int rc = dcr__signer_open(&e->signer, e->opt->sign_key, major,
                            dcr__sign_digest_count(&e->man, major), d);
  if (!rc && e->digesting) rc = dcr__tensor_sha256_init(&e->base_sha, d);
  if (!rc && e->digesting) rc = dcr__sha256_init(&e->target_sha, d);
  if (!rc) dcr__signer_attach(e->signer, &e->w);
  return rc;
}

static void encoder_free(encoder *e) {
  for (size_t i = 0; e->slots && i < e->slot_count; i++) {
    close_views(&e->slots[i]);
    free(e->slots[i].base_buffer);
    free(e->slots[i].target_buffer);
    dcr__chunk_encoder_free(&e->slots[i].enc);
    dcr__sha256_free(&e->slots[i].sha);
    free(e->slots[i].base_sha);
    free(e->slots[i].target_sha);
  }
  free(e->slots);
  for (int i = 0; i < 2; i++) dcr__checkpoint_free(&e->ck[i]);
  free(e->table);
  free(e->man.entries);
  free(e->jobs);
  free(e->sliced);
  free(e->index.records);
  dcr__signer_free(e->signer);
  dcr__tensor_sha256_free(&e->base_sha);
  dcr__sha256_free(&e->target_sha);
}

/* The options' layout is the ABI ("Growing structs" in dcr.h). */
_Static_assert(sizeof(void *) != 8 || (sizeof(dcr_encode_options) == 120 &&
                                       offsetof(dcr_encode_options, unrelated) == 72 &&
                                       offsetof(dcr_encode_options, sign_key) == 80 &&
                                       offsetof(dcr_encode_options, sliced) == 88 &&
                                       offsetof(dcr_encode_options, sign_scope) == 104 &&
                                       offsetof(dcr_encode_options, reserved_) == 112),
               "dcr_encode_options changed size");

void dcr_encode_options_default(dcr_encode_options *o) {
  memset(o, 0, sizeof *o);
  o->chunk_size = 4u << 20;
  o->level = 3;
  o->max_minor = DCR_FORMAT_MINOR;
}

int dcr_encode(const char *base_path, const char *target_path, const dcr_encode_options *opt,
               dcr_write_fn write, void *opaque, dcr_encode_stats *stats, dcr_detail *d) {
  dcr_detail scratch;
  if (!d) d = &scratch;
  dcr__detail_init(d);
  dcr_encode_options defaults;
  if (!opt) dcr_encode_options_default(&defaults), opt = &defaults;
  encoder e = {.opt = opt, .path = {base_path, target_path},
               .w = {.write = write, .opaque = opaque, .level = opt->level}};
  dcr_limits_default(&e.lim);
  if (opt->max_memory) e.lim.max_memory = opt->max_memory;
  XXH3_INITSTATE(&e.base_hash);
  XXH3_INITSTATE(&e.target_hash);
  dcr__pool *pool = NULL;
  int rc = check_options(opt, d);
  if (!rc) rc = open_inputs(&e, d);
  if (!rc) rc = build_manifest(&e, d);
  if (!rc) rc = build_jobs(&e, d);
  if (!rc && opt->sign_key) rc = open_signer(&e, d);
  unsigned threads = opt->threads ? opt->threads : dcr_default_threads();
  if (!rc) {
    /* two slots per thread, each two read buffers and an encoder's of a chunk */
    threads = dcr__threads_within(threads, 8 * (uint64_t)e.buffer_size, e.lim.max_memory);
    threads = dcr__threads_for_jobs(threads, e.job_count,
                                    e.ck[1].file_size - e.ck[1].prefix_length);
  }
  if (!rc && dcr__pool_create(&pool, threads))
    rc = dcr__fail(d, DCR_E_NOMEM, "cannot start threads");
  if (!rc) rc = make_slots(&e, dcr__pool_window(pool), d);
  if (!rc) rc = dcr__write_head(&e.w, &e.man, &e.lim, opt->meta, opt->meta_count, d);
  if (!rc) rc = run_jobs(&e, pool, d);
  if (!rc) rc = dcr__write_tail(&e.w, &e.man, e.index.records, e.index.count, e.signer, d);
  dcr__pool_free(pool);
  e.stats.bundle_size = e.w.offset;
  e.stats.target_size = e.ck[1].file_size;
  if (stats) *stats = e.stats;
  encoder_free(&e);
  return rc;
}

int dcr_encode_file(const char *base_path, const char *target_path, const char *out_path,
                    const dcr_encode_options *opt, dcr_encode_stats *stats, dcr_detail *d) {
  dcr_detail scratch;
  if (!d) d = &scratch;
  dcr__detail_init(d);
  dcr_encode_options defaults;
  if (!opt) dcr_encode_options_default(&defaults), opt = &defaults;
  dcr__file_sink f = {.at = 0};
  unsigned flags = (opt->no_replace ? 0 : DCR__ATOMIC_REPLACE) | (opt->no_sync ? 0 : DCR__ATOMIC_SYNC);
  int rc = dcr__atomic_open(&f.out, out_path, flags, d);
  if (rc) return rc;
  rc = dcr_encode(base_path, target_path, opt, dcr__file_sink_write, &f, stats, d);
  if (rc == DCR_E_IO && f.error) { /* the output's fault: say so, and why */
    snprintf(d->file, sizeof d->file, "%s", out_path);
    snprintf(d->message, sizeof d->message, "cannot write the bundle: %s", strerror(f.error));
  }
  if (!rc) rc = dcr__atomic_commit(&f.out, d);
  dcr__atomic_abort(&f.out);
  return rc;
}
