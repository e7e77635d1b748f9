/* Self-fencing and held failure notices: see fence.h and README.md. */
#include "ft/fence/fence.h"

#include <stdlib.h>

#include "base/phx_err.h"

enum { S_DEAD = 1, S_DOWN = 2, S_ENDED = 4 };

struct phx_ft_fence {
    phx_ft_fence_cfg_t cfg;
    phx_ft_fence_env_t env;
    uint64_t hold_ns, link_quiet_ns;
    uint8_t *st;                  /* per rank: S_* */
    int ndead;
    phx_ft_fence_notice_t *q;     /* notices not yet delivered, in order */
    int nq;
    int told;                     /* q[0..told) went out by take_declared */
    int scan;                     /* next index of the current pass (phx_ft_fence_next) */
    uint64_t scan_now;
    int *ep, nep;                 /* the current episode's deaths */
    int any_death, any_notice;
    uint64_t last_death_ns;       /* at declaration: the episode's clock */
    uint64_t last_notice_ns;      /* at delivery: the link-failure rule's clock */
    int started, reason;
    phx_ft_fence_info_t info;
};

int phx_ft_fence_create(const phx_ft_fence_cfg_t *cfg, const phx_ft_fence_env_t *env,
                        phx_ft_fence_t **out)
{
    if (!cfg || !env || !out || cfg->nranks < 1 || cfg->rank < 0 || cfg->rank >= cfg->nranks ||
        !env->reached || !env->connected)
        return PHX_EINVAL;
    phx_ft_fence_t *f = calloc(1, sizeof *f);
    if (!f)
        return PHX_ENOMEM;
    size_t n = (size_t)cfg->nranks;
    f->st = calloc(n, 1);
    f->q = calloc(n, sizeof *f->q);
    f->ep = calloc(n, sizeof *f->ep);
    if (!f->st || !f->q || !f->ep) {
        phx_ft_fence_destroy(f);
        return PHX_ENOMEM;
    }
    f->cfg = *cfg;
    f->env = *env;
    /* An isolated node declares its emitters one after another, 2 delta
     * (the new emitter's grace) plus a tick apart: one episode. */
    f->hold_ns = 3 * cfg->delta_ns;
    f->link_quiet_ns = 2 * cfg->delta_ns;
    *out = f;
    return 0;
}

void phx_ft_fence_destroy(phx_ft_fence_t *f)
{
    if (!f)
        return;
    free(f->st);
    free(f->q);
    free(f->ep);
    free(f);
}

static void compact(phx_ft_fence_t *f);

static int bad_rank(const phx_ft_fence_t *f, int r) { return r < 0 || r >= f->cfg.nranks; }

/* Time elapsed from t to now; 0 if the caller's clock reading predates t
 * (a reading taken before a re-entrant event). */
static uint64_t since(uint64_t now, uint64_t t) { return now > t ? now - t : 0; }

static int quiet(const phx_ft_fence_t *f, uint64_t now)
{
    return !f->any_death || since(now, f->last_death_ns) > f->hold_ns;
}

/* A host that closed the connection or refused a redial, or a newcomer in
 * the rank's place, shows the old process ended: not a partition. */
static int reached(const phx_ft_fence_t *f, int r)
{
    return (f->st[r] & S_ENDED) || f->env.reached(f->env.ctx, r);
}

void phx_ft_fence_start(phx_ft_fence_t *f) { f->started = 1; }

int phx_ft_fence_on_dead(phx_ft_fence_t *f, int rank, uint32_t inc, uint64_t when_ns, uint64_t now)
{
    if (bad_rank(f, rank) || rank == f->cfg.rank)
        return PHX_EINVAL;
    if (!(f->st[rank] & S_DEAD))
        f->ndead++;
    f->st[rank] = (uint8_t)((f->st[rank] | S_DEAD) & ~S_ENDED);
    if (quiet(f, now))
        f->nep = 0;
    f->any_death = 1;
    f->last_death_ns = now;
    if (f->nep < f->cfg.nranks)
        f->ep[f->nep++] = rank;
    if (f->nq == f->cfg.nranks)
        return PHX_ENOSPC;
    f->q[f->nq++] = (phx_ft_fence_notice_t){ rank, inc, when_ns, now };
    return 0;
}

int phx_ft_fence_on_peer_up(phx_ft_fence_t *f, int rank)
{
    if (bad_rank(f, rank) || !(f->st[rank] & S_DEAD))
        return 0;
    f->st[rank] |= S_ENDED;
    if (f->scan)
        compact(f);
    for (int i = 0; i < f->nq; i++)
        if (f->q[i].rank == rank)
            return 1;
    return 0;
}

void phx_ft_fence_on_conn_closed(phx_ft_fence_t *f, int rank)
{
    if (!bad_rank(f, rank))
        f->st[rank] |= S_DOWN;
}

void phx_ft_fence_on_heard(phx_ft_fence_t *f, int rank)
{
    if (!bad_rank(f, rank))
        f->st[rank] &= (uint8_t)~S_DOWN;
}

void phx_ft_fence_declared(phx_ft_fence_t *f)
{
    if (!f->reason)
        f->reason = PHX_FT_FENCE_DECLARED;
}

int phx_ft_fence_on_link_failed(phx_ft_fence_t *f, int peer, uint64_t now)
{
    if (bad_rank(f, peer) || f->reason || (f->st[peer] & S_DEAD))
        return PHX_FT_FENCE_LINK_NONE;
    if (!f->started)
        return PHX_FT_FENCE_LINK_WAIT;   /* a rejoining node: the links still come back */
    if (f->any_notice && since(now, f->last_notice_ns) < f->link_quiet_ns)
        return PHX_FT_FENCE_LINK_WAIT;
    if (f->cfg.rank < peer)
        return PHX_FT_FENCE_LINK_PEER;
    f->reason = PHX_FT_FENCE_LINK;
    return PHX_FT_FENCE_LINK_SELF;
}

