#include "ft/ckpt/rejoin.h"

#include <stdlib.h>
#include <string.h>

#include "base/phx_err.h"
#include "ft/ckpt/ckpt.h"
#include "ft/ckpt/member.h"

struct phx_ck_rj {
    int n, self, nloc, slices;
    int respawn;
    int joining;                /* this process is a newcomer, not taken in yet */
    uint16_t view;              /* the detector's membership view, set by the last take-in */
    int rs_round;               /* newcomer: the round it restored in (-1: none) */
    phx_ck_join_t join;         /* coordinator: newcomers, who has them connected */
    uint32_t *inc;              /* n: each dead rank's newcomer connected here */
    uint32_t *taken;            /* n: the last take-in's incarnations (0: none) */
    uint8_t *fresh;             /* n: taken in since the last commit or GO */
    int *loc, *buddy;           /* nloc, n: the tables the last take-in carried */
    /* the move home */
    int mig;                    /* 0: no move; 1: BEGIN taken; 2: shipped, table switched; 3: settled */
    int *hloc, *from;           /* nloc: the table after and before it */
    uint8_t *in_done;           /* n: what x ships here is rebuilt */
};

void phx_ck_rj_out_free(phx_ck_rj_out_t *o)
{
    free(o->a);
    *o = (phx_ck_rj_out_t){ 0 };
}

static void emit(phx_ck_rj_out_t *o, phx_ck_rj_act_t a)
{
    void *p = o->a;
    int rc = phx_ck_act_reserve(&p, o->len, &o->cap, sizeof a);
    o->a = p;
    if (rc) {
        o->err = rc;
        return;
    }
    o->a[o->len++] = a;
}

int phx_ck_rj_create(int n, int self, int nloc, int slices, int respawn, int joining, phx_ck_rj_t **out)
{
    *out = NULL;
    if (n <= 0 || self < 0 || self >= n || nloc < 0 || slices <= 0)
        return PHX_EINVAL;
    phx_ck_rj_t *m = calloc(1, sizeof *m);
    if (!m)
        return PHX_ENOMEM;
    m->n = n;
    m->self = self;
    m->nloc = nloc;
    m->slices = slices;
    m->respawn = respawn;
    m->joining = joining;
    m->rs_round = -1;
    size_t sz = (size_t)n, nl = nloc ? (size_t)nloc : 1;
    m->inc = calloc(sz, sizeof *m->inc);
    m->taken = calloc(sz, sizeof *m->taken);
    m->fresh = calloc(sz, 1);
    m->loc = calloc(nl, sizeof *m->loc);
    m->buddy = calloc(sz, sizeof *m->buddy);
    m->hloc = calloc(nl, sizeof *m->hloc);
    m->from = calloc(nl, sizeof *m->from);
    m->in_done = calloc(sz, 1);
    if (phx_ck_join_init(&m->join, n) || !m->inc || !m->taken || !m->fresh || !m->loc || !m->buddy || !m->hloc ||
        !m->from || !m->in_done) {
        phx_ck_rj_destroy(m);
        return PHX_ENOMEM;
    }
    *out = m;
    return 0;
}

void phx_ck_rj_destroy(phx_ck_rj_t *m)
{
    if (!m)
        return;
    phx_ck_join_free(&m->join);
    free(m->inc);
    free(m->taken);
    free(m->fresh);
    free(m->loc);
    free(m->buddy);
    free(m->hloc);
    free(m->from);
    free(m->in_done);
    free(m);
}

int phx_ck_rj_clone(const phx_ck_rj_t *m, phx_ck_rj_t **out)
{
    phx_ck_rj_t *c;
    int rc = phx_ck_rj_create(m->n, m->self, m->nloc, m->slices, m->respawn, m->joining, &c);
    if (rc)
        return rc;
    size_t sz = (size_t)m->n, nl = (size_t)m->nloc;
    c->view = m->view;
    c->rs_round = m->rs_round;
    c->mig = m->mig;
    memcpy(c->join.inc, m->join.inc, sz * sizeof *m->join.inc);
    memcpy(c->join.seen, m->join.seen, sz * sz);
    memcpy(c->inc, m->inc, sz * sizeof *m->inc);
    memcpy(c->taken, m->taken, sz * sizeof *m->taken);
    memcpy(c->fresh, m->fresh, sz);
    memcpy(c->loc, m->loc, nl * sizeof *m->loc);
    memcpy(c->buddy, m->buddy, sz * sizeof *m->buddy);
    memcpy(c->hloc, m->hloc, nl * sizeof *m->hloc);
    memcpy(c->from, m->from, nl * sizeof *m->from);
    memcpy(c->in_done, m->in_done, sz);
    *out = c;
    return 0;
}

