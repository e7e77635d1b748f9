/* The commit round's machine (ft/ckpt/commit.c) under every schedule.
 *
 * n machines wired by an in-test network of FIFO links, one per ordered
 * pair. A step is one of: a link delivers its first frame; a node's workers
 * finish pausing; a node dies (up to `kills` of them, the coordinator
 * included, at every step); a survivor gets the failure notice of a dead
 * node (after which its link from that node delivers nothing, as the
 * transport's rule). The buddy's side of a copy (store it, ACK) is the
 * glue's (core/cr_bulk.c) and is played here; the snapshot completes at
 * once. Explored depth first, every enabled step at every state; a state
 * already explored is not explored again (its schedules are counted from
 * the first visit), so the count covers every interleaving. Checked at
 * every step and at every end:
 *   - at most one decision (COMMIT sent) per round, none once the
 *     coordinator knows of a failure, and every COMMIT carries it;
 *   - the decision and every commit come after every node still alive sent
 *     READY, and READY after its own copy and its buddy's ACK;
 *   - a node never both commits and aborts the round;
 *   - every schedule ends, with every live node committed, or handed over
 *     to the recovery round by a failure notice (every node committed
 *     when nobody died). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/phx_err.h"
#include "ft/ckpt/ckpt_msg.h"
#include "ft/ckpt/commit.h"

#define MAXN 5
#define QCAP 8
#define EPOCH 7
#define RANDOM_RUNS 20000   /* per n and failure count */

enum { F_BEGIN = 1, F_MARK, F_READY, F_COMMIT, F_COPY, F_ACK };

typedef struct frame {
    uint8_t type;
    uint64_t id;
} frame_t;

typedef struct link {
    uint8_t len;
    frame_t q[QCAP];
} link_t;

typedef struct node {
    phx_ck_cm_t *m;
    uint64_t mark[MAXN];        /* markers received: the filter's record */
    uint8_t dead[MAXN];         /* this node's view */
    int ndead;
    uint8_t gone;               /* died */
    uint8_t pausing, paused, stored, acked, ready, committed, aborted;
} node_t;

typedef struct world {
    int n, kills;
    node_t nd[MAXN];
    link_t ln[MAXN][MAXN];
    int decided;
    uint64_t decided_id;
} world_t;

static const char *bad;         /* first invariant broken, with the schedule in trace */
static char trace[4096];

static void violate(const char *what)
{
    if (!bad)
        bad = what;
}

static int alive(const world_t *w, int r) { return !w->nd[r].gone; }

static void handle(world_t *w, int j, int from, frame_t f);

static void post(world_t *w, int from, int to, uint8_t type, uint64_t id)
{
    if (to == from) {
        handle(w, to, from, (frame_t){ type, id });
        return;
    }
    if (!alive(w, to))
        return;   /* a dead node receives nothing */
    link_t *l = &w->ln[from][to];
    if (l->len == QCAP) {
        violate("link queue overflow (test bound)");
        return;
    }
    l->q[l->len++] = (frame_t){ type, id };
}

static const uint8_t frame_of[] = { [PHX_CK_CM_M_BEGIN] = F_BEGIN, [PHX_CK_CM_M_MARK] = F_MARK,
                                    [PHX_CK_CM_M_READY] = F_READY, [PHX_CK_CM_M_COMMIT] = F_COMMIT };

