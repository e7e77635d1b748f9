#define _GNU_SOURCE   /* asprintf, pipe2, sigabbrev_np */
#include "phx_run.h"
#include "phx_events.h"
#include "phx_jobdir.h"
#include "phx_sd.h"
#include "phx_status.h"

#include "base/phx_err.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Must match core/node.h (not included: it pulls libuv). */
#define EXIT_PEER_LOST 70
#define EXIT_FENCED 75
#define EXIT_WORK_LOST 76
#define EXIT_CKPT_LOST 78   /* core/recovery.h */
/* ssh's code for a lost connection, also when the remote side was killed
 * (a host lost, its link down): a remote rank ending so is a dead node,
 * not a job result. */
#define EXIT_RSH_LOST 255

extern char **environ;

typedef struct {
    int rank;
    pid_t pid;              /* also the process group id */
    int fd[2];              /* stdout, stderr read ends; -1 once closed */
    int life;               /* write end of the node's stdin (its lifeline); never written */
    char *buf[2];
    size_t len[2];
    size_t said;            /* bytes of output relayed */
    int alive;
    int status;
    unsigned inc;           /* incarnation (PHX_INCARNATION): respawns so far */
    int stopped_kill;       /* kill_stopped() sent the SIGKILL: not the job's failure */
} proc_t;

enum { WHY_NONE, WHY_SIGNAL, WHY_ABORT };

typedef struct {
    const phx_job_t *job;
    proc_t *p;
    int n, nalive;
    int why, sig;           /* teardown reason; sig for WHY_SIGNAL */
    double kill_at;         /* teardown: SIGKILL deadline, 0 when sent */
    double settle_at;       /* abort mode: a non-zero exit waits for the rest */
    int settle_rank;
    int verdict;            /* the job's code when a verdict (76, 78) ended it */
    double ended_at;        /* first seen a node end the job normally (kill_stopped) */
    int node_ft;            /* a local node said it runs with fault tolerance (SIGUSR1,
                             * core/lifeline.c): the program may have turned it on itself */
} run_t;

static int sig_pipe[2] = { -1, -1 };
static struct rlimit nofile_orig;   /* restored for the nodes */
static int nofile_raised;
static phx_status_t *g_status;   /* NULL: no status line */

