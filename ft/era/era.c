/* ERA engine (Early Returning Agreement, ft/era/era.h): resilient fan-in/fan-out on a mendable tree.
 *
 * Invariants the code relies on (argued in README.md):
 *  - a process sends its UP (aggregated contribution) only to the parent of
 *    its current view and only once all children of that view reported;
 *    parents change only when the current parent is reported dead, so
 *    after re-parenting nothing from the old parent can arrive;
 *  - a decided process answers any UP with DECIDE and pushes DECIDE to every
 *    new parent it gets, so an undecided new root always learns a decision
 *    that some survivor already returned (early return stays uniform);
 *  - the root decides only with a report from every child of its view. */
#include "ft/era/era_int.h"

#include "base/phx_err.h"
#include "base/phx_log.h"
#include "base/phx_wire.h"

#include <stdlib.h>
#include <string.h>

#define SUB "era"

/* ---- wire format ------------------------------------------------------
 * Little-endian. 40-byte header, then nwords value words, then nbm words of
 * dead set and nbm words of acked set (UP / DECIDE only).
 *   0 u32 magic | 4 u8 version | 5 u8 type | 6 u8 op | 7 u8 nwords
 *   8 u64 gid | 16 u64 aid | 24 u64 low | 32 u16 nbm | 34 u16 0 | 36 u32 0 */
#define ERA_MAGIC   0x52455850u  /* "PXER" */
#define ERA_VERSION 1
#define ERA_HDR     40
enum { MSG_UP = PHX_FT_ERA_MSG_UP, MSG_DECIDE = PHX_FT_ERA_MSG_DECIDE, MSG_REVOKE = PHX_FT_ERA_MSG_REVOKE };

#define ERA_MAX_MSG (ERA_HDR + 8 * (PHX_FT_ERA_VAL_WORDS + 2 * PHX_FT_RANKSET_WORDS))

typedef struct msg {
    uint8_t type, op;
    uint32_t nwords;
    uint64_t gid, aid, low;
    phx_ft_era_value_t val;
    phx_ft_rankset_t dead, ack;
} msg_t;

int phx_ft_era_msg_peek(const void *buf, size_t len, phx_ft_era_peek_t *out)
{
    phx_wdec_t d;
    phx_wdec_init(&d, buf, len);
    uint32_t magic = phx_wdec_u32(&d);
    uint8_t ver = phx_wdec_u8(&d);
    out->type = phx_wdec_u8(&d);
    phx_wdec_take(&d, 2);   /* op, nwords */
    out->gid = phx_wdec_u64(&d);
    out->aid = phx_wdec_u64(&d);
    if (len < ERA_HDR || d.err || magic != ERA_MAGIC || ver != ERA_VERSION || out->type < MSG_UP ||
        out->type > MSG_REVOKE) {
        out->type = 0;
        return PHX_EPROTO;
    }
    return 0;
}

int phx_ft_era_msg_type(const void *buf, size_t len)
{
    phx_ft_era_peek_t pk;
    return phx_ft_era_msg_peek(buf, len, &pk) ? 0 : pk.type;
}

static size_t encode(const phx_ft_era_t *era, const msg_t *m, uint8_t *buf)
{
    phx_wenc_t e;
    phx_wenc_init(&e, buf, ERA_MAX_MSG);
    int body = m->type != MSG_REVOKE;
    phx_wenc_u32(&e, ERA_MAGIC);
    phx_wenc_u8(&e, ERA_VERSION);
    phx_wenc_u8(&e, m->type);
    phx_wenc_u8(&e, m->op);
    phx_wenc_u8(&e, (uint8_t)m->nwords);
    phx_wenc_u64(&e, m->gid);
    phx_wenc_u64(&e, m->aid);
    phx_wenc_u64(&e, m->low);
    phx_wenc_u16(&e, body ? (uint16_t)era->nbm : 0);
    phx_wenc_u16(&e, 0);
    phx_wenc_u32(&e, 0);
    for (uint32_t i = 0; body && i < m->nwords; i++)
        phx_wenc_u64(&e, m->val.w[i]);
    for (int i = 0; body && i < era->nbm; i++)
        phx_wenc_u64(&e, m->dead.w[i]);
    for (int i = 0; body && i < era->nbm; i++)
        phx_wenc_u64(&e, m->ack.w[i]);
    return (size_t)phx_wenc_end(&e);   /* ERA_MAX_MSG fits every message */
}

