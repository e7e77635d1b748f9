/* Team-based message logging, the pure parts (ft/mlog/team.c): team
 * membership, "must log?", exact volumes on a ring, the
 * rolled-back set and its fallbacks, the rule-2 filter and the own-det
 * record. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft/mlog/team.h"
#include "base/phx_err.h"

#include "ft/mlog/test_check.h"

static void membership(void)
{
    /* Consecutive ranks (thesis Table 5.1): 0..t-1 is team 0. */
    CHECK(phx_team_of(0, 2) == 0 && phx_team_of(1, 2) == 0 && phx_team_of(2, 2) == 1 && phx_team_of(7, 2) == 3);
    CHECK(phx_team_of(5, 4) == 1 && phx_team_of(3, 4) == 0);
    for (int r = 0; r < 8; r++) {
        CHECK(phx_team_of(r, 1) == r);                 /* t = 1: every node its own team */
        CHECK(phx_team_of(r, 8) == 0);                 /* t = N: one team */
        for (int s = 0; s < 8; s++) {
            CHECK(phx_team_must_log(r, s, 1) == (r != s));
            CHECK(!phx_team_must_log(r, s, 8));
            CHECK(phx_team_must_log(r, s, 2) == (r / 2 != s / 2));
            CHECK(phx_team_must_log(r, s, 2) == phx_team_must_log(s, r, 2));
        }
    }
}

/* A ring of P objects on N nodes (contiguous mapping), K
 * iterations, one message per object per iteration. Only node-boundary
 * crossings between teams are logged: (N/t)·K with N/t > 1 teams, 0 with
 * t = N; t = 1 gives plain causal's N·K (R7). */
static void ring_volume(void)
{
    enum { P = 32, N = 8, K = 10 };
    for (int t = 1; t <= N; t *= 2) {
        long logged = 0, remote = 0;
        for (int k = 0; k < K; k++)
            for (int o = 0; o < P; o++) {
                int src = o * N / P, dst = ((o + 1) % P) * N / P;
                remote += src != dst;
                logged += src != dst && phx_team_must_log(src, dst, t);
            }
        CHECK(remote == (long)N * K);
        CHECK(logged == (t == N ? 0 : (long)(N / t) * K));
    }
}

static int nset(const uint8_t *rb, int n)
{
    int k = 0;
    for (int r = 0; r < n; r++)
        k += rb[r];
    return k;
}

static void rollback_set(void)
{
    uint8_t dead[9] = { 0 }, rb[9];
    dead[3] = 1;
    CHECK(phx_team_rollback_set(8, 2, dead, rb) == PHX_TEAM_PARTIAL);
    CHECK(rb[2] && rb[3] && nset(rb, 8) == 2);           /* exactly team {2, 3} */
    CHECK(phx_team_rollback_set(8, 4, dead, rb) == PHX_TEAM_PARTIAL);
    CHECK(rb[0] && rb[1] && rb[2] && rb[3] && nset(rb, 8) == 4);
    CHECK(phx_team_rollback_set(8, 1, dead, rb) == PHX_TEAM_PARTIAL);
    CHECK(rb[3] && nset(rb, 8) == 1);                    /* t = 1: the dead node alone */
    /* The team is the whole job: nothing survives outside it. */
    CHECK(phx_team_rollback_set(8, 8, dead, rb) == PHX_TEAM_GLOBAL && nset(rb, 8) == 8);
    CHECK(phx_team_rollback_set(8, 100, dead, rb) == PHX_TEAM_GLOBAL);
    /* A last, shorter team: 9 nodes, t = 4 -> {8}. */
    memset(dead, 0, sizeof dead);
    dead[8] = 1;
    CHECK(phx_team_rollback_set(9, 4, dead, rb) == PHX_TEAM_PARTIAL && rb[8] && nset(rb, 9) == 1);
    /* Everyone else of the team dead already is still one failure only if
     * dead holds one rank: two failures fall back. */
    memset(dead, 0, sizeof dead);
    dead[1] = dead[5] = 1;
    CHECK(phx_team_rollback_set(8, 2, dead, rb) == PHX_TEAM_GLOBAL && nset(rb, 8) == 8);
    dead[5] = 0;
    dead[0] = 1;   /* two of one team */
    CHECK(phx_team_rollback_set(8, 2, dead, rb) == PHX_TEAM_GLOBAL);
    memset(dead, 0, sizeof dead);
    CHECK(phx_team_rollback_set(8, 2, dead, rb) == PHX_TEAM_GLOBAL);   /* no failure: nothing partial */
    CHECK(phx_team_rollback_set(8, 0, dead, rb) == PHX_EINVAL);
    CHECK(phx_team_rollback_set(0, 2, dead, rb) == PHX_EINVAL);
}

