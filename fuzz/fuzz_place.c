/*
 * fuzz_place.c - dcr_patch_placed (refit/place.c): placements of any bounds,
 * overlaps and strides, against the target they must give.
 *
 * The input describes a pair (a 2-D tensor "w" and a 1-D tensor "n", changed by
 * one unit in the last place or by XOR at a chosen rate), the bundle's format and
 * chunk size, and the blocks a caller holds, each in a buffer of its own with
 * padding between rows and before the block. The bundle is encoded, then applied
 * to the blocks. Invariants:
 *  - placements outside the tensor, empty, or holding an element twice fail with
 *    DCR_E_ARGUMENT and leave every buffer as it was;
 *  - otherwise the apply succeeds and every held element is the target's, every
 *    padding byte untouched; or, for a 1.3 bundle with no whole base given, it
 *    may fail with DCR_E_ARGUMENT (a ranked chunk held in part), changing nothing.
 * Input:
 *   byte 0: bit 0 format 1.3 (else 1.1); bit 1 chunk size 8 KiB (else 4 KiB);
 *           bit 2 give the whole base (dcr_patch_set_base); bit 3 verify NONE
 *           (else CHUNK); bits 4-5 dtype BF16, F32, U8, F16; bit 6 XOR changes
 *   bytes 1-4: rows (1 + b % 48), columns (1 + b % 96) of w; n's length
 *           (1 + b % 200); change rate in 1/256
 *   then per block (at most 4), 7 bytes: u8 tensor (bit 0: n, else w), row0,
 *   rows, col0, cols (each mod the tensor's size + 2), row padding (elements, mod
 *   4), leading padding (elements, mod 4)
 */
#include "fuzz_common.h"

#include "../refit/refit.h"

#define FUZZ_MAX_INPUT 64
#define MAX_BLOCKS 4

static const char *const dtypes[] = {"BF16", "F32", "U8", "F16"};

typedef struct {
  unsigned tensor; /* 0: w, 1: n */
  dcr_placement p;
  uint8_t *buf, *before;
  size_t size;
} block;

typedef struct {
  block *b;
  size_t count;
  const uint8_t *base[2];
  uint64_t base_size[2];
  dcr_placement mine[2][MAX_BLOCKS]; /* per tensor, for place() */
} ctx;

static int place(void *opaque, uint64_t entry, const dcr_tensor_info *t,
                 const dcr_placement **out, size_t *count) {
  ctx *x = opaque;
  unsigned which = t->name[0] == 'n'; /* entries come in name order: n, w */
  (void)entry;
  size_t k = 0;
  for (size_t i = 0; i < x->count; i++)
    if (x->b[i].tensor == which) x->mine[which][k++] = x->b[i].p;
  *out = x->mine[which];
  *count = k;
  return 0;
}

static int whole_base(void *opaque, uint64_t entry, const dcr_tensor_info *t, dcr_buffer *b) {
  ctx *x = opaque;
  unsigned which = t->name[0] == 'n';
  (void)entry;
  b->data = (void *)x->base[which];
  b->size = x->base_size[which];
  return 0;
}

