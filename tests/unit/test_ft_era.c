/* ERA agreement / ULFM group tests: a seeded random scheduler drives n
 * state machines over FIFO pair links with a perfect failure detector
 * (a crashed node's pending messages may land before a survivor's notice,
 * never after), and every run is checked for termination, integrity,
 * agreement (value, failed set, rc) and participation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "base/phx_err.h"
#include "base/phx_log.h"
#include "ft/era/era.h"
#include "ft/era/group.h"

#ifndef MAXN
#define MAXN 16         /* -DMAXN=32 for one-off deeper-tree stress runs (<= 60) */
#endif
#define MAXK 6
#define SLOT 512
#define WORLD 7u

/* ---- simulator ---------------------------------------------------------- */

typedef struct { uint16_t len; uint8_t b[SLOT]; } slot_t;
typedef struct { slot_t *v; size_t head, len, cap; } queue_t;

typedef struct sim sim_t;
typedef struct { sim_t *s; int rank; } nctx_t;

typedef struct {
    int ndec;
    phx_ft_era_value_t val;
    phx_ft_rankset_t failed;
    int rc;
} dec_t;

/* Crash victim when it sends its nth message of `type` (0 = any);
 * deliver: whether that last message still leaves. */
typedef struct { bool on; int victim, type, nth, deliver, count; } hook_t;

enum prog { PROG_AGREE, PROG_SHRINK };

struct sim {
    int n, K, mode;           /* mode 0 seq, 1 concurrent, 2 start from callback */
    enum prog prog;
    bool barrier;             /* step k+1 starts only once every live node decided k */
    int between_kill;         /* victim killed at the barrier before step 1, -1 none */
    uint64_t rng;
    phx_ft_era_t *era[MAXN];
    phx_ft_group_t *world[MAXN], *newg[MAXN];
    nctx_t ctx[MAXN];
    bool dead[MAXN], dying[MAXN];
    queue_t q[MAXN][MAXN];
    int act[MAXN * MAXN], nact, actpos[MAXN * MAXN];      /* non-empty links */
    int ntc[MAXN * MAXN], nntc, ntcpos[MAXN * MAXN];      /* pending notices */
    int kills_left;
    unsigned p_kill, p_send_kill;                         /* per 1000 */
    unsigned w_msg, w_ntc, w_start;                       /* event-class weights */
    uint8_t link_w[MAXN][MAXN];                           /* 0: uniform links */
    bool slow_links;
    long kill_at_event[MAXN];
    long revoke_at_event[MAXN];
    int next_k[MAXN];
    dec_t dec[MAXN][MAXK];
    phx_ft_era_value_t contrib[MAXN][MAXK];
    phx_ft_rankset_t dead_at_start[MAXN][MAXK], acked_at_start[MAXN][MAXK];
    bool started[MAXN][MAXK];
    phx_ft_era_op_t op[MAXK];
    uint32_t nwords[MAXK];
    hook_t hook[2];
    int revoked_cnt[MAXN];
    bool revoke_initiator[MAXN];
    int shrunk_cnt[MAXN], shrunk_rc[MAXN];
    uint64_t shrunk_gid[MAXN];
    uint64_t aid_base;        /* aid of step 0 */
    long events, msgs, starts;
    int fail;
    char why[512];
};

