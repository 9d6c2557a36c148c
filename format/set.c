/*
 * set.c - checkpoint sets (SPEC.md §2.3, format 1.1): a model directory read as one
 * checkpoint. Its members are the regular files under it that are not hidden;
 * *.safetensors members are parsed as checkpoints, the others are raw members whose
 * whole bytes are one U8 tensor named by the path. Coordinates are a file's: the
 * set's prefix is its set table (§6.6), and its data region is the members' data
 * regions in path order, so the codec reads a set as it reads a file
 * (dcr__checkpoint_pread).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <unistd.h>

#include "checkpoint.h"

#define DTYPE_U8 2 /* SPEC.md §3 */
#define INDEX_SUFFIX ".safetensors.index.json"
#define SAFETENSORS_SUFFIX ".safetensors"

static int ends_with(const char *s, size_t n, const char *suffix) {
  size_t k = strlen(suffix);
  return n >= k && !memcmp(s + n - k, suffix, k);
}

int dcr__set_member_kind(const char *path, size_t n) {
  return ends_with(path, n, SAFETENSORS_SUFFIX) ? DCR_KIND_SAFETENSORS : DCR_KIND_RAW;
}

int dcr__set_path_valid(const char *path, size_t n) {
  if (!n || !dcr__utf8_valid((const uint8_t *)path, n) || memchr(path, '\\', n)) return 0;
  for (size_t i = 0; i < n;) { /* components: non-empty, not starting with '.' */
    if (path[i] == '/' || path[i] == '.') return 0;
    const char *slash = memchr(path + i, '/', n - i);
    if (!slash) return 1;
    i = (size_t)(slash - path) + 1;
    if (i == n) return 0; /* a trailing '/' */
  }
  return 1;
}

/* ---- the directory walk */

/* An entry met by the walk: a member, or a file that cannot be one (`why`, with
 * its code). Failures are reported in path order once the walk is done, so that
 * the answer does not depend on the order readdir returns entries in. */
typedef struct {
  char *path;
  const char *why;
  int code;
} found;

typedef struct {
  found *entries;
  size_t count, capacity;
  const char *root;
  const dcr_limits *lim;
  dcr_detail *d;
} walk;

static int add_path(walk *w, const char *path, int code, const char *why) {
  if (w->count == w->capacity) {
    size_t cap = w->capacity ? 2 * w->capacity : 64;
    found *p = realloc(w->entries, cap * sizeof *p);
    if (!p) return dcr__fail(w->d, DCR_E_NOMEM, "cannot allocate the member list");
    w->entries = p, w->capacity = cap;
  }
  if (w->count > w->lim->max_tensors) /* one over: enough to report it, bounded */
    return DCR_OK;
  if (!(w->entries[w->count].path = strdup(path)))
    return dcr__fail(w->d, DCR_E_NOMEM, "cannot allocate");
  w->entries[w->count].why = why;
  w->entries[w->count++].code = code;
  return DCR_OK;
}

/* The walk's queue of directories still to read, as paths relative to the root. */
typedef struct {
  char **paths;
  size_t count, capacity;
} queue;

static int enqueue(queue *q, const char *path, dcr_detail *d) {
  if (q->count == q->capacity) {
    size_t cap = q->capacity ? 2 * q->capacity : 16;
    char **p = realloc(q->paths, cap * sizeof *p);
    if (!p) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate the directory list");
    q->paths = p, q->capacity = cap;
  }
  if (!(q->paths[q->count] = strdup(path))) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  q->count++;
  return DCR_OK;
}

/* One entry of the directory open at dirfd (`rel` its path): recorded as a member,
 * as a file that cannot be one, or queued as a directory to read. */
