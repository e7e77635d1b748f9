/* The partial recovery round's machine (ft/mlog/rec.c) on n = 4..6 nodes
 * under a deterministic explorer: per-link FIFO queues, cr's round as an
 * abstract coordinator (notices, decision by the machine's rule, begin on
 * every live node, the hand-back once all began, or a global rollback),
 * the end of each node's replays and the call that tells its machine as two
 * steps, and checkpoints the coordinator begins when its machine does not
 * hold them. One or two failures land at every event position, replays
 * included. Exhaustive (every interleaving, states merged by content) for
 * n = 4; seeded random schedules for n = 5 and 6.
 *
 * The runtime's orderings the model keeps (each a FIFO or pause argument,
 * stated where the event is enabled): a notice ends a node's steps of the
 * round under way (cr restarts it); workers, hence a phase's end, run only
 * outside a node's round; a commit follows every live rank's marker, so
 * the links are empty (without it the explorer reports schedules the
 * runtime cannot produce: a round-1 RFIN counted in the next period). A
 * phase-end call may reach its machine at any later step, after the next
 * round's decision and begin too: it names the round the phase ended in,
 * and the machine drops an earlier round's.
 *
 * Checked in every schedule:
 *   - no checkpoint commits while a live node's replay is under way (the
 *     bug of issue 11: a mid-replay checkpoint gave a wrong result);
 *   - survivors never go back, but by the documented global fallback: a
 *     global decision needs two losses in the period, and the machine never
 *     ends the job (WORK_LOST) or keeps a period at a commit;
 *   - each node hands back and releases each round at most once, and the
 *     hand-back restores every rank the period lost;
 *   - liveness: when nothing is left to happen, every live node's round is
 *     released, its replays ended, its hold let go.
 * Built a second, third and fourth time with PHX_ML_REC_MUTANT (the hold
 * at the hand-back taken out; an RFIN counted for any round; a phase's
 * end counted for the current round whatever round it names), the same
 * explorer must find a checkpoint committed during a replay. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ft/mlog/rec.h"

enum { NMAX = 6, QMAX = 8, TMAX = 160 };
enum { RUNS = 20000 };   /* random schedules per mode for n = 5 and 6 */

enum { V_NONE, V_COMMIT_REPLAY, V_BACK, V_WORK_LOST, V_KEPT, V_TWICE, V_LIVE, V_RB, V_MODEL };
static const char *VNAME[] = { "none", "checkpoint committed during a replay", "survivor went back",
                               "job ended (WORK_LOST)", "period kept at a commit", "hand-back or release twice",
                               "round did not end everywhere", "hand-back misses a lost rank", "model overflow" };

/* Events: what happens next somewhere. */
enum { E_DELIVER, E_NOTICE, E_FAIL, E_DECIDE, E_BEGIN, E_HANDBACK, E_ROLLBACK, E_END, E_ENDCALL, E_CKPT };
static const char *ENAME[] = { "deliver", "notice", "fail", "decide", "begin", "handback", "rollback",
                               "replays-end", "end-call", "checkpoint" };

typedef struct {
    uint8_t t, a, b;
} ev_t;

typedef struct {
    uint8_t kind, round;
} qmsg_t;

/* Plain data but the machines; mutable model state first, the trace
 * last (left out of the state's digest). */
typedef struct world {
    phx_ml_rec_t *m[NMAX];
    int n, fails, ckpts, round_kind, viol;
    uint8_t alive[NMAX];
    uint8_t notice[NMAX][NMAX];     /* notice[y][x]: y has still to hear of x's death */
    qmsg_t q[NMAX][NMAX][QMAX];     /* q[src][dst]: FIFO */
    uint8_t ql[NMAX][NMAX];
    uint8_t since[NMAX];            /* lost in this checkpoint period (cr's since the epoch) */
    uint8_t undecided[NMAX];        /* dead, no round decided for it yet */
    uint8_t dsince[NMAX];           /* the since set the last decision carried */
    uint8_t beg[NMAX], hb[NMAX], rbk[NMAX];   /* the round's steps still due per node */
    uint8_t pr[NMAX];               /* cr's report: 1 restored without GO or global, 2 partial round ended */
    uint8_t paused[NMAX];           /* cr paused the workers for a round (from the notice to its end) */
    uint8_t replaying[NMAX];        /* ground truth: the replay phase is on */
    uint8_t endq[NMAX];             /* the phase ended, its call to the machine still queued */
    uint8_t endr[NMAX];             /* ... naming the round the phase ended in */
    uint8_t held[NMAX];             /* the machine's last HOLD */
    uint8_t rel_round[NMAX];        /* last round the machine released */
    uint8_t hbs[NMAX][4], rels[NMAX][4];
    int ntrace;
    ev_t trace[TMAX];
} world_t;

