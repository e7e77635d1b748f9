/* Private to the transport (transport.c, transport_conn.c, transport_io.c):
 * the state they share and the functions one calls in another. */
#ifndef PHX_NET_TRANSPORT_INT_H
#define PHX_NET_TRANSPORT_INT_H

#include "net/transport.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/auth.h"
#include "net/crc32c.h"
#include "net/link.h"
#include "base/phx_err.h"
#include "base/phx_log.h"

#define RBUF_MIN (256u << 10)
#define BACKOFF_MIN_MS 10
#define BACKOFF_MAX_MS 500
#define STOP_GRACE_MS 2000
/* Connections from/to one peer closed for bad frames or failed
 * authentication before the link is given up (not redialled, refused). */
#define MAX_STRIKES 5

/* Standalone acks wait this long for a frame to ride on, unless this many
 * frames are unacknowledged: a reply usually comes sooner, and one write
 * per message beats two. */
#define ACK_DELAY_MS 5
#define ACK_EAGER 256
/* At most this much written and unacknowledged per peer before new frames
 * wait for an ack (urgent frames and acks still go). Frames are kept until
 * acked, so without a window the kernel's autotuned socket buffers (many
 * MiB on loopback) decide how much retained memory cycles through, and a
 * footprint that misses the cache cost ~20 % of the small-message rate
 * (2 cores, pingpong rate against wire v1: 0.77x with 4 MiB, 1.11x with
 * 1 MiB). Loopback and LAN bandwidth-delay products are below it. */
#ifndef SEND_WINDOW
#define SEND_WINDOW (1u << 20)
#endif
#define ACK_EAGER_BYTES (SEND_WINDOW / 4)
/* Referenced payloads (zero-copy frames: large messages, written from the
 * sender's own buffer) cycle no transport memory through the cache, so
 * they get a wider window: with SEND_WINDOW alone one 1 MiB message filled
 * it and large messages went one per round trip, the link idle while the
 * acknowledgement came back. This keeps several in flight. */
#ifndef SEND_WINDOW_REF
#define SEND_WINDOW_REF (8u << 20)
#endif

/* tr_conn_close_f flags */
#define CC_STRIKE 1             /* protocol violation or failed authentication */
#define CC_RESET  2             /* close with RST (debug link cut) */

/* Small messages queued back to back share one BATCH frame (net/frame.h):
 * at most this many payload bytes per frame, and only messages of at most
 * BATCH_ITEM bytes join one. A larger batch would only hold the receiver's
 * first message back longer; this one already spreads a header, a checksum
 * and a link sequence number over hundreds of 8-byte messages. */
#define BATCH_MAX (16u << 10)
#define BATCH_ITEM 1024u

typedef struct buf {
    uint8_t *data;
    size_t len, cap;
    phx_link_ext_t *ext;        /* referenced payload tails (zero-copy sends), in order */
    int next, extcap;
    /* The frame still open at the end of data (bat_n > 0): bat_n small
     * messages from offset bat on, each a batch entry, its 64-byte header
     * not yet written (tr_buf_close writes it: a one-entry batch becomes
     * the plain frame bat_h). Every frame before it is whole. */
    int bat_n;
    size_t bat;
    phx_frame_hdr_t bat_h;
} buf_t;

typedef struct peer peer_t;

typedef struct conn {
    uv_tcp_t tcp;               /* first: handle callbacks cast back to conn */
    phx_net_t *net;
    peer_t *peer;               /* NULL on the accepting side until HELLO */
    phx_auth_t *auth;
    buf_t rbuf;
    int closing, got_bye, up;
    int dialed;                 /* we dialled peer's address (else accepted) */
    struct conn *prev, *next;   /* every open connection (phx_net.conns) */
    int hs_on;                  /* handshake begun (connected), hs_start valid */
    uint64_t hs_start;          /* loop ms the handshake began */
    uint64_t nrecv;             /* sequenced frames delivered on this connection */
    /* A large frame being received straight into its consumer's buffer
     * (cb.on_claim); rbuf is empty meanwhile. The payload crc runs over
     * each read as it lands, while the bytes are in cache. */
    struct {
        int on, dropped;        /* dropped: phx_net_unclaim; the rest goes to rbuf as scratch */
        uint8_t hdr[PHX_FRAME_HDR + PHX_NET_ZC_HEAD];
        uint8_t *dst;
        size_t need, got;
        uint32_t crc;
        void *tok;
        /* The stream is at the start of a frame that follows a large one
         * (a claim ended, or a read ended with a large frame): the next
         * read takes only the header and PHX_NET_ZC_HEAD payload bytes, so
         * a large frame behind it is claimed before any of it lands in
         * rbuf (a full read would bring in whole chunks, to be copied). */
        int edge;
    } zc;
} conn_t;

