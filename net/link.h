/* Per-link reliability: sequence numbers, cumulative acks and resend, so a
 * connection between two live nodes can drop and be re-established with no
 * frame lost or delivered twice (net/README.md, "Link recovery").
 *
 * One phx_link_t per peer; it outlives connections. The sender seals each
 * data frame with the next sequence number (and piggybacks its own
 * cumulative ack) right before writing it, keeps written frames until the
 * peer acknowledges them, and after a reconnect rewrites every frame past
 * the peer's last ack. The receiver delivers seq == last + 1, drops
 * seq <= last as a duplicate of a resent frame, and treats a gap as a
 * protocol error (TCP is ordered and the sender resends from its oldest
 * unacknowledged frame, so a gap means a broken or hostile peer).
 *
 * Pure: no sockets, no clock. Frames are whole encoded frames
 * (net/frame.h); the unit reads only their length field and rewrites
 * lseq/lack/crc through phx_frame_seal. Not thread-safe: the transport uses
 * it from the communication thread only. */
#ifndef PHX_NET_LINK_H
#define PHX_NET_LINK_H

#include <stddef.h>
#include <stdint.h>

typedef struct phx_link phx_link_t;

/* Returns 0 or PHX_ENOMEM. */
int phx_link_create(phx_link_t **out);
/* Frees the link and every retained batch. NULL is a no-op. */
void phx_link_destroy(phx_link_t *l);

/* ---- sending ---- */

/* Seals the run of whole frames frames[0..len): numbers them in order from
 * the next sequence number and stores the current receive ack in each.
 * Returns the number of frames sealed, or PHX_EPROTO if the run does not
 * consist of whole frames (a caller bug; the sequence is left as it was). */
int phx_link_seal(phx_link_t *l, uint8_t *frames, size_t len);

/* After the sealed run has been handed to the socket (whether or not the
 * write succeeded): takes ownership of data (malloc'd, holding exactly the
 * count frames sealed by one phx_link_seal call, in order; cap bytes
 * allocated) until the peer acks them. charge is released with them. *freed (may be NULL) receives the
 * charge of whatever this call released (the batch itself if the peer
 * already acked it). Returns 0 or PHX_ENOMEM (data is then freed and its
 * charge returned in *freed: the frames are given up on). */
int phx_link_retain(phx_link_t *l, uint8_t *data, size_t len, size_t cap, int count,
                    uint64_t charge, uint64_t *freed);

/* The peer acknowledged every frame up to ack. *freed receives the charge of
 * the batches released. Returns 0 (also for an old, lower ack) or
 * PHX_EPROTO when ack exceeds the last sequence number sealed. */
int phx_link_on_ack(phx_link_t *l, uint64_t ack, uint64_t *freed);

/* For a reconnect: a malloc'd copy of every retained frame past the peer's
 * last ack, in order (*out NULL and 0 returned when there is none). The
 * retained batches stay until acked. Returns the byte count, or PHX_ENOMEM. */
long phx_link_resend(phx_link_t *l, uint8_t **out);

/* Detaches a buffer released by an ack, for the caller to reuse (it owns
 * it, at least *cap bytes); NULL when there is none. Saves the transport
 * growing a fresh output buffer after every write. */
uint8_t *phx_link_spare(phx_link_t *l, size_t *cap);

/* Bytes retained (written, not yet acked). */
uint64_t phx_link_retained(const phx_link_t *l);

/* ---- receiving ---- */

/* A data frame with link sequence seq arrived. Returns 1: deliver it (the
 * receive ack moves to seq); 0: duplicate, drop it; PHX_EPROTO: seq is 0
 * or skips ahead. */
int phx_link_on_recv(phx_link_t *l, uint64_t seq);

/* Frames delivered since the last ack sent (by seal or take_ack); 0: none due. */
uint64_t phx_link_ack_due(const phx_link_t *l);
/* The cumulative ack to put in a standalone ACK frame; marks it sent. */
uint64_t phx_link_take_ack(phx_link_t *l);

/* The peer is a new incarnation: forget both directions. Returns the charge
 * of the retained batches dropped. */
uint64_t phx_link_reset(phx_link_t *l);

#endif
