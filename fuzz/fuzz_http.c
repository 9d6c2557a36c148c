/*
 * fuzz_http.c - HTTP responses, as a range reader meets them (SPEC.md §21):
 * libcurl's parser, then net/response.c's rules (status, Content-Range,
 * validators), the fetcher's retries and resumes, the spool, the random-access
 * open and the chunk door, over real connections on the loopback interface.
 *
 * Each input gets a listening socket of its own and a thread that answers each
 * connection libcurl opens with the input's next response, then shuts it for
 * writing: a request is answered by whatever comes next (so a keep-alive
 * connection serves one response; libcurl opens another). Input: byte 0, bit 0
 * set: after a successful open, every chunk is read (dcr_reader_verify); then
 * responses, each a u16 little-endian length and that many bytes. Connections
 * past the last response are closed unanswered. Retries have no delay here.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>

#include "../net/remote.h"
#include "fuzz_common.h"

#define FUZZ_MAX_INPUT (1u << 16)
#define MAX_CONNECTIONS 64

typedef struct {
  int listener;
  const uint8_t *next;
  size_t left;
  int peers[MAX_CONNECTIONS];
  size_t peer_count;
} server;

static void *serve(void *opaque) {
  server *s = opaque;
  for (;;) {
    int fd = accept(s->listener, NULL, NULL);
    if (fd < 0) return NULL; /* the listener was shut: the input is done */
    if (s->peer_count == MAX_CONNECTIONS) {
      const struct linger reset = {1, 0};
      setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
      close(fd);
      continue;
    }
    size_t n = 0;
    if (s->left >= 2) {
      n = (size_t)s->next[0] | (size_t)s->next[1] << 8;
      s->next += 2, s->left -= 2;
      if (n > s->left) n = s->left;
    }
    /* the socket buffers hold the whole response (at most 64 KiB) before anyone reads */
    for (size_t done = 0; done < n;) {
      ssize_t w = send(fd, s->next + done, n - done, MSG_NOSIGNAL);
      if (w <= 0) break;
      done += (size_t)w;
    }
    s->next += n, s->left -= n;
    shutdown(fd, SHUT_WR);
    s->peers[s->peer_count++] = fd;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > FUZZ_MAX_INPUT) return 0;
  dcr__net_backoff_ms = 0;
  server s = {.next = data + 1, .left = size - 1};
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof a;
  s.listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  /* libcurl's side of a connection may close first and leave it in TIME-WAIT: at
   * hundreds of runs a second those hold every port bind() would pick */
  const int on = 1;
  FUZZ_ASSERT(s.listener >= 0 && !setsockopt(s.listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on));
  FUZZ_ASSERT(!bind(s.listener, (struct sockaddr *)&a, sizeof a) &&
              !listen(s.listener, 16) && !getsockname(s.listener, (struct sockaddr *)&a, &alen));
  pthread_t t;
  FUZZ_ASSERT(!pthread_create(&t, NULL, serve, &s));
  char url[96];
  snprintf(url, sizeof url, "http://127.0.0.1:%u/b.dcr?secret=1", ntohs(a.sin_port));
  dcr_http_options o;
  dcr_http_options_default(&o);
  o.retries = 2, o.inflight = 2, o.timeout_s = 2;
  dcr_reader *r = NULL;
  dcr_detail d;
  int rc = dcr_reader_open_url(&r, url, &o, NULL, &d);
  FUZZ_ASSERT(rc >= 0 && rc < DCR_ERROR_COUNT_ && (rc == DCR_OK) == (r != NULL));
  FUZZ_ASSERT(!strstr(d.message, "secret") && !strstr(d.file, "secret"));
  if (!rc && (data[0] & 1)) {
    rc = dcr_reader_verify(r, &d);
    FUZZ_ASSERT(rc >= 0 && rc < DCR_ERROR_COUNT_);
    FUZZ_ASSERT(!strstr(d.message, "secret") && !strstr(d.file, "secret"));
    dcr_fetch_stats st;
    dcr_reader_fetch_stats(r, &st, sizeof st);
    FUZZ_ASSERT(st.requests >= 1 && st.retries < st.requests && st.bundle_size);
  }
  dcr_reader_free(r);
  shutdown(s.listener, SHUT_RDWR);
  pthread_join(t, NULL);
  close(s.listener);
  /* closed with a reset: thousands of runs a minute would fill the port range
   * with connections in TIME-WAIT */
  const struct linger reset = {1, 0};
  for (size_t i = 0; i < s.peer_count; i++)
    setsockopt(s.peers[i], SOL_SOCKET, SO_LINGER, &reset, sizeof reset), close(s.peers[i]);
  return 0;
}