/* Full validation before anything is touched, so a bad message leaves the
 * state machine exactly as it was. */
static int decode(const phx_ft_era_t *era, const uint8_t *buf, size_t len, msg_t *m)
{
    if (!buf)
        return PHX_EPROTO;
    phx_wdec_t d;
    phx_wdec_init(&d, buf, len);
    memset(m, 0, sizeof *m);
    uint32_t magic = phx_wdec_u32(&d);
    unsigned ver = phx_wdec_u8(&d);
    m->type = phx_wdec_u8(&d);
    m->op = phx_wdec_u8(&d);
    m->nwords = phx_wdec_u8(&d);
    m->gid = phx_wdec_u64(&d);
    m->aid = phx_wdec_u64(&d);
    m->low = phx_wdec_u64(&d);
    unsigned nbm = phx_wdec_u16(&d), pad16 = phx_wdec_u16(&d);
    uint32_t pad32 = phx_wdec_u32(&d);
    if (d.err || magic != ERA_MAGIC || ver != ERA_VERSION || pad16 || pad32)
        return PHX_EPROTO;
    if (m->type == MSG_REVOKE)
        return (phx_wdec_end(&d, 1) == 0 && m->op == 0 && m->nwords == 0 && nbm == 0 &&
                m->aid == 0 && m->low == 0) ? 0 : PHX_EPROTO;
    if (m->type != MSG_UP && m->type != MSG_DECIDE)
        return PHX_EPROTO;
    if (m->op > PHX_FT_ERA_MAX || m->nwords < 1 || m->nwords > PHX_FT_ERA_VAL_WORDS ||
        nbm != (unsigned)era->nbm)
        return PHX_EPROTO;
    m->val.nwords = m->nwords;
    for (uint32_t i = 0; i < m->nwords; i++)
        m->val.w[i] = phx_wdec_u64(&d);
    for (unsigned i = 0; i < nbm; i++)
        m->dead.w[i] = phx_wdec_u64(&d);
    for (unsigned i = 0; i < nbm; i++)
        m->ack.w[i] = phx_wdec_u64(&d);
    if (phx_wdec_end(&d, 1) < 0)
        return PHX_EPROTO;
    /* Ranks beyond the job would index out of every table. */
    unsigned tail = (unsigned)era->n & 63;
    if (tail) {
        uint64_t bad = ~(((uint64_t)1 << tail) - 1);
        if ((m->dead.w[nbm - 1] | m->ack.w[nbm - 1]) & bad)
            return PHX_EPROTO;
    }
    return 0;
}

/* ---- values ------------------------------------------------------------ */

static void val_merge(phx_ft_era_value_t *a, const phx_ft_era_value_t *b, uint8_t op)
{
    for (uint32_t i = 0; i < a->nwords; i++) {
        uint64_t x = a->w[i], y = b->w[i];
        switch (op) {
        case PHX_FT_ERA_AND: a->w[i] = x & y; break;
        case PHX_FT_ERA_OR:  a->w[i] = x | y; break;
        case PHX_FT_ERA_MIN: a->w[i] = x < y ? x : y; break;
        default:             a->w[i] = x > y ? x : y; break;
        }
    }
}

static void val_norm(phx_ft_era_value_t *dst, const phx_ft_era_value_t *src)
{
    memset(dst, 0, sizeof *dst);
    dst->nwords = src->nwords;
    memcpy(dst->w, src->w, sizeof(uint64_t) * src->nwords);
}

void phx_ft_era_value_u64(phx_ft_era_value_t *v, uint64_t x)
{
    memset(v, 0, sizeof *v);
    v->nwords = 1;
    v->w[0] = x;
}

int phx_ft_rankset_count(const phx_ft_rankset_t *s)
{
    int c = 0;
    for (int i = 0; i < PHX_FT_RANKSET_WORDS; i++)
        c += __builtin_popcountll(s->w[i]);
    return c;
}

