/* recovery=cr: bulk transfer of checkpoint blobs in acknowledged chunks
 * (buddy copies, shipped copies, tasks moving home), zero-copy on both
 * ends, and where a finished transfer goes. */
#include <stdlib.h>
#include <string.h>

#include "core/cr_int.h"

static void chunk_in(cr_t *c, int peer, bulk_t *r, size_t k);
static void on_bulk_done(cr_t *c, bulk_t *r);

/* ---- bulk transfer --------------------------------------------------------
 * A blob (a buddy copy: BK_COPY; a dead node's copy shipped to a new host of
 * its tasks: BK_XFER) travels in chunks of at most CHUNK bytes with at most
 * WINDOW bytes unacknowledged: the transport queues a bounded amount whatever
 * the blob's size, so a node's state need not fit in max-frame, and the
 * receiver copies each chunk straight into the final buffer. Links are FIFO:
 * chunks arrive in order; one starting at offset 0 restarts a transfer.
 * CK_CHUNK: the transfer id (control head), a phx_ck_chunk_t, data.
 * CK_CACK: the id, a phx_ck_cack_t. CHUNK_HDR: a chunk frame's payload
 * ahead of its data. */
#define CHUNK_HDR (PHX_CK_CTL_HEAD + PHX_CK_CHUNK_HDR)
#define CHUNK ((size_t)1 << 20)
/* Chunks are zero-copy, so the window costs no memory beyond the kernel's
 * socket buffers: a wide one saves round trips (each a wake-up of both
 * comm threads, milliseconds on a loaded host). 16 against 4 chunks,
 * interleaved pairs, 2 cores at load average 28: commit 1.37x faster at
 * 32 MiB per node (7 pairs), 1.06x at 8 MiB (8 pairs). */
#define WINDOW (16 * CHUNK)

static size_t chunk_size(const cr_t *c)
{
    size_t lim = (size_t)c->n->cfg.max_frame - CHUNK_HDR;
    return lim < CHUNK ? lim : CHUNK;
}

static bulk_t *bulk_find(bulk_t *v, int nv, int peer, int kind, int key)
{
    for (int i = 0; i < nv; i++)
        if (v[i].peer == peer && v[i].kind == kind && v[i].key == key)
            return &v[i];
    return NULL;
}

static bulk_t *bulk_add(bulk_t **v, int *nv, int *cap)
{
    if (*nv == *cap) {
        int nc = *cap ? 2 * *cap : 8;
        bulk_t *g = realloc(*v, (size_t)nc * sizeof *g);
        if (!g)
            return NULL;
        *v = g;
        *cap = nc;
    }
    bulk_t *b = &(*v)[(*nv)++];
    memset(b, 0, sizeof *b);
    return b;
}

static void bulk_del(bulk_t *v, int *nv, bulk_t *b)
{
    if (b->claimed)
        phx_net_unclaim(b->net, b->peer);   /* before dst goes */
    free(b->dst);
    *b = v[--*nv];
}

static void pin_release(void *arg)
{
    pin_t *p = arg;
    if (--p->refs)
        return;
    if (p->orphan)
        free(p->blob);
    p->orphan = 0;
    p->blob = NULL;
    if (p->detached)
        free(p);
}

static pin_t *pin_get(cr_t *c, void *blob)
{
    pin_t *free_one = NULL;
    for (pin_t *p = c->bulk.pins; p; p = p->next) {
        if (p->refs && p->blob == blob)
            return p;
        if (!p->refs)
            free_one = p;
    }
    if (!free_one) {
        if (!(free_one = calloc(1, sizeof *free_one)))
            return NULL;
        free_one->next = c->bulk.pins;
        c->bulk.pins = free_one;
    }
    free_one->blob = blob;
    return free_one;
}

/* Store hook: a blob still referenced by the transport is not pooled. */
int cr_pin_keep(void *ctx, void *blob)
{
    for (pin_t *p = ((cr_t *)ctx)->bulk.pins; p; p = p->next)
        if (p->refs && p->blob == blob) {
            p->orphan = 1;
            return 1;
        }
    return 0;
}

/* Bytes queued at the transport for the peer, not yet written, beyond
 * which no more chunks are queued. A chunk is read twice there (its
 * checksum when queued, the kernel's copy when written): queued just ahead
 * of its write, the second read finds it in cache. A transfer with nothing
 * in flight always queues one, so its ack pumps again. */
#define AHEAD (2 * CHUNK)

