#define _GNU_SOURCE
#include "config.h"

#include <ctype.h>
#include <sched.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/phx_err.h"
#include "base/phx_log.h"
#include "core/phalanx.h"
#include "tools/phx/phx_hostfile.h"

enum opt_kind { OPT_INT, OPT_I64, OPT_BOOL, OPT_STR };

typedef struct opt {
    const char *key;
    enum opt_kind kind;
    size_t off, size;
    const char *def;
    const char *help;
    const char *valid;          /* what a good value looks like (NULL: by kind) */
} opt_t;

#define O(k, kind, field, def, help, valid) \
    { k, kind, offsetof(phx_config_t, field), sizeof(((phx_config_t *)0)->field), def, help, valid }
static const opt_t opts[] = {
    O("workers", OPT_INT, workers, "auto", "worker threads (auto: this node's share of the cores - 1, "
      "at least 1; 0: none, the communication thread runs the handlers: inline mode)",
      "auto, 0 (inline mode) or a number of threads"),
    O("busy-poll", OPT_BOOL, busy_poll, "0", "spin on queues instead of sleeping (trades a core for latency)", NULL),
    O("linger-us", OPT_INT, linger_us, "50", "idle threads yield-spin this long before sleeping (0: sleep at once)", NULL),
    O("startup-timeout", OPT_INT, startup_timeout_ms, "30000", "ms to wait for peers at startup", NULL),
    O("send-buffer", OPT_I64, send_buffer, "67108864", "bytes queued per peer before senders block", NULL),
    O("recv-buffer", OPT_I64, recv_buffer, "268435456", "undelivered inbound bytes before reading pauses", NULL),
    O("max-frame", OPT_I64, max_frame, "268435456", "largest accepted message payload in bytes", NULL),
    O("td", OPT_STR, td, "", "termination detector (default 4c, rellazy with ft)",
      "none, 4c, edod, hcda, cda, indep, rellazy or releager"),
    O("ft", OPT_BOOL, ft, "0", "fault tolerance: failure detection and notification", NULL),
    O("hb-timeout", OPT_INT, hb_timeout_ms, "1000", "suspicion timeout delta in ms", "a positive number of ms, e.g. 1000"),
    O("hb-period", OPT_INT, hb_period_ms, "0", "heartbeat period eta in ms (0: delta/10)", NULL),
    O("eventlog", OPT_STR, eventlog, "", "JSON-lines event log file (%r is replaced by the rank)", NULL),
    O("metrics-port", OPT_INT, metrics_port, "0", "serve Prometheus /metrics on this port + rank (0: off)",
      "a TCP port such that port + rank <= 65535, or 0"),
    O("log", OPT_STR, log, "warn", "log level", "error, warn, info or debug"),
    O("recovery", OPT_STR, recovery, "none", "recovery mode (checkpoint/restart and message logging need ft)", "none, cr, mlog-causal, mlog-pessimistic, mlog-fast or mlog-team"),
    O("mlog-team-size", OPT_INT, mlog_team_size, "2", "recovery=mlog-team: consecutive ranks per team (1: mlog-causal)",
      "a whole number of nodes >= 1, e.g. 2"),
    O("ckpt-interval", OPT_INT, ckpt_interval, "0",
      "seconds between automatic checkpoints under recovery=cr (0: only phx_checkpoint)", "a whole number of seconds >= 0, e.g. 10"),
    O("ckpt-dir", OPT_STR, ckpt_dir, "", "directory for disk checkpoints under recovery=cr (\"\": memory only)", NULL),
    O("restart", OPT_STR, restart, "", "restart a recovery=cr job from the last disk checkpoint in this directory", NULL),
    O("restart-on", OPT_STR, restart_on, "survivors", "where a lost node's tasks restart under recovery=cr",
      "survivors, spare or respawn"),
    O("spares", OPT_INT, spares, "0", "idle spare nodes among the ranks (the last ones; set by phx run --spares)",
      NULL),
    O("recovery-helpers", OPT_INT, recovery_helpers, "0",
      "survivors that take a lost node's tasks: its buddy and the next P-1 live ranks (0: every live rank)",
      "a whole number of nodes >= 0 (0: every live rank), e.g. 2"),
};
#undef O
#define NOPTS (sizeof opts / sizeof opts[0])

