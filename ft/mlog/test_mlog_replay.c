/* Message logging's replay order under a deterministic explorer: the
 * restarted task must deliver exactly the order its determinants recorded.
 *
 * Model. n nodes, one task each (task id = rank + 1); node 0 is the victim.
 * Every survivor sends K application messages to the victim and P to the
 * next survivor; the victim, after each even-numbered delivery, sends one
 * message (its order-sensitive hash so far) to the survivors in turn, so
 * some of its last deliveries stay undetermined (no frame carried their
 * dets). Links are FIFO; the explorer picks which link delivers next (the
 * victim delivers in that arrival order) and when survivors send. The
 * victim fails once, at every event position: its state goes back to the
 * checkpoint (nothing delivered), every frame to or from it is lost, and
 * it restarts as incarnation 2. Each survivor, at a step of its own, hands
 * back (Alg. 5 of "Scalable Message-Logging Techniques for Effective Fault
 * Tolerance in HPC Applications" (Meneses)) the dets it stores for the
 * victim's task in one RDETS frame, then its logged messages to it, then
 * RDONE, all on its FIFO link; until then its link to the victim is down
 * (what it sends is logged and lost on the wire). The victim releases its
 * replay once every survivor's RDONE arrived. Causal: the victim's frames
 * carry its unacknowledged dets (the trailer). Pessimistic: its sends wait
 * until node 1 acknowledged a det-only flush of every det made so far
 * (phx_ml_gate_snap / phx_ml_gate_open, pb_store's ack, phx_ml_on_ack).
 *
 * The real pure structures do the work: per node a phx_ml_t (scml.h: the
 * sender log, phx_ml_admit making each det in the worker's det queue
 * (detq.h), the det trailer of every frame via phx_ml_pb_encode_to /
 * phx_ml_pb_store, the hand-back via phx_ml_restart_dets / _msgs), the
 * RDETS body in msg.h's det encoding, and the restored task's record
 * (phx_ml_task_restore / install / release, admission through
 * phx_ml_admit). What the model writes itself is the runtime's worker
 * (core/worker.c's deliver): per-sender SSN streams (a message at or below
 * the last delivered SSN is a duplicate; one past a gap or not admitted
 * waits in the held set, one copy per <src, ssn>) and, after each delivery,
 * offering the held messages again. mlog-fast's duplicate filter (dupf.h)
 * plays no part: it serves receive-deterministic tasks, which make no dets.
 *
 * Exhaustive: a stateless depth-first search that re-executes each path
 * from the start, with sleep sets (two events commute when they touch
 * disjoint nodes and links; the failure touches everything, so it is tried
 * at every position of every explored order). Checked in every schedule:
 *   - every det handed back names the original delivery of its rsn;
 *   - the replayed order equals the original one for the determined prefix
 *     (rsn 1..D, D the highest rsn handed back);
 *   - no message delivered twice, none lost (the restarted victim delivers
 *     each of the K(n-1) messages exactly once, survivors each of theirs);
 *   - no orphan: what the victim sends again carries, at each SSN a
 *     survivor already received, the same content;
 *   - every schedule ends (bounded steps) with the replay released and
 *     ended and nothing held.
 * Built again with PHX_ML_REPLAY_MUTANT: 1, the glue admits by arrival
 * (the installed dets ignored); 2, the replay released at the first RDONE
 * (a survivor's dets may still be on their way); the same explorer must
 * find replay-order violations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <malloc.h>

#include "base/phx_err.h"
#include "base/phx_wire.h"
#include "ft/mlog/msg.h"
#include "ft/mlog/scml.h"

#ifndef PHX_ML_REPLAY_MUTANT
#define PHX_ML_REPLAY_MUTANT 0
#endif

enum { NMAX = 4, QMAX = 16, LMAX = 32, HMAX = 32, PBMAX = 160, DMAX = 32, TMAX = 96, EMAX = 32 };

enum { V_NONE, V_DET, V_ORDER, V_DUP, V_LOST, V_ORPHAN, V_STUCK, V_GAP, V_MODEL, V_N };
static const char *VNAME[] = { "none", "det names another delivery", "replayed order differs",
                               "message delivered twice", "message lost", "orphan (re-sent content differs)",
                               "schedule did not end cleanly", "release found a gap", "model overflow" };

/* Coverage: what the explorer must have reached (each in some schedule). */
enum { C_HELD, C_PARTIAL, C_WHOLE, C_FRESH, C_SURV_DUP, C_N };
static const char *CNAME[] = { "replay held a message that arrived early", "prefix partly determined (0 < D < delivered)",
                               "every delivery determined", "fresh deliveries after the replay",
                               "survivor dropped a re-sent message" };
