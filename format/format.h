/*
 * format.h - the container layer: bundle bytes <-> structures (SPEC.md §4-§8).
 * Knows layouts and checksums, nothing about what changed in a tensor.
 */
#ifndef DCR_FORMAT_H
#define DCR_FORMAT_H

#include <zstd.h>

#include "checkpoint.h"
#include "common.h"
#include "xxh.h"

#define DCR__FOURCC(a, b, c, d) \
  ((uint32_t)(a) | (uint32_t)(b) << 8 | (uint32_t)(c) << 16 | (uint32_t)(d) << 24)
enum {
  DCR__SEC_MANI = DCR__FOURCC('M', 'A', 'N', 'I'),
  DCR__SEC_RSIZ = DCR__FOURCC('R', 'S', 'I', 'Z'), /* 1.1 */
  DCR__SEC_META = DCR__FOURCC('M', 'E', 'T', 'A'),
  DCR__SEC_CHNK = DCR__FOURCC('C', 'H', 'N', 'K'),
  DCR__SEC_IDEN = DCR__FOURCC('I', 'D', 'E', 'N'),
  DCR__SEC_INDX = DCR__FOURCC('I', 'N', 'D', 'X'),
  DCR__SEC_SIGN = DCR__FOURCC('S', 'I', 'G', 'N'),
  DCR__SEC_FOOT = DCR__FOURCC('F', 'O', 'O', 'T'),
};

#define DCR__HEADER_SIZE 64
#define DCR__SECTION_HEADER_SIZE 32
#define DCR__RECORD_SIZE 32 /* chunk record and index record */
#define DCR__FOOTER_SIZE 64 /* FOOT section header + 32-byte payload */
#define DCR__FLAG_CRITICAL 1u
#define DCR__MIN_CHUNK_SIZE 4096u

/* ---- header.c: the 64-byte bundle header (§4.1) */
/* minor: the lowest minor version whose features the bundle uses (R-WRT-4) */
DCR_HIDDEN void dcr__header_write(uint8_t out[DCR__HEADER_SIZE], unsigned minor);
DCR_HIDDEN int dcr__header_parse(const uint8_t *p, uint64_t available, unsigned *minor,
                                 dcr_detail *d);

/* ---- section.c: section headers (§4.2) */
typedef struct {
  uint32_t type;
  uint16_t flags;
  uint8_t compression;
  uint64_t offset; /* of the section header in the file */
  uint64_t length; /* stored payload bytes */
  uint64_t payload_check;
} dcr__section;

DCR_HIDDEN void dcr__section_header_write(uint8_t out[DCR__SECTION_HEADER_SIZE],
                                          const dcr__section *s);
/* Checks the header check and reserved bits; fills s (offset included). */
DCR_HIDDEN int dcr__section_header_parse(const uint8_t *p, uint64_t offset,
                                         dcr__section *s, dcr_detail *d);
DCR_HIDDEN void dcr__section_type_name(uint32_t type, char out[5]);
/* ---- zstd_frame.c (§4.4): the zstd profile */
/* Checks the frame at the start of `p` against the profile, before anything is
 * allocated for it: a content size over max_size fails with size_code (a limit for
 * sections), one other than exact_size (UINT64_MAX: any) with DCR_E_DECOMPRESS. */
DCR_HIDDEN int dcr__zframe_check(const uint8_t *p, size_t available, uint64_t max_size,
                                 int size_code, uint64_t exact_size, uint64_t *content_size,
                                 size_t *frame_length, dcr_detail *d);
/* Inflates a checked frame into exactly content_size bytes at `out`, a few blocks
 * at a time (at most 64 MiB of output); a non-zero *cancel (cancel may be NULL)
 * stops it in between with DCR_E_INTERRUPTED. */
DCR_HIDDEN int dcr__zframe_inflate(ZSTD_DCtx *dctx, const uint8_t *frame, size_t frame_length,
                                   uint8_t *out, size_t content_size, const volatile int *cancel,
                                   dcr_detail *d);
/* dcr__zframe_inflate without a cancel flag. */
DCR_HIDDEN int dcr__zframe_decompress(ZSTD_DCtx *dctx, const uint8_t *frame, size_t frame_length,
                                      uint8_t *out, size_t content_size, dcr_detail *d);
