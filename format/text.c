/*
 * text.c - the rules for names: strict UTF-8 and bytewise order (SPEC.md §6.2);
 * digests as lower-case hex, the one spelling JSON documents use.
 */
#include <string.h>

#include "common.h"

static const char hexdigits[] = "0123456789abcdef";

size_t dcr__utf8_char(const uint8_t *s, size_t n) {
  uint8_t c = s[0];
  if (c < 0x80) return 1;
  size_t len;
  uint32_t cp, min;
  if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1Fu, min = 0x80;
  else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0Fu, min = 0x800;
  else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07u, min = 0x10000;
  else return 0;
  if (n < len) return 0;
  for (size_t k = 1; k < len; k++) {
    if ((s[k] & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (s[k] & 0x3Fu);
  }
  return cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) ? 0 : len;
}

int dcr__utf8_valid(const uint8_t *s, size_t n) {
  for (size_t i = 0, len; i < n; i += len)
    /* no NUL: names are C strings in every other language's API */
    if (!s[i] || !(len = dcr__utf8_char(s + i, n - i))) return 0;
  return 1;
}

int dcr__name_cmp(const char *a, size_t na, const char *b, size_t nb) {
  int c = memcmp(a, b, na < nb ? na : nb);
  if (c) return c;
  return (na > nb) - (na < nb);
}

void dcr__hex(const uint8_t *p, size_t n, char *out) {
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = hexdigits[p[i] >> 4];
    out[2 * i + 1] = hexdigits[p[i] & 15];
  }
  out[2 * n] = 0;
}

/* 32 lower-case hex digits, exactly: one spelling per digest. */
int dcr__unhex16(const char *s, uint8_t out[16]) {
  if (strlen(s) != 32) return -1;
  for (int i = 0; i < 32; i++) {
    const char *c = s[i] ? strchr(hexdigits, s[i]) : NULL;
    if (!c) return -1;
    unsigned v = (unsigned)(c - hexdigits);
    out[i / 2] = (uint8_t)(i & 1 ? out[i / 2] | v : v << 4);
  }
  return 0;
}
