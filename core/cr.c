/* recovery=cr: coordinated blocking checkpoints kept in memory twice (own
 * copy + buddy copy), two-phase commit, rollback onto the survivors.
 * The decisions (buddies, relocation, commit, round agreement, stale-frame
 * filter, copy retention) are ft/ckpt's pure state machine; core/cr*.c are
 * the glue, one concern per file (core/cr_int.h lists them): this one holds
 * the configuration, the hooks, sending and the control dispatch.
 *
 * Checkpoint of epoch e (coordinator = lowest live rank):
 *   BEGIN(e)  every node pauses its workers at handler boundaries, pushes its
 *             outbox to the transport and sends MARK(e) on every link;
 *   MARK(e)   from every live peer: links are FIFO and paused workers send
 *             nothing, so every message sent before the cut has arrived and
 *             sits in an inbox: the node serialises tasks + queued messages
 *             (a consistent global state), keeps it and sends a copy to
 *             its buddy in chunks (CK_CHUNK, acked by CK_CACK), which ACKs
 *             once it holds the whole;
 *   READY(e)  to the coordinator once both copies exist;
 *   COMMIT(e) when every live node is READY (reduction at the coordinator);
 *             workers resume. e-1 is kept until then.
 * Failure: every survivor pauses and reports STATE(dead set, committed) to
 * the coordinator, which decides (epoch E = max committed) once all report
 * the same set; DECIDE -> every node discards its state, sends a rollback
 * MARK on every link (earlier frames from that peer are stale and dropped),
 * restores E; the dead node's slices of tasks spread over the survivors
 * (relocation table (home, slice) -> host): its buddy restores its share and
 * ships the copy (RB_XFER) to the other new hosts; DONE -> GO. A new failure at any point
 * restarts the round. Then a fresh checkpoint re-doubles the moved state. */
#include <pthread.h>
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ckpt_disk.h"
#include "core/eventlog.h"
#include "ft/hb/ring.h"
#include "core/cr_int.h"

static void dispatch(cr_t *c, int peer, uint32_t tag, uint64_t id, const uint8_t *p, size_t len);

void phx_cr_listen(void *st, phx_cr_listen_fn fn, void *arg, int partial)
{
    cr_t *c = st;
    c->lis = fn;
    c->lis_arg = arg;
    c->partial_ok = partial;
}

int phx_cr_dead(void *st, int r)
{
    const cr_t *c = st;
    return r >= 0 && r < c->size && c->dead[r];
}

void phx_cr_partial_rolls(void *st, phx_cr_rolls_fn fn)
{
    ((cr_t *)st)->rolls = fn;
}

void phx_cr_partial_when(void *st, phx_cr_partial_fn fn)
{
    ((cr_t *)st)->when = fn;
}

/* since[r] = 1 for each rank dead since epoch e: a rank dead before e hosts
 * no slice in e's table (relocated), so these are the ranks still in it;
 * every node's copy of e has the same table. Returns their number. */
int cr_dead_since(const cr_t *c, const phx_ck_copy_t *slot, uint8_t *since)
{
    return phx_ck_dead_since(c->size, c->nloc, slot ? slot->loc : NULL, c->dead, since);
}

int phx_cr_lost_since(void *st, uint8_t *since)
{
    cr_t *c = st;
    return cr_dead_since(c, phx_ck_store_get(&c->store, cr_rb_epoch(c)), since);
}

/* In a partial round: does live rank r roll its own tasks back too? */
int cr_rolls_back(const cr_t *c, int r)
{
    return c->rolls && c->rolls(c->lis_arg, r);
}

void phx_cr_hold(void *st, int hold)
{
    cr_t *c = st;
    c->ck_hold = hold;
    if (!hold && c->ck_deferred) {
        c->ck_deferred = 0;
        cr_begin_checkpoint(c);
    }
}

int cr_coord(const cr_t *c)
{
    for (int r = 0; r < c->size; r++)
        if (!c->dead[r] && !(c->rj.m && phx_ck_rj_fresh(c->rj.m, r)))
            return r;
    return -1;
}

/* ---- sending ------------------------------------------------------------- */