static void on_signal(int sig)
{
    int e = errno;
    unsigned char b = (unsigned char)sig;
    /* The loop drains the pipe every iteration, so it never fills up. */
    ssize_t w = write(sig_pipe[1], &b, 1);
    (void)w;
    errno = e;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *signame(int sig)
{
    const char *s = sigabbrev_np(sig);
    return s ? s : "?";
}

/* ---- output relay ------------------------------------------------------- */

static void write_all(int fd, struct iovec *iov, int cnt)
{
    while (cnt > 0) {
        ssize_t w = writev(fd, iov, cnt);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {   /* inherited O_NONBLOCK stdout */
                struct pollfd pf = { .fd = fd, .events = POLLOUT };
                poll(&pf, 1, 100);
                continue;
            }
            return;                  /* EPIPE etc.: the reader is gone; keep running the job */
        }
        while (cnt > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            cnt--;
        }
        if (cnt > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
}

static void emit(proc_t *p, int s, const char *line, size_t len)
{
    char pre[24];
    int pl = snprintf(pre, sizeof pre, "[%d] ", p->rank);
    struct iovec iov[3] = { { pre, (size_t)pl }, { (void *)line, len }, { "\n", 1 } };
    if (s && phx_events_fold(p->rank, line, len))
        return;   /* a link warning about a lost rank: counted into its recovery line */
    phx_status_hide(g_status);
    /* One writev per line: a line is never interleaved with another. */
    write_all(s ? STDERR_FILENO : STDOUT_FILENO, iov, 3);
}

/* Emits the complete lines buffered for stream s; with final, the rest too. */
static void flush_lines(proc_t *p, int s, int final)
{
    char *b = p->buf[s];
    size_t off = 0, len = p->len[s];
    for (;;) {
        char *nl = memchr(b + off, '\n', len - off);
        if (!nl)
            break;
        emit(p, s, b + off, (size_t)(nl - (b + off)));
        off = (size_t)(nl - b) + 1;
    }
    if (len - off >= PHX_RUN_LINE_MAX || (final && len > off)) {
        emit(p, s, b + off, len - off);
        off = len;
    }
    memmove(b, b + off, len - off);
    p->len[s] = len - off;
}

static void close_stream(proc_t *p, int s)
{
    flush_lines(p, s, 1);
    close(p->fd[s]);
    p->fd[s] = -1;
}

/* Reads what is available now, bounded so one chatty node cannot starve
 * the others: the poll loop comes back for the rest. drain lifts the bound
 * for a reaped node, whose writes are all in the pipe already. */
static void pump(proc_t *p, int s, int drain)
{
    for (int rounds = 0; p->fd[s] >= 0 && (drain || rounds < 4); rounds++) {
        ssize_t r = read(p->fd[s], p->buf[s] + p->len[s], PHX_RUN_LINE_MAX - p->len[s]);
        if (r > 0) {
            p->len[s] += (size_t)r;
            p->said += (size_t)r;
            flush_lines(p, s, 0);
        } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
            close_stream(p, s);
        } else if (errno == EAGAIN) {
            /* A reaped node's pipe may still be held by an orphaned
             * grandchild; stop at what is there rather than wait on it. */
            if (drain)
                close_stream(p, s);
            return;
        }
    }
}

/* ---- teardown ----------------------------------------------------------- */

static void signal_all(run_t *R, int sig)
{
    for (int i = 0; i < R->n; i++)
        if (R->p[i].alive && kill(-R->p[i].pid, sig) < 0 && errno == ESRCH)
            kill(R->p[i].pid, sig);   /* not yet a group leader (setpgid race) */
}

/* The signal that stops a node of this job. A node with fault tolerance
 * takes SIGTERM as a request to drain (drain-on=term: hand its tasks to
 * the others and leave); stopping the whole job must not make every node
 * drain into nobody, so such nodes get SIGINT, which only stops. Other
 * programs get SIGTERM, as from any launcher. */
static int stop_signal(const run_t *R) { return R->job->ft || R->node_ft ? SIGINT : SIGTERM; }

static void teardown(run_t *R, int why, int sig)
{
    if (R->why != WHY_NONE)
        return;
    R->why = why;
    R->sig = sig;
    R->settle_at = 0;
    if (R->nalive == 0)
        return;
    signal_all(R, stop_signal(R));
    R->kill_at = now_s() + R->job->grace;
}

static void kill_stragglers(run_t *R)
{
    for (int i = 0; i < R->n; i++)
        if (R->p[i].alive)
            fprintf(stderr, "phx: rank %d (pid %d) still running after SIG%s; sending SIGKILL\n",
                    R->p[i].rank, (int)R->p[i].pid, signame(stop_signal(R)));
    signal_all(R, SIGKILL);
    R->kill_at = 0;
}

/* A remote rank whose remote shell lost it: counted like a signal death. */
static int rsh_lost(const run_t *R, int i)
{
    int st = R->p[i].status;
    return !R->job->rt->r[i].local && WIFEXITED(st) && WEXITSTATUS(st) == EXIT_RSH_LOST;
}

static void on_exit_status(run_t *R, proc_t *p)
{
    const phx_rank_t *rk = &R->job->rt->r[p->rank];
    int st = p->status;
    if (R->why != WHY_NONE)
        return;   /* we are the ones stopping it: no news */
    if (WIFSIGNALED(st)) {
        fprintf(stderr, "phx: rank %d (pid %d, host %s) killed by signal %d (SIG%s)\n",
                p->rank, (int)p->pid, rk->host, WTERMSIG(st), signame(WTERMSIG(st)));
        if (R->job->abort_on_failure) {
            fprintf(stderr, "phx: aborting the job (--abort-on-failure)\n");
            teardown(R, WHY_ABORT, 0);
        }
        return;
    }
    int code = WEXITSTATUS(st);
    if (!rk->local && code != 0 && p->said == 0) {
        /* Nothing from the node itself: most likely the remote shell failed
         * (ssh says 255 when it cannot connect) and the node never ran. */
        fprintf(stderr, "phx: rank %d: '%s %s ...' exited with code %d and printed nothing; if the "
                        "node never started, the remote shell failed (check PHX_RSH)\n",
                p->rank, R->job->rsh[0], rk->host, code);
    }
    if (code == EXIT_FENCED || rsh_lost(R, p->rank)) {
        if (code == EXIT_FENCED)
            fprintf(stderr, "phx: rank %d fenced (declared dead by the cluster)\n", p->rank);
        else
            fprintf(stderr, "phx: rank %d (host %s): the remote shell exited %d: connection lost or "
                            "node killed; counted as a lost node\n", p->rank, rk->host, code);
        if (R->job->abort_on_failure) {
            fprintf(stderr, "phx: aborting the job (--abort-on-failure)\n");
            teardown(R, WHY_ABORT, 0);
        }
    } else if (code != 0 && (R->job->abort_on_failure || code == EXIT_WORK_LOST || code == EXIT_CKPT_LOST) &&
               R->nalive > 0 && !R->settle_at) {
        /* A job ending with a non-zero code makes every node exit with it at
         * about the same time; only a node leaving alone is a failure. A
         * verdict on the job also stops what is left after the grace: a
         * respawned rank still waiting to be taken in would wait for
         * nothing (twice startup-timeout). */
        R->settle_at = now_s() + R->job->grace;
        R->settle_rank = p->rank;
    }
}

static int spawn(run_t *R, proc_t *p);
static int write_pidfile(const run_t *R, const char *path);

/* restart-on=respawn: a node that died (a signal, or fenced) comes back on
 * the same host as the next incarnation, which rejoins the running job. */
static void respawn(run_t *R, proc_t *p)
{
    int st = p->status;
    if (!R->job->respawn || R->why != WHY_NONE || !R->nalive ||
        !(WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) == EXIT_FENCED)))
        return;
    if ((int)p->inc >= R->job->respawn) {
        fprintf(stderr, "phx: rank %d: not respawned again (%u respawns, PHX_RESPAWN_MAX)\n", p->rank, p->inc);
        return;
    }
    for (int s = 0; s < 2; s++)
        if (p->fd[s] >= 0)
            close_stream(p, s);
    if (p->life >= 0)
        close(p->life);
    p->life = -1;
    p->inc++;
    int rc = spawn(R, p);
    if (rc) {
        fprintf(stderr, "phx: cannot respawn rank %d on %s: %s\n", p->rank, R->job->rt->r[p->rank].host,
                phx_strerror(rc));
        return;
    }
    fprintf(stderr, "phx: rank %d respawned as incarnation %u (pid %d, restart-on=respawn)\n", p->rank, p->inc,
            (int)p->pid);
    phx_status_respawned(g_status, p->rank);
    if (R->job->pidfile)
        write_pidfile(R, R->job->pidfile);
}

