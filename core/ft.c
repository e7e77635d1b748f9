/* Placeholder until the detector glue lands: fault tolerance refuses to
 * start rather than pretend. */
#include "core/ft.h"

#include <stdio.h>

#include "core/node.h"
#include "phx_err.h"

int phx_ft_init(phx_node_t *n)
{
    if (!n->cfg.ft)
        return 0;
    fprintf(stderr, "phalanx: fault tolerance is not available in this build\n");
    return PHX_EINVAL;
}

void phx_ft_start(phx_node_t *n) { (void)n; }
void phx_ft_on_frame(phx_node_t *n, int peer, const phx_frame_hdr_t *h, const uint8_t *payload)
{
    (void)n; (void)peer; (void)h; (void)payload;
}
void phx_ft_on_peer_down(phx_node_t *n, int peer) { (void)n; (void)peer; }
void phx_ft_stop(phx_node_t *n) { (void)n; }
void phx_ft_free(phx_node_t *n) { (void)n; }