static uint64_t rnd64(sim_t *s)
{
    uint64_t z = (s->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static unsigned rnd(sim_t *s, unsigned m) { return (unsigned)(rnd64(s) % m); }

static void failf(sim_t *s, const char *fmt, ...)
{
    if (s->fail++)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->why, sizeof s->why, fmt, ap);
    va_end(ap);
}

static void list_add(int *arr, int *cnt, int *pos, int id)
{
    if (pos[id] >= 0)
        return;
    pos[id] = *cnt;
    arr[(*cnt)++] = id;
}
static void list_del(int *arr, int *cnt, int *pos, int id)
{
    int p = pos[id];
    if (p < 0)
        return;
    int last = arr[--(*cnt)];
    arr[p] = last;
    pos[last] = p;
    pos[id] = -1;
}

static void q_clear(sim_t *s, int src, int dst)
{
    s->q[src][dst].head = s->q[src][dst].len = 0;
    list_del(s->act, &s->nact, s->actpos, src * MAXN + dst);
}

static void kill_node(sim_t *s, int x)
{
    if (s->dead[x])
        return;
    s->dead[x] = true;
    s->dying[x] = false;
    for (int y = 0; y < s->n; y++) {
        q_clear(s, y, x);                 /* nobody reads for the dead */
        if (y != x && !s->dead[y])
            list_add(s->ntc, &s->nntc, s->ntcpos, y * MAXN + x);
    }
    /* A dead observer no longer gets notices. */
    for (int v = 0; v < s->n; v++)
        list_del(s->ntc, &s->nntc, s->ntcpos, x * MAXN + v);
}

/* Nodes not dead nor crashing inside the current call. */
static int alive_count(const sim_t *s)
{
    int c = 0;
    for (int x = 0; x < s->n; x++)
        c += !s->dead[x] && !s->dying[x];
    return c;
}

static int cb_send(void *c, int dst, const void *buf, size_t len)
{
    nctx_t *x = c;
    sim_t *s = x->s;
    int src = x->rank;
    if (s->dead[src])
        failf(s, "dead node %d sent", src);
    if (len > SLOT || dst < 0 || dst >= s->n || dst == src) {
        failf(s, "bad send %d->%d len %zu", src, dst, len);
        return PHX_EINVAL;
    }
    if (s->dying[src])
        return 0;                         /* crashed halfway through this call */
    const uint8_t *b = buf;
    for (int i = 0; i < 2; i++) {
        hook_t *h = &s->hook[i];
        if (h->on && h->victim == src && (h->type == 0 || h->type == b[5]) && ++h->count == h->nth) {
            h->on = false;
            s->dying[src] = true;
            if (!h->deliver)
                return 0;
        }
    }
    if (!s->dying[src] && s->kills_left > 0 && rnd(s, 1000) < s->p_send_kill && alive_count(s) > 1) {
        s->kills_left--;
        s->dying[src] = true;
        if (rnd(s, 2))
            return 0;
    }
    if (s->dead[dst])
        return 0;
    queue_t *q = &s->q[src][dst];
    if (q->len == q->cap) {
        q->cap = q->cap ? q->cap * 2 : 8;
        q->v = realloc(q->v, q->cap * sizeof *q->v);
    }
    q->v[q->len].len = (uint16_t)len;
    memcpy(q->v[q->len].b, buf, len);
    q->len++;
    list_add(s->act, &s->nact, s->actpos, src * MAXN + dst);
    s->msgs++;
    return 0;
}

static void start_step(sim_t *s, int x);


static void cb_decided(void *c, uint64_t gid, uint64_t aid, const phx_ft_era_value_t *v,
                       const phx_ft_rankset_t *failed, int rc)
{
    nctx_t *x = c;
    sim_t *s = x->s;
    int k = (int)(aid - s->aid_base);
    uint64_t want = (s->prog == PROG_SHRINK && k == 1)
                    ? phx_ft_group_id(s->newg[x->rank] ? s->newg[x->rank] : s->world[x->rank])
                    : WORLD;
    if (k < 0 || k >= s->K || gid != want || !s->started[x->rank][k]) {
        failf(s, "node %d: unexpected decision gid %llu aid %llu", x->rank,
              (unsigned long long)gid, (unsigned long long)aid);
        return;
    }
    dec_t *d = &s->dec[x->rank][k];
    d->ndec++;
    d->val = *v;
    d->failed = *failed;
    d->rc = rc;
    if (s->mode == 2 && !s->dead[x->rank] && !s->dying[x->rank] && s->next_k[x->rank] == k + 1 &&
        k + 1 < s->K && !s->barrier)
        start_step(s, x->rank);           /* re-entrant start */
}

static void cb_shrunk(void *c, uint64_t gid, uint64_t aid, phx_ft_group_t *ng,
                      const phx_ft_rankset_t *failed, int rc)
{
    nctx_t *x = c;
    sim_t *s = x->s;
    s->shrunk_cnt[x->rank]++;
    s->shrunk_rc[x->rank] = rc;
    s->newg[x->rank] = ng;
    s->shrunk_gid[x->rank] = ng ? phx_ft_group_id(ng) : 0;
    if (!ng)
        failf(s, "node %d: shrink gave no group (rc %d)", x->rank, rc);
    if (gid != WORLD || aid != 1)
        failf(s, "node %d: odd shrink ids", x->rank);
    /* Reuse the decision slot: value is the excluded set. */
    dec_t *d = &s->dec[x->rank][0];
    d->ndec++;
    d->failed = *failed;
    d->rc = rc;
    memset(&d->val, 0, sizeof d->val);
    if (ng) {
        d->val.nwords = 1;
        for (int i = 0; i < phx_ft_group_size(ng); i++)
            d->val.w[0] |= 1ull << phx_ft_group_members(ng)[i];
    }
}

static void cb_revoked(void *c, uint64_t gid)
{
    nctx_t *x = c;
    if (gid != WORLD)
        failf(x->s, "revoked unknown gid");
    x->s->revoked_cnt[x->rank]++;
}

static void after_call(sim_t *s, int x, int rc, const char *what)
{
    if (rc != 0)
        failf(s, "node %d: %s returned %d", x, what, rc);
    if (s->dying[x])
        kill_node(s, x);
}

static void make_contrib(sim_t *s, int x, int k, phx_ft_era_value_t *v)
{
    memset(v, 0, sizeof *v);
    v->nwords = s->nwords[k];
    for (uint32_t i = 0; i < v->nwords; i++)
        v->w[i] = rnd64(s);
    /* A per-node marker bit makes inclusion of each contribution visible. */
    uint64_t mark = 1ull << (x + (int)(k % 3)), low = (1ull << (MAXN + 2)) - 1;
    switch (s->op[k]) {
    case PHX_FT_ERA_OR:  v->w[0] = (v->w[0] & ~low) | mark; break;
    case PHX_FT_ERA_AND: v->w[0] = (v->w[0] | low) & ~mark; break;
    default: break;
    }
}

static void start_step(sim_t *s, int x)
{
    int k = s->next_k[x]++;
    phx_ft_era_t *e = s->era[x];
    if (rnd(s, 2))
        phx_ft_ulfm_failure_ack(e, s->world[x]);
    phx_ft_group_t *g = s->world[x];
    if (s->prog == PROG_SHRINK && k == 1) {
        g = s->newg[x];
        if (!g) {
            failf(s, "node %d: step 1 without new group", x);
            return;
        }
        if (rnd(s, 2))
            phx_ft_ulfm_failure_ack(e, g);
    }
    phx_ft_ulfm_get_acked(g, &s->acked_at_start[x][k]);
    const phx_ft_rankset_t *dd = phx_ft_era_dead(e);
    for (int i = 0; i < PHX_FT_RANKSET_WORDS; i++)
        s->dead_at_start[x][k].w[i] = dd->w[i];
    s->started[x][k] = true;
    s->starts++;
    int rc;
    if (s->prog == PROG_SHRINK && k == 0) {
        rc = phx_ft_ulfm_shrink(e, g, 1);
    } else {
        make_contrib(s, x, k, &s->contrib[x][k]);
        rc = phx_ft_era_start(e, g, s->aid_base + (uint64_t)k, &s->contrib[x][k], s->op[k]);
    }
    if (rc != 0)
        failf(s, "node %d: start step %d rc %d", x, k, rc);
}

static bool startable(sim_t *s, int x)
{
    int k = s->next_k[x];
    if (s->dead[x] || k >= s->K)
        return false;
    if (k == 0)
        return true;
    if (s->barrier) {
        for (int y = 0; y < s->n; y++)
            if (!s->dead[y] && s->dec[y][k - 1].ndec == 0)
                return false;
        return s->between_kill < 0 || s->dead[s->between_kill];
    }
    if (s->mode == 1 && s->prog == PROG_AGREE)
        return true;
    return s->dec[x][k - 1].ndec > 0;
}

static void sim_init(sim_t *s, uint64_t seed, int n, int K, unsigned arity)
{
    memset(s, 0, sizeof *s);
    s->rng = seed * 0x2545f4914f6cdd1dull + 1;
    s->n = n;
    s->K = K;
    s->between_kill = -1;
    s->aid_base = 1;
    for (int i = 0; i < MAXN * MAXN; i++)
        s->actpos[i] = s->ntcpos[i] = -1;
    for (int x = 0; x < MAXN; x++)
        s->kill_at_event[x] = s->revoke_at_event[x] = -1;
    int mem[MAXN];
    for (int x = 0; x < n; x++)
        mem[x] = n - 1 - x;               /* unsorted on purpose */
    for (int x = 0; x < n; x++) {
        s->ctx[x].s = s;
        s->ctx[x].rank = x;
        phx_ft_era_env_t env = {
            .ctx = &s->ctx[x], .send = cb_send, .decided = cb_decided,
            .revoked = cb_revoked, .shrunk = cb_shrunk, .arity = arity,
        };
        assert_int_equal(phx_ft_era_create(&env, x, n, &s->era[x]), 0);
        assert_int_equal(phx_ft_group_create(s->era[x], WORLD, mem, n, &s->world[x]), 0);
    }
    for (int k = 0; k < MAXK; k++) {
        s->op[k] = (phx_ft_era_op_t)rnd(s, 4);
        s->nwords[k] = rnd(s, 4) ? 1 : 1 + rnd(s, PHX_FT_ERA_VAL_WORDS);
    }
}

/* One simulator for every run: it is 2.3 MiB (rank sets of 65,536 bits), and
 * under a sanitizer a fresh allocation per run costs more system time (map,
 * shadow, unmap) than the run itself. sim_init clears it. Single-threaded. */
static sim_t *sim_get(void)
{
    static sim_t *one;
    if (!one)
        one = malloc(sizeof *one);
    assert_non_null(one);
    return one;
}

static void sim_free(sim_t *s)
{
    for (int x = 0; x < s->n; x++) {
        phx_ft_era_destroy(s->era[x]);
        for (int y = 0; y < s->n; y++)
            free(s->q[x][y].v);
    }
}


static void sim_run(sim_t *s)
{
    int starts[MAXN];
    for (long guard = 0; guard < 2000000 && !s->fail; guard++) {
        s->events++;
        for (int x = 0; x < s->n; x++) {
            if (!s->dead[x] && s->kill_at_event[x] >= 0 && s->events >= s->kill_at_event[x]) {
                s->kill_at_event[x] = -1;
                if (alive_count(s) > 1)
                    kill_node(s, x);
            }
            if (!s->dead[x] && s->revoke_at_event[x] >= 0 && s->events >= s->revoke_at_event[x]) {
                s->revoke_at_event[x] = -1;
                s->revoke_initiator[x] = true;
                after_call(s, x, phx_ft_ulfm_revoke(s->era[x], s->world[x]), "revoke");
            }
        }
        if (s->between_kill >= 0 && !s->dead[s->between_kill]) {
            bool all = true;
            for (int y = 0; y < s->n; y++)
                if (!s->dead[y] && (s->dec[y][0].ndec == 0 || s->next_k[y] > 1))
                    all = false;
            if (all) {
                kill_node(s, s->between_kill);
                s->between_kill = -1;
            }
        }
        int ns = 0;
        for (int x = 0; x < s->n; x++)
            if (startable(s, x))
                starts[ns++] = x;
        long pend_ev = 0;
        for (int x = 0; x < s->n; x++)
            pend_ev += (!s->dead[x] && (s->kill_at_event[x] >= 0 || s->revoke_at_event[x] >= 0));
        unsigned wm = s->w_msg ? s->w_msg : 1, wn = s->w_ntc ? s->w_ntc : 1,
                 wst = s->w_start ? s->w_start : 1;
        int total = s->nact + s->nntc + ns;
        if (total == 0) {
            if (pend_ev)
                continue;                 /* let timed events fire */
            return;
        }
        if (s->kills_left > 0 && alive_count(s) > 1 && rnd(s, 1000) < s->p_kill) {
            int v;
            do
                v = (int)rnd(s, (unsigned)s->n);
            while (s->dead[v]);
            s->kills_left--;
            kill_node(s, v);
            continue;
        }
        unsigned cm = wm * (unsigned)s->nact, cn = wn * (unsigned)s->nntc;
        unsigned r = rnd(s, cm + cn + wst * (unsigned)ns);
        if (r < cm) {
            r /= wm;
            /* Slow links: re-draw a few times, keeping the lightest. */
            for (int t = 0; s->slow_links && t < 3; t++) {
                unsigned r2 = rnd(s, (unsigned)s->nact);
                int a = s->act[r], b = s->act[r2];
                if (s->link_w[b / MAXN][b % MAXN] < s->link_w[a / MAXN][a % MAXN])
                    r = r2;
            }
            int id = s->act[r], src = id / MAXN, dst = id % MAXN;
            queue_t *q = &s->q[src][dst];
            slot_t m = q->v[q->head++];
            if (q->head == q->len)
                q_clear(s, src, dst);
            after_call(s, dst, phx_ft_era_on_msg(s->era[dst], src, m.b, m.len), "on_msg");
        } else if ((r -= cm) < cn) {
            r /= wn;
            int id = s->ntc[r], obs = id / MAXN, vic = id % MAXN;
            list_del(s->ntc, &s->nntc, s->ntcpos, id);
            q_clear(s, vic, obs);         /* nothing from vic after its notice */
            after_call(s, obs, phx_ft_era_on_failure(s->era[obs], vic), "on_failure");
        } else {
            int x = starts[(r - cn) / wst];
            start_step(s, x);
            after_call(s, x, 0, "start");
        }
    }
    if (!s->fail)
        failf(s, "scheduler did not quiesce");
}

/* ---- property checks ----------------------------------------------------- */

static bool rs_subset(const phx_ft_rankset_t *a, const phx_ft_rankset_t *b)
{
    for (int i = 0; i < PHX_FT_RANKSET_WORDS; i++)
        if (a->w[i] & ~b->w[i])
            return false;
    return true;
}

static void check_participation(sim_t *s, int k, const phx_ft_era_value_t *v)
{
    for (uint32_t i = 0; i < s->nwords[k]; i++) {
        uint64_t d = v->w[i];
        uint64_t all_or = 0, all_and = ~0ull, all_min = ~0ull, all_max = 0;
        for (int x = 0; x < s->n; x++) {
            if (!s->started[x][k])
                continue;
            uint64_t c = s->contrib[x][k].w[i];
            all_or |= c;
            all_and &= c;
            all_min = c < all_min ? c : all_min;
            all_max = c > all_max ? c : all_max;
            if (s->dead[x])
                continue;
            bool ok = true;
            switch (s->op[k]) {
            case PHX_FT_ERA_OR:  ok = (d & c) == c; break;
            case PHX_FT_ERA_AND: ok = (d & c) == d; break;
            case PHX_FT_ERA_MIN: ok = d <= c; break;
            case PHX_FT_ERA_MAX: ok = d >= c; break;
            }
            if (!ok)
                failf(s, "participation: step %d word %u misses node %d", k, i, x);
        }
        bool ok = true;
        switch (s->op[k]) {
        case PHX_FT_ERA_OR:  ok = (d & ~all_or) == 0; break;
        case PHX_FT_ERA_AND: ok = (all_and & ~d) == 0; break;
        case PHX_FT_ERA_MIN: ok = d >= all_min; break;
        case PHX_FT_ERA_MAX: ok = d <= all_max; break;
        }
        if (!ok)
            failf(s, "integrity: step %d word %u not a reduction of contributions", k, i);
    }
    for (uint32_t i = s->nwords[k]; i < PHX_FT_ERA_VAL_WORDS; i++)
        if (v->w[i])
            failf(s, "value word %u beyond width set", i);
}

static void check_run(sim_t *s)
{
    phx_ft_rankset_t truly_dead;
    memset(&truly_dead, 0, sizeof truly_dead);
    for (int x = 0; x < s->n; x++)
        if (s->dead[x])
            phx_ft_rankset_add(&truly_dead, x);
    int ref = -1;
    for (int x = 0; x < s->n && ref < 0; x++)
        if (!s->dead[x])
            ref = x;
    if (ref < 0) {
        failf(s, "no survivor");
        return;
    }
    for (int x = 0; x < s->n; x++) {
        for (int k = 0; k < s->K; k++)
            if (s->dec[x][k].ndec > 1)
                failf(s, "integrity: node %d decided step %d %d times", x, k, s->dec[x][k].ndec);
        if (s->dead[x])
            continue;
        if (phx_ft_era_pending(s->era[x]) != 0)
            failf(s, "node %d: %zu agreements still pending", x, phx_ft_era_pending(s->era[x]));
        if (phx_ft_era_history(s->era[x]) > (size_t)s->K)
            failf(s, "node %d: history %zu > %d", x, phx_ft_era_history(s->era[x]), s->K);
    }
    for (int k = 0; k < s->K; k++) {
        const dec_t *r = &s->dec[ref][k];
        for (int x = 0; x < s->n; x++) {
            if (s->dead[x])
                continue;
            const dec_t *d = &s->dec[x][k];
            if (!s->started[x][k] || d->ndec != 1) {
                failf(s, "termination: node %d step %d started %d decided %d", x, k,
                      s->started[x][k], d->ndec);
                return;
            }
            if (d->val.nwords != r->val.nwords ||
                memcmp(d->val.w, r->val.w, sizeof d->val.w) != 0)
                failf(s, "agreement: step %d value differs between %d and %d", k, ref, x);
            if (memcmp(&d->failed, &r->failed, sizeof d->failed) != 0)
                failf(s, "agreement: step %d failed set differs between %d and %d", k, ref, x);
            if (d->rc != r->rc)
                failf(s, "agreement: step %d rc %d at %d vs %d at %d", k, r->rc, ref, d->rc, x);
            /* Failures a survivor knew when it contributed are acknowledged. */
            if (!rs_subset(&s->dead_at_start[x][k], &r->failed) && !(s->prog == PROG_SHRINK && k == 1))
                failf(s, "failed set of step %d misses what node %d knew at start", k, x);
            for (int f = 0; f < s->n; f++)
                if (phx_ft_rankset_test(&r->failed, f) &&
                    !phx_ft_rankset_test(&s->acked_at_start[x][k], f) && r->rc != PHX_EPROCFAIL)
                    failf(s, "step %d: rank %d unacked by %d yet rc %d", k, f, x, r->rc);
        }
        if (!rs_subset(&r->failed, &truly_dead))
            failf(s, "step %d: failed set holds a live rank", k);
        if (phx_ft_rankset_count(&r->failed) == 0 && r->rc != PHX_OK)
            failf(s, "step %d: rc %d without failures", k, r->rc);
        if (!(s->prog == PROG_SHRINK && k == 0))
            check_participation(s, k, &r->val);
    }
}

static void report(const sim_t *s, uint64_t seed)
{
    if (s->fail)
        print_error("seed %llu n=%d K=%d mode=%d: %s\n", (unsigned long long)seed, s->n, s->K,
                    s->mode, s->why);
}

/* ---- random schedules ---------------------------------------------------- */

static void random_knobs(sim_t *s)
{
    s->mode = (int)rnd(s, 3);
    s->barrier = rnd(s, 8) == 0;
    unsigned f = rnd(s, 4) ? rnd(s, 4) : rnd(s, (unsigned)s->n);
    s->kills_left = (int)(f < (unsigned)s->n ? f : (unsigned)s->n - 1);
    s->p_kill = 2 + rnd(s, 40);
    s->p_send_kill = rnd(s, 3) ? 0 : 5 + rnd(s, 60);
    s->w_msg = 1u << rnd(s, 4);
    s->w_ntc = 1u << rnd(s, 4);
    s->w_start = 1u << rnd(s, 4);
    s->slow_links = rnd(s, 4) == 0;
    for (int a = 0; a < s->n; a++)
        for (int b = 0; b < s->n; b++)
            s->link_w[a][b] = (uint8_t)rnd(s, 8);
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 10) : dflt;
}

