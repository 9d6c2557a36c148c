/*
 * fuzz_append.c - the append journal of an append in place (SPEC.md §19.6,
 * history/append.c): a file found beside a history archive, untrusted bytes that
 * a reader or the next append reads and, if they pass, rolls the archive back
 * with.
 *
 * Input: one option byte, then the journal's bytes, written as A.tar.dcr-append
 * beside an archive A.tar of fuzz_pattern bytes:
 *   bit 0 = 0  the archive has the size the journal declares (archive_size, at most
 *              FUZZ_ARCHIVE_MAX; 4096 bytes when there is no header or it is larger)
 *   bit 0 = 1  the archive has members_end - 512 bytes (shorter than its members:
 *              not the journal's archive), at least 0
 * then dcr__happend_rollback runs.
 *
 * Invariants, beyond no crash and no ASan/UBSan report:
 * - parse: every error is DCR_E_JOURNAL with d.code set; a journal
 *   that parses has index_length = its size - 80, offsets as R-HIS-12 says
 *   (index_offset and members_end multiples of 512, the slot before members_end,
 *   tail_offset by its rule, archive_size at most 1 MiB past members_end), and its
 *   slot's bytes point inside the input.
 * - rollback: succeeds exactly when the journal parses and the archive is at least
 *   members_end bytes (in a fuzzing build the tail digest always matches); then the
 *   journal is gone and the archive is archive_size bytes: the kept slot at
 *   index_offset, zeros from members_end on, and every other byte what it was.
 *   On failure (DCR_E_JOURNAL, DCR_E_NOMEM, DCR_E_IO) neither file
 *   changed.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../history/history.h"
#include "fuzz_common.h"

#define FUZZ_ARCHIVE_MAX (1u << 18)

static uint8_t pattern[FUZZ_ARCHIVE_MAX];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  for (uint64_t i = 0; i < FUZZ_ARCHIVE_MAX; i++) pattern[i] = fuzz_pattern(3, i);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  uint8_t opt = data[0];
  const uint8_t *p = data + 1;
  size_t n = size - 1;
  dcr_detail d;
  dcr__detail_init(&d);
  dcr__happend j;
  int parsed = dcr__happend_parse(&j, p, n, &d);
  FUZZ_DEBUG("parse: %s %s\n", dcr_error_name(parsed), parsed ? d.message : "");
  if (parsed) {
    FUZZ_ASSERT(d.code == parsed && parsed == DCR_E_JOURNAL);
  } else {
    FUZZ_ASSERT(j.index_length == n - DCR__APPEND_HEADER - 8 && j.index == p + DCR__APPEND_HEADER);
    FUZZ_ASSERT(j.index_offset % 512 == 0 && j.members_end % 512 == 0 && j.index_offset >= 512);
    FUZZ_ASSERT(j.index_offset + j.index_length <= j.tail_offset && j.tail_offset <= j.members_end);
    FUZZ_ASSERT(j.members_end - j.tail_offset <= DCR__APPEND_TAIL_MAX);
    FUZZ_ASSERT(j.archive_size >= j.members_end && j.archive_size - j.members_end <= DCR__APPEND_ZEROS_MAX);
  }

  /* The archive beside it. */
  uint64_t declared = n >= DCR__APPEND_HEADER ? dcr__le64(p + 16) : 4096;
  uint64_t end = n >= DCR__APPEND_HEADER ? dcr__le64(p + 24) : 4096;
  uint64_t asize = !(opt & 1) ? (declared <= FUZZ_ARCHIVE_MAX ? declared : 4096)
                              : (end >= 512 && end - 512 <= FUZZ_ARCHIVE_MAX ? end - 512 : 0);
  fuzz_buf was = {0};
  fuzz_put(&was, pattern, (size_t)asize);
  char archive[400], journal[400];
  snprintf(archive, sizeof archive, "%s", fuzz_path(0, "A.tar"));
  snprintf(journal, sizeof journal, "%s", fuzz_path(1, "A.tar" DCR__APPEND_SUFFIX));
  fuzz_write_file(archive, was.p, was.n);
  fuzz_write_file(journal, p, n);
  int fd = open(archive, O_RDWR | O_CLOEXEC);
  FUZZ_ASSERT(fd >= 0);
  int rolled = -1;
  dcr__detail_init(&d);
  int rc = dcr__happend_rollback(archive, fd, 0, &rolled, &d);
  FUZZ_DEBUG("rollback: %s %s\n", dcr_error_name(rc), rc ? d.message : "");
  close(fd);
  fuzz_buf now = {0}, jnow = {0};
  FUZZ_ASSERT(!fuzz_read_file(archive, &now));
  int journal_left = !fuzz_read_file(journal, &jnow);
  if (!parsed && asize >= j.members_end) {
    FUZZ_ASSERT(rc == DCR_OK && rolled == 1 && !journal_left && now.n == j.archive_size);
    for (uint64_t i = 0; i < now.n; i++) {
      uint8_t want = i >= j.members_end ? 0
                     : i >= j.index_offset && i - j.index_offset < j.index_length ? j.index[i - j.index_offset]
                                                                                  : was.p[i];
      FUZZ_ASSERT(now.p[i] == want);
    }
  } else {
    FUZZ_ASSERT(rc != DCR_OK && d.code == rc && rolled == 0);
    FUZZ_ASSERT(rc == DCR_E_JOURNAL || rc == DCR_E_NOMEM || rc == DCR_E_IO);
    FUZZ_ASSERT(journal_left && jnow.n == n && (n == 0 || !memcmp(jnow.p, p, n)));
    FUZZ_ASSERT(now.n == was.n && (was.n == 0 || !memcmp(now.p, was.p, was.n)));
  }
  unlink(journal);
  fuzz_buf_free(&was), fuzz_buf_free(&now), fuzz_buf_free(&jnow);
  return 0;
}
