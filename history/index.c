/*
 * index.c - the index of a history archive (SPEC.md §19.3): the one parser of
 * untrusted JSON in the layout, and its canonical writer. Every rule is checked
 * in the order R-HIS-2 and R-HIS-3 give, so that every reader reports the same
 * first failure.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "history.h"

const uint8_t *dcr__hmember_end_state(const dcr__hmember *m) {
  return m->kind == DCR_HISTORY_KEYFRAME ? m->state : m->target;
}

const char *dcr__hmember_meta(const dcr__hmember *m, const char *key) {
  for (size_t i = 0; i < m->meta_count; i++)
    if (!strcmp(m->meta_key[i], key)) return m->meta_value[i];
  return NULL;
}

void dcr__hfile_member(const dcr__hmember *m, size_t f, char *buf, dcr__hmember *out) {
  snprintf(buf, DCR__HISTORY_FILE_NAME_MAX, "%s/%s", m->name, m->files[f].path);
  memset(out, 0, sizeof *out);
  out->kind = DCR_HISTORY_KEYFRAME;
  out->step = m->step;
  out->name = buf;
  out->size = m->files[f].size;
  memcpy(out->digest, m->files[f].digest, 16);
}

static void member_free(dcr__hmember *m) {
  free(m->name);
  for (size_t i = 0; i < m->file_count; i++) free(m->files[i].path);
  free(m->files);
  for (size_t i = 0; i < m->meta_count; i++) free(m->meta_key[i]), free(m->meta_value[i]);
  free(m->meta_key);
  free(m->meta_value);
}

void dcr__hindex_free(dcr__hindex *x) {
  for (size_t i = 0; i < x->count; i++) member_free(&x->m[i]);
  free(x->m);
  free(x->run_id);
  memset(x, 0, sizeof *x);
}

static int grow(dcr__hindex *x, dcr_detail *d) {
  if (x->count && (x->count & (x->count - 1))) return DCR_OK; /* capacity: next power of two */
  dcr__hmember *m = realloc(x->m, (x->count ? 2 * x->count : 1) * sizeof *m);
  if (!m) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate the index of %zu members", x->count + 1);
  x->m = m;
  return DCR_OK;
}

int dcr__hindex_add(dcr__hindex *x, const dcr__hmember *m, dcr_detail *d) {
  int rc = grow(x, d);
  if (rc) return rc;
  dcr__hmember *c = &x->m[x->count];
  *c = *m;
  c->name = strdup(m->name);
  c->meta_count = 0;
  c->meta_key = calloc(m->meta_count + 1, sizeof *c->meta_key);
  c->meta_value = calloc(m->meta_count + 1, sizeof *c->meta_value);
  c->file_count = 0;
  c->files = calloc(m->file_count + 1, sizeof *c->files);
  int ok = c->name && c->meta_key && c->meta_value && c->files;
  for (size_t i = 0; ok && i < m->file_count; i++, c->file_count++) {
    c->files[i] = m->files[i];
    ok = (c->files[i].path = strdup(m->files[i].path)) != NULL;
  }
  for (size_t i = 0; ok && i < m->meta_count; i++, c->meta_count++) {
    c->meta_key[i] = strdup(m->meta_key[i]);
    c->meta_value[i] = strdup(m->meta_value[i]);
    ok = c->meta_key[i] && c->meta_value[i];
    if (!ok) c->meta_count++; /* so that member_free frees the one of the two that was made */
  }
  if (!ok) {
    member_free(c);
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate an index member");
  }
  x->count++;
  return DCR_OK;
}

/* A member name (R-HIS-2): a relative path of non-empty components, none "." or
 * "..", printable UTF-8 (no control characters, no backslash), that every tar and
 * zip tool extracts inside the directory it is run in. */
