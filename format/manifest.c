/*
 * manifest.c - the MANI section (SPEC.md §6): both checkpoints' tensors in
 * canonical coordinates, and the target's prefix bytes.
 */
#include <stdlib.h>

#include "checkpoint.h"
#include "format.h"


uint64_t dcr__chunk_count(uint64_t byte_length, uint32_t chunk_size) {
  return byte_length / chunk_size + (byte_length % chunk_size != 0);
}

size_t dcr__chunk_bytes(const dcr__manifest *m, const dcr__entry *e, uint64_t c) {
  uint64_t left = e->target.byte_length - c * m->chunk_size;
  return left < m->chunk_size ? (size_t)left : m->chunk_size;
}

size_t dcr__max_chunk_bytes(const dcr__manifest *m) {
  uint64_t largest = 1;
  for (uint64_t i = 0; i < m->entry_count; i++)
    if ((m->entries[i].presence & DCR__HAS_TARGET) && m->entries[i].target.byte_length > largest)
      largest = m->entries[i].target.byte_length;
  return largest < m->chunk_size ? (size_t)largest : m->chunk_size;
}

int dcr__entry_delta_coded(const dcr__entry *e) {
  return (e->presence & DCR__HAS_BASE) && (e->presence & DCR__HAS_TARGET) &&
         e->base.dtype == e->target.dtype && e->base.byte_length == e->target.byte_length;
}

uint64_t dcr__entry_base_span(const dcr__entry *e, uint64_t at, uint64_t bytes) {
  if (dcr__entry_delta_coded(e)) return bytes;
  if (!e->resized || at >= e->base.byte_length) return 0;
  return e->base.byte_length - at < bytes ? e->base.byte_length - at : bytes;
}

