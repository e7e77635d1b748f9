/* The outbox's consumer side: messages the workers queued (through
 * phx_node_enqueue_out) leave for the transport, run on the comm thread
 * (PHX_MK_CALL) or end the job (PHX_MK_EXIT). Comm thread only; drained by
 * phx_node_drain_outbox (core/node.h). */
#ifndef PHX_CORE_OUTBOX_H
#define PHX_CORE_OUTBOX_H

#include <stdint.h>

#include "core/msg.h"

typedef struct phx_node phx_node_t;

/* Sends application message m with piggyback pb and gives it up: a large
 * payload is written from m itself, which the transport frees once the
 * peer acknowledged it. */
void phx_outbox_send(phx_node_t *n, phx_msg_t *m, const uint8_t *pb);
/* After the loop: frees what is still queued. */
void phx_outbox_free(phx_node_t *n);

#endif
