/* Agreement inside the node: glue between the pure ERA state machine
 * (ft/era/era.h), the node's transport and failure notices, and the
 * worker threads blocked in phx_agree / phx_shrink / phx_allreduce.
 *
 * Threads. A collective call runs on a worker: it links a request (on its
 * own stack) into the waiters list, hands a PHX_MK_CALL message carrying the
 * request's address to the communication thread and sleeps on the request's
 * futex word. Everything else -- the era, the groups' mutable state, the
 * allreduce instances -- belongs to the communication thread, which writes a
 * request's results and then releases `done` (the worker acquires it). The
 * waiters list and `stopped` exist only so that the end of the job can wake
 * requests whose CALL message will never run (phx_agree_stop).
 *
 * Wire. Everything travels as PHX_FT_ERA frames (FIFO per pair, which ERA
 * needs, so never the urgent lane); the frame tag says whose payload it is:
 * TAG_ERA for the era's own messages, TAG_AR for the allreduce below. */
#include "core/agree.h"
#include "core/eventlog.h"
#include "core/metrics.h"

#include <linux/futex.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/node.h"
#include "ft/era/era.h"
#include "ft/era/group.h"
#include "base/phx_err.h"
#include "base/phx_log.h"
#include "base/phx_wire.h"

#define SUB "agree"
#define WORLD_GID 1u
/* Allreduce instances created by peers ahead of the local call are bounded:
 * a correct peer is at most one call ahead per group, so this only stops a
 * broken or hostile one from growing memory without end. */
#define AR_MAX_INST 4096

enum { TAG_ERA = 0, TAG_AR = 1 };
enum { AR_UP = 1, AR_DOWN = 2 };
/* Allreduce wire format, little-endian:
 *   0 u8 kind | 1 u8 op | 2 u16 0 | 4 u32 0 | 8 u64 gid | 16 u64 seq | 24 u64 value */
#define AR_LEN 32

enum req_kind { RQ_AGREE, RQ_SHRINK, RQ_REVOKE, RQ_ALLREDUCE };

typedef struct agree_req {
    struct agree_req *prev, *next;  /* waiters list, under a->lock */
    _Atomic uint32_t done;          /* futex word: 0 pending, 1 results ready */
    int kind, op;
    phx_group_t *g;
    uint64_t value;
    /* results: written by the comm thread before done = 1 */
    int rc;
    uint64_t out;
    phx_ft_rankset_t fresh;         /* failures acknowledged by this call */
    phx_group_t *newg;
} agree_req_t;

struct phx_group {
    /* Immutable once published (handed to a worker): any thread. */
    uint64_t gid;
    int size, index;
    int *members;
    _Atomic int revoked;            /* comm thread writes, anyone reads */
    /* Comm thread only. */
    struct phx_group *next;
    phx_ft_group_t *fg;
    uint64_t next_aid;              /* agree and shrink share the aid order */
    uint64_t ar_next;               /* allreduce sequence */
    int broken;                     /* a member is dead: allreduce gives up */
    agree_req_t *cur;               /* the collective in flight (one caller) */
    uint64_t cur_id;                /* its aid or allreduce seq */
    /* The thread of the one task calling g's collectives. */
    int nlast;
    int *last;                      /* size entries */
};

typedef struct ar_inst {
    struct ar_inst *next;
    uint64_t gid, seq;
    int has_op;
    uint8_t op;
    int nup;                        /* children's UPs received */
    int started, sent;
    uint64_t agg;
    int has_agg;
    phx_ft_rankset_t from;          /* who sent UP (checked against the tree) */
    agree_req_t *req;
    phx_group_t *g;
} ar_inst_t;

struct phx_agree {
    phx_node_t *n;
    phx_ft_era_t *era;
    phx_group_t *groups, *world;    /* comm thread; world immutable after init */
    ar_inst_t *ars;
    size_t nars;
    pthread_mutex_t lock;           /* guards stopped, waiters and acked */
    int stopped;
    /* THE acknowledged failures of this node, for phx_failure_ack, every
     * agreement and every group (copied into the group before each ERA
     * start). An agreement acknowledges the failures it reports. */
    phx_ft_rankset_t acked;
    agree_req_t *waiters;
    /* ERA messages the era handed to era_send_cb, by wire type (0: unknown,
     * 1 UP, 2 DECIDE, 3 REVOKE), and those the transport refused: comm
     * thread; read by phx_agree_free once it has stopped. For the event log
     * (era_stats), which tools/sim/cross_check.py compares with phx-sim. */
    uint64_t era_sent[4], era_unsent;
    /* fault injection (phx_agree_debug_die) */
    uv_idle_t die_idle;
    int die_idle_init, die_armed, die_ticks;
};

