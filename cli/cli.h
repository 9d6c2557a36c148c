/*
 * cli.h - what the dcr commands share: exit codes, error reports, options common
 * to every command, output files, progress and signals. The commands only parse
 * arguments, print, and call libdcr.
 */
#ifndef DCR_CLI_H
#define DCR_CLI_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "../format/atomic.h"
#include "dcr.h"
#include "synth.h"

/* Exit codes (README "Exit codes"). */
enum {
  CLI_OK = 0,
  CLI_INVALID = 1, /* invalid or non-matching bundle, or invalid input data */
  CLI_USAGE = 2,
  CLI_IO = 3,      /* I/O or system error */
  CLI_INTERRUPTED = 130
};

typedef struct {
  const char *command; /* for usage errors */
  int quiet, verbose, progress;
} cli_common;

/* getopt_long ids for the options every command takes. */
enum { OPT_NO_PROGRESS = 1000, OPT_JSON, OPT_BASE, OPT_TARGET, OPT_CHUNK_SIZE, OPT_LEVEL,
       OPT_THREADS, OPT_RAW, OPT_META, OPT_SIZE, OPT_RATE, OPT_SEED, OPT_DTYPE, OPT_NO_SYNC, OPT_RUNS, OPT_MEMORY,
       OPT_UNRELATED, OPT_FORMAT, OPT_PARENT, OPT_KEY, OPT_PUBKEY, OPT_SIGN, OPT_SLICED, OPT_REQUIRE_SIGNATURE,
       OPT_HEADER, OPT_HTTP_RETRIES, OPT_HTTP_TIMEOUT, OPT_CACERT, OPT_TENSORS,
       OPT_HEADER_FOLLOW, OPT_HTTP_DEADLINE, OPT_HTTP_LOW_SPEED, OPT_SIGN_SCOPE };
#define CLI_COMMON_LONG_OPTIONS                                               \
  {"help", no_argument, NULL, 'h'}, {"quiet", no_argument, NULL, 'q'},       \
      {"verbose", no_argument, NULL, 'v'},                                    \
      {"no-progress", no_argument, NULL, OPT_NO_PROGRESS},                    \
      {"memory", required_argument, NULL, OPT_MEMORY}
#define CLI_COMMON_SHORT ":hqv" /* the colon: getopt prints nothing itself */
#define CLI_COMMON_HELP                                                       \
  "  -q, --quiet        print nothing but errors\n"                           \
  "  -v, --verbose      print more detail\n"                                  \
  "      --no-progress  no progress line (shown on a terminal for long work)\n" \
  "      --memory SIZE  memory budget for reading one bundle or checkpoint\n"   \
  "                     (K/M/G; default 1G); more is DCR_E_NOMEM, exit 3\n"       \
  "  -h, --help         show this help\n"

/* For the commands that read a bundle, which may be a URL (http.c). */
#define CLI_HTTP_LONG_OPTIONS                                                 \
  {"header", required_argument, NULL, OPT_HEADER},                            \
      {"http-retries", required_argument, NULL, OPT_HTTP_RETRIES},            \
      {"http-timeout", required_argument, NULL, OPT_HTTP_TIMEOUT},            \
      {"http-low-speed", required_argument, NULL, OPT_HTTP_LOW_SPEED},        \
      {"http-deadline", required_argument, NULL, OPT_HTTP_DEADLINE},          \
      {"header-follow", no_argument, NULL, OPT_HEADER_FOLLOW},                \
      {"cacert", required_argument, NULL, OPT_CACERT}
#define CLI_HTTP_HELP                                                                \
  "BUNDLE may be an http:// or https:// URL, read by range requests (SPEC.md 21).\n" \
  CLI_HTTP_OPTIONS_HELP
#define CLI_HTTP_OPTIONS_HELP                                                    \
  "      --header HEADER  send HEADER ('Name: value') with every request\n"      \
  "                     (repeatable; also one per line in DCR_HTTP_HEADERS, which\n" \
  "                     keeps a token out of the process list); never printed;\n" \
  "                     sent only to the URL's origin (scheme, host, port)\n"     \
  "      --header-follow  send them to the origin a redirect names too\n"         \
  "      --http-retries N  attempts after the first per request (default 5)\n"     \
  "      --http-timeout S  retry a transfer that receives nothing for S seconds\n" \
  "                     (default 30)\n"                                           \
  "      --http-low-speed B  retry a transfer under B bytes a second over 5 s (or\n" \
  "                     --http-timeout if shorter), once (K/M; default 1K)\n"     \
  "      --http-deadline S  give up what is not fetched S seconds after the\n"     \
  "                     start (default: no deadline)\n"                            \
  "      --cacert FILE  PEM CA certificates for HTTPS (default: the system's)\n"