void phx_ft_fence_new_view(phx_ft_fence_t *f, const uint8_t *dead)
{
    f->ndead = 0;
    for (int r = 0; r < f->cfg.nranks; r++) {
        int d = dead[r] && r != f->cfg.rank;
        f->st[r] = (uint8_t)(d ? (f->st[r] & S_ENDED) | S_DEAD : 0);
        f->ndead += d;
    }
    f->started = 1;
}

/* A node that was not running long enough to be declared dead cannot hear
 * it from the protocol: the others closed their connections to it at once
 * and refuse it for good, so no message naming it arrives. What arrives is
 * the evidence: every peer it still counts as alive has dropped its
 * connection (closed now, not only reported down: the transport reports a
 * drop after delta, and by then our hint grace may have declared our
 * emitter). That is evidence only while in doubt (stopped long enough for
 * our observer to declare us, within the last 2 delta). A node merely
 * slow, or never stopped, does not fence itself however many peers vanish:
 * they may all have crashed, and the protocol decides. */
static int isolated(phx_ft_fence_t *f, int in_doubt)
{
    if (!in_doubt)
        return 0;
    int alive = 0;
    for (int r = 0; r < f->cfg.nranks; r++) {
        if (r == f->cfg.rank || (f->st[r] & S_DEAD))
            continue;
        if (!(f->st[r] & S_DOWN) && f->env.connected(f->env.ctx, r))
            return 0;
        alive++;
    }
    f->info.alive = alive;
    return alive > 0;   /* alone by the protocol's own decisions: not isolation */
}

/* A partition looks like a failure from both sides, and only one side may
 * go on. A process that ends is closed by its host's kernel, which tells
 * every peer; a cut network or a stopped process gives silence only. So
 * while the episode lasts, if more of its members fell silent than remain
 * alive (ourselves counted), this node is on the minority side and leaves
 * before acting on any of them. Exactly half goes on (a whole host of a
 * 2-host job may die by power loss). */
static int minority(phx_ft_fence_t *f, uint64_t now)
{
    if (quiet(f, now))
        return 0;   /* the episode settled on our side */
    int silent = 0, live = f->cfg.nranks - f->ndead;
    for (int i = 0; i < f->nep; i++)
        silent += !reached(f, f->ep[i]);
    f->info.silent = silent;
    f->info.live = live;
    return silent > live;
}

int phx_ft_fence_verdict(phx_ft_fence_t *f, uint64_t now, int in_doubt)
{
    if (f->reason || !f->started)
        return f->reason;
    if (isolated(f, in_doubt))
        f->reason = PHX_FT_FENCE_ISOLATED;
    else if (minority(f, now))
        f->reason = PHX_FT_FENCE_MINORITY;
    return f->reason;
}

int phx_ft_fence_take_declared(phx_ft_fence_t *f, phx_ft_fence_notice_t *out)
{
    while (f->told < f->nq) {
        const phx_ft_fence_notice_t *d = &f->q[f->told++];
        if (d->rank >= 0) {
            *out = *d;
            return 1;
        }
    }
    return 0;
}

/* Taken notices are marked (rank -1) and squeezed out when a pass ends,
 * so delivering k of n queued costs O(n), not O(k n). A pass restarts at
 * a new `now` or after a newcomer, when a skipped notice may be due. */
static void compact(phx_ft_fence_t *f)
{
    int keep = 0, told = 0;
    for (int i = 0; i < f->nq; i++) {
        if (f->q[i].rank < 0)
            continue;
        told += i < f->told;
        f->q[keep++] = f->q[i];
    }
    f->nq = keep;
    f->told = told;
    f->scan = 0;
}

int phx_ft_fence_next(phx_ft_fence_t *f, uint64_t now, phx_ft_fence_notice_t *out)
{
    if (f->reason)
        return 0;
    if (f->scan && f->scan_now != now)
        compact(f);
    f->scan_now = now;
    int all = quiet(f, now);
    while (f->scan < f->nq) {
        phx_ft_fence_notice_t *d = &f->q[f->scan++];
        if (d->rank < 0 || (!all && !reached(f, d->rank)))
            continue;
        *out = *d;
        d->rank = -1;
        f->any_notice = 1;
        f->last_notice_ns = now;
        return 1;
    }
    compact(f);
    return 0;
}

uint64_t phx_ft_fence_deadline(const phx_ft_fence_t *f)
{
    return f->nq && !f->reason ? f->last_death_ns + f->hold_ns + 1 : UINT64_MAX;
}

int phx_ft_fence_is_dead(const phx_ft_fence_t *f, int rank)
{
    return !bad_rank(f, rank) && (f->st[rank] & S_DEAD);
}

void phx_ft_fence_get_info(const phx_ft_fence_t *f, phx_ft_fence_info_t *out) { *out = f->info; }

const char *phx_ft_fence_reason_name(int reason)
{
    switch (reason) {
    case PHX_FT_FENCE_GO_ON: return "go on";
    case PHX_FT_FENCE_DECLARED: return "declared dead";
    case PHX_FT_FENCE_ISOLATED: return "isolated after a stall";
    case PHX_FT_FENCE_MINORITY: return "minority side of a partition";
    case PHX_FT_FENCE_LINK: return "link lost for good";
    default: return "unknown";
    }
}