/* A control message: its argument id (ckpt_msg.h, control head) and body. */
void cr_ctl(cr_t *c, int peer, int tag, uint64_t id, const void *buf, size_t len)
{
    if (peer == c->self) {
        dispatch(c, c->self, (uint32_t)tag, id, buf, len);
        return;
    }
    uint8_t head[PHX_CK_CTL_HEAD];
    phx_ck_ctl_enc(head, id);
    phx_frame_hdr_t h = phx_frame_hdr(PHX_FT_CTRL, (uint32_t)tag, (uint64_t)c->self, (uint64_t)peer,
                                      (uint32_t)(sizeof head + len));
    int rc = phx_net_send(c->n->net, peer, &h, head, sizeof head, buf, len, 0);
    if (rc)
        PHX_DEBUG("ckpt", "control %d to rank %d not sent: %s", tag, peer, phx_strerror(rc));
}

/* To every live rank; self last, so local handling sees the others queued. */
void cr_ctl_all(cr_t *c, int tag, uint64_t id, const void *buf, size_t len, int with_self)
{
    for (int r = 0; r < c->size; r++)
        if (r != c->self && !c->dead[r])
            cr_ctl(c, r, tag, id, buf, len);
    if (with_self)
        cr_ctl(c, c->self, tag, id, buf, len);
}

static void die_now(uv_timer_t *t)
{
    (void)t;
    raise(SIGKILL);
}

int cr_die_mid_commit(cr_t *c, uint64_t id)
{
    if (c->die_point != DIE_COMMIT || c->die_epoch != phx_ck_id_epoch(id))
        return 0;
    int last = -1;
    for (int r = 0; r < c->size; r++)
        if (r != c->self && !c->dead[r])
            last = r;
    for (int r = 0; r < c->size; r++)
        if (r != c->self && r != last && !c->dead[r])
            cr_ctl(c, r, CK_COMMIT, id, NULL, 0);
    /* The frames leave in this loop turn's prepare phase; the kernel
     * delivers what was written before the process dies. */
    static uv_timer_t t;
    uv_timer_init(&c->n->loop, &t);
    uv_timer_start(&t, die_now, 1, 0);
    return 1;
}

/* ---- worker pause -------------------------------------------------------- */

void cr_fatal(cr_t *c, int code, const char *fmt, const char *what)
{
    PHX_ERROR("ckpt", fmt, what);
    phx_node_exit(c->n, code, 1);
}

void cr_progress(cr_t *c)
{
    if (atomic_load(&c->n->stopping))
        return;
    if (c->phase == PH_CK)
        cr_ck_progress(c);
    else if (c->phase == PH_REC)
        cr_rb_progress(c);
}

static void handle_ctrl(void *st, int peer, const phx_frame_hdr_t *h, const uint8_t *p)
{
    phx_ck_ctl_t m;
    if (phx_ck_ctl_dec(p, h->len, &m)) {
        PHX_WARN("ckpt", "recovery control tag %u from rank %d without its head; ignored", h->tag, peer);
        return;
    }
    dispatch(st, peer, h->tag, m.arg, m.body, m.len);
}