typedef struct {
    int n, maxfail, maxck, team;
    phx_mld_mode_t mode;
} cfg_t;

/* What the schedules reached, so that no check passes for want of cases. */
enum { C_SEQ, C_GLOBAL, C_DROP_MIDREPLAY, C_CK_HELD, C_PERIOD, C_N };
static const char *CNAME[] = { "sequential rounds begun", "global rollbacks", "replays voided by a rollback",
                               "checkpoints held back", "periods ended" };
static uint64_t cover[C_N];

static void world_free(world_t *w)
{
    for (int i = 0; i < w->n; i++)
        phx_ml_rec_destroy(w->m[i]);
}

static void world_init(world_t *w, const cfg_t *c)
{
    memset(w, 0, sizeof *w);
    w->n = c->n;
    for (int i = 0; i < c->n; i++) {
        phx_ml_rec_cfg_t mc = { .n = c->n, .rank = i, .mode = c->mode, .team = c->team };
        assert_int_equal(phx_ml_rec_create(&mc, &w->m[i]), 0);
        w->alive[i] = 1;
    }
}

static void world_copy(world_t *d, const world_t *s)
{
    memcpy(d, s, sizeof *d);
    for (int i = 0; i < s->n; i++)
        assert_int_equal(phx_ml_rec_clone(s->m[i], &d->m[i]), 0);
}

static void viol(world_t *w, int v)
{
    if (!w->viol)
        w->viol = v;
}

static int coord(const world_t *w)
{
    for (int i = 0; i < w->n; i++)
        if (w->alive[i])
            return i;
    return -1;
}

/* Carries out node y's queued actions as core/mlog_round.c does, with the
 * ground truth the checks need. */
static void apply(world_t *w, int y, int rc)
{
    if (rc)
        viol(w, V_MODEL);
    phx_ml_rec_act_t a;
    while (phx_ml_rec_next(w->m[y], &a)) {
        switch (a.what) {
        case PHX_ML_REC_SEND_ALL: {
            /* One frame on each link to a peer live in the machine's view
             * (one to a rank dead in truth is lost with it); each link
             * stays FIFO, and the explorer interleaves the links'
             * deliveries. */
            const uint8_t *dead = phx_ml_rec_dead(w->m[y]);
            for (int d = 0; d < w->n; d++) {
                if (d == y || dead[d] || !w->alive[d])
                    continue;
                if (w->ql[y][d] == QMAX) {
                    viol(w, V_MODEL);
                    break;
                }
                w->q[y][d][w->ql[y][d]++] = (qmsg_t){ (uint8_t)a.kind, (uint8_t)a.round };
            }
            break;
        }
        case PHX_ML_REC_PHASE:
            w->replaying[y] = 1;
            break;
        case PHX_ML_REC_HOLD:
            w->held[y] = (uint8_t)a.on;
            break;
        case PHX_ML_REC_HANDBACK: {
            if (a.round >= 4 || ++w->hbs[y][a.round] > 1)
                viol(w, V_TWICE);
            const uint8_t *rb = phx_ml_rec_rb(w->m[y]);
            for (int r = 0; r < w->n; r++)
                if (w->dsince[r] && !rb[r])
                    viol(w, V_RB);
            break;
        }
        case PHX_ML_REC_RELEASE:
            if (a.round >= 4 || ++w->rels[y][a.round] > 1)
                viol(w, V_TWICE);
            w->rel_round[y] = (uint8_t)a.round;
            break;
        case PHX_ML_REC_DROP:
            cover[C_DROP_MIDREPLAY] += w->replaying[y];
            w->replaying[y] = 0;   /* the records go; no end call is queued for them */
            break;
        case PHX_ML_REC_WORK_LOST:
            viol(w, V_WORK_LOST);
            break;
        case PHX_ML_REC_BEGIN:
            cover[C_SEQ] += a.seq;
            break;
        case PHX_ML_REC_PERIOD:   /* rounds count from 1 again */
            cover[C_PERIOD]++;
            memset(w->hbs[y], 0, sizeof w->hbs[y]);
            memset(w->rels[y], 0, sizeof w->rels[y]);
            break;
        case PHX_ML_REC_PERIOD_KEPT:
            viol(w, V_KEPT);
            break;
        default:
            break;
        }
    }
}

