/* TCP transport: one authenticated connection per node pair.
 *
 * Rule for who dials: the higher rank connects, the lower accepts, so every
 * pair gets exactly one connection and no dial races. Dials retry with
 * exponential backoff until the startup timeout, then fail naming host:port.
 * A connection carries only HELLO/AUTH frames until the handshake (net/auth.h)
 * succeeds; frames queued for a peer before that wait in its buffer.
 *
 * Output is coalesced: phx_net_send appends to the peer's pending buffer and
 * the loop's prepare phase writes every dirty peer once per iteration, right
 * before the loop would block, so an idle queue adds no latency while a busy
 * one turns many frames into one write. A malformed frame closes only that
 * connection, with the reason logged.
 *
 * Threading: everything here runs on the communication thread (the thread
 * running the uv loop). Callbacks are invoked on that thread. */
#ifndef PHX_NET_TRANSPORT_H
#define PHX_NET_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/config.h"
#include "net/frame.h"

typedef struct phx_net phx_net_t;

/* PHX_FT_CTRL tags below 16 belong to the transport; the node uses the rest. */
#define PHX_NET_CTRL_BYE 1

typedef struct phx_net_cb {
    void *ctx;
    /* A verified frame from an authenticated peer. payload lives until return. */
    void (*on_frame)(void *ctx, int peer, const phx_frame_hdr_t *h, const uint8_t *payload);
    /* Handshake with peer completed; its incarnation from HELLO. */
    void (*on_peer_up)(void *ctx, int peer, uint32_t inc);
    /* Connection to an up peer ended. graceful: it sent BYE first. */
    void (*on_peer_down)(void *ctx, int peer, int graceful, const char *why);
    /* End of one read's worth of frames (lets the node batch hand-offs). */
    void (*on_read_end)(void *ctx);
    /* Every peer is up (once). */
    void (*on_all_up)(void *ctx);
    /* charge units given to phx_net_send for this peer have left the buffer. */
    void (*on_drain)(void *ctx, int peer, uint64_t charge);
    /* Fatal startup error (bind failed, peer unreachable by the deadline). */
    void (*on_fatal)(void *ctx, int code, const char *why);
} phx_net_cb_t;

/* Binds the listener and starts dialling. secret is copied. Returns 0 or a
 * negative code (bind failure is reported here, not through on_fatal). */
int phx_net_start(uv_loop_t *loop, const phx_config_t *cfg, const uint8_t *secret,
                  size_t secret_len, uint32_t inc, const phx_net_cb_t *cb, phx_net_t **out);

/* Queues one frame to peer: h's type, src, dst, ssn and tag are used; len is
 * prefix_len + len and inc is the node's. The prefix (e.g. a termination
 * detector piggyback) and payload are copied. charge is reported back through
 * on_drain once written. charge == PHX_NET_URGENT puts the frame in the
 * peer's urgent lane instead, written ahead of queued frames (heartbeats must
 * not wait behind application data); urgent frames are not ordered with the
 * others. Returns 0, or PHX_EDEAD if the peer is closed. */
#define PHX_NET_URGENT UINT64_MAX
int phx_net_send(phx_net_t *n, int peer, phx_frame_hdr_t *h, const void *prefix,
                 size_t prefix_len, const void *payload, size_t len, uint64_t charge);

/* Closes the connection to peer and refuses it from now on (a dead or fenced
 * node). Idempotent. */
void phx_net_close_peer(phx_net_t *n, int peer, const char *why);
int phx_net_peer_up(const phx_net_t *n, int peer);
/* Stops (1) or resumes (0) reading from every peer: inbound backpressure.
 * TCP flow control then holds the senders back. */
void phx_net_pause_reads(phx_net_t *n, int pause);
/* Bytes queued for peer and not yet written. */
uint64_t phx_net_queued(const phx_net_t *n, int peer);

/* Graceful end: BYE to every up peer, flush, shut down, close all handles.
 * done runs once every handle is closed; then phx_net_free may be called. */
void phx_net_stop(phx_net_t *n, void (*done)(void *ctx), void *ctx);
void phx_net_free(phx_net_t *n);

#endif