static void relog(void)
{
    phx_team_relog_t r = { 0 };
    CHECK(!phx_team_relog_skip(&r, 1, 2, 1));            /* empty: log everything */
    /* A log in send order: pairs interleaved, ssns growing per pair. */
    uint64_t log[][3] = { { 1, 2, 1 }, { 1, 3, 1 }, { 1, 2, 2 }, { 4, 2, 1 }, { 1, 2, 3 }, { 1, 3, 2 } };
    for (size_t i = 0; i < sizeof log / sizeof log[0]; i++)
        CHECK(!phx_team_relog_add(&r, log[i][0], log[i][1], log[i][2]));
    CHECK(!phx_team_relog_skip(&r, 1, 2, 1));            /* not sealed yet */
    phx_team_relog_seal(&r);
    for (uint64_t s = 1; s <= 3; s++)
        CHECK(phx_team_relog_skip(&r, 1, 2, s));
    CHECK(!phx_team_relog_skip(&r, 1, 2, 4));            /* new since the failure: logged */
    CHECK(phx_team_relog_skip(&r, 1, 3, 2) && !phx_team_relog_skip(&r, 1, 3, 3));
    CHECK(phx_team_relog_skip(&r, 4, 2, 1) && !phx_team_relog_skip(&r, 4, 2, 2));
    CHECK(!phx_team_relog_skip(&r, 2, 1, 1) && !phx_team_relog_skip(&r, 4, 3, 1) && !phx_team_relog_skip(&r, 0, 0, 0));
    CHECK(r.n == 3);
    /* Many pairs: every one found, neighbours not confused. */
    phx_team_relog_clear(&r);
    for (uint64_t s = 100; s > 0; s--)
        for (uint64_t d = 1; d <= 50; d++)
            CHECK(!phx_team_relog_add(&r, s, d * 7, s + d));
    phx_team_relog_seal(&r);
    CHECK(r.n == 100 * 50);
    for (uint64_t s = 1; s <= 100; s++)
        for (uint64_t d = 1; d <= 50; d++) {
            CHECK(phx_team_relog_skip(&r, s, d * 7, s + d));
            CHECK(!phx_team_relog_skip(&r, s, d * 7, s + d + 1));
            CHECK(!phx_team_relog_skip(&r, s, d * 7 + 1, 1));
        }
    phx_team_relog_clear(&r);
    CHECK(!r.n && !r.p && !phx_team_relog_skip(&r, 1, 7, 1));
}

static void own(void)
{
    phx_team_own_t o = { 0 };
    for (uint64_t i = 1; i <= 5000; i++) {
        phx_det_t d = { .sender = 9, .receiver = 4, .ssn = i, .rsn = i };
        phx_team_own_add(&o, &d);
    }
    CHECK(o.n == 5000 && !o.err);
    int inorder = 1;
    for (size_t i = 0; i < o.n; i++)
        inorder &= o.d[i].rsn == i + 1 && o.d[i].ssn == i + 1;
    CHECK(inorder);
    phx_team_own_clear(&o);
    CHECK(!o.n && !o.d && !o.err);
}

int main(void)
{
    membership();
    ring_volume();
    rollback_set();
    relog();
    own();
    if (fails)
        fprintf(stderr, "%d checks failed\n", fails);
    else
        printf("test_mlog_team: all checks passed\n");
    return fails != 0;
}
