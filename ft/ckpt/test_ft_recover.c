/* The recovery round (ft/ckpt/recover.c) under an explorer: n machines,
 * each driven by a small glue like core/cr_recover.c, wired by FIFO
 * queues per link; failure notices arrive at each survivor as separate
 * events; the scheduler picks which enabled event runs next, exhaustively
 * over its first choices (depth-first) and seeded beyond them. One or two
 * failures: the first before the round, the second at every event
 * position, every victim (the coordinator included). A dead rank's frames
 * still arrive until the receiver's notice of it, none after (as the
 * transport does); a node that takes the work-lost verdict ends the job,
 * and the others see it leave. The coordinator judges with the runtime's
 * judgement (ft/ckpt/judge.h): global rounds, or (a logging mode) partial
 * and sequential ones, and a disk checkpoint at an older epoch when the
 * memory copies are lost.
 *
 * Application traffic: every node has messages in flight when the first
 * failure strikes, and sends again after each GO; the application handles
 * what the stale-frame filter (phx_ck_filter_*) let through while its
 * workers run. A global restore discards the node's queues, sends the
 * rollback marker (RB_MARK) to every live peer and raises the filter's
 * round, as core/cr_recover.c does; a partial round keeps them.
 *
 * Checked at each RESUME: every member of the round has restored (no
 * resumed node's message can reach one still restoring). Checked at each
 * message the application handles: it was sent in the receiver's
 * generation (no message of a rolled-back future is handled after a
 * restore, none from a peer's next generation before it). Checked at the
 * end of every schedule: it ends (quiescent within a step bound) with
 * every live node either resumed in the last round or holding the
 * work-lost verdict; the verdict exactly when no copy of some lost rank
 * survives (or nothing was committed) and no disk checkpoint exists;
 * otherwise one epoch (the highest committed among the live ranks, or the
 * disk's) everywhere, one table (the relocation of the final dead set
 * after a global round; the disk's placement), every slice running exactly
 * once, at its host in that table; a node ships and restores only copies
 * it holds; every message sent in the generation its live receiver ends
 * in was handled (none lost across a partial round or after a GO). */
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
#include "ft/ckpt/judge.h"
#include "ft/ckpt/recover.h"

#define MAXN 6
#define S 2                     /* slices per rank */
#define MAXLOC (MAXN * S)
#define QCAP 256
#define MAX_STEPS 5000
#define MAXCH 4096              /* choice points recorded per schedule */
#define MAXAPP 128              /* application messages per schedule */

enum { M_STATE, M_DECIDE, M_DONE, M_GO, M_ABORT, M_XFER, M_APP, M_MARK };

/* What the explored schedules include. */
typedef struct cfg {
    int partial;                /* a logging mode: partial and sequential rounds (model_rule) */
    uint64_t disk;              /* a disk checkpoint of this epoch exists (0: none) */
    int traffic;                /* application messages */
    int plant;                  /* a bug planted on purpose (PL_*), to show the checks catch it */
} cfg_t;
static cfg_t cfg;

enum {
    PL_NONE,
    PL_FILTER_OLD,              /* the filter takes a peer's marker of the round before as current */
    PL_NO_MARK,                 /* a global restore sends no rollback marker */
    PL_NO_DISCARD,              /* a global restore keeps the queued messages */
    PL_FILTER_STUCK,            /* a global restore leaves the filter's round where it was */
    PL_PARTIAL_DISCARD,         /* a partial round drops the survivors' queued messages */
    PL_SEQ_ALL,                 /* a sequential round restores every slice of the dead, not only the moving */
    PL_NO_DISK,                 /* the judgement ignores the disk checkpoint */
    PL_COUNT
};

typedef struct msg {
    int kind, round, flags, x; /* M_APP: x is the message's index in world_t.app */
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
    int run[MAXLOC];            /* instances of each slice running here */
    int table[MAXLOC];          /* the routing table (the epoch's until a TABLE) */
    int resumed;                /* round ended here by GO (-1: none) */
    uint64_t epoch_done;
    int flags_done;             /* the decision's PHX_CK_D_* of that round */
    uint8_t notice[MAXN];       /* failure notices not delivered yet */
    int pr;                     /* STATE flags (cr_t.pr): bit 0 restored, bit 1 ended a partial round */
    int gen;                    /* round of this node's last global restore (0: none) */
    phx_ck_filter_t filt;       /* the stale-frame filter, as the runtime keeps it */
    int inbox[MAXAPP], nin;     /* application messages let through, not handled yet */
    int sends;                  /* application messages it may still send in this generation */
} node_t;

