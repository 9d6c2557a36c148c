/*
 * sign.c - signing bundles and checking their signatures (SPEC.md §20).
 *
 * The signed message is a table of SHA-256 digests, not the bundle's bytes in one
 * stream: one digest per section, so that a reader that fetches sections by range
 * (the footer, the index, one chunk) can check each as it arrives; and one per
 * base and target tensor, over its 4096-byte pieces as the tensor hashes of §7
 * are, so that they are computed by the state id's parallel jobs
 * (dcr__checkpoint_sha256) and a reader holding a checkpoint can tell it is the
 * signed one, which XXH3 cannot say against someone who chose the checkpoint.
 */
#include <errno.h>
#include <sodium.h>
#include <stdlib.h>

#include "../codec/codec.h"
#include "../format/atomic.h"
#include "sign.h"

#define COPY_BLOCK ((size_t)1 << 20)

/* Points the detail at another place than the one it names (the SIGN section,
 * while its payload is read): where a section of the bundle is not what was signed. */
static void relocate(dcr_detail *d, const char *section, uint64_t offset) {
  if (!d) return;
  memset(d->section, 0, sizeof d->section);
  d->offset = DCR_NONE;
  dcr__detail_at(d, section, offset);
}

const char *dcr__sign_domain(unsigned major) {
  return major == DCR__SIGN_BUNDLE ? "DCR-SIGN-TABLE-2" : "DCR-SIGN-TABLE-1";
}

/* A failure of a signature check (every one is DCR_E_SIGNATURE, §20.4). */
static int bad(dcr_detail *d, const char *message) {
  return dcr__fail(d, DCR_E_SIGNATURE, "%s", message);
}

int dcr__sign_parse(const uint8_t *p, size_t length, dcr__sign *s, dcr_detail *d) {
  memset(s, 0, sizeof *s);
  if (length < DCR__SIGN_HEAD)
    return dcr__fail(d, DCR_E_SIGNATURE, "SIGN payload of %zu bytes is shorter than its head", length);
  s->major = dcr__le16(p);
  s->minor = dcr__le16(p + 2);
  s->signature_count = dcr__le32(p + 4);
  s->table_length = dcr__le64(p + 8);
  /* a later major version may sign other bytes: what this reader cannot check,
   * it does not accept */
  if (s->major != DCR__SIGN_CHECKPOINTS && s->major != DCR__SIGN_BUNDLE)
    return dcr__fail(d, DCR_E_SIGNATURE, "signature format %u.%u: only 1.x and 2.x are known",
                     s->major, s->minor);
  if (s->signature_count == 0) return bad(d, "SIGN holds no signature");
  uint64_t records = (uint64_t)s->signature_count * DCR__SIGN_RECORD, total;
  if (s->table_length < DCR__SIGN_TABLE_HEAD || dcr__add_overflow(s->table_length, records, &total) ||
      total != length - DCR__SIGN_HEAD)
    return dcr__fail(d, DCR_E_SIGNATURE, "SIGN payload of %zu bytes does not hold a table of %llu "
                     "bytes and %u signatures", length, (unsigned long long)s->table_length,
                     s->signature_count);
  const uint8_t *t = s->table = p + DCR__SIGN_HEAD;
  if (memcmp(t, dcr__sign_domain(s->major), 16))
    return dcr__fail(d, DCR_E_SIGNATURE, "the signed table of signature format %u.%u does not start "
                     "with %.16s", s->major, s->minor, dcr__sign_domain(s->major));
  s->sign_offset = dcr__le64(t + 80);
  s->section_count = dcr__le64(t + 88);
  s->digest_count = dcr__le64(t + 96);
  if (dcr__le64(t + 104)) return bad(d, "the signed table's reserved field is not zero");
  uint64_t a, b, want;
  if (dcr__mul_overflow(s->section_count, DCR__SIGN_SECTION_RECORD, &a) ||
      dcr__mul_overflow(s->digest_count, 32, &b) || dcr__add_overflow(a, b, &want) ||
      dcr__add_overflow(want, DCR__SIGN_TABLE_HEAD, &want) || want != s->table_length)
    return dcr__fail(d, DCR_E_SIGNATURE, "a signed table of %llu bytes cannot hold %llu sections "
                     "and %llu tensor digests", (unsigned long long)s->table_length,
                     (unsigned long long)s->section_count, (unsigned long long)s->digest_count);
  if (s->major == DCR__SIGN_BUNDLE && s->digest_count)
    return dcr__fail(d, DCR_E_SIGNATURE, "a bundle signature (format 2) with %llu tensor digests: it "
                     "signs none", (unsigned long long)s->digest_count);
  s->section_records = t + DCR__SIGN_TABLE_HEAD;
  s->tensor_digests = s->section_records + a;
  for (uint64_t i = 0; i < s->section_count; i++)
    if (dcr__le32(s->section_records + i * DCR__SIGN_SECTION_RECORD + 4))
      return dcr__fail(d, DCR_E_SIGNATURE, "section record %llu: reserved field is not zero",
                       (unsigned long long)i);
  s->records = t + s->table_length;
  for (uint32_t i = 0; i < s->signature_count; i++) {
    const uint8_t *r = s->records + (size_t)i * DCR__SIGN_RECORD;
    if (r[0] != DCR__SIGN_ED25519)
      return dcr__fail(d, DCR_E_SIGNATURE, "signature %u: algorithm %u is not Ed25519 (1)", i, r[0]);
    for (int k = 1; k < 8; k++)
      if (r[k]) return dcr__fail(d, DCR_E_SIGNATURE, "signature %u: reserved byte %d is not zero", i, k);
    /* increasing key ids: one signature per key, and one order for a set of them */
    if (i && memcmp(r - DCR__SIGN_RECORD + 8, r + 8, DCR_KEY_ID_SIZE) >= 0)
      return dcr__fail(d, DCR_E_SIGNATURE, "signature %u: key ids are not in increasing order", i);
  }
  return DCR_OK;
}