static void reap(run_t *R)
{
    for (;;) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid <= 0) {
            if (pid < 0 && errno == EINTR)
                continue;
            return;
        }
        for (int i = 0; i < R->n; i++) {
            proc_t *p = &R->p[i];
            if (p->pid != pid || !p->alive)
                continue;
            p->alive = 0;
            p->status = st;
            R->nalive--;
            pump(p, 0, 1);
            pump(p, 1, 1);
            phx_status_hide(g_status);   /* on_exit_status may print */
            on_exit_status(R, p);
            phx_status_exited(g_status, p->rank, st);
            respawn(R, p);
            break;
        }
    }
}

/* ---- spawning ----------------------------------------------------------- */

char *phx_shell_quote(const char *s)
{
    static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                               "0123456789_./:=,+@%-";
    size_t n = strlen(s);
    if (n && strspn(s, safe) == n)
        return strdup(s);
    char *q = malloc(n * 4 + 3), *o = q;
    if (!q)
        return NULL;
    *o++ = '\'';
    for (; *s; s++) {
        if (*s == '\'') {
            memcpy(o, "'\\''", 4);
            o += 4;
        } else {
            *o++ = *s;
        }
    }
    *o++ = '\'';
    *o = 0;
    return q;
}

static void free_vec(char **v)
{
    if (!v)
        return;
    for (char **p = v; *p; p++)
        free(*p);
    free(v);
}

/* How many ranks share rank's host, for PHX_LOCAL_SIZE: the node divides
 * the host's cores among them (core/config.c). */
static int local_size(const phx_ranktab_t *rt, int rank)
{
    int k = 0;
    for (int i = 0; i < rt->n; i++)
        k += !strcmp(rt->r[i].host, rt->r[rank].host);
    return k;
}

/* environ plus PHX_STATUS_FD, PHX_RANK, PHX_LOCAL_SIZE and PHX_INCARNATION
 * (a respawned node), for a local node. */
static char **local_env(const phx_job_t *job, int rank, unsigned inc)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **e = calloc(n + 6, sizeof *e);
    if (!e)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "PHX_RANK=", 9) && strncmp(environ[i], "PHX_STATUS_FD=", 14) &&
            strncmp(environ[i], "PHX_LOCAL_SIZE=", 15) &&
            strncmp(environ[i], "PHX_SECRET_STDIN=", 17) &&   /* a local node's stdin has no secret */
            strncmp(environ[i], "PHX_INCARNATION=", 16) && strncmp(environ[i], "PHX_LISTEN_FD=", 14) &&
            !(e[k++] = strdup(environ[i])))
            goto oom;
    if (g_status && !(e[k++] = strdup("PHX_STATUS_FD=3")))   /* see phx_status.h */
        goto oom;
    if (asprintf(&e[k], "PHX_RANK=%d", rank) < 0) {
        e[k] = NULL;
        goto oom;
    }
    if (asprintf(&e[++k], "PHX_LOCAL_SIZE=%d", local_size(job->rt, rank)) < 0) {
        e[k] = NULL;
        goto oom;
    }
    if (inc && asprintf(&e[++k], "PHX_INCARNATION=%u", inc) < 0) {
        e[k] = NULL;
        goto oom;
    }
    int lfd = job->rt->r[rank].listen_fd;
    if (lfd >= 0 && asprintf(&e[++k], "PHX_LISTEN_FD=%d", lfd) < 0) {
        e[k] = NULL;
        goto oom;
    }
    return e;
oom:
    free_vec(e);
    return NULL;
}

/* PHX_SECRET never goes on a command line (ps shows it to every user of
 * the remote host): it travels on the node's stdin, see spawn(). */
