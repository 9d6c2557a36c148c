/*
 * remote.c - dcr_reader_open_url: a bundle read by HTTP range requests (SPEC.md
 * §21), and the fetcher behind dcr_history_open_url. One fetcher thread drives
 * libcurl's multi interface: a few requests in flight, each body streamed into
 * a nameless spool file at its offset, so that memory stays small whatever the
 * bundle's size and a second pass over the chunks reads them locally. Reader
 * threads ask for byte ranges and wait until the spool holds them; what they
 * ask comes first, then the plan (the chunk sections the reader will use,
 * coalesced), fetched ahead as one stream in file order, so that an apply, whose
 * checking pass takes the chunks in that order, works on each as it arrives
 * (SPEC.md §10.3) and the fetch overlaps the apply.
 *
 * Faults: a failed, cut, stalled or too slow transfer is asked again, from
 * where its body stopped, with backoff; a change of the object (validators,
 * size, 412) or a response that breaks the rules of §21.3 stops every read with
 * its error, and so do the deadline and the caller's cancel.
 *
 * Each response is judged when its headers end, and a body the reader will not
 * use (an error page, a redirect's) is not read. A body is spooled as it
 * arrives and readers may use its bytes at once, so a server that ignores Range
 * and sends the whole object (200) is walked as it arrives and stopped at the
 * walk's first failure; its first bytes, the bundle header, are checked before
 * any is kept.
 *
 * Redirects are followed here, not by libcurl, so that the caller's headers go
 * only to the URL's own origin (libcurl would send every header but
 * Authorization and Cookie to any host a redirect names).
 *
 * The same fetcher reads a history archive (remote_object.c, through
 * dcr__remote_open with bundle 0): no bundle header to check and no bundle size
 * limit; its reader asks ranges ahead of itself (dcr__remote_ahead, after the
 * reads that wait) and drops what it has passed (dcr__remote_forget).
 */
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "remote.h"

#define TAIL_BYTES (64u << 10)   /* the first request: footer, index and more */
#define MIN_REQUEST (64u << 10)  /* a read not planned is rounded up to this */
#define SPAN_BYTES (4u << 20)    /* the largest request for what readers wait for or
                                    read ahead: several spans fly at once */
#define STREAM_BYTES (64u << 20) /* the largest request for the plan: one at a time */
#define MERGE_GAP (64u << 10)    /* planned ranges closer than this are asked as one */
#define MAX_REDIRECTS 8
#define LOW_SPEED 1024u          /* bytes a second, by default, over: */
#define LOW_SPEED_WINDOW 5u      /* seconds (or timeout_s if shorter) */
#define ORIGIN_MAX 320           /* "scheme://host:port" */

typedef struct {
  dcr__remote *rm;
  CURL *easy;
  struct curl_slist *headers;
  int busy;    /* a request in flight, or waiting for its retry */
  int waiting; /* in backoff: not in the multi handle */
  int first;   /* the suffix request that learns the object */
  int planned; /* a request for the plan: the one stream (see pick) */
  uint64_t offset, length, received; /* what this attempt asks for and has stored */
  int verdict;                       /* DCR__RESP_*, 0 before the first body byte */
  int code;                          /* for a failed verdict or a refused body */
  dcr_detail detail;
  unsigned attempts;
  struct timespec not_before;
  char *url;          /* the redirect being followed, or NULL: the reader's URL */
  unsigned redirects; /* followed for this request */
  curl_off_t seen;             /* body bytes libcurl reported last */
  struct timespec last_byte;   /* when they grew (or the request started) */
  curl_off_t window_bytes;     /* body bytes when the low-speed window started */
  struct timespec window_start;
  int stalled;                 /* stopped: nothing arrived for timeout_s */
  int slow;                    /* stopped: under low_speed over its window */
  unsigned slow_stops;         /* slow or stalled attempts since this request last
                                  made a window's worth of progress */
  char error[CURL_ERROR_SIZE];
  dcr__response resp;
} xfer;

struct dcr__remote {
  char *url;
  char shown[256];
  char **headers;
  size_t header_count;
  int header_follow;       /* the headers go to every origin a redirect names */
  char origin[ORIGIN_MAX]; /* the URL's: where the headers go */
  unsigned retries, timeout_s, inflight, low_speed, deadline_s;
  struct timespec deadline;
  const volatile int *cancel;
  int bundle;        /* the object is a bundle: its header is checked as it arrives */
  uint64_t max_size; /* the first response may announce no more */
  char *ca_file;
  int spool;
  dcr__object obj;
  int known;        /* obj is filled */
  int served_whole; /* the first response was a 200: the object comes whole */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  dcr__range *have, *queue, *plan;
  size_t have_n, have_cap, queue_n, queue_cap, plan_n, plan_next;
  dcr__range ahead; /* read ahead of a sequential reader (dcr__remote_ahead) */
  int plan_active;
  xfer *x;
  int failed, stop, started;
  dcr_detail fail;
  CURLM *multi;
  pthread_t thread;
  dcr_fetch_stats stats;
  unsigned seed;
};

/* ---- byte ranges: what the spool holds, what is asked */

