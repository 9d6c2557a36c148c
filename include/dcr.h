/*
 * dcr.h - the DCR delta bundle library: the one public header.
 *
 * A DCR bundle carries the changes between a base and a target model checkpoint
 * (safetensors or raw files), bit-exactly and with checksums, so that a reader
 * holding the base can rebuild the target byte for byte. SPEC.md defines the
 * format; this header is the library's whole contract.
 *
 * Conventions: every function that can fail returns a dcr_error code (DCR_OK is 0).
 * Functions that take a `dcr_detail *` fill it with where the error happened (file,
 * offset, section, tensor, chunk) and a message; it may be NULL. Free functions
 * accept NULL. Nothing is global: the library is thread-safe as long as one object
 * is not used from two threads at once.
 *
 * Growing structs (the ABI policy): a struct the caller allocates or the library
 * fills ends with reserved space (reserved_), so its size never changes within an
 * ABI version. Options and limits are filled by their *_default() function, or
 * zeroed by the caller: later versions give reserved fields a meaning in which 0
 * keeps today's behaviour. The shared library's soname (libdcr.so.DCR_ABI_VERSION)
 * changes exactly when a struct's layout or a function's signature does; adding a
 * function or using reserved space does not change it.
 */
#ifndef DCR_H
#define DCR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library version (the format version is DCR_FORMAT_MAJOR/MINOR). */
#define DCR_VERSION_MAJOR 0
#define DCR_VERSION_MINOR 1
#define DCR_VERSION_PATCH 0
#define DCR_VERSION_NUMBER \
  (DCR_VERSION_MAJOR * 10000 + DCR_VERSION_MINOR * 100 + DCR_VERSION_PATCH)
#define DCR_STR_(x) #x
#define DCR_STR(x) DCR_STR_(x)
#define DCR_VERSION_STRING \
  DCR_STR(DCR_VERSION_MAJOR) "." DCR_STR(DCR_VERSION_MINOR) "." DCR_STR(DCR_VERSION_PATCH)

/* The binary interface: the shared library is libdcr.so.DCR_ABI_VERSION. */
#define DCR_ABI_VERSION 1

#define DCR_FORMAT_MAJOR 1
#define DCR_FORMAT_MINOR 3

#if defined(__GNUC__) && __GNUC__ >= 4
#define DCR_API __attribute__((visibility("default")))
#else
#define DCR_API
#endif

/* Version of the library actually linked, to compare with DCR_VERSION_NUMBER. */
DCR_API unsigned dcr_version_number(void);
DCR_API const char *dcr_version_string(void);

/*
 * Error codes: SPEC.md §13. The numbers are stable and part of the format's
 * contract; X(name, number, message).
 */
#define DCR_ERROR_LIST(X)                                                            \
  X(OK, 0, "success")                                                                \
  X(E_IO, 1, "a file could not be opened, read, written or renamed")                 \
  X(E_NOMEM, 2, "memory could not be allocated")                                     \
  X(E_ARGUMENT, 3, "invalid argument or option")                                     \
  X(E_TRUNCATED, 4, "input ends inside a structure it declares")                     \
  X(E_MAGIC, 5, "not a DCR bundle")                                                  \
  X(E_VERSION, 6, "unsupported major format version")                                \
  X(E_RESERVED, 7, "a reserved field, bit or padding byte is not zero")              \
  X(E_CHECKSUM, 8, "a checksum does not match")                                      \
  X(E_LIMIT, 9, "a declared size or count exceeds a limit")                          \
  X(E_STRUCTURE, 10, "sections missing, repeated, out of order or inconsistent")     \
  X(E_UNKNOWN_SECTION, 11, "a critical section of unknown type")                     \
  X(E_MANIFEST, 12, "malformed manifest or metadata")                                \
  X(E_NAME, 13, "tensor name empty, too long, not UTF-8, duplicated or unsorted")    \
  X(E_DTYPE, 14, "unknown dtype")                                                    \
  X(E_SHAPE, 15, "shape overflows or disagrees with the byte length")                \
  X(E_LAYOUT, 16, "tensor offsets out of range, overlapping, unsorted or with gaps") \
  X(E_INDEX, 17, "chunk index malformed or disagreeing with the chunk sections")     \
  X(E_ENCODING, 18, "unknown encoding or compression, or malformed encoded data")    \
  X(E_POSITION, 19, "sparse position out of range or badly encoded")                 \
  X(E_DECOMPRESS, 20, "zstd frame invalid or not of its declared size")              \
  X(E_BASE_MISMATCH, 21, "the base is not the one the bundle was made for")          \
  X(E_TARGET_MISMATCH, 22, "applying the bundle does not reproduce the target")      \
  X(E_CHECKPOINT, 23, "input checkpoint is not valid safetensors")                   \
  X(E_INTERRUPTED, 24, "interrupted")                                               \
  X(E_JOURNAL, 25, "a journal is malformed or does not fit its file")                \
  X(E_ARCHIVE, 26, "a history archive is malformed or disagrees with its index")    \
  X(E_SIGNATURE, 27, "a required signature is missing, malformed, untrusted or wrong") \
  X(E_FETCH, 28, "a remote bundle could not be fetched")                             \
  X(E_CHANGED, 29, "a remote bundle changed while it was being read")

typedef enum {
#define DCR_ENUM_(name, num, msg) DCR_##name = num,
  DCR_ERROR_LIST(DCR_ENUM_)
#undef DCR_ENUM_
  DCR_ERROR_COUNT_
} dcr_error;

/* "DCR_E_CHECKSUM" for DCR_E_CHECKSUM; "DCR_E_UNKNOWN" for codes out of range. */
DCR_API const char *dcr_error_name(int code);
/* A one-line, lower-case description of the code. */
DCR_API const char *dcr_error_message(int code);

#define DCR_NONE UINT64_MAX /* a detail field that does not apply */

/* Where an error happened. Owned by the caller; filled by the library on error. */
typedef struct {
  int code;              /* the dcr_error returned */
  char file[256];        /* the file involved, "" if none */
  uint64_t offset;       /* byte offset in that file, or DCR_NONE */
  char section[5];       /* section type ("MANI", "CHNK"...), "" if none */
  uint64_t tensor;       /* manifest entry index, or DCR_NONE */
  char tensor_name[128]; /* its name (may be cut short), "" if none */
  uint64_t chunk;        /* chunk number within the tensor, or DCR_NONE */
  char message[256];     /* what exactly is wrong */
} dcr_detail;

/* Limits for untrusted input (SPEC.md §11). Start from the defaults and tighten. */
typedef struct {
  uint64_t max_tensors;
  uint64_t max_name_length;
  uint64_t max_rank;
  uint64_t max_chunk_size;
  uint64_t max_section_size;
  uint64_t max_header_size;
  uint64_t max_file_size;
  uint64_t max_bundle_size;
  /* Not a format limit but this reader's memory budget (default 1 GiB): a section
   * that would inflate to more, or a safetensors header whose JSON document would
   * take more to parse, fails with DCR_E_NOMEM before anything is allocated for it
   * (not a verdict on the input); threads are reduced so that their chunk buffers
   * fit it. 0 means the default. Headers of many tensors are read tensor by
   * tensor, so the 2^20 tensors max_tensors allows fit the default. */
  uint64_t max_memory;
  /* Optional: a non-zero *cancel stops the long work of reading (a section
   * inflating as a bundle opens, a chunk decoding) with DCR_E_INTERRUPTED, within
   * 64 MiB of work; a reader opened with it keeps it for dcr_reader_verify (as
   * dcr_reader_set_cancel, which replaces it). */
  const volatile int *cancel;
  uint64_t reserved_[6]; /* zero: see "Growing structs" above */
} dcr_limits;

DCR_API void dcr_limits_default(dcr_limits *limits);

/* Checkpoint kinds and dtypes (SPEC.md §2, §3). */
/* DCR_KIND_SET (format 1.1): a directory of safetensors and raw member files read as
 * one checkpoint (SPEC.md §2.3); where a function takes a path, it is the
 * directory's. Kind 2 is never assigned. */
typedef enum { DCR_KIND_RAW = 0, DCR_KIND_SAFETENSORS = 1, DCR_KIND_SET = 3 } dcr_kind;

/* Returns the dtype's code (1..22; 16 and above are format 1.1) for a safetensors
 * name, or 0 if unknown. */
DCR_API int dcr_dtype_from_name(const char *name, size_t length);
/* Returns the dtype's name, or NULL for an unknown code. */
DCR_API const char *dcr_dtype_name(int dtype);
/* Returns the element size in bytes, or 0 for an unknown code. The packed dtypes
 * F4, F6_E2M3 and F6_E3M2 (4 and 6 bits) return 1: chunks and encodings treat
 * their tensors as bytes (SPEC.md §3). */
DCR_API unsigned dcr_dtype_size(int dtype);
/* Returns the element width in bits (4 or 6 for packed dtypes), or 0 if unknown. */
DCR_API unsigned dcr_dtype_bits(int dtype);

