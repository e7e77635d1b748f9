#include "transport.h"

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

static int window_full(const phx_link_t *l)
{
    return phx_link_retained_copied(l) >= SEND_WINDOW || phx_link_retained(l) >= SEND_WINDOW_REF;
}

/* conn_close flags */
#define CC_STRIKE 1             /* protocol violation or failed authentication */
#define CC_RESET  2             /* close with RST (debug link cut) */

typedef struct buf {
    uint8_t *data;
    size_t len, cap;
    phx_link_ext_t *ext;        /* referenced payload tails (zero-copy sends), in order */
    int next, extcap;
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
    unsigned read_max;          /* PHX_DEBUG_READ_MAX (tests): bytes per read, 0 = no cap */
    uint64_t cut_after;
    int handles;                /* open handles; stop completes at zero */
    void (*stop_done)(void *);
    void *stop_ctx;
};

static void conn_close(conn_t *c, const char *why);
static void conn_close_f(conn_t *c, const char *why, int flags);
static int reject_reason(const char *why);
static void report_down(peer_t *p, int graceful, const char *why);

/* Ends c's claim, if any, telling the consumer unless it let go. */
static void claim_end(conn_t *c, int ok)
{
    if (!c->zc.on)
        return;
    c->zc.on = 0;
    if (!c->zc.dropped) {
        phx_frame_hdr_t h;
        phx_frame_decode(c->zc.hdr, PHX_FRAME_HDR, UINT32_MAX, &h, NULL);   /* fills h (PHX_ETRUNC) */
        c->net->cb.on_claimed(c->net->cb.ctx, c->peer->rank, &h, c->zc.hdr + PHX_FRAME_HDR, c->zc.tok, ok);
    }
}

static int buf_reserve(buf_t *b, size_t extra)
{
    if (b->cap - b->len >= extra)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < extra)
        cap *= 2;
    uint8_t *d = realloc(b->data, cap);
    if (!d)
        return PHX_ENOMEM;
    b->data = d;
    b->cap = cap;
    return 0;
}

/* Drops a buffer's frames unsent: their references are released. */
static void buf_drop(buf_t *b)
{
    b->len = 0;
    for (int i = 0; i < b->next; i++)
        b->ext[i].release(b->ext[i].arg);
    b->next = 0;
}

static void handle_closed(uv_handle_t *h)
{
    phx_net_t *n = h->data;
    if (--n->handles == 0 && n->stop_done)
        n->stop_done(n->stop_ctx);
}

static void peer_timer_closed(uv_handle_t *h)
{
    phx_net_t *n = ((peer_t *)h->data)->net;
    if (--n->handles == 0 && n->stop_done)
        n->stop_done(n->stop_ctx);
}

static void conn_closed(uv_handle_t *h)
{
    conn_t *c = (conn_t *)h;
    phx_net_t *n = c->net;
    if (c->prev)
        c->prev->next = c->next;
    else
        n->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    phx_auth_destroy(c->auth);
    free(c->rbuf.data);
    free(c);
    if (--n->nconns == 0 && n->stopping && n->stop_timer_open) {
        n->stop_timer_open = 0;
        uv_close((uv_handle_t *)&n->stop_timer, handle_closed);
    }
    if (--n->handles == 0 && n->stop_done)
        n->stop_done(n->stop_ctx);
}

static void mark_dirty(peer_t *p)
{
    if (!p->dirty) {
        p->dirty = 1;
        p->net->dirty[p->net->ndirty++] = p;
    }
}

/* Appends one frame to a buffer, unsealed (link fields and crc are set at
 * flush time, when its sequence number is known); 0 or PHX_ENOMEM. */
static int frame_append(buf_t *b, phx_frame_hdr_t *h, const void *pre, size_t plen,
                        const void *payload, size_t len)
{
    size_t total = PHX_FRAME_HDR + plen + len;
    if (buf_reserve(b, total))
        return PHX_ENOMEM;
    uint8_t *dst = b->data + b->len;
    if (plen)
        memcpy(dst + PHX_FRAME_HDR, pre, plen);
    if (len)
        memcpy(dst + PHX_FRAME_HDR + plen, payload, len);
    h->len = (uint32_t)(plen + len);
    phx_frame_put_hdr(dst, h, dst + PHX_FRAME_HDR);
    b->len += total;
    return 0;
}

/* Appends a frame whose payload is prefix + a referenced buffer: only the
 * header and prefix are copied; the buffer is written from where it is. */
static int frame_append_ref(buf_t *b, phx_frame_hdr_t *h, const void *pre, size_t plen,
                            const void *payload, size_t len, void (*release)(void *), void *arg)
{
    if (b->next == b->extcap) {
        int cap = b->extcap ? 2 * b->extcap : 8;
        phx_link_ext_t *e = realloc(b->ext, (size_t)cap * sizeof *e);
        if (!e)
            return PHX_ENOMEM;
        b->ext = e;
        b->extcap = cap;
    }
    if (buf_reserve(b, PHX_FRAME_HDR + plen))
        return PHX_ENOMEM;
    uint8_t *dst = b->data + b->len;
    if (plen)
        memcpy(dst + PHX_FRAME_HDR, pre, plen);
    h->len = (uint32_t)(plen + len);
    phx_frame_put_hdr2(dst, h, dst + PHX_FRAME_HDR, plen, payload, len);
    b->len += PHX_FRAME_HDR + plen;
    b->ext[b->next++] = (phx_link_ext_t){ .at = b->len, .len = len, .p = payload,
                                          .release = release, .arg = arg };
    return 0;
}

typedef struct hs_write {
    uv_write_t req;
    uint8_t data[PHX_FRAME_HDR + 64];
} hs_write_t;

static void hs_written(uv_write_t *req, int status)
{
    (void)status;   /* a failed handshake write surfaces as a read error */
    free(req);
}

/* Handshake frames bypass the peer buffer: they must precede queued data. */
static int send_handshake(conn_t *c, int type, const uint8_t *p, size_t len)
{
    hs_write_t *w = malloc(sizeof *w);
    if (!w)
        return PHX_ENOMEM;
    phx_frame_hdr_t h = phx_frame_hdr((unsigned)type, 0, (uint64_t)c->net->rank, 0, (uint32_t)len);
    h.inc = c->net->inc;
    memcpy(w->data + PHX_FRAME_HDR, p, len);
    phx_frame_encode(w->data, &h, w->data + PHX_FRAME_HDR);
    uv_buf_t b = uv_buf_init((char *)w->data, (unsigned)(PHX_FRAME_HDR + len));
    int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, hs_written);
    if (rc) {
        free(w);
        return rc;
    }
    return 0;
}

static void on_written(uv_write_t *req, int status);

static void drain(peer_t *p, uint64_t charge)
{
    phx_net_t *n = p->net;
    if (charge && n->cb.on_drain)
        n->cb.on_drain(n->cb.ctx, p->rank, charge);
}

/* Losing retained frames would break the no-loss promise: end the node. */
static void retain_failed(peer_t *p)
{
    phx_net_t *n = p->net;
    char why[96];
    snprintf(why, sizeof why, "out of memory keeping frames for rank %d until acknowledged", p->rank);
    PHX_ERROR("net", "%s", why);
    if (n->cb.on_fatal)
        n->cb.on_fatal(n->cb.ctx, PHX_ENOMEM, why);
}

