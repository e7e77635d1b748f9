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
#include "base/place/phx_place.h"

enum opt_kind { OPT_INT, OPT_I64, OPT_BOOL, OPT_STR };

typedef struct opt {
    const char *key;
    enum opt_kind kind;
    size_t off, size;
    const char *def;
    const char *help;
    const char *valid;          /* what a good value looks like (NULL: by kind) */
    int64_t lo, hi;             /* numbers: the range (hi 0: 0 to the type's maximum) */
    const char *choices;        /* strings: the accepted values, '|'-separated ("" always
                                 * allowed where it is the default); NULL: any */
} opt_t;

#define O(k, kind, field, def, help, valid) \
    { k, kind, offsetof(phx_config_t, field), sizeof(((phx_config_t *)0)->field), def, help, valid, 0, 0, NULL }
/* The same with a range or a list of choices. */
#define OX(k, kind, field, def, help, valid, lo, hi, choices) \
    { k, kind, offsetof(phx_config_t, field), sizeof(((phx_config_t *)0)->field), def, help, valid, lo, hi, choices }
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
    /* The names of the detector registry (ft/td) and cut, recovery=cr's own (core/term.c). */
    OX("td", OPT_STR, td, "", "termination detector (default 4c, rellazy with ft)",
       "none, 4c, edod, hcda, cda, indep, rellazy, releager or cut (recovery=cr)", 0, 0,
       "none|4c|edod|hcda|cda|indep|rellazy|releager|cut"),
    O("ft", OPT_BOOL, ft, "0", "fault tolerance: failure detection and notification", NULL),
    OX("hb-timeout", OPT_INT, hb_timeout_ms, "1000", "suspicion timeout delta in ms", "a positive number of ms, e.g. 1000",
       1, 0x7fffffff, NULL),
    O("hb-period", OPT_INT, hb_period_ms, "0", "heartbeat period eta in ms (0: delta/10)", NULL),
    O("eventlog", OPT_STR, eventlog, "", "JSON-lines event log file (%r is replaced by the rank)", NULL),
    OX("metrics-port", OPT_INT, metrics_port, "0", "serve Prometheus /metrics on this port + rank (0: off)",
       "a TCP port such that port + rank <= 65535, or 0", 0, 65535, NULL),
    OX("log", OPT_STR, log, "warn", "log level", "error, warn, info or debug", 0, 0, "error|warn|info|debug"),
    /* The names of the recovery registry (core/recovery.c). */
    OX("recovery", OPT_STR, recovery, "none", "recovery mode (checkpoint/restart and message logging need ft)",
       "none, cr, mlog-causal, mlog-pessimistic, mlog-fast or mlog-team", 0, 0,
       "none|cr|mlog-causal|mlog-pessimistic|mlog-fast|mlog-team"),
    O("mlog-team-size", OPT_INT, mlog_team_size, "2", "recovery=mlog-team: consecutive ranks per team (1: mlog-causal)",
      "a whole number of nodes >= 1, e.g. 2"),
    O("ckpt-interval", OPT_INT, ckpt_interval, "0",
      "seconds between automatic checkpoints under recovery=cr (0: only phx_checkpoint)", "a whole number of seconds >= 0, e.g. 10"),
    O("ckpt-dir", OPT_STR, ckpt_dir, "", "directory for disk checkpoints under recovery=cr (\"\": memory only)", NULL),
    O("restart", OPT_STR, restart, "", "restart a recovery=cr job from the last disk checkpoint in this directory", NULL),
    OX("restart-on", OPT_STR, restart_on, "survivors", "where a lost node's tasks restart under recovery=cr",
       "survivors, spare or respawn", 0, 0, "survivors|spare|respawn"),
    O("spares", OPT_INT, spares, "0", "idle spare nodes among the ranks (the last ones; set by phx run --spares)",
      NULL),
    O("recovery-helpers", OPT_INT, recovery_helpers, "0",
      "survivors that take a lost node's tasks: its buddy and the next P-1 live ranks (0: every live rank)",
      "a whole number of nodes >= 0 (0: every live rank), e.g. 2"),
    /* Default term: the schedulers and container runtimes that stop a node
     * send SIGTERM first and wait (Slurm KillWait, Kubernetes' grace
     * period, docker stop), and a drain in that time loses no work;
     * without a recovery mode that drains, SIGTERM stops the node as off. */
    OX("drain-on", OPT_STR, drain_on, "term", "SIGTERM (and phx drain) hands this node's tasks to the others at the "
       "next checkpoint and exits 0 (recovery=cr); off: SIGTERM stops the node, its loss is recovered as a crash",
       "term or off", 0, 0, "term|off"),
    O("keep-going", OPT_BOOL, keep_going, "0",
      "after a failure that no recovery mode covers and no phx_on_failure handles, let the survivors finish "
      "their work (0: end the job at once; either way it exits 76, work lost)", NULL),
};
#undef O
#undef OX
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

