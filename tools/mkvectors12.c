/*
 * mkvectors12.c - writes the golden test vectors of format 1.2 (testvectors/v1.2/,
 * SPEC.md §12): DELTA_CLASSED, encoding 7 (§9.4), and the rule that a bundle of
 * minor 0 or 1 knows no such encoding (R-VER-4).
 *
 *   mkvectors12 OUTDIR [--repaired DIR]
 *
 * writes OUTDIR/v1.2/index.json and, beside it, the files of every vector:
 *
 *   valid/ invalid/      bundles (ID.dcr)
 *   ckpt/NAME.*          checkpoint files (safetensors, or raw .bin)
 *
 * With --repaired, also the repaired variant of every invalid vector that has one
 * (DIR/index.json, files beside it; never committed): the same vector made by the
 * same code with its faulty field at a valid value, which must be valid, as for
 * the 1.0 and 1.1 vectors (testvectors/README.md).
 *
 * Like mkvectors.c and mkvectors11.c (whose bundle builder, tools/bundlegen.h, it
 * shares), this is an independent writer of the format: class tables, rank
 * streams and range-coded values are built from the bytes up (bundlegen.h's
 * DELTA_CLASSED section: LZMA's range encoder, from §9.4's decoder), not with
 * libdcr. The data is an optimizer step computed on bit patterns, so that the
 * changes are where §9.4 expects them (small exponents, mostly 1 ULP). Each
 * invalid vector breaks one rule, with every other length, checksum, count and
 * state id as written, so that a reader reaches the check it targets.
 *
 * Everything is deterministic: data comes from one fixed-seed PRNG in program
 * order (its own seed); the only zstd frames from libzstd are those of valid
 * vectors that mix in the encodings of 1.0 (its version is in the index).
 * testvectors/v1.2 is frozen once published (SPEC.md §12, R-VER-2): add vectors
 * only at the end of main, so that the PRNG draws of those before them do not move.
 */
#define SEED 0x4443523132766563ull /* "DCR12vec" */
#define ZLEVEL 3                   /* zstd level of the valid vectors' frames */
#define VECGEN_NAME "mkvectors12"
#include "vecgen.h"
#include "bundlegen.h"
#include "deltagen.h"

/* ------------------------------------------------------------------------ */
/* The index and the files                                                   */

static const flag_def v12_flags[] = {
    {"classed", "basic", "DELTA_CLASSED chunks (SPEC.md §9.4)"},
    {"dtype", "basic", "the class field of each dtype (§9.4's table), or one class"},
    {"encoding", "basic", "DELTA_CLASSED beside the encodings of 1.0 (§9.1)"},
    {"compression", "basic", "zstd-compressed streams, or a DELTA_CLASSED chunk that claims "
                             "them (R-DCL-1)"},
    {"resize", "basic", "a resized tensor (RSIZ, §6.5): its base is the kept prefix, then "
                        "zeros"},
    {"raw", "basic", "a raw checkpoint: one U8 tensor, one class"},
    {"zero-base", "edge-case", "chunks coded against the zero base (an added or recoded "
                               "tensor, the new rows of a grown one): those elements are all "
                               "of class 0"},
    {"long-value", "edge-case", "values at the ends of §9.4's code: L = B - 1 (the largest z "
                                "of a class, 2^B - 1), the largest positive z (2^B - 2)"},
    {"busy-class", "edge-case", "a class with a thousand changes or more, whose contexts move "
                                "far from 1/2; a chunk whose every element changes"},
    {"class-crossing", "edge-case", "changes that move an element out of its class (to another "
                                    "exponent, across zero): a class is always the base's"},
    {"chunk-geometry", "edge-case", "several chunks, a short last one"},
    {"version", "edge-case", "the minor version a bundle declares (§12, R-VER-4)"},
    {"apply-to-target", "edge-case", "a bundle applied to its own target (§10.2, R-APL-5)"},
    {"multiple-errors", "edge-case", "two bad chunks: a validator that reports all names both"},
    {"class-table", "malformed-field", "the class table (R-DCL-2)"},
    {"ranks", "malformed-field", "a rank stream, read by the rules of §9.1 with n as the bound"},
    {"range-coder", "malformed-field", "the value stream (R-DCL-3)"},
    {"truncation", "known-bug-class", "a stream cut short"},
    {"wrap-64", "known-bug-class", "a value whose z needs 65 bits: 2^64 and 2^64 + 1, which "
                                   "64-bit arithmetic wraps to 0 and to a valid 1"},
    {"size-as-allocation", "known-bug-class", "a record count far beyond the bytes present "
                                              "(must not be allocated)"},
    {"base-dependent", "known-bug-class", "ranks that only the base can check (R-DCL-4): "
                                          "valid in the chunks stage, rejected when applied"},
};

/* ------------------------------------------------------------------------ */
/* Chunks                                                                    */

/* Chunk c of delta-coded entry i of B: its plan (§9.4), from its base and target. */
static cplan *plan_of(const bundle *B, size_t i, uint32_t c, size_t *n) {
  const mentry *en = &B->man.e[i];
  if (!delta_coded(en)) die("entry %zu is not delta-coded", i);
  uint64_t cs = B->man.chunk_size, at = c * cs;
  size_t bytes = (size_t)(en->t.len - at < cs ? en->t.len - at : cs);
  *n = bytes / dt_size[en->t.dtype];
  return cplan_make(en->bt->data + at, en->tt->data + at, *n, en->t.dtype);
}

/* The number of base elements of class cls in chunk c of entry i. */
static uint64_t population(const bundle *B, size_t i, uint32_t c, uint64_t cls) {
  const mentry *en = &B->man.e[i];
  unsigned e = dt_size[en->t.dtype];
  uint64_t cs = B->man.chunk_size, at = c * cs, p = 0;
  for (uint64_t x = at; x < en->t.len && x < at + cs; x += e)
    p += class_of(en->bt->data + x, en->t.dtype) == cls;
  return p;
}

static void chunk_counts(const bundle *B, size_t i, uint32_t c, size_t *m, size_t *count) {
  size_t n;
  cplan *P = plan_of(B, i, c, &n);
  *m = P->m;
  *count = cplan_count(P);
  cplan_free(P);
}

