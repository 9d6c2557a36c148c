/*
 * mkvectors13.c - writes the golden test vectors of format 1.3 (testvectors/v1.3/,
 * SPEC.md §12): DELTA_BANDED, encoding 8 (§9.5), and the rule that a bundle of
 * minor 0 to 2 knows no such encoding (R-VER-4).
 *
 *   mkvectors13 OUTDIR [--repaired DIR]
 *
 * writes OUTDIR/v1.3/index.json and, beside it, the files of every vector (valid/,
 * invalid/, ckpt/), and with --repaired the repaired variant of each invalid vector
 * (DIR/index.json; never committed), as mkvectors12.c does.
 *
 * An independent writer of the format: band tables, value codes, Golomb streams
 * and value streams come from bundlegen.h's DELTA_BANDED section, written from the
 * text of SPEC.md §9.5 alone, not from libdcr (codec/banded.c, codec/golomb.c).
 * Each invalid vector breaks one rule, with every other length, checksum, count
 * and state id as written, so that a reader reaches the check it targets.
 *
 * Deterministic: one fixed-seed PRNG in program order. testvectors/v1.3 is frozen
 * once 1.3 is final (SPEC.md §12, R-VER-2): add vectors only at the end of main.
 */
#define SEED 0x4443523133766563ull /* "DCR13vec" */
#define ZLEVEL 3
#define VECGEN_NAME "mkvectors13"
#include "vecgen.h"
#include "bundlegen.h"
#include "deltagen.h"

static const flag_def v13_flags[] = {
    {"banded", "basic", "DELTA_BANDED chunks (SPEC.md §9.5)"},
    {"dtype", "basic", "the class field of each dtype (§9.4's table), or one class"},
    {"encoding", "basic", "DELTA_BANDED beside other encodings, DELTA_CLASSED included"},
    {"compression", "basic", "zstd-compressed streams, or a DELTA_BANDED chunk that claims "
                             "them (R-BND-1)"},
    {"resize", "basic", "a resized tensor (RSIZ, §6.5): its base is the kept prefix, then "
                        "zeros"},
    {"zero-base", "edge-case", "chunks coded against the zero base (an added or recoded tensor, "
                               "the new rows of a grown one): every element of class 0"},
    {"bands", "edge-case", "band tables: up to 8 bands, a band without changes between bands "
                           "with changes, inverted bands (j > 0 and j = 0)"},
    {"value-code", "edge-case", "value codes: one symbol (length 1), lengths up to 11, odd nsym"},
    {"golomb", "edge-case", "Golomb divisors 1, 2, powers of two and not, up to 2^31"},
    {"long-value", "edge-case", "values at the ends of the code: L = B - 1 (z = 2^B - 1), the "
                                "largest positive z (2^B - 2)"},
    {"version", "edge-case", "the minor version a bundle declares (§12, R-VER-4)"},
    {"apply-to-target", "edge-case", "a bundle applied to its own target (§10.2, R-APL-5)"},
    {"band-table", "malformed-field", "the band table (R-BND-2)"},
    {"code-table", "malformed-field", "a value code (R-BND-3)"},
    {"ranks", "malformed-field", "a rank stream: j (R-BND-4) or its Golomb stream (R-BND-6)"},
    {"values", "malformed-field", "the value stream (R-BND-5)"},
    {"truncation", "known-bug-class", "a stream cut short"},
    {"wrap-64", "known-bug-class", "a value whose z needs 65 bits (2^64 and 2^64 + 1, which "
                                   "64-bit arithmetic wraps to 0 and to a valid 1), a position "
                                   "that 32-bit arithmetic wraps to a valid one"},
    {"base-dependent", "known-bug-class", "ranks that only the base can check (R-BND-7): valid "
                                          "in the chunks stage, rejected when applied"},
};

/* ------------------------------------------------------------------------ */
/* Bands a chunk is coded with                                               */

/* The thresholds a vector gives an entry's chunks (others: bundlegen.h's choice). */
typedef struct {
  const char *entry;
  unsigned nb;
  uint32_t t[BANDS_MAX];
} band_choice;

static const band_choice chosen[] = {
    /* w: band 0 (classes 0..109) busy, band 1 (110..117) every element changes,
     * band 2 (118..121) sparse, band 3 (122..125) no change, band 4 (126..) mostly. */
    {"w", 5, {0, 110, 118, 122, 126}},
    {"eight", 8, {0, 100, 110, 115, 118, 120, 122, 124}},
};

static const band_choice *choice_of(const bundle *B, size_t i) {
  for (size_t k = 0; k < sizeof chosen / sizeof *chosen; k++)
    if (B->man.e[i].nlen == strlen(chosen[k].entry) &&
        !memcmp(B->man.e[i].name, chosen[k].entry, B->man.e[i].nlen))
      return &chosen[k];
  return NULL;
}

/* Chunk c of delta-coded entry i of B: its plan, in the bands chosen for it. */
static bplan *plan_of(const bundle *B, size_t i, uint32_t c, size_t *n) {
  const mentry *en = &B->man.e[i];
  const band_choice *bc = choice_of(B, i);
  uint64_t cs = B->man.chunk_size, at = c * cs;
  size_t bytes = (size_t)(en->t.len - at < cs ? en->t.len - at : cs);
  uint8_t *zeros = xmalloc(bytes);
  const uint8_t *base = delta_coded(en) ? en->bt->data + at : zeros;
  *n = bytes / dt_size[en->t.dtype];
  bplan *P = bplan_make(base, en->tt->data + at, *n, en->t.dtype, bc ? bc->nb : 0,
                        bc ? bc->t : NULL);
  free(zeros);
  return P;
}

/* Codes chunk c of entry i again from its plan P (changed by the caller). */
static void put_plan(bundle *B, size_t i, uint32_t c, const bplan *P) {
  buf data = {0};
  bparts_join(&data, bparts_make(P));
  set_chunk(chunk_sec(B, (uint32_t)i, c), DELTA_BANDED, 0, (uint32_t)bplan_count(P), &data);
  bfree(&data);
}

/* Every chunk of the entries with chosen bands coded in them. */
static void apply_choices(bundle *B) {
  for (size_t i = 0; i < B->man.n; i++) {
    if (!choice_of(B, i) || !(B->man.e[i].presence & 2)) continue;
    for (uint32_t c = 0; (uint64_t)c * B->man.chunk_size < B->man.e[i].t.len; c++) {
      size_t n;
      bplan *P = plan_of(B, i, c, &n);
      put_plan(B, i, c, P);
      bplan_free(P);
    }
  }
}

static const choice banded = {DELTA_BANDED, 0};

