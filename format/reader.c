/*
 * reader.c - opens a bundle and checks its whole structure (SPEC.md §4-§8.3) by
 * walking its sections front to back, as a streaming reader would, then checks the
 * footer that a seeking reader would start from. Chunk contents are decoded by the
 * codec (verify, apply).
 *
 * A remote bundle is opened by the random-access profile (§21) instead: from the
 * footer, the same walk over every section but the chunks, whose places come from
 * the index; each chunk section is checked when it is used (dcr__chunk_payload).
 */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "xxh.h"

#include "format.h"

#define HASH_BLOCK (1u << 20)

typedef struct {
  dcr_reader *r;
  dcr_detail *d;
  uint8_t *scratch;
  size_t capacity;
  int seen_iden, seen_indx, seen_sign, seen_rsiz;
  uint64_t iden_offset, indx_offset, chunk_capacity, section_capacity;
} walk;

/* The payload check covers the stored bytes; padding up to 64 must be zero. */
static int check_payload(walk *w, const dcr__section *s) {
  const dcr__source *src = &w->r->src;
  uint64_t start = s->offset + DCR__SECTION_HEADER_SIZE;
  XXH3_state_t st;
  XXH3_INITSTATE(&st);
  XXH3_64bits_reset(&st);
  for (uint64_t done = 0; done < s->length;) {
    size_t n = s->length - done < HASH_BLOCK ? (size_t)(s->length - done) : HASH_BLOCK;
    const uint8_t *p = NULL;
    int rc = dcr__source_get(src, start + done, n, &w->scratch, &w->capacity, &p, w->d);
    if (rc) return rc;
    XXH3_64bits_update(&st, p, n);
    done += n;
    if (done % (64 * HASH_BLOCK) == 0 && w->r->lim.cancel && *w->r->lim.cancel)
      return dcr__fail(w->d, DCR_E_INTERRUPTED, "interrupted");
  }
  if (!DCR__CHECKSUM_OK(XXH3_64bits_digest(&st) == s->payload_check))
    return dcr__fail(w->d, DCR_E_CHECKSUM, "section payload checksum does not match");
  uint64_t end = start + s->length;
  const uint8_t *pad;
  int rc = dcr__source_get(src, end, (size_t)(dcr__align64(end) - end), &w->scratch,
                           &w->capacity, &pad, w->d);
  if (rc) return rc;
  for (uint64_t i = 0; i < dcr__align64(end) - end; i++)
    if (pad[i]) {
      if (w->d) w->d->offset = end + i;
      return dcr__fail(w->d, DCR_E_RESERVED, "padding byte is 0x%02x", pad[i]);
    }
  return DCR_OK;
}

/* What parsing a compressed MANI needs beside its inflated bytes, from its fixed
 * fields, which are inflated alone first: a frame that declares up to the budget
 * itself is refused before the rest of it is inflated, not after. */
static uint64_t manifest_need(const walk *w, const dcr__section *s, const uint8_t *stored) {
  uint8_t head[DCR__MANIFEST_HEAD];
  uint64_t size;
  size_t frame;
  if (dcr__zframe_check(stored, (size_t)s->length, w->r->lim.max_section_size, DCR_E_LIMIT,
                        UINT64_MAX, &size, &frame, NULL) ||
      dcr__zframe_head(stored, frame, head, sizeof head))
    return 0; /* the inflate reports what is wrong */
  return dcr__manifest_need(head, size, &w->r->lim, w->r->minor);
}

/* Copies (or inflates) a section payload into a buffer the caller owns. */
static int load_payload(walk *w, const dcr__section *s, uint8_t **out, size_t *length) {
  const uint8_t *p = NULL;
  int rc = dcr__source_get(&w->r->src, s->offset + DCR__SECTION_HEADER_SIZE, (size_t)s->length,
                           &w->scratch, &w->capacity, &p, w->d);
  if (rc) return rc;
  if (s->compression == DCR_COMP_ZSTD)
    return dcr__section_inflate(p, (size_t)s->length, w->r->lim.max_section_size,
                                w->r->lim.max_memory,
                                s->type == DCR__SEC_MANI ? manifest_need(w, s, p) : 0,
                                w->r->lim.cancel, out, length, w->d);
  *out = malloc(s->length ? (size_t)s->length : 1);
  if (!*out) return dcr__fail(w->d, DCR_E_NOMEM, "cannot allocate %llu bytes",
                              (unsigned long long)s->length);
  memcpy(*out, p, (size_t)s->length);
  *length = (size_t)s->length;
  return DCR_OK;
}

