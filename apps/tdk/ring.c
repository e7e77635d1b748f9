/* tdk ring HOPS: one token passed around the nodes, HOPS hops in all.
 *
 * Each hop is a fresh task spawned on the next node, so the token is the
 * only work in the system and every hop is one primary message: the
 * Theorem 1 workload of the comparison paper (tdk.h, §3.1) with p = 1 and a fixed step count.
 * The task that runs hop HOPS is, by construction, the last task of the
 * job; it prints the result. Nodes known dead are skipped, so under fault
 * tolerance the token goes on unless it was on the node that died. */
#include <inttypes.h>
#include <stdio.h>

#include "apps/tdk/tdk.h"

typedef struct hop_arg { uint64_t hop; } hop_arg_t;   /* 1-based hop number */

static int hop_type;

static void hop_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    (void)st; (void)len;
    hop_arg_t a = *(const hop_arg_t *)arg;
    int me = phx_rank(c), p = phx_size(c);
    tdk_spin();
    atomic_fetch_add(&tdk_cnt.hops, 1);
    if (a.hop < tdk_opt.hops) {
        a.hop++;
        tdk_spawn_on(c, hop_type, tdk_live((me + 1) % p, p), &a, sizeof a, NULL);
        tdk_task_end(NULL, NULL);
    } else {
        uint64_t mono, rt;
        tdk_task_end(&mono, &rt);
        printf("tdk ring: nodes=%d hops=%" PRIu64 " OK last_task_ns=%" PRIu64 " last_task_rt_ns=%" PRIu64 "\n",
               p, a.hop, mono, rt);
        fflush(stdout);
    }
    phx_task_done(c);
}

int tdk_ring_register(void)
{
    phx_type_t t = { .name = "tdk-ring-hop", .init = hop_init };
    return hop_type = phx_register_type(&t);
}

void tdk_ring_start(phx_ctx_t *c)
{
    int p = phx_size(c);
    hop_arg_t a = { 1 };
    tdk_spawn_on(c, hop_type, tdk_live(1 % p, p), &a, sizeof a, NULL);
}
