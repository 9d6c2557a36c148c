/*
 * cmd_apply.c - dcr apply BASE BUNDLE... -o OUT, and dcr apply --in-place CKPT
 * BUNDLE...: one bundle or a chain of them (a series), copied to a new file or
 * patched into the checkpoint where it lies.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../refit/refit.h"
#include "cli.h"

static const char usage[] =
    "Usage: dcr apply BASE BUNDLE... -o OUT [OPTIONS]\n"
    "       dcr apply --in-place CKPT BUNDLE... [OPTIONS]\n"
    "Rebuild the target checkpoint from BASE and BUNDLE, byte for byte. OUT appears\n"
    "only once every hash has matched; on any failure nothing is left at OUT.\n"
    "Several bundles are a series, applied in one run without intermediate files:\n"
    "each must apply to the state the previous one makes (checked before anything is\n"
    "written). A checkpoint that already is a bundle's target is left as it is.\n"
    "BUNDLE may be - (standard input, one bundle) or a FIFO; it is then held in\n"
    "memory. BASE and CKPT must be regular files (read at random offsets). OUT may be\n"
    "- (standard output), a FIFO or a device: the target streams into it as it is\n"
    "checked, so its reader must go by the exit status. An OUT that is an input is\n"
    "refused, even with -f.\n"
    "A bundle of two model directories (a checkpoint set) applies to the base\n"
    "directory (or its model.safetensors.index.json) and writes OUT as a directory,\n"
    "which appears at once, whole; with -f it replaces an older one at once too.\n\n"
    "  -o, --output OUT     where to write the target\n"
    "  -i, --in-place       patch CKPT where it lies, writing only changed chunks,\n"
    "                       through a crash-safe journal (CKPT.dcr-journal); a run\n"
    "                       that finds a journal left by a crash finishes it first.\n"
    "                       Needs the target's layout to be the base's\n"
    "      --salvage        in place: finish a checkpoint that a crash left part\n"
    "                       written and whose journal is damaged, from the bundle that\n"
    "                       was being applied: each changed chunk must still be its\n"
    "                       base's or already its target's; checked in full before a\n"
    "                       byte is written (SPEC.md 18.4)\n"
    "      --verify LEVEL   in-place and series steps: full (default: every tensor\n"
    "                       hash, reads the whole checkpoint), chunk (checksums of\n"
    "                       the changed chunks only), none (trusted: one chunk is\n"
    "                       looked at, to recognize a bundle applied twice)\n"
    "      --threads N      worker threads (default: usable CPUs, up to 32)\n"
    "      --no-sync        no fsync: survives a killed process, not a power loss\n"
    "      --max-size SIZE  refuse a target larger than SIZE (K/M/G/T) before writing:\n"
    "                       a tiny bundle can declare terabytes of zeros\n"
    "  -f, --force          replace OUT if it exists\n"
    "      --require-signature KEY\n"
    "                       refuse a bundle not signed by the public key KEY\n"
    "                       (repeatable: any one of them), checked before anything\n"
    "                       is decoded or written (dcr verify; SPEC.md 20)\n"
    "      --json           print what was done as one JSON document on stdout\n"
    "      --tensors PATTERN  apply only the tensors whose names match (fnmatch,\n"
    "                       repeatable), e.g. a tensor-parallel worker's slice: BASE\n"
    "                       must hold them, OUT gets exactly them (safetensors); only\n"
    "                       their chunks are read (fetched, from a URL). --verify full\n"
    "                       checks each one's base and target hash (not the state ids)\n"
    CLI_HTTP_HELP;

typedef struct {
  const char *path; /* as shown: a URL without its query */
  dcr_reader *r;
  void *mem;
  char shown[256];
} bundle;

typedef struct {
  bundle *b;
  int n, verify, sync, quiet, json, salvage;
  uint64_t max_size; /* of the target; 0: no cap */
  unsigned threads;
  cli_progress_state progress;
  cli_common common;
} job;

