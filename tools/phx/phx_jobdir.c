/* The job directory and `phx status` (see phx_jobdir.h). */
#define _GNU_SOURCE   /* asprintf */
#include "phx_jobdir.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EXIT_FENCED 75   /* core/node.h */
#define FLUSH_S 0.25

static phx_jobview_t V;
static int opened;
static char *dir;           /* NULL: none (could not be made) */
static double last_flush;

phx_jobview_t *phx_jobdir_view(void) { return opened ? &V : NULL; }

double phx_jobdir_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* $XDG_RUNTIME_DIR/phx, else /tmp/phx-UID; made 0700 when missing. */
static char *base_dir(int make)
{
    const char *x = getenv("XDG_RUNTIME_DIR");
    char *b = NULL;
    if (x && *x && access(x, W_OK | X_OK) == 0) {
        if (asprintf(&b, "%s/phx", x) < 0)
            return NULL;
    } else if (asprintf(&b, "/tmp/phx-%u", (unsigned)getuid()) < 0) {
        return NULL;
    }
    if (make && mkdir(b, 0700) < 0 && errno != EEXIST) {
        free(b);
        return NULL;
    }
    return b;
}

int phx_jobdir_open(const phx_ranktab_t *rt, const char *prog, int announce)
{
    memset(&V, 0, sizeof V);
    V.n = rt->n;
    V.r = calloc((size_t)rt->n, sizeof *V.r);
    if (!V.r)
        return -ENOMEM;
    for (int i = 0; i < rt->n; i++) {
        V.r[i].host = rt->r[i].host;
        V.r[i].local = rt->r[i].local;
        V.r[i].lost_at = -1;
    }
    V.prog = prog;
    V.t0 = phx_jobdir_now();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    V.wall0 = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    opened = 1;
    char *b = base_dir(1);
    if (!b || asprintf(&dir, "%s/%d", b, (int)getpid()) < 0 || (mkdir(dir, 0700) < 0 && errno != EEXIST)) {
        fprintf(stderr, "phx: no job directory (phx status will not find this job): %s\n",
                b ? strerror(errno) : "no place for it");
        free(dir);
        dir = NULL;
    } else if (announce) {
        fprintf(stderr, "phx: job %d: 'phx status %d' shows it from another shell (%s)\n", (int)getpid(),
                (int)getpid(), dir);
    }
    free(b);
    V.changed = 1;
    return 0;
}

void phx_jobdir_spawned(int rank, pid_t pid, unsigned inc)
{
    if (!opened || rank < 0 || rank >= V.n)
        return;
    phx_jd_rank_t *r = &V.r[rank];
    r->pid = pid;
    r->inc = inc;
    r->state = PHX_JD_STARTING;
    r->reported = 0;
    V.changed = 1;
}

void phx_jobdir_exited(int rank, int st)
{
    if (!opened || rank < 0 || rank >= V.n)
        return;
    phx_jd_rank_t *r = &V.r[rank];
    if (WIFSIGNALED(st)) {
        r->state = PHX_JD_KILLED;
        r->code = WTERMSIG(st);
    } else if (WEXITSTATUS(st) == EXIT_FENCED) {
        r->state = PHX_JD_FENCED;
        r->code = EXIT_FENCED;
    } else if (!r->local && WEXITSTATUS(st) == 255) {
        r->state = PHX_JD_LOST;   /* the remote shell lost it */
        r->code = 255;
    } else {
        r->state = PHX_JD_EXITED;
        r->code = WEXITSTATUS(st);
    }
    if (r->state != PHX_JD_EXITED) {
        r->lost_at = phx_jobdir_now();
        if (r->state == PHX_JD_KILLED)
            snprintf(r->lost_why, sizeof r->lost_why, "SIG%s", sigabbrev_np(r->code) ? sigabbrev_np(r->code) : "?");
        else
            snprintf(r->lost_why, sizeof r->lost_why, "%s", r->state == PHX_JD_FENCED ? "fenced" : "connection lost");
    }
    V.changed = 1;
}

