/*
 * keys.c - Ed25519 key files and key rings (SPEC.md §20.1, README "Signed
 * bundles"). A key file is three lines of text:
 *
 *   dcr-ed25519-secret-key v1        (or dcr-ed25519-public-key v1)
 *   KEY ID, 32 lower-case hex digits
 *   base64 (RFC 4648, padded) of the 32-byte seed, or of the public key
 *
 * Text, so that a public key can be pasted into a deployment's configuration and
 * read by eye; the key id line lets a human match a key to the signatures a
 * bundle lists, and is checked against the key so that a file edited by hand
 * cannot name one key and hold another. A secret key is never printed: only its
 * id leaves this file.
 */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../format/atomic.h"
#include "sign.h"

#define SECRET_MAGIC "dcr-ed25519-secret-key v1"
#define PUBLIC_MAGIC "dcr-ed25519-public-key v1"
#define KEY_FILE_MAX 512 /* the longest valid file is about 110 bytes */

int dcr__sodium(dcr_detail *d) {
  if (sodium_init() < 0) return dcr__fail(d, DCR_E_NOMEM, "libsodium cannot be initialized");
  return DCR_OK;
}

void dcr__key_id(const uint8_t public_key[32], uint8_t id[DCR_KEY_ID_SIZE]) {
  uint8_t h[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(h, public_key, 32);
  memcpy(id, h, DCR_KEY_ID_SIZE);
}

/* The three lines of a key file of `magic` into key (32 bytes) and id; the id line
 * is compared with the id the caller derives. */
static int parse_key_file(const char *text, size_t n, const char *magic, uint8_t key[32],
                          uint8_t id[DCR_KEY_ID_SIZE], dcr_detail *d) {
  const char *lines[3];
  size_t lengths[3], at = 0;
  for (int i = 0; i < 3; i++) {
    const char *nl = at < n ? memchr(text + at, '\n', n - at) : NULL;
    if (!nl) return dcr__fail(d, DCR_E_ARGUMENT, "not a dcr key file: %d lines, 3 wanted", i);
    lines[i] = text + at;
    lengths[i] = (size_t)(nl - lines[i]);
    at += lengths[i] + 1;
  }
  if (at != n) return dcr__fail(d, DCR_E_ARGUMENT, "not a dcr key file: bytes after the third line");
  if (lengths[0] != strlen(magic) || memcmp(lines[0], magic, lengths[0])) {
    const char *other_magic = strcmp(magic, SECRET_MAGIC) ? SECRET_MAGIC : PUBLIC_MAGIC;
    int other = lengths[0] == strlen(other_magic) && !memcmp(lines[0], other_magic, lengths[0]);
    return dcr__fail(d, DCR_E_ARGUMENT, other ? "a key file of the other kind (%s wanted)"
                                              : "not a dcr key file (%s wanted on its first line)", magic);
  }
  char hex[2 * DCR_KEY_ID_SIZE + 1];
  if (lengths[1] != 2 * DCR_KEY_ID_SIZE)
    return dcr__fail(d, DCR_E_ARGUMENT, "key file: the key id is not 32 hex digits");
  memcpy(hex, lines[1], lengths[1]);
  hex[lengths[1]] = '\0';
  if (dcr__unhex16(hex, id)) return dcr__fail(d, DCR_E_ARGUMENT, "key file: the key id is not 32 hex digits");
  size_t got = 0;
  const char *end = NULL;
  if (sodium_base642bin(key, 32, lines[2], lengths[2], NULL, &got, &end,
                        sodium_base64_VARIANT_ORIGINAL) || got != 32 || end != lines[2] + lengths[2])
    return dcr__fail(d, DCR_E_ARGUMENT, "key file: the key is not 32 bytes of base64");
  return DCR_OK;
}

/* Reads a small file whole; a secret one only if private to this user. */
static int read_key_file(const char *path, int secret, char *buf, size_t *n, dcr_detail *d) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  struct stat st;
  if (fd < 0) {
    dcr__detail_file(d, path);
    return dcr__fail(d, DCR_E_IO, "cannot open the key file: %s%s", strerror(errno),
                     errno == ELOOP ? " (a symbolic link: name the file itself)" : "");
  }
  int rc = DCR_OK;
  if (fstat(fd, &st)) rc = dcr__fail(d, DCR_E_IO, "cannot stat the key file: %s", strerror(errno));
  else if (!S_ISREG(st.st_mode)) rc = dcr__fail(d, DCR_E_ARGUMENT, "the key file is not a regular file");
  /* As ssh does: a secret key that others can read is no longer secret, and one
   * that others can write may have been replaced. */
  else if (secret && (st.st_mode & 077))
    rc = dcr__fail(d, DCR_E_ARGUMENT, "the secret key file has mode %04o: group or others may read "
                   "or write it (chmod 600 it)", (unsigned)(st.st_mode & 07777));
  else if (secret && st.st_uid != geteuid())
    rc = dcr__fail(d, DCR_E_ARGUMENT, "the secret key file belongs to another user (uid %u)",
                   (unsigned)st.st_uid);
  else if (st.st_size <= 0 || st.st_size > KEY_FILE_MAX)
    rc = dcr__fail(d, DCR_E_ARGUMENT, "not a dcr key file (%lld bytes)", (long long)st.st_size);
  else if (!(rc = dcr__pread_full(fd, buf, (size_t)st.st_size, 0, d)))
    *n = (size_t)st.st_size;
  close(fd);
  if (rc) dcr__detail_file(d, path);
  return rc;
}