/* ERA_RUNS random schedules (20,000), a fifth as many shrink and revoke
 * ones, a fiftieth per scenario; ERA_RUNS / ERA_SEED0 widen a one-off stress run, and sanitizer
 * builds lower ERA_RUNS (ft/era/CMakeLists.txt). */
static int era_runs(void)
{
    return (int)env_u64("ERA_RUNS", 20000);
}

static void test_random_schedules(void **state)
{
    (void)state;
    const uint64_t runs = (uint64_t)era_runs(), seed0 = env_u64("ERA_SEED0", 1);
    long msgs = 0, kills = 0, starts = 0, procfail = 0, dec = 0;
    clock_t t0 = clock();
    int failures = 0;
    for (uint64_t seed = seed0; seed < seed0 + runs; seed++) {
        sim_t *s = sim_get();
        uint64_t r0 = seed * 7919;
        int n = 2 + (int)(r0 % (MAXN - 1));
        int K = 1 + (int)((r0 / 15) % 4);
        sim_init(s, seed, n, K, seed % 5 == 0 ? 3 : 2);
        random_knobs(s);
        sim_run(s);
        if (!s->fail)
            check_run(s);
        report(s, seed);
        failures += s->fail != 0;
        msgs += s->msgs;
        starts += s->starts;
        for (int x = 0; x < n; x++) {
            kills += s->dead[x];
            for (int k = 0; k < K; k++) {
                dec += s->dec[x][k].ndec;
                procfail += s->dec[x][k].ndec && s->dec[x][k].rc == PHX_EPROCFAIL;
            }
        }
        sim_free(s);
        if (failures > 5)
            break;
    }
    printf("[era] random: %llu schedules, %ld starts, %ld decisions (%ld EPROCFAIL), "
           "%ld kills, %ld messages, %d failing, %.2fs\n",
           (unsigned long long)runs, starts, dec, procfail, kills, msgs, failures,
           (double)(clock() - t0) / CLOCKS_PER_SEC);
    assert_int_equal(failures, 0);
}

