/*
 * inplace_dir.c - dcr_patch_file on a directory: a checkpoint set (SPEC.md §2.3)
 * taken to the bundle's target where it lies, through one journal of member
 * records (§18.6, journal 1.2) at DIR/.dcr-journal.
 *
 * 1. A journal left by an interrupted apply is finished first (R-JNL-6); without
 *    one, whatever a killed writer left (DIR/.dcr-*) goes: it never reached a member.
 * 2. The target set is written, with every check of §10, into DIR/.dcr-stage
 *    (hidden, so no member: §2.3), by the apply that writes a new directory.
 * 3. Each member is compared with its staged target: equal ones are left alone;
 *    one of the same size becomes a patch (only its blocks that differ are
 *    written, into the file itself); one added or resized a replacement (the
 *    staged file renamed over it); one the target lacks a removal. These records
 *    form the journal, committed, made durable and published by rename.
 * 4. The records are replayed, the members made durable, the journal removed,
 *    then the stage. Every step of 4 can run again: a patch copies the staged
 *    blocks that differ, a replacement whose staged file is gone was renamed
 *    already, a removal of what is not there is done.
 * Why staging: a resized member is written whole anyway, and the stage makes the
 * target complete and checked before any member changes, so that a crash before
 * the journal is published leaves the set as it was, and after it the journal
 * alone finishes it (no bundle needed), as for a file.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../format/set_output.h"
#include "refit.h"

#define JOURNAL ".dcr-journal"
#define STAGE ".dcr-stage/"
#define OURS ".dcr-" /* every name a directory apply makes in DIR begins so */
#define BLOCK ((size_t)1 << 20)

int dcr__is_dir(const char *path) {
  struct stat st;
  return !lstat(path, &st) && S_ISDIR(st.st_mode);
}

/* §18.1: the directory itself is locked, so that two applies, or an apply and a
 * recovery, never meet in it. Not through a link, for the reason of
 * dcr__open_checkpoint. */
static int lock_dir(const char *dir, int *fd, dcr_detail *d) {
  *fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (*fd < 0 && (errno == ELOOP || errno == ENOTDIR) && !lstat(dir, &st) && S_ISLNK(st.st_mode))
    errno = ELOOP; /* O_DIRECTORY answers ENOTDIR for a link */
  if (*fd < 0)
    return dcr__detail_file(d, dir),
           errno == ELOOP
               ? dcr__fail(d, DCR_E_ARGUMENT, "is a symbolic link: give the real directory, or "
                           "apply to a copy (-o OUT)")
           : errno == ENOTDIR
               ? dcr__fail(d, DCR_E_CHECKPOINT, "is not a directory: a set's bundle applies to "
                           "a model directory (SPEC.md §2.3)")
               : dcr__fail(d, DCR_E_IO, "cannot open the directory: %s", strerror(errno));
  if (!flock(*fd, LOCK_EX | LOCK_NB)) return DCR_OK;
  int rc = errno == EWOULDBLOCK
               ? dcr__fail(d, DCR_E_IO, "another process is applying a bundle to this directory")
               : dcr__fail(d, DCR_E_IO, "cannot lock: %s", strerror(errno));
  dcr__detail_file(d, dir);
  close(*fd);
  *fd = -1;
  return rc;
}

typedef struct {
  const char *dir;
  int fd; /* the directory, locked */
  int sync;
  dcr__faults *faults;
  uint8_t *a, *b; /* BLOCK bytes each */
  uint64_t blocks, written;
} dirwork;

static int fail_member(dcr_detail *d, const dirwork *w, const char *path, int code,
                       const char *what) {
  dcr__detail_member(d, w->dir, path, strlen(path));
  return dcr__fail(d, code, "%s", what);
}

/* Streams src (and dst, when open): *hash is src's XXH3-64, *differs whether dst
 * has other bytes; `write` puts src's blocks that differ into dst. Memory: two
 * blocks, whatever the sizes. */
