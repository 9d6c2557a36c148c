/*
 * apply_tensors.c - dcr apply --tensors: a slice of the target, for a worker that
 * holds only some tensors (tensor parallelism). The library patches the selected
 * tensors in memory (dcr_reader_select_tensors, dcr_patch_memory), reading, or
 * fetching from a URL, only their chunks; they come from BASE and go to OUT, a
 * safetensors file of their own, which appears only once every check passed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

typedef struct {
  const char *base;
  dcr_checkpoint *ck;
  int fd;
  void **bufs;     /* per manifest entry: the tensor as patched, NULL if not selected */
  int code;        /* why the resolver refused, with detail */
  dcr_detail detail;
} slice;

static int refuse(slice *s, int code, const dcr_tensor_info *t, const char *why) {
  memset(&s->detail, 0, sizeof s->detail);
  s->detail.offset = s->detail.tensor = s->detail.chunk = DCR_NONE;
  snprintf(s->detail.file, sizeof s->detail.file, "%s", s->base);
  snprintf(s->detail.tensor_name, sizeof s->detail.tensor_name, "%.*s", (int)t->name_length, t->name);
  snprintf(s->detail.message, sizeof s->detail.message, "%s", why);
  s->code = code;
  return -1;
}

/* BASE's tensor of that name: dtype, shape and length as the bundle's base. */
static int read_base(slice *s, const dcr_tensor_info *t, void *into) {
  dcr_tensor_side side;
  uint64_t at;
  if (cli_checkpoint_find(s->ck, t->name, t->name_length, &side, &at))
    return refuse(s, DCR_E_BASE_MISMATCH, t, "BASE has no such tensor");
  if (side.dtype != t->base.dtype || side.rank != t->base.rank ||
      side.byte_length != t->base.byte_length ||
      (side.rank && memcmp(side.dims, t->base.dims, side.rank * sizeof *side.dims)))
    return refuse(s, DCR_E_BASE_MISMATCH, t, "BASE's tensor has another dtype or shape than "
                                             "the bundle's base");
  for (uint64_t done = 0; done < side.byte_length;) {
    ssize_t r = pread(s->fd, (char *)into + done, side.byte_length - done, (off_t)(at + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return refuse(s, DCR_E_IO, t, "cannot read the tensor from BASE");
    done += (uint64_t)r;
  }
  return 0;
}

/* Called for the selected entries only. */
static int resolve(void *opaque, uint64_t entry, const dcr_tensor_info *t, dcr_buffer *b) {
  slice *s = opaque;
  if (!t->target.present) return b->data = NULL, b->size = 0, 0; /* removed: not in OUT */
  void *p = malloc(t->target.byte_length ? t->target.byte_length : 1);
  if (!p) return refuse(s, DCR_E_NOMEM, t, "cannot allocate the tensor");
  s->bufs[entry] = p;
  b->data = p;
  b->size = t->target.byte_length;
  return t->delta_coded ? read_base(s, t, p) : 0; /* new tensors: the library fills them */
}

/* OUT: the patched tensors in name order, as a safetensors file (8-byte header
 * length, JSON padded with spaces to 8 bytes, data). */
static int write_slice(const slice *s, dcr_reader *r, const char *out, int force) {
  dcr_bundle_info info;
  dcr_reader_info(r, &info);
  json_t *doc = json_object();
  uint64_t at = 0;
  for (uint64_t i = 0; doc && i < info.entry_count; i++) {
    dcr_tensor_info t;
    if (!s->bufs[i]) continue;
    dcr_reader_tensor(r, i, &t);
    json_t *shape = json_array(), *one = json_object();
    for (unsigned k = 0; k < t.target.rank; k++) json_array_append_new(shape, json_integer((json_int_t)t.target.dims[k]));
    json_object_set_new(one, "dtype", json_string(dcr_dtype_name(t.target.dtype)));
    json_object_set_new(one, "shape", shape);
    json_object_set_new(one, "data_offsets", json_pack("[II]", (json_int_t)at,
                                                       (json_int_t)(at + t.target.byte_length)));
    json_object_setn_new(doc, t.name, t.name_length, one);
    at += t.target.byte_length;
  }
  char *text = doc ? json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  json_decref(doc);
  if (!text) return fprintf(stderr, "dcr: DCR_E_NOMEM: out of memory\n"), CLI_IO;
  size_t n = strlen(text), padded = (n + 7) / 8 * 8;
  uint8_t head[8];
  for (int k = 0; k < 8; k++) head[k] = (uint8_t)((uint64_t)padded >> (8 * k));
  cli_output o;
  int rc = cli_output_open(&o, out, force, &s->base, 1);
  if (rc) return free(text), rc;
  int bad = cli_output_write(&o, head, 8) || cli_output_write(&o, text, n) ||
            cli_output_write(&o, "       ", padded - n);
  for (uint64_t i = 0; !bad && i < info.entry_count; i++) {
    dcr_tensor_info t;
    if (!s->bufs[i]) continue;
    dcr_reader_tensor(r, i, &t);
    bad = cli_output_write(&o, s->bufs[i], (size_t)t.target.byte_length);
  }
  free(text);
  if (bad) {
    fprintf(stderr, "dcr: %s: DCR_E_IO: cannot write: %s\n", out, strerror(o.error));
    cli_output_abort(&o);
    return CLI_IO;
  }
  return cli_output_commit(&o);
}

int cli_apply_tensors(dcr_reader *r, const char *bundle, const char *base, const char *out, int force,
                      const char *const *patterns, size_t n_patterns, int verify,
                      unsigned threads, int quiet) {
  dcr_bundle_info info;
  dcr_reader_info(r, &info);
  if (info.kind == DCR_KIND_SET)
    return cli_usage("apply", "--tensors applies to a safetensors checkpoint, not a set");
  slice s = {.base = base, .fd = -1, .bufs = calloc((size_t)info.entry_count + 1, sizeof *s.bufs)};
  dcr_detail d;
  dcr_patch *p = NULL;
  uint64_t matched = 0;
  if (!s.bufs) return fprintf(stderr, "dcr: DCR_E_NOMEM: out of memory\n"), CLI_IO;
  int err = dcr_reader_select_tensors(r, patterns, n_patterns, &matched, &d);
  if (err) return free(s.bufs), cli_report(bundle, err, &d), cli_exit_code(err);
  err = dcr_checkpoint_open(&s.ck, base, DCR_KIND_SAFETENSORS, &cli_limits, &d);
  if (!err) {
    if ((s.fd = open(base, O_RDONLY | O_CLOEXEC)) < 0) {
      memset(&d, 0, sizeof d);
      d.offset = d.tensor = d.chunk = DCR_NONE;
      snprintf(d.message, sizeof d.message, "cannot open: %s", strerror(errno));
      err = DCR_E_IO;
    }
  }
  if (!err) err = dcr_patch_create(&p, r, &d);
  if (!err) err = dcr_patch_set_verify(p, verify);
  if (!err) {
    dcr_patch_set_threads(p, threads);
    err = dcr_patch_memory(p, resolve, &s, &d);
    if (err == DCR_E_ARGUMENT && s.code) err = s.code, d = s.detail;
  }
  int rc = err ? (cli_report(base, err, &d), cli_exit_code(err)) : write_slice(&s, r, out, force);
  if (!rc && !quiet) {
    char a[32];
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < info.entry_count; i++) {
      dcr_tensor_info t;
      dcr_reader_tensor(r, i, &t);
      if (s.bufs[i]) bytes += t.target.byte_length;
    }
    fprintf(stderr, "%s: %llu of %llu tensors (%s), %s\n", out, (unsigned long long)matched,
            (unsigned long long)info.entry_count, cli_bytes(bytes, a),
            verify == DCR_VERIFY_FULL ? "each tensor hash verified"
            : verify == DCR_VERIFY_CHUNK ? "changed chunks verified" : "not verified");
  }
  for (uint64_t i = 0; s.bufs && i < info.entry_count; i++) free(s.bufs[i]);
  free(s.bufs);
  dcr_patch_free(p);
  dcr_checkpoint_free(s.ck);
  if (s.fd >= 0) close(s.fd);
  return rc;
}
