/* The recovery round (ft/ckpt/recover.c) under an explorer: n machines,
 * each driven by a small glue like core/cr_recover.c, wired by FIFO
 * queues per link; failure notices arrive at each survivor as separate
 * events; the scheduler picks which enabled event runs next, exhaustively
 * over its first choices (depth-first) and seeded beyond them. One or two
 * failures: the first before the round, the second at every event
 * position, every victim (the coordinator included). A dead rank's frames
 * still arrive until the receiver's notice of it, none after (as the
 * transport does); a node that takes the work-lost verdict ends the job,
 * and the others see it leave.
 *
 * Checked at each RESUME: every member of the round has restored (no
 * resumed node's message can reach one still restoring). Checked at the
 * end of every schedule: it ends (quiescent within a step bound) with
 * every live node either resumed in the last round or holding the
 * work-lost verdict; the verdict exactly when no copy of some lost rank
 * survives (or nothing was committed); otherwise one epoch (the highest
 * committed among the live ranks) everywhere, one table (the relocation of
 * the final dead set), every slice restored exactly once, at its new host;
 * a node ships and restores only copies it holds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/phx_err.h"
#include "ft/ckpt/ckpt.h"
#include "ft/ckpt/ckpt_msg.h"
#include "ft/ckpt/recover.h"

#define MAXN 6
#define S 2                     /* slices per rank */
#define MAXLOC (MAXN * S)
#define QCAP 256
#define MAX_STEPS 5000
#define MAXCH 4096              /* choice points recorded per schedule */

enum { M_STATE, M_DECIDE, M_DONE, M_GO, M_ABORT, M_XFER };

typedef struct msg {
    int kind, round, flags, x;
    uint64_t epoch;
    uint8_t dead[MAXN];
} msg_t;

typedef struct queue {
    msg_t m[QCAP];
    int head, len;
} queue_t;

typedef struct node {
    phx_ck_rec_t *m;
    int alive, ended;           /* ended: took the work-lost verdict */
    uint8_t dead[MAXN];
    int round, rec, pause_req, paused;
    uint64_t committed;
    uint64_t xfer[MAXN];        /* epoch of x's copy shipped here (0: none) */
    int got[MAXLOC];            /* restores of each slice since the last OWN */
    int table[MAXLOC];
    int resumed;                /* round ended here by GO (-1: none) */
    uint64_t epoch_done;
    uint8_t notice[MAXN];       /* failure notices not delivered yet */
} node_t;

/* Scheduler: choice points with more than one option; the first `bound`
 * follow pre[] (depth-first), the rest the seeded generator. */
typedef struct chooser {
    int pre[MAXCH], opts[MAXCH];
    int npre, nch, bound;
    uint64_t rng;
} chooser_t;

typedef struct world {
    int n, nloc;
    int loc_e[MAXLOC], buddy_e[MAXN];
    node_t nd[MAXN];
    queue_t q[MAXN][MAXN];
    chooser_t *ch;
    int fail;
    char why[320];
} world_t;

/* Built with -DTRACE, a failing schedule prints its events. */
#ifdef TRACE
static FILE *trace_f;
static char *trace_buf;
static size_t trace_len;
#define TR(...) fprintf(trace_f, __VA_ARGS__)
#else
#define TR(...) ((void)0)
#endif
static void bad(world_t *w, const char *fmt, ...)
{
    if (w->fail)
        return;
    w->fail = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->why, sizeof w->why, fmt, ap);
    va_end(ap);
}

static int pick(chooser_t *c, int k)
{
    if (k <= 1)
        return 0;
    int i = c->nch++, r;
    if (i < c->bound && i < MAXCH) {
        r = i < c->npre ? c->pre[i] : 0;
        c->pre[i] = r;
        c->opts[i] = k;
        return r;
    }
    c->rng ^= c->rng << 13;
    c->rng ^= c->rng >> 7;
    c->rng ^= c->rng << 17;
    return (int)(c->rng % (uint64_t)k);
}

