/* The dead list, failure callbacks and failure notices: see
 * core/failures.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/node.h"
#include "core/failures.h"
#include "core/service.h"
#include "base/phx_err.h"
#include "base/phx_log.h"

static struct { phx_failure_fn fn; void *arg; } phx_fail_cbs[8];
static int phx_nfail_cbs;

int phx_on_failure(phx_failure_fn fn, void *arg)
{
    if (!fn)
        return PHX_EINVAL;
    if (phx_nfail_cbs == 8)
        return PHX_ENOSPC;
    phx_fail_cbs[phx_nfail_cbs].fn = fn;
    phx_fail_cbs[phx_nfail_cbs++].arg = arg;
    return 0;
}

int phx_failed_nodes(int *out, int cap)
{
    phx_node_t *n = phx_node_current;
    if (!n)
        return 0;
    pthread_mutex_lock(&n->dead_lock);
    int k = n->ndead;
    for (int i = 0; i < k && i < cap; i++)
        out[i] = n->dead[i];
    pthread_mutex_unlock(&n->dead_lock);
    return k;
}

int phx_failures_init(phx_node_t *n)
{
    pthread_mutex_init(&n->dead_lock, NULL);
    n->dead = calloc((size_t)n->size, sizeof *n->dead);
    if (!n->dead)
        return PHX_ENOMEM;
    if (phx_nfail_cbs)
        atomic_store(&n->failures_covered, 1);   /* the program handles failures itself */
    return 0;
}

void phx_failures_free(phx_node_t *n) { free(n->dead); }

void phx_node_notify_dead(phx_node_t *n, int rank, uint32_t inc, uint64_t when_ns)
{
    if (atomic_load(&n->stopping))
        return;
    /* Order matters: the connection goes first, so nothing from the dead
     * incarnation is delivered after its notice (fail-flush for the
     * detectors the services run); then the services in their table's
     * order (core/service.h). */
    phx_net_close_inc(n->net, rank, inc, "declared dead");
    pthread_mutex_lock(&n->dead_lock);
    if (n->ndead < n->size)
        n->dead[n->ndead++] = rank;
    pthread_mutex_unlock(&n->dead_lock);
    int covered = 0, lost = 0;
    for (int i = 0; i < n->nsvc; i++) {
        const phx_service_t *s = &n->svc[i];
        int rc = s->on_failure ? s->on_failure(n, rank) : 0;
        /* A service that takes the loss over makes the job's result whole
         * again (or ends it itself with its own code): exit 0 stays honest. */
        if (rc < 0) {
            PHX_ERROR("node", "%s cannot handle the loss of rank %d: %s", s->name, rank, phx_strerror(rc));
            phx_node_exit(n, PHX_EXIT_WORK_LOST, 1);
            lost = 1;
        } else if (rc > 0) {
            atomic_store(&n->failures_covered, 1);
            covered = 1;
        }
    }
    if (!covered && !lost && !phx_nfail_cbs && !n->cfg.keep_going) {
        /* Nothing covers the loss and nothing handles it: the result can no
         * longer be complete, so the job ends now rather than after the
         * survivors' share of the work (unbounded for fib, say). */
        PHX_INFO("node", "rank %d died and nothing covers its work: ending the job (exit %d, work lost)", rank,
                 PHX_EXIT_WORK_LOST);
        phx_node_exit(n, PHX_EXIT_WORK_LOST, 1);
    }
    for (int i = 0; i < phx_nfail_cbs; i++)
        phx_fail_cbs[i].fn(phx_fail_cbs[i].arg, rank, inc, when_ns);
    for (int i = 0; i < n->nsvc; i++)
        if (n->svc[i].after_failure)
            n->svc[i].after_failure(n);
}
