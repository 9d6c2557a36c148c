/*
 * apply.c - dcr_apply and dcr_check_target (SPEC.md §10).
 *
 * The target is written front to back, tensor by tensor in offset order, into a
 * temporary file beside the output. Workers read base chunks and apply the bundle's
 * chunks by R-APL-2 (§10.1 step 3); the calling thread hashes them in order. The output is renamed into place only once every base and target hash
 * has matched.
 *
 * A checkpoint that is already the bundle's target is accepted too (§10.2): when
 * the input is not the base, it is read again as the target, every chunk left as
 * it is, and the target hashes decide.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../format/checkpoint.h"
#include "codec.h"

#define NO_CHUNK UINT32_MAX
#define NO_RECORD UINT64_MAX

typedef struct {
  uint32_t entry, chunk;
  uint64_t record; /* index of its CHNK, or NO_RECORD if unchanged */
} job;

typedef struct {
  dcr__view base;
  uint8_t *base_buffer, *out, *scratch; /* base_buffer: zeros, or a base not mapped */
  uint8_t *base_pieces, *out_pieces;    /* piece digests (§7) */
  size_t bytes, pieces, scratch_capacity;
  const uint8_t *result, *result_pieces; /* base or out */
  dcr__chunk_decoder dec;
  int rc;
  dcr_detail detail;
} slot;

typedef struct {
  dcr_reader *r;
  const dcr_apply_options *opt;
  int as_target; /* the input is taken to be the target already: nothing to apply */
  int base_fd, out_fd;
  const char *base_path;
  dcr__checkpoint base;
  uint64_t *base_offset; /* entry -> file offset of its base tensor */
  job *jobs;
  size_t job_count;
  slot *slots;
  size_t slot_count;
  XXH3_state_t base_hash, target_hash;
  uint32_t current; /* the entry being hashed */
  uint64_t done;    /* bytes taken, for progress */
} applier;

static void name_entry(dcr_detail *d, const dcr__manifest *m, uint64_t i) {
  dcr__detail_tensor(d, i, m->entries[i].name, m->entries[i].name_length);
}

/* The input's side of an entry: its base, or its target when the input is taken to
 * be the target already. */
static const dcr__desc *input_desc(const applier *a, const dcr__entry *e) {
  if (a->as_target) return e->presence & DCR__HAS_TARGET ? &e->target : NULL;
  return e->presence & DCR__HAS_BASE ? &e->base : NULL;
}

/* Whether the input's bytes of a target tensor are read (and hashed as the base). */
static int input_read(const applier *a, const dcr__entry *e) {
  return a->as_target || dcr__entry_delta_coded(e);
}

/* §6.3: the base must have exactly the manifest's base tensors (or, taken as the
 * target, its target tensors). */
static int check_base(applier *a, dcr_detail *d) {
  const dcr__manifest *m = &a->r->man;
  size_t j = 0;
  for (uint64_t i = 0; i < m->entry_count; i++) {
    const dcr__entry *e = &m->entries[i];
    const dcr__desc *want = input_desc(a, e);
    if (!want) continue;
    const dcr__tensor *t = j < a->base.count ? &a->base.tensors[j] : NULL;
    int c = t ? dcr__name_cmp(e->name, e->name_length, t->name, t->name_length) : -1;
    name_entry(d, m, i);
    if (c < 0) return dcr__fail(d, DCR_E_BASE_MISMATCH, "base has no such tensor");
    if (c > 0) {
      if (d) d->tensor = DCR_NONE, snprintf(d->tensor_name, sizeof d->tensor_name, "%s", t->name);
      return dcr__fail(d, DCR_E_BASE_MISMATCH, "base has a tensor the bundle does not expect");
    }
    if (t->desc.dtype != want->dtype || t->desc.rank != want->rank ||
        (want->rank && memcmp(t->desc.dims, want->dims, want->rank * sizeof(uint64_t))))
      return dcr__fail(d, DCR_E_BASE_MISMATCH, "base tensor is %s of rank %u; the bundle "
                       "expects %s of rank %u", dcr_dtype_name(t->desc.dtype), t->desc.rank,
                       dcr_dtype_name(want->dtype), want->rank);
    a->base_offset[i] = a->base.prefix_length + t->desc.offset;
    if (d) dcr__detail_init(d);
    j++;
  }
  if (j != a->base.count) {
    if (d) snprintf(d->tensor_name, sizeof d->tensor_name, "%s", a->base.tensors[j].name);
    return dcr__fail(d, DCR_E_BASE_MISMATCH, "base has a tensor the bundle does not expect");
  }
  return DCR_OK;
}

