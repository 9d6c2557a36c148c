/*
 * section.c - section headers (SPEC.md §4.2) and compressed sections (§4.4).
 */
#include <stdio.h>
#include <stdlib.h>
#include "xxh.h"

#include "format.h"

void dcr__section_header_write(uint8_t out[DCR__SECTION_HEADER_SIZE], const dcr__section *s) {
  dcr__put32(out, s->type);
  dcr__put16(out + 4, s->flags);
  out[6] = s->compression;
  out[7] = 0;
  dcr__put64(out + 8, s->length);
  dcr__put64(out + 16, s->payload_check);
  dcr__put64(out + 24, XXH3_64bits(out, 24));
}

void dcr__section_type_name(uint32_t type, char out[5]) {
  for (int i = 0; i < 4; i++) {
    char c = (char)(type >> (8 * i));
    out[i] = c >= 0x20 && c < 0x7F ? c : '?';
  }
  out[4] = '\0';
}

int dcr__section_header_parse(const uint8_t *p, uint64_t offset, dcr__section *s,
                              dcr_detail *d) {
  if (!DCR__CHECKSUM_OK(XXH3_64bits(p, 24) == dcr__le64(p + 24)))
    return dcr__fail(d, DCR_E_CHECKSUM, "section header checksum does not match");
  s->type = dcr__le32(p);
  s->flags = dcr__le16(p + 4);
  s->compression = p[6];
  s->length = dcr__le64(p + 8);
  s->payload_check = dcr__le64(p + 16);
  s->offset = offset;
  char name[5];
  dcr__section_type_name(s->type, name);
  dcr__detail_at(d, name, offset);
  if ((s->flags & ~DCR__FLAG_CRITICAL) || p[7])
    return dcr__fail(d, DCR_E_RESERVED, "reserved flag bits 0x%04x or byte 0x%02x set",
                     s->flags & ~DCR__FLAG_CRITICAL, p[7]);
  return DCR_OK;
}

int dcr__section_inflate(const uint8_t *stored, size_t length, uint64_t max, uint64_t budget,
                         uint64_t reserve, const volatile int *cancel, uint8_t **out,
                         size_t *out_length, dcr_detail *d) {
  *out = NULL;
  uint64_t size;
  size_t frame;
  int rc = dcr__zframe_check(stored, length, max < SIZE_MAX - 1 ? max : SIZE_MAX - 1,
                             DCR_E_LIMIT, UINT64_MAX, &size, &frame, d);
  if (rc) return rc;
  if (frame != length)
    return dcr__fail(d, DCR_E_DECOMPRESS, "payload is not exactly one zstd frame");
  /* Valid frames reach 32768 times their size (R-CMP-5): a 33 KB section may inflate
   * to 1 GiB. The budget is not a rule of the format but of this reader's memory,
   * so going over it is DCR_E_NOMEM, before anything is allocated. */
  if (size > budget || reserve > budget - size) {
    char more[64] = "";
    if (reserve) snprintf(more, sizeof more, " and parsing it needs %llu more", (unsigned long long)reserve);
    return dcr__fail(d, DCR_E_NOMEM, "the section inflates to %llu bytes%s, over the memory "
                     "budget of %llu (dcr_limits.max_memory, dcr --memory)", (unsigned long long)size,
                     more, (unsigned long long)budget);
  }
  uint8_t *buf = malloc(size ? (size_t)size : 1);
  ZSTD_DCtx *dctx = ZSTD_createDCtx();
  if (!buf || !dctx) rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate %llu bytes", (unsigned long long)size);
  else rc = dcr__zframe_inflate(dctx, stored, frame, buf, (size_t)size, cancel, d);
  ZSTD_freeDCtx(dctx);
  if (rc) {
    free(buf);
    return rc;
  }
  *out = buf;
  *out_length = (size_t)size;
  return DCR_OK;
}
