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
  int raw_member;      /* a set's raw member, named by its path: not in the state id */
} dcr__tensor;

/* A member file of a set (SPEC.md §2.3, §6.6). */
typedef struct {
  const char *path;      /* relative, '/'-separated; not NUL-terminated in a manifest */
  size_t path_length;
  int kind;              /* DCR_KIND_RAW or DCR_KIND_SAFETENSORS */
  uint64_t prefix_length, data_length;
  const uint8_t *prefix; /* the member's 8-byte length and header (safetensors) */
  uint64_t start;        /* where its data begins in the set's data region */
} dcr__member;

/* ---- member_files.c: members' descriptors, a bounded number open at once */
typedef struct dcr__member_files dcr__member_files;
#define DCR__FILES_WRITE 1u /* create each member at its first use, then open it to write */
#define DCR__FILES_SYNC 2u  /* fsync a member written to as its descriptor closes */

/* The members' files under the directory dir_fd (not owned; it must outlive f).
 * `members` (paths) must too; a path may change storage, not value. */
DCR_HIDDEN int dcr__member_files_new(dcr__member_files **f, int dir_fd, const dcr__member *members,
                                     size_t count, unsigned mode, dcr_detail *d);
/* A descriptor of member i, pinned (open until dcr__member_files_put) for the
 * caller's preads or pwrites. Thread-safe. DCR_E_IO if it cannot be opened, or is
 * not the file that its first open found (SPEC.md §2.3); the caller names the member. */
DCR_HIDDEN int dcr__member_files_get(dcr__member_files *f, size_t i, int *fd, dcr_detail *d);
DCR_HIDDEN void dcr__member_files_put(dcr__member_files *f, size_t i);
/* Once no other thread uses f: fsyncs every member written to or created since
 * its last fsync (DCR__FILES_SYNC fsyncs written ones as it closes them), and
 * reports a failure of those fsyncs too (DCR_E_IO). */
DCR_HIDDEN int dcr__member_files_sync(dcr__member_files *f, dcr_detail *d);
/* Closes every descriptor; NULL is fine. */
DCR_HIDDEN void dcr__member_files_free(dcr__member_files *f);

typedef struct {
  int kind;               /* dcr_kind */
  uint64_t file_size;     /* a set: prefix_length + its data region */
  uint64_t prefix_length; /* data region starts here */
  uint8_t *prefix;        /* prefix_length bytes (a set: its table, no base raw paths) */
  size_t count;
  dcr__tensor *tensors;   /* sorted by name, bytewise */
  uint64_t *dims_pool;    /* storage for every tensor's dims */
  int fd;                 /* the file read (a set: its directory, members' paths are
                             relative to) */
  int owns_fd;            /* opened here: closed on free */
  size_t member_count;    /* a set: its members in path order (paths and prefixes in
                             `prefix`) */
  dcr__member *members;
  dcr__member_files *files; /* a set: its members' descriptors */
  char *root;             /* a set: the directory, for messages */
} dcr__checkpoint;

/* Parses a safetensors prefix (8-byte length + JSON header) for a file whose data
 * region is data_length bytes long, strictly as SPEC.md §2.1 rules 1-3 say. On
 * success `out` owns a copy of the prefix and the tensor list; on failure it is
 * empty. */
DCR_HIDDEN int dcr__safetensors_parse(const uint8_t *prefix, size_t prefix_length,
                                      uint64_t data_length, const dcr_limits *lim,
                                      unsigned minor, dcr__checkpoint *out, dcr_detail *d);

/* §2.1 rule 4: sorted by (begin, end), the tensors tile [0, data_length) exactly.
 * A carried prefix needs no such check: it must equal the manifest's entries,
 * whose layout §6.2 already checks. */
DCR_HIDDEN int dcr__safetensors_check_layout(const dcr__checkpoint *c, uint64_t data_length,
                                             dcr_detail *d);

/* The prefix of a safetensors file of `size` bytes that starts at offset 0 of fd
 * (not owned; only its prefix need be there yet), parsed and checked against its
 * size (§2.1): what dcr__checkpoint_read does for a file that is whole. */
DCR_HIDDEN int dcr__safetensors_read(int fd, uint64_t size, const dcr_limits *lim, unsigned minor,
                                     dcr__checkpoint *out, dcr_detail *d);
/* Reads the prefix of the open file `fd` (not owned) as `kind` and parses it, with
 * the dtypes of format 1.`minor` (R-VER-4). For raw files the checkpoint is one U8
 * tensor named "raw". */
DCR_HIDDEN int dcr__checkpoint_read(int fd, int kind, const dcr_limits *lim, unsigned minor,
                                    dcr__checkpoint *out, dcr_detail *d);
/* Opens `path` as a checkpoint of `kind`: a file (its fd owned by `out`) or, for
 * DCR_KIND_SET, a directory (set.c). Errors name the file or member. */
DCR_HIDDEN int dcr__checkpoint_open(const char *path, int kind, const dcr_limits *lim,
                                    unsigned minor, dcr__checkpoint *out, dcr_detail *d);
/* Reads `length` bytes at `offset` of the checkpoint as one file: its prefix then
 * its data region (for a set, only the data region: its members' data regions in
 * path order, after its prefix_length). */
DCR_HIDDEN int dcr__checkpoint_pread(const dcr__checkpoint *c, void *buf, size_t length,
                                     uint64_t offset, dcr_detail *d);
/* The same into a view (common.h), read into `fallback`. */
DCR_HIDDEN int dcr__checkpoint_view(dcr__view *v, const dcr__checkpoint *c, uint64_t offset,
                                    size_t length, uint8_t *fallback, dcr_detail *d);

/* Names member `path` (n bytes) of the set at `root` as the detail's file. */
DCR_HIDDEN void dcr__detail_member(dcr_detail *d, const char *root, const char *path, size_t n);

/* ---- set.c: checkpoint sets (SPEC.md §2.3, §6.6) */
#define DCR__SET_MEMBER_MIN 21 /* a member with a one-byte path */
/* Reads the directory `dir` as a set: members, their headers, one tensor list.
 * check_index: refuse a *.safetensors.index.json that disagrees with the shards
 * (what a writer does, §2.3). */
DCR_HIDDEN int dcr__set_read(const char *dir, const dcr_limits *lim, unsigned minor,
                             int check_index, dcr__checkpoint *out, dcr_detail *d);
/* A member's kind by its path: safetensors for "*.safetensors", else raw (§2.3). */
DCR_HIDDEN int dcr__set_member_kind(const char *path, size_t length);
/* Whether `path` is a valid member path (§2.3). */
DCR_HIDDEN int dcr__set_path_valid(const char *path, size_t length);
/* The member that holds set data offset `at` (the last of equal starts: empty
 * members hold nothing), or NULL. */
DCR_HIDDEN const dcr__member *dcr__set_member_at(const dcr__member *m, size_t count, uint64_t at);

DCR_HIDDEN void dcr__checkpoint_free(dcr__checkpoint *c);

/* The public checkpoint reader (checkpoint_reader.c), shared with the codec, which
 * hashes its tensors (codec/state_id.c). */
struct dcr_checkpoint {
  dcr__checkpoint ck; /* tensors' desc.hash: filled once hashed */
  char path[256];
  int hashed;         /* 1 once every tensor hash and the state id are known */
  uint8_t state[16];
  const volatile int *cancel; /* dcr_checkpoint_set_cancel */
  dcr_progress_fn progress;   /* dcr_checkpoint_set_progress */
  void *progress_opaque;
};

#endif
