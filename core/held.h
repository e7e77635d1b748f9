/* The messages a task holds back (early in their sender's SSN stream, or
 * not admitted yet by a message-logging replay), indexed by <src, ssn>.
 * A replay names the one message it may deliver next, and a stream gap
 * names the one that fills it, so both find it in O(1) instead of
 * scanning what a whole checkpoint interval left waiting.
 *
 * Owned by the task's worker thread; cr reads it (phx_held_next) while the
 * workers are paused. Holds at most one message per <src, ssn>: both copies
 * of a re-sent message carry the same payload. */
#ifndef PHX_HELD_H
#define PHX_HELD_H

#include <stddef.h>
#include <stdint.h>

#include "core/msg.h"

typedef struct phx_held {
    phx_msg_t **slot;           /* open addressing; NULL: empty */
    uint32_t cap, len;          /* cap is 0 or a power of two */
} phx_held_t;

static inline void phx_held_init(phx_held_t *h) { h->slot = NULL; h->cap = h->len = 0; }
/* Frees the index and every message in it. */
void phx_held_free(phx_held_t *h);
/* Takes ownership of m. PHX_EEXIST: a copy of <src, ssn> is held already
 * (m is left to the caller); PHX_ENOMEM. */
int phx_held_put(phx_held_t *h, phx_msg_t *m);
/* Removes and returns the message <src, ssn>, or NULL. */
phx_msg_t *phx_held_take(phx_held_t *h, uint64_t src, uint64_t ssn);
static inline uint32_t phx_held_len(const phx_held_t *h) { return h->len; }
/* Iteration in no particular order: for (size_t i = 0; (m = phx_held_next(h, &i));).
 * Any put or take ends it. */
phx_msg_t *phx_held_next(const phx_held_t *h, size_t *i);

#endif
