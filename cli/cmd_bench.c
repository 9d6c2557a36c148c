/*
 * cmd_bench.c - dcr bench [BASE TARGET]: bundle size and encode/apply/validate
 * speed per thread count, in the spirit of `zstd -b`. Without files it benchmarks
 * a generated BF16 pair (cli/synth.c). Comparisons with other tools are
 * bench/run.sh's job; this measures dcr alone, in one process. Two model
 * directories are a checkpoint set, measured against one bundle per member file.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "synth.h"

static const char usage[] =
    "Usage: dcr bench [BASE TARGET] [OPTIONS]\n"
    "Measure bundle size and encode, apply and validate speed for each thread count.\n"
    "Without files, a sample BF16 pair is generated in a temporary directory.\n"
    "BASE and TARGET may be model directories (a checkpoint set): the set is then\n"
    "compared with one bundle per member file (what a script per shard makes).\n"
    "Encode and apply speeds are GB/s of target bytes; open (structure and every\n"
    "checksum) and verify (open, then decode every chunk) are GB/s of bundle bytes.\n"
    "Each figure is the median of --runs.\n\n"
    "      --size N         generated pair size (K/M/G suffixes; default 256M)\n"
    "      --rate R         generated pair change rate (default 0.01)\n"
    "      --threads LIST   comma-separated thread counts (default: 1 and the default count)\n"
    "      --runs N         runs per figure (default 3)\n"
    "      --chunk-size N   as for encode (default 4M)\n"
    "      --level N        as for encode (default 3)\n"
    "      --format V       as for encode: 1.1 measures bundles without DELTA_BANDED\n"
    "      --json           print the results as one JSON document on stdout\n";

typedef struct {
  uint8_t *data;
  size_t size, capacity;
} membuf;

static int mem_write(void *opaque, const void *p, size_t n) {
  membuf *m = opaque;
  if (m->size + n > m->capacity) {
    size_t cap = m->capacity ? m->capacity : 1 << 20;
    while (cap < m->size + n) cap *= 2;
    uint8_t *q = realloc(m->data, cap);
    if (!q) return -1;
    m->data = q;
    m->capacity = cap;
  }
  memcpy(m->data + m->size, p, n);
  m->size += n;
  return 0;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, by_value);
  return v[(n - 1) / 2];
}

/* Runs encode, validate and apply `runs` times with `threads`; prints one line. */
static int bench_threads(const char *base, const char *target, const char *out,
                         const dcr_encode_options *eo, unsigned threads, int runs, json_t *rows) {
  double te[16], to[16], tv[16], ta[16];
  membuf m = {0};
  dcr_encode_stats st;
  dcr_detail d;
  dcr_encode_options o = *eo;
  o.threads = threads;
  dcr_apply_options ao;
  dcr_apply_options_default(&ao);
  ao.threads = threads;
  ao.sync = 0;
  ao.cancel = &cli_interrupted;
  for (int r = 0; r < runs; r++) {
    m.size = 0;
    double t0 = now();
    int rc = dcr_encode(base, target, &o, mem_write, &m, &st, &d);
    te[r] = now() - t0;
    dcr_reader *reader = NULL;
    if (!rc) {
      t0 = now();
      rc = dcr_reader_open_memory(&reader, m.data, m.size, &cli_limits, &d);
      to[r] = now() - t0;
    }
    if (!rc) {
      dcr_reader_set_threads(reader, threads);
      dcr_reader_set_cancel(reader, &cli_interrupted);
      t0 = now();
      rc = dcr_reader_verify(reader, &d);
      tv[r] = to[r] + now() - t0;
    }
    if (!rc) {
      cli_remove_tree(out); /* not timed: dropping the last run's output */
      t0 = now();
      rc = dcr_apply(reader, base, out, &ao, &d);
      ta[r] = now() - t0;
    }
    dcr_reader_free(reader);
    if (rc) {
      cli_report(NULL, rc, &d);
      free(m.data);
      return cli_exit_code(rc);
    }
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double gb = (double)st.target_size / 1e9;
  double e = median(te, runs), op = median(to, runs), v = median(tv, runs), a = median(ta, runs);
  double bundle_gb = (double)m.size / 1e9;
  double share = 100.0 * (double)st.bundle_size / (double)st.target_size;
  double per = st.changed_elements ? (double)st.bundle_size / (double)st.changed_elements : 0.0;
  if (rows)
    json_array_append_new(rows, json_pack("{s:i, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f}",
                                          "threads", (int)threads, "bundle_bytes",
                                          (json_int_t)st.bundle_size, "target_bytes",
                                          (json_int_t)st.target_size, "bundle_percent", share,
                                          "bytes_per_changed_element", per, "encode_gbps", gb / e,
                                          "apply_gbps", gb / a, "open_gbps", bundle_gb / op,
                                          "verify_gbps", bundle_gb / v, "peak_mib",
                                          (double)ru.ru_maxrss / 1024.0));
  else
    printf("%7u %9.4f%% %8.3f %9.2f %9.2f %9.2f %9.2f %10.1f\n", threads, share, per, gb / e,
           gb / a, bundle_gb / op, bundle_gb / v, (double)ru.ru_maxrss / 1024.0);
  free(m.data);
  return CLI_OK;
}

/* ---- a set against one bundle per member file */

/* Encodes each target member against the base's member of the same path (the
 * bytes of one that is new count whole), as a script per shard would. */
static int bench_members(const char *base, const char *target, const dcr_encode_options *eo,
                         unsigned threads, const dcr_encode_stats *set, double set_seconds,
                         json_t *doc) {
  dcr_checkpoint *ck = NULL;
  dcr_detail d;
  int rc = dcr_checkpoint_open(&ck, target, DCR_KIND_SET, &cli_limits, &d);
  if (rc) return cli_report(target, rc, &d), cli_exit_code(rc);
  dcr_checkpoint_summary info;
  dcr_checkpoint_info(ck, &info);
  uint64_t bytes = 0, bundles = 0, whole = 0;
  double t0 = now();
  for (uint64_t i = 0; i < info.member_count && !rc; i++) {
    dcr_member_info m;
    dcr_checkpoint_member(ck, i, &m);
    char b[8400], t[8400];
    snprintf(b, sizeof b, "%s/%.*s", base, (int)m.path_length, m.path);
    snprintf(t, sizeof t, "%s/%.*s", target, (int)m.path_length, m.path);
    if (access(b, R_OK)) { /* new in the target: sent whole */
      bytes += m.prefix_length + m.data_length, whole++;
      continue;
    }
    dcr_encode_options o = *eo;
    o.threads = threads;
    o.raw = m.kind == DCR_KIND_RAW;
    o.unrelated = 1;
    membuf mb = {0};
    dcr_encode_stats st;
    rc = dcr_encode(b, t, &o, mem_write, &mb, &st, &d);
    free(mb.data);
    if (rc) cli_report(t, rc, &d);
    bytes += st.bundle_size, bundles++;
  }
  double seconds = now() - t0;
  dcr_checkpoint_free(ck);
  if (rc) return cli_exit_code(rc);
  double target_bytes = (double)set->target_size;
  if (doc)
    json_object_set_new(doc, "per_member", json_pack("{s:I, s:I, s:I, s:f, s:I, s:f, s:f, s:f}",
                        "bundles", (json_int_t)bundles, "members_sent_whole", (json_int_t)whole,
                        "bytes", (json_int_t)bytes,
                        "percent", 100.0 * (double)bytes / target_bytes, "set_bytes",
                        (json_int_t)set->bundle_size, "set_percent",
                        100.0 * (double)set->bundle_size / target_bytes, "encode_seconds", seconds,
                        "set_encode_seconds", set_seconds));
  else
    printf("\nset against one bundle per member file (%u threads; %llu bundles, %llu new files "
           "sent whole):\n"
           "  per member: %12llu bytes (%.4f%% of the target), encode %.2f s\n"
           "  set:        %12llu bytes (%.4f%%), encode %.2f s, one state id, one commit\n",
           threads, (unsigned long long)bundles, (unsigned long long)whole,
           (unsigned long long)bytes, 100.0 * (double)bytes / target_bytes,
           seconds, (unsigned long long)set->bundle_size,
           100.0 * (double)set->bundle_size / target_bytes, set_seconds);
  return CLI_OK;
}

/* ---- refit: memory and in-place apply (dcr_patch) */

typedef struct {
  uint8_t *data;            /* the base file, patched in place by memory runs */
  dcr_checkpoint *ck;
} held;

/* The resolver of a worker that holds the base file in memory: each entry's
 * tensor at its offset, found by name (both lists are in bytewise name order). */
static int resolve_held(void *opaque, uint64_t entry, const dcr_tensor_info *t, dcr_buffer *b) {
  (void)entry;
  held *h = opaque;
  dcr_tensor_side side;
  uint64_t at;
  if (cli_checkpoint_find(h->ck, t->name, t->name_length, &side, &at)) return 1;
  b->data = h->data + at;
  b->size = side.byte_length;
  return 0;
}

static int read_all(const char *path, uint8_t **out, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f || fseek(f, 0, SEEK_END)) return f ? fclose(f), -1 : -1;
  long n = ftell(f);
  rewind(f);
  *out = n > 0 ? malloc((size_t)n) : NULL;
  int ok = n > 0 && *out && fread(*out, 1, (size_t)n, f) == (size_t)n;
  fclose(f);
  *size = ok ? (size_t)n : 0;
  return ok ? 0 : -1;
}

