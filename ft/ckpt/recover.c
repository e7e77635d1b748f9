#include "ft/ckpt/recover.h"

#include <stdlib.h>
#include <string.h>

#include "base/phx_err.h"
#include "ft/ckpt/ckpt.h"

struct phx_ck_rec {
    int n, self;
    /* coordinator */
    phx_ck_round_t reports;
    uint8_t *rep_flags;         /* n: each reporter's STATE flags */
    int decided;                /* round decided here (-1: none) */
    uint8_t *done;              /* n: DONE of the decided round */
    /* member */
    int state_sent, have_decision, restored, restored_own;
    uint64_t epoch;
    int flags;
    uint8_t *lost;              /* n: the decided round's dead set */
    uint8_t *xdone;             /* n: the shipped copy of x restored this round */
};

void phx_ck_rec_out_free(phx_ck_rec_out_t *o)
{
    free(o->a);
    *o = (phx_ck_rec_out_t){ 0 };
}

static void emit(phx_ck_rec_out_t *o, phx_ck_rec_act_t a)
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

int phx_ck_rec_create(int n, int self, phx_ck_rec_t **out)
{
    phx_ck_rec_t *m = calloc(1, sizeof *m);
    *out = m;
    if (!m)
        return PHX_ENOMEM;
    m->n = n;
    m->self = self;
    m->decided = -1;
    m->rep_flags = calloc((size_t)n, 1);
    m->done = calloc((size_t)n, 1);
    m->lost = calloc((size_t)n, 1);
    m->xdone = calloc((size_t)n, 1);
    if (phx_ck_round_init(&m->reports, n) || !m->rep_flags || !m->done || !m->lost || !m->xdone) {
        phx_ck_rec_destroy(m);
        *out = NULL;
        return PHX_ENOMEM;
    }
    return 0;
}

void phx_ck_rec_destroy(phx_ck_rec_t *m)
{
    if (!m)
        return;
    phx_ck_round_free(&m->reports);
    free(m->rep_flags);
    free(m->done);
    free(m->lost);
    free(m->xdone);
    free(m);
}

/* ---- member side ------------------------------------------------------------ */

void phx_ck_rec_on_failure(phx_ck_rec_t *m, const phx_ck_rec_view_t *v, phx_ck_rec_out_t *o)
{
    (void)v;
    m->state_sent = m->have_decision = m->restored = m->restored_own = 0;
    memset(m->xdone, 0, (size_t)m->n);
    emit(o, (phx_ck_rec_act_t){ .kind = PHX_CK_REC_PAUSE });
}

void phx_ck_rec_no_report(phx_ck_rec_t *m) { m->state_sent = 1; }

void phx_ck_rec_reset(phx_ck_rec_t *m) { m->state_sent = m->have_decision = m->restored = 0; }

void phx_ck_rec_progress(phx_ck_rec_t *m, const phx_ck_rec_view_t *v, int paused, phx_ck_rec_out_t *o)
{
    if (!paused)
        return;
    if (!m->state_sent) {
        m->state_sent = 1;
        emit(o, (phx_ck_rec_act_t){ .kind = PHX_CK_REC_STATE, .dst = v->coord, .round = v->round });
    }
    if (m->have_decision && !m->restored)
        emit(o, (phx_ck_rec_act_t){ .kind = PHX_CK_REC_ROLLBACK, .round = v->round, .epoch = m->epoch,
                                     .flags = m->flags });
}

int phx_ck_rec_on_decide(phx_ck_rec_t *m, const phx_ck_rec_view_t *v, int round, const uint8_t *dead,
                         uint64_t epoch, int flags)
{
    if (round != v->round || !v->rec || memcmp(dead, v->dead, (size_t)m->n))
        return 0;   /* stale: a newer failure is known here */
    m->epoch = epoch;
    m->flags = flags;
    memcpy(m->lost, v->dead, (size_t)m->n);
    m->have_decision = 1;
    m->restored = m->restored_own = 0;
    memset(m->xdone, 0, (size_t)m->n);
    return 1;
}

/* Whether a slice of x's copy (its slices at the epoch) moves to r. */
static int moves_to(const phx_ck_rec_tables_t *t, int x, int r)
{
    for (int i = 0; i < t->nloc; i++)
        if (t->loc_e[i] == x && t->keep[i] == r)
            return 1;
    return 0;
}

