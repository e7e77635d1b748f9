/* SCML state machine: see scml.h. */
#include "ft/mlog/scml.h"

#include <stdlib.h>
#include <string.h>

#include "base/phx_err.h"
#include "base/phx_wire.h"

#define MAXQ 256
#define DET_MAX 40              /* a det's worst-case encoding: 4 varints of 10 bytes */
#define RANGE_MAX 16            /* a range header's: 2 + 10 + 4 bytes of varints */

typedef struct origin {
    uint32_t inc;
    int known;
    int nq;                     /* queues seen (1 + highest index) */
    uint64_t owed;              /* dets stored but not acknowledged yet */
    uint64_t end[MAXQ];         /* per queue of the origin: dets stored below this */
    uint64_t acked[MAXQ];       /* ... and acknowledged below this */
} origin_t;

typedef struct logent {
    uint64_t src, dst, ssn;
    uint32_t tag, len;
    int dst_rank;
    size_t off;                 /* into the arena */
} logent_t;

struct phx_ml {
    phx_ml_cfg_t c;
    phx_detq_t **q;
    /* message log */
    logent_t *log;
    size_t nlog, caplog;
    uint8_t *arena;
    size_t arena_len, arena_cap;
    /* stored dets of others; dle[i]: the epoch dl[i]'s origin had
     * committed when it sent it (a trailer's), which tells a commit here
     * what that commit covers */
    phx_det_t *dl;
    uint64_t *dle;
    size_t ndl, capdl;
    uint64_t epoch;             /* last committed or rolled back to here */
    origin_t *org;              /* n */
    uint32_t *peer_inc;         /* n: agreed incarnation per peer */
    uint64_t *sent;             /* n x nq: end of what each peer was sent */
    phx_ml_stats_t st;
};

phx_ml_t *phx_ml_create(const phx_ml_cfg_t *c)
{
    if (c->n < 1 || c->rank < 0 || c->rank >= c->n || c->nq < 1 || c->nq > MAXQ)
        return NULL;
    phx_ml_t *ml = calloc(1, sizeof *ml);
    if (!ml)
        return NULL;
    ml->c = *c;
    ml->q = calloc((size_t)c->nq, sizeof *ml->q);
    ml->org = calloc((size_t)c->n, sizeof *ml->org);
    ml->peer_inc = calloc((size_t)c->n, sizeof *ml->peer_inc);
    ml->sent = calloc((size_t)c->n * (size_t)c->nq, sizeof *ml->sent);
    if (!ml->sent || !ml->q || !ml->org || !ml->peer_inc)
        goto fail;
    for (int i = 0; i < c->nq; i++)
        if (!(ml->q[i] = phx_detq_create(c->qcap, c->inc, NULL, NULL)))
            goto fail;
    return ml;
fail:
    phx_ml_destroy(ml);
    return NULL;
}

void phx_ml_destroy(phx_ml_t *ml)
{
    if (!ml)
        return;
    if (ml->q)
        for (int i = 0; i < ml->c.nq; i++)
            phx_detq_destroy(ml->q[i]);
    free(ml->q);
    free(ml->org);
    free(ml->peer_inc);
    free(ml->sent);
    free(ml->log);
    free(ml->arena);
    free(ml->dl);
    free(ml->dle);
    free(ml);
}

phx_detq_t *phx_ml_queue(phx_ml_t *ml, int i)
{
    return i >= 0 && i < ml->c.nq ? ml->q[i] : NULL;
}

/* ---- tasks ---------------------------------------------------------------- */
void phx_ml_task_restore(phx_ml_task_t *t, uint64_t rsn)
{
    phx_ml_task_free(t);
    t->rsn = rsn;
    t->replaying = 1;
    t->released = 0;
    t->rep_base = rsn;
}

/* A spawn det: kept in the task's spawn table. A key at rep_base is
 * kept: a task the replay spawns again (base 0) spawns in its init. */
static int spawn_install(phx_ml_task_t *t, const phx_det_t *d)
{
    if (d->rsn < t->rep_base)
        return 0;
    if (t->sp_n == t->sp_cap) {
        uint64_t cap = t->sp_cap ? 2 * t->sp_cap : 16;
        phx_det_t *r = realloc(t->sp, cap * sizeof *r);
        if (!r)
            return PHX_ENOMEM;
        t->sp = r;
        t->sp_cap = cap;
    }
    t->sp[t->sp_n++] = *d;
    t->sp_sorted = 0;
    return 0;
}