static int name_valid(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 255 || !dcr__utf8_valid((const uint8_t *)s, n)) return 0;
  const char *c = s;
  for (;;) {
    const char *e = strchr(c, '/');
    size_t len = e ? (size_t)(e - c) : strlen(c);
    if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.')) return 0;
    for (size_t i = 0; i < len; i++)
      if ((uint8_t)c[i] < 0x20 || c[i] == 0x7f || c[i] == '\\') return 0;
    if (!e) return 1;
    c = e + 1;
  }
}

/* Integers as JSON integers (never reals), in [min, max]. */
static int get_uint(json_t *o, const char *key, uint64_t min, uint64_t max, uint64_t *out) {
  json_t *v = json_object_get(o, key);
  if (!json_is_integer(v)) return -1;
  json_int_t i = json_integer_value(v);
  if (i < 0 || (uint64_t)i < min || (uint64_t)i > max) return -1;
  *out = (uint64_t)i;
  return 0;
}

static int get_digest(json_t *o, const char *key, uint8_t out[16]) {
  json_t *v = json_object_get(o, key);
  return json_is_string(v) ? dcr__unhex16(json_string_value(v), out) : -1;
}

/* Keys other than `known` (NULL-terminated): allowed only in a document of a
 * newer minor version, which may add them (§19.5). */
static const char *unknown_key(json_t *o, const char *const *known, unsigned minor) {
  if (minor > DCR__HISTORY_MINOR) return NULL;
  const char *key;
  json_t *v;
  json_object_foreach(o, key, v) {
    int found = 0;
    for (const char *const *k = known; *k && !found; k++) found = !strcmp(*k, key);
    if (!found) return key;
  }
  return NULL;
}

static int parse_meta(dcr__hmember *m, json_t *meta, size_t i, dcr_detail *d) {
  size_t n = json_object_size(meta);
  m->meta_key = calloc(n + 1, sizeof *m->meta_key);
  m->meta_value = calloc(n + 1, sizeof *m->meta_value);
  if (!m->meta_key || !m->meta_value) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate metadata");
  const char *key;
  json_t *v;
  json_object_foreach(meta, key, v) {
    if (!json_is_string(v))
      return dcr__fail(d, DCR_E_ARCHIVE, "member %zu: metadata '%.64s' is not a string", i, key);
    size_t kn = strlen(key);
    if (kn == 0 || kn > 65535)
      return dcr__fail(d, DCR_E_ARCHIVE, "member %zu: a metadata key of %zu bytes", i, kn);
    /* Sorted as a bundle's META section is (§6.4): one order, whatever the JSON's. */
    size_t at = m->meta_count;
    while (at > 0 && strcmp(m->meta_key[at - 1], key) > 0) at--;
    memmove(m->meta_key + at + 1, m->meta_key + at, (m->meta_count - at) * sizeof *m->meta_key);
    memmove(m->meta_value + at + 1, m->meta_value + at, (m->meta_count - at) * sizeof *m->meta_value);
    m->meta_key[at] = strdup(key);
    m->meta_value[at] = strdup(json_string_value(v));
    m->meta_count++;
    if (!m->meta_key[at] || !m->meta_value[at]) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate metadata");
  }
  for (size_t k = 0; k < m->meta_count; k++) {
    dcr_detail why; /* its code is DCR_E_MANIFEST; in an index the rule is R-HIS-2's */
    dcr__detail_init(&why);
    if (dcr__meta_standard_check(m->meta_key[k], m->meta_value[k], &why))
      return dcr__fail(d, DCR_E_ARCHIVE, "member %zu: %s", i, why.message);
  }
  return DCR_OK;
}

static int by_path(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, ((const dcr__hfile *)b)->path);
}

/* A directory keyframe's files (1.1): set member paths (§2.3) in strictly
 * increasing bytewise order, none a directory of another, each with its size and
 * digest; the member's size is their sum. */
