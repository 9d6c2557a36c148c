/*
 * cmd_synth.c - dcr synth BASE TARGET: a realistic sample pair (cli/synth.c).
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "synth.h"

static const char usage[] =
    "Usage: dcr synth BASE TARGET [OPTIONS]\n"
    "Write a sample pair of safetensors checkpoints shaped like an LLM's: BF16\n"
    "weights rounded from fp32 master weights ~ N(0, 0.02), and the same after one\n"
    "Adam-like step whose size is calibrated to change about RATE of the elements,\n"
    "mostly by one unit in the last place. The same seed gives the same files.\n\n"
    "      --size N         bytes of tensor data (K/M/G suffixes; default 64M)\n"
    "      --rate R         fraction of elements that change, 0..1 (default 0.01)\n"
    "      --seed S         random seed (default 1)\n"
    "      --dtype D        BF16, F16 or F32 (default BF16)\n"
    "  -f, --force          overwrite existing files\n";

int cli_synth_files(const dcr_synth_options *options, const char *base, const char *target,
                    int force, double *rate) {
  for (int i = 0; i < 2; i++)
    if (!strcmp(i ? target : base, "-")) return cli_usage("synth", "outputs must be files");
  if (!strcmp(base, target)) return cli_usage("synth", "BASE and TARGET must be different files");
  dcr_synth_options o = *options;
  o.cancel = &cli_interrupted;
  cli_output out[2];
  int rc = cli_output_open(&out[0], base, force, NULL, 0);
  if (!rc && (rc = cli_output_open(&out[1], target, force, NULL, 0))) cli_output_abort(&out[0]);
  if (rc) return rc;
  const dcr_synth_sink sinks[2] = {{cli_output_write, &out[0], base}, {cli_output_write, &out[1], target}};
  char err[512];
  int failed = dcr_synth_write(&o, sinks, rate, err, sizeof err);
  if (failed == -1) fprintf(stderr, "dcr: %s\n", err);
  /* the base first: a failure between the two commits leaves a new base beside
   * the old target, each a whole file */
  rc = failed == -2 ? CLI_INTERRUPTED : failed ? CLI_IO : cli_output_commit(&out[0]);
  if (!rc) rc = cli_output_commit(&out[1]);
  if (rc) cli_output_abort(&out[0]), cli_output_abort(&out[1]);
  return rc;
}

int cmd_synth(int argc, char **argv) {
  static const struct option longs[] = {CLI_COMMON_LONG_OPTIONS,
                                        {"size", required_argument, NULL, OPT_SIZE},
                                        {"rate", required_argument, NULL, OPT_RATE},
                                        {"seed", required_argument, NULL, OPT_SEED},
                                        {"dtype", required_argument, NULL, OPT_DTYPE},
                                        {"force", no_argument, NULL, 'f'},
                                        {NULL, 0, NULL, 0}};
  cli_common common;
  cli_common_init(&common, "synth");
  dcr_synth_options o;
  dcr_synth_options_default(&o);
  int c, stop = 0, force = 0;
  char *end;
  while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT "f", longs, NULL)) != -1) {
    if (cli_common_option(&common, c, usage, &stop)) {
      if (stop) return CLI_OK;
      continue;
    }
    switch (c) {
      case OPT_SIZE:
        if (cli_parse_size(optarg, &o.size) || !o.size)
          return cli_usage("synth", "bad --size '%s'", optarg);
        break;
      case OPT_RATE:
        o.rate = strtod(optarg, &end);
        if (*end || !(o.rate >= 0 && o.rate <= 1))
          return cli_usage("synth", "--rate wants a number in 0..1");
        break;
      case OPT_SEED:
        if (cli_parse_uint(optarg, UINT64_MAX, &o.seed))
          return cli_usage("synth", "bad --seed '%s'", optarg);
        break;
      case OPT_DTYPE:
        o.dtype = dcr_dtype_from_name(optarg, strlen(optarg));
        if (o.dtype != 8 && o.dtype != 9 && o.dtype != 12)
          return cli_usage("synth", "--dtype wants BF16, F16 or F32");
        break;
      case 'f': force = 1; break;
      default: return cli_bad_option("synth", c, argv);
    }
  }
  if (cli_arg_count("synth", argc, argv, 2, 2, "BASE and TARGET")) return CLI_USAGE;
  cli_progress_state progress = {.what = "writing"};
  if (common.progress) o.progress = cli_progress, o.progress_opaque = &progress;
  double rate;
  int rc = cli_synth_files(&o, argv[optind], argv[optind + 1], force, &rate);
  cli_progress_end(&progress);
  if (rc) return rc;
  if (!common.quiet) {
    char a[32];
    fprintf(stderr, "%s, %s: %s of %s each, %.4f%% of elements changed\n", argv[optind],
            argv[optind + 1], cli_bytes(o.size, a), dcr_dtype_name(o.dtype), 100.0 * rate);
    if (common.verbose)
      fprintf(stderr, "  seed %llu, requested rate %g\n", (unsigned long long)o.seed, o.rate);
  }
  return CLI_OK;
}
