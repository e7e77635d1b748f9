/* The teardown after the loop (comm thread): see core/shutdown.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/node.h"
#include "core/agree.h"
#include "core/eventlog.h"
#include "core/failures.h"
#include "core/ft.h"
#include "core/metrics.h"
#include "core/outbox.h"
#include "core/recovery.h"
#include "core/shutdown.h"
#include "core/term.h"

static void free_worker_state(phx_worker_t *w)
{
    struct cds_wfcq_node *qn;
    while ((qn = __cds_wfcq_dequeue_blocking(&w->ih, &w->it)))
        phx_msg_free(caa_container_of(qn, phx_msg_t, qn));
    for (size_t i = 0; i < w->tasks.cap; i++) {
        if (!w->tasks.keys[i])
            continue;
        phx_task_free((phx_task_t *)(uintptr_t)w->tasks.vals[i]);
    }
    for (size_t i = 0; i < w->pending.cap; i++) {
        phx_msg_t *m = w->pending.keys[i] ? (phx_msg_t *)(uintptr_t)w->pending.vals[i] : NULL;
        while (m) {
            phx_msg_t *x = m;
            m = (phx_msg_t *)m->qn.next;
            phx_msg_free(x);
        }
    }
    phx_map_free(&w->tasks);
    phx_map_free(&w->pending);
    phx_map_free(&w->gone);
}

static void print_stats(phx_node_t *n)
{
    phx_stats_t s;
    phx_get_stats(NULL, &s);
    char td[512];
    const char *name = phx_term_stats(n, td, sizeof td);
    fprintf(stderr,
            "{\"stats\":{\"rank\":%d,\"msgs_sent\":%llu,\"msgs_recv\":%llu,\"bytes_sent\":%llu,"
            "\"bytes_recv\":%llu,\"tasks\":%llu,\"deliveries\":%llu,\"reordered\":%llu,"
            "\"td\":\"%s\",\"td_ctrl\":{%s}}}\n",
            n->rank, (unsigned long long)s.msgs_sent, (unsigned long long)s.msgs_recv,
            (unsigned long long)s.bytes_sent, (unsigned long long)s.bytes_recv,
            (unsigned long long)s.tasks_created, (unsigned long long)s.deliveries,
            (unsigned long long)s.reordered, name, td);
}

void phx_shutdown_free(phx_node_t *n)
{
    for (int i = 0; i < n->nworkers && !n->inline_mode; i++)
        pthread_join(n->workers[i].th, NULL);
    if (getenv("PHX_STATS"))
        print_stats(n);
    phx_outbox_free(n);
    phx_term_free(n);
    struct cds_wfcq_node *qn;
    for (int i = 0; i < n->nworkers; i++) {
        while ((qn = __cds_wfcq_dequeue_blocking(&n->batch_h[i], &n->batch_t[i])))
            phx_msg_free(caa_container_of(qn, phx_msg_t, qn));
        free_worker_state(&n->workers[i]);
    }
    /* Frames kept for resend may still reference workers' messages
     * (zero-copy sends): released before their pools go. */
    phx_net_free(n->net);
    n->net = NULL;
    for (int i = 0; i < n->nworkers; i++)
        phx_pool_destroy(n->workers[i].pool);
    phx_metrics_free(n);
    phx_ft_free(n);
    phx_agree_free(n);
    phx_recovery_free(n);
    uv_loop_close(&n->loop);
    phx_pool_destroy(n->pool);
    for (int i = 0; i < n->nworkers; i++) {
        free(n->workers[i].processed);
        free(n->workers[i].touched);
    }
    free(n->workers);
    free(n->batch_h);
    free(n->batch_t);
    free(n->batch_n);
    free(n->batch_touched);
    free(n->processed);
    free(n->peer_out);
    phx_failures_free(n);
    phx_config_free(&n->cfg);
    phx_evlog_close();
    phx_node_current = NULL;
}
