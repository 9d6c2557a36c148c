/*
 * codec.h - the codec layer: change detection, the encodings of SPEC.md §9,
 * compression, and the drivers that encode and apply whole checkpoints. Talks to
 * bundle bytes only through format/.
 */
#ifndef DCR_CODEC_H
#define DCR_CODEC_H

#include <zstd.h>
#include "../format/xxh.h"

#include "../format/checkpoint.h"
#include "../format/format.h"

/* Encoding ids (§9.1) are regular: odd ids are dense, even ones sparse, and
 * (id - 1) / 2 says what the values are. */
enum { DCR__OP_XOR = 0, DCR__OP_OVERWRITE = 1, DCR__OP_DELTA = 2 };
static inline int dcr__enc_sparse(int encoding) { return !(encoding & 1) || encoding == 7; }
/* DELTA_CLASSED (1.2) and DELTA_BANDED (1.3): delta values named by rank among the
 * base's elements of a unit (class, band), so their positions need the base. */
static inline int dcr__enc_ranked(int encoding) {
  return encoding == DCR_ENC_DELTA_CLASSED || encoding == DCR_ENC_DELTA_BANDED;
}
static inline int dcr__enc_op(int encoding) {
  return dcr__enc_ranked(encoding) ? DCR__OP_DELTA : (encoding - 1) / 2;
}

/* ---- planes.c: byte planes (§9.1). `elems` values of `esize` bytes. */
DCR_HIDDEN void dcr__planes_split(uint8_t *planes, const uint8_t *elems, size_t count,
                                  unsigned esize);
/* elems[i] ^= planes (xor) or elems[i] = planes, element by element. */
DCR_HIDDEN void dcr__planes_xor_into(uint8_t *elems, const uint8_t *planes, size_t count,
                                     unsigned esize);
DCR_HIDDEN void dcr__planes_join(uint8_t *elems, const uint8_t *planes, size_t count,
                                 unsigned esize);
/* Number of elements of the planes that are not all-zero bytes. */
DCR_HIDDEN void dcr__planes_join_part(uint8_t *elems, const uint8_t *planes, size_t stride,
                                      size_t count, unsigned esize);
DCR_HIDDEN size_t dcr__planes_nonzero(const uint8_t *planes, size_t count, unsigned esize);

/* ---- delta.c: ULP deltas (§9.1) */
/* out[i] = zigzag(key(target[i]) - key(base[i])) for count elements. */
DCR_HIDDEN void dcr__delta_make(uint8_t *out, const uint8_t *base, const uint8_t *target,
                                size_t count, unsigned esize);
/* The order-preserving key of an unsigned T (its own inverse) and the zigzag map. */
#define DCR__KEY(T, u) ((T)((u) ^ ((T)((u) >> (sizeof(T) * 8 - 1)) * (T)((T)~(T)0 >> 1))))
#define DCR__ZIGZAG(T, d) ((T)(((T)(d) << 1) ^ (T)(0 - (T)((d) >> (sizeof(T) * 8 - 1)))))
#define DCR__UNZIGZAG(T, z) ((T)(((T)(z) >> 1) ^ (T)(0 - (T)((z) & 1))))
/* One element: elem = key^-1(key(elem) + unzigzag(z)). Inline: the walks apply
 * their changes one at a time. */
#define DCR__DELTA_APPLY(T)                                                       \
  {                                                                               \
    T v, z;                                                                       \
    memcpy(&v, elem, sizeof(T));                                                  \
    memcpy(&z, zz, sizeof(T));                                                    \
    v = DCR__KEY(T, (T)(DCR__KEY(T, v) + DCR__UNZIGZAG(T, z)));                   \
    memcpy(elem, &v, sizeof(T));                                                  \
  }
static inline void dcr__delta_apply(uint8_t *elem, const uint8_t *zz, unsigned esize) {
  switch (esize) {
    case 1: DCR__DELTA_APPLY(uint8_t) break;
    case 2: DCR__DELTA_APPLY(uint16_t) break;
    case 4: DCR__DELTA_APPLY(uint32_t) break;
    default: DCR__DELTA_APPLY(uint64_t) break;
  }
}

/* ---- scatter.c: sparse values applied at their positions, the hot loop of a
 * patch in memory: values first..last-1 of `count`, laid out in planes as §9.1
 * says, at positions pos[0..last-first-1]; op is DCR__OP_XOR or DCR__OP_DELTA. */
DCR_HIDDEN void dcr__scatter(uint8_t *chunk, const uint32_t *pos, const uint8_t *planes,
                             size_t count, size_t first, size_t last, unsigned esize, int op);