/* ---- explicit scenarios (each over many schedules) ----------------------- */

typedef void (*setup_fn)(sim_t *s);

static int run_scenario(const char *name, int n, int K, setup_fn fn, int seeds)
{
    int failures = 0, hit = 0;
    for (int seed = 1; seed <= seeds; seed++) {
        sim_t *s = sim_get();
        sim_init(s, (uint64_t)seed * 104729 + (uint64_t)n, n, K, 2);
        s->mode = seed % 3;
        fn(s);
        sim_run(s);
        if (!s->fail)
            check_run(s);
        report(s, (uint64_t)seed);
        failures += s->fail != 0;
        hit += alive_count(s) < n;
        sim_free(s);
    }
    printf("[era] scenario %-26s n=%2d: %d schedules, %d with the kill, %d failing\n", name, n,
           seeds, hit, failures);
    return failures;
}

/* Binary tree over 7: 0 -> {1,2}, 1 -> {3,4}, 2 -> {5,6}. */
static void sc_root_mid_decide(sim_t *s)
{
    s->hook[0] = (hook_t){ true, 0, 2, 1, 1, 0 };   /* one child hears the decision */
}
static void sc_root_before_decide(sim_t *s)
{
    s->kill_at_event[0] = 1 + (long)rnd(s, 30);
}
static void sc_interior_after_up(sim_t *s)
{
    s->hook[0] = (hook_t){ true, 1, 1, 1, (int)rnd(s, 2), 0 };
}
static void sc_interior_mid_decide(sim_t *s)
{
    s->hook[0] = (hook_t){ true, 1, 2, 1, 1, 0 };
}
static void sc_leaf_before_start(sim_t *s)
{
    s->kill_at_event[6] = 1;
}
static void sc_leaf_after_up(sim_t *s)
{
    s->hook[0] = (hook_t){ true, 6, 1, 1, (int)rnd(s, 2), 0 };
}
static void sc_two_kills(sim_t *s)
{
    s->hook[0] = (hook_t){ true, 1, 1, 1, 1, 0 };   /* interior after contributing */
    s->hook[1] = (hook_t){ true, 0, 2, 1, 1, 0 };   /* root mid-broadcast */
}
static void sc_root_and_heir(sim_t *s)
{
    s->hook[0] = (hook_t){ true, 0, 2, 1, 1, 0 };   /* root tells only 1 ... */
    s->hook[1] = (hook_t){ true, 1, 2, 1, 1, 0 };   /* ... which tells one child */
}
static void sc_between(sim_t *s)
{
    s->barrier = true;
    s->between_kill = (int)rnd(s, (unsigned)s->n);
}
static void sc_between_root(sim_t *s)
{
    s->barrier = true;
    s->between_kill = 0;
}

