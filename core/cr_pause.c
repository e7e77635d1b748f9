/* recovery=cr: pausing the workers at handler boundaries (a checkpoint's
 * cut, a recovery round) and telling the comm thread once all are parked. */
#include <pthread.h>

#include "core/cr_int.h"

void cr_pause_workers(cr_t *c)
{
    phx_node_t *n = c->n;
    if (atomic_load(&n->rec_pause))
        return;
    c->pause.paused = 0;
    atomic_store(&n->rec_pause, 1);
    for (int i = 0; i < n->nworkers; i++)
        phx_worker_wake(&n->workers[i]);
}

void cr_resume_workers(cr_t *c)
{
    pthread_mutex_lock(&c->pause.mu);
    c->pause.gen++;
    atomic_store(&c->n->rec_pause, 0);
    c->pause.paused = 0;
    pthread_cond_broadcast(&c->pause.cv);
    pthread_mutex_unlock(&c->pause.mu);
}

/* Under mu: every worker is parked in the current generation. */
static int all_paused(const cr_t *c)
{
    for (int i = 0; i < c->n->nworkers; i++)
        if (c->pause.wgen[i] != c->pause.gen)
            return 0;
    return atomic_load(&c->n->rec_pause);
}

void cr_worker_pause(void *st, phx_worker_t *w, struct cds_wfcq_head *lh, struct cds_wfcq_tail *lt)
{
    cr_t *c = st;
    pthread_mutex_lock(&c->pause.mu);
    uint64_t g = c->pause.gen;
    c->pause.lh[w->id] = lh;
    c->pause.lt[w->id] = lt;
    c->pause.wgen[w->id] = g;
    if (all_paused(c))
        uv_async_send(&c->pause.async);
    /* Released by a resume (new generation), even if another pause
     * follows at once: then the worker comes back here for it. */
    while (c->pause.gen == g && !atomic_load(&c->n->stopping))
        pthread_cond_wait(&c->pause.cv, &c->pause.mu);
    c->pause.wgen[w->id] = 0;
    pthread_mutex_unlock(&c->pause.mu);
}

void cr_on_async(uv_async_t *a)
{
    cr_t *c = a->data;
    pthread_mutex_lock(&c->pause.mu);
    int all = all_paused(c);
    pthread_mutex_unlock(&c->pause.mu);
    if (all && !c->pause.paused) {
        c->pause.paused = 1;
        cr_progress(c);
    }
}

