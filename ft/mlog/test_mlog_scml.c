/* SCML (ft/mlog/scml.c) driven through whole simulated jobs: N nodes with
 * FIFO links, tasks with per-sender SSN streams, a seeded scheduler that
 * makes senders race, one node killed mid-run. The application is
 * order-sensitive: each task folds every payload into a hash chain in
 * delivery order and sends values derived from it, so a replay in another
 * order shows as a re-sent message that differs from the original (an
 * orphan). Scenarios: logs empty after a checkpoint; one kill (only the
 * dead node's tasks restart, survivors never roll back, replays match,
 * duplicates dropped and counted); a stale incarnation; the ack/GC
 * invariant; failure sets; the exact logging volume on a ring; and the
 * pessimistic variant. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/phx_err.h"
#include "ft/mlog/scml.h"

#define MAXN 8
#define MAXP 32
#define NW 2          /* workers (queues) per node */
#define TRAILER 65536

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* A frame or a local message in flight. */
typedef struct fr {
    struct fr *next;
    int kind;                 /* 0 app, 1 ack, 2 det flush */
    int from;
    uint32_t inc;
    uint64_t src, dst, ssn, val;
    uint8_t *pb;
    long pblen;
} fr_t;

typedef struct chan {
    fr_t *head, *tail;
    int n;
} chan_t;

typedef struct task {
    int alive;
    uint64_t h, steps, out_ssn[MAXP], in_ssn[MAXP];
    int inited;
    phx_ml_task_t ml;
    fr_t *held;
    uint64_t max_steps_seen; /* survivors' progress must never decrease */
} task_t;

typedef struct sim {
    int n, p, k, fanout, pessimistic, no_dets;
    uint64_t rng;
    phx_ml_t *ml[MAXN];
    int dead[MAXN];
    int host[MAXP];           /* task -> node hosting it */
    task_t t[MAXP], ckpt[MAXP];
    chan_t ch[MAXN][MAXN];    /* ch[a][b]: a -> b (a == b: local) */
    fr_t *pend[MAXN];         /* pessimistic: frames waiting for the gate */
    uint64_t snap[MAXN][512][NW];
    int npend[MAXN];
    int flushing[MAXN];       /* pessimistic: a det flush awaits its ack */
    /* first delivered value of each (src, dst, ssn): the orphan check */
    uint64_t first[MAXP][MAXP][64];
    uint64_t dups, orphans, sent, delivered, installed;
    uint8_t pbuf[TRAILER], abuf[PHX_ML_ACK_MAX];
} sim_t;

static uint64_t rnd(sim_t *s) { return s->rng = mix(s->rng + 0x9e3779b97f4a7c15ULL); }
static int home(const sim_t *s, int task) { return task * s->n / s->p; }
static uint64_t tid(int task) { return (uint64_t)task + 1; }
static int task_of(uint64_t id) { return (int)id - 1; }

static void push(chan_t *c, fr_t *f)
{
    f->next = NULL;
    if (c->tail)
        c->tail->next = f;
    else
        c->head = f;
    c->tail = f;
    c->n++;
}

static fr_t *pop(chan_t *c)
{
    fr_t *f = c->head;
    if (f && !(c->head = f->next))
        c->tail = NULL;
    if (f)
        c->n--;
    return f;
}

static void frfree(fr_t *f)
{
    free(f->pb);
    free(f);
}

static fr_t *mkfr(int kind, int from, uint32_t inc)
{
    fr_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->kind = kind;
    f->from = from;
    f->inc = inc;
    return f;
}

/* A node puts a frame on the wire: causal piggybacks the trailer now;
 * pessimistic holds it until its dets are on the buddy. */
static void wire(sim_t *s, int a, int b, fr_t *f)
{
    if (s->pessimistic) {
        phx_ml_gate_snap(s->ml[a], s->snap[a][s->npend[a]]);
        f->next = NULL;
        fr_t **pp = &s->pend[a];
        while (*pp)
            pp = &(*pp)->next;
        *pp = f;
        f->pblen = b;  /* reuse: destination node while pending */
        s->npend[a]++;
        assert_true(s->npend[a] < 512);
        return;
    }
    long n = phx_ml_pb_encode(s->ml[a], s->pbuf, sizeof s->pbuf);
    assert_true(n >= 0);
    if (n > 0) {
        f->pb = malloc((size_t)n);
        memcpy(f->pb, s->pbuf, (size_t)n);
        f->pblen = n;
    }
    push(&s->ch[a][b], f);
}

static int buddy(const sim_t *s, int r)
{
    for (int k = 1; k < s->n; k++)
        if (!s->dead[(r + k) % s->n])
            return (r + k) % s->n;
    return -1;
}

/* Pessimistic: release the frames whose gate opened; flush dets to the
 * buddy for the rest. */
static void gate(sim_t *s, int a)
{
    while (s->pend[a] && phx_ml_gate_open(s->ml[a], s->snap[a][0])) {
        fr_t *f = s->pend[a];
        s->pend[a] = f->next;
        int b = (int)f->pblen;
        f->pblen = 0;
        memmove(s->snap[a][0], s->snap[a][1], sizeof s->snap[a][0] * (size_t)(s->npend[a] - 1));
        s->npend[a]--;
        push(&s->ch[a][b], f);
    }
    if (s->pend[a] && !s->flushing[a]) {
        s->flushing[a] = 1;
        long n = phx_ml_pb_encode(s->ml[a], s->pbuf, sizeof s->pbuf);
        assert_true(n > 0);
        fr_t *f = mkfr(2, a, 0);
        f->pb = malloc((size_t)n);
        memcpy(f->pb, s->pbuf, (size_t)n);
        f->pblen = n;
        push(&s->ch[a][buddy(s, a)], f);
    }
}

