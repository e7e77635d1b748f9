/* Dijkstra-Scholten with adoption (Lifflander, Miller and Kale,
 * "Adoption Protocols for Fanout-Optimal Fault-Tolerant Termination Detection"):
 * INDEP, RELLAZY, RELEAGER.
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
 *    Answers carry the exchange sequence so a re-adoption ignores old ones.
 *  - sendFence is an acknowledgement of each notice, and the sends after it
 *    wait for it in a queue (see "send fence" below, digest 7.9). */
#include "ft/termination/td_ds.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>

#include "base/phx_err.h"
#include "base/phx_log.h"
#include "ft/termination/msg.h"
#include "ft/termination/td_util.h"

/* The messages and their layouts: msg.h (phx_ds_msg_t). */
enum {
    M_ACK = PHX_DS_M_ACK, M_PGC = PHX_DS_M_PGC, M_QUERY = PHX_DS_M_QUERY, M_REPLY = PHX_DS_M_REPLY,
    M_INTERIOR = PHX_DS_M_INTERIOR, M_EXTERIOR = PHX_DS_M_EXTERIOR, M_NOTIFY = PHX_DS_M_NOTIFY,
    M_ANSWER = PHX_DS_M_ANSWER, M_ANNOUNCE = PHX_DS_M_ANNOUNCE, M_FATAL = PHX_DS_M_FATAL,
    M_FENCE = PHX_DS_M_FENCE, M_NTYPES = PHX_DS_M_NTYPES
};
static const char *const stat_names[M_NTYPES] = {
    NULL, "ack", "potential_gc", "query", "reply", "interior", "exterior",
    "notify", "answer", "announce", "fatal", "fence",
};

#define ACK_BATCH     32u   /* flush a sender's acks early past this many */

typedef struct { int pf, gp, g; } dq_t;   /* deferred query */
typedef struct { uint64_t seq; int dst; } notice_t;
/* A send held behind the fence: a primary (msg NULL, token for
 * env->release) or a control message (a copy of its bytes). */
typedef struct {
    uint64_t token, upto;        /* leaves once every notice < upto is acked */
    int dst, type;
    uint32_t len;
    uint8_t *msg;
} hold_t;

/* Set of (row, col) pairs, open addressing with linear probing, key
 * row * n + col + 1 (0: empty). Few pairs are ever set at once (children
 * and grandchildren in flight), so a node holds O(set) here, not n^2 bits,
 * which at 64k nodes would not even fit the address space. */
typedef struct pairs {
    uint64_t *k;
    size_t cap, len;             /* cap: power of two, or 0 */
} pairs_t;

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
    pairs_t pc, par, pend;       /* sparse n x n bits: [child][gc] */
    int64_t pending;             /* outstanding queries */

    dq_t *dq;
    int ndq, dqcap;

    /* RELEAGER exchange run by an adopted child */
    int xch, xgp, xpf, xwait;
    uint32_t xseq;
    uint8_t *xw, *xbit;

    /* Send fence (000 section 5 sendFence): notices not yet acked, and the
     * sends held until every notice issued before them is. FIFO, so sends to
     * one destination keep their order. */
    int fence;                   /* 0: pre-fence behaviour, for tests */
    uint64_t fseq;               /* next notice sequence number */
    notice_t *nt;
    int nnt, ntcap;
    hold_t *hq;
    int hq_head, nhq, hqcap;
    uint32_t *hq_to;             /* held sends per destination */

    void *arena;                 /* mapping of the per-rank tables above */
    size_t arena_len;
    uint8_t *buf;                /* an encoded message: PHX_DS_MSG_MAX(n) bytes */
    phx_ds_entry_t *ent;         /* a REPLY's entries being built: n */
    char why[160];
    uint64_t stat[M_NTYPES];
} ds_t;

/* ---- small helpers ------------------------------------------------------ */

static size_t pairs_slot(const pairs_t *p, uint64_t key)
{
    size_t m = p->cap - 1, i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & m;
    while (p->k[i] && p->k[i] != key)
        i = (i + 1) & m;
    return i;
}

static int bit_get(const pairs_t *p, const ds_t *s, int r, int c)
{
    uint64_t key = (uint64_t)r * (uint64_t)s->n + (uint64_t)c + 1;
    return p->cap && p->k[pairs_slot(p, key)] == key;
}

static void go_fatal(ds_t *s, int code, const char *fmt, int a, int b);