static void test_scenarios(void **state)
{
    (void)state;
    int f = 0;
    const int seeds = era_runs() / 50;  /* 400 */
    f += run_scenario("root killed mid-decide", 7, 2, sc_root_mid_decide, seeds);
    f += run_scenario("root killed mid-decide", 15, 2, sc_root_mid_decide, seeds);
    f += run_scenario("root killed early", 7, 2, sc_root_before_decide, seeds);
    f += run_scenario("interior killed after UP", 7, 2, sc_interior_after_up, seeds);
    f += run_scenario("interior killed mid-decide", 15, 2, sc_interior_mid_decide, seeds);
    f += run_scenario("leaf killed before start", 7, 2, sc_leaf_before_start, seeds);
    f += run_scenario("leaf killed after UP", 7, 2, sc_leaf_after_up, seeds);
    f += run_scenario("two kills (interior+root)", 7, 2, sc_two_kills, seeds);
    f += run_scenario("root and heir mid-decide", 15, 2, sc_root_and_heir, seeds);
    f += run_scenario("kill between agreements", 9, 3, sc_between, seeds);
    f += run_scenario("root killed between", 9, 3, sc_between_root, seeds);
    assert_int_equal(f, 0);
}

/* ---- shrink and revoke ---------------------------------------------------- */

