/*
 * container.c - the containers of a history archive (SPEC.md §19.1), through
 * libarchive: tar (pax), tar compressed whole with zstd, and zip with stored
 * members. Only these are read, so that an archive another tool would not open
 * the same way is refused, not guessed at. Members are written with fixed
 * owners, modes and times, so that the same members make the same bytes.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <locale.h>
#include <pthread.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

#include "../net/remote.h"
#include "history.h"

#define REMOTE_BLOCK (64u << 10) /* what one read callback hands libarchive */

struct dcr__hreader {
  struct archive *a;
  struct archive_entry *e;
  int container;
  /* an archive behind a URL: read through libarchive's callbacks */
  dcr__robject *remote;
  uint64_t pos;
  uint8_t *block;
  int remote_err; /* the fetch's failure, which libarchive only knows as a message */
  dcr_detail remote_detail;
};

struct dcr__hwriter {
  struct archive *a;
  struct archive_entry *e;
};

/* Member names are UTF-8 (SPEC.md §19.1), but libarchive converts them to and from
 * the current locale's charset: in the C locale a process starts in, a name that
 * is not ASCII cannot be converted and the member is refused. A library must not
 * change its caller's locale, so each call into libarchive runs in a thread-local
 * C.UTF-8 locale (uselocale), in which names pass as the bytes they are. */
static pthread_once_t utf8_once = PTHREAD_ONCE_INIT;
static locale_t utf8_locale;

static void utf8_init(void) { utf8_locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0); }

static locale_t utf8_enter(void) {
  pthread_once(&utf8_once, utf8_init);
  return utf8_locale ? uselocale(utf8_locale) : (locale_t)0;
}

static void utf8_leave(locale_t prev) {
  if (prev) uselocale(prev);
}

/* libarchive says "Truncated tar archive", "Truncated input file" and the like
 * for an input that stops early, whatever the container. A failed fetch is the
 * fetch's error (DCR_E_FETCH, DCR_E_CHANGED), whatever libarchive made of it. */
static int fail_archive(dcr__hreader *r, dcr_detail *d, const char *what) {
  if (r->remote_err) {
    if (d) *d = r->remote_detail;
    return r->remote_err;
  }
  struct archive *a = r->a;
  const char *msg = archive_error_string(a);
  if (!msg) msg = "unknown libarchive error";
  int code = strstr(msg, "runcat") || strstr(msg, "premature") || strstr(msg, "Premature")
                 ? DCR_E_TRUNCATED : DCR_E_ARCHIVE;
  return dcr__fail(d, code, "%s: %s", what, msg);
}

static dcr__hreader *reader_new(int seekable) {
  dcr__hreader *r = calloc(1, sizeof *r);
  if (!r || !(r->a = archive_read_new())) {
    free(r);
    return NULL;
  }
  archive_read_support_filter_zstd(r->a);
  archive_read_support_format_tar(r->a);
  /* A zip is read by its central directory where the input can seek, so that a
   * zip cut short in its directory is refused as unzip refuses it; a pipe can
   * only be read by the members' local headers. */
  if (seekable) archive_read_support_format_zip_seekable(r->a);
  else archive_read_support_format_zip_streamable(r->a);
  /* A zip name without general purpose flag bit 11 is code page 437 (APPNOTE
   * appendix D), as Python's zipfile reads it; libarchive would take its bytes. */
  archive_read_set_format_option(r->a, "zip", "hdrcharset", "CP437");
  return r;
}

static int reader_opened(dcr__hreader **out, dcr__hreader *r, int la, dcr_detail *d) {
  if (la != ARCHIVE_OK) {
    /* Opening reads the first block and tells the format: a file that cannot be
     * read is an I/O error, one that is not an archive libarchive was asked to
     * read is not a history archive. */
    int e = archive_errno(r->a);
    int rc = e > 0 && e != EILSEQ && e != EINVAL && !r->remote_err
                 ? dcr__fail(d, DCR_E_IO, "cannot open: %s", archive_error_string(r->a))
                 : fail_archive(r, d, "not a tar, tar.zst or zip file (SPEC.md §19.1)");
    dcr__hreader_free(r);
    return rc;
  }
  *out = r;
  return DCR_OK;
}

