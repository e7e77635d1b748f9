#define _GNU_SOURCE
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "phx_err.h"
#include "phx_log.h"

enum opt_kind { OPT_INT, OPT_I64, OPT_BOOL, OPT_STR };

typedef struct opt {
    const char *key;
    enum opt_kind kind;
    size_t off, size;
    const char *def;
    const char *help;
} opt_t;

#define O(k, kind, field, def, help) { k, kind, offsetof(phx_config_t, field), sizeof(((phx_config_t *)0)->field), def, help }
static const opt_t opts[] = {
    O("workers", OPT_INT, workers, "0", "worker threads (0: cores - 1, at least 1)"),
    O("busy-poll", OPT_BOOL, busy_poll, "0", "spin on queues instead of sleeping (trades a core for latency)"),
    O("linger-us", OPT_INT, linger_us, "50", "idle threads yield-spin this long before sleeping (0: sleep at once)"),
    O("startup-timeout", OPT_INT, startup_timeout_ms, "30000", "ms to wait for peers at startup"),
    O("send-buffer", OPT_I64, send_buffer, "67108864", "bytes queued per peer before senders block"),
    O("recv-buffer", OPT_I64, recv_buffer, "268435456", "undelivered inbound bytes before reading pauses"),
    O("max-frame", OPT_I64, max_frame, "268435456", "largest accepted message payload in bytes"),
    O("td", OPT_STR, td, "", "termination detector: 4c|edod|hcda|cda|indep|rellazy|releager (default 4c, rellazy with ft)"),
    O("ft", OPT_BOOL, ft, "0", "fault tolerance: failure detection and recovery"),
    O("hb-timeout", OPT_INT, hb_timeout_ms, "1000", "suspicion timeout delta in ms"),
    O("hb-period", OPT_INT, hb_period_ms, "0", "heartbeat period eta in ms (0: delta/10)"),
    O("eventlog", OPT_STR, eventlog, "", "JSON-lines event log file (%r is replaced by the rank)"),
    O("log", OPT_STR, log, "warn", "log level: error|warn|info|debug"),
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
bad:
    fprintf(stderr, "phalanx: bad value '%s' for option %s (from %s)\n", val, o->key, src);
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
        fprintf(stderr, "phalanx: cannot open config file %s: %s\n", path, strerror(errno));
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
    unsigned char set[NOPTS] = {0};
    const char *cfgfile = getenv("PHX_CONFIG");
    int rc = 0;

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
            phx_config_usage();
            exit(0);
        }
        const opt_t *o = find_opt(k, kn);
        if (!o) {
            fprintf(stderr, "phalanx: unknown option %s (see --phx-help)\n", a);
            return PHX_EINVAL;
        }
        const char *v = eq ? eq + 1 : (o->kind == OPT_BOOL ? "1" : NULL);
        if (!v) {
            fprintf(stderr, "phalanx: option %s needs =VALUE\n", a);
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

    if (cfg->workers == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        cfg->workers = n > 1 ? (int)n - 1 : 1;
    }
    if (cfg->hb_timeout_ms <= 0) {
        fprintf(stderr, "phalanx: hb-timeout must be positive\n");
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
        fprintf(stderr, "phalanx: bad log level '%s'\n", cfg->log);
        return PHX_EINVAL;
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

void phx_config_free(phx_config_t *cfg)
{
    free(cfg->peers);
    cfg->peers = NULL;
}

void phx_config_usage(void)
{
    fprintf(stderr, "Phalanx runtime options (flag --phx-KEY=V > env PHX_KEY > config file):\n");
    for (size_t i = 0; i < NOPTS; i++)
        fprintf(stderr, "  --phx-%-16s %s [default %s]\n", opts[i].key, opts[i].help,
                opts[i].def[0] ? opts[i].def : "\"\"");
}
