/*
 * member_files.c - the open descriptors of a set's member files (SPEC.md §2.3), a
 * bounded number at a time: a directory may hold more files than a process may
 * open (RLIMIT_NOFILE), so members are opened when used and the least recently
 * used is closed to make room. Chunks are read and written on worker threads: a
 * descriptor is pinned while a caller uses it and only unpinned ones are closed, so
 * no thread's pread or pwrite ever meets a descriptor closed (or reused) under it.
 * The lock guards the bookkeeping only: opens, fsyncs and closes run outside it.
 *
 * Reopening by name is a race that holding every file open did not have: the name
 * may lead to another file by then. So the first open records the file, and every
 * later one must find it again (SPEC.md §2.3): the same device and inode, and for a
 * member read, the same size and modification time, else DCR_E_IO.
 *
 * Written members (DCR__FILES_SYNC) are made durable once each where possible: a
 * member written to since it was opened is fsynced as it is closed, while one
 * only created (its size and prefix) is left for dcr__member_files_sync, which
 * the member's writes usually make unnecessary. So a set of more members than
 * descriptors costs an fsync per member, as one that fits does.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"

#define NONE SIZE_MAX

typedef struct {
  int fd;               /* -1: closed */
  unsigned pins;        /* callers using fd now */
  int known;            /* the file's identity is recorded */
  int dirty;            /* written to or created since its last fsync */
  int written;          /* written to since this descriptor was opened */
  size_t newer, older;  /* the list of open descriptors, by last use */
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime;
} slot;

struct dcr__member_files {
  pthread_mutex_t lock;
  int dir_fd;           /* the set's directory (not owned) */
  unsigned mode;        /* DCR__FILES_* */
  const dcr__member *members;
  size_t count, open, cap;
  size_t newest, oldest;
  int sync_error;       /* the first errno of an fsync as a descriptor closed */
  slot slots[];
};

/* An eighth of the process's descriptors, at most 64: a process may read several
 * sets at once (encode: two; apply: a base and an output) besides its own files. */
static size_t descriptor_cap(void) {
  struct rlimit rl;
  rlim_t n = getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY ? 512 : rl.rlim_cur;
  n /= 8;
  return n < 2 ? 2 : n > 64 ? 64 : (size_t)n;
}

int dcr__member_files_new(dcr__member_files **out, int dir_fd, const dcr__member *members,
                          size_t count, unsigned mode, dcr_detail *d) {
  dcr__member_files *f = calloc(1, sizeof *f + count * sizeof f->slots[0]);
  if (!(*out = f)) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate %zu member descriptors", count);
  pthread_mutex_init(&f->lock, NULL);
  f->dir_fd = dir_fd;
  f->mode = mode;
  f->members = members;
  f->count = count;
  f->cap = descriptor_cap();
  f->newest = f->oldest = NONE;
  for (size_t i = 0; i < count; i++) f->slots[i].fd = -1;
  return DCR_OK;
}

static void unlink_slot(dcr__member_files *f, size_t i) {
  slot *s = &f->slots[i];
  if (s->newer != NONE) f->slots[s->newer].older = s->older;
  else f->newest = s->older;
  if (s->older != NONE) f->slots[s->older].newer = s->newer;
  else f->oldest = s->newer;
}

static void push_newest(dcr__member_files *f, size_t i) {
  slot *s = &f->slots[i];
  s->newer = NONE;
  s->older = f->newest;
  if (f->newest != NONE) f->slots[f->newest].newer = i;
  else f->oldest = i;
  f->newest = i;
}

/* With the lock held: takes the least recently used descriptor that nobody is
 * using out of the cache, for retire(); -1 if every open one is pinned. */
static int detach_oldest(dcr__member_files *f, int *needs_sync) {
  for (size_t i = f->oldest; i != NONE; i = f->slots[i].newer) {
    slot *s = &f->slots[i];
    if (s->pins) continue;
    int fd = s->fd;
    *needs_sync = (f->mode & DCR__FILES_SYNC) && s->written;
    if (*needs_sync) s->dirty = 0; /* retire's fsync covers every write so far */
    s->written = 0;
    s->fd = -1;
    unlink_slot(f, i);
    f->open--;
    return fd;
  }
  return -1;
}

/* Without the lock: closes a detached descriptor, fsynced first if it was written. */
static void retire(dcr__member_files *f, int fd, int needs_sync) {
  int e = needs_sync && fsync(fd) ? errno : 0;
  close(fd);
  if (!e) return;
  pthread_mutex_lock(&f->lock);
  if (!f->sync_error) f->sync_error = e;
  pthread_mutex_unlock(&f->lock);
}

/* Without the lock: frees one descriptor of the cache's; 0 if none is free. */
static int make_room(dcr__member_files *f) {
  int needs_sync;
  pthread_mutex_lock(&f->lock);
  int fd = detach_oldest(f, &needs_sync);
  pthread_mutex_unlock(&f->lock);
  if (fd >= 0) retire(f, fd, needs_sync);
  return fd >= 0;
}

