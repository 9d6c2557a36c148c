/*
 * mkvectors.c - writes the DCR golden test vectors (testvectors/, SPEC.md §12).
 *
 *   mkvectors OUTDIR [--repaired DIR]
 *
 * writes OUTDIR/index.json and OUTDIR/v1/...; with --repaired, also the repaired
 * variant of every invalid vector that has one, as a corpus of its own in DIR
 * (never committed): the same vector made by the same code with its faulty field
 * at a valid value, which must be valid. `make vectors` runs it on testvectors/;
 * `make vectors-check` runs it on a temporary folder, fails if a byte differs from
 * what is committed, and plays the repaired variants through tests/test_vectors.
 *
 * This is a second, independent writer of the format: every bundle is built here
 * (with the bundle builder of tools/bundlegen.h, which tools/mkvectors11.c shares
 * for the 1.1 vectors) from the bytes up with xxHash and zstd only, not with
 * libdcr, so that the corpus checks the library instead of repeating it. Valid vectors choose each chunk's
 * encoding and compression explicitly (SPEC.md §9: readers accept any valid
 * choice), so they do not change when the reference encoder's choices do. Each
 * invalid vector breaks exactly one rule: the sections around the broken field
 * keep correct lengths and checksums (recomputed here, and the state ids and the
 * carried safetensors header where a vector changes what they are made from), so
 * that a reader gets as far as the check the vector targets. The repair check
 * (emit_repaired) is what shows it: the vector written again with that one field
 * at a valid value must be valid. Vectors flagged check-order break two rules on
 * purpose, to test the order of checks (SPEC.md §15).
 *
 * Everything is deterministic: data comes from one fixed-seed PRNG in program
 * order; zstd output depends only on the libzstd version (recorded in the index);
 * the invalid vectors' zstd frames are written by hand and depend on nothing.
 * v1 is frozen (SPEC.md R-VER-3) and the PRNG is one stream, so a generator added
 * later runs after all of today's, as model_valid_vectors runs after the 1.0
 * draft's generators; drawing earlier would change v1 (vectors-check fails).
 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>
#include <zstd.h>

#define SEED 0x4443523176656374ull /* "DCR1vect" */
#define ZLEVEL 3                   /* zstd level of the valid vectors' frames */
#define VECGEN_NAME "mkvectors"
#include "vecgen.h"

#include "bundlegen.h"


/* ------------------------------------------------------------------------ */
/* The index and the files                                                   */

static const flag_def v1_flags[] = {
    {"encoding", "basic", "exercises a chunk encoding (SPEC.md §9.1)"},
    {"compression", "basic", "zstd-compressed streams or sections (§4.4, §9.3)"},
    {"dtype", "basic", "tensors of every dtype (§3)"},
    {"tensor-set", "basic", "tensors added, removed, reshaped or recoded (§6.2)"},
    {"metadata", "basic", "META section or safetensors __metadata__ (§6.4)"},
    {"ancillary", "basic", "ancillary sections a reader must skip (§4.3)"},
    {"raw", "basic", "a raw (non-safetensors) checkpoint (§2)"},
    {"zero-length", "edge-case", "scalars, zero-length tensors or no tensors at all"},
    {"change-rate", "edge-case", "0% or 100% of the elements changed"},
    {"chunk-geometry", "edge-case",
     "unusual chunk sizes, a last chunk shorter than the others, positions at chunk edges"},
    {"limit-edge", "edge-case", "a value exactly at a limit of §11 (accepted)"},
    {"version", "edge-case", "format version fields (§4.1, §12)"},
    {"handmade-zstd", "edge-case", "zstd frames written by hand (raw blocks), not by libzstd"},
    {"layout", "edge-case", "base and target lay their data regions out differently"},
    {"structure-only", "edge-case",
     "no checkpoints ship: only the checks that need no base apply (the target is too large)"},
    {"shape-overflow", "known-bug-class",
     "a shape whose element count overflows 64 bits or wraps to 0"},
    {"byte-length", "known-bug-class", "a byte length that is not shape x dtype size"},
    {"offsets", "known-bug-class",
     "tensor offsets out of range, overlapping, unsorted or leaving gaps"},
    {"duplicate-name", "known-bug-class", "a tensor name that appears twice"},
    {"unknown-dtype", "known-bug-class", "a dtype code or name that does not exist"},
    {"size-as-allocation", "known-bug-class",
     "a declared size or count far beyond the bytes present (must not be allocated)"},
    {"decompressed-size", "known-bug-class",
     "a zstd frame that gives more or fewer bytes than declared, or declares none"},
    {"positions", "known-bug-class", "sparse positions out of range, wrapping or badly encoded"},
    {"truncation", "known-bug-class", "the bundle cut at or inside a structure"},
    {"bit-flip", "known-bug-class", "one flipped bit, caught by the checksum that covers it"},
    {"wrong-base", "known-bug-class",
     "a bundle applied to a base it was not made for (state id or chunk base hash)"},
    {"reserved", "malformed-field", "a reserved field, bit or padding byte set"},
    {"unknown-critical", "malformed-field", "a critical section of unknown type"},
    {"malformed-field", "malformed-field", "a field with a value the format forbids"},
    {"check-order", "malformed-field",
     "breaks two rules on purpose, to test the order of checks SPEC.md fixes (no repair check)"},
    {"name", "malformed-field", "a tensor name that is empty, too long, not UTF-8 or unsorted"},
    {"limit", "malformed-field", "a declared value above a limit of §11"},
    {"order", "malformed-field", "sections missing, repeated or out of order"},
    {"index", "malformed-field", "chunk records or index records that disagree or are out of range"},
    {"footer", "malformed-field", "a footer that is misplaced or disagrees with the sections"},
    {"checkpoint", "malformed-field", "a safetensors header (carried or in the base) that is invalid"},
    {"target-mismatch", "malformed-field", "a bundle whose chunks or hashes do not give its target"},
    {"multiple-errors", "malformed-field",
     "more than one bad chunk: a validator that reports all finds every one (all_errors)"},
};

/* A vector's files, written to a sink. */
static json_t *write_files(int sink, const char *id, const buf *bundle_bytes, ckpt *base,
                           ckpt *target) {
  json_t *files = bundle_ref(sink, id, bundle_bytes);
  if (base) json_object_set_new(files, "base", ck_ref(sink, base));
  if (target) json_object_set_new(files, "target", ck_ref(sink, target));
  return files;
}

/* Writes a vector's bundle (and checkpoints) and appends it to the index. */
static void emit(const vec *v, const buf *bundle_bytes, ckpt *base, ckpt *target) {
  vector_check(v);
  add_vector(v, write_files(CORPUS, v->id, bundle_bytes, base, target));
}

static void emit_bundle(const vec *v, bundle *B, ckpt *base, ckpt *target) {
  buf out = {0};
  serialize(B, &out);
  emit(v, &out, base, target);
  bfree(&out);
}

/* The repair check (repair_checked): `bytes` is invalid vector v made again by
 * the same code with its faulty field set back to a valid value, at the place its
 * description names; it must apply to `target` where a base is given. Call right
 * after emitting v. */
static void emit_repaired(const vec *v, const buf *bytes, ckpt *base, ckpt *target) {
  if (repair_checked(v)) add_repaired(v, write_files(REPAIRED, v->id, bytes, base, target));
}

static void emit_repaired_bundle(const vec *v, bundle *B, ckpt *base, ckpt *target) {
  buf out = {0};
  serialize(B, &out);
  emit_repaired(v, &out, base, target);
  bfree(&out);
  bundle_free(B);
}

/* ------------------------------------------------------------------------ */
/* Checkpoint pairs                                                          */

static void dims1(uint64_t *d, uint64_t a) { d[0] = a; }

/* "enc": one BF16 tensor of 6194 elements = 3 full 4 KiB chunks and a 100-byte
 * last chunk: few changes, many changes, none, and changes at both chunk edges. */
static void pair_enc(ckpt *b, ckpt *t) {
  uint64_t d[1] = {6194};
  b->file = "ckpt/enc-base.safetensors";
  b->kind = KIND_ST;
  fill_random(ck_add(b, "w", BF16, 1, d));
  ck_finish(b);
  ck_clone(t, b, "ckpt/enc-target.safetensors");
  tensor *w = ck_get(t, "w");
  uint8_t *p = w->data;
  for (int k = 0; k < 40; k++) p[(rng() % 2048) * 2] ^= rnonzero();       /* chunk 0: sparse */
  for (size_t k = 0; k < 2048; k++)
    if (rng() % 10 < 7) p[4096 + k * 2 + 1] ^= rnonzero();               /* chunk 1: dense */
  p[12288] ^= 0x80;                                                       /* chunk 3: first */
  p[12388 - 1] ^= 0x01;                                                   /* and last element */
  p[12300] ^= 0x10;
  ck_finish(t);
}

static void pair_dtypes(ckpt *b, ckpt *t) {
  b->file = "ckpt/dtypes-base.safetensors";
  b->kind = KIND_ST;
  for (int dt = 1; dt <= 15; dt++) {
    char name[32];
    uint64_t d[2] = {8, 9};
    snprintf(name, sizeof name, "t%02d.%s", dt, dt_name[dt]);
    tensor *x = ck_add(b, name, dt, 2, d);
    fill_random(x);
  }
  /* F32: +0 in the base becomes -0; a NaN changes payload (bits, not values). */
  tensor *f = ck_get(b, "t12.F32");
  put32(f->data, 0x00000000);
  put32(f->data + 4, 0x7FC00001);
  ck_finish(b);
  ck_clone(t, b, "ckpt/dtypes-target.safetensors");
  for (size_t i = 0; i < t->n; i++) mutate(&t->t[i], 2500);
  f = ck_get(t, "t12.F32");
  put32(f->data, 0x80000000);
  put32(f->data + 4, 0x7FC00002);
  ck_finish(t);
}

static void pair_tensors(ckpt *b, ckpt *t) {
  uint64_t d[2];
  b->file = "ckpt/tensors-base.safetensors";
  t->file = "ckpt/tensors-target.safetensors";
  b->kind = t->kind = KIND_ST;
  dims1(d, 32);
  tensor *keep = ck_add(b, "a.keep", F32, 1, d);
  fill_random(keep);
  dims1(d, 16);
  fill_random(ck_add(b, "b.removed", F16, 1, d));
  d[0] = 8, d[1] = 160;
  tensor *rs = ck_add(b, "c.reshaped", BF16, 2, d);
  fill_random(rs);
  dims1(d, 10);
  fill_random(ck_add(b, "d.recoded", F32, 1, d));
  dims1(d, 10);
  fill_random(ck_add(b, "e.resized", I32, 1, d));
  ck_finish(b);
  dims1(d, 32);
  memcpy(ck_add(t, "a.keep", F32, 1, d)->data, keep->data, 128);
  d[0] = 160, d[1] = 8;
  tensor *rt = ck_add(t, "c.reshaped", BF16, 2, d);
  memcpy(rt->data, rs->data, (size_t)rs->len);
  mutate(rt, 100);
  dims1(d, 10);
  fill_random(ck_add(t, "d.recoded", F16, 1, d));
  dims1(d, 12);
  tensor *er = ck_add(t, "e.resized", I32, 1, d);
  memcpy(er->data, ck_get(b, "e.resized")->data, 40);
  fill_random(ck_add(t, "f.added", U8, 1, (dims1(d, 300), d)));
  ck_finish(t);
}

static void pair_empty(ckpt *b, ckpt *t) {
  uint64_t d[3];
  b->file = "ckpt/empty-base.safetensors";
  b->kind = KIND_ST;
  fill_random(ck_add(b, "scalar.changed", F32, 0, d));
  fill_random(ck_add(b, "scalar.same", I64, 0, d));
  dims1(d, 0);
  ck_add(b, "zero.1d", F32, 1, d);
  d[0] = 3, d[1] = 0, d[2] = 5;
  ck_add(b, "zero.3d", BF16, 3, d);
  dims1(d, 0);
  ck_add(b, "zero.removed", U8, 1, d);
  dims1(d, 24);
  fill_random(ck_add(b, "dense", F16, 1, d));
  ck_finish(b);
  ck_clone(t, b, "ckpt/empty-target.safetensors");
  mutate(ck_get(t, "scalar.changed"), 10000);
  mutate(ck_get(t, "dense"), 3000);
  ck_remove(t, "zero.removed");
  d[0] = 0, d[1] = 7;
  ck_add(t, "zero.added", I32, 2, d);
  ck_finish(t);
}

static void pair_none(ckpt *b, ckpt *t) {
  b->file = "ckpt/none-base.safetensors";
  b->kind = KIND_ST;
  ck_finish(b);
  ck_clone(t, b, "ckpt/none-target.safetensors");
  ck_finish(t);
}

static void pair_full(ckpt *b, ckpt *t) {
  uint64_t d[1] = {2500};
  b->file = "ckpt/full-base.safetensors";
  b->kind = KIND_ST;
  fill_random(ck_add(b, "all", F32, 1, d));
  ck_finish(b);
  ck_clone(t, b, "ckpt/full-target.safetensors");
  mutate(ck_get(t, "all"), 10000);
  ck_finish(t);
}

/* chunk size 32 KiB: U8 tensor of 40000 bytes = a full chunk and a 7232-byte one;
 * positions with gaps of 0, long gaps and at both chunk edges. */
static void pair_positions(ckpt *b, ckpt *t) {
  uint64_t d[1] = {40000};
  b->file = "ckpt/positions-base.safetensors";
  b->kind = KIND_ST;
  fill_random(ck_add(b, "bytes", U8, 1, d));
  ck_finish(b);
  ck_clone(t, b, "ckpt/positions-target.safetensors");
  uint8_t *p = ck_get(t, "bytes")->data;
  static const unsigned at[] = {0, 1, 2, 20000, 32767, 32768, 32769, 39999};
  for (size_t k = 0; k < sizeof at / sizeof *at; k++) p[at[k]] ^= rnonzero();
  ck_finish(t);
}

static void pair_raw(ckpt *b, ckpt *t) {
  uint64_t d[1] = {10000};
  b->file = "ckpt/raw-base.bin";
  b->kind = KIND_RAW;
  fill_random(ck_add(b, "raw", U8, 1, d));
  ck_finish(b);
  ck_clone(t, b, "ckpt/raw-target.bin");
  mutate(ck_get(t, "raw"), 20);
  ck_finish(t);
}

/* Names that sort differently bytewise and by code point or locale, JSON escapes,
 * a name of exactly max_name_length bytes, a rank of exactly max_rank, and
 * __metadata__ in the header. */
