/* The GLB/FTGLB protocol of one node as a pure state machine: it is fed
 * messages, failure notices and steps, and answers through the io callbacks.
 * No sockets, no clocks of its own (now_ns is passed in), so the unit test
 * (test_glb_sm.c) runs many nodes in one process under adversarial
 * schedules and kills.
 *
 * Ownership: the machine owns its bag, the backups it holds and every
 * buffer it allocates; buffers passed to io->send are only borrowed for the
 * call. Not thread safe: one thread drives one machine. */
#ifndef PHX_GLB_SM_H
#define PHX_GLB_SM_H

#include "ft/glb/glb.h"

typedef struct phx_glb_sm phx_glb_sm_t;

typedef struct phx_glb_io {
    void *ctx;
    /* A protocol message for node dst (never self). */
    void (*send)(void *ctx, int dst, const uint8_t *buf, size_t len);
    /* Labelled protocol point (fault injection); may not return. */
    void (*point)(void *ctx, const char *label);
    /* The root (the lowest live rank): termination decided, result
     * reduced over every rank's state. */
    void (*finish)(void *ctx, const uint64_t *result);
    /* The job cannot end exactly: why = "unrecoverable: ...". */
    void (*abort)(void *ctx, const char *why);
} phx_glb_io_t;

typedef struct phx_glb_sm_stats {
    uint64_t steals_sent, steals_ok, gives, backups, steal_backups, backup_bytes;
    uint64_t orphans, adoptions, readopted, queries, waves;
    uint64_t malformed;         /* undecodable messages, dropped */
    uint64_t handovers;         /* drained nodes' final states taken over (not adoptions) */
} phx_glb_sm_stats_t;

phx_glb_sm_t *phx_glb_sm_new(const phx_glb_cfg_t *cfg, const phx_glb_ops_t *ops, void *app,
                             int rank, int size, const phx_glb_io_t *io, uint64_t seed);
void phx_glb_sm_free(phx_glb_sm_t *s);
/* Seeds the bag (bag_init) and, with ft, queues the initial backup. */
void phx_glb_sm_start(phx_glb_sm_t *s, uint64_t now_ns);
/* A message from node src. Malformed input is dropped and counted
 * (stats.malformed); messages from dead nodes are orphans (stats.orphans). */
void phx_glb_sm_recv(phx_glb_sm_t *s, int src, const uint8_t *buf, size_t len, uint64_t now_ns);
/* Node `rank` is dead for good (perfect detector: every survivor hears it). */
void phx_glb_sm_dead(phx_glb_sm_t *s, int rank, uint64_t now_ns);
/* Processes up to n items, then backups, steals, waves and timeouts.
 * Returns 1 while the bag has work (call again soon), 0 when idle. */
int phx_glb_sm_step(phx_glb_sm_t *s, uint64_t now_ns);
/* Drain: this node hands its whole state to its Back and leaves (see
 * README, "Drain"). Needs ft. 0: leaving (call step as before until
 * phx_glb_sm_left says 1, then exit without touching the job); PHX_ENOTSUP
 * without ft, PHX_EAGAIN for the last live node (it keeps the work). */
int phx_glb_sm_leave(phx_glb_sm_t *s, uint64_t now_ns);
/* 1 once the drain is done: the final backup is acked, nothing more is
 * handled here, and the others take the state over at this node's notice. */
int phx_glb_sm_left(const phx_glb_sm_t *s);
/* 1 once finish or abort was called. */
int phx_glb_sm_over(const phx_glb_sm_t *s);
void phx_glb_sm_get_stats(const phx_glb_sm_t *s, phx_glb_sm_stats_t *out);

#endif
