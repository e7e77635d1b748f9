/* Wire format (little endian through base/phx_wire.h, lengths exact,
 * see README.md):
 *   header  u8 version=1, u8 type, u16 view, u32 sender, u32 incarnation, u32 nranks
 *   HEARTBEAT                header, u32 ndead, u64 digest of D
 *   NEWOBSERVER              header
 *   YOU_ARE_DEAD             header, u32 target, u32 target incarnation
 *   BCASTMSG                 header, u32 origin, u32 seq, u32 dead, u8 cube,
 *                            u8 tree, u16 flags, u32 ndead, then
 *                            flags 0: u32 D[ndead] ascending (the origin's D)
 *                            flags 1 (compact): u64 digest of D, u32 ntail,
 *                            u32 T[ntail] ascending (its latest additions)
 *   DSET                     header, u8 flags (bit 0: reply wanted), u8 0,
 *                            u16 0, u32 ndead, u32 D[ndead] ascending
 * The sender field must equal the transport's source rank and nranks our
 * group size, so a frame routed to the wrong group or rank is rejected. */
#include "ft/hb/hb.h"

#include <stdlib.h>
#include <string.h>

#include "base/phx_err.h"
#include "base/phx_log.h"
#include "base/phx_wire.h"
#include "ft/hb/bcast.h"
#include "ft/hb/ring.h"

#define WIRE_VERSION 1
#define HDR_LEN      16   /* u8 ver, u8 type, u16 view, u32 sender, u32 inc, u32 nranks */
#define BEAT_LEN     (HDR_LEN + 12)   /* + u32 ndead, u64 digest */
#define YAD_LEN      (HDR_LEN + 8)    /* + u32 target, u32 target_inc */
#define DSET_REPLY   1u
#define BC_FIXED     (HDR_LEN + 20)   /* + origin, seq, dead, u8 cube, u8 tree, u16 flags, ndead */
#define BC_COMPACT   1u   /* BCASTMSG flag: |D|, digest and tail instead of D */
#define BC_COMPACT_EXTRA 12   /* u64 digest, u32 ntail */
#define TAIL_MAX     32   /* latest additions a compact copy carries */
#define LIST_MAX_DEFAULT 64
#define SEEN_SETS    64   /* broadcasts remembered: 64 sets of 4, by (origin, seq) */
#define SEEN_WAYS    4
#define SEEN_SLOTS   (SEEN_SETS * SEEN_WAYS)
#define TOPO_SLOTS   16   /* broadcasts in flight at once that keep their topology */
#define NO_DEADLINE  UINT64_MAX

struct seen {
    int origin;          /* -1: free */
    uint32_t seq;
    uint64_t mask;       /* bit cube*32+tree: copy already handled */
    uint8_t pulled;      /* compact: we asked a sender for its D once */
};

/* A cached topology: origin and its sorted D are the key. */
struct topo_slot {
    phx_ft_bcast_t *b;
    int origin;
    uint32_t ndead;
    int *dl;
};

struct phx_ft_hb_shared {
    int refs, n;
    int *ring, *pos;
    int *tmp;                   /* nranks ints: D of a decoded message */
    int *own;                   /* nranks ints: D of our own broadcast */
    uint8_t *buf;               /* encode scratch, BC_FIXED + 12 + 4*nranks */
    uint32_t *stk;              /* nranks: known-dead children a compact copy passes */
    phx_ft_bcast_hop_t *hops;   /* max fanout of any topology */
    size_t hops_cap;
    /* Round-robin: an entry lives for TOPO_SLOTS later builds, so one call
     * (at most two lookups) never loses the topology it holds. */
    struct topo_slot topo[TOPO_SLOTS];
    unsigned topo_next;
};

struct phx_ft_hb {
    phx_ft_hb_env_t env;
    phx_ft_hb_shared_t *sh;
    int n, me;
    uint32_t inc;
    uint16_t view;              /* membership view (cfg.view): other views are dropped */
    uint64_t delta, eta, grace, slack;
    int list_max;               /* cfg.bcast_list_max resolved; < 0: always compact */
    const int *ring, *pos;      /* sh's */
    int emitter, observer;
    int started, fenced;
    uint64_t hb_deadline, susp_deadline;
    /* T3 fires on the second tick past the deadline: the runtime reads its
     * sockets between two ticks, so a heartbeat that arrived while our
     * thread was late is seen before the emitter is declared. */
    int confirming;
    /* Deadline as armed by T2/T3/grace/hint: jitter extensions stop at
     * susp_nominal + delta, so suspicion never waits past 2 delta of
     * silence because our own thread ran late. */
    uint64_t susp_nominal;
    /* Stall detection: time of the latest call, and the last stall seen. */
    uint64_t last_call, stall_end, stall_len;

    uint64_t *dead;             /* bitset */
    /* D in join order (phx_ft_hb_dead_list, a compact copy's tail): u16
     * entries up to 65,536 ranks, u32 past. Under n/2 failures this list is
     * most of an instance (2n bytes, not 4n), which a simulator holding
     * every node of a 64k job pays n times; nothing on the heartbeat path
     * reads it. */
    void *dead_list;
    int ndead, dead_cap, dl_wide;
    uint64_t digest;            /* XOR of mix(r) over D: order-free set hash */

    /* Newest incarnation per rank heard from: open addressing, key rank+1
     * (0: empty), never deleted; a node hears from few ranks. */
    struct inc_ent { uint32_t key, inc; } *incs;
    uint32_t incs_cap, incs_len;

