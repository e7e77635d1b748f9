/* Ring heartbeat failure detector (tasks T1-T5 and FindEmitter of
 * "Fault tolerant algorithms for a fault tolerant MPI" (Herault))
 * with failure propagation by the reliable hypercube broadcast (bcast.h).
 *
 * Pure state machine: no sockets, threads or clock reads; after create it
 * allocates only one topology per new broadcast, and grows its dead list
 * and incarnation table as they fill. Time is the caller's
 * monotonic now_ns. One instance per node, owned by the runtime's
 * communication thread; no call is thread-safe. Callbacks may use the const
 * getters (state may be mid-update) but must not call anything else here.
 *
 * Driving it (see README.md):
 *   create() once; start(now) after the bootstrap barrier;
 *   arm one timer at next_deadline() and call tick(now) when it fires (and
 *   re-read next_deadline() after every call into the instance);
 *   on_msg() for every frame of type PHX_FT_HB_FRAME / PHX_FT_BCAST_FRAME,
 *   with the frame tag as `type`;
 *   suspect() when a TCP connection to a peer resets;
 *   outputs leave through env->send, env->on_dead, env->on_fenced.
 *
 * Failure semantics. D (the dead set) only grows, per rank: a rank in D
 * stays dead in this group whatever incarnation it comes back with. Every
 * node learns a failure exactly once (on_dead). Survivors converge on the
 * same D for any number of failures: the broadcast is the fast path (up to
 * floor(log2 n) - 1 failures during one broadcast), and heartbeats carry a
 * digest of D whose mismatch makes ring neighbours exchange D (DSET). A node that finds itself in
 * another node's D is fenced: on_fenced fires once and the instance goes
 * inert (every later call returns PHX_EFENCED); the runtime must stop
 * acting as a member. */
#ifndef PHX_FT_HB_H
#define PHX_FT_HB_H

#include <stddef.h>
#include <stdint.h>

#define PHX_FT_HB_FRAME     48   /* frame type of HEARTBEAT, NEWOBSERVER, YOU_ARE_DEAD */
#define PHX_FT_BCAST_FRAME  49   /* frame type of BCASTMSG */

/* Message types, carried in the frame tag. */
enum phx_ft_hb_msg {
    PHX_FT_HB_HEARTBEAT   = 1,   /* emitter -> observer, every eta */
    PHX_FT_HB_NEWOBSERVER = 2,   /* observer -> its new emitter after T3 */
    PHX_FT_HB_BCASTMSG    = 3,   /* failure notice, hypercube broadcast */
    PHX_FT_HB_YOU_ARE_DEAD = 4,  /* reply to any HB message from a rank in D */
    PHX_FT_HB_DSET        = 5,   /* whole D, after a heartbeat's digest mismatch */
    PHX_FT_HB_NTYPES
};

/* Frame type the runtime must use for message type t (0 if t is unknown). */
unsigned phx_ft_hb_frame_type(unsigned t);
const char *phx_ft_hb_msg_name(unsigned t);   /* static, never NULL */

typedef struct phx_ft_hb_env {
    void *ctx;
    /* Queue buf[0..len) for dst as frame tag `type`. The bytes are only
     * valid during the call. Delivery failures are the runtime's business:
     * it reports broken links through phx_ft_hb_suspect. Never called with
     * dst == own rank. */
    void (*send)(void *ctx, int dst, unsigned type, const void *buf, size_t len);
    /* rank joined D (the failure notice). Exactly once per rank, never for
     * the own rank, in the order the ranks joined D. */
    void (*on_dead)(void *ctx, int rank, uint64_t now_ns);
    /* This node was declared dead by the others. At most once; afterwards
     * the instance is inert. */
    void (*on_fenced)(void *ctx);
} phx_ft_hb_env_t;

/* What every instance of one group shares, read-only for the protocol: the
 * ring and its inverse, the encode/decode scratch and a cache of broadcast
 * topologies (a pure function of (nranks, origin, D), so sharing one changes
 * no behaviour). It keeps per-instance state at O(n/8 + |D|) bytes, and a
 * topology is built once per broadcast, not once per relay. Refcounted:
 * each instance holds a reference. Instances sharing one must be driven by
 * one thread (the scratch is reused by every call). */
typedef struct phx_ft_hb_shared phx_ft_hb_shared_t;

/* ring as in phx_ft_hb_cfg_t (copied; NULL: identity). Returns with one
 * reference held by the caller. PHX_EINVAL (not a permutation), PHX_ENOMEM. */