static int visit(walk *w, queue *q, int dirfd, const char *rel, const char *name, char *path,
                 size_t cap) {
  int n = snprintf(path, cap, "%s%s%s", rel, *rel ? "/" : "", name);
  if (n < 0 || (size_t)n >= cap || (uint64_t)n > w->lim->max_name_length)
    return add_path(w, n > 0 && (size_t)n < cap ? path : name, DCR_E_LIMIT,
                    "path over max_name_length");
  struct stat st, lst;
  if (!dcr__utf8_valid((const uint8_t *)path, (size_t)n) || strchr(path, '\\'))
    return add_path(w, path, DCR_E_CHECKPOINT, "file name is not UTF-8 or has a '\\': it "
                    "cannot be a member path");
  if (fstatat(dirfd, name, &lst, AT_SYMLINK_NOFOLLOW)) return add_path(w, path, DCR_E_CHECKPOINT, "cannot stat");
  if (fstatat(dirfd, name, &st, 0))
    return add_path(w, path, DCR_E_CHECKPOINT, "symbolic link that leads nowhere");
  if (S_ISDIR(st.st_mode) && S_ISLNK(lst.st_mode))
    return add_path(w, path, DCR_E_CHECKPOINT, "symbolic link to a directory: not followed "
                    "(copy or move the directory in, or read it as its own set)");
  if (S_ISDIR(st.st_mode)) return enqueue(q, path, w->d);
  if (S_ISREG(st.st_mode)) return add_path(w, path, DCR_OK, NULL);
  return add_path(w, path, DCR_E_CHECKPOINT, "neither a regular file nor a directory (a pipe, "
                  "socket or device)");
}

/* Walks the tree under root_fd one directory at a time, from a queue: however deep
 * the tree, it costs neither stack nor more than one open descriptor. Directories
 * are opened with openat below the root, so that the paths recorded are the ones
 * read. Only I/O and memory failures stop it. */
static int walk_tree(walk *w, int root_fd) {
  /* a path is at most max_name_length bytes (names are u16-long) plus one name */
  size_t cap = (size_t)(w->lim->max_name_length < UINT16_MAX ? w->lim->max_name_length
                                                               : UINT16_MAX) + 258;
  char *path = malloc(cap);
  queue q = {0};
  int rc = path ? enqueue(&q, "", w->d) : dcr__fail(w->d, DCR_E_NOMEM, "cannot allocate");
  for (size_t k = 0; !rc && k < q.count; k++) {
    const char *rel = q.paths[k];
    int fd = *rel ? openat(root_fd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                  : dup(root_fd);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dir) {
      if (fd >= 0) close(fd);
      rc = *rel ? add_path(w, rel, DCR_E_CHECKPOINT, "cannot open the directory")
                : dcr__fail(w->d, DCR_E_IO, "cannot read the directory: %s", strerror(errno));
      continue;
    }
    struct dirent *e;
    while (!rc && (errno = 0, e = readdir(dir)))
      if (e->d_name[0] != '.') /* hidden, ".", ".." (§2.3) */
        rc = visit(w, &q, dirfd(dir), rel, e->d_name, path, cap);
    if (!rc && errno)
      rc = dcr__fail(w->d, DCR_E_IO, "cannot read the directory: %s", strerror(errno));
    closedir(dir);
  }
  for (size_t k = 0; k < q.count; k++) free(q.paths[k]);
  free(q.paths);
  free(path);
  return rc;
}

static int by_path(const void *a, const void *b) {
  return strcmp(((const found *)a)->path, ((const found *)b)->path); /* bytewise: strcmp is */
}

/* The walk's verdict, in path order: the first entry that cannot be a member,
 * then the member count. */
static int check_walk(const walk *w) {
  for (size_t i = 0; i < w->count; i++)
    if (w->entries[i].why) {
      dcr__detail_member(w->d, w->root, w->entries[i].path, strlen(w->entries[i].path));
      return dcr__fail(w->d, w->entries[i].code, "%s", w->entries[i].why);
    }
  if (w->count > w->lim->max_tensors) {
    dcr__detail_file(w->d, w->root);
    return dcr__fail(w->d, DCR_E_LIMIT, "more than %llu members",
                     (unsigned long long)w->lim->max_tensors);
  }
  return DCR_OK;
}

/* ---- one tensor list */

typedef struct {
  dcr__tensor t;
  size_t member;
} owned;

static int by_name(const void *a, const void *b) {
  const owned *x = a, *y = b;
  return dcr__name_cmp(x->t.name, x->t.name_length, y->t.name, y->t.name_length);
}

