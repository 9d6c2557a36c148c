/*
 * cmd_keygen.c - dcr keygen NAME: an Ed25519 key pair for signing bundles.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
    "Usage: dcr keygen NAME\n"
    "Make an Ed25519 key pair for signing bundles (dcr sign, dcr encode --sign):\n"
    "the secret key NAME.key (mode 0600) and the public key NAME.pub, text files\n"
    "(README, \"Signed bundles\"). Neither file may exist. Prints the key id; the\n"
    "secret key is never printed. Give NAME.pub to the readers that check\n"
    "signatures (dcr verify --pubkey, --require-signature).\n\n"
    "      --json           print the key id and the two paths as one JSON document\n";

int cmd_keygen(int argc, char **argv) {
  static const struct option longs[] = {CLI_COMMON_LONG_OPTIONS, {"json", no_argument, NULL, OPT_JSON},
                                        {NULL, 0, NULL, 0}};
  cli_common common;
  cli_common_init(&common, "keygen");
  int c, stop = 0, json = 0;
  while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT, longs, NULL)) != -1) {
    if (cli_common_option(&common, c, usage, &stop)) {
      if (stop) return CLI_OK;
      continue;
    }
    if (c == OPT_JSON) json = 1;
    else return cli_bad_option("keygen", c, argv);
  }
  if (cli_arg_count("keygen", argc, argv, 1, 1, "one NAME")) return CLI_USAGE;
  char secret[4096], public[4096];
  const char *name = argv[optind];
  if (!*name || (size_t)snprintf(secret, sizeof secret, "%s.key", name) >= sizeof secret ||
      (size_t)snprintf(public, sizeof public, "%s.pub", name) >= sizeof public)
    return cli_usage("keygen", "bad NAME '%s'", name);
  uint8_t id[DCR_KEY_ID_SIZE];
  char hex[2 * DCR_KEY_ID_SIZE + 1];
  dcr_detail d;
  int err = dcr_keygen(secret, public, id, &d);
  if (err) {
    cli_report(NULL, err, &d);
    return cli_exit_code(err);
  }
  cli_hex(id, sizeof id, hex);
  if (json) {
    cli_print_json(json_pack("{s:s, s:s, s:s}", "key_id", hex, "secret_key", secret, "public_key", public));
  } else if (!common.quiet) {
    fputs("key id ", stdout);
    fputs(hex, stdout);
    fputs("\nsecret key: ", stdout);
    cli_put_escaped(stdout, secret, strlen(secret));
    fputs(" (mode 0600: keep it private)\npublic key: ", stdout);
    cli_put_escaped(stdout, public, strlen(public));
    fputs("\n", stdout);
  }
  return CLI_OK;
}
