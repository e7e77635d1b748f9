/* Dijkstra-Scholten with adoption (seed 000_*): INDEP, RELLAZY, RELEAGER.
 *
 * Departures from the paper's listings, each needed by this runtime:
 *  - Acks are tracked per sender (owed/proc) instead of one pooled C, because
 *    on_processed names the source. C is still kept as their sum; a failed
 *    sender's unprocessed messages are simply not acked later, so C never
 *    goes negative (digest 7.3).
 *  - The disengagement ack carries a flag; the parent then forgets the
 *    child's potential children. Without it a former parent keeps stale
 *    records and could adopt (and answer for) a grandchild whose parity it
 *    never saw.
 *  - A query about failed pf is answered only after this node's own notice
 *    of pf: by fail-flush every message pf sent us has then arrived, so a
 *    late message from pf cannot re-engage us to a dead parent after we
 *    answered "not engaged".
 *  - Gap fix (digest 7.5): an adopted child learns its new grandparent G
 *    from the query and, if interior, sends G an interior signal before its
 *    reply. Otherwise G sees even parity for it and would write it off if it
 *    and its new parent failed, orphaning its children silently.
 *  - RELEAGER: grandchildren answer with their unpaired-interior bit and the
 *    grandparent XORs it into its parity; XOR commutes with the signals the
 *    grandchild sends it afterwards, so arrival order does not matter.
 *    Answers carry the exchange sequence so a re-adoption ignores old ones. */
#include "ft/termination/td_ds.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common/phx_err.h"
#include "core/common/phx_log.h"

enum {
    M_ACK = 1, M_PGC, M_QUERY, M_REPLY, M_INTERIOR, M_EXTERIOR,
    M_NOTIFY, M_ANSWER, M_ANNOUNCE, M_FATAL, M_NTYPES
};
static const char *const stat_names[M_NTYPES] = {
    NULL, "ack", "potential_gc", "query", "reply", "interior", "exterior",
    "notify", "answer", "announce", "fatal",
};

#define ACK_DISENGAGE 1u
#define ACK_BATCH     32u   /* flush a sender's acks early past this many */

typedef struct { int pf, gp, g; } dq_t;   /* deferred query */

typedef struct ds {
    phx_td_env_t env;
    phx_ds_variant_t v;
    int n, me, root_rank, is_root;
    int terminal;                /* 0 running, 1 declared, 2 fatal */
    int idle;

    /* engagement: one parental slot plus a per-sender cornet */
    int slot, slot_src, slot_done;
    int parent, gparent, orphan, adopted;
    int irep;                    /* unpaired interior signal outstanding */
    int64_t C, D;
    uint32_t *owed, *proc;       /* non-parental: received / processed, unacked */
    int nonparent;               /* senders with owed > 0 */
    int *dirty, ndirty;          /* senders with proc > 0 */
    uint8_t *isdirty;

    /* successor side */
    uint64_t *sacks;             /* my sends (and queries, debts) not yet acked */
    uint8_t *dead, *mark;        /* mark: RELLAZY adopted child */
    uint8_t *pc, *par, *pend;    /* n x n bits: [child][gc] */
    int64_t pending;             /* outstanding queries */

    dq_t *dq;
    int ndq, dqcap;

    /* RELEAGER exchange run by an adopted child */
    int xch, xgp, xpf, xwait;
    uint32_t xseq;
    uint8_t *xw, *xbit;

    uint8_t *buf;
    char why[160];
    uint64_t stat[M_NTYPES];
} ds_t;

/* ---- small helpers ------------------------------------------------------ */

static int bit_get(const uint8_t *b, const ds_t *s, int r, int c)
{
    size_t i = (size_t)r * (size_t)s->n + (size_t)c;
    return (b[i >> 3] >> (i & 7)) & 1;
}
static void bit_put(uint8_t *b, const ds_t *s, int r, int c, int v)
{
    size_t i = (size_t)r * (size_t)s->n + (size_t)c;
    if (v)
        b[i >> 3] = (uint8_t)(b[i >> 3] | (1u << (i & 7)));
    else
        b[i >> 3] = (uint8_t)(b[i >> 3] & ~(1u << (i & 7)));
}
static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static int rank_ok(const ds_t *s, int r) { return r >= 0 && r < s->n; }
static int is_rel(const ds_t *s) { return s->v == PHX_DS_RELLAZY || s->v == PHX_DS_RELEAGER; }
static int eager(const ds_t *s) { return s->v == PHX_DS_RELEAGER; }