static void peer_flush(peer_t *p)
{
    if (!p->up || p->writing || p->resend_pending)
        return;
    int hold = p->obuf.len && window_full(p->link);
    int ack_only = (p->obuf.len == 0 || hold) && p->cbuf.len == 0;
    if (ack_only && !(p->ack_now && phx_link_ack_due(p->link)))
        return;
    p->ack_now = 0;   /* sealing below or the ACK frame carries the ack */
    p->rx_unacked = 0;
    uv_buf_t bs[16], *b = bs;
    unsigned nb = 0;
    if (ack_only) {
        /* Nothing to piggyback on: a standalone, unsequenced ACK. */
        phx_frame_hdr_t h = phx_frame_hdr(PHX_FT_ACK, 0, (uint64_t)p->net->rank, (uint64_t)p->rank, 0);
        h.inc = p->net->inc;
        phx_frame_put_hdr(p->ack, &h, NULL);
        phx_frame_seal(p->ack, 0, phx_link_take_ack(p->link));
        b[nb++] = uv_buf_init((char *)p->ack, PHX_FRAME_HDR);
    } else {
        buf_t t;
        if (!hold) {   /* else wbuf stays empty: only urgent frames go */
            t = p->wbuf;
            p->wbuf = p->obuf;
            p->obuf = t;
            p->obuf.len = 0;
            p->wcharge = p->ocharge;
            p->ocharge = 0;
        }
        t = p->wcbuf;
        p->wcbuf = p->cbuf;
        p->cbuf = t;
        p->cbuf.len = 0;
        if (!p->obuf.data)   /* the link kept the last one until acked */
            p->obuf.data = phx_link_spare(p->link, &p->obuf.cap);
        if (!p->cbuf.data)
            p->cbuf.data = phx_link_spare(p->link, &p->cbuf.cap);
        /* Urgent frames go first on the wire, so they are numbered first. */
        p->wccount = phx_link_seal(p->link, p->wcbuf.data, p->wcbuf.len);
        p->wcount = phx_link_seal_ext(p->link, p->wbuf.data, p->wbuf.len, p->wbuf.ext, p->wbuf.next);
        if (p->wccount < 0 || p->wcount < 0) {
            PHX_ERROR("net", "frame buffer for rank %d holds a partial frame", p->rank);
            abort();   /* a bug in frame_append: nothing sane to send */
        }
        /* One writev: urgent frames, then the queue with each referenced
         * payload between its header and the next frame (no copy). */
        if (2u + 2u * (unsigned)p->wbuf.next > sizeof bs / sizeof *bs &&
            !(b = malloc((2u + 2u * (unsigned)p->wbuf.next) * sizeof *b))) {
            PHX_ERROR("net", "out of memory writing to rank %d", p->rank);
            abort();
        }
        if (p->wcbuf.len)
            b[nb++] = uv_buf_init((char *)p->wcbuf.data, (unsigned)p->wcbuf.len);
        size_t from = 0;
        for (int k = 0; k < p->wbuf.next; k++) {
            const phx_link_ext_t *e = &p->wbuf.ext[k];
            b[nb++] = uv_buf_init((char *)p->wbuf.data + from, (unsigned)(e->at - from));
            b[nb++] = uv_buf_init((char *)(uintptr_t)e->p, (unsigned)e->len);
            from = e->at;
        }
        if (p->wbuf.len > from)
            b[nb++] = uv_buf_init((char *)p->wbuf.data + from, (unsigned)(p->wbuf.len - from));
    }
    p->writing = 1;
    p->wconn = p->conn;
    p->wreq.data = p;
    int rc = uv_write(&p->wreq, (uv_stream_t *)&p->conn->tcp, b, nb, on_written);   /* copies b */
    if (b != bs)
        free(b);
    if (rc) {
        /* No callback will come: account for the write here. */
        on_written(&p->wreq, rc);
    }
}

/* Hands the written buffer to the link (kept until acked). */
static int retain(peer_t *p, buf_t *b, int count, uint64_t charge, uint64_t *freed)
{
    uint64_t f = 0;
    int rc = 0;
    if (b->len) {
        phx_link_ext_t *ext = NULL;
        if (b->next && !(ext = malloc((size_t)b->next * sizeof *ext))) {
            buf_drop(b);   /* given up on, like a failed retain */
            rc = PHX_ENOMEM;
        } else {
            if (b->next)
                memcpy(ext, b->ext, (size_t)b->next * sizeof *ext);
            rc = phx_link_retain_ext(p->link, b->data, b->len, b->cap, count, ext, b->next, charge, &f);
            b->data = NULL;
            b->len = b->cap = 0;
            b->next = 0;   /* the ext array itself stays for reuse */
        }
    } else {
        f = charge;
    }
    *freed += f;
    return rc;
}

static void start_resend(peer_t *p);

static void on_written(uv_write_t *req, int status)
{
    peer_t *p = req->data;
    phx_net_t *n = p->net;
    conn_t *wc = p->wconn;
    uint64_t freed = 0;
    p->writing = 0;
    p->wconn = NULL;
    if (p->dead) {   /* closed while writing: nothing will be resent */
        buf_drop(&p->wbuf);
        free(p->wbuf.data);
        free(p->wcbuf.data);
        p->wbuf.data = p->wcbuf.data = NULL;
        p->wbuf.cap = p->wcbuf.cap = p->wcbuf.len = 0;
        drain(p, p->wcharge);
        p->wcharge = 0;
        return;
    }
    /* Written or not, the frames stay until the peer acks them: a failed
     * write is resent after the reconnect like a lost one. */
    int rc = retain(p, &p->wcbuf, p->wccount, 0, &freed);
    int rc2 = retain(p, &p->wbuf, p->wcount, p->wcharge, &freed);
    p->wccount = p->wcount = 0;
    p->wcharge = 0;
    drain(p, freed);
    if (rc || rc2) {
        retain_failed(p);
        return;
    }
    if (status < 0 && wc && !wc->closing)
        conn_close(wc, uv_strerror(status));
    if (!p->up)
        return;   /* flushed again once the link is restored */
    if (p->resend_pending)
        start_resend(p);
    if (p->obuf.len || p->cbuf.len || (p->ack_now && phx_link_ack_due(p->link)))
        peer_flush(p);
    else if (n->stopping && p->conn && !p->conn->closing)
        conn_close(p->conn, NULL);
}

static void on_prepare(uv_prepare_t *h)
{
    phx_net_t *n = h->data;
    for (int i = 0; i < n->ndirty; i++) {
        peer_t *p = n->dirty[i];
        p->dirty = 0;
        peer_flush(p);
    }
    n->ndirty = 0;
}

void phx_net_flush(phx_net_t *n) { on_prepare(&n->prepare); }

typedef struct rs_write {
    uv_write_t req;
    uint8_t *data;              /* a copy: the link keeps the originals until acked */
} rs_write_t;

static void resend_written(uv_write_t *req, int status)
{
    (void)status;   /* a failed resend surfaces as a read error; it is redone */
    rs_write_t *w = (rs_write_t *)req;
    free(w->data);
    free(w);
}

/* Rewrites every frame past the peer's last ack, ahead of anything new. */
static void start_resend(peer_t *p)
{
    if (p->writing) {   /* frames still in flight on the old connection */
        p->resend_pending = 1;
        return;
    }
    p->resend_pending = 0;
    uint8_t *data;
    long len = phx_link_resend(p->link, &data);
    if (len < 0) {
        retain_failed(p);
        return;
    }
    if (len > 0) {
        rs_write_t *w = malloc(sizeof *w);
        uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
        int rc = PHX_ENOMEM;
        if (w) {
            w->data = data;
            rc = uv_write(&w->req, (uv_stream_t *)&p->conn->tcp, &b, 1, resend_written);
        }
        if (rc) {
            free(w);
            free(data);
            conn_close(p->conn, "resend failed");
            return;
        }
        PHX_DEBUG("net", "rank %d: resent %ld bytes", p->rank, len);
    }
    mark_dirty(p);
}

