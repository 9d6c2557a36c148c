/*
 * deltagen.h - what the generators of the delta-encoding vectors share
 * (tools/mkvectors12.c, testvectors/v1.2/; tools/mkvectors13.c, testvectors/v1.3/):
 * writing a vector's files, and the data: float weights and an optimizer step on
 * their bit patterns, so that changes fall where §9.4 and §9.5 expect them (small
 * exponents, mostly 1 ULP). Included after bundlegen.h. Every draw of the PRNG
 * stays where mkvectors12.c made it: testvectors/v1.2 is frozen (`make
 * vectors-check`).
 */
#ifndef DCR_DELTAGEN_H
#define DCR_DELTAGEN_H

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"

static json_t *write_files(int sink, const char *id, const buf *bytes, ckpt *base,
                           ckpt *target) {
  json_t *files = bundle_ref(sink, id, bytes);
  if (base) json_object_set_new(files, "base", ck_ref(sink, base));
  if (target) json_object_set_new(files, "target", ck_ref(sink, target));
  return files;
}

/* Writes vector v (fix = 0) or its repaired variant (fix = 1), then frees B. A
 * valid vector ships its base and target, an apply-stage one its base, those of
 * the structure and chunks stages neither; a repaired variant ships both. */
static void emit(const vec *v, bundle *B, int fix, ckpt *base, ckpt *target) {
  buf out = {0};
  serialize(B, &out);
  if (fix) {
    if (repair_checked(v)) add_repaired(v, write_files(REPAIRED, v->id, &out, base, target));
  } else {
    int valid = vector_check(v), apply = !valid && !strcmp(v->stage, "apply");
    add_vector(v, write_files(CORPUS, v->id, &out, valid || apply ? base : NULL,
                              valid ? target : NULL));
  }
  bfree(&out);
  bundle_free(B);
}

/* The faults of a chunk's record and of the bundle that every invalid vector of
 * an encoding may take (numbered apart from each generator's own). */
enum {
  COMP = 1000, /* compression arg, the data as stored */
  ZSTD,        /* compression 1, the data in a zstd frame */
  COUNT_ADD,   /* the chunk record's count plus arg */
  ENCODING,    /* encoding arg */
  MINOR,       /* the bundle declares minor arg */
};

/* Applies fault `how` (if it is one of those) to the chunk about to be written:
 * its data, encoding, compression and count, or B's minor version. */
static void record_fault(bundle *B, int how, int64_t arg, buf *data, int *enc, int *comp,
                         uint32_t *count, char *what, size_t wsize) {
  switch (how) {
    case COMP: *comp = (int)arg; break;
    case ZSTD: {
      buf z = {0};
      zframe_raw(&z, data->n, data->p, data->n);
      bfree(data);
      *data = z;
      *comp = 1;
      break;
    }
    case COUNT_ADD:
      snprintf(what, wsize, "the table sums to %u", *count);
      *count += (uint32_t)arg;
      break;
    case ENCODING: *enc = (int)arg; break;
    case MINOR: B->minor = (unsigned)arg; break;
  }
}

/* Opens the index of testvectors/vVERSION, or says how to run the generator. */
static int minor_index_open(int argc, char **argv, const char *version, const flag_def *flags,
                            size_t nflag) {
  static char sub[16];
  snprintf(sub, sizeof sub, "v%s", version);
  if (index_open(argc, argv, sub, ".", flags, nflag)) return 1;
  fprintf(stderr, "usage: %s OUTDIR [--repaired DIR]\n"
                  "  writes OUTDIR/%s/index.json and the files beside it; with --repaired,\n"
                  "  also every repaired variant as DIR/index.json and files (all valid)\n",
          VECGEN_NAME, sub);
  return 0;
}