static uint64_t field(const char *line, const char *key, int *found)
{
    const char *p = strstr(line, key);
    if (found)
        *found = p != NULL;
    return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

void phx_jobdir_node_line(const char *line)
{
    const char *rk = strstr(line, " rank=");
    long rank = rk ? strtol(rk + 6, NULL, 10) : -1;
    if (!opened || rank < 0 || rank >= V.n)
        return;
    phx_jd_rank_t *r = &V.r[rank];
    int has;
    uint64_t inc = field(line, " inc=", &has);
    if (has && inc < r->inc)
        return;   /* a line of the incarnation before a respawn, late in the pipe */
    r->done = field(line, " done=", NULL);
    r->total = field(line, " total=", NULL);
    r->epoch = field(line, " epoch=", NULL);
    r->rec = field(line, " rec=", NULL);
    r->ckpts = field(line, " ckpts=", NULL);
    uint64_t pid = field(line, " pid=", &has);
    if (has && pid)
        r->pid = (pid_t)pid;
    if (r->state == PHX_JD_STARTING)
        r->state = PHX_JD_UP;
    r->reported = 1;
    V.changed = 1;
}

static const char *state_name(int s)
{
    static const char *n[] = { "starting", "up", "killed", "fenced", "lost", "exited" };
    return s >= 0 && s <= PHX_JD_EXITED ? n[s] : "?";
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* Totals over the ranks: the highest epoch and counts seen, the progress sum. */
static void totals(uint64_t *epoch, uint64_t *ckpts, uint64_t *done, uint64_t *total)
{
    *epoch = *ckpts = *done = *total = 0;
    for (int i = 0; i < V.n; i++) {
        phx_jd_rank_t *r = &V.r[i];
        if (r->epoch > *epoch)
            *epoch = r->epoch;
        if (r->ckpts > *ckpts)
            *ckpts = r->ckpts;
        *done += r->done;
        *total += r->total;
    }
}

static void write_json(FILE *f, double now)
{
    uint64_t epoch, ckpts, done, total;
    totals(&epoch, &ckpts, &done, &total);
    fprintf(f, "{\"job\":%d,\"program\":", (int)getpid());
    json_str(f, V.prog);
    fprintf(f, ",\"started\":%.3f,\"elapsed_s\":%.3f,\"epoch\":%llu,\"checkpoints\":%llu,"
               "\"progress\":{\"done\":%llu,\"total\":%llu},\"ranks\":[", V.wall0, now - V.t0,
            (unsigned long long)epoch, (unsigned long long)ckpts, (unsigned long long)done,
            (unsigned long long)total);
    for (int i = 0; i < V.n; i++) {
        phx_jd_rank_t *r = &V.r[i];
        fprintf(f, "%s{\"rank\":%d,\"host\":", i ? "," : "", i);
        json_str(f, r->host);
        fprintf(f, ",\"local\":%d,\"pid\":%d,\"incarnation\":%u,\"state\":\"%s\"", r->local, (int)r->pid, r->inc,
                state_name(r->state));
        if (r->state == PHX_JD_KILLED)
            fprintf(f, ",\"signal\":%d", r->code);
        else if (r->state == PHX_JD_EXITED)
            fprintf(f, ",\"exit_code\":%d", r->code);
        fprintf(f, ",\"done\":%llu,\"total\":%llu,\"epoch\":%llu,\"recoveries\":%llu}", (unsigned long long)r->done,
                (unsigned long long)r->total, (unsigned long long)r->epoch, (unsigned long long)r->rec);
    }
    fprintf(f, "],\"recoveries_total\":%d,\"recoveries\":[", V.nrec);
    int first = V.nrec > PHX_JD_MAXREC ? V.nrec - PHX_JD_MAXREC : 0;
    for (int k = first; k < V.nrec; k++) {
        phx_jd_rec_t *c = &V.rec[k % PHX_JD_MAXREC];
        fprintf(f, "%s{\"at_s\":%.3f,\"round\":%d,\"epoch\":%llu,\"kind\":\"%s\",\"lost\":[%s],\"detect_ms\":%.3f,"
                   "\"agree_ms\":%.3f,\"transfer_ms\":%.3f,\"replay_ms\":%.3f,\"total_ms\":%.3f,\"reports\":%d}",
                k > first ? "," : "", c->at, c->round, (unsigned long long)c->epoch,
                c->partial ? "partial" : "global", c->lost, c->detect_ms, c->agree_ms, c->transfer_ms,
                c->replay_ms, c->detect_ms + c->agree_ms + c->transfer_ms + c->replay_ms, c->reports);
    }
    fprintf(f, "]}\n");
}

static void write_text(FILE *f, double now)
{
    uint64_t epoch, ckpts, done, total;
    totals(&epoch, &ckpts, &done, &total);
    int up = 0;
    for (int i = 0; i < V.n; i++)
        up += V.r[i].state == PHX_JD_UP || V.r[i].state == PHX_JD_STARTING;
    fprintf(f, "job %d: %s, %d ranks (%d up), running for %.1f s\n", (int)getpid(), V.prog, V.n, up, now - V.t0);
    fprintf(f, "epoch %llu (last checkpoint) · %llu checkpoints · %d recoveries · progress ",
            (unsigned long long)epoch, (unsigned long long)ckpts, V.nrec);
    if (total)
        fprintf(f, "%llu/%llu (%.1f%%)\n", (unsigned long long)done, (unsigned long long)total,
                100.0 * (double)done / (double)total);
    else if (done)
        fprintf(f, "%llu done\n", (unsigned long long)done);
    else
        fprintf(f, "none reported\n");
    fprintf(f, "%-5s %-16s %-8s %-4s %-9s %s\n", "rank", "host", "pid", "inc", "state", "progress");
    for (int i = 0; i < V.n; i++) {
        phx_jd_rank_t *r = &V.r[i];
        char st[24], pr[48];
        if (r->state == PHX_JD_KILLED)
            snprintf(st, sizeof st, "killed/%d", r->code);
        else if (r->state == PHX_JD_EXITED)
            snprintf(st, sizeof st, "exit %d", r->code);
        else
            snprintf(st, sizeof st, "%s", state_name(r->state));
        if (r->total)
            snprintf(pr, sizeof pr, "%llu/%llu", (unsigned long long)r->done, (unsigned long long)r->total);
        else if (r->reported)
            snprintf(pr, sizeof pr, "%llu", (unsigned long long)r->done);
        else
            snprintf(pr, sizeof pr, "-");
        fprintf(f, "%-5d %-16s %-8d %-4u %-9s %s\n", i, r->host, (int)r->pid, r->inc, st, pr);
    }
    if (V.nrec)
        fprintf(f, "recoveries:\n");
    int first = V.nrec > PHX_JD_MAXREC ? V.nrec - PHX_JD_MAXREC : 0;
    for (int k = first; k < V.nrec; k++) {
        phx_jd_rec_t *c = &V.rec[k % PHX_JD_MAXREC];
        fprintf(f, "  at %.1f s: rank(s) %s lost · %s to epoch %llu · %.0f ms (detect %.0f, agree %.0f, "
                   "transfer %.0f, replay %.0f)\n", c->at, c->lost,
                c->partial ? "partial rollback" : "rolled back", (unsigned long long)c->epoch,
                c->detect_ms + c->agree_ms + c->transfer_ms + c->replay_ms, c->detect_ms, c->agree_ms,
                c->transfer_ms, c->replay_ms);
    }
}

/* dir/name, written aside and renamed: a reader sees all of it or the old one. */
static void put_file(const char *name, void (*fn)(FILE *, double), double now)
{
    char *path = NULL, *tmp = NULL;
    if (asprintf(&path, "%s/%s", dir, name) < 0 || asprintf(&tmp, "%s.tmp", path) < 0) {
        free(path);
        return;
    }
    FILE *f = fopen(tmp, "we");
    if (f) {
        fn(f, now);
        if (fclose(f) == 0)
            rename(tmp, path);
        else
            unlink(tmp);
    }
    free(path);
    free(tmp);
}

void phx_jobdir_flush(int force)
{
    if (!opened || !dir)
        return;
    double now = phx_jobdir_now();
    if (!force && (!V.changed || now - last_flush < FLUSH_S))
        return;
    put_file("state.json", write_json, now);
    put_file("status.txt", write_text, now);
    V.changed = 0;
    last_flush = now;
}

void phx_jobdir_close(void)
{
    if (!opened)
        return;
    if (dir) {
        char *p;
        const char *names[] = { "state.json", "status.txt", "state.json.tmp", "status.txt.tmp" };
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (asprintf(&p, "%s/%s", dir, names[i]) >= 0) {
                unlink(p);
                free(p);
            }
        rmdir(dir);
        free(dir);
        dir = NULL;
    }
    free(V.r);
    V.r = NULL;
    opened = 0;
}

/* ---- phx status ---------------------------------------------------------- */

static int alive(long pid) { return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM); }

/* The running job started last: of the directories whose launcher is alive
 * and whose state file exists, the one made last. 0: none. */
static long latest(const char *base)
{
    DIR *d = opendir(base);
    long best = 0;
    double bt = 0;
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end, *p = NULL, *q = NULL;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0 || !alive(pid))
            continue;
        struct stat st, ds;
        if (asprintf(&p, "%s/%s/state.json", base, e->d_name) >= 0 && stat(p, &st) == 0 &&
            asprintf(&q, "%s/%s", base, e->d_name) >= 0 && stat(q, &ds) == 0) {
            double c = (double)ds.st_ctim.tv_sec + (double)ds.st_ctim.tv_nsec / 1e9;
            if (!best || c > bt) {
                best = pid;
                bt = c;
            }
        }
        free(p);
        free(q);
    }
    closedir(d);
    return best;
}

