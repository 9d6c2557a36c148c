/*
 * pass.c - one pass over a bundle's target chunks (SPEC.md §10.1 steps 3-4), the
 * engine under every apply: the copy apply (apply.c), and the memory and in-place
 * refit (refit/). Drivers differ only in where a chunk's input bytes come from
 * and what becomes of its result; the checks, their order and the tensor hashes
 * live here once.
 *
 * Jobs are target chunks in data-region order. Workers fetch a chunk's input,
 * check and apply its CHNK by R-APL-2 into a slot buffer and hand the result to
 * the driver's emit hook; the calling thread takes results in job order, hashes
 * them (§7: tensor hashes need bytes in order) and calls the driver's take hook.
 */
#include <stdio.h>
#include <stdlib.h>

#include "codec.h"

#define NO_CHUNK UINT32_MAX

typedef struct {
  dcr__view input;
  uint8_t *zeros, *out, *scratch;    /* zeros: also the buffer input views read into */
  uint8_t *input_pieces, *out_pieces; /* piece digests (§7) */
  size_t pieces, scratch_capacity;
  dcr__chunk_decoder dec;
  dcr__pass_chunk chunk;
  int rc;
  dcr_detail detail;
} slot;

struct dcr__pass {
  dcr__pass_spec spec;
  dcr__job *jobs;
  size_t job_count;
  dcr__pool *pool;
  slot *slots;
  size_t slot_count;
  uint64_t slot_bytes; /* what each slot touches at most */
  XXH3_state_t base_hash, target_hash;
  uint32_t current; /* the entry being hashed */
  uint64_t done, total; /* bytes taken, for progress */
};

static void name_entry(dcr_detail *d, const dcr__manifest *m, uint64_t i) {
  dcr__detail_tensor(d, i, m->entries[i].name, m->entries[i].name_length);
}

int dcr__file_input(void *input_ctx, uint32_t entry, uint64_t at, size_t bytes, dcr__view *view,
                    uint8_t *fallback, dcr_detail *d) {
  const dcr__file *f = input_ctx;
  size_t step = f->cancel ? DCR__WATCH_BYTES : bytes, done = 0;
  int rc = DCR_OK;
  do { /* a 1 GiB read is seconds on a slow disk */
    size_t n = bytes - done < step ? bytes - done : step;
    if (done && *f->cancel) rc = dcr__fail(d, DCR_E_INTERRUPTED, "interrupted");
    else rc = dcr__checkpoint_view(view, f->ck, f->offsets[entry] + at + done, n, fallback + done, d);
    done += n;
  } while (!rc && done < bytes);
  *view = (dcr__view){.data = fallback};
  if (rc && rc != DCR_E_INTERRUPTED && d && !d->file[0]) dcr__detail_file(d, f->path);
  return rc;
}

/* How many of a chunk's input bytes the pass reads (the rest are zeros): all of
 * them from a target, else those coded against the base (§6.5 for resized ones). */
static size_t input_span(const dcr__pass_spec *s, const dcr__entry *e, uint64_t at, size_t bytes) {
  return s->as_target ? bytes : (size_t)dcr__entry_base_span(e, at, bytes);
}

/* §6.3: the input must have exactly the manifest's base tensors (or, taken as the
 * target, its target tensors). */
