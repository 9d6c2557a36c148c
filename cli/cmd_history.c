/*
 * cmd_history.c - dcr history create | append | list | verify | extract: a
 * training run's chain of bundles kept in a tar, tar.zst or zip archive (SPEC.md
 * §19), through the dcr_history functions.
 */
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char usage[] =
    "Usage: dcr history create ARCHIVE --keyframe CKPT [BUNDLE...] [OPTIONS]\n"
    "       dcr history append ARCHIVE BUNDLE... [OPTIONS]\n"
    "       dcr history list ARCHIVE [--json]\n"
    "       dcr history verify ARCHIVE [--json]\n"
    "       dcr history extract ARCHIVE (--step N | --state ID) -o OUT [OPTIONS]\n"
    "       dcr history recover ARCHIVE\n"
    "Keep a training run's chain of bundles in one archive that tar and unzip open\n"
    "(SPEC.md section 19): ARCHIVE.tar, .tar.zst (or .tzst) or .zip. An index comes\n"
    "first, then a keyframe (a whole checkpoint), then each step's bundle, and a\n"
    "keyframe every K steps if asked; any step is rebuilt in one pass over the\n"
    "archive, from the nearest keyframe at or before it, without intermediate files.\n"
    "ARCHIVE may be - (standard input) for list, verify and extract, or an http://\n"
    "or https:// URL, read by range requests (SPEC.md 19.4, 21): list reads the\n"
    "index only, extract the members it needs. create and append write a local file.\n"
    "  create   a new archive from the first checkpoint (and bundles, as append)\n"
    "  append   add bundles, each the next step: its base must be the state the\n"
    "           archive ends in; metadata step, run_id and parent_bundle (SPEC.md\n"
    "           6.4.1) must agree. A .tar is appended to in place, after its\n"
    "           last member (its index rewritten in the room left for it), under\n"
    "           a journal ARCHIVE.dcr-append that undoes a torn append; other\n"
    "           archives, and a .tar whose index has no room left, are rewritten\n"
    "           beside themselves and renamed over. A crash leaves the old\n"
    "           archive or the new one\n"
    "  list     print the index: each member's step, kind, size and state\n"
    "  verify   read every member: sizes and digests, every bundle whole, every\n"
    "           keyframe's state id, every link of the chain\n"
    "  extract  rebuild a step's checkpoint; OUT appears only once it is checked\n"
    "  recover  undo an append that a crash left unfinished (append, and list,\n"
    "           verify and extract where they may write, do it first themselves)\n\n"
    "      --keyframe CKPT    create: the checkpoint the archive starts from (a\n"
    "                         directory too: extract then rebuilds directories)\n"
    "      --step N           create: its step (default 0); extract: the step\n"
    "      --state ID         extract: the step whose state id is ID\n"
    "      --keyframe-every K create, append: a keyframe at each step that is a\n"
    "                         multiple of K, built from the chain (extract then\n"
    "                         reads one keyframe and at most K-1 bundles)\n"
    "      --run-id ID        create: the run (default: the first bundle's run_id)\n"
    "      --container C      create: tar, tar.zst or zip (default: from the name)\n"
    "  -o, --output OUT       extract: where to write the checkpoint\n"
    "      --verify LEVEL     extract: chunk (default: each bundle's changed chunks,\n"
    "                         then the result's state id), full (every tensor at\n"
    "                         every step), none (trusted)\n"
    "      --max-size SIZE    extract: refuse a checkpoint larger than SIZE (K/M/G/T)\n"
    "      --threads N        worker threads (default: usable CPUs, up to 32)\n"
    "      --no-sync          no fsync: survives a killed process, not a power loss\n"
    "  -f, --force            create, extract: replace an existing output\n"
    "      --require-signature KEY\n"
    "                         create, append, extract, verify: every bundle added\n"
    "                         or read must be signed by the public key in file KEY\n"
    "                         (repeatable: by one of them; SPEC.md section 20)\n"
    "      --json             list, verify: print one JSON document on stdout\n"
    "For an ARCHIVE that is a URL:\n" CLI_HTTP_OPTIONS_HELP;

enum { OPT_KEYFRAME = 2000, OPT_STEP, OPT_STATE, OPT_EVERY, OPT_RUN_ID, OPT_CONTAINER, OPT_VERIFY, OPT_MAX,
       OPT_SIGNED_BY };