/* Encodings and compressions of a chunk (SPEC.md §9). */
typedef enum {
  DCR_ENC_XOR_DENSE = 1,
  DCR_ENC_XOR_SPARSE = 2,
  DCR_ENC_OVERWRITE_DENSE = 3,
  DCR_ENC_OVERWRITE_SPARSE = 4,
  DCR_ENC_DELTA_DENSE = 5,
  DCR_ENC_DELTA_SPARSE = 6,
  DCR_ENC_DELTA_CLASSED = 7, /* format 1.2: needs the base to find its positions */
  DCR_ENC_DELTA_BANDED = 8   /* format 1.3: the same, cheaper to apply */
} dcr_encoding;
#define DCR_ENC_COUNT 9 /* one past the highest id */

typedef enum { DCR_COMP_NONE = 0, DCR_COMP_ZSTD = 1 } dcr_compression;

/* Returns "XOR_DENSE" etc., or NULL for an unknown id. */
DCR_API const char *dcr_encoding_name(int encoding);

/* The thread count that options of 0 threads mean: the CPUs this process may use
 * (its CPU affinity, and the CPU quota of its cgroup, v1 or v2, if lower), at most
 * 32. Each thread holds chunk buffers (README, "Memory"), so on a large node a
 * caller that runs several jobs side by side should pass its own count. */
DCR_API unsigned dcr_default_threads(void);

/* ------------------------------------------------------------------------ */
/* Encoding                                                                  */

typedef struct {
  const char *key;
  const char *value;
} dcr_meta;

/* Progress: called from the calling thread with bytes done so far and the total. */
typedef void (*dcr_progress_fn)(void *opaque, uint64_t done, uint64_t total);

typedef struct {
  uint32_t chunk_size;      /* power of two, 4 KiB..max; default 4 MiB */
  int level;                /* zstd level; 0 stores without compression; default 3 */
  unsigned threads;         /* worker threads; 0 = dcr_default_threads() */
  int raw;                  /* 1: treat both inputs as raw files (one U8 tensor) */
  const dcr_meta *meta;     /* optional metadata pairs (SPEC.md §6.4) */
  size_t meta_count;
  dcr_progress_fn progress; /* optional */
  void *progress_opaque;
  const volatile int *cancel; /* optional: non-zero stops with DCR_E_INTERRUPTED */
  int no_replace;           /* dcr_encode_file: 1 = never replace a file at out_path */
  int no_sync;              /* dcr_encode_file: 1 = no fsync (survives a killed process,
                               not a power loss) */
  uint64_t max_memory;      /* memory budget for reading the inputs' headers, as
                               dcr_limits.max_memory; 0 = its default */
  int unrelated;            /* 1: encode inputs that share no tensor name, which is
                               refused by default (each tensor goes whole) */
  int max_minor;            /* the newest format 1.x the bundle may need: 0 refuses
                               what needs 1.1 (a set, a new dtype) and codes resized
                               tensors against zeros; default DCR_FORMAT_MINOR */
  const char *sign_key;     /* optional: a secret key file (dcr_keygen); the bundle is
                               signed with it (SPEC.md §20) as it is written, from the
                               bytes the encode reads anyway: the same bytes as
                               dcr_sign_file of the unsigned bundle with the same
                               scope, with no second pass over the bundle or the
                               checkpoints. What is signed: sign_scope */
  const char *const *sliced; /* optional: fnmatch patterns of the tensors that workers hold
                               in part (tensor-parallel slices: SPEC.md §10.5). Their
                               chunks are never DELTA_CLASSED or DELTA_BANDED, whose
                               positions need the whole chunk's base, so that any block
                               of them decodes alone (dcr_patch_placed), at about 1.4x
                               their size. A pattern that matches no tensor is
                               DCR_E_ARGUMENT */
  size_t sliced_count;
  int sign_scope;           /* with sign_key: DCR_SIGN_CHECKPOINTS (default) or
                               DCR_SIGN_BUNDLE, which costs no SHA-256 pass over the
                               checkpoints (see "Signatures") */
  uint64_t reserved_[1];
} dcr_encode_options;

DCR_API void dcr_encode_options_default(dcr_encode_options *options);

/* A sink receives the bundle's bytes in order, always on the thread that called
 * dcr_encode (workers never call it), so it needs no locking; it returns 0, or
 * non-zero to fail the encode with DCR_E_IO. On failure the sink has received a
 * prefix of a bundle that must be discarded. */
typedef int (*dcr_write_fn)(void *opaque, const void *data, size_t size);

/* Statistics of an encode, for reports. */
typedef struct {
  uint64_t bundle_size;
  uint64_t target_size;       /* the target file's size */
  uint64_t elements;          /* elements compared (both sides present) */
  uint64_t changed_elements;  /* elements whose bits differ (zero base for new) */
  uint64_t chunks;            /* chunks examined */
  uint64_t changed_chunks;    /* chunks carried in the bundle */
  uint64_t chunks_by_encoding[7]; /* by id, 1..6; chunks_delta_classed for 7 */
  uint64_t tensors_added, tensors_removed, tensors_recoded;
  uint64_t tensors_resized;   /* coded against their base's common prefix (1.1) */
  uint64_t format_minor;      /* the bundle's format version is 1.format_minor */
  uint64_t chunks_delta_classed; /* chunks coded DELTA_CLASSED (1.2) */
  uint64_t chunks_delta_banded;  /* chunks coded DELTA_BANDED (1.3) */
  uint64_t reserved_[4];
} dcr_encode_stats;

/* Encodes base → target into the sink. Reads each input once, in chunks; memory
 * is bounded by chunk size × threads, not by checkpoint size. Two directories are
 * read as checkpoint sets (DCR_KIND_SET, format 1.1): the bundle takes the whole
 * base directory to the target directory. */
DCR_API int dcr_encode(const char *base_path, const char *target_path,
                       const dcr_encode_options *options, dcr_write_fn write,
                       void *opaque, dcr_encode_stats *stats, dcr_detail *detail);

/* Encodes base → target into the file out_path, atomically: through a temporary
 * file in its directory (nameless where the filesystem allows), fsynced and linked
 * into place with the directory fsynced only when the bundle is whole, so that
 * out_path holds either what it held or the complete bundle, whatever happens. An
 * existing out_path is replaced (keeping its mode and owner) unless
 * options->no_replace, which also keeps a file that appears there meanwhile
 * (DCR_E_IO). Errors writing name out_path. */
DCR_API int dcr_encode_file(const char *base_path, const char *target_path, const char *out_path,
                            const dcr_encode_options *options, dcr_encode_stats *stats,
                            dcr_detail *detail);

/* ------------------------------------------------------------------------ */
/* Reading                                                                   */

typedef struct dcr_reader dcr_reader;

/* Opens a bundle and checks its whole structure (SPEC.md §4-§8.3): header, every
 * section checksum, manifest, identities, index. Chunk contents are not decoded
 * until dcr_reader_verify or apply. limits may be NULL for the defaults. On failure
 * *reader is set to NULL (so dcr_reader_free(*reader) is always safe). */
DCR_API int dcr_reader_open_file(dcr_reader **reader, const char *path,
                                 const dcr_limits *limits, dcr_detail *detail);
/* The same by the random-access profile (SPEC.md §21) that dcr_reader_open_url
 * uses: the footer, every section but the chunk sections, then only the chunks
 * that are used, each checked as it is read. For a file on a mount of an object
 * store (mountpoint-s3, gcsfuse) or a network file system, where every byte read
 * is a transfer, and with dcr_reader_select_tensors. A bundle the profile finds
 * broken is walked whole before the error is reported, so the error is the one
 * dcr_reader_open_file gives (R-RAN-4). */
DCR_API int dcr_reader_open_file_ranged(dcr_reader **reader, const char *path,
                                        const dcr_limits *limits, dcr_detail *detail);
/* The same for a bundle in memory; the buffer must outlive the reader. */
DCR_API int dcr_reader_open_memory(dcr_reader **reader, const void *data, size_t size,
                                   const dcr_limits *limits, dcr_detail *detail);
DCR_API void dcr_reader_free(dcr_reader *reader);

typedef struct {
  unsigned format_major, format_minor;
  uint64_t bundle_size;
  int kind;                  /* dcr_kind */
  uint32_t chunk_size;
  uint64_t entry_count;      /* manifest entries (union of both sides' tensors) */
  uint64_t chunk_count;      /* changed chunks carried */
  uint64_t prefix_length;    /* target prefix bytes carried */
  uint64_t target_size;      /* prefix + data */
  uint8_t base_state[16];    /* SPEC.md §7 */
  uint8_t target_state[16];
  uint64_t meta_count;
  uint64_t section_count;    /* every section, FOOT included */
  uint64_t member_count;     /* DCR_KIND_SET: the target's member files; else 0 */
  uint64_t reserved_[7];
} dcr_bundle_info;

DCR_API void dcr_reader_info(const dcr_reader *reader, dcr_bundle_info *info);

