/* Application frames coming in: checked, copied (or received zero-copy
 * into their message: the transport's claim hooks) and queued for their
 * worker; plus the resumption of reads paused for inbound flow control.
 * Comm thread only. */
#ifndef PHX_CORE_INBOUND_H
#define PHX_CORE_INBOUND_H

#include <stdint.h>

#include "net/frame.h"

typedef struct phx_node phx_node_t;

/* A PHX_FT_APP or PHX_FT_SPAWN frame from peer, whole in payload. */
void phx_inbound_app(phx_node_t *n, int peer, const phx_frame_hdr_t *h, const uint8_t *payload);
/* phx_net_cb_t.on_claim / on_claimed (ctx: the node): a large application
 * frame lands in its message buffer; recovery frames go to the mode. */
uint8_t *phx_inbound_claim(void *ctx, int peer, const phx_frame_hdr_t *h, const uint8_t *head, void **tok);
void phx_inbound_claimed(void *ctx, int peer, const phx_frame_hdr_t *h, const uint8_t *head, void *tok, int ok);
/* Resumes paused reads once the workers handled half of recv-buffer. */
void phx_inbound_resume(phx_node_t *n);

#endif