/* §4.3: where each known section may stand, and its flags. */
static int check_known(walk *w, const dcr__section *s, int *known) {
  static const struct {
    uint32_t type;
    uint16_t flags;
    uint8_t max_compression;
  } table[] = {
      {DCR__SEC_MANI, DCR__FLAG_CRITICAL, 1}, {DCR__SEC_RSIZ, DCR__FLAG_CRITICAL, 0},
      {DCR__SEC_META, 0, 1},
      {DCR__SEC_CHNK, DCR__FLAG_CRITICAL, 0}, {DCR__SEC_IDEN, DCR__FLAG_CRITICAL, 0},
      {DCR__SEC_INDX, DCR__FLAG_CRITICAL, 0}, {DCR__SEC_SIGN, 0, 0},
      {DCR__SEC_FOOT, DCR__FLAG_CRITICAL, 0},
  };
  dcr_reader *r = w->r;
  int first = r->section_count == 1;
  *known = 0;
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    /* R-VER-4: a 1.0 bundle knows no RSIZ */
    if (table[i].type != s->type || (s->type == DCR__SEC_RSIZ && !r->minor)) continue;
    *known = 1;
    if (s->compression > DCR_COMP_ZSTD)
      return dcr__fail(w->d, DCR_E_ENCODING, "unknown compression %u", s->compression);
    if (s->flags != table[i].flags || s->compression > table[i].max_compression)
      return dcr__fail(w->d, DCR_E_STRUCTURE, "section has flags 0x%x and compression %u",
                       s->flags, s->compression);
  }
  if (w->seen_sign && s->type != DCR__SEC_FOOT)
    return dcr__fail(w->d, DCR_E_STRUCTURE, "SIGN is not immediately before FOOT");
  if (!*known) {
    if (first) return dcr__fail(w->d, DCR_E_STRUCTURE, "the first section is not MANI");
    if (s->flags & DCR__FLAG_CRITICAL)
      return dcr__fail(w->d, DCR_E_UNKNOWN_SECTION, "unknown critical section");
    return DCR_OK;
  }
  if (first != (s->type == DCR__SEC_MANI))
    return dcr__fail(w->d, DCR_E_STRUCTURE, first ? "the first section is not MANI"
                                                  : "MANI appears more than once");
  if ((s->type == DCR__SEC_CHNK && w->seen_iden) || (s->type == DCR__SEC_IDEN && w->seen_iden) ||
      (s->type == DCR__SEC_INDX && (!w->seen_iden || w->seen_indx)) ||
      (s->type == DCR__SEC_FOOT && !w->seen_indx) || (s->type == DCR__SEC_SIGN && !w->seen_indx) ||
      (s->type == DCR__SEC_META && r->meta.pairs) ||
      (s->type == DCR__SEC_RSIZ && (w->seen_rsiz || r->section_count != 2)))
    return dcr__fail(w->d, DCR_E_STRUCTURE, "section is out of order, repeated or early");
  return DCR_OK;
}

static int add_chunk(walk *w, const dcr__section *s) {
  dcr_reader *r = w->r;
  if (s->length < DCR__RECORD_SIZE)
    return dcr__fail(w->d, DCR_E_STRUCTURE, "CHNK payload shorter than its record");
  if (r->chunk_count == w->chunk_capacity) {
    uint64_t cap = w->chunk_capacity ? 2 * w->chunk_capacity : 64;
    dcr__chunk *p = realloc(r->chunks, (size_t)cap * sizeof *p);
    if (!p) return dcr__fail(w->d, DCR_E_NOMEM, "cannot allocate the chunk table");
    r->chunks = p;
    w->chunk_capacity = cap;
  }
  const uint8_t *rec;
  int rc = dcr__source_get(&r->src, s->offset + DCR__SECTION_HEADER_SIZE, DCR__RECORD_SIZE,
                           &w->scratch, &w->capacity, &rec, w->d);
  dcr__chunk *c = &r->chunks[r->chunk_count];
  if (rc) return rc;
  dcr__chunk_record_parse(rec, c);
  c->offset = s->offset;
  c->payload_length = s->length;
  if ((rc = dcr__chunk_check(c, &r->man, w->d))) return rc;
  r->chunk_count++;
  return DCR_OK;
}

