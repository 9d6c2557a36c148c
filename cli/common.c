/*
 * common.c - option handling, error reports and number parsing shared by the
 * commands.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../format/xxh.h"
#include "cli.h"

dcr_limits cli_limits;

void cli_common_init(cli_common *c, const char *command) {
  dcr_limits_default(&cli_limits);
  cli_limits.cancel = &cli_interrupted; /* what is read, from the first byte */
  c->command = command;
  c->quiet = 0;
  c->verbose = 0;
  c->progress = isatty(STDERR_FILENO);
}

int cli_common_option(cli_common *c, int opt, const char *usage, int *exit_now) {
  switch (opt) {
    case 'h':
      fputs(usage, stdout);
      fputs(CLI_COMMON_HELP, stdout);
      *exit_now = 1;
      return 1;
    case 'q': c->quiet = 1, c->verbose = 0, c->progress = 0; return 1;
    case 'v': c->verbose = 1, c->quiet = 0; return 1;
    case OPT_NO_PROGRESS: c->progress = 0; return 1;
    case OPT_MEMORY:
      if (cli_parse_size(optarg, &cli_limits.max_memory) || cli_limits.max_memory < (1u << 20))
        exit(cli_usage(c->command, "bad --memory '%s' (a size of at least 1M, e.g. 512M)", optarg));
      return 1;
    default: return 0;
  }
}

int cli_exit_code(int code) {
  switch (code) {
    case DCR_OK: return CLI_OK;
    case DCR_E_IO:
    case DCR_E_NOMEM:
    case DCR_E_FETCH:   /* the network's fault, not the bundle's: try again later */
    case DCR_E_CHANGED: return CLI_IO;
    case DCR_E_ARGUMENT: return CLI_USAGE;
    case DCR_E_INTERRUPTED: return CLI_INTERRUPTED;
    default: return CLI_INVALID;
  }
}

void cli_put_escaped(FILE *f, const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  for (size_t i = 0, len; i < n; i += len) {
    unsigned c = p[i];
    len = dcr__utf8_char(p + i, n - i);
    /* C0 controls, DEL, and C1 controls (U+0080..U+009F, which a terminal may take
     * as CSI and so on) are escaped; so is the backslash, to keep it unambiguous;
     * and each byte that is not part of a UTF-8 character, which a terminal would
     * show as it pleases (or take with the bytes after it). */
    if (c < 0x20 || c == 0x7f || !len) fprintf(f, "\\x%02x", c), len = 1;
    else if (c == 0xc2 && p[i + 1] <= 0x9f) fprintf(f, "\\u%04x", p[i + 1]);
    else if (c == '\\') fputs("\\\\", f);
    else fwrite(p + i, 1, len, f);
  }
}

static void put_str(FILE *f, const char *s) { cli_put_escaped(f, s, strlen(s)); }

void cli_report(const char *fallback_file, int code, const dcr_detail *d) {
  const char *file = d && d->file[0] ? d->file : fallback_file;
  fprintf(stderr, "dcr: ");
  if (file && *file) put_str(stderr, file), fputs(": ", stderr);
  fprintf(stderr, "%s: ", dcr_error_name(code));
  put_str(stderr, d && d->message[0] ? d->message : dcr_error_message(code));
  if (d) {
    const char *sep = " (";
    if (d->offset != DCR_NONE)
      fprintf(stderr, "%soffset %llu", sep, (unsigned long long)d->offset), sep = ", ";
    if (d->section[0]) fprintf(stderr, "%ssection ", sep), put_str(stderr, d->section), sep = ", ";
    if (d->tensor_name[0])
      fprintf(stderr, "%stensor \"", sep), put_str(stderr, d->tensor_name), fputc('"', stderr), sep = ", ";
    else if (d->tensor != DCR_NONE)
      fprintf(stderr, "%stensor #%llu", sep, (unsigned long long)d->tensor), sep = ", ";
    if (d->chunk != DCR_NONE) fprintf(stderr, "%schunk %llu", sep, (unsigned long long)d->chunk), sep = ", ";
    if (sep[0] == ',') fputc(')', stderr);
  }
  fputc('\n', stderr);
}

/* A JSON string of text that may hold bytes that are not UTF-8 (a bad name or path
 * quoted in a message): those are written as \xNN, as on the terminal. */
static json_t *json_text(const char *s) {
  json_t *j = json_string(s);
  if (j) return j;
  size_t n = strlen(s);
  char *out = malloc(4 * n + 1), *o = out;
  if (!out) return json_string("(text not UTF-8)");
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    o += *p < 0x80 ? (size_t)sprintf(o, "%c", *p) : (size_t)sprintf(o, "\\x%02x", *p);
  j = json_string(out);
  free(out);
  return j;
}