/* One control message, from the wire or from this node itself. */
static void dispatch(cr_t *c, int peer, uint32_t tag, uint64_t id, const uint8_t *p, size_t len)
{
    /* The transport delivers nothing of a dead incarnation after its
     * notice: a newcomer's rollback marker may come before this node took
     * it in, and so may its marker of the checkpoint that follows a commit
     * taking it in (links are FIFO per pair only: the coordinator's COMMIT
     * may still be on its way here; it_mlog_home's order case hung on it).
     * The rule is the rejoin machine's (phx_ck_rj_accept). */
    if (peer < 0 || peer >= c->size ||
        !phx_ck_rj_accept(c->rj.m, peer, tag == RB_MARK ? PHX_CK_RJ_F_RB_MARK : tag == CK_MARK ? PHX_CK_RJ_F_CK_MARK
                                                                                     : PHX_CK_RJ_F_OTHER, c->dead))
        return;
    switch (tag) {
    case CK_REQ:
        cr_begin_checkpoint(c);
        break;
    case CK_BEGIN:
        /* A rank taken in may coordinate the next checkpoint: its BEGIN
         * can overtake the GO sent by the round's coordinator. */
        if (c->phase == PH_REC && phx_ck_rec_is_restored(c->rec) && (int)phx_ck_id_round(id) == c->ndead)
            cr_on_go(c, (uint64_t)c->ndead);
        cr_on_begin(c, id, p, len);
        break;
    case RB_JOIN:
        cr_on_join(c, peer, id, p, len);
        break;
    case CK_MARK:
        if (id > c->filt.ck_mark[peer])
            c->filt.ck_mark[peer] = id;
        cr_progress(c);
        break;
    case CK_CHUNK:
        cr_on_chunk(c, peer, id, p, len);
        break;
    case CK_CACK:
        cr_on_cack(c, peer, id, p, len);
        break;
    case CK_ACK:
        cr_on_ack(c, id);
        break;
    case CK_READY:
        cr_on_ready(c, peer, id, p, len);
        break;
    case CK_IDLE:
        phx_ck_quiet_idle(&c->probe.quiet, peer, (int)id);
        cr_maybe_probe(c);
        break;
    case CK_COMMIT:
        if (c->disk.dir && id == phx_ck_cm_id(c->cm) && cr_coord(c) == c->self) {
            c->disk.epoch = phx_ck_cm_epoch(c->cm);
            memset(c->disk.ok, 0, (size_t)c->size);
        }
        cr_on_commit(c, id, p, len);
        break;
    case RB_STATE:
        cr_on_state(c, peer, p, len);
        break;
    case RB_DECIDE:
        cr_on_decide(c, id, p, len);
        break;
    case RB_MARK:
        if (id > c->filt.rb_mark[peer])
            c->filt.rb_mark[peer] = id;
        break;
    case RB_DONE:
        cr_on_done(c, peer, id);
        break;
    case RB_GO:
        cr_on_go(c, id);
        break;
    case CK_DISK:
        cr_on_disk_ok(c, peer, id);
        break;
    case CR_DRAIN:
        cr_drain_ctl(c, peer, id, p, len);
        break;
    case RB_ABORT: {
        phx_ck_abort_t a;
        if (phx_ck_abort_dec(p, len, &a))
            a = (phx_ck_abort_t){ -1, -1 };
        int lost = a.lost, lb = a.buddy;
        if (!id) {
            PHX_ERROR("ckpt", "work lost: a node died before the first checkpoint was committed%s", "");
            fprintf(stderr, "phalanx: recovery=cr: work lost: no committed checkpoint to roll back to\n");
            phx_node_exit(c->n, PHX_EXIT_CKPT_LOST, 0);
        } else {
            fprintf(stderr, "phalanx: recovery=cr: checkpoint lost: rank %d and its buddy rank %d both died "
                            "(no disk checkpoint); the job cannot be recovered\n", lost, lb);
            phx_evlog("ckpt_lost", "\"rank\":%d,\"buddy\":%d", lost, lb);
            phx_node_exit(c->n, PHX_EXIT_CKPT_LOST, 0);
        }
        break;
    }
    default:
        PHX_WARN("ckpt", "unknown recovery control tag %u from rank %d", tag, peer);
    }
}

/* ---- hooks ----------------------------------------------------------------- */

static int cr_configure(phx_node_t *n)
{
    if (!n->cfg.ft) {
        fprintf(stderr, "phalanx: recovery=cr needs fault tolerance (--phx-ft=1)\n");
        return PHX_EINVAL;
    }
    if (n->cfg.restart_mode == PHX_RESTART_SPARE && !n->cfg.spares) {
        fprintf(stderr, "phalanx: restart-on=spare needs spare nodes (phx run --spares K)\n");
        return PHX_EINVAL;
    }
    if (n->cfg.restart_mode == PHX_RESTART_UNKNOWN) {
        fprintf(stderr, "phalanx: unknown restart-on=%s (survivors, spare or respawn)\n", n->cfg.restart_on);
        return PHX_EINVAL;
    }
    /* Which detector runs beside cr (td=cut: cr's own check on its cuts,
     * ft/ckpt/quiet.h) was derived with the configuration (core/config.c). */
    int cut_ok = n->cfg.rec_family == PHX_REC_CR;
    if (n->cfg.td_mode == PHX_TD_UNSUPPORTED) {
        fprintf(stderr, "phalanx: recovery=%s detects termination %s; td=%s is not supported with it\n",
                n->cfg.recovery, cut_ok ? "on its checkpoints (td=cut) or not at all (td=none)"
                                        : "not at all (td=none): its jobs end by phx_exit", n->cfg.td);
        return PHX_EINVAL;
    }
    return 0;
}

