/*
 * refit.h - the refit room: applying a bundle where the checkpoint already is
 * (SPEC.md §10.3, §18). Its one door is the dcr_patch and dcr_changes functions
 * of dcr.h; this header is shared by its files and the unit tests.
 *
 *   patch.c    the dcr_patch object: options, stats, and the write path (with
 *              the fault injection the crash tests drive)
 *   memory.c   dcr_patch_memory: caller buffers, patched on threads
 *   changes.c  dcr_changes: decoded changes for memory the library cannot touch
 *   place.c    dcr_patch_placed: the blocks of tensors an engine holds (placements)
 *   journal.c  the apply journal (§18): writing, reading, replaying, recovering
 *   inplace.c  dcr_patch_file: in-place file apply through the journal
 *   inplace_dir.c  dcr_patch_file on a directory (a set): member files changed
 *              where they lie through one journal of member records (§18.6)
 *   series.c   the work file of a chain of bundles (dcr apply's series, history
 *              extract): patched in place, copied where the layout changes
 */
#ifndef DCR_REFIT_H
#define DCR_REFIT_H

#include "../codec/codec.h"
#include "../format/atomic.h"
#include "../format/checkpoint.h"

/* Faults injected into the write path, for tests: the k-th write (1-based) fails
 * with `error` after writing `torn` bytes of it, or the k-th fsync fails. */
typedef struct {
  uint64_t fail_write, fail_sync;
  size_t torn;
  int error;             /* errno: EIO, ENOSPC... */
  uint64_t writes, syncs; /* counted so far */
} dcr__faults;

struct dcr_patch {
  dcr_reader *r;
  int verify;
  unsigned threads;
  dcr_progress_fn progress;
  void *progress_opaque;
  const volatile int *cancel;
  int sync;
  int salvage; /* dcr_patch_set_salvage */
  dcr_patch_stats stats;
  dcr__faults *faults; /* NULL but in tests */
  dcr_resolve_fn whole_base; /* dcr_patch_set_base: whole base tensors, for placements */
  void *whole_base_opaque;
};

/* DCR_VERIFY_NONE's one look at the input (SPEC.md §10.3): the first changed chunk
 * of a delta-coded tensor (NULL if there is none) gives base_check, or target_check
 * (*as_target = 1: the bundle was applied already), or neither: BASE_MISMATCH. */
DCR_HIDDEN const dcr__chunk *dcr__probe_chunk(const dcr_reader *r);
/* The same, leaving out the entries whose skip byte is 1 (skip may be NULL). */
DCR_HIDDEN const dcr__chunk *dcr__probe_chunk_skipping(const dcr_reader *r, const uint8_t *skip);
DCR_HIDDEN int dcr__probe(const dcr_reader *r, const dcr__chunk *c, const uint8_t *bytes,
                          int *as_target, dcr_detail *d);

/* Test hook: faults for every later write and fsync of this patch (NULL: none). */
DCR_HIDDEN void dcr__patch_set_faults(dcr_patch *p, dcr__faults *faults);

/* ---- changes.c */
/* Decodes chunk record `record` into *out (valid until the iterator's next use), as
 * dcr_changes_next does. base: the chunk's base bytes, already checked against its
 * base_check by the caller, for an encoding whose positions depend on them (NULL:
 * they come from the iterator's base resolver and are checked here). */
DCR_HIDDEN int dcr__changes_chunk(dcr_changes *it, uint64_t record, const uint8_t *base,
                                  const dcr_change **out, dcr_detail *d);
/* One element changed by value v (dcr_op, SPEC.md §9.1); a zero XOR or delta
 * changes nothing. */
DCR_HIDDEN void dcr__apply_one(int op, uint8_t *elem, const uint8_t *v, unsigned esize);

/* ---- the write path: every byte and fsync of an in-place apply goes through
 * these, so that tests can fail or tear any of them. `faults` may be NULL. */
DCR_HIDDEN int dcr__wio_write(dcr__faults *f, int fd, const void *buf, size_t length,
                              uint64_t offset, dcr_detail *d);
DCR_HIDDEN int dcr__wio_sync(dcr__faults *f, int fd, dcr_detail *d);
/* fsync of the directory that holds path, so that a create, rename or unlink in
 * it is durable. */
DCR_HIDDEN int dcr__wio_sync_dir(dcr__faults *f, const char *path, dcr_detail *d);