int dcr__match_checkpoint(const dcr__manifest *m, const dcr__checkpoint *ck, int as_target,
                          uint64_t *offsets, dcr_detail *d) {
  unsigned side = as_target ? DCR__HAS_TARGET : DCR__HAS_BASE;
  size_t j = 0;
  for (uint64_t i = 0; i < m->entry_count; i++) {
    const dcr__entry *e = &m->entries[i];
    if (!(e->presence & side)) continue;
    const dcr__desc *want = as_target ? &e->target : &e->base;
    const dcr__tensor *t = j < ck->count ? &ck->tensors[j] : NULL;
    int c = t ? dcr__name_cmp(e->name, e->name_length, t->name, t->name_length) : -1;
    name_entry(d, m, i);
    if (c < 0) return dcr__fail(d, DCR_E_BASE_MISMATCH, "base has no such tensor");
    if (c > 0) {
      if (d) d->tensor = DCR_NONE, snprintf(d->tensor_name, sizeof d->tensor_name, "%s", t->name);
      return dcr__fail(d, DCR_E_BASE_MISMATCH, "base has a tensor the bundle does not expect");
    }
    if (t->raw_member != !!(e->raw & side))
      return dcr__fail(d, DCR_E_BASE_MISMATCH, "%s", t->raw_member
                       ? "a file of the input set is a tensor of a shard in the bundle's"
                       : "a tensor of the input set is a file (a raw member) in the bundle's");
    if (t->desc.dtype != want->dtype || t->desc.rank != want->rank ||
        (want->rank && memcmp(t->desc.dims, want->dims, want->rank * sizeof(uint64_t))))
      return dcr__fail(d, DCR_E_BASE_MISMATCH, "base tensor is %s of rank %u; the bundle "
                       "expects %s of rank %u", dcr_dtype_name(t->desc.dtype), t->desc.rank,
                       dcr_dtype_name(want->dtype), want->rank);
    offsets[i] = ck->prefix_length + t->desc.offset;
    if (d) dcr__detail_init(d);
    j++;
  }
  if (j != ck->count) {
    if (d) snprintf(d->tensor_name, sizeof d->tensor_name, "%s", ck->tensors[j].name);
    return dcr__fail(d, DCR_E_BASE_MISMATCH, "base has a tensor the bundle does not expect");
  }
  return DCR_OK;
}

/* A target tensor's place in the file (plain qsort: qsort_r's argument order is
 * not the same on every system). */
typedef struct {
  uint64_t offset, byte_length;
  uint32_t entry;
} placed;

static int by_target_offset(const void *x, const void *y) {
  const placed *a = x, *b = y;
  if (a->offset != b->offset) return a->offset < b->offset ? -1 : 1;
  if (a->byte_length != b->byte_length) return a->byte_length < b->byte_length ? -1 : 1;
  return (a->entry > b->entry) - (a->entry < b->entry); /* §10.1: empty tensors at one
                                                          offset by name: entry order */
}

/* Every target chunk in file order, each with its CHNK if it has one; entries with
 * no chunks get a marker so that their (empty) hash is still checked. Changed-only
 * passes keep the changed chunks alone. */
static int build_jobs(dcr__pass *p, dcr_detail *d) {
  const dcr_reader *r = p->spec.r;
  const dcr__manifest *m = &r->man;
  placed *order = malloc((size_t)m->entry_count * sizeof *order + 1);
  uint64_t *first = malloc((size_t)m->entry_count * sizeof *first + 1);
  size_t n = 0, count = 0;
  if (!order || !first) {
    free(order), free(first);
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate the job list");
  }
  for (uint64_t i = 0; i < m->entry_count; i++) {
    first[i] = DCR__NO_RECORD;
    if ((m->entries[i].presence & DCR__HAS_TARGET) && dcr__selected(r, i) &&
        !(p->spec.skip && p->spec.skip[i])) {
      order[n++] = (placed){m->entries[i].target.offset, m->entries[i].target.byte_length, (uint32_t)i};
      uint64_t c = dcr__chunk_count(m->entries[i].target.byte_length, m->chunk_size);
      count += c ? (size_t)c : 1;
    }
  }
  for (uint64_t k = p->spec.as_target && !p->spec.changed_only ? 0 : r->chunk_count; k-- > 0;)
    first[r->chunks[k].tensor] = k;
  qsort(order, n, sizeof *order, by_target_offset);
  p->jobs = malloc(count * sizeof *p->jobs + 1);
  if (!p->jobs) {
    free(order), free(first);
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate the job list");
  }
  for (size_t i = 0; i < n; i++) {
    uint32_t e = order[i].entry;
    uint64_t c = dcr__chunk_count(m->entries[e].target.byte_length, m->chunk_size);
    uint64_t rec = first[e];
    if (!c) p->jobs[p->job_count++] = (dcr__job){e, NO_CHUNK, DCR__NO_RECORD};
    for (uint64_t k = 0; k < c; k++) {
      int hit = rec < r->chunk_count && r->chunks[rec].tensor == e && r->chunks[rec].chunk == k;
      p->jobs[p->job_count++] = (dcr__job){e, (uint32_t)k, hit ? rec++ : DCR__NO_RECORD};
    }
  }
  free(order);
  free(first);
  if (p->spec.changed_only) { /* the changed chunks, still in file order */
    size_t kept = 0;
    for (size_t j = 0; j < p->job_count; j++)
      if (p->jobs[j].record != DCR__NO_RECORD) p->jobs[kept++] = p->jobs[j];
    p->job_count = kept;
  }
  return DCR_OK;
}