static void on_timer(uv_timer_t *t)
{
    cr_begin_checkpoint(t->data);
}

static int cr_init(phx_node_t *n, void **out)
{
    cr_t *c = calloc(1, sizeof *c);
    if (!c)
        return PHX_ENOMEM;
    c->n = n;
    c->self = n->rank;
    c->size = n->size;
    c->pause.gen = 1;
    c->nhome = n->size;
    c->disk.tag = phx_ckd_tag();
    c->disk.dir = n->cfg.ckpt_dir[0] ? n->cfg.ckpt_dir : n->cfg.restart[0] ? n->cfg.restart : NULL;
    if (n->cfg.ckpt_dir[0] && mkdir(n->cfg.ckpt_dir, 0700) && errno != EEXIST) {
        fprintf(stderr, "phalanx: cannot create ckpt-dir %s: %s\n", n->cfg.ckpt_dir, strerror(errno));
        free(c);
        return PHX_EIO;
    }
    if (n->cfg.restart[0]) {
        phx_ckd_manifest_t m;
        if (phx_ckd_find(n->cfg.restart, c->disk.tag, UINT64_MAX, &m)) {
            fprintf(stderr, "phalanx: restart: no usable checkpoint in %s\n", n->cfg.restart);
            free(c);
            return PHX_ENOENT;
        }
        if (m.nhome > c->nhome)
            c->nhome = m.nhome;   /* home ranks of the old job, beyond this one's size */
        phx_ckd_manifest_free(&m);
        c->restarting = 1;
        c->t_fail = phx_now_ns();
    }
    size_t sz = (size_t)n->size;
    c->ring = calloc(sz, sizeof *c->ring);
    c->nloc = c->nhome * PHX_LOC_SLICES;
    c->loc = calloc((size_t)c->nloc, sizeof *c->loc);
    c->xfer.blob = calloc(sz, sizeof *c->xfer.blob);
    c->xfer.len = calloc(sz, sizeof *c->xfer.len);
    c->xfer.epoch = calloc(sz, sizeof *c->xfer.epoch);
    c->disk.ok = calloc(sz, 1);
    c->buddy = calloc(sz, sizeof *c->buddy);
    c->home.in = calloc(sz, sizeof *c->home.in);
    c->home.out = calloc(sz, sizeof *c->home.out);
    c->home.in_len = calloc(sz, sizeof *c->home.in_len);
    c->home.in_id = calloc(sz, sizeof *c->home.in_id);
    c->dead = calloc(sz, 1);
    c->pause.lh = calloc((size_t)n->nworkers, sizeof *c->pause.lh);
    c->pause.lt = calloc((size_t)n->nworkers, sizeof *c->pause.lt);
    c->pause.wgen = calloc((size_t)n->nworkers, sizeof *c->pause.wgen);
    uint32_t *host = calloc(sz, sizeof *host);
    *out = c;
    if (!c->ring || !c->loc || !c->buddy || !c->dead || !c->pause.lh || !c->pause.lt || !c->pause.wgen || !c->disk.ok || !host ||
        !c->xfer.blob || !c->xfer.len || !c->xfer.epoch || !c->home.in || !c->home.out || !c->home.in_len || !c->home.in_id ||
        phx_ck_rj_create(n->size, n->rank, c->nloc, PHX_LOC_SLICES, n->cfg.restart_mode == PHX_RESTART_RESPAWN,
                         phx_recovery_rejoining(n), &c->rj.m) ||
        phx_ck_cm_create(n->size, n->rank, &c->cm) || phx_ck_rec_create(n->size, n->rank, &c->rec) ||
        phx_ck_filter_init(&c->filt, n->size) || phx_ck_store_init(&c->store, c->nhome, c->nloc) ||
        phx_ck_quiet_init(&c->probe.quiet, n->size, (uint64_t)n->cfg.hb_period_ms, (uint64_t)n->cfg.hb_timeout_ms) ||
        cr_drain_init(c)) {
        free(host);
        return PHX_ENOMEM;
    }
    c->store.keep = cr_pin_keep;
    c->store.keep_ctx = c;
    /* Buddies follow the heartbeat ring, which puts neighbours on other
     * hosts wherever the hostfile allows. */
    for (int r = 0; r < n->size; r++) {
        uint32_t hsh = 2166136261u;
        for (const char *s = n->cfg.peers[r].host; *s; s++)
            hsh = (hsh ^ (uint8_t)*s) * 16777619u;
        host[r] = hsh;
    }
    for (int i = 0; i < c->nloc; i++)
        c->loc[i] = i / PHX_LOC_SLICES % n->size;
    int rc = phx_ft_ring_build(n->size, host, c->ring);
    free(host);
    if (rc)
        return rc;
    const char *die = getenv("PHX_CKPT_DIE");
    int dr;
    unsigned long long de;
    char pt[16];
    if (die && sscanf(die, "%d:%llu:%15s", &dr, &de, pt) == 3 && dr == n->rank) {
        c->die_epoch = de;
        c->die_point = !strcmp(pt, "stored") ? DIE_STORED : !strcmp(pt, "rollback") ? DIE_ROLLBACK
                     : !strcmp(pt, "rejoin") ? DIE_REJOIN : !strcmp(pt, "shipped") ? DIE_SHIPPED
                     : !strcmp(pt, "moved") ? DIE_MOVED : !strcmp(pt, "commit") ? DIE_COMMIT
                     : !strcmp(pt, "drain") ? DIE_DRAIN : DIE_NONE;
        if (c->die_point == DIE_NONE) {
            fprintf(stderr, "phalanx: PHX_CKPT_DIE: unknown point '%s' (stored|rollback|rejoin|shipped|moved|commit|drain)\n",
                    pt);
            return PHX_EINVAL;
        }
    }
    pthread_mutex_init(&c->pause.mu, NULL);
    pthread_cond_init(&c->pause.cv, NULL);
    uv_async_init(&n->loop, &c->pause.async, cr_on_async);
    c->pause.async.data = c;
    uv_timer_init(&n->loop, &c->timer);
    c->timer.data = c;
    uv_timer_init(&n->loop, &c->rj.timer);
    c->rj.timer.data = c;
    uv_timer_init(&n->loop, &c->probe.timer);
    c->probe.timer.data = c;
    c->open = 1;
    if (phx_recovery_rejoining(n)) {
        /* A new incarnation of a lost rank: nothing runs until the round
         * that takes it in restores its state from its buddy's copy. */
        PHX_INFO("ckpt", "incarnation %u of rank %d: waiting to be taken back in", n->inc, n->rank);
        if (c->die_point == DIE_REJOIN && c->die_epoch == n->inc)
            raise(SIGKILL);   /* test: a respawn that dies before it connects (EPOCH = incarnation) */
        c->t_fail = phx_now_ns();   /* recovery_done counts from this process's start */
        c->phase = PH_REC;
        phx_ck_rec_no_report(c->rec);
        cr_pause_workers(c);
        uint64_t hb = (uint64_t)n->cfg.hb_timeout_ms;
        uv_timer_start(&c->rj.timer, cr_on_rj_timer, hb, hb);
    }
    if (c->restarting) {
        /* Nothing runs before the restore: the main task rank 0 creates
         * at job start is dropped by it. */
        c->phase = PH_REC;
        phx_ck_rec_no_report(c->rec);   /* the coordinator decides at job start */
        cr_pause_workers(c);
    }
    if (n->cfg.ckpt_interval > 0) {
        uint64_t ms = (uint64_t)n->cfg.ckpt_interval * 1000;
        uv_timer_start(&c->timer, on_timer, ms, ms);
    }
    c->probe.cut = n->cfg.td_mode == PHX_TD_CUT;
    c->probe.idle_sent = -1;
    if (c->probe.cut)
        uv_timer_start(&c->probe.timer, cr_on_idle_timer, (uint64_t)n->cfg.hb_period_ms, (uint64_t)n->cfg.hb_period_ms);
    return 0;
}

