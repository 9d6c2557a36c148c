/*
 * set_output.c - a checkpoint set written as a directory that appears whole or not
 * at all (SPEC.md §10.1 step 5, R-APL-4): the members are written into a hidden
 * directory beside the destination, ".dcr-XXXXXX", which is then renamed into
 * place, or, to replace an older set, exchanged with it (renameat2
 * RENAME_EXCHANGE) before the old one is removed. A reader that opens files under
 * the destination sees the old set or the new one, never a mix; a crash leaves the
 * old set and a hidden directory that the next apply does not read (§2.3: hidden
 * files are not members) and that can be deleted.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>

#include "set_output.h"

void dcr__remove_tree(int dir_fd, const char *name) {
  if (!unlinkat(dir_fd, name, 0) || (errno != EISDIR && errno != EPERM)) return;
  int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
  struct dirent *e;
  while (dir && (e = readdir(dir))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    dcr__remove_tree(fd, e->d_name);
  }
  if (dir) closedir(dir);
  else if (fd >= 0) close(fd);
  unlinkat(dir_fd, name, AT_REMOVEDIR);
}

static int fail_errno(dcr__set_output *o, const char *what, dcr_detail *d) {
  int e = errno;
  dcr__detail_file(d, o->dest);
  return dcr__fail(d, DCR_E_IO, "%s: %s", what, strerror(e));
}

int dcr__make_parents(int root, const char *p, size_t n) {
  char path[8192];
  if (n >= sizeof path) return ENAMETOOLONG;
  memcpy(path, p, n);
  path[n] = '\0';
  for (char *s = strchr(path, '/'); s; s = strchr(s + 1, '/')) {
    *s = '\0';
    if (mkdirat(root, path, 0777) && errno != EEXIST) return errno;
    *s = '/';
  }
  return 0;
}

int dcr__set_output_open(dcr__set_output *o, const char *dest, const dcr__member *members,
                         size_t count, unsigned flags, dcr_detail *d) {
  memset(o, 0, sizeof *o);
  o->dir_fd = o->root_fd = -1;
  o->dest = dest;
  o->flags = flags;
  o->members = members;
  o->count = count;
  /* the parent directory and the last component, as atomic.c splits a file's */
  size_t n = strlen(dest);
  while (n > 1 && dest[n - 1] == '/') n--;
  const char *slash = NULL;
  for (size_t i = 0; i < n; i++)
    if (dest[i] == '/') slash = dest + i;
  char parent[4096];
  snprintf(parent, sizeof parent, "%.*s", slash ? (int)(slash == dest ? 1 : slash - dest) : 1,
           slash ? dest : ".");
  snprintf(o->name, sizeof o->name, "%.*s", (int)(n - (slash ? (size_t)(slash - dest) + 1 : 0)),
           slash ? slash + 1 : dest);
  if (!o->name[0] || !strcmp(o->name, ".") || !strcmp(o->name, ".."))
    return dcr__detail_file(d, dest),
           dcr__fail(d, DCR_E_ARGUMENT, "the output must name a new directory");
  if ((o->dir_fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
    return fail_errno(o, "cannot open the output's parent directory", d);
  struct stat st;
  if (!fstatat(o->dir_fd, o->name, &st, AT_SYMLINK_NOFOLLOW)) {
    if (!(flags & DCR__ATOMIC_REPLACE)) {
      dcr__set_output_abort(o);
      return dcr__detail_file(d, dest), dcr__fail(d, DCR_E_IO, "exists (use -f to replace it)");
    }
    if (!S_ISDIR(st.st_mode)) {
      dcr__set_output_abort(o);
      return dcr__detail_file(d, dest),
             dcr__fail(d, DCR_E_IO, "exists and is not a directory: a set's output is one");
    }
    o->had_old = 1;
  }
  /* mkdtemp would make it 0700; mkdirat gives 0777 less the umask, as mkdir(1) */
  int made = -1;
  for (int tries = 0; made && tries < 100; tries++) {
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) r ^= (uint64_t)getpid() << 20 ^ (uint64_t)tries;
    snprintf(o->tmp_name, sizeof o->tmp_name, ".dcr-%06llx", (unsigned long long)(r & 0xffffff));
    made = mkdirat(o->dir_fd, o->tmp_name, 0777);
    if (made && errno != EEXIST) break;
  }
  if (made) {
    int rc = fail_errno(o, "cannot create a temporary directory beside the output", d);
    return dcr__set_output_abort(o), rc;
  }
  o->created = 1;
  if (o->had_old) fchmodat(o->dir_fd, o->tmp_name, st.st_mode & 07777, 0); /* keep its mode */
  o->root_fd = openat(o->dir_fd, o->tmp_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (o->root_fd < 0) {
    int rc = fail_errno(o, "cannot open the temporary directory", d);
    return dcr__set_output_abort(o), rc;
  }
  unsigned mode = DCR__FILES_WRITE | (flags & DCR__ATOMIC_SYNC ? DCR__FILES_SYNC : 0);
  int rc = dcr__member_files_new(&o->files, o->root_fd, members, count, mode, d);
  if (rc) dcr__set_output_abort(o);
  return rc;
}

int dcr__set_output_check_space(const dcr__set_output *o, uint64_t bytes, dcr_detail *d) {
  return dcr__check_space(o->root_fd, bytes, o->dest, d);
}

int dcr__set_output_create(dcr__set_output *o, dcr_detail *d) {
  for (size_t i = 0; i < o->count; i++) {
    const dcr__member *m = &o->members[i];
    char path[8192];
    snprintf(path, sizeof path, "%.*s", (int)m->path_length, m->path);
    int fd = -1, e = dcr__make_parents(o->root_fd, m->path, m->path_length);
    int rc = e ? DCR_E_IO : dcr__member_files_get(o->files, i, &fd, d); /* creates it */
    uint64_t size = m->prefix_length + m->data_length;
    if (!rc && size > (uint64_t)INT64_MAX) e = EFBIG;
    if (!rc && !e && ftruncate(fd, (off_t)size)) e = errno; /* zeros stay holes */
    if (!rc && !e && m->prefix_length)
      rc = dcr__pwrite_full(fd, m->prefix, (size_t)m->prefix_length, 0, d);
    if (fd >= 0) dcr__member_files_put(o->files, i);
    if (rc || e) {
      dcr__detail_member(d, o->dest, path, strlen(path));
      return e ? dcr__fail(d, DCR_E_IO, "cannot create a member: %s", strerror(e)) : rc;
    }
  }
  return DCR_OK;
}

int dcr__set_output_write(const dcr__set_output *o, uint64_t at, const void *p, size_t n,
                          dcr_detail *d) {
  const dcr__member *m = dcr__set_member_at(o->members, o->count, at);
  if (!m || at - m->start + n > m->data_length)
    return dcr__fail(d, DCR_E_IO, "write at %llu is outside the set's members",
                     (unsigned long long)at);
  size_t i = (size_t)(m - o->members);
  int fd, rc = dcr__member_files_get(o->files, i, &fd, d);
  if (!rc) {
    rc = dcr__pwrite_full(fd, p, n, m->prefix_length + (at - m->start), d);
    dcr__member_files_put(o->files, i);
  }
  if (rc) dcr__detail_member(d, o->dest, m->path, m->path_length);
  return rc;
}

/* fsync every member and every directory of the temporary tree. */
static int sync_tree(int fd) {
  DIR *dir = fdopendir(dup(fd));
  struct dirent *e;
  int rc = dir ? 0 : errno;
  while (!rc && dir && (e = readdir(dir))) {
    if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
    int sub = openat(fd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub >= 0) rc = sync_tree(sub), close(sub);
  }
  if (dir) closedir(dir);
  return rc ? rc : fsync(fd) ? errno : 0;
}

/* After the exchange, whether what was at dest (now at tmp_name) is a directory. */
static int replaced_a_directory(const dcr__set_output *o) {
  struct stat st;
  return !fstatat(o->dir_fd, o->tmp_name, &st, AT_SYMLINK_NOFOLLOW) && S_ISDIR(st.st_mode);
}

int dcr__set_output_commit(dcr__set_output *o, dcr_detail *d) {
  int rc = o->flags & DCR__ATOMIC_SYNC ? dcr__member_files_sync(o->files, d) : DCR_OK;
  int e = !rc && (o->flags & DCR__ATOMIC_SYNC) ? sync_tree(o->root_fd) : 0;
  if (rc || e) {
    if (e) errno = e, rc = fail_errno(o, "cannot write the output to disk", d);
    else dcr__detail_file(d, o->dest);
    return dcr__set_output_abort(o), rc;
  }
  if (!o->had_old) {
    if (renameat2(o->dir_fd, o->tmp_name, o->dir_fd, o->name, RENAME_NOREPLACE))
      rc = errno == EEXIST ? (dcr__detail_file(d, o->dest),
                              dcr__fail(d, DCR_E_IO, "exists: it appeared during the apply"))
                           : fail_errno(o, "cannot rename the new set into place", d);
  } else if (renameat2(o->dir_fd, o->tmp_name, o->dir_fd, o->name, RENAME_EXCHANGE)) {
    rc = fail_errno(o, "cannot exchange the new set with the old one", d);
  } else if (!replaced_a_directory(o) &&
             !renameat2(o->dir_fd, o->tmp_name, o->dir_fd, o->name, RENAME_EXCHANGE)) {
    /* dest became what open refuses (a link, say) during the apply: it is put
     * back, and the new set, at tmp_name again, goes with the abort */
    rc = (dcr__detail_file(d, o->dest),
          dcr__fail(d, DCR_E_IO, "was replaced during the apply by what is not a directory "
                    "(a link?): left as it was, nothing written"));
  } else {
    o->created = 0;
    dcr__remove_tree(o->dir_fd, o->tmp_name); /* now the old set (or what could not be put back) */
  }
  if (!rc) o->created = 0;
  if (!rc && (o->flags & DCR__ATOMIC_SYNC) && fsync(o->dir_fd))
    rc = fail_errno(o, "cannot write the directory to disk", d);
  dcr__set_output_abort(o);
  return rc;
}

void dcr__set_output_abort(dcr__set_output *o) {
  dcr__member_files_free(o->files);
  o->files = NULL;
  if (o->root_fd >= 0) close(o->root_fd);
  o->root_fd = -1;
  if (o->created) dcr__remove_tree(o->dir_fd, o->tmp_name);
  o->created = 0;
  if (o->dir_fd >= 0) close(o->dir_fd);
  o->dir_fd = -1;
}
