/*
 * place.c - dcr_patch_placed: a bundle applied to the blocks of tensors that an
 * inference engine holds (tensor-parallel slices, fused parameters), where they
 * lie, without assembling whole tensors.
 *
 * Built on the changes iterator (changes.c): each changed chunk that touches a
 * held block is decoded into positions and values, which the tensor's row x
 * column view (dcr.h) maps into the blocks. Two passes, as dcr_patch_memory's:
 * the check decodes every such chunk, so that a malformed one fails before
 * anything is written, checks those whose base the caller can show whole (its
 * blocks hold all of it, or a whole base tensor is given) and keeps their changes
 * within the memory budget; the patch then writes, decoding again what it could
 * not keep.
 */
#include <stdlib.h>

#include "refit.h"

typedef struct {
  const dcr_placement *p; /* the caller's blocks, valid during the call */
  size_t n;
  uint64_t rows, cols;    /* the tensor viewed as a matrix (dcr.h) */
  unsigned esize;
  const uint8_t *whole;   /* the whole base tensor (dcr_patch_set_base), or NULL */
} held;

/* A chunk's state after the check. FRESH: coded against zeros, so its blocks'
 * contents do not matter (an added or recoded tensor); it says nothing about
 * whether the bundle was applied. */
enum { AT_BASE = 1, AT_TARGET = 2, UNCHECKED = 3, FRESH = 4 };

typedef struct {
  dcr_patch *p;
  held *h;            /* per manifest entry */
  uint64_t *jobs;     /* chunk records that touch a held block */
  size_t job_count;
  uint8_t *state;     /* per job */
  dcr_change **kept;  /* per job: its changes from the check, or NULL */
  uint64_t kept_budget, kept_bytes; /* kept_bytes: atomic, workers add to it */
  dcr_changes **it;   /* per worker */
  uint8_t **base;     /* per worker: a chunk's base bytes */
  int *rc;            /* per slot */
  dcr_detail *detail; /* per slot */
  size_t window;
  int writing;        /* 0: the check, 1: the patch */
  uint64_t done, total;
} placer;

static void name_entry(dcr_detail *d, const dcr_reader *r, uint64_t i) {
  dcr__detail_tensor(d, i, r->man.entries[i].name, r->man.entries[i].name_length);
}

static uint8_t *element(const dcr_placement *pl, unsigned esize, uint64_t r, uint64_t c) {
  return (uint8_t *)pl->data + pl->offset + (r - pl->row0) * pl->row_stride +
         (c - pl->col0) * esize;
}

/* Calls fn for each run of the elements [first, first + n) of the tensor that a
 * block holds (contiguous in the block's memory), with the run's place in the
 * range, and returns how many elements the blocks hold. Blocks of whole rows
 * stored back to back make one run however many rows they span. */
typedef void (*run_fn)(void *ctx, uint64_t at, uint64_t count, uint8_t *mem);
static uint64_t held_runs(const held *h, uint64_t first, uint64_t n, run_fn fn, void *ctx) {
  uint64_t total = 0, end = first + n, C = h->cols;
  for (uint64_t e = first; e < end;) {
    uint64_t r = e / C, c0 = e % C, c1 = end - r * C < C ? end - r * C : C, next = r * C + c1;
    for (size_t k = 0; k < h->n; k++) {
      const dcr_placement *pl = &h->p[k];
      if (r < pl->row0 || r - pl->row0 >= pl->rows) continue;
      uint64_t a = c0 > pl->col0 ? c0 : pl->col0;
      uint64_t b = c1 < pl->col0 + pl->cols ? c1 : pl->col0 + pl->cols;
      if (a >= b) continue;
      uint64_t from = r * C + a, to = r * C + b;
      if (pl->cols == C && pl->row_stride == C * h->esize) { /* whole rows, contiguous */
        uint64_t last = (pl->row0 + pl->rows) * C;
        to = last < end ? last : end;
        next = to;
      }
      total += to - from;
      if (fn) fn(ctx, from - first, to - from, element(pl, h->esize, r, a));
    }
    e = next;
  }
  return total;
}