static void act(world_t *w, int j, const phx_ck_cm_out_t *o)
{
    node_t *x = &w->nd[j];
    for (int i = 0; i < o->n; i++) {
        const phx_ck_cm_act_t *a = &o->a[i];
        switch (a->kind) {
        case PHX_CK_CM_SEND:
            if (a->msg == PHX_CK_CM_M_COMMIT) {   /* the decision */
                if (w->decided && w->decided_id != a->id)
                    violate("two decisions in one round");
                if (x->ndead != (int)phx_ck_id_round(a->id))
                    violate("COMMIT decided after a failure known at the coordinator");
                w->decided = 1;
                w->decided_id = a->id;
                for (int r = 0; r < w->n; r++)
                    if (alive(w, r) && !w->nd[r].ready)
                        violate("COMMIT decided before a live node's READY");
            }
            if (a->msg == PHX_CK_CM_M_READY) {
                if (!x->stored || !x->acked)
                    violate("READY before both copies exist");
                x->ready = 1;
            }
            if (a->dst == PHX_CK_CM_ALL) {
                for (int r = 0; r < w->n; r++)
                    if (r != j && !x->dead[r])
                        post(w, j, r, frame_of[a->msg], a->id);
                if (a->self)
                    post(w, j, j, frame_of[a->msg], a->id);
            } else {
                int k = a->dst;
                if (k == PHX_CK_CM_COORD)
                    for (k = 0; k < w->n && x->dead[k]; k++)
                        ;
                post(w, j, k, frame_of[a->msg], a->id);
            }
            break;
        case PHX_CK_CM_PAUSE:
            x->pausing = 1;
            break;
        case PHX_CK_CM_CUT:
            if (!x->paused)
                violate("cut before the workers paused");
            break;
        case PHX_CK_CM_SNAPSHOT: {
            for (int r = 0; r < w->n; r++)
                if (r != j && !x->dead[r] && x->mark[r] < a->id)
                    violate("snapshot before every live peer's marker");
            x->stored = 1;
            phx_ck_cm_out_t o2 = { 0 };
            phx_ck_cm_on_snapshot_done(x->m, (j + 1) % w->n, &o2);   /* buddies: the ring */
            act(w, j, &o2);
            break;
        }
        case PHX_CK_CM_SHIP:
            post(w, j, a->dst, F_COPY, a->id);
            break;
        case PHX_CK_CM_STORED:
            break;
        case PHX_CK_CM_COMMIT:
            if (!w->decided || a->id != w->decided_id)
                violate("commit of an epoch not decided");
            if (x->aborted)
                violate("commit after abort");
            for (int r = 0; r < w->n; r++)
                if (alive(w, r) && !w->nd[r].ready)
                    violate("commit before a live node's READY");
            x->committed = 1;
            break;
        case PHX_CK_CM_ABORT:
            if (x->committed)
                violate("abort after commit");
            x->aborted = 1;
            break;
        default:
            violate("unknown action");
        }
    }
}

static void progress(world_t *w, int j)
{
    node_t *x = &w->nd[j];
    phx_ck_filter_t f = { .n = w->n, .ck_mark = x->mark };
    phx_ck_cm_out_t o = { 0 };
    phx_ck_cm_on_progress(x->m, x->paused, &f, x->dead, &o);
    act(w, j, &o);
}

/* Frame f from `from` arrives at j (from j itself: at once). */
static void handle(world_t *w, int j, int from, frame_t f)
{
    node_t *x = &w->nd[j];
    phx_ck_cm_out_t o = { 0 };
    switch (f.type) {
    case F_BEGIN:
        phx_ck_cm_on_begin(x->m, f.id, x->ndead, 1, &o);
        break;
    case F_MARK:
        if (f.id > x->mark[from])
            x->mark[from] = f.id;
        progress(w, j);
        break;
    case F_COPY:   /* the buddy keeps it and ACKs (core/cr_bulk.c) */
        post(w, j, from, F_ACK, f.id);
        break;
    case F_ACK:
        if (phx_ck_cm_on_copy_stored(x->m, f.id)) {
            x->acked = 1;
            progress(w, j);
        }
        break;
    case F_READY:
        phx_ck_cm_on_ready(x->m, from, f.id, x->dead, &o);
        break;
    case F_COMMIT:
        phx_ck_cm_on_commit(x->m, f.id, &o);
        break;
    }
    act(w, j, &o);
}

/* ---- steps ------------------------------------------------------------------ */

enum { S_DELIVER, S_PAUSED, S_KILL, S_NOTICE };
typedef struct step {
    uint8_t kind, a, b;         /* DELIVER a->b, PAUSED a, KILL a, NOTICE of a at b */
} step_t;

static int steps(const world_t *w, int max_kills, step_t *s)
{
    int k = 0, dead = 0;
    for (int r = 0; r < w->n; r++)
        dead += !alive(w, r);
    for (int a = 0; a < w->n; a++)
        for (int b = 0; b < w->n; b++)
            if (w->ln[a][b].len && alive(w, b))
                s[k++] = (step_t){ S_DELIVER, (uint8_t)a, (uint8_t)b };
    for (int a = 0; a < w->n; a++) {
        if (!alive(w, a))
            continue;
        if (w->nd[a].pausing && !w->nd[a].paused)
            s[k++] = (step_t){ S_PAUSED, (uint8_t)a, 0 };
        if (dead < max_kills && dead < w->n - 1)
            s[k++] = (step_t){ S_KILL, (uint8_t)a, 0 };
        for (int x = 0; x < w->n; x++)
            if (!alive(w, x) && !w->nd[a].dead[x])
                s[k++] = (step_t){ S_NOTICE, (uint8_t)x, (uint8_t)a };
    }
    return k;
}

