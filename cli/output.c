/*
 * output.c - where the CLI's results go: outputs committed by rename only after
 * success, bundles read from standard input, progress lines and signals.
 */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

volatile int cli_interrupted;

static void on_signal(int sig) {
  (void)sig;
  cli_interrupted = 1;
}

void cli_signals_install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

void cli_progress(void *opaque, uint64_t done, uint64_t total) {
  cli_progress_state *p = opaque;
  double t = now();
  if (!p->start) p->start = t;
  if (p->shown && t - p->last < 0.1 && done < total) return;
  p->last = t;
  uint64_t percent = total ? (done > total ? 100 : done * 100 / total) : 100;
  double elapsed = t - p->start, rate = elapsed > 0.2 ? (double)done / elapsed : 0;
  char a[32], b[32], c[32], left[32] = "";
  if (rate > 0 && done < total) {
    long s = (long)((double)(total - done) / rate + 0.5);
    if (s < 60) snprintf(left, sizeof left, ", %lds left", s);
    else snprintf(left, sizeof left, ", %ldm%02lds left", s / 60, s % 60);
  }
  fprintf(stderr, "\r\033[K%s: %3llu%% (%s of %s", p->what, (unsigned long long)percent,
          cli_bytes(done, a), cli_bytes(total, b));
  if (rate > 0) fprintf(stderr, ", %s/s%s", cli_bytes((uint64_t)rate, c), left);
  fputc(')', stderr);
  p->shown = 1;
}

void cli_progress_end(cli_progress_state *p) {
  if (p->shown) fputs("\r\033[K", stderr);
  p->shown = 0;
  p->start = p->last = 0;
}

int cli_check_checkpoint(const char *path) {
  struct stat st;
  if (stat(path, &st) || S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) return CLI_OK; /* the library says */
  fprintf(stderr, "dcr: %s: not a regular file: a checkpoint is read at random offsets, so it "
          "cannot come from a pipe or device (a bundle can)\n", path);
  return CLI_USAGE;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *f) {
  (void)st, (void)flag, (void)f;
  remove(path);
  return 0;
}

void cli_remove_tree(const char *path) { nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

int cli_check_output_dir(const char *path, int force, const char *base) {
  struct stat st;
  char base_real[PATH_MAX], where[PATH_MAX], parent[PATH_MAX];
  if (!strcmp(path, "-")) return cli_usage("apply", "a checkpoint set is a directory: -o names one");
  int exists = !lstat(path, &st);
  if (exists && S_ISLNK(st.st_mode)) {
    fprintf(stderr, "dcr: %s: is a symbolic link; write a new directory and point the link at "
            "it (ln -sfn NEW %s); nothing written\n", path, path);
    return CLI_USAGE;
  }
  if (exists && !S_ISDIR(st.st_mode)) {
    fprintf(stderr, "dcr: %s: exists and is not a directory; a set's output is one\n", path);
    return CLI_USAGE;
  }
  /* The output (or, if new, its parent) resolved must not be the base or inside
   * it: the base would change, or gain the new directory as members. */
  const char *slash = strrchr(path, '/');
  snprintf(parent, sizeof parent, "%.*s", slash ? (int)(slash == path ? 1 : slash - path) : 1,
           slash ? path : ".");
  if (realpath(base, base_real) && realpath(exists ? path : parent, where)) {
    size_t n = strlen(base_real);
    if (exists && !strcmp(where, base_real)) {
      fprintf(stderr, "dcr: %s: is the base directory; write a new one, then switch to it "
              "(e.g. ln -sfn NEW CURRENT); nothing written\n", path);
      return CLI_USAGE;
    }
    if (!strncmp(where, base_real, n) && (where[n] == '/' || !where[n])) {
      fprintf(stderr, "dcr: %s: is inside the base directory %s, whose members it would "
              "become; choose another output (nothing written)\n", path, base);
      return CLI_USAGE;
    }
  }
  if (exists && !force) {
    fprintf(stderr, "dcr: %s: already exists; use -f to replace it\n", path);
    return CLI_USAGE;
  }
  return CLI_OK;
}

const char *cli_checkpoint_path(const char *path, char *buf, size_t cap) {
  static const char suffix[] = ".safetensors.index.json";
  size_t n = strlen(path), k = sizeof suffix - 1;
  struct stat st;
  if (n < k || strcmp(path + n - k, suffix) || stat(path, &st) || !S_ISREG(st.st_mode)) return path;
  const char *slash = strrchr(path, '/');
  snprintf(buf, cap, "%.*s", slash ? (int)(slash == path ? 1 : slash - path) : 1, slash ? path : ".");
  return buf;
}

const char *cli_kind_name(int kind) {
  return kind == DCR_KIND_RAW ? "raw" : kind == DCR_KIND_SET ? "set" : "safetensors";
}

int cli_checkpoint_find(const dcr_checkpoint *ck, const char *name, size_t n, dcr_tensor_side *side,
                        uint64_t *at) {
  dcr_checkpoint_summary cs;
  dcr_checkpoint_info(ck, &cs);
  for (uint64_t i = 0; i < cs.tensor_count; i++) {
    const char *p;
    size_t len;
    dcr_checkpoint_tensor(ck, i, side, &p, &len);
    if (len == n && !memcmp(p, name, n)) return *at = cs.prefix_length + side->offset, 0;
  }
  return -1;
}

int cli_checkpoint_kind(const char *path, int raw) {
  struct stat st;
  if (!stat(path, &st) && S_ISDIR(st.st_mode)) return DCR_KIND_SET;
  return raw ? DCR_KIND_RAW : DCR_KIND_SAFETENSORS;
}

/* Whether path names the same file as input (device and inode: hard links and
 * symbolic links to it included). */
static int same_file(const struct stat *out, const char *input) {
  struct stat in;
  return strcmp(input, "-") && !stat(input, &in) && in.st_dev == out->st_dev && in.st_ino == out->st_ino;
}

int cli_check_output(const char *path, int force, const char *const *inputs, size_t n_inputs) {
  struct stat st;
  if (!strcmp(path, "-")) {
    if (isatty(STDOUT_FILENO)) {
      fprintf(stderr, "dcr: refusing to write binary data to a terminal; use -o FILE\n");
      return CLI_USAGE;
    }
    /* `dcr encode a b -o - >> a` would append to an input while reading it */
    for (size_t i = 0; !fstat(STDOUT_FILENO, &st) && S_ISREG(st.st_mode) && i < n_inputs; i++)
      if (same_file(&st, inputs[i])) {
        fprintf(stderr, "dcr: standard output is %s, an input; nothing written\n", inputs[i]);
        return CLI_USAGE;
      }
    return CLI_OK;
  }
  if (lstat(path, &st)) return CLI_OK; /* a new file */
  if (S_ISDIR(st.st_mode)) {
    fprintf(stderr, "dcr: %s: is a directory; -o wants a file name\n", path);
    return CLI_USAGE;
  }
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return CLI_OK; /* written into, never replaced */
  if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
    fprintf(stderr, "dcr: %s: not a regular file, FIFO or character device; nothing written\n", path);
    return CLI_USAGE;
  }
  for (size_t i = 0; S_ISREG(st.st_mode) && i < n_inputs; i++)
    if (same_file(&st, inputs[i])) {
      fprintf(stderr, "dcr: %s: is an input%s%s%s; choose another output (nothing written)\n",
              path, strcmp(path, inputs[i]) ? " (the same file as " : "",
              strcmp(path, inputs[i]) ? inputs[i] : "", strcmp(path, inputs[i]) ? ")" : "");
      return CLI_USAGE;
    }
  if (!force) {
    fprintf(stderr, "dcr: %s: already exists; use -f to replace it\n", path);
    return CLI_USAGE;
  }
  return CLI_OK;
}