/* The next prefix in depth-first order; 0 when the tree is done. */
static int backtrack(chooser_t *c)
{
    int i = (c->nch < c->bound ? c->nch : c->bound) - 1;
    for (; i >= 0; i--)
        if (c->pre[i] + 1 < c->opts[i]) {
            c->pre[i]++;
            c->npre = i + 1;
            return 1;
        }
    return 0;
}

static phx_ck_rec_view_t view(world_t *w, int y)
{
    node_t *d = &w->nd[y];
    int c = 0;
    while (c < w->n && d->dead[c])
        c++;
    return (phx_ck_rec_view_t){ .dead = d->dead, .round = d->round, .coord = c < w->n ? c : -1, .rec = d->rec };
}

static void handle(world_t *w, int y, int from, const msg_t *m);
static void run(world_t *w, int y, phx_ck_rec_out_t *o, const int *keep);

static void send(world_t *w, int from, int to, const msg_t *m)
{
    if (to == from) {   /* the glue dispatches its own messages at once */
        handle(w, to, from, m);
        return;
    }
    queue_t *q = &w->q[from][to];
    if (q->len == QCAP) {
        bad(w, "queue %d->%d full", from, to);
        return;
    }
    q->m[(q->head + q->len++) % QCAP] = *m;
}

/* To every rank live in y's view, self last. */
static void bcast(world_t *w, int y, const msg_t *m)
{
    for (int r = 0; r < w->n; r++)
        if (r != y && !w->nd[y].dead[r])
            send(w, y, r, m);
    send(w, y, y, m);
}

static void progress(world_t *w, int y)
{
    phx_ck_rec_view_t v = view(w, y);
    phx_ck_rec_out_t o = { 0 };
    phx_ck_rec_progress(w->nd[y].m, &v, w->nd[y].paused, &o);
    run(w, y, &o, NULL);
}

/* ROLLBACK: the relocation of this node's dead set, then the machine's
 * restore order. */
static void rollback(world_t *w, int y, uint64_t e)
{
    node_t *d = &w->nd[y];
    int loc[MAXLOC], lost, lb;
    if (e != 1 && e != 2)
        bad(w, "rank %d rolls back to epoch %llu, which it does not hold", y, (unsigned long long)e);
    if (phx_ck_relocate(w->n, w->nloc, w->loc_e, w->buddy_e, d->dead, loc, &lost, &lb))
        return;   /* both copies of a rank are gone: the coordinator aborts */
    uint8_t have[MAXN];
    for (int x = 0; x < w->n; x++)
        have[x] = d->xfer[x] == e;
    phx_ck_rec_tables_t t = { .nloc = w->nloc, .loc_e = w->loc_e, .buddy_e = w->buddy_e, .keep = loc, .have = have };
    phx_ck_rec_view_t v = view(w, y);
    phx_ck_rec_out_t o = { 0 };
    phx_ck_rec_restore(d->m, &v, &t, &o);
    run(w, y, &o, loc);
}

/* The coordinator's judgement: no commit, or a rank whose two copies are
 * gone, loses the work. */
static void judge(world_t *w, int y, uint64_t e)
{
    node_t *d = &w->nd[y];
    int loc[MAXLOC], lost = -1, lb = -1;
    phx_ck_rec_view_t v = view(w, y);
    phx_ck_rec_out_t o = { 0 };
    if (!e || phx_ck_relocate(w->n, w->nloc, w->loc_e, w->buddy_e, d->dead, loc, &lost, &lb))
        phx_ck_rec_abort(d->m, &v, e, lost, lb, &o);
    else
        phx_ck_rec_decide(d->m, &v, e, 0, &o);
    run(w, y, &o, NULL);
}

/* Restores the slices of x's copy that keep puts here. */
static void restore_slices(world_t *w, int y, int x, const int *keep)
{
    for (int i = 0; i < w->nloc; i++)
        if (w->loc_e[i] == x && keep[i] == y)
            w->nd[y].got[i]++;
}

