/*
 * cmd_encode.c - dcr encode BASE TARGET -o BUNDLE
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char usage[] =
    "Usage: dcr encode BASE TARGET -o BUNDLE [OPTIONS]\n"
    "Write the changes from the BASE checkpoint to the TARGET checkpoint (safetensors,\n"
    "or any files with --raw) as a DCR bundle. BASE and TARGET must be regular files\n"
    "(read at random offsets), or two model directories (sharded safetensors with\n"
    "their index, config and tokenizer files: a checkpoint set, format 1.1), which\n"
    "may also be named by their model.safetensors.index.json. BUNDLE may be -\n"
    "(standard output), a FIFO or a device; one that is an input is refused, even\n"
    "with -f.\n\n"
    "  -o, --output BUNDLE  where to write the bundle (required)\n"
    "      --chunk-size N   chunk size in bytes, a power of two from 4K to 1G\n"
    "                       (K/M/G suffixes; default 4M)\n"
    "      --level N        zstd level 1..22, 0 to store uncompressed (default 3)\n"
    "      --threads N      worker threads (default: usable CPUs, up to 32); same output\n"
    "      --raw            treat both inputs as raw byte files\n"
    "      --meta KEY=VALUE add a metadata pair (repeatable), e.g. --meta step=1200;\n"
    "                       the standard keys step, run_id, parent_bundle and\n"
    "                       trainer must have the values SPEC.md 6.4.1 allows\n"
    "      --parent BUNDLE  the previous bundle of the run: adds parent_bundle=its\n"
    "                       XXH3-128 (as xxh128sum prints it), which history append\n"
    "                       checks\n"
    "      --unrelated      encode inputs that share no tensor name (refused by\n"
    "                       default: every tensor would be sent whole)\n"
    "      --format V       the newest format the bundle may need: 1.3 (default);\n"
    "                       1.2, DELTA_CLASSED where 1.3 writes DELTA_BANDED;\n"
    "                       1.1, without either (for readers that scatter\n"
    "                       changes without the base, dcr_changes); or\n"
    "                       1.0, which 1.0 readers read (tensors that grow or shrink\n"
    "                       then go whole; sets and 1.1 dtypes are refused)\n"
    "      --sign KEY       sign the bundle with the secret key KEY as it is written\n"
    "                       (the bundle dcr sign would make of it, in one pass)\n"
    "      --sign-scope SCOPE\n"
    "                       what --sign signs: checkpoints (default), the bundle and\n"
    "                       SHA-256 digests of BASE's and TARGET's tensors, so that\n"
    "                       dcr verify --base/--target can check them (hashing both\n"
    "                       costs more than the encode); or bundle, the bundle alone\n"
    "                       (signature format 2.0: nearly free; enough for workers\n"
    "                       that apply it to a base of their own)\n"
    "      --sliced PATTERN\n"
    "                       tensors that workers hold in part (tensor-parallel\n"
    "                       slices; fnmatch, repeatable): coded with positions that\n"
    "                       need no base, so that any block of them decodes alone\n"
    "  -f, --force          overwrite BUNDLE if it exists\n"
    "      --json           print the statistics as one JSON document on stdout\n";

int cmd_encode(int argc, char **argv) {
  static const struct option longs[] = {
      CLI_COMMON_LONG_OPTIONS,
      {"output", required_argument, NULL, 'o'},
      {"force", no_argument, NULL, 'f'},
      {"chunk-size", required_argument, NULL, OPT_CHUNK_SIZE},
      {"level", required_argument, NULL, OPT_LEVEL},
      {"threads", required_argument, NULL, OPT_THREADS},
      {"raw", no_argument, NULL, OPT_RAW},
      {"meta", required_argument, NULL, OPT_META},
      {"json", no_argument, NULL, OPT_JSON},
      {"unrelated", no_argument, NULL, OPT_UNRELATED},
      {"format", required_argument, NULL, OPT_FORMAT},
      {"parent", required_argument, NULL, OPT_PARENT},
      {"sign", required_argument, NULL, OPT_SIGN},
      {"sign-scope", required_argument, NULL, OPT_SIGN_SCOPE},
      {"sliced", required_argument, NULL, OPT_SLICED},
      {NULL, 0, NULL, 0}};
  cli_common common;
  cli_common_init(&common, "encode");
  dcr_encode_options opt;
  dcr_encode_options_default(&opt);
  const char *out = NULL, *sign_key = NULL;
  int force = 0, c, stop = 0, json = 0, scoped = 0;
  uint64_t v;
  /* one allocation: the metadata pairs, then the --sliced patterns */
  dcr_meta *meta = calloc((size_t)argc, sizeof *meta + sizeof(char *));
  char parent[33];
  if (!meta) return CLI_IO;
  const char **sliced = (const char **)(void *)(meta + argc);
  while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT "o:f", longs, NULL)) != -1) {
    if (cli_common_option(&common, c, usage, &stop)) {
      if (stop) return free(meta), CLI_OK;
      continue;
    }
    switch (c) {
      case 'o': out = optarg; break;
      case 'f': force = 1; break;
      case OPT_CHUNK_SIZE:
        if (cli_parse_size(optarg, &v) || v > UINT32_MAX)
          return free(meta), cli_usage("encode", "bad --chunk-size '%s'", optarg);
        opt.chunk_size = (uint32_t)v;
        break;
      case OPT_LEVEL:
        if (cli_parse_uint(optarg, 22, &v)) return free(meta), cli_usage("encode", "bad --level '%s'", optarg);
        opt.level = (int)v;
        break;
      case OPT_THREADS:
        if (cli_parse_uint(optarg, 1024, &v)) return free(meta), cli_usage("encode", "bad --threads '%s'", optarg);
        opt.threads = (unsigned)v;
        break;
      case OPT_RAW: opt.raw = 1; break;
      case OPT_JSON: json = 1; break;
      case OPT_UNRELATED: opt.unrelated = 1; break;
      case OPT_FORMAT:
        if (cli_parse_format(optarg, &opt.max_minor))
          return free(meta), cli_usage("encode", "bad --format '%s' (1.0 to 1.3)", optarg);
        break;
      case OPT_META: {
        char *eq = strchr(optarg, '=');
        if (!eq || eq == optarg) return free(meta), cli_usage("encode", "--meta wants KEY=VALUE");
        *eq = '\0';
        meta[opt.meta_count++] = (dcr_meta){optarg, eq + 1};
        break;
      }
      case OPT_SIGN: sign_key = optarg; break;
      case OPT_SIGN_SCOPE:
        if (cli_parse_sign_scope(optarg, &opt.sign_scope))
          return free(meta), cli_usage("encode", "--sign-scope is checkpoints or bundle, not '%s'", optarg);
        scoped = 1;
        break;
      case OPT_SLICED: sliced[opt.sliced_count++] = optarg; break;
      case OPT_PARENT:
        if (cli_file_digest(optarg, parent)) return free(meta), CLI_USAGE;
        meta[opt.meta_count++] = (dcr_meta){"parent_bundle", parent};
        break;
      default: return free(meta), cli_bad_option("encode", c, argv);
    }
  }
  opt.meta = meta;
  opt.sliced = sliced;
  if (cli_arg_count("encode", argc, argv, 2, 2, "BASE and TARGET")) return free(meta), CLI_USAGE;
  if (!out) return free(meta), cli_usage("encode", "missing -o BUNDLE");
  if (scoped && !sign_key) return free(meta), cli_usage("encode", "--sign-scope without --sign KEY");
  if (json && !strcmp(out, "-"))
    return free(meta), cli_usage("encode", "--json prints on standard output: -o - cannot go there too");
  char dirs[2][4096];
  const char *inputs[2];
  for (int i = 0; i < 2; i++) {
    inputs[i] = cli_checkpoint_path(argv[optind + i], dirs[i], sizeof dirs[i]);
    if (cli_check_checkpoint(inputs[i])) return free(meta), CLI_USAGE;
  }
  cli_output o;
  dcr_detail d;
  opt.sign_key = sign_key;
  int rc = cli_output_open(&o, out, force, inputs, 2);
  if (rc) return free(meta), rc;
  cli_progress_state progress = {.what = "encoding"};
  if (common.progress) opt.progress = cli_progress, opt.progress_opaque = &progress;
  opt.cancel = &cli_interrupted;
  opt.max_memory = cli_limits.max_memory;
  dcr_encode_stats st;
  int err = dcr_encode(inputs[0], inputs[1], &opt, cli_output_write, &o, &st, &d);
  cli_progress_end(&progress);
  free(meta);
  if (err) {
    cli_output_abort(&o);
    if (err == DCR_E_IO && o.error) /* the output's fault */
      snprintf(d.message, sizeof d.message, "cannot write: %s", strerror(o.error)),
          snprintf(d.file, sizeof d.file, "%s", strcmp(out, "-") ? out : "(stdout)");
    cli_report(NULL, err, &d);
    return cli_exit_code(err);
  }
  if ((rc = cli_output_commit(&o))) return rc;
  unsigned threads = opt.threads ? opt.threads : dcr_default_threads();
  if (json) cli_print_json(cli_stats_json(out, &st, threads));
  if (!common.quiet && !json) cli_print_stats(out, &st, threads, common.verbose);
  return CLI_OK;
}

