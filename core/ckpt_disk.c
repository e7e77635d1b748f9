#include "core/ckpt_disk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/phx_wire.h"
#include "core/phalanx.h"
#include "base/phx_err.h"
#include "base/phx_log.h"

extern phx_type_t phx_types[PHX_MAX_TYPES];
extern int phx_ntypes;


uint64_t phx_ckd_tag(void)
{
    uint64_t h = 14695981039346656037ull;
    for (int i = 0; i < phx_ntypes; i++) {
        for (const char *s = phx_types[i].name; *s; s++)
            h = (h ^ (uint8_t)*s) * 1099511628211ull;
        h = (h ^ phx_types[i].state_size) * 1099511628211ull;
    }
    return h;
}

static void sha256(const void *p, size_t n, uint8_t out[32])
{
    unsigned k = 32;
    if (!EVP_Digest(p, n, out, &k, EVP_sha256(), NULL))
        memset(out, 0, 32);
}

static int write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t k = write(fd, b, n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

/* tmp + fsync + rename + fsync(dir): a crash leaves the old file or the
 * whole new one, never a torn one. */
static int write_atomic(const char *dir, const char *name, const void *a, size_t alen, const void *b, size_t blen)
{
    char path[1024], tmp[1100];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        int rc = -errno;
        PHX_ERROR("ckpt", "cannot create %s: %s", tmp, strerror(errno));
        return rc;
    }
    int rc = write_all(fd, a, alen);
    if (!rc && blen)
        rc = write_all(fd, b, blen);
    if (!rc && fsync(fd))
        rc = -errno;
    if (close(fd) && !rc)
        rc = -errno;
    if (!rc && rename(tmp, path))
        rc = -errno;
    if (rc) {
        PHX_ERROR("ckpt", "cannot write %s: %s", path, strerror(-rc));
        unlink(tmp);
        return rc;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        if (fsync(dfd))
            PHX_WARN("ckpt", "fsync of directory %s: %s", dir, strerror(errno));
        close(dfd);
    }
    return 0;
}

int phx_ckd_write_rank(const char *dir, uint64_t tag, uint64_t e, int rank, const void *blob, size_t len)
{
    uint8_t h[PHX_CKD_HDR];
    phx_ckd_hdr_t hd = { .magic = PHX_CKD_FILE_MAGIC, .version = PHX_CKD_VERSION, .tag = tag, .epoch = e,
                         .rank = (uint32_t)rank, .len = len };
    sha256(blob, len, hd.sum);
    phx_ckd_hdr_enc(h, &hd);
    char name[64];
    snprintf(name, sizeof name, "ckpt-e%llu-r%d.bin", (unsigned long long)e, rank);
    return write_atomic(dir, name, h, sizeof h, blob, len);
}

static int slurp(const char *path, uint8_t **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st)) {
        close(fd);
        return -errno;
    }
    uint8_t *b = malloc((size_t)st.st_size + 1);
    if (!b) {
        close(fd);
        return PHX_ENOMEM;
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t k = read(fd, b + got, (size_t)st.st_size - got);
        if (k <= 0) {
            if (k < 0 && errno == EINTR)
                continue;
            break;
        }
        got += (size_t)k;
    }
    close(fd);
    *out = b;
    *len = got;
    return 0;
}

int phx_ckd_read_rank(const char *dir, uint64_t tag, uint64_t e, int rank, void **blob, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/ckpt-e%llu-r%d.bin", dir, (unsigned long long)e, rank);
    uint8_t *b;
    size_t n;
    int rc = slurp(path, &b, &n);
    if (rc) {
        fprintf(stderr, "phalanx: checkpoint file %s: %s\n", path, strerror(-rc));
        return rc;
    }
    phx_ckd_hdr_t hd;
    const char *why = NULL;
    size_t left = n >= PHX_CKD_HDR ? n - PHX_CKD_HDR : 0;
    const uint8_t *payload = b + PHX_CKD_HDR;
    if (phx_ckd_hdr_dec(b, n, &hd) || hd.magic != PHX_CKD_FILE_MAGIC)
        why = "not a Phalanx checkpoint (bad magic or truncated header)";
    else if (hd.version != PHX_CKD_VERSION)
        why = "unsupported checkpoint version";
    else if (hd.tag != tag)
        why = "foreign checkpoint: written by another program";
    else if (hd.epoch != e || hd.rank != (uint32_t)rank)
        why = "epoch or rank does not match its name";
    else if (left != hd.len)
        why = left < hd.len ? "truncated" : "trailing bytes";
    uint64_t plen = hd.len;
    if (!why) {
        uint8_t got[32];
        sha256(payload, plen, got);
        if (memcmp(got, hd.sum, 32))
            why = "corrupt: SHA-256 mismatch";
    }
    if (why) {
        fprintf(stderr, "phalanx: checkpoint file %s: %s\n", path, why);
        free(b);
        return PHX_ECHECKSUM;
    }
    memmove(b, payload, plen);
    *blob = b;
    *len = plen;
    return 0;
}