static const opt_t *find_opt(const char *key, size_t n)
{
    for (size_t i = 0; i < NOPTS; i++)
        if (strlen(opts[i].key) == n && strncmp(opts[i].key, key, n) == 0)
            return &opts[i];
    return NULL;
}

static int parse_i64(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    if (errno || end == s)
        return PHX_EINVAL;
    /* k/m/g suffixes keep buffer sizes readable in config files */
    switch (tolower((unsigned char)*end)) {
    case 'k': v <<= 10; end++; break;
    case 'm': v <<= 20; end++; break;
    case 'g': v <<= 30; end++; break;
    }
    if (*end)
        return PHX_EINVAL;
    *out = v;
    return 0;
}

static int set_opt(phx_config_t *cfg, const opt_t *o, const char *val, const char *src)
{
    char *f = (char *)cfg + o->off;
    int64_t v;
    switch (o->kind) {
    case OPT_INT:
    case OPT_I64:
        if (o->off == offsetof(phx_config_t, workers) && !strcasecmp(val, "auto")) {
            *(int *)f = -1;   /* chosen once the configuration is complete */
            return 0;
        }
        if (parse_i64(val, &v) || v < 0 || (o->kind == OPT_INT && v > 0x7fffffff))
            goto bad;
        if (o->kind == OPT_INT)
            *(int *)f = (int)v;
        else
            *(int64_t *)f = v;
        return 0;
    case OPT_BOOL:
        if (!strcmp(val, "1") || !strcasecmp(val, "on") || !strcasecmp(val, "true") || !strcasecmp(val, "yes"))
            *(int *)f = 1;
        else if (!strcmp(val, "0") || !strcasecmp(val, "off") || !strcasecmp(val, "false") || !strcasecmp(val, "no"))
            *(int *)f = 0;
        else
            goto bad;
        return 0;
    case OPT_STR:
        if (strlen(val) >= o->size)
            goto bad;
        strcpy(f, val);
        return 0;
    }
bad:;
    char room[48];
    const char *want = o->valid;
    if (!want) {
        switch (o->kind) {
        case OPT_INT: want = "a whole number from 0 to 2147483647"; break;
        case OPT_I64: want = "a byte count, with an optional k, m or g suffix (e.g. 64m)"; break;
        case OPT_BOOL: want = "on or off (also 1/0, true/false, yes/no)"; break;
        case OPT_STR:
            snprintf(room, sizeof room, "at most %zu characters", o->size - 1);
            want = room;
            break;
        }
    }
    fprintf(stderr, "phalanx: bad value '%s' for option %s (from %s): expected %s\n", val, o->key,
            src, want);
    return PHX_EINVAL;
}

static void trim(char **s)
{
    while (isspace((unsigned char)**s))
        (*s)++;
    char *e = *s + strlen(*s);
    while (e > *s && isspace((unsigned char)e[-1]))
        *--e = 0;
}

static int load_file(phx_config_t *cfg, const char *path, unsigned char *set)
{
    FILE *fp = fopen(path, "r");
    if (!fp) {
        fprintf(stderr, "phalanx: cannot open config file '%s' (--phx-config / PHX_CONFIG): %s\n", path,
                strerror(errno));
        return PHX_ENOENT;
    }
    char line[1024], src[600];
    int ln = 0, rc = 0;
    while (!rc && fgets(line, sizeof line, fp)) {
        ln++;
        char *s = line, *hash = strchr(s, '#');
        if (hash)
            *hash = 0;
        trim(&s);
        if (!*s)
            continue;
        char *eq = strchr(s, '=');
        snprintf(src, sizeof src, "%s:%d", path, ln);
        if (!eq) {
            fprintf(stderr, "phalanx: %s: expected 'key = value'\n", src);
            rc = PHX_EINVAL;
            break;
        }
        *eq = 0;
        char *k = s, *v = eq + 1;
        trim(&k);
        trim(&v);
        const opt_t *o = find_opt(k, strlen(k));
        if (!o) {
            fprintf(stderr, "phalanx: %s: unknown option '%s'\n", src, k);
            rc = PHX_EINVAL;
            break;
        }
        if (!set[o - opts])   /* flags and environment win */
            rc = set_opt(cfg, o, v, src);
    }
    fclose(fp);
    return rc;
}

