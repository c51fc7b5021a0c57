/* dg_sim_vendor.c — vendor device profiles (h100, a100) for dg_sim_device_load.
 * A placeholder with no profiles: h19pub owns this file and fills it with
 * published peak figures (docs/simulate.md). */
#include "dg_sim.h"

int dg_sim_device_vendor(const char *name, dg_sim_device *out) {
    (void)name;
    (void)out;
    return 0;
}