static void send_app(sim_t *s, int from_task, int to_task, uint64_t val)
{
    task_t *t = &s->t[from_task];
    int a = s->host[from_task], b = s->host[to_task];
    fr_t *f = mkfr(0, a, 0);
    f->src = tid(from_task);
    f->dst = tid(to_task);
    f->ssn = ++t->out_ssn[to_task];
    f->val = val;
    assert_true(f->ssn < 64);
    s->sent++;
    assert_int_equal(phx_ml_log(s->ml[a], b, f->src, f->dst, f->ssn, 0, &val, sizeof val), 0);
    if (a == b)
        push(&s->ch[a][a], f);
    else
        wire(s, a, b, f);
}

/* The application: fold the payload, then (until K steps) send onwards. */
static void handler(sim_t *s, int i, uint64_t src, uint64_t val)
{
    task_t *t = &s->t[i];
    t->h = mix(t->h ^ (src << 40) ^ val);
    t->steps++;
    if (t->steps > t->max_steps_seen)
        t->max_steps_seen = t->steps;
    if (t->steps >= (uint64_t)s->k)
        return;
    for (int j = 1; j <= s->fanout; j++)
        send_app(s, i, (i + j) % s->p, t->h + (uint64_t)j);
}

static void init_task(sim_t *s, int i)
{
    task_t *t = &s->t[i];
    t->inited = 1;
    for (int j = 1; j <= s->fanout; j++)
        send_app(s, i, (i + j) % s->p, (uint64_t)i * 1000 + (uint64_t)j);
}

/* Try to deliver f to its task; 0 if it must wait (held by the caller). */
static int try_deliver(sim_t *s, fr_t *f)
{
    int i = task_of(f->dst), from = task_of(f->src);
    task_t *t = &s->t[i];
    if (f->ssn <= t->in_ssn[from]) {   /* duplicate: a re-sent message */
        s->dups++;
        if (s->first[from][i][f->ssn] != f->val)
            s->orphans++;
        frfree(f);
        return 1;
    }
    if (f->ssn > t->in_ssn[from] + 1)
        return 0;
    uint64_t rsn;
    int node = s->host[i];
    int rc = phx_ml_admit(s->ml[node], i % NW, &t->ml, f->src, f->dst, f->ssn, &rsn);
    assert_true(rc >= 0);
    if (rc == PHX_ML_HOLD)
        return 0;
    assert_int_equal(rsn, t->ml.rsn);
    t->in_ssn[from] = f->ssn;
    /* A restored receiver may take another value than its first life did
     * (a legal divergence nobody saw): only survivors' copies must match. */
    s->first[from][i][f->ssn] = f->val;
    s->delivered++;
    handler(s, i, f->src, f->val);
    frfree(f);
    return 1;
}

static void arrive(sim_t *s, fr_t *f)
{
    int i = task_of(f->dst);
    task_t *t = &s->t[i];
    if (!try_deliver(s, f)) {
        f->next = t->held;
        t->held = f;
        return;
    }
    for (int progress = 1; progress;) {
        progress = 0;
        for (fr_t **pp = &t->held; *pp;) {
            fr_t *x = *pp;
            *pp = x->next;
            if (try_deliver(s, x)) {
                progress = 1;
                continue;
            }
            x->next = *pp;
            *pp = x;
            pp = &x->next;
        }
    }
}

static void on_frame(sim_t *s, int b, fr_t *f)
{
    int a = f->from;
    if (phx_ml_stale(s->ml[b], a, f->inc)) {
        frfree(f);
        return;
    }
    if (f->kind == 0 && s->pessimistic)
        assert_int_equal(f->pblen, 0);   /* no dets ride on app frames */
    if (f->kind == 1) {
        s->flushing[b] = 0;
        assert_int_equal(phx_ml_on_ack(s->ml[b], f->pb, (size_t)f->pblen), 0);
        frfree(f);
        return;
    }
    if (f->pblen > 0) {
        long n = phx_ml_pb_store(s->ml[b], a, f->pb, (size_t)f->pblen, s->abuf);
        assert_true(n > 0);
        fr_t *ack = mkfr(1, b, 0);
        ack->pb = malloc((size_t)n);
        memcpy(ack->pb, s->abuf, (size_t)n);
        ack->pblen = n;
        push(&s->ch[b][a], ack);
    }
    if (f->kind == 2) {
        frfree(f);
        return;
    }
    if (s->host[task_of(f->dst)] != b) {   /* task moved: forward */
        free(f->pb);
        f->pb = NULL;
        f->pblen = 0;
        f->from = b;
        push(&s->ch[b][s->host[task_of(f->dst)]], f);
        return;
    }
    arrive(s, f);
}

static void sim_init(sim_t *s, int n, int p, int k, int fanout, uint64_t seed, int pess)
{
    memset(s, 0, sizeof *s);
    s->n = n;
    s->p = p;
    s->k = k;
    s->fanout = fanout;
    s->rng = seed;
    s->pessimistic = pess;
    for (int r = 0; r < n; r++) {
        phx_ml_cfg_t c = { .rank = r, .n = n, .inc = 1, .nq = NW, .qcap = 1024, .pessimistic = pess };
        s->ml[r] = phx_ml_create(&c);
        assert_non_null(s->ml[r]);
    }
    for (int i = 0; i < p; i++) {
        s->host[i] = home(s, i);
        s->t[i].h = mix((uint64_t)i);
        s->ckpt[i] = s->t[i];   /* the epoch taken at the job's start */
    }
    for (int i = 0; i < p; i++)
        init_task(s, i);
}

/* One scheduler step: a random non-empty channel delivers its head.
 * Returns 0 when nothing is left to do. */
