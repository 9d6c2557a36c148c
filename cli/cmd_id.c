/*
 * cmd_id.c - dcr id FILE... | dcr id -c LIST: checkpoints' state ids (SPEC.md §7),
 * the ids a bundle names as its base and target, printed and checked the way
 * sha256sum prints and checks digests.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
    "Usage: dcr id [--raw] [--json] [--threads N] FILE...\n"
    "       dcr id [--raw] [--threads N] -c LIST\n"
    "Print each checkpoint's state id (SPEC.md section 7), the id a bundle names\n"
    "as its base and its target, as \"<32 hex digits>  FILE\" lines, the way\n"
    "sha256sum prints digests. The id depends on the tensors only (names, dtypes,\n"
    "shapes, bytes): the same tensors in another layout have the same id.\n"
    "FILE may be - for standard input, if that is a regular file, or a model\n"
    "directory (or its model.safetensors.index.json): a checkpoint set, whose id is\n"
    "its shards' tensors', however they are sharded (config and tokenizer files are\n"
    "not part of it), so a model has one id saved whole or in shards.\n"
    "Exit status: 0 success, 1 invalid checkpoint or an id that did not match,\n"
    "2 usage, 3 a file could not be read.\n\n"
    "      --raw            read the files as raw (one U8 tensor), not safetensors\n"
    "      --json           print a JSON array of {file, state_id, kind, tensors, bytes}\n"
    "  -c, --check LIST     read \"ID  FILE\" lines from LIST (- for standard input)\n"
    "                       and print \"FILE: OK\" or \"FILE: FAILED\" for each;\n"
    "                       with -q, only the failures\n"
    "      --threads N      worker threads (default: usable CPUs, up to 32)\n";

typedef struct {
  int kind, json, quiet, progress;
  unsigned threads;
} id_options;

/* The state id of one file; on failure, the error is in *d (not yet reported). */
static int state_of(const char *path, const id_options *o, uint8_t id[16],
                    dcr_checkpoint_summary *info, dcr_detail *d) {
  int from_stdin = !strcmp(path, "-");
  dcr_checkpoint *ck = NULL;
  char dir[4096];
  if (!from_stdin) path = cli_checkpoint_path(path, dir, sizeof dir);
  int kind = from_stdin ? o->kind : cli_checkpoint_kind(path, o->kind == DCR_KIND_RAW);
  int rc = dcr_checkpoint_open(&ck, from_stdin ? "/dev/stdin" : path, kind, &cli_limits, d);
  if (!rc) {
    dcr_checkpoint_info(ck, info);
    cli_progress_state progress = {.what = path};
    if (o->progress) dcr_checkpoint_set_progress(ck, cli_progress, &progress);
    rc = dcr_checkpoint_state_id(ck, o->threads, id, d);
    cli_progress_end(&progress);
  }
  dcr_checkpoint_free(ck);
  if (rc && from_stdin) snprintf(d->file, sizeof d->file, "(stdin)");
  return rc;
}

/* A name holding a backslash or a newline is written escaped, and its line starts
 * with a backslash, as sha256sum does. */
static int needs_escape(const char *path) { return strpbrk(path, "\\\n") != NULL; }

static void print_name(const char *path, int escape) {
  for (const char *p = path; *p; p++) {
    if (escape && *p == '\\') fputs("\\\\", stdout);
    else if (escape && *p == '\n') fputs("\\n", stdout);
    else putchar(*p);
  }
}

static int worse(int a, int b) { return a > b ? a : b; } /* CLI_IO over CLI_INVALID */

static int print_ids(char **files, int count, const id_options *o) {
  int rc = CLI_OK;
  json_t *all = o->json ? json_array() : NULL;
  for (int i = 0; i < count; i++) {
    uint8_t id[16];
    char hex[33];
    dcr_checkpoint_summary info = {0};
    dcr_detail d;
    int err = state_of(files[i], o, id, &info, &d);
    if (err) {
      cli_report(files[i], err, &d);
      rc = worse(rc, cli_exit_code(err));
      if (all)
        json_array_append_new(all, json_pack("{s:s, s:n, s:s, s:s}", "file", files[i],
                                             "state_id", "error", dcr_error_name(err),
                                             "message", d.message));
      continue;
    }
    cli_hex(id, 16, hex);
    if (all) {
      json_array_append_new(all, json_pack("{s:s, s:s, s:s, s:I, s:I}", "file", files[i],
                                           "state_id", hex, "kind",
                                           cli_kind_name(info.kind),
                                           "tensors", (json_int_t)info.tensor_count, "bytes",
                                           (json_int_t)info.file_size));
      continue;
    }
    int escape = needs_escape(files[i]);
    printf("%s%s  ", escape ? "\\" : "", hex);
    print_name(files[i], escape);
    putchar('\n');
  }
  if (all) {
    cli_print_json(all);
  }
  return rc;
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') return (c | 0x20) - 'a' + 10;
  return -1;
}

/* "<32 hex>  FILE" or "<32 hex> *FILE", or either after a backslash with FILE
 * escaped. Fills id and points *path into line; returns 0, or -1 if malformed. */