static void apply(world_t *w, step_t s)
{
    switch (s.kind) {
    case S_DELIVER: {
        link_t *l = &w->ln[s.a][s.b];
        frame_t f = l->q[0];
        memmove(l->q, l->q + 1, (size_t)--l->len * sizeof *l->q);
        handle(w, s.b, s.a, f);
        break;
    }
    case S_PAUSED:
        w->nd[s.a].paused = 1;
        progress(w, s.a);
        break;
    case S_KILL:
        w->nd[s.a].gone = 1;
        for (int r = 0; r < w->n; r++)
            w->ln[r][s.a].len = 0;   /* frames to a dead node are lost */
        break;
    case S_NOTICE: {
        node_t *x = &w->nd[s.b];
        x->dead[s.a] = 1;
        x->ndead++;
        w->ln[s.a][s.b].len = 0;   /* nothing more from it after its notice */
        phx_ck_cm_out_t o = { 0 };
        phx_ck_cm_on_failure(x->m, s.a, &o);
        act(w, s.b, &o);
        break;
    }
    }
}

static void world_free(world_t *w)
{
    for (int r = 0; r < w->n; r++)
        phx_ck_cm_destroy(w->nd[r].m);
}

static void world_copy(world_t *d, const world_t *s)
{
    *d = *s;
    for (int r = 0; r < s->n; r++)
        assert_int_equal(phx_ck_cm_clone(s->nd[r].m, &d->nd[r].m), 0);
}

/* The coordinator (rank 0) has started epoch EPOCH. */
static void world_init(world_t *w, int n)
{
    memset(w, 0, sizeof *w);
    w->n = n;
    for (int r = 0; r < n; r++)
        assert_int_equal(phx_ck_cm_create(n, r, &w->nd[r].m), 0);
    phx_ck_cm_out_t o = { 0 };
    phx_ck_cm_start(w->nd[0].m, EPOCH, 0, &o);
    act(w, 0, &o);
}

/* At an end: nothing is enabled. */
static void check_end(const world_t *w)
{
    int died = 0;
    for (int r = 0; r < w->n; r++)
        died |= !alive(w, r);
    for (int r = 0; r < w->n; r++) {
        const node_t *x = &w->nd[r];
        if (!alive(w, r))
            continue;
        /* A failure notice hands over to the recovery round, in a round
         * (ABORT) or before its BEGIN came (stale from then on). */
        if (!x->committed && !x->aborted && !x->ndead)
            violate("a live node neither committed nor handed over");
        if (!died && !x->committed)
            violate("no failure, yet a node did not commit");
    }
}

/* ---- explorer: fingerprints of explored states ------------------------------ */

typedef struct memo {
    uint64_t *key;              /* 2 words per slot; 0,0: empty */
    double *count;              /* schedules from that state to an end */
    size_t cap, used;
} memo_t;

static uint64_t fnv(const uint8_t *p, size_t n, uint64_t h)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void fingerprint(const world_t *w, uint64_t fp[2])
{
    uint8_t buf[8192];
    size_t len = 0;
    for (int r = 0; r < w->n; r++) {
        const node_t *x = &w->nd[r];
        len += phx_ck_cm_key(x->m, buf + len, sizeof buf - len);
        memcpy(buf + len, x->mark, sizeof x->mark);
        len += sizeof x->mark;
        memcpy(buf + len, x->dead, sizeof x->dead);
        len += sizeof x->dead;
        uint8_t fl[] = { x->gone, x->pausing, x->paused, x->stored, x->acked, x->ready, x->committed, x->aborted };
        memcpy(buf + len, fl, sizeof fl);
        len += sizeof fl;
    }
    for (int a = 0; a < w->n; a++)
        for (int b = 0; b < w->n; b++) {
            const link_t *l = &w->ln[a][b];
            buf[len++] = l->len;
            for (int i = 0; i < l->len; i++) {
                buf[len++] = l->q[i].type;
                memcpy(buf + len, &l->q[i].id, 8);
                len += 8;
            }
        }
    memcpy(buf + len, &w->decided_id, 8);
    len += 8;
    buf[len++] = (uint8_t)w->decided;
    assert_true(len < sizeof buf);
    fp[0] = fnv(buf, len, 14695981039346656037ull) | 1;
    fp[1] = fnv(buf, len, 0x9e3779b97f4a7c15ull);
}

