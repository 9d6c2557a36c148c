/*
 * fuzz_set.c - checkpoint sets (format 1.1; SPEC.md §2.3, §6.5, §6.6, §12): the
 * set table that is a kind-3 manifest's prefix (format/set_table.c), the RSIZ
 * section (format/resize.c) and the directory reader (format/set.c).
 *
 * Input: one mode byte (fuzz_common.h: FUZZ_SET_*), then:
 *   FUZZ_SET_TABLE    u8 L, L bytes of an RSIZ payload, then a MANI payload whose
 *                     kind byte (offset 8) is forced to 3 (set), parsed as 1.1;
 *                     when it parses, the RSIZ payload is checked against it
 *   FUZZ_SET_MINORS   a MANI payload, parsed as 1.0 and as 1.1 as it is, and as 1.0
 *                     with its kind byte forced to 3
 *   FUZZ_SET_DIR      up to 8 records describing a small directory tree (files
 *   FUZZ_SET_DIR_1_0  with fuzzed names and bytes, generated or fuzzed safetensors
 *                     shards and index files, links, a fifo, directories), made in
 *                     a per-process temporary directory and read with
 *                     dcr__set_read as 1.1 (1.0), with check_index 1 and 0; the
 *                     tree is removed after every input; mode bit 2
 *                     (FUZZ_SET_SHORT_NAMES) sets max_name_length to 40
 *
 * Invariants, beyond no crash and no ASan/UBSan report:
 * - every manifest error is one of the codes §6.2 and §6.6 give, and d.code;
 * - a set manifest that parses serializes back to the bytes parsed; its members
 *   have valid, strictly sorted paths and the kinds their paths say (§6.6 step
 *   2), no path is another's directory, their data regions are contiguous from 0
 *   to data_length, each raw member is a raw U8 target entry at its start, each
 *   safetensors member's tensors are non-raw target entries at its start plus
 *   their offsets, and these are all the target entries; the base raw paths are
 *   sorted, valid, and exactly the raw base entries (R-SET-1, R-SET-2);
 * - RSIZ is accepted or rejected, with the code, as §6.5 (R-RSZ-1) says; accepted,
 *   it marks exactly the entries it lists, writes back to the same bytes, and a
 *   listed entry's base span is the resized base's (R-RSZ-2); rejected, it marks
 *   none;
 * - a set table of at most 8 members, laid out as a directory, reads back with
 *   dcr__set_read as the same table and the same target tensors;
 * - as 1.0, kind 3 is rejected with exactly the code the order of §6.2 steps 1-3
 *   gives (TRUNCATED or LIMIT for the fields before it, else MANIFEST, R-VER-4); a
 *   manifest is valid in 1.0 exactly when it is valid in 1.1 and needs nothing of
 *   1.1 (dcr__manifest_minor 0), and then parses to the same bytes;
 * - a directory: a visible pipe, link to nowhere, link to a directory, a path
 *   that is not UTF-8 or has a '\' (DCR_E_CHECKPOINT) or is over max_name_length
 *   (DCR_E_LIMIT) fails with the code of the first in path order (§2.3); otherwise
 *   when every safetensors member is a generated (valid) shard the outcome is
 *   known: DCR_E_NAME if a name is given twice, else success, and with
 *   check_index the generated indexes' verdict; check_index only adds a final
 *   DCR_E_CHECKPOINT; on success the members are exactly the visible regular
 *   files (and links to them) in path order, their data regions contiguous, the
 *   tensors sorted and unique and tiling the data region, each tensor's bytes read
 *   by dcr__checkpoint_pread are the file's, the whole data region reads at once,
 *   nothing past it does, the table it made parses as a set manifest with the
 *   same members, and no descriptor on the tree is left open after
 *   dcr__checkpoint_free.
 */
#include <errno.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "../format/checkpoint.h"
#include "fuzz_common.h"

#define FUZZ_MAX_INPUT (1u << 18)
#define DTYPE_U8 2
#define GEN_TENSORS 16

/* ---- manifests */

static int manifest_code(int rc) {
  switch (rc) {
    case DCR_E_TRUNCATED: case DCR_E_LIMIT: case DCR_E_MANIFEST: case DCR_E_RESERVED:
    case DCR_E_NAME: case DCR_E_DTYPE: case DCR_E_SHAPE: case DCR_E_LAYOUT:
    case DCR_E_CHECKPOINT: case DCR_E_NOMEM:
      return 1;
    default:
      return 0;
  }
}

/* Parses a copy of p[0..n) as format 1.minor. */
static int parse(const uint8_t *p, size_t n, const dcr_limits *lim, unsigned minor, dcr__manifest *m) {
  uint8_t *copy = malloc(n ? n : 1); /* dcr__manifest_parse takes ownership */
  FUZZ_ASSERT(copy);
  if (n) memcpy(copy, p, n);
  dcr_detail d;
  dcr__detail_init(&d);
  int rc = dcr__manifest_parse(copy, n, lim, minor, m, &d);
  FUZZ_DEBUG("manifest as 1.%u: %s %s\n", minor, dcr_error_name(rc), rc ? d.message : "");
  if (rc) FUZZ_ASSERT(manifest_code(rc) && d.code == rc);
  return rc;
}

/* What a 1.0 reader says of a payload whose kind byte (if it has one) is 3: the
 * fields before the kind are read and checked first (§6.2 steps 1-3, R-MAN-1). */
static int kind3_in_1_0(const uint8_t *p, size_t n, const dcr_limits *lim) {
  if (n < 4) return DCR_E_TRUNCATED;
  if (dcr__le32(p) > lim->max_tensors) return DCR_E_LIMIT;
  if (n < 8) return DCR_E_TRUNCATED;
  uint32_t chunk = dcr__le32(p + 4);
  if (chunk > lim->max_chunk_size) return DCR_E_LIMIT;
  if (chunk < DCR__MIN_CHUNK_SIZE || (chunk & (chunk - 1))) return DCR_E_MANIFEST;
  if (n < 9) return DCR_E_TRUNCATED;
  return DCR_E_MANIFEST;
}

static void check_kind3_in_1_0(const uint8_t *p, size_t n, const dcr_limits *lim) {
  FUZZ_ASSERT(n < 9 || p[8] == DCR_KIND_SET);
  dcr__manifest m;
  int rc = parse(p, n, lim, 0, &m);
  FUZZ_ASSERT(rc == kind3_in_1_0(p, n, lim));
}

