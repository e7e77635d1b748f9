/* Quiescence at the cut: termination detection for recovery=cr.
 *
 * A coordinated checkpoint is a consistent cut taken with every worker
 * paused at a handler boundary and every channel drained into the inboxes.
 * The job has terminated exactly when, at such a cut, no node holds a
 * queued message (inboxes, early arrivals, held-back messages): no handler
 * can ever run again. So the detector needs no counters of its own to roll
 * back: its state is the checkpoint, and a rollback restores it.
 *
 * Every checkpoint is checked; to end soon after the work does, the
 * coordinator also starts one (a probe) when every live rank last reported
 * itself idle, with a gap that doubles after each probe that found work
 * (min_gap .. max_gap ms), so a job that is seldom idle everywhere pays
 * few of them.
 *
 * Pure state machine, used by the coordinator (core/cr_round.c) on the comm
 * thread; no clock: callers pass now_ms. */
#ifndef PHX_FT_CKPT_QUIET_H
#define PHX_FT_CKPT_QUIET_H

#include <stdint.h>

typedef struct phx_ck_quiet {
    int size;
    uint8_t *idle;             /* each rank's last idle report */
    uint8_t *in;               /* reported its queued count for id */
    uint64_t *queued;
    uint64_t id;               /* checkpoint whose counts are gathered */
    uint64_t gap, min_gap, max_gap, next;   /* ms */
} phx_ck_quiet_t;

/* 0 or PHX_ENOMEM. */
int phx_ck_quiet_init(phx_ck_quiet_t *q, int size, uint64_t min_gap_ms, uint64_t max_gap_ms);
void phx_ck_quiet_free(phx_ck_quiet_t *q);
/* Rank's idle report (1 idle, 0 busy). */
void phx_ck_quiet_idle(phx_ck_quiet_t *q, int rank, int idle);
/* 1 if every rank not in dead reported idle and the gap since the last
 * probe has passed: start a checkpoint as a probe. */
int phx_ck_quiet_want(const phx_ck_quiet_t *q, const uint8_t *dead, uint64_t now_ms);
/* A checkpoint id starts: counts gathered so far are dropped. */
void phx_ck_quiet_begin(phx_ck_quiet_t *q, uint64_t id);
/* Rank had n messages queued at the cut of checkpoint id (stale ids are
 * ignored). */
void phx_ck_quiet_count(phx_ck_quiet_t *q, int rank, uint64_t id, uint64_t n);
/* Every live rank is READY for id: 1 if all of them reported 0 queued
 * (the job has terminated at this cut), else 0. probe: the checkpoint was
 * started by phx_ck_quiet_want; one that found work doubles the gap. */
int phx_ck_quiet_decide(phx_ck_quiet_t *q, uint64_t id, const uint8_t *dead, int probe, uint64_t now_ms);
/* After a failure or a rollback: idle reports start over. */
void phx_ck_quiet_reset(phx_ck_quiet_t *q);

#endif
