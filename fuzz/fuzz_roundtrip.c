/*
 * fuzz_roundtrip.c - encode -> apply round trips and encoder determinism.
 *
 * The input describes a base, a target and encoder options; the harness writes
 * the two checkpoints, encodes with 1 and with 3 threads (the bundles must be
 * identical, SPEC.md §9.3 / reproducible bundles), opens and verifies the bundle
 * (it must be valid) and applies it to the base (the output must equal the
 * target byte for byte). Input:
 *   byte 0: bit 0 raw checkpoints; bits 1-2 zstd level 0, 1, 3, 0; bit 3 chunk
 *           size 8 KiB (else 4 KiB); bit 4 reverse the target's layout; bit 5
 *           reverse the base's; bit 6 XOR the edit bytes over the whole target
 *   raw:         u16 base length, u16 target length (each mod 20000), u8 seed
 *   safetensors: u8 tensor count (mod 5), then per tensor 7 bytes: u8 presence
 *                (1 base, 2 target, 3 both), u8 base dtype, u16 base elements,
 *                u8 target dtype, u16 target elements (mod 3000 each)
 *   the rest: edits, 3 bytes each: u16 offset in the target's data, u8 value
 */
#include "fuzz_common.h"

#define FUZZ_MAX_INPUT 4096
#define MAX_TENSORS 4
#define MAX_ELEMS 3000

static const char *const dtype_names[] = {"BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3",
                                          "I16", "U16", "F16", "BF16", "I32",
                                          "U32", "F32", "I64", "U64", "F64"};

typedef struct {
  const uint8_t *p;
  size_t left;
} reader;

static unsigned take(reader *in, unsigned width) {
  unsigned v = 0;
  for (unsigned i = 0; i < width; i++) {
    v |= (unsigned)(in->left ? *in->p : 0) << (8 * i);
    if (in->left) in->p++, in->left--;
  }
  return v;
}

