/* GLB / FTGLB protocol state machine (see glb_sm.h and README.md).
 *
 * A node's *state* is (bag, result, open gifts, got table, adopted mask).
 * With ft every message whose effect another node relies on is sent only
 * after a backup covering that state was acknowledged by the ring successor:
 *   give (victim)       after the steal backup that holds the gift as "open";
 *   Tend, "got" answer  (thief) after the backup that holds the merged loot.
 * A gift is therefore always in exactly one place that survives one loss:
 * the victim side's open list, or the thief side's bag, decided by the got
 * table (max tan received per victim) that travels in the thief's backups.
 * A dead node's backup is adopted by its first live successor; whoever
 * holds a dead victim's open gifts asks the thief side which way they went. */
#include "ft/glb/glb_sm.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/phx_err.h"

enum {
    M_STEAL = 1, M_NOWORK, M_GIVE, M_TEND, M_BACKUP, M_BACKUP_ACK, M_GOTQ, M_GOTA, M_WAVE, M_WAVE_R,
    M_BYE,      /* a drained node's last message: it handles nothing more (its notice) */
};
enum { OP_WAIT, OP_GIVEN, OP_NEED, OP_QUERY };

#define BIT(r) (1ull << (r))

typedef struct open_e {
    uint8_t vo, thief, st;
    uint32_t tan;
    uint8_t *loot;
    uint32_t len;
    uint64_t need_seq;          /* OP_WAIT: backup that must be acked first */
    uint64_t qid, since;        /* OP_QUERY */
    int qdst;
} open_e_t;

typedef struct ptend { uint8_t v; uint32_t tan; uint64_t need_seq; } ptend_t;
typedef struct defans { int src; uint64_t qid; uint8_t o, v; uint32_t tan; } defans_t;
typedef struct wrep { int have, idle; uint64_t cnt, mask; } wrep_t;

struct phx_glb_sm {
    phx_glb_cfg_t cfg;
    const phx_glb_ops_t *ops;
    void *app;
    phx_glb_io_t io;
    int rank, size, over;
    /* Drain (phx_glb_sm_leave): leaving, this node works no more, steals
     * no more and gives nothing; it backs its whole state up (flagged
     * final) until one such backup is acked with nothing changed since;
     * then left: it handles nothing more and its process exits. */
    int leaving, left;
    uint64_t rng, t0;

    void *bag;
    uint64_t *result;
    uint64_t mask;              /* ranks whose states this state contains */
    uint64_t dead, nogive;      /* known dead; victims whose gives are orphans */
    uint32_t got[PHX_GLB_MAXP][PHX_GLB_MAXP];   /* [thief origin][victim] max tan */
    uint64_t got_seq[PHX_GLB_MAXP];             /* own row: backup that covers it */
    uint32_t tan_ctr;
    uint64_t recv_cnt;          /* counted arrivals of work (two-wave rule) */

    open_e_t *open; int nopen, capopen;
    ptend_t *pt; int npt, cappt;
    defans_t *da; int nda, capda;
    uint64_t qid_ctr;

    /* backups */
    int back;                   /* ring successor holding my backup; -1 none */
    int dirty, urgent, inflight, restoring;
    uint64_t restore_seq;       /* restoring: the first backup after it covers the adoption */
    uint64_t sent_seq, acked_seq, bk_since, iter, last_bk_iter;
    uint8_t *bk[PHX_GLB_MAXP]; uint32_t bklen[PHX_GLB_MAXP]; uint64_t bkseq[PHX_GLB_MAXP];
    uint64_t ever;              /* ranks that ever sent us a backup */
    uint64_t bkfinal;           /* ranks whose backup here is a drain's final state */

    /* stealing */
    int victim, attempts, inactive;
    uint64_t steal_since, lifeline_thieves;

    /* waves (the root: the lowest live rank) */
    int wave_active;
    uint32_t wave_no;
    uint64_t wave_since, next_wave, wave_gap;
    wrep_t cur[PHX_GLB_MAXP], prev[PHX_GLB_MAXP];
    uint64_t *cur_res;          /* size x words */

    uint8_t *buf; size_t bufcap;
    phx_glb_sm_stats_t st;
};

/* ---- small helpers ------------------------------------------------------ */

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q) {
        fprintf(stderr, "glb: out of memory (%zu bytes)\n", n);
        abort();
    }
    return q;
}

#define PUSH(arr, n, cap) \
    ((n) == (cap) ? ((cap) = (cap) ? 2 * (cap) : 8, (arr) = xrealloc((arr), (size_t)(cap) * sizeof *(arr))) : 0, \
     &(arr)[(n)++])

static uint64_t rnd(phx_glb_sm_t *s)
{
    s->rng ^= s->rng >> 12; s->rng ^= s->rng << 25; s->rng ^= s->rng >> 27;
    return s->rng * 0x2545F4914F6CDD1DULL;
}

static int alive(const phx_glb_sm_t *s, int r) { return !(s->dead & BIT(r)); }

/* The reduction root: the lowest live rank. Every survivor hears every
 * notice, so they all agree on it once the notices are in; a wave from a
 * root that a node already knows dead is an orphan. */
static int root(const phx_glb_sm_t *s)
{
    for (int r = 0; r < s->size; r++)
        if (alive(s, r))
            return r;
    return s->rank;
}

/* First live rank after r in ring order (r itself when alone). */
static int succ(const phx_glb_sm_t *s, int r)
{
    for (int i = 1; i <= s->size; i++) {
        int x = (r + i) % s->size;
        if (alive(s, x))
            return x;
    }
    return r;
}