static int same_shape(const dcr__desc *a, const dcr__desc *b) {
  return a->dtype == b->dtype && a->rank == b->rank && a->byte_length == b->byte_length &&
         (!a->rank || !memcmp(a->dims, b->dims, a->rank * sizeof *a->dims));
}

static int ends_with(const char *s, size_t n, const char *suffix) {
  size_t k = strlen(suffix);
  return n >= k && !memcmp(s + n - k, suffix, k);
}

/* R-SET-1 and R-SET-2, from what the parser left in m. */
static void check_table(const dcr__manifest *m, const dcr_limits *lim) {
  FUZZ_ASSERT(m->kind == DCR_KIND_SET && dcr__manifest_minor(m) == 1);
  FUZZ_ASSERT(m->member_count <= lim->max_tensors);
  FUZZ_ASSERT(m->members_length >= 4 && m->members_length + 4 <= m->prefix_length);
  const uint8_t *lo = m->prefix, *hi = m->prefix + m->members_length, *end = m->prefix + m->prefix_length;
  uint64_t start = 0, raw_members = 0, tensors = 0, targets = 0, raw_targets = 0, raw_bases = 0;
  FUZZ_ASSERT(dcr__le32(lo) == m->member_count);
  for (size_t i = 0; i < m->member_count; i++) {
    const dcr__member *mb = &m->members[i];
    const uint8_t *path = (const uint8_t *)mb->path;
    FUZZ_ASSERT(path >= lo + 4 && mb->path_length <= (size_t)(hi - path));
    FUZZ_ASSERT(mb->path_length <= lim->max_name_length && dcr__set_path_valid(mb->path, mb->path_length));
    if (i) FUZZ_ASSERT(dcr__name_cmp(mb[-1].path, mb[-1].path_length, mb->path, mb->path_length) < 0);
    /* the kind is the one §2.3 reads from the path, so the output reads back */
    FUZZ_ASSERT(mb->kind == (ends_with(mb->path, mb->path_length, ".safetensors") ? DCR_KIND_SAFETENSORS : DCR_KIND_RAW));
    FUZZ_ASSERT(mb->start == start);
    FUZZ_ASSERT(mb->prefix_length <= lim->max_file_size && mb->data_length <= lim->max_file_size - mb->prefix_length);
    start += mb->data_length;
    if (mb->kind == DCR_KIND_RAW) {
      FUZZ_ASSERT(mb->prefix_length == 0);
      const dcr__entry *e = dcr__manifest_find(m, mb->path, mb->path_length);
      FUZZ_ASSERT(e && (e->presence & DCR__HAS_TARGET) && (e->raw & DCR__HAS_TARGET));
      FUZZ_ASSERT(e->target.dtype == DTYPE_U8 && e->target.rank == 1 &&
                  e->target.dims[0] == mb->data_length && e->target.offset == mb->start);
      raw_members++;
      continue;
    }
    FUZZ_ASSERT(mb->kind == DCR_KIND_SAFETENSORS && mb->prefix_length >= 8);
    FUZZ_ASSERT(mb->prefix >= lo && mb->prefix_length <= (uint64_t)(hi - mb->prefix));
    dcr__checkpoint ck;
    dcr_detail d;
    dcr__detail_init(&d);
    FUZZ_ASSERT(dcr__safetensors_parse(mb->prefix, (size_t)mb->prefix_length, mb->data_length, lim, 1,
                                       &ck, &d) == DCR_OK);
    for (size_t k = 0; k < ck.count; k++) {
      const dcr__tensor *t = &ck.tensors[k];
      const dcr__entry *e = dcr__manifest_find(m, t->name, t->name_length);
      FUZZ_ASSERT(e && (e->presence & DCR__HAS_TARGET) && !(e->raw & DCR__HAS_TARGET));
      FUZZ_ASSERT(same_shape(&e->target, &t->desc) && e->target.offset == mb->start + t->desc.offset);
      FUZZ_ASSERT(t->desc.offset + t->desc.byte_length <= mb->data_length);
    }
    tensors += ck.count;
    dcr__checkpoint_free(&ck);
  }
  FUZZ_ASSERT(start == m->data_length);
  for (uint64_t i = 0; i < m->entry_count; i++) {
    const dcr__entry *e = &m->entries[i];
    FUZZ_ASSERT(!(e->raw & ~e->presence));
    targets += (e->presence & DCR__HAS_TARGET) != 0;
    raw_targets += (e->raw & DCR__HAS_TARGET) != 0;
    raw_bases += (e->raw & DCR__HAS_BASE) != 0;
  }
  /* every target entry is named once, by one member */
  FUZZ_ASSERT(raw_targets == raw_members && targets == raw_members + tensors);
  /* §6.6 step 5, for a few members: no path is another's directory */
  for (size_t i = 0; m->member_count <= 64 && i < m->member_count; i++)
    for (size_t k = 0; k < m->member_count; k++) {
      const dcr__member *a = &m->members[i], *b = &m->members[k];
      FUZZ_ASSERT(!(b->path_length > a->path_length && b->path[a->path_length] == '/' &&
                    !memcmp(a->path, b->path, a->path_length)));
    }
  /* the base raw paths */
  const uint8_t *at = hi;
  FUZZ_ASSERT(end - at >= 4);
  uint32_t count = dcr__le32(at);
  const char *previous = NULL;
  size_t previous_length = 0;
  at += 4;
  for (uint32_t i = 0; i < count; i++) {
    FUZZ_ASSERT(end - at >= 2);
    size_t n = dcr__le16(at);
    const char *path = (const char *)at + 2;
    FUZZ_ASSERT((size_t)(end - at) - 2 >= n && n <= lim->max_name_length && dcr__set_path_valid(path, n));
    FUZZ_ASSERT(!previous || dcr__name_cmp(previous, previous_length, path, n) < 0);
    const dcr__entry *e = dcr__manifest_find(m, path, n);
    FUZZ_ASSERT(e && (e->presence & DCR__HAS_BASE) && (e->raw & DCR__HAS_BASE));
    FUZZ_ASSERT(e->base.dtype == DTYPE_U8 && e->base.rank == 1);
    previous = path, previous_length = n;
    at += 2 + n;
  }
  FUZZ_ASSERT(at == end && raw_bases == count);
  /* what IDEN and apply compute from a manifest */
  uint8_t id[16];
  dcr__state_id(m, DCR__HAS_BASE, id);
  dcr__state_id(m, DCR__HAS_TARGET, id);
  FUZZ_ASSERT(dcr__iden_size(m) >= 32);
}

/* ---- RSIZ (§6.5) */

