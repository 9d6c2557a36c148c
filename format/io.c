/*
 * io.c - whole reads and writes (retry on EINTR and short counts, report errno)
 * and read-only views of file ranges.
 */
#include <errno.h>
#include <unistd.h>

#include "common.h"

int dcr__pread_full(int fd, void *buf, size_t length, uint64_t offset, dcr_detail *d) {
  uint8_t *p = buf;
  while (length) {
    ssize_t r = pread(fd, p, length, (off_t)offset);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return dcr__fail(d, DCR_E_IO, "read failed at offset %llu: %s",
                                (unsigned long long)offset, strerror(errno));
    if (r == 0) return dcr__fail(d, DCR_E_IO, "file ends early (offset %llu): it shrank while being read",
                                 (unsigned long long)offset);
    p += r, length -= (size_t)r, offset += (uint64_t)r;
  }
  return DCR_OK;
}

int dcr__pwrite_full(int fd, const void *buf, size_t length, uint64_t offset, dcr_detail *d) {
  const uint8_t *p = buf;
  while (length) {
    ssize_t r = pwrite(fd, p, length, (off_t)offset);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return dcr__fail(d, DCR_E_IO, "write failed at offset %llu: %s",
                                (unsigned long long)offset, strerror(errno));
    p += r, length -= (size_t)r, offset += (uint64_t)r;
  }
  return DCR_OK;
}

/* Read, never mapped: a mapped file that a writer truncates ends the process with
 * SIGBUS, and one that a writer modifies changes under the hash that vouches for
 * it. Read into the caller's buffer, the bytes are private: what is hashed is what
 * is written. (Measured on a 256 MiB pair, 4 MiB chunks, page cache: apply as fast
 * as with MAP_POPULATE, encode, which reads two files, 10-15% slower.) */
int dcr__view_open(dcr__view *v, int fd, uint64_t offset, size_t length, uint8_t *fallback,
                   dcr_detail *d) {
  *v = (dcr__view){.data = fallback};
  if (!length) return DCR_OK;
  return dcr__pread_full(fd, fallback, length, offset, d);
}

void dcr__view_close(dcr__view *v) { *v = (dcr__view){0}; }