static int spawn_cmp(const void *a, const void *b)
{
    const phx_det_t *x = a, *y = b;
    if (x->rsn != y->rsn)
        return x->rsn < y->rsn ? -1 : 1;
    return x->ssn < y->ssn ? -1 : x->ssn > y->ssn;
}

int phx_ml_task_spawn(phx_ml_task_t *t, uint64_t rsn, uint32_t k, uint64_t *child)
{
    if (!t->sp_sorted && t->sp_n) {   /* sorted by key, repeats dropped */
        qsort(t->sp, t->sp_n, sizeof *t->sp, spawn_cmp);
        uint64_t j = 0;
        for (uint64_t i = 0; i < t->sp_n; i++)
            if (!j || spawn_cmp(&t->sp[j - 1], &t->sp[i]))
                t->sp[j++] = t->sp[i];
        t->sp_n = j;
    }
    t->sp_sorted = 1;
    phx_det_t key = { .rsn = rsn, .ssn = PHX_ML_SPAWN_DET | k };
    const phx_det_t *d = t->sp_n ? bsearch(&key, t->sp, t->sp_n, sizeof *t->sp, spawn_cmp) : NULL;
    if (d) {
        *child = d->sender;
        return PHX_ML_SPAWN_FOUND;
    }
    return t->released || !t->replaying ? PHX_ML_SPAWN_NEW : PHX_ML_SPAWN_WAIT;
}

int phx_ml_task_install(phx_ml_task_t *t, const phx_det_t *d)
{
    if (phx_ml_det_is_spawn(d))
        return spawn_install(t, d);
    if (d->rsn <= t->rep_base || d->rsn <= t->rsn)
        return 0;
    uint64_t i = d->rsn - t->rep_base - 1;
    if (i >= (1ull << 32))
        return PHX_ERANGE;
    if (i >= t->rep_cap) {
        uint64_t cap = t->rep_cap ? t->rep_cap : 64;
        while (cap <= i)
            cap *= 2;
        phx_det_t *r = realloc(t->rep, cap * sizeof *r);
        if (!r)
            return PHX_ENOMEM;
        memset(r + t->rep_cap, 0, (cap - t->rep_cap) * sizeof *r);
        t->rep = r;
        t->rep_cap = cap;
    }
    t->rep[i] = *d;
    if (i + 1 > t->rep_n)
        t->rep_n = i + 1;
    return 0;
}

int phx_ml_task_release(phx_ml_task_t *t)
{
    for (uint64_t r = t->rep_base + 1; r <= t->rep_base + t->rep_n; r++)
        if (t->rep[r - t->rep_base - 1].rsn != r)
            return PHX_ERANGE;
    t->released = 1;
    if (t->rsn >= t->rep_base + t->rep_n)
        t->replaying = 0;
    return 0;
}

int phx_ml_task_check(phx_ml_task_t *t, uint64_t cur, uint64_t src, uint64_t ssn)
{
    if (!t->replaying)
        return PHX_ML_DELIVER;
    uint64_t next = cur + 1, top = t->rep_base + t->rep_n;
    if (next <= top) {
        const phx_det_t *d = &t->rep[next - t->rep_base - 1];
        if (d->rsn != next || d->sender != src || d->ssn != ssn)
            return PHX_ML_HOLD;
        if (next == top && t->released)
            t->replaying = 0;
        return PHX_ML_DELIVER;
    }
    if (!t->released)
        return PHX_ML_HOLD;
    t->replaying = 0;
    return PHX_ML_DELIVER;
}

int phx_ml_task_next(const phx_ml_task_t *t, uint64_t cur, uint64_t *src, uint64_t *ssn)
{
    uint64_t next = cur + 1;
    if (!t->replaying || next > t->rep_base + t->rep_n)
        return 0;
    const phx_det_t *d = &t->rep[next - t->rep_base - 1];
    if (d->rsn != next)
        return 0;
    *src = d->sender;
    *ssn = d->ssn;
    return 1;
}

void phx_ml_task_free(phx_ml_task_t *t)
{
    free(t->rep);
    t->rep = NULL;
    t->rep_n = t->rep_cap = 0;
    free(t->sp);
    t->sp = NULL;
    t->sp_n = t->sp_cap = 0;
    t->sp_sorted = 0;
}