static int in_utf8_hreader_open(dcr__hreader **out, const char *path, int fd, const void *memory,
                      size_t memory_size, dcr_detail *d) {
  *out = NULL;
  struct stat st;
  dcr__hreader *r = reader_new(path || (fd >= 0 && !fstat(fd, &st) && S_ISREG(st.st_mode)));
  if (!r) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate an archive reader");
  int la = memory ? archive_read_open_memory(r->a, memory, memory_size)
           : path ? archive_read_open_filename(r->a, path, 1 << 16)
                  : archive_read_open_fd(r->a, fd, 1 << 16);
  return reader_opened(out, r, la, d);
}

/* ---- an archive behind a URL: libarchive's callbacks over a remote object */

static la_ssize_t remote_read(struct archive *a, void *opaque, const void **buf) {
  dcr__hreader *r = opaque;
  uint64_t size = dcr__robject_size(r->remote);
  size_t n = size - r->pos < REMOTE_BLOCK ? (size_t)(size - r->pos) : REMOTE_BLOCK;
  *buf = r->block;
  if (!n) return 0;
  dcr__detail_init(&r->remote_detail);
  if ((r->remote_err = dcr__robject_read(r->remote, r->pos, n, r->block, &r->remote_detail))) {
    archive_set_error(a, EIO, "%s", r->remote_detail.message);
    return ARCHIVE_FATAL;
  }
  r->pos += n;
  return (la_ssize_t)n;
}

/* A skipped member's bytes are not fetched: the next read asks from past them. */
static la_int64_t remote_skip(struct archive *a, void *opaque, la_int64_t request) {
  (void)a;
  dcr__hreader *r = opaque;
  uint64_t left = dcr__robject_size(r->remote) - r->pos;
  uint64_t n = request > 0 ? ((uint64_t)request < left ? (uint64_t)request : left) : 0;
  r->pos += n;
  return (la_int64_t)n;
}

static la_int64_t remote_seek(struct archive *a, void *opaque, la_int64_t offset, int whence) {
  dcr__hreader *r = opaque;
  la_int64_t size = (la_int64_t)dcr__robject_size(r->remote);
  la_int64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? (la_int64_t)r->pos : size;
  if (offset < -base || offset > size - base) {
    archive_set_error(a, EINVAL, "a seek outside the archive");
    return ARCHIVE_FATAL;
  }
  r->pos = (uint64_t)(base + offset);
  return (la_int64_t)r->pos;
}

static int in_utf8_hreader_open_url(dcr__hreader **out, const char *url, const dcr_http_options *options,
                                    dcr_detail *d) {
  *out = NULL;
  dcr__robject *o;
  int rc = dcr__robject_open(&o, url, options, d);
  if (rc) return rc;
  /* A server that ignores Range sends the archive once, in order: it is read as
   * a pipe is (a zip by its local headers), which the layout allows (§19.4). */
  int seekable = !dcr__robject_streamed(o);
  dcr__hreader *r = reader_new(seekable);
  if (r) r->remote = o;
  if (!r || !(r->block = malloc(REMOTE_BLOCK))) {
    if (r) dcr__hreader_free(r);
    else dcr__robject_close(o);
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate an archive reader");
  }
  archive_read_set_callback_data(r->a, r);
  archive_read_set_read_callback(r->a, remote_read);
  archive_read_set_skip_callback(r->a, remote_skip);
  if (seekable) archive_read_set_seek_callback(r->a, remote_seek);
  return reader_opened(out, r, archive_read_open1(r->a), d);
}

void dcr__hreader_free(dcr__hreader *r) {
  if (!r) return;
  archive_read_free(r->a);
  dcr__robject_close(r->remote);
  free(r->block);
  free(r);
}

