/* The data path: buffering and sealing frames, send windows, writes,
 * acks and resends; reading, framing and in-place (claimed) receives. */

#include <errno.h>

#include "net/transport_int.h"

static void on_written(uv_write_t *req, int status);

static int window_full(const phx_link_t *l)
{
    return phx_link_retained_copied(l) >= SEND_WINDOW || phx_link_retained(l) >= SEND_WINDOW_REF;
}

/* Ends c's claim, if any, telling the consumer unless it let go. */
void tr_claim_end(conn_t *c, int ok)
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
void tr_buf_drop(buf_t *b)
{
    b->len = 0;
    b->bat_n = 0;
    for (int i = 0; i < b->next; i++)
        b->ext[i].release(b->ext[i].arg);
    b->next = 0;
}

void tr_mark_dirty(peer_t *p)
{
    if (!p->dirty) {
        p->dirty = 1;
        p->net->dirty[p->net->ndirty++] = p;
    }
}

/* Ends the buffer's open batch: writes its header, unsealed. A batch of
 * one is written as that message's own frame (its payload moved back over
 * the entry's sub-header), so a lone message costs what it did before. */
void tr_buf_close(buf_t *b)
{
    if (!b->bat_n)
        return;
    uint8_t *f = b->data + b->bat;
    if (b->bat_n == 1) {
        memmove(f + PHX_FRAME_HDR, f + PHX_FRAME_HDR + PHX_BATCH_SUB, b->bat_h.len);
        b->len -= PHX_BATCH_SUB;
        phx_frame_put_hdr(f, &b->bat_h, f + PHX_FRAME_HDR);
    } else {
        phx_frame_hdr_t h = phx_frame_hdr(PHX_FT_BATCH, 0, 0, 0, (uint32_t)(b->len - b->bat - PHX_FRAME_HDR));
        h.inc = b->bat_h.inc;
        phx_frame_put_hdr(f, &h, f + PHX_FRAME_HDR);
    }
    b->bat_n = 0;
}

/* A message that may share a BATCH frame: a small APP or SPAWN one. */
static int batchable(const phx_frame_hdr_t *h, size_t size)
{
    return (h->type == PHX_FT_APP || h->type == PHX_FT_SPAWN) && !h->flags && size <= BATCH_ITEM;
}

/* Appends one frame to a buffer, unsealed (link fields and crc are set at
 * flush time, when its sequence number is known); 0 or PHX_ENOMEM. A small
 * message joins the open batch when the batch stays within BATCH_MAX and
 * the receiver's max_frame. */
int tr_frame_append(buf_t *b, phx_frame_hdr_t *h, const void *pre, size_t plen,
                    const void *payload, size_t len, size_t max_frame)
{
    h->len = (uint32_t)(plen + len);
    int bat = batchable(h, plen + len);
    size_t total = (bat ? PHX_BATCH_SUB : PHX_FRAME_HDR) + plen + len;
    if (bat && b->bat_n) {
        size_t blen = b->len - b->bat - PHX_FRAME_HDR + total;
        if (blen > BATCH_MAX || blen > max_frame || h->inc != b->bat_h.inc)
            tr_buf_close(b);
    } else {
        tr_buf_close(b);
    }
    if (bat && !b->bat_n)
        total += PHX_FRAME_HDR;   /* a new batch: room for its header */
    if (buf_reserve(b, total))
        return PHX_ENOMEM;
    uint8_t *dst = b->data + b->len;
    if (bat) {
        if (!b->bat_n) {
            b->bat = b->len;
            b->bat_h = *h;
            dst += PHX_FRAME_HDR;
        }
        b->bat_n++;
        phx_batch_put(dst, h);
        dst += PHX_BATCH_SUB;
    } else {
        dst += PHX_FRAME_HDR;
    }
    if (plen)
        memcpy(dst, pre, plen);
    if (len)
        memcpy(dst + plen, payload, len);
    if (!bat)
        phx_frame_put_hdr(b->data + b->len, h, b->data + b->len + PHX_FRAME_HDR);
    b->len += total;
    return 0;
}

/* Appends a frame whose payload is prefix + a referenced buffer: only the
 * header and prefix are copied; the buffer is written from where it is
 * (and summed here unless payload_crc gives its checksum). */