static void build_banded(bundle *B, const ckpt *base, const ckpt *tgt, resize_fn rs) {
  build_ex(B, base, tgt, 4096, pol_fixed, (void *)&banded, rs);
  apply_choices(B);
  if (B->minor != 3) die("%s: minor %u", tgt->file, B->minor);
}

/* ------------------------------------------------------------------------ */
/* Pairs of checkpoints                                                      */

/* Moves element i of t (from b) by d along the keys, d = ±(1 + a few). */
static void small_move(const tensor *b, tensor *t, size_t i) {
  uint64_t d = 1 + (rng() % 4 == 0 ? rbelow(20) : 0);
  move(b, t, i, rng() & 1 ? d : 0 - d);
}

/* Sets element i's class field (exponent) to cls, its other bits random. */
static void of_class(tensor *t, size_t i, uint64_t cls) { set_u(t, i, weight(t, cls)); }

static ckpt MB, MT; /* the model pair: the invalid vectors' chunks */
static bundle M;
static size_t EW, EF64, EF8, EONE, EU8;

/* w BF16 [2048] in one chunk, its classes and changes as chosen[] describes
 * (band: elements, changed per 100): 0: 100 of classes 105..109, 40; 1: 48 of
 * 112..117, all; 2: 1000 of 120..121, 5; 3: 600 of 124..125, none; 4: 300 of
 * 126..127, 70. f64 F64 [256], f8 F8_E4M3 [512]: a step, default bands. one I16
 * [256]: every element +1, a one-symbol code. u8 U8 [512]: one class. */
static void pair_model(void) {
  uint64_t d[1];
  MB.file = "ckpt/model-base.safetensors";
  MB.kind = KIND_ST;
  ck_add(&MB, "w", BF16, 1, dims1(d, 2048));
  fill_weights(ck_add(&MB, "f64", F64, 1, dims1(d, 256)), 1020, 4);
  fill_weights(ck_add(&MB, "f8", F8_E4M3, 1, dims1(d, 512)), 8, 6);
  fill_random(ck_add(&MB, "one", I16, 1, dims1(d, 256)));
  fill_random(ck_add(&MB, "u8", U8, 1, dims1(d, 512)));
  static const unsigned share[] = {100, 48, 1000, 600, 300}, lo[] = {105, 112, 120, 124, 126},
                        span[] = {5, 6, 2, 2, 2}, per100[] = {40, 100, 5, 0, 70};
  tensor *w = ck_get(&MB, "w"); /* ck_add keeps the tensors sorted: pointers move */
  unsigned left[5];
  memcpy(left, share, sizeof left);
  unsigned band_at[2048];
  for (size_t i = 0; i < 2048; i++) {
    uint64_t r = rbelow(2048 - i), b = 0;
    while (r >= left[b]) r -= left[b++];
    left[b]--;
    band_at[i] = (unsigned)b;
    of_class(w, i, lo[b] + rbelow(span[b]));
  }
  ck_finish(&MB);
  ck_clone(&MT, &MB, "ckpt/model-target.safetensors");
  tensor *wt = ck_get(&MT, "w");
  for (size_t i = 0; i < 2048; i++)
    if (rbelow(100) < per100[band_at[i]]) small_move(w, wt, i);
  step(ck_get(&MB, "f64"), ck_get(&MT, "f64"), 1059, 1500, 0);
  step(ck_get(&MB, "f8"), ck_get(&MT, "f8"), 8, 3000, 0);
  const tensor *ob = ck_get(&MB, "one");
  for (size_t i = 0; i < 256; i++) move(ob, ck_get(&MT, "one"), i, 1);
  nudge(ck_get(&MB, "u8"), ck_get(&MT, "u8"), 2000);
  ck_finish(&MT);
  build_banded(&M, &MB, &MT, NULL);
  EW = entry_index(&M, "w");
  EF64 = entry_index(&M, "f64");
  EF8 = entry_index(&M, "f8");
  EONE = entry_index(&M, "one");
  EU8 = entry_index(&M, "u8");
  size_t n;
  bplan *P = plan_of(&M, EW, 0, &n);
  if (P->nb != 5 || !bband_k(&P->b[0]) || !P->b[1].inverted || bband_k(&P->b[1]) != P->b[1].pop ||
      P->b[2].inverted || bband_k(&P->b[3]) || !P->b[4].inverted || bband_k(&P->b[4]) == P->b[4].pop)
    die("model: w's bands are not as described");
  bplan_free(P);
  P = plan_of(&M, EONE, 0, &n);
  if (P->nb != 1 || P->b[0].nsym != 1 || P->b[0].len[0] != 1) die("model: one's code");
  bplan_free(P);
}

static ckpt DB, DT; /* the dtypes pair: every class field */

static void pair_dtypes(void) {
  uint64_t d[1];
  DB.file = "ckpt/dtypes-base.safetensors";
  DB.kind = KIND_ST;
  static const struct {
    const char *name;
    int dtype, top, spread, S;
    unsigned per10k;
  } st[] = {{"bf16", BF16, 124, 12, 118, 3000},  {"c64", C64, 123, 6, 134, 3000},
            {"e4m3", F8_E4M3, 8, 6, 8, 3000},      {"e4m3fnuz", F8_E4M3FNUZ, 7, 6, 5, 5000},
            {"e5m2", F8_E5M2, 13, 8, 11, 5000},    {"e5m2fnuz", F8_E5M2FNUZ, 13, 8, 12, 5000},
            {"f16", F16, 13, 10, 9, 5000},         {"f32", F32, 123, 10, 126, 3000},
            {"f64", F64, 1020, 6, 1059, 3000}};
  for (size_t i = 0; i < sizeof st / sizeof *st; i++)
    fill_weights(ck_add(&DB, st[i].name, st[i].dtype, 1, dims1(d, 512)), (unsigned)st[i].top,
                 (unsigned)st[i].spread);
  fill_weights(ck_add(&DB, "e8m0", F8_E8M0, 1, dims1(d, 512)), 127, 20);
  fill_random(ck_add(&DB, "i32", I32, 1, dims1(d, 300)));
  ck_finish(&DB);
  ck_clone(&DT, &DB, "ckpt/dtypes-target.safetensors");
  for (size_t i = 0; i < sizeof st / sizeof *st; i++)
    step(ck_get(&DB, st[i].name), ck_get(&DT, st[i].name), st[i].S, st[i].per10k, 0);
  nudge(ck_get(&DB, "e8m0"), ck_get(&DT, "e8m0"), 1000);
  nudge(ck_get(&DB, "i32"), ck_get(&DT, "i32"), 1000);
  ck_finish(&DT);
}

static ckpt EB, ET; /* eight bands */

