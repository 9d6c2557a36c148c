/*
 * cmd_apply.c - dcr apply BASE BUNDLE -o OUT
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char usage[] =
    "Usage: dcr apply BASE BUNDLE -o OUT [OPTIONS]\n"
    "Rebuild the target checkpoint from BASE and BUNDLE, byte for byte. OUT appears\n"
    "only once every hash has matched; on any failure nothing is left at OUT.\n"
    "BUNDLE may be - for standard input, OUT - for standard output.\n\n"
    "  -o, --output OUT     where to write the target (required)\n"
    "      --threads N      worker threads (default: all cores)\n"
    "      --no-sync        do not fsync OUT before renaming it into place\n"
    "  -f, --force          replace OUT if it exists\n";

/* Standard output gets the target only after it has been checked, so it goes to a
 * temporary file first. */
static int copy_to_stdout(const char *path) {
  FILE *f = fopen(path, "rb");
  char buf[1 << 16];
  size_t n;
  int ok = f != NULL;
  while (ok && (n = fread(buf, 1, sizeof buf, f)) > 0) ok = fwrite(buf, 1, n, stdout) == n;
  ok = ok && !ferror(f) && fflush(stdout) == 0;
  if (f) fclose(f);
  if (!ok) fprintf(stderr, "dcr: (stdout): DCR_E_IO: cannot write: %s\n", strerror(errno));
  return ok ? CLI_OK : CLI_IO;
}

int cmd_apply(int argc, char **argv) {
  static const struct option longs[] = {CLI_COMMON_LONG_OPTIONS,
                                        {"output", required_argument, NULL, 'o'},
                                        {"force", no_argument, NULL, 'f'},
                                        {"threads", required_argument, NULL, OPT_THREADS},
                                        {"no-sync", no_argument, NULL, OPT_NO_SYNC},
                                        {NULL, 0, NULL, 0}};
  cli_common common;
  cli_common_init(&common);
  dcr_apply_options opt;
  dcr_apply_options_default(&opt);
  const char *out = NULL;
  int force = 0, c, stop = 0;
  uint64_t v;
  while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT "o:f", longs, NULL)) != -1) {
    if (cli_common_option(&common, c, usage, &stop)) {
      if (stop) return CLI_OK;
      continue;
    }
    switch (c) {
      case 'o': out = optarg; break;
      case 'f': force = 1; break;
      case OPT_THREADS:
        if (cli_parse_uint(optarg, 1024, &v)) return cli_usage("apply", "bad --threads '%s'", optarg);
        opt.threads = (unsigned)v;
        break;
      case OPT_NO_SYNC: opt.sync = 0; break;
      default: return cli_usage("apply", "invalid option");
    }
  }
  if (argc - optind != 2) return cli_usage("apply", "expected BASE and BUNDLE");
  if (!out) return cli_usage("apply", "missing -o OUT");
  int rc = cli_check_output(out, force);
  if (rc) return rc;
  const char *base = argv[optind], *bundle = argv[optind + 1];
  dcr_reader *r;
  void *mem;
  dcr_detail d;
  int err = cli_open_bundle(bundle, &r, &mem, &d);
  if (err) {
    cli_report(bundle, err, &d);
    free(mem);
    return cli_exit_code(err);
  }
  char dir[4096], tmp[4200] = "";
  const char *dest = out, *tmpdir = getenv("TMPDIR");
  if (!strcmp(out, "-")) {
    snprintf(dir, sizeof dir, "%s/dcr-apply-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    if (!mkdtemp(dir)) {
      fprintf(stderr, "dcr: DCR_E_IO: cannot create a temporary directory: %s\n", strerror(errno));
      dcr_reader_free(r), free(mem);
      return CLI_IO;
    }
    snprintf(tmp, sizeof tmp, "%s/target", dir);
    dest = tmp;
  }
  cli_progress_state progress = {"applying", 0, 0};
  if (common.progress) opt.progress = cli_progress, opt.progress_opaque = &progress;
  opt.cancel = &cli_interrupted;
  err = dcr_apply(r, base, dest, &opt, &d);
  cli_progress_end(&progress);
  if (err) cli_report(bundle, err, &d);
  rc = cli_exit_code(err);
  if (!err && tmp[0]) rc = copy_to_stdout(tmp);
  if (tmp[0]) unlink(tmp), rmdir(dir);
  if (!err && !common.quiet && !tmp[0]) {
    dcr_bundle_info info;
    char a[32];
    dcr_reader_info(r, &info);
    fprintf(stderr, "%s: %s, target state verified\n", out, cli_bytes(info.target_size, a));
  }
  dcr_reader_free(r);
  free(mem);
  return rc;
}
