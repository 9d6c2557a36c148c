/*
 * state_id.c - dcr_checkpoint_state_id: the tensor hashes and the state id of a
 * checkpoint file (SPEC.md §7).
 *
 * Each tensor is cut into ranges of whole pieces; workers digest the pieces of a
 * range each (as the encoder does for its chunks), and the calling thread feeds the
 * digests to the tensor's hash in order, so the result is the same whatever the
 * number of threads. Memory is one range per slot, whatever the checkpoint's size.
 */
#include <stdlib.h>

#include "../format/checkpoint.h"
#include "codec.h"

#define RANGE ((size_t)4 << 20) /* bytes of one job: a multiple of DCR__PIECE */

typedef struct {
  size_t tensor;
  uint64_t at;  /* in the tensor */
  size_t bytes; /* 0 only for an empty tensor */
} job;

typedef struct {
  uint8_t *buffer; /* the view's read buffer */
  uint8_t *pieces;
  size_t count;
  int rc;
  dcr_detail detail;
} slot;

typedef struct {
  dcr_checkpoint *c;
  job *jobs;
  size_t job_count;
  slot *slots;
  size_t slot_count;
  XXH3_state_t hash; /* of the tensor being taken */
  uint64_t done;     /* tensor bytes taken, for progress */
} hasher;

static void hash_job(void *ctx, size_t j, unsigned worker) {
  (void)worker;
  hasher *h = ctx;
  const job *jb = &h->jobs[j];
  slot *s = &h->slots[j % h->slot_count];
  const dcr__tensor *t = &h->c->ck.tensors[jb->tensor];
  dcr__view v;
  dcr__detail_init(&s->detail);
  s->count = 0;
  s->rc = dcr__view_open(&v, h->c->fd, h->c->ck.prefix_length + t->desc.offset + jb->at,
                         jb->bytes, s->buffer, &s->detail);
  if (s->rc) return;
  s->count = dcr__pieces(v.data, jb->bytes, s->pieces);
  dcr__view_close(&v);
}

/* A tensor's hash sees its piece digests in order (dcr__take_fn). */
static int take_job(void *ctx, size_t j, dcr_detail *d) {
  hasher *h = ctx;
  const job *jb = &h->jobs[j];
  const slot *s = &h->slots[j % h->slot_count];
  dcr__tensor *t = &h->c->ck.tensors[jb->tensor];
  if (s->rc) {
    *d = s->detail;
    dcr__detail_tensor(d, jb->tensor, t->name, t->name_length);
    return s->rc;
  }
  if (jb->at == 0) XXH3_128bits_reset(&h->hash);
  XXH3_128bits_update(&h->hash, s->pieces, 16 * s->count);
  if (jb->at + jb->bytes == t->desc.byte_length) dcr__digest128(&h->hash, t->desc.hash);
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
  for (size_t i = 0; i < ck->count; i++) {
    uint64_t length = ck->tensors[i].desc.byte_length, at = 0;
    do {
      size_t bytes = length - at < RANGE ? (size_t)(length - at) : RANGE;
      h->jobs[h->job_count++] = (job){i, at, bytes};
      at += bytes;
    } while (at < length);
  }
  return DCR_OK;
}

static int make_slots(hasher *h, size_t count, dcr_detail *d) {
  h->slot_count = count;
  if (!(h->slots = calloc(count, sizeof *h->slots)))
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate slots");
  for (size_t i = 0; i < count; i++)
    if (!(h->slots[i].buffer = malloc(RANGE)) ||
        !(h->slots[i].pieces = malloc(16 * DCR__PIECES(RANGE))))
      return dcr__fail(d, DCR_E_NOMEM, "cannot allocate read buffers");
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
  hasher h = {.c = c};
  XXH3_INITSTATE(&h.hash);
  dcr__pool *pool = NULL;
  int rc = check_names(&c->ck, d);
  if (!rc) rc = build_jobs(&h, d);
  if (!rc && dcr__pool_create(&pool, threads)) rc = dcr__fail(d, DCR_E_NOMEM, "no threads");
  if (!rc) rc = make_slots(&h, dcr__pool_window(pool), d);
  if (!rc) rc = dcr__pool_stream(pool, h.job_count, hash_job, take_job, &h, c->cancel, d);
  if (rc == DCR_E_INTERRUPTED) dcr__detail_file(d, c->path);
  dcr__pool_free(pool);
  for (size_t i = 0; h.slots && i < h.slot_count; i++) {
    free(h.slots[i].buffer);
    free(h.slots[i].pieces);
  }
  free(h.slots);
  free(h.jobs);
  if (rc) return dcr__detail_file(d, c->path), rc;
  XXH3_state_t st;
  dcr__state_begin(&st);
  for (size_t i = 0; i < c->ck.count; i++)
    dcr__state_add(&st, c->ck.tensors[i].name, (uint16_t)c->ck.tensors[i].name_length,
                   &c->ck.tensors[i].desc);
  dcr__state_end(&st, c->state);
  c->hashed = 1;
  memcpy(out, c->state, 16);
  return DCR_OK;
}
