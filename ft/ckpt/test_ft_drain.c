/* The drain machine (ft/ckpt/drain.c) without sockets: n machines with a
 * glue like core/cr_drain.c's on FIFO links, a checkpoint reduced to its
 * start (plan) and its commit or abort. Fixed scenarios (a member, the
 * coordinator, the whole job, a failure racing the drain, the coordinator
 * dying with a request pending) and seeded random schedules that mix
 * requests, deliveries, checkpoints and failures; each schedule is checked
 * for: only ranks that asked leave, never the last live rank (every live
 * rank asking ends the job instead), a rank that died never leaves, and
 * every rank that asked and lived has left once the schedule is drained. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/phx_err.h"
#include "ft/ckpt/drain.h"

#define MAXN 8
#define MAXQ 256

typedef struct msg {
    int src, dst, kind;    /* PHX_CK_DR_M_* */
    uint64_t id;
    uint8_t leavers[MAXN];
} msg_t;

typedef struct world {
    int n;
    phx_ck_dr_t *m[MAXN];
    uint8_t dead[MAXN];    /* died or left: one view (notices are instant here) */
    uint8_t failed[MAXN], left[MAXN], asked[MAXN];
    int coord_busy;        /* the coordinator's checkpoint in progress */
    uint64_t ck_id;
    uint32_t epoch, round;
    int cancelled;
    msg_t q[MAXQ];
    int qh, qt;
} world_t;

static int coord(const world_t *w)
{
    for (int r = 0; r < w->n; r++)
        if (!w->dead[r])
            return r;
    return -1;
}

static phx_ck_dr_view_t view(const world_t *w)
{
    return (phx_ck_dr_view_t){ .dead = w->dead, .coord = coord(w), .idle = !w->coord_busy, .round = w->round };
}

static void push(world_t *w, msg_t m)
{
    assert_true(w->qt - w->qh < MAXQ);
    w->q[w->qt++ % MAXQ] = m;
}

static void run(world_t *w, int self, const phx_ck_dr_out_t *o);

static void start_ckpt(world_t *w)
{
    int k = coord(w);
    if (k < 0 || w->coord_busy || w->cancelled)
        return;
    w->coord_busy = 1;
    w->ck_id = (uint64_t)w->round << 32 | ++w->epoch;
    uint8_t lv[MAXN];
    phx_ck_dr_view_t v = view(w);
    phx_ck_dr_out_t o = { 0 };
    int got = phx_ck_dr_plan(w->m[k], &v, w->ck_id, lv, &o);
    if (got < 0) {
        w->coord_busy = 0;
        for (int r = 0; r < w->n; r++)   /* every live rank asked */
            assert_true(w->dead[r] || w->asked[r]);
    }
    for (int r = 0; got > 0 && r < w->n; r++)
        assert_true(!lv[r] || (w->asked[r] && !w->dead[r]));
    /* LEAVE goes before BEGIN on every link: here, to every live rank. */
    for (int i = 0; i < o.n; i++) {
        if (o.a[i].kind == PHX_CK_DR_CANCEL) {
            w->cancelled = 1;
        } else if (o.a[i].kind == PHX_CK_DR_LEAVE) {
            assert_int_equal(o.a[i].id, w->ck_id);
            for (int r = 0; r < w->n; r++)
                if (!w->dead[r]) {
                    msg_t m = { .src = k, .dst = r, .kind = PHX_CK_DR_M_LEAVE, .id = w->ck_id };
                    memcpy(m.leavers, lv, MAXN);
                    push(w, m);
                }
        }
    }
}

static void after_view(world_t *w)
{
    phx_ck_dr_view_t v = view(w);
    for (int r = 0; r < w->n; r++) {
        if (w->dead[r])
            continue;
        phx_ck_dr_out_t o = { 0 };
        phx_ck_dr_on_view(w->m[r], &v, &o);
        run(w, r, &o);
    }
}

