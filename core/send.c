/* One application message to the transport (comm thread): see core/send.h. */
#include "core/metrics.h"
#include "core/node.h"
#include "core/recovery.h"
#include "core/send.h"
#include "base/phx_err.h"
#include "base/phx_log.h"

static void msg_release(void *m) { phx_msg_free(m); }

void phx_send_msg(phx_node_t *n, phx_msg_t *m, const uint8_t *pb, size_t pbsz)
{
    uint64_t charge = (uint64_t)phx_msg_charge(m->hdr.len);
    int peer = m->peer;
    phx_recovery_on_send(n, m);
    int rc = phx_net_send_ref(n->net, peer, &m->hdr, pb, pbsz, m->data, m->hdr.len, m->pcrc ? &m->pcrc : NULL,
                              charge, msg_release, m);
    if (rc) {
        /* To a dead peer: counted, not logged (its failure is reported once,
         * and the senders may keep going at full speed until the job ends). */
        if (rc == PHX_EDEAD)
            phx_metrics_add(PHX_M_DROPPED_DEAD, 1);
        else
            PHX_WARN("node", "message to rank %d dropped: %s", peer, phx_strerror(rc));
        atomic_fetch_sub(&n->peer_out[peer], (int64_t)charge);
    }
}
