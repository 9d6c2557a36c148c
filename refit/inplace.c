/*
 * inplace.c - dcr_patch_file: a checkpoint file patched into the bundle's target
 * where it lies, through the apply journal (SPEC.md §18).
 *
 * 1. A journal left by an interrupted apply is replayed before anything else; one
 *    that cannot be replayed is removed only if the file is proven a whole state
 *    (R-JNL-4), else the call stops, or (salvage) the file is finished from the
 *    bundle chunk by chunk.
 * 2. A pass (codec/pass.c) over the file checks what the verification level asks
 *    and, for each changed chunk, appends to a new journal the elements that
 *    change and their new values. The file is only read; the journal has a
 *    temporary name.
 * 3. Only if every check passed: the journal is committed, made durable and
 *    renamed into place, then replayed into the file, the file made durable, and
 *    the journal removed.
 * A crash before 3 leaves the file untouched and at most a journal under its
 * temporary name, which goes; a crash in 3 leaves a journal under its own name
 * that the next call finishes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

#include "refit.h"

typedef struct {
  dcr_patch *p;
  int fd;
  const char *path;
  dcr__checkpoint ck;
  uint64_t *offsets; /* entry -> file offset of its tensor */
  int as_target;
  int superseded; /* the journal beside the file cannot be replayed and a salvage
                     replaces it (R-JNL-5) */
  dcr__jwriter jw;
  char journal[4200];
  dcr__jbuilder *builders; /* per pass slot */
  dcr__jrecord *records;
  const uint8_t **payloads;
  size_t slots;
} inplace;

int dcr__open_checkpoint(const char *path, int *fd, dcr_detail *d) {
  /* Not through a symbolic link: in a Hugging Face cache a snapshot's files link to
   * content-addressed blobs that other snapshots share, and patching one would
   * change them all. The caller names the file itself. */
  *fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (*fd < 0)
    return errno == ELOOP
               ? dcr__fail(d, DCR_E_ARGUMENT, "is a symbolic link: patching in place would "
                           "change the file it points to, which others may share (a Hugging "
                           "Face cache's blobs are); give the real path, or apply to a copy "
                           "(-o OUT)")
               : dcr__fail(d, DCR_E_IO, "cannot open for writing: %s", strerror(errno));
  /* Two applies to one file would interleave their journals. */
  if (!flock(*fd, LOCK_EX | LOCK_NB)) return DCR_OK;
  int rc = errno == EWOULDBLOCK
               ? dcr__fail(d, DCR_E_IO, "another process is applying a bundle to this file")
               : dcr__fail(d, DCR_E_IO, "cannot lock: %s", strerror(errno));
  close(*fd);
  *fd = -1;
  return rc;
}

/* Worker: the journal record of a changed chunk, built while it is in cache. */
static int build_record(void *ctx, const dcr__pass_chunk *c, dcr_detail *d) {
  inplace *ip = ctx;
  dcr__jrecord *rec = &ip->records[c->slot];
  rec->count = 0;
  if (ip->as_target || c->job->record == DCR__NO_RECORD) return DCR_OK;
  const dcr__entry *e = &ip->p->r->man.entries[c->job->entry];
  int rc = dcr__jbuilder_elements(&ip->builders[c->slot], c->input, c->result, c->bytes,
                                  dcr_dtype_size(e->target.dtype), rec, &ip->payloads[c->slot], d);
  rec->offset += ip->offsets[c->job->entry] + c->at;
  return rc;
}

/* Calling thread, in file order: regions reach the journal sorted (§18.3). */
static int append_record(void *ctx, const dcr__pass_chunk *c, dcr_detail *d) {
  inplace *ip = ctx;
  const dcr__jrecord *rec = &ip->records[c->slot];
  if (!rec->count) return DCR_OK;
  ip->p->stats.chunks_patched++;
  int rc = dcr__journal_append(&ip->jw, rec, ip->payloads[c->slot], d);
  if (rc) dcr__detail_file(d, ip->journal);
  return rc;
}

/* In place needs the target where the file's tensors are: same prefix length and
 * size, every tensor at its offset; and, from the base, every tensor delta-coded. */