static int parse_line(char *line, size_t length, uint8_t id[16], char **path) {
  if (length && line[length - 1] == '\n') line[--length] = '\0';
  if (memchr(line, '\0', length)) return -1;
  int escaped = line[0] == '\\';
  char *p = line + escaped;
  for (int i = 0; i < 16; i++) {
    int hi = hex_digit(p[2 * i]), lo = hi < 0 ? -1 : hex_digit(p[2 * i + 1]);
    if (lo < 0) return -1;
    id[i] = (uint8_t)(hi << 4 | lo);
  }
  p += 32;
  if (p[0] != ' ' || (p[1] != ' ' && p[1] != '*') || !p[2]) return -1;
  *path = p += 2;
  if (!escaped) return 0;
  char *w = p;
  for (; *p; p++) {
    if (*p != '\\') *w++ = *p;
    else if (*++p == '\\') *w++ = '\\';
    else if (*p == 'n') *w++ = '\n';
    else return -1;
  }
  *w = '\0';
  return 0;
}

static void warn(unsigned long n, const char *one, const char *many) {
  if (n) fprintf(stderr, "dcr: WARNING: %lu %s\n", n, n == 1 ? one : many);
}

static int check_list(const char *list, const id_options *o) {
  FILE *f = strcmp(list, "-") ? fopen(list, "r") : stdin;
  if (!f) {
    fprintf(stderr, "dcr: %s: DCR_E_IO: cannot open: %s\n", list, strerror(errno));
    return CLI_IO;
  }
  const char *name = f == stdin ? "(stdin)" : list;
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  unsigned long number = 0, good = 0, failed = 0, unread = 0, malformed = 0;
  while ((n = getline(&line, &cap, f)) >= 0) {
    uint8_t want[16], got[16];
    char *path;
    number++;
    if (parse_line(line, (size_t)n, want, &path)) {
      fprintf(stderr, "dcr: %s:%lu: improperly formatted line (expected \"ID  FILE\")\n", name,
              number);
      malformed++;
      continue;
    }
    good++;
    dcr_checkpoint_summary info;
    dcr_detail d;
    int err = state_of(path, o, got, &info, &d), escape = needs_escape(path);
    if (err) cli_report(path, err, &d);
    int io = err && cli_exit_code(err) == CLI_IO, ok = !err && !memcmp(got, want, 16);
    unread += (unsigned long)io;
    failed += (unsigned long)(!ok && !io);
    if (ok && o->quiet) continue;
    fputs(escape ? "\\" : "", stdout);
    print_name(path, escape);
    puts(ok ? ": OK" : io ? ": FAILED open or read" : ": FAILED");
  }
  int read_error = ferror(f);
  free(line);
  if (f != stdin) fclose(f);
  if (read_error) {
    fprintf(stderr, "dcr: %s: DCR_E_IO: read failed\n", name);
    return CLI_IO;
  }
  if (!good) fprintf(stderr, "dcr: %s: no properly formatted state id lines found\n", name);
  warn(malformed, "line is improperly formatted", "lines are improperly formatted");
  warn(unread, "listed file could not be read", "listed files could not be read");
  warn(failed, "computed state id did NOT match", "computed state ids did NOT match");
  if (unread) return CLI_IO;
  return failed || malformed || !good ? CLI_INVALID : CLI_OK;
}

int cmd_id(int argc, char **argv) {
  static const struct option longs[] = {CLI_COMMON_LONG_OPTIONS,
                                        {"raw", no_argument, NULL, OPT_RAW},
                                        {"json", no_argument, NULL, OPT_JSON},
                                        {"check", required_argument, NULL, 'c'},
                                        {"threads", required_argument, NULL, OPT_THREADS},
                                        {NULL, 0, NULL, 0}};
  cli_common common;
  cli_common_init(&common, "id");
  id_options o = {.kind = DCR_KIND_SAFETENSORS};
  const char *list = NULL;
  int c, stop = 0;
  uint64_t v;
  while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT "c:", longs, NULL)) != -1) {
    if (cli_common_option(&common, c, usage, &stop)) {
      if (stop) return CLI_OK;
      continue;
    }
    switch (c) {
      case OPT_RAW: o.kind = DCR_KIND_RAW; break;
      case OPT_JSON: o.json = 1; break;
      case 'c': list = optarg; break;
      case OPT_THREADS:
        if (cli_parse_uint(optarg, 1024, &v)) return cli_usage("id", "bad --threads '%s'", optarg);
        o.threads = (unsigned)v;
        break;
      default: return cli_bad_option("id", c, argv);
    }
  }
  o.quiet = common.quiet;
  o.progress = common.progress;
  /* Nothing is written: an interrupt may end the process where it stands. */
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  if (list) {
    if (optind != argc) return cli_usage("id", "-c LIST takes no FILE operands");
    if (o.json) return cli_usage("id", "--json does not go with -c");
    return check_list(list, &o);
  }
  if (cli_arg_count("id", argc, argv, 1, -1, "one or more FILEs")) return CLI_USAGE;
  return print_ids(argv + optind, argc - optind, &o);
}
