/*
 * squash.c - dcr_squash: bundles b1 … bn that follow one another in, one bundle
 * from b1's base to bn's target out (SPEC.md §10.4).
 *
 * The result's manifest takes its base side from b1 and its target side, prefix
 * and metadata from bn; its identities follow, so no tensor is hashed. Its chunks
 * are jobs in index order, each the result's chunk c of one tensor, made on
 * worker threads in one of four ways, cheapest first:
 *  - carried by one bundle alone, of a tensor that every bundle codes against its
 *    base: that bundle's chunk, copied (its base is b1's and its target bn's);
 *  - its first base_check equal to its last target_check (§8.2): back where it
 *    began, so dropped;
 *  - without the base: the bundles' changes composed per element (compose.c),
 *    and coded by the smallest encoding of the result's op;
 *  - with the base (or for tensors added along the chain, from the zeros they
 *    were added as): the chunk rebuilt in memory by applying each bundle's chunk
 *    in turn, with every check of R-APL-2, then coded against the base's chunk
 *    by the encoder's own chunk coder, as dcr encode would.
 * The calling thread writes results in job order, so the bytes do not depend on
 * the thread count. Memory is a few chunk buffers per thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "../format/atomic.h"
#include "squash.h"

#define NONE UINT32_MAX

typedef struct {
  uint32_t entry, chunk; /* the result's */
} job;

typedef struct {
  dcr__chunk_decoder dec;
  dcr__chunk_encoder enc;
  dcr__composer comp;
  uint8_t *base, *work, *pieces, *scratch;
  size_t scratch_capacity;
  const dcr__chunk **carrier; /* per bundle: its CHNK of the job's chunk, or NULL */
  dcr__chunk out;      /* the result's record; count 0: not carried */
  const uint8_t *data; /* its encoded data, valid until the slot's next job */
  size_t length, bytes;
  int rc;
  dcr_detail detail;
} slot;

typedef struct {
  const dcr_squash_options *opt;
  const char *const *paths;
  size_t count;        /* bundles */
  dcr_reader **r;
  dcr_limits lim;
  int max_minor;       /* the newest 1.x the result may need */
  dcr__manifest man;   /* the result's; names and descriptors point into the readers */
  uint8_t *prefix;     /* a set's: its set table (else the prefix is bn's) */
  uint32_t *where;     /* [entry * count + j]: the entry's index in bundle j, or NONE */
  uint8_t *all_delta;  /* per entry: delta-coded by every bundle */
  dcr_checkpoint *base;
  uint64_t *base_offset; /* per b1 entry: its base tensor's offset in the base file */
  job *jobs;
  size_t job_count;
  slot *slots;
  size_t slot_count;
  size_t buffer_size;  /* the largest chunk of any bundle */
  dcr__writer w;
  dcr__index_builder index;
  uint64_t done, total; /* bytes of the jobs taken, for progress */
  dcr_encode_stats stats;
  int classed;          /* the chunk encoders' `classed` for chunks made anew */
  uint8_t *sliced;      /* per entry: 1 = never ranked (options.sliced), or NULL */
} squasher;

/* The options' layout is the ABI ("Growing structs" in dcr.h). */
_Static_assert(sizeof(void *) != 8 || (sizeof(dcr_squash_options) == 104 &&
                                       offsetof(dcr_squash_options, sliced) == 56 &&
                                       offsetof(dcr_squash_options, reserved_) == 72),
               "dcr_squash_options changed size");

void dcr_squash_options_default(dcr_squash_options *o) {
  memset(o, 0, sizeof *o);
  o->level = 3;
  o->max_minor = -1;
}

static const dcr__entry *entry_in(const squasher *s, uint32_t i, size_t j) {
  uint32_t k = s->where[(size_t)i * s->count + j];
  return k == NONE ? NULL : &s->r[j]->man.entries[k];
}

/* The CHNK of (tensor, chunk) in r (records are in that order, §8.3), or NULL. */
static const dcr__chunk *find_record(const dcr_reader *r, uint32_t tensor, uint32_t chunk) {
  size_t lo = 0, hi = (size_t)r->chunk_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const dcr__chunk *c = &r->chunks[mid];
    if (c->tensor == tensor && c->chunk == chunk) return c;
    if (c->tensor < tensor || (c->tensor == tensor && c->chunk < chunk)) lo = mid + 1;
    else hi = mid;
  }
  return NULL;
}

/* ---- the chain and the result's manifest ---- */