int dcr__secret_key_read(const char *path, uint8_t secret[64], uint8_t id[DCR_KEY_ID_SIZE],
                         dcr_detail *d) {
  char text[KEY_FILE_MAX];
  uint8_t seed[32], pk[32], stored[DCR_KEY_ID_SIZE];
  size_t n = 0;
  int rc = dcr__sodium(d);
  if (!rc) rc = read_key_file(path, 1, text, &n, d);
  if (!rc && (rc = parse_key_file(text, n, SECRET_MAGIC, seed, stored, d))) dcr__detail_file(d, path);
  if (!rc) {
    crypto_sign_seed_keypair(pk, secret, seed);
    dcr__key_id(pk, id);
    if (sodium_memcmp(id, stored, DCR_KEY_ID_SIZE))
      rc = (dcr__detail_file(d, path),
            dcr__fail(d, DCR_E_ARGUMENT, "the key file's key id is not its key's"));
  }
  sodium_memzero(text, sizeof text);
  sodium_memzero(seed, sizeof seed);
  if (rc) sodium_memzero(secret, 64);
  return rc;
}

/* Writes a key file atomically: it appears whole, with its mode, or not at all. */
static int write_key_file(const char *path, const char *magic, const uint8_t key[32],
                          const uint8_t id[DCR_KEY_ID_SIZE], mode_t mode, dcr_detail *d) {
  char text[KEY_FILE_MAX], hex[2 * DCR_KEY_ID_SIZE + 1], b64[64];
  dcr__hex(id, DCR_KEY_ID_SIZE, hex);
  sodium_bin2base64(b64, sizeof b64, key, 32, sodium_base64_VARIANT_ORIGINAL);
  int n = snprintf(text, sizeof text, "%s\n%s\n%s\n", magic, hex, b64);
  sodium_memzero(b64, sizeof b64);
  dcr__atomic a;
  int rc = dcr__atomic_open(&a, path, DCR__ATOMIC_SYNC, d);
  /* the mode is set before a byte of the key is written */
  if (!rc && fchmod(a.fd, mode)) rc = dcr__fail(d, DCR_E_IO, "cannot chmod: %s", strerror(errno));
  if (!rc) rc = dcr__pwrite_full(a.fd, text, (size_t)n, 0, d);
  if (!rc) rc = dcr__atomic_commit(&a, d);
  dcr__atomic_abort(&a);
  sodium_memzero(text, sizeof text);
  if (rc) dcr__detail_file(d, path);
  return rc;
}

int dcr_keygen(const char *secret_path, const char *public_path, uint8_t key_id[DCR_KEY_ID_SIZE],
               dcr_detail *d) {
  dcr__detail_init(d);
  if (!secret_path || !public_path || !strcmp(secret_path, public_path))
    return dcr__fail(d, DCR_E_ARGUMENT, "two different paths are needed");
  int rc = dcr__sodium(d);
  if (rc) return rc;
  uint8_t pk[32], sk[64], id[DCR_KEY_ID_SIZE];
  crypto_sign_keypair(pk, sk);
  dcr__key_id(pk, id);
  /* the public key first: a failure then leaves no secret key without its public one */
  rc = write_key_file(public_path, PUBLIC_MAGIC, pk, id, 0644, d);
  /* libsodium's secret key is the seed then the public key: the file keeps the seed */
  if (!rc && (rc = write_key_file(secret_path, SECRET_MAGIC, sk, id, 0600, d))) unlink(public_path);
  sodium_memzero(sk, sizeof sk);
  if (!rc && key_id) memcpy(key_id, id, DCR_KEY_ID_SIZE);
  return rc;
}

int dcr_keyring_create(dcr_keyring **ring, dcr_detail *d) {
  dcr__detail_init(d);
  int rc = dcr__sodium(d);
  if (rc) return *ring = NULL, rc;
  if (!(*ring = calloc(1, sizeof **ring))) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate a key ring");
  return DCR_OK;
}

int dcr_keyring_add_file(dcr_keyring *ring, const char *path, uint8_t key_id[DCR_KEY_ID_SIZE],
                         dcr_detail *d) {
  dcr__detail_init(d);
  char text[KEY_FILE_MAX];
  uint8_t pk[32], id[DCR_KEY_ID_SIZE], stored[DCR_KEY_ID_SIZE];
  size_t n = 0;
  int rc = read_key_file(path, 0, text, &n, d);
  if (rc) return rc;
  if ((rc = parse_key_file(text, n, PUBLIC_MAGIC, pk, stored, d))) return dcr__detail_file(d, path), rc;
  dcr__key_id(pk, id);
  if (memcmp(id, stored, DCR_KEY_ID_SIZE))
    return dcr__detail_file(d, path), dcr__fail(d, DCR_E_ARGUMENT, "the key file's key id is not its key's");
  if (key_id) memcpy(key_id, id, DCR_KEY_ID_SIZE);
  if (dcr__keyring_find(ring, id)) return DCR_OK; /* the same key twice is one key */
  void *ids = realloc(ring->ids, (ring->count + 1) * sizeof *ring->ids);
  if (ids) ring->ids = ids;
  void *keys = ids ? realloc(ring->keys, (ring->count + 1) * sizeof *ring->keys) : NULL;
  if (!keys) return dcr__fail(d, DCR_E_NOMEM, "cannot grow the key ring");
  ring->keys = keys;
  memcpy(ring->ids[ring->count], id, DCR_KEY_ID_SIZE);
  memcpy(ring->keys[ring->count], pk, 32);
  ring->count++;
  return DCR_OK;
}

const uint8_t *dcr__keyring_find(const dcr_keyring *ring, const uint8_t *id) {
  for (size_t i = 0; ring && i < ring->count; i++)
    if (!memcmp(ring->ids[i], id, DCR_KEY_ID_SIZE)) return ring->keys[i];
  return NULL;
}

void dcr_keyring_free(dcr_keyring *ring) {
  if (!ring) return;
  free(ring->ids);
  free(ring->keys);
  free(ring);
}
