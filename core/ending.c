/* The end of a node: phx_node_exit (core/node.h) and the exit code it
 * ends with, on the comm thread. It stops the services through their table
 * (core/service.h), never by name, so any of them may call it. The
 * teardown after the loop is core/shutdown.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/node.h"
#include "core/ctl_msg.h"
#include "core/eventlog.h"
#include "core/inline.h"
#include "core/service.h"
#include "base/phx_log.h"

/* Exit code 0 is a claim that the job's result is complete. Work on a node
 * that died is gone unless something covered it (failures_covered). */
static int honest_code(phx_node_t *n, int code)
{
    if (code != 0 || atomic_load(&n->failures_covered))
        return code;
    char list[256];
    size_t off = 0;
    int k, first_live = -1;
    uint8_t *dead = calloc((size_t)n->size, 1);   /* NULL: every survivor says it */
    pthread_mutex_lock(&n->dead_lock);
    k = n->ndead;
    for (int i = 0; i < k; i++) {
        if (off < sizeof list - 16)
            off += (size_t)snprintf(list + off, sizeof list - off, "%s%d", i ? "," : "", n->dead[i]);
        if (dead)
            dead[n->dead[i]] = 1;
    }
    pthread_mutex_unlock(&n->dead_lock);
    for (int r = 0; dead && r < n->size && first_live < 0; r++)
        if (!dead[r])
            first_live = r;
    free(dead);
    if (k == 0)
        return 0;
    /* Said once per job: by the lowest surviving rank (all agree on D). */
    if (first_live == n->rank || first_live < 0)
        PHX_ERROR("node", "rank(s) %s died and no recovery mode covers their work: it is lost; "
                          "exiting %d (work lost) instead of 0", list, PHX_EXIT_WORK_LOST);
    else
        PHX_INFO("node", "rank(s) %s died uncovered: exiting %d", list, PHX_EXIT_WORK_LOST);
    return PHX_EXIT_WORK_LOST;
}

static void closed_one(uv_handle_t *h) { (void)h; }

static void net_done(void *ctx)
{
    phx_node_t *n = ctx;
    n->net_stopped = 1;
}

void phx_node_exit(phx_node_t *n, int code, int propagate)
{
    if (atomic_exchange(&n->stopping, 1))
        return;
    code = honest_code(n, code);
    n->exit_code = code;
    phx_evlog("exit", "\"code\":%d", code);
    if (propagate && n->net) {
        for (int r = 0; r < n->size; r++) {
            if (r == n->rank || !phx_net_peer_up(n->net, r))
                continue;
            uint8_t b[PHX_CTL_EXIT_LEN];
            phx_ctl_exit_enc(b, code);
            phx_frame_hdr_t h = phx_frame_hdr(PHX_FT_CTRL, PHX_CTRL_EXIT, (uint64_t)n->rank, (uint64_t)r, sizeof b);
            /* Urgent lane: behind a backlog of application data the peer
             * would hear our heartbeats stop long before this, and take
             * the silence for a failure (or a partition). */
            int rc = phx_net_send(n->net, r, &h, NULL, 0, b, sizeof b, PHX_NET_URGENT);
            if (rc && rc != PHX_EDEAD)
                PHX_WARN("node", "the exit code was not sent to rank %d: %s", r, phx_strerror(rc));
        }
    }
    phx_inline_stop(n);
    for (int i = 0; i < n->nworkers && !n->inline_mode; i++) {
        phx_msg_t *m = phx_msg_alloc(0);
        if (!m)
            abort();   /* cannot stop workers cleanly without it */
        m->kind = PHX_MK_STOP;
        m->hdr.dst = 0;
        phx_worker_t *w = &n->workers[i];
        PHX_HANDOFF_RELEASE(m);
        cds_wfcq_enqueue(&w->ih, &w->it, &m->qn);
        phx_worker_wake(w);
    }
    pthread_mutex_lock(&n->bp_lock);
    pthread_cond_broadcast(&n->bp_cond);   /* blocked senders see stopping */
    pthread_mutex_unlock(&n->bp_lock);
    for (int i = 0; i < n->nsvc; i++)   /* in the table's order (core/service.h) */
        if (n->svc[i].stop)
            n->svc[i].stop(n);
    if (n->net)
        phx_net_stop(n->net, net_done, n);
    uv_close((uv_handle_t *)&n->async, closed_one);
}