__attribute__((format(printf, 2, 3))) static void fail(phx_glb_sm_t *s, const char *fmt, ...)
{
    if (s->over)
        return;
    char why[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    s->over = 1;
    s->io.abort(s->io.ctx, why);
}

static void point(phx_glb_sm_t *s, const char *label)
{
    if (s->io.point)
        s->io.point(s->io.ctx, label);
}

static uint8_t *scratch(phx_glb_sm_t *s, size_t n)
{
    if (n > s->bufcap) {
        s->bufcap = n + n / 2 + 64;
        s->buf = xrealloc(s->buf, s->bufcap);
    }
    return s->buf;
}

static void send_small(phx_glb_sm_t *s, int dst, int type, uint64_t a, uint64_t b)
{
    uint8_t m[1 + 8 + 8];
    phx_wenc_t e;
    phx_wenc_init(&e, m, sizeof m);
    phx_wenc_u8(&e, (uint8_t)type);
    phx_wenc_u64(&e, a);
    phx_wenc_u64(&e, b);
    s->io.send(s->io.ctx, dst, m, (size_t)phx_wenc_end(&e));
}

static uint8_t *pack_bag(phx_glb_sm_t *s, const void *bag, uint32_t *len)
{
    size_t n = s->ops->pack_size(s->app, bag);
    uint8_t *b = xrealloc(NULL, n ? n : 1);
    phx_wenc_t e;
    phx_wenc_init(&e, b, n);
    s->ops->pack(s->app, bag, &e);
    if (phx_wenc_end(&e) < 0) {
        fprintf(stderr, "glb: bag pack overflowed its pack_size\n");
        abort();
    }
    *len = (uint32_t)phx_wenc_end(&e);
    return b;
}

/* Merges a packed bag into ours; 0 or PHX_EPROTO. */
static int merge_packed(phx_glb_sm_t *s, const uint8_t *p, size_t len)
{
    phx_wdec_t d;
    phx_wdec_init(&d, p, len);
    void *b = s->ops->unpack(s->app, &d);
    if (!b || phx_wdec_end(&d, 1) != 0) {
        if (b)
            s->ops->bag_free(s->app, b);
        return PHX_EPROTO;
    }
    s->ops->merge(s->app, s->bag, b);
    s->dirty = 1;
    return 0;
}

/* 0 if p is exactly one packed bag, else PHX_EPROTO (nothing merged). */
static int packed_ok(phx_glb_sm_t *s, const uint8_t *p, size_t len)
{
    phx_wdec_t d;
    phx_wdec_init(&d, p, len);
    void *b = s->ops->unpack(s->app, &d);
    int rc = !b || phx_wdec_end(&d, 1) != 0 ? PHX_EPROTO : 0;
    if (b)
        s->ops->bag_free(s->app, b);
    return rc;
}

static int is_idle(const phx_glb_sm_t *s)
{
    if (!s->ops->is_empty(s->app, s->bag) || s->nopen || s->npt)
        return 0;
    return !s->cfg.ft || s->back < 0 || (!s->dirty && !s->inflight);
}

/* ---- backups ------------------------------------------------------------ */

static size_t state_size(phx_glb_sm_t *s, size_t baglen)
{
    size_t n = 1 + 8 + 1 + 8 + 8 * s->ops->result_words + 4 + baglen + 2 + 1;
    for (int i = 0; i < s->nopen; i++)
        n += 1 + 1 + 4 + 4 + s->open[i].len;
    n += (size_t)s->size * (1 + 1 + (size_t)s->size * 5);
    return n;
}

static void send_backup(phx_glb_sm_t *s, uint64_t now)
{
    uint32_t bl;
    uint8_t *bag = pack_bag(s, s->bag, &bl);
    size_t cap = state_size(s, bl);
    uint8_t *m = scratch(s, cap);
    phx_wenc_t e;
    phx_wenc_init(&e, m, cap);
    phx_wenc_u8(&e, M_BACKUP);
    phx_wenc_u64(&e, ++s->sent_seq);
    phx_wenc_u8(&e, (uint8_t)s->leaving);   /* final: the owner is handing over, not crashing */
    phx_wenc_u64(&e, s->mask);
    for (size_t i = 0; i < s->ops->result_words; i++)
        phx_wenc_u64(&e, s->result[i]);
    phx_wenc_u32(&e, bl);
    phx_wenc_bytes(&e, bag, bl);
    free(bag);
    phx_wenc_u16(&e, (uint16_t)s->nopen);
    int waits = 0;
    for (int i = 0; i < s->nopen; i++) {
        open_e_t *o = &s->open[i];
        phx_wenc_u8(&e, o->vo);
        phx_wenc_u8(&e, o->thief);
        phx_wenc_u32(&e, o->tan);
        phx_wenc_u32(&e, o->len);
        phx_wenc_bytes(&e, o->loot, o->len);
        waits += o->st == OP_WAIT;
    }
    uint64_t rows = s->mask | BIT(s->rank);
    uint8_t nrows = 0;
    for (int o = 0; o < s->size; o++)
        nrows += !!(rows & BIT(o));
    phx_wenc_u8(&e, nrows);
    for (int o = 0; o < s->size; o++) {
        if (!(rows & BIT(o)))
            continue;
        uint8_t cnt = 0;
        for (int v = 0; v < s->size; v++)
            cnt += s->got[o][v] != 0;
        phx_wenc_u8(&e, (uint8_t)o);
        phx_wenc_u8(&e, cnt);
        for (int v = 0; v < s->size; v++)
            if (s->got[o][v]) {
                phx_wenc_u8(&e, (uint8_t)v);
                phx_wenc_u32(&e, s->got[o][v]);
            }
    }
    if (phx_wenc_end(&e) < 0) {
        fprintf(stderr, "glb: backup encoding overflow\n");
        abort();
    }
    s->dirty = s->urgent = 0;
    s->inflight = 1;
    s->bk_since = now;
    s->last_bk_iter = s->iter;
    s->st.backups++;
    s->st.steal_backups += waits > 0;
    s->st.backup_bytes += (uint64_t)phx_wenc_end(&e);
    s->io.send(s->io.ctx, s->back, m, (size_t)phx_wenc_end(&e));
    if (waits)
        point(s, "V1");
}

static void answer_deferred(phx_glb_sm_t *s);

/* Something waits for a covering backup (a gift, a Tend): send it now
 * rather than after the next process(n) round, unless one is in flight. */
static void backup_now(phx_glb_sm_t *s, uint64_t now)
{
    if (s->cfg.ft && s->back >= 0 && !s->inflight && s->dirty)
        send_backup(s, now);
}

/* Sends what waited for the backup numbered seq to be acknowledged: gifts
 * (V2), Tends (T3) and deferred got answers. */
static void release_waiters(phx_glb_sm_t *s, uint64_t seq)
{
    for (int i = 0; i < s->nopen; i++) {
        open_e_t *o = &s->open[i];
        if (o->st != OP_WAIT || o->need_seq > seq)
            continue;
        uint8_t *m = scratch(s, 1 + 4 + o->len);
        phx_wenc_t e;
        phx_wenc_init(&e, m, 1 + 4 + o->len);
        phx_wenc_u8(&e, M_GIVE);
        phx_wenc_u32(&e, o->tan);
        phx_wenc_bytes(&e, o->loot, o->len);
        o->st = OP_GIVEN;
        s->st.gives++;
        s->io.send(s->io.ctx, o->thief, m, (size_t)phx_wenc_end(&e));
        point(s, "V2");
    }
    for (int i = 0; i < s->npt;) {
        if (s->pt[i].need_seq <= seq) {
            send_small(s, s->pt[i].v, M_TEND, s->pt[i].tan, 0);
            s->pt[i] = s->pt[--s->npt];
            point(s, "T3");
        } else {
            i++;
        }
    }
    answer_deferred(s);
}

static void on_backup_ack(phx_glb_sm_t *s, int src, uint64_t seq)
{
    if (src != s->back || !s->inflight || seq != s->sent_seq)
        return;                 /* an ack from a former Back: its backup is void */
    s->inflight = 0;
    s->acked_seq = seq;
    release_waiters(s, seq);
    if (s->restoring && seq > s->restore_seq) {
        s->restoring = 0;
        point(s, "R5");         /* the adopted state is backed up: restore done */
    }
}

static void on_backup(phx_glb_sm_t *s, int src, const uint8_t *p, size_t len)
{
    phx_wdec_t d;
    phx_wdec_init(&d, p, len);
    phx_wdec_u8(&d);
    uint64_t seq = phx_wdec_u64(&d);
    int final = phx_wdec_u8(&d) != 0;
    if (phx_wdec_end(&d, 0) != 0) {
        s->st.malformed++;
        return;
    }
    if (seq <= s->bkseq[src] && s->bk[src])
        return;
    s->bkfinal = final ? s->bkfinal | BIT(src) : s->bkfinal & ~BIT(src);
    free(s->bk[src]);
    s->bk[src] = xrealloc(NULL, len);
    memcpy(s->bk[src], p, len);
    s->bklen[src] = (uint32_t)len;
    s->bkseq[src] = seq;
    s->ever |= BIT(src);
    point(s, "B1");
    send_small(s, src, M_BACKUP_ACK, seq, 0);
}

/* ---- open gifts and their resolution ----------------------------------- */

/* Keeps the list in creation (tan) order: release_waiters sends gifts in
 * list order, and the thief's got row (max tan per victim) says "received"
 * for every lower tan only if gifts to one thief leave in tan order. */
static void open_drop(phx_glb_sm_t *s, int i)
{
    free(s->open[i].loot);
    memmove(&s->open[i], &s->open[i + 1], (size_t)(--s->nopen - i) * sizeof *s->open);
    s->dirty = 1;
}

static void open_readopt(phx_glb_sm_t *s, int i)
{
    if (merge_packed(s, s->open[i].loot, s->open[i].len) != 0) {
        fprintf(stderr, "glb: corrupt open gift\n");
        abort();
    }
    s->recv_cnt++;
    s->st.readopted++;
    s->inactive = 0;
    open_drop(s, i);
}

/* The thief side of gift (vo -> thief, tan) is: the thief itself when alive,
 * else the first live successor (which adopted it, or aborts). Resolves
 * locally when that is us and we hold the thief's got row. */
static void resolve_open(phx_glb_sm_t *s, uint64_t now)
{
    for (int i = 0; i < s->nopen; i++) {
        open_e_t *o = &s->open[i];
        if (o->st == OP_QUERY && !alive(s, o->qdst))
            o->st = OP_NEED;
        if (o->st != OP_NEED)
            continue;
        int t = o->thief;
        int dst = alive(s, t) ? t : succ(s, t);
        if (dst == s->rank) {
            uint64_t rows = s->mask | BIT(s->rank);
            if (!(rows & BIT(t)))
                continue;       /* responsibility check decides (adopt or abort) */
            if (s->got[t][o->vo] >= o->tan) {
                open_drop(s, i--);
            } else {
                if (t == s->rank)
                    s->nogive |= BIT(o->vo);
                open_readopt(s, i--);
            }
            continue;
        }
        o->qid = ++s->qid_ctr;
        o->qdst = dst;
        o->st = OP_QUERY;
        o->since = now;
        s->st.queries++;
        uint8_t m[1 + 8 + 1 + 1 + 4];
        phx_wenc_t e;
        phx_wenc_init(&e, m, sizeof m);
        phx_wenc_u8(&e, M_GOTQ);
        phx_wenc_u64(&e, o->qid);
        phx_wenc_u8(&e, o->thief);
        phx_wenc_u8(&e, o->vo);
        phx_wenc_u32(&e, o->tan);
        s->io.send(s->io.ctx, dst, m, sizeof m);
        point(s, "R2");
    }
}

/* 1 yes, 0 no, -1 not answerable yet. */
static int got_answer(phx_glb_sm_t *s, int o, int v, uint32_t tan)
{
    if (o == s->rank) {
        if (s->got[o][v] >= tan)
            return s->acked_seq >= s->got_seq[v] || !s->cfg.ft || s->back < 0 ? 1 : -1;
        s->nogive |= BIT(v);    /* v is dead: a late give from it is an orphan */
        return 0;
    }
    if ((s->mask & BIT(o)) && !alive(s, o))
        return s->got[o][v] >= tan;
    return -1;
}

static void answer_deferred(phx_glb_sm_t *s)
{
    for (int i = 0; i < s->nda;) {
        defans_t *a = &s->da[i];
        int r = alive(s, a->src) ? got_answer(s, a->o, a->v, a->tan) : 0;
        if (r < 0) {
            i++;
            continue;
        }
        if (alive(s, a->src))
            send_small(s, a->src, M_GOTA, a->qid, (uint64_t)r);
        *a = s->da[--s->nda];
    }
}

static void on_gotq(phx_glb_sm_t *s, int src, phx_wdec_t *d)
{
    defans_t a = { .src = src };
    a.qid = phx_wdec_u64(d);
    a.o = phx_wdec_u8(d);
    a.v = phx_wdec_u8(d);
    a.tan = phx_wdec_u32(d);
    if (phx_wdec_end(d, 1) != 0 || a.o >= s->size || a.v >= s->size) {
        s->st.malformed++;
        return;
    }
    *PUSH(s->da, s->nda, s->capda) = a;
    answer_deferred(s);
}

static void on_gota(phx_glb_sm_t *s, int src, uint64_t qid, uint64_t yes)
{
    for (int i = 0; i < s->nopen; i++) {
        open_e_t *o = &s->open[i];
        if (o->st != OP_QUERY || o->qid != qid || o->qdst != src)
            continue;
        if (yes)
            open_drop(s, i);
        else
            open_readopt(s, i);
        return;
    }
}

/* ---- adoption (restore) ------------------------------------------------- */

static int adopt(phx_glb_sm_t *s, int r)
{
    phx_wdec_t d;
    phx_wdec_init(&d, s->bk[r], s->bklen[r]);
    phx_wdec_u8(&d);
    phx_wdec_u64(&d);
    int final = phx_wdec_u8(&d) != 0;
    uint64_t m = phx_wdec_u64(&d);
    uint64_t *res = xrealloc(NULL, (s->ops->result_words + 1) * 8);
    for (size_t i = 0; i < s->ops->result_words; i++)
        res[i] = phx_wdec_u64(&d);
    uint32_t bl = phx_wdec_u32(&d);
    const uint8_t *bag = phx_wdec_take(&d, bl);
    if (!bag || merge_packed(s, bag, bl) != 0) {
        free(res);
        return PHX_EPROTO;
    }
    s->ops->reduce(s->app, s->result, res);
    free(res);
    s->mask |= m | BIT(r);
    uint16_t no = phx_wdec_u16(&d);
    for (int i = 0; i < no && !d.err; i++) {
        open_e_t o = { .st = OP_NEED };
        o.vo = phx_wdec_u8(&d);
        o.thief = phx_wdec_u8(&d);
        o.tan = phx_wdec_u32(&d);
        o.len = phx_wdec_u32(&d);
        const uint8_t *l = phx_wdec_take(&d, o.len);
        /* Ranks index got[][] and the dead mask, and the loot may be
         * merged much later (open_readopt cannot refuse it then): a
         * corrupt backup is rejected here, not trusted. */
        if (!l || o.vo >= s->size || o.thief >= s->size || packed_ok(s, l, o.len) != 0)
            return PHX_EPROTO;
        o.loot = xrealloc(NULL, o.len ? o.len : 1);
        memcpy(o.loot, l, o.len);
        *PUSH(s->open, s->nopen, s->capopen) = o;
    }
    uint8_t nrows = phx_wdec_u8(&d);
    for (int i = 0; i < nrows && !d.err; i++) {
        uint8_t o = phx_wdec_u8(&d), cnt = phx_wdec_u8(&d);
        for (int j = 0; j < cnt && !d.err; j++) {
            uint8_t v = phx_wdec_u8(&d);
            uint32_t tan = phx_wdec_u32(&d);
            if (o < s->size && v < s->size && tan > s->got[o][v])
                s->got[o][v] = tan;
        }
    }
    if (phx_wdec_end(&d, 1) != 0)
        return PHX_EPROTO;
    free(s->bk[r]);
    s->bk[r] = NULL;
    s->recv_cnt++;
    if (final) {
        s->st.handovers++;  /* a drained node's last state: nothing to recompute */
        point(s, "H");
    }
    else
        s->st.adoptions++;
    s->dirty = s->urgent = 1;
    s->inactive = 0;
    s->restoring = 1;
    s->restore_seq = s->sent_seq;
    point(s, "R1");
    if (s->back < 0) {
        s->restoring = 0;
        point(s, "R5");         /* alone: nothing to back up at */
    }
    return 0;
}

/* Every dead rank whose first live successor is us must be in our state:
 * adopt the backups we hold (repeat: an adopted state can carry others),
 * then any dead rank still missing is lost with its backup. */
static void responsibility(phx_glb_sm_t *s)
{
    for (int again = 1; again;) {
        again = 0;
        for (int r = 0; r < s->size; r++) {
            if (alive(s, r) || r == s->rank || (s->mask & BIT(r)) || !s->bk[r] || succ(s, r) != s->rank)
                continue;
            if (adopt(s, r) != 0) {
                fail(s, "unrecoverable: lost rank %d (its backup at %d is corrupt)", r, s->rank);
                return;
            }
            again = 1;
        }
    }
    for (int r = 0; r < s->size; r++) {
        if (alive(s, r) || r == s->rank || (s->mask & BIT(r)) || succ(s, r) != s->rank)
            continue;
        if ((r + 1) % s->size == s->rank && !(s->ever & BIT(r))) {
            /* r died before its first backup reached us, its one and only
             * Back: no ack ever reached r, so r told nobody anything that
             * depends on its state (gifts, Tends, answers, idle reports all
             * wait for an ack). Its committed state is its initial one. */
            void *b = s->ops->bag_new(s->app);
            if (!b) {
                fail(s, "unrecoverable: out of memory restoring rank %d at %d", r, s->rank);
                return;
            }
            s->ops->bag_init(s->app, b, r, s->size);
            s->ops->merge(s->app, s->bag, b);
            s->mask |= BIT(r);
            s->recv_cnt++;
            s->st.adoptions++;
            s->dirty = s->urgent = 1;
            s->inactive = 0;
            s->restoring = 1;   /* as for a backup: R5 once it is backed up */
            s->restore_seq = s->sent_seq;
            point(s, "R1");
            if (s->back < 0) {
                s->restoring = 0;
                point(s, "R5");
            }
            continue;
        }
        int y = s->rank;        /* the node that should have held r's backup */
        for (int i = 1; i < s->size; i++) {
            int x = (r + i) % s->size;
            if (x == s->rank || !alive(s, x)) {
                y = x;
                break;
            }
        }
        fail(s, "unrecoverable: lost rank %d and its backup at %d", r, y);
        return;
    }
}

/* ---- stealing ----------------------------------------------------------- */

static int live_others(const phx_glb_sm_t *s)
{
    int n = 0;
    for (int r = 0; r < s->size; r++)
        n += r != s->rank && alive(s, r);
    return n;
}

static void steal_next(phx_glb_sm_t *s, uint64_t now)
{
    int n = live_others(s);
    if (n == 0 || s->attempts >= s->cfg.w) {
        for (int j = 0; j < s->cfg.z; j++) {
            int b = s->rank ^ (1 << j);
            if (b < s->size && alive(s, b)) {
                uint8_t m[2] = { M_STEAL, 1 };
                s->io.send(s->io.ctx, b, m, 2);
            }
        }
        s->victim = -1;
        s->inactive = 1;
        return;
    }
    int k = (int)(rnd(s) % (uint64_t)n);
    for (int r = 0; r < s->size; r++) {
        if (r == s->rank || !alive(s, r))
            continue;
        if (k-- == 0) {
            s->victim = r;
            break;
        }
    }
    s->attempts++;
    s->steal_since = now;
    s->st.steals_sent++;
    uint8_t m[2] = { M_STEAL, 0 };
    s->io.send(s->io.ctx, s->victim, m, 2);
}

/* Splits off a gift for thief t; with ft it leaves only after the steal
 * backup is acked (on_backup_ack). 1 if a gift was made. */
static int give(phx_glb_sm_t *s, int t)
{
    void *loot = s->ops->split(s->app, s->bag);
    if (!loot)
        return 0;
    open_e_t o = { .vo = (uint8_t)s->rank, .thief = (uint8_t)t, .st = OP_WAIT };
    o.tan = ++s->tan_ctr;
    o.loot = pack_bag(s, loot, &o.len);
    s->ops->bag_free(s->app, loot);
    o.need_seq = s->sent_seq + 1;
    s->dirty = 1;
    *PUSH(s->open, s->nopen, s->capopen) = o;
    if (!s->cfg.ft || s->back < 0)
        release_waiters(s, UINT64_MAX);     /* nobody to back up at: send at once */
    return 1;
}

static void on_steal(phx_glb_sm_t *s, int t, int lifeline, uint64_t now)
{
    if (s->leaving) {
        /* Its bag goes to its Back whole; a thief asks elsewhere. */
        uint8_t m[1] = { M_NOWORK };
        s->io.send(s->io.ctx, t, m, 1);
        return;
    }
    if (give(s, t)) {
        backup_now(s, now);
        return;
    }
    if (lifeline)
        s->lifeline_thieves |= BIT(t);
    uint8_t m[1] = { M_NOWORK };
    s->io.send(s->io.ctx, t, m, 1);
}

static void on_give(phx_glb_sm_t *s, int v, const uint8_t *p, size_t len, uint64_t now)
{
    phx_wdec_t d;   /* u8 type, u32 gift number, the packed loot */
    phx_wdec_init(&d, p, len);
    phx_wdec_u8(&d);
    uint32_t tan = phx_wdec_u32(&d);
    if (d.err) {
        s->st.malformed++;
        return;
    }
    if (s->nogive & BIT(v)) {
        s->st.orphans++;
        return;
    }
    if (tan <= s->got[s->rank][v]) {
        /* The got row could not tell this gift from its predecessors. */
        fail(s, "unrecoverable: gift %u from rank %d after gift %u (out of order)", tan, v, s->got[s->rank][v]);
        return;
    }
    size_t loot_len = phx_wdec_left(&d);   /* the rest, where the cursor stands */
    if (merge_packed(s, phx_wdec_take(&d, loot_len), loot_len) != 0) {
        s->st.malformed++;      /* no Tend: the victim's side keeps the gift */
        return;
    }
    s->got[s->rank][v] = tan;
    s->got_seq[v] = s->sent_seq + 1;
    s->recv_cnt++;
    s->st.steals_ok++;
    if (v == s->victim)
        s->victim = -1;
    s->inactive = 0;
    s->attempts = 0;
    point(s, "T1");
    if (s->cfg.ft && s->back >= 0) {
        ptend_t t = { (uint8_t)v, tan, s->sent_seq + 1 };
        *PUSH(s->pt, s->npt, s->cappt) = t;
        backup_now(s, now);
    } else {
        send_small(s, v, M_TEND, tan, 0);
    }
}

static void on_tend(phx_glb_sm_t *s, int t, uint32_t tan)
{
    for (int i = 0; i < s->nopen; i++) {
        open_e_t *o = &s->open[i];
        if (o->vo == s->rank && o->thief == t && o->tan == tan && o->st == OP_GIVEN) {
            open_drop(s, i);
            return;
        }
    }
}

/* ---- termination waves (the root) --------------------------------------- */

/* Answers the root that sent the wave (src), not rank 0: after a root's
 * loss the next lowest live rank runs the waves. */
static void wave_reply(phx_glb_sm_t *s, int src, uint32_t wave)
{
    size_t cap = 1 + 4 + 1 + 8 + 8 + 8 * s->ops->result_words;
    uint8_t *m = scratch(s, cap);
    phx_wenc_t e;
    phx_wenc_init(&e, m, cap);
    phx_wenc_u8(&e, M_WAVE_R);
    phx_wenc_u32(&e, wave);
    int idle = is_idle(s);
    phx_wenc_u8(&e, (uint8_t)idle);
    phx_wenc_u64(&e, s->recv_cnt);
    phx_wenc_u64(&e, s->mask);
    for (size_t i = 0; idle && i < s->ops->result_words; i++)
        phx_wenc_u64(&e, s->result[i]);     /* a busy node's result is never used */
    s->io.send(s->io.ctx, src, m, (size_t)phx_wenc_end(&e));
}

static void wave_store(phx_glb_sm_t *s, int r, int idle, uint64_t cnt, uint64_t mask, const uint64_t *res)
{
    s->cur[r] = (wrep_t){ 1, idle, cnt, mask };
    memcpy(s->cur_res + (size_t)r * s->ops->result_words, res, s->ops->result_words * 8);
}

static int partition_ok(const phx_glb_sm_t *s, const wrep_t *w)
{
    uint64_t seen = 0;
    for (int r = 0; r < s->size; r++) {
        if (!w[r].have)
            continue;
        uint64_t c = w[r].mask | BIT(r);
        if (c & seen)
            return 0;
        seen |= c;
    }
    return seen == (s->size == 64 ? ~0ull : BIT(s->size) - 1);
}

static void wave_check(phx_glb_sm_t *s, uint64_t now)
{
    if (!s->wave_active)
        return;
    for (int r = 0; r < s->size; r++)
        if (!s->cur[r].have && alive(s, r))
            return;
    int ok = partition_ok(s, s->cur) && partition_ok(s, s->prev);
    for (int r = 0; r < s->size && ok; r++) {
        const wrep_t *a = &s->cur[r], *b = &s->prev[r];
        if (a->have != b->have || (a->have && (!a->idle || !b->idle || a->cnt != b->cnt || a->mask != b->mask)))
            ok = 0;
    }
    s->wave_active = 0;
    if (ok) {
        size_t w = s->ops->result_words;
        uint64_t *sum = calloc(w + 1, 8);
        if (!sum)
            abort();
        for (int r = 0; r < s->size; r++)
            if (s->cur[r].have)
                s->ops->reduce(s->app, sum, s->cur_res + (size_t)r * w);
        s->over = 1;
        s->io.finish(s->io.ctx, sum);
        free(sum);
        return;
    }
    /* 1 ms after a wave of idle nodes; back off to 16 ms while some work. */
    int busy = 0;
    for (int r = 0; r < s->size; r++)
        busy |= s->cur[r].have && !s->cur[r].idle;
    s->wave_gap = busy ? (s->wave_gap ? 2 * s->wave_gap : 1000000) : 1000000;
    if (s->wave_gap > 16000000)
        s->wave_gap = 16000000;
    memcpy(s->prev, s->cur, sizeof s->cur);
    s->next_wave = now + s->wave_gap;
}

static void wave_start(phx_glb_sm_t *s, uint64_t now)
{
    s->wave_no++;
    s->wave_active = 1;
    s->wave_since = now;
    s->st.waves++;
    memset(s->cur, 0, sizeof s->cur);
    wave_store(s, s->rank, is_idle(s), s->recv_cnt, s->mask, s->result);
    for (int r = 0; r < s->size; r++)
        if (r != s->rank && alive(s, r))
            send_small(s, r, M_WAVE, s->wave_no, 0);
    wave_check(s, now);
}

static void on_wave_r(phx_glb_sm_t *s, int src, phx_wdec_t *d, uint64_t now)
{
    uint32_t wave = phx_wdec_u32(d);
    int idle = phx_wdec_u8(d);
    uint64_t cnt = phx_wdec_u64(d), mask = phx_wdec_u64(d);
    const uint8_t *res = idle ? phx_wdec_take(d, 8 * s->ops->result_words) : NULL;
    if ((idle && !res) || phx_wdec_end(d, 1) != 0) {
        s->st.malformed++;
        return;
    }
    if (s->rank != root(s) || !s->wave_active || wave != s->wave_no)
        return;                 /* a late answer to an earlier wave */
    point(s, "WR");
    uint64_t *r = calloc(s->ops->result_words + 1, 8);
    if (!r)
        abort();
    phx_wdec_t rd;
    phx_wdec_init(&rd, res, res ? 8 * s->ops->result_words : 0);
    for (size_t i = 0; res && i < s->ops->result_words; i++)
        r[i] = phx_wdec_u64(&rd);
    wave_store(s, src, idle, cnt, mask, r);
    free(r);
    wave_check(s, now);
}

/* ---- public entry points ------------------------------------------------ */

phx_glb_sm_t *phx_glb_sm_new(const phx_glb_cfg_t *cfg, const phx_glb_ops_t *ops, void *app,
                             int rank, int size, const phx_glb_io_t *io, uint64_t seed)
{
    if (size < 1 || size > PHX_GLB_MAXP || rank < 0 || rank >= size)
        return NULL;
    phx_glb_sm_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->cfg = *cfg;
    if (s->cfg.n < 1)
        s->cfg.n = 511;
    if (s->cfg.k < 1)
        s->cfg.k = 2048;
    if (s->cfg.w < 1)
        s->cfg.w = size >= 10 ? (size + 9) / 10 : 1;
    if (s->cfg.z < 1)
        for (s->cfg.z = 1; (1 << s->cfg.z) < size; s->cfg.z++) {}
    if (s->cfg.timeout_ms < 1)
        s->cfg.timeout_ms = 60000;
    s->ops = ops;
    s->app = app;
    s->io = *io;
    s->rank = rank;
    s->size = size;
    s->rng = seed * 0x9e3779b97f4a7c15ULL + (uint64_t)rank + 1;
    s->bag = ops->bag_new(app);
    s->result = calloc(ops->result_words + 1, 8);
    s->cur_res = calloc((size_t)size * ops->result_words + 1, 8);
    if (!s->bag || !s->result || !s->cur_res) {
        phx_glb_sm_free(s);
        return NULL;
    }
    s->victim = -1;
    s->back = size > 1 && cfg->ft ? succ(s, rank) : -1;
    return s;
}

/* The drain, one step: keep backing the state up (flagged final) until
 * a backup is acked with nothing changed since and nothing waiting on
 * one; then this node has left. From then on it is exactly a node that
 * died right after that ack with nothing done since: the survivors' crash
 * path takes its state over (its Back, at the notice) and resolves
 * whatever it sent or was sent, and since the acked backup is its whole
 * state, nothing is recomputed. A backup it stored for another node is
 * re-made by that node at its next Back, as after a crash. */
static int leave_step(phx_glb_sm_t *s, uint64_t now)
{
    if (s->back < 0) {
        /* Every other node is gone: nobody can take the state over, so
         * this node finishes the work itself. */
        s->leaving = 0;
        s->inactive = 0;
        point(s, "LX");
        return !s->ops->is_empty(s->app, s->bag);
    }
    if (!s->inflight && s->dirty)
        send_backup(s, now);
    if (s->over)
        return 0;
    /* A node that is itself leaving and left its final state here: stay
     * until its BYE, take that state over and pass it on with ours (two
     * neighbours drained at once); leaving first would lose it. */
    int waits = s->npt > 0 || s->nda > 0;
    for (int r = 0; r < s->size && !waits; r++)
        waits = r != s->rank && alive(s, r) && s->bk[r] && (s->bkfinal & BIT(r));
    for (int i = 0; i < s->nopen && !waits; i++)
        waits = s->open[i].vo == s->rank && s->open[i].st == OP_WAIT;
    if (!s->inflight && !s->dirty && !waits && s->acked_seq == s->sent_seq && s->acked_seq > 0) {
        s->left = 1;
        /* Its own notice, sent as its last message on every link (FIFO:
         * all it sent before arrives first): the others take it over now
         * rather than when the runtime's detector notices the exit. */
        for (int r = 0; r < s->size; r++)
            if (r != s->rank && alive(s, r))
                send_small(s, r, M_BYE, 0, 0);
        point(s, "L");
        return 0;
    }
    uint64_t lim = (uint64_t)s->cfg.timeout_ms * 1000000ull;
    if (s->inflight && now - s->bk_since > lim)
        fail(s, "unrecoverable: no backup ack from rank %d within %d ms", s->back, s->cfg.timeout_ms);
    return 0;
}

void phx_glb_sm_free(phx_glb_sm_t *s)
{
    if (!s)
        return;
    if (s->bag)
        s->ops->bag_free(s->app, s->bag);
    for (int i = 0; i < s->nopen; i++)
        free(s->open[i].loot);
    for (int r = 0; r < PHX_GLB_MAXP; r++)
        free(s->bk[r]);
    free(s->open);
    free(s->pt);
    free(s->da);
    free(s->result);
    free(s->cur_res);
    free(s->buf);
    free(s);
}

void phx_glb_sm_start(phx_glb_sm_t *s, uint64_t now_ns)
{
    s->t0 = now_ns;
    s->ops->bag_init(s->app, s->bag, s->rank, s->size);
    s->dirty = 1;
    if (s->cfg.ft && s->back >= 0)
        send_backup(s, now_ns);     /* the initial backup comes first */
}

int phx_glb_sm_over(const phx_glb_sm_t *s) { return s->over; }
int phx_glb_sm_left(const phx_glb_sm_t *s) { return s->left; }

int phx_glb_sm_leave(phx_glb_sm_t *s, uint64_t now)
{
    if (s->over || s->left)
        return PHX_EINVAL;
    if (!s->cfg.ft)
        return PHX_ENOTSUP;     /* no backups: nobody could take the state over */
    if (s->back < 0)
        return PHX_EAGAIN;      /* the last live node: the work stays here */
    if (!s->leaving) {
        s->leaving = 1;
        s->victim = -1;
        s->inactive = 1;
        s->lifeline_thieves = 0;
        s->dirty = s->urgent = 1;   /* the next backup is the final one */
    }
    leave_step(s, now);
    return 0;
}
void phx_glb_sm_get_stats(const phx_glb_sm_t *s, phx_glb_sm_stats_t *out) { *out = s->st; }

void phx_glb_sm_recv(phx_glb_sm_t *s, int src, const uint8_t *buf, size_t len, uint64_t now)
{
    if (s->over || s->left || len < 1 || src < 0 || src >= s->size || src == s->rank)
        return;
    if (!alive(s, src)) {
        s->st.orphans++;        /* from a dead (or fenced) node: discard */
        return;
    }
    phx_wdec_t d;
    phx_wdec_init(&d, buf, len);
    int type = phx_wdec_u8(&d);
    switch (type) {
    case M_STEAL:
        on_steal(s, src, phx_wdec_u8(&d), now);
        break;
    case M_NOWORK:
        if (src == s->victim && !s->leaving)
            steal_next(s, now);
        break;
    case M_GIVE:
        on_give(s, src, buf, len, now);
        break;
    case M_TEND:
        on_tend(s, src, (uint32_t)phx_wdec_u64(&d));
        break;
    case M_BACKUP:
        on_backup(s, src, buf, len);
        break;
    case M_BACKUP_ACK:
        on_backup_ack(s, src, phx_wdec_u64(&d));
        break;
    case M_GOTQ:
        on_gotq(s, src, &d);
        break;
    case M_GOTA: {
        uint64_t qid = phx_wdec_u64(&d), yes = phx_wdec_u64(&d);
        if (phx_wdec_end(&d, 1) == 0)
            on_gota(s, src, qid, yes);
        break;
    }
    case M_WAVE:
        point(s, "W");
        wave_reply(s, src, (uint32_t)phx_wdec_u64(&d));
        break;
    case M_WAVE_R:
        on_wave_r(s, src, &d, now);
        break;
    case M_BYE:
        phx_glb_sm_dead(s, src, now);   /* as its failure notice: it is gone */
        return;
    default:
        s->st.malformed++;
        break;
    }
    if (!s->over)
        resolve_open(s, now);
}

void phx_glb_sm_dead(phx_glb_sm_t *s, int r, uint64_t now)
{
    if (s->over || s->left || r < 0 || r >= s->size || r == s->rank || !alive(s, r))
        return;
    s->dead |= BIT(r);
    if (!s->cfg.ft) {
        fail(s, "unrecoverable: lost rank %d (glb-ft off)", r);
        return;
    }
    s->lifeline_thieves &= ~BIT(r);
    if (s->back == r) {
        s->back = succ(s, s->rank) == s->rank ? -1 : succ(s, s->rank);
        s->inflight = 0;    /* lost with r; the next backup is a full one anyway */
        s->dirty = s->urgent = 1;
        /* Waiters on the lost backup now wait for the next one. */
        for (int i = 0; i < s->nopen; i++)
            if (s->open[i].st == OP_WAIT)
                s->open[i].need_seq = s->sent_seq + 1;
        for (int i = 0; i < s->npt; i++)
            s->pt[i].need_seq = s->sent_seq + 1;
        for (int v = 0; v < s->size; v++)
            if (s->got_seq[v] > s->acked_seq)
                s->got_seq[v] = s->sent_seq + 1;
    }
    for (int i = 0; i < s->nopen; i++) {
        open_e_t *o = &s->open[i];
        if (o->vo != s->rank || o->thief != r)
            continue;
        if (o->st == OP_WAIT)
            open_readopt(s, i--);   /* never left: take it back */
        else if (o->st == OP_GIVEN)
            o->st = OP_NEED;
    }
    for (int i = 0; i < s->npt;)
        if (s->pt[i].v == r)
            s->pt[i] = s->pt[--s->npt];     /* r's successor asks us instead */
        else
            i++;
    responsibility(s);
    if (s->over)
        return;
    resolve_open(s, now);
    answer_deferred(s);
    if (s->victim == r || s->inactive) {
        s->victim = -1;
        s->inactive = 0;
        s->attempts = 0;
    }
    if (s->back < 0 && s->cfg.ft)
        s->dirty = 0;       /* alone: nobody can hold a backup */
    wave_check(s, now);
}

int phx_glb_sm_step(phx_glb_sm_t *s, uint64_t now)
{
    if (s->over || s->left)
        return 0;
    if (s->leaving)
        return leave_step(s, now);
    int empty = s->ops->is_empty(s->app, s->bag);
    if (!empty) {
        s->ops->process(s->app, s->bag, s->cfg.n, s->result);
        s->iter++;
        s->dirty = 1;
        if (s->iter % 8 == 0)
            point(s, "P");     /* every 8 x n items: mid-run deaths */
        if (s->over)
            return 0;
        for (int t = 0; t < s->size && s->lifeline_thieves; t++)
            if ((s->lifeline_thieves & BIT(t)) && alive(s, t) && give(s, t))
                s->lifeline_thieves &= ~BIT(t);
        empty = s->ops->is_empty(s->app, s->bag);
    }
    if (s->cfg.ft && s->back >= 0 && !s->inflight && s->dirty) {
        int waits = s->npt > 0 || s->nda > 0 || s->urgent;
        for (int i = 0; i < s->nopen && !waits; i++)
            waits = s->open[i].st == OP_WAIT;
        if (waits || empty || s->iter - s->last_bk_iter >= (uint64_t)s->cfg.k)
            send_backup(s, now);
        if (s->over)
            return 0;
    }
    resolve_open(s, now);
    if (empty && s->victim < 0 && !s->inactive) {
        s->attempts = 0;
        steal_next(s, now);
    }
    if (s->rank == root(s) && !s->wave_active && is_idle(s) && now >= s->next_wave)
        wave_start(s, now);
    /* Ultimate timeout on every awaited reply whose source is alive (a dead
     * source is handled by its failure notice). */
    uint64_t lim = (uint64_t)s->cfg.timeout_ms * 1000000ull;
    if (s->inflight && now - s->bk_since > lim)
        fail(s, "unrecoverable: no backup ack from rank %d within %d ms", s->back, s->cfg.timeout_ms);
    if (s->victim >= 0 && now - s->steal_since > lim)
        fail(s, "unrecoverable: no steal answer from rank %d within %d ms", s->victim, s->cfg.timeout_ms);
    for (int i = 0; i < s->nopen && !s->over; i++)
        if (s->open[i].st == OP_QUERY && now - s->open[i].since > lim)
            fail(s, "unrecoverable: no got answer from rank %d within %d ms", s->open[i].qdst, s->cfg.timeout_ms);
    if (s->wave_active && now - s->wave_since > lim)
        fail(s, "unrecoverable: termination wave %d unanswered within %d ms", (int)s->wave_no, s->cfg.timeout_ms);
    return !s->over && !empty;
}
