/* CHECK for the ft/mlog unit tests: counts a failure and goes on, so one
 * run reports every broken property; main returns fails != 0. */
#ifndef PHX_FT_MLOG_TEST_CHECK_H
#define PHX_FT_MLOG_TEST_CHECK_H

#include <stdio.h>

static int fails;
#define CHECK(c)                                                                                             \
    do {                                                                                                       \
        if (!(c)) {                                                                                            \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c);                              \
            fails++;                                                                                           \
        }                                                                                                      \
    } while (0)

#endif
