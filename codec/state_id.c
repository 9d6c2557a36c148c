/*
 * state_id.c - dcr_checkpoint_state_id: the tensor hashes and the state id of a
 * checkpoint file (SPEC.md §7).
 *
 * Each tensor is cut into ranges of whole pieces; workers digest the pieces of a
 * range each (as the encoder does for its chunks), and the calling thread feeds the
 * digests to the tensor's hash in order, so the result is the same whatever the
 * number of threads. Memory is one range per slot, whatever the checkpoint's size.
 * Small tensors go several to a job: a job costs a wake-up of the pool, and a
 * million tensors of a few bytes, one job each, took 24 s on 2 threads for 6 s on
 * one.
 *
 * The same machinery gives the SHA-256 tensor digests that signatures carry
 * (SPEC.md §20.2): the same pieces, hashed with SHA-256 instead of XXH3-128.
 */
#include <stdlib.h>

#include "../format/checkpoint.h"
#include "codec.h"

#define RANGE ((size_t)4 << 20) /* bytes of one job: a multiple of DCR__PIECE */

typedef struct {
  size_t tensor;  /* the first */
  size_t tensors; /* 1, or several whole small tensors that fit one range */
  uint64_t at;    /* in the tensor, when it is one */
  size_t bytes;   /* in all: 0 only for empty tensors */
} job;

typedef struct {
  uint8_t *buffer; /* the view's read buffer */
  uint8_t *pieces;
  size_t count;
  int rc;
  size_t failed; /* the tensor that failed */
  dcr_detail detail;
  dcr__sha256 sha; /* SHA-256 digests: this slot's context */
} slot;

typedef struct {
  dcr_checkpoint *c;
  job *jobs;
  size_t job_count;
  slot *slots;
  size_t slot_count;
  int sha256;        /* 0: XXH3-128 tensor hashes (§7); 1: SHA-256 digests (§20.2) */
  size_t size;       /* bytes of one piece digest: 16 or 32 */
  uint8_t *out;      /* sha256: the tensors' digests, 32 bytes each */
  XXH3_state_t hash; /* of the tensor being taken */
  dcr__sha256 sha;   /* of the tensor being taken, SHA-256 digests */
  uint64_t done;     /* tensor bytes taken, for progress */
} hasher;

static void hash_job(void *ctx, size_t j, unsigned worker) {
  (void)worker;
  hasher *h = ctx;
  const job *jb = &h->jobs[j];
  slot *s = &h->slots[j % h->slot_count];
  dcr__detail_init(&s->detail);
  s->count = 0;
  for (size_t k = jb->tensor; k < jb->tensor + jb->tensors; k++) {
    const dcr__tensor *t = &h->c->ck.tensors[k];
    size_t bytes = jb->tensors > 1 ? (size_t)t->desc.byte_length : jb->bytes;
    dcr__view v;
    s->rc = dcr__checkpoint_view(&v, &h->c->ck, h->c->ck.prefix_length + t->desc.offset + jb->at, bytes,
                           s->buffer, &s->detail);
    if (s->rc) {
      s->failed = k;
      return;
    }
    uint8_t *at = s->pieces + h->size * s->count;
    s->count += h->sha256 ? dcr__pieces_sha256(&s->sha, v.data, bytes, at) : dcr__pieces(v.data, bytes, at);
    dcr__view_close(&v);
  }
}

/* A tensor's hash sees its piece digests in order (dcr__take_fn). */
static int take_job(void *ctx, size_t j, dcr_detail *d) {
  hasher *h = ctx;
  const job *jb = &h->jobs[j];
  const slot *s = &h->slots[j % h->slot_count];
  if (s->rc) {
    const dcr__tensor *t = &h->c->ck.tensors[s->failed];
    *d = s->detail;
    dcr__detail_tensor(d, s->failed, t->name, t->name_length);
    return s->rc;
  }
  const uint8_t *pieces = s->pieces;
  for (size_t k = jb->tensor; k < jb->tensor + jb->tensors; k++) {
    dcr__tensor *t = &h->c->ck.tensors[k];
    size_t bytes = jb->tensors > 1 ? (size_t)t->desc.byte_length : jb->bytes;
    size_t n = h->size * DCR__PIECES(bytes);
    int last = jb->at + bytes == t->desc.byte_length;
    if (h->sha256) { /* the context is fresh at each tensor's start: final resets it */
      dcr__sha256_update(&h->sha, pieces, n);
      if (last) dcr__sha256_final(&h->sha, h->out + 32 * k);
    } else {
      if (jb->at == 0) XXH3_128bits_reset(&h->hash);
      XXH3_128bits_update(&h->hash, pieces, n);
      if (last) dcr__digest128(&h->hash, t->desc.hash);
    }
    pieces += n;
  }
  h->done += jb->bytes;
  if (h->c->progress) h->c->progress(h->c->progress_opaque, h->done, h->c->ck.file_size - h->c->ck.prefix_length);
  return DCR_OK;
}

