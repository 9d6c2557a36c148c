/*
 * fuzz_journal.c - the apply journal (SPEC.md §18, refit/journal.c): a journal
 * file found beside a checkpoint is untrusted bytes, read, checked and replayed.
 *
 * Input: one option byte, then the journal's bytes.
 *   bits 0..1  the checkpoint's size: 0 the size the journal's header declares
 *              (FUZZ_CKPT_MAX when larger or when there is no header), 1 none,
 *              2 4096 bytes, 3 FUZZ_CKPT_MAX bytes
 *   bit 2      the checkpoint's bytes: 0 fuzz_ckpt_byte() (what the seed journals
 *              were made against, fuzz/mkseeds.c), 1 zeros
 *   bit 3      also recover through a journal file on disk (dcr__journal_recover)
 *   bit 4      also recover a directory whose journal it is (dcr__dir_recover,
 *              SPEC.md §18.6): members a, b and c/d, staged a and e
 * The journal and the checkpoint are memfds; everything runs on one thread.
 *
 * Invariants, beyond no crash and no ASan/UBSan report:
 * - read: every error is DCR_E_JOURNAL, DCR_E_NOMEM or DCR_E_IO with d.code set;
 *   the header and trailer are judged as SPEC.md §18.3 steps 1 to 6 say, in that
 *   order (classify(): uncommitted, DCR_E_JOURNAL, or on to the records); an
 *   uncommitted journal has no records; a committed one ends with
 *   "DCJEND\r\n", the file size and its record count, and its records tile the
 *   journal from byte 64 to the trailer, with sorted, disjoint regions inside the
 *   declared file, and forms, element sizes and counts that §18.2 allows.
 * - replay, check_only: never writes (the checkpoint is byte-identical after it);
 *   a checkpoint whose size is not the declared one fails with DCR_E_JOURNAL.
 * - replay, writing (which checks no region_check: it runs after a check_only
 *   pass that succeeded, as §18.4 orders and recover does; in a fuzzing build, where
 *   region checks always match, also after one that failed): returns what
 *   check_only returned (regions are disjoint, so earlier writes never change what
 *   a later record reads); errors as for read; the file's size never changes, nor
 *   any byte outside the records' regions; on success `written` is the sum of the
 *   region lengths, an ELEMENTS region has at most `count` elements changed, in a
 *   production build every region hashes to its region_check, and a second replay
 *   succeeds with identical bytes (idempotence).
 * - member records (1.2, §18.6): a committed journal has them all or none, with
 *   file_size 0, element size 1, no compression, an operation 0..2, a path of
 *   1..4096 bytes that is its payload, valid (§2.3), paths strictly increasing;
 *   replaying one onto a file is DCR_E_JOURNAL and writes nothing.
 * - recover a directory: DCR_E_JOURNAL (or NOMEM/IO) exactly when the journal
 *   is not a committed member journal whose every record checks; then the
 *   journal stays and no member changes; on success the journal and every
 *   .dcr-* name are gone, and each record's member has its size and hash (or is
 *   gone: a removal).
 * - recover: returns what read + check_only + replay returned, and DCR_E_JOURNAL
 *   for an uncommitted journal (the checkpoint, no safetensors file, proves
 *   nothing: R-JNL-4); on success the journal file is gone, it was committed and
 *   the checkpoint is what the replay made; on failure the journal file is still
 *   there and the checkpoint untouched (§18.4: every record checked before the
 *   first write).
 * In a fuzzing build (FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION) the header and
 * trailer checksums and the region checks always match (DCR__CHECKSUM_OK), so any
 * trailer with the magic and the right size commits and every well-formed record
 * is written; the invariants above hold in both modes.
 */
#include <sys/mman.h>

#include "../refit/refit.h"
#include "fuzz_common.h"

#define FUZZ_MAX_INPUT (1u << 18)
#define FUZZ_CKPT_MAX (1u << 16)
#define FUZZ_BUDGET (64u << 20) /* the memory budget of fuzz_limits() */
/* The checkpoint's bytes; fuzz/mkseeds.c makes the seed journals against them. */
#define FUZZ_CKPT_SEED 21
static inline uint8_t fuzz_ckpt_byte(uint64_t i) { return fuzz_pattern(FUZZ_CKPT_SEED, i); }

static int jfd = -1, cfd = -1;
static uint8_t *before, *after, *again;

static int memfd(const char *name) {
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) {
    perror("fuzz_journal: memfd_create");
    abort();
  }
  return fd;
}

