/*
 * xorfiles.c - writes A XOR B (equal-size files) to stdout, streaming: the
 * "XOR the whole checkpoint, then zstd it" scheme that bench/run.sh measures as a
 * peer (Fireworks' ARC2 does this). Also undoes it: A XOR (A XOR B) = B.
 */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: xorfiles A B > A^B\n");
    return 2;
  }
  FILE *a = fopen(argv[1], "rb"), *b = fopen(argv[2], "rb");
  if (!a || !b) {
    perror("xorfiles");
    return 1;
  }
  enum { N = 1 << 20 };
  static unsigned char x[N], y[N];
  size_t n, m;
  while ((n = fread(x, 1, N, a)) > 0) {
    m = fread(y, 1, n, b);
    if (m != n) {
      fprintf(stderr, "xorfiles: inputs differ in size\n");
      return 1;
    }
    for (size_t i = 0; i < n; i++) x[i] ^= y[i];
    if (fwrite(x, 1, n, stdout) != n) return 1;
  }
  return ferror(a) || ferror(b) || fflush(stdout) ? 1 : 0;
}