static int by_target_offset(const void *x, const void *y, void *ctx) {
  const dcr__entry *e = ctx;
  uint32_t i = *(const uint32_t *)x, j = *(const uint32_t *)y;
  const dcr__desc *a = &e[i].target, *b = &e[j].target;
  if (a->offset != b->offset) return a->offset < b->offset ? -1 : 1;
  if (a->byte_length != b->byte_length) return a->byte_length < b->byte_length ? -1 : 1;
  return (i > j) - (i < j); /* §10.1: empty tensors at one offset by name, i.e. entry order */
}

/* One job per target chunk, in file order; entries with no chunks get a marker so
 * that their (empty) hash is still checked. */
static int build_jobs(applier *a, dcr_detail *d) {
  const dcr__manifest *m = &a->r->man;
  uint32_t *order = malloc((size_t)m->entry_count * sizeof *order + 1);
  uint64_t *first = malloc((size_t)m->entry_count * sizeof *first + 1);
  size_t n = 0, count = 0;
  if (!order || !first) {
    free(order), free(first);
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate the job list");
  }
  for (uint64_t i = 0; i < m->entry_count; i++) {
    first[i] = NO_RECORD;
    if (m->entries[i].presence & DCR__HAS_TARGET) {
      order[n++] = (uint32_t)i;
      uint64_t c = dcr__chunk_count(m->entries[i].target.byte_length, m->chunk_size);
      count += c ? (size_t)c : 1;
    }
  }
  for (uint64_t k = a->as_target ? 0 : a->r->chunk_count; k-- > 0;)
    first[a->r->chunks[k].tensor] = k;
  qsort_r(order, n, sizeof *order, by_target_offset, m->entries);
  a->jobs = malloc(count * sizeof *a->jobs + 1);
  if (!a->jobs) {
    free(order), free(first);
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate the job list");
  }
  for (size_t i = 0; i < n; i++) {
    uint32_t e = order[i];
    uint64_t c = dcr__chunk_count(m->entries[e].target.byte_length, m->chunk_size);
    uint64_t rec = first[e];
    if (!c) a->jobs[a->job_count++] = (job){e, NO_CHUNK, NO_RECORD};
    for (uint64_t k = 0; k < c; k++) {
      int hit = rec < a->r->chunk_count && a->r->chunks[rec].tensor == e &&
                a->r->chunks[rec].chunk == k;
      a->jobs[a->job_count++] = (job){e, (uint32_t)k, hit ? rec++ : NO_RECORD};
    }
  }
  free(order);
  free(first);
  return DCR_OK;
}

/* §10.1 step 4 (R-APL-2) for one changed chunk: base_check, then decode and apply
 * (R-ENC-3), then target_check. A chunk whose base bytes already give target_check
 * is not left alone: a changed chunk's base cannot, and a retried apply is
 * recognized as a whole by the target's state id (§10.2). */
