/* Ending for sure: SIGTERM/SIGINT and the launcher's lifeline (stdin from
 * phx run reaching end of file) stop the node, bounded by a watchdog thread
 * that _exits hb-timeout + PHX_STOP_SLACK_MS later, since a handler stuck in
 * user code would otherwise keep the process alive. Comm thread only; the
 * handles are n->sigterm, n->sigint and n->lifeline. */
#ifndef PHX_CORE_LIFELINE_H
#define PHX_CORE_LIFELINE_H

typedef struct phx_node phx_node_t;

/* After the loop exists: SIGTERM and SIGINT stop the node. */
void phx_lifeline_signals(phx_node_t *n);
/* With PHX_LIFELINE=1 (phx run sets it), watches stdin for the launcher's
 * end. 0, or PHX_EIO (reason printed). With ft on, first tells a local
 * launcher (the parent, PHX_LAUNCHER_PID) so: one SIGUSR1, which phx run
 * takes to mean a node killed by a signal may be survived. */
int phx_lifeline_open(phx_node_t *n);
/* The job is ending: closes the signal and lifeline handles. */
void phx_lifeline_close(phx_node_t *n);

#endif