static int parse_files(dcr__hmember *m, json_t *files, size_t i, unsigned minor, dcr_detail *d) {
  static const char *const file_keys[] = {"path", "size", "xxh3_128", NULL};
  if (!json_is_array(files) || json_array_size(files) > DCR__HISTORY_MEMBERS_MAX)
    return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s'): 'files' is not an array of at most 2^20 files", i,
                     m->name);
  size_t n = json_array_size(files);
  if (!(m->files = calloc(n + 1, sizeof *m->files))) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate %zu files", n);
  m->directory = 1;
  for (size_t f = 0; f < n; f++) {
    json_t *o = json_array_get(files, f), *path = json_object_get(o, "path");
    const char *bad = json_is_object(o) ? unknown_key(o, file_keys, minor) : NULL;
    if (!json_is_object(o) || bad)
      return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s'), file %zu: not an object%s%.64s", i, m->name, f,
                       bad ? ", or an unknown key: " : "", bad ? bad : "");
    const char *p = json_is_string(path) ? json_string_value(path) : NULL;
    size_t len = p ? json_string_length(path) : 0;
    if (!p || len > 4096 || strlen(p) != len || !dcr__set_path_valid(p, len))
      return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s'), file %zu: 'path' is not a set member path of "
                       "at most 4096 bytes (SPEC.md §2.3)", i, m->name, f);
    if (f && strcmp(m->files[f - 1].path, p) >= 0)
      return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s'): file '%.64s' is not after '%.64s': paths are "
                       "different and in bytewise order", i, m->name, p, m->files[f - 1].path);
    dcr__hfile *h = &m->files[f];
    if (!(h->path = strdup(p))) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate a path");
    m->file_count++;
    if (get_uint(o, "size", 0, INT64_MAX, &h->size) || h->size > INT64_MAX - m->size)
      return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s'), file '%.64s': 'size' is not an integer in "
                       "[0, 2^63), or the files' sizes add up to 2^63 or more", i, m->name, p);
    m->size += h->size;
    if (get_digest(o, "xxh3_128", h->digest))
      return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s'), file '%.64s': 'xxh3_128' is not 32 lower-case "
                       "hex digits", i, m->name, p);
  }
  /* A file cannot also be a directory: no path is a directory above another. */
  char *dir = NULL;
  for (size_t f = 0; f < n; f++)
    for (const char *s = strchr(m->files[f].path, '/'); s; s = strchr(s + 1, '/')) {
      size_t len = (size_t)(s - m->files[f].path);
      char *t = realloc(dir, len + 1);
      if (!t) return free(dir), dcr__fail(d, DCR_E_NOMEM, "cannot allocate a path");
      dir = t;
      memcpy(dir, m->files[f].path, len), dir[len] = 0;
      const char *key = dir;
      if (bsearch(&key, m->files, f, sizeof *m->files, by_path)) {
        int rc = dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s'): '%.64s' is a file and a directory", i, m->name,
                           dir);
        return free(dir), rc;
      }
    }
  free(dir);
  return DCR_OK;
}