/* Opens a record of class cls at its place in the table (classes increasing). */
static crec *cplan_insert(cplan *P, uint32_t cls) {
  size_t at = 0;
  while (at < P->m && P->r[at].cls < cls) at++;
  crec *r = slot_insert(P->r, &P->m, at, sizeof *P->r);
  r->cls = cls;
  return r;
}

/* The record with the most changes. */
static size_t busiest(const cplan *P) {
  size_t best = 0;
  for (size_t j = 1; j < P->m; j++)
    if (crec_k(&P->r[j]) > crec_k(&P->r[best])) best = j;
  return best;
}

/* The Rice parameter a rank stream has: its first byte. */
static unsigned rice_of(const buf *stream) { return stream->p[0]; }

/* Bits after a rank stream's first byte: Σ (gap >> k) + 1 + k. */
static uint64_t rank_bits(const crec *r, unsigned k) {
  uint64_t bits = 0;
  for (size_t j = 0; j < crec_k(r); j++)
    bits += ((crec_at(r, j)->rank - (j ? crec_at(r, j - 1)->rank + 1 : 0)) >> k) + 1 + k;
  return bits;
}

/* ------------------------------------------------------------------------ */
/* Pairs of checkpoints                                                      */

static ckpt MB, MT;                  /* the model pair: every chunk's invalid vectors */
static bundle M;                     /* its bundle, every chunk DELTA_CLASSED */
static size_t EMB, EF64, EF8, EU8;   /* its entries */
static const choice classed = {DELTA_CLASSED, 0};

/* emb BF16 [1000, 4] (chunks of 2048 and 1952 elements: 8000 bytes in 4096-byte
 * chunks), f64 F64 [300], f8 F8_E4M3 [1500], u8 U8 [700]. */
static void pair_model(void) {
  uint64_t d[2];
  MB.file = "ckpt/model-base.safetensors";
  MB.kind = KIND_ST;
  tensor *emb = ck_add(&MB, "emb", BF16, 2, dims2(d, 1000, 4));
  fill_weights(emb, 124, 14);
  for (size_t i = 3; i < elements(emb); i += 211) /* weights that decay has driven near zero */
    set_u(emb, i, weight(emb, 104 + rbelow(6)));
  for (size_t i = 0; i < elements(emb); i += 50) set_u(emb, i, i % 100 ? 0x8000 : 0); /* ±0 */
  set_u(emb, 7, 0x7F80);  /* +inf, class 255 */
  set_u(emb, 13, 0x7FC1); /* a NaN, class 255 */
  fill_weights(ck_add(&MB, "f64", F64, 1, dims1(d, 300)), 1020, 4);
  fill_random(ck_add(&MB, "f8", F8_E4M3, 1, dims1(d, 1500)));
  fill_random(ck_add(&MB, "u8", U8, 1, dims1(d, 700)));
  ck_finish(&MB);
  ck_clone(&MT, &MB, "ckpt/model-target.safetensors");
  step(ck_get(&MB, "emb"), ck_get(&MT, "emb"), 118, 10000, 116);
  set_u(ck_get(&MT, "emb"), 13, 0x7FC2); /* another NaN payload: a change */
  step(ck_get(&MB, "f64"), ck_get(&MT, "f64"), 1059, 1500, 0);
  step(ck_get(&MB, "f8"), ck_get(&MT, "f8"), 8, 2000, 0);
  nudge(ck_get(&MB, "u8"), ck_get(&MT, "u8"), 400);
  ck_finish(&MT);
  build(&M, &MB, &MT, 4096, pol_fixed, (void *)&classed);
  EMB = entry_index(&M, "emb");
  EF64 = entry_index(&M, "f64");
  EF8 = entry_index(&M, "f8");
  EU8 = entry_index(&M, "u8");
  if (M.minor != 2) die("model: minor %u", M.minor);
}

/* The facts of the model that its vectors' descriptions give. */
typedef struct {
  size_t changed, one_ulp, crossing, signs, m0, count0;
} model_facts;

static model_facts facts_of_model(void) {
  model_facts f = {0};
  const tensor *b = ck_get(&MB, "emb"), *t = ck_get(&MT, "emb");
  for (size_t i = 0; i < elements(b); i++) {
    uint64_t ub = get_u(b, i), ut = get_u(t, i);
    if (ub == ut) continue;
    uint64_t d = (key_of(ut, 16) - key_of(ub, 16)) & 0xFFFF;
    f.changed++;
    f.one_ulp += d == 1 || d == 0xFFFF;
    f.crossing += cls_of(b, i) != cls_of(t, i);
    f.signs += ((ub ^ ut) & 0x8000) && (ub & 0x7FFF) && (ut & 0x7FFF);
  }
  chunk_counts(&M, EMB, 0, &f.m0, &f.count0);
  if (f.m0 < 8 || f.crossing < 10 || f.signs < 2 || 2 * f.one_ulp < f.changed)
    die("model: emb is not as its description says");
  return f;
}

static ckpt DB, DT; /* the dtypes pair: every class field but BF16's, and one-class dtypes */