static void restored(phx_ck_rec_t *m, const phx_ck_rec_view_t *v, phx_ck_rec_out_t *o)
{
    m->restored = 1;
    emit(o, (phx_ck_rec_act_t){ .kind = PHX_CK_REC_DONE, .dst = v->coord, .round = v->round });
}

void phx_ck_rec_restore(phx_ck_rec_t *m, const phx_ck_rec_view_t *v, const phx_ck_rec_tables_t *t,
                        phx_ck_rec_out_t *o)
{
    if (!m->have_decision || m->restored)
        return;
    if (!m->restored_own) {
        /* Own copy first, then as a buddy: ship before restoring, so the
         * other hosts start loading while this one does. */
        m->restored_own = 1;
        emit(o, (phx_ck_rec_act_t){ .kind = PHX_CK_REC_OWN, .round = v->round, .epoch = m->epoch,
                                     .flags = m->flags });
        for (int x = 0; x < m->n; x++) {
            if (!m->lost[x] || t->buddy_e[x] != m->self)
                continue;
            for (int r = 0; r < m->n; r++)
                if (r != m->self && !v->dead[r] && moves_to(t, x, r))
                    emit(o, (phx_ck_rec_act_t){ .kind = PHX_CK_REC_SHIP, .dst = r, .x = x, .round = v->round,
                                                 .epoch = m->epoch });
            emit(o, (phx_ck_rec_act_t){ .kind = PHX_CK_REC_HELD, .x = x, .via = m->self, .epoch = m->epoch });
        }
    }
    int waiting = 0;
    for (int x = 0; x < m->n; x++) {
        int b = t->buddy_e[x];
        if (!m->lost[x] || b == m->self || m->xdone[x] || !moves_to(t, x, m->self))
            continue;
        if (!t->have[x]) {
            waiting = 1;
            continue;
        }
        m->xdone[x] = 1;
        emit(o, (phx_ck_rec_act_t){ .kind = PHX_CK_REC_XFER, .x = x, .via = b, .epoch = m->epoch });
    }
    if (waiting)
        return;
    emit(o, (phx_ck_rec_act_t){ .kind = PHX_CK_REC_TABLE, .epoch = m->epoch });
    restored(m, v, o);
}

void phx_ck_rec_restored(phx_ck_rec_t *m, const phx_ck_rec_view_t *v, phx_ck_rec_out_t *o)
{
    restored(m, v, o);
}

void phx_ck_rec_on_go(phx_ck_rec_t *m, const phx_ck_rec_view_t *v, int round, phx_ck_rec_out_t *o)
{
    if (round != v->round || !v->rec || !m->restored)
        return;
    emit(o, (phx_ck_rec_act_t){ .kind = PHX_CK_REC_RESUME, .round = round, .epoch = m->epoch,
                                 .flags = m->flags });
}

uint64_t phx_ck_rec_epoch(const phx_ck_rec_t *m) { return m->epoch; }
int phx_ck_rec_flags(const phx_ck_rec_t *m) { return m->flags; }
const uint8_t *phx_ck_rec_lost(const phx_ck_rec_t *m) { return m->lost; }
int phx_ck_rec_is_restored(const phx_ck_rec_t *m) { return m->restored; }

/* ---- coordinator side ------------------------------------------------------- */

void phx_ck_rec_on_report(phx_ck_rec_t *m, const phx_ck_rec_view_t *v, int from, const uint8_t *dead,
                          uint64_t committed, int flags, phx_ck_rec_out_t *o)
{
    if (from < 0 || from >= m->n)
        return;
    m->rep_flags[from] = (uint8_t)flags;
    phx_ck_round_report(&m->reports, from, dead, committed);
    phx_ck_rec_try_decide(m, v, o);
}