static int parse_verify(const char *s, int *level) {
  static const char *names[] = {"full", "chunk", "none"};
  for (int i = 0; i < 3; i++)
    if (!strcmp(s, names[i])) return *level = i, 0; /* DCR_VERIFY_* are 0, 1, 2 */
  return -1;
}

/* A stream (standard output, a FIFO, a character device) gets the target only
 * after it has been checked, so it goes to a temporary file first. */
static int copy_to_stream(const char *path, const char *out, int force) {
  cli_output o;
  int rc = cli_output_open(&o, out, force, NULL, 0);
  if (rc) return rc;
  FILE *f = fopen(path, "rb");
  char buf[1 << 16];
  size_t n;
  int ok = f != NULL;
  while (ok && !cli_interrupted && (n = fread(buf, 1, sizeof buf, f)) > 0) ok = !cli_output_write(&o, buf, n);
  ok = ok && !ferror(f);
  if (f) fclose(f);
  if (!ok && !cli_interrupted)
    fprintf(stderr, "dcr: %s: DCR_E_IO: cannot write: %s\n", strcmp(out, "-") ? out : "(stdout)",
            strerror(errno));
  if (!ok) return cli_output_abort(&o), cli_interrupted ? CLI_INTERRUPTED : CLI_IO;
  return cli_output_commit(&o);
}

/* A bundle that is not a bundle while the "base" is one: the arguments are
 * swapped, the commonest slip. */
static void swapped_hint(const char *base, const char *not_bundle) {
  struct stat st;
  dcr_reader *r = NULL;
  if (stat(base, &st) || !S_ISREG(st.st_mode) || dcr_reader_open_file(&r, base, &cli_limits, NULL)) return;
  dcr_reader_free(r);
  fprintf(stderr, "  hint: %s is a bundle and %s is not; the base comes first:\n"
          "        dcr apply %s %s -o OUT\n", base, not_bundle, not_bundle, base);
}

/* Every bundle must apply to the state the one before it makes: checked before
 * any byte is written, with both state ids in the message. */
static int check_chain(const job *j) {
  for (int i = 1; i < j->n; i++) {
    dcr_bundle_info prev, cur;
    dcr_reader_info(j->b[i - 1].r, &prev);
    dcr_reader_info(j->b[i].r, &cur);
    if (!memcmp(prev.target_state, cur.base_state, 16)) continue;
    char want[33], got[33];
    cli_hex(prev.target_state, 16, want);
    cli_hex(cur.base_state, 16, got);
    fprintf(stderr, "dcr: %s: DCR_E_BASE_MISMATCH: the series is out of order: this bundle "
            "applies to state %s, but %s makes state %s\n", j->b[i].path, got, j->b[i - 1].path, want);
    cli_print_meta(j->b[i].r, "its metadata");
    return CLI_INVALID;
  }
  return CLI_OK;
}

/* The --json document of a successful apply. */
static void print_done(const job *j, const char *path, const char *mode, int applied,
                       const dcr_patch_stats *st) {
  dcr_bundle_info info;
  char state[33];
  dcr_reader_info(j->b[j->n - 1].r, &info);
  cli_hex(info.target_state, 16, state);
  static const char *const levels[3] = {"full", "chunk", "none"};
  json_t *doc = json_pack("{s:s, s:s, s:i, s:i, s:I, s:s, s:s}", "output", path, "mode", mode,
                          "bundles", j->n, "bundles_applied", applied, "target_bytes",
                          (json_int_t)info.target_size, "target_state", state, "verify",
                          !strcmp(mode, "copy") && j->n == 1 ? "full" : levels[j->verify]);
  if (st)
    json_object_update_new(doc, json_pack("{s:b, s:b, s:b, s:b, s:I, s:I, s:I}", "recovered",
                                          st->recovered, "journal_discarded",
                                          st->journal_discarded, "salvaged", st->salvaged,
                                          "already_target", st->already_target, "chunks_patched",
                                          (json_int_t)st->chunks_patched, "bytes_written",
                                          (json_int_t)st->bytes_written, "journal_bytes",
                                          (json_int_t)st->journal_bytes));
  cli_print_json(doc);
}

