/*
 * synth.c - deterministic synthetic checkpoint pairs (see synth.h).
 *
 * Every element draws a master weight m ~ N(mean, 0.02) and an update u from one
 * random stream, in the order the bytes are written, so memory stays at one block
 * per file whatever the size, and a seed gives the same bytes on a given build.
 * The step size lr is found first by bisection on a separate fixed sample, so the
 * whole output needs one pass.
 */
#include "synth.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { DT_F16 = 8, DT_BF16 = 9, DT_F32 = 12 }; /* SPEC.md §3 */

#define BLOCK_ELEMENTS ((size_t)1 << 18)   /* per write: 1 MiB of F32 per file */
#define CALIBRATION_SAMPLES ((size_t)1 << 18)
#define MAX_SIZE ((uint64_t)1 << 46)
#define MAX_LAYERS 10000u
#define WEIGHT_STD 0.02

void dcr_synth_options_default(dcr_synth_options *o) {
  o->size = (uint64_t)64 << 20;
  o->rate = 0.01;
  o->seed = 1;
  o->dtype = DT_BF16;
  o->layers = 0;
  o->cancel = NULL;
  o->progress = NULL;
  o->progress_opaque = NULL;
}

/* ---- random numbers: xoshiro256** seeded by splitmix64 ------------------- */

typedef struct {
  uint64_t s[4];
  double spare; /* Box-Muller makes normals in pairs */
  int has_spare;
} rng;

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15u);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
  return z ^ (z >> 31);
}