/* The same for count values packed as elements (not planes), all applied. */
DCR_HIDDEN void dcr__scatter_packed(uint8_t *chunk, const uint32_t *pos, const uint8_t *values,
                                    size_t count, unsigned esize, int op);
/* The same for count values packed as elements, each at its own address (the
 * blocks of tensors that placements hold: refit/place.c). */
DCR_HIDDEN void dcr__scatter_to(uint8_t *const *at, const uint8_t *values, size_t count,
                                unsigned esize, int op);

/* ---- bit streams, bit 0 of each byte first (§9.1, §9.5) */
typedef struct {
  uint8_t *p;
  uint64_t acc;
  unsigned n; /* bits in acc, < 32 between calls */
} dcr__bit_writer;
/* Appends the low `length` bits of bits (no bit above them set), length <= 32. A
 * word is stored once 32 bits are complete, not a byte at a time (a loop whose
 * count the branch predictor cannot guess, per code): never past the stream's
 * last byte, and at most 31 bits behind it until dcr__put_end. */
static inline void dcr__put_bits(dcr__bit_writer *w, uint64_t bits, unsigned length) {
  w->acc |= bits << w->n;
  w->n += length;
  if (w->n >= 32) {
    uint32_t word = (uint32_t)w->acc; /* little-endian host (scatter.c) */
    memcpy(w->p, &word, 4);
    w->p += 4;
    w->acc >>= 32;
    w->n -= 32;
  }
}
/* Stores the bits left, the last byte's unused bits 0; returns the stream's end. */
static inline uint8_t *dcr__put_end(dcr__bit_writer *w) {
  for (; w->n; w->n = w->n > 8 ? w->n - 8 : 0) {
    *w->p++ = (uint8_t)w->acc;
    w->acc >>= 8;
  }
  return w->p;
}
/* Bits from byte i on, bit 0 first; zeros past the stream's end (i <= bytes). */
static inline uint64_t dcr__bits_window(const uint8_t *bits, size_t bytes, size_t i) {
  if (bytes - i >= 8) return dcr__le64(bits + i);
  uint64_t w = 0;
  for (unsigned j = 0; i + j < bytes; j++) w |= (uint64_t)bits[i + j] << (8 * j);
  return w;
}

/* ---- positions.c: position streams (§9.1) */
/* The longest position stream in an n-element chunk: the parameter byte, then at
 * most n bits, since the best parameter costs no more than k = 0, whose cost is the
 * last position + 1 (§9.1). */
#define DCR__POSITIONS_BOUND(n) (1 + ((size_t)(n) + 7) / 8)
/* Writes the Rice-coded gaps of `count` strictly increasing positions; returns
 * the bytes written (at most DCR__POSITIONS_BOUND). */
DCR_HIDDEN size_t dcr__positions_write(uint8_t *out, const uint32_t *pos, size_t count);
/* What dcr__positions_write would return, without writing. */
DCR_HIDDEN size_t dcr__positions_size(const uint32_t *pos, size_t count);
/* Reads exactly `count` positions below n from in[0..length); *used gets the bytes
 * consumed, up to the byte boundary after the last. Fails with DCR_E_POSITION. */
DCR_HIDDEN int dcr__positions_read(const uint8_t *in, size_t length, size_t count, size_t n,
                                   uint32_t *pos, size_t *used, dcr_detail *d);
/* The same, looking at *cancel (if not NULL) every 2^24 positions: non-zero stops
 * it with DCR_E_INTERRUPTED. */
DCR_HIDDEN int dcr__positions_watched(const uint8_t *in, size_t length, size_t count, size_t n,
                                      uint32_t *pos, size_t *used, const volatile int *cancel,
                                      dcr_detail *d);
/* Reads again, in batches, a stream that dcr__positions_read accepted (pos NULL:
 * checked without storing); the caller takes no more than its count. */
typedef struct {
  const uint8_t *bits; /* after the parameter byte */
  size_t bytes;
  uint64_t at;         /* the bit where the next gap's code starts */
  uint64_t next;       /* the smallest position it may give */
  unsigned k;
} dcr__positions_cursor;
DCR_HIDDEN void dcr__positions_start(dcr__positions_cursor *c, const uint8_t *in, size_t length);
DCR_HIDDEN void dcr__positions_take(dcr__positions_cursor *c, uint32_t *out, size_t count);