static void check_shrink(sim_t *s)
{
    int ref = -1;
    for (int x = 0; x < s->n; x++) {
        if (s->dead[x])
            continue;
        if (s->shrunk_cnt[x] != 1) {
            failf(s, "node %d: shrunk %d times", x, s->shrunk_cnt[x]);
            return;
        }
        if (ref < 0)
            ref = x;
        const phx_ft_group_t *a = s->newg[ref], *b = s->newg[x];
        if (s->shrunk_gid[x] != s->shrunk_gid[ref] || phx_ft_group_size(a) != phx_ft_group_size(b) ||
            memcmp(phx_ft_group_members(a), phx_ft_group_members(b),
                   sizeof(int) * (size_t)phx_ft_group_size(a)) != 0)
            failf(s, "shrink: member lists differ between %d and %d", ref, x);
        for (int y = 0; y < s->n; y++)
            if (!s->dead[y] && phx_ft_group_index_of(b, y) < 0)
                failf(s, "shrink: survivor %d missing at %d", y, x);
    }
    if (ref >= 0 && s->shrunk_gid[ref] != phx_ft_ulfm_shrink_gid(WORLD, 1))
        failf(s, "shrink: unexpected new gid");
}

static void test_shrink_random(void **state)
{
    (void)state;
    const int runs = era_runs() / 5;
    int failures = 0;
    long removed = 0;
    for (int seed = 1; seed <= runs; seed++) {
        sim_t *s = sim_get();
        int n = 2 + seed % 15;
        sim_init(s, (uint64_t)seed * 31337, n, 2, 2);
        s->prog = PROG_SHRINK;
        random_knobs(s);
        s->mode = 0;
        /* Some failures are known before the shrink starts. */
        int pre = (int)rnd(s, (unsigned)(n / 2 + 1));
        for (int i = 0; i < pre && alive_count(s) > 1; i++)
            s->kill_at_event[rnd(s, (unsigned)n)] = 1;
        sim_run(s);
        if (!s->fail) {
            check_shrink(s);
            check_run(s);
        }
        report(s, (uint64_t)seed);
        failures += s->fail != 0;
        for (int x = 0; x < n; x++)
            if (!s->dead[x] && s->newg[x]) {
                removed += n - phx_ft_group_size(s->newg[x]);
                break;
            }
        sim_free(s);
    }
    printf("[era] shrink: %d schedules, %ld ranks excluded in total, %d failing\n", runs, removed,
           failures);
    assert_int_equal(failures, 0);
}

static void test_revoke_random(void **state)
{
    (void)state;
    const int runs = era_runs() / 5;
    int failures = 0, reached = 0;
    for (int seed = 1; seed <= runs; seed++) {
        sim_t *s = sim_get();
        int n = 2 + seed % 15;
        sim_init(s, (uint64_t)seed * 65537, n, 2, 2);
        random_knobs(s);
        int nrev = 1 + (int)rnd(s, 2);
        for (int i = 0; i < nrev; i++)
            s->revoke_at_event[rnd(s, (unsigned)n)] = 1 + (long)rnd(s, 40);
        if (rnd(s, 2))
            s->p_send_kill = 100;       /* initiators often crash mid-flood */
        sim_run(s);
        if (!s->fail)
            check_run(s);               /* agreements still work when revoked */
        bool any = false, init_alive = false;
        for (int x = 0; x < n; x++) {
            if (s->revoked_cnt[x] > 1)
                failf(s, "revoke delivered %d times at %d", s->revoked_cnt[x], x);
            if (!s->dead[x] && s->revoked_cnt[x])
                any = true;
            if (!s->dead[x] && s->revoke_initiator[x])
                init_alive = true;
        }
        if (any || init_alive) {
            reached++;
            for (int x = 0; x < n; x++)
                if (!s->dead[x] && (s->revoked_cnt[x] != 1 || !phx_ft_ulfm_is_revoked(s->world[x])))
                    failf(s, "revoke did not reach survivor %d", x);
        }
        report(s, (uint64_t)seed);
        failures += s->fail != 0;
        sim_free(s);
    }
    printf("[era] revoke: %d schedules, %d reached survivors, %d failing\n", runs, reached,
           failures);
    assert_int_equal(failures, 0);
}

/* ---- API, wire and GC ----------------------------------------------------- */

static void test_api_errors(void **state)
{
    (void)state;
    sim_t *s = sim_get();
    sim_init(s, 1, 3, 1, 2);
    phx_ft_era_t *e = s->era[0], *bad = NULL;
    phx_ft_era_env_t env = { .send = cb_send, .decided = cb_decided };
    assert_int_equal(phx_ft_era_create(&env, 3, 3, &bad), PHX_EINVAL);
    assert_int_equal(phx_ft_era_create(&env, 0, PHX_FT_ERA_ENGINE_MAX_RANKS + 1, &bad), PHX_EINVAL);
    env.send = NULL;
    assert_int_equal(phx_ft_era_create(&env, 0, 3, &bad), PHX_EINVAL);
    assert_int_equal(phx_ft_era_on_failure(e, 0), PHX_EFENCED);
    assert_int_equal(phx_ft_era_on_failure(e, 3), PHX_EINVAL);
    assert_int_equal(phx_ft_era_on_failure(e, -1), PHX_EINVAL);

    phx_ft_group_t *g;
    int dup[2] = { 0, 0 }, noself[2] = { 1, 2 }, other[2] = { 0, 1 };
    assert_int_equal(phx_ft_group_create(e, 9, dup, 2, &g), PHX_EINVAL);
    assert_int_equal(phx_ft_group_create(e, 9, noself, 2, &g), PHX_EINVAL);
    assert_int_equal(phx_ft_group_create(e, WORLD, other, 2, &g), PHX_EEXIST);
    assert_int_equal(phx_ft_group_index_of(s->world[0], 5), PHX_ENOENT);

    phx_ft_era_value_t v;
    phx_ft_era_value_u64(&v, 5);
    assert_int_equal(phx_ft_era_start(e, s->world[1], 1, &v, PHX_FT_ERA_AND), PHX_EINVAL);
    assert_int_equal(phx_ft_era_start(e, s->world[0], 1, &v, (phx_ft_era_op_t)7), PHX_EINVAL);
    v.nwords = 0;
    assert_int_equal(phx_ft_era_start(e, s->world[0], 1, &v, PHX_FT_ERA_AND), PHX_EINVAL);
    phx_ft_era_value_u64(&v, 5);
    s->started[0][0] = true;
    assert_int_equal(phx_ft_era_start(e, s->world[0], 1, &v, PHX_FT_ERA_AND), 0);
    assert_int_equal(phx_ft_era_start(e, s->world[0], 1, &v, PHX_FT_ERA_AND), PHX_EINVAL);
    assert_int_equal(phx_ft_era_pending(e), 1);
    sim_free(s);
}

