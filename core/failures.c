/* The dead list, failure callbacks and honest exit codes: see
 * core/failures.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/metrics.h"
#include "core/node.h"
#include "core/agree.h"
#include "core/failures.h"
#include "core/recovery.h"
#include "core/term.h"
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

/* The dead list now, malloc'd into *out (NULL when empty); count or
 * PHX_ENOMEM. */
static int dead_snapshot(phx_node_t *n, int **out)
{
    pthread_mutex_lock(&n->dead_lock);
    int k = n->ndead;
    int *l = k ? malloc((size_t)k * sizeof *l) : NULL;
    if (l)
        memcpy(l, n->dead, (size_t)k * sizeof *l);
    pthread_mutex_unlock(&n->dead_lock);
    *out = l;
    return k && !l ? PHX_ENOMEM : k;
}

/* Acknowledged failures live in ONE state, core/agree.c's, which also
 * feeds every agreement and group. ack: acknowledge the dead known now and
 * return their number; else return how many of them are not acknowledged. */
static int dead_ack(int ack)
{
    phx_node_t *n = phx_node_current;
    int *l;
    int k = n ? dead_snapshot(n, &l) : 0;
    if (k <= 0)
        return k;
    int rc = ack ? phx_agree_ack(n, l, k) : phx_agree_count_acked(n, l, k);
    free(l);
    return rc < 0 ? rc : ack ? k : k - rc;
}

int phx_failure_ack(void) { return dead_ack(1); }
int phx_failures_unacked(void) { return dead_ack(0); }

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
     * detectors below). */
    phx_net_close_inc(n->net, rank, inc, "declared dead");
    phx_metrics_on_failure(n, rank);
    pthread_mutex_lock(&n->dead_lock);
    if (n->ndead < n->size)
        n->dead[n->ndead++] = rank;
    pthread_mutex_unlock(&n->dead_lock);
    phx_term_on_failure(n, rank);
    phx_agree_on_failure(n, rank);
    /* A recovery mode that takes the loss over makes the job's result whole
     * again (or ends it itself with its own code): exit 0 stays honest. */
    int rc = phx_recovery_on_failure(n, rank);
    if (rc < 0) {
        PHX_ERROR("node", "recovery cannot handle the loss of rank %d: %s", rank, phx_strerror(rc));
        phx_node_exit(n, PHX_EXIT_WORK_LOST, 1);
    } else if (rc > 0) {
        atomic_store(&n->failures_covered, 1);
    } else if (!phx_nfail_cbs && !n->cfg.keep_going) {
        /* Nothing covers the loss and nothing handles it: the result can no
         * longer be complete, so the job ends now rather than after the
         * survivors' share of the work (unbounded for fib, say). */
        PHX_INFO("node", "rank %d died and nothing covers its work: ending the job (exit %d, work lost)", rank,
                 PHX_EXIT_WORK_LOST);
        phx_node_exit(n, PHX_EXIT_WORK_LOST, 1);
    }
    for (int i = 0; i < phx_nfail_cbs; i++)
        phx_fail_cbs[i].fn(phx_fail_cbs[i].arg, rank, inc, when_ns);
    phx_term_poll(n);
}

/* Exit code 0 is a claim that the job's result is complete. Work on a node
 * that died is gone unless something covered it (failures_covered). */
int phx_failures_exit_code(phx_node_t *n, int code)
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