static int notices_pending(const world_t *w)
{
    for (int y = 0; y < w->n; y++)
        for (int x = 0; x < w->n; x++)
            if (w->alive[y] && w->notice[y][x])
                return 1;
    return 0;
}

static int any(const uint8_t *v, const world_t *w)
{
    for (int i = 0; i < w->n; i++)
        if (w->alive[i] && v[i])
            return 1;
    return 0;
}

/* Every event enabled in w, into e; returns how many. */
static int enabled(const world_t *w, const cfg_t *c, ev_t *e)
{
    int k = 0, n = w->n, live = 0;
    for (int i = 0; i < n; i++)
        live += w->alive[i];
    for (int s = 0; s < n; s++)
        for (int d = 0; d < n; d++)
            if (w->alive[d] && w->ql[s][d] && !(!w->alive[s] && !w->notice[d][s]))
                e[k++] = (ev_t){ E_DELIVER, (uint8_t)s, (uint8_t)d };
    for (int y = 0; y < n; y++)
        for (int x = 0; x < n; x++)
            if (w->alive[y] && w->notice[y][x])
                e[k++] = (ev_t){ E_NOTICE, (uint8_t)y, (uint8_t)x };
    if (w->fails < c->maxfail && live > 2)
        for (int x = 0; x < n; x++)
            if (w->alive[x])
                e[k++] = (ev_t){ E_FAIL, (uint8_t)x, 0 };
    int undecided = 0;   /* dead ranks: any() skips them */
    for (int x = 0; x < n; x++)
        undecided |= w->undecided[x];
    /* The decision needs every live rank's report; a phase-end call still
     * queued may be taken before or after it (it names its round). */
    if (undecided && !notices_pending(w))
        e[k++] = (ev_t){ E_DECIDE, 0, 0 };
    int begs = any(w->beg, w);
    for (int y = 0; y < n; y++) {
        if (!w->alive[y])
            continue;
        if (w->beg[y])
            e[k++] = (ev_t){ E_BEGIN, (uint8_t)y, 0 };
        if (w->hb[y] && !begs)
            e[k++] = (ev_t){ E_HANDBACK, (uint8_t)y, 0 };
        if (w->rbk[y])
            e[k++] = (ev_t){ E_ROLLBACK, (uint8_t)y, 0 };
        /* Workers run (the phase can end) outside cr's rounds only, and
         * only once the latest round released (the guard). */
        if (w->replaying[y] && !w->paused[y] &&
            w->rel_round[y] == phx_ml_rec_round(w->m[y]) && phx_ml_rec_released(w->m[y]))
            e[k++] = (ev_t){ E_END, (uint8_t)y, 0 };
        if (w->endq[y])
            e[k++] = (ev_t){ E_ENDCALL, (uint8_t)y, 0 };
    }
    /* A commit comes after every live rank's marker, which follows on each
     * FIFO link what that rank sent before its cut: links are empty. */
    int co = coord(w), links = 0;
    for (int s = 0; s < n; s++)
        for (int d = 0; d < n; d++)
            links |= w->alive[s] && w->alive[d] && w->ql[s][d];
    int lost = 0;
    for (int x = 0; x < n; x++)
        lost |= w->since[x];
    if (w->ckpts < c->maxck && lost && !links && !undecided && !notices_pending(w) && !begs && !any(w->hb, w) &&
        !any(w->rbk, w) && co >= 0) {
        if (!w->held[co])
            e[k++] = (ev_t){ E_CKPT, 0, 0 };
        else
            cover[C_CK_HELD]++;
    }
    return k;
}

static int replayed(const world_t *w)
{
    int other = 0, ended = 1, none = 1;
    for (int y = 0; y < w->n; y++) {
        if (!w->alive[y])
            continue;
        other |= w->pr[y] & 1;
        ended &= (w->pr[y] & 2) != 0;
        none &= !w->pr[y];
    }
    return other ? PHX_MLD_REPLAYED_OTHER
         : none  ? PHX_MLD_REPLAYED_NONE
         : ended ? PHX_MLD_REPLAYED_ENDED
                 : PHX_MLD_REPLAYED_OTHER;
}

