/*
 * reader.c - opens a bundle and checks its whole structure (SPEC.md §4-§8.3) by
 * walking its sections front to back, as a streaming reader would, then checks the
 * footer that a seeking reader would start from. Chunk contents are decoded by the
 * codec (verify, apply).
 */
#include <errno.h>
#include <fcntl.h>
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
  uint64_t iden_offset, indx_offset, chunk_capacity;
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

/* Copies (or inflates) a section payload into a buffer the caller owns. */
static int load_payload(walk *w, const dcr__section *s, uint8_t **out, size_t *length) {
  const uint8_t *p = NULL;
  int rc = dcr__source_get(&w->r->src, s->offset + DCR__SECTION_HEADER_SIZE, (size_t)s->length,
                           &w->scratch, &w->capacity, &p, w->d);
  if (rc) return rc;
  if (s->compression == DCR_COMP_ZSTD)
    return dcr__section_inflate(p, (size_t)s->length, w->r->lim.max_section_size,
                                w->r->lim.max_memory, out, length, w->d);
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
static int parse_index(walk *w, const uint8_t *p, size_t length) {
  dcr_reader *r = w->r;
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

static int add_section(walk *w, const dcr__section *s) {
  dcr_reader *r = w->r;
  /* Sections are at least 64 bytes apart, so the count is bounded by the size. */
  if (!r->sections) {
    r->sections = malloc((size_t)(r->src.size / 64 + 1) * sizeof *r->sections);
    if (!r->sections) return dcr__fail(w->d, DCR_E_NOMEM, "cannot allocate the section table");
  }
  r->sections[r->section_count++] = *s;
  return DCR_OK;
}

static int walk_sections(walk *w) {
  dcr_reader *r = w->r;
  uint64_t at = DCR__HEADER_SIZE;
  int done = 0, rc;
  while (!done) {
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
    if (s.length > r->lim.max_section_size)
      return dcr__fail(w->d, DCR_E_LIMIT, "section length %llu exceeds the limit %llu",
                       (unsigned long long)s.length, (unsigned long long)r->lim.max_section_size);
    end = dcr__align64(at + DCR__SECTION_HEADER_SIZE + s.length);
    if (end > r->src.size)
      return dcr__fail(w->d, DCR_E_TRUNCATED, "section of %llu bytes runs past the end of the "
                       "bundle (%llu bytes)", (unsigned long long)s.length,
                       (unsigned long long)r->src.size);
    int known;
    if ((rc = add_section(w, &s)) || (rc = check_known(w, &s, &known)) ||
        (rc = check_payload(w, &s)) || (known && (rc = handle(w, &s))))
      return rc;
    done = s.type == DCR__SEC_FOOT;
    at = end;
  }
  if (w->d) dcr__detail_init(w->d);
  return DCR_OK;
}

static int open_source(dcr_reader *r, const dcr_limits *lim, dcr_detail *d) {
  dcr__limits_take(&r->lim, lim);
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

void dcr_reader_free(dcr_reader *r) {
  if (!r) return;
  if (r->src.fd >= 0) close(r->src.fd);
  dcr__manifest_free(&r->man);
  dcr__meta_free(&r->meta);
  free(r->chunks);
  free(r->sections);
  free(r);
}
