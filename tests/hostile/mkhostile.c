/*
 * mkhostile.c - writes the small bundles of issue 18 that ask a reader for a lot of
 * memory, for tests/hostile_test.sh. Nothing large is ever held here: zero-filled
 * content is compressed piece by piece, and the hashes of uniform data are computed
 * from one piece's digest. Built at test time against libdcr.a (its writer, manifest
 * serializer and identity code).
 *
 *   mkhostile mani-bomb OUT MIB          MANI frame inflating to MIB MiB of zeros
 *   mkhostile mani-entries OUT MIB       the same whose fixed fields are valid and
 *                                        declare one raw entry: its parse needs ~MIB
 *   mkhostile json OUT KIND COUNT        a safetensors manifest whose header is
 *                                        KIND = array:  [{},{},...]      (COUNT items)
 *                                               nested: {"a":[{},{},...]}
 *                                               shape:  a tensor of COUNT dims of 1
 *   mkhostile chunks OUT BASE ENC LOG2 CHUNKS
 *                                        a raw pair: BASE (written, sparse, zeros) and
 *                                        a bundle to the target of bytes 0x01 in CHUNKS
 *                                        chunks of 2^LOG2 bytes, each one chunk of
 *                                        ENC = sparse (XOR_SPARSE, count = n) or
 *                                              dense (XOR_DENSE): valid bundles
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "codec.h"
#include "format.h"

static void die(const char *what) {
  fprintf(stderr, "mkhostile: %s\n", what);
  exit(1);
}

static int to_file(void *opaque, const void *data, size_t size) {
  return fwrite(data, 1, size, opaque) == size ? DCR_OK : DCR_E_IO;
}

typedef struct {
  uint8_t *p;
  size_t n, cap;
} buf;

static void put(buf *b, const void *p, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2;
    if (!(b->p = realloc(b->p, b->cap))) die("out of memory");
  }
  memcpy(b->p + b->n, p, n);
  b->n += n;
}

/* One zstd frame of `size` bytes: `head` (head_n bytes), then bytes of `fill`,
 * compressed a MiB at a time. */
static void head_frame(buf *out, const uint8_t *head, size_t head_n, uint8_t fill, uint64_t size,
                       int level) {
  static uint8_t block[1 << 20];
  memset(block, fill, sizeof block);
  if (head_n) memcpy(block, head, head_n);
  ZSTD_CCtx *c = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setPledgedSrcSize(c, size);
  uint8_t tmp[1 << 16];
  for (uint64_t done = 0;;) {
    size_t n = size - done < sizeof block ? (size_t)(size - done) : sizeof block;
    done += n;
    ZSTD_inBuffer in = {block, n, 0};
    ZSTD_EndDirective end = done == size ? ZSTD_e_end : ZSTD_e_continue;
    size_t left;
    do {
      ZSTD_outBuffer o = {tmp, sizeof tmp, 0};
      left = ZSTD_compressStream2(c, &o, &in, end);
      if (ZSTD_isError(left)) die("zstd");
      put(out, tmp, o.pos);
    } while (end == ZSTD_e_end ? left != 0 : in.pos < in.size);
    if (end == ZSTD_e_end) break;
    memset(block, fill, head_n);
  }
  ZSTD_freeCCtx(c);
}

static void fill_frame(buf *out, uint8_t fill, uint64_t size, int level) {
  head_frame(out, NULL, 0, fill, size, level);
}

static FILE *create(const char *path) {
  FILE *f = fopen(path, "wb");
  if (!f) die("cannot create the output");
  return f;
}

static void finish(FILE *f) {
  if (fclose(f)) die("cannot write the output");
}

/* A bundle header and a MANI section holding `frame`, nothing after: a reader fails
 * at the manifest whatever follows. With `entries`, the manifest's fixed fields
 * (SPEC.md §6.2) declare one entry of a raw checkpoint in chunks of 4096 bytes:
 * what its parse allocates is in proportion to the bytes after them. */
