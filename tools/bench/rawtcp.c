/* rawtcp: the baseline Phalanx is measured against. Two processes on
 * loopback, plain TCP, no framing beyond what each mode needs.
 * Usage: rawtcp lat|rate|bw [--spin] [N] [SIZE]
 *        rawtcp ring K [N] [SIZE]
 *   lat:  SIZE-byte round trips (blocking reads, or non-blocking spinning
 *         reads with --spin), prints the median round trip;
 *   rate: N SIZE-byte messages, one write each, then a 1-byte ack;
 *   bw:   N SIZE-byte messages, then a 1-byte ack;
 *   ring: K processes, each sends N SIZE-byte messages to the next while it
 *         receives as many from the one before, all at once: the traffic of
 *         a buddy checkpoint of K nodes on one host, so the per-node figure
 *         is what the same cores can move in that pattern.
 * Output matches apps/pingpong so tools/bench/bench.sh can compare them. */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int spin;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void read_full(int fd, void *p, size_t n)
{
    while (n) {
        ssize_t r = recv(fd, p, n, spin ? MSG_DONTWAIT : 0);
        if (r > 0) {
            p = (char *)p + r;
            n -= (size_t)r;
        } else if (r == 0) {
            fprintf(stderr, "rawtcp: peer closed\n");
            exit(1);
        } else if (errno != EAGAIN && errno != EINTR) {
            die("recv");
        }
    }
}

static void write_full(int fd, const void *p, size_t n)
{
    while (n) {
        ssize_t r = send(fd, p, n, 0);
        if (r > 0) {
            p = (const char *)p + r;
            n -= (size_t)r;
        } else if (errno != EAGAIN && errno != EINTR) {
            die("send");
        }
    }
}

struct tx {
    int fd;
    uint64_t n;
    size_t size;
};

static void *tx_main(void *arg)
{
    struct tx *t = arg;
    char *b = calloc(1, t->size);
    if (!b)
        die("calloc");
    for (uint64_t i = 0; i < t->n; i++)
        write_full(t->fd, b, t->size);
    free(b);
    return NULL;
}

static int listen_any(struct sockaddr_in *sa)
{
    socklen_t sl = sizeof *sa;
    *sa = (struct sockaddr_in){ .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    if (ls < 0 || bind(ls, (struct sockaddr *)sa, sizeof *sa) || listen(ls, 1) ||
        getsockname(ls, (struct sockaddr *)sa, &sl))
        die("listen");
    return ls;
}

/* K ring members; the parent starts them together once all are connected
 * (one byte down each go pipe) and times until the last one finished. */
static int ring(int k, uint64_t n, size_t size)
{
    if (k < 2 || k > 64)
        return 2;
    struct sockaddr_in sa[64];
    int ls[64], go[64][2], ready[2];
    if (pipe(ready))
        die("pipe");
    for (int i = 0; i < k; i++) {
        ls[i] = listen_any(&sa[i]);
        if (pipe(go[i]))
            die("pipe");
    }
    for (int i = 0; i < k; i++) {
        if (fork())
            continue;
        int one = 1, out = socket(AF_INET, SOCK_STREAM, 0);
        if (out < 0 || connect(out, (struct sockaddr *)&sa[(i + 1) % k], sizeof sa[0]))
            die("connect");
        int in = accept(ls[i], NULL, NULL);
        if (in < 0)
            die("accept");
        setsockopt(out, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        char c = 'r', *b = malloc(size);
        if (!b || write(ready[1], &c, 1) != 1 || read(go[i][0], &c, 1) != 1)
            die("ring start");
        struct tx t = { out, n, size };
        pthread_t th;
        if (pthread_create(&th, NULL, tx_main, &t))
            die("pthread_create");
        for (uint64_t j = 0; j < n; j++)
            read_full(in, b, size);
        pthread_join(th, NULL);
        _exit(0);
    }
    char c;
    for (int i = 0; i < k; i++)
        if (read(ready[0], &c, 1) != 1)
            die("ring ready");
    uint64_t t0 = now_ns();
    for (int i = 0; i < k; i++)
        if (write(go[i][1], "g", 1) != 1)
            die("ring go");
    int bad = 0, st;
    for (int i = 0; i < k; i++)
        if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
            bad = 1;
    double el = (double)(now_ns() - t0) / 1e9;
    if (bad)
        return 1;
    printf("rawtcp ring k=%d size=%zu n=%llu MiB_per_s=%.1f\n", k, size, (unsigned long long)n,
           (double)n * (double)size / el / (1 << 20));
    return 0;
}

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int ai = 1;
    if (argc < 2) {
        fprintf(stderr, "usage: rawtcp lat|rate|bw [--spin] [N] [SIZE] | ring K [N] [SIZE]\n");
        return 2;
    }
    const char *mode = argv[ai++];
    if (!strcmp(mode, "ring")) {
        int k = ai < argc ? atoi(argv[ai++]) : 4;
        uint64_t n = ai < argc ? strtoull(argv[ai++], NULL, 10) : 300;
        size_t size = ai < argc ? strtoul(argv[ai++], NULL, 10) : 1u << 20;
        return n && size ? ring(k, n, size) : 2;
    }
    if (ai < argc && !strcmp(argv[ai], "--spin")) {
        spin = 1;
        ai++;
    }
    int bw = !strcmp(mode, "bw"), lat = !strcmp(mode, "lat");
    uint64_t n = ai < argc ? strtoull(argv[ai++], NULL, 10) : (lat ? 20000 : bw ? 2000 : 2000000);
    size_t size = ai < argc ? strtoul(argv[ai++], NULL, 10) : (bw ? 1u << 20 : 8);
    if (!n || !size)
        return 2;

    struct sockaddr_in sa;
    int ls = listen_any(&sa);
    char *buf = calloc(1, size);
    int one = 1;
    pid_t pid = fork();
    if (pid == 0) {   /* server: echo for lat, sink for rate/bw */
        int fd = accept(ls, NULL, NULL);
        if (fd < 0)
            die("accept");
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        for (uint64_t i = 0; i < n; i++) {
            read_full(fd, buf, size);
            if (lat)
                write_full(fd, buf, size);
        }
        if (!lat)
            write_full(fd, "k", 1);
        _exit(0);
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa))
        die("connect");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    uint64_t t0 = now_ns();
    if (lat) {
        uint64_t *rtt = calloc(n, sizeof *rtt);
        for (uint64_t i = 0; i < n; i++) {
            uint64_t t = now_ns();
            write_full(fd, buf, size);
            read_full(fd, buf, size);
            rtt[i] = now_ns() - t;
        }
        qsort(rtt, n, sizeof *rtt, cmp);
        printf("rawtcp%s lat size=%zu n=%llu median_us=%.2f p10_us=%.2f p90_us=%.2f\n", spin ? "-spin" : "",
               size, (unsigned long long)n, rtt[n / 2] / 1e3, rtt[n / 10] / 1e3, rtt[n * 9 / 10] / 1e3);
        free(rtt);
    } else {
        for (uint64_t i = 0; i < n; i++)
            write_full(fd, buf, size);
        read_full(fd, buf, 1);
        double el = (double)(now_ns() - t0) / 1e9;
        if (bw)
            printf("rawtcp bw size=%zu n=%llu MiB_per_s=%.1f\n", size, (unsigned long long)n,
                   (double)n * (double)size / el / (1 << 20));
        else
            printf("rawtcp rate size=%zu n=%llu msgs_per_s=%.0f\n", size, (unsigned long long)n, (double)n / el);
    }
    waitpid(pid, NULL, 0);
    free(buf);
    return 0;
}
