/*
 * apply.c - dcr_apply and dcr_check_target (SPEC.md §10).
 *
 * The target is written front to back, tensor by tensor in offset order, into a
 * temporary file beside the output (format/atomic.c: nameless where the filesystem
 * allows), by a pass (pass.c) whose input is the base file and whose workers write
 * each chunk's result. The output is put in place only once every base and target
 * hash has matched. Unchanged chunks of zeros (added or recoded tensors) are
 * neither built nor written: the file is sized first and they stay holes. Or the
 * target goes to a caller's sink, in file order, from the calling thread
 * (dcr_apply_to), as the pass takes each chunk. A set (format 1.1) is written as a
 * directory the same way (format/set_output.c), each chunk into its member file.
 *
 * A checkpoint that is already the bundle's target is accepted too (§10.2): when
 * the input is not the base, it is read again as the target, every chunk left as
 * it is, and the target hashes decide.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../format/atomic.h"
#include "../format/checkpoint.h"
#include "../format/set_output.h"
#include "codec.h"

/* The options' layout is the ABI ("Growing structs" in dcr.h). */
_Static_assert(sizeof(void *) != 8 || (sizeof(dcr_apply_options) == 104 &&
                                       offsetof(dcr_apply_options, reserved_) == 56),
               "dcr_apply_options changed size");

/* Where the target goes: a file, a sink, or nowhere (a check). */
typedef struct {
  const char *path;   /* a file (through a temporary file), or NULL */
  dcr_write_fn write; /* else a sink, or NULL */
  void *opaque;
  uint64_t sent;      /* bytes given to the sink */
} output;

typedef struct {
  dcr_reader *r;
  const dcr_apply_options *opt;
  int as_target; /* the input is taken to be the target already: nothing to apply */
  int out_fd;    /* a file output, or -1 */
  dcr__set_output *set_out; /* a set's output, or NULL */
  output *out;
  const char *base_path;
  dcr__checkpoint base;
  uint64_t *base_offset; /* entry -> offset of its base tensor (in a set's members
                            read as one file) */
} applier;

static uint64_t target_size(const dcr__manifest *m) {
  return m->prefix_length + m->data_length;
}

/* Bytes of the target that are unchanged chunks of zeros, which a file output
 * leaves as holes. */
static uint64_t zero_bytes(const dcr_reader *r, int as_target) {
  const dcr__manifest *m = &r->man;
  uint64_t n = 0;
  for (uint64_t i = 0; !as_target && i < m->entry_count; i++) {
    const dcr__entry *e = &m->entries[i];
    if (e->presence & DCR__HAS_TARGET)
      n += e->target.byte_length - dcr__entry_base_span(e, 0, e->target.byte_length);
  }
  for (uint64_t k = 0; !as_target && k < r->chunk_count; k++) {
    const dcr__entry *e = &m->entries[r->chunks[k].tensor];
    uint64_t at = (uint64_t)r->chunks[k].chunk * m->chunk_size;
    size_t bytes = dcr__chunk_bytes(m, e, r->chunks[k].chunk);
    n -= bytes - dcr__entry_base_span(e, at, bytes);
  }
  return n;
}

static const uint8_t zero_page[1u << 16];

/* The sink gets `bytes` zeros. */
static int send_zeros(output *o, uint64_t bytes, dcr_detail *d) {
  while (bytes) {
    size_t n = bytes < sizeof zero_page ? (size_t)bytes : sizeof zero_page;
    if (o->write(o->opaque, zero_page, n)) return dcr__fail(d, DCR_E_IO, "the output sink failed");
    o->sent += n, bytes -= n;
  }
  return DCR_OK;
}

static int send(output *o, const void *p, size_t n, dcr_detail *d) {
  if (n && o->write(o->opaque, p, n)) return dcr__fail(d, DCR_E_IO, "the output sink failed");
  o->sent += n;
  return DCR_OK;
}

static void name_entry(dcr_detail *d, const dcr__manifest *m, uint64_t i) {
  dcr__detail_tensor(d, i, m->entries[i].name, m->entries[i].name_length);
}

/* The pass's emit hook. Workers write their own chunks: the copy into the page
 * cache is most of an apply's cost, and it parallelizes; only hashing must follow
 * file order. */
