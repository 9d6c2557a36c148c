/*
 * remote_object.c - an object behind a URL read as a file is: in order, with
 * skips, and at random offsets, for dcr_history_open_url (libarchive's read,
 * skip and seek callbacks). The fetcher (remote.c) does the HTTP; this adds the
 * policy of a sequential reader: while each read starts where the last one
 * ended, the range after it is fetched ahead, half as far as the reader has read
 * in order (from AHEAD_MIN, up to AHEAD_MAX), asked in pieces of half that or
 * more, so that reading a member is a few large requests, not one per block,
 * and what is fetched ahead and never read (where the reader stops: the end of
 * the last member a step needs) is at most half what it has read; a jump (a skipped member, a seek) starts again at nothing,
 * so that skipping a member costs the block its header lies in. What lies more
 * than KEEP behind the reader is dropped from the spool: reading a large
 * archive in order holds the read-ahead on disk, not the archive.
 */
#include <stdlib.h>

#include "remote.h"

#define AHEAD_MIN (128u << 10)
#define AHEAD_MAX (16u << 20) /* four requests of remote.c's largest, in flight at once */
#define KEEP (1u << 20)      /* a seek a little back (a zip's local header) is still held */

struct dcr__robject {
  dcr__remote *rm;
  uint64_t next;  /* where the last read ended */
  uint64_t run;   /* bytes read in order since the last jump */
  uint64_t asked; /* the read-ahead has been asked up to here */
};

int dcr__robject_open(dcr__robject **out, const char *url, const dcr_http_options *options,
                      dcr_detail *d) {
  *out = NULL;
  dcr__robject *o = calloc(1, sizeof *o);
  if (!o) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  /* no size limit here: an archive's members are checked against the reader's */
  int rc = dcr__remote_open(&o->rm, url, options, UINT64_MAX, 0, d);
  if (rc) return free(o), rc;
  *out = o;
  return DCR_OK;
}

uint64_t dcr__robject_size(const dcr__robject *o) { return dcr__remote_size(o->rm); }

int dcr__robject_streamed(const dcr__robject *o) { return dcr__remote_streamed(o->rm); }

int dcr__robject_read(dcr__robject *o, uint64_t offset, size_t length, void *out, dcr_detail *d) {
  if (offset != o->next) o->run = 0, o->asked = 0;
  uint64_t end = offset + length;
  o->run += length, o->next = end;
  uint64_t want = o->run < AHEAD_MIN ? 0 : o->run / 2 < AHEAD_MAX ? o->run / 2 : AHEAD_MAX;
  if (o->asked < end) o->asked = end;
  if (want && o->asked - end < want / 2) {
    dcr__remote_ahead(o->rm, o->asked, end + want - o->asked);
    o->asked = end + want;
  }
  int rc = dcr__remote_read(o->rm, offset, length, out, d);
  dcr__remote_forget(o->rm, offset > KEEP ? offset - KEEP : 0);
  return rc;
}

void dcr__robject_close(dcr__robject *o) {
  if (!o) return;
  dcr__remote_close(o->rm);
  free(o);
}
