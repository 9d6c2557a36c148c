/*
 * cmd_validate.c - dcr validate BUNDLE [--base BASE] [--target TARGET] [--json]
 */
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
    "Usage: dcr validate BUNDLE [--base BASE] [--target TARGET] [--json] [--threads N]\n"
    "Check a bundle's structure, every checksum and limit, and decode every chunk;\n"
    "every bad chunk is reported, not only the first.\n"
    "With --base, also check that it applies to BASE (nothing is written); with\n"
    "--target, that TARGET is exactly the checkpoint it produces.\n"
    "Exit status: 0 valid, 1 invalid or not matching, 3 could not run.\n\n"
    "      --base BASE      check that the bundle applies to BASE\n"
    "      --target TARGET  check that TARGET is the bundle's target\n"
    "      --require-signature KEY\n"
    "                       require a signature by the public key KEY (repeatable:\n"
    "                       any one of them), checked after the structure and\n"
    "                       before the chunks: the stage \"signature\" (SPEC.md 20)\n"
    "      --json           print one JSON document on stdout (see README)\n"
    "      --threads N      worker threads (default: usable CPUs, up to 32)\n"
    CLI_HTTP_HELP;

typedef struct {
  int json, quiet, worst;
  json_t *errors;
  const char *bundle;
  const char *stage; /* of the check being made: structure, chunks, base, target */
} report;

/* Records one check's outcome; returns 1 if it passed. */
static int record(report *rp, int code, const dcr_detail *d) {
  if (!code) return 1;
  int exit_code = cli_exit_code(code);
  if (exit_code == CLI_USAGE) exit_code = CLI_IO;
  if (exit_code > rp->worst || rp->worst == CLI_OK) rp->worst = exit_code;
  if (rp->json) json_array_append_new(rp->errors, cli_error_json(code, rp->stage, d));
  else cli_report(rp->bundle, code, d);
  return 0;
}

/* dcr_reader_verify_all's callback: every bad chunk is one error. */
static int record_chunk(void *opaque, const dcr_detail *d) {
  record(opaque, d->code, d);
  return 0;
}

/* Structure problems stop at the first (past it, offsets mean nothing); chunk
 * problems are all reported; base and target checks stop at their first. */
static int check(report *rp, const char *stage, int code, const dcr_detail *d) {
  rp->stage = stage;
  return record(rp, code, d);
}

static json_t *check_json(int ran, int ok) { return ran ? json_boolean(ok) : json_null(); }