/* eight BF16 [1024]: classes 95..125, a step; bands at chosen[]'s thresholds,
 * band 5 (classes 120..121) left without changes. */
static void pair_eight(void) {
  uint64_t d[1];
  EB.file = "ckpt/eight-base.safetensors";
  EB.kind = KIND_ST;
  tensor *e = ck_add(&EB, "eight", BF16, 1, dims1(d, 1024));
  for (size_t i = 0; i < 1024; i++) of_class(e, i, 95 + rbelow(31));
  ck_finish(&EB);
  ck_clone(&ET, &EB, "ckpt/eight-target.safetensors");
  tensor *t = ck_get(&ET, "eight");
  for (size_t i = 0; i < 1024; i++) {
    uint64_t c = cls_of(e, i);
    if ((c < 120 || c > 121) && rbelow(100) < 30) small_move(e, t, i);
  }
  ck_finish(&ET);
}

/* A move (mod 2^64) whose value has symbol s = 2L + neg (§9.5): z = 2M - neg with
 * M = 2^L + x, x random; the move is unzigzag(z). */
static uint64_t move_of_symbol(unsigned s) {
  unsigned L = s / 2, neg = s & 1;
  uint64_t z = 2 * (((uint64_t)1 << L) + (L ? rbelow((uint64_t)1 << L) : 0)) - neg;
  return z & 1 ? ~(z >> 1) : z >> 1;
}

static ckpt CB, CT; /* value codes */

/* fib I16 [1024]: 376 elements move with 12 symbols in Fibonacci counts (1, 1,
 * 2, ..., 144: a Huffman code of lengths up to 11); fib13 I16 [1024]: 609 with 13
 * (lengths up to 12, so the counts are halved and the code built again); odd U8
 * [512]: symbols 0 to 4 (nsym = 5, odd). */
static void pair_codes(void) {
  uint64_t d[1];
  CB.file = "ckpt/codes-base.safetensors";
  CB.kind = KIND_ST;
  fill_random(ck_add(&CB, "fib", I16, 1, dims1(d, 1024)));
  fill_random(ck_add(&CB, "fib13", I16, 1, dims1(d, 1024)));
  fill_random(ck_add(&CB, "odd", U8, 1, dims1(d, 512)));
  ck_finish(&CB);
  ck_clone(&CT, &CB, "ckpt/codes-target.safetensors");
  static const char *const names[] = {"fib", "fib13"};
  for (unsigned k = 0; k < 2; k++) {
    const tensor *b = ck_get(&CB, names[k]);
    tensor *t = ck_get(&CT, names[k]);
    unsigned syms = 12 + k;
    uint64_t f0 = 1, f1 = 1;
    size_t i = 0;
    for (unsigned s = 0; s < syms; s++) {
      for (uint64_t c = 0; c < f0; c++, i++) move(b, t, i, move_of_symbol(s) & 0xFFFF);
      uint64_t f2 = f0 + f1;
      f0 = f1, f1 = f2;
    }
  }
  const tensor *ob = ck_get(&CB, "odd");
  for (size_t i = 0; i < 512; i += 3) {
    move(ob, ck_get(&CT, "odd"), i, move_of_symbol((unsigned)rbelow(5)) & 0xFF);
  }
  ck_finish(&CT);
}

static ckpt GB, GT; /* Golomb divisors */

/* g1 .. g2p31 U8 [1024], a fifth of each moved by 1 to 3: one band each. */
static const char *const golomb_names[] = {"g1", "g2", "g2p31", "g7", "g1000", "gbig"};
static const uint64_t golomb_divisors[] = {1, 2, (uint64_t)1 << 31, 7, 1000, 0x7FFFFFFF};

static void pair_golomb(void) {
  uint64_t d[1];
  GB.file = "ckpt/golomb-base.safetensors";
  GB.kind = KIND_ST;
  for (size_t k = 0; k < 6; k++) fill_random(ck_add(&GB, golomb_names[k], U8, 1, dims1(d, 1024)));
  ck_finish(&GB);
  ck_clone(&GT, &GB, "ckpt/golomb-target.safetensors");
  for (size_t k = 0; k < 6; k++) nudge(ck_get(&GB, golomb_names[k]), ck_get(&GT, golomb_names[k]), 2000);
  ck_finish(&GT);
}

static ckpt LB, LT; /* long values (long_pair) */
static ckpt ZB, ZT; /* the zero base (zero_pair) */
static ckpt SB, ST; /* a resize (resize_pair) */

/* ------------------------------------------------------------------------ */
/* Valid vectors                                                             */

/* The longest code length of chunk 0 of entry `name`'s bands, and its nsym. */
static unsigned longest_code(const bundle *B, const char *name, unsigned *nsym) {
  size_t n;
  bplan *P = plan_of(B, entry_index(B, name), 0, &n);
  unsigned most = 0;
  for (unsigned s = 0; s < P->b[0].nsym; s++)
    if (P->b[0].len[s] > most) most = P->b[0].len[s];
  *nsym = P->b[0].nsym;
  bplan_free(P);
  return most;
}

/* Each chunk in turn: DELTA_BANDED, DELTA_CLASSED, DELTA_SPARSE zstd, XOR_DENSE. */
static choice pol_mixed(void *ctx, size_t entry, uint32_t chunk, size_t n, uint32_t count) {
  static const choice turn[] = {{DELTA_BANDED, 0}, {DELTA_CLASSED, 0}, {DELTA_SPARSE, 1},
                                {XOR_DENSE, 0}};
  (void)entry, (void)chunk, (void)n, (void)count;
  unsigned *k = ctx;
  return turn[(*k)++ % 4];
}

