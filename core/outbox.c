/* The outbox's consumer side (comm thread): see core/outbox.h. */
#include "core/node.h"
#include "core/outbox.h"
#include "core/recovery.h"
#include "core/send.h"
#include "core/term.h"

/* Takes charge off n->outq and wakes the senders waiting for room. */
static void outbox_taken(phx_node_t *n, int64_t charge)
{
    if (!charge)
        return;
    atomic_fetch_sub(&n->outq, charge);
    if (atomic_load(&n->bp_waiters)) {
        pthread_mutex_lock(&n->bp_lock);
        pthread_cond_broadcast(&n->bp_cond);
        pthread_mutex_unlock(&n->bp_lock);
    }
}

void phx_outbox_send(phx_node_t *n, phx_msg_t *m)
{
    int held = 0;
    if (m->kind == PHX_MK_EXIT) {
        phx_node_exit(n, (int)m->hdr.tag, 1);
    } else if (atomic_load(&n->stopping)) {
        /* job over: drop */
    } else {
        m->hdr.type = m->kind == PHX_MK_SPAWN ? PHX_FT_SPAWN : PHX_FT_APP;
        uint8_t pb[PHX_TD_PB_MAX] = {0};
        int rc = phx_term_on_send(n, m, pb);
        held = rc == 1;
        if (rc == 0) {
            phx_send_msg(n, m, pb, phx_term_pb_size(n));
            m = NULL;
        }
    }
    if (!held) {
        phx_msg_free(m);
        atomic_fetch_sub(&n->work, 1);
    }
}

void phx_node_drain_outbox(phx_node_t *n)
{
    struct cds_wfcq_head lh;
    struct cds_wfcq_tail lt;
    cds_wfcq_init(&lh, &lt);
    if (cds_wfcq_empty(&n->oh, &n->ot))
        return;
    __cds_wfcq_splice_blocking(&lh, &lt, &n->oh, &n->ot);
    const phx_recovery_ops_t *rh = phx_node_rec_hooks(n);
    int gate = rh && rh->out_gate;
    struct cds_wfcq_node *qn;
    int64_t out = 0;   /* charge taken off the outbox, not yet off n->outq */
    while ((qn = __cds_wfcq_dequeue_blocking(&lh, &lt))) {
        phx_msg_t *m = caa_container_of(qn, phx_msg_t, qn);
        PHX_HANDOFF_ACQUIRE(m);
        if (m->kind == PHX_MK_APP || m->kind == PHX_MK_SPAWN) {
            out += phx_msg_charge(m->hdr.len);
            /* Senders waiting for room go on while the rest is framed. */
            if (out >= PHX_OUTBOX_MAX / 2) {
                outbox_taken(n, out);
                out = 0;
            }
        }
        if (m->kind == PHX_MK_CALL) {
            atomic_fetch_sub(&n->work, 1);
            m->call(n, m);
            continue;
        }
        if (gate && rh->out_gate(n->rec_st, m))
            continue;   /* the mode sends it later, through phx_outbox_send */
        phx_outbox_send(n, m);
    }
    outbox_taken(n, out);
    if (gate && rh->out_drained)
        rh->out_drained(n->rec_st);
    phx_term_flush(n);
    phx_pool_flush();
}

void phx_outbox_free(phx_node_t *n)
{
    struct cds_wfcq_node *qn;
    while ((qn = __cds_wfcq_dequeue_blocking(&n->oh, &n->ot)))
        phx_msg_free(caa_container_of(qn, phx_msg_t, qn));
}