static int chunk_key_less(const dcr__chunk *a, const dcr__chunk *b) {
  return a->tensor < b->tensor || (a->tensor == b->tensor && a->chunk < b->chunk);
}

/* §8.3: the index must repeat, in order, exactly what the CHNK sections say;
 * each record's fields are checked in stored order. */
static int parse_index_random(walk *w, const uint8_t *p, size_t length);

static int parse_index(walk *w, const uint8_t *p, size_t length) {
  dcr_reader *r = w->r;
  if (r->random) return parse_index_random(w, p, length);
  if (length % DCR__RECORD_SIZE || length / DCR__RECORD_SIZE != r->chunk_count)
    return dcr__fail(w->d, DCR_E_INDEX, "index of %zu bytes for %llu chunk sections", length,
                     (unsigned long long)r->chunk_count);
  for (uint64_t i = 0; i < r->chunk_count; i++) {
    dcr__chunk c;
    const dcr__chunk *s = &r->chunks[i];
    const char *wrong = NULL;
    dcr__index_record_parse(p + i * DCR__RECORD_SIZE, &c);
    if (w->d) w->d->offset = w->indx_offset + DCR__SECTION_HEADER_SIZE + i * DCR__RECORD_SIZE;
    dcr__detail_tensor(w->d, c.tensor, NULL, 0);
    dcr__detail_chunk(w->d, c.chunk);
    if (c.offset != s->offset) wrong = "offset";
    else if (c.tensor != s->tensor || c.chunk != s->chunk) wrong = "tensor or chunk";
    else if (i && !chunk_key_less(&r->chunks[i - 1], s))
      return dcr__fail(w->d, DCR_E_INDEX, "chunks are not in strictly increasing order");
    else if (c.encoding != s->encoding || c.compression != s->compression)
      wrong = "encoding or compression";
    else if (c.reserved)
      return dcr__fail(w->d, DCR_E_RESERVED, "index record reserved field is 0x%04x", c.reserved);
    else if (c.count != s->count || c.payload_length != s->payload_length)
      wrong = "count or payload length";
    if (wrong)
      return dcr__fail(w->d, DCR_E_INDEX, "index record %llu: %s disagrees with the CHNK section "
                       "at offset %llu", (unsigned long long)i, wrong, (unsigned long long)s->offset);
  }
  return DCR_OK;
}

static int handle(walk *w, const dcr__section *s) {
  dcr_reader *r = w->r;
  uint8_t *buf = NULL;
  size_t n = 0;
  int rc = DCR_OK;
  switch (s->type) {
    case DCR__SEC_MANI:
      if (!(rc = load_payload(w, s, &buf, &n))) {
        /* the manifest's own bytes count against the budget of what it parses */
        dcr_limits lim = r->lim;
        lim.max_memory = lim.max_memory > n ? lim.max_memory - n : 0;
        rc = dcr__manifest_parse(buf, n, &lim, r->minor, &r->man, w->d); /* takes buf */
      }
      return rc;
    case DCR__SEC_RSIZ:
      w->seen_rsiz = 1;
      if (!(rc = load_payload(w, s, &buf, &n))) rc = dcr__rsiz_parse(buf, n, &r->man, w->d);
      break;
    case DCR__SEC_META:
      if (!(rc = load_payload(w, s, &buf, &n))) rc = dcr__meta_parse(buf, n, &r->lim, &r->meta, w->d);
      if (!rc && !r->meta.pairs) r->meta.pairs = calloc(1, sizeof *r->meta.pairs);
      break;
    case DCR__SEC_CHNK:
      return add_chunk(w, s);
    case DCR__SEC_IDEN:
      w->seen_iden = 1;
      w->iden_offset = s->offset;
      if (!(rc = load_payload(w, s, &buf, &n)))
        rc = dcr__iden_parse(buf, n, &r->man, r->base_state, r->target_state, w->d);
      break;
    case DCR__SEC_INDX:
      w->seen_indx = 1;
      w->indx_offset = s->offset;
      if (!(rc = load_payload(w, s, &buf, &n))) rc = parse_index(w, buf, n);
      break;
    case DCR__SEC_SIGN:
      w->seen_sign = 1;
      break;
    case DCR__SEC_FOOT:
      if (s->length != 32) return dcr__fail(w->d, DCR_E_STRUCTURE, "footer payload is not 32 bytes");
      if (s->offset + DCR__FOOTER_SIZE != r->src.size)
        return dcr__fail(w->d, DCR_E_STRUCTURE, "bytes follow the footer");
      if (!(rc = load_payload(w, s, &buf, &n)) &&
          (dcr__le64(buf) != DCR__HEADER_SIZE || dcr__le64(buf + 8) != w->iden_offset ||
           dcr__le64(buf + 16) != w->indx_offset || dcr__le64(buf + 24) != r->chunk_count))
        rc = dcr__fail(w->d, DCR_E_STRUCTURE, "footer disagrees with the sections found");
      break;
  }
  free(buf);
  return rc;
}