static int forwarded(const char *kv)
{
    return !strncmp(kv, "PHX_", 4) && strncmp(kv, "PHX_RANK=", 9) && strncmp(kv, "PHX_RSH=", 8) &&
           strncmp(kv, "PHX_PIDFILE=", 12) && strncmp(kv, "PHX_KILL_GRACE=", 15) &&
           strncmp(kv, "PHX_STATUS_FD=", 14) &&
           strncmp(kv, "PHX_SECRET=", 11) && strncmp(kv, "PHX_SECRET_STDIN=", 17) &&
           strncmp(kv, "PHX_LOCAL_SIZE=", 15) && strncmp(kv, "PHX_INCARNATION=", 16) &&
           strncmp(kv, "PHX_LISTEN_FD=", 14);
}

/* RSH... HOST env PHX_...=... PHX_RANK=r PHX_LOCAL_SIZE=l [PHX_SECRET_STDIN=1]
 * PROGRAM ARGS..., the remote part quoted because ssh hands it to the
 * remote shell as one string. ssh does not carry the environment, so every
 * PHX_* variable goes explicitly. */
static char **remote_argv(const phx_job_t *job, int rank, unsigned inc)
{
    size_t n = 0, na = 0, nr = 0;
    while (environ[n])
        n++;
    while (job->argv[na])
        na++;
    while (job->rsh[nr])
        nr++;
    size_t nx = 0;
    while (job->exports && job->exports[nx])
        nx++;
    char **v = calloc(nr + n + na + nx + 7, sizeof *v);
    if (!v)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < nr; i++)
        if (!(v[k++] = strdup(job->rsh[i])))
            goto oom;
    if (!(v[k++] = strdup(job->rt->r[rank].host)) || !(v[k++] = strdup("env")))
        goto oom;
    for (size_t i = 0; i < n; i++)
        if (forwarded(environ[i]) && !(v[k++] = phx_shell_quote(environ[i])))
            goto oom;
    /* -x VAR: ssh carries no environment, so each goes explicitly too. */
    for (size_t i = 0; i < nx; i++) {
        const char *val = getenv(job->exports[i]);
        char *kv;
        if (!val || !strncmp(job->exports[i], "PHX_", 4))
            continue;   /* PHX_* went above */
        if (asprintf(&kv, "%s=%s", job->exports[i], val) < 0)
            goto oom;
        v[k] = phx_shell_quote(kv);
        free(kv);
        if (!v[k++])
            goto oom;
    }
    if (asprintf(&v[k++], "PHX_RANK=%d", rank) < 0 ||
        asprintf(&v[k++], "PHX_LOCAL_SIZE=%d", local_size(job->rt, rank)) < 0) {
        v[k - 1] = NULL;
        goto oom;
    }
    if (job->secret && !(v[k++] = strdup("PHX_SECRET_STDIN=1")))
        goto oom;
    if (inc && asprintf(&v[k++], "PHX_INCARNATION=%u", inc) < 0) {
        v[k - 1] = NULL;
        goto oom;
    }
    for (size_t i = 0; i < na; i++)
        if (!(v[k++] = phx_shell_quote(job->argv[i])))
            goto oom;
    return v;
oom:
    free_vec(v);
    return NULL;
}