/* Set once before phx_main (single-threaded), read-only afterwards. */
static uint64_t die_k;
static int die_point;

int phx_agree_debug_die(uint64_t k, int point)
{
    if (point != PHX_AGREE_DIE_SENT && point != PHX_AGREE_DIE_DECIDED)
        return PHX_EINVAL;
    die_k = k;
    die_point = point;
    return 0;
}

/* ---- requests ---------------------------------------------------------- */

static void futex_wait(_Atomic uint32_t *w, uint32_t v)
{
    syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}

/* Comm thread. After the release store the worker may return and its stack
 * frame (r) vanish: only the futex syscall, which merely hashes the address,
 * follows. A stray wake-up of a later request at the same address is
 * harmless because waiters re-check their word. */
static void complete(agree_req_t *r, int rc)
{
    r->rc = rc;
    atomic_store_explicit(&r->done, 1, memory_order_release);
    syscall(SYS_futex, &r->done, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void finish_cur(phx_group_t *g, int rc)
{
    agree_req_t *r = g->cur;
    g->cur = NULL;
    complete(r, rc);
}

static void on_call(phx_node_t *n, phx_msg_t *m);

/* Worker: runs r on the comm thread and waits for its results. */
static int run_req(phx_ctx_t *c, agree_req_t *r)
{
    phx_node_t *n = c->w->node;
    phx_agree_t *a = n->agree;
    if (!a)
        return PHX_EINVAL;
    if (n->inline_mode) {
        /* The handler runs on the comm thread, which would wait on itself
         * (core/inline.h). */
        static _Atomic int told;
        if (!atomic_exchange(&told, 1))
            PHX_ERROR("agree", "agreements and group operations need worker threads: not available "
                               "with workers=0 (inline mode)");
        return PHX_ENOTSUP;
    }
    phx_msg_t *m = phx_msg_alloc(sizeof r);
    if (!m)
        return PHX_ENOMEM;
    pthread_mutex_lock(&a->lock);
    if (a->stopped) {
        pthread_mutex_unlock(&a->lock);
        phx_msg_free(m);
        return PHX_ECANCELED;
    }
    r->prev = NULL;
    r->next = a->waiters;
    if (a->waiters)
        a->waiters->prev = r;
    a->waiters = r;
    pthread_mutex_unlock(&a->lock);
    m->kind = PHX_MK_CALL;
    m->call = on_call;
    memcpy(m->data, &r, sizeof r);
    phx_node_enqueue_out(n, m);
    while (!atomic_load_explicit(&r->done, memory_order_acquire))
        futex_wait(&r->done, 0);
    pthread_mutex_lock(&a->lock);
    if (r->prev)
        r->prev->next = r->next;
    else
        a->waiters = r->next;
    if (r->next)
        r->next->prev = r->prev;
    pthread_mutex_unlock(&a->lock);
    return r->rc;
}

/* ---- groups ------------------------------------------------------------ */

static phx_group_t *group_find(phx_agree_t *a, uint64_t gid)
{
    for (phx_group_t *g = a->groups; g; g = g->next)
        if (g->gid == gid)
            return g;
    return NULL;
}

static int group_has(const phx_group_t *g, int rank)
{
    return phx_ft_group_index_of(g->fg, rank) >= 0;
}

/* Comm thread: the handle for era group fg (created on first sight). */
static phx_group_t *group_wrap(phx_agree_t *a, phx_ft_group_t *fg)
{
    uint64_t gid = phx_ft_group_id(fg);
    phx_group_t *g = group_find(a, gid);
    if (g)
        return g;
    g = calloc(1, sizeof *g);
    int sz = phx_ft_group_size(fg);
    if (!g || !(g->members = malloc((size_t)sz * sizeof(int))) ||
        !(g->last = malloc((size_t)sz * sizeof(int)))) {
        if (g)
            free(g->members);
        free(g);
        return NULL;
    }
    g->gid = gid;
    g->size = sz;
    g->fg = fg;
    memcpy(g->members, phx_ft_group_members(fg), (size_t)sz * sizeof(int));
    g->index = phx_ft_group_index_of(fg, a->n->rank);
    /* A revoke may have overtaken the shrink that made it (era keeps it). */
    atomic_store(&g->revoked, phx_ft_ulfm_is_revoked(fg));
    const phx_ft_rankset_t *dead = phx_ft_era_dead(a->era);
    for (int i = 0; i < sz; i++)
        if (phx_ft_rankset_test(dead, g->members[i]))
            g->broken = 1;
    g->next = a->groups;
    a->groups = g;
    return g;
}

/* failed minus what this node had acknowledged; acknowledges failed. */
static int take_fresh(phx_agree_t *a, const phx_ft_rankset_t *failed, phx_ft_rankset_t *fresh)
{
    int any = 0;
    pthread_mutex_lock(&a->lock);
    for (int i = 0; i < PHX_FT_RANKSET_WORDS; i++) {
        fresh->w[i] = failed->w[i] & ~a->acked.w[i];
        a->acked.w[i] |= failed->w[i];
        any |= fresh->w[i] != 0;
    }
    pthread_mutex_unlock(&a->lock);
    return any;
}

/* Comm thread, before an ERA start on g: g contributes the node's state. */
static void sync_acked(phx_agree_t *a, phx_group_t *g)
{
    phx_ft_rankset_t snap;
    pthread_mutex_lock(&a->lock);
    snap = a->acked;
    pthread_mutex_unlock(&a->lock);
    phx_ft_ulfm_set_acked(g->fg, &snap);
}

int phx_agree_ack(phx_node_t *n, const int *ranks, int k)
{
    phx_agree_t *a = n->agree;
    if (!a)
        return PHX_EINVAL;
    pthread_mutex_lock(&a->lock);
    for (int i = 0; i < k; i++)
        if (ranks[i] >= 0 && ranks[i] < PHX_FT_ERA_MAX_RANKS)
            phx_ft_rankset_add(&a->acked, ranks[i]);
    pthread_mutex_unlock(&a->lock);
    return 0;
}

int phx_agree_count_acked(phx_node_t *n, const int *ranks, int k)
{
    phx_agree_t *a = n->agree;
    if (!a)
        return 0;
    int c = 0;
    pthread_mutex_lock(&a->lock);
    for (int i = 0; i < k; i++)
        c += ranks[i] >= 0 && ranks[i] < PHX_FT_ERA_MAX_RANKS &&
             phx_ft_rankset_test(&a->acked, ranks[i]);
    pthread_mutex_unlock(&a->lock);
    return c;
}

/* ---- fault injection ---------------------------------------------------- */

/* The transport writes queued frames in the loop's prepare phase. An idle
 * handle runs just before prepare on every iteration (and keeps poll from
 * blocking), so its second run after arming follows at least one prepare:
 * the frame has been handed to the kernel by then. */
static void die_tick(uv_idle_t *h)
{
    phx_agree_t *a = h->data;
    if (++a->die_ticks >= 2) {
        PHX_INFO(SUB, "fault injection: dying after sending for agreement %llu",
                 (unsigned long long)die_k);
        raise(SIGKILL);
    }
}

static void die_maybe_arm(phx_agree_t *a, const uint8_t *buf, size_t len)
{
    phx_ft_era_peek_t pk;
    if (die_point != PHX_AGREE_DIE_SENT || a->die_armed || !a->die_idle_init || phx_ft_era_msg_peek(buf, len, &pk))
        return;
    if ((pk.type != PHX_FT_ERA_MSG_UP && pk.type != PHX_FT_ERA_MSG_DECIDE) || pk.gid != WORLD_GID || pk.aid != die_k)
        return;
    a->die_armed = 1;
    uv_idle_start(&a->die_idle, die_tick);
}

/* ---- era callbacks (comm thread, from inside era calls) ----------------- */

static int era_send_cb(void *ctx, int dst, const void *buf, size_t len)
{
    phx_agree_t *a = ctx;
    phx_frame_hdr_t h = phx_frame_hdr(PHX_FT_ERA, TAG_ERA, (uint64_t)a->n->rank, (uint64_t)dst, (uint32_t)len);
    int rc = phx_net_send(a->n->net, dst, &h, NULL, 0, buf, len, 0);
    a->era_sent[phx_ft_era_msg_type(buf, len)]++;
    a->era_unsent += rc != 0;
    /* A closed peer is dead or about to be declared so; its notice repairs
     * the tree (era.h: the message counts as sent). Returning the error
     * would abort the local call while the agreement goes on. */
    if (rc)
        PHX_DEBUG(SUB, "era message to rank %d not sent: %s", dst, phx_strerror(rc));
    else
        die_maybe_arm(a, buf, len);
    return 0;
}

static void era_decided_cb(void *ctx, uint64_t gid, uint64_t aid, const phx_ft_era_value_t *value,
                           const phx_ft_rankset_t *failed, int era_rc)
{
    phx_agree_t *a = ctx;
    if (die_point == PHX_AGREE_DIE_DECIDED && gid == WORLD_GID && aid == die_k) {
        PHX_INFO(SUB, "fault injection: dying on the decision of agreement %llu",
                 (unsigned long long)aid);
        raise(SIGKILL);
    }
    phx_metrics_add(PHX_M_AGREEMENTS, 1);
    phx_group_t *g = group_find(a, gid);
    if (!g || !g->cur || g->cur->kind != RQ_AGREE || g->cur_id != aid) {
        PHX_ERROR(SUB, "decision for agreement %llu of group %llu nobody waits for",
                  (unsigned long long)aid, (unsigned long long)gid);
        return;
    }
    agree_req_t *r = g->cur;
    r->out = value->w[0];
    /* Word 1 carries "revoked here" so that it reduces like the value:
     * AND/MIN of "not revoked", OR/MAX of "revoked". */
    int revoked = (r->op == PHX_OP_AND || r->op == PHX_OP_MIN) ? value->w[1] == 0 : value->w[1] != 0;
    /* ERA's rc is uniform: EPROCFAIL iff a decided failure was not
     * acknowledged by every contributor (each gave its node's state). */
    int rc = 0;
    take_fresh(a, failed, &r->fresh);
    if (era_rc == PHX_EPROCFAIL)
        rc = PHX_EPROCFAIL;
    else if (revoked)
        rc = PHX_EREVOKED;
    finish_cur(g, rc);
}

static void ar_drop_group(phx_agree_t *a, uint64_t gid);

static void era_revoked_cb(void *ctx, uint64_t gid)
{
    phx_agree_t *a = ctx;
    phx_group_t *g = group_find(a, gid);
    if (!g)
        return;   /* created later by a shrink: group_wrap reads the flag */
    atomic_store(&g->revoked, 1);
    PHX_INFO(SUB, "group %llu revoked", (unsigned long long)gid);
    if (g->cur && g->cur->kind == RQ_ALLREDUCE)
        finish_cur(g, PHX_EREVOKED);
    ar_drop_group(a, gid);
}

static void era_shrunk_cb(void *ctx, uint64_t gid, uint64_t aid, phx_ft_group_t *newg,
                          const phx_ft_rankset_t *failed, int era_rc)
{
    phx_agree_t *a = ctx;
    (void)era_rc;
    phx_group_t *g = group_find(a, gid);
    if (!g || !g->cur || g->cur->kind != RQ_SHRINK || g->cur_id != aid) {
        PHX_ERROR(SUB, "shrink %llu of group %llu finished but nobody waits for it",
                  (unsigned long long)aid, (unsigned long long)gid);
        return;
    }
    agree_req_t *r = g->cur;
    take_fresh(a, failed, &r->fresh);
    r->newg = group_wrap(a, newg);
    finish_cur(g, r->newg ? 0 : PHX_ENOMEM);
}

/* ---- allreduce: binomial tree over member indices, root index 0 --------- */

static uint64_t ar_reduce(uint8_t op, uint64_t x, uint64_t y)
{
    switch (op) {
    case PHX_OP_OR: return x | y;
    case PHX_OP_MIN: return x < y ? x : y;
    case PHX_OP_MAX: return x > y ? x : y;
    default: return x & y;
    }
}

/* Parent of index i > 0: i without its lowest set bit. Children of i:
 * i + b for each power of two b below i's lowest set bit (any b for 0). */
static int ar_parent(int i) { return i & (i - 1); }
static int ar_nchildren(int i, int m)
{
    int k = 0;
    for (int b = 1; b < m && !(i & b); b <<= 1)
        k += i + b < m;
    return k;
}

static void ar_send(phx_agree_t *a, int dst, int kind, const ar_inst_t *x, uint64_t v)
{
    uint8_t buf[AR_LEN];
    phx_wenc_t e;
    phx_wenc_init(&e, buf, sizeof buf);
    phx_wenc_u8(&e, (uint8_t)kind);
    phx_wenc_u8(&e, x->op);
    phx_wenc_u16(&e, 0);
    phx_wenc_u32(&e, 0);
    phx_wenc_u64(&e, x->gid);
    phx_wenc_u64(&e, x->seq);
    phx_wenc_u64(&e, v);   /* exactly AR_LEN bytes */
    phx_frame_hdr_t h = phx_frame_hdr(PHX_FT_ERA, TAG_AR, (uint64_t)a->n->rank, (uint64_t)dst, sizeof buf);
    int rc = phx_net_send(a->n->net, dst, &h, NULL, 0, buf, sizeof buf, 0);
    if (rc)   /* the notice will fail the call (allreduce is not fault tolerant) */
        PHX_DEBUG(SUB, "allreduce message to rank %d not sent: %s", dst, phx_strerror(rc));
}

static ar_inst_t *ar_find(phx_agree_t *a, uint64_t gid, uint64_t seq)
{
    for (ar_inst_t *x = a->ars; x; x = x->next)
        if (x->gid == gid && x->seq == seq)
            return x;
    return NULL;
}

static ar_inst_t *ar_new(phx_agree_t *a, uint64_t gid, uint64_t seq)
{
    if (a->nars >= AR_MAX_INST)
        return NULL;
    ar_inst_t *x = calloc(1, sizeof *x);
    if (!x)
        return NULL;
    x->gid = gid;
    x->seq = seq;
    x->next = a->ars;
    a->ars = x;
    a->nars++;
    return x;
}

static void ar_free(phx_agree_t *a, ar_inst_t *x)
{
    for (ar_inst_t **p = &a->ars; *p; p = &(*p)->next)
        if (*p == x) {
            *p = x->next;
            a->nars--;
            free(x);
            return;
        }
}

static void ar_drop_group(phx_agree_t *a, uint64_t gid)
{
    for (ar_inst_t **p = &a->ars; *p;) {
        ar_inst_t *x = *p;
        if (x->gid == gid) {
            *p = x->next;
            a->nars--;
            free(x);
        } else {
            p = &x->next;
        }
    }
}

/* Down the tree with the result, and return it locally. */
static void ar_finish(phx_agree_t *a, ar_inst_t *x, uint64_t v)
{
    phx_group_t *g = x->g;
    int i = g->index, m = g->size;
    for (int b = 1; b < m && !(i & b); b <<= 1)
        if (i + b < m)
            ar_send(a, g->members[i + b], AR_DOWN, x, v);
    if (g->cur == x->req) {
        x->req->out = v;
        finish_cur(g, 0);
    }
    ar_free(a, x);
}

static void ar_progress(phx_agree_t *a, ar_inst_t *x)
{
    phx_group_t *g = x->g;
    if (!x->started || x->sent || x->nup < ar_nchildren(g->index, g->size))
        return;
    x->sent = 1;
    if (g->index == 0)
        ar_finish(a, x, x->agg);
    else
        ar_send(a, g->members[ar_parent(g->index)], AR_UP, x, x->agg);
}

static void ar_start(phx_agree_t *a, agree_req_t *r)
{
    phx_group_t *g = r->g;
    if (g->broken) {
        finish_cur(g, PHX_EPROCFAIL);
        return;
    }
    if (atomic_load(&g->revoked)) {
        finish_cur(g, PHX_EREVOKED);
        return;
    }
    uint64_t seq = g->ar_next++;
    g->cur_id = seq;
    ar_inst_t *x = ar_find(a, g->gid, seq);
    if (!x && !(x = ar_new(a, g->gid, seq))) {
        finish_cur(g, PHX_ENOMEM);
        return;
    }
    /* Peers that got here first: each must be one of our children. */
    int bad = x->has_op && x->op != (uint8_t)r->op;
    for (int j = 0; j < g->size && !bad; j++)
        if (phx_ft_rankset_test(&x->from, g->members[j]) && (j == 0 || ar_parent(j) != g->index))
            bad = 1;
    if (bad) {
        PHX_ERROR(SUB, "allreduce %llu of group %llu: peers disagree on the tree or op",
                  (unsigned long long)seq, (unsigned long long)g->gid);
        ar_free(a, x);
        finish_cur(g, PHX_EPROTO);
        return;
    }
    x->g = g;
    x->req = r;
    x->op = (uint8_t)r->op;
    x->has_op = 1;
    x->started = 1;
    x->agg = x->has_agg ? ar_reduce(x->op, x->agg, r->value) : r->value;
    x->has_agg = 1;
    ar_progress(a, x);
}

static void ar_on_msg(phx_agree_t *a, int peer, const uint8_t *p, size_t len)
{
    phx_wdec_t d;
    phx_wdec_init(&d, p, len);
    unsigned kind = phx_wdec_u8(&d), op = phx_wdec_u8(&d);
    (void)phx_wdec_u16(&d);
    (void)phx_wdec_u32(&d);
    uint64_t gid = phx_wdec_u64(&d), seq = phx_wdec_u64(&d), v = phx_wdec_u64(&d);
    if (phx_wdec_end(&d, 1) < 0 || (kind != AR_UP && kind != AR_DOWN) || op > PHX_OP_MAX) {
        phx_net_reject(a->n->net, peer, "malformed allreduce frame");
        return;
    }
    phx_group_t *g = group_find(a, gid);
    if (g && (g->broken || atomic_load(&g->revoked)))
        return;   /* the local call gave up already, or will at once */
    if (g && !group_has(g, peer)) {
        phx_net_reject(a->n->net, peer, "allreduce frame from a non-member");
        return;
    }
    int pi = g ? phx_ft_group_index_of(g->fg, peer) : -1;
    ar_inst_t *x = ar_find(a, gid, seq);
    if (kind == AR_DOWN) {
        if (!g || !x || !x->sent || g->index == 0 || pi != ar_parent(g->index) || x->op != op) {
            phx_net_reject(a->n->net, peer, "unexpected allreduce result");
            return;
        }
        ar_finish(a, x, v);
        return;
    }
    /* UP: from a child of ours (checked at start when the group is not
     * known yet: a shrink that a faster peer finished first). */
    if (g && (pi <= 0 || ar_parent(pi) != g->index)) {
        phx_net_reject(a->n->net, peer, "allreduce contribution from a non-child");
        return;
    }
    if (!x && !(x = ar_new(a, gid, seq))) {
        PHX_ERROR(SUB, "no room for allreduce %llu of group %llu from rank %d",
                  (unsigned long long)seq, (unsigned long long)gid, peer);
        phx_node_exit(a->n, 1, 1);
        return;
    }
    if ((x->has_op && x->op != op) || phx_ft_rankset_test(&x->from, peer) || x->sent) {
        phx_net_reject(a->n->net, peer, "inconsistent allreduce contribution");
        return;
    }
    x->op = (uint8_t)op;
    x->has_op = 1;
    phx_ft_rankset_add(&x->from, peer);
    x->agg = x->has_agg ? ar_reduce(x->op, x->agg, v) : v;
    x->has_agg = 1;
    x->nup++;
    ar_progress(a, x);
}

/* ---- requests on the comm thread ---------------------------------------- */

static void on_call(phx_node_t *n, phx_msg_t *m)
{
    phx_agree_t *a = n->agree;
    agree_req_t *r;
    memcpy(&r, m->data, sizeof r);
    phx_msg_free(m);
    /* After stop the request was cancelled and its worker may be gone. */
    if (a->stopped)
        return;
    phx_group_t *g = r->g;
    if (r->kind == RQ_REVOKE) {
        complete(r, phx_ft_ulfm_revoke(a->era, g->fg));
        return;
    }
    if (g->cur) {
        PHX_ERROR(SUB, "two collectives at once on group %llu: one task per node may call them",
                  (unsigned long long)g->gid);
        complete(r, PHX_EINVAL);
        return;
    }
    g->cur = r;
    int rc = 0;
    switch (r->kind) {
    case RQ_AGREE: {
        phx_ft_era_value_t v = { .nwords = 2 };
        v.w[0] = r->value;
        int rev = atomic_load(&g->revoked) != 0;
        v.w[1] = (r->op == PHX_OP_AND || r->op == PHX_OP_MIN) ? (uint64_t)!rev : (uint64_t)rev;
        g->cur_id = g->next_aid++;
        sync_acked(a, g);
        rc = phx_ft_era_start(a->era, g->fg, g->cur_id, &v, (phx_ft_era_op_t)r->op);
        break;
    }
    case RQ_SHRINK:
        g->cur_id = g->next_aid++;
        sync_acked(a, g);
        rc = phx_ft_ulfm_shrink(a->era, g->fg, g->cur_id);
        break;
    case RQ_ALLREDUCE:
        ar_start(a, r);
        return;
    }
    /* The decision may already have completed r (one member, or peers
     * ahead); an error means nothing was started. */
    if (rc < 0 && g->cur == r) {
        PHX_ERROR(SUB, "cannot start agreement %llu on group %llu: %s",
                  (unsigned long long)g->cur_id, (unsigned long long)g->gid, phx_strerror(rc));
        finish_cur(g, rc);
    }
}

/* ---- node hooks -------------------------------------------------------- */

int phx_agree_init(phx_node_t *n)
{
    phx_agree_t *a = calloc(1, sizeof *a);
    if (!a)
        return PHX_ENOMEM;
    a->n = n;
    pthread_mutex_init(&a->lock, NULL);
    n->agree = a;
    if (n->size > PHX_FT_ERA_MAX_RANKS) {
        /* ERA's rank sets are fixed-size values; no limit applies without
         * fault tolerance: the job runs, without groups. */
        if (n->cfg.ft) {
            PHX_ERROR(SUB, "fault-tolerant agreement (ERA) supports at most %d ranks (fixed-size "
                           "rank sets, ft/era); this job has %d: run fewer ranks or --phx-ft=0",
                      PHX_FT_ERA_MAX_RANKS, n->size);
            return PHX_ERANGE;
        }
        PHX_INFO(SUB, "%d ranks, more than ERA's %d: phx_group_world() is NULL, so agreement, "
                      "shrink and allreduce are off (fault tolerance is off too)",
                 n->size, PHX_FT_ERA_MAX_RANKS);
        return 0;
    }
    phx_ft_era_env_t env = { .ctx = a, .send = era_send_cb, .decided = era_decided_cb,
                             .revoked = era_revoked_cb, .shrunk = era_shrunk_cb };
    int rc = phx_ft_era_create(&env, n->rank, n->size, &a->era);
    if (rc)
        return rc;
    int *all = malloc((size_t)n->size * sizeof *all);
    if (!all)
        return PHX_ENOMEM;
    for (int i = 0; i < n->size; i++)
        all[i] = i;
    phx_ft_group_t *fg;
    rc = phx_ft_group_create(a->era, WORLD_GID, all, n->size, &fg);
    free(all);
    if (rc)
        return rc;
    if (!(a->world = group_wrap(a, fg)))
        return PHX_ENOMEM;
    if (die_point == PHX_AGREE_DIE_SENT) {
        uv_idle_init(&n->loop, &a->die_idle);
        a->die_idle.data = a;
        a->die_idle_init = 1;
    }
    return 0;
}

void phx_agree_on_frame(phx_node_t *n, int peer, const phx_frame_hdr_t *h, const uint8_t *payload)
{
    phx_agree_t *a = n->agree;
    if (!a || a->stopped)
        return;
    if (h->tag == TAG_AR) {
        ar_on_msg(a, peer, payload, h->len);
        return;
    }
    if (h->tag != TAG_ERA || !a->era) {
        phx_net_reject(n->net, peer, "agreement frame with an unknown tag");
        return;
    }
    int rc = phx_ft_era_on_msg(a->era, peer, payload, h->len);
    if (rc == PHX_EPROTO) {
        phx_net_reject(n->net, peer, "malformed or inconsistent agreement message");
    } else if (rc < 0) {
        /* Losing an era message could block every survivor: end the job. */
        PHX_ERROR(SUB, "agreement message from rank %d dropped: %s", peer, phx_strerror(rc));
        phx_node_exit(n, 1, 1);
    }
}

void phx_agree_on_failure(phx_node_t *n, int rank)
{
    phx_agree_t *a = n->agree;
    if (!a || a->stopped || !a->era)
        return;
    int rc = phx_ft_era_on_failure(a->era, rank);
    if (rc < 0)
        PHX_ERROR(SUB, "failure notice for rank %d: %s", rank, phx_strerror(rc));
    for (phx_group_t *g = a->groups; g; g = g->next) {
        if (!group_has(g, rank))
            continue;
        g->broken = 1;
        if (g->cur && g->cur->kind == RQ_ALLREDUCE)
            finish_cur(g, PHX_EPROCFAIL);
        ar_drop_group(a, g->gid);
    }
}

void phx_agree_stop(phx_node_t *n)
{
    phx_agree_t *a = n->agree;
    if (!a)
        return;
    pthread_mutex_lock(&a->lock);
    a->stopped = 1;
    for (agree_req_t *r = a->waiters; r; r = r->next)
        if (!atomic_load_explicit(&r->done, memory_order_relaxed))
            complete(r, PHX_ECANCELED);
    pthread_mutex_unlock(&a->lock);
    for (phx_group_t *g = a->groups; g; g = g->next)
        g->cur = NULL;
    if (a->die_idle_init)
        uv_close((uv_handle_t *)&a->die_idle, NULL);
}

void phx_agree_free(phx_node_t *n)
{
    phx_agree_t *a = n->agree;
    if (!a)
        return;
    /* Counted as ERA sees them (a refused send counts as sent, era.h), so a
     * simulator driving the same era counts the same. */
    if (a->era)
        phx_evlog("era_stats", "\"up\":%llu,\"decide\":%llu,\"revoke\":%llu,\"other\":%llu,\"unsent\":%llu",
                  (unsigned long long)a->era_sent[1], (unsigned long long)a->era_sent[2],
                  (unsigned long long)a->era_sent[3], (unsigned long long)a->era_sent[0],
                  (unsigned long long)a->era_unsent);
    while (a->ars) {
        ar_inst_t *x = a->ars;
        a->ars = x->next;
        free(x);
    }
    while (a->groups) {
        phx_group_t *g = a->groups;
        a->groups = g->next;
        free(g->members);
        free(g->last);
        free(g);
    }
    phx_ft_era_destroy(a->era);
    pthread_mutex_destroy(&a->lock);
    free(a);
    n->agree = NULL;
}

/* ---- public API ---------------------------------------------------------- */

phx_group_t *phx_group_world(void)
{
    phx_node_t *n = phx_node_current;
    return n && n->agree ? n->agree->world : NULL;
}

int phx_group_size(const phx_group_t *g) { return g ? g->size : PHX_EINVAL; }
int phx_group_rank(const phx_group_t *g) { return g ? g->index : PHX_EINVAL; }
int phx_group_revoked(const phx_group_t *g) { return g ? atomic_load(&g->revoked) : 0; }

int phx_group_members(const phx_group_t *g, int *out, int cap)
{
    if (!g || (cap > 0 && !out))
        return PHX_EINVAL;
    for (int i = 0; i < g->size && i < cap; i++)
        out[i] = g->members[i];
    return g->size;
}

static int check_op(int op) { return op >= PHX_OP_AND && op <= PHX_OP_MAX; }

static void keep_failed(phx_group_t *g, const phx_ft_rankset_t *fresh)
{
    g->nlast = 0;
    for (int i = 0; i < g->size; i++)
        if (phx_ft_rankset_test(fresh, g->members[i]))
            g->last[g->nlast++] = g->members[i];
}

int phx_agree(phx_ctx_t *c, phx_group_t *g, uint64_t *value, int op)
{
    if (!c || !g || !value || !check_op(op))
        return PHX_EINVAL;
    agree_req_t r = { .kind = RQ_AGREE, .g = g, .value = *value, .op = op };
    int rc = run_req(c, &r);
    if (rc == 0 || rc == PHX_EPROCFAIL || rc == PHX_EREVOKED) {
        *value = r.out;
        keep_failed(g, &r.fresh);
    }
    return rc;
}

int phx_agree_failed(phx_ctx_t *c, phx_group_t *g, int *out, int cap)
{
    if (!c || !g || (cap > 0 && !out))
        return PHX_EINVAL;
    for (int i = 0; i < g->nlast && i < cap; i++)
        out[i] = g->last[i];
    return g->nlast;
}

int phx_revoke(phx_ctx_t *c, phx_group_t *g)
{
    if (!c || !g)
        return PHX_EINVAL;
    agree_req_t r = { .kind = RQ_REVOKE, .g = g };
    return run_req(c, &r);
}

int phx_shrink(phx_ctx_t *c, phx_group_t *g, phx_group_t **out)
{
    if (!c || !g || !out)
        return PHX_EINVAL;
    agree_req_t r = { .kind = RQ_SHRINK, .g = g };
    int rc = run_req(c, &r);
    if (rc == 0) {
        keep_failed(g, &r.fresh);
        *out = r.newg;
    }
    return rc;
}

int phx_allreduce(phx_ctx_t *c, phx_group_t *g, uint64_t *value, int op)
{
    if (!c || !g || !value || !check_op(op))
        return PHX_EINVAL;
    agree_req_t r = { .kind = RQ_ALLREDUCE, .g = g, .value = *value, .op = op };
    int rc = run_req(c, &r);
    if (rc == 0)
        *value = r.out;
    return rc;
}

/* ---- failure acknowledgement (phx_failure_ack, core/phalanx.h) ---------- */

/* The dead list now, malloc'd into *out (NULL when empty); count or
 * PHX_ENOMEM. */
static int dead_snapshot(phx_node_t *n, int **out)
{
    pthread_mutex_lock(&n->dead_lock);
    int k = n->ndead;
    int *l = k ? malloc((size_t)k * sizeof *l) : NULL;
    if (l)
        memcpy(l, n->dead, (size_t)k * sizeof *l);
    pthread_mutex_unlock(&n->dead_lock);
    *out = l;
    return k && !l ? PHX_ENOMEM : k;
}

/* Acknowledged failures live in ONE state, core/agree.c's, which also
 * feeds every agreement and group. ack: acknowledge the dead known now and
 * return their number; else return how many of them are not acknowledged. */
static int dead_ack(int ack)
{
    phx_node_t *n = phx_node_current;
    int *l;
    int k = n ? dead_snapshot(n, &l) : 0;
    if (k <= 0)
        return k;
    int rc = ack ? phx_agree_ack(n, l, k) : phx_agree_count_acked(n, l, k);
    free(l);
    return rc < 0 ? rc : ack ? k : k - rc;
}

int phx_failure_ack(void) { return dead_ack(1); }
int phx_failures_unacked(void) { return dead_ack(0); }