/* Levenshtein distance, for "did you mean": both strings are short keys or
 * values, so the quadratic table is a few hundred cells. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 64;
    size_t d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < c)
                c = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < c)
                c = d[i][j - 1] + 1;
            d[i][j] = c;
        }
    return d[la][lb];
}

/* A near miss: the closest candidate at most 2 edits away (1 for words of
 * up to 3 letters); copied to out, or out[0] = 0. */
static void closest(const char *word, const char *cand, size_t len, size_t *best, char *out, size_t cap)
{
    char w[64];
    if (len >= sizeof w)
        return;
    memcpy(w, cand, len);
    w[len] = 0;
    size_t d = edit_distance(word, w), lim = strlen(word) <= 3 ? 1 : 2;
    if (d <= lim && d < *best && len < cap) {
        *best = d;
        strcpy(out, w);
    }
}

static void near_key(const char *key, char *out, size_t cap)
{
    size_t best = SIZE_MAX;
    out[0] = 0;
    for (size_t i = 0; i < NOPTS; i++)
        closest(key, opts[i].key, strlen(opts[i].key), &best, out, cap);
    closest(key, "config", 6, &best, out, cap);
    closest(key, "help", 4, &best, out, cap);
}

static int in_choices(const char *choices, const char *val, char *near, size_t cap)
{
    size_t best = SIZE_MAX, vl = strlen(val);
    near[0] = 0;
    for (const char *c = choices; *c; ) {
        size_t l = strcspn(c, "|");
        if (l == vl && !strncmp(c, val, l))
            return 1;
        closest(val, c, l, &best, near, cap);
        c += l + (c[l] == '|');
    }
    return 0;
}

/* One message for an unknown key: a near miss, else every key. */
static void unknown_key(const char *key, size_t kn, const char *src, const char *what)
{
    char k[64], near[64];
    snprintf(k, sizeof k, "%.*s", (int)(kn < 63 ? kn : 63), key);
    near_key(k, near, sizeof near);
    if (near[0]) {
        fprintf(stderr, "phalanx: %s: unknown option %s; did you mean %s%s? (--phx-help lists them)\n", src,
                what, strncmp(what, "--phx-", 6) ? "" : "--phx-", near);
        return;
    }
    fprintf(stderr, "phalanx: %s: unknown option %s; the options are", src, what);
    for (size_t i = 0; i < NOPTS; i++)
        fprintf(stderr, "%s %s", i ? "," : "", opts[i].key);
    fprintf(stderr, ", config and help (--phx-help explains them)\n");
}