int tr_frame_append_ref(buf_t *b, phx_frame_hdr_t *h, const void *pre, size_t plen,
                        const void *payload, size_t len, const uint32_t *payload_crc,
                        void (*release)(void *), void *arg)
{
    tr_buf_close(b);
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
    if (payload_crc)
        phx_frame_put_hdr_crc(dst, h, phx_crc32c_combine(phx_crc32c(0, pre, plen), *payload_crc, len));
    else
        phx_frame_put_hdr2(dst, h, dst + PHX_FRAME_HDR, plen, payload, len);
    b->len += PHX_FRAME_HDR + plen;
    b->ext[b->next++] = (phx_link_ext_t){ .at = b->len, .len = len, .p = payload,
                                          .release = release, .arg = arg };
    return 0;
}

void tr_drain(peer_t *p, uint64_t charge)
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

void tr_peer_flush(peer_t *p)
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
        tr_buf_close(&p->cbuf);
        if (!hold) {   /* else wbuf stays empty: only urgent frames go */
            tr_buf_close(&p->obuf);
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
            tr_buf_drop(b);   /* given up on, like a failed retain */
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

static void on_written(uv_write_t *req, int status)
{
    peer_t *p = req->data;
    phx_net_t *n = p->net;
    conn_t *wc = p->wconn;
    uint64_t freed = 0;
    p->writing = 0;
    p->wconn = NULL;
    if (p->dead) {   /* closed while writing: nothing will be resent */
        tr_buf_drop(&p->wbuf);
        free(p->wbuf.data);
        free(p->wcbuf.data);
        p->wbuf.data = p->wcbuf.data = NULL;
        p->wbuf.cap = p->wcbuf.cap = p->wcbuf.len = 0;
        tr_drain(p, p->wcharge);
        p->wcharge = 0;
        return;
    }
    /* Written or not, the frames stay until the peer acks them: a failed
     * write is resent after the reconnect like a lost one. */
    int rc = retain(p, &p->wcbuf, p->wccount, 0, &freed);
    int rc2 = retain(p, &p->wbuf, p->wcount, p->wcharge, &freed);
    p->wccount = p->wcount = 0;
    p->wcharge = 0;
    tr_drain(p, freed);
    if (rc || rc2) {
        retain_failed(p);
        return;
    }
    if (status < 0 && wc && !wc->closing) {
        tr_note_end(wc, status);
        tr_conn_close(wc, uv_strerror(status));
    }
    if (!p->up)
        return;   /* flushed again once the link is restored */
    if (p->resend_pending)
        tr_start_resend(p);
    if (p->obuf.len || p->cbuf.len || (p->ack_now && phx_link_ack_due(p->link)))
        tr_peer_flush(p);
    else if (n->stopping && p->conn && !p->conn->closing)
        tr_conn_close(p->conn, NULL);
}

void tr_on_prepare(uv_prepare_t *h)
{
    phx_net_t *n = h->data;
    for (int i = 0; i < n->ndirty; i++) {
        peer_t *p = n->dirty[i];
        p->dirty = 0;
        tr_peer_flush(p);
    }
    n->ndirty = 0;
}

void phx_net_flush(phx_net_t *n) { tr_on_prepare(&n->prepare); }

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
void tr_start_resend(peer_t *p)
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
            tr_conn_close(p->conn, "resend failed");
            return;
        }
        PHX_DEBUG("net", "rank %d: resent %ld bytes", p->rank, len);
    }
    tr_mark_dirty(p);
}