/* ---- the index files (§2.3, a writer's check) */

static const dcr__tensor *find_tensor(const dcr__checkpoint *c, const char *name, size_t n,
                                      size_t *at) {
  size_t lo = 0, hi = c->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int k = dcr__name_cmp(c->tensors[mid].name, c->tensors[mid].name_length, name, n);
    if (!k) return *at = mid, &c->tensors[mid];
    if (k < 0) lo = mid + 1;
    else hi = mid;
  }
  return NULL;
}

static int index_fail(const dcr__checkpoint *c, const dcr__member *ix, dcr_detail *d,
                      const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int index_fail(const dcr__checkpoint *c, const dcr__member *ix, dcr_detail *d,
                      const char *fmt, ...) {
  char message[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  dcr__detail_member(d, c->root, ix->path, ix->path_length);
  return dcr__fail(d, DCR_E_CHECKPOINT, "%s", message);
}

static int check_index(const dcr__checkpoint *c, const size_t *member_of, const dcr__member *ix,
                       const dcr_limits *lim, dcr_detail *d) {
  if (ix->data_length > lim->max_header_size)
    return index_fail(c, ix, d, "index file of more than max_header_size bytes");
  char *text = malloc((size_t)ix->data_length + 1);
  if (!text) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate the index file");
  size_t member = (size_t)(ix - c->members);
  int fd, rc = dcr__member_files_get(c->files, member, &fd, d);
  if (!rc) {
    rc = dcr__pread_full(fd, text, (size_t)ix->data_length, 0, d);
    dcr__member_files_put(c->files, member);
  }
  json_error_t e;
  json_t *root = rc ? NULL : json_loadb(text, (size_t)ix->data_length, JSON_REJECT_DUPLICATES, &e);
  free(text);
  if (rc) return rc;
  json_t *map = json_object_get(root, "weight_map");
  if (!json_is_object(map)) {
    json_decref(root);
    return index_fail(c, ix, d, "not a safetensors index: no \"weight_map\" object");
  }
  /* shard names are relative to the index's directory */
  size_t dir_length = 0;
  for (size_t i = 0; i < ix->path_length; i++)
    if (ix->path[i] == '/') dir_length = i + 1;
  const char *name;
  json_t *shard;
  char want[8192];
  json_object_foreach(map, name, shard) {
    size_t at = 0;
    const dcr__tensor *t = find_tensor(c, name, strlen(name), &at);
    snprintf(want, sizeof want, "%.*s%s", (int)dir_length, ix->path,
             json_is_string(shard) ? json_string_value(shard) : "");
    if (!t || t->raw_member) {
      rc = index_fail(c, ix, d, "the index lists tensor \"%.200s\", which no shard holds "
                      "(a save that did not finish, or files of two saves?)", name);
      break;
    }
    const dcr__member *m = &c->members[member_of[at]];
    if (strlen(want) != m->path_length || memcmp(want, m->path, m->path_length)) {
      rc = index_fail(c, ix, d, "the index puts tensor \"%.200s\" in %.300s, but another "
                      "shard holds it (files of two saves?)", name, want);
      break;
    }
  }
  /* every tensor of the shards in the index's directory is listed */
  for (size_t i = 0; !rc && i < c->count; i++) {
    const dcr__member *m = &c->members[member_of[i]];
    if (c->tensors[i].raw_member || m->path_length < dir_length ||
        memcmp(m->path, ix->path, dir_length) || memchr(m->path + dir_length, '/', m->path_length - dir_length))
      continue;
    if (!json_object_getn(map, c->tensors[i].name, c->tensors[i].name_length))
      rc = index_fail(c, ix, d, "tensor \"%.200s\" of a shard is missing from the index",
                      c->tensors[i].name);
  }
  json_decref(root);
  return rc;
}

/* ---- reading a set */

/* Serializes the members part of a set table (§6.6) into out (NULL: measure). */
static size_t members_table(const dcr__member *m, size_t count, uint8_t *out) {
  size_t n = 4;
  if (out) dcr__put32(out, (uint32_t)count);
  for (size_t i = 0; i < count; i++) {
    if (out) {
      uint8_t *p = out + n;
      dcr__put16(p, (uint16_t)m[i].path_length);
      memcpy(p + 2, m[i].path, m[i].path_length);
      p += 2 + m[i].path_length;
      p[0] = (uint8_t)m[i].kind;
      p[1] = 0;
      dcr__put64(p + 2, m[i].prefix_length);
      dcr__put64(p + 10, m[i].data_length);
      if (m[i].prefix_length) memcpy(p + 18, m[i].prefix, (size_t)m[i].prefix_length);
    }
    n += DCR__SET_MEMBER_MIN - 1 + m[i].path_length + (size_t)m[i].prefix_length;
  }
  return n;
}

static int read_members(dcr__checkpoint *out, const found *paths, dcr__checkpoint *subs,
                        const dcr_limits *lim, unsigned minor, dcr_detail *d) {
  uint64_t start = 0;
  for (size_t i = 0; i < out->member_count; i++) {
    dcr__member *m = &out->members[i];
    m->path = paths[i].path;
    m->path_length = strlen(paths[i].path);
    m->kind = dcr__set_member_kind(m->path, m->path_length);
    int fd, rc = dcr__member_files_get(out->files, i, &fd, d);
    if (!rc) {
      rc = dcr__checkpoint_read(fd, m->kind, lim, minor, &subs[i], d);
      dcr__member_files_put(out->files, i);
    }
    if (rc) return dcr__detail_member(d, out->root, m->path, m->path_length), rc;
    m->prefix_length = subs[i].prefix_length;
    m->prefix = subs[i].prefix;
    m->data_length = subs[i].file_size - subs[i].prefix_length;
    m->start = start;
    /* saturating: the set's size is judged after its tensors (§2.3 "Reading a set") */
    if (dcr__add_overflow(start, m->data_length, &start)) start = UINT64_MAX;
  }
  out->file_size = start;
  return DCR_OK;
}

/* One name-sorted tensor list over the members; a name given twice is DCR_E_NAME. */
static int gather(dcr__checkpoint *out, dcr__checkpoint *subs, const dcr_limits *lim,
                  size_t **member_of, dcr_detail *d) {
  size_t count = 0, dims = 0;
  for (size_t i = 0; i < out->member_count; i++) {
    count += subs[i].count;
    for (size_t k = 0; k < subs[i].count; k++) dims += subs[i].tensors[k].desc.rank;
  }
  if (count > lim->max_tensors)
    return dcr__fail(d, DCR_E_LIMIT, "the set has %zu tensors, over the limit of %llu", count,
                     (unsigned long long)lim->max_tensors);
  owned *all = malloc((count + 1) * sizeof *all);
  out->dims_pool = malloc((dims + 1) * sizeof *out->dims_pool);
  out->tensors = calloc(count + 1, sizeof *out->tensors);
  *member_of = malloc((count + 1) * sizeof **member_of);
  if (!all || !out->dims_pool || !out->tensors || !*member_of) {
    free(all);
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate the set's %zu tensors", count);
  }
  size_t n = 0, used = 0;
  int nomem = 0;
  for (size_t i = 0; i < out->member_count; i++)
    for (size_t k = 0; k < subs[i].count; k++, n++) {
      all[n].t = subs[i].tensors[k];
      all[n].member = i;
      subs[i].tensors[k].name = NULL; /* moved */
      all[n].t.raw_member = out->members[i].kind == DCR_KIND_RAW;
      all[n].t.desc.offset += out->members[i].start;
      if (all[n].t.raw_member) { /* named by its path */
        free(all[n].t.name);
        all[n].t.name = strdup(out->members[i].path);
        all[n].t.name_length = out->members[i].path_length;
        nomem |= !all[n].t.name;
      }
      memcpy(out->dims_pool + used, all[n].t.desc.dims, all[n].t.desc.rank * sizeof *out->dims_pool);
      all[n].t.desc.dims = out->dims_pool + used;
      used += all[n].t.desc.rank;
    }
  qsort(all, n, sizeof *all, by_name);
  int rc = nomem ? dcr__fail(d, DCR_E_NOMEM, "cannot allocate a name") : DCR_OK;
  for (size_t i = 0; i < n; i++) {
    out->tensors[i] = all[i].t;
    (*member_of)[i] = all[i].member;
    if (!rc && i && !by_name(&all[i - 1], &all[i])) {
      const dcr__member *a = &out->members[all[i - 1].member], *b = &out->members[all[i].member];
      dcr__detail_tensor(d, DCR_NONE, all[i].t.name, all[i].t.name_length);
      rc = dcr__fail(d, DCR_E_NAME, "two members give this name: %.*s and %.*s",
                     (int)a->path_length, a->path, (int)b->path_length, b->path);
    }
  }
  out->count = n;
  free(all);
  return rc;
}

int dcr__set_read(const char *dir, const dcr_limits *lim, unsigned minor, int check,
                  dcr__checkpoint *out, dcr_detail *d) {
  memset(out, 0, sizeof *out);
  out->kind = DCR_KIND_SET;
  walk w = {.root = dir, .lim = lim, .d = d};
  dcr__checkpoint *subs = NULL;
  size_t *member_of = NULL;
  int rc = DCR_OK;
  if (!(out->root = strdup(dir))) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    rc = errno == ENOTDIR ? dcr__fail(d, DCR_E_CHECKPOINT, "not a directory, and the bundle's "
                                      "checkpoints are sets (model directories)")
                          : dcr__fail(d, DCR_E_IO, "cannot open the directory: %s", strerror(errno));
    dcr__detail_file(d, dir);
    goto done;
  }
  out->fd = fd, out->owns_fd = 1; /* members are opened below it, now and later */
  if ((rc = walk_tree(&w, fd))) goto done;
  if (w.count) qsort(w.entries, w.count, sizeof *w.entries, by_path); /* NULL for an empty directory */
  if ((rc = check_walk(&w))) goto done;
  out->member_count = w.count;
  out->members = calloc(w.count + 1, sizeof *out->members);
  subs = calloc(w.count + 1, sizeof *subs);
  if (!out->members || !subs) {
    rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate %zu members", w.count);
    goto done;
  }
  if ((rc = dcr__member_files_new(&out->files, fd, out->members, w.count, 0, d)) ||
      (rc = read_members(out, w.entries, subs, lim, minor, d)))
    goto done;
  if ((rc = gather(out, subs, lim, &member_of, d))) {
    if (d && !d->file[0]) dcr__detail_file(d, dir);
    goto done;
  }
  /* the table, and the members' paths and prefixes in one block it points into */
  size_t n = members_table(out->members, out->member_count, NULL);
  if (!(out->prefix = malloc(n + 4))) {
    rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate the set table");
    goto done;
  }
  members_table(out->members, out->member_count, out->prefix);
  dcr__put32(out->prefix + n, 0); /* base raw paths: a bundle's, not a checkpoint's */
  out->prefix_length = n + 4;
  for (size_t i = 0, at = 4; i < out->member_count; i++) {
    dcr__member *m = &out->members[i];
    m->path = (const char *)out->prefix + at + 2;
    m->prefix = m->prefix_length ? out->prefix + at + DCR__SET_MEMBER_MIN - 1 + m->path_length : NULL;
    at += DCR__SET_MEMBER_MIN - 1 + m->path_length + (size_t)m->prefix_length;
  }
  if (dcr__add_overflow(out->file_size, out->prefix_length, &out->file_size) ||
      out->file_size > lim->max_file_size) {
    rc = dcr__fail(d, DCR_E_LIMIT, "the set is larger than max_file_size");
    goto done;
  }
  for (size_t i = 0; check && !rc && i < out->member_count; i++)
    if (ends_with(out->members[i].path, out->members[i].path_length, INDEX_SUFFIX))
      rc = check_index(out, member_of, &out->members[i], lim, d);
done:
  for (size_t i = 0; i < w.count; i++) free(w.entries[i].path);
  free(w.entries);
  for (size_t i = 0; subs && i < out->member_count; i++) dcr__checkpoint_free(&subs[i]);
  free(subs);
  free(member_of);
  if (rc) dcr__checkpoint_free(out);
  return rc;
}