static int apply_record(applier *a, slot *s, const dcr__chunk *c, unsigned esize) {
  if (!DCR__CHECKSUM_OK(dcr__pieces_check(s->base_pieces, s->pieces) == c->base_check))
    return dcr__fail(&s->detail, DCR_E_BASE_MISMATCH, "chunk's base bytes do not match the "
                     "bundle's base checksum");
  const uint8_t *payload;
  int rc = dcr__source_get(&a->r->src, c->offset + DCR__SECTION_HEADER_SIZE,
                           (size_t)c->payload_length, &s->scratch, &s->scratch_capacity, &payload,
                           &s->detail);
  if (rc) return rc;
  memcpy(s->out, s->base.data, s->bytes);
  rc = dcr__decode_chunk(&s->dec, c, payload + DCR__RECORD_SIZE,
                         (size_t)c->payload_length - DCR__RECORD_SIZE, esize, s->bytes / esize,
                         s->out, &s->detail);
  if (rc) return rc;
  dcr__pieces(s->out, s->bytes, s->out_pieces);
  if (!DCR__CHECKSUM_OK(dcr__pieces_check(s->out_pieces, s->pieces) == c->target_check))
    return dcr__fail(&s->detail, DCR_E_TARGET_MISMATCH, "applied chunk does not match the "
                     "bundle's target checksum");
  s->result = s->out;
  s->result_pieces = s->out_pieces;
  return DCR_OK;
}

static void apply_job(void *ctx, size_t j, unsigned worker) {
  (void)worker;
  applier *a = ctx;
  const job *jb = &a->jobs[j];
  slot *s = &a->slots[j % a->slot_count];
  const dcr__manifest *m = &a->r->man;
  dcr__detail_init(&s->detail);
  s->rc = DCR_OK;
  s->bytes = s->pieces = 0;
  if (jb->chunk == NO_CHUNK) return;
  const dcr__entry *e = &m->entries[jb->entry];
  uint64_t at = (uint64_t)jb->chunk * m->chunk_size;
  s->bytes = dcr__chunk_bytes(m, e, jb->chunk);
  int rc = DCR_OK;
  if (input_read(a, e)) {
    rc = dcr__view_open(&s->base, a->base_fd, a->base_offset[jb->entry] + at, s->bytes,
                        s->base_buffer, &s->detail);
    if (rc) dcr__detail_file(&s->detail, a->base_path);
  } else {
    memset(s->base_buffer, 0, s->bytes);
    s->base = (dcr__view){.data = s->base_buffer};
  }
  s->result = s->base.data;
  s->result_pieces = s->base_pieces;
  if (!rc) s->pieces = dcr__pieces(s->base.data, s->bytes, s->base_pieces);
  if (!rc && jb->record != NO_RECORD)
    rc = apply_record(a, s, &a->r->chunks[jb->record], dcr_dtype_size(e->target.dtype));
  /* Workers write their own chunks: the copy into the page cache is most of an
   * apply's cost, and it parallelizes; only hashing must follow file order. */
  if (!rc && a->out_fd >= 0)
    rc = dcr__pwrite_full(a->out_fd, s->result, s->bytes,
                          m->prefix_length + e->target.offset + at, &s->detail);
  if (rc) {
    dcr__detail_tensor(&s->detail, jb->entry, e->name, e->name_length);
    dcr__detail_chunk(&s->detail, jb->chunk);
    if (jb->record != NO_RECORD) dcr__detail_at(&s->detail, "CHNK", a->r->chunks[jb->record].offset);
  }
  s->rc = rc;
}

static int end_entry(applier *a, uint32_t i, dcr_detail *d) {
  const dcr__manifest *m = &a->r->man;
  const dcr__entry *e = &m->entries[i];
  uint8_t h[16];
  if (!a->as_target && dcr__entry_delta_coded(e)) {
    dcr__digest128(&a->base_hash, h);
    if (!DCR__CHECKSUM_OK(memcmp(h, e->base.hash, 16) == 0))
      return name_entry(d, m, i), dcr__detail_file(d, a->base_path),
             dcr__fail(d, DCR_E_BASE_MISMATCH, "base tensor's hash differs from the bundle's");
  }
  dcr__digest128(&a->target_hash, h);
  if (!DCR__CHECKSUM_OK(memcmp(h, e->target.hash, 16) == 0))
    return name_entry(d, m, i), dcr__fail(d, DCR_E_TARGET_MISMATCH, "rebuilt tensor's hash "
                                          "differs from the bundle's target hash");
  return DCR_OK;
}