static void bulk_pump(cr_t *c, bulk_t *t)
{
    size_t cs = chunk_size(c);
    while (t->off < t->total && t->off - t->acked < WINDOW &&
           (t->off == t->acked || phx_net_queued(c->n->net, t->peer) < AHEAD)) {
        size_t k = t->total - t->off < cs ? t->total - t->off : cs;
        uint8_t pre[CHUNK_HDR];
        phx_ck_ctl_enc(pre, t->id);
        phx_ck_chunk_enc(pre + PHX_CK_CTL_HEAD, &(phx_ck_chunk_t){ .kind = (uint8_t)t->kind, .key = t->key,
                                                                   .epoch = t->epoch, .total = t->total,
                                                                   .off = t->off });
        phx_frame_hdr_t h = phx_frame_hdr(PHX_FT_CTRL, CK_CHUNK, (uint64_t)c->self, (uint64_t)t->peer,
                                          (uint32_t)(CHUNK_HDR + k));
        /* A buddy copy is the store's own blob, which the pins keep alive:
         * written from where it is. A shipped copy is copied. */
        pin_t *pn = t->kind == BK_COPY ? pin_get(c, (void *)(uintptr_t)t->src) : NULL;
        int rc;
        if (pn) {
            pn->refs++;
            rc = phx_net_send_ref(c->n->net, t->peer, &h, pre, sizeof pre, t->src + t->off, k, NULL, 0, pin_release, pn);
        } else {
            rc = phx_net_send(c->n->net, t->peer, &h, pre, sizeof pre, t->src + t->off, k, 0);
        }
        if (rc) {
            PHX_DEBUG("ckpt", "chunk to rank %d not sent: %s", t->peer, phx_strerror(rc));
            return;   /* the peer is dead: its failure notice ends the transfer */
        }
        t->off += k;
    }
}

/* Sends blob (kept alive by the caller until the transfer ends) to peer. */
int cr_bulk_send(cr_t *c, int kind, int peer, int key, uint64_t id, uint64_t epoch, const void *blob,
                     size_t len)
{
    bulk_t *t = bulk_find(c->bulk.tx, c->bulk.ntx, peer, kind, key);
    if (!t && !(t = bulk_add(&c->bulk.tx, &c->bulk.ntx, &c->bulk.captx)))
        return PHX_ENOMEM;
    *t = (bulk_t){ .peer = peer, .kind = kind, .key = key, .id = id, .epoch = epoch, .src = blob, .total = len };
    bulk_pump(c, t);
    return 0;
}

/* Ends the transfers (which: BK_TX | BK_RX) of one kind (any: -1). */
void cr_bulk_drop(cr_t *c, int kind, int which)
{
    for (int i = c->bulk.ntx - 1; i >= 0 && (which & BK_TX); i--)
        if (kind < 0 || c->bulk.tx[i].kind == kind)
            bulk_del(c->bulk.tx, &c->bulk.ntx, &c->bulk.tx[i]);
    for (int i = c->bulk.nrx - 1; i >= 0 && (which & BK_RX); i--)
        if (kind < 0 || c->bulk.rx[i].kind == kind)
            bulk_del(c->bulk.rx, &c->bulk.nrx, &c->bulk.rx[i]);
}

void cr_on_cack(cr_t *c, int peer, uint64_t id, const uint8_t *p, size_t len)
{
    phx_ck_cack_t a;
    if (phx_ck_cack_dec(p, len, &a))
        return;
    bulk_t *t = bulk_find(c->bulk.tx, c->bulk.ntx, peer, a.kind, a.key);
    uint64_t got = a.got;
    if (!t || t->id != id || got > t->off || got < t->acked)
        return;   /* an ended or restarted transfer */
    t->acked = got;
    if (t->acked == t->total)
        bulk_del(c->bulk.tx, &c->bulk.ntx, t);
    else
        bulk_pump(c, t);
}

/* Zero-copy receive (phx_net_cb_t.on_claim): a chunk that continues a
 * transfer in progress lands straight in the copy being filled. Only
 * those: a claim must change nothing, as the frame may yet fail its
 * checksum (a first chunk, which may restart a transfer, is copied). */
uint8_t *cr_rx_claim(void *st, int peer, const phx_frame_hdr_t *h, const uint8_t *p, void **tok)
{
    cr_t *c = st;
    (void)tok;
    phx_ck_ctl_t m;
    phx_ck_chunk_t ch;
    /* Only the head is in: the decoders read no further than it. */
    if (h->tag != CK_CHUNK || h->len < PHX_NET_ZC_HEAD || phx_ck_ctl_dec(p, h->len, &m) ||
        phx_ck_chunk_dec(m.body, m.len, &ch))
        return NULL;
    uint64_t total = ch.total, off = ch.off;
    bulk_t *r = bulk_find(c->bulk.rx, c->bulk.nrx, peer, ch.kind, ch.key);
    if (!r || !off || r->claimed || r->id != m.arg || r->off != off || r->total != total)
        return NULL;
    r->claimed = 1;
    r->net = c->n->net;
    return r->dst + off + (PHX_NET_ZC_HEAD - CHUNK_HDR);
}