static void rng_seed(rng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
  r->has_spare = 0;
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(rng *r) {
  uint64_t *s = r->s, result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

static double rng_normal(rng *r) {
  if (r->has_spare) {
    r->has_spare = 0;
    return r->spare;
  }
  double u1 = (double)((rng_next(r) >> 11) + 1) * 0x1p-53; /* (0, 1]: log is finite */
  double u2 = (double)(rng_next(r) >> 11) * 0x1p-53;
  double radius = sqrt(-2.0 * log(u1)), angle = 6.283185307179586 * u2;
  r->spare = radius * sin(angle);
  r->has_spare = 1;
  return radius * cos(angle);
}

/* One element: the master weight and an Adam-like normalized update.
 *
 * The master is fp32, as in mixed-precision training, or fp64 for an F32
 * checkpoint: a master finer than the stored dtype puts each stored value anywhere
 * within its ulp, so a small step changes few elements, and those by one ulp.
 * Adam's first steps move every weight by about ±lr whatever its gradient, later
 * ones in proportion to it: half a sign, half a unit normal clipped at 3. That
 * normal is a sum of four uniforms (Irwin-Hall, scaled to unit variance): only
 * its rough shape matters, and it costs no libm call per element. */
static void draw(rng *r, int dtype, double mean, double *m, double *u) {
  *m = mean + WEIGHT_STD * rng_normal(r);
  if (dtype != DT_F32) *m = (double)(float)*m;
  uint64_t x = rng_next(r);
  double s = (double)((x & 0xFFFF) + (x >> 16 & 0xFFFF) + (x >> 32 & 0xFFFF) + (x >> 48));
  double g = (s / 65536.0 - 2.0) * 1.7320508075688772;
  if (g > 3.0) g = 3.0;
  if (g < -3.0) g = -3.0;
  *u = 0.5 * g + (g < 0 ? -0.5 : 0.5);
}

/* ---- rounding fp32 to the dtype, to nearest even ------------------------- */

/* Values are small and finite here: NaN needs no care; overflow goes to infinity. */
static uint32_t f16_bits(uint32_t x) {
  uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7FFFFFFFu;
  if (ax < 0x38800000u) { /* below 2^-14: subnormal or zero in F16 */
    if (ax < 0x33000000u) return sign; /* below 2^-25: rounds to zero */
    unsigned shift = 126u - (ax >> 23); /* in units of 2^-24 */
    uint32_t mant = (ax & 0x7FFFFFu) | 0x800000u;
    uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++; /* may carry into the exponent: right */
    return sign | q;
  }
  uint32_t r = ((ax + 0xFFFu + ((ax >> 13) & 1)) >> 13) - (112u << 10);
  return sign | (r >= 0x7C00u ? 0x7C00u : r);
}

static uint32_t encode(int dtype, float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  switch (dtype) {
  case DT_F32: return x;
  case DT_BF16: return (x + 0x7FFFu + ((x >> 16) & 1)) >> 16;
  default: return f16_bits(x);
  }
}

static unsigned dtype_size(int dtype) {
  switch (dtype) {
  case DT_F16:
  case DT_BF16: return 2;
  case DT_F32: return 4;
  default: return 0;
  }
}

static const char *dtype_name(int dtype) {
  return dtype == DT_F16 ? "F16" : dtype == DT_BF16 ? "BF16" : "F32";
}

/* ---- calibration ---------------------------------------------------------- */

typedef struct {
  int dtype;
  double *m;
  double *u;
  uint32_t *bits;
} sample;

static double changed_fraction(const sample *s, double lr) {
  size_t changed = 0;
  for (size_t i = 0; i < CALIBRATION_SAMPLES; i++)
    changed += encode(s->dtype, (float)(s->m[i] - lr * s->u[i])) != s->bits[i];
  return (double)changed / (double)CALIBRATION_SAMPLES;
}

/* The fraction changed only grows with lr (each value moves away from its start),
 * so a bisection over the log of lr finds the step for `rate`. Returns -1 if out of
 * memory. */
static double calibrate(int dtype, double rate, uint64_t seed) {
  sample s = {dtype, malloc(CALIBRATION_SAMPLES * sizeof *s.m),
              malloc(CALIBRATION_SAMPLES * sizeof *s.u),
              malloc(CALIBRATION_SAMPLES * sizeof *s.bits)};
  double lr = -1;
  if (s.m && s.u && s.bits) {
    rng r;
    rng_seed(&r, seed ^ 0x5EEDCA11B4A7E000u);
    for (size_t i = 0; i < CALIBRATION_SAMPLES; i++) {
      draw(&r, dtype, 0.0, &s.m[i], &s.u[i]);
      s.bits[i] = encode(dtype, (float)s.m[i]);
    }
    /* 40 halvings of 12 decades leave lr within a factor 1 + 1e-11. */
    double lo = 1e-12, hi = 1.0;
    if (changed_fraction(&s, hi) > rate)
      for (int i = 0; i < 40; i++) {
        double mid = sqrt(lo * hi);
        if (changed_fraction(&s, mid) < rate) lo = mid;
        else hi = mid;
      }
    lr = hi;
  }
  free(s.m);
  free(s.u);
  free(s.bits);
  return lr;
}

/* ---- the model's tensors -------------------------------------------------- */

typedef struct {
  char name[64];
  uint64_t dims[2];
  unsigned rank;
  double mean; /* 1 for norm weights, 0 for the rest */
  uint64_t elements;
} tensor;

static uint64_t ffn_dim(uint64_t h) { return (8 * h / 3 + 63) / 64 * 64; }

static uint64_t layer_elements(uint64_t h) { return 4 * h * h + 3 * h * ffn_dim(h) + 2 * h; }

static uint64_t model_elements(uint64_t layers, uint64_t h, uint64_t vocab) {
  return layers * layer_elements(h) + 2 * vocab * h + h;
}

static void add(tensor *t, size_t *n, double mean, uint64_t d0, uint64_t d1, const char *fmt,
                ...) __attribute__((format(printf, 6, 7)));

static void add(tensor *t, size_t *n, double mean, uint64_t d0, uint64_t d1, const char *fmt,
                ...) {
  tensor *x = &t[(*n)++];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(x->name, sizeof x->name, fmt, ap);
  va_end(ap);
  x->dims[0] = d0;
  x->dims[1] = d1;
  x->rank = d1 ? 2 : 1;
  x->mean = mean;
  x->elements = d1 ? d0 * d1 : d0;
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const tensor *)a)->name, ((const tensor *)b)->name);
}

/* A Llama-like decoder: the layer count grows with the log of the size, the width
 * is the widest (in steps of 64) that fits, and the vocabulary takes up the rest
 * so that the total is close to the size asked for. */
