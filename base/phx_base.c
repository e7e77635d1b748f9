#include "base/phx_err.h"
#include "base/phx_log.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <unistd.h>

const char *phx_strerror(int code)
{
    switch (code) {
    case PHX_OK: return "success";
    case PHX_EPROTO: return "malformed wire data";
    case PHX_EAUTH: return "authentication failed";
    case PHX_EVERSION: return "unsupported wire version";
    case PHX_ECHECKSUM: return "checksum mismatch";
    case PHX_ETRUNC: return "truncated input";
    case PHX_EDEAD: return "peer declared dead";
    case PHX_EFENCED: return "this node was declared dead (fenced)";
    case PHX_EREVOKED: return "group revoked";
    case PHX_EPROCFAIL: return "process failure during operation";
    case PHX_EUNRECOVERABLE: return "unrecoverable failure combination";
    default:
        if (code < 0 && code > -4000)
            return strerror(-code);   /* glibc: static table, thread-safe */
        return "unknown error";
    }
}

static _Atomic int log_rank = -1;
static _Atomic int log_show_rank = 1;
static _Atomic int log_level = PHX_LOG_WARN;

void phx_log_set_rank(int rank) { atomic_store(&log_rank, rank); }
void phx_log_show_rank(int on) { atomic_store(&log_show_rank, on); }
void phx_log_set_level(enum phx_log_level lvl) { atomic_store(&log_level, (int)lvl); }
enum phx_log_level phx_log_get_level(void) { return (enum phx_log_level)atomic_load(&log_level); }

static const char *lvl_names[] = { "ERROR", "WARN", "INFO", "DEBUG" };

/* One line: "[rank R] LEVEL subsys: " + message + tail, one write(2). */
static void vlog_line(enum phx_log_level lvl, const char *subsys, const char *tail, const char *fmt, va_list ap)
{
    char line[1024];
    int rank = atomic_load(&log_rank);
    int n = !atomic_load(&log_show_rank) ? snprintf(line, sizeof line, "%s %s: ", lvl_names[lvl], subsys)
        : rank >= 0 ? snprintf(line, sizeof line, "[rank %d] %s %s: ", rank, lvl_names[lvl], subsys)
                    : snprintf(line, sizeof line, "[rank -] %s %s: ", lvl_names[lvl], subsys);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    if (tail) {
        int t = snprintf(line + len, sizeof line - len - 1, "%s", tail);
        len += t < 0 ? 0 : (size_t)t;
        if (len > sizeof line - 2)
            len = sizeof line - 2;
    }
    line[len++] = '\n';
    ssize_t w = write(2, line, len);
    (void)w;   /* nothing sane to do if stderr is gone */
}

void phx_log(enum phx_log_level lvl, const char *subsys, const char *fmt, ...)
{
    if ((int)lvl > atomic_load(&log_level))
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog_line(lvl, subsys, NULL, fmt, ap);
    va_end(ap);
}

/* ---- rate limit --------------------------------------------------------- */

static _Atomic(phx_log_site_t *) sites;   /* sites that suppressed something, for the exit report */
static _Atomic uint64_t suppressed_total;
static atomic_flag exit_hook = ATOMIC_FLAG_INIT;

uint64_t phx_log_suppressed_total(void) { return atomic_load(&suppressed_total); }

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* At exit: what each site still holds back, one line per site. The format
 * string stands for the lines (their arguments are gone). */
static void report_suppressed(void)
{
    for (phx_log_site_t *s = atomic_load(&sites); s; s = s->next) {
        uint64_t k = atomic_exchange(&s->suppressed, 0);
        if (k)
            phx_log(s->lvl, s->subsys, "%llu more lines like \"%s\" suppressed (at most %d per %d s)",
                    (unsigned long long)k, s->fmt, PHX_LOG_BURST, PHX_LOG_WINDOW_S);
    }
}

void phx_log_rl(phx_log_site_t *site, enum phx_log_level lvl, const char *subsys, const char *fmt, ...)
{
    if ((int)lvl > atomic_load(&log_level))
        return;
    uint64_t now = mono_ns(), w = atomic_load_explicit(&site->win_ns, memory_order_relaxed);
    if ((!w || now - w >= (uint64_t)PHX_LOG_WINDOW_S * 1000000000u) &&
        atomic_compare_exchange_strong(&site->win_ns, &w, now ? now : 1))
        atomic_store(&site->used, 0);   /* a new window: this thread opened it */
    if (atomic_fetch_add(&site->used, 1) >= PHX_LOG_BURST) {
        atomic_fetch_add_explicit(&site->suppressed, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&suppressed_total, 1, memory_order_relaxed);
        int no = 0;
        if (atomic_compare_exchange_strong(&site->listed, &no, 1)) {
            site->lvl = lvl;
            site->subsys = subsys;
            site->fmt = fmt;
            phx_log_site_t *h = atomic_load(&sites);
            do
                site->next = h;
            while (!atomic_compare_exchange_weak(&sites, &h, site));
            if (!atomic_flag_test_and_set(&exit_hook))
                atexit(report_suppressed);
        }
        return;
    }
    uint64_t k = atomic_exchange(&site->suppressed, 0);
    char tail[64];
    if (k)
        snprintf(tail, sizeof tail, " (%llu similar lines suppressed)", (unsigned long long)k);
    va_list ap;
    va_start(ap, fmt);
    vlog_line(lvl, subsys, k ? tail : NULL, fmt, ap);
    va_end(ap);
}