/* The table grows with the sections found, not with the size the bundle claims
 * (a remote bundle's size is the server's word); sections are at least 64 bytes
 * apart, so the walk is bounded by the size all the same. */
static int add_section(walk *w, const dcr__section *s) {
  dcr_reader *r = w->r;
  if (r->section_count == w->section_capacity) {
    uint64_t cap = w->section_capacity ? 2 * w->section_capacity : 16;
    dcr__section *p = realloc(r->sections, (size_t)cap * sizeof *p);
    if (!p) return dcr__fail(w->d, DCR_E_NOMEM, "cannot allocate the section table");
    r->sections = p;
    w->section_capacity = cap;
  }
  r->sections[r->section_count++] = *s;
  return DCR_OK;
}

/* Walks sections from `at`, checking and handling each: to the footer (stop
 * UINT64_MAX), or up to `stop` and not past it, where the random-access profile
 * knows another section starts (a section running past it fails with
 * overrun_code). With stop_at_chunk it also stops before the first CHNK; with a
 * stop and not, a CHNK is one the index does not list. *reached: where it ended. */
static int walk_range(walk *w, uint64_t at, uint64_t stop, int stop_at_chunk, int overrun_code,
                      uint64_t *reached) {
  dcr_reader *r = w->r;
  int done = 0, rc;
  while (!done && at != stop) {
    dcr__section s;
    const uint8_t *h;
    uint64_t end;
    if (w->d) dcr__detail_init(w->d), w->d->offset = at;
    if (at == r->src.size)
      return dcr__fail(w->d, DCR_E_TRUNCATED, "bundle ends at offset %llu without a footer",
                       (unsigned long long)at);
    if ((rc = dcr__source_get(&r->src, at, DCR__SECTION_HEADER_SIZE, &w->scratch, &w->capacity,
                              &h, w->d)))
      return rc == DCR_E_TRUNCATED ? dcr__fail(w->d, rc, "bundle ends inside a section header")
                                   : rc;
    if ((rc = dcr__section_header_parse(h, at, &s, w->d))) return rc;
    if (s.type == DCR__SEC_CHNK && stop_at_chunk) break;
    if (s.type == DCR__SEC_CHNK && stop != UINT64_MAX)
      return dcr__fail(w->d, DCR_E_INDEX, "chunk section not listed in the index");
    if (s.length > r->lim.max_section_size)
      return dcr__fail(w->d, DCR_E_LIMIT, "section length %llu exceeds the limit %llu",
                       (unsigned long long)s.length, (unsigned long long)r->lim.max_section_size);
    end = dcr__align64(at + DCR__SECTION_HEADER_SIZE + s.length);
    if (end > r->src.size)
      return dcr__fail(w->d, DCR_E_TRUNCATED, "section of %llu bytes runs past the end of the "
                       "bundle (%llu bytes)", (unsigned long long)s.length,
                       (unsigned long long)r->src.size);
    if (end > stop)
      return dcr__fail(w->d, overrun_code, "section runs past offset %llu, where the %s places "
                       "another section", (unsigned long long)stop,
                       overrun_code == DCR_E_INDEX ? "index" : "footer");
    int known;
    if ((rc = add_section(w, &s)) || (rc = check_known(w, &s, &known)) ||
        (rc = check_payload(w, &s)) || (known && (rc = handle(w, &s))))
      return rc;
    done = s.type == DCR__SEC_FOOT;
    at = end;
  }
  if (w->d) dcr__detail_init(w->d);
  *reached = at;
  return DCR_OK;
}

