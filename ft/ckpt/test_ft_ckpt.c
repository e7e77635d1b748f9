/* Checkpoint/restart decisions (ft/ckpt/ckpt.c) without sockets: buddies,
 * relocation, the two-phase commit, the recovery round, the stale-frame
 * filter and copy retention. The end-to-end runs are in
 * tests/integration/test_ckpt.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/phx_err.h"
#include "ft/ckpt/ckpt.h"

#define N 8

static void *dupb(const char *s) { return strdup(s); }

static void test_buddy_skips_dead(void **st)
{
    (void)st;
    int ring[N] = { 0, 4, 1, 5, 2, 6, 3, 7 };   /* two hosts, alternating */
    uint8_t dead[N] = { 0 };
    assert_int_equal(phx_ck_buddy(N, ring, dead, 0), 4);
    assert_int_equal(phx_ck_buddy(N, ring, dead, 7), 0);   /* wraps */
    dead[4] = 1;
    assert_int_equal(phx_ck_buddy(N, ring, dead, 0), 1);
    memset(dead, 1, N);
    dead[2] = 0;
    assert_int_equal(phx_ck_buddy(N, ring, dead, 2), -1);  /* alone */
}

#define S 4   /* slices per home rank */

static void test_relocate_spreads(void **st)
{
    (void)st;
    int loc_e[N * S], buddy_e[N], loc[N * S], lost = -1, lb = -1;
    uint8_t dead[N] = { 0 };
    for (int i = 0; i < N * S; i++)
        loc_e[i] = i / S;
    for (int r = 0; r < N; r++)
        buddy_e[r] = (r + 1) % N;
    dead[3] = dead[6] = 1;   /* non-buddies */
    assert_int_equal(phx_ck_relocate(N, N * S, loc_e, buddy_e, dead, loc, &lost, &lb), 0);
    /* 3's four slices go to four different live ranks, its buddy first;
     * 6's continue the round robin. */
    assert_int_equal(loc[3 * S], 4);
    assert_int_equal(loc[3 * S + 1], 5);
    assert_int_equal(loc[3 * S + 2], 7);
    assert_int_equal(loc[3 * S + 3], 0);
    for (int k = 0; k < S; k++)
        assert_false(dead[loc[6 * S + k]]);
    assert_int_not_equal(loc[6 * S], loc[6 * S + 1]);
    for (int i = 0; i < N * S; i++)
        if (i / S != 3 && i / S != 6)
            assert_int_equal(loc[i], i / S);
    /* Slices already relocated at the epoch move with their host. */
    loc_e[3 * S] = 4;
    memset(dead, 0, N);
    dead[4] = 1;
    assert_int_equal(phx_ck_relocate(N, N * S, loc_e, buddy_e, dead, loc, &lost, &lb), 0);
    assert_int_equal(loc[3 * S], 5);
    assert_int_equal(loc[3 * S + 1], 3);
    for (int k = 0; k < S; k++)
        assert_false(dead[loc[4 * S + k]]);
    /* A node and its buddy: both copies gone, named. */
    dead[5] = 1;
    assert_int_equal(phx_ck_relocate(N, N * S, loc_e, buddy_e, dead, loc, &lost, &lb), PHX_EUNRECOVERABLE);
    assert_int_equal(lost, 4);
    assert_int_equal(lb, 5);
}

/* The ranks dead since an epoch are those its table still places slices
 * on: one dead before it was relocated away and hosts none. */
static void test_dead_since(void **st)
{
    (void)st;
    int loc_e[N * S];
    uint8_t dead[N] = { 0 }, since[N];
    for (int i = 0; i < N * S; i++)
        loc_e[i] = i / S;
    loc_e[2 * S] = loc_e[2 * S + 1] = 3;   /* 2 died before the epoch: its slices on 3 and 4 */
    loc_e[2 * S + 2] = loc_e[2 * S + 3] = 4;
    dead[2] = dead[4] = 1;
    assert_int_equal(phx_ck_dead_since(N, N * S, loc_e, dead, since), 1);
    for (int r = 0; r < N; r++)
        assert_int_equal(since[r], r == 4);
    /* No such epoch: nobody. */
    assert_int_equal(phx_ck_dead_since(N, N * S, NULL, dead, since), 0);
    assert_false(since[4]);
}

