/*
 * query.c - read-only views of an open bundle for callers (inspect, tools).
 */
#include "format.h"

void dcr_reader_info(const dcr_reader *r, dcr_bundle_info *info) {
  memset(info, 0, sizeof *info);
  info->format_major = DCR_FORMAT_MAJOR;
  info->format_minor = r->minor;
  info->bundle_size = r->src.size;
  info->kind = r->man.kind;
  info->chunk_size = r->man.chunk_size;
  info->entry_count = r->man.entry_count;
  info->chunk_count = r->chunk_count;
  info->prefix_length = r->man.prefix_length;
  info->target_size = r->man.prefix_length + r->man.data_length;
  memcpy(info->base_state, r->base_state, 16);
  memcpy(info->target_state, r->target_state, 16);
  info->meta_count = r->meta.count;
  info->section_count = r->section_count;
  info->member_count = r->man.member_count;
}

void dcr__member_info(dcr_member_info *out, const dcr__member *m) {
  memset(out, 0, sizeof *out);
  out->path = m->path;
  out->path_length = m->path_length;
  out->kind = m->kind;
  out->prefix_length = m->prefix_length;
  out->data_length = m->data_length;
}

void dcr_reader_member(const dcr_reader *r, uint64_t i, dcr_member_info *member) {
  dcr__member_info(member, &r->man.members[i]);
}

void dcr__tensor_side(dcr_tensor_side *out, const dcr__desc *t, int present) {
  memset(out, 0, sizeof *out);
  if (!(out->present = present)) return;
  out->dtype = t->dtype;
  out->rank = t->rank;
  out->dims = t->dims;
  out->byte_length = t->byte_length;
  out->offset = t->offset;
  memcpy(out->hash, t->hash, 16);
}

void dcr_reader_tensor(const dcr_reader *r, uint64_t i, dcr_tensor_info *t) {
  const dcr__entry *e = &r->man.entries[i];
  memset(t, 0, sizeof *t);
  t->name = e->name;
  t->name_length = e->name_length;
  dcr__tensor_side(&t->base, &e->base, (e->presence & DCR__HAS_BASE) != 0);
  dcr__tensor_side(&t->target, &e->target, (e->presence & DCR__HAS_TARGET) != 0);
  t->delta_coded = dcr__entry_delta_coded(e);
  t->resized = e->resized;
  t->selected = dcr__selected(r, i);
  t->raw = e->raw;
}

void dcr_reader_chunk(const dcr_reader *r, uint64_t i, dcr_chunk_info *c) {
  const dcr__chunk *s = &r->chunks[i];
  memset(c, 0, sizeof *c);
  c->tensor = s->tensor;
  c->chunk = s->chunk;
  c->encoding = s->encoding;
  c->compression = s->compression;
  c->count = s->count;
  c->offset = s->offset;
  c->payload_length = s->payload_length;
  c->base_check = s->base_check;
  c->target_check = s->target_check;
}

void dcr_reader_section(const dcr_reader *r, uint64_t i, dcr_section_info *s) {
  const dcr__section *x = &r->sections[i];
  memset(s, 0, sizeof *s);
  dcr__section_type_name(x->type, s->type);
  s->critical = (x->flags & DCR__FLAG_CRITICAL) != 0;
  s->compression = x->compression;
  s->offset = x->offset;
  s->length = x->length;
}

void dcr_reader_meta(const dcr_reader *r, uint64_t i, dcr_meta *m) { *m = r->meta.pairs[i]; }