typedef struct {
  uint8_t *chunk;       /* gather_run: the chunk's bytes, gathered */
  const uint8_t *bytes; /* compare_run: what the blocks are compared with */
  unsigned esize;
  int differs;
} copy_ctx;

static void gather_run(void *ctx, uint64_t at, uint64_t count, uint8_t *mem) {
  copy_ctx *x = ctx;
  memcpy(x->chunk + at * x->esize, mem, (size_t)(count * x->esize));
}

static void compare_run(void *ctx, uint64_t at, uint64_t count, uint8_t *mem) {
  copy_ctx *x = ctx;
  x->differs |= memcmp(x->bytes + at * x->esize, mem, (size_t)(count * x->esize)) != 0;
}

static void zero_run(void *ctx, uint64_t at, uint64_t count, uint8_t *mem) {
  (void)ctx, (void)at;
  memset(mem, 0, (size_t)(count * ((const held *)ctx)->esize));
}

typedef struct {
  const dcr_change *c;
} dense_ctx;

/* A dense change's values over a run (XOR and delta values of 0 leave elements). */
static void dense_run(void *ctx, uint64_t at, uint64_t count, uint8_t *mem) {
  const dcr_change *c = ((dense_ctx *)ctx)->c;
  unsigned es = c->element_size;
  const uint8_t *v = (const uint8_t *)c->values + at * es;
  if (c->op == DCR_OP_OVERWRITE) {
    memcpy(mem, v, (size_t)(count * es));
    return;
  }
  for (uint64_t i = 0; i < count; i++) dcr__apply_one(c->op, mem + i * es, v + i * es, es);
}

/* Sparse changes at element positions of `chunk`: the codec's scatter (which
 * prefetches ahead of its cache misses) for XOR and delta. */
static void apply_sparse(uint8_t *chunk, const dcr_change *c) {
  unsigned es = c->element_size;
  const uint8_t *v = c->values;
  if (c->op != DCR_OP_OVERWRITE) {
    dcr__scatter_packed(chunk, c->positions, v, c->count, es, c->op);
    return;
  }
  for (uint32_t i = 0; i < c->count; i++)
    memcpy(chunk + (size_t)c->positions[i] * es, v + (size_t)i * es, es);
}

/* Values packed as elements, each to its address. */
static void put(uint8_t *const *at, const uint8_t *v, size_t count, unsigned es, int op) {
  if (op != DCR_OP_OVERWRITE) {
    dcr__scatter_to(at, v, count, es, op);
    return;
  }
  for (size_t i = 0; i < count; i++) memcpy(at[i], v + i * es, es);
}

static int holds(const dcr_placement *pl, uint64_t r, uint64_t col) {
  return r >= pl->row0 && r - pl->row0 < pl->rows && col >= pl->col0 && col - pl->col0 < pl->cols;
}

/* Where the elements [first, first + n) lie as in the tensor, back to back, in one
 * block of whole rows: their first one; else NULL. */
static uint8_t *in_one_block(const held *h, uint64_t first, uint64_t n) {
  uint64_t C = h->cols;
  for (size_t k = 0; k < h->n; k++) {
    const dcr_placement *pl = &h->p[k];
    if (pl->cols == C && pl->row_stride == C * h->esize && first / C >= pl->row0 &&
        (first + n - 1) / C - pl->row0 < pl->rows)
      return element(pl, h->esize, first / C, first % C);
  }
  return NULL;
}

