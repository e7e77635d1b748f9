/* Quiescence at the cut (ft/ckpt/quiet.c) without sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ft/ckpt/quiet.h"

#define N 4

static void test_terminates_only_when_every_live_rank_is_empty(void **st)
{
    (void)st;
    phx_ck_quiet_t q;
    uint8_t dead[N] = { 0 };
    assert_int_equal(phx_ck_quiet_init(&q, N, 10, 80), 0);
    phx_ck_quiet_begin(&q, 7);
    for (int r = 0; r < N; r++)
        phx_ck_quiet_count(&q, r, 7, r == 2);   /* rank 2 holds one message */
    assert_int_equal(phx_ck_quiet_decide(&q, 7, dead, 0, 0), 0);
    phx_ck_quiet_begin(&q, 8);
    for (int r = 0; r < N; r++)
        phx_ck_quiet_count(&q, r, 8, 0);
    phx_ck_quiet_count(&q, 2, 7, 5);           /* stale: ignored */
    assert_int_equal(phx_ck_quiet_decide(&q, 8, dead, 0, 0), 1);
    /* A rank that did not report is not quiet, unless it is dead. */
    phx_ck_quiet_begin(&q, 9);
    for (int r = 0; r < N - 1; r++)
        phx_ck_quiet_count(&q, r, 9, 0);
    assert_int_equal(phx_ck_quiet_decide(&q, 9, dead, 0, 0), 0);
    dead[N - 1] = 1;
    assert_int_equal(phx_ck_quiet_decide(&q, 9, dead, 0, 0), 1);
    /* Counts of another checkpoint never decide this one. */
    assert_int_equal(phx_ck_quiet_decide(&q, 10, dead, 0, 0), 0);
    phx_ck_quiet_free(&q);
}

static void test_probe_when_all_idle_with_backoff(void **st)
{
    (void)st;
    phx_ck_quiet_t q;
    uint8_t dead[N] = { 0 };
    assert_int_equal(phx_ck_quiet_init(&q, N, 10, 30), 0);
    for (int r = 0; r < N - 1; r++)
        phx_ck_quiet_idle(&q, r, 1);
    assert_int_equal(phx_ck_quiet_want(&q, dead, 0), 0);
    phx_ck_quiet_idle(&q, N - 1, 1);
    assert_int_equal(phx_ck_quiet_want(&q, dead, 0), 1);
    /* A probe that found work: the next one waits the gap, which doubles
     * up to max_gap. */
    phx_ck_quiet_begin(&q, 1);
    phx_ck_quiet_count(&q, 0, 1, 3);
    assert_int_equal(phx_ck_quiet_decide(&q, 1, dead, 1, 100), 0);
    assert_int_equal(phx_ck_quiet_want(&q, dead, 109), 0);
    assert_int_equal(phx_ck_quiet_want(&q, dead, 110), 1);
    phx_ck_quiet_begin(&q, 2);
    assert_int_equal(phx_ck_quiet_decide(&q, 2, dead, 1, 200), 0);
    assert_int_equal(phx_ck_quiet_want(&q, dead, 219), 0);
    assert_int_equal(phx_ck_quiet_want(&q, dead, 220), 1);
    phx_ck_quiet_begin(&q, 3);
    assert_int_equal(phx_ck_quiet_decide(&q, 3, dead, 1, 300), 0);
    phx_ck_quiet_begin(&q, 4);
    assert_int_equal(phx_ck_quiet_decide(&q, 4, dead, 1, 400), 0);
    assert_int_equal(phx_ck_quiet_want(&q, dead, 429), 0);   /* capped at 30 */
    assert_int_equal(phx_ck_quiet_want(&q, dead, 430), 1);
    /* A busy rank blocks probes; a dead one does not. */
    phx_ck_quiet_idle(&q, 1, 0);
    assert_int_equal(phx_ck_quiet_want(&q, dead, 1000), 0);
    dead[1] = 1;
    assert_int_equal(phx_ck_quiet_want(&q, dead, 1000), 1);
    /* After a failure the reports start over. */
    phx_ck_quiet_reset(&q);
    assert_int_equal(phx_ck_quiet_want(&q, dead, 1000), 0);
    phx_ck_quiet_free(&q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_terminates_only_when_every_live_rank_is_empty),
        cmocka_unit_test(test_probe_when_all_idle_with_backoff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
