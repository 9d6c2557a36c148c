/*
 * patch.c - the dcr_patch object (options through setters, stats), and the write
 * path of the in-place apply. Every write and fsync of a journal or a checkpoint
 * goes through dcr__wio_*, where the unit tests inject failures and torn writes.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "refit.h"

int dcr_patch_create(dcr_patch **out, dcr_reader *r, dcr_detail *d) {
  if (d) dcr__detail_init(d);
  *out = NULL;
  if (!r) return dcr__fail(d, DCR_E_ARGUMENT, "no reader");
  dcr_patch *p = calloc(1, sizeof *p);
  if (!p) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  p->r = r;
  p->verify = DCR_VERIFY_FULL;
  p->sync = 1;
  *out = p;
  return DCR_OK;
}

void dcr_patch_free(dcr_patch *p) { free(p); }

int dcr_patch_set_verify(dcr_patch *p, int level) {
  if (level != DCR_VERIFY_FULL && level != DCR_VERIFY_CHUNK && level != DCR_VERIFY_NONE)
    return DCR_E_ARGUMENT;
  p->verify = level;
  return DCR_OK;
}

void dcr_patch_set_threads(dcr_patch *p, unsigned threads) { p->threads = threads; }

void dcr_patch_set_progress(dcr_patch *p, dcr_progress_fn fn, void *opaque) {
  p->progress = fn;
  p->progress_opaque = opaque;
}

void dcr_patch_set_cancel(dcr_patch *p, const volatile int *cancel) { p->cancel = cancel; }

void dcr_patch_set_sync(dcr_patch *p, int sync) { p->sync = sync != 0; }

void dcr_patch_set_salvage(dcr_patch *p, int salvage) { p->salvage = salvage != 0; }

void dcr_patch_set_base(dcr_patch *p, dcr_resolve_fn resolve, void *opaque) {
  p->whole_base = resolve;
  p->whole_base_opaque = opaque;
}

void dcr_patch_stats_get(const dcr_patch *p, dcr_patch_stats *stats, size_t size) {
  memcpy(stats, &p->stats, size < sizeof p->stats ? size : sizeof p->stats);
}

void dcr__patch_set_faults(dcr_patch *p, dcr__faults *faults) { p->faults = faults; }

int dcr__wio_write(dcr__faults *f, int fd, const void *buf, size_t length, uint64_t offset,
                   dcr_detail *d) {
  /* Atomic: replay writes from several threads; which write is the k-th then
   * depends on timing, but exactly one fails. */
  if (f && __atomic_add_fetch(&f->writes, 1, __ATOMIC_RELAXED) == f->fail_write) {
    size_t torn = f->torn < length ? f->torn : length;
    if (torn) dcr__pwrite_full(fd, buf, torn, offset, NULL);
    return dcr__fail(d, DCR_E_IO, "write failed at offset %llu: %s (injected)",
                     (unsigned long long)(offset + torn), strerror(f->error));
  }
  return dcr__pwrite_full(fd, buf, length, offset, d);
}

int dcr__wio_sync(dcr__faults *f, int fd, dcr_detail *d) {
  if (f && __atomic_add_fetch(&f->syncs, 1, __ATOMIC_RELAXED) == f->fail_sync)
    return dcr__fail(d, DCR_E_IO, "fsync failed: %s (injected)", strerror(f->error));
  /* Linux reports a failed writeback once; the data may be lost, so it is an error
   * that stops the apply, never retried as if it had worked. */
  if (fsync(fd)) return dcr__fail(d, DCR_E_IO, "fsync failed: %s", strerror(errno));
  return DCR_OK;
}

int dcr__wio_sync_dir(dcr__faults *f, const char *path, dcr_detail *d) {
  char copy[4096];
  if ((size_t)snprintf(copy, sizeof copy, "%s", path) >= sizeof copy)
    return dcr__fail(d, DCR_E_ARGUMENT, "path too long");
  int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return dcr__fail(d, DCR_E_IO, "cannot open the directory: %s", strerror(errno));
  int rc = dcr__wio_sync(f, fd, d);
  close(fd);
  return rc;
}

const dcr__chunk *dcr__probe_chunk_skipping(const dcr_reader *r, const uint8_t *skip) {
  for (uint64_t k = 0; k < r->chunk_count; k++) {
    uint32_t i = r->chunks[k].tensor;
    if (dcr__entry_delta_coded(&r->man.entries[i]) && dcr__selected(r, i) && !(skip && skip[i]))
      return &r->chunks[k];
  }
  return NULL;
}

const dcr__chunk *dcr__probe_chunk(const dcr_reader *r) { return dcr__probe_chunk_skipping(r, NULL); }

int dcr__probe(const dcr_reader *r, const dcr__chunk *c, const uint8_t *bytes, int *as_target,
               dcr_detail *d) {
  size_t n = dcr__chunk_bytes(&r->man, &r->man.entries[c->tensor], c->chunk);
  int rc = dcr__chunk_checks(r, c, d);
  if (rc) return rc;
  uint8_t *digests = malloc(16 * DCR__PIECES(n) + 16);
  if (!digests) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  uint64_t check = dcr__pieces_check(digests, dcr__pieces(bytes, n, digests));
  free(digests);
  *as_target = DCR__CHECKSUM_OK(check == c->target_check) && check != c->base_check;
  if (DCR__CHECKSUM_OK(check == c->base_check) || *as_target) return DCR_OK;
  const dcr__entry *e = &r->man.entries[c->tensor];
  dcr__detail_tensor(d, c->tensor, e->name, e->name_length);
  dcr__detail_chunk(d, c->chunk);
  return dcr__fail(d, DCR_E_BASE_MISMATCH, "chunk's bytes match neither the bundle's base nor "
                   "its target");
}
