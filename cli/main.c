/*
 * main.c - the dcr program: dispatches to a command.
 */
#include <string.h>
#include <sys/resource.h>

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
    {"history", cmd_history, "keep a run's bundles in a tar or zip archive; rebuild any step"},
    {"squash", cmd_squash, "compose consecutive bundles into one"},
    {"keygen", cmd_keygen, "make an Ed25519 key pair for signing bundles"},
    {"sign", cmd_sign, "sign a bundle (Ed25519 over SHA-256 digests)"},
    {"verify", cmd_verify, "check a bundle's signature against trusted public keys"},
};

static void help(FILE *f) {
  fprintf(f, "Usage: dcr COMMAND [OPTIONS] ARGS...\n"
             "       dcr help [COMMAND]\n"
             "       dcr --version\n\n"
             "DCR delta bundles: bit-exact model-weight changes between checkpoints.\n\n"
             "Commands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
  fprintf(f, "  %-9s %s\n", "help", "show a command's help, as 'dcr COMMAND --help' does");
  fprintf(f, "\nOptions:\n"
             "  -h, --help     show this help\n"
             "  -V, --version  print the library and format versions\n");
  fprintf(f, "\n'dcr help COMMAND' or 'dcr COMMAND --help' describes a command; 'man dcr' all of\n"
             "them. Exit status: 0 success, 1 invalid or non-matching bundle or input, 2 usage\n"
             "error, 3 I/O or system error, 130 interrupted. Format: SPEC.md; format version %d.%d.\n",
          DCR_FORMAT_MAJOR, DCR_FORMAT_MINOR);
}

/* 'dcr help [COMMAND]': the command's own --help, on stdout, exit 0. */
static int help_command(int argc, char **argv) {
  if (argc < 3) {
    help(stdout);
    return CLI_OK;
  }
  if (argc > 3)
    return cli_usage(NULL, "too many arguments (from '%s' on): expected 'dcr help [COMMAND]'", argv[3]);
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(argv[2], commands[i].name)) {
      char name[16], opt[] = "--help";
      snprintf(name, sizeof name, "%s", commands[i].name);
      char *args[] = {name, opt, NULL};
      return commands[i].run(2, args);
    }
  if (!strcmp(argv[2], "help") || !strcmp(argv[2], "-h") || !strcmp(argv[2], "--help")) {
    help(stdout);
    return CLI_OK;
  }
  return cli_usage(NULL, "unknown command '%s'", argv[2]);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    help(stderr);
    return CLI_USAGE;
  }
  if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    help(stdout);
    return CLI_OK;
  }
  if (!strcmp(argv[1], "help")) return help_command(argc, argv);
  if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
    printf("dcr %s (format %d.%d)\n", dcr_version_string(), DCR_FORMAT_MAJOR, DCR_FORMAT_MINOR);
    return CLI_OK;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(argv[1], commands[i].name)) {
      cli_signals_install();
      /* A model directory keeps each member file open (two sets to encode): a
       * model of hundreds of shards needs more than the usual soft limit of 1024. */
      struct rlimit files;
      if (!getrlimit(RLIMIT_NOFILE, &files) && files.rlim_cur < files.rlim_max) {
        files.rlim_cur = files.rlim_max;
        setrlimit(RLIMIT_NOFILE, &files);
      }
      int rc = commands[i].run(argc - 1, argv + 1);
      /* A failure after an interrupt is the interrupt's doing (an open() of a FIFO
       * that returned EINTR, a write cut short): it exits as interrupted. Work that
       * had finished, its output in place, keeps its own status. */
      return rc != CLI_OK && cli_interrupted ? CLI_INTERRUPTED : rc;
    }
  return cli_usage(NULL, "unknown command '%s'", argv[1]);
}
