#include "base/phx_err.h"
#include "base/phx_log.h"

#include <stdatomic.h>
#include <stdio.h>
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
static _Atomic int log_level = PHX_LOG_WARN;

void phx_log_set_rank(int rank) { atomic_store(&log_rank, rank); }
void phx_log_set_level(enum phx_log_level lvl) { atomic_store(&log_level, (int)lvl); }
enum phx_log_level phx_log_get_level(void) { return (enum phx_log_level)atomic_load(&log_level); }

void phx_log(enum phx_log_level lvl, const char *subsys, const char *fmt, ...)
{
    static const char *names[] = { "ERROR", "WARN", "INFO", "DEBUG" };
    if ((int)lvl > atomic_load(&log_level))
        return;
    char line[1024];
    int rank = atomic_load(&log_rank);
    int n = rank >= 0
        ? snprintf(line, sizeof line, "[rank %d] %s %s: ", rank, names[lvl], subsys)
        : snprintf(line, sizeof line, "[rank -] %s %s: ", names[lvl], subsys);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(2, line, len);
    (void)w;   /* nothing sane to do if stderr is gone */
}