/* Writes the indexes of a minor version's vectors (index_close). */
static void minor_index_close(const char *version, const char *generator) {
  char repaired_text[200];
  snprintf(repaired_text, sizeof repaired_text, "repaired variants of the %s invalid vectors (%s "
           "--repaired): each must be valid; not committed", version, VECGEN_NAME);
  index_info x = {
      .schema = "../schema.json",
      .format_version = version,
      .generator = generator,
      .usage = "as for testvectors/index.json (testvectors/README.md), with paths relative to the "
               "folder of this index",
      .nomem = "allocation failure: a property of the environment",
      .no_vectors = json_object(),
      .repaired_text = repaired_text};
  index_close(&x);
}

static size_t entry_index(const bundle *B, const char *name) {
  for (size_t i = 0; i < B->man.n; i++)
    if (B->man.e[i].nlen == strlen(name) && !memcmp(B->man.e[i].name, name, B->man.e[i].nlen))
      return i;
  die("no entry %s", name);
}

/* ------------------------------------------------------------------------ */
/* Data: an optimizer step, on bit patterns                                  */

static uint64_t *dims1(uint64_t *d, uint64_t a) {
  d[0] = a;
  return d;
}
static uint64_t *dims2(uint64_t *d, uint64_t a, uint64_t b) {
  d[0] = a, d[1] = b;
  return d;
}

static unsigned bits_of(const tensor *t) { return 8 * dt_size[t->dtype]; }
static size_t elements(const tensor *t) { return (size_t)t->len / dt_size[t->dtype]; }
static uint64_t ones(unsigned bits) { return bits == 64 ? ~(uint64_t)0 : ((uint64_t)1 << bits) - 1; }

/* §9's key: patterns that sort like the float values they encode. */
static uint64_t key_of(uint64_t u, unsigned bits) {
  uint64_t top = (uint64_t)1 << (bits - 1);
  return u & top ? u ^ (top - 1) : u;
}

static uint64_t get_u(const tensor *t, size_t i) {
  return elem_le(t->data + i * dt_size[t->dtype], dt_size[t->dtype]);
}

static void set_u(tensor *t, size_t i, uint64_t u) {
  for (unsigned b = 0; b < dt_size[t->dtype]; b++)
    t->data[i * dt_size[t->dtype] + b] = (uint8_t)(u >> (8 * b));
}

static uint64_t cls_of(const tensor *t, size_t i) {
  return class_of(t->data + i * dt_size[t->dtype], t->dtype);
}

/* Element i of t: element i of b moved by d (mod 2^B) along the keys, so, for a
 * float, by d representable values. */
static void move(const tensor *b, tensor *t, size_t i, uint64_t d) {
  unsigned bits = bits_of(t);
  set_u(t, i, key_of((key_of(get_u(b, i), bits) + d) & ones(bits), bits));
}

static unsigned geometric(unsigned cap) {
  unsigned g = 0;
  while (g < cap && (rng() & 1)) g++;
  return g;
}

/* A float weight of class (exponent) cls, its sign and other bits random. */
static uint64_t weight(const tensor *t, uint64_t cls) {
  unsigned shift, width = class_width(t->dtype, &shift);
  uint64_t field = ones(width) << shift;
  return (rng() & ones(bits_of(t)) & ~field) | cls << shift;
}

/* Weights as a trained layer holds them: half of class `top`, a quarter one
 * below, and so on down to top - spread. */
static void fill_weights(tensor *t, unsigned top, unsigned spread) {
  for (size_t i = 0; i < elements(t); i++) set_u(t, i, weight(t, top - geometric(spread)));
}

/* The float whose magnitude is N ULPs of class `unit` (rounded down to the
 * precision of its own class), of sign `sign`: the mantissa below `shift` (its
 * width), the class field (the exponent), the sign just above it. */
static uint64_t float_of(const tensor *t, uint64_t unit, uint64_t N, uint64_t sign) {
  unsigned shift, width = class_width(t->dtype, &shift);
  if (!N) return sign << (shift + width);
  int lead = 63 - __builtin_clzll(N), cls = (int)unit + lead - (int)shift;
  if (cls < 1) return sign << (shift + width) | N << (unit - 1); /* subnormal: class 0 */
  uint64_t f = lead >= (int)shift ? N >> (lead - (int)shift) : N << ((int)shift - lead);
  return sign << (shift + width) | (uint64_t)cls << shift | (f & ones(shift));
}