/* Writes a chunk's changes into the blocks that hold their elements. */
static void scatter(const held *h, uint64_t first, const dcr_change *c) {
  uint64_t n = c->length / c->element_size, C = h->cols;
  uint8_t *one;
  if (!c->positions) {
    dense_ctx x = {c};
    held_runs(h, first, n, dense_run, &x);
    return;
  }
  if ((one = in_one_block(h, first, n))) {
    apply_sparse(one, c);
    return;
  }
  /* Addresses found a run of a block (a row's part, or its rows back to back) at a
   * time, and the held changes' values, go to the codec's scatter a batch at a time,
   * so that it prefetches across runs. */
  enum { BATCH = 256 };
  uint8_t *at[BATCH], values[BATCH * 8];
  const uint8_t *v = c->values;
  unsigned es = h->esize;
  size_t m = 0;
  uint64_t r = first / C, start = r * C; /* the row of the last change, and its first element */
  for (uint32_t i = 0; i < c->count;) {
    uint64_t e = first + c->positions[i];
    if (e - start >= C) { /* a later row: changes are close, so seldom a division */
      if (e - start < 4 * C) {
        do r++, start += C;
        while (e - start >= C);
      } else {
        r = e / C, start = r * C;
      }
    }
    const dcr_placement *pl = NULL;
    for (size_t k = 0; k < h->n && !pl; k++)
      if (holds(&h->p[k], r, e - start)) pl = &h->p[k];
    if (!pl) { /* not held */
      i++;
      continue;
    }
    uint64_t run = start + pl->col0, end = run + pl->cols;
    if (pl->cols == C && pl->row_stride == C * es) end = (pl->row0 + pl->rows) * C;
    uint8_t *mem = element(pl, es, r, pl->col0);
    for (; i < c->count && (e = first + c->positions[i]) < end; i++) {
      at[m] = mem + (e - run) * es;
      memcpy(values + m * es, v + (size_t)i * es, es);
      if (++m == BATCH) {
        put(at, values, m, es, c->op);
        m = 0;
      }
    }
  }
  put(at, values, m, es, c->op);
}

/* Where check_chunk's base bytes came from. */
enum { FROM_BLOCKS, FROM_WHOLE, WHOLE_DIFFERS /* the blocks' bytes are not the whole's */ };

/* The chunk's base bytes: the caller's where the chunk lies in one block; else
 * gathered into `base` from the blocks where they hold all of it (cheaper than
 * comparing them with a whole base), or NULL unless `gather` (both_checks gathers a
 * piece at a time, with no pass over the whole chunk); else the whole base tensor
 * given, read where it lies; zeros for a tensor coded against zeros. *source:
 * FROM_... */
static const uint8_t *chunk_base(const placer *pt, const dcr__chunk *c, uint8_t *base,
                                 size_t bytes, int gather, int *source) {
  const dcr_reader *r = pt->p->r;
  const dcr__entry *e = &r->man.entries[c->tensor];
  const held *h = &pt->h[c->tensor];
  uint64_t at = (uint64_t)c->chunk * r->man.chunk_size, first = at / h->esize, n = bytes / h->esize;
  copy_ctx x = {base, NULL, h->esize, 0};
  const uint8_t *mine;
  *source = FROM_BLOCKS;
  if (!dcr__entry_delta_coded(e)) {
    memset(base, 0, bytes);
  } else if ((mine = in_one_block(h, first, n))) {
    return mine;
  } else if (!h->whole || held_runs(h, first, n, NULL, NULL) == n) {
    if (!gather) return NULL;
    held_runs(h, first, n, gather_run, &x);
  } else {
    x.bytes = h->whole + at;
    held_runs(h, first, n, compare_run, &x);
    *source = x.differs ? WHOLE_DIFFERS : FROM_WHOLE;
    return h->whole + at;
  }
  return base;
}

/* The digests (§7) of a chunk's base and of its target, the base with a sparse
 * change applied, made a piece at a time in `piece` (DCR__PIECE bytes, in cache),
 * so that the base is read once: into `before` and `after`. The base is `base`, or
 * where NULL the blocks of h that hold the elements from `first`. */