static void on_ack_timer(uv_timer_t *t)
{
    phx_net_t *n = t->data;
    n->ack_armed = 0;
    for (int r = 0; r < n->size; r++) {
        peer_t *p = &n->peers[r];
        if (p->up && phx_link_ack_due(p->link)) {
            p->ack_now = 1;
            tr_mark_dirty(p);
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
        tr_conn_close_f(c, "ack for a frame never sent", CC_STRIKE);
        return -1;
    }
    tr_drain(p, freed);
    if (held && !window_full(p->link) && p->obuf.len)
        tr_mark_dirty(p);   /* the window opened */
    if (h->type == PHX_FT_ACK) {
        if (h->lseq || h->len) {
            tr_conn_close_f(c, "malformed ACK frame", CC_STRIKE);
            return -1;
        }
        return 0;
    }
    int rc = phx_link_on_recv(p->link, h->lseq);
    if (rc < 0) {
        tr_conn_close_f(c, h->lseq ? "link sequence gap" : "data frame without a link sequence", CC_STRIKE);
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
        tr_mark_dirty(p);
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
                tr_conn_close_f(c, rc == PHX_EAUTH ? "authentication failed: bad HELLO" : "malformed HELLO",
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
                    tr_conn_close_f(c, "HELLO from a rank that should not dial us", CC_STRIKE);
                    return -1;
                }
                peer_t *p = &n->peers[r];
                if ((p->dead && !back) || p->refused || p->left) {
                    tr_conn_close(c, p->dead ? "HELLO from a rank declared dead"
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
            if (tr_send_handshake(c, PHX_FT_AUTH, out, (size_t)rc)) {
                tr_conn_close(c, "handshake write failed");
                return -1;
            }
            return 0;
        }
        if (h->type == PHX_FT_AUTH && c->peer) {
            if (phx_auth_on_auth(c->auth, payload, h->len) != PHX_OK) {
                PHX_WARN("net", "refused rank %d: wrong cluster secret", c->peer->rank);
                tr_conn_close_f(c, "authentication failed: wrong cluster secret", CC_STRIKE);
                return -1;
            }
            peer_t *p = c->peer;
            if (p->conn != c) {
                if (p->conn)
                    tr_conn_close(p->conn, "replaced by a new connection from the same rank");
                p->conn = c;
            }
            tr_peer_up(c);
            return 0;
        }
        tr_conn_close_f(c, "frame before authentication", CC_STRIKE);
        return -1;
    }
    if (h->type == PHX_FT_HELLO || h->type == PHX_FT_AUTH || h->type == PHX_FT_AUTH_OK) {
        tr_conn_close_f(c, "handshake frame after authentication", CC_STRIKE);
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
        tr_conn_close_f(c, "cut by PHX_DEBUG_CUT_LINK", CC_RESET);
        if (n->cut_forever) {   /* as if the path between the two were gone */
            p->refused = 1;
            uv_timer_stop(&p->retry);
        }
        return -1;
    }
    int entries = 0;
    if (h->type == PHX_FT_BATCH) {
        const char *why;
        if ((entries = phx_batch_check(payload, h->len, &why)) < 0) {
            char reason[200];
            snprintf(reason, sizeof reason, "bad batch frame: %s", why);
            tr_conn_close_f(c, reason, CC_STRIKE);
            return -1;
        }
    }
    int rc = link_frame(c, h);
    if (rc <= 0)
        return rc;
    if (h->type == PHX_FT_BATCH) {
        /* Checked whole above, and accepted by the link as one frame: every
         * entry is delivered, whatever a consumer does meanwhile. */
        n->batch_rx++;
        n->batch_rx_msgs += (uint64_t)entries;
        phx_frame_hdr_t e;
        phx_batch_begin(&e, h);
        for (size_t off = 0; off < h->len;) {
            off += (size_t)phx_batch_next(payload + off, h->len - off, &e, NULL);
            n->cb.on_frame(n->cb.ctx, c->peer->rank, &e, payload + off - e.len);
        }
        return c->closing ? -1 : 0;
    }
    if (h->type == PHX_FT_CTRL && h->tag == PHX_NET_CTRL_BYE) {
        c->got_bye = 1;
        return 0;
    }
    if (c->zc.on)
        tr_claim_end(c, 1);
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

void tr_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
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

int tr_conn_end(conn_t *c)
{
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0)
        return 0;
    /* Bounded by what the kernel buffers for one socket: the sender is gone
     * or told to stop, so nothing refills it meanwhile. */
    char sink[16384];
    for (size_t got = 0; got < ((size_t)64 << 20);) {
        ssize_t r = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        if (r == 0)
            return UV_EOF;
        if (r < 0)
            return errno == ECONNRESET ? UV_ECONNRESET : 0;
        got += (size_t)r;
    }
    return 0;
}

void tr_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    conn_t *c = (conn_t *)s;
    phx_net_t *n = c->net;
    (void)b;
    if (nread < 0) {
        tr_note_end(c, (int)nread);
        /* A caller that closed without a byte said is a peer's probe
         * (probe()) or a port scan: nothing worth a line. */
        int silent = !c->peer && !c->rbuf.len;
        tr_conn_close(c, silent ? NULL : nread == UV_EOF ? "connection closed by peer" : uv_strerror((int)nread));
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
            tr_conn_close_f(c, reason, CC_STRIKE);
            return;
        }
        phx_frame_hdr_t h;
        phx_frame_decode(c->zc.hdr, PHX_FRAME_HDR, UINT32_MAX, &h, NULL);
        c->zc.edge = 1;   /* the claim's reads took exactly the frame */
        int rc = handle_frame(c, &h, c->zc.hdr + PHX_FRAME_HDR);
        tr_claim_end(c, 0);   /* not delivered (duplicate, stale): the consumer lets go */
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
                    tr_conn_close(c, "out of memory for inbound frame");
                    return;
                }
            }
            break;
        }
        if (r < 0) {
            char reason[200];
            snprintf(reason, sizeof reason, "bad frame: %s", why);
            tr_conn_close_f(c, reason, CC_STRIKE);
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
