/* TCP transport: one authenticated connection per node pair.
 *
 * Rule for who dials: the higher rank connects, the lower accepts, so every
 * pair gets exactly one connection and no dial races. Dials retry with
 * exponential backoff until the startup timeout, then fail naming host:port.
 * A connection carries only HELLO/AUTH frames until the handshake (net/auth.h)
 * succeeds; frames queued for a peer before that wait in its buffer.
 *
 * Link recovery (net/link.h, net/README.md): a connection between two up
 * peers that drops is redialled the same way and the handshake re-run; every
 * frame the peer had not acknowledged is resent and duplicates are dropped,
 * so nothing is lost or delivered twice. Sends queue meanwhile. Only a link
 * not restored within hb-timeout reaches on_peer_down. A peer whose
 * connections keep failing (bad frames, failed authentication) is refused
 * after a bounded number of them.
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

#include "net/frame.h"
#include "net/net_cfg.h"

typedef struct phx_net phx_net_t;

/* PHX_FT_CTRL tags below 16 belong to the transport; the node uses the rest. */
#define PHX_NET_CTRL_BYE 1

typedef struct phx_net_cb {
    void *ctx;
    /* A verified frame from an authenticated peer. payload lives until return. */
    void (*on_frame)(void *ctx, int peer, const phx_frame_hdr_t *h, const uint8_t *payload);
    /* Handshake with peer completed; its incarnation from HELLO. */
    void (*on_peer_up)(void *ctx, int peer, uint32_t inc);
    /* The link to an up peer is gone: graceful, it sent BYE; otherwise it
     * was not restored within hb-timeout (redialling goes on) or the peer
     * was refused for bad connections. Once per outage. */
    void (*on_peer_down)(void *ctx, int peer, int graceful, const char *why);
    /* End of one read's worth of frames (lets the node batch hand-offs). */
    void (*on_read_end)(void *ctx);
    /* Every peer is up (once). */
    void (*on_all_up)(void *ctx);
    /* The link to peer stayed down for 3 hb-timeouts (or the peer was
     * refused 2 hb-timeouts ago) and nothing declared it dead: the failure
     * detector cannot see a broken link between two non-neighbours, so the
     * node must resolve it. Returns > 0 to be asked again an hb-timeout
     * later (the detector is still busy declaring failures). Optional. */
    int (*on_link_failed)(void *ctx, int peer);
    /* charge units given to phx_net_send for this peer were acknowledged by
     * it (or dropped with a dead peer): the backpressure bound covers
     * unacknowledged frames kept for resend. */
    void (*on_drain)(void *ctx, int peer, uint64_t charge);
    /* Optional, zero-copy receive. A frame of at least PHX_NET_ZC_MIN
     * payload bytes from an up peer, next in its link's order, is arriving;
     * its header (not yet verified) and first PHX_NET_ZC_HEAD payload bytes
     * are in. Return where payload bytes [PHX_NET_ZC_HEAD, h->len) are to
     * be received (its final home), or NULL to take it as usual. Must have
     * no effect but choosing (the frame may yet fail its checksum). *tok is
     * the caller's. A claim ends with exactly one on_claimed: ok = 1, the
     * frame is whole and verified (head: its first PHX_NET_ZC_HEAD payload
     * bytes, the rest in place; in lieu of on_frame), or ok = 0, dropped
     * (bad checksum, connection lost, duplicate; it will be resent) and the
     * buffer is free again. phx_net_unclaim ends a claim early. */
    uint8_t *(*on_claim)(void *ctx, int peer, const phx_frame_hdr_t *h, const uint8_t *head, void **tok);
    void (*on_claimed)(void *ctx, int peer, const phx_frame_hdr_t *h, const uint8_t *head, void *tok, int ok);
    /* Fatal error: startup (bind failed, peer unreachable by the deadline or
     * failing authentication) or no memory to keep frames for resend. */
    void (*on_fatal)(void *ctx, int code, const char *why);
} phx_net_cb_t;

/* Binds the listener and starts dialling. cfg and secret are copied
 * (cfg->peers stays the caller's). Returns 0 or a negative code (bind
 * failure is reported here, not through on_fatal). */
int phx_net_start(uv_loop_t *loop, const phx_net_cfg_t *cfg, const uint8_t *secret,
                  size_t secret_len, uint32_t inc, const phx_net_cb_t *cb, phx_net_t **out);
/* Rejoin (cfg->rejoin): a rank declared dead is accepted
 * again, with on_peer_up, when it comes back with a higher incarnation; a
 * new incarnation of a rank not yet declared dead is refused (and reported
 * down) until it is. A node started with inc > 0 dials every peer. */
/* The rejoining node was taken in: from now on only the higher rank of a
 * pair redials, as usual. */
void phx_net_rejoined(phx_net_t *n);
/* Frames dropped because they carried another incarnation than the peer's
 * current one. */
uint64_t phx_net_stale_frames(const phx_net_t *n);
/* Counters for /metrics (comm thread). Rejected frames by reason: a bad
 * HELLO or secret (auth), a frame failing its CRC (checksum), any other
 * protocol violation (malformed), a link sequence gap or an ack for a frame
 * never sent (sequence), a frame of another incarnation (stale). */