static tensor *plan(const dcr_synth_options *o, size_t *count) {
  uint64_t target = o->size / dtype_size(o->dtype), layers = o->layers;
  if (!layers) {
    unsigned lg = 0;
    while (lg < 40 && ((uint64_t)2 << lg) <= o->size >> 20) lg++;
    layers = 2 + 2 * (uint64_t)lg;
    if (layers > 64) layers = 64;
  }
  uint64_t h = 64;
  for (;;) {
    uint64_t next = h + 64, vocab = 8 * next < 32000 ? 8 * next : 32000;
    if (model_elements(layers, next, vocab) > target) break;
    h = next;
  }
  uint64_t body = model_elements(layers, h, 0), vocab = 16;
  if (target > body && (target - body) / (2 * h) > vocab) vocab = (target - body) / (2 * h);

  size_t n = 0;
  tensor *t = malloc((3 + 9 * (size_t)layers) * sizeof *t);
  if (!t) return NULL;
  uint64_t ffn = ffn_dim(h);
  add(t, &n, 0.0, vocab, h, "model.embed_tokens.weight");
  add(t, &n, 1.0, h, 0, "model.norm.weight");
  add(t, &n, 0.0, vocab, h, "lm_head.weight");
  for (uint64_t i = 0; i < layers; i++) {
    unsigned long long l = i;
    add(t, &n, 1.0, h, 0, "model.layers.%llu.input_layernorm.weight", l);
    add(t, &n, 1.0, h, 0, "model.layers.%llu.post_attention_layernorm.weight", l);
    static const char *const attn[4] = {"q", "k", "v", "o"};
    for (int k = 0; k < 4; k++)
      add(t, &n, 0.0, h, h, "model.layers.%llu.self_attn.%s_proj.weight", l, attn[k]);
    add(t, &n, 0.0, ffn, h, "model.layers.%llu.mlp.gate_proj.weight", l);
    add(t, &n, 0.0, ffn, h, "model.layers.%llu.mlp.up_proj.weight", l);
    add(t, &n, 0.0, h, ffn, "model.layers.%llu.mlp.down_proj.weight", l);
  }
  /* safetensors writers lay data out in name order, as JSON_SORT_KEYS lists it. */
  qsort(t, n, sizeof *t, by_name);
  *count = n;
  return t;
}

/* The JSON header, padded with spaces so that the data region starts 8-aligned. */
static char *header(const tensor *t, size_t n, int dtype, size_t *length) {
  json_t *root = json_object(), *meta = json_object();
  int bad = !root || !meta;
  bad |= json_object_set_new(meta, "format", json_string("pt"));
  bad |= json_object_set_new(root, "__metadata__", meta);
  uint64_t offset = 0;
  for (size_t i = 0; i < n && !bad; i++) {
    json_t *entry = json_object(), *shape = json_array(), *offsets = json_array();
    uint64_t end = offset + t[i].elements * dtype_size(dtype);
    bad |= !entry || !shape || !offsets;
    for (unsigned k = 0; k < t[i].rank; k++)
      bad |= json_array_append_new(shape, json_integer((json_int_t)t[i].dims[k]));
    bad |= json_array_append_new(offsets, json_integer((json_int_t)offset));
    bad |= json_array_append_new(offsets, json_integer((json_int_t)end));
    bad |= json_object_set_new(entry, "dtype", json_string(dtype_name(dtype)));
    bad |= json_object_set_new(entry, "shape", shape);
    bad |= json_object_set_new(entry, "data_offsets", offsets);
    bad |= json_object_set_new(root, t[i].name, entry);
    offset = end;
  }
  char *text = bad ? NULL : json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(root);
  if (!text) return NULL;
  size_t len = strlen(text), padded = len + ((8 - len % 8) % 8);
  char *out = realloc(text, padded);
  if (!out) {
    free(text);
    return NULL;
  }
  memset(out + len, ' ', padded - len);
  *length = padded;
  return out;
}

/* ---- writing -------------------------------------------------------------- */

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return -1;
}

static int write_both(const dcr_synth_sink *out, const uint8_t *const data[2], size_t n,
                      char *err, size_t errlen) {
  for (int i = 0; i < 2; i++) {
    errno = 0;
    if (out[i].write(out[i].opaque, data[i], n))
      return fail(err, errlen, "%s: write failed: %s", out[i].name,
                  errno ? strerror(errno) : "short write");
  }
  return 0;
}