static void run(world_t *w, int y, phx_ck_rec_out_t *o, const int *keep)
{
    node_t *d = &w->nd[y];
    if (o->err)
        bad(w, "out of memory");
    for (int i = 0; i < o->len && !w->fail; i++) {
        const phx_ck_rec_act_t *a = &o->a[i];
        msg_t m = { .round = a->round, .epoch = a->epoch, .flags = a->flags, .x = a->x };
        memcpy(m.dead, d->dead, MAXN);
        switch (a->kind) {
        case PHX_CK_REC_PAUSE:
            if (!d->pause_req) {
                d->pause_req = 1;
                d->paused = 0;
            }
            break;
        case PHX_CK_REC_STATE:
            m.kind = M_STATE;
            m.round = d->round;
            m.epoch = d->committed;
            send(w, y, a->dst, &m);
            break;
        case PHX_CK_REC_JUDGE:
            judge(w, y, a->epoch);
            break;
        case PHX_CK_REC_DECIDE:
            m.kind = M_DECIDE;
            bcast(w, y, &m);
            break;
        case PHX_CK_REC_ABORT:
            m.kind = M_ABORT;
            bcast(w, y, &m);
            break;
        case PHX_CK_REC_ROLLBACK:
            rollback(w, y, a->epoch);
            break;
        case PHX_CK_REC_OWN:
            memset(d->got, 0, sizeof d->got);
            restore_slices(w, y, y, w->loc_e);
            break;
        case PHX_CK_REC_SHIP:
            if (w->buddy_e[a->x] != y || a->dst == y || d->dead[a->dst])
                bad(w, "rank %d ships the copy of %d to %d", y, a->x, a->dst);
            m.kind = M_XFER;
            send(w, y, a->dst, &m);
            break;
        case PHX_CK_REC_HELD:
            if (w->buddy_e[a->x] != y)
                bad(w, "rank %d restores a copy of %d it does not keep", y, a->x);
            restore_slices(w, y, a->x, keep);
            break;
        case PHX_CK_REC_XFER:
            if (d->xfer[a->x] != a->epoch || w->buddy_e[a->x] != a->via)
                bad(w, "rank %d restores a copy of %d that was not shipped to it", y, a->x);
            restore_slices(w, y, a->x, keep);
            break;
        case PHX_CK_REC_TABLE:
            memcpy(d->table, keep, sizeof d->table);
            break;
        case PHX_CK_REC_DONE:
            m.kind = M_DONE;
            send(w, y, a->dst, &m);
            break;
        case PHX_CK_REC_GO:
            m.kind = M_GO;
            bcast(w, y, &m);
            break;
        case PHX_CK_REC_RESUME:
            /* GO only once every member of the round restored: a resumed
             * node's messages must not reach one still restoring. */
            for (int r = 0; r < w->n; r++) {
                node_t *p = &w->nd[r];
                if (p->alive && !p->ended && p->round == a->round && !memcmp(p->dead, d->dead, MAXN) &&
                    !phx_ck_rec_is_restored(p->m))
                    bad(w, "rank %d resumes round %d while rank %d has not restored", y, a->round, r);
            }
            d->resumed = a->round;
            d->epoch_done = a->epoch;
            d->rec = d->pause_req = d->paused = 0;
            memset(d->xfer, 0, sizeof d->xfer);
            break;
        default:
            bad(w, "unknown action %d", a->kind);
        }
    }
    phx_ck_rec_out_free(o);
}

static void handle(world_t *w, int y, int from, const msg_t *m)
{
    node_t *d = &w->nd[y];
    TR("  %d<-%d kind %d round %d epoch %llu\n", y, from, m->kind, m->round, (unsigned long long)m->epoch);
    if (!d->alive || d->ended || w->fail || (from != y && d->dead[from]))
        return;   /* nothing of a dead incarnation after its notice */
    phx_ck_rec_view_t v = view(w, y);
    phx_ck_rec_out_t o = { 0 };
    switch (m->kind) {
    case M_STATE:
        phx_ck_rec_on_report(d->m, &v, from, m->dead, m->epoch, 0, &o);
        break;
    case M_DECIDE:
        if (phx_ck_rec_on_decide(d->m, &v, m->round, m->dead, m->epoch, m->flags))
            progress(w, y);
        break;
    case M_DONE:
        phx_ck_rec_on_done(d->m, &v, from, m->round, &o);
        break;
    case M_GO:
        phx_ck_rec_on_go(d->m, &v, m->round, &o);
        break;
    case M_ABORT:   /* the node ends the job here: the others see it leave */
        d->ended = 1;
        for (int r = 0; r < w->n; r++)
            if (r != y && w->nd[r].alive)
                w->nd[r].notice[y] = 1;
        break;
    case M_XFER:
        d->xfer[m->x] = m->epoch;
        progress(w, y);
        break;
    }
    run(w, y, &o, NULL);
}