static void ctl(ds_t *s, int dst, int type, size_t len)
{
    if (dst < 0 || dst == s->me || s->dead[dst])
        return;   /* the dead get nothing; self-traffic is handled inline */
    s->buf[0] = (uint8_t)type;
    s->stat[type]++;
    s->env.send(s->env.ctx, dst, s->buf, len);
}

static void broadcast(ds_t *s, int type)
{
    for (int r = 0; r < s->n; r++)
        ctl(s, r, type, 1);
}

static void go_fatal(ds_t *s, int code, const char *fmt, int a, int b)
{
    if (s->terminal)
        return;
    s->terminal = 2;
    snprintf(s->why, sizeof s->why, fmt, a, b);
    PHX_INFO("td", "rank %d fatal: %s", s->me, s->why);
    /* Everyone must learn it: the detecting node may be far from the root,
     * and a silent stall would look like a hang. */
    broadcast(s, M_FATAL);
    s->env.fatal(s->env.ctx, code, s->why);
}

#define INVARIANT(s, cond)                                                          \
    do {                                                                            \
        if (!(cond))                                                                \
            go_fatal((s), PHX_EPROTO, "td_ds invariant broken at line %d (%d)",     \
                     __LINE__, 0);                                                  \
    } while (0)

/* ---- signals to the grandparent (Rel) ----------------------------------- */

static void signal_gp(ds_t *s, int type)
{
    if (s->gparent < 0)
        return;
    put32(s->buf + 1, (uint32_t)s->parent);
    if (s->gparent == s->me) {   /* only through stale pointers; keep parity local */
        bit_put(s->par, s, s->parent, s->me, !bit_get(s->par, s, s->parent, s->me));
        s->stat[type]++;
        return;
    }
    ctl(s, s->gparent, type, 5);
}

/* Called after every decrement of D. */
static void d_dropped(ds_t *s)
{
    INVARIANT(s, s->D >= 0);
    if (eager(s) && s->D == 0 && s->irep) {
        signal_gp(s, M_EXTERIOR);
        s->irep = 0;
    }
}

/* willSendTo: fenced notices go out before the primary (or the query). */
static void will_send(ds_t *s, int dst)
{
    if (s->sacks[dst] == 0 && s->v != PHX_DS_BASE && s->parent >= 0) {
        put32(s->buf + 1, (uint32_t)dst);
        ctl(s, s->parent, M_PGC, 5);
    }
    s->sacks[dst]++;
    s->D++;
    if (is_rel(s) && !s->irep) {
        /* eager: every D 0->1; lazy: first send of the engagement */
        signal_gp(s, M_INTERIOR);
        s->irep = 1;
    }
}

static void forget_child(ds_t *s, int c)
{
    for (int g = 0; g < s->n; g++)
        bit_put(s->pc, s, c, g, 0);
    s->mark[c] = 0;
}

/* ---- acks and disengagement -------------------------------------------- */

static void flush_one(ds_t *s, int src)
{
    uint32_t k = s->proc[src];
    if (!k)
        return;
    s->buf[1] = 0;
    put32(s->buf + 2, k);
    ctl(s, src, M_ACK, 6);
    s->owed[src] -= k;
    s->proc[src] = 0;
    s->C -= k;
    if (!s->owed[src])
        s->nonparent--;
}

static void flush_acks(ds_t *s)
{
    for (int i = 0; i < s->ndirty; i++) {
        int src = s->dirty[i];
        s->isdirty[src] = 0;
        flush_one(s, src);
    }
    s->ndirty = 0;
}

static void declare(ds_t *s)
{
    s->terminal = 1;
    broadcast(s, M_ANNOUNCE);
    s->env.declare(s->env.ctx);
}