/* The move home puts a live home rank's slices back on it; a dead home
 * rank's stay where relocation put them, and so do slices of home ranks
 * beyond n (a restarted job's). */
static void test_home_table(void **st)
{
    (void)st;
    int loc[(N + 1) * S], t[(N + 1) * S];
    uint8_t dead[N] = { 0 };
    for (int i = 0; i < (N + 1) * S; i++)
        loc[i] = i / S % N;
    assert_int_equal(phx_ck_home_table(N, (N + 1) * S, S, loc, dead, t), 0);
    assert_memory_equal(t, loc, sizeof t);
    loc[1 * S + 2] = 5;   /* 1's slice left on a helper by a partial round */
    loc[6 * S] = 0;       /* 6 is dead: its slice stays on 0 */
    loc[N * S + 1] = 3;   /* home rank N (beyond n) stays */
    dead[6] = 1;
    assert_int_equal(phx_ck_home_table(N, (N + 1) * S, S, loc, dead, t), 1);
    for (int i = 0; i < (N + 1) * S; i++)
        assert_int_equal(t[i], i == 1 * S + 2 ? 1 : loc[i]);
}

/* recovery-helpers=P: a dead rank's slices go round-robin to its buddy and
 * the next P-1 live ranks after it (rank order, wrapping). */
static void test_relocate_helpers(void **st)
{
    (void)st;
    int loc_e[N * S], buddy_e[N], loc[N * S], ref[N * S], lost = -1, lb = -1;
    uint8_t dead[N] = { 0 };
    for (int i = 0; i < N * S; i++)
        loc_e[i] = i / S;
    for (int r = 0; r < N; r++)
        buddy_e[r] = (r + 1) % N;
    dead[3] = 1;
    static const int want[][S] = { { 4, 4, 4, 4 }, { 4, 5, 4, 5 }, { 4, 5, 6, 4 }, { 4, 5, 6, 7 } };
    static const int ps[] = { 1, 2, 3, 4 };
    for (int t = 0; t < 4; t++) {
        assert_int_equal(phx_ck_relocate_p(N, N * S, loc_e, buddy_e, dead, ps[t], loc, &lost, &lb), 0);
        for (int k = 0; k < S; k++)
            assert_int_equal(loc[3 * S + k], want[t][k]);
        for (int i = 0; i < N * S; i++)
            if (i / S != 3)
                assert_int_equal(loc[i], i / S);   /* nobody else moves */
    }
    /* P = 0 is phx_ck_relocate (every live rank, one round robin). */
    assert_int_equal(phx_ck_relocate(N, N * S, loc_e, buddy_e, dead, ref, &lost, &lb), 0);
    assert_int_equal(phx_ck_relocate_p(N, N * S, loc_e, buddy_e, dead, 0, loc, &lost, &lb), 0);
    assert_memory_equal(loc, ref, sizeof loc);
    /* P beyond the live ranks: every live one, from the buddy on, wrapping. */
    memset(dead, 0, N);
    dead[6] = 1;
    assert_int_equal(phx_ck_relocate_p(N, N * S, loc_e, buddy_e, dead, 20, loc, &lost, &lb), 0);
    assert_int_equal(loc[6 * S], 7);
    assert_int_equal(loc[6 * S + 1], 0);
    assert_int_equal(loc[6 * S + 2], 1);
    assert_int_equal(loc[6 * S + 3], 2);
    /* Two dead ranks: each deals from its own buddy, dead ranks skipped
     * (3's helpers are 4 and 6, not 5). */
    dead[6] = 0;
    dead[3] = dead[5] = 1;
    assert_int_equal(phx_ck_relocate_p(N, N * S, loc_e, buddy_e, dead, 2, loc, &lost, &lb), 0);
    for (int k = 0; k < S; k++) {
        assert_int_equal(loc[3 * S + k], k % 2 ? 6 : 4);
        assert_int_equal(loc[5 * S + k], k % 2 ? 7 : 6);
    }
    /* The buddy need not be the next rank (heartbeat ring across hosts). */
    buddy_e[3] = 0;
    assert_int_equal(phx_ck_relocate_p(N, N * S, loc_e, buddy_e, dead, 2, loc, &lost, &lb), 0);
    for (int k = 0; k < S; k++)
        assert_int_equal(loc[3 * S + k], k % 2 ? 1 : 0);
    buddy_e[3] = 4;
    /* Slices moved at the epoch move with their host, in slice order:
     * 3's first slice lives on 4, and 4 dies (helpers 5, 6). */
    memset(dead, 0, N);
    loc_e[3 * S] = 4;
    dead[4] = 1;
    assert_int_equal(phx_ck_relocate_p(N, N * S, loc_e, buddy_e, dead, 2, loc, &lost, &lb), 0);
    assert_int_equal(loc[3 * S], 5);
    assert_int_equal(loc[4 * S], 6);
    assert_int_equal(loc[4 * S + 1], 5);
    assert_int_equal(loc[4 * S + 2], 6);
    assert_int_equal(loc[4 * S + 3], 5);
    assert_int_equal(loc[3 * S + 1], 3);
    /* A node and its buddy: named, whatever P. */
    dead[5] = 1;
    assert_int_equal(phx_ck_relocate_p(N, N * S, loc_e, buddy_e, dead, 1, loc, &lost, &lb), PHX_EUNRECOVERABLE);
    assert_int_equal(lost, 4);
    assert_int_equal(lb, 5);
}