static void cr_on_start(void *st)
{
    cr_t *c = st;
    if (c->restarting) {
        /* Every node is connected and paused since init: restore the
         * newest usable disk epoch everywhere (a round with no failure). */
        phx_ckd_manifest_t m;
        if (phx_ckd_find(c->disk.dir, c->disk.tag, UINT64_MAX, &m)) {
            fprintf(stderr, "phalanx: restart: no usable checkpoint in %s\n", c->disk.dir);
            phx_node_exit(c->n, PHX_EXIT_CKPT_LOST, 1);
            return;
        }
        PHX_INFO("ckpt", "restarting from epoch %llu of %s", (unsigned long long)m.epoch, c->disk.dir);
        uint64_t e = m.epoch;
        phx_ckd_manifest_free(&m);
        cr_send_decision(c, e, 1);
        return;
    }
    /* Epoch 1 holds the main task's creation: a failure before any
     * application checkpoint restarts the job from its beginning. */
    cr_begin_checkpoint(st);
}

static int cr_on_deliver(void *st, int peer, const phx_frame_hdr_t *h)
{
    (void)h;
    return phx_ck_filter_drop(&((cr_t *)st)->filt, peer);
}

static void cr_on_checkpoint(void *st)
{
    cr_t *c = st;
    int k = cr_coord(c);
    if (k == c->self)
        cr_begin_checkpoint(c);
    else if (k >= 0)
        cr_ctl(c, k, CK_REQ, 0, NULL, 0);
}

