/* Membership changes of recovery=cr (ft/ckpt/member.c) without sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/phx_err.h"
#include "ft/ckpt/member.h"

#define N 8   /* ranks 6 and 7 are spares */
#define S 4   /* slices per home rank */
#define SPARE0 6

static void table(int *loc_e, int *buddy_e)
{
    for (int i = 0; i < N * S; i++)
        loc_e[i] = i / S;
    for (int r = 0; r < N; r++)
        buddy_e[r] = (r + 1) % N;
}

static void test_spare_takes_the_place(void **st)
{
    (void)st;
    int loc_e[N * S], buddy_e[N], loc[N * S], lost = -1, lb = -1, k = -1;
    uint8_t dead[N] = { 0 };
    table(loc_e, buddy_e);
    dead[3] = 1;
    assert_int_equal(phx_ck_relocate_spare(N, N * S, loc_e, buddy_e, dead, SPARE0, S, loc, &lost, &lb, &k), 0);
    assert_int_equal(k, 1);
    for (int i = 0; i < N * S; i++)
        assert_int_equal(loc[i], i / S == 3 ? 6 : i / S);   /* whole, to the first spare */
    /* Next loss: the busy spare is a member now; the other one stands in. */
    memcpy(loc_e, loc, sizeof loc);
    dead[1] = 1;
    assert_int_equal(phx_ck_relocate_spare(N, N * S, loc_e, buddy_e, dead, SPARE0, S, loc, &lost, &lb, &k), 0);
    assert_int_equal(k, 1);
    for (int j = 0; j < S; j++) {
        assert_int_equal(loc[1 * S + j], 7);
        assert_int_equal(loc[3 * S + j], 6);
    }
    /* The stand-in itself dies: no spare left, its slices spread over the
     * live ranks from its buddy on, never onto a dead rank. */
    memcpy(loc_e, loc, sizeof loc);
    dead[6] = 1;
    assert_int_equal(phx_ck_relocate_spare(N, N * S, loc_e, buddy_e, dead, SPARE0, S, loc, &lost, &lb, &k), 0);
    assert_int_equal(k, 0);
    for (int i = 0; i < N * S; i++)
        assert_false(dead[loc[i]]);
    assert_int_equal(loc[3 * S], 7);   /* buddy of 6 first */
    assert_int_not_equal(loc[3 * S], loc[3 * S + 1]);
}

static void test_spare_two_at_once_and_dead_spares(void **st)
{
    (void)st;
    int loc_e[N * S], buddy_e[N], loc[N * S], lost = -1, lb = -1, k = -1;
    uint8_t dead[N] = { 0 };
    table(loc_e, buddy_e);
    dead[0] = dead[4] = 1;
    assert_int_equal(phx_ck_relocate_spare(N, N * S, loc_e, buddy_e, dead, SPARE0, S, loc, &lost, &lb, &k), 0);
    assert_int_equal(k, 2);
    assert_int_equal(loc[0], 6);   /* rank order: 0 gets the first spare */
    assert_int_equal(loc[4 * S], 7);
    /* A dead spare is never chosen, and its own (empty) slices move too. */
    memset(dead, 0, N);
    table(loc_e, buddy_e);
    dead[6] = dead[2] = 1;
    assert_int_equal(phx_ck_relocate_spare(N, N * S, loc_e, buddy_e, dead, SPARE0, S, loc, &lost, &lb, &k), 0);
    for (int j = 0; j < S; j++)
        assert_int_equal(loc[2 * S + j], 7);
    for (int i = 0; i < N * S; i++)
        assert_false(dead[loc[i]]);
    /* Both copies of a rank lost: named, as without spares. */
    dead[3] = 1;
    assert_int_equal(phx_ck_relocate_spare(N, N * S, loc_e, buddy_e, dead, SPARE0, S, loc, &lost, &lb, &k),
                     PHX_EUNRECOVERABLE);
    assert_int_equal(lost, 2);
    assert_int_equal(lb, 3);
}

static void test_join_needs_every_live_rank(void **st)
{
    (void)st;
    phx_ck_join_t j;
    uint8_t dead[N] = { 0 };
    uint32_t inc = 0;
    assert_int_equal(phx_ck_join_init(&j, N), 0);
    dead[3] = dead[5] = 1;
    assert_false(phx_ck_join_ready(&j, 3, dead, &inc));   /* nobody came back */
    for (int r = 0; r < N; r++)
        if (!dead[r] && r != 6)
            assert_int_equal(phx_ck_join_seen(&j, r, 3, 1), 1);
    assert_false(phx_ck_join_ready(&j, 3, dead, &inc));   /* 6 has not seen it */
    /* A newer incarnation (the first newcomer died too) starts over. */
    assert_int_equal(phx_ck_join_seen(&j, 6, 3, 2), 1);
    assert_false(phx_ck_join_ready(&j, 3, dead, &inc));
    assert_int_equal(phx_ck_join_seen(&j, 0, 3, 1), 0);   /* stale */
    for (int r = 0; r < N; r++)
        if (!dead[r])
            phx_ck_join_seen(&j, r, 3, 2);
    assert_true(phx_ck_join_ready(&j, 3, dead, &inc));
    assert_int_equal(inc, 2);
    /* Live ranks only: a rank that died meanwhile does not block it. */
    phx_ck_join_clear(&j, 3);
    assert_false(phx_ck_join_ready(&j, 3, dead, &inc));
    for (int r = 0; r < N; r++)
        if (!dead[r] && r != 7)
            phx_ck_join_seen(&j, r, 3, 4);
    dead[7] = 1;
    assert_true(phx_ck_join_ready(&j, 3, dead, &inc));
    assert_int_equal(inc, 4);
    assert_int_equal(phx_ck_join_seen(&j, N, 3, 5), 0);
    phx_ck_join_free(&j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spare_takes_the_place),
        cmocka_unit_test(test_spare_two_at_once_and_dead_spares),
        cmocka_unit_test(test_join_needs_every_live_rank),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
