/*
 * fuzz_common.h - shared helpers for the fuzz harnesses (fuzz/README.md).
 *
 * Every harness is one LLVMFuzzerTestOneInput, built three ways: with libFuzzer
 * (clang -fsanitize=fuzzer), with AFL++ (afl-clang-fast -fsanitize=fuzzer) and
 * with fuzz/replay.c, a main() that runs files. The library is built for them with
 * -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION, which makes checksum comparisons
 * always match (format/common.h); the harnesses work in either mode.
 */
#ifndef DCR_FUZZ_COMMON_H
#define DCR_FUZZ_COMMON_H

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../codec/codec.h"
#include "../format/format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A harness calls this on a broken invariant: the fuzzer records a crash. */
#define FUZZ_ASSERT(cond)                                                              \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                                         \
    }                                                                                  \
  } while (0)

/* With DCR_FUZZ_DEBUG set in the environment, harnesses say what happened. */
static inline int fuzz_debugging(void) {
  static int on = -1;
  if (on < 0) on = getenv("DCR_FUZZ_DEBUG") != NULL;
  return on;
}
#define FUZZ_DEBUG(...) \
  do {                  \
    if (fuzz_debugging()) fprintf(stderr, __VA_ARGS__); \
  } while (0)

/* Limits for fuzzing: small enough that no input can legitimately run for seconds
 * or allocate more than a few tens of MiB, large enough for every seed. */
static inline void fuzz_limits(dcr_limits *l) {
  dcr_limits_default(l);
  l->max_tensors = 1024;
  l->max_name_length = 256;
  l->max_chunk_size = 1u << 16;     /* decoders allocate ~10 x chunk size */
  /* Sections and headers as large as the defaults allow: the memory budget, not
   * a small format limit, must be what keeps a tiny input from allocating much
   * (the run's malloc and RSS limits, fuzz.sh, catch it when it does not). */
  l->max_memory = 64u << 20;
  l->max_file_size = 1u << 22;      /* apply writes at most 4 MiB */
  l->max_bundle_size = 1u << 22;
}

/* ---- a growable byte buffer, also a dcr_write_fn sink */
typedef struct {
  uint8_t *p;
  size_t n, cap;
} fuzz_buf;

static inline void fuzz_put(fuzz_buf *b, const void *p, size_t n) {
  if (b->n + n > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + n) cap *= 2;
    uint8_t *q = realloc(b->p, cap);
    FUZZ_ASSERT(q);
    b->p = q;
    b->cap = cap;
  }
  if (n) memcpy(b->p + b->n, p, n);
  b->n += n;
}
static inline int fuzz_sink(void *opaque, const void *p, size_t n) {
  fuzz_put(opaque, p, n);
  return 0;
}
static inline void fuzz_buf_free(fuzz_buf *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}

/* ---- a per-process temporary directory (in /dev/shm when there is one) */
static char fuzz_dir_path[256];

static inline int fuzz_rmtree_one(const char *path, const struct stat *st, int flag, struct FTW *f) {
  (void)st, (void)flag, (void)f;
  remove(path); /* a directory is empty by now (FTW_DEPTH); links are not followed */
  return 0;
}

/* Removes the tree at path (files, links, fifos, directories); best effort. */
static inline void fuzz_rmtree(const char *path) {
  struct stat st;
  if (lstat(path, &st)) return;
  if (!S_ISDIR(st.st_mode)) {
    unlink(path);
    return;
  }
  nftw(path, fuzz_rmtree_one, 16, FTW_DEPTH | FTW_PHYS);
}

static inline void fuzz_dir_cleanup(void) {
  if (!fuzz_dir_path[0]) return;
  fuzz_rmtree(fuzz_dir_path);
  fuzz_dir_path[0] = '\0';
}

static inline const char *fuzz_dir(void) {
  if (fuzz_dir_path[0]) return fuzz_dir_path;
  struct stat st;
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !*tmp) tmp = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
  snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/dcr-fuzz-XXXXXX", tmp);
  if (!mkdtemp(fuzz_dir_path)) {
    perror("dcr fuzz: mkdtemp");
    abort();
  }
  atexit(fuzz_dir_cleanup);
  return fuzz_dir_path;
}

/* fuzz_path("base") -> "<dir>/base", in a static buffer per slot (0..5). */
static inline const char *fuzz_path(int slot, const char *name) {
  static char paths[6][320];
  snprintf(paths[slot], sizeof paths[slot], "%s/%s", fuzz_dir(), name);
  return paths[slot];
}