int phx_ml_admit(phx_ml_t *ml, int worker, phx_ml_task_t *t, uint64_t src, uint64_t dst, uint64_t ssn,
                 uint64_t *rsn)
{
    if (t->replaying) {
        uint64_t next = t->rsn + 1, top = t->rep_base + t->rep_n;
        if (next <= top) {
            const phx_det_t *d = &t->rep[next - t->rep_base - 1];
            if (d->rsn != next || d->sender != src || d->ssn != ssn)
                return PHX_ML_HOLD;
            t->rsn = next;
            *rsn = next;
            if (next == top && t->released)
                t->replaying = 0;
            return PHX_ML_DELIVER;   /* its det is stored elsewhere already */
        }
        if (!t->released)
            return PHX_ML_HOLD;      /* a survivor may still name this one */
        t->replaying = 0;
    }
    phx_det_t d = { .sender = src, .receiver = dst, .ssn = ssn, .rsn = t->rsn + 1 };
    int64_t k = phx_detq_add(ml->q[worker], &d);
    if (k < 0)
        return (int)k;
    *rsn = ++t->rsn;
    return PHX_ML_DELIVER;
}

/* ---- sending -------------------------------------------------------------- */
int phx_ml_log(phx_ml_t *ml, int dst_rank, uint64_t src, uint64_t dst, uint64_t ssn, uint32_t tag,
               const void *payload, size_t len)
{
    if (dst_rank == ml->c.rank) {
        ml->st.local++;
        return 0;
    }
    if (ml->nlog == ml->caplog) {
        size_t cap = ml->caplog ? 2 * ml->caplog : 256;
        logent_t *l = realloc(ml->log, cap * sizeof *l);
        if (!l)
            return PHX_ENOMEM;
        ml->log = l;
        ml->caplog = cap;
    }
    if (ml->arena_len + len > ml->arena_cap) {
        size_t cap = ml->arena_cap ? ml->arena_cap : 1 << 16;
        while (cap < ml->arena_len + len)
            cap *= 2;
        uint8_t *a = realloc(ml->arena, cap);
        if (!a)
            return PHX_ENOMEM;
        ml->arena = a;
        ml->arena_cap = cap;
    }
    if (len)
        memcpy(ml->arena + ml->arena_len, payload, len);
    ml->log[ml->nlog++] = (logent_t){ src, dst, ssn, tag, (uint32_t)len, dst_rank, ml->arena_len };
    ml->arena_len += len;
    ml->st.logged++;
    ml->st.logged_bytes += len;
    return 0;
}

void phx_ml_count_local(phx_ml_t *ml)
{
    ml->st.local++;
}

size_t phx_ml_pb_size(phx_ml_t *ml)
{
    size_t sz = 6 + 10;
    for (int i = 0; i < ml->c.nq; i++) {
        uint64_t f, e, n = phx_detq_piggyback(ml->q[i], &f, &e);
        if (n)
            sz += RANGE_MAX + n * DET_MAX;
    }
    return sz;
}

/* Trailer: u32 inc, u16 ranges, varint epoch (the origin's last commit),
 * then per range varints queue, first and count, and count dets, each as
 * 4 varints: the zigzag differences of receiver, rsn, sender and ssn from
 * the previous det of the range (from 0 for the first). A worker's
 * consecutive dets mostly share or neighbour those values, so a det takes
 * ~5 bytes instead of 32 (thesis Table 3.1's piggyback volume). Varints
 * are the one codec's (phx_wire.h). */
static uint64_t zz(uint64_t cur, uint64_t prev)
{
    int64_t x = (int64_t)(cur - prev);
    return ((uint64_t)x << 1) ^ (uint64_t)(x >> 63);
}

static uint64_t unzz(uint64_t v, uint64_t prev)
{
    return prev + ((v >> 1) ^ (uint64_t)-(int64_t)(v & 1));
}

/* ssn rotated left by one: a spawn det's flag (bit 63) becomes bit 0, so
 * a spawn det next to a delivery det differs by a small ssn, not 2^63
 * (two 10-byte varints per spawn otherwise: fib's trailers). */
static uint64_t rotl1(uint64_t x) { return x << 1 | x >> 63; }
static uint64_t rotr1(uint64_t x) { return x >> 1 | x << 63; }

