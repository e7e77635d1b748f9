/* recovery=cr: the snapshot codec: a node's tasks, queued messages and
 * finished ids to one blob (ft/ckpt/ckpt_msg.h records) and back, and the
 * discard that precedes a restore. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/eventlog.h"
#include "core/cr_int.h"

extern phx_type_t phx_types[PHX_MAX_TYPES];
extern int phx_ntypes;

static int host_in(const cr_t *c, const int *loc, phx_tid_t id);

static void enc_msg(phx_wenc_t *e, const phx_msg_t *m)
{
    phx_ck_msgrec_enc(e, &(phx_ck_msgrec_t){ .kind = m->kind, .type = m->type_id, .src = m->hdr.src,
                                             .dst = m->hdr.dst, .ssn = m->hdr.ssn, .tag = m->hdr.tag,
                                             .len = m->hdr.len, .data = m->data });
}

static phx_msg_t *dec_msg(phx_wdec_t *d)
{
    phx_ck_msgrec_t r;
    if (phx_ck_msgrec_dec(d, &r) || (r.kind != PHX_MK_APP && r.kind != PHX_MK_SPAWN))
        return NULL;
    phx_msg_t *m = phx_msg_alloc(r.len);
    if (!m)
        return NULL;
    m->kind = r.kind;
    m->type_id = r.type;
    m->hdr = (phx_frame_hdr_t){ .src = r.src, .dst = r.dst, .ssn = r.ssn, .tag = r.tag, .len = r.len };
    m->peer = -1;   /* restored: not a remote arrival for the inbound counters */
    memcpy(m->data, r.data, r.len);
    return m;
}

static void enc_map(phx_wenc_t *e, const phx_map_t *m)
{
    phx_wenc_u32(e, (uint32_t)m->len);
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i]) {
            phx_wenc_u64(e, m->keys[i]);
            phx_wenc_u64(e, m->vals[i]);
        }
}

static int dec_map(phx_wdec_t *d, phx_map_t *m)
{
    uint32_t k = phx_wdec_u32(d);
    for (uint32_t i = 0; i < k && !d->err; i++) {
        uint64_t key = phx_wdec_u64(d), v = phx_wdec_u64(d);
        uint64_t *s = key ? phx_map_put(m, key) : NULL;
        if (!s)
            return PHX_ENOMEM;
        *s = v;
    }
    return d->err;
}

/* Whether the snapshot being taken holds what belongs to task id. */
static int enc_keep(const cr_t *c, phx_tid_t id)
{
    return !c->enc_loc || host_in(c, c->enc_loc, id) == c->enc_to;
}

/* Only application messages: a PHX_MK_KICK (message logging's "offer the
 * held messages again") is no state, and dec_msg refuses it. */
static void enc_queue(const cr_t *c, phx_wenc_t *e, struct cds_wfcq_head *h, struct cds_wfcq_tail *t, uint32_t *k)
{
    struct cds_wfcq_node *qn;
    __cds_wfcq_for_each_blocking(h, t, qn) {
        const phx_msg_t *m = caa_container_of(qn, phx_msg_t, qn);
        if ((m->kind != PHX_MK_APP && m->kind != PHX_MK_SPAWN) || !enc_keep(c, m->hdr.dst))
            continue;
        enc_msg(e, m);
        (*k)++;
    }
}

static void enc_task(phx_wenc_t *e, const phx_task_t *t)
{
    const phx_type_t *ty = &phx_types[t->type];
    phx_ck_task_head_enc(e, &(phx_ck_task_head_t){ .id = t->id, .type = t->type, .rsn = t->rsn });
    enc_map(e, &t->out_ssn);
    enc_map(e, &t->in_ssn);
    uint8_t *lenp = phx_wenc_reserve(e, 4);
    if (!lenp)
        return;
    int k;
    if (ty->pack) {
        k = ty->pack(t->state, e->p, (size_t)(e->end - e->p));
    } else {
        k = (int)ty->state_size;
        if ((size_t)(e->end - e->p) < ty->state_size)
            k = PHX_ENOSPC;
        else
            memcpy(e->p, t->state, ty->state_size);
    }
    if (k < 0) {
        e->err = k == PHX_ENOSPC || k == PHX_ERANGE ? PHX_ENOSPC : k;
        return;
    }
    phx_wenc_patch_u32(lenp, (uint32_t)k);
    e->p += k;
    phx_wenc_u32(e, phx_held_len(&t->held));
    size_t i = 0;
    for (const phx_msg_t *x; (x = phx_held_next(&t->held, &i));)
        enc_msg(e, x);
}

