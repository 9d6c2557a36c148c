/*
 * train.c - real optimizer steps for benchmarking: trains a small Llama-shaped
 * language model with AdamW, the way an RL trainer does (FP32 master weights,
 * BF16 published after every step), and writes the published checkpoints of
 * consecutive steps as safetensors files. Synthetic pairs decide which values
 * change by a formula; here Adam, the gradients and the BF16 grid decide it.
 *
 *   cc -O2 -std=c11 -Wall -Wextra -Werror -o train bench/train.c -lm
 *   ./train --params 16M --pretrain 100 --lr 1.2e-6 --steps 1 out/
 *
 * Single file, libc and libm only (pthreads are in libc from glibc 2.34; add
 * -pthread elsewhere). Same arguments give the same bytes: seeds are fixed and
 * every float sum has one order whatever the thread count, because threads
 * split work by output element, never within a sum.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef __clang__
/* clang fuses a*b+c by default; the SIMD and scalar paths must round alike. */
#pragma STDC FP_CONTRACT OFF
#endif

static const char usage_text[] =
    "usage: train [OPTIONS] OUTDIR\n"
    "\n"
    "Trains a small Llama-shaped language model (token embedding; decoder blocks of\n"
    "RMSNorm, causal multi-head attention with RoPE, RMSNorm, SwiGLU MLP; final\n"
    "RMSNorm; untied lm_head) with AdamW on a generated language: --pretrain steps\n"
    "at --pretrain-lr, then --steps fine-tuning steps at --lr. Writes the BF16\n"
    "weights (round to nearest even of the FP32 master weights) as\n"
    "OUTDIR/step-0000.safetensors (after pre-training) .. step-K.safetensors, and\n"
    "prints per step the fraction of BF16 values that changed. With several --lr\n"
    "values, each fine-tunes the same pre-trained state into OUTDIR/lr-LR/.\n"
    "\n"
    "Size (the dims follow from --params unless given):\n"
    "  --params N       approximate parameter count, K/M suffixes (default 16M)\n"
    "  --dim D          model width, a multiple of --heads (default from --params)\n"
    "  --layers L       decoder blocks (default dim/128, at least 1)\n"
    "  --heads H        attention heads (default dim/64, at least 1)\n"
    "  --ffn F          MLP width (default 8/3 dim rounded up to 64)\n"
    "  --vocab V        vocabulary size (default 1024)\n"
    "  --seq T          tokens per sequence (default 128)\n"
    "  --batch B        sequences per step (default 4)\n"
    "Schedule:\n"
    "  --pretrain N     pre-training steps (default 100; linear warmup over N/10)\n"
    "  --pretrain-lr X  pre-training learning rate (default 1e-3)\n"
    "  --lr X[,X..]     fine-tuning learning rate(s) (default 1.2e-6). At the\n"
    "                   default size and schedule 1.2e-6 changes about 1% of the\n"
    "                   BF16 values per step, 4.5e-6 about 3%; fewer pre-training\n"
    "                   steps change more (smaller weights, less noisy gradients)\n"
    "  --steps K        fine-tuning steps, writing K+1 checkpoints (default 1)\n"
    "  --wd X           decoupled weight decay on matrices (default 0.01)\n"
    "  --seed S         seed of the language, the data and the init (default 1)\n"
    "Other:\n"
    "  --threads N      worker threads (default: online CPUs, at most 64); the\n"
    "                   output does not depend on it\n"
    "  --gradcheck      check the hand-written backward pass against finite\n"
    "                   differences (use a tiny model) and exit\n"
    "  -h, --help       show this help\n";

/* ---------------------------------------------------------------- utilities */

static void die(const char *fmt, const char *arg) {
  fprintf(stderr, "train: ");
  fprintf(stderr, fmt, arg);
  fputc('\n', stderr);
  exit(1);
}

static void *xalloc(size_t n) {
  /* zeroed, so Adam moments and gradient buffers start at 0 */
  void *p = calloc(n ? n : 1, 1);
  if (!p) die("out of memory (%s)", "calloc");
  return p;
}

static float *falloc(size_t n) { return xalloc(n * sizeof(float)); }

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

typedef struct { uint64_t s; } Rng;
static uint64_t rnext(Rng *r) { return mix64(r->s++); }
static double runif(Rng *r) { return ((rnext(r) >> 11) + 0.5) * 0x1p-53; } /* (0,1) */
static double rnormal(Rng *r) {
  double u = runif(r), v = runif(r);
  return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

/* ------------------------------------------------------------------ threads */

/* A parallel region is [0, n) items split into contiguous ranges, one per thread;
 * callers make items whole output elements so no sum is ever split. */
typedef void (*TaskFn)(void *ctx, long lo, long hi);
typedef struct { TaskFn fn; void *ctx; long lo, hi; } Job;
enum { MAX_THREADS = 64 };
static int g_threads = 1;

static void *job_run(void *p) {
  Job *j = p;
  j->fn(j->ctx, j->lo, j->hi);
  return NULL;
}

static void par(long n, TaskFn fn, void *ctx) {
  long t = g_threads < n ? g_threads : n;
  if (t <= 1) {
    if (n > 0) fn(ctx, 0, n);
    return;
  }
  pthread_t th[MAX_THREADS];
  Job jobs[MAX_THREADS];
  int started[MAX_THREADS] = {0};
  for (long i = 0; i < t; i++) jobs[i] = (Job){fn, ctx, n * i / t, n * (i + 1) / t};
  for (long i = 1; i < t; i++) started[i] = pthread_create(&th[i], NULL, job_run, &jobs[i]) == 0;
  job_run(&jobs[0]);
  for (long i = 1; i < t; i++) {
    if (started[i])
      pthread_join(th[i], NULL);
    else
      job_run(&jobs[i]); /* no thread to be had: same work, same result */
  }
}

/* --------------------------------------------------------------------- GEMM */

/* C = A B (acc = 0) or C += A B, row-major. Every element is c + a0*b0 + a1*b1 +
 * ... in k order, one rounding per operation, in the SIMD tile, the row tail and
 * the column tail alike: the result depends on neither the tiling nor the CPU
 * path nor the thread split. GCC/clang vector extensions keep it portable; on
 * x86-64 an AVX2 copy of the same code is picked at run time. */
typedef float v8 __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4), may_alias));
#define LD(p) (*(const v8u *)(p))
#define ST(p, x) (*(v8u *)(p) = (x))
enum { MR = 4, NR = 16, KB = 256 };

