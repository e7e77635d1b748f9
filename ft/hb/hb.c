/* Wire format (little endian, lengths exact, see README.md):
 *   header  u8 version=1, u8 type, u16 0, u32 sender, u32 incarnation, u32 nranks
 *   HEARTBEAT, NEWOBSERVER   header
 *   YOU_ARE_DEAD             header, u32 target, u32 target incarnation
 *   BCASTMSG                 header, u32 origin, u32 seq, u32 dead, u8 cube,
 *                            u8 tree, u16 0, u32 ndead, u32 D[ndead] ascending
 * The sender field must equal the transport's source rank and nranks our
 * group size, so a frame routed to the wrong group or rank is rejected. */
#include "ft/hb/hb.h"

#include <stdlib.h>
#include <string.h>

#include "core/common/phx_err.h"
#include "core/common/phx_log.h"
#include "ft/hb/bcast.h"
#include "ft/hb/ring.h"

#define WIRE_VERSION 1
#define HDR_LEN      16   /* u8 ver, u8 type, u16 flags, u32 sender, u32 inc, u32 nranks */
#define YAD_LEN      (HDR_LEN + 8)    /* + u32 target, u32 target_inc */
#define BC_FIXED     (HDR_LEN + 20)   /* + origin, seq, dead, u8 cube, u8 tree, u16 0, ndead */
#define SEEN_SLOTS   256
#define NO_DEADLINE  UINT64_MAX

struct seen {
    int origin;          /* -1: free */
    uint32_t seq;
    uint64_t mask;       /* bit cube*32+tree: copy already handled */
};

struct phx_ft_hb {
    phx_ft_hb_env_t env;
    int n, me;
    uint32_t inc;
    uint64_t delta, eta, grace, slack;
    int *ring, *pos;
    int emitter, observer;
    int started, fenced;
    uint64_t hb_deadline, susp_deadline;

    uint8_t *dead;
    int *dead_list, ndead, nacked;

    uint32_t *peer_inc;
    uint8_t *peer_inc_seen;

    uint32_t bseq;
    struct seen seen[SEEN_SLOTS];
    unsigned seen_next;
    /* Copies of one broadcast arrive up to 2k times; keep its topology. */
    phx_ft_bcast_t *topo;
    int topo_origin;
    uint32_t topo_seq, topo_ndead;

    phx_ft_bcast_hop_t *hops;   /* max fanout of any topology */
    size_t hops_cap;
    int *tmp;                   /* nranks ints: D of a decoded message */
    int *own;                   /* nranks ints: D of our own broadcast */
    uint8_t *buf;               /* encode scratch, BC_FIXED + 4*nranks */
    phx_ft_hb_stats_t st;
};

struct wire {
    unsigned type;
    int sender;
    uint32_t inc;
    /* YOU_ARE_DEAD */
    int target;
    uint32_t target_inc;
    /* BCASTMSG */
    int origin, dead;
    uint32_t seq;
    unsigned cube, tree;
    uint32_t ndead;
    const uint8_t *list;
};

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

unsigned phx_ft_hb_frame_type(unsigned t)
{
    switch (t) {
    case PHX_FT_HB_HEARTBEAT: case PHX_FT_HB_NEWOBSERVER: case PHX_FT_HB_YOU_ARE_DEAD:
        return PHX_FT_HB_FRAME;
    case PHX_FT_HB_BCASTMSG:
        return PHX_FT_BCAST_FRAME;
    default:
        return 0;
    }
}

const char *phx_ft_hb_msg_name(unsigned t)
{
    switch (t) {
    case PHX_FT_HB_HEARTBEAT: return "HEARTBEAT";
    case PHX_FT_HB_NEWOBSERVER: return "NEWOBSERVER";
    case PHX_FT_HB_BCASTMSG: return "BCASTMSG";
    case PHX_FT_HB_YOU_ARE_DEAD: return "YOU_ARE_DEAD";
    default: return "UNKNOWN";
    }
}