static int rsiz_verdict(const dcr__manifest *m, const uint8_t *p, size_t n) {
  if (n < 4 || (uint64_t)n != 4 + 4 * (uint64_t)dcr__le32(p)) return DCR_E_STRUCTURE; /* 1 */
  uint32_t count = dcr__le32(p);
  if (!count) return DCR_E_MANIFEST;                                                 /* 2 */
  for (uint32_t i = 0; i < count; i++) {                                             /* 3 */
    uint32_t k = dcr__le32(p + 4 + 4 * (size_t)i);
    if (k >= m->entry_count || (i && k <= dcr__le32(p + 4 * (size_t)i))) return DCR_E_MANIFEST;
    const dcr__entry *e = &m->entries[k];
    if (e->presence != (DCR__HAS_BASE | DCR__HAS_TARGET) || e->base.dtype != e->target.dtype ||
        e->base.byte_length == e->target.byte_length)
      return DCR_E_MANIFEST;
  }
  return DCR_OK;
}

/* The bytes of [at, at + bytes) coded against base bytes, by §6.2 and §6.5. */
static uint64_t base_span(const dcr__entry *e, uint64_t at, uint64_t bytes) {
  if (dcr__entry_delta_coded(e)) return bytes;
  if (!e->resized) return 0;
  uint64_t common = e->base.byte_length < e->target.byte_length ? e->base.byte_length : e->target.byte_length;
  return at >= common ? 0 : common - at < bytes ? common - at : bytes;
}

static void check_rsiz(dcr__manifest *m, const uint8_t *p, size_t n) {
  int want = rsiz_verdict(m, p, n);
  for (uint64_t i = 0; i < m->entry_count; i++) FUZZ_ASSERT(!m->entries[i].resized);
  dcr_detail d;
  dcr__detail_init(&d);
  int rc = dcr__rsiz_parse(p, n, m, &d);
  FUZZ_DEBUG("RSIZ: %s %s (expected %s)\n", dcr_error_name(rc), rc ? d.message : "", dcr_error_name(want));
  FUZZ_ASSERT(rc == want && (!rc || d.code == rc));
  if (rc) {
    for (uint64_t i = 0; i < m->entry_count; i++) FUZZ_ASSERT(!m->entries[i].resized);
    return;
  }
  uint8_t *out = NULL;
  size_t length = 0;
  FUZZ_ASSERT(dcr__rsiz_write(m, &out, &length) == DCR_OK && length == n && !memcmp(out, p, n));
  free(out);
  uint32_t count = dcr__le32(p), listed = 0;
  for (uint64_t i = 0; i < m->entry_count; i++) {
    const dcr__entry *e = &m->entries[i];
    int in = 0;
    for (uint32_t k = 0; k < count && !in; k++) in = dcr__le32(p + 4 + 4 * (size_t)k) == i;
    FUZZ_ASSERT(e->resized == in);
    listed += e->resized;
    if (!(e->presence & DCR__HAS_TARGET) || !e->target.byte_length) continue;
    uint64_t chunks = dcr__chunk_count(e->target.byte_length, m->chunk_size);
    uint64_t firsts[2] = {0, chunks - 1};
    for (int k = 0; k < 2; k++) {
      uint64_t at = firsts[k] * m->chunk_size;
      size_t bytes = dcr__chunk_bytes(m, e, firsts[k]);
      FUZZ_ASSERT(dcr__entry_base_span(e, at, bytes) == base_span(e, at, bytes));
    }
  }
  FUZZ_ASSERT(listed == count && dcr__manifest_minor(m) == 1);
}

/* ---- a directory tree in the temporary directory */

static char root[320];

/* Creates the directories above rel; each that exists must be a directory, not a
 * link to one. 0 on success. */
static int make_parents(const char *rel) {
  char full[512];
  int n = snprintf(full, sizeof full, "%s/%s", root, rel);
  FUZZ_ASSERT(n > 0 && (size_t)n < sizeof full);
  for (char *s = full + strlen(root) + 1; (s = strchr(s, '/')); *s++ = '/') {
    *s = '\0';
    struct stat st;
    if (mkdir(full, 0755) && (errno != EEXIST || lstat(full, &st) || !S_ISDIR(st.st_mode))) return -1;
  }
  return 0;
}

static int full_path(char *out, size_t size, const char *rel) {
  int n = snprintf(out, size, "%s/%s", root, rel);
  FUZZ_ASSERT(n > 0 && (size_t)n < size);
  return n;
}

