/* The transport's evidence that a peer's process ended (net/transport.h,
 * phx_net_peer_reached), over real loopback sockets: rank 0 in this
 * process, rank 1 in a child that is SIGKILLed. Each case makes the
 * interleaving it tests happen by construction: the child is reaped and its
 * FIN is seen in our socket (poll) before the case acts, with the loop not
 * run in between, so nothing has read the end yet. */
#define _GNU_SOURCE   /* POLLRDHUP */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net/transport.h"

static const uint8_t secret[] = "test-transport-secret";

typedef struct {
    int up[2];
} seen_t;

static void on_frame(void *ctx, int peer, const phx_frame_hdr_t *h, const uint8_t *p)
{
    (void)ctx, (void)peer, (void)h, (void)p;
}
static void on_up(void *ctx, int peer, uint32_t inc)
{
    (void)inc;
    ((seen_t *)ctx)->up[peer] = 1;
}
static void on_down(void *ctx, int peer, int graceful, const char *why)
{
    (void)ctx, (void)peer, (void)graceful, (void)why;
}
static void on_fatal(void *ctx, int code, const char *why)
{
    (void)ctx;
    fprintf(stderr, "transport fatal %d: %s\n", code, why);
    _exit(3);
}

/* A free port pair: bound and released (the test owns loopback for a
 * moment; a clash fails the bind loudly, not the result). */
static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t l = sizeof a;
    assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(s, (struct sockaddr *)&a, &l), 0);
    close(s);
    return ntohs(a.sin_port);
}

static phx_net_t *start(uv_loop_t *loop, int rank, const phx_net_addr_t *peers, seen_t *seen)
{
    phx_net_cfg_t cfg = { .rank = rank, .size = 2, .job_id = 7, .peers = peers, .listen_fd = -1,
                          .startup_timeout_ms = 10000, .hb_timeout_ms = 1000, .max_frame = 1 << 20 };
    phx_net_cb_t cb = { .ctx = seen, .on_frame = on_frame, .on_peer_up = on_up,
                        .on_peer_down = on_down, .on_fatal = on_fatal };
    phx_net_t *n = NULL;
    assert_int_equal(phx_net_start(loop, &cfg, secret, sizeof secret, 0, &cb, &n), 0);
    return n;
}

/* Our end of the connection to rank 1: the socket whose local port is ours
 * and that has a peer (the listener has none). */
static int conn_fd(int port)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int found = -1;
    for (struct dirent *e; (e = readdir(d));) {
        int fd = atoi(e->d_name);
        struct sockaddr_in a, b;
        socklen_t la = sizeof a, lb = sizeof b;
        if (fd > 2 && getsockname(fd, (struct sockaddr *)&a, &la) == 0 && a.sin_family == AF_INET &&
            ntohs(a.sin_port) == port && getpeername(fd, (struct sockaddr *)&b, &lb) == 0)
            found = fd;
    }
    closedir(d);
    return found;
}

/* A peer declared dead (by a broadcast, say) while the FIN of its ended
 * process waits unread in our socket: closing the connection on the
 * declaration must keep that evidence. Without it the failure looks like
 * silence, and ft/fence holds the notice (and may take the node for the
 * minority side of a partition) although the peer's kernel answered. */
static void declared_with_fin_unread(void **state)
{
    (void)state;
    phx_net_addr_t peers[2] = { { "127.0.0.1", free_port() }, { "127.0.0.1", free_port() } };
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        uv_loop_t loop;
        seen_t seen = { { 0 } };
        uv_loop_init(&loop);
        start(&loop, 1, peers, &seen);
        uv_run(&loop, UV_RUN_DEFAULT);   /* until SIGKILLed */
        _exit(4);
    }
    uv_loop_t loop;
    seen_t seen = { { 0 } };
    uv_loop_init(&loop);
    phx_net_t *n = start(&loop, 0, peers, &seen);
    while (!seen.up[1])
        uv_run(&loop, UV_RUN_ONCE);   /* bounded by the startup timeout (on_fatal) */
    int fd = conn_fd(peers[0].port);
    assert_true(fd >= 0);
    kill(child, SIGKILL);
    int st;
    assert_int_equal(waitpid(child, &st, 0), child);
    struct pollfd p = { .fd = fd, .events = POLLRDHUP };
    assert_int_equal(poll(&p, 1, 10000), 1);   /* the FIN is in; the loop has not read it */
    assert_int_equal(phx_net_peer_reached(n, 1), 0);
    phx_net_close_inc(n, 1, 0, "declared dead");
    assert_int_equal(phx_net_peer_reached(n, 1), 1);
    phx_net_stop(n, NULL, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    phx_net_free(n);
    uv_loop_close(&loop);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(declared_with_fin_unread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