static void mani_bomb(const char *path, uint64_t mib, int entries) {
  uint8_t head[32] = {1, 0, 0, 0, 0, 0x10, 0, 0}; /* entry_count 1, chunk_size 4096 */
  buf frame = {0};
  head_frame(&frame, head, entries ? sizeof head : 0, 0, mib << 20, 19);
  dcr__writer w = {.write = to_file, .opaque = create(path)};
  uint8_t h[DCR__SECTION_HEADER_SIZE], pad[64] = {0};
  dcr__section s = {.type = DCR__SEC_MANI, .flags = DCR__FLAG_CRITICAL, .compression = 1,
                    .offset = DCR__HEADER_SIZE, .length = frame.n,
                    .payload_check = XXH3_64bits(frame.p, frame.n)};
  dcr__section_header_write(h, &s);
  if (dcr__writer_header(&w, NULL) || to_file(w.opaque, h, sizeof h) ||
      to_file(w.opaque, frame.p, frame.n) || to_file(w.opaque, pad, (64 - frame.n % 64) % 64))
    die("cannot write");
  finish(w.opaque);
  free(frame.p);
}

static void tail(dcr__writer *w, dcr__manifest *m, const dcr__chunk *index, uint64_t count) {
  size_t n = dcr__iden_size(m);
  uint8_t *iden = malloc(n), *indx = malloc(count * DCR__RECORD_SIZE + 1);
  uint64_t iden_offset, indx_offset;
  if (!iden || !indx) die("out of memory");
  dcr__iden_write(m, iden);
  for (uint64_t i = 0; i < count; i++) dcr__index_record_write(indx + i * DCR__RECORD_SIZE, &index[i]);
  if (dcr__writer_section(w, DCR__SEC_IDEN, iden, n, NULL, 0, &iden_offset, NULL) ||
      dcr__writer_section(w, DCR__SEC_INDX, indx, count * DCR__RECORD_SIZE, NULL, 0, &indx_offset,
                          NULL) ||
      dcr__writer_footer(w, iden_offset, indx_offset, count, NULL))
    die("cannot write");
  free(iden);
  free(indx);
}

static void write_manifest(dcr__writer *w, const dcr__manifest *m) {
  uint8_t *p;
  size_t n;
  if (dcr__manifest_serialize(m, &p, &n) || dcr__writer_packed_section(w, DCR__SEC_MANI, p, n, NULL))
    die("cannot write the manifest");
  free(p);
}

/* A safetensors pair with no tensors whose target header is the JSON text. */
static void json_bundle(const char *path, const char *kind, uint64_t count) {
  buf j = {0};
  const char *open, *item, *close;
  if (!strcmp(kind, "array")) open = "[", item = "{}", close = "]";
  else if (!strcmp(kind, "nested")) open = "{\"a\":[", item = "{}", close = "]}";
  else if (!strcmp(kind, "shape"))
    open = "{\"a\":{\"dtype\":\"U8\",\"shape\":[", item = "1", close = "],\"data_offsets\":[0,1]}}";
  else die("json: array, nested or shape");
  put(&j, "        ", 8);
  put(&j, open, strlen(open));
  for (uint64_t i = 0; i < count; i++) {
    if (i) put(&j, ",", 1);
    put(&j, item, strlen(item));
  }
  put(&j, close, strlen(close));
  uint64_t N = j.n - 8;
  for (int i = 0; i < 8; i++) j.p[i] = (uint8_t)(N >> (8 * i));
  dcr__manifest m = {.chunk_size = 4096, .kind = 1, .prefix_length = j.n, .prefix = j.p};
  dcr__writer w = {.write = to_file, .opaque = create(path), .level = 3};
  if (dcr__writer_header(&w, NULL)) die("cannot write");
  write_manifest(&w, &m);
  tail(&w, &m, NULL, 0);
  finish(w.opaque);
  free(j.p);
}

/* Hash of `bytes` bytes of `fill` (a multiple of 4096): every piece has one digest. */
static void uniform_pieces(uint8_t fill, uint8_t digest[16]) {
  static uint8_t piece[DCR__PIECE];
  memset(piece, fill, sizeof piece);
  dcr__pieces(piece, sizeof piece, digest);
}

static void repeat_hash128(const uint8_t digest[16], uint64_t times, uint8_t out[16]) {
  XXH3_state_t *st = XXH3_createState();
  XXH3_128bits_reset(st);
  for (uint64_t i = 0; i < times; i++) XXH3_128bits_update(st, digest, 16);
  XXH128_canonicalFromHash((XXH128_canonical_t *)out, XXH3_128bits_digest(st));
  XXH3_freeState(st);
}