/* The chunks of each encoding, 1..8, from the stats' three places. */
static uint64_t chunks_of(const dcr_encode_stats *st, int e) {
  return e == DCR_ENC_DELTA_CLASSED  ? st->chunks_delta_classed
         : e == DCR_ENC_DELTA_BANDED ? st->chunks_delta_banded
                                     : st->chunks_by_encoding[e];
}

json_t *cli_stats_json(const char *bundle, const dcr_encode_stats *st, unsigned threads) {
  char version[16];
  snprintf(version, sizeof version, "%d.%llu", DCR_FORMAT_MAJOR, (unsigned long long)st->format_minor);
  json_t *enc = json_object();
  for (int e = 1; e < DCR_ENC_COUNT; e++)
    if (chunks_of(st, e))
      json_object_set_new(enc, dcr_encoding_name(e), json_integer((json_int_t)chunks_of(st, e)));
  return json_pack(
      "{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:I, s:I, s:I, s:I, s:i}", "bundle", bundle,
      "format", version, "bundle_bytes", (json_int_t)st->bundle_size, "target_bytes",
      (json_int_t)st->target_size, "elements", (json_int_t)st->elements, "changed_elements",
      (json_int_t)st->changed_elements, "chunks", (json_int_t)st->chunks, "changed_chunks",
      (json_int_t)st->changed_chunks, "chunks_by_encoding", enc, "tensors_added",
      (json_int_t)st->tensors_added, "tensors_removed", (json_int_t)st->tensors_removed,
      "tensors_recoded", (json_int_t)st->tensors_recoded, "tensors_resized",
      (json_int_t)st->tensors_resized, "threads", (int)threads);
}