static void notice(world_t *w, int y, int x)
{
    node_t *d = &w->nd[y];
    TR("  %d: notice of %d\n", y, x);
    d->notice[x] = 0;
    if (d->dead[x])
        return;
    d->dead[x] = 1;
    d->round++;
    d->rec = 1;
    phx_ck_rec_view_t v = view(w, y);
    phx_ck_rec_out_t o = { 0 };
    phx_ck_rec_on_failure(d->m, &v, &o);
    run(w, y, &o, NULL);
    progress(w, y);
    v = view(w, y);
    phx_ck_rec_try_decide(d->m, &v, &o);
    run(w, y, &o, NULL);
}

static void kill_rank(world_t *w, int x)
{
    if (!w->nd[x].alive)
        return;
    w->nd[x].alive = 0;
    for (int y = 0; y < w->n; y++)
        if (y != x && w->nd[y].alive)
            w->nd[y].notice[x] = 1;
}

/* committed: each rank's committed epoch (every rank stored epochs 1 and
 * 2; a commit of e implies e stored everywhere). */
static void setup(world_t *w, int n, const uint64_t *committed, chooser_t *ch)
{
    memset(w, 0, sizeof *w);
    w->n = n;
    w->nloc = n * S;
    w->ch = ch;
    for (int i = 0; i < w->nloc; i++)
        w->loc_e[i] = i / S;
    for (int r = 0; r < n; r++)
        w->buddy_e[r] = (r + 1) % n;
    for (int r = 0; r < n; r++) {
        node_t *d = &w->nd[r];
        assert_int_equal(phx_ck_rec_create(n, r, &d->m), 0);
        d->alive = 1;
        d->resumed = -1;
        d->committed = committed[r];
    }
}

static void teardown(world_t *w)
{
    for (int r = 0; r < w->n; r++)
        phx_ck_rec_destroy(w->nd[r].m);
}

/* One enabled event, chosen by the scheduler; 0 when none is left. */
static int step(world_t *w)
{
    int ev[MAXN * MAXN * 2][3], k = 0;
    for (int y = 0; y < w->n; y++) {
        node_t *d = &w->nd[y];
        for (int a = 0; a < w->n; a++) {
            if (!d->alive || d->ended)
                w->q[a][y].len = 0;   /* to a process that is gone */
            else if (w->q[a][y].len)
                ev[k][0] = 0, ev[k][1] = a, ev[k++][2] = y;
            if (d->alive && !d->ended && d->notice[a])
                ev[k][0] = 1, ev[k][1] = a, ev[k++][2] = y;
        }
        if (d->alive && !d->ended && d->pause_req && !d->paused)
            ev[k][0] = 2, ev[k][1] = -1, ev[k++][2] = y;
    }
    if (!k)
        return 0;
    int *e = ev[pick(w->ch, k)], y = e[2];
    if (e[0] == 0) {
        queue_t *q = &w->q[e[1]][y];
        msg_t m = q->m[q->head];
        q->head = (q->head + 1) % QCAP;
        q->len--;
        handle(w, y, e[1], &m);
    } else if (e[0] == 1) {
        notice(w, y, e[1]);
    } else {
        w->nd[y].paused = 1;
        progress(w, y);
    }
    return 1;
}

