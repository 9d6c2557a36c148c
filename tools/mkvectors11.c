/*
 * mkvectors11.c - writes the golden test vectors of format 1.1 (testvectors/v1.1/,
 * SPEC.md §12): checkpoint sets (§2.3, §6.6), resized tensors (§6.5, RSIZ), the
 * dtypes of 1.1 (§3, packed F4 and F6 among them), and the rule that a bundle is
 * read by the minor version it declares (R-VER-4).
 *
 *   mkvectors11 OUTDIR [--repaired DIR]
 *
 * writes OUTDIR/v1.1/index.json and, beside it, the files of every vector:
 *
 *   valid/ invalid/      bundles (ID.dcr)
 *   ckpt/NAME.*          checkpoint files (safetensors, or raw .bin)
 *   ckpt/NAME/           checkpoint sets: directories, whose members the index lists
 *                        one by one ("members": {path: sha256}; "ignored": the
 *                        hidden files a reader must not take as members)
 *
 * With --repaired, also the repaired variant of every invalid vector that has one
 * (DIR/index.json, files beside it; never committed): the same vector made by the
 * same code with its faulty field at a valid value, which must be valid, as for
 * the 1.0 vectors (tools/mkvectors.c, testvectors/README.md).
 *
 * Like mkvectors.c (whose bundle builder, tools/bundlegen.h, this shares), this is
 * an independent writer of the format: every bundle, set table and checkpoint is
 * built here from the bytes up with xxHash and zstd only, not with libdcr. Each
 * invalid vector breaks one rule, with every other length, checksum and state id
 * recomputed from what it writes, so that a reader reaches the check it targets.
 *
 * Everything is deterministic: data comes from one fixed-seed PRNG in program
 * order (its own seed: the 1.0 generator's stream is not touched); zstd output
 * depends only on the libzstd version (recorded in the index). testvectors/v1.1 is
 * frozen once published (SPEC.md §12, R-VER-2): add vectors only at the end of
 * main, so that the PRNG draws of those before them do not move.
 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>
#include <zstd.h>

#define SEED 0x4443523131766563ull /* "DCR11vec" */
#define ZLEVEL 3                   /* zstd level of the valid vectors' frames */
#define VECGEN_NAME "mkvectors11"
#include "vecgen.h"
#include "bundlegen.h"

/* ------------------------------------------------------------------------ */
/* Checkpoint sets (SPEC.md §2.3)                                            */

#define MAXM 12 /* members of a set */
#define MAXH 4  /* hidden files of a set */

typedef struct {
  char *path;
  ckpt c; /* kind raw (its one tensor named "raw") or safetensors */
} member;

typedef struct {
  const char *dir; /* relative to v1.1/ */
  size_t n;
  member m[MAXM]; /* sorted by path, bytewise */
  size_t nh;
  char *hpath[MAXH]; /* hidden files: in the directory, not members */
  buf hbytes[MAXH];
  ckpt view;     /* the set as one checkpoint: its tensors, its data region */
  size_t dups;   /* names the view found twice (kept once: the first member's) */
  int written[2];
  char sha[MAXM][65], hsha[MAXH][65];
} set;

/* Every set stays reachable from here (and so never leaks). */
static set *all_sets[128];
static size_t nsets;

static set *set_new(const char *dir) {
  if (nsets == sizeof all_sets / sizeof *all_sets) die("too many sets");
  set *s = xmalloc(sizeof *s);
  s->dir = dir;
  all_sets[nsets++] = s;
  return s;
}

static int path_cmp(const char *a, const char *b) { return name_cmp(a, strlen(a), b, strlen(b)); }

static member *set_add(set *s, const char *path, int kind) {
  if (s->n == MAXM) die("%s: too many members", s->dir);
  size_t at = s->n;
  while (at && path_cmp(s->m[at - 1].path, path) > 0) at--;
  if (at && !path_cmp(s->m[at - 1].path, path)) die("%s: %s twice", s->dir, path);
  member *m = slot_insert(s->m, &s->n, at, sizeof *s->m);
  m->path = strdup(path);
  m->c.file = m->path;
  m->c.kind = kind;
  return m;
}

/* A safetensors member: add its tensors with ck_add. */
static ckpt *set_st(set *s, const char *path) { return &set_add(s, path, KIND_ST)->c; }

/* A raw member holding n bytes p (or n random bytes if p is NULL). */
static tensor *set_raw(set *s, const char *path, const void *p, size_t n) {
  uint64_t d[1] = {n};
  tensor *t = ck_add(&set_add(s, path, KIND_RAW)->c, "raw", U8, 1, d);
  if (p) memcpy(t->data, p, n);
  else fill_random(t);
  return t;
}

static tensor *set_raw_text(set *s, const char *path, const char *text) {
  return set_raw(s, path, text, strlen(text));
}

static member *set_get(set *s, const char *path) {
  for (size_t i = 0; i < s->n; i++)
    if (!strcmp(s->m[i].path, path)) return &s->m[i];
  die("%s: no member %s", s->dir, path);
}

static void set_remove(set *s, const char *path) {
  member *m = set_get(s, path);
  size_t i = (size_t)(m - s->m);
  for (size_t k = 0; k < m->c.n; k++) free(m->c.t[k].name), free(m->c.t[k].data);
  bfree(&m->c.prefix);
  bfree(&m->c.bytes);
  free(m->path);
  memmove(s->m + i, s->m + i + 1, (s->n - i - 1) * sizeof *s->m);
  s->n--;
}

/* Replaces a raw member's bytes. */
static void set_raw_set(set *s, const char *path, const void *p, size_t n) {
  tensor *t = &set_get(s, path)->c.t[0];
  t->data = realloc(t->data, n ? n : 1);
  if (n) memcpy(t->data, p, n);
  t->len = t->dims[0] = n;
}

static void set_hidden(set *s, const char *path, const char *text) {
  if (s->nh == MAXH) die("%s: too many hidden files", s->dir);
  s->hpath[s->nh] = strdup(path);
  s->hbytes[s->nh++] = bmem(text, strlen(text));
}

/* Adds tensor t to the view, in name order; a name it has already is counted in
 * dups and not added (an invalid set, whose table names it twice). */
static void view_add(set *s, const tensor *t, const char *name, uint64_t off, int raw) {
  ckpt *v = &s->view;
  size_t nlen = strlen(name), at = v->n;
  while (at && name_cmp(v->t[at - 1].name, v->t[at - 1].nlen, name, nlen) > 0) at--;
  if (at && !name_cmp(v->t[at - 1].name, v->t[at - 1].nlen, name, nlen)) {
    s->dups++;
    return;
  }
  if (v->n == MAXT) die("%s: too many tensors", s->dir);
  tensor *x = slot_insert(v->t, &v->n, at, sizeof *v->t);
  *x = *t;
  x->name = strdup(name);
  x->nlen = nlen;
  x->off = off;
  x->raw_member = raw;
}

/* Lays each member out (ck_finish) and makes the view: the set's tensors (a raw
 * member is a U8 tensor named by its path) at their offsets in its data region,
 * the members' data regions in path order (§2.3). The view's prefix stays empty:
 * the set table depends on the base too (its base raw paths, §6.6). */
static void set_finish(set *s) {
  ckpt *v = &s->view;
  for (size_t i = 0; i < v->n; i++) free(v->t[i].name);
  bfree(&v->bytes);
  bfree(&v->prefix);
  memset(v, 0, sizeof *v);
  v->file = s->dir;
  v->kind = KIND_SET;
  s->dups = 0;
  uint64_t start = 0;
  for (size_t k = 0; k < s->n; k++) {
    member *m = &s->m[k];
    ck_finish(&m->c);
    if (m->c.kind == KIND_RAW) {
      view_add(s, &m->c.t[0], m->path, start, 1);
    } else {
      for (size_t i = 0; i < m->c.n; i++)
        view_add(s, &m->c.t[i], m->c.t[i].name, start + m->c.t[i].off, 0);
    }
    size_t dl = m->c.bytes.n - m->c.prefix.n;
    bput(&v->bytes, m->c.bytes.p + m->c.prefix.n, dl);
    start += dl;
  }
}

static set *set_clone(const set *src, const char *dir) {
  set *s = set_new(dir);
  s->n = src->n;
  for (size_t i = 0; i < src->n; i++) {
    s->m[i].path = strdup(src->m[i].path);
    ck_clone(&s->m[i].c, &src->m[i].c, s->m[i].path);
  }
  s->nh = src->nh;
  for (size_t i = 0; i < src->nh; i++) {
    s->hpath[i] = strdup(src->hpath[i]);
    s->hbytes[i] = bdup(&src->hbytes[i]);
  }
  return s;
}

/* The tensors of a member, by name. */
static tensor *mt(set *s, const char *path, const char *name) {
  return ck_get(&set_get(s, path)->c, name);
}

/* Moves tensor `name` from member `from` to member `to` (same bytes). */
static void set_move(set *s, const char *name, const char *from, const char *to) {
  ckpt *a = &set_get(s, from)->c, *b = &set_get(s, to)->c;
  tensor *t = ck_get(a, name);
  tensor *u = ck_add(b, name, t->dtype, t->rank, t->dims);
  memcpy(u->data, t->data, (size_t)t->len);
  ck_remove(a, name);
}

/* ------------------------------------------------------------------------ */
/* The set table (SPEC.md §6.6), held field by field so that a vector can set   */
/* any of them                                                                */

typedef struct {
  buf path;
  int plen_set; /* path_length field other than the path's length */
  uint64_t plen_field;
  uint8_t kind, resv;
  int prelen_set; /* prefix_length field other than the prefix's length */
  uint64_t prelen_field;
  uint64_t dlen;
  buf prefix;
} tmember;

typedef struct {
  int count_set;
  uint64_t count_field;
  size_t n;
  tmember m[MAXM + 2];
  int bcount_set;
  uint64_t bcount_field;
  size_t nb;
  buf bpath[MAXM + 2];
  int bplen_at; /* 1 + the base raw path whose path_length field is bplen_field */
  uint64_t bplen_field;
  buf tail; /* bytes after the last base raw path */
  int cut_set;
  size_t cut; /* the table cut to this many bytes */
} stable;

/* The table of a bundle from base to tgt: tgt's members, base's raw paths. */
static void stable_from(stable *T, const set *base, const set *tgt) {
  memset(T, 0, sizeof *T);
  for (size_t i = 0; i < tgt->n; i++) {
    const member *m = &tgt->m[i];
    tmember *x = &T->m[T->n++];
    x->path = bmem(m->path, strlen(m->path));
    x->kind = (uint8_t)m->c.kind;
    x->prefix = bdup(&m->c.prefix);
    x->dlen = m->c.bytes.n - m->c.prefix.n;
  }
  for (size_t i = 0; i < base->n; i++)
    if (base->m[i].c.kind == KIND_RAW)
      T->bpath[T->nb++] = bmem(base->m[i].path, strlen(base->m[i].path));
}

static void stable_copy(stable *dst, const stable *src) {
  *dst = *src;
  for (size_t i = 0; i < src->n; i++) {
    dst->m[i].path = bdup(&src->m[i].path);
    dst->m[i].prefix = bdup(&src->m[i].prefix);
  }
  for (size_t i = 0; i < src->nb; i++) dst->bpath[i] = bdup(&src->bpath[i]);
  dst->tail = bdup(&src->tail);
}

static void stable_free(stable *T) {
  for (size_t i = 0; i < T->n; i++) bfree(&T->m[i].path), bfree(&T->m[i].prefix);
  for (size_t i = 0; i < T->nb; i++) bfree(&T->bpath[i]);
  bfree(&T->tail);
  memset(T, 0, sizeof *T);
}

/* Offset of member i's prefix in the table's bytes. */
static size_t stable_prefix_at(const stable *T, size_t i) {
  size_t at = 4;
  for (size_t k = 0; k < i; k++) at += 2 + T->m[k].path.n + 18 + T->m[k].prefix.n;
  return at + 2 + T->m[i].path.n + 18;
}

static void stable_bytes(const stable *T, buf *b) {
  b->n = 0;
  bu32(b, T->count_set ? T->count_field : T->n);
  for (size_t i = 0; i < T->n; i++) {
    const tmember *x = &T->m[i];
    bu16(b, x->plen_set ? x->plen_field : x->path.n);
    bput(b, x->path.p, x->path.n);
    bu8(b, x->kind);
    bu8(b, x->resv);
    bu64(b, x->prelen_set ? x->prelen_field : x->prefix.n);
    bu64(b, x->dlen);
    bput(b, x->prefix.p, x->prefix.n);
  }
  bu32(b, T->bcount_set ? T->bcount_field : T->nb);
  for (size_t i = 0; i < T->nb; i++) {
    bu16(b, T->bplen_at == (int)i + 1 ? T->bplen_field : T->bpath[i].n);
    bput(b, T->bpath[i].p, T->bpath[i].n);
  }
  bput(b, T->tail.p, T->tail.n);
  if (T->cut_set) {
    if (T->cut > b->n) die("set table cut past its end");
    b->n = T->cut;
  }
}

static int buf_is(const buf *b, const uint8_t *p, size_t n) {
  return b->n == n && !memcmp(b->p, p, n);
}

/* After a vector changes the table or the entries: the table is the carried
 * prefix, and the state ids leave out the raw members the table names (SPEC.md
 * R-SET-3: target members of kind raw, base raw paths), then MANI and IDEN are
 * rebuilt. */
static void set_remanifest(bundle *B, const stable *T) {
  manifest *m = &B->man;
  stable_bytes(T, &m->prefix);
  for (size_t i = 0; i < m->n; i++) {
    mentry *e = &m->e[i];
    e->excl = 0;
    for (size_t k = 0; k < T->n; k++)
      if (T->m[k].kind == KIND_RAW && (e->presence & 2) && buf_is(&T->m[k].path, e->name, e->nlen))
        e->excl |= 2;
    for (size_t k = 0; k < T->nb; k++)
      if ((e->presence & 1) && buf_is(&T->bpath[k], e->name, e->nlen)) e->excl |= 1;
  }
  remanifest(B);
}

/* A bundle of kind set from base to tgt, and its table. */
static void build_set(bundle *B, stable *T, set *base, set *tgt, uint32_t chunk_size,
                      policy_fn pol, void *ctx, resize_fn rs) {
  build_ex(B, &base->view, &tgt->view, chunk_size, pol, ctx, rs);
  stable_from(T, base, tgt);
  uint8_t excl[MAXE];
  for (size_t i = 0; i < B->man.n; i++) excl[i] = B->man.e[i].excl;
  set_remanifest(B, T);
  for (size_t i = 0; i < B->man.n; i++)
    if (excl[i] != B->man.e[i].excl) die("%s: the table and the view disagree", tgt->dir);
}

/* The JSON of a sharded model's index (model.safetensors.index.json) for the
 * safetensors members of s, as Hugging Face tooling writes it (keys sorted). */