/* ---- golomb.c: DELTA_BANDED's rank streams (§9.5): Golomb-coded gaps */
#define DCR__GOLOMB_MAX ((uint64_t)1 << 31) /* the largest divisor */
/* Writes count (>= 1) strictly increasing positions with the divisor best for
 * their mean gap; returns the bytes written: at most 4 more than
 * DCR__POSITIONS_BOUND(last + 1) and 4 a position. */
DCR_HIDDEN size_t dcr__golomb_write(uint8_t *out, const uint32_t *pos, size_t count);
/* Checks a stream of exactly count positions below n at in[0..length) by every
 * rule of §9.5; *used gets its length, and out (unless NULL) the positions.
 * DCR_E_POSITION otherwise. */
DCR_HIDDEN int dcr__golomb_read(const uint8_t *in, size_t length, size_t count, size_t n,
                                uint32_t *out, size_t *used, dcr_detail *d);

/* ---- classed.c: DELTA_CLASSED (§9.4, format 1.2) */
#define DCR__CLASSES_MAX 2048 /* 2^11: F64's exponent field */
#define DCR__BANDS_MAX 8      /* §9.5 */
/* The class field of a dtype: its width in bits (0: one class) and *shift. */
DCR_HIDDEN unsigned dcr__class_bits(int dtype, unsigned *shift);
typedef struct {
  uint32_t *offset, *seen; /* per class: where its changes go; four histograms */
  void *bands;             /* banded.c's workspace */
  uint32_t *listed;        /* banded.c: an inverted band's unchanged ranks */
  size_t listed_capacity;
} dcr__classed_encoder;
DCR_HIDDEN int dcr__classed_encoder_init(dcr__classed_encoder *ws);
DCR_HIDDEN void dcr__classed_encoder_free(dcr__classed_encoder *ws);
/* Writes the encoded data of the count changes at pos (old: their base elements,
 * z: their zigzag deltas, packed) of a chunk whose base is `base`; returns its
 * length, or SIZE_MAX if it would pass capacity. ranks (count) and sorted (count
 * elements) are the caller's scratch. */
DCR_HIDDEN size_t dcr__classed_write(dcr__classed_encoder *ws, uint8_t *out, size_t capacity,
                                     const uint8_t *base, int dtype, const uint32_t *pos,
                                     const uint8_t *old, const uint8_t *z, size_t count,
                                     uint32_t *ranks, uint8_t *sorted);
/* banded.c: DELTA_BANDED (§9.5, format 1.3), the same interface: its encoder's
 * workspace (freed with the classed encoder's), its writer, which also needs the
 * chunk's element count n, and its streams' reader, after which the walk below
 * finds its changes. */
DCR_HIDDEN void *dcr__banded_workspace(void);
DCR_HIDDEN size_t dcr__banded_write(dcr__classed_encoder *ws, uint8_t *out, size_t capacity,
                                    const uint8_t *base, size_t n, int dtype,
                                    const uint32_t *pos, const uint8_t *old, const uint8_t *z,
                                    size_t count, uint32_t *ranks, uint8_t *sorted);
typedef struct dcr__classed dcr__classed;
DCR_HIDDEN int dcr__classed_decoder_init(dcr__classed **cls);
DCR_HIDDEN void dcr__classed_decoder_free(dcr__classed *cls);
/* The chunk stage: checks the class table, the rank streams and the values of
 * every rule that needs no base, and decodes the values (zigzag deltas, class by
 * class) into `values` (count elements). A non-zero *cancel (may be NULL) stops it
 * with DCR_E_INTERRUPTED. */
DCR_HIDDEN int dcr__classed_streams(dcr__classed *cls, const uint8_t *data, size_t length,
                                    int dtype, size_t n, size_t count, uint8_t *values,
                                    const volatile int *cancel, dcr_detail *d);
DCR_HIDDEN int dcr__banded_streams(dcr__classed *cls, const uint8_t *data, size_t length,
                                   int dtype, size_t n, size_t count, uint8_t *values,
                                   const volatile int *cancel, dcr_detail *d);
/* The apply stage, after dcr__classed_streams: elements first..last-1 (walked in
 * order, from 0, over calls) read from base, their changes written to out (which
 * may be base). dcr__classed_end then says whether every change was met. */
DCR_HIDDEN void dcr__classed_walk(dcr__classed *cls, const uint8_t *values, const uint8_t *base,
                                  uint8_t *out, size_t first, size_t last);
/* Which walk dcr__classed_walk takes (the results never depend on it; tests set
 * it): 0 the scalar one; 1 (the default) the CPU's best vector instructions where
 * it has them (bands: AVX-512 VBMI with GFNI and VPOPCNTDQ, else AVX2; classes:
 * AVX-512BW, else AVX2); 2 the same with AVX2 even where AVX-512 is. */