static void put_det(phx_wenc_t *e, const phx_det_t *d, phx_det_t *prev)
{
    phx_wenc_uv(e, zz(d->receiver, prev->receiver));
    phx_wenc_uv(e, zz(d->rsn, prev->rsn));
    phx_wenc_uv(e, zz(d->sender, prev->sender));
    phx_wenc_uv(e, zz(rotl1(d->ssn), rotl1(prev->ssn)));
    *prev = *d;
}

static void get_det(phx_wdec_t *dc, phx_det_t *d, phx_det_t *prev)
{
    d->receiver = unzz(phx_wdec_uv(dc), prev->receiver);
    d->rsn = unzz(phx_wdec_uv(dc), prev->rsn);
    d->sender = unzz(phx_wdec_uv(dc), prev->sender);
    d->ssn = rotr1(unzz(phx_wdec_uv(dc), rotl1(prev->ssn)));
    *prev = *d;
}

static long encode(phx_ml_t *ml, uint64_t *sent, void *buf, size_t cap);

long phx_ml_pb_encode(phx_ml_t *ml, void *buf, size_t cap)
{
    return encode(ml, NULL, buf, cap);
}

long phx_ml_pb_encode_to(phx_ml_t *ml, int peer, void *buf, size_t cap)
{
    if (peer < 0 || peer >= ml->c.n)
        return PHX_EINVAL;
    return encode(ml, ml->sent + (size_t)peer * (size_t)ml->c.nq, buf, cap);
}

static long encode(phx_ml_t *ml, uint64_t *sent, void *buf, size_t cap)
{
    phx_wenc_t e;
    phx_wenc_init(&e, buf, cap);
    phx_wenc_u32(&e, ml->c.inc);
    uint8_t *nr = phx_wenc_reserve(&e, 2);
    phx_wenc_uv(&e, ml->epoch);
    uint16_t ranges = 0;
    uint64_t copies = 0, upto[MAXQ];
    for (int i = 0; i < ml->c.nq && !e.err; i++) {
        upto[i] = sent ? sent[i] : 0;
        uint64_t f, end, n = phx_detq_piggyback(ml->q[i], &f, &end);
        if (sent && sent[i] > f) {
            f = sent[i] < end ? sent[i] : end;
            n = end - f;
        }
        if (!n)
            continue;
        phx_wenc_uv(&e, (uint64_t)i);
        phx_wenc_uv(&e, f);
        phx_wenc_uv(&e, n);
        phx_det_t prev = { 0 }, d;
        for (uint64_t k = 0; k < n && !e.err; k++) {
            phx_detq_copy(ml->q[i], f + k, 1, &d);
            put_det(&e, &d, &prev);
        }
        ranges++;
        copies += n;
        upto[i] = end;
    }
    if (e.err)
        return e.err;   /* nothing recorded as sent: a retry sends it all */
    if (!ranges)
        return 0;
    if (sent)
        memcpy(sent, upto, (size_t)ml->c.nq * sizeof *sent);
    phx_wenc_patch_u16(nr, ranges);
    ml->st.frames_pb++;
    ml->st.dets_pb += copies;
    ml->st.pb_bytes += (uint64_t)(e.p - e.start);
    return (long)(e.p - e.start);
}

static int push_det(phx_ml_t *ml, const phx_det_t *d, uint64_t epoch)
{
    if (ml->ndl == ml->capdl) {
        size_t cap = ml->capdl ? 2 * ml->capdl : 1024;
        phx_det_t *n = realloc(ml->dl, cap * sizeof *n);
        if (!n)
            return PHX_ENOMEM;
        ml->dl = n;
        uint64_t *ne = realloc(ml->dle, cap * sizeof *ne);
        if (!ne)
            return PHX_ENOMEM;
        ml->dle = ne;
        ml->capdl = cap;
    }
    ml->dle[ml->ndl] = epoch;
    ml->dl[ml->ndl++] = *d;
    ml->st.dets_stored++;
    return 0;
}

