/* Self-fencing and held failure notices (issues 9 and 13): when a node must
 * leave the job on its own (isolation after a stall, the minority side of a
 * partition, a lost link, the detector's verdict) and when a failure notice
 * from the ring detector (ft/hb) reaches the runtime. A pure state machine:
 * no sockets, no clock; the runtime feeds events and time and applies the
 * outputs (core/ft.c). Rules and test: ft/fence/README.md.
 *
 * Threading: one instance per node, driven from one thread (the node's
 * communication thread); nothing here is thread-safe. The env callbacks
 * are called from inside phx_ft_fence_verdict / _next only. */
#ifndef PHX_FT_FENCE_H
#define PHX_FT_FENCE_H

#include <stddef.h>
#include <stdint.h>

typedef struct phx_ft_fence phx_ft_fence_t;

typedef struct {
    int nranks;
    int rank;          /* this node */
    uint64_t delta_ns; /* the detector's suspicion timeout: a silence-only
                        * death waits 3 delta after the episode's last one */
} phx_ft_fence_cfg_t;

/* Levels of the transport, sampled when the machine decides (reads only;
 * they must not call back into it). */
typedef struct {
    void *ctx;
    /* 1 if rank's host answered for it (FIN, RST, a refused redial): its
     * process ended. A partition or a stopped process gives 0. */
    int (*reached)(void *ctx, int rank);
    /* 1 if an authenticated connection to rank is open right now. */
    int (*connected)(void *ctx, int rank);
} phx_ft_fence_env_t;

/* Why this node leaves (phx_ft_fence_verdict); each ends it with 75. */
enum {
    PHX_FT_FENCE_GO_ON = 0,
    PHX_FT_FENCE_DECLARED = 1,   /* the detector says we are in D */
    PHX_FT_FENCE_ISOLATED = 2,   /* stalled, then every live peer dropped us */
    PHX_FT_FENCE_MINORITY = 3,   /* more fell silent in one episode than remain */
    PHX_FT_FENCE_LINK = 4,       /* a link to a live peer is lost for good, we are the higher rank */
};

/* A failure notice: what the runtime acts on (phx_node_notify_dead). */
typedef struct {
    int rank;
    uint32_t inc;       /* the incarnation declared dead */
    uint64_t when_ns;   /* the detector's time of death */
    uint64_t decl_ns;   /* when it was declared here (phx_ft_fence_on_dead) */
} phx_ft_fence_notice_t;

/* Numbers behind the last verdict, for its log line. */
typedef struct {
    int silent;   /* MINORITY: members of the episode none of whose hosts answered */
    int live;     /* MINORITY: members not in D, ourselves included */
    int alive;    /* ISOLATED: live peers whose connections all dropped */
} phx_ft_fence_info_t;

/* Returns 0, PHX_EINVAL or PHX_ENOMEM. env is copied. */
int phx_ft_fence_create(const phx_ft_fence_cfg_t *cfg, const phx_ft_fence_env_t *env,
                        phx_ft_fence_t **out);
void phx_ft_fence_destroy(phx_ft_fence_t *f);

/* ---- events ------------------------------------------------------------- */

/* Heartbeating started (a rejoining node: its first view). Before it only
 * an external verdict (phx_ft_fence_set) fences. */
void phx_ft_fence_start(phx_ft_fence_t *f);
/* The detector declared rank (incarnation inc) dead at now: queued as a
 * notice, and counted in the current episode (deaths less than 3 delta
 * apart). Once per rank and view, as the detector's on_dead. Returns 0,
 * PHX_EINVAL (bad rank) or PHX_ENOSPC (queue full: the rank is in D but
 * its notice is lost; the caller says so). */
int phx_ft_fence_on_dead(phx_ft_fence_t *f, int rank, uint32_t inc, uint64_t when_ns, uint64_t now);
/* A new incarnation of rank completed its handshake: the old process is
 * over, so a notice held for it is due now and it no longer counts as
 * silent. Returns 1 if a notice for rank is queued (call _next), else 0. */
int phx_ft_fence_on_peer_up(phx_ft_fence_t *f, int rank);
/* The connection to rank broke without BYE. */
void phx_ft_fence_on_conn_closed(phx_ft_fence_t *f, int rank);
/* A heartbeat-protocol frame came from rank: its link is up (again). */
void phx_ft_fence_on_heard(phx_ft_fence_t *f, int rank);
/* The detector says we are in D (YOU_ARE_DEAD, a D holding us). */
void phx_ft_fence_declared(phx_ft_fence_t *f);
/* The transport could not restore the link to peer (alive as far as we
 * know). Several adjacent ring members dying together are declared about
 * delta apart, so while notices keep coming (the last delivered less than
 * 2 delta ago) the silent peer may be the next one: wait. Otherwise one
 * of the pair leaves and the ring decides as for any failure: the higher
 * rank, the same rule on both sides. Returns one of: */
enum {
    PHX_FT_FENCE_LINK_NONE = 0,   /* peer is in D, or we already leave */
    PHX_FT_FENCE_LINK_WAIT = 1,   /* ask again later (not started, or notices still coming) */
    PHX_FT_FENCE_LINK_PEER = 2,   /* the peer leaves */
    PHX_FT_FENCE_LINK_SELF = 3,   /* we leave: verdict PHX_FT_FENCE_LINK */
};
int phx_ft_fence_on_link_failed(phx_ft_fence_t *f, int peer, uint64_t now);
/* A membership view (rejoin): D becomes dead[0..nranks) (self excluded),
 * every "connection closed" mark is cleared, and the machine is started. */
void phx_ft_fence_new_view(phx_ft_fence_t *f, const uint8_t *dead);

/* ---- outputs ------------------------------------------------------------ */

/* Decides at now whether this node leaves. in_doubt: the detector's
 * phx_ft_hb_in_doubt(now) (we were stopped long enough, within the last
 * 2 delta, to have been declared). Returns PHX_FT_FENCE_GO_ON or a reason;
 * a reason stays, and from then on no notice is delivered. */
int phx_ft_fence_verdict(phx_ft_fence_t *f, uint64_t now, int in_doubt);
/* Each notice once, in declaration order, as soon as it is declared (due
 * or held): 1 with *out, or 0. The runtime closes its connection at once:
 * nothing from a declared incarnation may arrive, held or not. */
int phx_ft_fence_take_declared(phx_ft_fence_t *f, phx_ft_fence_notice_t *out);
/* Takes the first notice due at now out of the queue: its rank's host
 * answered, a newcomer replaced it, or the episode has been quiet for
 * 3 delta. Notices not due keep their order. Returns 1 with *out, or 0;
 * call it until 0 (a pass over the queue ends there). */
int phx_ft_fence_next(phx_ft_fence_t *f, uint64_t now, phx_ft_fence_notice_t *out);
/* When a held notice falls due (arm a timer for it): UINT64_MAX if none. */
uint64_t phx_ft_fence_deadline(const phx_ft_fence_t *f);

int phx_ft_fence_is_dead(const phx_ft_fence_t *f, int rank);
void phx_ft_fence_get_info(const phx_ft_fence_t *f, phx_ft_fence_info_t *out);
const char *phx_ft_fence_reason_name(int reason);

#endif