static int write_output(void *ctx, const dcr__pass_chunk *c, dcr_detail *d) {
  applier *a = ctx;
  const dcr__manifest *m = &a->r->man;
  if (!c->bytes || c->zero) return DCR_OK; /* zeros: a hole, already */
  uint64_t at = m->entries[c->job->entry].target.offset + c->at;
  if (!a->set_out && a->out_fd < 0) return DCR_OK;
  int rc = DCR_OK;
  /* a 1 GiB chunk is seconds to write on a slow disk: an interrupt is looked for */
  for (size_t done = 0, n; !rc && done < c->bytes; done += n) {
    n = c->bytes - done < DCR__WATCH_BYTES ? c->bytes - done : DCR__WATCH_BYTES;
    if (done && a->opt->cancel && *a->opt->cancel)
      rc = dcr__fail(d, DCR_E_INTERRUPTED, "interrupted");
    else if (a->set_out)
      rc = dcr__set_output_write(a->set_out, at + done, c->result + done, n, d);
    else
      rc = dcr__pwrite_full(a->out_fd, c->result + done, n, m->prefix_length + at + done, d);
  }
  return rc;
}

/* The pass's take hook for a sink: chunks come in file order, on the calling
 * thread; gaps between tensors are zeros, as in a file. The prefix goes first,
 * with the first chunk, so that an input found wrong before any chunk has sent
 * nothing. */
static int send_output(void *ctx, const dcr__pass_chunk *c, dcr_detail *d) {
  applier *a = ctx;
  output *o = a->out;
  const dcr__manifest *m = &a->r->man;
  if (!o->write) return DCR_OK;
  int rc = o->sent ? DCR_OK : send(o, m->prefix, (size_t)m->prefix_length, d);
  uint64_t at = m->prefix_length + m->entries[c->job->entry].target.offset + c->at;
  if (!rc && at < o->sent && c->bytes)
    rc = dcr__fail(d, DCR_E_LAYOUT, "target tensors overlap");
  if (!rc && at > o->sent) rc = send_zeros(o, at - o->sent, d);
  if (!rc) rc = c->zero ? send_zeros(o, c->bytes, d) : send(o, c->result, c->bytes, d);
  return rc;
}

/* Base tensors that the pass did not read (removed or recoded) are hashed too:
 * the base state id covers them. */
static int hash_unread(applier *a, dcr_detail *d) {
  const dcr__manifest *m = &a->r->man;
  for (uint64_t i = 0; !a->as_target && i < m->entry_count; i++) {
    const dcr__entry *e = &m->entries[i];
    if (!(e->presence & DCR__HAS_BASE) || dcr__entry_delta_coded(e)) continue;
    uint8_t h[16];
    int rc = dcr__hash_range(&a->base, a->base_offset[i], e->base.byte_length, h, NULL, d);
    if (!rc && !DCR__CHECKSUM_OK(memcmp(h, e->base.hash, 16) == 0))
      rc = (name_entry(d, m, i),
            dcr__fail(d, DCR_E_BASE_MISMATCH, "base tensor's hash differs from the bundle's"));
    if (rc && !d->file[0]) dcr__detail_file(d, a->base_path);
    if (rc) return rc;
  }
  return DCR_OK;
}

static void applier_free(applier *a) {
  free(a->base_offset);
  dcr__checkpoint_free(&a->base);
}

static unsigned output_flags(const dcr_apply_options *o) {
  return (o->no_replace ? 0 : DCR__ATOMIC_REPLACE) | (o->sync ? DCR__ATOMIC_SYNC : 0);
}

/* A set's output: its temporary directory, every member created and sized. */
static int open_set_output(applier *a, dcr__set_output *so, dcr_detail *d) {
  const dcr__manifest *m = &a->r->man;
  int rc = dcr__set_output_open(so, a->out->path, m->members, m->member_count,
                                output_flags(a->opt), d);
  if (!rc) rc = dcr__set_output_check_space(so, target_size(m) - zero_bytes(a->r, a->as_target), d);
  if (!rc) rc = dcr__set_output_create(so, d);
  if (rc) dcr__set_output_abort(so);
  else a->set_out = so;
  return rc;
}

/* The file output: its temporary file, sized to the target at once (zeros stay
 * holes), after a check that the filesystem has room for what will be written. */
static int open_output(applier *a, dcr__atomic *at, dcr_detail *d) {
  const dcr__manifest *m = &a->r->man;
  uint64_t size = target_size(m);
  int rc = dcr__atomic_open(at, a->out->path, output_flags(a->opt), d);
  if (!rc) rc = dcr__atomic_check_space(at, size - zero_bytes(a->r, a->as_target), d);
  if (!rc && size > (uint64_t)INT64_MAX)
    rc = dcr__fail(d, DCR_E_IO, "the target's size does not fit a file offset");
  if (!rc && ftruncate(at->fd, (off_t)size))
    rc = dcr__fail(d, DCR_E_IO, "cannot size the output to %llu bytes: %s",
                   (unsigned long long)size, strerror(errno));
  if (!rc) rc = dcr__pwrite_full(at->fd, m->prefix, (size_t)m->prefix_length, 0, d);
  if (rc) dcr__atomic_abort(at), dcr__detail_file(d, a->out->path);
  a->out_fd = rc ? -1 : at->fd;
  return rc;
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
    if (dcr__hash_range(&a->base, a->base_offset[i], e->base.byte_length, h, NULL, NULL) ||
        memcmp(h, e->base.hash, 16))
      return 0;
  }
  return 1;
}