/* Creates file rel with the bytes; 0 on success. */
static int make_file(const char *rel, const void *p, size_t n) {
  char full[512];
  full_path(full, sizeof full, rel);
  if (make_parents(rel)) return -1;
  int fd = open(full, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  dcr_detail d;
  FUZZ_ASSERT(dcr__pwrite_full(fd, p, n, 0, &d) == DCR_OK);
  close(fd);
  return 0;
}

static void fresh_root(void) {
  if (!root[0]) { /* resolved, as /proc/self/fd shows paths (open_fds) */
    char *dir = realpath(fuzz_dir(), NULL);
    FUZZ_ASSERT(dir && strlen(dir) < sizeof root - 8);
    snprintf(root, sizeof root, "%s/set", dir);
    free(dir);
  }
  fuzz_rmtree(root);
  FUZZ_ASSERT(mkdir(root, 0755) == 0);
}

/* Descriptors open on files or directories of the tree: a member or a directory
 * left open by the reader. (Counting every descriptor would also count the ones
 * ASan's background thread opens now and then, e.g. for hard_rss_limit_mb.) */
static int open_fds(void) {
  DIR *dir = opendir("/proc/self/fd");
  FUZZ_ASSERT(dir);
  int n = 0;
  size_t k = strlen(root);
  struct dirent *e;
  char link[300], target[512];
  while ((e = readdir(dir))) {
    snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
    ssize_t len = readlink(link, target, sizeof target - 1);
    if (len < 0) continue;
    target[len] = '\0';
    n += !strncmp(target, root, k) && (target[k] == '/' || target[k] == '\0');
  }
  closedir(dir);
  return n;
}

/* ---- a table laid out as a directory reads back as the same table */

static void check_as_directory(const dcr__manifest *m, const dcr_limits *lim) {
  if (m->member_count > FUZZ_SET_RECORDS) return;
  for (size_t i = 0; i < m->member_count; i++) {
    const dcr__member *mb = &m->members[i];
    for (size_t k = 0, c = 0; k < mb->path_length; k++) /* component lengths: NAME_MAX */
      if ((c = mb->path[k] == '/' ? 0 : c + 1) > 255) return;
  }
  fresh_root();
  char rel[4096], full[4600];
  for (size_t i = 0; i < m->member_count; i++) {
    const dcr__member *mb = &m->members[i];
    memcpy(rel, mb->path, mb->path_length);
    rel[mb->path_length] = '\0';
    FUZZ_ASSERT(make_file(rel, mb->prefix, (size_t)mb->prefix_length) == 0); /* no file is a directory */
    full_path(full, sizeof full, rel);
    FUZZ_ASSERT(truncate(full, (off_t)(mb->prefix_length + mb->data_length)) == 0);
  }
  dcr__checkpoint ck;
  dcr_detail d;
  dcr__detail_init(&d);
  int rc = dcr__set_read(root, lim, 1, 0, &ck, &d);
  FUZZ_DEBUG("table as a directory: %s %s\n", dcr_error_name(rc), rc ? d.message : "");
  FUZZ_ASSERT(rc == DCR_OK);
  FUZZ_ASSERT(ck.member_count == m->member_count && ck.prefix_length == m->members_length + 4);
  FUZZ_ASSERT(!memcmp(ck.prefix, m->prefix, m->members_length) && !dcr__le32(ck.prefix + m->members_length));
  FUZZ_ASSERT(ck.file_size == ck.prefix_length + m->data_length);
  size_t j = 0;
  for (uint64_t i = 0; i < m->entry_count; i++) {
    const dcr__entry *e = &m->entries[i];
    if (!(e->presence & DCR__HAS_TARGET)) continue;
    FUZZ_ASSERT(j < ck.count);
    const dcr__tensor *t = &ck.tensors[j++];
    FUZZ_ASSERT(!dcr__name_cmp(t->name, t->name_length, e->name, e->name_length));
    FUZZ_ASSERT(same_shape(&t->desc, &e->target) && t->desc.offset == e->target.offset);
    FUZZ_ASSERT(t->raw_member == ((e->raw & DCR__HAS_TARGET) != 0));
  }
  FUZZ_ASSERT(j == ck.count);
  dcr__checkpoint_free(&ck);
  fuzz_rmtree(root);
}

static void table_mode(const uint8_t *p, size_t n, const dcr_limits *lim) {
  size_t rl = n ? p[0] : 0;
  if (n) p++, n--;
  if (rl > n) rl = n;
  const uint8_t *rsiz = p;
  size_t ml = n - rl;
  uint8_t *mani = malloc(ml ? ml : 1);
  FUZZ_ASSERT(mani);
  if (ml) memcpy(mani, p + rl, ml);
  if (ml > 8) mani[8] = DCR_KIND_SET;
  check_kind3_in_1_0(mani, ml, lim);
  dcr__manifest m;
  if (!parse(mani, ml, lim, 1, &m)) {
    fuzz_manifest_same_bytes(&m, mani, ml);
    check_table(&m, lim);
    check_as_directory(&m, lim);
    check_rsiz(&m, rsiz, rl);
    dcr__manifest_free(&m);
  }
  free(mani);
}

static void minors_mode(const uint8_t *p, size_t n, const dcr_limits *lim) {
  dcr__manifest m0, m1;
  int rc0 = parse(p, n, lim, 0, &m0), rc1 = parse(p, n, lim, 1, &m1);
  if (!rc1) {
    fuzz_manifest_same_bytes(&m1, p, n);
    /* valid in 1.0 exactly when valid in 1.1 and using nothing of 1.1 (R-VER-4) */
    FUZZ_ASSERT(!rc0 == !dcr__manifest_minor(&m1));
    if (m1.kind == DCR_KIND_SET) check_table(&m1, lim);
  } else {
    FUZZ_ASSERT(rc0); /* every valid 1.0 manifest is valid in 1.1 (§12) */
  }
  if (!rc0) {
    fuzz_manifest_same_bytes(&m0, p, n);
    FUZZ_ASSERT(m0.kind != DCR_KIND_SET && !m0.member_count && !dcr__manifest_minor(&m0));
    dcr__manifest_free(&m0);
  }
  if (!rc1) dcr__manifest_free(&m1);
  if (n > 8 && p[8] != DCR_KIND_SET) {
    uint8_t *copy = malloc(n);
    FUZZ_ASSERT(copy);
    memcpy(copy, p, n);
    copy[8] = DCR_KIND_SET;
    check_kind3_in_1_0(copy, n, lim);
    free(copy);
  } else {
    FUZZ_ASSERT(rc0 == kind3_in_1_0(p, n, lim));
  }
}

/* ---- directories */

typedef struct {
  char path[FUZZ_SET_NAME_MAX + 32];
  int type, special, created;
  const uint8_t *content;
  size_t length;
  /* FUZZ_SET_GEN_ST: its tensors; whether it gives a name twice, uses 1.1 dtypes */
  char names[GEN_TENSORS][4];
  size_t count;
  int twice, new_dtypes;
} node;

/* Member names, components not "." or "..", no empty ones, no NUL. */
static void sanitize(const uint8_t *p, size_t n, char *out) {
  size_t o = 0;
  for (size_t i = 0; i <= n;) {
    size_t j = i;
    while (j < n && p[j] != '/') j++;
    if (j > i) {
      if (o) out[o++] = '/';
      if ((j - i == 1 && p[i] == '.') || (j - i == 2 && p[i] == '.' && p[i + 1] == '.')) {
        out[o++] = '_';
      } else {
        for (size_t k = i; k < j; k++) out[o++] = p[k] ? (char)p[k] : '_';
      }
    }
    i = j + 1;
  }
  if (!o) out[o++] = '_';
  out[o] = '\0';
}

static const char *const gen_dtypes[16] = {"BF16", "F32", "U8",  "I64", "F16", "BOOL", "I8",  "U16",
                                           "F8_E4M3", "F64", "I32", "U32", "F4",  "F6_E2M3", "C64",
                                           "F8_E8M0"};

/* A valid safetensors file from a description (fuzz_common.h, FUZZ_SET_GEN_ST). */
static void gen_shard(node *nd, fuzz_buf *file) {
  const uint8_t *c = nd->content;
  uint8_t flags = nd->length ? c[0] : 0;
  size_t count = nd->length ? (nd->length - 1) / 3 : 0;
  if (count > GEN_TENSORS) count = GEN_TENSORS;
  uint64_t bytes[GEN_TENSORS], begin[GEN_TENSORS], total = 0;
  unsigned rank[GEN_TENSORS];
  uint64_t dims[GEN_TENSORS][2];
  const char *dtype[GEN_TENSORS];
  for (size_t k = 0; k < count; k++) {
    uint8_t a = c[1 + 3 * k], b = c[2 + 3 * k], x = c[3 + 3 * k];
    char *name = nd->names[k];
    name[0] = (char)('a' + (a & 15));
    name[1] = a & 16 ? (char)('0' + (a >> 5)) : '\0';
    name[2] = '\0';
    dtype[k] = gen_dtypes[b & 15];
    int code = dcr_dtype_from_name(dtype[k], strlen(dtype[k]));
    unsigned bits = dcr_dtype_bits(code);
    nd->new_dtypes |= code > dcr__dtype_max(0);
    rank[k] = (unsigned)(b >> 4) % 3;
    dims[k][0] = x & 7u;
    dims[k][1] = (x >> 3) & 7u;
    if (bits % 8) { /* packed: whole bytes */
      if (!rank[k]) rank[k] = 1, dims[k][0] = 1;
      dims[k][0] *= 4;
    }
    uint64_t elements = 1;
    for (unsigned i = 0; i < rank[k]; i++) elements *= dims[k][i];
    bytes[k] = elements * bits / 8;
    total += bytes[k];
    for (size_t i = 0; i < k; i++) nd->twice |= !strcmp(nd->names[i], name);
  }
  nd->count = count;
  for (size_t k = 0, at = 0; k < count; k++) { /* the data in text order or reversed */
    size_t t = flags & 2 ? count - 1 - k : k;
    begin[t] = at;
    at += bytes[t];
  }
  char json[4096];
  size_t j = 0;
  j += (size_t)snprintf(json + j, sizeof json - j, "{%s", flags & 1 ? "\"__metadata__\":{\"format\":\"pt\"}" : "");
  for (size_t k = 0; k < count; k++)
    fuzz_json_tensor(json, sizeof json, &j, k || flags & 1, nd->names[k], dtype[k], rank[k],
                     dims[k], begin[k], begin[k] + bytes[k]);
  fuzz_put_header(file, json, j, sizeof json);
  for (uint64_t i = 0; i < total; i++) {
    uint8_t v = fuzz_pattern(flags, i);
    fuzz_put(file, &v, 1);
  }
}

/* The directory part of a path, with its '/': "" at the root. */
static size_t dir_length(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? (size_t)(slash - path) + 1 : 0;
}

static void json_string(fuzz_buf *b, const char *s) {
  fuzz_put(b, "\"", 1);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    char esc[8];
    if (c == '"' || c == '\\') {
      esc[0] = '\\', esc[1] = (char)c;
      fuzz_put(b, esc, 2);
    } else if (c < 0x20) {
      snprintf(esc, sizeof esc, "\\u%04x", c);
      fuzz_put(b, esc, 6);
    } else {
      fuzz_put(b, s, 1);
    }
  }
  fuzz_put(b, "\"", 1);
}

