/*
 * atomic.h - an output file that appears whole or not at all: written as a
 * temporary file in the destination's directory and committed by a link or a
 * rename (SPEC.md §10: nothing is left at the output unless every check passed).
 *
 * The temporary file has no name where the filesystem supports O_TMPFILE (a
 * crash, SIGKILL or OOM then leaves nothing behind); elsewhere it is a short
 * hidden name, ".dcr-XXXXXX", in the same directory (short, so that an output
 * name near NAME_MAX still works). Its mode is 0666 less the umask, applied by
 * open() itself: the process umask is never changed. Replacing an existing file
 * keeps that file's mode, and its owner and group where permitted.
 */
#ifndef DCR_ATOMIC_H
#define DCR_ATOMIC_H

#include <sys/stat.h>

#include "common.h"

#define DCR__ATOMIC_REPLACE 1u /* commit may replace a file at dest (else DCR_E_IO "exists") */
#define DCR__ATOMIC_SYNC 2u    /* fsync the file before, and the directory after, the commit */
#define DCR__ATOMIC_NAMED 4u   /* a hidden name even where O_TMPFILE works (for tests) */

typedef struct {
  int fd;          /* the temporary file, open read-write: write it with pwrite */
  int dir_fd;      /* the destination's directory */
  unsigned flags;
  int unnamed;     /* 1: O_TMPFILE, no directory entry until the commit */
  int had_old;     /* a file was at dest when opened (its mode and owner were copied) */
  const char *dest;   /* as given; must outlive the dcr__atomic */
  const char *name;   /* dest's last component, inside dest */
  char tmp_name[32];  /* the hidden name, when not unnamed */
} dcr__atomic;

/* Creates the temporary file for dest. Without DCR__ATOMIC_REPLACE an existing
 * dest fails at once with DCR_E_IO ("exists"). Errors name dest. On failure
 * nothing is left to abort (a->fd < 0). */
DCR_HIDDEN int dcr__atomic_open(dcr__atomic *a, const char *dest, unsigned flags, dcr_detail *d);
/* Fails with DCR_E_IO "needs X, Y free", naming dest, when the filesystem says
 * (statvfs) that fewer than `bytes` are available to this user. */
DCR_HIDDEN int dcr__atomic_check_space(const dcr__atomic *a, uint64_t bytes, dcr_detail *d);
/* The same for any open file or directory `fd` of the filesystem that dest is on. */
DCR_HIDDEN int dcr__check_space(int fd, uint64_t bytes, const char *dest, dcr_detail *d);
/* fsync (SYNC), then puts the file at dest: without REPLACE a file that appeared
 * at dest meanwhile is kept and the commit fails with DCR_E_IO ("exists"); then
 * fsyncs the directory (SYNC). Closes everything; on failure the temporary file
 * is removed too (no abort needed). */
DCR_HIDDEN int dcr__atomic_commit(dcr__atomic *a, dcr_detail *d);
/* Closes and removes the temporary file; safe after a failed open or a commit. */
DCR_HIDDEN void dcr__atomic_abort(dcr__atomic *a);

/* A sink (dcr_write_fn) that writes an atomic output's temporary file front to
 * back, for a bundle writer; `error` keeps the errno of a failed write, so that
 * the caller can say the output was at fault, and why. */
typedef struct {
  dcr__atomic out;
  uint64_t at;
  int error;
} dcr__file_sink;
DCR_HIDDEN int dcr__file_sink_write(void *opaque, const void *data, size_t size);

#endif