static void run(world_t *w, int self, const phx_ck_dr_out_t *o)
{
    for (int i = 0; i < o->n; i++) {
        const phx_ck_dr_act_t *a = &o->a[i];
        switch (a->kind) {
        case PHX_CK_DR_REQ:
            push(w, (msg_t){ .src = self, .dst = a->dst, .kind = PHX_CK_DR_M_REQ });
            break;
        case PHX_CK_DR_START:
            assert_int_equal(self, coord(w));
            start_ckpt(w);
            break;
        case PHX_CK_DR_APPLY:
            /* The glue reads the leavers when it carries APPLY out, after
             * the machine returned. The commit loop marks them dead once
             * every node committed. */
            assert_non_null(phx_ck_dr_leavers(w->m[self], a->id));
            break;
        case PHX_CK_DR_EXIT:
            assert_true(w->asked[self]);
            assert_false(w->failed[self]);
            assert_true(phx_ck_dr_left(w->m[self]));
            w->left[self] = 1;
            break;
        default:
            fail_msg("unexpected action %d", a->kind);
        }
    }
}

/* Delivers the oldest frame (a frame to a dead rank is lost). */
static int deliver(world_t *w)
{
    if (w->qh == w->qt)
        return 0;
    msg_t m = w->q[w->qh++ % MAXQ];
    if (w->dead[m.dst] || w->dead[m.src])
        return 1;
    phx_ck_dr_view_t v = view(w);
    phx_ck_dr_out_t o = { 0 };
    if (m.kind == PHX_CK_DR_M_REQ)
        phx_ck_dr_on_req(w->m[m.dst], &v, m.src, &o);
    else
        phx_ck_dr_on_leave(w->m[m.dst], &v, m.id, m.leavers);
    run(w, m.dst, &o);
    return 1;
}

/* The checkpoint in progress commits at every live node (its LEAVE frames
 * arrived first: FIFO links, LEAVE before BEGIN). */
static void commit(world_t *w)
{
    if (!w->coord_busy)
        return;
    while (deliver(w))
        ;
    uint8_t out[MAXN] = { 0 };
    int any = 0;
    const uint8_t *lv = phx_ck_dr_leavers(w->m[coord(w)], w->ck_id);
    if (lv)
        memcpy(out, lv, (size_t)w->n);
    for (int r = 0; r < w->n; r++) {
        if (w->dead[r])
            continue;
        const uint8_t *mine = phx_ck_dr_leavers(w->m[r], w->ck_id);
        assert_true(!lv == !mine);   /* every member holds the coordinator's plan */
        if (mine)
            assert_memory_equal(mine, out, (size_t)w->n);
        phx_ck_dr_out_t o = { 0 };
        phx_ck_dr_on_commit(w->m[r], w->ck_id, &o);
        run(w, r, &o);
    }
    w->coord_busy = 0;
    for (int r = 0; r < w->n; r++)
        if (out[r]) {
            assert_true(w->left[r]);
            w->dead[r] = 1;
            any = 1;
        }
    int live = 0;
    for (int r = 0; r < w->n; r++)
        live += !w->dead[r];
    assert_true(live >= 1);   /* never drained into nobody */
    if (any) {
        w->round++;
        after_view(w);
    }
    int k = coord(w);
    phx_ck_dr_view_t v = view(w);
    phx_ck_dr_out_t o = { 0 };
    phx_ck_dr_on_idle(w->m[k], &v, &o);
    run(w, k, &o);
}

static void die(world_t *w, int r)
{
    if (w->dead[r])
        return;
    w->dead[r] = w->failed[r] = 1;
    w->round++;
    w->coord_busy = 0;   /* the checkpoint aborts; the recovery round ends idle */
    for (int x = 0; x < w->n; x++)
        if (!w->dead[x])
            phx_ck_dr_on_failure(w->m[x], r);
    after_view(w);
    /* The recovery round's end starts a checkpoint (core: end_round). */
    int k = coord(w);
    if (k >= 0) {
        phx_ck_dr_view_t v = view(w);
        phx_ck_dr_out_t o = { 0 };
        phx_ck_dr_on_idle(w->m[k], &v, &o);
        run(w, k, &o);
    }
}

static int ask(world_t *w, int r)
{
    phx_ck_dr_view_t v = view(w);
    phx_ck_dr_out_t o = { 0 };
    int rc = phx_ck_dr_request(w->m[r], &v, &o);
    if (rc == 0)
        w->asked[r] = 1;
    run(w, r, &o);
    return rc;
}

static void world_init(world_t *w, int n)
{
    memset(w, 0, sizeof *w);
    w->n = n;
    for (int r = 0; r < n; r++)
        assert_int_equal(phx_ck_dr_create(n, r, &w->m[r]), 0);
}