/* The first n bytes of a checked frame's content, inflating no more than a block
 * or two: 0, or -1 where they cannot be had (the whole inflate says why). */
DCR_HIDDEN int dcr__zframe_head(const uint8_t *frame, size_t frame_length, uint8_t *out, size_t n);

/* Decompresses a section stored as one zstd frame (§4.4) into a new buffer: its
 * content and `reserve` bytes more (what parsing it will need) must fit `budget`
 * (DCR_E_NOMEM before anything is allocated). cancel as dcr__zframe_inflate's. */
DCR_HIDDEN int dcr__section_inflate(const uint8_t *stored, size_t length, uint64_t max,
                                    uint64_t budget, uint64_t reserve, const volatile int *cancel,
                                    uint8_t **out, size_t *out_length, dcr_detail *d);

/* ---- manifest.c (§6) */
typedef struct {
  const char *name; /* not NUL-terminated */
  uint16_t name_length;
  uint8_t presence; /* DCR__HAS_BASE | DCR__HAS_TARGET */
  uint8_t raw;      /* the sides (DCR__HAS_*) that are a set's raw members (§6.6) */
  uint8_t resized;  /* listed by RSIZ (§6.5) */
  dcr__desc base, target;
} dcr__entry;
#define DCR__HAS_BASE 1u
#define DCR__HAS_TARGET 2u

typedef struct {
  uint32_t chunk_size;
  int kind;
  uint64_t prefix_length, data_length;
  const uint8_t *prefix;
  uint64_t entry_count;
  dcr__entry *entries;
  uint64_t *dims_pool;
  uint8_t *storage; /* owns what names and prefix point into */
  /* a set (kind 3): the target's members, pointing into the prefix (fd -1), and
   * the length of the table's members part */
  dcr__member *members;
  size_t member_count, members_length;
} dcr__manifest;

/* The manifest's fixed fields (§6.2): the bytes that say what its parse needs. */
#define DCR__MANIFEST_HEAD 32
/* What dcr__manifest_parse allocates for a manifest of `length` bytes that begins
 * with `head`, beside the manifest's own bytes; 0 where its fixed fields fail
 * before anything is allocated. */
DCR_HIDDEN uint64_t dcr__manifest_need(const uint8_t head[DCR__MANIFEST_HEAD], uint64_t length,
                                       const dcr_limits *lim, unsigned minor);
/* Parses and checks every rule of §6.2 as format 1.`minor` has them (R-VER-4);
 * takes ownership of `payload` (freed on failure too). */
DCR_HIDDEN int dcr__manifest_parse(uint8_t *payload, size_t length, const dcr_limits *lim,
                                   unsigned minor, dcr__manifest *m, dcr_detail *d);
DCR_HIDDEN int dcr__manifest_serialize(const dcr__manifest *m, uint8_t **out, size_t *length);
DCR_HIDDEN void dcr__manifest_free(dcr__manifest *m);
/* Delta-coded: both sides present with equal dtype and byte length (§6.2). */
DCR_HIDDEN int dcr__entry_delta_coded(const dcr__entry *e);
/* How many of the target bytes [at, at + bytes) are coded against base bytes
 * (the rest against zeros): all of them for a delta-coded tensor, those below the
 * base's length for a resized one (§6.5), none otherwise. */
DCR_HIDDEN uint64_t dcr__entry_base_span(const dcr__entry *e, uint64_t at, uint64_t bytes);
/* The entry named `name` (entries are in bytewise name order), or NULL. */
DCR_HIDDEN dcr__entry *dcr__manifest_find(const dcr__manifest *m, const char *name, size_t n);
/* The minor version a manifest needs (§12): 1 for a set, a resized tensor or a
 * dtype of 1.1; else 0. */
DCR_HIDDEN unsigned dcr__manifest_minor(const dcr__manifest *m);
/* Whether some tensor's bytes are coded against base bytes (delta-coded and not
 * empty, or resized): what DELTA_CLASSED can code (§9.4). Entries whose skip byte
 * is 1 are left out (skip may be NULL). */
