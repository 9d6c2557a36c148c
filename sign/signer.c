/*
 * signer.c - a bundle signed as it is written (SPEC.md §20, dcr_encode's
 * sign_key): the signed table of §20.2 made in the encode's one pass.
 *
 * The signer sits between the writer and its sink. Every byte passes through it
 * once, on the writer's thread: the bundle header is kept for the table, and each
 * section, from its start to the next one's, is hashed on its way out, so no byte
 * of the bundle is read again. A checkpoint signature's tensor digests come from
 * the encoder, which hashes the pieces of both checkpoints in its workers as it
 * reads them; a bundle signature has none (§20.6). The table
 * and the payload are those dcr_sign_file makes of the same bundle (sign.c's
 * parts), so both ways give the same bytes.
 */
#include <sodium.h>
#include <stdlib.h>

#include "../codec/codec.h"
#include "sign.h"

struct dcr__signer {
  uint8_t secret[64], id[DCR_KEY_ID_SIZE];
  unsigned major;      /* of the table: DCR__SIGN_CHECKPOINTS or DCR__SIGN_BUNDLE */
  uint8_t *digests;
  uint64_t digest_count;
  dcr_write_fn write; /* the sink the signer passes bytes on to */
  void *opaque;
  uint64_t at;        /* bytes passed on */
  uint8_t header[DCR__HEADER_SIZE];
  dcr__sha256 sha;    /* of the section being written */
  uint8_t *records;   /* one per section started, its digest filled when it ends */
  size_t count, capacity;
  int broken;         /* the record list could not grow */
};

int dcr__signer_open(dcr__signer **out, const char *secret_key_path, unsigned major,
                     uint64_t digest_count, dcr_detail *d) {
  *out = NULL;
  if (digest_count > SIZE_MAX / 32 - 1)
    return dcr__fail(d, DCR_E_LIMIT, "%llu tensor digests", (unsigned long long)digest_count);
  dcr__signer *s = calloc(1, sizeof *s);
  if (!s) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate a signer");
  int rc = dcr__sodium(d);
  if (!rc) rc = dcr__secret_key_read(secret_key_path, s->secret, s->id, d);
  if (!rc && !(s->digests = calloc((size_t)digest_count + 1, 32)))
    rc = dcr__fail(d, DCR_E_NOMEM, "cannot allocate %llu tensor digests",
                   (unsigned long long)digest_count);
  if (!rc) rc = dcr__sha256_init(&s->sha, d);
  if (rc) return dcr__signer_free(s), rc;
  s->major = major;
  s->digest_count = digest_count;
  *out = s;
  return DCR_OK;
}

uint8_t *dcr__signer_digests(dcr__signer *s) { return s->digests; }

/* The sink as the writer sees it. A failure to grow the record list is reported
 * as the sink's (DCR_E_IO, "cannot write the bundle"): the writer has no other
 * way back, and it is as rare as a failed write. */
static int pass_on(void *opaque, const void *data, size_t n) {
  dcr__signer *s = opaque;
  const uint8_t *p = data;
  size_t head = s->at < DCR__HEADER_SIZE ? DCR__HEADER_SIZE - (size_t)s->at : 0;
  if (head > n) head = n;
  if (s->broken) return 1;
  if (head) memcpy(s->header + s->at, p, head); /* only the header comes before a section */
  if (n > head) dcr__sha256_update(&s->sha, p + head, n - head);
  s->at += n;
  return s->write(s->opaque, data, n);
}

/* Ends the record of the section being written, if any, where the next starts. */
static void end_section(dcr__signer *s, uint64_t offset) {
  if (!s->count) return;
  uint8_t *rec = s->records + (s->count - 1) * DCR__SIGN_SECTION_RECORD;
  dcr__put64(rec + 16, offset - dcr__le64(rec + 8)); /* header, payload, padding */
  dcr__sha256_final(&s->sha, rec + 24);
}

static void section_start(void *opaque, uint32_t type, uint64_t offset) {
  dcr__signer *s = opaque;
  end_section(s, offset);
  if (s->count == s->capacity) {
    size_t capacity = s->capacity ? 2 * s->capacity : 64;
    uint8_t *grown = realloc(s->records, capacity * DCR__SIGN_SECTION_RECORD);
    if (!grown) { /* the section's first byte fails the write, and so the encode */
      s->broken = 1;
      return;
    }
    s->records = grown, s->capacity = capacity;
  }
  uint8_t *rec = s->records + s->count++ * DCR__SIGN_SECTION_RECORD;
  memset(rec, 0, DCR__SIGN_SECTION_RECORD);
  dcr__sign_section_record(rec, type, offset, 0);
}

void dcr__signer_attach(dcr__signer *s, dcr__writer *w) {
  s->write = w->write, s->opaque = w->opaque, s->at = w->offset;
  w->write = pass_on, w->opaque = s, w->section = section_start;
}

int dcr__signer_write(dcr__signer *s, dcr__writer *w, dcr_detail *d) {
  end_section(s, w->offset);
  w->write = s->write, w->opaque = s->opaque, w->section = NULL;
  size_t sections = s->count * DCR__SIGN_SECTION_RECORD, digests = 32 * (size_t)s->digest_count;
  size_t length = DCR__SIGN_TABLE_HEAD + sections + digests, payload_length;
  uint8_t *table = calloc(1, length), *payload = NULL;
  if (!table) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate a signed table of %zu bytes", length);
  dcr__sign_table_head(table, s->major, s->header, w->offset, s->count, s->digest_count);
  memcpy(table + DCR__SIGN_TABLE_HEAD, s->records, sections);
  memcpy(table + DCR__SIGN_TABLE_HEAD + sections, s->digests, digests);
  int rc = dcr__sign_payload(table, length, s->major, NULL, s->secret, s->id, &payload,
                             &payload_length, d);
  if (!rc) rc = dcr__writer_section(w, DCR__SEC_SIGN, payload, payload_length, NULL, 0, NULL, d);
  free(table);
  free(payload);
  return rc;
}

void dcr__signer_free(dcr__signer *s) {
  if (!s) return;
  sodium_memzero(s->secret, sizeof s->secret);
  dcr__sha256_free(&s->sha);
  free(s->digests);
  free(s->records);
  free(s);
}
