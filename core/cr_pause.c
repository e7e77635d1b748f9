/* recovery=cr: pausing the workers at handler boundaries (a checkpoint's
 * cut, a recovery round) and telling the comm thread once all are parked. */
#include <pthread.h>

#include "core/cr_int.h"

void cr_pause_workers(cr_t *c)
{
    phx_node_t *n = c->n;
    if (atomic_load(&n->rec_pause))
        return;
    c->paused = 0;
    atomic_store(&n->rec_pause, 1);
    for (int i = 0; i < n->nworkers; i++)
        phx_worker_wake(&n->workers[i]);
}

void cr_resume_workers(cr_t *c)
{
    pthread_mutex_lock(&c->mu);
    c->gen++;
    atomic_store(&c->n->rec_pause, 0);
    c->paused = 0;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* Under mu: every worker is parked in the current generation. */
static int all_paused(const cr_t *c)
{
    for (int i = 0; i < c->n->nworkers; i++)
        if (c->wgen[i] != c->gen)
            return 0;
    return atomic_load(&c->n->rec_pause);
}

void cr_worker_pause(void *st, phx_worker_t *w, struct cds_wfcq_head *lh, struct cds_wfcq_tail *lt)
{
    cr_t *c = st;
    pthread_mutex_lock(&c->mu);
    uint64_t g = c->gen;
    c->lh[w->id] = lh;
    c->lt[w->id] = lt;
    c->wgen[w->id] = g;
    if (all_paused(c))
        uv_async_send(&c->async);
    /* Released by a resume (new generation), even if another pause
     * follows at once: then the worker comes back here for it. */
    while (c->gen == g && !atomic_load(&c->n->stopping))
        pthread_cond_wait(&c->cv, &c->mu);
    c->wgen[w->id] = 0;
    pthread_mutex_unlock(&c->mu);
}

void cr_on_async(uv_async_t *a)
{
    cr_t *c = a->data;
    pthread_mutex_lock(&c->mu);
    int all = all_paused(c);
    pthread_mutex_unlock(&c->mu);
    if (all && !c->paused) {
        c->paused = 1;
        cr_progress(c);
    }
}