void phx_ck_rec_try_decide(phx_ck_rec_t *m, const phx_ck_rec_view_t *v, phx_ck_rec_out_t *o)
{
    uint64_t e;
    if (v->coord != m->self || m->decided == v->round || !phx_ck_round_decide(&m->reports, v->dead, &e))
        return;
    /* The reports of this round's dead set all arrived, so any coordinator
     * sums them up alike. */
    int live = 0, ended = 0, j = 0;
    for (int r = 0; r < m->n; r++) {
        if (v->dead[r])
            continue;
        live++;
        ended += (m->rep_flags[r] & 3) == 2;
        j |= m->rep_flags[r] & 3 ? PHX_CK_REC_J_REPLAYED : 0;
        j |= m->rep_flags[r] & 4 ? PHX_CK_REC_J_MOVED : 0;
    }
    if ((j & PHX_CK_REC_J_REPLAYED) && ended == live)
        j |= PHX_CK_REC_J_ENDED;
    emit(o, (phx_ck_rec_act_t){ .kind = PHX_CK_REC_JUDGE, .round = v->round, .epoch = e, .flags = j });
}

void phx_ck_rec_decide(phx_ck_rec_t *m, const phx_ck_rec_view_t *v, uint64_t epoch, int flags,
                       phx_ck_rec_out_t *o)
{
    m->decided = v->round;
    memset(m->done, 0, (size_t)m->n);
    emit(o, (phx_ck_rec_act_t){ .kind = PHX_CK_REC_DECIDE, .round = v->round, .epoch = epoch, .flags = flags });
}

void phx_ck_rec_abort(phx_ck_rec_t *m, const phx_ck_rec_view_t *v, uint64_t epoch, int lost, int buddy,
                      phx_ck_rec_out_t *o)
{
    m->decided = v->round;
    emit(o, (phx_ck_rec_act_t){ .kind = PHX_CK_REC_ABORT, .round = v->round, .epoch = epoch, .lost = lost,
                                 .buddy = buddy });
}

void phx_ck_rec_on_done(phx_ck_rec_t *m, const phx_ck_rec_view_t *v, int from, int round, phx_ck_rec_out_t *o)
{
    if (from < 0 || from >= m->n || round != v->round || m->decided != v->round)
        return;
    m->done[from] = 1;
    for (int r = 0; r < m->n; r++)
        if (!v->dead[r] && !m->done[r])
            return;
    emit(o, (phx_ck_rec_act_t){ .kind = PHX_CK_REC_GO, .round = round });
}

/* ---- tests ------------------------------------------------------------------ */

int phx_ck_rec_clone(const phx_ck_rec_t *m, phx_ck_rec_t **out)
{
    phx_ck_rec_t *c;
    int rc = phx_ck_rec_create(m->n, m->self, &c);
    if (rc)
        return rc;
    size_t n = (size_t)m->n;
    c->decided = m->decided;
    c->state_sent = m->state_sent;
    c->have_decision = m->have_decision;
    c->restored = m->restored;
    c->restored_own = m->restored_own;
    c->epoch = m->epoch;
    c->flags = m->flags;
    memcpy(c->reports.seen, m->reports.seen, n);
    memcpy(c->reports.set, m->reports.set, n * n);
    memcpy(c->reports.epoch, m->reports.epoch, n * sizeof *m->reports.epoch);
    memcpy(c->rep_flags, m->rep_flags, n);
    memcpy(c->done, m->done, n);
    memcpy(c->lost, m->lost, n);
    memcpy(c->xdone, m->xdone, n);
    *out = c;
    return 0;
}

size_t phx_ck_rec_key(const phx_ck_rec_t *m, uint8_t *buf, size_t cap)
{
    size_t n = (size_t)m->n;
    int64_t w[] = { m->decided, m->state_sent, m->have_decision, m->restored, m->restored_own, (int64_t)m->epoch,
                    m->flags };
    size_t len = sizeof w + 5 * n + n * n + n * sizeof *m->reports.epoch;
    if (len > cap)
        return len;
    uint8_t *p = buf;
    memcpy(p, w, sizeof w);
    p += sizeof w;
    const uint8_t *parts[] = { m->reports.seen, m->rep_flags, m->done, m->lost, m->xdone };
    for (size_t i = 0; i < 5; i++, p += n)
        memcpy(p, parts[i], n);
    memcpy(p, m->reports.set, n * n);
    p += n * n;
    memcpy(p, m->reports.epoch, n * sizeof *m->reports.epoch);
    return len;
}