static int parse_member(dcr__hmember *m, json_t *o, size_t i, unsigned minor, dcr_detail *d) {
  static const char *const keyframe_keys[] = {"name", "kind", "step", "size", "xxh3_128", "state", NULL};
  static const char *const directory_keys[] = {"name", "kind", "step", "state", "files", NULL};
  static const char *const bundle_keys[] = {"name", "kind", "step", "size", "xxh3_128", "base_state",
                                            "target_state", "metadata", NULL};
  if (!json_is_object(o)) return dcr__fail(d, DCR_E_ARCHIVE, "member %zu is not a JSON object", i);
  json_t *name = json_object_get(o, "name"), *kind = json_object_get(o, "kind");
  if (!json_is_string(name) || !name_valid(json_string_value(name)) ||
      !strcmp(json_string_value(name), DCR__HISTORY_INDEX_NAME))
    return dcr__fail(d, DCR_E_ARCHIVE, "member %zu: 'name' is missing or not a relative path of "
                     "printable UTF-8 components (SPEC.md §19.3)", i);
  if (!(m->name = strdup(json_string_value(name)))) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate a name");
  const char *k = json_is_string(kind) ? json_string_value(kind) : "";
  if (!strcmp(k, "keyframe")) m->kind = DCR_HISTORY_KEYFRAME;
  else if (!strcmp(k, "bundle")) m->kind = DCR_HISTORY_BUNDLE;
  else return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s'): 'kind' is not \"keyframe\" or \"bundle\"", i, m->name);
  /* A directory keyframe, from 1.1: a 1.0 index has no key "files" */
  json_t *files = minor >= 1 && m->kind == DCR_HISTORY_KEYFRAME ? json_object_get(o, "files") : NULL;
  const char *bad = unknown_key(o, m->kind == DCR_HISTORY_BUNDLE ? bundle_keys : files ? directory_keys
                                                                                         : keyframe_keys, minor);
  if (bad) return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s'): unknown key '%.64s' in a %u.%u index",
                            i, m->name, bad, DCR__HISTORY_MAJOR, minor);
  if (get_uint(o, "step", 0, DCR__HISTORY_STEP_MAX - 1, &m->step))
    return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s'): 'step' is not an integer in [0, 2^53)", i, m->name);
  if (files) {
    if (get_digest(o, "state", m->state))
      return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s'): 'state' is not 32 lower-case hex digits", i, m->name);
    return parse_files(m, files, i, minor, d);
  }
  if (get_uint(o, "size", 0, INT64_MAX, &m->size))
    return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s'): 'size' is not an integer in [0, 2^63)", i, m->name);
  if (get_digest(o, "xxh3_128", m->digest))
    return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s'): 'xxh3_128' is not 32 lower-case hex digits", i, m->name);
  if (m->kind == DCR_HISTORY_KEYFRAME) {
    if (get_digest(o, "state", m->state))
      return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s'): 'state' is not 32 lower-case hex digits", i, m->name);
    return DCR_OK;
  }
  if (get_digest(o, "base_state", m->base) || get_digest(o, "target_state", m->target))
    return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s'): 'base_state' and 'target_state' must be 32 "
                     "lower-case hex digits", i, m->name);
  json_t *meta = json_object_get(o, "metadata");
  if (meta && !json_is_object(meta))
    return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s'): 'metadata' is not an object", i, m->name);
  return meta ? parse_meta(m, meta, i, d) : DCR_OK;
}

/* R-HIS-3: names unique, and one linear chain, each bundle taking the previous step's state to the
 * next, each keyframe after the bundle of its step, and what the standard
 * metadata says agreeing with it. */
static int by_name(const void *a, const void *b) {
  return strcmp((*(const dcr__hmember *const *)a)->name, (*(const dcr__hmember *const *)b)->name);
}

