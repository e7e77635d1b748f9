/* Error codes shared by every module.
 *
 * Functions return 0 (or a non-negative count) on success and a negative
 * PHX_E* code on failure, the way libuv does. Codes are negated errno values
 * where one fits, so strerror-style reporting stays cheap; the rest sit
 * above 4000 to stay clear of errno. Never swallow one: propagate or log. */
#ifndef PHX_ERR_H
#define PHX_ERR_H

#include <errno.h>

#define PHX_OK          0
#define PHX_EINVAL      (-EINVAL)
#define PHX_ENOMEM      (-ENOMEM)
#define PHX_EAGAIN      (-EAGAIN)
#define PHX_ENOSPC      (-ENOSPC)
#define PHX_ERANGE      (-ERANGE)
#define PHX_EIO         (-EIO)
#define PHX_ENOENT      (-ENOENT)
#define PHX_EEXIST      (-EEXIST)
#define PHX_ETIMEDOUT   (-ETIMEDOUT)
#define PHX_ECONNREFUSED (-ECONNREFUSED)
#define PHX_ECANCELED   (-ECANCELED)
#define PHX_ENOTSUP     (-ENOTSUP)
#define PHX_EPROTO      (-4001)   /* malformed wire data */
#define PHX_EAUTH       (-4002)   /* peer failed authentication */
#define PHX_EVERSION    (-4003)   /* unsupported wire version */
#define PHX_ECHECKSUM   (-4004)   /* checksum mismatch */
#define PHX_ETRUNC      (-4005)   /* need more bytes (not an error for streams) */
#define PHX_EDEAD       (-4006)   /* peer or task declared dead */
#define PHX_EFENCED     (-4007)   /* this node was declared dead by the others */
#define PHX_EREVOKED    (-4008)   /* group was revoked */
#define PHX_EPROCFAIL   (-4009)   /* operation completed but new failures were seen */
#define PHX_EUNRECOVERABLE (-4010) /* failure combination the protocol cannot survive */

#ifdef __cplusplus
extern "C" {
#endif
/* Static string for a code; never NULL. Thread-safe. */
const char *phx_strerror(int code);
#ifdef __cplusplus
}
#endif

#endif
