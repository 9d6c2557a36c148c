/*
 * json_cost.c - what parsing a JSON text whole with jansson would cost, by one
 * pass that allocates nothing (SPEC.md §11: "a JSON text's cost can be bounded by
 * one pass over it"), so that a reader refuses a text over its memory budget
 * before jansson builds the document. The pass can be fed in pieces, as a text
 * arrives from a stream, and is then refused as soon as its prefix is too dear.
 */
#include "common.h"

/* jansson builds the whole document before a rule can be checked, at about these
 * costs (measured, glibc, 64-bit): a 3-byte "{}," costs ~230 bytes, a 2-byte "1,"
 * ~40. A 10 MB header of "[{},{},...]" took 750 MB and a 99 MB one 7 GiB. */
enum { COST_OBJECT = 240, COST_ARRAY = 96, COST_MEMBER = 64, COST_VALUE = 48 };

void dcr__json_cost_init(dcr__json_cost *c) {
  memset(c, 0, sizeof *c);
  c->values = 1;
}

uint64_t dcr__json_cost_dom(const dcr__json_cost *c) {
  return COST_OBJECT * c->objects + COST_ARRAY * c->arrays + COST_MEMBER * c->colons +
         COST_VALUE * (c->values + c->objects + c->arrays) + 2 * c->string_bytes;
}

void dcr__json_cost_feed(dcr__json_cost *c, const char *text, size_t n) {
  for (size_t i = 0; i < n; i++) {
    char ch = text[i];
    if (c->escaped) { /* the character after a backslash: counted with it */
      c->escaped = 0;
      continue;
    }
    if (c->in_string) {
      if (ch == '"') c->in_string = 0;
      else c->string_bytes++, c->escaped = ch == '\\';
      continue;
    }
    c->objects += ch == '{';
    c->arrays += ch == '[';
    c->colons += ch == ':';
    c->values += ch == ',';
    c->in_string = ch == '"';
    if (c->level == 1 && (ch == ':' || ch == ',' || ch == '}')) { /* a root member's edge */
      uint64_t cost = dcr__json_cost_dom(c);
      if (ch != ':' && cost - c->member_start > c->largest) c->largest = cost - c->member_start;
      if (ch == ':') c->root_members++, c->member_start = cost;
    }
    if (ch == '{' || ch == '[') {
      if (++c->level > c->depth) c->depth = c->level;
    } else if ((ch == '}' || ch == ']') && c->level) {
      c->level--;
    }
  }
}