static void pair_dtypes(void) {
  uint64_t d[1];
  DB.file = "ckpt/dtypes-base.safetensors";
  DB.kind = KIND_ST;
  fill_weights(ck_add(&DB, "c64", C64, 1, dims1(d, 300)), 123, 6);
  fill_random(ck_add(&DB, "e4m3.all", F8_E4M3, 1, dims1(d, 1024)));
  fill_weights(ck_add(&DB, "e4m3fnuz", F8_E4M3FNUZ, 1, dims1(d, 800)), 7, 6);
  fill_weights(ck_add(&DB, "e5m2", F8_E5M2, 1, dims1(d, 1024)), 13, 8);
  fill_weights(ck_add(&DB, "e5m2fnuz", F8_E5M2FNUZ, 1, dims1(d, 800)), 13, 8);
  fill_weights(ck_add(&DB, "e8m0", F8_E8M0, 1, dims1(d, 1024)), 127, 20);
  fill_weights(ck_add(&DB, "f16", F16, 1, dims1(d, 1024)), 13, 10);
  fill_weights(ck_add(&DB, "f32", F32, 1, dims1(d, 600)), 123, 10);
  fill_random(ck_add(&DB, "f4", F4, 1, dims1(d, 1200)));
  tensor *flags = ck_add(&DB, "flags", BOOL, 1, dims1(d, 2000));
  for (size_t i = 0; i < elements(flags); i++) set_u(flags, i, rng() & 1);
  fill_random(ck_add(&DB, "i16", I16, 1, dims1(d, 900)));
  fill_random(ck_add(&DB, "i32", I32, 1, dims1(d, 500)));
  ck_finish(&DB);
  ck_clone(&DT, &DB, "ckpt/dtypes-target.safetensors");
  /* S = bias + mantissa bits - u, the step 2^-u: 2^-6 for the F8 dtypes, 2^-16
   * for F16 and C64, 2^-24 for F32; e4m3.all moves every class alike. */
  static const struct {
    const char *name;
    int S;
    unsigned per10k;
  } st[] = {{"c64", 134, 3000},    {"e4m3.all", 15, 1500}, {"e4m3fnuz", 5, 10000},
            {"e5m2", 11, 10000},   {"e5m2fnuz", 12, 10000}, {"f16", 9, 10000},
            {"f32", 126, 3000}};
  for (size_t i = 0; i < sizeof st / sizeof *st; i++)
    step(ck_get(&DB, st[i].name), ck_get(&DT, st[i].name), st[i].S, st[i].per10k, 0);
  static const struct {
    const char *name;
    unsigned per10k;
  } nu[] = {{"e8m0", 300}, {"f4", 500}, {"flags", 300}, {"i16", 500}, {"i32", 800}};
  for (size_t i = 0; i < sizeof nu / sizeof *nu; i++)
    nudge(ck_get(&DB, nu[i].name), ck_get(&DT, nu[i].name), nu[i].per10k);
  ck_finish(&DT);
}

static ckpt LB, LT; /* the long values pair (long_pair) */

static ckpt RB, RT; /* the raw pair */

/* 8192 bytes in two chunks: in the first 37% move by 1 to 3, in the second all. */
static void pair_raw(void) {
  uint64_t d[1];
  RB.file = "ckpt/busy-base.bin";
  RB.kind = KIND_RAW;
  fill_random(ck_add(&RB, "raw", U8, 1, dims1(d, 8192)));
  ck_finish(&RB);
  ck_clone(&RT, &RB, "ckpt/busy-target.bin");
  tensor b = RB.t[0], t = RT.t[0];
  b.len = t.len = 4096;
  nudge(&b, &t, 3700);
  b.data += 4096, t.data += 4096;
  nudge(&b, &t, 10000);
  ck_finish(&RT);
}

static ckpt ZB, ZT; /* the zero base pair (zero_pair) */
static ckpt SB, ST; /* the resize pair (resize_pair) */

/* ------------------------------------------------------------------------ */
/* Valid vectors                                                             */

/* Each chunk in turn: DELTA_CLASSED, DELTA_SPARSE zstd, XOR_DENSE, DELTA_CLASSED,
 * OVERWRITE_SPARSE zstd. */
static choice pol_mixed(void *ctx, size_t entry, uint32_t chunk, size_t n, uint32_t count) {
  static const choice turn[] = {{DELTA_CLASSED, 0}, {DELTA_SPARSE, 1}, {XOR_DENSE, 0},
                                {DELTA_CLASSED, 0}, {OVERWRITE_SPARSE, 1}};
  (void)entry, (void)chunk, (void)n, (void)count;
  unsigned *k = ctx;
  return turn[(*k)++ % 5];
}