static void both_checks(const held *h, uint64_t first, const uint8_t *base, size_t bytes,
                        const dcr_change *c, uint8_t *piece, uint8_t *before, uint8_t *after,
                        uint64_t *base_check, uint64_t *target_check) {
  unsigned es = c->element_size;
  const uint8_t *v = c->values;
  size_t count = DCR__PIECES(bytes), i = 0;
  for (size_t k = 0; k < count; k++) {
    size_t at = k * DCR__PIECE, len = bytes - at < DCR__PIECE ? bytes - at : DCR__PIECE;
    if (base) {
      memcpy(piece, base + at, len);
    } else {
      copy_ctx x = {piece, NULL, es, 0};
      held_runs(h, first + at / es, len / es, gather_run, &x);
    }
    dcr__pieces(piece, len, before + 16 * k);
    for (; i < c->count && (size_t)c->positions[i] * es < at + len; i++)
      dcr__apply_one(c->op, piece + (size_t)c->positions[i] * es - at, v + i * es, es);
    dcr__pieces(piece, len, after + 16 * k);
  }
  *base_check = dcr__pieces_check(before, count);
  *target_check = dcr__pieces_check(after, count);
}

/* Room for a chunk's changes until the patch, while the budget allows. */
static void keep(placer *pt, size_t j, const dcr_change *c) {
  size_t pos = c->positions ? c->count * sizeof(uint32_t) : 0;
  size_t vals = (c->positions ? c->count : c->length / c->element_size) * c->element_size;
  size_t need = sizeof(dcr_change) + pos + vals;
  dcr_change *k = NULL;
  if (__atomic_add_fetch(&pt->kept_bytes, need, __ATOMIC_RELAXED) > pt->kept_budget ||
      !(k = malloc(need))) {
    __atomic_sub_fetch(&pt->kept_bytes, need, __ATOMIC_RELAXED);
    return;
  }
  *k = *c;
  uint8_t *at = (uint8_t *)(k + 1);
  if (pos) k->positions = memcpy(at, c->positions, pos);
  k->values = memcpy(at + pos, c->values, vals);
  pt->kept[j] = k;
}

/* The check of one chunk (see dcr_patch_placed in dcr.h). */
static int check_chunk(placer *pt, size_t j, unsigned w, dcr_detail *d) {
  dcr_patch *p = pt->p;
  const dcr_reader *r = p->r;
  const dcr__chunk *c = &r->chunks[pt->jobs[j]];
  const dcr__entry *e = &r->man.entries[c->tensor];
  const held *h = &pt->h[c->tensor];
  size_t bytes = dcr__chunk_bytes(&r->man, e, c->chunk), n = bytes / h->esize;
  uint64_t first = (uint64_t)c->chunk * r->man.chunk_size / h->esize;
  int ranked = dcr__enc_ranked(c->encoding), fresh = !dcr__entry_delta_coded(e);
  int whole = fresh || h->whole || held_runs(h, first, n, NULL, NULL) == n;
  const dcr_change *ch = NULL;
  int rc = dcr__chunk_checks(r, c, d);
  if (rc) return rc;
  int checked = p->verify != DCR_VERIFY_NONE || ranked;
  if (!whole || !checked) { /* decoded without its base, which nothing reads */
    if (ranked)
      return dcr__fail(d, DCR_E_ARGUMENT, "chunk is %s (format 1.%d), whose positions depend on "
                       "the whole chunk's base, and the placements hold only part of it: give "
                       "the whole base tensor (dcr_patch_set_base), or encode the bundle with "
                       "format 1.1 or this tensor sliced (dcr_encode_options)",
                       dcr_encoding_name(c->encoding), c->encoding == DCR_ENC_DELTA_BANDED ? 3 : 2);
    rc = dcr__changes_chunk(pt->it[w], pt->jobs[j], NULL, &ch, d);
    if (rc) return rc;
    pt->state[j] = !whole ? UNCHECKED : fresh ? FRESH : AT_BASE;
    keep(pt, j, ch);
    return DCR_OK;
  }
  int source;
  /* gathered whole only when the decoding needs it */
  const uint8_t *base = chunk_base(pt, c, pt->base[w], bytes, ranked, &source);
  size_t count = DCR__PIECES(bytes);
  uint8_t *before = pt->base[w] + bytes, *after = before + 16 * count, *piece = after + 16 * count;
  /* Decoded first, so that the checks read the base once; a ranked chunk's
   * positions come from a base not yet checked, and are used only if it is. */
  dcr_detail decoding;
  rc = dcr__changes_chunk(pt->it[w], pt->jobs[j], ranked ? base : NULL, &ch, &decoding);
  uint64_t got = 0, result = 0;
  if (!rc && ch->positions)
    both_checks(h, first, base, bytes, ch, piece, before, after, &got, &result);
  else if (!base)
    base = chunk_base(pt, c, pt->base[w], bytes, 1, &source);
  if (rc || !ch->positions)
    got = dcr__pieces_check(before, dcr__pieces(base, bytes, before));
  if (!DCR__CHECKSUM_OK(got == c->base_check)) {
    if (source == FROM_BLOCKS && !fresh && DCR__CHECKSUM_OK(got == c->target_check))
      return pt->state[j] = AT_TARGET, DCR_OK;
    return dcr__fail(d, DCR_E_BASE_MISMATCH, "%s base bytes do not match the chunk's "
                     "base_check", source == FROM_BLOCKS ? "the held blocks'" : "the whole base tensor's");
  }
  if (rc) return *d = decoding, rc;
  if (!ch->positions) { /* dense: applied whole, to a copy */
    if (base != pt->base[w]) memcpy(pt->base[w], base, bytes);
    if ((rc = dcr_change_apply(ch, pt->base[w], bytes, d))) return rc;
    result = dcr__pieces_check(after, dcr__pieces(pt->base[w], bytes, after));
  }
  if (!DCR__CHECKSUM_OK(result == c->target_check))
    return dcr__fail(d, DCR_E_TARGET_MISMATCH, "applied chunk does not match the chunk's "
                     "target_check");
  pt->state[j] = fresh ? FRESH : AT_BASE;
  if (source == WHOLE_DIFFERS) { /* the blocks are not the whole base given: the target, or wrong */
    copy_ctx x = {NULL, pt->base[w], h->esize, 0};
    if (ch->positions) { /* a copy of the whole base made the target (a dense one is, above) */
      if (base != pt->base[w]) memcpy(pt->base[w], base, bytes);
      apply_sparse(pt->base[w], ch);
    }
    held_runs(h, first, n, compare_run, &x);
    if (x.differs)
      return dcr__fail(d, DCR_E_BASE_MISMATCH, "the held blocks differ from the whole base "
                       "tensor given, and from the chunk's target");
    return pt->state[j] = AT_TARGET, DCR_OK;
  }
  keep(pt, j, ch);
  return DCR_OK;
}