/* Sets: the state ids leave raw members out (§2.3), so that b follows a needs
 * too that b's base raw members are a's target ones, hash for hash. On a
 * difference, names the member in d and returns 0. */
static int same_raw_members(const dcr_reader *a, const dcr_reader *b, dcr_detail *d) {
  const dcr__manifest *ma = &a->man, *mb = &b->man;
  uint64_t i = 0, j = 0;
  for (;;) {
    while (i < ma->entry_count && !(ma->entries[i].raw & DCR__HAS_TARGET)) i++;
    while (j < mb->entry_count && !(mb->entries[j].raw & DCR__HAS_BASE)) j++;
    if (i == ma->entry_count || j == mb->entry_count) break;
    const dcr__entry *x = &ma->entries[i++], *y = &mb->entries[j++];
    if (dcr__name_cmp(x->name, x->name_length, y->name, y->name_length) ||
        x->target.byte_length != y->base.byte_length || memcmp(x->target.hash, y->base.hash, 16))
      return dcr__detail_tensor(d, j - 1, y->name, y->name_length), 0;
  }
  return i == ma->entry_count && j == mb->entry_count;
}

static int open_chain(squasher *s, dcr_detail *d) {
  for (size_t j = 0; j < s->count; j++) {
    int rc = dcr_reader_open_file(&s->r[j], s->paths[j], &s->lim, d);
    if (rc) return rc;
  }
  if (s->opt->max_minor < 0) /* the default: the newest of the inputs' */
    for (size_t j = 0; j < s->count; j++)
      if ((int)s->r[j]->minor > s->max_minor) s->max_minor = (int)s->r[j]->minor;
  const dcr_reader *first = s->r[0];
  static const char *const kind_name[] = {"raw", "safetensors", "other", "set"};
  for (size_t j = 1; j < s->count; j++) {
    const dcr_reader *a = s->r[j - 1], *b = s->r[j];
    dcr__detail_file(d, s->paths[j]);
    if (b->man.kind != first->man.kind)
      return dcr__fail(d, DCR_E_ARGUMENT, "a bundle of %s checkpoints after one of %s (%s)",
                       kind_name[b->man.kind & 3], kind_name[first->man.kind & 3], s->paths[0]);
    if (b->man.chunk_size != first->man.chunk_size)
      return dcr__fail(d, DCR_E_ARGUMENT, "chunk size %u, where %s has %u: squash needs one "
                       "chunk size along the chain", b->man.chunk_size, s->paths[0],
                       first->man.chunk_size);
    if (memcmp(b->base_state, a->target_state, 16) || !same_raw_members(a, b, d))
      return dcr__fail(d, DCR_E_BASE_MISMATCH, "its base is not the target of %s, the bundle "
                       "before it: bundles must be given in order, each applying to the last "
                       "one's result", s->paths[j - 1]);
    dcr__detail_init(d);
  }
  return DCR_OK;
}

/* §6.3 and §7 for the base: b1's base tensors, and b1's base state id. */
static int open_base(squasher *s, const char *path, unsigned threads, dcr_detail *d) {
  const dcr_reader *r1 = s->r[0];
  uint8_t id[16];
  int rc = dcr_checkpoint_open(&s->base, path, r1->man.kind, &s->lim, d);
  s->base_offset = malloc((size_t)r1->man.entry_count * sizeof *s->base_offset + 1);
  if (!rc && !s->base_offset) rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  if (!rc && s->opt->cancel) dcr_checkpoint_set_cancel(s->base, s->opt->cancel);
  if (!rc) rc = dcr__match_checkpoint(&r1->man, &s->base->ck, 0, s->base_offset, d);
  if (!rc) rc = dcr_checkpoint_state_id(s->base, threads, id, d);
  if (!rc && !DCR__CHECKSUM_OK(memcmp(id, r1->base_state, 16) == 0))
    rc = dcr__fail(d, DCR_E_BASE_MISMATCH, "its state id is not the base state of %s, the first "
                   "bundle", s->paths[0]);
  for (size_t i = 0; !rc && i < s->base->ck.count; i++) { /* a set's raw members (§10.1) */
    const dcr__tensor *t = &s->base->ck.tensors[i];
    const dcr__entry *e = dcr__manifest_find(&r1->man, t->name, t->name_length);
    if (t->raw_member && !DCR__CHECKSUM_OK(memcmp(t->desc.hash, e->base.hash, 16) == 0))
      dcr__detail_tensor(d, (uint64_t)(e - r1->man.entries), e->name, e->name_length),
      rc = dcr__fail(d, DCR_E_BASE_MISMATCH, "the file's hash is not its base hash in %s, the first "
                "bundle", s->paths[0]);
  }
  if (rc && !d->file[0]) dcr__detail_file(d, path);
  return rc;
}

