/* Membership changes of recovery=cr, pure (no sockets, threads or clocks):
 * where a lost rank's tasks go (restart-on=spare) and which incarnation of
 * each rank is a member (restart-on=respawn: a rank that comes back is a new
 * member; its old incarnation stays dead). Unit-tested in test_ft_member.c.
 *
 * Ownership: one instance per node, owned by the comm thread; arrays passed
 * in are the caller's and are read only during the call. */
#ifndef PHX_FT_CKPT_MEMBER_H
#define PHX_FT_CKPT_MEMBER_H

#include <stddef.h>
#include <stdint.h>

/* restart-on=spare: like phx_ck_relocate (ft/ckpt/ckpt.h), but every dead
 * rank's slices go whole to one live spare (ranks >= first_spare) that
 * hosts nothing in loc_e (beyond its own, empty, home slices: slice i
 * belongs to home i / slices) and takes no other dead rank's place: the spare
 * stands in for the rank. Dead ranks are served in rank order; once the
 * spares run out, the rest spread over the live ranks as with
 * phx_ck_relocate. *nspared (may be NULL) gets how many ranks a spare took.
 * Same return codes as phx_ck_relocate. */
int phx_ck_relocate_spare(int n, int nloc, const int *loc_e, const int *buddy_e, const uint8_t *dead,
                          int first_spare, int slices, int *loc, int *lost, int *lost_buddy, int *nspared);


/* ---- membership change at the coordinator (restart-on=respawn) ---------
 * A dead rank x comes back as a new incarnation; every live rank reports
 * SEEN(x, inc) once its transport admitted it. The recovery round that
 * takes x in is decided only when every live rank has it connected (the
 * rollback markers and x's copy must reach it). */
typedef struct phx_ck_join {
    int n;
    uint32_t *inc;              /* n: incarnation of x coming back (0: none) */
    uint8_t *seen;              /* n x n: seen[x * n + r] */
} phx_ck_join_t;

int phx_ck_join_init(phx_ck_join_t *j, int n);
void phx_ck_join_free(phx_ck_join_t *j);
/* Rank `from` has incarnation inc of x connected. A higher incarnation than
 * the recorded one restarts x's count (the previous newcomer died too); a
 * lower one is stale. Returns 1 if recorded, 0 if stale or out of range. */
int phx_ck_join_seen(phx_ck_join_t *j, int from, int x, uint32_t inc);
/* 1 (and *inc) when x's newcomer is connected to every rank live in dead. */
int phx_ck_join_ready(const phx_ck_join_t *j, int x, const uint8_t *dead, uint32_t *inc);
/* x was admitted: forget it. */
void phx_ck_join_clear(phx_ck_join_t *j, int x);

#endif