static void patch_chunk(placer *pt, size_t j, unsigned w, dcr_detail *d) {
  const dcr_reader *r = pt->p->r;
  const dcr__chunk *c = &r->chunks[pt->jobs[j]];
  const dcr__entry *e = &r->man.entries[c->tensor];
  const held *h = &pt->h[c->tensor];
  size_t bytes = dcr__chunk_bytes(&r->man, e, c->chunk);
  uint64_t first = (uint64_t)c->chunk * r->man.chunk_size / h->esize;
  const dcr_change *ch = pt->kept[j];
  int rc = DCR_OK, source;
  if (!ch) { /* not kept: decoded again, from the same base (no block of it written yet) */
    int ranked = dcr__enc_ranked(c->encoding);
    const uint8_t *base = ranked ? chunk_base(pt, c, pt->base[w], bytes, 1, &source) : NULL;
    rc = dcr__changes_chunk(pt->it[w], pt->jobs[j], base, &ch, d);
  }
  if (!rc) scatter(h, first, ch);
  pt->rc[j % pt->window] = rc;
}

static void job(void *ctx, size_t j, unsigned worker) {
  placer *pt = ctx;
  size_t slot = j % pt->window;
  dcr_detail *d = &pt->detail[slot];
  dcr__detail_init(d);
  if (pt->writing) {
    if (pt->state[j] != AT_TARGET) patch_chunk(pt, j, worker, d);
    else pt->rc[slot] = DCR_OK;
  } else {
    pt->rc[slot] = check_chunk(pt, j, worker, d);
  }
  if (pt->rc[slot]) {
    const dcr_reader *r = pt->p->r;
    const dcr__chunk *c = &r->chunks[pt->jobs[j]];
    if (!d->section[0]) dcr__detail_at(d, "CHNK", c->offset);
    name_entry(d, r, c->tensor);
    dcr__detail_chunk(d, c->chunk);
  }
}