typedef struct {
  long m, n, k, lda, ldb, ldc;
  const float *a, *b;
  float *c;
  int acc;
} Gemm;

static inline __attribute__((always_inline)) void gemm_rows_body(const Gemm *g, long r0, long r1) {
  const long n = g->n, k = g->k, lda = g->lda, ldb = g->ldb, ldc = g->ldc;
  const float *a = g->a, *b = g->b;
  float *c = g->c;
  if (!g->acc)
    for (long i = r0; i < r1; i++) memset(c + i * ldc, 0, n * sizeof(float));
  for (long k0 = 0; k0 < k; k0 += KB) {
    const long k1 = k0 + KB < k ? k0 + KB : k;
    long j = 0;
    for (; j + NR <= n; j += NR) {
      long i = r0;
      for (; i + MR <= r1; i += MR) {
        const float *a0 = a + i * lda, *a1 = a0 + lda, *a2 = a1 + lda, *a3 = a2 + lda;
        float *c0 = c + i * ldc + j, *c1 = c0 + ldc, *c2 = c1 + ldc, *c3 = c2 + ldc;
        v8 s00 = LD(c0), s01 = LD(c0 + 8), s10 = LD(c1), s11 = LD(c1 + 8);
        v8 s20 = LD(c2), s21 = LD(c2 + 8), s30 = LD(c3), s31 = LD(c3 + 8);
        for (long kk = k0; kk < k1; kk++) {
          const float *bp = b + kk * ldb + j;
          const v8 b0 = LD(bp), b1 = LD(bp + 8);
          float x;
          x = a0[kk]; s00 += x * b0; s01 += x * b1;
          x = a1[kk]; s10 += x * b0; s11 += x * b1;
          x = a2[kk]; s20 += x * b0; s21 += x * b1;
          x = a3[kk]; s30 += x * b0; s31 += x * b1;
        }
        ST(c0, s00); ST(c0 + 8, s01); ST(c1, s10); ST(c1 + 8, s11);
        ST(c2, s20); ST(c2 + 8, s21); ST(c3, s30); ST(c3 + 8, s31);
      }
      for (; i < r1; i++) {
        const float *a0 = a + i * lda;
        float *c0 = c + i * ldc + j;
        v8 s00 = LD(c0), s01 = LD(c0 + 8);
        for (long kk = k0; kk < k1; kk++) {
          const float *bp = b + kk * ldb + j;
          const float x = a0[kk];
          s00 += x * LD(bp);
          s01 += x * LD(bp + 8);
        }
        ST(c0, s00); ST(c0 + 8, s01);
      }
    }
    for (long i = r0; i < r1 && j < n; i++)
      for (long jj = j; jj < n; jj++) {
        float s = c[i * ldc + jj];
        for (long kk = k0; kk < k1; kk++) {
          const float p = a[i * lda + kk] * b[kk * ldb + jj];
          s += p;
        }
        c[i * ldc + jj] = s;
      }
  }
}

static void gemm_rows_generic(const Gemm *g, long r0, long r1) { gemm_rows_body(g, r0, r1); }

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(TRAIN_NO_AVX2)
__attribute__((target("avx2"))) static void gemm_rows_avx2(const Gemm *g, long r0, long r1) {
  gemm_rows_body(g, r0, r1);
}
static int use_avx2(void) {
  static int v = -1;
  if (v < 0) {
    __builtin_cpu_init();
    v = __builtin_cpu_supports("avx2") ? 1 : 0;
  }
  return v;
}
#define GEMM_ROWS(g, r0, r1) (use_avx2() ? gemm_rows_avx2(g, r0, r1) : gemm_rows_generic(g, r0, r1))
#else
#define GEMM_ROWS(g, r0, r1) gemm_rows_generic(g, r0, r1)
#endif

static void gemm_task(void *ctx, long lo, long hi) {
  const Gemm *g = ctx;
  long r0 = lo * MR, r1 = hi * MR;
  if (r1 > g->m) r1 = g->m;
  GEMM_ROWS(g, r0, r1);
}

static void mm(long m, long n, long k, const float *a, long lda, const float *b, long ldb, float *c,
               long ldc, int acc) {
  Gemm g = {m, n, k, lda, ldb, ldc, a, b, c, acc};
  long blocks = (m + MR - 1) / MR;
  if (m * n * k < 1 << 16) /* a thread costs more than it saves */
    gemm_task(&g, 0, blocks);
  else
    par(blocks, gemm_task, &g);
}

typedef struct { long rows, cols; const float *src; float *dst; } Tr;

static void transpose_task(void *ctx, long lo, long hi) {
  const Tr *t = ctx; /* items are 32-row blocks of src */
  for (long i0 = lo * 32; i0 < hi * 32 && i0 < t->rows; i0 += 32)
    for (long j0 = 0; j0 < t->cols; j0 += 32)
      for (long i = i0; i < i0 + 32 && i < t->rows; i++)
        for (long j = j0; j < j0 + 32 && j < t->cols; j++) t->dst[j * t->rows + i] = t->src[i * t->cols + j];
}

static void transpose(long rows, long cols, const float *src, float *dst) {
  Tr t = {rows, cols, src, dst};
  par((rows + 31) / 32, transpose_task, &t);
}

/* -------------------------------------------------------------------- model */

typedef struct {
  long vocab, dim, layers, heads, ffn, seq, batch;
} Dims;

typedef struct {
  char name[80];
  long rows, cols; /* cols 0: a vector */
  size_t off, n;   /* in the flat parameter arrays, which follow the file order */
  size_t toff;     /* the transpose's offset in wt (matrices) */
} Tensor;

typedef struct {
  int ln1, wq, wk, wv, wo, ln2, wg, wu, wd;
} LayerIx;

typedef struct {
  float *x, *h1, *r1, *q, *k, *v, *p, *o, *x2, *h2, *r2, *gt, *u, *act;
} Acts;

typedef struct {
  Dims d;
  long ntok, hd;
  size_t np, nmat;
  Tensor *t;
  int nt, embed, head, norm;
  LayerIx *ly;
  float *w, *g, *m1, *m2, *wt; /* weights, gradients, Adam moments, transposed matrices */
  long step;                   /* Adam's t */
  Acts *a;                     /* per layer; a[layers].x is the last residual stream */
  float *hf, *rf, *logits;
  float *dx, *dx2, *dh, *dq, *dk, *dv, *dout, *dp, *dact, *dgt, *du, *tr, *tmp;
  float *rcos, *rsin;
  int *tok; /* batch rows of seq+1 tokens: inputs and next-token targets */
} Model;