/* The union of b1's base tensors and bn's target tensors, by name (§6.1). */
static int build_manifest(squasher *s, dcr_detail *d) {
  const dcr__manifest *m1 = &s->r[0]->man, *mn = &s->r[s->count - 1]->man;
  dcr__manifest *m = &s->man;
  size_t cap = (size_t)(m1->entry_count + mn->entry_count);
  m->entries = calloc(cap + 1, sizeof *m->entries);
  if (!m->entries) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate the manifest");
  size_t i = 0, j = 0, n = 0;
  while (i < m1->entry_count || j < mn->entry_count) {
    const dcr__entry *x = i < m1->entry_count ? &m1->entries[i] : NULL;
    const dcr__entry *y = j < mn->entry_count ? &mn->entries[j] : NULL;
    int c = !x ? 1 : !y ? -1 : dcr__name_cmp(x->name, x->name_length, y->name, y->name_length);
    int xb = c <= 0 && (x->presence & DCR__HAS_BASE), yt = c >= 0 && (y->presence & DCR__HAS_TARGET);
    i += c <= 0, j += c >= 0;
    if (!xb && !yt) continue; /* only in an intermediate checkpoint */
    dcr__entry *e = &m->entries[n++];
    const dcr__entry *named = xb ? x : y;
    e->name = named->name;
    e->name_length = named->name_length;
    if (xb) e->presence |= DCR__HAS_BASE, e->base = x->base, e->raw |= x->raw & DCR__HAS_BASE;
    if (yt) e->presence |= DCR__HAS_TARGET, e->target = y->target, e->raw |= y->raw & DCR__HAS_TARGET;
    int both = xb && yt;
    e->resized = both && s->max_minor > 0 && !dcr__entry_delta_coded(e) && dcr__entry_resizable(e);
    s->stats.tensors_added += !xb;
    s->stats.tensors_removed += !yt;
    s->stats.tensors_recoded += both && !dcr__entry_delta_coded(e) && !e->resized;
    s->stats.tensors_resized += e->resized;
  }
  if (n > UINT32_MAX) return dcr__fail(d, DCR_E_LIMIT, "%zu tensors", n);
  m->entry_count = n;
  m->chunk_size = mn->chunk_size;
  m->kind = mn->kind;
  m->prefix = mn->prefix;
  m->prefix_length = mn->prefix_length;
  if (m->kind == DCR_KIND_SET) { /* bn's members, then b1's base raw paths (§6.6) */
    size_t head = mn->members_length, tail = (size_t)(m1->prefix_length - m1->members_length);
    if (!(s->prefix = malloc(head + tail)))
      return dcr__fail(d, DCR_E_NOMEM, "cannot allocate the set table");
    memcpy(s->prefix, mn->prefix, head);
    memcpy(s->prefix + head, m1->prefix + m1->members_length, tail);
    m->prefix = s->prefix;
    m->prefix_length = head + tail;
  }
  m->data_length = mn->data_length;
  unsigned minor = dcr__manifest_minor(m);
  if (minor > (unsigned)s->max_minor)
    return dcr__fail(d, DCR_E_ARGUMENT, "the result needs format 1.%u (a dtype added in 1.1), "
                     "over the 1.%d asked for", minor, s->max_minor);
  s->w.minor = minor;
  s->stats.format_minor = minor;
  return DCR_OK;
}

/* Each result entry's place in every bundle, and whether every bundle codes it
 * against its base bytes (then its chunks keep their geometry all along). */
static int map_entries(squasher *s, dcr_detail *d) {
  size_t n = (size_t)s->man.entry_count;
  s->where = malloc(n * s->count * sizeof *s->where + 1);
  s->all_delta = malloc(n + 1);
  if (!s->where || !s->all_delta) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  for (size_t i = 0; i < n; i++) {
    const dcr__entry *e = &s->man.entries[i];
    s->all_delta[i] = 1;
    for (size_t j = 0; j < s->count; j++) {
      const dcr__manifest *m = &s->r[j]->man;
      const dcr__entry *f = dcr__manifest_find(m, e->name, e->name_length);
      s->where[i * s->count + j] = f ? (uint32_t)(f - m->entries) : NONE;
      s->all_delta[i] &= f && dcr__entry_delta_coded(f);
    }
  }
  return DCR_OK;
}

static int by_number(const void *x, const void *y) {
  uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
  return (a > b) - (a < b);
}