/* An application message: sent by `from` in its generation `gen`. */
typedef struct app {
    int from, to, gen, handled;
} app_t;

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
    app_t app[MAXAPP];
    int napp;
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
typedef struct rctx rctx_t;
static void run(world_t *w, int y, phx_ck_rec_out_t *o, const rctx_t *k);

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

/* What a restore's actions work on: the new table, and what moves here. */
struct rctx {
    const int *loc, *keep;
};

/* A global restore's first steps (core/cr_recover.c restore_own, and the
 * disk path): drop the queued messages (the lost future), mark every link,
 * raise the filter's round; nothing of the node's running state is left. */
static void discard_and_mark(world_t *w, int y)
{
    node_t *d = &w->nd[y];
    if (cfg.plant != PL_NO_DISCARD)
        d->nin = 0;
    msg_t m = { .kind = M_MARK, .round = d->round };
    /* Without application traffic the markers change nothing but the
     * number of interleavings. */
    for (int r = 0; r < w->n && cfg.traffic && cfg.plant != PL_NO_MARK; r++)
        if (r != y && !d->dead[r])
            send(w, y, r, &m);
    if (cfg.plant != PL_FILTER_STUCK)
        d->filt.round = (uint64_t)d->round;
    d->gen = d->round;
    memset(d->run, 0, sizeof d->run);
}

/* ROLLBACK from disk: file i (the state rank i hosted at the disk's
 * epoch) goes to the i-th live rank, round robin. */
static void rollback_disk(world_t *w, int y, uint64_t e)
{
    node_t *d = &w->nd[y];
    int live[MAXN], nlive = 0;
    if (e != cfg.disk)
        bad(w, "rank %d restores disk epoch %llu, not the disk's", y, (unsigned long long)e);
    for (int r = 0; r < w->n; r++)
        if (!d->dead[r])
            live[nlive++] = r;
    discard_and_mark(w, y);
    for (int i = 0; i < w->nloc; i++) {
        d->table[i] = live[w->loc_e[i] % nlive];
        d->run[i] += d->table[i] == y;
    }
    phx_ck_rec_view_t v = view(w, y);
    phx_ck_rec_out_t o = { 0 };
    phx_ck_rec_restored(d->m, &v, &o);
    run(w, y, &o, NULL);
}

/* ROLLBACK: the relocation of this node's dead set (a sequential round's
 * from the table the period's first round made, moving only what the
 * newly dead host), then the machine's restore order. */
static void rollback(world_t *w, int y, uint64_t e, int flags)
{
    node_t *d = &w->nd[y];
    int loc[MAXLOC], keep[MAXLOC], lost, lb, seq = flags & PHX_CK_D_SEQ;
    d->pr |= 1;
    if (flags & PHX_CK_D_DISK) {
        rollback_disk(w, y, e);
        return;
    }
    if (e != 1 && e != 2)
        bad(w, "rank %d rolls back to epoch %llu, which it does not hold", y, (unsigned long long)e);
    if (phx_ck_relocate_p(w->n, w->nloc, seq ? d->table : w->loc_e, w->buddy_e, d->dead, 0, loc, &lost, &lb))
        return;   /* both copies of a rank are gone: the coordinator aborts */
    memcpy(keep, loc, sizeof keep);
    if (seq && cfg.plant != PL_SEQ_ALL)
        phx_ck_seq_keep(w->nloc, d->table, d->dead, loc, keep);
    uint8_t have[MAXN];
    for (int x = 0; x < w->n; x++)
        have[x] = d->xfer[x] == e;
    phx_ck_rec_tables_t t = { .nloc = w->nloc, .loc_e = w->loc_e, .buddy_e = w->buddy_e, .keep = keep, .have = have };
    phx_ck_rec_view_t v = view(w, y);
    phx_ck_rec_out_t o = { 0 };
    phx_ck_rec_restore(d->m, &v, &t, &o);
    run(w, y, &o, &(rctx_t){ .loc = loc, .keep = keep });
}