static void peer_up(conn_t *c)
{
    phx_net_t *n = c->net;
    peer_t *p = c->peer;
    uint32_t inc = (uint32_t)phx_auth_peer_inc(c->auth);
    int admit = n->rejoin && p->ever_up ? phx_link_inc_admit(p->inc, p->dead, inc) : PHX_LINK_ADMIT;
    if (admit != PHX_LINK_ADMIT) {
        /* The old incarnation must be declared dead everywhere before the
         * new one joins (its state comes back from a checkpoint, never
         * from the link): refuse until then, and tell the detector that
         * the old process is gone. The caller redials. */
        conn_close(c, admit == PHX_LINK_STALE ? "an old incarnation"
                                            : "a new incarnation before the old one was declared dead");
        if (admit == PHX_LINK_WAIT) {
            p->gone = 1;
            report_down(p, 0, "a new incarnation is calling");
        }
        return;
    }
    int rejoined = p->dead;
    if (rejoined) {
        PHX_WARN("net", "rank %d rejoined as incarnation %u (incarnation %u is dead)", p->rank, inc, p->inc);
        p->dead = 0;
        p->down_reported = 0;
        p->strikes = 0;
    }
    c->up = 1;
    p->up = 1;
    uv_timer_stop(&p->lost);
    p->down_reported = p->gone = p->closed = 0;
    p->backoff_ms = BACKOFF_MIN_MS;
    /* "All up" means every peer completed a handshake once: a peer may
     * already have died by the time the last one connects, and the job
     * must still start (the failure detector handles the dead one). */
    int first = !p->ever_up;
    p->ever_up = 1;
    if (first || rejoined) {
        PHX_INFO("net", "rank %d up (incarnation %u)", p->rank, inc);
    } else if (inc != p->inc) {
        /* A new process: nothing it received before survives, nor does
         * anything of the old one's stream. */
        PHX_WARN("net", "rank %d is back as incarnation %u (was %u): link state reset", p->rank,
                 inc, p->inc);
        drain(p, phx_link_reset(p->link));
    } else {
        p->restores++;
        PHX_INFO("net", "link to rank %d restored (%llu restores); resending %llu unacknowledged bytes",
                 p->rank, (unsigned long long)p->restores,
                 (unsigned long long)phx_link_retained(p->link));
        start_resend(p);
    }
    p->inc = inc;
    p->ack_now = 1;   /* tell the peer at once what survived the outage */
    if (n->cb.on_peer_up)
        n->cb.on_peer_up(n->cb.ctx, p->rank, p->inc);
    mark_dirty(p);
    if (n->reads_paused)
        uv_read_stop((uv_stream_t *)&c->tcp);
    if (first && ++n->nup_once == n->size - 1 && !n->all_up) {
        n->all_up = 1;
        uv_timer_stop(&n->deadline);
        if (n->cb.on_all_up)
            n->cb.on_all_up(n->cb.ctx);
    }
}

static void on_ack_timer(uv_timer_t *t)
{
    phx_net_t *n = t->data;
    n->ack_armed = 0;
    for (int r = 0; r < n->size; r++) {
        peer_t *p = &n->peers[r];
        if (p->up && phx_link_ack_due(p->link)) {
            p->ack_now = 1;
            mark_dirty(p);
        }
    }
}

/* Link-layer part of a data frame: the ack it carries and its sequence
 * number. Returns 1 to deliver, 0 to drop (duplicate or ACK), -1 if the
 * connection was closed. */
static int link_frame(conn_t *c, const phx_frame_hdr_t *h)
{
    peer_t *p = c->peer;
    uint64_t freed = 0;
    int held = p->obuf.len && window_full(p->link);   /* only queued frames wait for the window */
    if (phx_link_on_ack(p->link, h->lack, &freed) < 0) {
        conn_close_f(c, "ack for a frame never sent", CC_STRIKE);
        return -1;
    }
    drain(p, freed);
    if (held && !window_full(p->link) && p->obuf.len)
        mark_dirty(p);   /* the window opened */
    if (h->type == PHX_FT_ACK) {
        if (h->lseq || h->len) {
            conn_close_f(c, "malformed ACK frame", CC_STRIKE);
            return -1;
        }
        return 0;
    }
    int rc = phx_link_on_recv(p->link, h->lseq);
    if (rc < 0) {
        conn_close_f(c, h->lseq ? "link sequence gap" : "data frame without a link sequence", CC_STRIKE);
        return -1;
    }
    if (rc == 0) {
        p->dups++;
        return 0;
    }
    /* An ack is due: piggybacked on the next frame, or standalone once
     * ACK_DELAY_MS passed (or ACK_EAGER frames wait) with nothing to send. */
    p->rx_unacked += PHX_FRAME_HDR + (uint64_t)h->len;
    if (phx_link_ack_due(p->link) >= ACK_EAGER || p->rx_unacked >= ACK_EAGER_BYTES) {
        p->ack_now = 1;
        mark_dirty(p);
    } else if (!c->net->ack_armed) {
        c->net->ack_armed = 1;
        uv_timer_start(&c->net->ack_timer, on_ack_timer, ACK_DELAY_MS, 0);
    }
    return 1;
}

/* Returns 0 to go on reading, negative if the connection was closed. A
 * claimed frame (c->zc.on) ends in claim_end instead of on_frame. */
static int handle_frame(conn_t *c, const phx_frame_hdr_t *h, const uint8_t *payload)
{
    phx_net_t *n = c->net;
    uint8_t out[64];
    if (!c->up) {
        if (h->type == PHX_FT_HELLO) {
            int rc = phx_auth_on_hello(c->auth, payload, h->len, out, sizeof out);
            if (rc < 0) {
                conn_close_f(c, rc == PHX_EAUTH ? "authentication failed: bad HELLO" : "malformed HELLO",
                             CC_STRIKE);
                return -1;
            }
            if (!c->peer) {   /* accepting side: the HELLO names the peer */
                int64_t r = phx_auth_peer_rank(c->auth);
                /* A rejoining rank dials every peer; its incarnation is
                 * checked once authenticated (peer_up). */
                int back = n->rejoin && r >= 0 && r < n->size && r != n->rank && n->peers[r].ever_up &&
                           (uint32_t)phx_auth_peer_inc(c->auth) > n->peers[r].inc;
                if ((r <= n->rank && !back) || r >= n->size || r == n->rank) {
                    conn_close_f(c, "HELLO from a rank that should not dial us", CC_STRIKE);
                    return -1;
                }
                peer_t *p = &n->peers[r];
                if ((p->dead && !back) || p->refused || p->left) {
                    conn_close(c, p->dead ? "HELLO from a rank declared dead"
                                          : p->left ? "HELLO from a rank that left"
                                                    : "HELLO from a refused rank");
                    return -1;
                }
                /* A reconnect may arrive before we noticed the old
                 * connection died: it takes over once authenticated. */
                c->peer = p;
                if (!p->conn)
                    p->conn = c;
            }
            if (send_handshake(c, PHX_FT_AUTH, out, (size_t)rc)) {
                conn_close(c, "handshake write failed");
                return -1;
            }
            return 0;
        }
        if (h->type == PHX_FT_AUTH && c->peer) {
            if (phx_auth_on_auth(c->auth, payload, h->len) != PHX_OK) {
                PHX_WARN("net", "refused rank %d: wrong cluster secret", c->peer->rank);
                conn_close_f(c, "authentication failed: wrong cluster secret", CC_STRIKE);
                return -1;
            }
            peer_t *p = c->peer;
            if (p->conn != c) {
                if (p->conn)
                    conn_close(p->conn, "replaced by a new connection from the same rank");
                p->conn = c;
            }
            peer_up(c);
            return 0;
        }
        conn_close_f(c, "frame before authentication", CC_STRIKE);
        return -1;
    }
    if (h->type == PHX_FT_HELLO || h->type == PHX_FT_AUTH || h->type == PHX_FT_AUTH_OK) {
        conn_close_f(c, "handshake frame after authentication", CC_STRIKE);
        return -1;
    }
    if (h->inc != c->peer->inc) {
        n->stale_frames++;
        PHX_DEBUG("net", "dropped frame from rank %d incarnation %u (current %u)",
                  c->peer->rank, h->inc, c->peer->inc);
        return 0;
    }
    if (n->cut_left > 0 && h->type != PHX_FT_ACK && c->peer->rank == n->cut_peer &&
        ++c->nrecv == n->cut_after) {
        /* Debug fault injection: this frame and whatever follows it in the
         * read buffer are lost, unacknowledged; the peer must resend them. */
        peer_t *p = c->peer;
        n->cut_left--;
        PHX_WARN("net", "PHX_DEBUG_CUT_LINK: cutting the link to rank %d%s", p->rank,
                 n->cut_forever ? " for good" : "");
        conn_close_f(c, "cut by PHX_DEBUG_CUT_LINK", CC_RESET);
        if (n->cut_forever) {   /* as if the path between the two were gone */
            p->refused = 1;
            uv_timer_stop(&p->retry);
        }
        return -1;
    }
    int rc = link_frame(c, h);
    if (rc <= 0)
        return rc;
    if (h->type == PHX_FT_CTRL && h->tag == PHX_NET_CTRL_BYE) {
        c->got_bye = 1;
        return 0;
    }
    if (c->zc.on)
        claim_end(c, 1);
    else
        n->cb.on_frame(n->cb.ctx, c->peer->rank, h, payload);
    return c->closing ? -1 : 0;
}

