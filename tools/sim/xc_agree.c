/* xc_agree: K world agreements per rank, for cross_check.py.
 *
 * Usage: xc_agree K [RANK:AID[:sent]]
 *   K         agreements (MIN of a rank-derived value, as phx-sim --era=K)
 *   RANK:AID  rank RANK dies (SIGKILL) on learning the decision of world
 *             agreement AID (0-based; phx_agree_debug_die, "decided"), or
 *             with ":sent" right after its first message of AID left
 *
 * Unlike apps/agree, the job ends by termination detection, not by
 * phx_exit: a node's agreement returns only after its era forwarded the
 * decision (ft/era: decide sends before the decided callback), so once every
 * task is done every ERA message of every agreement has been sent and
 * counted (core/agree.c's era_stats event); an exit racing the last DECIDEs
 * would make the count timing-dependent. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/phx_err.h"
#include "core/phalanx.h"

static int K, node_type, main_type;

/* Losses are the workload here: the job must still end with 0. */
static void on_failure(void *arg, int node, uint32_t inc, uint64_t when_ns)
{
    (void)arg; (void)node; (void)inc; (void)when_ns;
}

static void node_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    (void)st; (void)arg; (void)len;
    phx_group_t *w = phx_group_world();
    int me = phx_rank(c);
    for (int k = 0; k < K; k++) {
        uint64_t v = (uint64_t)me * 2654435761u;   /* phx-sim's contribution */
        int rc = phx_agree(c, w, &v, PHX_OP_MIN);
        if (rc && rc != PHX_EPROCFAIL) {
            fprintf(stderr, "xc_agree: rank %d agreement %d: %s\n", me, k, phx_strerror(rc));
            phx_exit(c, 1);
            return;
        }
    }
    phx_task_done(c);
}

static void main_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    (void)st; (void)arg; (void)len;
    for (int r = 0; r < phx_size(c); r++)
        phx_spawn_on(c, node_type, r, NULL, 0);
    phx_task_done(c);
}

int main(int argc, char **argv)
{
    int narg = 0, die_rank = -1, die_aid = -1, point = PHX_AGREE_DIE_DECIDED;
    char phase[8] = "";
    const char *pos[2] = { NULL, NULL };
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], "--phx-", 6) && narg < 2)
            pos[narg++] = argv[i];
    if (!pos[0] || (K = atoi(pos[0])) < 1 ||
        (pos[1] && sscanf(pos[1], "%d:%d:%7s", &die_rank, &die_aid, phase) < 2) ||
        (phase[0] && strcmp(phase, "sent"))) {
        fprintf(stderr, "usage: xc_agree K [RANK:AID[:sent]]\n");
        return 2;
    }
    int rc = phx_on_failure(on_failure, NULL);
    if (rc) {
        fprintf(stderr, "xc_agree: cannot register the failure callback: %s\n", phx_strerror(rc));
        return 1;
    }
    const char *rs = getenv("PHX_RANK");
    if (phase[0])
        point = PHX_AGREE_DIE_SENT;
    if (die_rank >= 0 && rs && atoi(rs) == die_rank &&
        (rc = phx_agree_debug_die((uint64_t)die_aid, point))) {
        fprintf(stderr, "xc_agree: cannot arm the kill: %s\n", phx_strerror(rc));
        return 1;
    }
    phx_type_t nt = { .name = "xc_agree", .init = node_init };
    phx_type_t mt = { .name = "main", .init = main_init };
    node_type = phx_register_type(&nt);
    main_type = phx_register_type(&mt);
    return phx_main(argc, argv, main_type, NULL, 0);
}
