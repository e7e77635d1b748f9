/* Disk checkpoints for recovery=cr (ckpt-dir=DIR).
 *
 * Layout in DIR, all written atomically (temporary file, fsync, rename,
 * fsync of the directory):
 *   ckpt-e<E>-r<R>.bin   rank R's state at epoch E: a header (magic,
 *                        version, program tag, epoch, rank, length,
 *                        SHA-256 of the payload) and the payload;
 *   manifest-e<E>.bin    written by the coordinator once every live rank
 *                        wrote its file of E: the rank count, the
 *                        relocation table and the ranks that have a file.
 * The last two manifests and their files are kept. A reader takes the
 * newest manifest whose files all verify, and names every file it rejects
 * (truncated, corrupt, foreign: another program's tag) on stderr.
 *
 * Blocking file I/O on the calling thread (the comm thread, at commit).
 * The program tag is a hash of the registered task types, so a checkpoint
 * of another program is refused. */
#ifndef PHX_CORE_CKPT_DISK_H
#define PHX_CORE_CKPT_DISK_H

#include <stddef.h>
#include <stdint.h>

#include "ft/ckpt/ckpt_msg.h"   /* phx_ckd_manifest_t, the file layouts */


/* Hash of the registered task types (names and state sizes). */
uint64_t phx_ckd_tag(void);
/* 0 or a negative code (after logging the path and errno). */
int phx_ckd_write_rank(const char *dir, uint64_t tag, uint64_t e, int rank, const void *blob, size_t len);
int phx_ckd_write_manifest(const char *dir, uint64_t tag, const phx_ckd_manifest_t *m);
/* Newest manifest (epoch <= max_epoch) whose files all verify; 0 and *m
 * (free with phx_ckd_manifest_free), or PHX_ENOENT when none is usable. */
int phx_ckd_find(const char *dir, uint64_t tag, uint64_t max_epoch, phx_ckd_manifest_t *m);
/* Reads and verifies rank's file of epoch e: 0 and a malloc'd payload. */
int phx_ckd_read_rank(const char *dir, uint64_t tag, uint64_t e, int rank, void **blob, size_t *len);
/* Removes files and manifests of epochs below keep. */
void phx_ckd_prune(const char *dir, uint64_t keep);

#endif