static void rs_or(phx_ft_rankset_t *a, const phx_ft_rankset_t *b)
{
    for (int i = 0; i < PHX_FT_RANKSET_WORDS; i++)
        a->w[i] |= b->w[i];
}
static void rs_and(phx_ft_rankset_t *a, const phx_ft_rankset_t *b)
{
    for (int i = 0; i < PHX_FT_RANKSET_WORDS; i++)
        a->w[i] &= b->w[i];
}

/* ---- plumbing ---------------------------------------------------------- */

int era_send(phx_ft_era_t *era, int dst, const void *buf, size_t len)
{
    int rc = era->env.send(era->env.ctx, dst, buf, len);
    if (rc < 0) {
        PHX_WARN(SUB, "send to %d failed: %s", dst, phx_strerror(rc));
        if (!era->first_err)
            era->first_err = rc;
    }
    return rc;
}

int era_queue_ev(phx_ft_era_t *era, const era_ev_t *ev)
{
    if (era->evq_len == era->evq_cap) {
        size_t cap = era->evq_cap ? era->evq_cap * 2 : 8;
        era_ev_t *q = realloc(era->evq, cap * sizeof *q);
        if (!q)
            return PHX_ENOMEM;
        era->evq = q;
        era->evq_cap = cap;
    }
    era->evq[era->evq_len++] = *ev;
    return 0;
}

static era_inst_t *inst_find(phx_ft_era_t *era, uint64_t gid, uint64_t aid)
{
    for (era_inst_t *x = era->insts; x; x = x->next)
        if (x->gid == gid && x->aid == aid)
            return x;
    return NULL;
}

static era_inst_t *inst_new(phx_ft_era_t *era, uint64_t gid, uint64_t aid)
{
    era_inst_t *x = calloc(1, sizeof *x);
    if (!x)
        return NULL;
    x->gid = gid;
    x->aid = aid;
    x->seq = era->seq++;
    x->sent_to = -1;
    x->last_parent = -1;
    x->low = UINT64_MAX;
    memset(&x->ack, 0xff, sizeof x->ack);   /* neutral for intersection */
    x->next = era->insts;
    era->insts = x;
    era->ninst++;
    return x;
}

/* Drops entries every survivor is known to have decided (gc_below, agreed
 * inside decisions as in ERA's "Garbage Collection", ft/era/era.h), then enforces the
 * history bound. Deferred to era_exit so no list walk sees a freed entry. */
static void sweep(phx_ft_era_t *era)
{
    era_inst_t **pp = &era->insts;
    size_t ndec = 0;
    while (*pp) {
        era_inst_t *x = *pp;
        phx_ft_group_t *g = x->g ? x->g : phx_ft_group_lookup(era, x->gid);
        if (g && x->aid < g->gc_below && (x->decided || !x->started)) {
            *pp = x->next;
            free(x);
            era->ninst--;
            continue;
        }
        ndec += x->decided;
        pp = &x->next;
    }
    while (ndec > era->history_max) {
        era_inst_t **victim = NULL;
        for (pp = &era->insts; *pp; pp = &(*pp)->next)
            if ((*pp)->decided && (!victim || (*pp)->seq < (*victim)->seq))
                victim = pp;
        era_inst_t *x = *victim;
        PHX_WARN(SUB, "history full: forgetting agreement %llu of group %llu; a late "
                 "requester for it would wait forever",
                 (unsigned long long)x->aid, (unsigned long long)x->gid);
        *victim = x->next;
        free(x);
        era->ninst--;
        ndec--;
    }
}

void era_enter(phx_ft_era_t *era)
{
    if (era->depth++ == 0)
        era->first_err = 0;
}

