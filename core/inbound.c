/* Application frames coming in (comm thread): see core/inbound.h. */
#include <string.h>

#include "core/node.h"
#include "core/inbound.h"
#include "core/recovery.h"
#include "core/term.h"
#include "base/phx_log.h"

extern int phx_ntypes;

/* m: NULL, or the message a zero-copy receive filled (all but the first
 * PHX_NET_ZC_HEAD payload bytes, which are at payload). */
static void deliver_app(phx_node_t *n, int peer, const phx_frame_hdr_t *h, const uint8_t *payload, phx_msg_t *m)
{
    size_t pbsz = phx_term_pb_size(n);
    if (phx_recovery_on_deliver(n, peer, h)) {
        phx_msg_free(m);
        return;   /* stale: sent before a rollback */
    }
    if (h->len < pbsz || phx_node_host_of(n, h->dst) != n->rank ||
        (h->type == PHX_FT_SPAWN && h->tag >= (uint32_t)phx_ntypes)) {
        phx_msg_free(m);
        phx_net_reject(n->net, peer, "malformed application frame");
        return;
    }
    size_t len = h->len - pbsz;
    if (m) {
        memcpy(m->data, payload + pbsz, PHX_NET_ZC_HEAD - pbsz);
    } else {
        if (!(m = phx_msg_alloc(len))) {
            PHX_ERROR("node", "out of memory for an inbound message from rank %d", peer);
            phx_node_exit(n, 1, 1);
            return;
        }
        if (len)
            memcpy(m->data, payload + pbsz, len);
    }
    m->hdr = *h;
    m->hdr.len = (uint32_t)len;
    m->kind = h->type == PHX_FT_SPAWN ? PHX_MK_SPAWN : PHX_MK_APP;
    m->type_id = (uint16_t)h->tag;
    m->peer = peer;
    PHX_CNT_ADD(n->msgs_recv, 1);
    PHX_CNT_ADD(n->bytes_recv, len);
    phx_term_on_recv(n, peer, payload);
    phx_node_batch_add(n, m);
}

void phx_inbound_app(phx_node_t *n, int peer, const phx_frame_hdr_t *h, const uint8_t *payload)
{
    deliver_app(n, peer, h, payload, NULL);
}

uint8_t *phx_inbound_claim(void *ctx, int peer, const phx_frame_hdr_t *h, const uint8_t *head, void **tok)
{
    phx_node_t *n = ctx;
    size_t pbsz = phx_term_pb_size(n);
    if (h->type == PHX_FT_CTRL)
        return phx_recovery_net_claim(ctx, peer, h, head, tok);
    if (atomic_load(&n->stopping) || h->len < PHX_NET_ZC_HEAD || pbsz > PHX_NET_ZC_HEAD)
        return NULL;
    phx_msg_t *m = phx_msg_alloc(h->len - pbsz);
    *tok = m;
    return m ? m->data + (PHX_NET_ZC_HEAD - pbsz) : NULL;
}

void phx_inbound_claimed(void *ctx, int peer, const phx_frame_hdr_t *h, const uint8_t *head, void *tok, int ok)
{
    phx_node_t *n = ctx;
    if (h->type == PHX_FT_CTRL)
        phx_recovery_net_claimed(ctx, peer, h, head, tok, ok);
    else if (!ok || atomic_load(&n->stopping))
        phx_msg_free(tok);
    else
        deliver_app(n, peer, h, head, tok);
}

void phx_inbound_resume(phx_node_t *n)
{
    if (atomic_load(&n->reads_paused) && atomic_load(&n->inbound) <= n->cfg.recv_buffer / 2 &&
        !atomic_load(&n->stopping)) {
        atomic_store(&n->reads_paused, 0);
        phx_net_pause_reads(n->net, 0);
    }
}
