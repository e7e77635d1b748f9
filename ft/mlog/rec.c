/* Message logging's partial recovery round, per node (ft/mlog/rec.h).
 *
 * PHX_ML_REC_MUTANT (tests only, never in the library): 1 takes out the
 * checkpoint hold at the hand-back, 2 counts an RFIN for whatever round
 * is current instead of the round it names, 3 counts a replay phase's end
 * for the current round whatever round it names; test_mlog_rec_mutant
 * checks the explorer catches each. */
#include <stdlib.h>
#include <string.h>

#include "ft/mlog/rec.h"
#include "ft/mlog/round.h"
#include "ft/mlog/team.h"
#include "base/phx_err.h"

struct phx_ml_rec {
    phx_ml_rec_cfg_t c;
    uint8_t *dead;     /* dead now (failures, and cr's view at commits and rollbacks) */
    uint8_t *pdead;    /* dead in this checkpoint period */
    /* Ranks whose tasks the partial recovery restores: the dead ones, and
     * under mlog-team the first failure's live team-mates. */
    uint8_t *rb;
    /* Per rank, the last round of the period whose RDONE / RFIN arrived
     * (round.h: a sequential round must not count an earlier round's). */
    uint8_t *done;
    uint8_t *fin;
    int nfail;         /* failures this period */
    int full_rb;       /* a global rollback happened in it */
    int part;          /* this node took part in a partial round of it */
    int pround;        /* partial rounds of the period begun here (1, or 2: sequential) */
    int released;      /* this round's replays are released (or voided) */
    int ck_held;       /* cr's checkpoints held until every live rank sent RFIN */
    int hold_logged;   /* RELEASE_HELD queued this round */
    phx_ml_rec_act_t *q;   /* queued actions: q[qh..qt) */
    size_t qh, qt, qcap;
};

static int push(phx_ml_rec_t *m, phx_ml_rec_act_t a)
{
    if (m->qh == m->qt)
        m->qh = m->qt = 0;
    if (m->qt == m->qcap)
        return PHX_ENOSPC;
    m->q[m->qt++] = a;
    return 0;
}

#define ACT(m, ...) push((m), (phx_ml_rec_act_t){ __VA_ARGS__ })

/* One action for every live peer: the caller reads the dead set when it
 * takes the action (right after this event, so this view). */
static int send_all(phx_ml_rec_t *m, int kind)
{
    return ACT(m, .what = PHX_ML_REC_SEND_ALL, .kind = kind, .round = (uint32_t)m->pround);
}

int phx_ml_rec_create(const phx_ml_rec_cfg_t *cfg, phx_ml_rec_t **out)
{
    *out = NULL;
    if (!cfg || cfg->n < 1 || cfg->n > PHX_ML_REC_MAX_RANKS || cfg->rank < 0 || cfg->rank >= cfg->n ||
        cfg->team < 0)
        return PHX_EINVAL;
    phx_ml_rec_t *m = calloc(1, sizeof *m);
    if (!m)
        return PHX_ENOMEM;
    m->c = *cfg;
    size_t n = (size_t)cfg->n;
    uint8_t *b = calloc(5, n);
    m->qcap = PHX_ML_REC_QMAX;
    m->q = calloc(m->qcap, sizeof *m->q);
    if (!b || !m->q) {
        free(b);
        free(m->q);
        free(m);
        return PHX_ENOMEM;
    }
    m->dead = b;
    m->pdead = b + n;
    m->rb = b + 2 * n;
    m->done = b + 3 * n;
    m->fin = b + 4 * n;
    *out = m;
    return 0;
}

void phx_ml_rec_destroy(phx_ml_rec_t *m)
{
    if (!m)
        return;
    free(m->dead);
    free(m->q);
    free(m);
}

int phx_ml_rec_clone(const phx_ml_rec_t *m, phx_ml_rec_t **out)
{
    int rc = phx_ml_rec_create(&m->c, out);
    if (rc)
        return rc;
    phx_ml_rec_t *k = *out;
    uint8_t *b = k->dead;
    phx_ml_rec_act_t *q = k->q;
    *k = *m;
    k->dead = b;
    k->pdead = b + m->c.n;
    k->rb = b + 2 * (size_t)m->c.n;
    k->done = b + 3 * (size_t)m->c.n;
    k->fin = b + 4 * (size_t)m->c.n;
    memcpy(b, m->dead, 5 * (size_t)m->c.n);
    k->q = q;
    memcpy(q, m->q, m->qcap * sizeof *q);
    return 0;
}

/* Release once every live rank handed back this round, unless the gate
 * holds it. A round not begun yet (pround 0) counts as handed back, as it
 * always did: no hand-back frame precedes a round's begin. */
