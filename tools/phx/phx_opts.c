#define _GNU_SOURCE   /* sched_getaffinity */
#include "phx_opts.h"

#include "base/phx_err.h"
#include "core/config.h"

#include <ctype.h>
#include <netdb.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

const char *phx_opts_respell(const char *arg, char *buf, size_t cap)
{
    if (!strcmp(arg, "-np"))
        return "--np";
    if (arg[0] == '+' && arg[1] == 'p' && arg[2] && strspn(arg + 2, "0123456789") == strlen(arg + 2) &&
        (size_t)snprintf(buf, cap, "--np=%s", arg + 2) < cap)
        return buf;
    return arg;
}

int phx_opts_cpus(void)
{
    cpu_set_t cs;
    long n = sched_getaffinity(0, sizeof cs, &cs) == 0 ? CPU_COUNT(&cs) : sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int phx_opts_check_slots(int nranks, int nlocal, int slots, int cores, int oversubscribe)
{
    const char *what = cores ? " (this host's CPU cores)" : "";
    struct rlimit rl;
    if (!oversubscribe && nlocal > 0 && getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (rlim_t)nlocal > rl.rlim_cur) {
        fprintf(stderr, "phx: %d nodes on this host is more than its process limit allows (ulimit -u: %llu); "
                        "refused (--oversubscribe starts them anyway)\n", nlocal,
                (unsigned long long)rl.rlim_cur);
        return 2;
    }
    if (nranks <= slots || oversubscribe)
        return 0;
    if ((long)nranks > (long)slots * PHX_OPTS_PER_SLOT) {
        fprintf(stderr, "phx: %d nodes on %d slot%s%s is over %d per slot; refused (--oversubscribe starts "
                        "them anyway)\n", nranks, slots, slots == 1 ? "" : "s", what, PHX_OPTS_PER_SLOT);
        return 2;
    }
    fprintf(stderr, "phx: %d nodes on %d slot%s%s: oversubscribing, nodes share cores (--oversubscribe "
                    "says this is meant)\n", nranks, slots, slots == 1 ? "" : "s", what);
    return 0;
}

int phx_opts_resolve(const phx_ranktab_t *rt, const char *rsh)
{
    const char *base = strrchr(rsh, '/');
    base = base ? base + 1 : rsh;
    if (strcmp(base, "ssh"))
        return 0;   /* another remote shell (docker exec, ...) names its targets its own way */
    for (int i = 0; i < rt->n; i++) {
        const char *h = rt->r[i].host;
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = !strcmp(rt->r[j].host, h);
        if (rt->r[i].local || seen)
            continue;
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
        int e = getaddrinfo(h, NULL, &hints, &res);
        if (res)
            freeaddrinfo(res);
        if (e) {
            fprintf(stderr, "phx: host '%s' is unresolvable: %s\n", h, gai_strerror(e));
            return 2;
        }
    }
    return 0;
}

int phx_opts_export(const char *spec, const char ***names, int *n)
{
    size_t nl = strcspn(spec, "=");
    int ok = nl > 0 && (isalpha((unsigned char)spec[0]) || spec[0] == '_');
    for (size_t i = 1; ok && i < nl; i++)
        ok = isalnum((unsigned char)spec[i]) || spec[i] == '_';
    if (!ok) {
        fprintf(stderr, "phx: -x wants VAR or VAR=VALUE (VAR a shell name), got '%s'\n", spec);
        return 2;
    }
    char *name = strndup(spec, nl);
    if (!name)
        return 1;
    int rc = 0;
    if (spec[nl] == '=') {
        if (setenv(name, spec + nl + 1, 1))
            rc = 1;
    } else if (!getenv(name)) {
        fprintf(stderr, "phx: -x %s: %s is not set here (-x %s=VALUE sets it)\n", name, name, name);
        rc = 2;
    }
    const char **v = rc ? NULL : realloc(*names, (size_t)(*n + 2) * sizeof *v);
    if (!rc && !v)
        rc = 1;
    if (!rc) {
        v[(*n)++] = name;
        v[*n] = NULL;
        *names = v;
    } else {
        free(name);
    }
    return rc;
}

int phx_opts_check_runtime(char **prog, int size, int cpus, int *ft, int *respawn)
{
    int argc = 0;
    while (prog[argc])
        argc++;
    phx_config_t cfg;
    int rc = phx_config_check(argc, prog, cpus, size, &cfg);
    if (rc == PHX_ENOMEM) {
        fprintf(stderr, "phx: out of memory\n");
        return 1;
    }
    if (rc)
        return 2;
    *ft = cfg.ft;
    *respawn = !strcmp(cfg.restart_on, "respawn");
    return 0;
}
