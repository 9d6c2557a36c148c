/*
 * explain.c - what to tell an operator whose checkpoint is not the one a bundle
 * was made for: the states the bundle names (SPEC.md §7), the input's own, and the
 * bundle's metadata, so that they can tell which bundle, or which checkpoint, they
 * need.
 */
#include <string.h>

#include "cli.h"

/* The hint for an input whose state id is known. */
static const char *hint(const dcr_bundle_info *info, const uint8_t id[16], int code) {
  int is_target = !memcmp(id, info->target_state, 16), is_base = !memcmp(id, info->base_state, 16);
  if (is_target && code == DCR_E_TARGET_MISMATCH)
    return "input holds the target's tensors, but its header or layout differs from the "
           "target file's";
  if (is_target) return "input is already this bundle's target";
  if (is_base && code == DCR_E_TARGET_MISMATCH) return "input is this bundle's base, not its target";
  if (is_base) return NULL; /* the right tensors: the message above says what differs */
  if (code == DCR_E_TARGET_MISMATCH) return "input is neither this bundle's base nor its target";
  return "input is neither this bundle's base nor its target; it needs the bundle whose base "
         "state is the input's ('dcr inspect BUNDLE' shows a bundle's states)";
}

void cli_explain_mismatch(dcr_reader *r, const char *input_path, int code) {
  if (code != DCR_E_BASE_MISMATCH && code != DCR_E_TARGET_MISMATCH) return;
  dcr_bundle_info info;
  char hex[33];
  dcr_reader_info(r, &info);
  cli_hex(info.base_state, 16, hex);
  fprintf(stderr, "  bundle expects base state %s\n", hex);
  cli_hex(info.target_state, 16, hex);
  fprintf(stderr, "  bundle makes target state %s\n", hex);
  dcr_checkpoint *ck = NULL;
  dcr_detail d;
  uint8_t id[16];
  int err = dcr_checkpoint_open(&ck, input_path, info.kind, &cli_limits, &d);
  if (!err) err = dcr_checkpoint_state_id(ck, 0, id, &d);
  dcr_checkpoint_free(ck);
  if (err) {
    fprintf(stderr, "  input cannot be read as a %s checkpoint: %s: %s\n", cli_kind_name(info.kind),
            dcr_error_name(err), d.message);
  } else {
    cli_hex(id, 16, hex);
    fprintf(stderr, "  input has state %s\n", hex);
  }
  cli_print_meta(r, "bundle metadata");
  const char *h = err ? NULL : hint(&info, id, code);
  if (h) fprintf(stderr, "  hint: %s\n", h);
}

void cli_put_meta(FILE *f, dcr_reader *r, const char *before, const char *between,
                  const char *after) {
  dcr_bundle_info info;
  dcr_reader_info(r, &info);
  for (uint64_t i = 0; i < info.meta_count; i++) {
    dcr_meta m;
    dcr_reader_meta(r, i, &m);
    fputs(before, f);
    cli_put_escaped(f, m.key, strlen(m.key));
    fputs(between, f);
    cli_put_escaped(f, m.value, strlen(m.value));
    fputs(after, f);
  }
}

void cli_print_meta(dcr_reader *r, const char *label) {
  dcr_bundle_info info;
  dcr_reader_info(r, &info);
  if (!info.meta_count) return;
  fprintf(stderr, "  %s:", label);
  cli_put_meta(stderr, r, " ", "=", "");
  fputc('\n', stderr);
}