/* Runs one section of the blob; when the buffer is too small, grows it
 * (realloc keeps what is encoded: no page is written twice) to twice its
 * size or to want bytes, whichever is more, and runs that section again,
 * so a first large checkpoint re-encodes one task at most per growth. */
typedef void (*enc_fn)(cr_t *c, phx_wenc_t *e, const void *arg);

static int enc_grow(cr_t *c, phx_wenc_t *e, enc_fn f, const void *arg, size_t want)
{
    size_t pos = (size_t)(e->p - e->start);
    for (;;) {
        f(c, e, arg);
        if (e->err != PHX_ENOSPC)
            return e->err;
        size_t cap = 2 * (size_t)(e->end - e->start);
        if (cap < want)
            cap = want;
        uint8_t *b = realloc(e->start, cap);
        if (!b)
            return PHX_ENOMEM;
        e->start = b;
        e->p = b + pos;
        e->end = b + cap;
        e->err = 0;
    }
}

static void sec_task(cr_t *c, phx_wenc_t *e, const void *t)
{
    (void)c;
    enc_task(e, t);
}

/* Queued messages, in arrival order per worker: batch remnants, inboxes,
 * early arrivals that beat a spawn. */
static void sec_queued(cr_t *c, phx_wenc_t *e, const void *unused)
{
    (void)unused;
    phx_node_t *n = c->n;
    uint8_t *cnt = phx_wenc_reserve(e, 4);
    uint32_t q = 0;
    for (int i = 0; i < n->nworkers && cnt; i++) {
        phx_worker_t *w = &n->workers[i];
        if (c->pause.lh[i])
            enc_queue(c, e, c->pause.lh[i], c->pause.lt[i], &q);
        enc_queue(c, e, &w->ih, &w->it, &q);
        for (size_t k = 0; k < w->pending.cap; k++)
            if (w->pending.keys[k] && enc_keep(c, w->pending.keys[k]))
                for (phx_msg_t *x = (phx_msg_t *)(uintptr_t)w->pending.vals[k]; x; x = (phx_msg_t *)x->qn.next) {
                    enc_msg(e, x);
                    q++;
                }
    }
    if (!e->err)
        phx_wenc_patch_u32(cnt, q);
    c->probe.queued = q;
}

static void sec_gone(cr_t *c, phx_wenc_t *e, const void *unused)
{
    (void)unused;
    phx_node_t *n = c->n;
    uint8_t *cnt = phx_wenc_reserve(e, 4);
    uint32_t g = 0;
    for (int i = 0; i < n->nworkers && cnt; i++) {
        phx_map_t *m = &n->workers[i].gone;
        for (size_t k = 0; k < m->cap; k++)
            if (m->keys[k] && enc_keep(c, m->keys[k])) {
                phx_wenc_u64(e, m->keys[k]);
                g++;
            }
    }
    if (!e->err)
        phx_wenc_patch_u32(cnt, g);
}

/* A blob's head (ckpt_msg.h): rank, the creator its ids carry (node.h,
 * creator), spawn counter, task count; then the tasks, queued messages and
 * finished ids, each section led by its count. */
static void enc_head(phx_wenc_t *e, phx_node_t *n, uint32_t ntasks)
{
    phx_ck_blob_head_enc(e, &(phx_ck_blob_head_t){ .rank = (uint16_t)n->rank,
                                                   .creator = (uint16_t)atomic_load(&n->creator),
                                                   .seq = atomic_load(&n->next_seq), .ntasks = ntasks });
}

/* The creator a blob's ids carry. */
uint16_t cr_blob_creator(const void *blob, size_t len)
{
    phx_ck_blob_head_t h;
    return phx_ck_blob_head_get(blob, len, &h) ? 0 : h.creator;
}

