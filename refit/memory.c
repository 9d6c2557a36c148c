/*
 * memory.c - dcr_patch_memory: a bundle applied to tensors the caller holds.
 *
 * Two steps. The check (FULL or CHUNK, SPEC.md §10.3) is a pass (codec/pass.c)
 * over the caller's buffers that applies every changed chunk to a copy and
 * writes nothing, so that a wrong base leaves the buffers as they were. The patch
 * then decodes each changed chunk straight into the caller's memory, on threads,
 * touching only the bytes that change (and added tensors). At DCR_VERIFY_NONE
 * only the patch runs.
 *
 * A DELTA_CLASSED chunk (§9.4) costs a walk over its base elements and a range
 * decode of its values; the check has done both, so the walk records each change
 * it meets (position and value), and the patch only applies them, as for a 1.1
 * sparse chunk: within the memory budget the check's slots leave
 * (dcr_limits.max_memory); chunks past it are decoded again.
 *
 * A resized tensor (§6.5) has two buffers: the one the caller holds (its base,
 * which the checks read) and a new one of the target's size, which the patch
 * fills with the resized base and then patches. A set's raw members (§2.3) that
 * the caller does not hold are left out of both steps.
 */
#include <stdlib.h>

#include "refit.h"

typedef struct {
  dcr_patch *p;
  dcr_buffer *in;  /* per manifest entry: the tensor as the caller holds it */
  dcr_buffer *out; /* per manifest entry: where its target goes (in, but when resized) */
  uint8_t *skip;   /* per manifest entry: a raw member the caller does not hold */
  dcr__chunk_decoder *dec; /* per worker */
  uint8_t **scratch;       /* per worker: a CHNK read from a file bundle */
  size_t *scratch_capacity;
  int *rc;                 /* per slot */
  dcr_detail *detail;      /* per slot */
  size_t window;
  uint64_t *jobs;          /* the selected chunks' indexes (dcr_reader_select_tensors) */
  uint8_t **kept;          /* per chunk record: its changes' positions (u32), then their
                            * target elements, from the check; or NULL */
  uint64_t kept_budget, kept_bytes; /* kept_bytes: atomic, workers add to it */
  size_t job_count;
  uint64_t done, total;
} patcher;

static void name_entry(dcr_detail *d, const dcr__manifest *m, uint64_t i) {
  dcr__detail_tensor(d, i, m->entries[i].name, m->entries[i].name_length);
}

static int memory_input(void *ctx, uint32_t entry, uint64_t at, size_t bytes, dcr__view *view,
                        uint8_t *fallback, dcr_detail *d) {
  (void)d;
  patcher *pt = ctx;
  const uint8_t *from = (const uint8_t *)pt->in[entry].data + at;
  /* A resized tensor's last base bytes are followed by zeros (§6.5), which the
   * pass writes after them in `fallback`: they must be there. */
  if (pt->p->r->man.entries[entry].resized) from = memcpy(fallback, from, bytes);
  *view = (dcr__view){.data = from};
  return DCR_OK;
}

static int ask(dcr_resolve_fn resolve, void *opaque, const dcr__manifest *m, uint64_t i,
               const dcr_tensor_info *t, dcr_buffer *b, dcr_detail *d) {
  *b = (dcr_buffer){0};
  if (resolve(opaque, i, t, b))
    return name_entry(d, m, i), dcr__fail(d, DCR_E_ARGUMENT, "the resolver has no buffer for "
                                                             "this tensor");
  return DCR_OK;
}

static int wrong_size(const dcr__manifest *m, uint64_t i, const dcr_buffer *b, uint64_t want,
                      const char *what, dcr_detail *d) {
  name_entry(d, m, i);
  if (!b->data)
    return dcr__fail(d, DCR_E_ARGUMENT, "no buffer given for a tensor of %llu bytes (%s)",
                     (unsigned long long)want, what);
  return dcr__fail(d, DCR_E_ARGUMENT, "buffer of %llu bytes for a tensor of %llu bytes (%s)",
                   (unsigned long long)b->size, (unsigned long long)want, what);
}

/* A resized tensor: the caller's tensor (its base, or its target already if the
 * bundle was applied), then a new buffer of the target's size for the result. */
static int resolve_resized(patcher *pt, dcr_resolve_fn resolve, void *opaque, uint64_t i,
                           const dcr_tensor_info *t, dcr_detail *d) {
  const dcr__manifest *m = &pt->p->r->man;
  const dcr__entry *e = &m->entries[i];
  dcr_tensor_info held = *t, fresh = *t;
  held.target.present = 0, fresh.base.present = 0;
  int rc = ask(resolve, opaque, m, i, &held, &pt->in[i], d);
  if (!rc) rc = ask(resolve, opaque, m, i, &fresh, &pt->out[i], d);
  if (rc || (!pt->in[i].data && !pt->out[i].data && pt->skip[i])) return rc;
  pt->skip[i] = 0;
  dcr_buffer *in = &pt->in[i], *out = &pt->out[i];
  if (!in->data || (in->size != e->base.byte_length && in->size != e->target.byte_length))
    return wrong_size(m, i, in, e->base.byte_length, "a resized tensor's base, read", d);
  if (in->size == e->base.byte_length && (!out->data || out->size != e->target.byte_length))
    return wrong_size(m, i, out, e->target.byte_length, "a resized tensor's new buffer, written", d);
  return DCR_OK;
}