int phx_ckd_write_manifest(const char *dir, uint64_t tag, const phx_ckd_manifest_t *m)
{
    size_t body;
    uint8_t *buf = phx_ckd_manifest_enc(m, tag, &body);
    if (!buf)
        return PHX_ENOMEM;
    sha256(buf, body, buf + body);
    char name[64];
    snprintf(name, sizeof name, "manifest-e%llu.bin", (unsigned long long)m->epoch);
    int rc = write_atomic(dir, name, buf, body + 32, NULL, 0);
    free(buf);
    return rc;
}

static int read_manifest(const char *dir, uint64_t tag, uint64_t e, phx_ckd_manifest_t *m)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/manifest-e%llu.bin", dir, (unsigned long long)e);
    uint8_t *b;
    size_t n;
    int rc = slurp(path, &b, &n);
    if (rc)
        return rc;
    uint64_t t;
    size_t body;
    const uint8_t *sum;
    const char *why = NULL;
    rc = phx_ckd_manifest_dec(b, n, m, &t, &body, &sum, &why);
    if (rc == PHX_ENOMEM) {
        free(b);
        return rc;
    }
    if (!why && t != tag)
        why = "foreign manifest: written by another program";
    else if (!why && m->epoch != e)
        why = "inconsistent header";
    uint8_t got[32];
    if (!why && (sha256(b, body, got), memcmp(got, sum, 32)))
        why = "corrupt: SHA-256 mismatch";
    free(b);
    if (why) {
        fprintf(stderr, "phalanx: checkpoint manifest %s: %s\n", path, why);
        phx_ckd_manifest_free(m);
        return PHX_ECHECKSUM;
    }
    return 0;
}

/* Epochs that have a manifest, newest first. */
static int list_epochs(const char *dir, const char *prefix, uint64_t *out, int cap)
{
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    int k = 0;
    struct dirent *de;
    size_t pl = strlen(prefix);
    while ((de = readdir(d)) && k < cap) {
        unsigned long long e;
        char tail[16];
        if (strncmp(de->d_name, prefix, pl) || sscanf(de->d_name + pl, "%llu%15s", &e, tail) != 2 ||
            strcmp(tail, ".bin"))
            continue;
        out[k++] = e;
    }
    closedir(d);
    for (int i = 1; i < k; i++)   /* insertion sort, descending */
        for (int j = i; j > 0 && out[j] > out[j - 1]; j--) {
            uint64_t t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return k;
}

int phx_ckd_find(const char *dir, uint64_t tag, uint64_t max_epoch, phx_ckd_manifest_t *m)
{
    uint64_t ep[64];
    int k = list_epochs(dir, "manifest-e", ep, 64);
    if (k < 0) {
        fprintf(stderr, "phalanx: checkpoint directory %s: %s\n", dir, strerror(-k));
        return PHX_ENOENT;
    }
    for (int i = 0; i < k; i++) {
        if (ep[i] > max_epoch || read_manifest(dir, tag, ep[i], m))
            continue;
        int ok = 1;
        for (int f = 0; f < m->nfiles && ok; f++) {
            void *b;
            size_t n;
            if (phx_ckd_read_rank(dir, tag, ep[i], m->ranks[f], &b, &n))
                ok = 0;
            else
                free(b);
        }
        if (ok)
            return 0;
        fprintf(stderr, "phalanx: checkpoint epoch %llu in %s is unusable; trying an older one\n",
                (unsigned long long)ep[i], dir);
        phx_ckd_manifest_free(m);
    }
    return PHX_ENOENT;
}

void phx_ckd_prune(const char *dir, uint64_t keep)
{
    static const char *const prefix[] = { "manifest-e", "ckpt-e" };
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    char path[1024];
    while ((de = readdir(d))) {
        for (int p = 0; p < 2; p++) {
            size_t pl = strlen(prefix[p]);
            unsigned long long e;
            if (strncmp(de->d_name, prefix[p], pl) || sscanf(de->d_name + pl, "%llu", &e) != 1 || e >= keep)
                continue;
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            if (unlink(path) && errno != ENOENT)
                PHX_WARN("ckpt", "cannot remove %s: %s", path, strerror(errno));
        }
    }
    closedir(d);
}
