/* Name -> ops lookup over every detector linked into phx_ft_td. */
#include <string.h>

#include "ft/termination/td.h"

const phx_td_ops_t *phx_td_find(const char *name)
{
    const phx_td_ops_t *all[] = {
        &phx_td_4c_ops, &phx_td_edod_ops, &phx_td_hcda_ops, &phx_td_cda_ops,
        &phx_td_indep_ops, &phx_td_rellazy_ops, &phx_td_releager_ops,
    };
    if (!name)
        return NULL;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(all[i]->name, name) == 0)
            return all[i];
    return NULL;
}