static int spawn(run_t *R, proc_t *p)
{
    const phx_job_t *job = R->job;
    phx_rank_t *rk = &job->rt->r[p->rank];
    int out[2], err[2], life[2];
    char **env = NULL, **av = NULL;
    /* With PHX_INCARNATION_FILE the node counts its own starts, as it
     * would under a container restart policy. */
    unsigned inc = getenv("PHX_INCARNATION_FILE") ? 0 : p->inc;
    if (rk->local)
        env = local_env(job, p->rank, inc);
    else
        av = remote_argv(job, p->rank, inc);
    if (rk->local ? !env : !av) {
        free_vec(env);
        return PHX_ENOMEM;
    }
    if (pipe2(out, O_CLOEXEC) < 0) {
        int e = -errno;
        free_vec(env);
        free_vec(av);
        return e;
    }
    if (pipe2(err, O_CLOEXEC) < 0) {
        int e = -errno;
        close(out[0]);
        close(out[1]);
        free_vec(env);
        free_vec(av);
        return e;
    }
    /* CLOEXEC on both ends: no other node may inherit this write end, or
     * this node would not see end of file when phx dies. */
    if (pipe2(life, O_CLOEXEC) < 0) {
        int e = -errno;
        close(out[0]);
        close(out[1]);
        close(err[0]);
        close(err[1]);
        free_vec(env);
        free_vec(av);
        return e;
    }
    pid_t me = getpid();
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);   /* no launcher handler may run in the child */
    pid_t pid = fork();
    if (pid == 0) {
        struct sigaction dfl = { .sa_handler = SIG_DFL };
        for (int s = 1; s < NSIG; s++)
            sigaction(s, &dfl, NULL);   /* SIG_IGN (e.g. SIGPIPE) would survive exec */
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (nofile_raised)
            setrlimit(RLIMIT_NOFILE, &nofile_orig);   /* select()-based programs break above 1024 */
        setpgid(0, 0);
        /* A node, or the local ssh of a remote one, dies with phx (phx is
         * single-threaded, so "the parent thread" is phx itself); the
         * stdin lifeline covers the remote side and programs that block
         * SIGTERM. A node with fault tolerance gets SIGINT: SIGTERM would
         * ask it to drain (stop_signal). */
        if (prctl(PR_SET_PDEATHSIG, stop_signal(R)) < 0 || getppid() != me)
            _exit(127);   /* phx died before we could tie us to it */
        if (dup2(life[0], 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0)
            _exit(127);
        if (rk->local && g_status && (phx_status_wfd(g_status) == 3 ? fcntl(3, F_SETFD, 0)
                                                                 : dup2(phx_status_wfd(g_status), 3)) < 0)
            _exit(127);
        if (rk->local && rk->listen_fd >= 0 && fcntl(rk->listen_fd, F_SETFD, 0) < 0)   /* PHX_LISTEN_FD */
            _exit(127);
        if (rk->local) {
            execve(job->prog_path, job->argv, env);
            dprintf(2, "phx: cannot execute %s: %s\n", job->prog_path, strerror(errno));
        } else {
            execvp(av[0], av);
            dprintf(2, "phx: cannot execute remote shell %s: %s\n", av[0], strerror(errno));
        }
        _exit(127);
    }
    int e = pid < 0 ? -errno : 0;
    if (pid > 0)
        setpgid(pid, pid);   /* both sides, so kill(-pid) works whoever runs first */
    sigprocmask(SIG_SETMASK, &old, NULL);
    close(out[1]);
    close(err[1]);
    close(life[0]);
    if (pid > 0 && rk->listen_fd >= 0) {
        /* The node holds the port now; the launcher must not: a socket
         * listening after the node died would take its peers' redials
         * and never answer. */
        close(rk->listen_fd);
        rk->listen_fd = -1;
    }
    free_vec(env);
    free_vec(av);
    if (e) {
        close(out[0]);
        close(err[0]);
        close(life[1]);
        return e;
    }
    p->life = life[1];
    /* The secret is the first line of a remote node's lifeline, read by
     * phx_main before it watches the pipe for end of file. One write of at
     * most PHX_RUN_SECRET_MAX + 1 bytes into an empty pipe: never blocks,
     * never partial. */
    if (!rk->local && job->secret) {
        size_t sl = strlen(job->secret);
        struct iovec iov[2] = { { (void *)job->secret, sl }, { "\n", 1 } };
        if (writev(life[1], iov, 2) != (ssize_t)sl + 1)   /* EPIPE: the node is gone already */
            fprintf(stderr, "phx: rank %d: cannot send the cluster secret to %s: %s\n", p->rank,
                    rk->host, strerror(errno));
    }
    p->pid = pid;
    phx_jobdir_spawned(p->rank, pid, p->inc);
    p->fd[0] = out[0];
    p->fd[1] = err[0];
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    p->alive = 1;
    R->nalive++;
    return 0;
}

static int write_pidfile(const run_t *R, const char *path)
{
    char *tmp;
    if (asprintf(&tmp, "%s.tmp.%d", path, (int)getpid()) < 0)
        return PHX_ENOMEM;
    int rc = 0;
    FILE *fp = fopen(tmp, "we");
    if (!fp) {
        rc = -errno;
    } else {
        for (int i = 0; i < R->n; i++)
            fprintf(fp, "%d %d %s\n", R->p[i].rank, (int)R->p[i].pid, R->job->rt->r[i].host);
        if (fflush(fp) != 0)
            rc = -errno;
        if (fclose(fp) != 0 && !rc)
            rc = -errno;
        if (!rc && rename(tmp, path) < 0)   /* readers see all of it or nothing */
            rc = -errno;
        if (rc)
            unlink(tmp);
    }
    if (rc)
        fprintf(stderr, "phx: cannot write pidfile %s: %s\n", path, phx_strerror(rc));
    free(tmp);
    return rc;
}

/* The job record, recovery lines and file_sd list (phx_jobdir.h,
 * phx_events.h, phx_sd.h). phx_main passes --verbose and --metrics-sd as
 * PHX_VERBOSE and PHX_METRICS_SD. */
static void phx_watch_open(const phx_job_t *job)
{
    int verbose = getenv("PHX_VERBOSE") && !strcmp(getenv("PHX_VERBOSE"), "1");
    phx_jobdir_open(job->rt, job->argv[0], !job->quiet && (verbose || isatty(STDERR_FILENO)));
    phx_events_open(verbose);
    const char *sd = getenv("PHX_METRICS_SD");
    if (sd && *sd) {
        const char *mp = getenv("PHX_METRICS_PORT");
        int port = mp ? atoi(mp) : 0;
        for (char **a = job->argv; *a; a++)   /* a flag after PROGRAM wins, as in the node */
            if (!strncmp(*a, "--phx-metrics-port=", 19))
                port = atoi(*a + 19);
        phx_sd_open(sd, port);
    }
}

