/*
 * fuzz_apply.c - dcr_apply of a fuzzed bundle to a fixed small base (SPEC.md §10):
 * the fixed safetensors base of fuzz_common.h for safetensors bundles, the fixed
 * raw base for raw ones. Input: a bundle.
 *
 * Invariants: no crash or out-of-bounds access (ASan); on failure no output and
 * no temporary file is left; on success the output has the target's size and,
 * in a production build, is the bundle's target (dcr_check_target).
 */
#include "fuzz_common.h"

#define FUZZ_MAX_INPUT (1u << 20)

static int ready;

static void init_bases(void) {
  fuzz_buf b = {0};
  fuzz_base_safetensors(&b);
  fuzz_write_file(fuzz_path(0, "base.safetensors"), b.p, b.n);
  fuzz_base_raw(&b);
  fuzz_write_file(fuzz_path(0, "base.raw"), b.p, b.n);
  fuzz_buf_free(&b);
  ready = 1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  init_bases();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > FUZZ_MAX_INPUT) return 0;
  if (!ready) init_bases();
  dcr_limits lim;
  fuzz_limits(&lim);
  dcr_reader *r = NULL;
  dcr_detail d;
  int rc = dcr_reader_open_memory(&r, data, size, &lim, &d);
  FUZZ_DEBUG("open: %s %s\n", dcr_error_name(rc), rc ? d.message : "");
  if (rc != DCR_OK) return 0;
  dcr_bundle_info info;
  dcr_reader_info(r, &info);
  const char *base = fuzz_path(0, info.kind == DCR_KIND_RAW ? "base.raw" : "base.safetensors");
  const char *out = fuzz_path(1, "out");
  dcr_apply_options o;
  dcr_apply_options_default(&o);
  o.threads = 1;
  o.sync = 0;
  rc = dcr_apply(r, base, out, &o, &d);
  FUZZ_DEBUG("apply: %s %s\n", dcr_error_name(rc), rc ? d.message : "");
  struct stat st;
  if (rc != DCR_OK) {
    FUZZ_ASSERT(d.code == rc);
    FUZZ_ASSERT(!fuzz_exists(out));
    FUZZ_ASSERT(fuzz_dir_entries(fuzz_dir()) == 2); /* the bases: no temporary left */
  } else {
    FUZZ_ASSERT(stat(out, &st) == 0 && (uint64_t)st.st_size == info.target_size);
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
    /* with real checksums, success means the output is the bundle's target */
    FUZZ_ASSERT(dcr_check_target(r, out, &o, &d) == DCR_OK);
#endif
    unlink(out);
  }
  dcr_reader_free(r);
  return 0;
}
