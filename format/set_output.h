/*
 * set_output.h - a checkpoint set's output directory, which appears whole or not at
 * all (set_output.c says how). The set-sized sibling of atomic.h, with its flags.
 */
#ifndef DCR_SET_OUTPUT_H
#define DCR_SET_OUTPUT_H

#include "atomic.h"
#include "checkpoint.h"

typedef struct {
  const char *dest;            /* as given; must outlive the output */
  char name[256];              /* dest's last component */
  char tmp_name[32];           /* the hidden temporary directory, beside dest */
  int dir_fd, root_fd;         /* dest's parent; the temporary directory */
  int created, had_old;
  unsigned flags;              /* DCR__ATOMIC_REPLACE, DCR__ATOMIC_SYNC */
  const dcr__member *members;  /* the target's (a manifest's), path order */
  size_t count;
  dcr__member_files *files;    /* under root_fd */
} dcr__set_output;

/* Makes the temporary directory beside dest. Without DCR__ATOMIC_REPLACE an
 * existing dest fails at once (DCR_E_IO "exists"); with it, dest must be a
 * directory. Errors name dest. */
DCR_HIDDEN int dcr__set_output_open(dcr__set_output *o, const char *dest,
                                    const dcr__member *members, size_t count, unsigned flags,
                                    dcr_detail *d);
/* DCR_E_IO when the filesystem says fewer than `bytes` are free. */
DCR_HIDDEN int dcr__set_output_check_space(const dcr__set_output *o, uint64_t bytes,
                                           dcr_detail *d);
/* Creates every member, sized (holes) and with its prefix written. */
DCR_HIDDEN int dcr__set_output_create(dcr__set_output *o, dcr_detail *d);
/* Writes n bytes at offset `at` of the set's data region (inside one member). */
DCR_HIDDEN int dcr__set_output_write(const dcr__set_output *o, uint64_t at, const void *p,
                                     size_t n, dcr_detail *d);
/* fsync (SYNC), then renames the directory into place, or exchanges it with the
 * old set and removes that; closes everything. On failure the new set is removed. */
DCR_HIDDEN int dcr__set_output_commit(dcr__set_output *o, dcr_detail *d);
/* Closes and removes the temporary directory; safe after a failed open or a commit. */
DCR_HIDDEN void dcr__set_output_abort(dcr__set_output *o);

/* Removes the tree at dir_fd/name, or whatever is there that is not a directory
 * (never what a link leads to); best effort (a cleanup; refit/inplace_dir.c's too). */
DCR_HIDDEN void dcr__remove_tree(int dir_fd, const char *name);
/* Creates the directories above member path p (n bytes) under root; 0 or an errno. */
DCR_HIDDEN int dcr__make_parents(int root, const char *p, size_t n);

#endif