/* Asks the caller for every entry's buffers and checks their sizes. A raw member
 * of a set (on every side it has) given no buffer is skipped. */
static int resolve_all(patcher *pt, dcr_resolve_fn resolve, void *opaque, dcr_detail *d) {
  dcr_reader *r = pt->p->r;
  const dcr__manifest *m = &r->man;
  for (uint64_t i = 0; i < m->entry_count; i++) {
    const dcr__entry *e = &m->entries[i];
    if (!dcr__selected(r, i)) continue; /* not asked for: its buffer stays NULL */
    dcr_tensor_info t;
    dcr_reader_tensor(r, i, &t);
    pt->skip[i] = (e->raw & e->presence) == e->presence;
    int rc = e->resized ? resolve_resized(pt, resolve, opaque, i, &t, d)
                        : ask(resolve, opaque, m, i, &t, &pt->in[i], d);
    if (rc) return rc;
    if (e->resized) continue;
    dcr_buffer *b = &pt->out[i];
    *b = pt->in[i];
    if (!b->data && pt->skip[i]) continue;
    pt->skip[i] = 0;
    int has_target = (e->presence & DCR__HAS_TARGET) != 0;
    uint64_t want = has_target ? e->target.byte_length : e->base.byte_length;
    if ((!b->data && has_target && want != 0) || (b->data && b->size != want))
      return wrong_size(m, i, b, want, has_target ? (dcr__entry_delta_coded(e)
                                                         ? "its base, patched in place"
                                                         : "a new tensor, written whole")
                                                  : "a removed tensor", d);
  }
  return DCR_OK;
}

/* A resized tensor's buffer must have the size of the side it is taken for. */
static int resized_sizes(const patcher *pt, int as_target, dcr_detail *d) {
  const dcr__manifest *m = &pt->p->r->man;
  for (uint64_t i = 0; i < m->entry_count; i++) {
    const dcr__entry *e = &m->entries[i];
    uint64_t want = as_target ? e->target.byte_length : e->base.byte_length;
    if (e->resized && pt->in[i].data && !pt->skip[i] && pt->in[i].size != want)
      return name_entry(d, m, i),
             dcr__fail(d, DCR_E_BASE_MISMATCH, "tensor has %llu bytes; the bundle's %s has %llu",
                       (unsigned long long)pt->in[i].size, as_target ? "target" : "base",
                       (unsigned long long)want);
  }
  return DCR_OK;
}

/* FULL: base bytes the pass did not hash (removed tensors the caller gave, and
 * resized ones, whose bytes past the target's end the pass never reads). */
static int hash_unread(patcher *pt, dcr_detail *d) {
  const dcr__manifest *m = &pt->p->r->man;
  for (uint64_t i = 0; i < m->entry_count; i++) {
    const dcr__entry *e = &m->entries[i];
    if ((e->presence != DCR__HAS_BASE && !e->resized) || !pt->in[i].data || pt->skip[i]) continue;
    uint8_t h[16];
    dcr__hash_memory(pt->in[i].data, e->base.byte_length, h);
    pt->p->stats.bytes_checked += e->base.byte_length;
    if (!DCR__CHECKSUM_OK(memcmp(h, e->base.hash, 16) == 0))
      return name_entry(d, m, i),
             dcr__fail(d, DCR_E_BASE_MISMATCH, "base tensor's hash differs from the bundle's");
  }
  return DCR_OK;
}

/* The check's keep hook: room for a DELTA_CLASSED chunk's changes while the budget
 * allows (a chunk that does not fit is decoded again by the patch). */
static void keep_changes(void *ctx, const dcr__job *job, uint32_t **pos, uint8_t **values) {
  patcher *pt = ctx;
  const dcr_reader *r = pt->p->r;
  size_t count = r->chunks[job->record].count;
  size_t need = count * (sizeof(uint32_t) + dcr_dtype_size(r->man.entries[job->entry].target.dtype));
  uint8_t *keep = NULL;
  if (__atomic_add_fetch(&pt->kept_bytes, need, __ATOMIC_RELAXED) > pt->kept_budget ||
      !(keep = malloc(need))) {
    __atomic_sub_fetch(&pt->kept_bytes, need, __ATOMIC_RELAXED);
    return;
  }
  pt->kept[job->record] = keep;
  *pos = (uint32_t *)(void *)keep;
  *values = keep + count * sizeof(uint32_t);
}

