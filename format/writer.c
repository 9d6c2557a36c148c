/*
 * writer.c - emits a bundle front to back through a sink (SPEC.md §4), so that
 * it can go to a pipe or a socket as it is made: nothing is patched afterwards.
 */
#include <stdlib.h>
#include "xxh.h"
#include <zstd.h>

#include "format.h"

static int emit(dcr__writer *w, const void *p, size_t n, dcr_detail *d) {
  if (!n) return DCR_OK;
  if (w->write(w->opaque, p, n)) return dcr__fail(d, DCR_E_IO, "cannot write the bundle");
  w->offset += n;
  return DCR_OK;
}

int dcr__writer_header(dcr__writer *w, dcr_detail *d) {
  uint8_t h[DCR__HEADER_SIZE];
  dcr__header_write(h, w->minor);
  return emit(w, h, sizeof h, d);
}

static uint16_t flags_of(uint32_t type) {
  return (uint16_t)(type == DCR__SEC_META || type == DCR__SEC_SIGN ? 0 : DCR__FLAG_CRITICAL);
}

/* §16.1 (R-WRT-2): no section, stored or decompressed, that a reader with the
 * default limits would refuse. */
static int check_section_size(size_t length, dcr_detail *d) {
  dcr_limits lim;
  dcr_limits_default(&lim);
  if (length > lim.max_section_size)
    return dcr__fail(d, DCR_E_LIMIT, "a section of %zu bytes is over the default limit %llu",
                     length, (unsigned long long)lim.max_section_size);
  return DCR_OK;
}

static int write_section(dcr__writer *w, uint32_t type, uint8_t compression, const void *head,
                         size_t head_length, const void *body, size_t body_length,
                         uint64_t *offset, dcr_detail *d) {
  static const uint8_t zeros[64];
  int rc = check_section_size(head_length + body_length, d);
  if (rc) return rc;
  XXH3_state_t st;
  XXH3_INITSTATE(&st);
  XXH3_64bits_reset(&st);
  XXH3_64bits_update(&st, head, head_length);
  XXH3_64bits_update(&st, body, body_length);
  dcr__section s = {.type = type,
                    .flags = flags_of(type),
                    .compression = compression,
                    .length = head_length + body_length,
                    .payload_check = XXH3_64bits_digest(&st)};
  uint8_t h[DCR__SECTION_HEADER_SIZE];
  dcr__section_header_write(h, &s);
  if (offset) *offset = w->offset;
  if (w->section) w->section(w->opaque, type, w->offset);
  if ((rc = emit(w, h, sizeof h, d)) || (rc = emit(w, head, head_length, d)) ||
      (rc = emit(w, body, body_length, d)))
    return rc;
  return emit(w, zeros, (size_t)(dcr__align64(w->offset) - w->offset), d);
}

int dcr__writer_section(dcr__writer *w, uint32_t type, const void *head, size_t head_length,
                        const void *body, size_t body_length, uint64_t *offset, dcr_detail *d) {
  return write_section(w, type, DCR_COMP_NONE, head, head_length, body, body_length, offset, d);
}

int dcr__writer_packed_section(dcr__writer *w, uint32_t type, const void *payload,
                               size_t length, dcr_detail *d) {
  int rc = check_section_size(length, d); /* the decompressed size (§4.4) */
  if (rc) return rc;
  if (w->level > 0) {
    size_t cap = ZSTD_compressBound(length);
    uint8_t *z = malloc(cap);
    if (!z) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate %zu bytes", cap);
    size_t n = ZSTD_compress(z, cap, payload, length, w->level);
    if (!ZSTD_isError(n) && n < length)
      rc = write_section(w, type, DCR_COMP_ZSTD, z, n, NULL, 0, NULL, d);
    else
      rc = write_section(w, type, DCR_COMP_NONE, payload, length, NULL, 0, NULL, d);
    free(z);
    return rc;
  }
  return write_section(w, type, DCR_COMP_NONE, payload, length, NULL, 0, NULL, d);
}

int dcr__writer_footer(dcr__writer *w, uint64_t iden_offset, uint64_t indx_offset,
                       uint64_t chunk_count, dcr_detail *d) {
  uint8_t f[32];
  dcr__put64(f, DCR__HEADER_SIZE);
  dcr__put64(f + 8, iden_offset);
  dcr__put64(f + 16, indx_offset);
  dcr__put64(f + 24, chunk_count);
  return write_section(w, DCR__SEC_FOOT, DCR_COMP_NONE, f, sizeof f, NULL, 0, NULL, d);
}
