/*
 * history.c - the dcr_history functions of dcr.h: opening an archive, rebuilding
 * a step, verifying, creating and appending (SPEC.md §19).
 *
 * An archive is read once, front to back, so that a pipe serves as well as a
 * file: the index comes first and says, before any member is read, which ones a
 * step needs. Every member read is hashed on the way and checked against the
 * index, so that a member replaced or damaged in storage is refused before it is
 * used (as an input to a patch, or copied into a new archive by append).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../format/set_output.h"
#include "../refit/refit.h"
#include "../net/remote.h"
#include "history.h"

#define BUF_SIZE ((size_t)1 << 20)

struct dcr_history {
  dcr__hreader *r;
  dcr__hindex x;
  dcr_limits lim;
  int consumed;  /* the members have been read (extract, verify) */
  size_t next;   /* the next index member the stream holds */
  int fd;        /* an archive opened by its path: held, range-locked, until freed; else -1 */
  uint64_t index_offset; /* the index member's data in the archive (uncompressed) */
  uint64_t index_length; /* its size: the slot an append in place rewrites */
  size_t index_text;     /* its bytes up to the padding after the document */
  char file[256]; /* for error details: the archive's path, or "" */
};

void dcr_history_options_default(dcr_history_options *o) {
  memset(o, 0, sizeof *o);
  o->verify = DCR_VERIFY_CHUNK;
  o->sync = 1;
}

static const dcr_history_options *options_or_default(const dcr_history_options *o, dcr_history_options *def) {
  if (o) return o;
  dcr_history_options_default(def);
  return def;
}

static int cancelled(const dcr_history_options *o) { return o->cancel && *o->cancel; }

/* create and append: the default limits, with the options' memory budget. */
static void options_limits(const dcr_history_options *o, dcr_limits *lim) {
  dcr_limits given;
  dcr_limits_default(&given);
  given.max_memory = o->max_memory;
  dcr__limits_take(lim, &given);
}

static void note_file(dcr_detail *d, const char *file) {
  if (d && file && *file && !d->file[0]) dcr__detail_file(d, file);
}

/* ---- opening: the index, the archive's first member (R-HIS-1) */

static int read_index(dcr_history *h, dcr_detail *d) {
  const char *name;
  uint64_t size;
  int regular, err = 0;
  int got = dcr__hreader_next(h->r, &name, &size, &regular, &err, d);
  if (got < 0) return err;
  if (got == 0) return dcr__fail(d, DCR_E_ARCHIVE, "the archive is empty: its first member is the index, "
                                 DCR__HISTORY_INDEX_NAME);
  if (strcmp(name, DCR__HISTORY_INDEX_NAME) || !regular)
    return dcr__fail(d, DCR_E_ARCHIVE, "the first member is '%.64s', not the index file " DCR__HISTORY_INDEX_NAME
                     " (SPEC.md §19.2)", name);
  if (size != UINT64_MAX && size > DCR__HISTORY_INDEX_MAX)
    return dcr__fail(d, DCR_E_LIMIT, "the index has %llu bytes, more than %llu", (unsigned long long)size,
                     (unsigned long long)DCR__HISTORY_INDEX_MAX);
  h->index_offset = dcr__hreader_data_offset(h->r);
  h->index_length = size;
  /* The text is held whole, then parsed: it and what parsing it would take count
   * against the budget as its bytes arrive, so that a small archive that inflates
   * to a large index, or an index whose document would be large, is refused
   * before it is read whole, let alone parsed. */
  uint64_t budget = h->lim.max_memory;
  if (size != UINT64_MAX && size > budget)
    return dcr__fail(d, DCR_E_NOMEM, "the index has %llu bytes, over the memory budget of %llu MiB "
                     "(dcr_limits.max_memory, dcr --memory)", (unsigned long long)size,
                     (unsigned long long)(budget >> 20));
  /* A zip member's size may be unknown until its end: at most the limit, then. */
  uint64_t most = size != UINT64_MAX ? size : DCR__HISTORY_INDEX_MAX;
  size_t cap = (size_t)(size != UINT64_MAX ? size : BUF_SIZE) + 1, len = 0;
  char *json = malloc(cap);
  if (!json) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate %zu bytes for the index", cap);
  dcr__json_cost cost;
  dcr__json_cost_init(&cost);
  for (;;) {
    if (len == cap) { /* more than a known size, or a size not known until the end */
      if (len > most) {
        free(json);
        return size != UINT64_MAX ? dcr__fail(d, DCR_E_ARCHIVE, "the index has more than the %llu bytes its "
                                              "header says", (unsigned long long)size)
                                  : dcr__fail(d, DCR_E_LIMIT, "the index has more than %llu bytes",
                                              (unsigned long long)most);
      }
      size_t grown = cap * 2 < most + 1 ? cap * 2 : (size_t)most + 1;
      char *p = realloc(json, grown);
      if (!p) return free(json), dcr__fail(d, DCR_E_NOMEM, "cannot allocate the index");
      json = p, cap = grown;
    }
    size_t n; /* a piece at a time, each scanned before the next is read */
    if ((err = dcr__hreader_read(h->r, json + len, cap - len < BUF_SIZE ? cap - len : BUF_SIZE, &n, d)))
      return free(json), err;
    if (n == 0) break;
    if ((err = dcr__hindex_scan(&cost, json + len, n, len + n, budget, d))) return free(json), err;
    len += n;
  }
  if (size != UINT64_MAX && len != size) {
    free(json);
    return dcr__fail(d, DCR_E_TRUNCATED, "the index has %zu of its %llu bytes", len, (unsigned long long)size);
  }
  err = dcr__hindex_parse(&h->x, json, len, budget, d);
  for (h->index_text = len; h->index_text && json[h->index_text - 1] == ' '; h->index_text--) continue;
  free(json);
  return err;
}

static int history_recover(const char *path, int sync, int *rolled, dcr_detail *d);

/* The archive at path, open for reading with a shared range lock, so that an
 * append in place (which takes the exclusive one to write) is never seen half
 * done. A journal beside it is a dead appender's: the append is rolled back
 * first, as the next run must (SPEC.md §19.6), where this process may write. */
static int open_local(const char *path, int *out, dcr_detail *d) {
  char journal[4200];
  dcr__happend_name(journal, sizeof journal, path);
  for (int tries = 0;; tries++) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return dcr__fail(d, DCR_E_IO, "cannot open: %s", strerror(errno));
    int err = dcr__range_lock(fd, 0, d);
    struct stat st;
    if (err || tries || lstat(journal, &st)) {
      if (err) close(fd);
      return err ? err : (*out = fd, DCR_OK);
    }
    /* Without the right to write the archive and remove the journal, the archive
     * is read as it is: whatever the append left is refused by the reader's
     * checks (the index first), or lies past what it reads. */
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) slash[slash == dir] = 0;
    if (access(path, W_OK) || access(slash ? dir : ".", W_OK)) return *out = fd, DCR_OK;
    close(fd);
    int rolled;
    if ((err = history_recover(path, 1, &rolled, d))) return err;
  }
}

/* From path, fd or memory, or from url when it is not NULL. */
static int history_open(dcr_history **out, const char *path, int fd, const void *memory, size_t memory_size,
                        const char *url, const dcr_http_options *net, const dcr_limits *limits, dcr_detail *d) {
  if (d) dcr__detail_init(d);
  *out = NULL;
  dcr_history *h = calloc(1, sizeof *h);
  if (!h) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate a history");
  dcr__limits_take(&h->lim, limits);
  h->fd = -1;
  int err = DCR_OK;
  if (path) {
    snprintf(h->file, sizeof h->file, "%s", path);
    if (!(err = open_local(path, &h->fd, d))) fd = h->fd;
  }
  if (url) dcr__url_shown(url, h->file, sizeof h->file);
  if (!err) err = url ? dcr__hreader_open_url(&h->r, url, net, d)
                      : dcr__hreader_open(&h->r, NULL, fd, memory, memory_size, d);
  if (!err) err = read_index(h, d);
  if (err) {
    note_file(d, h->file);
    dcr_history_free(h);
    return err;
  }
  *out = h;
  return DCR_OK;
}

