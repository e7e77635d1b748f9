/* The partial-or-global rule for failures of one checkpoint period
 * (ft/mlog/multi.c): one failure always partial; two at once partial under
 * mlog-fast, under mlog-pessimistic iff neither lost rank stored the
 * other's determinants (also one after the first's partial round ended
 * everywhere), never under mlog-causal and mlog-team; anything after
 * another kind of round, or three, global. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ft/mlog/multi.h"

#include "ft/mlog/test_check.h"

enum { N = 8 };
static const phx_mld_mode_t MODES[] = { PHX_MLD_CAUSAL, PHX_MLD_PESSIMISTIC, PHX_MLD_FAST, PHX_MLD_TEAM };

/* dead = gone (earlier periods) + lost (this one). */
static int decide(phx_mld_mode_t m, const int *gone, int ng, const int *lost, int nl, int replayed)
{
    uint8_t d[N] = { 0 }, l[N] = { 0 };
    for (int i = 0; i < ng; i++)
        d[gone[i]] = 1;
    for (int i = 0; i < nl; i++)
        d[lost[i]] = l[lost[i]] = 1;
    return phx_mld_partial(m, N, d, l, replayed);
}

static void one_failure(void)
{
    for (int i = 0; i < 4; i++)
        for (int x = 0; x < N; x++) {
            CHECK(decide(MODES[i], NULL, 0, &x, 1, 0) == PHX_MLD_PARTIAL);
            /* a round again for the same loss after a partial one: never here, global if it were */
            CHECK(decide(MODES[i], NULL, 0, &x, 1, PHX_MLD_REPLAYED_ENDED) == PHX_MLD_GLOBAL);
            CHECK(decide(MODES[i], NULL, 0, &x, 1, PHX_MLD_REPLAYED_OTHER) == PHX_MLD_GLOBAL);
        }
    int gone[] = { 2, 6 }, x = 3;
    CHECK(decide(PHX_MLD_CAUSAL, gone, 2, &x, 1, 0) == PHX_MLD_PARTIAL);   /* earlier periods do not count */
    CHECK(decide(PHX_MLD_FAST, NULL, 0, NULL, 0, 0) == PHX_MLD_GLOBAL);    /* no loss: nothing partial */
}

static void two_failures(void)
{
    int a[] = { 1, 5 }, adj[] = { 3, 4 }, wrap[] = { 7, 0 };
    CHECK(decide(PHX_MLD_FAST, NULL, 0, a, 2, 0) == PHX_MLD_PARTIAL);
    CHECK(decide(PHX_MLD_FAST, NULL, 0, adj, 2, 0) == PHX_MLD_PARTIAL);   /* buddies: cr aborts first */
    CHECK(decide(PHX_MLD_PESSIMISTIC, NULL, 0, a, 2, 0) == PHX_MLD_PARTIAL);
    CHECK(decide(PHX_MLD_PESSIMISTIC, NULL, 0, adj, 2, 0) == PHX_MLD_GLOBAL);   /* 3's dets were on 4 */
    CHECK(decide(PHX_MLD_PESSIMISTIC, NULL, 0, wrap, 2, 0) == PHX_MLD_GLOBAL);  /* 7's on 0 */
    CHECK(decide(PHX_MLD_CAUSAL, NULL, 0, a, 2, 0) == PHX_MLD_GLOBAL);
    CHECK(decide(PHX_MLD_TEAM, NULL, 0, a, 2, 0) == PHX_MLD_GLOBAL);
    /* Anything but one partial round ended everywhere: global in every mode. */
    for (int i = 0; i < 4; i++)
        CHECK(decide(MODES[i], NULL, 0, a, 2, PHX_MLD_REPLAYED_OTHER) == PHX_MLD_GLOBAL);
    CHECK(decide(PHX_MLD_FAST, NULL, 0, a, 2, 7) == PHX_MLD_GLOBAL);   /* unknown: global */
    /* Sequential (one partial round ended everywhere): pessimistic by the
     * same pairs; fast, causal and team global. */
    CHECK(decide(PHX_MLD_PESSIMISTIC, NULL, 0, a, 2, PHX_MLD_REPLAYED_ENDED) == PHX_MLD_PARTIAL);
    CHECK(decide(PHX_MLD_PESSIMISTIC, NULL, 0, adj, 2, PHX_MLD_REPLAYED_ENDED) == PHX_MLD_GLOBAL);
    CHECK(decide(PHX_MLD_PESSIMISTIC, NULL, 0, wrap, 2, PHX_MLD_REPLAYED_ENDED) == PHX_MLD_GLOBAL);
    CHECK(decide(PHX_MLD_FAST, NULL, 0, a, 2, PHX_MLD_REPLAYED_ENDED) == PHX_MLD_GLOBAL);
    CHECK(decide(PHX_MLD_CAUSAL, NULL, 0, a, 2, PHX_MLD_REPLAYED_ENDED) == PHX_MLD_GLOBAL);
    CHECK(decide(PHX_MLD_TEAM, NULL, 0, a, 2, PHX_MLD_REPLAYED_ENDED) == PHX_MLD_GLOBAL);
    /* Rank 2 died in an earlier period: 1 stored on 3 since. */
    int g2[] = { 2 }, l13[] = { 1, 3 }, l14[] = { 1, 4 };
    CHECK(decide(PHX_MLD_PESSIMISTIC, g2, 1, l13, 2, 0) == PHX_MLD_GLOBAL);
    CHECK(decide(PHX_MLD_PESSIMISTIC, g2, 1, l14, 2, 0) == PHX_MLD_PARTIAL);
    /* Rank 3 died in this period too (a third loss): global, even for fast. */
    int l3[] = { 1, 3, 5 };
    CHECK(decide(PHX_MLD_FAST, NULL, 0, l3, 3, 0) == PHX_MLD_GLOBAL);
    CHECK(decide(PHX_MLD_PESSIMISTIC, NULL, 0, l3, 3, 0) == PHX_MLD_GLOBAL);
}