DCR_HIDDEN int dcr__manifest_has_base_coded(const dcr__manifest *m, const uint8_t *skip);

/* ---- set_table.c: the set table of a set's manifest (§6.6) */
/* Checks m's prefix as a set table (R-SET-1), then against the entries (R-SET-2),
 * marking the entries that are raw members; fills m->members. */
DCR_HIDDEN int dcr__set_table_check(dcr__manifest *m, const dcr_limits *lim, unsigned minor,
                                    dcr_detail *d);
/* The table of a bundle from set `base` to set `target`: the target's members and
 * the base's raw member paths. */
DCR_HIDDEN int dcr__set_table_write(const dcr__checkpoint *target, const dcr__checkpoint *base,
                                    uint8_t **out, size_t *length, dcr_detail *d);

/* ---- resize.c: the RSIZ section (§6.5) */
DCR_HIDDEN int dcr__rsiz_parse(const uint8_t *p, size_t length, dcr__manifest *m, dcr_detail *d);
/* The payload for m's resized entries, or *length 0 if none. */
DCR_HIDDEN int dcr__rsiz_write(const dcr__manifest *m, uint8_t **out, size_t *length);
/* Whether the reference writer lists an entry present on both sides as resized:
 * the same dtype and rank, two byte lengths, and a shape that differs in its
 * first dimension only (or a raw file that grew or shrank). */
DCR_HIDDEN int dcr__entry_resizable(const dcr__entry *e);
DCR_HIDDEN uint64_t dcr__chunk_count(uint64_t byte_length, uint32_t chunk_size);
/* Bytes in chunk c of entry e's target: chunk_size, or less for the last chunk. */
DCR_HIDDEN size_t dcr__chunk_bytes(const dcr__manifest *m, const dcr__entry *e, uint64_t c);
/* The largest target chunk: what buffers need, since a small bundle may declare
 * chunks of up to max_chunk_size (§11). At least 1. */
DCR_HIDDEN size_t dcr__max_chunk_bytes(const dcr__manifest *m);

/* ---- identity.c (§7) */
/* A state id, tensor by tensor in bytewise name order, each with its hash. */
DCR_HIDDEN void dcr__state_begin(XXH3_state_t *st);
DCR_HIDDEN void dcr__state_add(XXH3_state_t *st, const char *name, uint16_t name_length,
                               const dcr__desc *t);
DCR_HIDDEN void dcr__state_end(XXH3_state_t *st, uint8_t out[16]);
/* State id of one side (DCR__HAS_BASE or DCR__HAS_TARGET), from the entries'
 * descriptors and hashes. */
DCR_HIDDEN void dcr__state_id(const dcr__manifest *m, unsigned side, uint8_t out[16]);
DCR_HIDDEN size_t dcr__iden_size(const dcr__manifest *m);
DCR_HIDDEN void dcr__iden_write(const dcr__manifest *m, uint8_t *out);
/* Fills the entries' hashes and checks both state ids (§7). */
DCR_HIDDEN int dcr__iden_parse(const uint8_t *p, size_t length, dcr__manifest *m,
                               uint8_t base_state[16], uint8_t target_state[16],
                               dcr_detail *d);

/* ---- record.c: chunk records (§8.2) and index records (§8.3) */
typedef struct {
  uint32_t tensor, chunk;
  uint8_t encoding, compression;
  uint16_t reserved; /* as read; checked in the order of §15 */
  uint32_t count;
  uint64_t base_check, target_check;
  uint64_t offset;         /* of the CHNK section */
  uint64_t payload_length; /* of the CHNK section */
} dcr__chunk;

/* A writer's chunk index (record.c): room for one more record at the end, which
 * is returned (NULL, with DCR_E_NOMEM in d, if it cannot grow). */
typedef struct {
  dcr__chunk *records;
  uint64_t count, capacity;
} dcr__index_builder;
DCR_HIDDEN dcr__chunk *dcr__index_push(dcr__index_builder *x, dcr_detail *d);