int era_exit(phx_ft_era_t *era, int rc)
{
    int err = era->first_err;
    if (--era->depth > 0)
        return rc < 0 ? rc : err;
    era->first_err = 0;
    if (era->sweep) {
        era->sweep = false;
        sweep(era);
    }
    if (!era->flushing) {
        /* Callbacks may re-enter; nested calls only append to the queue. */
        era->flushing = true;
        while (era->evq_head < era->evq_len) {
            era_ev_t ev = era->evq[era->evq_head++];
            switch (ev.kind) {
            case EV_DECIDED:
                era->env.decided(era->env.ctx, ev.gid, ev.aid, &ev.value, &ev.failed, ev.rc);
                break;
            case EV_SHRUNK:
                if (era->env.shrunk)
                    era->env.shrunk(era->env.ctx, ev.gid, ev.aid, ev.newg, &ev.failed, ev.rc);
                break;
            case EV_REVOKED:
                if (era->env.revoked)
                    era->env.revoked(era->env.ctx, ev.gid);
                break;
            }
        }
        era->evq_head = era->evq_len = 0;
        era->flushing = false;
    }
    return rc < 0 ? rc : err;
}

/* ---- tree (ERA's "Mendable Tree") -----------------------------------------
 * Members by index form a BFS-numbered k-ary tree, so ancestors have lower
 * indices. The parent is the nearest live ancestor; with none, the lowest
 * live index, which is the root. */

static bool idx_dead(const phx_ft_era_t *era, const phx_ft_group_t *g, int i)
{
    return rs_test(&era->dead, g->members[i]);
}

static int lowest_alive(const phx_ft_era_t *era, const phx_ft_group_t *g)
{
    for (int i = 0; i < g->m; i++)
        if (!idx_dead(era, g, i))
            return i;
    return -1;
}

static int tree_parent(const phx_ft_era_t *era, const phx_ft_group_t *g, int i, int low)
{
    if (i == low)
        return -1;
    int a = i;
    while (a > 0) {
        a = (a - 1) / (int)era->arity;
        if (!idx_dead(era, g, a))
            return a;
    }
    return low;
}

/* 1 iff a live j whose parent is i (tree_parent(j) == i) has not sent its
 * UP. Those are i's live children and the live descendants reached through
 * dead children only, so the walk costs O(arity * (1 + dead)), not O(m).
 * skip: a live index that is never i's child (the root itself). */
static bool wait_child(const phx_ft_era_t *era, const era_inst_t *x, int i, int skip)
{
    const phx_ft_group_t *g = x->g;
    long k = (long)era->arity;
    for (long c = (long)i * k + 1; c <= (long)i * k + k && c < g->m; c++) {
        if (idx_dead(era, g, (int)c)) {
            if (wait_child(era, x, (int)c, skip))
                return true;
        } else if (c != skip && !rs_test(&x->got_up, g->members[c])) {
            return true;
        }
    }
    return false;
}

static uint64_t lowest_undecided(const phx_ft_era_t *era, uint64_t gid)
{
    uint64_t lo = UINT64_MAX;
    for (const era_inst_t *x = era->insts; x; x = x->next)
        if (x->gid == gid && x->started && !x->decided && x->aid < lo)
            lo = x->aid;
    return lo;
}

static void fill_msg(const era_inst_t *x, uint8_t type, msg_t *m)
{
    memset(m, 0, sizeof *m);
    m->type = type;
    m->op = x->op;
    m->nwords = x->nwords;
    m->gid = x->gid;
    m->aid = x->aid;
    m->low = x->low;
    m->val = x->agg;
    m->dead = x->dead;
    m->ack = x->ack;
}

static void send_decide(phx_ft_era_t *era, const era_inst_t *x, int dst)
{
    msg_t m;
    uint8_t buf[ERA_MAX_MSG];
    fill_msg(x, MSG_DECIDE, &m);
    era_send(era, dst, buf, encode(era, &m, buf));
}

static void send_up(phx_ft_era_t *era, era_inst_t *x, int dst)
{
    msg_t m;
    uint8_t buf[ERA_MAX_MSG];
    fill_msg(x, MSG_UP, &m);
    rs_or(&m.dead, &era->dead);     /* fresher knowledge only helps */
    uint64_t lo = lowest_undecided(era, x->gid);
    if (lo < m.low)
        m.low = lo;
    era_send(era, dst, buf, encode(era, &m, buf));
}

