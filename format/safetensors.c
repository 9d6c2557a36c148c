/*
 * safetensors.c - strict parsing of a safetensors prefix (SPEC.md §2.1).
 *
 * The header is untrusted: every rule is checked before its value is used, and
 * each failure names the tensor and what exactly is wrong. jansson does the JSON
 * itself (UTF-8, duplicate keys, syntax); the rest is the format's rules.
 */
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "checkpoint.h"

#define METADATA_KEY "__metadata__"

static int fail_tensor(dcr_detail *d, const char *name, size_t name_length, int code,
                       const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int fail_tensor(dcr_detail *d, const char *name, size_t name_length, int code,
                       const char *fmt, ...) {
  char message[sizeof d->message];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  dcr__detail_tensor(d, DCR_NONE, name, name_length);
  return dcr__fail(d, code, "%s", message);
}

/* ---- JSON errors --------------------------------------------------------- */

/* jansson reports a failure as a code and a position; whether it concerns a tensor
 * name (DCR_E_NAME) or the header in general (DCR_E_CHECKPOINT) depends on where
 * that position is. The text before it was lexed successfully, so tracking
 * strings and nesting is enough to tell. */
typedef struct {
  int in_string;      /* the position is inside a string... */
  int string_is_name; /* ...which is a key of the root object */
  size_t start;       /* where that string's text starts */
  int last_is_name;   /* the last complete string was a key of the root object */
  size_t last_start, last_end;
} json_spot;

static void json_locate(const uint8_t *s, size_t n, json_spot *sp) {
  size_t depth = 0;
  int root_is_object = 0, expect_key = 0;
  memset(sp, 0, sizeof *sp);
  for (size_t i = 0; i < n; i++) {
    uint8_t c = s[i];
    if (sp->in_string) {
      if (c == '\\') {
        i++;
      } else if (c == '"') {
        sp->in_string = 0;
        sp->last_is_name = sp->string_is_name;
        sp->last_start = sp->start;
        sp->last_end = i;
      }
      continue;
    }
    switch (c) {
    case '"':
      sp->in_string = 1;
      sp->string_is_name = depth == 1 && root_is_object && expect_key;
      sp->start = i + 1;
      break;
    case '{':
    case '[':
      if (depth == 0) root_is_object = c == '{';
      if (++depth == 1) expect_key = 1;
      break;
    case '}':
    case ']':
      if (depth) depth--;
      break;
    case ',':
      if (depth == 1) expect_key = 1;
      break;
    case ':':
      if (depth == 1) expect_key = 0;
      break;
    default:
      break;
    }
  }
}

static int json_failure(const uint8_t *text, size_t n, const json_error_t *e, dcr_detail *d) {
  enum json_error_code code = json_error_code(e);
  size_t pos = e->position >= 0 && (size_t)e->position <= n ? (size_t)e->position : n;
  json_spot sp;

  /* jansson leaves the error as it began (no text) where an allocation fails before
   * it sets one (its lexer's buffer, a new object or array): that is no verdict on
   * the text either (issue 18: it was reported as "header is not valid JSON"). */
  if (code == json_error_out_of_memory || !e->text[0])
    return dcr__fail(d, DCR_E_NOMEM, "out of memory while parsing the safetensors header (the "
                     "memory budget is dcr_limits.max_memory, dcr --memory)");
  json_locate(text, pos, &sp);
  dcr__detail_at(d, NULL, 8 + (uint64_t)pos);
  /* Raw bytes that are not UTF-8 make a name not UTF-8 (rule 5) before they make
   * the header not UTF-8 (rule 2): the more specific code wins. */
  if (code == json_error_invalid_utf8 && sp.in_string && sp.string_is_name)
    return fail_tensor(d, (const char *)text + sp.start, pos - sp.start, DCR_E_NAME,
                       "tensor name is not valid UTF-8 (byte 0x%02x)", pos < n ? text[pos] : 0);
  if (!sp.in_string && sp.last_is_name) {
    const char *name = (const char *)text + sp.last_start;
    size_t length = sp.last_end - sp.last_start;
    if (code == json_error_duplicate_key)
      return fail_tensor(d, name, length, DCR_E_NAME, "tensor name \"%.*s\" appears twice",
                         (int)(length < 64 ? length : 64), name);
    /* An escaped lone surrogate is not a character; an escaped NUL is one, but no
     * name may contain it (names are C strings in most of the world). */
    if (code == json_error_null_byte_in_key || code == json_error_null_character)
      return fail_tensor(d, name, length, DCR_E_NAME, "tensor name contains U+0000");
    if (code == json_error_invalid_syntax && !strncmp(e->text, "invalid Unicode", 15))
      return fail_tensor(d, name, length, DCR_E_NAME,
                         "tensor name is not valid UTF-8 (an escaped lone surrogate)");
  }
  return dcr__fail(d, DCR_E_CHECKPOINT, "header is not valid JSON: %s (line %d, column %d)",
                   e->text, e->line, e->column);
}

/* ---- one tensor ---------------------------------------------------------- */

static const char *json_kind(const json_t *j) {
  switch (json_typeof(j)) {
  case JSON_OBJECT: return "an object";
  case JSON_ARRAY: return "an array";
  case JSON_STRING: return "a string";
  case JSON_INTEGER: return "an integer";
  case JSON_REAL: return "a real number";
  case JSON_TRUE:
  case JSON_FALSE: return "a boolean";
  case JSON_NULL: return "null";
  }
  return "?";
}

/* jansson holds integers as long long and fails to parse larger ones, so the sign
 * is the only range check left. Returns NULL, or what is wrong. */
static const char *json_u64(const json_t *j, uint64_t *v) {
  if (!json_is_integer(j)) return json_kind(j);
  json_int_t x = json_integer_value(j);
  if (x < 0) return "negative";
  *v = (uint64_t)x;
  return NULL;
}

static void format_shape(char *buf, size_t cap, const uint64_t *dims, unsigned rank) {
  size_t used = (size_t)snprintf(buf, cap, "[");
  for (unsigned i = 0; i < rank && used < cap; i++) {
    if (used + 24 >= cap) { /* room for "...]" at least */
      snprintf(buf + used, cap - used, "...");
      used += 3;
      break;
    }
    used += (size_t)snprintf(buf + used, cap - used, "%s%llu", i ? ", " : "",
                             (unsigned long long)dims[i]);
  }
  if (used < cap) snprintf(buf + used, cap - used, "]");
}

/* The keys a tensor must have, exactly (rule 2). */
static const char *const tensor_keys[3] = {"dtype", "shape", "data_offsets"};

static int check_keys(const char *name, size_t name_length, json_t *v, dcr_detail *d) {
  const char *key;
  json_t *value;
  if (!json_is_object(v))
    return fail_tensor(d, name, name_length, DCR_E_CHECKPOINT,
                       "value is %s, not an object with dtype, shape and data_offsets",
                       json_kind(v));
  for (unsigned i = 0; i < 3; i++)
    if (!json_object_get(v, tensor_keys[i]))
      return fail_tensor(d, name, name_length, DCR_E_CHECKPOINT, "no \"%s\" key",
                         tensor_keys[i]);
  json_object_foreach(v, key, value) {
    if (strcmp(key, tensor_keys[0]) && strcmp(key, tensor_keys[1]) &&
        strcmp(key, tensor_keys[2]))
      return fail_tensor(d, name, name_length, DCR_E_CHECKPOINT,
                         "unexpected key \"%.64s\" (only dtype, shape and data_offsets)", key);
  }
  return DCR_OK;
}

/* Rules 2-5 for one tensor; fills t->desc with dims stored at `dims`. */
static int parse_tensor(const char *name, size_t name_length, json_t *v, const dcr_limits *lim,
                        unsigned minor, dcr__tensor *t, uint64_t *dims, dcr_detail *d) {
  int rc = check_keys(name, name_length, v, d);
  if (rc) return rc;

  if (!name_length) return fail_tensor(d, name, 0, DCR_E_NAME, "empty tensor name");
  if (name_length > lim->max_name_length)
    return fail_tensor(d, name, name_length, DCR_E_LIMIT,
                       "tensor name is %zu bytes, over the limit of %llu", name_length,
                       (unsigned long long)lim->max_name_length);
  if (!dcr__utf8_valid((const uint8_t *)name, name_length))
    return fail_tensor(d, name, name_length, DCR_E_NAME, "tensor name is not valid UTF-8");

  json_t *dtype = json_object_get(v, "dtype");
  if (!json_is_string(dtype))
    return fail_tensor(d, name, name_length, DCR_E_CHECKPOINT, "dtype is %s, not a string",
                       json_kind(dtype));
  int code = dcr__dtype_lookup(json_string_value(dtype), json_string_length(dtype), minor);
  if (!code)
    return fail_tensor(d, name, name_length, DCR_E_DTYPE, "unknown dtype \"%.32s\"",
                       json_string_value(dtype));

  json_t *shape = json_object_get(v, "shape");
  if (!json_is_array(shape))
    return fail_tensor(d, name, name_length, DCR_E_CHECKPOINT, "shape is %s, not an array",
                       json_kind(shape));
  size_t rank = json_array_size(shape);
  /* Checked here, not only by dcr__desc_check, because rank is an unsigned there. */
  if (rank > lim->max_rank)
    return fail_tensor(d, name, name_length, DCR_E_LIMIT, "rank %zu exceeds the limit %llu",
                       rank, (unsigned long long)lim->max_rank);
  for (size_t i = 0; i < rank; i++) {
    const char *wrong = json_u64(json_array_get(shape, i), &dims[i]);
    if (wrong)
      return fail_tensor(d, name, name_length, DCR_E_CHECKPOINT,
                         "shape[%zu] is %s, not a non-negative integer", i, wrong);
  }

  json_t *offsets = json_object_get(v, "data_offsets");
  if (!json_is_array(offsets) || json_array_size(offsets) != 2)
    return fail_tensor(d, name, name_length, DCR_E_CHECKPOINT,
                       "data_offsets is %s, not an array of two integers",
                       json_is_array(offsets) ? "an array of another length" : json_kind(offsets));
  uint64_t span[2];
  for (size_t i = 0; i < 2; i++) {
    const char *wrong = json_u64(json_array_get(offsets, i), &span[i]);
    if (wrong)
      return fail_tensor(d, name, name_length, DCR_E_CHECKPOINT,
                         "data_offsets[%zu] is %s, not a non-negative integer", i, wrong);
  }
  if (span[0] > span[1])
    return fail_tensor(d, name, name_length, DCR_E_CHECKPOINT,
                       "data_offsets [%llu, %llu] end before they begin",
                       (unsigned long long)span[0], (unsigned long long)span[1]);

  t->desc.dtype = code;
  t->desc.rank = (unsigned)rank;
  t->desc.dims = dims;
  t->desc.offset = span[0];
  t->desc.byte_length = span[1] - span[0];
  /* Rule 4 through the check the manifest uses too, so both agree exactly; its
   * message lacks the numbers from the header, which are added here. */
  dcr_detail scratch;
  dcr__detail_init(&scratch);
  rc = dcr__desc_check(&t->desc, lim, &scratch);
  if (rc) {
    char text[96];
    format_shape(text, sizeof text, dims, t->desc.rank);
    return fail_tensor(d, name, name_length, rc, "shape %s, data_offsets [%llu, %llu]: %s", text,
                       (unsigned long long)span[0], (unsigned long long)span[1],
                       scratch.message);
  }

  if (!(t->name = malloc(name_length + 1)))
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate a %zu-byte name", name_length);
  memcpy(t->name, name, name_length);
  t->name[name_length] = '\0';
  t->name_length = name_length;
  return DCR_OK;
}

/* ---- the whole header ---------------------------------------------------- */

static int check_metadata(json_t *meta, dcr_detail *d) {
  const char *key;
  json_t *value;
  if (!json_is_object(meta))
    return dcr__fail(d, DCR_E_CHECKPOINT, METADATA_KEY " is %s, not an object of strings",
                     json_kind(meta));
  json_object_foreach(meta, key, value) {
    if (!json_is_string(value))
      return dcr__fail(d, DCR_E_CHECKPOINT, METADATA_KEY " value of \"%.64s\" is %s, not a string",
                       key, json_kind(value));
  }
  return DCR_OK;
}

static int by_name(const void *a, const void *b) {
  const dcr__tensor *x = a, *y = b;
  return dcr__name_cmp(x->name, x->name_length, y->name, y->name_length);
}

/* Ties in (begin, end) are zero-length tensors sharing an offset; the name makes
 * the order, and so any message, deterministic. */
static int by_offset(const void *a, const void *b) {
  const dcr__tensor *x = *(const dcr__tensor *const *)a, *y = *(const dcr__tensor *const *)b;
  if (x->desc.offset != y->desc.offset) return x->desc.offset < y->desc.offset ? -1 : 1;
  if (x->desc.byte_length != y->desc.byte_length)
    return x->desc.byte_length < y->desc.byte_length ? -1 : 1;
  return dcr__name_cmp(x->name, x->name_length, y->name, y->name_length);
}

int dcr__safetensors_check_layout(const dcr__checkpoint *c, uint64_t data_length,
                                  dcr_detail *d) {
  if (!c->count) {
    if (!data_length) return DCR_OK;
    return dcr__fail(d, DCR_E_LAYOUT, "no tensors, but the data region is %llu bytes",
                     (unsigned long long)data_length);
  }
  const dcr__tensor **order = malloc(c->count * sizeof *order);
  if (!order) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate the tensor order");
  for (size_t i = 0; i < c->count; i++) order[i] = &c->tensors[i];
  qsort(order, c->count, sizeof *order, by_offset);

  int rc = DCR_OK;
  uint64_t end = 0;
  const dcr__tensor *prev = NULL;
  for (size_t i = 0; i < c->count && !rc; i++) {
    const dcr__tensor *t = order[i];
    unsigned long long begin = t->desc.offset;
    if (begin != end) {
      if (!prev)
        rc = fail_tensor(d, t->name, t->name_length, DCR_E_LAYOUT,
                         "the first tensor in the data region begins at %llu, not 0", begin);
      else
        rc = fail_tensor(d, t->name, t->name_length, DCR_E_LAYOUT,
                         "begins at %llu, %s \"%.64s\", which ends at %llu", begin,
                         begin > end ? "leaving a gap after" : "overlapping", prev->name,
                         (unsigned long long)end);
    }
    end = t->desc.offset + t->desc.byte_length; /* end was in the header: no overflow */
    prev = t;
  }
  if (!rc && end != data_length)
    rc = fail_tensor(d, prev->name, prev->name_length, DCR_E_LAYOUT,
                     end < data_length ? "the last tensor ends at %llu, leaving %llu of the "
                                         "data region's bytes uncovered"
                                       : "the last tensor ends at %llu, %llu bytes past the "
                                         "end of the data region",
                     (unsigned long long)end,
                     (unsigned long long)(end < data_length ? data_length - end
                                                            : end - data_length));
  free(order);
  return rc;
}

static int parse_root(json_t *root, const dcr_limits *lim, unsigned minor,
                      dcr__checkpoint *out, dcr_detail *d) {
  const char *key;
  json_t *value;
  if (!json_is_object(root))
    return dcr__fail(d, DCR_E_CHECKPOINT, "header is %s, not a JSON object", json_kind(root));
  json_t *meta = json_object_get(root, METADATA_KEY);
  if (meta) {
    int rc = check_metadata(meta, d);
    if (rc) return rc;
  }
  size_t count = json_object_size(root) - (meta != NULL);
  if (count > lim->max_tensors)
    return dcr__fail(d, DCR_E_LIMIT, "header has %zu tensors, over the limit of %llu", count,
                     (unsigned long long)lim->max_tensors);

  /* One allocation holds every shape: the ranks are summed first. The arrays are
   * in memory already, so the pool is no larger than the header warrants. */
  size_t total_dims = 0;
  json_object_foreach(root, key, value) {
    json_t *shape = json_object_get(value, "shape");
    if (value != meta && json_is_array(shape)) total_dims += json_array_size(shape);
  }
  if (count && !(out->tensors = calloc(count, sizeof *out->tensors)))
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate %zu tensors", count);
  out->count = count;
  /* never NULL: dims_pool + 0 must be a valid pointer for scalar-only headers */
  if (!(out->dims_pool = calloc(total_dims + 1, sizeof *out->dims_pool)))
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate %zu dimensions", total_dims);

  size_t i = 0, used = 0;
  json_object_foreach(root, key, value) {
    if (value == meta) continue;
    int rc = parse_tensor(key, json_object_iter_key_len(json_object_key_to_iter(key)), value,
                          lim, minor, &out->tensors[i], out->dims_pool + used, d);
    if (rc) return rc;
    used += out->tensors[i].desc.rank;
    i++;
  }
  if (count) qsort(out->tensors, count, sizeof *out->tensors, by_name);
  return DCR_OK;
}

/* What parsing `text` would cost: as a whole document (*dom), and member by member
 * (*members: the tensors, names and shapes kept, with one tensor's document at a
 * time). A root that is not an object is refused at once (DCR_E_CHECKPOINT: every
 * error inside such a text has that code too, so parsing it could not end
 * otherwise). *depth is the deepest nesting. */
static int estimate(const char *text, size_t n, uint64_t *dom, uint64_t *members,
                    size_t *depth, dcr_detail *d) {
  size_t i = 0;
  while (i < n && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) i++;
  if (i < n && text[i] != '{') {
    dcr__detail_at(d, NULL, 8 + (uint64_t)i);
    return dcr__fail(d, DCR_E_CHECKPOINT, "header is not a JSON object");
  }
  dcr__json_cost c;
  dcr__json_cost_init(&c);
  dcr__json_cost_feed(&c, text + i, n - i);
  *dom = dcr__json_cost_dom(&c);
  *depth = c.depth;
  /* Member by member: per tensor its struct and a name's allocation; the names'
   * and shapes' bytes; and the largest member's own document, parsed alone. */
  *members = (sizeof(dcr__tensor) + 64) * c.root_members + 2 * c.string_bytes + 8 * c.values +
             c.largest + (64u << 10);
  return DCR_OK;
}

static int over_budget(size_t n, uint64_t cost, const dcr_limits *lim, dcr_detail *d) {
  return dcr__fail(d, DCR_E_NOMEM, "parsing this %zu-byte header would take about %llu MiB, over "
                   "the memory budget of %llu MiB (dcr_limits.max_memory, dcr --memory)", n,
                   (unsigned long long)(cost >> 20), (unsigned long long)(lim->max_memory >> 20));
}

/* ---- member by member ---------------------------------------------------- */

/* A header whose document would be large is read one root member at a time: each
 * key and each value is parsed by jansson on its own, so that only one tensor's
 * document exists at once (a 1,048,576-tensor header took 1.3 GiB as a whole
 * document). The members are read twice: first every key and value for the JSON
 * alone, in text order, so that the first JSON error found is the one a whole
 * parse finds first; then the rules of §2.1 in parse_root's order. */

#define MEMBER_DEPTH 64 /* deeper texts are parsed whole (a tensor needs depth 3) */

typedef struct {
  const char *text;
  size_t n, at;
  size_t key, key_end, value, value_end; /* the current member's slices */
  int key_only; /* the text broke after this member's key: the key is judged first */
} member_scan;

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static size_t skip_ws(const member_scan *m, size_t i) {
  while (i < m->n && is_ws(m->text[i])) i++;
  return i;
}

/* The end of the string that starts at i (a quote), or n. */
static size_t string_end(const member_scan *m, size_t i) {
  for (i++; i < m->n; i++) {
    if (m->text[i] == '\\') i++;
    else if (m->text[i] == '"') return i + 1;
  }
  return m->n;
}

/* The end of the value that starts at i, by brackets and strings alone: jansson
 * judges the slice. */
static size_t value_end(const member_scan *m, size_t i) {
  char c = i < m->n ? m->text[i] : 0;
  if (c == '"') return string_end(m, i);
  if (c != '{' && c != '[') {
    while (i < m->n && !is_ws(m->text[i]) && m->text[i] != ',' && m->text[i] != '}' &&
           m->text[i] != ']')
      i++;
    return i;
  }
  size_t level = 0;
  for (; i < m->n; i++) {
    c = m->text[i];
    if (c == '"') i = string_end(m, i) - 1;
    else if (c == '{' || c == '[') level++;
    else if ((c == '}' || c == ']') && --level == 0) return i + 1;
  }
  return m->n;
}

/* 1: a member's slices are set; 0: the object ended as JSON allows; -1: the text is
 * not JSON at m->at (its error is found by a whole parse of the text up to there). */
static int next_member(member_scan *m, int first) {
  size_t i = skip_ws(m, m->at);
  if (first) {
    i = skip_ws(m, i + 1); /* past the '{' estimate() saw */
    if (i < m->n && m->text[i] == '}') {
      m->at = skip_ws(m, i + 1);
      return m->at == m->n ? 0 : -1;
    }
  } else {
    if (i < m->n && m->text[i] == '}') {
      m->at = skip_ws(m, i + 1);
      return m->at == m->n ? 0 : -1;
    }
    if (i >= m->n || m->text[i] != ',') return m->at = i, -1;
    i = skip_ws(m, i + 1);
  }
  if (i >= m->n || m->text[i] != '"') return m->at = i, -1;
  m->key = i;
  m->key_end = string_end(m, i);
  i = skip_ws(m, m->key_end);
  if (i >= m->n || m->text[i] != ':') return m->at = i, m->key_only = 1, -1;
  m->value = skip_ws(m, i + 1);
  m->value_end = value_end(m, m->value);
  m->at = m->value_end;
  return 1;
}

/* A slice parsed alone; its error, if any, at its place in the whole text. */
static json_t *load_slice(const member_scan *m, size_t start, size_t end, json_error_t *e) {
  json_t *j = json_loadb(m->text + start, end - start, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, e);
  if (!j && e->position >= 0) {
    size_t pos = start + (size_t)e->position;
    int line = 1, column = 0;
    for (size_t i = 0; i < pos && i < m->n; i++) {
      if (m->text[i] == '\n') line++, column = 0;
      else column++;
    }
    e->position = (int)(pos < INT_MAX ? pos : INT_MAX);
    e->line = line;
    e->column = column;
  }
  return j;
}

typedef struct {
  size_t text_start; /* of the key, in the text */
  size_t name;       /* in the name arena; then a pointer, for sorting */
  const char *p;
  size_t length;
} seen_name;

static int by_seen(const void *a, const void *b) {
  const seen_name *x = a, *y = b;
  int c = dcr__name_cmp(x->p, x->length, y->p, y->length);
  return c ? c : x->text_start < y->text_start ? -1 : x->text_start > y->text_start;
}

typedef struct {
  seen_name *names;
  size_t count, capacity;
  char *arena;
  size_t used, room;
} name_set;

static int remember(name_set *s, const char *name, size_t length, size_t at) {
  if (s->count == s->capacity) {
    size_t c = s->capacity ? 2 * s->capacity : 1024;
    seen_name *p = realloc(s->names, c * sizeof *p);
    if (!p) return DCR_E_NOMEM;
    s->names = p, s->capacity = c;
  }
  if (!s->arena || s->used + length > s->room) { /* never NULL, even for empty names */
    size_t r = s->room ? 2 * s->room : 1u << 16;
    while (r < s->used + length) r *= 2;
    char *p = realloc(s->arena, r);
    if (!p) return DCR_E_NOMEM;
    s->arena = p, s->room = r;
  }
  memcpy(s->arena + s->used, name, length);
  s->names[s->count++] = (seen_name){at, s->used, NULL, length};
  s->used += length;
  return DCR_OK;
}

/* The key that a whole parse would call a duplicate first (the earliest second
 * use of a name), at or before `before` in the text; SIZE_MAX if none. */
static size_t first_duplicate(name_set *s, size_t before) {
  if (s->count < 2) return SIZE_MAX;
  for (size_t i = 0; i < s->count; i++) s->names[i].p = s->arena + s->names[i].name;
  qsort(s->names, s->count, sizeof *s->names, by_seen);
  size_t best = SIZE_MAX;
  for (size_t i = 1; i < s->count; i++) {
    const seen_name *a = &s->names[i - 1], *b = &s->names[i];
    if (!dcr__name_cmp(a->p, a->length, b->p, b->length) && b->text_start <= before &&
        b->text_start < best)
      best = b->text_start;
  }
  return best;
}

static int duplicate_failure(const uint8_t *text, size_t n, size_t at, dcr_detail *d) {
  member_scan k = {.text = (const char *)text, .n = n};
  json_error_t e;
  json_t *key = load_slice(&k, at, string_end(&k, at), &e);
  const char *name = key ? json_string_value(key) : "";
  size_t length = key ? json_string_length(key) : 0;
  dcr__detail_at(d, NULL, 8 + (uint64_t)at);
  int rc = fail_tensor(d, name, length, DCR_E_NAME, "tensor name \"%.*s\" appears twice",
                       (int)(length < 64 ? length : 64), name);
  json_decref(key);
  return rc;
}

typedef struct {
  size_t count, total_dims;
  int has_meta;
  size_t meta, meta_end; /* the __metadata__ value's slice */
} members_info;

/* The JSON of every member, in text order: the first error, as a whole parse
 * reports it (json_failure, at its place in the whole text). Counts the tensors
 * and their dimensions for the allocations. */
static int members_json(const uint8_t *text, size_t n, members_info *info, dcr_detail *d) {
  member_scan m = {.text = (const char *)text, .n = n};
  name_set seen = {0};
  json_error_t e;
  int rc = DCR_OK, more;
  size_t fail_at = n;
  memset(info, 0, sizeof *info);
  for (int first = 1; (more = next_member(&m, first)) == 1; first = 0) {
    json_t *key = load_slice(&m, m.key, m.key_end, &e), *value = NULL;
    if (!key) {
      fail_at = (size_t)e.position;
      rc = -1;
      break;
    }
    const char *name = json_string_value(key);
    size_t length = json_string_length(key);
    if (remember(&seen, name, length, m.key)) {
      json_decref(key);
      rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate tensor names");
      break;
    }
    if (!(value = load_slice(&m, m.value, m.value_end, &e))) {
      json_decref(key);
      fail_at = (size_t)e.position;
      rc = -1;
      break;
    }
    if (length == sizeof METADATA_KEY - 1 && !memcmp(name, METADATA_KEY, length)) {
      info->has_meta = 1;
      info->meta = m.value, info->meta_end = m.value_end;
    } else {
      json_t *shape = json_object_get(value, "shape");
      if (json_is_array(shape)) info->total_dims += json_array_size(shape);
      info->count++;
    }
    json_decref(key);
    json_decref(value);
  }
  if (rc == DCR_OK && more < 0) {
    rc = -2, fail_at = m.at;
    if (m.key_only) { /* a whole parse meets the key before what follows it */
      json_t *key = load_slice(&m, m.key, m.key_end, &e);
      if (!key) rc = -1, fail_at = (size_t)e.position;
      else if (remember(&seen, json_string_value(key), json_string_length(key), m.key))
        rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate tensor names");
      json_decref(key);
    }
  }
  if (rc == DCR_E_NOMEM) {
  } else if (rc < 0 || rc == DCR_OK) {
    /* A duplicate key before the failure is what a whole parse meets first. */
    size_t dup = first_duplicate(&seen, rc ? fail_at : n);
    if (dup != SIZE_MAX) {
      rc = duplicate_failure(text, n, dup, d);
    } else if (rc == -1) {
      rc = json_failure(text, n, &e, d);
    } else if (rc == -2) {
      dcr__detail_at(d, NULL, 8 + (uint64_t)fail_at);
      rc = dcr__fail(d, DCR_E_CHECKPOINT, "header is not valid JSON (at byte %zu)", fail_at);
    }
  }
  free(seen.names);
  free(seen.arena);
  return rc;
}

/* parse_root's rules, member by member, for a text whose JSON members_json has
 * accepted. */
static int parse_members(const uint8_t *text, size_t n, const members_info *info,
                         const dcr_limits *lim, unsigned minor, dcr__checkpoint *out,
                         dcr_detail *d) {
  member_scan m = {.text = (const char *)text, .n = n};
  json_error_t e;
  int rc = DCR_OK;
  if (info->has_meta) {
    json_t *meta = load_slice(&m, info->meta, info->meta_end, &e);
    if (!meta) return dcr__fail(d, DCR_E_NOMEM, "cannot parse " METADATA_KEY " again");
    rc = check_metadata(meta, d);
    json_decref(meta);
    if (rc) return rc;
  }
  if (info->count > lim->max_tensors)
    return dcr__fail(d, DCR_E_LIMIT, "header has %zu tensors, over the limit of %llu", info->count,
                     (unsigned long long)lim->max_tensors);
  if (info->count && !(out->tensors = calloc(info->count, sizeof *out->tensors)))
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate %zu tensors", info->count);
  out->count = info->count;
  if (!(out->dims_pool = calloc(info->total_dims + 1, sizeof *out->dims_pool)))
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate %zu dimensions", info->total_dims);
  size_t i = 0, used = 0;
  for (int first = 1; !rc && next_member(&m, first) == 1; first = 0) {
    if (info->has_meta && m.value == info->meta) continue;
    json_t *key = load_slice(&m, m.key, m.key_end, &e);
    json_t *value = key ? load_slice(&m, m.value, m.value_end, &e) : NULL;
    if (!value) rc = dcr__fail(d, DCR_E_NOMEM, "cannot parse a tensor again");
    else rc = parse_tensor(json_string_value(key), json_string_length(key), value, lim, minor,
                           &out->tensors[i], out->dims_pool + used, d);
    json_decref(key);
    json_decref(value);
    if (!rc) used += out->tensors[i++].desc.rank;
  }
  if (!rc && out->count) qsort(out->tensors, out->count, sizeof *out->tensors, by_name);
  return rc;
}

/* Headers whose document would take more than this are read member by member. */
#define WHOLE_DOCUMENT_MAX ((uint64_t)64 << 20)

int dcr__safetensors_parse(const uint8_t *prefix, size_t prefix_length, uint64_t data_length,
                           const dcr_limits *lim, unsigned minor, dcr__checkpoint *out,
                           dcr_detail *d) {
  memset(out, 0, sizeof *out);
  if (prefix_length < 8)
    return dcr__fail(d, DCR_E_CHECKPOINT,
                     "prefix is %zu bytes, shorter than the 8-byte header length",
                     prefix_length);
  uint64_t n = dcr__le64(prefix);
  if (n > lim->max_header_size) {
    dcr__detail_at(d, NULL, 0);
    return dcr__fail(d, DCR_E_LIMIT, "header length %llu exceeds the limit %llu",
                     (unsigned long long)n, (unsigned long long)lim->max_header_size);
  }
  if (n != prefix_length - 8) {
    dcr__detail_at(d, NULL, 0);
    return dcr__fail(d, DCR_E_CHECKPOINT, "header length %llu disagrees with a %zu-byte prefix",
                     (unsigned long long)n, prefix_length);
  }
  uint64_t file_size;
  if (dcr__add_overflow(prefix_length, data_length, &file_size) ||
      file_size > lim->max_file_size)
    return dcr__fail(d, DCR_E_LIMIT,
                     "a %zu-byte prefix and %llu bytes of data exceed the file size limit %llu",
                     prefix_length, (unsigned long long)data_length,
                     (unsigned long long)lim->max_file_size);

  uint64_t dom = 0, members = 0;
  size_t depth = 0;
  int rc = estimate((const char *)prefix + 8, (size_t)n, &dom, &members, &depth, d);
  if (rc) return rc;
  /* DCR_TEST_JSON_MEMBERS (tests only): 1 reads every header member by member, 2
   * also reports its errors without the whole parse. */
  const char *test = getenv("DCR_TEST_JSON_MEMBERS");
  int memberwise = test && (test[0] == '1' || test[0] == '2');
  int whole = (dom <= WHOLE_DOCUMENT_MAX && !memberwise) || depth > MEMBER_DEPTH;
  if (!whole) {
    /* Member by member; an error found so is found again whole when that fits the
     * budget, so that every verdict is the one a whole parse gives. */
    if (members > lim->max_memory) return over_budget((size_t)n, members, lim, d);
    members_info info;
    dcr_detail scratch;
    dcr__detail_init(&scratch);
    rc = members_json(prefix + 8, (size_t)n, &info, &scratch);
    if (!rc) rc = parse_members(prefix + 8, (size_t)n, &info, lim, minor, out, &scratch);
    if (rc) dcr__checkpoint_free(out), memset(out, 0, sizeof *out);
    whole = rc && rc != DCR_E_NOMEM && !(test && test[0] == '2');
    /* An error found member by member is provisional: which of two errors jansson
     * meets first can differ (a string after a missing ':' is lexed, and its bad
     * UTF-8 reported, before the syntax error). Only the whole parse gives the
     * verdict; when it does not fit the budget there is none to give. */
    if (whole && dom > lim->max_memory) return over_budget((size_t)n, dom, lim, d);
    if (rc && !whole) {
      if (d) *d = scratch;
      return rc;
    }
  }
  if (whole) {
    if (dom > lim->max_memory) return over_budget((size_t)n, dom, lim, d);
    json_error_t error;
    /* No JSON_ALLOW_NUL: U+0000 is refused in every string, and with it any doubt
     * about where a name ends. */
    json_t *root = json_loadb((const char *)prefix + 8, (size_t)n, JSON_REJECT_DUPLICATES, &error);
    if (!root) return json_failure(prefix + 8, (size_t)n, &error, d);
    rc = parse_root(root, lim, minor, out, d);
    json_decref(root);
  }
  if (!rc && prefix_length && !(out->prefix = malloc(prefix_length)))
    rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate a %zu-byte prefix", prefix_length);
  if (rc) {
    dcr__checkpoint_free(out);
    return rc;
  }
  memcpy(out->prefix, prefix, prefix_length);
  out->kind = DCR_KIND_SAFETENSORS;
  out->prefix_length = prefix_length;
  out->file_size = file_size;
  return DCR_OK;
}
