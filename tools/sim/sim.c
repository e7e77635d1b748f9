/* phx-sim: deterministic discrete-event simulator of the ft/ protocols at
 * scale. It links the real ft/hb, ft/era and ft/termination state
 * machines and drives each node's instances through the same hooks the
 * runtime uses (core/ft.c, core/agree.c, core/node.c): send callbacks become
 * timed message events, the heartbeat timer is re-armed at next_deadline()
 * after every call, failure notices reach ERA and the fault-tolerant
 * detectors after the detector call returned (ft.c's queue), and messages
 * from a rank known dead are dropped before ERA/TD see them (the transport
 * refuses a dead rank). No protocol logic lives here; --bcast-only drives
 * ft/hb/bcast.c alone with hb's three-line relay step (forward each copy on
 * its own tree), because ft/hb's O(n) state per node does not fit at 64k.
 *
 * One simulation per process: the state is the file-static S, single
 * threaded, never shared.
 *
 * Model: per-message latency base + jitter (const | uniform | exp), optional
 * per-link FIFO; a node's CPU is busy `cost` per received message and
 * `send_cost` per sent one (events wait for it); per-node clock offset and
 * drift; crashes at a time, at a protocol point (after the K-th message of
 * a kind), of a whole host, and a partition. One thread, one seeded RNG,
 * ties broken by insertion order: same arguments, same output.
 *
 * Output: one JSON object on stdout (see README.md). Exit 1 when --check
 * is given and a protocol property failed, 2 on bad usage or setup errors. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/phx_err.h"
#include "base/phx_log.h"
#include "ft/ckpt/ckpt.h"
#include "ft/ckpt/ckpt_msg.h"
#include "ft/ckpt/recover.h"
#include "ft/era/era.h"
#include "ft/era/group.h"
#include "ft/hb/bcast.h"
#include "ft/hb/hb.h"
#include "ft/hb/ring.h"
#include "ft/mlog/rec.h"
#include "ft/mlog/scml.h"
#include "ft/termination/td.h"

#define US 1000ull
#define MS 1000000ull
#define NEVER UINT64_MAX
#define MAX_CRASH_ON 8

#define EV_BCASTMSG 100   /* crash-point kind: BCASTMSG copies sent (a subset of EV_HB) */
#define EV_DECIDED 101    /* crash-point kind: ERA decisions learnt (core/agree.c's DIE_DECIDED) */

enum kind { EV_HB, EV_ERA, EV_TDC, EV_APP, EV_TIMER, EV_CRASH, EV_HINT, EV_ERA_START, EV_BC, EV_WAKE,
            EV_CR, EV_ML, EV_MLB, EV_MLQ, EV_NKIND };
/* EV_MLB: the next arrival of a SEND_ALL's broadcast record (mlb_t);
 * EV_MLQ: a run of RDONE / RFIN frames of one round waiting for a CPU,
 * their senders in one list (mlq_t), never in the heap. */
/* recovery=cr messages (core/cr*.c), in the tag's low byte; round above */
enum { CR_STATE, CR_DECIDE, CR_XFER, CR_DONE, CR_GO };
#define CR_SLICES 32   /* PHX_LOC_SLICES (core/node.h) */
/* The stencil app and mlog-causal (core/mlog.c) messages, in the tag's low
 * byte; the sender's rollback epoch above. */
enum { ML_APP, ML_STEP, ML_ACK, ML_RDETS, ML_RMSG, ML_RDONE, ML_KICK, ML_RFIN };
/* cr frames: the round (dead count) in tag bits 8..27; DECIDE's flags
 * (PHX_CK_D_*: partial, sequential) in bits 28..30. */
enum lat_dist { LAT_CONST, LAT_UNIFORM, LAT_EXP };

typedef struct ev {
    uint64_t t, seq;
    uint8_t kind;
    int src, dst;
    uint32_t tag, len;
    uint32_t depth;      /* causal hops since the operation began (critical path) */
    uint8_t *buf;
} ev_t;

/* A message waiting for its node's CPU (per-node FIFO input queue): an
 * ev_t less what a queued message no longer needs (time, order, dst). */
typedef struct qent {
    uint8_t *buf;
    int src;
    uint32_t tag, len, depth;
    uint8_t kind;
} qent_t;

typedef struct ck_xgot { int x, got; } ck_xgot_t;

typedef struct node {
    phx_ft_hb_t *hb;
    phx_ft_era_t *era;
    phx_ft_group_t *world;
    void *td;
    uint64_t busy;       /* global time the CPU is free */
    qent_t *q;           /* arrivals waiting for the CPU, a ring in arrival order */
    uint32_t qh, qn, qcap;
    uint8_t wake;        /* an EV_WAKE is scheduled at busy */
    uint64_t timer_at;   /* armed heartbeat timer (global), NEVER if none */
    int64_t off;         /* clock offset, ns */
    int32_t drift;       /* ppm */
    uint8_t crashed, fenced, td_declared, td_active;
    uint32_t depth;      /* longest causal chain of ERA messages seen (rounds; one agreement) */
    uint32_t sent[EV_NKIND], sent_bcast;
    uint32_t era_type[3];   /* ERA sends by wire type (UP, DECIDE, REVOKE): core/agree.c's era_stats */
    uint64_t era_decided_at;
    int era_ndecided;
    uint64_t era_value;
    /* recovery=cr */
    phx_ck_rec_t *ck;            /* the real recovery-round machine of this node (ft/ckpt/recover.h) */
    uint8_t *ck_dead;            /* cr's view: n flags (from the first notice on) */
    int cr_ndead, cr_coord;      /* round = dead count; lowest rank alive in our view */
    uint8_t cr_rec;              /* a round is open here (from a notice to its RESUME) */
    int cr_decided;              /* round of the DECIDE taken, -1: none */
    ck_xgot_t *ck_xg;            /* slices (or copies) shipped here this round, per dead rank */
    int ck_nxg, ck_cxg;
    uint64_t tx_free, rx_free;   /* NIC: when its send / receive side is free */
    uint64_t hold;               /* comm thread held (restoring) until: timers wait too */
    uint64_t cr_go_at;
    /* the stencil app and recovery=mlog-causal */
    phx_ml_t *ml;                /* the real SCML state of this node */
    uint32_t epoch;              /* rollbacks seen (cr): older app frames are dropped */
    uint8_t app_paused;          /* workers paused between DECIDE and GO */
    phx_ml_rec_t *rec;           /* the real partial-round machine of this node (ft/mlog/rec.h) */
    int cr_partial;              /* the DECIDE acted on was partial */
    uint8_t ml_pr;               /* reported in STATE: bit 0 a round restored here, no GO yet, or global;
                                  * bit 1 a partial round ended (GO) here (core/cr_int.h's pr) */
    uint8_t ml_phase, ml_held;   /* PHASE seen, replay phase not ended; cr's checkpoints held (HOLD) */
    int ml_left;                 /* unfinished replay records here, plus the release guard */
    int ml_guard;                /* the guard BEGIN added, taken back at RELEASE */
} node_t;

/* One app task per rank (task id = rank + 1 in ft/mlog): a 1-D stencil on
 * the rank ring. Step k computes app_iter on a worker (its own timeline,
 * not the comm thread), then sends ssn k to both neighbours; step k + 1
 * needs ssn k from both. After a failure the dead rank's task lives on the
 * host of its first slice (ft/ckpt's relocation). */
typedef struct app_task {
    int host;
    uint32_t step, got[2];       /* steps done; highest ssn delivered from left / right */
    uint32_t target;             /* step reached when the first crash happened */
    uint64_t free;               /* its worker is free from */
    uint8_t stepping, behind, replay, wait_go;
    uint8_t rec_open;            /* its replay record counts in its host's ml_left */
    phx_ml_task_t mt;            /* rsn and installed dets (ft/mlog) */
    uint8_t *have[2];            /* replay: ssn available from left / right */
    uint32_t have_cap;
    uint8_t *order;              /* mlog: side delivered at each rsn (the replay's check) */
    uint32_t order_cap;
} app_task_t;

typedef struct crash_on { int rank, kind; uint32_t k; } crash_on_t;

typedef struct cfg {
    int n;
    uint64_t seed, until;
    uint64_t lat, jitter, cost, send_cost, skew;
    int dist, fifo, drift_ppm;
    int cr;                  /* recovery=cr after each failure (ft/ckpt/recover.h per node) */
    int cr_ship_copy;        /* SHIP sends the dead rank's whole copy (core/cr_recover.c), not its moving slices */
    int mlog;                /* recovery=mlog-causal: the first failure recovered partially */
    int app;                 /* run the stencil app (implied by --mlog) */
    uint64_t app_start, app_iter;
    uint32_t app_bytes;
    int ml_swap;             /* negative control: corrupt one handed-back det pair */
    double state_mb, bw_gbps, restore_gbps;
    int hb, reset, host_size, bcast_list_max;
    uint64_t delta, eta;
    int era_k, era_shrink;   /* era_shrink: each operation is a shrink of the world */
    uint64_t era_at;
    const phx_td_ops_t *td;
    int td_hops, td_ring;   /* td_ring: hop to rank+1 (apps/tdk ring), else uniform */
    uint64_t task;       /* CPU time of one token hop */
    int check, deadset_check, stop_early;
    int bcast_known;     /* >= 0: broadcast-only mode, |D| of the origin (rank 0) */
    uint64_t part_from, part_to;
    double part_frac;
    crash_on_t con[MAX_CRASH_ON];
    int ncon;
} cfg_t;

typedef struct death { int node, rank; } death_t;
typedef struct held { int src, dst; uint32_t hops; } held_t;

typedef struct sim {
    cfg_t c;
    node_t *nd;
    uint64_t rng, now, seq;
    ev_t *heap;
    size_t hn, hcap;
    size_t qn, pend_peak;   /* messages in CPU queues; peak of those + the heap's events + mlb_fly */
    uint64_t mlb_fly;       /* frames of broadcast records not arrived yet (not in the heap) */
    /* per-link FIFO: open addressing, key src*n+dst+1 -> last arrival */
    uint64_t *lk, *lv;
    size_t lcap, lused;
    death_t *dq;
    size_t dqn, dqcap;
    held_t *held;              /* sends a detector delayed, by token */
    size_t nheld, heldtot, heldcap;
    /* failures */
    uint64_t *first_notice, *last_notice;   /* per rank, when the first/last survivor learned it */
    uint32_t *inflight_to;     /* primary messages in flight per destination */
    uint32_t *notices;
    int ncrashed, nsched, ncomplete;   /* crashes done, scheduled, known to all */
    uint64_t t_first_crash;
    /* counters */
    uint64_t msgs[EV_NKIND], dropped, events;
    uint64_t hb_sent[PHX_FT_HB_NTYPES], hb_bytes;
    int era_depth;             /* rounds: longest causal chain at any decision */
    int shrunk_size;           /* members of the last group a shrink made */
    /* TD */
    uint64_t app_inflight, td_ctrl, td_last_task, td_last_declare;
    int td_active_nodes, td_declared, td_premature, td_fatal, td_hops_done;
    int era_split;             /* a node decided two values */
    /* recovery=cr: buddies and relocation table of the epoch, per decision */
    int *cr_buddy, *cr_loc0, *cr_loc, *cr_loc_new, *cr_keep;
    const int *cr_loc_e;       /* the epoch's table, as the machine reads it */
    uint8_t *cr_scratch, *cr_have;
    uint64_t cr_bytes, cr_msgs, cr_marks, cr_decide_at, cr_last_done, cr_lost;
    int cr_rounds;
    /* the stencil app and mlog-causal */
    app_task_t *task;
    int app_stop, nbehind, ml_partial, ml_gap, ml_hold_max, ml_order_bad;
    uint64_t app_msgs, app_local, caught_at, ml_release_at;
    uint64_t ml_dets_back, ml_msgs_back, ml_back_bytes, ml_rdone_marks, ml_acks;
    uint64_t ml_pb_bytes, ml_ack_bytes, app_dups, ml_rfins;
    int ml_fallback, ml_work_lost, ml_drops, ml_holds;   /* rec actions: FALLBACK, WORK_LOST, DROP; HOLDs on */
    uint8_t **ml_since;        /* per round (dead count): the dead set its coordinator decided */
    int ml_nsince, ml_in_drain, ml_holds_left, ml_phases_left;
    uint8_t *ml_buf;
    size_t ml_buf_cap;
    /* broadcast-only mode */
    phx_ft_bcast_t *bc;
    uint8_t *bc_dead, *bc_got;
    uint64_t bc_last;
    uint32_t bc_depth;
} sim_t;

static sim_t S;

/* ---- utilities ------------------------------------------------------------ */