/* The result's chunks that may change: for a tensor every bundle codes against
 * its base, those that some bundle carries; for any other, all of them (a
 * recoded or resized chunk can change with no CHNK at all). */
static int build_jobs(squasher *s, dcr_detail *d) {
  const dcr__manifest *m = &s->man;
  size_t cap = 0, most = 0;
  for (uint32_t i = 0; i < m->entry_count; i++) {
    const dcr__entry *e = &m->entries[i];
    if (!(e->presence & DCR__HAS_TARGET)) continue;
    uint64_t c = dcr__chunk_count(e->target.byte_length, m->chunk_size);
    if (c > UINT32_MAX - 1) return dcr__fail(d, DCR_E_LIMIT, "tensor of %llu chunks", (unsigned long long)c);
    cap += (size_t)c;
    most = c > most ? (size_t)c : most;
    s->stats.chunks += c;
    s->stats.elements += e->target.byte_length / dcr_dtype_size(e->target.dtype);
  }
  uint32_t *carried = malloc((most * s->count + 1) * sizeof *carried);
  s->jobs = malloc((cap + 1) * sizeof *s->jobs);
  if (!carried || !s->jobs) return free(carried), dcr__fail(d, DCR_E_NOMEM, "cannot allocate jobs");
  for (uint32_t i = 0; i < m->entry_count; i++) {
    const dcr__entry *e = &m->entries[i];
    if (!(e->presence & DCR__HAS_TARGET)) continue;
    uint32_t chunks = (uint32_t)dcr__chunk_count(e->target.byte_length, m->chunk_size);
    size_t k = 0;
    if (!s->all_delta[i]) {
      for (uint32_t c = 0; c < chunks; c++) carried[k++] = c;
    } else {
      for (size_t j = 0; j < s->count; j++) {
        const dcr_reader *r = s->r[j];
        uint32_t t = s->where[(size_t)i * s->count + j];
        for (uint64_t x = 0; x < r->chunk_count; x++) /* index order: one run per tensor */
          if (r->chunks[x].tensor == t) carried[k++] = r->chunks[x].chunk;
      }
      qsort(carried, k, sizeof *carried, by_number);
    }
    for (size_t x = 0; x < k; x++)
      if (!x || carried[x] != carried[x - 1]) {
        s->jobs[s->job_count++] = (job){i, carried[x]};
        s->total += dcr__chunk_bytes(m, e, carried[x]);
      }
  }
  free(carried);
  return DCR_OK;
}

/* ---- one chunk ---- */

/* A CHNK's encoded data, read into the slot. */
static int chunk_data(slot *sl, const dcr_reader *r, const dcr__chunk *c, const uint8_t **data,
                      size_t *length, dcr_detail *d) {
  const uint8_t *payload;
  int rc = dcr__source_get(&r->src, c->offset + DCR__SECTION_HEADER_SIZE, (size_t)c->payload_length,
                           &sl->scratch, &sl->scratch_capacity, &payload, d);
  *data = payload + DCR__RECORD_SIZE;
  *length = (size_t)c->payload_length - DCR__RECORD_SIZE;
  /* Decoders are made for the newest minor of the chain; each chunk is read by
   * the rules of its own bundle's (R-VER-4). */
  sl->dec.minor = r->minor;
  return rc;
}

/* R-APL-2 on bytes[0..bytes) in place: base_check, apply, target_check. */
static int apply_checked(slot *sl, const dcr_reader *r, const dcr__chunk *c, int dtype,
                         uint8_t *bytes, size_t length, dcr_detail *d) {
  const uint8_t *data;
  size_t n;
  size_t pieces = dcr__pieces(bytes, length, sl->pieces);
  if (!DCR__CHECKSUM_OK(dcr__pieces_check(sl->pieces, pieces) == c->base_check))
    return dcr__fail(d, DCR_E_BASE_MISMATCH, "the chunk before this bundle does not give its "
                     "base checksum: the bundles before it do not lead here");
  int rc = chunk_data(sl, r, c, &data, &n, d);
  if (!rc) rc = dcr__decode_chunk(&sl->dec, c, data, n, dtype, length / dcr_dtype_size(dtype),
                                  bytes, d);
  if (!rc) {
    dcr__pieces(bytes, length, sl->pieces);
    if (!DCR__CHECKSUM_OK(dcr__pieces_check(sl->pieces, pieces) == c->target_check))
      rc = dcr__fail(d, DCR_E_TARGET_MISMATCH, "applied chunk does not match the bundle's "
                     "target checksum");
  }
  if (rc && !d->section[0] && rc != DCR_E_BASE_MISMATCH) dcr__detail_at(d, "CHNK", c->offset);
  return rc;
}