static void pair_names(ckpt *b, ckpt *t) {
  uint64_t d[16];
  b->file = "ckpt/names-base.safetensors";
  b->kind = KIND_ST;
  b->meta = "{\"format\":\"pt\",\"note\":\"caf\xc3\xa9 \\\"quoted\\\"\"}";
  static const char *const names[] = {"B", "a", "a.b", "a\"q\\b", "\xc3\xa9t\xc3\xa9",
                                      "\xe2\x82\xac", "\xf0\x9f\x98\x80", "z z", "\x7f"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    fill_random(ck_add(b, names[i], I8, 1, (dims1(d, 5 + i), d)));
  char *longname = xmalloc(4097);
  memset(longname, 'n', 4096);
  fill_random(ck_add(b, longname, U16, 1, (dims1(d, 3), d)));
  free(longname);
  for (int i = 0; i < 16; i++) d[i] = i == 3 ? 3 : i == 9 ? 2 : 1;
  fill_random(ck_add(b, "rank16", F16, 16, d));
  ck_finish(b);
  ck_clone(t, b, "ckpt/names-target.safetensors");
  for (size_t i = 0; i < t->n; i++) mutate(&t->t[i], 3000);
  ck_finish(t);
}

/* Base in name order, target in reverse order with extra header padding. */
static void pair_layout(ckpt *b, ckpt *t) {
  uint64_t d[1];
  b->file = "ckpt/layout-base.safetensors";
  b->kind = KIND_ST;
  for (int i = 0; i < 4; i++) {
    char name[16];
    snprintf(name, sizeof name, "l%d", i);
    fill_random(ck_add(b, name, I16, 1, (dims1(d, 100u + 37u * (unsigned)i), d)));
  }
  ck_finish(b);
  ck_clone(t, b, "ckpt/layout-target.safetensors");
  t->reverse = 1;
  t->extra_pad = 13;
  for (size_t i = 0; i < t->n; i += 2) mutate(&t->t[i], 500);
  ck_finish(t);
}

/* The model pair most invalid vectors are made from. */
static void pair_model(ckpt *b, ckpt *t) {
  uint64_t d[1];
  b->file = "ckpt/model-base.safetensors";
  b->kind = KIND_ST;
  fill_random(ck_add(b, "a", BF16, 1, (dims1(d, 4096), d)));
  fill_random(ck_add(b, "b", F32, 1, (dims1(d, 100), d)));
  fill_random(ck_add(b, "c", U8, 1, (dims1(d, 64), d)));
  fill_random(ck_add(b, "e", F32, 1, (dims1(d, 1024), d)));
  ck_finish(b);
  ck_clone(t, b, "ckpt/model-target.safetensors");
  ck_remove(t, "c");
  fill_random(ck_add(t, "d", I16, 1, (dims1(d, 50), d)));
  tensor *a = ck_get(t, "a");
  for (int k = 0; k < 30; k++) a->data[(rng() % 2048) * 2 + 1] ^= rnonzero();
  for (size_t k = 2048; k < 4096; k++)
    if (rng() % 2) a->data[k * 2] ^= rnonzero();
  tensor *bb = ck_get(t, "b");
  for (int k = 0; k < 100; k += 9) bb->data[k * 4 + 3] ^= 0x40;
  ck_finish(t);
}

/* Chunk choices of the model bundle: one of each encoding, zstd on two. */
static choice pol_model(void *ctx, size_t entry, uint32_t chunk, size_t n, uint32_t count) {
  (void)ctx, (void)n, (void)count;
  if (entry == 0) return chunk ? (choice){XOR_DENSE, 1} : (choice){XOR_SPARSE, 0};
  if (entry == 1) return (choice){OVERWRITE_SPARSE, 0};
  return (choice){OVERWRITE_DENSE, 1};
}

/* ------------------------------------------------------------------------ */
/* Valid vectors                                                             */

static void valid_vectors(void) {
  static ckpt eb, et, db, dt, tb, tt, mb, mt, nb, nt, fb, ft, pb, pt, rb, rt, ab, at, lb, lt;
  bundle B;
  char id[128], text[256];

  pair_enc(&eb, &et);
  for (int comp = 0; comp < 2; comp++)
    for (int enc = 1; enc <= ENC_LAST; enc++) {
      choice ch = {(uint8_t)enc, (uint8_t)comp};
      build(&B, &eb, &et, 4096, pol_fixed, &ch);
      snprintf(id, sizeof id, "valid/encoding-%s-%s", enc_name[enc], comp ? "zstd" : "stored");
      snprintf(text, sizeof text, "every changed chunk %s, %s; 4 chunks of BF16, the last "
               "100 bytes; one chunk unchanged", enc_name[enc],
               comp ? "each stream one zstd frame" : "streams stored");
      emit_bundle(VALID(.id = id, .text = text, .flags = comp ? "encoding,compression,chunk-geometry"
                                                                : "encoding,chunk-geometry",
                        .covers = comp ? "§9.1,§9.3,R-ENC-1,R-CMP-3,R-APL-2" : "§9.1,R-ENC-1,R-APL-2"),
                  &B, &eb, &et);
      bundle_free(&B);
    }
  unsigned k = 0;
  build(&B, &eb, &et, 4096, pol_cycle, &k);
  B.mani_comp = 1;
  rebuild_mani(&B);
  emit_bundle(VALID(.id = "valid/encoding-mixed", .flags = "encoding,compression",
                    .text = "a different encoding and compression per chunk; MANI stored as zstd",
                    .covers = "§9.1,§9.3,§4.4,R-CMP-1,R-ENC-7"),
              &B, &eb, &et);
  bundle_free(&B);

  pair_dtypes(&db, &dt);
  choice sparse = {XOR_SPARSE, 0}, dense = {OVERWRITE_DENSE, 1};
  build(&B, &db, &dt, 4096, pol_fixed, &sparse);
  emit_bundle(VALID(.id = "valid/dtypes-xor-sparse", .flags = "dtype,encoding",
                    .text = "every dtype of §3 (element sizes 1, 2, 4, 8), XOR_SPARSE; an F32 +0 "
                            "becomes -0 and a NaN changes payload",
                    .covers = "§3,R-DT-1,§9.1"),
              &B, &db, &dt);
  bundle_free(&B);
  build(&B, &db, &dt, 4096, pol_fixed, &dense);
  emit_bundle(VALID(.id = "valid/dtypes-overwrite-dense-zstd", .flags = "dtype,encoding,compression",
                    .text = "every dtype of §3, OVERWRITE_DENSE with zstd",
                    .covers = "§3,R-DT-1,§9.1,§9.3"),
              &B, &db, &dt);
  bundle_free(&B);

  pair_tensors(&tb, &tt);
  build(&B, &tb, &tt, 4096, pol_default, NULL);
  emit_bundle(VALID(.id = "valid/tensors-added-removed-reshaped", .flags = "tensor-set",
                    .text = "a tensor unchanged, removed, reshaped (delta-coded, same bytes), "
                            "recoded (dtype change), resized, added (zero base)",
                    .covers = "§6.2,§6.3,§8.1,R-APL-1"),
              &B, &tb, &tt);
  bundle_free(&B);

  pair_empty(&mb, &mt);
  build(&B, &mb, &mt, 4096, pol_default, NULL);
  emit_bundle(VALID(.id = "valid/zero-length-tensors", .flags = "zero-length",
                    .text = "scalars (shape []), shapes [0] and [3,0,5] sharing offsets, a "
                            "zero-length tensor removed and one added",
                    .covers = "R-ST-4,R-ST-6,§8.1,R-MAN-5,R-MAN-6"),
              &B, &mb, &mt);
  bundle_free(&B);

  pair_none(&nb, &nt);
  build(&B, &nb, &nt, 4096, pol_default, NULL);
  emit_bundle(VALID(.id = "valid/no-tensors", .flags = "zero-length",
                    .text = "two checkpoints with no tensors: no entries, no chunks",
                    .covers = "§6.1,§4"),
              &B, &nb, &nt);
  bundle_free(&B);

  build(&B, &eb, &eb, 4096, pol_default, NULL);
  emit_bundle(VALID(.id = "valid/change-none", .flags = "change-rate",
                    .text = "0% changed: base and target identical, no CHNK sections",
                    .covers = "§8.1,§10"),
              &B, &eb, &eb);
  bundle_free(&B);

  pair_full(&fb, &ft);
  build(&B, &fb, &ft, 4096, pol_default, NULL);
  emit_bundle(VALID(.id = "valid/change-all", .flags = "change-rate,chunk-geometry",
                    .text = "100% of the elements changed (count = n in every chunk)",
                    .covers = "§9.2,R-ENC-2"),
              &B, &fb, &ft);
  bundle_free(&B);

  pair_positions(&pb, &pt);
  unsigned pk = 1; /* XOR_SPARSE stored, then OVERWRITE_SPARSE... */
  build(&B, &pb, &pt, 32768, pol_cycle, &pk);
  emit_bundle(VALID(.id = "valid/chunk-size-32k-positions", .flags = "chunk-geometry,encoding",
                    .text = "chunk size 32 KiB, last chunk 7232 bytes; sparse positions 0, 1, 2 "
                            "(gaps of 0), a gap of 19997, the first and last element of a chunk",
                    .covers = "§8.1,§9.1,R-POS-1,R-POS-3,R-MAN-3"),
              &B, &pb, &pt);
  bundle_free(&B);

  build(&B, &eb, &et, 1u << 30, pol_default, NULL);
  emit_bundle(VALID(.id = "valid/chunk-size-max", .flags = "chunk-geometry,limit-edge",
                    .text = "chunk size 2^30 (max_chunk_size) with a 12 KiB tensor: one short chunk",
                    .covers = "R-MAN-3,R-LIM-1,§8.1"),
              &B, &eb, &et);
  bundle_free(&B);

  pair_raw(&rb, &rt);
  build(&B, &rb, &rt, 4096, pol_default, NULL);
  emit_bundle(VALID(.id = "valid/raw", .flags = "raw",
                    .text = "raw checkpoints of 10000 bytes: one U8 tensor named raw",
                    .covers = "§2,R-MAN-7"),
              &B, &rb, &rt);
  bundle_free(&B);

  static const char *const meta[] = {"dcr.step", "1200", "model", "caf\xc3\xa9",
                                     "z-empty", "", NULL};
  pair_names(&ab, &at);
  build(&B, &ab, &at, 4096, pol_default, NULL);
  add_meta(&B, meta, 0);
  emit_bundle(VALID(.id = "valid/names-and-limits", .flags = "metadata,limit-edge",
                    .text = "UTF-8 names sorted bytewise, JSON escapes, a name of exactly 4096 "
                            "bytes, rank exactly 16, __metadata__ in the header, a META section",
                    .covers = "R-MAN-4,R-MAN-5,R-ST-2,R-ST-5,§6.4,R-LIM-1"),
              &B, &ab, &at);
  bundle_free(&B);

  build(&B, &eb, &et, 4096, pol_default, NULL);
  add_meta(&B, meta, 1);
  B.mani_comp = 1;
  rebuild_mani(&B);
  emit_bundle(VALID(.id = "valid/metadata-zstd", .flags = "metadata,compression",
                    .text = "MANI and META sections stored as zstd frames",
                    .covers = "§4.4,§6.4,R-CMP-1,R-META-1"),
              &B, &eb, &et);
  bundle_free(&B);

  pair_layout(&lb, &lt);
  build(&B, &lb, &lt, 4096, pol_default, NULL);
  emit_bundle(VALID(.id = "valid/layout-differs", .flags = "layout",
                    .text = "target data region in reverse name order, base in name order; "
                            "target header padded with 13 extra spaces (offsets are not compared)",
                    .covers = "§6.3,R-APL-1,R-ST-6,R-MAN-8"),
              &B, &lb, &lt);
  bundle_free(&B);

  /* Ancillary sections. */
  build(&B, &eb, &et, 4096, pol_default, NULL);
  {
    uint8_t junk[100];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = rbyte();
    sec_insert(&B, 1, "XTRA", 0, 0, junk, sizeof junk);
    sec_insert(&B, sec_find(&B, "CHNK", 1), "x\x01y\xff", 0, 7, junk, 40);
    sec_insert(&B, sec_find(&B, "INDX", 0), "EMTY", 0, 0, NULL, 0);
    sec_insert(&B, sec_find(&B, "FOOT", 0), "SIGN", 0, 0, junk, 64);
  }
  emit_bundle(VALID(.id = "valid/ancillary-sections", .flags = "ancillary",
                    .text = "unknown ancillary sections after MANI, between CHNKs (odd type "
                            "bytes, compression 7), before INDX (empty), and SIGN before FOOT",
                    .covers = "R-SEC-7,§4.3,§14"),
              &B, &eb, &et);
  bundle_free(&B);

  build(&B, &eb, &et, 4096, pol_default, NULL);
  {
    buf m = {0};
    meta_bytes(&m, meta);
    sec_insert(&B, sec_find(&B, "INDX", 0), "META", 0, 0, m.p, m.n);
    bfree(&m);
  }
  emit_bundle(VALID(.id = "valid/meta-late", .flags = "metadata,ancillary",
                    .text = "META between IDEN and INDX: ancillary sections may stand anywhere "
                            "between MANI and FOOT",
                    .covers = "§4,§4.3,§6.4"),
              &B, &eb, &et);
  bundle_free(&B);

  build(&B, &eb, &et, 4096, pol_default, NULL);
  B.minor = 9;
  emit_bundle(VALID(.id = "valid/minor-version-future", .flags = "version",
                    .text = "format 1.9: a reader of 1.0 accepts any minor version",
                    .covers = "R-HDR-6,R-VER-1,§12"),
              &B, &eb, &et);
  bundle_free(&B);

  /* Hand-made zstd frames: raw blocks, a frame split over two blocks. */
  build(&B, &eb, &et, 4096, pol_default, NULL);
  {
    buf m = {0}, z = {0};
    manifest_bytes(&B.man, &m);
    zframe_raw(&z, m.n, m.p, m.n);
    section *s = sec(&B, "MANI", 0);
    s->comp = 1;
    bset(&s->pl, z.p, z.n);
    section *c = chunk_sec(&B, 0, 1);
    streams st;
    uint32_t cnt = get32(c->pl.p + 12);
    const mentry *e0 = &B.man.e[0];
    make_streams(&st, e0->bt->data + 4096, e0->tt->data + 4096, 2048, 2, XOR_DENSE);
    z.n = 0;
    zframe_raw(&z, st.planes.n, st.planes.p, st.planes.n);
    set_chunk(c, XOR_DENSE, 1, cnt, &z);
    streams_free(&st), bfree(&m), bfree(&z);
  }
  emit_bundle(VALID(.id = "valid/zstd-raw-blocks", .flags = "handmade-zstd,compression",
                    .text = "MANI and one chunk stream as zstd frames of raw blocks written by "
                            "hand: any valid frame with a content size is accepted",
                    .covers = "§4.4,§9.3,R-CMP-1,R-CMP-3"),
              &B, &eb, &et);
  bundle_free(&B);

  /* max_file_size exactly: raw, 2^48 bytes, nothing changed (over = 0); then
   * 2^48 + 1 (over = 1), and its repaired variant, the first again (over = 2). */
  for (int over = 0; over < 3; over++) {
    bundle R;
    build(&R, &rb, &rb, 4096, pol_default, NULL);
    mentry *e = &R.man.e[0];
    uint64_t size = ((uint64_t)1 << 48) + (over == 1);
    e->b.dims[0] = e->b.len = e->t.dims[0] = e->t.len = R.man.dlen = size;
    memset(e->b.hash, 0xAB, 16);
    memset(e->t.hash, 0xAB, 16);
    remanifest(&R);
    const vec *v = over ? INVALID(.id = "invalid/file-size-over-max", .error = "DCR_E_LIMIT",
                                  .stage = "structure", .flags = "limit,structure-only,raw",
                                  .text = "raw target of 2^48 + 1 bytes: prefix_length + "
                                          "data_length above max_file_size",
                                  .covers = "R-MAN-6,R-LIM-1")
                        : VALID(.id = "valid/file-size-max", .flags = "limit-edge,structure-only,raw",
                                .text = "raw target of exactly 2^48 bytes (max_file_size), "
                                        "unchanged: valid; no checkpoints ship",
                                .covers = "R-MAN-6,R-LIM-1");
    if (over == 2) {
      emit_repaired_bundle(v, &R, NULL, NULL);
    } else {
      emit_bundle(v, &R, NULL, NULL);
      bundle_free(&R);
    }
  }
}

/* ------------------------------------------------------------------------ */
/* Invalid vectors                                                           */

static ckpt MB, MT;  /* the model pair */
static bundle M;     /* the model bundle: MANI META CHNK*4 IDEN INDX FOOT */

static void model(bundle *B) { bundle_copy(B, &M); }


/* Apply-stage vectors ship the base; target-stage ones the base and the target. */
static void emit_model(const vec *v, bundle *B) {
  int target = v->stage && !strcmp(v->stage, "target");
  int apply = target || (v->stage && !strcmp(v->stage, "apply"));
  emit_bundle(v, B, apply ? &MB : NULL, target ? &MT : NULL);
  bundle_free(B);
}

/* Writes vector v made from the model (fix = 0), or its repaired variant (fix = 1,
 * made by the same code with the faulty field at a valid value): that one must
 * be valid and apply to the model's base. */
static void emit_model_fix(const vec *v, bundle *B, int fix) {
  if (!fix) {
    emit_model(v, B);
    return;
  }
  const buf *p = &B->man.prefix;
  if (p->n == MT.prefix.n && !memcmp(p->p, MT.prefix.p, p->n)) {
    emit_repaired_bundle(v, B, &MB, &MT);
    return;
  }
  /* A repaired carried header that is not the model target's (one that says more):
   * the target is the model target's data region behind it. */
  char file[512];
  ckpt t = {.file = file};
  snprintf(file, sizeof file, "ckpt/%s.safetensors", strrchr(v->id, '/') + 1);
  bput(&t.bytes, p->p, p->n);
  bput(&t.bytes, MT.bytes.p + MT.prefix.n, MT.bytes.n - MT.prefix.n);
  emit_repaired_bundle(v, B, &MB, &t);
  bfree(&t.bytes);
}

static void emit_bytes(const vec *v, buf *b) {
  emit(v, b, NULL, NULL);
  bfree(b);
}

static const char *const sec_types[] = {"MANI", "META", "CHNK", "IDEN", "INDX", "FOOT"};

/* A vector of the model's bytes cut to `len` or with bits `flip` of byte `at`
 * flipped; its repaired variant is neither cut nor flipped. */
static void emit_model_bytes(const vec *v, size_t len, size_t at, uint8_t flip) {
  for (int fix = 0; fix < 2; fix++) {
    bundle B;
    buf b = {0};
    model(&B);
    serialize(&B, &b);
    if (!fix) {
      b.p[at] ^= flip;
      if (len < b.n) b.n = len;
    }
    if (fix) emit_repaired(v, &b, &MB, &MT);
    else emit(v, &b, NULL, NULL);
    bfree(&b);
    bundle_free(&B);
  }
}

static void header_vectors(void) {
  bundle B;
  buf b = {0};
  emit_bytes(INVALID(.id = "invalid/header-empty-file", .error = "DCR_E_TRUNCATED",
                     .stage = "structure", .flags = "truncation",
                     .text = "a file of 0 bytes", .covers = "R-HDR-4"),
             &b);
  emit_model_bytes(INVALID(.id = "invalid/header-short", .error = "DCR_E_TRUNCATED",
                           .stage = "structure", .flags = "truncation",
                           .text = "the first 40 bytes of a bundle", .covers = "R-HDR-4"),
                   40, 0, 0);
  bset(&b, "PK\x03\x04\x14\x00\x00\x00", 8);
  bfill(&b, 0, 92);
  emit_bytes(INVALID(.id = "invalid/header-not-a-bundle", .error = "DCR_E_MAGIC",
                     .stage = "structure", .flags = "malformed-field",
                     .text = "a 100-byte file that starts like a zip archive", .covers = "R-HDR-1"),
             &b);
  bset(&b, "dcr?\n", 5);
  emit_bytes(INVALID(.id = "invalid/header-short-not-a-bundle", .error = "DCR_E_MAGIC",
                     .stage = "structure", .flags = "malformed-field,truncation,check-order",
                     .text = "a 5-byte file that is not a bundle (two rules broken on purpose): "
                             "the magic is compared over the bytes present before the length",
                     .covers = "R-HDR-1,R-HDR-4,R-ORD-1"),
             &b);
  model(&B);
  serialize(&B, &b);
  bsplice(&b, 4, 2, "\n", 1); /* CR LF -> LF, as a text-mode transfer does */
  emit_bytes(INVALID(.id = "invalid/header-magic-text-mode", .error = "DCR_E_MAGIC",
                     .stage = "structure", .flags = "malformed-field",
                     .text = "the bundle after a text-mode transfer turned the magic's CR LF "
                             "into LF",
                     .covers = "R-HDR-1"),
             &b);
  bundle_free(&B);
  emit_model_bytes(INVALID(.id = "invalid/header-bit-flip", .error = "DCR_E_CHECKSUM",
                           .stage = "structure", .flags = "bit-flip",
                           .text = "one bit of the minor version flipped", .covers = "R-HDR-2"),
                   SIZE_MAX, 10, 1);
  static const unsigned majors[] = {0, 2, 0xFFFF};
  for (int i = 0; i < 3; i++) {
    char id[64];
    snprintf(id, sizeof id, "invalid/header-major-%u", majors[i]);
    for (int fix = 0; fix < 2; fix++) {
      model(&B);
      B.major = fix ? 1 : majors[i];
      emit_model_fix(INVALID(.id = id, .error = "DCR_E_VERSION", .stage = "structure",
                             .flags = "version",
                             .text = "major version other than 1 (header check correct)",
                             .covers = "R-HDR-3,§12"),
                     &B, fix);
    }
  }
  for (int fix = 0; fix < 2; fix++) {
    model(&B);
    B.hflags = !fix;
    emit_model_fix(INVALID(.id = "invalid/header-flags-bit", .error = "DCR_E_RESERVED",
                           .stage = "structure", .flags = "reserved",
                           .text = "header flags bit 0 set", .covers = "R-HDR-5,R-RES-1"),
                   &B, fix);
  }
  for (int fix = 0; fix < 2; fix++) {
    model(&B);
    B.hresv[39] = fix ? 0 : 0x80;
    emit_model_fix(INVALID(.id = "invalid/header-reserved-byte", .error = "DCR_E_RESERVED",
                           .stage = "structure", .flags = "reserved",
                           .text = "header byte 55 (reserved) set", .covers = "R-HDR-5,R-RES-1"),
                   &B, fix);
  }
  model(&B);
  B.major = 2;
  B.hflags = 1;
  emit_model(INVALID(.id = "invalid/header-major-before-reserved", .error = "DCR_E_VERSION",
                     .stage = "structure", .flags = "version,reserved,check-order",
                     .text = "major 2 and a flag bit (two rules broken on purpose): the version "
                             "is checked first",
                     .covers = "R-HDR-3,R-ORD-1"),
             &B);
}

static void section_walk_vectors(void) {
  bundle B;
  char id[128], text[256];
  model(&B);
  layout(&B);
  for (size_t k = 0; k < 6; k++) {
    const char *t = sec_types[k];
    char lt[5];
    for (int q = 0; q < 5; q++) lt[q] = (char)(t[q] >= 'A' && t[q] <= 'Z' ? t[q] + 32 : t[q]);
    const section *s = sec(&B, t, 0);
    size_t off = (size_t)s->off, len = s->pl.n;
    snprintf(id, sizeof id, "invalid/truncated-before-%s", lt);
    snprintf(text, sizeof text, "the bundle cut where the %s section starts (offset %zu): no footer",
             t, off);
    emit_model_bytes(INVALID(.id = id, .error = "DCR_E_TRUNCATED", .stage = "structure",
                             .flags = "truncation", .text = text, .covers = "R-SEC-9,§5"),
                     off, 0, 0);
    snprintf(id, sizeof id, "invalid/truncated-in-%s-header", lt);
    snprintf(text, sizeof text, "the bundle cut 20 bytes into the %s section header", t);
    emit_model_bytes(INVALID(.id = id, .error = "DCR_E_TRUNCATED", .stage = "structure",
                             .flags = "truncation", .text = text, .covers = "R-SEC-1"),
                     off + 20, 0, 0);
    snprintf(id, sizeof id, "invalid/truncated-in-%s-payload", lt);
    snprintf(text, sizeof text, "the bundle cut in the middle of the %s payload", t);
    emit_model_bytes(INVALID(.id = id, .error = "DCR_E_TRUNCATED", .stage = "structure",
                             .flags = "truncation", .text = text, .covers = "R-SEC-3"),
                     off + 32 + len / 2, 0, 0);
    snprintf(id, sizeof id, "invalid/bit-flip-%s-header", lt);
    snprintf(text, sizeof text, "one bit of the %s section header's length flipped", t);
    emit_model_bytes(INVALID(.id = id, .error = "DCR_E_CHECKSUM", .stage = "structure",
                             .flags = "bit-flip", .text = text, .covers = "R-SEC-2"),
                     SIZE_MAX, off + 9, 0x04);
    snprintf(id, sizeof id, "invalid/bit-flip-%s-payload", lt);
    snprintf(text, sizeof text, "one bit of the last %s payload byte flipped", t);
    emit_model_bytes(INVALID(.id = id, .error = "DCR_E_CHECKSUM", .stage = "structure",
                             .flags = "bit-flip", .text = text, .covers = "R-SEC-4"),
                     SIZE_MAX, off + 32 + len - 1, 0x20);
  }
  emit_model_bytes(INVALID(.id = "invalid/truncated-last-byte", .error = "DCR_E_TRUNCATED",
                           .stage = "structure", .flags = "truncation",
                           .text = "the bundle without its last byte", .covers = "R-SEC-3"),
                   (size_t)sec(&B, "FOOT", 0)->off + 63, 0, 0);
  bundle_free(&B);

  for (int fix = 0; fix < 2; fix++) {
    model(&B);
    sec(&B, "MANI", 0)->flags = fix ? 1 : 3;
    emit_model_fix(INVALID(.id = "invalid/section-flags-reserved", .error = "DCR_E_RESERVED",
                           .stage = "structure", .flags = "reserved",
                           .text = "MANI flags 0x0003: bit 1 is reserved",
                           .covers = "R-SEC-10,R-RES-1"),
                   &B, fix);
  }
  for (int fix = 0; fix < 2; fix++) {
    model(&B);
    sec(&B, "IDEN", 0)->resv = !fix;
    emit_model_fix(INVALID(.id = "invalid/section-reserved-byte", .error = "DCR_E_RESERVED",
                           .stage = "structure", .flags = "reserved",
                           .text = "IDEN section header byte 7 set", .covers = "R-SEC-10,R-RES-1"),
                   &B, fix);
  }
  for (int fix = 0; fix < 2; fix++) {
    model(&B);
    sec(&B, "META", 0)->flags = fix ? 0 : 0x8000;
    emit_model_fix(INVALID(.id = "invalid/section-flags-reserved-ancillary",
                           .error = "DCR_E_RESERVED", .stage = "structure", .flags = "reserved",
                           .text = "META flags bit 15 set", .covers = "R-SEC-10"),
                   &B, fix);
  }
  /* Declared lengths: the limit is checked before the bytes are looked for. */
  static const struct {
    const char *id, *text, *code, *flags, *type;
    uint64_t len;
  } sl[] = {
      {"invalid/section-length-over-limit", "MANI declares 2^31 + 1 payload bytes "
       "(max_section_size is 2^31)", "DCR_E_LIMIT", "limit,size-as-allocation", "MANI",
       ((uint64_t)1 << 31) + 1},
      {"invalid/section-length-wraps", "a CHNK declares 2^64 - 17 payload bytes: offset + "
       "length wraps", "DCR_E_LIMIT", "limit,size-as-allocation", "CHNK", UINT64_MAX - 16},
      {"invalid/section-length-beyond-file", "MANI declares 2^31 - 64 payload bytes (within "
       "the limit) in a small file: must fail without allocating", "DCR_E_TRUNCATED",
       "size-as-allocation,truncation", "MANI", ((uint64_t)1 << 31) - 64},
  };
  for (size_t i = 0; i < sizeof sl / sizeof *sl; i++)
    for (int fix = 0; fix < 2; fix++) {
      model(&B);
      section *s = sec(&B, sl[i].type, 0);
      s->len_set = !fix;
      s->len_field = sl[i].len;
      emit_model_fix(INVALID(.id = sl[i].id, .error = sl[i].code, .stage = "structure",
                             .flags = sl[i].flags, .text = sl[i].text,
                             .covers = strcmp(sl[i].code, "DCR_E_LIMIT") ? "R-SEC-3"
                                                                        : "R-SEC-3,R-LIM-1"),
                     &B, fix);
    }
  static const struct {
    const char *id, *text, *type;
    unsigned nth;
    uint8_t pad;
  } sp[] = {
      {"invalid/section-padding-nonzero", "the first padding byte after MANI is 0x01", "MANI", 0,
       0x01},
      {"invalid/section-padding-nonzero-chunk", "the first padding byte after a CHNK is 0x80",
       "CHNK", 1, 0x80},
  };
  for (size_t i = 0; i < sizeof sp / sizeof *sp; i++)
    for (int fix = 0; fix < 2; fix++) {
      model(&B);
      section *s = sec(&B, sp[i].type, sp[i].nth);
      if ((32 + s->pl.n) % 64 == 0) die("%s has no padding", sp[i].type);
      s->pad_set = 1;
      s->pad = fix ? 0 : sp[i].pad;
      emit_model_fix(INVALID(.id = sp[i].id, .error = "DCR_E_RESERVED", .stage = "structure",
                             .flags = "reserved", .text = sp[i].text, .covers = "R-SEC-5"),
                     &B, fix);
    }

  /* Unknown sections: repaired, each is an ancillary section that is skipped. */
  uint8_t junk[24];
  for (size_t i = 0; i < sizeof junk; i++) junk[i] = rbyte();
  for (int fix = 0; fix < 2; fix++) {
    model(&B);
    sec_insert(&B, 1, "XCRT", (uint16_t)!fix, 0, junk, sizeof junk);
    emit_model_fix(INVALID(.id = "invalid/unknown-critical-section",
                           .error = "DCR_E_UNKNOWN_SECTION", .stage = "structure",
                           .flags = "unknown-critical",
                           .text = "a critical section of type XCRT after MANI",
                           .covers = "R-SEC-6,§12"),
                   &B, fix);
  }
  for (int fix = 0; fix < 2; fix++) {
    model(&B);
    sec_insert(&B, sec_find(&B, "FOOT", 0), "\0\0\0\0", (uint16_t)!fix, 0, NULL, 0);
    emit_model_fix(INVALID(.id = "invalid/unknown-critical-section-empty",
                           .error = "DCR_E_UNKNOWN_SECTION", .stage = "structure",
                           .flags = "unknown-critical",
                           .text = "an empty critical section of type 00 00 00 00 before FOOT",
                           .covers = "R-SEC-6"),
                   &B, fix);
  }
  for (int fix = 0; fix < 2; fix++) {
    model(&B);
    sec_insert(&B, 2, "XTRA", 0, 0, junk, sizeof junk)->bad_pcheck = !fix;
    emit_model_fix(INVALID(.id = "invalid/ancillary-payload-checksum", .error = "DCR_E_CHECKSUM",
                           .stage = "structure", .flags = "ancillary,bit-flip",
                           .text = "an unknown ancillary section whose payload check is wrong: "
                                   "skipped only after its checks pass",
                           .covers = "R-SEC-7,R-SEC-4"),
                   &B, fix);
  }
  for (int fix = 0; fix < 2; fix++) {
    model(&B);
    section *s = sec_insert(&B, 2, "XTRA", 0, 0, junk, sizeof junk);
    s->pad_set = 1;
    s->pad = fix ? 0 : 0xFF;
    emit_model_fix(INVALID(.id = "invalid/ancillary-padding-nonzero", .error = "DCR_E_RESERVED",
                           .stage = "structure", .flags = "ancillary,reserved",
                           .text = "an unknown ancillary section with a non-zero padding byte",
                           .covers = "R-SEC-7,R-SEC-5"),
                   &B, fix);
  }
}

static void order_vectors(void) {
  bundle B;
  uint8_t junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  model(&B);
  {
    section t = B.s[0];
    B.s[0] = B.s[1];
    B.s[1] = t;
  }
  emit_model(INVALID(.id = "invalid/order-meta-first", .error = "DCR_E_STRUCTURE",
                     .stage = "structure", .flags = "order",
                     .text = "META before MANI: MANI must be first", .covers = "R-SEC-8"),
             &B);
  model(&B);
  sec_insert(&B, 0, "XTRA", 0, 0, junk, sizeof junk);
  emit_model(INVALID(.id = "invalid/order-ancillary-first", .error = "DCR_E_STRUCTURE",
                     .stage = "structure", .flags = "order,ancillary",
                     .text = "an unknown ancillary section before MANI", .covers = "R-SEC-8,§4"),
             &B);
  model(&B);
  {
    const section *m = sec(&B, "MANI", 0);
    sec_insert(&B, 2, "MANI", 1, m->comp, m->pl.p, m->pl.n);
  }
  emit_model(INVALID(.id = "invalid/order-mani-twice", .error = "DCR_E_STRUCTURE",
                     .stage = "structure", .flags = "order", .text = "MANI appears twice",
                     .covers = "R-SEC-8"),
             &B);
  model(&B);
  {
    const section *m = sec(&B, "META", 0);
    sec_insert(&B, 2, "META", 0, m->comp, m->pl.p, m->pl.n);
  }
  emit_model(INVALID(.id = "invalid/order-meta-twice", .error = "DCR_E_STRUCTURE",
                     .stage = "structure", .flags = "order", .text = "META appears twice",
                     .covers = "R-SEC-8,§4.3"),
             &B);
  model(&B);
  sec_remove(&B, sec_find(&B, "IDEN", 0));
  emit_model(INVALID(.id = "invalid/order-iden-missing", .error = "DCR_E_STRUCTURE",
                     .stage = "structure", .flags = "order",
                     .text = "no IDEN section: INDX follows the last CHNK", .covers = "R-SEC-8"),
             &B);
  model(&B);
  {
    const section *m = sec(&B, "IDEN", 0);
    sec_insert(&B, sec_find(&B, "INDX", 0), "IDEN", 1, 0, m->pl.p, m->pl.n);
  }
  emit_model(INVALID(.id = "invalid/order-iden-twice", .error = "DCR_E_STRUCTURE",
                     .stage = "structure", .flags = "order", .text = "IDEN appears twice",
                     .covers = "R-SEC-8"),
             &B);
  model(&B);
  sec_remove(&B, sec_find(&B, "INDX", 0));
  emit_model(INVALID(.id = "invalid/order-indx-missing", .error = "DCR_E_STRUCTURE",
                     .stage = "structure", .flags = "order", .text = "no INDX: FOOT follows IDEN",
                     .covers = "R-SEC-8"),
             &B);
  model(&B);
  {
    size_t i = sec_find(&B, "CHNK", 3);
    section c = B.s[i];
    memmove(B.s + i, B.s + i + 1, sizeof *B.s);
    B.s[i + 1] = c; /* IDEN, then the last CHNK */
  }
  emit_model(INVALID(.id = "invalid/order-chunk-after-iden", .error = "DCR_E_STRUCTURE",
                     .stage = "structure", .flags = "order", .text = "a CHNK section after IDEN",
                     .covers = "R-SEC-8"),
             &B);
  model(&B);
  sec_insert(&B, sec_find(&B, "INDX", 0), "SIGN", 0, 0, junk, sizeof junk);
  emit_model(INVALID(.id = "invalid/order-sign-early", .error = "DCR_E_STRUCTURE",
                     .stage = "structure", .flags = "order,ancillary",
                     .text = "SIGN before INDX: it must stand immediately before FOOT",
                     .covers = "R-SEC-8,§4.3"),
             &B);
  model(&B);
  {
    size_t f = sec_find(&B, "FOOT", 0);
    sec_insert(&B, f, "XTRA", 0, 0, junk, sizeof junk);
    sec_insert(&B, f, "SIGN", 0, 0, junk, sizeof junk);
  }
  emit_model(INVALID(.id = "invalid/order-sign-not-last", .error = "DCR_E_STRUCTURE",
                     .stage = "structure", .flags = "order,ancillary",
                     .text = "an ancillary section between SIGN and FOOT", .covers = "§4.3"),
             &B);

  /* Flags and compression of known sections (§4.3). */
  static const struct {
    const char *type, *id, *text;
    uint16_t flags;
    uint8_t comp;
    const char *code;
  } fl[] = {
      {"MANI", "invalid/flags-mani-not-critical", "MANI without the critical flag", 0, 0,
       "DCR_E_STRUCTURE"},
      {"META", "invalid/flags-meta-critical", "META with the critical flag", 1, 0,
       "DCR_E_STRUCTURE"},
      {"CHNK", "invalid/flags-chunk-compressed", "a CHNK section with section compression 1", 1, 1,
       "DCR_E_STRUCTURE"},
      {"INDX", "invalid/flags-index-compressed", "INDX with section compression 1", 1, 1,
       "DCR_E_STRUCTURE"},
      {"FOOT", "invalid/flags-foot-not-critical", "FOOT without the critical flag", 0, 0,
       "DCR_E_STRUCTURE"},
      {"MANI", "invalid/compression-unknown-mani", "MANI with section compression 2", 1, 2,
       "DCR_E_ENCODING"},
      {"IDEN", "invalid/compression-unknown-iden", "IDEN with section compression 255", 1, 255,
       "DCR_E_ENCODING"},
  };
  for (size_t i = 0; i < sizeof fl / sizeof *fl; i++)
    for (int fix = 0; fix < 2; fix++) {
      model(&B);
      section *s = sec(&B, fl[i].type, 0);
      if (!fix) s->flags = fl[i].flags, s->comp = fl[i].comp;
      emit_model_fix(INVALID(.id = fl[i].id, .error = fl[i].code, .stage = "structure",
                             .flags = "malformed-field", .text = fl[i].text,
                             .covers = "R-SEC-11,§4.3"),
                     &B, fix);
    }

  /* Footer (§5). */
  for (int fix = 0; fix < 2; fix++) {
    model(&B);
    fix_foot(&B);
    B.auto_foot = 0;
    bfill(&sec(&B, "FOOT", 0)->pl, 0, fix ? 0 : 16);
    emit_model_fix(INVALID(.id = "invalid/footer-length-48", .error = "DCR_E_STRUCTURE",
                           .stage = "structure", .flags = "footer",
                           .text = "a FOOT payload of 48 bytes", .covers = "R-FTR-1"),
                   &B, fix);
  }
  model(&B);
  {
    buf b = {0};
    serialize(&B, &b);
    bfill(&b, 0, 64);
    emit_bytes(INVALID(.id = "invalid/footer-not-last", .error = "DCR_E_STRUCTURE",
                       .stage = "structure", .flags = "footer",
                       .text = "64 zero bytes after FOOT", .covers = "R-FTR-1"),
               &b);
    bundle_free(&B);
  }
  static const struct {
    const char *id, *text;
    unsigned field;
    uint64_t delta;
  } ft[] = {
      {"invalid/footer-mani-offset", "FOOT names MANI at 128, not 64", 0, 64},
      {"invalid/footer-iden-offset", "FOOT names IDEN 64 bytes after it is", 1, 64},
      {"invalid/footer-indx-offset", "FOOT names INDX 64 bytes before it is", 2, (uint64_t)-64},
      {"invalid/footer-chunk-count", "FOOT counts one chunk more than there are", 3, 1},
  };
  for (size_t i = 0; i < sizeof ft / sizeof *ft; i++)
    for (int fix = 0; fix < 2; fix++) {
      model(&B);
      fix_foot(&B);
      B.auto_foot = 0;
      uint8_t *p = sec(&B, "FOOT", 0)->pl.p + 8 * ft[i].field;
      put64(p, get64(p) + (fix ? 0 : ft[i].delta));
      emit_model_fix(INVALID(.id = ft[i].id, .error = "DCR_E_STRUCTURE", .stage = "structure",
                             .flags = "footer", .text = ft[i].text, .covers = "R-FTR-2"),
                     &B, fix);
    }

  /* A broken footer after a broken section: the walk meets the section first,
   * whatever a reader that seeks the footer first finds. */
  model(&B);
  fix_foot(&B);
  B.auto_foot = 0;
  put64(sec(&B, "FOOT", 0)->pl.p + 24, 5);
  sec(&B, "IDEN", 0)->bad_pcheck = 1;
  emit_model(INVALID(.id = "invalid/order-walk-before-footer", .error = "DCR_E_CHECKSUM",
                     .stage = "structure", .flags = "footer,bit-flip,check-order",
                     .text = "IDEN's payload check is wrong and FOOT counts 5 chunks (two rules "
                             "broken on purpose): the walk meets IDEN first, so a reader that "
                             "reads the footer first still reports the checksum",
                     .covers = "R-ORD-3,R-ORD-1,R-SEC-4"),
             &B);

  /* Identities (§7). */
  static const struct {
    const char *id, *text;
    size_t at; /* a bit flipped at this byte of IDEN */
  } id[] = {
      {"invalid/iden-base-state", "base_state_id is not the one the hashes give", 3},
      {"invalid/iden-tensor-hash", "a base tensor hash changed, state ids left: base_state_id "
       "disagrees", 40},
      {"invalid/iden-target-state", "target_state_id is not the one the hashes give", 16},
  };
  for (size_t i = 0; i < sizeof id / sizeof *id; i++)
    for (int fix = 0; fix < 2; fix++) {
      model(&B);
      sec(&B, "IDEN", 0)->pl.p[id[i].at] ^= (uint8_t)!fix;
      emit_model_fix(INVALID(.id = id[i].id, .error = "DCR_E_CHECKSUM", .stage = "structure",
                             .flags = "malformed-field", .text = id[i].text, .covers = "R-IDN-1"),
                     &B, fix);
    }
  for (int fix = 0; fix < 2; fix++) {
    model(&B);
    sec(&B, "IDEN", 0)->pl.n -= fix ? 0 : 16;
    emit_model_fix(INVALID(.id = "invalid/iden-length", .error = "DCR_E_STRUCTURE",
                           .stage = "structure", .flags = "malformed-field",
                           .text = "IDEN 16 bytes short of one hash per side per entry",
                           .covers = "R-IDN-2"),
                   &B, fix);
  }
}


/* Writes vector v (fix = 0: structure- and chunk-stage vectors ship no
 * checkpoints) or its repaired variant (fix = 1), which must apply to base and
 * give target. */
static void emit_fix(const vec *v, bundle *B, int fix, ckpt *base, ckpt *target) {
  if (fix) {
    emit_repaired_bundle(v, B, base, target);
  } else {
    emit_bundle(v, B, NULL, NULL);
    bundle_free(B);
  }
}

/* Entries of the model: a (BF16 [4096], changed), b (F32 [100], changed),
 * c (U8 [64], removed), d (I16 [50], added), e (F32 [1024], unchanged). Vectors
 * that break a descriptor use a base descriptor where they can (c's, or e's),
 * which the carried safetensors header does not repeat; a vector that breaks a
 * target descriptor could not keep that header in agreement with it. */
enum { EA, EB, EC, ED, EE };

static void set_name(mentry *e, const char *name, size_t n) {
  free(e->name);
  e->name = xmalloc(n);
  memcpy(e->name, name, n);
  e->nlen = n;
}

static void manifest_field_vectors(void) {
  bundle B;
  /* Fields of the manifest and of its entries, each set to one bad value. */
  enum {
    F_PLEN, F_COUNT, F_RESV, F_PRESENCE, F_ENTRY_RESV, F_NLEN, F_KIND, F_KEEP, F_SHORTEN, F_TRAIL
  };
  static const struct {
    const char *id, *text, *code, *flags, *covers;
    int field;
    uint64_t value;
    unsigned minor;
  } mf[] = {
      {"invalid/manifest-truncated-fixed", "a MANI payload of 20 bytes: shorter than its fixed "
       "fields", "DCR_E_TRUNCATED", "truncation", "R-MAN-1", F_KEEP, 20, 0},
      {"invalid/manifest-truncated-entry", "a MANI payload cut 9 bytes short, inside the last "
       "entry's descriptor", "DCR_E_TRUNCATED", "truncation", "R-MAN-1", F_SHORTEN, 9, 0},
      {"invalid/manifest-trailing-bytes", "3 bytes after the last manifest entry",
       "DCR_E_MANIFEST", "malformed-field", "R-MAN-1", F_TRAIL, 3, 0},
      {"invalid/manifest-reserved-byte", "manifest byte 9 (reserved) set", "DCR_E_RESERVED",
       "reserved", "R-MAN-1,R-RES-1", F_RESV, 1, 0},
      {"invalid/manifest-presence-reserved-bit", "entry b's presence 0x07: bit 2 is reserved",
       "DCR_E_RESERVED", "reserved", "R-MAN-1,R-RES-1", F_PRESENCE, 7, 0},
      {"invalid/manifest-presence-zero", "entry c's presence 0: present on neither side (its "
       "base descriptor is then not written)", "DCR_E_MANIFEST", "malformed-field", "R-MAN-3",
       F_PRESENCE, 0, 0},
      {"invalid/manifest-entry-reserved-byte", "entry a's reserved byte 0x10", "DCR_E_RESERVED",
       "reserved", "R-MAN-1,R-RES-1", F_ENTRY_RESV, 0x10, 0},
      {"invalid/manifest-count-over-limit", "entry_count 2^20 + 1 (max_tensors is 2^20)",
       "DCR_E_LIMIT", "limit,size-as-allocation", "R-MAN-2,R-LIM-1", F_COUNT, (1u << 20) + 1, 0},
      {"invalid/manifest-count-beyond-payload", "entry_count 2^20 (at the limit) in a payload "
       "that holds 5 entries: entry_count x 15 exceeds the bytes left, refused before any entry "
       "is read", "DCR_E_TRUNCATED", "size-as-allocation,truncation", "R-MAN-2", F_COUNT,
       1u << 20, 0},
      {"invalid/manifest-prefix-length-beyond-payload", "prefix_length 2^26 (prefix_length + "
       "data_length within max_file_size) in a small payload", "DCR_E_TRUNCATED",
       "size-as-allocation,truncation", "R-MAN-2", F_PLEN, 1u << 26, 0},
      {"invalid/manifest-prefix-length-over-file-size", "prefix_length 2^48: prefix_length + "
       "data_length above max_file_size, refused right after data_length is read (before the "
       "prefix bytes are looked for)", "DCR_E_LIMIT", "limit,size-as-allocation",
       "R-MAN-2,R-LIM-1", F_PLEN, (uint64_t)1 << 48, 0},
      {"invalid/manifest-name-length-beyond-payload", "the last entry's name_length is 4096 "
       "(within max_name_length): the name would run past the payload", "DCR_E_TRUNCATED",
       "size-as-allocation,truncation", "R-MAN-2", F_NLEN, 4096, 0},
      {"invalid/manifest-kind-unknown", "checkpoint kind 2", "DCR_E_MANIFEST", "malformed-field",
       "R-MAN-3", F_KIND, 2, 0},
      {"invalid/manifest-kind-unknown-minor-1", "checkpoint kind 2 in a bundle of format 1.1: a "
       "minor version adds no checkpoint kind", "DCR_E_MANIFEST", "malformed-field,version",
       "R-MAN-3,§12", F_KIND, 2, 1},
  };
  for (size_t i = 0; i < sizeof mf / sizeof *mf; i++)
    for (int fix = 0; fix < 2; fix++) {
      model(&B);
      manifest *m = &B.man;
      B.minor = mf[i].minor;
      if (!fix) switch (mf[i].field) {
          case F_PLEN: m->plen_set = 1, m->plen_field = mf[i].value; break;
          case F_COUNT: m->count_set = 1, m->count_field = mf[i].value; break;
          case F_RESV: m->resv[0] = (uint8_t)mf[i].value; break;
          case F_PRESENCE: m->e[mf[i].value ? EB : EC].presence = (uint8_t)mf[i].value; break;
          case F_ENTRY_RESV: m->e[EA].resv = (uint8_t)mf[i].value; break;
          case F_NLEN:
            m->e[m->n - 1].nlen_set = 1, m->e[m->n - 1].nlen_field = mf[i].value;
            break;
          case F_KIND: m->kind = (uint8_t)mf[i].value; break;
          default: break;
        }
      remanifest(&B);
      section *s = sec(&B, "MANI", 0);
      if (!fix && mf[i].field == F_KEEP) s->pl.n = mf[i].value;
      if (!fix && mf[i].field == F_SHORTEN) s->pl.n -= mf[i].value;
      if (!fix && mf[i].field == F_TRAIL) bfill(&s->pl, 0, mf[i].value);
      emit_model_fix(INVALID(.id = mf[i].id, .error = mf[i].code, .stage = "structure",
                             .flags = mf[i].flags, .text = mf[i].text, .covers = mf[i].covers),
                     &B, fix);
    }

  /* chunk_size, in a bundle without chunks (the model base against itself), so that
   * no chunk record is also made wrong by it. */
  bundle Z;
  build(&Z, &MB, &MB, 4096, pol_default, NULL);
  static const struct {
    const char *id, *text, *code, *flags, *covers;
    uint64_t cs;
  } cs[] = {
      {"invalid/manifest-chunk-size-not-power-of-two", "chunk_size 5000", "DCR_E_MANIFEST",
       "malformed-field", "R-MAN-3", 5000},
      {"invalid/manifest-chunk-size-too-small", "chunk_size 2048 (below 4096)", "DCR_E_MANIFEST",
       "malformed-field", "R-MAN-3", 2048},
      {"invalid/manifest-chunk-size-zero", "chunk_size 0", "DCR_E_MANIFEST", "malformed-field",
       "R-MAN-3", 0},
      {"invalid/manifest-chunk-size-over-limit", "chunk_size 2^31 (max_chunk_size is 2^30)",
       "DCR_E_LIMIT", "limit", "R-MAN-3,R-LIM-1", (uint64_t)1 << 31},
  };
  for (size_t i = 0; i < sizeof cs / sizeof *cs; i++)
    for (int fix = 0; fix < 2; fix++) {
      bundle_copy(&B, &Z);
      B.man.chunk_size = fix ? 4096 : cs[i].cs;
      remanifest(&B);
      emit_fix(INVALID(.id = cs[i].id, .error = cs[i].code, .stage = "structure",
                       .flags = cs[i].flags, .text = cs[i].text, .covers = cs[i].covers),
               &B, fix, &MB, &MB);
    }
  bundle_free(&Z);
}

static void manifest_entry_vectors(void) {
  bundle B;
  /* Names (R-MAN-4): entry c, removed, renamed; its name is in no carried header. */
  static const struct {
    const char *id, *text, *name, *code, *flags;
    size_t n;
  } nm[] = {
      {"invalid/name-empty", "entry c's name is empty (it then also sorts before b: emptiness "
       "is checked first, with the same code)", "", "DCR_E_NAME", "name", 0},
      {"invalid/name-not-utf8", "a name with byte 0xFF", "c\xff", "DCR_E_NAME", "name", 2},
      {"invalid/name-overlong-utf8", "a name with the overlong encoding C0 AF of '/'",
       "c\xc0\xaf", "DCR_E_NAME", "name", 3},
      {"invalid/name-surrogate", "a name with the UTF-8 encoded surrogate U+D800",
       "c\xed\xa0\x80", "DCR_E_NAME", "name", 4},
      {"invalid/name-above-unicode", "a name with F4 90 80 80 (above U+10FFFF)",
       "c\xf4\x90\x80\x80", "DCR_E_NAME", "name", 5},
      {"invalid/name-truncated-utf8", "a name ending inside a UTF-8 sequence", "c\xe2\x82",
       "DCR_E_NAME", "name", 3},
      {"invalid/name-nul", "a name containing U+0000", "c\0x", "DCR_E_NAME", "name", 3},
      {"invalid/name-unsorted", "entry c renamed a0: it sorts before the previous entry b", "a0",
       "DCR_E_NAME", "name", 2},
      {"invalid/name-duplicate", "entry c renamed b: the previous entry's name",
       "b", "DCR_E_NAME", "duplicate-name,name", 1},
      {"invalid/name-too-long", "entry c's name is 4097 bytes (max_name_length is 4096)", NULL,
       "DCR_E_LIMIT", "name,limit", 4097},
  };
  char *longname = xmalloc(4097);
  memset(longname, 'c', 4097);
  for (size_t i = 0; i < sizeof nm / sizeof *nm; i++)
    for (int fix = 0; fix < 2; fix++) {
      model(&B);
      if (fix) set_name(&B.man.e[EC], "c", 1);
      else set_name(&B.man.e[EC], nm[i].name ? nm[i].name : longname, nm[i].n);
      remanifest(&B);
      emit_model_fix(INVALID(.id = nm[i].id, .error = nm[i].code, .stage = "structure",
                             .flags = nm[i].flags, .text = nm[i].text,
                             .covers = nm[i].name ? "R-MAN-4" : "R-MAN-4,R-LIM-1"),
                     &B, fix);
    }
  free(longname);

  /* Descriptors (R-MAN-5): dtypes, ranks, shapes. */
  static const struct {
    const char *id, *text, *code, *flags, *covers;
    int entry, target, dtype;
    unsigned rank, rank_field;
    uint64_t dims[17], len;
  } ds[] = {
      {"invalid/dtype-0", "removed tensor c's base dtype code 0", "DCR_E_DTYPE", "unknown-dtype",
       "R-MAN-5,R-DT-1", EC, 0, 0, 1, 0, {64}, 64},
      {"invalid/dtype-16", "removed tensor c's base dtype code 16", "DCR_E_DTYPE",
       "unknown-dtype", "R-MAN-5,R-DT-1", EC, 0, 16, 1, 0, {64}, 64},
      {"invalid/dtype-255", "removed tensor c's base dtype code 255", "DCR_E_DTYPE",
       "unknown-dtype", "R-MAN-5,R-DT-1", EC, 0, 255, 1, 0, {64}, 64},
      {"invalid/dtype-target-side", "b's target dtype code 99 (the carried header, which "
       "still says F32, is compared with the entries only after every entry is read)",
       "DCR_E_DTYPE", "unknown-dtype", "R-MAN-5,R-DT-1", EB, 1, 99, 1, 0, {100}, 400},
      {"invalid/rank-over-limit", "c's base rank 17, shape [64, 1, ..., 1] (max_rank is 16)",
       "DCR_E_LIMIT", "limit", "R-MAN-5,R-LIM-1", EC, 0, U8, 17, 0,
       {64, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 64},
      {"invalid/rank-beyond-payload", "the last descriptor (e's target) has rank byte 16 "
       "(within max_rank), but only 24 bytes are left: its dims run past the payload",
       "DCR_E_TRUNCATED", "size-as-allocation,truncation", "R-MAN-2", EE, 1, F32, 1, 16, {1024},
       4096},
      {"invalid/shape-overflow", "c's base U8 shape [2^32, 2^32, 2]: the product overflows 64 "
       "bits", "DCR_E_SHAPE", "shape-overflow", "R-MAN-5,R-ST-4", EC, 0, U8, 3, 0,
       {1ull << 32, 1ull << 32, 2}, 64},
      {"invalid/shape-wraps-to-zero", "c's base U8 shape [2^32, 2^32] with byte length 0: the "
       "product wraps to exactly 0", "DCR_E_SHAPE", "shape-overflow", "R-MAN-5,R-ST-4", EC, 0,
       U8, 2, 0, {1ull << 32, 1ull << 32}, 0},
      {"invalid/shape-overflow-with-zero", "c's base U8 shape [0, 2^62, 8] with byte length 0: "
       "a zero does not excuse the overflow", "DCR_E_SHAPE", "shape-overflow", "R-MAN-5,R-ST-4",
       EC, 0, U8, 3, 0, {0, 1ull << 62, 8}, 0},
      {"invalid/shape-dtype-size-overflow", "e's base F32 shape [2^62] with byte length 0: the "
       "elements fit, their bytes overflow (and wrap to 0)", "DCR_E_SHAPE", "shape-overflow",
       "R-MAN-5,R-ST-4", EE, 0, F32, 1, 0, {1ull << 62}, 0},
      {"invalid/shape-byte-length", "e's base F32 shape [1025] with byte length 4096",
       "DCR_E_SHAPE", "byte-length", "R-MAN-5,R-ST-4", EE, 0, F32, 1, 0, {1025}, 4096},
      {"invalid/shape-byte-length-base", "c's base U8 shape [64] with byte length 63",
       "DCR_E_SHAPE", "byte-length", "R-MAN-5,R-ST-4", EC, 0, U8, 1, 0, {64}, 63},
      {"invalid/shape-reshape-lies", "e's base F32 shape [32, 33] (4224 bytes) with byte "
       "length 4096", "DCR_E_SHAPE", "byte-length", "R-MAN-5,R-ST-4", EE, 0, F32, 2, 0,
       {32, 33}, 4096},
  };
  for (size_t i = 0; i < sizeof ds / sizeof *ds; i++)
    for (int fix = 0; fix < 2; fix++) {
      model(&B);
      if (!fix) {
        mentry *e = &B.man.e[ds[i].entry];
        desc *d = ds[i].target ? &e->t : &e->b;
        d->dtype = ds[i].dtype;
        d->rank = ds[i].rank;
        d->rank_field = ds[i].rank_field;
        memset(d->dims, 0, sizeof d->dims);
        memcpy(d->dims, ds[i].dims, sizeof ds[i].dims);
        d->len = ds[i].len;
      }
      remanifest(&B);
      emit_model_fix(INVALID(.id = ds[i].id, .error = ds[i].code, .stage = "structure",
                             .flags = ds[i].flags, .text = ds[i].text, .covers = ds[i].covers),
                     &B, fix);
    }

  /* Layout (R-MAN-6): target entries a [0, 8192) b [8192, 8592) d [8592, 8692)
   * e [8692, 12788). The carried header is written from the moved entries, so that
   * it agrees with them; only the layout rule is broken. */
  static const struct {
    const char *id, *text;
    uint64_t from, add, off_e; /* add `add` to offsets >= from; or set e's offset */
    int64_t dlen;
    int keep_header;
  } ly[] = {
      {"invalid/layout-gap", "d and e moved 2 bytes up: a gap after b; data_length covers it",
       8592, 2, 0, 2, 0},
      {"invalid/layout-overlap", "d and e moved 2 bytes down: d overlaps b", 8592,
       (uint64_t)-2, 0, -2, 0},
      {"invalid/layout-not-from-zero", "every tensor moved 8 bytes up: the first starts at 8", 0,
       8, 0, 8, 0},
      {"invalid/layout-short-data", "data_length 1 byte more than the tensors cover", 0, 0, 0, 1,
       0},
      {"invalid/layout-past-data", "data_length 1 byte less than the tensors cover", 0, 0, 0, -1,
       0},
      {"invalid/layout-offset-out-of-range", "tensor e's offset is 2^62", 0, 0, 1ull << 62, 0,
       0},
      {"invalid/layout-offset-wraps", "tensor e's offset is 2^64 - 101: offset + length wraps "
       "(no safetensors header can say so: the carried one, compared only after the layout, "
       "keeps e's offset)", 0, 0, UINT64_MAX - 100, 0, 1},
  };
  for (size_t i = 0; i < sizeof ly / sizeof *ly; i++)
    for (int fix = 0; fix < 2; fix++) {
      model(&B);
      if (!fix) {
        for (size_t k = 0; k < B.man.n; k++)
          if ((B.man.e[k].presence & 2) && B.man.e[k].t.off >= ly[i].from)
            B.man.e[k].t.off += ly[i].add;
        if (ly[i].off_e) B.man.e[EE].t.off = ly[i].off_e;
        B.man.dlen = (uint64_t)((int64_t)B.man.dlen + ly[i].dlen);
      }
      if (!ly[i].keep_header) prefix_from_entries(&B.man);
      remanifest(&B);
      emit_model_fix(INVALID(.id = ly[i].id, .error = "DCR_E_LAYOUT", .stage = "structure",
                             .flags = "offsets", .text = ly[i].text, .covers = "R-MAN-6"),
                     &B, fix);
    }
}

/* Replaces the carried safetensors prefix with JSON text `json` (N = its length,
 * unless n_field is given). */
static void set_prefix(bundle *B, const void *json, size_t n, uint64_t n_field) {
  text_prefix(&B->man.prefix, json, n, n_field);
  rebuild_mani(B);
}

/* json with the first `from` replaced by `to`, into out. */
static void subst(buf *out, const char *json, const char *from, const char *to) {
  const char *at = strstr(json, from);
  if (!at) die("no %s in %s", from, json);
  out->n = 0;
  bput(out, json, (size_t)(at - json));
  bput(out, to, strlen(to));
  bput(out, at + strlen(from), strlen(at + strlen(from)));
}

/* The model target's header text, with its padding (3 spaces). */
static char model_json[1024];

static void read_model_json(void) {
  const buf *p = &M.man.prefix;
  size_t n = p->n - 8;
  if (n >= sizeof model_json) die("model header too long");
  memcpy(model_json, p->p + 8, n);
  model_json[n] = '\0';
}

static void prefix_vectors(void) {
  bundle B;
  buf json = {0};
  /* The header with `from` replaced by `to`; repaired, by `fix` (NULL: `from`). */
  static const struct {
    const char *id, *text, *from, *to, *fix, *code, *flags, *covers;
  } px[] = {
      {"invalid/prefix-shape-disagrees", "the carried header says b is [10, 10], the manifest "
       "[100]", "\"shape\":[100]", "\"shape\":[10,10]", NULL, "DCR_E_MANIFEST", "checkpoint",
       "R-MAN-8"},
      {"invalid/prefix-not-json", "the carried header is not JSON", "{\"a\"", "{\"a\"\"", NULL,
       "DCR_E_CHECKPOINT", "checkpoint", "R-MAN-8,R-ST-7"},
      {"invalid/prefix-extra-key", "a tensor object with a fourth key", "\"dtype\":\"F32\"",
       "\"dtype\":\"F32\",\"x\":1", NULL, "DCR_E_CHECKPOINT", "checkpoint", "R-MAN-8,R-ST-2"},
      {"invalid/prefix-negative-offset", "data_offsets with a negative number",
       "\"data_offsets\":[0,", "\"data_offsets\":[-1,", NULL, "DCR_E_CHECKPOINT", "checkpoint",
       "R-ST-2"},
      {"invalid/prefix-dtype-unknown", "the carried header's dtype \"F4\"", "\"dtype\":\"F32\"",
       "\"dtype\":\"F4\"", NULL, "DCR_E_DTYPE", "checkpoint,unknown-dtype", "R-MAN-8,R-ST-3"},
      {"invalid/prefix-dtype-lowercase", "the carried header's dtype \"bf16\"",
       "\"dtype\":\"BF16\"", "\"dtype\":\"bf16\"", NULL, "DCR_E_DTYPE",
       "checkpoint,unknown-dtype", "R-ST-3"},
      {"invalid/prefix-shape-byte-length", "the carried header's shape [101] for 400 bytes of "
       "F32", "\"shape\":[100]", "\"shape\":[101]", NULL, "DCR_E_SHAPE",
       "checkpoint,byte-length", "R-MAN-8,R-ST-4"},
      {"invalid/prefix-duplicate-name", "the carried header repeats the member \"a\" verbatim: "
       "a reader that keeps either copy sees the target's tensors; only the duplicate check "
       "finds it (repaired: the copy removed)", "\"b\":{",
       "\"a\":{\"dtype\":\"BF16\",\"shape\":[4096],\"data_offsets\":[0,8192]},\"b\":{", NULL,
       "DCR_E_NAME", "checkpoint,duplicate-name", "R-MAN-8,R-ST-5"},
      {"invalid/prefix-duplicate-name-differs", "the carried header's key \"b\" renamed \"a\": "
       "two members a with different valid values", "\"b\":{", "\"a\":{", NULL, "DCR_E_NAME",
       "checkpoint,duplicate-name", "R-MAN-8,R-ST-5,R-ST-7"},
      {"invalid/prefix-layout-gap", "the carried header moves tensor d one byte up: a valid "
       "header (rules 1-5 of §2.1) whose offsets are not the target entries'",
       "\"data_offsets\":[8592,8692]", "\"data_offsets\":[8593,8693]", NULL, "DCR_E_MANIFEST",
       "checkpoint,offsets", "R-MAN-8"},
      {"invalid/prefix-extra-tensor", "the carried header has a zero-length tensor the manifest "
       "does not", "]}} ", "]},\"z\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}",
       NULL, "DCR_E_MANIFEST", "checkpoint", "R-MAN-8"},
      {"invalid/prefix-bom", "a UTF-8 byte order mark before the header's {", "{\"a\":",
       "\xef\xbb\xbf{\"a\":", NULL, "DCR_E_CHECKPOINT", "checkpoint", "R-MAN-8,R-ST-7"},
      {"invalid/prefix-duplicate-key-in-tensor", "tensor b's object has \"dtype\":\"F32\" twice",
       "\"dtype\":\"F32\"", "\"dtype\":\"F32\",\"dtype\":\"F32\"", NULL, "DCR_E_CHECKPOINT",
       "checkpoint", "R-MAN-8,R-ST-7"},
      {"invalid/prefix-duplicate-key-in-metadata", "__metadata__ has the key \"k\" twice "
       "(repaired: the second is \"l\")", "{\"a\":",
       "{\"__metadata__\":{\"k\":\"v\",\"k\":\"v\"},\"a\":",
       "{\"__metadata__\":{\"k\":\"v\",\"l\":\"v\"},\"a\":", "DCR_E_CHECKPOINT",
       "checkpoint,metadata", "R-MAN-8,R-ST-2"},
      {"invalid/prefix-name-nul", "the carried header's name \"e\\u0000\" (U+0000 by a JSON "
       "escape)", "\"e\":", "\"e\\u0000\":", NULL, "DCR_E_NAME", "checkpoint,name",
       "R-MAN-8,R-ST-5,R-ST-7"},
      {"invalid/prefix-name-lone-surrogate", "the carried header's name \"e\\ud800\" (a lone "
       "surrogate escape: not a character)", "\"e\":", "\"e\\ud800\":", NULL, "DCR_E_NAME",
       "checkpoint,name", "R-MAN-8,R-ST-5,R-ST-7"},
      {"invalid/prefix-number-fraction", "b's shape [100.0]: a number with a fraction",
       "\"shape\":[100]", "\"shape\":[100.0]", NULL, "DCR_E_CHECKPOINT", "checkpoint",
       "R-MAN-8,R-ST-7"},
      {"invalid/prefix-number-exponent", "b's shape [1e2]: a number with an exponent",
       "\"shape\":[100]", "\"shape\":[1e2]", NULL, "DCR_E_CHECKPOINT", "checkpoint",
       "R-MAN-8,R-ST-7"},
      {"invalid/prefix-trailing-garbage", "the first space after the header's closing } "
       "is an x", "]}} ", "]}}x", NULL, "DCR_E_CHECKPOINT", "checkpoint", "R-MAN-8,R-ST-7"},
  };
  for (size_t i = 0; i < sizeof px / sizeof *px; i++)
    for (int fix = 0; fix < 2; fix++) {
      subst(&json, model_json, px[i].from, fix ? (px[i].fix ? px[i].fix : px[i].from) : px[i].to);
      model(&B);
      set_prefix(&B, json.p, json.n, 0);
      emit_model_fix(INVALID(.id = px[i].id, .error = px[i].code, .stage = "structure",
                             .flags = px[i].flags, .text = px[i].text, .covers = px[i].covers),
                     &B, fix);
    }
  {
    /* A carried name over max_name_length; repaired, e's own name. */
    char name[4101] = "\"";
    memset(name + 1, 'e', 4097);
    strcpy(name + 4098, "\":");
    for (int fix = 0; fix < 2; fix++) {
      subst(&json, model_json, "\"e\":", fix ? "\"e\":" : name);
      model(&B);
      set_prefix(&B, json.p, json.n, 0);
      emit_model_fix(INVALID(.id = "invalid/prefix-name-too-long", .error = "DCR_E_LIMIT",
                             .stage = "structure", .flags = "checkpoint,name,limit",
                             .text = "the carried header names e with 4097 bytes "
                                     "(max_name_length is 4096)",
                             .covers = "R-ST-5,R-LIM-1"),
                     &B, fix);
    }
  }
  for (int fix = 0; fix < 2; fix++) {
    model(&B);
    set_prefix(&B, model_json, strlen(model_json), fix ? 0 : strlen(model_json) + 1);
    emit_model_fix(INVALID(.id = "invalid/prefix-header-length", .error = "DCR_E_CHECKPOINT",
                           .stage = "structure", .flags = "checkpoint",
                           .text = "the carried header's length field is prefix_length - 7",
                           .covers = "R-MAN-8,R-ST-1"),
                   &B, fix);
  }
  {
    /* JSON nesting (§2.2): the bracket that opens level 2049 (the root object is
     * level 1) is a syntax error where it stands, before a bad name later in the
     * text; 2048 levels are not an error of their own. Two rules broken on purpose. */
    static const struct {
      const char *id, *code, *text;
      size_t levels;
    } dv[] = {
        {"invalid/prefix-json-too-deep", "DCR_E_CHECKPOINT", "__metadata__'s value k is "
         "arrays nested to level 2049, and the later name \"e\\u0000\" is bad: the depth "
         "is met first", 2049},
        {"invalid/prefix-json-depth-2048", "DCR_E_NAME", "__metadata__'s value k is arrays "
         "nested to level 2048, the most allowed, and the later name \"e\\u0000\" is bad: "
         "the name is the first error", 2048},
    };
    for (size_t i = 0; i < sizeof dv / sizeof *dv; i++) {
      buf deep = {0}, one = {0};
      const char *open = "{\"__metadata__\":{\"k\":";
      bput(&deep, open, strlen(open));
      bfill(&deep, '[', dv[i].levels - 2); /* levels 3.. (root and __metadata__ are 1, 2) */
      bfill(&deep, ']', dv[i].levels - 2);
      bput(&deep, "},\"a\":", 6);
      bput(&deep, "", 1);
      subst(&one, model_json, "{\"a\":", (const char *)deep.p);
      bput(&one, "", 1);
      subst(&json, (const char *)one.p, "\"e\":", "\"e\\u0000\":");
      model(&B);
      set_prefix(&B, json.p, json.n, 0);
      emit_bundle(INVALID(.id = dv[i].id, .error = dv[i].code, .stage = "structure",
                          .flags = "checkpoint,check-order", .text = dv[i].text,
                          .covers = "R-MAN-8,R-ST-7,R-ORD-1"),
                  &B, NULL, NULL);
      bundle_free(&B);
      bfree(&deep);
      bfree(&one);
    }
  }
  {
    /* Which of two JSON faults comes first (§2.2): errors of the text (rule 2) in
     * text order, before the rules of §2.1 rule 3. Two rules broken on purpose. */
    char long_nul[5020] = "\"";
    memset(long_nul + 1, 'e', 5000);
    strcpy(long_nul + 5001, "\\u0000\":");
    const struct {
      const char *id, *code, *text, *subst[2][2];
    } ov[] = {
        {"invalid/prefix-order-fraction-then-repeat", "DCR_E_NAME", "b's shape [100.0] (a "
         "rule 3 error), and later the root key \"d\" twice (an error of the text): the repeat "
         "is reported", {{"\"shape\":[100]", "\"shape\":[100.0]"}, {"\"e\":", "\"d\":"}}},
        {"invalid/prefix-order-big-integer-then-repeat", "DCR_E_CHECKPOINT", "b's shape "
         "[9223372036854775808] (above 2^63 - 1: an error of the text), and later the root key "
         "\"d\" twice: the number is met first",
         {{"\"shape\":[100]", "\"shape\":[9223372036854775808]"}, {"\"e\":", "\"d\":"}}},
        {"invalid/prefix-order-repeat-then-no-colon", "DCR_E_NAME", "the root key \"b\" "
         "again where \"d\" was, followed by { instead of a colon: the repeat is found at the "
         "end of the key's string", {{"\"d\":{", "\"b\"{"}, {NULL, NULL}}},
        {"invalid/prefix-order-long-name-with-nul", "DCR_E_NAME", "e renamed to 5000 e's "
         "and \\u0000: over max_name_length (rule 3), but the U+0000 escape is an error of the "
         "text (rule 2), met first", {{"\"e\":", long_nul}, {NULL, NULL}}},
        {"invalid/prefix-order-utf8-cut-by-end", "DCR_E_NAME", "the header ends inside the "
         "root key \"e\" right after the byte C3, which starts a 2-byte UTF-8 sequence: bytes "
         "that are not UTF-8 in a name, found at that byte, before the unterminated string",
         {{"\"e\":{\"dtype\":\"F32\",\"shape\":[1024],\"data_offsets\":[8692,12788]}}   ",
           "\"e\xc3"}, {NULL, NULL}}},
    };
    for (size_t i = 0; i < sizeof ov / sizeof *ov; i++) {
      buf j = {0}, k = {0};
      bput(&j, model_json, strlen(model_json) + 1);
      for (size_t q = 0; q < 2 && ov[i].subst[q][0]; q++) {
        subst(&k, (const char *)j.p, ov[i].subst[q][0], ov[i].subst[q][1]);
        bu8(&k, 0);
        bset(&j, k.p, k.n);
      }
      model(&B);
      set_prefix(&B, j.p, j.n - 1, 0);
      emit_bundle(INVALID(.id = ov[i].id, .error = ov[i].code, .stage = "structure",
                          .flags = "checkpoint,check-order", .text = ov[i].text,
                          .covers = "R-MAN-8,R-ST-7,R-ORD-1"),
                  &B, NULL, NULL);
      bundle_free(&B);
      bfree(&j);
      bfree(&k);
    }
  }
  for (int fix = 0; fix < 2; fix++) {
    /* A real header of max_header_size + 1 bytes (spaces after the object), in a
     * zstd-compressed MANI so that the file stays small; repaired, exactly
     * max_header_size: valid, but no checkpoint of it ships. */
    model(&B);
    size_t n = 100000000 + (size_t)!fix, text = strlen(model_json);
    B.man.prefix.n = 0;
    bu64(&B.man.prefix, n);
    bput(&B.man.prefix, model_json, text);
    bfill(&B.man.prefix, ' ', n - text);
    buf m = {0};
    manifest_bytes(&B.man, &m);
    size_t run = 32 + 8 + text; /* where the spaces start in the manifest */
    section *s = sec(&B, "MANI", 0);
    s->comp = 1;
    s->pl.n = 0;
    zframe_rle(&s->pl, m.p, run, ' ', n - text, m.p + run + n - text, m.n - run - (n - text));
    bfree(&m);
    const vec *v = INVALID(.id = "invalid/prefix-header-over-limit", .error = "DCR_E_LIMIT",
                           .stage = "structure", .flags = "checkpoint,limit,compression,handmade-zstd",
                           .text = "the carried header is 100000001 bytes (max_header_size is "
                                   "10^8): the target's header padded with spaces; MANI is "
                                   "zstd-compressed",
                           .covers = "R-ST-1,R-LIM-1");
    emit_fix(v, &B, fix, NULL, NULL);
  }
  bfree(&json);
}

static void raw_vectors(void) {
  static ckpt rb, rt;
  bundle R0, B;
  uint64_t d[1] = {3000};
  rb.file = "ckpt/raw-small-base.bin";
  rb.kind = KIND_RAW;
  fill_random(ck_add(&rb, "raw", U8, 1, d));
  ck_finish(&rb);
  ck_clone(&rt, &rb, "ckpt/raw-small-target.bin");
  mutate(ck_get(&rt, "raw"), 50);
  ck_finish(&rt);
  build(&R0, &rb, &rt, 4096, pol_default, NULL);
  enum { R_PREFIX, R_NAME, R_DTYPE, R_PRESENCE };
  static const struct {
    const char *id, *text;
    int field;
  } rv[] = {
      {"invalid/raw-prefix", "kind raw with an 8-byte prefix", R_PREFIX},
      {"invalid/raw-name", "kind raw with the tensor named \"rax\"", R_NAME},
      {"invalid/raw-dtype", "kind raw with an I8 tensor (both sides)", R_DTYPE},
      {"invalid/raw-target-only", "kind raw with the tensor on the target side only", R_PRESENCE},
  };
  for (size_t i = 0; i < sizeof rv / sizeof *rv; i++)
    for (int fix = 0; fix < 2; fix++) {
      bundle_copy(&B, &R0);
      mentry *e = &B.man.e[0];
      if (!fix) switch (rv[i].field) {
          case R_PREFIX: bput(&B.man.prefix, "12345678", 8); break;
          case R_NAME: e->name[2] = 'x'; break;
          case R_DTYPE: e->t.dtype = e->b.dtype = I8; break;
          default: e->presence = 2; break;
        }
      remanifest(&B);
      emit_fix(INVALID(.id = rv[i].id, .error = "DCR_E_MANIFEST", .stage = "structure",
                       .flags = "raw,malformed-field", .text = rv[i].text, .covers = "R-MAN-7"),
               &B, fix, &rb, &rt);
    }
  /* Applied to a raw base of another size. */
  {
    static ckpt wb;
    ck_clone(&wb, &rb, "ckpt/raw-small-base-longer.bin");
    tensor *t = &wb.t[0];
    t->data = realloc(t->data, 3001);
    t->data[3000] = 0;
    t->len = t->dims[0] = 3001;
    ck_finish(&wb);
    bundle_copy(&B, &R0);
    emit_bundle(INVALID(.id = "invalid/raw-apply-wrong-size", .error = "DCR_E_BASE_MISMATCH",
                        .stage = "apply", .flags = "raw,wrong-base",
                        .text = "a raw bundle applied to a base one byte longer",
                        .covers = "R-APL-1"),
                &B, &wb, NULL);
    bundle_free(&B);
  }
  bundle_free(&R0);
}

/* The streams of the model's chunk `chunk` of entry `entry`, encoded as `enc`. */
static void model_streams(streams *st, size_t entry, uint32_t chunk, int enc) {
  const mentry *e = &M.man.e[entry];
  unsigned es = dt_size[e->t.dtype];
  uint64_t at = (uint64_t)chunk * M.man.chunk_size;
  size_t bytes = (size_t)(e->t.len - at < M.man.chunk_size ? e->t.len - at : M.man.chunk_size);
  if (!delta_coded(e)) die("model_streams: %s is not delta-coded", (const char *)e->name);
  make_streams(st, e->bt->data + at, e->tt->data + at, bytes / es, es, enc);
}

/* Gives a chunk of B encoded data `data`, with encoding, compression and count. */
static void chunk_data(bundle *B, uint32_t entry, uint32_t chunk, int enc, int comp,
                       uint32_t count, const buf *data) {
  set_chunk(chunk_sec(B, entry, chunk), enc, comp, count, data);
}

/* Encoded data of a chunk of the model from its streams (consumed), stored or
 * compressed with libzstd as the valid vectors are. */
static void model_chunk(bundle *B, uint32_t entry, uint32_t chunk, int enc, int comp,
                        streams *st) {
  buf d = {0};
  uint32_t count = st->count;
  join_streams(&d, st, comp);
  chunk_data(B, entry, chunk, enc, comp, count, &d);
  bfree(&d);
}

static void chunk_record_vectors(void) {
  bundle B;
  /* Chunk records (R-CHK-2): b/0's, fields in stored order. Model chunks: a/0
   * XOR_SPARSE stored, a/1 XOR_DENSE zstd, b/0 OVERWRITE_SPARSE stored (F32,
   * n = 100, 12 changed), d/0 OVERWRITE_DENSE zstd (I16, n = 50). */
  static const struct {
    const char *id, *text, *code;
    size_t at, width; /* the field: offset and size in the record */
    uint64_t value;
    const char *flags, *covers;
  } rc[] = {
      {"invalid/chunk-tensor-out-of-range", "a chunk record names entry 99 of 5", "DCR_E_INDEX", 0,
       4, 99, "index", "R-IDX-1,R-CHK-2"},
      {"invalid/chunk-tensor-removed", "a chunk record names the removed tensor c", "DCR_E_INDEX",
       0, 4, EC, "index", "R-IDX-1,R-CHK-2"},
      {"invalid/chunk-number-out-of-range", "chunk 1 of b, which has one chunk", "DCR_E_INDEX", 4,
       4, 1, "index", "R-IDX-1,R-CHK-2"},
      {"invalid/chunk-record-reserved", "a chunk record's reserved field set", "DCR_E_RESERVED",
       10, 2, 1, "reserved", "R-RES-1"},
      {"invalid/chunk-count-zero", "a chunk record with count 0", "DCR_E_INDEX", 12, 4, 0,
       "index", "R-IDX-1,R-CHK-2"},
      {"invalid/chunk-count-over-n", "count 101 for a chunk of 100 elements", "DCR_E_INDEX", 12,
       4, 101, "index", "R-IDX-1,R-CHK-2"},
  };
  for (size_t i = 0; i < sizeof rc / sizeof *rc; i++)
    for (int fix = 0; fix < 2; fix++) {
      model(&B);
      uint8_t *r = chunk_sec(&B, EB, 0)->pl.p + rc[i].at;
      if (!fix) {
        if (rc[i].width == 4) put32(r, rc[i].value);
        else put16(r, rc[i].value);
      }
      emit_model_fix(INVALID(.id = rc[i].id, .error = rc[i].code, .stage = "structure",
                             .flags = rc[i].flags, .text = rc[i].text, .covers = rc[i].covers),
                     &B, fix);
    }
  for (int fix = 0; fix < 2; fix++) {
    model(&B);
    if (!fix) sec(&B, "CHNK", 0)->pl.n = 31;
    emit_model_fix(INVALID(.id = "invalid/chunk-payload-short", .error = "DCR_E_STRUCTURE",
                           .stage = "structure", .flags = "truncation",
                           .text = "a CHNK payload of 31 bytes: shorter than its record (the "
                                   "index record agrees with it)",
                           .covers = "R-CHK-1"),
                   &B, fix);
  }

  /* Index (§8.3). */
  enum { X_DROP, X_EXTRA, X_SWAP, X_DUP };
  static const struct {
    const char *id, *text, *flags;
    int how;
  } xs[] = {
      {"invalid/index-record-missing", "INDX holds 3 records for 4 CHNK sections", "index",
       X_DROP},
      {"invalid/index-length-not-multiple", "INDX of 4 records and 5 bytes", "index", X_EXTRA},
      {"invalid/index-unsorted", "CHNK sections (and index) in the order a/0, b/0, a/1",
       "index,offsets", X_SWAP},
      {"invalid/index-duplicate-chunk", "chunk a/1 carried twice", "index,duplicate-name", X_DUP},
  };
  for (size_t i = 0; i < sizeof xs / sizeof *xs; i++)
    for (int fix = 0; fix < 2; fix++) {
      model(&B);
      size_t c1 = sec_find(&B, "CHNK", 1);
      if (!fix && xs[i].how == X_SWAP) {
        section t = B.s[c1];
        B.s[c1] = B.s[c1 + 1];
        B.s[c1 + 1] = t;
      }
      if (!fix && xs[i].how == X_DUP)
        sec_insert(&B, c1 + 1, "CHNK", 1, 0, B.s[c1].pl.p, B.s[c1].pl.n);
      fix_index(&B);
      B.auto_index = 0;
      if (!fix && xs[i].how == X_DROP) sec(&B, "INDX", 0)->pl.n -= 32;
      if (!fix && xs[i].how == X_EXTRA) bfill(&sec(&B, "INDX", 0)->pl, 0, 5);
      emit_model_fix(INVALID(.id = xs[i].id, .error = "DCR_E_INDEX", .stage = "structure",
                             .flags = xs[i].flags, .text = xs[i].text, .covers = "R-IDX-1"),
                     &B, fix);
    }
  /* Fields of index record 1 (a/1), in stored order. */
  static const struct {
    const char *id, *text, *code, *flags, *covers;
    size_t at, width;
    uint64_t delta;
  } ix[] = {
      {"invalid/index-offset", "index record 1 points 64 bytes past its CHNK", "DCR_E_INDEX",
       "index", "R-IDX-1", 0, 8, 64},
      {"invalid/index-chunk", "index record 1's chunk number differs", "DCR_E_INDEX", "index",
       "R-IDX-1", 12, 4, 1},
      {"invalid/index-encoding", "index record 1's encoding differs", "DCR_E_INDEX", "index",
       "R-IDX-1", 16, 1, 1},
      {"invalid/index-record-reserved", "index record 1's reserved field (offset 18) set",
       "DCR_E_RESERVED", "reserved,index", "R-RES-1", 18, 1, 1},
      {"invalid/index-count", "index record 1's count differs from its CHNK record",
       "DCR_E_INDEX", "index", "R-IDX-1", 20, 4, 1},
      {"invalid/index-length", "index record 1's payload length differs", "DCR_E_INDEX", "index",
       "R-IDX-1", 24, 8, 1},
  };
  for (size_t i = 0; i < sizeof ix / sizeof *ix; i++)
    for (int fix = 0; fix < 2; fix++) {
      model(&B);
      fix_index(&B);
      B.auto_index = 0;
      uint8_t *p = sec(&B, "INDX", 0)->pl.p + 32 + ix[i].at;
      uint64_t delta = fix ? 0 : ix[i].delta;
      if (ix[i].width == 8) put64(p, get64(p) + delta);
      else if (ix[i].width == 4) put32(p, get32(p) + delta);
      else p[0] = (uint8_t)(p[0] + delta);
      emit_model_fix(INVALID(.id = ix[i].id, .error = ix[i].code, .stage = "structure",
                             .flags = ix[i].flags, .text = ix[i].text, .covers = ix[i].covers),
                     &B, fix);
    }
}

static void chunk_data_vectors(void) {
  bundle B;
  streams st;
  /* Encoded data, checked without a base (stage "chunks"), on the model's own
   * chunks, so that each repaired variant applies: b/0 (F32, n = 100, 12 changed
   * at 0, 9, ..., 99) and a/1 (BF16, n = 2048, XOR_DENSE zstd). */
  static const struct {
    const char *id, *text, *covers;
    size_t at;
    uint8_t value;
  } rb[] = {
      {"invalid/encoding-zero", "encoding id 0", "R-ENC-1,§12", 8, 0},
      {"invalid/encoding-unknown", "encoding id 200 (ids up to 6 are defined in 1.0)",
       "R-ENC-1,§12", 8, 200},
      {"invalid/chunk-compression-unknown", "chunk compression 2", "R-ENC-6,§12", 9, 2},
  };
  for (size_t i = 0; i < sizeof rb / sizeof *rb; i++)
    for (int fix = 0; fix < 2; fix++) {
      model(&B);
      if (!fix) chunk_sec(&B, EB, 0)->pl.p[rb[i].at] = rb[i].value;
      emit_model_fix(INVALID(.id = rb[i].id, .error = "DCR_E_ENCODING", .stage = "chunks",
                             .flags = "malformed-field", .text = rb[i].text,
                             .covers = rb[i].covers),
                     &B, fix);
    }
  for (int fix = 0; fix < 2; fix++) {
    model(&B);
    model_streams(&st, EB, 0, XOR_SPARSE);
    if (!fix) /* the first value's bytes, one in each plane */
      for (unsigned k = 0; k < 4; k++) st.planes.p[k * st.count] = 0;
    model_chunk(&B, EB, 0, XOR_SPARSE, 0, &st);
    emit_model_fix(INVALID(.id = "invalid/xor-sparse-zero-value", .error = "DCR_E_ENCODING",
                           .stage = "chunks", .flags = "malformed-field",
                           .text = "b/0 as XOR_SPARSE with its first value all zero bytes "
                                   "(changes nothing)",
                           .covers = "R-ENC-2"),
                   &B, fix);
  }
  for (int fix = 0; fix < 2; fix++) {
    model(&B);
    model_streams(&st, EB, 0, XOR_DENSE);
    st.count -= (uint32_t)!fix;
    model_chunk(&B, EB, 0, XOR_DENSE, 0, &st);
    emit_model_fix(INVALID(.id = "invalid/xor-dense-count", .error = "DCR_E_ENCODING",
                           .stage = "chunks", .flags = "malformed-field",
                           .text = "b/0 as XOR_DENSE changes 12 elements, count says 11",
                           .covers = "R-ENC-2"),
                   &B, fix);
  }
  for (int fix = 0; fix < 2; fix++) {
    model(&B);
    model_streams(&st, EB, 0, OVERWRITE_DENSE);
    st.planes.n -= (size_t)!fix;
    model_chunk(&B, EB, 0, OVERWRITE_DENSE, 0, &st);
    emit_model_fix(INVALID(.id = "invalid/stream-short", .error = "DCR_E_ENCODING",
                           .stage = "chunks", .flags = "truncation",
                           .text = "b/0 as OVERWRITE_DENSE, its stream 399 bytes for 400",
                           .covers = "R-ENC-5"),
                   &B, fix);
  }
  for (int fix = 0; fix < 2; fix++) {
    model(&B);
    bfill(&chunk_sec(&B, EB, 0)->pl, 0, (size_t)!fix);
    emit_model_fix(INVALID(.id = "invalid/stream-trailing-byte", .error = "DCR_E_ENCODING",
                           .stage = "chunks", .flags = "malformed-field",
                           .text = "one byte after the last stream of a stored chunk",
                           .covers = "R-ENC-4"),
                   &B, fix);
  }
  for (int fix = 0; fix < 2; fix++) {
    model(&B);
    bput(&chunk_sec(&B, EA, 1)->pl, "\x28\xb5\x2f\xfd", fix ? 0 : 4);
    emit_model_fix(INVALID(.id = "invalid/stream-trailing-after-frame", .error = "DCR_E_ENCODING",
                           .stage = "chunks", .flags = "malformed-field,compression",
                           .text = "4 bytes (a zstd magic) after the last frame of a compressed "
                                   "chunk",
                           .covers = "R-ENC-4"),
                   &B, fix);
  }

  /* Positions (§9.1): b/0 OVERWRITE_SPARSE. Its gaps are 0 then 8 eleven times,
   * whose smallest k with the fewest bits is 2 (58 bits: 9 bytes with k). Each
   * vector changes one gap, k, a bit or the stream's end; the gaps as written are
   * always Rice-coded with their own smallest k unless k is what is wrong. */
  enum { P_GAP, P_K, P_KBYTE, P_PAD, P_CUT };
  static const struct {
    const char *id, *text, *code, *covers;
    int how;
    size_t at;      /* gap index, or bytes of the stream kept */
    uint64_t value; /* the gap's value, or k */
  } ps[] = {
      {"invalid/position-out-of-range", "the first position is 100, in a chunk of 100 elements",
       "DCR_E_POSITION", "R-POS-1", P_GAP, 0, 100},
      {"invalid/position-gap-out-of-range", "the last gap is 9: positions 0, 9, ..., 90, 100",
       "DCR_E_POSITION", "R-POS-1", P_GAP, 11, 9},
      {"invalid/position-wraps-32-bit", "the second gap is 2^32 - 1: computed in 32 bits the "
       "second position wraps to 0, the first again (duplicate, unsorted)", "DCR_E_POSITION",
       "R-POS-1", P_GAP, 1, 0xFFFFFFFFu},
      {"invalid/position-rice-parameter-32", "a Rice parameter byte of 32 (at most 31)",
       "DCR_E_POSITION", "R-POS-1", P_KBYTE, 0, 32},
      {"invalid/position-k-too-small", "the gaps Rice-coded with k = 1: 68 bits, where k = 2 "
       "takes 58", "DCR_E_POSITION", "R-POS-3", P_K, 0, 1},
      {"invalid/position-k-too-large", "the gaps Rice-coded with k = 3: 59 bits, where k = 2 "
       "takes 58", "DCR_E_POSITION", "R-POS-3", P_K, 0, 3},
      {"invalid/position-padding-not-zero", "the top (unused) bit of the stream's last byte set",
       "DCR_E_POSITION", "R-POS-1", P_PAD, 0, 0x80},
      {"invalid/position-quotient-unterminated", "the chunk's data ends 3 bytes after k, inside "
       "the 5th gap's unary quotient", "DCR_E_POSITION", "R-POS-1", P_CUT, 4, 0},
      {"invalid/position-low-bits-cut", "the chunk's data ends 2 bytes after k, inside the 3rd "
       "gap's low bits", "DCR_E_POSITION", "R-POS-1", P_CUT, 3, 0},
      {"invalid/position-stream-empty", "the chunk's data is empty: no byte for k",
       "DCR_E_POSITION", "R-POS-1", P_CUT, 0, 0},
  };
  model_streams(&st, EB, 0, OVERWRITE_SPARSE);
  if (st.count != 12 || st.pos.n != 9 || st.pos.p[0] != 2) die("b/0 is not as the vectors expect");
  streams_free(&st);
  for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
    for (int fix = 0; fix < 2; fix++) {
      model(&B);
      model_streams(&st, EB, 0, OVERWRITE_SPARSE);
      uint64_t *g = (uint64_t *)(void *)st.gaps.p;
      if (!fix && ps[i].how == P_GAP) g[ps[i].at] = ps[i].value;
      unsigned k = !fix && ps[i].how == P_K ? (unsigned)ps[i].value : rice_k(g, st.count);
      st.pos.n = 0;
      rice(&st.pos, k, g, st.count);
      if (!fix && ps[i].how == P_KBYTE) st.pos.p[0] = (uint8_t)ps[i].value;
      if (!fix && ps[i].how == P_PAD) st.pos.p[st.pos.n - 1] |= (uint8_t)ps[i].value;
      if (!fix && ps[i].how == P_CUT) st.pos.n = ps[i].at, st.planes.n = 0;
      model_chunk(&B, EB, 0, OVERWRITE_SPARSE, 0, &st);
      emit_model_fix(INVALID(.id = ps[i].id, .error = ps[i].code, .stage = "chunks",
                             .flags = "positions", .text = ps[i].text, .covers = ps[i].covers),
                     &B, fix);
    }
  /* Compressed position streams: b/0 OVERWRITE_SPARSE with each stream a frame. */
  static const struct {
    const char *id, *text, *code, *covers;
    size_t keep, extra; /* bytes of the stream kept; zero bytes added */
  } pz[] = {
      {"invalid/position-frame-leftover", "a compressed position stream with a zero byte left "
       "after its 12 gaps", "DCR_E_POSITION", "R-POS-2", 9, 1},
      {"invalid/position-frame-too-large", "a position frame declaring 15 bytes for a "
       "100-element chunk: at most 1 + ceil(100 / 8) = 14 (the stream and 6 zero bytes)",
       "DCR_E_DECOMPRESS", "R-CMP-3", 9, 6},
      {"invalid/position-stream-empty-zstd", "a compressed position stream of 0 bytes: no byte "
       "for k", "DCR_E_POSITION", "R-POS-1,R-POS-2", 0, 0},
  };
  for (size_t i = 0; i < sizeof pz / sizeof *pz; i++)
    for (int fix = 0; fix < 2; fix++) {
      model(&B);
      model_streams(&st, EB, 0, OVERWRITE_SPARSE);
      buf x = {0};
      if (!fix) st.pos.n = pz[i].keep, bfill(&st.pos, 0, pz[i].extra);
      zframe_raw(&x, st.pos.n, st.pos.p, st.pos.n);
      zframe_raw(&x, st.planes.n, st.planes.p, st.planes.n);
      chunk_data(&B, EB, 0, OVERWRITE_SPARSE, 1, st.count, &x);
      bfree(&x);
      streams_free(&st);
      emit_model_fix(INVALID(.id = pz[i].id, .error = pz[i].code, .stage = "chunks",
                             .flags = "positions,handmade-zstd", .text = pz[i].text,
                             .covers = pz[i].covers),
                     &B, fix);
    }

  /* Two bad chunks: a validator that reports all names both. */
  model(&B);
  model_streams(&st, EB, 0, OVERWRITE_SPARSE);
  ((uint64_t *)(void *)st.gaps.p)[0] = 100;
  st.pos.n = 0;
  rice(&st.pos, rice_k(gaps_of(&st), st.count), gaps_of(&st), st.count);
  model_chunk(&B, EB, 0, OVERWRITE_SPARSE, 0, &st);
  chunk_sec(&B, ED, 0)->pl.p[8] = 0;
  emit_model(INVALID(.id = "invalid/chunks-two-bad", .error = "DCR_E_POSITION", .stage = "chunks",
                     .all_errors = "DCR_E_POSITION,DCR_E_ENCODING",
                     .flags = "multiple-errors,positions",
                     .text = "chunk b/0 has a position out of range and chunk d/0 encoding 0",
                     .covers = "R-POS-1,R-ENC-1"),
             &B);
}

/* The zstd profile (SPEC.md §4.4), on MANI (a section) and on a/1's stream (a
 * chunk: XOR_DENSE, 4096 bytes). Each row breaks one rule of a frame; its repaired
 * variant has the same field at a value the profile allows. */
enum { Z_OPTS, Z_GARBAGE, Z_TWO, Z_DECLARED, Z_LESS, Z_MORE, Z_CUT, Z_TRAIL, Z_SKIPPABLE };
typedef struct {
  const char *mani_id, *chunk_id, *text, *code, *covers; /* covers: the profile's step */
  int how;
  zopts bad, good;
  uint64_t declared; /* Z_DECLARED: the size declared (0: content + 1) */
} zrow;

/* A frame as row r says (fix: repaired) around content p[0..n). */
static void zrow_frame(buf *out, const zrow *r, int fix, const uint8_t *p, size_t n,
                       const buf *junk) {
  if (fix) {
    zframe_hand(out, &r->good, n, p, n);
    return;
  }
  switch (r->how) {
    case Z_GARBAGE: bput(out, junk->p, junk->n); break;
    case Z_TWO:
      zframe_raw(out, n / 2, p, n / 2);
      zframe_raw(out, n - n / 2, p + n / 2, n - n / 2);
      break;
    case Z_DECLARED: zframe_raw(out, r->declared ? r->declared : n + 1, p, n); break;
    case Z_LESS: zframe_raw(out, n, p, n - 1); break;
    case Z_MORE: {
      buf big = {0};
      bput(&big, p, n);
      bfill(&big, 0, 64);
      zframe_raw(out, n, big.p, big.n);
      bfree(&big);
      break;
    }
    case Z_CUT: zframe_raw(out, n, p, n); out->n -= 100; break;
    case Z_TRAIL: zframe_raw(out, n, p, n); bput(out, "abc", 3); break;
    case Z_SKIPPABLE:
      bu32(out, 0x184D2A50u); /* a skippable frame of 4 bytes, then the frame */
      bu32(out, 4);
      bu32(out, 0);
      zframe_raw(out, n, p, n);
      break;
    default: zframe_hand(out, &r->bad, n, p, n); break;
  }
}

static void zstd_vectors(void) {
  bundle B;
  buf m = {0};
  manifest_bytes(&M.man, &m);
  /* Random bytes that are not a frame: 64 for the chunk, then 50 for MANI, drawn in
   * the order the 1.0 draft drew them, so that these vectors, and every one made
   * after them, kept their bytes when 1.0 was declared final. */
  buf chunk_junk = {0}, mani_junk = {0};
  for (int k = 0; k < 64; k++) bu8(&chunk_junk, rbyte());
  for (int k = 0; k < 50; k++) bu8(&mani_junk, rbyte());
  static const zrow zr[] = {
      {"invalid/mani-zstd-garbage", "invalid/chunk-frame-garbage",
       "compression 1 over random bytes that are not a zstd frame", "DCR_E_DECOMPRESS", "R-CMP-4",
       Z_GARBAGE, {0}, {0}, 0},
      {"invalid/mani-zstd-two-frames", NULL, "two zstd frames (halves of the content)",
       "DCR_E_DECOMPRESS", "R-CMP-1", Z_TWO, {0}, {0}, 0},
      {"invalid/mani-zstd-no-content-size", "invalid/chunk-frame-no-content-size",
       "a frame that does not declare its content size (window at the bound)",
       "DCR_E_DECOMPRESS", "R-CMP-4", Z_OPTS, {.no_size = 1}, {0}, 0},
      {"invalid/mani-zstd-declares-more", "invalid/chunk-frame-declares-more",
       "a frame declaring one byte more than it holds", "DCR_E_DECOMPRESS", "R-CMP-1",
       Z_DECLARED, {0}, {0}, 0},
      {"invalid/mani-zstd-gives-less", "invalid/chunk-frame-gives-less",
       "a frame declaring the content's size that holds one byte less", "DCR_E_DECOMPRESS",
       "R-CMP-1", Z_LESS, {0}, {0}, 0},
      {"invalid/mani-zstd-gives-more", "invalid/chunk-frame-gives-more",
       "a frame holding 64 bytes more than it declares (a decoder must not write past the "
       "declared size)", "DCR_E_DECOMPRESS", "R-CMP-1", Z_MORE, {0}, {0}, 0},
      {"invalid/mani-zstd-truncated", "invalid/chunk-frame-truncated",
       "the frame cut 100 bytes short: its last block runs past the data", "DCR_E_DECOMPRESS",
       "R-CMP-1", Z_CUT, {0}, {0}, 0},
      {"invalid/mani-zstd-trailing", NULL, "a zstd frame followed by 3 more bytes",
       "DCR_E_DECOMPRESS", "R-CMP-1", Z_TRAIL, {0}, {0}, 0},
      {"invalid/mani-zstd-skippable-frame", "invalid/chunk-frame-skippable",
       "a skippable frame (magic 0x184D2A50) before the zstd frame", "DCR_E_DECOMPRESS",
       "R-CMP-4", Z_SKIPPABLE, {0}, {0}, 0},
      {"invalid/mani-zstd-legacy-magic", "invalid/chunk-frame-legacy-magic",
       "the frame's magic is 0xFD2FB527 (zstd 0.7, legacy)", "DCR_E_DECOMPRESS", "R-CMP-4",
       Z_OPTS, {.magic = 0xFD2FB527u}, {0}, 0},
      {"invalid/mani-zstd-dictionary-id", "invalid/chunk-frame-dictionary-id",
       "a frame naming Dictionary_ID 1 (repaired: the field present, 0)", "DCR_E_DECOMPRESS",
       "R-CMP-4", Z_OPTS, {.dict = 1, .dict_id = 1}, {.dict = 1}, 0},
      {"invalid/mani-zstd-window-too-large", "invalid/chunk-frame-window-too-large",
       "a frame (not single segment) whose window is twice max(1024, the content size rounded "
       "up to a power of two) (repaired: exactly that)", "DCR_E_DECOMPRESS", "R-CMP-4", Z_OPTS,
       {.multi = 1, .window_over = 1}, {.multi = 1}, 0},
      {"invalid/mani-zstd-checksum-wrong", "invalid/chunk-frame-checksum-wrong",
       "a frame whose content checksum does not match (repaired: one that does)",
       "DCR_E_DECOMPRESS", "R-CMP-1", Z_OPTS, {.checksum = 2}, {.checksum = 1}, 0},
      {"invalid/mani-zstd-declares-2-gib", NULL,
       "a frame declaring 2^31 bytes (max_section_size, allowed) in a few hundred bytes: more "
       "than 32768 times its length, refused before allocating", "DCR_E_DECOMPRESS", "R-CMP-5",
       Z_DECLARED, {0}, {0}, (uint64_t)1 << 31},
      {"invalid/mani-zstd-declares-over-limit", NULL,
       "a frame declaring 2^31 + 1 bytes (max_section_size is 2^31): refused by the limit, "
       "which comes before the ratio rule", "DCR_E_LIMIT", "R-CMP-2,R-LIM-1,R-ORD-1",
       Z_DECLARED, {0}, {0}, ((uint64_t)1 << 31) + 1},
  };

  const section *a1 = chunk_sec(&M, EA, 1);
  for (size_t i = 0; i < sizeof zr / sizeof *zr; i++) {
    const zrow r = zr[i];
    for (int chunk = 0; chunk < 2; chunk++) {
      const char *id = chunk ? r.chunk_id : r.mani_id;
      if (!id) continue;
      char text[512], chunk_covers[64];
      snprintf(chunk_covers, sizeof chunk_covers, "R-CMP-3,%s", r.covers);
      snprintf(text, sizeof text, "%s: %s", chunk ? "a/1's stream (4096 bytes)" : "MANI",
               r.text);
      int limit = !strcmp(r.code, "DCR_E_LIMIT");
      const vec *v = INVALID(.id = id, .error = r.code, .stage = chunk ? "chunks" : "structure",
                             .flags = limit ? "limit,size-as-allocation,handmade-zstd"
                                      : r.how == Z_GARBAGE ? "decompressed-size"
                                                           : "decompressed-size,handmade-zstd",
                             .text = text,
                             .covers = chunk ? chunk_covers : r.covers);
      for (int fix = 0; fix < 2; fix++) {
        model(&B);
        buf x = {0};
        if (chunk) {
          streams st;
          model_streams(&st, EA, 1, XOR_DENSE);
          zrow_frame(&x, &r, fix, st.planes.p, st.planes.n, &chunk_junk);
          chunk_data(&B, EA, 1, XOR_DENSE, 1, get32(a1->pl.p + 12), &x);
          streams_free(&st);
        } else {
          section *s = sec(&B, "MANI", 0);
          zrow_frame(&x, &r, fix, m.p, m.n, &mani_junk);
          s->comp = 1;
          bset(&s->pl, x.p, x.n);
        }
        bfree(&x);
        emit_model_fix(v, &B, fix);
      }
    }
  }
  model(&B);
  {
    /* A META that really holds 2^31 + 1 bytes: one pair whose value is 'a's, in
     * RLE blocks (a frame of 64 KiB, within the ratio bound): only the limit is
     * broken. */
    uint64_t vlen = ((uint64_t)1 << 31) - 10;
    buf head = {0};
    bu32(&head, 1);
    bu16(&head, 1);
    bu8(&head, 'k');
    bu32(&head, vlen);
    section *s = sec(&B, "META", 0);
    s->comp = 1;
    s->pl.n = 0;
    zframe_rle(&s->pl, head.p, head.n, 'a', vlen, NULL, 0);
    bfree(&head);
  }
  emit_model(INVALID(.id = "invalid/meta-zstd-over-limit", .error = "DCR_E_LIMIT",
                     .stage = "structure",
                     .flags = "limit,size-as-allocation,handmade-zstd,metadata",
                     .text = "META as a frame of RLE blocks that really gives 2^31 + 1 bytes (one "
                             "pair, a value of 2^31 - 10 'a's; max_section_size is 2^31): "
                             "refused before decompressing",
                     .covers = "R-CMP-2,R-LIM-1,R-META-1"),
             &B);
  bfree(&m);
  bfree(&chunk_junk);
  bfree(&mani_junk);
}

static void meta_vectors(void) {
  bundle B;
  /* Every reader reads META (SPEC.md §6.4). The payload as bytes; repaired, the
   * same bytes with the faulty field at a valid value. */
  static const struct {
    const char *id, *text, *code;
    const char *bad, *good;
    size_t nbad, ngood;
  } mv[] = {
      {"invalid/meta-truncated-pair", "META ends inside its second pair's value (5 bytes "
       "declared, 2 present)", "DCR_E_TRUNCATED",
       "\x02\0\0\0\x01\0k\x01\0\0\0v\x01\0m\x05\0\0\0ab",
       "\x02\0\0\0\x01\0k\x01\0\0\0v\x01\0m\x02\0\0\0ab", 21, 21},
      {"invalid/meta-count-beyond-payload", "META declares 10^6 pairs in 12 bytes: count x 7 "
       "exceeds the bytes left", "DCR_E_TRUNCATED", "\x40\x42\x0f\0\x01\0k\x01\0\0\0v",
       "\x01\0\0\0\x01\0k\x01\0\0\0v", 12, 12},
      {"invalid/meta-trailing-bytes", "2 bytes after the last META pair", "DCR_E_MANIFEST",
       "\x01\0\0\0\x01\0k\x01\0\0\0vxx", "\x01\0\0\0\x01\0k\x01\0\0\0v", 14, 12},
      {"invalid/meta-keys-unsorted", "META keys \"b\" then \"a\"", "DCR_E_MANIFEST",
       "\x02\0\0\0\x01\0b\0\0\0\0\x01\0a\0\0\0\0", "\x02\0\0\0\x01\0b\0\0\0\0\x01\0c\0\0\0\0",
       18, 18},
      {"invalid/meta-key-empty", "an empty META key", "DCR_E_MANIFEST",
       "\x01\0\0\0\0\0\x01\0\0\0v", "\x01\0\0\0\x01\0k\x01\0\0\0v", 11, 12},
      {"invalid/meta-value-not-utf8", "a META value with byte 0xFE", "DCR_E_MANIFEST",
       "\x01\0\0\0\x01\0k\x01\0\0\0\xfe", "\x01\0\0\0\x01\0k\x01\0\0\0v", 12, 12},
      {"invalid/meta-key-nul", "a META key \"k\" U+0000 \"x\"", "DCR_E_MANIFEST",
       "\x01\0\0\0\x03\0k\0x\x01\0\0\0v", "\x01\0\0\0\x03\0k0x\x01\0\0\0v", 14, 14},
      {"invalid/meta-value-nul", "a META value \"v\" U+0000", "DCR_E_MANIFEST",
       "\x01\0\0\0\x01\0k\x02\0\0\0v\0", "\x01\0\0\0\x01\0k\x02\0\0\0v0", 13, 13},
      {"invalid/meta-value-overlong-utf8", "a META value \"/\" written as the overlong C0 AF "
       "(UTF-8 by RFC 3629, as for names)", "DCR_E_MANIFEST",
       "\x01\0\0\0\x01\0k\x02\0\0\0\xc0\xaf", "\x01\0\0\0\x01\0k\x02\0\0\0//", 13, 13},
      {"invalid/meta-key-surrogate", "a META key holding U+D800 encoded as ED A0 80",
       "DCR_E_MANIFEST", "\x01\0\0\0\x03\0\xed\xa0\x80\x01\0\0\0v",
       "\x01\0\0\0\x03\0\xed\x9f\xbf\x01\0\0\0v", 14, 14},
  };
  for (size_t i = 0; i < sizeof mv / sizeof *mv; i++)
    for (int fix = 0; fix < 2; fix++) {
      model(&B);
      section *s = sec(&B, "META", 0);
      s->comp = 0;
      bset(&s->pl, fix ? mv[i].good : mv[i].bad, fix ? mv[i].ngood : mv[i].nbad);
      emit_model_fix(INVALID(.id = mv[i].id, .error = mv[i].code, .stage = "structure",
                             .flags = "metadata,malformed-field", .text = mv[i].text,
                             .covers = "R-META-1"),
                     &B, fix);
    }
  for (int fix = 0; fix < 2; fix++) {
    /* A key of 4097 bytes; repaired, 4096 (max_name_length). */
    buf p = {0};
    bu32(&p, 1);
    bu16(&p, 4097 - (unsigned)fix);
    bfill(&p, 'k', 4097 - (size_t)fix);
    bu32(&p, 1);
    bu8(&p, 'v');
    model(&B);
    section *s = sec(&B, "META", 0);
    s->comp = 0;
    bset(&s->pl, p.p, p.n);
    bfree(&p);
    emit_model_fix(INVALID(.id = "invalid/meta-key-too-long", .error = "DCR_E_LIMIT",
                           .stage = "structure", .flags = "metadata,limit",
                           .text = "a META key of 4097 bytes (max_name_length is 4096)",
                           .covers = "R-META-1,R-LIM-1"),
                   &B, fix);
  }
  for (int fix = 0; fix < 2; fix++) {
    model(&B);
    section *s = sec(&B, "META", 0);
    buf z = {0};
    zframe_raw(&z, s->pl.n, s->pl.p, s->pl.n);
    if (!fix) z.n = 5; /* the magic and the frame header descriptor only */
    s->comp = 1;
    bset(&s->pl, z.p, z.n);
    bfree(&z);
    emit_model_fix(INVALID(.id = "invalid/meta-zstd-garbage", .error = "DCR_E_DECOMPRESS",
                           .stage = "structure", .flags = "metadata,decompressed-size",
                           .text = "META compression 1 over a frame cut after 5 bytes, inside "
                                   "its header",
                           .covers = "R-META-1,R-CMP-1"),
                   &B, fix);
  }
}

static void apply_vectors(void) {
  bundle B;
  /* Wrong bases. */
  static ckpt w[8];
  int nw = 0;
  struct {
    const char *id, *text, *covers, *flags;
    ckpt *base;
  } av[8];
#define WRONG(file_, id_, text_, covers_, flags_)                                      \
  (ck_clone(&w[nw], &MB, file_), av[nw].id = id_, av[nw].text = text_,                  \
   av[nw].covers = covers_, av[nw].flags = flags_, av[nw].base = &w[nw], &w[nw++])
  ckpt *c;
  uint64_t d1[1] = {4};
  c = WRONG("ckpt/model-base-extra-tensor.safetensors", "invalid/apply-base-extra-tensor",
            "the base has a tensor the manifest does not list", "R-APL-1", "wrong-base");
  fill_random(ck_add(c, "b2", F32, 1, d1));
  c = WRONG("ckpt/model-base-missing-tensor.safetensors", "invalid/apply-base-missing-tensor",
            "the base lacks the removed tensor c", "R-APL-1", "wrong-base");
  ck_remove(c, "c");
  c = WRONG("ckpt/model-base-reshaped.safetensors", "invalid/apply-base-shape",
            "the base's a is [64, 64], not [4096] (same bytes)", "R-APL-1", "wrong-base");
  ck_get(c, "a")->rank = 2, ck_get(c, "a")->dims[0] = 64, ck_get(c, "a")->dims[1] = 64;
  c = WRONG("ckpt/model-base-dtype.safetensors", "invalid/apply-base-dtype",
            "the base's b is I32, not F32 (same bytes)", "R-APL-1", "wrong-base");
  ck_get(c, "b")->dtype = I32;
  c = WRONG("ckpt/model-base-changed-chunk.safetensors", "invalid/apply-chunk-base-hash",
            "one byte of the base differs inside a changed chunk: its base hash does not match",
            "R-APL-2", "wrong-base");
  ck_get(c, "a")->data[100] ^= 1;
  c = WRONG("ckpt/model-base-unchanged-chunk.safetensors", "invalid/apply-base-tensor-hash",
            "one byte of the base differs in tensor e, which has no changed chunk: the tensor "
            "hash catches it", "R-APL-3", "wrong-base");
  ck_get(c, "e")->data[7] ^= 1;
  c = WRONG("ckpt/model-base-removed-differs.safetensors", "invalid/apply-base-removed-tensor",
            "one byte of the removed tensor c differs: its hash is part of the base state id",
            "R-APL-3", "wrong-base");
  ck_get(c, "c")->data[0] ^= 1;
  c = WRONG("ckpt/model-base-bad-header.safetensors", "invalid/apply-base-not-safetensors",
            "the base's header length runs past the end of the file", "R-ST-1", "checkpoint");
  for (int i = 0; i < nw; i++) {
    ck_finish(&w[i]);
    if (i == nw - 1) put64(w[i].bytes.p, w[i].bytes.n);
    model(&B);
    emit_bundle(INVALID(.id = av[i].id, .error = i == nw - 1 ? "DCR_E_CHECKPOINT"
                                                             : "DCR_E_BASE_MISMATCH",
                        .stage = "apply", .flags = av[i].flags, .text = av[i].text,
                        .covers = av[i].covers),
                &B, av[i].base, NULL);
    bundle_free(&B);
  }
#undef WRONG
  {
    /* Some changed chunks at target bytes, the others at base bytes: each chunk is
     * applied or left alone (§10 step 3) and the output is the target, but the
     * base tensor hash of a tells that this is not the base. */
    static ckpt mx;
    ck_clone(&mx, &MB, "ckpt/model-base-mixed.safetensors");
    memcpy(ck_get(&mx, "a")->data + 4096, ck_get(&MT, "a")->data + 4096, 4096);
    ck_finish(&mx);
    model(&B);
    emit_bundle(INVALID(.id = "invalid/apply-mixed-input", .error = "DCR_E_BASE_MISMATCH",
                        .stage = "apply", .flags = "wrong-base",
                        .text = "the model base with chunk a/1 already at its target bytes, a/0 "
                                "at its base bytes: the base tensor hash of a does not match",
                        .covers = "R-APL-2,R-APL-3"),
                &B, &mx, NULL);
    bundle_free(&B);
    /* The same input, with a chunk that fails the chunks stage: the apply stage,
     * which would fail too, is not run. */
    model(&B);
    chunk_sec(&B, EB, 0)->pl.p[8] = 0;
    emit_bundle(INVALID(.id = "invalid/stage-chunks-before-apply", .error = "DCR_E_ENCODING",
                        .stage = "chunks", .flags = "malformed-field,wrong-base,check-order",
                        .text = "b/0's encoding is 0 and the input is the mixed one of "
                                "apply-mixed-input (two rules broken on purpose): the chunks "
                                "stage fails first, and apply is not run",
                        .covers = "R-ORD-2,R-ENC-1"),
                &B, &mx, NULL);
    bundle_free(&B);
  }

  /* Bundles that pass every check without a base but do not give their target;
   * repaired, they do. */
  enum { A_COUNT, A_SPARSE_SAME, A_BASE_CHECK, A_CHECK, A_HASH_E, A_HASH_D };
  static const struct {
    const char *id, *text, *code, *flags, *covers;
    int how;
  } ap[] = {
      {"invalid/apply-overwrite-count", "d/0 OVERWRITE_DENSE (zstd) with a count one less than "
       "the elements it changes (only the base can tell)", "DCR_E_ENCODING", "malformed-field",
       "R-ENC-3", A_COUNT},
      {"invalid/apply-overwrite-sparse-unchanged", "b/0 OVERWRITE_SPARSE whose first value is "
       "the base element it replaces", "DCR_E_ENCODING", "malformed-field", "R-ENC-3",
       A_SPARSE_SAME},
      {"invalid/apply-chunk-base-check", "a/0's base_check is wrong (record re-checksummed); "
       "the input is the true base, by its state id, but not by this chunk, and it is not the "
       "target", "DCR_E_BASE_MISMATCH", "wrong-base", "R-APL-2", A_BASE_CHECK},
      {"invalid/apply-chunk-target-check", "a/0's target_check does not match what it decodes "
       "to", "DCR_E_TARGET_MISMATCH", "target-mismatch", "R-APL-2", A_CHECK},
      {"invalid/apply-target-tensor-hash", "tensor e's target hash (and the target state id "
       "made from it) is not that of the bytes the bundle gives", "DCR_E_TARGET_MISMATCH",
       "target-mismatch", "R-APL-2", A_HASH_E},
      {"invalid/apply-added-tensor-hash", "the added tensor d's target hash is wrong (state id "
       "consistent)", "DCR_E_TARGET_MISMATCH", "target-mismatch", "R-APL-2", A_HASH_D},
  };
  for (size_t i = 0; i < sizeof ap / sizeof *ap; i++)
    for (int fix = 0; fix < 2; fix++) {
      model(&B);
      if (!fix) switch (ap[i].how) {
          case A_COUNT: {
            uint8_t *r = chunk_sec(&B, ED, 0)->pl.p;
            put32(r + 12, get32(r + 12) - 1);
            break;
          }
          case A_SPARSE_SAME: {
            streams st;
            model_streams(&st, EB, 0, OVERWRITE_SPARSE);
            /* the first position is the first gap; its value is byte 0 of each plane */
            const uint8_t *basev = B.man.e[EB].bt->data + 4 * gaps_of(&st)[0];
            for (unsigned k = 0; k < 4; k++) st.planes.p[k * st.count] = basev[k];
            model_chunk(&B, EB, 0, OVERWRITE_SPARSE, 0, &st);
            break;
          }
          case A_BASE_CHECK: chunk_sec(&B, EA, 0)->pl.p[16] ^= 1; break;
          case A_CHECK: chunk_sec(&B, EA, 0)->pl.p[24] ^= 1; break;
          default:
            B.man.e[ap[i].how == A_HASH_E ? EE : ED].t.hash[ap[i].how == A_HASH_E ? 0 : 15] ^= 1;
            rebuild_iden(&B);
            break;
        }
      emit_model_fix(INVALID(.id = ap[i].id, .error = ap[i].code, .stage = "apply",
                             .flags = ap[i].flags, .text = ap[i].text, .covers = ap[i].covers),
                     &B, fix);
    }

  /* A valid bundle checked against a target that is not its own. */
  static ckpt wt, wt2;
  ck_clone(&wt, &MT, "ckpt/model-target-one-byte.safetensors");
  ck_get(&wt, "e")->data[4095] ^= 0x80;
  ck_finish(&wt);
  model(&B);
  emit_bundle(INVALID(.id = "invalid/target-one-byte", .error = "DCR_E_TARGET_MISMATCH",
                      .stage = "target", .flags = "target-mismatch",
                      .text = "a valid bundle; the target file given differs in one byte",
                      .covers = "§10,R-APL-3,R-TGT-1"),
              &B, &MB, &wt);
  bundle_free(&B);
  ck_clone(&wt2, &MT, "ckpt/model-target-reordered.safetensors");
  wt2.reverse = 1;
  ck_finish(&wt2);
  model(&B);
  emit_bundle(INVALID(.id = "invalid/target-other-layout", .error = "DCR_E_TARGET_MISMATCH",
                      .stage = "target", .flags = "target-mismatch,layout",
                      .text = "a valid bundle; the target file holds the same tensors in another "
                              "layout (the prefix is part of the target's identity)",
                      .covers = "§7,§10,R-TGT-1"),
              &B, &MB, &wt2);
  bundle_free(&B);
  /* A target file read as a checkpoint first (§15.6): one byte after its last
   * tensor breaks §2.1 rule 4 before the prefix and size are compared. */
  static ckpt wt3;
  ck_clone(&wt3, &MT, "ckpt/model-target-trailing-byte.safetensors");
  ck_finish(&wt3);
  bu8(&wt3.bytes, 0);
  model(&B);
  emit_bundle(INVALID(.id = "invalid/target-trailing-byte", .error = "DCR_E_LAYOUT",
                      .stage = "target", .flags = "target-mismatch,layout",
                      .text = "a valid bundle; the target file has one byte after its last "
                              "tensor: not a valid safetensors file, before it is compared",
                      .covers = "R-ST-6,R-TGT-1"),
              &B, &MB, &wt3);
  bundle_free(&B);
}

/* Valid vectors made from the model: re-application, JSON and zstd edges. */
static void model_valid_vectors(void) {
  bundle B;
  model(&B);
  emit_bundle(VALID(.id = "valid/apply-to-own-target", .flags = "tensor-set",
                    .text = "the model bundle (a tensor added, one removed) applied to its own "
                            "target: the input is the target, no chunk is applied, the output "
                            "is the target",
                    .covers = "R-APL-5,§10.2"),
              &B, &MT, &MT);
  bundle_free(&B);
  {
    static ckpt eb, et;
    pair_enc(&eb, &et);
    eb.file = "ckpt/enc2-base.safetensors";
    et.file = "ckpt/enc2-target.safetensors";
    build(&B, &eb, &et, 4096, pol_default, NULL);
    emit_bundle(VALID(.id = "valid/apply-already-applied", .flags = "change-rate",
                      .text = "a bundle applied to its target (same tensor set): the input "
                              "is the target by its state id, no chunk is applied, and the "
                              "output is the target",
                      .covers = "R-APL-5,§10.2"),
                &B, &et, &et);
    bundle_free(&B);
  }
  /* Targets whose carried header is written unusually: the prefix is the file's. */
  static const struct {
    const char *id, *text, *file;
    const char *subst[3][2];
  } hv[] = {
      {"valid/prefix-json-whitespace", "the target's header has tab, CR, LF and space between "
       "tokens and after the object", "ckpt/model-target-whitespace.safetensors",
       {{"{\"a\":", "{\n\t\"a\" :\r\n "}, {",\"b\":", " ,\t\"b\":"}, {"]}}", "]}\n}\r\n\t "}}},
      {"valid/prefix-negative-zero", "the target's header gives a's first offset as -0 (the "
       "number 0)", "ckpt/model-target-negative-zero.safetensors",
       {{"\"data_offsets\":[0,", "\"data_offsets\":[-0,"}, {NULL, NULL}, {NULL, NULL}}},
      {"valid/prefix-tensor-order", "the target's header lists its tensors b, d, e, a: not in "
       "name order (the manifest matches them by name)",
       "ckpt/model-target-tensor-order.safetensors",
       {{"{\"a\":{\"dtype\":\"BF16\",\"shape\":[4096],\"data_offsets\":[0,8192]},", "{"},
        {"[8692,12788]}}", "[8692,12788]},\"a\":{\"dtype\":\"BF16\",\"shape\":[4096],"
                          "\"data_offsets\":[0,8192]}}"},
        {NULL, NULL}}},
      {"valid/prefix-metadata-escaped", "the target's header has \"\\u005f_metadata__\": "
       "{\"k\": \"v\"}, which is __metadata__ once unescaped, not a tensor",
       "ckpt/model-target-metadata-escaped.safetensors",
       {{"{\"a\":", "{\"\\u005f_metadata__\":{\"k\":\"v\"},\"a\":"}, {NULL, NULL}, {NULL, NULL}}},
      {"valid/prefix-key-escaped", "the target's header writes a's keys as \"\\u0064type\" "
       "and \"sh\\u0061pe\": keys are compared after unescaping",
       "ckpt/model-target-key-escaped.safetensors",
       {{"\"dtype\":\"BF16\"", "\"\\u0064type\":\"BF16\""},
        {"\"shape\":[4096]", "\"sh\\u0061pe\":[4096]"}, {NULL, NULL}}},
  };
  static ckpt ht[sizeof hv / sizeof *hv];
  for (size_t i = 0; i < sizeof hv / sizeof *hv; i++) {
    buf j = {0}, k = {0};
    bput(&j, model_json, strlen(model_json) + 1);
    for (size_t q = 0; q < 3 && hv[i].subst[q][0]; q++) {
      subst(&k, (const char *)j.p, hv[i].subst[q][0], hv[i].subst[q][1]);
      bu8(&k, 0);
      bset(&j, k.p, k.n);
    }
    ck_clone(&ht[i], &MT, hv[i].file);
    ck_finish(&ht[i]);
    ck_set_header(&ht[i], (const char *)j.p);
    model(&B);
    set_prefix(&B, j.p, j.n - 1, 0);
    emit_bundle(VALID(.id = hv[i].id, .flags = "checkpoint", .text = hv[i].text,
                      .covers = "R-ST-7,R-MAN-8"),
                &B, &MB, &ht[i]);
    bundle_free(&B);
    bfree(&j);
    bfree(&k);
  }
  /* zstd frames at the edges of the profile (§4.4): MANI and a/1's stream. */
  static const struct {
    const char *id, *text;
    zopts o;
  } zv[] = {
      {"valid/zstd-window-at-bound", "MANI and a/1's stream as frames that are not single "
       "segment, each window exactly max(1024, content size rounded up to a power of two)",
       {.multi = 1}},
      {"valid/zstd-checksum", "MANI and a/1's stream as frames with a (correct) content checksum",
       {.checksum = 1}},
      {"valid/zstd-dictionary-id-zero", "MANI and a/1's stream as frames with a Dictionary_ID "
       "field of 0 (no dictionary)", {.dict = 1}},
  };
  for (size_t i = 0; i < sizeof zv / sizeof *zv; i++) {
    model(&B);
    buf m = {0}, z = {0};
    manifest_bytes(&B.man, &m);
    zframe_hand(&z, &zv[i].o, m.n, m.p, m.n);
    section *s = sec(&B, "MANI", 0);
    s->comp = 1;
    bset(&s->pl, z.p, z.n);
    streams st;
    model_streams(&st, EA, 1, XOR_DENSE);
    z.n = 0;
    zframe_hand(&z, &zv[i].o, st.planes.n, st.planes.p, st.planes.n);
    chunk_data(&B, EA, 1, XOR_DENSE, 1, st.count, &z);
    streams_free(&st);
    bfree(&m);
    bfree(&z);
    emit_bundle(VALID(.id = zv[i].id, .flags = "handmade-zstd,compression", .text = zv[i].text,
                      .covers = "§4.4,R-CMP-1,R-CMP-3"),
                &B, &MB, &MT);
    bundle_free(&B);
  }
  {
    /* A zero-length tensor with a dimension of 2^63 - 1, the largest JSON number
     * §2.1 allows; then 2^63 (its repaired variant is this vector). */
    static ckpt zb, zt;
    uint64_t d[2] = {8, 0};
    zb.file = "ckpt/bignum-base.safetensors";
    zb.kind = KIND_ST;
    fill_random(ck_add(&zb, "w", U8, 1, d));
    ck_finish(&zb);
    ck_clone(&zt, &zb, "ckpt/bignum-target.safetensors");
    mutate(ck_get(&zt, "w"), 10000);
    d[0] = 0, d[1] = ((uint64_t)1 << 63) - 1;
    ck_add(&zt, "z", U8, 2, d);
    ck_finish(&zt);
    build(&B, &zb, &zt, 4096, pol_default, NULL);
    emit_bundle(VALID(.id = "valid/shape-dim-max", .flags = "limit-edge,zero-length",
                      .text = "an added U8 tensor of shape [0, 2^63 - 1]: the largest number a "
                              "header may hold, in a tensor of 0 bytes",
                      .covers = "R-ST-2,R-ST-4,R-MAN-5"),
                &B, &zb, &zt);
    for (int fix = 0; fix < 2; fix++) {
      bundle Z;
      bundle_copy(&Z, &B);
      Z.man.e[1].t.dims[1] += (uint64_t)!fix;
      prefix_from_entries(&Z.man);
      remanifest(&Z);
      emit_fix(INVALID(.id = "invalid/prefix-number-2-63", .error = "DCR_E_CHECKPOINT",
                       .stage = "structure", .flags = "checkpoint",
                       .text = "the added tensor z's shape [0, 2^63] in the manifest and the "
                               "carried header: a header number above 2^63 - 1",
                       .covers = "R-MAN-8,R-ST-2"),
               &Z, fix, &zb, &zt);
    }
    bundle_free(&B);
  }
}

/* ------------------------------------------------------------------------ */

int main(int argc, char **argv) {
  if (!index_open(argc, argv, NULL, "v1", v1_flags, sizeof v1_flags / sizeof *v1_flags)) {
    fprintf(stderr, "usage: mkvectors OUTDIR [--repaired DIR]\n"
                    "  writes OUTDIR/index.json and OUTDIR/v1/; with --repaired, also every\n"
                    "  repaired variant as DIR/index.json and DIR/v1/ (all must be valid)\n");
    return 2;
  }

  valid_vectors();

  pair_model(&MB, &MT);
  build(&M, &MB, &MT, 4096, pol_model, NULL);
  static const char *const mmeta[] = {"dcr.step", "7", "origin", "mkvectors", NULL};
  add_meta(&M, mmeta, 0);
  if (M.n != 9) die("the model bundle has %zu sections", M.n);
  {
    /* The vectors that rewrite the carried header from the entries rely on it. */
    manifest m = M.man;
    m.prefix = (buf){0};
    prefix_from_entries(&m);
    if (m.prefix.n != M.man.prefix.n || memcmp(m.prefix.p, M.man.prefix.p, m.prefix.n))
      die("prefix_from_entries does not give the model's header");
    bfree(&m.prefix);
  }
  read_model_json();
  emit_bundle(VALID(.id = "valid/model", .flags = "encoding,compression,tensor-set,metadata",
                    .text = "the bundle most invalid vectors are made from: one chunk of each "
                            "encoding, a removed and an added tensor, an unchanged one, META",
                    .covers = "§4,§6,§7,§8,§9"),
              &M, &MB, &MT);

  header_vectors();
  section_walk_vectors();
  order_vectors();
  manifest_field_vectors();
  manifest_entry_vectors();
  prefix_vectors();
  raw_vectors();
  chunk_record_vectors();
  chunk_data_vectors();
  zstd_vectors();
  meta_vectors();
  apply_vectors();
  model_valid_vectors();

  /* SPEC.md requirements that no bundle can test: conformance.sh requires every
   * other id to be in some vector's covers. */
  json_t *no_vectors = json_pack(
      "{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}",
      "R-APL-4", "when the output becomes visible is a property of the implementation, not of "
      "any bundle (runners check that a failed apply leaves no output, but no file can show "
      "a temporary one)",
      "R-CLS-1", "which stages a reader runs depends on its class; the vectors give the "
      "answer of each stage, and a reader of any class plays the stages it runs",
      "R-SEC-12", "what a reader takes a validating bundle as evidence of is not an outcome "
      "a file can show",
      "R-VER-2", "a rule about the vectors themselves over time (make vectors-check keeps "
      "them byte for byte)",
      "R-VER-3", "a rule about the document and the vectors over time, not about a bundle",
      "R-WRT-1", "a writer requirement: a reader sees only the bundle (reserved fields are "
      "tested from the reader's side, R-RES-1)",
      "R-WRT-2", "a writer requirement (the limits are tested from the reader's side, "
      "R-LIM-1)",
      "R-WRT-3", "a writer requirement (each rule it names is tested from the reader's "
      "side)",
      "R-WRT-4", "a writer requirement: which minor version a writer needed is not in the "
      "bundle",
      "R-WRT-5", "a writer requirement about default metadata: no bundle can show a default",
      "R-WRT-6", "a writer requirement (determinism across runs and machines)");
  index_info x = {
      .schema = "schema.json",
      .format_version = "1.0",
      .generator = "tools/mkvectors.c (make vectors); seed 0x4443523176656374",
      .nomem = "allocation failure: a property of the environment; every bundle that "
               "declares huge sizes must fail with another code before allocating "
               "(size-as-allocation)",
      .no_vectors = no_vectors,
      .repaired_text = "repaired variants of the invalid vectors (mkvectors --repaired): each "
                       "must be valid; not committed"};
  index_close(&x);
  return 0;
}
