/*
 * test_sink.h - a growing byte buffer and the dcr_write_fn that appends to it,
 * for the unit tests that keep a bundle or a target in memory. Included once.
 */
#ifndef DCR_TEST_SINK_H
#define DCR_TEST_SINK_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  uint8_t *p;
  size_t n, cap;
} buf;

static int sink(void *opaque, const void *p, size_t n) {
  buf *b = opaque;
  if (b->n + n > b->cap) {
    b->cap = 2 * (b->n + n);
    b->p = realloc(b->p, b->cap);
    if (!b->p) return 1;
  }
  memcpy(b->p + b->n, p, n);
  b->n += n;
  return 0;
}

#endif