int dcr__hindex_check(const dcr__hindex *x, dcr_detail *d) {
  char a[33], b[33];
  const dcr__hmember **sorted = malloc(x->count * sizeof *sorted);
  if (!sorted) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate %zu names", x->count);
  for (size_t i = 0; i < x->count; i++) sorted[i] = &x->m[i];
  qsort(sorted, x->count, sizeof *sorted, by_name);
  for (size_t i = 1; i < x->count; i++)
    if (!strcmp(sorted[i - 1]->name, sorted[i]->name)) {
      const char *name = sorted[i]->name;
      free(sorted);
      return dcr__fail(d, DCR_E_ARCHIVE, "two members are named '%.64s'", name);
    }
  /* A directory keyframe's files are members "<name>/<path>": no other name may
   * start so. Names sorted, those under "<name>/" follow it in one run. */
  for (size_t i = 0; i < x->count; i++) {
    const dcr__hmember *m = sorted[i];
    if (!m->directory) continue;
    size_t n = strlen(m->name);
    for (size_t j = i + 1; j < x->count && !strncmp(sorted[j]->name, m->name, n); j++)
      if (sorted[j]->name[n] == '/') {
        const char *name = sorted[j]->name;
        free(sorted);
        return dcr__fail(d, DCR_E_ARCHIVE, "member '%.64s' is inside directory keyframe '%.64s'", name, m->name);
      }
  }
  free(sorted);
  if (x->m[0].kind != DCR_HISTORY_KEYFRAME)
    return dcr__fail(d, DCR_E_ARCHIVE, "member 0 ('%.64s') is a bundle: an archive starts with a keyframe", x->m[0].name);
  for (size_t i = 1; i < x->count; i++)
    if (x->m[i].kind == DCR_HISTORY_KEYFRAME && x->m[i].directory != x->m[0].directory)
      return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s') is a %s keyframe after a %s one: an archive's "
                       "keyframes are all files or all directories", i, x->m[i].name,
                       x->m[i].directory ? "directory" : "file", x->m[0].directory ? "directory" : "file");
  const dcr__hmember *last_bundle = NULL;
  for (size_t i = 0; i < x->count; i++) {
    const dcr__hmember *m = &x->m[i], *p = i ? &x->m[i - 1] : NULL;
    if (p && m->kind == DCR_HISTORY_BUNDLE) {
      if (m->step != p->step + 1)
        return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s') is step %llu after step %llu: steps follow "
                         "one another", i, m->name, (unsigned long long)m->step, (unsigned long long)p->step);
      if (memcmp(m->base, dcr__hmember_end_state(p), 16)) {
        dcr__hex(m->base, 16, a), dcr__hex(dcr__hmember_end_state(p), 16, b);
        return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s') applies to state %s, but step %llu ends in %s",
                         i, m->name, a, (unsigned long long)p->step, b);
      }
    }
    if (p && m->kind == DCR_HISTORY_KEYFRAME) {
      if (p->kind != DCR_HISTORY_BUNDLE || m->step != p->step)
        return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s'): a keyframe follows the bundle of its own "
                         "step", i, m->name);
      if (memcmp(m->state, p->target, 16)) {
        dcr__hex(m->state, 16, a), dcr__hex(p->target, 16, b);
        return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s'): keyframe state %s, but the bundle of step "
                         "%llu makes %s", i, m->name, a, (unsigned long long)m->step, b);
      }
    }
    if (m->kind != DCR_HISTORY_BUNDLE) continue;
    const char *step = dcr__hmember_meta(m, "step"), *run = dcr__hmember_meta(m, "run_id");
    const char *parent = dcr__hmember_meta(m, "parent_bundle");
    uint64_t s;
    if (step && (dcr__meta_step(step, &s) || s != m->step))
      return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s') is step %llu but its metadata says step %.32s",
                       i, m->name, (unsigned long long)m->step, step);
    if (run && x->run_id && strcmp(run, x->run_id))
      return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s') is of run '%.64s', the archive of run '%.64s'",
                       i, m->name, run, x->run_id);
    if (parent && last_bundle) {
      dcr__hex(last_bundle->digest, 16, a);
      if (strcmp(parent, a))
        return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s') names parent bundle %s, but the previous "
                         "bundle ('%.64s') is %s", i, m->name, parent, last_bundle->name, a);
    }
    last_bundle = m;
  }
  return DCR_OK;
}

int dcr__hindex_scan(dcr__json_cost *c, const char *piece, size_t n, uint64_t length, uint64_t budget,
                     dcr_detail *d) {
  dcr__json_cost_feed(c, piece, n);
  /* The text, jansson's document of it, then the members kept: a struct and a
   * copy of each string (names, metadata) apiece. */
  uint64_t cost = length + dcr__json_cost_dom(c) + c->objects * sizeof(dcr__hmember) + c->string_bytes;
  if (cost <= budget) return DCR_OK;
  return dcr__fail(d, DCR_E_NOMEM, "reading the index would take more than %llu MiB (%llu bytes of it read), "
                   "over the memory budget of %llu MiB (dcr_limits.max_memory, dcr --memory)",
                   (unsigned long long)(cost >> 20), (unsigned long long)length,
                   (unsigned long long)(budget >> 20));
}

