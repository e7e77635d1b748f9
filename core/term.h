/* Termination detection inside the node: glue between the pure detector
 * chosen by cfg.td (ft/termination) and the node's outbox, inbound path and
 * failure notices. Comm thread only.
 *
 * term.c owns n->td, n->td_st, n->td_busy, n->td_held_new, n->td_held and
 * the self-addressed queue; with td=none every hook is a no-op. */
#ifndef PHX_CORE_TERM_H
#define PHX_CORE_TERM_H

#include <stddef.h>
#include <stdint.h>

#include "core/msg.h"

typedef struct phx_node phx_node_t;

/* Before the loop, after cfg and rank are set: creates the detector named
 * by cfg.td. 0, or nonzero with the reason printed (a bad name, its create
 * error). */
int phx_term_create(phx_node_t *n);
/* Before the loop runs: starts it; rank 0 holds the initial work. */
void phx_term_start(phx_node_t *n);
/* Bytes of piggyback every application frame carries (0 without one). */
size_t phx_term_pb_size(const phx_node_t *n);
/* An application message m is leaving: fills pb. Returns 0 (send it now
 * with pb), 1 (held: the detector owns m and releases it through the
 * outbox, and it no longer counts as local work) or a negative code (it
 * cannot be accounted: the job is ending, m is the caller's to drop). */
int phx_term_on_send(phx_node_t *n, phx_msg_t *m, uint8_t *pb);
/* An application message from peer arrived with piggyback pb. */
void phx_term_on_recv(phx_node_t *n, int peer, const uint8_t *pb);
/* A PHX_FT_TD frame from peer; returns 0 when no detector runs. */
int phx_term_on_frame(phx_node_t *n, int peer, const phx_frame_hdr_t *h, const uint8_t *payload);
/* rank is dead: tells the detector. */
void phx_term_on_failure(phx_node_t *n, int rank);
/* Reports finished remote messages, idleness or a finished task. */
void phx_term_poll(phx_node_t *n);
/* Delivers the detector's messages to itself, in order, after the call
 * that produced them has returned. */
void phx_term_flush(phx_node_t *n);
/* Writes the detector's counters as JSON members into buf (cap bytes;
 * "" without a detector); returns its name or "none". */
const char *phx_term_stats(phx_node_t *n, char *buf, size_t cap);
/* After the loop, before the transport and the pools go: frees the held
 * messages, the self-addressed queue and the detector. */
void phx_term_free(phx_node_t *n);

#endif
