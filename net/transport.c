/* The transport's public face: start and stop, the peers table, sending,
 * per-peer controls and counters. Connection setup is transport_conn.c, the
 * send and read paths transport_io.c; net/transport_int.h holds the state
 * they share. */

#include "net/transport_int.h"

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
        if (tr_resolve(cfg->peers[r].host, cfg->peers[r].port, &p->addr)) {
            phx_net_free(n);
            return PHX_EINVAL;
        }
    }
    uv_prepare_init(loop, &n->prepare);
    n->prepare.data = n;
    uv_prepare_start(&n->prepare, tr_on_prepare);
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
    int rc = cfg->listen_fd >= 0 ? tr_adopt_listener(n, cfg->listen_fd)
                                 : uv_tcp_bind(&n->listener, (struct sockaddr *)&n->peers[n->rank].addr, 0);
    if (!rc)
        rc = uv_listen((uv_stream_t *)&n->listener, 1024, tr_on_accept);
    if (rc) {
        PHX_ERROR("net", "cannot listen on %s:%d%s: %s", cfg->peers[n->rank].host, cfg->peers[n->rank].port,
                  cfg->listen_fd >= 0 ? " (socket PHX_LISTEN_FD from the launcher)" : "",
                  rc == 1 ? "not a TCP socket bound to that port" : uv_strerror(rc));
        return PHX_EIO;
    }
    uv_timer_start(&n->deadline, tr_on_deadline, (uint64_t)cfg->startup_timeout_ms, 0);
    n->rejoin = cfg->rejoin;
    n->rejoining = n->rejoin && inc > 0;
    for (int r = 0; r < (n->rejoining ? n->size : n->rank); r++)
        if (r != n->rank)
            tr_dial(&n->peers[r]);
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
int tr_reject_reason(const char *why)
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
    int rc = tr_frame_append(urgent ? &p->cbuf : &p->obuf, h, prefix, prefix_len, payload, len,
                             (size_t)n->cfg.max_frame);
    if (rc)
        return rc;
    p->ocharge += charge;
    tr_mark_dirty(p);
    return 0;
}

int phx_net_send_ref(phx_net_t *n, int peer, phx_frame_hdr_t *h, const void *prefix, size_t prefix_len,
                     const void *payload, size_t len, const uint32_t *payload_crc, uint64_t charge,
                     void (*release)(void *), void *arg)
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
    int rc = tr_frame_append_ref(&p->obuf, h, prefix, prefix_len, payload, len, payload_crc, release, arg);
    if (rc) {
        release(arg);
        return rc;
    }
    n->zc_tx++;
    p->ocharge += charge;
    tr_mark_dirty(p);
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
    tr_buf_drop(&p->obuf);
    p->cbuf.len = 0;
    p->cbuf.bat_n = 0;
    p->ocharge = 0;
    if (p->conn)
        tr_conn_close(p->conn, why);
    tr_drain(p, charge);   /* dropped bytes no longer hold senders back */
}

void phx_net_close_peer(phx_net_t *n, int peer, const char *why)
{
    peer_t *p = &n->peers[peer];
    if (p->dead)
        return;
    p->dead = 1;
    uv_timer_stop(&p->retry);
    uv_timer_stop(&p->lost);
    /* A peer declared dead (by another node's detection, say) before this
     * loop read the end its kernel sent: that end is still the evidence
     * that its process ended, not a partition (phx_net_peer_reached). */
    if (p->conn && p->conn->up && !p->conn->closing)
        tr_note_end(p->conn, tr_conn_end(p->conn));
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
        tr_conn_close_f(c, why, CC_STRIKE);
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
            uv_read_start((uv_stream_t *)&c->tcp, tr_on_alloc, tr_on_read);
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
        tr_conn_close(c, NULL);
    }
}

static void close_rest(phx_net_t *n)
{
    for (int r = 0; r < n->size; r++) {
        uv_close((uv_handle_t *)&n->peers[r].retry, tr_peer_timer_closed);
        uv_close((uv_handle_t *)&n->peers[r].lost, tr_peer_timer_closed);
    }
    uv_close((uv_handle_t *)&n->listener, tr_handle_closed);
    uv_close((uv_handle_t *)&n->prepare, tr_handle_closed);
    uv_close((uv_handle_t *)&n->ack_timer, tr_handle_closed);
    uv_close((uv_handle_t *)&n->hs_timer, tr_handle_closed);
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
            tr_conn_close(p->conn, NULL);
            continue;
        }
        phx_frame_hdr_t h = phx_frame_hdr(PHX_FT_CTRL, PHX_NET_CTRL_BYE, (uint64_t)n->rank, (uint64_t)r, 0);
        h.inc = n->inc;
        if (tr_frame_append(&p->obuf, &h, NULL, 0, NULL, 0, (size_t)n->cfg.max_frame) == 0)
            tr_peer_flush(p);
        if (!p->writing)
            tr_conn_close(p->conn, NULL);
    }
    /* The rest: accepted connections not (yet) a peer's, whatever their
     * handshake's state. */
    for (conn_t *c = n->conns, *next; c; c = next) {
        next = c->next;
        if (!(c->peer && c->peer->conn == c))
            tr_conn_close(c, NULL);
    }
    /* Unflushed peers close from on_written; the stop timer bounds the wait. */
    uv_close((uv_handle_t *)&n->deadline, tr_handle_closed);
    if (n->nconns == 0) {
        n->stop_timer_open = 0;
        uv_close((uv_handle_t *)&n->stop_timer, tr_handle_closed);
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
            tr_buf_drop(&n->peers[r].obuf);
            tr_buf_drop(&n->peers[r].wbuf);
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
    if (n->batch_rx)
        PHX_INFO("net", "batches: %llu frames received carrying %llu messages",
                 (unsigned long long)n->batch_rx, (unsigned long long)n->batch_rx_msgs);
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