/* ---- inplace.c */
/* Opens a checkpoint to patch (not through a symbolic link: DCR_E_ARGUMENT) and
 * takes an exclusive flock on it for as long as *fd is open (§18.1). */
DCR_HIDDEN int dcr__open_checkpoint(const char *path, int *fd, dcr_detail *d);

/* ---- journal.c (SPEC.md §18) */
#define DCR__JOURNAL_SUFFIX ".dcr-journal"
#define DCR__JOURNAL_TEMP ".tmp" /* after the suffix: a journal not yet published (§18.1) */
#define DCR__JOURNAL_HEADER_SIZE 64u
#define DCR__JOURNAL_RECORD_SIZE 40u
#define DCR__JOURNAL_TRAILER_SIZE 32u
/* dcr__journal_create's file_size for a directory's journal (minor 2, file_size 0) */
#define DCR__JOURNAL_DIRECTORY UINT64_MAX
enum { DCR__JREC_BYTES = 0, DCR__JREC_ELEMENTS = 1, DCR__JREC_MEMBER = 2 /* 1.2 */ };
/* A member record's operation (its count field, SPEC.md §18.6). */
enum { DCR__JOP_PATCH = 0, DCR__JOP_REPLACE = 1, DCR__JOP_REMOVE = 2 };
#define DCR__JOURNAL_PATH_MAX 4096u /* a member record's path, at most */

typedef struct { /* one record's header (§18.2) */
  uint64_t offset, length;
  uint8_t form, element_size, compression, reserved;
  uint32_t count;
  uint64_t stored_length, region_check;
  uint64_t at; /* where its payload starts in the journal (parsed records only) */
} dcr__jrecord;

typedef struct { /* a journal being written */
  int fd;
  dcr__faults *faults;
  uint64_t length, records;
  XXH3_state_t check;
  char temp[4200]; /* the name it is written under */
  int published;   /* renamed to its final name */
} dcr__jwriter;

/* Creates the journal of final name `path` under its temporary name (O_EXCL,
 * after removing one a killed writer left) and writes the header. */
DCR_HIDDEN int dcr__journal_create(dcr__jwriter *w, const char *path, uint64_t file_size,
                                   const uint8_t base_state[16], const uint8_t target_state[16],
                                   dcr__faults *faults, dcr_detail *d);
DCR_HIDDEN int dcr__journal_append(dcr__jwriter *w, const dcr__jrecord *rec,
                                   const void *payload, dcr_detail *d);
/* The trailer: after it the journal is committed. */
DCR_HIDDEN int dcr__journal_commit(dcr__jwriter *w, dcr_detail *d);
/* Makes a committed journal durable and renames it to `path` (replacing what is
 * there: the caller has recovered or proven superseded any journal there), then
 * makes the name durable (§18.4 step 3); sync 0 skips the fsyncs. From its start
 * on, a failure may leave the journal published: never remove it then. */
DCR_HIDDEN int dcr__journal_publish(dcr__jwriter *w, const char *path, int sync, dcr_detail *d);
/* Closes the journal; one never published is removed, as it never reached the file. */
DCR_HIDDEN void dcr__journal_abandon(dcr__jwriter *w);

/* A record's payload for the elements of a region that change: positions of the
 * changed elements of `after` relative to `before` (both `length` bytes), Rice-
 * coded as §9.1 codes positions, then their new values; zstd-compressed when that
 * is smaller. Fills rec (but offset) and points *payload into the builder. */
typedef struct {
  uint32_t *pos;
  uint8_t *raw, *packed;
  size_t raw_capacity, packed_capacity;
  ZSTD_CCtx *cctx;
} dcr__jbuilder;
DCR_HIDDEN int dcr__jbuilder_init(dcr__jbuilder *b, size_t chunk_bytes);
DCR_HIDDEN void dcr__jbuilder_free(dcr__jbuilder *b);
/* Returns 0 with rec->count 0 when nothing changes. */
DCR_HIDDEN int dcr__jbuilder_elements(dcr__jbuilder *b, const uint8_t *before, const uint8_t *after,
                                      size_t length, unsigned esize, dcr__jrecord *rec,
                                      const uint8_t **payload, dcr_detail *d);

/* A parsed journal: header and every record checked (§18.3). */
typedef struct {
  uint64_t file_size;
  uint8_t base_state[16], target_state[16];
  int header_ok;  /* steps 1-5 passed: file_size and the states can be trusted */
  uint64_t count;
  dcr__jrecord *records;
  int committed;   /* 0: not committed (§18.3 steps 1, 4, 6); then there are no records */
  const char *why; /* not committed: why, for messages ("its trailer's check fails") */
  int foreign;     /* DCR_E_JOURNAL at step 2, 3 or 5: not ours to remove, ever */
  int members;     /* a directory's journal: its records are member records (1.2) */
} dcr__journal;