static long param_count(const Dims *d) {
  return 2 * d->vocab * d->dim + d->layers * (4 * d->dim * d->dim + 3 * d->dim * d->ffn + 2 * d->dim) + d->dim;
}

static long default_ffn(long dim) { return (8 * dim / 3 + 63) / 64 * 64; }

static int cmp_tensor(const void *a, const void *b) {
  return strcmp(((const Tensor *)a)->name, ((const Tensor *)b)->name);
}

static int find_tensor(const Model *m, const char *name) {
  for (int i = 0; i < m->nt; i++)
    if (!strcmp(m->t[i].name, name)) return i;
  die("internal: no tensor %s", name);
  return -1;
}

#define W(m, i) ((m)->w + (m)->t[i].off)
#define G(m, i) ((m)->g + (m)->t[i].off)
#define WT(m, i) ((m)->wt + (m)->t[i].toff)

static void model_init(Model *m, const Dims *d, uint64_t seed) {
  memset(m, 0, sizeof *m);
  m->d = *d;
  const long D = d->dim, F = d->ffn, V = d->vocab, L = d->layers, N = d->batch * d->seq, T = d->seq;
  m->ntok = N;
  m->hd = D / d->heads;
  m->nt = (int)(3 + 9 * L);
  m->t = xalloc(m->nt * sizeof(Tensor));
  int k = 0;
#define ADD(r, c, ...) (snprintf(m->t[k].name, sizeof m->t[k].name, __VA_ARGS__), m->t[k].rows = (r), m->t[k].cols = (c), k++)
  ADD(V, D, "model.embed_tokens.weight");
  ADD(V, D, "lm_head.weight");
  ADD(D, 0, "model.norm.weight");
  for (long l = 0; l < L; l++) {
    ADD(D, 0, "model.layers.%ld.input_layernorm.weight", l);
    ADD(D, D, "model.layers.%ld.self_attn.q_proj.weight", l);
    ADD(D, D, "model.layers.%ld.self_attn.k_proj.weight", l);
    ADD(D, D, "model.layers.%ld.self_attn.v_proj.weight", l);
    ADD(D, D, "model.layers.%ld.self_attn.o_proj.weight", l);
    ADD(D, 0, "model.layers.%ld.post_attention_layernorm.weight", l);
    ADD(F, D, "model.layers.%ld.mlp.gate_proj.weight", l);
    ADD(F, D, "model.layers.%ld.mlp.up_proj.weight", l);
    ADD(D, F, "model.layers.%ld.mlp.down_proj.weight", l);
  }
#undef ADD
  /* The flat arrays follow the file's (sorted) order so a checkpoint is one pass. */
  qsort(m->t, m->nt, sizeof(Tensor), cmp_tensor);
  for (int i = 0; i < m->nt; i++) {
    Tensor *t = &m->t[i];
    t->n = t->rows * (t->cols ? t->cols : 1);
    t->off = m->np;
    m->np += t->n;
    if (t->cols) {
      t->toff = m->nmat;
      m->nmat += t->n;
    }
  }
  m->embed = find_tensor(m, "model.embed_tokens.weight");
  m->head = find_tensor(m, "lm_head.weight");
  m->norm = find_tensor(m, "model.norm.weight");
  m->ly = xalloc(L * sizeof(LayerIx));
  for (long l = 0; l < L; l++) {
    char nm[96];
#define IX(f, s) (snprintf(nm, sizeof nm, "model.layers.%ld." s, l), m->ly[l].f = find_tensor(m, nm))
    IX(ln1, "input_layernorm.weight");
    IX(wq, "self_attn.q_proj.weight");
    IX(wk, "self_attn.k_proj.weight");
    IX(wv, "self_attn.v_proj.weight");
    IX(wo, "self_attn.o_proj.weight");
    IX(ln2, "post_attention_layernorm.weight");
    IX(wg, "mlp.gate_proj.weight");
    IX(wu, "mlp.up_proj.weight");
    IX(wd, "mlp.down_proj.weight");
#undef IX
  }
  m->w = falloc(m->np);
  m->g = falloc(m->np);
  m->m1 = falloc(m->np);
  m->m2 = falloc(m->np);
  m->wt = falloc(m->nmat);

  /* Llama's init: N(0, 0.02), the projections back into the residual stream
   * scaled by 1/sqrt(2L) so the stream's variance does not grow with depth. */
  Rng r = {mix64(seed ^ 0x1a2b3c4d5e6f7788ull)};
  for (int i = 0; i < m->nt; i++) {
    Tensor *t = &m->t[i];
    float *p = m->w + t->off;
    if (!t->cols) {
      for (size_t j = 0; j < t->n; j++) p[j] = 1.0f;
      continue;
    }
    double sd = 0.02;
    if (strstr(t->name, "o_proj") || strstr(t->name, "down_proj")) sd /= sqrt(2.0 * L);
    for (size_t j = 0; j < t->n; j++) p[j] = (float)(sd * rnormal(&r));
  }

  m->a = xalloc((L + 1) * sizeof(Acts));
  for (long l = 0; l <= L; l++) {
    Acts *a = &m->a[l];
    a->x = falloc(N * D);
    if (l == L) break;
    a->h1 = falloc(N * D); a->r1 = falloc(N);
    a->q = falloc(N * D); a->k = falloc(N * D); a->v = falloc(N * D);
    a->p = falloc(d->batch * d->heads * T * T);
    a->o = falloc(N * D); a->x2 = falloc(N * D);
    a->h2 = falloc(N * D); a->r2 = falloc(N);
    a->gt = falloc(N * F); a->u = falloc(N * F); a->act = falloc(N * F);
  }
  m->hf = falloc(N * D); m->rf = falloc(N); m->logits = falloc(N * V);
  m->dx = falloc(N * D); m->dx2 = falloc(N * D); m->dh = falloc(N * D);
  m->dq = falloc(N * D); m->dk = falloc(N * D); m->dv = falloc(N * D); m->dout = falloc(N * D);
  m->dp = falloc(d->batch * d->heads * T * T);
  m->dact = falloc(N * F); m->dgt = falloc(N * F); m->du = falloc(N * F);
  long wide = F > V ? F : V;
  m->tr = falloc(N * (wide > D ? wide : D));
  m->tmp = falloc(N * D);
  m->tok = xalloc(d->batch * (T + 1) * sizeof(int));
  /* RoPE as in Llama (rotate_half pairs i and i+hd/2, base 10000) */
  long half = m->hd / 2;
  m->rcos = falloc(T * half);
  m->rsin = falloc(T * half);
  for (long p = 0; p < T; p++)
    for (long i = 0; i < half; i++) {
      double ang = p * pow(10000.0, -2.0 * i / m->hd);
      m->rcos[p * half + i] = (float)cos(ang);
      m->rsin[p * half + i] = (float)sin(ang);
    }
}