/* The section of `type` in the walk, the SIGN or the FOOT: its index, or -1. */
static int64_t find_section(const dcr_reader *r, uint32_t type) {
  for (uint64_t i = 0; i < r->section_count; i++)
    if (r->sections[i].type == type) return (int64_t)i;
  return -1;
}

/* SHA-256 of `length` bundle bytes from `offset`, read a block at a time. */
static int sha_range(const dcr_reader *r, uint64_t offset, uint64_t length, uint8_t out[32],
                     uint8_t **scratch, size_t *capacity, dcr_detail *d) {
  dcr__sha256 st;
  int rc = dcr__sha256_init(&st, d);
  for (uint64_t done = 0; !rc && done < length;) {
    size_t n = length - done < COPY_BLOCK ? (size_t)(length - done) : COPY_BLOCK;
    const uint8_t *p;
    rc = dcr__source_get(&r->src, offset + done, n, scratch, capacity, &p, d);
    if (!rc) dcr__sha256_update(&st, p, n);
    done += n;
  }
  if (!rc) dcr__sha256_final(&st, out);
  dcr__sha256_free(&st);
  return rc;
}

uint64_t dcr__sign_digest_count(const dcr__manifest *m, unsigned major) {
  uint64_t n = 0;
  if (major == DCR__SIGN_BUNDLE) return 0;
  for (uint64_t i = 0; i < m->entry_count; i++)
    n += (uint64_t)!!(m->entries[i].presence & DCR__HAS_BASE) +
         (uint64_t)!!(m->entries[i].presence & DCR__HAS_TARGET);
  return n;
}

void dcr__sign_table_head(uint8_t *t, unsigned major, const uint8_t header[DCR__HEADER_SIZE],
                          uint64_t sign_offset, uint64_t section_count, uint64_t digest_count) {
  memcpy(t, dcr__sign_domain(major), 16);
  memcpy(t + 16, header, DCR__HEADER_SIZE);
  dcr__put64(t + 80, sign_offset);
  dcr__put64(t + 88, section_count);
  dcr__put64(t + 96, digest_count);
}

