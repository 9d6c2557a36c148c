/*
 * remote.h - bundles over HTTP range requests (SPEC.md §21): the response rules
 * (response.c, no I/O, so that they can be fuzzed and tested alone) and the
 * fetcher behind dcr_reader_open_url (remote.c, libcurl).
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

/* The URL without userinfo, query or fragment, for messages: a presigned URL's
 * query is a secret. */
DCR_HIDDEN void dcr__url_shown(const char *url, char *out, size_t capacity);

#endif