static int push(dcr__range **v, size_t *n, size_t *cap, size_t at, dcr__range r) {
  if (*n == *cap) {
    size_t c = *cap ? 2 * *cap : 16;
    dcr__range *p = realloc(*v, c * sizeof *p);
    if (!p) return -1;
    *v = p, *cap = c;
  }
  memmove(*v + at + 1, *v + at, (*n - at) * sizeof **v);
  (*v)[at] = r;
  (*n)++;
  return 0;
}

/* The first have range that ends after `offset` (have is sorted and merged). */
static size_t have_find(const dcr__remote *rm, uint64_t offset) {
  size_t lo = 0, hi = rm->have_n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (rm->have[mid].offset + rm->have[mid].length <= offset) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static int covered(const dcr__remote *rm, uint64_t offset, uint64_t length) {
  size_t i = have_find(rm, offset);
  return i < rm->have_n && rm->have[i].offset <= offset &&
         rm->have[i].offset + rm->have[i].length >= offset + length;
}

static int have_add(dcr__remote *rm, uint64_t offset, uint64_t length) {
  if (!length) return 0;
  uint64_t end = offset + length;
  size_t i = have_find(rm, offset ? offset - 1 : 0), j = i;
  while (j < rm->have_n && rm->have[j].offset <= end) {
    if (rm->have[j].offset < offset) offset = rm->have[j].offset;
    if (rm->have[j].offset + rm->have[j].length > end) end = rm->have[j].offset + rm->have[j].length;
    j++;
  }
  if (j > i) { /* the ranges it joins give way to one */
    memmove(rm->have + i, rm->have + j, (rm->have_n - j) * sizeof *rm->have);
    rm->have_n -= j - i;
  }
  return push(&rm->have, &rm->have_n, &rm->have_cap, i, (dcr__range){offset, end - offset});
}

/* The first part of [offset, end) that is neither held nor being fetched, at
 * most cap bytes. */
static int missing(const dcr__remote *rm, uint64_t offset, uint64_t end, uint64_t cap,
                   dcr__range *out) {
  uint64_t at = offset;
  for (int moved = 1; moved && at < end;) {
    moved = 0;
    size_t i = have_find(rm, at);
    if (i < rm->have_n && rm->have[i].offset <= at)
      at = rm->have[i].offset + rm->have[i].length, moved = 1;
    for (unsigned k = 0; k < rm->inflight; k++) {
      const xfer *x = &rm->x[k];
      if (x->busy && !x->first && x->offset <= at && at < x->offset + x->length)
        at = x->offset + x->length, moved = 1;
    }
  }
  if (at >= end) return 0;
  uint64_t stop = end;
  size_t i = have_find(rm, at);
  if (i < rm->have_n && rm->have[i].offset < stop) stop = rm->have[i].offset;
  for (unsigned k = 0; k < rm->inflight; k++) {
    const xfer *x = &rm->x[k];
    if (x->busy && !x->first && x->offset > at && x->offset < stop) stop = x->offset;
  }
  if (stop - at > cap) stop = at + cap;
  *out = (dcr__range){at, stop - at};
  return 1;
}

/* What to ask next (*planned: a request for the plan): reads that wait first,
 * then the read-ahead, then the plan. The plan is read in file order (the walk,
 * an apply's pass: chunk sections in data order), so it is fetched as one stream,
 * a request at a time: its bytes then arrive in that order at the link's whole
 * rate, and the reader uses each as it comes. Parallel spans would share the link
 * and fill the file's first part no sooner than its last, so that an apply could
 * start on most chunks only when the fetch ends. The next plan request starts
 * when the one in flight has less than a span to come (hiding the round trip
 * between them), and small ranges, a partial reader's, still fly together. */
static int pick(dcr__remote *rm, dcr__range *out, int *planned) {
  *planned = 0;
  while (rm->queue_n) {
    dcr__range q = rm->queue[0];
    if (missing(rm, q.offset, q.offset + q.length, SPAN_BYTES, out)) return 1;
    memmove(rm->queue, rm->queue + 1, --rm->queue_n * sizeof *rm->queue);
  }
  if (rm->ahead.length &&
      missing(rm, rm->ahead.offset, rm->ahead.offset + rm->ahead.length, SPAN_BYTES, out))
    return 1;
  uint64_t streaming = 0; /* the plan's bytes in flight, still to come */
  for (unsigned k = 0; k < rm->inflight; k++)
    if (rm->x[k].busy && rm->x[k].planned) streaming += rm->x[k].length - rm->x[k].received;
  if (streaming >= SPAN_BYTES) return 0;
  for (; rm->plan_active && rm->plan_next < rm->plan_n; rm->plan_next++) {
    dcr__range p = rm->plan[rm->plan_next];
    if (missing(rm, p.offset, p.offset + p.length, STREAM_BYTES, out)) return *planned = 1;
  }
  return 0;
}

dcr__net_hooks dcr__net_test = {NULL, 100};

/* ---- one transfer */

/* Bytes the spool may still take: TMPDIR's free space and what it holds. */
static uint64_t spool_room(const dcr__remote *rm) {
  struct statvfs v;
  struct stat st;
  if (fstatvfs(rm->spool, &v) || fstat(rm->spool, &st)) return UINT64_MAX; /* pwrite will tell */
  return (uint64_t)v.f_bavail * v.f_frsize + (uint64_t)st.st_blocks * 512;
}

/* Under the lock. */
static int judge(xfer *x) {
  dcr__remote *rm = x->rm;
  dcr__detail_init(&x->detail);
  x->verdict = dcr__response_judge(&x->resp, &rm->obj, x->first, x->offset, x->length, &x->code,
                                   &x->detail);
  int usable = x->verdict == DCR__RESP_PART || x->verdict == DCR__RESP_WHOLE;
  if (x->verdict == DCR__RESP_PART && x->first)
    x->offset = x->resp.first, x->length = x->resp.last - x->resp.first + 1;
  if (x->verdict == DCR__RESP_WHOLE) /* the body starts at 0, wherever we asked */
    x->offset = 0, x->length = rm->obj.size, x->received = 0;
  /* what the walk checks first (§15.3 step 1), known before any body byte */
  if (usable && x->first && rm->obj.size > rm->max_size) {
    x->verdict = DCR__RESP_FAIL;
    x->code = dcr__fail(&x->detail, DCR_E_LIMIT, "bundle of %llu bytes exceeds the limit %llu",
                        (unsigned long long)rm->obj.size, (unsigned long long)rm->max_size);
  } else if (x->verdict == DCR__RESP_WHOLE && spool_room(rm) < rm->obj.size) {
    x->verdict = DCR__RESP_FAIL;
    x->code = dcr__fail(&x->detail, DCR_E_IO, "the server ignores Range and sends the whole "
                        "%s, %llu bytes, and TMPDIR has room for %llu", rm->bundle ? "bundle" : "object",
                        (unsigned long long)rm->obj.size, (unsigned long long)spool_room(rm));
  } else if (usable && x->first) { /* readers may start: the body is kept as it arrives */
    rm->known = 1;
    rm->served_whole = x->verdict == DCR__RESP_WHOLE;
    x->first = 0;
    pthread_cond_broadcast(&rm->cv);
  }
  return x->verdict;
}

static int usable(const xfer *x) {
  return x->verdict == DCR__RESP_PART || x->verdict == DCR__RESP_WHOLE;
}

/* A response is judged when its headers end (the blank line of a final one),
 * and a body that will not be used is not read (returning short stops it). */
static size_t on_header(char *line, size_t size, size_t n, void *opaque) {
  xfer *x = opaque;
  size_t bytes = size * n;
  dcr__response_header(&x->resp, line, bytes);
  if (x->verdict || (x->resp.status < 200 && !x->resp.malformed) || strspn(line, "\r\n") != bytes)
    return bytes;
  pthread_mutex_lock(&x->rm->mu);
  judge(x);
  pthread_mutex_unlock(&x->rm->mu);
  return usable(x) ? bytes : 0;
}

/* The object's first bytes are the bundle header: judged as they arrive, before
 * they are kept, by what the walk checks first (§4.1), so with its code. Those
 * before `data` are in the spool (a body reaches offset `at` only from there).
 * True if they are refused. */
static int head_refused(xfer *x, const char *data, size_t bytes) {
  uint64_t size = x->rm->obj.size, want = size < DCR__HEADER_SIZE ? size : DCR__HEADER_SIZE;
  uint64_t at = x->offset + x->received, take = want - at < bytes ? want - at : bytes;
  uint8_t head[DCR__HEADER_SIZE];
  unsigned minor;
  dcr_detail d;
  dcr__detail_init(&d);
  if (dcr__pread_full(x->rm->spool, head, (size_t)at, 0, &d)) return 0; /* the walk will say */
  memcpy(head + at, data, (size_t)take);
  int rc = dcr__header_parse(head, at + take < want ? at + take : size, &minor, &d);
  if (!rc || (at + take < want && rc != DCR_E_MAGIC)) return 0; /* more bytes may mend it */
  x->verdict = DCR__RESP_FAIL, x->code = rc, x->detail = d;
  return 1;
}

static size_t on_body(char *data, size_t size, size_t n, void *opaque) {
  xfer *x = opaque;
  dcr__remote *rm = x->rm;
  size_t bytes = size * n;
  pthread_mutex_lock(&rm->mu);
  if (!x->verdict) judge(x);
  int refused = !usable(x) || rm->failed || rm->stop;
  if (!refused && bytes > x->length - x->received) {
    x->verdict = DCR__RESP_FAIL;
    x->code = dcr__fail(&x->detail, DCR_E_FETCH, "the response body is longer than the range asked");
    refused = 1;
  }
  if (!refused && rm->bundle && x->offset + x->received < DCR__HEADER_SIZE &&
      x->offset + x->received < rm->obj.size)
    refused = head_refused(x, data, bytes);
  uint64_t at = x->offset + x->received;
  pthread_mutex_unlock(&rm->mu);
  if (refused) return 0;
  for (size_t done = 0; done < bytes;) {
    ssize_t w = pwrite(rm->spool, data + done, bytes - done, (off_t)(at + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      x->verdict = DCR__RESP_FAIL;
      x->code = dcr__fail(&x->detail, DCR_E_IO, "cannot write the spool file: %s", strerror(errno));
      return 0;
    }
    done += (size_t)w;
  }
  /* kept: readers may use these bytes now */
  pthread_mutex_lock(&rm->mu);
  x->received += bytes;
  rm->stats.bytes_fetched += bytes;
  if (have_add(rm, at, bytes)) {
    x->verdict = DCR__RESP_FAIL;
    x->code = dcr__fail(&x->detail, DCR_E_NOMEM, "cannot allocate");
  }
  pthread_cond_broadcast(&rm->cv);
  pthread_mutex_unlock(&rm->mu);
  return x->verdict == DCR__RESP_FAIL ? 0 : bytes;
}

static long ms_since(struct timespec t) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (long)(now.tv_sec - t.tv_sec) * 1000 + (now.tv_nsec - t.tv_nsec) / 1000000L;
}

/* A transfer is stopped, and asked again, when it receives nothing for
 * timeout_s (a stall after a burst is seen timeout_s after the last byte), or
 * less than low_speed bytes a second in a window of LOW_SPEED_WINDOW seconds (or
 * timeout_s if shorter), or, near its end, not the rest of its body (a trickle).
 * A link that slow moves a bundle no faster than a retry would, and an origin
 * that trickles must not hold a worker for minutes: a second slow stop in a row
 * ends the request (see done). libcurl's own LOW_SPEED options would do the
 * second alone and notice a stall later. */
static int on_progress(void *opaque, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow) {
  (void)ultotal, (void)ulnow;
  xfer *x = opaque;
  unsigned seconds = x->rm->timeout_s < LOW_SPEED_WINDOW ? x->rm->timeout_s : LOW_SPEED_WINDOW;
  long window = 1000L * seconds;
  if (dlnow != x->seen) {
    x->seen = dlnow;
    clock_gettime(CLOCK_MONOTONIC, &x->last_byte);
  } else if (ms_since(x->last_byte) >= 1000L * x->rm->timeout_s) {
    return x->stalled = 1;
  }
  if (ms_since(x->window_start) < window) return 0;
  curl_off_t need = (curl_off_t)x->rm->low_speed * seconds;
  if (dltotal > 0 && dltotal - x->window_bytes < need) need = dltotal - x->window_bytes;
  if (dlnow - x->window_bytes < need) return x->slow = 1;
  x->slow_stops = 0; /* progress: a later stall is a fault to retry, not a slow origin */
  x->window_bytes = dlnow;
  clock_gettime(CLOCK_MONOTONIC, &x->window_start);
  return 0;
}

/* "scheme://host:port" of a URL, lower case ("" if it does not parse). */
static void origin_of(const char *url, char out[ORIGIN_MAX]) {
  CURLU *u = curl_url();
  char *scheme = NULL, *host = NULL, *port = NULL;
  out[0] = 0;
  if (u && !curl_url_set(u, CURLUPART_URL, url, 0) &&
      !curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) && !curl_url_get(u, CURLUPART_HOST, &host, 0) &&
      !curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT))
    snprintf(out, ORIGIN_MAX, "%s://%s:%s", scheme, host, port);
  for (char *c = out; *c; c++) *c = (char)tolower((unsigned char)*c);
  curl_free(scheme), curl_free(host), curl_free(port);
  curl_url_cleanup(u);
}

