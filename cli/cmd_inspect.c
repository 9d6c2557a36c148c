/*
 * cmd_inspect.c - dcr inspect BUNDLE|CHECKPOINT [--json]
 */
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

static const char usage[] =
    "Usage: dcr inspect BUNDLE|CHECKPOINT [--json]\n"
    "Show a bundle's header, identities, metadata, sections and, per tensor, what\n"
    "changed and how it is encoded. The bundle's structure is checked first.\n"
    "Given a safetensors checkpoint instead, show its size, prefix length, state id\n"
    "(SPEC.md section 7; what 'dcr id' prints) and its tensors with their hashes\n"
    "(all of them with -v, or when there are few). A bundle's text counts its\n"
    "tensors by status (a set's raw members apart) and lists them, and the\n"
    "member files, when there are few; -v lists every one.\n\n"
    "      --json           print one JSON document on stdout (see README)\n"
    CLI_HTTP_HELP;

typedef struct {
  uint64_t chunks, elements, payload, by_encoding[DCR_ENC_COUNT];
} tensor_stats;

/* Rows (tensors, member files) listed without -v: a model's bundle changes a
 * chunk of nearly every one of its hundreds of tensors, so past this many the
 * text shows the counts and -v every row. */
#define SHORT_LIST 20

static const char *status_of(const dcr_tensor_info *t, const tensor_stats *s) {
  if (!t->target.present) return "removed";
  if (!t->base.present) return "added";
  if (t->resized) return "resized";
  if (!t->delta_coded) return "recoded";
  int reshaped = t->base.rank != t->target.rank ||
                 (t->base.rank && memcmp(t->base.dims, t->target.dims, t->base.rank * 8));
  if (reshaped) return "reshaped";
  return s->chunks ? "changed" : "unchanged";
}

/* A set's member files (bundle: the target's), as text lines or a JSON array. */
static void print_member(const dcr_member_info *m) {
  char a[32];
  printf("  %-12s %12s  ", cli_kind_name(m->kind), cli_bytes(m->prefix_length + m->data_length, a));
  cli_put_escaped(stdout, m->path, m->path_length);
  putchar('\n');
}

/* The members of a bundle's target (r) or of a checkpoint (ck). */
static json_t *members_json(const dcr_reader *r, const dcr_checkpoint *ck, uint64_t count) {
  json_t *a = json_array();
  for (uint64_t i = 0; i < count; i++) {
    dcr_member_info m;
    if (r) dcr_reader_member(r, i, &m);
    else dcr_checkpoint_member(ck, i, &m);
    json_array_append_new(a, json_pack("{s:s%, s:s, s:I}", "path", m.path, m.path_length, "kind",
                                       cli_kind_name(m.kind), "bytes",
                                       (json_int_t)(m.prefix_length + m.data_length)));
  }
  return a;
}

static json_t *shape_json(const dcr_tensor_side *s) {
  json_t *a = json_array();
  for (unsigned i = 0; i < s->rank; i++) json_array_append_new(a, json_integer((json_int_t)s->dims[i]));
  return a;
}

static json_t *side_json(const dcr_tensor_side *s, int with_offset) {
  if (!s->present) return json_null();
  char hex[33];
  cli_hex(s->hash, 16, hex);
  json_t *o = json_pack("{s:s, s:o, s:I, s:s}", "dtype", dcr_dtype_name(s->dtype), "shape",
                        shape_json(s), "byte_length", (json_int_t)s->byte_length, "hash", hex);
  if (with_offset) json_object_set_new(o, "offset", json_integer((json_int_t)s->offset));
  return o;
}

static json_t *encodings_json(const uint64_t *by) {
  json_t *o = json_object();
  for (int e = 1; e < DCR_ENC_COUNT; e++)
    if (by[e]) json_object_set_new(o, dcr_encoding_name(e), json_integer((json_int_t)by[e]));
  return o;
}

static void shape_text(const dcr_tensor_side *s, char *buf, size_t size) {
  size_t n = (size_t)snprintf(buf, size, "[");
  for (unsigned i = 0; i < s->rank && n < size; i++)
    n += (size_t)snprintf(buf + n, size - n, "%s%llu", i ? "," : "", (unsigned long long)s->dims[i]);
  if (n < size) snprintf(buf + n, size - n, "]");
}