enum { PHX_NET_REJ_AUTH, PHX_NET_REJ_CHECKSUM, PHX_NET_REJ_MALFORMED, PHX_NET_REJ_SEQUENCE,
       PHX_NET_REJ_STALE, PHX_NET_REJ_N };
typedef struct phx_net_counters {
    uint64_t rejected[PHX_NET_REJ_N];
    uint64_t links_restored;   /* a live peer's link back after its connection broke */
} phx_net_counters_t;
void phx_net_counters(const phx_net_t *n, phx_net_counters_t *out);
/* Loop time (uv_now, ms) of the last bytes read from peer; 0: never. */
uint64_t phx_net_last_heard_ms(const phx_net_t *n, int peer);

/* Queues one frame to peer: h's type, src, dst, ssn and tag are used; len is
 * prefix_len + len and inc is the node's. The prefix (e.g. a termination
 * detector piggyback) and payload are copied. charge is reported back through
 * on_drain once written. charge == PHX_NET_URGENT puts the frame in the
 * peer's urgent lane instead, written ahead of queued frames (heartbeats must
 * not wait behind application data); urgent frames are not ordered with the
 * others. A link being restored queues the frame. Returns 0, or PHX_EDEAD if
 * the peer is closed, refused or left. */
#define PHX_NET_URGENT UINT64_MAX
int phx_net_send(phx_net_t *n, int peer, phx_frame_hdr_t *h, const void *prefix,
                 size_t prefix_len, const void *payload, size_t len, uint64_t charge);

/* Zero-copy phx_net_send for large payloads: the payload is not copied
 * but written from where it is (one writev with the queued frames) and
 * referenced until the peer acknowledges the frame (it may be resent after
 * a reconnect); then release(arg) runs, once, on the comm thread. It also
 * runs when the frame is dropped with a dead peer, on an error return, and
 * at once for a payload below PHX_NET_ZC_MIN or an urgent frame (those are
 * copied; PHX_DEBUG_ZC_MIN=BYTES lowers the threshold for tests). The
 * payload must stay unchanged until release. payload_crc: NULL, or
 * phx_crc32c(0, payload, len) where the caller summed the payload already
 * (while copying it in: phx_crc32c_copy); the frame's checksum is then made
 * without reading the payload. A wrong one gets every frame of it refused. */
#define PHX_NET_ZC_MIN (64u << 10)
int phx_net_send_ref(phx_net_t *n, int peer, phx_frame_hdr_t *h, const void *prefix, size_t prefix_len,
                     const void *payload, size_t len, const uint32_t *payload_crc, uint64_t charge,
                     void (*release)(void *arg), void *arg);

#define PHX_NET_ZC_HEAD 64
/* The caller is about to free or reuse the buffer it gave on_claim for
 * peer's frame in progress (if any): the rest of that frame is read into
 * scratch memory, checked and acknowledged, and not delivered; no
 * on_claimed follows. */
void phx_net_unclaim(phx_net_t *n, int peer);

/* Writes every queued frame now rather than at the loop's prepare phase:
 * for a caller about to hold the comm thread (a checkpoint's serialisation
 * must not hold back the markers it just sent). */
void phx_net_flush(phx_net_t *n);

/* Closes the connection to peer and refuses it from now on (a dead or fenced
 * node); frames queued or kept for resend are dropped. Idempotent. */
void phx_net_close_peer(phx_net_t *n, int peer, const char *why);
/* Comm thread: 1 if the link to peer is down and a redial (or, from the
 * side that does not redial, a probe) was refused (nothing listens on its
 * port: the process is gone, so on_peer_down came at once rather than
 * after hb-timeout); 0 otherwise. */
int phx_net_peer_gone(const phx_net_t *n, int peer);
/* Comm thread, from on_frame: peer sent a well-framed message that its
 * protocol rejects. Drops that connection as a violation (logged, counted
 * against the peer) without declaring anything: the link is restored, and a
 * peer that keeps doing it is refused and left to the failure detector, so
 * a live peer is never silently cut off. */
void phx_net_reject(phx_net_t *n, int peer, const char *why);
/* phx_net_close_peer for incarnation inc of peer: a no-op once a newer
 * incarnation was taken in (a late notice must not cut off the newcomer). */
void phx_net_close_inc(phx_net_t *n, int peer, uint32_t inc, const char *why);
/* Incarnation inc of peer is a member (a recovery round took it in) while
 * this node's transport still knows an older one, alive as far as it can
 * tell (a newcomer has no detector yet): the old stream goes, and frames
 * sent from now on wait for inc's connection, which is admitted. A no-op
 * for a dead peer or one already at inc. */
void phx_net_take_inc(phx_net_t *n, int peer, uint32_t inc);
/* 1 if peer joined the job and is neither closed, refused nor gone: its
 * link may be down for the moment and being restored. */
int phx_net_peer_up(const phx_net_t *n, int peer);
/* Comm thread: 1 if the link to peer is down and the peer's host said so
 * (the connection was closed or reset by it, or a redial refused): the
 * peer's process ended; a partition or a stopped process shows only
 * silence, and gives 0. */
int phx_net_peer_reached(const phx_net_t *n, int peer);
/* 1 if an authenticated connection to peer is open right now. */
int phx_net_peer_connected(const phx_net_t *n, int peer);
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
