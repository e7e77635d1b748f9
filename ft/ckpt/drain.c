/* The drain machine of recovery=cr: see drain.h. */
#include "ft/ckpt/drain.h"

#include <stdlib.h>
#include <string.h>

#include "base/phx_err.h"

struct phx_ck_dr {
    int n, self;
    int req;               /* this node asked to leave */
    int asked;             /* the coordinator it asked last (-1: none) */
    int left;              /* this node is in an applied plan: it has left */
    uint8_t *pending;      /* coordinator: ranks that asked to leave */
    uint64_t plan_id;      /* the checkpoint carrying a plan (0: none) */
    uint8_t *plan;         /* its leavers */
    uint64_t done_id;      /* the plan last applied */
    uint8_t *done;         /* its leavers (read by the caller at APPLY) */
    uint64_t next_id;      /* a newer plan that came before plan_id's commit (0: none) */
    uint8_t *next;         /* its leavers */
};

static void emit(phx_ck_dr_out_t *o, int kind, int dst, uint64_t id)
{
    if (o->n < PHX_CK_DR_OUT_MAX)
        o->a[o->n++] = (phx_ck_dr_act_t){ .kind = kind, .dst = dst, .id = id };
}

int phx_ck_dr_create(int n, int self, phx_ck_dr_t **out)
{
    if (n < 1 || self < 0 || self >= n)
        return PHX_EINVAL;
    phx_ck_dr_t *m = calloc(1, sizeof *m);
    if (!m)
        return PHX_ENOMEM;
    m->n = n;
    m->self = self;
    m->asked = -1;
    m->pending = calloc((size_t)n, 1);
    m->plan = calloc((size_t)n, 1);
    m->done = calloc((size_t)n, 1);
    m->next = calloc((size_t)n, 1);
    if (!m->pending || !m->plan || !m->done || !m->next) {
        phx_ck_dr_destroy(m);
        return PHX_ENOMEM;
    }
    *out = m;
    return 0;
}

void phx_ck_dr_destroy(phx_ck_dr_t *m)
{
    if (!m)
        return;
    free(m->pending);
    free(m->plan);
    free(m->done);
    free(m->next);
    free(m);
}

static int nlive(const phx_ck_dr_t *m, const uint8_t *dead)
{
    int k = 0;
    for (int r = 0; r < m->n; r++)
        k += !dead[r];
    return k;
}

int phx_ck_dr_request(phx_ck_dr_t *m, const phx_ck_dr_view_t *v, phx_ck_dr_out_t *out)
{
    if (m->req)
        return 1;
    if (nlive(m, v->dead) < 2)
        return PHX_ENOSPC;
    m->req = 1;
    m->asked = v->coord;
    emit(out, PHX_CK_DR_REQ, v->coord, 0);
    return 0;
}

int phx_ck_dr_requested(const phx_ck_dr_t *m) { return m->req; }
int phx_ck_dr_left(const phx_ck_dr_t *m) { return m->left; }

void phx_ck_dr_retry(phx_ck_dr_t *m, const phx_ck_dr_view_t *v, phx_ck_dr_out_t *out)
{
    if (!m->req || m->left || v->coord < 0)
        return;
    m->asked = v->coord;
    emit(out, PHX_CK_DR_REQ, v->coord, 0);
}

/* The round that names checkpoint id (ckpt_msg.h: round << 32 | epoch). */
static uint32_t id_round(uint64_t id) { return (uint32_t)(id >> 32); }

/* A plan of an older round never commits: forgotten. */
static void forget_stale(phx_ck_dr_t *m, const phx_ck_dr_view_t *v)
{
    if (m->plan_id && id_round(m->plan_id) < v->round) {
        m->plan_id = 0;
        memset(m->plan, 0, (size_t)m->n);
    }
    if (m->next_id && id_round(m->next_id) < v->round)
        m->next_id = 0;
    if (!m->plan_id && m->next_id) {
        m->plan_id = m->next_id;
        memcpy(m->plan, m->next, (size_t)m->n);
        m->next_id = 0;
    }
}

static int any_pending(const phx_ck_dr_t *m, const uint8_t *dead)
{
    for (int r = 0; r < m->n; r++)
        if (m->pending[r] && !dead[r])
            return 1;
    return 0;
}

void phx_ck_dr_on_req(phx_ck_dr_t *m, const phx_ck_dr_view_t *v, int from, phx_ck_dr_out_t *out)
{
    if (from < 0 || from >= m->n || v->dead[from])
        return;
    m->pending[from] = 1;
    forget_stale(m, v);
    if (v->coord == m->self && v->idle && !m->plan_id)
        emit(out, PHX_CK_DR_START, -1, 0);
}

void phx_ck_dr_on_idle(phx_ck_dr_t *m, const phx_ck_dr_view_t *v, phx_ck_dr_out_t *out)
{
    forget_stale(m, v);
    if (v->coord == m->self && v->idle && !m->plan_id && !m->left && any_pending(m, v->dead))
        emit(out, PHX_CK_DR_START, -1, 0);
}

int phx_ck_dr_plan(phx_ck_dr_t *m, const phx_ck_dr_view_t *v, uint64_t id, uint8_t *leavers, phx_ck_dr_out_t *out)
{
    int k = 0, live = nlive(m, v->dead);
    for (int r = 0; r < m->n; r++) {
        leavers[r] = m->pending[r] && !v->dead[r];
        k += leavers[r];
    }
    if (!k)
        return 0;
    if (k >= live) {
        emit(out, PHX_CK_DR_CANCEL, -1, id);
        return -1;
    }
    emit(out, PHX_CK_DR_LEAVE, -1, id);
    return k;
}