/* ---- main loop ---------------------------------------------------------- */

/* Why the job's code is not 0, naming the ranks that died. */
static void summary(const run_t *R, int code)
{
    char dead[512];
    size_t off = 0;
    int k = 0;
    dead[0] = 0;
    for (int i = 0; i < R->n && off < sizeof dead - 40; i++) {
        int st = R->p[i].status;
        if (WIFSIGNALED(st))
            off += (size_t)snprintf(dead + off, sizeof dead - off, "%s%d (SIG%s)", k++ ? ", " : "", i,
                                    signame(WTERMSIG(st)));
        else if (WEXITSTATUS(st) == EXIT_FENCED)
            off += (size_t)snprintf(dead + off, sizeof dead - off, "%s%d (fenced)", k++ ? ", " : "", i);
        else if (rsh_lost(R, i))
            off += (size_t)snprintf(dead + off, sizeof dead - off, "%s%d (connection lost)", k++ ? ", " : "", i);
    }
    if (code == EXIT_WORK_LOST) {
        fprintf(stderr, "phx: exit %d (work lost): %s%s died holding work that no recovery mode "
                        "covers, so the result is incomplete; a program that registers "
                        "phx_on_failure handles failures itself and may end with 0\n", code,
                k ? "rank(s) " : "a node", k ? dead : "");
        /* A survivor may see the end of the job before the failure notice. */
        for (int i = 0; i < R->n; i++)
            if (WIFEXITED(R->p[i].status) && WEXITSTATUS(R->p[i].status) == 0)
                fprintf(stderr, "phx: rank %d exited 0: it saw the job end before it learned of "
                                "the failure\n", i);
    }
    else if (code == EXIT_PEER_LOST)
        fprintf(stderr, "phx: exit %d (peer lost): %s%s died and fault tolerance is off "
                        "(--phx-ft=1 turns it on)\n", code, k ? "rank(s) " : "a node", k ? dead : "");
    else if (code != 0 && k)
        fprintf(stderr, "phx: exit %d; rank(s) %s died during the job\n", code, dead);
}

/* The first rank (lowest) that died of a signal the launcher did not send:
 * its signal, else 0. */
static int died_of_signal(const run_t *R, int *rank)
{
    for (int i = 0; i < R->n; i++)
        if (WIFSIGNALED(R->p[i].status) && !R->p[i].stopped_kill) {
            *rank = i;
            return WTERMSIG(R->p[i].status);
        }
    return 0;
}

static int job_code(const run_t *R)
{
    if (R->why == WHY_SIGNAL)
        return 128 + R->sig;
    if (R->why == WHY_ABORT) {
        if (R->verdict)   /* a node's verdict ended the job: say what was lost */
            summary(R, R->verdict);
        return R->verdict ? R->verdict : 1;
    }
    int code = -1, mixed = 0, dead = 0, sig = died_of_signal(R, &dead);
    for (int i = 0; i < R->n; i++) {
        int st = R->p[i].status;
        if (!WIFEXITED(st) || WEXITSTATUS(st) == EXIT_FENCED || rsh_lost(R, i))
            continue;
        int c = WEXITSTATUS(st);
        if (code >= 0 && c != code)
            mixed = 1;
        if (c > code)
            code = c;
    }
    /* A rank killed by a signal is the job's result, as under mpirun,
     * unless fault tolerance was on to survive it (then the survivors'
     * code says whether it did: 0, or a verdict such as 76). */
    if (sig && (code < 0 || (code == 0 && !R->job->ft && !R->node_ft))) {
        summary(R, 128 + sig);
        fprintf(stderr, "phx: exit %d = 128 + SIG%s, the signal that killed rank %d%s\n", 128 + sig,
                signame(sig), dead, code == 0 ? " (the others exited 0; --phx-ft=1 lets a phalanx job "
                                               "survive a lost node)" : "");
        return 128 + sig;
    }
    if (code < 0) {
        fprintf(stderr, "phx: no node exited normally\n");
        return 1;
    }
    summary(R, code);
    if (mixed && code != EXIT_WORK_LOST) {   /* 76 beside 0: summary() explains */
        fprintf(stderr, "phx: warning: nodes exited with different codes:");
        for (int i = 0; i < R->n; i++)
            if (WIFEXITED(R->p[i].status) && WEXITSTATUS(R->p[i].status) != EXIT_FENCED && !rsh_lost(R, i))
                fprintf(stderr, " %d:%d", i, WEXITSTATUS(R->p[i].status));
        fprintf(stderr, " (rank:code); exiting with %d\n", code);
    }
    return code;
}

