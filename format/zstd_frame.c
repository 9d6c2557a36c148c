/*
 * zstd_frame.c - the zstd profile of SPEC.md §4.4: what a frame in a bundle may
 * be, checked from its header and block headers before anything is allocated for
 * its content. Compressed sections and compressed chunk streams both come here.
 */
#include "format.h"

/* RFC 8878: every block takes at least 4 bytes (a 3-byte header and a byte of
 * content) and regenerates at most 128 KiB, so no frame inflates by more. */
#define MAX_RATIO 32768u
#define MIN_WINDOW 1024u

/* The smallest power of two >= x; above 2^63 it would be 2^64, which every window
 * is below, so UINT64_MAX stands for it (and the loop cannot wrap to 0). */
static uint64_t pow2_ceil(uint64_t x) {
  if (x > (uint64_t)1 << 63) return UINT64_MAX;
  uint64_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

/* The frame header (RFC 8878 §3.1.1.1), read here rather than through libzstd's
 * experimental API, whose structs may change between library versions. */
typedef struct {
  uint64_t window, content_size;
  uint32_t dictionary;
  int has_size;
  size_t length; /* of the header itself: the first block starts there */
} frame_header;

static int read_header(const uint8_t *p, size_t available, frame_header *h) {
  static const uint8_t magic[4] = {0x28, 0xB5, 0x2F, 0xFD};
  static const unsigned dict_bytes[4] = {0, 1, 2, 4}, size_bytes[4] = {0, 2, 4, 8};
  if (available < 5 || memcmp(p, magic, 4)) return -1;
  uint8_t fhd = p[4];
  unsigned single = fhd >> 5 & 1, fcs = fhd >> 6;
  size_t at = 5, size_len = fcs == 0 && single ? 1 : size_bytes[fcs];
  if (fhd & 0x08) return -1; /* reserved bit */
  if (available < at + !single + dict_bytes[fhd & 3] + size_len) return -1;
  if (!single) {
    uint64_t base = (uint64_t)1 << (10 + (p[at] >> 3));
    h->window = base + (base >> 3) * (p[at] & 7);
    at++;
  }
  h->dictionary = 0;
  for (unsigned i = 0; i < dict_bytes[fhd & 3]; i++) h->dictionary |= (uint32_t)p[at + i] << (8 * i);
  at += dict_bytes[fhd & 3];
  h->content_size = 0;
  for (size_t i = 0; i < size_len; i++) h->content_size |= (uint64_t)p[at + i] << (8 * i);
  if (size_len == 2) h->content_size += 256;
  h->has_size = size_len != 0;
  if (single) h->window = h->content_size;
  h->length = at + size_len;
  return 0;
}

int dcr__zframe_check(const uint8_t *p, size_t available, uint64_t max_size, int size_code,
                      uint64_t exact_size, uint64_t *content_size, size_t *frame_length,
                      dcr_detail *d) {
  frame_header h;
  if (read_header(p, available, &h))
    return dcr__fail(d, DCR_E_DECOMPRESS, "not a zstd frame header (skippable and legacy "
                     "frames are not allowed)");
  if (!h.has_size)
    return dcr__fail(d, DCR_E_DECOMPRESS, "zstd frame does not declare its content size");
  if (h.dictionary)
    return dcr__fail(d, DCR_E_DECOMPRESS, "zstd frame names dictionary %u", h.dictionary);
  uint64_t window = pow2_ceil(h.content_size);
  if (h.window > (window < MIN_WINDOW ? MIN_WINDOW : window))
    return dcr__fail(d, DCR_E_DECOMPRESS, "zstd window of %llu bytes for %llu bytes of content",
                     (unsigned long long)h.window, (unsigned long long)h.content_size);
  if (h.content_size > max_size)
    return dcr__fail(d, size_code, "zstd frame declares %llu bytes; at most %llu may be here",
                     (unsigned long long)h.content_size, (unsigned long long)max_size);
  if (exact_size != UINT64_MAX && h.content_size != exact_size)
    return dcr__fail(d, DCR_E_DECOMPRESS, "zstd frame declares %llu bytes; the stream is %llu",
                     (unsigned long long)h.content_size, (unsigned long long)exact_size);
  size_t frame = ZSTD_findFrameCompressedSize(p, available);
  if (ZSTD_isError(frame))
    return dcr__fail(d, DCR_E_DECOMPRESS, "malformed zstd frame: %s", ZSTD_getErrorName(frame));
  if (h.content_size > (uint64_t)MAX_RATIO * frame) /* 2^15 times a length: fits */
    return dcr__fail(d, DCR_E_DECOMPRESS, "a %zu-byte zstd frame cannot hold the %llu bytes it "
                     "declares", frame, (unsigned long long)h.content_size);
  *content_size = h.content_size;
  *frame_length = frame;
  return DCR_OK;
}

/* Between two looks at a cancel flag, libzstd is given this many blocks: each
 * regenerates at most 128 KiB, so at most 64 MiB of work. */
#define BLOCKS_PER_STEP 512u

/* Where the blocks that follow `at` (a block header) end after at most
 * BLOCKS_PER_STEP of them; the last block takes the frame's checksum with it.
 * The frame was checked whole (ZSTD_findFrameCompressedSize), so this only
 * splits it. */
static size_t step_end(const uint8_t *frame, size_t frame_length, size_t at) {
  for (unsigned k = 0; k < BLOCKS_PER_STEP && frame_length - at >= 3; k++) {
    uint32_t h = frame[at] | (uint32_t)frame[at + 1] << 8 | (uint32_t)frame[at + 2] << 16;
    size_t stored = (h >> 1 & 3) == 1 ? 1 : h >> 3; /* an RLE block stores one byte */
    if ((h & 1) || stored > frame_length - at - 3) return frame_length;
    at += 3 + stored;
  }
  return at < frame_length ? at : frame_length;
}

static int failed(size_t got, dcr_detail *d) {
  return dcr__fail(d, DCR_E_DECOMPRESS, "zstd frame: %s",
                   ZSTD_isError(got) ? ZSTD_getErrorName(got) : "fewer bytes than declared");
}

/* The frame a step at a time into `out`, which libzstd takes as its window
 * (ZSTD_d_stableOutBuffer, experimental parameter 2 of the stable enum): nothing
 * is copied or allocated beyond one block of input. 1: the library does not
 * have the parameter. */
static int stepped(ZSTD_DCtx *dctx, const uint8_t *frame, size_t frame_length, uint8_t *out,
                   size_t content_size, const volatile int *cancel, dcr_detail *d) {
  frame_header h;
  ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
  if (read_header(frame, frame_length, &h) ||
      ZSTD_isError(ZSTD_DCtx_setParameter(dctx, ZSTD_d_experimentalParam2, 1)))
    return 1;
  ZSTD_outBuffer o = {out, content_size, 0};
  size_t left = 1;
  int rc = DCR_OK;
  for (size_t at = 0; !rc && at < frame_length;) {
    ZSTD_inBuffer in = {frame, at ? step_end(frame, frame_length, at) : h.length, at};
    left = ZSTD_decompressStream(dctx, &o, &in);
    if (ZSTD_isError(left)) rc = failed(left, d);
    else if (in.pos == at) rc = failed(0, d); /* no progress: cut short */
    else if (cancel && *cancel) rc = dcr__fail(d, DCR_E_INTERRUPTED, "interrupted");
    at = in.pos;
  }
  if (!rc && (left || o.pos != content_size)) rc = failed(0, d);
  /* the next frame starts afresh, and as a one-call decode if it is one */
  ZSTD_DCtx_reset(dctx, ZSTD_reset_session_and_parameters);
  return rc;
}

int dcr__zframe_inflate(ZSTD_DCtx *dctx, const uint8_t *frame, size_t frame_length,
                        uint8_t *out, size_t content_size, const volatile int *cancel,
                        dcr_detail *d) {
  /* Windows up to the content size are allowed (§4.4): past libzstd's default. */
  size_t rc = ZSTD_DCtx_setParameter(dctx, ZSTD_d_windowLogMax, 31);
  if (ZSTD_isError(rc)) return failed(rc, d);
  /* stepped with or without a flag: libzstd names the same damage differently in
   * one call and in steps, and every caller gives the same message for it */
  int watched = stepped(dctx, frame, frame_length, out, content_size, cancel, d);
  if (watched != 1) return watched;
  size_t got = ZSTD_decompressDCtx(dctx, out, content_size, frame, frame_length);
  return ZSTD_isError(got) || got != content_size ? failed(got, d) : DCR_OK;
}

int dcr__zframe_decompress(ZSTD_DCtx *dctx, const uint8_t *frame, size_t frame_length,
                           uint8_t *out, size_t content_size, dcr_detail *d) {
  return dcr__zframe_inflate(dctx, frame, frame_length, out, content_size, NULL, d);
}

int dcr__zframe_head(const uint8_t *frame, size_t frame_length, uint8_t *out, size_t n) {
  ZSTD_DCtx *dctx = ZSTD_createDCtx();
  ZSTD_outBuffer o = {out, n, 0};
  ZSTD_inBuffer in = {frame, frame_length, 0};
  size_t rc = dctx ? ZSTD_DCtx_setParameter(dctx, ZSTD_d_windowLogMax, 31) : 0;
  /* buffered: libzstd decodes a block or two of it, into a window it allocates
   * but touches no further */
  while (dctx && !ZSTD_isError(rc) && o.pos < n) {
    size_t before = o.pos + in.pos;
    rc = ZSTD_decompressStream(dctx, &o, &in);
    if (o.pos + in.pos == before) break;
  }
  ZSTD_freeDCtx(dctx);
  return dctx && !ZSTD_isError(rc) && o.pos == n ? 0 : -1;
}