size_t phx_ck_rj_key(const phx_ck_rj_t *m, uint8_t *buf, size_t cap)
{
    size_t sz = (size_t)m->n, nl = (size_t)m->nloc;
    int32_t w[] = { m->joining, m->view, m->rs_round, m->mig };
    size_t len = sizeof w + sz * sizeof *m->join.inc + sz * sz + 2 * sz * sizeof *m->inc + 2 * sz +
                 sz * sizeof *m->buddy + 3 * nl * sizeof *m->loc;
    if (len > cap)
        return len;
    uint8_t *p = buf;
#define PUT(src, bytes) (memcpy(p, (src), (bytes)), p += (bytes))
    PUT(w, sizeof w);
    PUT(m->join.inc, sz * sizeof *m->join.inc);
    PUT(m->join.seen, sz * sz);
    PUT(m->inc, sz * sizeof *m->inc);
    PUT(m->taken, sz * sizeof *m->taken);
    PUT(m->fresh, sz);
    PUT(m->in_done, sz);
    PUT(m->buddy, sz * sizeof *m->buddy);
    PUT(m->loc, nl * sizeof *m->loc);
    PUT(m->hloc, nl * sizeof *m->hloc);
    PUT(m->from, nl * sizeof *m->from);
#undef PUT
    return len;
}

int phx_ck_rj_accept(const phx_ck_rj_t *m, int peer, int frame, const uint8_t *dead)
{
    if (peer < 0 || peer >= m->n)
        return 0;
    if (!dead[peer] || peer == m->self)
        return 1;
    /* The transport delivers nothing of a dead incarnation after its
     * notice: a marker from a rank counted dead is its newcomer's, taken
     * in by a DECIDE or COMMIT still on its way here (FIFO per link only). */
#if PHX_CK_RJ_MUTANT == 1
    return frame == PHX_CK_RJ_F_RB_MARK;
#elif PHX_CK_RJ_MUTANT == 2
    return 0;
#else
    return frame == PHX_CK_RJ_F_RB_MARK || frame == PHX_CK_RJ_F_CK_MARK;
#endif
}

/* ---- state ----------------------------------------------------------------- */

int phx_ck_rj_respawn(const phx_ck_rj_t *m) { return m->respawn; }
int phx_ck_rj_joining(const phx_ck_rj_t *m) { return m->joining; }
int phx_ck_rj_fresh(const phx_ck_rj_t *m, int r) { return r >= 0 && r < m->n && m->fresh[r]; }
uint32_t phx_ck_rj_connected(const phx_ck_rj_t *m, int x) { return x >= 0 && x < m->n ? m->inc[x] : 0; }
uint16_t phx_ck_rj_view_of(const phx_ck_rj_t *m) { return m->view; }
uint16_t phx_ck_rj_next_view(phx_ck_rj_t *m) { return ++m->view; }
const int *phx_ck_rj_loc(const phx_ck_rj_t *m) { return m->loc; }
const int *phx_ck_rj_buddy(const phx_ck_rj_t *m) { return m->buddy; }
const uint32_t *phx_ck_rj_taken(const phx_ck_rj_t *m) { return m->taken; }

int phx_ck_rj_ready(const phx_ck_rj_t *m, const uint8_t *dead)
{
    uint32_t inc;
    for (int x = 0; m->respawn && x < m->n; x++)
        if (dead[x] && phx_ck_join_ready(&m->join, x, dead, &inc))
            return 1;
    return 0;
}

int phx_ck_rj_waits(const phx_ck_rj_t *m, const uint8_t *dead)
{
    uint32_t inc;
    for (int x = 0; m->respawn && x < m->n; x++)
        if (dead[x] && !phx_ck_join_ready(&m->join, x, dead, &inc))
            return 1;
    return 0;
}

uint32_t phx_ck_rj_ready_inc(const phx_ck_rj_t *m, int x, const uint8_t *dead)
{
    uint32_t inc = 0;
    return x >= 0 && x < m->n && dead[x] && phx_ck_join_ready(&m->join, x, dead, &inc) ? inc : 0;
}

/* ---- survivors and the coordinator ------------------------------------------ */

