/* Ending for sure (comm thread): see core/lifeline.h. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/node.h"
#include "core/eventlog.h"
#include "core/lifeline.h"
#include "core/recovery.h"
#include "base/phx_err.h"
#include "base/phx_log.h"

static void *watchdog(void *arg)
{
    phx_node_t *n = arg;
    uint64_t ms = (uint64_t)n->cfg.hb_timeout_ms + PHX_STOP_SLACK_MS;
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0)
        ;
    fprintf(stderr, "phalanx: rank %d: still stopping after %llu ms (a task handler that does not "
                    "return?); exiting with %d now\n", n->rank, (unsigned long long)ms, n->exit_code);
    _exit(n->exit_code);
}

/* Ends the job here for a reason outside it (a signal, the launcher gone). */
static void stop_bounded(phx_node_t *n, int code)
{
    phx_node_exit(n, code, 0);
    pthread_t th;
    pthread_attr_t at;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);   /* signals stay with this thread */
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &at, watchdog, n))
        PHX_WARN("node", "cannot start the shutdown watchdog; stopping without a bound");
    pthread_attr_destroy(&at);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void on_signal(uv_signal_t *s, int sig)
{
    phx_node_t *n = s->data;
    if (atomic_load(&n->stopping)) {
        /* Already on the way out (the signal handles close as it goes):
         * a signal now means do not wait any longer. */
        fprintf(stderr, "phalanx: rank %d: signal %d while stopping; exiting now\n", n->rank, sig);
        _exit(128 + sig);
    }
    /* SIGTERM is how schedulers and container runtimes ask a node to go
     * (SIGKILL follows after a grace): with drain-on=term the recovery
     * mode hands its work over and ends the node itself (exit 0). The
     * launcher stops a whole job with SIGINT, which never drains. */
    if (sig == SIGTERM && n->cfg.drain_term && phx_recovery_drain(n, 1) == 0)
        return;
    PHX_INFO("node", "signal %d: stopping", sig);
    stop_bounded(n, 128 + sig);
}

void phx_lifeline_signals(phx_node_t *n)
{
    uv_signal_init(&n->loop, &n->sigterm);
    uv_signal_init(&n->loop, &n->sigint);
    n->sigterm.data = n->sigint.data = n;
    uv_signal_start(&n->sigterm, on_signal, SIGTERM);
    uv_signal_start(&n->sigint, on_signal, SIGINT);
}

static void lifeline_alloc(uv_handle_t *h, size_t size, uv_buf_t *b)
{
    static char sink[64];   /* nothing is expected on it; whatever comes is dropped */
    (void)h; (void)size;
    *b = uv_buf_init(sink, sizeof sink);
}

static void lifeline_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *b)
{
    phx_node_t *n = st->data;
    (void)b;
    if (nread >= 0 || atomic_load(&n->stopping))
        return;
    PHX_ERROR("node", "launcher gone (%s on stdin, the launcher's lifeline): stopping",
              nread == UV_EOF ? "end of file" : uv_strerror((int)nread));
    phx_evlog("launcher_lost", NULL);
    stop_bounded(n, 128 + SIGHUP);
}

/* stdin is a pipe from the launcher (locally) or the ssh session (remotely)
 * that nobody writes to: its end of file means the launcher or the session
 * is gone, and so must this node be. */
/* A launcher counts a node killed by a signal as the job's failure unless
 * fault tolerance may survive it; a program can turn ft on itself (the GLB
 * library does), where the launcher cannot see it. So a node with ft on
 * says so to a local launcher, its parent: one SIGUSR1. */
static void tell_launcher_ft(const phx_node_t *n)
{
    const char *lp = getenv("PHX_LAUNCHER_PID");
    if (!n->cfg.ft || !lp || atol(lp) <= 1 || getppid() != (pid_t)atol(lp))
        return;
    kill(getppid(), SIGUSR1);
}

int phx_lifeline_open(phx_node_t *n)
{
    const char *v = getenv("PHX_LIFELINE");
    struct stat st;
    tell_launcher_ft(n);
    if (!v || strcmp(v, "1") != 0)
        return 0;
    if (fstat(0, &st) < 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) {
        PHX_WARN("node", "PHX_LIFELINE is set but stdin is not a pipe: not watching for the launcher");
        return 0;
    }
    int rc = uv_pipe_init(&n->loop, &n->lifeline, 0);
    if (rc)
        goto fail;
    n->lifeline.data = n;
    n->lifeline_open = 1;
    if ((rc = uv_pipe_open(&n->lifeline, 0)) || (rc = uv_read_start((uv_stream_t *)&n->lifeline,
                                                                      lifeline_alloc, lifeline_read)))
        goto fail;
    return 0;
fail:
    fprintf(stderr, "phalanx: rank %d: cannot watch stdin for the launcher's end: %s\n", n->rank,
            uv_strerror(rc));
    return PHX_EIO;
}

static void closed_one(uv_handle_t *h) { (void)h; }

void phx_lifeline_close(phx_node_t *n)
{
    uv_close((uv_handle_t *)&n->sigterm, closed_one);
    uv_close((uv_handle_t *)&n->sigint, closed_one);
    if (n->lifeline_open) {
        n->lifeline_open = 0;
        uv_close((uv_handle_t *)&n->lifeline, closed_one);
    }
}