static int cat(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, n, stdout);
    fclose(f);
    return 0;
}

/* The job directory JOB names (a launcher pid or a directory; NULL: the
 * running job started last), malloc'd, and the launcher's pid; NULL after
 * saying why (cmd names the command). *bad: 2 for a usage error. */
static char *job_dir(const char *job, long *pidp, const char *cmd, int *bad)
{
    char *base = base_dir(0), *jd = NULL;
    long pid = 0;
    *bad = 1;
    if (!base) {
        fprintf(stderr, "phx: %s: out of memory\n", cmd);
        return NULL;
    }
    if (job && strchr(job, '/')) {
        jd = strdup(job);
        const char *s = strrchr(job, '/');
        pid = strtol(s[1] ? s + 1 : job, NULL, 10);
    } else if (job) {
        char *end;
        pid = strtol(job, &end, 10);
        if (*end || pid <= 0) {
            fprintf(stderr, "phx: %s: JOB is a launcher pid or a job directory, got '%s'\n", cmd, job);
            free(base);
            *bad = 2;
            return NULL;
        }
        if (asprintf(&jd, "%s/%ld", base, pid) < 0)
            jd = NULL;
    } else {
        pid = latest(base);
        if (!pid) {
            fprintf(stderr, "phx: %s: no running job found in %s\n", cmd, base);
            free(base);
            return NULL;
        }
        if (asprintf(&jd, "%s/%ld", base, pid) < 0)
            jd = NULL;
    }
    free(base);
    *pidp = pid;
    return jd;
}

