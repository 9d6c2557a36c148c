/*
 * append.c - appending to a plain tar archive in place (SPEC.md §19.6): the
 * append journal, its one parser, and the rollback that a torn append leaves to
 * the next run.
 *
 * An append in place writes the new members over the archive's end-of-archive
 * blocks and then the new index over the old one, in the slot the index member
 * already has (its text padded with spaces). The members before are never
 * written. The only bytes an append overwrites that a reader needs are therefore
 * the index slot and the end blocks: the journal keeps the slot's old bytes and
 * where the end was, so that undoing a torn append needs nothing but the journal
 * and the archive, whatever moment the crash came at. Undo, not redo: the new
 * members are the appender's inputs, which a later run may not have.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../format/atomic.h"
#include "../refit/refit.h"
#include "history.h"

static const uint8_t MAGIC[8] = {0x89, 'D', 'C', 'A', '\r', '\n', 0x1a, '\n'};

static uint64_t tail_start(uint64_t index_end, uint64_t members_end) {
  return members_end - index_end > DCR__APPEND_TAIL_MAX ? members_end - DCR__APPEND_TAIL_MAX : index_end;
}

int dcr__happend_parse(dcr__happend *j, const uint8_t *b, size_t n, dcr_detail *d) {
  memset(j, 0, sizeof *j);
  if (n < 8 || memcmp(b, MAGIC, 8))
    return dcr__fail(d, DCR_E_JOURNAL, "not an append journal: its first bytes are not the magic (SPEC.md §19.6)");
  if (n < DCR__APPEND_HEADER + 8)
    return dcr__fail(d, DCR_E_JOURNAL, "the append journal has %zu bytes, fewer than its header and check", n);
  if (!DCR__CHECKSUM_OK(XXH3_64bits(b, n - 8) == dcr__le64(b + n - 8)))
    return dcr__fail(d, DCR_E_JOURNAL, "the append journal's check (XXH3-64 of its bytes) does not match: it is "
                     "damaged");
  unsigned major = dcr__le16(b + 8);
  j->minor = dcr__le16(b + 10);
  /* As an apply journal's (§18.3): refused, and kept, never taken for damage. */
  if (major != DCR__APPEND_MAJOR)
    return dcr__fail(d, DCR_E_JOURNAL, "an append journal of version %u.%u; this reader knows %u.x", major,
                     j->minor, DCR__APPEND_MAJOR);
  if (dcr__le32(b + 12)) return dcr__fail(d, DCR_E_JOURNAL, "the append journal's reserved field is not 0");
  j->archive_size = dcr__le64(b + 16);
  j->members_end = dcr__le64(b + 24);
  j->index_offset = dcr__le64(b + 32);
  j->index_length = dcr__le64(b + 40);
  j->tail_offset = dcr__le64(b + 48);
  memcpy(j->tail_digest, b + 56, 16);
  if (j->index_length < 1 || j->index_length > DCR__HISTORY_INDEX_MAX ||
      j->index_length != n - DCR__APPEND_HEADER - 8)
    return dcr__fail(d, DCR_E_JOURNAL, "the append journal keeps an index slot of %llu bytes in %zu bytes",
                     (unsigned long long)j->index_length, n);
  /* index_length is bounded above, index_offset is not: a slot that would end
   * past 2^64 ends past members_end, which is what the rule refuses. */
  int wraps = j->index_offset > UINT64_MAX - j->index_length;
  uint64_t index_end = wraps ? UINT64_MAX : j->index_offset + j->index_length;
  if (wraps || j->index_offset < 512 || j->index_offset % 512 || j->members_end % 512 || j->members_end < index_end ||
      j->tail_offset != tail_start(index_end, j->members_end) || j->archive_size < j->members_end ||
      j->archive_size - j->members_end > DCR__APPEND_ZEROS_MAX)
    return dcr__fail(d, DCR_E_JOURNAL, "the append journal's offsets do not describe a tar archive (index at "
                     "%llu, %llu bytes; members end at %llu, tail from %llu; archive of %llu bytes)",
                     (unsigned long long)j->index_offset, (unsigned long long)j->index_length,
                     (unsigned long long)j->members_end, (unsigned long long)j->tail_offset,
                     (unsigned long long)j->archive_size);
  j->index = b + DCR__APPEND_HEADER;
  return DCR_OK;
}