    uint32_t bseq;
    /* Set-associative, oldest of a set replaced: a lookup reads 4 entries,
     * not 256, which mattered with n/2 failures (every copy looks up). */
    struct seen seen[SEEN_SLOTS];
    uint8_t seen_next[SEEN_SETS];
    /* Topology of the broadcast being handled, owned by sh's cache and
     * valid for the current call only. */
    const phx_ft_bcast_t *topo;
    phx_ft_bcast_hop_t *hops;   /* sh's scratch */
    size_t hops_cap;
    int *tmp, *own;             /* sh's scratch */
    uint8_t *buf;               /* sh's scratch */
    phx_ft_hb_stats_t st;
};

struct wire {
    unsigned type;
    int sender;
    uint32_t inc;
    /* HEARTBEAT */
    uint32_t beat_ndead;
    uint64_t beat_digest;
    /* DSET */
    unsigned flags;
    /* YOU_ARE_DEAD */
    int target;
    uint32_t target_inc;
    /* BCASTMSG, DSET */
    int origin, dead;
    uint32_t seq;
    unsigned cube, tree, bflags;
    uint32_t ndead;        /* |D| (DSET, BCASTMSG: the origin's) */
    uint64_t digest;       /* compact BCASTMSG: the origin's D digest */
    uint32_t nlist;        /* entries in list: ndead, or a compact copy's tail */
    phx_wire_a32_t list;   /* nlist u32, validated ascending (in the input) */
};

/* splitmix64 finaliser: spreads rank numbers over 64 bits for the digest. */
static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

unsigned phx_ft_hb_frame_type(unsigned t)
{
    switch (t) {
    case PHX_FT_HB_HEARTBEAT: case PHX_FT_HB_NEWOBSERVER: case PHX_FT_HB_YOU_ARE_DEAD:
    case PHX_FT_HB_DSET:
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
    case PHX_FT_HB_DSET: return "DSET";
    default: return "UNKNOWN";
    }
}

/* ---- wire ---------------------------------------------------------------- */

static void put_hdr(const phx_ft_hb_t *hb, phx_wenc_t *e, unsigned type)
{
    phx_wenc_u8(e, WIRE_VERSION);
    phx_wenc_u8(e, (uint8_t)type);
    phx_wenc_u16(e, hb->view);
    phx_wenc_u32(e, (uint32_t)hb->me);
    phx_wenc_u32(e, hb->inc);
    phx_wenc_u32(e, (uint32_t)hb->n);
}

/* Reads a list of nd ranks: strictly ascending, each < n and != skip.
 * Returns it (aliasing the input), or an empty one and the sticky error. */
static phx_wire_a32_t take_list(phx_wdec_t *d, uint32_t nd, uint32_t n, uint32_t skip)
{
    phx_wire_a32_t none = { NULL, 0 };
    if (nd >= n) {
        d->err = PHX_EPROTO;
        return none;
    }
    phx_wire_a32_t l = phx_wdec_a32(d, nd);
    for (uint32_t i = 0; l.p && i < nd; i++) {
        uint32_t r = phx_wire_a32_u32(l, i);
        if (r >= n || r == skip || (i && r <= phx_wire_a32_u32(l, i - 1))) {
            d->err = PHX_EPROTO;
            return none;
        }
    }
    return l;
}

static int list_has(phx_wire_a32_t l, uint32_t nd, uint32_t r)
{
    for (uint32_t i = 0; i < nd; i++)
        if (phx_wire_a32_u32(l, i) == r)
            return 1;
    return 0;
}

/* Full structural validation; touches no state. 1: valid frame of another
 * membership view (a rank rejoined since, or not yet here): not ours. */
static int decode(const phx_ft_hb_t *hb, int src, unsigned type, const uint8_t *p, size_t len,
                  struct wire *w)
{
    if (!p)
        return PHX_EPROTO;
    phx_wdec_t d;
    phx_wdec_init(&d, p, len);
    unsigned ver = phx_wdec_u8(&d), t = phx_wdec_u8(&d), view = phx_wdec_u16(&d);
    uint32_t sender = phx_wdec_u32(&d);
    memset(w, 0, sizeof(*w));
    w->inc = phx_wdec_u32(&d);
    uint32_t n = phx_wdec_u32(&d);
    if (d.err || ver != WIRE_VERSION || t != type || sender != (uint32_t)src || n != (uint32_t)hb->n)
        return PHX_EPROTO;
    if (view != hb->view)
        return 1;
    w->type = type;
    w->sender = src;
    switch (type) {
    case PHX_FT_HB_HEARTBEAT:
        w->beat_ndead = phx_wdec_u32(&d);
        w->beat_digest = phx_wdec_u64(&d);
        break;
    case PHX_FT_HB_NEWOBSERVER:
        break;
    case PHX_FT_HB_YOU_ARE_DEAD:
        if (phx_wdec_u32(&d) != (uint32_t)hb->me)
            return PHX_EPROTO;
        w->target = hb->me;
        w->target_inc = phx_wdec_u32(&d);
        break;
    case PHX_FT_HB_BCASTMSG: {
        uint32_t origin = phx_wdec_u32(&d);
        w->seq = phx_wdec_u32(&d);
        uint32_t dead = phx_wdec_u32(&d);
        w->cube = phx_wdec_u8(&d);
        w->tree = phx_wdec_u8(&d);
        w->bflags = phx_wdec_u16(&d);
        uint32_t nd = phx_wdec_u32(&d), nl = nd;
        if (w->bflags & BC_COMPACT) {
            w->digest = phx_wdec_u64(&d);
            nl = phx_wdec_u32(&d);
        }
        if (d.err || origin >= n || dead >= n || (w->bflags & ~BC_COMPACT) || nd == 0 ||
            nd >= n || nl == 0 || nl > nd)
            return PHX_EPROTO;
        w->list = take_list(&d, nl, n, origin);   /* origin is alive */
        if (!w->list.p || !list_has(w->list, nl, dead))
            return PHX_EPROTO;
        w->origin = (int)origin;
        w->dead = (int)dead;
        w->ndead = nd;
        w->nlist = nl;
        break;
    }
    case PHX_FT_HB_DSET: {
        w->flags = phx_wdec_u8(&d);
        unsigned pad = phx_wdec_u8(&d), pad2 = phx_wdec_u16(&d);
        uint32_t nd = phx_wdec_u32(&d);
        if (d.err || pad || pad2 || (w->flags & ~DSET_REPLY))
            return PHX_EPROTO;
        w->list = take_list(&d, nd, n, (uint32_t)src);   /* the sender is alive */
        w->ndead = w->nlist = nd;
        break;
    }
    default:
        return PHX_EPROTO;
    }
    return phx_wdec_end(&d, 1) < 0 ? PHX_EPROTO : 0;
}