/* A logging mode's rule (the shape of a pessimistic one): one loss since
 * the epoch with nothing replayed, or two (at once, or the second after
 * every live rank ended the first's partial round); never while a round
 * is under way or after a global one. */
static int model_rule(void *arg, const uint8_t *dead, const uint8_t *since, int replayed)
{
    world_t *w = arg;
    int k = 0;
    (void)dead;
    for (int r = 0; r < w->n; r++)
        k += since[r];
    if (replayed == PHX_CK_REPLAYED_OTHER)
        return 0;
    return k == 1 ? replayed == PHX_CK_REPLAYED_NONE : k == 2;
}

static int model_disk(void *arg, uint64_t *e)
{
    (void)arg;
    if (!cfg.disk || cfg.plant == PL_NO_DISK)
        return 0;
    *e = cfg.disk;
    return 1;
}

/* The coordinator's judgement (ft/ckpt/judge.h), with the inputs the
 * runtime's glue gives it: no commit, or a rank whose two copies are gone,
 * loses the work unless the disk has a copy. */
static void judge(world_t *w, int y, uint64_t e, int summary)
{
    node_t *d = &w->nd[y];
    int loc[MAXLOC], lost = -1, lb = -1;
    int reloc = e ? phx_ck_relocate_p(w->n, w->nloc, w->loc_e, w->buddy_e, d->dead, 0, loc, &lost, &lb) : 0;
    phx_ck_judge_in_t in = { .n = w->n, .nloc = w->nloc, .dead = d->dead, .epoch = e, .summary = summary,
                             .loc_e = e ? w->loc_e : NULL, .reloc = reloc, .lost = lost, .lost_buddy = lb,
                             .disk = model_disk, .partial_ok = cfg.partial, .when = cfg.partial ? model_rule : NULL,
                             .when_arg = w, .keeps = 1 };
    phx_ck_judge_t j;
    phx_ck_judge(&in, &j);
    phx_ck_rec_view_t v = view(w, y);
    phx_ck_rec_out_t o = { 0 };
    if (j.verdict == PHX_CK_JUDGE_ABORT)
        phx_ck_rec_abort(d->m, &v, j.epoch, j.lost, j.lost_buddy, &o);
    else if (j.verdict == PHX_CK_JUDGE_DECIDE)
        phx_ck_rec_decide(d->m, &v, j.epoch, j.flags, &o);
    else
        bad(w, "the judgement waits, with no newcomer to wait for");
    run(w, y, &o, NULL);
}

/* Restores the slices of x's copy that keep puts here. */
static void restore_slices(world_t *w, int y, int x, const int *keep)
{
    for (int i = 0; i < w->nloc; i++)
        if (w->loc_e[i] == x && keep[i] == y)
            w->nd[y].run[i]++;
}

static void run(world_t *w, int y, phx_ck_rec_out_t *o, const rctx_t *k)
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
            m.flags = d->pr;
            send(w, y, a->dst, &m);
            break;
        case PHX_CK_REC_JUDGE:
            judge(w, y, a->epoch, a->flags);
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
            rollback(w, y, a->epoch, a->flags);
            break;
        case PHX_CK_REC_OWN:
            if (!(a->flags & PHX_CK_D_PARTIAL)) {
                discard_and_mark(w, y);
                restore_slices(w, y, y, w->loc_e);
            } else if (cfg.plant == PL_PARTIAL_DISCARD) {
                d->nin = 0;
            }   /* partial: survivors keep running state, queues and links */
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
            restore_slices(w, y, a->x, k->keep);
            break;
        case PHX_CK_REC_XFER:
            if (d->xfer[a->x] != a->epoch || w->buddy_e[a->x] != a->via)
                bad(w, "rank %d restores a copy of %d that was not shipped to it", y, a->x);
            restore_slices(w, y, a->x, k->keep);
            break;
        case PHX_CK_REC_TABLE:
            memcpy(d->table, k->loc, sizeof(int) * (size_t)w->nloc);
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
            d->flags_done = a->flags;
            if (a->flags & PHX_CK_D_PARTIAL)   /* ended: a later loss may be recovered from this table */
                d->pr = (d->pr & ~1) | 2;
            d->rec = d->pause_req = d->paused = 0;
            d->sends = cfg.traffic;
            memset(d->xfer, 0, sizeof d->xfer);
            break;
        default:
            bad(w, "unknown action %d", a->kind);
        }
    }
    phx_ck_rec_out_free(o);
}