static void check_end(world_t *w)
{
    int ndead = 0, unrec = 0, table[MAXLOC], lost, lb;
    uint8_t dead[MAXN] = { 0 };
    uint64_t e = 0;
    for (int r = 0; r < w->n; r++) {
        dead[r] = !w->nd[r].alive;
        ndead += dead[r];
        if (!dead[r] && w->nd[r].committed > e)
            e = w->nd[r].committed;
    }
    unrec = !e || phx_ck_relocate(w->n, w->nloc, w->loc_e, w->buddy_e, dead, table, &lost, &lb);
    int got[MAXLOC] = { 0 };
    for (int r = 0; r < w->n && !w->fail; r++) {
        node_t *d = &w->nd[r];
        if (dead[r])
            continue;
        if (unrec) {
            if (!d->ended)
                bad(w, "work lost but rank %d has no verdict", r);
            continue;
        }
        if (d->ended)
            bad(w, "rank %d took the work-lost verdict while every copy survives", r);
        else if (d->resumed != ndead || d->rec)
            bad(w, "rank %d did not end the last round (resumed %d of %d)", r, d->resumed, ndead);
        else if (d->epoch_done != e)
            bad(w, "rank %d rolled back to epoch %llu, not %llu", r, (unsigned long long)d->epoch_done,
                (unsigned long long)e);
        else if (memcmp(d->table, table, sizeof(int) * (size_t)w->nloc))
            bad(w, "rank %d routes by another table", r);
        for (int i = 0; i < w->nloc; i++) {
            got[i] += d->got[i];
            if (d->got[i] && table[i] != r)
                bad(w, "slice %d restored at %d, not at its host %d", i, r, table[i]);
        }
    }
    for (int i = 0; i < w->nloc && !unrec; i++)
        if (got[i] != 1)
            bad(w, "slice %d restored %d times", i, got[i]);
}

/* One schedule: v1 dies first, v2 (-1: none) before event p2. Returns
 * the number of events it ran. */
static int schedule(int n, const uint64_t *committed, int v1, int v2, int p2, chooser_t *ch, char *why)
{
    world_t *w = malloc(sizeof *w);
    assert_non_null(w);
    setup(w, n, committed, ch);
    kill_rank(w, v1);
    int k = 0, second = v2 >= 0;
    for (; !w->fail; k++) {
        if (second && k == p2) {
            kill_rank(w, v2);
            second = 0;
        }
        if (k > MAX_STEPS) {
            bad(w, "no end after %d events", k);
            break;
        }
        if (!step(w)) {
            if (!second)
                break;
            kill_rank(w, v2);   /* ended before p2: the failure comes after the round */
            second = 0;
        }
    }
    if (!w->fail)
        check_end(w);
    if (w->fail)
        snprintf(why, 320, "n=%d v1=%d v2=%d p2=%d: %.255s", n, v1, v2, p2, w->why);
    teardown(w);
    free(w);
    return k;
}

static long nsched;

/* Every schedule of (n, commits, v1, v2 at p2) the chooser enumerates. */
static void explore(int n, const uint64_t *committed, int v1, int v2, int p2, int bound, uint64_t seed)
{
    static chooser_t ch;
    char why[320];
    memset(&ch, 0, sizeof ch);
    ch.bound = bound;
    do {
        ch.nch = 0;
        ch.rng = seed * 0x9e3779b97f4a7c15ull + 1;
        why[0] = 0;
#ifdef TRACE
        if (trace_f)
            fclose(trace_f);
        free(trace_buf);
        trace_f = open_memstream(&trace_buf, &trace_len);
#endif
        schedule(n, committed, v1, v2, p2, &ch, why);
        nsched++;
#ifdef TRACE
        fflush(trace_f);
        if (why[0])
            fputs(trace_buf, stderr);
#endif
        if (why[0])
            fail_msg("%s (bound %d, seed %llu, schedule %ld)", why, bound, (unsigned long long)seed, nsched);
    } while (backtrack(&ch));
}

static const uint64_t commits[][MAXN] = {
    { 1, 1, 1, 1, 1, 1 },   /* nobody saw the commit of 2 */
    { 2, 2, 2, 2, 2, 2 },
    { 2, 1, 2, 1, 1, 2 },   /* COMMIT(2) reached some ranks only */
    { 1, 1, 1, 2, 1, 1 },
    { 0, 0, 0, 0, 0, 0 },   /* nothing committed: the work is lost */
};
#define NCOMMITS (int)(sizeof commits / sizeof commits[0])