/* A journal kept because it cannot be replayed and the checkpoint is not whole
 * (SPEC.md §18.4, R-JNL-4): the two ways out. A journal that is not one this
 * reader may judge (not a journal, a newer version) has the offset of what is
 * wrong in it, and no way out but a person's. */
static void journal_hint(const job *j, const char *ckpt, const dcr_detail *d) {
  if (d->offset != DCR_NONE) {
    fprintf(stderr, "  %s.dcr-journal is not a journal this version of dcr can finish; it is "
            "left as it is\n", ckpt);
    return;
  }
  fprintf(stderr, "  Nothing was changed, and the journal is kept. To finish %s:\n"
          "   - with the bundle that was being applied, if the crash tore no chunk:\n"
          "       dcr apply --in-place --salvage %s %s\n"
          "     (each changed chunk must still be its base's or already its target's; the\n"
          "     result is checked in full before a byte is written)\n"
          "   - or put a copy of its base or its target in its place and run again: a whole\n"
          "     checkpoint lets the journal go\n", ckpt, ckpt, j->b[0].path);
}

static int report(const job *j, const char *input, int i, int err, const dcr_detail *d) {
  cli_report(j->b[i].path, err, d);
  if (err == DCR_E_BASE_MISMATCH) cli_explain_mismatch(j->b[i].r, input, err);
  if (err == DCR_E_JOURNAL) journal_hint(j, input, d);
  if (err == DCR_E_BASE_MISMATCH && j->salvage)
    fprintf(stderr, "  (--salvage: a chunk of %s is neither the bundle's base nor its target: "
            "torn by the crash, or another file; put a copy of its base or target in its place)\n",
            input);
  return cli_exit_code(err);
}

static int patch_one(job *j, int i, const char *path, dcr_patch_stats *st) {
  dcr_patch *p;
  dcr_detail d;
  int err = dcr_patch_create(&p, j->b[i].r, &d);
  if (!err) {
    dcr_patch_set_verify(p, j->verify);
    dcr_patch_set_threads(p, j->threads);
    dcr_patch_set_sync(p, j->sync);
    dcr_patch_set_salvage(p, j->salvage);
    dcr_patch_set_cancel(p, &cli_interrupted);
    if (j->common.progress) dcr_patch_set_progress(p, cli_progress, &j->progress);
    err = dcr_patch_file(p, path, &d);
    cli_progress_end(&j->progress);
    dcr_patch_stats_get(p, st, sizeof *st);
    dcr_patch_free(p);
  }
  return err ? report(j, path, i, err, &d) : CLI_OK;
}

static void add_stats(dcr_patch_stats *total, const dcr_patch_stats *st) {
  total->recovered |= st->recovered;
  total->journal_discarded |= st->journal_discarded;
  total->salvaged |= st->salvaged;
  total->already_target += st->already_target;
  total->chunks_patched += st->chunks_patched;
  total->bytes_written += st->bytes_written;
  if (st->journal_bytes > total->journal_bytes) total->journal_bytes = st->journal_bytes;
}

/* --salvage on a series whose file is no state of it: part written by one of its
 * bundles, found by trying each (a bundle it is not fails its checks, changing
 * nothing). Returns the bundle after the one that finished it, or -1. */