static int in_utf8_hreader_next(dcr__hreader *r, const char **name, uint64_t *size, int *regular, int *err,
                      dcr_detail *d) {
  int la = archive_read_next_header(r->a, &r->e);
  if (la == ARCHIVE_EOF) return 0;
  if (la != ARCHIVE_OK) { /* a warning too: a header libarchive had to repair */
    *err = fail_archive(r, d, "reading the archive");
    if (*err == DCR_E_ARCHIVE && archive_file_count(r->a) == 0 &&
        !strcmp(archive_error_string(r->a) ? archive_error_string(r->a) : "", "Unrecognized archive format"))
      dcr__fail(d, DCR_E_ARCHIVE, "not a tar, tar.zst or zip file (SPEC.md §19.1)");
    return -1;
  }
  int format = archive_format(r->a) & ARCHIVE_FORMAT_BASE_MASK;
  int filter = archive_filter_code(r->a, 0);
  /* libarchive names a zip entry's format by its method: "ZIP 1.0 (uncompressed)"
   * for a stored one, the only method §19.1 allows. */
  if (format == ARCHIVE_FORMAT_ZIP && filter == ARCHIVE_FILTER_NONE &&
      !strstr(archive_format_name(r->a), "uncompressed")) {
    *err = dcr__fail(d, DCR_E_ARCHIVE, "zip member '%.64s' is compressed (%s): members are stored "
                     "(SPEC.md §19.1)", archive_entry_pathname(r->e) ? archive_entry_pathname(r->e) : "",
                     archive_format_name(r->a));
    return -1;
  }
  if (format == ARCHIVE_FORMAT_ZIP && filter == ARCHIVE_FILTER_NONE) r->container = DCR_HISTORY_ZIP;
  else if (format == ARCHIVE_FORMAT_TAR && filter == ARCHIVE_FILTER_NONE) r->container = DCR_HISTORY_TAR;
  else if (format == ARCHIVE_FORMAT_TAR && filter == ARCHIVE_FILTER_ZSTD) r->container = DCR_HISTORY_TAR_ZSTD;
  else {
    *err = dcr__fail(d, DCR_E_ARCHIVE, "a %s archive%s%s: only tar, tar.zst and zip (SPEC.md §19.1)",
                     archive_format_name(r->a), filter != ARCHIVE_FILTER_NONE ? " compressed with " : "",
                     filter != ARCHIVE_FILTER_NONE ? archive_filter_name(r->a, 0) : "");
    return -1;
  }
  *name = archive_entry_pathname(r->e);
  if (!*name) *name = "";
  *size = archive_entry_size_is_set(r->e) && archive_entry_size(r->e) >= 0 ? (uint64_t)archive_entry_size(r->e)
                                                                           : UINT64_MAX;
  *regular = archive_entry_filetype(r->e) == AE_IFREG && !archive_entry_hardlink(r->e) &&
             !archive_entry_symlink(r->e);
  return 1;
}

static int in_utf8_hreader_read(dcr__hreader *r, void *buf, size_t cap, size_t *got, dcr_detail *d) {
  la_ssize_t n = archive_read_data(r->a, buf, cap);
  if (n < 0) return fail_archive(r, d, "reading a member");
  *got = (size_t)n;
  return DCR_OK;
}

int dcr__hreader_container(const dcr__hreader *r) { return r->container; }

/* Bytes consumed from the uncompressed archive: the tar reader consumes a
 * member's headers as it reads them and its data only when they are read. */
uint64_t dcr__hreader_data_offset(const dcr__hreader *r) { return (uint64_t)archive_filter_bytes(r->a, 0); }

uint64_t dcr__hreader_header_offset(const dcr__hreader *r) {
  return (uint64_t)archive_read_header_position(r->a);
}

static int in_utf8_hwriter_open(dcr__hwriter **out, int fd, int container, int unblocked, dcr_detail *d) {
  *out = NULL;
  dcr__hwriter *w = calloc(1, sizeof *w);
  if (!w || !(w->a = archive_write_new()) || !(w->e = archive_entry_new())) {
    if (w) archive_write_free(w->a);
    free(w);
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate an archive writer");
  }
  int la;
  if (container == DCR_HISTORY_ZIP) {
    /* Stored: a member's bytes lie whole in the file, as they are in a tar. */
    la = archive_write_set_format_zip(w->a);
    if (la == ARCHIVE_OK) la = archive_write_set_format_option(w->a, "zip", "compression", "store");
  } else {
    /* pax only where ustar cannot say it (long names, sizes of 8 GiB and more). */
    la = archive_write_set_format_pax_restricted(w->a);
    if (la == ARCHIVE_OK && container == DCR_HISTORY_TAR_ZSTD) la = archive_write_add_filter_zstd(w->a);
  }
  if (la == ARCHIVE_OK && unblocked) la = archive_write_set_bytes_in_last_block(w->a, 1);
  if (la == ARCHIVE_OK) la = archive_write_open_fd(w->a, fd);
  if (la != ARCHIVE_OK) {
    int rc = dcr__fail(d, DCR_E_IO, "cannot start the archive: %s", archive_error_string(w->a));
    dcr__hwriter_free(w);
    return rc;
  }
  *out = w;
  return DCR_OK;
}