static void refresh_transposes(Model *m) {
  for (int i = 0; i < m->nt; i++)
    if (m->t[i].cols) transpose(m->t[i].rows, m->t[i].cols, W(m, i), WT(m, i));
}

/* --------------------------------------------------------------------- data */

/* A generated "language": the next token follows from the previous one (half the
 * time) or two (otherwise) through a hashed table of 8 candidates with Zipf
 * weights, plus 1/32 noise; tokens are about log-uniform over the vocabulary, so
 * embedding rows see very different gradient frequencies, as in real text. */
static long lang_token(uint64_t h, long V) {
  int bits = 0;
  while ((2L << bits) <= V) bits++; /* buckets [2^b - 1, 2^(b+1) - 1), b < bits */
  long b = (long)(h % bits), t = (1L << b) - 1 + (long)((h >> 8) % (1ull << b));
  return t < V ? t : t % V;
}

static void make_batch(Model *m, uint64_t seed, long step) {
  static const int zipf[8] = {840, 420, 280, 210, 168, 140, 120, 105}; /* 840/(j+1) */
  const long B = m->d.batch, T = m->d.seq, V = m->d.vocab;
  const uint64_t lang = mix64(seed ^ 0x5eed5eed5eedull);
  for (long b = 0; b < B; b++) {
    Rng r = {mix64(seed ^ mix64((uint64_t)step * 1000003u + (uint64_t)b))};
    int *s = m->tok + b * (T + 1);
    s[0] = (int)lang_token(rnext(&r), V);
    s[1] = (int)lang_token(rnext(&r), V);
    for (long t = 2; t <= T; t++) {
      uint64_t x = rnext(&r);
      if ((x & 31) == 0) {
        s[t] = (int)lang_token(rnext(&r), V);
        continue;
      }
      uint64_t ctx = (x >> 5) & 1 ? mix64(lang ^ (uint64_t)s[t - 1])
                                  : mix64(lang ^ ((uint64_t)s[t - 2] << 20) ^ (uint64_t)s[t - 1] ^ 0xabcdefull);
      int pick = (int)((x >> 8) % 2283), j = 0;
      while (pick >= zipf[j]) pick -= zipf[j++];
      s[t] = (int)lang_token(mix64(ctx + (uint64_t)j), V);
    }
  }
}

/* ------------------------------------------------------------------ forward */

static void rmsnorm(long n, long d, const float *x, const float *g, float *y, float *r) {
  for (long i = 0; i < n; i++) {
    const float *xi = x + i * d;
    double ss = 0;
    for (long j = 0; j < d; j++) ss += (double)xi[j] * xi[j];
    float ri = (float)(1.0 / sqrt(ss / d + 1e-5));
    r[i] = ri;
    for (long j = 0; j < d; j++) y[i * d + j] = xi[j] * ri * g[j];
  }
}

/* dx += d(rmsnorm)/dx dy; dg += d/dg. y = x r g with r = (mean x^2 + eps)^-1/2. */
static void rmsnorm_back(long n, long d, const float *x, const float *g, const float *r, const float *dy,
                         float *dx, float *dg) {
  for (long i = 0; i < n; i++) {
    const float *xi = x + i * d, *dyi = dy + i * d;
    const float ri = r[i];
    double dot = 0;
    for (long j = 0; j < d; j++) dot += (double)dyi[j] * g[j] * xi[j];
    const float c = (float)(dot * ri * ri * ri / d);
    for (long j = 0; j < d; j++) {
      dx[i * d + j] += ri * g[j] * dyi[j] - xi[j] * c;
      dg[j] += dyi[j] * xi[j] * ri;
    }
  }
}

static void rope(const Model *m, float *x, int inverse) {
  const long N = m->ntok, D = m->d.dim, T = m->d.seq, hd = m->hd, half = hd / 2;
  const float sg = inverse ? -1.0f : 1.0f; /* the inverse rotation is the backward */
  for (long n = 0; n < N; n++) {
    const float *c = m->rcos + (n % T) * half, *s = m->rsin + (n % T) * half;
    for (long h = 0; h < D; h += hd) {
      float *p = x + n * D + h;
      for (long i = 0; i < half; i++) {
        float a = p[i], b = p[i + half];
        p[i] = a * c[i] - sg * b * s[i];
        p[i + half] = b * c[i] + sg * a * s[i];
      }
    }
  }
}

typedef struct { const Model *m; const Acts *a; } AttnCtx;

static void attn_fwd_task(void *ctx, long lo, long hi) {
  const AttnCtx *c = ctx;
  const Model *m = c->m;
  const Acts *a = c->a;
  const long T = m->d.seq, D = m->d.dim, H = m->d.heads, hd = m->hd;
  const float scale = 1.0f / sqrtf((float)hd);
  for (long bh = lo; bh < hi; bh++) {
    const long b = bh / H, h = bh % H;
    for (long t = 0; t < T; t++) {
      const float *qt = a->q + (b * T + t) * D + h * hd;
      float *row = a->p + (bh * T + t) * T, mx = -INFINITY;
      for (long s = 0; s <= t; s++) {
        const float *ks = a->k + (b * T + s) * D + h * hd;
        float dot = 0;
        for (long i = 0; i < hd; i++) dot += qt[i] * ks[i];
        row[s] = dot * scale;
        if (row[s] > mx) mx = row[s];
      }
      float sum = 0;
      for (long s = 0; s <= t; s++) sum += row[s] = expf(row[s] - mx);
      for (long s = 0; s <= t; s++) row[s] /= sum;
      for (long s = t + 1; s < T; s++) row[s] = 0;
      float *ot = a->o + (b * T + t) * D + h * hd;
      for (long i = 0; i < hd; i++) ot[i] = 0;
      for (long s = 0; s <= t; s++) {
        const float *vs = a->v + (b * T + s) * D + h * hd, ps = row[s];
        for (long i = 0; i < hd; i++) ot[i] += ps * vs[i];
      }
    }
  }
}

