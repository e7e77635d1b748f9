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

/* After the loop: frees what is still queued. */
void phx_outbox_free(phx_node_t *n);

#endif