static void valid_vectors(void) {
  bundle B;
  char text[1024];
  model_facts f = facts_of_model();
  snprintf(text, sizeof text,
           "an optimizer step on a BF16 layer: emb BF16 [1000, 4] in a chunk of 2048 elements "
           "and a short one of 1952; %zu of its 4000 elements change, %zu of them by 1 ULP, "
           "most in the classes of small exponents; chunk 0 has %zu classes with %zu changes "
           "(class 0, the ±0 elements, a few of which leave zero by many ULPs; class 255, a "
           "NaN whose payload changes beside an unchanged +inf); %zu changes leave their "
           "class and %zu cross zero (their class is the base's); beside it F64 [300] "
           "(classes 1016 to 1020: above 255), F8_E4M3 [1500] and U8 [700] (one class); "
           "every chunk DELTA_CLASSED",
           f.changed, f.one_ulp, f.m0, f.count0, f.crossing, f.signs);
  bundle_copy(&B, &M);
  emit(VALID(.id = "valid/classed-model", .flags = "classed,dtype,class-crossing,chunk-geometry",
             .text = text, .covers = "§9.4,R-DCL-1,R-DCL-2,R-DCL-3,R-DCL-4,R-ENC-1"),
       &B, 0, &MB, &MT);

  pair_dtypes();
  build(&B, &DB, &DT, 4096, pol_fixed, (void *)&classed);
  size_t m, count;
  chunk_counts(&B, entry_index(&B, "e4m3.all"), 0, &m, &count);
  if (m != 16 || B.minor != 2) die("dtypes: e4m3.all has %zu classes, minor %u", m, B.minor);
  emit(VALID(.id = "valid/classed-dtypes", .flags = "classed,dtype",
             .text = "every class field of §9.4's table but BF16's, each chunk DELTA_CLASSED: "
                     "C64 (the real part's exponent), F8_E4M3 with every one of its 16 classes "
                     "listed (m = C), F8_E4M3FNUZ, F8_E5M2, F8_E5M2FNUZ, F8_E8M0 (the whole "
                     "byte), F16 and F32 after an optimizer step; and dtypes of one class: F4 "
                     "(packed: a byte an element), BOOL, I16, I32",
             .covers = "§9.4,§3,R-DCL-2"),
       &B, 0, &DB, &DT);

  long_pair(&LB, &LT);
  build(&B, &LB, &LT, 4096, pol_fixed, (void *)&classed);
  emit(VALID(.id = "valid/classed-long-values", .flags = "classed,dtype,long-value",
             .text = "for BF16, F16, F32, F64, C64, F8_E4M3, F8_E5M2, F8_E8M0, I64 and U8, 8 "
                     "of 16 elements move by the extremes of the code: -2^(B-1) twice in one "
                     "class (z = 2^B - 1, the largest: L = B - 1, no closing zero bit, M = "
                     "2^(B-1)), 2^(B-1) - 1 (z = 2^B - 2, the largest positive), 2^(B-2), "
                     "1 - 2^(B-1), 1, -1 and 2",
             .covers = "§9.4,R-DCL-3"),
       &B, 0, &LB, &LT);

  pair_raw();
  build(&B, &RB, &RT, 4096, pol_fixed, (void *)&classed);
  chunk_counts(&B, 0, 0, &m, &count);
  size_t m1, count1;
  chunk_counts(&B, 0, 1, &m1, &count1);
  if (m != 1 || count < 1000 || count1 != 4096) die("raw: %zu and %zu changes", count, count1);
  snprintf(text, sizeof text,
           "a raw file of 8192 bytes (U8: one class) in two chunks, DELTA_CLASSED: %zu bytes of "
           "the first move by 1 to 3, so that the one class's contexts move far from 1/2; "
           "every byte of the second changes (count = n = 4096)",
           count);
  emit(VALID(.id = "valid/classed-raw-busy", .flags = "classed,raw,busy-class",
             .text = text, .covers = "§9.4,R-DCL-2,R-DCL-3"),
       &B, 0, &RB, &RT);

  zero_pair(&ZB, &ZT);
  build(&B, &ZB, &ZT, 4096, pol_fixed, (void *)&classed);
  emit(VALID(.id = "valid/classed-zero-base", .flags = "classed,zero-base,long-value",
             .text = "DELTA_CLASSED against the zero base: an added BF16 tensor and an added "
                     "F8_E8M0 one (zeros in them are not changes), a tensor recoded from F32 "
                     "[256] to BF16 [512]: each element of theirs is of class 0 (a zero's "
                     "exponent, or the whole byte 0), so ranks are positions and the values "
                     "whole keys, long; beside them a tensor with a step",
             .covers = "§9.4,§8.1,R-DCL-4"),
       &B, 0, &ZB, &ZT);

  resize_pair(&SB, &ST);
  build_ex(&B, &SB, &ST, 4096, pol_fixed, (void *)&classed, resize_first_dim);
  if (B.s[1].type != T4("RSIZ") || B.minor != 2) die("resize: no RSIZ or minor %u", B.minor);
  emit(VALID(.id = "valid/classed-resize", .flags = "classed,resize,zero-base",
             .text = "RSIZ lists BF16 [32, 16] grown to [48, 16] and F32 [40, 8] shrunk to "
                     "[24, 8], with a step in the rows they keep, DELTA_CLASSED: the classes "
                     "are those of the resized base (§6.5), the kept rows' then zeros (class "
                     "0) under the grown rows",
             .covers = "§9.4,R-RSZ-2,R-DCL-4"),
       &B, 0, &SB, &ST);

  unsigned k = 0;
  build(&B, &MB, &MT, 4096, pol_mixed, &k);
  emit(VALID(.id = "valid/classed-mixed-encodings", .flags = "classed,encoding,compression",
             .text = "the model's chunks coded in turn DELTA_CLASSED, DELTA_SPARSE with zstd, "
                     "XOR_DENSE, DELTA_CLASSED, OVERWRITE_SPARSE with zstd",
             .covers = "§9.4,R-ENC-7,§9.1"),
       &B, 0, &MB, &MT);

  build(&B, &MB, &MT, 4096, pol_default, NULL);
  if (B.minor != 0) die("model: minor %u with XOR", B.minor);
  B.minor = 2;
  emit(VALID(.id = "valid/minor-2-without-classed", .flags = "version,encoding",
             .text = "a bundle that declares format 1.2 and has no DELTA_CLASSED chunk (XOR "
                     "encodings only), as a writer that lets chunks choose the encoding may "
                     "write it (§12)",
             .covers = "§12,R-VER-1"),
       &B, 0, &MB, &MT);

  bundle_copy(&B, &M);
  B.minor = 9;
  emit(VALID(.id = "valid/classed-minor-future", .flags = "classed,version",
             .text = "the model bundle declared as format 1.9: a 1.2 reader accepts a later "
                     "minor version, and DELTA_CLASSED is known in it",
             .covers = "R-HDR-6,R-VER-1,R-VER-4"),
       &B, 0, &MB, &MT);

  bundle_copy(&B, &M);
  emit(VALID(.id = "valid/classed-apply-to-own-target", .flags = "classed,apply-to-target",
             .text = "the model bundle applied to its own target: known by its state id, no "
                     "chunk is applied (whose ranks would name other elements there), the "
                     "output is the target",
             .covers = "R-APL-5,§10.2"),
       &B, 0, &MT, &MT);
}

/* ------------------------------------------------------------------------ */
/* Invalid vectors: one chunk of the model made bad                          */

/* How a chunk is made bad: its plan (what it codes), one of its parts, its data
 * or its record. */
enum {
  DATA_CUT,     /* the data is its first `arg` bytes */
  M_SET,        /* m is written as arg */
  TABLE_CUT,    /* the data ends one byte before the end of the class table */
  CLASS_SWAP,   /* records 1 and 2 listed the other way round (rank streams, values too) */
  CLASS_REPEAT, /* the busiest record split in two records of its class */
  CLASS_SET,    /* the last record's class is arg */
  K_ZERO,       /* a record for the first class that has no change, with k = 0 */
  K_ADD,        /* the busiest record's k as written plus arg */
  RICE_BYTE,    /* the second record's rank stream starts with the byte arg */
  RICE_K,       /* the busiest record's ranks coded with its canonical k plus arg */
  RANK_N,       /* the second record's last rank is n */
  RANK_CUT,     /* the data ends one byte before the end of the last rank stream */
  RANK_NONE,    /* the data ends with the class table */
  RANK_PAD,     /* a padding bit set after the last rank of the second record that has one */
  VAL_FIRST,    /* the value stream's first byte is 1 */
  VAL_SET,      /* the second record's first value is neg and M */
  VAL_CUT,      /* the value stream without its last byte */
  VAL_EMPTY,    /* no value stream */
  VAL_TRAIL,    /* a zero byte after the value stream */
  VAL_CODE,     /* the value stream's last byte plus 1 */
  RANK_POP,     /* the busiest record's last rank is its class's population */
  RANK_FAR,     /* the last rank of the least populated class listed is n - 1 */
  CLASS_ABSENT, /* the busiest record's last change moved to rank 0 of a class the base lacks */
};

