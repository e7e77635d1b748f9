/* Logging. Thread-safe; each call writes one line to stderr with a single
 * write(2), so lines from several threads never interleave.
 *
 * Format: "[rank R] LEVEL subsys: message". The rank is set once by the
 * node at startup (phx_log_set_rank); before that it prints "-". */
#ifndef PHX_LOG_H
#define PHX_LOG_H

#include <stdarg.h>

enum phx_log_level { PHX_LOG_ERROR = 0, PHX_LOG_WARN, PHX_LOG_INFO, PHX_LOG_DEBUG };

void phx_log_set_rank(int rank);
/* Level from PHX_LOG=error|warn|info|debug; default warn. Call before threads start. */
void phx_log_set_level(enum phx_log_level lvl);
enum phx_log_level phx_log_get_level(void);
void phx_log(enum phx_log_level lvl, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define PHX_ERROR(sub, ...) phx_log(PHX_LOG_ERROR, sub, __VA_ARGS__)
#define PHX_WARN(sub, ...)  phx_log(PHX_LOG_WARN, sub, __VA_ARGS__)
#define PHX_INFO(sub, ...)  do { if (phx_log_get_level() >= PHX_LOG_INFO) phx_log(PHX_LOG_INFO, sub, __VA_ARGS__); } while (0)
#define PHX_DEBUG(sub, ...) do { if (phx_log_get_level() >= PHX_LOG_DEBUG) phx_log(PHX_LOG_DEBUG, sub, __VA_ARGS__); } while (0)

#endif