static int salvage_series(job *j, const char *path, dcr_patch_stats *total) {
  for (int i = 0; i < j->n; i++) {
    dcr_patch *p;
    dcr_patch_stats st;
    dcr_detail d;
    if (dcr_patch_create(&p, j->b[i].r, &d)) return -1;
    dcr_patch_set_threads(p, j->threads);
    dcr_patch_set_sync(p, j->sync);
    dcr_patch_set_salvage(p, 1);
    dcr_patch_set_cancel(p, &cli_interrupted);
    int err = dcr_patch_file(p, path, &d);
    dcr_patch_stats_get(p, &st, sizeof st);
    dcr_patch_free(p);
    if (!err) return add_stats(total, &st), i + 1;
    if (err != DCR_E_BASE_MISMATCH) return report(j, path, i, err, &d), -1;
  }
  return -1;
}

/* Where a series resumes: the bundle whose base is the checkpoint's state, after a
 * run that stopped part way (or j->n when it is at the last target). */
static int find_start(job *j, const char *path, int *start, dcr_patch_stats *total) {
  dcr_bundle_info first;
  dcr_reader_info(j->b[0].r, &first);
  dcr_checkpoint *ck;
  dcr_detail d;
  uint8_t state[16];
  int err = dcr_checkpoint_open(&ck, path, first.kind, &cli_limits, &d);
  if (!err) err = dcr_checkpoint_state_id(ck, j->threads, state, &d);
  dcr_checkpoint_free(ck);
  if (err) return cli_report(path, err, &d), cli_exit_code(err);
  for (int i = 0; i < j->n; i++) {
    dcr_bundle_info info;
    dcr_reader_info(j->b[i].r, &info);
    if (!memcmp(info.base_state, state, 16)) return *start = i, CLI_OK;
    if (i == j->n - 1 && !memcmp(info.target_state, state, 16)) return *start = j->n, CLI_OK;
  }
  if (j->salvage && (*start = salvage_series(j, path, total)) >= 0) return CLI_OK;
  char has[33], want[33];
  cli_hex(state, 16, has);
  cli_hex(first.base_state, 16, want);
  fprintf(stderr, "dcr: %s: DCR_E_BASE_MISMATCH: its state %s is not the base of any bundle of "
          "the series (the first applies to %s)%s\n", path, has, want,
          j->salvage ? ", and no bundle of it salvages it" : "");
  return CLI_INVALID;
}

/* Recovers CKPT's journal before a series looks for where it stands: every state
 * of the series proves the file whole (R-JNL-4). */
static int recover_series(job *j, const char *ckpt, dcr_patch_stats *total) {
  uint8_t(*states)[16] = calloc(2 * (size_t)j->n, 16);
  if (!states) return fprintf(stderr, "dcr: DCR_E_NOMEM: out of memory\n"), CLI_IO;
  for (int i = 0; i < j->n; i++) {
    dcr_bundle_info info;
    dcr_reader_info(j->b[i].r, &info);
    memcpy(states[2 * i], info.base_state, 16);
    memcpy(states[2 * i + 1], info.target_state, 16);
  }
  dcr_detail d;
  int outcome, err = dcr_journal_recover_known(ckpt, j->sync, states[0], 2 * (size_t)j->n,
                                               &outcome, &d);
  free(states);
  total->recovered = outcome == DCR_JOURNAL_REPLAYED;
  total->journal_discarded = outcome == DCR_JOURNAL_DISCARDED;
  /* --salvage supersedes a journal that cannot be replayed: the bundle it was for
   * is found by the patches below, each of which tries it */
  if (err == DCR_E_JOURNAL && j->salvage) return CLI_OK;
  if (err) return cli_report(ckpt, err, &d), err == DCR_E_JOURNAL ? journal_hint(j, ckpt, &d) : (void)0,
                  cli_exit_code(err);
  return CLI_OK;
}

