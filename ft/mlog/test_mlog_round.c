/* Per-rank progress of a period's partial rounds (ft/mlog/round.c): a
 * report counts for the round it names only, never takes a rank back, and
 * the all-reported test skips dead ranks. */
#include <stdint.h>
#include <string.h>

#include "ft/mlog/round.h"

#include "ft/mlog/test_check.h"

enum { N = 4 };

static void note(void)
{
    uint8_t last[N] = { 0 };
    phx_ml_round_note(last, N, 1, 1);
    CHECK(last[1] == 1);
    phx_ml_round_note(last, N, 1, 2);
    CHECK(last[1] == 2);
    /* The first round's report, late, after the second's: no step back. */
    phx_ml_round_note(last, N, 1, 1);
    CHECK(last[1] == 2);
    /* An undecodable frame (round 0), a round past the byte, a bad rank. */
    phx_ml_round_note(last, N, 2, 0);
    CHECK(last[2] == 0);
    phx_ml_round_note(last, N, 2, PHX_ML_ROUND_MAX);
    CHECK(last[2] == 0);
    phx_ml_round_note(last, N, 2, PHX_ML_ROUND_MAX - 1);
    CHECK(last[2] == PHX_ML_ROUND_MAX - 1);
    uint8_t before[N];
    memcpy(before, last, sizeof last);
    phx_ml_round_note(last, N, -1, 1);
    phx_ml_round_note(last, N, N, 1);
    CHECK(!memcmp(before, last, sizeof last));
}

static void all(void)
{
    uint8_t last[N] = { 0 }, dead[N] = { 0 };
    CHECK(phx_ml_round_all(last, dead, N, 0));    /* no round yet: nothing to wait for */
    CHECK(!phx_ml_round_all(last, dead, N, 1));
    for (int r = 0; r < N; r++)
        if (r != 2)
            phx_ml_round_note(last, N, r, 1);
    CHECK(!phx_ml_round_all(last, dead, N, 1));   /* rank 2 owes its report */
    dead[2] = 1;
    CHECK(phx_ml_round_all(last, dead, N, 1));    /* ... unless it died */
    /* A second round: the first round's reports do not count for it. */
    CHECK(!phx_ml_round_all(last, dead, N, 2));
    for (int r = 0; r < N; r++)
        phx_ml_round_note(last, N, r, 2);
    CHECK(phx_ml_round_all(last, dead, N, 2));
    CHECK(phx_ml_round_all(last, dead, N, 1));    /* a later report covers an earlier round */
}

int main(void)
{
    note();
    all();
    if (fails)
        fprintf(stderr, "test_mlog_round: %d checks failed\n", fails);
    return fails != 0;
}