/* The length of a schedule with v1's failure alone (the positions for v2). */
static int length(int n, const uint64_t *committed, int v1, uint64_t seed)
{
    chooser_t *ch = calloc(1, sizeof *ch);
    char why[320] = "";
    assert_non_null(ch);
    ch->rng = seed * 0x9e3779b97f4a7c15ull + 1;
    int k = schedule(n, committed, v1, -1, -1, ch, why);
    free(ch);
    if (why[0])
        fail_msg("%s", why);
    return k;
}

/* n = 4, one failure of each rank: every interleaving, with the last
 * commit seen by some ranks only, and with nothing committed. */
static void test_one_failure_exhaustive(void **st)
{
    (void)st;
    long before = nsched;
    for (int v1 = 0; v1 < 4; v1++) {
        explore(4, commits[2], v1, -1, -1, MAXCH, 1);
        explore(4, commits[NCOMMITS - 1], v1, -1, -1, MAXCH, 1);
    }
    print_message("one failure, n=4, exhaustive: %ld schedules\n", nsched - before);
}

/* n = 4..6, a second failure (every victim) before every event of the
 * first one's schedule; exhaustive over the first choices, seeded after. */
static void test_two_failures_every_position(void **st)
{
    (void)st;
    long before = nsched;
    for (int n = 4; n <= MAXN; n++)
        for (int c = 0; c < NCOMMITS; c++)
            for (int v1 = 0; v1 < n; v1++)
                for (uint64_t seed = 1; seed <= 2; seed++) {
                    int len = length(n, commits[c], v1, seed);
                    for (int v2 = 0; v2 < n; v2++)
                        for (int p2 = 0; v2 != v1 && p2 <= len; p2++)
                            explore(n, commits[c], v1, v2, p2, n == 4 ? 3 : 2, seed);
                }
    print_message("two failures, n=4..6: %ld schedules\n", nsched - before);
}

/* n = 4..6, one failure: seeded random interleavings. */
static void test_one_failure_seeded(void **st)
{
    (void)st;
    long before = nsched;
    for (int n = 4; n <= MAXN; n++)
        for (int c = 0; c < NCOMMITS; c++)
            for (int v1 = 0; v1 < n; v1++)
                for (uint64_t seed = 1; seed <= 200; seed++)
                    explore(n, commits[c], v1, -1, -1, 0, seed);
    print_message("one failure, n=4..6, seeded: %ld schedules\n", nsched - before);
}

static int kinds(const phx_ck_rec_out_t *o, int i) { return i < o->len ? o->a[i].kind : 0; }

/* A restart from disk (or a newcomer): no report, the coordinator decides
 * without a failure, the glue restores and says so; stale frames do
 * nothing. */
