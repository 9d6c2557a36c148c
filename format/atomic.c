/*
 * atomic.c - outputs that appear whole or not at all (atomic.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/random.h>
#endif

#include "atomic.h"

/* ".dcr-" and six characters from [A-Za-z0-9]: short, so that a destination name
 * near NAME_MAX never makes the temporary name too long. */
static void hidden_name(char out[32]) {
  static const char set[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  static unsigned long counter;
  unsigned char r[6] = {0};
#ifdef __linux__
  if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
#endif
  {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    unsigned long x = (unsigned long)t.tv_nsec ^ (unsigned long)getpid() << 16 ^ ++counter * 2654435761u;
    for (size_t i = 0; i < sizeof r; i++, x /= 62) r[i] = (unsigned char)(r[i] ^ x);
  }
  memcpy(out, ".dcr-", 5);
  for (size_t i = 0; i < sizeof r; i++) out[5 + i] = set[r[i] % 62];
  out[11] = 0;
}

static void human(uint64_t n, char out[32]) {
  static const char *unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (n < 1024) {
    snprintf(out, 32, "%llu bytes", (unsigned long long)n);
    return;
  }
  double v = (double)n;
  unsigned u = 0;
  while (v >= 1024 && u < 6) v /= 1024, u++;
  snprintf(out, 32, "%.1f %s", v, unit[u]);
}

static int fail(dcr__atomic *a, dcr_detail *d, const char *what, int err) {
  int rc = dcr__fail(d, DCR_E_IO, "%s: %s", what, strerror(err));
  dcr__detail_file(d, a->dest);
  return rc;
}

int dcr__atomic_open(dcr__atomic *a, const char *dest, unsigned flags, dcr_detail *d) {
  if (d) dcr__detail_init(d); /* the CLI's callers report whatever it holds */
  *a = (dcr__atomic){.fd = -1, .dir_fd = -1, .flags = flags, .dest = dest};
  const char *slash = strrchr(dest, '/');
  a->name = slash ? slash + 1 : dest;
  if (!*a->name || !strcmp(a->name, ".") || !strcmp(a->name, ".."))
    return dcr__fail(d, DCR_E_ARGUMENT, "output path names a directory"),
           dcr__detail_file(d, dest), DCR_E_ARGUMENT;
  char *dir = slash ? strndup(dest, slash == dest ? 1 : (size_t)(slash - dest)) : strdup(".");
  if (!dir) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  a->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  free(dir);
  if (a->dir_fd < 0) return fail(a, d, "cannot open the output's directory", errno);
  struct stat old;
  /* A symbolic link at dest is replaced by the file, not followed: its target is
   * left alone, and its mode is not the new file's. */
  if (fstatat(a->dir_fd, a->name, &old, AT_SYMLINK_NOFOLLOW) == 0) {
    if (!(flags & DCR__ATOMIC_REPLACE))
      return dcr__atomic_abort(a), fail(a, d, "cannot create the output", EEXIST);
    if (S_ISDIR(old.st_mode))
      return dcr__atomic_abort(a), fail(a, d, "cannot create the output", EISDIR);
    a->had_old = S_ISREG(old.st_mode);
  }
#ifdef O_TMPFILE
  /* Mode 0666: open() itself applies the umask (or the directory's default ACL). */
  if (!(flags & DCR__ATOMIC_NAMED))
    a->fd = openat(a->dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0666);
  if (a->fd >= 0) {
    /* Committing links it by /proc/self/fd (AT_EMPTY_PATH needs a privilege): no
     * /proc, no nameless file. */
    char link_path[64];
    snprintf(link_path, sizeof link_path, "/proc/self/fd/%d", a->fd);
    if (access(link_path, F_OK) == 0) a->unnamed = 1;
    else close(a->fd), a->fd = -1;
  }
#endif
  for (int tries = 0; a->fd < 0 && tries < 100; tries++) {
    hidden_name(a->tmp_name);
    a->fd = openat(a->dir_fd, a->tmp_name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (a->fd < 0 && errno != EEXIST) break;
  }
  if (a->fd < 0) {
    int err = errno;
    a->tmp_name[0] = 0;
    dcr__atomic_abort(a);
    return fail(a, d, "cannot create a temporary file beside the output", err);
  }
  if (a->had_old) { /* best effort: owner first, as chown may clear mode bits */
    if (fchown(a->fd, old.st_uid, old.st_gid)) (void)0;
    if (fchmod(a->fd, old.st_mode & 07777)) (void)0;
  }
  return DCR_OK;
}

int dcr__atomic_check_space(const dcr__atomic *a, uint64_t bytes, dcr_detail *d) {
  return dcr__check_space(a->fd, bytes, a->dest, d);
}

int dcr__check_space(int fd, uint64_t bytes, const char *dest, dcr_detail *d) {
  struct statvfs v;
  if (fstatvfs(fd, &v) || !v.f_frsize) return DCR_OK; /* the filesystem does not say */
  uint64_t avail = (uint64_t)v.f_bavail;
  avail = avail > UINT64_MAX / v.f_frsize ? UINT64_MAX : avail * v.f_frsize;
  if (avail >= bytes) return DCR_OK;
  char need[32], have[32];
  human(bytes, need);
  human(avail, have);
  dcr__fail(d, DCR_E_IO, "not enough space for the output: needs %s, %s free", need, have);
  dcr__detail_file(d, dest);
  return DCR_E_IO;
}

#ifdef O_TMPFILE
static int link_unnamed(dcr__atomic *a, const char *name) {
  char link_path[64];
  snprintf(link_path, sizeof link_path, "/proc/self/fd/%d", a->fd);
  return linkat(AT_FDCWD, link_path, a->dir_fd, name, AT_SYMLINK_FOLLOW) ? errno : 0;
}
#endif

/* The hidden temporary name to dest's name, never over a file there. */
static int rename_noreplace(dcr__atomic *a) {
#ifdef RENAME_NOREPLACE
  if (!renameat2(a->dir_fd, a->tmp_name, a->dir_fd, a->name, RENAME_NOREPLACE)) return 0;
  if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) return errno;
#endif
  /* link() never replaces either; a filesystem without hard links (FAT) gets a
   * checked rename, which a file created in between can lose to. */
  if (!linkat(a->dir_fd, a->tmp_name, a->dir_fd, a->name, 0)) {
    unlinkat(a->dir_fd, a->tmp_name, 0);
    return 0;
  }
  if (errno != EPERM && errno != EOPNOTSUPP && errno != ENOSYS) return errno;
  struct stat st;
  if (!fstatat(a->dir_fd, a->name, &st, AT_SYMLINK_NOFOLLOW)) return EEXIST;
  return renameat(a->dir_fd, a->tmp_name, a->dir_fd, a->name) ? errno : 0;
}

int dcr__atomic_commit(dcr__atomic *a, dcr_detail *d) {
  int err = 0;
  const char *what = "cannot put the output in place";
  if ((a->flags & DCR__ATOMIC_SYNC) && fsync(a->fd)) err = errno, what = "fsync failed";
#ifdef O_TMPFILE
  if (!err && a->unnamed) {
    if (!(a->flags & DCR__ATOMIC_REPLACE)) {
      err = link_unnamed(a, a->name);
    } else { /* a link cannot replace: give it a hidden name, then rename that */
      for (int tries = 0; tries < 100; tries++) {
        hidden_name(a->tmp_name);
        if ((err = link_unnamed(a, a->tmp_name)) != EEXIST) break;
      }
      if (err) a->tmp_name[0] = 0;
      else if (renameat(a->dir_fd, a->tmp_name, a->dir_fd, a->name)) err = errno;
      else a->tmp_name[0] = 0;
    }
    if (err == EEXIST && !(a->flags & DCR__ATOMIC_REPLACE))
      what = "cannot create the output (a file appeared there meanwhile)";
  } else
#endif
  if (!err) {
    if (!(a->flags & DCR__ATOMIC_REPLACE)) err = rename_noreplace(a);
    else if (renameat(a->dir_fd, a->tmp_name, a->dir_fd, a->name)) err = errno;
    if (err == EEXIST) what = "cannot create the output (a file appeared there meanwhile)";
    if (!err) a->tmp_name[0] = 0;
  }
  if (err) return dcr__atomic_abort(a), fail(a, d, what, err);
  int fd = a->fd;
  a->fd = -1;
  if (close(fd)) err = errno, what = "close failed";
  /* The rename is durable once the directory is. Some filesystems cannot sync a
   * directory (EINVAL): nothing more can be done there. */
  if (!err && (a->flags & DCR__ATOMIC_SYNC) && fsync(a->dir_fd) && errno != EINVAL &&
      errno != EROFS)
    err = errno, what = "fsync of the output's directory failed";
  close(a->dir_fd);
  a->dir_fd = -1;
  return err ? fail(a, d, what, err) : DCR_OK;
}

void dcr__atomic_abort(dcr__atomic *a) {
  if (a->fd >= 0) close(a->fd);
  if (a->tmp_name[0] && a->dir_fd >= 0) unlinkat(a->dir_fd, a->tmp_name, 0);
  if (a->dir_fd >= 0) close(a->dir_fd);
  a->fd = a->dir_fd = -1;
  a->tmp_name[0] = 0;
}

int dcr__file_sink_write(void *opaque, const void *data, size_t size) {
  dcr__file_sink *f = opaque;
  dcr_detail d;
  dcr__detail_init(&d);
  if (dcr__pwrite_full(f->out.fd, data, size, f->at, &d)) return f->error = errno ? errno : EIO, -1;
  f->at += size;
  return 0;
}
