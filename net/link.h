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

/* Zero-copy send: the tail of one frame's payload is not in the run but
 * referenced. It belongs at offset `at` of the run (right after the frame's
 * inline part: header and any leading payload bytes) and ends the frame.
 * The link calls release(arg) exactly once, on the communication thread,
 * when it lets go of the bytes (acked, reset, destroyed, or a failed
 * retain); until then they must stay unchanged. */
typedef struct phx_link_ext {
    size_t at, len;
    const uint8_t *p;
    void (*release)(void *arg);
    void *arg;
} phx_link_ext_t;

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
/* Same, for a run whose frames ext[0..next) end in referenced bytes (in
 * order of `at`). */
int phx_link_seal_ext(phx_link_t *l, uint8_t *frames, size_t len, const phx_link_ext_t *ext, int next);

/* After the sealed run has been handed to the socket (whether or not the
 * write succeeded): takes ownership of data (malloc'd, holding exactly the
 * count frames sealed by one phx_link_seal call, in order; cap bytes
 * allocated) until the peer acks them. charge is released with them. *freed (may be NULL) receives the
 * charge of whatever this call released (the batch itself if the peer
 * already acked it). Returns 0 or PHX_ENOMEM (data is then freed and its
 * charge returned in *freed: the frames are given up on). */
int phx_link_retain(phx_link_t *l, uint8_t *data, size_t len, size_t cap, int count,
                    uint64_t charge, uint64_t *freed);
/* Same for a run sealed by phx_link_seal_ext: also takes the malloc'd array
 * ext[0..next) and the references in it (released as documented above). */
int phx_link_retain_ext(phx_link_t *l, uint8_t *data, size_t len, size_t cap, int count,
                        phx_link_ext_t *ext, int next, uint64_t charge, uint64_t *freed);
/* Releases the references ext[0..next) and frees the array (the caller's
 * own, never retained: a dead peer's queue). */
void phx_link_ext_free(phx_link_ext_t *ext, int next);

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

/* Bytes retained (written, not yet acked; referenced bytes included). */
uint64_t phx_link_retained(const phx_link_t *l);
/* Of those, the bytes held in the link's own batches (copied frames);
 * the rest are referenced payloads. */
uint64_t phx_link_retained_copied(const phx_link_t *l);

/* ---- receiving ---- */

/* A data frame with link sequence seq arrived. Returns 1: deliver it (the
 * receive ack moves to seq); 0: duplicate, drop it; PHX_EPROTO: seq is 0
 * or skips ahead. */
int phx_link_on_recv(phx_link_t *l, uint64_t seq);

/* Sequence number of the last frame delivered (the next is this + 1). */
uint64_t phx_link_recvd(const phx_link_t *l);
/* Frames delivered since the last ack sent (by seal or take_ack); 0: none due. */
uint64_t phx_link_ack_due(const phx_link_t *l);
/* The cumulative ack to put in a standalone ACK frame; marks it sent. */
uint64_t phx_link_take_ack(phx_link_t *l);

/* The peer is a new incarnation: forget both directions. Returns the charge
 * of the retained batches dropped. */
uint64_t phx_link_reset(phx_link_t *l);

/* ---- incarnations ------------------------------------------------------
 * Whether a connection from incarnation inc of a rank is admitted, given
 * the rank's current incarnation cur and whether cur was declared dead:
 * the same live incarnation, or a newer one of a dead rank (it rejoins;
 * the dead one stays dead). A newer one of a rank not yet declared dead
 * waits (the old one must be dead everywhere first: its state comes back
 * from a checkpoint, never from the link); anything older is stale. Used by
 * the transport when a rank may rejoin (net/transport.h, phx_net_cfg_t). */
enum { PHX_LINK_ADMIT, PHX_LINK_WAIT, PHX_LINK_STALE };
static inline int phx_link_inc_admit(uint32_t cur, int dead, uint32_t inc)
{
    if (dead)
        return inc > cur ? PHX_LINK_ADMIT : PHX_LINK_STALE;
    return inc == cur ? PHX_LINK_ADMIT : inc > cur ? PHX_LINK_WAIT : PHX_LINK_STALE;
}

#endif
