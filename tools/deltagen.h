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

#pragma GCC diagnostic pop

#endif