static int step(sim_t *s)
{
    int cand[MAXN * MAXN], nc = 0;
    for (int a = 0; a < s->n; a++) {
        if (s->pessimistic && !s->dead[a])
            gate(s, a);
        for (int b = 0; b < s->n; b++)
            if (s->ch[a][b].head)
                cand[nc++] = a * MAXN + b;
    }
    if (!nc)
        return 0;
    int c = cand[rnd(s) % (uint64_t)nc], a = c / MAXN, b = c % MAXN;
    fr_t *f = pop(&s->ch[a][b]);
    if (a == b)
        arrive(s, f);
    else
        on_frame(s, b, f);
    return 1;
}

static int lost_cb(void *arg, uint64_t id)
{
    sim_t *s = arg;
    return s->dead[home(s, task_of(id))];
}

static int g_to;   /* the survivor running restart */
static void det_cb(void *arg, const phx_det_t *d)
{
    sim_t *s = arg;
    if (!s->no_dets) {
        assert_int_equal(phx_ml_task_install(&s->t[task_of(d->receiver)].ml, d), 0);
        s->installed++;
    }
}

static void msg_cb(void *arg, const phx_ml_entry_t *e)
{
    sim_t *s = arg;
    fr_t *f = mkfr(0, g_to, 0);
    f->src = e->src;
    f->dst = e->dst;
    f->ssn = e->ssn;
    memcpy(&f->val, e->payload, sizeof f->val);
    int b = s->host[task_of(e->dst)];
    push(&s->ch[g_to][b], f);   /* ahead of anything sent later on that link */
}

/* Kill node v: its channels and queue are gone; its tasks restart from the
 * checkpoint on survivors (round robin from its buddy); survivors hand
 * back dets and re-send their logs; then the tasks are released. */
static void kill_node(sim_t *s, int v)
{
    s->dead[v] = 1;
    for (int x = 0; x < s->n; x++) {
        while (s->ch[v][x].head)
            frfree(pop(&s->ch[v][x]));
        while (s->ch[x][v].head)
            frfree(pop(&s->ch[x][v]));
    }
    while (s->pend[v]) {
        fr_t *f = s->pend[v];
        s->pend[v] = f->next;
        frfree(f);
    }
    s->npend[v] = 0;
    memset(s->flushing, 0, sizeof s->flushing);   /* a flush to v is gone */
    int next = buddy(s, v);
    for (int i = 0; i < s->p; i++) {
        if (home(s, i) != v)
            continue;
        while (s->t[i].held) {
            fr_t *f = s->t[i].held;
            s->t[i].held = f->next;
            frfree(f);
        }
        phx_ml_task_free(&s->t[i].ml);
        s->t[i] = s->ckpt[i];
        phx_ml_task_restore(&s->t[i].ml, s->ckpt[i].ml.rsn);
        s->host[i] = next;
        do
            next = (next + 1) % s->n;
        while (s->dead[next]);
    }
    for (int r = 0; r < s->n; r++) {
        if (s->dead[r])
            continue;
        phx_ml_set_inc(s->ml[r], v, 2);
        g_to = r;
        phx_ml_restart_cb_t cb = { s, lost_cb, det_cb, msg_cb };
        assert_true(phx_ml_restart(s->ml[r], &cb) >= 0);
    }
    for (int i = 0; i < s->p; i++)
        if (home(s, i) == v) {
            assert_int_equal(phx_ml_task_release(&s->t[i].ml), 0);
            init_task(s, i);   /* re-execution starts with init, as the original did */
        }
}

static void sim_free(sim_t *s)
{
    for (int r = 0; r < s->n; r++)
        phx_ml_destroy(s->ml[r]);
    for (int i = 0; i < s->p; i++)
        phx_ml_task_free(&s->t[i].ml);
}

static void check_complete(sim_t *s)
{
    for (int i = 0; i < s->p; i++) {
        assert_true(s->t[i].steps >= (uint64_t)s->k);
        assert_null(s->t[i].held);
        for (int j = 0; j < s->p; j++)
            assert_int_equal(s->t[i].out_ssn[j], s->t[j].in_ssn[i]);   /* each exactly once */
    }
}

/* ---- scenarios ------------------------------------------------------------ */

/* Ring of P tasks on N contiguous nodes, K iterations. */
static void test_ring_volume(void **st)
{
    (void)st;
    static sim_t s;
    const int N = 4, P = 16, K = 10;
    sim_init(&s, N, P, K, 1, 1, 0);
    while (step(&s))
        ;
    check_complete(&s);
    uint64_t logged = 0, local = 0, dets = 0, frames_pb = 0;
    for (int r = 0; r < N; r++) {
        phx_ml_stats_t x;
        phx_ml_stats(s.ml[r], &x);
        logged += x.logged;
        local += x.local;
        dets += x.dets;
        frames_pb += x.frames_pb;
    }
    assert_int_equal(logged, N * K);
    assert_int_equal(local, (P - N) * K);
    assert_int_equal(dets, P * K);
    assert_true(frames_pb <= logged);   /* dets ride only on inter-node frames */
    assert_true(frames_pb > 0);
    sim_free(&s);
}

/* Logs fill during a period, ack keeps the queues short,
 * a checkpoint empties msgLog and detLog. */
static void test_logs_emptied_by_checkpoint(void **st)
{
    (void)st;
    static sim_t s;
    sim_init(&s, 4, 16, 12, 2, 7, 0);
    while (step(&s))
        ;
    check_complete(&s);
    for (int r = 0; r < 4; r++) {
        phx_ml_stats_t x;
        phx_ml_stats(s.ml[r], &x);
        assert_true(x.log_len > 0);
        assert_true(x.detlog_len > 0);
        assert_true(x.dets_pb >= x.frames_pb);
        phx_ml_checkpoint(s.ml[r], 2);
        phx_ml_stats(s.ml[r], &x);
        assert_int_equal(x.log_len, 0);
        assert_int_equal(x.detlog_len, 0);
        assert_int_equal(phx_ml_pb_size(s.ml[r]), 16);   /* nothing to carry: the header */
    }
    sim_free(&s);
}

