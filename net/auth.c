#include "auth.h"

#include "base/phx_wire.h"
#include "base/phx_err.h"
#include "base/phx_log.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LABEL_LEN (sizeof(PHX_AUTH_LABEL) - 1)
#define MSG_LEN (LABEL_LEN + 2 * PHX_AUTH_NONCE + 4 + 4 + 8)

enum st { ST_INIT, ST_GOT_HELLO, ST_DONE, ST_FAILED };

struct phx_auth {
    enum st st;
    int hello_sent;
    int have_peer;          /* peer HELLO parsed (maybe rejected): for logs */
    uint32_t own_rank, own_inc;
    uint64_t job_id;
    int64_t expect_rank;
    uint8_t nonce[PHX_AUTH_NONCE];
    phx_auth_hello_t peer;
    size_t secret_len;
    uint8_t secret[PHX_AUTH_SECRET_MAX];
};

int phx_auth_load_secret(uint8_t *out, size_t cap, size_t *len)
{
    const char *env = getenv("PHX_SECRET");
    if (env) {
        size_t n = strlen(env);
        if (n == 0) {
            PHX_WARN("auth", "PHX_SECRET is set but empty");
            return PHX_EINVAL;
        }
        if (n > cap) {
            PHX_WARN("auth", "PHX_SECRET is %zu bytes, limit %zu", n, cap);
            return PHX_ENOSPC;
        }
        memcpy(out, env, n);
        *len = n;
        return PHX_OK;
    }
    const char *path = getenv("PHX_SECRET_FILE");
    if (!path) {
        PHX_WARN("auth", "no cluster secret: set PHX_SECRET or PHX_SECRET_FILE");
        return PHX_ENOENT;
    }
    /* Follows symlinks on purpose (secret mounts are often symlinks); the
     * mode check below applies to the file actually opened. */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        PHX_WARN("auth", "cannot open PHX_SECRET_FILE %s: %s", path, strerror(e));
        return -e;
    }
    int rc = PHX_OK;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        rc = -errno;
        PHX_WARN("auth", "fstat %s: %s", path, strerror(-rc));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        PHX_WARN("auth", "PHX_SECRET_FILE %s is not a regular file", path);
        rc = PHX_EINVAL;
        goto out;
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        PHX_WARN("auth", "PHX_SECRET_FILE %s has mode %04o; refusing a secret accessible "
                 "by group/other (chmod 600)", path, (unsigned)(st.st_mode & 07777));
        rc = PHX_EINVAL;
        goto out;
    }
    /* cap + 1 bytes of room so the optional trailing newline of a secret of
     * exactly cap bytes still fits; one more byte than that is an overflow. */
    uint8_t *buf = malloc(cap + 2);
    if (!buf) {
        rc = PHX_ENOMEM;
        goto out;
    }
    size_t n = 0;
    while (n < cap + 2) {
        ssize_t r = read(fd, buf + n, cap + 2 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -errno;
            PHX_WARN("auth", "read %s: %s", path, strerror(-rc));
            break;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    if (rc == PHX_OK) {
        if (n > 0 && buf[n - 1] == '\n')
            n--;
        if (n > cap) {
            PHX_WARN("auth", "PHX_SECRET_FILE %s exceeds %zu bytes", path, cap);
            rc = PHX_ENOSPC;
        } else if (n == 0) {
            PHX_WARN("auth", "PHX_SECRET_FILE %s is empty", path);
            rc = PHX_EINVAL;
        } else {
            memcpy(out, buf, n);
            *len = n;
        }
    }
    OPENSSL_cleanse(buf, cap + 2);
    free(buf);
out:
    close(fd);
    return rc;
}

int phx_auth_hello_parse(const uint8_t *in, size_t len, phx_auth_hello_t *out)
{
    phx_wdec_t d;
    phx_wdec_init(&d, in, len);
    out->rank = phx_wdec_u32(&d);
    out->inc = phx_wdec_u32(&d);
    out->job_id = phx_wdec_u64(&d);
    phx_wdec_bytes(&d, out->nonce, PHX_AUTH_NONCE);
    return phx_wdec_end(&d, 1) ? PHX_EPROTO : PHX_OK;
}

int phx_auth_create(const uint8_t *secret, size_t secret_len, uint32_t own_rank,
                    uint32_t own_inc, uint64_t job_id, int64_t expected_peer_rank,
                    phx_auth_t **out)
{
    if (!secret || secret_len == 0 || secret_len > PHX_AUTH_SECRET_MAX || !out ||
        expected_peer_rank < -1 || expected_peer_rank > (int64_t)UINT32_MAX)
        return PHX_EINVAL;
    phx_auth_t *a = calloc(1, sizeof *a);
    if (!a)
        return PHX_ENOMEM;
    if (RAND_bytes(a->nonce, sizeof a->nonce) != 1) {
        PHX_ERROR("auth", "RAND_bytes failed; cannot make a handshake nonce");
        free(a);
        return PHX_EIO;
    }
    a->st = ST_INIT;
    a->own_rank = own_rank;
    a->own_inc = own_inc;
    a->job_id = job_id;
    a->expect_rank = expected_peer_rank;
    a->secret_len = secret_len;
    memcpy(a->secret, secret, secret_len);
    *out = a;
    return PHX_OK;
}

/* Failure is sticky: a half-authenticated connection is never reused. */
static int auth_fail(phx_auth_t *a, int rc, const char *why)
{
    int64_t peer = a->have_peer ? (int64_t)a->peer.rank : -1;
    a->st = ST_FAILED;
    PHX_WARN("auth", "handshake failed (own rank %u, peer rank %lld): %s",
             (unsigned)a->own_rank, (long long)peer, why);
    return rc;
}

int phx_auth_hello(phx_auth_t *a, uint8_t *out, size_t cap)
{
    if (a->st == ST_FAILED)
        return PHX_EAUTH;
    if (cap < PHX_AUTH_HELLO_LEN)
        return PHX_ENOSPC;
    phx_wenc_t e;
    phx_wenc_init(&e, out, PHX_AUTH_HELLO_LEN);
    phx_wenc_u32(&e, a->own_rank);
    phx_wenc_u32(&e, a->own_inc);
    phx_wenc_u64(&e, a->job_id);
    phx_wenc_bytes(&e, a->nonce, PHX_AUTH_NONCE);
    a->hello_sent = 1;
    return PHX_AUTH_HELLO_LEN;
}

/* MAC a sender attaches: binds both nonces (freshness, no replay across
 * sessions), the direction (sender rank first, so a reflected AUTH fails)
 * and the job (no cross-job reuse of one secret). */
static int mac(const phx_auth_t *a, const uint8_t *n_recv, const uint8_t *n_send,
               uint32_t r_send, uint32_t r_recv, uint8_t out[PHX_AUTH_MAC_LEN])
{
    uint8_t m[MSG_LEN];
    phx_wenc_t e;
    phx_wenc_init(&e, m, sizeof m);
    phx_wenc_bytes(&e, PHX_AUTH_LABEL, LABEL_LEN);
    phx_wenc_bytes(&e, n_recv, PHX_AUTH_NONCE);
    phx_wenc_bytes(&e, n_send, PHX_AUTH_NONCE);
    phx_wenc_u32(&e, r_send);
    phx_wenc_u32(&e, r_recv);
    phx_wenc_u64(&e, a->job_id);
    unsigned int olen = 0;
    if (!HMAC(EVP_sha256(), a->secret, (int)a->secret_len, m, sizeof m, out, &olen) ||
        olen != PHX_AUTH_MAC_LEN)
        return PHX_EIO;
    return PHX_OK;
}

int phx_auth_on_hello(phx_auth_t *a, const uint8_t *in, size_t len,
                      uint8_t *auth_out, size_t cap)
{
    if (a->st == ST_FAILED)
        return PHX_EAUTH;
    if (cap < PHX_AUTH_MAC_LEN)
        return PHX_ENOSPC;
    if (a->st != ST_INIT)
        return auth_fail(a, PHX_EPROTO, "duplicate HELLO");
    phx_auth_hello_t h;
    if (phx_auth_hello_parse(in, len, &h) != PHX_OK)
        return auth_fail(a, PHX_EPROTO, "malformed HELLO payload");
    a->peer = h;
    a->have_peer = 1;
    if (memcmp(h.nonce, a->nonce, PHX_AUTH_NONCE) == 0)
        return auth_fail(a, PHX_EAUTH, "peer echoed our nonce (reflection)");
    if (h.job_id != a->job_id) {
        PHX_WARN("auth", "peer job id %llu, ours %llu",
                 (unsigned long long)h.job_id, (unsigned long long)a->job_id);
        return auth_fail(a, PHX_EAUTH, "job id mismatch");
    }
    if (a->expect_rank >= 0 && h.rank != (uint64_t)a->expect_rank) {
        PHX_WARN("auth", "dialled rank %lld but peer claims rank %u",
                 (long long)a->expect_rank, (unsigned)h.rank);
        return auth_fail(a, PHX_EAUTH, "peer rank mismatch");
    }
    if (h.rank == a->own_rank)
        return auth_fail(a, PHX_EAUTH, "peer claims our own rank");
    int rc = mac(a, h.nonce, a->nonce, a->own_rank, h.rank, auth_out);
    if (rc != PHX_OK)
        return auth_fail(a, rc, "HMAC computation failed");
    a->st = ST_GOT_HELLO;
    return PHX_AUTH_MAC_LEN;
}

int phx_auth_on_auth(phx_auth_t *a, const uint8_t *in, size_t len)
{
    if (a->st == ST_FAILED)
        return PHX_EAUTH;
    if (a->st == ST_INIT)
        return auth_fail(a, PHX_EAUTH, "AUTH before HELLO");
    if (a->st == ST_DONE)
        return auth_fail(a, PHX_EAUTH, "duplicate AUTH");
    if (!a->hello_sent)
        return auth_fail(a, PHX_EAUTH, "AUTH before our HELLO was sent");
    if (len != PHX_AUTH_MAC_LEN)
        return auth_fail(a, PHX_EAUTH, "AUTH payload has wrong length");
    uint8_t want[PHX_AUTH_MAC_LEN];
    int rc = mac(a, a->nonce, a->peer.nonce, a->peer.rank, a->own_rank, want);
    if (rc != PHX_OK)
        return auth_fail(a, rc, "HMAC computation failed");
    int bad = CRYPTO_memcmp(want, in, PHX_AUTH_MAC_LEN);
    OPENSSL_cleanse(want, sizeof want);
    if (bad)
        return auth_fail(a, PHX_EAUTH, "bad MAC (wrong cluster secret?)");
    a->st = ST_DONE;
    return PHX_OK;
}

int phx_auth_done(const phx_auth_t *a) { return a->st == ST_DONE; }

int64_t phx_auth_peer_rank(const phx_auth_t *a)
{
    return a->st == ST_GOT_HELLO || a->st == ST_DONE ? (int64_t)a->peer.rank : -1;
}

int64_t phx_auth_peer_inc(const phx_auth_t *a)
{
    return a->st == ST_GOT_HELLO || a->st == ST_DONE ? (int64_t)a->peer.inc : -1;
}

void phx_auth_destroy(phx_auth_t *a)
{
    if (!a)
        return;
    OPENSSL_cleanse(a, sizeof *a);
    free(a);
}
