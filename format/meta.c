/*
 * meta.c - the META section: sorted key/value pairs (SPEC.md §6.4).
 */
#include <stdio.h>
#include <stdlib.h>

#include "format.h"

void dcr__meta_free(dcr__metadata *m) {
  free(m->pairs);
  free(m->storage);
  memset(m, 0, sizeof *m);
}

/* The smallest pair: a 2-byte key length, a 1-byte key, a 4-byte value length. */
#define MIN_PAIR_SIZE 7

/* Parses into NUL-terminated copies so callers get C strings (U+0000 is refused,
 * so none is cut short). Fields are checked in stored order (SPEC.md §6.4). */
int dcr__meta_parse(const uint8_t *p, size_t length, const dcr_limits *lim,
                    dcr__metadata *out, dcr_detail *d) {
  memset(out, 0, sizeof *out);
  if (length < 4) return dcr__fail(d, DCR_E_TRUNCATED, "metadata shorter than its count");
  uint64_t count = dcr__le32(p);
  if (count > (length - 4) / MIN_PAIR_SIZE)
    return dcr__fail(d, DCR_E_TRUNCATED, "%llu metadata pairs cannot fit in %zu bytes",
                     (unsigned long long)count, length);
  out->pairs = calloc(count ? count : 1, sizeof *out->pairs);
  out->storage = malloc(length + 2 * count + 1);
  if (!out->pairs || !out->storage) {
    dcr__meta_free(out);
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate metadata");
  }
  size_t at = 4;
  char *s = out->storage;
  int rc = DCR_OK;
  for (uint64_t i = 0; i < count && !rc; i++) {
    for (int part = 0; part < 2 && !rc; part++) {
      const char *what = part ? "value" : "key";
      size_t width = part ? 4 : 2;
      if (length - at < width) {
        rc = dcr__fail(d, DCR_E_TRUNCATED, "metadata ends inside pair %llu", (unsigned long long)i);
        break;
      }
      size_t n = part ? dcr__le32(p + at) : dcr__le16(p + at);
      at += width;
      if (!part && n > lim->max_name_length)
        rc = dcr__fail(d, DCR_E_LIMIT, "metadata key %llu is %zu bytes, over the limit %llu",
                       (unsigned long long)i, n, (unsigned long long)lim->max_name_length);
      else if (length - at < n)
        rc = dcr__fail(d, DCR_E_TRUNCATED, "metadata %s %llu runs past the section", what,
                       (unsigned long long)i);
      else if ((!part && !n) || !dcr__utf8_valid(p + at, n))
        rc = dcr__fail(d, DCR_E_MANIFEST, "metadata %s %llu is empty, not UTF-8 or holds U+0000",
                       what, (unsigned long long)i);
      if (rc) break;
      memcpy(s, p + at, n);
      s[n] = '\0';
      if (part) out->pairs[i].value = s;
      else out->pairs[i].key = s;
      if (!part && i && strcmp(out->pairs[i - 1].key, s) >= 0)
        rc = dcr__fail(d, DCR_E_MANIFEST, "metadata key \"%.64s\" is out of order or repeated", s);
      s += n + 1;
      at += n;
    }
  }
  if (!rc && at != length)
    rc = dcr__fail(d, DCR_E_MANIFEST, "%zu bytes left after the metadata", length - at);
  if (rc) dcr__meta_free(out);
  else out->count = count;
  return rc;
}

static int by_key(const void *a, const void *b) {
  return strcmp(((const dcr_meta *)a)->key, ((const dcr_meta *)b)->key);
}