/* Kill one node mid-run, many seeds. */
static uint64_t g_installed;
static void run_kill(int pess, int no_dets, uint64_t seed, uint64_t *orphans, uint64_t *dups)
{
    static sim_t s;
    const int N = 4, P = 16;
    sim_init(&s, N, P, 24, 2, seed, pess);
    s.no_dets = no_dets;
    int v = (int)(mix(seed) % N);
    uint64_t at = 200 + mix(seed + 1) % 400, steps = 0;
    uint64_t before[MAXP];
    while (step(&s))
        if (++steps == at) {
            for (int i = 0; i < P; i++)
                before[i] = s.t[i].steps;
            kill_node(&s, v);
            break;
        }
    assert_int_equal(steps, at);   /* the kill landed inside the work */
    while (step(&s)) {
        for (int i = 0; i < P; i++)
            if (home(&s, i) != v)   /* survivors never roll back */
                assert_true(s.t[i].steps >= before[i]);
    }
    if (!no_dets) {
        check_complete(&s);
        assert_int_equal(s.orphans, 0);
        assert_true(s.dups > 0);
    }
    *orphans += s.orphans;
    *dups += s.dups;
    g_installed += s.installed;
    sim_free(&s);
}

static void test_kill_one_causal(void **st)
{
    (void)st;
    uint64_t o = 0, d = 0;
    g_installed = 0;
    for (uint64_t seed = 1; seed <= 40; seed++)
        run_kill(0, 0, seed, &o, &d);
    assert_int_equal(o, 0);
    assert_true(g_installed > 40);   /* the replays followed survivors' dets */
}

static void test_kill_one_pessimistic(void **st)
{
    (void)st;
    uint64_t o = 0, d = 0;
    g_installed = 0;
    for (uint64_t seed = 1; seed <= 40; seed++)
        run_kill(1, 0, seed, &o, &d);
    assert_int_equal(o, 0);
    assert_true(g_installed > 40);
}

/* The negative control: without the survivors' determinants the
 * replay takes other orders and survivors see re-sent messages that
 * differ from what they already used: the checks above can fail. */
static void test_kill_without_dets_diverges(void **st)
{
    (void)st;
    uint64_t o = 0, d = 0;
    for (uint64_t seed = 1; seed <= 40; seed++)
        run_kill(0, 1, seed, &o, &d);
    assert_true(o > 0);
}

/* Pessimistic: app frames carry no dets; the buddy holds them all. */
static void test_pessimistic_no_piggyback(void **st)
{
    (void)st;
    static sim_t s;
    sim_init(&s, 4, 16, 10, 2, 3, 1);
    while (step(&s))
        ;
    check_complete(&s);
    uint64_t dets = 0, stored = 0;
    for (int r = 0; r < 4; r++) {
        phx_ml_stats_t x;
        phx_ml_stats(s.ml[r], &x);
        dets += x.dets;
        stored += x.dets_stored;
    }
    /* Each det stored at most once, on the buddy (those of the last
     * deliveries, which sent nothing, never needed to leave). */
    assert_true(stored > dets / 2 && stored <= dets);
    sim_free(&s);
}

/* Frames of the old incarnation are dropped after the notice,
 * accepted before it. */
static void test_stale_incarnation(void **st)
{
    (void)st;
    phx_ml_cfg_t c = { .rank = 0, .n = 3, .inc = 1, .nq = 1, .qcap = 16 };
    phx_ml_t *ml = phx_ml_create(&c);
    assert_int_equal(phx_ml_stale(ml, 2, 1), 0);
    phx_ml_set_inc(ml, 2, 2);
    assert_int_equal(phx_ml_stale(ml, 2, 1), 1);
    assert_int_equal(phx_ml_stale(ml, 2, 2), 0);
    phx_ml_set_inc(ml, 2, 1);   /* never backwards */
    assert_int_equal(phx_ml_stale(ml, 2, 1), 1);
    phx_ml_stats_t x;
    phx_ml_stats(ml, &x);
    assert_int_equal(x.stale, 2);
    phx_ml_destroy(ml);
}

/* Trailers: re-piggybacked dets are stored once; a gap is refused; acks
 * of another incarnation do not move the queue. */