static void test_wire_malformed(void **state)
{
    (void)state;
    enum phx_log_level lvl = phx_log_get_level();
    phx_log_set_level(PHX_LOG_ERROR);      /* 20k expected warnings */
    sim_t *s = sim_get();
    sim_init(s, 3, 3, 1, 2);
    s->op[0] = PHX_FT_ERA_OR;
    s->nwords[0] = 2;
    /* Node 1 is a leaf of root 0: its start emits one UP to 0. */
    start_step(s, 1);
    assert_int_equal(s->q[1][0].len, 1);
    slot_t good = s->q[1][0].v[0];
    phx_ft_era_t *e = s->era[0];
    int bad = 0;
    uint8_t b[SLOT];

    for (size_t len = 0; len < good.len; len++)
        bad += phx_ft_era_on_msg(e, 1, good.b, len) == PHX_EPROTO;          /* truncations */
    memcpy(b, good.b, good.len);
    b[good.len] = 0;
    bad += phx_ft_era_on_msg(e, 1, b, good.len + 1u) == PHX_EPROTO;         /* trailing */
    static const struct { int off; uint8_t val; } mut[] = {
        { 0, 0 }, { 4, 9 }, { 5, 0 }, { 5, 9 }, { 6, 4 }, { 7, 0 }, { 7, 17 }, { 32, 2 },
        { 34, 1 }, { 39, 1 },
    };
    for (size_t i = 0; i < sizeof mut / sizeof mut[0]; i++) {
        memcpy(b, good.b, good.len);
        b[mut[i].off] = mut[i].val;
        bad += phx_ft_era_on_msg(e, 1, b, good.len) == PHX_EPROTO;
    }
    memcpy(b, good.b, good.len);
    b[good.len - 1] = 0x80;                                                  /* ack bit 63 > n */
    bad += phx_ft_era_on_msg(e, 1, b, good.len) == PHX_EPROTO;
    bad += phx_ft_era_on_msg(e, 3, good.b, good.len) == PHX_EPROTO;         /* src out of range */
    bad += phx_ft_era_on_msg(e, 0, good.b, good.len) == PHX_EPROTO;         /* from self */
    bad += phx_ft_era_on_msg(e, 1, NULL, 40) == PHX_EPROTO;
    int expect = (int)good.len + 1 + (int)(sizeof mut / sizeof mut[0]) + 4;
    /* Random garbage: must never crash; magic makes acceptance practically impossible. */
    int garbage_ok = 0;
    for (int i = 0; i < 20000; i++) {
        size_t len = rnd(s, SLOT);
        for (size_t j = 0; j < len; j++)
            b[j] = (uint8_t)rnd64(s);
        garbage_ok += phx_ft_era_on_msg(e, 1 + (int)rnd(s, 2), b, len) == PHX_EPROTO;
    }
    assert_int_equal(phx_ft_era_pending(e), 0);
    assert_int_equal(phx_ft_era_history(e), 0);
    /* A mismatching op on a live agreement is rejected too. */
    memcpy(b, good.b, good.len);
    b[6] = PHX_FT_ERA_MAX;
    assert_int_equal(phx_ft_era_on_msg(e, 1, good.b, good.len), 0);
    assert_int_equal(phx_ft_era_on_msg(e, 1, b, good.len), PHX_EPROTO);
    printf("[era] wire: %d/%d malformed rejected, %d/20000 garbage rejected\n", bad, expect,
           garbage_ok);
    assert_int_equal(bad, expect);
    assert_int_equal(garbage_ok, 20000);
    /* The state survived all of that: finish the agreement normally. */
    q_clear(s, 1, 0);
    s->next_k[1] = 1;
    s->msgs = 0;
    sim_run(s);
    if (!s->fail)
        check_run(s);
    report(s, 3);
    assert_int_equal(s->fail, 0);
    phx_log_set_level(lvl);
    sim_free(s);
}

static void test_gc_many(void **state)
{
    (void)state;
    sim_t *s = sim_get();
    int n = 6, total = 300;
    size_t maxhist = 0;
    sim_init(s, 11, n, 1, 2);
    s->op[0] = PHX_FT_ERA_MIN;
    s->nwords[0] = 1;
    for (int a = 1; a <= total && !s->fail; a++) {
        /* One agreement per round; aid_base maps the callback to slot 0. */
        memset(s->dec, 0, sizeof s->dec);
        memset(s->started, 0, sizeof s->started);
        memset(s->next_k, 0, sizeof s->next_k);
        s->aid_base = (uint64_t)a;
        sim_run(s);
        if (!s->fail)
            check_run(s);
        for (int x = 0; x < n; x++)
            if (phx_ft_era_history(s->era[x]) > maxhist)
                maxhist = phx_ft_era_history(s->era[x]);
    }
    report(s, 11);
    printf("[era] gc: %d sequential agreements, max history per node %zu\n", total, maxhist);
    assert_int_equal(s->fail, 0);
    assert_true(maxhist <= 2);
    sim_free(s);
}

/* ---- full scale: 1024 ranks, 1024-bit values -------------------------- */

typedef struct { int src, dst; uint16_t len; uint8_t b[SLOT]; } gmsg_t;
typedef struct big big_t;
typedef struct { big_t *b; int rank; } bctx_t;
struct big {
    int n;
    gmsg_t *q;
    size_t head, len, cap;
    phx_ft_era_t **era;
    phx_ft_group_t **g;
    bctx_t *ctx;
    bool *dead;
    int ndec, nshrunk, bad;
    phx_ft_era_value_t first;
    uint64_t newgid;
    int newm;
    long msgs;
};

