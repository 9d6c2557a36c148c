/*
 * response.c - what a range reader accepts of an HTTP response (SPEC.md §21.3):
 * the status, Content-Range against what was asked, and the validators against
 * the first response, so that bytes of two versions of an object never meet.
 * Header values arrive from the network: every parse is bounded and strict.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "remote.h"

static int iequal_prefix(const char *s, size_t n, const char *prefix) {
  size_t k = strlen(prefix);
  if (n < k) return 0;
  for (size_t i = 0; i < k; i++)
    if (tolower((unsigned char)s[i]) != prefix[i]) return 0;
  return 1;
}

/* Decimal digits only (no sign, no spaces), at most 19 of them. */
static int parse_u64(const char **p, const char *end, uint64_t *out) {
  const char *s = *p;
  uint64_t v = 0;
  int n = 0;
  while (s < end && isdigit((unsigned char)*s) && n < 19) v = v * 10 + (uint64_t)(*s++ - '0'), n++;
  if (!n || (s < end && isdigit((unsigned char)*s))) return -1;
  *p = s;
  *out = v;
  return 0;
}

/* "bytes FIRST-LAST/TOTAL", or with "*" for an unknown TOTAL (RFC 9110 §14.4). */
static int parse_content_range(dcr__response *r, const char *s, const char *end) {
  if (end - s < 6 || memcmp(s, "bytes ", 6)) return -1;
  s += 6;
  if (parse_u64(&s, end, &r->first) || s == end || *s++ != '-' ||
      parse_u64(&s, end, &r->last) || s == end || *s++ != '/' || r->last < r->first)
    return -1;
  if (end - s == 1 && *s == '*') return r->total_known = 0, 0;
  if (parse_u64(&s, end, &r->total) || s != end || r->last >= r->total) return -1;
  r->total_known = 1;
  return 0;
}

static void copy_value(char *out, size_t max, const char *s, const char *end, int *malformed) {
  size_t n = (size_t)(end - s);
  if (n > max) {
    *malformed = 1;
    n = 0;
  }
  memcpy(out, s, n);
  out[n] = 0;
}

void dcr__response_header(dcr__response *r, const char *line, size_t length) {
  const char *end = line + length;
  while (end > line && (end[-1] == '\r' || end[-1] == '\n')) end--;
  if (iequal_prefix(line, (size_t)(end - line), "http/")) { /* a status line: a new response */
    const char *sp = memchr(line, ' ', (size_t)(end - line));
    memset(r, 0, sizeof *r);
    const char *p = sp ? sp + 1 : end;
    uint64_t status = 0;
    if (end - p < 3 || parse_u64(&p, p + 3, &status) || (p < end && *p != ' ') || status < 100)
      r->malformed = 1;
    else
      r->status = (int)status;
    return;
  }
  const char *colon = memchr(line, ':', (size_t)(end - line));
  if (!colon) return;
  const char *v = colon + 1;
  while (v < end && (*v == ' ' || *v == '\t')) v++;
  const char *ve = end;
  while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
  size_t name = (size_t)(colon - line);
  if (name == 13 && iequal_prefix(line, name, "content-range")) {
    if (r->has_range || parse_content_range(r, v, ve)) r->malformed = 1;
    r->has_range = 1;
  } else if (name == 14 && iequal_prefix(line, name, "content-length")) {
    const char *p = v;
    uint64_t n;
    if (parse_u64(&p, ve, &n) || p != ve || (r->has_length && n != r->length)) r->malformed = 1;
    r->length = n;
    r->has_length = 1;
  } else if (name == 4 && iequal_prefix(line, name, "etag")) {
    copy_value(r->etag, DCR__VALIDATOR_MAX, v, ve, &r->malformed);
  } else if (name == 13 && iequal_prefix(line, name, "last-modified")) {
    copy_value(r->last_modified, DCR__VALIDATOR_MAX, v, ve, &r->malformed);
  } else if (name == 8 && iequal_prefix(line, name, "location")) {
    copy_value(r->location, DCR__LOCATION_MAX, v, ve, &r->malformed);
  }
}

/* Every response must describe the object the first one did (R-RAN-7): its
 * size (what a 200 says it is, or a 206's total), then its validators. */