/* The caller's headers go to the URL's origin, and after a redirect to another
 * one only if the caller said so (header_follow). */
static int headers_go(const dcr__remote *rm, const xfer *x) {
  if (!x->url || rm->header_follow) return 1;
  char to[ORIGIN_MAX];
  origin_of(x->url, to);
  return to[0] && !strcmp(to, rm->origin);
}

static int start(dcr__remote *rm, xfer *x) {
  char line[96];
  if (x->first)
    snprintf(line, sizeof line, "Range: bytes=-%u", TAIL_BYTES);
  else
    snprintf(line, sizeof line, "Range: bytes=%llu-%llu", (unsigned long long)x->offset,
             (unsigned long long)(x->offset + x->length - 1));
  curl_slist_free_all(x->headers);
  x->headers = curl_slist_append(NULL, line);
  /* R-RAN-7: the object must be the one the first response described */
  if (!x->first && rm->obj.etag[0] && strncmp(rm->obj.etag, "W/", 2)) {
    char m[16 + DCR__VALIDATOR_MAX];
    snprintf(m, sizeof m, "If-Match: %s", rm->obj.etag);
    x->headers = curl_slist_append(x->headers, m);
  } else if (!x->first && rm->obj.last_modified[0]) {
    char m[32 + DCR__VALIDATOR_MAX];
    snprintf(m, sizeof m, "If-Unmodified-Since: %s", rm->obj.last_modified);
    x->headers = curl_slist_append(x->headers, m);
  }
  for (size_t i = 0; headers_go(rm, x) && i < rm->header_count; i++)
    x->headers = curl_slist_append(x->headers, rm->headers[i]);
  if (!x->headers) return -1;
  /* A new handle for each request: libcurl 7.88 keeps a pointer into the last
   * response's stored headers across curl_easy_reset, and a folded header line in
   * the next response then reads freed memory (found by fuzz_http). Connections
   * live in the multi handle's pool, so they are reused all the same. */
  if (x->easy) curl_easy_cleanup(x->easy);
  if (!(x->easy = curl_easy_init())) return -1;
  CURL *e = x->easy;
  memset(&x->resp, 0, sizeof x->resp);
  x->verdict = 0;
  x->error[0] = 0;
  x->seen = 0, x->stalled = 0, x->window_bytes = 0, x->slow = 0;
  clock_gettime(CLOCK_MONOTONIC, &x->last_byte);
  x->window_start = x->last_byte;
  curl_easy_setopt(e, CURLOPT_URL, x->url ? x->url : rm->url);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->headers);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
  curl_easy_setopt(e, CURLOPT_PRIVATE, x);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->error);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, (long)(rm->timeout_s < 10 ? rm->timeout_s : 10));
  curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(e, CURLOPT_XFERINFODATA, x);
  curl_easy_setopt(e, CURLOPT_USERAGENT, "dcr/" DCR_VERSION_STRING);
  if (rm->ca_file) curl_easy_setopt(e, CURLOPT_CAINFO, rm->ca_file);
  if (dcr__net_test.unix_socket) curl_easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, dcr__net_test.unix_socket);

  rm->stats.requests++;
  return curl_multi_add_handle(rm->multi, e) == CURLM_OK ? 0 : -1;
}