/* Everything on this node that belongs to the application: tasks (with
 * their held-back messages), queued messages, finished ids, the spawn
 * counter. Workers are paused; the comm thread reads their structures.
 * e's buffer is malloc'd and may be replaced (grown). */
static int encode_node(cr_t *c, phx_wenc_t *e)
{
    phx_node_t *n = c->n;
    uint32_t nt = 0, done = 0;
    for (int i = 0; i < n->nworkers; i++) {
        const phx_map_t *m = &n->workers[i].tasks;
        for (size_t k = 0; k < m->cap; k++)
            nt += m->keys[k] && enc_keep(c, m->keys[k]);
    }
    enc_head(e, n, nt);
    int rc = e->err;
    for (int i = 0; i < n->nworkers && !rc; i++) {
        phx_map_t *m = &n->workers[i].tasks;
        for (size_t k = 0; k < m->cap && !rc; k++)
            if (m->keys[k] && enc_keep(c, m->keys[k])) {
                /* A first checkpoint has no earlier size to go by: doubling
                 * from 64 KiB copied and faulted in about twice the blob
                 * again (the buffers it outgrew). The tasks encoded so far
                 * extrapolate the whole, with the snapshot's margin. */
                size_t at = (size_t)(e->p - e->start), want = done ? at / done * nt : 0;
                rc = enc_grow(c, e, sec_task, (const phx_task_t *)(uintptr_t)m->vals[k], want + want / 4 + (1 << 16));
                done++;
            }
    }
    if (!rc)
        rc = enc_grow(c, e, sec_queued, NULL, 0);
    if (!rc)
        rc = enc_grow(c, e, sec_gone, NULL, 0);
    /* Held-back messages wait for a gap to fill: work still to do. */
    for (int i = 0; i < n->nworkers; i++) {
        phx_map_t *m = &n->workers[i].tasks;
        for (size_t k = 0; k < m->cap; k++)
            if (m->keys[k])
                c->probe.queued += phx_held_len(&((const phx_task_t *)(uintptr_t)m->vals[k])->held);
    }
    return rc;
}

int cr_snapshot(cr_t *c, void **out, size_t *len)
{
    /* Sized from the last cr_snapshot (plus room for the header). */
    size_t cap = c->ck_bytes + c->ck_bytes / 4 + (1 << 16);
    uint8_t *buf = phx_ck_store_buf(&c->store, cap, &cap);
    if (!buf)
        return PHX_ENOMEM;
    phx_wenc_t e;
    phx_wenc_init(&e, buf, cap);
    int rc = encode_node(c, &e);
    if (rc) {
        free(e.start);
        return rc;
    }
    *out = e.start;
    *len = (size_t)phx_wenc_end(&e);
    return 0;
}

/* ---- restore ------------------------------------------------------------- */

static void free_msg_counted(phx_node_t *n, phx_msg_t *m, int64_t *work, int64_t *inbound)
{
    (*work)++;
    if (m->peer >= 0 && m->peer != n->rank)
        *inbound += m->hdr.len;
    phx_msg_free(m);
}

static void drain_queue(phx_node_t *n, struct cds_wfcq_head *h, struct cds_wfcq_tail *t, int64_t *work,
                        int64_t *inbound)
{
    struct cds_wfcq_node *qn;
    while ((qn = __cds_wfcq_dequeue_blocking(h, t)))
        free_msg_counted(n, caa_container_of(qn, phx_msg_t, qn), work, inbound);
}

/* Drops every task and queued message of this node (the lost future);
 * moving: only the application's state, which a snapshot just took (the
 * outbox holds the comm thread's own calls then: they stay). */
