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

  if (code == json_error_out_of_memory)
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate memory for the safetensors header");
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
                        dcr__tensor *t, uint64_t *dims, dcr_detail *d) {
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
  int code = dcr_dtype_from_name(json_string_value(dtype), json_string_length(dtype));
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

static int parse_root(json_t *root, const dcr_limits *lim,
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
                          lim, &out->tensors[i], out->dims_pool + used, d);
    if (rc) return rc;
    used += out->tensors[i].desc.rank;
    i++;
  }
  if (count) qsort(out->tensors, count, sizeof *out->tensors, by_name);
  return DCR_OK;
}

/* jansson builds the whole document before a rule can be checked, at about these
 * costs (measured, glibc, 64-bit): a 3-byte "{}," costs ~230 bytes, a 2-byte "1,"
 * ~40. A 10 MB header of "[{},{},...]" took 750 MB and a 99 MB one 7 GiB. */
enum { COST_OBJECT = 240, COST_ARRAY = 96, COST_MEMBER = 64, COST_VALUE = 48 };

/* Refuses, before parsing, a header whose document would not fit the memory
 * budget (DCR_E_NOMEM: not a verdict on the header), and one whose root is not an
 * object (DCR_E_CHECKPOINT: every error inside such a text has that code too, so
 * parsing it could not end otherwise). One pass, nothing allocated. */
static int check_cost(const char *text, size_t n, const dcr_limits *lim, dcr_detail *d) {
  size_t i = 0;
  while (i < n && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) i++;
  if (i < n && text[i] != '{') {
    dcr__detail_at(d, NULL, 8 + (uint64_t)i);
    return dcr__fail(d, DCR_E_CHECKPOINT, "header is not a JSON object");
  }
  uint64_t objects = 0, arrays = 0, members = 0, values = 1, string_bytes = 0;
  for (int in_string = 0; i < n; i++) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') i++, string_bytes++;
      else if (c == '"') in_string = 0;
      else string_bytes++;
      continue;
    }
    objects += c == '{';
    arrays += c == '[';
    members += c == ':';
    values += c == ',';
    in_string = c == '"';
  }
  uint64_t cost = COST_OBJECT * objects + COST_ARRAY * arrays + COST_MEMBER * members +
                  COST_VALUE * (values + objects + arrays) + 2 * string_bytes;
  if (cost <= lim->max_memory) return DCR_OK;
  return dcr__fail(d, DCR_E_NOMEM, "parsing this %zu-byte header would take about %llu MiB, over "
                   "the memory budget of %llu MiB (dcr_limits.max_memory, dcr --memory)", n,
                   (unsigned long long)(cost >> 20), (unsigned long long)(lim->max_memory >> 20));
}

int dcr__safetensors_parse(const uint8_t *prefix, size_t prefix_length, uint64_t data_length,
                           const dcr_limits *lim, dcr__checkpoint *out, dcr_detail *d) {
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

  int rc = check_cost((const char *)prefix + 8, (size_t)n, lim, d);
  if (rc) return rc;
  json_error_t error;
  /* No JSON_ALLOW_NUL: U+0000 is refused in every string, and with it any doubt
   * about where a name ends. */
  json_t *root = json_loadb((const char *)prefix + 8, (size_t)n, JSON_REJECT_DUPLICATES, &error);
  if (!root) return json_failure(prefix + 8, (size_t)n, &error, d);
  rc = parse_root(root, lim, out, d);
  json_decref(root);
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