static void put(uint8_t *p, uint32_t v, unsigned size) {
  for (unsigned i = 0; i < size; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Streams every tensor's elements, in data order, into both files. */
static int write_data(const dcr_synth_options *o, const tensor *t, size_t n, double lr,
                      const dcr_synth_sink *out, uint64_t *changed, uint64_t *total, char *err,
                      size_t errlen) {
  unsigned es = dtype_size(o->dtype);
  int force = o->rate >= 1.0; /* rate 1: every element changes, if need be by 1 ulp */
  uint8_t *buf = malloc(2 * BLOCK_ELEMENTS * es);
  if (!buf) return fail(err, errlen, "out of memory");
  const uint8_t *const data[2] = {buf, buf + BLOCK_ELEMENTS * es};
  rng r;
  rng_seed(&r, o->seed);
  int rc = 0;
  uint64_t written = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    for (uint64_t done = 0; done < t[i].elements && !rc;) {
      uint64_t left = t[i].elements - done;
      size_t k = left < BLOCK_ELEMENTS ? (size_t)left : BLOCK_ELEMENTS;
      for (size_t j = 0; j < k; j++) {
        double m, u;
        draw(&r, o->dtype, t[i].mean, &m, &u);
        uint32_t before = encode(o->dtype, (float)m);
        uint32_t after = encode(o->dtype, (float)(m - lr * u));
        if (force && after == before) after ^= 1; /* the last mantissa bit: one ulp */
        *changed += after != before;
        put(buf + j * es, before, es);
        put(buf + (BLOCK_ELEMENTS + j) * es, after, es);
      }
      rc = write_both(out, data, k * es, err, errlen);
      done += k;
      written += k * es;
      if (o->progress) o->progress(o->progress_opaque, written, o->size);
      if (!rc && o->cancel && *o->cancel) rc = -2;
    }
    *total += t[i].elements;
  }
  free(buf);
  return rc;
}

int dcr_synth_write(const dcr_synth_options *o, const dcr_synth_sink out[2],
                    double *achieved_rate, char *err, size_t errlen) {
  if (!dtype_size(o->dtype))
    return fail(err, errlen, "dtype %d is not BF16 (9), F16 (8) or F32 (12)", o->dtype);
  if (!(o->rate >= 0.0 && o->rate <= 1.0)) /* NaN too */
    return fail(err, errlen, "rate %g is not between 0 and 1", o->rate);
  if (o->size > MAX_SIZE)
    return fail(err, errlen, "size %llu is over the maximum %llu", (unsigned long long)o->size,
                (unsigned long long)MAX_SIZE);
  if (o->layers > MAX_LAYERS)
    return fail(err, errlen, "%u layers is over the maximum %u", o->layers, MAX_LAYERS);

  /* Rate 1 cannot be reached by a step (values far from a rounding boundary stay);
   * half the elements change naturally and the rest are forced. */
  double lr = 0.0;
  if (o->rate > 0.0 && (lr = calibrate(o->dtype, o->rate < 1.0 ? o->rate : 0.5, o->seed)) < 0)
    return fail(err, errlen, "out of memory");
  size_t n = 0, header_length = 0;
  tensor *t = plan(o, &n);
  char *text = t ? header(t, n, o->dtype, &header_length) : NULL;
  if (!text) {
    free(t);
    return fail(err, errlen, "out of memory");
  }

  uint64_t changed = 0, total = 0;
  uint8_t length[8];
  put(length, (uint32_t)header_length, 4);
  put(length + 4, (uint32_t)((uint64_t)header_length >> 32), 4);
  const uint8_t *const lengths[2] = {length, length};
  const uint8_t *const headers[2] = {(const uint8_t *)text, (const uint8_t *)text};
  int rc = write_both(out, lengths, 8, err, errlen);
  if (!rc) rc = write_both(out, headers, header_length, err, errlen);
  if (!rc) rc = write_data(o, t, n, lr, out, &changed, &total, err, errlen);
  free(text);
  free(t);
  if (!rc && achieved_rate) *achieved_rate = total ? (double)changed / (double)total : 0.0;
  return rc;
}