void dcr__sign_section_record(uint8_t *rec, uint32_t type, uint64_t offset, uint64_t extent) {
  dcr__put32(rec, type);
  dcr__put64(rec + 8, offset);
  dcr__put64(rec + 16, extent);
}

/* The table of §20.2 of major 1 or 2 for r with the sections before section
 * `until` (SIGN, or FOOT for a bundle not yet signed); the tensor digests are left
 * zero. */
static int build_table(const dcr_reader *r, unsigned major, uint64_t until, uint8_t **out,
                       size_t *length, dcr_detail *d) {
  uint64_t n = dcr__sign_digest_count(&r->man, major);
  size_t size = DCR__SIGN_TABLE_HEAD + (size_t)until * DCR__SIGN_SECTION_RECORD + (size_t)n * 32;
  uint8_t *t = calloc(1, size), *scratch = NULL;
  size_t capacity = 0;
  if (!t) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate a signed table of %zu bytes", size);
  const uint8_t *header;
  int rc = dcr__source_get(&r->src, 0, DCR__HEADER_SIZE, &scratch, &capacity, &header, d);
  if (!rc) dcr__sign_table_head(t, major, header, r->sections[until].offset, until, n);
  for (uint64_t i = 0; i < until && !rc; i++) {
    const dcr__section *s = &r->sections[i];
    uint8_t *rec = t + DCR__SIGN_TABLE_HEAD + i * DCR__SIGN_SECTION_RECORD;
    uint64_t extent = r->sections[i + 1].offset - s->offset; /* header, payload, padding */
    dcr__sign_section_record(rec, s->type, s->offset, extent);
    rc = sha_range(r, s->offset, extent, rec + 24, &scratch, &capacity, d);
  }
  free(scratch);
  if (rc) return free(t), rc;
  *out = t;
  *length = size;
  return DCR_OK;
}

/* Reads and parses r's SIGN section into *payload (owned) and *s. */
static int load_sign(const dcr_reader *r, int64_t at, uint8_t **payload, dcr__sign *s, dcr_detail *d) {
  const dcr__section *sec = &r->sections[at];
  uint8_t *scratch = NULL;
  size_t capacity = 0;
  const uint8_t *p;
  *payload = NULL;
  int rc = dcr__source_get(&r->src, sec->offset + DCR__SECTION_HEADER_SIZE, (size_t)sec->length,
                           &scratch, &capacity, &p, d);
  if (!rc && !(*payload = malloc(sec->length ? (size_t)sec->length : 1)))
    rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate the SIGN payload");
  if (!rc) memcpy(*payload, p, (size_t)sec->length);
  free(scratch);
  dcr__detail_at(d, "SIGN", sec->offset);
  if (!rc) rc = dcr__sign_parse(*payload, (size_t)sec->length, s, d);
  return rc;
}