static uint64_t rnd(void)   /* splitmix64 */
{
    uint64_t z = (S.rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rnd01(void) { return (double)(rnd() >> 11) * 0x1.0p-53; }
static uint64_t rnd_below(uint64_t m) { return m ? rnd() % m : 0; }

static void die(const char *what, int rc)
{
    fprintf(stderr, "phx-sim: %s: %s\n", what, rc ? phx_strerror(rc) : "failed");
    exit(2);
}

static void *xrealloc(void *p, size_t sz)
{
    void *q = realloc(p, sz);
    if (!q)
        die("out of memory", PHX_ENOMEM);
    return q;
}

static long rss_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl))
            v = strtol(line + kl + 1, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

/* Clocks: local = t + off + t*drift/1e6; the inverse rounds up so a timer
 * never fires before its local deadline. */
static uint64_t local_of(const node_t *x, uint64_t t)
{
    return (uint64_t)((__int128)t + x->off + (__int128)t * x->drift / 1000000);
}

static uint64_t global_of(const node_t *x, uint64_t l)
{
    __int128 g = ((__int128)l - x->off) * 1000000 / (1000000 + x->drift);
    if (g < 0)
        g = 0;
    while (local_of(x, (uint64_t)g) < l)
        g++;
    return (uint64_t)g;
}

/* ---- hb payloads in flight ---------------------------------------------------
 * n/2 failures put O(n^2) BCASTMSG copies in flight at once: about n/4
 * observers declare in the same millisecond and every receiver's CPU takes
 * cost_us per copy, so about 0.045 n^2 messages wait at the peak (754k at
 * 4096). The copies of one broadcast differ only in ft/hb's first bytes
 * (sender, incarnation, cube, tree), so a payload longer than PL_HEAD keeps
 * those inline and shares the rest, by content, with every identical tail
 * (refcounted); delivery hands ft/hb the same bytes, reassembled. */
#define PL_HEAD 32
typedef struct pl_tail {
    struct pl_tail *next;
    uint64_t h;
    uint32_t refs, len;
    uint8_t b[];
} pl_tail_t;

static pl_tail_t **pl_tab;   /* chained, pl_cap buckets (a power of two) */
static size_t pl_cap, pl_n;
static uint8_t *pl_scr;      /* reassembly scratch for the one delivery at a time */
static size_t pl_scr_cap;

static uint64_t pl_hash(const uint8_t *b, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull ^ len;
    for (size_t i = 0; i < len; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static pl_tail_t *pl_intern(const uint8_t *b, uint32_t len)
{
    uint64_t h = pl_hash(b, len);
    if (pl_n >= pl_cap) {
        size_t cap = pl_cap ? 2 * pl_cap : 1024;
        pl_tail_t **t = calloc(cap, sizeof *t);
        if (!t)
            die("out of memory", PHX_ENOMEM);
        for (size_t i = 0; i < pl_cap; i++)
            for (pl_tail_t *x = pl_tab[i], *nx; x; x = nx) {
                nx = x->next;
                x->next = t[x->h & (cap - 1)];
                t[x->h & (cap - 1)] = x;
            }
        free(pl_tab);
        pl_tab = t;
        pl_cap = cap;
    }
    pl_tail_t **slot = &pl_tab[h & (pl_cap - 1)];
    for (pl_tail_t *x = *slot; x; x = x->next)
        if (x->h == h && x->len == len && !memcmp(x->b, b, len)) {
            x->refs++;
            return x;
        }
    pl_tail_t *x = malloc(sizeof *x + len);
    if (!x)
        die("out of memory", PHX_ENOMEM);
    *x = (pl_tail_t){ .next = *slot, .h = h, .refs = 1, .len = len };
    memcpy(x->b, b, len);
    *slot = x;
    pl_n++;
    return x;
}

static uint8_t *pl_make(const void *buf, size_t len)
{
    uint8_t *p = malloc(len <= PL_HEAD ? len : sizeof(pl_tail_t *) + PL_HEAD);
    if (!p)
        die("out of memory", PHX_ENOMEM);
    if (len <= PL_HEAD) {
        memcpy(p, buf, len);
    } else {
        pl_tail_t *t = pl_intern((const uint8_t *)buf + PL_HEAD, (uint32_t)(len - PL_HEAD));
        memcpy(p, &t, sizeof t);
        memcpy(p + sizeof t, buf, PL_HEAD);
    }
    return p;
}

static const uint8_t *pl_view(const uint8_t *p, size_t len)
{
    if (len <= PL_HEAD)
        return p;
    pl_tail_t *t;
    memcpy(&t, p, sizeof t);
    if (len > pl_scr_cap) {
        pl_scr_cap = len > 2 * pl_scr_cap ? len : 2 * pl_scr_cap;
        if (!(pl_scr = realloc(pl_scr, pl_scr_cap)))
            die("out of memory", PHX_ENOMEM);
    }
    memcpy(pl_scr, p + sizeof t, PL_HEAD);
    memcpy(pl_scr + PL_HEAD, t->b, t->len);
    return pl_scr;
}

static void pl_free(uint8_t *p, size_t len)
{
    if (p && len > PL_HEAD) {
        pl_tail_t *t;
        memcpy(&t, p, sizeof t);
        if (!--t->refs) {
            pl_tail_t **s = &pl_tab[t->h & (pl_cap - 1)];
            while (*s != t)
                s = &(*s)->next;
            *s = t->next;
            free(t);
            pl_n--;
        }
    }
    free(p);
}

/* An event's payload, as its kind stored it. */
static void ev_free(ev_t *e)
{
    if (e->kind == EV_HB)
        pl_free(e->buf, e->len);
    else
        free(e->buf);
    e->buf = NULL;
}

/* ---- event heap (time, then insertion order) ------------------------------ */

static int ev_lt(const ev_t *a, const ev_t *b) { return a->t < b->t || (a->t == b->t && a->seq < b->seq); }

static void push(ev_t e)
{
    if (S.hn == S.hcap) {
        S.hcap = S.hcap ? 2 * S.hcap : 1024;
        S.heap = xrealloc(S.heap, S.hcap * sizeof *S.heap);
    }
    e.seq = S.seq++;
    size_t i = S.hn++;
    if (S.hn + S.qn + S.mlb_fly > S.pend_peak)
        S.pend_peak = S.hn + S.qn + S.mlb_fly;
    while (i) {
        size_t p = (i - 1) / 2;
        if (!ev_lt(&e, &S.heap[p]))
            break;
        S.heap[i] = S.heap[p];
        i = p;
    }
    S.heap[i] = e;
}

static ev_t pop(void)
{
    ev_t top = S.heap[0], last = S.heap[--S.hn];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        const ev_t *mv = &last;
        if (l < S.hn && ev_lt(&S.heap[l], mv))
            m = l, mv = &S.heap[l];
        if (l + 1 < S.hn && ev_lt(&S.heap[l + 1], mv))
            m = l + 1;
        if (m == i)
            break;
        S.heap[i] = S.heap[m];
        i = m;
    }
    if (S.hn)
        S.heap[i] = last;
    return top;
}

/* ---- network ---------------------------------------------------------------- */

/* Slot of a link key: the product's high bits (its low bits depend only on
 * the key's low bits, i.e. on dst when n is a power of two, so every link
 * into one node would probe the same run). */
static size_t link_hash(uint64_t key, size_t cap)
{
    return (size_t)((key * 0x9e3779b97f4a7c15ull) >> (64 - __builtin_ctzll(cap)));
}

/* The last arrival time per FIFO link. A link whose last message has
 * arrived constrains nothing (a new one arrives after now), so a full table
 * is rebuilt with only the links still carrying a message: it holds the
 * messages in flight, not every pair that ever talked (n/2 broadcasts make
 * almost every pair talk: O(n^2) entries, 1 GB at 8k, 64 GB at 64k). */
static uint64_t *link_slot(uint64_t key)
{
    if (2 * (S.lused + 1) > S.lcap) {
        size_t oc = S.lcap, live = 0;
        for (size_t i = 0; i < oc; i++)
            live += S.lk[i] && S.lv[i] > S.now;
        size_t nc = 4096;
        while (nc < 4 * (live + 1))
            nc *= 2;
        uint64_t *ok = S.lk, *ov = S.lv;
        S.lk = calloc(nc, sizeof *S.lk);
        S.lv = calloc(nc, sizeof *S.lv);
        if (!S.lk || !S.lv)
            die("out of memory", PHX_ENOMEM);
        S.lcap = nc;
        S.lused = live;
        for (size_t i = 0; i < oc; i++)
            if (ok[i] && ov[i] > S.now) {
                size_t j = link_hash(ok[i], nc);
                while (S.lk[j])
                    j = (j + 1) & (nc - 1);
                S.lk[j] = ok[i];
                S.lv[j] = ov[i];
            }
        free(ok);
        free(ov);
    }
    size_t j = link_hash(key, S.lcap);
    while (S.lk[j] && S.lk[j] != key)
        j = (j + 1) & (S.lcap - 1);
    if (!S.lk[j]) {
        S.lk[j] = key;
        S.lused++;
    }
    return &S.lv[j];
}

static uint64_t latency(void)
{
    switch (S.c.dist) {
    case LAT_UNIFORM: return S.c.lat + rnd_below(S.c.jitter + 1);
    case LAT_EXP: return S.c.lat + (uint64_t)(-log(1.0 - rnd01()) * (double)S.c.jitter);
    default: return S.c.lat;
    }
}

static int partitioned(int a, int b, uint64_t t)
{
    if (t < S.c.part_from || t >= S.c.part_to)
        return 0;
    int cut = (int)(S.c.part_frac * S.c.n);
    return (a < cut) != (b < cut);
}

static void crash(int r);

/* Crash at a protocol point: after the K-th message of a kind; rank -1
 * matches the first node to get there (each spec fires once). */
static void crash_point(int src, int kind, uint32_t count)
{
    for (int i = 0; i < S.c.ncon; i++) {
        crash_on_t *o = &S.c.con[i];
        if (o->k && o->kind == kind && o->k == count && (o->rank == src || o->rank < 0)) {
            o->k = 0;
            crash(src);
        }
    }
}

/* Every protocol send goes through here: the sender's CPU is busy
 * send_cost per message, then the message flies. */
static void net_send(int src, int dst, int kind, uint32_t tag, const void *buf, size_t len,
                     uint32_t depth)
{
    node_t *x = &S.nd[src];
    if (x->crashed)
        return;
    uint64_t dep = (S.now > x->busy ? S.now : x->busy) + S.c.send_cost;
    x->busy = dep;
    x->sent[kind]++;
    S.msgs[kind]++;
    uint64_t arr = dep + latency();
    if (S.c.fifo) {
        uint64_t *last = link_slot((uint64_t)src * (uint64_t)S.c.n + (uint64_t)dst + 1);
        if (arr < *last)
            arr = *last;
        *last = arr;
    }
    if (partitioned(src, dst, dep)) {
        S.dropped++;
    } else {
        ev_t e = { .t = arr, .kind = (uint8_t)kind, .src = src, .dst = dst, .tag = tag,
                   .len = (uint32_t)len, .depth = depth };
        if (len && kind == EV_HB) {
            e.buf = pl_make(buf, len);
        } else if (len) {
            e.buf = malloc(len);
            if (!e.buf)
                die("out of memory", PHX_ENOMEM);
            memcpy(e.buf, buf, len);
        }
        push(e);
    }
    crash_point(src, kind, x->sent[kind]);
}

/* ---- heartbeat glue (core/ft.c) -------------------------------------------- */

static void hb_rearm(int r)
{
    node_t *x = &S.nd[r];
    uint64_t d = x->hb ? phx_ft_hb_next_deadline(x->hb) : NEVER;
    uint64_t g = d == NEVER ? NEVER : global_of(x, d);
    if (g != NEVER && g < S.now)
        g = S.now;
    if (g == x->timer_at)
        return;
    x->timer_at = g;
    if (g != NEVER)
        push((ev_t){ .t = g, .kind = EV_TIMER, .src = r, .dst = r });
}

static void cb_hb_send(void *ctx, int dst, unsigned type, const void *buf, size_t len)
{
    int src = (int)(intptr_t)ctx;
    S.hb_sent[type]++;
    S.hb_bytes += len;
    net_send(src, dst, EV_HB, type, buf, len, 0);
    if (type == PHX_FT_HB_BCASTMSG)
        crash_point(src, EV_BCASTMSG, ++S.nd[src].sent_bcast);
}

static void cb_hb_dead(void *ctx, int rank, uint64_t now)
{
    (void)now;
    if (S.dqn == S.dqcap) {
        S.dqcap = S.dqcap ? 2 * S.dqcap : 256;
        S.dq = xrealloc(S.dq, S.dqcap * sizeof *S.dq);
    }
    S.dq[S.dqn++] = (death_t){ (int)(intptr_t)ctx, rank };
}

static void cb_hb_fenced(void *ctx) { S.nd[(int)(intptr_t)ctx].fenced = 1; }

/* ---- recovery=cr: the network and NICs its round uses ----------------------
 * Every survivor's ft/ckpt/recover.h machine runs the round (below, after
 * mlog's glue): STATE (epoch, dead set as n flags) to the coordinator,
 * DECIDE (epoch, n flags) to all, DONE, GO as frames; bulk bytes go
 * through a per-node NIC (send and receive side, --bw-gbps), restoring
 * costs CPU (--restore-gbps). */

static uint64_t bytes_ns(double bytes, double gbps) { return (uint64_t)(bytes * 8.0 / gbps); }

/* A bulk message of `wire` bytes (the sim carries buf, len): both NICs
 * serialise it. mlog's hand-back keeps its link FIFO (RDONE after the dets
 * and messages it completes, as on the runtime's one TCP link). */
static void nic_send(int kind, int src, int dst, uint32_t tag, const void *buf, size_t len, uint64_t wire)
{
    node_t *x = &S.nd[src], *y = &S.nd[dst];
    if (x->crashed)
        return;
    uint64_t t = S.now > x->busy ? S.now : x->busy;
    if (src == dst) {   /* ctl() to ourselves: no wire */
        ev_t e = { .t = t, .kind = (uint8_t)kind, .src = src, .dst = dst, .tag = tag, .len = (uint32_t)len };
        if (len && !(e.buf = malloc(len)))
            die("out of memory", PHX_ENOMEM);
        if (len)
            memcpy(e.buf, buf, len);
        push(e);
        return;
    }
    if (x->tx_free > t)
        t = x->tx_free;
    x->tx_free = t + bytes_ns((double)wire, S.c.bw_gbps);
    uint64_t arr = x->tx_free + latency();
    if (y->rx_free > arr - bytes_ns((double)wire, S.c.bw_gbps))
        arr = y->rx_free + bytes_ns((double)wire, S.c.bw_gbps);
    if (kind == EV_ML && S.c.fifo) {
        uint64_t *last = link_slot((uint64_t)src * (uint64_t)S.c.n + (uint64_t)dst + 1);
        if (arr < *last)
            arr = *last;
        *last = arr;
    }
    y->rx_free = arr;
    if (kind == EV_CR) {
        S.cr_bytes += wire;
        S.cr_msgs++;
    } else {
        S.ml_back_bytes += wire;
    }
    x->sent[kind]++;
    S.msgs[kind]++;
    ev_t e = { .t = arr, .kind = (uint8_t)kind, .src = src, .dst = dst, .tag = tag, .len = (uint32_t)len };
    if (len) {
        e.buf = malloc(len);
        if (!e.buf)
            die("out of memory", PHX_ENOMEM);
        memcpy(e.buf, buf, len);
    }
    push(e);
}

static void cr_send(int src, int dst, int type, int round, const void *buf, size_t len, uint64_t wire)
{
    nic_send(EV_CR, src, dst, (uint32_t)type | (uint32_t)round << 8, buf, len, wire);
}

/* ---- the stencil app and recovery=mlog-causal (core/mlog*.c over ft/mlog) -
 * App frames go through the real SCML of their hosts: a remote one is
 * logged (phx_ml_log) and carries the dets its link has not carried
 * (phx_ml_pb_encode_to); the receiver stores them (phx_ml_pb_store) and
 * acks (phx_ml_on_ack); a delivery makes the det (phx_ml_admit).
 * The recovery round is cr's (below), partial when the coordinator's
 * phx_ml_rec_decide (ft/mlog/multi.h's rule over the dead set and every
 * rank's reported pr, the STATE flags its ft/ckpt machine sums up) says
 * so, shipped in DECIDE's flags: survivors then skip their restore and the
 * MARKs; the buddy ships the dead node's slices as under cr. Each node runs the real partial-round machine
 * (phx_ml_rec_t, ft/mlog/rec.h) as core/mlog_round.c does: failure
 * notices, the round's OWN (partial_begin, or on_rollback when global), GO
 * (handback), RDONE / RFIN frames and the end of its replay phase go in;
 * its actions become the simulator's: BEGIN gives the restored tasks
 * hosted here replay records (phx_ml_task_restore), HANDBACK ships the
 * dets (phx_ml_restart_dets) and logged messages (_msgs) held for them to
 * their hosts, which install the dets (phx_ml_task_install) and replay in
 * det order (phx_ml_admit holds the rest), SEND_ALL is one RDONE or RFIN
 * frame to every live peer (one broadcast record, FIFO behind the
 * hand-back), RELEASE
 * releases the records (phx_ml_task_release), DROP voids them under a
 * global fallback; HOLD is counted (no checkpoint follows the crash here).
 * Under cr every task rolls back to step 0 at DECIDE and runs again from
 * GO. "Caught up": every task is back at the step it had reached when the
 * crash happened. */

static int app_side(int r, int from) { return from == (r + S.c.n - 1) % S.c.n ? 0 : 1; }

static uint8_t *ml_buf(size_t len)
{
    if (len > S.ml_buf_cap) {
        S.ml_buf_cap = len * 2;
        S.ml_buf = xrealloc(S.ml_buf, S.ml_buf_cap);
    }
    return S.ml_buf;
}

static void stencil_try_step(int r);
static void ml_rec_drain(int r, int rc);

static void app_catch(int r)
{
    app_task_t *t = &S.task[r];
    if (t->behind && t->step >= t->target) {
        t->behind = 0;
        if (--S.nbehind == 0) {
            S.caught_at = S.now;
            S.app_stop = 1;
            if (S.c.stop_early && S.now + S.c.delta / 10 < S.c.until)
                S.c.until = S.now + S.c.delta / 10;
        }
    }
}

/* Frame: u32 src task, dst task, ssn, 0; then the det trailer. */
static void stencil_send(int from, int to, uint32_t ssn)
{
    int hs = S.task[from].host, hd = S.task[to].host;
    node_t *x = &S.nd[hs];
    if (x->cr_decided != x->cr_ndead)
        hd = to;   /* the sender has not got the new location table yet */
    uint32_t hdr[4] = { (uint32_t)from, (uint32_t)to, ssn, 0 };
    S.app_msgs++;
    if (hs == hd) {   /* same node: not logged, regenerated by re-execution */
        if (x->ml)
            phx_ml_count_local(x->ml);
        S.app_local++;
        ev_t e = { .t = S.now, .kind = EV_ML, .src = hs, .dst = hd, .tag = ML_APP | x->epoch << 8,
                   .len = sizeof hdr, .buf = malloc(sizeof hdr) };
        if (!e.buf)
            die("out of memory", PHX_ENOMEM);
        memcpy(e.buf, hdr, sizeof hdr);
        push(e);
        return;
    }
    size_t len = sizeof hdr;
    if (x->ml) {
        int rc = phx_ml_log(x->ml, hd, (uint64_t)from + 1, (uint64_t)to + 1, ssn, 0, &ssn, sizeof ssn);
        if (rc < 0)
            die("mlog log", rc);
        long tl;
        while ((tl = phx_ml_pb_encode_to(x->ml, hd, ml_buf(len + phx_ml_pb_size(x->ml)) + len,
                                         S.ml_buf_cap - len)) == PHX_ENOSPC)
            ml_buf(S.ml_buf_cap * 2);
        if (tl < 0)
            die("mlog trailer", (int)tl);
        len += (size_t)tl;
        S.ml_pb_bytes += (uint64_t)tl;
    }
    uint8_t *b = ml_buf(len);
    memcpy(b, hdr, sizeof hdr);
    net_send(hs, hd, EV_ML, ML_APP | x->epoch << 8, b, len, 0);
}

/* A step's compute ends: its messages leave, the next may start. */
static void stencil_step_done(int r)
{
    app_task_t *t = &S.task[r];
    if (S.nd[t->host].app_paused) {
        t->stepping = 2;   /* done; its sends leave when the workers resume */
        return;
    }
    t->stepping = 0;
    t->step++;
    stencil_send(r, (r + S.c.n - 1) % S.c.n, t->step);
    stencil_send(r, (r + 1) % S.c.n, t->step);
    app_catch(r);
    stencil_try_step(r);
}

static void stencil_try_step(int r)
{
    app_task_t *t = &S.task[r];
    node_t *x = &S.nd[t->host];
    if (S.app_stop || t->stepping || t->wait_go || x->crashed || x->app_paused || S.now < S.c.app_start ||
        t->got[0] < t->step || t->got[1] < t->step)
        return;
    t->stepping = 1;
    t->free = (t->free > S.now ? t->free : S.now) + S.c.app_iter;
    push((ev_t){ .t = t->free, .kind = EV_ML, .src = r, .dst = t->host, .tag = ML_STEP | x->epoch << 8 });
}

/* The replayed task delivers what its installed dets name, in rsn order,
 * and (released) the rest in arrival order. */
static void app_drain(int r)
{
    app_task_t *t = &S.task[r];
    node_t *x = &S.nd[t->host];
    int from[2] = { (r + S.c.n - 1) % S.c.n, (r + 1) % S.c.n }, moved = 1, held = 0;
    while (moved) {
        moved = held = 0;
        for (int sd = 0; sd < 2; sd++) {
            uint32_t nx = t->got[sd] + 1;
            if (nx >= t->have_cap || !t->have[sd][nx])
                continue;
            uint64_t rsn;
            int named = t->mt.replaying && t->mt.rsn + 1 <= t->mt.rep_base + t->mt.rep_n;
            int rc = phx_ml_admit(x->ml, 0, &t->mt, (uint64_t)from[sd] + 1, (uint64_t)r + 1, nx, &rsn);
            if (rc < 0)
                die("mlog admit", rc);
            if (rc == PHX_ML_DELIVER) {
                t->got[sd] = nx, moved = 1;
                /* a det-named delivery repeats the lost execution's */
                if (named && (rsn >= t->order_cap || t->order[rsn] != sd))
                    S.ml_order_bad++;
            } else {
                held++;
            }
        }
    }
    if (held > S.ml_hold_max)
        S.ml_hold_max = held;
    if (t->rec_open && t->mt.released && !t->mt.replaying) {   /* its record finished */
        t->rec_open = 0;
        x->ml_left--;
        if (!S.ml_in_drain)
            ml_rec_drain(t->host, 0);
    }
    stencil_try_step(r);
}

static void app_have(app_task_t *t, int sd, uint32_t ssn)
{
    if (ssn >= t->have_cap) {
        uint32_t c = t->have_cap ? t->have_cap : 1024;
        while (c <= ssn)
            c *= 2;
        for (int i = 0; i < 2; i++) {
            t->have[i] = xrealloc(t->have[i], c);
            memset(t->have[i] + t->have_cap, 0, c - t->have_cap);
        }
        t->have_cap = c;
    }
    t->have[sd][ssn] = 1;
}

static void app_recv(int y, int from, const uint8_t *buf, size_t len)
{
    uint32_t hdr[4];
    memcpy(hdr, buf, sizeof hdr);
    int src = (int)hdr[0], dst = (int)hdr[1], sd = app_side(dst, src);
    node_t *x = &S.nd[y];
    if (x->ml && len > sizeof hdr) {
        uint8_t ack[PHX_ML_ACK_MAX];
        long al = phx_ml_pb_store(x->ml, from, buf + sizeof hdr, len - sizeof hdr, ack);
        if (al < 0)
            die("mlog store", (int)al);
        if (al > 0) {
            S.ml_acks++;
            S.ml_ack_bytes += (uint64_t)al;
            net_send(y, from, EV_ML, ML_ACK, ack, (size_t)al, 0);
        }
    }
    app_task_t *t = &S.task[dst];
    if (t->host != y)
        return;   /* for a task no longer here */
    if (hdr[2] <= t->got[sd]) {
        S.app_dups++;   /* a replay's re-send: dropped by SSN */
        return;
    }
    if (t->replay) {
        app_have(t, sd, hdr[2]);
        app_drain(dst);
        return;
    }
    if (hdr[2] != t->got[sd] + 1)
        die("app: SSN gap on a FIFO link", PHX_EPROTO);
    if (x->ml) {
        uint64_t rsn;
        int rc = phx_ml_admit(x->ml, 0, &t->mt, (uint64_t)src + 1, (uint64_t)dst + 1, hdr[2], &rsn);
        if (rc != PHX_ML_DELIVER)
            die("mlog admit (live task)", rc < 0 ? rc : PHX_EPROTO);
        if (rsn >= t->order_cap) {
            uint32_t c = t->order_cap ? 2 * t->order_cap : 256;
            while (c <= rsn)
                c *= 2;
            t->order = xrealloc(t->order, c);
            t->order_cap = c;
        }
        t->order[rsn] = (uint8_t)sd;
    }
    t->got[sd] = hdr[2];
    stencil_try_step(dst);
}

/* The first crash: each task's target is the step it had reached. */
static void app_on_crash(void)
{
    if (!S.task || S.nbehind >= 0)
        return;
    for (int r = 0; r < S.c.n; r++)
        S.task[r].target = S.task[r].step;
    S.nbehind = 0;
}

/* The coordinator decided, partially or not: the dead ranks' tasks
 * restart at their first slice's host from step 0 (a partial round's BEGIN
 * there gives them replay records); otherwise every task will roll back
 * (app_on_local_decide). */
static void app_on_decided(const uint8_t *dead, int partial)
{
    if (!S.task)
        return;
    S.ml_partial = partial;
    S.nbehind = 0;
    for (int r = 0; r < S.c.n; r++) {
        app_task_t *t = &S.task[r];
        t->behind = !partial || dead[r];
        S.nbehind += t->behind;
        if (!dead[r])
            continue;
        t->host = S.cr_loc[r * CR_SLICES];
        t->step = t->got[0] = t->got[1] = 0;
        t->stepping = 0;
        t->free = S.now;
        t->wait_go = 1;
        phx_ml_task_free(&t->mt);
        memset(&t->mt, 0, sizeof t->mt);
        t->replay = t->rec_open = 0;   /* a partial round's BEGIN at its host gives it a record */
    }
}

/* DECIDE at survivor r: its workers pause until GO; under cr its task
 * rolls back and frames of the old epoch are dropped from now on. */
static void app_on_local_decide(int r)
{
    node_t *x = &S.nd[r];
    if (!S.task)
        return;
    x->app_paused = 1;
    if (x->cr_partial)
        return;
    x->epoch++;
    app_task_t *t = &S.task[r];
    t->step = t->got[0] = t->got[1] = 0;
    t->stepping = 0;
    t->free = S.now;
}

typedef struct hb_back { node_t *x; int r; uint8_t *b; size_t len, cap; } hb_back_t;

static int hb_lost(void *arg, uint64_t tid)
{
    node_t *x = ((hb_back_t *)arg)->x;
    return tid && phx_ft_hb_is_dead(x->hb, (int)(tid - 1));
}

static void hb_put(hb_back_t *h, const void *p, size_t len)
{
    if (h->len + len > h->cap) {
        h->cap = (h->len + len) * 2;
        h->b = xrealloc(h->b, h->cap);
    }
    memcpy(h->b + h->len, p, len);
    h->len += len;
}

static void hb_det(void *arg, const phx_det_t *d)
{
    hb_back_t *h = arg;
    hb_put(h, d, sizeof *d);
    S.ml_dets_back++;
}

static void hb_msg(void *arg, const phx_ml_entry_t *e)
{
    hb_back_t *h = arg;
    uint32_t m[4] = { (uint32_t)(e->src - 1), (uint32_t)(e->dst - 1), (uint32_t)e->ssn, 0 };
    hb_put(h, m, sizeof m);
    S.ml_msgs_back++;
}

/* HANDBACK at survivor r: Alg. 5's hand-back of what it holds for dead
 * rank d's task, to the task's new host (RDONE follows: SEND_ALL). */
static void ml_handback(int r, int dead)
{
    node_t *x = &S.nd[r];
    int h = S.task[dead].host;
    hb_back_t b = { x, r, NULL, 0, 0 };
    phx_ml_restart_cb_t cb = { &b, hb_lost, hb_det, NULL };
    phx_ml_restart_dets(x->ml, &cb);
    if (b.len)
        nic_send(EV_ML, r, h, ML_RDETS, b.b, b.len, 16 + b.len);
    b.len = 0;
    cb = (phx_ml_restart_cb_t){ &b, hb_lost, NULL, hb_msg };
    long k = phx_ml_restart_msgs(x->ml, &cb);
    if (k)
        nic_send(EV_ML, r, h, ML_RMSG, b.b, b.len, (uint64_t)k * (40 + S.c.app_bytes));
    free(b.b);
}

/* A SEND_ALL of r's machine: RDONE or RFIN to every live peer as one
 * broadcast record, not n - 1 queued frames (a round's 2n(n - 1) frames
 * held as events took O(n^2) memory: 16 GB at 16k). The sender's CPU and
 * NIC are charged for every frame now, as n - 1 sends would be. Frame k,
 * in a random affine order of the peers, leaves at t0 + (k + 1) send_cost
 * and flies the latency distribution's quantile at (k + u) / m, u uniform
 * in [0, 1): a stratified draw, so the arrivals come in k's order (one
 * heap event per record at a time) and each frame's latency still follows
 * the distribution. Each link stays FIFO behind what was sent on it
 * before (the hand-back to the new host); a frame sent on a link after
 * the record may overtake it within the jitter: nothing orders on that
 * (RDONE and RFIN are counted per round, not against app frames). */
typedef struct mlb {
    int src, m, k, left;   /* left: frames counted in S.mlb_fly, not arrived yet */
    uint32_t tag;
    uint64_t a, b, t0;
} mlb_t;

static uint64_t gcd_u64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static uint64_t lat_quantile(double q)
{
    switch (S.c.dist) {
    case LAT_UNIFORM: return S.c.lat + (uint64_t)(q * (double)(S.c.jitter + 1));
    case LAT_EXP: return S.c.lat + (uint64_t)(-log(1.0 - q) * (double)S.c.jitter);
    default: return S.c.lat;
    }
}

/* Pushes the record's next arrival, or frees it when none is left. A
 * peer dead in the sender's view now is skipped: it was dead or crashed
 * when the record was sent, and a crashed node takes nothing. */
static void mlb_next(mlb_t *b)
{
    int n = S.c.n;
    const uint8_t *dead = phx_ml_rec_dead(S.nd[b->src].rec);
    while (b->k < b->m) {
        int k = b->k++;
        int d = (int)((b->src + 1 + (b->a * (uint64_t)k + b->b) % (uint64_t)b->m) % (uint64_t)n);
        if (dead[d])
            continue;
        uint64_t dep = b->t0 + (uint64_t)(k + 1) * S.c.send_cost;
        if (b->left) {
            b->left--;
            S.mlb_fly--;
        }
        if (partitioned(b->src, d, dep)) {
            S.dropped++;
            continue;
        }
        push((ev_t){ .t = dep + lat_quantile(((double)k + rnd01()) / (double)b->m), .kind = EV_MLB,
                     .src = b->src, .dst = d, .buf = (uint8_t *)b });
        return;
    }
    S.mlb_fly -= (uint64_t)b->left;   /* peers that died since the send */
    free(b);
}

static void ml_send_all(int src, int type, uint32_t round)
{
    node_t *x = &S.nd[src];
    if (x->crashed)
        return;
    int n = S.c.n, live = 0;
    const uint8_t *dead = phx_ml_rec_dead(x->rec);
    for (int d = 0; d < n; d++)
        live += d != src && !dead[d];
    if (!live)
        return;
    mlb_t *b = malloc(sizeof *b);
    if (!b)
        die("out of memory", PHX_ENOMEM);
    *b = (mlb_t){ .src = src, .m = n - 1, .left = live, .tag = (uint32_t)type | round << 8,
                  .t0 = S.now > x->busy ? S.now : x->busy };
    b->a = 1 + rnd_below((uint64_t)(b->m > 1 ? b->m - 1 : 1));
    while (b->m > 1 && gcd_u64(b->a, (uint64_t)b->m) != 1)
        b->a = 1 + rnd_below((uint64_t)(b->m - 1));
    b->b = rnd_below((uint64_t)b->m);
    x->busy = b->t0 + (uint64_t)live * S.c.send_cost;
    uint64_t t = x->tx_free > S.now ? x->tx_free : S.now;
    x->tx_free = t + bytes_ns(24.0 * live, S.c.bw_gbps);   /* header-only frames */
    x->sent[EV_ML] += (uint32_t)live;
    S.msgs[EV_ML] += (uint64_t)live;
    if (type == ML_RDONE)
        S.ml_rdone_marks += (uint64_t)live;
    else
        S.ml_rfins += (uint64_t)live;
    S.mlb_fly += (uint64_t)live;
    mlb_next(b);
}

/* An EV_MLB arrival: the next one of its record goes into the heap, and
 * this one becomes a plain RDONE / RFIN frame; 0 when the link's FIFO
 * holds it back (it is pushed again at the link's last arrival). */
static int mlb_arrive(ev_t *e)
{
    mlb_t *b = (mlb_t *)e->buf;
    e->kind = EV_ML;
    e->tag = b->tag;
    e->buf = NULL;
    e->len = 0;
    mlb_next(b);
    if (S.c.fifo) {
        uint64_t *last = link_slot((uint64_t)e->src * (uint64_t)S.c.n + (uint64_t)e->dst + 1);
        if (*last > S.now) {
            e->t = *last;
            push(*e);
            return 0;
        }
    }
    return 1;
}

/* One action of node r's partial-round machine (core/mlog_round.c's). */
static void ml_rec_act(int r, const phx_ml_rec_act_t *a)
{
    node_t *x = &S.nd[r];
    int n = S.c.n;
    switch (a->what) {
    case PHX_ML_REC_SEND_ALL:
        ml_send_all(r, a->kind == PHX_ML_REC_RDONE ? ML_RDONE : ML_RFIN, a->round);
        return;
    case PHX_ML_REC_SNAP_HOSTS:   /* the simulator keeps one location table (task[].host) */
    case PHX_ML_REC_RELEASE_HELD: /* no gate */
    case PHX_ML_REC_PERIOD:       /* no commit follows the crash here */
    case PHX_ML_REC_PERIOD_KEPT:
        return;
    case PHX_ML_REC_BEGIN: {
        if (a->guard && !x->ml_guard) {
            x->ml_guard = 1;
            x->ml_left++;
        }
        const uint8_t *rb = phx_ml_rec_rb(x->rec);
        for (int d = 0; d < n; d++) {
            app_task_t *t = &S.task[d];
            if (!rb[d] || t->host != r || t->replay)
                continue;
            phx_ml_task_restore(&t->mt, 0);
            t->replay = t->rec_open = 1;
            x->ml_left++;
        }
        return;
    }
    case PHX_ML_REC_PHASE:
        x->ml_phase = 1;
        return;
    case PHX_ML_REC_HOLD:
        if (a->on != x->ml_held) {
            x->ml_held = (uint8_t)a->on;
            S.ml_holds += a->on ? 1 : -1;
        }
        return;
    case PHX_ML_REC_HANDBACK: {
        const uint8_t *rb = phx_ml_rec_rb(x->rec);
        for (int d = 0; d < n; d++)
            if (rb[d] && phx_ft_hb_is_dead(x->hb, d))
                ml_handback(r, d);
        return;
    }
    case PHX_ML_REC_RELEASE:
        if (x->ml_guard) {
            x->ml_guard = 0;
            x->ml_left--;
        }
        for (int d = 0; d < n; d++) {
            app_task_t *t = &S.task[d];
            if (!t->replay || t->host != r)
                continue;
            S.ml_release_at = S.now;
            if (phx_ml_task_release(&t->mt) == PHX_ERANGE)
                S.ml_gap++;   /* the runtime falls back to the global rollback */
            app_drain(d);
        }
        return;
    case PHX_ML_REC_DROP:
        S.ml_drops++;
        for (int d = 0; d < n; d++) {
            app_task_t *t = &S.task[d];
            if (!t->replay || t->host != r)
                continue;
            phx_ml_task_free(&t->mt);
            t->replay = t->rec_open = 0;
        }
        x->ml_left = x->ml_guard = x->ml_phase = 0;
        return;
    case PHX_ML_REC_FALLBACK:
        S.ml_fallback++;
        return;
    case PHX_ML_REC_WORK_LOST:   /* the runtime ends the job (76) */
        S.ml_work_lost++;
        return;
    }
}

/* After an event of r's machine: carry out its actions in order; once its
 * replay phase began and nothing is left (no record unfinished, the
 * release's guard back), the phase ends (replay_done: RFIN to all). */
static void ml_rec_drain(int r, int rc)
{
    node_t *x = &S.nd[r];
    phx_ml_rec_act_t a;
    S.ml_in_drain++;
    for (;;) {
        if (rc < 0)
            die("mlog rec", rc);
        while (phx_ml_rec_next(x->rec, &a))
            ml_rec_act(r, &a);
        if (!x->ml_phase || x->ml_left)
            break;
        x->ml_phase = 0;
        rc = phx_ml_rec_replay_done(x->rec, phx_ml_rec_round(x->rec));
    }
    S.ml_in_drain--;
}

/* GO at r: partial, hand back first (workers still paused); then resume. */
static void app_on_go(int r)
{
    node_t *x = &S.nd[r];
    if (!S.task || !x->app_paused)
        return;
    if (x->cr_partial) {
        x->ml_pr = (uint8_t)((x->ml_pr & ~1) | 2);
        ml_rec_drain(r, phx_ml_rec_handback(x->rec));
    }
    x->app_paused = 0;
    for (int d = 0; d < S.c.n; d++) {   /* its own task and the restored ones */
        app_task_t *t = &S.task[d];
        if (t->host != r)
            continue;
        t->wait_go = 0;
        if (t->stepping == 2)
            stencil_step_done(d);
        else
            stencil_try_step(d);
    }
}

static void ml_deliver(int y, const ev_t *e)
{
    node_t *x = &S.nd[y];
    int type = (int)(e->tag & 0xff);
    uint32_t ep = e->tag >> 8;
    switch (type) {
    case ML_STEP:
        if (ep == x->epoch && S.task[e->src].stepping && S.task[e->src].host == y)
            stencil_step_done(e->src);
        return;
    case ML_APP:
        if (ep != S.nd[e->src].epoch || ep != x->epoch || phx_ft_hb_is_dead(x->hb, e->src))
            return;   /* of a rolled-back epoch, or from a rank known dead */
        if (S.task[((const uint32_t *)e->buf)[1]].wait_go && x->cr_decided != x->cr_ndead)
            return;   /* an old frame for a task this node does not host yet */
        app_recv(y, e->src, e->buf, e->len);
        return;
    case ML_KICK:
        stencil_try_step(e->src);
        return;
    case ML_ACK:
        if (phx_ml_on_ack(x->ml, e->buf, e->len) < 0)
            die("mlog ack", PHX_EPROTO);
        return;
    case ML_RDETS:
    case ML_RMSG:
        if (type == ML_RDETS && S.c.ml_swap) {
            /* the first adjacent pair from two senders trades senders: the
             * replay then follows dets that differ from the lost order */
            phx_det_t *d = (phx_det_t *)e->buf;
            for (size_t i = 0; i + 1 < e->len / sizeof *d; i++)
                if (d[i].rsn + 1 == d[i + 1].rsn && d[i].sender != d[i + 1].sender) {
                    phx_det_t a = d[i];
                    d[i].sender = d[i + 1].sender, d[i].ssn = d[i + 1].ssn;
                    d[i + 1].sender = a.sender, d[i + 1].ssn = a.ssn;
                    break;
                }
        }
        for (size_t i = 0; i < e->len; i += type == ML_RDETS ? sizeof(phx_det_t) : 16) {
            if (type == ML_RDETS) {
                phx_det_t d;
                memcpy(&d, e->buf + i, sizeof d);
                int rc = phx_ml_task_install(&S.task[d.receiver - 1].mt, &d);
                if (rc == PHX_ERANGE)
                    S.ml_gap++;
                else if (rc < 0)
                    die("mlog install", rc);
            } else {
                uint32_t m[4];
                memcpy(m, e->buf + i, sizeof m);
                app_task_t *t = &S.task[m[1]];
                if (m[2] > t->got[app_side((int)m[1], (int)m[0])])
                    app_have(t, app_side((int)m[1], (int)m[0]), m[2]);
            }
        }
        for (int d = 0; d < S.c.n && type == ML_RMSG; d++)
            if (S.task[d].replay && S.task[d].host == y)
                app_drain(d);
        return;
    case ML_RDONE:
        ml_rec_drain(y, phx_ml_rec_on_rdone(x->rec, e->src, e->tag >> 8));
        return;
    case ML_RFIN:
        ml_rec_drain(y, phx_ml_rec_on_rfin(x->rec, e->src, e->tag >> 8));
        return;
    }
}

/* ---- recovery=cr's round: ft/ckpt/recover.h's machine per node ----------
 * core/cr_recover.c's glue, with the simulator's runtime under it: each
 * node's phx_ck_rec_t gets the failure notices, STATE, DECIDE, DONE and GO
 * and the arrival of shipped copies; its actions become timed frames, NIC
 * transfers and comm-thread time. The node's view (n flags, the round =
 * its dead count, the lowest live rank as coordinator) is cr's.
 * JUDGE is the runtime's judge() for the simulated case (memory copies
 * only, no disk, spares or newcomers): ft/ckpt's relocation, ABORT when a
 * rank and its buddy are both lost, and under mlog-causal the mode's
 * rule (phx_ml_rec_decide) over the reports' partial-round bits. Every
 * node's relocation is the same function of the decided set, so the
 * simulator computes it once (S.cr_loc). What an action costs:
 *   OWN: a global rollback's MARK on every link (counted and charged to
 *        the sender's CPU and NIC, not simulated one by one: nothing waits
 *        for them) and the restore of the node's own state on the comm
 *        thread (--restore-gbps; its timers wait too);
 *   SHIP: the slices of the dead rank's copy that move to dst (--cr-ship=
 *        slices, the default and the old model's), or the whole copy, as
 *        core/cr_recover.c ships it (--cr-ship=copy), through both NICs;
 *   HELD / XFER: the restore of the slices that move here.
 * The runtime's order is the machine's: the own restore comes before the
 * buddy ships (the old model shipped first). */

/* The view; its n flags are allocated at a node's first round (a report
 * may reach the coordinator before its own notice does). */
static phx_ck_rec_view_t cr_view(node_t *x)
{
    if (!x->ck_dead && !(x->ck_dead = calloc((size_t)S.c.n, 1)))
        die("out of memory", PHX_ENOMEM);
    return (phx_ck_rec_view_t){ .dead = x->ck_dead, .round = x->cr_ndead, .coord = x->cr_coord, .rec = x->cr_rec };
}

/* Slices of dead rank d that the round moves to host h (keep: S.cr_keep). */
static int cr_moving_to(int d, int h)
{
    int k = 0;
    for (int i = d * CR_SLICES; i < (d + 1) * CR_SLICES; i++)
        k += S.cr_keep[i] == h;
    return k;
}

static void cr_run(int r, phx_ck_rec_out_t *o);

static void cr_send_state(int r)
{
    node_t *x = &S.nd[r];
    int nd = phx_ft_hb_dead_count(x->hb);
    int *l = malloc(sizeof(int) * (size_t)(nd + 1));
    if (!l)
        die("out of memory", PHX_ENOMEM);
    phx_ft_hb_dead_list(x->hb, l, (size_t)nd);
    l[nd] = x->ml_pr;
    /* the sim carries the list and pr; the wire (and NICs) carry 8 + n bytes */
    cr_send(r, x->cr_coord, CR_STATE, nd, l, sizeof(int) * (size_t)(nd + 1), 8 + (uint64_t)S.c.n);
    free(l);
}

static void cr_progress(int r)
{
    node_t *x = &S.nd[r];
    phx_ck_rec_view_t v = cr_view(x);
    phx_ck_rec_out_t o = { 0 };
    phx_ck_rec_progress(x->ck, &v, 1, &o);   /* the simulated workers park at once */
    cr_run(r, &o);
}

static void cr_on_failure(int r, int d)
{
    node_t *x = &S.nd[r];
    (void)cr_view(x);
    if (x->ck_dead[d])
        return;
    x->ck_dead[d] = 1;
    x->cr_ndead++;
    x->cr_rec = 1;
    x->cr_decided = -1;
    x->ck_nxg = 0;
    while (x->ck_dead[x->cr_coord])
        x->cr_coord++;
    phx_ck_rec_view_t v = cr_view(x);
    phx_ck_rec_out_t o = { 0 };
    phx_ck_rec_on_failure(x->ck, &v, &o);
    cr_run(r, &o);   /* PAUSE */
    cr_progress(r);  /* STATE */
    o = (phx_ck_rec_out_t){ 0 };
    phx_ck_rec_try_decide(x->ck, &v, &o);   /* a new coordinator may hold every report */
    cr_run(r, &o);
}

/* ROLLBACK: the restore in memory, in the machine's order. */
static void cr_rollback(int r)
{
    node_t *x = &S.nd[r];
    int n = S.c.n;
    x->ml_pr |= 1;   /* reported in later rounds of this period (multi.h's replayed) */
    memset(S.cr_have, 0, (size_t)n);
    for (int i = 0; i < x->ck_nxg; i++)
        S.cr_have[x->ck_xg[i].x] = x->ck_xg[i].got >= (S.c.cr_ship_copy ? 1 : cr_moving_to(x->ck_xg[i].x, r));
    phx_ck_rec_tables_t t = { .nloc = n * CR_SLICES, .loc_e = S.cr_loc_e, .buddy_e = S.cr_buddy, .keep = S.cr_keep,
                              .have = S.cr_have };
    phx_ck_rec_view_t v = cr_view(x);
    phx_ck_rec_out_t o = { 0 };
    phx_ck_rec_restore(x->ck, &v, &t, &o);
    cr_run(r, &o);
}

/* JUDGE at coordinator c: every report is in (j: their partial-round
 * bits). */
static void cr_judge(int c, uint64_t e, int j)
{
    node_t *x = &S.nd[c];
    int n = S.c.n, lost = -1, lost_buddy = -1;
    phx_ck_rec_view_t v = cr_view(x);
    phx_ck_rec_out_t o = { 0 };
    /* mlog: partial or global, by ft/mlog's rule; every dead rank died in
     * this checkpoint period (no commit is simulated after the start) */
    int replayed = j & PHX_CK_REC_J_ENDED ? PHX_MLD_REPLAYED_ENDED
                 : j & PHX_CK_REC_J_REPLAYED ? PHX_MLD_REPLAYED_OTHER : PHX_MLD_REPLAYED_NONE;
    int partial = x->rec && phx_ml_rec_decide(x->rec, x->ck_dead, x->ck_dead, replayed);
    int seq = partial && replayed == PHX_MLD_REPLAYED_ENDED;
    /* Sequential: from the table the period's first round made, moving
     * only what the dead host now (core/cr_recover.c's do_rollback). */
    int rc = seq ? phx_ck_relocate_p(n, n * CR_SLICES, S.cr_loc, S.cr_buddy, x->ck_dead, 0, S.cr_loc_new, &lost,
                                     &lost_buddy)
                 : phx_ck_relocate(n, n * CR_SLICES, S.cr_loc0, S.cr_buddy, x->ck_dead, S.cr_loc_new, &lost,
                                   &lost_buddy);
    if (rc == PHX_EUNRECOVERABLE) {
        phx_ck_rec_abort(x->ck, &v, e, lost, lost_buddy, &o);
        cr_run(c, &o);
        return;
    }
    if (rc < 0)
        die("ckpt relocate", rc);
    for (int i = 0; i < n * CR_SLICES; i++)
        S.cr_keep[i] = !seq || x->ck_dead[S.cr_loc[i]] ? S.cr_loc_new[i] : -1;
    memcpy(S.cr_loc, S.cr_loc_new, sizeof(int) * (size_t)n * CR_SLICES);
    S.cr_rounds++;
    S.cr_decide_at = S.now;
    if (x->cr_ndead >= S.ml_nsince) {
        S.ml_since = xrealloc(S.ml_since, sizeof *S.ml_since * (size_t)(x->cr_ndead + 1));
        memset(S.ml_since + S.ml_nsince, 0, sizeof *S.ml_since * (size_t)(x->cr_ndead + 1 - S.ml_nsince));
        S.ml_nsince = x->cr_ndead + 1;
    }
    if (!S.ml_since[x->cr_ndead])
        S.ml_since[x->cr_ndead] = xrealloc(NULL, (size_t)n);
    memcpy(S.ml_since[x->cr_ndead], x->ck_dead, (size_t)n);
    app_on_decided(x->ck_dead, partial);
    phx_ck_rec_decide(x->ck, &v, e, (partial ? PHX_CK_D_PARTIAL : 0) | (seq ? PHX_CK_D_SEQ : 0), &o);
    cr_run(c, &o);
}

/* Carries out r's actions in order (core/cr_recover.c's run()) and frees o. */
static void cr_run(int r, phx_ck_rec_out_t *o)
{
    node_t *x = &S.nd[r];
    int n = S.c.n;
    double slice = S.c.state_mb * 1048576.0 / CR_SLICES;
    if (o->err)
        die("ckpt recover: actions lost", o->err);
    for (int i = 0; i < o->len; i++) {
        const phx_ck_rec_act_t *a = &o->a[i];
        switch (a->kind) {
        case PHX_CK_REC_PAUSE:   /* the app pauses at DECIDE (app_on_local_decide), as before */
            break;
        case PHX_CK_REC_STATE:
            cr_send_state(r);
            break;
        case PHX_CK_REC_JUDGE:
            cr_judge(r, a->epoch, a->flags);
            break;
        case PHX_CK_REC_DECIDE:
            for (int y = 0; y < n; y++)   /* self last */
                if (y != r && !x->ck_dead[y])
                    nic_send(EV_CR, r, y, CR_DECIDE | (uint32_t)a->round << 8 | (uint32_t)a->flags << 28, NULL,
                             0, 9 + (uint64_t)n);
            nic_send(EV_CR, r, r, CR_DECIDE | (uint32_t)a->round << 8 | (uint32_t)a->flags << 28, NULL, 0, 0);
            break;
        case PHX_CK_REC_ABORT:   /* the runtime ends the job (78) */
            S.cr_lost++;
            break;
        case PHX_CK_REC_ROLLBACK:
            cr_rollback(r);
            break;
        case PHX_CK_REC_OWN: {
            int partial = !!(a->flags & PHX_CK_D_PARTIAL);
            /* Under mlog the round's begin (partial) or the rollback
             * (global) reaches the node's partial-round machine before
             * any restore, as PHX_CR_PARTIAL_BEGIN does. */
            if (x->rec)
                ml_rec_drain(r, partial ? phx_ml_rec_partial_begin(x->rec, S.ml_since[a->round])
                                        : phx_ml_rec_on_rollback(x->rec));
            app_on_local_decide(r);
            if (partial)   /* survivors keep their state and links */
                break;
            int live = n - x->cr_ndead;
            S.cr_marks += (uint64_t)(live - 1);
            x->busy = (S.now > x->busy ? S.now : x->busy) + (uint64_t)(live - 1) * S.c.send_cost;
            uint64_t t = x->tx_free > S.now ? x->tx_free : S.now;
            x->tx_free = t + bytes_ns(24.0 * (live - 1), S.c.bw_gbps);   /* header-only frames */
            x->busy += bytes_ns(S.c.state_mb * 1048576.0, S.c.restore_gbps);
            x->hold = x->busy;   /* core/cr*.c restores on the communication thread */
            break;
        }
        case PHX_CK_REC_SHIP: {
            int k = cr_moving_to(a->x, a->dst), dx = a->x;
            if (S.c.cr_ship_copy)
                cr_send(r, a->dst, CR_XFER, a->round, &dx, sizeof dx, (uint64_t)(slice * CR_SLICES));
            else
                for (int s = 0; s < k; s++)
                    cr_send(r, a->dst, CR_XFER, a->round, &dx, sizeof dx, (uint64_t)slice);
            break;
        }
        case PHX_CK_REC_HELD:
        case PHX_CK_REC_XFER:
            x->busy = (S.now > x->busy ? S.now : x->busy) +
                      (uint64_t)cr_moving_to(a->x, r) * bytes_ns(slice, S.c.restore_gbps);
            x->hold = x->busy;
            break;
        case PHX_CK_REC_TABLE:   /* the simulator routes by S.cr_loc already */
            break;
        case PHX_CK_REC_DONE:
            cr_send(r, a->dst, CR_DONE, a->round, NULL, 0, 16);
            break;
        case PHX_CK_REC_GO:
            S.cr_last_done = S.now;
            for (int y = 0; y < n; y++)
                if (y != r && !x->ck_dead[y])
                    cr_send(r, y, CR_GO, a->round, NULL, 0, 16);
            cr_send(r, r, CR_GO, a->round, NULL, 0, 0);
            if (S.c.stop_early && !S.task && S.now + 2 * S.c.delta < S.c.until)
                S.c.until = S.now + 2 * S.c.delta;   /* as after the last notice */
            break;
        case PHX_CK_REC_RESUME:
            x->cr_rec = 0;
            x->cr_go_at = S.now;
            app_on_go(r);
            break;
        }
    }
    phx_ck_rec_out_free(o);
}

static void cr_deliver(int r, const ev_t *e)
{
    node_t *x = &S.nd[r];
    int type = (int)(e->tag & 0xff), round = (int)((e->tag >> 8) & 0xfffff), n = S.c.n;
    phx_ck_rec_view_t v = cr_view(x);
    phx_ck_rec_out_t o = { 0 };
    switch (type) {
    case CR_STATE: {
        memset(S.cr_scratch, 0, (size_t)n);
        for (int i = 0; i < round; i++)
            S.cr_scratch[((const int *)e->buf)[i]] = 1;
        int pr = ((const int *)e->buf)[round];
        if (r != e->src)
            x->busy += bytes_ns((double)n, S.c.restore_gbps);   /* copying n flags */
        phx_ck_rec_on_report(x->ck, &v, e->src, S.cr_scratch, 1, pr, &o);
        break;
    }
    case CR_DECIDE: {
        int flags = (int)(e->tag >> 28) & 7;
        if (round >= S.ml_nsince || !S.ml_since[round] ||
            !phx_ck_rec_on_decide(x->ck, &v, round, S.ml_since[round], 1, flags))
            return;   /* stale: we know a newer failure */
        x->cr_decided = round;
        x->cr_partial = !!(flags & PHX_CK_D_PARTIAL);
        cr_progress(r);   /* copies shipped before this DECIDE arrived count (the runtime keeps them too) */
        return;
    }
    case CR_XFER: {
        int d = *(const int *)e->buf, i;
        if (round != x->cr_ndead)
            return;
        for (i = 0; i < x->ck_nxg && x->ck_xg[i].x != d; i++)
            ;
        if (i == x->ck_nxg) {
            if (x->ck_nxg == x->ck_cxg) {
                x->ck_cxg = x->ck_cxg ? 2 * x->ck_cxg : 2;
                x->ck_xg = xrealloc(x->ck_xg, sizeof *x->ck_xg * (size_t)x->ck_cxg);
            }
            x->ck_xg[x->ck_nxg++] = (ck_xgot_t){ d, 0 };
        }
        x->ck_xg[i].got++;
        if (x->cr_decided == x->cr_ndead)
            cr_rollback(r);   /* a shipped copy arrived: the machine's restore goes on */
        return;
    }
    case CR_DONE:
        phx_ck_rec_on_done(x->ck, &v, e->src, round, &o);
        break;
    case CR_GO:
        phx_ck_rec_on_go(x->ck, &v, round, &o);
        break;
    }
    cr_run(r, &o);
}

static void cr_setup(const int *ring)
{
    int n = S.c.n;
    size_t nloc = (size_t)n * CR_SLICES;
    S.cr_buddy = malloc(sizeof(int) * (size_t)n);
    S.cr_loc0 = malloc(sizeof(int) * nloc);
    S.cr_loc = malloc(sizeof(int) * nloc);
    S.cr_loc_new = malloc(sizeof(int) * nloc);
    S.cr_keep = malloc(sizeof(int) * nloc);
    S.cr_scratch = calloc((size_t)n, 1);
    S.cr_have = calloc((size_t)n, 1);
    uint8_t *none = calloc((size_t)n, 1);
    if (!S.cr_buddy || !S.cr_loc0 || !S.cr_loc || !S.cr_loc_new || !S.cr_keep || !S.cr_scratch || !S.cr_have ||
        !none)
        die("out of memory", PHX_ENOMEM);
    /* buddy = next rank on the ring, as the epoch before the loss stored it;
     * phx_ck_buddy walks the ring per call, so only its first step here */
    for (int i = 0; i < n; i++)
        S.cr_buddy[ring[i]] = ring[(i + 1) % n];
    if (n <= 4096)   /* check the shortcut against the real function */
        for (int r = 0; r < n; r++)
            if (phx_ck_buddy(n, ring, none, r) != S.cr_buddy[r])
                die("ckpt buddy differs", PHX_EINVAL);
    for (size_t i = 0; i < nloc; i++)
        S.cr_loc0[i] = S.cr_loc[i] = (int)(i / CR_SLICES);
    /* The machine's loc_e: the epoch's table (every run starts from a
     * commit with every task at home). */
    S.cr_loc_e = S.cr_loc0;
    free(none);
    for (int r = 0; r < n; r++) {
        S.nd[r].cr_decided = -1;
        int rc = phx_ck_rec_create(n, r, &S.nd[r].ck);
        if (rc)
            die("ckpt recover create", rc);
    }
}

/* The notices queued during a detector call, handed on once it returned. */
static void flush_deaths(void)
{
    for (size_t i = 0; i < S.dqn; i++) {
        int r = S.dq[i].node, d = S.dq[i].rank;
        if (!S.first_notice[d] || S.now < S.first_notice[d])
            S.first_notice[d] = S.now ? S.now : 1;
        if (S.now > S.last_notice[d])
            S.last_notice[d] = S.now;
        /* Once every scheduled crash is known everywhere, only 2 delta
         * more are simulated (late fencing, repeated notices). */
        if (++S.notices[d] == (uint32_t)(S.c.n - S.nsched) && ++S.ncomplete == S.nsched &&
            S.c.stop_early && !S.c.cr && S.now + 2 * S.c.delta < S.c.until)
            S.c.until = S.now + 2 * S.c.delta;
        node_t *x = &S.nd[r];
        if (x->era) {
            int rc = phx_ft_era_on_failure(x->era, d);
            if (rc < 0)
                die("era on_failure", rc);
        }
        if (x->td && S.c.td->fault_tolerant)
            S.c.td->on_failure(x->td, d);
        if (x->rec)
            ml_rec_drain(r, phx_ml_rec_on_failure(x->rec, d));
        if (S.c.cr)
            cr_on_failure(r, d);
    }
    S.dqn = 0;
}

static void hb_after(int r, int rc, const char *what)
{
    if (rc < 0 && rc != PHX_EFENCED)
        die(what, rc);
    flush_deaths();
    hb_rearm(r);
}

static int known_dead(const node_t *x, int r) { return x->hb && phx_ft_hb_is_dead(x->hb, r); }

/* ---- ERA glue (core/agree.c) ----------------------------------------------- */

static int cb_era_send(void *ctx, int dst, const void *buf, size_t len)
{
    int src = (int)(intptr_t)ctx;
    int type = phx_ft_era_msg_type(buf, len);
    if (!S.nd[src].crashed && type)
        S.nd[src].era_type[type - 1]++;
    net_send(src, dst, EV_ERA, 0, buf, len, S.nd[src].depth + 1);
    return 0;
}

static void cb_era_decided(void *ctx, uint64_t gid, uint64_t aid, const phx_ft_era_value_t *v,
                           const phx_ft_rankset_t *failed, int rc)
{
    (void)gid, (void)aid, (void)failed, (void)rc;
    node_t *x = &S.nd[(int)(intptr_t)ctx];
    x->era_decided_at = S.now;
    x->era_ndecided++;
    if (x->era_ndecided > 1 && x->era_value != v->w[0])
        S.era_split = 1;
    x->era_value = v->w[0];
    if ((int)x->depth > S.era_depth)
        S.era_depth = (int)x->depth;
    /* After the era sent what the decision makes it send, as the runtime's
     * kill in its decided callback. */
    crash_point((int)(intptr_t)ctx, EV_DECIDED, (uint32_t)x->era_ndecided);
}

/* A shrink's outcome as a value: survivors agree iff id and size agree. */
static void cb_era_shrunk(void *ctx, uint64_t gid, uint64_t aid, phx_ft_group_t *newg,
                          const phx_ft_rankset_t *failed, int rc)
{
    phx_ft_era_value_t v;
    if (!newg)
        die("shrink", rc < 0 ? rc : PHX_ENOMEM);
    S.shrunk_size = phx_ft_group_size(newg);
    phx_ft_era_value_u64(&v, phx_ft_group_id(newg) ^ (uint64_t)S.shrunk_size);
    cb_era_decided(ctx, gid, aid, &v, failed, rc);
}

/* ---- termination glue (core/term.c) --------------------------------------- */

static void cb_td_send(void *ctx, int dst, const void *msg, size_t len)
{
    S.td_ctrl++;
    net_send((int)(intptr_t)ctx, dst, EV_TDC, 0, msg, len, 0);
}

static void cb_td_declare(void *ctx)
{
    node_t *x = &S.nd[(int)(intptr_t)ctx];
    if (x->td_declared)
        return;
    x->td_declared = 1;
    S.td_declared++;
    /* Work lost with a crashed node is legitimately gone; anything a live
     * node holds, runs or will receive is not. */
    if (S.app_inflight || S.td_active_nodes || S.nheld ||
        (!S.ncrashed && S.td_hops_done < S.c.td_hops))
        S.td_premature++;
    S.td_last_declare = S.now;
}

static void cb_td_fatal(void *ctx, int code, const char *why)
{
    (void)ctx, (void)code, (void)why;
    S.td_fatal++;
}

static void app_send(int src, int dst, uint32_t hops, const uint8_t *pb)
{
    if (S.nd[src].crashed)
        return;
    S.inflight_to[dst]++;
    if (!S.nd[dst].crashed)
        S.app_inflight++;   /* work still to do: only what a live node will get */
    net_send(src, dst, EV_APP, hops, pb, S.c.td->pb_size, 0);
}

static void cb_td_release(void *ctx, uint64_t token, const uint8_t *pb)
{
    (void)ctx;
    held_t h = S.held[token];
    S.nheld--;
    app_send(h.src, h.dst, h.hops, pb);
}

/* The token workload of Theorem 1 (001_*): each hop goes to a uniform
 * rank; a self-hop is local work. Runs as one task on node r. */
static void td_task(int r, uint32_t hops, int from)
{
    node_t *x = &S.nd[r];
    while (hops > 0) {
        int dst = S.c.td_ring ? (r + 1) % S.c.n : (int)rnd_below((uint64_t)S.c.n);
        hops--;
        S.td_hops_done++;
        if (dst == r)
            continue;
        uint8_t pb[PHX_TD_PB_MAX];
        if (S.heldtot == S.heldcap) {
            S.heldcap = S.heldcap ? 2 * S.heldcap : 64;
            S.held = xrealloc(S.held, S.heldcap * sizeof *S.held);
        }
        uint64_t token = S.heldtot++;
        S.held[token] = (held_t){ r, dst, hops };
        S.nheld++;
        int rc = S.c.td->on_send(x->td, dst, token, pb);
        if (rc < 0)
            die("td on_send", rc);
        if (rc == 0) {
            S.nheld--;
            app_send(r, dst, hops, pb);
        }
        break;
    }
    if (hops == 0)
        S.td_last_task = S.now;
    if (from >= 0)
        S.c.td->on_processed(x->td, from);
    x->td_active = 0;
    S.td_active_nodes--;
    S.c.td->on_idle(x->td);
}

/* ---- failures ---------------------------------------------------------------- */

static void crash(int r)
{
    node_t *x = &S.nd[r];
    if (x->crashed)
        return;
    x->crashed = 1;
    S.ncrashed++;
    if (!S.t_first_crash)
        S.t_first_crash = S.now ? S.now : 1;
    app_on_crash();
    if (x->td_active) {
        x->td_active = 0;
        S.td_active_nodes--;
    }
    if (S.inflight_to)
        S.app_inflight -= S.inflight_to[r];
    /* A killed process's sockets reset: its observer's transport reports it. */
    if (S.c.reset && x->hb) {
        int o = phx_ft_hb_observer(x->hb);
        if (o != r)
            push((ev_t){ .t = S.now + latency(), .kind = EV_HINT, .src = r, .dst = o });
    }
}

/* ---- dispatch ---------------------------------------------------------------- */

static void deliver(ev_t *e)
{
    node_t *x = &S.nd[e->dst];
    switch (e->kind) {
    case EV_HB:
        if (x->fenced)
            return;
        hb_after(e->dst, phx_ft_hb_on_msg(x->hb, e->src, e->tag, pl_view(e->buf, e->len), e->len,
                                          local_of(x, S.now)),
                 "hb on_msg");
        return;
    case EV_HINT:
        if (x->hb && !x->fenced)
            hb_after(e->dst, phx_ft_hb_suspect(x->hb, e->src, local_of(x, S.now)), "hb suspect");
        return;
    case EV_TIMER:
        if (x->fenced || e->t != x->timer_at)
            return;
        x->timer_at = NEVER;
        hb_after(e->dst, phx_ft_hb_tick(x->hb, local_of(x, S.now)), "hb tick");
        return;
    case EV_ERA: {
        if (known_dead(x, e->src))
            return;
        if (e->depth > x->depth)
            x->depth = e->depth;
        int rc = phx_ft_era_on_msg(x->era, e->src, e->buf, e->len);
        if (rc < 0)
            die("era on_msg", rc);
        return;
    }
    case EV_ERA_START: {
        phx_ft_era_value_t v;
        phx_ft_era_value_u64(&v, (uint64_t)e->dst * 2654435761u);
        int rc = S.c.era_shrink ? phx_ft_ulfm_shrink(x->era, x->world, e->tag)
                                : phx_ft_era_start(x->era, x->world, e->tag, &v, PHX_FT_ERA_MIN);
        if (rc < 0)
            die(S.c.era_shrink ? "shrink" : "era start", rc);
        return;
    }
    case EV_TDC:
        if (known_dead(x, e->src) || !x->td)
            return;
        if (S.c.td->on_ctrl(x->td, e->src, e->buf, e->len) < 0)
            die("td on_ctrl", PHX_EPROTO);
        return;
    case EV_BC: {
        /* hb's T5 relay step on the immutable topology (ft/hb/bcast.h): a
         * copy travels its own tree only, so no copy reaches a node twice
         * and hb's duplicate filter has nothing to do here. */
        if (!S.bc_got[e->dst]) {
            S.bc_got[e->dst] = 1;
            S.bc_last = S.now;
            if (e->depth > S.bc_depth)
                S.bc_depth = e->depth;
        }
        phx_ft_bcast_hop_t hops[64];
        int nh = phx_ft_bcast_forward(S.bc, e->dst, e->tag >> 8, e->tag & 0xff, hops, 64);
        if (nh < 0)
            die("bcast forward", nh);
        for (int i = 0; i < nh; i++)
            if (!S.bc_dead[hops[i].dst])
                net_send(e->dst, hops[i].dst, EV_BC, (uint32_t)hops[i].cube << 8 | hops[i].tree,
                         NULL, 0, e->depth + 1);
        return;
    }
    case EV_CR:
        cr_deliver(e->dst, e);
        return;
    case EV_ML:
        ml_deliver(e->dst, e);
        return;
    case EV_APP:
        S.app_inflight--;
        S.inflight_to[e->dst]--;
        if (known_dead(x, e->src))
            return;
        x->td_active = 1;
        S.td_active_nodes++;
        S.c.td->on_recv(x->td, e->src, e->buf);
        x->busy += S.c.task;   /* the hop's work: its send leaves after it */
        S.now = x->busy;
        td_task(e->dst, e->tag, e->src);
        return;
    }
}

static void drop(ev_t *e)
{
    if (e->kind == EV_APP)
        S.inflight_to[e->dst]--;
    ev_free(e);
}

static void process(ev_t *e)
{
    node_t *x = &S.nd[e->dst];
    if (e->kind != EV_TIMER && e->kind != EV_HINT && e->kind != EV_ERA_START &&
        !(e->kind == EV_ML && ((e->tag & 0xff) == ML_STEP || (e->tag & 0xff) == ML_KICK))) {
        x->busy = S.now + S.c.cost;
        S.now = x->busy;   /* its sends leave once it is processed */
    }
    S.events++;
    deliver(e);
    ev_free(e);
}

/* A run of RDONE / RFIN frames of one round queued for a CPU: their
 * senders, oldest first (src[h..n)). The round's n(n - 1) frames wait
 * mostly here (each CPU takes n - 1 of them, 2 us each): 4 bytes each
 * instead of a 32-byte queue entry. */
typedef struct mlq {
    uint32_t h, n, cap;
    int src[];
} mlq_t;

static int ml_is_ctl(const ev_t *e)
{
    return e->kind == EV_ML && !e->len && ((e->tag & 0xff) == ML_RDONE || (e->tag & 0xff) == ML_RFIN);
}

static void q_put(node_t *x, const ev_t *e)
{
    if (ml_is_ctl(e) && x->qn) {
        qent_t *t = &x->q[(x->qh + x->qn - 1) & (x->qcap - 1)];
        if (t->kind == EV_MLQ && t->tag == e->tag) {
            mlq_t *b = (mlq_t *)t->buf;
            if (b->n == b->cap && b->h >= b->cap / 2) {
                memmove(b->src, b->src + b->h, (b->n - b->h) * sizeof *b->src);
                b->n -= b->h;
                b->h = 0;
            } else if (b->n == b->cap) {
                b->cap *= 2;
                b = xrealloc(b, sizeof *b + b->cap * sizeof *b->src);
                t->buf = (uint8_t *)b;
            }
            b->src[b->n++] = e->src;
            if (S.hn + ++S.qn + S.mlb_fly > S.pend_peak)
                S.pend_peak = S.hn + S.qn + S.mlb_fly;
            return;
        }
    }
    if (x->qn == x->qcap) {
        uint32_t cap = x->qcap ? 2 * x->qcap : 4;
        qent_t *q = malloc(cap * sizeof *q);
        if (!q)
            die("out of memory", PHX_ENOMEM);
        for (uint32_t i = 0; i < x->qn; i++)
            q[i] = x->q[(x->qh + i) & (x->qcap - 1)];
        free(x->q);
        x->q = q;
        x->qcap = cap;
        x->qh = 0;
    }
    qent_t qe = { .buf = e->buf, .src = e->src, .tag = e->tag, .len = e->len, .depth = e->depth, .kind = e->kind };
    if (ml_is_ctl(e)) {
        mlq_t *b = xrealloc(NULL, sizeof *b + 4 * sizeof *b->src);
        *b = (mlq_t){ .h = 0, .n = 1, .cap = 4 };
        b->src[0] = e->src;
        qe.kind = EV_MLQ;
        qe.buf = (uint8_t *)b;
    }
    x->q[(x->qh + x->qn++) & (x->qcap - 1)] = qe;
    if (S.hn + ++S.qn + S.mlb_fly > S.pend_peak)
        S.pend_peak = S.hn + S.qn + S.mlb_fly;
}

/* The oldest arrival, now. A drained ring past 16 entries is given back:
 * the peak's backlog would otherwise stay allocated at every node. */
static ev_t q_take(node_t *x)
{
    qent_t *q = &x->q[x->qh];
    ev_t e = { .t = S.now, .kind = q->kind, .src = q->src, .dst = (int)(x - S.nd), .tag = q->tag,
               .len = q->len, .depth = q->depth, .buf = q->buf };
    if (q->kind == EV_MLQ) {
        mlq_t *b = (mlq_t *)q->buf;
        e.kind = EV_ML;
        e.buf = NULL;
        e.len = 0;
        e.src = b->src[b->h++];
        if (b->h < b->n) {
            S.qn--;
            return e;
        }
        free(b);
    }
    x->qh = (x->qh + 1) & (x->qcap - 1);
    S.qn--;
    if (!--x->qn && x->qcap > 16) {
        free(x->q);
        x->q = NULL;
        x->qcap = x->qh = 0;
    }
    return e;
}

/* A node's CPU handles one message at a time: arrivals while it is busy
 * (or while older ones wait) join its FIFO queue, and one EV_WAKE at the
 * end of each job takes the next. Timers do not wait (their sends do, in
 * net_send). */
static void run(void)
{
    while (S.hn) {
        ev_t e = pop();
        if (e.t > S.c.until) {
            ev_free(&e);
            break;
        }
        S.now = e.t;
        if (e.kind == EV_MLB && !mlb_arrive(&e))
            continue;
        node_t *x = &S.nd[e.dst];
        if (e.kind == EV_CRASH) {
            crash(e.dst);
            continue;
        }
        if (x->crashed) {
            if (e.kind == EV_WAKE) {
                x->wake = 0;
                while (x->qn) {
                    ev_t q = q_take(x);
                    drop(&q);
                }
            }
            drop(&e);
            continue;
        }
        if (e.kind == EV_TIMER && e.t == x->timer_at && x->hold > e.t) {
            x->timer_at = x->hold;   /* a held thread runs no timer either */
            push((ev_t){ .t = x->hold, .kind = EV_TIMER, .src = e.src, .dst = e.dst });
            continue;
        }
        if (e.kind == EV_WAKE) {
            x->wake = 0;
            ev_t m = q_take(x);
            process(&m);
        } else if (e.kind != EV_TIMER && (e.t < x->busy || x->qn)) {
            q_put(x, &e);
        } else {
            process(&e);
        }
        if (x->qn && !x->wake && !x->crashed) {
            x->wake = 1;
            push((ev_t){ .t = x->busy > S.now ? x->busy : S.now, .kind = EV_WAKE, .dst = (int)(x - S.nd) });
        }
    }
    /* Drain what is left so memory is accounted honestly. */
    while (S.hn) {
        ev_t e = pop();
        ev_free(&e);
    }
}

/* ---- setup ------------------------------------------------------------------- */

static void setup(void)
{
    int n = S.c.n;
    S.nd = calloc((size_t)n, sizeof *S.nd);
    S.first_notice = calloc((size_t)n, sizeof *S.first_notice);
    S.last_notice = calloc((size_t)n, sizeof *S.last_notice);
    S.notices = calloc((size_t)n, sizeof *S.notices);
    S.inflight_to = calloc((size_t)n, sizeof *S.inflight_to);
    if (!S.inflight_to || !S.nd || !S.first_notice || !S.last_notice || !S.notices)
        die("out of memory", PHX_ENOMEM);
    int *ring = NULL;
    if (S.c.hb) {
        uint32_t *host = malloc(sizeof *host * (size_t)n);
        ring = malloc(sizeof *ring * (size_t)n);
        if (!host || !ring)
            die("out of memory", PHX_ENOMEM);
        for (int i = 0; i < n; i++)   /* host id = lowest rank on it, as core/ft.c */
            host[i] = (uint32_t)(i / S.c.host_size * S.c.host_size);
        int rc = phx_ft_ring_build(n, host, ring);
        if (rc < 0)
            die("ring build", rc);
        free(host);
    }
    phx_ft_hb_shared_t *hsh = NULL;   /* one ring and topology cache for all nodes */
    if (ring) {
        int rc = phx_ft_hb_shared_create(n, ring, &hsh);
        if (rc < 0)
            die("hb shared", rc);
    }
    int *all = NULL;
    if (S.c.era_k) {
        all = malloc(sizeof *all * (size_t)n);
        if (!all)
            die("out of memory", PHX_ENOMEM);
        for (int i = 0; i < n; i++)
            all[i] = i;
    }
    for (int i = 0; i < n; i++) {
        node_t *x = &S.nd[i];
        void *ctx = (void *)(intptr_t)i;
        x->timer_at = NEVER;
        x->off = S.c.skew ? (int64_t)rnd_below(S.c.skew + 1) : 0;
        x->drift = S.c.drift_ppm ? (int32_t)rnd_below(2 * (uint64_t)S.c.drift_ppm + 1) - S.c.drift_ppm : 0;
        if (S.c.hb) {
            phx_ft_hb_cfg_t hc = { .nranks = n, .rank = i, .incarnation = 1, .shared = hsh,
                                   .delta_ns = S.c.delta, .eta_ns = S.c.eta,
                                   .bcast_list_max = S.c.bcast_list_max };
            phx_ft_hb_env_t he = { .ctx = ctx, .send = cb_hb_send, .on_dead = cb_hb_dead,
                                   .on_fenced = cb_hb_fenced };
            int rc = phx_ft_hb_create(&hc, &he, &x->hb);
            if (rc < 0)
                die("hb create", rc);
        }
        if (S.c.era_k) {
            phx_ft_era_env_t ee = { .ctx = ctx, .send = cb_era_send, .decided = cb_era_decided,
                                    .shrunk = cb_era_shrunk };
            int rc = phx_ft_era_create(&ee, i, n, &x->era);
            if (rc < 0)
                die("era create", rc);
            if ((rc = phx_ft_group_create_borrowed(x->era, 1, all, n, &x->world)) < 0)
                die("group create", rc);
        }
        if (S.c.td) {
            phx_td_env_t te = { .rank = i, .size = n, .ctx = ctx, .send = cb_td_send,
                                .declare = cb_td_declare, .fatal = cb_td_fatal,
                                .release = cb_td_release };
            int rc = S.c.td->create(&te, &x->td);
            if (rc < 0)
                die("td create", rc);
        }
    }
    if (S.c.cr) {
        if (!ring)
            die("--cr needs the detector (--hb=1)", PHX_EINVAL);
        cr_setup(ring);
    }
    if (S.c.app) {
        S.task = calloc((size_t)n, sizeof *S.task);
        if (!S.task)
            die("out of memory", PHX_ENOMEM);
        S.nbehind = -1;   /* no crash yet */
        for (int r = 0; r < n; r++) {
            S.task[r].host = r;
            push((ev_t){ .t = S.c.app_start, .kind = EV_ML, .src = r, .dst = r, .tag = ML_KICK });
            if (!S.c.mlog)
                continue;
            /* one worker queue: one task per node; 256 dets: acks come
             * back within a few message delays, a step is milliseconds */
            phx_ml_cfg_t mc = { .rank = r, .n = n, .inc = 1, .nq = 1, .qcap = 256 };
            if (!(S.nd[r].ml = phx_ml_create(&mc)))
                die("mlog create", PHX_ENOMEM);
            phx_ml_rec_cfg_t rc = { .n = n, .rank = r, .mode = PHX_MLD_CAUSAL };
            int e = phx_ml_rec_create(&rc, &S.nd[r].rec);
            if (e < 0)
                die("mlog rec create", e);
        }
    }
    free(ring);
    phx_ft_hb_shared_release(hsh);   /* the nodes hold their references */
    /* all stays: every world group borrows it until exit. */
    /* Start: heartbeats after the bootstrap barrier (each node's own clock). */
    for (int i = 0; i < n; i++) {
        node_t *x = &S.nd[i];
        if (x->hb) {
            int rc = phx_ft_hb_start(x->hb, local_of(x, 0));
            if (rc < 0)
                die("hb start", rc);
            hb_rearm(i);
        }
        for (int k = 0; k < S.c.era_k; k++)
            push((ev_t){ .t = S.c.era_at + (uint64_t)k * S.c.delta * 10 + (S.c.skew ? rnd_below(S.c.skew) : 0),
                         .kind = EV_ERA_START, .src = i, .dst = i, .tag = (uint32_t)k });
        if (x->td)
            S.c.td->start(x->td, i == 0);
    }
    if (S.c.td) {
        S.nd[0].td_active = 1;
        S.td_active_nodes = 1;
        td_task(0, (uint32_t)S.c.td_hops, -1);
    }
}

/* Broadcast-only mode: rank 0 broadcasts one notice over the members it
 * believes alive (all but bcast_known random ranks, which are dead); the
 * --crash* failures are unknown to it. No heartbeat state: O(1) per node. */
static void bcast_setup(void)
{
    int n = S.c.n, nd = 0;
    int *dl = malloc(sizeof *dl * (size_t)n);
    S.bc_dead = calloc((size_t)n, 1);
    S.bc_got = calloc((size_t)n, 1);
    if (!dl || !S.bc_dead || !S.bc_got)
        die("out of memory", PHX_ENOMEM);
    while (nd < S.c.bcast_known && nd < n - 1) {
        int r = 1 + (int)rnd_below((uint64_t)n - 1);
        if (!S.bc_dead[r]) {
            S.bc_dead[r] = 1;
            dl[nd++] = r;
            S.nd[r].crashed = 1;
            S.ncrashed++;
        }
    }
    int rc = phx_ft_bcast_create(n, 0, dl, (size_t)nd, &S.bc);
    if (rc < 0)
        die("bcast create", rc);
    free(dl);
    phx_ft_bcast_hop_t hops[64];
    int nh = phx_ft_bcast_start(S.bc, hops, 64);
    S.bc_got[0] = 1;
    for (int i = 0; i < nh; i++)
        net_send(0, hops[i].dst, EV_BC, (uint32_t)hops[i].cube << 8 | hops[i].tree, NULL, 0, 1);
}

/* ---- command line ------------------------------------------------------------ */

static void usage(void)
{
    fprintf(stderr,
            "usage: phx-sim [--n=N] [--seed=S] [--until-ms=T]\n"
            "  network: --lat-us=L --jitter-us=J --dist=const|uniform|exp --fifo=0|1\n"
            "           --cost-us=C (per received message) --send-cost-us=C --skew-us=O --drift-ppm=D\n"
            "  detector: --hb=0|1 --delta-ms=D --eta-ms=E --host-size=K --reset=0|1\n"
            "            --bcast-list-max=L (whole D in a broadcast up to L ranks; 0: 64, <0: never)\n"
            "  failures: --crash=R@MS --crash-random=F@MS --crash-adjacent=F@MS --crash-host=H@MS\n"
            "            --crash-on=R:hb|bcast|era|td:K (after R's K-th message of that protocol,\n"
            "                          or BCASTMSG copy; R = -1: the first rank to get there)\n"
            "            --crash-on=R:decided:K (on R's K-th ERA decision, once the era sent)\n"
            "            --partition=FRAC@MS:MS (ranks below FRAC*n cut off from the rest)\n"
            "  agreement: --era=K (K agreements, first at --era-at-ms, 10*delta apart)\n"
            "             --shrink=1 (each one a shrink of the world group)\n"
            "  recovery:  --cr=1 (recovery=cr after each failure) --state-mb=S (per node, 64)\n"
            "             --bw-gbps=B (NIC, 10) --restore-gbps=R (deserialising, 8)\n"
            "             --cr-ship=slices|copy (a buddy ships the moving slices, or the whole copy)\n"
            "             --mlog=1 (recovery=mlog-causal over ft/mlog; implies --cr=1 --app=1)\n"
            "             --app=1: a 1-D stencil on the rank ring from --app-start-ms (2000, the\n"
            "             last checkpoint), --app-iter-us (10000) per step, --app-bytes (1024)\n"
            "             --ml-test-swap=1 (tests: corrupt a handed-back det pair; --check must fail)\n"
            "  termination: --td=NAME --td-hops=K --task-us=W (token of Theorem 1, 001_*; W per hop;\n"
            "               --td-walk=uniform|ring: next hop uniform, or rank+1 as apps/tdk ring)\n"
            "  --check: exit 1 if a property fails; --deadset-check=0 skips the dead-set one\n"
            "  --stop-early=1: end 2 delta after every crash is known to every survivor\n"
            "  --bcast-only=K: one hypercube broadcast from rank 0 (ft/hb/bcast.h) with K ranks\n"
            "                  in its D; --crash* failures are unknown to it (no heartbeats)\n");
    exit(2);
}

typedef struct fail_spec { int what, a; uint64_t t; } fail_spec_t;   /* what: 0 rank, 1 random, 2 adjacent, 3 host */

static uint64_t ms_arg(const char *s) { return (uint64_t)(strtod(s, NULL) * (double)MS); }

static void push_crash(uint64_t t, int r)
{
    S.nsched++;
    push((ev_t){ .t = t, .kind = EV_CRASH, .dst = r });
}

static void schedule_failures(const fail_spec_t *fs, int nfs, const int *ring)
{
    int n = S.c.n;
    for (int i = 0; i < nfs; i++) {
        const fail_spec_t *f = &fs[i];
        if (f->what == 0) {
            push_crash(f->t, f->a);
        } else if (f->what == 1) {   /* F distinct random ranks: partial Fisher-Yates */
            int *p = malloc(sizeof *p * (size_t)n);
            if (!p)
                die("out of memory", PHX_ENOMEM);
            for (int j = 0; j < n; j++)
                p[j] = j;
            for (int j = 0; j < f->a && j < n; j++) {
                int k = j + (int)rnd_below((uint64_t)(n - j));
                int t = p[j];
                p[j] = p[k];
                p[k] = t;
                push_crash(f->t, p[j]);
            }
            free(p);
        } else if (f->what == 2) {   /* F consecutive ring positions: the seed's worst case */
            int start = (int)rnd_below((uint64_t)n);
            for (int j = 0; j < f->a; j++)
                push_crash(f->t, ring ? ring[(start + j) % n] : (start + j) % n);
        } else {
            for (int j = f->a * S.c.host_size; j < (f->a + 1) * S.c.host_size && j < n; j++)
                push_crash(f->t, j);
        }
    }
}

static int parse(int argc, char **argv, fail_spec_t *fs, int *nfs)
{
    cfg_t *c = &S.c;
    *c = (cfg_t){ .n = 1024, .seed = 1, .until = 0, .lat = 5 * US, .jitter = 0, .cost = 1 * US,
                  .send_cost = 0, .fifo = 1, .hb = 1, .host_size = 1, .delta = 1000 * MS,
                  .era_at = 0, .td_hops = 256, .deadset_check = 1, .part_from = NEVER,
                  .part_to = NEVER, .bcast_known = -1, .state_mb = 64, .bw_gbps = 10,
                  .restore_gbps = 8, .app_start = 2000 * MS, .app_iter = 10 * MS, .app_bytes = 1024 };
    uint64_t until = 0;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i], *v = strchr(a, '=');
        if (strncmp(a, "--", 2))
            usage();
        if (v)
            *v++ = 0;
        a += 2;
        if (!strcmp(a, "check")) { c->check = 1; continue; }
        if (!v)
            usage();
        if (!strcmp(a, "n")) c->n = atoi(v);
        else if (!strcmp(a, "seed")) c->seed = strtoull(v, NULL, 0);
        else if (!strcmp(a, "until-ms")) until = ms_arg(v);
        else if (!strcmp(a, "lat-us")) c->lat = ms_arg(v) / 1000;
        else if (!strcmp(a, "jitter-us")) c->jitter = ms_arg(v) / 1000;
        else if (!strcmp(a, "dist")) c->dist = !strcmp(v, "exp") ? LAT_EXP : !strcmp(v, "uniform") ? LAT_UNIFORM : LAT_CONST;
        else if (!strcmp(a, "fifo")) c->fifo = atoi(v);
        else if (!strcmp(a, "cost-us")) c->cost = ms_arg(v) / 1000;
        else if (!strcmp(a, "send-cost-us")) c->send_cost = ms_arg(v) / 1000;
        else if (!strcmp(a, "skew-us")) c->skew = ms_arg(v) / 1000;
        else if (!strcmp(a, "drift-ppm")) c->drift_ppm = atoi(v);
        else if (!strcmp(a, "hb")) c->hb = atoi(v);
        else if (!strcmp(a, "reset")) c->reset = atoi(v);
        else if (!strcmp(a, "host-size")) c->host_size = atoi(v);
        else if (!strcmp(a, "bcast-list-max")) c->bcast_list_max = atoi(v);
        else if (!strcmp(a, "delta-ms")) c->delta = ms_arg(v);
        else if (!strcmp(a, "eta-ms")) c->eta = ms_arg(v);
        else if (!strcmp(a, "era")) c->era_k = atoi(v);
        else if (!strcmp(a, "shrink")) c->era_shrink = atoi(v);
        else if (!strcmp(a, "cr")) c->cr = atoi(v);
        else if (!strcmp(a, "mlog")) c->mlog = atoi(v);
        else if (!strcmp(a, "app")) c->app = atoi(v);
        else if (!strcmp(a, "app-start-ms")) c->app_start = ms_arg(v);
        else if (!strcmp(a, "app-iter-us")) c->app_iter = ms_arg(v) / 1000;
        else if (!strcmp(a, "app-bytes")) c->app_bytes = (uint32_t)atoi(v);
        else if (!strcmp(a, "ml-test-swap")) c->ml_swap = atoi(v);
        else if (!strcmp(a, "state-mb")) c->state_mb = strtod(v, NULL);
        else if (!strcmp(a, "bw-gbps")) c->bw_gbps = strtod(v, NULL);
        else if (!strcmp(a, "restore-gbps")) c->restore_gbps = strtod(v, NULL);
        else if (!strcmp(a, "cr-ship")) c->cr_ship_copy = !strcmp(v, "copy");
        else if (!strcmp(a, "era-at-ms")) c->era_at = ms_arg(v);
        else if (!strcmp(a, "td")) {
            if (!(c->td = phx_td_find(v))) {
                fprintf(stderr, "phx-sim: unknown detector %s\n", v);
                exit(2);
            }
        } else if (!strcmp(a, "td-hops")) c->td_hops = atoi(v);
        else if (!strcmp(a, "task-us")) c->task = ms_arg(v) / 1000;
        else if (!strcmp(a, "td-walk")) c->td_ring = !strcmp(v, "ring");
        else if (!strcmp(a, "deadset-check")) c->deadset_check = atoi(v);
        else if (!strcmp(a, "stop-early")) c->stop_early = atoi(v);
        else if (!strcmp(a, "bcast-only")) c->bcast_known = atoi(v), c->hb = 0;
        else if (!strcmp(a, "partition")) {
            char *at = strchr(v, '@'), *co = at ? strchr(at, ':') : NULL;
            if (!co)
                usage();
            c->part_frac = strtod(v, NULL);
            c->part_from = ms_arg(at + 1);
            c->part_to = ms_arg(co + 1);
        } else if (!strcmp(a, "crash-on")) {
            char kind[16];
            crash_on_t *o = &c->con[c->ncon];
            if (c->ncon == MAX_CRASH_ON || sscanf(v, "%d:%15[a-z]:%u", &o->rank, kind, &o->k) != 3 || !o->k)
                usage();
            o->kind = !strcmp(kind, "hb") ? EV_HB : !strcmp(kind, "bcast") ? EV_BCASTMSG
                    : !strcmp(kind, "era") ? EV_ERA : !strcmp(kind, "decided") ? EV_DECIDED : EV_TDC;
            c->ncon++;
        } else if (!strncmp(a, "crash", 5)) {
            char *at = strchr(v, '@');
            if (!at || *nfs == 64)
                usage();
            int what = !strcmp(a, "crash") ? 0 : !strcmp(a, "crash-random") ? 1
                     : !strcmp(a, "crash-adjacent") ? 2 : !strcmp(a, "crash-host") ? 3 : -1;
            if (what < 0)
                usage();
            fs[(*nfs)++] = (fail_spec_t){ what, atoi(v), ms_arg(at + 1) };
        } else {
            usage();
        }
    }
    if (c->n < 2 || c->host_size < 1 || (c->era_k && c->n > PHX_FT_ERA_ENGINE_MAX_RANKS)) {
        fprintf(stderr, "phx-sim: n must be >= 2 (and <= %d with --era: PHX_FT_ERA_ENGINE_MAX_RANKS)\n",
                PHX_FT_ERA_ENGINE_MAX_RANKS);
        exit(2);
    }
    if (!c->eta)
        c->eta = c->delta / 10;
    if (c->mlog)
        c->cr = c->app = 1;
    if (c->app && (!c->cr || !c->fifo || c->n < 3 || !c->app_iter)) {
        fprintf(stderr, "phx-sim: --app/--mlog need --cr=1, --fifo=1, n >= 3, --app-iter-us > 0\n");
        exit(2);
    }
    uint64_t era_end = c->era_k ? c->era_at + (uint64_t)(c->era_k + 1) * 10 * c->delta : 0;
    c->until = until ? until : (c->hb ? (era_end > 20 * c->delta ? era_end : 20 * c->delta) : NEVER);
    S.rng = c->seed;
    return 0;
}