int dcr__history_open(dcr_history **out, const char *path, int fd, const void *memory, size_t memory_size,
                      const dcr_limits *limits, dcr_detail *d) {
  return history_open(out, path, fd, memory, memory_size, NULL, NULL, limits, d);
}

int dcr_history_open_url(dcr_history **h, const char *url, const dcr_http_options *options,
                         const dcr_limits *limits, dcr_detail *d) {
  return history_open(h, NULL, -1, NULL, 0, url ? url : "", options, limits, d);
}

int dcr_history_open(dcr_history **h, const char *path, const dcr_limits *limits, dcr_detail *d) {
  if (!path) {
    if (d) dcr__detail_init(d);
    *h = NULL;
    return dcr__fail(d, DCR_E_ARGUMENT, "no path");
  }
  return dcr__history_open(h, path, -1, NULL, 0, limits, d);
}

int dcr_history_open_fd(dcr_history **h, int fd, const dcr_limits *limits, dcr_detail *d) {
  return dcr__history_open(h, NULL, fd, NULL, 0, limits, d);
}

void dcr_history_free(dcr_history *h) {
  if (!h) return;
  dcr__hreader_free(h->r);
  if (h->fd >= 0) close(h->fd); /* and its lock */
  dcr__hindex_free(&h->x);
  free(h);
}

void dcr_history_info(const dcr_history *h, dcr_history_summary *info) {
  memset(info, 0, sizeof *info);
  info->container = dcr__hreader_container(h->r);
  info->version_major = DCR__HISTORY_MAJOR;
  info->version_minor = h->x.minor;
  info->member_count = h->x.count;
  info->first_step = h->x.m[0].step;
  info->last_step = h->x.m[h->x.count - 1].step;
  info->keyframe_every = h->x.keyframe_every;
  info->run_id = h->x.run_id;
}

void dcr_history_member_get(const dcr_history *h, uint64_t i, dcr_history_member *out) {
  const dcr__hmember *m = &h->x.m[i];
  memset(out, 0, sizeof *out);
  out->kind = m->kind;
  out->step = m->step;
  out->name = m->name;
  out->size = m->size;
  memcpy(out->digest, m->digest, 16);
  if (m->kind == DCR_HISTORY_BUNDLE) memcpy(out->base_state, m->base, 16);
  memcpy(out->state, dcr__hmember_end_state(m), 16);
  out->meta_count = m->meta_count;
  out->directory = (uint32_t)m->directory;
  out->file_count = m->file_count;
}

void dcr_history_member_meta(const dcr_history *h, uint64_t i, uint64_t j, dcr_meta *meta) {
  meta->key = h->x.m[i].meta_key[j];
  meta->value = h->x.m[i].meta_value[j];
}

int dcr_history_find_state(const dcr_history *h, const uint8_t state[16], uint64_t *step, dcr_detail *d) {
  if (d) dcr__detail_init(d);
  for (size_t i = 0; i < h->x.count; i++)
    if (!memcmp(dcr__hmember_end_state(&h->x.m[i]), state, 16)) return *step = h->x.m[i].step, DCR_OK;
  char hex[33];
  dcr__hex(state, 16, hex);
  return dcr__fail(d, DCR_E_ARGUMENT, "no step of the archive ends in state %s", hex);
}

/* ---- reading members, in order (R-HIS-1) */

/* Reads the next member header: it must be m's (member i, or a file of it). */
static int entry_next(dcr_history *h, size_t i, const dcr__hmember *m, dcr_detail *d) {
  const char *name;
  uint64_t size;
  int regular, err = 0;
  int got = dcr__hreader_next(h->r, &name, &size, &regular, &err, d);
  if (got < 0) return err;
  if (got == 0)
    return dcr__fail(d, DCR_E_ARCHIVE, "the archive ends before member %zu ('%.64s') of the %zu members its index "
                     "lists", i, m->name, h->x.count);
  if (strcmp(name, m->name))
    return dcr__fail(d, DCR_E_ARCHIVE, "member %zu is '%.64s' in the archive but '%.64s' in the index", i, name,
                     m->name);
  if (!regular) return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s') is not a regular file", i, name);
  if (size != UINT64_MAX && size != m->size)
    return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s') has %llu bytes, the index says %llu", i, name,
                     (unsigned long long)size, (unsigned long long)m->size);
  return DCR_OK;
}

/* Moves the stream to index member i, skipping those before it unread. A file
 * member's header is then read; a directory keyframe's files are read one by one
 * by its reader (entry_next). */
static int member_seek(dcr_history *h, size_t i, dcr_detail *d) {
  for (; h->next <= i; h->next++) {
    const dcr__hmember *m = &h->x.m[h->next];
    int err = DCR_OK;
    if (!m->directory) err = entry_next(h, h->next, m, d);
    for (size_t f = 0; !err && h->next < i && f < m->file_count; f++) {
      char name[DCR__HISTORY_FILE_NAME_MAX];
      dcr__hmember file;
      dcr__hfile_member(m, f, name, &file);
      err = entry_next(h, h->next, &file, d);
    }
    if (err) return err;
  }
  return DCR_OK;
}

static int sink_fd(void *opaque, const void *data, size_t size, dcr_detail *d) {
  return dcr__write_fd(opaque, data, size) ? dcr__fail(d, DCR_E_IO, "cannot write: %s", strerror(errno)) : DCR_OK;
}

static const char *temp_dir(const dcr_history_options *o) {
  const char *t = o->temp_dir ? o->temp_dir : getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

/* A member's own errors (from the reader, the patch, the checkpoint's header) say
 * nothing of where it is in the archive: the member goes in front of the message. */
static void prefix_member(dcr_detail *d, const dcr_history *h, size_t i) {
  const dcr__hmember *m = &h->x.m[i];
  if (!d || strstr(d->message, m->name)) return;
  char msg[2 * sizeof d->message];
  snprintf(msg, sizeof msg, "step %llu ('%s'): %s", (unsigned long long)m->step, m->name, d->message);
  memcpy(d->message, msg, sizeof d->message - 1); /* cut short, as every message may be */
  d->message[sizeof d->message - 1] = 0;
}

/* The keyframe being read into fd, from its offset 0: its safetensors header is
 * checked as soon as it is in (SPEC.md §19.4), before the rest is read. */
typedef struct {
  int fd;
  const dcr__hmember *m;
  const dcr_limits *lim;
  uint64_t at;
  int checked;
} keyframe_sink;

static int sink_keyframe(void *opaque, const void *data, size_t size, dcr_detail *d) {
  keyframe_sink *k = opaque;
  int err = sink_fd(&k->fd, data, size, d);
  if (err || k->checked) return err;
  k->at += size;
  uint8_t length[8];
  if (k->m->size >= 8) { /* else too short for a length: refused at once */
    if (k->at < 8 || (err = dcr__pread_full(k->fd, length, 8, 0, d))) return err;
    uint64_t n = dcr__le64(length);
    /* on once the header is in, or as soon as its length alone fails it */
    if (n <= k->lim->max_header_size && n <= k->m->size - 8 && k->at < 8 + n) return DCR_OK;
  }
  k->checked = 1;
  dcr__checkpoint ck = {0};
  err = dcr__safetensors_read(k->fd, k->m->size, k->lim, DCR_FORMAT_MINOR, &ck, d);
  dcr__checkpoint_free(&ck);
  return err;
}

/* Keyframe i, the current member, read into fd (at its offset 0) and checked. */
static int keyframe_read(dcr_history *h, size_t i, int fd, const dcr_history_options *o, dcr_detail *d) {
  keyframe_sink k = {.fd = fd, .m = &h->x.m[i], .lim = &h->lim};
  int err = dcr__member_read(h->r, &h->x.m[i], i, sink_keyframe, &k, o->cancel, d);
  if (err) prefix_member(d, h, i);
  return err;
}

static const char *kind_name(int kind) {
  return kind == DCR_KIND_SET ? "set" : kind == DCR_KIND_RAW ? "raw" : "safetensors";
}

/* Index member i, a bundle, the current member, opened as §19.4 says and its
 * identity checked against the index. */
static int bundle_open(dcr_history *h, size_t i, dcr_reader **r, const dcr_history_options *o, dcr_detail *d) {
  const dcr__hmember *m = &h->x.m[i];
  *r = NULL;
  if (m->size > h->lim.max_bundle_size)
    return dcr__fail(d, DCR_E_LIMIT, "member %zu ('%.64s') is a bundle of %llu bytes, more than the limit %llu", i,
                     m->name, (unsigned long long)m->size, (unsigned long long)h->lim.max_bundle_size);
  int err = dcr__member_reader(r, h->r, m, i, &h->lim, temp_dir(o), o->cancel, h->file, d);
  if (err) return err;
  dcr_bundle_info info;
  dcr_reader_info(*r, &info);
  char a[33], b[33];
  int want = h->x.m[0].directory ? DCR_KIND_SET : DCR_KIND_SAFETENSORS;
  if (info.kind != want)
    return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s') is a bundle of %s checkpoints; an archive of %s "
                     "keyframes holds bundles of %s (SPEC.md §19.2)", i, m->name, kind_name(info.kind),
                     h->x.m[0].directory ? "directory" : "file", kind_name(want));
  if (memcmp(info.base_state, m->base, 16) || memcmp(info.target_state, m->target, 16)) {
    dcr__hex(memcmp(info.base_state, m->base, 16) ? info.base_state : info.target_state, 16, a);
    dcr__hex(memcmp(info.base_state, m->base, 16) ? m->base : m->target, 16, b);
    return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s') is a bundle with %s state %s, the index says %s", i,
                     m->name, memcmp(info.base_state, m->base, 16) ? "base" : "target", a, b);
  }
  if (info.meta_count != m->meta_count)
    return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s') has %llu metadata pairs, the index lists %zu", i,
                     m->name, (unsigned long long)info.meta_count, m->meta_count);
  for (size_t k = 0; k < m->meta_count; k++) {
    dcr_meta p;
    dcr_reader_meta(*r, k, &p);
    if (strcmp(p.key, m->meta_key[k]) || strcmp(p.value, m->meta_value[k]))
      return dcr__fail(d, DCR_E_ARCHIVE, "member %zu ('%.64s'): metadata '%.64s' disagrees with the index", i,
                       m->name, p.key);
  }
  return o->require_signature ? dcr_reader_verify_signature(*r, o->require_signature, NULL, d) : DCR_OK;
}