typedef struct {
  dcr_history_options o;
  const char *keyframe, *out, *state;
  uint64_t step;
  int has_step, json, force;
  cli_common common;
  const char *shown; /* ARCHIVE as messages name it: a URL without its query */
  char shown_buf[512];
} history_job;

static const char *container_name(int c) {
  return c == DCR_HISTORY_TAR ? "tar" : c == DCR_HISTORY_TAR_ZSTD ? "tar.zst" : "zip";
}

static const char *kind_name(int kind) { return kind == DCR_HISTORY_KEYFRAME ? "keyframe" : "bundle"; }

static const char *reported(const char *path, const history_job *j) {
  return strcmp(path, "-") ? j->shown : "(stdin)";
}

static int open_history(const char *path, dcr_history **h, dcr_detail *d) {
  return !strcmp(path, "-") ? dcr_history_open_fd(h, STDIN_FILENO, &cli_limits, d)
         : cli_is_url(path) ? cli_open_history_url(path, h, d)
                            : dcr_history_open(h, path, &cli_limits, d);
}

static int open_archive(const char *path, dcr_history **h, const history_job *j) {
  dcr_detail d;
  int err = open_history(path, h, &d);
  if (err) cli_report(reported(path, j), err, &d);
  return err ? cli_exit_code(err) : CLI_OK;
}

static json_t *member_json(const dcr_history *h, uint64_t i) {
  dcr_history_member m;
  char digest[33], state[33], base[33];
  dcr_history_member_get(h, i, &m);
  cli_hex(m.digest, 16, digest);
  cli_hex(m.state, 16, state);
  cli_hex(m.base_state, 16, base);
  json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:s}", "name", m.name, "kind", kind_name(m.kind), "step",
                        (json_int_t)m.step, "size", (json_int_t)m.size, "xxh3_128", digest);
  if (m.kind == DCR_HISTORY_KEYFRAME) {
    json_object_set_new(o, "state", json_string(state));
    if (m.directory) { /* a set: size is its files' sum; each file has its own digest */
      json_object_set_new(o, "xxh3_128", json_null());
      json_object_set_new(o, "files", json_integer((json_int_t)m.file_count));
    }
    return o;
  }
  json_object_set_new(o, "base_state", json_string(base));
  json_object_set_new(o, "target_state", json_string(state));
  json_t *meta = json_object();
  for (uint64_t j = 0; j < m.meta_count; j++) {
    dcr_meta p;
    dcr_history_member_meta(h, i, j, &p);
    json_object_set_new(meta, p.key, json_string(p.value));
  }
  json_object_set_new(o, "metadata", meta);
  return o;
}

static json_t *summary_json(const char *path, const dcr_history *h) {
  dcr_history_summary s;
  dcr_history_info(h, &s);
  char version[32];
  snprintf(version, sizeof version, "%u.%u", s.version_major, s.version_minor);
  json_t *doc = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I}", "archive", path, "container",
                          container_name(s.container), "version", version, "members",
                          (json_int_t)s.member_count, "first_step", (json_int_t)s.first_step, "last_step",
                          (json_int_t)s.last_step);
  json_object_set_new(doc, "run_id", s.run_id ? json_string(s.run_id) : json_null());
  json_object_set_new(doc, "keyframe_every", s.keyframe_every ? json_integer((json_int_t)s.keyframe_every)
                                                              : json_null());
  return doc;
}

static int run_list(const char *path, const history_job *j) {
  dcr_history *h;
  dcr_detail d;
  int err = open_history(path, &h, &d);
  if (err) { /* as inspect --json: a document that says why, and the error line */
    if (j->json) {
      json_t *doc = json_pack("{s:s}", "archive", j->shown);
      json_object_set_new(doc, "error", cli_error_json(err, "archive", &d));
      cli_print_json(doc);
    }
    cli_report(reported(path, j), err, &d);
    return cli_exit_code(err);
  }
  dcr_history_summary s;
  dcr_history_info(h, &s);
  if (j->json) {
    json_t *doc = summary_json(j->shown, h), *members = json_array();
    for (uint64_t i = 0; i < s.member_count; i++) json_array_append_new(members, member_json(h, i));
    json_object_set_new(doc, "member_list", members);
    cli_print_json(doc);
    dcr_history_free(h);
    return CLI_OK;
  }
  printf("%s: history archive %u.%u (%s), steps %llu to %llu, %llu members", j->shown, s.version_major,
         s.version_minor, container_name(s.container), (unsigned long long)s.first_step,
         (unsigned long long)s.last_step, (unsigned long long)s.member_count);
  if (s.run_id) printf(", run "), cli_put_escaped(stdout, s.run_id, strlen(s.run_id));
  if (s.keyframe_every) printf(", a keyframe every %llu steps", (unsigned long long)s.keyframe_every);
  printf("\n%10s  %-8s  %10s  %-32s  %s\n", "STEP", "KIND", "SIZE", "STATE", "NAME");
  for (uint64_t i = 0; i < s.member_count; i++) {
    dcr_history_member m;
    char state[33], size[32];
    dcr_history_member_get(h, i, &m);
    cli_hex(m.state, 16, state);
    printf("%10llu  %-8s  %10s  %s  ", (unsigned long long)m.step, kind_name(m.kind), cli_bytes(m.size, size),
           state);
    cli_put_escaped(stdout, m.name, strlen(m.name));
    if (m.directory) printf("/ (%llu files)", (unsigned long long)m.file_count);
    putchar('\n');
  }
  dcr_history_free(h);
  return CLI_OK;
}