/* A value one unit in the last place away (as floats' bits), or XORed. */
static void change(uint8_t *e, unsigned esize, uint8_t v, int xor) {
  if (xor) {
    e[0] ^= (uint8_t)(v | 1);
    return;
  }
  uint64_t u = 0;
  memcpy(&u, e, esize);
  u += (v & 1) ? 1 : (uint64_t)-1;
  memcpy(e, &u, esize);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 5 || size > FUZZ_MAX_INPUT) return 0;
  unsigned opt = data[0], esize;
  const char *dtype = dtypes[(opt >> 4) & 3];
  esize = dcr_dtype_size(dcr_dtype_from_name(dtype, strlen(dtype)));
  uint64_t R = 1 + data[1] % 48, C = 1 + data[2] % 96, N = 1 + data[3] % 200;
  unsigned rate = data[4];
  uint64_t len[2] = {R * C * esize, N * esize};
  uint8_t *base[2], *target[2];
  for (int t = 0; t < 2; t++) {
    base[t] = malloc(len[t]);
    target[t] = malloc(len[t]);
    FUZZ_ASSERT(base[t] && target[t]);
    for (uint64_t i = 0; i < len[t]; i++) base[t][i] = fuzz_pattern(7 + (uint32_t)t, i);
    memcpy(target[t], base[t], len[t]);
    for (uint64_t e = 0; e < len[t] / esize; e++) {
      uint8_t v = fuzz_pattern(99 + (uint32_t)t, e);
      if (v < rate) change(target[t] + e * esize, esize, fuzz_pattern(5, e), (opt & 64) != 0);
    }
  }
  fuzz_tensor bt[2] = {{"n", dtype, 1, {N, 0}, base[1], 0}, {"w", dtype, 2, {R, C}, base[0], 0}};
  fuzz_tensor tt[2] = {{"n", dtype, 1, {N, 0}, target[1], 0}, {"w", dtype, 2, {R, C}, target[0], 0}};
  fuzz_buf bfile = {0}, tfile = {0}, bundle = {0};
  fuzz_safetensors(&bfile, bt, 2, 0);
  fuzz_safetensors(&tfile, tt, 2, 0);
  const char *bp = fuzz_path(0, "base"), *tp = fuzz_path(1, "target");
  fuzz_write_file(bp, bfile.p, bfile.n);
  fuzz_write_file(tp, tfile.p, tfile.n);
  dcr_encode_options o;
  dcr_encode_options_default(&o);
  o.chunk_size = opt & 2 ? 8192 : 4096;
  o.threads = 1;
  o.max_minor = opt & 1 ? 3 : 1;
  FUZZ_ASSERT(dcr_encode(bp, tp, &o, fuzz_sink, &bundle, NULL, NULL) == DCR_OK);

  /* The blocks, each in a buffer of its own, padded; and whether they are valid. */
  block blocks[MAX_BLOCKS];
  size_t count = 0;
  int valid = 1;
  for (size_t at = 5; at + 7 <= size && count < MAX_BLOCKS; at += 7) {
    const uint8_t *q = data + at;
    block *b = &blocks[count++];
    b->tensor = q[0] & 1;
    uint64_t rows = b->tensor ? N : R, cols = b->tensor ? 1 : C;
    dcr_placement p = {0};
    p.row0 = q[1] % (rows + 2), p.rows = q[2] % (rows + 2);
    p.col0 = q[3] % (cols + 2), p.cols = q[4] % (cols + 2);
    uint64_t pad = q[5] % 4, lead = q[6] % 4;
    p.row_stride = (p.cols + pad) * esize;
    p.offset = lead * esize;
    b->size = (size_t)(p.offset + (p.rows ? p.rows : 1) * p.row_stride + esize);
    b->buf = malloc(b->size);
    b->before = malloc(b->size);
    FUZZ_ASSERT(b->buf && b->before);
    for (size_t i = 0; i < b->size; i++) b->buf[i] = (uint8_t)(i * 131 + 17);
    p.data = b->buf;
    p.size = b->size;
    b->p = p;
    int inside = p.rows && p.cols && p.row0 + p.rows <= rows && p.col0 + p.cols <= cols;
    valid &= inside;
    for (size_t k = 0; inside && k + 1 < count; k++) {
      const dcr_placement *o2 = &blocks[k].p;
      if (blocks[k].tensor == b->tensor && p.row0 < o2->row0 + o2->rows &&
          o2->row0 < p.row0 + p.rows && p.col0 < o2->col0 + o2->cols && o2->col0 < p.col0 + p.cols)
        valid = 0;
    }
    if (inside) /* the held elements start as the base's */
      for (uint64_t r = 0; r < p.rows; r++)
        memcpy(b->buf + p.offset + r * p.row_stride,
               base[b->tensor] + ((p.row0 + r) * cols + p.col0) * esize, (size_t)(p.cols * esize));
    memcpy(b->before, b->buf, b->size);
  }

  dcr_reader *r = NULL;
  dcr_patch *patch = NULL;
  dcr_detail d;
  FUZZ_ASSERT(dcr_reader_open_memory(&r, bundle.p, bundle.n, NULL, &d) == DCR_OK);
  FUZZ_ASSERT(dcr_patch_create(&patch, r, &d) == DCR_OK);
  dcr_patch_set_verify(patch, opt & 8 ? DCR_VERIFY_NONE : DCR_VERIFY_CHUNK);
  dcr_patch_set_threads(patch, 1 + (opt & 1));
  ctx x = {blocks, count, {base[0], base[1]}, {len[0], len[1]}, {{{0}}}};
  if (opt & 4) dcr_patch_set_base(patch, whole_base, &x);
  int rc = dcr_patch_placed(patch, place, &x, &d);
  FUZZ_DEBUG("blocks %zu valid %d: rc %d %s\n", count, valid, rc, d.message);
  int unchanged = 1;
  for (size_t k = 0; k < count; k++)
    unchanged &= memcmp(blocks[k].buf, blocks[k].before, blocks[k].size) == 0;
  if (!valid || rc) {
    FUZZ_ASSERT(rc == DCR_E_ARGUMENT);
    FUZZ_ASSERT(unchanged);
    FUZZ_ASSERT(valid ? (opt & 1) && !(opt & 4) : 1);
  } else {
    for (size_t k = 0; k < count; k++) { /* held elements: the target's; padding: as it was */
      const block *b = &blocks[k];
      uint64_t cols = b->tensor ? 1 : C;
      uint8_t *want = malloc(b->size);
      FUZZ_ASSERT(want);
      memcpy(want, b->before, b->size);
      for (uint64_t row = 0; row < b->p.rows; row++)
        memcpy(want + b->p.offset + row * b->p.row_stride,
               target[b->tensor] + ((b->p.row0 + row) * cols + b->p.col0) * esize,
               (size_t)(b->p.cols * esize));
      FUZZ_ASSERT(memcmp(want, b->buf, b->size) == 0);
      free(want);
    }
  }
  dcr_patch_free(patch);
  dcr_reader_free(r);
  for (size_t k = 0; k < count; k++) free(blocks[k].buf), free(blocks[k].before);
  for (int t = 0; t < 2; t++) free(base[t]), free(target[t]);
  fuzz_buf_free(&bfile);
  fuzz_buf_free(&tfile);
  fuzz_buf_free(&bundle);
  return 0;
}