static void world_free(world_t *w)
{
    for (int r = 0; r < w->n; r++)
        phx_ck_dr_destroy(w->m[r]);
}

/* Runs the schedule out: deliveries, then commits, until nothing moves. */
static void settle(world_t *w)
{
    for (int i = 0; i < 64; i++) {
        while (deliver(w))
            ;
        if (!w->coord_busy)
            break;
        commit(w);
    }
    assert_int_equal(w->qh, w->qt);
    assert_false(w->coord_busy);
}

/* Every rank that asked and did not die has left, unless the job was
 * cancelled; nobody else left. */
static void check_end(const world_t *w)
{
    for (int r = 0; r < w->n; r++)
        if (!w->cancelled && w->asked[r] && !w->failed[r] && !w->left[r])
            print_message("n=%d rank %d asked, not left; dead=%d busy=%d\n", w->n, r, w->dead[r], w->coord_busy);
    for (int r = 0; r < w->n; r++) {
        assert_true(!w->left[r] || (w->asked[r] && !w->failed[r]));
        if (!w->cancelled && w->asked[r] && !w->failed[r])
            assert_true(w->left[r]);
    }
}

/* ---- scenarios ---------------------------------------------------------------- */

static void test_member_drains_at_next_checkpoint(void **st)
{
    (void)st;
    world_t w;
    world_init(&w, 4);
    assert_int_equal(ask(&w, 3), 0);
    assert_int_equal(ask(&w, 3), 1);   /* a second signal asks nothing new */
    deliver(&w);                       /* REQ at rank 0, idle: START at once */
    assert_true(w.coord_busy);
    while (deliver(&w))
        ;                              /* LEAVE everywhere */
    assert_non_null(phx_ck_dr_leavers(w.m[0], w.ck_id));
    settle(&w);
    assert_true(w.left[3]);
    assert_true(w.dead[3]);
    for (int r = 0; r < 3; r++)
        assert_false(w.left[r]);
    check_end(&w);
    world_free(&w);
}

static void test_request_during_checkpoint_waits_for_its_commit(void **st)
{
    (void)st;
    world_t w;
    world_init(&w, 4);
    start_ckpt(&w);   /* a periodic checkpoint, no plan */
    uint64_t first = w.ck_id;
    assert_null(phx_ck_dr_leavers(w.m[0], first));
    assert_int_equal(ask(&w, 2), 0);
    deliver(&w);
    assert_int_equal(w.ck_id, first);   /* not started twice */
    commit(&w);                          /* idle again: START with the plan */
    assert_true(w.ck_id > first);
    while (deliver(&w))
        ;
    assert_non_null(phx_ck_dr_leavers(w.m[0], w.ck_id));
    settle(&w);
    assert_true(w.left[2]);
    check_end(&w);
    world_free(&w);
}

static void test_coordinator_drains_and_role_passes(void **st)
{
    (void)st;
    world_t w;
    world_init(&w, 5);
    assert_int_equal(ask(&w, 0), 0);
    assert_int_equal(ask(&w, 3), 0);
    settle(&w);
    assert_true(w.left[0]);
    assert_true(w.left[3]);
    assert_int_equal(coord(&w), 1);
    /* The new coordinator plans the next drain. */
    assert_int_equal(ask(&w, 1), 0);
    settle(&w);
    assert_true(w.left[1]);
    assert_int_equal(coord(&w), 2);
    check_end(&w);
    world_free(&w);
}

static void test_whole_job_asked_is_cancelled_not_drained(void **st)
{
    (void)st;
    world_t w;
    world_init(&w, 3);
    /* The coordinator's own request first (every node got the signal): it
     * asked, so once every other live rank asked too, the job ends. */
    for (int r = 0; r < 3; r++)
        ask(&w, r);
    settle(&w);
    assert_true(w.cancelled);
    int stayed = 0;
    for (int r = 0; r < 3; r++)
        stayed += !w.left[r];
    assert_true(stayed >= 1);
    world_free(&w);
    /* The last live rank is refused at once. */
    world_init(&w, 2);
    ask(&w, 1);
    settle(&w);
    assert_true(w.left[1]);
    assert_int_equal(ask(&w, 0), PHX_ENOSPC);
    world_free(&w);
}

