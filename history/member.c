/*
 * member.c - one member of an archive read against its index entry (SPEC.md
 * §19.2, §19.4): its bytes pulled from the archive, hashed as they arrive, and its
 * length and XXH3-128 checked once the last one is in (R-HIS-4).
 *
 * A member is read either whole, through a sink (a keyframe to a file, a member
 * copied into a new archive), or as a bundle reader's source. Then the reader's
 * walk (§15.3) gets the member's first 96 bytes, its header and its first
 * section's header, as soon as they arrive, so that a member that is not a
 * bundle fails at its first bytes whatever size it declares (R-HIS-8); a read
 * past them waits for the whole member and its digest, which come before every
 * other check of the bundle. The bytes are kept for the reader (verify and apply
 * read chunks again): in memory for a member of up to a quarter of the memory
 * budget, else in an unnamed temporary file, never more than the index's size
 * for the member, which max_bundle_size bounds.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "history.h"

#define PIECE ((size_t)1 << 20)
/* The bundle header and the first section's header (§4.1, §4.2). */
#define EARLY (DCR__HEADER_SIZE + DCR__SECTION_HEADER_SIZE)

typedef struct {
  dcr__hreader *r;
  const dcr__hmember *m;
  size_t index;               /* m's place in the index, for details */
  const volatile int *cancel;
  dcr__member_sink keep;      /* where a piece goes (NULL: nowhere but mem or fd) */
  void *opaque;
  pthread_mutex_t mu;         /* over the pulls: a reader may read from several threads */
  uint64_t pulled;            /* bytes in from the archive, hashed into st */
  int finished;               /* the end was checked */
  int failed;                 /* a failure met at byte `pulled` (or at the end), in why */
  dcr_detail why;
  XXH3_state_t *st;
  uint8_t *mem;               /* a member kept in memory: m->size bytes */
  uint8_t *piece;             /* else each piece, on its way */
  int fd;                     /* to a member kept in a temporary file, -1 */
} member;

static void fail(member *s) { s->failed = 1; }

/* Once the last byte is in: nothing after it, and the digest the index gives. */
static void finish(member *s) {
  const dcr__hmember *m = s->m;
  uint8_t more;
  size_t n;
  s->finished = 1;
  if (dcr__hreader_read(s->r, &more, 1, &n, &s->why)) fail(s);
  else if (n)
    fail(s), dcr__fail(&s->why, DCR_E_ARCHIVE, "member %zu ('%.64s') has more than the %llu bytes the index "
                       "says", s->index, m->name, (unsigned long long)m->size);
  if (s->failed) return;
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits_digest(s->st));
  if (DCR__CHECKSUM_OK(!memcmp(c.digest, m->digest, 16))) return;
  char got[33], want[33];
  dcr__hex(c.digest, 16, got), dcr__hex(m->digest, 16, want);
  fail(s), dcr__fail(&s->why, DCR_E_CHECKSUM, "member %zu ('%.64s') has XXH3-128 %s, the index says %s",
                     s->index, m->name, got, want);
}

/* Pulls from the archive until `need` bytes are in, or a failure is met (kept in
 * why, with pulled where it was met). */
static void pull(member *s, uint64_t need) {
  const dcr__hmember *m = s->m;
  while (!s->failed && s->pulled < need) {
    if (s->cancel && *s->cancel) {
      fail(s), dcr__fail(&s->why, DCR_E_INTERRUPTED, "interrupted");
      return;
    }
    uint64_t left = m->size - s->pulled;
    uint8_t *at = s->mem ? s->mem + s->pulled : s->piece;
    size_t n;
    if (dcr__hreader_read(s->r, at, left < PIECE ? (size_t)left : PIECE, &n, &s->why)) {
      fail(s);
      return;
    }
    if (n == 0) {
      fail(s), dcr__fail(&s->why, DCR_E_ARCHIVE, "member %zu ('%.64s') has %llu bytes, the index says %llu",
                         s->index, m->name, (unsigned long long)s->pulled, (unsigned long long)m->size);
      return;
    }
    XXH3_128bits_update(s->st, at, n);
    if ((s->fd >= 0 && dcr__pwrite_full(s->fd, at, n, s->pulled, &s->why)) ||
        (s->keep && s->keep(s->opaque, at, n, &s->why))) {
      fail(s);
      return;
    }
    s->pulled += n;
  }
  if (!s->failed && !s->finished && s->pulled == m->size) finish(s);
}

static int reported(const member *s, dcr_detail *d) {
  if (d) *d = s->why;
  return s->why.code;
}

