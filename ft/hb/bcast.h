/* Reliable hypercube broadcast (after Ramanathan and Shin, "Reliable
 * Broadcast Algorithm", as used in "Fault tolerant algorithms for a fault tolerant MPI" (Herault)).
 *
 * Topology. The origin s fixes the member list: every rank of 0..nranks-1
 * not in the dead set D_s it sends, sorted, rotated so that s has index 0.
 * With n members and k = floor(log2 n), the members are covered by one
 * k-cube (n == 2^k) or by two k-cubes that both contain s (n != 2^k):
 * cube 0 is indices [0, 2^k), cube 1 is {0} U [n-2^k+1, n). The seed's
 * "two successive broadcasts" are these two cubes; we start both at once.
 *
 * Inside a cube, s sends one copy to each of its k neighbours 1<<j; copy j
 * then spreads over a binomial (recursive doubling) tree rooted at 1<<j that
 * visits dimensions j+1, ..., j+k-1, j (mod k). The k trees give every
 * member k node-disjoint paths from s (seed table for n = 8), so a copy
 * reaches every live member whenever at most k-1 members fail, known to s
 * or not. Each copy is forwarded along its own tree only, so a relay sends
 * at most k messages per copy it receives and nothing ever loops.
 *
 * The topology is a pure function of (nranks, origin, D_s): relays rebuild
 * it from the D carried in the message and never from their own D (the
 * seed's "do NOT change broadcast topology on the fly").
 *
 * Threading: an object is immutable after create; any thread may query it. */
#ifndef PHX_FT_BCAST_H
#define PHX_FT_BCAST_H

#include <stddef.h>
#include <stdint.h>

typedef struct phx_ft_bcast phx_ft_bcast_t;

/* One copy to send: to rank dst, as copy `tree` of cube `cube`. */
typedef struct phx_ft_bcast_hop {
    int dst;
    uint8_t cube, tree;
} phx_ft_bcast_hop_t;

/* Builds the topology. dead[0..ndead) are the origin's dead ranks in any
 * order (duplicates allowed); origin must not be among them. The caller
 * keeps ownership of dead. PHX_EINVAL on bad arguments, PHX_ENOMEM. */
int phx_ft_bcast_create(int nranks, int origin, const int *dead, size_t ndead,
                        phx_ft_bcast_t **out);
void phx_ft_bcast_destroy(phx_ft_bcast_t *b);

int phx_ft_bcast_members(const phx_ft_bcast_t *b);   /* n */
int phx_ft_bcast_dim(const phx_ft_bcast_t *b);       /* k = floor(log2 n) */
int phx_ft_bcast_ncubes(const phx_ft_bcast_t *b);    /* 1 or 2 (0 if n == 1) */
/* Failures among members the broadcast always survives: max(0, k - 1). */
int phx_ft_bcast_tolerance(const phx_ft_bcast_t *b);
/* Upper bound on hops from origin to any member on a surviving path. */
int phx_ft_bcast_max_hops(const phx_ft_bcast_t *b);

/* The origin's first sends: ncubes * k hops. Writes at most cap hops and
 * returns how many there are (so cap == 0 queries the size). */
int phx_ft_bcast_start(const phx_ft_bcast_t *b, phx_ft_bcast_hop_t *out, size_t cap);

/* Sends due at rank `me` after it received copy (cube, tree). Returns the
 * hop count (written up to cap), or PHX_EINVAL if me is the origin, is not
 * a member of that cube, or cube/tree are out of range: a relay must treat
 * that as a malformed message. */
int phx_ft_bcast_forward(const phx_ft_bcast_t *b, int me, unsigned cube, unsigned tree,
                         phx_ft_bcast_hop_t *out, size_t cap);

#endif