static int check_layout(const inplace *ip, dcr_detail *d) {
  const dcr__manifest *m = &ip->p->r->man;
  if (ip->ck.prefix_length != m->prefix_length || ip->ck.file_size != m->prefix_length + m->data_length)
    return dcr__fail(d, DCR_E_ARGUMENT, "cannot apply in place: the target's header or size "
                     "differs from this file's (%llu + %llu bytes; the target has %llu + %llu); "
                     "write a new file instead (dcr apply BASE BUNDLE -o OUT)",
                     (unsigned long long)ip->ck.prefix_length,
                     (unsigned long long)(ip->ck.file_size - ip->ck.prefix_length),
                     (unsigned long long)m->prefix_length, (unsigned long long)m->data_length);
  for (uint64_t i = 0; i < m->entry_count; i++) {
    const dcr__entry *e = &m->entries[i];
    const char *why = NULL;
    if (!ip->as_target)
      why = !(e->presence & DCR__HAS_TARGET) ? "is removed"
            : !(e->presence & DCR__HAS_BASE) ? "is added"
            : !dcr__entry_delta_coded(e)     ? "changes dtype or size"
                                             : NULL;
    if (!why && (e->presence & DCR__HAS_TARGET) &&
        ip->offsets[i] != m->prefix_length + e->target.offset)
      why = "moves";
    if (why)
      return dcr__detail_tensor(d, i, e->name, e->name_length),
             dcr__fail(d, DCR_E_ARGUMENT, "cannot apply in place: this tensor %s in the target; "
                       "write a new file instead (dcr apply BASE BUNDLE -o OUT)", why);
  }
  return DCR_OK;
}

static int make_builders(inplace *ip, size_t slots, dcr_detail *d) {
  size_t cs = dcr__max_chunk_bytes(&ip->p->r->man);
  ip->slots = slots;
  ip->builders = calloc(slots, sizeof *ip->builders);
  ip->records = calloc(slots, sizeof *ip->records);
  ip->payloads = calloc(slots, sizeof *ip->payloads);
  if (!ip->builders || !ip->records || !ip->payloads)
    return dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  for (size_t i = 0; i < slots; i++)
    if (dcr__jbuilder_init(&ip->builders[i], cs))
      return dcr__fail(d, DCR_E_NOMEM, "cannot allocate journal buffers");
  return DCR_OK;
}

static void free_builders(inplace *ip) {
  for (size_t i = 0; ip->builders && i < ip->slots; i++) dcr__jbuilder_free(&ip->builders[i]);
  free(ip->builders), free(ip->records), free(ip->payloads);
  ip->builders = NULL, ip->records = NULL, ip->payloads = NULL;
}

/* Step 6 of §18.4; and the end of a salvage that found nothing left to write,
 * whose pass proved the file the target (R-JNL-4). */
static int remove_journal(inplace *ip, dcr_detail *d) {
  if (unlink(ip->journal))
    return dcr__fail(d, DCR_E_IO, "cannot remove the journal %s: %s", ip->journal, strerror(errno));
  return ip->p->sync ? dcr__wio_sync_dir(ip->p->faults, ip->journal, d) : DCR_OK;
}

/* Step 3: commit, publish, replay, remove, each made durable before the next
 * (§18.4). Publishing renames the journal over an unusable one that a salvage
 * supersedes, so that there is a journal at its name at every moment. */
static int commit_and_replay(inplace *ip, dcr_detail *d) {
  dcr_patch *p = ip->p;
  dcr__journal j = {0};
  int rc = dcr__journal_commit(&ip->jw, d);
  /* From the rename on, a failure leaves the journal for the next run to finish:
   * the checkpoint may already be part written. Before it, the journal still has
   * its temporary name, and the file was not touched. */
  if (!rc) rc = dcr__journal_publish(&ip->jw, ip->journal, p->sync, d);
  if (rc) return dcr__detail_file(d, ip->journal), rc;
  p->stats.journal_bytes = ip->jw.length;
  /* Replayed from the journal's bytes, as a recovery would: the one path that
   * writes into a checkpoint is the one that crash tests exercise. */
  int jfd = open(ip->journal, O_RDONLY | O_CLOEXEC);
  if (jfd < 0) return dcr__fail(d, DCR_E_IO, "cannot reopen the journal: %s", strerror(errno));
  rc = dcr__journal_read(jfd, &j, d);
  if (!rc && !j.committed) rc = dcr__fail(d, DCR_E_IO, "the journal reads back uncommitted");
  if (!rc) rc = dcr__journal_replay(&j, jfd, ip->fd, p->threads, p->r->lim.max_memory, p->faults,
                                    0, &p->stats.bytes_written, d);
  if (rc) dcr__detail_file(d, rc == DCR_E_JOURNAL ? ip->journal : ip->path);
  if (!rc && p->sync && (rc = dcr__wio_sync(p->faults, ip->fd, d))) dcr__detail_file(d, ip->path);
  if (!rc) rc = remove_journal(ip, d);
  dcr__journal_free(&j);
  close(jfd);
  return rc;
}

