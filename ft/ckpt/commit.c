#include "ft/ckpt/commit.h"

#include <stdlib.h>
#include <string.h>

#include "base/phx_err.h"
#include "ft/ckpt/ckpt_msg.h"

struct phx_ck_cm {
    int n, self;
    /* member: the round this node is in, or was last in */
    int in_round;
    uint64_t id, epoch;
    int marks_sent, snapped, acked, ready_sent;
    /* coordinator: the READY reduction of the round started here */
    phx_ck_commit_t commit;
    uint64_t commit_id;
};

static void emit(phx_ck_cm_out_t *out, phx_ck_cm_act_t a)
{
    /* Every event emits at most PHX_CK_CM_OUT_MAX actions (see each). */
    if (out->n < PHX_CK_CM_OUT_MAX)
        out->a[out->n++] = a;
}

static void send(phx_ck_cm_out_t *out, int dst, int self, int msg, uint64_t id)
{
    emit(out, (phx_ck_cm_act_t){ .kind = PHX_CK_CM_SEND, .dst = dst, .self = self, .msg = msg, .id = id,
                                 .epoch = phx_ck_id_epoch(id) });
}

int phx_ck_cm_create(int n, int self, phx_ck_cm_t **out)
{
    if (n <= 0 || self < 0 || self >= n)
        return PHX_EINVAL;
    phx_ck_cm_t *m = calloc(1, sizeof *m);
    if (!m)
        return PHX_ENOMEM;
    m->n = n;
    m->self = self;
    if (phx_ck_commit_init(&m->commit, n)) {
        free(m);
        return PHX_ENOMEM;
    }
    *out = m;
    return 0;
}

void phx_ck_cm_destroy(phx_ck_cm_t *m)
{
    if (!m)
        return;
    phx_ck_commit_free(&m->commit);
    free(m);
}

int phx_ck_cm_clone(const phx_ck_cm_t *m, phx_ck_cm_t **out)
{
    phx_ck_cm_t *c;
    int rc = phx_ck_cm_create(m->n, m->self, &c);
    if (rc)
        return rc;
    uint8_t *ready = c->commit.ready;
    *c = *m;
    c->commit.ready = ready;
    memcpy(ready, m->commit.ready, (size_t)m->n);
    *out = c;
    return 0;
}

size_t phx_ck_cm_key(const phx_ck_cm_t *m, uint8_t *buf, size_t cap)
{
    uint64_t w[] = { (uint64_t)m->in_round | (uint64_t)m->marks_sent << 1 | (uint64_t)m->snapped << 2 |
                         (uint64_t)m->acked << 3 | (uint64_t)m->ready_sent << 4,
                     m->id, m->epoch, m->commit.epoch, m->commit_id };
    size_t len = sizeof w + (size_t)m->n;
    if (len <= cap) {
        memcpy(buf, w, sizeof w);
        memcpy(buf + sizeof w, m->commit.ready, (size_t)m->n);
    }
    return len;
}

uint64_t phx_ck_cm_id(const phx_ck_cm_t *m) { return m->id; }
uint64_t phx_ck_cm_epoch(const phx_ck_cm_t *m) { return m->epoch; }
int phx_ck_cm_in_round(const phx_ck_cm_t *m) { return m->in_round; }

/* ---- coordinator --------------------------------------------------------- */

uint64_t phx_ck_cm_start(phx_ck_cm_t *m, uint64_t e, int ndead, phx_ck_cm_out_t *out)
{
    uint64_t id = phx_ck_id((uint32_t)ndead, (uint32_t)e);
    phx_ck_commit_begin(&m->commit, e);
    m->commit_id = id;
    send(out, PHX_CK_CM_ALL, 1, PHX_CK_CM_M_BEGIN, id);
    return id;
}

void phx_ck_cm_on_ready(phx_ck_cm_t *m, int from, uint64_t id, const uint8_t *dead, phx_ck_cm_out_t *out)
{
    /* A READY of an aborted round names another id, or finds the reduction
     * aborted (epoch 0). */
    if (id == m->commit_id && phx_ck_commit_ready(&m->commit, from, phx_ck_id_epoch(id), dead))
        send(out, PHX_CK_CM_ALL, 1, PHX_CK_CM_M_COMMIT, id);
}

