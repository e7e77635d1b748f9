/* The commit round of recovery=cr as a pure state machine: one instance per
 * node, holding both sides of the round it takes part in.
 *
 *   coordinator (lowest live rank)     member (every live rank, coordinator too)
 *   start(e): BEGIN(id) to all   --->  on_begin: PAUSE the workers
 *                                      on_progress (paused): CUT, MARK(id) to all
 *                                      on_progress (every marker in): SNAPSHOT
 *                                      on_snapshot_done: SHIP the copy to the buddy
 *                                      on_copy_stored (buddy's ACK): READY(id)
 *   on_ready from every live rank: COMMIT(id) to all
 *                                      on_commit: COMMIT(e) here
 *
 * id = phx_ck_id(dead count, epoch) (ckpt_msg.h): a BEGIN of a round named
 * by another dead count is stale. Any failure aborts the round (ABORT): the
 * recovery round then decides from what was committed, and a new checkpoint
 * follows it. The READY reduction is phx_ck_commit_* (ckpt.h); which markers
 * are in is the stale-frame filter's record (phx_ck_filter_t, ckpt.h), which
 * the caller keeps (the recovery round lowers it too) and passes in.
 *
 * Events return their actions in an output list the caller owns (so an
 * action the caller carries out may feed this machine again: a message to
 * itself); the caller carries them out in order. No sockets, no threads, no
 * clock. Threading: one thread (the comm thread) per instance. Arrays passed
 * in are the caller's, read during the call only. Unit tests with an
 * exhaustive explorer of schedules and failures: test_ft_commit.c. */
#ifndef PHX_FT_CKPT_COMMIT_H
#define PHX_FT_CKPT_COMMIT_H

#include <stddef.h>
#include <stdint.h>

#include "ft/ckpt/ckpt.h"

typedef struct phx_ck_cm phx_ck_cm_t;

/* Destinations of SEND besides a rank. */
#define PHX_CK_CM_ALL (-1)     /* every live rank but this one, then this one if .self */
#define PHX_CK_CM_COORD (-2)   /* the coordinator: the lowest live rank in this node's view */

/* Messages of the round (the glue's control tags CK_BEGIN...). */
enum { PHX_CK_CM_M_BEGIN = 1, PHX_CK_CM_M_MARK, PHX_CK_CM_M_READY, PHX_CK_CM_M_COMMIT };

/* Actions, each a step the caller carries out. */
enum {
    PHX_CK_CM_SEND = 1,   /* msg(id) to dst; BEGIN carries the buddies and table, READY the queued count */
    PHX_CK_CM_PAUSE,      /* BEGIN(id) accepted: open epoch's slot, pause the workers */
    PHX_CK_CM_CUT,        /* workers paused: everything they sent goes onto the links before MARK */
    PHX_CK_CM_SNAPSHOT,   /* every marker in: serialise and keep own state, then on_snapshot_done
                           * (or nothing yet: asked again at the next on_progress) */
    PHX_CK_CM_SHIP,       /* the copy of own state to rank (the buddy) */
    PHX_CK_CM_STORED,     /* own copy kept, buddy copy on its way */
    PHX_CK_CM_COMMIT,     /* epoch is committed here: keep it, resume the workers */
    PHX_CK_CM_ABORT,      /* the round of epoch ended by a failure (rank): the recovery round takes over */
};

typedef struct phx_ck_cm_act {
    int kind;
    int dst;              /* SEND: rank, PHX_CK_CM_ALL or PHX_CK_CM_COORD; SHIP: the buddy; ABORT: the dead rank */
    int self;             /* SEND to PHX_CK_CM_ALL: to this node too, last */
    int msg;              /* SEND: PHX_CK_CM_M_* */
    uint64_t id, epoch;
} phx_ck_cm_act_t;

#define PHX_CK_CM_OUT_MAX 8   /* no event emits more */
typedef struct phx_ck_cm_out {
    int n;
    phx_ck_cm_act_t a[PHX_CK_CM_OUT_MAX];
} phx_ck_cm_out_t;