typedef struct {
  int present;      /* 0 if this side does not have the tensor */
  int dtype;
  unsigned rank;
  const uint64_t *dims;
  uint64_t byte_length;
  uint64_t offset;  /* target only: offset in the data region */
  uint8_t hash[16]; /* tensor hash (SPEC.md §7) */
} dcr_tensor_side;

typedef struct {
  const char *name; /* not NUL-terminated; name_length bytes */
  size_t name_length;
  dcr_tensor_side base, target;
  int delta_coded;  /* 1 if coded against the base bytes, 0 against zeros */
  int resized;      /* 1 if coded against the base bytes over the common prefix
                       (format 1.1, SPEC.md §6.5): it grows or shrinks */
  int selected;     /* 1 unless dcr_reader_select_tensors left the tensor out */
  uint32_t raw;     /* DCR_KIND_SET (SPEC.md §2.3): the sides on which the tensor is a
                       raw member file (config.json...): 1 base, 2 target, 3 both */
  uint64_t reserved_[3];
} dcr_tensor_info;

/* i < info.entry_count; pointers stay valid while the reader lives. */
DCR_API void dcr_reader_tensor(const dcr_reader *reader, uint64_t i,
                               dcr_tensor_info *tensor);

/* A member file of a checkpoint set (SPEC.md §2.3): a safetensors member, or a raw
 * one, whose bytes are the tensor named by its path. */
typedef struct {
  const char *path; /* relative, '/'-separated; not NUL-terminated; path_length bytes */
  size_t path_length;
  int kind;         /* DCR_KIND_SAFETENSORS or DCR_KIND_RAW */
  uint64_t prefix_length, data_length; /* the file is prefix_length + data_length bytes */
  uint64_t reserved_[4];
} dcr_member_info;

/* i < info.member_count: the target's members, in path order. */
DCR_API void dcr_reader_member(const dcr_reader *reader, uint64_t i, dcr_member_info *member);

typedef struct {
  uint32_t tensor, chunk;
  int encoding, compression;
  uint32_t count;          /* changed elements */
  uint64_t offset;         /* of the CHNK section */
  uint64_t payload_length; /* CHNK section payload bytes */
  uint64_t base_check, target_check;
  uint64_t reserved_[4];
} dcr_chunk_info;

/* i < info.chunk_count. */
DCR_API void dcr_reader_chunk(const dcr_reader *reader, uint64_t i, dcr_chunk_info *chunk);

typedef struct {
  char type[5];     /* "MANI", "CHNK"...; unknown types as found */
  int critical;
  int compression;  /* dcr_compression */
  uint64_t offset;  /* of the section header */
  uint64_t length;  /* stored payload bytes */
  uint64_t reserved_[4];
} dcr_section_info;

/* i < info.section_count, in file order. */
DCR_API void dcr_reader_section(const dcr_reader *reader, uint64_t i, dcr_section_info *section);

/* i < info.meta_count, in key order. key and value are NUL-terminated UTF-8 (the
 * format forbids U+0000 in them, so none is cut short) and stay valid while the
 * reader lives. */
DCR_API void dcr_reader_meta(const dcr_reader *reader, uint64_t i, dcr_meta *meta);

/* Threads that dcr_reader_verify and dcr_reader_verify_all decode chunks on;
 * 0 (the default) = dcr_default_threads(). Results do not depend on it. */
DCR_API void dcr_reader_set_threads(dcr_reader *reader, unsigned threads);

/* Optional, for dcr_reader_verify and dcr_reader_verify_all: a non-zero *cancel
 * stops them with DCR_E_INTERRUPTED; progress is called from the calling thread
 * with chunk payload bytes checked so far and their total. */
DCR_API void dcr_reader_set_cancel(dcr_reader *reader, const volatile int *cancel);
DCR_API void dcr_reader_set_progress(dcr_reader *reader, dcr_progress_fn progress, void *opaque);

/* Decodes every chunk without a base and checks every rule that needs no base
 * (SPEC.md §9): encodings, positions, decompressed sizes, counts. */
DCR_API int dcr_reader_verify(dcr_reader *reader, dcr_detail *detail);

/* Restricts the reader to the tensors whose names match one of the patterns
 * (fnmatch(3) without flags: '*' matches dots too), for a worker that holds a
 * slice of the model: dcr_patch_memory then resolves and patches those tensors
 * only (at DCR_VERIFY_FULL checking each one's base and target hash, SPEC.md §7:
 * not the state ids, which need every tensor), dcr_reader_verify and the
 * dcr_changes iterator see their chunks only, and a remote reader fetches their
 * chunks only (SPEC.md §21). Calls that build or check a whole target
 * (dcr_apply, dcr_apply_to, dcr_check_target, dcr_patch_file) then fail with
 * DCR_E_ARGUMENT. A pattern that matches no tensor is DCR_E_ARGUMENT and leaves
 * the selection as it was; count 0 selects every tensor again. *matched (may be
 * NULL): the number of tensors selected; dcr_tensor_info.selected says which. */
DCR_API int dcr_reader_select_tensors(dcr_reader *reader, const char *const *patterns,
                                      size_t count, uint64_t *matched, dcr_detail *detail);

/* Called once per problem found; return 0 to go on, non-zero to stop. */
typedef int (*dcr_problem_fn)(void *opaque, const dcr_detail *detail);

/* dcr_reader_verify, but it goes on past a bad chunk and reports every chunk
 * problem to fn (in index order), for validators. Returns the first problem's
 * code, or DCR_OK. Structure problems are found by open, which stops at the
 * first: past a broken structure, offsets and counts downstream mean nothing. */
DCR_API int dcr_reader_verify_all(dcr_reader *reader, dcr_problem_fn fn, void *opaque);

/* ------------------------------------------------------------------------ */
/* Applying                                                                  */

typedef struct {
  unsigned threads;          /* 0 = dcr_default_threads() */
  dcr_progress_fn progress;  /* optional */
  void *progress_opaque;
  const volatile int *cancel; /* optional: non-zero stops with DCR_E_INTERRUPTED */
  int sync;                  /* 1 (default): fsync the output before, and its directory
                              * after, putting it in place */
  /* 0 (default): no cap beyond the reader's limits. Else a target larger than this
   * fails with DCR_E_LIMIT before anything is read or written: a bundle of a few
   * hundred bytes can declare a target of terabytes (an all-zero added tensor;
   * SPEC.md §14), and every caller should cap it. */
  uint64_t max_target_size;
  /* 0 (default): an existing out_path is replaced; the new file keeps its mode
   * and, where permitted, its owner and group. 1: never replace: an out_path that
   * exists, or appears during the apply, fails with DCR_E_IO and is kept. */
  int no_replace;
  uint32_t reserved32_;
  uint64_t reserved_[6];
} dcr_apply_options;

DCR_API void dcr_apply_options_default(dcr_apply_options *options);

/* Applies an open bundle to base_path and writes the target to out_path, through a
 * temporary file in the same directory (nameless where the filesystem supports
 * O_TMPFILE, else a hidden ".dcr-XXXXXX") that is linked or renamed into place only
 * when every check of SPEC.md §10 has passed. On failure nothing is left at
 * out_path (an existing file there is untouched), and no temporary file either,
 * even after a crash where O_TMPFILE is supported. The new file's mode is 0666
 * less the umask (which is read by open(), never changed). Unchanged zeros are
 * not written: the file is sparse there. Fails with DCR_E_IO, before writing, if
 * the filesystem reports too little free space. The base is read with pread (never
 * mapped): a base truncated or modified during the apply fails it cleanly, and
 * the hashes cover exactly the bytes written. A base_path that already holds the
 * bundle's target is accepted too (§10.2: re-applying is a no-op), so a retried
 * job succeeds; the output is then the target. out_path may be NULL to check
 * without writing. */
DCR_API int dcr_apply(dcr_reader *reader, const char *base_path, const char *out_path,
                      const dcr_apply_options *options, dcr_detail *detail);

/* dcr_apply with the target's bytes given to a sink, in file order, from the
 * calling thread only (workers never call it), with no temporary file: for a pipe
 * or standard output. The sink returns 0, or non-zero to fail with DCR_E_IO.
 * The bytes reach the sink before the last hashes are checked: unless this returns
 * DCR_OK, what the sink received must be discarded (as with `zstd -d` to a pipe).
 * options' sync and no_replace do not apply. A base_path that is already the
 * target is accepted as by dcr_apply (it is told from the base before any byte is
 * sent, by its tensors or by the bundle's first changed chunk). */
DCR_API int dcr_apply_to(dcr_reader *reader, const char *base_path,
                         const dcr_apply_options *options, dcr_write_fn write, void *opaque,
                         dcr_detail *detail);

/* Checks that the file at path is exactly the bundle's target (same state id and
 * prefix) without writing anything. options may be NULL; its cancel and progress
 * are used (progress per tensor, in data bytes), its threads are not: the file is
 * read once, sequentially. */
DCR_API int dcr_check_target(dcr_reader *reader, const char *path,
                             const dcr_apply_options *options, dcr_detail *detail);

