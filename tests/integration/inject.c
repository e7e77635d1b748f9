/* phx-inject: a hostile or broken peer, for the transport's bad-input tests.
 * Usage: phx-inject HOST PORT MODE [RANK JOBID]
 * Pre-authentication modes: garbage badmagic badversion badtype badflags
 *   badcrc oversize truncated preauth-app wrongsecret
 * Post-authentication modes (complete the handshake as RANK with the real
 * secret from PHX_SECRET, then misbehave): auth-badcrc auth-garbage auth-oversize
 *   auth-oldinc (an APP frame of another incarnation, which the node must
 *   drop unseen, then a data frame without a link sequence number, which
 *   makes it close), auth-badpayload (a well-framed, sequenced APP frame
 *   addressed to a task that does not live on the node: its protocol
 *   rejects it), auth-big (the same with a 1 MiB payload written in
 *   pieces, so the node receives it in place over several reads),
 *   auth-bigbadcrc (that, with one payload bit flipped near its end)
 * Exit 0 if the node closed the connection within 10 s, 1 if it did not,
 * 2 on a setup error (could not connect, handshake failed). */
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/auth.h"
#include "net/frame.h"

static int fd;

static void put(const void *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w <= 0)
            return;   /* the node may already have closed: that is the point */
        p = (const char *)p + w;
        n -= (size_t)w;
    }
}

static int get(void *p, size_t n)
{
    while (n) {
        struct pollfd pf = { fd, POLLIN, 0 };
        if (poll(&pf, 1, 10000) <= 0)
            return -1;
        ssize_t r = read(fd, p, n);
        if (r <= 0)
            return -1;
        p = (char *)p + r;
        n -= (size_t)r;
    }
    return 0;
}

static void frame(int type, const void *payload, size_t len)
{
    uint8_t hdr[PHX_FRAME_HDR];
    phx_frame_hdr_t h = { .type = (uint8_t)type, .len = (uint32_t)len };
    phx_frame_encode(hdr, &h, payload);
    put(hdr, sizeof hdr);
    put(payload, len);
}

static int read_frame(phx_frame_hdr_t *h, uint8_t *payload, size_t cap)
{
    uint8_t hdr[PHX_FRAME_HDR];
    if (get(hdr, sizeof hdr))
        return -1;
    const char *why;
    uint8_t buf[PHX_FRAME_HDR + 256];
    memcpy(buf, hdr, sizeof hdr);
    h->len = hdr[8] | hdr[9] << 8 | hdr[10] << 16 | (uint32_t)hdr[11] << 24;
    if (h->len > cap || h->len > 256 || get(buf + PHX_FRAME_HDR, h->len))
        return -1;
    if (phx_frame_decode(buf, PHX_FRAME_HDR + h->len, 256, h, &why) < 0)
        return -1;
    memcpy(payload, buf + PHX_FRAME_HDR, h->len);
    return 0;
}

static int handshake(const char *secret, int rank, uint64_t job, int expect_peer)
{
    phx_auth_t *a;
    if (phx_auth_create((const uint8_t *)secret, strlen(secret), (uint32_t)rank, 0, job, expect_peer, &a))
        return -1;
    uint8_t hello[64], auth[64], in[256];
    int n = phx_auth_hello(a, hello, sizeof hello);
    frame(PHX_FT_HELLO, hello, (size_t)n);
    phx_frame_hdr_t h;
    if (read_frame(&h, in, sizeof in) || h.type != PHX_FT_HELLO)
        return -1;
    n = phx_auth_on_hello(a, in, h.len, auth, sizeof auth);
    if (n < 0)
        return -1;
    frame(PHX_FT_AUTH, auth, (size_t)n);
    if (read_frame(&h, in, sizeof in) || h.type != PHX_FT_AUTH)
        return -2;   /* the node refused us */
    int ok = phx_auth_on_auth(a, in, h.len);
    phx_auth_destroy(a);
    return ok == 0 ? 0 : -1;
}

