/* Logging. Thread-safe; each call writes one line to stderr with a single
 * write(2), so lines from several threads never interleave.
 *
 * Format: "[rank R] LEVEL subsys: message". The rank is set once by the
 * node at startup (phx_log_set_rank); before that it prints "-". Under
 * phx run, which puts "[R] " before every line of a node's output, the
 * node turns its own rank off (phx_log_show_rank(0)): one rank per line.
 *
 * Rate limit: every PHX_ERROR/PHX_WARN/PHX_INFO call site may print
 * PHX_LOG_BURST lines per PHX_LOG_WINDOW_S seconds; the lines past that are
 * counted, not printed. The site's next printed line ends with
 * "(N similar lines suppressed)", and at exit a site still holding a count
 * prints one "N more lines like ... suppressed" line. So no code path can
 * print a line per message, whatever rate its messages come at. PHX_DEBUG
 * is exempt: it is asked for explicitly (PHX_LOG=debug). */
#ifndef PHX_LOG_H
#define PHX_LOG_H

#include <stdarg.h>
#include <stdint.h>

enum phx_log_level { PHX_LOG_ERROR = 0, PHX_LOG_WARN, PHX_LOG_INFO, PHX_LOG_DEBUG };

#define PHX_LOG_BURST 10
#define PHX_LOG_WINDOW_S 10

/* One call site's budget: a zeroed static (the macros below make one per
 * site). Fields are the implementation's. */
typedef struct phx_log_site {
    _Atomic uint64_t win_ns;       /* start of the current window, 0: none yet */
    _Atomic uint32_t used;         /* lines printed in it */
    _Atomic uint64_t suppressed;   /* lines not printed since the last one printed */
    _Atomic int listed;            /* on the at-exit list */
    enum phx_log_level lvl;
    const char *subsys, *fmt;
    struct phx_log_site *next;
} phx_log_site_t;

void phx_log_set_rank(int rank);
void phx_log_show_rank(int on);   /* default on; before threads start */
/* Level from PHX_LOG=error|warn|info|debug; default warn. Call before threads start. */
void phx_log_set_level(enum phx_log_level lvl);
enum phx_log_level phx_log_get_level(void);
/* Unlimited: for a caller that limits itself. */
void phx_log(enum phx_log_level lvl, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Rate-limited through site (see above). */
void phx_log_rl(phx_log_site_t *site, enum phx_log_level lvl, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Lines suppressed so far by all sites (tests, metrics). */
uint64_t phx_log_suppressed_total(void);

#define PHX_LOG_RL(lvl, sub, ...) \
    do { static phx_log_site_t phx_site_; phx_log_rl(&phx_site_, lvl, sub, __VA_ARGS__); } while (0)
#define PHX_ERROR(sub, ...) PHX_LOG_RL(PHX_LOG_ERROR, sub, __VA_ARGS__)
#define PHX_WARN(sub, ...)  PHX_LOG_RL(PHX_LOG_WARN, sub, __VA_ARGS__)
#define PHX_INFO(sub, ...)  do { if (phx_log_get_level() >= PHX_LOG_INFO) PHX_LOG_RL(PHX_LOG_INFO, sub, __VA_ARGS__); } while (0)
#define PHX_DEBUG(sub, ...) do { if (phx_log_get_level() >= PHX_LOG_DEBUG) phx_log(PHX_LOG_DEBUG, sub, __VA_ARGS__); } while (0)

#endif