/* For a sink, which cannot start over: whether an input that has the base's
 * tensors is in fact the target already (§10.2), told by the first changed chunk
 * of a delta-coded tensor before anything is sent. Otherwise that is found out
 * only when the first changed chunk fails its base_check, after the chunks before
 * it have gone to the sink. */
static int is_target_already(const applier *a) {
  const dcr_reader *r = a->r;
  const dcr__manifest *m = &r->man;
  for (uint64_t k = 0; k < r->chunk_count; k++) {
    const dcr__chunk *c = &r->chunks[k];
    const dcr__entry *e = &m->entries[c->tensor];
    if (!dcr__entry_delta_coded(e)) continue;
    if (dcr__chunk_checks(r, c, NULL)) return 0;
    size_t bytes = dcr__chunk_bytes(m, e, c->chunk);
    uint8_t *p = malloc(bytes + 1), *pieces = malloc(16 * DCR__PIECES(bytes) + 1);
    int target = 0;
    if (p && pieces &&
        !dcr__checkpoint_pread(&a->base, p, bytes,
                               a->base_offset[c->tensor] + (uint64_t)c->chunk * m->chunk_size,
                               NULL)) {
      uint64_t check = dcr__pieces_check(pieces, dcr__pieces(p, bytes, pieces));
      target = check != c->base_check && check == c->target_check;
    }
    free(p), free(pieces);
    return target;
  }
  return 0;
}