static void bit_put(pairs_t *p, ds_t *s, int r, int c, int v)
{
    uint64_t key = (uint64_t)r * (uint64_t)s->n + (uint64_t)c + 1;
    if (!v) {
        if (!p->cap)
            return;
        size_t m = p->cap - 1, i = pairs_slot(p, key);
        if (!p->k[i])
            return;
        /* backward-shift deletion keeps every probe chain unbroken */
        for (size_t j = (i + 1) & m; p->k[j]; j = (j + 1) & m) {
            size_t h = (size_t)((p->k[j] * 0x9E3779B97F4A7C15ull) >> 17) & m;
            if (((j - h) & m) >= ((j - i) & m)) {
                p->k[i] = p->k[j];
                i = j;
            }
        }
        p->k[i] = 0;
        p->len--;
        return;
    }
    if (p->cap && p->k[pairs_slot(p, key)] == key)
        return;
    if (2 * (p->len + 1) > p->cap) {
        size_t ncap = p->cap ? 2 * p->cap : 16;
        uint64_t *nk = calloc(ncap, sizeof *nk), *ok = p->k;
        if (!nk) {
            go_fatal(s, PHX_ENOMEM, "out of memory recording pair (%d, %d)", r, c);
            return;
        }
        size_t ocap = p->cap;
        p->k = nk;
        p->cap = ncap;
        for (size_t j = 0; j < ocap; j++)
            if (ok[j])
                p->k[pairs_slot(p, ok[j])] = ok[j];
        free(ok);
    }
    p->k[pairs_slot(p, key)] = key;
    p->len++;
}
static int rank_ok(const ds_t *s, int r) { return r >= 0 && r < s->n; }
static int is_rel(const ds_t *s) { return s->v == PHX_DS_RELLAZY || s->v == PHX_DS_RELEAGER; }
static int eager(const ds_t *s) { return s->v == PHX_DS_RELEAGER; }

/* Sends the len encoded bytes of a type message in buf. */
static void emit(ds_t *s, int dst, int type, size_t len)
{
    if (dst < 0 || dst == s->me || s->dead[dst])
        return;   /* the dead get nothing; self-traffic is handled inline */
    s->stat[type]++;
    s->env.send(s->env.ctx, dst, s->buf, len);
}

/* Encodes m into buf: its length (buf holds any message for n ranks). */
static size_t enc(ds_t *s, const phx_ds_msg_t *m)
{
    long len = phx_ds_msg_enc(m, s->buf, PHX_DS_MSG_MAX(s->n));
    return len > 0 ? (size_t)len : 0;
}

static void ctl(ds_t *s, int dst, const phx_ds_msg_t *m)
{
    if (dst < 0 || dst == s->me || s->dead[dst])
        return;
    emit(s, dst, m->type, enc(s, m));
}