/* One attempt of the check: the buffers as the base, or as the target already. */
static int check(patcher *pt, int as_target, dcr_detail *d) {
  dcr_patch *p = pt->p;
  dcr__pass_spec spec = {.r = p->r, .verify = p->verify,
                         .changed_only = p->verify == DCR_VERIFY_CHUNK, .as_target = as_target,
                         .threads = p->threads, .skip = pt->skip, .cancel = p->cancel,
                         .input = memory_input, .input_ctx = pt, .ctx = pt,
                         .keep = as_target ? NULL : keep_changes};
  int rc = resized_sizes(pt, as_target, d);
  if (rc) return rc;
  dcr__pass *pass = NULL;
  rc = dcr__pass_init(&pass, &spec, d);
  uint64_t slots = pass ? dcr__pass_memory(pass) : 0;
  pt->kept_budget = p->r->lim.max_memory > slots ? p->r->lim.max_memory - slots : 0;
  if (!rc) rc = dcr__pass_run(pass, d);
  if (pass) p->stats.bytes_checked += dcr__pass_bytes(pass);
  if (!rc && !as_target && p->verify == DCR_VERIFY_FULL) rc = hash_unread(pt, d);
  dcr__pass_free(pass);
  return rc;
}

static void patch_job(void *ctx, size_t j, unsigned worker) {
  patcher *pt = ctx;
  const dcr_reader *r = pt->p->r;
  const dcr__chunk *c = &r->chunks[pt->jobs[j]];
  const dcr__entry *e = &r->man.entries[c->tensor];
  size_t slot = j % pt->window, bytes = dcr__chunk_bytes(&r->man, e, c->chunk);
  uint8_t *chunk = (uint8_t *)pt->out[c->tensor].data + (uint64_t)c->chunk * r->man.chunk_size;
  const uint8_t *payload;
  dcr_detail *d = &pt->detail[slot];
  dcr__detail_init(d);
  const uint8_t *keep = pt->kept ? pt->kept[pt->jobs[j]] : NULL;
  if (keep) { /* checked already: its changes, kept */
    unsigned esize = dcr_dtype_size(e->target.dtype);
    const uint32_t *pos = (const uint32_t *)(const void *)keep;
    const uint8_t *values = keep + c->count * sizeof(uint32_t);
    dcr__scatter_packed(chunk, pos, values, c->count, esize, DCR__OP_DELTA);
    pt->rc[slot] = DCR_OK;
    return;
  }
  int rc = dcr__chunk_payload(r, c, &pt->scratch[worker], &pt->scratch_capacity[worker],
                              &payload, d);
  if (!rc)
    rc = dcr__decode_chunk(&pt->dec[worker], c, payload + DCR__RECORD_SIZE,
                           (size_t)c->payload_length - DCR__RECORD_SIZE, e->target.dtype,
                           bytes / dcr_dtype_size(e->target.dtype), chunk, d);
  if (rc) {
    dcr__detail_at(d, "CHNK", c->offset);
    dcr__detail_tensor(d, c->tensor, e->name, e->name_length);
    dcr__detail_chunk(d, c->chunk);
  }
  pt->rc[slot] = rc;
}

static int patch_take(void *ctx, size_t j, dcr_detail *d) {
  patcher *pt = ctx;
  size_t slot = j % pt->window;
  if (pt->rc[slot]) return *d = pt->detail[slot], pt->rc[slot];
  const dcr_reader *r = pt->p->r;
  const dcr__chunk *c = &r->chunks[pt->jobs[j]];
  pt->done += dcr__chunk_bytes(&r->man, &r->man.entries[c->tensor], c->chunk);
  pt->p->stats.chunks_patched++;
  if (pt->p->progress) pt->p->progress(pt->p->progress_opaque, pt->done, pt->total);
  return DCR_OK;
}

/* Decodes every changed chunk into the caller's memory. New tensors start from
 * zeros (§10.1), resized ones from their resized base (§6.5), so these are
 * written first. */