DCR_HIDDEN void dcr__chunk_record_write(uint8_t out[DCR__RECORD_SIZE], const dcr__chunk *c);
/* The record parsers only read fields; the checks follow the order of checks. */
DCR_HIDDEN void dcr__chunk_record_parse(const uint8_t *p, dcr__chunk *c);
DCR_HIDDEN void dcr__index_record_write(uint8_t out[DCR__RECORD_SIZE], const dcr__chunk *c);
DCR_HIDDEN void dcr__index_record_parse(const uint8_t *p, dcr__chunk *c);
/* Checks a chunk record against the manifest (§8.2), in stored order: tensor,
 * chunk, the reserved field, count. */
DCR_HIDDEN int dcr__chunk_check(const dcr__chunk *c, const dcr__manifest *m, dcr_detail *d);

/* ---- meta.c (§6.4) */
typedef struct {
  uint64_t count;
  dcr_meta *pairs;  /* point into storage */
  char *storage;
} dcr__metadata;
DCR_HIDDEN int dcr__meta_parse(const uint8_t *p, size_t length, const dcr_limits *lim,
                               dcr__metadata *out, dcr_detail *d);
DCR_HIDDEN int dcr__meta_serialize(const dcr_meta *pairs, size_t count, uint8_t **out,
                                   size_t *length, dcr_detail *d);
/* The standard keys (§6.4.1): a value they do not allow fails with DCR_E_MANIFEST,
 * naming the key. Other keys pass. */
#define DCR__STEP_MAX ((uint64_t)1 << 53) /* exact in every JSON reader */
DCR_HIDDEN int dcr__meta_standard_check(const char *key, const char *value, dcr_detail *d);
/* Parses a step as §6.4.1 writes it; -1 if it is not one. */
DCR_HIDDEN int dcr__meta_step(const char *value, uint64_t *step);
DCR_HIDDEN void dcr__meta_free(dcr__metadata *m);

/* ---- writer.c: emits a bundle in order through a sink (§4) */
typedef struct {
  dcr_write_fn write;
  void *opaque;
  uint64_t offset;
  int level; /* zstd level for MANI and META; 0 = store */
  unsigned minor; /* written in the header */
  /* optional: told, with opaque, where each section starts before its first byte
   * goes to write (a signer hashes the bundle section by section, sign/signer.c) */
  void (*section)(void *opaque, uint32_t type, uint64_t offset);
} dcr__writer;

DCR_HIDDEN int dcr__writer_header(dcr__writer *w, dcr_detail *d);
/* Writes one section whose payload is head followed by body (either may be
 * empty), then its padding. Returns the section's offset in *offset. */
DCR_HIDDEN int dcr__writer_section(dcr__writer *w, uint32_t type, const void *head,
                                   size_t head_length, const void *body, size_t body_length,
                                   uint64_t *offset, dcr_detail *d);
/* The same for MANI and META, stored as a zstd frame when that is smaller. */
DCR_HIDDEN int dcr__writer_packed_section(dcr__writer *w, uint32_t type, const void *payload,
                                          size_t length, dcr_detail *d);
DCR_HIDDEN int dcr__writer_footer(dcr__writer *w, uint64_t iden_offset, uint64_t indx_offset,
                                  uint64_t chunk_count, dcr_detail *d);

/* ---- source.c: random access to a bundle in a file, in memory, or behind ops */
typedef struct {
  uint64_t offset, length;
} dcr__range;

/* A source that is neither a file nor memory (net/: a bundle over HTTP). read
 * fills `out` with exactly `length` bytes at `offset` and may be called from
 * several threads at once; plan names the byte ranges chunk reads will need,
 * so that they can be fetched ahead and together (it may be called again to
 * replace the plan, and the source may ignore it); close frees ctx. */
typedef struct {
  int (*read)(void *ctx, uint64_t offset, size_t length, uint8_t *out, dcr_detail *d);
  void (*plan)(void *ctx, const dcr__range *ranges, size_t count);
  void (*close)(void *ctx);
} dcr__source_ops;

typedef struct {
  const uint8_t *data; /* memory source, or NULL */
  int fd;              /* file source, or -1 */
  uint64_t size;
  const dcr__source_ops *ops; /* else: ops over ctx */
  void *ctx;
} dcr__source;

/* Points *out at `length` bytes at `offset`: into memory, or read into *scratch
 * (grown as needed). Fails with DCR_E_TRUNCATED past the end. */
