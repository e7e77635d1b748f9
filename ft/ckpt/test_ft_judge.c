/* The coordinator's judgement of a recovery round (ft/ckpt/judge.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/phx_err.h"
#include "ft/ckpt/ckpt_msg.h"
#include "ft/ckpt/judge.h"
#include "ft/ckpt/recover.h"

#define N 4
#define NLOC (2 * N)

static const int loc_e[NLOC] = { 0, 0, 1, 1, 2, 2, 3, 3 };

static int disk_at_3(void *arg, uint64_t *e)
{
    (void)arg;
    *e = 3;
    return 1;
}

/* Partial for one or two losses, unless a round is under way (a
 * pessimistic logging mode's shape). */
static int up_to_two(void *arg, const uint8_t *dead, const uint8_t *since, int replayed)
{
    (void)dead;
    int k = 0;
    for (int r = 0; r < N; r++)
        k += since[r];
    ++*(int *)arg;
    return replayed != PHX_CK_REPLAYED_OTHER && k <= 2;
}

static phx_ck_judge_in_t base(const uint8_t *dead)
{
    return (phx_ck_judge_in_t){ .n = N, .nloc = NLOC, .dead = dead, .epoch = 5, .loc_e = loc_e, .keeps = 1,
                                .lost = -1, .lost_buddy = -1 };
}

static void test_abort_and_disk(void **st)
{
    (void)st;
    uint8_t dead[N] = { 0, 1, 1, 0 };
    phx_ck_judge_t d;
    phx_ck_judge_in_t in = base(dead);
    in.reloc = PHX_EUNRECOVERABLE;
    in.lost = 1;
    in.lost_buddy = 2;
    phx_ck_judge(&in, &d);
    assert_int_equal(d.verdict, PHX_CK_JUDGE_ABORT);
    assert_int_equal(d.epoch, 5);
    assert_int_equal(d.lost, 1);
    assert_int_equal(d.lost_buddy, 2);
    in.disk = disk_at_3;   /* the disk has them: its epoch, never partial */
    in.partial_ok = 1;
    phx_ck_judge(&in, &d);
    assert_int_equal(d.verdict, PHX_CK_JUDGE_DECIDE);
    assert_int_equal(d.epoch, 3);
    assert_int_equal(d.flags, PHX_CK_D_DISK);
    assert_int_equal(d.lost, -1);
    in = base(dead);   /* nothing committed */
    in.epoch = 0;
    phx_ck_judge(&in, &d);
    assert_int_equal(d.verdict, PHX_CK_JUDGE_ABORT);
    assert_int_equal(d.lost, -1);
    in.epoch = 5;   /* no copy of the epoch here */
    in.loc_e = NULL;
    phx_ck_judge(&in, &d);
    assert_int_equal(d.verdict, PHX_CK_JUDGE_ABORT);
    in.disk = disk_at_3;
    phx_ck_judge(&in, &d);
    assert_int_equal(d.flags, PHX_CK_D_DISK);
}

static void test_partial_and_sequential(void **st)
{
    (void)st;
    uint8_t one[N] = { 0, 0, 1, 0 }, two[N] = { 0, 1, 1, 0 };
    phx_ck_judge_t d;
    phx_ck_judge_in_t in = base(one);
    phx_ck_judge(&in, &d);   /* the mode recovers globally */
    assert_int_equal(d.verdict, PHX_CK_JUDGE_DECIDE);
    assert_int_equal(d.flags, 0);
    in.partial_ok = 1;   /* default rule: one loss, nothing replayed */
    phx_ck_judge(&in, &d);
    assert_int_equal(d.flags, PHX_CK_D_PARTIAL);
    in.summary = PHX_CK_REC_J_REPLAYED | PHX_CK_REC_J_ENDED;
    phx_ck_judge(&in, &d);
    assert_int_equal(d.flags, 0);
    in.summary = 0;
    in.keeps = 0;   /* every live rank rolls back too */
    phx_ck_judge(&in, &d);
    assert_int_equal(d.flags, 0);
    in.keeps = 1;
    in.summary = PHX_CK_REC_J_MOVED;   /* a table no longer the epoch's */
    phx_ck_judge(&in, &d);
    assert_int_equal(d.flags, 0);
    int calls = 0;
    in = base(two);
    in.partial_ok = 1;
    in.when = up_to_two;
    in.when_arg = &calls;
    phx_ck_judge(&in, &d);   /* two at once */
    assert_int_equal(d.flags, PHX_CK_D_PARTIAL);
    in.summary = PHX_CK_REC_J_REPLAYED | PHX_CK_REC_J_ENDED;   /* after an ended partial round */
    phx_ck_judge(&in, &d);
    assert_int_equal(d.flags, PHX_CK_D_PARTIAL | PHX_CK_D_SEQ);
    in.summary = PHX_CK_REC_J_REPLAYED;   /* during one: global */
    phx_ck_judge(&in, &d);
    assert_int_equal(d.flags, 0);
    assert_int_equal(calls, 3);
    /* A rank dead before the epoch hosts nothing in its table: not lost since. */
    int moved_e[NLOC] = { 0, 0, 3, 0, 2, 2, 3, 3 };
    in = base(two);
    in.partial_ok = 1;
    in.loc_e = moved_e;
    phx_ck_judge(&in, &d);
    assert_int_equal(d.flags, PHX_CK_D_PARTIAL);
}

static void test_wait_for_newcomers(void **st)
{
    (void)st;
    uint8_t one[N] = { 0, 0, 1, 0 };
    phx_ck_judge_t d;
    phx_ck_judge_in_t in = base(one);
    in.joins_missing = 1;
    phx_ck_judge(&in, &d);
    assert_int_equal(d.verdict, PHX_CK_JUDGE_WAIT);
    in.partial_ok = 1;   /* a partial round takes nobody in: no wait */
    phx_ck_judge(&in, &d);
    assert_int_equal(d.verdict, PHX_CK_JUDGE_DECIDE);
    assert_int_equal(d.flags, PHX_CK_D_PARTIAL);
    in.reloc = PHX_EUNRECOVERABLE;   /* lost work is not waited for */
    phx_ck_judge(&in, &d);
    assert_int_equal(d.verdict, PHX_CK_JUDGE_ABORT);
}

static void test_seq_keep(void **st)
{
    (void)st;
    uint8_t dead[N] = { 0, 0, 1, 1 };
    int cur[NLOC] = { 0, 0, 1, 1, 0, 1, 3, 3 }, loc[NLOC] = { 0, 0, 1, 1, 0, 1, 0, 1 }, keep[NLOC];
    phx_ck_seq_keep(NLOC, cur, dead, loc, keep);
    int want[NLOC] = { -1, -1, -1, -1, -1, -1, 0, 1 };
    assert_memory_equal(keep, want, sizeof want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_abort_and_disk),
        cmocka_unit_test(test_partial_and_sequential),
        cmocka_unit_test(test_wait_for_newcomers),
        cmocka_unit_test(test_seq_keep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
