/*
 * history.h - history archives (SPEC.md §19): a training run's chain of bundles,
 * with keyframes, in a tar, tar.zst or zip file that standard tools open. The
 * index (index.c) is the layout's one parser; the container (container.c) is
 * libarchive's, wrapped so that the rest never sees a struct archive.
 */
#ifndef DCR_HISTORY_H
#define DCR_HISTORY_H

#include <stdio.h>

#include "../format/format.h"
#include "../format/xxh.h"

#define DCR__HISTORY_INDEX_NAME "dcr-history.json"
#define DCR__HISTORY_MAJOR 1
#define DCR__HISTORY_MINOR 1
/* The index is read whole into memory, within the memory budget; a million
 * members need about 400 MB of JSON, far more than any run keeps, and a hostile
 * archive cannot declare more. */
#define DCR__HISTORY_INDEX_MAX ((uint64_t)256 << 20)
#define DCR__HISTORY_MEMBERS_MAX ((size_t)1 << 20)
#define DCR__HISTORY_STEP_MAX DCR__STEP_MAX

/* A file of a directory keyframe (1.1): the archive member `<name>/<path>`. */
typedef struct {
  char *path;          /* a set member path (§2.3) */
  uint64_t size;
  uint8_t digest[16];
} dcr__hfile;

/* One member as the index lists it (§19.3). */
typedef struct {
  int kind;            /* DCR_HISTORY_KEYFRAME or DCR_HISTORY_BUNDLE */
  uint64_t step;
  char *name;
  uint64_t size;
  uint8_t digest[16];  /* XXH3-128 of the member's bytes, canonical */
  uint8_t state[16];   /* keyframe: its state id */
  uint8_t base[16];    /* bundle: its base and target state ids */
  uint8_t target[16];
  size_t meta_count;   /* bundle: its metadata pairs, in key order */
  char **meta_key, **meta_value;
  int directory;       /* a keyframe that is a directory (1.1): its files, path order;
                          size is their sum, digest unused */
  size_t file_count;
  dcr__hfile *files;
} dcr__hmember;

/* The longest archive name of a directory keyframe's file: name, '/', path. */
#define DCR__HISTORY_FILE_NAME_MAX 4352

typedef struct {
  unsigned minor;
  char *run_id;          /* NULL: none */
  uint64_t keyframe_every; /* 0: none */
  dcr__hmember *m;
  size_t count;
} dcr__hindex;

/* index.c */
/* Parses and checks an index document, R-HIS-2 and R-HIS-3, in their order:
 * DCR_E_ARCHIVE, or DCR_E_VERSION for a major version it does not know; first
 * DCR_E_NOMEM where the text and its parse would take more than `budget` bytes
 * (dcr__hindex_scan), which is decided before anything is allocated. */
DCR_HIDDEN int dcr__hindex_parse(dcr__hindex *x, const char *json, size_t length, uint64_t budget,
                                 dcr_detail *d);
/* Feeds the next n bytes of an index text to c; DCR_E_NOMEM once the `length`
 * bytes read so far and what parsing them would take pass `budget`: a text read
 * from a stream is refused as soon as its prefix is too dear. */
DCR_HIDDEN int dcr__hindex_scan(dcr__json_cost *c, const char *piece, size_t n, uint64_t length, uint64_t budget,
                                dcr_detail *d);
/* R-HIS-3 alone, for an index built in memory (create, append). */
DCR_HIDDEN int dcr__hindex_check(const dcr__hindex *x, dcr_detail *d);
/* The canonical document of x (§19.3): *out is malloc'd, NUL-terminated. */
DCR_HIDDEN int dcr__hindex_write(const dcr__hindex *x, char **out, size_t *length, dcr_detail *d);
DCR_HIDDEN void dcr__hindex_free(dcr__hindex *x);
/* Appends a copy of m (its strings duplicated); DCR_E_NOMEM. */
DCR_HIDDEN int dcr__hindex_add(dcr__hindex *x, const dcr__hmember *m, dcr_detail *d);
/* File f of directory keyframe m as a member of its own (its archive name in buf,
 * of DCR__HISTORY_FILE_NAME_MAX bytes), for reading and writing it as one. */
