/*
 * series.c - a chain of bundles applied one after another to a work file, the
 * way dcr apply's series and history extract rebuild a step without writing an
 * intermediate checkpoint anywhere a user sees it: each bundle patches the work
 * file in place (only its changed chunks are written), and one that changes the
 * layout (a tensor added, removed or recoded) is copied into a new work file.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "refit.h"

int dcr__write_fd(void *opaque, const void *data, size_t size) {
  int fd = *(const int *)opaque;
  const char *p = data;
  while (size) {
    ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n, size -= (size_t)n;
  }
  return 0;
}

int dcr__work_open(dcr__work *w, const char *beside, unsigned flags, dcr_detail *d) {
  w->beside = beside;
  w->flags = flags;
  int err = dcr__atomic_open(&w->a, beside, flags | DCR__ATOMIC_NAMED, d);
  const char *slash = strrchr(beside, '/');
  if (!err && snprintf(w->path, sizeof w->path, "%.*s%s", slash ? (int)(slash - beside + 1) : 0, beside,
                       w->a.tmp_name) >= (int)sizeof w->path) {
    dcr__atomic_abort(&w->a);
    return dcr__fail(d, DCR_E_ARGUMENT, "the path '%.200s' is too long", beside);
  }
  return err;
}

int dcr__work_apply(dcr__work *w, dcr_reader *r, int verify, const dcr_apply_options *opt, dcr_detail *d) {
  dcr_patch *p;
  int err = dcr_patch_create(&p, r, d);
  if (err) return err;
  dcr_patch_set_verify(p, verify);
  dcr_patch_set_threads(p, opt->threads);
  dcr_patch_set_sync(p, 0);
  if (opt->cancel) dcr_patch_set_cancel(p, opt->cancel);
  err = dcr_patch_file(p, w->path, d);
  dcr_patch_free(p);
  if (err != DCR_E_ARGUMENT) return err;
  /* The layout changes: this step is a copy into a new work file. */
  dcr__work next;
  if ((err = dcr__work_open(&next, w->beside, w->flags, d))) return err;
  if ((err = dcr_apply_to(r, w->path, opt, dcr__write_fd, &next.a.fd, d))) {
    dcr__atomic_abort(&next.a);
    return err;
  }
  dcr__atomic_abort(&w->a);
  *w = next;
  return DCR_OK;
}