/* The entries counted by status, a set's raw members (config, tokenizer, index)
 * apart from its tensors; returns the rows the table shows without -v. */
static uint64_t print_counts(dcr_reader *r, const dcr_bundle_info *info, const tensor_stats *ts,
                             int verbose) {
  static const char *const statuses[] = {"changed", "resized", "reshaped", "added", "removed",
                                         "recoded", "unchanged"};
  enum { N = sizeof statuses / sizeof *statuses };
  uint64_t count[2][N] = {{0}}, all[2] = {0}, rows = 0;
  for (uint64_t i = 0; i < info->entry_count; i++) {
    dcr_tensor_info t;
    dcr_reader_tensor(r, i, &t);
    const char *status = status_of(&t, &ts[i]);
    int raw = t.raw != 0;
    for (size_t k = 0; k < N; k++)
      if (!strcmp(status, statuses[k])) count[raw][k]++;
    all[raw]++;
    rows += verbose || strcmp(status, "unchanged");
  }
  for (int raw = 0; raw < 2; raw++) {
    if (raw && !all[raw]) continue;
    printf("  %s: %llu", raw ? "raw members" : "tensors", (unsigned long long)all[raw]);
    const char *sep = " (";
    for (size_t k = 0; k < N; k++)
      if (count[raw][k]) printf("%s%llu %s", sep, (unsigned long long)count[raw][k], statuses[k]), sep = ", ";
    printf("%s\n", all[raw] ? ")" : "");
  }
  return rows;
}

static void print_text(const char *path, dcr_reader *r, const dcr_bundle_info *info,
                       const tensor_stats *ts, const tensor_stats *total, int verbose) {
  char a[32], b[32], hex[33];
  printf("%s: DCR bundle %u.%u, %s\n", path, info->format_major, info->format_minor,
         cli_bytes(info->bundle_size, a));
  printf("  kind %s, chunk size %s, %llu tensors, %llu changed chunks\n",
         cli_kind_name(info->kind), cli_bytes(info->chunk_size, b),
         (unsigned long long)info->entry_count, (unsigned long long)info->chunk_count);
  cli_hex(info->base_state, 16, hex);
  printf("  base state    %s\n", hex);
  cli_hex(info->target_state, 16, hex);
  printf("  target state  %s, %s (%.4f%% carried)\n", hex, cli_bytes(info->target_size, a),
         info->target_size ? 100.0 * (double)info->bundle_size / (double)info->target_size : 0.0);
  cli_put_meta(stdout, r, "  meta ", " = ", "\n");
  uint64_t rows = print_counts(r, info, ts, verbose);
  if (info->member_count && !verbose && info->member_count > SHORT_LIST)
    printf("  %llu target member files (-v lists them)\n", (unsigned long long)info->member_count);
  else if (info->member_count)
    printf("  %llu target member files:\n", (unsigned long long)info->member_count);
  for (uint64_t i = 0; i < info->member_count && (verbose || info->member_count <= SHORT_LIST); i++) {
    dcr_member_info m;
    dcr_reader_member(r, i, &m);
    print_member(&m);
  }
  if (verbose) {
    for (uint64_t i = 0; i < info->section_count; i++) {
      dcr_section_info s;
      dcr_reader_section(r, i, &s);
      fputs("  section ", stdout);
      cli_put_escaped(stdout, s.type, strlen(s.type));
      printf(" at %llu, %llu bytes%s%s\n", (unsigned long long)s.offset,
             (unsigned long long)s.length, s.critical ? "" : ", ancillary",
             s.compression ? ", zstd" : "");
    }
  }
  if (!verbose && rows > SHORT_LIST)
    printf("  (-v lists the %llu tensors)\n", (unsigned long long)info->entry_count);
  else
    printf("  %-10s %-8s %-16s %10s %10s  %s\n", "status", "dtype", "shape", "changed",
           "payload", "name");
  for (uint64_t i = 0; i < info->entry_count && (verbose || rows <= SHORT_LIST); i++) {
    dcr_tensor_info t;
    dcr_reader_tensor(r, i, &t);
    const dcr_tensor_side *s = t.target.present ? &t.target : &t.base;
    const char *status = status_of(&t, &ts[i]);
    if (!verbose && !strcmp(status, "unchanged")) continue;
    char shape[64];
    shape_text(s, shape, sizeof shape);
    printf("  %-10s %-8s %-16s %10llu %10llu  ", status, dcr_dtype_name(s->dtype), shape,
           (unsigned long long)ts[i].elements, (unsigned long long)ts[i].payload);
    cli_put_escaped(stdout, t.name, t.name_length);
    putchar('\n');
  }
  printf("  total: %llu changed elements in %llu chunks, %s of payload", 
         (unsigned long long)total->elements, (unsigned long long)total->chunks,
         cli_bytes(total->payload, a));
  for (int e = 1; e < DCR_ENC_COUNT; e++)
    if (total->by_encoding[e]) printf(", %s %llu", dcr_encoding_name(e),
                                      (unsigned long long)total->by_encoding[e]);
  printf("\n");
}