static int take(void *ctx, size_t j, dcr_detail *d) {
  placer *pt = ctx;
  size_t slot = j % pt->window;
  if (pt->rc[slot]) return *d = pt->detail[slot], pt->rc[slot];
  const dcr_reader *r = pt->p->r;
  const dcr__chunk *c = &r->chunks[pt->jobs[j]];
  size_t bytes = dcr__chunk_bytes(&r->man, &r->man.entries[c->tensor], c->chunk);
  if (!pt->writing && pt->state[j] != UNCHECKED && pt->p->verify != DCR_VERIFY_NONE)
    pt->p->stats.bytes_checked += bytes;
  if (pt->writing && pt->state[j] != AT_TARGET) {
    pt->done += bytes;
    pt->p->stats.chunks_patched++;
    pt->p->stats.chunks_unchecked += pt->state[j] == UNCHECKED;
    if (pt->p->progress) pt->p->progress(pt->p->progress_opaque, pt->done, pt->total);
  }
  return DCR_OK;
}

/* One placement's checks, against the tensor's view and the memory it names. */
static int check_placement(const held *h, const dcr_placement *pl, dcr_detail *d) {
  uint64_t span, last;
  if (!pl->data || pl->reserved_[0] || pl->reserved_[1])
    return dcr__fail(d, DCR_E_ARGUMENT, "placement with %s", pl->data ? "reserved fields set"
                                                                       : "no data");
  if (!pl->rows || !pl->cols || pl->row0 > h->rows || pl->rows > h->rows - pl->row0 ||
      pl->col0 > h->cols || pl->cols > h->cols - pl->col0)
    return dcr__fail(d, DCR_E_ARGUMENT, "placement of rows [%llu, +%llu) and columns "
                     "[%llu, +%llu) outside the tensor's %llu x %llu",
                     (unsigned long long)pl->row0, (unsigned long long)pl->rows,
                     (unsigned long long)pl->col0, (unsigned long long)pl->cols,
                     (unsigned long long)h->rows, (unsigned long long)h->cols);
  if (pl->rows > 1 && pl->row_stride < pl->cols * h->esize)
    return dcr__fail(d, DCR_E_ARGUMENT, "placement's row_stride %llu is less than a row of "
                     "%llu bytes", (unsigned long long)pl->row_stride,
                     (unsigned long long)(pl->cols * h->esize));
  if (__builtin_mul_overflow(pl->rows - 1, pl->row_stride, &span) ||
      __builtin_add_overflow(span, pl->cols * h->esize, &span) ||
      __builtin_add_overflow(span, pl->offset, &last) || last > pl->size)
    return dcr__fail(d, DCR_E_ARGUMENT, "placement reaches past the %llu bytes of its buffer",
                     (unsigned long long)pl->size);
  return DCR_OK;
}

typedef struct {
  uintptr_t start, end;
  uint64_t entry;
} span;

