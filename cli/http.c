/*
 * http.c - what the commands that read a bundle (or a history archive) share for
 * one behind a URL:
 * the HTTP options (--header, --header-follow, --http-retries, --http-timeout,
 * --http-low-speed, --http-deadline, --cacert, and DCR_HTTP_HEADERS), opening it
 * (an interrupt stops the fetch), the URL as it may be shown (never its query or
 * userinfo), and the fetch report.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../net/remote.h"
#include "cli.h"

#define MAX_HEADERS 64

static const char *headers[MAX_HEADERS];
static size_t header_count;
static dcr_http_options options = {.retries = 5, .timeout_s = 30, .inflight = 4,
                                   .cancel = &cli_interrupted};

void cli_http_read_whole(void) { options.whole = 1; }

int cli_http_option(const char *command, int opt) {
  uint64_t v;
  switch (opt) {
    case OPT_HEADER:
      if (header_count == MAX_HEADERS) exit(cli_usage(command, "more than %d --header options", MAX_HEADERS));
      if (!strchr(optarg, ':') || strpbrk(optarg, "\r\n") || *optarg == ':')
        exit(cli_usage(command, "bad --header (want 'Name: value')"));  /* the value may be a secret */
      headers[header_count++] = optarg;
      return 1;
    case OPT_HTTP_RETRIES:
      if (cli_parse_uint(optarg, 100, &v)) exit(cli_usage(command, "bad --http-retries '%s' (0..100)", optarg));
      options.retries = (unsigned)v;
      return 1;
    case OPT_HTTP_TIMEOUT:
      if (cli_parse_uint(optarg, 86400, &v) || !v)
        exit(cli_usage(command, "bad --http-timeout '%s' (seconds, 1..86400)", optarg));
      options.timeout_s = (unsigned)v;
      return 1;
    case OPT_HTTP_LOW_SPEED:
      if (cli_parse_size(optarg, &v) || !v || v > UINT32_MAX)
        exit(cli_usage(command, "bad --http-low-speed '%s' (bytes a second, 1 to 4G-1)", optarg));
      options.low_speed = (unsigned)v;
      return 1;
    case OPT_HTTP_DEADLINE:
      if (cli_parse_uint(optarg, 30 * 86400, &v) || !v)
        exit(cli_usage(command, "bad --http-deadline '%s' (seconds, 1..2592000)", optarg));
      options.deadline_s = (unsigned)v;
      return 1;
    case OPT_HEADER_FOLLOW: options.header_follow = 1; return 1;
    case OPT_CACERT: options.ca_file = optarg; return 1;
    default: return 0;
  }
}

int cli_is_url(const char *path) {
  return !strncasecmp(path, "http://", 7) || !strncasecmp(path, "https://", 8);
}

const char *cli_shown(const char *path, char *buf, size_t capacity) {
  if (!cli_is_url(path)) return path;
  dcr__url_shown(path, buf, capacity);
  return buf;
}

/* A bundle (reader) or a history archive (history) at url, with the --header
 * lines, then those of DCR_HTTP_HEADERS (one per line), which keeps a token out
 * of the process list. */
static int open_url(const char *url, dcr_reader **reader, dcr_history **history, dcr_detail *d) {
  const char *all[2 * MAX_HEADERS];
  size_t n = 0;
  for (size_t i = 0; i < header_count; i++) all[n++] = headers[i];
  char *env = getenv("DCR_HTTP_HEADERS") ? strdup(getenv("DCR_HTTP_HEADERS")) : NULL;
  for (char *save = NULL, *line = env ? strtok_r(env, "\r\n", &save) : NULL; line;
       line = strtok_r(NULL, "\r\n", &save))
    if (n < 2 * MAX_HEADERS && *line) all[n++] = line;
  dcr_http_options o = options;
  o.headers = all;
  o.header_count = n;
  int rc = reader ? dcr_reader_open_url(reader, url, &o, &cli_limits, d)
                  : dcr_history_open_url(history, url, &o, &cli_limits, d);
  free(env);
  return rc;
}

int cli_open_url(const char *url, dcr_reader **reader, dcr_detail *d) {
  return open_url(url, reader, NULL, d);
}

int cli_open_history_url(const char *url, dcr_history **history, dcr_detail *d) {
  return open_url(url, NULL, history, d);
}

void cli_print_fetch(dcr_reader *r) {
  dcr_fetch_stats s;
  dcr_reader_fetch_stats(r, &s, sizeof s);
  if (!s.bundle_size) return;
  fprintf(stderr, "dcr: fetched %llu of %llu bundle bytes in %llu requests, %llu retries\n",
          (unsigned long long)s.bytes_fetched, (unsigned long long)s.bundle_size,
          (unsigned long long)s.requests, (unsigned long long)s.retries);
}