static void step(world_t *w, ev_t e)
{
    int n = w->n;
    if (w->ntrace < TMAX)
        w->trace[w->ntrace++] = e;
    switch (e.t) {
    case E_DELIVER: {
        qmsg_t mg = w->q[e.a][e.b][0];
        memmove(&w->q[e.a][e.b][0], &w->q[e.a][e.b][1], (size_t)(QMAX - 1) * sizeof mg);
        w->ql[e.a][e.b]--;
        phx_ml_rec_t *m = w->m[e.b];
        apply(w, e.b, mg.kind == PHX_ML_REC_RDONE ? phx_ml_rec_on_rdone(m, e.a, mg.round)
                                                  : phx_ml_rec_on_rfin(m, e.a, mg.round));
        break;
    }
    case E_NOTICE:
        /* After the notice the transport hands nothing more from x, and
         * cr's round under way here restarts: its steps not taken yet are
         * never taken (a rank that restored and had no GO says so in its
         * report, pr bit 0). */
        w->notice[e.a][e.b] = 0;
        w->beg[e.a] = w->hb[e.a] = w->rbk[e.a] = 0;
        w->paused[e.a] = 1;
        w->ql[e.b][e.a] = 0;
        apply(w, e.a, phx_ml_rec_on_failure(w->m[e.a], e.b));
        break;
    case E_FAIL:
        w->fails++;
        w->alive[e.a] = 0;
        w->since[e.a] = w->undecided[e.a] = 1;
        for (int y = 0; y < n; y++) {
            w->notice[y][e.a] = (uint8_t)w->alive[y];
            w->ql[y][e.a] = 0;
        }
        break;
    case E_DECIDE: {
        uint8_t dead[NMAX];
        for (int i = 0; i < n; i++)
            dead[i] = !w->alive[i];
        int co = coord(w), lost = 0, rp = replayed(w);
        for (int i = 0; i < n; i++)
            lost += w->since[i];
        int part = phx_ml_rec_decide(w->m[co], dead, w->since, rp);
        memset(w->undecided, 0, sizeof w->undecided);
        memcpy(w->dsince, w->since, sizeof w->dsince);
        if (!part && lost < 2)
            viol(w, V_BACK);   /* the documented fallback needs a second loss in the period */
        w->round_kind = part ? 1 : 2;
        for (int y = 0; y < n; y++) {
            if (!w->alive[y])
                continue;
            if (part)
                w->beg[y] = w->hb[y] = 1;
            else
                w->rbk[y] = 1;
        }
        break;
    }
    case E_BEGIN:
        w->beg[e.a] = 0;
        w->pr[e.a] |= 1;
        apply(w, e.a, phx_ml_rec_partial_begin(w->m[e.a], w->dsince));
        break;
    case E_HANDBACK:
        w->hb[e.a] = w->paused[e.a] = 0;
        w->pr[e.a] = (uint8_t)((w->pr[e.a] & ~1) | 2);
        apply(w, e.a, phx_ml_rec_handback(w->m[e.a]));
        break;
    case E_ROLLBACK:
        cover[C_GLOBAL]++;
        w->rbk[e.a] = w->paused[e.a] = 0;
        w->pr[e.a] |= 1;
        apply(w, e.a, phx_ml_rec_on_rollback(w->m[e.a]));
        break;
    case E_END:
        w->replaying[e.a] = 0;
        w->endq[e.a] = 1;
        w->endr[e.a] = (uint8_t)phx_ml_rec_round(w->m[e.a]);
        break;
    case E_ENDCALL:
        w->endq[e.a] = 0;
        apply(w, e.a, phx_ml_rec_replay_done(w->m[e.a], w->endr[e.a]));
        break;
    case E_CKPT:
        w->ckpts++;
        for (int y = 0; y < n; y++)
            if (w->alive[y] && w->replaying[y])
                viol(w, V_COMMIT_REPLAY);
        for (int y = 0; y < n; y++)
            if (w->alive[y])
                apply(w, y, phx_ml_rec_on_commit(w->m[y], w->replaying[y]));
        memset(w->since, 0, sizeof w->since);
        memset(w->pr, 0, sizeof w->pr);
        break;
    }
}