DCR_HIDDEN void dcr__hfile_member(const dcr__hmember *m, size_t f, char *buf, dcr__hmember *out);
/* The state a step ends in: its keyframe's or its bundle's target. */
DCR_HIDDEN const uint8_t *dcr__hmember_end_state(const dcr__hmember *m);
/* The value of metadata key `key` of m, or NULL. */
DCR_HIDDEN const char *dcr__hmember_meta(const dcr__hmember *m, const char *key);

/* history.c: dcr_history_open from a path, a descriptor (path NULL) or memory
 * (for the fuzzer). */
DCR_HIDDEN int dcr__history_open(dcr_history **h, const char *path, int fd, const void *memory,
                                 size_t memory_size, const dcr_limits *limits, dcr_detail *d);

/* container.c: the archive as a sequence of members. */
typedef struct dcr__hreader dcr__hreader;
/* Opens path (or fd, when path is NULL; never closed here) for reading. */
DCR_HIDDEN int dcr__hreader_open(dcr__hreader **r, const char *path, int fd, const void *memory,
                                 size_t memory_size, dcr_detail *d);
/* Opens the archive at an http:// or https:// URL (remote_object.c). */
DCR_HIDDEN int dcr__hreader_open_url(dcr__hreader **r, const char *url, const dcr_http_options *options,
                                     dcr_detail *d);
DCR_HIDDEN void dcr__hreader_free(dcr__hreader *r);
/* The next member's name and size: 1 if there is one, 0 at the end, or a negative
 * error code (DCR_E_ARCHIVE, DCR_E_TRUNCATED) in *err. */
DCR_HIDDEN int dcr__hreader_next(dcr__hreader *r, const char **name, uint64_t *size,
                                 int *regular, int *err, dcr_detail *d);
/* Reads the current member's data: *got 0 at its end. */
DCR_HIDDEN int dcr__hreader_read(dcr__hreader *r, void *buf, size_t cap, size_t *got, dcr_detail *d);
/* DCR_HISTORY_TAR, _TAR_ZSTD or _ZIP, once the first member has been read. */
DCR_HIDDEN int dcr__hreader_container(const dcr__hreader *r);
/* Where in the (uncompressed) archive the current member's data start, once
 * dcr__hreader_next has read its header; and where the last header read began,
 * which after the end (dcr__hreader_next gave 0) is where the members end. */
DCR_HIDDEN uint64_t dcr__hreader_data_offset(const dcr__hreader *r);
DCR_HIDDEN uint64_t dcr__hreader_header_offset(const dcr__hreader *r);

/* member.c: the archive's current member, index member `index` (m), read as
 * SPEC.md §19.4 says. */
typedef int (*dcr__member_sink)(void *opaque, const void *data, size_t size, dcr_detail *d);
/* Whole, its bytes to sink (NULL: only checked) as they arrive, its length and
 * digest checked at its end (DCR_E_ARCHIVE, DCR_E_CHECKSUM). */
DCR_HIDDEN int dcr__member_read(dcr__hreader *r, const dcr__hmember *m, size_t index, dcr__member_sink sink,
                                void *opaque, const volatile int *cancel, dcr_detail *d);
/* As a bundle: a reader over it whose walk gets the member's first 96 bytes as
 * they arrive, and the rest once the member is whole and its length and digest
 * are checked (R-HIS-8).
 * lim->max_memory is the budget: a member of up to a quarter of it is kept in
 * memory (and counted against the reader's budget), a larger one in an unnamed
 * temporary file in temp_dir (NULL: TMPDIR). `name` is the file the reader's
 * errors name. */