DCR_HIDDEN int dcr__source_get(const dcr__source *s, uint64_t offset, size_t length,
                               uint8_t **scratch, size_t *scratch_capacity,
                               const uint8_t **out, dcr_detail *d);

/* ---- reader.c: struct dcr_reader, shared with the codec's verify and apply */
struct dcr_reader {
  dcr__source src;
  char path[256];
  dcr_limits lim;
  unsigned minor;
  dcr__manifest man;
  uint8_t base_state[16], target_state[16];
  uint64_t chunk_count;
  dcr__chunk *chunks;         /* index order */
  dcr__section *sections;     /* every section in file order */
  uint64_t section_count;
  dcr__metadata meta;
  unsigned threads; /* for verify: 0 = all online cores */
  const volatile int *cancel;  /* for verify: dcr_reader_set_cancel */
  dcr_progress_fn progress;    /* for verify: dcr_reader_set_progress */
  void *progress_opaque;
  /* Opened by the random-access profile (SPEC.md §21): chunk sections were not
   * read at open; dcr__chunk_payload checks each one as it is used. */
  int random;
  /* dcr_reader_select_tensors: 1 per manifest entry whose chunks are used, or
   * NULL for all of them */
  uint8_t *selected;
};

/* The stored payload of chunk c (its 32-byte record, then its streams), for the
 * codec. From a random-access reader it is checked first, by its section header,
 * payload check, padding and record against the index (R-RAN-3). Thread-safe. */
DCR_HIDDEN int dcr__chunk_payload(const dcr_reader *r, const dcr__chunk *c, uint8_t **scratch,
                                  size_t *capacity, const uint8_t **out, dcr_detail *d);
/* Its base_check and target_check, which a random-access reader learns only by
 * reading the chunk (dcr__chunk_payload): for callers that need them alone. */
DCR_HIDDEN int dcr__chunk_checks(const dcr_reader *r, const dcr__chunk *c, dcr_detail *d);
/* Tells a random-access source which chunk sections will be read: those of the
 * selected tensors (a no-op for files and memory). */
DCR_HIDDEN void dcr__chunk_plan(const dcr_reader *r);
/* Whether manifest entry i is used: every entry, unless a selection is set. */
static inline int dcr__selected(const dcr_reader *r, uint64_t i) {
  return !r->selected || r->selected[i];
}
/* The manifest entries whose names match any of the fnmatch patterns: *out, one
 * byte per entry (1: matched), or NULL when count is 0. A pattern that matches no
 * entry is DCR_E_ARGUMENT (naming `what`: "the bundle"...). *hits (if not NULL): entries
 * matched. */
DCR_HIDDEN int dcr__match_entries(const dcr__manifest *m, const char *const *patterns,
                                  size_t count, const char *what, uint8_t **out, uint64_t *hits,
                                  dcr_detail *d);
/* DCR_E_ARGUMENT if r has a tensor selection: for the calls that build or check
 * a whole target, which a selection cannot give. */
DCR_HIDDEN int dcr__need_whole(const dcr_reader *r, dcr_detail *d);
/* Opens a reader over a source of `size` bytes behind ops, named `name` in
 * details: by the random-access profile (SPEC.md §21), or with `whole` by the
 * walk, as a file. It owns ctx from the call on (closed on failure too). */
DCR_HIDDEN int dcr__reader_open_ops(dcr_reader **out, const dcr__source_ops *ops, void *ctx,
                                    uint64_t size, const char *name, int whole,
                                    const dcr_limits *lim, dcr_detail *d);
/* R-RAN-4: a failure `rc` of the profile that is about the bundle is confirmed by
 * the walk of §15.3 over the whole source, whose first failure is the answer
 * (R-ORD-3); d is replaced by the walk's when the walk fails. */
DCR_HIDDEN int dcr__confirm_by_walk(const dcr_reader *r, int rc, dcr_detail *d);

/* ---- query.c: the public views of descriptors */
DCR_HIDDEN void dcr__tensor_side(dcr_tensor_side *out, const dcr__desc *t, int present);
DCR_HIDDEN void dcr__member_info(dcr_member_info *out, const dcr__member *m);

#endif
