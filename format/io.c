/*
 * io.c - whole reads and writes (retry on EINTR and short counts, report errno),
 * unnamed temporary files, and the end of read-only views (checkpoint.c opens
 * them).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
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

int dcr__temp_fd(const char *dir) {
  if (!dir || !*dir) dir = getenv("TMPDIR");
  if (!dir || !*dir) dir = "/tmp";
  int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) return fd;
  /* a file system without O_TMPFILE: a named file, unlinked at once */
  char path[4096];
  snprintf(path, sizeof path, "%s/.dcr-spool-XXXXXX", dir);
  fd = mkostemp(path, O_CLOEXEC);
  if (fd >= 0) unlink(path);
  return fd;
}

void dcr__view_close(dcr__view *v) { *v = (dcr__view){0}; }