static void take_encoded(slot *sl, const dcr__encoded *e) {
  sl->out.encoding = e->encoding;
  sl->out.compression = e->compression;
  sl->out.count = e->count;
  sl->data = e->data;
  sl->length = e->length;
}

/* The chunk rebuilt: from the zeros of the last bundle that codes it against
 * zeros, else from the base, each bundle's chunk applied in turn; then coded
 * against the result's base chunk (the base's bytes, or zeros, §6.5). */
static int rebuild(squasher *s, slot *sl, const job *jb, dcr_detail *d) {
  const dcr__entry *e = &s->man.entries[jb->entry];
  uint64_t at = (uint64_t)jb->chunk * s->man.chunk_size;
  size_t start = 0, from_base = 0; /* start: the bundle the walk begins at */
  for (size_t j = s->count; j-- > 0;) {
    const dcr__entry *f = entry_in(s, jb->entry, j);
    if (!dcr__entry_base_span(f, at, dcr__chunk_bytes(&s->r[j]->man, f, jb->chunk))) {
      start = j;
      break;
    }
    from_base = j == 0;
  }
  size_t span = (size_t)dcr__entry_base_span(e, at, sl->bytes);
  if ((from_base || span) && !s->base)
    return dcr__fail(d, DCR_E_ARGUMENT, "the tensor is added, removed, recoded or resized along "
                     "the chain and this chunk depends on the base's bytes: squash needs the base "
                     "(--base, or base_path)");
  size_t have = 0; /* base bytes read */
  if (from_base || span) {
    const dcr__entry *f = entry_in(s, jb->entry, 0);
    uint64_t left = f->base.byte_length - at;
    have = left < s->man.chunk_size ? (size_t)left : s->man.chunk_size;
    int rc = dcr__checkpoint_pread(&s->base->ck, sl->base, have,
                                   s->base_offset[s->where[(size_t)jb->entry * s->count]] + at, d);
    if (rc) return dcr__detail_file(d, s->base->path), rc;
  }
  if (from_base) memcpy(sl->work, sl->base, have);
  for (size_t j = start; j < s->count; j++) {
    const dcr__entry *f = entry_in(s, jb->entry, j);
    size_t bytes = dcr__chunk_bytes(&s->r[j]->man, f, jb->chunk);
    size_t kept = (size_t)dcr__entry_base_span(f, at, bytes); /* the rest: zeros (§6.5) */
    memset(sl->work + kept, 0, bytes - kept);
    const dcr__chunk *c = find_record(s->r[j], s->where[(size_t)jb->entry * s->count + j], jb->chunk);
    int rc = c ? apply_checked(sl, s->r[j], c, f->target.dtype, sl->work, bytes, d) : DCR_OK;
    if (rc) return dcr__detail_file(d, s->paths[j]), rc;
  }
  memset(sl->base + span, 0, sl->bytes - span);
  dcr__encoded out;
  sl->enc.classed = s->sliced && s->sliced[jb->entry] ? 0 : s->classed;
  if (dcr__encode_chunk(&sl->enc, sl->base, sl->work, sl->bytes, e->target.dtype, &out))
    return dcr__fail(d, DCR_E_NOMEM, "cannot encode chunk");
  take_encoded(sl, &out);
  sl->out.base_check = out.base_check;
  sl->out.target_check = out.target_check;
  return DCR_OK;
}

