/* recovery=cr: the drain of a node told to stop (SIGTERM, `phx drain`), as
 * a pure state machine: one instance per node, both sides (the leaver and
 * the coordinator, the lowest live rank).
 *
 *   leaver                          coordinator
 *   request: REQ(self) to coord --> on_req: pending; START a checkpoint now
 *                                   plan(id) at that checkpoint's start:
 *                                   LEAVE(id, leavers) to every live rank,
 *                                   then BEGIN(id) moves their slices away
 *   on_leave (every node): the plan of checkpoint id
 *   on_commit(id) (every node): APPLY (the leavers leave the membership:
 *   dead from here on, no failure declared, nobody rolls back); the leaver
 *   itself EXITs (0).
 *
 * The move itself is the checkpoint's: at its cut (every worker parked,
 * every earlier message in an inbox) the leavers ship their slices to
 * their new hosts, so the committed epoch already has them there and no
 * rank holds a copy on a leaver (its buddy entry is -1, nobody's buddy is a
 * leaver). The survivors keep their live state; nothing is redone.
 *
 * Rules:
 *   - a drain that would leave no live rank is not a drain: request refuses
 *     it on a node that is the last one, and plan ends the job (CANCEL)
 *     when every live rank asked to leave: a cancelled job stops, it does
 *     not drain into nobody;
 *   - any failure aborts the checkpoint carrying the plan (the commit
 *     round's rule): the plan is dropped, the recovery round rolls every
 *     live rank back as usual (leavers included: they are still members),
 *     and the requests still pending are planned again at the next
 *     checkpoint (the one the recovery round starts);
 *   - a pending leaver that dies is an ordinary failure: its request goes;
 *   - a leaver asks the coordinator of its current view and asks again
 *     whenever that coordinator changes (it died, or it drained itself:
 *     rank 0's role passes to the lowest surviving rank), so a request
 *     survives the coordinator;
 *   - the coordinator may itself leave: the plan names it like any rank;
 *     the next coordinator may plan the next drain before every member
 *     heard the old one's COMMIT (another link), so a member keeps one
 *     plan of the following membership beside its pending one (on_leave)
 *     and takes it up at that commit; the glue keeps that checkpoint's
 *     BEGIN the same way;
 *   - a leaver repeats its request now and then (retry) until it left: a
 *     request sent before the link was up is not lost for good.
 *
 * Events return actions in an output list the caller owns and carries out
 * in order. No sockets, threads or clock. Threading: one thread (the comm
 * thread) per instance. Arrays passed in are the caller's, read during the
 * call only. Tests: test_ft_drain.c. */
#ifndef PHX_FT_CKPT_DRAIN_H
#define PHX_FT_CKPT_DRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "base/phx_wire.h"

typedef struct phx_ck_dr phx_ck_dr_t;

/* The node's view at the event. */
typedef struct phx_ck_dr_view {
    const uint8_t *dead;   /* n flags (leavers that left count as dead) */
    int coord;             /* the lowest live rank */
    int idle;              /* coordinator: no checkpoint or recovery round open here, and the
                            * job's first checkpoint committed (it holds the job's start) */
    uint32_t round;        /* membership changes so far (cr's dead count): names checkpoint ids */
} phx_ck_dr_view_t;

enum {
    PHX_CK_DR_REQ = 1,     /* REQ(self) to dst (the coordinator; dst == self: feed on_req) */
    PHX_CK_DR_START,       /* coordinator: begin a checkpoint now (plan is called at its start) */
    PHX_CK_DR_LEAVE,       /* coordinator: LEAVE(id, leavers) to every live rank, self last, before BEGIN(id) */
    PHX_CK_DR_CANCEL,      /* coordinator: every live rank asked to leave: end the job, saying so */
    PHX_CK_DR_APPLY,       /* at the commit of id: the leavers are out of the membership here */
    PHX_CK_DR_EXIT,        /* this node has left: exit 0 */
};

typedef struct phx_ck_dr_act {
    int kind;
    int dst;               /* REQ */
    uint64_t id;           /* LEAVE, APPLY */
} phx_ck_dr_act_t;

#define PHX_CK_DR_OUT_MAX 4   /* no event emits more */
typedef struct phx_ck_dr_out {
    int n;
    phx_ck_dr_act_t a[PHX_CK_DR_OUT_MAX];
} phx_ck_dr_out_t;

/* n ranks, this node's rank self. 0, PHX_EINVAL or PHX_ENOMEM. */
int phx_ck_dr_create(int n, int self, phx_ck_dr_t **out);
void phx_ck_dr_destroy(phx_ck_dr_t *m);

/* ---- the leaver ------------------------------------------------------------ */

/* This node was told to stop. 0: REQ to the coordinator; 1: already
 * asked (nothing new); PHX_ENOSPC: this is the last live rank, there is
 * nobody to drain into (the caller stops as before). */
int phx_ck_dr_request(phx_ck_dr_t *m, const phx_ck_dr_view_t *v, phx_ck_dr_out_t *out);
/* 1 once this node asked to leave; phx_ck_dr_left: 1 once it has left
 * (EXIT was emitted). */
