#define _GNU_SOURCE   /* asprintf, pipe2, sigabbrev_np */
#include "phx_run.h"

#include "core/common/phx_err.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Must match PHX_EXIT_FENCED in core/node.h (not included: it pulls libuv). */
#define EXIT_FENCED 75

extern char **environ;

typedef struct {
    int rank;
    pid_t pid;              /* also the process group id */
    int fd[2];              /* stdout, stderr read ends; -1 once closed */
    char *buf[2];
    size_t len[2];
    int alive;
    int status;
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
} run_t;

static int sig_pipe[2] = { -1, -1 };
static struct rlimit nofile_orig;   /* restored for the nodes */
static int nofile_raised;

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

static void teardown(run_t *R, int why, int sig)
{
    if (R->why != WHY_NONE)
        return;
    R->why = why;
    R->sig = sig;
    R->settle_at = 0;
    if (R->nalive == 0)
        return;
    signal_all(R, SIGTERM);
    R->kill_at = now_s() + R->job->grace;
}

static void kill_stragglers(run_t *R)
{
    for (int i = 0; i < R->n; i++)
        if (R->p[i].alive)
            fprintf(stderr, "phx: rank %d (pid %d) still running after SIGTERM; sending SIGKILL\n",
                    R->p[i].rank, (int)R->p[i].pid);
    signal_all(R, SIGKILL);
    R->kill_at = 0;
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
    if (code == EXIT_FENCED) {
        fprintf(stderr, "phx: rank %d fenced (declared dead by the cluster)\n", p->rank);
        if (R->job->abort_on_failure) {
            fprintf(stderr, "phx: aborting the job (--abort-on-failure)\n");
            teardown(R, WHY_ABORT, 0);
        }
    } else if (code != 0 && R->job->abort_on_failure && R->nalive > 0 && !R->settle_at) {
        /* A job ending with a non-zero code makes every node exit with it at
         * about the same time; only a node leaving alone is a failure. */
        R->settle_at = now_s() + R->job->grace;
        R->settle_rank = p->rank;
    }
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
            on_exit_status(R, p);
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

/* environ plus PHX_RANK, for a local node. */
static char **local_env(int rank)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **e = calloc(n + 2, sizeof *e);
    if (!e)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "PHX_RANK=", 9) != 0 && !(e[k++] = strdup(environ[i])))
            goto oom;
    if (asprintf(&e[k], "PHX_RANK=%d", rank) < 0) {
        e[k] = NULL;
        goto oom;
    }
    return e;
oom:
    free_vec(e);
    return NULL;
}

static int forwarded(const char *kv)
{
    return !strncmp(kv, "PHX_", 4) && strncmp(kv, "PHX_RANK=", 9) && strncmp(kv, "PHX_RSH=", 8) &&
           strncmp(kv, "PHX_PIDFILE=", 12) && strncmp(kv, "PHX_KILL_GRACE=", 15);
}

/* RSH... HOST env PHX_...=... PHX_RANK=r PROGRAM ARGS..., the remote part
 * quoted because ssh hands it to the remote shell as one string. ssh does
 * not carry the environment, so every PHX_* variable goes explicitly. */