static void valid_vectors(void) {
  bundle B;
  char text[1024];

  bundle_copy(&B, &M);
  emit(VALID(.id = "valid/banded-model", .flags = "banded,bands,value-code,dtype",
             .text = "w BF16 [2048] in 5 bands (thresholds 110, 118, 122, 126): band 0 with "
                     "about 40% of its elements changed, listed by rank, band 1 inverted with "
                     "every element changed (j = 0), band 2 sparse, band 3 "
                     "without changes between them, band 4 inverted with j > 0; beside it F64 "
                     "[256] and F8_E4M3 [512] after a step, I16 [256] whose every element moves "
                     "by +1 (one band, a one-symbol code: nsym = 1, length 1), U8 [512] (one "
                     "class, nb = 1)",
             .covers = "§9.5,R-BND-1,R-BND-2,R-BND-3,R-BND-4,R-BND-5,R-BND-6,R-BND-7,R-ENC-1"),
       &B, 0, &MB, &MT);

  pair_dtypes();
  build_banded(&B, &DB, &DT, NULL);
  emit(VALID(.id = "valid/banded-dtypes", .flags = "banded,dtype",
             .text = "every class field of §9.4's table, DELTA_BANDED in the bands this writer "
                     "chooses (up to 4): BF16, C64 (the real part's exponent), F8_E4M3, "
                     "F8_E4M3FNUZ, F8_E5M2, F8_E5M2FNUZ, F16, F32, F64 (11-bit classes) after a "
                     "step, F8_E8M0 (the whole byte) and I32 (one class)",
             .covers = "§9.5,§9.4,R-BND-2"),
       &B, 0, &DB, &DT);

  pair_eight();
  build_banded(&B, &EB, &ET, NULL);
  emit(VALID(.id = "valid/banded-eight-bands", .flags = "banded,bands",
             .text = "BF16 [1024] of classes 95 to 125 in 8 bands, the most (thresholds 100, "
                     "110, 115, 118, 120, 122, 124); band 5 (classes 120, 121) has no change, "
                     "between bands that have",
             .covers = "§9.5,R-BND-2"),
       &B, 0, &EB, &ET);

  pair_codes();
  build_banded(&B, &CB, &CT, NULL);
  unsigned nfib, nfib13, nodd;
  unsigned lfib = longest_code(&B, "fib", &nfib), lfib13 = longest_code(&B, "fib13", &nfib13);
  longest_code(&B, "odd", &nodd);
  if (lfib != 11 || nfib != 12 || lfib13 > 11 || nfib13 != 13 || nodd % 2 == 0)
    die("codes: %u/%u %u/%u %u", lfib, nfib, lfib13, nfib13, nodd);
  snprintf(text, sizeof text,
           "value codes: I16 [1024] with 12 symbols in Fibonacci counts (1, 1, 2, ..., 144): "
           "Huffman lengths 1 to 11, the longest allowed; I16 [1024] with 13 (Huffman would "
           "need 12: the writer halves the counts, longest %u); U8 [512] with nsym = %u (odd: "
           "the last byte's high half 0)",
           lfib13, nodd);
  emit(VALID(.id = "valid/banded-code-lengths", .flags = "banded,value-code",
             .text = text, .covers = "§9.5,R-BND-3,R-BND-5"),
       &B, 0, &CB, &CT);

  pair_golomb();
  build_banded(&B, &GB, &GT, NULL);
  for (size_t k = 0; k < 6; k++) {
    size_t n, i = entry_index(&B, golomb_names[k]);
    bplan *P = plan_of(&B, i, 0, &n);
    P->b[0].m = golomb_divisors[k];
    put_plan(&B, i, 0, P);
    bplan_free(P);
  }
  emit(VALID(.id = "valid/banded-golomb-divisors", .flags = "banded,golomb",
             .text = "six U8 [1024] tensors, a fifth of each changed, each one band whose rank "
                     "stream has the divisor m = 1 (no remainder bits), 2 (b = 1: only the "
                     "bit y), 2^31 (the largest: b = 31, u = 0), 7 (u = 1: remainders of 2 "
                     "and of 3 bits), 1000 and 2^31 - 1 (u = 1, 30 or 31 bits), set whatever "
                     "divisor a writer would choose: m is not canonical, any is valid",
             .covers = "§9.5,R-BND-6"),
       &B, 0, &GB, &GT);

  long_pair(&LB, &LT);
  build_banded(&B, &LB, &LT, NULL);
  emit(VALID(.id = "valid/banded-long-values", .flags = "banded,dtype,long-value",
             .text = "for BF16, F16, F32, F64, C64, F8_E4M3, F8_E5M2, F8_E8M0, I64 and U8, 8 of "
                     "16 elements move by the extremes of the code: -2^(B-1) twice (z = 2^B - "
                     "1, the largest: symbol 2B - 1, L = B - 1), 2^(B-1) - 1 (z = 2^B - 2), "
                     "2^(B-2), 1 - 2^(B-1), 1, -1 and 2 (nsym = 2B)",
             .covers = "§9.5,R-BND-3,R-BND-5"),
       &B, 0, &LB, &LT);

  zero_pair(&ZB, &ZT);
  build_banded(&B, &ZB, &ZT, NULL);
  emit(VALID(.id = "valid/banded-zero-base", .flags = "banded,zero-base,long-value",
             .text = "DELTA_BANDED against the zero base: an added BF16 tensor and an added "
                     "F8_E8M0 one (their zeros are not changes), one recoded from F32 [256] to "
                     "BF16 [512]: every element of class 0, in the first band, so ranks are "
                     "positions and values whole keys; beside them a tensor with a step",
             .covers = "§9.5,§8.1,R-BND-7"),
       &B, 0, &ZB, &ZT);

  resize_pair(&SB, &ST);
  build_banded(&B, &SB, &ST, resize_first_dim);
  if (B.s[1].type != T4("RSIZ")) die("resize: no RSIZ");
  emit(VALID(.id = "valid/banded-resize", .flags = "banded,resize,zero-base",
             .text = "RSIZ lists BF16 [32, 16] grown to [48, 16] and F32 [40, 8] shrunk to "
                     "[24, 8], with a step in the rows they keep, DELTA_BANDED: the classes are "
                     "those of the resized base (§6.5), the kept rows' then zeros (class 0) "
                     "under the new rows",
             .covers = "§9.5,R-RSZ-2,R-BND-7"),
       &B, 0, &SB, &ST);

  unsigned k = 0;
  build(&B, &MB, &MT, 4096, pol_mixed, &k);
  if (B.minor != 3) die("mixed: minor %u", B.minor);
  emit(VALID(.id = "valid/banded-mixed-encodings", .flags = "banded,encoding,compression",
             .text = "the model's chunks coded in turn DELTA_BANDED, DELTA_CLASSED, DELTA_SPARSE "
                     "with zstd, XOR_DENSE: a 1.3 reader reads encodings 7 and 8 in one bundle",
             .covers = "§9.5,R-ENC-7,§12"),
       &B, 0, &MB, &MT);

  build(&B, &MB, &MT, 4096, pol_default, NULL);
  if (B.minor != 0) die("model: minor %u with XOR", B.minor);
  B.minor = 3;
  emit(VALID(.id = "valid/minor-3-without-banded", .flags = "version,encoding",
             .text = "a bundle that declares format 1.3 and uses nothing of 1.3 (XOR encodings "
                     "only), as the reference writer may write it (§12)",
             .covers = "§12,R-VER-1"),
       &B, 0, &MB, &MT);

  bundle_copy(&B, &M);
  B.minor = 9;
  emit(VALID(.id = "valid/banded-minor-future", .flags = "banded,version",
             .text = "the model bundle declared as format 1.9: a later minor version, in which "
                     "DELTA_BANDED is known",
             .covers = "R-HDR-6,R-VER-1,R-VER-4"),
       &B, 0, &MB, &MT);

  bundle_copy(&B, &M);
  emit(VALID(.id = "valid/banded-apply-to-own-target", .flags = "banded,apply-to-target",
             .text = "the model bundle applied to its own target: known by its state id, no "
                     "chunk is applied, the output is the target",
             .covers = "R-APL-5,§10.2"),
       &B, 0, &MT, &MT);
}