/* ---- wire ---------------------------------------------------------------- */

static size_t put_hdr(const phx_ft_hb_t *hb, uint8_t *p, unsigned type)
{
    p[0] = WIRE_VERSION;
    p[1] = (uint8_t)type;
    p[2] = p[3] = 0;
    put32(p + 4, (uint32_t)hb->me);
    put32(p + 8, hb->inc);
    put32(p + 12, (uint32_t)hb->n);
    return HDR_LEN;
}

/* Full structural validation; touches no state. */
static int decode(const phx_ft_hb_t *hb, int src, unsigned type, const uint8_t *p, size_t len,
                  struct wire *w)
{
    if (!p || len < HDR_LEN || p[0] != WIRE_VERSION || p[1] != type || p[2] || p[3])
        return PHX_EPROTO;
    if (get32(p + 4) != (uint32_t)src || get32(p + 12) != (uint32_t)hb->n)
        return PHX_EPROTO;
    memset(w, 0, sizeof(*w));
    w->type = type;
    w->sender = src;
    w->inc = get32(p + 8);
    switch (type) {
    case PHX_FT_HB_HEARTBEAT:
    case PHX_FT_HB_NEWOBSERVER:
        return len == HDR_LEN ? 0 : PHX_EPROTO;
    case PHX_FT_HB_YOU_ARE_DEAD:
        if (len != YAD_LEN || get32(p + 16) != (uint32_t)hb->me)
            return PHX_EPROTO;
        w->target = hb->me;
        w->target_inc = get32(p + 20);
        return 0;
    case PHX_FT_HB_BCASTMSG: {
        if (len < BC_FIXED)
            return PHX_EPROTO;
        uint32_t origin = get32(p + 16), dead = get32(p + 24), nd = get32(p + 32);
        if (origin >= (uint32_t)hb->n || dead >= (uint32_t)hb->n || p[30] || p[31])
            return PHX_EPROTO;
        if (nd == 0 || nd >= (uint32_t)hb->n || len != BC_FIXED + 4 * (size_t)nd)
            return PHX_EPROTO;
        const uint8_t *l = p + BC_FIXED;
        int has_dead = 0;
        for (uint32_t i = 0; i < nd; i++) {
            uint32_t r = get32(l + 4 * i);
            if (r >= (uint32_t)hb->n || r == origin || (i && r <= get32(l + 4 * (i - 1))))
                return PHX_EPROTO;   /* ascending, unique, origin alive */
            has_dead |= r == dead;
        }
        if (!has_dead)
            return PHX_EPROTO;
        w->origin = (int)origin;
        w->seq = get32(p + 20);
        w->dead = (int)dead;
        w->cube = p[28];
        w->tree = p[29];
        w->ndead = nd;
        w->list = l;
        return 0;
    }
    default:
        return PHX_EPROTO;
    }
}

static void send_msg(phx_ft_hb_t *hb, int dst, unsigned type, const uint8_t *buf, size_t len)
{
    hb->st.sent[type]++;
    hb->env.send(hb->env.ctx, dst, type, buf, len);
}

static void send_simple(phx_ft_hb_t *hb, int dst, unsigned type)
{
    uint8_t b[HDR_LEN];
    send_msg(hb, dst, type, b, put_hdr(hb, b, type));
}

static void send_you_are_dead(phx_ft_hb_t *hb, int dst)
{
    uint8_t b[YAD_LEN];
    put_hdr(hb, b, PHX_FT_HB_YOU_ARE_DEAD);
    put32(b + 16, (uint32_t)dst);
    put32(b + 20, hb->peer_inc[dst]);
    send_msg(hb, dst, PHX_FT_HB_YOU_ARE_DEAD, b, YAD_LEN);
}

/* ---- lifecycle ------------------------------------------------------------ */