static void test_trailer_store_ack(void **st)
{
    (void)st;
    phx_ml_cfg_t ca = { .rank = 0, .n = 2, .inc = 5, .nq = 2, .qcap = 16 };
    phx_ml_cfg_t cb = { .rank = 1, .n = 2, .inc = 1, .nq = 2, .qcap = 16 };
    phx_ml_t *a = phx_ml_create(&ca), *b = phx_ml_create(&cb);
    phx_ml_task_t t = { 0 };
    uint64_t rsn;
    for (uint64_t k = 1; k <= 3; k++)
        assert_int_equal(phx_ml_admit(a, 1, &t, 9, 10, k, &rsn), PHX_ML_DELIVER);
    uint8_t pb[4096], ack[PHX_ML_ACK_MAX];
    long n = phx_ml_pb_encode(a, pb, sizeof pb);
    /* Header 7 (the epoch a 1-byte varint), range (queue, first, count) 3
     * varints of 1 byte, each det 4 one-byte deltas (was 6 + 14 + 3 * 32
     * with fixed-width fields). */
    assert_int_equal(n, 7 + 3 + 3 * 4);
    assert_true(phx_ml_pb_store(b, 0, pb, (size_t)n, ack) > 0);
    long m = phx_ml_pb_store(b, 0, pb, (size_t)n, ack);   /* the same again */
    phx_ml_stats_t x;
    phx_ml_stats(b, &x);
    assert_int_equal(x.detlog_len, 3);
    assert_int_equal(phx_ml_pb_encode(a, pb, 10), PHX_ENOSPC);
    uint8_t bad[64];
    memcpy(bad, ack, (size_t)m);
    bad[0] ^= 1;   /* another incarnation */
    assert_int_equal(phx_ml_on_ack(a, bad, (size_t)m), 0);
    uint64_t f, e;
    assert_int_equal(phx_detq_piggyback(phx_ml_queue(a, 1), &f, &e), 3);
    assert_int_equal(phx_ml_on_ack(a, ack, (size_t)m), 0);
    assert_int_equal(phx_detq_piggyback(phx_ml_queue(a, 1), &f, &e), 0);
    assert_int_equal(phx_ml_pb_encode(a, pb, sizeof pb), 0);
    assert_int_equal(phx_ml_pb_store(b, 0, pb, 3, ack), PHX_EPROTO);   /* truncated */
    /* Per-link suffixes: a peer gets each det once, the next only new ones. */
    assert_int_equal(phx_ml_admit(a, 0, &t, 9, 10, 4, &rsn), PHX_ML_DELIVER);
    assert_int_equal(phx_ml_pb_encode_to(a, 1, pb, 10), PHX_ENOSPC);   /* records nothing as sent */
    assert_int_equal(phx_ml_pb_encode_to(a, 1, pb, sizeof pb), 7 + 3 + 4);
    assert_int_equal(phx_ml_pb_encode_to(a, 1, pb, sizeof pb), 0);
    assert_int_equal(phx_ml_admit(a, 0, &t, 9, 10, 5, &rsn), PHX_ML_DELIVER);
    n = phx_ml_pb_encode_to(a, 1, pb, sizeof pb);
    assert_int_equal(n, 7 + 3 + 4);
    assert_true(phx_ml_pb_store(b, 0, pb, (size_t)n, ack) > 0);
    phx_ml_stats(b, &x);
    assert_int_equal(x.detlog_len, 4);   /* the first suffix was encoded but not handed to b */
    assert_int_equal(phx_ml_pb_store(b, 1, pb, (size_t)n, ack), PHX_EPROTO);   /* from itself */
    phx_ml_destroy(a);
    phx_ml_destroy(b);
}

typedef struct got { phx_det_t d[8]; int n; } got_t;
static int all_lost(void *arg, uint64_t tid) { (void)arg; (void)tid; return 1; }
static void got_det(void *arg, const phx_det_t *d)
{
    got_t *g = arg;
    if (g->n < 8)
        g->d[g->n] = *d;
    g->n++;
}

/* The delta/varint trailer round-trips any values (tids with their home in
 * the high bits, falling rsns, 64-bit extremes); batched acks: a store
 * without an ack owes one, ack_take pays everything owed at once and the
 * origin's queue then carries nothing more. */
static void test_codec_and_batched_ack(void **st)
{
    (void)st;
    phx_ml_cfg_t cfa = { .rank = 0, .n = 2, .inc = 3, .nq = 2, .qcap = 16 };
    phx_ml_cfg_t cfb = { .rank = 1, .n = 2, .inc = 1, .nq = 2, .qcap = 16 };
    phx_ml_t *a = phx_ml_create(&cfa), *b = phx_ml_create(&cfb);
    const phx_det_t in[] = {
        { 2ull << 48 | 7, 1ull << 48 | 9, 1, 1 }, { 1ull << 48 | 3, 1ull << 48 | 9, 5, 2 },
        { UINT64_MAX, 4, UINT64_MAX, 3 }, { 0, UINT64_MAX, 0, UINT64_MAX }, { 5, 6, 7, 8 },
    };
    for (size_t i = 0; i < sizeof in / sizeof *in; i++)
        assert_true(phx_detq_add(phx_ml_queue(a, (int)(i & 1)), &in[i]) >= 0);
    uint8_t pb[4096], ack[PHX_ML_ACK_MAX];
    long n = phx_ml_pb_encode_to(a, 1, pb, sizeof pb);
    assert_true(n > 0);
    for (long cut = 0; cut < n; cut++)   /* every truncation is refused */
        assert_true(phx_ml_pb_store(b, 0, pb, (size_t)cut, NULL) < 0);
    assert_int_equal(phx_ml_pb_store(b, 0, pb, (size_t)n, NULL), 0);
    assert_int_equal(phx_ml_ack_owed(b, 0), 5);
    got_t g = { 0 };
    phx_ml_restart_cb_t cb = { &g, all_lost, got_det, NULL };
    phx_ml_restart_dets(b, &cb);
    /* Stored in queue order: queue 0 had in[0], in[2], in[4]; 1 in[1], in[3]. */
    const int order[] = { 0, 2, 4, 1, 3 };
    assert_int_equal(g.n, 5);
    for (int i = 0; i < 5; i++)
        assert_memory_equal(&g.d[i], &in[order[i]], sizeof in[0]);
    long m = phx_ml_ack_take(b, 0, ack);
    assert_true(m > 0);
    assert_int_equal(phx_ml_ack_owed(b, 0), 0);
    assert_int_equal(phx_ml_ack_take(b, 0, ack), 0);   /* nothing more owed */
    assert_int_equal(phx_ml_on_ack(a, ack, (size_t)m), 0);
    uint64_t f, e;
    assert_int_equal(phx_detq_piggyback(phx_ml_queue(a, 0), &f, &e), 0);
    assert_int_equal(phx_detq_piggyback(phx_ml_queue(a, 1), &f, &e), 0);
    /* A checkpoint: the origin acks itself, nothing stays owed. */
    assert_true(phx_detq_add(phx_ml_queue(a, 0), &in[0]) >= 0);
    n = phx_ml_pb_encode_to(a, 1, pb, sizeof pb);
    assert_int_equal(phx_ml_pb_store(b, 0, pb, (size_t)n, NULL), 0);
    assert_int_equal(phx_ml_ack_owed(b, 0), 1);
    phx_ml_checkpoint(b, 2);
    assert_int_equal(phx_ml_ack_owed(b, 0), 0);
    phx_ml_destroy(a);
    phx_ml_destroy(b);
}