/* The filter at y for an application frame from peer (planted: one that
 * takes a marker of the round before as current). */
static int filter_drop(node_t *d, int from)
{
    if (cfg.plant == PL_FILTER_OLD) {
        if (d->filt.rb_mark[from] + 1 >= d->filt.round)
            return 0;
        d->filt.dropped++;
        return 1;
    }
    return phx_ck_filter_drop(&d->filt, from);
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
        phx_ck_rec_on_report(d->m, &v, from, m->dead, m->epoch, m->flags, &o);
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
    case M_MARK:   /* core/cr.c's dispatch */
        if ((uint64_t)m->round > d->filt.rb_mark[from])
            d->filt.rb_mark[from] = (uint64_t)m->round;
        break;
    case M_APP:
        if (!filter_drop(d, from))
            d->inbox[d->nin++] = m->x;
        break;
    }
    run(w, y, &o, NULL);
}

/* The workers run (they handle and send): no pause asked, or not parked yet. */
static int running(const node_t *d)
{
    return d->alive && !d->ended && !(d->pause_req && d->paused);
}

/* An application message from y to `to`, in y's generation. */
static void app_send(world_t *w, int y, int to)
{
    if (w->napp == MAXAPP) {
        bad(w, "more than %d application messages", MAXAPP);
        return;
    }
    int id = w->napp++;
    w->app[id] = (app_t){ .from = y, .to = to, .gen = w->nd[y].gen };
    msg_t m = { .kind = M_APP, .x = id };
    send(w, y, to, &m);
}

/* y's application sends its next message: to the next rank live in its view. */
static void app_next(world_t *w, int y)
{
    node_t *d = &w->nd[y];
    d->sends--;
    for (int i = 1; i < w->n; i++)
        if (!d->dead[(y + i) % w->n]) {
            app_send(w, y, (y + i) % w->n);
            return;
        }
}

/* y's application handles its oldest message let through. */
static void app_handle(world_t *w, int y)
{
    node_t *d = &w->nd[y];
    app_t *a = &w->app[d->inbox[0]];
    memmove(d->inbox, d->inbox + 1, sizeof(int) * (size_t)--d->nin);
    TR("  %d handles %d->%d gen %d\n", y, a->from, a->to, a->gen);
    if (a->gen < d->gen)
        bad(w, "rank %d handles rank %d's message of generation %d after restoring in round %d", y, a->from, a->gen,
            d->gen);
    else if (a->gen > d->gen)
        bad(w, "rank %d handles rank %d's message of generation %d before restoring in that round", y, a->from,
            a->gen);
    a->handled++;
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
        assert_int_equal(phx_ck_filter_init(&d->filt, n), 0);
        d->alive = 1;
        d->resumed = -1;
        d->committed = committed[r];
        memcpy(d->table, w->loc_e, sizeof d->table);
        for (int i = 0; i < w->nloc; i++)
            d->run[i] = w->loc_e[i] == r;
    }
    /* Messages on the links when the failure strikes (the lost future
     * after a global rollback; kept across a partial one). */
    for (int r = 0; cfg.traffic && r < n; r++) {
        app_send(w, r, (r + 1) % n);
        app_send(w, r, (r + n - 1) % n);
    }
}

static void teardown(world_t *w)
{
    for (int r = 0; r < w->n; r++) {
        phx_ck_rec_destroy(w->nd[r].m);
        phx_ck_filter_free(&w->nd[r].filt);
    }
}