static int same_object(const dcr__response *r, const dcr__object *obj, uint64_t size,
                       dcr_detail *d) {
  if (size != obj->size)
    return dcr__fail(d, DCR_E_CHANGED, "the object's size changed from %llu to %llu",
                     (unsigned long long)obj->size, (unsigned long long)size);
  if (obj->etag[0] && strcmp(r->etag, obj->etag))
    return dcr__fail(d, DCR_E_CHANGED, "the ETag changed from %.60s to %.60s", obj->etag,
                     r->etag[0] ? r->etag : "none");
  if (!obj->etag[0] && obj->last_modified[0] && strcmp(r->last_modified, obj->last_modified))
    return dcr__fail(d, DCR_E_CHANGED, "Last-Modified changed from %.40s to %.40s",
                     obj->last_modified, r->last_modified[0] ? r->last_modified : "none");
  return DCR_OK;
}

int dcr__response_judge(const dcr__response *r, dcr__object *obj, int first, uint64_t offset,
                        uint64_t length, int *code, dcr_detail *d) {
  *code = DCR_E_FETCH;
  if (r->malformed)
    return dcr__fail(d, DCR_E_FETCH, "malformed HTTP response (status %d)", r->status),
           DCR__RESP_FAIL;
  switch (r->status) {
    case 200:
    case 206: break;
    case 408: case 429: case 500: case 502: case 503: case 504:
      dcr__fail(d, DCR_E_FETCH, "HTTP %d", r->status);
      return DCR__RESP_RETRY;
    case 301: case 302: case 303: case 307: case 308:
      if (!r->location[0])
        return dcr__fail(d, DCR_E_FETCH, "HTTP %d without a Location", r->status), DCR__RESP_FAIL;
      return DCR__RESP_REDIRECT;
    case 412:
    case 416: /* a range inside the size we were told is no longer satisfiable */
      if (!first) {
        *code = DCR_E_CHANGED;
        return dcr__fail(d, DCR_E_CHANGED, "HTTP %d: the object changed", r->status),
               DCR__RESP_FAIL;
      }
      return dcr__fail(d, DCR_E_FETCH, "HTTP %d", r->status), DCR__RESP_FAIL;
    default:
      if (r->status >= 500) return dcr__fail(d, DCR_E_FETCH, "HTTP %d", r->status), DCR__RESP_RETRY;
      return dcr__fail(d, DCR_E_FETCH, "HTTP %d", r->status), DCR__RESP_FAIL;
  }
  if (r->status == 200) { /* Range ignored: the whole object, of the size it says */
    if (r->has_range || !r->has_length)
      return dcr__fail(d, DCR_E_FETCH, "a 200 response %s", r->has_range ? "with a Content-Range"
                       : "without a Content-Length"), DCR__RESP_FAIL;
    if (first)
      obj->size = r->length;
    else if (same_object(r, obj, r->length, d))
      return *code = DCR_E_CHANGED, DCR__RESP_FAIL;
  } else {
    if (!r->has_range || !r->total_known)
      return dcr__fail(d, DCR_E_FETCH, "a 206 response without a Content-Range of known size"),
             DCR__RESP_FAIL;
    if (r->has_length && r->length != r->last - r->first + 1)
      return dcr__fail(d, DCR_E_FETCH, "Content-Length %llu disagrees with Content-Range",
                       (unsigned long long)r->length), DCR__RESP_FAIL;
    if (first) { /* a suffix: it must end the object */
      if (r->last + 1 != r->total)
        return dcr__fail(d, DCR_E_FETCH, "the answer to a suffix range does not end the object"),
               DCR__RESP_FAIL;
      obj->size = r->total;
    } else {
      if (same_object(r, obj, r->total, d)) return *code = DCR_E_CHANGED, DCR__RESP_FAIL;
      if (r->first != offset || r->last - r->first + 1 != length)
        return dcr__fail(d, DCR_E_FETCH, "asked for bytes %llu-%llu, sent %llu-%llu",
                         (unsigned long long)offset, (unsigned long long)(offset + length - 1),
                         (unsigned long long)r->first, (unsigned long long)r->last),
               DCR__RESP_FAIL;
    }
  }
  if (first) {
    memcpy(obj->etag, r->etag, sizeof obj->etag);
    memcpy(obj->last_modified, r->last_modified, sizeof obj->last_modified);
  }
  return r->status == 200 ? DCR__RESP_WHOLE : DCR__RESP_PART;
}

void dcr__url_shown(const char *url, char *out, size_t capacity) {
  const char *scheme = strstr(url, "://");
  const char *host = scheme ? scheme + 3 : url;
  size_t auth = strcspn(host, "/?#");
  const char *at = memchr(host, '@', auth);
  if (at) host = at + 1; /* userinfo: a password */
  size_t keep = strcspn(host, "?#");
  snprintf(out, capacity, "%.*s%.*s%s", scheme ? (int)(scheme + 3 - url) : 0, url, (int)keep, host,
           host[keep] ? "?..." : "");
}