static int parse_peers(phx_config_t *cfg, const char *list)
{
    cfg->peers = calloc((size_t)cfg->size, sizeof *cfg->peers);
    if (!cfg->peers)
        return PHX_ENOMEM;
    const char *p = list;
    for (int r = 0; r < cfg->size; r++) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        const char *colon = memrchr(p, ':', n);
        if (!colon || colon == p || (size_t)(colon - p) >= sizeof cfg->peers[r].host) {
            fprintf(stderr, "phalanx: PHX_PEERS entry %d is not host:port\n", r);
            return PHX_EINVAL;
        }
        memcpy(cfg->peers[r].host, p, (size_t)(colon - p));
        char *end;
        long port = strtol(colon + 1, &end, 10);
        if (end != p + n || port <= 0 || port > 65535) {
            fprintf(stderr, "phalanx: PHX_PEERS entry %d has a bad port\n", r);
            return PHX_EINVAL;
        }
        cfg->peers[r].port = (int)port;
        if (!e && r + 1 < cfg->size) {
            fprintf(stderr, "phalanx: PHX_PEERS lists %d peers, PHX_SIZE is %d\n", r + 1, cfg->size);
            return PHX_EINVAL;
        }
        p = e ? e + 1 : p + n;
    }
    if (*p) {
        fprintf(stderr, "phalanx: PHX_PEERS lists more peers than PHX_SIZE=%d\n", cfg->size);
        return PHX_EINVAL;
    }
    return 0;
}