static float silu(float z) { return z / (1.0f + expf(-z)); }

/* Mean next-token cross-entropy; leaves dloss/dlogits in m->logits. */
static double forward(Model *m) {
  const long N = m->ntok, D = m->d.dim, F = m->d.ffn, V = m->d.vocab, T = m->d.seq, L = m->d.layers;
  const float *E = W(m, m->embed);
  for (long n = 0; n < N; n++) {
    long b = n / T, t = n % T;
    memcpy(m->a[0].x + n * D, E + (long)m->tok[b * (T + 1) + t] * D, D * sizeof(float));
  }
  for (long l = 0; l < L; l++) {
    Acts *a = &m->a[l];
    const LayerIx *ix = &m->ly[l];
    rmsnorm(N, D, a->x, W(m, ix->ln1), a->h1, a->r1);
    mm(N, D, D, a->h1, D, WT(m, ix->wq), D, a->q, D, 0);
    mm(N, D, D, a->h1, D, WT(m, ix->wk), D, a->k, D, 0);
    mm(N, D, D, a->h1, D, WT(m, ix->wv), D, a->v, D, 0);
    rope(m, a->q, 0);
    rope(m, a->k, 0);
    AttnCtx ac = {m, a};
    par(m->d.batch * m->d.heads, attn_fwd_task, &ac);
    mm(N, D, D, a->o, D, WT(m, ix->wo), D, m->tmp, D, 0);
    for (long i = 0; i < N * D; i++) a->x2[i] = a->x[i] + m->tmp[i];
    rmsnorm(N, D, a->x2, W(m, ix->ln2), a->h2, a->r2);
    mm(N, F, D, a->h2, D, WT(m, ix->wg), F, a->gt, F, 0);
    mm(N, F, D, a->h2, D, WT(m, ix->wu), F, a->u, F, 0);
    for (long i = 0; i < N * F; i++) a->act[i] = silu(a->gt[i]) * a->u[i];
    mm(N, D, F, a->act, F, WT(m, ix->wd), D, m->tmp, D, 0);
    float *xo = m->a[l + 1].x;
    for (long i = 0; i < N * D; i++) xo[i] = a->x2[i] + m->tmp[i];
  }
  rmsnorm(N, D, m->a[L].x, W(m, m->norm), m->hf, m->rf);
  mm(N, V, D, m->hf, D, WT(m, m->head), V, m->logits, V, 0);
  double loss = 0;
  for (long n = 0; n < N; n++) {
    float *z = m->logits + n * V, mx = -INFINITY;
    const long y = m->tok[(n / T) * (T + 1) + n % T + 1];
    for (long j = 0; j < V; j++)
      if (z[j] > mx) mx = z[j];
    double sum = 0;
    for (long j = 0; j < V; j++) sum += z[j] = expf(z[j] - mx);
    loss += log(sum) - (z[y] > 0 ? log(z[y]) : -1e30);
    const float inv = (float)(1.0 / sum), scale = 1.0f / N;
    for (long j = 0; j < V; j++) z[j] = z[j] * inv * scale;
    z[y] -= scale;
  }
  return loss / N;
}

/* ----------------------------------------------------------------- backward */

static void attn_bwd_task(void *ctx, long lo, long hi) {
  const AttnCtx *c = ctx;
  const Model *m = c->m;
  const Acts *a = c->a;
  const long T = m->d.seq, D = m->d.dim, H = m->d.heads, hd = m->hd;
  const float scale = 1.0f / sqrtf((float)hd);
  for (long bh = lo; bh < hi; bh++) {
    const long b = bh / H, h = bh % H;
    for (long t = 0; t < T; t++) {
      memset(m->dk + (b * T + t) * D + h * hd, 0, hd * sizeof(float));
      memset(m->dv + (b * T + t) * D + h * hd, 0, hd * sizeof(float));
    }
    for (long t = 0; t < T; t++) {
      const float *dot_ = m->dout + (b * T + t) * D + h * hd, *qt = a->q + (b * T + t) * D + h * hd;
      const float *row = a->p + (bh * T + t) * T;
      float *dprow = m->dp + (bh * T + t) * T, *dqt = m->dq + (b * T + t) * D + h * hd;
      float sum = 0;
      for (long s = 0; s <= t; s++) {
        const float *vs = a->v + (b * T + s) * D + h * hd;
        float *dvs = m->dv + (b * T + s) * D + h * hd, dot = 0;
        for (long i = 0; i < hd; i++) {
          dot += dot_[i] * vs[i];
          dvs[i] += row[s] * dot_[i];
        }
        dprow[s] = dot;
        sum += row[s] * dot;
      }
      for (long i = 0; i < hd; i++) dqt[i] = 0;
      for (long s = 0; s <= t; s++) {
        const float ds = row[s] * (dprow[s] - sum) * scale;
        const float *ks = a->k + (b * T + s) * D + h * hd;
        float *dks = m->dk + (b * T + s) * D + h * hd;
        for (long i = 0; i < hd; i++) {
          dqt[i] += ds * ks[i];
          dks[i] += ds * qt[i];
        }
      }
    }
  }
}

/* dW += dY^T X, for a weight W[out][in] used as Y = X W^T */
static void weight_grad(Model *m, int ti, const float *dy, long out, const float *x, long in) {
  const long N = m->ntok;
  transpose(N, out, dy, m->tr);
  mm(out, in, N, m->tr, N, x, in, G(m, ti), in, 1);
}