/* A commit is no barrier: the node that commits an epoch first resumes,
 * and its next dets may reach a node that has not committed it yet (the
 * buddy under mlog-pessimistic, any peer of an app frame under
 * mlog-causal). They describe deliveries after the checkpoint, so that
 * node's commit must keep them: dropped, a task restored from the
 * checkpoint finds a gap in its dets at the release (it_mlog under TSan:
 * exit 76, "lost determinants of a restored task"), or replays without
 * the det a survivor's state depends on. */
static void test_commit_after_origin(void **st)
{
    (void)st;
    for (int pess = 0; pess <= 1; pess++) {
        phx_ml_cfg_t ca = { .rank = 0, .n = 2, .inc = 1, .nq = 1, .qcap = 16, .pessimistic = pess };
        phx_ml_cfg_t cb = { .rank = 1, .n = 2, .inc = 1, .nq = 1, .qcap = 16, .pessimistic = pess };
        phx_ml_t *a = phx_ml_create(&ca), *b = phx_ml_create(&cb);
        phx_ml_task_t t = { 0 };
        uint8_t pb[4096], ack[PHX_ML_ACK_MAX];
        uint64_t rsn, ssn = 0;
        /* a delivers, b stores (and acks, pessimistic) */
#define DELIVER_AND_STORE()                                                                          \
        do {                                                                                         \
            assert_int_equal(phx_ml_admit(a, 0, &t, 9, 10, ++ssn, &rsn), PHX_ML_DELIVER);             \
            long n_ = phx_ml_pb_encode_to(a, 1, pb, sizeof pb);                                      \
            assert_true(n_ > 0);                                                                     \
            long k_ = phx_ml_pb_store(b, 0, pb, (size_t)n_, pess ? ack : NULL);                      \
            assert_true(pess ? k_ > 0 : k_ == 0);                                                    \
            if (pess)                                                                                \
                assert_int_equal(phx_ml_on_ack(a, ack, (size_t)k_), 0);                              \
        } while (0)
        DELIVER_AND_STORE();
        DELIVER_AND_STORE();
        /* Epoch 2 is taken with the task at rsn 2 (every node paused); a
         * commits first and resumes; b's commit comes after a's next det. */
        uint64_t base = t.rsn;
        phx_ml_checkpoint(a, 2);
        DELIVER_AND_STORE();   /* rsn 3 */
        phx_ml_checkpoint(b, 2);
        DELIVER_AND_STORE();   /* rsn 4 */
        /* a dies: its task restarts from epoch 2 and b hands back 3 and 4. */
        phx_ml_task_t r = { 0 };
        phx_ml_task_restore(&r, base);
        got_t g = { 0 };
        phx_ml_restart_cb_t cbk = { &g, all_lost, got_det, NULL };
        phx_ml_restart_dets(b, &cbk);
        for (int i = 0; i < g.n; i++)
            assert_int_equal(phx_ml_task_install(&r, &g.d[i]), 0);
        assert_int_equal(phx_ml_task_release(&r), 0);
        assert_int_equal(r.rep_n, 2);
        uint64_t src, s2;
        assert_int_equal(phx_ml_task_next(&r, base, &src, &s2), 1);
        assert_true(src == 9 && s2 == 3);
        phx_ml_task_free(&r);
        phx_ml_stats_t x;
        phx_ml_stats(b, &x);
        assert_int_equal(x.detlog_len, 2);   /* rsn 1 and 2 went: the epoch holds them */
        /* Epoch 3 holds them all. */
        phx_ml_checkpoint(a, 3);
        phx_ml_checkpoint(b, 3);
        phx_ml_stats(b, &x);
        assert_int_equal(x.detlog_len, 0);
        /* A rollback drops whatever is stored, dets sent after their
         * origin's commit too (they describe undone work). */
        DELIVER_AND_STORE();
        phx_ml_rollback(b, 3);
        phx_ml_stats(b, &x);
        assert_int_equal(x.detlog_len, 0);
        /* Any epoch rides the trailer. */
        phx_ml_rollback(a, 3);
        phx_ml_checkpoint(a, 1ull << 40);
        DELIVER_AND_STORE();
        phx_ml_checkpoint(b, 1ull << 40);
        phx_ml_stats(b, &x);
        assert_int_equal(x.detlog_len, 1);
        phx_ml_checkpoint(b, (1ull << 40) + 1);
        phx_ml_stats(b, &x);
        assert_int_equal(x.detlog_len, 0);
#undef DELIVER_AND_STORE
        phx_ml_destroy(a);
        phx_ml_destroy(b);
    }
}

/* Replay: installed dets fix the order; fresh rsns wait for the release;
 * a gap in the dets is reported at release. */