static int run_verify(const char *path, const history_job *j) {
  dcr_history *h;
  dcr_detail d;
  int err = open_history(path, &h, &d);
  if (!err) err = dcr_history_verify(h, &j->o, &d);
  if (j->json) {
    json_t *doc = h ? summary_json(j->shown, h) : json_pack("{s:s}", "archive", j->shown);
    json_object_set_new(doc, "valid", json_boolean(!err));
    if (err) json_object_set_new(doc, "error", cli_error_json(err, "archive", &d));
    cli_print_json(doc);
  } else if (err) {
    cli_report(reported(path, j), err, &d);
  } else if (!j->common.quiet) {
    dcr_history_summary s;
    dcr_history_info(h, &s);
    fprintf(stderr, "%s: OK: %llu members, steps %llu to %llu; every digest, bundle, keyframe state id and "
            "link checked\n", j->shown, (unsigned long long)s.member_count, (unsigned long long)s.first_step,
            (unsigned long long)s.last_step);
  }
  dcr_history_free(h);
  return err ? cli_exit_code(err) : CLI_OK;
}

static int run_extract(const char *path, history_job *j) {
  if (!j->out) return cli_usage("history", "extract needs -o OUT");
  if (!j->has_step == !j->state) return cli_usage("history", "extract needs one of --step N and --state ID");
  if (!strcmp(j->out, "-")) return cli_usage("history", "extract writes a file: -o - is not supported");
  const char *inputs[] = {path};
  dcr_history *h;
  int rc = open_archive(path, &h, j);
  if (rc) return rc;
  dcr_history_member first; /* an archive of directory keyframes rebuilds a directory */
  dcr_history_member_get(h, 0, &first);
  if (first.directory ? cli_check_output_dir(j->out, j->force, "")
                      : cli_check_output(j->out, j->force, inputs, strcmp(path, "-") && !cli_is_url(path)))
    return dcr_history_free(h), CLI_USAGE;
  dcr_detail d;
  int err = DCR_OK;
  if (j->state) {
    uint8_t id[16];
    int ok = strlen(j->state) == 32;
    for (int i = 0; ok && i < 16; i++) ok = sscanf(j->state + 2 * i, "%2hhx", &id[i]) == 1;
    if (!ok) {
      dcr_history_free(h);
      return cli_usage("history", "bad --state '%s': 32 hex digits", j->state);
    }
    err = dcr_history_find_state(h, id, &j->step, &d);
  }
  if (!err) err = dcr_history_extract(h, j->step, j->out, &j->o, &d);
  if (err) {
    cli_report(reported(path, j), err, &d);
    dcr_history_free(h);
    return cli_exit_code(err);
  }
  if (!j->common.quiet) {
    dcr_history_summary s;
    dcr_history_info(h, &s);
    uint64_t key = 0, bundles = 0;
    char state[33];
    for (uint64_t i = 0; i < s.member_count; i++) {
      dcr_history_member m;
      dcr_history_member_get(h, i, &m);
      if (m.step > j->step) break;
      if (m.kind == DCR_HISTORY_KEYFRAME) key = m.step, bundles = 0;
      else bundles++;
      cli_hex(m.state, 16, state);
    }
    fprintf(stderr, "%s: step %llu, state %s (keyframe of step %llu and %llu bundle%s), %s\n", j->out,
            (unsigned long long)j->step, state, (unsigned long long)key, (unsigned long long)bundles,
            bundles == 1 ? "" : "s", j->o.verify == DCR_VERIFY_NONE ? "not checked" : "state id verified");
  }
  dcr_history_free(h);
  return CLI_OK;
}