void cr_rx_claimed(void *st, int peer, const phx_frame_hdr_t *h, const uint8_t *p, void *tok, int ok)
{
    cr_t *c = st;
    (void)tok;
    /* Still there: dropping a claimed transfer unclaims it first. */
    phx_ck_ctl_t m;
    phx_ck_chunk_t ch;
    if (phx_ck_ctl_dec(p, h->len, &m) || phx_ck_chunk_dec(m.body, m.len, &ch))
        return;
    bulk_t *r = bulk_find(c->bulk.rx, c->bulk.nrx, peer, ch.kind, ch.key);
    if (!r || !r->claimed)
        return;
    r->claimed = 0;
    if (!ok)
        return;   /* resent later */
    memcpy(r->dst + r->off, p + CHUNK_HDR, PHX_NET_ZC_HEAD - CHUNK_HDR);
    chunk_in(c, peer, r, h->len - CHUNK_HDR);
}

void cr_on_chunk(cr_t *c, int peer, uint64_t id, const uint8_t *p, size_t len)
{
    phx_ck_chunk_t ch;
    if (phx_ck_chunk_dec(p, len, &ch))
        return;
    int kind = ch.kind, key = ch.key;
    uint64_t epoch = ch.epoch, total = ch.total, off = ch.off;
    size_t k = len - PHX_CK_CHUNK_HDR;
    if ((kind != BK_COPY && kind != BK_XFER && kind != BK_MIG) || key < 0 || key >= c->size)
        return;
    bulk_t *r = bulk_find(c->bulk.rx, c->bulk.nrx, peer, kind, key);
    if (off == 0) {
        if (r)
            bulk_del(c->bulk.rx, &c->bulk.nrx, r);
        size_t cap;
        uint8_t *buf = kind == BK_COPY && phx_ck_store_open(&c->store, epoch)
                           ? phx_ck_store_buf(&c->store, total, &cap) : kind != BK_COPY ? malloc(total ? total : 1) : NULL;
        if (!buf) {
            PHX_WARN("ckpt", "copy of rank %d's epoch %llu not kept (no slot or no memory)", key,
                     (unsigned long long)epoch);
            return;
        }
        if (!(r = bulk_add(&c->bulk.rx, &c->bulk.nrx, &c->bulk.caprx))) {
            free(buf);
            cr_fatal(c, 1, "%s", "out of memory receiving a checkpoint");
            return;
        }
        *r = (bulk_t){ .peer = peer, .kind = kind, .key = key, .id = id, .epoch = epoch, .dst = buf, .total = total };
    }
    if (!r || r->id != id || r->off != off || r->total != total || r->claimed)
        return;   /* the rest of a transfer whose start was refused or restarted */
    memcpy(r->dst + off, p + PHX_CK_CHUNK_HDR, k);
    chunk_in(c, peer, r, k);
}

/* k more bytes of r are in its buffer: acknowledged, and the copy is done
 * when whole. */
static void chunk_in(cr_t *c, int peer, bulk_t *r, size_t k)
{
    uint64_t id = r->id;
    int kind = r->kind, key = r->key;
    r->off += k;
    uint8_t ack[PHX_CK_CACK_LEN];
    phx_ck_cack_enc(ack, &(phx_ck_cack_t){ .kind = (uint8_t)kind, .key = key, .got = r->off });
    cr_ctl(c, peer, CK_CACK, id, ack, sizeof ack);
    if (r->off == r->total)
        on_bulk_done(c, r);
}

/* ---- serialisation ------------------------------------------------------- */

/* A transfer arrived whole: a buddy copy is kept (and ACKed), a shipped
 * copy waits for the rollback that restores it. */
static void on_bulk_done(cr_t *c, bulk_t *r)
{
    int peer = r->peer, key = r->key;
    uint64_t id = r->id;
    if (r->kind == BK_COPY) {
        int rc = phx_ck_store_put_held(&c->store, r->epoch, peer, r->dst, r->total);
        if (rc)
            PHX_WARN("ckpt", "buddy copy of rank %d not kept: %s", peer, phx_strerror(rc));
        else
            r->dst = NULL;
        bulk_del(c->bulk.rx, &c->bulk.nrx, r);
        if (!rc)
            cr_ctl(c, peer, CK_ACK, id, NULL, 0);
        return;
    }
    if (r->kind == BK_MIG) {   /* rebuilt at this checkpoint's cut (migrate) */
        free(c->home.in[peer]);
        c->home.in[peer] = r->dst;
        c->home.in_len[peer] = r->total;
        c->home.in_id[peer] = id;
        r->dst = NULL;
        bulk_del(c->bulk.rx, &c->bulk.nrx, r);
        cr_progress(c);
        return;
    }
    if ((int)id >= c->ndead) {   /* else shipped for an older round */
        free(c->xfer.blob[key]);
        c->xfer.blob[key] = r->dst;
        c->xfer.len[key] = r->total;
        c->xfer.epoch[key] = r->epoch;
        r->dst = NULL;
    }
    bulk_del(c->bulk.rx, &c->bulk.nrx, r);
    cr_progress(c);
}