/* An ack: u32 inc, u16 n, n x (u16 queue, u64 end). */
long phx_ml_pb_store(phx_ml_t *ml, int from, const void *pb, size_t len, void *ack)
{
    if (from < 0 || from >= ml->c.n || from == ml->c.rank)
        return PHX_EPROTO;
    phx_wdec_t d;
    phx_wdec_init(&d, pb, len);
    uint32_t inc = phx_wdec_u32(&d);
    uint16_t ranges = phx_wdec_u16(&d);
    uint64_t epoch = phx_wdec_uv(&d);
    /* One range per queue at most: more could not be acked in
     * PHX_ML_ACK_MAX bytes (the fuzzer found a trailer of 2,000 ranges
     * stored, then refused for want of ack space). */
    if (d.err || ranges > MAXQ)
        return PHX_EPROTO;
    origin_t *o = &ml->org[from];
    if (!o->known || o->inc != inc) {
        /* A restarted origin numbers its queues from 0 again. */
        memset(o->end, 0, sizeof o->end);
        memset(o->acked, 0, sizeof o->acked);
        o->nq = 0;
        o->owed = 0;
        o->inc = inc;
        o->known = 1;
    }
    phx_wenc_t e = { 0 };
    if (ack) {
        phx_wenc_init(&e, ack, PHX_ML_ACK_MAX);
        phx_wenc_u32(&e, inc);
        phx_wenc_u16(&e, ranges);
    }
    for (uint16_t r = 0; r < ranges; r++) {
        uint64_t qi = phx_wdec_uv(&d), first = phx_wdec_uv(&d), n = phx_wdec_uv(&d);
        /* n bounded by what the frame can hold (a det takes >= 4 bytes). */
        if (d.err || qi >= MAXQ || n > (uint64_t)(d.end - d.p) / 4)
            return PHX_EPROTO;
        /* A range may start above what we hold: another node acked the
         * dets between (one copy anywhere suffices, k = 1). */
        phx_det_t prev = { 0 }, x;
        for (uint64_t k = 0; k < n; k++) {
            get_det(&d, &x, &prev);
            if (d.err)
                return PHX_EPROTO;
            if (first + k < o->end[qi])
                continue;   /* already stored (re-piggybacked until acked) */
            int rc = push_det(ml, &x, epoch);
            if (rc < 0)
                return rc;
            /* Per det: a frame cut short later must not store it twice. */
            o->end[qi] = first + k + 1;
            o->owed++;
        }
        if ((int)qi >= o->nq)
            o->nq = (int)qi + 1;
        if (ack) {
            phx_wenc_u16(&e, (uint16_t)qi);
            phx_wenc_u64(&e, first + n);
            if (first + n > o->acked[qi])
                o->acked[qi] = first + n;
        }
    }
    if (!ack)
        return 0;
    o->owed = 0;
    for (int q = 0; q < o->nq; q++)
        if (o->acked[q] < o->end[q])
            o->owed += o->end[q] - o->acked[q];
    return e.err ? e.err : (long)(e.p - e.start);
}

uint64_t phx_ml_ack_owed(const phx_ml_t *ml, int peer)
{
    return peer >= 0 && peer < ml->c.n && ml->org[peer].known ? ml->org[peer].owed : 0;
}

long phx_ml_ack_take(phx_ml_t *ml, int peer, void *ack)
{
    if (peer < 0 || peer >= ml->c.n)
        return PHX_EINVAL;
    origin_t *o = &ml->org[peer];
    if (!o->known || !o->owed)
        return 0;
    phx_wenc_t e;
    phx_wenc_init(&e, ack, PHX_ML_ACK_MAX);
    phx_wenc_u32(&e, o->inc);
    uint8_t *nr = phx_wenc_reserve(&e, 2);
    uint16_t k = 0;
    for (int q = 0; q < o->nq; q++)
        if (o->acked[q] < o->end[q]) {
            phx_wenc_u16(&e, (uint16_t)q);
            phx_wenc_u64(&e, o->end[q]);
            o->acked[q] = o->end[q];
            k++;
        }
    if (e.err)
        return e.err;
    phx_wenc_patch_u16(nr, k);
    o->owed = 0;
    return (long)(e.p - e.start);
}

int phx_ml_on_ack(phx_ml_t *ml, const void *ack, size_t len)
{
    phx_wdec_t d;
    phx_wdec_init(&d, ack, len);
    uint32_t inc = phx_wdec_u32(&d);
    uint16_t n = phx_wdec_u16(&d);
    for (uint16_t i = 0; i < n && !d.err; i++) {
        uint16_t qi = phx_wdec_u16(&d);
        uint64_t end = phx_wdec_u64(&d);
        if (!d.err && qi < ml->c.nq)
            phx_detq_ack(ml->q[qi], inc, end);
    }
    return d.err;
}

