/*
 * cmd_squash.c - dcr squash B1 … Bn -o BUNDLE [--base BASE]
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

static const char usage[] =
    "Usage: dcr squash B1 ... Bn -o BUNDLE [--base BASE] [OPTIONS]\n"
    "Compose bundles that follow one another (each one's base is the previous one's\n"
    "target) into one bundle from B1's base to Bn's target, with Bn's metadata.\n"
    "Chunk changes are composed without any checkpoint where they can be (XOR with\n"
    "XOR, ULP delta with ULP delta, an overwrite of an element no other bundle\n"
    "changes); the others (DELTA_BANDED and DELTA_CLASSED chunks, of formats 1.3\n"
    "and 1.2, an element XORed then moved by a delta, tensors added, recoded or\n"
    "resized along the chain) need the\n"
    "base: with --base BASE (B1's base, checked whole first) every such chunk is\n"
    "rebuilt from it and coded anew, as dcr encode would; without it they fail,\n"
    "naming the chunk. Sets (model directories): BASE is a directory, and each\n"
    "bundle's raw members must be the previous one's. BUNDLE must be a regular\n"
    "file (its header is written last) and not one of the inputs, even with -f.\n\n"
    "  -o, --output BUNDLE  where to write the bundle (required)\n"
    "      --base BASE      B1's base checkpoint, for chunks that do not compose\n"
    "      --level N        zstd level 1..22 of chunks coded anew, 0 to store\n"
    "                       (default 3)\n"
    "      --threads N      worker threads (default: usable CPUs, up to 32); same output\n"
    "      --format V       the newest format the bundle may need: 1.0 to 1.3\n"
    "                       (default: the newest of the inputs')\n"
    "      --sliced PATTERN\n"
    "                       tensors that workers hold in part, as for dcr encode\n"
    "                       (fnmatch, repeatable): their chunks are never made\n"
    "                       DELTA_BANDED or DELTA_CLASSED, and such a chunk of the\n"
    "                       bundles is rebuilt without ranks (this needs --base)\n"
    "  -f, --force          overwrite BUNDLE if it exists\n"
    "      --json           print the statistics as one JSON document on stdout\n";

/* The library writes a file it can seek in: a stream, a FIFO or a device is no
 * such file. cli_check_output says the rest (an input, a directory, -f). */
static int check_output(const char *out, int force, const char *const *inputs, size_t n) {
  struct stat st;
  if (!strcmp(out, "-") || (!stat(out, &st) && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)))
    return cli_usage("squash", "-o names a regular file: the bundle's header is written last");
  return cli_check_output(out, force, inputs, n);
}

/* sliced: room for the --sliced patterns, at most one a word of argv */
static int squash(int argc, char **argv, const char **sliced) {
  static const struct option longs[] = {
      CLI_COMMON_LONG_OPTIONS,
      {"output", required_argument, NULL, 'o'},
      {"force", no_argument, NULL, 'f'},
      {"base", required_argument, NULL, OPT_BASE},
      {"level", required_argument, NULL, OPT_LEVEL},
      {"threads", required_argument, NULL, OPT_THREADS},
      {"format", required_argument, NULL, OPT_FORMAT},
      {"json", no_argument, NULL, OPT_JSON},
      {"sliced", required_argument, NULL, OPT_SLICED},
      {NULL, 0, NULL, 0}};
  cli_common common;
  cli_common_init(&common, "squash");
  dcr_squash_options opt;
  dcr_squash_options_default(&opt);
  const char *out = NULL, *base = NULL;
  int force = 0, c, stop = 0, json = 0;
  uint64_t v;
  opt.sliced = sliced;
  while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT "o:f", longs, NULL)) != -1) {
    if (cli_common_option(&common, c, usage, &stop)) {
      if (stop) return CLI_OK;
      continue;
    }
    switch (c) {
      case 'o': out = optarg; break;
      case 'f': force = 1; break;
      case OPT_BASE: base = optarg; break;
      case OPT_LEVEL:
        if (cli_parse_uint(optarg, 22, &v)) return cli_usage("squash", "bad --level '%s'", optarg);
        opt.level = (int)v;
        break;
      case OPT_THREADS:
        if (cli_parse_uint(optarg, 1024, &v)) return cli_usage("squash", "bad --threads '%s'", optarg);
        opt.threads = (unsigned)v;
        break;
      case OPT_FORMAT:
        if (cli_parse_format(optarg, &opt.max_minor))
          return cli_usage("squash", "bad --format '%s' (1.0 to 1.3)", optarg);
        break;
      case OPT_JSON: json = 1; break;
      case OPT_SLICED: sliced[opt.sliced_count++] = optarg; break;
      default: return cli_bad_option("squash", c, argv);
    }
  }
  if (cli_arg_count("squash", argc, argv, 1, -1, "one bundle or more")) return CLI_USAGE;
  if (!out) return cli_usage("squash", "missing -o BUNDLE");
  size_t n = (size_t)(argc - optind);
  const char **inputs = calloc(n + 1, sizeof *inputs);
  if (!inputs) return CLI_IO;
  for (size_t i = 0; i < n; i++) inputs[i] = argv[optind + (int)i];
  for (size_t i = 0; i < n; i++)
    if (!strcmp(inputs[i], "-"))
      return free(inputs), cli_usage("squash", "bundles are read from files: - is not one");
  if (base) inputs[n] = base;
  if ((base && cli_check_checkpoint(base)) || check_output(out, force, inputs, n + !!base))
    return free(inputs), CLI_USAGE;
  cli_progress_state progress = {.what = "squashing"};
  if (common.progress) opt.progress = cli_progress, opt.progress_opaque = &progress;
  opt.cancel = &cli_interrupted;
  opt.max_memory = cli_limits.max_memory;
  opt.no_replace = !force;
  dcr_encode_stats st;
  dcr_detail d;
  int err = dcr_squash(inputs, n, base, out, &opt, &st, &d);
  cli_progress_end(&progress);
  free(inputs);
  if (err) {
    cli_report(NULL, err, &d);
    return cli_exit_code(err);
  }
  unsigned threads = opt.threads ? opt.threads : dcr_default_threads();
  if (json) cli_print_json(cli_stats_json(out, &st, threads));
  if (!common.quiet && !json) cli_print_stats(out, &st, threads, common.verbose);
  return CLI_OK;
}

int cmd_squash(int argc, char **argv) {
  const char **sliced = calloc((size_t)argc + 1, sizeof *sliced);
  if (!sliced) return CLI_IO;
  int rc = squash(argc, argv, sliced);
  free(sliced);
  return rc;
}
