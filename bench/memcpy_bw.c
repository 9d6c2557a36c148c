/*
 * memcpy_bw.c - this machine's single-thread memcpy bandwidth on buffers far
 * larger than the caches: the ceiling bench/run.sh compares codec speeds to.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(void) {
  size_t n = (size_t)256 << 20;
  char *a = malloc(n), *b = malloc(n);
  if (!a || !b) return 1;
  memset(a, 1, n);
  memset(b, 2, n);
  double best = 0;
  for (int r = 0; r < 5; r++) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    memcpy(b, a, n);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (n / s > best) best = (double)n / s;
    a[r] = b[n - 1 - (size_t)r];
  }
  printf("%.3f\n", best / 1e9); /* GB/s */
  return 0;
}
