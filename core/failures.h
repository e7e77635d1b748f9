/* The dead list and what hangs on it: the failure callbacks a program
 * registers (phx_on_failure) and phx_node_notify_dead (core/node.h), which
 * tells the services through their table (core/service.h). The exit code
 * that must not claim a complete result when work died with a node is
 * core/ending.c's; failure acknowledgement (phx_failure_ack) is
 * core/agree.c's, which holds the acknowledged set.
 *
 * Threads: n->dead and n->ndead are written on the comm thread and read by
 * any thread under n->dead_lock; callbacks are registered before phx_main. */
#ifndef PHX_CORE_FAILURES_H
#define PHX_CORE_FAILURES_H

typedef struct phx_node phx_node_t;

/* In phx_main before any thread starts: the dead list, and failures count
 * as covered if the program handles them itself. 0 or PHX_ENOMEM. */
int phx_failures_init(phx_node_t *n);
/* After the loop. */
void phx_failures_free(phx_node_t *n);

#endif