/* §20.4 steps 2-5: trusted signatures, then the table against the bundle. */
static int check_signed(dcr_reader *r, const dcr_keyring *ring, int64_t at, const dcr__sign *s,
                        dcr_signature_result *res, dcr_detail *d) {
  char hex[2 * DCR_KEY_ID_SIZE + 1];
  res->signature_count = s->signature_count;
  res->scope = s->major == DCR__SIGN_BUNDLE ? DCR_SIGN_BUNDLE : DCR_SIGN_CHECKPOINTS;
  for (uint32_t i = 0; i < s->signature_count; i++) {
    const uint8_t *rec = s->records + (size_t)i * DCR__SIGN_RECORD;
    const uint8_t *key = dcr__keyring_find(ring, rec + 8);
    if (!key) continue; /* another signer's: neither trusted nor refused */
    dcr__hex(rec + 8, DCR_KEY_ID_SIZE, hex);
    /* a fuzzing build takes every signature as good, as it does checksums
     * (format/common.h), so that the fuzzer reaches the checks behind it */
    if (!DCR__CHECKSUM_OK(!crypto_sign_verify_detached(rec + 24, s->table,
                                                       (unsigned long long)s->table_length, key)))
      return dcr__fail(d, DCR_E_SIGNATURE, "the signature by key %s does not verify", hex);
    if (!res->verified_count++) memcpy(res->key_id, rec + 8, DCR_KEY_ID_SIZE);
  }
  if (!res->verified_count) {
    dcr__hex(s->records + 8, DCR_KEY_ID_SIZE, hex);
    return dcr__fail(d, DCR_E_SIGNATURE, "no signature by a trusted key (%u signature%s, the first "
                     "by key %s)", s->signature_count, s->signature_count == 1 ? "" : "s", hex);
  }
  /* The signature is good: now the bundle must be what it signs, byte for byte. */
  uint8_t *table;
  size_t length;
  int rc = build_table(r, s->major, (uint64_t)at, &table, &length, d);
  if (rc) return rc;
  if (memcmp(table + 16, s->table + 16, DCR__HEADER_SIZE))
    rc = (relocate(d, NULL, 0), bad(d, "the bundle header is not the signed one"));
  else if (s->sign_offset != r->sections[at].offset || s->section_count != (uint64_t)at)
    rc = dcr__fail(d, DCR_E_SIGNATURE, "the signature covers %llu sections up to offset %llu; the "
                   "bundle has %llu up to %llu", (unsigned long long)s->section_count,
                   (unsigned long long)s->sign_offset, (unsigned long long)at,
                   (unsigned long long)r->sections[at].offset);
  else if (s->digest_count != dcr__sign_digest_count(&r->man, s->major))
    rc = dcr__fail(d, DCR_E_SIGNATURE, "the signature has %llu tensor digests for %llu tensors",
                   (unsigned long long)s->digest_count,
                   (unsigned long long)dcr__sign_digest_count(&r->man, s->major));
  for (uint64_t i = 0; i < (uint64_t)at && !rc; i++) {
    const uint8_t *mine = table + DCR__SIGN_TABLE_HEAD + i * DCR__SIGN_SECTION_RECORD;
    const uint8_t *theirs = s->section_records + i * DCR__SIGN_SECTION_RECORD;
    char name[5];
    dcr__section_type_name(r->sections[i].type, name);
    if (memcmp(mine, theirs, 24) || !DCR__CHECKSUM_OK(!memcmp(mine + 24, theirs + 24, 32)))
      relocate(d, name, r->sections[i].offset);
    if (memcmp(mine, theirs, 24))
      rc = dcr__fail(d, DCR_E_SIGNATURE, "section %s is not where, or as long as, the signature says", name);
    else if (!DCR__CHECKSUM_OK(!memcmp(mine + 24, theirs + 24, 32)))
      rc = dcr__fail(d, DCR_E_SIGNATURE, "section %s does not have its signed SHA-256 digest: it was changed", name);
  }
  free(table);
  return rc;
}

/* The SIGN section's index; DCR_E_SIGNATURE if the bundle has none. */
static int sign_index(const dcr_reader *r, int64_t *at, dcr_detail *d) {
  *at = find_section(r, DCR__SEC_SIGN);
  if (*at < 0) return bad(d, "the bundle is not signed (no SIGN section)");
  return DCR_OK;
}

int dcr_reader_verify_signature(dcr_reader *r, const dcr_keyring *ring, dcr_signature_result *result,
                                dcr_detail *d) {
  dcr_signature_result scratch;
  dcr_detail dscratch;
  if (!result) result = &scratch;
  if (!d) d = &dscratch;
  memset(result, 0, sizeof *result);
  dcr__detail_init(d);
  int64_t at;
  uint8_t *payload = NULL;
  dcr__sign s;
  int rc = dcr__sodium(d);
  if (!rc) rc = sign_index(r, &at, d);
  if (!rc) result->present = 1, rc = load_sign(r, at, &payload, &s, d);
  if (!rc) rc = check_signed(r, ring, at, &s, result, d);
  free(payload);
  if (rc) dcr__detail_file(d, r->path);
  return rc;
}