static void backward(Model *m) {
  const long N = m->ntok, D = m->d.dim, F = m->d.ffn, V = m->d.vocab, T = m->d.seq, L = m->d.layers;
  memset(m->g, 0, m->np * sizeof(float));
  /* head: logits = hf lm_head^T, hf = rmsnorm(x_L) */
  weight_grad(m, m->head, m->logits, V, m->hf, D);
  mm(N, D, V, m->logits, V, W(m, m->head), D, m->dh, D, 0);
  memset(m->dx, 0, N * D * sizeof(float));
  rmsnorm_back(N, D, m->a[L].x, W(m, m->norm), m->rf, m->dh, m->dx, G(m, m->norm));
  for (long l = L - 1; l >= 0; l--) {
    Acts *a = &m->a[l];
    const LayerIx *ix = &m->ly[l];
    /* MLP: x_out = x2 + down(silu(gate h2) * up h2) */
    weight_grad(m, ix->wd, m->dx, D, a->act, F);
    mm(N, F, D, m->dx, D, W(m, ix->wd), F, m->dact, F, 0);
    for (long i = 0; i < N * F; i++) {
      const float z = a->gt[i], sg = 1.0f / (1.0f + expf(-z));
      m->du[i] = m->dact[i] * z * sg;
      m->dgt[i] = m->dact[i] * a->u[i] * sg * (1.0f + z * (1.0f - sg));
    }
    weight_grad(m, ix->wg, m->dgt, F, a->h2, D);
    weight_grad(m, ix->wu, m->du, F, a->h2, D);
    mm(N, D, F, m->dgt, F, W(m, ix->wg), D, m->dh, D, 0);
    mm(N, D, F, m->du, F, W(m, ix->wu), D, m->dh, D, 1);
    memcpy(m->dx2, m->dx, N * D * sizeof(float));
    rmsnorm_back(N, D, a->x2, W(m, ix->ln2), a->r2, m->dh, m->dx2, G(m, ix->ln2));
    /* attention: x2 = x + o_proj(attn(rope(q_proj h1), rope(k_proj h1), v_proj h1)) */
    weight_grad(m, ix->wo, m->dx2, D, a->o, D);
    mm(N, D, D, m->dx2, D, W(m, ix->wo), D, m->dout, D, 0);
    AttnCtx ac = {m, a};
    par(m->d.batch * m->d.heads, attn_bwd_task, &ac);
    rope(m, m->dq, 1);
    rope(m, m->dk, 1);
    weight_grad(m, ix->wq, m->dq, D, a->h1, D);
    weight_grad(m, ix->wk, m->dk, D, a->h1, D);
    weight_grad(m, ix->wv, m->dv, D, a->h1, D);
    mm(N, D, D, m->dq, D, W(m, ix->wq), D, m->dh, D, 0);
    mm(N, D, D, m->dk, D, W(m, ix->wk), D, m->dh, D, 1);
    mm(N, D, D, m->dv, D, W(m, ix->wv), D, m->dh, D, 1);
    memcpy(m->dx, m->dx2, N * D * sizeof(float));
    rmsnorm_back(N, D, a->x, W(m, ix->ln1), a->r1, m->dh, m->dx, G(m, ix->ln1));
  }
  float *dE = G(m, m->embed);
  for (long n = 0; n < N; n++) {
    float *row = dE + (long)m->tok[(n / T) * (T + 1) + n % T] * D;
    for (long j = 0; j < D; j++) row[j] += m->dx[n * D + j];
  }
}

/* --------------------------------------------------------------------- Adam */

typedef struct { Model *m; float lr, wd, clip_scale, bc1, bc2; size_t off, end; int decay; } AdamCtx;
enum { ADAM_CHUNK = 1 << 14 };
static const float BETA1 = 0.9f, BETA2 = 0.95f, EPS = 1e-8f;

static void adam_task(void *ctx, long lo, long hi) {
  const AdamCtx *c = ctx;
  Model *m = c->m;
  size_t end = c->off + (size_t)hi * ADAM_CHUNK;
  if (end > c->end) end = c->end;
  for (size_t i = c->off + (size_t)lo * ADAM_CHUNK; i < end; i++) {
    const float g = m->g[i] * c->clip_scale;
    m->m1[i] = BETA1 * m->m1[i] + (1 - BETA1) * g;
    m->m2[i] = BETA2 * m->m2[i] + (1 - BETA2) * g * g;
    const float upd = (m->m1[i] / c->bc1) / (sqrtf(m->m2[i] / c->bc2) + EPS);
    m->w[i] -= c->lr * (upd + (c->decay ? c->wd * m->w[i] : 0.0f));
  }
}

/* One AdamW step (betas 0.9/0.95, eps 1e-8, as common in LLM post-training),
 * gradients clipped to global norm 1. Returns the gradient norm. */
static double adam_step(Model *m, float lr, float wd) {
  double ss = 0;
  for (size_t i = 0; i < m->np; i++) ss += (double)m->g[i] * m->g[i];
  const double norm = sqrt(ss);
  m->step++;
  AdamCtx c = {m, lr, wd, norm > 1.0 ? (float)(1.0 / norm) : 1.0f,
               (float)(1 - pow(BETA1, (double)m->step)), (float)(1 - pow(BETA2, (double)m->step)), 0, 0, 0};
  for (int i = 0; i < m->nt; i++) {
    /* a task never spans two tensors, so its decay flag is uniform */
    c.off = m->t[i].off;
    c.end = m->t[i].off + m->t[i].n;
    c.decay = m->t[i].cols != 0;
    par((long)((m->t[i].n + ADAM_CHUNK - 1) / ADAM_CHUNK), adam_task, &c);
  }
  refresh_transposes(m);
  return norm;
}

/* -------------------------------------------------------------- checkpoints */

static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

static void publish(const Model *m, uint16_t *bf) {
  for (size_t i = 0; i < m->np; i++) bf[i] = to_bf16(m->w[i]);
}