static void try_disengage(ds_t *s)
{
    if (s->terminal || !s->slot || !s->idle || !s->slot_done || s->nonparent ||
        s->D || s->pending || s->xch)
        return;
    INVARIANT(s, s->C == 1);
    if (s->is_root && s->slot_src < 0) {
        declare(s);
        return;
    }
    if (s->irep) {               /* lazy: exterior rides just ahead of the ack */
        signal_gp(s, M_EXTERIOR);
        s->irep = 0;
    }
    if (s->parent >= 0) {        /* an orphan's ack has nobody to go to */
        s->buf[1] = ACK_DISENGAGE;
        put32(s->buf + 2, 1);
        ctl(s, s->parent, M_ACK, 6);
    }
    s->slot = 0;
    s->C = 0;
    s->parent = s->gparent = s->slot_src = -1;
    s->orphan = s->adopted = 0;
}

/* ---- recovery ----------------------------------------------------------- */

/* Potential child gc of failed pf is dead (before or after our query). */
static void pending_child_dead(ds_t *s, int pf, int gc)
{
    if (!is_rel(s))
        go_fatal(s, PHX_EUNRECOVERABLE,
                 "INDEP: node %d failed together with node %d it had sent to", pf, gc);
    else if (bit_get(s->par, s, pf, gc))
        go_fatal(s, PHX_EUNRECOVERABLE,
                 "node %d failed together with its interior child %d", pf, gc);
    /* even parity: gc was not pf's child, or a leaf; its debt is written off */
}

static void start_query(ds_t *s, int gc, int pf)
{
    if (gc == s->me)
        return;   /* our own obligations to pf went with our notice */
    if (s->dead[gc]) {
        pending_child_dead(s, pf, gc);
        return;
    }
    will_send(s, gc);   /* the query is a send: it keeps D > 0 until answered */
    bit_put(s->pend, s, pf, gc, 1);
    s->pending++;
    put32(s->buf + 1, (uint32_t)pf);
    put32(s->buf + 5, (uint32_t)s->parent);
    ctl(s, gc, M_QUERY, 9);
}

static void send_reply(ds_t *s, int gp, int pf, int debt)
{
    size_t len = 10;
    uint32_t cnt = 0;
    if (debt)
        for (int d = 0; d < s->n; d++) {
            int bit = s->xch ? s->xbit[d] : 0;
            if (s->sacks[d] || bit) {
                put32(s->buf + len, (uint32_t)d);
                s->buf[len + 4] = (uint8_t)bit;
                len += 5;
                cnt++;
            }
        }
    put32(s->buf + 1, (uint32_t)pf);
    s->buf[5] = (uint8_t)debt;
    put32(s->buf + 6, cnt);
    ctl(s, gp, M_REPLY, len);
}

static void finish_exchange(ds_t *s)
{
    send_reply(s, s->xgp, s->xpf, 1);
    s->xch = 0;
}

/* tryEngageGrandchild, run once our own notice of pf is in. */
static void handle_query(ds_t *s, int gp, int pf, int g)
{
    if (!(s->slot && s->parent == pf)) {
        send_reply(s, gp, pf, 0);
        return;
    }
    s->parent = gp;
    s->orphan = s->dead[gp];
    s->adopted = 1;
    s->xch = 0;                  /* an exchange for an earlier adopter is moot */
    if (is_rel(s)) {
        s->gparent = g;
        if (s->irep)             /* gap fix: G must see us as interior */
            signal_gp(s, M_INTERIOR);
    }
    if (s->orphan)
        return;                  /* gp's parent will query us about gp */
    if (s->v == PHX_DS_RELEAGER) {
        s->xch = 1;
        s->xgp = gp;
        s->xpf = pf;
        s->xseq++;
        s->xwait = 0;
        memset(s->xbit, 0, (size_t)s->n);
        memset(s->xw, 0, (size_t)s->n);
        for (int d = 0; d < s->n; d++)
            if (s->sacks[d] && !s->dead[d]) {
                s->xw[d] = 1;
                s->xwait++;
                put32(s->buf + 1, (uint32_t)gp);
                put32(s->buf + 5, s->xseq);
                ctl(s, d, M_NOTIFY, 9);
            }
        if (!s->xwait)
            finish_exchange(s);
        return;
    }
    send_reply(s, gp, pf, 1);
}