static void fail(dcr__remote *rm, int code, const dcr_detail *why) {
  if (rm->failed) return;
  rm->failed = 1;
  rm->fail = *why;
  rm->fail.code = code;
  dcr__detail_file(&rm->fail, rm->shown);
}

static struct timespec later(unsigned ms) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  t.tv_sec += ms / 1000;
  t.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (t.tv_nsec >= 1000000000L) t.tv_sec++, t.tv_nsec -= 1000000000L;
  return t;
}

static long ms_until(struct timespec t) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  long ms = (long)(t.tv_sec - now.tv_sec) * 1000 + (t.tv_nsec - now.tv_nsec) / 1000000L;
  return ms > 0 ? ms : 0;
}

/* Failures that asking again may mend: the network's, not a refusal (a
 * certificate, a protocol). */
static int transient(CURLcode c) {
  switch (c) {
    case CURLE_OK: /* a body that ended early */
    case CURLE_COULDNT_RESOLVE_HOST: case CURLE_COULDNT_RESOLVE_PROXY: case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT: case CURLE_SEND_ERROR: case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING: case CURLE_PARTIAL_FILE: case CURLE_HTTP2: case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR: case CURLE_ABORTED_BY_CALLBACK:
      return 1;
    default:
      return 0;
  }
}

