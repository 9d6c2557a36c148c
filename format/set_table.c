/*
 * set_table.c - the set table (SPEC.md §6.6, format 1.1): the prefix of a set's
 * manifest, which names the target's member files, their kinds, headers and sizes,
 * and the base's raw members. Checked in stored order (R-SET-1), then against the
 * manifest's entries (R-SET-2).
 */
#include <stdlib.h>

#include "format.h"

#define DTYPE_U8 2       /* SPEC.md §3 */
#define MIN_BASE_PATH 3  /* u16 length and a one-byte path */

typedef struct {
  const uint8_t *p;
  size_t left;
  dcr_detail *d;
} cursor;

static int take(cursor *c, size_t n, const uint8_t **out) {
  if (c->left < n)
    return dcr__fail(c->d, DCR_E_TRUNCATED, "set table ends inside a field (%zu bytes short)",
                     n - c->left);
  *out = c->p;
  c->p += n, c->left -= n;
  return DCR_OK;
}

static int field(cursor *c, size_t width, uint64_t *v) {
  const uint8_t *p = NULL;
  int rc = take(c, width, &p);
  *v = 0;
  for (size_t i = width; !rc && i-- > 0;) *v = *v << 8 | p[i];
  return rc;
}

/* A path field: its length, its limit, its bytes, its rules and its order. */
static int path_field(cursor *c, const dcr_limits *lim, const char *prev, size_t prev_length,
                      const char **path, size_t *length) {
  uint64_t v;
  const uint8_t *p = NULL;
  int rc = field(c, 2, &v);
  if (rc) return rc;
  if (v > lim->max_name_length)
    return dcr__fail(c->d, DCR_E_LIMIT, "member path of %llu bytes exceeds the limit %llu",
                     (unsigned long long)v, (unsigned long long)lim->max_name_length);
  if ((rc = take(c, (size_t)v, &p))) return rc;
  *path = (const char *)p;
  *length = (size_t)v;
  if (!dcr__set_path_valid(*path, *length))
    return dcr__fail(c->d, DCR_E_NAME, "member path \"%.*s\" is not a relative path of "
                     "non-hidden components joined by '/' (SPEC.md §2.3)",
                     (int)(*length < 200 ? *length : 200), *path);
  if (prev && dcr__name_cmp(prev, prev_length, *path, *length) >= 0)
    return dcr__fail(c->d, DCR_E_NAME, "member path \"%.*s\" does not sort after the previous one",
                     (int)(*length < 200 ? *length : 200), *path);
  return DCR_OK;
}

/* A member's header: §2.1 rules 1-3 for its file, then rule 4 on its data. */
static int parse_member(const dcr__member *mb, const dcr_limits *lim, unsigned minor,
                        dcr__checkpoint *ck, dcr_detail *d) {
  int rc = dcr__safetensors_parse(mb->prefix, (size_t)mb->prefix_length, mb->data_length, lim,
                                  minor, ck, d);
  if (!rc && (rc = dcr__safetensors_check_layout(ck, mb->data_length, d))) dcr__checkpoint_free(ck);
  return rc;
}

static int parse_members(cursor *c, dcr__manifest *m, const dcr_limits *lim, unsigned minor) {
  uint64_t v, start = 0;
  int rc = field(c, 4, &v);
  if (rc) return rc;
  if (v > lim->max_tensors)
    return dcr__fail(c->d, DCR_E_LIMIT, "%llu members exceed the limit %llu",
                     (unsigned long long)v, (unsigned long long)lim->max_tensors);
  if (v > c->left / DCR__SET_MEMBER_MIN)
    return dcr__fail(c->d, DCR_E_TRUNCATED, "%llu members cannot fit in %zu bytes",
                     (unsigned long long)v, c->left);
  m->member_count = (size_t)v;
  if (!(m->members = calloc(m->member_count + 1, sizeof *m->members)))
    return dcr__fail(c->d, DCR_E_NOMEM, "cannot allocate %zu members", m->member_count);
  for (size_t i = 0; i < m->member_count; i++) {
    dcr__member *mb = &m->members[i];
    const uint8_t *prefix = NULL;
    uint64_t total;
    if ((rc = path_field(c, lim, i ? mb[-1].path : NULL, i ? mb[-1].path_length : 0, &mb->path,
                         &mb->path_length)))
      return rc;
    if ((rc = field(c, 1, &v))) return rc;
    mb->kind = (int)v;
    if (v > DCR_KIND_SAFETENSORS)
      return dcr__fail(c->d, DCR_E_MANIFEST, "member kind %llu (0 raw, 1 safetensors)",
                       (unsigned long long)v);
    if ((rc = field(c, 1, &v))) return rc;
    if (v) return dcr__fail(c->d, DCR_E_RESERVED, "member's reserved byte is 0x%02x", (unsigned)v);
    if (mb->kind != dcr__set_member_kind(mb->path, mb->path_length))
      return dcr__fail(c->d, DCR_E_MANIFEST, "member \"%.*s\" is of kind %d; its name says %s",
                       (int)(mb->path_length < 200 ? mb->path_length : 200), mb->path, mb->kind,
                       mb->kind == DCR_KIND_RAW ? "safetensors" : "raw");
    if ((rc = field(c, 8, &mb->prefix_length)) || (rc = field(c, 8, &mb->data_length))) return rc;
    if (dcr__add_overflow(mb->prefix_length, mb->data_length, &total) || total > lim->max_file_size)
      return dcr__fail(c->d, DCR_E_LIMIT, "member file of %llu + %llu bytes exceeds the limit %llu",
                       (unsigned long long)mb->prefix_length, (unsigned long long)mb->data_length,
                       (unsigned long long)lim->max_file_size);
    if (mb->kind == DCR_KIND_RAW && mb->prefix_length)
      return dcr__fail(c->d, DCR_E_MANIFEST, "raw member with a %llu-byte prefix",
                       (unsigned long long)mb->prefix_length);
    if (mb->prefix_length > c->left)
      return dcr__fail(c->d, DCR_E_TRUNCATED, "member prefix of %llu bytes exceeds the table",
                       (unsigned long long)mb->prefix_length);
    if ((rc = take(c, (size_t)mb->prefix_length, &prefix))) return rc;
    mb->prefix = prefix;
    mb->start = start;
    start += mb->data_length; /* each is below 2^48: no overflow before step 6 */
    if (mb->kind == DCR_KIND_SAFETENSORS) {
      dcr__checkpoint ck;
      if ((rc = parse_member(mb, lim, minor, &ck, c->d))) return rc;
      dcr__checkpoint_free(&ck);
    }
  }
  return DCR_OK;
}