/* A checkpoint (a file, or a set: kind) against the state id the index gives. */
static int check_state(const char *path, int kind, const uint8_t want[16], unsigned threads, const dcr_limits *lim,
                       const char *what, dcr_detail *d) {
  dcr_checkpoint *ck;
  uint8_t state[16];
  int err = dcr_checkpoint_open(&ck, path, kind, lim, d);
  if (!err) err = dcr_checkpoint_state_id(ck, threads, state, d);
  dcr_checkpoint_free(ck);
  if (err) return err;
  if (memcmp(state, want, 16)) {
    char a[33], b[33];
    dcr__hex(state, 16, a), dcr__hex(want, 16, b);
    return dcr__fail(d, DCR_E_ARCHIVE, "%s has state %s, the index says %s", what, a, b);
  }
  return DCR_OK;
}

/* A directory keyframe being written: a set output (format/set_output.c) and the
 * members it is made of, which must outlive it. */
typedef struct {
  dcr__set_output o;
  dcr__member *members;
  char path[4352]; /* its temporary directory */
} dir_out;

static void dir_out_close(dir_out *w) {
  dcr__set_output_abort(&w->o);
  free(w->members);
  w->members = NULL;
}

/* Directory keyframe i, whose files come next in the stream, written into a new
 * directory that appears at dest only on dir_out's commit, and checked: each
 * safetensors file's prefix as it arrives, each file's size and digest, then the
 * set's state id. Paths were checked with the index (§2.3): each file lands under
 * the temporary directory and nowhere else, and nothing there is a link. */
static int keyframe_dir_read(dcr_history *h, size_t i, dir_out *w, const char *dest, unsigned flags,
                             const dcr_history_options *o, dcr_detail *d) {
  const dcr__hmember *m = &h->x.m[i];
  memset(w, 0, sizeof *w);
  w->o.dir_fd = w->o.root_fd = -1;
  if (!(w->members = calloc(m->file_count + 1, sizeof *w->members)))
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate %zu files", m->file_count);
  for (size_t f = 0, start = 0; f < m->file_count; start += (size_t)m->files[f++].size) {
    dcr__member *e = &w->members[f];
    e->path = m->files[f].path, e->path_length = strlen(e->path);
    e->kind = DCR_KIND_RAW, e->data_length = m->files[f].size, e->start = start;
  }
  int err = dcr__set_output_open(&w->o, dest, w->members, m->file_count, flags, d);
  if (!err) err = dcr__set_output_create(&w->o, d);
  for (size_t f = 0; f < m->file_count && !err; f++) {
    char name[DCR__HISTORY_FILE_NAME_MAX];
    dcr__hmember file;
    dcr__hfile_member(m, f, name, &file);
    int fd;
    if ((err = entry_next(h, i, &file, d)) || (err = dcr__member_files_get(w->o.files, f, &fd, d))) break;
    keyframe_sink k = {.fd = fd, .m = &file, .lim = &h->lim};
    k.checked = dcr__set_member_kind(w->members[f].path, w->members[f].path_length) != DCR_KIND_SAFETENSORS;
    err = dcr__member_read(h->r, &file, i, sink_keyframe, &k, o->cancel, d);
    dcr__member_files_put(w->o.files, f);
  }
  size_t n = strlen(dest);
  while (n > 1 && dest[n - 1] == '/') n--;
  while (n > 0 && dest[n - 1] != '/') n--; /* the parent, as set_output.c finds it */
  if (!err && snprintf(w->path, sizeof w->path, "%.*s%s", (int)n, dest, w->o.tmp_name) >= (int)sizeof w->path)
    err = dcr__fail(d, DCR_E_ARGUMENT, "the path '%.200s' is too long", dest);
  if (!err) err = check_state(w->path, DCR_KIND_SET, m->state, o->threads, &h->lim, m->name, d);
  if (err) prefix_member(d, h, i);
  return err;
}

/* ---- extract: one keyframe, then the chain, into a work file */

static int find_step(const dcr_history *h, uint64_t step, size_t *last, size_t *key, dcr_detail *d) {
  const dcr__hindex *x = &h->x;
  if (step < x->m[0].step || step > x->m[x->count - 1].step)
    return dcr__fail(d, DCR_E_ARGUMENT, "step %llu is not in the archive (steps %llu to %llu)",
                     (unsigned long long)step, (unsigned long long)x->m[0].step,
                     (unsigned long long)x->m[x->count - 1].step);
  size_t e = x->count - 1;
  while (x->m[e].step > step) e--;
  *last = e;
  while (x->m[e].kind != DCR_HISTORY_KEYFRAME) e--; /* member 0 is one (R-HIS-3) */
  *key = e;
  return DCR_OK;
}

/* The start of every rebuild: the members are read once, so an archive serves one;
 * *e is the step's last member and *k the keyframe it starts from. */
static int start_rebuild(dcr_history *h, uint64_t step, const dcr_history_options *o, size_t *e,
                         size_t *k, dcr_detail *d) {
  if (h->consumed) return dcr__fail(d, DCR_E_ARGUMENT, "the archive's members were read already: open it again");
  h->consumed = 1;
  int err = find_step(h, step, e, k, d);
  if (err) return err;
  if (o->max_target_size && h->x.m[*k].size > o->max_target_size)
    return dcr__fail(d, DCR_E_LIMIT, "keyframe '%.64s' has %llu bytes, more than the cap of %llu", h->x.m[*k].name,
                     (unsigned long long)h->x.m[*k].size, (unsigned long long)o->max_target_size);
  return DCR_OK;
}

/* Rebuilds `step` in the work file w. *last_reader is the last bundle applied,
 * kept for the caller's final check; NULL if the step is a keyframe's. */