static double *memo_slot(memo_t *mm, const uint64_t fp[2], int *fresh)
{
    if (2 * (mm->used + 1) > mm->cap) {
        memo_t g = { calloc(2 * (mm->cap ? mm->cap * 2 : 1 << 16), 8), NULL, mm->cap ? mm->cap * 2 : 1 << 16, 0 };
        g.count = calloc(g.cap, sizeof *g.count);
        assert_non_null(g.key);
        assert_non_null(g.count);
        for (size_t i = 0; i < mm->cap; i++)
            if (mm->key[2 * i]) {
                int f;
                *memo_slot(&g, mm->key + 2 * i, &f) = mm->count[i];
            }
        free(mm->key);
        free(mm->count);
        *mm = g;
    }
    size_t i = (size_t)(fp[1] % mm->cap);
    while (mm->key[2 * i] && (mm->key[2 * i] != fp[0] || mm->key[2 * i + 1] != fp[1]))
        i = (i + 1) % mm->cap;
    *fresh = !mm->key[2 * i];
    if (*fresh) {
        mm->key[2 * i] = fp[0];
        mm->key[2 * i + 1] = fp[1];
        mm->count[i] = -1;   /* being explored */
        mm->used++;
    }
    return &mm->count[i];
}

static size_t tpos;

static void trace_step(step_t s)
{
    static const char *k[] = { "deliver", "paused", "kill", "notice" };
    if (tpos < sizeof trace - 32)
        tpos += (size_t)snprintf(trace + tpos, sizeof trace - tpos, " %s(%d,%d)", k[s.kind], s.a, s.b);
}

/* Schedules from w to an end, each state explored once. */
static double explore(memo_t *mm, const world_t *w, int max_kills, int depth)
{
    uint64_t fp[2];
    fingerprint(w, fp);
    int fresh;
    double *c = memo_slot(mm, fp, &fresh);
    if (!fresh) {
        if (*c < 0)
            violate("a schedule loops");
        return *c < 0 ? 0 : *c;
    }
    step_t s[4 * MAXN * MAXN];
    int k = steps(w, max_kills, s);
    if (depth > 1000)
        violate("a schedule does not end");
    if (!k)
        check_end(w);
    double sum = k ? 0 : 1;
    for (int i = 0; i < k && !bad; i++) {
        world_t nw;
        world_copy(&nw, w);
        size_t mark = tpos;
        trace_step(s[i]);
        apply(&nw, s[i]);
        if (!bad)
            sum += explore(mm, &nw, max_kills, depth + 1);
        world_free(&nw);
        if (!bad)
            tpos = mark;
    }
    /* The table may have grown: look the slot up again. */
    *memo_slot(mm, fp, &fresh) = sum;
    return sum;
}

/* Every schedule of n nodes with no failure, then with up to max_kills at
 * every step (any node, the coordinator included). */
static void run_exhaustive(int n, int max_kills)
{
    for (int kills = 0; kills <= max_kills; kills++) {
        memo_t mm = { 0 };
        world_t w;
        bad = NULL;
        tpos = 0;
        trace[0] = 0;
        world_init(&w, n);
        double count = explore(&mm, &w, kills, 0);
        world_free(&w);
        free(mm.key);
        free(mm.count);
        if (bad)
            fail_msg("n=%d kills=%d: %s; schedule:%s", n, kills, bad, trace);
        printf("commit round n=%d, up to %d failure(s): %.3g schedules, %zu states\n", n, kills, count, mm.used);
        assert_true(count > 0);
    }
}

static void test_explore_n3(void **st)
{
    (void)st;
    run_exhaustive(3, 1);
}

/* Up to one failure. Two make 5 million states (a minute): those run as
 * random schedules below, or all of them with PHX_TEST_COMMIT_FULL=1. */
static void test_explore_n4(void **st)
{
    (void)st;
    run_exhaustive(4, getenv("PHX_TEST_COMMIT_FULL") ? 2 : 1);
}

/* n = 4 and 5: seeded random schedules, with up to two failures at random
 * steps (any node, the coordinator included). */
static void test_random_n4_n5(void **st)
{
    (void)st;
    uint64_t seed = 0x5eed;
    for (int n = 4; n <= 5; n++) {
        long runs = 0;
        for (int kills = 0; kills <= 2; kills++)
            for (int it = 0; it < RANDOM_RUNS; it++, runs++) {
                world_t w;
                bad = NULL;
                tpos = 0;
                trace[0] = 0;
                world_init(&w, n);
                step_t s[4 * MAXN * MAXN];
                int k, len = 0;
                while ((k = steps(&w, kills, s)) && !bad) {
                    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                    step_t x = s[(seed >> 33) % (uint64_t)k];
                    trace_step(x);
                    apply(&w, x);
                    assert_true(++len < 10000);
                }
                if (!k)
                    check_end(&w);
                world_free(&w);
                if (bad)
                    fail_msg("n=%d kills=%d run %d: %s; schedule:%s", n, kills, it, bad, trace);
            }
        printf("commit round n=%d, up to 2 failures: %ld random schedules\n", n, runs);
    }
}