/* An optimizer step on float weights: per10k of the elements move by a·2^-u, a
 * drawn small far more often than large and the same for every magnitude. In the
 * element's ULPs that is a·2^(S - class), S folding u with the dtype's bias and
 * mantissa width: small exponents change more often and by more ULPs, most moves
 * round to 0 or 1 ULP, and a weight smaller than its move crosses zero. An element
 * of class 0 (zero or subnormal) stays, unless fresh: then 1 in 8 leaves zero for a
 * weight of class fresh. The magnitude bits (all below the sign) count ULPs across
 * classes, as §9's keys do; the other bits (C64's imaginary part) stay. */
static void step(const tensor *b, tensor *t, int S, unsigned per10k, unsigned fresh) {
  unsigned shift, width = class_width(t->dtype, &shift);
  int bits = (int)bits_of(t);
  uint64_t magnitude = ones(shift + width), top = ones(width) << shift; /* inf, NaN */
  for (size_t i = 0; i < elements(t); i++) {
    if (rng() % 10000 >= per10k) continue;
    uint64_t u = get_u(b, i), cls = (u >> shift) & ones(width);
    if (!cls && fresh) {
      if (rng() % 8 == 0) set_u(t, i, weight(t, fresh));
      continue;
    }
    uint64_t a = rbelow((uint64_t)1 << rbelow(7));
    int sh = S - (int)cls;
    if (sh > bits - 8) sh = bits - 8; /* a < 2^6: a move stays under 2^(B-2) */
    uint64_t ulps = sh >= 0 ? a << sh : sh > -8 ? (a + ((uint64_t)1 << (-sh - 1))) >> -sh : 0;
    if (!ulps) continue;
    uint64_t mag = u & magnitude, own = cls ? ((uint64_t)1 << shift) | (mag & ones(shift)) : mag;
    uint64_t sign = (u >> (shift + width)) & 1, rest = u & ~magnitude & ~(sign << (shift + width));
    if (rng() & 1) { /* away from zero */
      if (mag + ulps < top) set_u(t, i, u + ulps);
    } else if (ulps < own) {
      set_u(t, i, u - ulps);
    } else { /* across zero, by what is left of the move */
      set_u(t, i, rest | float_of(t, cls ? cls : 1, ulps - own, sign ^ 1));
    }
  }
}

/* Integers and other one-class data: per10k of the elements move by 1 to 3 either
 * way in their own arithmetic (a BOOL flips). */
static void nudge(const tensor *b, tensor *t, unsigned per10k) {
  for (size_t i = 0; i < elements(t); i++) {
    if (rng() % 10000 >= per10k) continue;
    uint64_t d = t->dtype == BOOL ? 1 : 1 + rbelow(3), u = get_u(b, i);
    set_u(t, i, t->dtype == BOOL ? u ^ 1 : (u + (rng() & 1 ? d : 0 - d)) & ones(bits_of(t)));
  }
}

/* ------------------------------------------------------------------------ */
/* Pairs both generators code: long values, the zero base, a resize          */

/* For each dtype, 16 random elements of which 8 move by the extremes of §9.4's
 * code (and §9.5's): d = -2^(B-1) twice (z = 2^B - 1: L = B - 1, M = 2^(B-1)), elements 0 and 7,
 * put in one class so that its context l(B-2) is used again; 2^(B-1) - 1 (z = 2^B
 * - 2, the largest positive); 2^(B-2) (z = 2^(B-1)); 1 - 2^(B-1) (z = 2^B - 3); 1,
 * -1 and 2. */
static const int long_dtypes[] = {BF16, F16, F32, F64, C64, F8_E4M3, F8_E5M2, F8_E8M0, I64, U8};