DCR_HIDDEN extern int dcr__classed_vector;
/* From now until the next chunk's streams, each change the walk meets is also
 * recorded, not in element order (classes: in the order met, by class within 64
 * elements; bands: at its value's index, band by band): its element index to
 * pos, its value (a zigzag delta) to values; room for the chunk's count. NULL
 * stops it. */
DCR_HIDDEN void dcr__classed_record(dcr__classed *cls, uint32_t *pos, uint8_t *values);
/* The same walk over a whole chunk of n elements, for dcr_changes: each change is
 * recorded, not applied: its element index to pos and its value to out_values,
 * both in element order (room for the chunk's count). Returns how many were met;
 * dcr__classed_end still says whether that is all. */
DCR_HIDDEN size_t dcr__classed_collect(dcr__classed *cls, const uint8_t *values,
                                       const uint8_t *base, size_t n, uint32_t *pos,
                                       uint8_t *out_values);
DCR_HIDDEN int dcr__classed_end(const dcr__classed *cls, dcr_detail *d);

/* ---- detect.c: change detection, on bits (§3) */
/* Writes the indices of the elements that differ to pos (room for n) and returns
 * how many there are. */
DCR_HIDDEN size_t dcr__detect(const uint8_t *base, const uint8_t *target, size_t n,
                              unsigned esize, uint32_t *pos);
/* Number of elements that differ, without positions. */
DCR_HIDDEN size_t dcr__count_changed(const uint8_t *a, const uint8_t *b, size_t n,
                                     unsigned esize);

/* ---- chunk_encode.c: the smallest encoding of one chunk (§9) */
typedef struct {
  ZSTD_CCtx *cctx;
  int level;
  uint32_t *pos;               /* n positions */
  uint8_t *old, *new;          /* the changed elements, packed: n·esize each */
  uint8_t *values, *planes;    /* n·esize each */
  uint8_t *pos_stream;         /* a position stream */
  uint8_t *zpos;               /* pos_stream compressed, zpos_length bytes (SIZE_MAX: not yet) */
  size_t zpos_length;
  uint8_t *trial, *best;       /* candidate encoded data */
  size_t trial_capacity;
  uint8_t *base_pieces, *target_pieces;
  int classed;                 /* the bundle's minor: 2 lets DELTA_CLASSED be chosen, 3
                                * DELTA_BANDED instead; less, neither */
  dcr__classed_encoder cw;
} dcr__chunk_encoder;

typedef struct {
  uint8_t encoding, compression;
  uint32_t count;        /* 0: unchanged, nothing to carry */
  uint64_t base_check, target_check; /* §8.2 */
  const uint8_t *base_pieces, *target_pieces; /* piece digests, valid until the next call */
  size_t pieces;
  const uint8_t *data;   /* encoded data, valid until the next call */
  size_t length;
} dcr__encoded;

DCR_HIDDEN int dcr__chunk_encoder_init(dcr__chunk_encoder *ce, size_t chunk_size, int level,
                                       int classed);
DCR_HIDDEN void dcr__chunk_encoder_free(dcr__chunk_encoder *ce);
/* dtype's elements; DELTA_CLASSED is a candidate if ce was made with `classed`. */
DCR_HIDDEN int dcr__encode_chunk(dcr__chunk_encoder *ce, const uint8_t *base,
                                 const uint8_t *target, size_t bytes, int dtype,
                                 dcr__encoded *out);

/* The smallest encoding of changes known as values rather than from a chunk's
 * bytes (a composition of bundles, squash/): `count` changes of one op
 * (DCR__OP_*) at increasing positions pos, their values packed (XOR values, zigzag
 * deltas or target elements), in a chunk of n elements. Tries the op's sparse and
 * dense encodings, never DELTA_CLASSED (its classes need the base); a dense
 * overwrite only when every element changes. Fills out's encoding, compression,
 * count and data; the checks are the caller's. pos and values may be ce->pos and
 * ce->old, which this does not touch. */
DCR_HIDDEN int dcr__encode_changes(dcr__chunk_encoder *ce, int op, const uint32_t *pos,
                                   const uint8_t *values, size_t count, size_t n,
                                   unsigned esize, dcr__encoded *out);

/* ---- encoder.c: the parts of a bundle around its chunks, shared with squash/ */
/* The header (w->minor), MANI (read back first as a reader with the default
 * limits would: R-WRT-2), RSIZ if an entry is resized, and META if meta_count. */
