/*
 * sign.h - signatures of bundles (SPEC.md §20), inside libdcr: the SIGN payload,
 * its signed table, and key files. Not installed; the public door is the
 * "Signatures" block of include/dcr.h.
 */
#ifndef DCR_SIGN_H
#define DCR_SIGN_H

#include "../format/format.h"

#define DCR__SIGN_HEAD 16            /* u16 major, u16 minor, u32 count, u64 table length */
#define DCR__SIGN_TABLE_HEAD 112     /* domain, bundle header, four u64 */
#define DCR__SIGN_SECTION_RECORD 56  /* type, reserved, offset, length, SHA-256 */
#define DCR__SIGN_RECORD 88          /* algorithm, 7 reserved, key id, Ed25519 signature */
#define DCR__SIGN_ED25519 1
#define DCR__SIGN_MINOR 0
/* The major version says what is signed: 1, the bundle and both checkpoints'
 * SHA-256 tensor digests; 2, the bundle alone (§20.6). Each has its table's domain. */
#define DCR__SIGN_CHECKPOINTS 1
#define DCR__SIGN_BUNDLE 2
/* The 16-byte domain (no NUL in the table) of a table of major 1 or 2. */
DCR_HIDDEN const char *dcr__sign_domain(unsigned major);

/* A parsed SIGN payload; the pointers are into the payload. */
typedef struct {
  unsigned major, minor;
  uint32_t signature_count;
  const uint8_t *table;
  uint64_t table_length;
  uint64_t sign_offset, section_count, digest_count; /* from the table */
  const uint8_t *section_records;                    /* section_count × 56 */
  const uint8_t *tensor_digests;                     /* digest_count × 32 */
  const uint8_t *records;                            /* signature_count × 88 */
} dcr__sign;

/* Checks a SIGN payload by itself (§20.3 steps 1-9: lengths, versions, domain,
 * reserved fields, no tensor digest in a bundle signature, key ids in increasing
 * order); DCR_E_SIGNATURE on the first rule broken. Reads nothing outside
 * p[0..length). */
DCR_HIDDEN int dcr__sign_parse(const uint8_t *p, size_t length, dcr__sign *s, dcr_detail *d);

/* The signed table (§20.2) is made of these parts, by the signer of a bundle
 * already written (sign.c) and by the one beside an encode (signer.c): */
/* Tensor digests a table of major 1 or 2 carries: for 1, one per side present, in
 * entry order (base first); for 2, none. */
DCR_HIDDEN uint64_t dcr__sign_digest_count(const dcr__manifest *m, unsigned major);
/* The head at t of a table of major 1 or 2 (its reserved field left as it is: zero). */
DCR_HIDDEN void dcr__sign_table_head(uint8_t *t, unsigned major,
                                     const uint8_t header[DCR__HEADER_SIZE], uint64_t sign_offset,
                                     uint64_t section_count, uint64_t digest_count);
/* A section record but its SHA-256 digest (rec + 24), and its reserved field. */
DCR_HIDDEN void dcr__sign_section_record(uint8_t *rec, uint32_t type, uint64_t offset,
                                         uint64_t extent);
/* Signs the table (of major 1 or 2) with the secret key (id: its key id) and makes
 * the SIGN payload: the table and the signatures, ours among those of `old` (NULL:
 * none) in key id order, replacing an earlier one by the same key. *out is the
 * caller's to free. */
DCR_HIDDEN int dcr__sign_payload(const uint8_t *table, size_t table_length, unsigned major,
                                 const dcr__sign *old,
                                 const uint8_t secret[64], const uint8_t id[DCR_KEY_ID_SIZE],
                                 uint8_t **out, size_t *length, dcr_detail *d);

/* ---- signer.c: a bundle signed as it is written (dcr_encode_options.sign_key) */
typedef struct dcr__signer dcr__signer;
/* Reads the secret key file (refused before a byte is written: no work lost) and
 * prepares a table of major 1 or 2 with room for digest_count tensor digests (0
 * for 2). */
DCR_HIDDEN int dcr__signer_open(dcr__signer **s, const char *secret_key_path, unsigned major,
                                uint64_t digest_count, dcr_detail *d);
/* Where the tensor digests go, in the table's order: the caller fills them all
 * before dcr__signer_write. */
DCR_HIDDEN uint8_t *dcr__signer_digests(dcr__signer *s);
/* Puts the signer between w and its sink, before w's first byte: from then on it
 * keeps the bundle header and a SHA-256 digest of every section. */
DCR_HIDDEN void dcr__signer_attach(dcr__signer *s, dcr__writer *w);
/* Takes the signer out of w and writes the SIGN section at w's offset, over the
 * sections written so far: the bundle then needs its footer alone. */
DCR_HIDDEN int dcr__signer_write(dcr__signer *s, dcr__writer *w, dcr_detail *d);
/* Wipes the secret key. Accepts NULL. */
DCR_HIDDEN void dcr__signer_free(dcr__signer *s);

/* The key id of a public key (§20.1): the first 16 bytes of its SHA-256. */
DCR_HIDDEN void dcr__key_id(const uint8_t public_key[32], uint8_t id[DCR_KEY_ID_SIZE]);

/* Reads a secret key file (keys.c): refuses one that is not a regular file of
 * this user, not mode 0600 or stricter, or malformed. secret gets libsodium's
 * 64-byte secret key (seed and public key); the caller wipes it. */
DCR_HIDDEN int dcr__secret_key_read(const char *path, uint8_t secret[64],
                                    uint8_t id[DCR_KEY_ID_SIZE], dcr_detail *d);

struct dcr_keyring {
  size_t count;
  uint8_t (*ids)[DCR_KEY_ID_SIZE];
  uint8_t (*keys)[32];
};
/* The trusted public key of key id `id`, or NULL. */
DCR_HIDDEN const uint8_t *dcr__keyring_find(const dcr_keyring *ring, const uint8_t *id);

/* libsodium is initialized once per process (sodium_init is thread-safe). */
DCR_HIDDEN int dcr__sodium(dcr_detail *d);

#endif