/* The chunk's changes composed from the bundles that carry it (first..last). */
static int compose(squasher *s, slot *sl, const job *jb, const dcr__chunk *const *carrier,
                   dcr_detail *d) {
  int dtype = s->man.entries[jb->entry].target.dtype;
  unsigned esize = dcr_dtype_size(dtype);
  size_t n = sl->bytes / esize, count = 0;
  int op = DCR__OP_XOR, rc = DCR_OK;
  dcr__compose_start(&sl->comp, n, esize);
  for (size_t j = 0; !rc && j < s->count; j++) {
    const dcr__chunk *c = carrier[j];
    const uint8_t *data, *planes = NULL;
    size_t length;
    if (!c) continue;
    if (dcr__enc_ranked(c->encoding))
      rc = dcr__fail(d, DCR_E_ARGUMENT, "%s chunk (format 1.%d): its positions depend on this "
                     "bundle's base, so composing it needs the base",
                     dcr_encoding_name(c->encoding), c->encoding == DCR_ENC_DELTA_BANDED ? 3 : 2);
    if (!rc) rc = chunk_data(sl, s->r[j], c, &data, &length, d);
    if (!rc) rc = dcr__chunk_streams(&sl->dec, c, data, length, dtype, n, &planes, d);
    /* checked without a chunk, every position is left in dec.pos */
    if (!rc) rc = dcr__apply_streams(&sl->dec, c, planes, dtype, n, NULL, d);
    int sparse = dcr__enc_sparse(c->encoding);
    if (!rc) rc = dcr__compose_add(&sl->comp, dcr__enc_op(c->encoding), sparse ? sl->dec.pos : NULL,
                                   planes, sparse ? c->count : n, d);
    if (rc) dcr__detail_file(d, s->paths[j]), dcr__detail_at(d, "CHNK", c->offset);
  }
  if (!rc) rc = dcr__compose_end(&sl->comp, &op, sl->enc.pos, sl->enc.old, &count, d);
  if (rc == DCR_E_ARGUMENT)
    snprintf(d->message + strlen(d->message), sizeof d->message - strlen(d->message),
             " (--base, or base_path)");
  if (rc) return rc;
  dcr__encoded out;
  if (dcr__encode_changes(&sl->enc, op, sl->enc.pos, sl->enc.old, count, n, esize, &out))
    return dcr__fail(d, DCR_E_NOMEM, "cannot encode chunk");
  take_encoded(sl, &out);
  return DCR_OK;
}

static int make_chunk(squasher *s, slot *sl, const job *jb, dcr_detail *d) {
  if (!s->all_delta[jb->entry]) return rebuild(s, sl, jb, d);
  const dcr__chunk *first = NULL, *last = NULL;
  size_t carriers = 0, only = 0;
  for (size_t j = 0; j < s->count; j++) {
    const dcr__chunk *c = find_record(s->r[j], s->where[(size_t)jb->entry * s->count + j], jb->chunk);
    sl->carrier[j] = c;
    if (c) first = first ? first : c, last = c, carriers++, only = j;
  }
  /* §8.2: the bundles between first and last leave the chunk's bytes as they are */
  sl->out.base_check = first->base_check;
  sl->out.target_check = last->target_check;
  int needs = first->encoding == DCR_ENC_DELTA_BANDED    ? 3
              : first->encoding == DCR_ENC_DELTA_CLASSED ? 2
                                                         : 0;
  /* a ranked chunk of a tensor held in part is made anew without ranks */
  int unranked = needs && s->sliced && s->sliced[jb->entry];
  if (carriers == 1 && s->max_minor >= needs && !unranked) {
    int dtype = s->man.entries[jb->entry].target.dtype;
    int rc = chunk_data(sl, s->r[only], first, &sl->data, &sl->length, d);
    /* the chunk stage (§15.4): the copy must be a valid chunk */
    if (!rc) rc = dcr__decode_chunk(&sl->dec, first, sl->data, sl->length, dtype,
                                    sl->bytes / dcr_dtype_size(dtype), NULL, d);
    if (rc) return dcr__detail_file(d, s->paths[only]), dcr__detail_at(d, "CHNK", first->offset), rc;
    sl->out.encoding = first->encoding;
    sl->out.compression = first->compression;
    sl->out.count = first->count;
    return DCR_OK;
  }
  if (DCR__CHECKSUM_OK(first->base_check == last->target_check)) return DCR_OK;
  return s->base ? rebuild(s, sl, jb, d) : compose(s, sl, jb, sl->carrier, d);
}

static void run_job(void *ctx, size_t j, unsigned worker) {
  (void)worker;
  squasher *s = ctx;
  const job *jb = &s->jobs[j];
  slot *sl = &s->slots[j % s->slot_count];
  const dcr__entry *e = &s->man.entries[jb->entry];
  dcr__detail_init(&sl->detail);
  sl->out = (dcr__chunk){.tensor = jb->entry, .chunk = jb->chunk};
  sl->length = 0;
  sl->bytes = dcr__chunk_bytes(&s->man, e, jb->chunk);
  sl->rc = make_chunk(s, sl, jb, &sl->detail);
  if (sl->rc) {
    dcr__detail_tensor(&sl->detail, jb->entry, e->name, e->name_length);
    dcr__detail_chunk(&sl->detail, jb->chunk);
  }
}