static int compare(dirwork *w, int src, int dst, uint64_t size, int write, uint64_t *hash,
                   int *differs, dcr_detail *d) {
  XXH3_state_t st;
  XXH3_INITSTATE(&st);
  XXH3_64bits_reset(&st);
  *differs = 0;
  for (uint64_t at = 0; at < size; at += BLOCK) {
    size_t n = size - at < BLOCK ? (size_t)(size - at) : BLOCK;
    int rc = dcr__pread_full(src, w->a, n, at, d);
    if (rc) return rc;
    XXH3_64bits_update(&st, w->a, n);
    if (dst < 0) continue;
    if ((rc = dcr__pread_full(dst, w->b, n, at, d))) return rc;
    if (!memcmp(w->a, w->b, n)) continue;
    *differs = 1;
    if (write && (rc = dcr__wio_write(w->faults, dst, w->a, n, at, d))) return rc;
    w->blocks += write != 0, w->written += write ? n : 0;
  }
  *hash = XXH3_64bits_digest(&st);
  return DCR_OK;
}

/* Opens dir/path as a regular file, not through a link: -1 with errno ENOENT if
 * there is none. */
static int open_member(const dirwork *w, const char *path, int flags, uint64_t *size) {
  int fd = openat(w->fd, path, flags | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd >= 0 && (fstat(fd, &st) || !S_ISREG(st.st_mode))) close(fd), fd = -1, errno = EINVAL;
  if (fd >= 0) *size = (uint64_t)st.st_size;
  return fd;
}