static int walk_sections(walk *w) {
  uint64_t end;
  return walk_range(w, DCR__HEADER_SIZE, UINT64_MAX, 0, DCR_E_STRUCTURE, &end);
}

/* Both walks start from a clean detail, whoever calls them: a caller's scratch
 * detail is never read before it is written. */
static int open_source(dcr_reader *r, const dcr_limits *lim, dcr_detail *d) {
  dcr__detail_init(d);
  dcr__limits_take(&r->lim, lim);
  r->cancel = r->lim.cancel;
  if (r->src.size > r->lim.max_bundle_size)
    return dcr__fail(d, DCR_E_LIMIT, "bundle of %llu bytes exceeds the limit %llu",
                     (unsigned long long)r->src.size, (unsigned long long)r->lim.max_bundle_size);
  walk w = {.r = r, .d = d};
  const uint8_t *h;
  size_t n = r->src.size < DCR__HEADER_SIZE ? (size_t)r->src.size : DCR__HEADER_SIZE;
  int rc = dcr__source_get(&r->src, 0, n, &w.scratch, &w.capacity, &h, d);
  if (!rc) rc = dcr__header_parse(h, r->src.size, &r->minor, d);
  if (!rc) rc = walk_sections(&w);
  free(w.scratch);
  return rc;
}

static int finish_open(dcr_reader *r, dcr_reader **out, int rc, dcr_detail *d) {
  if (rc) {
    dcr__detail_file(d, r->path);
    dcr_reader_free(r);
    return rc;
  }
  *out = r;
  return DCR_OK;
}

int dcr_reader_open_memory(dcr_reader **out, const void *data, size_t size,
                           const dcr_limits *lim, dcr_detail *d) {
  dcr__detail_init(d);
  *out = NULL;
  dcr_reader *r = calloc(1, sizeof *r);
  if (!r) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate a reader");
  r->src.data = data;
  r->src.size = size;
  r->src.fd = -1;
  snprintf(r->path, sizeof r->path, "<memory>");
  return finish_open(r, out, open_source(r, lim, d), d);
}

int dcr_reader_open_file(dcr_reader **out, const char *path, const dcr_limits *lim,
                         dcr_detail *d) {
  dcr__detail_init(d);
  *out = NULL;
  dcr_reader *r = calloc(1, sizeof *r);
  if (!r) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate a reader");
  snprintf(r->path, sizeof r->path, "%s", path);
  r->src.fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  int rc = DCR_OK;
  if (r->src.fd < 0 || fstat(r->src.fd, &st))
    rc = dcr__fail(d, DCR_E_IO, "cannot open: %s", strerror(errno));
  else if (!S_ISREG(st.st_mode))
    rc = dcr__fail(d, DCR_E_IO, "not a regular file");
  if (!rc) {
    r->src.size = (uint64_t)st.st_size;
    rc = open_source(r, lim, d);
  }
  return finish_open(r, out, rc, d);
}

static int file_read(void *ctx, uint64_t offset, size_t length, uint8_t *out, dcr_detail *d) {
  return dcr__pread_full((int)(intptr_t)ctx, out, length, offset, d);
}
static void file_plan(void *ctx, const dcr__range *ranges, size_t count) {
  (void)ctx, (void)ranges, (void)count; /* the page cache reads ahead */
}
static void file_close(void *ctx) { close((int)(intptr_t)ctx); }
static const dcr__source_ops file_ops = {file_read, file_plan, file_close};

int dcr_reader_open_file_ranged(dcr_reader **out, const char *path, const dcr_limits *lim,
                                dcr_detail *d) {
  dcr__detail_init(d);
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  int rc = fd < 0 || fstat(fd, &st) ? dcr__fail(d, DCR_E_IO, "cannot open: %s", strerror(errno))
           : !S_ISREG(st.st_mode)   ? dcr__fail(d, DCR_E_IO, "not a regular file")
                                    : DCR_OK;
  if (rc) {
    if (fd >= 0) close(fd);
    return dcr__detail_file(d, path), rc;
  }
  return dcr__reader_open_ops(out, &file_ops, (void *)(intptr_t)fd, (uint64_t)st.st_size, path, 0,
                              lim, d);
}