/* Takes job j (dcr__take_fn): the tensor hashes, which must see bytes in order. */
static int take_job(void *ctx, size_t j, dcr_detail *d) {
  applier *a = ctx;
  const job *jb = &a->jobs[j];
  slot *s = &a->slots[j % a->slot_count];
  int rc = s->rc;
  if (rc) *d = s->detail;
  if (!rc && jb->entry != a->current) {
    if (a->current != UINT32_MAX) rc = end_entry(a, a->current, d);
    a->current = jb->entry;
    XXH3_128bits_reset(&a->base_hash);
    XXH3_128bits_reset(&a->target_hash);
  }
  if (!rc) {
    if (!a->as_target && dcr__entry_delta_coded(&a->r->man.entries[jb->entry]))
      XXH3_128bits_update(&a->base_hash, s->base_pieces, 16 * s->pieces);
    XXH3_128bits_update(&a->target_hash, s->result_pieces, 16 * s->pieces);
  }
  a->done += s->bytes;
  dcr__view_close(&s->base);
  if (!rc && a->opt->progress)
    a->opt->progress(a->opt->progress_opaque, a->done, a->r->man.data_length);
  return rc;
}

static int run_jobs(applier *a, dcr__pool *pool, dcr_detail *d) {
  const dcr__manifest *m = &a->r->man;
  a->current = UINT32_MAX;
  int rc = dcr__pool_stream(pool, a->job_count, apply_job, take_job, a, a->opt->cancel, d);
  if (rc) return rc;
  if (a->current != UINT32_MAX && (rc = end_entry(a, a->current, d))) return rc;
  /* Base tensors that were not read above (removed or recoded) are hashed too:
   * the base state id covers them. */
  for (uint64_t i = 0; !a->as_target && i < m->entry_count; i++) {
    const dcr__entry *e = &m->entries[i];
    if (!(e->presence & DCR__HAS_BASE) || dcr__entry_delta_coded(e)) continue;
    uint8_t h[16];
    rc = dcr__hash_range(a->base_fd, a->base_offset[i], e->base.byte_length, h, d);
    if (!rc && !DCR__CHECKSUM_OK(memcmp(h, e->base.hash, 16) == 0))
      rc = (name_entry(d, m, i),
            dcr__fail(d, DCR_E_BASE_MISMATCH, "base tensor's hash differs from the bundle's"));
    if (rc) return dcr__detail_file(d, a->base_path), rc;
  }
  return DCR_OK;
}

static int make_slots(applier *a, size_t count, dcr_detail *d) {
  size_t cs = dcr__max_chunk_bytes(&a->r->man);
  a->slot_count = count;
  a->slots = calloc(count, sizeof *a->slots);
  if (!a->slots) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate slots");
  for (size_t i = 0; i < a->slot_count; i++) {
    slot *s = &a->slots[i];
    s->base_buffer = malloc(cs);
    s->out = malloc(cs);
    s->base_pieces = malloc(16 * DCR__PIECES(cs));
    s->out_pieces = malloc(16 * DCR__PIECES(cs));
    if (!s->base_buffer || !s->out || !s->base_pieces || !s->out_pieces ||
        dcr__chunk_decoder_init(&s->dec, cs))
      return dcr__fail(d, DCR_E_NOMEM, "cannot allocate chunk buffers");
  }
  return DCR_OK;
}

static void applier_free(applier *a) {
  for (size_t i = 0; a->slots && i < a->slot_count; i++) {
    dcr__view_close(&a->slots[i].base);
    free(a->slots[i].base_buffer);
    free(a->slots[i].out);
    free(a->slots[i].base_pieces);
    free(a->slots[i].out_pieces);
    free(a->slots[i].scratch);
    dcr__chunk_decoder_free(&a->slots[i].dec);
  }
  free(a->slots);
  free(a->jobs);
  free(a->base_offset);
  dcr__checkpoint_free(&a->base);
  if (a->base_fd >= 0) close(a->base_fd);
}

