/* Agreement inside the node (ERA, ft/era): glue between the pure state
 * machine and the node's transport, failure notices and the worker threads
 * that call phx_agree. Comm thread only, unless stated otherwise. */
#ifndef PHX_CORE_AGREE_H
#define PHX_CORE_AGREE_H

#include <stdint.h>

#include "net/frame.h"

typedef struct phx_node phx_node_t;
typedef struct phx_agree phx_agree_t;

/* After the transport started; allocates n->agree. 0 or a negative code. */
int phx_agree_init(phx_node_t *n);
/* A PHX_FT_ERA frame from peer. */
void phx_agree_on_frame(phx_node_t *n, int peer, const phx_frame_hdr_t *h, const uint8_t *payload);
/* Failure notice (from phx_node_notify_dead). */
void phx_agree_on_failure(phx_node_t *n, int rank);
/* The node's one acknowledged-failures state (phx_failure_ack, agreements,
 * groups). Any thread. ack: acknowledges ranks[0..k); 0 or PHX_EINVAL
 * before init. count_acked: how many of ranks[0..k) are acknowledged. */
int phx_agree_ack(phx_node_t *n, const int *ranks, int k);
int phx_agree_count_acked(phx_node_t *n, const int *ranks, int k);
/* The job is ending: fail pending calls, close handles. */
void phx_agree_stop(phx_node_t *n);
/* After the loop ended. */
void phx_agree_free(phx_node_t *n);

#endif