int phx_config_load(phx_config_t *cfg, int *argc, char **argv)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->listen_fd = -1;
    unsigned char set[NOPTS] = {0};
    const char *cfgfile = getenv("PHX_CONFIG");
    /* Direct launch by srun: the identity comes from Slurm's step. */
    int rc = phx_slurm_identity();
    if (rc < 0)
        return rc;
    rc = 0;

    for (size_t i = 0; i < NOPTS; i++)
        if ((rc = set_opt(cfg, &opts[i], opts[i].def, "default")))
            return rc;

    /* Flags first (highest precedence); keep the rest of argv in order. */
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        char *a = argv[i];
        if (strncmp(a, "--phx-", 6) != 0) {
            argv[out++] = a;
            continue;
        }
        char *k = a + 6, *eq = strchr(k, '=');
        size_t kn = eq ? (size_t)(eq - k) : strlen(k);
        if (kn == 6 && !strncmp(k, "config", 6) && eq) {
            cfgfile = eq + 1;
            continue;
        }
        if (kn == 4 && !strncmp(k, "help", 4)) {
            /* Once per job: every node of a launched job gets the flag. */
            const char *me = getenv("PHX_RANK");
            if (!me || !strcmp(me, "0"))
                phx_config_usage();
            fflush(stdout);
            exit(0);
        }
        const opt_t *o = find_opt(k, kn);
        if (!o) {
            fprintf(stderr, "phalanx: unknown option %s (--phx-help lists the keys)\n", a);
            return PHX_EINVAL;
        }
        const char *v = eq ? eq + 1 : (o->kind == OPT_BOOL ? "1" : NULL);
        if (!v) {
            fprintf(stderr, "phalanx: option %s needs a value: --phx-%s=VALUE\n", a, o->key);
            return PHX_EINVAL;
        }
        if ((rc = set_opt(cfg, o, v, "command line")))
            return rc;
        set[o - opts] = 1;
    }
    argv[out] = NULL;
    *argc = out;

    for (size_t i = 0; i < NOPTS; i++) {
        if (set[i])
            continue;
        char env[64] = "PHX_";
        size_t n = 4;
        for (const char *c = opts[i].key; *c && n < sizeof env - 1; c++)
            env[n++] = *c == '-' ? '_' : (char)toupper((unsigned char)*c);
        env[n] = 0;
        const char *v = getenv(env);
        if (v) {
            if ((rc = set_opt(cfg, &opts[i], v, env)))
                return rc;
            set[i] = 1;
        }
    }
    if (cfgfile && (rc = load_file(cfg, cfgfile, set)))
        return rc;

    if (cfg->workers < 0) {
        /* The CPUs this process may run on (a container's cpuset, not the
         * whole machine). srun --cpu-bind gives each task its own: its
         * share already. */
        cpu_set_t cs;
        long cpus = sched_getaffinity(0, sizeof cs, &cs) == 0 ? CPU_COUNT(&cs)
                                                             : sysconf(_SC_NPROCESSORS_ONLN);
        const char *bt = getenv("SLURM_CPU_BIND_TYPE");
        int bound = bt && *bt && strncmp(bt, "none", 4) != 0;
        const char *ls = getenv("PHX_LOCAL_SIZE");
        int64_t local = 1;
        if (ls && (parse_i64(ls, &local) || local < 1 || local > 65535)) {
            fprintf(stderr, "phalanx: bad PHX_LOCAL_SIZE '%s': expected the number of nodes on "
                            "this host, 1 to 65535\n", ls);
            return PHX_EINVAL;
        }
        cfg->workers = phx_config_default_workers((int)cpus, (int)local, bound);
    }
    if (cfg->hb_timeout_ms <= 0) {
        fprintf(stderr, "phalanx: bad value 0 for option hb-timeout: expected a positive number of "
                        "ms, e.g. 1000\n");
        return PHX_EINVAL;
    }
    if (cfg->hb_period_ms == 0)
        cfg->hb_period_ms = cfg->hb_timeout_ms / 10 > 0 ? cfg->hb_timeout_ms / 10 : 1;
    if (!cfg->td[0])
        strcpy(cfg->td, cfg->ft ? "rellazy" : "4c");
    if (!strcmp(cfg->log, "error")) phx_log_set_level(PHX_LOG_ERROR);
    else if (!strcmp(cfg->log, "warn")) phx_log_set_level(PHX_LOG_WARN);
    else if (!strcmp(cfg->log, "info")) phx_log_set_level(PHX_LOG_INFO);
    else if (!strcmp(cfg->log, "debug")) phx_log_set_level(PHX_LOG_DEBUG);
    else {
        fprintf(stderr, "phalanx: bad value '%s' for option log: expected error, warn, info or debug\n",
                cfg->log);
        return PHX_EINVAL;
    }

    /* phx run holds each local node's port from its choice on, so no
     * other launcher can take it: the node inherits the socket. Removed
     * from the environment and closed on exec, so nothing the program
     * starts mistakes it for its own. */
    const char *lf = getenv("PHX_LISTEN_FD");
    if (lf && *lf) {
        int64_t fd;
        if (parse_i64(lf, &fd) || fd < 0 || fd > INT32_MAX || fcntl((int)fd, F_SETFD, FD_CLOEXEC) < 0) {
            fprintf(stderr, "phalanx: PHX_LISTEN_FD '%s' is not an open file descriptor\n", lf);
            return PHX_EINVAL;
        }
        cfg->listen_fd = (int)fd;
        unsetenv("PHX_LISTEN_FD");
    }

    /* Identity. Without a launcher, run as a single node. */
    const char *r = getenv("PHX_RANK"), *s = getenv("PHX_SIZE"), *p = getenv("PHX_PEERS");
    const char *j = getenv("PHX_JOB_ID");
    if (!r && !s && !p) {
        cfg->rank = 0;
        cfg->size = 1;
        cfg->peers = calloc(1, sizeof *cfg->peers);
        if (!cfg->peers)
            return PHX_ENOMEM;
        strcpy(cfg->peers[0].host, "127.0.0.1");
        cfg->peers[0].port = 0;
        return 0;
    }
    int64_t v;
    if (!r || !s || !p || parse_i64(r, &v) || v < 0 || v > 65534) {
        fprintf(stderr, "phalanx: PHX_RANK, PHX_SIZE and PHX_PEERS must all be set (use the phx launcher)\n");
        return PHX_EINVAL;
    }
    cfg->rank = (int)v;
    if (parse_i64(s, &v) || v < 1 || v > 65535 || cfg->rank >= v) {
        fprintf(stderr, "phalanx: bad PHX_SIZE '%s' for rank %d\n", s, cfg->rank);
        return PHX_EINVAL;
    }
    cfg->size = (int)v;
    cfg->job_id = j ? strtoull(j, NULL, 10) : 0;
    return parse_peers(cfg, p);
}

