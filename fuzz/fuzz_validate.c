/*
 * fuzz_validate.c - a whole bundle, as `dcr validate` checks it: open (header,
 * every section, manifest, metadata, identities, index, footer) and verify (every
 * chunk decoded without a base). Opening from memory and from a file must agree.
 * Input: a bundle.
 */
#include "fuzz_common.h"

#define FUZZ_MAX_INPUT (1u << 20)

static int validate(dcr_reader *r) {
  dcr_bundle_info info;
  dcr_reader_info(r, &info);
  FUZZ_ASSERT(info.section_count >= 4); /* MANI IDEN INDX FOOT */
  for (uint64_t i = 0; i < info.entry_count; i++) {
    dcr_tensor_info t;
    dcr_reader_tensor(r, i, &t);
    FUZZ_ASSERT(t.name_length >= 1 && (t.base.present || t.target.present));
  }
  for (uint64_t i = 0; i < info.chunk_count; i++) {
    dcr_chunk_info c;
    dcr_reader_chunk(r, i, &c);
    FUZZ_ASSERT(c.tensor < info.entry_count && c.payload_length >= DCR__RECORD_SIZE);
  }
  for (uint64_t i = 0; i < info.section_count; i++) {
    dcr_section_info s;
    dcr_reader_section(r, i, &s);
    FUZZ_ASSERT(s.offset % 64 == 0 && s.offset < info.bundle_size);
  }
  for (uint64_t i = 0; i < info.meta_count; i++) {
    dcr_meta m;
    dcr_reader_meta(r, i, &m);
    FUZZ_ASSERT(m.key && m.value);
  }
  dcr_detail d;
  return dcr_reader_verify(r, &d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > FUZZ_MAX_INPUT) return 0;
  dcr_limits lim;
  fuzz_limits(&lim);
  dcr_reader *r = NULL;
  dcr_detail d;
  int rc = dcr_reader_open_memory(&r, data, size, &lim, &d);
  FUZZ_ASSERT(rc == d.code);
  FUZZ_DEBUG("open: %s %s\n", dcr_error_name(rc), rc ? d.message : "");
  int verified = -1;
  if (rc == DCR_OK) {
    verified = validate(r);
    FUZZ_DEBUG("verify: %s\n", dcr_error_name(verified));
    dcr_reader_free(r);
  }
  /* the same through a file, which reads with pread into scratch buffers */
  const char *path = fuzz_path(0, "bundle");
  fuzz_write_file(path, data, size);
  int rc2 = dcr_reader_open_file(&r, path, &lim, &d);
  FUZZ_ASSERT(rc2 == rc);
  if (rc2 == DCR_OK) {
    FUZZ_ASSERT(validate(r) == verified);
    dcr_reader_free(r);
  }
  unlink(path);
  return 0;
}