/* A large frame at rbuf + off, header in h: offers it to the consumer.
 * Returns 1 when claimed (the bytes of it already in rbuf were moved into
 * the claim), 0 when it is taken as usual, -1 to wait for its first
 * PHX_NET_ZC_HEAD payload bytes before deciding. */
static int claim(conn_t *c, const phx_frame_hdr_t *h, size_t off)
{
    phx_net_t *n = c->net;
    size_t avail = c->rbuf.len - off;
    if (avail < PHX_FRAME_HDR || !c->up || !n->cb.on_claim || h->len < n->zc_min || n->stopping ||
        (h->type != PHX_FT_APP && h->type != PHX_FT_SPAWN && h->type != PHX_FT_CTRL) ||
        h->inc != c->peer->inc || (n->cut_left > 0 && c->peer->rank == n->cut_peer) ||
        h->lseq != phx_link_recvd(c->peer->link) + 1)
        return 0;
    if (avail < PHX_FRAME_HDR + PHX_NET_ZC_HEAD)
        return -1;
    const uint8_t *f = c->rbuf.data + off;
    void *tok = NULL;
    uint8_t *dst = n->cb.on_claim(n->cb.ctx, c->peer->rank, h, f + PHX_FRAME_HDR, &tok);
    if (!dst)
        return 0;
    c->zc.on = 1;
    c->zc.dropped = 0;
    n->zc_rx++;
    c->zc.dst = dst;
    c->zc.tok = tok;
    c->zc.need = h->len - PHX_NET_ZC_HEAD;
    memcpy(c->zc.hdr, f, sizeof c->zc.hdr);
    c->zc.crc = phx_crc32c(0, f + PHX_FRAME_HDR, PHX_NET_ZC_HEAD);
    /* The rest of this read belongs to the frame (decode saw no whole one). */
    c->zc.got = avail - sizeof c->zc.hdr;
    memcpy(dst, f + sizeof c->zc.hdr, c->zc.got);
    c->zc.crc = phx_crc32c(c->zc.crc, dst, c->zc.got);
    return 1;
}

void phx_net_unclaim(phx_net_t *n, int peer)
{
    conn_t *c = n->peers[peer].conn;
    if (c && c->zc.on)
        c->zc.dropped = 1;
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    conn_t *c = (conn_t *)h;
    (void)hint;
    if (c->zc.on) {   /* exactly the rest of the claimed frame, never more */
        size_t want = c->zc.need - c->zc.got;
        if (c->net->read_max && want > c->net->read_max)
            want = c->net->read_max;
        if (!c->zc.dropped) {
            *b = uv_buf_init((char *)c->zc.dst + c->zc.got, (unsigned)want);
            return;
        }
        if (want > c->rbuf.cap)
            want = c->rbuf.cap;
        *b = uv_buf_init((char *)c->rbuf.data, (unsigned)want);
        return;
    }
    if (buf_reserve(&c->rbuf, RBUF_MIN / 4)) {
        *b = uv_buf_init(NULL, 0);   /* libuv reports UV_ENOBUFS */
        return;
    }
    *b = uv_buf_init((char *)c->rbuf.data + c->rbuf.len, (unsigned)(c->rbuf.cap - c->rbuf.len));
    if (c->zc.edge && c->rbuf.len < PHX_FRAME_HDR + PHX_NET_ZC_HEAD)
        b->len = PHX_FRAME_HDR + PHX_NET_ZC_HEAD - c->rbuf.len;
    if (c->net->read_max && b->len > c->net->read_max)
        b->len = c->net->read_max;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    conn_t *c = (conn_t *)s;
    phx_net_t *n = c->net;
    (void)b;
    if (nread < 0) {
        /* A FIN or RST comes from the peer's kernel: its host is reachable.
         * A partition only ever looks like silence (or a local error). */
        if ((nread == UV_EOF || nread == UV_ECONNRESET) && c->up && c->peer)
            c->peer->closed = 1;
        /* A caller that closed without a byte said is a peer's probe
         * (probe()) or a port scan: nothing worth a line. */
        int silent = !c->peer && !c->rbuf.len;
        conn_close(c, silent ? NULL : nread == UV_EOF ? "connection closed by peer" : uv_strerror((int)nread));
        return;
    }
    if (c->up && c->peer)
        c->peer->heard_ms = uv_now(n->loop);
    if (c->zc.on) {
        if (nread == 0)
            return;
        c->zc.crc = phx_crc32c(c->zc.crc, b->base, (size_t)nread);
        if ((c->zc.got += (size_t)nread) < c->zc.need)
            return;
        const char *why;
        if (phx_frame_verify_crc(c->zc.hdr, c->zc.crc, &why) < 0) {
            char reason[200];
            snprintf(reason, sizeof reason, "bad frame: %s", why);
            conn_close_f(c, reason, CC_STRIKE);
            return;
        }
        phx_frame_hdr_t h;
        phx_frame_decode(c->zc.hdr, PHX_FRAME_HDR, UINT32_MAX, &h, NULL);
        c->zc.edge = 1;   /* the claim's reads took exactly the frame */
        int rc = handle_frame(c, &h, c->zc.hdr + PHX_FRAME_HDR);
        claim_end(c, 0);   /* not delivered (duplicate, stale): the consumer lets go */
        if (rc == 0 && n->cb.on_read_end)
            n->cb.on_read_end(n->cb.ctx);
        return;
    }
    c->rbuf.len += (size_t)nread;
    if (c->rbuf.len >= PHX_FRAME_HDR + PHX_NET_ZC_HEAD)
        c->zc.edge = 0;
    size_t off = 0;
    uint32_t max = (uint32_t)(n->cfg.max_frame > PHX_FRAME_LEN_HARDMAX ? PHX_FRAME_LEN_HARDMAX : n->cfg.max_frame);
    uint32_t last = 0;   /* payload length of the last whole frame of this read */
    while (off < c->rbuf.len) {
        phx_frame_hdr_t h;
        const char *why;
        int r = phx_frame_decode(c->rbuf.data + off, c->rbuf.len - off, c->up ? max : 256, &h, &why);
        if (r == PHX_ETRUNC) {
            int z = claim(c, &h, off);
            if (z > 0) {
                off = c->rbuf.len;   /* all of it went into the claim */
                break;
            }
            if (z == 0 && c->rbuf.len - off >= PHX_FRAME_HDR) {
                /* Large frame: make room for all of it, so it arrives in place
                 * (moved once: each later read of it finds off == 0). */
                if (off)
                    memmove(c->rbuf.data, c->rbuf.data + off, c->rbuf.len - off);
                c->rbuf.len -= off;
                off = 0;
                if (buf_reserve(&c->rbuf, PHX_FRAME_HDR + h.len - c->rbuf.len + RBUF_MIN / 4)) {
                    conn_close(c, "out of memory for inbound frame");
                    return;
                }
            }
            break;
        }
        if (r < 0) {
            char reason[200];
            snprintf(reason, sizeof reason, "bad frame: %s", why);
            conn_close_f(c, reason, CC_STRIKE);
            return;
        }
        if (handle_frame(c, &h, c->rbuf.data + off + PHX_FRAME_HDR) < 0) {
            if (n->cb.on_read_end)
                n->cb.on_read_end(n->cb.ctx);
            return;
        }
        off += (size_t)r;
        last = h.len;
    }
    if (off == c->rbuf.len && last >= n->zc_min)
        c->zc.edge = 1;
    if (n->cb.on_read_end)
        n->cb.on_read_end(n->cb.ctx);
    if (off) {
        memmove(c->rbuf.data, c->rbuf.data + off, c->rbuf.len - off);
        c->rbuf.len -= off;
    }
    if (c->rbuf.cap > (64u << 20) && c->rbuf.len < RBUF_MIN) {
        uint8_t *d = realloc(c->rbuf.data, RBUF_MIN);
        if (d) {
            c->rbuf.data = d;
            c->rbuf.cap = RBUF_MIN;
        }
    }
}