/* Opens path as r's checkpoint of `side` (DCR__HAS_BASE or DCR__HAS_TARGET) with
 * exactly the manifest's tensors on that side, and fills the SHA-256 digest of
 * each (in entry order, which is the checkpoint's name order) at out, 32 bytes
 * apart (out NULL: none). check_hashes: also require every XXH3 tensor hash to be
 * IDEN's. */
static int side_digests(dcr_reader *r, const char *path, unsigned side, unsigned threads,
                        const volatile int *cancel, int check_hashes, uint8_t *out, dcr_detail *d) {
  dcr_checkpoint *ck = NULL;
  int mismatch = side == DCR__HAS_BASE ? DCR_E_BASE_MISMATCH : DCR_E_TARGET_MISMATCH;
  uint64_t *offsets = calloc(r->man.entry_count + 1, sizeof *offsets);
  uint8_t state[16];
  if (!offsets) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate the tensor table");
  int rc = dcr_checkpoint_open(&ck, path, r->man.kind, &r->lim, d);
  if (!rc) {
    dcr_checkpoint_set_cancel(ck, cancel);
    if ((rc = dcr__match_checkpoint(&r->man, &ck->ck, side == DCR__HAS_TARGET, offsets, d)))
      rc = mismatch, dcr__detail_file(d, path); /* the message says which tensor */
  }
  if (!rc && check_hashes && !(rc = dcr_checkpoint_state_id(ck, threads, state, d))) {
    size_t j = 0;
    for (uint64_t i = 0; i < r->man.entry_count && !rc; i++) {
      const dcr__entry *e = &r->man.entries[i];
      if (!(e->presence & side)) continue;
      if (memcmp(ck->ck.tensors[j++].desc.hash, side == DCR__HAS_BASE ? e->base.hash : e->target.hash, 16))
        rc = (dcr__detail_file(d, path), dcr__detail_tensor(d, i, e->name, e->name_length),
              dcr__fail(d, mismatch, "the tensor's hash is not the bundle's"));
    }
  }
  if (!rc && out) rc = dcr__checkpoint_sha256(ck, threads, out, d);
  dcr_checkpoint_free(ck);
  free(offsets);
  return rc;
}

/* Where the digests of `side` go among a table's tensor digests: entry order,
 * base before target (§20.2); a side's digests are gathered from `in`. */
static void place_digests(const dcr__manifest *m, unsigned side, const uint8_t *in, uint8_t *table_digests) {
  size_t k = 0, j = 0;
  for (uint64_t i = 0; i < m->entry_count; i++) {
    const dcr__entry *e = &m->entries[i];
    for (unsigned s = DCR__HAS_BASE; s <= DCR__HAS_TARGET; s <<= 1) {
      if (!(e->presence & s)) continue;
      if (s == side) memcpy(table_digests + 32 * k, in + 32 * j++, 32);
      k++;
    }
  }
}

/* The first of a side's tensors whose digest differs from the table's, or -1. */
static int64_t compare_digests(const dcr__manifest *m, unsigned side, const uint8_t *got,
                               const uint8_t *table_digests) {
  size_t k = 0, j = 0;
  for (uint64_t i = 0; i < m->entry_count; i++) {
    const dcr__entry *e = &m->entries[i];
    for (unsigned s = DCR__HAS_BASE; s <= DCR__HAS_TARGET; s <<= 1) {
      if (!(e->presence & s)) continue;
      if (s == side && memcmp(table_digests + 32 * k, got + 32 * j++, 32)) return (int64_t)i;
      k++;
    }
  }
  return -1;
}

static size_t side_count(const dcr__manifest *m, unsigned side) {
  size_t n = 0;
  for (uint64_t i = 0; i < m->entry_count; i++) n += (size_t)!!(m->entries[i].presence & side);
  return n;
}

