/*
 * checkpoint.c - opening the checkpoints a bundle is made from or applied to
 * (SPEC.md §2). Only the prefix is read here, with pread, so that the caller keeps
 * its file offset and the data region is never held in memory.
 */
#include <errno.h>
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

static int read_safetensors(int fd, uint64_t size, const dcr_limits *lim, dcr__checkpoint *out,
                            dcr_detail *d) {
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
  if (!rc) rc = dcr__safetensors_parse(prefix, prefix_length, size - 8 - n, lim, out, d);
  if (!rc && (rc = dcr__safetensors_check_layout(out, size - 8 - n, d))) dcr__checkpoint_free(out);
  free(prefix);
  return rc;
}

int dcr__checkpoint_read(int fd, int kind, const dcr_limits *lim, dcr__checkpoint *out,
                         dcr_detail *d) {
  struct stat st;
  memset(out, 0, sizeof *out);
  if (kind != DCR_KIND_RAW && kind != DCR_KIND_SAFETENSORS)
    return dcr__fail(d, DCR_E_ARGUMENT, "unknown checkpoint kind %d", kind);
  if (fstat(fd, &st)) return dcr__fail(d, DCR_E_IO, "cannot stat: %s", strerror(errno));
  /* The data region's length comes from the file size, which only a regular file
   * has; a pipe would read as an empty checkpoint. */
  if (!S_ISREG(st.st_mode)) return dcr__fail(d, DCR_E_IO, "not a regular file");
  uint64_t size = (uint64_t)st.st_size;
  if (size > lim->max_file_size)
    return dcr__fail(d, DCR_E_LIMIT, "file is %llu bytes, over the limit of %llu",
                     (unsigned long long)size, (unsigned long long)lim->max_file_size);
  if (kind == DCR_KIND_RAW) return read_raw(size, out, d);
  return read_safetensors(fd, size, lim, out, d);
}

void dcr__checkpoint_free(dcr__checkpoint *c) {
  if (!c) return;
  for (size_t i = 0; i < c->count; i++) free(c->tensors[i].name);
  free(c->tensors);
  free(c->dims_pool);
  free(c->prefix);
  memset(c, 0, sizeof *c);
}
