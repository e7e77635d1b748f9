/* The last step of an application message on its way out (comm thread):
 * the recovery mode sees it (logging modes keep a copy), then the
 * transport takes it. Both the outbox (core/outbox.c) and the termination
 * detector's release of a message it held (core/term.c) end here. */
#ifndef PHX_CORE_SEND_H
#define PHX_CORE_SEND_H

#include <stddef.h>
#include <stdint.h>

#include "core/msg.h"

typedef struct phx_node phx_node_t;

/* Sends application message m with the detector's piggyback pb (pbsz
 * bytes) and gives it up: a large payload is written from m itself, which
 * the transport frees once the peer acknowledged it. */
void phx_send_msg(phx_node_t *n, phx_msg_t *m, const uint8_t *pb, size_t pbsz);

#endif