/* ------------------------------------------------------------------------ */
/* Refit: patching a checkpoint where it already is (SPEC.md §10.3, §18)     */
/*
 * A rollout worker holds step N's weights, in memory or in a file, and needs step
 * N+1's. A dcr_patch applies one open bundle to them in place: only changed
 * chunks are written. Every level that checks does all its checking before the
 * first byte of the caller's state changes, so a wrong base (or one wrong in a
 * single chunk) leaves that state exactly as it was. A checkpoint that already is
 * the bundle's target is left as it is and the call succeeds (§10.2), so retried
 * jobs and bundles received twice are harmless.
 *
 * Options arrive through setters, so that new ones never change a struct that
 * callers allocate.
 */

/* How much of §10 a patch checks, with its cost (SPEC.md §10.3). */
typedef enum {
  /* Every base and every target tensor hash, so both state ids, as a copy apply:
   * reads every byte of the checkpoint once. The default. */
  DCR_VERIFY_FULL = 0,
  /* R-APL-2 for each changed chunk: its base bytes give base_check and the patched
   * bytes give target_check. Reads only changed chunks; unchanged chunks and
   * tensors the bundle does not touch are not checked. */
  DCR_VERIFY_CHUNK = 1,
  /* Trusted, for callers that verify by other means: decode and patch, after one
   * look at the first changed chunk so that a bundle applied twice is recognized
   * (and a wholly wrong base refused). Wrong bytes elsewhere go undetected. */
  DCR_VERIFY_NONE = 2
} dcr_verify;

typedef struct dcr_patch dcr_patch;

/* A patch of one open bundle; the reader must outlive it. */
DCR_API int dcr_patch_create(dcr_patch **patch, dcr_reader *reader, dcr_detail *detail);
DCR_API void dcr_patch_free(dcr_patch *patch);
/* DCR_VERIFY_*; DCR_E_ARGUMENT for anything else. */
DCR_API int dcr_patch_set_verify(dcr_patch *patch, int level);
/* Worker threads; 0 (the default) = dcr_default_threads(). Results do not depend on it. */
DCR_API void dcr_patch_set_threads(dcr_patch *patch, unsigned threads);
DCR_API void dcr_patch_set_progress(dcr_patch *patch, dcr_progress_fn progress, void *opaque);
/* Non-zero *cancel stops the checking pass with DCR_E_INTERRUPTED, the state as
 * before the call. Writing, once started, is not interrupted (it is the short
 * part): a patch is never left half done by a cancel. */
DCR_API void dcr_patch_set_cancel(dcr_patch *patch, const volatile int *cancel);
/* Files only. 1 (the default): fsync the journal, the checkpoint and their
 * directory in the order of SPEC.md §18.4, so that power loss is survived too;
 * 0: survive a killed process only. */
DCR_API void dcr_patch_set_sync(dcr_patch *patch, int sync);

/* What the last dcr_patch_memory or dcr_patch_file did. */
typedef struct {
  int already_target;      /* 1: the input was the target already; nothing written */
  int recovered;           /* 1: a journal left by an interrupted apply was replayed first */
  uint64_t chunks_patched; /* changed chunks written */
  uint64_t bytes_checked;  /* checkpoint bytes read and hashed */
  uint64_t bytes_written;  /* checkpoint bytes written */
  uint64_t journal_bytes;  /* size of the apply journal (files) */
  int journal_discarded;   /* 1: a journal that could not be replayed was removed first,
                              the file being proven a whole state (dcr_journal_outcome) */
  int salvaged;            /* 1: a part-written file was finished (dcr_patch_set_salvage) */
  uint64_t chunks_unchecked; /* dcr_patch_placed: changed chunks held in part and written
                                without a check (no whole base to check them against) */
  uint64_t chunks_not_held;  /* dcr_patch_placed: changed chunks of tensors given that no
                                placement touches: neither decoded nor checked */
} dcr_patch_stats;

/* Fills the first `size` bytes of *stats (pass sizeof *stats), so that the struct
 * can grow without breaking callers built against an older header. */
DCR_API void dcr_patch_stats_get(const dcr_patch *patch, dcr_patch_stats *stats, size_t size);

/* Memory apply. The caller's tensors, one buffer per target tensor. */
typedef struct {
  void *data;
  uint64_t size; /* bytes at data */
} dcr_buffer;

/* Called once per manifest entry i, in entry order, before anything is read or
 * written (twice for a resized tensor, below). Set buffer->data and
 * buffer->size, then return 0 (non-zero fails the apply with DCR_E_ARGUMENT). For
 * an entry with a target (tensor->target.present):
 *  - delta-coded (tensor->delta_coded): the tensor as the caller holds it, the base,
 *    target.byte_length bytes; it is patched in place;
 *  - added or recoded: a buffer of target.byte_length bytes for the new tensor,
 *    whose contents are ignored and overwritten;
 *  - resized (tensor->resized, format 1.1, SPEC.md §6.5): asked twice. First with
 *    tensor->target.present 0: the tensor as the caller holds it (base.byte_length
 *    bytes, only read; or target.byte_length bytes if the bundle was applied to it
 *    already). Then with tensor->base.present 0: a new buffer of target.byte_length
 *    bytes, contents ignored, that receives the target (it may be NULL when the
 *    held tensor has the target's size: it is then never written);
 * and for a removed entry (base only): its bytes, or NULL to skip them. Under
 * DCR_VERIFY_FULL every base byte given is hashed; removed and recoded tensors
 * whose base bytes are not given are not checked (they do not change the result).
 * A raw member of a set (tensor->raw covers every side the entry has: config.json,
 * tokenizer files, the index) may be given NULL buffers: it is then skipped,
 * neither checked nor written, so that a worker that holds the weights alone can
 * apply a set's bundle; given buffers, it is patched as any tensor (its bytes as
 * U8). Buffers must not overlap; a tensor of 0 bytes may have data NULL. */
typedef int (*dcr_resolve_fn)(void *opaque, uint64_t entry, const dcr_tensor_info *tensor,
                              dcr_buffer *buffer);

/* Applies the bundle to the caller's buffers on threads, touching only changed
 * chunks (and added and resized tensors). With FULL or CHUNK verification nothing
 * is written unless every check passes; the buffers are either the base,
 * untouched, or the target (resized tensors: in their new buffers).
 *
 * What FULL proves (SPEC.md §10.3): each tensor given had its base tensor hash
 * (removed and recoded ones: if their base bytes are given) and gets its target
 * tensor hash, each compared with IDEN before the first byte is written, on the
 * bytes the patch then writes. The state ids are functions of those hashes (§7),
 * and a set's leaves its raw members out (§2.3): with every target tensor given
 * (raw members aside; no dcr_reader_select_tensors) the result is proven to be
 * target_state_id, and with the base bytes of removed and recoded tensors given
 * too the input was base_state_id: no separate dcr_checkpoint_state_id pass.
 * Not verified: the bytes of raw members skipped (they are not written either:
 * the caller keeps its own copies, of whatever content), the base bytes of
 * recoded tensors not given, and the dtypes and shapes the caller holds its
 * tensors as (only byte lengths are checked). */
DCR_API int dcr_patch_memory(dcr_patch *patch, dcr_resolve_fn resolve, void *opaque,
                             dcr_detail *detail);

/* In-place file apply: patches the checkpoint at path into the bundle's target,
 * writing only changed chunks, when the target's layout is the base's (same
 * prefix length, same offsets and lengths for every tensor, none added, removed or
 * recoded); otherwise DCR_E_ARGUMENT, and a copy apply (dcr_apply) is needed.
 * Crash-safe: the changes are first written to an apply journal beside the file,
 * "PATH.dcr-journal" (SPEC.md §18), and a call that finds one left by an
 * interrupted apply replays it first, whatever bundle it is given, so running
 * the same command again finishes the job. A journal that cannot be replayed
 * (damaged, or cut short) is removed only if the file is proven to be a whole
 * state (the journal's base or target, or this bundle's); otherwise the call
 * fails with DCR_E_JOURNAL and changes neither (see dcr_patch_set_salvage). The
 * file is locked (flock) while patched. A symbolic link is refused
 * (DCR_E_ARGUMENT): the file it points to may be shared, as a Hugging Face
 * cache's blobs are; hard links share the change. *
 * A set bundle (DCR_KIND_SET) takes path as a model directory (SPEC.md §18.6):
 * the target is written and checked in full (whatever the level) into the
 * hidden PATH/.dcr-stage/, then through one journal, PATH/.dcr-journal, members
 * of the same size get only their changed blocks, resized or added ones are
 * renamed in from the stage, removed ones go; members already at the target are
 * not touched (stats: already_target when none changes). The directory is locked
 * while patched, a linked one is refused (DCR_E_ARGUMENT), and a member that is a
 * link is replaced, never written through. Needs room for the target beside it. */
DCR_API int dcr_patch_file(dcr_patch *patch, const char *path, dcr_detail *detail);