static void test_failure_racing_the_drain(void **st)
{
    (void)st;
    world_t w;
    world_init(&w, 5);
    ask(&w, 3);
    deliver(&w);
    while (deliver(&w))
        ;   /* LEAVE everywhere */
    uint64_t id = w.ck_id;
    die(&w, 1);   /* aborts the checkpoint carrying the plan */
    for (int r = 0; r < 5; r++)
        if (!w.dead[r])
            assert_null(phx_ck_dr_leavers(w.m[r], id));
    /* The recovery round's end planned it again. */
    assert_true(w.coord_busy && w.ck_id != id);
    settle(&w);
    assert_true(w.left[3]);
    check_end(&w);
    world_free(&w);
}

static void test_leaver_dies_before_its_drain(void **st)
{
    (void)st;
    world_t w;
    world_init(&w, 4);
    ask(&w, 2);
    deliver(&w);
    die(&w, 2);   /* the grace ran out: an ordinary failure */
    settle(&w);
    assert_false(w.left[2]);
    check_end(&w);
    world_free(&w);
}

static void test_coordinator_dies_with_request_pending(void **st)
{
    (void)st;
    world_t w;
    world_init(&w, 4);
    start_ckpt(&w);
    ask(&w, 3);
    deliver(&w);   /* pending at rank 0, which is busy */
    die(&w, 0);    /* rank 3 asks rank 1 again */
    settle(&w);
    assert_true(w.left[3]);
    check_end(&w);
    world_free(&w);
}

/* Rank 0 drains; rank 1, the next coordinator, commits first and plans its
 * own drain at once: at rank 2 that LEAVE (another link) overtakes rank
 * 0's COMMIT. Both plans apply, in order. */
static void test_next_plan_overtakes_the_commit(void **st)
{
    (void)st;
    phx_ck_dr_t *m;
    assert_int_equal(phx_ck_dr_create(4, 2, &m), 0);
    uint8_t dead[4] = { 0 }, a[4] = { 1, 0, 0, 0 }, b[4] = { 0, 1, 0, 0 };
    phx_ck_dr_view_t v = { .dead = dead, .coord = 0, .round = 0 };
    uint64_t id0 = (uint64_t)0 << 32 | 10, id1 = (uint64_t)1 << 32 | 11;
    phx_ck_dr_on_leave(m, &v, id0, a);
    phx_ck_dr_on_leave(m, &v, id1, b);   /* early */
    assert_memory_equal(phx_ck_dr_leavers(m, id0), a, 4);
    assert_memory_equal(phx_ck_dr_leavers(m, id1), b, 4);
    phx_ck_dr_out_t o = { 0 };
    phx_ck_dr_on_commit(m, id0, &o);
    assert_int_equal(o.n, 1);
    assert_int_equal(o.a[0].kind, PHX_CK_DR_APPLY);
    assert_memory_equal(phx_ck_dr_leavers(m, id0), a, 4);   /* read by the glue now */
    dead[0] = 1;
    v = (phx_ck_dr_view_t){ .dead = dead, .coord = 1, .round = 1 };
    o.n = 0;
    phx_ck_dr_on_commit(m, id1, &o);
    assert_int_equal(o.n, 1);
    assert_memory_equal(phx_ck_dr_leavers(m, id1), b, 4);
    /* A failure drops an early plan too. */
    phx_ck_dr_on_leave(m, &v, (uint64_t)2 << 32 | 12, a);
    phx_ck_dr_on_failure(m, 3);
    assert_null(phx_ck_dr_leavers(m, (uint64_t)2 << 32 | 12));
    phx_ck_dr_destroy(m);
}

static void test_lost_request_is_retried(void **st)
{
    (void)st;
    world_t w;
    world_init(&w, 4);
    ask(&w, 1);
    w.qh = w.qt;   /* the REQ is lost (sent before the link was up) */
    settle(&w);
    assert_false(w.left[1]);
    phx_ck_dr_view_t v = view(&w);
    phx_ck_dr_out_t o = { 0 };
    phx_ck_dr_retry(w.m[1], &v, &o);
    run(&w, 1, &o);
    o.n = 0;
    phx_ck_dr_retry(w.m[2], &v, &o);   /* a rank that never asked sends nothing */
    assert_int_equal(o.n, 0);
    settle(&w);
    assert_true(w.left[1]);
    o.n = 0;
    phx_ck_dr_retry(w.m[1], &v, &o);   /* gone: nothing more */
    assert_int_equal(o.n, 0);
    check_end(&w);
    world_free(&w);
}

