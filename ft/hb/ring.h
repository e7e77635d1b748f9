/* Observation ring order for the heartbeat failure detector (ft/hb/hb.h).
 *
 * The worst case of ring repair is a run of consecutive ring neighbours
 * failing together (R(f) grows with f when failures are adjacent), and
 * ranks on one host fail together. So the ring "jumps" over hosts: ring
 * neighbours sit on different hosts whenever the host sizes allow it, and
 * equal-sized hosts are visited round-robin so that a lost host removes
 * spread-out ring positions.
 *
 * Pure functions of their input: every node computes the same order from
 * the same host table. No allocation survives a call; any thread. */
#ifndef PHX_FT_RING_H
#define PHX_FT_RING_H

#include <stddef.h>
#include <stdint.h>

/* Fills ring[0..n) with a permutation of 0..n-1 (ring position -> rank)
 * from host[r], the host id of rank r. Deterministic in (n, host).
 * The number of same-host ring adjacencies (including ring[n-1]-ring[0])
 * is the minimum possible, max(0, 2*largest_host - n) (n >= 3).
 * Caller owns both arrays. PHX_EINVAL on n < 1 or NULL, PHX_ENOMEM. */
int phx_ft_ring_build(int n, const uint32_t *host, int *ring);

/* Number of ring positions i with host[ring[i]] == host[ring[(i+1)%n]]
 * (0 for n < 2). For tests and diagnostics. */
int phx_ft_ring_conflicts(int n, const uint32_t *host, const int *ring);

/* Fills pos[r] = ring position of rank r. PHX_EINVAL if ring is not a
 * permutation of 0..n-1. */
int phx_ft_ring_invert(int n, const int *ring, int *pos);

#endif
