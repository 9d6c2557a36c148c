/*
 * cmd_verify.c - dcr verify BUNDLE --pubkey KEY [--base BASE] [--target TARGET],
 * and the trusted keys that apply and validate take with --require-signature.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
    "Usage: dcr verify BUNDLE --pubkey KEY [--pubkey KEY...] [--base BASE] [--target TARGET]\n"
    "Check that a bundle is signed by a trusted key and is, byte for byte, what was\n"
    "signed (SPEC.md 20): its structure, then its SIGN section, every signature by a\n"
    "trusted key, and the SHA-256 digest of every section. A bundle without a\n"
    "signature fails. With --base or --target, also check that the checkpoint has the\n"
    "signed SHA-256 digests (it reads the checkpoint whole: for one that came from\n"
    "storage others can write). Chunks are decoded by validate and apply, which take\n"
    "--require-signature KEY to do this first.\n"
    "Exit status: 0 signed and intact, 1 not, 3 could not run.\n\n"
    "      --pubkey KEY     a trusted public key file (repeatable)\n"
    "      --base BASE      check BASE against the signed base digests\n"
    "      --target TARGET  check TARGET against the signed target digests\n"
    "      --threads N      hashing threads (default: usable CPUs, up to 32)\n"
    "      --json           print one JSON document on stdout\n"
    CLI_HTTP_HELP;

int cli_trust_key(dcr_keyring **ring, const char *command, const char *path) {
  dcr_detail d;
  int err = *ring ? DCR_OK : dcr_keyring_create(ring, &d);
  if (!err) err = dcr_keyring_add_file(*ring, path, NULL, &d);
  if (!err) return CLI_OK;
  cli_report(path, err, &d);
  return err == DCR_E_ARGUMENT ? cli_usage(command, "bad public key file '%s'", path) : cli_exit_code(err);
}

int cli_check_signature(dcr_reader *r, const dcr_keyring *ring, dcr_detail *d) {
  return ring ? dcr_reader_verify_signature(r, ring, NULL, d) : DCR_OK;
}

int cmd_verify(int argc, char **argv) {
  static const struct option longs[] = {CLI_COMMON_LONG_OPTIONS,
                                        {"pubkey", required_argument, NULL, OPT_PUBKEY},
                                        {"base", required_argument, NULL, OPT_BASE},
                                        {"target", required_argument, NULL, OPT_TARGET},
                                        {"threads", required_argument, NULL, OPT_THREADS},
                                        {"json", no_argument, NULL, OPT_JSON},
                                        CLI_HTTP_LONG_OPTIONS,
                                        {NULL, 0, NULL, 0}};
  cli_common common;
  cli_common_init(&common, "verify");
  const char *base = NULL, *target = NULL;
  int c, stop = 0, json = 0, rc;
  unsigned threads = 0;
  uint64_t v;
  dcr_keyring *ring = NULL;
  while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT, longs, NULL)) != -1) {
    if (cli_common_option(&common, c, usage, &stop)) {
      if (stop) return dcr_keyring_free(ring), CLI_OK;
      continue;
    }
    if (cli_http_option("verify", c)) continue;
    switch (c) {
      case OPT_PUBKEY:
        if ((rc = cli_trust_key(&ring, "verify", optarg))) return dcr_keyring_free(ring), rc;
        break;
      case OPT_BASE: base = optarg; break;
      case OPT_TARGET: target = optarg; break;
      case OPT_JSON: json = 1; break;
      case OPT_THREADS:
        if (cli_parse_uint(optarg, 1024, &v))
          return dcr_keyring_free(ring), cli_usage("verify", "bad --threads '%s'", optarg);
        threads = (unsigned)v;
        break;
      default: return dcr_keyring_free(ring), cli_bad_option("verify", c, argv);
    }
  }
  if (cli_arg_count("verify", argc, argv, 1, 1, "one BUNDLE")) return dcr_keyring_free(ring), CLI_USAGE;
  if (!ring) return cli_usage("verify", "missing --pubkey KEY: a signature proves nothing without a trusted key");
  char dirs[2][4096];
  if (base) base = cli_checkpoint_path(base, dirs[0], sizeof dirs[0]);
  if (target) target = cli_checkpoint_path(target, dirs[1], sizeof dirs[1]);
  if ((base && cli_check_checkpoint(base)) || (target && cli_check_checkpoint(target)))
    return dcr_keyring_free(ring), CLI_USAGE;
  char shown[256];
  const char *bundle = cli_shown(argv[optind], shown, sizeof shown), *stage = "structure";
  dcr_reader *r = NULL;
  void *mem = NULL;
  dcr_detail d;
  dcr_signature_result res;
  memset(&res, 0, sizeof res);
  int err = cli_open_bundle(argv[optind], &r, &mem, &d);
  if (!err) stage = "signature", err = dcr_reader_verify_signature(r, ring, &res, &d);
  if (!err && base) stage = "base", err = dcr_reader_verify_signed_checkpoint(r, ring, base, 0, threads, &d);
  if (!err && target)
    stage = "target", err = dcr_reader_verify_signed_checkpoint(r, ring, target, 1, threads, &d);
  char hex[2 * DCR_KEY_ID_SIZE + 1];
  cli_hex(res.key_id, sizeof res.key_id, hex);
  if (json) {
    json_t *doc = json_pack("{s:s, s:b, s:b, s:I, s:I}", "file", bundle, "verified", !err, "signed",
                            res.present, "signatures", (json_int_t)res.signature_count, "trusted",
                            (json_int_t)res.verified_count);
    json_object_set_new(doc, "key_id", res.verified_count ? json_string(hex) : json_null());
    json_object_set_new(doc, "scope", !res.signature_count ? json_null()
                                      : json_string(res.scope == DCR_SIGN_BUNDLE ? "bundle" : "checkpoints"));
    json_object_set_new(doc, "error", err ? cli_error_json(err, stage, &d) : json_null());
    cli_print_json(doc);
  } else if (err) {
    cli_report(bundle, err, &d);
  } else if (!common.quiet) {
    cli_put_escaped(stdout, bundle, strlen(bundle));
    printf(": signed by trusted key %s (%llu of %llu signatures trusted%s)%s%s\n", hex,
           (unsigned long long)res.verified_count, (unsigned long long)res.signature_count,
           res.scope == DCR_SIGN_BUNDLE ? "; the bundle alone" : "",
           base ? ", the base has the signed digests" : "", target ? ", the target has the signed digests" : "");
  }
  dcr_reader_free(r);
  free(mem);
  dcr_keyring_free(ring);
  return cli_exit_code(err);
}
