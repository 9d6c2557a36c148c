/*
 * cmd_bench.c - dcr bench [BASE TARGET]: bundle size and encode/apply/validate
 * speed per thread count, in the spirit of `zstd -b`. Without files it benchmarks
 * a generated BF16 pair (cli/synth.c). Comparisons with other tools are
 * bench/run.sh's job; this measures dcr alone, in one process.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "synth.h"

static const char usage[] =
    "Usage: dcr bench [BASE TARGET] [OPTIONS]\n"
    "Measure bundle size and encode, apply and validate speed for each thread count.\n"
    "Without files, a sample BF16 pair is generated in a temporary directory.\n"
    "Encode and apply speeds are GB/s of target bytes; open (structure and every\n"
    "checksum) and verify (open, then decode every chunk) are GB/s of bundle bytes.\n"
    "Each figure is the median of --runs.\n\n"
    "      --size N         generated pair size (K/M/G suffixes; default 256M)\n"
    "      --rate R         generated pair change rate (default 0.01)\n"
    "      --threads LIST   comma-separated thread counts (default: 1 and all cores)\n"
    "      --runs N         runs per figure (default 3)\n"
    "      --chunk-size N   as for encode (default 4M)\n"
    "      --level N        as for encode (default 3)\n";

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
                         const dcr_encode_options *eo, unsigned threads, int runs) {
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
  for (int r = 0; r < runs; r++) {
    m.size = 0;
    double t0 = now();
    int rc = dcr_encode(base, target, &o, mem_write, &m, &st, &d);
    te[r] = now() - t0;
    dcr_reader *reader = NULL;
    if (!rc) {
      t0 = now();
      rc = dcr_reader_open_memory(&reader, m.data, m.size, NULL, &d);
      to[r] = now() - t0;
    }
    if (!rc) {
      dcr_reader_set_threads(reader, threads);
      t0 = now();
      rc = dcr_reader_verify(reader, &d);
      tv[r] = to[r] + now() - t0;
    }
    if (!rc) {
      unlink(out); /* not timed: dropping the last run's file */
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
  printf("%7u %9.4f%% %8.3f %9.2f %9.2f %9.2f %9.2f %10.1f\n", threads,
         100.0 * (double)st.bundle_size / (double)st.target_size,
         st.changed_elements ? (double)st.bundle_size / (double)st.changed_elements : 0.0,
         gb / e, gb / a, bundle_gb / op, bundle_gb / v, (double)ru.ru_maxrss / 1024.0);
  free(m.data);
  return CLI_OK;
}

int cmd_bench(int argc, char **argv) {
  static const struct option longs[] = {CLI_COMMON_LONG_OPTIONS,
                                        {"size", required_argument, NULL, OPT_SIZE},
                                        {"rate", required_argument, NULL, OPT_RATE},
                                        {"threads", required_argument, NULL, OPT_THREADS},
                                        {"runs", required_argument, NULL, OPT_RUNS},
                                        {"chunk-size", required_argument, NULL, OPT_CHUNK_SIZE},
                                        {"level", required_argument, NULL, OPT_LEVEL},
                                        {NULL, 0, NULL, 0}};
  cli_common common;
  cli_common_init(&common);
  dcr_synth_options so;
  dcr_synth_options_default(&so);
  so.size = 256u << 20;
  dcr_encode_options eo;
  dcr_encode_options_default(&eo);
  unsigned threads[16], nthreads = 0;
  uint64_t v;
  int c, stop = 0, runs = 3;
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
        if (cli_parse_uint(optarg, 22, &v)) return cli_usage("bench", "bad --level");
        eo.level = (int)v;
        break;
      default: return cli_usage("bench", "invalid option");
    }
  }
  for (char *tok = list ? strtok(list, ",") : NULL; tok; tok = strtok(NULL, ",")) {
    if (nthreads == 16 || cli_parse_uint(tok, 1024, &v) || !v)
      return cli_usage("bench", "--threads wants up to 16 counts in 1..1024");
    threads[nthreads++] = (unsigned)v;
  }
  if (!nthreads) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    threads[nthreads++] = 1;
    if (n > 1) threads[nthreads++] = (unsigned)n;
  }
  int files = argc - optind;
  if (files != 0 && files != 2) return cli_usage("bench", "expected no files, or BASE and TARGET");
  const char *tmp = getenv("TMPDIR");
  char dir[4096], base[4200], target[4200], out[4200];
  snprintf(dir, sizeof dir, "%s/dcr-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) return fprintf(stderr, "dcr: cannot create a temporary directory\n"), CLI_IO;
  snprintf(out, sizeof out, "%s/out", dir);
  if (files) {
    snprintf(base, sizeof base, "%s", argv[optind]);
    snprintf(target, sizeof target, "%s", argv[optind + 1]);
  } else {
    char err[512];
    double rate;
    snprintf(base, sizeof base, "%s/base.safetensors", dir);
    snprintf(target, sizeof target, "%s/target.safetensors", dir);
    if (dcr_synth_write(&so, base, target, &rate, err, sizeof err)) {
      fprintf(stderr, "dcr: %s\n", err);
      rmdir(dir);
      return CLI_IO;
    }
    printf("generated %llu-byte BF16 pair, %.4f%% of elements changed\n",
           (unsigned long long)so.size, 100.0 * rate);
  }
  printf("%7s %10s %8s %9s %9s %9s %9s %10s\n", "threads", "size", "B/chg", "enc GB/s",
         "app GB/s", "open GB/s", "ver GB/s", "peak MiB");
  int rc = CLI_OK;
  for (unsigned i = 0; i < nthreads && !rc; i++)
    rc = bench_threads(base, target, out, &eo, threads[i], runs);
  unlink(out);
  if (!files) unlink(base), unlink(target);
  rmdir(dir);
  return rc;
}
