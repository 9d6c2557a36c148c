/*
 * synth.h - deterministic synthetic checkpoint pairs shaped like an LLM's, for
 * `dcr synth`, the demo, the tests and benchmarks.
 *
 * The base holds "master" weights (fp32; fp64 for an F32 checkpoint) rounded to
 * the dtype; the target holds the same weights after one optimizer-like step, its
 * size calibrated so that about `rate` of the elements change, mostly by one unit
 * in the last place, as between two consecutive RL checkpoints.
 */
#ifndef DCR_SYNTH_H
#define DCR_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "dcr.h"

typedef struct {
  uint64_t size;   /* bytes of tensor data, approximately */
  double rate;     /* fraction of elements that change, 0..1 */
  uint64_t seed;
  int dtype;       /* BF16 (9), F16 (8) or F32 (12), as in SPEC.md §3 */
  unsigned layers; /* 0: chosen from size */
  const volatile int *cancel; /* optional: non-zero stops the writing */
  dcr_progress_fn progress;   /* optional: bytes written to each output so far */
  void *progress_opaque;
} dcr_synth_options;

/* 64 MiB, rate 0.01, seed 1, BF16, layers chosen from the size. */
void dcr_synth_options_default(dcr_synth_options *o);

/* Where the base's and the target's bytes go, in file order. */
typedef struct {
  dcr_write_fn write;
  void *opaque;
  const char *name; /* for messages */
} dcr_synth_sink;

/* Generates the base and target safetensors files into out[0] and out[1]. Returns
 * 0, or -1 with a message in err (naming the output when one is involved), or -2
 * when *o->cancel became non-zero. On success *achieved_rate (if not NULL) is the
 * exact fraction of elements changed. The same options give the same bytes on a
 * given build. */
int dcr_synth_write(const dcr_synth_options *o, const dcr_synth_sink out[2],
                    double *achieved_rate, char *err, size_t errlen);

#endif
