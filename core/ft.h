/* Failure detection inside the node (issue: ring heartbeats + hypercube
 * broadcast, ft/hb). Glue between the pure state machine and the node's
 * loop, timers and transport. Comm thread only, unless stated otherwise.
 *
 * The node calls these hooks; ft.c owns everything behind them. With
 * fault tolerance off (cfg.ft == 0) every hook is a no-op. */
#ifndef PHX_CORE_FT_H
#define PHX_CORE_FT_H

#include <stdint.h>

#include "net/frame.h"

typedef struct phx_node phx_node_t;
typedef struct phx_ft phx_ft_t;

/* After the transport started; allocates n->ft. Returns 0 or a negative code. */
int phx_ft_init(phx_node_t *n);
/* Every peer connected: start heartbeating. */
void phx_ft_start(phx_node_t *n);
/* A PHX_FT_HB or PHX_FT_BCAST frame from peer. */
void phx_ft_on_frame(phx_node_t *n, int peer, const phx_frame_hdr_t *h, const uint8_t *payload);
/* A connection to peer broke without BYE (a hint, not a verdict). */
void phx_ft_on_peer_down(phx_node_t *n, int peer);
/* Comm thread: a new incarnation of peer completed its handshake. Its old
 * process is over, so a notice held back as silence-only (partition
 * fencing, ft/fence) is delivered now, before the newcomer is taken in. */
void phx_ft_on_peer_up(phx_node_t *n, int peer);
/* The transport could not restore the link to a peer nothing declared dead. */
int phx_ft_on_link_failed(phx_node_t *n, int peer);
/* A rank rejoined (recovery=cr): replace the detector by one of membership
 * view `view` whose dead set is dead[0..size) (no notices), and start it.
 * inc (NULL, or size entries, 0 for none): the incarnations taken in; the
 * new detector knows them and every incarnation the old one heard from.
 * Every member calls it at the same point of the agreed round. */
int phx_ft_new_view(phx_node_t *n, uint16_t view, const uint8_t *dead, const uint32_t *inc);
/* The job is ending: stop timers, close handles (uv_close). */
void phx_ft_stop(phx_node_t *n);
/* Comm thread: the detector's counters (for core/metrics.c); PHX_ENOENT
 * while fault tolerance is off. */
struct phx_ft_hb_stats;
int phx_ft_get_stats(phx_node_t *n, struct phx_ft_hb_stats *out);
/* After the loop ended: free everything. */
void phx_ft_free(phx_node_t *n);

#endif
