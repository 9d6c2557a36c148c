/*
 * checkpoint.h - reading the checkpoints a bundle is made from and applied to:
 * safetensors files (SPEC.md §2.1) and raw files. Only prefixes are parsed here;
 * tensor bytes are read by the codec, chunk by chunk.
 */
#ifndef DCR_CHECKPOINT_H
#define DCR_CHECKPOINT_H

#include "common.h"

typedef struct {
  char *name;          /* NUL-terminated copy; name_length excludes the NUL */
  size_t name_length;
  dcr__desc desc;      /* offset is relative to the data region */
} dcr__tensor;

typedef struct {
  int kind;               /* dcr_kind */
  uint64_t file_size;
  uint64_t prefix_length; /* data region starts here */
  uint8_t *prefix;        /* prefix_length bytes */
  size_t count;
  dcr__tensor *tensors;   /* sorted by name, bytewise */
  uint64_t *dims_pool;    /* storage for every tensor's dims */
} dcr__checkpoint;

/* Parses a safetensors prefix (8-byte length + JSON header) for a file whose data
 * region is data_length bytes long, strictly as SPEC.md §2.1 rules 1-3 say. On
 * success `out` owns a copy of the prefix and the tensor list; on failure it is
 * empty. */
DCR_HIDDEN int dcr__safetensors_parse(const uint8_t *prefix, size_t prefix_length,
                                      uint64_t data_length, const dcr_limits *lim,
                                      dcr__checkpoint *out, dcr_detail *d);

/* §2.1 rule 4: sorted by (begin, end), the tensors tile [0, data_length) exactly.
 * A carried prefix needs no such check: it must equal the manifest's entries,
 * whose layout §6.2 already checks. */
DCR_HIDDEN int dcr__safetensors_check_layout(const dcr__checkpoint *c, uint64_t data_length,
                                             dcr_detail *d);

/* Reads the prefix of the open file `fd` as `kind` and parses it. For raw files the
 * checkpoint is one U8 tensor named "raw". */
DCR_HIDDEN int dcr__checkpoint_read(int fd, int kind, const dcr_limits *lim,
                                    dcr__checkpoint *out, dcr_detail *d);

DCR_HIDDEN void dcr__checkpoint_free(dcr__checkpoint *c);

/* The public checkpoint reader (checkpoint_reader.c), shared with the codec, which
 * hashes its tensors (codec/state_id.c). */
struct dcr_checkpoint {
  dcr__checkpoint ck; /* tensors' desc.hash: filled once hashed */
  int fd;
  char path[256];
  int hashed;         /* 1 once every tensor hash and the state id are known */
  uint8_t state[16];
  const volatile int *cancel; /* dcr_checkpoint_set_cancel */
  dcr_progress_fn progress;   /* dcr_checkpoint_set_progress */
  void *progress_opaque;
};

#endif