/* §6.6 step 5: "a" and "a/b" cannot both be files. */
static int check_nesting(const dcr__member *paths, size_t count, dcr_detail *d) {
  for (size_t i = 0; i < count; i++) {
    const dcr__member *p = &paths[i];
    for (size_t k = 1; k < p->path_length; k++) {
      if (p->path[k] != '/') continue;
      size_t lo = 0, hi = count; /* binary search for the path's first k bytes */
      while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const dcr__member *q = &paths[mid];
        int c = dcr__name_cmp(q->path, q->path_length, p->path, k);
        if (!c)
          return dcr__fail(d, DCR_E_NAME, "\"%.*s\" is a member and a directory of \"%.*s\"",
                           (int)k, p->path, (int)(p->path_length < 200 ? p->path_length : 200),
                           p->path);
        if (c < 0) lo = mid + 1;
        else hi = mid;
      }
    }
  }
  return DCR_OK;
}

static int raw_shape(const dcr__desc *t, uint64_t length) {
  return t->dtype == DTYPE_U8 && t->rank == 1 && (length == UINT64_MAX || t->dims[0] == length);
}

static int mismatch(dcr_detail *d, const char *name, size_t n, const char *why) {
  dcr__detail_tensor(d, DCR_NONE, name, n);
  return dcr__fail(d, DCR_E_MANIFEST, "set table and entries disagree: %s", why);
}

/* R-SET-2: the members are exactly the target entries. `claimed` marks them. */
static int claim(dcr__manifest *m, uint8_t *claimed, const char *name, size_t n,
                 const dcr__desc *want, uint64_t offset, dcr_detail *d) {
  dcr__entry *e = dcr__manifest_find(m, name, n);
  if (!e || !(e->presence & DCR__HAS_TARGET))
    return mismatch(d, name, n, "a member's tensor is not a target entry");
  const dcr__desc *t = &e->target;
  if (t->dtype != want->dtype || t->rank != want->rank || t->offset != offset ||
      (t->rank && memcmp(t->dims, want->dims, t->rank * sizeof *t->dims)))
    return mismatch(d, name, n, "dtype, shape or offset differ");
  if (claimed[e - m->entries]++) return mismatch(d, name, n, "two members give this name");
  return DCR_OK;
}

static int match_entries(dcr__manifest *m, const dcr_limits *lim, unsigned minor,
                         const char *const *base_raw, const size_t *base_raw_length,
                         size_t base_raw_count, dcr_detail *d) {
  uint8_t *claimed = calloc((size_t)m->entry_count + 1, 1);
  if (!claimed) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  int rc = DCR_OK;
  for (size_t i = 0; !rc && i < m->member_count; i++) {
    const dcr__member *mb = &m->members[i];
    if (mb->kind == DCR_KIND_RAW) {
      uint64_t dim = mb->data_length;
      dcr__desc want = {.dtype = DTYPE_U8, .rank = 1, .dims = &dim, .byte_length = dim};
      if (!(rc = claim(m, claimed, mb->path, mb->path_length, &want, mb->start, d)))
        dcr__manifest_find(m, mb->path, mb->path_length)->raw |= DCR__HAS_TARGET;
      continue;
    }
    dcr__checkpoint ck;
    if ((rc = parse_member(mb, lim, minor, &ck, d))) break; /* checked already */
    for (size_t k = 0; !rc && k < ck.count; k++)
      rc = claim(m, claimed, ck.tensors[k].name, ck.tensors[k].name_length, &ck.tensors[k].desc,
                 mb->start + ck.tensors[k].desc.offset, d);
    dcr__checkpoint_free(&ck);
  }
  for (uint64_t i = 0; !rc && i < m->entry_count; i++)
    if ((m->entries[i].presence & DCR__HAS_TARGET) && !claimed[i])
      rc = mismatch(d, m->entries[i].name, m->entries[i].name_length,
                    "a target entry is in no member");
  for (size_t i = 0; !rc && i < base_raw_count; i++) {
    dcr__entry *e = dcr__manifest_find(m, base_raw[i], base_raw_length[i]);
    if (!e || !(e->presence & DCR__HAS_BASE) || !raw_shape(&e->base, UINT64_MAX))
      rc = mismatch(d, base_raw[i], base_raw_length[i],
                    "a base raw path is not a U8 base entry of rank 1");
    else
      e->raw |= DCR__HAS_BASE;
  }
  free(claimed);
  return rc;
}