enum { ON_EMB, ON_F8, ON_U8, ON_F64 };

typedef struct {
  const char *id, *text, *code, *stage, *flags, *covers;
  int on, how;
  int64_t arg;
  unsigned neg;
  uint64_t M;
} bad_vec;

static size_t entry_on(int on) {
  const size_t e[] = {EMB, EF8, EU8, EF64};
  return e[on];
}

/* Makes chunk 0 of the entry `v->on` of B bad as v says, unless fix (then it is
 * coded again, good); says in `what` what it changed, for the description. */
static void bad_chunk(bundle *B, const bad_vec *v, int fix, char *what, size_t wsize) {
  size_t i = entry_on(v->on), n;
  cplan *P = plan_of(B, i, 0, &n);
  unsigned shift, classes = 1u << class_width(B->man.e[i].t.dtype, &shift);
  int enc = DELTA_CLASSED, comp = 0;
  what[0] = '\0';
  size_t j = busiest(P);
  crec *r = &P->r[j];
  if (!fix) switch (v->how) {
      case CLASS_SWAP: {
        crec x = P->r[1];
        P->r[1] = P->r[2], P->r[2] = x;
        snprintf(what, wsize, "classes %u, then %u", P->r[1].cls, P->r[2].cls);
        break;
      }
      case CLASS_REPEAT: {
        size_t k = crec_k(r), half = k / 2;
        crec *second = slot_insert(P->r, &P->m, j + 1, sizeof *P->r);
        r = &P->r[j];
        second->cls = r->cls;
        bput(&second->ch, crec_at(r, half), (k - half) * sizeof(cchange));
        r->ch.n = half * sizeof(cchange);
        snprintf(what, wsize, "class %u: %zu changes, then the other %zu", r->cls, half, k - half);
        break;
      }
      case CLASS_SET:
        snprintf(what, wsize, "%u instead of %u", (unsigned)v->arg, P->r[P->m - 1].cls);
        P->r[P->m - 1].cls = (uint32_t)v->arg;
        break;
      case K_ZERO: {
        uint32_t c = 0;
        for (size_t q = 0; q < P->m && P->r[q].cls == c; q++) c++;
        cplan_insert(P, c);
        snprintf(what, wsize, "class %u", c);
        break;
      }
      case RANK_N:
        crec_at(&P->r[1], crec_k(&P->r[1]) - 1)->rank = n;
        snprintf(what, wsize, "class %u; n = %zu", P->r[1].cls, n);
        break;
      case VAL_SET:
        crec_at(&P->r[1], 0)->neg = v->neg;
        crec_at(&P->r[1], 0)->M = v->M;
        snprintf(what, wsize, "class %u", P->r[1].cls);
        break;
      case RANK_POP: {
        uint64_t pop = population(B, i, 0, r->cls);
        if (pop >= n) die("%s: class %u fills the chunk", v->id, r->cls);
        crec_at(r, crec_k(r) - 1)->rank = pop;
        snprintf(what, wsize, "class %u, %zu changes; %llu elements of the chunk's base are of "
                 "class %u: ranks 0 to %llu", r->cls, crec_k(r), (unsigned long long)pop,
                 r->cls, (unsigned long long)pop - 1);
        break;
      }
      case RANK_FAR: {
        size_t low = 0;
        for (size_t q = 1; q < P->m; q++)
          if (population(B, i, 0, P->r[q].cls) < population(B, i, 0, P->r[low].cls)) low = q;
        crec *x = &P->r[low];
        uint64_t pop = population(B, i, 0, x->cls);
        if (pop + 1 >= n) die("%s: no small class", v->id);
        crec_at(x, crec_k(x) - 1)->rank = n - 1;
        snprintf(what, wsize, "class %u, which has %llu element%s in the chunk's base; rank "
                 "%zu", x->cls, (unsigned long long)pop, pop == 1 ? "" : "s", n - 1);
        break;
      }
      case CLASS_ABSENT: {
        uint32_t c = 0, from = r->cls;
        while (population(B, i, 0, c)) c++;
        if (crec_k(r) < 2 || c >= classes) die("%s: no class to move to", v->id);
        cchange x = *crec_at(r, crec_k(r) - 1);
        r->ch.n -= sizeof x;
        x.rank = 0;
        bput(&cplan_insert(P, c)->ch, &x, sizeof x);
        snprintf(what, wsize, "class %u, which no element of the chunk's base has; moved from "
                 "class %u", c, from);
        break;
      }
    }
  uint32_t count = (uint32_t)cplan_count(P);
  cparts *X = cparts_make(P);
  if (!fix) switch (v->how) {
      case M_SET:
        put16(X->table.p, (uint64_t)v->arg);
        snprintf(what, wsize, "the chunk lists %zu", X->m);
        break;
      case K_ADD:
        put32(X->table.p + 4 + 6 * j, crec_k(r) + (uint64_t)v->arg);
        snprintf(what, wsize, "class %u: %zu changes, written as %llu", r->cls, crec_k(r),
                 (unsigned long long)(crec_k(r) + (uint64_t)v->arg));
        break;
      case RICE_BYTE:
        X->rank[1].p[0] = (uint8_t)v->arg;
        snprintf(what, wsize, "class %u", P->r[1].cls);
        break;
      case RICE_K: {
        unsigned k = rice_of(&X->rank[j]);
        if (!k && v->arg < 0) die("%s: k is 0", v->id);
        X->rank[j].n = 0;
        rank_stream(&X->rank[j], r, (int)k + (int)v->arg);
        snprintf(what, wsize, "class %u, %zu ranks: k = %u, %llu bits after it, where the "
                 "canonical k = %u takes %llu", r->cls, crec_k(r), k + (unsigned)v->arg,
                 (unsigned long long)rank_bits(r, k + (unsigned)v->arg), k,
                 (unsigned long long)rank_bits(r, k));
        break;
      }
      case RANK_PAD: {
        size_t q = 1;
        while (q < P->m && rank_bits(&P->r[q], rice_of(&X->rank[q])) % 8 == 0) q++;
        if (q == P->m) die("%s: no padding", v->id);
        X->rank[q].p[X->rank[q].n - 1] |= 0x80;
        snprintf(what, wsize, "class %u: %llu bits after k", P->r[q].cls,
                 (unsigned long long)rank_bits(&P->r[q], rice_of(&X->rank[q])));
        break;
      }
      case VAL_FIRST: X->values.p[0] = 1; break;
      case VAL_CUT: X->values.n--; break;
      case VAL_EMPTY: X->values.n = 0; break;
      case VAL_TRAIL: bu8(&X->values, 0); break;
      case VAL_CODE: {
        uint8_t *last = &X->values.p[X->values.n - 1];
        if (*last == 0xFF) die("%s: the last byte is 0xFF", v->id);
        snprintf(what, wsize, "%02X for %02X", *last + 1, *last);
        ++*last;
        break;
      }
    }
  size_t table = X->table.n, ranks_end = table;
  for (size_t q = 0; q < X->m; q++) ranks_end += X->rank[q].n;
  if (!fix && v->how == TABLE_CUT) snprintf(what, wsize, "%zu bytes of %zu", table - 1, table);
  if (!fix && v->how == RANK_CUT) snprintf(what, wsize, "class %u", P->r[P->m - 1].cls);
  buf data = {0};
  cparts_join(&data, X);
  if (!fix) switch (v->how) {
      case DATA_CUT: data.n = (size_t)v->arg; break;
      case TABLE_CUT: data.n = table - 1; break;
      case RANK_CUT: data.n = ranks_end - 1; break;
      case RANK_NONE: data.n = table; break;
    }
  if (!fix) record_fault(B, v->how, v->arg, &data, &enc, &comp, &count, what, wsize);
  set_chunk(chunk_sec(B, (uint32_t)i, 0), enc, comp, count, &data);
  bfree(&data);
  cplan_free(P);
}