static int replay(dcr_history *h, uint64_t step, dcr__work *w, const dcr_history_options *o,
                  dcr_reader **last_reader, dcr_detail *d) {
  size_t e = 0, k = 0;
  *last_reader = NULL;
  int err = start_rebuild(h, step, o, &e, &k, d);
  if (err) return err;
  if ((err = member_seek(h, k, d)) || (err = keyframe_read(h, k, w->a.fd, o, d))) return err;
  dcr_apply_options aopt;
  dcr_apply_options_default(&aopt);
  aopt.threads = o->threads;
  aopt.cancel = o->cancel;
  aopt.sync = 0;
  aopt.max_target_size = o->max_target_size;
  for (size_t i = k + 1; i <= e && !err; i++) {
    if (h->x.m[i].kind == DCR_HISTORY_KEYFRAME) continue; /* the chain has made it already */
    /* Only the last bundle is kept: one member's bytes held at a time. */
    dcr_reader_free(*last_reader);
    *last_reader = NULL;
    dcr_reader *r = NULL;
    if ((err = member_seek(h, i, d)) || (err = bundle_open(h, i, &r, o, d))) {
      dcr_reader_free(r);
      prefix_member(d, h, i);
      break;
    }
    dcr_bundle_info info;
    dcr_reader_info(r, &info);
    if (o->max_target_size && info.target_size > o->max_target_size)
      err = dcr__fail(d, DCR_E_LIMIT, "step %llu has %llu bytes, more than the cap of %llu",
                      (unsigned long long)h->x.m[i].step, (unsigned long long)info.target_size,
                      (unsigned long long)o->max_target_size);
    if (!err) err = dcr__work_apply(w, r, o->verify, &aopt, d);
    if (err) prefix_member(d, h, i);
    *last_reader = r;
  }
  if (err || o->verify == DCR_VERIFY_NONE) return err;
  /* A full check of each step's patch checked the result already; chunk checks
   * cover only what changed, so the result's state id is checked once here. */
  if (!*last_reader) return check_state(w->path, DCR_KIND_SAFETENSORS, h->x.m[k].state, o->threads, &h->lim, h->x.m[k].name, d);
  if (o->verify == DCR_VERIFY_CHUNK) return dcr_check_target(*last_reader, w->path, &aopt, d);
  return DCR_OK;
}

static unsigned commit_flags(const dcr_history_options *o) {
  return (o->no_replace ? 0 : DCR__ATOMIC_REPLACE) | (o->sync ? DCR__ATOMIC_SYNC : 0);
}

/* A step of a directory archive, rebuilt as dcr apply rebuilds a series of sets:
 * the keyframe into a hidden work directory beside out, then each bundle applied
 * by dcr_apply from one step's directory into the next (two alternate, each
 * replacing the one before last), the last into out. So out is bitwise what
 * applying the bundles to the keyframe gives, and appears only once every check
 * of the last apply has passed. */
static int extract_dir(dcr_history *h, uint64_t step, const char *out, const dcr_history_options *o,
                       dcr_detail *d) {
  size_t e = 0, k = 0;
  int err = start_rebuild(h, step, o, &e, &k, d);
  if (err) return err;
  if ((err = member_seek(h, k, d))) return err;
  dir_out key = {.o = {.dir_fd = -1, .root_fd = -1}};
  if (k == e) { /* the step's own keyframe: straight to out */
    err = keyframe_dir_read(h, k, &key, out, commit_flags(o), o, d);
    if (!err && cancelled(o)) err = dcr__fail(d, DCR_E_INTERRUPTED, "interrupted");
    if (!err) err = dcr__set_output_commit(&key.o, d);
    dir_out_close(&key);
    return err;
  }
  /* The work directory: refuses an existing out up front, as the last apply would. */
  dcr__set_output work;
  if ((err = dcr__set_output_open(&work, out, NULL, 0, commit_flags(o), d))) return err;
  char base[2][4400];
  size_t n = strlen(out);
  while (n > 1 && out[n - 1] == '/') n--;
  while (n > 0 && out[n - 1] != '/') n--;
  for (int b = 0; b < 2; b++)
    if (snprintf(base[b], sizeof base[b], "%.*s%s/%d", (int)n, out, work.tmp_name, b) >= (int)sizeof base[b])
      err = dcr__fail(d, DCR_E_ARGUMENT, "the path '%.200s' is too long", out);
  if (!err) err = keyframe_dir_read(h, k, &key, base[0], 0, o, d);
  if (!err) err = dcr__set_output_commit(&key.o, d);
  dir_out_close(&key);
  dcr_apply_options aopt;
  dcr_apply_options_default(&aopt);
  aopt.threads = o->threads;
  aopt.cancel = o->cancel;
  aopt.max_target_size = o->max_target_size;
  int at = 0;
  for (size_t i = k + 1; i <= e && !err; i++) {
    if (h->x.m[i].kind == DCR_HISTORY_KEYFRAME) continue; /* the chain has made it already */
    dcr_reader *r = NULL;
    if (!(err = member_seek(h, i, d))) err = bundle_open(h, i, &r, o, d);
    int last = i == e; /* e is a bundle: a keyframe at e would be k */
    aopt.sync = last && o->sync;
    aopt.no_replace = last && o->no_replace;
    if (!err && cancelled(o)) err = dcr__fail(d, DCR_E_INTERRUPTED, "interrupted");
    if (!err) err = dcr_apply(r, base[at], last ? out : base[1 - at], &aopt, d);
    if (err) prefix_member(d, h, i);
    dcr_reader_free(r);
    at = 1 - at;
  }
  dcr__set_output_abort(&work);
  return err;
}

int dcr_history_extract(dcr_history *h, uint64_t step, const char *out, const dcr_history_options *opt,
                        dcr_detail *d) {
  if (d) dcr__detail_init(d);
  dcr_history_options def;
  const dcr_history_options *o = options_or_default(opt, &def);
  if (!out) return dcr__fail(d, DCR_E_ARGUMENT, "no output path");
  if (h->x.m[0].directory) {
    int err = extract_dir(h, step, out, o, d);
    if (err) note_file(d, h->file);
    return err;
  }
  dcr__work w;
  int err = dcr__work_open(&w, out, commit_flags(o), d);
  if (err) return err;
  dcr_reader *r;
  err = replay(h, step, &w, o, &r, d);
  dcr_reader_free(r);
  if (!err && cancelled(o)) err = dcr__fail(d, DCR_E_INTERRUPTED, "interrupted");
  if (!err) err = dcr__atomic_commit(&w.a, d);
  else note_file(d, h->file);
  dcr__atomic_abort(&w.a);
  return err;
}

/* ---- verify */

/* After the last member the index lists, the archive ends (R-HIS-4 item 3). */
static int end_check(dcr_history *h, dcr_detail *d) {
  const char *name;
  uint64_t size;
  int regular, err = DCR_OK, got = dcr__hreader_next(h->r, &name, &size, &regular, &err, d);
  if (got > 0) err = dcr__fail(d, DCR_E_ARCHIVE, "member '%.64s' follows the last one the index lists", name);
  return err;
}

int dcr_history_verify(dcr_history *h, const dcr_history_options *opt, dcr_detail *d) {
  if (d) dcr__detail_init(d);
  dcr_history_options def;
  const dcr_history_options *o = options_or_default(opt, &def);
  if (h->consumed) return dcr__fail(d, DCR_E_ARGUMENT, "the archive's members were read already: open it again");
  h->consumed = 1;
  char beside[4200];
  snprintf(beside, sizeof beside, "%s/dcr-keyframe", temp_dir(o));
  int err = DCR_OK;
  for (size_t i = 0; i < h->x.count && !err; i++) {
    const dcr__hmember *m = &h->x.m[i];
    if ((err = member_seek(h, i, d))) break;
    if (m->kind == DCR_HISTORY_KEYFRAME && m->directory) {
      dir_out w; /* checked in a temporary directory, never committed */
      err = keyframe_dir_read(h, i, &w, beside, DCR__ATOMIC_REPLACE, o, d);
      dir_out_close(&w);
    } else if (m->kind == DCR_HISTORY_KEYFRAME) {
      /* A state id reads tensors in name order, not file order: the keyframe is
       * hashed from a temporary copy. */
      dcr__work w;
      if ((err = dcr__work_open(&w, beside, DCR__ATOMIC_REPLACE, d))) break;
      err = keyframe_read(h, i, w.a.fd, o, d);
      if (!err) err = check_state(w.path, DCR_KIND_SAFETENSORS, m->state, o->threads, &h->lim, m->name, d);
      dcr__atomic_abort(&w.a);
    } else {
      dcr_reader *r;
      err = bundle_open(h, i, &r, o, d);
      if (!err) dcr_reader_set_threads(r, o->threads);
      if (!err) err = dcr_reader_verify(r, d);
      if (err) prefix_member(d, h, i);
      dcr_reader_free(r);
    }
  }
  if (!err) err = end_check(h, d);
  if (err) note_file(d, h->file);
  return err;
}