void dcr_reader_free(dcr_reader *r) {
  if (!r) return;
  if (r->src.fd >= 0) close(r->src.fd);
  if (r->src.ops) r->src.ops->close(r->src.ctx);
  free(r->selected);
  dcr__manifest_free(&r->man);
  dcr__meta_free(&r->meta);
  free(r->chunks);
  free(r->sections);
  free(r);
}

/* ---- the random-access profile (SPEC.md §21) */

/* R-RAN-2: the index is the only list of chunks, so each record is checked alone
 * as well as it can be: against the manifest, in key order, at a section boundary
 * after the one before. Where each section ends is checked by the gap walk. */
static int parse_index_random(walk *w, const uint8_t *p, size_t length) {
  dcr_reader *r = w->r;
  uint64_t n = length / DCR__RECORD_SIZE;
  if (length % DCR__RECORD_SIZE || n > r->src.size / 64)
    return dcr__fail(w->d, DCR_E_INDEX, "index of %zu bytes is not a whole number of records "
                     "that fit the bundle", length);
  r->chunks = malloc((size_t)n * sizeof *r->chunks + 1);
  if (!r->chunks) return dcr__fail(w->d, DCR_E_NOMEM, "cannot allocate the chunk table");
  for (uint64_t i = 0; i < n; i++) {
    dcr__chunk *c = &r->chunks[i];
    dcr__index_record_parse(p + i * DCR__RECORD_SIZE, c);
    c->base_check = c->target_check = 0; /* in the CHNK record: filled when read */
    if (w->d) w->d->offset = w->indx_offset + DCR__SECTION_HEADER_SIZE + i * DCR__RECORD_SIZE;
    int rc = dcr__chunk_check(c, &r->man, w->d);
    if (rc) return rc;
    if (i && !chunk_key_less(&r->chunks[i - 1], c))
      return dcr__fail(w->d, DCR_E_INDEX, "chunks are not in strictly increasing order");
    if (c->offset % 64 || c->offset <= DCR__HEADER_SIZE || (i && c->offset <= c[-1].offset))
      return dcr__fail(w->d, DCR_E_INDEX, "index record %llu: offset %llu is not a section "
                       "boundary after the previous chunk", (unsigned long long)i,
                       (unsigned long long)c->offset);
    if (c->payload_length < DCR__RECORD_SIZE)
      return dcr__fail(w->d, DCR_E_INDEX, "index record %llu: payload shorter than its record",
                       (unsigned long long)i);
    if (c->payload_length > r->lim.max_section_size)
      return dcr__fail(w->d, DCR_E_LIMIT, "section length %llu exceeds the limit %llu",
                       (unsigned long long)c->payload_length,
                       (unsigned long long)r->lim.max_section_size);
    r->chunk_count++;
  }
  return DCR_OK;
}

/* The footer (§4.5), read first: where IDEN and INDX start. */
static int read_footer(walk *w, uint64_t *iden, uint64_t *indx) {
  dcr_reader *r = w->r;
  uint64_t at = r->src.size - DCR__FOOTER_SIZE;
  const uint8_t *p;
  dcr__section s;
  if (w->d) w->d->offset = at;
  int rc = dcr__source_get(&r->src, at, DCR__FOOTER_SIZE, &w->scratch, &w->capacity, &p, w->d);
  if (rc || (rc = dcr__section_header_parse(p, at, &s, w->d))) return rc;
  if (s.type != DCR__SEC_FOOT || s.length != 32)
    return dcr__fail(w->d, DCR_E_STRUCTURE, "the last 64 bytes are not a footer");
  if (!DCR__CHECKSUM_OK(XXH3_64bits(p + DCR__SECTION_HEADER_SIZE, 32) == s.payload_check))
    return dcr__fail(w->d, DCR_E_CHECKSUM, "section payload checksum does not match");
  const uint8_t *f = p + DCR__SECTION_HEADER_SIZE;
  *iden = dcr__le64(f + 8);
  *indx = dcr__le64(f + 16);
  if (dcr__le64(f) != DCR__HEADER_SIZE || *iden % 64 || *indx % 64 ||
      *iden <= DCR__HEADER_SIZE || *indx <= *iden || *indx >= at)
    return dcr__fail(w->d, DCR_E_STRUCTURE, "footer offsets %llu and %llu do not place IDEN and "
                     "INDX inside the bundle", (unsigned long long)*iden, (unsigned long long)*indx);
  return DCR_OK;
}