/* ---- single rules ----------------------------------------------------------- */

static void test_stale_and_refused_begin(void **st)
{
    (void)st;
    phx_ck_cm_t *m;
    phx_ck_cm_out_t o = { 0 };
    assert_int_equal(phx_ck_cm_create(3, 1, &m), 0);
    /* A BEGIN named by another dead count is stale. */
    assert_int_equal(phx_ck_cm_on_begin(m, phx_ck_id(0, 2), 1, 1, &o), 0);
    assert_int_equal(o.n, 0);
    assert_int_equal(phx_ck_cm_on_begin(m, phx_ck_id(1, 2), 1, 0, &o), PHX_EPROTO);
    assert_int_equal(o.n, 0);
    assert_int_equal(phx_ck_cm_on_begin(m, phx_ck_id(1, 2), 1, 1, &o), 1);
    assert_int_equal(o.n, 1);
    assert_int_equal(o.a[0].kind, PHX_CK_CM_PAUSE);
    assert_int_equal(o.a[0].epoch, 2);
    /* In a round already: another BEGIN is ignored. */
    o.n = 0;
    assert_int_equal(phx_ck_cm_on_begin(m, phx_ck_id(1, 3), 1, 1, &o), 0);
    assert_int_equal(o.n, 0);
    /* A stale ACK does not count; COMMIT of another id does nothing. */
    assert_int_equal(phx_ck_cm_on_copy_stored(m, phx_ck_id(1, 1)), 0);
    phx_ck_cm_on_commit(m, phx_ck_id(1, 1), &o);
    assert_int_equal(o.n, 0);
    phx_ck_cm_on_failure(m, 2, &o);
    assert_int_equal(o.n, 1);
    assert_int_equal(o.a[0].kind, PHX_CK_CM_ABORT);
    assert_int_equal(phx_ck_cm_in_round(m), 0);
    phx_ck_cm_destroy(m);
}

/* The snapshot may wait (slices moving home): it is asked again, and READY
 * waits for it. */
static void test_snapshot_asked_again(void **st)
{
    (void)st;
    phx_ck_cm_t *m;
    phx_ck_cm_out_t o = { 0 };
    uint64_t mark[2] = { 0 };
    uint8_t dead[2] = { 0 };
    phx_ck_filter_t f = { .n = 2, .ck_mark = mark };
    uint64_t id = phx_ck_id(0, 1);
    assert_int_equal(phx_ck_cm_create(2, 1, &m), 0);
    assert_int_equal(phx_ck_cm_on_begin(m, id, 0, 1, &o), 1);
    o.n = 0;
    phx_ck_cm_on_progress(m, 0, &f, dead, &o);   /* not paused yet */
    assert_int_equal(o.n, 0);
    phx_ck_cm_on_progress(m, 1, &f, dead, &o);
    assert_int_equal(o.n, 2);
    assert_int_equal(o.a[0].kind, PHX_CK_CM_CUT);
    assert_int_equal(o.a[1].kind, PHX_CK_CM_SEND);
    assert_int_equal(o.a[1].msg, PHX_CK_CM_M_MARK);
    mark[0] = id;
    for (int i = 0; i < 2; i++) {   /* the glue could not snapshot the first time */
        o.n = 0;
        phx_ck_cm_on_progress(m, 1, &f, dead, &o);
        assert_int_equal(o.n, 1);
        assert_int_equal(o.a[0].kind, PHX_CK_CM_SNAPSHOT);
    }
    o.n = 0;
    phx_ck_cm_on_snapshot_done(m, 0, &o);
    assert_int_equal(o.n, 2);
    assert_int_equal(o.a[0].kind, PHX_CK_CM_SHIP);
    assert_int_equal(o.a[0].dst, 0);
    assert_int_equal(o.a[1].kind, PHX_CK_CM_STORED);
    assert_int_equal(phx_ck_cm_on_copy_stored(m, id), 1);
    o.n = 0;
    phx_ck_cm_on_progress(m, 1, &f, dead, &o);
    assert_int_equal(o.n, 1);
    assert_int_equal(o.a[0].msg, PHX_CK_CM_M_READY);
    assert_int_equal(o.a[0].dst, PHX_CK_CM_COORD);
    o.n = 0;
    phx_ck_cm_on_progress(m, 1, &f, dead, &o);   /* READY once */
    assert_int_equal(o.n, 0);
    phx_ck_cm_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stale_and_refused_begin),
        cmocka_unit_test(test_snapshot_asked_again),
        cmocka_unit_test(test_explore_n3),
        cmocka_unit_test(test_explore_n4),
        cmocka_unit_test(test_random_n4_n5),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