/* ---- member -------------------------------------------------------------- */

int phx_ck_cm_on_begin(phx_ck_cm_t *m, uint64_t id, int ndead, int body_ok, phx_ck_cm_out_t *out)
{
    if (m->in_round || (int)phx_ck_id_round(id) != ndead)
        return 0;   /* a round this node is in already, or one named by an older dead set */
    if (!body_ok)
        return PHX_EPROTO;
    m->in_round = 1;
    m->id = id;
    m->epoch = phx_ck_id_epoch(id);
    m->marks_sent = m->snapped = m->acked = m->ready_sent = 0;
    emit(out, (phx_ck_cm_act_t){ .kind = PHX_CK_CM_PAUSE, .id = id, .epoch = m->epoch });
    return 1;
}

static void ready(phx_ck_cm_t *m, phx_ck_cm_out_t *out)
{
    if (m->acked && !m->ready_sent) {
        m->ready_sent = 1;
        send(out, PHX_CK_CM_COORD, 0, PHX_CK_CM_M_READY, m->id);
    }
}

void phx_ck_cm_on_progress(phx_ck_cm_t *m, int paused, const phx_ck_filter_t *f, const uint8_t *dead,
                           phx_ck_cm_out_t *out)
{
    if (!m->in_round || !paused)
        return;
    if (!m->marks_sent) {
        /* Paused workers send nothing more: the marker closes each link's
         * part of the cut (links are FIFO). */
        emit(out, (phx_ck_cm_act_t){ .kind = PHX_CK_CM_CUT, .id = m->id, .epoch = m->epoch });
        send(out, PHX_CK_CM_ALL, 0, PHX_CK_CM_M_MARK, m->id);
        m->marks_sent = 1;
    }
    if (!m->snapped && phx_ck_filter_marked(f, m->self, m->id, dead)) {
        /* Every message sent before the cut is here: the state is a
         * consistent cut. READY waits for on_snapshot_done. */
        emit(out, (phx_ck_cm_act_t){ .kind = PHX_CK_CM_SNAPSHOT, .id = m->id, .epoch = m->epoch });
        return;
    }
    ready(m, out);
}

void phx_ck_cm_on_snapshot_done(phx_ck_cm_t *m, int buddy, phx_ck_cm_out_t *out)
{
    if (!m->in_round || m->snapped)
        return;
    m->snapped = 1;
    if (buddy < 0)
        m->acked = 1;   /* a job of one node has no second copy */
    else
        emit(out, (phx_ck_cm_act_t){ .kind = PHX_CK_CM_SHIP, .dst = buddy, .id = m->id, .epoch = m->epoch });
    emit(out, (phx_ck_cm_act_t){ .kind = PHX_CK_CM_STORED, .id = m->id, .epoch = m->epoch });
    ready(m, out);
}

int phx_ck_cm_on_copy_stored(phx_ck_cm_t *m, uint64_t id)
{
    if (!m->in_round || id != m->id)
        return 0;
    m->acked = 1;
    return 1;
}

void phx_ck_cm_on_commit(phx_ck_cm_t *m, uint64_t id, phx_ck_cm_out_t *out)
{
    if (!m->in_round || id != m->id)
        return;
    m->in_round = 0;
    emit(out, (phx_ck_cm_act_t){ .kind = PHX_CK_CM_COMMIT, .id = id, .epoch = m->epoch });
}

void phx_ck_cm_on_failure(phx_ck_cm_t *m, int rank, phx_ck_cm_out_t *out)
{
    int coord = m->commit.epoch != 0;
    phx_ck_commit_abort(&m->commit);
    if (!m->in_round && !coord)
        return;
    m->in_round = 0;
    emit(out, (phx_ck_cm_act_t){ .kind = PHX_CK_CM_ABORT, .dst = rank, .id = m->id, .epoch = m->epoch });
}
