/*
 * fuzz_chunk.c - the chunk decoders (SPEC.md §9): XOR, overwrite and delta, dense
 * and sparse, stored and zstd, DELTA_CLASSED (§9.4) and DELTA_BANDED (§9.5), for every
 * dtype (DELTA_BANDED's walks and writer are fuzzed differentially in fuzz_banded.c).
 *
 * Input: a 10-byte header, then the encoded data of one chunk:
 *   0: encoding (any value; 1..8 are defined)   1: compression (0, 1, or other)
 *   2: dtype, 1 + byte % 22 (every dtype of 1.1) 3..6: u32 count
 *   7..8: u16, n = 1 + value % (32768 / esize)  9: seed of the base chunk's bytes
 * The chunk is decoded without a base (as verify does) and applied to a base
 * chunk of exactly n elements (as apply does). After a successful apply exactly
 * `count` elements differ from the base (SPEC.md §9.2).
 */
#include "fuzz_common.h"

#define HEADER 10
#define FUZZ_MAX_INPUT (HEADER + 6 * 32768 + 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < HEADER || size > FUZZ_MAX_INPUT) return 0;
  int dtype = 1 + data[2] % 22;
  unsigned esize = dcr_dtype_size(dtype);
  size_t n = 1 + dcr__le16(data + 7) % (32768 / esize), bytes = n * esize;
  dcr__chunk c;
  memset(&c, 0, sizeof c);
  c.encoding = data[0];
  c.compression = data[1];
  c.count = dcr__le32(data + 3);
  c.payload_length = DCR__RECORD_SIZE + size - HEADER;
  const uint8_t *enc = data + HEADER;
  size_t length = size - HEADER;

  dcr__chunk_decoder dd;
  FUZZ_ASSERT(dcr__chunk_decoder_init(&dd, bytes, DCR_FORMAT_MINOR) == DCR_OK);
  dcr_detail d;
  int verified = dcr__decode_chunk(&dd, &c, enc, length, dtype, n, NULL, &d);

  uint8_t *chunk = malloc(bytes), *orig = malloc(bytes);
  FUZZ_ASSERT(chunk && orig);
  for (size_t i = 0; i < bytes; i++) chunk[i] = fuzz_pattern(data[9], i);
  memcpy(orig, chunk, bytes);
  int applied = dcr__decode_chunk(&dd, &c, enc, length, dtype, n, chunk, &d);

  FUZZ_DEBUG("verify: %s, apply: %s %s\n", dcr_error_name(verified), dcr_error_name(applied),
             applied ? d.message : "");
  /* apply checks everything verify checks, and for XOR nothing more */
  if (verified != DCR_OK) FUZZ_ASSERT(applied == verified);
  if (c.encoding == DCR_ENC_XOR_DENSE || c.encoding == DCR_ENC_XOR_SPARSE)
    FUZZ_ASSERT(applied == verified);
  if (applied == DCR_OK) {
    FUZZ_ASSERT(dcr__count_changed(orig, chunk, n, esize) == c.count);
  } else if (c.encoding == DCR_ENC_XOR_DENSE || c.encoding == DCR_ENC_OVERWRITE_DENSE) {
    FUZZ_ASSERT(memcmp(orig, chunk, bytes) == 0); /* dense: untouched on failure */
  }
  free(chunk);
  free(orig);
  dcr__chunk_decoder_free(&dd);
  return 0;
}