static char **remote_argv(const phx_job_t *job, int rank)
{
    size_t n = 0, na = 0, nr = 0;
    while (environ[n])
        n++;
    while (job->argv[na])
        na++;
    while (job->rsh[nr])
        nr++;
    char **v = calloc(nr + n + na + 4, sizeof *v);
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
    if (asprintf(&v[k++], "PHX_RANK=%d", rank) < 0) {
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
    const phx_rank_t *rk = &job->rt->r[p->rank];
    int out[2], err[2];
    char **env = NULL, **av = NULL;
    if (rk->local)
        env = local_env(p->rank);
    else
        av = remote_argv(job, p->rank);
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
        int nul = open("/dev/null", O_RDONLY);
        if (nul < 0 || dup2(nul, 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0)
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
    free_vec(env);
    free_vec(av);
    if (e) {
        close(out[0]);
        close(err[0]);
        return e;
    }
    p->pid = pid;
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

/* ---- main loop ---------------------------------------------------------- */

static int job_code(const run_t *R)
{
    if (R->why == WHY_SIGNAL)
        return 128 + R->sig;
    if (R->why == WHY_ABORT)
        return 1;
    int code = -1, mixed = 0;
    for (int i = 0; i < R->n; i++) {
        int st = R->p[i].status;
        if (!WIFEXITED(st) || WEXITSTATUS(st) == EXIT_FENCED)
            continue;
        int c = WEXITSTATUS(st);
        if (code >= 0 && c != code)
            mixed = 1;
        if (c > code)
            code = c;
    }
    if (code < 0) {
        fprintf(stderr, "phx: no node exited normally\n");
        return 1;
    }
    if (mixed) {
        fprintf(stderr, "phx: warning: nodes exited with different codes:");
        for (int i = 0; i < R->n; i++)
            if (WIFEXITED(R->p[i].status) && WEXITSTATUS(R->p[i].status) != EXIT_FENCED)
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
            if (R->why == WHY_NONE) {
                fprintf(stderr, "phx: caught SIG%s, stopping %d node(s)\n", signame(sig), R->nalive);
                teardown(R, WHY_SIGNAL, sig);
            } else if (sig == SIGINT && R->kill_at) {
                kill_stragglers(R);   /* a second Ctrl-C: do not wait for the grace */
            }
        }
    }
}

static int loop(run_t *R)
{
    struct pollfd *pf = calloc((size_t)R->n * 2 + 1, sizeof *pf);
    int *who = calloc((size_t)R->n * 2 + 1, sizeof *who);
    if (!pf || !who) {
        free(pf);
        free(who);
        return PHX_ENOMEM;
    }
    while (R->nalive > 0) {
        int k = 0;
        pf[k++] = (struct pollfd){ .fd = sig_pipe[0], .events = POLLIN };
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
        if (tmo > 1000)
            tmo = 1000;
        int n = poll(pf, (nfds_t)k, tmo);
        if (n < 0 && errno != EINTR) {
            int e = -errno;
            free(pf);
            free(who);
            return e;
        }
        for (int j = 1; n > 0 && j < k; j++)
            if (pf[j].revents) {
                proc_t *p = &R->p[who[j] / 2];
                pump(p, who[j] % 2, 0);
            }
        if (n > 0 && pf[0].revents)
            handle_signals(R);
        reap(R);
        t = now_s();
        if (R->kill_at && t >= R->kill_at && R->nalive > 0)
            kill_stragglers(R);
        if (R->settle_at && t >= R->settle_at && R->nalive > 0) {
            int st = R->p[R->settle_rank].status;
            fprintf(stderr, "phx: rank %d exited with code %d while %d node(s) kept running; "
                    "aborting the job (--abort-on-failure)\n", R->settle_rank, WEXITSTATUS(st),
                    R->nalive);
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
        R->p[i].fd[0] = R->p[i].fd[1] = -1;
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
    signal(SIGPIPE, SIG_IGN);   /* a closed stdout must not kill the launcher mid-job */

    int status = 0;
    for (int i = 0; i < R->n; i++) {
        if ((rc = spawn(R, &R->p[i]))) {
            fprintf(stderr, "phx: cannot start rank %d on %s: %s\n", i, job->rt->r[i].host,
                    phx_strerror(rc));
            teardown(R, WHY_ABORT, 0);
            break;
        }
    }
    if (!rc && job->pidfile && write_pidfile(R, job->pidfile))
        teardown(R, WHY_ABORT, 0);
    if ((rc = loop(R))) {
        fprintf(stderr, "phx: event loop failed: %s\n", phx_strerror(rc));
        signal_all(R, SIGKILL);
        status = 1;
    } else {
        status = job_code(R);
    }
    for (int i = 0; i < R->n; i++) {
        for (int s = 0; s < 2; s++)
            if (R->p[i].fd[s] >= 0)
                close_stream(&R->p[i], s);
        free(R->p[i].buf[0]);
        free(R->p[i].buf[1]);
    }
    free(R->p);
    free(R);
    return status;
}