static const bad_vec bad[] = {
    /* R-DCL-1, and the encoding's id (R-ENC-1, R-VER-4) */
    {"invalid/classed-compression-1", "emb/0 DELTA_CLASSED with compression 1, its data as "
     "stored: a DELTA_CLASSED chunk is never compressed", "DCR_E_ENCODING", "chunks",
     "classed,compression", "R-DCL-1", ON_EMB, COMP, 1, 0, 0},
    {"invalid/classed-zstd-frame", "emb/0 DELTA_CLASSED with compression 1, its data in a "
     "valid zstd frame (raw block): a reader must not inflate it", "DCR_E_ENCODING", "chunks",
     "classed,compression", "R-DCL-1", ON_EMB, ZSTD, 0, 0, 0},
    {"invalid/classed-compression-2", "emb/0 DELTA_CLASSED with compression 2",
     "DCR_E_ENCODING", "chunks", "classed,compression", "R-ENC-6", ON_EMB, COMP, 2, 0, 0},
    {"invalid/encoding-8", "emb/0 with encoding 8 in a bundle of format 1.2 (ids up to 7 are "
     "defined)", "DCR_E_ENCODING", "chunks", "classed,version", "R-ENC-1", ON_EMB, ENCODING, 8,
     0, 0},
    {"invalid/classed-minor-1", "the model bundle declared as format 1.1: DELTA_CLASSED, of "
     "1.2, is an unknown encoding in it", "DCR_E_ENCODING", "chunks", "classed,version",
     "R-VER-4,R-ENC-1,§12", ON_EMB, MINOR, 1, 0, 0},
    {"invalid/classed-minor-0", "the model bundle declared as format 1.0 (it uses nothing else "
     "of 1.1 or 1.2): DELTA_CLASSED is an unknown encoding in it", "DCR_E_ENCODING", "chunks",
     "classed,version", "R-VER-4,R-ENC-1,§12", ON_EMB, MINOR, 0, 0, 0},

    /* The class table (R-DCL-2) */
    {"invalid/classed-data-empty", "emb/0 DELTA_CLASSED with no data at all: no m",
     "DCR_E_ENCODING", "chunks", "classed,class-table,truncation", "R-DCL-2", ON_EMB, DATA_CUT,
     0, 0, 0},
    {"invalid/classed-data-one-byte", "emb/0 DELTA_CLASSED with one byte of data (m's first)",
     "DCR_E_ENCODING", "chunks", "classed,class-table,truncation", "R-DCL-2", ON_EMB, DATA_CUT,
     1, 0, 0},
    {"invalid/classed-m-zero", "emb/0's class table says m = 0; the records, rank streams and "
     "values follow", "DCR_E_ENCODING", "chunks", "classed,class-table", "R-DCL-2", ON_EMB,
     M_SET, 0, 0, 0},
    {"invalid/classed-m-257", "emb/0's class table says m = 257: BF16 has 256 classes",
     "DCR_E_ENCODING", "chunks", "classed,class-table", "R-DCL-2", ON_EMB, M_SET, 257, 0, 0},
    {"invalid/classed-m-65535", "emb/0's class table says m = 65535, 393210 bytes of records, "
     "far more than the chunk holds: above the 256 classes of BF16, found before any record is "
     "read", "DCR_E_ENCODING", "chunks", "classed,class-table,size-as-allocation", "R-DCL-2",
     ON_EMB, M_SET, 65535, 0, 0},
    {"invalid/classed-m-17-f8", "f8/0's class table says m = 17: F8_E4M3 has 16 classes",
     "DCR_E_ENCODING", "chunks", "classed,class-table,dtype", "R-DCL-2", ON_F8, M_SET, 17, 0,
     0},
    {"invalid/classed-m-2-one-class", "u8/0's class table says m = 2: U8 has one class",
     "DCR_E_ENCODING", "chunks", "classed,class-table,dtype", "R-DCL-2", ON_U8, M_SET, 2, 0, 0},
    {"invalid/classed-table-cut", "emb/0's data ends one byte before the end of its class "
     "table", "DCR_E_ENCODING", "chunks", "classed,class-table,truncation", "R-DCL-2", ON_EMB,
     TABLE_CUT, 0, 0, 0},
    {"invalid/classed-classes-decreasing", "emb/0's second and third records in the other "
     "order, their rank streams and values too: classes must increase", "DCR_E_ENCODING",
     "chunks", "classed,class-table", "R-DCL-2", ON_EMB, CLASS_SWAP, 0, 0, 0},
    {"invalid/classed-class-repeated", "emb/0's busiest class listed in two records, its "
     "changes split between them (each with its rank stream and values): classes must "
     "increase", "DCR_E_ENCODING", "chunks", "classed,class-table", "R-DCL-2", ON_EMB,
     CLASS_REPEAT, 0, 0, 0},
    {"invalid/classed-class-256", "emb/0's last record says class 256: BF16's are 0 to 255",
     "DCR_E_ENCODING", "chunks", "classed,class-table", "R-DCL-2", ON_EMB, CLASS_SET, 256, 0,
     0},
    {"invalid/classed-class-16-f8", "f8/0's last record says class 16: F8_E4M3's are 0 to 15",
     "DCR_E_ENCODING", "chunks", "classed,class-table,dtype", "R-DCL-2", ON_F8, CLASS_SET, 16,
     0, 0},
    {"invalid/classed-class-1-one-class", "u8/0's one record says class 1: U8 has only class 0",
     "DCR_E_ENCODING", "chunks", "classed,class-table,dtype", "R-DCL-2", ON_U8, CLASS_SET, 1, 0,
     0},
    {"invalid/classed-k-zero", "emb/0's class table lists, in its place, the first class that "
     "has no change, with k = 0 (and an empty rank stream, the byte 0)", "DCR_E_ENCODING",
     "chunks", "classed,class-table", "R-DCL-2", ON_EMB, K_ZERO, 0, 0, 0},
    {"invalid/classed-k-sum-above", "emb/0's busiest record says one change more than its rank "
     "stream and values hold: the running sum passes count at the last record",
     "DCR_E_ENCODING", "chunks", "classed,class-table", "R-DCL-2", ON_EMB, K_ADD, 1, 0, 0},
    {"invalid/classed-k-sum-below", "emb/0's busiest record says one change fewer than its "
     "rank stream and values hold: the records sum to count - 1", "DCR_E_ENCODING", "chunks",
     "classed,class-table", "R-DCL-2", ON_EMB, K_ADD, -1, 0, 0},
    {"invalid/classed-count-above", "emb/0's chunk record (and index) say count is one more "
     "than the changes its class table lists", "DCR_E_ENCODING", "chunks",
     "classed,class-table", "R-DCL-2,§9.2", ON_EMB, COUNT_ADD, 1, 0, 0},
    {"invalid/classed-count-below", "emb/0's chunk record (and index) say count is one less "
     "than the changes its class table lists: the running sum passes it at the last record",
     "DCR_E_ENCODING", "chunks", "classed,class-table", "R-DCL-2,§9.2", ON_EMB, COUNT_ADD, -1,
     0, 0},

    /* Rank streams (§9.1, with n as the bound) */
    {"invalid/classed-rank-rice-32", "emb/0's second rank stream starts with the Rice "
     "parameter 32 (at most 31)", "DCR_E_POSITION", "chunks", "classed,ranks", "R-POS-1",
     ON_EMB, RICE_BYTE, 32, 0, 0},
    {"invalid/classed-rank-k-too-small", "emb/0's busiest rank stream coded with a Rice "
     "parameter one below the canonical one", "DCR_E_POSITION", "chunks", "classed,ranks",
     "R-POS-3", ON_EMB, RICE_K, -1, 0, 0},
    {"invalid/classed-rank-k-too-large", "emb/0's busiest rank stream coded with a Rice "
     "parameter one above the canonical one", "DCR_E_POSITION", "chunks", "classed,ranks",
     "R-POS-3", ON_EMB, RICE_K, 1, 0, 0},
    {"invalid/classed-rank-n", "emb/0's second record's last rank is n, canonically coded: a "
     "rank is below n (the chunk's element count) whatever its class", "DCR_E_POSITION",
     "chunks", "classed,ranks", "R-POS-1", ON_EMB, RANK_N, 0, 0, 0},
    {"invalid/classed-rank-stream-cut", "emb/0's data ends one byte before the end of its last "
     "rank stream, inside a gap (no value stream)", "DCR_E_POSITION", "chunks",
     "classed,ranks,truncation", "R-POS-1", ON_EMB, RANK_CUT, 0, 0, 0},
    {"invalid/classed-rank-stream-empty", "emb/0's data ends with its class table: the first "
     "rank stream has no byte at all", "DCR_E_POSITION", "chunks", "classed,ranks,truncation",
     "R-POS-1", ON_EMB, RANK_NONE, 0, 0, 0},
    {"invalid/classed-rank-padding", "emb/0: the top bit of a rank stream's last byte, unused, "
     "set (the first stream from the second on whose bits leave it unused)",
     "DCR_E_POSITION", "chunks", "classed,ranks", "R-POS-1", ON_EMB, RANK_PAD, 0, 0, 0},

    /* The value stream (R-DCL-3) */
    {"invalid/classed-value-first-byte", "emb/0's value stream starts with the byte 1, not 0",
     "DCR_E_ENCODING", "chunks", "classed,range-coder", "R-DCL-3", ON_EMB, VAL_FIRST, 0, 0, 0},
    {"invalid/classed-value-z-256-f8", "f8/0's second record's first value coded as positive "
     "with L = 7 and M = 128: z = 256, past the 8 bits of F8_E4M3", "DCR_E_ENCODING", "chunks",
     "classed,range-coder,long-value", "R-DCL-3", ON_F8, VAL_SET, 0, 0, 128},
    {"invalid/classed-value-z-257-f8", "f8/0's second record's first value coded as negative "
     "with L = 7 and M = 129: z = 257", "DCR_E_ENCODING", "chunks",
     "classed,range-coder,long-value", "R-DCL-3", ON_F8, VAL_SET, 0, 1, 129},
    {"invalid/classed-value-z-2-16", "emb/0's second record's first value coded as positive "
     "with L = 15 and M = 2^15: z = 2^16, past the 16 bits of BF16", "DCR_E_ENCODING",
     "chunks", "classed,range-coder,long-value", "R-DCL-3", ON_EMB, VAL_SET, 0, 0, 1u << 15},
    {"invalid/classed-value-z-2-64", "f64/0's second record's first value coded as positive "
     "with L = 63 and M = 2^63: z = 2^64, which 64-bit arithmetic wraps to 0",
     "DCR_E_ENCODING", "chunks", "classed,range-coder,long-value,wrap-64", "R-DCL-3", ON_F64,
     VAL_SET, 0, 0, 1ull << 63},
    {"invalid/classed-value-z-2-64-plus-1", "f64/0's second record's first value coded as "
     "negative with L = 63 and M = 2^63 + 1: z = 2^64 + 1, which 64-bit arithmetic wraps to "
     "the valid 1", "DCR_E_ENCODING", "chunks", "classed,range-coder,long-value,wrap-64",
     "R-DCL-3", ON_F64, VAL_SET, 0, 1, (1ull << 63) + 1},
    {"invalid/classed-value-cut", "emb/0's value stream without its last byte: the decoder "
     "needs a byte past the end", "DCR_E_ENCODING", "chunks", "classed,range-coder,truncation",
     "R-DCL-3", ON_EMB, VAL_CUT, 0, 0, 0},
    {"invalid/classed-value-empty", "emb/0's data ends with its last rank stream: no value "
     "stream, not even its first byte", "DCR_E_ENCODING", "chunks",
     "classed,range-coder,truncation", "R-DCL-3", ON_EMB, VAL_EMPTY, 0, 0, 0},
    {"invalid/classed-value-trailing-byte", "a zero byte after emb/0's value stream: the "
     "decoder does not read it", "DCR_E_ENCODING", "chunks", "classed,range-coder", "R-DCL-3",
     ON_EMB, VAL_TRAIL, 0, 0, 0},
    {"invalid/classed-value-code-not-zero", "emb/0's value stream with 1 added to its last "
     "byte: every value decodes as before (the stream still lies in the last value's "
     "interval), every byte is read, and code ends at 1, not 0", "DCR_E_ENCODING", "chunks",
     "classed,range-coder", "R-DCL-3", ON_EMB, VAL_CODE, 0, 0, 0},

    /* What only the base can check (R-DCL-4) */
    {"invalid/classed-rank-past-class", "emb/0's busiest record's last rank is the number of "
     "its class's elements in the chunk's base (canonically coded): valid without the base, "
     "one past the class's last element with it", "DCR_E_POSITION", "apply",
     "classed,ranks,base-dependent", "R-DCL-4,§15.5", ON_EMB, RANK_POP, 0, 0, 0},
    {"invalid/classed-rank-far-past-class", "emb/0: the last rank of its least populated class "
     "listed is n - 1, which the chunks stage accepts", "DCR_E_POSITION", "apply",
     "classed,ranks,base-dependent", "R-DCL-4,§15.5", ON_EMB, RANK_FAR, 0, 0, 0},
    {"invalid/classed-class-absent", "emb/0: one change of the busiest class moved, value and "
     "all, to rank 0 of a class of its own (the table still sums to count): valid without the "
     "base, but the base has no element of that class", "DCR_E_POSITION", "apply",
     "classed,class-table,base-dependent", "R-DCL-4,§15.5", ON_EMB, CLASS_ABSENT, 0, 0, 0},
};