/* One attempt at §10: the input taken as the base, or as the target already. */
static int apply_as(dcr_reader *r, const char *base_path, output *out,
                    const dcr_apply_options *opt, int as_target, dcr_detail *d) {
  dcr_limits lim = r->lim;
  applier a = {.r = r, .opt = opt, .as_target = as_target, .out_fd = -1, .out = out,
               .base_path = base_path};
  dcr__file input = {.ck = &a.base, .path = base_path, .cancel = opt->cancel};
  dcr__pass_spec spec = {.r = r, .verify = DCR_VERIFY_FULL, .as_target = as_target,
                         .lazy_zeros = 1, .threads = opt->threads, .cancel = opt->cancel,
                         .progress = opt->progress, .progress_opaque = opt->progress_opaque,
                         .input = dcr__file_input, .input_ctx = &input, .emit = write_output,
                         .take = out->write ? send_output : NULL, .ctx = &a};
  dcr__atomic at = {.fd = -1, .dir_fd = -1};
  dcr__set_output so = {.dir_fd = -1, .root_fd = -1};
  dcr__pass *pass = NULL;
  int rc = dcr__checkpoint_open(base_path, r->man.kind, &lim, r->minor, &a.base, d);
  if (!rc && !(a.base_offset = calloc((size_t)r->man.entry_count + 1, sizeof *a.base_offset)))
    rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  if (!rc && (rc = dcr__match_checkpoint(&r->man, &a.base, as_target, a.base_offset, d)))
    dcr__detail_file(d, base_path);
  if (!rc && out->write && !as_target && is_target_already(&a))
    rc = (dcr__detail_file(d, base_path),
          dcr__fail(d, DCR_E_BASE_MISMATCH, "the input is the bundle's target already"));
  input.offsets = a.base_offset;
  if (!rc) rc = dcr__pass_init(&pass, &spec, d);
  if (!rc && out->path)
    rc = r->man.kind == DCR_KIND_SET ? open_set_output(&a, &so, d) : open_output(&a, &at, d);
  if (!rc) rc = dcr__pass_run(pass, d);
  if (!rc) rc = hash_unread(&a, d);
  if (!rc && out->write && !out->sent) /* no target tensor: the prefix alone */
    rc = send(out, r->man.prefix, (size_t)r->man.prefix_length, d);
  if (!rc && out->write && out->sent < target_size(&r->man))
    rc = send_zeros(out, target_size(&r->man) - out->sent, d); /* a gap at the end */
  if ((rc == DCR_E_ENCODING || rc == DCR_E_TARGET_MISMATCH) && !as_target && !input_is_base(&a))
    rc = (dcr__detail_init(d), dcr__detail_file(d, base_path),
          dcr__fail(d, DCR_E_BASE_MISMATCH, "the input is not the bundle's base"));
  if (!rc && a.out_fd >= 0) rc = dcr__atomic_commit(&at, d);
  if (!rc && a.set_out) rc = dcr__set_output_commit(&so, d);
  dcr__atomic_abort(&at);
  dcr__set_output_abort(&so);
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

/* dcr_apply and dcr_apply_to. */
static int apply(dcr_reader *r, const char *base_path, output *out,
                 const dcr_apply_options *opt, dcr_detail *d) {
  dcr_detail scratch, again;
  if (!d) d = &scratch;
  dcr__detail_init(d);
  dcr_apply_options defaults;
  if (!opt) dcr_apply_options_default(&defaults), opt = &defaults;
  int rc = dcr__need_whole(r, d);
  if (rc) return rc;
  uint64_t size = target_size(&r->man);
  if (opt->max_target_size && size > opt->max_target_size)
    return dcr__fail(d, DCR_E_LIMIT, "the target is %llu bytes, over the caller's cap of %llu "
                     "(max_target_size)", (unsigned long long)size,
                     (unsigned long long)opt->max_target_size),
           dcr__detail_file(d, r->path), DCR_E_LIMIT;
  rc = apply_as(r, base_path, out, opt, 0, d);
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
   * either, the first answer stands. A sink that has had bytes cannot start over. */
  dcr__detail_init(&again);
  if (rc == DCR_E_BASE_MISMATCH && !out->sent &&
      apply_as(r, base_path, out, opt, 1, &again) == DCR_OK) {
    dcr__detail_init(d);
    rc = DCR_OK;
  }
  return rc;
}

int dcr_apply(dcr_reader *r, const char *base_path, const char *out_path,
              const dcr_apply_options *opt, dcr_detail *d) {
  output out = {.path = out_path};
  return apply(r, base_path, &out, opt, d);
}

int dcr_apply_to(dcr_reader *r, const char *base_path, const dcr_apply_options *opt,
                 dcr_write_fn write, void *opaque, dcr_detail *d) {
  output out = {.write = write, .opaque = opaque};
  if (!write || r->man.kind == DCR_KIND_SET) {
    if (d) dcr__detail_init(d), dcr__fail(d, DCR_E_ARGUMENT, write ? "a set's target is a "
                                          "directory: it cannot go to a stream" : "no sink");
    return DCR_E_ARGUMENT;
  }
  return apply(r, base_path, &out, opt, d);
}

/* Sequential: one read of the file, tensor by tensor; opt's threads are not used,
 * its cancel and progress are (per tensor). */
int dcr_check_target(dcr_reader *r, const char *path, const dcr_apply_options *opt,
                     dcr_detail *d) {
  dcr_detail scratch;
  if (!d) d = &scratch;
  dcr__detail_init(d);
  const dcr__manifest *m = &r->man;
  dcr__checkpoint ck;
  int rc = dcr__need_whole(r, d);
  if (rc) return rc;
  rc = dcr__checkpoint_open(path, m->kind, &r->lim, r->minor, &ck, d);
  /* a set's table is compared without the base's raw paths, which are the bundle's */
  uint64_t compared = m->kind == DCR_KIND_SET ? m->members_length : m->prefix_length;
  uint64_t own = m->kind == DCR_KIND_SET && !rc ? ck.prefix_length - 4 : ck.prefix_length;
  if (!rc && (own != compared ||
              (compared && memcmp(ck.prefix, m->prefix, (size_t)compared)) ||
              ck.file_size - ck.prefix_length != m->data_length))
    rc = dcr__fail(d, DCR_E_TARGET_MISMATCH, m->kind == DCR_KIND_SET
                   ? "the directory's members, their headers or sizes differ from the target's"
                   : "file's header or size differs from the target's");
  size_t j = 0;
  uint64_t done = 0, total = m->data_length;
  for (uint64_t i = 0; i < m->entry_count && !rc; i++) {
    const dcr__entry *e = &m->entries[i];
    if (!(e->presence & DCR__HAS_TARGET)) continue;
    if (opt && opt->cancel && *opt->cancel) {
      rc = dcr__fail(d, DCR_E_INTERRUPTED, "interrupted");
      break;
    }
    /* equal prefixes make the tensor lists equal, in the same name order */
    const dcr__tensor *t = &ck.tensors[j++];
    uint8_t h[16];
    rc = dcr__hash_range(&ck, ck.prefix_length + t->desc.offset, t->desc.byte_length, h, NULL, d);
    if (!rc && memcmp(h, e->target.hash, 16))
      rc = (name_entry(d, m, i),
            dcr__fail(d, DCR_E_TARGET_MISMATCH, "tensor's hash differs from the target's"));
    done += t->desc.byte_length;
    if (!rc && opt && opt->progress) opt->progress(opt->progress_opaque, done, total);
  }
  if (rc && !d->file[0]) dcr__detail_file(d, path);
  dcr__checkpoint_free(&ck);
  return rc;
}