static void report(phx_ck_rj_t *m, const phx_ck_rj_view_t *v, int x, phx_ck_rj_out_t *o)
{
    emit(o, (phx_ck_rj_act_t){ .kind = PHX_CK_RJ_REPORT, .dst = v->coord, .x = x, .inc = m->inc[x] });
}

void phx_ck_rj_on_peer_up(phx_ck_rj_t *m, const phx_ck_rj_view_t *v, int x, uint32_t inc, phx_ck_rj_out_t *o)
{
    if (!m->respawn || m->joining || x < 0 || x >= m->n || !v->dead[x] || !inc)
        return;
    m->inc[x] = inc;
    report(m, v, x, o);
}

void phx_ck_rj_on_failure(phx_ck_rj_t *m, const phx_ck_rj_view_t *v, int rank, phx_ck_rj_out_t *o)
{
    if (!m->respawn || rank < 0 || rank >= m->n)
        return;
    m->inc[rank] = 0;
    for (int x = 0; x < m->n; x++)   /* the coordinator may have changed */
        if (v->dead[x] && m->inc[x])
            report(m, v, x, o);
}

void phx_ck_rj_on_join(phx_ck_rj_t *m, const phx_ck_rj_view_t *v, int from, int x, uint32_t inc,
                       phx_ck_rj_out_t *o)
{
    if (x < 0 || x >= m->n || v->coord != m->self || !phx_ck_join_seen(&m->join, from, x, inc))
        return;
    emit(o, (phx_ck_rj_act_t){ .kind = PHX_CK_RJ_TRY_DECIDE, .x = x });
    /* Message logging recovered the loss without waiting for it: the
     * newcomer is taken in at the commit of a checkpoint begun now. */
    if (v->at_commit && v->idle && phx_ck_rj_ready(m, v->dead))
        emit(o, (phx_ck_rj_act_t){ .kind = PHX_CK_RJ_CHECKPOINT, .x = x });
}

/* ---- taking in ------------------------------------------------------------- */

int phx_ck_rj_mine(const phx_ck_rj_t *m, const phx_ck_eset_t *e, uint32_t inc)
{
    return m->joining && e->joins && e->inc.n == (size_t)m->n && phx_wire_a32_u32(e->inc, (size_t)m->self) == inc;
}

void phx_ck_rj_take_in(phx_ck_rj_t *m, const phx_ck_rj_view_t *v, const phx_ck_eset_t *e, phx_ck_rj_out_t *o)
{
    (void)v;
    if (!e->joins || e->inc.n != (size_t)m->n || e->table.n != (size_t)m->nloc || e->buddies.n != (size_t)m->n)
        return;
    m->view = e->view;
    for (int x = 0; x < m->n; x++) {
        uint32_t inc = m->taken[x] = phx_wire_a32_u32(e->inc, (size_t)x);
        if (!inc)
            continue;
        m->fresh[x] = 1;   /* not the coordinator before the next commit or GO */
        m->inc[x] = 0;
        phx_ck_join_clear(&m->join, x);
        emit(o, (phx_ck_rj_act_t){ .kind = PHX_CK_RJ_TAKE_IN, .x = x, .inc = inc });
    }
    for (int i = 0; i < m->nloc; i++)
        m->loc[i] = phx_wire_a32_i32(e->table, (size_t)i);
    for (int r = 0; r < m->n; r++)
        m->buddy[r] = phx_wire_a32_i32(e->buddies, (size_t)r);
    emit(o, (phx_ck_rj_act_t){ .kind = PHX_CK_RJ_VIEW, .round = e->view });
}

void phx_ck_rj_restore(phx_ck_rj_t *m, int round, uint64_t epoch, int have, phx_ck_rj_out_t *o)
{
    if (!m->joining || m->rs_round == round)
        return;   /* restored once per round */
    int hosts = 0;
    for (int i = 0; i < m->nloc; i++)
        hosts |= m->loc[i] == m->self;
    if (hosts && !have)
        return;   /* the buddy's copy is on its way */
    m->rs_round = round;
    int src = hosts ? PHX_CK_RJ_COPY : PHX_CK_RJ_EMPTY;
    emit(o, (phx_ck_rj_act_t){ .kind = PHX_CK_RJ_ADOPT, .epoch = epoch, .flags = src });
    /* The marker closes the lost future on every link, before anything
     * this incarnation sends. */
    emit(o, (phx_ck_rj_act_t){ .kind = PHX_CK_RJ_MARK, .round = round, .epoch = epoch });
    emit(o, (phx_ck_rj_act_t){ .kind = PHX_CK_RJ_RESTORE, .epoch = epoch, .flags = src });
}