int phx_config_default_workers(int cpus, int local, int bound)
{
    int share = bound || local < 1 ? cpus : cpus / local;
    return share > 1 ? share - 1 : 1;
}

int phx_config_read_secret(int fd, uint8_t *out, size_t cap, size_t *len)
{
    size_t n = 0;
    for (;;) {
        char c;
        /* One byte at a time: nothing after the line may be consumed, the
         * rest of stdin is the launcher's lifeline. */
        ssize_t r = read(fd, &c, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            fprintf(stderr, "phalanx: PHX_SECRET_STDIN=1 but stdin %s before the secret's end of line "
                            "(the launcher or its ssh session is gone)\n",
                    r < 0 ? strerror(errno) : "ended");
            return r < 0 ? -errno : PHX_EIO;
        }
        if (c == '\n')
            break;
        if (n == cap) {
            fprintf(stderr, "phalanx: the secret on stdin is longer than %zu bytes\n", cap);
            return PHX_ENOSPC;
        }
        out[n++] = (uint8_t)c;
    }
    if (!n) {
        fprintf(stderr, "phalanx: the secret on stdin is empty\n");
        return PHX_EINVAL;
    }
    *len = n;
    return 0;
}

void phx_config_free(phx_config_t *cfg)
{
    free(cfg->peers);
    cfg->peers = NULL;
}

void phx_config_usage(void)
{
    printf("Phalanx runtime options. Set each as flag --phx-KEY=VALUE (before or after the\n"
           "program under phx run), environment PHX_KEY (upper case, '_' for '-') or a line\n"
           "'key = value' in the config file, in that order of precedence.\n\n");
    for (size_t i = 0; i < NOPTS; i++) {
        printf("  --phx-%-16s %s [default %s]", opts[i].key, opts[i].help,
               opts[i].def[0] ? opts[i].def : "\"\"");
        if (opts[i].valid)
            printf(": %s", opts[i].valid);
        putchar('\n');
    }
    printf("  --phx-%-16s read options from FILE (also PHX_CONFIG)\n", "config=FILE");
    printf("  --phx-%-16s print this list and exit\n", "help");
    printf("\nEnvironment only:\n"
           "  PHX_SECRET, PHX_SECRET_FILE  cluster secret (phx run makes one per job)\n"
           "  PHX_STATS=1                  print each node's counters as JSON at exit\n"
           "  PHX_RANK, PHX_SIZE, PHX_PEERS, PHX_JOB_ID, PHX_LIFELINE  set by phx run\n"
           "  PHX_LOCAL_SIZE               nodes on this host: divides its cores (phx run sets it)\n"
           "  PHX_SECRET_STDIN=1           the secret is stdin's first line (phx run, remote nodes)\n"
           "  under srun without phx, the identity comes from SLURM_PROCID, SLURM_NTASKS,\n"
           "  SLURM_STEP_NODELIST; ports from PHX_BASE_PORT (see README)\n");
}

int phx_arg_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end;
    if (!s || !isdigit((unsigned char)*s))
        return PHX_EINVAL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return PHX_EINVAL;
    *out = v;
    return 0;
}

int phx_usage_error(const char *usage, const char *fmt, ...)
{
    const char *me = getenv("PHX_RANK");
    if (!me || !strcmp(me, "0")) {   /* one message per job, not one per node */
        va_list ap;
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, "\nusage: %s\n", usage);
    }
    return 2;
}

int phx_config_respawns(const phx_config_t *cfg)
{
    return (!strcmp(cfg->recovery, "cr") || !strncmp(cfg->recovery, "mlog-", 5)) && !strcmp(cfg->restart_on, "respawn");
}