static void handle_signals(run_t *R)
{
    unsigned char b[64];
    ssize_t r;
    while ((r = read(sig_pipe[0], b, sizeof b)) > 0) {
        for (ssize_t i = 0; i < r; i++) {
            int sig = b[i];
            if (sig == SIGCHLD)
                continue;   /* reap() runs every iteration */
            if (sig == SIGUSR1) {
                R->node_ft = 1;
                continue;
            }
            if (R->why == WHY_NONE) {
                fprintf(stderr, "phx: caught SIG%s, stopping %d node(s)\n", signame(sig), R->nalive);
                teardown(R, WHY_SIGNAL, sig);
            } else if (sig == SIGINT && R->kill_at) {
                kill_stragglers(R);   /* a second Ctrl-C: do not wait for the grace */
            }
        }
    }
}

/* A node stopped by a signal (SIGSTOP, SIGTSTP, a tracer) cannot end by
 * itself: its peers declare it dead and finish without it, and it learns so
 * only once resumed. Left alone it would hold phx for ever, after the job's
 * result is out. So a local node found stopped STOPPED_GRACE s after another
 * node ended the job normally is SIGKILLed, and reported like any node
 * killed by a signal; the job's code stays the survivors'. A node still
 * running is left to its own watchdog (README, Launching). */
#define STOPPED_GRACE 5.0
static int proc_stopped(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *c = strrchr(buf, ')');   /* the command name may hold ") " */
    return c && c[1] == ' ' && (c[2] == 'T' || c[2] == 't');
}

static void kill_stopped(run_t *R)
{
    if (R->why != WHY_NONE || R->nalive == 0)
        return;
    double t = now_s();
    if (!R->ended_at) {
        for (int i = 0; i < R->n; i++) {
            int st = R->p[i].status;
            if (!R->p[i].alive && WIFEXITED(st) && WEXITSTATUS(st) != EXIT_FENCED && !rsh_lost(R, i)) {
                R->ended_at = t;
                break;
            }
        }
        return;
    }
    if (t < R->ended_at + STOPPED_GRACE)
        return;
    for (int i = 0; i < R->n; i++) {
        proc_t *p = &R->p[i];
        if (!p->alive || !R->job->rt->r[i].local || !proc_stopped(p->pid))
            continue;
        phx_status_hide(g_status);
        fprintf(stderr, "phx: rank %d (pid %d) is stopped (SIGSTOP?) %.0f s after the job ended; "
                        "killing it\n", p->rank, (int)p->pid, t - R->ended_at);
        p->stopped_kill = 1;
        if (kill(-p->pid, SIGKILL) < 0)
            kill(p->pid, SIGKILL);
    }
}

static int loop(run_t *R)
{
    struct pollfd *pf = calloc((size_t)R->n * 2 + 2, sizeof *pf);
    int *who = calloc((size_t)R->n * 2 + 2, sizeof *who);
    if (!pf || !who) {
        free(pf);
        free(who);
        return PHX_ENOMEM;
    }
    while (R->nalive > 0) {
        int k = 0;
        pf[k++] = (struct pollfd){ .fd = sig_pipe[0], .events = POLLIN };
        if (g_status) {
            who[k] = -1;
            pf[k++] = (struct pollfd){ .fd = phx_status_rfd(g_status), .events = POLLIN };
        }
        for (int i = 0; i < R->n; i++)
            for (int s = 0; s < 2; s++)
                if (R->p[i].fd[s] >= 0) {
                    who[k] = i * 2 + s;
                    pf[k++] = (struct pollfd){ .fd = R->p[i].fd[s], .events = POLLIN };
                }
        double t = now_s(), next = 0;
        if (R->kill_at)
            next = R->kill_at;
        if (R->settle_at && (!next || R->settle_at < next))
            next = R->settle_at;
        /* SIGCHLD may have fired before the pipe existed for it: never block
         * forever without re-checking waitpid. */
        int tmo = 1000;
        if (next)
            tmo = next <= t ? 0 : (int)((next - t) * 1000) + 1;
        int st_ms = phx_status_tick(g_status);
        if (tmo > st_ms)
            tmo = st_ms;
        int n = poll(pf, (nfds_t)k, tmo);
        if (n < 0 && errno != EINTR) {
            int e = -errno;
            free(pf);
            free(who);
            return e;
        }
        for (int j = 1; n > 0 && j < k; j++)
            if (pf[j].revents && who[j] < 0) {
                phx_status_read(g_status);
            } else if (pf[j].revents) {
                proc_t *p = &R->p[who[j] / 2];
                pump(p, who[j] % 2, 0);
            }
        if (n > 0 && pf[0].revents) {
            phx_status_hide(g_status);
            handle_signals(R);
        }
        reap(R);
        kill_stopped(R);
        t = now_s();
        if (R->kill_at && t >= R->kill_at && R->nalive > 0)
            kill_stragglers(R);
        if (R->settle_at && t >= R->settle_at && R->nalive > 0) {
            int st = R->p[R->settle_rank].status;
            int code = WEXITSTATUS(st);
            if (code == EXIT_WORK_LOST || code == EXIT_CKPT_LOST)
                R->verdict = code;
            fprintf(stderr, "phx: rank %d exited with code %d while %d node(s) kept running; "
                    "aborting the job (%s)\n", R->settle_rank, code, R->nalive,
                    R->verdict ? "the job cannot finish" : "--abort-on-failure");
            teardown(R, WHY_ABORT, 0);
        }
    }
    free(pf);
    free(who);
    return 0;
}

