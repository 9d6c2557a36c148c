/*
 * apply.c - dcr_apply and dcr_check_target (SPEC.md §10).
 *
 * The target is written front to back, tensor by tensor in offset order, into a
 * temporary file beside the output, by a pass (pass.c) whose input is the base
 * file and whose workers write each chunk's result. The output is renamed into
 * place only once every base and target hash has matched.
 *
 * A checkpoint that is already the bundle's target is accepted too (§10.2): when
 * the input is not the base, it is read again as the target, every chunk left as
 * it is, and the target hashes decide.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../format/checkpoint.h"
#include "codec.h"

typedef struct {
  dcr_reader *r;
  const dcr_apply_options *opt;
  int as_target; /* the input is taken to be the target already: nothing to apply */
  int base_fd, out_fd;
  const char *base_path;
  dcr__checkpoint base;
  uint64_t *base_offset; /* entry -> file offset of its base tensor */
} applier;

static void name_entry(dcr_detail *d, const dcr__manifest *m, uint64_t i) {
  dcr__detail_tensor(d, i, m->entries[i].name, m->entries[i].name_length);
}

/* The pass's emit hook. Workers write their own chunks: the copy into the page
 * cache is most of an apply's cost, and it parallelizes; only hashing must follow
 * file order. */
static int write_output(void *ctx, const dcr__pass_chunk *c, dcr_detail *d) {
  applier *a = ctx;
  const dcr__manifest *m = &a->r->man;
  if (a->out_fd < 0 || !c->bytes) return DCR_OK;
  return dcr__pwrite_full(a->out_fd, c->result, c->bytes,
                          m->prefix_length + m->entries[c->job->entry].target.offset + c->at, d);
}

/* Base tensors that the pass did not read (removed or recoded) are hashed too:
 * the base state id covers them. */
static int hash_unread(applier *a, dcr_detail *d) {
  const dcr__manifest *m = &a->r->man;
  for (uint64_t i = 0; !a->as_target && i < m->entry_count; i++) {
    const dcr__entry *e = &m->entries[i];
    if (!(e->presence & DCR__HAS_BASE) || dcr__entry_delta_coded(e)) continue;
    uint8_t h[16];
    int rc = dcr__hash_range(a->base_fd, a->base_offset[i], e->base.byte_length, h, d);
    if (!rc && !DCR__CHECKSUM_OK(memcmp(h, e->base.hash, 16) == 0))
      rc = (name_entry(d, m, i),
            dcr__fail(d, DCR_E_BASE_MISMATCH, "base tensor's hash differs from the bundle's"));
    if (rc) return dcr__detail_file(d, a->base_path), rc;
  }
  return DCR_OK;
}

static void applier_free(applier *a) {
  free(a->base_offset);
  dcr__checkpoint_free(&a->base);
  if (a->base_fd >= 0) close(a->base_fd);
}

/* A temporary file beside `path`, so that rename() is atomic. */
static int open_temp(const char *path, char *tmp, size_t size, int *fd, dcr_detail *d) {
  if ((size_t)snprintf(tmp, size, "%s.dcr-XXXXXX", path) >= size)
    return dcr__fail(d, DCR_E_ARGUMENT, "output path too long");
  *fd = mkstemp(tmp);
  if (*fd < 0) return dcr__fail(d, DCR_E_IO, "cannot create a temporary file: %s", strerror(errno));
  mode_t mask = umask(0);
  umask(mask);
  fchmod(*fd, 0666 & ~mask);
  return DCR_OK;
}

void dcr_apply_options_default(dcr_apply_options *o) {
  memset(o, 0, sizeof *o);
  o->sync = 1;
}

/* §10.1: a wrong base is reported as such, whatever else failed on the way. A
 * chunk that failed on the right base is the bundle's fault; on another input
 * it says nothing, so every base tensor's hash decides. */
static int input_is_base(const applier *a) {
  const dcr__manifest *m = &a->r->man;
  for (uint64_t i = 0; i < m->entry_count; i++) {
    const dcr__entry *e = &m->entries[i];
    uint8_t h[16];
    if (!(e->presence & DCR__HAS_BASE)) continue;
    if (dcr__hash_range(a->base_fd, a->base_offset[i], e->base.byte_length, h, NULL) ||
        memcmp(h, e->base.hash, 16))
      return 0;
  }
  return 1;
}