static void member_free(member *s) {
  pthread_mutex_destroy(&s->mu);
  XXH3_freeState(s->st);
  free(s->mem);
  free(s->piece);
  if (s->fd >= 0) close(s->fd);
  free(s);
}

/* A member state for index member `index` (m), the archive's current member:
 * its bytes into memory (mem, a member's size) or a piece at a time through keep
 * or into the temporary file fd (set before the first pull). */
static int member_new(member **out, dcr__hreader *r, const dcr__hmember *m, size_t index, int in_memory,
                      dcr__member_sink keep, void *opaque, const volatile int *cancel, dcr_detail *d) {
  member *s = *out = calloc(1, sizeof *s);
  if (!s) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate a member's reader");
  *s = (member){.r = r, .m = m, .index = index, .cancel = cancel, .keep = keep, .opaque = opaque, .fd = -1};
  pthread_mutex_init(&s->mu, NULL);
  dcr__detail_init(&s->why);
  s->st = XXH3_createState();
  if (in_memory) s->mem = malloc(m->size ? (size_t)m->size : 1);
  else s->piece = malloc(PIECE);
  if (s->st && (s->mem || s->piece)) return XXH3_128bits_reset(s->st), DCR_OK;
  member_free(s);
  *out = NULL;
  return dcr__fail(d, DCR_E_NOMEM, "cannot allocate %llu bytes for member '%.64s'",
                   (unsigned long long)(in_memory ? m->size : PIECE), m->name);
}

int dcr__member_read(dcr__hreader *r, const dcr__hmember *m, size_t index, dcr__member_sink sink, void *opaque,
                     const volatile int *cancel, dcr_detail *d) {
  member *s;
  int err = member_new(&s, r, m, index, 0, sink, opaque, cancel, d);
  if (err) return err;
  pull(s, m->size);
  err = s->failed ? reported(s, d) : DCR_OK;
  member_free(s);
  return err;
}

/* ---- a bundle member as a reader's source */

/* Pulls until `need` bytes are in: DCR_OK if they are, and with `whole` if the
 * member is whole and its end checked; else the failure met. */
static int have(member *s, uint64_t need, int whole, dcr_detail *d) {
  pthread_mutex_lock(&s->mu);
  pull(s, need);
  int ok = s->pulled >= need && !(whole && s->failed);
  pthread_mutex_unlock(&s->mu);
  return ok ? DCR_OK : reported(s, d);
}

/* The first EARLY bytes as they arrive; any other only once the member is whole
 * and checked. */
static int source_read(void *ctx, uint64_t offset, size_t length, uint8_t *out, dcr_detail *d) {
  member *s = ctx;
  int rc = offset + length <= EARLY ? have(s, offset + length, 0, d) : have(s, s->m->size, 1, d);
  if (rc || !length) return rc;
  if (s->mem) return memcpy(out, s->mem + offset, length), DCR_OK;
  return dcr__pread_full(s->fd, out, length, offset, d);
}

static void source_plan(void *ctx, const dcr__range *ranges, size_t count) {
  (void)ctx, (void)ranges, (void)count; /* the member is whole past its first bytes */
}

static void source_close(void *ctx) { member_free(ctx); }

static const dcr__source_ops source_ops = {source_read, source_plan, source_close};

int dcr__member_reader(dcr_reader **out, dcr__hreader *r, const dcr__hmember *m, size_t index,
                       const dcr_limits *lim, const char *temp_dir, const volatile int *cancel, const char *name,
                       dcr_detail *d) {
  *out = NULL;
  /* A quarter of the budget, so that the reader keeps three quarters for its own
   * work (a chunk in flight, the manifest), which the member's bytes count against. */
  int in_memory = m->size <= lim->max_memory / 4;
  member *s;
  int err = member_new(&s, r, m, index, in_memory, NULL, NULL, cancel, d);
  if (err) return err;
  if (!in_memory && (s->fd = dcr__temp_fd(temp_dir)) < 0) {
    err = dcr__fail(d, DCR_E_IO, "cannot create a temporary file for member '%.64s' in %s: %s", m->name,
                    temp_dir && *temp_dir ? temp_dir : "TMPDIR", strerror(errno));
    member_free(s);
    return err;
  }
  dcr_limits rl = *lim;
  if (in_memory) rl.max_memory -= m->size;
  err = dcr__reader_open_ops(out, &source_ops, s, m->size, name, 1, &rl, d);
  /* A reader that opens has read the footer, so the member is whole and checked;
   * this makes sure of it whatever the reader reads (R-HIS-4). */
  if (!err && (err = have(s, m->size, 1, d))) dcr_reader_free(*out), *out = NULL;
  return err;
}
