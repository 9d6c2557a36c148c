/*
 * journal.c - the apply journal (SPEC.md §18): a redo log of the new bytes of an
 * in-place apply, written and made durable before the checkpoint is touched, so
 * that a crash at any moment leaves a checkpoint that the journal finishes.
 *
 * Records say "these elements of this region get these values": overwrites, never
 * XORs or deltas, so replaying a record twice, or over a region that a torn write
 * left half new, gives the same bytes. Each record carries the XXH3-64 of its
 * region once written, which a replay checks before it writes, so a journal never
 * writes into a file it was not made for.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "refit.h"

static const uint8_t MAGIC[8] = {0x89, 'D', 'C', 'J', '\r', '\n', 0x1A, '\n'};
static const uint8_t END[8] = {'D', 'C', 'J', 'E', 'N', 'D', '\r', '\n'};
#define MAJOR 1
#define MINOR 1 /* 1.1: published by rename (SPEC.md §18.4) */
#define MINOR_MEMBERS 2 /* 1.2: member records, a directory's journal (§18.6) */
/* A region is at most a chunk (2^30), or a safetensors prefix (8 + max_header_size):
 * 2^31 bounds both, and what a replay allocates. */
#define MAX_REGION (1ull << 31)

int dcr__journal_path(const char *ckpt, char *out, size_t size, dcr_detail *d) {
  /* room for the temporary name too, so that both are made or neither */
  if ((size_t)snprintf(out, size, "%s%s%s", ckpt, DCR__JOURNAL_SUFFIX, DCR__JOURNAL_TEMP) >= size)
    return dcr__fail(d, DCR_E_ARGUMENT, "path too long for its journal");
  out[strlen(out) - strlen(DCR__JOURNAL_TEMP)] = 0;
  return DCR_OK;
}

/* The name a journal is written under until it is published (§18.1). */
static void temp_path(const char *path, char out[4200]) {
  if ((size_t)snprintf(out, 4200, "%s%s", path, DCR__JOURNAL_TEMP) >= 4200)
    out[0] = 0; /* dcr__journal_path leaves room: never reached */
}

/* ---- writing */

static int jwrite(dcr__jwriter *w, const void *p, size_t n, dcr_detail *d) {
  int rc = dcr__wio_write(w->faults, w->fd, p, n, w->length, d);
  if (rc) return rc;
  XXH3_64bits_update(&w->check, p, n);
  w->length += n;
  return DCR_OK;
}