/* The successor group: the members less the decision's failed set. */
static int finish_shrink(phx_ft_era_t *era, era_inst_t *x, era_ev_t *ev)
{
    const phx_ft_group_t *g = x->g;
    const phx_ft_rankset_t *out = &x->dead;
    int *mem = malloc(sizeof(int) * (size_t)g->m);
    if (!mem)
        return PHX_ENOMEM;
    int k = 0;
    for (int i = 0; i < g->m; i++)
        if (!rs_test(out, g->members[i]))
            mem[k++] = g->members[i];
    ev->kind = EV_SHRUNK;
    int rc = group_create_internal(era, phx_ft_ulfm_shrink_gid(g->id, x->aid), mem, k, false,
                                   &ev->newg);
    free(mem);
    if (rc < 0) {
        PHX_ERROR(SUB, "shrink of group %llu: cannot create successor: %s",
                  (unsigned long long)g->id, phx_strerror(rc));
        ev->newg = NULL;
        ev->rc = rc;
    }
    return 0;
}

/* Record the decision, answer everyone who reported to us, and tell our
 * parent too when the decision came from elsewhere, so it can never decide
 * differently as a future root. from = -1 when we are the deciding root. */
static void decide(phx_ft_era_t *era, era_inst_t *x, int from)
{
    phx_ft_group_t *g = x->g;
    x->decided = true;
    rs_and(&x->dead, &g->mask);
    phx_ft_rankset_t unacked = x->dead;
    for (int i = 0; i < PHX_FT_RANKSET_WORDS; i++)
        unacked.w[i] &= ~x->ack.w[i];
    x->rc = phx_ft_rankset_count(&unacked) ? PHX_EPROCFAIL : PHX_OK;

    /* Ascending over got_up's set bits: O(n/64 + children), not O(n). */
    for (int wi = 0; wi < era->nbm; wi++)
        for (uint64_t b = x->got_up.w[wi]; b; b &= b - 1) {
            int r = wi * 64 + __builtin_ctzll(b);
            if (r != era->rank && r != from && !rs_test(&era->dead, r))
                send_decide(era, x, r);
        }
    int low = lowest_alive(era, g);
    int p = tree_parent(era, g, g->self_idx, low);
    x->last_parent = p < 0 ? -1 : g->members[p];
    if (x->last_parent >= 0 && x->last_parent != from && !rs_test(&x->got_up, x->last_parent))
        send_decide(era, x, x->last_parent);

    era_ev_t ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = EV_DECIDED;
    ev.gid = x->gid;
    ev.aid = x->aid;
    ev.value = x->agg;
    ev.failed = x->dead;
    ev.rc = x->rc;
    if (x->shrink && finish_shrink(era, x, &ev) < 0 && !era->first_err)
        era->first_err = PHX_ENOMEM;
    if (era_queue_ev(era, &ev) < 0) {
        PHX_ERROR(SUB, "out of memory queueing decision of %llu", (unsigned long long)x->aid);
        if (!era->first_err)
            era->first_err = PHX_ENOMEM;
    }
    if (x->low != UINT64_MAX && x->low > g->gc_below) {
        g->gc_below = x->low;
        era->sweep = true;
    }
}

static void progress(phx_ft_era_t *era, era_inst_t *x)
{
    if (!x->started || x->decided)
        return;
    phx_ft_group_t *g = x->g;
    int me = g->self_idx;
    int low = lowest_alive(era, g);
    /* The root (lowest live index) also adopts every live member whose
     * ancestors are all dead: the subtrees of dead index 0. */
    if (wait_child(era, x, me, -1) || (me == low && low > 0 && wait_child(era, x, 0, me)))
        return;
    if (me == low) {
        rs_or(&x->dead, &era->dead);
        uint64_t lo = lowest_undecided(era, x->gid);
        if (lo < x->low)
            x->low = lo;
        decide(era, x, -1);
        return;
    }
    int p = g->members[tree_parent(era, g, me, low)];
    if (x->sent_to != p) {
        x->sent_to = p;
        send_up(era, x, p);
    }
}

/* A decided member keeps its new parents informed: an undecided parent that
 * becomes root must adopt the value we already returned. */
