/* Recovery modes: finding one by name, and the hook wrappers the node calls. */
#include "core/recovery.h"

#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/node.h"
#include "core/eventlog.h"
#include "base/phx_err.h"
#include "base/phx_log.h"

static void call_checkpoint(phx_node_t *n, phx_msg_t *m);

static const phx_recovery_ops_t rec_none = { .name = "none", .help = "a lost node's work is lost" };

/* The mode named name among none and modes[0..nmodes); NULL if unknown. */
static const phx_recovery_ops_t *find(const char *name, const phx_recovery_ops_t *const *modes, size_t nmodes)
{
    const char *want = name && name[0] ? name : "none";
    if (!strcmp(want, rec_none.name))
        return &rec_none;
    for (size_t i = 0; i < nmodes; i++)
        if (!strcmp(modes[i]->name, want))
            return modes[i];
    return NULL;
}

int phx_recovery_configure(phx_node_t *n, const phx_recovery_ops_t *const *modes, size_t nmodes)
{
    const phx_recovery_ops_t *o = find(n->cfg.recovery, modes, nmodes);
    if (!o) {
        char names[256];
        size_t off = (size_t)snprintf(names, sizeof names, "%s", rec_none.name);
        for (size_t i = 0; i < nmodes && off < sizeof names; i++)
            off += (size_t)snprintf(names + off, sizeof names - off, "|%s", modes[i]->name);
        fprintf(stderr, "phalanx: unknown recovery mode '%s' (%s)\n", n->cfg.recovery, names);
        return PHX_EINVAL;
    }
    n->rec = o;
    return o->configure ? o->configure(n) : 0;
}

/* The mode's ops once its init has created its state, else NULL: a
 * startup that fails earlier (e.g. the listen port is taken) still runs the
 * orderly stop, and frames may arrive meanwhile; no hook may see state that
 * was never made. */
static const phx_recovery_ops_t *live(const phx_node_t *n)
{
    return n->rec && (n->rec_st || !n->rec->init) ? n->rec : NULL;
}

int phx_recovery_init(phx_node_t *n)
{
    if (!n->rec || !n->rec->init)
        return 0;
    /* Straight into n->rec_st: init may pause the workers, which then find
     * the state there. */
    int rc = n->rec->init(n, &n->rec_st);
    if (rc && n->rec_st) {
        /* A failed init may leave part of its state (no handle open and no
         * worker paused before its last check): freed now, so that no hook
         * ever sees it. */
        if (n->rec->destroy)
            n->rec->destroy(n->rec_st);
        n->rec_st = NULL;
    }
    return rc;
}

void phx_recovery_start(phx_node_t *n)
{
    if (live(n) && n->rec->on_start)
        n->rec->on_start(n->rec_st);
}

void phx_recovery_on_send(phx_node_t *n, const phx_msg_t *m)
{
    if (live(n) && n->rec->on_send)
        n->rec->on_send(n->rec_st, m);
}

int phx_recovery_on_deliver(phx_node_t *n, int peer, const phx_frame_hdr_t *h)
{
    return live(n) && n->rec->on_deliver ? n->rec->on_deliver(n->rec_st, peer, h) : 0;
}

int phx_recovery_on_ctrl(phx_node_t *n, int peer, const phx_frame_hdr_t *h, const uint8_t *payload)
{
    if (h->tag < PHX_CTRL_REC_FIRST || h->tag > PHX_CTRL_REC_LAST)
        return 0;
    if (live(n) && n->rec->on_ctrl)
        n->rec->on_ctrl(n->rec_st, peer, h, payload);
    else
        PHX_WARN("recovery", "recovery frame (tag %u) from rank %d without a recovery mode; ignored", h->tag, peer);
    return 1;
}

uint8_t *phx_recovery_net_claim(void *ctx, int peer, const phx_frame_hdr_t *h, const uint8_t *head, void **tok)
{
    phx_node_t *n = ctx;
    if (h->type != PHX_FT_CTRL || h->tag < PHX_CTRL_REC_FIRST || h->tag > PHX_CTRL_REC_LAST || !live(n) ||
        !n->rec->rx_claim || atomic_load(&n->stopping))
        return NULL;
    return n->rec->rx_claim(n->rec_st, peer, h, head, tok);
}

void phx_recovery_net_claimed(void *ctx, int peer, const phx_frame_hdr_t *h, const uint8_t *head, void *tok, int ok)
{
    phx_node_t *n = ctx;
    n->rec->rx_claimed(n->rec_st, peer, h, head, tok, ok);   /* only what rx_claim took */
}

int phx_recovery_on_failure(phx_node_t *n, int rank)
{
    return live(n) && n->rec->on_failure ? n->rec->on_failure(n->rec_st, rank) : 0;
}