static int dq_blocked(const ds_t *s, int k)
{
    if (!s->dead[s->dq[k].pf])
        return 1;
    /* A query about pf must wait for one *from* pf still pending here: pf
     * may be about to become our parent through it. */
    for (int j = 0; j < s->ndq; j++)
        if (j != k && s->dq[j].gp == s->dq[k].pf)
            return 1;
    return 0;
}

static void drain_deferred(ds_t *s)
{
    for (;;) {
        int k = -1;
        for (int i = 0; i < s->ndq && k < 0; i++)
            if (!dq_blocked(s, i))
                k = i;
        if (k < 0) {
            /* a cycle of waits can only come from stale records: break it */
            for (int i = 0; i < s->ndq && k < 0; i++)
                if (s->dead[s->dq[i].pf])
                    k = i;
            if (k < 0)
                return;
        }
        dq_t q = s->dq[k];
        memmove(&s->dq[k], &s->dq[k + 1], (size_t)(s->ndq - k - 1) * sizeof q);
        s->ndq--;
        handle_query(s, q.gp, q.pf, q.g);
        if (s->terminal)
            return;
    }
}

/* ---- ops ---------------------------------------------------------------- */

int phx_td_ds_create(const phx_td_env_t *env, phx_ds_variant_t v, void **out)
{
    if (!env || !out || env->size < 1 || env->rank < 0 || env->rank >= env->size ||
        !env->send || !env->declare || !env->fatal)
        return PHX_EINVAL;
    ds_t *s = calloc(1, sizeof *s);
    if (!s)
        return PHX_ENOMEM;
    size_t n = (size_t)env->size, bits = (n * n + 7) / 8;
    s->env = *env;
    s->v = v;
    s->n = env->size;
    s->me = env->rank;
    s->owed = calloc(n, sizeof *s->owed);
    s->proc = calloc(n, sizeof *s->proc);
    s->dirty = calloc(n, sizeof *s->dirty);
    s->isdirty = calloc(n, 1);
    s->sacks = calloc(n, sizeof *s->sacks);
    s->dead = calloc(n, 1);
    s->mark = calloc(n, 1);
    s->pc = calloc(bits, 1);
    s->par = calloc(bits, 1);
    s->pend = calloc(bits, 1);
    s->xw = calloc(n, 1);
    s->xbit = calloc(n, 1);
    s->buf = malloc(10 + 5 * n);
    if (!s->owed || !s->proc || !s->dirty || !s->isdirty || !s->sacks || !s->dead ||
        !s->mark || !s->pc || !s->par || !s->pend || !s->xw || !s->xbit || !s->buf) {
        phx_td_ds_destroy(s);
        return PHX_ENOMEM;
    }
    s->slot_src = s->parent = s->gparent = -1;
    s->idle = 1;
    *out = s;
    return 0;
}

void phx_td_ds_destroy(void *st)
{
    ds_t *s = st;
    if (!s)
        return;
    free(s->owed);
    free(s->proc);
    free(s->dirty);
    free(s->isdirty);
    free(s->sacks);
    free(s->dead);
    free(s->mark);
    free(s->pc);
    free(s->par);
    free(s->pend);
    free(s->xw);
    free(s->xbit);
    free(s->buf);
    free(s->dq);
    free(s);
}

void phx_td_ds_start(void *st, int has_work)
{
    ds_t *s = st;
    s->is_root = has_work != 0;
    /* Non-roots cannot see the root; the runtime convention is rank 0. */
    s->root_rank = s->is_root ? s->me : 0;
    if (s->is_root) {
        /* virtual parental slot, its message being the initial task */
        s->slot = 1;
        s->slot_done = 1;
        s->C = 1;
        s->idle = 0;
    }
}