DCR_HIDDEN int dcr__write_head(dcr__writer *w, const dcr__manifest *m, const dcr_limits *inputs,
                               const dcr_meta *meta, size_t meta_count, dcr_detail *d);
/* IDEN (from m's descriptors and hashes), INDX of index[0..index_count), then
 * the signer's SIGN if there is one (sign/sign.h), FOOT. */
struct dcr__signer;
DCR_HIDDEN int dcr__write_tail(dcr__writer *w, const dcr__manifest *m, const dcr__chunk *index,
                               uint64_t index_count, struct dcr__signer *signer, dcr_detail *d);

/* ---- chunk_decode.c: decoding and applying one chunk (§9, §10) */
typedef struct {
  ZSTD_DCtx *dctx;
  uint32_t *pos;               /* positions [pos_first, pos_end) of the chunk's count */
  uint8_t *pos_stream, *planes;
  uint8_t *join;               /* DCR__JOIN_BLOCK joined elements */
  /* Memory (issue 18): pos holds pos_capacity positions. A chunk with more (a
   * sparse chunk whose count is near n) is checked whole, then read again in
   * batches through `cursor`, so that a decoder takes about 1.3 times the chunk
   * size, never 5 (4-byte positions for each of 2^30 U8 elements). */
  size_t pos_capacity, pos_first, pos_end;
  int batched;
  dcr__positions_cursor cursor, stream_start;
  unsigned minor;              /* the bundle's: which encodings exist (R-VER-4) */
  dcr__classed *cls;           /* minor >= 2: DELTA_CLASSED's walk */
  /* Optional (set after init): non-zero stops a decode with DCR_E_INTERRUPTED,
   * looked at every 64 MiB of work or so, so that a 1 GiB chunk is not waited for. */
  const volatile int *cancel;
} dcr__chunk_decoder;

#define DCR__JOIN_BLOCK 65536u /* dense values are joined this many elements at a time */
/* Long loops over a chunk look at a cancel flag every this many bytes of work or
 * so (a 1 GiB chunk is seconds of hashing or decoding on a slow machine). */
#define DCR__WATCH_BYTES ((size_t)64 << 20)
/* A decoder for chunks of up to chunk_size bytes. It holds at most
 * max(chunk_size / 16, 65536) positions and reads a sparse chunk with more in
 * batches (checked whole first), so that it never touches more than
 * dcr__chunk_decoder_bytes(chunk_size): a sparse 1 GiB U8 chunk whose count is n
 * took 5 GiB as 4-byte positions. dd->pos holds every position of a chunk only
 * after dcr__apply_streams with chunk NULL (see there). */
DCR_HIDDEN int dcr__chunk_decoder_init(dcr__chunk_decoder *dd, size_t chunk_size,
                                       unsigned minor);
/* Bytes a bounded decoder for chunk_size-byte chunks touches at most: its planes,
 * its position stream, its positions and a block of joined values (1.375 ·
 * chunk_size + 512 KiB for large chunks; a unit of a memory budget). */
DCR_HIDDEN uint64_t dcr__chunk_decoder_bytes(size_t chunk_size);
/* What one slot touches to read and decode r's selected chunks one after another
 * (payloads, inflated streams, positions), from what their records and the
 * manifest declare, before anything is allocated for them, with a decoder for
 * *largest bytes (the largest of those chunks, at least 1); *neediest is the chunk
 * that needs most alone (NULL if none is selected). */
DCR_HIDDEN uint64_t dcr__decode_bytes(const dcr_reader *r, size_t *largest,
                                      const dcr__chunk **neediest);
/* DCR_E_NOMEM, naming the budget, chunk c (the neediest, or NULL) and the chunk
 * size, if `need` (one thread's `work`: "checking the chunks", ...) is over r's
 * memory budget: work that does not fit on one thread is refused before a byte of
 * it is decoded (SPEC.md §11). */
DCR_HIDDEN int dcr__decode_fits(const dcr_reader *r, uint64_t need, const dcr__chunk *c,
                                size_t bytes, const char *work, dcr_detail *d);
DCR_HIDDEN void dcr__chunk_decoder_free(dcr__chunk_decoder *dd);
/* Decodes the streams of `data` (the encoded data after the chunk record) for a
 * chunk of n elements: positions into dd->pos (sparse encodings), and the value
 * planes, *planes (c->count planes' elements when sparse, n when dense). Checks
 * the rules of §9 that need neither the values' meaning nor a chunk. */
