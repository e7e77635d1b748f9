/* Groups and the ULFM-style recovery verbs (User-Level Failure
 * Mitigation, as in "Fault tolerant algorithms for a fault tolerant MPI" (Herault)):
 * failure_ack, revoke, agree (= phx_ft_era_start) and shrink.
 *
 * A group is an id plus a sorted member list of job ranks that contains the
 * local rank. Groups are owned by the era that created them and live until
 * phx_ft_era_destroy; handles stay valid that long. Threading: same as
 * era.h (one driving thread per era, no locking). */
#ifndef PHX_FT_GROUP_H
#define PHX_FT_GROUP_H

#include "ft/era/era.h"

/* Register group gid with the given members (any order, no duplicates,
 * must include the local rank, all < job size). members is copied.
 * Every member must create it with the same id and member set (the world
 * group at start-up; shrink does it for derived groups).
 * Returns 0, PHX_EINVAL, PHX_EEXIST (gid known with other members; if the
 * members match, *out is the existing group and 0 is returned), PHX_ENOMEM. */
int phx_ft_group_create(phx_ft_era_t *era, uint64_t gid, const int *members,
                        int nmembers, phx_ft_group_t **out);
/* The same, but members (strictly ascending) is borrowed, not copied: the
 * caller keeps it unchanged until phx_ft_era_destroy. Engines of one
 * process (the simulator's thousands of nodes) then share one world list
 * instead of holding O(m) each. */
int phx_ft_group_create_borrowed(phx_ft_era_t *era, uint64_t gid, const int *members,
                                 int nmembers, phx_ft_group_t **out);
/* NULL if unknown. */
phx_ft_group_t *phx_ft_group_lookup(phx_ft_era_t *era, uint64_t gid);

uint64_t phx_ft_group_id(const phx_ft_group_t *g);
int phx_ft_group_size(const phx_ft_group_t *g);
/* Sorted member ranks; borrowed, valid while the group lives. */
const int *phx_ft_group_members(const phx_ft_group_t *g);
/* Index of rank in the member list, or PHX_ENOENT. */
int phx_ft_group_index_of(const phx_ft_group_t *g, int rank);

/* failure_ack: acknowledge every member failure known locally now. Later
 * agreements on g report PHX_EPROCFAIL only for failures not acknowledged
 * by all their contributors. */
void phx_ft_ulfm_failure_ack(phx_ft_era_t *era, phx_ft_group_t *g);
/* The same from a state kept outside: g's acknowledged set becomes
 * acked & members. A runtime that keeps ONE acknowledged-failures state for
 * all groups (core/agree.c) copies it here before every agreement and
 * shrink it starts on g. */
void phx_ft_ulfm_set_acked(phx_ft_group_t *g, const phx_ft_rankset_t *acked);
/* The acknowledged set (copy). */
void phx_ft_ulfm_get_acked(const phx_ft_group_t *g, phx_ft_rankset_t *out);

/* revoke: mark g revoked and flood a REVOKE so every surviving member's
 * env->revoked(gid) fires once; the runtime then fails that member's pending
 * and future operations on g (other than agree/shrink) with PHX_EREVOKED.
 * Idempotent. Reliable despite failures: a member re-floods when the rank
 * it learned the revoke from dies. Returns 0 or a send error. */
int phx_ft_ulfm_revoke(phx_ft_era_t *era, phx_ft_group_t *g);
int phx_ft_ulfm_is_revoked(const phx_ft_group_t *g);

/* shrink: agreement aid on g (same aid sequence as agree) over the set of
 * known-dead members (OR). On decision every survivor creates the same new
 * group -- members of g minus the agreed dead set, id derived from (gid, aid)
 * -- and env->shrunk fires. Works on revoked groups. Returns as
 * phx_ft_era_start (PHX_EINVAL also when env->shrunk is NULL). */
int phx_ft_ulfm_shrink(phx_ft_era_t *era, phx_ft_group_t *g, uint64_t aid);
/* Id of the group shrink (gid, aid) creates. */
uint64_t phx_ft_ulfm_shrink_gid(uint64_t gid, uint64_t aid);

#endif