void phx_recovery_on_peer_up(phx_node_t *n, int peer, uint32_t inc)
{
    if (live(n) && n->rec->on_peer_up)
        n->rec->on_peer_up(n->rec_st, peer, inc);
}

/* The program's own drain (phx_on_drain): set before phx_main, read on
 * the communication thread. */
static phx_drain_fn app_drain;
static void *app_drain_arg;

int phx_on_drain(phx_drain_fn fn, void *arg)
{
    if (!fn)
        return PHX_EINVAL;
    app_drain = fn;
    app_drain_arg = arg;
    return 0;
}

int phx_recovery_drain(phx_node_t *n, int why)
{
    if (live(n) && n->rec->drain)
        return n->rec->drain(n->rec_st, why);
    /* A mode that drains nothing leaves it to a program that moves its
     * own work (GLB hands its bag to its backup holder). */
    if (live(n) && app_drain && app_drain(app_drain_arg, why) == 0)
        return 0;
    if (live(n))
        PHX_WARN("recovery", "recovery=%s drains no node: stopping as before; the others recover this node's "
                             "loss as a crash", n->rec->name);
    return PHX_ENOTSUP;
}

int phx_recovery_incarnation(int rank, uint32_t *inc)
{
    const char *v = getenv("PHX_INCARNATION"), *pat = getenv("PHX_INCARNATION_FILE");
    *inc = 0;
    if (v && *v) {
        *inc = (uint32_t)strtoul(v, NULL, 10);
        return 0;
    }
    if (!pat || !*pat)
        return 0;
    char path[4000];
    const char *r = strstr(pat, "%r");
    if (r)
        snprintf(path, sizeof path, "%.*s%d%s", (int)(r - pat), pat, rank, r + 2);
    else
        snprintf(path, sizeof path, "%s", pat);
    unsigned long k = 0;
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%lu", &k) != 1)
            k = 0;
        fclose(f);
    }
    /* Written before the node runs: a crash right after still counts. */
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    f = fopen(tmp, "w");
    int ok = f && fprintf(f, "%lu\n", k + 1) > 0;
    if (f)
        ok &= fflush(f) == 0 && fsync(fileno(f)) == 0;
    if (f)
        ok &= fclose(f) == 0;
    if (!ok || rename(tmp, path)) {
        fprintf(stderr, "phalanx: cannot advance the incarnation counter %s: %s\n", path, strerror(errno));
        return PHX_EIO;
    }
    *inc = (uint32_t)k;
    return 0;
}

int phx_recovery_rejoining(const phx_node_t *n)
{
    return n->inc > 0 && n->cfg.ft && phx_config_respawns(&n->cfg);
}

void phx_recovery_stop(phx_node_t *n)
{
    if (live(n) && n->rec->stop)
        n->rec->stop(n->rec_st);
}

void phx_recovery_free(phx_node_t *n)
{
    if (n->rec && n->rec->destroy && n->rec_st)
        n->rec->destroy(n->rec_st);
    n->rec_st = NULL;
}

void phx_checkpoint(phx_ctx_t *c)
{
    phx_node_t *n = c->w->node;
    if (!live(n) || !n->rec->on_checkpoint)
        return;   /* no checkpointing mode: nothing to do */
    phx_msg_t *m = phx_msg_alloc(0);
    if (!m) {
        PHX_ERROR("recovery", "out of memory requesting a checkpoint");
        return;
    }
    /* The request travels to the comm thread like any call. */
    m->kind = PHX_MK_CALL;
    m->call = call_checkpoint;
    phx_node_enqueue_out(n, m);
}

static void call_checkpoint(phx_node_t *n, phx_msg_t *m)
{
    phx_msg_free(m);
    if (live(n) && n->rec->on_checkpoint)
        n->rec->on_checkpoint(n->rec_st);
}

static void call_leave(phx_node_t *n, phx_msg_t *m)
{
    phx_msg_free(m);
    PHX_WARN("node", "drained: this node's work was handed over by the program; leaving with 0");
    phx_evlog("drain_exit", "\"by\":\"app\"");
    phx_node_exit(n, 0, 0);   /* this node only: the others go on without it */
}

void phx_leave(phx_ctx_t *c)
{
    phx_node_t *n = c->w->node;
    phx_msg_t *m = phx_msg_alloc(0);
    if (!m) {
        PHX_ERROR("node", "out of memory leaving: stopping as after a signal");
        phx_node_exit(n, 128 + 15, 0);
        return;
    }
    m->kind = PHX_MK_CALL;
    m->call = call_leave;
    phx_node_enqueue_out(n, m);
}