int phx_ft_hb_shared_create(int nranks, const int *ring, phx_ft_hb_shared_t **out);
void phx_ft_hb_shared_release(phx_ft_hb_shared_t *s);   /* NULL ok */

typedef struct phx_ft_hb_cfg {
    int nranks;
    int rank;
    uint32_t incarnation;   /* this process's incarnation of `rank` */
    /* Membership view, identical on every member: a rank that rejoins
     * (recovery=cr, restart-on=respawn) starts a new view, in which every
     * member builds a new instance with the agreed dead set (preset_dead).
     * Messages of another view are dropped and counted (stale_view). */
    uint16_t view;
    /* Ring order (position -> rank), identical on every node; copied.
     * NULL means 0, 1, ..., nranks-1. Build it with phx_ft_ring_build. */
    const int *ring;
    /* Optional: shared ring, scratch and topology cache (nranks must
     * match; ring is then ignored). NULL: the instance builds its own. */
    phx_ft_hb_shared_t *shared;
    uint64_t delta_ns;      /* suspicion timeout delta, > 0 */
    uint64_t eta_ns;        /* heartbeat period; 0: delta/10 */
    /* Emitter silence tolerated after a suspect() hint; 0: delta/2. Must
     * exceed eta + link delay, or a hint on a live emitter whose connection
     * was re-established becomes a false suspicion. */
    uint64_t hint_grace_ns;
    /* A gap longer than this between two calls (while a deadline was
     * pending) means this process was not running (SIGSTOP, swap, VM
     * pause): the emitter then gets a fresh delta. A gap past 2 eta but
     * below this is a late thread: the emitter's deadline may move by up
     * to delta past its nominal value, no further. 0: delta/2. */
    uint64_t stall_slack_ns;
    /* A broadcast whose origin knows at most this many dead ranks carries
     * its whole D and skips them (the seed's topology); past it, the copy is
     * compact: |D|, D's digest and the origin's latest additions, over the
     * topology of all ranks, each relay passing a child it knows dead on to
     * that child's children (README, "Compact broadcast"). Bytes per copy
     * stay bounded, so n/2 failures no longer move O(n^3) bytes.
     * 0: 64; negative: always compact. Same value on every node. */
    int bcast_list_max;
} phx_ft_hb_cfg_t;

typedef struct phx_ft_hb_stats {
    uint64_t sent[PHX_FT_HB_NTYPES];
    uint64_t recv[PHX_FT_HB_NTYPES];
    uint64_t declared;        /* T3 expiries: failures this node decided */
    uint64_t bcast_started;
    uint64_t bcast_dup;       /* copies suppressed by (origin, seq, cube, tree) */
    uint64_t stray_hb;        /* heartbeats from a live non-emitter */
    uint64_t stale_inc;       /* messages from an old incarnation, dropped */
    uint64_t stale_view;      /* messages of another membership view, dropped */
    uint64_t stalls;          /* gaps past stall_slack: emitter got a fresh delta */
    uint64_t late;            /* gaps past 2 eta (late thread): bounded extension */
    uint64_t dset_merged;     /* DSETs that added to D (repairs past the broadcast) */
    uint64_t hints;           /* suspect() calls that shortened the timer */
    uint64_t bcast_compact;   /* compact broadcasts started (origin knew > bcast_list_max) */
    uint64_t bcast_bypass;    /* known-dead children a compact copy was passed beyond */
    uint64_t bcast_pull;      /* compact copies whose |D| or digest showed us behind: DSET sent */
    uint64_t state_bytes;     /* heap this instance holds, the shared part not included */
} phx_ft_hb_stats_t;

typedef struct phx_ft_hb phx_ft_hb_t;

/* PHX_EINVAL on a bad cfg/env (env->send required, on_dead/on_fenced may be
 * NULL), PHX_ENOMEM. env and cfg are copied. */
int phx_ft_hb_create(const phx_ft_hb_cfg_t *cfg, const phx_ft_hb_env_t *env, phx_ft_hb_t **out);
void phx_ft_hb_destroy(phx_ft_hb_t *hb);

/* Arms the timers: first heartbeat at now, emitter silence tolerated for
 * 2*delta (start skew). Before start the instance only answers messages. */
int phx_ft_hb_start(phx_ft_hb_t *hb, uint64_t now_ns);
/* Before start: D = ranks[0..k) (the view's agreed dead set), silently (no
 * on_dead: the runtime already knows). PHX_EINVAL after start or for a bad
 * rank (own included). */