/* Handles an HTTP option (exits on a bad value); returns 1 if opt was one. */
int cli_http_option(const char *command, int opt);
/* URLs are read whole at open, every section in file order, as a file is: for a
 * validator, whose stages and codes are then exactly those of a file. */
void cli_http_read_whole(void);
int cli_is_url(const char *path);
/* path, or a URL as it may be shown: scheme://host/path, no query or userinfo. */
const char *cli_shown(const char *path, char *buf, size_t capacity);
int cli_open_url(const char *url, dcr_reader **reader, dcr_detail *d);
int cli_open_history_url(const char *url, dcr_history **history, dcr_detail *d);
/* dcr apply --tensors (apply_tensors.c): the selected tensors of r's target, from
 * BASE to a safetensors OUT; returns an exit code. */
int cli_apply_tensors(dcr_reader *r, const char *bundle, const char *base, const char *out, int force,
                      const char *const *patterns, size_t n_patterns, int verify,
                      unsigned threads, int quiet);
/* "dcr: fetched X of Y bundle bytes ... in N requests, R retries" for a URL reader. */
void cli_print_fetch(dcr_reader *r);

/* The limits every bundle and checkpoint is read with: the defaults, and the
 * memory budget of --memory. */
extern dcr_limits cli_limits;

/* Handles a common option; returns 1 if `opt` was one, and sets *exit_now when the
 * command should stop (help printed). */
int cli_common_option(cli_common *c, int opt, const char *usage, int *exit_now);
void cli_common_init(cli_common *c, const char *command);

/* Maps a library error code to an exit code. */
int cli_exit_code(int code);
/* Prints "dcr: FILE: DCR_E_NAME: message (offset N, section S, tensor T, chunk C)". */
void cli_report(const char *fallback_file, int code, const dcr_detail *d);
/* The JSON object of one error, as --json documents carry it: code, number,
 * message, stage, file, offset, section, tensor, chunk (null where they do not
 * apply). */
json_t *cli_error_json(int code, const char *stage, const dcr_detail *d);
/* Prints a JSON document on stdout, indented, and frees it. */
void cli_print_json(json_t *doc);

/* Prints n bytes of a name, a path or a message from a bundle with control
 * characters and bytes that are no UTF-8 character escaped (\x1b, \u009b, \xff,
 * \\), so that a hostile name cannot drive the terminal or forge a line. JSON
 * output is escaped by jansson instead. */
