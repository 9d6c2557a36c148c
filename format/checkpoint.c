/*
 * checkpoint.c - opening the checkpoints a bundle is made from or applied to
 * (SPEC.md §2). Only the prefix is read here, with pread, so that the caller keeps
 * its file offset and the data region is never held in memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"

#define DTYPE_U8 2 /* SPEC.md §3 */

/* pread may return less than asked (signals, pipes, huge requests); a file that
 * ends before `offset + n` shrank after fstat, which is an I/O failure here. */
static int read_at(int fd, uint8_t *buf, size_t n, uint64_t offset, dcr_detail *d) {
  size_t done = 0;
  while (done < n) {
    size_t want = n - done < ((size_t)1 << 30) ? n - done : (size_t)1 << 30;
    ssize_t r = pread(fd, buf + done, want, (off_t)(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      dcr__detail_at(d, NULL, offset + done);
      if (r < 0) return dcr__fail(d, DCR_E_IO, "read failed: %s", strerror(errno));
      return dcr__fail(d, DCR_E_IO, "file shrank while its header was being read");
    }
    done += (size_t)r;
  }
  return DCR_OK;
}

static int read_raw(uint64_t size, dcr__checkpoint *out, dcr_detail *d) {
  out->tensors = calloc(1, sizeof *out->tensors);
  out->dims_pool = malloc(sizeof *out->dims_pool);
  char *name = malloc(sizeof "raw");
  if (out->tensors) out->count = 1;
  if (!out->tensors || !out->dims_pool || !name) {
    free(name);
    dcr__checkpoint_free(out);
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate the raw checkpoint's tensor");
  }
  memcpy(name, "raw", sizeof "raw");
  dcr__tensor *t = &out->tensors[0];
  t->name = name;
  t->name_length = sizeof "raw" - 1;
  out->dims_pool[0] = size;
  t->desc.dtype = DTYPE_U8;
  t->desc.rank = 1;
  t->desc.dims = out->dims_pool;
  t->desc.byte_length = size;
  t->desc.offset = 0;
  out->kind = DCR_KIND_RAW;
  out->file_size = size;
  return DCR_OK;
}

int dcr__safetensors_read(int fd, uint64_t size, const dcr_limits *lim, unsigned minor,
                          dcr__checkpoint *out, dcr_detail *d) {
  uint8_t head[8];
  if (size < 8)
    return dcr__fail(d, DCR_E_CHECKPOINT,
                     "file is %llu bytes, too short for the 8-byte safetensors header length",
                     (unsigned long long)size);
  int rc = read_at(fd, head, 8, 0, d);
  if (rc) return rc;
  uint64_t n = dcr__le64(head);
  if (n > lim->max_header_size) {
    dcr__detail_at(d, NULL, 0);
    return dcr__fail(d, DCR_E_LIMIT, "header length %llu exceeds the limit %llu",
                     (unsigned long long)n, (unsigned long long)lim->max_header_size);
  }
  if (n > size - 8) {
    dcr__detail_at(d, NULL, 0);
    return dcr__fail(d, DCR_E_CHECKPOINT,
                     "header length %llu exceeds file size %llu less the 8 length bytes",
                     (unsigned long long)n, (unsigned long long)size);
  }
  if (n > SIZE_MAX - 8) /* only where size_t is narrower than a file */
    return dcr__fail(d, DCR_E_LIMIT, "header length %llu does not fit in memory",
                     (unsigned long long)n);
  size_t prefix_length = (size_t)n + 8;
  uint8_t *prefix = malloc(prefix_length);
  if (!prefix)
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate a %zu-byte header", prefix_length);
  memcpy(prefix, head, 8);
  rc = read_at(fd, prefix + 8, (size_t)n, 8, d);
  if (!rc) rc = dcr__safetensors_parse(prefix, prefix_length, size - 8 - n, lim, minor, out, d);
  if (!rc && (rc = dcr__safetensors_check_layout(out, size - 8 - n, d))) dcr__checkpoint_free(out);
  free(prefix);
  return rc;
}

/* The first bytes of a Hugging Face index (model.safetensors.index.json) read as
 * a header length: '{' and then, usually, "\n  \"metadata" or "\"weight_map". */
static int looks_like_json(int fd) {
  uint8_t b[2];
  return !dcr__pread_full(fd, b, 2, 0, NULL) && b[0] == '{' &&
         (b[1] == '"' || b[1] == '\n' || b[1] == ' ' || b[1] == '\r' || b[1] == '\t');
}

int dcr__checkpoint_read(int fd, int kind, const dcr_limits *lim, unsigned minor,
                         dcr__checkpoint *out, dcr_detail *d) {
  struct stat st;
  memset(out, 0, sizeof *out); /* all zeros on failure: an empty checkpoint */
  if (kind != DCR_KIND_RAW && kind != DCR_KIND_SAFETENSORS)
    return dcr__fail(d, DCR_E_ARGUMENT, "checkpoint kind %d is not a file's", kind);
  if (fstat(fd, &st)) return dcr__fail(d, DCR_E_IO, "cannot stat: %s", strerror(errno));
  /* The data region's length comes from the file size, which only a regular file
   * has; a pipe would read as an empty checkpoint. */
  if (S_ISDIR(st.st_mode)) /* §2.3: an input of the wrong form */
    return dcr__fail(d, DCR_E_CHECKPOINT, "is a directory, and the bundle's checkpoints are "
                     "files (a sharded model is read as a set where both inputs are directories)");
  if (!S_ISREG(st.st_mode)) return dcr__fail(d, DCR_E_IO, "not a regular file");
  uint64_t size = (uint64_t)st.st_size;
  if (size > lim->max_file_size)
    return dcr__fail(d, DCR_E_LIMIT, "file is %llu bytes, over the limit of %llu",
                     (unsigned long long)size, (unsigned long long)lim->max_file_size);
  int rc = kind == DCR_KIND_RAW ? read_raw(size, out, d) : dcr__safetensors_read(fd, size, lim, minor, out, d);
  if (rc && d && kind == DCR_KIND_SAFETENSORS && looks_like_json(fd))
    snprintf(d->message, sizeof d->message, "this is JSON, not safetensors: a sharded model's "
             "index (model.safetensors.index.json)? Give its directory instead");
  if (!rc) out->fd = fd;
  return rc;
}

int dcr__checkpoint_open(const char *path, int kind, const dcr_limits *lim, unsigned minor,
                         dcr__checkpoint *out, dcr_detail *d) {
  if (kind == DCR_KIND_SET) return dcr__set_read(path, lim, minor, 0, out, d);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  int rc = fd < 0 ? (memset(out, 0, sizeof *out),
                     dcr__fail(d, DCR_E_IO, "cannot open: %s", strerror(errno)))
                  : dcr__checkpoint_read(fd, kind, lim, minor, out, d);
  if (rc) {
    if (fd >= 0) close(fd);
    return dcr__detail_file(d, path), rc;
  }
  out->owns_fd = 1;
  return DCR_OK;
}

void dcr__detail_member(dcr_detail *d, const char *root, const char *path, size_t n) {
  char full[8192];
  snprintf(full, sizeof full, "%s/%.*s", root, (int)n, path);
  dcr__detail_file(d, full);
}

const dcr__member *dcr__set_member_at(const dcr__member *m, size_t count, uint64_t at) {
  size_t lo = 0, hi = count; /* the first member that starts after `at` */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (m[mid].start <= at) lo = mid + 1;
    else hi = mid;
  }
  return lo ? &m[lo - 1] : NULL;
}