static int by_start(const void *a, const void *b) {
  const span *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

/* Asks for every tensor's placements (and whole base) and checks them. */
static int resolve(placer *pt, dcr_place_fn place, void *opaque, dcr_detail *d) {
  dcr_patch *p = pt->p;
  dcr_reader *r = p->r;
  size_t nspans = 0, cap = 0;
  span *spans = NULL;
  int rc = DCR_OK;
  for (uint64_t i = 0; !rc && i < r->man.entry_count; i++) {
    const dcr__entry *e = &r->man.entries[i];
    if (!dcr__selected(r, i) || !(e->presence & DCR__HAS_TARGET)) continue;
    dcr_tensor_info t;
    dcr_reader_tensor(r, i, &t);
    held *h = &pt->h[i];
    h->esize = dcr_dtype_size(t.target.dtype);
    h->rows = t.target.rank ? t.target.dims[0] : 1;
    h->cols = h->rows ? t.target.byte_length / h->esize / h->rows : 0;
    if (place(opaque, i, &t, &h->p, &h->n)) {
      rc = dcr__fail(d, DCR_E_ARGUMENT, "the placer failed for this tensor");
    } else if (h->n && !h->p) {
      rc = dcr__fail(d, DCR_E_ARGUMENT, "%zu placements at NULL", h->n);
    } else if (h->n && e->resized) {
      rc = dcr__fail(d, DCR_E_ARGUMENT, "the bundle resizes this tensor (format 1.1, SPEC.md "
                     "§6.5): apply it whole (dcr_patch_memory)");
    }
    for (size_t k = 0; !rc && k < h->n; k++) {
      const dcr_placement *a = &h->p[k];
      rc = check_placement(h, a, d);
      for (size_t q = 0; !rc && q < k; q++) {
        const dcr_placement *b = &h->p[q];
        if (a->row0 < b->row0 + b->rows && b->row0 < a->row0 + a->rows &&
            a->col0 < b->col0 + b->cols && b->col0 < a->col0 + a->cols)
          rc = dcr__fail(d, DCR_E_ARGUMENT, "placements %zu and %zu hold the same elements", q, k);
      }
      if (rc) break;
      if (nspans == cap) {
        span *grown = realloc(spans, (cap = cap ? 2 * cap : 64) * sizeof *spans);
        if (!grown) {
          rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
          break;
        }
        spans = grown;
      }
      uintptr_t s = (uintptr_t)a->data + a->offset;
      spans[nspans++] = (span){s, s + (a->rows - 1) * a->row_stride + a->cols * h->esize, i};
    }
    if (!rc && h->n && p->whole_base && dcr__entry_delta_coded(e)) {
      dcr_buffer b = {0};
      if (p->whole_base(p->whole_base_opaque, i, &t, &b))
        rc = dcr__fail(d, DCR_E_ARGUMENT, "the base resolver failed for this tensor");
      else if (b.data && b.size != e->base.byte_length)
        rc = dcr__fail(d, DCR_E_ARGUMENT, "whole base of %llu bytes for a base tensor of %llu",
                       (unsigned long long)b.size, (unsigned long long)e->base.byte_length);
      h->whole = b.data;
    }
    if (rc) name_entry(d, r, i);
  }
  if (!rc && nspans) {
    qsort(spans, nspans, sizeof *spans, by_start);
    for (size_t k = 1; !rc && k < nspans; k++)
      if (spans[k].start < spans[k - 1].end) {
        rc = dcr__fail(d, DCR_E_ARGUMENT, "the memory of two placements overlaps (tensor "
                       "entries %llu and %llu)", (unsigned long long)spans[k - 1].entry,
                       (unsigned long long)spans[k].entry);
        name_entry(d, r, spans[k].entry);
      }
  }
  free(spans);
  return rc;
}

/* Runs one pass over the jobs on the workers. */
static int run(placer *pt, dcr__pool *pool, int writing, dcr_detail *d) {
  pt->writing = writing;
  return dcr__pool_stream(pool, pt->job_count, job, take, pt, writing ? NULL : pt->p->cancel, d);
}

/* After the check: the blocks are the base (or hold none that can tell), or all
 * the target already; never some of each. */
static int settle(placer *pt, dcr_detail *d) {
  size_t at_base = 0, at_target = 0;
  for (size_t j = 0; j < pt->job_count; j++) {
    at_base += pt->state[j] == AT_BASE;
    at_target += pt->state[j] == AT_TARGET;
  }
  if (at_base && at_target)
    return dcr__fail(d, DCR_E_BASE_MISMATCH, "of the chunks checked, %zu are at the bundle's "
                     "base and %zu at its target already", at_base, at_target);
  pt->p->stats.already_target = at_target != 0;
  return DCR_OK;
}

static int work(placer *pt, dcr_detail *d) {
  dcr_patch *p = pt->p;
  const dcr_reader *r = p->r;
  const dcr__manifest *m = &r->man;
  for (uint64_t k = 0; k < r->chunk_count; k++) {
    const dcr__chunk *c = &r->chunks[k];
    const held *h = &pt->h[c->tensor];
    if (!dcr__selected(r, c->tensor) || !h->n) continue;
    size_t bytes = dcr__chunk_bytes(m, &m->entries[c->tensor], c->chunk);
    uint64_t first = (uint64_t)c->chunk * m->chunk_size / h->esize;
    if (!held_runs(h, first, bytes / h->esize, NULL, NULL)) {
      p->stats.chunks_not_held++;
      continue;
    }
    pt->jobs[pt->job_count++] = k;
    pt->total += bytes;
  }
  size_t cs = dcr__max_chunk_bytes(m);
  size_t per_worker = 3 * cs + 32 * DCR__PIECES(cs) + DCR__PIECE;
  unsigned threads = p->threads ? p->threads : dcr_default_threads();
  threads = dcr__threads_within(threads, per_worker, r->lim.max_memory);
  if (threads > pt->job_count) threads = pt->job_count ? (unsigned)pt->job_count : 1;
  uint64_t used = (uint64_t)threads * per_worker;
  pt->kept_budget = r->lim.max_memory > used ? r->lim.max_memory - used : 0;
  dcr__pool *pool = NULL;
  int rc = dcr__pool_create(&pool, threads) ? DCR_E_NOMEM : DCR_OK;
  if (!rc) {
    pt->window = dcr__pool_window(pool);
    pt->it = calloc(threads, sizeof *pt->it);
    pt->base = calloc(threads, sizeof *pt->base);
    pt->rc = calloc(pt->window, sizeof *pt->rc);
    pt->detail = calloc(pt->window, sizeof *pt->detail);
    rc = pt->it && pt->base && pt->rc && pt->detail ? DCR_OK : DCR_E_NOMEM;
    for (unsigned w = 0; !rc && w < threads; w++)
      if (dcr_changes_open(&pt->it[w], p->r, NULL) ||
          !(pt->base[w] = malloc(cs + 32 * DCR__PIECES(cs) + DCR__PIECE)))
        rc = DCR_E_NOMEM;
  }
  if (rc) rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate decoders");
  if (!rc) rc = run(pt, pool, 0, d);
  if (!rc) rc = settle(pt, d);
  if (!rc && !p->stats.already_target) {
    /* New tensors start from zeros (§10.1), in the blocks held too. */
    for (uint64_t i = 0; i < m->entry_count; i++) {
      const held *h = &pt->h[i];
      if (h->n && !dcr__entry_delta_coded(&m->entries[i]))
        held_runs(h, 0, h->rows * h->cols, zero_run, (void *)h);
    }
    rc = run(pt, pool, 1, d);
    p->stats.bytes_written += pt->total;
  }
  dcr__pool_free(pool);
  for (unsigned w = 0; pt->it && w < threads; w++) dcr_changes_free(pt->it[w]);
  for (unsigned w = 0; pt->base && w < threads; w++) free(pt->base[w]);
  free(pt->it), free(pt->base), free(pt->rc), free(pt->detail);
  return rc;
}

int dcr_patch_placed(dcr_patch *p, dcr_place_fn place, void *opaque, dcr_detail *d) {
  dcr_detail scratch;
  if (!d) d = &scratch;
  dcr__detail_init(d);
  memset(&p->stats, 0, sizeof p->stats);
  if (!place) return dcr__fail(d, DCR_E_ARGUMENT, "no placer");
  const dcr_reader *r = p->r;
  size_t chunks = (size_t)r->chunk_count + 1;
  placer pt = {.p = p, .h = calloc((size_t)r->man.entry_count + 1, sizeof *pt.h),
               .jobs = malloc(chunks * sizeof *pt.jobs), .state = calloc(chunks, 1),
               .kept = calloc(chunks, sizeof *pt.kept)};
  int rc = pt.h && pt.jobs && pt.state && pt.kept ? resolve(&pt, place, opaque, d)
                                                  : dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  if (!rc) rc = work(&pt, d);
  for (size_t j = 0; pt.kept && j < pt.job_count; j++) free(pt.kept[j]);
  free(pt.h), free(pt.jobs), free(pt.state), free(pt.kept);
  return rc;
}
