/* Inline mode: see core/inline.h. */
#include <stdio.h>
#include <stdlib.h>

#include "core/inline.h"
#include "core/node.h"
#include "base/phx_err.h"
#include "base/phx_log.h"

int phx_inline_check(phx_node_t *n)
{
    if (n->cfg.workers != 0 || n->cfg.rec_family == PHX_REC_NONE)
        return 0;
    fprintf(stderr, "phalanx: workers=0 (inline mode) runs the handlers on the communication thread, "
                    "and recovery=%s pauses worker threads: use workers >= 1 (or auto) with it\n",
            n->cfg.recovery);
    return PHX_EINVAL;
}

int phx_inline_init(phx_node_t *n, uv_idle_cb turn)
{
    phx_worker_t *w = &n->workers[0];
    w->pool = NULL;   /* allocations come from the comm thread's pool */
    w->processed = calloc((size_t)n->size, sizeof *w->processed);
    w->touched = calloc((size_t)n->size, sizeof *w->touched);
    if (!w->processed || !w->touched)
        return PHX_ENOMEM;
    cds_wfcq_init(&n->inl_h, &n->inl_t);
    n->comm_th = pthread_self();
    uv_idle_init(&n->loop, &n->inl_idle);
    n->inl_idle.data = n;
    n->inl_turn = turn;
    n->inl_open = 1;
    PHX_INFO("node", "inline mode: handlers run on the communication thread, no worker threads");
    return 0;
}

void phx_inline_wake(phx_node_t *n)
{
    if (!pthread_equal(pthread_self(), n->comm_th)) {
        uv_async_send(&n->async);   /* on_async wakes us on the loop */
        return;
    }
    if (n->inl_open && !uv_is_active((uv_handle_t *)&n->inl_idle))
        uv_idle_start(&n->inl_idle, n->inl_turn);
}

static void idle_closed(uv_handle_t *h)
{
    phx_node_t *n = h->data;
    struct cds_wfcq_node *qn;
    while ((qn = __cds_wfcq_dequeue_blocking(&n->inl_h, &n->inl_t)))
        phx_msg_free(caa_container_of(qn, phx_msg_t, qn));
}

void phx_inline_stop(phx_node_t *n)
{
    if (!n->inl_open)
        return;
    n->inl_open = 0;
    uv_close((uv_handle_t *)&n->inl_idle, idle_closed);
}
