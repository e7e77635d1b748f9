#include "transport.h"

#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include "net/auth.h"
#include "phx_err.h"
#include "phx_log.h"

#define RBUF_MIN (256u << 10)
#define BACKOFF_MIN_MS 10
#define BACKOFF_MAX_MS 500
#define STOP_GRACE_MS 2000

typedef struct buf {
    uint8_t *data;
    size_t len, cap;
} buf_t;

typedef struct peer peer_t;

typedef struct conn {
    uv_tcp_t tcp;               /* first: handle callbacks cast back to conn */
    phx_net_t *net;
    peer_t *peer;               /* NULL on the accepting side until HELLO */
    phx_auth_t *auth;
    buf_t rbuf;
    int closing, got_bye, up;
    uv_shutdown_t sreq;
} conn_t;

struct peer {
    phx_net_t *net;
    int rank;
    struct sockaddr_storage addr;
    conn_t *conn;               /* handshaking or up; NULL otherwise */
    int up, dead, dirty, writing, ever_up;
    uint32_t inc;
    buf_t obuf, wbuf;           /* pending frames / frames being written */
    buf_t cbuf, wcbuf;          /* urgent frames: written ahead of obuf */
    uint64_t ocharge, wcharge;
    uv_write_t wreq;
    uv_timer_t retry;
    int backoff_ms;
    uv_connect_t creq;
};

struct phx_net {
    uv_loop_t *loop;
    const phx_config_t *cfg;
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
    int nconns, stop_timer_open;
    int handles;                /* open handles; stop completes at zero */
    void (*stop_done)(void *);
    void *stop_ctx;
};

static void conn_close(conn_t *c, const char *why);

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

static void handle_closed(uv_handle_t *h)
{
    phx_net_t *n = h->data;
    if (--n->handles == 0 && n->stop_done)
        n->stop_done(n->stop_ctx);
}

static void retry_closed(uv_handle_t *h)
{
    phx_net_t *n = ((peer_t *)h->data)->net;
    if (--n->handles == 0 && n->stop_done)
        n->stop_done(n->stop_ctx);
}