static int run_in_place(job *j, const char *ckpt) {
  int start = 0, rc = CLI_OK;
  dcr_patch_stats st = {0}, total = {0};
  /* A series finishes a journal of whichever bundle was interrupted before it
   * looks for where it stands. */
  if (j->n > 1 && ((rc = recover_series(j, ckpt, &total)) || (rc = find_start(j, ckpt, &start, &total))))
    return rc;
  for (int i = start; i < j->n && !rc; i++) {
    rc = patch_one(j, i, ckpt, &st);
    add_stats(&total, &st);
  }
  if (!rc && j->json) {
    total.already_target = start == j->n || (j->n - start == 1 && total.already_target);
    print_done(j, ckpt, "in-place", j->n - start, &total);
  }
  if (rc || j->json) return rc;
  char a[32], b[32];
  /* Said even with --quiet: a journal went, and an operator must be able to know. */
  if (total.journal_discarded)
    fprintf(stderr, "%s: removed a journal that could not be replayed (damaged or cut short): %s\n",
            ckpt, total.salvaged ? "the salvage's own journal took its place"
                                 : "the checkpoint was a whole state, the base or target of a bundle");
  if (j->quiet) return rc;
  if (total.recovered)
    fprintf(stderr, "%s: finished an apply that had been interrupted (from its journal)\n", ckpt);
  if (total.salvaged)
    fprintf(stderr, "%s: salvaged: the chunks a crash left at their base were applied, and the "
            "result checked in full\n", ckpt);
  if (start == j->n || (j->n - start == 1 && total.already_target)) {
    if (!total.recovered && !total.salvaged)
      fprintf(stderr, "%s: already at the target; nothing to do\n", ckpt);
  }
  else
    fprintf(stderr, "%s: patched in place (%d bundle%s, %llu chunks, %s written, journal %s), "
            "target state %s\n", ckpt, j->n - start, j->n - start == 1 ? "" : "s",
            (unsigned long long)total.chunks_patched, cli_bytes(total.bytes_written, a),
            cli_bytes(total.journal_bytes, b),
            j->verify == 0 || total.salvaged ? "verified" : j->verify == 1 ? "checked chunk by chunk" : "not checked");
  return rc;
}

static void print_summary(const job *j, const char *out) {
  if (j->quiet || j->json || !strcmp(out, "-")) return;
  dcr_bundle_info info;
  char a[32];
  dcr_reader_info(j->b[j->n - 1].r, &info);
  fprintf(stderr, "%s: %s, target state verified\n", out, cli_bytes(info.target_size, a));
}

/* A series copied: bundle 0 from BASE into a work file (refit/series.c), each
 * next one patched into it, or copied where it changes the layout. The work file
 * is beside OUT, or in TMPDIR for a stream. */
static int run_series(job *j, const char *base, const char *out, int force, int stream,
                      const dcr_apply_options *opt) {
  const char *tmpdir = getenv("TMPDIR");
  char beside[4200];
  snprintf(beside, sizeof beside, "%s%s", stream ? (tmpdir && *tmpdir ? tmpdir : "/tmp") : out,
           stream ? "/dcr-series" : "");
  unsigned flags = (stream || force ? DCR__ATOMIC_REPLACE : 0) | (j->sync && !stream ? DCR__ATOMIC_SYNC : 0);
  dcr__work w;
  dcr_detail d;
  int err = dcr__work_open(&w, beside, flags, &d);
  if (err) return cli_report(out, err, &d), cli_exit_code(err);
  int rc = CLI_OK;
  if ((err = dcr_apply_to(j->b[0].r, base, opt, dcr__write_fd, &w.a.fd, &d))) rc = report(j, base, 0, err, &d);
  cli_progress_end(&j->progress);
  for (int i = 1; i < j->n && !rc; i++) {
    const char *input = i == 1 ? base : w.path;
    if ((err = dcr__work_apply(&w, j->b[i].r, j->verify, opt, &d))) rc = report(j, input, i, err, &d);
  }
  if (!rc && stream) rc = copy_to_stream(w.path, out, force);
  if (!rc && !stream && cli_interrupted) rc = CLI_INTERRUPTED;
  if (!rc && !stream && (err = dcr__atomic_commit(&w.a, &d))) rc = (cli_report(out, err, &d), cli_exit_code(err));
  dcr__atomic_abort(&w.a);
  return rc;
}

