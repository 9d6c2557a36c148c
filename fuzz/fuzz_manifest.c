/*
 * fuzz_manifest.c - bundle header, section header, manifest and metadata parsing
 * (SPEC.md §4.1, §4.2, §4.4, §6).
 *
 * Input: one mode byte, then the bytes for that mode:
 *   mode % 5 == 0: a bundle header (64 bytes) followed by section headers (32 each)
 *   mode % 5 == 1: a MANI payload, stored
 *   mode % 5 == 2: a MANI payload, stored as a zstd frame (section compression 1)
 *   mode % 5 == 3: a META payload
 *   mode % 5 == 4: a safetensors header's JSON, parsed as one document and member
 *                  by member (the path of large headers): accepted by both or by
 *                  neither (member by member, an error is provisional: the whole
 *                  parse gives its code)
 * A manifest that parses must serialize back to exactly the bytes parsed.
 */
#include "fuzz_common.h"
#include "../format/checkpoint.h"

#define FUZZ_MAX_INPUT (1u << 20)

/* DCR_TEST_JSON_MEMBERS (format/safetensors.c): "1" takes the member-by-member
 * path, "2" also keeps its verdict instead of confirming it with a whole parse. */
static int parse_header(const char *mode, const uint8_t *text, size_t n, const dcr_limits *lim) {
  if (mode) setenv("DCR_TEST_JSON_MEMBERS", mode, 1);
  else unsetenv("DCR_TEST_JSON_MEMBERS");
  uint8_t *p = malloc(8 + n);
  FUZZ_ASSERT(p);
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)((uint64_t)n >> (8 * i));
  if (n) memcpy(p + 8, text, n);
  dcr__checkpoint ck;
  dcr_detail d;
  dcr__detail_init(&d);
  int rc = dcr__safetensors_parse(p, 8 + n, 0, lim, DCR_FORMAT_MINOR, &ck, &d);
  if (!rc) dcr__checkpoint_free(&ck);
  free(p);
  return rc;
}

static void check_manifest(const uint8_t *p, size_t n, const dcr_limits *lim) {
  uint8_t *copy = malloc(n ? n : 1); /* dcr__manifest_parse takes ownership */
  FUZZ_ASSERT(copy);
  if (n) memcpy(copy, p, n);
  dcr__manifest m;
  memset(&m, 0, sizeof m);
  dcr_detail d;
  if (dcr__manifest_parse(copy, n, lim, DCR_FORMAT_MINOR, &m, &d) != DCR_OK) return;
  fuzz_manifest_same_bytes(&m, p, n);
  /* what IDEN and apply compute from a manifest */
  uint8_t id[16];
  dcr__state_id(&m, DCR__HAS_BASE, id);
  dcr__state_id(&m, DCR__HAS_TARGET, id);
  FUZZ_ASSERT(dcr__iden_size(&m) >= 32);
  for (uint64_t i = 0; i < m.entry_count; i++)
    if (m.entries[i].presence & DCR__HAS_TARGET)
      (void)dcr__chunk_count(m.entries[i].target.byte_length, m.chunk_size);
  dcr__manifest_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > FUZZ_MAX_INPUT) return 0;
  dcr_limits lim;
  fuzz_limits(&lim);
  const uint8_t *p = data + 1;
  size_t n = size - 1;
  switch (data[0] % 5) {
    case 0: {
      unsigned minor;
      if (dcr__header_parse(p, n, &minor, NULL) != DCR_OK) return 0;
      for (size_t at = DCR__HEADER_SIZE; at + DCR__SECTION_HEADER_SIZE <= n;
           at += DCR__SECTION_HEADER_SIZE) {
        dcr__section s;
        dcr_detail d;
        if (dcr__section_header_parse(p + at, at, &s, &d) != DCR_OK) break;
        char name[5];
        dcr__section_type_name(s.type, name);
        FUZZ_ASSERT(strlen(name) == 4);
      }
      return 0;
    }
    case 1:
      check_manifest(p, n, &lim);
      return 0;
    case 2: {
      uint8_t *inflated = NULL;
      size_t length = 0;
      if (dcr__section_inflate(p, n, lim.max_section_size, lim.max_memory, 0, NULL, &inflated, &length, NULL) == DCR_OK) {
        FUZZ_ASSERT(length <= lim.max_section_size);
        check_manifest(inflated, length, &lim);
      }
      free(inflated);
      return 0;
    }
    case 4: {
      int whole = parse_header(NULL, p, n, &lim);
      FUZZ_ASSERT((parse_header("2", p, n, &lim) == DCR_OK) == (whole == DCR_OK));
      unsetenv("DCR_TEST_JSON_MEMBERS");
      return 0;
    }
    default: {
      dcr__metadata m;
      memset(&m, 0, sizeof m);
      if (dcr__meta_parse(p, n, &lim, &m, NULL) == DCR_OK) {
        for (uint64_t i = 0; i < m.count; i++) {
          FUZZ_ASSERT(m.pairs[i].key && m.pairs[i].value);
          FUZZ_ASSERT(strlen(m.pairs[i].key) <= lim.max_name_length);
        }
        dcr__meta_free(&m);
      }
      return 0;
    }
  }
}