void phx_ck_dr_on_leave(phx_ck_dr_t *m, const phx_ck_dr_view_t *v, uint64_t id, const uint8_t *leavers)
{
    forget_stale(m, v);
    if (!id || id <= m->plan_id || id_round(id) < v->round)
        return;
    if (m->plan_id && id_round(id) > id_round(m->plan_id)) {
        /* The plan of the membership after plan_id's, from its new
         * coordinator (the old one drained): its LEAVE may overtake the
         * old coordinator's COMMIT, on another link. Kept for after it. */
        m->next_id = id;
        memcpy(m->next, leavers, (size_t)m->n);
        return;
    }
    m->plan_id = id;
    memcpy(m->plan, leavers, (size_t)m->n);
}

const uint8_t *phx_ck_dr_leavers(const phx_ck_dr_t *m, uint64_t id)
{
    if (!id)
        return NULL;
    return id == m->plan_id ? m->plan : id == m->next_id ? m->next : id == m->done_id ? m->done : NULL;
}

void phx_ck_dr_on_commit(phx_ck_dr_t *m, uint64_t id, phx_ck_dr_out_t *out)
{
    if (!id || id != m->plan_id)
        return;
    memcpy(m->done, m->plan, (size_t)m->n);
    m->done_id = id;
    for (int r = 0; r < m->n; r++)
        if (m->done[r])
            m->pending[r] = 0;
    emit(out, PHX_CK_DR_APPLY, -1, id);
    if (m->done[m->self]) {
        m->left = 1;
        emit(out, PHX_CK_DR_EXIT, -1, id);
    }
    m->plan_id = m->next_id;   /* the next membership's plan, if it came early */
    memcpy(m->plan, m->next, (size_t)m->n);
    m->next_id = 0;
}

void phx_ck_dr_on_failure(phx_ck_dr_t *m, int rank)
{
    m->plan_id = m->done_id = m->next_id = 0;
    memset(m->plan, 0, (size_t)m->n);
    if (rank >= 0 && rank < m->n)
        m->pending[rank] = 0;
}

void phx_ck_dr_on_view(phx_ck_dr_t *m, const phx_ck_dr_view_t *v, phx_ck_dr_out_t *out)
{
    if (!m->req || m->left || v->coord < 0 || v->coord == m->asked)
        return;
    m->asked = v->coord;
    emit(out, PHX_CK_DR_REQ, v->coord, 0);
}

/* ---- messages ------------------------------------------------------------------ */

void phx_ck_dr_req_enc(uint8_t out[PHX_CK_DR_REQ_LEN], const phx_ck_dr_req_t *m)
{
    phx_wenc_t e;
    phx_wenc_init(&e, out, PHX_CK_DR_REQ_LEN);
    phx_wenc_u8(&e, PHX_CK_DR_M_REQ);
    phx_wenc_u8(&e, m->why);
    phx_wenc_u16(&e, 0);
    phx_wenc_i32(&e, m->rank);
}

int phx_ck_dr_req_dec(const void *p, size_t len, phx_ck_dr_req_t *m)
{
    phx_wdec_t d;
    phx_wdec_init(&d, p, len);
    int kind = phx_wdec_u8(&d);
    m->why = phx_wdec_u8(&d);
    int pad = phx_wdec_u16(&d);
    m->rank = phx_wdec_i32(&d);
    int rc = phx_wdec_end(&d, 1);
    if (!rc && (kind != PHX_CK_DR_M_REQ || pad || m->rank < 0 || (m->why != PHX_CK_DR_WHY_TERM && m->why != PHX_CK_DR_WHY_CMD)))
        rc = PHX_EPROTO;
    return rc;
}

size_t phx_ck_dr_leave_len(int k) { return 1 + 4 + 4 * (size_t)(k > 0 ? k : 0); }

long phx_ck_dr_leave_enc(const uint8_t *leavers, int n, void *buf, size_t cap)
{
    int k = 0;
    for (int r = 0; r < n; r++)
        k += !!leavers[r];
    phx_wenc_t e;
    phx_wenc_init(&e, buf, cap);
    phx_wenc_u8(&e, PHX_CK_DR_M_LEAVE);
    phx_wenc_u32(&e, (uint32_t)k);
    for (int r = 0; r < n; r++)
        if (leavers[r])
            phx_wenc_i32(&e, r);
    ptrdiff_t end = phx_wenc_end(&e);
    return end < 0 ? -1 : (long)end;
}

int phx_ck_dr_leave_dec(const void *p, size_t len, int n, phx_ck_dr_leave_t *m)
{
    phx_wdec_t d;
    phx_wdec_init(&d, p, len);
    int kind = phx_wdec_u8(&d);
    uint32_t k = phx_wdec_u32(&d);
    if (!d.err && (kind != PHX_CK_DR_M_LEAVE || k == 0 || k > (uint32_t)n))
        return PHX_EPROTO;
    m->ranks = phx_wdec_a32(&d, k);
    int rc = phx_wdec_end(&d, 1);
    for (uint32_t i = 0; !rc && i < k; i++) {
        int32_t r = phx_wire_a32_i32(m->ranks, i);
        if (r < 0 || r >= n || (i && r <= phx_wire_a32_i32(m->ranks, i - 1)))
            rc = PHX_EPROTO;   /* out of range, or not ascending (a repeat) */
    }
    return rc;
}

int phx_ck_dr_kind(const void *p, size_t len) { return len ? ((const uint8_t *)p)[0] : 0; }