/* XXH3-128, canonical, of the archive's bytes [from, to). */
static int digest_range(int fd, uint64_t from, uint64_t to, uint8_t out[16], dcr_detail *d) {
  uint8_t buf[1 << 14];
  XXH3_state_t st;
  XXH3_128bits_reset(&st);
  while (from < to) {
    size_t n = to - from < sizeof buf ? (size_t)(to - from) : sizeof buf;
    int err = dcr__pread_full(fd, buf, n, from, d);
    if (err) return err;
    XXH3_128bits_update(&st, buf, n);
    from += n;
  }
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits_digest(&st));
  memcpy(out, c.digest, 16);
  return DCR_OK;
}

void dcr__happend_name(char *out, size_t size, const char *archive) {
  snprintf(out, size, "%s" DCR__APPEND_SUFFIX, archive);
}

/* Reads the journal file whole: it is the index slot and 80 bytes. */
static int journal_load(const char *name, uint8_t **out, size_t *n, dcr_detail *d) {
  *out = NULL;
  int fd = open(name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return dcr__fail(d, DCR_E_IO, "cannot open the append journal: %s", strerror(errno));
  struct stat st;
  int err = fstat(fd, &st) ? dcr__fail(d, DCR_E_IO, "cannot stat the append journal: %s", strerror(errno))
            : !S_ISREG(st.st_mode) ? dcr__fail(d, DCR_E_JOURNAL, "the append journal is not a regular file")
            : (uint64_t)st.st_size > DCR__HISTORY_INDEX_MAX + DCR__APPEND_HEADER + 8
                ? dcr__fail(d, DCR_E_JOURNAL, "the append journal has %llu bytes, more than any index slot "
                            "needs", (unsigned long long)st.st_size)
                : DCR_OK;
  if (!err && !(*out = malloc((size_t)st.st_size + 1))) err = dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  if (!err) err = dcr__pread_full(fd, *out, (size_t)st.st_size, 0, d);
  close(fd);
  if (err) return free(*out), *out = NULL, err;
  *n = (size_t)st.st_size;
  return DCR_OK;
}

int dcr__happend_rollback(const char *archive, int fd, int sync, int *rolled, dcr_detail *d) {
  *rolled = 0;
  char name[4200];
  dcr__happend_name(name, sizeof name, archive);
  struct stat st;
  if (lstat(name, &st)) {
    if (errno == ENOENT) return DCR_OK;
    return dcr__fail(d, DCR_E_IO, "cannot stat the append journal %s: %s", name, strerror(errno));
  }
  uint8_t *b;
  size_t n = 0;
  dcr__happend j;
  int err = journal_load(name, &b, &n, d);
  if (!err) err = dcr__happend_parse(&j, b, n, d);
  uint8_t tail[16];
  if (!err && fstat(fd, &st)) err = dcr__fail(d, DCR_E_IO, "cannot stat the archive: %s", strerror(errno));
  /* The bytes before the end of the members are never written by an append:
   * those nearest the end say whether this is the archive the journal was written
   * for (a copy, or an archive made anew at the same path, is not). */
  if (!err && (uint64_t)st.st_size < j.members_end)
    err = dcr__fail(d, DCR_E_JOURNAL, "the archive has %llu bytes, fewer than the %llu the append journal says "
                    "its members took: not the archive the journal was written for",
                    (unsigned long long)st.st_size, (unsigned long long)j.members_end);
  if (!err) err = digest_range(fd, j.tail_offset, j.members_end, tail, d);
  if (!err && !DCR__CHECKSUM_OK(!memcmp(tail, j.tail_digest, 16)))
    err = dcr__fail(d, DCR_E_JOURNAL, "the archive's bytes before offset %llu are not those the append journal "
                    "recorded: not the archive the journal was written for", (unsigned long long)j.members_end);
  if (!err) err = dcr__pwrite_full(fd, j.index, (size_t)j.index_length, j.index_offset, d);
  /* The old end blocks and padding, zeros again; past the file's end the
   * truncate below makes them. */
  static const uint8_t zeros[1 << 13];
  uint64_t zeros_end = j.archive_size < (uint64_t)st.st_size ? j.archive_size : (uint64_t)st.st_size;
  for (uint64_t at = j.members_end; !err && at < zeros_end;) {
    size_t k = zeros_end - at < sizeof zeros ? (size_t)(zeros_end - at) : sizeof zeros;
    err = dcr__pwrite_full(fd, zeros, k, at, d);
    at += k;
  }
  if (!err && ftruncate(fd, (off_t)j.archive_size))
    err = dcr__fail(d, DCR_E_IO, "cannot truncate the archive: %s", strerror(errno));
  if (!err && sync) err = dcr__wio_sync(NULL, fd, d);
  /* Only once the archive is back, durably, may the journal go. */
  if (!err && unlink(name)) err = dcr__fail(d, DCR_E_IO, "cannot remove the append journal: %s", strerror(errno));
  if (!err && sync) err = dcr__wio_sync_dir(NULL, name, d);
  free(b);
  if (err && d) { /* the message names the journal; d->file is the archive */
    char msg[2 * sizeof d->message];
    snprintf(msg, sizeof msg, "the append journal %.160s: %s (both files are kept)", name, d->message);
    memcpy(d->message, msg, sizeof d->message - 1);
    d->message[sizeof d->message - 1] = 0;
  }
  if (!err) *rolled = 1;
  return err;
}

int dcr__happend_begin(const char *archive, int fd, const dcr__happend *j, int sync, dcr_detail *d) {
  size_t n = DCR__APPEND_HEADER + (size_t)j->index_length + 8;
  uint8_t *b = calloc(1, n);
  if (!b) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate the append journal");
  memcpy(b, MAGIC, 8);
  dcr__put16(b + 8, DCR__APPEND_MAJOR);
  dcr__put16(b + 10, DCR__APPEND_MINOR);
  dcr__put64(b + 16, j->archive_size);
  dcr__put64(b + 24, j->members_end);
  dcr__put64(b + 32, j->index_offset);
  dcr__put64(b + 40, j->index_length);
  uint64_t tail = tail_start(j->index_offset + j->index_length, j->members_end);
  dcr__put64(b + 48, tail);
  int err = digest_range(fd, tail, j->members_end, b + 56, d);
  if (!err) err = dcr__pread_full(fd, b + DCR__APPEND_HEADER, (size_t)j->index_length, j->index_offset, d);
  dcr__put64(b + n - 8, XXH3_64bits(b, n - 8));
  char name[4200];
  dcr__happend_name(name, sizeof name, archive);
  /* Whole or absent under its name: a journal that is there can be trusted to
   * undo the append, and one that is not means nothing was written. */
  dcr__atomic a;
  if (!err) err = dcr__atomic_open(&a, name, sync ? DCR__ATOMIC_SYNC : 0, d);
  if (!err) {
    err = dcr__pwrite_full(a.fd, b, n, 0, d);
    if (!err) err = dcr__atomic_commit(&a, d);
    dcr__atomic_abort(&a);
  }
  free(b);
  return err;
}

int dcr__happend_end(const char *archive, int fd, uint64_t index_offset, const char *index, size_t length,
                     int sync, dcr_detail *d) {
  int err = sync ? dcr__wio_sync(NULL, fd, d) : DCR_OK; /* the members, before the index names them */
  if (!err) err = dcr__pwrite_full(fd, index, length, index_offset, d);
  if (!err && sync) err = dcr__wio_sync(NULL, fd, d);
  char name[4200];
  dcr__happend_name(name, sizeof name, archive);
  if (!err && unlink(name)) err = dcr__fail(d, DCR_E_IO, "cannot remove the append journal: %s", strerror(errno));
  if (!err && sync) err = dcr__wio_sync_dir(NULL, name, d);
  return err;
}

int dcr__range_lock(int fd, int exclusive, dcr_detail *d) {
  /* An open-file-description lock: like flock, it belongs to this descriptor and
   * not to the process, so that another thread's close of the same file does
   * not drop it; unlike flock, it lets an appender (which holds the archive's
   * flock throughout) shut readers out only while it writes. */
  struct flock l = {.l_type = (short)(exclusive ? F_WRLCK : F_RDLCK), .l_whence = SEEK_SET};
  while (fcntl(fd, F_OFD_SETLKW, &l) < 0)
    if (errno != EINTR) return dcr__fail(d, DCR_E_IO, "cannot lock the archive: %s", strerror(errno));
  return DCR_OK;
}

void dcr__range_unlock(int fd) {
  struct flock l = {.l_type = F_UNLCK, .l_whence = SEEK_SET};
  fcntl(fd, F_OFD_SETLK, &l);
}
