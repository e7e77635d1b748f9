/* The end of a node: phx_node_exit (core/node.h, core/ending.c) starts it
 * on the comm thread; phx_shutdown_free, on the same thread once the loop
 * has returned, joins the workers and frees everything phx_main built. */
#ifndef PHX_CORE_SHUTDOWN_H
#define PHX_CORE_SHUTDOWN_H

typedef struct phx_node phx_node_t;

/* Comm thread, after uv_run returned (every handle closed): joins the
 * workers, prints PHX_STATS, frees in dependency order. */
void phx_shutdown_free(phx_node_t *n);

#endif