/* n ranks, this node's rank self. 0, PHX_EINVAL or PHX_ENOMEM. */
int phx_ck_cm_create(int n, int self, phx_ck_cm_t **out);
void phx_ck_cm_destroy(phx_ck_cm_t *m);
/* A copy (tests explore schedules from a state); 0 or PHX_ENOMEM. */
int phx_ck_cm_clone(const phx_ck_cm_t *m, phx_ck_cm_t **out);
/* The state as bytes, equal for equal states (tests remember states seen):
 * the length; written only when it fits in cap. */
size_t phx_ck_cm_key(const phx_ck_cm_t *m, uint8_t *buf, size_t cap);

/* The round this node is in, or was last in (0: none yet). */
uint64_t phx_ck_cm_id(const phx_ck_cm_t *m);
uint64_t phx_ck_cm_epoch(const phx_ck_cm_t *m);
/* 1 between an accepted BEGIN and its COMMIT or ABORT. */
int phx_ck_cm_in_round(const phx_ck_cm_t *m);

/* ---- coordinator ------------------------------------------------------- */

/* Starts epoch e of the round named by ndead: SEND(ALL + self, BEGIN).
 * Whether to start (idle here, this node coordinates, no hold) is the
 * caller's. Returns the round's id. */
uint64_t phx_ck_cm_start(phx_ck_cm_t *m, uint64_t e, int ndead, phx_ck_cm_out_t *out);
/* READY(id) from rank `from`, dead: this node's dead set. Once every rank
 * not in dead is READY for the round started here: SEND(ALL + self,
 * COMMIT), exactly once. Stale ids are ignored. */
void phx_ck_cm_on_ready(phx_ck_cm_t *m, int from, uint64_t id, const uint8_t *dead, phx_ck_cm_out_t *out);

/* ---- member ------------------------------------------------------------ */

/* BEGIN(id); ndead: this node's dead count; body_ok: its body decoded to a
 * table of live ranks. Only while not in a round (the caller also ignores a
 * BEGIN while recovering). Returns 1 (accepted: PAUSE), 0 (stale round:
 * ignored) or PHX_EPROTO (body refused: ignored, the caller says so). */
int phx_ck_cm_on_begin(phx_ck_cm_t *m, uint64_t id, int ndead, int body_ok, phx_ck_cm_out_t *out);
/* Something the cut waits for changed: paused, all workers are parked; f
 * holds the markers received (phx_ck_filter_t.ck_mark); dead this node's
 * dead set. First CUT and MARK to every live rank; once every live peer's
 * marker of this round is in, SNAPSHOT; then, with the buddy's ACK, READY. */
void phx_ck_cm_on_progress(phx_ck_cm_t *m, int paused, const phx_ck_filter_t *f, const uint8_t *dead,
                           phx_ck_cm_out_t *out);
/* The SNAPSHOT is kept here; buddy: this node's buddy in the round (-1: a
 * job of one live node has no second copy). SHIP(buddy), STORED, and
 * READY when no copy is to wait for. */
void phx_ck_cm_on_snapshot_done(phx_ck_cm_t *m, int buddy, phx_ck_cm_out_t *out);
/* The buddy holds this node's copy of id (its ACK). Returns 1 when it
 * counts (then the caller calls on_progress), 0 when stale. */
int phx_ck_cm_on_copy_stored(phx_ck_cm_t *m, uint64_t id);
/* COMMIT(id): COMMIT(epoch) when it ends the round this node is in. */
void phx_ck_cm_on_commit(phx_ck_cm_t *m, uint64_t id, phx_ck_cm_out_t *out);

/* ---- both -------------------------------------------------------------- */

/* Rank was declared dead (once per rank): the round in progress, as
 * member or coordinator, ends: ABORT. */
void phx_ck_cm_on_failure(phx_ck_cm_t *m, int rank, phx_ck_cm_out_t *out);

#endif