void phx_ml_gate_snap(phx_ml_t *ml, uint64_t *snap)
{
    for (int i = 0; i < ml->c.nq; i++) {
        uint64_t f;
        phx_detq_piggyback(ml->q[i], &f, &snap[i]);
    }
}

int phx_ml_gate_open(phx_ml_t *ml, const uint64_t *snap)
{
    for (int i = 0; i < ml->c.nq; i++) {
        uint64_t f, e;
        phx_detq_piggyback(ml->q[i], &f, &e);
        if (f < snap[i])
            return 0;
    }
    return 1;
}

/* ---- incarnations --------------------------------------------------------- */
int phx_ml_stale(phx_ml_t *ml, int peer, uint32_t inc)
{
    if (peer < 0 || peer >= ml->c.n || inc >= ml->peer_inc[peer])
        return 0;
    ml->st.stale++;
    return 1;
}

void phx_ml_set_inc(phx_ml_t *ml, int peer, uint32_t inc)
{
    if (peer >= 0 && peer < ml->c.n && inc > ml->peer_inc[peer])
        ml->peer_inc[peer] = inc;
}

/* ---- checkpoint and recovery ---------------------------------------------- */
/* Drops the log and the stored dets whose origin sent them before it
 * committed keep (all of them for keep = UINT64_MAX) and acks the queues. */
static void drop(phx_ml_t *ml, uint64_t keep, uint64_t epoch)
{
    ml->nlog = 0;
    ml->arena_len = 0;
    size_t k = 0;
    for (size_t i = 0; i < ml->ndl; i++)
        if (ml->dle[i] >= keep) {
            ml->dle[k] = ml->dle[i];
            ml->dl[k++] = ml->dl[i];
        }
    ml->ndl = k;
    ml->epoch = epoch;
    /* Their origins ack themselves now. The dets kept stay unacked: an
     * ack only stops re-piggybacking (a later one, or their origin's next
     * commit, ends it). */
    for (int r = 0; r < ml->c.n; r++) {
        origin_t *o = &ml->org[r];
        memcpy(o->acked, o->end, sizeof o->acked);
        o->owed = 0;
    }
    /* Every det describes a delivery the checkpoint now contains. */
    for (int i = 0; i < ml->c.nq; i++) {
        uint64_t f, e;
        phx_detq_piggyback(ml->q[i], &f, &e);
        phx_detq_ack(ml->q[i], ml->c.inc, e);
    }
}

void phx_ml_checkpoint(phx_ml_t *ml, uint64_t epoch)
{
    drop(ml, epoch, epoch);
}

void phx_ml_rollback(phx_ml_t *ml, uint64_t epoch)
{
    drop(ml, UINT64_MAX, epoch);
}

long phx_ml_restart(phx_ml_t *ml, const phx_ml_restart_cb_t *cb)
{
    phx_ml_restart_dets(ml, cb);
    return phx_ml_restart_msgs(ml, cb);
}

void phx_ml_restart_dets(phx_ml_t *ml, const phx_ml_restart_cb_t *cb)
{
    for (size_t i = 0; i < ml->ndl; i++)
        if (cb->lost(cb->arg, ml->dl[i].receiver))
            cb->det(cb->arg, &ml->dl[i]);
}

long phx_ml_restart_msgs(phx_ml_t *ml, const phx_ml_restart_cb_t *cb)
{
    long k = 0;
    for (size_t i = 0; i < ml->nlog; i++) {
        const logent_t *l = &ml->log[i];
        if (!cb->lost(cb->arg, l->dst))
            continue;
        phx_ml_entry_t e = { l->src, l->dst, l->ssn, l->tag, l->len, l->dst_rank, ml->arena + l->off };
        cb->msg(cb->arg, &e);
        k++;
    }
    return k;
}

int phx_ml_decide(int failures_this_period, int buddy_pair_lost)
{
    if (buddy_pair_lost)
        return PHX_ML_ABORT;
    return failures_this_period > 1 ? PHX_ML_ROLLBACK : PHX_ML_RECOVER;
}

void phx_ml_stats(const phx_ml_t *ml, phx_ml_stats_t *out)
{
    *out = ml->st;
    out->dets = 0;
    for (int i = 0; i < ml->c.nq; i++) {
        phx_detq_stat_t s;
        phx_detq_stat(ml->q[i], &s);
        out->dets += s.end;
    }
    out->log_len = ml->nlog;
    out->detlog_len = ml->ndl;
}