static void test_replay_order(void **st)
{
    (void)st;
    phx_ml_cfg_t c = { .rank = 0, .n = 2, .inc = 1, .nq = 1, .qcap = 16 };
    phx_ml_t *ml = phx_ml_create(&c);
    phx_ml_task_t t = { 0 };
    phx_ml_task_restore(&t, 4);
    phx_det_t d6 = { 7, 1, 1, 6 }, d5 = { 8, 1, 3, 5 };
    assert_int_equal(phx_ml_task_install(&t, &d6), 0);
    assert_int_equal(phx_ml_task_install(&t, &d5), 0);
    assert_int_equal(phx_ml_task_install(&t, &d5), 0);   /* repeats are fine */
    uint64_t rsn, src, ssn;
    assert_int_equal(phx_ml_task_next(&t, 4, &src, &ssn), 1);   /* the worker looks up <8, 3> */
    assert_true(src == 8 && ssn == 3);
    assert_int_equal(phx_ml_task_next(&t, 5, &src, &ssn), 1);
    assert_true(src == 7 && ssn == 1);
    assert_int_equal(phx_ml_task_next(&t, 6, &src, &ssn), 0);   /* beyond the dets: check decides */
    assert_int_equal(phx_ml_admit(ml, 0, &t, 7, 1, 1, &rsn), PHX_ML_HOLD);   /* rsn 6 before 5 */
    assert_int_equal(phx_ml_admit(ml, 0, &t, 8, 1, 3, &rsn), PHX_ML_DELIVER);
    assert_int_equal(rsn, 5);
    assert_int_equal(phx_ml_admit(ml, 0, &t, 7, 1, 1, &rsn), PHX_ML_DELIVER);
    assert_int_equal(rsn, 6);
    assert_int_equal(phx_ml_admit(ml, 0, &t, 9, 1, 1, &rsn), PHX_ML_HOLD);   /* not released */
    assert_int_equal(phx_ml_task_release(&t), 0);
    assert_int_equal(phx_ml_admit(ml, 0, &t, 9, 1, 1, &rsn), PHX_ML_DELIVER);
    assert_int_equal(rsn, 7);
    phx_ml_stats_t x;
    phx_ml_stats(ml, &x);
    assert_int_equal(x.dets, 1);   /* only the fresh delivery made one */
    phx_ml_task_t g = { 0 };
    phx_ml_task_restore(&g, 0);
    phx_det_t d2 = { 7, 1, 2, 2 };
    assert_int_equal(phx_ml_task_install(&g, &d2), 0);
    assert_int_equal(phx_ml_task_release(&g), PHX_ERANGE);   /* rsn 1 lost */
    phx_ml_task_free(&t);
    phx_ml_task_free(&g);
    phx_ml_destroy(ml);
}

/* Spawn dets: the k-th spawn in delivery rsn of a replaying task finds
 * the recorded child id (in any install order, repeats allowed); a key not
 * recorded waits until the release, then takes a fresh id; spawn dets make
 * no gap and never steer deliveries; the key of the last replayed delivery
 * is still found after that delivery ended the replay (its handler spawns
 * after the admission); a task the replay spawns again (base 0) finds the
 * spawns of its init. */
static void test_spawn_ids(void **st)
{
    (void)st;
    const uint64_t P = 1ull << 48 | 9, A = 2ull << 48 | 3ull << 32 | 40, B = A + 1, C = 5ull << 48 | 3ull << 32 | 7;
    phx_ml_task_t t = { 0 };
    phx_ml_task_restore(&t, 4);
    phx_det_t d5 = { 8, P, 3, 5 }, d6 = { 7, P, 1, 6 };
    phx_det_t sa = phx_ml_spawn_det(P, 5, 0, A), sb = phx_ml_spawn_det(P, 5, 1, B), sc = phx_ml_spawn_det(P, 6, 0, C);
    phx_det_t old = phx_ml_spawn_det(P, 3, 0, 77);   /* before the checkpoint: ignored */
    assert_true(phx_ml_det_is_spawn(&sa) && !phx_ml_det_is_spawn(&d5));
    const phx_det_t *ins[] = { &sc, &d6, &sb, &old, &sa, &d5, &sb, &sc };
    for (size_t i = 0; i < sizeof ins / sizeof *ins; i++)
        assert_int_equal(phx_ml_task_install(&t, ins[i]), 0);
    uint64_t id = 0;
    assert_int_equal(phx_ml_task_spawn(&t, 5, 0, &id), PHX_ML_SPAWN_FOUND);
    assert_true(id == A);
    assert_int_equal(phx_ml_task_spawn(&t, 5, 1, &id), PHX_ML_SPAWN_FOUND);
    assert_true(id == B);
    assert_int_equal(phx_ml_task_spawn(&t, 6, 1, &id), PHX_ML_SPAWN_WAIT);   /* a survivor may still have it */
    assert_int_equal(phx_ml_task_spawn(&t, 3, 0, &id), PHX_ML_SPAWN_WAIT);
    /* Deliveries follow the delivery dets only. */
    assert_int_equal(phx_ml_task_check(&t, 4, 7, 1), PHX_ML_HOLD);
    assert_int_equal(phx_ml_task_check(&t, 4, 8, 3), PHX_ML_DELIVER);
    assert_int_equal(phx_ml_task_release(&t), 0);   /* no gap from the spawn dets */
    assert_int_equal(phx_ml_task_check(&t, 5, 7, 1), PHX_ML_DELIVER);   /* the last det: replay over */
    assert_int_equal(t.replaying, 0);
    assert_int_equal(phx_ml_task_spawn(&t, 6, 0, &id), PHX_ML_SPAWN_FOUND);   /* its handler spawns now */
    assert_true(id == C);
    assert_int_equal(phx_ml_task_spawn(&t, 6, 1, &id), PHX_ML_SPAWN_NEW);
    assert_int_equal(phx_ml_task_spawn(&t, 3, 0, &id), PHX_ML_SPAWN_NEW);
    assert_int_equal(phx_ml_task_spawn(&t, 7, 0, &id), PHX_ML_SPAWN_NEW);
    phx_ml_task_free(&t);
    assert_int_equal(t.sp_n, 0);
    /* Spawned again by the replay: its init (rsn 0) spawned. */
    phx_ml_task_t g = { 0 };
    phx_ml_task_restore(&g, 0);
    phx_det_t si = phx_ml_spawn_det(A, 0, 0, C);
    assert_int_equal(phx_ml_task_install(&g, &si), 0);
    assert_int_equal(phx_ml_task_spawn(&g, 0, 0, &id), PHX_ML_SPAWN_FOUND);
    assert_true(id == C);
    assert_int_equal(phx_ml_task_spawn(&g, 0, 1, &id), PHX_ML_SPAWN_WAIT);
    assert_int_equal(phx_ml_task_release(&g), 0);
    assert_int_equal(g.replaying, 0);
    assert_int_equal(phx_ml_task_spawn(&g, 0, 1, &id), PHX_ML_SPAWN_NEW);
    phx_ml_task_free(&g);
    /* A task that is not replaying (a survivor's) never waits. */
    phx_ml_task_t s = { 0 };
    assert_int_equal(phx_ml_task_spawn(&s, 9, 0, &id), PHX_ML_SPAWN_NEW);
}