/* Without the lock: opens member i, to create it (first) or as it was created. */
static int open_member(dcr__member_files *f, size_t i, int first, int *out, struct stat *st,
                       dcr_detail *d) {
  const dcr__member *m = &f->members[i];
  char path[PATH_MAX];
  if (m->path_length >= sizeof path) return dcr__fail(d, DCR_E_IO, "cannot open: %s", strerror(ENAMETOOLONG));
  memcpy(path, m->path, m->path_length);
  path[m->path_length] = '\0';
  /* A member read follows links (§2.3: the Hugging Face cache links snapshot files
   * to blobs); a member written is a file made here, never a link. */
  int flags = !(f->mode & DCR__FILES_WRITE) ? O_RDONLY | O_CLOEXEC
              : first ? O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_CREAT | O_EXCL
                      : O_RDWR | O_NOFOLLOW | O_CLOEXEC;
  int fd;
  while ((fd = openat(f->dir_fd, path, flags, 0666)) < 0 &&
         (errno == EINTR || ((errno == EMFILE || errno == ENFILE) && make_room(f)))) {}
  if (fd < 0) return dcr__fail(d, DCR_E_IO, "cannot open: %s", strerror(errno));
  if (fstat(fd, st)) {
    int e = errno;
    close(fd);
    return dcr__fail(d, DCR_E_IO, "cannot stat: %s", strerror(e));
  }
  *out = fd;
  return DCR_OK;
}

/* With the lock held: whether st is the file that member i's first open found. */
static int same_file(const dcr__member_files *f, const slot *s, const struct stat *st) {
  if (st->st_dev != s->dev || st->st_ino != s->ino) return 0;
  return (f->mode & DCR__FILES_WRITE) ||
         (st->st_size == s->size && st->st_mtim.tv_sec == s->mtime.tv_sec &&
          st->st_mtim.tv_nsec == s->mtime.tv_nsec);
}

int dcr__member_files_get(dcr__member_files *f, size_t i, int *fd, dcr_detail *d) {
  slot *s = &f->slots[i];
  int rc = DCR_OK, creating = 0;
  pthread_mutex_lock(&f->lock);
  while (s->fd < 0) {
    int needs_sync, old = f->open >= f->cap ? detach_oldest(f, &needs_sync) : -1;
    creating = (f->mode & DCR__FILES_WRITE) && !s->known;
    pthread_mutex_unlock(&f->lock);
    if (old >= 0) {
      retire(f, old, needs_sync);
      pthread_mutex_lock(&f->lock);
      continue;
    }
    int opened;
    struct stat st;
    rc = open_member(f, i, creating, &opened, &st, d);
    pthread_mutex_lock(&f->lock);
    if (rc) break;
    if (s->fd >= 0) { /* another thread opened it meanwhile: theirs serves */
      close(opened);
      break;
    }
    if (s->known && !same_file(f, s, &st)) {
      close(opened);
      rc = dcr__fail(d, DCR_E_IO, "the member was replaced or modified while the set was "
                     "being read (another file, size or modification time)");
      break;
    }
    if (!s->known)
      s->known = 1, s->dev = st.st_dev, s->ino = st.st_ino, s->size = st.st_size, s->mtime = st.st_mtim;
    s->fd = opened;
    f->open++;
    push_newest(f, i);
  }
  if (!rc) {
    unlink_slot(f, i), push_newest(f, i);
    s->pins++;
    if (f->mode & DCR__FILES_WRITE) s->dirty = 1, s->written |= !creating;
    *fd = s->fd;
  }
  pthread_mutex_unlock(&f->lock);
  return rc;
}

void dcr__member_files_put(dcr__member_files *f, size_t i) {
  pthread_mutex_lock(&f->lock);
  f->slots[i].pins--;
  pthread_mutex_unlock(&f->lock);
}

int dcr__member_files_sync(dcr__member_files *f, dcr_detail *d) {
  int rc = DCR_OK, e = f->sync_error;
  for (size_t i = 0; !rc && !e && i < f->count; i++) {
    int fd;
    if (!f->slots[i].dirty || (rc = dcr__member_files_get(f, i, &fd, d))) continue;
    if (fsync(fd)) e = errno;
    f->slots[i].dirty = f->slots[i].written = 0;
    dcr__member_files_put(f, i);
  }
  return e ? dcr__fail(d, DCR_E_IO, "cannot write a member to disk: %s", strerror(e)) : rc;
}

void dcr__member_files_free(dcr__member_files *f) {
  if (!f) return;
  for (size_t i = 0; i < f->count; i++)
    if (f->slots[i].fd >= 0) close(f->slots[i].fd);
  pthread_mutex_destroy(&f->lock);
  free(f);
}
