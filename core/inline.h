/* Inline mode (workers = 0): no worker threads; the communication thread
 * runs the handlers itself, between its I/O, as a non-SMP Charm++ build or
 * one MPI rank per core does. A message crosses no thread: it is read,
 * handled and its replies written in one turn of the loop. For spinning
 * latency on few cores, where every hand-off between threads costs a
 * scheduler round.
 *
 * The node keeps one phx_worker_t (tasks are pinned to it, as usual) whose
 * inbox the loop drains through an idle handle, a bounded number of
 * messages per turn so that sockets and timers are served in between.
 * A handler runs on the loop: while it runs nothing else does (heartbeats
 * included: a handler that blocks or computes for longer than hb-timeout
 * gets its node suspected). Sends never block: a handler's sends are
 * queued, and no further handler runs while a peer holds more than
 * send-buffer unacknowledged bytes. Recovery modes pause worker threads
 * at handler boundaries and are refused here; agreements and group
 * operations (phx_agree and the rest), which wait in the handler for the
 * comm thread, return PHX_ENOTSUP.
 *
 * Comm thread only, unless stated otherwise. */
#ifndef PHX_CORE_INLINE_H
#define PHX_CORE_INLINE_H

#include <uv.h>

typedef struct phx_node phx_node_t;

/* phx_main, with the configuration loaded: 0, or PHX_EINVAL after printing
 * why inline mode cannot run this job. */
int phx_inline_check(phx_node_t *n);
/* phx_main, after the loop and worker 0's maps are set up: 0 or PHX_ENOMEM.
 * turn is one turn of the loop's handlers (core/main.c): it runs the
 * handlers and the services after them, so it lives above them, and this
 * file, which node.c and ending.c call, only starts and stops it. */
int phx_inline_init(phx_node_t *n, uv_idle_cb turn);
/* Any thread: the inbox, the outbox or the send budget changed; the loop
 * runs handlers at its next turn. */
void phx_inline_wake(phx_node_t *n);
/* The job ends: no handler runs any more; closes the handle (what is
 * still queued is freed once it is closed). */
void phx_inline_stop(phx_node_t *n);

#endif