static int sync_parent(const dirwork *w, const char *path, dcr_detail *d) {
  if (!w->sync) return DCR_OK;
  const char *slash = strrchr(path, '/');
  char parent[DCR__JOURNAL_PATH_MAX + 1];
  snprintf(parent, sizeof parent, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
  int fd = openat(w->fd, parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return dcr__fail(d, DCR_E_IO, "cannot open %s: %s", parent, strerror(errno));
  int rc = dcr__wio_sync(w->faults, fd, d);
  close(fd);
  return rc;
}

/* One record of a committed member journal (§18.6): check only, or carry out. */
static int member_op(dirwork *w, const dcr__jrecord *r, const char *path, int check_only,
                     dcr_detail *d) {
  char staged[DCR__JOURNAL_PATH_MAX + 16];
  snprintf(staged, sizeof staged, STAGE "%s", path);
  uint64_t hash, ssize = 0, msize = 0;
  int differs, rc = DCR_OK;
  if (r->count == DCR__JOP_REMOVE) {
    if (check_only) return DCR_OK;
    if (unlinkat(w->fd, path, 0) && errno != ENOENT)
      return fail_member(d, w, path, DCR_E_IO, "cannot remove the member");
    rc = sync_parent(w, path, d);
    /* directories it leaves empty go too, as a new directory would not have them
     * (best effort: one that is not empty, or not ours to remove, stays) */
    char parent[DCR__JOURNAL_PATH_MAX + 1];
    snprintf(parent, sizeof parent, "%s", path);
    for (char *slash; !rc && (slash = strrchr(parent, '/'));) {
      *slash = 0;
      if (unlinkat(w->fd, parent, AT_REMOVEDIR)) break;
    }
    return rc;
  }
  int src = open_member(w, staged, O_RDONLY, &ssize);
  if (src < 0 && errno != ENOENT)
    return fail_member(d, w, staged, DCR_E_JOURNAL, "the staged member is not a regular file");
  if (src < 0 && r->count == DCR__JOP_PATCH)
    return fail_member(d, w, staged, DCR_E_JOURNAL, "the staged member a patch needs is gone");
  /* A replacement whose staged file is gone was renamed into place already: the
   * member must then be the staged bytes. */
  int at_member = src < 0;
  if (at_member && (src = open_member(w, path, O_RDONLY, &ssize)) < 0)
    return fail_member(d, w, path, DCR_E_JOURNAL, "neither the member nor its staged "
                       "replacement is there");
  /* a patch writes into the member: it must be there, of the size, before the
   * first record is carried out (checked here, not found missing half way) */
  int dst = r->count == DCR__JOP_PATCH ? open_member(w, path, check_only ? O_RDONLY : O_RDWR,
                                                     &msize) : -1;
  if (r->count == DCR__JOP_PATCH && (dst < 0 || msize != ssize))
    rc = fail_member(d, w, path, DCR_E_JOURNAL, "the member a patch is for is gone, not a "
                     "regular file, or of another size");
  if (!rc && check_only && ssize == r->offset)
    rc = compare(w, src, -1, ssize, 0, &hash, &differs, d);
  if (!rc && check_only && (ssize != r->offset || !DCR__CHECKSUM_OK(hash == r->region_check)))
    rc = fail_member(d, w, at_member ? path : staged, DCR_E_JOURNAL,
                     "its size or bytes are not the journal's: the journal is not for this "
                     "directory, or the directory changed");
  if (!rc && !check_only && r->count == DCR__JOP_PATCH) {
    rc = compare(w, src, dst, ssize, 1, &hash, &differs, d);
    if (!rc && w->sync) rc = dcr__wio_sync(w->faults, dst, d);
  }
  if (dst >= 0) close(dst);
  close(src);
  if (rc || check_only || r->count != DCR__JOP_REPLACE || at_member) return rc;
  int e = dcr__make_parents(w->fd, path, strlen(path));
  if (e || renameat(w->fd, staged, w->fd, path))
    return fail_member(d, w, path, DCR_E_IO, "cannot rename the staged member into place");
  w->written += ssize, w->blocks++;
  return sync_parent(w, path, d);
}

/* Every name a writer of this directory left that no published journal needs. */
static int clean(const dirwork *w, dcr_detail *d) {
  int fd = dup(w->fd);
  DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
  if (!dir) {
    if (fd >= 0) close(fd);
    return dcr__detail_file(d, w->dir), dcr__fail(d, DCR_E_IO, "cannot list: %s", strerror(errno));
  }
  rewinddir(dir);
  struct dirent *e;
  while ((e = readdir(dir)))
    if (!strncmp(e->d_name, OURS, strlen(OURS)) && strcmp(e->d_name, JOURNAL))
      dcr__remove_tree(w->fd, e->d_name);
  closedir(dir);
  return DCR_OK;
}

/* Replays a committed member journal: every record checked, then carried out;
 * then the journal goes, then the stage (in that order: a journal outlives the
 * staged files its patches read). */
static int finish(dirwork *w, int jfd, const dcr__journal *j, dcr_detail *d) {
  char path[DCR__JOURNAL_PATH_MAX + 1];
  int rc = DCR_OK;
  for (int check = 1; check >= 0 && !rc; check--)
    for (uint64_t i = 0; i < j->count && !rc; i++) {
      const dcr__jrecord *r = &j->records[i];
      rc = dcr__pread_full(jfd, path, (size_t)r->length, r->at, d);
      path[r->length] = 0;
      if (!rc) rc = member_op(w, r, path, check, d);
    }
  if (!rc && unlinkat(w->fd, JOURNAL, 0))
    rc = dcr__fail(d, DCR_E_IO, "cannot remove the journal: %s", strerror(errno));
  if (!rc && w->sync) rc = dcr__wio_sync(w->faults, w->fd, d);
  return rc ? rc : clean(w, d);
}

/* R-JNL-6, on the locked directory. */
static int recover(dirwork *w, int *outcome, dcr_detail *d) {
  *outcome = DCR_JOURNAL_NONE;
  int jfd = openat(w->fd, JOURNAL, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (jfd < 0 && errno == ENOENT) return clean(w, d);
  char where[4200];
  snprintf(where, sizeof where, "%s/" JOURNAL, w->dir);
  if (jfd < 0)
    return dcr__detail_file(d, where), dcr__fail(d, DCR_E_IO, "cannot open: %s", strerror(errno));
  dcr__journal j;
  int rc = dcr__journal_read(jfd, &j, d);
  if (!rc && !j.committed)
    rc = dcr__fail(d, DCR_E_JOURNAL, "the journal is torn or damaged (%s); a directory's "
                   "journal is whole when published, so it was damaged afterwards: restore the "
                   "directory from a copy of its base or target, then remove it", j.why);
  else if (!rc && !j.members && j.count)
    rc = dcr__fail(d, DCR_E_JOURNAL, "a file's journal (region records) in a directory");
  else if (!rc)
    rc = finish(w, jfd, &j, d);
  if (!rc) *outcome = DCR_JOURNAL_REPLAYED;
  else if (rc == DCR_E_JOURNAL) *outcome = j.foreign ? DCR__JOURNAL_FOREIGN : DCR__JOURNAL_UNUSABLE;
  if (rc == DCR_E_JOURNAL && !d->file[0]) dcr__detail_file(d, where);
  dcr__journal_free(&j);
  close(jfd);
  return rc;
}

static int work_init(dirwork *w, const char *dir, int sync, dcr__faults *faults, dcr_detail *d) {
  *w = (dirwork){.dir = dir, .fd = -1, .sync = sync, .faults = faults};
  w->a = malloc(BLOCK), w->b = malloc(BLOCK);
  if (!w->a || !w->b) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  return lock_dir(dir, &w->fd, d);
}

static void work_free(dirwork *w) {
  free(w->a), free(w->b);
  if (w->fd >= 0) close(w->fd);
}

int dcr__dir_recover(const char *dir, int sync, int *outcome, dcr_detail *d) {
  dirwork w;
  *outcome = DCR_JOURNAL_NONE;
  int rc = work_init(&w, dir, sync, NULL, d);
  if (!rc) rc = recover(&w, outcome, d);
  work_free(&w);
  return rc;
}

/* The record for member `path`: what takes it from the directory's bytes to the
 * staged ones (no record when they are equal: *op = -1). */
static int plan_member(dirwork *w, const char *path, int in_target, int in_base, int *op,
                       uint64_t *size, uint64_t *hash, dcr_detail *d) {
  char staged[DCR__JOURNAL_PATH_MAX + 16];
  snprintf(staged, sizeof staged, STAGE "%s", path);
  *op = DCR__JOP_REMOVE, *size = 0, *hash = 0;
  if (!in_target) return DCR_OK;
  uint64_t msize = 0;
  int differs = 1, rc = DCR_OK, src = open_member(w, staged, O_RDONLY, size);
  if (src < 0) return fail_member(d, w, staged, DCR_E_IO, "cannot open the staged member");
  /* a member that is a link (a Hugging Face cache's) is replaced, never written
   * through: the blob it leads to may be shared */
  int dst = in_base ? open_member(w, path, O_RDONLY, &msize) : -1;
  rc = compare(w, src, dst >= 0 && msize == *size ? dst : -1, *size, 0, hash, &differs, d);
  *op = dst < 0 || msize != *size ? DCR__JOP_REPLACE : differs ? DCR__JOP_PATCH : -1;
  if (dst >= 0) close(dst);
  close(src);
  return rc;
}

/* Steps 3 and 4 of the header comment: the journal, then its replay. */
static int journal_and_finish(dirwork *w, dcr_patch *p, const dcr__checkpoint *base,
                              dcr_detail *d) {
  const dcr__manifest *m = &p->r->man;
  char jpath[4200], path[DCR__JOURNAL_PATH_MAX + 1];
  dcr__jwriter jw = {.fd = -1};
  if ((size_t)snprintf(jpath, sizeof jpath, "%s/" JOURNAL ".tmp", w->dir) >= sizeof jpath)
    return dcr__fail(d, DCR_E_ARGUMENT, "path too long for its journal");
  jpath[strlen(jpath) - 4] = 0;
  int rc = dcr__journal_create(&jw, jpath, DCR__JOURNAL_DIRECTORY, p->r->base_state,
                               p->r->target_state, p->faults, d);
  /* both member lists are in path order (§2.3): merged, so records are too */
  for (size_t t = 0, b = 0; !rc && (t < m->member_count || b < base->member_count);) {
    const dcr__member *mt = t < m->member_count ? &m->members[t] : NULL;
    const dcr__member *mb = b < base->member_count ? &base->members[b] : NULL;
    int order = !mt ? 1 : !mb ? -1 : 0;
    if (!order) {
      size_t n = mt->path_length < mb->path_length ? mt->path_length : mb->path_length;
      order = memcmp(mt->path, mb->path, n);
      if (!order) order = (mt->path_length > mb->path_length) - (mt->path_length < mb->path_length);
    }
    const dcr__member *it = order <= 0 ? mt : mb;
    if (it->path_length > DCR__JOURNAL_PATH_MAX)
      return dcr__journal_abandon(&jw), dcr__fail(d, DCR_E_LIMIT, "member path over 4096 bytes");
    snprintf(path, sizeof path, "%.*s", (int)it->path_length, it->path);
    int op;
    uint64_t size, hash;
    rc = plan_member(w, path, order <= 0, order >= 0, &op, &size, &hash, d);
    t += order <= 0, b += order >= 0;
    if (rc || op < 0) continue;
    dcr__jrecord rec = {.offset = size, .length = it->path_length, .form = DCR__JREC_MEMBER,
                        .element_size = 1, .count = (uint32_t)op,
                        .stored_length = it->path_length, .region_check = hash};
    rc = dcr__journal_append(&jw, &rec, path, d);
  }
  if (!rc && !jw.records) { /* every member is its target already */
    p->stats.already_target = 1;
    dcr__journal_abandon(&jw);
    return clean(w, d);
  }
  if (!rc) rc = dcr__journal_commit(&jw, d);
  if (!rc) rc = dcr__journal_publish(&jw, jpath, w->sync, d);
  p->stats.journal_bytes = jw.length;
  int published = jw.published;
  dcr__journal_abandon(&jw);
  if (!published) return rc ? rc : dcr__fail(d, DCR_E_IO, "the journal was not published");
  int outcome;
  return rc ? rc : recover(w, &outcome, d);
}

int dcr__patch_dir(dcr_patch *p, const char *dir, dcr_detail *d) {
  dirwork w;
  dcr__checkpoint base = {0};
  int outcome = DCR_JOURNAL_NONE, rc = work_init(&w, dir, p->sync, p->faults, d);
  if (!rc) rc = recover(&w, &outcome, d);
  p->stats.recovered = outcome == DCR_JOURNAL_REPLAYED;
  char stage[4200];
  if (!rc && (size_t)snprintf(stage, sizeof stage, "%s/" STAGE, dir) >= sizeof stage)
    rc = dcr__fail(d, DCR_E_ARGUMENT, "path too long");
  dcr_apply_options o;
  dcr_apply_options_default(&o);
  o.threads = p->threads, o.sync = p->sync, o.cancel = p->cancel, o.no_replace = 1;
  o.progress = p->progress, o.progress_opaque = p->progress_opaque;
  if (!rc) rc = dcr_apply(p->r, dir, stage, &o, d);
  if (!rc) rc = dcr__set_read(dir, &p->r->lim, p->r->minor, 0, &base, d);
  p->stats.bytes_checked = p->r->man.data_length;
  if (!rc) rc = journal_and_finish(&w, p, &base, d);
  /* nothing published: what was staged goes (a published journal stays, and the
   * next call finishes it) */
  if (rc && w.fd >= 0 && faccessat(w.fd, JOURNAL, F_OK, AT_SYMLINK_NOFOLLOW)) clean(&w, NULL);
  p->stats.chunks_patched = w.blocks, p->stats.bytes_written = w.written;
  dcr__checkpoint_free(&base);
  work_free(&w);
  return rc;
}