/* Applies the edits to the target's data bytes (all tensors back to back). */
static void edit(uint8_t *t, size_t n, reader *in, int xor_all) {
  if (!n) return;
  if (xor_all) {
    for (size_t i = 0; i < n && in->left; i++) t[i] ^= in->p[i % in->left];
    return;
  }
  while (in->left >= 3) {
    size_t off = take(in, 2) % n;
    t[off] = (uint8_t)take(in, 1);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > FUZZ_MAX_INPUT) return 0;
  reader in = {data + 1, size - 1};
  unsigned opt = data[0];
  static const int levels[4] = {0, 1, 3, 0};
  int raw = opt & 1, level = levels[(opt >> 1) & 3], xor_all = (opt & 64) != 0;
  uint32_t chunk_size = opt & 8 ? 8192 : 4096;
  const char *base_path = fuzz_path(0, "base"), *target_path = fuzz_path(1, "target");
  const char *out_path = fuzz_path(2, "out");
  fuzz_buf base = {0}, target = {0};

  if (raw) {
    size_t nb = take(&in, 2) % 20000, nt = take(&in, 2) % 20000;
    unsigned seed = take(&in, 1);
    for (size_t i = 0; i < nb; i++) {
      uint8_t v = fuzz_pattern(seed, i);
      fuzz_put(&base, &v, 1);
    }
    for (size_t i = 0; i < nt; i++) {
      uint8_t v = i < nb ? base.p[i] : fuzz_pattern(seed + 1, i);
      fuzz_put(&target, &v, 1);
    }
    edit(target.p, target.n, &in, xor_all);
  } else {
    unsigned count = take(&in, 1) % (MAX_TENSORS + 1);
    fuzz_tensor bt[MAX_TENSORS], tt[MAX_TENSORS];
    uint8_t *tdata[MAX_TENSORS] = {0};
    static const char *const names[MAX_TENSORS] = {"t0", "t1", "t2", "t3"};
    size_t nb = 0, nt = 0, total = 0;
    for (unsigned i = 0; i < count; i++) {
      unsigned presence = take(&in, 1) % 3 + 1;
      unsigned bd = take(&in, 1) % 15, be = take(&in, 2) % MAX_ELEMS;
      unsigned td = take(&in, 1) % 15, te = take(&in, 2) % MAX_ELEMS;
      fuzz_tensor b = {names[i], dtype_names[bd], 1, {be, 0}, NULL, 100 + i};
      fuzz_tensor t = {names[i], dtype_names[td], 1, {te, 0}, NULL, 200 + i};
      if (presence & 1) bt[nb++] = b;
      if (presence & 2) {
        /* the target starts as the base's bytes where it has them */
        size_t len = (size_t)fuzz_tensor_bytes(&t);
        size_t blen = presence & 1 ? (size_t)fuzz_tensor_bytes(&b) : 0;
        tdata[nt] = malloc(len ? len : 1);
        FUZZ_ASSERT(tdata[nt]);
        for (size_t k = 0; k < len; k++)
          tdata[nt][k] = k < blen ? fuzz_pattern(b.seed, k) : fuzz_pattern(t.seed, k);
        t.data = tdata[nt];
        tt[nt++] = t;
        total += len;
      }
    }
    /* edits over the target tensors' bytes, as if back to back */
    uint8_t *all = malloc(total ? total : 1);
    FUZZ_ASSERT(all);
    for (size_t i = 0, at = 0; i < nt; at += (size_t)fuzz_tensor_bytes(&tt[i]), i++)
      memcpy(all + at, tdata[i], (size_t)fuzz_tensor_bytes(&tt[i]));
    edit(all, total, &in, xor_all);
    for (size_t i = 0, at = 0; i < nt; at += (size_t)fuzz_tensor_bytes(&tt[i]), i++)
      memcpy(tdata[i], all + at, (size_t)fuzz_tensor_bytes(&tt[i]));
    free(all);
    fuzz_safetensors(&base, bt, nb, (opt & 32) != 0);
    fuzz_safetensors(&target, tt, nt, (opt & 16) != 0);
    for (size_t i = 0; i < nt; i++) free(tdata[i]);
  }
  fuzz_write_file(base_path, base.p, base.n);
  fuzz_write_file(target_path, target.p, target.n);

  fuzz_buf b1 = {0}, b3 = {0}, result = {0};
  int rc1 = fuzz_encode(base_path, target_path, chunk_size, level, 1, raw, &b1);
  int rc3 = fuzz_encode(base_path, target_path, chunk_size, level, 3, raw, &b3);
  FUZZ_ASSERT(rc1 == DCR_OK); /* valid checkpoints always encode */
  FUZZ_ASSERT(rc3 == DCR_OK);
  FUZZ_ASSERT(b1.n == b3.n && memcmp(b1.p, b3.p, b1.n) == 0); /* determinism */

  dcr_reader *r = NULL;
  dcr_detail d;
  FUZZ_ASSERT(dcr_reader_open_memory(&r, b1.p, b1.n, NULL, &d) == DCR_OK);
  FUZZ_ASSERT(dcr_reader_verify(r, &d) == DCR_OK);
  dcr_apply_options o;
  dcr_apply_options_default(&o);
  o.threads = 1;
  o.sync = 0;
  FUZZ_ASSERT(dcr_apply(r, base_path, out_path, &o, &d) == DCR_OK);
  FUZZ_ASSERT(fuzz_read_file(out_path, &result) == 0);
  FUZZ_ASSERT(result.n == target.n && (!target.n || memcmp(result.p, target.p, target.n) == 0));
  FUZZ_ASSERT(dcr_check_target(r, target_path, &o, &d) == DCR_OK);
  dcr_reader_free(r);
  unlink(out_path);
  unlink(base_path);
  unlink(target_path);
  fuzz_buf_free(&base);
  fuzz_buf_free(&target);
  fuzz_buf_free(&b1);
  fuzz_buf_free(&b3);
  fuzz_buf_free(&result);
  return 0;
}