/* ------------------------------------------------------------------------ */
/* Invalid vectors: one chunk of the model made bad                          */

enum {
  /* the plan, before its bytes */
  LEN_BIG,    /* the band's first symbol with a code gets length 12 */
  LEN_OVER,   /* a longest symbol's length one shorter: over-subscribed */
  LEN_UNDER,  /* a shortest symbol's length one longer: incomplete */
  LEN_SET,    /* the band's last symbol gets length arg */
  NSYM_PLUS,  /* one symbol more, of length 0 */
  VAL_SET,    /* the band's first value is neg and M (its code built again) */
  /* the parts */
  NB_SET,     /* the table's nb byte is arg */
  T_SET,      /* threshold `band` (1..nb-1) is arg */
  T_PREV,     /* threshold `band` is the previous one */
  K_ADD,      /* the band's k plus arg */
  K_SET,      /* the band's k is arg */
  INV_OR,     /* the inverted byte | arg */
  NSYM_SET,   /* the band's nsym byte is arg */
  PAD_NIBBLE, /* the band's code's last high half 1 */
  J_SET,      /* the inverted band's j is n - k + arg */
  M_SET,      /* the band's divisor is arg */
  RANK_LAST,  /* the band's last listed rank is n (arg 0), its population (1), k + j (2) */
  KEPT_EXTRA, /* the inverted band lists one more kept rank: its population */
  RANK_WRAP,  /* the band's ranks with m = 2^31, its first gap 2^32 more */
  RANK_PAD,   /* the band's rank stream's last byte's top bit set (unused) */
  VAL_FIRST1, /* the value stream's first bit 1 */
  VAL_CUT,    /* the value stream without its last byte */
  VAL_TRAIL,  /* a zero byte after the value stream */
  VAL_PAD,    /* the value stream's last byte's top bit set (unused) */
  /* the data */
  CUT,        /* the data is its first arg bytes */
  CUT_TABLE,  /* the data ends one byte before the end of the band table */
  CUT_LENS,   /* the data ends one byte before the end of the band's code */
  CUT_RANK,   /* the data ends arg bytes into the band's rank stream */
  CUT_RANKS,  /* the data ends one byte before the end of the last rank stream */
};

enum { ON_W, ON_F64, ON_F8, ON_ONE, ON_U8, ON_CODES_ODD };

typedef struct {
  const char *id, *text, *code, *stage, *flags, *covers;
  int on, how;
  unsigned band;
  int64_t arg;
  unsigned neg;
  uint64_t M;
} bad_vec;

static size_t entry_on(int on) {
  const size_t e[] = {EW, EF64, EF8, EONE, EU8};
  return e[on];
}

/* The band's listed ranks again, the last one (or one more) as v says. */
static void ranks_again(buf *out, const bband *b, const bad_vec *v, size_t n, char *what,
                        size_t wsize) {
  size_t count;
  uint64_t *r = band_ranks(b, &count);
  uint64_t *more = xmalloc((count + 1) * sizeof *more);
  memcpy(more, r, count * sizeof *r);
  uint64_t m = b->m;
  if (v->how == RANK_WRAP) {
    m = (uint64_t)1 << 31;
    snprintf(what, wsize, "band %u: its first rank %llu, coded as q = 2, r = %llu", v->band,
             (unsigned long long)more[0], (unsigned long long)more[0]);
    for (size_t j = 0; j < count; j++) more[j] += (uint64_t)1 << 32;
  } else if (v->how == KEPT_EXTRA) {
    more[count++] = b->pop;
    snprintf(what, wsize, "band %u: %zu changes, %llu elements in the base; j = %zu, the last "
             "kept rank %llu", v->band, bband_k(b), (unsigned long long)b->pop, count,
             (unsigned long long)b->pop);
  } else {
    uint64_t to = v->arg == 0 ? n : v->arg == 1 ? b->pop : b->pop; /* k + j = pop */
    more[count - 1] = to;
    snprintf(what, wsize, "band %u, %llu elements in the base, n = %zu; the last rank %llu",
             v->band, (unsigned long long)b->pop, n, (unsigned long long)to);
  }
  out->n = 0;
  if (b->inverted) bu32(out, count);
  golomb(out, m, more, count);
  free(r);
  free(more);
}

/* Bits after the divisor of a band's rank stream. */
static uint64_t rank_bits(const bband *b) {
  size_t count;
  uint64_t *r = band_ranks(b, &count), bits = 0;
  for (size_t j = 0; j < count; j++) bits += golomb_gap(NULL, b->m, r[j] - (j ? r[j - 1] + 1 : 0));
  free(r);
  return bits;
}