int dcr__hindex_parse(dcr__hindex *x, const char *json, size_t length, uint64_t budget, dcr_detail *d) {
  static const char *const top_keys[] = {"format", "version", "run_id", "keyframe_every", "members", NULL};
  memset(x, 0, sizeof *x);
  dcr__json_cost cost;
  dcr__json_cost_init(&cost);
  int err = dcr__hindex_scan(&cost, json, length, length, budget, d);
  if (err) return err;
  json_error_t e;
  json_t *doc = json_loadb(json, length, JSON_REJECT_DUPLICATES, &e);
  /* jansson leaves the error text empty where an allocation failed before it set
   * one: no verdict on the text either. */
  if (!doc && (json_error_code(&e) == json_error_out_of_memory || !e.text[0]))
    return dcr__fail(d, DCR_E_NOMEM, "out of memory while parsing the index");
  if (!doc) return dcr__fail(d, DCR_E_ARCHIVE, "the index is not JSON: %s (line %d)", e.text, e.line);
  int rc = DCR_OK;
  json_t *format = json_object_get(doc, "format"), *version = json_object_get(doc, "version");
  unsigned major = 0, minor = 0;
  char end;
  if (!json_is_object(doc) || !json_is_string(format) || strcmp(json_string_value(format), "dcr-history")) {
    rc = dcr__fail(d, DCR_E_ARCHIVE, "the index is not an object with \"format\": \"dcr-history\"");
    goto out;
  }
  if (!json_is_string(version) || sscanf(json_string_value(version), "%3u.%3u%c", &major, &minor, &end) != 2 ||
      json_string_value(version)[0] == '+' || json_string_value(version)[0] == ' ') {
    rc = dcr__fail(d, DCR_E_ARCHIVE, "the index's \"version\" is not \"MAJOR.MINOR\"");
    goto out;
  }
  if (major != DCR__HISTORY_MAJOR) {
    rc = dcr__fail(d, DCR_E_VERSION, "history archive version %u.%u: this reader knows %d.x", major, minor,
                   DCR__HISTORY_MAJOR);
    goto out;
  }
  x->minor = minor;
  const char *bad = unknown_key(doc, top_keys, minor);
  if (bad) {
    rc = dcr__fail(d, DCR_E_ARCHIVE, "the index has an unknown key '%.64s' for version 1.%u", bad, minor);
    goto out;
  }
  json_t *run = json_object_get(doc, "run_id"), *members = json_object_get(doc, "members");
  if (run && (!json_is_string(run) || dcr__meta_standard_check("run_id", json_string_value(run), NULL))) {
    rc = dcr__fail(d, DCR_E_ARCHIVE, "the index's \"run_id\" is not a string of 1 to 256 bytes");
    goto out;
  }
  if (run && !(x->run_id = strdup(json_string_value(run)))) {
    rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate the run id");
    goto out;
  }
  if (json_object_get(doc, "keyframe_every") &&
      get_uint(doc, "keyframe_every", 1, DCR__HISTORY_STEP_MAX - 1, &x->keyframe_every)) {
    rc = dcr__fail(d, DCR_E_ARCHIVE, "the index's \"keyframe_every\" is not an integer in [1, 2^53)");
    goto out;
  }
  if (!json_is_array(members) || json_array_size(members) == 0 ||
      json_array_size(members) > DCR__HISTORY_MEMBERS_MAX) {
    rc = dcr__fail(d, DCR_E_ARCHIVE, "the index's \"members\" is not an array of 1 to 2^20 members");
    goto out;
  }
  size_t n = json_array_size(members);
  if (!(x->m = calloc(n, sizeof *x->m))) {
    rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate %zu members", n);
    goto out;
  }
  for (size_t i = 0; i < n && !rc; i++) {
    x->count = i + 1; /* so that a member half parsed is freed */
    rc = parse_member(&x->m[i], json_array_get(members, i), i, minor, d);
  }
  if (!rc) rc = dcr__hindex_check(x, d);
out:
  json_decref(doc);
  if (rc) dcr__hindex_free(x);
  return rc;
}

