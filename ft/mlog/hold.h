/* mlog-pessimistic's held frames: a node's outgoing frames wait, in the
 * order they came, until the determinants published before them are stored
 * on another node. Frames are opaque tokens. A frame that waits for dets
 * comes with a snapshot of every det queue's published end (nq values),
 * taken after the frame was queued (later is sound: it covers more); the
 * frames of one batch (the runtime's outbox drain) share one group and one
 * snapshot. A frame that waits for nothing but order (any frame behind a
 * held one) joins the newest group. Groups leave oldest first, once the
 * owner says their snapshot is stored; with every group slot in use, a new
 * batch's frames join the newest group and its snapshot moves to theirs
 * (later: still sound, only later). Pure: no threads, sockets or clock;
 * one owner (the runtime's comm thread). */
#ifndef PHX_FT_MLOG_HOLD_H
#define PHX_FT_MLOG_HOLD_H

#include <stddef.h>
#include <stdint.h>

/* Group slots: enough for the batches of one round trip to the det store. */
#define PHX_ML_HOLD_GROUPS 64

typedef struct phx_ml_hold phx_ml_hold_t;

/* NULL when out of memory or nq < 1. */
phx_ml_hold_t *phx_ml_hold_create(int nq);
void phx_ml_hold_destroy(phx_ml_hold_t *h);

/* tok joins the hold. snap non-NULL: tok waits for the dets snap covers
 * (copied; the batch's first such frame opens a group, the batch's later
 * ones join it whatever their snap, so a batch passes the one snapshot it
 * took after all its frames were queued). snap NULL: tok waits only for
 * the frames ahead of it (PHX_EINVAL on an empty hold: such a frame need
 * not wait). 0, PHX_EINVAL or PHX_ENOMEM (tok not held). */
int phx_ml_hold_put(phx_ml_hold_t *h, void *tok, const uint64_t *snap);

/* The batch ended: the next waiting frame opens a new group. */
void phx_ml_hold_batch_end(phx_ml_hold_t *h);

size_t phx_ml_hold_len(const phx_ml_hold_t *h);

/* The oldest held frame, removed, if its group's snapshot is stored:
 * stored(arg, snap) != 0 (asked once per group); else NULL. */
void *phx_ml_hold_next(phx_ml_hold_t *h, int (*stored)(void *arg, const uint64_t *snap), void *arg);

/* The oldest held frame, removed whatever its group (a rollback, the
 * job's end); NULL when empty. */
void *phx_ml_hold_pop(phx_ml_hold_t *h);

#endif