static uint64_t repeat_hash64(const uint8_t digest[16], uint64_t times) {
  XXH3_state_t *st = XXH3_createState();
  XXH3_64bits_reset(st);
  for (uint64_t i = 0; i < times; i++) XXH3_64bits_update(st, digest, 16);
  uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

static void chunks_bundle(const char *path, const char *base_path, const char *enc, unsigned log2,
                          uint32_t chunks) {
  int sparse = !strcmp(enc, "sparse");
  if (!sparse && strcmp(enc, "dense")) die("chunks: sparse or dense");
  if (log2 < 12 || log2 > 30 || !chunks) die("chunks: 12 <= LOG2 <= 30, CHUNKS >= 1");
  uint64_t cs = (uint64_t)1 << log2, n = cs * chunks;
  int fd = open(base_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || ftruncate(fd, (off_t)n) || close(fd)) die("cannot write the base");
  uint64_t dims[1] = {n};
  int u8 = dcr_dtype_from_name("U8", 2);
  dcr__entry e = {.name = "raw", .name_length = 3, .presence = DCR__HAS_BASE | DCR__HAS_TARGET,
                  .base = {.dtype = u8, .rank = 1, .dims = dims, .byte_length = n},
                  .target = {.dtype = u8, .rank = 1, .dims = dims, .byte_length = n}};
  uint8_t zero[16], ones[16];
  uniform_pieces(0, zero);
  uniform_pieces(1, ones);
  repeat_hash128(zero, n / DCR__PIECE, e.base.hash);
  repeat_hash128(ones, n / DCR__PIECE, e.target.hash);
  dcr__manifest m = {.chunk_size = (uint32_t)cs, .kind = 0, .data_length = n, .entry_count = 1,
                     .entries = &e};
  /* One chunk's data, the same for every chunk. */
  buf body = {0};
  if (sparse) fill_frame(&body, 0, 1 + cs / 8, 3); /* k = 0, every gap 0: one 0 bit each */
  fill_frame(&body, 1, cs, 3);
  dcr__chunk *index = calloc(chunks, sizeof *index);
  dcr__writer w = {.write = to_file, .opaque = create(path), .level = 19};
  if (!index || dcr__writer_header(&w, NULL)) die("cannot write");
  write_manifest(&w, &m);
  for (uint32_t c = 0; c < chunks; c++) {
    dcr__chunk *k = &index[c];
    *k = (dcr__chunk){.tensor = 0, .chunk = c, .compression = DCR_COMP_ZSTD,
                      .encoding = sparse ? DCR_ENC_XOR_SPARSE : DCR_ENC_XOR_DENSE,
                      .count = (uint32_t)cs, .base_check = repeat_hash64(zero, cs / DCR__PIECE),
                      .target_check = repeat_hash64(ones, cs / DCR__PIECE),
                      .payload_length = DCR__RECORD_SIZE + body.n};
    uint8_t rec[DCR__RECORD_SIZE];
    dcr__chunk_record_write(rec, k);
    if (dcr__writer_section(&w, DCR__SEC_CHNK, rec, sizeof rec, body.p, body.n, &k->offset, NULL))
      die("cannot write a chunk");
  }
  tail(&w, &m, index, chunks);
  finish(w.opaque);
  free(index);
  free(body.p);
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "mani-bomb")) mani_bomb(argv[2], strtoull(argv[3], NULL, 10), 0);
  else if (argc == 4 && !strcmp(argv[1], "mani-entries"))
    mani_bomb(argv[2], strtoull(argv[3], NULL, 10), 1);
  else if (argc == 5 && !strcmp(argv[1], "json"))
    json_bundle(argv[2], argv[3], strtoull(argv[4], NULL, 10));
  else if (argc == 7 && !strcmp(argv[1], "chunks"))
    chunks_bundle(argv[2], argv[3], argv[4], (unsigned)atoi(argv[5]), (uint32_t)atoi(argv[6]));
  else {
    fprintf(stderr, "usage: see the comment at the top of tests/hostile/mkhostile.c\n");
    return 2;
  }
  return 0;
}
