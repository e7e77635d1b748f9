#include "base/place/phx_place.h"

#include "base/phx_err.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Binds a probe to (host, 0), listening, and returns its fd (>= 4: the
 * node's stdio and status fd 3 are dup2 targets in the child), with the
 * port in *port. Listening, it holds the port: Linux lets two SO_REUSEADDR
 * sockets bind one port while neither listens. */
static int probe(const char *host, int *port)
{
    /* IPv4 first: the transport resolves peers with AF_INET, so the probe
     * must test the address the node will actually bind. */
    struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *ai;
    int rc = getaddrinfo(host, "0", &hints, &ai);
    if (rc) {
        hints.ai_family = AF_UNSPEC;
        rc = getaddrinfo(host, "0", &hints, &ai);
    }
    if (rc)
        return rc == EAI_SYSTEM ? -errno : PHX_ENOENT;
    int fd = -1, err = PHX_EIO;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            err = -errno;
            continue;
        }
        int one = 1;
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        if (fd < 4) {
            int hi = fcntl(fd, F_DUPFD_CLOEXEC, 4);
            close(fd);
            if ((fd = hi) < 0) {
                err = -errno;
                continue;
            }
        }
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
            bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0 &&
            getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
            *port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                   : ((struct sockaddr_in *)&ss)->sin_port);
            break;
        }
        err = -errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    return fd >= 0 ? fd : err;
}

int phx_rt_probe_ports(phx_ranktab_t *rt)
{
    /* Duplicate ports are retried with the earlier probe still open, hence
     * room for more fds than ranks. The chosen ones go to rt. */
    int cap = rt->n * 2 + 8, nfd = 0, rc = 0;
    int *fds = malloc((size_t)cap * sizeof *fds);
    if (!fds)
        return PHX_ENOMEM;
    for (int r = 0; r < rt->n && !rc; r++) {
        if (!rt->r[r].local)
            continue;
        for (;;) {
            int port = 0, fd = probe(rt->r[r].host, &port);
            if (fd < 0) {
                rc = fd;
                break;
            }
            if (nfd == cap) {
                close(fd);
                rc = PHX_EAGAIN;
                break;
            }
            fds[nfd++] = fd;
            int dup = 0;
            for (int q = 0; q < r && !dup; q++)
                dup = rt->r[q].local && rt->r[q].port == port;
            if (!dup) {
                rt->r[r].port = port;
                rt->r[r].listen_fd = fd;
                nfd--;   /* kept */
                break;
            }
        }
    }
    for (int i = 0; i < nfd; i++)
        close(fds[i]);
    free(fds);
    return rc;   /* on failure, phx_rt_free closes those kept */
}