int phx_status_cmd(int argc, char **argv)
{
    int json = 0;
    const char *job = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: phx status [--json] [JOB]\n"
                   "  JOB: the launcher's pid (printed by phx run on a terminal) or its job directory;\n"
                   "  default: the running job started last\n");
            return 0;
        } else if (argv[i][0] == '-' || job) {
            fprintf(stderr, "phx: status: unexpected argument '%s'\nusage: phx status [--json] [JOB]\n", argv[i]);
            return 2;
        } else
            job = argv[i];
    }
    long pid = 0;
    int bad;
    char *jd = job_dir(job, &pid, "status", &bad);
    if (!jd)
        return bad;
    char *path = NULL;
    int rc = 1;
    if (asprintf(&path, "%s/%s", jd, json ? "state.json" : "status.txt") >= 0) {
        if (cat(path) == 0)
            rc = 0;
        else
            fprintf(stderr, "phx: status: no job at %s%s\n", jd, pid && !alive(pid) ? " (its launcher is gone)" : "");
    }
    free(path);
    free(jd);
    return rc;
}

/* ---- phx drain -------------------------------------------------------------- */

/* The value after "key": in the rank's object s (up to its closing brace):
 * a number, or a string copied into str. 0, or -1 if absent. */
static int rank_field(const char *s, const char *key, long *num, char *str, size_t cap)
{
    char pat[32];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *end = strchr(s, '}'), *p = strstr(s, pat);
    if (!p || (end && p > end))
        return -1;
    p += strlen(pat);
    if (*p == '"') {
        const char *q = strchr(p + 1, '"');
        if (!q || !str)
            return -1;
        size_t n = (size_t)(q - p - 1) < cap - 1 ? (size_t)(q - p - 1) : cap - 1;
        memcpy(str, p + 1, n);
        str[n] = 0;
        return 0;
    }
    if (!num)
        return -1;
    *num = strtol(p, NULL, 10);
    return 0;
}