/* One attempt at §10: the input taken as the base, or as the target already. */
static int apply_as(dcr_reader *r, const char *base_path, const char *out_path,
                    const dcr_apply_options *opt, int as_target, dcr_detail *d) {
  dcr_limits lim = r->lim;
  applier a = {.r = r, .opt = opt, .as_target = as_target, .base_fd = -1, .out_fd = -1,
               .base_path = base_path};
  dcr__file input = {.fd = -1, .path = base_path};
  dcr__pass_spec spec = {.r = r, .verify = DCR_VERIFY_FULL, .as_target = as_target,
                         .threads = opt->threads, .cancel = opt->cancel,
                         .progress = opt->progress, .progress_opaque = opt->progress_opaque,
                         .input = dcr__file_input, .input_ctx = &input, .emit = write_output,
                         .ctx = &a};
  char tmp[4096] = "";
  dcr__pass *pass = NULL;
  int rc = DCR_OK;
  a.base_fd = open(base_path, O_RDONLY | O_CLOEXEC);
  if (a.base_fd < 0) rc = dcr__fail(d, DCR_E_IO, "cannot open: %s", strerror(errno));
  if (!rc) rc = dcr__checkpoint_read(a.base_fd, r->man.kind, &lim, &a.base, d);
  if (rc) dcr__detail_file(d, base_path);
  if (!rc && !(a.base_offset = calloc((size_t)r->man.entry_count + 1, sizeof *a.base_offset)))
    rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  if (!rc && (rc = dcr__match_checkpoint(&r->man, &a.base, as_target, a.base_offset, d)))
    dcr__detail_file(d, base_path);
  input.fd = a.base_fd;
  input.offsets = a.base_offset;
  if (!rc) rc = dcr__pass_init(&pass, &spec, d);
  if (!rc && out_path && (rc = open_temp(out_path, tmp, sizeof tmp, &a.out_fd, d)))
    dcr__detail_file(d, out_path);
  if (!rc && a.out_fd >= 0)
    rc = dcr__pwrite_full(a.out_fd, r->man.prefix, (size_t)r->man.prefix_length, 0, d);
  if (!rc) rc = dcr__pass_run(pass, d);
  if (!rc) rc = hash_unread(&a, d);
  if ((rc == DCR_E_ENCODING || rc == DCR_E_TARGET_MISMATCH) && !as_target && !input_is_base(&a))
    rc = (dcr__detail_init(d), dcr__detail_file(d, base_path),
          dcr__fail(d, DCR_E_BASE_MISMATCH, "the input is not the bundle's base"));
  if (!rc && a.out_fd >= 0 && opt->sync && fsync(a.out_fd))
    rc = dcr__fail(d, DCR_E_IO, "fsync failed: %s", strerror(errno));
  if (a.out_fd >= 0 && close(a.out_fd) && !rc)
    rc = dcr__fail(d, DCR_E_IO, "close failed: %s", strerror(errno));
  if (!rc && out_path && rename(tmp, out_path))
    rc = dcr__fail(d, DCR_E_IO, "cannot rename into place: %s", strerror(errno));
  if (rc && tmp[0]) unlink(tmp);
  if (rc && !d->file[0]) dcr__detail_file(d, rc == DCR_E_BASE_MISMATCH ? base_path : r->path);
  dcr__pass_free(pass);
  applier_free(&a);
  return rc;
}

/* Failures that say something about the bundle or the input, rather than about
 * this machine or the caller. */
static int about_the_data(int rc) {
  return rc && rc != DCR_E_IO && rc != DCR_E_NOMEM && rc != DCR_E_ARGUMENT &&
         rc != DCR_E_INTERRUPTED;
}

int dcr_apply(dcr_reader *r, const char *base_path, const char *out_path,
              const dcr_apply_options *opt, dcr_detail *d) {
  dcr_detail scratch, again;
  if (!d) d = &scratch;
  dcr__detail_init(d);
  dcr_apply_options defaults;
  if (!opt) dcr_apply_options_default(&defaults), opt = &defaults;
  int rc = apply_as(r, base_path, out_path, opt, 0, d);
  /* §15: the chunk stage comes before the apply stage, so a chunk that cannot be
   * decoded is what to report, whatever the input. (On success every chunk has
   * been decoded already.) */
  if (about_the_data(rc)) {
    dcr__detail_init(&again);
    int chunk_rc = dcr_reader_verify(r, &again);
    if (about_the_data(chunk_rc)) {
      *d = again;
      return chunk_rc;
    }
  }
  /* Not the base: perhaps the target already, as after a retried job. If not that
   * either, the first answer stands. */
  dcr__detail_init(&again);
  if (rc == DCR_E_BASE_MISMATCH && apply_as(r, base_path, out_path, opt, 1, &again) == DCR_OK) {
    dcr__detail_init(d);
    rc = DCR_OK;
  }
  return rc;
}

int dcr_check_target(dcr_reader *r, const char *path, const dcr_apply_options *opt,
                     dcr_detail *d) {
  (void)opt;
  dcr_detail scratch;
  if (!d) d = &scratch;
  dcr__detail_init(d);
  const dcr__manifest *m = &r->man;
  dcr__checkpoint ck = {0};
  int fd = open(path, O_RDONLY | O_CLOEXEC), rc = DCR_OK;
  if (fd < 0) rc = dcr__fail(d, DCR_E_IO, "cannot open: %s", strerror(errno));
  if (!rc) rc = dcr__checkpoint_read(fd, m->kind, &r->lim, &ck, d);
  if (!rc && (ck.prefix_length != m->prefix_length ||
              (m->prefix_length && memcmp(ck.prefix, m->prefix, (size_t)m->prefix_length)) ||
              ck.file_size != m->prefix_length + m->data_length))
    rc = dcr__fail(d, DCR_E_TARGET_MISMATCH, "file's header or size differs from the target's");
  size_t j = 0;
  for (uint64_t i = 0; i < m->entry_count && !rc; i++) {
    const dcr__entry *e = &m->entries[i];
    if (!(e->presence & DCR__HAS_TARGET)) continue;
    /* equal prefixes make the tensor lists equal, in the same name order */
    const dcr__tensor *t = &ck.tensors[j++];
    uint8_t h[16];
    rc = dcr__hash_range(fd, ck.prefix_length + t->desc.offset, t->desc.byte_length, h, d);
    if (!rc && memcmp(h, e->target.hash, 16))
      rc = (name_entry(d, m, i),
            dcr__fail(d, DCR_E_TARGET_MISMATCH, "tensor's hash differs from the target's"));
  }
  if (rc) dcr__detail_file(d, path);
  dcr__checkpoint_free(&ck);
  if (fd >= 0) close(fd);
  return rc;
}