static void bad_chunk(bundle *B, const bad_vec *v, int fix, char *what, size_t wsize) {
  size_t i = entry_on(v->on), n;
  bplan *P = plan_of(B, i, 0, &n);
  bband *b = &P->b[v->band];
  int enc = DELTA_BANDED, comp = 0;
  what[0] = '\0';
  if (!fix) switch (v->how) {
      case LEN_BIG:
      case LEN_OVER:
      case LEN_UNDER: {
        unsigned at = 0;
        for (unsigned s = 0; s < b->nsym; s++) {
          if (!b->len[s]) continue;
          if (!b->len[at] || (v->how == LEN_OVER && b->len[s] >= b->len[at]) ||
              (v->how == LEN_UNDER && b->len[s] < b->len[at]))
            at = s;
        }
        unsigned was = b->len[at];
        b->len[at] = (uint8_t)(v->how == LEN_BIG ? 12 : v->how == LEN_OVER ? was - 1 : was + 1);
        if (b->len[at] > 11 && v->how != LEN_BIG) die("%s: length %u", v->id, b->len[at]);
        snprintf(what, wsize, "band %u, symbol %u: length %u for %u", v->band, at, b->len[at], was);
        break;
      }
      case LEN_SET:
        b->len[b->nsym - 1] = (uint8_t)v->arg;
        break;
      case NSYM_PLUS:
        b->nsym++;
        snprintf(what, wsize, "band %u: nsym = %u", v->band, b->nsym);
        break;
      case VAL_SET:
        bband_at(b, 0)->neg = v->neg;
        bband_at(b, 0)->M = v->M;
        band_lengths(b);
        break;
    }
  uint32_t count = (uint32_t)bplan_count(P);
  bparts *X = bparts_make(P);
  if (!fix) switch (v->how) {
      case NB_SET: X->table.p[0] = (uint8_t)v->arg; break;
      case T_SET:
        snprintf(what, wsize, "%u for %u", (unsigned)v->arg, P->t[v->band]);
        put16(X->table.p + 1 + 2 * (v->band - 1), (uint64_t)v->arg);
        break;
      case T_PREV:
        snprintf(what, wsize, "thresholds %u, %u", P->t[v->band - 1], P->t[v->band - 1]);
        put16(X->table.p + 1 + 2 * (v->band - 1), P->t[v->band - 1]);
        break;
      case K_ADD:
        put32(X->table.p + 1 + 2 * (P->nb - 1) + 4 * v->band, bband_k(b) + (uint64_t)v->arg);
        snprintf(what, wsize, "band %u: %zu changes, written as %llu", v->band, bband_k(b),
                 (unsigned long long)(bband_k(b) + (uint64_t)v->arg));
        break;
      case K_SET:
        put32(X->table.p + 1 + 2 * (P->nb - 1) + 4 * v->band, (uint64_t)v->arg);
        snprintf(what, wsize, "band %u: %zu changes, written as %llu", v->band, bband_k(b),
                 (unsigned long long)v->arg);
        break;
      case INV_OR:
        snprintf(what, wsize, "%u for %u", X->table.p[X->table.n - 1] | (unsigned)v->arg,
                 X->table.p[X->table.n - 1]);
        X->table.p[X->table.n - 1] |= (uint8_t)v->arg;
        break;
      case NSYM_SET: X->code[v->band].p[0] = (uint8_t)v->arg; break;
      case PAD_NIBBLE:
        if (b->nsym % 2 == 0) die("%s: nsym %u is even", v->id, b->nsym);
        X->code[v->band].p[X->code[v->band].n - 1] |= 0x10;
        snprintf(what, wsize, "band %u: nsym = %u", v->band, b->nsym);
        break;
      case J_SET:
        if (!b->inverted) die("%s: band %u is not inverted", v->id, v->band);
        put32(X->rank[v->band].p, n - bband_k(b) + (uint64_t)v->arg);
        snprintf(what, wsize, "band %u: k = %zu, n = %zu, j = %llu", v->band, bband_k(b), n,
                 (unsigned long long)(n - bband_k(b) + (uint64_t)v->arg));
        break;
      case M_SET: put32(X->rank[v->band].p + (b->inverted ? 4 : 0), (uint64_t)v->arg); break;
      case RANK_LAST:
      case KEPT_EXTRA:
      case RANK_WRAP: ranks_again(&X->rank[v->band], b, v, n, what, wsize); break;
      case RANK_PAD: {
        uint64_t bits = rank_bits(b);
        if (bits % 8 == 0) die("%s: no unused bit", v->id);
        X->rank[v->band].p[X->rank[v->band].n - 1] |= 0x80;
        snprintf(what, wsize, "band %u: %llu bits after m", v->band, (unsigned long long)bits);
        break;
      }
      case VAL_FIRST1:
        if (X->values.p[0] & 1) die("%s: the first bit is 1", v->id);
        X->values.p[0] |= 1;
        break;
      case VAL_CUT: X->values.n--; break;
      case VAL_TRAIL: bu8(&X->values, 0); break;
      case VAL_PAD:
        if (X->values.p[X->values.n - 1] & 0x80) die("%s: no unused bit", v->id);
        X->values.p[X->values.n - 1] |= 0x80;
        break;
    }
  size_t table = X->table.n, codes = table, ranks = table, rank_at = 0;
  for (unsigned q = 0; q < X->nb; q++) codes += X->code[q].n;
  ranks = codes;
  for (unsigned q = 0; q < X->nb; q++) {
    if (q == v->band) rank_at = ranks;
    ranks += X->rank[q].n;
  }
  size_t lens_end = table;
  for (unsigned q = 0; q <= v->band && q < X->nb; q++) lens_end += X->code[q].n;
  buf data = {0};
  bparts_join(&data, X);
  if (!fix) switch (v->how) {
      case CUT: data.n = (size_t)v->arg; break;
      case CUT_TABLE:
        data.n = table - 1;
        snprintf(what, wsize, "%zu bytes of %zu", table - 1, table);
        break;
      case CUT_LENS: data.n = lens_end - 1; break;
      case CUT_RANK: data.n = rank_at + (size_t)v->arg; break;
      case CUT_RANKS: data.n = ranks - 1; break;
    }
  if (!fix) record_fault(B, v->how, v->arg, &data, &enc, &comp, &count, what, wsize);
  set_chunk(chunk_sec(B, (uint32_t)i, 0), enc, comp, count, &data);
  bfree(&data);
  bplan_free(P);
}