DCR_HIDDEN int dcr__member_reader(dcr_reader **out, dcr__hreader *r, const dcr__hmember *m, size_t index,
                                  const dcr_limits *lim, const char *temp_dir, const volatile int *cancel,
                                  const char *name, dcr_detail *d);

typedef struct dcr__hwriter dcr__hwriter;
/* Writes an archive to fd from its offset. `unblocked`: a tar ends right after its
 * two end blocks, not padded to a 10240-byte record (an append in place). */
DCR_HIDDEN int dcr__hwriter_open(dcr__hwriter **w, int fd, int container, int unblocked, dcr_detail *d);
/* Starts a member of `size` bytes; its data follows through dcr__hwriter_write. */
DCR_HIDDEN int dcr__hwriter_member(dcr__hwriter *w, const char *name, uint64_t size, dcr_detail *d);
DCR_HIDDEN int dcr__hwriter_write(dcr__hwriter *w, const void *data, size_t size, dcr_detail *d);
/* Finishes the archive (end blocks, central directory) and frees w. */
DCR_HIDDEN int dcr__hwriter_close(dcr__hwriter *w, dcr_detail *d);
DCR_HIDDEN void dcr__hwriter_free(dcr__hwriter *w);

/* append.c: the append journal of an append in place (SPEC.md §19.6), beside the
 * archive as ARCHIVE.dcr-append. */
#define DCR__APPEND_SUFFIX ".dcr-append"
#define DCR__APPEND_MAJOR 1
#define DCR__APPEND_MINOR 0
#define DCR__APPEND_HEADER 72
#define DCR__APPEND_TAIL_MAX 65536 /* the archive bytes a journal's tail digest covers, at most */
#define DCR__APPEND_ZEROS_MAX ((uint64_t)1 << 20) /* an archive appended to in place ends at most
                                                      this far past its members */
typedef struct {
  unsigned minor;
  uint64_t archive_size;  /* the archive's size before the append */
  uint64_t members_end;   /* where its members ended: its end blocks began */
  uint64_t index_offset;  /* the index member's data: the slot the append rewrites */
  uint64_t index_length;
  uint64_t tail_offset;   /* [tail_offset, members_end): the bytes tail_digest covers */
  uint8_t tail_digest[16];
  const uint8_t *index;   /* the slot's bytes before the append (parse: inside its buffer) */
} dcr__happend;
/* The journal's rules in SPEC.md's order (R-HIS-12): DCR_E_JOURNAL. */
DCR_HIDDEN int dcr__happend_parse(dcr__happend *j, const uint8_t *buf, size_t n, dcr_detail *d);
DCR_HIDDEN void dcr__happend_name(char *out, size_t size, const char *archive);
/* With the archive open read-write in fd, its flock and range lock held: undoes
 * the append its journal describes, if there is one (*rolled 1), then removes it.
 * A journal that is damaged or not the archive's: DCR_E_JOURNAL, both kept. */
DCR_HIDDEN int dcr__happend_rollback(const char *archive, int fd, int sync, int *rolled, dcr_detail *d);
/* Before an append in place writes a byte: the journal of j's archive_size,
 * members_end and index slot, made durable under its name. */
DCR_HIDDEN int dcr__happend_begin(const char *archive, int fd, const dcr__happend *j, int sync, dcr_detail *d);
/* Once the new members are written: makes them durable, writes the new index
 * text (length bytes, its slot's part that changes) and removes the journal. */
DCR_HIDDEN int dcr__happend_end(const char *archive, int fd, uint64_t index_offset, const char *index,
                                size_t length, int sync, dcr_detail *d);
/* A whole-file open-file-description lock (F_OFD_SETLKW), shared or exclusive. */
DCR_HIDDEN int dcr__range_lock(int fd, int exclusive, dcr_detail *d);
DCR_HIDDEN void dcr__range_unlock(int fd);

#endif
