/*
 * io.c - whole reads and writes (retry on EINTR and short counts, report errno)
 * and read-only views of file ranges.
 */
#include <errno.h>
#include <sys/mman.h>
#include <sys/stat.h>
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

int dcr__view_open(dcr__view *v, int fd, uint64_t offset, size_t length, uint8_t *fallback,
                   dcr_detail *d) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  *v = (dcr__view){.data = fallback};
  if (!length) return DCR_OK;
  /* A file cut short under a mapping would end the process with SIGBUS: check
   * that the range is still there (a writer that truncates it later still can). */
  struct stat st;
  if (fstat(fd, &st) == 0 && (uint64_t)st.st_size < offset + length)
    return dcr__fail(d, DCR_E_IO, "file ends early (offset %llu): it shrank while being read",
                     (unsigned long long)st.st_size);
  size_t skew = (size_t)(offset % page);
  /* MAP_POPULATE (Linux) maps the whole range in one call instead of a fault per
   * 64 KiB: every byte is about to be read anyway. Elsewhere, plain faults. */
#ifdef MAP_POPULATE
  int flags = MAP_SHARED | MAP_POPULATE;
#else
  int flags = MAP_SHARED;
#endif
  void *p = mmap(NULL, length + skew, PROT_READ, flags, fd, (off_t)(offset - skew));
  if (p == MAP_FAILED) return dcr__pread_full(fd, fallback, length, offset, d);
  v->map = p;
  v->map_length = length + skew;
  v->data = (const uint8_t *)p + skew;
  return DCR_OK;
}

void dcr__view_close(dcr__view *v) {
  if (v->map) munmap(v->map, v->map_length);
  *v = (dcr__view){0};
}
