/*
 * verify.c - dcr_reader_verify and dcr_reader_verify_all: decode every chunk
 * without a base and check every rule of SPEC.md §9 that needs none. Chunks are
 * decoded on worker threads; problems are reported in index order whatever the
 * thread count.
 */
#include <stdlib.h>

#include "codec.h"

typedef struct {
  dcr__chunk_decoder dec;
  uint8_t *buf;
  size_t cap;
  int rc;
  dcr_detail detail;
} slot;

typedef struct {
  dcr_reader *r;
  slot *slots;
  size_t slot_count;
  dcr_problem_fn fn;
  void *opaque;
  int first; /* the first problem's code */
  uint64_t done, total; /* payload bytes, for progress */
} verifier;

static size_t chunk_bytes(const dcr_reader *r, const dcr__chunk *c) {
  return dcr__chunk_bytes(&r->man, &r->man.entries[c->tensor], c->chunk);
}

static void verify_job(void *ctx, size_t i, unsigned worker) {
  (void)worker;
  verifier *v = ctx;
  const dcr_reader *r = v->r;
  slot *s = &v->slots[i % v->slot_count];
  const dcr__chunk *c = &r->chunks[i];
  const dcr__entry *e = &r->man.entries[c->tensor];
  size_t bytes = chunk_bytes(r, c);
  const uint8_t *p = NULL;
  dcr__detail_init(&s->detail);
  s->rc = DCR_OK;
  if (!dcr__selected(r, c->tensor)) return;
  int rc = dcr__chunk_payload(r, c, &s->buf, &s->cap, &p, &s->detail);
  if (!rc)
    rc = dcr__decode_chunk(&s->dec, c, p + DCR__RECORD_SIZE,
                           (size_t)c->payload_length - DCR__RECORD_SIZE, e->target.dtype,
                           bytes / dcr_dtype_size(e->target.dtype),
                           NULL, &s->detail);
  if (rc) {
    dcr__detail_at(&s->detail, "CHNK", c->offset);
    dcr__detail_tensor(&s->detail, c->tensor, e->name, e->name_length);
    dcr__detail_chunk(&s->detail, c->chunk);
    dcr__detail_file(&s->detail, r->path);
  }
  s->rc = rc;
}

static void free_slots(verifier *v) {
  for (size_t i = 0; v->slots && i < v->slot_count; i++) {
    dcr__chunk_decoder_free(&v->slots[i].dec);
    free(v->slots[i].buf);
  }
  free(v->slots);
}

/* Decoders for the largest chunk carried, not for chunk_size: a small bundle may
 * declare chunks of up to 1 GiB. */
static int make_slots(verifier *v, size_t count, size_t largest) {
  v->slot_count = count;
  v->slots = calloc(count, sizeof *v->slots);
  if (!v->slots) return DCR_E_NOMEM;
  for (size_t i = 0; i < count; i++) {
    if (dcr__chunk_decoder_init(&v->slots[i].dec, largest, v->r->minor)) return DCR_E_NOMEM;
    v->slots[i].dec.cancel = v->r->cancel;
  }
  return DCR_OK;
}

/* Takes chunk i (dcr__take_fn): reports its problem, if any. A non-zero return
 * stops the stream: the callback asked to, or an I/O or memory failure, which is
 * not a property of this chunk. */
static int take_chunk(void *ctx, size_t i, dcr_detail *d) {
  verifier *v = ctx;
  const slot *s = &v->slots[i % v->slot_count];
  if (v->r->progress) {
    v->done += v->r->chunks[i].payload_length;
    v->r->progress(v->r->progress_opaque, v->done, v->total);
  }
  if (!s->rc) return DCR_OK;
  /* an interrupt is no problem of this chunk's: the caller reports it */
  if (s->rc == DCR_E_INTERRUPTED) return dcr__fail(d, s->rc, "interrupted");
  if (!v->first) v->first = s->rc;
  int stop = (v->fn && v->fn(v->opaque, &s->detail)) || s->rc == DCR_E_IO || s->rc == DCR_E_NOMEM;
  return stop ? s->rc : DCR_OK;
}

void dcr_reader_set_threads(dcr_reader *r, unsigned threads) { r->threads = threads; }

void dcr_reader_set_cancel(dcr_reader *r, const volatile int *cancel) { r->cancel = cancel; }

void dcr_reader_set_progress(dcr_reader *r, dcr_progress_fn progress, void *opaque) {
  r->progress = progress;
  r->progress_opaque = opaque;
}

int dcr_reader_verify_all(dcr_reader *r, dcr_problem_fn fn, void *opaque) {
  verifier v = {.r = r, .fn = fn, .opaque = opaque};
  dcr__pool *pool = NULL;
  /* no more threads than chunks: a small bundle starts none */
  unsigned threads = r->threads ? r->threads : dcr_default_threads();
  if (threads > r->chunk_count) threads = r->chunk_count ? (unsigned)r->chunk_count : 1;
  /* two slots per thread (one without workers), each what the chunks need */
  const dcr__chunk *neediest;
  size_t largest;
  uint64_t per_slot = dcr__decode_bytes(r, &largest, &neediest);
  threads = dcr__threads_within(threads, 2 * per_slot, r->lim.max_memory);
  uint64_t payload = 0;
  for (uint64_t i = 0; i < r->chunk_count; i++) payload += r->chunks[i].payload_length;
  threads = dcr__threads_for_jobs(threads, r->chunk_count, 8 * payload); /* ~8x as it decodes */
  dcr_detail d;
  dcr__detail_init(&d);
  int rc = dcr__decode_fits(r, per_slot, neediest, largest, "checking the chunks", &d);
  if (!rc && (dcr__pool_create(&pool, threads) || make_slots(&v, dcr__pool_window(pool), largest))) {
    rc = dcr__fail(&d, DCR_E_NOMEM, "cannot allocate decoders");
    dcr__detail_file(&d, r->path);
  }
  if (rc) {
    if (fn) fn(opaque, &d);
    free_slots(&v);
    dcr__pool_free(pool);
    return rc;
  }
  for (uint64_t i = 0; r->progress && i < r->chunk_count; i++) v.total += r->chunks[i].payload_length;
  rc = dcr__pool_stream(pool, (size_t)r->chunk_count, verify_job, take_chunk, &v, r->cancel, &d);
  free_slots(&v);
  dcr__pool_free(pool);
  if (rc == DCR_E_INTERRUPTED) {
    dcr__detail_file(&d, r->path);
    if (fn) fn(opaque, &d);
    return rc;
  }
  return v.first;
}

/* The first problem only. */
static int keep_first(void *opaque, const dcr_detail *d) {
  *(dcr_detail *)opaque = *d;
  return 1;
}

int dcr_reader_verify(dcr_reader *r, dcr_detail *d) {
  dcr_detail scratch;
  if (!d) d = &scratch;
  dcr__detail_init(d);
  return dcr_reader_verify_all(r, keep_first, d);
}