/* Takes job j's result (dcr__take_fn): its CHNK, in index order. */
static int take_job(void *ctx, size_t j, dcr_detail *d) {
  squasher *s = ctx;
  slot *sl = &s->slots[j % s->slot_count];
  if (sl->rc) return *d = sl->detail, sl->rc;
  s->done += sl->bytes;
  if (s->opt->progress) s->opt->progress(s->opt->progress_opaque, s->done, s->total);
  if (!sl->out.count) return DCR_OK;
  dcr__chunk *c = dcr__index_push(&s->index, d);
  if (!c) return DCR_E_NOMEM;
  *c = sl->out;
  c->payload_length = DCR__RECORD_SIZE + sl->length;
  uint8_t rec[DCR__RECORD_SIZE];
  dcr__chunk_record_write(rec, c);
  s->stats.changed_chunks++;
  s->stats.changed_elements += c->count;
  if (c->encoding == DCR_ENC_DELTA_CLASSED) s->stats.chunks_delta_classed++;
  else if (c->encoding == DCR_ENC_DELTA_BANDED) s->stats.chunks_delta_banded++;
  else s->stats.chunks_by_encoding[c->encoding]++;
  return dcr__writer_section(&s->w, DCR__SEC_CHNK, rec, sizeof rec, sl->data, sl->length,
                             &c->offset, d);
}

static int make_slots(squasher *s, size_t count, dcr_detail *d) {
  size_t cs = s->buffer_size;
  s->slot_count = count;
  s->slots = calloc(count, sizeof *s->slots);
  if (!s->slots) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate slots");
  /* DELTA_CLASSED (DELTA_BANDED) is a candidate when the result may be 1.2 (1.3)
   * and the base is there to rebuild chunks against */
  int classed = s->classed = s->max_minor >= 2 && s->base ? s->max_minor : 0;
  for (size_t i = 0; i < count; i++) {
    slot *sl = &s->slots[i];
    sl->base = malloc(cs);
    sl->work = malloc(cs);
    sl->pieces = malloc(16 * DCR__PIECES(cs));
    sl->carrier = malloc(s->count * sizeof *sl->carrier);
    if (!sl->base || !sl->work || !sl->pieces || !sl->carrier ||
        dcr__chunk_decoder_init(&sl->dec, cs, DCR_FORMAT_MINOR) ||
        dcr__chunk_encoder_init(&sl->enc, cs, s->opt->level, classed) ||
        dcr__composer_init(&sl->comp, cs))
      return dcr__fail(d, DCR_E_NOMEM, "cannot allocate chunk buffers");
  }
  return DCR_OK;
}

static void squasher_free(squasher *s) {
  for (size_t i = 0; s->slots && i < s->slot_count; i++) {
    slot *sl = &s->slots[i];
    free(sl->base);
    free(sl->work);
    free(sl->pieces);
    free(sl->scratch);
    free(sl->carrier);
    dcr__chunk_decoder_free(&sl->dec);
    dcr__chunk_encoder_free(&sl->enc);
    dcr__composer_free(&sl->comp);
  }
  free(s->slots);
  for (size_t j = 0; s->r && j < s->count; j++) dcr_reader_free(s->r[j]);
  free(s->r);
  dcr_checkpoint_free(s->base);
  free(s->base_offset);
  free(s->man.entries);
  free(s->prefix);
  free(s->where);
  free(s->all_delta);
  free(s->sliced);
  free(s->jobs);
  free(s->index.records);
}

