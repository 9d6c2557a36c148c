/*
 * identity.c - tensor hashes and state ids: the IDEN section (SPEC.md §7).
 */
#include "xxh.h"

#include "format.h"

void dcr__state_begin(XXH3_state_t *st) {
  XXH3_INITSTATE(st);
  XXH3_128bits_reset(st);
}

void dcr__state_add(XXH3_state_t *st, const char *name, uint16_t name_length,
                    const dcr__desc *t) {
  uint8_t buf[8];
  dcr__put16(buf, name_length);
  XXH3_128bits_update(st, buf, 2);
  XXH3_128bits_update(st, name, name_length);
  buf[0] = (uint8_t)t->dtype;
  buf[1] = (uint8_t)t->rank;
  XXH3_128bits_update(st, buf, 2);
  for (unsigned i = 0; i < t->rank; i++) {
    dcr__put64(buf, t->dims[i]);
    XXH3_128bits_update(st, buf, 8);
  }
  dcr__put64(buf, t->byte_length);
  XXH3_128bits_update(st, buf, 8);
  XXH3_128bits_update(st, t->hash, 16);
}

void dcr__state_end(XXH3_state_t *st, uint8_t out[16]) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
  memcpy(out, c.digest, 16);
}

void dcr__state_id(const dcr__manifest *m, unsigned side, uint8_t out[16]) {
  XXH3_state_t st;
  dcr__state_begin(&st);
  for (uint64_t i = 0; i < m->entry_count; i++) {
    const dcr__entry *e = &m->entries[i];
    if ((e->presence & side) && !(e->raw & side)) /* a set's raw members: R-SET-3 */
      dcr__state_add(&st, e->name, e->name_length, side == DCR__HAS_BASE ? &e->base : &e->target);
  }
  dcr__state_end(&st, out);
}

size_t dcr__iden_size(const dcr__manifest *m) {
  size_t n = 32;
  for (uint64_t i = 0; i < m->entry_count; i++)
    n += 16 * (size_t)(((m->entries[i].presence & DCR__HAS_BASE) != 0) +
                       ((m->entries[i].presence & DCR__HAS_TARGET) != 0));
  return n;
}

void dcr__iden_write(const dcr__manifest *m, uint8_t *out) {
  dcr__state_id(m, DCR__HAS_BASE, out);
  dcr__state_id(m, DCR__HAS_TARGET, out + 16);
  out += 32;
  for (uint64_t i = 0; i < m->entry_count; i++) {
    const dcr__entry *e = &m->entries[i];
    if (e->presence & DCR__HAS_BASE) memcpy(out, e->base.hash, 16), out += 16;
    if (e->presence & DCR__HAS_TARGET) memcpy(out, e->target.hash, 16), out += 16;
  }
}

int dcr__iden_parse(const uint8_t *p, size_t length, dcr__manifest *m, uint8_t base_state[16],
                    uint8_t target_state[16], dcr_detail *d) {
  if (length != dcr__iden_size(m))
    return dcr__fail(d, DCR_E_STRUCTURE, "identities are %zu bytes; the manifest needs %zu",
                     length, dcr__iden_size(m));
  memcpy(base_state, p, 16);
  memcpy(target_state, p + 16, 16);
  p += 32;
  for (uint64_t i = 0; i < m->entry_count; i++) {
    dcr__entry *e = &m->entries[i];
    if (e->presence & DCR__HAS_BASE) memcpy(e->base.hash, p, 16), p += 16;
    if (e->presence & DCR__HAS_TARGET) memcpy(e->target.hash, p, 16), p += 16;
  }
  uint8_t id[16];
  dcr__state_id(m, DCR__HAS_BASE, id);
  if (!DCR__CHECKSUM_OK(memcmp(id, base_state, 16) == 0))
    return dcr__fail(d, DCR_E_CHECKSUM, "base state id does not match the tensor hashes");
  dcr__state_id(m, DCR__HAS_TARGET, id);
  if (!DCR__CHECKSUM_OK(memcmp(id, target_state, 16) == 0))
    return dcr__fail(d, DCR_E_CHECKSUM, "target state id does not match the tensor hashes");
  return DCR_OK;
}