json_t *cli_error_json(int code, const char *stage, const dcr_detail *d) {
  json_t *e = json_pack("{s:s, s:i, s:o, s:s}", "code", dcr_error_name(code), "number", code,
                        "message", json_text(d->message[0] ? d->message : dcr_error_message(code)),
                        "stage", stage);
  json_object_set_new(e, "file", d->file[0] ? json_text(d->file) : json_null());
  json_object_set_new(e, "offset", d->offset != DCR_NONE ? json_integer((json_int_t)d->offset)
                                                        : json_null());
  json_object_set_new(e, "section", d->section[0] ? json_string(d->section) : json_null());
  json_object_set_new(e, "tensor", d->tensor_name[0] ? json_text(d->tensor_name) : json_null());
  json_object_set_new(e, "chunk", d->chunk != DCR_NONE ? json_integer((json_int_t)d->chunk)
                                                      : json_null());
  return e;
}

void cli_print_json(json_t *doc) {
  json_dumpf(doc, stdout, JSON_INDENT(2));
  fputc('\n', stdout);
  fflush(stdout);
  json_decref(doc);
}

int cli_usage(const char *command, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "dcr%s%s: ", command ? " " : "", command ? command : "");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nTry 'dcr %s%s--help'.\n", command ? command : "", command ? " " : "");
  return CLI_USAGE;
}

int cli_bad_option(const char *command, int c, char **argv) {
  const char *arg = argv[optind - 1];
  int n = (int)strcspn(arg, "=");
  if (c == ':' && optopt && optopt < 256 && arg[0] == '-' && arg[1] != '-')
    return cli_usage(command, "option '-%c' needs a value", optopt);
  if (c == ':') return cli_usage(command, "option '%.*s' needs a value", n, arg);
  if (optopt && optopt < 256) return cli_usage(command, "unknown option '-%c'", optopt);
  return cli_usage(command, "unknown option '%.*s'", n, arg);
}

int cli_arg_count(const char *command, int argc, char **argv, int min, int max, const char *expected) {
  int have = argc - optind;
  if (have < min) return cli_usage(command, "missing arguments: expected %s", expected);
  if (max >= 0 && have > max)
    return cli_usage(command, "too many arguments (from '%s' on): expected %s", argv[optind + max], expected);
  return CLI_OK;
}

int cli_parse_format(const char *s, int *minor) {
  if (strlen(s) != 3 || strncmp(s, "1.", 2) || s[2] < '0' || s[2] > '0' + DCR_FORMAT_MINOR) return -1;
  *minor = s[2] - '0';
  return 0;
}

int cli_parse_sign_scope(const char *s, int *scope) {
  if (!strcmp(s, "checkpoints")) return *scope = DCR_SIGN_CHECKPOINTS, 0;
  if (!strcmp(s, "bundle")) return *scope = DCR_SIGN_BUNDLE, 0;
  return -1;
}

int cli_parse_uint(const char *s, uint64_t max, uint64_t *out) {
  char *end;
  if (!*s || *s == '-') return -1;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end || v > max) return -1;
  *out = v;
  return 0;
}

int cli_parse_size(const char *s, uint64_t *out) {
  char *end;
  if (!*s || *s == '-') return -1;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) return -1;
  unsigned shift = 0;
  if (*end) {
    const char *units = "KMGT";
    const char *u = strchr(units, *end & ~0x20);
    if (!u || (end[1] && strcmp(end + 1, "iB") && strcmp(end + 1, "B"))) return -1;
    shift = 10u * (unsigned)(u - units + 1);
  }
  if (shift && v > (UINT64_MAX >> shift)) return -1;
  *out = (uint64_t)v << shift;
  return 0;
}

const char *cli_bytes(uint64_t n, char buf[32]) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)n;
  unsigned u = 0;
  while (v >= 1024 && u < 4) v /= 1024, u++;
  if (u == 0) snprintf(buf, 32, "%llu B", (unsigned long long)n);
  else snprintf(buf, 32, "%.2f %s", v, units[u]);
  return buf;
}

void cli_hex(const uint8_t *p, size_t n, char *out) {
  for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", p[i]);
}

int cli_file_digest(const char *path, char out[33]) {
  FILE *f = fopen(path, "rb");
  if (!f) return fprintf(stderr, "dcr: %s: DCR_E_IO: cannot open: %s\n", path, strerror(errno)), -1;
  XXH3_state_t st;
  XXH3_128bits_reset(&st);
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) XXH3_128bits_update(&st, buf, n);
  int bad = ferror(f);
  fclose(f);
  if (bad) return fprintf(stderr, "dcr: %s: DCR_E_IO: cannot read\n", path), -1;
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits_digest(&st));
  cli_hex(c.digest, 16, out);
  return 0;
}