static void send_msg(phx_ft_hb_t *hb, int dst, unsigned type, const uint8_t *buf, size_t len)
{
    hb->st.sent[type]++;
    hb->env.send(hb->env.ctx, dst, type, buf, len);
}

static void send_simple(phx_ft_hb_t *hb, int dst, unsigned type)
{
    uint8_t b[BEAT_LEN];
    phx_wenc_t e;
    phx_wenc_init(&e, b, sizeof b);
    put_hdr(hb, &e, type);
    if (type == PHX_FT_HB_HEARTBEAT) {   /* D's digest: a mismatch starts a DSET exchange */
        phx_wenc_u32(&e, (uint32_t)hb->ndead);
        phx_wenc_u64(&e, hb->digest);
    }
    send_msg(hb, dst, type, b, (size_t)phx_wenc_end(&e));
}

static void send_you_are_dead(phx_ft_hb_t *hb, int dst)
{
    uint8_t b[YAD_LEN];
    phx_wenc_t e;
    phx_wenc_init(&e, b, sizeof b);
    put_hdr(hb, &e, PHX_FT_HB_YOU_ARE_DEAD);
    phx_wenc_u32(&e, (uint32_t)dst);
    phx_wenc_u32(&e, phx_ft_hb_incarnation(hb, dst));
    send_msg(hb, dst, PHX_FT_HB_YOU_ARE_DEAD, b, (size_t)phx_wenc_end(&e));
}

/* ---- lifecycle ------------------------------------------------------------ */

int phx_ft_hb_shared_create(int n, const int *ring, phx_ft_hb_shared_t **out)
{
    if (!out || n < 1 || n > (1 << 24))
        return PHX_EINVAL;
    phx_ft_hb_shared_t *s = calloc(1, sizeof(*s));
    if (!s)
        return PHX_ENOMEM;
    s->refs = 1;
    s->n = n;
    s->ring = malloc(sizeof(int) * (size_t)n);
    s->pos = malloc(sizeof(int) * (size_t)n);
    s->tmp = malloc(sizeof(int) * (size_t)n);
    s->own = malloc(sizeof(int) * (size_t)n);
    s->buf = malloc(BC_FIXED + BC_COMPACT_EXTRA + 4 * (size_t)n);
    s->stk = malloc(sizeof(uint32_t) * (size_t)n);
    s->hops_cap = 2 * 32;
    s->hops = malloc(sizeof(*s->hops) * s->hops_cap);
    if (!s->ring || !s->pos || !s->tmp || !s->own || !s->buf || !s->stk || !s->hops) {
        phx_ft_hb_shared_release(s);
        return PHX_ENOMEM;
    }
    for (int i = 0; i < n; i++)
        s->ring[i] = ring ? ring[i] : i;
    if (phx_ft_ring_invert(n, s->ring, s->pos) < 0) {
        phx_ft_hb_shared_release(s);
        return PHX_EINVAL;
    }
    *out = s;
    return 0;
}

void phx_ft_hb_shared_release(phx_ft_hb_shared_t *s)
{
    if (!s || --s->refs > 0)
        return;
    for (int i = 0; i < TOPO_SLOTS; i++) {
        phx_ft_bcast_destroy(s->topo[i].b);
        free(s->topo[i].dl);
    }
    free(s->ring);
    free(s->pos);
    free(s->tmp);
    free(s->own);
    free(s->buf);
    free(s->stk);
    free(s->hops);
    free(s);
}

static uint32_t inc_slot(const phx_ft_hb_t *hb, int r)
{
    uint32_t mask = hb->incs_cap - 1, i = ((uint32_t)r * 0x9E3779B1u) & mask;
    while (hb->incs[i].key && hb->incs[i].key != (uint32_t)r + 1)
        i = (i + 1) & mask;
    return i;
}

/* Sets r's newest incarnation; PHX_ENOMEM leaves the table unchanged. */
static int inc_put(phx_ft_hb_t *hb, int r, uint32_t inc)
{
    uint32_t i = inc_slot(hb, r);
    if (!hb->incs[i].key && 2 * (hb->incs_len + 1) > hb->incs_cap) {
        struct inc_ent *old = hb->incs;
        uint32_t ocap = hb->incs_cap;
        struct inc_ent *t = calloc(2 * (size_t)ocap, sizeof(*t));
        if (!t)
            return PHX_ENOMEM;
        hb->incs = t;
        hb->incs_cap = 2 * ocap;
        for (uint32_t j = 0; j < ocap; j++)
            if (old[j].key)
                hb->incs[inc_slot(hb, (int)old[j].key - 1)] = old[j];
        free(old);
        i = inc_slot(hb, r);
    }
    if (!hb->incs[i].key)
        hb->incs_len++;
    hb->incs[i] = (struct inc_ent){ (uint32_t)r + 1, inc };
    return 0;
}