static void repush(phx_ft_era_t *era, era_inst_t *x)
{
    phx_ft_group_t *g = x->g;
    if (!g || !x->decided)
        return;
    int low = lowest_alive(era, g);
    int pi = tree_parent(era, g, g->self_idx, low);
    int p = pi < 0 ? -1 : g->members[pi];
    if (p != x->last_parent) {
        x->last_parent = p;
        if (p >= 0)
            send_decide(era, x, p);
    }
}

/* ---- public ------------------------------------------------------------ */

int phx_ft_era_create(const phx_ft_era_env_t *env, int rank, int n, phx_ft_era_t **out)
{
    if (!env || !out || !env->send || !env->decided || n < 1 ||
        n > PHX_FT_ERA_ENGINE_MAX_RANKS || rank < 0 || rank >= n)
        return PHX_EINVAL;
    phx_ft_era_t *era = calloc(1, sizeof *era);
    if (!era)
        return PHX_ENOMEM;
    era->env = *env;
    era->rank = rank;
    era->n = n;
    era->nbm = (n + 63) / 64;
    era->arity = env->arity ? env->arity : 2;
    era->history_max = env->history_max ? env->history_max : 256;
    era->inst_max = (size_t)era->history_max * 4 + 1024;
    *out = era;
    return 0;
}

void phx_ft_era_destroy(phx_ft_era_t *era)
{
    if (!era)
        return;
    while (era->insts) {
        era_inst_t *x = era->insts;
        era->insts = x->next;
        free(x);
    }
    group_free_all(era);
    free(era->evq);
    free(era);
}

int era_start_internal(phx_ft_era_t *era, phx_ft_group_t *g, uint64_t aid,
                       const phx_ft_era_value_t *value, phx_ft_era_op_t op, bool shrink)
{
    if (!g || g->era != era || !value || (unsigned)op > PHX_FT_ERA_MAX ||
        value->nwords < 1 || value->nwords > PHX_FT_ERA_VAL_WORDS)
        return PHX_EINVAL;
    if (g->any_started && aid <= g->last_aid)
        return PHX_EINVAL;
    era_inst_t *x = inst_find(era, g->id, aid);
    if (x && (x->started || (x->nwords && (x->op != op || x->nwords != value->nwords)))) {
        PHX_ERROR(SUB, "agreement %llu of group %llu: op/width differs from peers",
                  (unsigned long long)aid, (unsigned long long)g->id);
        return PHX_EINVAL;
    }
    if (!x && !(x = inst_new(era, g->id, aid)))
        return PHX_ENOMEM;
    g->any_started = true;
    g->last_aid = aid;
    x->g = g;
    x->started = true;
    x->shrink = shrink;
    x->op = (uint8_t)op;
    x->nwords = value->nwords;
    phx_ft_era_value_t v;
    val_norm(&v, value);
    if (x->has_agg)
        val_merge(&x->agg, &v, x->op);
    else
        x->agg = v;
    x->has_agg = true;
    rs_and(&x->ack, &g->acked);
    if (x->pre_decided) {
        /* Cannot happen with a correct peer set: nobody decides without our
         * contribution. Accepting keeps agreement; participation is logged. */
        PHX_ERROR(SUB, "agreement %llu decided before local start", (unsigned long long)aid);
        decide(era, x, era->rank);
        return 0;
    }
    progress(era, x);
    return 0;
}

int phx_ft_era_start(phx_ft_era_t *era, phx_ft_group_t *g, uint64_t aid,
                     const phx_ft_era_value_t *value, phx_ft_era_op_t op)
{
    if (!era)
        return PHX_EINVAL;
    era_enter(era);
    return era_exit(era, era_start_internal(era, g, aid, value, op, false));
}

