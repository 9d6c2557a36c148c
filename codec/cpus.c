/*
 * cpus.c - how many threads to run when the caller does not say: the CPUs this
 * process may actually use, not the cores the machine has. A container on a
 * 128-core node with a 4-CPU quota that started 128 workers would oversubscribe
 * its quota and hold 128 sets of chunk buffers.
 */
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

#include "codec.h"

/* More threads than this gain little on the chunk pipeline (the writer and the
 * hashing order serialize it) and each holds chunk buffers. */
#define DEFAULT_THREADS_CAP 32

static unsigned online_or_affinity(void) {
#if defined(CPU_COUNT) && defined(__linux__)
  cpu_set_t set;
  if (!sched_getaffinity(0, sizeof set, &set) && CPU_COUNT(&set) > 0) return (unsigned)CPU_COUNT(&set);
#endif
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : (unsigned)n;
}

/* CPUs allowed by a quota of `quota` microseconds per `period`, rounded up. */
static unsigned quota_cpus(long long quota, long long period) {
  if (quota <= 0 || period <= 0) return 0;
  long long n = (quota + period - 1) / period;
  return n > 65536 ? 65536 : (unsigned)n;
}

/* cgroup v2: "max 100000" or "400000 100000" in cpu.max. */
static unsigned read_cpu_max(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char quota[32];
  long long period = 0;
  unsigned n = 0;
  if (fscanf(f, "%31s %lld", quota, &period) == 2 && strcmp(quota, "max"))
    n = quota_cpus(atoll(quota), period);
  fclose(f);
  return n;
}

/* cgroup v1: cpu.cfs_quota_us (-1 for none) and cpu.cfs_period_us. */
static unsigned read_cfs(const char *dir) {
  char path[4200];
  long long quota = -1, period = 0;
  if ((size_t)snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir) >= sizeof path) return 0;
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  if (fscanf(f, "%lld", &quota) != 1) quota = -1;
  fclose(f);
  if ((size_t)snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir) >= sizeof path ||
      !(f = fopen(path, "r")))
    return 0;
  if (fscanf(f, "%lld", &period) != 1) period = 0;
  fclose(f);
  return quota_cpus(quota, period);
}

static unsigned smaller(unsigned a, unsigned b) { return !a ? b : !b ? a : a < b ? a : b; }

/* The tightest CPU quota on this process's cgroup and its ancestors (a quota may
 * be set on any of them), or 0 for none. Inside a container the cgroup namespace
 * makes the container's own cgroup the root, which is read too. */
static unsigned cgroup_cpus(void) {
  FILE *f = fopen("/proc/self/cgroup", "r");
  if (!f) return 0;
  char line[4096];
  unsigned n = 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2) continue;
    *c2 = '\0';
    const char *controllers = c1 + 1, *path = c2 + 1;
    int v2 = !*controllers, v1_cpu = 0;
    for (const char *p = controllers; !v2 && *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] != 0))
      v1_cpu |= !strncmp(p, "cpu", 3) && (p[3] == ',' || p[3] == '\0');
    if (!v2 && !v1_cpu) continue;
    char dir[4200];
    if ((size_t)snprintf(dir, sizeof dir, "%s%s", v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/cpu", path) >=
        sizeof dir)
      continue;
    for (;;) {
      char file[4300];
      size_t len = strlen(dir);
      while (len > 1 && dir[len - 1] == '/') dir[--len] = '\0';
      if (!v2) n = smaller(n, read_cfs(dir));
      else if ((size_t)snprintf(file, sizeof file, "%s/cpu.max", dir) < sizeof file)
        n = smaller(n, read_cpu_max(file));
      char *slash = strrchr(dir, '/');
      if (!slash || slash == dir || !strcmp(dir, v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/cpu")) break;
      *slash = '\0';
    }
  }
  fclose(f);
  return n;
}

unsigned dcr__threads_within(unsigned threads, uint64_t per_thread, uint64_t budget) {
  uint64_t fit = per_thread ? budget / per_thread : threads;
  return fit < 1 ? 1 : fit < threads ? (unsigned)fit : threads;
}

unsigned dcr__threads_for_jobs(unsigned threads, uint64_t jobs, uint64_t bytes) {
  /* A job handed to a worker costs a wake-up or two (~10 us): below ~64 KiB of
   * work per job, workers cost more than they give (1,048,576 jobs of 2 bytes:
   * 24 s on 2 threads, 6 s on one). */
  return jobs && bytes / jobs < ((uint64_t)64 << 10) ? 1 : threads;
}

unsigned dcr_default_threads(void) {
  unsigned n = smaller(online_or_affinity(), cgroup_cpus());
  return n < 1 ? 1 : n > DEFAULT_THREADS_CAP ? DEFAULT_THREADS_CAP : n;
}