static void broadcast(ds_t *s, int type)
{
    phx_ds_msg_t m = { .type = (uint8_t)type };
    for (int r = 0; r < s->n; r++)
        ctl(s, r, &m);
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

/* ---- send fence ----------------------------------------------------------
 * The adoption paper, section 5: willSendTo sends potentialGrandchild (Rel: also
 * interior) and then sendFence(), so the first message to a new recipient
 * leaves only once the notice is known to have arrived. Over TCP "written"
 * is not "arrived" (a RST discards unread bytes, digest 7.9), so the fence is
 * an acknowledgement: the receiver of a notice answers M_FENCE(seq), and
 * every send issued after the notice waits in hq for it. A send to a known
 * recipient with nothing held for it goes at once (the fault-free fast
 * path). A notice to a node that dies is moot: its records died with it,
 * and the adopter learns our successors from the adoption reply; if we die
 * before that reply arrives, the pending query makes our death fatal or
 * parity-checked exactly as without the send. */

static void notice(ds_t *s, int dst, int type, int arg)
{
    if (dst < 0 || dst == s->me || s->dead[dst])
        return;
    uint64_t seq = s->fseq++;
    ctl(s, dst, &(phx_ds_msg_t){ .type = (uint8_t)type, .rank = arg, .seq = seq });
    if (!s->fence)
        return;
    if (phx_td_grow((void **)&s->nt, &s->ntcap, s->nnt + 1, sizeof *s->nt)) {
        go_fatal(s, PHX_ENOMEM, "out of memory for a fence notice to %d (%d)", dst, 0);
        return;
    }
    s->nt[s->nnt++] = (notice_t){ seq, dst };
}

/* Drops the outstanding notices to dst (seq ~0: all of them). */
static void notices_done(ds_t *s, int dst, uint64_t seq)
{
    int k = 0;
    for (int i = 0; i < s->nnt; i++)
        if (s->nt[i].dst != dst || (seq != ~0ull && s->nt[i].seq != seq))
            s->nt[k++] = s->nt[i];
    s->nnt = k;
}

/* Queues a send behind every notice issued so far. */
static int hold(ds_t *s, int dst, uint64_t token, int type, const uint8_t *msg, size_t len)
{
    if (s->hq_head && s->nhq == s->hqcap) {
        memmove(s->hq, s->hq + s->hq_head, (size_t)(s->nhq - s->hq_head) * sizeof *s->hq);
        s->nhq -= s->hq_head;
        s->hq_head = 0;
    }
    if (phx_td_grow((void **)&s->hq, &s->hqcap, s->nhq + 1, sizeof *s->hq))
        return PHX_ENOMEM;
    uint8_t *copy = NULL;
    if (msg) {
        if (!(copy = malloc(len)))
            return PHX_ENOMEM;
        memcpy(copy, msg, len);
    }
    s->hq[s->nhq++] = (hold_t){ token, s->fseq, dst, type, (uint32_t)len, copy };
    s->hq_to[dst]++;
    return 0;
}

static void release_one(ds_t *s, const hold_t *h)
{
    s->hq_to[h->dst]--;
    if (h->msg) {
        memcpy(s->buf, h->msg, h->len);
        emit(s, h->dst, h->type, h->len);
        free(h->msg);
        return;
    }
    uint8_t pb[PHX_TD_PB_MAX] = { 0 };
    if (is_rel(s))   /* the parent now: an adoption may have changed it */
        phx_ds_pb_enc(pb, s->parent);
    s->env.release(s->env.ctx, h->token, pb);
}

/* Sends held for a node that died go now: they are lost on the wire, and a
 * held send is still work to the runtime. Order towards the dead is moot. */
static void release_dead(ds_t *s, int f)
{
    int k = s->hq_head;
    for (int i = s->hq_head; i < s->nhq; i++) {
        if (s->hq[i].dst == f)
            release_one(s, &s->hq[i]);
        else
            s->hq[k++] = s->hq[i];
    }
    s->nhq = k;
}

static void release_ready(ds_t *s)
{
    uint64_t low = s->fseq;
    for (int i = 0; i < s->nnt; i++)
        if (s->nt[i].seq < low)
            low = s->nt[i].seq;
    while (s->hq_head < s->nhq && s->hq[s->hq_head].upto <= low) {
        hold_t h = s->hq[s->hq_head++];
        release_one(s, &h);
    }
    if (s->hq_head == s->nhq)
        s->hq_head = s->nhq = 0;
}

/* Sends m now, or behind the fence while notices are outstanding (a
 * query or an adoption reply that engages its receiver). */
static void ctl_fenced(ds_t *s, int dst, const phx_ds_msg_t *m)
{
    if (!s->nnt) {
        ctl(s, dst, m);
        return;
    }
    if (hold(s, dst, 0, m->type, s->buf, enc(s, m)) < 0)
        go_fatal(s, PHX_ENOMEM, "out of memory holding a message to %d (%d)", dst, 0);
}

static void fence_ack(ds_t *s, int src, uint64_t seq)
{
    ctl(s, src, &(phx_ds_msg_t){ .type = M_FENCE, .seq = seq });
}

/* ---- signals to the grandparent (Rel) ----------------------------------- */

static void signal_gp(ds_t *s, int type)
{
    if (s->gparent < 0)
        return;
    if (s->gparent == s->me) {   /* only through stale pointers; keep parity local */
        bit_put(&s->par, s, s->parent, s->me, !bit_get(&s->par, s, s->parent, s->me));
        s->stat[type]++;
        return;
    }
    if (type == M_INTERIOR) {    /* fenced: the grandparent must know before we send */
        notice(s, s->gparent, M_INTERIOR, s->parent);
        return;
    }
    ctl(s, s->gparent, &(phx_ds_msg_t){ .type = (uint8_t)type, .rank = s->parent });
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
    if (s->sacks[dst] == 0 && s->v != PHX_DS_BASE)
        notice(s, s->parent, M_PGC, dst);
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
        bit_put(&s->pc, s, c, g, 0);
    s->mark[c] = 0;
}

/* ---- acks and disengagement -------------------------------------------- */

static void flush_one(ds_t *s, int src)
{
    uint32_t k = s->proc[src];
    if (!k)
        return;
    ctl(s, src, &(phx_ds_msg_t){ .type = M_ACK, .count = k });
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
        ctl(s, s->parent, &(phx_ds_msg_t){ .type = M_ACK, .flags = PHX_DS_ACK_DISENGAGE, .count = 1 });
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
    else if (bit_get(&s->par, s, pf, gc))
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
    bit_put(&s->pend, s, pf, gc, 1);
    s->pending++;
    ctl_fenced(s, gc, &(phx_ds_msg_t){ .type = M_QUERY, .rank = pf, .gparent = s->parent });
}

static void send_reply(ds_t *s, int gp, int pf, int debt)
{
    uint32_t cnt = 0;
    if (debt)
        for (int d = 0; d < s->n; d++) {
            int bit = s->xch ? s->xbit[d] : 0;
            if (s->sacks[d] || bit)
                s->ent[cnt++] = (phx_ds_entry_t){ d, (uint8_t)bit };
        }
    ctl_fenced(s, gp, &(phx_ds_msg_t){ .type = M_REPLY, .rank = pf, .debt = (uint8_t)debt, .count = cnt,
                                        .ent = s->ent });
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
                ctl(s, d, &(phx_ds_msg_t){ .type = M_NOTIFY, .rank = gp, .xseq = s->xseq });
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
    int fence = !(v & PHX_DS_NOFENCE);
    v &= ~PHX_DS_NOFENCE;
    if (!env || !out || env->size < 1 || env->rank < 0 || env->rank >= env->size ||
        !env->send || !env->declare || !env->fatal || (fence && !env->release))
        return PHX_EINVAL;
    ds_t *s = calloc(1, sizeof *s);
    if (!s)
        return PHX_ENOMEM;
    size_t n = (size_t)env->size;
    s->env = *env;
    s->v = v;
    s->fence = fence;
    s->n = env->size;
    s->me = env->rank;
    /* The per-rank tables in one anonymous mapping: its pages stay
     * unbacked until a rank on them is touched, and a node touches few, so
     * a 64k-node simulation holds kilobytes per node, not 30 n bytes. */
    size_t n8 = (n + 7) & ~(size_t)7;
    s->arena_len = n8 * (sizeof *s->sacks + sizeof *s->owed + sizeof *s->proc +
                         sizeof *s->dirty + sizeof *s->hq_to + sizeof *s->ent + 5) + PHX_DS_MSG_MAX(n);
    void *a = mmap(NULL, s->arena_len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (a == MAP_FAILED) {
        free(s);
        return PHX_ENOMEM;
    }
    s->arena = a;
    uint8_t *p = a;
    s->sacks = (uint64_t *)(void *)p, p += n8 * sizeof *s->sacks;
    s->owed = (uint32_t *)(void *)p, p += n8 * sizeof *s->owed;
    s->proc = (uint32_t *)(void *)p, p += n8 * sizeof *s->proc;
    s->dirty = (int *)(void *)p, p += n8 * sizeof *s->dirty;
    s->hq_to = (uint32_t *)(void *)p, p += n8 * sizeof *s->hq_to;
    s->ent = (phx_ds_entry_t *)(void *)p, p += n8 * sizeof *s->ent;
    s->isdirty = p, p += n8;
    s->dead = p, p += n8;
    s->mark = p, p += n8;
    s->xw = p, p += n8;
    s->xbit = p, p += n8;
    s->buf = p;   /* in the mapping too, so the nodes' mappings can merge */
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
    munmap(s->arena, s->arena_len);
    free(s->pc.k);
    free(s->par.k);
    free(s->pend.k);
    free(s->dq);
    free(s->nt);
    for (int i = s->hq_head; i < s->nhq; i++)
        free(s->hq[i].msg);
    free(s->hq);
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
    if (s->terminal == 2) {
        if (is_rel(s))
            phx_ds_pb_enc(pb, 0);
        return 0;                /* runtime is tearing down after fatal */
    }
    if (!rank_ok(s, dst) || dst == s->me || s->terminal == 1)
        return PHX_EINVAL;
    if (!s->slot)
        return PHX_EINVAL;       /* not engaged: breaks the diffusing model */
    if (is_rel(s))
        phx_ds_pb_enc(pb, s->parent);
    if (s->dead[dst])
        return 0;                /* lost on the wire; nothing will ack it */
    int before = s->nnt;
    will_send(s, dst);
    if (s->terminal)
        return PHX_ENOMEM;       /* the only way will_send fails */
    if (s->nnt == before && !s->hq_to[dst])
        return 0;                /* known recipient: no new notice to wait for */
    if (hold(s, dst, token, 0, NULL, 0) < 0) {
        go_fatal(s, PHX_ENOMEM, "out of memory holding a message to %d (%d)", dst, 0);
        return PHX_ENOMEM;
    }
    return PHX_TD_DELAY;
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
            int g = phx_ds_pb_dec(pb);
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
    notices_done(s, f, ~0ull);
    release_dead(s, f);
    release_ready(s);            /* before recovery adds sends of its own */
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
        if (bit_get(&s->pend, s, pf, f)) {
            bit_put(&s->pend, s, pf, f, 0);
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
            if (bit_get(&s->pc, s, f, gc)) {
                bit_put(&s->pc, s, f, gc, 0);
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
    phx_ds_msg_t m;
    if (!msg || !rank_ok(s, src) || src == s->me || phx_ds_msg_dec(msg, len, &m))
        return PHX_EPROTO;
    int type = m.type;
    /* validate fully before touching state */
    switch (type) {
    case M_ACK:
        break;
    case M_PGC:
        if (!rank_ok(s, m.rank) || s->v == PHX_DS_BASE)
            return PHX_EPROTO;
        break;
    case M_QUERY:
        if (!rank_ok(s, m.rank) || s->v == PHX_DS_BASE || (m.gparent != -1 && !rank_ok(s, m.gparent)))
            return PHX_EPROTO;
        break;
    case M_REPLY: {
        if (s->v == PHX_DS_BASE || m.count > (uint32_t)s->n || !rank_ok(s, m.rank))
            return PHX_EPROTO;
        for (uint32_t i = 0; i < m.count; i++)
            if (!rank_ok(s, phx_ds_msg_entry(&m, i).rank))
                return PHX_EPROTO;
        if (!s->terminal && !s->dead[src] && !bit_get(&s->pend, s, m.rank, src))
            return PHX_EPROTO;   /* a reply nobody asked for */
        break;
    }
    case M_INTERIOR:
    case M_EXTERIOR:
        if (!is_rel(s) || !rank_ok(s, m.rank))
            return PHX_EPROTO;
        break;
    case M_FENCE:
        if (s->v == PHX_DS_BASE)
            return PHX_EPROTO;
        break;
    case M_NOTIFY:
        if (s->v != PHX_DS_RELEAGER || !rank_ok(s, m.rank))
            return PHX_EPROTO;
        break;
    case M_ANSWER:
        if (s->v != PHX_DS_RELEAGER)
            return PHX_EPROTO;
        break;
    default:   /* ANNOUNCE, FATAL: the type is all */
        break;
    }
    if (s->terminal || s->dead[src])
        return 0;                /* nothing from a failed node after its notice */

    switch (type) {
    case M_ACK: {
        uint32_t k = m.count;
        if (s->sacks[src] < k)
            return PHX_EPROTO;
        s->sacks[src] -= k;
        s->D -= k;
        if ((m.flags & PHX_DS_ACK_DISENGAGE) || !s->sacks[src])
            forget_child(s, src);
        d_dropped(s);
        break;
    }
    case M_PGC:
        /* only a current child reports; anything else is stale */
        if (s->sacks[src])
            bit_put(&s->pc, s, src, m.rank, 1);
        fence_ack(s, src, m.seq);   /* even if stale: the sender waits for it */
        return 0;
    case M_QUERY: {
        int pf = m.rank, g = m.gparent;
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
        int pf = m.rank, debt = m.debt;
        uint32_t cnt = m.count;
        bit_put(&s->pend, s, pf, src, 0);
        s->pending--;
        if (debt) {
            s->sacks[src]++;
            s->D++;
            if (s->v == PHX_DS_RELLAZY)
                s->mark[src] = 1;
        }
        for (uint32_t i = 0; i < cnt; i++) {
            phx_ds_entry_t x = phx_ds_msg_entry(&m, i);
            int d = x.rank;
            bit_put(&s->pc, s, src, d, 1);
            if (s->v == PHX_DS_RELEAGER && x.bit)
                bit_put(&s->par, s, src, d, !bit_get(&s->par, s, src, d));
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
        int p = m.rank;
        bit_put(&s->par, s, p, src, !bit_get(&s->par, s, p, src));
        if (type == M_INTERIOR)
            fence_ack(s, src, m.seq);
        return 0;
    }
    case M_FENCE:
        notices_done(s, src, m.seq);
        release_ready(s);
        return 0;
    case M_NOTIFY: {
        int eng = s->slot && s->parent == src;
        if (eng)
            s->gparent = m.rank;
        ctl(s, src, &(phx_ds_msg_t){ .type = M_ANSWER, .xseq = m.xseq, .engaged = (uint8_t)eng,
                                      .unpaired = (uint8_t)(eng && s->irep) });
        return 0;
    }
    case M_ANSWER:
        if (s->xch && m.xseq == s->xseq && s->xw[src]) {
            s->xw[src] = 0;
            s->xbit[src] = m.unpaired;
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
        /* Relay it: the detecting node may die before its own broadcast is
         * out, and a survivor left without a verdict would hang. */
        broadcast(s, M_FATAL);
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