static int run_write(const char *sub, const char *path, char **bundles, int n, history_job *j) {
  dcr_detail d;
  int err;
  if (!strcmp(sub, "create")) {
    if (!j->keyframe) return cli_usage("history", "create needs --keyframe CKPT");
    if (cli_check_checkpoint(j->keyframe)) return CLI_USAGE;
    const char *inputs[64];
    size_t k = 0;
    inputs[k++] = j->keyframe;
    for (int i = 0; i < n && k < 64; i++) inputs[k++] = bundles[i];
    if (cli_check_output(path, j->force, inputs, k)) return CLI_USAGE;
    j->o.first_step = j->step;
    j->o.no_replace = !j->force;
    err = dcr_history_create(path, j->keyframe, (const char *const *)bundles, (size_t)n, &j->o, &d);
  } else {
    if (j->keyframe || j->has_step || j->o.run_id || j->o.container)
      return cli_usage("history", "append takes bundles only (the archive says the rest)");
    if (n == 0) return cli_usage("history", "append needs one or more BUNDLEs");
    err = dcr_history_append(path, (const char *const *)bundles, (size_t)n, &j->o, &d);
  }
  if (err) {
    cli_report(path, err, &d);
    return cli_exit_code(err);
  }
  if (!j->common.quiet) {
    dcr_history *h;
    if (open_archive(path, &h, j)) return CLI_OK; /* written; reported by open_archive */
    dcr_history_summary s;
    dcr_history_info(h, &s);
    fprintf(stderr, "%s: %s: steps %llu to %llu, %llu members (%s)\n", path, !strcmp(sub, "create") ? "created" :
            "appended", (unsigned long long)s.first_step, (unsigned long long)s.last_step,
            (unsigned long long)s.member_count, container_name(s.container));
    dcr_history_free(h);
  }
  return CLI_OK;
}

static int run_recover(const char *path, char **rest, int n, const history_job *j) {
  if (n) return cli_usage("history", "recover takes one ARCHIVE (from '%s' on is too many)", rest[0]);
  dcr_detail d;
  int rolled, err = dcr_history_recover(path, &j->o, &rolled, &d);
  if (err) {
    cli_report(path, err, &d);
    return cli_exit_code(err);
  }
  if (!j->common.quiet)
    fprintf(stderr, "%s: %s\n", path, rolled ? "rolled back an append that did not finish: the archive is as it "
            "was before it" : "no unfinished append");
  return CLI_OK;
}

static int run(int argc, char **argv, history_job *j) {
  if (cli_arg_count("history", argc, argv, 2, -1, "a subcommand and an ARCHIVE")) return CLI_USAGE;
  const char *sub = argv[optind], *path = argv[optind + 1];
  char **rest = argv + optind + 2;
  int n = argc - optind - 2;
  int reads = !strcmp(sub, "list") || !strcmp(sub, "verify") || !strcmp(sub, "extract");
  if (reads && n) return cli_usage("history", "%s takes one ARCHIVE (from '%s' on is too many)", sub, rest[0]);
  if (j->json && strcmp(sub, "list") && strcmp(sub, "verify")) return cli_usage("history", "--json is for list and verify");
  if (!reads && !strcmp(path, "-")) return cli_usage("history", "%s writes a file: ARCHIVE cannot be -", sub);
  if (!reads && cli_is_url(path))
    return cli_usage("history", "%s writes a local file: ARCHIVE cannot be a URL (list, verify and extract "
                     "read one)", sub);
  j->shown = cli_shown(path, j->shown_buf, sizeof j->shown_buf);
  if (!strcmp(sub, "list") || !strcmp(sub, "verify")) {
    /* Nothing is written: an interrupt may end the process where it stands. */
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    return !strcmp(sub, "list") ? run_list(path, j) : run_verify(path, j);
  }
  if (!strcmp(sub, "extract")) return run_extract(path, j);
  if (!strcmp(sub, "create") || !strcmp(sub, "append")) return run_write(sub, path, rest, n, j);
  if (!strcmp(sub, "recover")) return run_recover(path, rest, n, j);
  return cli_usage("history", "unknown subcommand '%s' (create, append, list, verify, extract or recover)", sub);
}