/* Salvage (files, default 0): a checkpoint part-written by an interrupted apply of
 * this bundle whose journal cannot be replayed is finished from the bundle, when
 * every changed chunk is still its base or already its target: those at their
 * base are applied, at DCR_VERIFY_FULL whatever the level set, and nothing is
 * written until every target tensor hash of the result has matched. The damaged
 * journal is then replaced by the new one (SPEC.md §18.4, R-JNL-5). A chunk that
 * is neither (torn by the crash) fails with DCR_E_BASE_MISMATCH, changing
 * nothing: restore the file from a copy of its base or target instead. */
DCR_API void dcr_patch_set_salvage(dcr_patch *patch, int salvage);

/* What a recovery found (SPEC.md §18.4). */
typedef enum {
  DCR_JOURNAL_NONE = 0,     /* no journal to finish (one never published, which never
                               reached the file, is removed) */
  DCR_JOURNAL_REPLAYED = 1, /* a committed journal was replayed: the file is its target */
  DCR_JOURNAL_DISCARDED = 2 /* a journal that cannot be replayed was removed: the file was
                               proven to be its base or target, or one of the states given */
} dcr_journal_outcome;

/* Finishes or discards the journal an interrupted dcr_patch_file left beside
 * path, if any (dcr_patch_file does this itself), and sets *outcome. A journal
 * that cannot be replayed (torn, damaged, or not fitting the file) is removed only
 * if the file's state id is the journal's base or target state or one of the
 * `count` states at `states` (16 bytes each, back to back: for example the base
 * and target states of the bundles about to be applied), which costs one read of
 * the file; otherwise DCR_E_JOURNAL, and neither file changes. sync as
 * dcr_patch_set_sync. */
DCR_API int dcr_journal_recover_known(const char *path, int sync, const uint8_t *states,
                                      size_t count, int *outcome, dcr_detail *detail);
/* The same with no states given; *recovered is 1 if a journal was replayed. */
DCR_API int dcr_journal_recover(const char *path, int sync, int *recovered, dcr_detail *detail);

/* The iterator over changed chunks, for callers that scatter changes into memory
 * the library cannot touch (an accelerator): each changed chunk, in index order,
 * decoded and checked by every rule that needs no base (§9). The values an
 * operation needs (SPEC.md §9.1):
 *  - DCR_OP_XOR:       element ^= value;
 *  - DCR_OP_OVERWRITE: element = value;
 *  - DCR_OP_DELTA:     element = key(key(element) + unzigzag(value)) where, for w-bit
 *    elements read as unsigned integers, key(u) = u ^ (2^(w-1) - 1) if the top bit
 *    of u is set, else u (its own inverse), unzigzag(z) = (z >> 1) ^ -(z & 1), and
 *    arithmetic is modulo 2^w.
 * Values are whole elements in the tensor's byte order (little-endian). Nothing is
 * checked against a base: a caller that uses this directly verifies by other means
 * (for example the state id of the result, dcr_checkpoint_state_id). */
typedef enum { DCR_OP_XOR = 0, DCR_OP_OVERWRITE = 1, DCR_OP_DELTA = 2 } dcr_op;

typedef struct {
  uint64_t entry;            /* manifest entry (dcr_reader_tensor) */
  uint32_t chunk;            /* chunk number within the tensor */
  uint64_t offset;           /* byte offset of the chunk in the tensor */
  uint64_t length;           /* bytes in the chunk */
  unsigned element_size;     /* bytes per element: 1, 2, 4 or 8 */
  int op;                    /* dcr_op */
  uint32_t count;            /* changed elements */
  const uint32_t *positions; /* sparse: count element indices in the chunk, increasing;
                                NULL when dense */
  const void *values;        /* count values (sparse) or length / element_size values
                                (dense; a 0 XOR or delta value leaves its element) */
  uint64_t base_check, target_check; /* SPEC.md §8.2, for callers that can hash */
} dcr_change;

typedef struct dcr_changes dcr_changes;

DCR_API int dcr_changes_open(dcr_changes **changes, dcr_reader *reader, dcr_detail *detail);
/* The next changed chunk; *change is NULL after the last. The change (and what it
 * points to) is valid until the next call. */
DCR_API int dcr_changes_next(dcr_changes *changes, const dcr_change **change,
                             dcr_detail *detail);
DCR_API void dcr_changes_free(dcr_changes *changes);
/* DELTA_BANDED chunks (format 1.3, the default, SPEC.md §9.5) and DELTA_CLASSED ones
 * (1.2, §9.4) name their changes by rank among the chunk's base elements of a band
 * or class of exponents: their positions exist only given the base,
 * so dcr_changes_next fails on one with DCR_E_ARGUMENT unless a base resolver is set
 * here (a chunk of a tensor coded against zeros needs none). resolve (dcr_resolve_fn,
 * on the calling thread, from dcr_changes_next) is asked for an entry when its
 * first such chunk comes (chunks come in entry order): buffer = the base tensor as
 * the caller holds it, base.byte_length bytes in host memory, only read, valid until
 * the iterator moves to another entry. Such a chunk is then handed out as op
 * DCR_OP_DELTA with positions (increasing) and values in their order. Cost, per
 * such chunk: its base bytes are hashed and must give base_check (else
 * DCR_E_BASE_MISMATCH: a wrong base is refused, not turned into wrong positions),
 * then walked once, element by element, about as much CPU as applying the chunk
 * with dcr_patch_memory; a caller whose base lives on an accelerator copies it to
 * the host first. Other encodings never ask for the base. */
DCR_API void dcr_changes_set_base(dcr_changes *changes, dcr_resolve_fn resolve, void *opaque);
/* Applies a change to the chunk's bytes on the CPU (length == change->length): the
 * reference for a caller's own kernel. A dense overwrite whose count of changed
 * elements is wrong for these bytes fails with DCR_E_ENCODING and changes nothing. */
DCR_API int dcr_change_apply(const dcr_change *change, void *chunk, size_t length,
                             dcr_detail *detail);

/* ------------------------------------------------------------------------ */
/* Placement: patching the blocks of tensors that an inference engine holds  */
/*
 * A tensor-parallel rank of a serving engine holds blocks of the checkpoint's
 * tensors, often several in one buffer (a fused qkv_proj holds the rank's rows of
 * q, k and v one after another). dcr_patch_placed applies a bundle to such blocks
 * where they are, without assembling whole tensors.
 *
 * The map. A tensor of shape [d0, d1, ..., dk] is viewed as a matrix of
 * R = d0 rows and C = d1 * ... * dk columns (a scalar: 1 x 1); its element e, in
 * the tensor's byte order, is at row e / C, column e % C. A placement holds the
 * block of rows [row0, row0 + rows) and columns [col0, col0 + cols), and element
 * (r, c) of the block is at
 *     (uint8_t *)data + offset + (r - row0) * row_stride + (c - col0) * esize
 * where esize is the target dtype's size in bytes. Column-parallel slices are
 * row blocks (cols = C), row-parallel ones column blocks (rows = R). */
typedef struct {
  void *data;
  uint64_t size;         /* bytes at data: every element of the block lies within */
  uint64_t offset;       /* bytes from data to element (row0, col0) */
  uint64_t row_stride;   /* bytes from one row of the block to the next, at least
                            cols * esize when rows > 1 */
  uint64_t row0, rows;   /* tensor rows held, rows >= 1 */
  uint64_t col0, cols;   /* tensor columns held, in elements, cols >= 1 */
  uint64_t reserved_[2]; /* 0 */
} dcr_placement;

/* Called once per selected manifest entry that has a target, in entry order,
 * before anything is read or written: set *placements to `*count` placements of
 * the tensor (the array valid until dcr_patch_placed returns), or *count to 0 when
 * the caller holds none of it. Return 0; non-zero fails with DCR_E_ARGUMENT. The
 * blocks of a tensor must not overlap, and the bytes placements span (from a
 * block's first element to its last) must not overlap across all of them:
 * DCR_E_ARGUMENT, naming the tensor, before anything is read. A tensor the bundle
 * resizes (format 1.1) cannot be placed (DCR_E_ARGUMENT): apply it whole. */
typedef int (*dcr_place_fn)(void *opaque, uint64_t entry, const dcr_tensor_info *tensor,
                            const dcr_placement **placements, size_t *count);

/* Whole base tensors for dcr_patch_placed, in host memory, only read
 * (dcr_resolve_fn as dcr_changes_set_base takes it; a buffer of base.byte_length
 * bytes, or data NULL for one the caller does not have): for example a node's one
 * shared copy of the model that its ranks' slices come from. */
DCR_API void dcr_patch_set_base(dcr_patch *patch, dcr_resolve_fn resolve, void *opaque);