/* Nothing left to happen: the round ended everywhere. */
static void check_end(world_t *w)
{
    for (int y = 0; y < w->n; y++) {
        if (!w->alive[y])
            continue;
        phx_ml_rec_t *m = w->m[y];
        if (w->replaying[y] || w->endq[y] || w->held[y] || (phx_ml_rec_replays(m) && !phx_ml_rec_released(m)))
            viol(w, V_LIVE);
    }
}

static void print_trace(const world_t *w, const cfg_t *c)
{
    fprintf(stderr, "schedule (n=%d mode=%d team=%d): %s\n", c->n, (int)c->mode, c->team, VNAME[w->viol]);
    for (int i = 0; i < w->ntrace; i++)
        fprintf(stderr, "  %s %d %d\n", ENAME[w->trace[i].t], w->trace[i].a, w->trace[i].b);
}

/* ---- state digest and the visited set (exhaustive search) ---------------- */

static uint64_t digest(const world_t *w)
{
    uint64_t h = 1469598103934665603ull;
    const uint8_t *p = (const uint8_t *)w + offsetof(world_t, n);
    size_t len = offsetof(world_t, ntrace) - offsetof(world_t, n);
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    uint8_t buf[4096];
    for (int y = 0; y < w->n; y++) {
        size_t l = phx_ml_rec_state(w->m[y], buf, sizeof buf);
        assert_true(l <= sizeof buf);
        for (size_t i = 0; i < l; i++)
            h = (h ^ buf[i]) * 1099511628211ull;
    }
    return h | 1;
}

/* Visited states: digest -> how many schedules run from there to an end
 * (saturating), so merged states still count every schedule they stand
 * for. */
typedef struct {
    uint64_t *k, *v;
    size_t cap, n;
} set_t;

/* The slot of h, added (value 0) if absent; *fresh says which. */
static uint64_t *set_slot(set_t *s, uint64_t h, int *fresh)
{
    if (2 * (s->n + 1) > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 1u << 16;
        set_t t = { calloc(cap, sizeof *t.k), calloc(cap, sizeof *t.v), cap, 0 };
        assert_true(t.k && t.v);
        int f;
        for (size_t i = 0; i < s->cap; i++)
            if (s->k[i])
                *set_slot(&t, s->k[i], &f) = s->v[i];
        free(s->k);
        free(s->v);
        *s = t;
    }
    size_t i = (size_t)(h % s->cap);
    while (s->k[i] && s->k[i] != h)
        i = (i + 1) % s->cap;
    *fresh = !s->k[i];
    if (*fresh) {
        s->k[i] = h;
        s->n++;
    }
    return &s->v[i];
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a + b < a ? UINT64_MAX : a + b;
}

typedef struct {
    const cfg_t *c;
    set_t seen;
    uint64_t states, schedules, found[V_MODEL + 1];
    int printed;
} search_t;

static void report(search_t *s, world_t *w)
{
    s->found[w->viol]++;
    if (!s->printed++)
        print_trace(w, s->c);
}

/* Returns the schedules from w to an end (a violation ends one). */
static uint64_t dfs(search_t *s, world_t *w)
{
    if (w->viol) {
        report(s, w);
        return 1;
    }
    int fresh;
    uint64_t h = digest(w), *slot = set_slot(&s->seen, h, &fresh);
    if (!fresh)
        return *slot;
    s->states++;
    ev_t e[NMAX * NMAX * 2 + 4 * NMAX + 4];
    int k = enabled(w, s->c, e);
    uint64_t paths = 0;
    if (!k) {
        check_end(w);
        if (w->viol)
            report(s, w);
        paths = 1;
    }
    for (int i = 0; i < k; i++) {
        world_t *x = malloc(sizeof *x);
        assert_non_null(x);
        world_copy(x, w);
        step(x, e[i]);
        paths = sat_add(paths, dfs(s, x));
        world_free(x);
        free(x);
    }
    *set_slot(&s->seen, h, &fresh) = paths;   /* the table may have grown meanwhile */
    return paths;
}

/* Random schedules: seeded, each run to its end. */
static uint64_t rng(uint64_t *st)
{
    *st ^= *st << 13;
    *st ^= *st >> 7;
    *st ^= *st << 17;
    return *st;
}

/* Each run draws the steps its failures land at (the second after the
 * first), so every position is hit alike; a failure due when nothing else
 * can happen lands then. */