static int patch(patcher *pt, dcr_detail *d) {
  dcr_reader *r = pt->p->r;
  const dcr__manifest *m = &r->man;
  for (uint64_t i = 0; i < m->entry_count; i++) {
    const dcr__entry *e = &m->entries[i];
    if (!(e->presence & DCR__HAS_TARGET) || dcr__entry_delta_coded(e) || !pt->out[i].data ||
        pt->skip[i])
      continue;
    uint64_t kept = e->resized ? dcr__entry_base_span(e, 0, e->target.byte_length) : 0;
    memcpy(pt->out[i].data, pt->in[i].data, (size_t)kept);
    memset((uint8_t *)pt->out[i].data + kept, 0, (size_t)(e->target.byte_length - kept));
    pt->p->stats.bytes_written += e->target.byte_length;
  }
  pt->jobs = malloc((size_t)r->chunk_count * sizeof *pt->jobs + 1);
  if (!pt->jobs) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate the job list");
  for (uint64_t k = 0; k < r->chunk_count; k++)
    if (dcr__selected(r, r->chunks[k].tensor) && !pt->skip[r->chunks[k].tensor]) {
      pt->jobs[pt->job_count++] = k;
      pt->total += dcr__chunk_bytes(m, &m->entries[r->chunks[k].tensor], r->chunks[k].chunk);
    }
  unsigned threads = pt->p->threads ? pt->p->threads : dcr_default_threads();
  if (threads > pt->job_count) threads = pt->job_count ? (unsigned)pt->job_count : 1;
  size_t cs = dcr__max_chunk_bytes(m);
  dcr__pool *pool = NULL;
  int rc = dcr__pool_create(&pool, threads) ? DCR_E_NOMEM : DCR_OK;
  if (!rc) {
    pt->window = dcr__pool_window(pool);
    pt->dec = calloc(threads, sizeof *pt->dec);
    pt->scratch = calloc(threads, sizeof *pt->scratch);
    pt->scratch_capacity = calloc(threads, sizeof *pt->scratch_capacity);
    pt->rc = calloc(pt->window, sizeof *pt->rc);
    pt->detail = calloc(pt->window, sizeof *pt->detail);
    rc = pt->dec && pt->scratch && pt->scratch_capacity && pt->rc && pt->detail ? DCR_OK
                                                                                : DCR_E_NOMEM;
    for (unsigned w = 0; !rc && w < threads; w++)
      if (dcr__chunk_decoder_init(&pt->dec[w], cs, r->minor)) rc = DCR_E_NOMEM;
  }
  if (rc) rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate decoders");
  else /* not cancellable: once the first chunk is written, the rest must follow */
    rc = dcr__pool_stream(pool, pt->job_count, patch_job, patch_take, pt, NULL, d);
  dcr__pool_free(pool);
  for (unsigned w = 0; pt->dec && w < threads; w++) dcr__chunk_decoder_free(&pt->dec[w]);
  for (unsigned w = 0; pt->scratch && w < threads; w++) free(pt->scratch[w]);
  free(pt->dec), free(pt->scratch), free(pt->scratch_capacity), free(pt->rc), free(pt->detail);
  free(pt->jobs);
  pt->p->stats.bytes_written += pt->total;
  return rc;
}

int dcr_patch_memory(dcr_patch *p, dcr_resolve_fn resolve, void *opaque, dcr_detail *d) {
  dcr_detail scratch, again;
  if (!d) d = &scratch;
  dcr__detail_init(d);
  memset(&p->stats, 0, sizeof p->stats);
  if (!resolve) return dcr__fail(d, DCR_E_ARGUMENT, "no resolver");
  const dcr__manifest *m = &p->r->man;
  size_t n = (size_t)m->entry_count + 1;
  patcher pt = {.p = p, .in = calloc(n, sizeof *pt.in), .out = calloc(n, sizeof *pt.out),
                .skip = calloc(n, 1), .kept = calloc((size_t)p->r->chunk_count + 1, sizeof *pt.kept)};
  int rc = pt.in && pt.out && pt.skip && pt.kept ? resolve_all(&pt, resolve, opaque, d)
                                      : dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  const dcr__chunk *c = p->verify == DCR_VERIFY_NONE ? dcr__probe_chunk_skipping(p->r, pt.skip)
                                                     : NULL;
  if (!rc && c)
    rc = dcr__probe(p->r, c, (const uint8_t *)pt.in[c->tensor].data +
                                 (uint64_t)c->chunk * m->chunk_size,
                    &p->stats.already_target, d);
  /* NONE checks no hash, but a resized tensor's buffers must still be its base's
   * size for the patch to stay inside them. */
  if (!rc && p->verify == DCR_VERIFY_NONE && !p->stats.already_target)
    rc = resized_sizes(&pt, 0, d);
  if (!rc && p->verify != DCR_VERIFY_NONE) {
    rc = check(&pt, 0, d);
    /* Not the base: perhaps the target already (§10.2). If not that either, the
     * first answer stands. */
    dcr__detail_init(&again);
    if (rc == DCR_E_BASE_MISMATCH && check(&pt, 1, &again) == DCR_OK) {
      dcr__detail_init(d);
      p->stats.already_target = 1;
      rc = DCR_OK;
    }
  }
  if (!rc && !p->stats.already_target) rc = patch(&pt, d);
  for (uint64_t k = 0; pt.kept && k < p->r->chunk_count; k++) free(pt.kept[k]);
  free(pt.in), free(pt.out), free(pt.skip), free(pt.kept);
  return rc;
}