/* Applies the bundle to the blocks the caller holds, on threads: only the changed
 * chunks that touch a held block are decoded, and only the held elements they
 * change are written.
 *
 * What is checked, before anything is written (verify FULL and CHUNK; FULL checks
 * what CHUNK does, since tensor hashes need whole tensors): every changed chunk
 * whose base the caller can show whole, because its blocks hold the whole chunk
 * or dcr_patch_set_base gives the tensor, must give the chunk's base_check (and
 * the held elements must equal the whole base given), and its result target_check
 * (SPEC.md §8.2). A chunk held only in part with no whole base given cannot be
 * checked: its changes are written unchecked (stats: chunks_unchecked), and a
 * chunk whose positions depend on the base (DELTA_BANDED, the default format 1.3,
 * and DELTA_CLASSED, 1.2: SPEC.md §9.4, §9.5) cannot be decoded at all then:
 * DCR_E_ARGUMENT, naming it, before anything is written. Give the whole base, or
 * encode the bundle with format 1.1, for such slices. If every chunk checked is
 * already its target, nothing is written (already_target); chunks that disagree
 * (some base, some target) are DCR_E_BASE_MISMATCH. A bundle applied twice to
 * slices none of whose chunks can be checked is applied twice: track the state
 * (the bundle's target_state) where the check cannot see.
 *
 * DCR_VERIFY_NONE skips the checks, but a chunk whose positions depend on the base
 * still checks its base_check (wrong positions are not written). Memory: a chunk's
 * bytes per thread and the changes the check keeps for the patch, within the
 * reader's max_memory. */
DCR_API int dcr_patch_placed(dcr_patch *patch, dcr_place_fn place, void *opaque,
                             dcr_detail *detail);

/* ------------------------------------------------------------------------ */
/* Checkpoints                                                               */

/* A checkpoint file opened for reading (SPEC.md §2): its tensors and its state id
 * (§7), the id that bundles name as their base and target. */
typedef struct dcr_checkpoint dcr_checkpoint;

/* Opens the file at path as a checkpoint of `kind` (dcr_kind) and parses its
 * prefix as strictly as apply does (§2.1): DCR_E_CHECKPOINT, DCR_E_LAYOUT... for a
 * file that is not valid safetensors. DCR_KIND_RAW takes the whole file as one U8
 * tensor named "raw"; DCR_KIND_SET a directory, as SPEC.md §2.3 reads it (its
 * state id leaves raw members out). Tensor bytes are read only by
 * dcr_checkpoint_state_id. limits may be NULL for the defaults. */
DCR_API int dcr_checkpoint_open(dcr_checkpoint **ck, const char *path, int kind,
                                const dcr_limits *limits, dcr_detail *detail);
DCR_API void dcr_checkpoint_free(dcr_checkpoint *ck);

typedef struct {
  int kind;               /* dcr_kind */
  uint64_t file_size;
  uint64_t prefix_length; /* the data region starts here */
  uint64_t tensor_count;
  uint64_t member_count;  /* DCR_KIND_SET: its member files; else 0 */
  uint64_t reserved_[3];
} dcr_checkpoint_summary; /* not _info: that is the function's name */

DCR_API void dcr_checkpoint_info(const dcr_checkpoint *ck, dcr_checkpoint_summary *info);
/* i < info.member_count: a set's members, in path order. */
DCR_API void dcr_checkpoint_member(const dcr_checkpoint *ck, uint64_t i, dcr_member_info *member);

/* i < info.tensor_count, in bytewise name order (as §7 sorts them). side->present
 * is 1 and side->offset is the tensor's offset in the data region; side->hash is
 * the tensor hash once dcr_checkpoint_state_id has succeeded, zeros before. *name
 * (not NUL-terminated; *name_length bytes) stays valid while ck lives. */
DCR_API void dcr_checkpoint_tensor(const dcr_checkpoint *ck, uint64_t i, dcr_tensor_side *side,
                                   const char **name, size_t *name_length);

/* Optional, for dcr_checkpoint_state_id: a non-zero *cancel stops it with
 * DCR_E_INTERRUPTED; progress is called from the calling thread with tensor bytes
 * hashed so far and the data region's size. */
DCR_API void dcr_checkpoint_set_cancel(dcr_checkpoint *ck, const volatile int *cancel);
DCR_API void dcr_checkpoint_set_progress(dcr_checkpoint *ck, dcr_progress_fn progress, void *opaque);

/* Reads every tensor's bytes and writes the state id (§7) to out; the result is
 * kept, so a second call reads nothing. threads: 0 = dcr_default_threads(); the result
 * does not depend on it. */
DCR_API int dcr_checkpoint_state_id(dcr_checkpoint *ck, unsigned threads, uint8_t out[16],
                                    dcr_detail *detail);

/* ------------------------------------------------------------------------ */
/* History archives (SPEC.md §19)                                            */
/*
 * A training run's chain of bundles, with keyframes (whole checkpoints), in a
 * tar, tar.zst or zip file that tar and unzip open: an index member first, then
 * the members in step order, so that any step is rebuilt in one pass over the
 * archive, from a pipe too. Keyframes and bundles are safetensors-kind (§2.1).
 */
typedef enum { DCR_HISTORY_KEYFRAME = 1, DCR_HISTORY_BUNDLE = 2 } dcr_history_kind;
typedef enum { DCR_HISTORY_TAR = 1, DCR_HISTORY_TAR_ZSTD = 2, DCR_HISTORY_ZIP = 3 } dcr_history_container;

typedef struct dcr_history dcr_history;

typedef struct {
  unsigned threads;           /* 0 = dcr_default_threads() */
  /* extract: how each bundle after the keyframe is checked (DCR_VERIFY_*; default
   * DCR_VERIFY_CHUNK); the result's state id is checked at the end unless NONE. */
  int verify;
  int sync;                   /* 1 (default): fsync outputs before putting them in place */
  int no_replace;             /* 1: never replace an existing output (extract, create) */
  uint64_t max_target_size;   /* extract: refuse a larger checkpoint (0: no cap) */
  int container;              /* create: DCR_HISTORY_*; 0 (default): from the name's
                                 suffix (.tar, .tar.zst or .tzst, .zip) */
  uint64_t keyframe_every;    /* create, append: a keyframe at every step that is a
                                 multiple of it, built from the chain; 0 keeps the
                                 archive's (none, for create) */
  uint64_t first_step;        /* create: the keyframe's step (default 0) */
  const char *run_id;         /* create: the run the archive keeps (default: the
                                 first bundle's run_id metadata, if any) */
  const char *temp_dir;       /* verify: where a keyframe is hashed; NULL: TMPDIR,
                                 else /tmp */
  const volatile int *cancel; /* non-zero stops with DCR_E_INTERRUPTED */
  /* extract, verify, append: when not NULL, every bundle read or added must be
   * signed by one of these keys (dcr_reader_verify_signature, SPEC.md §20.4),
   * checked before it is used: DCR_E_SIGNATURE otherwise. */
  const struct dcr_keyring *require_signature;
  /* create, append: the memory budget for reading the archive, the keyframe and
   * the bundles, as dcr_limits.max_memory (0: its default); extract and verify
   * use the limits given to dcr_history_open. */
  uint64_t max_memory;
  uint64_t reserved_[6];
} dcr_history_options;

DCR_API void dcr_history_options_default(dcr_history_options *options);

/* Opens an archive and reads its index (its first member), checking every rule
 * of §19.3: DCR_E_ARCHIVE, DCR_E_VERSION, DCR_E_TRUNCATED; DCR_E_NOMEM as soon as
 * the index read so far and its parse would pass limits->max_memory. The members
 * are read later, once, by dcr_history_extract or dcr_history_verify, within the
 * same budget (SPEC.md §19.4). _fd reads a pipe or any descriptor, which stays the
 * caller's; dcr_history_open_url (below, with the HTTP options) a URL. */
DCR_API int dcr_history_open(dcr_history **history, const char *path, const dcr_limits *limits,
                             dcr_detail *detail);
DCR_API int dcr_history_open_fd(dcr_history **history, int fd, const dcr_limits *limits,
                                dcr_detail *detail);
DCR_API void dcr_history_free(dcr_history *history);

typedef struct {
  int container;            /* dcr_history_container */
  unsigned version_major, version_minor; /* of the layout (§19.5) */
  uint64_t member_count;
  uint64_t first_step, last_step;
  uint64_t keyframe_every;  /* 0: none declared */
  const char *run_id;       /* NULL: none; valid while the history lives */
  uint64_t reserved_[6];
} dcr_history_summary;

DCR_API void dcr_history_info(const dcr_history *history, dcr_history_summary *info);

typedef struct {
  int kind;                 /* dcr_history_kind */
  uint64_t step;
  const char *name;         /* the member's path in the archive */
  uint64_t size;
  uint8_t digest[16];       /* XXH3-128 of its bytes, as xxh128sum prints it */
  uint8_t base_state[16];   /* bundle: the state it applies to; keyframe: zeros */
  uint8_t state[16];        /* the state the step ends in: the keyframe's, the bundle's target */
  uint64_t meta_count;      /* bundle: its metadata pairs */
  uint32_t directory;       /* 1: a keyframe that is a directory, a set (history 1.1);
                               size is its files' sum, digest zeros */
  uint32_t reserved32_;
  uint64_t file_count;      /* a directory keyframe: its files */
  uint64_t reserved_[2];
} dcr_history_member;