/* ---- results ------------------------------------------------------------------ */

static double ms(uint64_t ns) { return (double)ns / (double)MS; }

static void report(long rss0)
{
    int n = S.c.n, alive = 0, dead_ok = 1, dead_exact = 1, fenced = 0, have_ref = 0;
    uint64_t ref_h = 0;
    int ref_k = 0;
    int *l = S.c.hb ? malloc(sizeof *l * (size_t)n) : NULL;
    if (S.c.hb && !l)
        die("out of memory", PHX_ENOMEM);
    for (int i = 0; i < n; i++) {
        node_t *x = &S.nd[i];
        fenced += x->fenced;
        if (x->crashed || x->fenced)
            continue;
        alive++;
        if (!x->hb)
            continue;
        /* D as an order-free fingerprint: equal sets, equal (count, sum of mixes). */
        int k = phx_ft_hb_dead_list(x->hb, l, (size_t)n);
        uint64_t h = 0;
        for (int j = 0; j < k; j++) {
            uint64_t z = (uint64_t)l[j] * 0x9e3779b97f4a7c15ull;
            h += z ^ (z >> 29);
            if (!S.nd[l[j]].crashed)
                dead_exact = 0;
        }
        if (k != S.ncrashed)
            dead_exact = 0;
        if (!have_ref)
            ref_h = h, ref_k = k, have_ref = 1;
        else if (h != ref_h || k != ref_k)
            dead_ok = 0;
    }
    free(l);
    uint64_t det = 0, notif = 0, last_known = 0;
    int unnotified = 0;
    for (int d = 0; d < n; d++) {
        if (!S.nd[d].crashed)
            continue;
        if (!S.first_notice[d]) {
            unnotified++;
            continue;
        }
        if (S.first_notice[d] - S.t_first_crash > det)
            det = S.first_notice[d] - S.t_first_crash;
        if (S.last_notice[d] - S.t_first_crash > notif)
            notif = S.last_notice[d] - S.t_first_crash;
        if (S.last_notice[d] > last_known)
            last_known = S.last_notice[d];
    }
    /* ERA: every survivor decided every agreement, on one value. */
    int era_ok = 1, era_undecided = 0;
    uint64_t era_last = 0, era_val = 0;
    int have_val = 0;
    for (int i = 0; S.c.era_k && i < n; i++) {
        node_t *x = &S.nd[i];
        if (x->crashed || x->fenced)
            continue;
        if (x->era_ndecided != S.c.era_k) {
            era_undecided++;
            continue;
        }
        if (have_val && x->era_value != era_val)
            era_ok = 0;
        era_val = x->era_value, have_val = 1;
        if (x->era_decided_at > era_last)
            era_last = x->era_decided_at;
    }
    if (era_undecided || S.era_split)
        era_ok = 0;
    /* The new group holds every survivor and leaves out only crashed ranks
     * (one that died after the decision stays in it, as in ULFM). */
    if (S.c.era_shrink && (S.shrunk_size < alive || n - S.shrunk_size > S.ncrashed))
        era_ok = 0;
    uint64_t era_first_start = S.c.era_at;
    long hwm = rss_kb("VmHWM:");
    printf("{\"n\":%d,\"seed\":%" PRIu64 ",\"events\":%" PRIu64 ",\"sim_ms\":%.3f,"
           "\"rss_per_node_bytes\":%.0f,\"crashed\":%d,\"fenced\":%d,\"alive\":%d,"
           "\"dropped\":%" PRIu64 ",\"peak_pending\":%zu",
           n, S.c.seed, S.events, ms(S.now), (double)(hwm - rss0) * 1024.0 / n, S.ncrashed, fenced,
           alive, S.dropped, S.pend_peak);
    if (S.c.hb) {
        phx_ft_hb_stats_t st, sum = { 0 };
        for (int i = 0; i < n; i++) {
            phx_ft_hb_get_stats(S.nd[i].hb, &st);
            sum.bcast_started += st.bcast_started;
            sum.bcast_compact += st.bcast_compact;
            sum.bcast_pull += st.bcast_pull;
            sum.bcast_bypass += st.bcast_bypass;
            sum.state_bytes += st.state_bytes;   /* grows only: the end is the peak */
        }
        printf(",\"hb\":{\"heartbeat\":%" PRIu64 ",\"newobserver\":%" PRIu64 ",\"bcast\":%" PRIu64
               ",\"you_are_dead\":%" PRIu64 ",\"dset\":%" PRIu64 ",\"bcast_per_node\":%.3f,"
               "\"bytes_per_node\":%.0f,\"bcasts\":%" PRIu64 ",\"compact\":%" PRIu64
               ",\"pull\":%" PRIu64 ",\"bypass\":%" PRIu64 ",\"detect_ms\":%.3f,"
               "\"notify_ms\":%.3f,\"unnotified\":%d,\"deadset_agree\":%d,\"deadset_exact\":%d,"
               "\"state_per_node\":%.0f}",
               S.hb_sent[PHX_FT_HB_HEARTBEAT], S.hb_sent[PHX_FT_HB_NEWOBSERVER],
               S.hb_sent[PHX_FT_HB_BCASTMSG], S.hb_sent[PHX_FT_HB_YOU_ARE_DEAD],
               S.hb_sent[PHX_FT_HB_DSET], (double)S.hb_sent[PHX_FT_HB_BCASTMSG] / n,
               (double)S.hb_bytes / n, sum.bcast_started, sum.bcast_compact, sum.bcast_pull,
               sum.bcast_bypass, ms(det), ms(notif), unnotified, dead_ok, dead_exact,
               (double)sum.state_bytes / n);
    }
    /* By type, over every node and over the survivors only (a SIGKILLed
     * runtime node logs no era_stats). */
    uint64_t et[2][3] = { { 0 } };
    for (int i = 0; S.c.era_k && i < n; i++)
        for (int t = 0; t < 3; t++) {
            et[0][t] += S.nd[i].era_type[t];
            if (!S.nd[i].crashed)
                et[1][t] += S.nd[i].era_type[t];
        }
    if (S.c.era_k)
        printf(",\"era\":{\"k\":%d,\"msgs\":%" PRIu64 ",\"msgs_per_node\":%.3f,\"latency_us\":%.3f,"
               "\"depth\":%d,\"undecided\":%d,\"agree\":%d,\"after_notice_us\":%.3f,"
               "\"shrunk_size\":%d,\"up\":%" PRIu64 ",\"decide\":%" PRIu64 ",\"revoke\":%" PRIu64
               ",\"survivors\":{\"up\":%" PRIu64 ",\"decide\":%" PRIu64 ",\"revoke\":%" PRIu64 "}}",
               S.c.era_k, S.msgs[EV_ERA], (double)S.msgs[EV_ERA] / n / S.c.era_k,
               era_last > era_first_start ? (double)(era_last - era_first_start - (uint64_t)(S.c.era_k - 1) * S.c.delta * 10) / US : 0.0,
               S.era_depth, era_undecided, era_ok,
               /* the repair: last decision after the last failure notice */
               era_last > last_known ? (double)(era_last - last_known) / US : 0.0,
               S.shrunk_size, et[0][0], et[0][1], et[0][2], et[1][0], et[1][1], et[1][2]);
    int cr_unfinished = 0;
    if (S.c.cr) {
        uint64_t go = 0;
        for (int i = 0; i < n; i++) {
            node_t *x = &S.nd[i];
            if (x->crashed || x->fenced)
                continue;
            if (!x->cr_go_at)
                cr_unfinished++;
            else if (x->cr_go_at > go)
                go = x->cr_go_at;
        }
        uint64_t t0 = S.t_first_crash;
        printf(",\"cr\":{\"state_mb\":%g,\"rounds\":%d,\"lost\":%" PRIu64 ",\"unfinished\":%d,"
               "\"detect_ms\":%.3f,\"decide_ms\":%.3f,\"done_ms\":%.3f,\"go_ms\":%.3f,"
               "\"msgs\":%" PRIu64 ",\"marks\":%" PRIu64 ",\"bytes_per_node\":%.0f,"
               "\"coord_table_mib\":%.1f}",
               S.c.state_mb, S.cr_rounds, S.cr_lost, cr_unfinished, ms(last_known - t0),
               S.cr_decide_at ? ms(S.cr_decide_at - t0) : -1.0,
               S.cr_last_done ? ms(S.cr_last_done - t0) : -1.0, go ? ms(go - t0) : -1.0, S.cr_msgs,
               S.cr_marks, (double)S.cr_bytes / n, (double)n * n / 1048576.0);
    }
    if (S.task) {
        uint64_t t0 = S.t_first_crash, redo = 0;
        phx_ml_stats_t ms_sum = { 0 }, st;
        uint64_t log_max = 0;
        for (int r = 0; r < n; r++) {
            if (S.nd[r].ml && !S.nd[r].crashed) {
                phx_ml_stats(S.nd[r].ml, &st);
                ms_sum.logged += st.logged;
                ms_sum.logged_bytes += st.logged_bytes;
                ms_sum.dets += st.dets;
                ms_sum.frames_pb += st.frames_pb;
                ms_sum.dets_pb += st.dets_pb;
                ms_sum.dets_stored += st.dets_stored;
                if (st.log_len > log_max)
                    log_max = st.log_len;
            }
        }
        /* the partial-round machines at the end: checkpoints still held,
         * replay phases not ended (live nodes) */
        for (int r = 0; r < n; r++)
            if (!S.nd[r].crashed) {
                S.ml_holds_left += S.nd[r].ml_held;
                S.ml_phases_left += S.nd[r].ml_phase;
            }
        /* work done again: every task under cr, the dead one under mlog */
        int partial = S.ml_partial, dead = -1;
        for (int r = 0; r < n; r++)
            if (S.nd[r].crashed && dead < 0)
                dead = r;
        for (int r = 0; r < n; r++)
            if (!partial || r == dead)
                redo += S.task[r].target;
        printf(",\"app\":{\"mlog\":%d,\"partial\":%d,\"iter_ms\":%.3f,\"target_steps\":%u,"
               "\"caught_ms\":%.3f,\"release_ms\":%.3f,\"redone_node_s\":%.3f,\"msgs\":%" PRIu64
               ",\"local\":%" PRIu64 ",\"dups\":%" PRIu64 ",\"gap\":%d,\"hold_max\":%d,"
               "\"dets_back\":%" PRIu64 ",\"msgs_back\":%" PRIu64 ",\"back_bytes\":%" PRIu64
               ",\"rdone_counted\":%" PRIu64 ",\"acks\":%" PRIu64 ",\"pb_bytes_per_msg\":%.1f,"
               "\"ack_bytes_per_msg\":%.1f,\"logged\":%" PRIu64 ",\"dets\":%" PRIu64
               ",\"dets_stored\":%" PRIu64 ",\"log_max\":%" PRIu64 ",\"order_bad\":%d,"
               "\"rfins\":%" PRIu64 ",\"fallbacks\":%d,\"drops\":%d,\"work_lost\":%d,"
               "\"holds_left\":%d,\"phases_left\":%d}",
               S.c.mlog, partial, ms(S.c.app_iter), dead >= 0 ? S.task[dead].target : 0,
               S.caught_at ? ms(S.caught_at - t0) : -1.0,
               S.ml_release_at ? ms(S.ml_release_at - t0) : -1.0,
               (double)redo * (double)S.c.app_iter / 1e9, S.app_msgs, S.app_local, S.app_dups,
               S.ml_gap, S.ml_hold_max, S.ml_dets_back, S.ml_msgs_back, S.ml_back_bytes,
               S.ml_rdone_marks, S.ml_acks,
               S.app_msgs ? (double)S.ml_pb_bytes / (double)S.app_msgs : 0.0,
               S.app_msgs ? (double)S.ml_ack_bytes / (double)S.app_msgs : 0.0, ms_sum.logged,
               ms_sum.dets, ms_sum.dets_stored, log_max, S.ml_order_bad, S.ml_rfins, S.ml_fallback,
               S.ml_drops, S.ml_work_lost, S.ml_holds_left, S.ml_phases_left);
    }
    if (S.bc) {
        int missed = 0;
        for (int i = 0; i < n; i++)
            missed += !S.nd[i].crashed && !S.bc_got[i];
        printf(",\"bcast_only\":{\"members\":%d,\"k\":%d,\"tolerance\":%d,\"msgs\":%" PRIu64
               ",\"per_node\":%.3f,\"missed\":%d,\"latency_us\":%.3f,\"hops\":%u,\"max_hops\":%d}",
               phx_ft_bcast_members(S.bc), phx_ft_bcast_dim(S.bc), phx_ft_bcast_tolerance(S.bc),
               S.msgs[EV_BC], (double)S.msgs[EV_BC] / n, missed, (double)S.bc_last / US,
               S.bc_depth, phx_ft_bcast_max_hops(S.bc));
        if (missed && S.c.check && S.ncrashed - S.c.bcast_known <= phx_ft_bcast_tolerance(S.bc)) {
            fprintf(stderr, "phx-sim: CHECK broadcast missed %d live members\n", missed);
            exit(1);
        }
    }
    if (S.c.td)
        printf(",\"td\":{\"name\":\"%s\",\"hops\":%d,\"ctrl\":%" PRIu64 ",\"ctrl_per_node\":%.3f,"
               "\"primary\":%" PRIu64 ",\"declared\":%d,\"premature\":%d,\"fatal\":%d,"
               "\"latency_us\":%.3f}",
               S.c.td->name, S.c.td_hops, S.td_ctrl, (double)S.td_ctrl / n, S.msgs[EV_APP],
               S.td_declared, S.td_premature, S.td_fatal,
               S.td_last_declare > S.td_last_task ? (double)(S.td_last_declare - S.td_last_task) / US : 0.0);
    if (S.c.td) {   /* the detectors' own counters, summed as PHX_STATS=1 prints them per node */
        phx_td_stat_t sum[PHX_TD_MAX_STATS], st[PHX_TD_MAX_STATS];
        int k = 0;
        for (int i = 0; i < n; i++) {
            if (!S.nd[i].td)
                continue;
            k = S.c.td->stats(S.nd[i].td, st, PHX_TD_MAX_STATS);
            for (int j = 0; j < k; j++) {
                if (!i)
                    sum[j] = st[j];
                else
                    sum[j].count += st[j].count;
            }
        }
        printf(",\"td_stats\":{");
        for (int j = 0; j < k; j++)
            printf("%s\"%s\":%" PRIu64, j ? "," : "", sum[j].name, sum[j].count);
        printf("}");
    }
    printf("}\n");
    if (!S.c.check)
        return;
    int bad = 0;
    if (S.c.hb && S.c.deadset_check && (!dead_ok || unnotified)) {
        fprintf(stderr, "phx-sim: CHECK dead set differs among survivors (or a crash unnoticed)\n");
        bad = 1;
    }
    if (S.c.cr && (cr_unfinished || S.cr_lost || !S.cr_rounds)) {
        fprintf(stderr, "phx-sim: CHECK cr: %d survivors did not resume, %" PRIu64 " losses\n",
                cr_unfinished, S.cr_lost);
        bad = 1;
    }
    if (S.c.mlog && S.ncrashed && (S.ml_work_lost || S.ml_holds_left || S.ml_phases_left)) {
        fprintf(stderr, "phx-sim: CHECK mlog rounds: %d WORK_LOST, %d live nodes still holding checkpoints, "
                "%d replay phases not ended\n", S.ml_work_lost, S.ml_holds_left, S.ml_phases_left);
        bad = 1;
    }
    if (S.task && S.ncrashed && (!S.caught_at || S.ml_gap || S.ml_order_bad)) {
        fprintf(stderr, "phx-sim: CHECK app: %d tasks never caught up, %d det gaps, %d replayed "
                "deliveries out of the lost order\n", S.nbehind, S.ml_gap, S.ml_order_bad);
        bad = 1;
    }
    if (S.c.era_k && !era_ok) {
        fprintf(stderr, "phx-sim: CHECK ERA: %d survivors undecided or values differ\n", era_undecided);
        bad = 1;
    }
    if (S.c.td && (S.td_premature || (!S.td_fatal && S.td_declared == 0))) {
        fprintf(stderr, "phx-sim: CHECK TD: premature %d, declared %d\n", S.td_premature, S.td_declared);
        bad = 1;
    }
    if (bad)
        exit(1);
}

int main(int argc, char **argv)
{
    fail_spec_t fs[64];
    int nfs = 0;
    parse(argc, argv, fs, &nfs);
    if (!getenv("PHX_LOG"))
        phx_log_set_level(PHX_LOG_ERROR);   /* fencing warnings would flood at scale */
    long rss0 = rss_kb("VmRSS:");
    S.nsched = S.c.ncon;
    setup();
    if (nfs) {
        int *ring = NULL;
        if (S.c.hb) {
            ring = malloc(sizeof *ring * (size_t)S.c.n);
            uint32_t *host = malloc(sizeof *host * (size_t)S.c.n);
            if (!ring || !host)
                die("out of memory", PHX_ENOMEM);
            for (int i = 0; i < S.c.n; i++)
                host[i] = (uint32_t)(i / S.c.host_size * S.c.host_size);
            phx_ft_ring_build(S.c.n, host, ring);
            free(host);
        }
        schedule_failures(fs, nfs, ring);
        free(ring);
    }
    if (S.c.bcast_known >= 0)
        bcast_setup();
    run();
    report(rss0);
    return 0;
}
