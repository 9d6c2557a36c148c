/*
 * replay.c - a main() for the harnesses without a fuzzer: runs
 * LLVMFuzzerTestOneInput on every file named on the command line, and on every
 * file in every directory named (sorted, not recursive). `make fuzz-replay` uses
 * it to run the corpora and regression inputs under ASan and UBSan.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return 1;
  }
  size_t cap = 1 << 16, n = 0, k;
  uint8_t *buf = malloc(cap);
  while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
    n += k;
    if (n == cap) {
      uint8_t *p = realloc(buf, cap *= 2);
      if (!p) free(buf);
      buf = p;
    }
  }
  fclose(f);
  if (!buf) {
    fprintf(stderr, "%s: out of memory\n", path);
    return 1;
  }
  /* An exact-size copy, so that ASan sees reads past the input's end. */
  uint8_t *exact = malloc(n ? n : 1);
  if (!exact) return free(buf), 1;
  memcpy(exact, buf, n);
  free(buf);
  if (getenv("DCR_REPLAY_VERBOSE")) fprintf(stderr, "replay %s (%zu bytes)\n", path, n);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  return 0;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  int failed = 0;
  unsigned long runs = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st)) {
      perror(argv[i]);
      failed = 1;
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      failed |= run_file(argv[i]);
      runs++;
      continue;
    }
    DIR *dir = opendir(argv[i]);
    if (!dir) {
      perror(argv[i]);
      failed = 1;
      continue;
    }
    size_t count = 0, cap = 0;
    char **names = NULL;
    struct dirent *e;
    while ((e = readdir(dir))) {
      if (e->d_name[0] == '.') continue;
      if (count == cap) {
        char **p = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names);
        if (!p) abort();
        names = p;
      }
      size_t len = strlen(argv[i]) + strlen(e->d_name) + 2;
      names[count] = malloc(len);
      if (!names[count]) abort();
      snprintf(names[count++], len, "%s/%s", argv[i], e->d_name);
    }
    closedir(dir);
    if (count) qsort(names, count, sizeof *names, by_name); /* names is NULL for an empty folder */
    for (size_t k = 0; k < count; k++) {
      if (!stat(names[k], &st) && S_ISREG(st.st_mode)) {
        failed |= run_file(names[k]);
        runs++;
      }
      free(names[k]);
    }
    free(names);
  }
  fprintf(stderr, "%s: %lu inputs replayed%s\n", argv[0], runs, failed ? ", some unreadable" : "");
  return failed;
}