/* NONE's one look at the file (dcr__probe). */
static int probe_file(inplace *ip, int *as_target, dcr_detail *d) {
  const dcr_reader *r = ip->p->r;
  const dcr__chunk *c = dcr__probe_chunk(r);
  if (!c) return DCR_OK;
  size_t n = dcr__chunk_bytes(&r->man, &r->man.entries[c->tensor], c->chunk);
  uint8_t *bytes = malloc(n + 1);
  int rc = bytes ? dcr__pread_full(ip->fd, bytes, n, ip->offsets[c->tensor] +
                                                         (uint64_t)c->chunk * r->man.chunk_size, d)
                 : dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  if (!rc) rc = dcr__probe(r, c, bytes, as_target, d);
  free(bytes);
  return rc;
}

/* What an attempt takes the file to be (§10.1, §10.2, and a salvage of §18.4). */
enum { AS_BASE, AS_TARGET, AS_MIXED };

/* One attempt at §10: the file taken as the base, as the target already, or as
 * a mix of the two chunk by chunk (R-JNL-5: checked in full, whatever the level). */
static int attempt(inplace *ip, int as, dcr_detail *d) {
  dcr_patch *p = ip->p;
  dcr_reader *r = p->r;
  const dcr__manifest *m = &r->man;
  int verify = as == AS_MIXED ? DCR_VERIFY_FULL : p->verify;
  ip->as_target = as == AS_TARGET;
  dcr__file input = {.ck = &ip->ck, .offsets = ip->offsets, .path = ip->path};
  dcr__pass_spec spec = {.r = r, .verify = verify, .changed_only = verify != DCR_VERIFY_FULL,
                         .as_target = ip->as_target, .mixed = as == AS_MIXED,
                         .threads = p->threads, .cancel = p->cancel,
                         .progress = p->progress, .progress_opaque = p->progress_opaque,
                         .input = dcr__file_input, .input_ctx = &input, .emit = build_record,
                         .take = append_record, .ctx = ip};
  dcr__pass *pass = NULL;
  int rc = dcr__match_checkpoint(m, &ip->ck, ip->as_target, ip->offsets, d);
  if (!rc) rc = check_layout(ip, d);
  /* NONE looks at one chunk, so that a bundle applied twice is not applied again:
   * if that chunk is the target's, the file is taken as the target, whose changed
   * chunks are then all checked (the rare case pays for being sure). */
  if (!rc && as == AS_BASE && verify == DCR_VERIFY_NONE &&
      !(rc = probe_file(ip, &spec.as_target, d)))
    ip->as_target = spec.as_target;
  if (!rc) rc = dcr__pass_init(&pass, &spec, d);
  if (!rc) rc = make_builders(ip, dcr__pass_slots(pass), d);
  if (!rc) rc = dcr__journal_create(&ip->jw, ip->journal, ip->ck.file_size, r->base_state,
                                    r->target_state, p->faults, d);
  /* A target whose header bytes differ (same length) gets them as a region of
   * bytes, so that the file ends as the target byte for byte (§10.2). */
  if (!rc && m->prefix_length && memcmp(ip->ck.prefix, m->prefix, (size_t)m->prefix_length)) {
    dcr__jrecord rec = {.length = m->prefix_length, .form = DCR__JREC_BYTES, .element_size = 1,
                        .stored_length = m->prefix_length,
                        .region_check = XXH3_64bits(m->prefix, (size_t)m->prefix_length)};
    rc = dcr__journal_append(&ip->jw, &rec, m->prefix, d);
  }
  if (!rc) rc = dcr__pass_run(pass, d);
  if (pass) p->stats.bytes_checked += dcr__pass_bytes(pass);
  dcr__pass_free(pass);
  free_builders(ip);
  if (!rc && ip->jw.records) rc = commit_and_replay(ip, d);
  else if (!rc && ip->superseded) rc = remove_journal(ip, d);
  else if (!rc) p->stats.already_target = ip->as_target;
  if (!rc && as == AS_MIXED && (ip->jw.records || ip->superseded))
    p->stats.salvaged = 1, p->stats.journal_discarded = ip->superseded;
  dcr__journal_abandon(&ip->jw);
  return rc;
}