static int copy_file(const uint8_t *data, size_t size, const char *path) {
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(data, 1, size, f) == size;
  if (f) ok = !fclose(f) && ok;
  return ok ? 0 : -1;
}

/* One line per thread count: memory apply at each level, and in-place file apply
 * at full and chunk level, in GB/s of checkpoint; trusted also in changed
 * elements per second; the journal's size as a share of the checkpoint. */
static int bench_refit(const uint8_t *pristine, size_t size, const char *base, dcr_reader *r,
                       const char *work, uint64_t changed, unsigned threads, int runs,
                       json_t *rows) {
  static const int levels[5] = {DCR_VERIFY_FULL, DCR_VERIFY_CHUNK, DCR_VERIFY_NONE,
                                DCR_VERIFY_FULL, DCR_VERIFY_CHUNK};
  double t[5][16];
  held h = {.data = malloc(size)};
  dcr_patch *p = NULL;
  dcr_patch_stats st = {0};
  dcr_detail d;
  int rc = h.data ? dcr_checkpoint_open(&h.ck, base, DCR_KIND_SAFETENSORS, &cli_limits, &d) : DCR_E_NOMEM;
  if (!rc) rc = dcr_patch_create(&p, r, &d);
  if (!rc) dcr_patch_set_threads(p, threads), dcr_patch_set_sync(p, 0);
  if (!rc) dcr_patch_set_cancel(p, &cli_interrupted);
  for (int k = 0; k < 5 && !rc; k++) {
    dcr_patch_set_verify(p, levels[k]);
    for (int run = 0; run < runs && !rc; run++) {
      if (k < 3) memcpy(h.data, pristine, size); /* not timed: back to the base */
      else if (copy_file(pristine, size, work))
        rc = (snprintf(d.message, sizeof d.message, "cannot write the work file"), DCR_E_IO);
      double t0 = now();
      if (!rc) rc = k < 3 ? dcr_patch_memory(p, resolve_held, &h, &d) : dcr_patch_file(p, work, &d);
      t[k][run] = now() - t0;
      if (k == 3) dcr_patch_stats_get(p, &st, sizeof st);
    }
  }
  if (rc) {
    cli_report(NULL, rc, &d);
  } else {
    double gb = (double)size / 1e9, none = median(t[2], runs);
    if (rows)
      json_array_append_new(rows, json_pack("{s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "threads",
                                            (int)threads, "memory_full_gbps",
                                            gb / median(t[0], runs), "memory_chunk_gbps",
                                            gb / median(t[1], runs), "memory_none_gbps", gb / none,
                                            "none_million_elements_per_s",
                                            (double)changed / none / 1e6, "in_place_full_gbps",
                                            gb / median(t[3], runs), "in_place_chunk_gbps",
                                            gb / median(t[4], runs), "journal_percent",
                                            100.0 * (double)st.journal_bytes / (double)size));
    else printf("%7u %9.2f %9.2f %9.2f %10.1f %9.2f %9.2f %8.3f%%\n", threads, gb / median(t[0], runs),
           gb / median(t[1], runs), gb / none, (double)changed / none / 1e6,
           gb / median(t[3], runs), gb / median(t[4], runs),
           100.0 * (double)st.journal_bytes / (double)size);
  }
  dcr_patch_free(p);
  dcr_checkpoint_free(h.ck);
  free(h.data);
  return cli_exit_code(rc);
}