/* i < member_count, in archive order. Strings stay valid while the history lives. */
DCR_API void dcr_history_member_get(const dcr_history *history, uint64_t i, dcr_history_member *member);
/* j < member.meta_count, in key order. */
DCR_API void dcr_history_member_meta(const dcr_history *history, uint64_t i, uint64_t j, dcr_meta *meta);
/* The first step whose state is `state`; DCR_E_ARGUMENT if no step has it. */
DCR_API int dcr_history_find_state(const dcr_history *history, const uint8_t state[16], uint64_t *step,
                                   dcr_detail *detail);

/* Rebuilds the checkpoint of `step` at out_path, reading the archive once: the
 * nearest keyframe at or before it, then each bundle after it applied in place
 * to one work file beside out_path (no intermediate checkpoint), which appears
 * at out_path only when every check has passed. Consumes the history: one call
 * of extract or verify per open. */
DCR_API int dcr_history_extract(dcr_history *history, uint64_t step, const char *out_path,
                                const dcr_history_options *options, dcr_detail *detail);
/* Reads every member: each one's size and digest, each bundle whole (§15) with
 * its state ids and metadata as the index says, each keyframe's state id. With
 * the index's chain rules, that checks every link. Consumes the history. */
DCR_API int dcr_history_verify(dcr_history *history, const dcr_history_options *options,
                               dcr_detail *detail);

/* Writes a new archive at path: the keyframe checkpoint, then the bundles in
 * order (as dcr_history_append takes them). Atomic: path appears whole or not at
 * all. */
DCR_API int dcr_history_create(const char *path, const char *keyframe_path,
                               const char *const *bundle_paths, size_t bundle_count,
                               const dcr_history_options *options, dcr_detail *detail);
/* Adds bundles to the archive at path, each the next step: its base must be the
 * state the archive ends in (DCR_E_BASE_MISMATCH), its metadata must agree with
 * the archive (step, run_id, parent_bundle: DCR_E_ARCHIVE). Keyframes due by
 * keyframe_every are built from the chain. Concurrent appends are serialized by
 * an flock on the archive.
 * A plain tar whose index has room is appended to in place (SPEC.md §19.6): the
 * new members are written after the last one, then the index in its padded slot,
 * under a journal, path.dcr-append, that undoes a torn append; the old members are
 * neither read nor written. The append waits for readers that hold the archive
 * open (dcr_history_open) to free it, and they wait for it to finish writing.
 * Any other archive (tar.zst, zip, a tar without room) is rewritten beside itself
 * with a new index and renamed over, its container kept; a crash leaves the old
 * archive or the new one. */
DCR_API int dcr_history_append(const char *path, const char *const *bundle_paths, size_t bundle_count,
                               const dcr_history_options *options, dcr_detail *detail);
/* Undoes the append that a dead process left half done (its journal is beside
 * the archive at path): the archive is made again, byte for byte, what it was
 * before, and the journal removed; *rolled_back (may be NULL) says whether there
 * was one. dcr_history_append and dcr_history_open do this first on their own
 * (open only where it may write). A journal that is damaged, or that another
 * archive is at path for: DCR_E_JOURNAL, both files kept. Uses options->sync. */
DCR_API int dcr_history_recover(const char *path, const dcr_history_options *options, int *rolled_back,
                                dcr_detail *detail);

/* ------------------------------------------------------------------------ */
/* Squash: consecutive bundles made one (SPEC.md §10.4)                      */

typedef struct {
  int level;          /* zstd level of chunks coded anew, MANI and META; 0 stores;
                         default 3 (chunks taken whole keep theirs) */
  unsigned threads;   /* 0 = dcr_default_threads(); the bytes do not depend on it */
  int max_minor;      /* the newest format 1.x the result may need; -1 (the default):
                         the newest of the bundles' (1.1 bundles squash to 1.1 or less) */
  int no_replace;     /* 1: never replace a file at out_path */
  int no_sync;        /* 1: no fsync (survives a killed process, not a power loss) */
  uint32_t reserved32_;
  dcr_progress_fn progress; /* optional: bytes of chunks made, of the total */
  void *progress_opaque;
  const volatile int *cancel; /* optional: non-zero stops with DCR_E_INTERRUPTED */
  uint64_t max_memory;      /* as dcr_limits.max_memory; 0 = its default */
  const char *const *sliced; /* optional: fnmatch patterns of the tensors that workers hold
                               in part, as dcr_encode_options.sliced: their chunks made
                               anew are never DELTA_CLASSED or DELTA_BANDED, and such a
                               chunk of the bundles is made anew (which needs base_path).
                               A pattern that matches no tensor is DCR_E_ARGUMENT */
  size_t sliced_count;
  uint64_t reserved_[4];
} dcr_squash_options;

DCR_API void dcr_squash_options_default(dcr_squash_options *options);

/* Writes to out_path one bundle that takes the base of bundle_paths[0] to the
 * target of bundle_paths[count - 1], each bundle's base being the target of the one
 * before (else DCR_E_BASE_MISMATCH, naming the two). The result has b1's base side,
 * bn's target side, prefix and metadata. Chunks are composed without the base
 * where their changes compose (XOR with XOR, ULP delta with ULP delta, an overwrite
 * touched once); where they do not (DELTA_BANDED and DELTA_CLASSED chunks, mixed changes, tensors
 * added, recoded or resized along the chain) the chunk is rebuilt from the base
 * at base_path, which is then checked whole (DCR_E_BASE_MISMATCH) before anything is
 * written; without one such a chunk fails with DCR_E_ARGUMENT, naming it. For sets
 * (DCR_KIND_SET) each bundle's base raw members must be the last one's target ones
 * (DCR_E_BASE_MISMATCH). Bundles of different chunk sizes are refused
 * (DCR_E_ARGUMENT). Atomic as dcr_encode_file; an out_path that is one of the
 * inputs is refused (DCR_E_ARGUMENT). options may be NULL; stats as dcr_encode's
 * (elements and chunks: the target's). */
DCR_API int dcr_squash(const char *const *bundle_paths, size_t count, const char *base_path,
                       const char *out_path, const dcr_squash_options *options,
                       dcr_encode_stats *stats, dcr_detail *detail);

/* ------------------------------------------------------------------------ */
/* Signatures (SPEC.md §20)                                                  */
/*
 * An Ed25519 signature (libsodium) in the bundle's ancillary SIGN section, over a
 * table of SHA-256 digests: one per section before SIGN (so every byte of the
 * bundle but SIGN and FOOT) and one per base and target tensor, taken over its
 * 4096-byte pieces as the tensor hashes of §7 are. A bundle may carry signatures
 * by several keys. Keys live in text files (README, "Signed bundles"):
 *   dcr-ed25519-public-key v1 / dcr-ed25519-secret-key v1, the key id (32 hex
 *   digits), the key in base64;
 * a secret key file must not be readable by group or others (DCR_E_ARGUMENT).
 * Every failure to verify is DCR_E_SIGNATURE, with what failed in the detail.
 */
#define DCR_KEY_ID_SIZE 16

/* What a signature signs (a signer's scope):
 * - DCR_SIGN_CHECKPOINTS (signature format 1.0): the bundle and SHA-256 digests of
 *   its base and target tensors, so that a checkpoint from storage others can write
 *   can be checked against it (dcr_reader_verify_signed_checkpoint). The signer
 *   hashes both checkpoints: 0.2-0.3 CPU-seconds a 256 MiB pair (README, "Signed
 *   bundles"), more than the encode itself.
 * - DCR_SIGN_BUNDLE (signature format 2.0, SPEC.md §20.6): the bundle alone, whose
 *   IDEN section names the checkpoints by XXH3-128. A worker applying it to a base
 *   of its own (the previous step's target) is as safe as with the other; a
 *   checkpoint cannot be checked against it (DCR_E_SIGNATURE). Costs a SHA-256
 *   pass over the bundle only. A reader that knows only signature format 1.0
 *   refuses it. */
#define DCR_SIGN_CHECKPOINTS 0
#define DCR_SIGN_BUNDLE 1

/* A new key pair from the system's random source: secret_path is created with
 * mode 0600 and public_path with 0644, both new (an existing file is DCR_E_IO,
 * never replaced). key_id (optional) gets the key id. */
DCR_API int dcr_keygen(const char *secret_path, const char *public_path,
                       uint8_t key_id[DCR_KEY_ID_SIZE], dcr_detail *detail);

/* Trusted public keys, read from key files. */
typedef struct dcr_keyring dcr_keyring;
DCR_API int dcr_keyring_create(dcr_keyring **ring, dcr_detail *detail);
/* Adds the public key in the file at path (DCR_E_ARGUMENT for a malformed file or
 * a secret key); key_id (optional) gets its id. */
DCR_API int dcr_keyring_add_file(dcr_keyring *ring, const char *path,
                                 uint8_t key_id[DCR_KEY_ID_SIZE], dcr_detail *detail);
