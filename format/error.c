/*
 * error.c - error codes (generated from DCR_ERROR_LIST) and the detail record
 * that says where an error happened.
 */
#include <stdio.h>

#include "common.h"

static const char *const names[] = {
#define DCR_NAME_(name, num, msg) [num] = "DCR_" #name,
    DCR_ERROR_LIST(DCR_NAME_)
#undef DCR_NAME_
};

static const char *const messages[] = {
#define DCR_MSG_(name, num, msg) [num] = msg,
    DCR_ERROR_LIST(DCR_MSG_)
#undef DCR_MSG_
};

const char *dcr_error_name(int code) {
  if (code < 0 || code >= DCR_ERROR_COUNT_) return "DCR_E_UNKNOWN";
  return names[code];
}

const char *dcr_error_message(int code) {
  if (code < 0 || code >= DCR_ERROR_COUNT_) return "unknown error code";
  return messages[code];
}

unsigned dcr_version_number(void) { return DCR_VERSION_NUMBER; }
const char *dcr_version_string(void) { return DCR_VERSION_STRING; }

void dcr__detail_init(dcr_detail *d) {
  if (!d) return;
  memset(d, 0, sizeof *d);
  d->offset = d->tensor = d->chunk = DCR_NONE;
}

int dcr__fail(dcr_detail *d, int code, const char *fmt, ...) {
  /* The innermost failure knows best what went wrong: keep its message. */
  if (d && d->code == DCR_OK) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->message, sizeof d->message, fmt, ap);
    va_end(ap);
    d->code = code;
  }
  return code;
}

static void copy_field(char *dst, size_t cap, const char *src, size_t n) {
  if (n >= cap) n = cap - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

void dcr__detail_file(dcr_detail *d, const char *file) {
  if (d && file && !d->file[0]) copy_field(d->file, sizeof d->file, file, strlen(file));
}

void dcr__detail_at(dcr_detail *d, const char *section, uint64_t offset) {
  if (!d) return;
  if (section && !d->section[0]) copy_field(d->section, sizeof d->section, section, 4);
  if (d->offset == DCR_NONE) d->offset = offset;
}

void dcr__detail_tensor(dcr_detail *d, uint64_t index, const char *name, size_t n) {
  if (!d) return;
  if (d->tensor == DCR_NONE) d->tensor = index;
  if (name && !d->tensor_name[0]) copy_field(d->tensor_name, sizeof d->tensor_name, name, n);
}

void dcr__detail_chunk(dcr_detail *d, uint64_t chunk) {
  if (d && d->chunk == DCR_NONE) d->chunk = chunk;
}