/* The refit table: the pair's bundle patched into the base held in memory, and
 * into a copy of the base file, for each thread count. */
static int bench_refits(const char *base, const char *target, const char *dir,
                        const dcr_encode_options *eo, const unsigned *threads, unsigned nthreads,
                        int runs, json_t *rows) {
  membuf m = {0};
  dcr_encode_stats es;
  dcr_detail d;
  dcr_reader *r = NULL;
  uint8_t *pristine = NULL;
  size_t size = 0;
  char work[4200];
  snprintf(work, sizeof work, "%s/work", dir);
  int rc = dcr_encode(base, target, eo, mem_write, &m, &es, &d);
  if (!rc) rc = dcr_reader_open_memory(&r, m.data, m.size, &cli_limits, &d);
  if (!rc && read_all(base, &pristine, &size))
    rc = (snprintf(d.message, sizeof d.message, "cannot read the base"), DCR_E_IO);
  if (rc) {
    cli_report(NULL, rc, &d);
    rc = cli_exit_code(rc);
  } else {
    if (!rows) printf("\nrefit (dcr_patch): GB/s of checkpoint; in-place is a file in the page cache, no fsync\n"
           "%7s %9s %9s %9s %10s %9s %9s %9s\n", "threads", "mem full", "mem chunk", "mem none",
           "none Mel/s", "inp full", "inp chunk", "journal");
    for (unsigned i = 0; i < nthreads && !rc; i++)
      rc = bench_refit(pristine, size, base, r, work, es.changed_elements, threads[i], runs, rows);
  }
  unlink(work);
  dcr_reader_free(r);
  free(m.data);
  free(pristine);
  return rc;
}