static void test_commit_needs_every_live_node(void **st)
{
    (void)st;
    phx_ck_commit_t c;
    uint8_t dead[N] = { 0 };
    assert_int_equal(phx_ck_commit_init(&c, N), 0);
    phx_ck_commit_begin(&c, 5);
    for (int r = 0; r < N - 1; r++)
        assert_int_equal(phx_ck_commit_ready(&c, r, 5, dead), 0);
    assert_int_equal(phx_ck_commit_ready(&c, N - 1, 4, dead), 0);   /* stale epoch */
    assert_int_equal(phx_ck_commit_ready(&c, N - 1, 5, dead), 1);
    assert_int_equal(phx_ck_commit_ready(&c, N - 1, 5, dead), 0);   /* decided once */
    /* A dead node's readiness is not awaited, but an abort wins. */
    phx_ck_commit_begin(&c, 6);
    dead[2] = 1;
    for (int r = 0; r < N; r++)
        if (r != 2 && r != 7)
            assert_int_equal(phx_ck_commit_ready(&c, r, 6, dead), 0);
    assert_int_equal(phx_ck_commit_check(&c, dead), 0);
    phx_ck_commit_abort(&c);
    assert_int_equal(phx_ck_commit_ready(&c, 7, 6, dead), 0);
    phx_ck_commit_free(&c);
}

static void test_round_same_set_and_max_epoch(void **st)
{
    (void)st;
    phx_ck_round_t r;
    uint8_t dead[N] = { 0 }, older[N] = { 0 };
    uint64_t e = 0;
    assert_int_equal(phx_ck_round_init(&r, N), 0);
    dead[3] = 1;
    for (int x = 0; x < N; x++)
        if (x != 3 && x != 5)
            phx_ck_round_report(&r, x, dead, x == 1 ? 7 : 6);   /* 1 saw COMMIT(7) */
    phx_ck_round_report(&r, 5, older, 6);                     /* 5: no notice yet */
    assert_int_equal(phx_ck_round_decide(&r, dead, &e), 0);
    phx_ck_round_report(&r, 5, dead, 6);
    assert_int_equal(phx_ck_round_decide(&r, dead, &e), 1);
    assert_int_equal(e, 7);
    /* A new failure makes everyone report again. */
    dead[6] = 1;
    assert_int_equal(phx_ck_round_decide(&r, dead, &e), 0);
    phx_ck_round_free(&r);
}