int phx_ft_hb_create(const phx_ft_hb_cfg_t *cfg, const phx_ft_hb_env_t *env, phx_ft_hb_t **out)
{
    if (!cfg || !env || !env->send || !out || cfg->nranks < 1 || cfg->nranks > (1 << 24) ||
        cfg->rank < 0 || cfg->rank >= cfg->nranks || cfg->delta_ns == 0)
        return PHX_EINVAL;
    phx_ft_hb_t *hb = calloc(1, sizeof(*hb));
    if (!hb)
        return PHX_ENOMEM;
    int n = cfg->nranks;
    hb->env = *env;
    hb->n = n;
    hb->me = cfg->rank;
    hb->inc = cfg->incarnation;
    hb->delta = cfg->delta_ns;
    hb->eta = cfg->eta_ns ? cfg->eta_ns : (cfg->delta_ns / 10 ? cfg->delta_ns / 10 : 1);
    hb->grace = cfg->hint_grace_ns ? cfg->hint_grace_ns : cfg->delta_ns / 2;
    hb->slack = cfg->stall_slack_ns ? cfg->stall_slack_ns : hb->eta;
    hb->ring = malloc(sizeof(int) * (size_t)n);
    hb->pos = malloc(sizeof(int) * (size_t)n);
    hb->dead = calloc((size_t)n, 1);
    hb->dead_list = malloc(sizeof(int) * (size_t)n);
    hb->peer_inc = calloc((size_t)n, sizeof(uint32_t));
    hb->peer_inc_seen = calloc((size_t)n, 1);
    hb->tmp = malloc(sizeof(int) * (size_t)n);
    hb->own = malloc(sizeof(int) * (size_t)n);
    hb->buf = malloc(BC_FIXED + 4 * (size_t)n);
    hb->hops_cap = 2 * 32;
    hb->hops = malloc(sizeof(*hb->hops) * hb->hops_cap);
    if (!hb->ring || !hb->pos || !hb->dead || !hb->dead_list || !hb->peer_inc ||
        !hb->peer_inc_seen || !hb->tmp || !hb->own || !hb->buf || !hb->hops) {
        phx_ft_hb_destroy(hb);
        return PHX_ENOMEM;
    }
    for (int i = 0; i < n; i++)
        hb->ring[i] = cfg->ring ? cfg->ring[i] : i;
    if (phx_ft_ring_invert(n, hb->ring, hb->pos) < 0) {
        phx_ft_hb_destroy(hb);
        return PHX_EINVAL;
    }
    int p = hb->pos[hb->me];
    hb->emitter = hb->ring[(p - 1 + n) % n];
    hb->observer = hb->ring[(p + 1) % n];
    hb->hb_deadline = hb->susp_deadline = NO_DEADLINE;
    hb->peer_inc[hb->me] = hb->inc;
    hb->peer_inc_seen[hb->me] = 1;
    for (int i = 0; i < SEEN_SLOTS; i++)
        hb->seen[i].origin = -1;
    hb->topo_origin = -1;
    *out = hb;
    return 0;
}

void phx_ft_hb_destroy(phx_ft_hb_t *hb)
{
    if (!hb)
        return;
    phx_ft_bcast_destroy(hb->topo);
    free(hb->ring);
    free(hb->pos);
    free(hb->dead);
    free(hb->dead_list);
    free(hb->peer_inc);
    free(hb->peer_inc_seen);
    free(hb->tmp);
    free(hb->own);
    free(hb->buf);
    free(hb->hops);
    free(hb);
}

int phx_ft_hb_start(phx_ft_hb_t *hb, uint64_t now)
{
    if (hb->fenced)
        return PHX_EFENCED;
    if (hb->started)
        return PHX_EINVAL;
    hb->started = 1;
    if (hb->observer != hb->me)
        hb->hb_deadline = now;
    if (hb->emitter != hb->me)
        hb->susp_deadline = now + 2 * hb->delta;
    return 0;
}

/* ---- core ----------------------------------------------------------------- */