int dcr__checkpoint_pread(const dcr__checkpoint *c, void *buf, size_t length, uint64_t offset,
                          dcr_detail *d) {
  if (c->kind != DCR_KIND_SET) return dcr__pread_full(c->fd, buf, length, offset, d);
  uint8_t *p = buf;
  /* A tensor lies in one member, so a read spans members only at a caller's
   * whim; the loop makes it right anyway. */
  while (length) {
    uint64_t at = offset - c->prefix_length;
    const dcr__member *m = offset >= c->prefix_length
                               ? dcr__set_member_at(c->members, c->member_count, at) : NULL;
    if (!m || at - m->start >= m->data_length)
      return dcr__fail(d, DCR_E_IO, "read at %llu is outside the set's members",
                       (unsigned long long)offset);
    uint64_t left = m->data_length - (at - m->start);
    size_t n = left < length ? (size_t)left : length;
    size_t i = (size_t)(m - c->members);
    int fd, rc = dcr__member_files_get(c->files, i, &fd, d);
    if (!rc) {
      rc = dcr__pread_full(fd, p, n, m->prefix_length + (at - m->start), d);
      dcr__member_files_put(c->files, i);
    }
    if (rc) return dcr__detail_member(d, c->root, m->path, m->path_length), rc;
    p += n, length -= n, offset += n;
  }
  return DCR_OK;
}

/* Read, never mapped: a mapped file that a writer truncates ends the process with
 * SIGBUS, and one that a writer modifies changes under the hash that vouches for
 * it. Read into the caller's buffer, the bytes are private: what is hashed is what
 * is written. (Measured on a 256 MiB pair, 4 MiB chunks, page cache: apply as fast
 * as with MAP_POPULATE, encode, which reads two files, 10-15% slower.) */
int dcr__checkpoint_view(dcr__view *v, const dcr__checkpoint *c, uint64_t offset, size_t length,
                         uint8_t *fallback, dcr_detail *d) {
  *v = (dcr__view){.data = fallback};
  return length ? dcr__checkpoint_pread(c, fallback, length, offset, d) : DCR_OK;
}

void dcr__checkpoint_free(dcr__checkpoint *c) {
  if (!c) return;
  for (size_t i = 0; i < c->count; i++) free(c->tensors[i].name);
  dcr__member_files_free(c->files);
  if (c->owns_fd && c->fd >= 0) close(c->fd);
  free(c->tensors);
  free(c->dims_pool);
  free(c->prefix);
  free(c->members);
  free(c->root);
  memset(c, 0, sizeof *c);
}