/* What the directory holds by §2.3, found with nftw (not the library's walk):
 * the members, and the first path, in path order, that cannot be one, with its
 * code (a directory that cannot be one hides what is under it from a reader,
 * but all that sorts after it). */
static struct {
  const dcr_limits *lim;
  size_t root_length;
  char members[2 * FUZZ_SET_RECORDS][FUZZ_SET_NAME_MAX + 32];
  size_t count;
  int bad; /* the code, or DCR_OK */
  char bad_path[FUZZ_SET_NAME_MAX + 32];
} scan;

static void refused(const char *rel, int code) {
  if (scan.bad && strcmp(rel, scan.bad_path) >= 0) return;
  scan.bad = code;
  snprintf(scan.bad_path, sizeof scan.bad_path, "%s", rel);
}

static int hidden(const char *rel) {
  for (const char *s = rel; s; s = strchr(s, '/')) {
    if (*s == '/') s++;
    if (*s == '.') return 1;
  }
  return 0;
}

static int scan_one(const char *fpath, const struct stat *st, int flag, struct FTW *f) {
  (void)st, (void)flag;
  if (!f->level) return 0;
  const char *rel = fpath + scan.root_length + 1;
  if (hidden(rel)) return 0;
  if (strlen(rel) > scan.lim->max_name_length) return refused(rel, DCR_E_LIMIT), 0;
  if (!dcr__utf8_valid((const uint8_t *)rel, strlen(rel)) || strchr(rel, '\\'))
    return refused(rel, DCR_E_CHECKPOINT), 0;
  struct stat l, s;
  FUZZ_ASSERT(lstat(fpath, &l) == 0);
  if (S_ISDIR(l.st_mode)) return 0;
  int regular = S_ISLNK(l.st_mode) ? !stat(fpath, &s) && S_ISREG(s.st_mode) : S_ISREG(l.st_mode);
  if (!regular) return refused(rel, DCR_E_CHECKPOINT), 0;
  FUZZ_ASSERT(scan.count < sizeof scan.members / sizeof scan.members[0] && strlen(rel) < sizeof scan.members[0]);
  snprintf(scan.members[scan.count++], sizeof scan.members[0], "%s", rel);
  return 0;
}