/* ---- writing: create and append */

/* Reads fd from its offset to its end through sink (NULL: none), giving its
 * length and XXH3-128, and fails with DCR_E_IO past `limit` bytes. Every file that
 * becomes a member goes through it: hashed for the index, then copied into the
 * archive and checked again. */
static int stream_fd(int fd, uint8_t *buf, dcr__member_sink sink, void *opaque, uint64_t limit, uint64_t *size,
                     uint8_t digest[16], dcr_detail *d) {
  XXH3_state_t st;
  XXH3_128bits_reset(&st);
  uint64_t total = 0;
  int err = DCR_OK;
  ssize_t n;
  while (!err && (n = read(fd, buf, BUF_SIZE)) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return dcr__fail(d, DCR_E_IO, "cannot read: %s", strerror(errno));
    if ((uint64_t)n > limit - total) return dcr__fail(d, DCR_E_IO, "grew while it was being archived");
    total += (uint64_t)n;
    XXH3_128bits_update(&st, buf, (size_t)n);
    if (sink) err = sink(opaque, buf, (size_t)n, d);
  }
  if (err) return err;
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits_digest(&st));
  memcpy(digest, c.digest, 16);
  *size = total;
  return DCR_OK;
}

/* The file at path through stream_fd; errors name it. */
static int stream_file(const char *path, uint8_t *buf, dcr__member_sink sink, void *opaque, uint64_t limit,
                       uint64_t *size, uint8_t digest[16], dcr_detail *d) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  int err = fd < 0 ? dcr__fail(d, DCR_E_IO, "cannot open: %s", strerror(errno))
                   : stream_fd(fd, buf, sink, opaque, limit, size, digest, d);
  if (fd >= 0) close(fd);
  if (err) note_file(d, path);
  return err;
}

static int sink_archive(void *opaque, const void *data, size_t size, dcr_detail *d) {
  return dcr__hwriter_write(opaque, data, size, d);
}

/* Copies a file into the archive as member m; it must still be the bytes that
 * were hashed for the index. A directory keyframe is copied file by file. */
static int copy_file(dcr__hwriter *aw, const dcr__hmember *m, const char *path, uint8_t *buf, dcr_detail *d) {
  uint64_t size;
  uint8_t digest[16];
  for (size_t f = 0; f < m->file_count; f++) {
    char name[DCR__HISTORY_FILE_NAME_MAX], full[8448];
    dcr__hmember file;
    dcr__hfile_member(m, f, name, &file);
    snprintf(full, sizeof full, "%s/%s", path, m->files[f].path);
    int err = copy_file(aw, &file, full, buf, d);
    if (err) return err;
  }
  if (m->directory) return DCR_OK;
  int err = dcr__hwriter_member(aw, m->name, m->size, d);
  if (!err) err = stream_file(path, buf, sink_archive, aw, m->size, &size, digest, d);
  if (!err && (size != m->size || memcmp(digest, m->digest, 16)))
    err = (note_file(d, path), dcr__fail(d, DCR_E_IO, "changed while it was being archived"));
  return err;
}

/* Member i of the old archive copied into the new one, checked as it is read. */
static int copy_member(dcr_history *old, size_t i, dcr__hwriter *aw, const dcr_history_options *o, dcr_detail *d) {
  const dcr__hmember *m = &old->x.m[i];
  int err = member_seek(old, i, d);
  for (size_t f = 0; !err && f < m->file_count; f++) {
    char name[DCR__HISTORY_FILE_NAME_MAX];
    dcr__hmember file;
    dcr__hfile_member(m, f, name, &file);
    if (!(err = entry_next(old, i, &file, d))) err = dcr__hwriter_member(aw, name, file.size, d);
    if (!err) err = dcr__member_read(old->r, &file, i, sink_archive, aw, o->cancel, d);
  }
  if (!err && !m->directory) err = dcr__hwriter_member(aw, m->name, m->size, d);
  if (!err && !m->directory) err = dcr__member_read(old->r, m, i, sink_archive, aw, o->cancel, d);
  return err;
}

/* A directory keyframe (1.1): the set at dir (§2.3), its state id, and each of its
 * files hashed for the index. *key's files are the caller's to free. */
static int dir_keyframe(const char *dir, dcr__hmember *key, const dcr_limits *lim, unsigned threads, uint8_t *buf,
                        dcr_detail *d) {
  dcr_checkpoint *ck;
  int err = dcr_checkpoint_open(&ck, dir, DCR_KIND_SET, lim, d);
  if (!err) err = dcr_checkpoint_state_id(ck, threads, key->state, d);
  dcr_checkpoint_summary info = {0};
  if (!err) dcr_checkpoint_info(ck, &info);
  key->directory = 1;
  if (!err && !(key->files = calloc((size_t)info.member_count + 1, sizeof *key->files)))
    err = dcr__fail(d, DCR_E_NOMEM, "cannot allocate %llu files", (unsigned long long)info.member_count);
  for (uint64_t f = 0; !err && f < info.member_count; f++) {
    dcr_member_info mi;
    dcr_checkpoint_member(ck, f, &mi);
    dcr__hfile *h = &key->files[key->file_count];
    char full[8448];
    if (!(h->path = strndup(mi.path, mi.path_length))) err = dcr__fail(d, DCR_E_NOMEM, "cannot allocate a path");
    else key->file_count++;
    if (!err) snprintf(full, sizeof full, "%s/%s", dir, h->path);
    if (!err) err = stream_file(full, buf, NULL, NULL, UINT64_MAX, &h->size, h->digest, d);
    key->size += h->size;
  }
  dcr_checkpoint_free(ck);
  return err;
}

static void dir_keyframe_free(dcr__hmember *key) {
  for (size_t f = 0; f < key->file_count; f++) free(key->files[f].path);
  free(key->files);
}

/* What create and append build: the new index, and for the members after the
 * old archive's, the files they come from. */
typedef struct {
  dcr__hindex x;
  size_t old_count;  /* members copied from the old archive */
  char **paths;      /* [count - old_count]: each new member's file */
  dcr__work *keys;   /* keyframes built from the chain */
  size_t key_count;
  dcr_reader **readers; /* the new bundles, open (NULL for keyframes) */
  uint8_t *buf;
} plan;

static void plan_free(plan *p) {
  size_t fresh = p->x.count - p->old_count;
  for (size_t i = 0; p->paths && i < fresh; i++) free(p->paths[i]);
  for (size_t i = 0; p->readers && i < fresh; i++) dcr_reader_free(p->readers[i]);
  for (size_t i = 0; i < p->key_count; i++) dcr__atomic_abort(&p->keys[i].a);
  free(p->paths), free(p->readers), free(p->keys), free(p->buf);
  dcr__hindex_free(&p->x);
}

static int plan_add(plan *p, const dcr__hmember *m, const char *path, dcr_reader *r, dcr_detail *d) {
  size_t fresh = p->x.count - p->old_count;
  char **paths = realloc(p->paths, (fresh + 1) * sizeof *paths);
  if (paths) p->paths = paths;
  dcr_reader **readers = paths ? realloc(p->readers, (fresh + 1) * sizeof *readers) : NULL;
  if (readers) p->readers = readers;
  char *copy = readers ? strdup(path) : NULL;
  int err = copy ? dcr__hindex_add(&p->x, m, d) : dcr__fail(d, DCR_E_NOMEM, "cannot allocate a member");
  if (err) return free(copy), dcr_reader_free(r), err;
  p->paths[fresh] = copy;
  p->readers[fresh] = r;
  return DCR_OK;
}