int dcr_reader_verify_signed_checkpoint(dcr_reader *r, const dcr_keyring *ring, const char *path,
                                        int side, unsigned threads, dcr_detail *d) {
  dcr_detail scratch;
  if (!d) d = &scratch;
  if (side != 0 && side != 1) return dcr__detail_init(d), dcr__fail(d, DCR_E_ARGUMENT, "side is 0 or 1");
  unsigned bit = side ? DCR__HAS_TARGET : DCR__HAS_BASE;
  /* the digests are worth what the signature over them is: checked again here */
  int rc = dcr_reader_verify_signature(r, ring, NULL, d);
  if (rc) return rc;
  int64_t at = find_section(r, DCR__SEC_SIGN);
  uint8_t *payload = NULL, *got = malloc(32 * side_count(&r->man, bit) + 1);
  dcr__sign s;
  if (!got) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate tensor digests");
  rc = load_sign(r, at, &payload, &s, d);
  dcr__detail_init(d);
  if (!rc && s.major == DCR__SIGN_BUNDLE) /* R-SIG-10: IDEN's XXH3 is no stand-in */
    rc = (dcr__detail_file(d, path),
          dcr__fail(d, DCR_E_SIGNATURE, "the bundle's signature signs the bundle alone (signature "
                    "format 2.0), not its %s: this checkpoint cannot be checked against it",
                    side ? "target" : "base"));
  if (!rc) rc = side_digests(r, path, bit, threads, NULL, 0, got, d);
  int64_t wrong = rc ? -1 : compare_digests(&r->man, bit, got, s.tensor_digests);
  if (DCR__CHECKSUM_OK(wrong < 0)) wrong = -1; /* a fuzzing build: every digest matches */
  if (wrong >= 0) {
    const dcr__entry *e = &r->man.entries[wrong];
    dcr__detail_file(d, path);
    dcr__detail_tensor(d, (uint64_t)wrong, e->name, e->name_length);
    rc = dcr__fail(d, DCR_E_SIGNATURE, "the %s tensor's SHA-256 digest is not the signed one",
                   side ? "target" : "base");
  }
  free(payload);
  free(got);
  return rc;
}

void dcr_sign_options_default(dcr_sign_options *o) { memset(o, 0, sizeof *o); }

/* Copies `length` bundle bytes from `offset` into the sink. */
static int copy_range(const dcr_reader *r, uint64_t offset, uint64_t length, dcr__writer *w,
                      uint8_t **scratch, size_t *capacity, dcr_detail *d) {
  for (uint64_t done = 0; done < length;) {
    size_t n = length - done < COPY_BLOCK ? (size_t)(length - done) : COPY_BLOCK;
    const uint8_t *p;
    int rc = dcr__source_get(&r->src, offset + done, n, scratch, capacity, &p, d);
    if (rc) return rc;
    if (w->write(w->opaque, p, n)) return dcr__fail(d, DCR_E_IO, "cannot write the signed bundle");
    done += n;
    w->offset += n;
  }
  return DCR_OK;
}

int dcr__sign_payload(const uint8_t *table, size_t table_length, unsigned major, const dcr__sign *old,
                      const uint8_t secret[64], const uint8_t id[DCR_KEY_ID_SIZE], uint8_t **out,
                      size_t *length, dcr_detail *d) {
  uint8_t record[DCR__SIGN_RECORD] = {DCR__SIGN_ED25519};
  memcpy(record + 8, id, DCR_KEY_ID_SIZE);
  crypto_sign_detached(record + 24, NULL, table, table_length, secret);
  uint32_t count = old ? old->signature_count : 0;
  size_t size = DCR__SIGN_HEAD + table_length + ((size_t)count + 1) * DCR__SIGN_RECORD;
  uint8_t *p = malloc(size), *at;
  if (!p) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate the SIGN payload");
  memcpy(p + DCR__SIGN_HEAD, table, table_length);
  at = p + DCR__SIGN_HEAD + table_length;
  int placed = 0;
  uint32_t n = 0;
  for (uint32_t i = 0; i <= count; i++) {
    const uint8_t *rec = i < count ? old->records + (size_t)i * DCR__SIGN_RECORD : NULL;
    int cmp = rec ? memcmp(rec + 8, record + 8, DCR_KEY_ID_SIZE) : 1;
    if (!placed && cmp >= 0) memcpy(at + (size_t)n++ * DCR__SIGN_RECORD, record, DCR__SIGN_RECORD), placed = 1;
    if (rec && cmp) memcpy(at + (size_t)n++ * DCR__SIGN_RECORD, rec, DCR__SIGN_RECORD);
  }
  dcr__put16(p, (uint16_t)major);
  dcr__put16(p + 2, DCR__SIGN_MINOR);
  dcr__put32(p + 4, n);
  dcr__put64(p + 8, table_length);
  *out = p;
  *length = DCR__SIGN_HEAD + table_length + (size_t)n * DCR__SIGN_RECORD;
  return DCR_OK;
}