static void test_restart_without_report(void **st)
{
    (void)st;
    phx_ck_rec_t *c, *m;
    uint8_t none[4] = { 0 }, other[4] = { 0, 1, 0, 0 };
    phx_ck_rec_view_t vc = { .dead = none, .round = 0, .coord = 0, .rec = 1 }, vm = vc;
    phx_ck_rec_out_t o = { 0 };
    assert_int_equal(phx_ck_rec_create(4, 0, &c), 0);
    assert_int_equal(phx_ck_rec_create(4, 2, &m), 0);
    phx_ck_rec_no_report(m);
    phx_ck_rec_progress(m, &vm, 1, &o);
    assert_int_equal(o.len, 0);
    phx_ck_rec_decide(c, &vc, 7, PHX_CK_D_DISK, &o);
    assert_int_equal(kinds(&o, 0), PHX_CK_REC_DECIDE);
    assert_int_equal(o.a[0].flags, PHX_CK_D_DISK);
    phx_ck_rec_out_free(&o);
    assert_int_equal(phx_ck_rec_on_decide(m, &vm, 0, other, 7, PHX_CK_D_DISK), 0);   /* another set */
    assert_int_equal(phx_ck_rec_on_decide(m, &vm, 1, none, 7, PHX_CK_D_DISK), 0);    /* another round */
    assert_int_equal(phx_ck_rec_on_decide(m, &vm, 0, none, 7, PHX_CK_D_DISK), 1);
    assert_int_equal(phx_ck_rec_epoch(m), 7);
    phx_ck_rec_progress(m, &vm, 0, &o);   /* not paused yet */
    assert_int_equal(o.len, 0);
    phx_ck_rec_progress(m, &vm, 1, &o);
    assert_int_equal(kinds(&o, 0), PHX_CK_REC_ROLLBACK);
    assert_int_equal(o.len, 1);
    phx_ck_rec_out_free(&o);
    phx_ck_rec_on_go(m, &vm, 0, &o);      /* not restored: no resume */
    assert_int_equal(o.len, 0);
    phx_ck_rec_restored(m, &vm, &o);
    assert_int_equal(kinds(&o, 0), PHX_CK_REC_DONE);
    assert_int_equal(o.a[0].dst, 0);
    phx_ck_rec_out_free(&o);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(o.len, 0);
        phx_ck_rec_on_done(c, &vc, r, 0, &o);
    }
    assert_int_equal(kinds(&o, 0), PHX_CK_REC_GO);
    phx_ck_rec_out_free(&o);
    phx_ck_rec_on_go(m, &vm, 1, &o);      /* another round */
    assert_int_equal(o.len, 0);
    phx_ck_rec_on_go(m, &vm, 0, &o);
    assert_int_equal(kinds(&o, 0), PHX_CK_REC_RESUME);
    phx_ck_rec_out_free(&o);
    phx_ck_rec_destroy(c);
    phx_ck_rec_destroy(m);
}

/* JUDGE sums up the reports' partial-round bits over the live ranks. */
static void test_judge_summary(void **st)
{
    (void)st;
    phx_ck_rec_t *c;
    uint8_t dead[4] = { 0, 0, 0, 1 };
    phx_ck_rec_view_t v = { .dead = dead, .round = 1, .coord = 0, .rec = 1 };
    phx_ck_rec_out_t o = { 0 };
    assert_int_equal(phx_ck_rec_create(4, 0, &c), 0);
    phx_ck_rec_on_report(c, &v, 3, dead, 9, 1, &o);   /* the dead rank's bits do not count */
    phx_ck_rec_on_report(c, &v, 0, dead, 4, 2, &o);
    phx_ck_rec_on_report(c, &v, 1, dead, 5, 2, &o);
    assert_int_equal(o.len, 0);
    phx_ck_rec_on_report(c, &v, 2, dead, 4, 2 | 4, &o);
    assert_int_equal(kinds(&o, 0), PHX_CK_REC_JUDGE);
    assert_int_equal(o.a[0].epoch, 5);
    assert_int_equal(o.a[0].flags, PHX_CK_REC_J_REPLAYED | PHX_CK_REC_J_ENDED | PHX_CK_REC_J_MOVED);
    phx_ck_rec_out_free(&o);
    phx_ck_rec_try_decide(c, &v, &o);   /* undecided: asked again, judged again */
    assert_int_equal(kinds(&o, 0), PHX_CK_REC_JUDGE);
    phx_ck_rec_out_free(&o);
    phx_ck_rec_on_report(c, &v, 1, dead, 5, 1, &o);   /* one rank restored and did not end */
    assert_int_equal(o.a[0].flags, PHX_CK_REC_J_REPLAYED | PHX_CK_REC_J_MOVED);
    phx_ck_rec_out_free(&o);
    phx_ck_rec_abort(c, &v, 5, 3, 0, &o);
    assert_int_equal(kinds(&o, 0), PHX_CK_REC_ABORT);
    phx_ck_rec_out_free(&o);
    phx_ck_rec_try_decide(c, &v, &o);   /* decided once per round */
    assert_int_equal(o.len, 0);
    phx_ck_rec_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_restart_without_report),
        cmocka_unit_test(test_judge_summary),
        cmocka_unit_test(test_one_failure_exhaustive),
        cmocka_unit_test(test_one_failure_seeded),
        cmocka_unit_test(test_two_failures_every_position),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    print_message("recovery round explorer: %ld schedules in all\n", nsched);
    return rc;
}