/* One enabled event, chosen by the scheduler; 0 when none is left. */
static int step(world_t *w)
{
    int ev[MAXN * (2 * MAXN + 3)][3], k = 0;
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
        if (running(d) && d->sends > 0)
            ev[k][0] = 3, ev[k][1] = -1, ev[k++][2] = y;
        if (running(d) && d->nin > 0)
            ev[k][0] = 4, ev[k][1] = -1, ev[k++][2] = y;
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
    } else if (e[0] == 2) {
        w->nd[y].paused = 1;
        progress(w, y);
    } else if (e[0] == 3) {
        app_next(w, y);
    } else {
        app_handle(w, y);
    }
    return 1;
}

/* How the schedules ended (the last round's PHX_CK_D_* flags; 8: the
 * work-lost verdict) and what the filter did, to show what was covered. */
static long ended[9], handled, dropped;

static void check_end(world_t *w)
{
    int ndead = 0, unrec = 0, table[MAXLOC], lost, lb, live[MAXN], nlive = 0;
    uint8_t dead[MAXN] = { 0 };
    uint64_t e = 0;
    for (int r = 0; r < w->n; r++) {
        dead[r] = !w->nd[r].alive;
        ndead += dead[r];
        if (!dead[r])
            live[nlive++] = r;
        if (!dead[r] && w->nd[r].committed > e)
            e = w->nd[r].committed;
    }
    unrec = !e || phx_ck_relocate(w->n, w->nloc, w->loc_e, w->buddy_e, dead, table, &lost, &lb);
    int disk = unrec && cfg.disk;
    if (disk) {   /* the disk's epoch and placement */
        e = cfg.disk;
        for (int i = 0; i < w->nloc; i++)
            table[i] = live[w->loc_e[i] % nlive];
    }
    int run[MAXLOC] = { 0 }, flags = -1;
    const node_t *first = NULL;
    for (int r = 0; r < w->n && !w->fail; r++) {
        node_t *d = &w->nd[r];
        if (dead[r])
            continue;
        if (unrec && !disk) {
            if (!d->ended)
                bad(w, "work lost but rank %d has no verdict", r);
            continue;
        }
        if (d->ended)
            bad(w, "rank %d took the work-lost verdict while %s", r, disk ? "a disk copy exists" : "every copy survives");
        else if (d->resumed != ndead || d->rec)
            bad(w, "rank %d did not end the last round (resumed %d of %d)", r, d->resumed, ndead);
        else if (d->epoch_done != e)
            bad(w, "rank %d rolled back to epoch %llu, not %llu", r, (unsigned long long)d->epoch_done,
                (unsigned long long)e);
        else if (flags >= 0 && d->flags_done != flags)
            bad(w, "rank %d ended a round decided with flags %d, another with %d", r, d->flags_done, flags);
        else if (!(d->flags_done & PHX_CK_D_SEQ) && memcmp(d->table, table, sizeof(int) * (size_t)w->nloc))
            bad(w, "rank %d routes by another table", r);
        else if (first && memcmp(d->table, first->table, sizeof(int) * (size_t)w->nloc))
            bad(w, "ranks %d and %d route by different tables", (int)(first - w->nd), r);
        flags = d->flags_done;
        first = d;
        for (int i = 0; i < w->nloc; i++) {
            run[i] += d->run[i];
            if (d->run[i] && d->table[i] != r)
                bad(w, "slice %d runs at %d, not at its host %d", i, r, d->table[i]);
        }
    }
    ended[unrec && !disk ? 8 : flags & 7]++;
    for (int r = 0; r < w->n; r++)
        dropped += (long)w->nd[r].filt.dropped;
    for (int i = 0; i < w->napp; i++)
        handled += w->app[i].handled;
    for (int i = 0; i < w->nloc && (!unrec || disk); i++)
        if (run[i] != 1)
            bad(w, "slice %d runs %d times", i, run[i]);
    /* Nothing sent in the generation its receiver ends in is lost (a dead
     * sender's messages after the notice are the transport's to drop: the
     * replay sends them again). */
    for (int i = 0; i < w->napp && (!unrec || disk) && !w->fail; i++) {
        const app_t *a = &w->app[i];
        if (!dead[a->from] && !dead[a->to] && a->gen == w->nd[a->to].gen && !a->handled)
            bad(w, "rank %d's message to %d of generation %d was lost", a->from, a->to, a->gen);
    }
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
/* Set: a failing schedule is recorded in caught[] (a planted bug), not a
 * test failure; exploring stops at it. */
static int expect_fail;
static char caught[320];

/* Every schedule of (n, commits, v1, v2 at p2) the chooser enumerates. */
static void explore(int n, const uint64_t *committed, int v1, int v2, int p2, int bound, uint64_t seed)
{
    if (expect_fail && caught[0])
        return;
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
        if (why[0] && expect_fail) {
            snprintf(caught, sizeof caught, "%s", why);
            return;
        }
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
    if (why[0] && expect_fail && !caught[0])
        snprintf(caught, sizeof caught, "%s", why);
    else if (why[0] && !expect_fail)
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

/* A second failure (every victim) before every event of the first one's
 * schedule, n = 4..nmax, for the commit patterns [c0, c1); exhaustive
 * over the first `bound` choices (n = 4: one more), seeded after. */
static void two_failures(int nmax, int c0, int c1, int bound, uint64_t seeds)
{
    for (int n = 4; n <= nmax; n++)
        for (int c = c0; c < c1; c++)
            for (int v1 = 0; v1 < n; v1++)
                for (uint64_t seed = 1; seed <= seeds; seed++) {
                    int len = length(n, commits[c], v1, seed);
                    for (int v2 = 0; v2 < n; v2++)
                        for (int p2 = 0; v2 != v1 && p2 <= len; p2++)
                            explore(n, commits[c], v1, v2, p2, n == 4 ? bound + 1 : bound, seed);
                }
}

/* n = 4..6, a second failure (every victim) before every event of the
 * first one's schedule; exhaustive over the first choices, seeded after. */
static void test_two_failures_every_position(void **st)
{
    (void)st;
    long before = nsched;
    two_failures(MAXN, 0, NCOMMITS, 2, 2);
    print_message("two failures, n=4..6: %ld schedules\n", nsched - before);
}

static int full(void) { return getenv("PHX_TEST_RECOVER_FULL") != NULL; }

/* What the schedules since the last call ended with (what NULL: forget it). */
static void covered(const char *what)
{
    if (what)
        print_message("  %s ended: %ld global, %ld partial, %ld sequential, %ld from disk, %ld work lost; "
                  "%ld messages handled, %ld stale ones dropped\n",
                  what, ended[0], ended[PHX_CK_D_PARTIAL], ended[PHX_CK_D_PARTIAL | PHX_CK_D_SEQ],
                  ended[PHX_CK_D_DISK], ended[8], handled, dropped);
    memset(ended, 0, sizeof ended);
    handled = dropped = 0;
}

/* One failure of each rank on 4 nodes, for the commit patterns [c0, c1):
 * exhaustive over the first `bound` choices, for each seed. */
static void one_failure(int c0, int c1, int bound, uint64_t seeds)
{
    for (int v1 = 0; v1 < 4; v1++)
        for (int c = c0; c < c1; c++)
            for (uint64_t seed = 1; seed <= seeds; seed++)
                explore(4, commits[c], v1, -1, -1, bound, seed);
}

/* Application traffic across global rounds: messages in flight at the
 * failure, and after each GO. One failure on 4 nodes; two failures at
 * every position on 4 and 5 nodes (with PHX_TEST_RECOVER_FULL=1: deeper,
 * and n = 6). */
static void test_traffic_global(void **st)
{
    (void)st;
    long before = nsched;
    cfg = (cfg_t){ .traffic = 1 };
    covered(NULL);
    one_failure(1, 3, full() ? 5 : 4, full() ? 4 : 2);
    print_message("traffic, one failure, n=4: %ld schedules\n", nsched - before);
    covered("they");
    before = nsched;
    two_failures(full() ? MAXN : 5, 1, 3, 1, full() ? 2 : 1);
    print_message("traffic, two failures: %ld schedules\n", nsched - before);
    covered("they");
    cfg = (cfg_t){ 0 };
}

/* A logging mode: the first loss recovered partially; a second one during
 * its round falls back to a global round, after it (every live rank
 * ended it) a sequential partial round, at once (nobody restored yet) a
 * partial round for both. With traffic. */
static void test_traffic_partial_rounds(void **st)
{
    (void)st;
    long before = nsched;
    cfg = (cfg_t){ .partial = 1, .traffic = 1 };
    covered(NULL);
    one_failure(2, 3, full() ? 5 : 4, full() ? 4 : 2);
    print_message("partial, one failure, n=4: %ld schedules\n", nsched - before);
    covered("they");
    before = nsched;
    two_failures(full() ? MAXN : 5, 1, 4, 1, full() ? 2 : 1);
    print_message("partial, two failures: %ld schedules\n", nsched - before);
    covered("they");
    cfg = (cfg_t){ 0 };
}

/* A disk checkpoint of epoch 1: a rank and its buddy both lost (at once,
 * or the second during or after the first's round) restore from it. */
static void test_traffic_disk_fallback(void **st)
{
    (void)st;
    long before = nsched;
    covered(NULL);
    cfg = (cfg_t){ .disk = 1, .traffic = 1 };
    two_failures(full() ? MAXN : 5, 1, 4, 1, full() ? 2 : 1);
    cfg = (cfg_t){ .disk = 1, .traffic = 1, .partial = 1 };
    two_failures(4, 2, 3, 1, 1);
    print_message("disk, two failures: %ld schedules\n", nsched - before);
    covered("they");
    cfg = (cfg_t){ 0 };
}

/* Each planted bug fails some schedule of the exploration that covers it. */
static void test_planted_bugs_caught(void **st)
{
    (void)st;
    static const char *name[PL_COUNT] = {
        [PL_FILTER_OLD] = "filter takes the round before's marker",
        [PL_NO_MARK] = "no rollback marker",
        [PL_NO_DISCARD] = "queues kept at a global restore",
        [PL_FILTER_STUCK] = "filter round not raised",
        [PL_PARTIAL_DISCARD] = "queues dropped in a partial round",
        [PL_SEQ_ALL] = "sequential round restores every slice",
        [PL_NO_DISK] = "disk checkpoint ignored",
    };
    long before = nsched;
    covered(NULL);
    expect_fail = 1;
    for (int p = PL_NONE + 1; p < PL_COUNT; p++) {
        caught[0] = 0;
        cfg = (cfg_t){ .traffic = 1, .plant = p, .partial = p == PL_PARTIAL_DISCARD || p == PL_SEQ_ALL,
                       .disk = p == PL_NO_DISK };
        two_failures(4, 1, 3, 1, 1);
        print_message("planted: %s: %s\n", name[p], caught[0] ? caught : "NOT CAUGHT");
        if (!caught[0])
            fail_msg("planted bug not caught: %s", name[p]);
    }
    expect_fail = 0;
    cfg = (cfg_t){ 0 };
    print_message("planted bugs: %ld schedules\n", nsched - before);
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

/* No argument: the round alone and the planted bugs; "traffic": the runs
 * with application traffic, partial rounds and a disk checkpoint (two
 * ctest entries, each within a couple of minutes on a loaded machine). */
int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_restart_without_report),
        cmocka_unit_test(test_judge_summary),
        cmocka_unit_test(test_one_failure_exhaustive),
        cmocka_unit_test(test_one_failure_seeded),
        cmocka_unit_test(test_two_failures_every_position),
        cmocka_unit_test(test_traffic_global),
        cmocka_unit_test(test_traffic_partial_rounds),
        cmocka_unit_test(test_traffic_disk_fallback),
        cmocka_unit_test(test_planted_bugs_caught),
    };
    if (getenv("PHX_TEST_RECOVER_ONLY"))   /* one test by name (cmocka's pattern) */
        cmocka_set_test_filter(getenv("PHX_TEST_RECOVER_ONLY"));
    else if (argc > 1 && !strcmp(argv[1], "traffic"))
        cmocka_set_test_filter("test_traffic_*");
    else
        cmocka_set_skip_filter("test_traffic_*");
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    print_message("recovery round explorer: %ld schedules in all\n", nsched);
    return rc;
}