static void invalid_vectors(void) {
  bundle B;
  char what[512], text[1024];
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    for (int fix = 0; fix < 2; fix++) {
      bundle_copy(&B, &M);
      bad_chunk(&B, &bad[i], fix, what, sizeof what);
      if (!fix) snprintf(text, sizeof text, "%s%s%s%s", bad[i].text, what[0] ? " (" : "", what,
                         what[0] ? ")" : "");
      emit(INVALID(.id = bad[i].id, .error = bad[i].code, .stage = bad[i].stage,
                   .flags = bad[i].flags, .text = text, .covers = bad[i].covers),
           &B, fix, &MB, &MT);
    }

  /* Two bad chunks: a validator that reports all names both. */
  static const bad_vec cut = {.on = ON_EMB, .how = VAL_CUT}, pad = {.on = ON_F8, .how = RANK_PAD};
  bundle_copy(&B, &M);
  bad_chunk(&B, &cut, 0, what, sizeof what);
  bad_chunk(&B, &pad, 0, what, sizeof what);
  emit(INVALID(.id = "invalid/classed-two-bad-chunks", .error = "DCR_E_ENCODING",
               .stage = "chunks", .all_errors = "DCR_E_ENCODING,DCR_E_POSITION",
               .flags = "classed,multiple-errors,range-coder,ranks",
               .text = "emb/0's value stream without its last byte, and a padding bit set in "
                       "a rank stream of f8/0",
               .covers = "R-DCL-3,R-POS-1"),
       &B, 0, &MB, &MT);
}

/* ------------------------------------------------------------------------ */

int main(int argc, char **argv) {
  if (!minor_index_open(argc, argv, "1.2", v12_flags, sizeof v12_flags / sizeof *v12_flags))
    return 2;

  pair_model();
  valid_vectors();
  invalid_vectors();

  minor_index_close("1.2", "tools/mkvectors12.c (make vectors); seed 0x4443523132766563");
  bundle_free(&M);
  return 0;
}
