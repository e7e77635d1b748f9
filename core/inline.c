/* Inline mode: see core/inline.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/inline.h"
#include "core/inbound.h"
#include "core/node.h"
#include "core/term.h"
#include "base/phx_err.h"
#include "base/phx_log.h"

/* Handlers run per turn of the loop before the sockets are polled again:
 * large enough that a burst of local messages costs few turns, small
 * enough that acknowledgements and heartbeats are not held up behind it. */
#define INLINE_BUDGET 256

int phx_inline_check(phx_node_t *n)
{
    if (n->cfg.workers != 0 || !strcmp(n->cfg.recovery, "none"))
        return 0;
    fprintf(stderr, "phalanx: workers=0 (inline mode) runs the handlers on the communication thread, "
                    "and recovery=%s pauses worker threads: use workers >= 1 (or auto) with it\n",
            n->cfg.recovery);
    return PHX_EINVAL;
}

/* A peer holds more than send-buffer unacknowledged bytes. */
static int over_budget(phx_node_t *n)
{
    for (int r = 0; r < n->size; r++)
        if (atomic_load_explicit(&n->peer_out[r], memory_order_relaxed) > n->cfg.send_buffer)
            return 1;
    return 0;
}

static void on_idle(uv_idle_t *h)
{
    phx_node_t *n = h->data;
    phx_worker_t *w = &n->workers[0];
    n->activity++;
    if (n->inl_held && !over_budget(n))
        n->inl_held = 0;
    if (!n->inl_held)
        phx_worker_step(w, &n->inl_h, &n->inl_t, INLINE_BUDGET);
    /* What the handlers sent leaves in this turn (the transport writes at
     * the loop's prepare phase, right after), and idleness is looked at. */
    phx_node_drain_outbox(n);
    phx_term_poll(n);
    phx_inbound_resume(n);
    if (n->inl_held || (cds_wfcq_empty(&n->inl_h, &n->inl_t) && cds_wfcq_empty(&w->ih, &w->it)))
        uv_idle_stop(h);   /* woken by new messages, or by acks (on_drain) */
}

int phx_inline_init(phx_node_t *n)
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
        uv_idle_start(&n->inl_idle, on_idle);
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