/* `phx drain RANK [JOB]`: SIGTERM to that rank's node, which (drain-on=term,
 * recovery=cr) hands its tasks to the others at the next checkpoint and
 * exits 0; the job goes on without it. */
int phx_drain_cmd(int argc, char **argv)
{
    const char *job = NULL, *rs = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: phx drain RANK [JOB]\n"
                   "  asks rank RANK of a running job to leave: its node hands its tasks to the others at\n"
                   "  the next checkpoint and exits 0 (recovery=cr, drain-on=term; otherwise the node\n"
                   "  stops as on SIGTERM and its loss is recovered as a crash)\n"
                   "  JOB: the launcher's pid or its job directory; default: the running job started last\n");
            return 0;
        } else if (argv[i][0] == '-' || (rs && job)) {
            fprintf(stderr, "phx: drain: unexpected argument '%s'\nusage: phx drain RANK [JOB]\n", argv[i]);
            return 2;
        } else if (!rs)
            rs = argv[i];
        else
            job = argv[i];
    }
    char *end;
    long rank = rs ? strtol(rs, &end, 10) : -1;
    if (!rs || *end || rank < 0) {
        fprintf(stderr, "phx: drain: RANK is a rank number\nusage: phx drain RANK [JOB]\n");
        return 2;
    }
    long pid = 0;
    int bad;
    char *jd = job_dir(job, &pid, "drain", &bad);
    if (!jd)
        return bad;
    char *path = NULL, buf[1 << 16];
    size_t n = 0;
    int rc = 1;
    char pat[40], host[256] = "", state[32] = "";
    snprintf(pat, sizeof pat, "{\"rank\":%ld,", rank);
    const char *r = NULL;
    long local = 1, npid = 0;
    if (asprintf(&path, "%s/state.json", jd) < 0)
        path = NULL;
    /* A rank still starting (spawned, not yet reported) is waited for while
     * its launcher lives: the launcher bounds the start by its own
     * startup-timeout and ends the job past it, so this wait ends too. */
    for (;;) {
        FILE *f = path ? fopen(path, "re") : NULL;
        n = 0;
        if (f) {
            n = fread(buf, 1, sizeof buf - 1, f);
            fclose(f);
        }
        buf[n] = 0;
        r = n ? strstr(buf, pat) : NULL;
        state[0] = 0;
        if (r)
            rank_field(r, "state", NULL, state, sizeof state);
        if (strcmp(state, "starting") || !pid || !alive(pid))
            break;
        nanosleep(&(struct timespec){ .tv_nsec = 20 * 1000 * 1000 }, NULL);
    }
    if (!n) {
        fprintf(stderr, "phx: drain: no job at %s%s\n", jd, pid && !alive(pid) ? " (its launcher is gone)" : "");
    } else if (!r || rank_field(r, "pid", &npid, NULL, 0) || rank_field(r, "state", NULL, state, sizeof state)) {
        fprintf(stderr, "phx: drain: the job at %s has no rank %ld\n", jd, rank);
    } else if (rank_field(r, "host", NULL, host, sizeof host), rank_field(r, "local", &local, NULL, 0), strcmp(state, "up")) {
        fprintf(stderr, "phx: drain: rank %ld is not running (%s)\n", rank, state);
    } else if (!local) {
        fprintf(stderr, "phx: drain: rank %ld runs on %s, not on this host: send it SIGTERM there "
                        "(its pid there is in 'phx status --json')\n", rank, host);
    } else if (npid <= 1 || kill((pid_t)npid, SIGTERM) < 0) {
        fprintf(stderr, "phx: drain: cannot signal rank %ld (pid %ld): %s\n", rank, npid, strerror(errno));
    } else {
        printf("phx: drain: asked rank %ld (pid %ld) to hand its tasks over and leave\n", rank, npid);
        rc = 0;
    }
    free(path);
    free(jd);
    return rc;
}