/* The piece digests (§7) of `bytes` at `from` into `digests`, copying them to `to`
 * as well unless it is NULL, DCR__WATCH_BYTES at a time with a look at the cancel
 * flag in between; *pieces gets their count. */
static int digest(const dcr__pass *p, uint8_t *to, const uint8_t *from, size_t bytes,
                  uint8_t *digests, size_t *pieces, dcr_detail *d) {
  *pieces = 0;
  for (size_t at = 0; at < bytes; at += DCR__WATCH_BYTES) {
    if (at && p->spec.cancel && *p->spec.cancel)
      return dcr__fail(d, DCR_E_INTERRUPTED, "interrupted");
    size_t n = bytes - at < DCR__WATCH_BYTES ? bytes - at : DCR__WATCH_BYTES;
    uint8_t *out = digests + 16 * (at / DCR__PIECE);
    *pieces += to ? dcr__pieces_copy(to + at, from + at, n, out) : dcr__pieces(from + at, n, out);
  }
  return DCR_OK;
}

/* §10.1 step 3 (R-APL-2) for one changed chunk: base_check, then decode and apply
 * (R-ENC-3), then target_check. A chunk whose base bytes already give target_check
 * is not left alone: a changed chunk's base cannot, and a retried apply is
 * recognized as a whole by the target's state id (§10.2). */
static int apply_record(dcr__pass *p, slot *s, const dcr__chunk *c, int dtype) {
  int check = p->spec.verify != DCR_VERIFY_NONE, digests = check || !p->spec.changed_only;
  /* A ranked chunk (§9.4, §9.5) is applied whole, like a dense one: its walk reads
   * every base element anyway, so the copy made as the base is hashed is walked in
   * place, once, rather than copied and walked a piece at a time. */
  int ranked = dcr__enc_ranked(c->encoding), sparse = dcr__enc_sparse(c->encoding) && !ranked;
  size_t bytes = s->chunk.bytes, n = bytes / dcr_dtype_size(dtype);
  const uint8_t *payload, *planes = NULL;
  int rc = dcr__chunk_payload(p->spec.r, c, &s->scratch, &s->scratch_capacity, &payload,
                              &s->detail);
  if (rc) return rc;
  /* base_check before a byte is decoded: a wrong base costs a hash of the chunk,
   * not the decode of up to 1 GiB of values. A dense or ranked chunk is copied as
   * it is hashed; a sparse one is then copied, patched and hashed piece by piece. */
  s->pieces = 0;
  if (digests) rc = digest(p, sparse ? NULL : s->out, s->chunk.input, bytes, s->input_pieces,
                           &s->pieces, &s->detail);
  else if (!sparse) memcpy(s->out, s->chunk.input, bytes);
  if (rc) return rc;
  int at_base = !check ||
                DCR__CHECKSUM_OK(dcr__pieces_check(s->input_pieces, s->pieces) == c->base_check);
  if (!at_base && !p->spec.mixed)
    return dcr__fail(&s->detail, DCR_E_BASE_MISMATCH, "chunk's base bytes do not match the "
                     "bundle's base checksum");
  if ((rc = dcr__chunk_streams(&s->dec, c, payload + DCR__RECORD_SIZE,
                               (size_t)c->payload_length - DCR__RECORD_SIZE, dtype, n, &planes,
                               &s->detail)))
    return rc;
  if (!at_base) { /* a salvage: this chunk may be its target already */
    if (!DCR__CHECKSUM_OK(dcr__pieces_check(s->input_pieces, s->pieces) == c->target_check))
      return dcr__fail(&s->detail, DCR_E_BASE_MISMATCH, "chunk's bytes match neither the "
                       "bundle's base nor its target: torn by the crash? Restore the file");
    return DCR_OK; /* the input is the result */
  }
  if (p->spec.keep && ranked) {
    uint32_t *pos = NULL;
    uint8_t *values = NULL;
    p->spec.keep(p->spec.ctx, s->chunk.job, &pos, &values);
    dcr__classed_record(s->dec.cls, pos, values);
  }
  if (sparse) {
    rc = dcr__apply_sparse_pieces(&s->dec, c, planes, dtype, n, s->chunk.input, s->out, NULL,
                                  s->out_pieces, &s->detail);
    s->pieces = DCR__PIECES(bytes);
  } else {
    size_t pieces;
    rc = dcr__apply_streams(&s->dec, c, planes, dtype, n, s->out, &s->detail);
    if (!rc && digests) rc = digest(p, NULL, s->out, bytes, s->out_pieces, &pieces, &s->detail);
  }
  if (rc) return rc;
  if (check && !DCR__CHECKSUM_OK(dcr__pieces_check(s->out_pieces, s->pieces) == c->target_check))
    return dcr__fail(&s->detail, DCR_E_TARGET_MISMATCH, "applied chunk does not match the "
                     "bundle's target checksum");
  s->chunk.result = s->out;
  s->chunk.result_pieces = s->out_pieces;
  return DCR_OK;
}

