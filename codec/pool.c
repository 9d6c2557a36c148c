/*
 * pool.c - worker threads for batches of chunk jobs. Jobs are handed out by an
 * atomic counter; results go to per-job slots, so the order of completion never
 * shows in the output (determinism whatever the thread count).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "codec.h"

struct dcr__pool {
  unsigned threads; /* including the caller */
  pthread_t *workers;
  pthread_mutex_t lock;
  pthread_cond_t start, done;
  uint64_t generation;
  unsigned busy;
  int quit;
  dcr__job_fn fn;
  void *ctx;
  size_t jobs;
  atomic_size_t next;
};

static void drain(dcr__pool *p, unsigned worker) {
  for (;;) {
    size_t j = atomic_fetch_add(&p->next, 1);
    if (j >= p->jobs) return;
    p->fn(p->ctx, j, worker);
  }
}

typedef struct {
  dcr__pool *pool;
  unsigned id;
} worker_arg;

static void *worker_main(void *arg) {
  worker_arg *a = arg;
  dcr__pool *p = a->pool;
  unsigned id = a->id;
  free(a);
  uint64_t seen = 0;
  pthread_mutex_lock(&p->lock);
  for (;;) {
    while (!p->quit && p->generation == seen) pthread_cond_wait(&p->start, &p->lock);
    if (p->quit) break;
    seen = p->generation;
    pthread_mutex_unlock(&p->lock);
    drain(p, id);
    pthread_mutex_lock(&p->lock);
    if (--p->busy == 0) pthread_cond_signal(&p->done);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

unsigned dcr__default_threads(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > 256 ? 256 : (unsigned)n;
}

int dcr__pool_create(dcr__pool **out, unsigned threads) {
  dcr__pool *p = calloc(1, sizeof *p);
  if (!p) return DCR_E_NOMEM;
  p->threads = threads ? threads : dcr__default_threads();
  p->workers = calloc(p->threads, sizeof *p->workers);
  if (!p->workers) {
    free(p);
    return DCR_E_NOMEM;
  }
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->start, NULL);
  pthread_cond_init(&p->done, NULL);
  for (unsigned i = 1; i < p->threads; i++) {
    worker_arg *a = malloc(sizeof *a);
    if (!a || (a->pool = p, a->id = i, pthread_create(&p->workers[i], NULL, worker_main, a))) {
      free(a);
      p->threads = i; /* the ones started are joined by free */
      dcr__pool_free(p);
      return DCR_E_NOMEM;
    }
  }
  *out = p;
  return DCR_OK;
}

unsigned dcr__pool_threads(const dcr__pool *p) { return p->threads; }

void dcr__pool_run(dcr__pool *p, size_t jobs, dcr__job_fn fn, void *ctx) {
  pthread_mutex_lock(&p->lock);
  p->fn = fn;
  p->ctx = ctx;
  p->jobs = jobs;
  atomic_store(&p->next, 0);
  p->busy = p->threads - 1;
  p->generation++;
  pthread_cond_broadcast(&p->start);
  pthread_mutex_unlock(&p->lock);
  drain(p, 0);
  pthread_mutex_lock(&p->lock);
  while (p->busy) pthread_cond_wait(&p->done, &p->lock);
  pthread_mutex_unlock(&p->lock);
}

void dcr__pool_free(dcr__pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->lock);
  p->quit = 1;
  pthread_cond_broadcast(&p->start);
  pthread_mutex_unlock(&p->lock);
  for (unsigned i = 1; i < p->threads; i++) pthread_join(p->workers[i], NULL);
  pthread_mutex_destroy(&p->lock);
  pthread_cond_destroy(&p->start);
  pthread_cond_destroy(&p->done);
  free(p->workers);
  free(p);
}