DCR_HIDDEN int dcr__chunk_streams(dcr__chunk_decoder *dd, const dcr__chunk *c,
                                  const uint8_t *data, size_t length, int dtype, size_t n,
                                  const uint8_t **planes, dcr_detail *d);
/* The values' rules of §9 for streams decoded by dcr__chunk_streams and, if
 * `chunk` is not NULL, applies them to chunk's bytes in place. With chunk NULL it
 * leaves every position of a sparse chunk in dd->pos[0..count-1] (for dcr_changes;
 * up to 4 bytes per element); dcr__decode_chunk with chunk NULL checks only. */
DCR_HIDDEN int dcr__apply_streams(dcr__chunk_decoder *dd, const dcr__chunk *c,
                                  const uint8_t *planes, int dtype, size_t n,
                                  uint8_t *chunk, dcr_detail *d);
/* For a sparse chunk whose streams dcr__chunk_streams decoded: copies `input` to
 * `out` one 4096-byte piece at a time, applies the values that fall in the piece,
 * and writes the digests (§7) of the piece before (unless input_digests is NULL)
 * and after, all while it is in cache. Returns the first rule the values break
 * (R-ENC-2, R-ENC-3); every digest of the input is written even then. */
DCR_HIDDEN int dcr__apply_sparse_pieces(dcr__chunk_decoder *dd, const dcr__chunk *c,
                                        const uint8_t *planes, int dtype, size_t n,
                                        const uint8_t *input, uint8_t *out,
                                        uint8_t *input_digests, uint8_t *out_digests,
                                        dcr_detail *d);
/* Both: decodes `data` (the encoded data after the chunk record) for a chunk of n
 * elements and, if `chunk` is not NULL, applies it to chunk's bytes in place.
 * Checks every rule of §9 that the presence or absence of `chunk` allows. */
DCR_HIDDEN int dcr__decode_chunk(dcr__chunk_decoder *dd, const dcr__chunk *c,
                                 const uint8_t *data, size_t length, int dtype, size_t n,
                                 uint8_t *chunk, dcr_detail *d);

/* ---- hash.c: tensor hashes and chunk checks over piece digests (§7, §8.2) */
#define DCR__PIECE 4096u
#define DCR__PIECES(bytes) (((size_t)(bytes) + DCR__PIECE - 1) / DCR__PIECE)
/* Writes the 16-byte digests of the pieces of p[0..bytes) to out (room for
 * DCR__PIECES(bytes) of them) and returns how many there are. */
DCR_HIDDEN size_t dcr__pieces(const uint8_t *p, size_t bytes, uint8_t *out);
/* ---- sha256.c: SHA-256 (the signed digests of SPEC.md §20), through libcrypto.
 * A context is set up once (DCR_E_NOMEM if it cannot be) and serves any number of
 * messages: final leaves it ready for the next. */
typedef struct {
  void *ctx; /* EVP_MD_CTX */
} dcr__sha256;
DCR_HIDDEN int dcr__sha256_init(dcr__sha256 *s, dcr_detail *d);
DCR_HIDDEN void dcr__sha256_update(dcr__sha256 *s, const void *p, size_t n);
DCR_HIDDEN void dcr__sha256_final(dcr__sha256 *s, uint8_t out[32]);
DCR_HIDDEN void dcr__sha256_free(dcr__sha256 *s);
/* The pieces of dcr__pieces, SHA-256 each (the signed tensor digests of §20.2):
 * one piece list, two hash functions, so both are cut and combined one way. */
DCR_HIDDEN size_t dcr__pieces_sha256(dcr__sha256 *s, const uint8_t *p, size_t bytes, uint8_t *out);
/* ---- sha256_ni.c: the same digests of `count` whole pieces at p, with the x86
 * SHA extensions, several at a time: returns how many it made (the first ones;
 * 0 without the extensions, or when dcr__sha256_vector is 0, which tests set to
 * compare with libcrypto). */
DCR_HIDDEN size_t dcr__pieces_sha256_ni(const uint8_t *p, size_t count, uint8_t *out);
DCR_HIDDEN extern int dcr__sha256_vector;
/* A tensor's SHA-256 digest (§20.2) made a run of its bytes at a time, each run
 * whole pieces but the tensor's last: `piece` hashes each piece, `tensor` the
 * pieces' digests in order (fed by update, or directly with digests made
 * elsewhere); dcr__sha256_final(&t->tensor, out) gives the digest and starts the
 * next tensor. */