/* The Location of a redirect as an absolute URL (curl_free it), resolved
 * against the URL that was asked; NULL if it does not parse. */
static char *resolve(const char *base, const char *location) {
  CURLU *u = curl_url();
  char *out = NULL;
  if (u && !curl_url_set(u, CURLUPART_URL, base, 0) &&
      !curl_url_set(u, CURLUPART_URL, location, 0))
    curl_url_get(u, CURLUPART_URL, &out, 0);
  curl_url_cleanup(u);
  return out;
}

/* A redirect: its target is asked at once (not a retry), up to MAX_REDIRECTS
 * for one request. Under the lock. */
static void follow(dcr__remote *rm, xfer *x) {
  char *to = resolve(x->url ? x->url : rm->url, x->resp.location);
  dcr__detail_init(&x->detail);
  if (x->redirects == MAX_REDIRECTS)
    dcr__fail(&x->detail, DCR_E_FETCH, "more than %d redirects", MAX_REDIRECTS);
  else if (!to)
    dcr__fail(&x->detail, DCR_E_FETCH, "HTTP %d to a Location that is not a URL", x->resp.status);
  else {
    free(x->url);
    x->url = strdup(to), x->redirects++;
    curl_free(to), to = NULL;
    if (x->url && !start(rm, x)) return;
    dcr__fail(&x->detail, DCR_E_NOMEM, "cannot start a request");
  }
  curl_free(to);
  fail(rm, x->detail.code, &x->detail);
  x->busy = x->first = 0;
}

/* A transfer ended (curl's result). Under the lock. */
static void finish(dcr__remote *rm, xfer *x, CURLcode result) {
  if (x->verdict == DCR__RESP_REDIRECT) {
    follow(rm, x);
    return;
  }
  free(x->url); /* whatever comes next starts at the reader's URL again */
  x->url = NULL, x->redirects = 0;
  int ok = usable(x);
  if (ok && x->received == x->length) {
    x->busy = x->first = 0;
    return;
  }
  if (x->verdict == DCR__RESP_FAIL) {
    fail(rm, x->code, &x->detail);
    x->busy = x->first = 0;
    return;
  }
  /* Cut short, stopped, or a transient answer: ask again for the rest. */
  if (ok) x->offset += x->received, x->length -= x->received;
  x->received = 0;
  if (!x->verdict || ok) {
    dcr__detail_init(&x->detail);
    /* curl's own message may quote the URL; its code's text never does */
    if (x->stalled)
      dcr__fail(&x->detail, DCR_E_FETCH, "nothing received for %u s", rm->timeout_s);
    else if (x->slow)
      dcr__fail(&x->detail, DCR_E_FETCH, "less than %u bytes a second for %u s", rm->low_speed,
                rm->timeout_s < LOW_SPEED_WINDOW ? rm->timeout_s : LOW_SPEED_WINDOW);
    else
      dcr__fail(&x->detail, DCR_E_FETCH, "%s", result == CURLE_OK ? "the response ended early"
                : !x->error[0] || strstr(x->error, "://") ? curl_easy_strerror(result) : x->error);
  }
  /* a retry verdict stopped its body on purpose, whatever curl says of that */
  int again = x->verdict == DCR__RESP_RETRY || transient(result);
  int twice = (x->slow || x->stalled) && x->slow_stops++;
  if (twice || !again || x->attempts++ >= rm->retries) {
    dcr_detail d = x->detail;
    size_t n = strlen(d.message);
    if (twice)
      snprintf(d.message + n, sizeof d.message - n, ", twice in a row: the origin is too slow");
    else if (again)
      snprintf(d.message + n, sizeof d.message - n, " (after %u attempt%s)", x->attempts,
               x->attempts == 1 ? "" : "s");
    fail(rm, DCR_E_FETCH, &d);
    x->busy = x->first = 0;
    return;
  }
  /* exponential, capped at 5 s, with up to 25% jitter so that a fleet's workers
   * do not come back at the same moment */
  unsigned ms = dcr__net_test.backoff_ms << (x->attempts - 1 < 6 ? x->attempts - 1 : 6);
  ms = (ms > 5000 ? 5000 : ms) + (unsigned)rand_r(&rm->seed) % (ms / 4 + 1);
  x->waiting = 1;
  x->not_before = later(ms);
  rm->stats.retries++;
}