static int by_offset(const void *x, const void *y) {
  const dcr__section *a = x, *b = y;
  return (a->offset > b->offset) - (a->offset < b->offset);
}

/* The sections between and around the chunks (R-RAN-2): those before the first
 * chunk were walked; the chunks lie where the index says, back to back unless
 * other sections lie between them, which are walked and checked too. */
static int walk_gaps(walk *w, uint64_t at, uint64_t iden) {
  dcr_reader *r = w->r;
  w->seen_sign = 0; /* the tail was walked first; SIGN's place was checked there */
  for (uint64_t i = 0; i <= r->chunk_count; i++) {
    const dcr__chunk *c = i < r->chunk_count ? &r->chunks[i] : NULL;
    uint64_t next = c ? c->offset : iden;
    if (next < at) {
      if (w->d) dcr__detail_init(w->d), w->d->offset = next;
      return dcr__fail(w->d, c ? DCR_E_INDEX : DCR_E_STRUCTURE, "%s at offset %llu overlaps the "
                       "section before it", c ? "chunk section" : "IDEN", (unsigned long long)next);
    }
    int rc = walk_range(w, at, next, 0, c ? DCR_E_INDEX : DCR_E_STRUCTURE, &at);
    if (rc || !c) return rc;
    dcr__section s = {.type = DCR__SEC_CHNK, .flags = DCR__FLAG_CRITICAL, .offset = c->offset,
                      .length = c->payload_length};
    if ((rc = add_section(w, &s))) return rc;
    at = dcr__align64(c->offset + DCR__SECTION_HEADER_SIZE + c->payload_length);
  }
  return DCR_OK;
}

static int open_random(dcr_reader *r, const dcr_limits *lim, dcr_detail *d) {
  dcr__detail_init(d);
  dcr__limits_take(&r->lim, lim);
  r->cancel = r->lim.cancel;
  r->random = 1;
  if (r->src.size > r->lim.max_bundle_size)
    return dcr__fail(d, DCR_E_LIMIT, "bundle of %llu bytes exceeds the limit %llu",
                     (unsigned long long)r->src.size, (unsigned long long)r->lim.max_bundle_size);
  walk w = {.r = r, .d = d};
  const uint8_t *h;
  uint64_t iden = 0, indx = 0, head_end = 0, end;
  size_t n = r->src.size < DCR__HEADER_SIZE ? (size_t)r->src.size : DCR__HEADER_SIZE;
  int rc = dcr__source_get(&r->src, 0, n, &w.scratch, &w.capacity, &h, d);
  if (!rc) rc = dcr__header_parse(h, r->src.size, &r->minor, d);
  if (!rc && r->src.size < DCR__HEADER_SIZE + DCR__FOOTER_SIZE)
    rc = dcr__fail(d, DCR_E_TRUNCATED, "bundle of %llu bytes has no room for a footer",
                   (unsigned long long)r->src.size);
  if (!rc) rc = read_footer(&w, &iden, &indx);
  /* the head: MANI (RSIZ, META...) up to the first chunk, or to IDEN */
  if (!rc) rc = walk_range(&w, DCR__HEADER_SIZE, iden, 1, DCR_E_STRUCTURE, &head_end);
  if (!rc && !r->section_count)
    rc = dcr__fail(d, DCR_E_STRUCTURE, "the first section is not MANI");
  /* the tail: IDEN, INDX, SIGN, FOOT, found where the footer says */
  if (!rc && !(rc = dcr__source_get(&r->src, iden, DCR__SECTION_HEADER_SIZE, &w.scratch,
                                    &w.capacity, &h, d)) &&
      dcr__le32(h) != DCR__SEC_IDEN)
    rc = dcr__fail(d, DCR_E_STRUCTURE, "the footer's IDEN offset %llu holds no IDEN section",
                   (unsigned long long)iden);
  if (!rc) rc = walk_range(&w, iden, UINT64_MAX, 0, DCR_E_STRUCTURE, &end);
  if (!rc && w.indx_offset != indx)
    rc = dcr__fail(d, DCR_E_STRUCTURE, "footer disagrees with the sections found");
  if (!rc) rc = walk_gaps(&w, head_end, iden);
  if (!rc) qsort(r->sections, (size_t)r->section_count, sizeof *r->sections, by_offset);
  free(w.scratch);
  return rc;
}