/* A copy apply: one bundle through the library's atomic output (or streamed), a
 * series through a work file. */
/* A series of sets: each step into a hidden directory beside OUT, the last into
 * OUT; each step's input is removed once the next has been written. */
static int run_set_series(job *j, const char *base, const char *out,
                          const dcr_apply_options *opt) {
  char step[2][4200];
  const char *slash = strrchr(out, '/');
  int rc = CLI_OK;
  for (int i = 0; i < j->n && !rc; i++) {
    const char *input = i ? step[(i - 1) % 2] : base;
    dcr_apply_options o = *opt;
    const char *target = out;
    if (i < j->n - 1) {
      snprintf(step[i % 2], sizeof step[i % 2], "%.*s.%s.dcr-series-%d",
               slash ? (int)(slash - out + 1) : 0, out, slash ? slash + 1 : out, i % 2);
      cli_remove_tree(step[i % 2]); /* left by a run that was killed */
      target = step[i % 2];
      o.sync = 0, o.no_replace = 1; /* nothing is visible until the last step */
    }
    dcr_detail d;
    int err = dcr_apply(j->b[i].r, input, target, &o, &d);
    cli_progress_end(&j->progress);
    if (err) rc = report(j, input, i, err, &d);
    if (i) cli_remove_tree(input);
  }
  return rc;
}

static int run_copy(job *j, const char *base, const char *out, int force) {
  struct stat st;
  int stream = !strcmp(out, "-") || (!stat(out, &st) && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)));
  dcr_apply_options opt;
  dcr_apply_options_default(&opt);
  opt.threads = j->threads;
  opt.sync = j->sync;
  opt.no_replace = !force; /* a file that appeared at OUT meanwhile is kept */
  opt.max_target_size = j->max_size;
  opt.cancel = &cli_interrupted;
  if (j->common.progress) opt.progress = cli_progress, opt.progress_opaque = &j->progress;
  dcr_detail d;
  int err, rc = CLI_OK;
  dcr_bundle_info first;
  dcr_reader_info(j->b[0].r, &first);
  if (first.kind == DCR_KIND_SET && stream)
    return cli_usage("apply", "a checkpoint set is a directory: -o names one, not a stream");
  if (first.kind == DCR_KIND_SET && j->n > 1) {
    rc = run_set_series(j, base, out, &opt);
  } else if (j->n > 1) {
    rc = run_series(j, base, out, force, stream, &opt);
  } else if (!stream) {
    err = dcr_apply(j->b[0].r, base, out, &opt, &d);
    cli_progress_end(&j->progress);
    if (err) rc = report(j, base, 0, err, &d);
  } else {
    cli_output o;
    if (!(rc = cli_output_open(&o, out, force, NULL, 0))) {
      err = dcr_apply_to(j->b[0].r, base, &opt, cli_output_write, &o, &d);
      cli_progress_end(&j->progress);
      if (err == DCR_E_IO && o.error) /* the output's fault, not the bundle's */
        fprintf(stderr, "dcr: %s: DCR_E_IO: cannot write: %s\n", strcmp(out, "-") ? out : "(stdout)",
                strerror(o.error)), rc = CLI_IO;
      else if (err) rc = report(j, base, 0, err, &d);
      if (err) cli_output_abort(&o);
      else rc = cli_output_commit(&o);
    }
  }
  if (!rc && j->json) print_done(j, out, "copy", j->n, NULL);
  if (!rc) print_summary(j, out);
  return rc;
}