static void write_safetensors(const Model *m, const uint16_t *bf, const char *path) {
  size_t cap = 256 + (size_t)m->nt * 320, len = 0; /* an entry is under 300 bytes */
  char *h = xalloc(cap);
  len += snprintf(h + len, cap - len, "{\"__metadata__\":{\"format\":\"pt\"}");
  for (int i = 0; i < m->nt; i++) {
    const Tensor *t = &m->t[i];
    char shape[64];
    if (t->cols)
      snprintf(shape, sizeof shape, "%ld,%ld", t->rows, t->cols);
    else
      snprintf(shape, sizeof shape, "%ld", t->rows);
    len += snprintf(h + len, cap - len, ",\"%s\":{\"dtype\":\"BF16\",\"shape\":[%s],\"data_offsets\":[%zu,%zu]}",
                    t->name, shape, t->off * 2, (t->off + t->n) * 2);
  }
  len += snprintf(h + len, cap - len, "}");
  while (len % 8) h[len++] = ' '; /* data starts 8-aligned, as safetensors writers do */
  if (len >= cap) die("internal: header overflow for %s", path);

  char tmp[4200];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) die("path too long: %s", path);
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    fprintf(stderr, "train: %s: %s\n", tmp, strerror(errno));
    exit(1);
  }
  unsigned char n8[8];
  for (int i = 0; i < 8; i++) n8[i] = (unsigned char)((uint64_t)len >> (8 * i));
  int ok = fwrite(n8, 1, 8, f) == 8 && fwrite(h, 1, len, f) == len;
  enum { BUF = 1 << 16 };
  static unsigned char buf[2 * BUF];
  for (size_t i = 0; ok && i < m->np; i += BUF) {
    size_t k = m->np - i < BUF ? m->np - i : BUF;
    for (size_t j = 0; j < k; j++) { /* little-endian whatever the host */
      buf[2 * j] = (unsigned char)bf[i + j];
      buf[2 * j + 1] = (unsigned char)(bf[i + j] >> 8);
    }
    ok = fwrite(buf, 1, 2 * k, f) == 2 * k;
  }
  if (fclose(f) != 0) ok = 0;
  /* renamed only when whole, so a reader never sees a half-written step */
  if (!ok || rename(tmp, path) != 0) {
    fprintf(stderr, "train: writing %s: %s\n", path, strerror(errno));
    remove(tmp);
    exit(1);
  }
  free(h);
}

static void make_dir(const char *path) {
  if (mkdir(path, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "train: %s: %s\n", path, strerror(errno));
    exit(1);
  }
}

/* ---------------------------------------------------------------- gradcheck */

/* Per tensor, the loss's slope along the tensor's own gradient must equal the
 * gradient's norm: a wrong transpose, sign or missing term breaks the equality,
 * and one direction per tensor lifts the signal far above float noise. */
static int gradcheck(Model *m, uint64_t seed) {
  make_batch(m, seed, 0);
  refresh_transposes(m);
  forward(m);
  backward(m);
  float *g0 = falloc(m->np), *w0 = falloc(m->np);
  memcpy(g0, m->g, m->np * sizeof(float));
  memcpy(w0, m->w, m->np * sizeof(float));
  int bad = 0;
  for (int i = 0; i < m->nt; i++) {
    const Tensor *t = &m->t[i];
    double gn = 0;
    for (size_t j = 0; j < t->n; j++) gn += (double)g0[t->off + j] * g0[t->off + j];
    gn = sqrt(gn);
    if (gn == 0) {
      fprintf(stderr, "%-52s zero gradient\n", t->name);
      continue;
    }
    double lp[2];
    const double h = 1e-3 / gn; /* moves the loss by about 1e-3 */
    for (int s = 0; s < 2; s++) {
      for (size_t j = 0; j < t->n; j++)
        m->w[t->off + j] = (float)(w0[t->off + j] + (s ? -h : h) * g0[t->off + j] / gn);
      refresh_transposes(m);
      lp[s] = forward(m);
      memcpy(m->w + t->off, w0 + t->off, t->n * sizeof(float));
    }
    const double num = (lp[0] - lp[1]) / (2 * h), rel = fabs(num - gn) / gn;
    fprintf(stderr, "%-52s |g| %.6e  slope %.6e  rel.err %.2e%s\n", t->name, gn, num, rel,
            rel > 2e-2 ? "  BAD" : "");
    bad |= rel > 2e-2;
  }
  refresh_transposes(m);
  free(g0);
  free(w0);
  fprintf(stderr, "gradcheck: %s\n", bad ? "FAILED" : "ok");
  return bad;
}

/* --------------------------------------------------------------------- main */

static long parse_long(const char *opt, const char *s, long lo, long hi) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  double mul = 1;
  if (*end == 'k' || *end == 'K') mul = 1e3, end++;
  else if (*end == 'm' || *end == 'M') mul = 1e6, end++;
  else if (*end == 'g' || *end == 'G') mul = 1e9, end++;
  v *= mul;
  if (errno || end == s || *end || v != floor(v) || v < lo || v > hi) {
    fprintf(stderr, "train: %s: '%s' is not a whole number in [%ld, %ld]\n", opt, s, lo, hi);
    exit(2);
  }
  return (long)v;
}

static double parse_double(const char *opt, const char *s, double lo, double hi) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= lo && v <= hi)) {
    fprintf(stderr, "train: %s: '%s' is not a number in [%g, %g]\n", opt, s, lo, hi);
    exit(2);
  }
  return v;
}

static void usage_error(const char *msg, const char *arg) {
  fprintf(stderr, "train: ");
  fprintf(stderr, msg, arg);
  fprintf(stderr, "\n(train --help for usage)\n");
  exit(2);
}