static int try_release(phx_ml_rec_t *m)
{
    if (m->released || !phx_ml_round_all(m->done, m->dead, m->c.n, m->pround))
        return 0;
    if (m->c.gate && !m->c.gate(m->c.ctx)) {
        if (m->hold_logged)
            return 0;
        m->hold_logged = 1;
        return ACT(m, .what = PHX_ML_REC_RELEASE_HELD, .round = (uint32_t)m->pround);
    }
    m->released = 1;
    return ACT(m, .what = PHX_ML_REC_RELEASE, .round = (uint32_t)m->pround);
}

/* A checkpoint committed while a replay is under way is no state to roll
 * back to (its commit drops the logs and dets the rest of the replay
 * needs, and survivors hold messages the restored tasks have not sent
 * again yet): the hold ends once every live rank's replays of this round
 * finished. */
static int hold_check(phx_ml_rec_t *m)
{
    if (!m->ck_held || !phx_ml_round_all(m->fin, m->dead, m->c.n, m->pround))
        return 0;
    m->ck_held = 0;
    return ACT(m, .what = PHX_ML_REC_HOLD, .on = 0);
}

int phx_ml_rec_on_failure(phx_ml_rec_t *m, int rank)
{
    int rc = 0;
    if (rank >= 0 && rank < m->c.n && !m->dead[rank]) {
        m->dead[rank] = 1;
        m->pdead[rank] = 1;
        m->nfail++;
        if (m->nfail == 1)
            rc = ACT(m, .what = PHX_ML_REC_SNAP_HOSTS);
        /* The first failure under mlog-team rolls its whole team back; a
         * team of every live rank marks them all, so cr decides the global
         * rollback (rolls leaves no live rank running). */
        if (m->c.team > 1 && m->nfail == 1)
            (void)phx_team_rollback_set(m->c.n, m->c.team, m->pdead, m->rb);
        m->rb[rank] = 1;
    }
    /* A release waits for every live rank's hand-back: one fewer now. */
    if (!rc && m->pround && m->done[m->c.rank] >= m->pround)
        rc = try_release(m);
    return rc;
}

void phx_ml_rec_set_dead(phx_ml_rec_t *m, int r, int dead)
{
    if (r >= 0 && r < m->c.n)
        m->dead[r] = (uint8_t)!!dead;
}

int phx_ml_rec_partial_begin(phx_ml_rec_t *m, const uint8_t *since)
{
    int k = 0;
    for (int r = 0; since && r < m->c.n; r++)
        k += !!since[r];
    int same = since && !memcmp(since, m->pdead, (size_t)m->c.n);
    /* A sequential round follows one this node ended (handed back). */
    int seq = m->part && m->pround == 1 && m->done[m->c.rank] >= 1;
    if (m->full_rb || (m->part && !seq) || !same)
        /* This node's period disagrees with the round cr decided: it missed
         * the commit that began a new period (a failure raced the COMMIT
         * frame), or took part in a round the decision did not count.
         * Ending beats a replay without records. */
        return ACT(m, .what = PHX_ML_REC_WORK_LOST, .why = PHX_ML_REC_DISAGREE, .nfail = m->nfail,
                   .seq = since ? k : -1);
    /* The guard keeps the phase from ending while an earlier round's
     * replays finish before this round's release, which takes it back (an
     * earlier round not released yet still holds its own). */
    int guard = !m->pround || m->released;
    m->part = 1;
    m->pround++;
    m->released = 0;
    m->hold_logged = 0;
    return ACT(m, .what = PHX_ML_REC_BEGIN, .guard = guard, .round = (uint32_t)m->pround, .nfail = m->nfail,
               .seq = seq);
}

int phx_ml_rec_handback(phx_ml_rec_t *m)
{
    if (m->full_rb || !m->part)
        return ACT(m, .what = PHX_ML_REC_WORK_LOST, .why = PHX_ML_REC_NO_BEGIN, .nfail = m->nfail);
    int fast = m->c.mode == PHX_MLD_FAST, rc = 0;
    if (!fast) {
        rc = ACT(m, .what = PHX_ML_REC_PHASE);
#if PHX_ML_REC_MUTANT != 1
        /* Before cr's re-doubling checkpoint at the round's end. No RFIN
         * of this round can be in yet: every rank's replay waits for this
         * node's RDONE, below. */
        m->ck_held = 1;
        if (!rc)
            rc = ACT(m, .what = PHX_ML_REC_HOLD, .on = 1);
#endif
    }
    if (!rc)
        rc = ACT(m, .what = PHX_ML_REC_HANDBACK, .dets = !fast,
                 .own = m->c.team > 1 && m->rb[m->c.rank], .round = (uint32_t)m->pround);
    if (rc || fast)
        return rc;   /* mlog-fast holds nothing: restored tasks take messages in any order */
    rc = send_all(m, PHX_ML_REC_RDONE);
    m->done[m->c.rank] = (uint8_t)m->pround;
    return rc ? rc : try_release(m);
}