static void member_name(char *out, size_t size, int kind, int directory, uint64_t step) {
  snprintf(out, size, kind == DCR_HISTORY_BUNDLE ? "bundles/step-%08llu.dcr"
                      : directory               ? "keyframes/step-%08llu"
                                                : "keyframes/step-%08llu.safetensors",
           (unsigned long long)step);
}

/* Adds each bundle as the next step, after checking it whole and against the
 * state the plan ends in. */
static int plan_bundles(plan *p, const char *const *paths, size_t n, const dcr_limits *lim,
                        const dcr_history_options *o, dcr_detail *d) {
  for (size_t b = 0; b < n; b++) {
    const dcr__hmember *last = &p->x.m[p->x.count - 1];
    dcr_reader *r;
    int err = dcr_reader_open_file(&r, paths[b], lim, d);
    if (!err) dcr_reader_set_threads(r, o->threads);
    if (!err && o->require_signature) err = dcr_reader_verify_signature(r, o->require_signature, NULL, d);
    if (!err) err = dcr_reader_verify(r, d);
    if (err) return dcr_reader_free(r), note_file(d, paths[b]), err;
    dcr_bundle_info info;
    dcr_reader_info(r, &info);
    char a[33], c[33], name[64];
    int want = p->x.m[0].directory ? DCR_KIND_SET : DCR_KIND_SAFETENSORS;
    if (info.kind != want) {
      dcr_reader_free(r);
      return note_file(d, paths[b]), dcr__fail(d, DCR_E_ARGUMENT, "a bundle of %s checkpoints: an archive of %s "
                                               "keyframes holds bundles of %s (SPEC.md §19.2)",
                                               kind_name(info.kind), p->x.m[0].directory ? "directory" : "file",
                                               kind_name(want));
    }
    if (memcmp(info.base_state, dcr__hmember_end_state(last), 16)) {
      dcr__hex(info.base_state, 16, a), dcr__hex(dcr__hmember_end_state(last), 16, c);
      dcr_reader_free(r);
      return note_file(d, paths[b]), dcr__fail(d, DCR_E_BASE_MISMATCH, "this bundle applies to state %s, but the "
                                               "archive ends in state %s (step %llu)", a, c,
                                               (unsigned long long)last->step);
    }
    dcr__hmember m = {.kind = DCR_HISTORY_BUNDLE, .step = last->step + 1, .name = name};
    member_name(name, sizeof name, m.kind, 0, m.step);
    memcpy(m.base, info.base_state, 16);
    memcpy(m.target, info.target_state, 16);
    if ((err = stream_file(paths[b], p->buf, NULL, NULL, UINT64_MAX, &m.size, m.digest, d)))
      return dcr_reader_free(r), err;
    m.meta_count = (size_t)info.meta_count;
    char *keys[64], *values[64];
    char **kp = m.meta_count <= 64 ? keys : malloc(m.meta_count * sizeof *kp);
    char **vp = m.meta_count <= 64 ? values : malloc(m.meta_count * sizeof *vp);
    if (!kp || !vp) {
      if (kp != keys) free(kp);
      if (vp != values) free(vp);
      dcr_reader_free(r);
      return dcr__fail(d, DCR_E_NOMEM, "cannot allocate metadata");
    }
    for (size_t k = 0; k < m.meta_count; k++) {
      dcr_meta pair;
      dcr_reader_meta(r, k, &pair);
      kp[k] = (char *)pair.key, vp[k] = (char *)pair.value;
    }
    m.meta_key = kp, m.meta_value = vp;
    const char *run = dcr__hmember_meta(&m, "run_id");
    if (!p->x.run_id && run && !(p->x.run_id = strdup(run))) err = dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
    if (!err) err = plan_add(p, &m, paths[b], r, d);
    else dcr_reader_free(r);
    if (kp != keys) free(kp);
    if (vp != values) free(vp);
    if (err) return err;
  }
  return DCR_OK;
}

/* The keyframes keyframe_every asks for among the new steps, built by applying
 * the new bundles to a work file that starts as the old archive's last step (or
 * the new archive's keyframe): each is a copy of the work file at its step. */
/* The new steps that keyframe_every asks a keyframe for. */
static size_t keyframes_due(const plan *p) {
  size_t due = 0;
  for (size_t i = p->old_count; p->x.keyframe_every && i < p->x.count; i++)
    due += p->x.m[i].kind == DCR_HISTORY_BUNDLE && p->x.m[i].step % p->x.keyframe_every == 0;
  return due;
}

static int plan_keyframes(plan *p, const char *archive, dcr_history *old, const char *first_keyframe,
                          const dcr_history_options *o, dcr_detail *d) {
  uint64_t every = p->x.keyframe_every;
  size_t fresh = p->x.count - p->old_count, due = keyframes_due(p);
  if (!due) return DCR_OK;
  if (p->x.m[0].directory)
    return dcr__fail(d, DCR_E_ARGUMENT, "keyframe_every: keyframes built from the chain are files only; an archive "
                     "of directory keyframes takes none (add them with dcr history create)");
  if (!(p->keys = calloc(due, sizeof *p->keys))) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  dcr__work w;
  int err = dcr__work_open(&w, archive, DCR__ATOMIC_REPLACE, d);
  if (err) return err;
  dcr_reader *lr = NULL;
  if (old) err = replay(old, old->x.m[old->x.count - 1].step, &w, o, &lr, d);
  else {
    uint64_t size;
    uint8_t digest[16];
    err = stream_file(first_keyframe, p->buf, sink_fd, &w.a.fd, UINT64_MAX, &size, digest, d);
  }
  dcr_reader_free(lr);
  dcr_apply_options aopt;
  dcr_apply_options_default(&aopt);
  aopt.threads = o->threads;
  aopt.cancel = o->cancel;
  aopt.sync = 0;
  for (size_t f = 0; f < fresh && !err; f++) {
    dcr__hmember *m = &p->x.m[p->old_count + f];
    if (m->kind != DCR_HISTORY_BUNDLE) continue;
    err = dcr__work_apply(&w, p->readers[f], DCR_VERIFY_CHUNK, &aopt, d);
    if (err || !every || m->step % every) continue;
    /* The keyframe must be exactly the step's state: checked whole once. */
    if ((err = dcr_check_target(p->readers[f], w.path, &aopt, d))) break;
    dcr__work *k = &p->keys[p->key_count];
    if ((err = dcr__work_open(k, archive, DCR__ATOMIC_REPLACE, d))) break;
    p->key_count++;
    dcr__hmember key = {.kind = DCR_HISTORY_KEYFRAME, .step = m->step};
    char name[64];
    member_name(name, sizeof name, key.kind, 0, key.step);
    key.name = name;
    memcpy(key.state, m->target, 16);
    /* The copy is hashed as it is made: the index's size and digest. */
    if (lseek(w.a.fd, 0, SEEK_SET) < 0) err = dcr__fail(d, DCR_E_IO, "cannot seek: %s", strerror(errno));
    if (!err) err = stream_fd(w.a.fd, p->buf, sink_fd, &k->a.fd, UINT64_MAX, &key.size, key.digest, d);
    /* Inserted right after its bundle (R-HIS-3): moved into place below. */
    if (!err) err = plan_add(p, &key, k->path, NULL, d);
  }
  dcr__atomic_abort(&w.a);
  if (err) return err;
  /* plan_add appended the keyframes at the end; put each after its bundle. */
  size_t n = p->x.count - p->old_count;
  dcr__hmember *tmp = malloc(n * sizeof *tmp);
  char **tp = malloc(n * sizeof *tp);
  dcr_reader **tr = malloc(n * sizeof *tr);
  if (!tmp || !tp || !tr) {
    free(tmp), free(tp), free(tr);
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  }
  size_t bundles = n - p->key_count, out = 0, kf = 0;
  for (size_t b = 0; b < bundles; b++) {
    size_t at = p->old_count + b;
    tmp[out] = p->x.m[at], tp[out] = p->paths[b], tr[out++] = p->readers[b];
    if (kf < p->key_count && p->x.m[p->old_count + bundles + kf].step == p->x.m[at].step) {
      size_t ka = bundles + kf++;
      tmp[out] = p->x.m[p->old_count + ka], tp[out] = p->paths[ka], tr[out++] = p->readers[ka];
    }
  }
  memcpy(p->x.m + p->old_count, tmp, n * sizeof *tmp);
  memcpy(p->paths, tp, n * sizeof *tp);
  memcpy(p->readers, tr, n * sizeof *tr);
  free(tmp), free(tp), free(tr);
  return DCR_OK;
}