/* A changed-only pass over an input taken to be the target: each changed chunk's
 * bytes must give its target_check, and nothing is applied. */
static int check_as_target(const dcr_reader *r, slot *s, const dcr__chunk *c) {
  int rc = dcr__chunk_checks(r, c, &s->detail);
  if (rc) return rc;
  if (!DCR__CHECKSUM_OK(dcr__pieces_check(s->input_pieces, s->pieces) == c->target_check))
    return dcr__fail(&s->detail, DCR_E_BASE_MISMATCH, "chunk's bytes match neither the "
                     "bundle's base nor its target");
  return DCR_OK;
}

static void run_job(void *ctx, size_t j, unsigned worker) {
  (void)worker;
  dcr__pass *p = ctx;
  const dcr__job *jb = &p->jobs[j];
  slot *s = &p->slots[j % p->slot_count];
  const dcr__manifest *m = &p->spec.r->man;
  dcr__detail_init(&s->detail);
  s->rc = DCR_OK;
  s->pieces = 0;
  s->chunk = (dcr__pass_chunk){.job = jb, .slot = j % p->slot_count};
  if (jb->chunk == NO_CHUNK) return;
  const dcr__entry *e = &m->entries[jb->entry];
  const dcr__chunk *c = jb->record != DCR__NO_RECORD ? &p->spec.r->chunks[jb->record] : NULL;
  s->chunk.at = (uint64_t)jb->chunk * m->chunk_size;
  s->chunk.bytes = dcr__chunk_bytes(m, e, jb->chunk);
  int rc = DCR_OK, hash_input = (!c || p->spec.as_target) &&
      (p->spec.verify != DCR_VERIFY_NONE || !p->spec.changed_only || p->spec.as_target);
  size_t span = input_span(&p->spec, e, s->chunk.at, s->chunk.bytes);
  if (span) {
    rc = p->spec.input(p->spec.input_ctx, jb->entry, s->chunk.at, span, &s->input, s->zeros,
                       &s->detail);
    if (span < s->chunk.bytes) { /* a resized tensor's end (§6.5) */
      memset(s->zeros + span, 0, s->chunk.bytes - span);
      s->input = (dcr__view){.data = s->zeros};
    }
  } else if (!c && p->spec.lazy_zeros) {
    /* zeros from nowhere: a 4 GiB tensor of them costs no memory and no writes */
    s->input = (dcr__view){0};
    s->chunk.zero = 1;
    if (hash_input) s->pieces = dcr__pieces_zero(s->chunk.bytes, s->input_pieces);
    hash_input = 0;
  } else {
    memset(s->zeros, 0, s->chunk.bytes);
    s->input = (dcr__view){.data = s->zeros};
  }
  s->chunk.input = s->chunk.result = s->input.data;
  s->chunk.result_pieces = s->input_pieces;
  /* A changed chunk's input is hashed as it is copied (apply_record). The input is
   * the view's own buffer (dcr__checkpoint_view reads, never maps), so what is hashed
   * here is exactly what the hooks write. */
  if (!rc && hash_input)
    rc = digest(p, NULL, s->input.data, s->chunk.bytes, s->input_pieces, &s->pieces, &s->detail);
  if (!rc && c)
    rc = p->spec.as_target ? check_as_target(p->spec.r, s, c)
                           : apply_record(p, s, c, e->target.dtype);
  if (!rc && p->spec.emit) rc = p->spec.emit(p->spec.ctx, &s->chunk, &s->detail);
  if (rc) {
    dcr__detail_tensor(&s->detail, jb->entry, e->name, e->name_length);
    dcr__detail_chunk(&s->detail, jb->chunk);
    /* A wrong base is the input's fault, and the input is the file reported: the
     * bundle's section and offset would point into another file. */
    if (c && !s->detail.section[0] && rc != DCR_E_BASE_MISMATCH)
      dcr__detail_at(&s->detail, "CHNK", c->offset);
  }
  s->rc = rc;
}