static void test_filter_markers(void **st)
{
    (void)st;
    phx_ck_filter_t f;
    uint8_t dead[N] = { 0 };
    assert_int_equal(phx_ck_filter_init(&f, N), 0);
    assert_int_equal(phx_ck_filter_drop(&f, 2), 0);   /* no rollback yet */
    f.round = 1;                                     /* restored round 1 */
    assert_int_equal(phx_ck_filter_drop(&f, 2), 1);  /* lost-future frame */
    f.rb_mark[2] = 1;                                /* 2's marker arrived */
    assert_int_equal(phx_ck_filter_drop(&f, 2), 0);
    f.round = 2;                                     /* a second round */
    assert_int_equal(phx_ck_filter_drop(&f, 2), 1);
    assert_int_equal(f.dropped, 2);
    uint64_t id = (1ull << 32) | 4;
    for (int p = 0; p < N; p++)
        if (p != 0 && p != 3)
            f.ck_mark[p] = id;
    assert_int_equal(phx_ck_filter_marked(&f, 0, id, dead), 0);
    dead[3] = 1;
    assert_int_equal(phx_ck_filter_marked(&f, 0, id, dead), 1);
    /* A marker of an aborted attempt (older round) does not count. */
    assert_int_equal(phx_ck_filter_marked(&f, 0, (2ull << 32) | 4, dead), 0);
    phx_ck_filter_free(&f);
}

static void test_store_keeps_committed(void **st)
{
    (void)st;
    phx_ck_store_t s;
    assert_int_equal(phx_ck_store_init(&s, N, N), 0);
    assert_int_equal(phx_ck_store_put_own(&s, 1, dupb("e1"), 3), 0);
    phx_ck_store_commit(&s, 1);
    assert_int_equal(phx_ck_store_put_own(&s, 2, dupb("e2"), 3), 0);
    assert_int_equal(phx_ck_store_put_held(&s, 2, 5, dupb("h5"), 3), 0);
    /* e2 not committed: e1 still there (a crash now rolls back to it). */
    assert_non_null(phx_ck_store_get(&s, 1));
    assert_string_equal(phx_ck_store_get(&s, 2)->held[5], "h5");
    /* e3 would reuse e1's slot while e1 is the recovery line: refused. */
    assert_null(phx_ck_store_open(&s, 3));
    phx_ck_store_commit(&s, 2);
    assert_int_equal(phx_ck_store_put_own(&s, 3, dupb("e3"), 3), 0);
    assert_null(phx_ck_store_get(&s, 1));
    assert_string_equal(phx_ck_store_get(&s, 2)->own, "e2");
    /* A retried epoch (after an abort) reuses its slot. */
    assert_int_equal(phx_ck_store_put_own(&s, 3, dupb("e3b"), 4), 0);
    assert_string_equal(phx_ck_store_get(&s, 3)->own, "e3b");
    assert_null(phx_ck_store_get(&s, 0));
    phx_ck_store_free(&s);
}

/* Reusing slot 1 for epoch 3 hands its buffers back for the next blobs. */
static void test_store_reuses_buffers(void **st)
{
    (void)st;
    phx_ck_store_t s;
    size_t cap;
    assert_int_equal(phx_ck_store_init(&s, N, N), 0);
    void *big = phx_ck_store_buf(&s, 4096, &cap);
    assert_int_equal(cap, 4096);
    assert_int_equal(phx_ck_store_put_own(&s, 1, big, 4096), 0);
    assert_int_equal(phx_ck_store_put_held(&s, 1, 2, phx_ck_store_buf(&s, 100, &cap), 100), 0);
    phx_ck_store_commit(&s, 1);
    assert_int_equal(phx_ck_store_put_own(&s, 2, dupb("e2"), 3), 0);
    phx_ck_store_commit(&s, 2);
    assert_non_null(phx_ck_store_open(&s, 3));      /* epoch 1's buffers go to the pool */
    assert_ptr_equal(phx_ck_store_buf(&s, 4000, &cap), big);
    assert_true(cap >= 4096);                         /* its allocated size */
    free(big);
    void *small = phx_ck_store_buf(&s, 50, &cap);   /* best fit: the 100-byte one */
    assert_true(cap >= 100 && cap < 4096);
    free(small);
    phx_ck_store_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buddy_skips_dead),
        cmocka_unit_test(test_relocate_spreads),
        cmocka_unit_test(test_relocate_helpers),
        cmocka_unit_test(test_dead_since),
        cmocka_unit_test(test_home_table),
        cmocka_unit_test(test_commit_needs_every_live_node),
        cmocka_unit_test(test_round_same_set_and_max_epoch),
        cmocka_unit_test(test_filter_markers),
        cmocka_unit_test(test_store_keeps_committed),
        cmocka_unit_test(test_store_reuses_buffers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