#define E_ENC "DCR_E_ENCODING"
#define E_POS "DCR_E_POSITION"
static const bad_vec bad[] = {
    /* R-BND-1, and the encoding's id (R-ENC-1, R-VER-4) */
    {"invalid/banded-compression-1", "w/0 DELTA_BANDED with compression 1, its data as stored",
     E_ENC, "chunks", "banded,compression", "R-BND-1", ON_W, COMP, 0, 1, 0, 0},
    {"invalid/banded-zstd-frame", "w/0 DELTA_BANDED with compression 1, its data in a valid "
     "zstd frame (raw block): a reader must not inflate it", E_ENC, "chunks",
     "banded,compression", "R-BND-1", ON_W, ZSTD, 0, 0, 0, 0},
    {"invalid/banded-compression-2", "w/0 DELTA_BANDED with compression 2", E_ENC, "chunks",
     "banded,compression", "R-ENC-6", ON_W, COMP, 0, 2, 0, 0},
    {"invalid/encoding-9", "w/0 with encoding 9 in a bundle of format 1.3 (ids up to 8 are "
     "defined)", E_ENC, "chunks", "banded,version", "R-ENC-1", ON_W, ENCODING, 0, 9, 0, 0},
    {"invalid/banded-minor-2", "the model bundle declared as format 1.2: DELTA_BANDED, of 1.3, "
     "is an unknown encoding in it", E_ENC, "chunks", "banded,version", "R-VER-4,R-ENC-1,§12",
     ON_W, MINOR, 0, 2, 0, 0},

    /* The band table (R-BND-2), its clauses in order */
    {"invalid/banded-data-empty", "w/0 DELTA_BANDED with no data at all: no nb", E_ENC,
     "chunks", "banded,band-table,truncation", "R-BND-2", ON_W, CUT, 0, 0, 0, 0},
    {"invalid/banded-nb-0", "w/0's band table says nb = 0", E_ENC, "chunks",
     "banded,band-table", "R-BND-2", ON_W, NB_SET, 0, 0, 0, 0},
    {"invalid/banded-nb-9", "w/0's band table says nb = 9: at most 8", E_ENC, "chunks",
     "banded,band-table", "R-BND-2", ON_W, NB_SET, 0, 9, 0, 0},
    {"invalid/banded-nb-above-classes", "u8/0's band table says nb = 2: U8 has one class (C = "
     "1)", E_ENC, "chunks", "banded,band-table,dtype", "R-BND-2", ON_U8, NB_SET, 0, 2, 0, 0},
    {"invalid/banded-table-cut", "w/0's data ends one byte before the end of its band table "
     "(in the inverted byte)", E_ENC, "chunks", "banded,band-table,truncation", "R-BND-2", ON_W,
     CUT_TABLE, 0, 0, 0, 0},
    {"invalid/banded-threshold-0", "w/0's first threshold is 0: not above t0 = 0", E_ENC,
     "chunks", "banded,band-table", "R-BND-2", ON_W, T_SET, 1, 0, 0, 0},
    {"invalid/banded-threshold-repeated", "w/0's third threshold equals its second", E_ENC,
     "chunks", "banded,band-table", "R-BND-2", ON_W, T_PREV, 3, 0, 0, 0},
    {"invalid/banded-threshold-256", "w/0's last threshold is 256: BF16 has 256 classes (a "
     "threshold is below C)", E_ENC, "chunks", "banded,band-table", "R-BND-2", ON_W, T_SET, 4,
     256, 0, 0},
    {"invalid/banded-k-sum-above", "w/0's band 4 says one change more than it codes: the "
     "running sum passes count at the last band", E_ENC, "chunks", "banded,band-table",
     "R-BND-2", ON_W, K_ADD, 4, 1, 0, 0},
    {"invalid/banded-k-first-above", "w/0's band 0 says 0xFFFFFFFF changes: the running sum "
     "passes count at the first band (a reader must not allocate them)", E_ENC, "chunks",
     "banded,band-table", "R-BND-2", ON_W, K_SET, 0, 0xFFFFFFFFll, 0, 0},
    {"invalid/banded-k-sum-below", "w/0's band 2 says one change fewer than it codes: the "
     "bands sum to count - 1", E_ENC, "chunks", "banded,band-table", "R-BND-2", ON_W, K_ADD, 2,
     -1, 0, 0},
    {"invalid/banded-count-above", "w/0's chunk record (and index) say count is one more than "
     "its band table lists", E_ENC, "chunks", "banded,band-table", "R-BND-2,§9.2", ON_W,
     COUNT_ADD, 0, 1, 0, 0},
    {"invalid/banded-count-below", "w/0's chunk record (and index) say count is one less than "
     "its band table lists", E_ENC, "chunks", "banded,band-table", "R-BND-2,§9.2", ON_W,
     COUNT_ADD, 0, -1, 0, 0},
    {"invalid/banded-inverted-past-nb", "w/0's inverted byte has bit 5 set: it has 5 bands (0 "
     "to 4)", E_ENC, "chunks", "banded,band-table", "R-BND-2", ON_W, INV_OR, 0, 0x20, 0, 0},
    {"invalid/banded-inverted-k-0", "w/0's inverted byte has bit 3 set: band 3 has no change",
     E_ENC, "chunks", "banded,band-table,bands", "R-BND-2", ON_W, INV_OR, 0, 0x08, 0, 0},

    /* Value codes (R-BND-3), in order */
    {"invalid/banded-nsym-missing", "w/0's data ends with its band table: band 0 has changes, "
     "its code has no nsym", E_ENC, "chunks", "banded,code-table,truncation", "R-BND-3", ON_W,
     CUT, 0, 0, 0, 0},
    {"invalid/banded-nsym-0", "w/0's band 0 code says nsym = 0", E_ENC, "chunks",
     "banded,code-table", "R-BND-3", ON_W, NSYM_SET, 0, 0, 0, 0},
    {"invalid/banded-nsym-33", "w/0's band 0 code says nsym = 33: BF16's symbols are 0 to 31 "
     "(2B = 32)", E_ENC, "chunks", "banded,code-table", "R-BND-3", ON_W, NSYM_SET, 0, 33, 0, 0},
    {"invalid/banded-lengths-cut", "w/0's data ends one byte before the end of band 0's code "
     "lengths", E_ENC, "chunks", "banded,code-table,truncation", "R-BND-3", ON_W, CUT_LENS, 0,
     0, 0, 0},
    {"invalid/banded-length-12", "a length of 12 in w/0's band 0 code (at most 11)", E_ENC,
     "chunks", "banded,code-table", "R-BND-3", ON_W, LEN_BIG, 0, 0, 0, 0},
    {"invalid/banded-odd-nsym-pad", "one's code (nsym = 1, odd) with the high half of its "
     "length byte 1", E_ENC, "chunks", "banded,code-table,value-code", "R-BND-3", ON_ONE,
     PAD_NIBBLE, 0, 0, 0, 0},
    {"invalid/banded-last-length-0", "w/0's band 0 code lists one symbol more, of length 0: "
     "the last symbol has no code", E_ENC, "chunks", "banded,code-table", "R-BND-3", ON_W,
     NSYM_PLUS, 0, 0, 0, 0},
    {"invalid/banded-code-over", "w/0's band 0 code with a longest symbol one bit shorter: "
     "over-subscribed (Σ 2^(11 - len) > 2^11)", E_ENC, "chunks", "banded,code-table", "R-BND-3",
     ON_W, LEN_OVER, 0, 0, 0, 0},
    {"invalid/banded-code-incomplete", "w/0's band 0 code with a shortest symbol one bit "
     "longer: incomplete (Σ 2^(11 - len) < 2^11)", E_ENC, "chunks", "banded,code-table",
     "R-BND-3", ON_W, LEN_UNDER, 0, 0, 0, 0},
    {"invalid/banded-one-symbol-length-2", "one's code: its only symbol with length 2 (a "
     "one-symbol code has length 1)", E_ENC, "chunks", "banded,code-table,value-code",
     "R-BND-3", ON_ONE, LEN_SET, 0, 2, 0, 0},

    /* j (R-BND-4) */
    {"invalid/banded-j-missing", "w/0's data ends two bytes into band 4's rank stream (band 4 "
     "is inverted: fewer than 4 bytes for j)", E_POS, "chunks", "banded,ranks,truncation",
     "R-BND-4", ON_W, CUT_RANK, 4, 2, 0, 0},
    {"invalid/banded-j-above", "w/0's inverted band 4 says j = n - k + 1", E_POS, "chunks",
     "banded,ranks", "R-BND-4", ON_W, J_SET, 4, 1, 0, 0},

    /* Golomb streams (R-BND-6), in order */
    {"invalid/banded-m-cut", "w/0's data ends two bytes into band 2's rank stream: fewer than "
     "4 bytes for m", E_POS, "chunks", "banded,ranks,truncation", "R-BND-6", ON_W, CUT_RANK, 2,
     2, 0, 0},
    {"invalid/banded-m-0", "w/0's band 2 rank stream says m = 0", E_POS, "chunks",
     "banded,ranks,golomb", "R-BND-6", ON_W, M_SET, 2, 0, 0, 0},
    {"invalid/banded-m-above-2-31", "w/0's band 2 rank stream says m = 2^31 + 1 (its gaps "
     "coded with the divisor as written)", E_POS, "chunks", "banded,ranks,golomb", "R-BND-6",
     ON_W, M_SET, 2, 0x80000001ll, 0, 0},
    {"invalid/banded-rank-n", "w/0's band 2 last rank is n", E_POS, "chunks", "banded,ranks",
     "R-BND-6", ON_W, RANK_LAST, 2, 0, 0, 0},
    {"invalid/banded-kept-rank-k-plus-j", "w/0's inverted band 4: its last kept rank is k + j "
     "(the ranks of an inverted band are below k + j)", E_POS, "chunks", "banded,ranks,bands",
     "R-BND-6", ON_W, RANK_LAST, 4, 2, 0, 0},
    {"invalid/banded-rank-stream-cut", "w/0's data ends one byte before the end of its last "
     "rank stream (band 4's), inside a gap", E_POS, "chunks", "banded,ranks,truncation",
     "R-BND-6", ON_W, CUT_RANKS, 0, 0, 0, 0},
    {"invalid/banded-rank-padding", "w/0's band 2 rank stream with the top bit of its last "
     "byte, unused, set", E_POS, "chunks", "banded,ranks", "R-BND-6", ON_W, RANK_PAD, 2, 0, 0,
     0},

    /* The value stream (R-BND-5) */
    {"invalid/banded-value-no-code", "one's value stream starts with a 1 bit: its one-symbol "
     "code has only the code 0", E_ENC, "chunks", "banded,values,value-code", "R-BND-5", ON_ONE,
     VAL_FIRST1, 0, 0, 0, 0},
    {"invalid/banded-value-cut", "w/0's value stream without its last byte: the last value "
     "runs past the end", E_ENC, "chunks", "banded,values,truncation", "R-BND-5", ON_W, VAL_CUT,
     0, 0, 0, 0},
    {"invalid/banded-value-z-2-16", "w/0's band 0 first value coded as positive with L = 15 "
     "and M = 2^15: z = 2^16, past the 16 bits of BF16", E_ENC, "chunks",
     "banded,values,long-value", "R-BND-5", ON_W, VAL_SET, 0, 0, 0, 1u << 15},
    {"invalid/banded-value-z-2-64", "f64/0's first value coded as positive with L = 63 and M = "
     "2^63: z = 2^64, which 64-bit arithmetic wraps to 0", E_ENC, "chunks",
     "banded,values,long-value,wrap-64", "R-BND-5", ON_F64, VAL_SET, 0, 0, 0, 1ull << 63},
    {"invalid/banded-value-z-2-64-plus-1", "f64/0's first value coded as negative with L = 63 "
     "and M = 2^63 + 1: z = 2^64 + 1, which 64-bit arithmetic wraps to the valid 1", E_ENC,
     "chunks", "banded,values,long-value,wrap-64", "R-BND-5", ON_F64, VAL_SET, 0, 0, 1,
     (1ull << 63) + 1},
    {"invalid/banded-value-trailing-byte", "a zero byte after w/0's value stream", E_ENC,
     "chunks", "banded,values", "R-BND-5", ON_W, VAL_TRAIL, 0, 0, 0, 0},
    {"invalid/banded-value-padding", "w/0's value stream with the top bit of its last byte, "
     "unused, set", E_ENC, "chunks", "banded,values", "R-BND-5", ON_W, VAL_PAD, 0, 0, 0, 0},

    /* What only the base can check (R-BND-7) */
    {"invalid/banded-rank-past-band", "w/0's band 2 last rank is the band's element count in "
     "the chunk's base: valid without the base", E_POS, "apply", "banded,ranks,base-dependent",
     "R-BND-7,§15.5", ON_W, RANK_LAST, 2, 1, 0, 0},
    {"invalid/banded-inverted-count", "w/0's inverted band 4 lists one more kept rank (its "
     "element count in the base): k + j is one more than the band's elements, and every rank "
     "below it", E_POS, "apply", "banded,ranks,base-dependent,bands", "R-BND-7,§15.5", ON_W,
     KEPT_EXTRA, 4, 0, 0, 0},

    /* Arithmetic that wraps */
    {"invalid/banded-rank-wraps-32", "w/0's band 2 ranks coded with m = 2^31, its first gap "
     "2^32 more than it is (q = 2): a position past n, which 32-bit arithmetic wraps to the "
     "true rank, every later gap as it was", E_POS, "chunks", "banded,ranks,golomb,wrap-64",
     "R-BND-6", ON_W, RANK_WRAP, 2, 0, 0, 0},
};