/* After an entry's last chunk: its hashes (§10.1 step 3). */
static int end_entry(dcr__pass *p, uint32_t i, dcr_detail *d) {
  const dcr__manifest *m = &p->spec.r->man;
  const dcr__entry *e = &m->entries[i];
  uint8_t h[16];
  if (!p->spec.as_target && !p->spec.mixed && dcr__entry_delta_coded(e)) {
    dcr__digest128(&p->base_hash, h);
    if (!DCR__CHECKSUM_OK(memcmp(h, e->base.hash, 16) == 0))
      return name_entry(d, m, i),
             dcr__fail(d, DCR_E_BASE_MISMATCH, "base tensor's hash differs from the bundle's");
  }
  dcr__digest128(&p->target_hash, h);
  if (!DCR__CHECKSUM_OK(memcmp(h, e->target.hash, 16) == 0))
    return name_entry(d, m, i),
           dcr__fail(d, p->spec.as_target ? DCR_E_BASE_MISMATCH : DCR_E_TARGET_MISMATCH,
                     p->spec.as_target ? "tensor's hash is neither the base's nor the target's"
                                       : "rebuilt tensor's hash differs from the bundle's "
                                         "target hash");
  return DCR_OK;
}

static int hashing(const dcr__pass *p) {
  return !p->spec.changed_only && p->spec.verify != DCR_VERIFY_NONE;
}

/* Takes job j (dcr__take_fn): the tensor hashes, which must see bytes in order. */
static int take_job(void *ctx, size_t j, dcr_detail *d) {
  dcr__pass *p = ctx;
  const dcr__job *jb = &p->jobs[j];
  slot *s = &p->slots[j % p->slot_count];
  int rc = s->rc;
  if (rc) *d = s->detail;
  if (!rc && hashing(p) && jb->entry != p->current) {
    if (p->current != UINT32_MAX) rc = end_entry(p, p->current, d);
    p->current = jb->entry;
    XXH3_128bits_reset(&p->base_hash);
    XXH3_128bits_reset(&p->target_hash);
  }
  if (!rc && hashing(p)) {
    if (!p->spec.as_target && dcr__entry_delta_coded(&p->spec.r->man.entries[jb->entry]))
      XXH3_128bits_update(&p->base_hash, s->input_pieces, 16 * s->pieces);
    XXH3_128bits_update(&p->target_hash, s->chunk.result_pieces, 16 * s->pieces);
  }
  if (!rc && p->spec.take) rc = p->spec.take(p->spec.ctx, &s->chunk, d);
  p->done += s->chunk.bytes;
  dcr__view_close(&s->input);
  if (!rc && p->spec.progress) p->spec.progress(p->spec.progress_opaque, p->done, p->total);
  return rc;
}

