/* Cluster-secret authentication: mutual HMAC-SHA256 challenge-response run
 * over HELLO/AUTH frames (see net/README.md for the exact bytes).
 *
 * phx_auth_t is a pure state machine for ONE connection: it never touches a
 * socket, the transport moves the bytes. It is not thread-safe; only the
 * thread that owns the connection (the libuv loop thread) may call it.
 *
 * Flow, identical on both ends:
 *   phx_auth_create -> phx_auth_hello (send as PHX_FT_HELLO)
 *   peer HELLO  -> phx_auth_on_hello -> send result as PHX_FT_AUTH
 *   peer AUTH   -> phx_auth_on_auth  -> PHX_OK means the peer is authenticated
 * Any negative return is sticky: the object refuses everything afterwards,
 * and the transport must close the connection. Frames other than HELLO/AUTH
 * must not be accepted before phx_auth_done() returns 1. */
#ifndef PHX_AUTH_H
#define PHX_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define PHX_AUTH_NONCE      32
#define PHX_AUTH_HELLO_LEN  48   /* u32 rank, u32 inc, u64 job_id, nonce[32] */
#define PHX_AUTH_MAC_LEN    32   /* HMAC-SHA256 */
#define PHX_AUTH_SECRET_MAX 4096
#define PHX_AUTH_LABEL      "phalanx-auth-v1"   /* 15 bytes, no NUL on the wire */

typedef struct phx_auth phx_auth_t;

typedef struct phx_auth_hello {
    uint32_t rank, inc;
    uint64_t job_id;
    uint8_t nonce[PHX_AUTH_NONCE];
} phx_auth_hello_t;

/* Loads the cluster secret into out[0..*len): the bytes of env PHX_SECRET if
 * it is set (even if empty), else the whole file named by PHX_SECRET_FILE with
 * one trailing "\n" removed. Returns PHX_OK; PHX_ENOENT if neither is set;
 * PHX_EINVAL for an empty secret or a file that is not a regular file or is
 * accessible by group/other; PHX_ENOSPC if it exceeds cap; PHX_EIO (or the
 * open errno) on read failure. Every failure is logged with its reason.
 * Reads the environment: call at startup, before other threads run. */
int phx_auth_load_secret(uint8_t *out, size_t cap, size_t *len);

/* Parses a HELLO payload. Pure; any thread. PHX_EPROTO unless len == 48. */
int phx_auth_hello_parse(const uint8_t *in, size_t len, phx_auth_hello_t *out);

/* Creates the state for one connection and draws a fresh nonce (RAND_bytes).
 * The secret is copied (and wiped on destroy); the caller keeps its buffer.
 * expected_peer_rank: the rank we dialled, or -1 on the accepting side to
 * take any rank (the caller then checks phx_auth_peer_rank). Returns PHX_OK,
 * PHX_EINVAL (empty/oversized secret, rank out of range), PHX_ENOMEM, or
 * PHX_EIO if the RNG fails. The caller owns *out and frees it with destroy. */
int phx_auth_create(const uint8_t *secret, size_t secret_len, uint32_t own_rank,
                    uint32_t own_inc, uint64_t job_id, int64_t expected_peer_rank,
                    phx_auth_t **out);

/* Writes our HELLO payload (48 bytes) and returns 48, or PHX_ENOSPC if
 * cap < 48, or PHX_EAUTH after a failure. May be called at any point; the
 * nonce never changes for the life of the object. */
int phx_auth_hello(phx_auth_t *a, uint8_t *out, size_t cap);

/* Consumes the peer's HELLO payload and writes our AUTH payload (32 bytes)
 * to auth_out. Returns 32; PHX_ENOSPC (cap < 32, state unchanged);
 * PHX_EPROTO (bad length, second HELLO); PHX_EAUTH (peer echoed our nonce,
 * wrong job id, rank differs from expected_peer_rank or equals our own). */
int phx_auth_on_hello(phx_auth_t *a, const uint8_t *in, size_t len,
                      uint8_t *auth_out, size_t cap);

/* Verifies the peer's AUTH payload (constant-time). PHX_OK, or PHX_EAUTH for
 * a wrong MAC, wrong length, AUTH before the peer's HELLO, before we handed
 * out our own HELLO, or a second AUTH. */
int phx_auth_on_auth(phx_auth_t *a, const uint8_t *in, size_t len);

/* 1 once the peer's AUTH verified, else 0. */
int phx_auth_done(const phx_auth_t *a);
/* Peer's rank/incarnation from its HELLO; -1 before a HELLO was accepted. */
int64_t phx_auth_peer_rank(const phx_auth_t *a);
int64_t phx_auth_peer_inc(const phx_auth_t *a);

/* Wipes the secret and frees. NULL is a no-op. */
void phx_auth_destroy(phx_auth_t *a);

#endif
