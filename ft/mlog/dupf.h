/* Duplicate filter of recovery=mlog-fast ("Scalable Message-Logging Techniques for Effective Fault Tolerance in HPC Applications" (Meneses),
 * Ch. 3): receive-deterministic tasks make no determinants,
 * so a message re-sent during a recovery is recognised by its key
 * <sender, receiver, type, tag> alone. Pure: no threads, sockets or clock.
 *
 * A stream is one (sender, receiver, type); `base` is its lowest tag not
 * yet seen, and a bit map covers the tags above it. Contract (the
 * stencil's: tag = iteration, one message per tag and stream): a stream's
 * tags are each sent once, and none arrives PHX_DUPF_AHEAD or more tags
 * ahead of the stream's lowest missing one (after a restore, survivors
 * re-send a checkpoint interval's worth at once). Tags below base count
 * as seen; a tag beyond that is refused (PHX_ERANGE) rather than let a
 * later duplicate through.
 *
 * Threads: one owner (a task's state, or the comm thread). The packed form
 * lets a task checkpoint it with its own state, so after a restore it
 * knows exactly what the restored state had received. */
#ifndef PHX_FT_MLOG_DUPF_H
#define PHX_FT_MLOG_DUPF_H

#include <stddef.h>
#include <stdint.h>

typedef struct phx_dupf phx_dupf_t;

#define PHX_DUPF_AHEAD (1u << 20)

/* NULL when out of memory. */
phx_dupf_t *phx_dupf_create(void);
void phx_dupf_destroy(phx_dupf_t *f);
/* Records the key: 1 new, 0 duplicate (counted), PHX_ERANGE (tag beyond
 * the stream's window), PHX_ENOMEM. */
int phx_dupf_admit(phx_dupf_t *f, uint64_t sender, uint64_t receiver, uint32_t type, uint64_t tag);
/* Messages of (receiver, type, tag) recorded, over every sender: a handler
 * waiting for n messages of tag k compares this with n. */
int phx_dupf_count(const phx_dupf_t *f, uint64_t receiver, uint32_t type, uint64_t tag);
/* Duplicates dropped since create (not packed: a per-process figure). */
uint64_t phx_dupf_dups(const phx_dupf_t *f);
/* Bytes phx_dupf_pack writes. */
size_t phx_dupf_packed_size(const phx_dupf_t *f);
/* Bytes written, or PHX_ENOSPC. */
long phx_dupf_pack(const phx_dupf_t *f, uint8_t *buf, size_t cap);
/* Replaces f's streams with the packed ones: 0, PHX_EPROTO or PHX_ENOMEM
 * (f unchanged then). */
int phx_dupf_unpack(phx_dupf_t *f, const uint8_t *buf, size_t len);

#endif