static int on_agree_msg(phx_ft_era_t *era, int src, const msg_t *m)
{
    phx_ft_group_t *g = phx_ft_group_lookup(era, m->gid);
    if (g && !rs_test(&g->mask, src))
        return PHX_EPROTO;
    if (g && m->aid < g->gc_below)
        return 0;   /* everyone decided it; a stale echo */
    era_inst_t *x = inst_find(era, m->gid, m->aid);
    if (x && x->nwords && (x->op != m->op || x->nwords != m->nwords))
        return PHX_EPROTO;
    if (x && x->decided) {
        if (m->type == MSG_UP) {
            send_decide(era, x, src);
        } else if (memcmp(x->agg.w, m->val.w, sizeof(uint64_t) * x->nwords) != 0) {
            PHX_ERROR(SUB, "conflicting decisions for agreement %llu from %d",
                      (unsigned long long)m->aid, src);
            return PHX_EPROTO;
        }
        return 0;
    }
    if (!x) {
        if (era->ninst >= era->inst_max)
            return PHX_ENOSPC;
        if (!(x = inst_new(era, m->gid, m->aid)))
            return PHX_ENOMEM;
    }
    if (!x->nwords) {
        x->op = m->op;
        x->nwords = m->nwords;
    }
    if (m->type == MSG_DECIDE) {
        x->agg = m->val;
        x->dead = m->dead;
        x->ack = m->ack;
        x->low = m->low;
        x->has_agg = true;
        if (x->started)
            decide(era, x, src);
        else
            x->pre_decided = true;
        return 0;
    }
    if (x->pre_decided) {
        send_decide(era, x, src);
        return 0;
    }
    if (x->has_agg)
        val_merge(&x->agg, &m->val, x->op);
    else
        x->agg = m->val;
    x->has_agg = true;
    rs_or(&x->dead, &m->dead);
    rs_and(&x->ack, &m->ack);
    if (m->low < x->low)
        x->low = m->low;
    phx_ft_rankset_add(&x->got_up, src);
    progress(era, x);
    return 0;
}

int phx_ft_era_on_msg(phx_ft_era_t *era, int src, const void *buf, size_t len)
{
    if (!era || src < 0 || src >= era->n || src == era->rank)
        return PHX_EPROTO;
    msg_t m;
    int rc = decode(era, buf, len, &m);
    if (rc < 0) {
        PHX_WARN(SUB, "malformed message from %d (%zu bytes)", src, len);
        return rc;
    }
    if (rs_test(&era->dead, src))
        return 0;
    era_enter(era);
    if (m.type == MSG_REVOKE)
        group_on_revoke_msg(era, src, m.gid);
    else
        rc = on_agree_msg(era, src, &m);
    return era_exit(era, rc);
}

int phx_ft_era_on_failure(phx_ft_era_t *era, int rank)
{
    if (!era || rank < 0 || rank >= era->n)
        return PHX_EINVAL;
    if (rank == era->rank)
        return PHX_EFENCED;
    if (rs_test(&era->dead, rank))
        return 0;
    era_enter(era);
    phx_ft_rankset_add(&era->dead, rank);
    group_on_failure(era, rank);
    for (era_inst_t *x = era->insts; x; x = x->next) {
        if (!x->g || !rs_test(&x->g->mask, rank))
            continue;
        if (x->decided)
            repush(era, x);
        else
            progress(era, x);
    }
    return era_exit(era, 0);
}

void era_send_revoke(phx_ft_era_t *era, phx_ft_group_t *g)
{
    msg_t m;
    uint8_t buf[ERA_HDR];
    memset(&m, 0, sizeof m);
    m.type = MSG_REVOKE;
    m.gid = g->id;
    size_t len = encode(era, &m, buf);
    for (int i = 0; i < g->m; i++) {
        int r = g->members[i];
        if (r != era->rank && !rs_test(&era->dead, r))
            era_send(era, r, buf, len);
    }
}

const phx_ft_rankset_t *phx_ft_era_dead(const phx_ft_era_t *era) { return &era->dead; }

size_t phx_ft_era_pending(const phx_ft_era_t *era)
{
    size_t c = 0;
    for (const era_inst_t *x = era->insts; x; x = x->next)
        c += x->started && !x->decided;
    return c;
}

size_t phx_ft_era_history(const phx_ft_era_t *era)
{
    size_t c = 0;
    for (const era_inst_t *x = era->insts; x; x = x->next)
        c += x->decided;
    return c;
}