/* 1 and *inc if r was heard from. */
static int inc_get(const phx_ft_hb_t *hb, int r, uint32_t *inc)
{
    const struct inc_ent *e = &hb->incs[inc_slot(hb, r)];
    *inc = e->inc;
    return e->key != 0;
}

static int dl_get(const phx_ft_hb_t *hb, int i)
{
    return hb->dl_wide ? (int)((const uint32_t *)hb->dead_list)[i] : ((const uint16_t *)hb->dead_list)[i];
}

static int is_dead(const phx_ft_hb_t *hb, int r)
{
    return (hb->dead[r >> 6] >> (r & 63)) & 1;
}

int phx_ft_hb_create(const phx_ft_hb_cfg_t *cfg, const phx_ft_hb_env_t *env, phx_ft_hb_t **out)
{
    if (!cfg || !env || !env->send || !out || cfg->nranks < 1 || cfg->nranks > (1 << 24) ||
        cfg->rank < 0 || cfg->rank >= cfg->nranks || cfg->delta_ns == 0 ||
        (cfg->shared && cfg->shared->n != cfg->nranks))
        return PHX_EINVAL;
    phx_ft_hb_t *hb = calloc(1, sizeof(*hb));
    if (!hb)
        return PHX_ENOMEM;
    int n = cfg->nranks;
    hb->env = *env;
    hb->n = n;
    hb->me = cfg->rank;
    hb->inc = cfg->incarnation;
    hb->view = cfg->view;
    hb->delta = cfg->delta_ns;
    hb->eta = cfg->eta_ns ? cfg->eta_ns : (cfg->delta_ns / 10 ? cfg->delta_ns / 10 : 1);
    hb->grace = cfg->hint_grace_ns ? cfg->hint_grace_ns : cfg->delta_ns / 2;
    hb->slack = cfg->stall_slack_ns ? cfg->stall_slack_ns : hb->delta / 2;
    hb->list_max = cfg->bcast_list_max ? (cfg->bcast_list_max < 0 ? -1 : cfg->bcast_list_max)
                                       : LIST_MAX_DEFAULT;
    if (cfg->shared) {
        hb->sh = cfg->shared;
        hb->sh->refs++;
    } else {
        int rc = phx_ft_hb_shared_create(n, cfg->ring, &hb->sh);
        if (rc < 0) {
            free(hb);
            return rc;
        }
    }
    hb->ring = hb->sh->ring;
    hb->pos = hb->sh->pos;
    hb->tmp = hb->sh->tmp;
    hb->own = hb->sh->own;
    hb->buf = hb->sh->buf;
    hb->hops = hb->sh->hops;
    hb->hops_cap = hb->sh->hops_cap;
    hb->dl_wide = n > 65536;
    hb->dead = calloc(((size_t)n + 63) / 64, sizeof(uint64_t));
    hb->incs_cap = 16;
    hb->incs = calloc(hb->incs_cap, sizeof(*hb->incs));
    if (!hb->dead || !hb->incs || inc_put(hb, hb->me, hb->inc) < 0) {
        phx_ft_hb_destroy(hb);
        return PHX_ENOMEM;
    }
    int p = hb->pos[hb->me];
    hb->emitter = hb->ring[(p - 1 + n) % n];
    hb->observer = hb->ring[(p + 1) % n];
    hb->hb_deadline = hb->susp_deadline = NO_DEADLINE;
    for (int i = 0; i < SEEN_SLOTS; i++)
        hb->seen[i].origin = -1;
    *out = hb;
    return 0;
}

void phx_ft_hb_destroy(phx_ft_hb_t *hb)
{
    if (!hb)
        return;
    phx_ft_hb_shared_release(hb->sh);
    free(hb->dead);
    free(hb->dead_list);
    free(hb->incs);
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
        hb->susp_deadline = hb->susp_nominal = now + 2 * hb->delta;
    hb->last_call = now;
    return 0;
}

static int find_emitter(const phx_ft_hb_t *hb);
static int find_observer(const phx_ft_hb_t *hb);
static void add_dead_quiet(phx_ft_hb_t *hb, int r);

int phx_ft_hb_preset_dead(phx_ft_hb_t *hb, const int *ranks, int k)
{
    if (hb->started || hb->fenced || k < 0 || (k && !ranks))
        return PHX_EINVAL;
    for (int i = 0; i < k; i++)
        if (ranks[i] < 0 || ranks[i] >= hb->n || ranks[i] == hb->me)
            return PHX_EINVAL;
    for (int i = 0; i < k; i++)
        if (!is_dead(hb, ranks[i]))
            add_dead_quiet(hb, ranks[i]);
    hb->emitter = find_emitter(hb);
    hb->observer = find_observer(hb);
    return 0;
}