static int by_string(const void *a, const void *b) { return strcmp(a, b); }
static int by_span(const void *a, const void *b) {
  const uint64_t *x = a, *y = b;
  return x[0] != y[0] ? (x[0] > y[0]) - (x[0] < y[0]) : (x[1] > y[1]) - (x[1] < y[1]);
}
static int by_pointer(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static node *node_at(node *nodes, size_t count, const char *path) {
  for (size_t i = 0; i < count; i++)
    if (nodes[i].created && !strcmp(nodes[i].path, path)) return &nodes[i];
  return NULL;
}

/* Writes generated index nd (content[0] % 4 says how it is wrong); returns what
 * check_index must say of it: DCR_OK, DCR_E_CHECKPOINT, or -1 (not known: a
 * shard beside it that is not generated). */
static int gen_index(node *nodes, size_t count, const node *nd) {
  size_t dl = dir_length(nd->path), listed = 0;
  int wrong = nd->length ? nd->content[0] % 4 : 0, known = 1;
  fuzz_buf b = {0};
  const char *head = "{\"metadata\":{\"total_size\":0},\"weight_map\":{";
  fuzz_put(&b, head, strlen(head));
  for (size_t i = 0; i < scan.count; i++) {
    const char *path = scan.members[i];
    if (strncmp(path, nd->path, dl) || strchr(path + dl, '/') || !ends_with(path, strlen(path), ".safetensors"))
      continue;
    const node *shard = node_at(nodes, count, path);
    struct stat l;
    char full[512];
    full_path(full, sizeof full, path);
    if (!shard || shard->type != FUZZ_SET_GEN_ST || lstat(full, &l) || !S_ISREG(l.st_mode)) {
      known = 0;
      continue;
    }
    for (size_t k = 0; k < shard->count; k++, listed++) {
      if (wrong == 1 && !listed) continue;
      if (b.n > strlen(head)) fuzz_put(&b, ",", 1);
      json_string(&b, shard->names[k]);
      fuzz_put(&b, ":", 1);
      json_string(&b, wrong == 3 && !listed ? "~missing.safetensors" : path + dl);
    }
  }
  if (wrong == 2) {
    if (b.n > strlen(head)) fuzz_put(&b, ",", 1);
    json_string(&b, "~unknown");
    fuzz_put(&b, ":\"x.safetensors\"", 16);
  }
  fuzz_put(&b, "}}\n", 3);
  char full[512];
  full_path(full, sizeof full, nd->path);
  int fd = open(full, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
  FUZZ_ASSERT(fd >= 0);
  dcr_detail d;
  FUZZ_ASSERT(dcr__pwrite_full(fd, b.p, b.n, 0, &d) == DCR_OK);
  close(fd);
  fuzz_buf_free(&b);
  if (wrong == 2 || ((wrong == 1 || wrong == 3) && listed)) return DCR_E_CHECKPOINT;
  return known ? DCR_OK : -1;
}

static int dir_code(int rc) {
  switch (rc) {
    case DCR_E_CHECKPOINT: case DCR_E_LIMIT: case DCR_E_NAME: case DCR_E_DTYPE:
    case DCR_E_SHAPE: case DCR_E_LAYOUT: case DCR_E_NOMEM:
      return 1;
    default:
      return 0;
  }
}

/* Reads the member file's bytes [offset, offset + n) directly. */
static void read_member(const char *path, uint64_t offset, uint8_t *buf, size_t n) {
  char full[512];
  full_path(full, sizeof full, path);
  int fd = open(full, O_RDONLY | O_CLOEXEC);
  FUZZ_ASSERT(fd >= 0);
  dcr_detail d;
  FUZZ_ASSERT(dcr__pread_full(fd, buf, n, offset, &d) == DCR_OK);
  close(fd);
}

/* A set read from the directory, against what is in it. */
static void check_read(const dcr__checkpoint *ck, const dcr_limits *lim) {
  FUZZ_ASSERT(ck->kind == DCR_KIND_SET && ck->member_count == scan.count);
  uint64_t start = 0, table = 8;
  for (size_t i = 0; i < ck->member_count; i++) {
    const dcr__member *mb = &ck->members[i];
    FUZZ_ASSERT(mb->path_length == strlen(scan.members[i]) && !memcmp(mb->path, scan.members[i], mb->path_length));
    FUZZ_ASSERT(mb->kind == (ends_with(mb->path, mb->path_length, ".safetensors") ? DCR_KIND_SAFETENSORS : DCR_KIND_RAW));
    FUZZ_ASSERT(mb->kind == DCR_KIND_SAFETENSORS || mb->prefix_length == 0);
    FUZZ_ASSERT(mb->start == start);
    struct stat st;
    FUZZ_ASSERT(fstatat(ck->fd, scan.members[i], &st, 0) == 0 &&
                (uint64_t)st.st_size == mb->prefix_length + mb->data_length);
    start += mb->data_length;
    table += DCR__SET_MEMBER_MIN - 1 + mb->path_length + mb->prefix_length;
  }
  FUZZ_ASSERT(ck->prefix_length == table && ck->file_size == table + start);
  FUZZ_ASSERT(dcr__le32(ck->prefix) == ck->member_count && !dcr__le32(ck->prefix + table - 4));
  /* tensors: sorted, unique, each in its member, tiling the data region */
  uint64_t sum = 0;
  for (size_t i = 0; i < ck->count; i++) {
    const dcr__tensor *t = &ck->tensors[i];
    if (i) FUZZ_ASSERT(dcr__name_cmp(t[-1].name, t[-1].name_length, t->name, t->name_length) < 0);
    FUZZ_ASSERT(t->desc.offset <= start && t->desc.byte_length <= start - t->desc.offset);
    FUZZ_ASSERT(dcr__desc_check(&t->desc, lim, NULL) == DCR_OK);
    sum += t->desc.byte_length;
    if (!t->desc.byte_length) continue;
    const dcr__member *mb = dcr__set_member_at(ck->members, ck->member_count, t->desc.offset);
    FUZZ_ASSERT(mb && t->desc.offset + t->desc.byte_length <= mb->start + mb->data_length);
    FUZZ_ASSERT(t->raw_member == (mb->kind == DCR_KIND_RAW));
    if (t->raw_member)
      FUZZ_ASSERT(t->desc.offset == mb->start && t->desc.byte_length == mb->data_length &&
                  !dcr__name_cmp(t->name, t->name_length, mb->path, mb->path_length));
    uint8_t *got = malloc((size_t)t->desc.byte_length), *want = malloc((size_t)t->desc.byte_length);
    FUZZ_ASSERT(got && want);
    dcr_detail d;
    dcr__detail_init(&d);
    FUZZ_ASSERT(dcr__checkpoint_pread(ck, got, (size_t)t->desc.byte_length, ck->prefix_length + t->desc.offset, &d) == DCR_OK);
    char path[FUZZ_SET_NAME_MAX + 32];
    snprintf(path, sizeof path, "%.*s", (int)mb->path_length, mb->path);
    read_member(path, mb->prefix_length + t->desc.offset - mb->start, want, (size_t)t->desc.byte_length);
    FUZZ_ASSERT(!memcmp(got, want, (size_t)t->desc.byte_length));
    free(got), free(want);
  }
  FUZZ_ASSERT(sum == start);
  uint64_t(*spans)[2] = malloc((ck->count + 1) * sizeof *spans), end = 0;
  FUZZ_ASSERT(spans);
  for (size_t i = 0; i < ck->count; i++)
    spans[i][0] = ck->tensors[i].desc.offset, spans[i][1] = ck->tensors[i].desc.byte_length;
  qsort(spans, ck->count, sizeof *spans, by_span);
  for (size_t i = 0; i < ck->count; end += spans[i++][1]) FUZZ_ASSERT(spans[i][0] == end);
  FUZZ_ASSERT(end == start); /* they tile the data region */
  free(spans);
  for (size_t i = 0; i < ck->member_count; i++)
    if (ck->members[i].kind == DCR_KIND_RAW) {
      size_t at = 0;
      const dcr__member *mb = &ck->members[i];
      int found = 0;
      for (at = 0; at < ck->count && !found; at++)
        found = !dcr__name_cmp(ck->tensors[at].name, ck->tensors[at].name_length, mb->path, mb->path_length) &&
                ck->tensors[at].raw_member;
      FUZZ_ASSERT(found);
    }
  /* the whole data region in one read, across members; nothing past it */
  uint8_t *all = malloc((size_t)start + 1), *one = malloc((size_t)start + 1);
  FUZZ_ASSERT(all && one);
  dcr_detail d;
  dcr__detail_init(&d);
  FUZZ_ASSERT(dcr__checkpoint_pread(ck, all, (size_t)start, ck->prefix_length, &d) == DCR_OK);
  for (size_t i = 0; i < ck->member_count; i++) {
    const dcr__member *mb = &ck->members[i];
    read_member(scan.members[i], mb->prefix_length, one, (size_t)mb->data_length);
    FUZZ_ASSERT(!memcmp(all + mb->start, one, (size_t)mb->data_length));
  }
  if (ck->member_count) {
    dcr__detail_init(&d);
    FUZZ_ASSERT(dcr__checkpoint_pread(ck, all, 1, ck->file_size, &d) == DCR_E_IO);
  }
  free(all), free(one);
  /* the table it made is a set table of these tensors (R-SET-1, R-SET-2) */
  fuzz_buf b = {0};
  uint8_t h[32] = {0};
  dcr__put32(h, (uint32_t)ck->count);
  dcr__put32(h + 4, DCR__MIN_CHUNK_SIZE);
  h[8] = DCR_KIND_SET;
  dcr__put64(h + 16, ck->prefix_length);
  dcr__put64(h + 24, start);
  fuzz_put(&b, h, sizeof h);
  fuzz_put(&b, ck->prefix, (size_t)ck->prefix_length);
  for (size_t i = 0; i < ck->count; i++) {
    const dcr__tensor *t = &ck->tensors[i];
    uint8_t e[2 + 4 + 8 * 3];
    dcr__put16(e, (uint16_t)t->name_length);
    fuzz_put(&b, e, 2);
    fuzz_put(&b, t->name, t->name_length);
    e[0] = DCR__HAS_TARGET, e[1] = 0, e[2] = (uint8_t)t->desc.dtype, e[3] = (uint8_t)t->desc.rank;
    fuzz_put(&b, e, 4);
    for (unsigned k = 0; k < t->desc.rank; k++) dcr__put64(e, t->desc.dims[k]), fuzz_put(&b, e, 8);
    dcr__put64(e, t->desc.byte_length);
    dcr__put64(e + 8, t->desc.offset);
    fuzz_put(&b, e, 16);
  }
  dcr__manifest m;
  FUZZ_ASSERT(parse(b.p, b.n, lim, 1, &m) == DCR_OK);
  check_table(&m, lim);
  FUZZ_ASSERT(m.member_count == ck->member_count && m.members_length + 4 == ck->prefix_length);
  for (size_t i = 0; i < m.member_count; i++) {
    const dcr__member *x = &m.members[i], *y = &ck->members[i];
    FUZZ_ASSERT(x->path_length == y->path_length && !memcmp(x->path, y->path, x->path_length));
    FUZZ_ASSERT(x->kind == y->kind && x->prefix_length == y->prefix_length &&
                x->data_length == y->data_length && x->start == y->start);
  }
  for (size_t i = 0; i < m.entry_count; i++)
    FUZZ_ASSERT(((m.entries[i].raw & DCR__HAS_TARGET) != 0) == ck->tensors[i].raw_member);
  dcr__manifest_free(&m);
  fuzz_buf_free(&b);
}

static void same_read(const dcr__checkpoint *a, const dcr__checkpoint *b) {
  FUZZ_ASSERT(a->member_count == b->member_count && a->count == b->count);
  FUZZ_ASSERT(a->prefix_length == b->prefix_length && !memcmp(a->prefix, b->prefix, (size_t)a->prefix_length));
  for (size_t i = 0; i < a->count; i++)
    FUZZ_ASSERT(!dcr__name_cmp(a->tensors[i].name, a->tensors[i].name_length, b->tensors[i].name,
                               b->tensors[i].name_length) &&
                same_shape(&a->tensors[i].desc, &b->tensors[i].desc) &&
                a->tensors[i].desc.offset == b->tensors[i].desc.offset);
}

static void dir_mode(const uint8_t *p, size_t n, unsigned minor, const dcr_limits *lim) {
  node nodes[FUZZ_SET_RECORDS];
  size_t count = 0;
  memset(nodes, 0, sizeof nodes);
  while (count < FUZZ_SET_RECORDS && n >= 2) {
    node *nd = &nodes[count++];
    nd->type = p[0] & 7;
    size_t k = p[1] < FUZZ_SET_NAME_MAX ? p[1] : FUZZ_SET_NAME_MAX;
    if (k > n - 2) k = n - 2;
    sanitize(p + 2, k, nd->path);
    p += 2 + k, n -= 2 + k;
    if (n >= 2) {
      k = dcr__le16(p) < FUZZ_SET_CONTENT_MAX ? dcr__le16(p) : FUZZ_SET_CONTENT_MAX;
      p += 2, n -= 2;
      if (k > n) k = n;
      nd->content = p, nd->length = k;
      p += k, n -= k;
    }
    const char *suffix = nd->type == FUZZ_SET_ST || nd->type == FUZZ_SET_ST_BYTES || nd->type == FUZZ_SET_GEN_ST
                             ? ".safetensors"
                             : nd->type == FUZZ_SET_INDEX || nd->type == FUZZ_SET_GEN_INDEX ? ".safetensors.index.json" : "";
    strcat(nd->path, suffix);
  }
  fresh_root();
  fuzz_buf file = {0};
  for (size_t i = 0; i < count; i++) {
    node *nd = &nodes[i];
    const uint8_t *c = nd->content;
    char full[512];
    full_path(full, sizeof full, nd->path);
    switch (nd->type) {
      case FUZZ_SET_ST: {
        size_t h = nd->length >= 2 ? dcr__le16(c) : 0, rest = nd->length >= 2 ? nd->length - 2 : 0;
        uint8_t len[8];
        if (h > rest) h = rest;
        dcr__put64(len, h);
        file.n = 0;
        fuzz_put(&file, len, 8);
        if (rest) fuzz_put(&file, c + 2, rest);
        nd->created = !make_file(nd->path, file.p, file.n);
        break;
      }
      case FUZZ_SET_GEN_ST:
        gen_shard(nd, &file);
        nd->created = !make_file(nd->path, file.p, file.n);
        break;
      case FUZZ_SET_GEN_INDEX: /* written once the members are known */
        nd->created = !make_file(nd->path, "", 0);
        break;
      case FUZZ_SET_SPECIAL: {
        nd->special = nd->length ? c[0] % 5 : FUZZ_SET_LINK;
        if (make_parents(nd->path)) break;
        if (nd->special == FUZZ_SET_FIFO) {
          nd->created = !mkfifo(full, 0644);
        } else if (nd->special == FUZZ_SET_MKDIR) {
          nd->created = !mkdir(full, 0755);
        } else {
          char target[4 * FUZZ_SET_NAME_MAX + 64] = "";
          if (nd->special == FUZZ_SET_LINK) { /* to a record, relative to the link */
            for (const char *s = nd->path; (s = strchr(s, '/')); s++) strcat(target, "../");
            strcat(target, nodes[nd->length > 1 ? c[1] % FUZZ_SET_RECORDS : 0].path);
          } else {
            strcat(target, nd->special == FUZZ_SET_DANGLING ? "nowhere" : ".");
          }
          nd->created = !symlink(target, full);
        }
        break;
      }
      default: /* raw, fuzzed safetensors bytes, index */
        nd->created = !make_file(nd->path, c ? c : (const uint8_t *)"", nd->length);
        break;
    }
  }
  fuzz_buf_free(&file);

  /* what the directory holds, and what reading it must give */
  memset(&scan, 0, sizeof scan);
  scan.lim = lim;
  scan.root_length = strlen(root);
  FUZZ_ASSERT(nftw(root, scan_one, 16, FTW_PHYS) == 0);
  qsort(scan.members, scan.count, sizeof scan.members[0], by_string);
  int known = !scan.bad, index_verdict = DCR_OK, twice = 0;
  const char *names[FUZZ_SET_RECORDS * (GEN_TENSORS + 2)];
  size_t name_count = 0;
  for (size_t i = 0; i < scan.count; i++) {
    const char *path = scan.members[i];
    node *nd = node_at(nodes, count, path);
    struct stat l;
    char full[512];
    full_path(full, sizeof full, path);
    int regular = !lstat(full, &l) && S_ISREG(l.st_mode);
    if (ends_with(path, strlen(path), ".safetensors")) {
      if (!nd || nd->type != FUZZ_SET_GEN_ST || !regular || (minor == 0 && nd->new_dtypes)) {
        known = 0;
        continue;
      }
      twice |= nd->twice;
      for (size_t k = 0; k < nd->count; k++) names[name_count++] = nd->names[k];
      continue;
    }
    names[name_count++] = path; /* a raw member's tensor */
    if (ends_with(path, strlen(path), ".safetensors.index.json")) {
      int v = nd && nd->type == FUZZ_SET_GEN_INDEX && regular ? gen_index(nodes, count, nd) : -1;
      if (v == DCR_E_CHECKPOINT || index_verdict == DCR_E_CHECKPOINT) index_verdict = DCR_E_CHECKPOINT;
      else if (v < 0) index_verdict = -1;
    }
  }
  qsort(names, name_count, sizeof names[0], by_pointer);
  for (size_t i = 1; i < name_count; i++) twice |= !strcmp(names[i - 1], names[i]);

  int fds = open_fds();
  dcr__checkpoint ck1, ck0;
  dcr_detail d1, d0;
  dcr__detail_init(&d1);
  dcr__detail_init(&d0);
  int rc1 = dcr__set_read(root, lim, minor, 1, &ck1, &d1);
  FUZZ_DEBUG("set (1.%u, check_index 1): %s %s\n", minor, dcr_error_name(rc1), rc1 ? d1.message : "");
  int rc0 = dcr__set_read(root, lim, minor, 0, &ck0, &d0);
  FUZZ_DEBUG("set (1.%u, check_index 0): %s %s\n", minor, dcr_error_name(rc0), rc0 ? d0.message : "");
  FUZZ_DEBUG("expected: %s%s, %zu members, %s\n", scan.bad ? "refused: " : known ? "known" : "not known",
             scan.bad ? scan.bad_path : "", scan.count, twice ? "a name twice" : "names unique");
  if (rc1) FUZZ_ASSERT(dir_code(rc1) && d1.code == rc1 && !ck1.member_count && !ck1.count);
  if (rc0) FUZZ_ASSERT(dir_code(rc0) && d0.code == rc0 && !ck0.member_count && !ck0.count);
  /* the index check comes last, and only adds DCR_E_CHECKPOINT */
  if (rc0) FUZZ_ASSERT(rc1 == rc0);
  if (!rc0 && rc1) FUZZ_ASSERT(rc1 == DCR_E_CHECKPOINT || rc1 == DCR_E_NOMEM);
  if (scan.bad) {
    FUZZ_ASSERT(rc0 == scan.bad); /* the first refused path's code (§2.3) */
  } else if (known) {
    FUZZ_ASSERT(rc0 == (twice ? DCR_E_NAME : DCR_OK));
    if (!twice && index_verdict >= 0) FUZZ_ASSERT(rc1 == index_verdict);
  }
  if (!rc0) check_read(&ck0, lim);
  if (!rc1) same_read(&ck0, &ck1);
  if (!rc1) dcr__checkpoint_free(&ck1);
  if (!rc0) dcr__checkpoint_free(&ck0);
  FUZZ_ASSERT(fds == 0 && open_fds() == 0);
  fuzz_rmtree(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > FUZZ_MAX_INPUT) return 0;
  dcr_limits lim;
  fuzz_limits(&lim);
  const uint8_t *p = data + 1;
  size_t n = size - 1;
  switch (data[0] & 3) {
    case FUZZ_SET_TABLE:
      table_mode(p, n, &lim);
      break;
    case FUZZ_SET_MINORS:
      minors_mode(p, n, &lim);
      break;
    default:
      if (data[0] & FUZZ_SET_SHORT_NAMES) lim.max_name_length = 40; /* paths over it: DCR_E_LIMIT */
      dir_mode(p, n, (data[0] & 3) == FUZZ_SET_DIR_1_0 ? 0 : 1, &lim);
      break;
  }
  return 0;
}