/* The deadline and the caller's cancel: what is still to fetch is given up
 * (what the spool holds stays readable until then). Under the lock. */
static void give_up_when_due(dcr__remote *rm) {
  dcr_detail d;
  dcr__detail_init(&d);
  if (rm->cancel && *rm->cancel)
    fail(rm, DCR_E_INTERRUPTED, (dcr__fail(&d, DCR_E_INTERRUPTED, "interrupted"), &d));
  else if (rm->deadline_s && !ms_until(rm->deadline))
    fail(rm, DCR_E_FETCH, (dcr__fail(&d, DCR_E_FETCH, "not fetched within the deadline of %u s",
                                     rm->deadline_s), &d));
}

static void *fetcher(void *opaque) {
  dcr__remote *rm = opaque;
  pthread_mutex_lock(&rm->mu);
  while (!rm->stop) {
    long wait_ms = 1000;
    int busy = 0;
    for (unsigned k = 0; k < rm->inflight; k++) {
      xfer *x = &rm->x[k];
      if (x->busy && x->waiting && !rm->failed) {
        long ms = ms_until(x->not_before);
        if (!ms && !start(rm, x)) x->waiting = 0;
        else if (ms < wait_ms) wait_ms = ms ? ms : 1;
      }
      busy += x->busy && !(x->waiting && rm->failed);
    }
    for (unsigned k = 0; k < rm->inflight && !rm->failed; k++) {
      xfer *x = &rm->x[k];
      dcr__range r;
      if (x->busy) continue;
      if (!rm->known) { /* the one request that comes first */
        if (k) break;
        x->first = 1, x->planned = 0;
      } else if (!pick(rm, &r, &x->planned)) {
        break;
      } else {
        x->offset = r.offset, x->length = r.length;
      }
      x->busy = 1, x->attempts = 0, x->slow_stops = 0, x->received = 0, busy++;
      if (start(rm, x)) {
        dcr_detail d;
        dcr__detail_init(&d);
        fail(rm, DCR_E_NOMEM, (dcr__fail(&d, DCR_E_NOMEM, "cannot start a request"), &d));
      }
      if (!rm->known) break;
    }
    if (busy && !rm->failed) give_up_when_due(rm);
    if (rm->deadline_s && ms_until(rm->deadline) < wait_ms) wait_ms = ms_until(rm->deadline) + 1;
    if (!busy || rm->failed) {
      for (unsigned k = 0; k < rm->inflight; k++) /* abandon what is left */
        if (rm->x[k].busy && rm->failed) {
          if (!rm->x[k].waiting) curl_multi_remove_handle(rm->multi, rm->x[k].easy);
          rm->x[k].busy = rm->x[k].waiting = 0;
        }
      pthread_cond_broadcast(&rm->cv);
      if (!rm->stop) pthread_cond_wait(&rm->cv, &rm->mu);
      continue;
    }
    pthread_mutex_unlock(&rm->mu);
    int running;
    curl_multi_perform(rm->multi, &running);
    CURLMsg *msg;
    int left, done = 0;
    while ((msg = curl_multi_info_read(rm->multi, &left))) {
      if (msg->msg != CURLMSG_DONE) continue;
      xfer *x;
      CURLcode result = msg->data.result;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
      curl_multi_remove_handle(rm->multi, msg->easy_handle);
      pthread_mutex_lock(&rm->mu);
      finish(rm, x, result);
      pthread_cond_broadcast(&rm->cv);
      pthread_mutex_unlock(&rm->mu);
      done = 1;
    }
    /* a finished transfer frees a place: fill it before waiting */
    if (!done) curl_multi_poll(rm->multi, NULL, 0, (int)wait_ms, NULL);
    pthread_mutex_lock(&rm->mu);
  }
  pthread_mutex_unlock(&rm->mu);
  return NULL;
}

/* Wakes the fetcher, wherever it waits. Under the lock. */
static void wake(dcr__remote *rm) {
  pthread_cond_broadcast(&rm->cv);
  curl_multi_wakeup(rm->multi);
}

/* ---- reading (both doors) */