static void conn_closed(uv_handle_t *h)
{
    conn_t *c = (conn_t *)h;
    phx_net_t *n = c->net;
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

/* Appends one frame to a buffer; returns 0 or PHX_ENOMEM. */
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
    phx_frame_encode(dst, h, dst + PHX_FRAME_HDR);
    b->len += total;
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
    phx_frame_hdr_t h = { .type = (uint8_t)type, .src = (uint64_t)c->net->rank,
                          .inc = c->net->inc, .len = (uint32_t)len };
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

static void peer_flush(peer_t *p)
{
    if (!p->up || p->writing || (p->obuf.len == 0 && p->cbuf.len == 0))
        return;
    buf_t t = p->wbuf;
    p->wbuf = p->obuf;
    p->obuf = t;
    p->obuf.len = 0;
    t = p->wcbuf;
    p->wcbuf = p->cbuf;
    p->cbuf = t;
    p->cbuf.len = 0;
    p->wcharge = p->ocharge;
    p->ocharge = 0;
    p->writing = 1;
    p->wreq.data = p;
    uv_buf_t b[2];
    unsigned nb = 0;
    if (p->wcbuf.len)
        b[nb++] = uv_buf_init((char *)p->wcbuf.data, (unsigned)p->wcbuf.len);
    if (p->wbuf.len)
        b[nb++] = uv_buf_init((char *)p->wbuf.data, (unsigned)p->wbuf.len);
    int rc = uv_write(&p->wreq, (uv_stream_t *)&p->conn->tcp, b, nb, on_written);
    if (rc) {
        p->writing = 0;
        conn_close(p->conn, uv_strerror(rc));
    }
}

static void on_written(uv_write_t *req, int status)
{
    peer_t *p = req->data;
    phx_net_t *n = p->net;
    uint64_t charge = p->wcharge;
    p->writing = 0;
    p->wcharge = 0;
    p->wbuf.len = 0;
    p->wcbuf.len = 0;
    if (p->wbuf.cap > (64u << 20)) {   /* one huge message should not pin memory */
        free(p->wbuf.data);
        p->wbuf = (buf_t){0};
    }
    if (charge && n->cb.on_drain)
        n->cb.on_drain(n->cb.ctx, p->rank, charge);
    if (status < 0) {
        if (p->conn)
            conn_close(p->conn, uv_strerror(status));
        return;
    }
    if (p->obuf.len || p->cbuf.len)
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

static void peer_up(conn_t *c)
{
    phx_net_t *n = c->net;
    peer_t *p = c->peer;
    c->up = 1;
    p->up = 1;
    /* "All up" means every peer completed a handshake once: a peer may
     * already have died by the time the last one connects, and the job
     * must still start (the failure detector handles the dead one). */
    int first = !p->ever_up;
    p->ever_up = 1;
    p->inc = (uint32_t)phx_auth_peer_inc(c->auth);
    PHX_INFO("net", "rank %d up (incarnation %u)", p->rank, p->inc);
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

/* Returns 0 to go on reading, negative if the connection was closed. */
static int handle_frame(conn_t *c, const phx_frame_hdr_t *h, const uint8_t *payload)
{
    phx_net_t *n = c->net;
    uint8_t out[64];
    if (!c->up) {
        if (h->type == PHX_FT_HELLO) {
            int rc = phx_auth_on_hello(c->auth, payload, h->len, out, sizeof out);
            if (rc < 0) {
                conn_close(c, rc == PHX_EAUTH ? "authentication failed: bad HELLO" : "malformed HELLO");
                return -1;
            }
            if (!c->peer) {   /* accepting side: the HELLO names the peer */
                int64_t r = phx_auth_peer_rank(c->auth);
                if (r <= n->rank || r >= n->size) {
                    conn_close(c, "HELLO from a rank that should not dial us");
                    return -1;
                }
                peer_t *p = &n->peers[r];
                if (p->dead || p->conn) {
                    conn_close(c, p->dead ? "HELLO from a rank declared dead" : "duplicate connection");
                    return -1;
                }
                c->peer = p;
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
                conn_close(c, "authentication failed: wrong cluster secret");
                return -1;
            }
            peer_up(c);
            return 0;
        }
        conn_close(c, "frame before authentication");
        return -1;
    }
    if (h->type == PHX_FT_HELLO || h->type == PHX_FT_AUTH || h->type == PHX_FT_AUTH_OK) {
        conn_close(c, "handshake frame after authentication");
        return -1;
    }
    if (h->inc != c->peer->inc) {
        PHX_DEBUG("net", "dropped frame from rank %d incarnation %u (current %u)",
                  c->peer->rank, h->inc, c->peer->inc);
        return 0;
    }
    if (h->type == PHX_FT_CTRL && h->tag == PHX_NET_CTRL_BYE) {
        c->got_bye = 1;
        return 0;
    }
    n->cb.on_frame(n->cb.ctx, c->peer->rank, h, payload);
    return c->closing ? -1 : 0;
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    conn_t *c = (conn_t *)h;
    (void)hint;
    if (buf_reserve(&c->rbuf, RBUF_MIN / 4)) {
        *b = uv_buf_init(NULL, 0);   /* libuv reports UV_ENOBUFS */
        return;
    }
    *b = uv_buf_init((char *)c->rbuf.data + c->rbuf.len, (unsigned)(c->rbuf.cap - c->rbuf.len));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    conn_t *c = (conn_t *)s;
    phx_net_t *n = c->net;
    (void)b;
    if (nread < 0) {
        conn_close(c, nread == UV_EOF ? "connection closed by peer" : uv_strerror((int)nread));
        return;
    }
    c->rbuf.len += (size_t)nread;
    size_t off = 0;
    uint32_t max = (uint32_t)(n->cfg->max_frame > PHX_FRAME_LEN_HARDMAX ? PHX_FRAME_LEN_HARDMAX : n->cfg->max_frame);
    while (off < c->rbuf.len) {
        phx_frame_hdr_t h;
        const char *why;
        int r = phx_frame_decode(c->rbuf.data + off, c->rbuf.len - off, c->up ? max : 256, &h, &why);
        if (r == PHX_ETRUNC) {
            if (c->rbuf.len - off >= PHX_FRAME_HDR) {
                /* Large frame: make room for all of it, so it arrives in place. */
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
            conn_close(c, reason);
            return;
        }
        if (handle_frame(c, &h, c->rbuf.data + off + PHX_FRAME_HDR) < 0) {
            if (n->cb.on_read_end)
                n->cb.on_read_end(n->cb.ctx);
            return;
        }
        off += (size_t)r;
    }
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
    uv_tcp_init(n->loop, &c->tcp);
    n->handles++;
    n->nconns++;
    uv_tcp_nodelay(&c->tcp, 1);
    int rc = phx_auth_create(n->secret, n->secret_len, (uint32_t)n->rank, n->inc, n->cfg->job_id,
                             p ? p->rank : -1, &c->auth);
    if (rc) {
        PHX_ERROR("net", "cannot create authenticator: %s", phx_strerror(rc));
        c->closing = 1;
        uv_close((uv_handle_t *)&c->tcp, conn_closed);
        return NULL;
    }
    return c;
}

static int conn_begin(conn_t *c)
{
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
    if (n->stopping || p->dead || n->all_up)
        return;
    uv_timer_start(&p->retry, on_retry, (uint64_t)p->backoff_ms, 0);
    p->backoff_ms = p->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : p->backoff_ms * 2;
}

static void conn_close(conn_t *c, const char *why)
{
    if (c->closing)
        return;
    c->closing = 1;
    phx_net_t *n = c->net;
    peer_t *p = c->peer;
    uv_read_stop((uv_stream_t *)&c->tcp);
    if (p && p->conn == c) {
        p->conn = NULL;
        int was_up = c->up;
        p->up = 0;
        if (was_up) {
            if (!n->stopping) {
                if (c->got_bye)
                    PHX_INFO("net", "rank %d left", p->rank);
                else
                    PHX_WARN("net", "connection to rank %d lost: %s", p->rank, why ? why : "closed");
                if (n->cb.on_peer_down)
                    n->cb.on_peer_down(n->cb.ctx, p->rank, c->got_bye, why ? why : "closed");
            }
        } else if (why && !p->dead) {
            PHX_WARN("net", "handshake with rank %d failed: %s", p->rank, why);
            if (p->rank < n->rank)
                schedule_retry(p);
        }
    } else if (why && !n->stopping) {
        PHX_WARN("net", "closed unidentified connection: %s", why);
    }
    uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

static void on_connect(uv_connect_t *req, int status)
{
    conn_t *c = req->data;
    peer_t *p = c->peer;
    if (status < 0 || c->closing) {
        if (p->conn == c)
            p->conn = NULL;
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
    if (p->conn || p->up || p->dead || n->stopping)
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
                 r, n->cfg->peers[r].host, n->cfg->peers[r].port, n->cfg->startup_timeout_ms);
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

int phx_net_start(uv_loop_t *loop, const phx_config_t *cfg, const uint8_t *secret,
                  size_t secret_len, uint32_t inc, const phx_net_cb_t *cb, phx_net_t **out)
{
    if (secret_len == 0 || secret_len > sizeof ((phx_net_t *)0)->secret)
        return PHX_EINVAL;
    phx_net_t *n = calloc(1, sizeof *n);
    if (!n)
        return PHX_ENOMEM;
    n->loop = loop;
    n->cfg = cfg;
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
    n->handles += 3;
    for (int r = 0; r < n->size; r++) {
        uv_timer_init(loop, &n->peers[r].retry);
        n->peers[r].retry.data = &n->peers[r];
        n->handles++;
    }
    uv_tcp_init(loop, &n->listener);
    n->listener.data = n;
    n->handles++;
    *out = n;

    if (n->size == 1) {
        n->all_up = 1;
        if (cb->on_all_up)
            cb->on_all_up(cb->ctx);
        return 0;
    }
    int rc = uv_tcp_bind(&n->listener, (struct sockaddr *)&n->peers[n->rank].addr, 0);
    if (!rc)
        rc = uv_listen((uv_stream_t *)&n->listener, 1024, on_accept);
    if (rc) {
        PHX_ERROR("net", "cannot listen on %s:%d: %s", cfg->peers[n->rank].host,
                  cfg->peers[n->rank].port, uv_strerror(rc));
        return PHX_EIO;
    }
    uv_timer_start(&n->deadline, on_deadline, (uint64_t)cfg->startup_timeout_ms, 0);
    for (int r = 0; r < n->rank; r++)
        dial(&n->peers[r]);
    return 0;
}

int phx_net_send(phx_net_t *n, int peer, phx_frame_hdr_t *h, const void *prefix,
                 size_t prefix_len, const void *payload, size_t len, uint64_t charge)
{
    peer_t *p = &n->peers[peer];
    if (p->dead || (p->ever_up && !p->up) || n->stopping)
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

void phx_net_close_peer(phx_net_t *n, int peer, const char *why)
{
    peer_t *p = &n->peers[peer];
    if (p->dead)
        return;
    p->dead = 1;
    uv_timer_stop(&p->retry);
    uint64_t charge = p->ocharge;
    p->obuf.len = 0;
    p->cbuf.len = 0;
    p->ocharge = 0;
    if (p->conn)
        conn_close(p->conn, why);
    if (charge && n->cb.on_drain)   /* dropped bytes no longer hold senders back */
        n->cb.on_drain(n->cb.ctx, peer, charge);
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

int phx_net_peer_up(const phx_net_t *n, int peer) { return n->peers[peer].up; }

uint64_t phx_net_queued(const phx_net_t *n, int peer)
{
    return n->peers[peer].obuf.len + n->peers[peer].wbuf.len;
}

static void on_stop_timeout(uv_timer_t *t)
{
    phx_net_t *n = t->data;
    for (int r = 0; r < n->size; r++)
        if (n->peers[r].conn)
            conn_close(n->peers[r].conn, NULL);
}

static void close_rest(phx_net_t *n)
{
    for (int r = 0; r < n->size; r++)
        uv_close((uv_handle_t *)&n->peers[r].retry, retry_closed);
    uv_close((uv_handle_t *)&n->listener, handle_closed);
    uv_close((uv_handle_t *)&n->prepare, handle_closed);
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
        if (!p->conn)
            continue;
        if (!p->up) {
            conn_close(p->conn, NULL);
            continue;
        }
        phx_frame_hdr_t h = { .type = PHX_FT_CTRL, .tag = PHX_NET_CTRL_BYE, .inc = n->inc,
                              .src = (uint64_t)n->rank, .dst = (uint64_t)r };
        if (frame_append(&p->obuf, &h, NULL, 0, NULL, 0) == 0)
            peer_flush(p);
        if (!p->writing)
            conn_close(p->conn, NULL);
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
            free(n->peers[r].obuf.data);
            free(n->peers[r].wbuf.data);
            free(n->peers[r].cbuf.data);
            free(n->peers[r].wcbuf.data);
        }
    free(n->peers);
    free(n->dirty);
    memset(n->secret, 0, sizeof n->secret);
    free(n);
}