static void index_json(set *s, buf *out) {
  const char *name[MAXT * 2], *file[MAXT * 2];
  size_t n = 0;
  uint64_t total = 0;
  for (size_t k = 0; k < s->n; k++) {
    const ckpt *c = &s->m[k].c;
    if (c->kind != KIND_ST) continue;
    for (size_t i = 0; i < c->n; i++) {
      size_t at = n;
      while (at && strcmp(name[at - 1], c->t[i].name) > 0) at--;
      memmove(name + at + 1, name + at, (n - at) * sizeof *name);
      memmove(file + at + 1, file + at, (n - at) * sizeof *file);
      name[at] = c->t[i].name, file[at] = s->m[k].path, n++;
      total += c->t[i].len;
    }
  }
  out->n = 0;
  bprintf(out, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {",
          (unsigned long long)total);
  for (size_t i = 0; i < n; i++)
    bprintf(out, "%s\n    \"%s\": \"%s\"", i ? "," : "", name[i], file[i]);
  bprintf(out, "\n  }\n}\n");
}

/* Rewrites member `path` of s (a raw member) as the index of s's shards. */
static void set_reindex(set *s, const char *path) {
  buf j = {0};
  index_json(s, &j);
  set_raw_set(s, path, j.p, j.n);
  bfree(&j);
}

/* ------------------------------------------------------------------------ */
/* The index and the files                                                   */

/* A set: {"path": its directory, "members": {path: sha256, ...} in path order, and
 * "ignored": {path: sha256} for its hidden files, which are not members}. */
static json_t *set_ref(int sink, set *s) {
  char rel[8192];
  if (!s->written[sink]) {
    for (size_t i = 0; i < s->n; i++) {
      snprintf(rel, sizeof rel, "%s/%s", s->dir, s->m[i].path);
      claim(sink, rel, s);
      write_file(sink, rel, s->m[i].c.bytes.p, s->m[i].c.bytes.n, s->sha[i]);
    }
    for (size_t i = 0; i < s->nh; i++) {
      snprintf(rel, sizeof rel, "%s/%s", s->dir, s->hpath[i]);
      claim(sink, rel, s);
      write_file(sink, rel, s->hbytes[i].p, s->hbytes[i].n, s->hsha[i]);
    }
    s->written[sink] = 1;
  }
  json_t *members = json_object();
  for (size_t i = 0; i < s->n; i++)
    json_object_set_new(members, s->m[i].path, json_string(s->sha[i]));
  json_t *o = json_pack("{s:s, s:o}", "path", s->dir, "members", members);
  if (s->nh) {
    json_t *ign = json_object();
    for (size_t i = 0; i < s->nh; i++)
      json_object_set_new(ign, s->hpath[i], json_string(s->hsha[i]));
    json_object_set_new(o, "ignored", ign);
  }
  return o;
}

/* A vector's input or target: a file, a set, or nothing. */
typedef struct {
  ckpt *f;
  set *d;
} cp;
#define NONE ((cp){NULL, NULL})
#define F(x) ((cp){(x), NULL})
#define D(x) ((cp){NULL, (x)})

static json_t *cp_ref(int sink, cp c) { return c.f ? ck_ref(sink, c.f) : set_ref(sink, c.d); }

static const flag_def v11_flags[] = {
    {"set", "basic", "checkpoint sets: a directory of safetensors and raw members read as one "
                     "checkpoint (SPEC.md §2.3, §6.6)"},
    {"resize", "basic", "tensors that grow or shrink, listed in an RSIZ section (§6.5)"},
    {"dtype", "basic", "the dtypes of 1.1 (§3)"},
    {"packed", "basic", "the packed dtypes F4, F6_E2M3 and F6_E3M2: 4 or 6 bits an element (§3)"},
    {"encoding", "basic", "exercises a chunk encoding (§9.1)"},
    {"compression", "basic", "zstd-compressed streams or sections (§4.4, §9.3)"},
    {"raw", "basic", "raw checkpoints or raw members of a set (§2, §2.3)"},
    {"version", "edge-case", "the minor version a bundle declares (§12, R-VER-4)"},
    {"apply-to-target", "edge-case", "a bundle applied to its own target (§10.2, R-APL-5)"},
    {"layout", "edge-case", "base and target lay their tensors out differently: another "
                            "shard, another order"},
    {"hidden-files", "edge-case", "hidden files and directories in a set: not members (§2.3)"},
    {"path-order", "edge-case", "member paths whose bytewise order is not a directory walk's "
                                "(§2.3: paths are compared bytewise)"},
    {"zero-length", "edge-case", "empty members, tensors of no bytes, sets without "
                                 "safetensors members"},
    {"chunk-geometry", "edge-case", "a resized tensor or a member across a chunk boundary, a "
                                    "short last chunk"},
    {"structure-only", "edge-case", "no checkpoints ship: the target it names cannot be a "
                                    "directory (only the checks that need no base apply)"},
    {"raw-binding", "known-bug-class", "raw members are not in the state id (R-SET-3): only "
                                       "their tensor hashes bind them"},
    {"wrong-base", "known-bug-class", "a bundle applied to an input that is not its base"},
    {"shape-overflow", "known-bug-class", "a shape whose element count times its bits "
                                          "overflows 64 bits"},
    {"byte-length", "known-bug-class", "a byte length that is not shape x dtype size (bits / 8)"},
    {"duplicate-name", "known-bug-class", "a name given twice: by two members, or by a member "
                                          "and a tensor"},
    {"size-as-allocation", "known-bug-class", "a declared size or count far beyond the bytes "
                                              "present (must not be allocated)"},
    {"truncation", "known-bug-class", "a structure cut short"},
    {"bit-flip", "known-bug-class", "one flipped bit, caught by the checksum that covers it"},
    {"path", "malformed-field", "a member path that breaks the rules of §2.3"},
    {"reserved", "malformed-field", "a reserved field set"},
    {"limit", "malformed-field", "a declared value above a limit of §11"},
    {"order", "malformed-field", "sections missing, repeated or out of order"},
    {"malformed-field", "malformed-field", "a field with a value the format forbids"},
    {"checkpoint", "malformed-field", "a safetensors header (carried, of a member, or of an "
                                      "input) that is invalid"},
    {"target-mismatch", "malformed-field", "a target that is not the bundle's"},
    {"unknown-critical", "malformed-field", "a critical section a reader does not know"},
};

/* A vector's files, written to a sink. */
static json_t *write_files(int sink, const char *id, const buf *bundle_bytes, cp base, cp target) {
  json_t *files = bundle_ref(sink, id, bundle_bytes);
  if (base.f || base.d) json_object_set_new(files, "base", cp_ref(sink, base));
  if (target.f || target.d) json_object_set_new(files, "target", cp_ref(sink, target));
  return files;
}

/* Writes a vector's bundle (and checkpoints) and appends it to the index. Apply-
 * and target-stage vectors need their base (and target); valid ones ship both,
 * unless flagged structure-only. */
static void emit(const vec *v, const buf *bundle_bytes, cp base, cp target) {
  int valid = vector_check(v);
  int has_base = base.f || base.d, has_target = target.f || target.d;
  if (!valid && !strcmp(v->stage, "apply") && !has_base) die("%s: apply without a base", v->id);
  if (!valid && !strcmp(v->stage, "target") && !has_target) die("%s: no target", v->id);
  if (valid && !strstr(v->flags, "structure-only") && !(has_base && has_target))
    die("%s: a valid vector ships its base and target", v->id);
  add_vector(v, write_files(CORPUS, v->id, bundle_bytes, base, target));
}

static void emit_bundle(const vec *v, bundle *B, cp base, cp target) {
  buf out = {0};
  serialize(B, &out);
  emit(v, &out, base, target);
  bfree(&out);
}

/* The repair check (repair_checked): `bytes` is invalid vector v made again by
 * the same code with its faulty field at a valid value. It must apply to `base`
 * and give `target` where they are given. Call right after v. */
static void emit_repaired(const vec *v, const buf *bytes, cp base, cp target) {
  if (repair_checked(v)) add_repaired(v, write_files(REPAIRED, v->id, bytes, base, target));
}

static void emit_repaired_bundle(const vec *v, bundle *B, cp base, cp target) {
  buf out = {0};
  serialize(B, &out);
  emit_repaired(v, &out, base, target);
  bfree(&out);
}

/* Writes vector v (fix = 0) or its repaired variant (fix = 1); frees B. The vector
 * ships `base` and `target` as its stage needs them (none for the structure and
 * chunks stages); the repaired variant ships both. */
static void emit_fix(const vec *v, bundle *B, int fix, cp base, cp target) {
  if (fix) {
    emit_repaired_bundle(v, B, base, target);
  } else {
    int apply = !strcmp(v->stage, "apply"), tgt = !strcmp(v->stage, "target");
    emit_bundle(v, B, apply || tgt ? base : NONE, tgt ? target : NONE);
  }
  bundle_free(B);
}

/* ------------------------------------------------------------------------ */
/* Common helpers                                                            */

static void dims1(uint64_t *d, uint64_t a) { d[0] = a; }
static uint64_t *dims2(uint64_t *d, uint64_t a, uint64_t b) {
  d[0] = a, d[1] = b;
  return d;
}

/* Every (encoding, compression) pair of §9, chunk after chunk. */
static choice pol_cycle12(void *ctx, size_t entry, uint32_t chunk, size_t n, uint32_t count) {
  (void)entry, (void)chunk, (void)n, (void)count;
  return cycle_choice(ctx, 6);
}

/* XOR_SPARSE or XOR_DENSE as pol_default chooses, with zstd for chunks of 256
 * elements or more (the text of a rewritten index file compresses well). */
static choice pol_small(void *ctx, size_t entry, uint32_t chunk, size_t n, uint32_t count) {
  choice c = pol_default(ctx, entry, chunk, n, count);
  c.comp = n >= 256;
  return c;
}

static size_t entry_index(const bundle *B, const char *name) {
  for (size_t i = 0; i < B->man.n; i++)
    if (B->man.e[i].nlen == strlen(name) && !memcmp(B->man.e[i].name, name, B->man.e[i].nlen))
      return i;
  die("no entry %s", name);
}

/* Sets a descriptor. */
static void set_desc(desc *d, int dtype, unsigned rank, const uint64_t *dims, uint64_t len) {
  d->dtype = dtype;
  d->rank = rank;
  memset(d->dims, 0, sizeof d->dims);
  for (unsigned i = 0; i < rank; i++) d->dims[i] = dims[i];
  d->len = len;
}

/* A safetensors prefix (the 8-byte header length, then the header) with `from`
 * replaced by `to` in its header text; the length follows. */
static void prefix_subst(buf *p, const char *from, const char *to) {
  if (p->n < 8) die("no header to change");
  char *json = xmalloc(p->n - 8 + 1);
  memcpy(json, p->p + 8, p->n - 8);
  char *at = strstr(json, from);
  if (!at) die("no %s in the header", from);
  buf j = {0};
  bput(&j, json, (size_t)(at - json));
  bput(&j, to, strlen(to));
  bput(&j, at + strlen(from), strlen(at + strlen(from)));
  text_prefix(p, j.p, j.n, 0);
  free(json);
  bfree(&j);
}

/* The carried safetensors header of B (kind 1) with `from` replaced by `to`. */
static void subst_prefix(bundle *B, const char *from, const char *to) {
  prefix_subst(&B->man.prefix, from, to);
  rebuild_mani(B);
}

/* A finished safetensors checkpoint whose header has `from` replaced by `to`. */
static void ck_subst(ckpt *c, const char *from, const char *to) {
  prefix_subst(&c->prefix, from, to);
  ck_data(c);
}

/* ------------------------------------------------------------------------ */
/* The dtypes of 1.1 (SPEC.md §3)                                            */

static ckpt DB, DT; /* the dtypes pair */
static bundle DM;   /* its bundle, XOR_SPARSE: descriptor vectors are made from it */

static void pair_dtypes(void) {
  uint64_t d[2];
  DB.file = "ckpt/dtypes-base.safetensors";
  DB.kind = KIND_ST;
  for (int dt = F8_E8M0; dt <= DT_LAST; dt++) {
    char name[32];
    snprintf(name, sizeof name, "t%02d.%s", dt, dt_name[dt]);
    if (dt == F6_E2M3) dims2(d, 8, 4);      /* 32 x 6 bits = 24 bytes */
    else if (dt == F6_E3M2) dims2(d, 4, 4); /* 16 x 6 bits = 12 bytes */
    else dims2(d, 8, 9);                    /* F4: 72 x 4 bits = 36 bytes */
    fill_random(ck_add(&DB, name, dt, 2, d));
  }
  dims1(d, 9000); /* 4500 bytes: a 4096-byte chunk and a 404-byte one */
  fill_random(ck_add(&DB, "big.F4", F4, 1, d));
  dims1(d, 4);
  tensor *c = ck_add(&DB, "c64.bits", C64, 1, d);
  fill_random(c);
  put32(c->data, 0x00000000);      /* element 0: real +0 */
  put32(c->data + 8, 0x7FC00001);  /* element 1: real NaN */
  dims1(d, 2);
  fill_random(ck_add(&DB, "min.F4", F4, 1, d)); /* one byte */
  dims1(d, 4);
  fill_random(ck_add(&DB, "min.F6", F6_E3M2, 1, d)); /* three bytes */
  dims1(d, 16);
  fill_random(ck_add(&DB, "recoded", BF16, 1, d));
  dims1(d, 64);
  fill_random(ck_add(&DB, "removed", U8, 1, d));
  ck_add(&DB, "zero.F4", F4, 2, dims2(d, 3, 0));
  dims1(d, 0);
  ck_add(&DB, "zero.F6", F6_E2M3, 1, d);
  ck_finish(&DB);
  ck_clone(&DT, &DB, "ckpt/dtypes-target.safetensors");
  for (size_t i = 0; i < DT.n; i++) mutate(&DT.t[i], strcmp(DT.t[i].name, "big.F4") ? 2500 : 100);
  c = ck_get(&DT, "c64.bits");
  memcpy(c->data, ck_get(&DB, "c64.bits")->data, 32);
  put32(c->data, 0x80000000);      /* +0 -> -0: a change of bits */
  put32(c->data + 8, 0x7FC00002);  /* another NaN payload */
  ck_remove(&DT, "recoded");
  dims1(d, 64);
  fill_random(ck_add(&DT, "recoded", F4, 1, d)); /* BF16 [16] -> F4 [64]: zero base */
  ck_remove(&DT, "removed");
  ck_finish(&DT);
}

static void dtype_vectors(void) {
  bundle B;
  char id[128], text[512];
  pair_dtypes();
  for (int enc = 1; enc <= ENC_LAST; enc++) {
    choice ch = {(uint8_t)enc, 0};
    build(&B, &DB, &DT, 4096, pol_fixed, &ch);
    if (B.minor != 1) die("dtypes: minor %u", B.minor);
    if (enc == XOR_SPARSE) { /* the bundle the descriptor vectors are made from */
      B.mani_comp = 1;
      rebuild_mani(&B);
    }
    snprintf(id, sizeof id, "valid/dtypes11-%s", enc_name[enc]);
    snprintf(text, sizeof text, "every dtype of 1.1 (codes 16 to 22), each changed chunk %s, "
             "streams stored: packed tensors coded byte by byte (E = 1, a 4500-byte F4 in two "
             "chunks), C64 as 8-byte elements (+0 -> -0 and a NaN payload change are changes); "
             "a BF16 tensor recoded as F4, zero-length packed tensors, a removed tensor%s",
             enc_name[enc], enc == XOR_SPARSE ? "; MANI stored as zstd" : "");
    emit_bundle(VALID(.id = id, .flags = "dtype,packed,encoding", .text = text,
                      .covers = "§3,R-DT-1,R-DT-2,§9.1,R-ENC-1,R-APL-2"),
                &B, F(&DB), F(&DT));
    if (enc == XOR_SPARSE) bundle_copy(&DM, &B);
    bundle_free(&B);
  }
  static const choice zc[] = {{DELTA_SPARSE, 1}, {OVERWRITE_DENSE, 1}};
  for (size_t i = 0; i < 2; i++) {
    build(&B, &DB, &DT, 4096, pol_fixed, (void *)&zc[i]);
    snprintf(id, sizeof id, "valid/dtypes11-%s-zstd", enc_name[zc[i].enc]);
    snprintf(text, sizeof text, "every dtype of 1.1, each changed chunk %s, each stream one "
             "zstd frame", enc_name[zc[i].enc]);
    emit_bundle(VALID(.id = id, .flags = "dtype,packed,encoding,compression", .text = text,
                      .covers = "§3,R-DT-2,§9.1,§9.3,R-CMP-3"),
                &B, F(&DB), F(&DT));
    bundle_free(&B);
  }
  unsigned k = 0;
  build(&B, &DB, &DT, 4096, pol_cycle12, &k);
  B.mani_comp = 1;
  rebuild_mani(&B);
  emit_bundle(VALID(.id = "valid/dtypes11-mixed", .flags = "dtype,packed,encoding,compression",
                    .text = "every dtype of 1.1, the twelve (encoding, compression) pairs in "
                            "turn, chunk after chunk; MANI stored as zstd",
                    .covers = "§3,R-DT-2,§9.1,R-ENC-7"),
              &B, F(&DB), F(&DT));
  bundle_free(&B);
  bundle_copy(&B, &DM);
  B.minor = 7;
  emit_bundle(VALID(.id = "valid/dtypes11-minor-future", .flags = "dtype,version",
                    .text = "the dtypes bundle declared as format 1.7: a 1.1 reader accepts a "
                            "later minor version and reads the dtypes it knows",
                    .covers = "R-HDR-6,R-VER-1,§12"),
              &B, F(&DB), F(&DT));
  bundle_free(&B);

  /* Descriptors (R-MAN-5, R-DT-2): the removed tensor's base descriptor, which no
   * carried header repeats. Repaired, it is U8 [64] again. */
  static const struct {
    const char *id, *text, *code, *flags, *covers;
    int dtype;
    unsigned rank;
    uint64_t dims[2], len;
  } ds[] = {
      {"invalid/dtype-23", "the removed tensor's base dtype code 23: no dtype has it",
       "DCR_E_DTYPE", "malformed-field", "R-DT-1,R-MAN-5", 23, 1, {64}, 64},
      {"invalid/packed-bits-not-bytes", "the removed tensor's base F4 [3] with byte length 2: "
       "12 bits are not a whole number of bytes", "DCR_E_SHAPE", "packed,byte-length",
       "R-DT-2,R-MAN-5", F4, 1, {3}, 2},
      {"invalid/packed-f6-bits-not-bytes", "the removed tensor's base F6_E2M3 [5] with byte "
       "length 4: 30 bits", "DCR_E_SHAPE", "packed,byte-length", "R-DT-2,R-MAN-5", F6_E2M3, 1,
       {5}, 4},
      {"invalid/packed-scalar", "the removed tensor's base F4 scalar (shape []) with byte length "
       "1: one element of 4 bits", "DCR_E_SHAPE", "packed,byte-length,zero-length",
       "R-DT-2,R-MAN-5", F4, 0, {0}, 1},
      {"invalid/packed-byte-per-element", "the removed tensor's base F4 [64] with byte length "
       "64 (one byte an element) instead of 32", "DCR_E_SHAPE", "packed,byte-length",
       "R-DT-2,R-MAN-5", F4, 1, {64}, 64},
      {"invalid/packed-f6-rounded-up", "the removed tensor's base F6_E3M2 [4] with byte length "
       "4 (6 bits rounded up to a byte) instead of 3", "DCR_E_SHAPE", "packed,byte-length",
       "R-DT-2,R-MAN-5", F6_E3M2, 1, {4}, 4},
      {"invalid/packed-bits-overflow", "the removed tensor's base F4 [2^62] with byte length "
       "2^61: the bytes fit in 64 bits, elements x 4 bits do not", "DCR_E_SHAPE",
       "packed,shape-overflow", "R-DT-2,R-MAN-5", F4, 1, {1ull << 62}, 1ull << 61},
      {"invalid/packed-f6-bits-overflow", "the removed tensor's base F6_E2M3 [2^32, 2^30] with "
       "byte length 3 x 2^59: 2^62 elements x 6 bits overflow 64 bits", "DCR_E_SHAPE",
       "packed,shape-overflow", "R-DT-2,R-MAN-5", F6_E2M3, 2, {1ull << 32, 1ull << 30},
       3ull << 59},
      {"invalid/c64-byte-length", "the removed tensor's base C64 [8] with byte length 32 (4 "
       "bytes an element) instead of 64", "DCR_E_SHAPE", "dtype,byte-length", "R-MAN-5,§3",
       C64, 1, {8}, 32},
  };
  for (size_t i = 0; i < sizeof ds / sizeof *ds; i++)
    for (int fix = 0; fix < 2; fix++) {
      bundle_copy(&B, &DM);
      desc *dd = &B.man.e[entry_index(&B, "removed")].b;
      if (!fix) set_desc(dd, ds[i].dtype, ds[i].rank, ds[i].dims, ds[i].len);
      remanifest(&B);
      emit_fix(INVALID(.id = ds[i].id, .error = ds[i].code, .stage = "structure",
                       .flags = ds[i].flags, .text = ds[i].text, .covers = ds[i].covers),
               &B, fix, F(&DB), F(&DT));
    }
  for (int fix = 0; fix < 2; fix++) {
    bundle_copy(&B, &DM);
    if (!fix) subst_prefix(&B, "\"shape\":[9000]", "\"shape\":[8999]");
    emit_fix(INVALID(.id = "invalid/prefix-packed-bits-not-bytes", .error = "DCR_E_SHAPE",
                     .stage = "structure", .flags = "packed,checkpoint,byte-length",
                     .text = "the carried header says big.F4 is F4 [8999] with data_offsets "
                             "4500 bytes apart (the entry says [9000]): 35996 bits are not "
                             "whole bytes, an error of the header (§2.1 step 3.6) before it is "
                             "compared with the entries",
                     .covers = "R-DT-2,R-ST-4,R-MAN-8"),
             &B, fix, F(&DB), F(&DT));
  }
  for (int fix = 0; fix < 2; fix++) {
    bundle_copy(&B, &DM);
    B.minor = (unsigned)fix;
    emit_fix(INVALID(.id = "invalid/minor-0-dtypes", .error = "DCR_E_DTYPE",
                     .stage = "structure", .flags = "dtype,version",
                     .text = "the dtypes bundle declared as format 1.0: a bundle is read by the "
                             "rules of its minor version, in which the first descriptor (big.F4's "
                             "base, F4, code 20) has an unknown dtype",
                     .covers = "R-VER-4,R-DT-1,§12"),
             &B, fix, F(&DB), F(&DT));
  }
  /* A base file whose header has a packed shape of bits that are not bytes. */
  {
    static ckpt wb;
    ck_clone(&wb, &DB, "ckpt/dtypes-base-packed-shape.safetensors");
    ck_finish(&wb);
    ck_subst(&wb, "\"removed\":{\"dtype\":\"U8\",\"shape\":[64]",
             "\"removed\":{\"dtype\":\"F4\",\"shape\":[127]");
    for (int fix = 0; fix < 2; fix++) {
      bundle_copy(&B, &DM);
      emit_fix(INVALID(.id = "invalid/apply-base-packed-shape", .error = "DCR_E_SHAPE",
                       .stage = "apply", .flags = "packed,checkpoint,byte-length",
                       .text = "the base file's header says the removed tensor is F4 [127] over "
                               "64 bytes: 508 bits are not whole bytes (§2.1 step 3.6, read "
                               "before the base is compared with the manifest)",
                       .covers = "R-DT-2,R-ST-4"),
               &B, fix, F(fix ? &DB : &wb), F(&DT));
    }
  }
}

/* A bundle read by the rules of its minor version (R-VER-4): names of 1.1 dtypes
 * in the files a 1.0 bundle is applied to, or checked against. */
static void minor0_file_vectors(void) {
  static ckpt vb, vt, wb, wt;
  uint64_t d[1];
  bundle V, B;
  vb.file = "ckpt/v0-base.safetensors";
  vb.kind = KIND_ST;
  fill_random(ck_add(&vb, "a", BF16, 1, (dims1(d, 64), d)));
  fill_random(ck_add(&vb, "q", U8, 1, (dims1(d, 16), d)));
  ck_finish(&vb);
  ck_clone(&vt, &vb, "ckpt/v0-target.safetensors");
  mutate(ck_get(&vt, "a"), 1000);
  ck_remove(&vt, "q");
  fill_random(ck_add(&vt, "r", U8, 1, (dims1(d, 16), d)));
  ck_finish(&vt);
  build(&V, &vb, &vt, 4096, pol_default, NULL);
  if (V.minor != 0) die("v0: minor %u", V.minor);
  ck_clone(&wb, &vb, "ckpt/v0-base-f8-e8m0.safetensors");
  ck_get(&wb, "q")->dtype = F8_E8M0;
  ck_finish(&wb);
  ck_clone(&wt, &vt, "ckpt/v0-target-f4.safetensors");
  tensor *r = ck_get(&wt, "r");
  r->dtype = F4, r->dims[0] = 32; /* the same 16 bytes */
  ck_finish(&wt);
  for (int fix = 0; fix < 2; fix++) {
    bundle_copy(&B, &V);
    emit_fix(INVALID(.id = "invalid/minor-0-base-dtype-name", .error = "DCR_E_DTYPE",
                     .stage = "apply", .flags = "dtype,version,checkpoint",
                     .text = "a bundle of format 1.0 applied to a base file whose header says "
                             "the removed tensor q (U8 [16] in the manifest) is F8_E8M0: a name "
                             "of 1.1 is an unknown dtype in the checkpoints read with a 1.0 "
                             "bundle",
                     .covers = "R-VER-4,R-ST-3"),
             &B, fix, F(fix ? &vb : &wb), F(&vt));
  }
  for (int fix = 0; fix < 2; fix++) {
    /* repaired: format 1.1, whose base is the file where q is F8_E8M0 */
    bundle_copy(&B, &V);
    desc *q = &B.man.e[entry_index(&B, "q")].b;
    q->dtype = F8_E8M0;
    B.minor = (unsigned)fix;
    remanifest(&B);
    emit_fix(INVALID(.id = "invalid/minor-0-dtype-16", .error = "DCR_E_DTYPE",
                     .stage = "structure", .flags = "dtype,version",
                     .text = "a bundle of format 1.0 whose removed tensor q's base descriptor "
                             "has dtype 16 (F8_E8M0): unknown to the rules of 1.0 (repaired, "
                             "format 1.1, it applies to a base where q is F8_E8M0)",
                     .covers = "R-VER-4,R-DT-1,R-MAN-5"),
             &B, fix, F(&wb), F(&vt));
  }
  for (int fix = 0; fix < 2; fix++) {
    bundle_copy(&B, &V);
    emit_fix(INVALID(.id = "invalid/minor-0-target-dtype-name", .error = "DCR_E_DTYPE",
                     .stage = "target", .flags = "dtype,version,checkpoint",
                     .text = "a bundle of format 1.0 checked against a target file whose header "
                             "says the added tensor r (U8 [16]) is F4 [32]: an unknown dtype "
                             "for a 1.0 bundle, found when the file is read",
                     .covers = "R-VER-4,R-ST-3,R-TGT-1"),
             &B, fix, F(&vb), F(fix ? &vt : &wt));
  }
  bundle_free(&V);
}

/* ------------------------------------------------------------------------ */
/* Resized tensors (SPEC.md §6.5)                                            */

static int resize_all(const mentry *e) {
  (void)e;
  return 1;
}

static ckpt RB, RT;  /* the resize pair */
static bundle RM;    /* its bundle, RSIZ by the reference writer's rule */

/* Entries: 0 added, 1 bias (F32 -> I32), 2 embed (F16 [40, 8] -> [48, 8]), 3 grow.empty
 * (F32 [0, 4] -> [4, 4]), 4 head (F16 [40, 8] -> [36, 8]), 5 norm (same), 6 packed
 * (F4 [32, 4] -> [40, 4]), 7 removed, 8 reshape.grow (F32 [4, 4] -> [2, 10]: not the
 * first dimension only), 9 shrink.same (BF16 [20, 8] -> [12, 8], kept rows
 * unchanged), 10 to.empty (F32 [4, 4] -> [0, 4]). RSIZ: 2 3 4 6 9 10. */
static void pair_resize(void) {
  uint64_t d[2];
  RB.file = "ckpt/resize-base.safetensors";
  RB.kind = KIND_ST;
  fill_random(ck_add(&RB, "bias", F32, 1, (dims1(d, 8), d)));
  fill_random(ck_add(&RB, "embed", F16, 2, dims2(d, 40, 8)));
  ck_add(&RB, "grow.empty", F32, 2, dims2(d, 0, 4));
  fill_random(ck_add(&RB, "head", F16, 2, dims2(d, 40, 8)));
  fill_random(ck_add(&RB, "norm", F32, 1, (dims1(d, 8), d)));
  fill_random(ck_add(&RB, "packed", F4, 2, dims2(d, 32, 4)));
  fill_random(ck_add(&RB, "removed", U8, 1, (dims1(d, 16), d)));
  fill_random(ck_add(&RB, "reshape.grow", F32, 2, dims2(d, 4, 4)));
  fill_random(ck_add(&RB, "shrink.same", BF16, 2, dims2(d, 20, 8)));
  fill_random(ck_add(&RB, "to.empty", F32, 2, dims2(d, 4, 4)));
  ck_finish(&RB);
  RT.file = "ckpt/resize-target.safetensors";
  RT.kind = KIND_ST;
  fill_random(ck_add(&RT, "added", F32, 1, (dims1(d, 4), d)));
  fill_random(ck_add(&RT, "bias", I32, 1, (dims1(d, 8), d)));
  /* grown and shrunk tensors: the rows they keep, some changed, then new rows */
  static const struct {
    const char *name;
    uint64_t rows;
    unsigned per10k;
  } rz[] = {{"embed", 48, 300},      {"grow.empty", 4, 0}, {"head", 36, 300},
            {"packed", 40, 500},     {"shrink.same", 12, 0}, {"to.empty", 0, 0}};
  for (size_t i = 0; i < sizeof rz / sizeof *rz; i++) {
    const tensor *b = ck_get(&RB, rz[i].name);
    d[0] = rz[i].rows, d[1] = b->dims[1];
    tensor *t = ck_add(&RT, rz[i].name, b->dtype, 2, d);
    fill_random(t);
    uint64_t keep = b->len < t->len ? b->len : t->len;
    memcpy(t->data, b->data, (size_t)keep);
    if (rz[i].per10k) {
      tensor part = *t; /* mutate the kept rows only */
      part.len = keep;
      mutate(&part, rz[i].per10k);
    }
  }
  tensor *n = ck_add(&RT, "norm", F32, 1, (dims1(d, 8), d));
  memcpy(n->data, ck_get(&RB, "norm")->data, 32);
  mutate(n, 2500);
  tensor *g = ck_add(&RT, "reshape.grow", F32, 2, dims2(d, 2, 10));
  fill_random(g);
  memcpy(g->data, ck_get(&RB, "reshape.grow")->data, 64);
  ck_finish(&RT);
}

/* Raw files that grow and shrink at the end (SPEC.md §6.5: "a raw file appended to"). */
static ckpt GB, GT, ST_;
static bundle GM; /* the raw file that grows, with RSIZ */

static void pair_raw_resize(void) {
  uint64_t d[1] = {6000};
  GB.file = "ckpt/raw-resize-base.bin";
  GB.kind = KIND_RAW;
  fill_random(ck_add(&GB, "raw", U8, 1, d));
  ck_finish(&GB);
  GT.file = "ckpt/raw-grows-target.bin";
  GT.kind = KIND_RAW;
  d[0] = 7000;
  tensor *t = ck_add(&GT, "raw", U8, 1, d);
  fill_random(t);
  memcpy(t->data, GB.t[0].data, 6000);
  tensor part = *t;
  part.len = 6000;
  mutate(&part, 30);
  ck_finish(&GT);
  ST_.file = "ckpt/raw-shrinks-target.bin";
  ST_.kind = KIND_RAW;
  d[0] = 5000;
  t = ck_add(&ST_, "raw", U8, 1, d);
  memcpy(t->data, GB.t[0].data, 5000);
  mutate(t, 30);
  ck_finish(&ST_);
}

static void resize_vectors(void) {
  bundle B;
  pair_resize();
  build_ex(&RM, &RB, &RT, 4096, pol_default, NULL, resize_first_dim);
  RM.mani_comp = 1;
  rebuild_mani(&RM);
  if (RM.n < 2 || RM.s[1].type != T4("RSIZ") || get32(RM.s[1].pl.p) != 6)
    die("resize: RSIZ is not as designed");
  bundle_copy(&B, &RM);
  emit_bundle(VALID(.id = "valid/resize-tensors", .flags = "resize,packed,zero-length",
                    .text = "RSIZ lists the tensors whose first dimension changes: F16 [40, 8] "
                            "grown to [48, 8] and another shrunk to [36, 8], each with changes "
                            "in the rows it keeps; a packed F4 grown by rows; a tensor grown from "
                            "[0, 4] and one shrunk to [0, 4]; one shrunk with its kept rows "
                            "unchanged (no chunk at all); beside them a tensor recoded (same "
                            "length), one reshaped to another length (coded against zeros), one "
                            "added and one removed; MANI stored as zstd",
                    .covers = "R-RSZ-1,R-RSZ-2,§6.5,§6.2"),
              &B, F(&RB), F(&RT));
  bundle_free(&B);
  build_ex(&B, &RB, &RT, 4096, pol_fixed, &(choice){DELTA_SPARSE, 1}, resize_first_dim);
  emit_bundle(VALID(.id = "valid/resize-tensors-delta-zstd", .flags = "resize,encoding,compression",
                    .text = "the resize pair with every changed chunk DELTA_SPARSE, zstd: the "
                            "deltas of a resized tensor are taken against its resized base",
                    .covers = "R-RSZ-2,§9.1"),
              &B, F(&RB), F(&RT));
  bundle_free(&B);
  build_ex(&B, &RB, &RT, 4096, pol_default, NULL, resize_all);
  emit_bundle(VALID(.id = "valid/resize-any-shape", .flags = "resize",
                    .text = "RSIZ lists every entry it may: also F32 [4, 4] -> [2, 10], whose "
                            "shape changes in more than its first dimension (same dtype, other "
                            "length: resizable; which ones to list is the writer's choice)",
                    .covers = "R-RSZ-1,R-RSZ-2"),
              &B, F(&RB), F(&RT));
  bundle_free(&B);
  build(&B, &RB, &RT, 4096, pol_default, NULL);
  emit_bundle(VALID(.id = "valid/resize-not-listed", .flags = "resize,packed",
                    .text = "the resize pair without RSIZ: every tensor whose length changes is "
                            "coded against zeros (format 1.1 for its F4 tensor)",
                    .covers = "§6.2,§6.5"),
              &B, F(&RB), F(&RT));
  bundle_free(&B);
  bundle_copy(&B, &RM);
  emit_bundle(VALID(.id = "valid/resize-apply-to-own-target", .flags = "resize,apply-to-target",
                    .text = "the resize bundle applied to its own target: the target by its "
                            "state id, no chunk applied, the output is the target",
                    .covers = "R-APL-5,§10.2,R-RSZ-2"),
              &B, F(&RT), F(&RT));
  bundle_free(&B);

  pair_raw_resize();
  build_ex(&GM, &GB, &GT, 4096, pol_default, NULL, resize_first_dim);
  bundle_copy(&B, &GM);
  emit_bundle(VALID(.id = "valid/resize-raw-grows", .flags = "resize,raw,chunk-geometry",
                    .text = "a raw file of 6000 bytes appended to (7000 bytes), with a few "
                            "changes before: RSIZ lists raw, chunk 1 holds base bytes and new "
                            "ones",
                    .covers = "R-RSZ-1,R-RSZ-2,§6.5,R-MAN-7"),
              &B, F(&GB), F(&GT));
  bundle_free(&B);
  build_ex(&B, &GB, &ST_, 4096, pol_default, NULL, resize_first_dim);
  emit_bundle(VALID(.id = "valid/resize-raw-shrinks", .flags = "resize,raw,chunk-geometry",
                    .text = "a raw file of 6000 bytes cut to 5000, with a few changes: RSIZ "
                            "lists raw, its last chunk is 904 bytes of the base's second chunk",
                    .covers = "R-RSZ-1,R-RSZ-2"),
              &B, F(&GB), F(&ST_));
  bundle_free(&B);

  /* RSIZ's content (R-RSZ-1), repaired to the original 6 indices. */
  enum { P_CUT, P_EXTRA, P_TWO, P_EMPTY, P_LIST };
  static const struct {
    const char *id, *text, *code, *flags;
    int how;
    unsigned n, idx[8];
  } rp[] = {
      {"invalid/rsiz-length-short", "RSIZ's count is 6 and its payload holds 5 indices",
       "DCR_E_STRUCTURE", "resize,truncation", P_CUT, 0, {0}},
      {"invalid/rsiz-length-long", "RSIZ's count is 6 and its payload 4 bytes longer",
       "DCR_E_STRUCTURE", "resize,malformed-field", P_EXTRA, 0, {0}},
      {"invalid/rsiz-payload-2-bytes", "an RSIZ payload of 2 bytes: shorter than its count",
       "DCR_E_STRUCTURE", "resize,truncation", P_TWO, 0, {0}},
      {"invalid/rsiz-payload-empty", "an empty RSIZ payload", "DCR_E_STRUCTURE",
       "resize,truncation", P_EMPTY, 0, {0}},
      {"invalid/rsiz-count-zero", "RSIZ lists no entry (count 0, payload 4 bytes)",
       "DCR_E_MANIFEST", "resize,malformed-field", P_LIST, 0, {0}},
      {"invalid/rsiz-index-out-of-range", "RSIZ's last index is 11, entry_count is 11",
       "DCR_E_MANIFEST", "resize,malformed-field", P_LIST, 6, {2, 3, 4, 6, 9, 11}},
      {"invalid/rsiz-index-huge", "RSIZ's last index is 2^32 - 1", "DCR_E_MANIFEST",
       "resize,malformed-field", P_LIST, 6, {2, 3, 4, 6, 9, 0xFFFFFFFFu}},
      {"invalid/rsiz-index-repeated", "RSIZ lists entry 4 twice (2 3 4 4 9 10)",
       "DCR_E_MANIFEST", "resize,malformed-field", P_LIST, 6, {2, 3, 4, 4, 9, 10}},
      {"invalid/rsiz-index-decreasing", "RSIZ's indices are not increasing (2 4 3 6 9 10)",
       "DCR_E_MANIFEST", "resize,malformed-field", P_LIST, 6, {2, 4, 3, 6, 9, 10}},
      {"invalid/rsiz-entry-target-only", "RSIZ also lists entry 0, added (target only)",
       "DCR_E_MANIFEST", "resize,malformed-field", P_LIST, 7, {0, 2, 3, 4, 6, 9, 10}},
      {"invalid/rsiz-entry-base-only", "RSIZ also lists entry 7, removed (base only)",
       "DCR_E_MANIFEST", "resize,malformed-field", P_LIST, 7, {2, 3, 4, 6, 7, 9, 10}},
      {"invalid/rsiz-entry-dtype-differs", "RSIZ also lists entry 1, bias, F32 -> I32 (same "
       "length, another dtype)", "DCR_E_MANIFEST", "resize,malformed-field", P_LIST, 7,
       {1, 2, 3, 4, 6, 9, 10}},
      {"invalid/rsiz-entry-same-length", "RSIZ also lists entry 5, norm, whose length does not "
       "change", "DCR_E_MANIFEST", "resize,malformed-field", P_LIST, 7, {2, 3, 4, 5, 6, 9, 10}},
  };
  for (size_t i = 0; i < sizeof rp / sizeof *rp; i++)
    for (int fix = 0; fix < 2; fix++) {
      bundle_copy(&B, &RM);
      section *s = &B.s[1];
      if (!fix) switch (rp[i].how) {
          case P_CUT: s->pl.n -= 4; break;
          case P_EXTRA: bu32(&s->pl, 0); break;
          case P_TWO: s->pl.n = 2; break;
          case P_EMPTY: s->pl.n = 0; break;
          default:
            s->pl.n = 0;
            bu32(&s->pl, rp[i].n);
            for (unsigned k = 0; k < rp[i].n; k++) bu32(&s->pl, rp[i].idx[k]);
        }
      emit_fix(INVALID(.id = rp[i].id, .error = rp[i].code, .stage = "structure",
                       .flags = rp[i].flags,
                       .text = rp[i].text, .covers = "R-RSZ-1"),
               &B, fix, F(&RB), F(&RT));
    }

  /* Where RSIZ stands, and its flags (§4.3). */
  uint8_t junk[16];
  for (size_t i = 0; i < sizeof junk; i++) junk[i] = rbyte();
  static const char *const meta[] = {"dcr.note", "resize", NULL};
  enum { W_META, W_TWICE, W_LATE, W_FLAGS, W_COMP, W_COMP2 };
  static const struct {
    const char *id, *text, *code, *flags, *covers;
    int how;
  } rw[] = {
      {"invalid/rsiz-after-meta", "META between MANI and RSIZ: RSIZ must be the second section",
       "DCR_E_STRUCTURE", "resize,order", "R-SEC-8,§4.3", W_META},
      {"invalid/rsiz-twice", "RSIZ right after MANI and again after it", "DCR_E_STRUCTURE",
       "resize,order", "R-SEC-8,§4.3", W_TWICE},
      {"invalid/rsiz-before-iden", "RSIZ after the last CHNK, before IDEN", "DCR_E_STRUCTURE",
       "resize,order", "R-SEC-8", W_LATE},
      {"invalid/rsiz-not-critical", "RSIZ without the critical flag", "DCR_E_STRUCTURE",
       "resize,malformed-field", "R-SEC-11", W_FLAGS},
      {"invalid/rsiz-compressed", "RSIZ with section compression 1 (its payload a zstd frame)",
       "DCR_E_STRUCTURE", "resize,compression", "R-SEC-11", W_COMP},
      {"invalid/rsiz-compression-unknown", "RSIZ with section compression 2", "DCR_E_ENCODING",
       "resize,malformed-field", "R-SEC-11", W_COMP2},
  };
  for (size_t i = 0; i < sizeof rw / sizeof *rw; i++)
    for (int fix = 0; fix < 2; fix++) {
      bundle_copy(&B, &RM);
      section *s = &B.s[1];
      switch (rw[i].how) {
        case W_META:
          add_meta(&B, meta, 0);
          if (!fix) { /* META right after MANI, then RSIZ */
            section t = B.s[1];
            B.s[1] = B.s[2];
            B.s[2] = t;
          }
          break;
        case W_TWICE:
          if (!fix) sec_insert(&B, 2, "RSIZ", 1, 0, s->pl.p, s->pl.n);
          break;
        case W_LATE:
          if (!fix) {
            section t = B.s[1];
            size_t iden = sec_find(&B, "IDEN", 0);
            memmove(B.s + 1, B.s + 2, (iden - 2) * sizeof *B.s);
            B.s[iden - 1] = t;
          }
          break;
        case W_FLAGS: s->flags = (uint16_t)fix; break;
        case W_COMP:
          if (!fix) {
            buf z = {0};
            zframe(&z, s->pl.p, s->pl.n);
            bset(&s->pl, z.p, z.n);
            s->comp = 1;
            bfree(&z);
          }
          break;
        default: s->comp = fix ? 0 : 2; break;
      }
      emit_fix(INVALID(.id = rw[i].id, .error = rw[i].code, .stage = "structure",
                       .flags = rw[i].flags, .text = rw[i].text, .covers = rw[i].covers),
               &B, fix, F(&RB), F(&RT));
    }
  {
    /* The walk's checks on RSIZ, like any section's. */
    buf b = {0};
    serialize(&RM, &b);
    size_t off = (size_t)RM.s[1].off;
    for (int fix = 0; fix < 2; fix++) {
      buf c = bdup(&b);
      if (!fix) c.p[off + 32 + 5] ^= 0x01; /* the first index's second byte */
      const vec *v = INVALID(.id = "invalid/bit-flip-rsiz-payload", .error = "DCR_E_CHECKSUM",
                             .stage = "structure", .flags = "resize,bit-flip",
                             .text = "one bit of RSIZ's first index flipped: the payload check",
                             .covers = "R-SEC-4");
      if (fix) emit_repaired(v, &c, F(&RB), F(&RT));
      else emit(v, &c, NONE, NONE);
      bfree(&c);
    }
    for (int fix = 0; fix < 2; fix++) {
      buf c = bdup(&b);
      if (!fix) c.n = off + 32 + 10;
      const vec *v = INVALID(.id = "invalid/truncated-in-rsiz-payload", .error = "DCR_E_TRUNCATED",
                             .stage = "structure", .flags = "resize,truncation",
                             .text = "the bundle cut 10 bytes into the RSIZ payload",
                             .covers = "R-SEC-3");
      if (fix) emit_repaired(v, &c, F(&RB), F(&RT));
      else emit(v, &c, NONE, NONE);
      bfree(&c);
    }
    bfree(&b);
  }

  /* R-RSZ-2: chunks coded against the zero base while RSIZ lists the tensor, and
   * against the resized base while it does not. */
  {
    bundle Z;
    build(&Z, &RB, &RT, 4096, pol_default, NULL); /* no RSIZ: zero bases */
    for (int fix = 0; fix < 2; fix++) {
      bundle_copy(&B, &Z);
      if (!fix) sec_insert(&B, 1, "RSIZ", 1, 0, RM.s[1].pl.p, RM.s[1].pl.n);
      emit_fix(INVALID(.id = "invalid/apply-rsiz-chunks-zero-based", .error = "DCR_E_BASE_MISMATCH",
                       .stage = "apply", .flags = "resize,wrong-base",
                       .text = "RSIZ lists the resized tensors, but their chunks were coded "
                               "against zeros (their base_check is that of zeros): applied to "
                               "the true base, a chunk's base bytes are its resized base and do "
                               "not give base_check, and the input is not the target either",
                       .covers = "R-RSZ-2,R-APL-2"),
               &B, fix, F(&RB), F(&RT));
    }
    bundle_free(&Z);
    for (int fix = 0; fix < 2; fix++) {
      bundle_copy(&B, &RM);
      if (!fix) sec_remove(&B, 1);
      emit_fix(INVALID(.id = "invalid/apply-rsiz-missing", .error = "DCR_E_BASE_MISMATCH",
                       .stage = "apply", .flags = "resize,wrong-base",
                       .text = "the resize bundle without its RSIZ section (chunks still coded "
                               "against resized bases): the tensors are coded against zeros, "
                               "whose bytes do not give the chunks' base_check",
                       .covers = "R-RSZ-2,R-APL-2"),
               &B, fix, F(&RB), F(&RT));
    }
  }

  /* R-VER-4: RSIZ in a bundle of format 1.0 (the raw one: nothing else of 1.1). */
  for (int fix = 0; fix < 2; fix++) {
    bundle_copy(&B, &GM);
    B.minor = (unsigned)fix;
    emit_fix(INVALID(.id = "invalid/minor-0-rsiz", .error = "DCR_E_UNKNOWN_SECTION",
                     .stage = "structure", .flags = "resize,version,unknown-critical",
                     .text = "the raw resize bundle declared as format 1.0: RSIZ is a critical "
                             "section of a later minor version, unknown to the rules of 1.0",
                     .covers = "R-VER-4,R-SEC-6,§12"),
             &B, fix, F(&GB), F(&GT));
  }
  bundle_copy(&B, &GM);
  B.minor = 0;
  B.s[1].flags = 0;
  emit_bundle(INVALID(.id = "invalid/minor-0-rsiz-ancillary", .error = "DCR_E_BASE_MISMATCH",
                      .stage = "apply", .flags = "resize,version,wrong-base",
                      .text = "the raw resize bundle declared as format 1.0, its RSIZ section "
                              "not critical: under 1.0 an unknown ancillary section, skipped, "
                              "so raw is coded against zeros and its chunks' base_check (taken "
                              "over the resized base) fails on the true base",
                      .covers = "R-VER-4,R-SEC-7,R-RSZ-2"),
              &B, F(&GB), NONE);
  bundle_free(&B);
}

/* ------------------------------------------------------------------------ */
/* Checkpoint sets (SPEC.md §2.3, §6.6, R-SET-1 to R-SET-3)                  */

static set *SB, *ST; /* the model set: base and target */
static bundle SM;    /* its bundle */
static stable STab;  /* and its set table */

static const char cfg[] = "{\n  \"architectures\": [\"TinyLM\"],\n  \"hidden_size\": 8,\n"
                          "  \"num_hidden_layers\": 2,\n  \"step\": 1000,\n"
                          "  \"vocab_size\": 32\n}\n";

/* Lines tok000 to tok(n-1), then `extra`. */
static void vocab_text(buf *b, unsigned n, const char *extra) {
  b->n = 0;
  for (unsigned i = 0; i < n; i++) bprintf(b, "tok%03u\n", i);
  bput(b, extra, strlen(extra));
}

/* The model set. Base: config.json, generation_config.json, two shards
 * (embed.weight, layers.0.b, layers.0.w | layers.1.b, layers.1.w, lm_head.weight),
 * model.safetensors.index.json, tokenizer/vocab.txt. Target: config.json changed
 * in place, generation_config.json removed, layers.0.b removed, layers.1.b moved
 * to the first shard and changed, layers.1.norm added to the first shard, the index
 * rewritten, tokenizer/merges.txt added, tokenizer/vocab.txt and lm_head.weight
 * unchanged. Target members: 0 config.json, 1 model-00001-of-00002.safetensors,
 * 2 model-00002-of-00002.safetensors, 3 model.safetensors.index.json,
 * 4 tokenizer/merges.txt, 5 tokenizer/vocab.txt; base raw paths: 0 config.json,
 * 1 generation_config.json, 2 model.safetensors.index.json, 3 tokenizer/vocab.txt. */
static const char *const S1 = "model-00001-of-00002.safetensors";
static const char *const S2 = "model-00002-of-00002.safetensors";
static const char *const SIDX = "model.safetensors.index.json";

static void pair_model_set(void) {
  uint64_t d[2];
  buf v = {0};
  SB = set_new("ckpt/set-base");
  set_raw_text(SB, "config.json", cfg);
  set_raw_text(SB, "generation_config.json",
               "{\n  \"bos_token_id\": 1,\n  \"eos_token_id\": 2\n}\n");
  ckpt *a = set_st(SB, S1);
  a->meta = "{\"format\":\"pt\"}";
  fill_random(ck_add(a, "embed.weight", BF16, 2, dims2(d, 32, 8)));
  fill_random(ck_add(a, "layers.0.b", F32, 1, (dims1(d, 8), d)));
  fill_random(ck_add(a, "layers.0.w", BF16, 2, dims2(d, 8, 8)));
  ckpt *b = set_st(SB, S2);
  b->meta = "{\"format\":\"pt\"}";
  fill_random(ck_add(b, "layers.1.b", F32, 1, (dims1(d, 8), d)));
  fill_random(ck_add(b, "layers.1.w", BF16, 2, dims2(d, 8, 8)));
  fill_random(ck_add(b, "lm_head.weight", BF16, 2, dims2(d, 32, 8)));
  set_raw_text(SB, SIDX, "");
  set_reindex(SB, SIDX);
  vocab_text(&v, 32, "");
  set_raw(SB, "tokenizer/vocab.txt", v.p, v.n);
  set_finish(SB);

  ST = set_clone(SB, "ckpt/set-target");
  char *c = strdup(cfg);
  memcpy(strstr(c, "1000"), "1200", 4);
  set_raw_set(ST, "config.json", c, strlen(c));
  free(c);
  set_remove(ST, "generation_config.json");
  ck_remove(&set_get(ST, S1)->c, "layers.0.b");
  set_move(ST, "layers.1.b", S2, S1);
  mutate(mt(ST, S1, "embed.weight"), 500);
  mutate(mt(ST, S1, "layers.0.w"), 2000);
  mutate(mt(ST, S1, "layers.1.b"), 2500);
  fill_random(ck_add(&set_get(ST, S1)->c, "layers.1.norm", F32, 1, (dims1(d, 8), d)));
  mutate(mt(ST, S2, "layers.1.w"), 1000);
  set_reindex(ST, SIDX);
  set_raw_text(ST, "tokenizer/merges.txt", "#version: 0.2\nt o\nto k\n");
  set_finish(ST);
  bfree(&v);
}

/* Gives member i of the table the header text of its prefix with `from` replaced
 * by `to` (its header length and prefix_length follow). */
static void tm_subst(stable *T, size_t i, const char *from, const char *to) {
  prefix_subst(&T->m[i].prefix, from, to);
}

static void tb_insert(stable *T, const char *path) {
  size_t at = T->nb, n = strlen(path);
  while (at && name_cmp(T->bpath[at - 1].p, T->bpath[at - 1].n, path, n) > 0) at--;
  *(buf *)slot_insert(T->bpath, &T->nb, at, sizeof *T->bpath) = bmem(path, n);
}

static void set_table_vectors(void) {
  bundle B;
  stable T;
  char *longpath = xmalloc(4098);
  longpath[0] = 'c';
  memset(longpath + 1, 'x', 4096);
  longpath[4097] = '\0';
  /* Fields of the table, each set to one bad value (R-SET-1), then the members
   * against the entries (R-SET-2). Repaired: the table as built. */
  enum {
    C_COUNT, C_CUT_COUNT, C_CUT_MEMBER, C_CUT_BASE, C_PATH, C_PLEN, C_KIND, C_RESV, C_RAWPREFIX,
    C_DLEN, C_HDRLEN, C_SUBST, C_SWAP, C_BCOUNT, C_BPATH, C_BPLEN, C_BSWAP, C_BINSERT, C_TAIL
  };
  static const struct {
    const char *id, *text, *code, *flags, *covers;
    int how;
    size_t i;
    uint64_t value;
    const char *s, *t; /* a path (s, of length value if not 0; NULL: 4097 bytes), or a
                          substitution s -> t */
  } tv[] = {
      {"invalid/set-member-count-over-limit", "member_count 2^20 + 1 (max_tensors is 2^20)",
       "DCR_E_LIMIT", "set,limit,size-as-allocation", "R-SET-1,R-LIM-1", C_COUNT, 0,
       (1u << 20) + 1, NULL, NULL},
      {"invalid/set-member-count-beyond-table", "member_count 2^20 (at the limit): 21 bytes "
       "each, far more than the table holds, refused before any member is read",
       "DCR_E_TRUNCATED", "set,truncation,size-as-allocation", "R-SET-1", C_COUNT, 0, 1u << 20,
       NULL, NULL},
      {"invalid/set-table-cut-in-count", "a set table of 2 bytes (prefix_length 2): its "
       "member_count is cut", "DCR_E_TRUNCATED", "set,truncation", "R-SET-1", C_CUT_COUNT, 0, 0,
       NULL, NULL},
      {"invalid/set-table-cut-in-member-prefix", "the set table cut (and prefix_length with it) "
       "in the middle of the second shard's prefix", "DCR_E_TRUNCATED", "set,truncation",
       "R-SET-1", C_CUT_MEMBER, 2, 0, NULL, NULL},
      {"invalid/set-table-cut-in-base-raw-path", "the set table cut 3 bytes before its end, "
       "inside the last base raw path", "DCR_E_TRUNCATED", "set,truncation", "R-SET-1",
       C_CUT_BASE, 0, 3, NULL, NULL},
      {"invalid/set-path-length-beyond-table", "the last member's path_length is 4096 (within "
       "max_name_length): the path would run past the table", "DCR_E_TRUNCATED",
       "set,truncation,size-as-allocation", "R-SET-1", C_PLEN, 5, 4096, NULL, NULL},
      {"invalid/set-path-too-long", "the first member's path is 4097 bytes (max_name_length "
       "is 4096)", "DCR_E_LIMIT", "set,path,limit", "R-SET-1,R-LIM-1", C_PATH, 0, 0, NULL, NULL},
      {"invalid/set-path-empty", "the first member's path is empty (path_length 0)",
       "DCR_E_NAME", "set,path", "R-SET-1", C_PATH, 0, 0, "", NULL},
      {"invalid/set-path-dot-dot", "the first member's path is ../config.json",
       "DCR_E_NAME", "set,path", "R-SET-1", C_PATH, 0, 0, "../config.json", NULL},
      {"invalid/set-path-dot", "the first member's path is ./config.json", "DCR_E_NAME",
       "set,path", "R-SET-1", C_PATH, 0, 0, "./config.json", NULL},
      {"invalid/set-path-hidden-file", "the first member's path is .config.json: a component "
       "beginning with a dot", "DCR_E_NAME", "set,path,hidden-files", "R-SET-1", C_PATH, 0, 0,
       ".config.json", NULL},
      {"invalid/set-path-hidden-directory", "the first member's path is .cache/config.json",
       "DCR_E_NAME", "set,path,hidden-files", "R-SET-1", C_PATH, 0, 0, ".cache/config.json",
       NULL},
      {"invalid/set-path-leading-slash", "the first member's path is /config.json",
       "DCR_E_NAME", "set,path", "R-SET-1", C_PATH, 0, 0, "/config.json", NULL},
      {"invalid/set-path-trailing-slash", "the first member's path is config.json/",
       "DCR_E_NAME", "set,path", "R-SET-1", C_PATH, 0, 0, "config.json/", NULL},
      {"invalid/set-path-empty-component", "the first member's path is conf//ig.json",
       "DCR_E_NAME", "set,path", "R-SET-1", C_PATH, 0, 0, "conf//ig.json", NULL},
      {"invalid/set-path-backslash", "the first member's path is conf\\ig.json",
       "DCR_E_NAME", "set,path", "R-SET-1", C_PATH, 0, 0, "conf\\ig.json", NULL},
      {"invalid/set-path-not-utf8", "the first member's path has the byte 0xFF",
       "DCR_E_NAME", "set,path", "R-SET-1", C_PATH, 0, 0, "config\xff.json", NULL},
      {"invalid/set-path-overlong-utf8", "the first member's path has C0 AE, an overlong "
       "encoding of '.'", "DCR_E_NAME", "set,path", "R-SET-1", C_PATH, 0, 0,
       "config\xc0\xae" "json", NULL},
      {"invalid/set-path-surrogate", "the first member's path has ED A0 80, an encoded "
       "surrogate", "DCR_E_NAME", "set,path", "R-SET-1", C_PATH, 0, 0,
       "config\xed\xa0\x80.json", NULL},
      {"invalid/set-path-nul", "the first member's path has a byte 00", "DCR_E_NAME",
       "set,path", "R-SET-1", C_PATH, 0, 12, "config\0.json", NULL},
      {"invalid/set-path-unsorted", "the third member's path sorts before the second's",
       "DCR_E_NAME", "set,path", "R-SET-1", C_PATH, 2, 0, "model-00000-of-00002.safetensors",
       NULL},
      {"invalid/set-path-duplicate", "the third member's path is the second's",
       "DCR_E_NAME", "set,path,duplicate-name", "R-SET-1", C_PATH, 2, 0,
       "model-00001-of-00002.safetensors", NULL},
      {"invalid/set-path-file-and-directory", "tokenizer/merges.txt renamed "
       "model.safetensors.index.json/merges.txt: a member's path is another's followed by / "
       "(in order, and found once every path is read)", "DCR_E_NAME", "set,path", "R-SET-1",
       C_PATH, 4, 0, "model.safetensors.index.json/merges.txt", NULL},
      {"invalid/set-member-kind-2", "the index member's kind is 2", "DCR_E_MANIFEST",
       "set,malformed-field", "R-SET-1", C_KIND, 3, 2, NULL, NULL},
      {"invalid/set-member-kind-not-its-name", "the index member (a .json) has kind 1, "
       "safetensors: its name says raw, and the output would read back as another set",
       "DCR_E_MANIFEST", "set,malformed-field", "R-SET-1", C_KIND, 3, 1, NULL, NULL},
      {"invalid/set-shard-kind-raw", "the first shard (a .safetensors) has kind 0, raw",
       "DCR_E_MANIFEST", "set,malformed-field", "R-SET-1", C_KIND, 1, 0, NULL, NULL},
      {"invalid/set-member-reserved-byte", "the first shard's reserved byte is 0x01",
       "DCR_E_RESERVED", "set,reserved", "R-SET-1,R-RES-1", C_RESV, 1, 1, NULL, NULL},
      {"invalid/set-raw-member-prefix", "config.json, a raw member, has a prefix of 8 bytes",
       "DCR_E_MANIFEST", "set,raw,malformed-field", "R-SET-1", C_RAWPREFIX, 0, 0, NULL, NULL},
      {"invalid/set-member-size-over-limit", "config.json's data_length is 2^48 + 1 "
       "(max_file_size is 2^48)", "DCR_E_LIMIT", "set,limit,size-as-allocation",
       "R-SET-1,R-LIM-1", C_DLEN, 0, (1ull << 48) + 1, NULL, NULL},
      {"invalid/set-member-size-wraps", "the first shard's data_length is 2^64 - 8: "
       "prefix_length + data_length wraps", "DCR_E_LIMIT", "set,limit,size-as-allocation",
       "R-SET-1,R-LIM-1", C_DLEN, 1, UINT64_MAX - 7, NULL, NULL},
      {"invalid/set-member-header-over-limit", "the first shard's header length N is "
       "100000001 (max_header_size is 10^8)", "DCR_E_LIMIT", "set,checkpoint,limit",
       "R-SET-1,R-ST-1,R-LIM-1", C_HDRLEN, 1, 100000001, NULL, NULL},
      {"invalid/set-member-header-past-file", "the first shard's header length N is its "
       "prefix_length + data_length: 8 + N bytes do not fit in the member file",
       "DCR_E_CHECKPOINT", "set,checkpoint", "R-SET-1,R-ST-1", C_HDRLEN, 1, 0, NULL, NULL},
      {"invalid/set-member-header-not-json", "the first shard's header starts with [ instead "
       "of {", "DCR_E_CHECKPOINT", "set,checkpoint", "R-SET-1,R-ST-7", C_SUBST, 1, 0,
       "{\"__metadata__\"", "[\"__metadata__\""},
      {"invalid/set-member-header-dtype-unknown", "the first shard's header says layers.1.norm "
       "is F31", "DCR_E_DTYPE", "set,checkpoint", "R-SET-1,R-ST-3", C_SUBST, 1, 0,
       "\"layers.1.norm\":{\"dtype\":\"F32\"", "\"layers.1.norm\":{\"dtype\":\"F31\""},
      {"invalid/set-member-header-packed-bits", "the first shard's header says layers.1.norm "
       "(32 bytes) is F4 [15]: 60 bits are not whole bytes", "DCR_E_SHAPE",
       "set,checkpoint,packed,byte-length", "R-SET-1,R-DT-2,R-ST-4", C_SUBST, 1, 0,
       "\"layers.1.norm\":{\"dtype\":\"F32\",\"shape\":[8]",
       "\"layers.1.norm\":{\"dtype\":\"F4\",\"shape\":[15]"},
      {"invalid/set-member-header-shape", "the first shard's header says layers.1.norm (32 "
       "bytes) is F32 [9]", "DCR_E_SHAPE", "set,checkpoint,byte-length", "R-SET-1,R-ST-4",
       C_SUBST, 1, 0, "\"layers.1.norm\":{\"dtype\":\"F32\",\"shape\":[8]",
       "\"layers.1.norm\":{\"dtype\":\"F32\",\"shape\":[9]"},
      {"invalid/set-member-layout-overlap", "in the second shard's header, lm_head.weight "
       "starts 64 bytes early, over layers.1.w", "DCR_E_LAYOUT", "set,checkpoint",
       "R-SET-1,R-ST-6", C_SUBST, 2, 0, "\"data_offsets\":[128,640]",
       "\"data_offsets\":[64,576]"},
      {"invalid/set-member-layout-gap", "in the second shard's header, lm_head.weight starts "
       "4 bytes late: a gap before it, and it ends past the member's data region",
       "DCR_E_LAYOUT", "set,checkpoint", "R-SET-1,R-ST-6", C_SUBST, 2, 0,
       "\"data_offsets\":[128,640]", "\"data_offsets\":[132,644]"},
      {"invalid/set-base-raw-count-over-limit", "base_raw_count 2^20 + 1", "DCR_E_LIMIT",
       "set,limit,size-as-allocation", "R-SET-1,R-LIM-1", C_BCOUNT, 0, (1u << 20) + 1, NULL,
       NULL},
      {"invalid/set-base-raw-count-beyond-table", "base_raw_count 2^20: 3 bytes each, more "
       "than the table holds", "DCR_E_TRUNCATED", "set,truncation,size-as-allocation",
       "R-SET-1", C_BCOUNT, 0, 1u << 20, NULL, NULL},
      {"invalid/set-base-raw-path-length-beyond-table", "the last base raw path's path_length "
       "is 4000", "DCR_E_TRUNCATED", "set,truncation,size-as-allocation", "R-SET-1", C_BPLEN, 3,
       4000, NULL, NULL},
      {"invalid/set-base-raw-path-too-long", "the first base raw path is 4097 bytes",
       "DCR_E_LIMIT", "set,path,limit", "R-SET-1,R-LIM-1", C_BPATH, 0, 0, NULL, NULL},
      {"invalid/set-base-raw-path-empty", "the first base raw path is empty", "DCR_E_NAME",
       "set,path", "R-SET-1", C_BPATH, 0, 0, "", NULL},
      {"invalid/set-base-raw-path-dot-dot", "the first base raw path is ../config.json",
       "DCR_E_NAME", "set,path", "R-SET-1", C_BPATH, 0, 0, "../config.json", NULL},
      {"invalid/set-base-raw-path-unsorted", "the second and third base raw paths swapped",
       "DCR_E_NAME", "set,path", "R-SET-1", C_BSWAP, 1, 0, NULL, NULL},
      {"invalid/set-base-raw-path-duplicate", "the second base raw path is config.json, the "
       "first's", "DCR_E_NAME", "set,path,duplicate-name", "R-SET-1", C_BPATH, 1, 0,
       "config.json", NULL},
      {"invalid/set-base-raw-path-safetensors", "the first base raw path is "
       "a.safetensors: a name that §2.3 makes a safetensors member, never a raw one",
       "DCR_E_MANIFEST", "set,path", "R-SET-1", C_BPATH, 0, 0, "a.safetensors", NULL},
      {"invalid/set-base-raw-path-file-and-directory", "the base raw path "
       "generation_config.json renamed config.json/generation_config.json", "DCR_E_NAME",
       "set,path", "R-SET-1", C_BPATH, 1, 0, "config.json/generation_config.json", NULL},
      {"invalid/set-table-trailing-bytes", "2 bytes after the last base raw path (prefix_length "
       "counts them)", "DCR_E_MANIFEST", "set,malformed-field", "R-SET-1", C_TAIL, 0, 2, NULL,
       NULL},
      {"invalid/set-data-length-sum", "tokenizer/vocab.txt's data_length one more than its "
       "file: the members' data_lengths add up to the manifest's data_length + 1",
       "DCR_E_MANIFEST", "set,malformed-field", "R-SET-1", C_DLEN, 5, 0, NULL, NULL},
      {"invalid/set-tensor-not-an-entry", "the first shard's header names layers.0.x (the "
       "entry is layers.0.w)", "DCR_E_MANIFEST", "set,checkpoint", "R-SET-2", C_SUBST, 1, 0,
       "\"layers.0.w\"", "\"layers.0.x\""},
      {"invalid/set-tensor-wrong-offset", "the first shard's header swaps the data_offsets of "
       "layers.1.b and layers.1.norm (32 bytes each): the member still tiles, but each is at "
       "the other's offset", "DCR_E_MANIFEST", "set,checkpoint,layout", "R-SET-2", C_SWAP, 1, 0,
       "\"layers.1.b\"", "\"layers.1.norm\""},
      {"invalid/set-tensor-wrong-shape", "the first shard's header says layers.0.w is BF16 [64] "
       "(the entry [8, 8], the same bytes)", "DCR_E_MANIFEST", "set,checkpoint", "R-SET-2",
       C_SUBST, 1, 0, "\"layers.0.w\":{\"dtype\":\"BF16\",\"shape\":[8,8]",
       "\"layers.0.w\":{\"dtype\":\"BF16\",\"shape\":[64]"},
      {"invalid/set-tensor-wrong-dtype", "the first shard's header says layers.1.norm is I32 "
       "(the entry F32)", "DCR_E_MANIFEST", "set,checkpoint", "R-SET-2", C_SUBST, 1, 0,
       "\"layers.1.norm\":{\"dtype\":\"F32\"", "\"layers.1.norm\":{\"dtype\":\"I32\""},
      {"invalid/set-base-raw-path-no-base-side", "the base raw paths also name "
       "tokenizer/merges.txt, an entry the base does not have", "DCR_E_MANIFEST",
       "set,malformed-field", "R-SET-2", C_BINSERT, 0, 0, "tokenizer/merges.txt", NULL},
      {"invalid/set-base-raw-path-not-u8", "the base raw paths also name layers.0.b, an F32 "
       "base entry", "DCR_E_MANIFEST", "set,malformed-field", "R-SET-2", C_BINSERT, 0, 0,
       "layers.0.b", NULL},
      {"invalid/set-base-raw-path-not-an-entry", "the base raw paths also name readme.md, which "
       "no entry is", "DCR_E_MANIFEST", "set,malformed-field", "R-SET-2", C_BINSERT, 0, 0,
       "readme.md", NULL},
  };
  for (size_t i = 0; i < sizeof tv / sizeof *tv; i++)
    for (int fix = 0; fix < 2; fix++) {
      bundle_copy(&B, &SM);
      stable_copy(&T, &STab);
      size_t k = tv[i].i;
      if (!fix) switch (tv[i].how) {
          case C_COUNT: T.count_set = 1, T.count_field = tv[i].value; break;
          case C_CUT_COUNT: T.cut_set = 1, T.cut = 2; break;
          case C_CUT_MEMBER:
            T.cut_set = 1;
            T.cut = stable_prefix_at(&T, k) + T.m[k].prefix.n / 2;
            if (T.cut < 4 + 21 * T.n) die("%s: cut too early", tv[i].id);
            break;
          case C_CUT_BASE: {
            buf t = {0};
            stable_bytes(&T, &t);
            T.cut_set = 1, T.cut = t.n - (size_t)tv[i].value;
            bfree(&t);
            break;
          }
          case C_PATH:
          case C_BPATH: {
            buf *p = tv[i].how == C_PATH ? &T.m[k].path : &T.bpath[k];
            if (!tv[i].s) bset(p, longpath, 4097);
            else bset(p, tv[i].s, tv[i].value ? tv[i].value : strlen(tv[i].s));
            break;
          }
          case C_PLEN: T.m[k].plen_set = 1, T.m[k].plen_field = tv[i].value; break;
          case C_KIND: T.m[k].kind = (uint8_t)tv[i].value; break;
          case C_RESV: T.m[k].resv = (uint8_t)tv[i].value; break;
          case C_RAWPREFIX: bset(&T.m[k].prefix, "12345678", 8); break;
          case C_DLEN: T.m[k].dlen = tv[i].value ? tv[i].value : T.m[k].dlen + 1; break;
          case C_HDRLEN:
            put64(T.m[k].prefix.p,
                  tv[i].value ? tv[i].value : T.m[k].prefix.n + T.m[k].dlen);
            break;
          case C_SUBST: tm_subst(&T, k, tv[i].s, tv[i].t); break;
          case C_SWAP: {
            /* "name":{...,"data_offsets":[x,y]} of two tensors: swap [x,y] */
            buf *p = &T.m[k].prefix;
            char *json = xmalloc(p->n - 8 + 1);
            memcpy(json, p->p + 8, p->n - 8);
            char *a = strstr(strstr(json, tv[i].s), "\"data_offsets\":[");
            char *b = strstr(strstr(json, tv[i].t), "\"data_offsets\":[");
            size_t la = (size_t)(strchr(a, ']') - a), lb = (size_t)(strchr(b, ']') - b);
            if (la != lb) die("%s: offsets of other lengths", tv[i].id);
            char tmp[64];
            memcpy(tmp, a, la);
            memcpy(a, b, la);
            memcpy(b, tmp, la);
            text_prefix(p, json, p->n - 8, 0);
            free(json);
            break;
          }
          case C_BCOUNT: T.bcount_set = 1, T.bcount_field = tv[i].value; break;
          case C_BPLEN: T.bplen_at = (int)k + 1, T.bplen_field = tv[i].value; break;
          case C_BSWAP: {
            buf t = T.bpath[k];
            T.bpath[k] = T.bpath[k + 1];
            T.bpath[k + 1] = t;
            break;
          }
          case C_BINSERT: tb_insert(&T, tv[i].s); break;
          case C_TAIL: bfill(&T.tail, 0, (size_t)tv[i].value); break;
          default: die("how");
        }
      set_remanifest(&B, &T);
      stable_free(&T);
      emit_fix(INVALID(.id = tv[i].id, .error = tv[i].code, .stage = "structure",
                       .flags = tv[i].flags, .text = tv[i].text, .covers = tv[i].covers),
               &B, fix, D(SB), D(ST));
    }
  free(longpath);
}

/* Set vectors that change the entries, the identities or the version. */
static void set_entry_vectors(void) {
  bundle B;
  stable T;
  /* R-SET-2: an entry named by two members. The targets cannot be directories
   * (§2.3 makes such a directory DCR_E_NAME): structure-only, from sets held here
   * only; repaired, the second name is gone and the target is written. */
  for (int kind = 0; kind < 2; kind++)
    for (int fix = 0; fix < 2; fix++) {
      uint64_t d[1] = {0};
      set *t = set_clone(ST, kind ? (fix ? "ckpt/set-target-zz-once" : "ckpt/set-target-zz-twice")
                                  : (fix ? "ckpt/set-target-tensor-only"
                                         : "ckpt/set-target-tensor-and-raw"));
      if (kind) {
        /* a zero-length tensor at the end of the first shard and (its layout
         * reversed) at the start of the second: one offset */
        ck_add(&set_get(t, S1)->c, "zz.empty", U8, 1, d);
        set_get(t, S2)->c.reverse = 1;
        if (!fix) ck_add(&set_get(t, S2)->c, "zz.empty", U8, 1, d);
      } else {
        /* a zero-length tensor at the end of the first shard, and an empty raw
         * member of the same name right after that shard */
        ck_add(&set_get(t, S1)->c, "model-00001-of-00002.txt", U8, 1, d);
        if (!fix) set_raw(t, "model-00001-of-00002.txt", NULL, 0);
      }
      set_finish(t);
      if (t->dups != (size_t)!fix) die("%s: %zu names twice", t->dir, t->dups);
      build_ex(&B, &SB->view, &t->view, 4096, pol_default, NULL, NULL);
      stable_from(&T, SB, t);
      set_remanifest(&B, &T);
      stable_free(&T);
      emit_fix(kind ? INVALID(.id = "invalid/set-entry-named-by-two-shards",
                              .error = "DCR_E_MANIFEST", .stage = "structure",
                              .flags = "set,duplicate-name,zero-length,structure-only",
                              .text = "both shards name the zero-length tensor zz.empty, at the "
                                      "same offset (the end of the first, the start of the "
                                      "second, whose header lists its tensors in reverse): one "
                                      "entry, named by two members",
                              .covers = "R-SET-2")
                     : INVALID(.id = "invalid/set-entry-named-by-tensor-and-raw",
                               .error = "DCR_E_MANIFEST", .stage = "structure",
                               .flags = "set,duplicate-name,zero-length,raw,structure-only",
                               .text = "the first shard ends with a zero-length U8 tensor named "
                                       "model-00001-of-00002.txt, and an empty raw member of "
                                       "that path follows it: one entry, named by two members",
                               .covers = "R-SET-2"),
               &B, fix, D(SB), D(t));
    }
  /* An entry no member names: zero-length, so that the layout stays right. */
  for (int fix = 0; fix < 2; fix++) {
    bundle_copy(&B, &SM);
    if (!fix) {
      manifest *m = &B.man;
      if (m->n == MAXE) die("too many entries");
      mentry *e = &m->e[m->n++];
      memset(e, 0, sizeof *e);
      e->name = (uint8_t *)strdup("zz.unclaimed");
      e->nlen = strlen("zz.unclaimed");
      e->presence = 2;
      uint64_t d[1] = {0};
      set_desc(&e->t, U8, 1, d, 0);
      tensor_hash(NULL, 0, e->t.hash);
    }
    set_remanifest(&B, &STab);
    emit_fix(INVALID(.id = "invalid/set-entry-unclaimed", .error = "DCR_E_MANIFEST",
                     .stage = "structure", .flags = "set,zero-length,malformed-field",
                     .text = "a zero-length target entry zz.unclaimed at offset 0 that no member "
                             "names",
                     .covers = "R-SET-2"),
             &B, fix, D(SB), D(ST));
  }
  /* A raw member's entry that is not U8: its bytes and layout unchanged. */
  for (int fix = 0; fix < 2; fix++) {
    bundle_copy(&B, &SM);
    if (!fix) B.man.e[entry_index(&B, "config.json")].t.dtype = I8;
    set_remanifest(&B, &STab);
    emit_fix(INVALID(.id = "invalid/set-raw-member-entry-i8", .error = "DCR_E_MANIFEST",
                     .stage = "structure", .flags = "set,raw,malformed-field",
                     .text = "the target entry of the raw member config.json is I8, not U8",
                     .covers = "R-SET-2"),
             &B, fix, D(SB), D(ST));
  }
  /* R-SET-3: state ids over the wrong tensors. */
  static const struct {
    const char *id, *text;
    uint8_t clear, add; /* excl bits cleared on every entry; set on embed.weight */
  } si[] = {
      {"invalid/set-state-id-includes-raw", "IDEN's state ids are computed over every entry, "
       "the raw members' too (as for a file)", 3, 0},
      {"invalid/set-state-id-target-includes-raw", "IDEN's base state id is right; its target "
       "state id is computed over the target's raw members too", 2, 0},
      {"invalid/set-state-id-base-excludes-tensor", "IDEN's base state id leaves out "
       "embed.weight, a safetensors tensor, as if it were a raw member", 0, 1},
  };
  for (size_t i = 0; i < sizeof si / sizeof *si; i++)
    for (int fix = 0; fix < 2; fix++) {
      bundle_copy(&B, &SM);
      if (!fix) {
        for (size_t k = 0; k < B.man.n; k++) B.man.e[k].excl &= (uint8_t)~si[i].clear;
        B.man.e[entry_index(&B, "embed.weight")].excl |= si[i].add;
      }
      rebuild_iden(&B);
      emit_fix(INVALID(.id = si[i].id, .error = "DCR_E_CHECKSUM", .stage = "structure",
                       .flags = "set,raw-binding", .text = si[i].text,
                       .covers = "R-SET-3,R-IDN-1"),
               &B, fix, D(SB), D(ST));
    }
  /* R-VER-4 and R-MAN-3: the kind. */
  for (int fix = 0; fix < 2; fix++) {
    bundle_copy(&B, &SM);
    B.minor = (unsigned)fix;
    emit_fix(INVALID(.id = "invalid/minor-0-set", .error = "DCR_E_MANIFEST", .stage = "structure",
                     .flags = "set,version",
                     .text = "the set bundle declared as format 1.0: kind 3 is unknown to the "
                             "rules of 1.0",
                     .covers = "R-VER-4,R-MAN-3"),
             &B, fix, D(SB), D(ST));
  }
  for (int fix = 0; fix < 2; fix++) {
    bundle_copy(&B, &SM);
    B.man.kind = fix ? KIND_SET : 4;
    set_remanifest(&B, &STab);
    emit_fix(INVALID(.id = "invalid/manifest-kind-4", .error = "DCR_E_MANIFEST",
                     .stage = "structure", .flags = "set,malformed-field",
                     .text = "the set bundle with kind 4: no kind 4 in format 1.1",
                     .covers = "R-MAN-3"),
             &B, fix, D(SB), D(ST));
  }
  /* The base raw paths leave out a raw member of the base: a valid bundle, whose
   * base is not this directory (its raw members are not the base raw paths, and
   * its state id leaves generation_config.json out). */
  for (int fix = 0; fix < 2; fix++) {
    bundle_copy(&B, &SM);
    stable_copy(&T, &STab);
    if (!fix) {
      bfree(&T.bpath[1]);
      memmove(T.bpath + 1, T.bpath + 2, (T.nb - 2) * sizeof *T.bpath);
      T.nb--;
    }
    set_remanifest(&B, &T);
    stable_free(&T);
    emit_fix(INVALID(.id = "invalid/set-apply-base-raw-paths-incomplete",
                     .error = "DCR_E_BASE_MISMATCH", .stage = "apply",
                     .flags = "set,raw-binding,wrong-base",
                     .text = "the set table's base raw paths leave out generation_config.json "
                             "(so its base entry counts in the base state id, as a tensor): "
                             "applied to the model base, whose raw members are not the base "
                             "raw paths",
                     .covers = "R-APL-1,R-APL-3,R-SET-3,R-APL-4"),
             &B, fix, D(SB), D(ST));
  }
}

/* Sets that differ from the model base or target in one thing. */
static void set_input_vectors(void) {
  bundle B;
  uint64_t d[1];
  set *x;
  /* valid */
  bundle_copy(&B, &SM);
  emit_bundle(VALID(.id = "valid/set-apply-to-own-target", .flags = "set,apply-to-target",
                    .text = "the set bundle applied to its own target: the input is the target "
                            "(its state id, and its raw members are the table's with IDEN's "
                            "hashes), no chunk is applied, the output is the target",
                    .covers = "R-APL-5,§10.2,R-SET-3"),
              &B, D(ST), D(ST));
  x = set_clone(ST, "ckpt/set-target-resharded");
  set_move(x, "layers.1.b", S1, S2);
  set_finish(x);
  emit_bundle(VALID(.id = "valid/set-apply-to-resharded-target",
                    .flags = "set,apply-to-target,layout",
                    .text = "the set bundle applied to its target with layers.1.b in the second "
                            "shard (the index file as the target's): the same tensors, so the "
                            "target by its state id; the output is the target, laid out as the "
                            "set table says",
                    .covers = "R-APL-5,§10.2,§2.3"),
              &B, D(x), D(ST));
  x = set_clone(SB, "ckpt/set-base-resharded");
  set_move(x, "layers.0.w", S1, S2);
  set_finish(x);
  emit_bundle(VALID(.id = "valid/set-base-resharded", .flags = "set,layout",
                    .text = "the set bundle applied to its base with layers.0.w in the second "
                            "shard: which shard holds a tensor is not compared (chunks are "
                            "applied to the tensor wherever it lies)",
                    .covers = "R-APL-1,§6.3,§2.3"),
              &B, D(x), D(ST));
  {
    set *hb = set_clone(SB, "ckpt/set-base-hidden"), *ht = set_clone(ST, "ckpt/set-target-hidden");
    /* (no .git* names: git would read them as its own files) */
    set_hidden(hb, ".cache/huggingface/download/config.json.metadata",
               "0123456789abcdef0123456789abcdef01234567\n\"5d41402abc4b2a76b9719d911017c592\"\n");
    set_hidden(hb, ".note", "not a member\n");
    set_hidden(ht, ".cache/huggingface/download/model.safetensors.index.json.incomplete",
               "{\n  \"metadata\"");
    set_hidden(ht, "tokenizer/.vocab.txt.part", "tok000\ntok0");
    set_finish(hb);
    set_finish(ht);
    emit_bundle(VALID(.id = "valid/set-hidden-files", .flags = "set,hidden-files",
                      .text = "the set bundle applied to its base, each with hidden files and "
                              "directories beside the members (.note, .cache/, "
                              "tokenizer/.vocab.txt.part): they are not members, the output has "
                              "none of them",
                      .covers = "§2.3,R-APL-1,R-TGT-1"),
                &B, D(hb), D(ht));
  }
  B.minor = 3;
  emit_bundle(VALID(.id = "valid/set-minor-future", .flags = "set,version",
                    .text = "the set bundle declared as format 1.3: a later minor version reads "
                            "as 1.1 does",
                    .covers = "R-HDR-6,R-VER-1"),
              &B, D(SB), D(ST));
  bundle_free(&B);

  /* Bases that are not the base (R-APL-1, R-APL-3; for a set, §2.3, §6.3). */
  enum {
    X_RM_VOCAB, X_VOCAB, X_CONFIG, X_CONFIG_TENSOR, X_README, X_TENSOR, X_RM_SHARD, X_TWICE,
    X_LIKE_RAW, X_HEADER, X_PACKED, X_TRAILING
  };
  static const struct {
    const char *id, *dir, *text, *code, *flags, *covers;
    int how;
  } xb[] = {
      {"invalid/set-apply-base-missing-raw-member", "ckpt/set-base-no-vocab", "the base without "
       "tokenizer/vocab.txt (a raw member the bundle does not change)", "DCR_E_BASE_MISMATCH",
       "set,raw-binding,wrong-base", "R-APL-1,R-APL-4", X_RM_VOCAB},
      {"invalid/set-apply-base-raw-member-differs", "ckpt/set-base-vocab-differs", "the base "
       "with one byte of tokenizer/vocab.txt changed: no chunk covers it and raw members are not "
       "in the state id, only its tensor hash in IDEN tells", "DCR_E_BASE_MISMATCH",
       "set,raw-binding,wrong-base", "R-APL-3,R-SET-3,R-APL-4", X_VOCAB},
      {"invalid/set-apply-base-raw-member-chunk-differs", "ckpt/set-base-config-differs",
       "the base with one byte of config.json changed, in the chunk the bundle changes",
       "DCR_E_BASE_MISMATCH", "set,raw-binding,wrong-base", "R-APL-2,R-APL-3,R-APL-4",
       X_CONFIG},
      {"invalid/set-apply-base-raw-path-is-tensor", "ckpt/set-base-config-as-tensor", "the "
       "base without config.json, its bytes a U8 tensor named config.json in the first shard: "
       "the same tensor, but not a raw member (and in the state id)", "DCR_E_BASE_MISMATCH",
       "set,raw-binding,wrong-base", "R-APL-1,R-SET-3,R-APL-4", X_CONFIG_TENSOR},
      {"invalid/set-apply-base-extra-raw-member", "ckpt/set-base-extra-readme", "the base with "
       "one more raw member, README.md", "DCR_E_BASE_MISMATCH", "set,raw-binding,wrong-base",
       "R-APL-1,R-APL-4", X_README},
      {"invalid/set-apply-base-tensor-differs", "ckpt/set-base-lm-head-differs", "the base with "
       "one byte of lm_head.weight changed (a tensor with no changed chunk)",
       "DCR_E_BASE_MISMATCH", "set,wrong-base", "R-APL-3,R-APL-4", X_TENSOR},
      {"invalid/set-apply-base-missing-shard", "ckpt/set-base-no-shard-2", "the base without its "
       "second shard", "DCR_E_BASE_MISMATCH", "set,wrong-base", "R-APL-1,R-APL-4", X_RM_SHARD},
      {"invalid/set-apply-base-name-in-two-shards", "ckpt/set-base-name-twice", "the base's "
       "second shard also holds layers.0.w: a name two members give", "DCR_E_NAME",
       "set,duplicate-name,checkpoint", "§2.3,R-APL-4", X_TWICE},
      {"invalid/set-apply-base-tensor-named-like-raw", "ckpt/set-base-tensor-like-raw", "the "
       "base's first shard also holds a tensor named config.json, beside the raw member "
       "config.json", "DCR_E_NAME", "set,duplicate-name,checkpoint", "§2.3,R-APL-4", X_LIKE_RAW},
      {"invalid/set-apply-base-header-past-file", "ckpt/set-base-bad-header", "the base's first "
       "shard's header length runs past the end of its file", "DCR_E_CHECKPOINT",
       "set,checkpoint", "R-ST-1,R-APL-4", X_HEADER},
      {"invalid/set-apply-base-packed-shape", "ckpt/set-base-packed-shape", "the base's second "
       "shard's header says layers.1.b (32 bytes) is F4 [63]: 252 bits are not whole bytes",
       "DCR_E_SHAPE", "set,checkpoint,packed", "R-DT-2,R-ST-4,R-APL-4", X_PACKED},
      {"invalid/set-apply-base-trailing-byte", "ckpt/set-base-trailing-byte", "the base's second "
       "shard has a byte after its last tensor", "DCR_E_LAYOUT", "set,checkpoint",
       "R-ST-6,R-APL-4", X_TRAILING},
  };
  for (size_t i = 0; i < sizeof xb / sizeof *xb; i++) {
    x = set_clone(SB, xb[i].dir);
    switch (xb[i].how) {
      case X_RM_VOCAB: set_remove(x, "tokenizer/vocab.txt"); break;
      case X_VOCAB: set_get(x, "tokenizer/vocab.txt")->c.t[0].data[40] ^= 0x20; break;
      case X_CONFIG: set_get(x, "config.json")->c.t[0].data[20] ^= 0x20; break;
      case X_CONFIG_TENSOR: {
        const tensor *t = &set_get(x, "config.json")->c.t[0];
        tensor *u = ck_add(&set_get(x, S1)->c, "config.json", U8, 1, t->dims);
        memcpy(u->data, t->data, (size_t)t->len);
        set_remove(x, "config.json");
        break;
      }
      case X_README: set_raw_text(x, "README.md", "# TinyLM\n"); break;
      case X_TENSOR: mt(x, S2, "lm_head.weight")->data[100] ^= 1; break;
      case X_RM_SHARD: set_remove(x, S2); break;
      case X_TWICE: {
        const tensor *t = mt(x, S1, "layers.0.w");
        memcpy(ck_add(&set_get(x, S2)->c, "layers.0.w", t->dtype, t->rank, t->dims)->data,
               t->data, (size_t)t->len);
        break;
      }
      case X_LIKE_RAW:
        fill_random(ck_add(&set_get(x, S1)->c, "config.json", U8, 1, (dims1(d, 4), d)));
        break;
      default: break;
    }
    set_finish(x);
    if (xb[i].how == X_HEADER) {
      ckpt *s1 = &set_get(x, S1)->c;
      put64(s1->bytes.p, s1->bytes.n);
    } else if (xb[i].how == X_PACKED) {
      ck_subst(&set_get(x, S2)->c, "\"layers.1.b\":{\"dtype\":\"F32\",\"shape\":[8]",
               "\"layers.1.b\":{\"dtype\":\"F4\",\"shape\":[63]");
    } else if (xb[i].how == X_TRAILING) {
      bu8(&set_get(x, S2)->c.bytes, 0);
    }
    bundle_copy(&B, &SM);
    emit_bundle(INVALID(.id = xb[i].id, .error = xb[i].code, .stage = "apply",
                        .flags = xb[i].flags, .text = xb[i].text, .covers = xb[i].covers),
                &B, D(x), NONE);
    bundle_free(&B);
  }

  /* Targets that are not the target (R-TGT-1). */
  enum { Y_VOCAB, Y_README, Y_NO_MERGES, Y_RESHARDED, Y_PADDING, Y_TRAILING };
  static const struct {
    const char *id, *dir, *text, *code, *flags, *covers;
    int how;
  } yt[] = {
      {"invalid/set-target-raw-member-differs", "ckpt/set-target-vocab-differs", "the target "
       "with one byte of tokenizer/vocab.txt changed", "DCR_E_TARGET_MISMATCH",
       "set,raw-binding,target-mismatch", "R-TGT-1,R-SET-3", Y_VOCAB},
      {"invalid/set-target-extra-member", "ckpt/set-target-extra-readme", "the target with one "
       "more member, README.md", "DCR_E_TARGET_MISMATCH", "set,target-mismatch", "R-TGT-1",
       Y_README},
      {"invalid/set-target-missing-member", "ckpt/set-target-no-merges", "the target without "
       "tokenizer/merges.txt", "DCR_E_TARGET_MISMATCH", "set,target-mismatch", "R-TGT-1",
       Y_NO_MERGES},
      {"invalid/set-target-resharded", "ckpt/set-target-resharded", "the target with layers.1.b "
       "in the second shard: the same tensors, not the set table", "DCR_E_TARGET_MISMATCH",
       "set,target-mismatch,layout", "R-TGT-1,§6.6", Y_RESHARDED},
      {"invalid/set-target-header-padding", "ckpt/set-target-padded", "the target's first "
       "shard with 8 more spaces of header padding: the same tensors, another prefix",
       "DCR_E_TARGET_MISMATCH", "set,target-mismatch", "R-TGT-1,§6.6", Y_PADDING},
      {"invalid/set-target-trailing-byte", "ckpt/set-target-trailing-byte", "the target's "
       "second shard has a byte after its last tensor: not valid safetensors, found before it "
       "is compared", "DCR_E_LAYOUT", "set,checkpoint,target-mismatch", "R-ST-6,R-TGT-1",
       Y_TRAILING},
  };
  set *resharded = NULL;
  for (size_t i = 0; i < sizeof yt / sizeof *yt; i++) {
    if (yt[i].how == Y_RESHARDED) {
      /* the same directory as valid/set-apply-to-resharded-target's input */
      for (size_t k = 0; k < nsets && !resharded; k++)
        if (!strcmp(all_sets[k]->dir, yt[i].dir)) resharded = all_sets[k];
      x = resharded;
    } else {
      x = set_clone(ST, yt[i].dir);
      switch (yt[i].how) {
        case Y_VOCAB: set_get(x, "tokenizer/vocab.txt")->c.t[0].data[7] ^= 0x01; break;
        case Y_README: set_raw_text(x, "README.md", "# TinyLM\n"); break;
        case Y_NO_MERGES: set_remove(x, "tokenizer/merges.txt"); break;
        case Y_PADDING: set_get(x, S1)->c.extra_pad = 8; break;
        default: break;
      }
      set_finish(x);
      if (yt[i].how == Y_TRAILING) bu8(&set_get(x, S2)->c.bytes, 0);
    }
    bundle_copy(&B, &SM);
    emit_bundle(INVALID(.id = yt[i].id, .error = yt[i].code, .stage = "target",
                        .flags = yt[i].flags, .text = yt[i].text, .covers = yt[i].covers),
                &B, D(SB), D(x));
    bundle_free(&B);
  }
  /* Inputs that are nearly the target (§10.1 step 4): for a set, the target's raw
   * members must be the table's, with IDEN's hashes; its state id cannot tell. */
  static const struct {
    const char *id, *dir, *text;
  } nt[] = {
      {"invalid/set-apply-near-target-raw-member-differs", "ckpt/set-target-vocab-differs",
       "the set bundle applied to its target with one byte of tokenizer/vocab.txt changed: "
       "the target's state id (raw members are not in it), but a raw member's hash is not "
       "IDEN's: neither base nor target"},
      {"invalid/set-apply-near-target-extra-member", "ckpt/set-target-extra-readme",
       "the set bundle applied to its target with one more raw member, README.md: its tensors "
       "are not the target entries"},
  };
  for (size_t i = 0; i < sizeof nt / sizeof *nt; i++) {
    x = NULL;
    for (size_t k = 0; k < nsets && !x; k++)
      if (!strcmp(all_sets[k]->dir, nt[i].dir)) x = all_sets[k];
    if (!x) die("no set %s", nt[i].dir);
    bundle_copy(&B, &SM);
    emit_bundle(INVALID(.id = nt[i].id, .error = "DCR_E_BASE_MISMATCH", .stage = "apply",
                        .flags = "set,raw-binding,wrong-base,apply-to-target", .text = nt[i].text,
                        .covers = "R-APL-5,§10.2,R-SET-3,R-APL-4"),
                &B, D(x), NONE);
    bundle_free(&B);
  }
}

/* The model set's bundle and the valid vectors of sets. */
static void set_valid_vectors(void) {
  bundle B;
  stable T;
  unsigned k = 0;
  pair_model_set();
  build_set(&SM, &STab, SB, ST, 4096, pol_small, NULL, NULL);
  SM.mani_comp = 1;
  rebuild_mani(&SM);
  if (SM.minor != 1 || SM.man.kind != KIND_SET) die("set: minor %u kind %u", SM.minor, SM.man.kind);
  bundle_copy(&B, &SM);
  emit_bundle(VALID(.id = "valid/set-model", .flags = "set,raw,compression",
                    .text = "a sharded model directory to the next: config.json changed in "
                            "place (a raw member, delta-coded), generation_config.json removed, "
                            "two shards with __metadata__, a tensor removed, one added and one "
                            "moved from the second shard to the first (coded against its base "
                            "bytes in the other shard), the index file rewritten (another "
                            "length: coded against zeros), tokenizer/merges.txt added in a "
                            "subdirectory, tokenizer/vocab.txt and lm_head.weight unchanged; "
                            "MANI (with the set table) and chunks of 256 elements or more stored "
                            "as zstd. The set vectors are made from this bundle",
                    .covers = "§2.3,§6.6,R-SET-1,R-SET-2,R-SET-3,R-MAN-3,R-APL-1,R-APL-2,"
                              "R-APL-4,R-TGT-1"),
              &B, D(SB), D(ST));
  bundle_free(&B);
  build_set(&B, &T, SB, ST, 4096, pol_cycle12, &k, NULL);
  stable_free(&T);
  emit_bundle(VALID(.id = "valid/set-model-encodings", .flags = "set,encoding,compression",
                    .text = "the model set with chunks in every (encoding, compression) pair in "
                            "turn, MANI stored: the set table as it stands",
                    .covers = "§6.6,R-SET-1,§9.1"),
              &B, D(SB), D(ST));
  bundle_free(&B);
  build_set(&B, &T, ST, ST, 4096, pol_default, NULL, NULL);
  stable_free(&T);
  emit_bundle(VALID(.id = "valid/set-no-change", .flags = "set",
                    .text = "a set to itself: no chunks; the base raw paths are the target's "
                            "raw members",
                    .covers = "§6.6,R-SET-2"),
              &B, D(ST), D(ST));
  bundle_free(&B);

  /* Shards renamed and regrouped: 2 shards to 3, packed tensors among them. */
  {
    uint64_t d[2];
    set *b = set_new("ckpt/set-reshard-base");
    set_raw_text(b, "config.json", cfg);
    ckpt *s1 = set_st(b, "model-00001-of-00002.safetensors");
    fill_random(ck_add(s1, "l0.q", F4, 2, dims2(d, 32, 16)));
    fill_random(ck_add(s1, "l0.w", BF16, 2, dims2(d, 16, 8)));
    fill_random(ck_add(s1, "l1.q", F4, 2, dims2(d, 32, 16)));
    ckpt *s2 = set_st(b, "model-00002-of-00002.safetensors");
    fill_random(ck_add(s2, "l1.w", BF16, 2, dims2(d, 16, 8)));
    fill_random(ck_add(s2, "l2.w", BF16, 2, dims2(d, 16, 8)));
    fill_random(ck_add(s2, "norm", F32, 1, (dims1(d, 8), d)));
    set_raw_text(b, SIDX, "");
    set_reindex(b, SIDX);
    set_finish(b);
    set *t = set_new("ckpt/set-reshard-target");
    set_raw_text(t, "config.json", cfg);
    static const struct {
      const char *shard, *name;
    } place[] = {{"model-00001-of-00003.safetensors", "l0.q"},
                 {"model-00001-of-00003.safetensors", "l0.w"},
                 {"model-00002-of-00003.safetensors", "l1.q"},
                 {"model-00002-of-00003.safetensors", "l1.w"},
                 {"model-00003-of-00003.safetensors", "l2.w"},
                 {"model-00003-of-00003.safetensors", "norm"}};
    for (size_t i = 0; i < sizeof place / sizeof *place; i++) {
      const tensor *x = NULL;
      for (size_t m = 0; m < b->n && !x; m++)
        for (size_t q = 0; q < b->m[m].c.n; q++)
          if (!strcmp(b->m[m].c.t[q].name, place[i].name)) x = &b->m[m].c.t[q];
      member *m = NULL;
      for (size_t q = 0; q < t->n; q++)
        if (!strcmp(t->m[q].path, place[i].shard)) m = &t->m[q];
      if (!m) m = set_add(t, place[i].shard, KIND_ST);
      tensor *y = ck_add(&m->c, x->name, x->dtype, x->rank, x->dims);
      memcpy(y->data, x->data, (size_t)x->len);
      if (strcmp(x->name, "norm")) mutate(y, 1500);
    }
    set_raw_text(t, SIDX, "");
    set_reindex(t, SIDX);
    set_finish(t);
    build_set(&B, &T, b, t, 4096, pol_default, NULL, NULL);
    stable_free(&T);
    emit_bundle(VALID(.id = "valid/set-reshard", .flags = "set,layout,packed",
                      .text = "two shards to three, every shard renamed (model-0000k-of-00002 to "
                              "-of-00003) and every tensor in another place, packed F4 tensors "
                              "among them: each tensor is coded against its base bytes wherever "
                              "they lay; the index file rewritten",
                      .covers = "§2.3,§6.2,R-SET-2,R-DT-2,R-APL-1"),
                &B, D(b), D(t));
    bundle_free(&B);
  }

  /* Edge cases of members and paths. */
  {
    uint64_t d[2] = {0, 0};
    set *b = set_new("ckpt/set-edge-base");
    set_raw_text(b, "A.json", "{}\n");
    set_raw(b, "a/b/c/d.bin", NULL, 5000);
    set_raw(b, "added_tokens.json", NULL, 0);
    set_st(b, "empty.safetensors");
    ckpt *m = set_st(b, "model.safetensors");
    fill_random(ck_add(m, "s", F32, 0, d));
    ck_add(m, "z", F32, 2, dims2(d, 0, 16));
    fill_random(ck_add(m, "w", F16, 1, (dims1(d, 40), d)));
    ckpt *zs = set_st(b, "zeros.safetensors");
    ck_add(zs, "e", BF16, 1, (dims1(d, 0), d));
    set_raw_text(b, "tok-extra.txt", "extra\n");
    set_raw_text(b, "tok.txt", "tok\n");
    set_raw_text(b, "tok/x.txt", "x-000\n");
    set_finish(b);
    set *t = set_clone(b, "ckpt/set-edge-target");
    mutate(&set_get(t, "a/b/c/d.bin")->c.t[0], 50);
    mutate(mt(t, "model.safetensors", "s"), 10000);
    mutate(mt(t, "model.safetensors", "w"), 3000);
    set_raw_text(t, "tok/y.txt", "");
    set_raw_set(t, "tok/x.txt", "x-001\n", 6);
    set_finish(t);
    build_set(&B, &T, b, t, 4096, pol_default, NULL, NULL);
    stable_free(&T);
    emit_bundle(VALID(.id = "valid/set-edge-members",
                      .flags = "set,zero-length,path-order,chunk-geometry",
                      .text = "members A.json (upper case sorts first), a/b/c/d.bin (5000 bytes "
                              "four directories down, two chunks), an empty raw member, a "
                              "safetensors member with no tensors and one with only a "
                              "zero-length tensor, a scalar, tok-extra.txt, tok.txt and "
                              "tok/x.txt (bytewise: - . / — not the order of a directory walk), "
                              "an empty raw member added",
                      .covers = "§2.3,§6.6,R-SET-1,R-SET-2"),
                &B, D(b), D(t));
    bundle_free(&B);
  }

  /* A set of raw members only: both state ids are of no tensors, so equal; the raw
   * members' tensor hashes alone tell base from target (§10.1). */
  {
    set *b = set_new("ckpt/set-raw-only-base");
    set_raw_text(b, "config.json", cfg);
    set_raw(b, "tokenizer.json", NULL, 700);
    set_finish(b);
    set *t = set_clone(b, "ckpt/set-raw-only-target");
    char *c = strdup(cfg);
    memcpy(strstr(c, "1000"), "2000", 4);
    set_raw_set(t, "config.json", c, strlen(c));
    free(c);
    mutate(&set_get(t, "tokenizer.json")->c.t[0], 100);
    set_finish(t);
    set *o = set_clone(b, "ckpt/set-raw-only-other");
    set_get(o, "tokenizer.json")->c.t[0].data[3] ^= 0x10;
    set_finish(o);
    build_set(&B, &T, b, t, 4096, pol_default, NULL, NULL);
    stable_free(&T);
    if (memcmp(sec(&B, "IDEN", 0)->pl.p, sec(&B, "IDEN", 0)->pl.p + 16, 16))
      die("raw-only: the state ids differ");
    emit_bundle(VALID(.id = "valid/set-raw-only", .flags = "set,raw,zero-length,raw-binding",
                      .text = "a set of two raw members, both changed in place: no tensor is in "
                              "either state id, so the two are equal (the XXH3-128 of nothing)",
                      .covers = "R-SET-3,§7,R-APL-3"),
                &B, D(b), D(t));
    emit_bundle(VALID(.id = "valid/set-raw-only-apply-to-own-target",
                      .flags = "set,raw,apply-to-target,raw-binding",
                      .text = "the raw-only set bundle applied to its target: the target has the "
                              "base's entries and its state id, but not its raw members' hashes, "
                              "so it is not the base; it is the target (R-APL-5)",
                      .covers = "R-APL-5,R-APL-3,R-SET-3,§10.2"),
                &B, D(t), D(t));
    emit_bundle(INVALID(.id = "invalid/set-raw-only-apply-other", .error = "DCR_E_BASE_MISMATCH",
                        .stage = "apply", .flags = "set,raw,raw-binding,wrong-base",
                        .text = "the raw-only set bundle applied to a set whose tokenizer.json "
                                "differs in one byte: the base state id matches (no tensors), "
                                "the raw member's hash is neither the base's nor the target's",
                        .covers = "R-APL-3,R-SET-3,R-APL-4"),
                &B, D(o), NONE);
    bundle_free(&B);
  }

  /* RSIZ in a set: a tensor grown by rows across a chunk boundary, a raw member
   * appended to. */
  {
    uint64_t d[2];
    buf v = {0};
    set *b = set_new("ckpt/set-resize-base");
    char *c = strdup(cfg);
    set_raw_text(b, "config.json", c);
    ckpt *m = set_st(b, "model.safetensors");
    fill_random(ck_add(m, "embed", BF16, 2, dims2(d, 120, 16)));
    fill_random(ck_add(m, "norm", F32, 1, (dims1(d, 16), d)));
    vocab_text(&v, 120, "");
    set_raw(b, "tokenizer/vocab.txt", v.p, v.n);
    set_finish(b);
    set *t = set_new("ckpt/set-resize-target");
    memcpy(strstr(c, "\"vocab_size\": 32"), "\"vocab_size\": 48", 16);
    set_raw_text(t, "config.json", c);
    m = set_st(t, "model.safetensors");
    tensor *e = ck_add(m, "embed", BF16, 2, dims2(d, 136, 16));
    fill_random(e);
    memcpy(e->data, mt(b, "model.safetensors", "embed")->data, 3840);
    tensor part = *e;
    part.len = 3840;
    mutate(&part, 200);
    tensor *n = ck_add(m, "norm", F32, 1, (dims1(d, 16), d));
    memcpy(n->data, mt(b, "model.safetensors", "norm")->data, 64);
    vocab_text(&v, 136, "");
    set_raw(t, "tokenizer/vocab.txt", v.p, v.n);
    set_finish(t);
    build_set(&B, &T, b, t, 4096, pol_default, NULL, resize_first_dim);
    stable_free(&T);
    if (sec(&B, "RSIZ", 0)->pl.n != 12) die("set-resize: RSIZ is not as designed");
    emit_bundle(VALID(.id = "valid/set-resize", .flags = "set,resize,raw,chunk-geometry",
                      .text = "RSIZ in a set: embed BF16 [120, 16] grown to [136, 16] (3840 to "
                              "4352 bytes, across a chunk boundary: chunk 1 is new rows only) "
                              "and the raw member tokenizer/vocab.txt appended to (a raw member "
                              "is a U8 tensor of rank 1: resizable)",
                      .covers = "R-RSZ-1,R-RSZ-2,§6.6,R-SET-2"),
                &B, D(b), D(t));
    emit_bundle(VALID(.id = "valid/set-resize-apply-to-own-target",
                      .flags = "set,resize,apply-to-target",
                      .text = "the set resize bundle applied to its own target",
                      .covers = "R-APL-5,R-RSZ-2"),
                &B, D(t), D(t));
    bundle_free(&B);
    free(c);
    bfree(&v);
  }
}

/* ------------------------------------------------------------------------ */

int main(int argc, char **argv) {
  if (!index_open(argc, argv, "v1.1", ".", v11_flags, sizeof v11_flags / sizeof *v11_flags)) {
    fprintf(stderr, "usage: mkvectors11 OUTDIR [--repaired DIR]\n"
                    "  writes OUTDIR/v1.1/index.json and the files beside it; with --repaired,\n"
                    "  also every repaired variant as DIR/index.json and files (all valid)\n");
    return 2;
  }

  dtype_vectors();
  minor0_file_vectors();
  resize_vectors();
  set_valid_vectors();
  set_table_vectors();
  set_entry_vectors();
  set_input_vectors();

  index_info x = {
      .schema = "../schema.json",
      .format_version = "1.1",
      .generator = "tools/mkvectors11.c (make vectors); seed 0x4443523131766563",
      .usage = "as for testvectors/index.json (testvectors/README.md), with paths relative to the "
               "folder of this index. A base or target is a file ({path, sha256}) or, for a bundle "
               "of kind set, a directory ({path, members, ignored}): `members` gives each member "
               "file's path inside the directory and its sha256, and the directory holds exactly "
               "those files and the `ignored` ones, hidden files that are not members (SPEC.md "
               "§2.3). Apply a set bundle to the base directory, writing a new directory; a valid "
               "vector's output holds exactly the target's members, byte for byte (no hidden "
               "file), and a failed apply leaves no output (R-APL-4)",
      .nomem = "allocation failure: a property of the environment",
      .no_vectors = json_object(),
      .repaired_text = "repaired variants of the 1.1 invalid vectors (mkvectors11 --repaired): "
                       "each must be valid; not committed"};
  index_close(&x);
  return 0;
}