int dcr__journal_create(dcr__jwriter *w, const char *path, uint64_t file_size,
                        const uint8_t base_state[16], const uint8_t target_state[16],
                        dcr__faults *faults, dcr_detail *d) {
  memset(w, 0, sizeof *w);
  w->faults = faults;
  temp_path(path, w->temp);
  /* A journal under its temporary name was never published, so it never reached
   * the checkpoint (§18.1): one left by a killed writer goes. O_EXCL then: two
   * writers would need the checkpoint's lock. 0600: it holds model weights,
   * readable by no one the checkpoint's owner did not choose. */
  if (unlink(w->temp) && errno != ENOENT)
    return dcr__fail(d, DCR_E_IO, "cannot remove %s: %s", w->temp, strerror(errno));
  w->fd = open(w->temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (w->fd < 0)
    return dcr__fail(d, DCR_E_IO, "cannot create the journal %s: %s", w->temp, strerror(errno));
  XXH3_INITSTATE(&w->check);
  XXH3_64bits_reset(&w->check);
  uint8_t h[DCR__JOURNAL_HEADER_SIZE] = {0};
  memcpy(h, MAGIC, 8);
  dcr__put16(h + 8, MAJOR);
  dcr__put16(h + 10, file_size == DCR__JOURNAL_DIRECTORY ? MINOR_MEMBERS : MINOR);
  if (file_size == DCR__JOURNAL_DIRECTORY) file_size = 0;
  dcr__put64(h + 16, file_size);
  memcpy(h + 24, base_state, 16);
  memcpy(h + 40, target_state, 16);
  dcr__put64(h + 56, XXH3_64bits(h, 56));
  return jwrite(w, h, sizeof h, d);
}

static void record_write(uint8_t out[DCR__JOURNAL_RECORD_SIZE], const dcr__jrecord *r) {
  dcr__put64(out, r->offset);
  dcr__put64(out + 8, r->length);
  out[16] = r->form;
  out[17] = r->element_size;
  out[18] = r->compression;
  out[19] = 0;
  dcr__put32(out + 20, r->count);
  dcr__put64(out + 24, r->stored_length);
  dcr__put64(out + 32, r->region_check);
}

int dcr__journal_append(dcr__jwriter *w, const dcr__jrecord *rec, const void *payload,
                        dcr_detail *d) {
  uint8_t h[DCR__JOURNAL_RECORD_SIZE];
  record_write(h, rec);
  int rc = jwrite(w, h, sizeof h, d);
  if (!rc) rc = jwrite(w, payload, (size_t)rec->stored_length, d);
  if (!rc) w->records++;
  return rc;
}

int dcr__journal_commit(dcr__jwriter *w, dcr_detail *d) {
  uint8_t t[DCR__JOURNAL_TRAILER_SIZE];
  memcpy(t, END, 8);
  dcr__put64(t + 8, w->records);
  dcr__put64(t + 16, w->length + DCR__JOURNAL_TRAILER_SIZE);
  XXH3_64bits_update(&w->check, t, 24);
  dcr__put64(t + 24, XXH3_64bits_digest(&w->check));
  int rc = dcr__wio_write(w->faults, w->fd, t, sizeof t, w->length, d);
  if (!rc) w->length += sizeof t;
  return rc;
}

int dcr__journal_publish(dcr__jwriter *w, const char *path, int sync, dcr_detail *d) {
  /* Durable before it has its name: a journal under its final name is whole, so
   * a reader that finds it torn knows it was damaged, not cut short (§18.4). */
  int rc = sync ? dcr__wio_sync(w->faults, w->fd, d) : DCR_OK;
  if (!rc && rename(w->temp, path))
    rc = dcr__fail(d, DCR_E_IO, "cannot rename the journal into place: %s", strerror(errno));
  if (!rc) w->published = 1;
  if (!rc && sync) rc = dcr__wio_sync_dir(w->faults, path, d);
  return rc;
}

void dcr__journal_abandon(dcr__jwriter *w) {
  if (w->fd >= 0) close(w->fd);
  w->fd = -1;
  if (!w->published && w->temp[0]) unlink(w->temp);
}

int dcr__jbuilder_init(dcr__jbuilder *b, size_t chunk_bytes) {
  memset(b, 0, sizeof *b);
  b->pos = malloc(chunk_bytes * sizeof *b->pos + 1);
  b->raw_capacity = DCR__POSITIONS_BOUND(chunk_bytes) + chunk_bytes;
  b->raw = malloc(b->raw_capacity);
  b->packed_capacity = ZSTD_compressBound(b->raw_capacity);
  b->packed = malloc(b->packed_capacity);
  b->cctx = ZSTD_createCCtx();
  if (!b->pos || !b->raw || !b->packed || !b->cctx) {
    dcr__jbuilder_free(b);
    return DCR_E_NOMEM;
  }
  /* The §4.4 profile, so that a reader checks journal frames as it checks a
   * bundle's; level 1: the journal is written once and read at most twice. */
  ZSTD_CCtx_setParameter(b->cctx, ZSTD_c_compressionLevel, 1);
  ZSTD_CCtx_setParameter(b->cctx, ZSTD_c_contentSizeFlag, 1);
  ZSTD_CCtx_setParameter(b->cctx, ZSTD_c_dictIDFlag, 0);
  return DCR_OK;
}

void dcr__jbuilder_free(dcr__jbuilder *b) {
  free(b->pos);
  free(b->raw);
  free(b->packed);
  ZSTD_freeCCtx(b->cctx);
  memset(b, 0, sizeof *b);
}

int dcr__jbuilder_elements(dcr__jbuilder *b, const uint8_t *before, const uint8_t *after,
                           size_t length, unsigned esize, dcr__jrecord *rec,
                           const uint8_t **payload, dcr_detail *d) {
  size_t n = length / esize, count = dcr__detect(before, after, n, esize, b->pos);
  memset(rec, 0, sizeof *rec);
  if (!count) return DCR_OK;
  uint32_t first = b->pos[0], last = b->pos[count - 1];
  for (size_t i = 0; i < count; i++) b->pos[i] -= first;
  size_t used = dcr__positions_write(b->raw, b->pos, count);
  for (size_t i = 0; i < count; i++)
    memcpy(b->raw + used + i * esize, after + ((size_t)b->pos[i] + first) * esize, esize);
  size_t raw = used + count * esize;
  rec->form = DCR__JREC_ELEMENTS;
  rec->element_size = (uint8_t)esize;
  rec->count = (uint32_t)count;
  rec->offset = (uint64_t)first * esize; /* relative to `before`; the caller adds the rest */
  rec->length = (uint64_t)(last - first + 1) * esize;
  rec->region_check = XXH3_64bits(after + rec->offset, (size_t)rec->length);
  size_t z = ZSTD_compress2(b->cctx, b->packed, b->packed_capacity, b->raw, raw);
  if (ZSTD_isError(z)) return dcr__fail(d, DCR_E_NOMEM, "zstd: %s", ZSTD_getErrorName(z));
  rec->compression = z < raw;
  rec->stored_length = z < raw ? z : raw;
  *payload = z < raw ? b->packed : b->raw;
  return DCR_OK;
}

/* ---- reading */

static int malformed(dcr_detail *d, uint64_t at, const char *what) {
  dcr__detail_at(d, NULL, at); /* no section: "" would be read as 4 bytes */
  return dcr__fail(d, DCR_E_JOURNAL, "%s", what);
}

static void record_parse(const uint8_t *p, dcr__jrecord *r) {
  r->offset = dcr__le64(p);
  r->length = dcr__le64(p + 8);
  r->form = p[16];
  r->element_size = p[17];
  r->compression = p[18];
  r->reserved = p[19];
  r->count = dcr__le32(p + 20);
  r->stored_length = dcr__le64(p + 24);
  r->region_check = dcr__le64(p + 32);
}

/* §18.3 step 7: one record header, against the file and the previous record. */
static int check_record(const dcr__jrecord *r, uint64_t file_size, uint64_t previous_end,
                        uint64_t left, uint64_t at, dcr_detail *d) {
  unsigned es = r->element_size;
  if (r->form > DCR__JREC_MEMBER) return malformed(d, at, "unknown record form");
  if (r->form == DCR__JREC_MEMBER) return DCR_OK; /* check_member */
  if (r->compression > DCR_COMP_ZSTD || r->reserved)
    return malformed(d, at, "unknown compression or reserved byte set");
  if (r->form == DCR__JREC_BYTES ? es != 1 || r->count : es != 1 && es != 2 && es != 4 && es != 8)
    return malformed(d, at, "element size or count wrong for the record's form");
  if (!r->length || r->length % es || r->length > MAX_REGION)
    return malformed(d, at, "region length is 0, not whole elements, or over 2^31");
  if (r->form == DCR__JREC_ELEMENTS && (!r->count || r->count > r->length / es))
    return malformed(d, at, "count outside 1..elements in the region");
  if (r->offset < previous_end || r->offset > file_size || r->length > file_size - r->offset)
    return malformed(d, at, "region overlaps the previous one or lies beyond the file");
  if (r->stored_length > left) return malformed(d, at, "payload runs past the trailer");
  return DCR_OK;
}

/* §18.6: a member record, whose payload (its path) is read here, against the
 * previous record's path (prev, *prev_length bytes; 0: the first). */
static int check_member(int fd, const dcr__jrecord *r, uint64_t file_size, uint64_t left,
                        uint64_t at, char prev[DCR__JOURNAL_PATH_MAX], size_t *prev_length,
                        dcr_detail *d) {
  char path[DCR__JOURNAL_PATH_MAX];
  if (file_size) return malformed(d, 16, "member records in a journal for a file of bytes");
  if (r->element_size != 1 || r->compression || r->reserved || r->count > DCR__JOP_REMOVE)
    return malformed(d, at, "member record: element size, compression, reserved byte or "
                     "operation wrong");
  if (!r->length || r->length > DCR__JOURNAL_PATH_MAX || r->stored_length != r->length)
    return malformed(d, at, "member record: path length 0, over 4096, or not its payload's");
  if (r->count == DCR__JOP_REMOVE && (r->offset || r->region_check))
    return malformed(d, at, "member record: a removal with a size or check");
  if (r->stored_length > left) return malformed(d, at, "payload runs past the trailer");
  size_t n = (size_t)r->length;
  int rc = dcr__pread_full(fd, path, n, at + DCR__JOURNAL_RECORD_SIZE, d);
  if (rc) return rc;
  if (!dcr__set_path_valid(path, n)) return malformed(d, at, "member record: not a member path");
  int order = memcmp(prev, path, n < *prev_length ? n : *prev_length);
  if (*prev_length && (order > 0 || (!order && *prev_length >= n)))
    return malformed(d, at, "member record: paths not in increasing order");
  memcpy(prev, path, n);
  *prev_length = n;
  return DCR_OK;
}

/* Steps 1-5 of §18.3. A full header whose magic is not ours is some other file,
 * and one of another major version or with the reserved field set is a newer
 * writer's: none of them is ever removed (j->foreign). An empty, zero-filled or
 * torn header says the journal is not committed (j->why). */
static int read_header(const uint8_t *h, uint64_t size, dcr__journal *j, dcr_detail *d) {
  static const uint8_t zeros[8];
  if (size < DCR__JOURNAL_HEADER_SIZE) return j->why = "shorter than its header", DCR_OK;
  if (!memcmp(h, zeros, 8)) return j->why = "its header is zeros", DCR_OK;
  if (memcmp(h, MAGIC, 8))
    return j->foreign = 1, malformed(d, 0, "not a dcr apply journal (bad magic)");
  if (dcr__le16(h + 8) != MAJOR) {
    j->foreign = 1;
    dcr__detail_at(d, NULL, 8); /* no section: "" would be read as 4 bytes */
    return dcr__fail(d, DCR_E_JOURNAL, "journal of major version %u; this reader knows %u only",
                     dcr__le16(h + 8), MAJOR);
  }
  if (!DCR__CHECKSUM_OK(dcr__le64(h + 56) == XXH3_64bits(h, 56)))
    return j->why = "its header check fails", DCR_OK;
  if (dcr__le32(h + 12)) return j->foreign = 1, malformed(d, 12, "reserved field set");
  j->header_ok = 1;
  j->file_size = dcr__le64(h + 16);
  memcpy(j->base_state, h + 24, 16);
  memcpy(j->target_state, h + 40, 16);
  return DCR_OK;
}

int dcr__journal_read(int fd, dcr__journal *j, dcr_detail *d) {
  memset(j, 0, sizeof *j);
  struct stat st;
  if (fstat(fd, &st)) return dcr__fail(d, DCR_E_IO, "cannot stat: %s", strerror(errno));
  uint64_t size = (uint64_t)st.st_size;
  uint8_t h[DCR__JOURNAL_HEADER_SIZE], t[DCR__JOURNAL_TRAILER_SIZE];
  int rc = dcr__pread_full(fd, h, size < sizeof h ? (size_t)size : sizeof h, 0, d);
  if (!rc) rc = read_header(h, size, j, d);
  if (rc || j->why) return rc;
  /* §18.3 step 6: committed when the trailer is there and checks the whole file. */
  if (size < DCR__JOURNAL_HEADER_SIZE + DCR__JOURNAL_TRAILER_SIZE)
    return j->why = "it has no trailer", DCR_OK;
  if ((rc = dcr__pread_full(fd, t, sizeof t, size - sizeof t, d))) return rc;
  if (memcmp(t, END, 8) || dcr__le64(t + 16) != size)
    return j->why = "it has no trailer, or one for another length", DCR_OK;
  XXH3_state_t st3;
  XXH3_INITSTATE(&st3);
  XXH3_64bits_reset(&st3);
  size_t step = size < (1 << 20) ? (size_t)size : (size_t)1 << 20;
  uint8_t *buf = malloc(step);
  if (!buf) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  for (uint64_t at = 0; at < size - 8 && !rc; at += step) {
    size_t n = size - 8 - at < step ? (size_t)(size - 8 - at) : step;
    if (!(rc = dcr__pread_full(fd, buf, n, at, d))) XXH3_64bits_update(&st3, buf, n);
  }
  free(buf);
  if (rc) return rc;
  if (!DCR__CHECKSUM_OK(XXH3_64bits_digest(&st3) == dcr__le64(t + 24)))
    return j->why = "its trailer's check fails", DCR_OK;
  /* Committed: from here on, anything wrong is an error, never a reason to drop it. */
  uint64_t count = dcr__le64(t + 8), end = size - sizeof t, at = DCR__JOURNAL_HEADER_SIZE;
  if (count > (end - at) / DCR__JOURNAL_RECORD_SIZE)
    return malformed(d, end, "more records than the journal can hold");
  j->records = malloc((size_t)count * sizeof *j->records + 1);
  if (!j->records) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  uint64_t previous_end = 0;
  char prev[DCR__JOURNAL_PATH_MAX];
  size_t prev_length = 0;
  for (uint64_t i = 0; i < count; i++) {
    uint8_t rh[DCR__JOURNAL_RECORD_SIZE];
    dcr__jrecord *r = &j->records[i];
    if (end - at < sizeof rh) return malformed(d, at, "record header runs past the trailer");
    if ((rc = dcr__pread_full(fd, rh, sizeof rh, at, d))) return rc;
    record_parse(rh, r);
    at += sizeof rh;
    if ((rc = check_record(r, j->file_size, previous_end, end - at, at - sizeof rh, d)))
      return rc;
    if (i && (r->form == DCR__JREC_MEMBER) != j->members)
      return malformed(d, at - sizeof rh, "member records mixed with region records");
    j->members = r->form == DCR__JREC_MEMBER;
    if (j->members && (rc = check_member(fd, r, j->file_size, end - at, at - sizeof rh, prev,
                                         &prev_length, d)))
      return rc;
    r->at = at;
    at += r->stored_length;
    previous_end = r->offset + r->length;
    j->count = i + 1;
  }
  if (at != end) return malformed(d, at, "bytes between the last record and the trailer");
  j->committed = 1;
  return DCR_OK;
}

void dcr__journal_free(dcr__journal *j) {
  free(j->records);
  memset(j, 0, sizeof *j);
}

/* ---- replaying */

typedef struct {
  uint8_t *stored, *raw, *region;
  size_t stored_capacity, raw_capacity, region_capacity;
  uint32_t *pos;
  size_t pos_capacity;
  ZSTD_DCtx *dctx;
  int rc;
  dcr_detail detail;
} rslot;

typedef struct {
  const dcr__journal *j;
  int journal_fd, ckpt_fd, check_only;
  dcr__faults *faults;
  rslot *slots;
  size_t window;
} replayer;

static int grow(uint8_t **p, size_t *capacity, size_t need) {
  if (need <= *capacity) return DCR_OK;
  uint8_t *q = realloc(*p, need);
  if (!q) return DCR_E_NOMEM;
  *p = q;
  *capacity = need;
  return DCR_OK;
}

/* The record's payload, decompressed as §18.2 says. */
static int load_payload(replayer *rp, rslot *s, const dcr__jrecord *r, const uint8_t **raw,
                        size_t *raw_length, dcr_detail *d) {
  size_t stored = (size_t)r->stored_length;
  uint64_t elements = r->length / r->element_size;
  uint64_t bound = r->form == DCR__JREC_BYTES
                       ? r->length
                       : DCR__POSITIONS_BOUND(elements) + (uint64_t)r->count * r->element_size;
  if (grow(&s->stored, &s->stored_capacity, stored + 1))
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  int rc = dcr__pread_full(rp->journal_fd, s->stored, stored, r->at, d);
  if (rc) return rc;
  if (r->compression == DCR_COMP_NONE) {
    *raw = s->stored;
    *raw_length = stored;
  } else {
    uint64_t size;
    size_t frame;
    rc = dcr__zframe_check(s->stored, stored, bound, DCR_E_JOURNAL, UINT64_MAX, &size, &frame, d);
    if (!rc && frame != stored) rc = dcr__fail(d, DCR_E_JOURNAL, "bytes after the zstd frame");
    if (!rc && grow(&s->raw, &s->raw_capacity, (size_t)size + 1))
      rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
    if (!rc) rc = dcr__zframe_decompress(s->dctx, s->stored, frame, s->raw, (size_t)size, d);
    if (rc) return rc == DCR_E_NOMEM ? rc : (d->code = DCR_E_JOURNAL, rc = DCR_E_JOURNAL);
    *raw = s->raw;
    *raw_length = (size_t)size;
  }
  if (r->form == DCR__JREC_BYTES && *raw_length != r->length)
    return dcr__fail(d, DCR_E_JOURNAL, "payload of %zu bytes for a region of %llu",
                     *raw_length, (unsigned long long)r->length);
  return DCR_OK;
}

/* Replays one record into s->region, which holds the region's current bytes. */
static int patch_region(rslot *s, const dcr__jrecord *r, const uint8_t *raw, size_t raw_length,
                        dcr_detail *d) {
  if (r->form == DCR__JREC_BYTES) {
    memcpy(s->region, raw, raw_length);
    return DCR_OK;
  }
  size_t es = r->element_size, n = (size_t)(r->length / es), used;
  /* The values must fit before positions are allocated for them: a few bytes must
   * not ask for gigabytes (same code as the exact check below). */
  if (raw_length <= (size_t)r->count * es)
    return dcr__fail(d, DCR_E_JOURNAL, "%zu bytes of content cannot hold %u elements",
                     raw_length, r->count);
  if (grow((uint8_t **)&s->pos, &s->pos_capacity, (size_t)r->count * sizeof *s->pos))
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  int rc = dcr__positions_read(raw, raw_length, r->count, n, s->pos, &used, d);
  if (rc) return d->code = DCR_E_JOURNAL, DCR_E_JOURNAL;
  if (raw_length - used != (size_t)r->count * es)
    return dcr__fail(d, DCR_E_JOURNAL, "values take %zu bytes; %u elements need %zu",
                     raw_length - used, r->count, (size_t)r->count * es);
  for (size_t i = 0; i < r->count; i++)
    memcpy(s->region + (size_t)s->pos[i] * es, raw + used + i * es, es);
  return DCR_OK;
}

static void replay_job(void *ctx, size_t i, unsigned worker) {
  (void)worker;
  replayer *rp = ctx;
  rslot *s = &rp->slots[i % rp->window];
  const dcr__jrecord *r = &rp->j->records[i];
  dcr_detail *d = &s->detail;
  const uint8_t *raw = NULL;
  size_t raw_length = 0, length = (size_t)r->length;
  dcr__detail_init(d);
  int rc = load_payload(rp, s, r, &raw, &raw_length, d);
  if (!rc && grow(&s->region, &s->region_capacity, length))
    rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  if (!rc) rc = dcr__pread_full(rp->ckpt_fd, s->region, length, r->offset, d);
  if (!rc) rc = patch_region(s, r, raw, raw_length, d);
  /* Checked in the pass that writes nothing; the writing pass follows one (a
   * recovery), or a writer's own checks of every chunk (dcr_patch_file). */
  if (!rc && rp->check_only && !DCR__CHECKSUM_OK(XXH3_64bits(s->region, length) == r->region_check))
    rc = dcr__fail(d, DCR_E_JOURNAL, "the region at offset %llu does not give the journal's "
                   "check: the journal is not for this file, or the file changed",
                   (unsigned long long)r->offset);
  if (!rc && !rp->check_only) rc = dcr__wio_write(rp->faults, rp->ckpt_fd, s->region, length,
                                                  r->offset, d);
  s->rc = rc;
}

static int replay_take(void *ctx, size_t i, dcr_detail *d) {
  replayer *rp = ctx;
  rslot *s = &rp->slots[i % rp->window];
  if (s->rc) *d = s->detail;
  return s->rc;
}

/* What replaying one record holds at once, at most: its payload as stored, its
 * content (compressed records), its positions and the region. */
static uint64_t record_memory(const dcr__jrecord *r) {
  uint64_t elements = r->length / r->element_size;
  uint64_t content = r->form == DCR__JREC_BYTES
                         ? r->length
                         : DCR__POSITIONS_BOUND(elements) + (uint64_t)r->count * r->element_size;
  return r->stored_length + (r->compression ? content : 0) + r->length +
         (r->form == DCR__JREC_ELEMENTS ? (uint64_t)r->count * sizeof(uint32_t) : 0);
}

int dcr__journal_replay(const dcr__journal *j, int journal_fd, int ckpt_fd, unsigned threads,
                        uint64_t max_memory, dcr__faults *faults, int check_only,
                        uint64_t *written, dcr_detail *d) {
  replayer rp = {.j = j, .journal_fd = journal_fd, .ckpt_fd = ckpt_fd, .check_only = check_only,
                 .faults = faults};
  struct stat st;
  if (j->members)
    return dcr__fail(d, DCR_E_JOURNAL, "a directory's journal (member records), not a file's");
  if (fstat(ckpt_fd, &st)) return dcr__fail(d, DCR_E_IO, "cannot stat: %s", strerror(errno));
  if ((uint64_t)st.st_size != j->file_size)
    return dcr__fail(d, DCR_E_JOURNAL, "the journal is for a file of %llu bytes; this one has "
                     "%llu", (unsigned long long)j->file_size, (unsigned long long)st.st_size);
  /* A record may declare a region of 2^31 bytes and a frame that fills it: known
   * before anything is allocated, and held to the budget as a chunk is. */
  uint64_t most = 0;
  for (uint64_t i = 0; i < j->count; i++)
    if (record_memory(&j->records[i]) > most) most = record_memory(&j->records[i]);
  if (most > max_memory)
    return dcr__fail(d, DCR_E_NOMEM, "replaying the journal needs %llu MiB for one record, over "
                     "the memory budget of %llu MiB (dcr_limits.max_memory, dcr --memory)",
                     (unsigned long long)(most >> 20), (unsigned long long)(max_memory >> 20));
  if (!threads) threads = dcr_default_threads();
  if (threads > j->count) threads = j->count ? (unsigned)j->count : 1;
  threads = dcr__threads_within(threads, 2 * most, max_memory); /* two slots a thread */
  dcr__pool *pool = NULL;
  int rc = dcr__pool_create(&pool, threads) ? DCR_E_NOMEM : DCR_OK;
  if (!rc) {
    rp.window = dcr__pool_window(pool);
    rp.slots = calloc(rp.window, sizeof *rp.slots);
    if (!rp.slots) rc = DCR_E_NOMEM;
    for (size_t i = 0; !rc && i < rp.window; i++)
      if (!(rp.slots[i].dctx = ZSTD_createDCtx())) rc = DCR_E_NOMEM;
  }
  if (rc) rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  else rc = dcr__pool_stream(pool, (size_t)j->count, replay_job, replay_take, &rp, NULL, d);
  dcr__pool_free(pool);
  for (size_t i = 0; rp.slots && i < rp.window; i++) {
    free(rp.slots[i].stored), free(rp.slots[i].raw), free(rp.slots[i].region);
    free(rp.slots[i].pos), ZSTD_freeDCtx(rp.slots[i].dctx);
  }
  free(rp.slots);
  if (!rc && written)
    for (uint64_t i = 0; i < j->count; i++) *written += j->records[i].length;
  return rc;
}

/* ---- recovering */

/* R-JNL-4: the checkpoint, read as it is, has one of the states that make removing
 * an unusable journal lose nothing: the journal's own base or target (when its
 * header can be trusted for them) or one the caller knows it is meant to be in.
 * A checkpoint that does not even parse (a part-written prefix) proves nothing. */
static int proven(const dcr__journal *j, int ckpt_fd, const dcr__recovery *how, int *yes,
                  dcr_detail *d) {
  struct dcr_checkpoint c = {.cancel = how->cancel};
  dcr_limits lim;
  dcr_detail ignored;
  uint8_t state[16];
  *yes = 0;
  dcr__limits_take(&lim, how->lim);
  if (dcr__checkpoint_read(ckpt_fd, DCR_KIND_SAFETENSORS, &lim, DCR_FORMAT_MINOR, &c.ck, &ignored))
    return DCR_OK;
  int rc = dcr_checkpoint_state_id(&c, how->threads, state, d);
  dcr__checkpoint_free(&c.ck);
  /* Out of memory or interrupted is the caller's to hear; a file that cannot be
   * hashed (cut short under us) proves nothing. */
  if (rc == DCR_E_NOMEM || rc == DCR_E_INTERRUPTED) return rc;
  if (rc) return DCR_OK;
  if (j->header_ok && (!memcmp(state, j->base_state, 16) || !memcmp(state, j->target_state, 16)))
    *yes = 1;
  for (size_t i = 0; i < how->known_count && !*yes; i++)
    *yes = !memcmp(state, how->known + 16 * i, 16);
  return DCR_OK;
}

/* The journal cannot be replayed (not committed, or a committed one that does
 * not fit the file): removed if the checkpoint is proven whole, else kept and
 * reported with the way out. `why` is what is wrong with it. */
static int unusable(const char *path, const dcr__journal *j, int ckpt_fd,
                    const dcr__recovery *how, const char *why, int *outcome, dcr_detail *d) {
  dcr__detail_init(d); /* what made it unusable is no longer the answer (why has it) */
  int yes, rc = proven(j, ckpt_fd, how, &yes, d);
  if (rc) return rc;
  if (yes) {
    if (unlink(path)) return dcr__fail(d, DCR_E_IO, "cannot remove the journal: %s", strerror(errno));
    *outcome = DCR_JOURNAL_DISCARDED;
    return how->sync ? dcr__wio_sync_dir(how->faults, path, d) : DCR_OK;
  }
  *outcome = DCR__JOURNAL_UNUSABLE;
  return dcr__fail(d, DCR_E_JOURNAL, "%s; the checkpoint is neither its base nor its target, so "
                   "an apply may have begun writing it", why);
}

int dcr__journal_recover(const char *ckpt, int ckpt_fd, const dcr__recovery *how, int *outcome,
                         dcr_detail *d) {
  char path[4200], temp[4200];
  *outcome = DCR_JOURNAL_NONE;
  int rc = dcr__journal_path(ckpt, path, sizeof path, d);
  if (rc) return rc;
  /* Never published, so never replayed into the checkpoint (§18.1, R-JNL-3). */
  temp_path(path, temp);
  if (unlink(temp) && errno != ENOENT)
    return dcr__detail_file(d, temp), dcr__fail(d, DCR_E_IO, "cannot remove: %s", strerror(errno));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) return DCR_OK;
  if (fd < 0) return dcr__fail(d, DCR_E_IO, "cannot open the journal %s: %s", path, strerror(errno));
  dcr__journal j;
  char why[sizeof d->message + 64];
  rc = dcr__journal_read(fd, &j, d);
  /* §18.4: every region is checked before the first is written, so a journal that
   * does not fit the file leaves the file as it was. */
  dcr_limits lim;
  dcr__limits_take(&lim, how->lim);
  if (!rc && j.committed)
    rc = dcr__journal_replay(&j, fd, ckpt_fd, how->threads, lim.max_memory, how->faults, 1, NULL, d);
  if (!rc && !j.committed) {
    snprintf(why, sizeof why, "the journal is torn or damaged (%s)", j.why);
    rc = unusable(path, &j, ckpt_fd, how, why, outcome, d);
  } else if (rc == DCR_E_JOURNAL && !j.foreign) {
    snprintf(why, sizeof why, "the journal cannot be replayed (%s)", d->message);
    rc = unusable(path, &j, ckpt_fd, how, why, outcome, d);
  } else if (!rc) {
    rc = dcr__journal_replay(&j, fd, ckpt_fd, how->threads, lim.max_memory, how->faults, 0, NULL, d);
    if (!rc && how->sync) rc = dcr__wio_sync(how->faults, ckpt_fd, d);
    if (!rc && unlink(path)) rc = dcr__fail(d, DCR_E_IO, "cannot remove the journal: %s", strerror(errno));
    if (!rc && how->sync) rc = dcr__wio_sync_dir(how->faults, path, d);
    if (!rc) *outcome = DCR_JOURNAL_REPLAYED;
  }
  if (rc == DCR_E_JOURNAL && j.foreign) *outcome = DCR__JOURNAL_FOREIGN;
  if (rc) dcr__detail_file(d, path);
  dcr__journal_free(&j);
  close(fd);
  return rc;
}

int dcr_journal_recover_known(const char *path, int sync, const uint8_t *states, size_t count,
                              int *outcome, dcr_detail *d) {
  dcr_detail scratch;
  int ignored;
  if (!d) d = &scratch;
  if (!outcome) outcome = &ignored;
  dcr__detail_init(d);
  *outcome = DCR_JOURNAL_NONE;
  if (count && !states) return dcr__fail(d, DCR_E_ARGUMENT, "no states");
  if (dcr__is_dir(path)) return dcr__dir_recover(path, sync, outcome, d);
  dcr__recovery how = {.sync = sync, .known = states, .known_count = count};
  int fd, rc = dcr__open_checkpoint(path, &fd, d);
  if (!rc) rc = dcr__journal_recover(path, fd, &how, outcome, d);
  if (rc && !d->file[0]) dcr__detail_file(d, path);
  if (fd >= 0) close(fd);
  return rc;
}

int dcr_journal_recover(const char *path, int sync, int *recovered, dcr_detail *d) {
  int outcome, rc = dcr_journal_recover_known(path, sync, NULL, 0, &outcome, d);
  if (recovered) *recovered = outcome == DCR_JOURNAL_REPLAYED;
  return rc;
}