DCR_API void dcr_keyring_free(dcr_keyring *ring);

typedef struct {
  unsigned threads;           /* hashing the checkpoints; 0 = dcr_default_threads() */
  int no_sync;                /* 1: no fsync of the output */
  const volatile int *cancel; /* optional: non-zero stops with DCR_E_INTERRUPTED */
  int scope;                  /* DCR_SIGN_CHECKPOINTS (default) or DCR_SIGN_BUNDLE */
  uint64_t reserved_[7];
} dcr_sign_options;

DCR_API void dcr_sign_options_default(dcr_sign_options *options);

/* Signs the bundle at bundle_path with the secret key file: the bundle is
 * checked whole (structure and chunks), base_path and target_path must be its
 * base and target (every tensor hash, DCR_E_BASE_MISMATCH or
 * DCR_E_TARGET_MISMATCH), and their tensors are hashed with SHA-256. With
 * options->scope DCR_SIGN_BUNDLE nothing is hashed but the bundle, and base_path
 * and target_path may be NULL (given, they are checked as above). The result,
 * the bundle with a SIGN section before FOOT (a signature added to those already
 * there, which must be over the same table, so of the same scope: else
 * DCR_E_SIGNATURE), goes to
 * out_path atomically, as dcr_encode_file writes (out_path NULL or equal to
 * bundle_path: the bundle is replaced, and is left as it was on any failure).
 * Signing again with a key that already signed changes nothing. options may be NULL. */
DCR_API int dcr_sign_file(const char *bundle_path, const char *secret_key_path,
                          const char *base_path, const char *target_path, const char *out_path,
                          const dcr_sign_options *options, dcr_detail *detail);

typedef struct {
  int present;                      /* 1: the bundle has a SIGN section */
  uint64_t signature_count;         /* signatures in it (when well-formed) */
  uint64_t verified_count;          /* of those, by a trusted key and verified */
  uint8_t key_id[DCR_KEY_ID_SIZE];  /* the first of those */
  int scope;                        /* when well-formed: DCR_SIGN_CHECKPOINTS or
                                       DCR_SIGN_BUNDLE */
  uint64_t reserved_[5];
} dcr_signature_result;

/* Checks the open bundle's signatures against the trusted keys (SPEC.md §20.4):
 * SIGN present and well-formed, at least one signature by a trusted key, every
 * signature by a trusted key valid, and the signed table equal to the bundle's
 * bytes, section by section. DCR_E_SIGNATURE, naming the first failure (a section
 * by type and offset), otherwise. Reads every byte before SIGN once; it neither
 * reads nor needs a checkpoint. result may be NULL. */
DCR_API int dcr_reader_verify_signature(dcr_reader *reader, const dcr_keyring *ring,
                                        dcr_signature_result *result, dcr_detail *detail);

/* Checks the signatures as dcr_reader_verify_signature does, then that the
 * checkpoint at path holds the tensors whose SHA-256 digests were signed, as the
 * base (side 0) or the target (side 1): for a checkpoint that may have been
 * crafted to match the XXH3 tensor hashes. Reads the whole checkpoint. One of
 * other tensors is DCR_E_BASE_MISMATCH (DCR_E_TARGET_MISMATCH); tensors with other
 * bytes, DCR_E_SIGNATURE naming the first; a bundle signature (DCR_SIGN_BUNDLE),
 * which signs no checkpoint, DCR_E_SIGNATURE before the checkpoint is opened.
 * threads: 0 = dcr_default_threads(). */
DCR_API int dcr_reader_verify_signed_checkpoint(dcr_reader *reader, const dcr_keyring *ring,
                                                const char *path, int side, unsigned threads,
                                                dcr_detail *detail);

/* ------------------------------------------------------------------------ */
/* Remote bundles: HTTP range requests (net/, libcurl; SPEC.md §21)          */
/*
 * A bundle on an HTTP(S) origin, an object store (a presigned URL) or behind
 * caching relays is read by range requests: the footer, then the manifest,
 * identities and index, then the chunk sections that apply, verify or the
 * changes iterator use, fetched ahead in coalesced ranges with several requests
 * in flight and each checked as it arrives (the random-access profile, §21).
 * What is fetched is kept in a nameless temporary file (in $TMPDIR, else /tmp)
 * so that a second pass over the chunks does not fetch them again: up to the
 * bundle's size on disk, and little memory whatever the bundle's size.
 *
 * Faults are retried with backoff: connection failures, timeouts, stalled or
 * too slow transfers, 5xx and 429 answers, cut bodies (resumed where they
 * stopped). The object must not change while it is read: every response must
 * carry the validators of the first (ETag, else Last-Modified, and the size),
 * requests carry If-Match (or If-Unmodified-Since), and a change is
 * DCR_E_CHANGED, never a mixed result. A server that ignores Range (200) is read
 * whole, walked as it arrives: a body that is not a bundle is refused at its
 * first bytes, and one larger than max_bundle_size or than TMPDIR's free space
 * before any (DCR_E_LIMIT, DCR_E_IO). Other failures, 4xx answers and the
 * deadline are DCR_E_FETCH. Error messages and details never contain header
 * values or the URL's userinfo and query (a presigned URL's signature): the URL
 * is shown as scheme://host/path.
 */
typedef struct {
  /* "Name: value" lines sent with every request to the URL's origin (scheme,
   * host and port; e.g. "Authorization: Bearer ..."). A redirect to another
   * origin is followed without any of them, unless header_follow. */
  const char *const *headers;
  size_t header_count;
  unsigned retries;     /* attempts after the first, per request; default 5 */
  unsigned timeout_s;   /* a transfer that receives nothing this long, or less than
                           low_speed bytes a second over 5 s (or this, if
                           shorter), is retried, but not twice in a row without
                           progress; default 30 (connecting: 10 at most) */
  unsigned inflight;    /* requests in flight; default 4 */
  const char *ca_file;  /* PEM CA certificates for HTTPS; NULL: the system's store */
  /* 0 (default): the random-access profile (SPEC.md §21). 1: every section is read
   * and checked at open, in file order, as dcr_reader_open_file does: for a
   * validator, which must read every byte anyway. A server that ignores Range
   * is read so whatever this says. */
  int whole;
  /* 1: send the headers to whatever origin a redirect leads to (a credential
   * then reaches hosts the URL does not name). 0 (default): only to the URL's. */
  unsigned header_follow;
  /* Seconds from the open on after which whatever is still to be fetched fails
   * with DCR_E_FETCH; 0 (default): none. */
  unsigned deadline_s;
  unsigned low_speed;   /* bytes a second, see timeout_s; 0: the default, 1024 */
  /* Optional: a non-zero *cancel stops the fetch (the open, or any later read
   * that waits for bytes) with DCR_E_INTERRUPTED within about a second. */
  const volatile int *cancel;
  uint64_t reserved_[5];
} dcr_http_options;

DCR_API void dcr_http_options_default(dcr_http_options *options);

/* Opens the bundle at an http:// or https:// URL by the random-access profile:
 * the structure checks of dcr_reader_open_file on every section but the chunk
 * sections, which are checked as they are read. Then every reader call works
 * as on a file (dcr_reader_section lists chunk sections from the index; a
 * dcr_chunk_info's checks are 0 until the chunk has been read). options and
 * limits may be NULL for the defaults; the options' strings are copied. */
DCR_API int dcr_reader_open_url(dcr_reader **reader, const char *url,
                                const dcr_http_options *options, const dcr_limits *limits,
                                dcr_detail *detail);

typedef struct {
  uint64_t bundle_size;   /* the object's size */
  uint64_t bytes_fetched; /* body bytes received, retries included */
  uint64_t requests;      /* HTTP requests made, retries included */
  uint64_t retries;       /* requests repeated after a fault */
  uint64_t reserved_[4];
} dcr_fetch_stats;

/* What a reader from dcr_reader_open_url has fetched so far (zeros for other
 * readers); fills the first `size` bytes of *stats (pass sizeof *stats). */
DCR_API void dcr_reader_fetch_stats(const dcr_reader *reader, dcr_fetch_stats *stats, size_t size);

/* dcr_history_open for a history archive at an http:// or https:// URL, by the
 * same rules and options as dcr_reader_open_url (SPEC.md §19.4, §21): the index
 * is read at open; extract and verify then read the members they need, a plain
 * tar's other members skipped by range (not fetched), a zip by its central
 * directory, a tar.zst in order. A server that ignores Range sends the archive
 * once, read in order as a pipe is (it needs TMPDIR room for the archive, as a
 * bundle does). A change of the archive between requests is DCR_E_CHANGED; the
 * other failures of the fetch are DCR_E_FETCH. options may be NULL. */
DCR_API int dcr_history_open_url(dcr_history **history, const char *url,
                                 const dcr_http_options *options, const dcr_limits *limits,
                                 dcr_detail *detail);

#ifdef __cplusplus
}
#endif
#endif /* DCR_H */
