/*
 * main.c - the dcr program: dispatches to a command.
 */
#include <string.h>

#include "cli.h"

static const struct {
  const char *name;
  int (*run)(int, char **);
  const char *summary;
} commands[] = {
    {"encode", cmd_encode, "make a bundle from a base and a target checkpoint"},
    {"apply", cmd_apply, "rebuild the target from the base and a bundle"},
    {"validate", cmd_validate, "check a bundle, and that it fits a base or target"},
    {"inspect", cmd_inspect, "show a bundle's header, manifest and changes, or a checkpoint's"},
    {"id", cmd_id, "print or check checkpoints' state ids (sha256sum style)"},
    {"synth", cmd_synth, "write a realistic sample base/target pair"},
    {"bench", cmd_bench, "measure bundle size and encode/apply/validate speed"},
};

static void help(FILE *f) {
  fprintf(f, "Usage: dcr COMMAND [OPTIONS] ARGS...\n\n"
             "DCR delta bundles: bit-exact model-weight changes between checkpoints.\n\n"
             "Commands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
  fprintf(f, "\n'dcr COMMAND --help' describes a command. Exit status: 0 success, 1 invalid or\n"
             "non-matching bundle or input, 2 usage error, 3 I/O or system error,\n"
             "130 interrupted. Format: SPEC.md; format version %d.%d.\n",
          DCR_FORMAT_MAJOR, DCR_FORMAT_MINOR);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    help(stderr);
    return CLI_USAGE;
  }
  if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
    help(stdout);
    return CLI_OK;
  }
  if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
    printf("dcr %s (format %d.%d)\n", dcr_version_string(), DCR_FORMAT_MAJOR, DCR_FORMAT_MINOR);
    return CLI_OK;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(argv[1], commands[i].name)) {
      cli_signals_install();
      return commands[i].run(argc - 1, argv + 1);
    }
  return cli_usage(NULL, "unknown command '%s'", argv[1]);
}