int phx_td_ds_on_send(void *st, int dst, uint64_t token, uint8_t *pb)
{
    ds_t *s = st;
    (void)token;
    if (s->terminal == 2) {
        if (is_rel(s))
            memset(pb, 0, 4);
        return 0;                /* runtime is tearing down after fatal */
    }
    if (!rank_ok(s, dst) || dst == s->me || s->terminal == 1)
        return PHX_EINVAL;
    if (!s->slot)
        return PHX_EINVAL;       /* not engaged: breaks the diffusing model */
    if (is_rel(s))
        put32(pb, (uint32_t)s->parent);
    if (s->dead[dst])
        return 0;                /* lost on the wire; nothing will ack it */
    will_send(s, dst);
    return 0;
}

void phx_td_ds_on_recv(void *st, int src, const uint8_t *pb)
{
    ds_t *s = st;
    if (s->terminal == 2)
        return;
    if (!rank_ok(s, src) || src == s->me || s->terminal == 1) {
        go_fatal(s, PHX_EPROTO, "primary from %d after termination or bad rank (%d)", src, 0);
        return;
    }
    if (s->dead[src]) {
        go_fatal(s, PHX_EPROTO, "primary from %d after its failure notice (%d)", src, 0);
        return;
    }
    s->idle = 0;
    if (!s->slot) {
        s->slot = 1;
        s->slot_src = s->parent = src;
        s->slot_done = 0;
        s->gparent = -1;
        if (is_rel(s)) {
            int g = (int)get32(pb);
            s->gparent = rank_ok(s, g) ? g : -1;
        }
        s->orphan = s->adopted = s->irep = 0;
        return;
    }
    if (!s->owed[src]++)
        s->nonparent++;
}

void phx_td_ds_on_processed(void *st, int src)
{
    ds_t *s = st;
    if (s->terminal || !rank_ok(s, src))
        return;
    if (s->slot && s->slot_src == src && !s->slot_done) {
        /* messages from one sender are interchangeable for counting */
        s->slot_done = 1;
        s->C++;
        return;
    }
    if (s->dead[src])
        return;                  /* its obligations were written off */
    INVARIANT(s, s->proc[src] < s->owed[src]);
    s->proc[src]++;
    s->C++;
    if (!s->isdirty[src]) {
        s->isdirty[src] = 1;
        s->dirty[s->ndirty++] = src;
    }
    if (s->proc[src] >= ACK_BATCH)
        flush_one(s, src);       /* stays in dirty[]; flush_one is idempotent */
}

void phx_td_ds_on_idle(void *st)
{
    ds_t *s = st;
    if (s->terminal)
        return;
    s->idle = 1;
    flush_acks(s);
    try_disengage(s);
}

void phx_td_ds_on_busy(void *st)
{
    ds_t *s = st;
    s->idle = 0;
}

void phx_td_ds_on_failure(void *st, int f)
{
    ds_t *s = st;
    if (s->terminal || !rank_ok(s, f) || f == s->me || s->dead[f])
        return;
    s->dead[f] = 1;
    if (f == s->root_rank) {
        go_fatal(s, PHX_EUNRECOVERABLE, "root node %d failed (%d)", f, 0);
        return;
    }
    if (s->v == PHX_DS_BASE) {
        go_fatal(s, PHX_EUNRECOVERABLE, "plain DS cannot survive failure of %d (%d)", f, 0);
        return;
    }
    /* receiver side: nothing more will be acked to f */
    if (s->owed[f]) {
        s->C -= s->proc[f];
        s->owed[f] = s->proc[f] = 0;
        s->nonparent--;
    }
    if (s->slot && s->parent == f)
        s->orphan = 1;
    if (s->xch && s->xgp == f)
        s->xch = 0;              /* our adopter died; its parent will ask again */
    if (s->xch && s->xw[f]) {
        s->xw[f] = 0;            /* a dead grandchild's notice is its answer */
        s->xwait--;
    }

    /* sender side: queries to f that will never be answered */
    for (int pf = 0; pf < s->n && !s->terminal; pf++)
        if (bit_get(s->pend, s, pf, f)) {
            bit_put(s->pend, s, pf, f, 0);
            s->pending--;
            pending_child_dead(s, pf, f);
        }
    if (s->terminal)
        return;
    if (s->mark[f]) {
        go_fatal(s, PHX_EUNRECOVERABLE,
                 "RELLAZY: adopted child %d failed before disengaging (%d)", f, 0);
        return;
    }
    if (s->sacks[f]) {
        s->D -= (int64_t)s->sacks[f];
        s->sacks[f] = 0;
        /* adopt f's orphans: query every potential child we were told of */
        for (int gc = 0; gc < s->n && !s->terminal; gc++)
            if (bit_get(s->pc, s, f, gc)) {
                bit_put(s->pc, s, f, gc, 0);
                start_query(s, gc, f);
            }
        if (s->terminal)
            return;
        s->mark[f] = 0;
        d_dropped(s);
    }
    drain_deferred(s);
    if (s->terminal)
        return;
    if (s->xch && !s->xwait)
        finish_exchange(s);
    try_disengage(s);
}

