/*
 * pool.c - worker threads that run a stream of chunk jobs a bounded window ahead
 * of the calling thread, which takes their results in job order. Each job owns
 * a slot (job mod window) until the caller releases it, so the order in which
 * workers finish never shows in the output (determinism whatever the thread
 * count), and memory is the window's slots whatever the number of jobs. With a
 * single thread no worker is started: the caller runs each job when it asks
 * for its result.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "codec.h"

struct dcr__pool {
  unsigned threads; /* workers started; 0 when the caller runs the jobs */
  pthread_t *workers;
  pthread_mutex_t lock;
  pthread_cond_t wake; /* for workers: a job to take, or quit */
  pthread_cond_t done; /* for the caller: a job finished */
  dcr__job_fn fn;
  void *ctx;
  size_t jobs, window, next, released;
  size_t *finished; /* per slot: 1 + the last job finished in it */
  unsigned busy;
  int quit;
};

typedef struct {
  dcr__pool *pool;
  unsigned id;
} worker_arg;

static void *worker_main(void *arg) {
  worker_arg *a = arg;
  dcr__pool *p = a->pool;
  unsigned id = a->id;
  free(a);
  pthread_mutex_lock(&p->lock);
  for (;;) {
    while (!p->quit && !(p->next < p->jobs && p->next < p->released + p->window))
      pthread_cond_wait(&p->wake, &p->lock);
    if (p->quit) break;
    size_t j = p->next++;
    p->busy++;
    pthread_mutex_unlock(&p->lock);
    p->fn(p->ctx, j, id);
    pthread_mutex_lock(&p->lock);
    p->busy--;
    p->finished[j % p->window] = j + 1;
    pthread_cond_broadcast(&p->done);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

int dcr__pool_create(dcr__pool **out, unsigned threads) {
  dcr__pool *p = calloc(1, sizeof *p);
  if (!p) return DCR_E_NOMEM;
  if (!threads) threads = dcr_default_threads();
  p->workers = calloc(threads, sizeof *p->workers);
  p->finished = calloc(2 * (size_t)threads, sizeof *p->finished);
  if (!p->workers || !p->finished) {
    dcr__pool_free(p);
    return DCR_E_NOMEM;
  }
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);
  p->window = 2 * (size_t)threads;
  for (unsigned i = 0; threads > 1 && i < threads; i++) {
    worker_arg *a = malloc(sizeof *a);
    if (!a || (a->pool = p, a->id = i, pthread_create(&p->workers[i], NULL, worker_main, a))) {
      free(a);
      dcr__pool_free(p);
      return DCR_E_NOMEM;
    }
    p->threads = i + 1; /* the ones started are joined by free */
  }
  *out = p;
  return DCR_OK;
}

size_t dcr__pool_window(const dcr__pool *p) { return p->threads ? p->window : 1; }

static void start(dcr__pool *p, size_t jobs, dcr__job_fn fn, void *ctx) {
  pthread_mutex_lock(&p->lock);
  p->fn = fn;
  p->ctx = ctx;
  p->jobs = jobs;
  p->next = p->released = 0;
  memset(p->finished, 0, p->window * sizeof *p->finished);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
}

static void wait_for(dcr__pool *p, size_t j) {
  if (!p->threads) {
    p->fn(p->ctx, j, 0);
    return;
  }
  pthread_mutex_lock(&p->lock);
  while (p->finished[j % p->window] != j + 1) pthread_cond_wait(&p->done, &p->lock);
  pthread_mutex_unlock(&p->lock);
}

static void release(dcr__pool *p, size_t j) {
  if (!p->threads) return;
  pthread_mutex_lock(&p->lock);
  p->released = j + 1;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
}

static void finish(dcr__pool *p) {
  pthread_mutex_lock(&p->lock);
  p->jobs = p->next; /* hand out nothing more */
  while (p->busy) pthread_cond_wait(&p->done, &p->lock);
  pthread_mutex_unlock(&p->lock);
}

int dcr__pool_stream(dcr__pool *p, size_t jobs, dcr__job_fn fn, dcr__take_fn take, void *ctx,
                     const volatile int *cancel, dcr_detail *d) {
  int rc = DCR_OK;
  start(p, jobs, fn, ctx);
  for (size_t j = 0; j < jobs && !rc; j++) {
    if (cancel && *cancel) {
      rc = dcr__fail(d, DCR_E_INTERRUPTED, "interrupted");
      break;
    }
    wait_for(p, j);
    if (!(rc = take(ctx, j, d))) release(p, j);
  }
  finish(p); /* also when stopping early: no job may run on after this returns */
  return rc;
}

void dcr__pool_free(dcr__pool *p) {
  if (!p) return;
  if (p->threads) {
    pthread_mutex_lock(&p->lock);
    p->quit = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; i < p->threads; i++) pthread_join(p->workers[i], NULL);
  }
  if (p->workers && p->finished) {
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
  }
  free(p->workers);
  free(p->finished);
  free(p);
}