static void corrupt(const char *mode)
{
    uint8_t hdr[PHX_FRAME_HDR + 16];
    uint8_t payload[16] = "0123456789abcdef";
    phx_frame_hdr_t h = { .type = PHX_FT_APP, .len = 16, .dst = 1ull << 48 };
    phx_frame_encode(hdr, &h, payload);
    memcpy(hdr + PHX_FRAME_HDR, payload, 16);
    if (strstr(mode, "garbage")) {
        for (size_t i = 0; i < sizeof hdr; i++)
            hdr[i] = (uint8_t)(i * 37 + 11);
    } else if (!strcmp(mode, "badmagic")) {
        hdr[0] ^= 0xff;
    } else if (!strcmp(mode, "badversion")) {
        hdr[4] = 99;
    } else if (!strcmp(mode, "badtype")) {
        hdr[5] = 200;
    } else if (!strcmp(mode, "badflags")) {
        hdr[7] = 0x80;
    } else if (strstr(mode, "badcrc")) {
        hdr[PHX_FRAME_HDR + 3] ^= 1;
    } else if (strstr(mode, "oversize")) {
        hdr[11] = 0x7f;
    } else if (!strcmp(mode, "truncated")) {
        put(hdr, 20);
        shutdown(fd, SHUT_WR);
        return;
    }
    put(hdr, sizeof hdr);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: phx-inject HOST PORT MODE [RANK JOBID]\n");
        return 2;
    }
    const char *mode = argv[3];
    int rank = argc > 4 ? atoi(argv[4]) : 1;
    uint64_t job = argc > 5 ? strtoull(argv[5], NULL, 10) : 0;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2])) };
    if (inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1)
        return 2;
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
        perror("phx-inject: connect");
        return 2;
    }
    if (!strcmp(mode, "wrongsecret")) {
        int rc = handshake("not-the-cluster-secret", rank, job, -1);
        if (rc == 0) {
            fprintf(stderr, "phx-inject: node accepted a wrong secret\n");
            return 1;
        }
    } else if (!strcmp(mode, "preauth-app")) {
        uint8_t p[8] = {0};
        frame(PHX_FT_APP, p, sizeof p);
    } else if (!strncmp(mode, "auth-", 5)) {
        const char *s = getenv("PHX_SECRET");
        if (!s || handshake(s, rank, job, -1)) {
            fprintf(stderr, "phx-inject: handshake failed\n");
            return 2;
        }
        if (!strcmp(mode, "auth-oldinc")) {
            uint8_t hdr[PHX_FRAME_HDR], p[8] = {0};
            phx_frame_hdr_t h = { .type = PHX_FT_APP, .len = sizeof p, .inc = 99, .lseq = 1 };
            phx_frame_encode(hdr, &h, p);
            put(hdr, sizeof hdr);
            put(p, sizeof p);
            frame(PHX_FT_APP, p, sizeof p);   /* incarnation 0, lseq 0 */
        } else if (!strcmp(mode, "auth-badpayload")) {
            uint8_t hdr[PHX_FRAME_HDR], p[64] = {0};
            /* home rank 2 (tid >> 48, minus 1): not this node */
            phx_frame_hdr_t h = { .type = PHX_FT_APP, .len = sizeof p, .dst = 3ull << 48, .lseq = 1 };
            phx_frame_encode(hdr, &h, p);
            put(hdr, sizeof hdr);
            put(p, sizeof p);
        } else if (!strncmp(mode, "auth-big", 8)) {
            size_t len = 1u << 20;
            uint8_t hdr[PHX_FRAME_HDR], *p = calloc(1, len);
            if (!p)
                return 2;
            for (size_t i = 0; i < len; i++)
                p[i] = (uint8_t)(i * 131 + 7);
            phx_frame_hdr_t h = { .type = PHX_FT_APP, .len = (uint32_t)len, .dst = 3ull << 48, .lseq = 1 };
            phx_frame_encode(hdr, &h, p);
            if (strstr(mode, "badcrc"))
                p[len - 100] ^= 4;
            put(hdr, sizeof hdr);
            /* In pieces with pauses: the node's reads end inside the payload. */
            const struct timespec pause = { 0, 20 * 1000 * 1000 };
            for (size_t off = 0, k = 1000; off < len; off += k, k = k < 300000 ? k * 4 : k) {
                put(p + off, off + k > len ? len - off : k);
                nanosleep(&pause, NULL);
            }
            free(p);
        } else {
            corrupt(mode);
        }
    } else {
        corrupt(mode);
    }
    /* The node must close on us: drain until EOF. */
    uint8_t sink[4096];
    for (;;) {
        struct pollfd pf = { fd, POLLIN, 0 };
        if (poll(&pf, 1, 10000) <= 0) {
            fprintf(stderr, "phx-inject: %s: node did not close the connection\n", mode);
            return 1;
        }
        if (read(fd, sink, sizeof sink) <= 0)
            break;
    }
    printf("phx-inject: %s: connection closed by node\n", mode);
    return 0;
}