static void walk(search_t *s, uint64_t seed, int runs)
{
    uint64_t st = seed;
    for (int r = 0; r < runs; r++) {
        world_t *w = malloc(sizeof *w);
        assert_non_null(w);
        world_init(w, s->c);
        ev_t e[NMAX * NMAX * 2 + 4 * NMAX + 4], f[NMAX], o[NMAX * NMAX * 2 + 4 * NMAX + 4];
        int at[2] = { (int)(rng(&st) % 80), 0 }, k;
        at[1] = at[0] + 1 + (int)(rng(&st) % 80);
        for (int i = 0; !w->viol && (k = enabled(w, s->c, e)) > 0; i++) {
            int nf = 0, no = 0;
            for (int j = 0; j < k; j++) {
                if (e[j].t == E_FAIL)
                    f[nf++] = e[j];
                else
                    o[no++] = e[j];
            }
            int due = nf && (i >= at[w->fails] || !no);
            step(w, due ? f[rng(&st) % (uint64_t)nf] : o[rng(&st) % (uint64_t)no]);
        }
        if (!w->viol)
            check_end(w);
        s->schedules++;
        if (w->viol)
            report(s, w);
        world_free(w);
        free(w);
    }
}

static const phx_mld_mode_t MODES[] = { PHX_MLD_CAUSAL, PHX_MLD_PESSIMISTIC, PHX_MLD_FAST, PHX_MLD_TEAM };
static uint64_t total_states, total_schedules, total_found[V_MODEL + 1];

static void run(const cfg_t *c, int exhaustive, int runs)
{
    search_t s = { .c = c };
    if (exhaustive) {
        world_t *w = malloc(sizeof *w);
        assert_non_null(w);
        world_init(w, c);
        s.schedules = dfs(&s, w);
        world_free(w);
        free(w);
    } else
        walk(&s, 0x9e3779b97f4a7c15ull ^ (uint64_t)(c->n * 131 + c->maxfail * 17 + (int)c->mode), runs);
    free(s.seen.k);
    free(s.seen.v);
    uint64_t bad = 0;
    for (int v = 1; v <= V_MODEL; v++)
        bad += s.found[v];
    fprintf(stderr, "n=%d mode=%d team=%d fails<=%d ckpts<=%d %s: %llu states, %llu schedules, %llu violations\n",
            c->n, (int)c->mode, c->team, c->maxfail, c->maxck, exhaustive ? "exhaustive" : "random",
            (unsigned long long)s.states, (unsigned long long)s.schedules, (unsigned long long)bad);
    total_states += s.states;
    total_schedules += s.schedules;
    for (int v = 0; v <= V_MODEL; v++)
        total_found[v] += s.found[v];
}

static void explore_all(void)
{
    for (int mi = 0; mi < 4; mi++) {
        int team = MODES[mi] == PHX_MLD_TEAM ? 2 : 0;
        for (int f = 1; f <= 2; f++) {
            cfg_t c = { .n = 4, .maxfail = f, .maxck = 2, .mode = MODES[mi], .team = team };
            run(&c, 1, 0);
        }
        for (int n = 5; n <= NMAX; n++) {
            cfg_t c = { .n = n, .maxfail = 2, .maxck = 2, .mode = MODES[mi], .team = team };
            run(&c, 0, RUNS);
        }
    }
    fprintf(stderr, "total: %llu distinct states, %llu schedules run to their end\n",
            (unsigned long long)total_states, (unsigned long long)total_schedules);
    for (int i = 0; i < C_N; i++)
        fprintf(stderr, "reached: %s: %llu\n", CNAME[i], (unsigned long long)cover[i]);
}

#ifndef PHX_ML_REC_MUTANT
static void test_explore(void **st)
{
    (void)st;
    explore_all();
    for (int v = 1; v <= V_MODEL; v++) {
        if (total_found[v])
            fprintf(stderr, "%s: %llu\n", VNAME[v], (unsigned long long)total_found[v]);
        assert_int_equal(total_found[v], 0);
    }
    assert_true(total_schedules > 0);
    for (int i = 0; i < C_N; i++)
        assert_true(cover[i] > 0);
}
#else
/* The negative control: the explorer catches the mutant's race. */
static void test_explore(void **st)
{
    (void)st;
    explore_all();
    fprintf(stderr, "mutant %d: %llu checkpoints committed during a replay\n", PHX_ML_REC_MUTANT,
            (unsigned long long)total_found[V_COMMIT_REPLAY]);
    assert_true(total_found[V_COMMIT_REPLAY] > 0);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_explore),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