static int make_slots(dcr__pass *p, size_t count, dcr_detail *d) {
  size_t cs = dcr__max_chunk_bytes(&p->spec.r->man);
  p->slot_count = count;
  p->slots = calloc(count, sizeof *p->slots);
  if (!p->slots) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate slots");
  for (size_t i = 0; i < p->slot_count; i++) {
    slot *s = &p->slots[i];
    s->zeros = malloc(cs);
    s->out = malloc(cs);
    s->input_pieces = malloc(16 * DCR__PIECES(cs));
    s->out_pieces = malloc(16 * DCR__PIECES(cs));
    if (!s->zeros || !s->out || !s->input_pieces || !s->out_pieces ||
        dcr__chunk_decoder_init(&s->dec, cs, p->spec.r->minor))
      return dcr__fail(d, DCR_E_NOMEM, "cannot allocate chunk buffers");
    s->dec.cancel = p->spec.cancel;
  }
  return DCR_OK;
}

int dcr__pass_init(dcr__pass **out, const dcr__pass_spec *spec, dcr_detail *d) {
  dcr__pass *p = calloc(1, sizeof *p);
  *out = p;
  if (!p) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  p->spec = *spec;
  XXH3_INITSTATE(&p->base_hash);
  XXH3_INITSTATE(&p->target_hash);
  int rc = build_jobs(p, d);
  if (rc) return rc;
  for (size_t j = 0; j < p->job_count; j++)
    if (p->jobs[j].chunk != NO_CHUNK)
      p->total += dcr__chunk_bytes(&spec->r->man, &spec->r->man.entries[p->jobs[j].entry],
                                   p->jobs[j].chunk);
  /* no more threads than jobs: a small bundle starts none */
  unsigned threads = spec->threads ? spec->threads : dcr_default_threads();
  if (threads > p->job_count) threads = p->job_count ? (unsigned)p->job_count : 1;
  /* Each thread has two slots (the pool's window), each a chunk's input and
   * result, their digests, and what decoding the chunks needs: 1 GiB chunks on 8
   * threads would take 50 GiB. Fewer threads, the same result; work that does not
   * fit on one is refused before it starts. */
  const dcr__chunk *neediest;
  size_t largest, cs = dcr__max_chunk_bytes(&spec->r->man);
  uint64_t per_slot = dcr__decode_bytes(spec->r, &largest, &neediest) + 2 * (uint64_t)cs +
                      32 * (uint64_t)DCR__PIECES(cs);
  if ((rc = dcr__decode_fits(spec->r, per_slot, neediest, cs, "applying the chunks", d))) return rc;
  threads = dcr__threads_within(threads, 2 * per_slot, spec->r->lim.max_memory);
  threads = dcr__threads_for_jobs(threads, p->job_count, spec->r->man.data_length);
  p->slot_bytes = per_slot;
  if (dcr__pool_create(&p->pool, threads)) return dcr__fail(d, DCR_E_NOMEM, "no threads");
  return make_slots(p, dcr__pool_window(p->pool), d);
}

size_t dcr__pass_slots(const dcr__pass *p) { return p->slot_count; }

uint64_t dcr__pass_bytes(const dcr__pass *p) { return p->total; }

uint64_t dcr__pass_memory(const dcr__pass *p) { return p->slot_bytes * p->slot_count; }

int dcr__pass_run(dcr__pass *p, dcr_detail *d) {
  p->current = UINT32_MAX;
  p->done = 0;
  int rc = dcr__pool_stream(p->pool, p->job_count, run_job, take_job, p, p->spec.cancel, d);
  if (!rc && hashing(p) && p->current != UINT32_MAX) rc = end_entry(p, p->current, d);
  return rc;
}

void dcr__pass_free(dcr__pass *p) {
  if (!p) return;
  dcr__pool_free(p->pool);
  for (size_t i = 0; p->slots && i < p->slot_count; i++) {
    slot *s = &p->slots[i];
    dcr__view_close(&s->input);
    free(s->zeros);
    free(s->out);
    free(s->input_pieces);
    free(s->out_pieces);
    free(s->scratch);
    dcr__chunk_decoder_free(&s->dec);
  }
  free(p->slots);
  free(p->jobs);
  free(p);
}