int phx_run_job(const phx_job_t *job)
{
    run_t *R = calloc(1, sizeof *R);
    if (!R) {
        fprintf(stderr, "phx: out of memory\n");
        return 1;
    }
    R->job = job;
    R->n = job->rt->n;
    /* Two pipes per node: let large local jobs use the hard limit. */
    if (getrlimit(RLIMIT_NOFILE, &nofile_orig) == 0 && nofile_orig.rlim_cur < nofile_orig.rlim_max) {
        struct rlimit rl = { nofile_orig.rlim_max, nofile_orig.rlim_max };
        nofile_raised = setrlimit(RLIMIT_NOFILE, &rl) == 0;
    }
    R->p = calloc((size_t)R->n, sizeof *R->p);
    int rc = R->p ? 0 : PHX_ENOMEM;
    for (int i = 0; !rc && i < R->n; i++) {
        R->p[i].rank = i;
        R->p[i].fd[0] = R->p[i].fd[1] = R->p[i].life = -1;
        if (!(R->p[i].buf[0] = malloc(PHX_RUN_LINE_MAX)) || !(R->p[i].buf[1] = malloc(PHX_RUN_LINE_MAX)))
            rc = PHX_ENOMEM;
    }
    if (!rc && pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
        rc = -errno;
    if (rc) {
        fprintf(stderr, "phx: cannot set up: %s\n", phx_strerror(rc));
        return 1;   /* exiting: the OS reclaims the partial setup */
    }
    struct sigaction sa = { .sa_handler = on_signal };
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGCHLD, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);   /* a node runs with fault tolerance */
    signal(SIGPIPE, SIG_IGN);   /* a closed stdout must not kill the launcher mid-job */

    int status = 0;
    g_status = phx_status_open(R->n, job->quiet);
    phx_watch_open(job);
    /* PHX_TEST_SPAWN_HOLD=K: after K nodes, the spawn waits for a signal,
     * so a test can signal the launcher in the middle of a spawn by
     * construction rather than by timing. */
    const char *hs = getenv("PHX_TEST_SPAWN_HOLD");
    int hold = hs && *hs ? atoi(hs) : -1;
    for (int i = 0; i < R->n; i++) {
        /* SIGTERM and SIGINT stop a long spawn too: nodes already started
         * are torn down, none more is started. */
        while (i == hold && R->why == WHY_NONE) {
            struct pollfd pf = { .fd = sig_pipe[0], .events = POLLIN };
            poll(&pf, 1, -1);
            handle_signals(R);
        }
        handle_signals(R);
        if (R->why != WHY_NONE)
            break;
        if ((rc = spawn(R, &R->p[i]))) {
            fprintf(stderr, "phx: cannot start rank %d on %s: %s\n", i, job->rt->r[i].host,
                    phx_strerror(rc));
            teardown(R, WHY_ABORT, 0);
            break;
        }
    }
    if (!rc && R->why == WHY_NONE && job->pidfile && write_pidfile(R, job->pidfile))
        teardown(R, WHY_ABORT, 0);
    if ((rc = loop(R))) {
        fprintf(stderr, "phx: event loop failed: %s\n", phx_strerror(rc));
        signal_all(R, SIGKILL);
        status = 1;
    } else {
        phx_events_close();
        phx_status_close(g_status);   /* the last line stays above the summary */
        g_status = NULL;
        /* A node's SIGUSR1 is pending in the pipe if it came just before
         * the end; a signal for the launcher changes nothing now. */
        unsigned char b[64];
        ssize_t r;
        while ((r = read(sig_pipe[0], b, sizeof b)) > 0)
            for (ssize_t i = 0; i < r; i++)
                R->node_ft |= b[i] == SIGUSR1;
        status = job_code(R);
    }
    for (int i = 0; i < R->n; i++) {
        for (int s = 0; s < 2; s++)
            if (R->p[i].fd[s] >= 0)
                close_stream(&R->p[i], s);
        if (R->p[i].life >= 0)
            close(R->p[i].life);
        free(R->p[i].buf[0]);
        free(R->p[i].buf[1]);
    }
    phx_status_close(g_status);
    g_status = NULL;
    phx_sd_close();
    phx_jobdir_close();
    free(R->p);
    free(R);
    return status;
}