int cli_output_open(cli_output *o, const char *path, int force, const char *const *inputs,
                    size_t n_inputs) {
  memset(o, 0, sizeof *o);
  o->path = path;
  o->fd = -1;
  int rc = cli_check_output(path, force, inputs, n_inputs);
  if (rc) return rc;
  if (!strcmp(path, "-")) {
    o->stream = 1;
    o->fd = STDOUT_FILENO;
    return CLI_OK;
  }
  struct stat st;
  if (!stat(path, &st) && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode))) {
    /* Opening a FIFO waits for its reader; an interrupt ends the wait. */
    while ((o->fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC)) < 0 && errno == EINTR && !cli_interrupted) {}
    if (o->fd < 0) {
      if (cli_interrupted) return CLI_INTERRUPTED;
      fprintf(stderr, "dcr: %s: DCR_E_IO: cannot open: %s\n", path, strerror(errno));
      return CLI_IO;
    }
    o->stream = 1;
    return CLI_OK;
  }
  dcr_detail d;
  dcr__detail_init(&d); /* an internal call adds to a detail: it starts clean here */
  int err = dcr__atomic_open(&o->atomic, path, (force ? DCR__ATOMIC_REPLACE : 0) | DCR__ATOMIC_SYNC, &d);
  if (err) return cli_report(path, err, &d), cli_exit_code(err);
  o->fd = o->atomic.fd;
  return CLI_OK;
}

int cli_write_fd(int fd, const void *data, size_t size) {
  const char *p = data;
  while (size) {
    ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR && !cli_interrupted) continue;
    if (n <= 0) return -1;
    p += n;
    size -= (size_t)n;
  }
  return 0;
}

int cli_output_write(void *opaque, const void *data, size_t size) {
  cli_output *o = opaque;
  if (!cli_write_fd(o->fd, data, size)) return 0;
  o->error = errno ? errno : EIO;
  return -1;
}

