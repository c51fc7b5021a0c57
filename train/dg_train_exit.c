/* dg_train_exit.c — see dg_train_exit.h. */
#include "dg_train_exit.h"

#include <string.h>

/* The one piece of process-wide state: a signal handler can only reach a
 * static. It is set by SIGTERM and read between iterations. */
static volatile sig_atomic_t dg_sigterm_seen;

static void on_sigterm(int sig) {
    (void)sig;
    dg_sigterm_seen = 1;
}

void dg_train_exit_begin(dg_train_exit *x, const dg_train_config *c) {
    memset(x, 0, sizeof *x);
    x->start = dg_now();
    if (!c->compat.exit_signal_handler) return;
    dg_sigterm_seen = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigterm;
    sigemptyset(&sa.sa_mask);
    x->handler_installed = sigaction(SIGTERM, &sa, &x->previous) == 0;
}

int dg_train_exit_check(dg_train_exit *x, const dg_train_config *c, dg_comm *world, const char **why,
                        dg_err *err) {
    *why = NULL;
    int minutes = c->compat.exit_duration_in_mins;
    if (!x->handler_installed && minutes <= 0) return DG_OK;
    double v[2] = {x->handler_installed && dg_sigterm_seen ? 1.0 : 0.0,
                   minutes > 0 && dg_now() - x->start > 60.0 * minutes ? 1.0 : 0.0};
    DG_TRY(dg_dist_sum(world, v, 2, err));
    if (v[0] > 0) *why = "receiving SIGTERM";
    else if (v[1] > 0) *why = "the --exit-duration-in-mins limit";
    return DG_OK;
}

void dg_train_exit_end(dg_train_exit *x) {
    if (x->handler_installed) sigaction(SIGTERM, &x->previous, NULL);
    x->handler_installed = 0;
}