void cr_discard_all(cr_t *c, int moving)
{
    phx_node_t *n = c->n;
    if (c->lis && !cr_rb_partial(c) && !moving)   /* a team-mate's rollback keeps its logs */
        c->lis(c->lis_arg, PHX_CR_ROLLBACK, cr_rb_epoch(c));
    int64_t work = 0, inbound = 0, outw = 0, unused = 0;
    phx_node_batch_flush(n);
    if (!moving) {
        drain_queue(n, &n->oh, &n->ot, &outw, &unused);
        atomic_store(&n->outq, 0);   /* the workers are paused: none enqueues meanwhile */
    }
    for (int i = 0; i < n->nworkers; i++) {
        phx_worker_t *w = &n->workers[i];
        if (c->pause.lh[i])
            drain_queue(n, c->pause.lh[i], c->pause.lt[i], &work, &inbound);
        drain_queue(n, &w->ih, &w->it, &work, &inbound);
        for (size_t k = 0; k < w->pending.cap; k++) {
            if (!w->pending.keys[k])
                continue;
            phx_msg_t *x = (phx_msg_t *)(uintptr_t)w->pending.vals[k];
            while (x) {
                phx_msg_t *nx = (phx_msg_t *)x->qn.next;
                int64_t dummy = 0;   /* pending messages were counted as handled already */
                free_msg_counted(n, x, &dummy, &dummy);
                x = nx;
            }
        }
        for (size_t k = 0; k < w->tasks.cap; k++)
            if (w->tasks.keys[k])
                phx_task_free((phx_task_t *)(uintptr_t)w->tasks.vals[k]);
        phx_map_free(&w->tasks);
        phx_map_free(&w->pending);
        phx_map_free(&w->gone);
    }
    atomic_fetch_sub(&n->work, work + outw);
    atomic_fetch_sub(&n->inbound, inbound);
}

/* The rank hosting task id under the table loc (nhome * slices entries). */
static int host_in(const cr_t *c, const int *loc, phx_tid_t id)
{
    int h = phx_tid_home(id);
    return h < 0 || h >= c->nhome ? -1 : loc[h * PHX_LOC_SLICES + phx_loc_slice(id)];
}

/* Rebuilds one task, or skips it when loc puts it on another rank. */
static int restore_task(cr_t *c, phx_wdec_t *d, const int *keep, uint32_t *nt)
{
    phx_node_t *n = c->n;
    phx_ck_task_head_t th;
    if (phx_ck_task_head_dec(d, &th))
        return PHX_EPROTO;
    phx_tid_t id = th.id;
    if (keep && host_in(c, keep, id) != c->self)
        return phx_ck_task_skip(d);   /* another rank hosts it (loc) */
    (*nt)++;
    uint16_t type = th.type;
    uint64_t rsn = th.rsn;
    if (type >= phx_ntypes || !id)
        return PHX_EPROTO;
    const phx_type_t *ty = &phx_types[type];
    phx_task_t *t = calloc(1, sizeof *t + ty->state_size);
    if (!t)
        return PHX_ENOMEM;
    t->id = id;
    t->type = type;
    t->rsn = rsn;
    int rc = dec_map(d, &t->out_ssn);
    if (!rc)
        rc = dec_map(d, &t->in_ssn);
    uint32_t sl = phx_wdec_u32(d);
    const uint8_t *sb = phx_wdec_take(d, sl);
    if (!rc && !sb)
        rc = PHX_EPROTO;
    if (!rc) {
        if (ty->unpack)
            rc = ty->unpack(t->state, sb, sl);
        else if (sl != ty->state_size)
            rc = PHX_EPROTO;
        else
            memcpy(t->state, sb, sl);
    }
    uint32_t nh = phx_wdec_u32(d);
    for (uint32_t i = 0; i < nh && !rc; i++) {
        phx_msg_t *m = dec_msg(d);
        if (!m) {
            rc = PHX_EPROTO;
            break;
        }
        if ((rc = phx_held_put(&t->held, m)) < 0)
            phx_msg_free(m);   /* PHX_EEXIST: a packed index never repeats a key */
    }
    phx_worker_t *w = &n->workers[phx_worker_of(n, id)];
    uint64_t *slot = rc ? NULL : phx_map_put(&w->tasks, id);
    if (!slot) {
        phx_task_free(t);   /* fini sees a zeroed or partly unpacked state */
        return rc ? rc : PHX_ENOMEM;
    }
    *slot = (uint64_t)(uintptr_t)t;
    /* A moved task's held messages are offered again: nothing else would
     * (the KICK that releases a replay is not packed). */
    if (c->home.migrating)
        return phx_held_len(&t->held) ? phx_node_kick(n, id) : 0;
    if (c->n->rec->on_restore)
        c->n->rec->on_restore(c, id);
    return 0;
}

