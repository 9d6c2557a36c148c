/*
 * common.h - internal helpers shared by every part of libdcr: little-endian
 * access, overflow-checked arithmetic, error details. Not installed.
 */
#ifndef DCR_COMMON_H
#define DCR_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dcr.h"

#define DCR_HIDDEN __attribute__((visibility("hidden")))

static inline uint16_t dcr__le16(const uint8_t *p) {
  return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t dcr__le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t dcr__le64(const uint8_t *p) {
  return (uint64_t)dcr__le32(p) | (uint64_t)dcr__le32(p + 4) << 32;
}
static inline void dcr__put16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static inline void dcr__put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void dcr__put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Checked arithmetic: return 1 on overflow. */
static inline int dcr__add_overflow(uint64_t a, uint64_t b, uint64_t *r) {
  return __builtin_add_overflow(a, b, r);
}
static inline int dcr__mul_overflow(uint64_t a, uint64_t b, uint64_t *r) {
  return __builtin_mul_overflow(a, b, r);
}

/* Checksum comparisons. A fuzzing build (-DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION,
 * set only by the fuzz/ harness build in build-fuzz*) treats every checksum, state
 * id and hash comparison as matching, so that fuzzers reach the code behind them.
 * The comparison is still evaluated. Production builds never define it (the
 * Makefile refuses to, and tests/test_production.c checks that bad checksums are
 * rejected). Use as: if (!DCR__CHECKSUM_OK(computed == stored)) fail. */
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#define DCR__CHECKSUM_OK(match) ((void)(match), 1)
#else
#define DCR__CHECKSUM_OK(match) (match)
#endif

static inline uint64_t dcr__align64(uint64_t x) { return (x + 63) & ~(uint64_t)63; }

/* limits.c: the limits a reader works with: the caller's (the defaults if NULL),
 * a max_memory of 0 being the default budget. */
DCR_HIDDEN void dcr__limits_take(dcr_limits *out, const dcr_limits *given);

/* Error details. dcr__fail fills `d` (if not NULL) and returns `code`, so that
 * `return dcr__fail(d, DCR_E_X, "fmt", ...)` reports and fails in one line. Fields
 * already set by a caller (file, section, tensor...) are kept. */
DCR_HIDDEN void dcr__detail_init(dcr_detail *d);
DCR_HIDDEN int dcr__fail(dcr_detail *d, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
DCR_HIDDEN void dcr__detail_file(dcr_detail *d, const char *file);
DCR_HIDDEN void dcr__detail_at(dcr_detail *d, const char *section, uint64_t offset);
DCR_HIDDEN void dcr__detail_tensor(dcr_detail *d, uint64_t index, const char *name,
                                   size_t name_length);
DCR_HIDDEN void dcr__detail_chunk(dcr_detail *d, uint64_t chunk);

/* io.c: whole positioned reads and writes that retry on EINTR and short counts. */
DCR_HIDDEN int dcr__pread_full(int fd, void *buf, size_t length, uint64_t offset,
                               dcr_detail *d);
DCR_HIDDEN int dcr__pwrite_full(int fd, const void *buf, size_t length, uint64_t offset,
                                dcr_detail *d);
/* An unnamed temporary file, read and write, in dir (NULL: TMPDIR, else /tmp),
 * gone when closed; -1 and errno on failure. */
DCR_HIDDEN int dcr__temp_fd(const char *dir);

/* A read-only view of a checkpoint range, read into the caller's buffer (never
 * mapped: checkpoint.c says why; dcr__checkpoint_view opens one). Memory is the
 * buffers of the views alive, whatever the file's size. */
typedef struct {
  const uint8_t *data;
} dcr__view;

DCR_HIDDEN void dcr__view_close(dcr__view *v);
/* format/dtype.c: the highest dtype code of format 1.`minor` (§12, R-VER-4), and a
 * name's code among those (0: unknown). */
DCR_HIDDEN int dcr__dtype_max(unsigned minor);
DCR_HIDDEN int dcr__dtype_lookup(const char *name, size_t length, unsigned minor);

/* Strict UTF-8 (RFC 3629): no overlongs, no surrogates, nothing above U+10FFFF. */
DCR_HIDDEN int dcr__utf8_valid(const uint8_t *s, size_t n);
/* The length (1 to 4) of the strict UTF-8 character that starts s[0..n), n >= 1;
 * 0 if none does. */
DCR_HIDDEN size_t dcr__utf8_char(const uint8_t *s, size_t n);

/* n bytes as 2n lower-case hex digits and a NUL; and back from exactly 32 of
 * them (-1 for anything else: one spelling per digest). */
DCR_HIDDEN void dcr__hex(const uint8_t *p, size_t n, char *out);
DCR_HIDDEN int dcr__unhex16(const char *s, uint8_t out[16]);

/* format/json_cost.c: the memory jansson would take to parse a JSON text whole,
 * counted in one pass (pieces fed in order), before anything is allocated. */
typedef struct {
  uint64_t objects, arrays, colons, values, string_bytes;
  uint64_t root_members; /* members of the root object */
  uint64_t largest;      /* the dearest root member's own document */
  uint64_t member_start;
  size_t level, depth;   /* nesting now, and the deepest */
  int in_string, escaped;
} dcr__json_cost;

DCR_HIDDEN void dcr__json_cost_init(dcr__json_cost *c);
DCR_HIDDEN void dcr__json_cost_feed(dcr__json_cost *c, const char *text, size_t n);
/* The whole document's cost in bytes, for the text fed so far. */
DCR_HIDDEN uint64_t dcr__json_cost_dom(const dcr__json_cost *c);

/* Bytewise comparison of two names, shorter first on a common prefix. */
DCR_HIDDEN int dcr__name_cmp(const char *a, size_t na, const char *b, size_t nb);

/* A tensor's description on one side (SPEC.md §6.1). dims points into storage
 * owned by whoever owns the descriptor. */
typedef struct {
  int dtype;
  unsigned rank;
  uint64_t *dims;
  uint64_t byte_length;
  uint64_t offset;  /* in the data region */
  uint8_t hash[16]; /* XXH3-128, canonical; filled once computed */
} dcr__desc;

/* Checks dtype, rank and shape × size = byte_length (SPEC.md §2.1 rule 4, §6.2). */
DCR_HIDDEN int dcr__desc_check(const dcr__desc *t, const dcr_limits *lim, dcr_detail *d);

#endif