static void init(void) {
  if (jfd >= 0) return;
  jfd = memfd("journal");
  cfd = memfd("checkpoint");
  before = malloc(FUZZ_CKPT_MAX);
  after = malloc(FUZZ_CKPT_MAX);
  again = malloc(FUZZ_CKPT_MAX);
  FUZZ_ASSERT(before && after && again);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  init();
  return 0;
}

/* Replaces fd's contents with p[0..n). */
static void fill(int fd, const void *p, size_t n) {
  FUZZ_ASSERT(ftruncate(fd, 0) == 0);
  dcr_detail d;
  FUZZ_ASSERT(dcr__pwrite_full(fd, p, n, 0, &d) == DCR_OK);
}

/* The checkpoint's contents into buf; asserts that its size is n. */
static void snapshot(uint8_t *buf, size_t n) {
  struct stat st;
  dcr_detail d;
  FUZZ_ASSERT(fstat(cfd, &st) == 0 && (uint64_t)st.st_size == n);
  FUZZ_ASSERT(dcr__pread_full(cfd, buf, n, 0, &d) == DCR_OK);
}

static int allowed(int rc) { return rc == DCR_E_JOURNAL || rc == DCR_E_NOMEM || rc == DCR_E_IO; }

/* What SPEC.md §18.3 (R-JNL-1) steps 1 to 6 make of a journal: uncommitted, not
 * usable (DCR_E_JOURNAL), or committed as far as its header and trailer go. */
enum { UNCOMMITTED, BAD, TRAILER_OK };
static int classify(const uint8_t *p, size_t n) {
  static const uint8_t magic[8] = {0x89, 'D', 'C', 'J', '\r', '\n', 0x1A, '\n'}, zeros[8] = {0};
  static const uint8_t end[8] = {'D', 'C', 'J', 'E', 'N', 'D', '\r', '\n'};
  if (n < DCR__JOURNAL_HEADER_SIZE || !memcmp(p, zeros, 8)) return UNCOMMITTED; /* 1 */
  if (memcmp(p, magic, 8)) return BAD;                                            /* 2 */
  if (dcr__le16(p + 8) != 1) return BAD;                                          /* 3 */
  if (!DCR__CHECKSUM_OK(XXH3_64bits(p, 56) == dcr__le64(p + 56))) return UNCOMMITTED; /* 4 */
  if (dcr__le32(p + 12)) return BAD;                                              /* 5 */
  if (n < DCR__JOURNAL_HEADER_SIZE + DCR__JOURNAL_TRAILER_SIZE) return UNCOMMITTED; /* 6 */
  const uint8_t *t = p + n - DCR__JOURNAL_TRAILER_SIZE;
  if (memcmp(t, end, 8) || dcr__le64(t + 16) != n ||
      !DCR__CHECKSUM_OK(XXH3_64bits(p, n - 8) == dcr__le64(t + 24)))
    return UNCOMMITTED;
  return TRAILER_OK;
}

