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

#endif
