/* Connection setup and teardown: listen and accept, dial and redial with
 * backoff, reachability probes, the handshake, link up and down. */

#include "net/transport_int.h"

static void report_down(peer_t *p, int graceful, const char *why);
static void on_hs_timer(uv_timer_t *t);
static void probe(peer_t *p);

void tr_handle_closed(uv_handle_t *h)
{
    phx_net_t *n = h->data;
    if (--n->handles == 0 && n->stop_done)
        n->stop_done(n->stop_ctx);
}

void tr_peer_timer_closed(uv_handle_t *h)
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
        uv_close((uv_handle_t *)&n->stop_timer, tr_handle_closed);
    }
    if (--n->handles == 0 && n->stop_done)
        n->stop_done(n->stop_ctx);
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
int tr_send_handshake(conn_t *c, int type, const uint8_t *p, size_t len)
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

void tr_peer_up(conn_t *c)
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
        tr_conn_close(c, admit == PHX_LINK_STALE ? "an old incarnation"
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
        tr_drain(p, phx_link_reset(p->link));
    } else {
        p->restores++;
        PHX_INFO("net", "link to rank %d restored (%llu restores); resending %llu unacknowledged bytes",
                 p->rank, (unsigned long long)p->restores,
                 (unsigned long long)phx_link_retained(p->link));
        tr_start_resend(p);
    }
    p->inc = inc;
    p->ack_now = 1;   /* tell the peer at once what survived the outage */
    if (n->cb.on_peer_up)
        n->cb.on_peer_up(n->cb.ctx, p->rank, p->inc);
    tr_mark_dirty(p);
    if (n->reads_paused)
        uv_read_stop((uv_stream_t *)&c->tcp);
    if (first && ++n->nup_once == n->size - 1 && !n->all_up) {
        n->all_up = 1;
        uv_timer_stop(&n->deadline);
        if (n->cb.on_all_up)
            n->cb.on_all_up(n->cb.ctx);
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
            tr_conn_close(c, why);
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
    int rc = uv_read_start((uv_stream_t *)&c->tcp, tr_on_alloc, tr_on_read);
    return rc ? rc : tr_send_handshake(c, PHX_FT_HELLO, hello, (size_t)len);
}

static void on_retry(uv_timer_t *t)
{
    tr_dial(t->data);
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

void tr_conn_close(conn_t *c, const char *why) { tr_conn_close_f(c, why, 0); }

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

void tr_conn_close_f(conn_t *c, const char *why, int flags)
{
    if (c->closing)
        return;
    c->closing = 1;
    phx_net_t *n = c->net;
    peer_t *p = c->peer;
    uv_read_stop((uv_stream_t *)&c->tcp);
    tr_claim_end(c, 0);
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
        n->rejected[tr_reject_reason(why)]++;
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
        tr_conn_close(c, phx_strerror(rc));
}

void tr_dial(peer_t *p)
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

void tr_on_accept(uv_stream_t *srv, int status)
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
        tr_conn_close(c, "accept failed");
}

void tr_on_deadline(uv_timer_t *t)
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

int tr_resolve(const char *host, int port, struct sockaddr_storage *out)
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
int tr_adopt_listener(phx_net_t *n, int fd)
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
