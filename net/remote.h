/*
 * remote.h - objects over HTTP range requests (SPEC.md §21): the response rules
 * (response.c, no I/O, so that they can be fuzzed and tested alone), the fetcher
 * behind dcr_reader_open_url (remote.c, libcurl) and the object reader behind
 * dcr_history_open_url (remote_object.c).
 */
#ifndef DCR_NET_REMOTE_H
#define DCR_NET_REMOTE_H

#include "../format/format.h"

#define DCR__VALIDATOR_MAX 200 /* longer ETag or Last-Modified values are refused */
#define DCR__LOCATION_MAX 8192 /* and longer Location values */

/* The object as the first response described it; every later one must agree. */
typedef struct {
  uint64_t size;
  char etag[DCR__VALIDATOR_MAX + 1];          /* "" if none */
  char last_modified[DCR__VALIDATOR_MAX + 1]; /* "" if none */
} dcr__object;

/* What a response's headers said, from its last status line (a redirect or an
 * interim 1xx starts another response). */
typedef struct {
  int status;             /* 0 until a status line */
  int has_range;          /* Content-Range: bytes FIRST-LAST/TOTAL (or an unknown TOTAL) */
  uint64_t first, last, total;
  int total_known;
  int has_length;
  uint64_t length;        /* Content-Length */
  int malformed;          /* a header this reader relies on did not parse */
  char etag[DCR__VALIDATOR_MAX + 1];
  char last_modified[DCR__VALIDATOR_MAX + 1];
  char location[DCR__LOCATION_MAX + 1]; /* a redirect's target, "" if none */
} dcr__response;

/* Feeds one header line as received (CRLF included or not). */
DCR_HIDDEN void dcr__response_header(dcr__response *r, const char *line, size_t length);

/* What to do with a response to a request for [offset, offset + length) of the
 * object (length 0 and offset 0: the first request, a suffix of the object,
 * when nothing is known of it; obj then gets filled). */
enum {
  DCR__RESP_PART = 1,  /* 206 for exactly what was asked: its body is those bytes */
  DCR__RESP_WHOLE,     /* 200: its body is the whole object */
  DCR__RESP_RETRY,     /* a transient failure (5xx, 429, 408): ask again */
  DCR__RESP_FAIL,      /* *code and d say why: DCR_E_FETCH or DCR_E_CHANGED */
  DCR__RESP_REDIRECT   /* 301, 302, 303, 307, 308 with a Location: ask it */
};
DCR_HIDDEN int dcr__response_judge(const dcr__response *r, dcr__object *obj, int first,
                                   uint64_t offset, uint64_t length, int *code, dcr_detail *d);

/* For the fuzzer (fuzz/fuzz_http.c): a Unix socket that every connection goes
 * to instead of the URL's host (NULL: none; no ports, so no TIME-WAIT at
 * thousands of runs a second), and the first retry's delay, doubled for each next
 * one (100 ms). */
typedef struct {
  const char *unix_socket;
  unsigned backoff_ms;
} dcr__net_hooks;
DCR_HIDDEN extern dcr__net_hooks dcr__net_test;

/* The fetcher (remote.c): one object behind a URL, read by range requests into
 * a spool file, with the response rules above, retries, redirects, the deadline
 * and the caller's headers of dcr_http_options. Its first request (a suffix)
 * learns the size and validators; a 200 to it means the server ignores Range,
 * and the body then arrives whole, in order (dcr__remote_streamed). `bundle`:
 * the object's first bytes are checked as a bundle header as they arrive, and
 * max_size is the bundle limit (DCR_E_LIMIT). */
typedef struct dcr__remote dcr__remote;
DCR_HIDDEN int dcr__remote_open(dcr__remote **rm, const char *url, const dcr_http_options *options,
                                uint64_t max_size, int bundle, dcr_detail *d);
/* Waits until [offset, offset + length) is fetched (asking for it, rounded up
 * to 64 KiB, first) and copies it out; the fetch's failure otherwise. */
DCR_HIDDEN int dcr__remote_read(dcr__remote *rm, uint64_t offset, size_t length, uint8_t *out,
                                dcr_detail *d);
/* Fetch this range after what readers wait for (it replaces the last one). */
DCR_HIDDEN void dcr__remote_ahead(dcr__remote *rm, uint64_t offset, uint64_t length);
/* Drops what the spool holds below `below`: read again, it is fetched again. */
DCR_HIDDEN void dcr__remote_forget(dcr__remote *rm, uint64_t below);
DCR_HIDDEN uint64_t dcr__remote_size(const dcr__remote *rm);
DCR_HIDDEN int dcr__remote_streamed(const dcr__remote *rm);
DCR_HIDDEN void dcr__remote_close(dcr__remote *rm);

/* remote_object.c: an object read in order or at random offsets, with read-ahead
 * while the reads follow one another (what libarchive's callbacks need). */
typedef struct dcr__robject dcr__robject;
DCR_HIDDEN int dcr__robject_open(dcr__robject **o, const char *url, const dcr_http_options *options,
                                 dcr_detail *d);
DCR_HIDDEN uint64_t dcr__robject_size(const dcr__robject *o);
/* The server ignores Range: read only in order, each byte once. */
DCR_HIDDEN int dcr__robject_streamed(const dcr__robject *o);
/* Bytes [offset, offset + length) of the object, which must lie inside it. */
DCR_HIDDEN int dcr__robject_read(dcr__robject *o, uint64_t offset, size_t length, void *out,
                                 dcr_detail *d);
DCR_HIDDEN void dcr__robject_close(dcr__robject *o);

/* The URL without userinfo, query or fragment, for messages: a presigned URL's
 * query is a secret. */
DCR_HIDDEN void dcr__url_shown(const char *url, char *out, size_t capacity);

#endif