/* The attempts of §10.1 (as the base, then as the target) and, for a salvage, the
 * mixed one; where the journal could not be replayed, the mixed one alone (the
 * file is known to be neither). */
static int attempts(inplace *ip, dcr_detail *d) {
  dcr_patch *p = ip->p;
  dcr_detail again;
  if (ip->superseded) return attempt(ip, AS_MIXED, d);
  int rc = attempt(ip, AS_BASE, d);
  /* Not the base: perhaps the target already (§10.2); if not that either, the
   * first answer stands. NONE checks nothing, so it cannot tell. */
  dcr__detail_init(&again);
  if (rc == DCR_E_BASE_MISMATCH && p->verify != DCR_VERIFY_NONE && !attempt(ip, AS_TARGET, &again))
    return dcr__detail_init(d), DCR_OK;
  if (rc == DCR_E_BASE_MISMATCH && p->salvage) {
    dcr__detail_init(&again);
    if (!attempt(ip, AS_MIXED, &again)) return dcr__detail_init(d), DCR_OK;
  }
  return rc;
}

int dcr_patch_file(dcr_patch *p, const char *path, dcr_detail *d) {
  dcr_detail scratch;
  if (!d) d = &scratch;
  dcr__detail_init(d);
  memset(&p->stats, 0, sizeof p->stats);
  dcr_reader *r = p->r;
  inplace ip = {.p = p, .path = path, .fd = -1, .jw = {.fd = -1}};
  if (dcr__need_whole(r, d)) return DCR_E_ARGUMENT;
  /* §18.6: a set's members, through one journal of member records */
  if (r->man.kind == DCR_KIND_SET) {
    int rc = dcr__patch_dir(p, path, d);
    if (rc && !d->file[0]) dcr__detail_file(d, rc == DCR_E_BASE_MISMATCH ? path : r->path);
    return rc;
  }
  /* This bundle's two states prove a file whole too (R-JNL-4): a damaged journal
   * beside this bundle's base or target costs nothing. */
  uint8_t known[32];
  memcpy(known, r->base_state, 16);
  memcpy(known + 16, r->target_state, 16);
  dcr__recovery how = {.sync = p->sync, .threads = p->threads, .faults = p->faults,
                       .known = known, .known_count = 2, .lim = &r->lim, .cancel = p->cancel};
  int outcome = DCR_JOURNAL_NONE, rc = dcr__journal_path(path, ip.journal, sizeof ip.journal, d);
  if (!rc) rc = dcr__open_checkpoint(path, &ip.fd, d);
  /* A finished journal leaves the file at its target; the attempts below then find
   * it the target of this bundle (NONE by its probe), or the base of the next. */
  if (!rc) rc = dcr__journal_recover(path, ip.fd, &how, &outcome, d);
  if (rc == DCR_E_JOURNAL && outcome >= DCR__JOURNAL_UNUSABLE && p->salvage)
    ip.superseded = 1, rc = DCR_OK, dcr__detail_init(d);
  p->stats.recovered = outcome == DCR_JOURNAL_REPLAYED;
  p->stats.journal_discarded = outcome == DCR_JOURNAL_DISCARDED;
  if (!rc) rc = dcr__checkpoint_read(ip.fd, r->man.kind, &r->lim, r->minor, &ip.ck, d);
  if (!rc && !(ip.offsets = calloc((size_t)r->man.entry_count + 1, sizeof *ip.offsets)))
    rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate");
  if (!rc) rc = attempts(&ip, d);
  if (rc && !d->file[0]) dcr__detail_file(d, rc == DCR_E_BASE_MISMATCH || rc == DCR_E_ARGUMENT ||
                                                    rc == DCR_E_IO ? path : r->path);
  free(ip.offsets);
  dcr__checkpoint_free(&ip.ck);
  if (ip.fd >= 0) close(ip.fd);
  return rc;
}