static int big_send(void *c, int dst, const void *buf, size_t len)
{
    bctx_t *x = c;
    big_t *b = x->b;
    if (b->dead[dst])
        return 0;
    if (b->len == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 4096;
        b->q = realloc(b->q, b->cap * sizeof *b->q);
    }
    gmsg_t *m = &b->q[b->len++];
    m->src = x->rank;
    m->dst = dst;
    m->len = (uint16_t)len;
    memcpy(m->b, buf, len);
    b->msgs++;
    return 0;
}

static void big_decided(void *c, uint64_t gid, uint64_t aid, const phx_ft_era_value_t *v,
                        const phx_ft_rankset_t *failed, int rc)
{
    big_t *b = ((bctx_t *)c)->b;
    if (b->ndec++ == 0)
        b->first = *v;
    else if (memcmp(&b->first, v, sizeof *v) != 0)
        b->bad++;
    if (phx_ft_rankset_count(failed) != 3 || rc != PHX_EPROCFAIL)
        b->bad++;
}

static void big_shrunk(void *c, uint64_t gid, uint64_t aid, phx_ft_group_t *ng,
                       const phx_ft_rankset_t *failed, int rc)
{
    big_t *b = ((bctx_t *)c)->b;
    if (!ng) {
        b->bad++;
        return;
    }
    if (b->nshrunk++ == 0) {
        b->newgid = phx_ft_group_id(ng);
        b->newm = phx_ft_group_size(ng);
    } else if (b->newgid != phx_ft_group_id(ng) || b->newm != phx_ft_group_size(ng)) {
        b->bad++;
    }
}

static void big_drain(big_t *b)
{
    while (b->head < b->len) {
        gmsg_t m = b->q[b->head++];
        if (!b->dead[m.dst] && phx_ft_era_on_msg(b->era[m.dst], m.src, m.b, m.len) != 0)
            b->bad++;
    }
    b->head = b->len = 0;
}

/* n engines, 3 dead (root, its heir, a leaf): one agreement, then a shrink.
 * Up to the value width (1024) the agreement's OR value is the set of
 * contributors; past it (shrink no longer carries the dead set as
 * a value, so jobs past 1024 ranks keep shrink) the value is one word. */
static void full_scale(int n)
{
    big_t b;
    memset(&b, 0, sizeof b);
    b.n = n;
    int wide = n <= 64 * PHX_FT_ERA_VAL_WORDS;
    b.era = calloc((size_t)n, sizeof *b.era);
    b.g = calloc((size_t)n, sizeof *b.g);
    b.ctx = calloc((size_t)n, sizeof *b.ctx);
    b.dead = calloc((size_t)n, sizeof *b.dead);
    int *mem = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++)
        mem[i] = i;
    const int victims[3] = { 0, 1, 517 };          /* root, its heir, a leaf */
    for (int i = 0; i < 3; i++)
        b.dead[victims[i]] = true;
    clock_t t0 = clock();
    for (int x = 0; x < n; x++) {
        b.ctx[x] = (bctx_t){ &b, x };
        phx_ft_era_env_t env = { .ctx = &b.ctx[x], .send = big_send, .decided = big_decided,
                                 .shrunk = big_shrunk, .arity = 4 };
        assert_int_equal(phx_ft_era_create(&env, x, n, &b.era[x]), 0);
        assert_int_equal(phx_ft_group_create(b.era[x], WORLD, mem, n, &b.g[x]), 0);
        if (b.dead[x])
            continue;
        for (int i = 0; i < 3; i++)
            assert_int_equal(phx_ft_era_on_failure(b.era[x], victims[i]), 0);
    }
    for (int x = 0; x < n; x++) {
        if (b.dead[x])
            continue;
        phx_ft_era_value_t v;
        memset(&v, 0, sizeof v);
        v.nwords = wide ? PHX_FT_ERA_VAL_WORDS : 1;
        v.w[wide ? x / 64 : 0] = wide ? 1ull << (x % 64) : 1;   /* OR: the contributors */
        assert_int_equal(phx_ft_era_start(b.era[x], b.g[x], 1, &v, PHX_FT_ERA_OR), 0);
    }
    big_drain(&b);
    long agree_msgs = b.msgs;
    int bits = 0;
    for (int i = 0; i < PHX_FT_ERA_VAL_WORDS; i++)
        bits += __builtin_popcountll(b.first.w[i]);
    for (int x = 0; x < n; x++)
        if (!b.dead[x])
            assert_int_equal(phx_ft_ulfm_shrink(b.era[x], b.g[x], 2), 0);
    big_drain(&b);
    printf("[era] full scale n=%d: %d decisions, %d contributor bits, %ld agree msgs, "
           "shrink -> %d members in %d groups, %.2fs\n",
           n, b.ndec, bits, agree_msgs, b.newm, b.nshrunk, (double)(clock() - t0) / CLOCKS_PER_SEC);
    assert_int_equal(b.bad, 0);
    assert_int_equal(b.ndec, n - 3);
    assert_int_equal(bits, wide ? n - 3 : 1);
    assert_int_equal(b.nshrunk, n - 3);
    assert_int_equal(b.newm, n - 3);
    for (int x = 0; x < n; x++)
        phx_ft_era_destroy(b.era[x]);
    free(b.era);
    free(b.g);
    free(b.ctx);
    free(b.dead);
    free(b.q);
    free(mem);
}

static void test_full_scale(void **state)
{
    (void)state;
    full_scale(64 * PHX_FT_ERA_VAL_WORDS);
    full_scale(1500);   /* past the old 1024-rank limit of shrink */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api_errors),
        cmocka_unit_test(test_wire_malformed),
        cmocka_unit_test(test_scenarios),
        cmocka_unit_test(test_random_schedules),
        cmocka_unit_test(test_shrink_random),
        cmocka_unit_test(test_revoke_random),
        cmocka_unit_test(test_gc_many),
        cmocka_unit_test(test_full_scale),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