/* The canonical index text of x, and in a plain tar the slot it is written in:
 * the text padded with spaces (JSON's whitespace, §19.3) to leave room for the
 * index of later steps, so that an append writes it in place (§19.6). The room is
 * as much again as the text, and at least 64 KiB (some 180 steps of bundles):
 * each time an append finds it full, the archive is rewritten once, with the
 * room doubled, so rewrites grow rarer as the archive grows. */
static int index_text(const dcr__hindex *x, int container, char **json, size_t *len, size_t *slot, dcr_detail *d) {
  int err = dcr__hindex_write(x, json, len, d);
  if (err || container != DCR_HISTORY_TAR) return *slot = *len, err;
  size_t room = *len > 65536 ? *len : 65536;
  *slot = (*len + room + 511) / 512 * 512;
  if (*slot > DCR__HISTORY_INDEX_MAX) *slot = *len > DCR__HISTORY_INDEX_MAX - 1 ? *len : DCR__HISTORY_INDEX_MAX;
  char *padded = realloc(*json, *slot + 1);
  if (!padded) return free(*json), *json = NULL, dcr__fail(d, DCR_E_NOMEM, "cannot allocate the index");
  memset(padded + *len, ' ', *slot - *len);
  padded[*slot] = 0;
  *json = padded;
  return DCR_OK;
}

/* Writes the planned archive at path, atomically: the index, the old archive's
 * members (each checked against the old index as it is copied), the new ones. */
static int plan_write(plan *p, const char *path, int container, dcr_history *old, unsigned flags,
                      const dcr_history_options *o, dcr_detail *d) {
  int err = dcr__hindex_check(&p->x, d);
  if (err) return err;
  char *json;
  size_t len, slot;
  if ((err = index_text(&p->x, container, &json, &len, &slot, d))) return err;
  dcr__atomic a;
  if ((err = dcr__atomic_open(&a, path, flags, d))) return free(json), err;
  dcr__hwriter *aw;
  if ((err = dcr__hwriter_open(&aw, a.fd, container, 0, d))) {
    free(json), dcr__atomic_abort(&a);
    return err;
  }
  err = dcr__hwriter_member(aw, DCR__HISTORY_INDEX_NAME, slot, d);
  if (!err) err = dcr__hwriter_write(aw, json, slot, d);
  free(json);
  for (size_t i = 0; i < p->old_count && !err; i++) {
    if (cancelled(o)) err = dcr__fail(d, DCR_E_INTERRUPTED, "interrupted");
    if (!err) err = copy_member(old, i, aw, o, d);
  }
  for (size_t i = p->old_count; i < p->x.count && !err; i++)
    err = cancelled(o) ? dcr__fail(d, DCR_E_INTERRUPTED, "interrupted")
                       : copy_file(aw, &p->x.m[i], p->paths[i - p->old_count], p->buf, d);
  if (!err) err = dcr__hwriter_close(aw, d);
  else dcr__hwriter_free(aw);
  if (!err) err = dcr__atomic_commit(&a, d);
  dcr__atomic_abort(&a);
  return err;
}

static int container_from_name(const char *path) {
  size_t n = strlen(path);
#define ENDS(s) (n >= sizeof(s) - 1 && !strcmp(path + n - (sizeof(s) - 1), s))
  if (ENDS(".tar")) return DCR_HISTORY_TAR;
  if (ENDS(".tar.zst") || ENDS(".tzst")) return DCR_HISTORY_TAR_ZSTD;
  if (ENDS(".zip")) return DCR_HISTORY_ZIP;
#undef ENDS
  return 0;
}

int dcr_history_create(const char *path, const char *keyframe, const char *const *bundles, size_t count,
                       const dcr_history_options *opt, dcr_detail *d) {
  if (d) dcr__detail_init(d);
  dcr_history_options def;
  const dcr_history_options *o = options_or_default(opt, &def);
  int container = o->container ? o->container : container_from_name(path);
  if (container < DCR_HISTORY_TAR || container > DCR_HISTORY_ZIP)
    return dcr__fail(d, DCR_E_ARGUMENT, "'%.200s': name the archive .tar, .tar.zst (.tzst) or .zip, or give "
                     "its container", path);
  if (o->first_step >= DCR__HISTORY_STEP_MAX) return dcr__fail(d, DCR_E_ARGUMENT, "step %llu is 2^53 or more",
                                                               (unsigned long long)o->first_step);
  if (o->run_id && dcr__meta_standard_check("run_id", o->run_id, NULL))
    return dcr__fail(d, DCR_E_ARGUMENT, "a run id of %zu bytes: 1 to 256 (SPEC.md §6.4.1)", strlen(o->run_id));
  /* Such a journal would undo appends to the new archive with the old one's bytes:
   * it is refused instead (and the next run finds it damaged). */
  char journal[4200];
  struct stat st;
  dcr__happend_name(journal, sizeof journal, path);
  if (!lstat(journal, &st))
    return dcr__fail(d, DCR_E_ARGUMENT, "'%.200s' is the journal of an append that did not finish: run dcr "
                     "history recover on the archive it belongs to, or remove it", journal);
  plan p = {0};
  if (!(p.buf = malloc(BUF_SIZE))) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  dcr_limits lim;
  options_limits(o, &lim);
  dcr_checkpoint *ck;
  char name[64];
  dcr__hmember key = {.kind = DCR_HISTORY_KEYFRAME, .step = o->first_step, .name = name};
  int directory = !stat(keyframe, &st) && S_ISDIR(st.st_mode), err = DCR_OK;
  member_name(name, sizeof name, key.kind, directory, key.step);
  if (directory) err = dir_keyframe(keyframe, &key, &lim, o->threads, p.buf, d);
  else {
    err = dcr_checkpoint_open(&ck, keyframe, DCR_KIND_SAFETENSORS, &lim, d);
    if (!err) err = dcr_checkpoint_state_id(ck, o->threads, key.state, d);
    dcr_checkpoint_free(ck);
    if (!err) err = stream_file(keyframe, p.buf, NULL, NULL, UINT64_MAX, &key.size, key.digest, d);
  }
  p.x.keyframe_every = o->keyframe_every;
  if (!err && o->run_id && !(p.x.run_id = strdup(o->run_id))) err = dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  if (!err) err = plan_add(&p, &key, keyframe, NULL, d);
  dir_keyframe_free(&key);
  if (err) note_file(d, keyframe);
  if (!err) err = plan_bundles(&p, bundles, count, &lim, o, d);
  if (!err) err = plan_keyframes(&p, path, NULL, keyframe, o, d);
  if (!err) err = plan_write(&p, path, container, NULL, commit_flags(o), o, d);
  if (err) note_file(d, path);
  plan_free(&p);
  return err;
}

/* The archive at path, open read-write and locked: an flock on the file that is
 * at path once it is held (an append that renamed a new archive over it
 * meanwhile has made the file we locked an old one). */
static int lock_archive(const char *path, int *fd, dcr_detail *d) {
  for (;;) {
    *fd = open(path, O_RDWR | O_CLOEXEC);
    if (*fd < 0) return dcr__fail(d, DCR_E_IO, "cannot open for writing: %s", strerror(errno));
    while (flock(*fd, LOCK_EX) < 0)
      if (errno != EINTR) {
        close(*fd);
        return dcr__fail(d, DCR_E_IO, "cannot lock: %s", strerror(errno));
      }
    struct stat held, now;
    if (!fstat(*fd, &held) && !stat(path, &now) && held.st_dev == now.st_dev && held.st_ino == now.st_ino)
      return DCR_OK;
    close(*fd);
  }
}

/* Rolls back what a dead appender left (SPEC.md §19.6), under both locks: no
 * appender is running, and no reader is reading. */
static int recover_locked(const char *path, int fd, int sync, int *rolled, dcr_detail *d) {
  int err = dcr__range_lock(fd, 1, d);
  if (!err) err = dcr__happend_rollback(path, fd, sync, rolled, d);
  dcr__range_unlock(fd);
  return err;
}