/* What read must have found in a committed journal of `size` bytes at p. */
static void check_parsed(const dcr__journal *j, const uint8_t *p, size_t size) {
  static const uint8_t end[8] = {'D', 'C', 'J', 'E', 'N', 'D', '\r', '\n'};
  FUZZ_ASSERT(size >= DCR__JOURNAL_HEADER_SIZE + DCR__JOURNAL_TRAILER_SIZE);
  const uint8_t *t = p + size - DCR__JOURNAL_TRAILER_SIZE;
  FUZZ_ASSERT(!memcmp(t, end, 8) && dcr__le64(t + 16) == size && dcr__le64(t + 8) == j->count);
  FUZZ_ASSERT(j->file_size == dcr__le64(p + 16));
  uint64_t at = DCR__JOURNAL_HEADER_SIZE, previous_end = 0;
  const uint8_t *prev = NULL;
  size_t prev_n = 0;
  for (uint64_t i = 0; i < j->count; i++) {
    const dcr__jrecord *r = &j->records[i];
    unsigned es = r->element_size;
    FUZZ_ASSERT(r->at == at + DCR__JOURNAL_RECORD_SIZE);
    FUZZ_ASSERT((r->form == DCR__JREC_MEMBER) == j->members);
    if (j->members) {
      const uint8_t *path = p + r->at;
      size_t n = (size_t)r->length;
      FUZZ_ASSERT(j->file_size == 0 && es == 1 && !r->compression && !r->reserved &&
                  r->count <= DCR__JOP_REMOVE && n >= 1 && n <= DCR__JOURNAL_PATH_MAX &&
                  r->stored_length == r->length);
      FUZZ_ASSERT(dcr__set_path_valid((const char *)path, n));
      if (prev) {
        int order = memcmp(prev, path, n < prev_n ? n : prev_n);
        FUZZ_ASSERT(order < 0 || (!order && prev_n < n));
      }
      prev = path, prev_n = n;
      at = r->at + r->stored_length;
      FUZZ_ASSERT(at <= size - DCR__JOURNAL_TRAILER_SIZE);
      continue;
    }
    FUZZ_ASSERT(r->form == DCR__JREC_BYTES || r->form == DCR__JREC_ELEMENTS);
    FUZZ_ASSERT(r->compression <= DCR_COMP_ZSTD && !r->reserved);
    if (r->form == DCR__JREC_BYTES)
      FUZZ_ASSERT(es == 1 && r->count == 0);
    else
      FUZZ_ASSERT((es == 1 || es == 2 || es == 4 || es == 8) && r->count >= 1 &&
                  r->count <= r->length / es);
    FUZZ_ASSERT(r->length >= 1 && r->length % es == 0 && r->length <= (1ull << 31));
    FUZZ_ASSERT(r->offset >= previous_end && r->offset <= j->file_size &&
                r->length <= j->file_size - r->offset);
    previous_end = r->offset + r->length;
    at = r->at + r->stored_length;
    FUZZ_ASSERT(at <= size - DCR__JOURNAL_TRAILER_SIZE);
  }
  FUZZ_ASSERT(at == size - DCR__JOURNAL_TRAILER_SIZE);
}

/* Bytes outside every record's region are the same in a and b. */
static void check_outside(const dcr__journal *j, const uint8_t *a, const uint8_t *b, size_t n) {
  uint64_t from = 0;
  for (uint64_t i = 0; i <= j->count; i++) {
    uint64_t to = i < j->count ? j->records[i].offset : n;
    FUZZ_ASSERT(from <= to && to <= n);
    FUZZ_ASSERT(!memcmp(a + from, b + from, (size_t)(to - from)));
    if (i < j->count) from = j->records[i].offset + j->records[i].length;
  }
}

/* The files of the directory fixture of bit 4: members, then staged ones. */
static const char *const dir_files[] = {"D/a", "D/b", "D/c/d", "D/.dcr-stage/a", "D/.dcr-stage/e"};
#define DIR_FILES (sizeof dir_files / sizeof *dir_files)
#define DIR_FILE_SIZE 64

static int dir_same(uint8_t was[DIR_FILES][DIR_FILE_SIZE + 1], size_t first, size_t count) {
  for (size_t i = first; i < first + count; i++) {
    fuzz_buf b = {0};
    int ok = !fuzz_read_file(fuzz_path(0, dir_files[i]), &b) && b.n == DIR_FILE_SIZE &&
             !memcmp(b.p, was[i], DIR_FILE_SIZE);
    fuzz_buf_free(&b);
    if (!ok) return 0;
  }
  return 1;
}