static void print_json(const char *path, dcr_reader *r, const dcr_bundle_info *info,
                       const tensor_stats *ts, const tensor_stats *total) {
  char base[33], target[33], version[16];
  cli_hex(info->base_state, 16, base);
  cli_hex(info->target_state, 16, target);
  snprintf(version, sizeof version, "%u.%u", info->format_major, info->format_minor);
  json_t *doc = json_pack(
      "{s:s, s:s, s:I, s:s, s:I, s:I, s:I, s:I, s:s, s:s}", "file", path, "format_version",
      version, "bundle_size", (json_int_t)info->bundle_size, "kind",
      cli_kind_name(info->kind), "chunk_size",
      (json_int_t)info->chunk_size, "target_size", (json_int_t)info->target_size,
      "prefix_length", (json_int_t)info->prefix_length, "chunk_count",
      (json_int_t)info->chunk_count, "base_state", base, "target_state", target);
  json_t *sections = json_array(), *meta = json_object(), *tensors = json_array();
  for (uint64_t i = 0; i < info->section_count; i++) {
    dcr_section_info s;
    dcr_reader_section(r, i, &s);
    json_array_append_new(sections, json_pack("{s:s, s:I, s:I, s:b, s:s}", "type", s.type,
                                              "offset", (json_int_t)s.offset, "length",
                                              (json_int_t)s.length, "critical", s.critical,
                                              "compression", s.compression ? "zstd" : "none"));
  }
  for (uint64_t i = 0; i < info->meta_count; i++) {
    dcr_meta m;
    dcr_reader_meta(r, i, &m);
    json_object_set_new(meta, m.key, json_string(m.value));
  }
  for (uint64_t i = 0; i < info->entry_count; i++) {
    dcr_tensor_info t;
    dcr_reader_tensor(r, i, &t);
    json_t *o = json_pack("{s:s%, s:s, s:o, s:o, s:I, s:I, s:I, s:o}", "name", t.name,
                          t.name_length, "status", status_of(&t, &ts[i]), "base",
                          side_json(&t.base, 0), "target", side_json(&t.target, 1),
                          "changed_chunks", (json_int_t)ts[i].chunks, "changed_elements",
                          (json_int_t)ts[i].elements, "payload_bytes", (json_int_t)ts[i].payload,
                          "encodings", encodings_json(ts[i].by_encoding));
    json_array_append_new(tensors, o);
  }
  if (info->member_count) json_object_set_new(doc, "members", members_json(r, NULL, info->member_count));
  json_object_set_new(doc, "sections", sections);
  json_object_set_new(doc, "meta", meta);
  json_object_set_new(doc, "tensors", tensors);
  json_object_set_new(doc, "totals",
                      json_pack("{s:I, s:I, s:I, s:o}", "changed_elements",
                                (json_int_t)total->elements, "changed_chunks",
                                (json_int_t)total->chunks, "payload_bytes",
                                (json_int_t)total->payload, "encodings",
                                encodings_json(total->by_encoding)));
  cli_print_json(doc);
}

/* ---- a checkpoint (not a bundle) */


