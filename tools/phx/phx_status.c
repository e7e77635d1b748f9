#define _GNU_SOURCE   /* pipe2 */
#include "phx_status.h"
#include "phx_events.h"
#include "phx_jobdir.h"
#include "phx_sd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EXIT_FENCED 75          /* core/node.h */
#define LIVE_MS 250             /* terminal redraw period */
#define RATE_WINDOW 8           /* progress samples kept for the rate */

typedef struct {
    uint64_t done, total, dead, epoch, rec;
    int reported, exited, killed, fenced;
    int respawns;               /* a respawned rank is up again, though in the others' dead lists */
} node_t;

struct phx_status {
    int n, tty, fd[2];
    int quiet;                  /* no line; the pipe still feeds the job record and events */
    node_t *nodes;
    char buf[4096];
    size_t len;
    double t0, next, interval;  /* next: when the next line is due */
    int shown, changed;         /* tty: line on screen; plain: counts changed */
    int last_dead, last_fenced;
    double st[RATE_WINDOW];     /* (time, done) samples, one per LIVE_MS or more */
    uint64_t sd[RATE_WINDOW];
    int ns;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

phx_status_t *phx_status_open(int nranks, int quiet)
{
    phx_status_t *s = calloc(1, sizeof *s);
    if (!s || !(s->nodes = calloc((size_t)nranks, sizeof *s->nodes)) ||
        pipe2(s->fd, O_CLOEXEC) < 0) {
        fprintf(stderr, "phx: no status line: %s\n", strerror(errno ? errno : ENOMEM));
        if (s)
            free(s->nodes);
        free(s);
        return NULL;
    }
    fcntl(s->fd[0], F_SETFL, O_NONBLOCK);   /* the nodes make their end non-blocking */
    s->n = nranks;
    s->quiet = quiet;
    const char *term = getenv("TERM");
    s->tty = isatty(STDERR_FILENO) && term && strcmp(term, "dumb");
    const char *iv = getenv("PHX_STATUS_INTERVAL");
    s->interval = iv ? atof(iv) : 10.0;
    s->t0 = now_s();
    s->next = s->t0 + (s->tty ? LIVE_MS / 1000.0 : s->interval);
    return s;
}

int phx_status_rfd(const phx_status_t *s) { return s ? s->fd[0] : -1; }
int phx_status_wfd(const phx_status_t *s) { return s ? s->fd[1] : -1; }

static uint64_t field(const char *line, const char *key)
{
    const char *p = strstr(line, key);
    return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

static void parse(phx_status_t *s, const char *line)
{
    if (!strncmp(line, "phx-rec 1 ", 10)) {
        phx_events_rec_line(line);
        return;
    }
    if (strncmp(line, "phx-status 1 ", 13))
        return;   /* another version: ignored */
    phx_jobdir_node_line(line);
    const char *r = strstr(line, " rank=");
    long rank = r ? strtol(r + 6, NULL, 10) : -1;
    if (rank < 0 || rank >= s->n)
        return;
    node_t *nd = &s->nodes[rank];
    nd->reported = 1;
    nd->done = field(line, " done=");
    nd->total = field(line, " total=");
    nd->dead = field(line, " dead=");
    nd->epoch = field(line, " epoch=");
    nd->rec = field(line, " rec=");
}

void phx_status_read(phx_status_t *s)
{
    if (!s)
        return;
    for (;;) {
        ssize_t r = read(s->fd[0], s->buf + s->len, sizeof s->buf - 1 - s->len);
        if (r <= 0)
            return;   /* EAGAIN; never EOF while we hold the write end */
        s->len += (size_t)r;
        s->buf[s->len] = 0;
        char *p = s->buf, *nl;
        while ((nl = strchr(p, '\n'))) {
            *nl = 0;
            parse(s, p);
            p = nl + 1;
        }
        s->len -= (size_t)(p - s->buf);
        memmove(s->buf, p, s->len);
        if (s->len == sizeof s->buf - 1)
            s->len = 0;   /* no newline in 4 KiB: not ours, drop it */
    }
}

void phx_status_exited(phx_status_t *s, int rank, int st)
{
    if (!s || rank < 0 || rank >= s->n)
        return;
    node_t *nd = &s->nodes[rank];
    phx_jobdir_exited(rank, st);
    nd->exited = 1;
    nd->killed = WIFSIGNALED(st);
    nd->fenced = WIFEXITED(st) && WEXITSTATUS(st) == EXIT_FENCED;
}

void phx_status_respawned(phx_status_t *s, int rank)
{
    if (!s || rank < 0 || rank >= s->n)
        return;
    node_t *nd = &s->nodes[rank];
    nd->exited = nd->killed = nd->fenced = 0;
    nd->respawns++;
}

static void fmt_dur(char *b, size_t cap, double sec)
{
    if (sec < 60)
        snprintf(b, cap, "%.0fs", sec);
    else if (sec < 3600)
        snprintf(b, cap, "%dm%02ds", (int)sec / 60, (int)sec % 60);
    else
        snprintf(b, cap, "%dh%02dm", (int)sec / 3600, (int)sec / 60 % 60);
}

/* A rate in 4 characters or so: 950, 12.3k, 4.5M. */
static int status_tick(phx_status_t *s);

static void fmt_rate(char *b, size_t cap, double r)
{
    if (r < 1000)
        snprintf(b, cap, "%.3g", r);
    else if (r < 1e6)
        snprintf(b, cap, "%.3gk", r / 1e3);
    else
        snprintf(b, cap, "%.3gM", r / 1e6);
}

/* The line, without prefix or newline, at most width columns when it can
 * (the progress part shortens first); counts into *dead, *fenced. */
static void render(phx_status_t *s, double t, char *b, size_t cap, int *dead, int *fenced, size_t width)
{
    int up = 0, killed = 0, respawns = 0;
    uint64_t done = 0, total = 0, left = 0, epoch = 0, rec = 0, seen_dead = 0;
    int all_total = 1, any = 0;
    *fenced = 0;
    for (int i = 0; i < s->n; i++) {
        node_t *nd = &s->nodes[i];
        up += !nd->exited;
        killed += nd->killed;
        *fenced += nd->fenced;
        respawns += nd->respawns;
        if (nd->dead > seen_dead && !nd->exited)
            seen_dead = nd->dead;   /* failure notices: also nodes we cannot see die */
        if (nd->epoch > epoch)
            epoch = nd->epoch;
        if (nd->rec > rec)
            rec = nd->rec;
        if (nd->reported && (nd->done || nd->total)) {
            any = 1;
            done += nd->done;
            total += nd->total;
            all_total &= nd->total > 0;
            if (!nd->exited && nd->total > nd->done)
                left += nd->total - nd->done;   /* an ended node's rest is not coming */
        }
    }
    /* The nodes' dead lists keep a rank that came back (respawned): those
     * are up, not dead. */
    seen_dead = seen_dead > (uint64_t)respawns ? seen_dead - (uint64_t)respawns : 0;
    /* A fenced node is in the survivors' dead set too: count it once. */
    *dead = (int)seen_dead - *fenced > killed ? (int)seen_dead - *fenced : killed;
    if (*dead < 0)
        *dead = 0;
    up -= (int)seen_dead - *fenced > killed ? (int)seen_dead - *fenced - killed : 0;   /* stopped, not exited */
    if (up < 0)
        up = 0;
    if (s->ns == 0 || t - s->st[(s->ns - 1) % RATE_WINDOW] >= LIVE_MS / 1000.0) {
        s->st[s->ns % RATE_WINDOW] = t;
        s->sd[s->ns % RATE_WINDOW] = done;
        s->ns++;
    }
    int old = s->ns > RATE_WINDOW ? s->ns % RATE_WINDOW : 0, cur = (s->ns - 1) % RATE_WINDOW;
    double dt = s->st[cur] - s->st[old];
    double rate = dt > 0 && s->sd[cur] >= s->sd[old] ? (double)(s->sd[cur] - s->sd[old]) / dt : 0;
    char el[16], eta[32] = "", rt[16];
    fmt_dur(el, sizeof el, t - s->t0);
    fmt_rate(rt, sizeof rt, rate);
    int head = snprintf(b, cap, "[%s] %d up, %d dead, %d fenced | epoch %llu | %llu rec | ", el, up, *dead,
                        *fenced, (unsigned long long)epoch, (unsigned long long)rec);
    if (head < 0 || (size_t)head >= cap)
        return;
    char *p = b + head;
    size_t room = cap - (size_t)head, fit = width > (size_t)head ? width - (size_t)head : 0;
    if (any && all_total && total) {
        if (rate > 0 && left) {
            strcpy(eta, " ETA ");
            fmt_dur(eta + 5, sizeof eta - 5, (double)left / rate);
        }
        double pct = 100.0 * (double)done / (double)total;
        /* longest first; the first that fits the width wins */
        int k = snprintf(p, room, "%llu/%llu %.1f%% %s/s%s", (unsigned long long)done, (unsigned long long)total,
                         pct, rt, eta);
        if (k > 0 && (size_t)k > fit)
            k = snprintf(p, room, "%.1f%% %s/s%s", pct, rt, eta);
        if (k > 0 && (size_t)k > fit)
            snprintf(p, room, "%.1f%%%s", pct, eta);
    } else if (any) {
        int k = snprintf(p, room, "%llu done %s/s", (unsigned long long)done, rt);
        if (k > 0 && (size_t)k > fit)
            snprintf(p, room, "%llu done", (unsigned long long)done);
    } else {
        snprintf(p, room, "no progress yet");
    }
}

void phx_status_hide(phx_status_t *s)
{
    if (s && s->tty && s->shown && !s->quiet) {
        (void)!write(STDERR_FILENO, "\r\033[K", 4);
        s->shown = 0;
    }
}

int phx_status_tick(phx_status_t *s)
{
    if (phx_events_due())
        phx_status_hide(s);
    int ev = phx_events_tick();
    phx_jobdir_flush(0);
    phx_sd_update();
    if (!s)
        return ev < 1000 ? ev : 1000;
    int ms = ev < 250 ? ev : 250;   /* the job record is rewritten at most every 250 ms */
    if (s->quiet)
        return ms;
    int st = status_tick(s);
    return st < ms ? st : ms;
}

static int status_tick(phx_status_t *s)
{
    double t = now_s();
    char line[256];
    int dead, fenced;
    if (s->tty) {
        if (t < s->next && s->shown)
            return (int)((s->next - t) * 1000) + 1;
        struct winsize ws;
        size_t w = ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 8 ? ws.ws_col - 1 : 79;
        render(s, t, line, sizeof line, &dead, &fenced, w - 5);   /* "phx: " */
        char out[300];
        int k = snprintf(out, sizeof out, "\r\033[Kphx: %s", line);
        if ((size_t)k > w + 4)   /* "\r\033[K" takes no columns */
            k = (int)w + 4;
        (void)!write(STDERR_FILENO, out, (size_t)k);
        s->shown = 1;
        s->next = t + LIVE_MS / 1000.0;
        return LIVE_MS;
    }
    render(s, t, line, sizeof line, &dead, &fenced, 79 - 13);   /* "phx: status: " */
    int due = s->interval > 0 && t >= s->next;
    if (due || dead != s->last_dead || fenced != s->last_fenced) {
        fprintf(stderr, "phx: status: %s\n", line);
        s->last_dead = dead;
        s->last_fenced = fenced;
        while (s->interval > 0 && s->next <= t)
            s->next += s->interval;
    }
    return s->interval > 0 && s->next - t < 1.0 ? (int)((s->next - t) * 1000) + 1 : 1000;
}

void phx_status_close(phx_status_t *s)
{
    if (!s)
        return;
    if (s->tty && !s->quiet) {
        s->next = 0;
        status_tick(s);
        (void)!write(STDERR_FILENO, "\n", 1);
    }
    close(s->fd[0]);
    close(s->fd[1]);
    free(s->nodes);
    free(s);
}
