/*
 * cmd_sign.c - dcr sign BUNDLE --key KEY --base BASE --target TARGET [-o OUT],
 * or dcr sign BUNDLE --key KEY --scope bundle [-o OUT]
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
    "Usage: dcr sign BUNDLE --key KEY --base BASE --target TARGET [-o OUT]\n"
    "       dcr sign BUNDLE --key KEY --scope bundle [--base BASE] [--target TARGET]\n"
    "                [-o OUT]\n"
    "Sign a bundle with the secret key KEY (dcr keygen): an Ed25519 signature over\n"
    "the SHA-256 digests of its sections and of its base's and target's tensors\n"
    "(SPEC.md 20), stored in a SIGN section before the footer. The bundle is checked\n"
    "whole first, and BASE and TARGET must be its base and target. With --scope\n"
    "bundle the signature signs the bundle alone (signature format 2.0, SPEC.md\n"
    "20.6): no checkpoint is hashed, and BASE and TARGET, if given, are only\n"
    "checked. A bundle signed already gets one more signature, of the same scope.\n"
    "Without -o the bundle is replaced, atomically: on any failure it is left as it\n"
    "was.\n\n"
    "      --key KEY        the secret key file (mode 0600 or stricter)\n"
    "      --base BASE      the bundle's base checkpoint\n"
    "      --target TARGET  the bundle's target checkpoint\n"
    "      --scope SCOPE    checkpoints (default) or bundle: what is signed\n"
    "  -o, --output OUT     write the signed bundle to OUT instead\n"
    "  -f, --force          overwrite OUT if it exists\n"
    "      --threads N      hashing threads (default: usable CPUs, up to 32)\n"
    "      --no-sync        do not fsync the output\n";

int cmd_sign(int argc, char **argv) {
  static const struct option longs[] = {CLI_COMMON_LONG_OPTIONS,
                                        {"key", required_argument, NULL, OPT_KEY},
                                        {"base", required_argument, NULL, OPT_BASE},
                                        {"target", required_argument, NULL, OPT_TARGET},
                                        {"scope", required_argument, NULL, OPT_SIGN_SCOPE},
                                        {"output", required_argument, NULL, 'o'},
                                        {"force", no_argument, NULL, 'f'},
                                        {"threads", required_argument, NULL, OPT_THREADS},
                                        {"no-sync", no_argument, NULL, OPT_NO_SYNC},
                                        {NULL, 0, NULL, 0}};
  cli_common common;
  cli_common_init(&common, "sign");
  const char *key = NULL, *base = NULL, *target = NULL, *out = NULL;
  int c, stop = 0, force = 0;
  uint64_t v;
  dcr_sign_options opt;
  dcr_sign_options_default(&opt);
  opt.cancel = &cli_interrupted;
  while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT "o:f", longs, NULL)) != -1) {
    if (cli_common_option(&common, c, usage, &stop)) {
      if (stop) return CLI_OK;
      continue;
    }
    switch (c) {
      case OPT_KEY: key = optarg; break;
      case OPT_BASE: base = optarg; break;
      case OPT_TARGET: target = optarg; break;
      case OPT_SIGN_SCOPE:
        if (cli_parse_sign_scope(optarg, &opt.scope))
          return cli_usage("sign", "--scope is checkpoints or bundle, not '%s'", optarg);
        break;
      case 'o': out = optarg; break;
      case 'f': force = 1; break;
      case OPT_NO_SYNC: opt.no_sync = 1; break;
      case OPT_THREADS:
        if (cli_parse_uint(optarg, 1024, &v)) return cli_usage("sign", "bad --threads '%s'", optarg);
        opt.threads = (unsigned)v;
        break;
      default: return cli_bad_option("sign", c, argv);
    }
  }
  if (cli_arg_count("sign", argc, argv, 1, 1, "one BUNDLE")) return CLI_USAGE;
  int both = opt.scope == DCR_SIGN_CHECKPOINTS; /* checkpoints to hash */
  if (!key || (both && (!base || !target)))
    return cli_usage("sign", "missing %s", !key ? "--key KEY" : !base ? "--base BASE" : "--target TARGET");
  const char *bundle = argv[optind];
  char dirs[2][4096];
  const char *inputs[3] = {bundle};
  size_t n = 1;
  if (base && cli_check_checkpoint(inputs[n++] = base = cli_checkpoint_path(base, dirs[0], sizeof dirs[0])))
    return CLI_USAGE;
  if (target &&
      cli_check_checkpoint(inputs[n++] = target = cli_checkpoint_path(target, dirs[1], sizeof dirs[1])))
    return CLI_USAGE;
  if (!strcmp(bundle, "-")) return cli_usage("sign", "BUNDLE must be a file: it is read twice");
  if (out) {
    if (!strcmp(out, "-")) return cli_usage("sign", "-o must name a file");
    if (cli_check_output(out, force, inputs, n)) return CLI_USAGE;
  }
  dcr_detail d;
  int err = dcr_sign_file(bundle, key, base, target, out, &opt, &d);
  if (err) {
    cli_report(bundle, err, &d);
    return cli_exit_code(err);
  }
  if (!common.quiet) {
    cli_put_escaped(stderr, out ? out : bundle, strlen(out ? out : bundle));
    fputs(": signed\n", stderr);
  }
  return CLI_OK;
}