/* The bundle, with SIGN (payload) before its FOOT, into the atomic output. */
static int write_signed(const dcr_reader *r, int64_t until, const uint8_t *payload, size_t length,
                        const char *out_path, int sync, dcr_detail *d) {
  dcr__file_sink f = {.at = 0};
  dcr__writer w = {.write = dcr__file_sink_write, .opaque = &f};
  uint8_t *scratch = NULL;
  size_t capacity = 0;
  int64_t foot = find_section(r, DCR__SEC_FOOT);
  int rc = dcr__atomic_open(&f.out, out_path, DCR__ATOMIC_REPLACE | (sync ? DCR__ATOMIC_SYNC : 0), d);
  if (rc) return rc;
  /* the footer names MANI, IDEN and INDX, which do not move: it is copied as it is */
  if (!(rc = copy_range(r, 0, r->sections[until].offset, &w, &scratch, &capacity, d)) &&
      !(rc = dcr__writer_section(&w, DCR__SEC_SIGN, payload, length, NULL, 0, NULL, d)))
    rc = copy_range(r, r->sections[foot].offset, DCR__FOOTER_SIZE, &w, &scratch, &capacity, d);
  if (rc == DCR_E_IO && f.error)
    rc = (dcr__detail_init(d), dcr__detail_file(d, out_path),
          dcr__fail(d, DCR_E_IO, "cannot write: %s", strerror(f.error)));
  if (!rc) rc = dcr__atomic_commit(&f.out, d);
  dcr__atomic_abort(&f.out);
  free(scratch);
  return rc;
}