static conn_t *conn_new(phx_net_t *n, peer_t *p)
{
    conn_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->net = n;
    c->peer = p;
    c->dialed = p != NULL;
    uv_tcp_init(n->loop, &c->tcp);
    n->handles++;
    n->nconns++;
    c->next = n->conns;
    if (n->conns)
        n->conns->prev = c;
    n->conns = c;
    uv_tcp_nodelay(&c->tcp, 1);
    int rc = phx_auth_create(n->secret, n->secret_len, (uint32_t)n->rank, n->inc, n->cfg.job_id,
                             p ? p->rank : -1, &c->auth);
    if (rc) {
        PHX_ERROR("net", "cannot create authenticator: %s", phx_strerror(rc));
        c->closing = 1;
        uv_close((uv_handle_t *)&c->tcp, conn_closed);
        return NULL;
    }
    return c;
}

static void on_hs_timer(uv_timer_t *t);

/* Arms hs_timer for the earliest pending handshake deadline, if any. */
static void hs_arm(phx_net_t *n)
{
    uint64_t now = uv_now(n->loop), dl = (uint64_t)n->cfg.hb_timeout_ms, next = UINT64_MAX;
    for (conn_t *c = n->conns; c; c = c->next)
        if (!c->up && !c->closing && c->hs_on) {
            uint64_t due = c->hs_start + dl;
            due = due > now ? due - now : 0;
            if (due < next)
                next = due;
        }
    if (next != UINT64_MAX && !n->stopping)
        uv_timer_start(&n->hs_timer, on_hs_timer, next, 0);
}

static void on_hs_timer(uv_timer_t *t)
{
    phx_net_t *n = t->data;
    uint64_t now = uv_now(n->loop), dl = (uint64_t)n->cfg.hb_timeout_ms;
    char why[64];
    snprintf(why, sizeof why, "no handshake within %llu ms", (unsigned long long)dl);
    for (conn_t *c = n->conns, *next; c; c = next) {
        next = c->next;   /* c stays listed until its close completes */
        if (!c->up && !c->closing && c->hs_on && now >= c->hs_start + dl)
            conn_close(c, why);
    }
    hs_arm(n);
}

static int conn_begin(conn_t *c)
{
    /* A live peer answers within a round trip; a silent caller must not
     * hold a connection (and, at stop, the loop) open. */
    c->hs_on = 1;
    c->hs_start = uv_now(c->net->loop);
    if (!uv_is_active((uv_handle_t *)&c->net->hs_timer))
        hs_arm(c->net);
    uint8_t hello[64];
    int len = phx_auth_hello(c->auth, hello, sizeof hello);
    if (len < 0)
        return len;
    int rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    return rc ? rc : send_handshake(c, PHX_FT_HELLO, hello, (size_t)len);
}

static void dial(peer_t *p);

static void on_retry(uv_timer_t *t)
{
    dial(t->data);
}

static void schedule_retry(peer_t *p)
{
    phx_net_t *n = p->net;
    if (n->stopping || p->dead || p->refused || p->left)
        return;
    uv_timer_start(&p->retry, on_retry, (uint64_t)p->backoff_ms, 0);
    p->backoff_ms = p->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
                    : p->backoff_ms ? p->backoff_ms * 2 : 1;
}

static void report_down(peer_t *p, int graceful, const char *why)
{
    phx_net_t *n = p->net;
    if (p->down_reported || n->stopping)
        return;
    p->down_reported = 1;
    if (n->cb.on_peer_down)
        n->cb.on_peer_down(n->cb.ctx, p->rank, graceful, why);
}

/* Stage 0: the link stayed down for delta: on_peer_down, and from here the
 * failure detector decides (it sees the silence too, and its decision is
 * the same everywhere); redialling goes on in case the peer is alive.
 * Stage 1, 2 delta later: the peer is still neither back nor declared dead,
 * so the ring cannot see the problem (the two are not neighbours):
 * on_link_failed lets the node drop one side of the pair. */
static void on_lost(uv_timer_t *t)
{
    peer_t *p = t->data;
    phx_net_t *n = p->net;
    if (p->up || p->dead || n->stopping)
        return;
    if (p->lost_stage == 0) {
        PHX_WARN("net", "link to rank %d not restored within %d ms", p->rank, n->cfg.hb_timeout_ms);
        report_down(p, 0, "link not restored in time");
        p->lost_stage = 1;
        uv_timer_start(&p->lost, on_lost, 2 * (uint64_t)n->cfg.hb_timeout_ms, 0);
        return;
    }
    PHX_ERROR("net", "link to rank %d still down after %d ms, and the rank was not declared dead",
              p->rank, 3 * n->cfg.hb_timeout_ms);
    if (n->cb.on_link_failed && n->cb.on_link_failed(n->cb.ctx, p->rank) > 0)
        uv_timer_start(&p->lost, on_lost, (uint64_t)n->cfg.hb_timeout_ms, 0);
}

static void conn_close(conn_t *c, const char *why) { conn_close_f(c, why, 0); }

static void probe(peer_t *p);

/* Counts a connection closed for a protocol violation or a failed
 * handshake. It counts against the peer only where the peer is known for
 * sure: the connection authenticated, or we dialled the peer's address.
 * An unauthenticated caller claiming a rank in HELLO proves nothing, and
 * must not be able to get a live rank refused. */
static void strike(conn_t *c, const char *why)
{
    phx_net_t *n = c->net;
    peer_t *p = c->peer;
    n->bad_conns++;
    if (!p || !(c->up || c->dialed) || p->dead || p->refused || n->stopping)
        return;
    if (++p->strikes < MAX_STRIKES)
        return;
    p->refused = 1;
    uv_timer_stop(&p->retry);
    uv_timer_stop(&p->lost);
    char msg[300];
    snprintf(msg, sizeof msg, "rank %d at %s:%d: %d bad connections (last: %s)", p->rank,
             n->cfg.peers[p->rank].host, n->cfg.peers[p->rank].port, p->strikes, why);
    if (!p->ever_up) {   /* never part of the job: a startup failure */
        if (n->cb.on_fatal)
            n->cb.on_fatal(n->cb.ctx, PHX_EAUTH, msg);
        return;
    }
    PHX_ERROR("net", "%s; no longer connecting to it, the failure detector decides", msg);
    report_down(p, 0, msg);
    p->lost_stage = 1;
    uv_timer_start(&p->lost, on_lost, 2 * (uint64_t)n->cfg.hb_timeout_ms, 0);
}