typedef struct {
  dcr__sha256 piece, tensor;
} dcr__tensor_sha256;
DCR_HIDDEN int dcr__tensor_sha256_init(dcr__tensor_sha256 *t, dcr_detail *d);
DCR_HIDDEN void dcr__tensor_sha256_update(dcr__tensor_sha256 *t, const uint8_t *p, size_t bytes);
DCR_HIDDEN void dcr__tensor_sha256_free(dcr__tensor_sha256 *t);
/* Every tensor's SHA-256 tensor digest (§20.2) of the checkpoint, in its tensor order,
 * 32 bytes each into out, with the state id's jobs, threads and cancel/progress
 * (state_id.c). */
DCR_HIDDEN int dcr__checkpoint_sha256(dcr_checkpoint *c, unsigned threads, uint8_t *out,
                                      dcr_detail *d);
/* dcr__pieces, and a copy of the bytes to dst made piece by piece while each is
 * in cache: one read of src instead of two. */
DCR_HIDDEN size_t dcr__pieces_copy(uint8_t *dst, const uint8_t *src, size_t bytes, uint8_t *out);
/* dcr__pieces of `bytes` zeros, from one zero page: no buffer of that size. */
DCR_HIDDEN size_t dcr__pieces_zero(size_t bytes, uint8_t *out);
/* A chunk's base or target check from its piece digests. */
DCR_HIDDEN uint64_t dcr__pieces_check(const uint8_t *pieces, size_t count);
DCR_HIDDEN void dcr__digest128(XXH3_state_t *st, uint8_t out[16]);
/* The tensor hash of `length` bytes in memory. */
DCR_HIDDEN void dcr__hash_memory(const uint8_t *p, uint64_t length, uint8_t out[16]);
/* The tensor hash of `length` bytes of checkpoint c from `start`; sha (optional)
 * is fed the same bytes as they are read (its tensor digest is the caller's to
 * finish). */
DCR_HIDDEN int dcr__hash_range(const dcr__checkpoint *c, uint64_t start, uint64_t length,
                               uint8_t out[16], dcr__tensor_sha256 *sha, dcr_detail *d);

/* ---- pool.c: worker threads that run a stream of jobs ahead of the caller */
typedef struct dcr__pool dcr__pool;
typedef void (*dcr__job_fn)(void *ctx, size_t job, unsigned worker);
DCR_HIDDEN int dcr__pool_create(dcr__pool **pool, unsigned threads);
/* cpus.c: as many of `threads` as fit `budget` bytes at `per_thread` each, and
 * at least one (a single thread's buffers are what the work needs at all). */
DCR_HIDDEN unsigned dcr__threads_within(unsigned threads, uint64_t per_thread, uint64_t budget);
/* cpus.c: one thread when the jobs are too small on average to pay for handing
 * them to workers, else `threads`. The result never depends on it. */
DCR_HIDDEN unsigned dcr__threads_for_jobs(unsigned threads, uint64_t jobs, uint64_t bytes);
/* Jobs run at most this many ahead of the one being taken: job j owns slot
 * j % window until it has been taken. */
DCR_HIDDEN size_t dcr__pool_window(const dcr__pool *pool);
/* Takes job j's result on the calling thread; non-zero stops the stream. */
typedef int (*dcr__take_fn)(void *ctx, size_t job, dcr_detail *d);
/* Runs fn(ctx, j, worker) for every j < jobs on the workers and take(ctx, j, d)
 * on the caller, in job order, each after its job and before job j + window
 * starts. Returns the first non-zero take, or DCR_E_INTERRUPTED once *cancel
 * (optional) is set; no job runs on after it returns. */
DCR_HIDDEN int dcr__pool_stream(dcr__pool *pool, size_t jobs, dcr__job_fn fn, dcr__take_fn take,
                                void *ctx, const volatile int *cancel, dcr_detail *d);
DCR_HIDDEN void dcr__pool_free(dcr__pool *pool);

/* ---- pass.c: one pass over a bundle's target chunks (§10.1), under every apply */
#define DCR__NO_RECORD UINT64_MAX
typedef struct {
  uint32_t entry, chunk; /* chunk is UINT32_MAX for the marker of an empty tensor */
  uint64_t record;       /* index of its CHNK, or DCR__NO_RECORD if unchanged */
} dcr__job;

typedef struct {             /* one chunk's result, handed to a driver's hooks */
  const dcr__job *job;
  size_t slot;               /* < dcr__pass_slots(): this job's until it is taken */
  uint64_t at;               /* byte offset of the chunk in its tensor */
  size_t bytes;              /* 0 for the marker of an empty tensor */
  const uint8_t *input;      /* the chunk's input bytes (zeros if not delta-coded) */
  const uint8_t *result;     /* its target bytes: input, or the applied chunk */
  const uint8_t *result_pieces;
  int zero;                  /* 1: an unchanged chunk of zeros (no input read), left
                              * unmaterialized by lazy_zeros: input and result NULL */
} dcr__pass_chunk;