static void long_pair(ckpt *lb, ckpt *lt) {
  uint64_t d[1];
  char name[32];
  lb->file = "ckpt/long-base.safetensors";
  lb->kind = KIND_ST;
  for (size_t k = 0; k < sizeof long_dtypes / sizeof *long_dtypes; k++) {
    snprintf(name, sizeof name, "x.%s", dt_name[long_dtypes[k]]);
    tensor *t = ck_add(lb, name, long_dtypes[k], 1, dims1(d, 16));
    fill_random(t);
    unsigned shift, width = class_width(t->dtype, &shift);
    uint64_t field = ones(width) << shift;
    set_u(t, 7, (get_u(t, 7) & ~field) | (get_u(t, 0) & field));
  }
  ck_finish(lb);
  ck_clone(lt, lb, "ckpt/long-target.safetensors");
  for (size_t k = 0; k < lb->n; k++) {
    uint64_t h = (uint64_t)1 << (bits_of(&lb->t[k]) - 1);
    const uint64_t moves[8] = {h, h - 1, h / 2, h + 1, 1, 0 - (uint64_t)1, 2, h};
    for (size_t i = 0; i < 8; i++) move(&lb->t[k], &lt->t[k], i, moves[i]);
  }
  ck_finish(lt);
}

/* kept BF16 [512] has a step; recoded F32 [256] becomes BF16 [512] (another dtype:
 * coded against zeros); added BF16 [600] and added.scales F8_E8M0 [300] are new
 * (zeros in them stay zeros: not changes). */
static void zero_pair(ckpt *zb, ckpt *zt) {
  uint64_t d[1];
  zb->file = "ckpt/zero-base.safetensors";
  zb->kind = KIND_ST;
  fill_weights(ck_add(zb, "kept", BF16, 1, dims1(d, 512)), 124, 12);
  fill_weights(ck_add(zb, "recoded", F32, 1, dims1(d, 256)), 123, 8);
  ck_finish(zb);
  ck_clone(zt, zb, "ckpt/zero-target.safetensors");
  step(ck_get(zb, "kept"), ck_get(zt, "kept"), 118, 10000, 116);
  ck_remove(zt, "recoded");
  fill_weights(ck_add(zt, "recoded", BF16, 1, dims1(d, 512)), 124, 8);
  tensor *a = ck_add(zt, "added", BF16, 1, dims1(d, 600));
  fill_weights(a, 122, 10);
  for (size_t i = 0; i < elements(a); i += 7) set_u(a, i, 0);
  tensor *s = ck_add(zt, "added.scales", F8_E8M0, 1, dims1(d, 300));
  fill_weights(s, 127, 10);
  for (size_t i = 0; i < elements(s); i += 9) set_u(s, i, 0);
  ck_finish(zt);
}

/* grow BF16 [32, 16] -> [48, 16] and shrink F32 [40, 8] -> [24, 8], each with a
 * step in the rows it keeps; grow's new rows are new weights. */
static void resize_pair(ckpt *pb, ckpt *pt) {
  uint64_t d[2];
  pb->file = "ckpt/resize-base.safetensors";
  pb->kind = KIND_ST;
  fill_weights(ck_add(pb, "grow", BF16, 2, dims2(d, 32, 16)), 124, 12);
  fill_weights(ck_add(pb, "shrink", F32, 2, dims2(d, 40, 8)), 123, 8);
  ck_finish(pb);
  pt->file = "ckpt/resize-target.safetensors";
  pt->kind = KIND_ST;
  tensor *g = ck_add(pt, "grow", BF16, 2, dims2(d, 48, 16));
  tensor *s = ck_add(pt, "shrink", F32, 2, dims2(d, 24, 8));
  fill_weights(g, 124, 12);
  tensor gb = *ck_get(pb, "grow"), sb = *ck_get(pb, "shrink");
  memcpy(g->data, gb.data, (size_t)gb.len);
  sb.len = s->len;
  memcpy(s->data, sb.data, (size_t)sb.len);
  tensor kept = *g; /* the rows grow keeps */
  kept.len = gb.len;
  step(&gb, &kept, 118, 10000, 116);
  step(&sb, s, 126, 3000, 0);
  ck_finish(pt);
}

#pragma GCC diagnostic pop

#endif