/* Parses journal bytes from fd. DCR_E_JOURNAL for a journal that is committed but
 * cannot be used (malformed records) or is not one this reader may judge (foreign);
 * an uncommitted one is DCR_OK with committed = 0. */
DCR_HIDDEN int dcr__journal_read(int fd, dcr__journal *j, dcr_detail *d);
DCR_HIDDEN void dcr__journal_free(dcr__journal *j);
/* Replays a committed journal onto the checkpoint fd (§18.4). check_only: reads
 * each region and checks that the record applied to it gives region_check, writing
 * nothing; otherwise writes each region with its record applied, unchecked (a
 * recovery runs the checking pass first). Idempotent. A record that alone needs
 * more than max_memory is DCR_E_NOMEM before anything is read. */
DCR_HIDDEN int dcr__journal_replay(const dcr__journal *j, int journal_fd, int ckpt_fd,
                                   unsigned threads, uint64_t max_memory, dcr__faults *faults,
                                   int check_only, uint64_t *written, dcr_detail *d);
/* The journal's path for a checkpoint path; DCR_E_ARGUMENT if too long. */
DCR_HIDDEN int dcr__journal_path(const char *ckpt, char *out, size_t size, dcr_detail *d);
/* How a recovery runs, and the states that prove a checkpoint whole (R-JNL-4). */
typedef struct {
  int sync;
  unsigned threads;
  dcr__faults *faults;
  const uint8_t *known; /* known_count state ids, 16 bytes each: states the checkpoint
                           is meant to be in (the bundles' bases and targets) */
  size_t known_count;
  const dcr_limits *lim; /* reading the checkpoint to prove it; NULL: the defaults */
  const volatile int *cancel;
} dcr__recovery;

/* dcr_journal_recover_known on an open, locked checkpoint (§18.4, R-JNL-3/4):
 * *outcome is a dcr_journal_outcome; with DCR_E_JOURNAL, DCR__JOURNAL_UNUSABLE for
 * a journal kept because it cannot be replayed and the file is not proven whole,
 * DCR__JOURNAL_FOREIGN for one this reader may not judge. A salvage, which proves
 * its result before it writes, supersedes either (R-JNL-5). */
enum { DCR__JOURNAL_UNUSABLE = 3, DCR__JOURNAL_FOREIGN = 4 };
DCR_HIDDEN int dcr__journal_recover(const char *ckpt, int ckpt_fd, const dcr__recovery *how,
                                    int *outcome, dcr_detail *d);

/* ---- inplace_dir.c (SPEC.md §18.6) */
DCR_HIDDEN int dcr__patch_dir(dcr_patch *p, const char *dir, dcr_detail *d);
/* Finishes the journal an interrupted directory apply left (R-JNL-6); *outcome as
 * dcr__journal_recover's. Takes the directory's lock for the call. */
DCR_HIDDEN int dcr__dir_recover(const char *dir, int sync, int *outcome, dcr_detail *d);
/* Whether path is a directory (not through a link). */
DCR_HIDDEN int dcr__is_dir(const char *path);

/* ---- series.c: a chain of bundles applied to one work file, a hidden temporary
 * beside its destination that is committed there at the end. It has a name
 * because a patch opens it by path (and journals beside it); it is never synced
 * before the commit, since nothing sees it until then. */
typedef struct {
  dcr__atomic a;
  const char *beside; /* the destination: where every work file of the chain goes */
  unsigned flags;     /* DCR__ATOMIC_* of the commit */
  char path[4200];
} dcr__work;

DCR_HIDDEN int dcr__work_open(dcr__work *w, const char *beside, unsigned flags, dcr_detail *d);
/* Applies r to the work file, which holds r's base: patched in place at `verify`
 * (DCR_VERIFY_*) or, where the bundle changes the layout, copied with every check
 * of §10 into a new work file that replaces it. */
DCR_HIDDEN int dcr__work_apply(dcr__work *w, dcr_reader *r, int verify, const dcr_apply_options *opt,
                               dcr_detail *d);
/* dcr_apply_to's sink for a file descriptor (an int *). */
DCR_HIDDEN int dcr__write_fd(void *opaque, const void *data, size_t size);

#endif