static void closed(uv_handle_t *h) { (void)h; }

static void cr_stop(void *st)
{
    cr_t *c = st;
    if (!c->open)
        return;
    c->open = 0;
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, closed);
    uv_timer_stop(&c->rj.timer);
    uv_close((uv_handle_t *)&c->rj.timer, closed);
    uv_timer_stop(&c->probe.timer);
    uv_close((uv_handle_t *)&c->probe.timer, closed);
    cr_drain_stop(c);
    uv_close((uv_handle_t *)&c->pause.async, closed);
    /* Paused workers leave for good: they must reach their STOP message. */
    pthread_mutex_lock(&c->pause.mu);
    c->pause.gen++;
    atomic_store(&c->n->rec_pause, 0);
    pthread_cond_broadcast(&c->pause.cv);
    pthread_mutex_unlock(&c->pause.mu);
}

static void cr_destroy(void *st)
{
    cr_t *c = st;
    phx_ck_cm_destroy(c->cm);
    phx_ck_rec_destroy(c->rec);
    phx_ck_filter_free(&c->filt);
    phx_ck_store_free(&c->store);   /* orphans the blobs still referenced */
    while (c->bulk.pins) {
        pin_t *p = c->bulk.pins;
        c->bulk.pins = p->next;
        if (p->refs)
            p->detached = 1;   /* freed by its last release (phx_net_free) */
        else
            free(p);
    }
    phx_ck_rj_destroy(c->rj.m);
    c->rj.m = NULL;   /* cr_mig_reset below */
    phx_ck_quiet_free(&c->probe.quiet);
    cr_drain_free(c);
    if (c->n->loc == c->loc)
        c->n->loc = NULL;
    free(c->ring);
    free(c->loc);
    free(c->buddy);
    free(c->dead);
    free(c->pause.lh);
    free(c->pause.lt);
    free(c->pause.wgen);
    free(c->disk.ok);
    if (c->xfer.blob)
        cr_xfer_clear(c);
    free(c->xfer.blob);
    free(c->xfer.len);
    free(c->xfer.epoch);
    cr_bulk_drop(c, -1, BK_TX | BK_RX);
    if (c->home.in && c->home.out)
        cr_mig_reset(c);
    free(c->home.in);
    free(c->home.out);
    free(c->home.in_len);
    free(c->home.in_id);
    free(c->bulk.tx);
    free(c->bulk.rx);
    free(c);
}

const phx_recovery_ops_t phx_recovery_cr = {
    .name = "cr",
    .help = "coordinated checkpoints in memory (own + buddy copy), rollback onto the survivors",
    .configure = cr_configure,
    .init = cr_init,
    .on_start = cr_on_start,
    .on_deliver = cr_on_deliver,
    .on_ctrl = handle_ctrl,
    .rx_claim = cr_rx_claim,
    .rx_claimed = cr_rx_claimed,
    .on_failure = cr_ck_failure,
    .on_peer_up = cr_on_peer_up,
    .on_checkpoint = cr_on_checkpoint,
    .drain = cr_drain_request,
    .worker_pause = cr_worker_pause,
    .stop = cr_stop,
    .destroy = cr_destroy,
};