/* Every pair on N ranks, with every set of earlier-period deaths among the
 * others: pessimistic is partial iff, walking from each lost rank, the
 * first rank alive at the period's start is not the other lost rank. */
static void pessimistic_exhaustive(void)
{
    long partial = 0, total = 0;
    for (int x = 0; x < N; x++)
        for (int y = x + 1; y < N; y++)
            for (unsigned gm = 0; gm < (1u << N); gm++) {
                if (gm & (1u << x) || gm & (1u << y) || __builtin_popcount(gm) > N - 3)
                    continue;   /* at least one live rank besides them */
                uint8_t d[N] = { 0 }, l[N] = { 0 };
                for (int r = 0; r < N; r++)
                    d[r] = (gm >> r) & 1;
                d[x] = d[y] = l[x] = l[y] = 1;
                int want = 1;
                for (int i = 0; i < 2; i++) {
                    int from = i ? y : x, other = i ? x : y, r = (from + 1) % N;
                    while ((gm >> r) & 1)   /* skip the earlier dead */
                        r = (r + 1) % N;
                    want &= r != other;
                }
                int got = phx_mld_partial(PHX_MLD_PESSIMISTIC, N, d, l, 0);
                CHECK(got == (want ? PHX_MLD_PARTIAL : PHX_MLD_GLOBAL));
                CHECK(phx_mld_partial(PHX_MLD_PESSIMISTIC, N, d, l, PHX_MLD_REPLAYED_ENDED) == got);
                CHECK(phx_mld_partial(PHX_MLD_FAST, N, d, l, 0) == PHX_MLD_PARTIAL);
                partial += want;
                total++;
            }
    CHECK(partial > 0 && partial < total);
}

static void bad_input(void)
{
    uint8_t d[N] = { 0 }, l[N] = { 0 };
    l[1] = l[5] = 1;
    d[1] = 1;   /* 5 lost but not dead */
    CHECK(phx_mld_partial(PHX_MLD_FAST, N, d, l, 0) == PHX_MLD_GLOBAL);
    CHECK(phx_mld_partial(PHX_MLD_FAST, 0, d, l, 0) == PHX_MLD_GLOBAL);
    CHECK(phx_mld_partial(PHX_MLD_FAST, N, NULL, l, 0) == PHX_MLD_GLOBAL);
    memset(d, 1, sizeof d);
    memset(l, 0, sizeof l);
    CHECK(phx_mld_det_store(N, d, l, 2) == -1);   /* everyone else dead before */
    CHECK(phx_mld_det_store(N, d, l, N) == -1);
    l[4] = 1;
    CHECK(phx_mld_det_store(N, d, l, 2) == 4);    /* lost in this period: it stored them */
}

int main(void)
{
    one_failure();
    two_failures();
    pessimistic_exhaustive();
    bad_input();
    if (fails)
        fprintf(stderr, "%d checks failed\n", fails);
    else
        printf("test_mlog_multi: all checks passed\n");
    return fails != 0;
}