int dcr__remote_read(dcr__remote *rm, uint64_t offset, size_t length, uint8_t *out, dcr_detail *d) {
  if (!length) return DCR_OK;
  pthread_mutex_lock(&rm->mu);
  if (!rm->failed && !covered(rm, offset, length)) {
    for (size_t i = 0; !rm->plan_active && i < rm->plan_n; i++)
      rm->plan_active = rm->plan[i].offset < offset + length &&
                        offset < rm->plan[i].offset + rm->plan[i].length;
    uint64_t n = length < MIN_REQUEST ? MIN_REQUEST : length;
    if (n > rm->obj.size - offset) n = rm->obj.size - offset;
    if (push(&rm->queue, &rm->queue_n, &rm->queue_cap, rm->queue_n, (dcr__range){offset, n})) {
      pthread_mutex_unlock(&rm->mu);
      return dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
    }
    wake(rm);
  }
  while (!rm->failed && !covered(rm, offset, length)) pthread_cond_wait(&rm->cv, &rm->mu);
  if (rm->failed) {
    int code = rm->fail.code;
    if (d) *d = rm->fail;
    pthread_mutex_unlock(&rm->mu);
    return code;
  }
  pthread_mutex_unlock(&rm->mu);
  return dcr__pread_full(rm->spool, out, length, offset, d);
}

void dcr__remote_ahead(dcr__remote *rm, uint64_t offset, uint64_t length) {
  pthread_mutex_lock(&rm->mu);
  rm->ahead = (dcr__range){offset, offset < rm->obj.size && length < rm->obj.size - offset
                                       ? length : offset < rm->obj.size ? rm->obj.size - offset : 0};
  if (rm->ahead.length) wake(rm);
  pthread_mutex_unlock(&rm->mu);
}

/* The bytes are dropped from the spool (a hole punched), so that a sequential
 * reader's spool holds what lies ahead of it, not what it has read; a file
 * system without holes keeps them, which costs disk, not correctness. Bytes
 * being written are not in `have` yet, so no write is punched. */
void dcr__remote_forget(dcr__remote *rm, uint64_t below) {
  pthread_mutex_lock(&rm->mu);
  size_t n = 0;
  while (n < rm->have_n && rm->have[n].offset < below) {
    dcr__range *h = &rm->have[n];
    uint64_t end = h->offset + h->length, cut = end < below ? end : below;
    fallocate(rm->spool, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)h->offset,
              (off_t)(cut - h->offset));
    if (end > below) {
      h->offset = below, h->length = end - below;
      break;
    }
    n++;
  }
  memmove(rm->have, rm->have + n, (rm->have_n - n) * sizeof *rm->have);
  rm->have_n -= n;
  pthread_mutex_unlock(&rm->mu);
}

uint64_t dcr__remote_size(const dcr__remote *rm) { return rm->obj.size; }

int dcr__remote_streamed(const dcr__remote *rm) { return rm->served_whole; }

/* ---- the source (format.h's dcr__source_ops) */

static int remote_read(void *ctx, uint64_t offset, size_t length, uint8_t *out, dcr_detail *d) {
  return dcr__remote_read(ctx, offset, length, out, d);
}

static void remote_plan(void *ctx, const dcr__range *ranges, size_t count) {
  dcr__remote *rm = ctx;
  dcr__range *plan = malloc(count * sizeof *plan + 1);
  size_t n = 0;
  if (!plan) return; /* reads still work, one at a time */
  for (size_t i = 0; i < count; i++) {
    if (n && ranges[i].offset <= plan[n - 1].offset + plan[n - 1].length + MERGE_GAP &&
        ranges[i].offset >= plan[n - 1].offset)
      plan[n - 1].length = ranges[i].offset + ranges[i].length - plan[n - 1].offset;
    else
      plan[n++] = ranges[i];
  }
  pthread_mutex_lock(&rm->mu);
  free(rm->plan);
  rm->plan = plan, rm->plan_n = n, rm->plan_next = 0, rm->plan_active = 0;
  pthread_mutex_unlock(&rm->mu);
}

void dcr__remote_close(dcr__remote *rm) {
  if (!rm) return;
  if (rm->started) {
    pthread_mutex_lock(&rm->mu);
    rm->stop = 1;
    wake(rm);
    pthread_mutex_unlock(&rm->mu);
    pthread_join(rm->thread, NULL);
  }
  for (unsigned k = 0; rm->x && k < rm->inflight; k++) {
    if (rm->x[k].busy && !rm->x[k].waiting) curl_multi_remove_handle(rm->multi, rm->x[k].easy);
    if (rm->x[k].easy) curl_easy_cleanup(rm->x[k].easy);
    curl_slist_free_all(rm->x[k].headers);
    free(rm->x[k].url);
  }
  if (rm->multi) curl_multi_cleanup(rm->multi);
  if (rm->spool >= 0) close(rm->spool);
  for (size_t i = 0; i < rm->header_count; i++) free(rm->headers[i]);
  free(rm->headers), free(rm->url), free(rm->ca_file), free(rm->x);
  free(rm->have), free(rm->queue), free(rm->plan);
  pthread_mutex_destroy(&rm->mu);
  pthread_cond_destroy(&rm->cv);
  free(rm);
}

static void remote_close(void *ctx) { dcr__remote_close(ctx); }

static const dcr__source_ops remote_ops = {remote_read, remote_plan, remote_close};

/* ---- the public door */

void dcr_http_options_default(dcr_http_options *o) {
  memset(o, 0, sizeof *o);
  o->retries = 5;
  o->timeout_s = 30;
  o->inflight = 4;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_ready;
static void curl_start(void) { curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT); }