void cli_put_escaped(FILE *f, const char *s, size_t n);
int cli_usage(const char *command, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The usage error for what getopt_long returned as c ('?' or ':'), in the one
 * format of cli_usage: "unknown option '--x'", "option '--threads' needs a value". */
int cli_bad_option(const char *command, int c, char **argv);
/* CLI_OK if the operands after the options number min..max (max -1: no bound);
 * else the usage error, saying whether some are missing or there are too many. */
int cli_arg_count(const char *command, int argc, char **argv, int min, int max, const char *expected);

/* Parses "123", "4K", "4M", "1G" (binary units). Returns 0 on success. */
int cli_parse_size(const char *s, uint64_t *out);
int cli_parse_uint(const char *s, uint64_t max, uint64_t *out);
/* "checkpoints" or "bundle" (--sign-scope, --scope): *scope gets DCR_SIGN_CHECKPOINTS
 * or DCR_SIGN_BUNDLE. Returns 0 on success. */
int cli_parse_sign_scope(const char *s, int *scope);
/* "1.0", "1.1" or "1.2" (--format): *minor gets the minor version; -1 otherwise. */
int cli_parse_format(const char *s, int *minor);

/* Signals: SIGINT/SIGTERM set the flag the library polls; SIGPIPE is ignored so
 * that a closed pipe is a write error, not a silent death. */
extern volatile int cli_interrupted;
void cli_signals_install(void);

/* Progress on stderr (commands pass it only on a terminal): percent, bytes, rate
 * and time left, redrawn at most ten times a second. Initialize with
 * {.what = "applying"}; cli_progress_end erases the line and starts over. */
typedef struct {
  const char *what;
  int shown;
  double start, last; /* seconds on the monotonic clock; 0 before the first call */
} cli_progress_state;
void cli_progress(void *opaque, uint64_t done, uint64_t total);
void cli_progress_end(cli_progress_state *p);

/* An output file written through a temporary file in the same directory and
 * renamed into place by cli_output_commit; cli_output_abort removes the temporary
 * file. "-" (standard output, which must not be a terminal), a FIFO and a
 * character device are streams, written directly: a reader of the stream sees
 * bytes before the command knows it will succeed, and must go by its exit status.
 * cli_check_output says what is accepted. */
typedef struct {
  const char *path;
  dcr__atomic atomic; /* a file's temporary, committed by the library's own module */
  int fd;
  int stream;
  int error; /* errno of a failed cli_output_write, else 0 */
} cli_output;
int cli_output_open(cli_output *o, const char *path, int force, const char *const *inputs,
                    size_t n_inputs);
int cli_output_write(void *opaque, const void *data, size_t size);
/* Writes all of data to fd, going on after a signal unless it was an interrupt;
 * returns 0 or -1 (errno set). */
int cli_write_fd(int fd, const void *data, size_t size);
int cli_output_commit(cli_output *o);
void cli_output_abort(cli_output *o);

/* Checks an output before any work: "-" must not be a terminal or an input; a
 * directory, socket or block device is refused; a FIFO or character device is
 * written into (never replaced); an existing file or symbolic link needs force,
 * and is then replaced (a link itself, not the file it points to); a file that is
 * one of the inputs (by device and inode, so also through a link) is refused even
 * with force. Returns CLI_OK, or prints why not and returns CLI_USAGE. */
int cli_check_output(const char *path, int force, const char *const *inputs, size_t n_inputs);

/* Refuses, before anything blocks in open(), a checkpoint path that is a FIFO,
 * socket or device; returns CLI_OK or prints why and returns CLI_USAGE. */
int cli_check_checkpoint(const char *path);
/* The output of a set's apply: a new directory, or with force an existing one that
 * is neither the base nor inside it; returns CLI_OK or prints why (CLI_USAGE). */
int cli_check_output_dir(const char *path, int force, const char *base);
/* Removes a directory tree (a series' step); best effort. */
void cli_remove_tree(const char *path);

/* A sharded model may be named by its index (model.safetensors.index.json): the
 * checkpoint is then its directory, written into buf. Returns the path to read. */
const char *cli_checkpoint_path(const char *path, char *buf, size_t cap);
/* "raw", "safetensors" or "set". */
const char *cli_kind_name(int kind);
/* The kind of a checkpoint path: a set if it is a directory, else raw or safetensors. */
int cli_checkpoint_kind(const char *path, int raw);

/* The tensor of ck named name[0..n), its file offset (prefix included) in
 * *at; 0 if found, -1 if not. */
int cli_checkpoint_find(const dcr_checkpoint *ck, const char *name, size_t n, dcr_tensor_side *side,
                        uint64_t *at);
/* Opens a bundle from a path, "-" (read whole into memory) or a URL (cli_open_url). */
int cli_open_bundle(const char *path, dcr_reader **reader, void **memory, dcr_detail *d);

/* After the error line of DCR_E_BASE_MISMATCH (input given as a base) or
 * DCR_E_TARGET_MISMATCH (input given as a target), prints on stderr the states the
 * bundle names, the input's state, the bundle's metadata and a hint; reads the
 * whole input. Other codes print nothing (explain.c). */
void cli_explain_mismatch(dcr_reader *r, const char *input_path, int code);

/* Prints each metadata pair as BEFORE key BETWEEN value AFTER, escaped. */
void cli_put_meta(FILE *f, dcr_reader *r, const char *before, const char *between,
                  const char *after);
/* Prints "  LABEL: key=value ..." on stderr, escaped, if the bundle has metadata. */
void cli_print_meta(dcr_reader *r, const char *label);

/* Human sizes: "1.23 MiB". */
const char *cli_bytes(uint64_t n, char buf[32]);
void cli_hex(const uint8_t *p, size_t n, char *out);
/* The XXH3-128 of a file's bytes as xxh128sum prints it (32 hex digits and a
 * NUL); on failure prints why and returns -1. */
int cli_file_digest(const char *path, char out[33]);

/* dcr synth's outputs: a pair written through cli_output, committed together
 * (cmd_synth.c; bench and the tests use it too). Returns an exit code. */
int cli_synth_files(const dcr_synth_options *options, const char *base, const char *target,
                    int force, double *rate);

/* An encode's (or a squash's) statistics: the JSON document of --json, and the
 * report line on stderr (with verbose, by encoding and more). cmd_encode.c. */
json_t *cli_stats_json(const char *bundle, const dcr_encode_stats *st, unsigned threads);
void cli_print_stats(const char *bundle, const dcr_encode_stats *st, unsigned threads, int verbose);

int cmd_encode(int argc, char **argv);
int cmd_apply(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_id(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_history(int argc, char **argv);
int cmd_squash(int argc, char **argv);
int cmd_keygen(int argc, char **argv);
int cmd_sign(int argc, char **argv);
int cmd_verify(int argc, char **argv);
/* --require-signature KEY, --pubkey KEY: adds a trusted public key file to *ring (made
 * on first use); CLI_OK, or the error printed and its exit code (cmd_verify.c). */
int cli_trust_key(dcr_keyring **ring, const char *command, const char *path);
/* r's signatures against ring (SPEC.md 20.4); DCR_OK when ring is NULL (none asked). */
int cli_check_signature(dcr_reader *r, const dcr_keyring *ring, dcr_detail *d);

#endif