/* A temporary file beside `path`, so that rename() is atomic. */
static int open_temp(const char *path, char *tmp, size_t size, int *fd, dcr_detail *d) {
  if ((size_t)snprintf(tmp, size, "%s.dcr-XXXXXX", path) >= size)
    return dcr__fail(d, DCR_E_ARGUMENT, "output path too long");
  *fd = mkstemp(tmp);
  if (*fd < 0) return dcr__fail(d, DCR_E_IO, "cannot create a temporary file: %s", strerror(errno));
  mode_t mask = umask(0);
  umask(mask);
  fchmod(*fd, 0666 & ~mask);
  return DCR_OK;
}

void dcr_apply_options_default(dcr_apply_options *o) {
  memset(o, 0, sizeof *o);
  o->sync = 1;
}

/* §10.1: a wrong base is reported as such, whatever else failed on the way. A
 * chunk that failed on the right base is the bundle's fault; on another input
 * it says nothing, so every base tensor's hash decides. */
static int input_is_base(const applier *a) {
  const dcr__manifest *m = &a->r->man;
  for (uint64_t i = 0; i < m->entry_count; i++) {
    const dcr__entry *e = &m->entries[i];
    uint8_t h[16];
    if (!(e->presence & DCR__HAS_BASE)) continue;
    if (dcr__hash_range(a->base_fd, a->base_offset[i], e->base.byte_length, h, NULL) ||
        memcmp(h, e->base.hash, 16))
      return 0;
  }
  return 1;
}

/* One attempt at §10: the input taken as the base, or as the target already. */
static int apply_as(dcr_reader *r, const char *base_path, const char *out_path,
                    const dcr_apply_options *opt, int as_target, dcr_detail *d) {
  dcr_limits lim = r->lim;
  applier a = {.r = r, .opt = opt, .as_target = as_target, .base_fd = -1, .out_fd = -1,
               .base_path = base_path};
  XXH3_INITSTATE(&a.base_hash);
  XXH3_INITSTATE(&a.target_hash);
  char tmp[4096] = "";
  dcr__pool *pool = NULL;
  int rc = DCR_OK;
  a.base_fd = open(base_path, O_RDONLY | O_CLOEXEC);
  if (a.base_fd < 0) rc = dcr__fail(d, DCR_E_IO, "cannot open: %s", strerror(errno));
  if (!rc) rc = dcr__checkpoint_read(a.base_fd, r->man.kind, &lim, &a.base, d);
  if (rc) dcr__detail_file(d, base_path);
  if (!rc && !(a.base_offset = calloc((size_t)r->man.entry_count + 1, sizeof *a.base_offset)))
    rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  if (!rc && (rc = check_base(&a, d))) dcr__detail_file(d, base_path);
  if (!rc) rc = build_jobs(&a, d);
  if (!rc && dcr__pool_create(&pool, opt->threads)) rc = dcr__fail(d, DCR_E_NOMEM, "no threads");
  if (!rc) rc = make_slots(&a, dcr__pool_window(pool), d);
  if (!rc && out_path && (rc = open_temp(out_path, tmp, sizeof tmp, &a.out_fd, d)))
    dcr__detail_file(d, out_path);
  if (!rc && a.out_fd >= 0)
    rc = dcr__pwrite_full(a.out_fd, r->man.prefix, (size_t)r->man.prefix_length, 0, d);
  if (!rc) rc = run_jobs(&a, pool, d);
  if ((rc == DCR_E_ENCODING || rc == DCR_E_TARGET_MISMATCH) && !as_target && !input_is_base(&a))
    rc = (dcr__detail_init(d), dcr__detail_file(d, base_path),
          dcr__fail(d, DCR_E_BASE_MISMATCH, "the input is not the bundle's base"));
  if (!rc && a.out_fd >= 0 && opt->sync && fsync(a.out_fd))
    rc = dcr__fail(d, DCR_E_IO, "fsync failed: %s", strerror(errno));
  if (a.out_fd >= 0 && close(a.out_fd) && !rc)
    rc = dcr__fail(d, DCR_E_IO, "close failed: %s", strerror(errno));
  if (!rc && out_path && rename(tmp, out_path))
    rc = dcr__fail(d, DCR_E_IO, "cannot rename into place: %s", strerror(errno));
  if (rc && tmp[0]) unlink(tmp);
  if (rc && !d->file[0]) dcr__detail_file(d, rc == DCR_E_BASE_MISMATCH ? base_path : r->path);
  dcr__pool_free(pool);
  applier_free(&a);
  return rc;
}