int cmd_apply(int argc, char **argv) {
  enum { OPT_VERIFY = 2000, OPT_SALVAGE };
  static const struct option longs[] = {CLI_COMMON_LONG_OPTIONS,
                                        {"output", required_argument, NULL, 'o'},
                                        {"force", no_argument, NULL, 'f'},
                                        {"in-place", no_argument, NULL, 'i'},
                                        {"verify", required_argument, NULL, OPT_VERIFY},
                                        {"salvage", no_argument, NULL, OPT_SALVAGE},
                                        {"threads", required_argument, NULL, OPT_THREADS},
                                        {"no-sync", no_argument, NULL, OPT_NO_SYNC},
                                        {"json", no_argument, NULL, OPT_JSON},
                                        {"max-size", required_argument, NULL, OPT_SIZE},
                                        {"require-signature", required_argument, NULL, OPT_REQUIRE_SIGNATURE},
                                        {"tensors", required_argument, NULL, OPT_TENSORS},
                                        CLI_HTTP_LONG_OPTIONS,
                                        {NULL, 0, NULL, 0}};
  job j = {.verify = 0, .sync = 1, .progress = {.what = "applying"}};
  dcr_keyring *ring = NULL; /* --require-signature: the trusted keys */
  cli_common_init(&j.common, "apply");
  const char *out = NULL;
  int force = 0, in_place = 0, c, stop = 0, rc;
  const char **patterns = NULL; /* --tensors */
  size_t n_patterns = 0;
  uint64_t v;
  while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT "o:fi", longs, NULL)) != -1) {
    if (cli_common_option(&j.common, c, usage, &stop)) {
      if (stop) return dcr_keyring_free(ring), free(patterns), CLI_OK;
      continue;
    }
    if (cli_http_option("apply", c)) continue;
    switch (c) {
      case OPT_TENSORS:
        if (!(patterns = realloc(patterns, (n_patterns + 1) * sizeof *patterns)))
          return fprintf(stderr, "dcr: DCR_E_NOMEM: out of memory\n"), CLI_IO;
        patterns[n_patterns++] = optarg;
        break;
      case OPT_REQUIRE_SIGNATURE:
        if ((rc = cli_trust_key(&ring, "apply", optarg))) return dcr_keyring_free(ring), rc;
        break;
      case 'o': out = optarg; break;
      case 'f': force = 1; break;
      case 'i': in_place = 1; break;
      case OPT_VERIFY:
        if (parse_verify(optarg, &j.verify))
          return cli_usage("apply", "bad --verify '%s' (full, chunk or none)", optarg);
        break;
      case OPT_THREADS:
        if (cli_parse_uint(optarg, 1024, &v)) return cli_usage("apply", "bad --threads '%s'", optarg);
        j.threads = (unsigned)v;
        break;
      case OPT_NO_SYNC: j.sync = 0; break;
      case OPT_SALVAGE: j.salvage = 1; break;
      case OPT_JSON: j.json = 1; break;
      case OPT_SIZE:
        if (cli_parse_size(optarg, &j.max_size) || !j.max_size)
          return cli_usage("apply", "bad --max-size '%s'", optarg);
        break;
      default: return cli_bad_option("apply", c, argv);
    }
  }
  j.quiet = j.common.quiet;
  if (cli_arg_count("apply", argc, argv, 2, -1, in_place ? "CKPT and BUNDLE..." : "BASE and BUNDLE..."))
    return CLI_USAGE;
  if (in_place && out) return cli_usage("apply", "--in-place writes CKPT itself; drop -o");
  if (j.salvage && !in_place) return cli_usage("apply", "--salvage finishes a file in place: add --in-place");
  if (n_patterns && (in_place || argc - optind != 2))
    return cli_usage("apply", "--tensors takes one BASE and one BUNDLE, and writes -o OUT");
  if (j.json && out && !strcmp(out, "-"))
    return cli_usage("apply", "--json prints on standard output: -o - cannot go there too");
  if (!in_place && !out) return cli_usage("apply", "missing -o OUT (or --in-place)");
  char dir[4096];
  const char *base = cli_checkpoint_path(argv[optind], dir, sizeof dir);
  j.n = argc - optind - 1;
  for (int i = 0; i < j.n; i++)
    if (!strcmp(argv[optind + 1 + i], "-") && j.n > 1)
      return cli_usage("apply", "a series reads its bundles from files, not -");
  if (in_place && !strcmp(base, "-")) return cli_usage("apply", "--in-place needs a file");
  const char **inputs = calloc((size_t)j.n + 1, sizeof *inputs);
  if (!inputs) return fprintf(stderr, "dcr: DCR_E_NOMEM: out of memory\n"), CLI_IO;
  for (int i = 0; i <= j.n; i++) inputs[i] = argv[optind + i];
  inputs[0] = base;
  struct stat so, sb;
  int set = !stat(base, &sb) && S_ISDIR(sb.st_mode);
  rc = out ? set ? cli_check_output_dir(out, force, base) : cli_check_output(out, force, inputs, (size_t)j.n + 1)
               : CLI_OK;
  free(inputs);
  if (rc == CLI_USAGE && !set && !stat(out, &so) && !stat(base, &sb) && so.st_dev == sb.st_dev &&
      so.st_ino == sb.st_ino)
    fprintf(stderr, "  (to patch %s where it lies: dcr apply --in-place %s BUNDLE...)\n", base, base);
  if (rc) return rc;
  if (!rc) rc = cli_check_checkpoint(base);
  if (rc) return rc;
  j.b = calloc((size_t)j.n, sizeof *j.b);
  if (!j.b) return fprintf(stderr, "dcr: DCR_E_NOMEM: out of memory\n"), CLI_IO;
  for (int i = 0; i < j.n && !rc; i++) {
    dcr_detail d;
    const char *path = argv[optind + 1 + i];
    j.b[i].path = cli_shown(path, j.b[i].shown, sizeof j.b[i].shown);
    /* --tensors reads only the chunks it uses, from a file too (SPEC.md §21) */
    int err = n_patterns && !cli_is_url(path) && strcmp(path, "-")
                  ? dcr_reader_open_file_ranged(&j.b[i].r, path, &cli_limits, &d)
                  : cli_open_bundle(path, &j.b[i].r, &j.b[i].mem, &d);
    /* each bundle of a series is checked before any is applied */
    if (!err) err = cli_check_signature(j.b[i].r, ring, &d);
    if (err) cli_report(j.b[i].path, err, &d), rc = cli_exit_code(err);
    if (err == DCR_E_MAGIC) swapped_hint(base, j.b[i].path);
  }
  if (!rc) rc = check_chain(&j);
  for (int i = 0; !rc && j.common.verbose && i < j.n; i++) {
    dcr_bundle_info info;
    char from[33], to[33];
    dcr_reader_info(j.b[i].r, &info);
    cli_hex(info.base_state, 16, from);
    cli_hex(info.target_state, 16, to);
    fprintf(stderr, "%s: state %s -> %s, %llu changed chunks\n", j.b[i].path, from, to,
            (unsigned long long)info.chunk_count);
    cli_print_meta(j.b[i].r, "metadata");
  }
  if (!rc && j.common.verbose)
    fprintf(stderr, "threads: %u\n", j.threads ? j.threads : dcr_default_threads());
  if (!rc && n_patterns) {
    rc = cli_apply_tensors(j.b[0].r, j.b[0].path, base, out, force, patterns, n_patterns, j.verify, j.threads,
                           j.quiet);
  } else if (!rc && in_place) {
    rc = run_in_place(&j, base);
  } else if (!rc) {
    rc = run_copy(&j, base, out, force);
  }
  for (int i = 0; j.common.verbose && i < j.n && j.b[i].r; i++) cli_print_fetch(j.b[i].r);
  for (int i = 0; i < j.n; i++) dcr_reader_free(j.b[i].r), free(j.b[i].mem);
  free(j.b);
  free(patterns);
  dcr_keyring_free(ring);
  return rc;
}