int phx_ft_hb_preset_inc(phx_ft_hb_t *hb, int rank, uint32_t inc)
{
    uint32_t known;
    if (hb->started || rank < 0 || rank >= hb->n || rank == hb->me)
        return PHX_EINVAL;
    return inc_get(hb, rank, &known) && known >= inc ? 0 : inc_put(hb, rank, inc);
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

static void arm_susp(phx_ft_hb_t *hb, uint64_t t)
{
    hb->susp_deadline = hb->susp_nominal = t;
    hb->confirming = 0;
}

static void add_dead_quiet(phx_ft_hb_t *hb, int r)
{
    if (hb->ndead == hb->dead_cap) {
        int cap = hb->dead_cap ? 2 * hb->dead_cap : 16;
        void *l = realloc(hb->dead_list, (hb->dl_wide ? 4 : 2) * (size_t)cap);
        if (!l) {
            /* D may not lose a member nor the callers a way to say so: a
             * detector that forgets a death is worse than none. */
            PHX_ERROR("ft.hb", "out of memory recording rank %d dead", r);
            abort();
        }
        hb->dead_list = l;
        hb->dead_cap = cap;
    }
    hb->dead[r >> 6] |= 1ull << (r & 63);
    if (hb->dl_wide)
        ((uint32_t *)hb->dead_list)[hb->ndead++] = (uint32_t)r;
    else
        ((uint16_t *)hb->dead_list)[hb->ndead++] = (uint16_t)r;
    hb->digest ^= mix((uint64_t)r);
}

static void add_dead(phx_ft_hb_t *hb, int r, uint64_t now)
{
    if (is_dead(hb, r) || r == hb->me)
        return;
    add_dead_quiet(hb, r);
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
        if (!is_dead(hb, r))
            return r;
    }
    return hb->me;
}