static uint64_t cover[C_N];
static unsigned reached;

enum { F_APP, F_RDETS, F_RDONE, F_DETS, F_ACK };

typedef struct {
    int kind, from;
    uint64_t ssn, pay;
    uint32_t pblen;             /* det trailer (APP frames) or RDETS body */
    uint8_t pb[PBMAX];
} frame_t;

typedef struct {
    frame_t f[QMAX];
    int h, t;
    int down;                   /* survivor -> victim before its hand-back */
} link_t;

typedef struct {
    int src;
    uint64_t ssn, pay;
} held_t;

typedef struct {
    phx_ml_t *ml;
    phx_ml_task_t mt;
    uint64_t in_ssn[NMAX], out_ssn[NMAX];
    held_t held[HMAX];
    int nheld;
    uint64_t h;                 /* order-sensitive digest of the deliveries */
    int lsrc[LMAX];             /* deliveries of this incarnation, in order */
    uint64_t lssn[LMAX];
    int nl;
    int sent_v, sent_p;         /* fresh messages sent to the victim, to the peer */
    int handed, rdone;
    uint64_t got[LMAX];         /* survivors: payload of the victim's message by SSN */
} node_t;

typedef struct {
    int n, K, P;
    int pess;                   /* mlog-pessimistic: the victim's dets reach node 1 before its sends leave */
} cfg_t;

enum { E_SENDV, E_SENDP, E_ARRIVE, E_FAIL, E_HANDBACK };
typedef struct {
    int type, a, b;             /* SENDV/SENDP/HANDBACK: node a; ARRIVE: link a -> b */
} ev_t;

typedef struct {
    cfg_t c;
    node_t nd[NMAX];
    link_t ln[NMAX][NMAX];
    int failed;
    int l1src[LMAX];            /* the victim's first incarnation's order */
    uint64_t l1ssn[LMAX];
    int nl1;
    uint64_t dmax;              /* highest rsn handed back */
    frame_t pend[QMAX];         /* pessimistic: the victim's sends waiting for their dets' ack */
    int pdst[QMAX], npend;
    uint64_t psnap[QMAX];
    unsigned viol;              /* violations seen, a bit per V_ kind */
} world_t;

static world_t W;
static uint64_t found[V_N], bad, schedules, failpos, nodes_run, det_prefix_sum, det_prefix_max;

static uint64_t tid(int r) { return (uint64_t)r + 1; }

static void violate(int v)
{
    W.viol |= 1u << v;
}

static int model_broke(void) { return (W.viol >> V_MODEL) & 1; }