int phx_ft_hb_preset_dead(phx_ft_hb_t *hb, const int *ranks, int k);
/* Before start: rank's newest incarnation is at least inc (a new view's
 * instance learns what the last one had heard, and which incarnation a
 * rank taken back in is, so a notice names the member even when it died
 * before its first heartbeat). 0, PHX_EINVAL or PHX_ENOMEM. */
int phx_ft_hb_preset_inc(phx_ft_hb_t *hb, int rank, uint32_t inc);

/* Earliest time tick() has work; UINT64_MAX if none (not started, alone,
 * fenced). */
uint64_t phx_ft_hb_next_deadline(const phx_ft_hb_t *hb);
/* Runs T1 (heartbeat) and T3 (suspicion expiry) if due. T3 declares on
 * the first tick at least 1 ns after the one that found the deadline
 * passed, so the runtime must hand every frame that arrived in between to
 * on_msg (a libuv timer of >= 1 ms polls the sockets first). Returns 0, or
 * PHX_EFENCED once fenced. */
int phx_ft_hb_tick(phx_ft_hb_t *hb, uint64_t now_ns);

/* 1 iff this process was not running (see stall_slack) for long enough
 * that its observer may have declared it (delta - 2 eta), and that stall
 * ended within the last 2 delta. The runtime may then read the loss of
 * every live peer's connection as evidence of being declared dead; without
 * such a stall it never may (the peers may all have crashed). */
int phx_ft_hb_in_doubt(const phx_ft_hb_t *hb, uint64_t now_ns);

/* One received HB-protocol message. Returns 0 (also for messages dropped on
 * purpose: duplicates, old incarnations, strays), PHX_EPROTO for malformed
 * input (state unchanged, nothing sent), PHX_ENOMEM (state unchanged; the
 * runtime may retry or treat the link as broken), PHX_EFENCED when fenced,
 * now or before. A message from a rank in D is answered with YOU_ARE_DEAD. */
int phx_ft_hb_on_msg(phx_ft_hb_t *hb, int src, unsigned type, const void *buf, size_t len,
                     uint64_t now_ns);

/* Hint: the link to `rank` broke (TCP reset). A hint never adds to D by
 * itself, so all survivors still decide through the same protocol path:
 * if rank is our emitter, its silence deadline moves to now + hint_grace
 * (never later than it was) and T3 decides as usual; otherwise the hint is
 * ignored, because only a rank's observer may declare it. Call it after the
 * bytes received on the broken connection went through on_msg: a heartbeat
 * processed after the hint re-arms delta as usual. Returns 1 if the timer
 * moved, 0 if ignored, PHX_EINVAL on a bad rank, PHX_EFENCED. */
int phx_ft_hb_suspect(phx_ft_hb_t *hb, int rank, uint64_t now_ns);
/* As suspect(), for a confirmed loss (the rank's process is gone: its port
 * refused a redial): an emitter is declared within the call, as T3 would
 * (no confirmation tick: no heartbeat of a gone process can still arrive),
 * unless in_doubt() (a stall of ours just ended): then the grace is zero
 * and the next tick declares it on the usual T3 path. Same returns. */
int phx_ft_hb_suspect_gone(phx_ft_hb_t *hb, int rank, uint64_t now_ns);

/* Dead-set queries. Valid any time, also after fencing. */
int phx_ft_hb_is_dead(const phx_ft_hb_t *hb, int rank);       /* 1/0; 0 on bad rank */
int phx_ft_hb_dead_count(const phx_ft_hb_t *hb);
/* Copies D in the order ranks joined it; returns the count (may exceed cap). */
int phx_ft_hb_dead_list(const phx_ft_hb_t *hb, int *out, size_t cap);
/* Acknowledging failures (ULFM failure_ack) is not the detector's: the
 * runtime keeps one acknowledged state for all users (core/agree.c). */

int phx_ft_hb_emitter(const phx_ft_hb_t *hb);    /* own rank if none left */
int phx_ft_hb_observer(const phx_ft_hb_t *hb);   /* own rank if none left */
int phx_ft_hb_is_fenced(const phx_ft_hb_t *hb);

/* Incarnations: every message carries its sender's incarnation. The highest
 * seen per rank is kept; messages from a lower one are dropped here, and the
 * runtime should drop application traffic the same way: accept() is 1 iff
 * rank is alive in D's sense and inc is not older than the newest seen. */
uint32_t phx_ft_hb_incarnation(const phx_ft_hb_t *hb, int rank);
int phx_ft_hb_accept(const phx_ft_hb_t *hb, int rank, uint32_t inc);

void phx_ft_hb_get_stats(const phx_ft_hb_t *hb, phx_ft_hb_stats_t *out);

#endif