int main(int argc, char **argv) {
  long params = 16000000, dim = 0, layers = 0, heads = 0, ffn = 0, vocab = 1024, seq = 128, batch = 4;
  long pretrain = 100, steps = 1, threads = 0;
  double pretrain_lr = 1e-3, wd = 0.01;
  uint64_t seed = 1;
  const char *lrs = "1.2e-6", *outdir = NULL;
  int check = 0;
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
      fputs(usage_text, stdout);
      return 0;
    }
    if (!strcmp(o, "--gradcheck")) {
      check = 1;
      continue;
    }
    if (o[0] == '-' && o[1]) {
      if (i + 1 >= argc) usage_error("%s needs a value", o);
      const char *v = argv[++i];
      if (!strcmp(o, "--params")) params = parse_long(o, v, 1000, 4000000000L);
      else if (!strcmp(o, "--dim")) dim = parse_long(o, v, 2, 16384);
      else if (!strcmp(o, "--layers")) layers = parse_long(o, v, 1, 256);
      else if (!strcmp(o, "--heads")) heads = parse_long(o, v, 1, 1024);
      else if (!strcmp(o, "--ffn")) ffn = parse_long(o, v, 1, 65536);
      else if (!strcmp(o, "--vocab")) vocab = parse_long(o, v, 2, 1 << 20);
      else if (!strcmp(o, "--seq")) seq = parse_long(o, v, 2, 8192);
      else if (!strcmp(o, "--batch")) batch = parse_long(o, v, 1, 65536);
      else if (!strcmp(o, "--pretrain")) pretrain = parse_long(o, v, 0, 10000000);
      else if (!strcmp(o, "--pretrain-lr")) pretrain_lr = parse_double(o, v, 0, 10);
      else if (!strcmp(o, "--lr")) lrs = v;
      else if (!strcmp(o, "--steps")) steps = parse_long(o, v, 1, 9999);
      else if (!strcmp(o, "--wd")) wd = parse_double(o, v, 0, 10);
      else if (!strcmp(o, "--seed")) {
        char *end;
        errno = 0;
        seed = strtoull(v, &end, 0);
        if (errno || end == v || *end || *v == '-') usage_error("--seed: '%s' is not a whole number", v);
      }
      else if (!strcmp(o, "--threads")) threads = parse_long(o, v, 1, MAX_THREADS);
      else usage_error("unknown option %s", o);
      continue;
    }
    if (outdir) usage_error("one OUTDIR only (got another: %s)", o);
    outdir = o;
  }
  if (argc == 1) {
    fputs(usage_text, stderr);
    return 2;
  }
  if (!outdir && !check) usage_error("%s", "missing OUTDIR");

  /* fine-tuning learning rates */
  double lr[64];
  char lrname[64][32];
  int nlr = 0;
  {
    char buf[1024];
    if (strlen(lrs) >= sizeof buf) usage_error("--lr: list too long: %s", lrs);
    strcpy(buf, lrs);
    for (char *s = strtok(buf, ","); s; s = strtok(NULL, ",")) {
      if (nlr == 64) usage_error("--lr: at most 64 values (%s)", lrs);
      lr[nlr] = parse_double("--lr", s, 0, 10);
      snprintf(lrname[nlr], sizeof lrname[nlr], "lr-%g", lr[nlr]);
      nlr++;
    }
    if (!nlr) usage_error("--lr: no value in '%s'", lrs);
  }

  /* dims: the closest Llama-like shape to --params (width a multiple of 64,
   * one block per 128 of width, 64-wide heads), then explicit overrides */
  Dims d = {vocab, dim, layers, heads, ffn, seq, batch};
  if (!dim) {
    double best = INFINITY;
    for (long w = 64; w <= 8192; w += 64) {
      Dims c = {vocab, w, layers ? layers : (w / 128 > 1 ? w / 128 : 1), 0, ffn ? ffn : default_ffn(w), seq, batch};
      double e = fabs(log((double)param_count(&c) / params));
      if (e < best) best = e, d.dim = w;
    }
  }
  if (!d.layers) d.layers = d.dim / 128 > 1 ? d.dim / 128 : 1;
  if (!d.heads) d.heads = d.dim / 64 > 1 ? d.dim / 64 : 1;
  if (!d.ffn) d.ffn = default_ffn(d.dim);
  if (d.dim % d.heads || (d.dim / d.heads) % 2) {
    fprintf(stderr, "train: --dim %ld must be --heads %ld times an even head width\n", d.dim, d.heads);
    return 2;
  }

  if (!threads) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    threads = n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : n;
  }
  g_threads = (int)threads;

  Model m;
  model_init(&m, &d, seed);
  fprintf(stderr,
          "train: %zu parameters (%.2f MiB BF16): vocab %ld, dim %ld, %ld layers, %ld heads, ffn %ld; "
          "%ld x %ld tokens per step; %ld threads\n",
          m.np, m.np * 2 / 1048576.0, d.vocab, d.dim, d.layers, d.heads, d.ffn, d.batch, d.seq, threads);
  if (check) return gradcheck(&m, seed) ? 1 : 0;

  make_dir(outdir); /* fail before the minutes of training, not after */
  refresh_transposes(&m);
  double t0 = now();
  long warm = pretrain / 10 > 1 ? pretrain / 10 : 1;
  for (long s = 0; s < pretrain; s++) {
    double ts = now();
    make_batch(&m, seed, m.step);
    double loss = forward(&m);
    backward(&m);
    float plr = (float)(pretrain_lr * (s < warm ? (s + 1.0) / warm : 1.0));
    double gn = adam_step(&m, plr, (float)wd);
    fprintf(stderr, "pretrain %ld/%ld lr %.3g loss %.4f grad-norm %.3f (%.2f s)\n", s + 1, pretrain, plr, loss,
            gn, now() - ts);
  }
  fprintf(stderr, "train: pre-training took %.1f s\n", now() - t0);

  /* each fine-tuning run starts from the same pre-trained state */
  float *sw = NULL, *s1 = NULL, *s2 = NULL;
  long sstep = m.step;
  if (nlr > 1) {
    sw = falloc(m.np), s1 = falloc(m.np), s2 = falloc(m.np);
    memcpy(sw, m.w, m.np * sizeof(float));
    memcpy(s1, m.m1, m.np * sizeof(float));
    memcpy(s2, m.m2, m.np * sizeof(float));
  }
  uint16_t *prev = xalloc(m.np * 2), *cur = xalloc(m.np * 2);
  for (int r = 0; r < nlr; r++) {
    char dir[4096], path[4200];
    if (snprintf(dir, sizeof dir, nlr > 1 ? "%s/%s" : "%s", outdir, lrname[r]) >= (int)sizeof dir)
      die("path too long: %s", outdir);
    if (nlr > 1) {
      make_dir(dir);
      memcpy(m.w, sw, m.np * sizeof(float));
      memcpy(m.m1, s1, m.np * sizeof(float));
      memcpy(m.m2, s2, m.np * sizeof(float));
      m.step = sstep;
      refresh_transposes(&m);
    }
    publish(&m, prev);
    snprintf(path, sizeof path, "%s/step-0000.safetensors", dir);
    write_safetensors(&m, prev, path);
    for (long s = 1; s <= steps; s++) {
      double ts = now();
      make_batch(&m, seed, m.step);
      double loss = forward(&m);
      backward(&m);
      double gn = adam_step(&m, (float)lr[r], (float)wd);
      publish(&m, cur);
      size_t changed = 0;
      for (size_t i = 0; i < m.np; i++) changed += cur[i] != prev[i];
      snprintf(path, sizeof path, "%s/step-%04ld.safetensors", dir, s);
      write_safetensors(&m, cur, path);
      fprintf(stderr, "step %ld/%ld lr %g loss %.4f grad-norm %.3f: %zu of %zu BF16 values changed (%.3f%%) (%.2f s)\n",
              s, steps, lr[r], loss, gn, changed, m.np, 100.0 * changed / m.np, now() - ts);
      uint16_t *x = prev;
      prev = cur;
      cur = x;
    }
  }
  fprintf(stderr, "train: done in %.1f s\n", now() - t0);
  return 0;
}
