/*
 * header.c - the 64-byte bundle header (SPEC.md §4.1).
 */
#include "xxh.h"

#include "format.h"

static const uint8_t magic[8] = {0x89, 'D', 'C', 'R', '\r', '\n', 0x1A, '\n'};

void dcr__header_write(uint8_t out[DCR__HEADER_SIZE], unsigned minor) {
  memset(out, 0, DCR__HEADER_SIZE);
  memcpy(out, magic, sizeof magic);
  dcr__put16(out + 8, DCR_FORMAT_MAJOR);
  dcr__put16(out + 10, (uint16_t)minor);
  dcr__put64(out + 56, XXH3_64bits(out, 56));
}

int dcr__header_parse(const uint8_t *p, uint64_t available, unsigned *minor, dcr_detail *d) {
  /* A short file that does not even start like a bundle is "not a bundle". */
  size_t n = available < sizeof magic ? (size_t)available : sizeof magic;
  if (n && memcmp(p, magic, n)) return dcr__fail(d, DCR_E_MAGIC, "bad magic: not a DCR bundle");
  if (available < DCR__HEADER_SIZE)
    return dcr__fail(d, DCR_E_TRUNCATED, "file is %llu bytes, shorter than the 64-byte header",
                     (unsigned long long)available);
  if (!DCR__CHECKSUM_OK(XXH3_64bits(p, 56) == dcr__le64(p + 56)))
    return dcr__fail(d, DCR_E_CHECKSUM, "bundle header checksum does not match");
  dcr__detail_at(d, NULL, 8);
  unsigned major = dcr__le16(p + 8);
  if (major != DCR_FORMAT_MAJOR)
    return dcr__fail(d, DCR_E_VERSION, "format version %u.%u; this reader implements %u.x",
                     major, dcr__le16(p + 10), DCR_FORMAT_MAJOR);
  for (int i = 12; i < 56; i++)
    if (p[i]) {
      if (d) d->offset = (uint64_t)i;
      return dcr__fail(d, DCR_E_RESERVED, "reserved header byte %d is 0x%02x", i, p[i]);
    }
  *minor = dcr__le16(p + 10);
  return DCR_OK;
}