static int in_utf8_hwriter_member(dcr__hwriter *w, const char *name, uint64_t size, dcr_detail *d) {
  archive_entry_clear(w->e);
  archive_entry_set_pathname(w->e, name);
  archive_entry_set_size(w->e, (la_int64_t)size);
  archive_entry_set_filetype(w->e, AE_IFREG);
  archive_entry_set_perm(w->e, 0644);
  /* 1980-01-01, the first time a zip can hold; no owner names: reproducible. */
  archive_entry_set_mtime(w->e, 315532800, 0);
  if (archive_write_header(w->a, w->e) != ARCHIVE_OK)
    return dcr__fail(d, DCR_E_IO, "cannot write member '%.64s': %s", name, archive_error_string(w->a));
  return DCR_OK;
}

static int in_utf8_hwriter_write(dcr__hwriter *w, const void *data, size_t size, dcr_detail *d) {
  const uint8_t *p = data;
  while (size) {
    la_ssize_t n = archive_write_data(w->a, p, size);
    if (n <= 0) return dcr__fail(d, DCR_E_IO, "cannot write to the archive: %s", archive_error_string(w->a));
    p += n, size -= (size_t)n;
  }
  return DCR_OK;
}

static int in_utf8_hwriter_close(dcr__hwriter *w, dcr_detail *d) {
  int rc = archive_write_close(w->a) == ARCHIVE_OK
               ? DCR_OK : dcr__fail(d, DCR_E_IO, "cannot finish the archive: %s", archive_error_string(w->a));
  dcr__hwriter_free(w);
  return rc;
}

void dcr__hwriter_free(dcr__hwriter *w) {
  if (!w) return;
  archive_entry_free(w->e);
  archive_write_free(w->a);
  free(w);
}

/* The doors: each runs its body in the UTF-8 locale (utf8_enter). */
int dcr__hreader_open(dcr__hreader **out, const char *path, int fd, const void *memory,
                      size_t memory_size, dcr_detail *d) {
  locale_t prev = utf8_enter();
  int rc = in_utf8_hreader_open(out, path, fd, memory, memory_size, d);
  utf8_leave(prev);
  return rc;
}

int dcr__hreader_open_url(dcr__hreader **out, const char *url, const dcr_http_options *options,
                          dcr_detail *d) {
  locale_t prev = utf8_enter();
  int rc = in_utf8_hreader_open_url(out, url, options, d);
  utf8_leave(prev);
  return rc;
}

int dcr__hreader_next(dcr__hreader *r, const char **name, uint64_t *size, int *regular, int *err,
                      dcr_detail *d) {
  locale_t prev = utf8_enter();
  int rc = in_utf8_hreader_next(r, name, size, regular, err, d);
  utf8_leave(prev);
  return rc;
}

int dcr__hreader_read(dcr__hreader *r, void *buf, size_t cap, size_t *got, dcr_detail *d) {
  locale_t prev = utf8_enter();
  int rc = in_utf8_hreader_read(r, buf, cap, got, d);
  utf8_leave(prev);
  return rc;
}

int dcr__hwriter_open(dcr__hwriter **out, int fd, int container, int unblocked, dcr_detail *d) {
  locale_t prev = utf8_enter();
  int rc = in_utf8_hwriter_open(out, fd, container, unblocked, d);
  utf8_leave(prev);
  return rc;
}

int dcr__hwriter_member(dcr__hwriter *w, const char *name, uint64_t size, dcr_detail *d) {
  locale_t prev = utf8_enter();
  int rc = in_utf8_hwriter_member(w, name, size, d);
  utf8_leave(prev);
  return rc;
}

int dcr__hwriter_write(dcr__hwriter *w, const void *data, size_t size, dcr_detail *d) {
  locale_t prev = utf8_enter();
  int rc = in_utf8_hwriter_write(w, data, size, d);
  utf8_leave(prev);
  return rc;
}

int dcr__hwriter_close(dcr__hwriter *w, dcr_detail *d) {
  locale_t prev = utf8_enter();
  int rc = in_utf8_hwriter_close(w, d);
  utf8_leave(prev);
  return rc;
}