int dcr__meta_serialize(const dcr_meta *pairs, size_t count, uint8_t **out, size_t *length,
                        dcr_detail *d) {
  dcr_meta *sorted = malloc((count ? count : 1) * sizeof *sorted);
  if (!sorted) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate metadata");
  if (count) memcpy(sorted, pairs, count * sizeof *sorted);
  qsort(sorted, count, sizeof *sorted, by_key);
  size_t size = 4;
  int rc = DCR_OK;
  for (size_t i = 0; i < count && !rc; i++) {
    size_t k = strlen(sorted[i].key), v = strlen(sorted[i].value);
    if (!k || k > 0xFFFF || v > 0xFFFFFFFFu ||
        !dcr__utf8_valid((const uint8_t *)sorted[i].key, k) ||
        !dcr__utf8_valid((const uint8_t *)sorted[i].value, v))
      rc = dcr__fail(d, DCR_E_ARGUMENT, "metadata key \"%.64s\" or its value is invalid",
                     sorted[i].key);
    else if (i && !strcmp(sorted[i - 1].key, sorted[i].key))
      rc = dcr__fail(d, DCR_E_ARGUMENT, "metadata key \"%.64s\" given twice", sorted[i].key);
    else {
      dcr_detail why; /* DCR_E_MANIFEST there; from a writer's caller, an argument */
      dcr__detail_init(&why);
      if (dcr__meta_standard_check(sorted[i].key, sorted[i].value, &why))
        rc = dcr__fail(d, DCR_E_ARGUMENT, "%s", why.message);
    }
    size += 6 + k + v;
  }
  uint8_t *buf = rc ? NULL : malloc(size);
  if (!rc && !buf) rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate metadata");
  if (rc) {
    free(sorted);
    return rc;
  }
  uint8_t *p = buf;
  dcr__put32(p, (uint32_t)count);
  p += 4;
  for (size_t i = 0; i < count; i++) {
    size_t k = strlen(sorted[i].key), v = strlen(sorted[i].value);
    dcr__put16(p, (uint16_t)k);
    memcpy(p + 2, sorted[i].key, k);
    p += 2 + k;
    dcr__put32(p, (uint32_t)v);
    memcpy(p + 4, sorted[i].value, v);
    p += 4 + v;
  }
  free(sorted);
  /* A writer checks what it wrote by the readers' own rules and default limits
   * (R-WRT-2), so that no option makes a bundle that every reader rejects. */
  dcr_limits lim;
  dcr_limits_default(&lim);
  dcr__metadata check;
  if (size > lim.max_section_size)
    rc = dcr__fail(d, DCR_E_ARGUMENT, "metadata of %zu bytes is over the largest section readers "
                   "accept (%llu)", size, (unsigned long long)lim.max_section_size);
  else if ((rc = dcr__meta_parse(buf, size, &lim, &check, d)) != DCR_OK) {
    rc = DCR_E_ARGUMENT; /* the caller's, not a bundle's */
    if (d) {
      char why[sizeof d->message];
      snprintf(why, sizeof why, "%s", d->message);
      snprintf(d->message, sizeof d->message, "readers would reject this metadata: %.200s", why);
      d->code = rc;
    }
  } else
    dcr__meta_free(&check);
  if (rc) {
    free(buf);
    return rc;
  }
  *out = buf;
  *length = size;
  return DCR_OK;
}

/* ---- the standard keys (SPEC.md §6.4.1) */

int dcr__meta_step(const char *value, uint64_t *step) {
  size_t n = strlen(value);
  if (n == 0 || n > 16 || (value[0] == '0' && n > 1)) return -1;
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (value[i] < '0' || value[i] > '9') return -1;
    v = v * 10 + (uint64_t)(value[i] - '0');
  }
  if (v >= DCR__STEP_MAX) return -1;
  *step = v;
  return 0;
}

int dcr__meta_standard_check(const char *key, const char *value, dcr_detail *d) {
  uint64_t step;
  uint8_t digest[16];
  size_t n = strlen(value);
  if (!strcmp(key, "step") && dcr__meta_step(value, &step))
    return dcr__fail(d, DCR_E_MANIFEST, "metadata 'step' is '%.64s': a decimal integer below 2^53 "
                     "without leading zeros (SPEC.md §6.4.1)", value);
  if (!strcmp(key, "parent_bundle") && dcr__unhex16(value, digest))
    return dcr__fail(d, DCR_E_MANIFEST, "metadata 'parent_bundle' is '%.64s': 32 lower-case hex digits, "
                     "the parent bundle's XXH3-128 as xxh128sum prints it (SPEC.md §6.4.1)", value);
  if ((!strcmp(key, "run_id") || !strcmp(key, "trainer")) && (n == 0 || n > 256))
    return dcr__fail(d, DCR_E_MANIFEST, "metadata '%s' has %zu bytes: 1 to 256 (SPEC.md §6.4.1)", key, n);
  return DCR_OK;
}