int cmd_bench(int argc, char **argv) {
  static const struct option longs[] = {CLI_COMMON_LONG_OPTIONS,
                                        {"size", required_argument, NULL, OPT_SIZE},
                                        {"rate", required_argument, NULL, OPT_RATE},
                                        {"threads", required_argument, NULL, OPT_THREADS},
                                        {"runs", required_argument, NULL, OPT_RUNS},
                                        {"chunk-size", required_argument, NULL, OPT_CHUNK_SIZE},
                                        {"level", required_argument, NULL, OPT_LEVEL},
                                        {"format", required_argument, NULL, OPT_FORMAT},
                                        {"json", no_argument, NULL, OPT_JSON},
                                        {NULL, 0, NULL, 0}};
  cli_common common;
  cli_common_init(&common, "bench");
  dcr_synth_options so;
  dcr_synth_options_default(&so);
  so.size = 256u << 20;
  dcr_encode_options eo;
  dcr_encode_options_default(&eo);
  unsigned threads[16], nthreads = 0;
  uint64_t v;
  int c, stop = 0, runs = 3, json = 0;
  char *end, *list = NULL;
  while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT, longs, NULL)) != -1) {
    if (cli_common_option(&common, c, usage, &stop)) {
      if (stop) return CLI_OK;
      continue;
    }
    switch (c) {
      case OPT_SIZE:
        if (cli_parse_size(optarg, &so.size) || !so.size) return cli_usage("bench", "bad --size");
        break;
      case OPT_RATE:
        so.rate = strtod(optarg, &end);
        if (*end || !(so.rate >= 0 && so.rate <= 1)) return cli_usage("bench", "bad --rate");
        break;
      case OPT_THREADS: list = optarg; break;
      case OPT_RUNS:
        if (cli_parse_uint(optarg, 16, &v) || !v) return cli_usage("bench", "--runs wants 1..16");
        runs = (int)v;
        break;
      case OPT_CHUNK_SIZE:
        if (cli_parse_size(optarg, &v) || v > UINT32_MAX) return cli_usage("bench", "bad --chunk-size");
        eo.chunk_size = (uint32_t)v;
        break;
      case OPT_LEVEL:
        if (cli_parse_uint(optarg, 22, &v)) return cli_usage("bench", "bad --level '%s'", optarg);
        eo.level = (int)v;
        break;
      case OPT_FORMAT:
        if (cli_parse_format(optarg, &eo.max_minor))
          return cli_usage("bench", "bad --format '%s' (1.0 to 1.3)", optarg);
        break;
      case OPT_JSON: json = 1; break;
      default: return cli_bad_option("bench", c, argv);
    }
  }
  for (char *tok = list ? strtok(list, ",") : NULL; tok; tok = strtok(NULL, ",")) {
    if (nthreads == 16 || cli_parse_uint(tok, 1024, &v) || !v)
      return cli_usage("bench", "--threads wants up to 16 counts in 1..1024");
    threads[nthreads++] = (unsigned)v;
  }
  if (!nthreads) {
    unsigned n = dcr_default_threads();
    threads[nthreads++] = 1;
    if (n > 1) threads[nthreads++] = n;
  }
  int files = argc - optind;
  if (files == 1) return cli_usage("bench", "missing arguments: expected no files, or BASE and TARGET");
  if (cli_arg_count("bench", argc, argv, 0, 2, "no files, or BASE and TARGET")) return CLI_USAGE;
  eo.cancel = &cli_interrupted;
  json_t *doc = json ? json_object() : NULL;
  const char *tmp = getenv("TMPDIR");
  char dir[4096], base[4200], target[4200], out[4200];
  snprintf(dir, sizeof dir, "%s/dcr-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) return fprintf(stderr, "dcr: cannot create a temporary directory\n"), CLI_IO;
  snprintf(out, sizeof out, "%s/out", dir);
  if (files) {
    snprintf(base, sizeof base, "%s", argv[optind]);
    snprintf(target, sizeof target, "%s", argv[optind + 1]);
  } else {
    double rate;
    snprintf(base, sizeof base, "%s/base.safetensors", dir);
    snprintf(target, sizeof target, "%s/target.safetensors", dir);
    int rc = cli_synth_files(&so, base, target, 0, &rate);
    if (rc) {
      rmdir(dir);
      json_decref(doc);
      return rc;
    }
    if (!json)
      printf("generated %llu-byte BF16 pair, %.4f%% of elements changed\n",
             (unsigned long long)so.size, 100.0 * rate);
    else
      json_object_set_new(doc, "generated", json_pack("{s:I, s:f}", "bytes", (json_int_t)so.size,
                                                      "changed_percent", 100.0 * rate));
  }
  if (!json)
    printf("%7s %10s %8s %9s %9s %9s %9s %10s\n", "threads", "size", "B/chg", "enc GB/s",
           "app GB/s", "open GB/s", "ver GB/s", "peak MiB");
  int rc = CLI_OK;
  json_t *rows = json ? json_array() : NULL, *refit = json ? json_array() : NULL;
  for (unsigned i = 0; i < nthreads && !rc; i++)
    rc = bench_threads(base, target, out, &eo, threads[i], runs, rows);
  cli_remove_tree(out);
  struct stat st;
  if (!rc && !stat(base, &st) && S_ISDIR(st.st_mode)) { /* a set: no in-place refit (§10.3) */
    dcr_encode_stats es;
    membuf m = {0};
    dcr_detail d;
    dcr_encode_options o = eo;
    o.threads = threads[nthreads - 1];
    double t0 = now();
    int err = dcr_encode(base, target, &o, mem_write, &m, &es, &d);
    double seconds = now() - t0;
    free(m.data);
    rc = err ? (cli_report(NULL, err, &d), cli_exit_code(err))
             : bench_members(base, target, &eo, o.threads, &es, seconds, doc);
  } else if (!rc) {
    rc = bench_refits(base, target, dir, &eo, threads, nthreads, runs, refit);
  }
  if (json && !rc) {
    json_object_set_new(doc, "runs", json_integer(runs));
    json_object_set_new(doc, "copy", rows);
    json_object_set_new(doc, "refit", refit);
    cli_print_json(doc);
  } else {
    json_decref(doc);
    json_decref(rows);
    json_decref(refit);
  }
  if (!files) unlink(base), unlink(target);
  rmdir(dir);
  return rc;
}