/* Rebuilds the tasks and queued messages of one blob on this node.
 * own: the blob is this node's (its spawn counter comes back too). */
uint32_t cr_blob_seq(const void *blob, size_t len)
{
    phx_ck_blob_head_t h;
    return phx_ck_blob_head_get(blob, len, &h) ? 0 : h.seq;
}

/* Keeps the spawn counter ahead of every id this rank ever made. */
void cr_seq_at_least(phx_node_t *n, uint32_t seq)
{
    if (atomic_load(&n->next_seq) < seq)
        atomic_store(&n->next_seq, seq);
}

/* keep: NULL (every task of the blob), or a relocation table: only the
 * tasks and messages it places on this rank. */
int cr_restore_blob(cr_t *c, const void *blob, size_t len, int own, const int *keep, uint32_t *ntasks)
{
    phx_node_t *n = c->n;
    phx_wdec_t d;
    phx_wdec_init(&d, blob, len);
    phx_ck_blob_head_t head;
    if (phx_ck_blob_head_dec(&d, &head))
        return PHX_EPROTO;
    if (own) {
        atomic_store(&n->next_seq, head.seq);
        atomic_store(&n->creator, head.creator);
    }
    uint32_t nt = head.ntasks;
    for (uint32_t i = 0; i < nt; i++) {
        int rc = restore_task(c, &d, keep, ntasks);
        if (rc)
            return rc;
    }
    uint32_t nq = phx_wdec_u32(&d);
    for (uint32_t i = 0; i < nq; i++) {
        phx_msg_t *m = dec_msg(&d);
        if (!m)
            return PHX_EPROTO;
        if (keep && host_in(c, keep, m->hdr.dst) != c->self)
            phx_msg_free(m);
        else
            phx_node_enqueue_local(n, m);
    }
    uint32_t ng = phx_wdec_u32(&d);
    for (uint32_t i = 0; i < ng && !d.err; i++) {
        uint64_t id = phx_wdec_u64(&d);
        if (id && (!keep || host_in(c, keep, id) == c->self) && !phx_map_put(&n->workers[phx_worker_of(n, id)].gone, id))
            return PHX_ENOMEM;
    }
    return phx_wdec_end(&d, 1);
}

/* ---- checkpoint ------------------------------------------------------------ */

/* The state of a newcomer that hosts no slice in the epoch it is taken in
 * at (its predecessor's tasks were recovered on helpers: mig): no tasks,
 * and a fresh task-id creator. Ids its predecessor drew after its last
 * checkpoint may live on (replayed spawns reuse them) and no counter of
 * theirs survived, so this incarnation's ids carry a creator that neither
 * a rank of a job of up to 32768 ranks nor an earlier incarnation uses.
 * malloc'd; NULL after ending the job. */
void *cr_empty_blob(cr_t *c, uint64_t e, size_t *len)
{
    phx_node_t *n = c->n;
    long cr = 0xffffL - (n->rank + (long)(n->inc - 1) * n->size);
    if (n->inc < 1 || cr < 0x8000) {
        fprintf(stderr, "phalanx: rank %d: incarnation %u cannot be taken back in: no task-id creator left "
                        "(rank + (incarnation - 1) x ranks must stay below 32768)\n", n->rank, n->inc);
        phx_node_exit(n, PHX_EXIT_CKPT_LOST, 1);
        return NULL;
    }
    size_t bl = PHX_CK_BLOB_HEAD + 8;
    uint8_t *blob = malloc(bl);
    if (!blob) {
        cr_fatal(c, 1, "%s", "out of memory taking this rank back in");
        return NULL;
    }
    atomic_store(&n->creator, (uint16_t)cr);
    atomic_store(&n->next_seq, 0);
    phx_wenc_t en;
    phx_wenc_init(&en, blob, bl);
    enc_head(&en, n, 0);    /* no tasks */
    phx_wenc_u32(&en, 0);   /* queued */
    phx_wenc_u32(&en, 0);   /* finished */
    *len = bl;
    phx_evlog("rejoin_empty", "\"epoch\":%llu,\"creator\":%ld", (unsigned long long)e, cr);
    return blob;
}