static void invalid_vectors(void) {
  bundle B;
  char what[512], text[1024];
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    for (int fix = 0; fix < 2; fix++) {
      bundle_copy(&B, &M);
      bad_vec v = bad[i];
      if (v.how == CUT && !strcmp(v.id, "invalid/banded-nsym-missing")) {
        size_t n;
        bplan *P = plan_of(&M, EW, 0, &n);
        v.arg = 1 + 2 * (P->nb - 1) + 4 * P->nb + 1;
        bplan_free(P);
      }
      bad_chunk(&B, &v, fix, what, sizeof what);
      if (!fix) snprintf(text, sizeof text, "%s%s%s%s", v.text, what[0] ? " (" : "", what,
                         what[0] ? ")" : "");
      emit(INVALID(.id = v.id, .error = v.code, .stage = v.stage, .flags = v.flags, .text = text,
                   .covers = v.covers),
           &B, fix, &MB, &MT);
    }
}

/* ------------------------------------------------------------------------ */

int main(int argc, char **argv) {
  if (!minor_index_open(argc, argv, "1.3", v13_flags, sizeof v13_flags / sizeof *v13_flags))
    return 2;
  pair_model();
  valid_vectors();
  invalid_vectors();
  minor_index_close("1.3", "tools/mkvectors13.c (make vectors); seed 0x4443523133766563");
  bundle_free(&M);
  return 0;
}