static void print_checkpoint_text(const char *path, const dcr_checkpoint *ck,
                                  const dcr_checkpoint_summary *ci, const uint8_t id[16],
                                  int verbose) {
  char a[32], hex[33];
  printf("%s: %s checkpoint, %s\n", path, cli_kind_name(ci->kind),
         cli_bytes(ci->file_size, a));
  printf("  %llu tensor%s, prefix %llu bytes\n", (unsigned long long)ci->tensor_count,
         ci->tensor_count == 1 ? "" : "s", (unsigned long long)ci->prefix_length);
  cli_hex(id, 16, hex);
  printf("  state  %s\n", hex);
  if (ci->member_count) printf("  %llu member files:\n", (unsigned long long)ci->member_count);
  for (uint64_t i = 0; i < ci->member_count; i++) {
    dcr_member_info m;
    dcr_checkpoint_member(ck, i, &m);
    print_member(&m);
  }
  if (!verbose && ci->tensor_count > SHORT_LIST) {
    printf("  (-v lists the %llu tensors)\n", (unsigned long long)ci->tensor_count);
    return;
  }
  printf("  %-8s %-16s %12s  %-32s  %s\n", "dtype", "shape", "bytes", "hash", "name");
  for (uint64_t i = 0; i < ci->tensor_count; i++) {
    dcr_tensor_side s;
    const char *name;
    size_t n;
    char shape[64];
    dcr_checkpoint_tensor(ck, i, &s, &name, &n);
    shape_text(&s, shape, sizeof shape);
    cli_hex(s.hash, 16, hex);
    printf("  %-8s %-16s %12llu  %s  ", dcr_dtype_name(s.dtype), shape,
           (unsigned long long)s.byte_length, hex);
    cli_put_escaped(stdout, name, n);
    putchar('\n');
  }
}

static void print_checkpoint_json(const char *path, const dcr_checkpoint *ck,
                                  const dcr_checkpoint_summary *ci, const uint8_t id[16]) {
  char hex[33];
  cli_hex(id, 16, hex);
  json_t *tensors = json_array();
  for (uint64_t i = 0; i < ci->tensor_count; i++) {
    dcr_tensor_side s;
    const char *name;
    size_t n;
    dcr_checkpoint_tensor(ck, i, &s, &name, &n);
    json_t *o = json_pack("{s:s%}", "name", name, n), *side = side_json(&s, 1);
    json_object_update(o, side);
    json_decref(side);
    json_array_append_new(tensors, o);
  }
  json_t *doc = json_pack("{s:s, s:s, s:I, s:I, s:I, s:s, s:o}", "file", path, "kind",
                          cli_kind_name(ci->kind), "file_size",
                          (json_int_t)ci->file_size, "prefix_length",
                          (json_int_t)ci->prefix_length, "tensor_count",
                          (json_int_t)ci->tensor_count, "state_id", hex, "tensors", tensors);
  if (ci->member_count) json_object_set_new(doc, "members", members_json(NULL, ck, ci->member_count));
  cli_print_json(doc);
}

/* A file that is not a bundle (DCR_E_MAGIC, in *bundle_error) may be a
 * safetensors checkpoint: show that, or report the bundle's error. A directory
 * (bundle_error NULL) is a checkpoint set. */