/* Failures that say something about the bundle or the input, rather than about
 * this machine or the caller. */
static int about_the_data(int rc) {
  return rc && rc != DCR_E_IO && rc != DCR_E_NOMEM && rc != DCR_E_ARGUMENT &&
         rc != DCR_E_INTERRUPTED;
}

int dcr_apply(dcr_reader *r, const char *base_path, const char *out_path,
              const dcr_apply_options *opt, dcr_detail *d) {
  dcr_detail scratch, again;
  if (!d) d = &scratch;
  dcr__detail_init(d);
  dcr_apply_options defaults;
  if (!opt) dcr_apply_options_default(&defaults), opt = &defaults;
  int rc = apply_as(r, base_path, out_path, opt, 0, d);
  /* §15: the chunk stage comes before the apply stage, so a chunk that cannot be
   * decoded is what to report, whatever the input. (On success every chunk has
   * been decoded already.) */
  if (about_the_data(rc)) {
    dcr__detail_init(&again);
    int chunk_rc = dcr_reader_verify(r, &again);
    if (about_the_data(chunk_rc)) {
      *d = again;
      return chunk_rc;
    }
  }
  /* Not the base: perhaps the target already, as after a retried job. If not that
   * either, the first answer stands. */
  dcr__detail_init(&again);
  if (rc == DCR_E_BASE_MISMATCH && apply_as(r, base_path, out_path, opt, 1, &again) == DCR_OK) {
    dcr__detail_init(d);
    rc = DCR_OK;
  }
  return rc;
}

int dcr_check_target(dcr_reader *r, const char *path, const dcr_apply_options *opt,
                     dcr_detail *d) {
  (void)opt;
  dcr_detail scratch;
  if (!d) d = &scratch;
  dcr__detail_init(d);
  const dcr__manifest *m = &r->man;
  dcr__checkpoint ck = {0};
  int fd = open(path, O_RDONLY | O_CLOEXEC), rc = DCR_OK;
  if (fd < 0) rc = dcr__fail(d, DCR_E_IO, "cannot open: %s", strerror(errno));
  if (!rc) rc = dcr__checkpoint_read(fd, m->kind, &r->lim, &ck, d);
  if (!rc && (ck.prefix_length != m->prefix_length ||
              (m->prefix_length && memcmp(ck.prefix, m->prefix, (size_t)m->prefix_length)) ||
              ck.file_size != m->prefix_length + m->data_length))
    rc = dcr__fail(d, DCR_E_TARGET_MISMATCH, "file's header or size differs from the target's");
  size_t j = 0;
  for (uint64_t i = 0; i < m->entry_count && !rc; i++) {
    const dcr__entry *e = &m->entries[i];
    if (!(e->presence & DCR__HAS_TARGET)) continue;
    /* equal prefixes make the tensor lists equal, in the same name order */
    const dcr__tensor *t = &ck.tensors[j++];
    uint8_t h[16];
    rc = dcr__hash_range(fd, ck.prefix_length + t->desc.offset, t->desc.byte_length, h, d);
    if (!rc && memcmp(h, e->target.hash, 16))
      rc = (name_entry(d, m, i),
            dcr__fail(d, DCR_E_TARGET_MISMATCH, "tensor's hash differs from the target's"));
  }
  if (rc) dcr__detail_file(d, path);
  dcr__checkpoint_free(&ck);
  if (fd >= 0) close(fd);
  return rc;
}