/* A spawn det travels like a delivery det: in the parent worker's queue
 * after the det of the delivery it was made in (so a node that has it has
 * that one too), through the compact trailer (bit 63 of ssn, 64-bit ids),
 * stored by the receiver and handed back with the parent's dets when the
 * parent is lost; installed there, the replay finds the child's id. */
typedef struct lost_one { uint64_t tid; got_t g; } lost_one_t;
static int lost_one(void *arg, uint64_t tid) { return tid == ((lost_one_t *)arg)->tid; }
static void lost_one_det(void *arg, const phx_det_t *d) { got_det(&((lost_one_t *)arg)->g, d); }
static void test_spawn_det_handback(void **st)
{
    (void)st;
    phx_ml_cfg_t ca = { .rank = 0, .n = 2, .inc = 2, .nq = 2, .qcap = 16 };
    phx_ml_cfg_t cb = { .rank = 1, .n = 2, .inc = 1, .nq = 2, .qcap = 16 };
    phx_ml_t *a = phx_ml_create(&ca), *b = phx_ml_create(&cb);
    const uint64_t P = 1ull << 48 | 12, Q = 1ull << 48 | 13, X = 2ull << 48 | 1ull << 32 | 0xffffffffu;
    phx_ml_task_t tp = { 0 }, tq = { 0 };
    uint64_t rsn;
    assert_int_equal(phx_ml_admit(a, 1, &tp, 5, P, 1, &rsn), PHX_ML_DELIVER);
    phx_det_t sx = phx_ml_spawn_det(P, rsn, 0, X);
    assert_true(phx_detq_add(phx_ml_queue(a, 1), &sx) >= 0);
    assert_int_equal(phx_ml_admit(a, 0, &tq, 5, Q, 1, &rsn), PHX_ML_DELIVER);
    phx_det_t sq = phx_ml_spawn_det(Q, rsn, 0, X + 1);
    assert_true(phx_detq_add(phx_ml_queue(a, 0), &sq) >= 0);
    uint8_t pb[4096];
    long n = phx_ml_pb_encode_to(a, 1, pb, sizeof pb);
    assert_true(n > 0);
    for (long cut = 0; cut < n; cut++)   /* every truncation is refused */
        assert_true(phx_ml_pb_store(b, 0, pb, (size_t)cut, NULL) < 0);
    assert_int_equal(phx_ml_pb_store(b, 0, pb, (size_t)n, NULL), 0);
    /* P is lost, Q is not: b hands back P's delivery det, then its spawn det. */
    lost_one_t lo = { .tid = P };
    phx_ml_restart_cb_t cbp = { &lo, lost_one, lost_one_det, NULL };
    phx_ml_restart_dets(b, &cbp);
    assert_int_equal(lo.g.n, 2);
    assert_false(phx_ml_det_is_spawn(&lo.g.d[0]));
    assert_memory_equal(&lo.g.d[1], &sx, sizeof sx);
    phx_ml_task_t r = { 0 };
    phx_ml_task_restore(&r, 0);
    for (int i = 0; i < lo.g.n; i++)
        assert_int_equal(phx_ml_task_install(&r, &lo.g.d[i]), 0);
    uint64_t id = 0;
    assert_int_equal(phx_ml_task_spawn(&r, 1, 0, &id), PHX_ML_SPAWN_FOUND);
    assert_true(id == X);
    assert_int_equal(phx_ml_task_release(&r), 0);
    assert_int_equal(phx_ml_task_check(&r, 0, 5, 1), PHX_ML_DELIVER);
    phx_ml_task_free(&r);
    phx_ml_destroy(a);
    phx_ml_destroy(b);
}

/* Failure sets. */
static void test_decide(void **st)
{
    (void)st;
    assert_int_equal(phx_ml_decide(1, 0), PHX_ML_RECOVER);
    assert_int_equal(phx_ml_decide(2, 0), PHX_ML_ROLLBACK);
    assert_int_equal(phx_ml_decide(2, 1), PHX_ML_ABORT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stale_incarnation),
        cmocka_unit_test(test_trailer_store_ack),
        cmocka_unit_test(test_codec_and_batched_ack),
        cmocka_unit_test(test_commit_after_origin),
        cmocka_unit_test(test_replay_order),
        cmocka_unit_test(test_spawn_ids),
        cmocka_unit_test(test_spawn_det_handback),
        cmocka_unit_test(test_decide),
        cmocka_unit_test(test_ring_volume),
        cmocka_unit_test(test_logs_emptied_by_checkpoint),
        cmocka_unit_test(test_pessimistic_no_piggyback),
        cmocka_unit_test(test_kill_one_causal),
        cmocka_unit_test(test_kill_one_pessimistic),
        cmocka_unit_test(test_kill_without_dets_diverges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