int phx_ck_dr_requested(const phx_ck_dr_t *m);
int phx_ck_dr_left(const phx_ck_dr_t *m);
/* Asked, and not left yet: REQ to the coordinator of the view again (the
 * caller retries now and then: a request sent before the link was up, or
 * lost with a coordinator, is not lost for good; a repeat changes nothing
 * at the coordinator but a START it may owe). */
void phx_ck_dr_retry(phx_ck_dr_t *m, const phx_ck_dr_view_t *v, phx_ck_dr_out_t *out);

/* ---- the coordinator --------------------------------------------------------- */

/* REQ from rank `from`. Kept whoever coordinates (a requester may know of
 * a failure before this node does); START when this node coordinates and
 * is idle. */
void phx_ck_dr_on_req(phx_ck_dr_t *m, const phx_ck_dr_view_t *v, int from, phx_ck_dr_out_t *out);
/* This node coordinates and became idle (a commit, the end of a round):
 * START when a request waits. */
void phx_ck_dr_on_idle(phx_ck_dr_t *m, const phx_ck_dr_view_t *v, phx_ck_dr_out_t *out);
/* Checkpoint id starts here (this node coordinates). leavers (n flags,
 * the caller's) gets the pending requests of live ranks. Returns their
 * number: 0, no drain (an ordinary checkpoint); k > 0, LEAVE(id) and the
 * caller moves their slices in this checkpoint; -1, CANCEL (every live
 * rank asked: the caller starts nothing and ends the job). */
int phx_ck_dr_plan(phx_ck_dr_t *m, const phx_ck_dr_view_t *v, uint64_t id, uint8_t *leavers, phx_ck_dr_out_t *out);

/* ---- every node -------------------------------------------------------------- */

/* LEAVE(id, leavers) arrived: the plan of checkpoint id (a newer one
 * replaces an older). id = phx_ck_id(round, epoch) (ckpt_msg.h): a plan
 * named by an older round than the view's was aborted by a failure, or
 * overtaken by an applied drain, and is ignored (it may arrive after the
 * failure notice that aborted it). */
void phx_ck_dr_on_leave(phx_ck_dr_t *m, const phx_ck_dr_view_t *v, uint64_t id, const uint8_t *leavers);
/* The leavers of checkpoint id, if it carries a plan or carried the plan
 * applied last (n flags, valid until the next event); NULL otherwise. */
const uint8_t *phx_ck_dr_leavers(const phx_ck_dr_t *m, uint64_t id);
/* Checkpoint id committed here: APPLY(id) if it carries a plan, then EXIT
 * if this node is among its leavers. The caller marks the leavers dead
 * and then calls on_view. */
void phx_ck_dr_on_commit(phx_ck_dr_t *m, uint64_t id, phx_ck_dr_out_t *out);
/* A failure notice (rank): the plan goes (its checkpoint aborts), and so
 * does rank's request. The caller then calls on_view. */
void phx_ck_dr_on_failure(phx_ck_dr_t *m, int rank);
/* The membership changed (failure or applied drain): REQ again if this
 * node still waits to leave and its coordinator changed. */
void phx_ck_dr_on_view(phx_ck_dr_t *m, const phx_ck_dr_view_t *v, phx_ck_dr_out_t *out);

/* ---- messages (the glue's control tag CR_DRAIN; arg: the checkpoint id
 * for LEAVE, 0 for REQ) ------------------------------------------------------- */

enum { PHX_CK_DR_M_REQ = 1, PHX_CK_DR_M_LEAVE = 2 };
/* REQ: kind (u8), why (u8, PHX_CK_DR_WHY_*), 0 (u16), the rank that asks (i32). */
enum { PHX_CK_DR_WHY_TERM = 1, PHX_CK_DR_WHY_CMD = 2 };
#define PHX_CK_DR_REQ_LEN 8
typedef struct phx_ck_dr_req {
    int32_t rank;
    uint8_t why;
} phx_ck_dr_req_t;
void phx_ck_dr_req_enc(uint8_t out[PHX_CK_DR_REQ_LEN], const phx_ck_dr_req_t *m);
int phx_ck_dr_req_dec(const void *p, size_t len, phx_ck_dr_req_t *m);
/* LEAVE: kind, a u32 count and that many ranks (each < n, ascending). */
typedef struct phx_ck_dr_leave {
    phx_wire_a32_t ranks;
} phx_ck_dr_leave_t;
size_t phx_ck_dr_leave_len(int k);
/* Encodes the ranks flagged in leavers[0..n): bytes written, or -1 if cap is short. */
long phx_ck_dr_leave_enc(const uint8_t *leavers, int n, void *buf, size_t cap);
int phx_ck_dr_leave_dec(const void *p, size_t len, int n, phx_ck_dr_leave_t *m);
/* The kind of a CR_DRAIN body (its first byte), 0 if none. */
int phx_ck_dr_kind(const void *p, size_t len);

#endif