/* Bit 4: the journal as D/.dcr-journal, D recovered (SPEC.md §18.6, R-JNL-7). */
static void recover_dir(const uint8_t *p, size_t n, const dcr__journal *j) {
  static uint8_t was[DIR_FILES][DIR_FILE_SIZE + 1];
  char path[400];
  snprintf(path, sizeof path, "%s", fuzz_path(0, "D"));
  FUZZ_ASSERT(!mkdir(path, 0700));
  mkdir(fuzz_path(0, "D/c"), 0700), mkdir(fuzz_path(0, "D/.dcr-stage"), 0700);
  for (size_t i = 0; i < DIR_FILES; i++) {
    for (size_t k = 0; k < DIR_FILE_SIZE; k++) was[i][k] = fuzz_pattern((uint32_t)i % 3, k);
    fuzz_write_file(fuzz_path(0, dir_files[i]), was[i], DIR_FILE_SIZE);
  }
  fuzz_write_file(fuzz_path(1, "D/.dcr-journal"), p, n);
  int outcome = -1;
  dcr_detail d;
  dcr__detail_init(&d);
  int rc = dcr__dir_recover(path, 0, &outcome, &d);
  FUZZ_DEBUG("recover dir: %s %s outcome %d\n", dcr_error_name(rc), rc ? d.message : "", outcome);
  if (rc) {
    FUZZ_ASSERT(allowed(rc) && d.code == rc && outcome != DCR_JOURNAL_REPLAYED);
    FUZZ_ASSERT(fuzz_exists(fuzz_path(1, "D/.dcr-journal")));
    if (rc == DCR_E_JOURNAL) FUZZ_ASSERT(dir_same(was, 0, DIR_FILES));
  } else {
    FUZZ_ASSERT(j && (j->members || !j->count) && outcome == DCR_JOURNAL_REPLAYED);
    FUZZ_ASSERT(!fuzz_exists(fuzz_path(1, "D/.dcr-journal")) &&
                !fuzz_exists(fuzz_path(1, "D/.dcr-stage")));
    for (uint64_t i = 0; i < j->count; i++) {
      const dcr__jrecord *r = &j->records[i];
      char member[DCR__JOURNAL_PATH_MAX + 8];
      snprintf(member, sizeof member, "D/%.*s", (int)r->length, (const char *)p + r->at);
      fuzz_buf b = {0};
      int there = !fuzz_read_file(fuzz_path(1, member), &b);
      if (r->count == DCR__JOP_REMOVE) FUZZ_ASSERT(!there);
      else FUZZ_ASSERT(there && b.n == r->offset);
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
      if (r->count != DCR__JOP_REMOVE) FUZZ_ASSERT(XXH3_64bits(b.p, b.n) == r->region_check);
#endif
      fuzz_buf_free(&b);
    }
  }
  fuzz_rmtree(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > FUZZ_MAX_INPUT) return 0;
  init();
  uint8_t opt = data[0];
  const uint8_t *p = data + 1;
  size_t n = size - 1, ckpt;
  uint64_t declared = n >= 24 ? dcr__le64(p + 16) : FUZZ_CKPT_MAX;
  switch (opt & 3) {
    case 0: ckpt = declared <= FUZZ_CKPT_MAX ? (size_t)declared : FUZZ_CKPT_MAX; break;
    case 1: ckpt = 0; break;
    case 2: ckpt = 4096; break;
    default: ckpt = FUZZ_CKPT_MAX; break;
  }
  for (size_t i = 0; i < ckpt; i++) before[i] = opt & 4 ? 0 : fuzz_ckpt_byte(i);
  fill(jfd, p, n);
  fill(cfd, before, ckpt);

  dcr__journal j;
  dcr_detail d;
  dcr__detail_init(&d);
  int rc_read = dcr__journal_read(jfd, &j, &d);
  FUZZ_DEBUG("read: %s %s committed %d, %llu records\n", dcr_error_name(rc_read),
             rc_read ? d.message : "", j.committed, (unsigned long long)j.count);
  int committed = !rc_read && j.committed, rc_check = DCR_OK, rc_write = DCR_OK;
  if (rc_read) {
    FUZZ_ASSERT(allowed(rc_read) && d.code == rc_read && !j.committed);
  } else if (!j.committed) {
    FUZZ_ASSERT(j.count == 0);
  } else {
    check_parsed(&j, p, n);
  }
  /* R-JNL-1 steps 1 to 6, in the spec's order */
  switch (classify(p, n)) {
    case UNCOMMITTED: FUZZ_ASSERT(rc_read == DCR_OK && !j.committed); break;
    case BAD: FUZZ_ASSERT(rc_read == DCR_E_JOURNAL); break;
    default: FUZZ_ASSERT(rc_read != DCR_OK || j.committed); break;
  }

  uint64_t written = 0;
  if (committed) {
    /* check_only: reads, checks, never writes */
    dcr__detail_init(&d);
    rc_check = dcr__journal_replay(&j, jfd, cfd, 1, FUZZ_BUDGET, NULL, 1, &written, &d);
    FUZZ_DEBUG("check: %s %s\n", dcr_error_name(rc_check), rc_check ? d.message : "");
    if (rc_check) FUZZ_ASSERT(allowed(rc_check) && d.code == rc_check);
    if (j.members) FUZZ_ASSERT(rc_check == DCR_E_JOURNAL);
    if (j.file_size != ckpt) FUZZ_ASSERT(rc_check == DCR_E_JOURNAL);
    snapshot(after, ckpt);
    FUZZ_ASSERT(!memcmp(after, before, ckpt));
  }
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
  int write_anyway = 1; /* no region check fails: both passes check the same */
#else
  int write_anyway = 0; /* the writing pass checks no region: never after a failed check */
#endif
  if (committed && (rc_check == DCR_OK || write_anyway)) {
    written = 0;
    dcr__detail_init(&d);
    rc_write = dcr__journal_replay(&j, jfd, cfd, 1, FUZZ_BUDGET, NULL, 0, &written, &d);
    FUZZ_DEBUG("replay: %s %s, %llu bytes\n", dcr_error_name(rc_write), rc_write ? d.message : "",
               (unsigned long long)written);
    FUZZ_ASSERT(rc_write == rc_check || rc_write == DCR_E_NOMEM || rc_check == DCR_E_NOMEM);
    snapshot(after, ckpt); /* the size never changes */
    if (rc_write) {
      FUZZ_ASSERT(allowed(rc_write) && d.code == rc_write && written == 0);
      if (j.members) FUZZ_ASSERT(!memcmp(after, before, ckpt));
      else if (j.file_size == ckpt) check_outside(&j, before, after, ckpt);
      else FUZZ_ASSERT(!memcmp(after, before, ckpt));
    } else {
      uint64_t sum = 0;
      for (uint64_t i = 0; i < j.count; i++) {
        const dcr__jrecord *r = &j.records[i];
        sum += r->length;
        if (r->form == DCR__JREC_ELEMENTS)
          FUZZ_ASSERT(dcr__count_changed(before + r->offset, after + r->offset,
                                         (size_t)(r->length / r->element_size),
                                         r->element_size) <= r->count);
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
        /* with real checks, every region written is the one the journal describes */
        FUZZ_ASSERT(XXH3_64bits(after + r->offset, (size_t)r->length) == r->region_check);
#endif
      }
      FUZZ_ASSERT(written == sum);
      check_outside(&j, before, after, ckpt);
      /* idempotent: a crash during a replay is finished by replaying again */
      uint64_t written2 = 0;
      dcr__detail_init(&d);
      int rc2 = dcr__journal_replay(&j, jfd, cfd, 1, FUZZ_BUDGET, NULL, 0, &written2, &d);
      FUZZ_DEBUG("again: %s %s\n", dcr_error_name(rc2), rc2 ? d.message : "");
      FUZZ_ASSERT(rc2 == DCR_OK || rc2 == DCR_E_NOMEM);
      snapshot(again, ckpt);
      FUZZ_ASSERT(!memcmp(again, after, ckpt));
      if (!rc2) FUZZ_ASSERT(written2 == written);
    }
  }

  if (opt & 8) {
    /* the same journal found on disk beside the checkpoint */
    const char *path = fuzz_path(0, "ckpt"), *jpath = fuzz_path(1, "ckpt" DCR__JOURNAL_SUFFIX);
    fuzz_write_file(jpath, p, n);
    fill(cfd, before, ckpt);
    int outcome = -1;
    dcr__detail_init(&d);
    dcr_limits lim;
    fuzz_limits(&lim);
    dcr__recovery how = {.threads = 1, .lim = &lim};
    int rc = dcr__journal_recover(path, cfd, &how, &outcome, &d);
    FUZZ_DEBUG("recover: %s %s outcome %d\n", dcr_error_name(rc), rc ? d.message : "", outcome);
    /* The checkpoint is no safetensors file, so nothing proves it whole (R-JNL-4):
     * a journal that cannot be replayed stays, as one that is foreign does. */
    int expect = rc_read ? rc_read : !committed ? DCR_E_JOURNAL : rc_check ? rc_check : rc_write;
    FUZZ_ASSERT(rc == expect || rc == DCR_E_NOMEM || expect == DCR_E_NOMEM);
    snapshot(again, ckpt);
    if (rc) {
      FUZZ_ASSERT(allowed(rc) && d.code == rc && outcome != DCR_JOURNAL_REPLAYED &&
                  outcome != DCR_JOURNAL_DISCARDED);
      FUZZ_ASSERT(fuzz_exists(jpath)); /* kept for a person to look at */
      if (rc != DCR_E_IO) FUZZ_ASSERT(!memcmp(again, before, ckpt));
      unlink(jpath);
    } else {
      FUZZ_ASSERT(!fuzz_exists(jpath) && committed && outcome == DCR_JOURNAL_REPLAYED);
      if (!rc_write) FUZZ_ASSERT(!memcmp(again, after, ckpt));
    }
    FUZZ_ASSERT(fuzz_dir_entries(fuzz_dir()) == 0);
  }
  if (opt & 16) recover_dir(p, n, committed ? &j : NULL);
  dcr__journal_free(&j);
  return 0;
}
