/* Name -> ops lookup over every detector linked into phx_ft_td. */
#include <string.h>

#include "ft/termination/td.h"

/* The fault-tolerant detectors are written concurrently in other files; a
 * weak reference resolves to NULL while they are missing so the fault-free
 * ones stay usable. CMake makes the reference strong once the file exists
 * (a weak reference does not pull an archive member into the link). */
#ifndef PHX_TD_HAVE_INDEP
extern const phx_td_ops_t phx_td_indep_ops __attribute__((weak));
#endif
#ifndef PHX_TD_HAVE_REL
extern const phx_td_ops_t phx_td_rellazy_ops __attribute__((weak));
extern const phx_td_ops_t phx_td_releager_ops __attribute__((weak));
#endif

const phx_td_ops_t *phx_td_find(const char *name)
{
    const phx_td_ops_t *all[] = {
        &phx_td_4c_ops, &phx_td_edod_ops, &phx_td_hcda_ops, &phx_td_cda_ops,
        &phx_td_indep_ops, &phx_td_rellazy_ops, &phx_td_releager_ops,
    };
    if (!name)
        return NULL;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i] && all[i]->name && strcmp(all[i]->name, name) == 0)
            return all[i];
    return NULL;
}