void phx_ck_rj_at_commit(phx_ck_rj_t *m, uint64_t epoch, phx_ck_rj_out_t *o)
{
    if (!m->joining)
        return;
    /* A member from here, hosting nothing: its predecessor's tasks run on
     * the helpers until the next checkpoint moves them home. */
    m->joining = 0;
    emit(o, (phx_ck_rj_act_t){ .kind = PHX_CK_RJ_ADOPT, .epoch = epoch, .flags = PHX_CK_RJ_EMPTY });
    emit(o, (phx_ck_rj_act_t){ .kind = PHX_CK_RJ_JOINED, .epoch = epoch });
}

void phx_ck_rj_round_over(phx_ck_rj_t *m)
{
    if (!m->respawn)
        return;
    memset(m->fresh, 0, (size_t)m->n);   /* the lowest live rank coordinates again */
    m->joining = 0;
}

void phx_ck_rj_committed(phx_ck_rj_t *m)
{
    memset(m->fresh, 0, (size_t)m->n);   /* a rank taken in at the last commit may coordinate */
}

/* ---- the move home ------------------------------------------------------------ */

int phx_ck_rj_home_plan(phx_ck_rj_t *m, const phx_ck_rj_view_t *v, const int *loc)
{
    return v->at_commit && phx_ck_home_table(m->n, m->nloc, m->slices, loc, v->dead, m->hloc);
}

const int *phx_ck_rj_home_loc(const phx_ck_rj_t *m) { return m->hloc; }
int phx_ck_rj_moving(const phx_ck_rj_t *m) { return m->mig != 0; }

void phx_ck_rj_home_begin(phx_ck_rj_t *m, phx_wire_a32_t table, const int *loc)
{
    if (table.n != (size_t)m->nloc)
        return;
    for (int i = 0; i < m->nloc; i++)
        m->hloc[i] = phx_wire_a32_i32(table, (size_t)i);
    memcpy(m->from, loc, (size_t)m->nloc * sizeof *m->from);
    memset(m->in_done, 0, (size_t)m->n);
    m->mig = 1;
}

/* Whether some slice moves from rank a to rank b at this cut. */
static int moves(const phx_ck_rj_t *m, int a, int b)
{
    for (int i = 0; i < m->nloc; i++)
        if (m->from[i] == a && m->hloc[i] == b)
            return 1;
    return 0;
}

int phx_ck_rj_home_cut(phx_ck_rj_t *m, const uint8_t *have, phx_ck_rj_out_t *o)
{
    if (!m->mig)
        return 1;
    if (m->mig == 1) {
        /* One snapshot per taker, of what it takes; then, if any left, one
         * of what stays, from which this node is rebuilt. The table
         * changes between two consistent states: nothing is forwarded. */
        m->mig = 2;
        int leaves = 0;
        for (int r = 0; r < m->n; r++)
            if (r != m->self && moves(m, m->self, r)) {
                leaves = 1;
                emit(o, (phx_ck_rj_act_t){ .kind = PHX_CK_RJ_SHIP_OUT, .dst = r });
            }
        if (leaves)
            emit(o, (phx_ck_rj_act_t){ .kind = PHX_CK_RJ_KEEP });
        emit(o, (phx_ck_rj_act_t){ .kind = PHX_CK_RJ_SWITCH });
    }
    int wait = 0, takes = 0;
    for (int x = 0; x < m->n; x++) {
        if (x == m->self || !moves(m, x, m->self))
            continue;
        takes = 1;
        if (m->in_done[x])
            continue;
        if (!have[x]) {
            wait = 1;   /* on its way */
            continue;
        }
        m->in_done[x] = 1;
        emit(o, (phx_ck_rj_act_t){ .kind = PHX_CK_RJ_TAKE, .x = x });
    }
    if (!wait && takes && m->mig == 2) {
        m->mig = 3;   /* settled: said once */
        emit(o, (phx_ck_rj_act_t){ .kind = PHX_CK_RJ_SETTLED });
    }
    return !wait;
}

int phx_ck_rj_home_over(phx_ck_rj_t *m)
{
    int was = m->mig != 0;
    m->mig = 0;
    memset(m->in_done, 0, (size_t)m->n);
    return was;
}
