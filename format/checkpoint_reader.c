/*
 * checkpoint_reader.c - the public checkpoint reader (dcr_checkpoint_*, SPEC.md
 * §2): a checkpoint file opened and its prefix parsed as apply parses it, for
 * callers that want its tensors or its state id. The state id, which reads the
 * tensors' bytes, is the codec's (codec/state_id.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "checkpoint.h"
#include "format.h"

int dcr_checkpoint_open(dcr_checkpoint **out, const char *path, int kind,
                        const dcr_limits *limits, dcr_detail *d) {
  dcr__detail_init(d);
  *out = NULL;
  dcr_limits lim;
  dcr__limits_take(&lim, limits);
  dcr_checkpoint *c = calloc(1, sizeof *c);
  if (!c) return dcr__fail(d, DCR_E_NOMEM, "cannot allocate a checkpoint reader");
  snprintf(c->path, sizeof c->path, "%s", path);
  int rc = dcr__checkpoint_open(path, kind, &lim, DCR_FORMAT_MINOR, &c->ck, d);
  if (rc) {
    free(c);
    return rc;
  }
  *out = c;
  return DCR_OK;
}

void dcr_checkpoint_free(dcr_checkpoint *c) {
  if (!c) return;
  dcr__checkpoint_free(&c->ck);
  free(c);
}

void dcr_checkpoint_info(const dcr_checkpoint *c, dcr_checkpoint_summary *info) {
  memset(info, 0, sizeof *info);
  info->kind = c->ck.kind;
  info->file_size = c->ck.file_size;
  info->prefix_length = c->ck.prefix_length;
  info->tensor_count = c->ck.count;
  info->member_count = c->ck.member_count;
}

void dcr_checkpoint_member(const dcr_checkpoint *c, uint64_t i, dcr_member_info *member) {
  dcr__member_info(member, &c->ck.members[i]);
}

void dcr_checkpoint_tensor(const dcr_checkpoint *c, uint64_t i, dcr_tensor_side *side,
                           const char **name, size_t *name_length) {
  const dcr__tensor *t = &c->ck.tensors[i];
  dcr__tensor_side(side, &t->desc, 1);
  if (!c->hashed) memset(side->hash, 0, sizeof side->hash); /* half-done hashes say nothing */
  *name = t->name;
  *name_length = t->name_length;
}
