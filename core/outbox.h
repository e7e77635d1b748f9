/* The outbox's consumer side: messages the workers queued (through
 * phx_node_enqueue_out) leave for the transport, run on the comm thread
 * (PHX_MK_CALL) or end the job (PHX_MK_EXIT); the sending itself is
 * core/send.h. Comm thread only; drained by
 * phx_node_drain_outbox (core/node.h). */
#ifndef PHX_CORE_OUTBOX_H
#define PHX_CORE_OUTBOX_H

#include <stdint.h>

#include "core/msg.h"

typedef struct phx_node phx_node_t;

/* A message taken from the outbox (any kind but PHX_MK_CALL) leaves: to
 * the transport, or it ends the job (PHX_MK_EXIT), or it is dropped once
 * the job is over; it stops counting as the node's work. The drain calls
 * it for each message the recovery mode's out_gate did not keep; the mode
 * calls it for those it kept, in their order, when it lets them go. */
void phx_outbox_send(phx_node_t *n, phx_msg_t *m);

/* After the loop: frees what is still queued. */
void phx_outbox_free(phx_node_t *n);

#endif