int dcr__set_table_check(dcr__manifest *m, const dcr_limits *lim, unsigned minor, dcr_detail *d) {
  cursor c = {m->prefix, (size_t)m->prefix_length, d};
  uint64_t count, sum = 0;
  const char **raw = NULL;
  size_t *raw_length = NULL;
  dcr__member *raw_paths = NULL; /* for check_nesting */
  int rc = parse_members(&c, m, lim, minor);
  if (rc) goto done;
  m->members_length = (size_t)m->prefix_length - c.left;
  if ((rc = field(&c, 4, &count))) goto done;
  if (count > lim->max_tensors) {
    rc = dcr__fail(d, DCR_E_LIMIT, "%llu base raw paths exceed the limit %llu",
                   (unsigned long long)count, (unsigned long long)lim->max_tensors);
    goto done;
  }
  if (count > c.left / MIN_BASE_PATH) {
    rc = dcr__fail(d, DCR_E_TRUNCATED, "%llu base raw paths cannot fit in %zu bytes",
                   (unsigned long long)count, c.left);
    goto done;
  }
  raw = calloc((size_t)count + 1, sizeof *raw);
  raw_length = calloc((size_t)count + 1, sizeof *raw_length);
  raw_paths = calloc((size_t)count + 1, sizeof *raw_paths);
  if (!raw || !raw_length || !raw_paths) {
    rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate the base raw paths");
    goto done;
  }
  for (size_t i = 0; i < count; i++) {
    if ((rc = path_field(&c, lim, i ? raw[i - 1] : NULL, i ? raw_length[i - 1] : 0, &raw[i],
                         &raw_length[i])))
      goto done;
    if (dcr__set_member_kind(raw[i], raw_length[i]) != DCR_KIND_RAW) {
      rc = dcr__fail(d, DCR_E_MANIFEST, "base raw path \"%.*s\" names a safetensors file",
                     (int)(raw_length[i] < 200 ? raw_length[i] : 200), raw[i]);
      goto done;
    }
    raw_paths[i].path = raw[i], raw_paths[i].path_length = raw_length[i];
  }
  if (c.left) {
    rc = dcr__fail(d, DCR_E_MANIFEST, "%zu bytes left after the set table", c.left);
    goto done;
  }
  if ((rc = check_nesting(m->members, m->member_count, d)) ||
      (rc = check_nesting(raw_paths, (size_t)count, d)))
    goto done;
  for (size_t i = 0; i < m->member_count; i++) sum += m->members[i].data_length;
  if (sum != m->data_length) {
    rc = dcr__fail(d, DCR_E_MANIFEST, "members hold %llu bytes of data; the manifest %llu",
                   (unsigned long long)sum, (unsigned long long)m->data_length);
    goto done;
  }
  rc = match_entries(m, lim, minor, raw, raw_length, (size_t)count, d);
done:
  free(raw), free(raw_length), free(raw_paths);
  return rc;
}

int dcr__set_table_write(const dcr__checkpoint *target, const dcr__checkpoint *base, uint8_t **out,
                         size_t *length, dcr_detail *d) {
  /* the target's table ends in a base raw count of 0: replaced by the base's paths */
  size_t n = (size_t)target->prefix_length - 4, raws = 0;
  for (size_t i = 0; i < base->count; i++)
    if (base->tensors[i].raw_member) n += 2 + base->tensors[i].name_length, raws++;
  uint8_t *p = malloc(n + 4);
  if (!p) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate the set table");
  memcpy(p, target->prefix, (size_t)target->prefix_length - 4);
  size_t at = (size_t)target->prefix_length - 4;
  dcr__put32(p + at, (uint32_t)raws);
  at += 4;
  for (size_t i = 0; i < base->count; i++) { /* tensors are in name order: paths sorted */
    const dcr__tensor *t = &base->tensors[i];
    if (!t->raw_member) continue;
    dcr__put16(p + at, (uint16_t)t->name_length);
    memcpy(p + at + 2, t->name, t->name_length);
    at += 2 + t->name_length;
  }
  *out = p;
  *length = n + 4;
  return DCR_OK;
}