void cli_print_stats(const char *bundle, const dcr_encode_stats *st, unsigned threads, int verbose) {
  char a[32], b[32];
  fprintf(stderr, "%s: %s, %.4f%% of the target (%s); %llu of %llu elements changed "
          "(%.4f%%), %llu of %llu chunks carried\n",
          bundle, cli_bytes(st->bundle_size, a),
          st->target_size ? 100.0 * (double)st->bundle_size / (double)st->target_size : 0.0,
          cli_bytes(st->target_size, b), (unsigned long long)st->changed_elements,
          (unsigned long long)st->elements,
          st->elements ? 100.0 * (double)st->changed_elements / (double)st->elements : 0.0,
          (unsigned long long)st->changed_chunks, (unsigned long long)st->chunks);
  if (!verbose) return;
  fprintf(stderr, "  threads: %u\n", threads);
  fprintf(stderr, "  format %d.%llu; tensors added %llu, removed %llu, recoded %llu, resized %llu\n",
          DCR_FORMAT_MAJOR, (unsigned long long)st->format_minor,
          (unsigned long long)st->tensors_added, (unsigned long long)st->tensors_removed,
          (unsigned long long)st->tensors_recoded, (unsigned long long)st->tensors_resized);
  for (int e = 1; e < DCR_ENC_COUNT; e++)
    fprintf(stderr, "  %-17s %llu chunks\n", dcr_encoding_name(e), (unsigned long long)chunks_of(st, e));
  if (st->changed_elements)
    fprintf(stderr, "  %.3f bytes per changed element\n",
            (double)st->bundle_size / (double)st->changed_elements);
}