/* Codes that say something about the bundle's bytes, not about the transport,
 * the machine or the caller. */
static int says_bundle(int rc) {
  return rc && rc != DCR_E_IO && rc != DCR_E_NOMEM && rc != DCR_E_FETCH && rc != DCR_E_CHANGED &&
         rc != DCR_E_INTERRUPTED && rc != DCR_E_ARGUMENT;
}

int dcr__confirm_by_walk(const dcr_reader *r, int rc, dcr_detail *d) {
  if (!says_bundle(rc)) return rc;
  dcr_reader *w = calloc(1, sizeof *w);
  if (!w) return rc;
  w->src = r->src;
  snprintf(w->path, sizeof w->path, "%s", r->path);
  dcr_detail dw;
  int found = open_source(w, &r->lim, &dw);
  w->src.ops = NULL; /* the source is r's */
  dcr_reader_free(w);
  if (!says_bundle(found) && found != DCR_OK) return rc;
  if (found && d) *d = dw, dcr__detail_file(d, r->path);
  return found ? found : rc;
}

int dcr__reader_open_ops(dcr_reader **out, const dcr__source_ops *ops, void *ctx, uint64_t size,
                         const char *name, int whole, const dcr_limits *lim, dcr_detail *d) {
  dcr__detail_init(d);
  *out = NULL;
  dcr_reader *r = calloc(1, sizeof *r);
  if (!r) return ops->close(ctx), dcr__fail(d, DCR_E_NOMEM, "cannot allocate a reader");
  r->src = (dcr__source){.fd = -1, .size = size, .ops = ops, .ctx = ctx};
  snprintf(r->path, sizeof r->path, "%s", name);
  if (whole) /* every byte will be read: fetched ahead, in large pieces */
    ops->plan(ctx, &(dcr__range){0, size}, 1);
  int rc = whole ? open_source(r, lim, d) : open_random(r, lim, d);
  if (rc && !whole) rc = dcr__confirm_by_walk(r, rc, d);
  if (!rc) dcr__chunk_plan(r);
  return finish_open(r, out, rc, d);
}

int dcr__match_entries(const dcr__manifest *m, const char *const *patterns, size_t count,
                       const char *what, uint8_t **out, uint64_t *hits, dcr_detail *d) {
  uint64_t matched = 0;
  *out = NULL;
  if (hits) *hits = 0;
  if (!count) return DCR_OK;
  uint8_t *sel = calloc((size_t)m->entry_count + 1, 1);
  char *name = malloc(UINT16_MAX + 1);
  if (!sel || !name) return free(sel), free(name), dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  for (size_t k = 0; k < count; k++) {
    int any = 0;
    for (uint64_t i = 0; i < m->entry_count; i++) {
      memcpy(name, m->entries[i].name, m->entries[i].name_length);
      name[m->entries[i].name_length] = 0;
      if (fnmatch(patterns[k], name, 0)) continue;
      any = 1;
      if (!sel[i]) sel[i] = 1, matched++;
    }
    if (!any) {
      free(sel), free(name);
      return dcr__fail(d, DCR_E_ARGUMENT, "pattern '%.100s' matches no tensor of %s", patterns[k],
                       what);
    }
  }
  free(name);
  *out = sel;
  if (hits) *hits = matched;
  return DCR_OK;
}

int dcr_reader_select_tensors(dcr_reader *r, const char *const *patterns, size_t count,
                              uint64_t *matched, dcr_detail *d) {
  dcr__detail_init(d);
  uint8_t *sel;
  uint64_t hits;
  int rc = dcr__match_entries(&r->man, patterns, count, "the bundle", &sel, &hits, d);
  if (rc) return rc;
  free(r->selected);
  r->selected = sel;
  if (matched) *matched = count ? hits : r->man.entry_count;
  dcr__chunk_plan(r);
  return DCR_OK;
}

int dcr__need_whole(const dcr_reader *r, dcr_detail *d) {
  if (!r->selected) return DCR_OK;
  return dcr__fail(d, DCR_E_ARGUMENT, "the reader has a tensor selection, which gives no whole "
                   "target: patch the selected tensors in memory (dcr_patch_memory)");
}