int phx_ml_rec_on_rdone(phx_ml_rec_t *m, int from, uint32_t round)
{
    phx_ml_round_note(m->done, m->c.n, from, round);
    return try_release(m);
}

int phx_ml_rec_on_rfin(phx_ml_rec_t *m, int from, uint32_t round)
{
#if PHX_ML_REC_MUTANT == 2
    round = round ? (uint32_t)m->pround : 0;
#endif
    phx_ml_round_note(m->fin, m->c.n, from, round);
    return hold_check(m);
}

int phx_ml_rec_replay_done(phx_ml_rec_t *m, uint32_t round)
{
#if PHX_ML_REC_MUTANT == 3
    round = (uint32_t)m->pround;
#endif
    if (round != (uint32_t)m->pround || m->fin[m->c.rank] >= m->pround)
        return 0;
    m->fin[m->c.rank] = (uint8_t)m->pround;
    int rc = send_all(m, PHX_ML_REC_RFIN);
    return rc ? rc : hold_check(m);
}

int phx_ml_rec_retry(phx_ml_rec_t *m)
{
    return try_release(m);
}

int phx_ml_rec_on_commit(phx_ml_rec_t *m, int busy)
{
    if (!m->nfail)
        return 0;
    if (busy)   /* cannot happen (the hold); the next failure then rolls back globally */
        return ACT(m, .what = PHX_ML_REC_PERIOD_KEPT);
    int rc = ACT(m, .what = PHX_ML_REC_PERIOD, .nfail = m->nfail, .global = m->full_rb);
    size_t n = (size_t)m->c.n;
    m->nfail = 0;
    m->full_rb = 0;
    m->part = 0;
    m->pround = 0;
    memset(m->pdead, 0, n);
    memset(m->rb, 0, n);
    memset(m->done, 0, n);
    memset(m->fin, 0, n);
    m->released = 0;
    m->hold_logged = 0;
    return rc;
}

int phx_ml_rec_on_rollback(phx_ml_rec_t *m)
{
    int rc = 0;
    if (m->nfail > 1 && !m->full_rb)
        rc = ACT(m, .what = PHX_ML_REC_FALLBACK, .nfail = m->nfail, .seq = m->part);
    if (m->part && !rc) {
        /* A partial recovery still under way is void: its records would
         * hold the restored tasks' deliveries for ever (no hand-back
         * follows), and its hold would keep every checkpoint back. */
        m->released = 1;
        rc = ACT(m, .what = PHX_ML_REC_DROP);
        if (m->ck_held && !rc) {
            m->ck_held = 0;
            rc = ACT(m, .what = PHX_ML_REC_HOLD, .on = 0);
        }
    }
    m->full_rb = 1;
    return rc;
}

int phx_ml_rec_next(phx_ml_rec_t *m, phx_ml_rec_act_t *a)
{
    if (m->qh == m->qt)
        return 0;
    *a = m->q[m->qh++];
    return 1;
}

int phx_ml_rec_decide(const phx_ml_rec_t *m, const uint8_t *dead, const uint8_t *lost, int replayed)
{
    return phx_mld_partial(m->c.mode, m->c.n, dead, lost, replayed) == PHX_MLD_PARTIAL;
}

int phx_ml_rec_rolls(const phx_ml_rec_t *m, int r)
{
    return m->c.team > 1 && m->nfail == 1 && !m->full_rb && r >= 0 && r < m->c.n && m->rb[r] && !m->dead[r];
}

int phx_ml_rec_replays(const phx_ml_rec_t *m)
{
    return m->part && !m->full_rb;
}

int phx_ml_rec_released(const phx_ml_rec_t *m)
{
    return m->released;
}

uint32_t phx_ml_rec_round(const phx_ml_rec_t *m)
{
    return (uint32_t)m->pround;
}

const uint8_t *phx_ml_rec_dead(const phx_ml_rec_t *m)
{
    return m->dead;
}

const uint8_t *phx_ml_rec_rb(const phx_ml_rec_t *m)
{
    return m->rb;
}

size_t phx_ml_rec_state(const phx_ml_rec_t *m, uint8_t *buf, size_t cap)
{
    int v[] = { m->nfail, m->full_rb, m->part, m->pround, m->released, m->ck_held, m->hold_logged };
    size_t n = 5 * (size_t)m->c.n, qn = (m->qt - m->qh) * sizeof *m->q;
    size_t len = n + sizeof v + qn;
    if (len <= cap) {
        memcpy(buf, m->dead, n);
        memcpy(buf + n, v, sizeof v);
        /* Actions are zero-initialised compound literals: no stray padding. */
        memcpy(buf + n + sizeof v, m->q + m->qh, qn);
    }
    return len;
}
