/*
 * fuzz_index.c - chunk records, CHNK sections, the INDX section and the footer
 * (SPEC.md §5, §8.2, §8.3), on a fixed valid manifest.
 *
 * At start-up the harness encodes the fixed base against a fixed target and keeps
 * that bundle's header, MANI and IDEN sections. Each input then supplies the CHNK
 * payloads and the INDX payload; the harness writes them as sections with valid
 * checksums (so this harness works in production builds too), adds the footer,
 * and opens the result. Input:
 *   byte 0: bits 0-3 number of CHNK sections; bit 4: generate the index from the
 *           chunk records and XOR the rest of the input into it; bit 5: also
 *           decode every chunk (dcr_reader_verify)
 *   per chunk: u16 length, then that many payload bytes (record + encoded data)
 *   the rest: the INDX payload (or the XOR mask, with bit 4)
 */
#include "fuzz_common.h"

#define FUZZ_MAX_INPUT (1u << 18)

static fuzz_buf skel_head; /* header and MANI section */
static fuzz_buf skel_iden; /* IDEN section */

static void init_skeleton(void) {
  fuzz_buf base = {0}, target = {0}, bundle = {0};
  fuzz_base_safetensors(&base);
  fuzz_index_target(&target);
  fuzz_write_file(fuzz_path(0, "base"), base.p, base.n);
  fuzz_write_file(fuzz_path(1, "target"), target.p, target.n);
  FUZZ_ASSERT(fuzz_encode(fuzz_path(0, "base"), fuzz_path(1, "target"), 4096, 3, 1, 0, &bundle) ==
              DCR_OK);
  dcr_reader *r;
  FUZZ_ASSERT(dcr_reader_open_memory(&r, bundle.p, bundle.n, NULL, NULL) == DCR_OK);
  for (uint64_t i = 0; i < r->section_count; i++) {
    const dcr__section *s = &r->sections[i];
    uint64_t end = dcr__align64(s->offset + DCR__SECTION_HEADER_SIZE + s->length);
    if (s->type == DCR__SEC_MANI) fuzz_put(&skel_head, bundle.p, (size_t)end);
    if (s->type == DCR__SEC_IDEN) fuzz_put(&skel_iden, bundle.p + s->offset, (size_t)(end - s->offset));
  }
  FUZZ_ASSERT(skel_head.n && skel_iden.n);
  dcr_reader_free(r);
  fuzz_buf_free(&base);
  fuzz_buf_free(&target);
  fuzz_buf_free(&bundle);
  unlink(fuzz_path(0, "base"));
  unlink(fuzz_path(1, "target"));
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  init_skeleton();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > FUZZ_MAX_INPUT) return 0;
  if (!skel_head.n) init_skeleton();
  unsigned nchunks = data[0] & 15, auto_index = data[0] & 16, verify = data[0] & 32;
  const uint8_t *p = data + 1;
  size_t left = size - 1;
  fuzz_buf out = {0};
  fuzz_put(&out, skel_head.p, skel_head.n);
  dcr__writer w = {.write = fuzz_sink, .opaque = &out, .offset = out.n, .level = 0};
  uint8_t index[15 * DCR__RECORD_SIZE];
  unsigned made = 0;
  for (; made < nchunks; made++) {
    if (left < 2) break;
    size_t n = dcr__le16(p);
    p += 2, left -= 2;
    if (n > left) n = left;
    uint64_t at;
    FUZZ_ASSERT(dcr__writer_section(&w, DCR__SEC_CHNK, p, n, NULL, 0, &at, NULL) == DCR_OK);
    /* an index record that repeats the chunk record, as a writer would */
    dcr__chunk c;
    memset(&c, 0, sizeof c);
    if (n >= DCR__RECORD_SIZE) dcr__chunk_record_parse(p, &c);
    c.offset = at;
    c.payload_length = n;
    dcr__index_record_write(index + made * DCR__RECORD_SIZE, &c);
    p += n, left -= n;
  }
  uint64_t iden_at = w.offset, indx_at;
  fuzz_put(&out, skel_iden.p, skel_iden.n);
  w.offset = out.n;
  if (auto_index) {
    size_t n = made * DCR__RECORD_SIZE;
    for (size_t i = 0; i < n && i < left; i++) index[i] ^= p[i];
    FUZZ_ASSERT(dcr__writer_section(&w, DCR__SEC_INDX, index, n, NULL, 0, &indx_at, NULL) == DCR_OK);
  } else {
    FUZZ_ASSERT(dcr__writer_section(&w, DCR__SEC_INDX, p, left, NULL, 0, &indx_at, NULL) == DCR_OK);
  }
  (void)iden_at;
  FUZZ_ASSERT(dcr__writer_footer(&w, iden_at, indx_at, made, NULL) == DCR_OK);

  dcr_limits lim;
  fuzz_limits(&lim);
  dcr_reader *r = NULL;
  dcr_detail d;
  int rc = dcr_reader_open_memory(&r, out.p, out.n, &lim, &d);
  FUZZ_DEBUG("open: %s %s\n", dcr_error_name(rc), rc ? d.message : "");
  if (rc == DCR_OK) {
    dcr_bundle_info info;
    dcr_reader_info(r, &info);
    FUZZ_ASSERT(info.chunk_count == made);
    for (uint64_t i = 0; i < info.chunk_count; i++) {
      dcr_chunk_info c;
      dcr_reader_chunk(r, i, &c);
      FUZZ_ASSERT(c.tensor < info.entry_count);
      dcr_tensor_info t;
      dcr_reader_tensor(r, c.tensor, &t);
      FUZZ_ASSERT(t.target.present);
      FUZZ_ASSERT(c.chunk < dcr__chunk_count(t.target.byte_length, info.chunk_size));
      FUZZ_ASSERT(c.count >= 1);
    }
    if (verify) {
      rc = dcr_reader_verify(r, &d);
      FUZZ_DEBUG("verify: %s %s\n", dcr_error_name(rc), rc ? d.message : "");
    }
    dcr_reader_free(r);
  } else {
    FUZZ_ASSERT(d.code != DCR_OK);
  }
  fuzz_buf_free(&out);
  return 0;
}