static int is_http(const char *url) {
  return !strncasecmp(url, "http://", 7) || !strncasecmp(url, "https://", 8);
}

static int make_remote(dcr__remote **out, const char *url, const dcr_http_options *o,
                       uint64_t max_size, int bundle, dcr_detail *d) {
  dcr__remote *rm = calloc(1, sizeof *rm);
  *out = rm;
  if (!rm) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  rm->spool = -1;
  pthread_mutex_init(&rm->mu, NULL);
  pthread_cond_init(&rm->cv, NULL);
  dcr__url_shown(url, rm->shown, sizeof rm->shown);
  rm->retries = o->retries;
  rm->timeout_s = o->timeout_s ? o->timeout_s : 30;
  rm->inflight = o->inflight ? (o->inflight > 64 ? 64 : o->inflight) : 4;
  rm->low_speed = o->low_speed ? o->low_speed : LOW_SPEED;
  rm->deadline_s = o->deadline_s;
  clock_gettime(CLOCK_MONOTONIC, &rm->deadline);
  rm->deadline.tv_sec += o->deadline_s;
  rm->header_follow = o->header_follow != 0;
  rm->cancel = o->cancel;
  rm->max_size = max_size;
  rm->bundle = bundle;
  rm->seed = (unsigned)time(NULL) ^ (unsigned)getpid() ^ (unsigned)(uintptr_t)rm;
  rm->url = strdup(url);
  rm->ca_file = o->ca_file ? strdup(o->ca_file) : NULL;
  rm->headers = calloc(o->header_count + 1, sizeof *rm->headers);
  rm->x = calloc(rm->inflight, sizeof *rm->x);
  if (!rm->url || (o->ca_file && !rm->ca_file) || !rm->headers || !rm->x)
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  for (size_t i = 0; i < o->header_count; i++, rm->header_count++) {
    const char *h = o->headers[i], *colon = strchr(h, ':');
    if (!colon || colon == h || strpbrk(h, "\r\n"))
      return dcr__fail(d, DCR_E_ARGUMENT, "header %zu is not one 'Name: value' line", i + 1);
    if (!(rm->headers[i] = strdup(h))) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  }
  pthread_once(&curl_once, curl_start);
  if (curl_ready != CURLE_OK || !(rm->multi = curl_multi_init()))
    return dcr__fail(d, DCR_E_NOMEM, "cannot start libcurl");
  origin_of(url, rm->origin);
  for (unsigned k = 0; k < rm->inflight; k++) rm->x[k].rm = rm;
  if ((rm->spool = dcr__temp_fd(NULL)) < 0)
    return dcr__fail(d, DCR_E_IO, "cannot create a spool file in TMPDIR: %s", strerror(errno));
  if (pthread_create(&rm->thread, NULL, fetcher, rm))
    return dcr__fail(d, DCR_E_NOMEM, "cannot start the fetcher thread");
  rm->started = 1;
  /* the first response tells the object's size and validators */
  pthread_mutex_lock(&rm->mu);
  wake(rm);
  while (!rm->known && !rm->failed) pthread_cond_wait(&rm->cv, &rm->mu);
  int rc = rm->failed ? rm->fail.code : DCR_OK;
  if (rc && d) *d = rm->fail;
  pthread_mutex_unlock(&rm->mu);
  return rc;
}

int dcr__remote_open(dcr__remote **out, const char *url, const dcr_http_options *options,
                     uint64_t max_size, int bundle, dcr_detail *d) {
  dcr_http_options defaults;
  *out = NULL;
  if (!options) dcr_http_options_default(&defaults), options = &defaults;
  if (!url || !is_http(url)) return dcr__fail(d, DCR_E_ARGUMENT, "not an http:// or https:// URL");
  dcr__remote *rm = NULL;
  int rc = make_remote(&rm, url, options, max_size, bundle, d);
  if (rc) {
    dcr__detail_file(d, rm ? rm->shown : "");
    dcr__remote_close(rm);
    return rc;
  }
  *out = rm;
  return DCR_OK;
}

int dcr_reader_open_url(dcr_reader **out, const char *url, const dcr_http_options *options,
                        const dcr_limits *lim, dcr_detail *d) {
  dcr__detail_init(d);
  *out = NULL;
  dcr_limits l;
  dcr__limits_take(&l, lim);
  dcr__remote *rm;
  int rc = dcr__remote_open(&rm, url, options, l.max_bundle_size, 1, d);
  if (rc) return rc;
  /* a server that ignores Range sends the object whole: it is walked as it arrives */
  return dcr__reader_open_ops(out, &remote_ops, rm, rm->obj.size, rm->shown,
                              (options && options->whole) || rm->served_whole, lim, d);
}

void dcr_reader_fetch_stats(const dcr_reader *r, dcr_fetch_stats *stats, size_t size) {
  dcr_fetch_stats s = {0};
  if (r->src.ops == &remote_ops) {
    dcr__remote *rm = r->src.ctx;
    pthread_mutex_lock(&rm->mu);
    s = rm->stats;
    s.bundle_size = rm->obj.size;
    pthread_mutex_unlock(&rm->mu);
  }
  memcpy(stats, &s, size < sizeof s ? size : sizeof s);
}