int cmd_history(int argc, char **argv) {
  static const struct option longs[] = {CLI_COMMON_LONG_OPTIONS,
                                        {"keyframe", required_argument, NULL, OPT_KEYFRAME},
                                        {"step", required_argument, NULL, OPT_STEP},
                                        {"state", required_argument, NULL, OPT_STATE},
                                        {"keyframe-every", required_argument, NULL, OPT_EVERY},
                                        {"run-id", required_argument, NULL, OPT_RUN_ID},
                                        {"container", required_argument, NULL, OPT_CONTAINER},
                                        {"output", required_argument, NULL, 'o'},
                                        {"verify", required_argument, NULL, OPT_VERIFY},
                                        {"max-size", required_argument, NULL, OPT_MAX},
                                        {"threads", required_argument, NULL, OPT_THREADS},
                                        {"no-sync", no_argument, NULL, OPT_NO_SYNC},
                                        {"force", no_argument, NULL, 'f'},
                                        {"json", no_argument, NULL, OPT_JSON},
                                        {"require-signature", required_argument, NULL, OPT_SIGNED_BY},
                                        CLI_HTTP_LONG_OPTIONS,
                                        {NULL, 0, NULL, 0}};
  history_job j = {0};
  dcr_keyring *ring = NULL; /* --require-signature: the trusted keys */
  dcr_history_options_default(&j.o);
  j.o.cancel = &cli_interrupted;
  cli_common_init(&j.common, "history");
  int c, stop = 0;
  uint64_t v;
  while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT "o:f", longs, NULL)) != -1) {
    if (cli_common_option(&j.common, c, usage, &stop)) {
      if (stop) return dcr_keyring_free(ring), CLI_OK;
      continue;
    }
    if (cli_http_option("history", c)) continue;
    int rc;
    switch (c) {
      case OPT_SIGNED_BY:
        if ((rc = cli_trust_key(&ring, "history", optarg))) return dcr_keyring_free(ring), rc;
        break;
      case OPT_KEYFRAME: j.keyframe = optarg; break;
      case OPT_STEP:
        if (cli_parse_uint(optarg, ((uint64_t)1 << 53) - 1, &j.step)) return cli_usage("history", "bad --step '%s'", optarg);
        j.has_step = 1;
        break;
      case OPT_STATE: j.state = optarg; break;
      case OPT_EVERY:
        if (cli_parse_uint(optarg, ((uint64_t)1 << 53) - 1, &v) || v == 0)
          return cli_usage("history", "bad --keyframe-every '%s' (1 or more)", optarg);
        j.o.keyframe_every = v;
        break;
      case OPT_RUN_ID: j.o.run_id = optarg; break;
      case OPT_CONTAINER:
        if (!strcmp(optarg, "tar")) j.o.container = DCR_HISTORY_TAR;
        else if (!strcmp(optarg, "tar.zst")) j.o.container = DCR_HISTORY_TAR_ZSTD;
        else if (!strcmp(optarg, "zip")) j.o.container = DCR_HISTORY_ZIP;
        else return cli_usage("history", "bad --container '%s' (tar, tar.zst or zip)", optarg);
        break;
      case 'o': j.out = optarg; break;
      case OPT_VERIFY:
        if (!strcmp(optarg, "full")) j.o.verify = DCR_VERIFY_FULL;
        else if (!strcmp(optarg, "chunk")) j.o.verify = DCR_VERIFY_CHUNK;
        else if (!strcmp(optarg, "none")) j.o.verify = DCR_VERIFY_NONE;
        else return cli_usage("history", "bad --verify '%s' (full, chunk or none)", optarg);
        break;
      case OPT_MAX:
        if (cli_parse_size(optarg, &j.o.max_target_size)) return cli_usage("history", "bad --max-size '%s'", optarg);
        break;
      case OPT_THREADS:
        if (cli_parse_uint(optarg, 1024, &v)) return cli_usage("history", "bad --threads '%s'", optarg);
        j.o.threads = (unsigned)v;
        break;
      case OPT_NO_SYNC: j.o.sync = 0; break;
      case 'f': j.force = 1; break;
      case OPT_JSON: j.json = 1; break;
      default: return cli_bad_option("history", c, argv);
    }
  }
  j.o.require_signature = ring;
  j.o.max_memory = cli_limits.max_memory; /* --memory: create and append too */
  int rc = run(argc, argv, &j);
  dcr_keyring_free(ring);
  return rc;
}