static int build_jobs(hasher *h, dcr_detail *d) {
  const dcr__checkpoint *ck = &h->c->ck;
  size_t count = 0;
  for (size_t i = 0; i < ck->count; i++) {
    uint64_t n = (ck->tensors[i].desc.byte_length + RANGE - 1) / RANGE;
    if (n > SIZE_MAX / 2 - count) return dcr__fail(d, DCR_E_LIMIT, "too many ranges to hash");
    count += n ? (size_t)n : 1;
  }
  if (!(h->jobs = malloc((count + 1) * sizeof *h->jobs)))
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate %zu hash jobs", count);
  size_t batch_pieces = 0; /* of the last job, empty tensors counted as one */
  for (size_t i = 0; i < ck->count; i++) {
    uint64_t length = ck->tensors[i].desc.byte_length, at = 0;
    size_t pieces = length ? DCR__PIECES(length) : 1;
    job *last = h->job_count ? &h->jobs[h->job_count - 1] : NULL;
    /* a small tensor joins the job before it when that holds whole small tensors
     * and the range and the pieces (so the batch's length) still fit */
    if (last && last->at == 0 && length < RANGE && last->bytes + length <= RANGE &&
        (last->tensors > 1 || last->bytes < RANGE) && batch_pieces + pieces <= DCR__PIECES(RANGE)) {
      last->tensors++;
      last->bytes += (size_t)length;
      batch_pieces += pieces;
      continue;
    }
    batch_pieces = pieces;
    do {
      size_t bytes = length - at < RANGE ? (size_t)(length - at) : RANGE;
      h->jobs[h->job_count++] = (job){i, 1, at, bytes};
      at += bytes;
    } while (at < length);
  }
  return DCR_OK;
}

static int make_slots(hasher *h, size_t count, dcr_detail *d) {
  h->slot_count = count;
  if (!(h->slots = calloc(count, sizeof *h->slots)))
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate slots");
  for (size_t i = 0; i < count; i++) {
    if (!(h->slots[i].buffer = malloc(RANGE)) ||
        !(h->slots[i].pieces = malloc(h->size * DCR__PIECES(RANGE))))
      return dcr__fail(d, DCR_E_NOMEM, "cannot allocate read buffers");
    int rc = h->sha256 ? dcr__sha256_init(&h->slots[i].sha, d) : DCR_OK;
    if (rc) return rc;
  }
  return DCR_OK;
}

/* §7: the tensors are in name order already; each name is written as a u16. */
static int check_names(const dcr__checkpoint *ck, dcr_detail *d) {
  for (size_t i = 0; i < ck->count; i++)
    if (ck->tensors[i].name_length > UINT16_MAX)
      return (dcr__detail_tensor(d, i, ck->tensors[i].name, ck->tensors[i].name_length),
              dcr__fail(d, DCR_E_LIMIT, "a %zu-byte name does not fit a state id",
                        ck->tensors[i].name_length));
  return DCR_OK;
}

/* Runs the jobs of every tensor of h->c: XXH3-128 tensor hashes into the
 * descriptors, or SHA-256 digests into h->out. */
static int hash_tensors(hasher *h, unsigned threads, dcr_detail *d) {
  dcr_checkpoint *c = h->c;
  XXH3_INITSTATE(&h->hash);
  dcr__pool *pool = NULL;
  int rc = build_jobs(h, d);
  if (!rc && dcr__pool_create(&pool, threads)) rc = dcr__fail(d, DCR_E_NOMEM, "no threads");
  if (!rc) rc = make_slots(h, dcr__pool_window(pool), d);
  if (!rc) rc = dcr__pool_stream(pool, h->job_count, hash_job, take_job, h, c->cancel, d);
  if (rc == DCR_E_INTERRUPTED) dcr__detail_file(d, c->path);
  dcr__pool_free(pool);
  for (size_t i = 0; h->slots && i < h->slot_count; i++) {
    free(h->slots[i].buffer);
    free(h->slots[i].pieces);
    dcr__sha256_free(&h->slots[i].sha);
  }
  free(h->slots);
  free(h->jobs);
  if (rc) dcr__detail_file(d, c->path);
  return rc;
}

void dcr_checkpoint_set_cancel(dcr_checkpoint *c, const volatile int *cancel) { c->cancel = cancel; }

void dcr_checkpoint_set_progress(dcr_checkpoint *c, dcr_progress_fn progress, void *opaque) {
  c->progress = progress;
  c->progress_opaque = opaque;
}

int dcr_checkpoint_state_id(dcr_checkpoint *c, unsigned threads, uint8_t out[16],
                            dcr_detail *d) {
  dcr_detail scratch;
  if (!d) d = &scratch;
  dcr__detail_init(d);
  if (c->hashed) return memcpy(out, c->state, 16), DCR_OK;
  hasher h = {.c = c, .size = 16};
  int rc = check_names(&c->ck, d);
  if (!rc) rc = hash_tensors(&h, threads, d);
  if (rc) return rc;
  XXH3_state_t st;
  dcr__state_begin(&st);
  for (size_t i = 0; i < c->ck.count; i++)
    if (!c->ck.tensors[i].raw_member) /* a set's state id leaves raw members out (§2.3) */
      dcr__state_add(&st, c->ck.tensors[i].name, (uint16_t)c->ck.tensors[i].name_length,
                   &c->ck.tensors[i].desc);
  dcr__state_end(&st, c->state);
  c->hashed = 1;
  memcpy(out, c->state, 16);
  return DCR_OK;
}

int dcr__checkpoint_sha256(dcr_checkpoint *c, unsigned threads, uint8_t *out, dcr_detail *d) {
  dcr_detail scratch;
  if (!d) d = &scratch;
  dcr__detail_init(d);
  hasher h = {.c = c, .sha256 = 1, .size = 32, .out = out};
  int rc = dcr__sha256_init(&h.sha, d);
  if (!rc) rc = hash_tensors(&h, threads, d);
  dcr__sha256_free(&h.sha);
  return rc;
}