static int set_opt(phx_config_t *cfg, const opt_t *o, const char *val, const char *src)
{
    char *f = (char *)cfg + o->off;
    char near[64] = "";
    int64_t v;
    switch (o->kind) {
    case OPT_INT:
    case OPT_I64:
        if (o->off == offsetof(phx_config_t, workers) && !strcasecmp(val, "auto")) {
            *(int *)f = -1;   /* chosen once the configuration is complete */
            return 0;
        }
        if (parse_i64(val, &v) || v < o->lo || v > (o->hi ? o->hi : o->kind == OPT_INT ? 0x7fffffff : INT64_MAX))
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
        if (o->choices && !(!val[0] && !o->def[0]) && !in_choices(o->choices, val, near, sizeof near))
            goto bad;
        strcpy(f, val);
        return 0;
    }
bad:;
    char room[80];
    const char *want = o->valid;
    if (!want) {
        switch (o->kind) {
        case OPT_INT:
            snprintf(room, sizeof room, "a whole number from %lld to %lld", (long long)o->lo,
                     (long long)(o->hi ? o->hi : 0x7fffffff));
            want = room;
            break;
        case OPT_I64: want = "a byte count, with an optional k, m or g suffix (e.g. 64m)"; break;
        case OPT_BOOL: want = "on or off (also 1/0, true/false, yes/no)"; break;
        case OPT_STR:
            snprintf(room, sizeof room, "at most %zu characters", o->size - 1);
            want = room;
            break;
        }
    }
    fprintf(stderr, "phalanx: bad value '%s' for option %s (from %s): expected %s%s%s%s\n", val, o->key,
            src, want, near[0] ? "; did you mean " : "", near, near[0] ? "?" : "");
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
            char what[80];
            snprintf(what, sizeof what, "'%.60s'", k);
            unknown_key(k, strlen(k), src, what);
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

/* The mode names, compared once. Under a recovery mode the counting
 * detectors' state would have to be rolled back with the tasks (and their
 * control messages drained at the cut): cr checks quiescence on its own
 * consistent cut instead (td=cut, also what the ft default rellazy
 * becomes), and message logging, whose messages to replay sit outside the
 * queues a cut counts, runs none (its jobs end by phx_exit). */
static void derive_modes(phx_config_t *cfg)
{
    const char *r = cfg->recovery, *ro = cfg->restart_on, *td = cfg->td;
    cfg->rec_family = !r[0] || !strcmp(r, "none") ? PHX_REC_NONE
                    : !strcmp(r, "cr") ? PHX_REC_CR
                    : !strncmp(r, "mlog-", 5) ? PHX_REC_MLOG : PHX_REC_UNKNOWN;
    cfg->restart_mode = !strcmp(ro, "survivors") ? PHX_RESTART_SURVIVORS
                      : !strcmp(ro, "spare") ? PHX_RESTART_SPARE
                      : !strcmp(ro, "respawn") ? PHX_RESTART_RESPAWN : PHX_RESTART_UNKNOWN;
    cfg->drain_term = strcmp(cfg->drain_on, "off") != 0;
    int none = !strcmp(td, "none");
    if (cfg->rec_family == PHX_REC_CR || cfg->rec_family == PHX_REC_MLOG) {
        int cr = cfg->rec_family == PHX_REC_CR;
        if (!none && strcmp(td, "rellazy") && (strcmp(td, "cut") || !cr))
            cfg->td_mode = PHX_TD_UNSUPPORTED;
        else
            cfg->td_mode = cr && !none ? PHX_TD_CUT : PHX_TD_NONE;
    } else {
        cfg->td_mode = none ? PHX_TD_NONE : PHX_TD_DETECTOR;
    }
}

static int is_bool_word(const char *v)
{
    static const char *const w[] = { "1", "0", "on", "off", "true", "false", "yes", "no" };
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        if (!strcasecmp(v, w[i]))
            return 1;
    return 0;
}

int phx_config_flag_arity(const char *arg, const char *next)
{
    if (strncmp(arg, "--phx-", 6) || strchr(arg, '=') || !next || !strncmp(next, "--phx-", 6))
        return 1;
    const char *k = arg + 6;
    if (!strcmp(k, "config"))
        return 2;
    const opt_t *o = find_opt(k, strlen(k));
    if (!o)
        return 1;
    return o->kind != OPT_BOOL || is_bool_word(next) ? 2 : 1;
}

int phx_config_max_workers(int cpus)
{
    return cpus * 8 > 64 ? cpus * 8 : 64;
}

/* Defaults, then the --phx-* flags of argv (removed in place; *argc
 * updated), the environment and the config file: every option, no
 * identity. node: --phx-help prints the table and exits (a node), else it
 * is skipped (the launcher's check). */
static int load_opts(phx_config_t *cfg, int *argc, char **argv, int node)
{
    unsigned char set[NOPTS] = {0};
    const char *cfgfile = getenv("PHX_CONFIG");
    int rc;
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
        const char *v = eq ? eq + 1 : NULL;
        /* --phx-KEY VALUE, as well as --phx-KEY=VALUE */
        if (!eq && phx_config_flag_arity(a, i + 1 < *argc ? argv[i + 1] : NULL) == 2)
            v = argv[++i];
        if (kn == 6 && !strncmp(k, "config", 6)) {
            if (!v) {
                fprintf(stderr, "phalanx: option %s needs a value: --phx-config=FILE\n", a);
                return PHX_EINVAL;
            }
            cfgfile = v;
            continue;
        }
        if (kn == 4 && !strncmp(k, "help", 4)) {
            if (!node)
                continue;
            /* Once per job: every node of a launched job gets the flag. */
            const char *me = getenv("PHX_RANK");
            if (!me || !strcmp(me, "0"))
                phx_config_usage();
            fflush(stdout);
            exit(0);
        }
        const opt_t *o = find_opt(k, kn);
        if (!o) {
            unknown_key(k, kn, "command line", a);
            return PHX_EINVAL;
        }
        if (!v && o->kind == OPT_BOOL)
            v = "1";
        if (!v) {
            fprintf(stderr, "phalanx: option %s needs a value: --phx-%s=VALUE or --phx-%s VALUE\n", a,
                    o->key, o->key);
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
    return cfgfile ? load_file(cfg, cfgfile, set) : 0;
}

/* Settings that are each valid but cannot take effect: refused with the
 * reason, never silently ignored. cpus > 0 bounds workers; size > 0 bounds
 * metrics-port + rank. */
static int check_opts(const phx_config_t *cfg, int cpus, int size)
{
    int ckpt = strcmp(cfg->recovery, "none") != 0;
    if (cpus > 0 && cfg->workers > phx_config_max_workers(cpus)) {
        fprintf(stderr, "phalanx: bad value %d for option workers: at most %d on this host (%d CPU%s: 8 "
                        "threads per CPU, at least 64); auto picks this node's share of the cores\n",
                cfg->workers, phx_config_max_workers(cpus), cpus, cpus == 1 ? "" : "s");
        return PHX_EINVAL;
    }
    if (size > 0 && cfg->metrics_port > 0 && cfg->metrics_port + size - 1 > 65535) {
        fprintf(stderr, "phalanx: bad value %d for option metrics-port: rank %d would serve port %d, above "
                        "65535\n", cfg->metrics_port, size - 1, cfg->metrics_port + size - 1);
        return PHX_EINVAL;
    }
    if (cfg->restart[0] && !ckpt) {
        fprintf(stderr, "phalanx: restart from %s (phx run --restart, PHX_RESTART) needs a recovery mode that "
                        "writes disk checkpoints (--phx-ft=1 --phx-recovery=cr, or mlog-*): with "
                        "recovery=none the job would start afresh and ignore it\n", cfg->restart);
        return PHX_EINVAL;
    }
    if (!ckpt && (cfg->ckpt_interval > 0 || cfg->ckpt_dir[0])) {
        fprintf(stderr, "phalanx: option %s takes effect only under a checkpointing recovery mode "
                        "(--phx-ft=1 --phx-recovery=cr, or mlog-*): with recovery=none no checkpoint is "
                        "taken\n", cfg->ckpt_interval > 0 ? "ckpt-interval" : "ckpt-dir");
        return PHX_EINVAL;
    }
    if (ckpt && !cfg->ft) {
        fprintf(stderr, "phalanx: recovery=%s needs fault tolerance (--phx-ft=1)\n", cfg->recovery);
        return PHX_EINVAL;
    }
    return 0;
}

/* The CPUs this process may run on (a container's cpuset, not the whole
 * machine). */
static int affinity_cpus(void)
{
    cpu_set_t cs;
    long cpus = sched_getaffinity(0, sizeof cs, &cs) == 0 ? CPU_COUNT(&cs) : sysconf(_SC_NPROCESSORS_ONLN);
    return cpus > 0 ? (int)cpus : 1;
}

int phx_config_check(int argc, char *const *argv, int cpus, int size, phx_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->listen_fd = -1;
    char **v = calloc((size_t)argc + 1, sizeof *v);
    if (!v)
        return PHX_ENOMEM;
    memcpy(v, argv, (size_t)argc * sizeof *v);
    int n = argc, rc = load_opts(cfg, &n, v, 0);
    free(v);
    return rc ? rc : check_opts(cfg, cpus, size);
}

int phx_config_load(phx_config_t *cfg, int *argc, char **argv)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->listen_fd = -1;
    /* Direct launch by srun: the identity comes from Slurm's step. */
    int rc = phx_slurm_identity();
    if (rc < 0)
        return rc;
    if ((rc = load_opts(cfg, argc, argv, 1)))
        return rc;
    const char *bt = getenv("SLURM_CPU_BIND_TYPE");
    int bound = bt && *bt && strncmp(bt, "none", 4) != 0, cpus = affinity_cpus();
    if ((rc = check_opts(cfg, cpus, 0)))
        return rc;

    if (cfg->workers < 0) {
        /* srun --cpu-bind gives each task its own CPUs: its share already. */
        const char *ls = getenv("PHX_LOCAL_SIZE");
        int64_t local = 1;
        if (ls && (parse_i64(ls, &local) || local < 1 || local > 65535)) {
            fprintf(stderr, "phalanx: bad PHX_LOCAL_SIZE '%s': expected the number of nodes on "
                            "this host, 1 to 65535\n", ls);
            return PHX_EINVAL;
        }
        cfg->workers = phx_config_default_workers((int)cpus, (int)local, bound);
    }
    if (cfg->hb_period_ms == 0)
        cfg->hb_period_ms = cfg->hb_timeout_ms / 10 > 0 ? cfg->hb_timeout_ms / 10 : 1;
    if (!cfg->td[0])
        strcpy(cfg->td, cfg->ft ? "rellazy" : "4c");
    /* phx run prefixes each line of a node's output with "[R] ". */
    phx_log_show_rank(!getenv("PHX_LAUNCHER_PID"));
    derive_modes(cfg);
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
    return (cfg->rec_family == PHX_REC_CR || cfg->rec_family == PHX_REC_MLOG) && cfg->restart_mode == PHX_RESTART_RESPAWN;
}