static int history_recover(const char *path, int sync, int *rolled, dcr_detail *d) {
  int fd, err = lock_archive(path, &fd, d);
  if (err) return err;
  err = recover_locked(path, fd, sync, rolled, d);
  close(fd);
  return err;
}

int dcr_history_recover(const char *path, const dcr_history_options *opt, int *rolled_back, dcr_detail *d) {
  if (d) dcr__detail_init(d);
  dcr_history_options def;
  const dcr_history_options *o = options_or_default(opt, &def);
  int rolled = 0, err = path ? history_recover(path, o->sync, &rolled, d) : dcr__fail(d, DCR_E_ARGUMENT, "no path");
  if (rolled_back) *rolled_back = rolled;
  if (err) note_file(d, path);
  return err;
}

/* Reads every member header to the end, the data unread (skipped by seeking),
 * and says whether an append may write in place (§19.6): a plain tar whose
 * members end at a block boundary with nothing after them but zeros (its end
 * blocks, its record's padding). Else the archive is rewritten. */
static int in_place_layout(dcr_history *h, int fd, dcr__happend *j, int *ok, dcr_detail *d) {
  *ok = 0;
  if (dcr__hreader_container(h->r) != DCR_HISTORY_TAR || h->index_length == UINT64_MAX) return DCR_OK;
  const dcr__hmember *m = &h->x.m[h->x.count - 1];
  int err = member_seek(h, h->x.count - 1, d);
  for (size_t f = 0; !err && f < m->file_count; f++) {
    char name[DCR__HISTORY_FILE_NAME_MAX];
    dcr__hmember file;
    dcr__hfile_member(m, f, name, &file);
    err = entry_next(h, h->x.count - 1, &file, d);
  }
  if (!err) err = end_check(h, d);
  struct stat st;
  if (!err && fstat(fd, &st)) err = dcr__fail(d, DCR_E_IO, "cannot stat: %s", strerror(errno));
  if (err) return err;
  memset(j, 0, sizeof *j);
  j->archive_size = (uint64_t)st.st_size;
  j->members_end = dcr__hreader_header_offset(h->r);
  j->index_offset = h->index_offset;
  j->index_length = h->index_length;
  if (j->index_offset < 512 || j->index_offset % 512 || j->members_end % 512 ||
      j->members_end < j->index_offset + j->index_length || j->members_end > j->archive_size ||
      j->archive_size - j->members_end > DCR__APPEND_ZEROS_MAX)
    return DCR_OK;
  uint8_t *tail = malloc(DCR__APPEND_ZEROS_MAX);
  if (!tail) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  size_t n = (size_t)(j->archive_size - j->members_end);
  err = dcr__pread_full(fd, tail, n, j->members_end, d);
  size_t z = 0;
  while (!err && z < n && !tail[z]) z++;
  free(tail);
  *ok = !err && z == n;
  return err;
}

/* The new members written over the old archive's end blocks, then the new index
 * over the old one, between a journal that can undo both (§19.6). The old
 * members are not written. Readers are held off by the range lock meanwhile. */
static int append_in_place(plan *p, const char *path, int fd, const dcr_history *old, const dcr__happend *j,
                           const char *json, size_t len, const dcr_history_options *o, dcr_detail *d) {
  int err = dcr__range_lock(fd, 1, d);
  if (err) return err;
  if (!(err = dcr__happend_begin(path, fd, j, o->sync, d))) {
    dcr__hwriter *aw = NULL;
    if (lseek(fd, (off_t)j->members_end, SEEK_SET) < 0)
      err = dcr__fail(d, DCR_E_IO, "cannot seek: %s", strerror(errno));
    if (!err) err = dcr__hwriter_open(&aw, fd, DCR_HISTORY_TAR, 1, d);
    for (size_t i = p->old_count; i < p->x.count && !err; i++)
      err = cancelled(o) ? dcr__fail(d, DCR_E_INTERRUPTED, "interrupted")
                         : copy_file(aw, &p->x.m[i], p->paths[i - p->old_count], p->buf, d);
    if (!err) err = dcr__hwriter_close(aw, d);
    else dcr__hwriter_free(aw);
    off_t end = err ? 0 : lseek(fd, 0, SEEK_CUR);
    if (!err && (end < 0 || ftruncate(fd, end)))
      err = dcr__fail(d, DCR_E_IO, "cannot end the archive: %s", strerror(errno));
    /* The text covers the old one; the padding after both is spaces already. */
    size_t n = len > old->index_text ? len : old->index_text;
    if (!err) err = dcr__happend_end(path, fd, j->index_offset, json, n, o->sync, d);
    if (err) { /* undone now if it can be, else by the next run */
      int rolled;
      dcr_detail ignored;
      dcr__happend_rollback(path, fd, o->sync, &rolled, &ignored);
    }
  }
  dcr__range_unlock(fd);
  return err;
}

int dcr_history_append(const char *path, const char *const *bundles, size_t count,
                       const dcr_history_options *opt, dcr_detail *d) {
  if (d) dcr__detail_init(d);
  dcr_history_options def;
  const dcr_history_options *o = options_or_default(opt, &def);
  int fd, rolled, err = lock_archive(path, &fd, d);
  if (err) return note_file(d, path), err;
  err = recover_locked(path, fd, o->sync, &rolled, d);
  dcr_limits lim;
  options_limits(o, &lim);
  dcr_history *old = NULL, *keys_from = NULL;
  plan p = {0};
  if (!err && !(p.buf = malloc(BUF_SIZE))) err = dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  if (!err) err = dcr__history_open(&old, NULL, fd, NULL, 0, &lim, d);
  for (size_t i = 0; !err && i < old->x.count; i++) err = dcr__hindex_add(&p.x, &old->x.m[i], d);
  if (!err) {
    p.old_count = p.x.count;
    p.x.keyframe_every = o->keyframe_every ? o->keyframe_every : old->x.keyframe_every;
    if (old->x.run_id && !(p.x.run_id = strdup(old->x.run_id))) err = dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  }
  if (!err) err = plan_bundles(&p, bundles, count, &old->lim, o, d);
  /* Keyframes are built from the old archive read a second time. */
  int keys = !err && keyframes_due(&p);
  if (keys && lseek(fd, 0, SEEK_SET) < 0) err = dcr__fail(d, DCR_E_IO, "cannot seek: %s", strerror(errno));
  if (keys && !err) err = dcr__history_open(&keys_from, NULL, fd, NULL, 0, &lim, d);
  if (keys && !err) err = plan_keyframes(&p, path, keys_from, NULL, o, d);
  if (!err) {
    dcr_history_free(old);
    old = NULL;
    if (lseek(fd, 0, SEEK_SET) < 0) err = dcr__fail(d, DCR_E_IO, "cannot seek: %s", strerror(errno));
  }
  if (!err) err = dcr__history_open(&old, NULL, fd, NULL, 0, &lim, d);
  int container = old ? dcr__hreader_container(old->r) : 0, in_place = 0;
  dcr__happend j;
  char *json = NULL;
  size_t len = 0;
  if (!err) err = dcr__hindex_check(&p.x, d);
  if (!err) err = dcr__hindex_write(&p.x, &json, &len, d);
  if (!err) err = in_place_layout(old, fd, &j, &in_place, d);
  if (!err && in_place && len <= j.index_length) err = append_in_place(&p, path, fd, old, &j, json, len, o, d);
  else if (!err) { /* read again from the start: the old members are copied */
    dcr_history_free(old);
    old = NULL;
    if (lseek(fd, 0, SEEK_SET) < 0) err = dcr__fail(d, DCR_E_IO, "cannot seek: %s", strerror(errno));
    if (!err) err = dcr__history_open(&old, NULL, fd, NULL, 0, &lim, d);
    if (!err) err = plan_write(&p, path, container, old, DCR__ATOMIC_REPLACE | (o->sync ? DCR__ATOMIC_SYNC : 0), o, d);
  }
  free(json);
  if (err) note_file(d, path);
  plan_free(&p);
  dcr_history_free(keys_from);
  dcr_history_free(old);
  close(fd); /* and the lock with it, once the new archive is in place */
  return err;
}
