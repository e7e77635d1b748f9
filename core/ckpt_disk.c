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

#define FILE_MAGIC 0x54504b4358485000ull   /* "\0PHXCKPT" */
#define MANI_MAGIC 0x494e414d58485000ull   /* "\0PHXMANI" */
#define VERSION 2   /* 2: the relocation table has slices */
#define HDR (8 + 4 + 8 + 8 + 4 + 8 + 32)

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
    uint8_t h[HDR];
    phx_wenc_t en;
    phx_wenc_init(&en, h, sizeof h);
    phx_wenc_u64(&en, FILE_MAGIC);
    phx_wenc_u32(&en, VERSION);
    phx_wenc_u64(&en, tag);
    phx_wenc_u64(&en, e);
    phx_wenc_u32(&en, (uint32_t)rank);
    phx_wenc_u64(&en, len);
    uint8_t *d = phx_wenc_reserve(&en, 32);
    if (d)
        sha256(blob, len, d);
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
    phx_wdec_t d;
    phx_wdec_init(&d, b, n);
    uint64_t magic = phx_wdec_u64(&d);
    uint32_t ver = phx_wdec_u32(&d);
    uint64_t t = phx_wdec_u64(&d), ep = phx_wdec_u64(&d);
    uint32_t r = phx_wdec_u32(&d);
    uint64_t plen = phx_wdec_u64(&d);
    const uint8_t *sum = phx_wdec_take(&d, 32);
    const char *why = NULL;
    if (d.err || magic != FILE_MAGIC)
        why = "not a Phalanx checkpoint (bad magic or truncated header)";
    else if (ver != VERSION)
        why = "unsupported checkpoint version";
    else if (t != tag)
        why = "foreign checkpoint: written by another program";
    else if (ep != e || r != (uint32_t)rank)
        why = "epoch or rank does not match its name";
    else if (phx_wdec_left(&d) != plen)
        why = phx_wdec_left(&d) < plen ? "truncated" : "trailing bytes";
    if (!why) {
        uint8_t got[32];
        sha256(d.p, plen, got);
        if (memcmp(got, sum, 32))
            why = "corrupt: SHA-256 mismatch";
    }
    if (why) {
        fprintf(stderr, "phalanx: checkpoint file %s: %s\n", path, why);
        free(b);
        return PHX_ECHECKSUM;
    }
    memmove(b, d.p, plen);
    *blob = b;
    *len = plen;
    return 0;
}

int phx_ckd_write_manifest(const char *dir, uint64_t tag, const phx_ckd_manifest_t *m)
{
    size_t cap = 128 + 4 * ((size_t)m->nhome * (size_t)m->slices + (size_t)m->nfiles);
    uint8_t *buf = malloc(cap);
    if (!buf)
        return PHX_ENOMEM;
    phx_wenc_t en;
    phx_wenc_init(&en, buf, cap);
    phx_wenc_u64(&en, MANI_MAGIC);
    phx_wenc_u32(&en, VERSION);
    phx_wenc_u64(&en, tag);
    phx_wenc_u64(&en, m->epoch);
    phx_wenc_u32(&en, (uint32_t)m->size);
    phx_wenc_u32(&en, (uint32_t)m->nhome);
    phx_wenc_u32(&en, (uint32_t)m->slices);
    for (int h = 0; h < m->nhome * m->slices; h++)
        phx_wenc_i32(&en, m->loc[h]);
    phx_wenc_u32(&en, (uint32_t)m->nfiles);
    for (int i = 0; i < m->nfiles; i++)
        phx_wenc_i32(&en, m->ranks[i]);
    uint8_t *sum = phx_wenc_reserve(&en, 32);
    if (sum)
        sha256(buf, (size_t)(sum - buf), sum);
    char name[64];
    snprintf(name, sizeof name, "manifest-e%llu.bin", (unsigned long long)m->epoch);
    int rc = en.err ? en.err : write_atomic(dir, name, buf, (size_t)phx_wenc_end(&en), NULL, 0);
    free(buf);
    return rc;
}

void phx_ckd_manifest_free(phx_ckd_manifest_t *m)
{
    free(m->loc);
    free(m->ranks);
    m->loc = m->ranks = NULL;
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
    memset(m, 0, sizeof *m);
    phx_wdec_t d;
    phx_wdec_init(&d, b, n);
    const char *why = NULL;
    uint64_t magic = phx_wdec_u64(&d);
    uint32_t ver = phx_wdec_u32(&d);
    uint64_t t = phx_wdec_u64(&d);
    m->epoch = phx_wdec_u64(&d);
    m->size = (int)phx_wdec_u32(&d);
    m->nhome = (int)phx_wdec_u32(&d);
    m->slices = (int)phx_wdec_u32(&d);
    if (d.err || magic != MANI_MAGIC || ver != VERSION)
        why = "not a Phalanx manifest (bad magic, version or truncated)";
    else if (t != tag)
        why = "foreign manifest: written by another program";
    else if (m->epoch != e || m->size < 1 || m->size > 65535 || m->nhome < m->size || m->nhome > 65535 ||
             m->slices < 1 || m->slices > 1024)
        why = "inconsistent header";
    if (!why) {
        m->loc = calloc((size_t)m->nhome * (size_t)m->slices, sizeof *m->loc);
        for (int h = 0; m->loc && h < m->nhome * m->slices; h++)
            m->loc[h] = phx_wdec_i32(&d);
        m->nfiles = (int)phx_wdec_u32(&d);
        if (!m->loc || d.err || m->nfiles < 1 || m->nfiles > m->size)
            why = "truncated or inconsistent";
    }
    if (!why) {
        m->ranks = calloc((size_t)m->nfiles, sizeof *m->ranks);
        for (int i = 0; m->ranks && i < m->nfiles; i++)
            m->ranks[i] = phx_wdec_i32(&d);
        size_t body = (size_t)(d.p - d.start);
        const uint8_t *sum = phx_wdec_take(&d, 32);
        uint8_t got[32];
        if (!m->ranks || !sum || phx_wdec_end(&d, 1))
            why = "truncated";
        else if (sha256(b, body, got), memcmp(got, sum, 32))
            why = "corrupt: SHA-256 mismatch";
    }
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