static void fence(phx_ft_hb_t *hb, const char *why, int by)
{
    if (hb->fenced)
        return;
    hb->fenced = 1;
    hb->hb_deadline = hb->susp_deadline = NO_DEADLINE;
    PHX_WARN("ft.hb", "fenced: %s (rank %d)", why, by);
    if (hb->env.on_fenced)
        hb->env.on_fenced(hb->env.ctx);
}

static void add_dead(phx_ft_hb_t *hb, int r, uint64_t now)
{
    if (hb->dead[r] || r == hb->me)
        return;
    hb->dead[r] = 1;
    hb->dead_list[hb->ndead++] = r;
    PHX_INFO("ft.hb", "rank %d dead (%d known)", r, hb->ndead);
    if (hb->env.on_dead)
        hb->env.on_dead(hb->env.ctx, r, now);
}

/* FindEmitter: nearest live ring predecessor; own rank if none. Walking from
 * our own position equals the seed's walk from the old emitter, since every
 * rank between the emitter and us is in D. */
static int find_emitter(const phx_ft_hb_t *hb)
{
    int p = hb->pos[hb->me];
    for (int i = 1; i < hb->n; i++) {
        int r = hb->ring[(p - i + hb->n) % hb->n];
        if (!hb->dead[r])
            return r;
    }
    return hb->me;
}

static int find_observer(const phx_ft_hb_t *hb)
{
    int p = hb->pos[hb->me];
    for (int i = 1; i < hb->n; i++) {
        int r = hb->ring[(p + i) % hb->n];
        if (!hb->dead[r])
            return r;
    }
    return hb->me;
}

/* After D grew: replace a dead emitter (T3's FindEmitter + NEWOBSERVER, with
 * the 2*delta grace the new emitter needs to hear from us and answer) and a
 * dead observer (so our heartbeats reach the rank that will watch us, which
 * also repairs the ring when we learn of the death before NEWOBSERVER). */
static void repair(phx_ft_hb_t *hb, uint64_t now)
{
    if (hb->dead[hb->emitter]) {
        hb->emitter = find_emitter(hb);
        if (hb->emitter == hb->me) {
            hb->susp_deadline = NO_DEADLINE;
        } else {
            send_simple(hb, hb->emitter, PHX_FT_HB_NEWOBSERVER);
            if (hb->started)
                hb->susp_deadline = now + 2 * hb->delta;
        }
    }
    if (hb->dead[hb->observer]) {
        hb->observer = find_observer(hb);
        if (hb->observer == hb->me) {
            hb->hb_deadline = NO_DEADLINE;
        } else if (hb->started) {
            send_simple(hb, hb->observer, PHX_FT_HB_HEARTBEAT);
            hb->hb_deadline = now + hb->eta;
        }
    }
}

static int topo_for(phx_ft_hb_t *hb, int origin, uint32_t seq, uint32_t ndead, const int *dl)
{
    if (hb->topo && hb->topo_origin == origin && hb->topo_seq == seq && hb->topo_ndead == ndead)
        return 0;
    phx_ft_bcast_t *t;
    int rc = phx_ft_bcast_create(hb->n, origin, dl, ndead, &t);
    if (rc < 0)
        return rc;
    phx_ft_bcast_destroy(hb->topo);
    hb->topo = t;
    hb->topo_origin = origin;
    hb->topo_seq = seq;
    hb->topo_ndead = ndead;
    return 0;
}

static struct seen *seen_find(phx_ft_hb_t *hb, int origin, uint32_t seq)
{
    for (int i = 0; i < SEEN_SLOTS; i++)
        if (hb->seen[i].origin == origin && hb->seen[i].seq == seq)
            return &hb->seen[i];
    return NULL;
}

static struct seen *seen_add(phx_ft_hb_t *hb, int origin, uint32_t seq)
{
    struct seen *s = &hb->seen[hb->seen_next++ % SEEN_SLOTS];
    *s = (struct seen){ origin, seq, 0 };
    return s;
}

