/* The services a node runs beside its workers (failure detection,
 * termination detection, agreement, recovery, metrics, the launcher's
 * lifeline), as the node's ending and its failure notices see them: a
 * table walked in order, never a list of names. core/main.c builds the
 * table (n->svc); core/failures.c walks it for a failure notice and
 * core/ending.c for the stop, so neither depends on any service, and a
 * service reaches the node only through phx_node_exit and
 * phx_node_notify_dead (core/node.h), below it.
 *
 * Order matters and is the table's: a failure notice goes to metrics first
 * (the detection latency, read before anything acts on the notice), then
 * termination detection (fail-flush: nothing of the dead is counted after
 * its notice), then agreement, then recovery (which may take the loss over),
 * then the program's failure callbacks, then every after_failure; the stop
 * runs in table order too.
 *
 * Threads: every hook runs on the comm thread. */
#ifndef PHX_CORE_SERVICE_H
#define PHX_CORE_SERVICE_H

typedef struct phx_node phx_node_t;

typedef struct phx_service {
    const char *name;
    /* Rank was declared dead; its connection is closed already. < 0: the
     * service cannot cover the loss (the job ends with PHX_EXIT_WORK_LOST);
     * > 0: it recovers the dead node's work, so exit 0 stays honest; 0:
     * neither. Optional. */
    int (*on_failure)(phx_node_t *n, int rank);
    /* After every on_failure and the program's failure callbacks. Optional. */
    void (*after_failure)(phx_node_t *n);
    /* The job is ending (phx_node_exit): stop timers, close handles. The
     * teardown after the loop (core/shutdown.c) frees. Optional. */
    void (*stop)(phx_node_t *n);
} phx_service_t;

#endif