static void conn_close_f(conn_t *c, const char *why, int flags)
{
    if (c->closing)
        return;
    c->closing = 1;
    phx_net_t *n = c->net;
    peer_t *p = c->peer;
    uv_read_stop((uv_stream_t *)&c->tcp);
    claim_end(c, 0);
    if (p && p->conn == c) {
        p->conn = NULL;
        int was_up = c->up;
        p->up = 0;
        if (was_up && !n->stopping) {
            if (c->got_bye) {
                PHX_INFO("net", "rank %d left", p->rank);
                p->left = 1;
                report_down(p, 1, "closed");
            } else if (!p->dead) {
                p->drops++;
                PHX_WARN("net", "connection to rank %d lost: %s; restoring the link", p->rank,
                         why ? why : "closed");
                if (!p->refused) {
                    p->lost_stage = 0;
                    uv_timer_start(&p->lost, on_lost, (uint64_t)n->cfg.hb_timeout_ms, 0);
                }
                p->backoff_ms = BACKOFF_MIN_MS;
                /* The peer's kernel closed it: either its process died
                 * (and took its listener with it, before this
                 * connection) or the link was cut. Which one, its port
                 * tells at once: the side that redials does so now; the
                 * other, which waits to be redialled, probes it. */
                if (p->closed && !p->refused) {
                    if (p->rank < n->rank || n->rejoining) {
                        p->backoff_ms = 0;
                    } else {
                        p->probe_ms = 1;
                        probe(p);
                    }
                }
            }
        } else if (!was_up && why && !p->dead && !n->stopping) {
            PHX_WARN("net", "handshake with rank %d failed: %s", p->rank, why);
        }
    } else if (p && why && !n->stopping) {
        PHX_WARN("net", "closed a connection from rank %d: %s", p->rank, why);
    } else if (why && !n->stopping) {
        PHX_WARN("net", "closed unidentified connection: %s", why);
    }
    if (flags & CC_STRIKE) {
        n->rejected[reject_reason(why)]++;
        strike(c, why);
    }
    if (p && p->conn == NULL && (p->rank < n->rank || n->rejoining) && !n->stopping)
        schedule_retry(p);
    if (flags & CC_RESET)
        uv_tcp_close_reset(&c->tcp, conn_closed);
    else
        uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

static void on_connect(uv_connect_t *req, int status)
{
    conn_t *c = req->data;
    peer_t *p = c->peer;
    if (status < 0 || c->closing) {
        if (p->conn == c)
            p->conn = NULL;
        /* Nothing listens where a peer of this job did: its process is gone
         * (a live one keeps its listener; an overloaded one drops SYNs, it
         * does not refuse). Tell the detector now instead of after delta;
         * it still decides, on its own heartbeat grace. */
        if (status == UV_ECONNREFUSED && p->ever_up && !p->up && !c->closing) {
            PHX_WARN("net", "rank %d refused the redial: its process is gone", p->rank);
            p->gone = 1;
            report_down(p, 0, "connection refused on redial");
        }
        if (!c->closing) {
            c->closing = 1;
            uv_close((uv_handle_t *)&c->tcp, conn_closed);
        }
        schedule_retry(p);
        return;
    }
    int rc = conn_begin(c);
    if (rc)
        conn_close(c, phx_strerror(rc));
}

static void dial(peer_t *p)
{
    phx_net_t *n = p->net;
    if (p->conn || p->up || p->dead || p->refused || p->left || n->stopping)
        return;
    conn_t *c = conn_new(n, p);
    if (!c) {
        schedule_retry(p);
        return;
    }
    p->conn = c;
    p->creq.data = c;
    int rc = uv_tcp_connect(&p->creq, &c->tcp, (struct sockaddr *)&p->addr, on_connect);
    if (rc) {
        p->conn = NULL;
        c->closing = 1;
        uv_close((uv_handle_t *)&c->tcp, conn_closed);
        schedule_retry(p);
    }
}

static void on_reprobe(uv_timer_t *t)
{
    probe(t->data);
}

static void on_probe(uv_connect_t *req, int status)
{
    conn_t *c = req->data;
    peer_t *p = c->peer;
    if (c->closing)   /* closed by phx_net_stop */
        return;
    c->closing = 1;
    p->probing = 0;
    /* As on a refused redial: nothing listens where the peer did, so its
     * process is gone. A redial of the peer's own may have come back
     * meanwhile (p->up): then it is not. */
    if (status == UV_ECONNREFUSED && p->ever_up && !p->up && !p->dead && !c->net->stopping) {
        PHX_WARN("net", "rank %d's port refused a probe: its process is gone", p->rank);
        p->gone = 1;
        report_down(p, 0, "connection refused on probe");
    }
    /* Accepted: the peer is alive and redials us, or it is dying and its
     * listener is still open (the kernel closes a process's sockets in
     * descriptor order, and the launcher hands the listener over at any
     * number): probe again, sooner than the redial backoff, until the
     * link is back or the loss was reported. A reset, not a FIN, so that
     * neither side keeps the probe's socket in TIME_WAIT. */
    if (status == 0) {
        uv_tcp_close_reset(&c->tcp, conn_closed);
        if (!p->up && !p->down_reported && !c->net->stopping) {
            uv_timer_start(&p->retry, on_reprobe, (uint64_t)p->probe_ms, 0);
            p->probe_ms = p->probe_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : p->probe_ms * 2;
        }
    } else {
        uv_close((uv_handle_t *)&c->tcp, conn_closed);
    }
}

/* A bare connect (no handshake) to the port of a peer whose connection its
 * kernel closed, from the side that does not redial it: a refusal is the
 * same evidence as a refused redial. Without it that side learnt of the
 * loss only when the link stayed down for hb-timeout, and the ring
 * observer of the highest rank, rank 0, is such a side. That side's retry
 * timer is free: it schedules the next probe. */
static void probe(peer_t *p)
{
    phx_net_t *n = p->net;
    if (n->stopping || p->probing || p->up || p->dead || p->refused || p->left || p->down_reported)
        return;
    conn_t *c = conn_new(n, p);
    if (!c)
        return;   /* hb-timeout still reports the loss */
    p->preq.data = c;
    if (uv_tcp_connect(&p->preq, &c->tcp, (struct sockaddr *)&p->addr, on_probe)) {
        c->closing = 1;
        uv_close((uv_handle_t *)&c->tcp, conn_closed);
        return;
    }
    p->probing = 1;
}

static void on_accept(uv_stream_t *srv, int status)
{
    phx_net_t *n = srv->data;
    if (status < 0) {
        PHX_WARN("net", "accept failed: %s", uv_strerror(status));
        return;
    }
    conn_t *c = conn_new(n, NULL);
    if (!c)
        return;
    if (uv_accept(srv, (uv_stream_t *)&c->tcp) || conn_begin(c))
        conn_close(c, "accept failed");
}

static void on_deadline(uv_timer_t *t)
{
    phx_net_t *n = t->data;
    char why[600];
    for (int r = 0; r < n->size; r++) {
        peer_t *p = &n->peers[r];
        if (r == n->rank || p->up)
            continue;
        snprintf(why, sizeof why, "%s rank %d at %s:%d within %d ms",
                 r < n->rank ? "could not connect to" : "no connection from",
                 r, n->cfg.peers[r].host, n->cfg.peers[r].port, n->cfg.startup_timeout_ms);
        if (n->cb.on_fatal)
            n->cb.on_fatal(n->cb.ctx, PHX_ETIMEDOUT, why);
        return;
    }
}

static int resolve(const char *host, int port, struct sockaddr_storage *out)
{
    struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *ai;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int rc = getaddrinfo(host, ps, &hints, &ai);
    if (rc) {
        PHX_ERROR("net", "cannot resolve %s: %s", host, gai_strerror(rc));
        return PHX_EINVAL;
    }
    memcpy(out, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    return 0;
}

/* The launcher's socket, already bound to our port (and listening): it
 * must be a TCP socket on exactly that port, or peers would dial in vain.
 * The listener owns it from here on, also on failure. 1 if it is not
 * such a socket, else uv_tcp_open's code. */
static int adopt_listener(phx_net_t *n, int fd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int type = 0;
    socklen_t tl = sizeof type;
    const struct sockaddr_in *want = (const struct sockaddr_in *)&n->peers[n->rank].addr;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0 ||
        getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type != SOCK_STREAM ||
        (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) ||
        (ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                 : ((struct sockaddr_in6 *)&ss)->sin6_port) != want->sin_port) {
        close(fd);
        return 1;
    }
    int rc = uv_tcp_open(&n->listener, fd);
    if (rc)
        close(fd);
    return rc;
}

int phx_net_start(uv_loop_t *loop, const phx_net_cfg_t *cfg, const uint8_t *secret,
                  size_t secret_len, uint32_t inc, const phx_net_cb_t *cb, phx_net_t **out)
{
    if (secret_len == 0 || secret_len > sizeof ((phx_net_t *)0)->secret)
        return PHX_EINVAL;
    phx_net_t *n = calloc(1, sizeof *n);
    if (!n)
        return PHX_ENOMEM;
    n->loop = loop;
    n->cfg = *cfg;
    n->cb = *cb;
    memcpy(n->secret, secret, secret_len);
    n->secret_len = secret_len;
    n->inc = inc;
    n->rank = cfg->rank;
    n->size = cfg->size;
    n->peers = calloc((size_t)cfg->size, sizeof *n->peers);
    n->dirty = calloc((size_t)cfg->size, sizeof *n->dirty);
    if (!n->peers || !n->dirty) {
        phx_net_free(n);
        return PHX_ENOMEM;
    }
    for (int r = 0; r < n->size; r++) {
        peer_t *p = &n->peers[r];
        p->net = n;
        p->rank = r;
        p->backoff_ms = BACKOFF_MIN_MS;
        if (phx_link_create(&p->link)) {
            phx_net_free(n);
            return PHX_ENOMEM;
        }
        if (resolve(cfg->peers[r].host, cfg->peers[r].port, &p->addr)) {
            phx_net_free(n);
            return PHX_EINVAL;
        }
    }
    uv_prepare_init(loop, &n->prepare);
    n->prepare.data = n;
    uv_prepare_start(&n->prepare, on_prepare);
    uv_timer_init(loop, &n->deadline);
    n->deadline.data = n;
    uv_timer_init(loop, &n->stop_timer);
    n->stop_timer.data = n;
    n->stop_timer_open = 1;
    uv_timer_init(loop, &n->ack_timer);
    n->ack_timer.data = n;
    uv_timer_init(loop, &n->hs_timer);
    n->hs_timer.data = n;
    n->handles += 5;
    for (int r = 0; r < n->size; r++) {
        uv_timer_init(loop, &n->peers[r].retry);
        n->peers[r].retry.data = &n->peers[r];
        uv_timer_init(loop, &n->peers[r].lost);
        n->peers[r].lost.data = &n->peers[r];
        n->handles += 2;
    }
    /* Testing only: zero-copy from this payload size on, so small jobs
     * exercise it (at least PHX_NET_ZC_HEAD + 1). */
    const char *zc = getenv("PHX_DEBUG_ZC_MIN");
    n->zc_min = zc && *zc ? (uint32_t)strtoul(zc, NULL, 10) : PHX_NET_ZC_MIN;
    if (n->zc_min <= PHX_NET_ZC_HEAD)
        n->zc_min = PHX_NET_ZC_HEAD + 1;
    /* Testing only: short reads, so frames straddle them. */
    const char *rm = getenv("PHX_DEBUG_READ_MAX");
    n->read_max = rm && *rm ? (unsigned)strtoul(rm, NULL, 10) : 0;
    const char *cut = getenv("PHX_DEBUG_CUT_LINK");
    int cut_rank, cut_times = 1;
    unsigned long long cut_after;
    if (cut && *cut) {
        int k = sscanf(cut, "%d:%d:%llu:%d", &cut_rank, &n->cut_peer, &cut_after, &cut_times);
        if (k < 3 || cut_after == 0 || cut_times < 0 || n->cut_peer < 0 || n->cut_peer >= n->size)
            PHX_WARN("net", "PHX_DEBUG_CUT_LINK=%s ignored: want RANK:PEER:FRAMES[:TIMES]", cut);
        else if (cut_rank == n->rank) {
            n->cut_after = cut_after;
            n->cut_left = cut_times ? cut_times : 1;
            n->cut_forever = cut_times == 0;
        }
    }
    uv_tcp_init(loop, &n->listener);
    n->listener.data = n;
    n->handles++;
    *out = n;

    if (n->size == 1) {
        if (cfg->listen_fd >= 0)
            close(cfg->listen_fd);   /* nobody will call */
        n->all_up = 1;
        if (cb->on_all_up)
            cb->on_all_up(cb->ctx);
        return 0;
    }
    int rc = cfg->listen_fd >= 0 ? adopt_listener(n, cfg->listen_fd)
                                 : uv_tcp_bind(&n->listener, (struct sockaddr *)&n->peers[n->rank].addr, 0);
    if (!rc)
        rc = uv_listen((uv_stream_t *)&n->listener, 1024, on_accept);
    if (rc) {
        PHX_ERROR("net", "cannot listen on %s:%d%s: %s", cfg->peers[n->rank].host, cfg->peers[n->rank].port,
                  cfg->listen_fd >= 0 ? " (socket PHX_LISTEN_FD from the launcher)" : "",
                  rc == 1 ? "not a TCP socket bound to that port" : uv_strerror(rc));
        return PHX_EIO;
    }
    uv_timer_start(&n->deadline, on_deadline, (uint64_t)cfg->startup_timeout_ms, 0);
    n->rejoin = cfg->rejoin;
    n->rejoining = n->rejoin && inc > 0;
    for (int r = 0; r < (n->rejoining ? n->size : n->rank); r++)
        if (r != n->rank)
            dial(&n->peers[r]);
    return 0;
}

uint64_t phx_net_stale_frames(const phx_net_t *n) { return n->stale_frames; }

void phx_net_counters(const phx_net_t *n, phx_net_counters_t *out)
{
    memcpy(out->rejected, n->rejected, sizeof out->rejected);
    out->rejected[PHX_NET_REJ_STALE] = n->stale_frames;
    out->links_restored = 0;
    for (int r = 0; r < n->size; r++)
        out->links_restored += n->peers[r].restores;
}

uint64_t phx_net_last_heard_ms(const phx_net_t *n, int peer)
{
    return peer >= 0 && peer < n->size ? n->peers[peer].heard_ms : 0;
}

/* The reason class of a strike, for phx_frames_rejected_total. */
static int reject_reason(const char *why)
{
    if (!why)
        return PHX_NET_REJ_MALFORMED;
    if (!strncmp(why, "authentication", 14))
        return PHX_NET_REJ_AUTH;
    if (strstr(why, "crc mismatch"))
        return PHX_NET_REJ_CHECKSUM;
    if (!strncmp(why, "link sequence", 13) || !strncmp(why, "ack for a frame never sent", 26))
        return PHX_NET_REJ_SEQUENCE;
    return PHX_NET_REJ_MALFORMED;
}

void phx_net_rejoined(phx_net_t *n) { n->rejoining = 0; }

int phx_net_send(phx_net_t *n, int peer, phx_frame_hdr_t *h, const void *prefix,
                 size_t prefix_len, const void *payload, size_t len, uint64_t charge)
{
    peer_t *p = &n->peers[peer];
    /* A link being restored queues: the frames leave once it is back. */
    if (p->dead || p->refused || p->left || n->stopping)
        return PHX_EDEAD;
    h->inc = n->inc;
    int urgent = charge == PHX_NET_URGENT;
    if (urgent)
        charge = 0;
    int rc = frame_append(urgent ? &p->cbuf : &p->obuf, h, prefix, prefix_len, payload, len);
    if (rc)
        return rc;
    p->ocharge += charge;
    mark_dirty(p);
    return 0;
}

int phx_net_send_ref(phx_net_t *n, int peer, phx_frame_hdr_t *h, const void *prefix, size_t prefix_len,
                     const void *payload, size_t len, uint64_t charge, void (*release)(void *), void *arg)
{
    if (len < n->zc_min || charge == PHX_NET_URGENT) {
        int rc = phx_net_send(n, peer, h, prefix, prefix_len, payload, len, charge);
        release(arg);
        return rc;
    }
    peer_t *p = &n->peers[peer];
    if (p->dead || p->refused || p->left || n->stopping) {
        release(arg);
        return PHX_EDEAD;
    }
    h->inc = n->inc;
    int rc = frame_append_ref(&p->obuf, h, prefix, prefix_len, payload, len, release, arg);
    if (rc) {
        release(arg);
        return rc;
    }
    n->zc_tx++;
    p->ocharge += charge;
    mark_dirty(p);
    return 0;
}

int phx_net_peer_gone(const phx_net_t *n, int peer)
{
    return peer >= 0 && peer < n->size && !n->peers[peer].up && n->peers[peer].gone;
}

/* Drops everything of the peer's current stream: its connection, what is
 * queued and what waits for an acknowledgement. */
static void drop_stream(peer_t *p, const char *why)
{
    uint64_t charge = p->ocharge + phx_link_reset(p->link);
    buf_drop(&p->obuf);
    p->cbuf.len = 0;
    p->ocharge = 0;
    if (p->conn)
        conn_close(p->conn, why);
    drain(p, charge);   /* dropped bytes no longer hold senders back */
}

void phx_net_close_peer(phx_net_t *n, int peer, const char *why)
{
    peer_t *p = &n->peers[peer];
    if (p->dead)
        return;
    p->dead = 1;
    uv_timer_stop(&p->retry);
    uv_timer_stop(&p->lost);
    drop_stream(p, why);
}

void phx_net_take_inc(phx_net_t *n, int peer, uint32_t inc)
{
    peer_t *p = &n->peers[peer];
    if (p->dead || p->inc >= inc)
        return;
    /* Nothing of the old process's stream survives; what is sent from now
     * on waits for the new one's connection (then resent as a restore). */
    drop_stream(p, "an older incarnation than the member");
    p->inc = inc;
}

void phx_net_close_inc(phx_net_t *n, int peer, uint32_t inc, const char *why)
{
    if (n->peers[peer].inc <= inc)
        phx_net_close_peer(n, peer, why);
}

void phx_net_reject(phx_net_t *n, int peer, const char *why)
{
    conn_t *c = n->peers[peer].conn;
    if (c)
        conn_close_f(c, why, CC_STRIKE);
}

void phx_net_pause_reads(phx_net_t *n, int pause)
{
    if (n->reads_paused == pause)
        return;
    n->reads_paused = pause;
    for (int r = 0; r < n->size; r++) {
        conn_t *c = n->peers[r].conn;
        if (!c || !c->up || c->closing)
            continue;
        if (pause)
            uv_read_stop((uv_stream_t *)&c->tcp);
        else
            uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    }
}

int phx_net_peer_up(const phx_net_t *n, int peer)
{
    const peer_t *p = &n->peers[peer];
    return p->ever_up && !p->dead && !p->refused && !p->left;
}

int phx_net_peer_reached(const phx_net_t *n, int peer)
{
    const peer_t *p = &n->peers[peer];
    return !p->up && (p->gone || p->closed);
}

int phx_net_peer_connected(const phx_net_t *n, int peer)
{
    return n->peers[peer].up;
}

uint64_t phx_net_queued(const phx_net_t *n, int peer)
{
    const peer_t *p = &n->peers[peer];
    uint64_t q = p->obuf.len + p->wbuf.len;
    for (int k = 0; k < p->obuf.next; k++)
        q += p->obuf.ext[k].len;
    for (int k = 0; k < p->wbuf.next; k++)
        q += p->wbuf.ext[k].len;
    return q;
}

static void on_stop_timeout(uv_timer_t *t)
{
    phx_net_t *n = t->data;
    for (conn_t *c = n->conns, *next; c; c = next) {
        next = c->next;
        conn_close(c, NULL);
    }
}

static void close_rest(phx_net_t *n)
{
    for (int r = 0; r < n->size; r++) {
        uv_close((uv_handle_t *)&n->peers[r].retry, peer_timer_closed);
        uv_close((uv_handle_t *)&n->peers[r].lost, peer_timer_closed);
    }
    uv_close((uv_handle_t *)&n->listener, handle_closed);
    uv_close((uv_handle_t *)&n->prepare, handle_closed);
    uv_close((uv_handle_t *)&n->ack_timer, handle_closed);
    uv_close((uv_handle_t *)&n->hs_timer, handle_closed);
}

void phx_net_stop(phx_net_t *n, void (*done)(void *), void *ctx)
{
    if (n->stopping)
        return;
    n->stopping = 1;
    n->stop_done = done;
    n->stop_ctx = ctx;
    for (int r = 0; r < n->size; r++) {
        peer_t *p = &n->peers[r];
        uv_timer_stop(&p->retry);
        uv_timer_stop(&p->lost);
        if (!p->conn)
            continue;
        if (!p->up) {
            conn_close(p->conn, NULL);
            continue;
        }
        phx_frame_hdr_t h = phx_frame_hdr(PHX_FT_CTRL, PHX_NET_CTRL_BYE, (uint64_t)n->rank, (uint64_t)r, 0);
        h.inc = n->inc;
        if (frame_append(&p->obuf, &h, NULL, 0, NULL, 0) == 0)
            peer_flush(p);
        if (!p->writing)
            conn_close(p->conn, NULL);
    }
    /* The rest: accepted connections not (yet) a peer's, whatever their
     * handshake's state. */
    for (conn_t *c = n->conns, *next; c; c = next) {
        next = c->next;
        if (!(c->peer && c->peer->conn == c))
            conn_close(c, NULL);
    }
    /* Unflushed peers close from on_written; the stop timer bounds the wait. */
    uv_close((uv_handle_t *)&n->deadline, handle_closed);
    if (n->nconns == 0) {
        n->stop_timer_open = 0;
        uv_close((uv_handle_t *)&n->stop_timer, handle_closed);
    } else {
        uv_timer_start(&n->stop_timer, on_stop_timeout, STOP_GRACE_MS, 0);
    }
    close_rest(n);
}

void phx_net_free(phx_net_t *n)
{
    if (!n)
        return;
    if (n->peers)
        for (int r = 0; r < n->size; r++) {
            buf_drop(&n->peers[r].obuf);
            buf_drop(&n->peers[r].wbuf);
            free(n->peers[r].obuf.ext);
            free(n->peers[r].wbuf.ext);
            free(n->peers[r].obuf.data);
            free(n->peers[r].wbuf.data);
            free(n->peers[r].cbuf.data);
            free(n->peers[r].wcbuf.data);
            peer_t *p = &n->peers[r];
            if (r != n->rank && (p->drops || p->dups || p->strikes))
                PHX_INFO("net", "rank %d: %llu connection drops, %llu restored, %llu duplicate frames "
                                "dropped, %d bad connections", r, (unsigned long long)p->drops,
                         (unsigned long long)p->restores, (unsigned long long)p->dups, p->strikes);
            phx_link_destroy(p->link);
        }
    if (n->zc_tx || n->zc_rx)
        PHX_INFO("net", "large frames: %llu sent zero-copy, %llu received in place",
                 (unsigned long long)n->zc_tx, (unsigned long long)n->zc_rx);
    if (n->bad_conns)
        PHX_WARN("net", "%llu connections closed for bad frames or failed authentication",
                 (unsigned long long)n->bad_conns);
    free(n->peers);
    free(n->dirty);
    memset(n->secret, 0, sizeof n->secret);
    free(n);
}