int phx_td_ds_on_ctrl(void *st, int src, const void *msg, size_t len)
{
    ds_t *s = st;
    const uint8_t *m = msg;
    if (!m || len < 1 || !rank_ok(s, src) || src == s->me)
        return PHX_EPROTO;
    int type = m[0];
    /* validate fully before touching state */
    switch (type) {
    case M_ACK:
        if (len != 6 || (m[1] & ~ACK_DISENGAGE) || get32(m + 2) == 0)
            return PHX_EPROTO;
        break;
    case M_PGC:
        if (len != 5 || !rank_ok(s, (int)get32(m + 1)) || s->v == PHX_DS_BASE)
            return PHX_EPROTO;
        break;
    case M_QUERY:
        if (len != 9 || !rank_ok(s, (int)get32(m + 1)) || s->v == PHX_DS_BASE ||
            ((int)get32(m + 5) != -1 && !rank_ok(s, (int)get32(m + 5))))
            return PHX_EPROTO;
        break;
    case M_REPLY: {
        if (len < 10 || s->v == PHX_DS_BASE)
            return PHX_EPROTO;
        uint32_t cnt = get32(m + 6);
        if (m[5] > 1 || cnt > (uint32_t)s->n || len != 10 + 5 * (size_t)cnt ||
            !rank_ok(s, (int)get32(m + 1)))
            return PHX_EPROTO;
        for (uint32_t i = 0; i < cnt; i++)
            if (!rank_ok(s, (int)get32(m + 10 + 5 * i)) || m[14 + 5 * i] > 1)
                return PHX_EPROTO;
        if (!s->terminal && !s->dead[src] &&
            !bit_get(s->pend, s, (int)get32(m + 1), src))
            return PHX_EPROTO;   /* a reply nobody asked for */
        break;
    }
    case M_INTERIOR:
    case M_EXTERIOR:
        if (len != 5 || !is_rel(s) || !rank_ok(s, (int)get32(m + 1)))
            return PHX_EPROTO;
        break;
    case M_NOTIFY:
        if (len != 9 || s->v != PHX_DS_RELEAGER || !rank_ok(s, (int)get32(m + 1)))
            return PHX_EPROTO;
        break;
    case M_ANSWER:
        if (len != 7 || s->v != PHX_DS_RELEAGER || m[5] > 1 || m[6] > 1)
            return PHX_EPROTO;
        break;
    case M_ANNOUNCE:
    case M_FATAL:
        if (len != 1)
            return PHX_EPROTO;
        break;
    default:
        return PHX_EPROTO;
    }
    if (s->terminal || s->dead[src])
        return 0;                /* nothing from a failed node after its notice */

    switch (type) {
    case M_ACK: {
        uint32_t k = get32(m + 2);
        if (s->sacks[src] < k)
            return PHX_EPROTO;
        s->sacks[src] -= k;
        s->D -= k;
        if ((m[1] & ACK_DISENGAGE) || !s->sacks[src])
            forget_child(s, src);
        d_dropped(s);
        break;
    }
    case M_PGC:
        /* only a current child reports; anything else is stale */
        if (s->sacks[src])
            bit_put(s->pc, s, src, (int)get32(m + 1), 1);
        return 0;
    case M_QUERY: {
        int pf = (int)get32(m + 1), g = (int)get32(m + 5);
        if (s->ndq == s->dqcap) {
            int nc = s->dqcap ? 2 * s->dqcap : 4;
            dq_t *q = realloc(s->dq, (size_t)nc * sizeof *q);
            if (!q) {
                go_fatal(s, PHX_ENOMEM, "out of memory deferring a query (%d,%d)", pf, src);
                return 0;
            }
            s->dq = q;
            s->dqcap = nc;
        }
        s->dq[s->ndq++] = (dq_t){ pf, src, g };
        drain_deferred(s);
        break;
    }
    case M_REPLY: {
        int pf = (int)get32(m + 1), debt = m[5];
        uint32_t cnt = get32(m + 6);
        bit_put(s->pend, s, pf, src, 0);
        s->pending--;
        if (debt) {
            s->sacks[src]++;
            s->D++;
            if (s->v == PHX_DS_RELLAZY)
                s->mark[src] = 1;
        }
        for (uint32_t i = 0; i < cnt; i++) {
            int d = (int)get32(m + 10 + 5 * i);
            bit_put(s->pc, s, src, d, 1);
            if (s->v == PHX_DS_RELEAGER && m[14 + 5 * i])
                bit_put(s->par, s, src, d, !bit_get(s->par, s, src, d));
        }
        /* the answer pays back the query's send */
        s->sacks[src]--;
        s->D--;
        if (!s->sacks[src])
            forget_child(s, src);
        d_dropped(s);
        break;
    }
    case M_INTERIOR:
    case M_EXTERIOR: {
        int p = (int)get32(m + 1);
        bit_put(s->par, s, p, src, !bit_get(s->par, s, p, src));
        return 0;
    }
    case M_NOTIFY: {
        int eng = s->slot && s->parent == src;
        if (eng)
            s->gparent = (int)get32(m + 1);
        memcpy(s->buf + 1, m + 5, 4);
        s->buf[5] = (uint8_t)eng;
        s->buf[6] = (uint8_t)(eng && s->irep);
        ctl(s, src, M_ANSWER, 7);
        return 0;
    }
    case M_ANSWER:
        if (s->xch && get32(m + 1) == s->xseq && s->xw[src]) {
            s->xw[src] = 0;
            s->xbit[src] = m[6];
            if (!--s->xwait)
                finish_exchange(s);
        }
        break;
    case M_ANNOUNCE:
        s->terminal = 1;
        s->env.declare(s->env.ctx);
        return 0;
    case M_FATAL:
        s->terminal = 2;
        snprintf(s->why, sizeof s->why, "node %d found termination undecidable", src);
        s->env.fatal(s->env.ctx, PHX_EUNRECOVERABLE, s->why);
        return 0;
    }
    try_disengage(s);
    return 0;
}