static int check_arguments(const char *const *paths, size_t count, const char *base,
                           const char *out, const dcr_squash_options *o, dcr_detail *d) {
  if (!paths || !count || !out)
    return dcr__fail(d, DCR_E_ARGUMENT, "squash needs at least one bundle and an output");
  if (o->level < 0 || o->level > ZSTD_maxCLevel())
    return dcr__fail(d, DCR_E_ARGUMENT, "zstd level %d outside 0..%d", o->level, ZSTD_maxCLevel());
  if (o->threads > 1024) return dcr__fail(d, DCR_E_ARGUMENT, "%u threads", o->threads);
  if (o->max_minor < -1 || o->max_minor > DCR_FORMAT_MINOR)
    return dcr__fail(d, DCR_E_ARGUMENT, "format 1.%d: this library writes 1.0 to 1.%d",
                     o->max_minor, DCR_FORMAT_MINOR);
  /* The output replaces the file at out_path: never one of the inputs (a hard or
   * symbolic link to it included), which would be lost. */
  struct stat so, si;
  if (stat(out, &so)) return DCR_OK;
  for (size_t j = 0; j <= count; j++) {
    const char *in = j < count ? paths[j] : base;
    if (in && !stat(in, &si) && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
      return dcr__detail_file(d, out),
             dcr__fail(d, DCR_E_ARGUMENT, "the output is an input (%s): choose another", in);
  }
  return DCR_OK;
}

int dcr_squash(const char *const *bundle_paths, size_t count, const char *base_path,
               const char *out_path, const dcr_squash_options *opt, dcr_encode_stats *stats,
               dcr_detail *d) {
  dcr_detail scratch;
  if (!d) d = &scratch;
  dcr__detail_init(d);
  dcr_squash_options defaults;
  if (!opt) dcr_squash_options_default(&defaults), opt = &defaults;
  squasher s = {.opt = opt, .paths = bundle_paths, .count = count, .max_minor = opt->max_minor,
                .w = {.level = opt->level}};
  dcr_limits_default(&s.lim);
  if (opt->max_memory) s.lim.max_memory = opt->max_memory;
  unsigned threads = opt->threads ? opt->threads : dcr_default_threads();
  dcr__pool *pool = NULL;
  dcr__file_sink f = {.out = {.fd = -1, .dir_fd = -1}};
  int rc = check_arguments(bundle_paths, count, base_path, out_path, opt, d);
  if (!rc && !(s.r = calloc(count, sizeof *s.r))) rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  if (!rc) rc = open_chain(&s, d);
  if (!rc && base_path) rc = open_base(&s, base_path, threads, d);
  if (!rc) rc = build_manifest(&s, d);
  if (!rc) rc = map_entries(&s, d);
  if (!rc) rc = dcr__match_entries(&s.man, opt->sliced, opt->sliced_count, "the bundles", &s.sliced,
                                   NULL, d);
  if (!rc) rc = build_jobs(&s, d);
  if (!rc) {
    for (size_t j = 0; j < count; j++) {
      size_t cs = dcr__max_chunk_bytes(&s.r[j]->man);
      s.buffer_size = cs > s.buffer_size ? cs : s.buffer_size;
    }
    /* two slots per thread, each about twelve chunk buffers (decoder, encoder,
     * base, work, composer) */
    threads = dcr__threads_within(threads, 24 * (uint64_t)s.buffer_size, s.lim.max_memory);
    threads = dcr__threads_for_jobs(threads, s.job_count, s.total);
    if (dcr__pool_create(&pool, threads)) rc = dcr__fail(d, DCR_E_NOMEM, "cannot start threads");
  }
  if (!rc) rc = make_slots(&s, dcr__pool_window(pool), d);
  unsigned flags = (opt->no_replace ? 0 : DCR__ATOMIC_REPLACE) | (opt->no_sync ? 0 : DCR__ATOMIC_SYNC);
  if (!rc) rc = dcr__atomic_open(&f.out, out_path, flags, d);
  s.w.write = dcr__file_sink_write;
  s.w.opaque = &f;
  if (!rc) { /* bn's metadata: what the result's target is (§6.4) */
    const dcr__metadata *meta = &s.r[count - 1]->meta;
    rc = dcr__write_head(&s.w, &s.man, &s.lim, meta->pairs, (size_t)meta->count, d);
  }
  if (!rc) rc = dcr__pool_stream(pool, s.job_count, run_job, take_job, &s, opt->cancel, d);
  if (!rc) rc = dcr__write_tail(&s.w, &s.man, s.index.records, s.index.count, NULL, d);
  /* R-WRT-4: 1.2 (1.3) only if a chunk is DELTA_CLASSED (DELTA_BANDED), which is
   * known once every chunk is made; the header has no check over the rest of the
   * file, so it is written again (the output is a file of our own, not a stream). */
  unsigned needed = s.stats.chunks_delta_banded ? 3 : s.stats.chunks_delta_classed ? 2 : 0;
  if (!rc && needed > s.w.minor) {
    uint8_t h[DCR__HEADER_SIZE];
    dcr__header_write(h, s.w.minor = needed);
    s.stats.format_minor = needed;
    rc = dcr__pwrite_full(f.out.fd, h, sizeof h, 0, d);
  }
  if (rc == DCR_E_IO && f.error) { /* the output's fault: say so, and why */
    dcr__detail_file(d, out_path);
    snprintf(d->message, sizeof d->message, "cannot write the bundle: %s", strerror(f.error));
  }
  if (!rc) rc = dcr__atomic_commit(&f.out, d);
  dcr__atomic_abort(&f.out);
  dcr__pool_free(pool);
  s.stats.bundle_size = s.w.offset;
  s.stats.target_size = s.man.prefix_length + s.man.data_length;
  if (stats) *stats = s.stats;
  squasher_free(&s);
  return rc;
}