/* Seeded schedules: random requests, deliveries, checkpoints, commits and
 * up to two failures; n = 2..6. */
static void test_random_schedules(void **st)
{
    (void)st;
    uint64_t s = 0x9e3779b97f4a7c15ull;
    int cancelled = 0, drained = 0;
    for (int it = 0; it < 20000; it++) {
        world_t w;
        int n = 2 + it % 5, fails = 0;
        world_init(&w, n);
        for (int step = 0; step < 40; step++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            int what = (int)(s % 10), r = (int)((s >> 8) % (uint64_t)n);
            if (w.cancelled)
                break;
            if (what < 3 && !w.dead[r])
                ask(&w, r);
            else if (what < 6)
                deliver(&w);
            else if (what == 6)
                start_ckpt(&w);
            else if (what < 9)
                commit(&w);
            else if (fails < 2 && !w.dead[r] && coord(&w) >= 0) {
                int live = 0;
                for (int x = 0; x < n; x++)
                    live += !w.dead[x];
                if (live > 1) {
                    die(&w, r);
                    fails++;
                }
            }
        }
        settle(&w);
        check_end(&w);
        cancelled += w.cancelled;
        for (int r = 0; r < n; r++)
            drained += w.left[r];
        world_free(&w);
    }
    assert_true(cancelled > 0 && drained > 0);   /* both outcomes were explored */
}

/* ---- codec ------------------------------------------------------------------------ */

static void test_messages_round_trip(void **st)
{
    (void)st;
    uint8_t b[PHX_CK_DR_REQ_LEN];
    phx_ck_dr_req_enc(b, &(phx_ck_dr_req_t){ .rank = 3, .why = PHX_CK_DR_WHY_CMD });
    phx_ck_dr_req_t q;
    assert_int_equal(phx_ck_dr_req_dec(b, sizeof b, &q), 0);
    assert_int_equal(q.rank, 3);
    assert_int_equal(q.why, PHX_CK_DR_WHY_CMD);
    assert_int_equal(phx_ck_dr_kind(b, sizeof b), PHX_CK_DR_M_REQ);
    assert_int_equal(phx_ck_dr_req_dec(b, sizeof b - 1, &q), PHX_EPROTO);
    uint8_t lv[6] = { 1, 0, 0, 1, 0, 1 }, buf[64];
    long len = phx_ck_dr_leave_enc(lv, 6, buf, sizeof buf);
    assert_int_equal(len, (long)phx_ck_dr_leave_len(3));
    assert_int_equal(phx_ck_dr_leave_enc(lv, 6, buf, 8), -1);
    phx_ck_dr_leave_t m;
    assert_int_equal(phx_ck_dr_leave_dec(buf, (size_t)len, 6, &m), 0);
    assert_int_equal(m.ranks.n, 3);
    assert_int_equal(phx_wire_a32_i32(m.ranks, 2), 5);
    assert_int_equal(phx_ck_dr_leave_dec(buf, (size_t)len, 5, &m), PHX_EPROTO);   /* rank 5 of 5 */
    assert_int_equal(phx_ck_dr_leave_dec(buf, (size_t)len - 1, 6, &m), PHX_EPROTO);
    assert_int_equal(phx_ck_dr_kind(buf, (size_t)len), PHX_CK_DR_M_LEAVE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_member_drains_at_next_checkpoint),
        cmocka_unit_test(test_request_during_checkpoint_waits_for_its_commit),
        cmocka_unit_test(test_coordinator_drains_and_role_passes),
        cmocka_unit_test(test_whole_job_asked_is_cancelled_not_drained),
        cmocka_unit_test(test_failure_racing_the_drain),
        cmocka_unit_test(test_leaver_dies_before_its_drain),
        cmocka_unit_test(test_coordinator_dies_with_request_pending),
        cmocka_unit_test(test_next_plan_overtakes_the_commit),
        cmocka_unit_test(test_lost_request_is_retried),
        cmocka_unit_test(test_random_schedules),
        cmocka_unit_test(test_messages_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