static inline void fuzz_write_file(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  FUZZ_ASSERT(f);
  FUZZ_ASSERT(n == 0 || fwrite(p, 1, n, f) == n);
  FUZZ_ASSERT(fclose(f) == 0);
}

/* Reads a whole file into b (replacing its contents); returns 0 on success. */
static inline int fuzz_read_file(const char *path, fuzz_buf *b) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  b->n = 0;
  uint8_t tmp[65536];
  size_t k;
  while ((k = fread(tmp, 1, sizeof tmp, f)) > 0) fuzz_put(b, tmp, k);
  fclose(f);
  return 0;
}

static inline int fuzz_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* Number of directory entries other than "." and "..". */
static inline int fuzz_dir_entries(const char *path) {
  DIR *dir = opendir(path);
  int n = 0;
  struct dirent *e;
  if (!dir) return -1;
  while ((e = readdir(dir)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(dir);
  return n;
}

/* ---- safetensors files, built in memory */
typedef struct {
  const char *name;   /* names must be given in increasing order */
  const char *dtype;  /* safetensors dtype name */
  unsigned rank;
  uint64_t dims[2];
  const uint8_t *data; /* byte_length bytes, or NULL for a pattern */
  uint32_t seed;       /* pattern seed when data is NULL */
} fuzz_tensor;

static inline uint64_t fuzz_tensor_bytes(const fuzz_tensor *t) {
  uint64_t n = dcr_dtype_size(dcr_dtype_from_name(t->dtype, strlen(t->dtype)));
  for (unsigned i = 0; i < t->rank; i++) n *= t->dims[i];
  return n;
}

/* A deterministic byte pattern: mostly random, with runs of zeros. */
static inline uint8_t fuzz_pattern(uint32_t seed, uint64_t i) {
  uint32_t x = (uint32_t)(seed * 2654435761u) ^ (uint32_t)(i * 40503u) ^ (uint32_t)(i >> 7);
  x ^= x >> 13;
  x *= 0x5bd1e995u;
  x ^= x >> 15;
  return (i / 97) % 5 == 0 ? 0 : (uint8_t)x;
}

/* Appends one tensor's entry to a safetensors header's text json[0..*j) (room cap),
 * after a comma if `comma`. */
static inline void fuzz_json_tensor(char *json, size_t cap, size_t *j, int comma,
                                    const char *name, const char *dtype, unsigned rank,
                                    const uint64_t *dims, uint64_t begin, uint64_t end) {
  *j += (size_t)snprintf(json + *j, cap - *j, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[",
                         comma ? "," : "", name, dtype);
  for (unsigned i = 0; i < rank; i++)
    *j += (size_t)snprintf(json + *j, cap - *j, "%s%llu", i ? "," : "", (unsigned long long)dims[i]);
  *j += (size_t)snprintf(json + *j, cap - *j, "],\"data_offsets\":[%llu,%llu]}",
                         (unsigned long long)begin, (unsigned long long)end);
}

/* Closes the header's text json[0..j) (room cap), pads it with spaces to a multiple
 * of 8, and writes it with its length into b, emptied first: the file up to its
 * data. */
static inline void fuzz_put_header(fuzz_buf *b, char *json, size_t j, size_t cap) {
  j += (size_t)snprintf(json + j, cap - j, "}");
  FUZZ_ASSERT(j < cap - 8);
  while (j % 8) json[j++] = ' ';
  uint8_t len[8];
  dcr__put64(len, j);
  b->n = 0;
  fuzz_put(b, len, 8);
  fuzz_put(b, json, j);
}

/* Writes a safetensors file of the tensors, laid out in the given order (or
 * reversed), into b. */
static inline void fuzz_safetensors(fuzz_buf *b, const fuzz_tensor *t, size_t count, int reverse) {
  char json[8192];
  size_t j = 0;
  uint64_t offset = 0;
  j += (size_t)snprintf(json + j, sizeof json - j, "{");
  for (size_t k = 0; k < count; k++) {
    const fuzz_tensor *x = &t[reverse ? count - 1 - k : k];
    uint64_t n = fuzz_tensor_bytes(x);
    fuzz_json_tensor(json, sizeof json, &j, k != 0, x->name, x->dtype, x->rank, x->dims, offset,
                     offset + n);
    offset += n;
  }
  fuzz_put_header(b, json, j, sizeof json);
  for (size_t k = 0; k < count; k++) {
    const fuzz_tensor *x = &t[reverse ? count - 1 - k : k];
    uint64_t n = fuzz_tensor_bytes(x);
    if (x->data) {
      fuzz_put(b, x->data, (size_t)n);
    } else {
      for (uint64_t i = 0; i < n; i++) {
        uint8_t v = fuzz_pattern(x->seed, i);
        fuzz_put(b, &v, 1);
      }
    }
  }
}

/* ---- the fixed small base that fuzz_apply applies to, fuzz_index builds on and
 * the seed bundles are made from (fuzz/mkseeds.c). Changing it invalidates seeds. */
#define FUZZ_BASE_TENSORS 5
static const fuzz_tensor fuzz_base_tensors[FUZZ_BASE_TENSORS] = {
    {"a", "BF16", 1, {2500, 0}, NULL, 1}, /* 5000 bytes: 2 chunks of 4 KiB */
    {"b", "F32", 2, {25, 44}, NULL, 2},   /* 4400 bytes */
    {"c", "U8", 1, {10, 0}, NULL, 3},
    {"d", "I64", 1, {600, 0}, NULL, 4},   /* 4800 bytes */
    {"e", "U16", 1, {0, 0}, NULL, 5},     /* empty */
};
#define FUZZ_RAW_BASE_SIZE 9000

static inline void fuzz_base_safetensors(fuzz_buf *b) {
  fuzz_safetensors(b, fuzz_base_tensors, FUZZ_BASE_TENSORS, 0);
}
static inline void fuzz_base_raw(fuzz_buf *b) {
  b->n = 0;
  for (uint64_t i = 0; i < FUZZ_RAW_BASE_SIZE; i++) {
    uint8_t v = fuzz_pattern(9, i);
    fuzz_put(b, &v, 1);
  }
}

/* The target that fuzz_index's skeleton bundle is made from: every kind of
 * change against the fixed base. */
static inline void fuzz_index_target(fuzz_buf *b) {
  static const fuzz_tensor t[] = {
      {"a", "BF16", 1, {2500, 0}, NULL, 1},  /* a few bytes changed, below */
      {"b", "F32", 2, {25, 44}, NULL, 12},   /* all changed */
      {"c", "U8", 1, {10, 0}, NULL, 3},
      {"d", "I32", 1, {1200, 0}, NULL, 14},  /* recoded */
      {"f", "F16", 2, {3, 1000}, NULL, 6},   /* added */
  };
  fuzz_safetensors(b, t, sizeof t / sizeof t[0], 1);
  /* reversed layout: "a" is the last 5000 bytes */
  b->p[b->n - 5000 + 17] ^= 0x40;
  b->p[b->n - 5000 + 2222] ^= 0x01;
  b->p[b->n - 5000 + 4500] ^= 0x80;
}

/* Encodes base_path -> target_path into out; returns the dcr_error. */
static inline int fuzz_encode(const char *base_path, const char *target_path, uint32_t chunk_size,
                              int level, unsigned threads, int raw, fuzz_buf *out) {
  dcr_encode_options o;
  dcr_encode_options_default(&o);
  o.chunk_size = chunk_size;
  o.level = level;
  o.threads = threads;
  o.raw = raw;
  o.unrelated = 1; /* pairs that share no tensor name encode too (dcr encode --unrelated) */
  out->n = 0;
  return dcr_encode(base_path, target_path, &o, fuzz_sink, out, NULL, NULL);
}

/* A parsed manifest serializes back to exactly the bytes parsed. */
static inline void fuzz_manifest_same_bytes(const dcr__manifest *m, const uint8_t *p, size_t n) {
  uint8_t *out = NULL;
  size_t length = 0;
  FUZZ_ASSERT(dcr__manifest_serialize(m, &out, &length) == DCR_OK);
  FUZZ_ASSERT(length == n && !memcmp(out, p, n));
  free(out);
}

/* ---- fuzz_set's input (fuzz/fuzz_set.c; mkseeds.c writes its seeds). One mode
 * byte, then for FUZZ_SET_TABLE: u8 L, L bytes of RSIZ payload, a MANI payload;
 * for FUZZ_SET_MINORS: a MANI payload; for FUZZ_SET_DIR and FUZZ_SET_DIR_1_0: up
 * to FUZZ_SET_RECORDS records describing a directory,
 *   u8 type, u8 name_length, name, u16 content_length, content
 * (lengths cut to what is left and to the maxima below). */
enum { FUZZ_SET_TABLE = 0, FUZZ_SET_MINORS = 1, FUZZ_SET_DIR = 2, FUZZ_SET_DIR_1_0 = 3 };
#define FUZZ_SET_SHORT_NAMES 4 /* mode bit: directories read with max_name_length 40 */
enum {
  FUZZ_SET_RAW = 0,       /* name: content */
  FUZZ_SET_ST = 1,        /* name.safetensors: u64 N, then content = u16 N, N bytes of
                             header, data */
  FUZZ_SET_ST_BYTES = 2,  /* name.safetensors: content */
  FUZZ_SET_INDEX = 3,     /* name.safetensors.index.json: content */
  FUZZ_SET_GEN_ST = 4,    /* name.safetensors, valid, made from content: u8 flags
                             (1 __metadata__, 2 data in reverse order), then per
                             tensor 3 bytes (name, dtype and rank, dims) */
  FUZZ_SET_GEN_INDEX = 5, /* name.safetensors.index.json listing the generated shards
                             beside it; content[0]: 0 right, 1 one tensor left out, 2 a
                             tensor no shard holds, 3 a tensor in the wrong shard */
  FUZZ_SET_SPECIAL = 6,   /* name: content[0] % 5: a link to record content[1] % 8,
                             a link to nowhere, a link to ".", a fifo, a directory */
  FUZZ_SET_RAW_TOO = 7,   /* as FUZZ_SET_RAW */
};
enum { FUZZ_SET_LINK, FUZZ_SET_DANGLING, FUZZ_SET_DIRLINK, FUZZ_SET_FIFO, FUZZ_SET_MKDIR };
#define FUZZ_SET_RECORDS 8
#define FUZZ_SET_NAME_MAX 64
#define FUZZ_SET_CONTENT_MAX 4096

/* Appends one directory record to b. */
static inline void fuzz_set_record(fuzz_buf *b, unsigned type, const char *name, const void *content,
                                   size_t n) {
  uint8_t h[2] = {(uint8_t)type, (uint8_t)strlen(name)}, len[2];
  fuzz_put(b, h, 2);
  fuzz_put(b, name, strlen(name));
  dcr__put16(len, (uint16_t)n);
  fuzz_put(b, len, 2);
  fuzz_put(b, content, n);
}

/* ---- fuzz_banded's input (fuzz_banded.c), shared with its seeds (mkseeds.c).
 *   0: bit 0: 0 decode the data as DELTA_BANDED, 1 a round trip (recipes)
 *   1: dtype, 1 + byte % 22         2..5: u32 count (decode)
 *   6..7: u16, n = 1 + value % (32768 / esize)   8: seed of the base's bytes
 *   9..10: u16, the piece walk's step, 1 + value % 3000 elements
 *   11: the base's classes: 255 as the pattern gives them, else 2^(s % 9) classes
 *       from 100 + s / 9 (so that bands are few or many, wide or narrow)
 * then the encoded data (decode) or one recipe byte per element, cycled (round
 * trip; fuzz_banded_target). */
#define FUZZ_BANDED_HEADER 12
#define FUZZ_BANDED_BYTES 32768
typedef struct {
  int roundtrip, dtype;
  unsigned esize;
  uint32_t count;
  size_t n, step;
  uint8_t seed, shape;
} fuzz_banded_input;

static inline void fuzz_banded_read(const uint8_t *h, fuzz_banded_input *in) {
  in->roundtrip = h[0] & 1;
  in->dtype = 1 + h[1] % 22;
  in->esize = dcr_dtype_size(in->dtype);
  in->count = dcr__le32(h + 2);
  in->n = 1 + dcr__le16(h + 6) % (FUZZ_BANDED_BYTES / in->esize);
  in->seed = h[8];
  in->step = 1 + dcr__le16(h + 9) % 3000;
  in->shape = h[11];
}

static inline uint64_t fuzz_banded_all(unsigned esize) {
  return esize == 8 ? ~(uint64_t)0 : ((uint64_t)1 << (8 * esize)) - 1;
}

/* An element of esize bytes as a number, and back (the format's byte order). */
static inline uint64_t fuzz_banded_get(const uint8_t *p, unsigned esize) {
  return esize == 1 ? p[0] : esize == 2 ? dcr__le16(p) : esize == 4 ? dcr__le32(p) : dcr__le64(p);
}

static inline void fuzz_banded_put(uint8_t *p, uint64_t u, unsigned esize) {
  uint8_t e[8];
  dcr__put64(e, u);
  memcpy(p, e, esize);
}

/* The base chunk: n elements of the pattern, their class fields per `shape`. */
static inline void fuzz_banded_base(const fuzz_banded_input *in, uint8_t *base) {
  unsigned shift, bits = dcr__class_bits(in->dtype, &shift), esize = in->esize;
  uint64_t field = bits ? (((uint64_t)1 << bits) - 1) << shift : 0;
  for (size_t i = 0; i < in->n; i++) {
    uint64_t u = 0;
    for (unsigned b = 0; b < esize; b++)
      u |= (uint64_t)fuzz_pattern(in->seed, i * esize + b) << (8 * b);
    if (in->shape != 255 && field) {
      uint64_t c = 100 + in->shape / 9 + fuzz_pattern(in->seed ^ 0x5a, i) % (1u << in->shape % 9);
      u = (u & ~field) | ((c << shift) & field);
    }
    fuzz_banded_put(base + i * esize, u, esize);
  }
}

/* The round trip's target: element i of the base changed by recipe r =
 * recipes[i % length]: 0 none; else by its top two bits, k = r & 63, a step of k
 * up or of k + 1 down on the bits (ULP steps where the key is the bits), the
 * pattern's 64 bits shifted right by k flipped (long magnitudes), or bit k. */
static inline void fuzz_banded_target(const fuzz_banded_input *in, const uint8_t *base,
                                      const uint8_t *recipes, size_t length, uint8_t *target) {
  unsigned esize = in->esize;
  uint64_t all = fuzz_banded_all(esize);
  for (size_t i = 0; i < in->n; i++) {
    uint64_t u = fuzz_banded_get(base + i * esize, esize), k, x = 0;
    uint8_t r = recipes[i % length];
    k = r & 63;
    switch (r >> 6) {
      case 0: u += k; break;
      case 1: u -= k + 1; break;
      case 2:
        for (unsigned b = 0; b < 8; b++) x |= (uint64_t)fuzz_pattern(in->seed ^ 0xa5, 8 * i + b) << (8 * b);
        u ^= x >> k;
        break;
      default: u ^= (uint64_t)1 << (k % (8 * esize)); break;
    }
    fuzz_banded_put(target + i * esize, u & all, esize);
  }
}

/* What dcr__banded_write makes of base -> target: the changes (positions pos,
 * zigzag deltas z, count of them) and the encoded data (length bytes; NULL when
 * nothing changed). */
typedef struct {
  uint32_t *pos;
  uint8_t *z, *data;
  size_t count, length;
} fuzz_banded_written;

static inline void fuzz_banded_write(const fuzz_banded_input *in, const uint8_t *base,
                                     const uint8_t *target, fuzz_banded_written *w) {
  unsigned esize = in->esize;
  size_t n = in->n, bytes = n * esize, capacity = 64 + 16 * bytes;
  uint8_t *old = malloc(bytes), *new = malloc(bytes), *sorted = malloc(bytes);
  uint32_t *ranks = malloc(n * sizeof *ranks);
  w->pos = malloc(n * sizeof *w->pos);
  w->z = malloc(bytes);
  w->data = NULL;
  w->length = 0;
  FUZZ_ASSERT(old && new && sorted && ranks && w->pos && w->z);
  w->count = dcr__detect(base, target, n, esize, w->pos);
  if (w->count) {
    for (size_t j = 0; j < w->count; j++) {
      memcpy(old + j * esize, base + (size_t)w->pos[j] * esize, esize);
      memcpy(new + j * esize, target + (size_t)w->pos[j] * esize, esize);
    }
    dcr__delta_make(w->z, old, new, w->count, esize);
    dcr__classed_encoder ws;
    FUZZ_ASSERT(dcr__classed_encoder_init(&ws) == DCR_OK);
    w->data = malloc(capacity);
    FUZZ_ASSERT(w->data);
    w->length = dcr__banded_write(&ws, w->data, capacity, base, n, in->dtype, w->pos, old, w->z,
                                  w->count, ranks, sorted);
    dcr__classed_encoder_free(&ws);
  }
  free(old), free(new), free(sorted), free(ranks);
}

static inline void fuzz_banded_written_free(fuzz_banded_written *w) {
  free(w->pos), free(w->z), free(w->data);
}

#endif