static uint64_t mix(uint64_t h, uint64_t x)
{
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static phx_ml_t *mk_ml(int rank, uint32_t inc)
{
    phx_ml_cfg_t c = { .rank = rank, .n = W.c.n, .inc = inc, .nq = 1, .qcap = 64, .pessimistic = W.c.pess };
    return phx_ml_create(&c);
}

static void push(int a, int b, const frame_t *f)
{
    link_t *l = &W.ln[a][b];
    if (l->t == QMAX) {
        violate(V_MODEL);
        return;
    }
    l->f[l->t++] = *f;
}

/* Node a sends an application message to b: logged, the det trailer for
 * that link attached (causal: every unacknowledged det not yet sent to b). */
static void send_app(int a, int b, uint64_t pay)
{
    node_t *x = &W.nd[a];
    frame_t f = { .kind = F_APP, .from = a, .ssn = ++x->out_ssn[b], .pay = pay };
    if (phx_ml_log(x->ml, b, tid(a), tid(b), f.ssn, 0, &pay, sizeof pay) < 0) {
        violate(V_MODEL);
        return;
    }
    /* Only the victim's trailers matter: survivors never fail, so their
     * own dets are never handed back (and leaving them off keeps a
     * survivor's sends independent of its deliveries). Pessimistic: no
     * trailer, the message waits until node 1 acknowledged every det
     * made so far (a det-only flush there and its ack). */
    if (a == 0 && W.c.pess) {
        uint64_t snap;
        phx_ml_gate_snap(x->ml, &snap);
        if (W.npend == QMAX) {
            violate(V_MODEL);
            return;
        }
        if (!W.npend && phx_ml_gate_open(x->ml, &snap)) {
            push(a, b, &f);
            return;
        }
        frame_t fl = { .kind = F_DETS, .from = 0 };
        long k = phx_ml_pb_encode_to(x->ml, 1, fl.pb, sizeof fl.pb);
        if (k < 0) {
            violate(V_MODEL);
            return;
        }
        fl.pblen = (uint32_t)k;
        if (k)
            push(0, 1, &fl);
        W.pend[W.npend] = f;
        W.pdst[W.npend] = b;
        W.psnap[W.npend++] = snap;
        return;
    }
    long k = a == 0 && !W.c.pess ? phx_ml_pb_encode_to(x->ml, b, f.pb, sizeof f.pb) : 0;
    if (k < 0) {
        violate(V_MODEL);
        return;
    }
    f.pblen = (uint32_t)k;
    if (!W.ln[a][b].down)
        push(a, b, &f);
}

/* The application: the victim's handler sends its digest after every
 * even-numbered delivery; survivors record what the victim told them. */
static void run_handler(int b, int src, uint64_t ssn, uint64_t pay)
{
    node_t *x = &W.nd[b];
    if (x->nl == LMAX) {
        violate(V_MODEL);
        return;
    }
    x->lsrc[x->nl] = src;
    x->lssn[x->nl++] = ssn;
    x->h = mix(mix(x->h, tid(src)), ssn);
    if (b == 0) {
        if (x->nl % 2 == 0)
            send_app(0, 1 + (x->nl / 2 - 1) % (W.c.n - 1), x->h);
    } else if (src == 0 && ssn <= LMAX) {
        x->got[ssn - 1] = pay;
    }
}

/* The worker's admission: the victim's restored task through its replay
 * record, everyone's fresh deliveries making their det. */
static int admit(int b, int src, uint64_t ssn)
{
    node_t *x = &W.nd[b];
    uint64_t rsn;
    int rc = phx_ml_admit(x->ml, 0, &x->mt, tid(src), tid(b), ssn, &rsn);
    if (rc < 0) {
        violate(V_MODEL);
        return 0;
    }
    return rc == PHX_ML_DELIVER;
}

static void retry_held(int b)
{
    node_t *x = &W.nd[b];
    for (int progressed = 1; progressed && !model_broke();) {
        progressed = 0;
        for (int i = 0; i < x->nheld; i++) {
            held_t m = x->held[i];
            if (m.ssn != x->in_ssn[m.src] + 1 || !admit(b, m.src, m.ssn))
                continue;
            x->held[i] = x->held[--x->nheld];
            x->in_ssn[m.src] = m.ssn;
            run_handler(b, m.src, m.ssn, m.pay);
            progressed = 1;
            break;
        }
    }
}

static void deliver(int b, int src, uint64_t ssn, uint64_t pay)
{
    node_t *x = &W.nd[b];
    if (ssn <= x->in_ssn[src]) {
        /* A duplicate: the victim's re-execution must say the same. */
        if (b != 0 && src == 0 && ssn <= LMAX && x->got[ssn - 1] != pay)
            violate(V_ORPHAN);
        if (b != 0 && src == 0)
            reached |= 1u << C_SURV_DUP;
        return;
    }
    if (ssn > x->in_ssn[src] + 1 || !admit(b, src, ssn)) {
        if (b == 0 && x->mt.replaying)
            reached |= 1u << C_HELD;
        for (int i = 0; i < x->nheld; i++)
            if (x->held[i].src == src && x->held[i].ssn == ssn)
                return;     /* a second copy of a re-sent message */
        if (x->nheld == HMAX) {
            violate(V_MODEL);
            return;
        }
        x->held[x->nheld++] = (held_t){ src, ssn, pay };
        return;
    }
    x->in_ssn[src] = ssn;
    run_handler(b, src, ssn, pay);
    retry_held(b);
}

static void arrive(int a, int b)
{
    link_t *l = &W.ln[a][b];
    frame_t f = l->f[l->h++];
    node_t *x = &W.nd[b];
    if (f.kind == F_APP) {
        if (f.pblen && phx_ml_pb_store(x->ml, a, f.pb, f.pblen, NULL) < 0)
            violate(V_MODEL);
        deliver(b, a, f.ssn, f.pay);
    } else if (f.kind == F_DETS) {
        /* Node 1 stores the victim's flush and acks it at once. */
        static uint8_t ack[PHX_ML_ACK_MAX];
        long k = phx_ml_pb_store(x->ml, a, f.pb, f.pblen, ack);
        frame_t r = { .kind = F_ACK, .from = b };
        if (k < 0 || k > (long)sizeof r.pb) {
            violate(V_MODEL);
            return;
        }
        memcpy(r.pb, ack, (size_t)k);
        r.pblen = (uint32_t)k;
        if (k && !W.ln[b][a].down)
            push(b, a, &r);
    } else if (f.kind == F_ACK) {
        if (phx_ml_on_ack(x->ml, f.pb, f.pblen) < 0)
            violate(V_MODEL);
        /* The gated sends leave in order, as far as their dets are acked. */
        int i = 0;
        while (i < W.npend && phx_ml_gate_open(x->ml, &W.psnap[i])) {
            push(0, W.pdst[i], &W.pend[i]);
            i++;
        }
        memmove(W.pend, W.pend + i, (size_t)(W.npend - i) * sizeof W.pend[0]);
        memmove(W.pdst, W.pdst + i, (size_t)(W.npend - i) * sizeof W.pdst[0]);
        memmove(W.psnap, W.psnap + i, (size_t)(W.npend - i) * sizeof W.psnap[0]);
        W.npend -= i;
    } else if (f.kind == F_RDETS) {
        phx_wdec_t d;
        phx_wdec_init(&d, f.pb, f.pblen);
        for (uint32_t i = 0; i < f.pblen / PHX_ML_DET_LEN; i++) {
            phx_det_t det;
            if (phx_ml_det_dec(&d, &det) || phx_ml_task_install(&x->mt, &det) < 0)
                violate(V_MODEL);
        }
        retry_held(b);
    } else {
        x->rdone++;
        if (x->rdone == (PHX_ML_REPLAY_MUTANT == 2 ? 1 : W.c.n - 1)) {
            if (phx_ml_task_release(&x->mt) < 0)
                violate(V_GAP);
            retry_held(b);
        }
    }
}

static void fail_victim(void)
{
    node_t *v = &W.nd[0];
    W.failed = 1;
    memcpy(W.l1src, v->lsrc, sizeof W.l1src);
    memcpy(W.l1ssn, v->lssn, sizeof W.l1ssn);
    W.nl1 = v->nl;
    W.npend = 0;                /* the gated sends die with it */
    phx_ml_destroy(v->ml);
    phx_ml_task_free(&v->mt);
    memset(v, 0, sizeof *v);
    if (!(v->ml = mk_ml(0, 2)))
        violate(V_MODEL);
    if (PHX_ML_REPLAY_MUTANT != 1)
        phx_ml_task_restore(&v->mt, 0);   /* from the checkpoint: rsn 0 */
    for (int r = 1; r < W.c.n; r++) {
        W.ln[0][r].h = W.ln[0][r].t = 0;
        W.ln[r][0].h = W.ln[r][0].t = 0;
        W.ln[r][0].down = 1;
        phx_ml_set_inc(W.nd[r].ml, 0, 2);
    }
}

typedef struct {
    int s;
    frame_t dets;
} hb_t;

static int hb_lost(void *arg, uint64_t t)
{
    (void)arg;
    return t == tid(0);
}

static void hb_det(void *arg, const phx_det_t *d)
{
    hb_t *h = arg;
    if (h->dets.pblen + PHX_ML_DET_LEN > sizeof h->dets.pb) {
        violate(V_MODEL);
        return;
    }
    /* The stored copy must name the delivery it recorded. */
    if (d->rsn < 1 || d->rsn > (uint64_t)W.nl1 || d->sender != tid(W.l1src[d->rsn - 1]) ||
        d->ssn != W.l1ssn[d->rsn - 1])
        violate(V_DET);
    if (d->rsn > W.dmax)
        W.dmax = d->rsn;
    phx_wenc_t e;
    phx_wenc_init(&e, h->dets.pb + h->dets.pblen, PHX_ML_DET_LEN);
    phx_ml_det_enc(&e, d);
    h->dets.pblen += PHX_ML_DET_LEN;
}

static void hb_msg(void *arg, const phx_ml_entry_t *e)
{
    hb_t *h = arg;
    uint64_t pay;
    memcpy(&pay, e->payload, sizeof pay);
    frame_t f = { .kind = F_APP, .from = h->s, .ssn = e->ssn, .pay = pay };
    push(h->s, 0, &f);
}

static void handback(int s)
{
    hb_t h = { .s = s, .dets = { .kind = F_RDETS, .from = s } };
    W.nd[s].handed = 1;
    W.ln[s][0].down = 0;
    phx_ml_restart_cb_t dcb = { &h, hb_lost, hb_det, NULL };
    phx_ml_restart_dets(W.nd[s].ml, &dcb);
    push(s, 0, &h.dets);
    phx_ml_restart_cb_t mcb = { &h, hb_lost, NULL, hb_msg };
    phx_ml_restart_msgs(W.nd[s].ml, &mcb);
    frame_t done = { .kind = F_RDONE, .from = s };
    push(s, 0, &done);
}

static int peer_of(int s) { return s == W.c.n - 1 ? 1 : s + 1; }

static int enabled(ev_t *ev)
{
    int k = 0;
    if (model_broke())
        return 0;
    for (int s = 1; s < W.c.n; s++) {
        if (W.nd[s].sent_v < W.c.K)
            ev[k++] = (ev_t){ E_SENDV, s, 0 };
        if (W.c.n > 2 && W.nd[s].sent_p < W.c.P)
            ev[k++] = (ev_t){ E_SENDP, s, 0 };
        if (W.failed && !W.nd[s].handed)
            ev[k++] = (ev_t){ E_HANDBACK, s, 0 };
    }
    for (int a = 0; a < W.c.n; a++)
        for (int b = 0; b < W.c.n; b++)
            if (W.ln[a][b].h < W.ln[a][b].t)
                ev[k++] = (ev_t){ E_ARRIVE, a, b };
    if (!W.failed)
        ev[k++] = (ev_t){ E_FAIL, 0, 0 };
    return k;
}

static void step(const ev_t *e)
{
    switch (e->type) {
    case E_SENDV:
        W.nd[e->a].sent_v++;
        send_app(e->a, 0, 0);
        break;
    case E_SENDP:
        W.nd[e->a].sent_p++;
        send_app(e->a, peer_of(e->a), 0);
        break;
    case E_ARRIVE:
        arrive(e->a, e->b);
        break;
    case E_FAIL:
        fail_victim();
        break;
    case E_HANDBACK:
        handback(e->a);
        break;
    }
}

/* What an event touches, as bits: the victim is bit 0; a survivor s is
 * two objects, its receiving side (bit s: streams, held set, det queue,
 * stored dets) and its sending side (bit NMAX + s: SSNs, sender log);
 * link a -> b is bit 2 * NMAX + a * NMAX + b. Events touching disjoint
 * sets commute. A delivery at the victim may make it send on any of its
 * links; a survivor's handler sends nothing. */
static uint64_t link_bit(int a, int b) { return 1ull << (2 * NMAX + a * NMAX + b); }

static uint64_t touches(const ev_t *e)
{
    uint64_t m = 0;
    switch (e->type) {
    case E_SENDV:
        return 1ull << (NMAX + e->a) | link_bit(e->a, 0);
    case E_SENDP:
        return 1ull << (NMAX + e->a) | link_bit(e->a, peer_of(e->a));
    case E_HANDBACK:
        return 1ull << e->a | 1ull << (NMAX + e->a) | link_bit(e->a, 0);
    case E_ARRIVE:
        m = 1ull << e->b | link_bit(e->a, e->b);
        if (W.c.pess && e->a == 0)
            m |= link_bit(e->b, 0);     /* the buddy's ack */
        if (e->b == 0)
            for (int c = 1; c < W.c.n; c++)
                m |= link_bit(0, c);
        return m;
    default:
        return ~0ull;
    }
}

static int same(const ev_t *x, const ev_t *y) { return x->type == y->type && x->a == y->a && x->b == y->b; }

static void reset(const cfg_t *cp)
{
    cfg_t c0 = *cp, *c = &c0;   /* cp may point into W */
    for (int r = 0; r < NMAX; r++) {
        phx_ml_destroy(W.nd[r].ml);
        phx_ml_task_free(&W.nd[r].mt);
    }
    memset(&W, 0, sizeof W);
    W.c = *c;
    for (int r = 0; r < c->n; r++)
        if (!(W.nd[r].ml = mk_ml(r, 1)))
            violate(V_MODEL);
}

/* Every schedule's end: the properties of the header. */
static void check_end(void)
{
    int n = W.c.n, K = W.c.K;
    node_t *v = &W.nd[0];
    if (!W.failed) {
        violate(V_STUCK);
        return;
    }
    if (W.dmax > (uint64_t)v->nl)
        violate(V_ORDER);
    for (uint64_t i = 0; i < W.dmax && i < (uint64_t)v->nl; i++)
        if (v->lsrc[i] != W.l1src[i] || v->lssn[i] != W.l1ssn[i])
            violate(V_ORDER);
    /* Each of the K(n-1) messages exactly once. */
    int seen[NMAX][LMAX] = { { 0 } };
    for (int i = 0; i < v->nl; i++) {
        if (v->lssn[i] < 1 || v->lssn[i] > (uint64_t)K || v->lsrc[i] < 1) {
            violate(V_DUP);
            continue;
        }
        if (seen[v->lsrc[i]][v->lssn[i] - 1]++)
            violate(V_DUP);
    }
    for (int s = 1; s < n; s++)
        for (int k = 0; k < K; k++)
            if (!seen[s][k])
                violate(V_LOST);
    if (v->nheld || v->mt.replaying || (PHX_ML_REPLAY_MUTANT != 1 && !v->mt.released))
        violate(V_STUCK);
    /* Survivors: every victim message (one per two of its deliveries)
     * and every peer message, once each. */
    uint64_t want[NMAX] = { 0 };
    for (int c = 2; c <= K * (n - 1); c += 2)
        want[1 + (c / 2 - 1) % (n - 1)]++;
    for (int s = 1; s < n; s++) {
        node_t *x = &W.nd[s];
        if (x->nheld)
            violate(V_STUCK);
        if (x->in_ssn[0] != want[s])
            violate(V_LOST);
        if (n > 2) {
            int from = s == 1 ? n - 1 : s - 1;
            if (x->in_ssn[from] != (uint64_t)W.c.P)
                violate(V_LOST);
        }
    }
}

/* Sleep-set DFS over schedules, each prefix re-executed from the start. */
static ev_t path[TMAX];

static void replay_path(int depth)
{
    reset(&W.c);
    reached = 0;
    for (int i = 0; i < depth; i++)
        step(&path[i]);
    nodes_run++;
}

static void dfs(int depth, const ev_t *sleep, int nsleep)
{
    ev_t en[EMAX];
    replay_path(depth);
    int k = enabled(en);
    if (model_broke() || depth == TMAX || k == 0) {
        if (depth == TMAX)
            violate(V_STUCK);
        if (!model_broke())
            check_end();
        for (int v = 1; v < V_N; v++)
            found[v] += (W.viol >> v) & 1;
        if (W.dmax > 0 && W.dmax < (uint64_t)W.nl1)
            reached |= 1u << C_PARTIAL;
        if (W.dmax > 0 && W.dmax == (uint64_t)W.nl1)
            reached |= 1u << C_WHOLE;
        if (W.failed && W.nd[0].nl > (int)W.dmax)
            reached |= 1u << C_FRESH;
        for (int i = 0; i < C_N; i++)
            cover[i] += (reached >> i) & 1;
        bad += W.viol != 0;
        schedules++;
        if (W.failed) {
            det_prefix_sum += W.dmax;
            if (W.dmax > det_prefix_max)
                det_prefix_max = W.dmax;
        }
        return;
    }
    ev_t done[EMAX];
    int ndone = 0;
    for (int i = 0; i < k; i++) {
        int asleep = 0;
        for (int j = 0; j < nsleep && !asleep; j++)
            asleep = same(&en[i], &sleep[j]);
        if (!asleep) {
            ev_t cs[2 * EMAX];
            int ncs = 0;
            uint64_t t = touches(&en[i]);
            for (int j = 0; j < nsleep; j++)
                if (!(touches(&sleep[j]) & t))
                    cs[ncs++] = sleep[j];
            for (int j = 0; j < ndone; j++)
                if (!(touches(&done[j]) & t))
                    cs[ncs++] = done[j];
            if (en[i].type == E_FAIL)
                failpos++;
            path[depth] = en[i];
            dfs(depth + 1, cs, ncs);
        }
        done[ndone++] = en[i];
    }
}

static void explore(int n, int K, int P, int pess)
{
    cfg_t c = { n, K, P, pess };
    uint64_t s0 = schedules, f0 = failpos, v0 = bad;
    W.c = c;
    dfs(0, NULL, 0);
    uint64_t v1 = bad;
    fprintf(stderr, "%s n=%d K=%d P=%d: %llu schedules, %llu failure positions, %llu violating\n",
            pess ? "pessimistic" : "causal", n, K, P, (unsigned long long)(schedules - s0),
            (unsigned long long)(failpos - f0), (unsigned long long)(v1 - v0));
    reset(&c);
}

static void explore_all(void)
{
    const char *big = getenv("PHX_REPLAY_BIG");
    const char *one = getenv("PHX_REPLAY_CFG");
    int n, K, P, pess = 0;
    if (one && sscanf(one, "%d,%d,%d,%d", &n, &K, &P, &pess) >= 3 && n >= 2 && n <= NMAX && K >= 0 && P >= 0) {
        explore(n, K, P, pess);
    } else {
        explore(3, 2, 0, 0);
#if PHX_ML_REPLAY_MUTANT == 0
        explore(3, 1, 1, 0);
        explore(4, 1, 0, 0);
        explore(3, 1, 1, 1);
#endif
        if (big && big[0] == '1') {
            explore(3, 2, 1, 0);
            explore(4, 2, 0, 0);
            explore(3, 2, 0, 1);
        }
    }
    /* Not "N schedules": tools/arch/report.sh sums those lines. */
    fprintf(stderr, "total: schedules=%llu, prefixes re-executed=%llu, determined prefix mean %.2f max %llu\n",
            (unsigned long long)schedules, (unsigned long long)nodes_run,
            schedules ? (double)det_prefix_sum / (double)schedules : 0.0, (unsigned long long)det_prefix_max);
    for (int v = 1; v < V_N; v++)
        if (found[v])
            fprintf(stderr, "%s: %llu\n", VNAME[v], (unsigned long long)found[v]);
    for (int i = 0; i < C_N; i++)
        fprintf(stderr, "reached: %s: %llu\n", CNAME[i], (unsigned long long)cover[i]);
}

#if PHX_ML_REPLAY_MUTANT == 0
static void test_explore(void **st)
{
    (void)st;
    explore_all();
    for (int v = 1; v < V_N; v++)
        assert_int_equal(found[v], 0);
    assert_true(schedules > 0);
    assert_true(det_prefix_max > 0);
    for (int i = 0; i < C_N; i++)
        assert_true(cover[i] > 0);
}
#else
/* The negative control: the explorer catches the broken replay order. */
static void test_explore(void **st)
{
    (void)st;
    explore_all();
    fprintf(stderr, "mutant %d: %llu schedules with the replayed order differing\n", PHX_ML_REPLAY_MUTANT,
            (unsigned long long)found[V_ORDER]);
    assert_true(found[V_ORDER] > 0);
}
#endif

int main(void)
{
    /* Each re-execution creates and frees every node's state: keep the
     * heap rather than hand it back to the kernel every time. */
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_explore),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