static int find_observer(const phx_ft_hb_t *hb)
{
    int p = hb->pos[hb->me];
    for (int i = 1; i < hb->n; i++) {
        int r = hb->ring[(p + i) % hb->n];
        if (!is_dead(hb, r))
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
    if (is_dead(hb, hb->emitter)) {
        hb->emitter = find_emitter(hb);
        if (hb->emitter == hb->me) {
            arm_susp(hb, NO_DEADLINE);
        } else {
            send_simple(hb, hb->emitter, PHX_FT_HB_NEWOBSERVER);
            if (hb->started)
                arm_susp(hb, now + 2 * hb->delta);
        }
    }
    if (is_dead(hb, hb->observer)) {
        hb->observer = find_observer(hb);
        if (hb->observer == hb->me) {
            hb->hb_deadline = NO_DEADLINE;
        } else if (hb->started) {
            send_simple(hb, hb->observer, PHX_FT_HB_HEARTBEAT);
            hb->hb_deadline = now + hb->eta;
        }
    }
}

/* Points hb->topo at the topology of (origin, dl[0..ndead) sorted), from the
 * shared cache or built into it. */
static int topo_for(phx_ft_hb_t *hb, int origin, uint32_t ndead, const int *dl)
{
    phx_ft_hb_shared_t *sh = hb->sh;
    for (int i = 0; i < TOPO_SLOTS; i++) {
        struct topo_slot *t = &sh->topo[i];
        if (t->b && t->origin == origin && t->ndead == ndead &&
            (!ndead || !memcmp(t->dl, dl, sizeof(int) * ndead))) {
            hb->topo = t->b;
            return 0;
        }
    }
    phx_ft_bcast_t *b;
    int rc = phx_ft_bcast_create(hb->n, origin, dl, ndead, &b);
    if (rc < 0)
        return rc;
    int *copy = malloc(sizeof(int) * (ndead ? ndead : 1));
    if (!copy) {
        phx_ft_bcast_destroy(b);
        return PHX_ENOMEM;
    }
    if (ndead)
        memcpy(copy, dl, sizeof(int) * ndead);
    struct topo_slot *t = &sh->topo[sh->topo_next++ % TOPO_SLOTS];
    phx_ft_bcast_destroy(t->b);
    free(t->dl);
    *t = (struct topo_slot){ b, origin, ndead, copy };
    hb->topo = b;
    return 0;
}

static struct seen *seen_set(phx_ft_hb_t *hb, int origin, uint32_t seq, unsigned *set)
{
    *set = (unsigned)(mix(((uint64_t)(uint32_t)origin << 32) | seq) % SEEN_SETS);
    return &hb->seen[*set * SEEN_WAYS];
}

static struct seen *seen_find(phx_ft_hb_t *hb, int origin, uint32_t seq)
{
    unsigned set;
    struct seen *w = seen_set(hb, origin, seq, &set);
    for (int i = 0; i < SEEN_WAYS; i++)
        if (w[i].origin == origin && w[i].seq == seq)
            return &w[i];
    return NULL;
}

static struct seen *seen_add(phx_ft_hb_t *hb, int origin, uint32_t seq)
{
    unsigned set;
    struct seen *s = seen_set(hb, origin, seq, &set) + hb->seen_next[set]++ % SEEN_WAYS;
    *s = (struct seen){ origin, seq, 0, 0 };
    return s;
}

/* One BCASTMSG's fields but (cube, tree): the same in every copy. */
struct bc_out {
    int origin, dead;
    uint32_t seq;
    unsigned flags;
    uint32_t ndead;      /* |D| of the origin */
    uint64_t digest;     /* compact only */
    const int *list;     /* D (full) or the tail (compact), ascending */
    uint32_t nl;
};

/* Writes BCASTMSG into hb->buf; returns its length. hb->buf holds
 * BC_FIXED + BC_COMPACT_EXTRA + 4 * nranks: any BCASTMSG or DSET. */
static size_t encode_bcast(phx_ft_hb_t *hb, const struct bc_out *o, unsigned cube, unsigned tree)
{
    phx_wenc_t e;
    phx_wenc_init(&e, hb->buf, BC_FIXED + BC_COMPACT_EXTRA + 4 * (size_t)hb->n);
    put_hdr(hb, &e, PHX_FT_HB_BCASTMSG);
    phx_wenc_u32(&e, (uint32_t)o->origin);
    phx_wenc_u32(&e, o->seq);
    phx_wenc_u32(&e, (uint32_t)o->dead);
    phx_wenc_u8(&e, (uint8_t)cube);
    phx_wenc_u8(&e, (uint8_t)tree);
    phx_wenc_u16(&e, (uint16_t)o->flags);
    phx_wenc_u32(&e, o->ndead);
    if (o->flags & BC_COMPACT) {
        phx_wenc_u64(&e, o->digest);
        phx_wenc_u32(&e, o->nl);
    }
    for (uint32_t i = 0; i < o->nl; i++)
        phx_wenc_u32(&e, (uint32_t)o->list[i]);
    return (size_t)phx_wenc_end(&e);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static void send_copy(phx_ft_hb_t *hb, const struct bc_out *o, const phx_ft_bcast_hop_t *h)
{
    size_t len = encode_bcast(hb, o, h->cube, h->tree);
    send_msg(hb, h->dst, PHX_FT_HB_BCASTMSG, hb->buf, len);
}

/* A compact copy's topology holds every rank, dead ones included: the copy
 * a known-dead child x would have relayed goes to x's children instead,
 * recursively, so the tree's paths stay the same paths less their dead
 * nodes (still node-disjoint). Each rank is stacked at most once per call. */
static void pass_dead(phx_ft_hb_t *hb, const struct bc_out *o, int x, unsigned cube, unsigned tree)
{
    uint32_t *stk = hb->sh->stk;
    size_t sp = 0;
    stk[sp++] = (uint32_t)x;
    while (sp) {
        int y = (int)stk[--sp];
        hb->st.bcast_bypass++;
        phx_ft_bcast_hop_t loc[32];
        int m = phx_ft_bcast_forward(hb->topo, y, cube, tree, loc, 32);
        for (int j = 0; j < m && j < 32; j++) {
            if (is_dead(hb, loc[j].dst))
                stk[sp++] = (uint32_t)loc[j].dst;
            else
                send_copy(hb, o, &loc[j]);
        }
    }
}

static void send_hops(phx_ft_hb_t *hb, int nh, const struct bc_out *o)
{
    for (int i = 0; i < nh; i++) {
        const phx_ft_bcast_hop_t *h = &hb->hops[i];
        if (!is_dead(hb, h->dst))
            send_copy(hb, o, h);
        else if (o->flags & BC_COMPACT)
            pass_dead(hb, o, h->dst, h->cube, h->tree);
        /* Else the origin's topology has a member we know dead: it can
         * neither relay nor needs the news; skipping it is the same as
         * sending into a crashed peer. */
    }
}

/* BCASTMSG(dead, self, D): topology from our current D, frozen in the
 * message; past list_max the compact form (topology of all ranks). */
static void start_bcast(phx_ft_hb_t *hb, int dead)
{
    uint32_t nd = (uint32_t)hb->ndead, nl = nd;
    int compact = hb->list_max < 0 || nd > (uint32_t)hb->list_max;
    if (compact)
        nl = nd < TAIL_MAX ? nd : TAIL_MAX;
    for (uint32_t i = 0; i < nl; i++)
        hb->own[i] = dl_get(hb, (int)(nd - nl + i));
    qsort(hb->own, nl, sizeof(int), cmp_int);
    uint32_t seq = ++hb->bseq;
    int rc = compact ? topo_for(hb, hb->me, 0, NULL) : topo_for(hb, hb->me, nd, hb->own);
    if (rc < 0) {
        /* Only ENOMEM gets here. D is already updated locally but the others
         * will not hear of this death from us: say it loudly. */
        PHX_ERROR("ft.hb", "broadcast of rank %d death not sent: %s", dead, phx_strerror(rc));
        return;
    }
    hb->st.bcast_started++;
    hb->st.bcast_compact += (uint64_t)compact;
    seen_add(hb, hb->me, seq);
    struct bc_out o = { hb->me, dead, seq, compact ? BC_COMPACT : 0, nd, hb->digest, hb->own, nl };
    int nh = phx_ft_bcast_start(hb->topo, hb->hops, hb->hops_cap);
    send_hops(hb, nh, &o);
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

/* Every entry point starts here; gap = time since the previous call.
 * A gap past the stall slack (default delta/2), while a deadline was
 * pending, means this process was not running (SIGSTOP, swap, VM pause):
 * the emitter's heartbeats may sit unread and its silence is no evidence,
 * so it gets a fresh delta. The heartbeat we send next reaches our
 * observer, which answers YOU_ARE_DEAD if it declared us meanwhile.
 * A shorter gap past 2 eta is a late thread on a loaded box, where the
 * emitter's thread is likely late too: the deadline may move to now +
 * delta, but never past its nominal value + delta. Suspicion thus comes
 * after delta of silence, and by 2 delta whatever the scheduling. */
static void note_call(phx_ft_hb_t *hb, uint64_t now)
{
    if (hb->started && hb->last_call && phx_ft_hb_next_deadline(hb) != NO_DEADLINE) {
        uint64_t gap = now > hb->last_call ? now - hb->last_call : 0;
        uint64_t to = now + hb->delta;
        if (gap > hb->slack) {
            hb->st.stalls++;
            hb->stall_end = now;
            hb->stall_len = gap;
            PHX_WARN("ft.hb", "not running for %llu ms: stall, emitter gets a fresh delta",
                     (unsigned long long)(gap / 1000000));
        } else if (gap > 2 * hb->eta) {
            hb->st.late++;
            if (to > hb->susp_nominal + hb->delta)
                to = hb->susp_nominal + hb->delta;
        } else {
            to = 0;
        }
        if (hb->susp_deadline != NO_DEADLINE && hb->susp_deadline < to) {
            hb->susp_deadline = to;
            hb->confirming = 0;
        }
    }
    if (now > hb->last_call)
        hb->last_call = now;
}

int phx_ft_hb_tick(phx_ft_hb_t *hb, uint64_t now)
{
    if (hb->fenced)
        return PHX_EFENCED;
    note_call(hb, now);
    if (!hb->started)
        return 0;
    if (hb->hb_deadline <= now) {                       /* T1 */
        send_simple(hb, hb->observer, PHX_FT_HB_HEARTBEAT);
        hb->hb_deadline = now + hb->eta;
    }
    if (hb->susp_deadline <= now) {                     /* T3 */
        if (!hb->confirming) {
            /* Declare on the next tick, after the runtime has read what
             * arrived while we were late; a heartbeat re-arms instead. */
            hb->confirming = 1;
            hb->susp_deadline = now + 1;
        } else {
            declare(hb, hb->emitter, now);
        }
    }
    return 0;
}

int phx_ft_hb_in_doubt(const phx_ft_hb_t *hb, uint64_t now)
{
    uint64_t could = hb->delta > 2 * hb->eta ? hb->delta - 2 * hb->eta : 0;
    return hb->stall_end && hb->stall_len >= could && now >= hb->stall_end &&
           now - hb->stall_end <= 2 * hb->delta;
}

/* Validation of a BCASTMSG beyond its syntax: fills hb->tmp with its D and
 * checks that we are a relay of that copy. Sets *me_dead instead when the
 * origin's D holds us. Changes no protocol state (the topology cache is
 * invisible). */
static int bcast_check(phx_ft_hb_t *hb, const struct wire *w, int *me_dead)
{
    for (uint32_t i = 0; i < w->nlist; i++)
        hb->tmp[i] = (int)phx_wire_a32_u32(w->list, i);
    *me_dead = bsearch(&hb->me, hb->tmp, w->nlist, sizeof(int), cmp_int) != NULL;
    if (*me_dead)
        return 0;
    if (w->origin == hb->me)
        return PHX_EPROTO;   /* our own broadcasts never come back */
    int rc = (w->bflags & BC_COMPACT) ? topo_for(hb, w->origin, 0, NULL)
                                      : topo_for(hb, w->origin, w->ndead, hb->tmp);
    if (rc < 0)
        return rc == PHX_EINVAL ? PHX_EPROTO : rc;
    if (phx_ft_bcast_forward(hb->topo, hb->me, w->cube, w->tree, NULL, 0) < 0)
        return PHX_EPROTO;   /* not a relay of that copy: forged or corrupt */
    return 0;
}

/* Our whole D, sorted, to dst: the repair path past the broadcast's
 * tolerance. Heartbeats carry D's digest; a mismatch makes the receiver
 * send its D with DSET_REPLY, and the sender answers with the union if it
 * knew more. So every live ring edge equalises its two ends, and the union
 * spreads around the live ring whatever number of broadcast copies died. */
static void send_dset(phx_ft_hb_t *hb, int dst, unsigned flags)
{
    uint32_t nd = 0;
    for (int wi = 0; wi < (hb->n + 63) / 64; wi++)   /* ascending: the bitset's order */
        for (uint64_t w = hb->dead[wi]; w; w &= w - 1)
            hb->own[nd++] = wi * 64 + __builtin_ctzll(w);
    phx_wenc_t e;
    phx_wenc_init(&e, hb->buf, BC_FIXED + BC_COMPACT_EXTRA + 4 * (size_t)hb->n);
    put_hdr(hb, &e, PHX_FT_HB_DSET);
    phx_wenc_u8(&e, (uint8_t)flags);
    phx_wenc_u8(&e, 0);
    phx_wenc_u16(&e, 0);
    phx_wenc_u32(&e, nd);
    for (uint32_t i = 0; i < nd; i++)
        phx_wenc_u32(&e, (uint32_t)hb->own[i]);
    send_msg(hb, dst, PHX_FT_HB_DSET, hb->buf, (size_t)phx_wenc_end(&e));
}

/* Merges a D list from the wire (validated); 1 if ours grew. */
static int merge_list(phx_ft_hb_t *hb, phx_wire_a32_t l, uint32_t nd, uint64_t now)
{
    int before = hb->ndead;
    for (uint32_t i = 0; i < nd; i++)
        add_dead(hb, (int)phx_wire_a32_u32(l, i), now);
    if (hb->ndead == before)
        return 0;
    repair(hb, now);
    return 1;
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
    add_dead(hb, w->dead, now);   /* first: it is the news of this broadcast */
    if (!merge_list(hb, w->list, w->nlist, now) && hb->ndead != before)
        repair(hb, now);
    int nh = phx_ft_bcast_forward(hb->topo, hb->me, w->cube, w->tree, hb->hops, hb->hops_cap);
    struct bc_out o = { w->origin, w->dead, w->seq, w->bflags, w->ndead, w->digest, hb->tmp,
                        w->nlist };
    send_hops(hb, nh, &o);
    /* A compact copy's |D| and digest say whether we know less than its
     * origin did (the tail covers only its latest news): then the sender,
     * which merged at least the tail and usually knows more, gets our D
     * with "reply wanted" and answers with its own if it knew more. Once
     * per broadcast; heartbeat digests still repair whatever is left. */
    if ((w->bflags & BC_COMPACT) && !s->pulled &&
        ((uint32_t)hb->ndead < w->ndead ||
         ((uint32_t)hb->ndead == w->ndead && hb->digest != w->digest))) {
        s->pulled = 1;
        hb->st.bcast_pull++;
        send_dset(hb, w->sender, DSET_REPLY);
    }
    return 0;
}

int phx_ft_hb_on_msg(phx_ft_hb_t *hb, int src, unsigned type, const void *buf, size_t len,
                     uint64_t now)
{
    if (hb->fenced)
        return PHX_EFENCED;
    if (src < 0 || src >= hb->n || src == hb->me || type == 0 || type >= PHX_FT_HB_NTYPES)
        return PHX_EPROTO;
    note_call(hb, now);
    struct wire w;
    int rc = decode(hb, src, type, buf, len, &w);
    if (rc == 1) {
        hb->st.stale_view++;
        return 0;
    }
    int me_dead = 0;
    if (rc == 0 && type == PHX_FT_HB_BCASTMSG)
        rc = bcast_check(hb, &w, &me_dead);
    if (rc < 0)
        return rc;
    /* Valid from here on. */
    hb->st.recv[type]++;
    uint32_t known;
    int seen = inc_get(hb, src, &known);
    if (seen && w.inc < known) {
        hb->st.stale_inc++;
        return 0;
    }
    int reborn = seen && w.inc > known;
    if ((!seen || reborn) && (rc = inc_put(hb, src, w.inc)) < 0)
        return rc;
    if (reborn && !is_dead(hb, src)) {
        /* A new incarnation proves the old process is gone; D is per rank,
         * so the rank is dead and the newcomer is told so below. */
        declare(hb, src, now);
    }
    if (is_dead(hb, src)) {
        if (type != PHX_FT_HB_YOU_ARE_DEAD)   /* never argue with the dead */
            send_you_are_dead(hb, src);
        return 0;
    }
    switch (type) {
    case PHX_FT_HB_HEARTBEAT:                                   /* T2 */
        if (src == hb->emitter && hb->started)
            arm_susp(hb, now + hb->delta);
        else if (src != hb->emitter)
            hb->st.stray_hb++;
        if (w.beat_ndead != (uint32_t)hb->ndead || w.beat_digest != hb->digest)
            send_dset(hb, src, DSET_REPLY);
        return 0;
    case PHX_FT_HB_DSET:
        if (list_has(w.list, w.ndead, (uint32_t)hb->me)) {
            fence(hb, "in the dead set sent by", src);
            return PHX_EFENCED;
        }
        if (merge_list(hb, w.list, w.ndead, now))
            hb->st.dset_merged++;
        if ((w.flags & DSET_REPLY) && (uint32_t)hb->ndead > w.ndead)
            send_dset(hb, src, 0);
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

static int suspect_within(phx_ft_hb_t *hb, int rank, uint64_t now, uint64_t grace)
{
    if (hb->fenced)
        return PHX_EFENCED;
    if (rank < 0 || rank >= hb->n)
        return PHX_EINVAL;
    note_call(hb, now);
    if (rank != hb->emitter || rank == hb->me || !hb->started)
        return 0;
    if (hb->susp_deadline <= now + grace)
        return 0;
    arm_susp(hb, now + grace);
    hb->st.hints++;
    return 1;
}

int phx_ft_hb_suspect(phx_ft_hb_t *hb, int rank, uint64_t now)
{
    return suspect_within(hb, rank, now, hb->grace);
}

int phx_ft_hb_suspect_gone(phx_ft_hb_t *hb, int rank, uint64_t now)
{
    return suspect_within(hb, rank, now, 0);
}

/* ---- queries -------------------------------------------------------------- */

int phx_ft_hb_is_dead(const phx_ft_hb_t *hb, int r)
{
    return r >= 0 && r < hb->n && is_dead(hb, r);
}

int phx_ft_hb_dead_count(const phx_ft_hb_t *hb) { return hb->ndead; }

int phx_ft_hb_dead_list(const phx_ft_hb_t *hb, int *out, size_t cap)
{
    for (int i = 0; i < hb->ndead && (size_t)i < cap; i++)
        out[i] = dl_get(hb, i);
    return hb->ndead;
}

int phx_ft_hb_emitter(const phx_ft_hb_t *hb) { return hb->emitter; }
int phx_ft_hb_observer(const phx_ft_hb_t *hb) { return hb->observer; }
int phx_ft_hb_is_fenced(const phx_ft_hb_t *hb) { return hb->fenced; }

uint32_t phx_ft_hb_incarnation(const phx_ft_hb_t *hb, int r)
{
    uint32_t inc;
    return r >= 0 && r < hb->n && inc_get(hb, r, &inc) ? inc : 0;
}

int phx_ft_hb_accept(const phx_ft_hb_t *hb, int r, uint32_t inc)
{
    if (r < 0 || r >= hb->n || is_dead(hb, r))
        return 0;
    uint32_t known;
    return !inc_get(hb, r, &known) || inc >= known;
}

void phx_ft_hb_get_stats(const phx_ft_hb_t *hb, phx_ft_hb_stats_t *out)
{
    *out = hb->st;
    out->state_bytes = sizeof *hb + ((size_t)hb->n + 63) / 64 * 8 +
                       (size_t)hb->dead_cap * (hb->dl_wide ? 4 : 2) + (size_t)hb->incs_cap * sizeof *hb->incs;
}