static json_t *hex_string(const uint8_t p[16]) {
  char h[33];
  dcr__hex(p, 16, h);
  return json_string(h);
}

int dcr__hindex_write(const dcr__hindex *x, char **out, size_t *length, dcr_detail *d) {
  json_t *doc = json_object(), *members = json_array();
  int ok = doc && members;
  char version[16];
  /* The lowest minor that says it (§19.5): 1.1 only for directory keyframes. */
  snprintf(version, sizeof version, "%d.%d", DCR__HISTORY_MAJOR, x->m[0].directory ? 1 : 0);
  ok = ok && !json_object_set_new(doc, "format", json_string("dcr-history")) &&
       !json_object_set_new(doc, "version", json_string(version));
  if (ok && x->run_id) ok = !json_object_set_new(doc, "run_id", json_string(x->run_id));
  if (ok && x->keyframe_every)
    ok = !json_object_set_new(doc, "keyframe_every", json_integer((json_int_t)x->keyframe_every));
  for (size_t i = 0; ok && i < x->count; i++) {
    const dcr__hmember *m = &x->m[i];
    int key = m->kind == DCR_HISTORY_KEYFRAME;
    json_t *o = json_object();
    ok = o && !json_array_append_new(members, o) &&
         !json_object_set_new(o, "name", json_string(m->name)) &&
         !json_object_set_new(o, "kind", json_string(key ? "keyframe" : "bundle")) &&
         !json_object_set_new(o, "step", json_integer((json_int_t)m->step));
    if (ok && !m->directory)
      ok = !json_object_set_new(o, "size", json_integer((json_int_t)m->size)) &&
           !json_object_set_new(o, "xxh3_128", hex_string(m->digest));
    if (ok && key) ok = !json_object_set_new(o, "state", hex_string(m->state));
    json_t *files = ok && m->directory ? json_array() : NULL;
    if (m->directory) ok = files && !json_object_set_new(o, "files", files);
    for (size_t f = 0; ok && f < m->file_count; f++) {
      json_t *e = json_object();
      ok = e && !json_array_append_new(files, e) &&
           !json_object_set_new(e, "path", json_string(m->files[f].path)) &&
           !json_object_set_new(e, "size", json_integer((json_int_t)m->files[f].size)) &&
           !json_object_set_new(e, "xxh3_128", hex_string(m->files[f].digest));
    }
    if (ok && !key)
      ok = !json_object_set_new(o, "base_state", hex_string(m->base)) &&
           !json_object_set_new(o, "target_state", hex_string(m->target));
    if (ok && !key && m->meta_count) {
      json_t *meta = json_object();
      ok = meta && !json_object_set_new(o, "metadata", meta);
      for (size_t k = 0; ok && k < m->meta_count; k++)
        ok = !json_object_set_new(meta, m->meta_key[k], json_string(m->meta_value[k]));
    }
  }
  ok = ok && !json_object_set_new(doc, "members", members);
  if (!ok) json_decref(members);
  /* Keys in insertion order: the same index, the same bytes. */
  char *s = ok ? json_dumps(doc, JSON_PRESERVE_ORDER | JSON_INDENT(1) | JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
  json_decref(doc);
  if (!s) return dcr__fail(d, DCR_E_NOMEM, "cannot write the index");
  size_t n = strlen(s);
  char *t = realloc(s, n + 2);
  if (!t) return free(s), dcr__fail(d, DCR_E_NOMEM, "cannot write the index");
  t[n] = '\n', t[n + 1] = 0;
  *out = t;
  *length = n + 1;
  return DCR_OK;
}