struct peer {
    phx_net_t *net;
    int rank;
    struct sockaddr_storage addr;
    conn_t *conn;               /* handshaking or up; NULL otherwise */
    conn_t *wconn;              /* connection the write in flight went to */
    int up, dead, dirty, writing, ever_up;
    int left;                   /* sent BYE: not redialled */
    int refused;                /* MAX_STRIKES reached: not redialled, refused */
    int resend_pending;         /* reconnected while a write was in flight */
    int down_reported;          /* on_peer_down given for this outage */
    int gone;                   /* this outage: a redial was refused */
    int closed;                 /* this outage: the peer closed or reset it */
    int ack_now;                /* a standalone ACK may go out (delay over) */
    uint64_t rx_unacked;        /* bytes delivered since the last ack went out */
    int lost_stage;             /* on_lost: 0 report down, 1 link failed */
    int strikes;
    uint64_t drops, restores, dups;
    uint64_t heard_ms;          /* uv_now of the last bytes read from it (phx_net_last_heard_ms) */
    phx_link_t *link;           /* sequence/ack/resend state; outlives connections */
    uv_timer_t lost;            /* delta after a drop: on_peer_down if not restored */
    uint8_t ack[PHX_FRAME_HDR]; /* standalone ACK frame being written */
    uint32_t inc;
    buf_t obuf, wbuf;           /* pending frames / frames being written */
    buf_t cbuf, wcbuf;          /* urgent frames: written ahead of obuf */
    uint64_t ocharge, wcharge;
    int wcount, wccount;        /* frames sealed in wbuf / wcbuf */
    uv_write_t wreq;
    uv_timer_t retry;
    int backoff_ms;
    uv_connect_t creq;
    uv_connect_t preq;          /* the probe's (see probe()) */
    int probing;                /* a probe's connect is in flight */
    int probe_ms;               /* delay before the next probe */
};

struct phx_net {
    uv_loop_t *loop;
    phx_net_cfg_t cfg;          /* the caller's, copied; peers stays the caller's */
    phx_net_cb_t cb;
    uint8_t secret[1024];
    size_t secret_len;
    uint32_t inc;
    int rank, size, nup_once, all_up, stopping, reads_paused;   /* nup_once: peers up at least once */
    peer_t *peers;
    peer_t **dirty;
    int ndirty;
    uv_tcp_t listener;
    uv_prepare_t prepare;
    uv_timer_t deadline;
    uv_timer_t stop_timer;
    uv_timer_t ack_timer;       /* ACK_DELAY_MS for idle acks; armed on demand */
    int ack_armed;
    int nconns, stop_timer_open;
    /* Every connection not yet freed, authenticated or not: stop closes
     * them all, so that nothing, not even a client that connects and never
     * speaks, keeps the loop alive. hs_timer closes a handshake not done
     * within hb-timeout (it is armed while one is pending). */
    conn_t *conns;
    uv_timer_t hs_timer;
    uint64_t bad_conns;         /* connections closed for a violation or failed auth */
    uint64_t stale_frames;      /* frames of another incarnation than the peer's current one */
    uint64_t rejected[PHX_NET_REJ_N];   /* phx_net_counters; [STALE] is stale_frames */
    /* recovery=cr, restart-on=respawn: a rank declared dead may come back
     * with a higher incarnation (rejoin); rejoining: we are such a process,
     * (re)dialling every peer until taken in: a peer may drop our first
     * connection while it has not yet declared our old incarnation dead. */
    int rejoin, rejoining;
    int cut_peer, cut_left, cut_forever;   /* PHX_DEBUG_CUT_LINK */
    uint32_t zc_min;            /* PHX_NET_ZC_MIN, or PHX_DEBUG_ZC_MIN (tests) */
    uint64_t zc_tx, zc_rx;      /* frames sent zero-copy / received in place (logged at exit) */
    uint64_t batch_rx, batch_rx_msgs;   /* BATCH frames delivered, and the messages in them (logged at exit) */
    unsigned read_max;          /* PHX_DEBUG_READ_MAX (tests): bytes per read, 0 = no cap */
    uint64_t cut_after;
    int handles;                /* open handles; stop completes at zero */
    void (*stop_done)(void *);
    void *stop_ctx;
};

/* transport_conn.c */
void tr_handle_closed(uv_handle_t *h);
void tr_peer_timer_closed(uv_handle_t *h);
int tr_send_handshake(conn_t *c, int type, const uint8_t *p, size_t len);
void tr_peer_up(conn_t *c);
void tr_conn_close(conn_t *c, const char *why);
void tr_conn_close_f(conn_t *c, const char *why, int flags);
void tr_dial(peer_t *p);
void tr_on_accept(uv_stream_t *srv, int status);
void tr_on_deadline(uv_timer_t *t);
int tr_resolve(const char *host, int port, struct sockaddr_storage *out);
int tr_adopt_listener(phx_net_t *n, int fd);

/* transport_io.c */
void tr_claim_end(conn_t *c, int ok);
void tr_buf_drop(buf_t *b);
void tr_buf_close(buf_t *b);
void tr_mark_dirty(peer_t *p);
int tr_frame_append(buf_t *b, phx_frame_hdr_t *h, const void *pre, size_t plen,
                    const void *payload, size_t len, size_t max_frame);
int tr_frame_append_ref(buf_t *b, phx_frame_hdr_t *h, const void *pre, size_t plen,
                        const void *payload, size_t len, const uint32_t *payload_crc,
                        void (*release)(void *), void *arg);
void tr_drain(peer_t *p, uint64_t charge);
void tr_peer_flush(peer_t *p);
void tr_on_prepare(uv_prepare_t *h);
void tr_start_resend(peer_t *p);
void tr_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b);
void tr_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b);
/* How the peer's kernel already ended c, as a libuv code (UV_EOF for a
 * FIN, UV_ECONNRESET for an RST), found behind whatever bytes are still
 * unread, which are discarded; 0 if it has not. For a c about to be closed
 * without being read further. */
int tr_conn_end(conn_t *c);
/* c ended with err: a FIN, an RST or a write refused for either comes from
 * the peer's kernel, so its host answered (phx_net_peer_reached); a
 * partition only ever looks like silence (or a local error). */
static inline void tr_note_end(conn_t *c, int err)
{
    if ((err == UV_EOF || err == UV_ECONNRESET || err == UV_EPIPE) && c->up && c->peer)
        c->peer->closed = 1;
}

/* transport.c */
int tr_reject_reason(const char *why);

#endif