int cli_output_commit(cli_output *o) {
  if (o->stream) {
    int fd = o->fd;
    o->fd = -1;
    if (fd != STDOUT_FILENO && close(fd)) {
      fprintf(stderr, "dcr: %s: DCR_E_IO: cannot write: %s\n", o->path, strerror(errno));
      return CLI_IO;
    }
    return cli_interrupted ? CLI_INTERRUPTED : CLI_OK;
  }
  o->fd = -1;
  /* the file is made durable first, so that the last moment an interrupt can still
   * undo the command is just before the commit, after which the output is whole
   * and in place (the commit's own fsync then finds nothing to do) */
  if (fsync(o->atomic.fd)) {
    fprintf(stderr, "dcr: %s: DCR_E_IO: fsync failed: %s\n", o->path, strerror(errno));
    return dcr__atomic_abort(&o->atomic), CLI_IO;
  }
  if (cli_interrupted) return dcr__atomic_abort(&o->atomic), CLI_INTERRUPTED;
  dcr_detail d;
  dcr__detail_init(&d);
  int err = dcr__atomic_commit(&o->atomic, &d);
  if (err) return cli_report(o->path, err, &d), cli_exit_code(err);
  return CLI_OK;
}

void cli_output_abort(cli_output *o) {
  if (o->stream) {
    if (o->fd > STDOUT_FILENO) close(o->fd);
    o->fd = -1;
    return;
  }
  dcr__atomic_abort(&o->atomic);
  o->fd = -1;
}

static int read_failed(dcr_detail *d, const char *name, int code, const char *what) {
  memset(d, 0, sizeof *d);
  d->offset = d->tensor = d->chunk = DCR_NONE;
  d->code = code;
  snprintf(d->file, sizeof d->file, "%s", name);
  if (code == DCR_E_NOMEM || code == DCR_E_LIMIT)
    snprintf(d->message, sizeof d->message, "a bundle read from a pipe is held in memory, and "
             "this one is larger than %s; give it as a file", what);
  else snprintf(d->message, sizeof d->message, "%s", what);
  return code;
}

/* Reads a bundle from a pipe into memory, looking at its header as soon as it has
 * it: a stream that is not a bundle fails after 8 bytes, not after all of it. The
 * whole bundle is needed (the footer is at its end), so it is held, up to the
 * memory budget. */
static int read_stream(int fd, const char *name, void **memory, size_t *size, dcr_detail *d) {
  const dcr_limits lim = cli_limits;
  uint64_t cap_limit = lim.max_memory < lim.max_bundle_size ? lim.max_memory : lim.max_bundle_size;
  size_t cap = 1 << 16, n = 0;
  int header_seen = 0;
  char *buf = malloc(cap);
  for (;;) {
    if (!buf) return read_failed(d, name, DCR_E_NOMEM, "cannot hold the bundle in memory");
    ssize_t r = read(fd, buf + n, cap - n);
    if (cli_interrupted) return free(buf), read_failed(d, name, DCR_E_INTERRUPTED, "interrupted");
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return free(buf), read_failed(d, name, DCR_E_IO, strerror(errno));
    if (r == 0) break;
    n += (size_t)r;
    if (!header_seen && n >= 64) {
      /* What the 64-byte header decides (R-HDR-1..5) does not depend on the rest. */
      dcr_reader *probe = NULL;
      int rc = dcr_reader_open_memory(&probe, buf, 64, &cli_limits, d);
      dcr_reader_free(probe);
      if (rc == DCR_E_MAGIC || rc == DCR_E_CHECKSUM || rc == DCR_E_VERSION || rc == DCR_E_RESERVED) {
        snprintf(d->file, sizeof d->file, "%s", name);
        return free(buf), rc;
      }
      header_seen = 1;
    }
    if (n == cap) {
      if ((uint64_t)cap >= cap_limit) {
        char a[32];
        free(buf);
        return read_failed(d, name, lim.max_memory < lim.max_bundle_size ? DCR_E_NOMEM : DCR_E_LIMIT,
                           cli_bytes(cap_limit, a));
      }
      size_t grow = (uint64_t)cap * 2 > cap_limit ? (size_t)cap_limit : cap * 2;
      char *p = realloc(buf, grow);
      if (!p) free(buf);
      buf = p;
      cap = grow;
    }
  }
  *memory = buf;
  *size = n;
  return DCR_OK;
}

int cli_open_bundle(const char *path, dcr_reader **reader, void **memory, dcr_detail *d) {
  *memory = NULL;
  *reader = NULL;
  struct stat st;
  int is_stdin = !strcmp(path, "-");
  if (cli_is_url(path)) return cli_open_url(path, reader, d);
  if (!is_stdin && (stat(path, &st) || !(S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode))))
    return dcr_reader_open_file(reader, path, &cli_limits, d);
  const char *name = is_stdin ? "(stdin)" : path;
  int fd = STDIN_FILENO;
  if (!is_stdin) {
    while ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 && errno == EINTR && !cli_interrupted) {}
    if (fd < 0)
      return read_failed(d, name, cli_interrupted ? DCR_E_INTERRUPTED : DCR_E_IO,
                         cli_interrupted ? "interrupted" : strerror(errno));
  }
  size_t n = 0;
  int rc = read_stream(fd, name, memory, &n, d);
  if (!is_stdin) close(fd);
  if (rc) return rc;
  rc = dcr_reader_open_memory(reader, *memory, n, &cli_limits, d);
  if (rc && !strcmp(d->file, "<memory>")) snprintf(d->file, sizeof d->file, "%s", name);
  return rc;
}
