/* Placeholder until the ERA glue lands: agreement frames are refused. */
#include "core/agree.h"

#include "core/node.h"
#include "phx_log.h"

int phx_agree_init(phx_node_t *n) { (void)n; return 0; }

void phx_agree_on_frame(phx_node_t *n, int peer, const phx_frame_hdr_t *h, const uint8_t *payload)
{
    (void)h; (void)payload;
    phx_net_close_peer(n->net, peer, "agreement frame but agreement is not enabled");
}

void phx_agree_on_failure(phx_node_t *n, int rank) { (void)n; (void)rank; }
void phx_agree_stop(phx_node_t *n) { (void)n; }
void phx_agree_free(phx_node_t *n) { (void)n; }