/* Writes BCASTMSG into hb->buf with D = dl[0..nd); returns its length. */
static size_t encode_bcast(phx_ft_hb_t *hb, int origin, uint32_t seq, int dead, unsigned cube,
                           unsigned tree, const int *dl, uint32_t nd)
{
    uint8_t *p = hb->buf;
    put_hdr(hb, p, PHX_FT_HB_BCASTMSG);
    put32(p + 16, (uint32_t)origin);
    put32(p + 20, seq);
    put32(p + 24, (uint32_t)dead);
    p[28] = (uint8_t)cube;
    p[29] = (uint8_t)tree;
    p[30] = p[31] = 0;
    put32(p + 32, nd);
    for (uint32_t i = 0; i < nd; i++)
        put32(p + BC_FIXED + 4 * i, (uint32_t)dl[i]);
    return BC_FIXED + 4 * (size_t)nd;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static void send_hops(phx_ft_hb_t *hb, int nh, int origin, uint32_t seq, int dead,
                      const int *dl, uint32_t nd)
{
    for (int i = 0; i < nh; i++) {
        const phx_ft_bcast_hop_t *h = &hb->hops[i];
        /* A rank we know dead can neither relay nor needs the news; skipping
         * it is the same as sending into a crashed peer. */
        if (hb->dead[h->dst])
            continue;
        size_t len = encode_bcast(hb, origin, seq, dead, h->cube, h->tree, dl, nd);
        send_msg(hb, h->dst, PHX_FT_HB_BCASTMSG, hb->buf, len);
    }
}

/* BCASTMSG(dead, self, D): topology from our current D, frozen in the message. */
static void start_bcast(phx_ft_hb_t *hb, int dead)
{
    uint32_t nd = (uint32_t)hb->ndead;
    memcpy(hb->own, hb->dead_list, sizeof(int) * nd);
    qsort(hb->own, nd, sizeof(int), cmp_int);
    uint32_t seq = ++hb->bseq;
    int rc = topo_for(hb, hb->me, seq, nd, hb->own);
    if (rc < 0) {
        /* Only ENOMEM gets here. D is already updated locally but the others
         * will not hear of this death from us: say it loudly. */
        PHX_ERROR("ft.hb", "broadcast of rank %d death not sent: %s", dead, phx_strerror(rc));
        return;
    }
    hb->st.bcast_started++;
    seen_add(hb, hb->me, seq);
    int nh = phx_ft_bcast_start(hb->topo, hb->hops, hb->hops_cap);
    send_hops(hb, nh, hb->me, seq, dead, hb->own, nd);
}

/* T3 (and the same decision for a rank that came back with a new
 * incarnation): r joins D, the ring is repaired, the news is broadcast. */
static void declare(phx_ft_hb_t *hb, int r, uint64_t now)
{
    hb->st.declared++;
    add_dead(hb, r, now);
    repair(hb, now);
    start_bcast(hb, r);
}

uint64_t phx_ft_hb_next_deadline(const phx_ft_hb_t *hb)
{
    if (hb->fenced || !hb->started)
        return NO_DEADLINE;
    return hb->hb_deadline < hb->susp_deadline ? hb->hb_deadline : hb->susp_deadline;
}

int phx_ft_hb_tick(phx_ft_hb_t *hb, uint64_t now)
{
    if (hb->fenced)
        return PHX_EFENCED;
    uint64_t d0 = phx_ft_hb_next_deadline(hb);
    if (d0 == NO_DEADLINE || now < d0)
        return 0;
    if (now - d0 > hb->slack && hb->susp_deadline != NO_DEADLINE) {
        /* We were not running: the emitter's heartbeats may sit unread in
         * our socket, and our own silence may have got us declared dead.
         * Give the emitter a fresh delta; the heartbeat below reaches our
         * observer, which answers YOU_ARE_DEAD if we were declared. */
        hb->st.stalls++;
        if (hb->susp_deadline < now + hb->delta)
            hb->susp_deadline = now + hb->delta;
        PHX_WARN("ft.hb", "timer ran %llu ns late: stall, suspicion re-armed",
                 (unsigned long long)(now - d0));
    }
    if (hb->hb_deadline <= now) {                       /* T1 */
        send_simple(hb, hb->observer, PHX_FT_HB_HEARTBEAT);
        hb->hb_deadline = now + hb->eta;
    }
    if (hb->susp_deadline <= now)                       /* T3 */
        declare(hb, hb->emitter, now);
    return 0;
}

/* Validation of a BCASTMSG beyond its syntax: fills hb->tmp with its D and
 * checks that we are a relay of that copy. Sets *me_dead instead when the
 * origin's D holds us. Changes no protocol state (the topology cache is
 * invisible). */
static int bcast_check(phx_ft_hb_t *hb, const struct wire *w, int *me_dead)
{
    for (uint32_t i = 0; i < w->ndead; i++)
        hb->tmp[i] = (int)get32(w->list + 4 * i);
    *me_dead = bsearch(&hb->me, hb->tmp, w->ndead, sizeof(int), cmp_int) != NULL;
    if (*me_dead)
        return 0;
    if (w->origin == hb->me)
        return PHX_EPROTO;   /* our own broadcasts never come back */
    int rc = topo_for(hb, w->origin, w->seq, w->ndead, hb->tmp);
    if (rc < 0)
        return rc == PHX_EINVAL ? PHX_EPROTO : rc;
    if (phx_ft_bcast_forward(hb->topo, hb->me, w->cube, w->tree, NULL, 0) < 0)
        return PHX_EPROTO;   /* not a relay of that copy: forged or corrupt */
    return 0;
}

/* T5 on a checked message; hb->tmp and hb->topo are still those of w. */
static int on_bcast(phx_ft_hb_t *hb, const struct wire *w, uint64_t now)
{
    struct seen *s = seen_find(hb, w->origin, w->seq);
    uint64_t bit = 1ull << (w->cube * 32 + w->tree);
    if (s && (s->mask & bit)) {
        hb->st.bcast_dup++;
        return 0;
    }
    if (!s)
        s = seen_add(hb, w->origin, w->seq);
    s->mask |= bit;
    /* T5 merges `dead`; merging the origin's whole D is also safe (every
     * entry was decided by some observer) and lets a node that missed an
     * earlier broadcast of a cascade catch up. */
    int before = hb->ndead;
    add_dead(hb, w->dead, now);
    for (uint32_t i = 0; i < w->ndead; i++)
        add_dead(hb, hb->tmp[i], now);
    if (hb->ndead != before)
        repair(hb, now);
    int nh = phx_ft_bcast_forward(hb->topo, hb->me, w->cube, w->tree, hb->hops, hb->hops_cap);
    send_hops(hb, nh, w->origin, w->seq, w->dead, hb->tmp, w->ndead);
    return 0;
}

int phx_ft_hb_on_msg(phx_ft_hb_t *hb, int src, unsigned type, const void *buf, size_t len,
                     uint64_t now)
{
    if (hb->fenced)
        return PHX_EFENCED;
    if (src < 0 || src >= hb->n || src == hb->me || type == 0 || type >= PHX_FT_HB_NTYPES)
        return PHX_EPROTO;
    struct wire w;
    int rc = decode(hb, src, type, buf, len, &w);
    int me_dead = 0;
    if (rc == 0 && type == PHX_FT_HB_BCASTMSG)
        rc = bcast_check(hb, &w, &me_dead);
    if (rc < 0)
        return rc;
    /* Valid from here on. */
    hb->st.recv[type]++;
    if (hb->peer_inc_seen[src] && w.inc < hb->peer_inc[src]) {
        hb->st.stale_inc++;
        return 0;
    }
    int reborn = hb->peer_inc_seen[src] && w.inc > hb->peer_inc[src];
    hb->peer_inc[src] = w.inc;
    hb->peer_inc_seen[src] = 1;
    if (reborn && !hb->dead[src]) {
        /* A new incarnation proves the old process is gone; D is per rank,
         * so the rank is dead and the newcomer is told so below. */
        declare(hb, src, now);
    }
    if (hb->dead[src]) {
        if (type != PHX_FT_HB_YOU_ARE_DEAD)   /* never argue with the dead */
            send_you_are_dead(hb, src);
        return 0;
    }
    switch (type) {
    case PHX_FT_HB_HEARTBEAT:                                   /* T2 */
        if (src == hb->emitter && hb->started)
            hb->susp_deadline = now + hb->delta;
        else if (src != hb->emitter)
            hb->st.stray_hb++;
        return 0;
    case PHX_FT_HB_NEWOBSERVER:                                 /* T4 */
        hb->observer = src;
        if (hb->started) {
            send_simple(hb, src, PHX_FT_HB_HEARTBEAT);
            hb->hb_deadline = now + hb->eta;
        }
        return 0;
    case PHX_FT_HB_YOU_ARE_DEAD:
        fence(hb, "YOU_ARE_DEAD from", src);
        return PHX_EFENCED;
    case PHX_FT_HB_BCASTMSG:                                    /* T5 */
        if (me_dead) {
            fence(hb, "in the broadcast dead set of", w.origin);
            return PHX_EFENCED;
        }
        return on_bcast(hb, &w, now);
    }
    return PHX_EPROTO;
}

int phx_ft_hb_suspect(phx_ft_hb_t *hb, int rank, uint64_t now)
{
    if (hb->fenced)
        return PHX_EFENCED;
    if (rank < 0 || rank >= hb->n)
        return PHX_EINVAL;
    if (rank != hb->emitter || rank == hb->me || !hb->started)
        return 0;
    if (hb->susp_deadline <= now + hb->grace)
        return 0;
    hb->susp_deadline = now + hb->grace;
    hb->st.hints++;
    return 1;
}

/* ---- queries -------------------------------------------------------------- */

int phx_ft_hb_is_dead(const phx_ft_hb_t *hb, int r)
{
    return r >= 0 && r < hb->n && hb->dead[r];
}

int phx_ft_hb_dead_count(const phx_ft_hb_t *hb) { return hb->ndead; }

int phx_ft_hb_dead_list(const phx_ft_hb_t *hb, int *out, size_t cap)
{
    for (int i = 0; i < hb->ndead && (size_t)i < cap; i++)
        out[i] = hb->dead_list[i];
    return hb->ndead;
}

void phx_ft_hb_ack(phx_ft_hb_t *hb) { hb->nacked = hb->ndead; }
int phx_ft_hb_acked_count(const phx_ft_hb_t *hb) { return hb->nacked; }
int phx_ft_hb_new_count(const phx_ft_hb_t *hb) { return hb->ndead - hb->nacked; }

int phx_ft_hb_is_acked(const phx_ft_hb_t *hb, int r)
{
    if (!phx_ft_hb_is_dead(hb, r))
        return 0;
    for (int i = 0; i < hb->nacked; i++)
        if (hb->dead_list[i] == r)
            return 1;
    return 0;
}

int phx_ft_hb_emitter(const phx_ft_hb_t *hb) { return hb->emitter; }
int phx_ft_hb_observer(const phx_ft_hb_t *hb) { return hb->observer; }
int phx_ft_hb_is_fenced(const phx_ft_hb_t *hb) { return hb->fenced; }

uint32_t phx_ft_hb_incarnation(const phx_ft_hb_t *hb, int r)
{
    return r >= 0 && r < hb->n ? hb->peer_inc[r] : 0;
}

int phx_ft_hb_accept(const phx_ft_hb_t *hb, int r, uint32_t inc)
{
    if (r < 0 || r >= hb->n || hb->dead[r])
        return 0;
    return !hb->peer_inc_seen[r] || inc >= hb->peer_inc[r];
}

void phx_ft_hb_get_stats(const phx_ft_hb_t *hb, phx_ft_hb_stats_t *out) { *out = hb->st; }
