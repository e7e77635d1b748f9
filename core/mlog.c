/* Message-logging recovery modes (issue 11): mlog-causal and
 * mlog-pessimistic. The protocol is in ft/mlog/ (determinant queues and the
 * SCML state machine, unit-tested through simulated jobs with kills); the
 * runtime glue (trailers on frames, the delivery hook feeding
 * phx_ml_admit, restoring only the dead node's tasks, re-sending the logs)
 * is not written yet. Until it is, both names are registered so that they
 * are known and documented, and refused at startup with a message: a job
 * must never run believing it is protected. */
#include <stdio.h>

#include "core/node.h"
#include "core/recovery.h"
#include "phx_err.h"

static int refuse(phx_node_t *n)
{
    if (n->rank == 0)
        fprintf(stderr,
                "phalanx: recovery=%s is not implemented yet: the protocol exists (ft/mlog) but the runtime "
                "glue does not; use recovery=cr\n",
                n->cfg.recovery);
    return PHX_EINVAL;
}

const phx_recovery_ops_t phx_recovery_mlog_causal = {
    .name = "mlog-causal",
    .help = "simple causal message logging (not implemented yet: refused)",
    .configure = refuse,
};

const phx_recovery_ops_t phx_recovery_mlog_pessimistic = {
    .name = "mlog-pessimistic",
    .help = "pessimistic message logging (not implemented yet: refused)",
    .configure = refuse,
};