int phx_td_ds_stats(void *st, phx_td_stat_t *out, int max)
{
    ds_t *s = st;
    int k = 0;
    for (int t = 1; t < M_NTYPES && k < max; t++)
        out[k++] = (phx_td_stat_t){ stat_names[t], s->stat[t] };
    return k;
}

void phx_td_ds_view(const void *st, phx_ds_view_t *o)
{
    const ds_t *s = st;
    o->engaged = s->slot;
    o->parent = s->slot ? s->parent : -1;
    o->grandparent = s->slot ? s->gparent : -1;
    o->interior = is_rel(s) ? s->irep : s->D > 0;
    o->adopted = s->slot && s->adopted;
    o->orphan = s->slot && s->orphan;
    o->recovering = s->pending > 0 || s->xch;
    o->terminal = s->terminal;
    o->C = s->C;
    o->D = s->D;
}

static int base_create(const phx_td_env_t *env, void **out)
{
    return phx_td_ds_create(env, PHX_DS_BASE, out);
}

const phx_td_ops_t phx_td_ds_base_ops = {
    .name = "ds", .fault_tolerant = 0, .pb_size = 0,
    .create = base_create, .destroy = phx_td_ds_destroy, .start = phx_td_ds_start,
    .on_send = phx_td_ds_on_send, .on_recv = phx_td_ds_on_recv,
    .on_processed = phx_td_ds_on_processed, .on_idle = phx_td_ds_on_idle,
    .on_busy = phx_td_ds_on_busy, .on_ctrl = phx_td_ds_on_ctrl,
    .on_failure = phx_td_ds_on_failure, .stats = phx_td_ds_stats,
};