int cmd_validate(int argc, char **argv) {
  static const struct option longs[] = {CLI_COMMON_LONG_OPTIONS,
                                        {"base", required_argument, NULL, OPT_BASE},
                                        {"target", required_argument, NULL, OPT_TARGET},
                                        {"json", no_argument, NULL, OPT_JSON},
                                        {"threads", required_argument, NULL, OPT_THREADS},
                                        {"require-signature", required_argument, NULL, OPT_REQUIRE_SIGNATURE},
                                        CLI_HTTP_LONG_OPTIONS,
                                        {NULL, 0, NULL, 0}};
  cli_common common;
  cli_common_init(&common, "validate");
  const char *base = NULL, *target = NULL;
  int json = 0, c, stop = 0, rc;
  uint64_t v;
  dcr_keyring *ring = NULL; /* --require-signature: the trusted keys */
  dcr_apply_options aopt;
  dcr_apply_options_default(&aopt);
  aopt.cancel = &cli_interrupted;
  while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT, longs, NULL)) != -1) {
    if (cli_common_option(&common, c, usage, &stop)) {
      if (stop) return dcr_keyring_free(ring), CLI_OK;
      continue;
    }
    if (cli_http_option("validate", c)) continue;
    switch (c) {
      case OPT_REQUIRE_SIGNATURE:
        if ((rc = cli_trust_key(&ring, "validate", optarg))) return dcr_keyring_free(ring), rc;
        break;
      case OPT_BASE: base = optarg; break;
      case OPT_TARGET: target = optarg; break;
      case OPT_JSON: json = 1; break;
      case OPT_THREADS:
        if (cli_parse_uint(optarg, 1024, &v))
          return cli_usage("validate", "bad --threads '%s'", optarg);
        aopt.threads = (unsigned)v;
        break;
      default: return cli_bad_option("validate", c, argv);
    }
  }
  if (cli_arg_count("validate", argc, argv, 1, 1, "one BUNDLE")) return CLI_USAGE;
  char base_dir[4096], target_dir[4096]; /* a set may be named by its index file */
  if (base) base = cli_checkpoint_path(base, base_dir, sizeof base_dir);
  if (target) target = cli_checkpoint_path(target, target_dir, sizeof target_dir);
  if ((base && cli_check_checkpoint(base)) || (target && cli_check_checkpoint(target))) return CLI_USAGE;
  char shown[256];
  cli_http_read_whole();
  report rp = {json, common.quiet, CLI_OK, json_array(), cli_shown(argv[optind], shown, sizeof shown),
               "structure"};
  dcr_reader *r = NULL;
  void *mem = NULL;
  dcr_detail d;
  int structure = check(&rp, "structure", cli_open_bundle(argv[optind], &r, &mem, &d), &d);
  /* the signature stage (SPEC.md §15.1, §20.4): nothing unsigned is decoded */
  int signature = structure && (!ring || check(&rp, "signature", cli_check_signature(r, ring, &d), &d));
  cli_progress_state progress = {.what = "validating"};
  if (structure) {
    dcr_reader_set_threads(r, aopt.threads);
    dcr_reader_set_cancel(r, &cli_interrupted);
    if (common.progress) dcr_reader_set_progress(r, cli_progress, &progress);
  }
  if (common.progress) aopt.progress = cli_progress, aopt.progress_opaque = &progress;
  rp.stage = "chunks";
  int chunks = signature && dcr_reader_verify_all(r, record_chunk, &rp) == DCR_OK;
  cli_progress_end(&progress);
  if (chunks && common.verbose && !json) fprintf(stderr, "%s: structure and chunks valid\n", rp.bundle);
  progress.what = "checking the base";
  int base_rc = chunks && base ? dcr_apply(r, base, NULL, &aopt, &d) : DCR_OK;
  cli_progress_end(&progress);
  int base_ok = chunks && base && check(&rp, "base", base_rc, &d);
  if (!json && base_rc == DCR_E_BASE_MISMATCH) cli_explain_mismatch(r, base, base_rc);
  /* An apply succeeds on the bundle's target too (§10.2): say which it was. A base
   * fails this check at its first changed tensor, so it costs little. */
  dcr_bundle_info info;
  if (structure) dcr_reader_info(r, &info);
  int base_is_target = base_ok && memcmp(info.base_state, info.target_state, 16) &&
                       dcr_check_target(r, base, &aopt, NULL) == DCR_OK;
  progress.what = "checking the target";
  int target_rc = chunks && target ? dcr_check_target(r, target, &aopt, &d) : DCR_OK;
  cli_progress_end(&progress);
  int target_ok = chunks && target && check(&rp, "target", target_rc, &d);
  if (!json && target_rc == DCR_E_TARGET_MISMATCH) cli_explain_mismatch(r, target, target_rc);
  int valid = rp.worst == CLI_OK;
  if (json) {
    json_t *doc = json_pack("{s:s, s:b, s:o}", "file", rp.bundle, "valid", valid, "errors",
                            rp.errors);
    json_object_set_new(doc, "checks",
                        json_pack("{s:b, s:o, s:o, s:o, s:o}", "structure", structure, "signature",
                                  check_json(structure && ring, signature), "chunks",
                                  check_json(signature, chunks), "base",
                                  check_json(chunks && base, base_ok), "target",
                                  check_json(chunks && target, target_ok)));
    if (base_ok) json_object_set_new(doc, "base_is_target", json_boolean(base_is_target));
    cli_print_json(doc);
  } else {
    json_decref(rp.errors);
    if (valid && !common.quiet)
      printf("%s: valid (%llu chunks%s%s)\n", rp.bundle, (unsigned long long)info.chunk_count,
             !base             ? ""
             : base_is_target ? ", the base given is already its target: applying it changes nothing"
                              : ", applies to the base",
             target ? ", produces the target" : "");
  }
  dcr_reader_free(r);
  free(mem);
  dcr_keyring_free(ring);
  return rp.worst;
}