dcr__entry *dcr__manifest_find(const dcr__manifest *m, const char *name, size_t n) {
  size_t lo = 0, hi = (size_t)m->entry_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = dcr__name_cmp(m->entries[mid].name, m->entries[mid].name_length, name, n);
    if (!c) return &m->entries[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return NULL;
}

unsigned dcr__manifest_minor(const dcr__manifest *m) {
  if (m->kind == DCR_KIND_SET) return 1;
  for (uint64_t i = 0; i < m->entry_count; i++) {
    const dcr__entry *e = &m->entries[i];
    if (e->resized || ((e->presence & DCR__HAS_BASE) && e->base.dtype > dcr__dtype_max(0)) ||
        ((e->presence & DCR__HAS_TARGET) && e->target.dtype > dcr__dtype_max(0)))
      return 1;
  }
  return 0;
}

int dcr__manifest_has_base_coded(const dcr__manifest *m, const uint8_t *skip) {
  for (uint64_t i = 0; i < m->entry_count; i++) {
    const dcr__entry *e = &m->entries[i];
    if (skip && skip[i]) continue;
    if (e->resized || (dcr__entry_delta_coded(e) && e->target.byte_length)) return 1;
  }
  return 0;
}

void dcr__manifest_free(dcr__manifest *m) {
  free(m->members);
  free(m->entries);
  free(m->dims_pool);
  free(m->storage);
  memset(m, 0, sizeof *m);
}

/* A cursor over the payload: every read is bounds-checked. */
typedef struct {
  const uint8_t *p;
  size_t left;
  dcr_detail *d;
  unsigned minor; /* the bundle's: what it may use (R-VER-4) */
} cursor;

static int take(cursor *c, size_t n, const uint8_t **out) {
  if (c->left < n)
    return dcr__fail(c->d, DCR_E_TRUNCATED, "manifest ends inside a field (%zu bytes short)",
                     n - c->left);
  *out = c->p;
  c->p += n;
  c->left -= n;
  return DCR_OK;
}

/* Reads a little-endian field of `width` bytes: a field's own bytes come first in
 * the order of checks (SPEC.md §15). */
static int field(cursor *c, size_t width, uint64_t *v) {
  const uint8_t *p = NULL;
  int rc = take(c, width, &p);
  if (rc) return rc;
  *v = 0;
  for (size_t i = width; i-- > 0;) *v = *v << 8 | p[i];
  return DCR_OK;
}

/* Parses a descriptor field by field; rank is bounded by its limit before the dims
 * are read, and the dims pool was sized from the payload length. */
static int parse_desc(cursor *c, int with_offset, const dcr_limits *lim, dcr__desc *t,
                      uint64_t **pool) {
  uint64_t v;
  const uint8_t *p = NULL;
  int rc = field(c, 1, &v);
  if (rc) return rc;
  t->dtype = (int)v;
  if (!dcr_dtype_size(t->dtype) || t->dtype > dcr__dtype_max(c->minor))
    return dcr__fail(c->d, DCR_E_DTYPE, "unknown dtype code %d%s", t->dtype,
                     dcr_dtype_size(t->dtype) ? " in a bundle of format 1.0" : "");
  if ((rc = field(c, 1, &v))) return rc;
  t->rank = (unsigned)v;
  if (t->rank > lim->max_rank)
    return dcr__fail(c->d, DCR_E_LIMIT, "rank %u exceeds the limit %llu", t->rank,
                     (unsigned long long)lim->max_rank);
  if ((rc = take(c, 8u * t->rank + 8u + (with_offset ? 8u : 0u), &p))) return rc;
  t->dims = *pool;
  *pool += t->rank;
  for (unsigned i = 0; i < t->rank; i++) t->dims[i] = dcr__le64(p + 8 * i);
  t->byte_length = dcr__le64(p + 8 * t->rank);
  t->offset = with_offset ? dcr__le64(p + 8 * t->rank + 8) : 0;
  return dcr__desc_check(t, lim, c->d);
}

static int by_offset(const void *a, const void *b) {
  const dcr__desc *x = *(const dcr__desc *const *)a, *y = *(const dcr__desc *const *)b;
  if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
  return (x->byte_length > y->byte_length) - (x->byte_length < y->byte_length);
}

/* §6.2 rule on layout: target tensors tile [0, data_length) exactly. */
static int check_layout(const dcr__manifest *m, dcr_detail *d) {
  uint64_t n = 0;
  for (uint64_t i = 0; i < m->entry_count; i++) n += (m->entries[i].presence & DCR__HAS_TARGET) != 0;
  const dcr__desc **sorted = malloc((n ? n : 1) * sizeof *sorted);
  if (!sorted) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate the layout table");
  n = 0;
  for (uint64_t i = 0; i < m->entry_count; i++)
    if (m->entries[i].presence & DCR__HAS_TARGET) sorted[n++] = &m->entries[i].target;
  qsort(sorted, n, sizeof *sorted, by_offset);
  uint64_t end = 0;
  int rc = DCR_OK;
  for (uint64_t i = 0; i < n && !rc; i++) {
    if (sorted[i]->offset != end)
      rc = dcr__fail(d, DCR_E_LAYOUT, "target tensor at offset %llu; expected %llu (%s)",
                     (unsigned long long)sorted[i]->offset, (unsigned long long)end,
                     sorted[i]->offset < end ? "overlap" : "gap");
    else if (dcr__add_overflow(end, sorted[i]->byte_length, &end))
      rc = dcr__fail(d, DCR_E_LAYOUT, "target tensor ends past 2^64");
  }
  free(sorted);
  if (rc) return rc;
  if (end != m->data_length)
    return dcr__fail(d, DCR_E_LAYOUT, "target tensors cover %llu bytes; data length is %llu",
                     (unsigned long long)end, (unsigned long long)m->data_length);
  return DCR_OK;
}

static int desc_equal(const dcr__desc *a, const dcr__desc *b) {
  if (a->dtype != b->dtype || a->rank != b->rank || a->byte_length != b->byte_length ||
      a->offset != b->offset)
    return 0;
  return !a->rank || !memcmp(a->dims, b->dims, a->rank * sizeof *a->dims);
}

/* §6.2: the kind's own rules, and a safetensors prefix must describe exactly the
 * target entries. */
static int check_kind(dcr__manifest *m, const dcr_limits *lim, unsigned minor, dcr_detail *d) {
  if (m->kind == DCR_KIND_SET) return dcr__set_table_check(m, lim, minor, d);
  if (m->kind == DCR_KIND_RAW) {
    const dcr__entry *e = m->entries;
    if (m->prefix_length)
      return dcr__fail(d, DCR_E_MANIFEST, "raw checkpoint with a %llu-byte prefix",
                       (unsigned long long)m->prefix_length);
    if (m->entry_count != 1 || e->presence != (DCR__HAS_BASE | DCR__HAS_TARGET) ||
        dcr__name_cmp(e->name, e->name_length, "raw", 3) || e->base.dtype != 2 ||
        e->base.rank != 1 || e->target.dtype != 2 || e->target.rank != 1)
      return dcr__fail(d, DCR_E_MANIFEST, "raw checkpoints are one U8 tensor of rank 1 named "
                       "\"raw\" on both sides");
    return DCR_OK;
  }
  dcr__checkpoint ck;
  int rc = dcr__safetensors_parse(m->prefix, (size_t)m->prefix_length, m->data_length, lim,
                                  minor, &ck, d);
  if (rc) return rc;
  uint64_t j = 0;
  for (uint64_t i = 0; i < m->entry_count && !rc; i++) {
    const dcr__entry *e = &m->entries[i];
    if (!(e->presence & DCR__HAS_TARGET)) continue;
    if (j >= ck.count || dcr__name_cmp(e->name, e->name_length, ck.tensors[j].name,
                                       ck.tensors[j].name_length) ||
        !desc_equal(&e->target, &ck.tensors[j].desc)) {
      dcr__detail_tensor(d, i, e->name, e->name_length);
      rc = dcr__fail(d, DCR_E_MANIFEST, "carried safetensors header disagrees with the manifest");
    }
    j++;
  }
  if (!rc && j != ck.count)
    rc = dcr__fail(d, DCR_E_MANIFEST, "carried safetensors header has %zu tensors; manifest %llu",
                   ck.count, (unsigned long long)j);
  dcr__checkpoint_free(&ck);
  return rc;
}

/* The smallest entry: a 2-byte name length, a 1-byte name, presence, reserved and
 * one rank-0 descriptor (dtype, rank, byte_length). */
#define MIN_ENTRY_SIZE 15

static int parse_entries(cursor *c, const dcr_limits *lim, dcr__manifest *m) {
  uint64_t *pool = m->dims_pool;
  for (uint64_t i = 0; i < m->entry_count; i++) {
    dcr__entry *e = &m->entries[i];
    const uint8_t *p = NULL;
    uint64_t v;
    int rc = field(c, 2, &v);
    if (rc) return rc;
    e->name_length = (uint16_t)v;
    if (e->name_length > lim->max_name_length)
      return dcr__fail(c->d, DCR_E_LIMIT, "name length %u exceeds the limit %llu", e->name_length,
                       (unsigned long long)lim->max_name_length);
    if ((rc = take(c, e->name_length, &p))) return rc;
    e->name = (const char *)p;
    dcr__detail_tensor(c->d, i, e->name, e->name_length);
    if (!e->name_length) return dcr__fail(c->d, DCR_E_NAME, "empty name");
    if (!dcr__utf8_valid(p, e->name_length))
      return dcr__fail(c->d, DCR_E_NAME, "name is not valid UTF-8 or contains U+0000");
    if (i && dcr__name_cmp(e[-1].name, e[-1].name_length, e->name, e->name_length) >= 0)
      return dcr__fail(c->d, DCR_E_NAME, "name does not sort after the previous one");
    if ((rc = field(c, 1, &v))) return rc;
    e->presence = (uint8_t)v;
    if (e->presence & ~3u)
      return dcr__fail(c->d, DCR_E_RESERVED, "reserved presence bits 0x%02x set", e->presence);
    if (!e->presence) return dcr__fail(c->d, DCR_E_MANIFEST, "entry present on neither side");
    if ((rc = field(c, 1, &v))) return rc;
    if (v) return dcr__fail(c->d, DCR_E_RESERVED, "reserved entry byte is 0x%02x", (unsigned)v);
    if ((e->presence & DCR__HAS_BASE) && (rc = parse_desc(c, 0, lim, &e->base, &pool))) return rc;
    if ((e->presence & DCR__HAS_TARGET) && (rc = parse_desc(c, 1, lim, &e->target, &pool)))
      return rc;
    if (c->d) c->d->tensor = DCR_NONE, c->d->tensor_name[0] = '\0';
  }
  return DCR_OK;
}

/* The fixed fields, in stored order (SPEC.md §6.2): the first DCR__MANIFEST_HEAD bytes. */
static int parse_fields(cursor *c, const dcr_limits *lim, dcr__manifest *m) {
  uint64_t v, total;
  int rc = field(c, 4, &v);
  if (rc) return rc;
  m->entry_count = v;
  if (m->entry_count > lim->max_tensors)
    return dcr__fail(c->d, DCR_E_LIMIT, "%llu tensors exceed the limit %llu",
                     (unsigned long long)m->entry_count, (unsigned long long)lim->max_tensors);
  if ((rc = field(c, 4, &v))) return rc;
  m->chunk_size = (uint32_t)v;
  if (m->chunk_size > lim->max_chunk_size)
    return dcr__fail(c->d, DCR_E_LIMIT, "chunk size %u exceeds the limit %llu", m->chunk_size,
                     (unsigned long long)lim->max_chunk_size);
  if (m->chunk_size < DCR__MIN_CHUNK_SIZE || (m->chunk_size & (m->chunk_size - 1)))
    return dcr__fail(c->d, DCR_E_MANIFEST, "chunk size %u is not a power of two of at least 4096",
                     m->chunk_size);
  if ((rc = field(c, 1, &v))) return rc;
  m->kind = (int)v;
  if (m->kind != DCR_KIND_RAW && m->kind != DCR_KIND_SAFETENSORS &&
      (m->kind != DCR_KIND_SET || !c->minor))
    return dcr__fail(c->d, DCR_E_MANIFEST, "unknown checkpoint kind %d%s", m->kind,
                     m->kind == DCR_KIND_SET ? " in a bundle of format 1.0" : "");
  for (int i = 9; i < 16; i++) {
    if ((rc = field(c, 1, &v))) return rc;
    if (v) return dcr__fail(c->d, DCR_E_RESERVED, "reserved manifest byte %d is 0x%02x", i, (unsigned)v);
  }
  if ((rc = field(c, 8, &m->prefix_length)) || (rc = field(c, 8, &m->data_length))) return rc;
  if (dcr__add_overflow(m->prefix_length, m->data_length, &total) || total > lim->max_file_size)
    return dcr__fail(c->d, DCR_E_LIMIT, "target file of %llu + %llu bytes exceeds the limit %llu",
                     (unsigned long long)m->prefix_length, (unsigned long long)m->data_length,
                     (unsigned long long)lim->max_file_size);
  return DCR_OK;
}

/* The fixed fields and the prefix; then the entries are known to fit. */
static int parse_fixed(cursor *c, const dcr_limits *lim, dcr__manifest *m) {
  int rc = parse_fields(c, lim, m);
  if (rc) return rc;
  if (m->prefix_length > c->left)
    return dcr__fail(c->d, DCR_E_TRUNCATED, "prefix of %llu bytes exceeds the manifest",
                     (unsigned long long)m->prefix_length);
  if ((rc = take(c, (size_t)m->prefix_length, &m->prefix))) return rc;
  /* Both bounds come from the bytes present, so nothing is allocated for what is
   * not there. */
  if (m->entry_count > c->left / MIN_ENTRY_SIZE)
    return dcr__fail(c->d, DCR_E_TRUNCATED, "%llu entries cannot fit in %zu bytes",
                     (unsigned long long)m->entry_count, c->left);
  return DCR_OK;
}

/* What the entries take in memory (up to 8 times their bytes), `left` being the
 * bytes after the prefix. */
static uint64_t entries_need(const dcr__manifest *m, uint64_t left) {
  return (m->entry_count + 1) * sizeof *m->entries + (left / 8 + 1) * sizeof *m->dims_pool;
}

uint64_t dcr__manifest_need(const uint8_t head[DCR__MANIFEST_HEAD], uint64_t length,
                            const dcr_limits *lim, unsigned minor) {
  dcr__manifest m;
  memset(&m, 0, sizeof m);
  cursor c = {head, DCR__MANIFEST_HEAD, NULL, minor};
  if (length < DCR__MANIFEST_HEAD || parse_fields(&c, lim, &m)) return 0;
  uint64_t left = length - DCR__MANIFEST_HEAD;
  if (m.prefix_length > left || m.entry_count > (left - m.prefix_length) / MIN_ENTRY_SIZE) return 0;
  return entries_need(&m, left - m.prefix_length);
}

int dcr__manifest_parse(uint8_t *payload, size_t length, const dcr_limits *lim, unsigned minor,
                        dcr__manifest *m, dcr_detail *d) {
  memset(m, 0, sizeof *m);
  m->storage = payload;
  cursor c = {payload, length, d, minor};
  int rc = parse_fixed(&c, lim, m);
  if (rc) goto fail;
  /* Against the budget before it is allocated: DCR_E_NOMEM, not a verdict. */
  uint64_t need = entries_need(m, c.left);
  if (need > lim->max_memory) {
    rc = dcr__fail(d, DCR_E_NOMEM, "the manifest's %llu entries need %llu MiB, over the memory "
                   "budget (dcr_limits.max_memory, dcr --memory)",
                   (unsigned long long)m->entry_count, (unsigned long long)(need >> 20));
    goto fail;
  }
  m->entries = calloc(m->entry_count ? m->entry_count : 1, sizeof *m->entries);
  m->dims_pool = malloc((c.left / 8 + 1) * sizeof *m->dims_pool);
  if (!m->entries || !m->dims_pool) {
    rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate the manifest");
    goto fail;
  }
  if ((rc = parse_entries(&c, lim, m))) goto fail;
  if (c.left) {
    rc = dcr__fail(d, DCR_E_MANIFEST, "%zu bytes left after the last entry", c.left);
    goto fail;
  }
  if ((rc = check_layout(m, d)) || (rc = check_kind(m, lim, minor, d))) goto fail;
  return DCR_OK;
fail:
  dcr__manifest_free(m);
  return rc;
}

static size_t desc_size(const dcr__desc *t, int with_offset) {
  return 2 + 8 * (size_t)t->rank + 8 + (with_offset ? 8 : 0);
}

static uint8_t *put_desc(uint8_t *p, const dcr__desc *t, int with_offset) {
  p[0] = (uint8_t)t->dtype;
  p[1] = (uint8_t)t->rank;
  p += 2;
  for (unsigned i = 0; i < t->rank; i++, p += 8) dcr__put64(p, t->dims[i]);
  dcr__put64(p, t->byte_length);
  p += 8;
  if (with_offset) dcr__put64(p, t->offset), p += 8;
  return p;
}

int dcr__manifest_serialize(const dcr__manifest *m, uint8_t **out, size_t *length) {
  size_t size = DCR__MANIFEST_HEAD + (size_t)m->prefix_length;
  for (uint64_t i = 0; i < m->entry_count; i++) {
    const dcr__entry *e = &m->entries[i];
    size += 4 + e->name_length;
    if (e->presence & DCR__HAS_BASE) size += desc_size(&e->base, 0);
    if (e->presence & DCR__HAS_TARGET) size += desc_size(&e->target, 1);
  }
  uint8_t *buf = calloc(1, size), *p = buf;
  if (!buf) return DCR_E_NOMEM;
  dcr__put32(p, (uint32_t)m->entry_count);
  dcr__put32(p + 4, m->chunk_size);
  p[8] = (uint8_t)m->kind;
  dcr__put64(p + 16, m->prefix_length);
  dcr__put64(p + 24, m->data_length);
  p += DCR__MANIFEST_HEAD;
  if (m->prefix_length) memcpy(p, m->prefix, (size_t)m->prefix_length);
  p += m->prefix_length;
  for (uint64_t i = 0; i < m->entry_count; i++) {
    const dcr__entry *e = &m->entries[i];
    dcr__put16(p, e->name_length);
    memcpy(p + 2, e->name, e->name_length);
    p += 2 + e->name_length;
    p[0] = e->presence;
    p[1] = 0;
    p += 2;
    if (e->presence & DCR__HAS_BASE) p = put_desc(p, &e->base, 0);
    if (e->presence & DCR__HAS_TARGET) p = put_desc(p, &e->target, 1);
  }
  *out = buf;
  *length = size;
  return DCR_OK;
}