static int sign_open(dcr_reader *r, const char *secret_key_path, const char *base_path,
                     const char *target_path, const char *out_path, const dcr_sign_options *o,
                     dcr_detail *d) {
  uint8_t sk[64], id[DCR_KEY_ID_SIZE], *table = NULL, *payload = NULL, *old_payload = NULL;
  uint8_t *digests = NULL;
  size_t table_length = 0, length = 0;
  unsigned major = o->scope == DCR_SIGN_BUNDLE ? DCR__SIGN_BUNDLE : DCR__SIGN_CHECKPOINTS;
  dcr__sign old;
  int64_t sign_at = find_section(r, DCR__SEC_SIGN);
  int64_t until = sign_at >= 0 ? sign_at : find_section(r, DCR__SEC_FOOT);
  dcr_reader_set_threads(r, o->threads);
  dcr_reader_set_cancel(r, o->cancel);
  /* the key first: a refused key file costs no hashing */
  int rc = dcr__secret_key_read(secret_key_path, sk, id, d);
  if (!rc) rc = dcr_reader_verify(r, d);
  if (!rc && sign_at >= 0 && (rc = load_sign(r, sign_at, &old_payload, &old, d)))
    snprintf(d->message, sizeof d->message, "%s", "the bundle's SIGN section is malformed: it cannot take "
             "another signature");
  /* one table in a SIGN section (R-SIG-7), so one scope: said before any hashing */
  if (!rc && sign_at >= 0 && old.major != major)
    rc = (relocate(d, "SIGN", r->sections[sign_at].offset),
          dcr__fail(d, DCR_E_SIGNATURE, "the bundle's signatures sign %s: another signature must too "
                    "(scope %s)", old.major == DCR__SIGN_BUNDLE ? "the bundle alone" : "its checkpoints",
                    old.major == DCR__SIGN_BUNDLE ? "bundle" : "checkpoints"));
  if (!rc && target_path) {
    dcr_apply_options ao;
    dcr_apply_options_default(&ao);
    ao.cancel = o->cancel;
    rc = dcr_check_target(r, target_path, &ao, d);
  }
  if (!rc) rc = build_table(r, major, (uint64_t)until, &table, &table_length, d);
  if (!rc && major == DCR__SIGN_BUNDLE && base_path) /* checked, not hashed (R-SIG-9) */
    rc = side_digests(r, base_path, DCR__HAS_BASE, o->threads, o->cancel, 1, NULL, d);
  if (!rc && major == DCR__SIGN_CHECKPOINTS) {
    size_t most = side_count(&r->man, DCR__HAS_BASE) > side_count(&r->man, DCR__HAS_TARGET)
                      ? side_count(&r->man, DCR__HAS_BASE) : side_count(&r->man, DCR__HAS_TARGET);
    uint8_t *tensor_digests = table + table_length - 32 * (size_t)dcr__sign_digest_count(&r->man, major);
    if (!(digests = malloc(32 * most + 1))) rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate digests");
    if (!rc && !(rc = side_digests(r, base_path, DCR__HAS_BASE, o->threads, o->cancel, 1, digests, d)))
      place_digests(&r->man, DCR__HAS_BASE, digests, tensor_digests);
    if (!rc && !(rc = side_digests(r, target_path, DCR__HAS_TARGET, o->threads, o->cancel, 0, digests, d)))
      place_digests(&r->man, DCR__HAS_TARGET, digests, tensor_digests);
  }
  /* signatures already there sign a table: ours must be the same one, or a
   * reader could not check them all against one bundle */
  if (!rc && sign_at >= 0 &&
      (old.table_length != table_length || memcmp(old.table, table, table_length)))
    rc = (relocate(d, "SIGN", r->sections[sign_at].offset),
          bad(d, "the bundle's signatures sign another table (other bytes or other checkpoints)"));
  if (!rc) rc = dcr__sign_payload(table, table_length, major, sign_at >= 0 ? &old : NULL, sk, id,
                                 &payload, &length, d);
  sodium_memzero(sk, sizeof sk);
  if (!rc) rc = write_signed(r, until, payload, length, out_path, !o->no_sync, d);
  free(digests);
  free(table);
  free(payload);
  free(old_payload);
  return rc;
}

int dcr_sign_file(const char *bundle_path, const char *secret_key_path, const char *base_path,
                  const char *target_path, const char *out_path, const dcr_sign_options *options,
                  dcr_detail *d) {
  dcr_detail scratch;
  dcr_sign_options o;
  if (!d) d = &scratch;
  dcr__detail_init(d);
  if (options) o = *options;
  else dcr_sign_options_default(&o);
  if (o.scope != DCR_SIGN_CHECKPOINTS && o.scope != DCR_SIGN_BUNDLE)
    return dcr__fail(d, DCR_E_ARGUMENT, "signing scope %d: DCR_SIGN_CHECKPOINTS or DCR_SIGN_BUNDLE",
                     o.scope);
  if (!bundle_path || !secret_key_path ||
      (o.scope == DCR_SIGN_CHECKPOINTS && (!base_path || !target_path)))
    return dcr__fail(d, DCR_E_ARGUMENT, o.scope == DCR_SIGN_CHECKPOINTS
                     ? "a bundle, a secret key, a base and a target are needed"
                     : "a bundle and a secret key are needed");
  dcr_reader *r = NULL;
  int rc = dcr__sodium(d);
  if (!rc) rc = dcr_reader_open_file(&r, bundle_path, NULL, d);
  if (!rc) rc = sign_open(r, secret_key_path, base_path, target_path, out_path ? out_path : bundle_path, &o, d);
  dcr_reader_free(r);
  return rc;
}