typedef struct {
  dcr_reader *r;
  int verify;       /* dcr_verify: NONE skips base_check and target_check */
  int changed_only; /* only changed chunks (in file order too); no tensor hashes */
  int as_target;    /* the input is taken to be the target already (§10.2) */
  int mixed;        /* the input is part base, part target, changed chunk by changed
                     * chunk (a salvage, SPEC.md §18.4): a chunk that gives its
                     * target_check is its result as it is; base tensor hashes are
                     * not checked, target ones are (verify must be FULL) */
  int lazy_zeros;   /* unchanged chunks of zeros are hashed from a zero page, never
                     * written to a buffer: the hooks get them with .zero set */
  unsigned threads; /* 0 = all online cores */
  const uint8_t *skip; /* NULL, or 1 per manifest entry: 1 leaves the entry out, as an
                        * unselected one (a memory apply's raw members not given) */
  const volatile int *cancel;
  dcr_progress_fn progress;
  void *progress_opaque;
  /* Worker: the input bytes of `bytes` at `at` in entry's tensor, as a view (a
   * pointer to memory, or dcr__view_open with `fallback` as its buffer), given
   * input_ctx; dcr__file_input for a checkpoint file. */
  int (*input)(void *input_ctx, uint32_t entry, uint64_t at, size_t bytes, dcr__view *view,
               uint8_t *fallback, dcr_detail *d);
  void *input_ctx;
  /* Worker, optional: before a DELTA_CLASSED chunk is applied, room for its changes
   * (dcr__classed_record: count positions and values), or *pos NULL for none; they
   * are the hook's, filled once the chunk's result is checked. */
  void (*keep)(void *ctx, const dcr__job *job, uint32_t **pos, uint8_t **values);
  /* Worker, optional: each chunk's result, in any order. */
  int (*emit)(void *ctx, const dcr__pass_chunk *c, dcr_detail *d);
  /* Calling thread, optional: each chunk's result, in job order. */
  int (*take)(void *ctx, const dcr__pass_chunk *c, dcr_detail *d);
  void *ctx;
} dcr__pass_spec;

typedef struct dcr__pass dcr__pass;
/* Builds the jobs, threads and buffers (*pass is set even on failure, for free). */
DCR_HIDDEN int dcr__pass_init(dcr__pass **pass, const dcr__pass_spec *spec, dcr_detail *d);
DCR_HIDDEN size_t dcr__pass_slots(const dcr__pass *pass);
/* Bytes of input the pass reads: every target chunk, or the changed ones. */
DCR_HIDDEN uint64_t dcr__pass_bytes(const dcr__pass *pass);
/* Bytes of memory its slots may touch (within the reader's max_memory). */
DCR_HIDDEN uint64_t dcr__pass_memory(const dcr__pass *pass);
/* Runs every job; the first failure in job order is the answer. Tensor hashes are
 * checked unless changed_only or verify is NONE. Can run more than once. */
DCR_HIDDEN int dcr__pass_run(dcr__pass *pass, dcr_detail *d);
DCR_HIDDEN void dcr__pass_free(dcr__pass *pass);
/* The input hook for a checkpoint file (input_ctx a dcr__file): entry's tensor at
 * offsets[entry], read (pread) into the slot's buffer, never mapped: a file that
 * shrinks or changes meanwhile cannot raise SIGBUS or change the bytes after
 * they are hashed; errors name the file. With a cancel flag, a chunk is read
 * DCR__WATCH_BYTES at a time, the flag looked at in between. */
typedef struct {
  const dcr__checkpoint *ck;
  const uint64_t *offsets;
  const char *path;
  const volatile int *cancel; /* optional */
} dcr__file;
DCR_HIDDEN int dcr__file_input(void *input_ctx, uint32_t entry, uint64_t at, size_t bytes,
                               dcr__view *view, uint8_t *fallback, dcr_detail *d);
/* §6.3: the checkpoint has exactly the manifest's base tensors (as_target: its
 * target tensors), by name, dtype and shape; offsets[entry] gets the file offset
 * of each. DCR_E_BASE_MISMATCH, naming the tensor, otherwise. */
DCR_HIDDEN int dcr__match_checkpoint(const dcr__manifest *m, const dcr__checkpoint *ck,
                                     int as_target, uint64_t *offsets, dcr_detail *d);

#endif