static int inspect_checkpoint(const char *path, const dcr_detail *bundle_error, int json,
                              int verbose, int progress_shown) {
  dcr_checkpoint *ck;
  dcr_detail d;
  uint8_t id[16];
  int err = dcr_checkpoint_open(&ck, path, bundle_error ? DCR_KIND_SAFETENSORS : DCR_KIND_SET,
                                &cli_limits, &d);
  if (err && !bundle_error) {
    if (json) cli_print_json(json_pack("{s:s, s:o}", "file", path, "error", cli_error_json(err, "checkpoint", &d)));
    cli_report(path, err, &d);
    return cli_exit_code(err);
  }
  if (err) {
    if (json) {
      json_t *e = cli_error_json(DCR_E_MAGIC, "structure", bundle_error);
      json_object_set_new(e, "checkpoint_error", cli_error_json(err, "checkpoint", &d));
      cli_print_json(json_pack("{s:s, s:o}", "file", path, "error", e));
    }
    cli_report(path, DCR_E_MAGIC, bundle_error);
    fprintf(stderr, "  (nor a safetensors checkpoint: %s: ", dcr_error_name(err));
    cli_put_escaped(stderr, d.message, strlen(d.message));
    fputs(")\n", stderr);
    return cli_exit_code(DCR_E_MAGIC);
  }
  /* Nothing is written: an interrupt may end the hashing where it stands. */
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  dcr_checkpoint_summary ci;
  dcr_checkpoint_info(ck, &ci);
  cli_progress_state progress = {.what = "hashing"};
  if (progress_shown) dcr_checkpoint_set_progress(ck, cli_progress, &progress);
  err = dcr_checkpoint_state_id(ck, 0, id, &d);
  cli_progress_end(&progress);
  if (err) {
    if (json) cli_print_json(json_pack("{s:s, s:o}", "file", path, "error", cli_error_json(err, "checkpoint", &d)));
    cli_report(path, err, &d);
  }
  else if (json) print_checkpoint_json(path, ck, &ci, id);
  else print_checkpoint_text(path, ck, &ci, id, verbose);
  dcr_checkpoint_free(ck);
  return cli_exit_code(err);
}

int cmd_inspect(int argc, char **argv) {
  static const struct option longs[] = {CLI_COMMON_LONG_OPTIONS,
                                        {"json", no_argument, NULL, OPT_JSON},
                                        CLI_HTTP_LONG_OPTIONS,
                                        {NULL, 0, NULL, 0}};
  cli_common common;
  cli_common_init(&common, "inspect");
  int json = 0, c, stop = 0;
  while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT, longs, NULL)) != -1) {
    if (cli_common_option(&common, c, usage, &stop)) {
      if (stop) return CLI_OK;
      continue;
    }
    if (c == OPT_JSON) json = 1;
    else if (!cli_http_option("inspect", c)) return cli_bad_option("inspect", c, argv);
  }
  if (cli_arg_count("inspect", argc, argv, 1, 1, "one BUNDLE or CHECKPOINT")) return CLI_USAGE;
  char dir[4096], shown[256];
  const char *url = cli_is_url(argv[optind]) ? argv[optind] : NULL;
  const char *path = url ? cli_shown(url, shown, sizeof shown)
                         : cli_checkpoint_path(argv[optind], dir, sizeof dir);
  dcr_reader *r;
  void *mem;
  dcr_detail d;
  struct stat st;
  if (!url && !stat(path, &st) && S_ISDIR(st.st_mode))
    return inspect_checkpoint(path, NULL, json, common.verbose, common.progress);
  int err = cli_open_bundle(url ? url : path, &r, &mem, &d);
  if (!url && err == DCR_E_MAGIC && !stat(path, &st) && S_ISREG(st.st_mode))
    return inspect_checkpoint(path, &d, json, common.verbose, common.progress);
  if (err) {
    if (json) cli_print_json(json_pack("{s:s, s:o}", "file", path, "error", cli_error_json(err, "structure", &d)));
    cli_report(path, err, &d);
    free(mem);
    return cli_exit_code(err);
  }
  dcr_bundle_info info;
  dcr_reader_info(r, &info);
  tensor_stats *ts = calloc((size_t)info.entry_count + 1, sizeof *ts), total = {0};
  if (!ts) return dcr_reader_free(r), free(mem), CLI_IO;
  for (uint64_t i = 0; i < info.chunk_count; i++) {
    dcr_chunk_info ch;
    dcr_reader_chunk(r, i, &ch);
    tensor_stats *s = &ts[ch.tensor];
    s->chunks++, total.chunks++;
    s->elements += ch.count, total.elements += ch.count;
    s->payload += ch.payload_length, total.payload += ch.payload_length;
    s->by_encoding[ch.encoding]++, total.by_encoding[ch.encoding]++;
  }
  if (json) print_json(path, r, &info, ts, &total);
  else print_text(path, r, &info, ts, &total, common.verbose);
  free(ts);
  dcr_reader_free(r);
  free(mem);
  return CLI_OK;
}
