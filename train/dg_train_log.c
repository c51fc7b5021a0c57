/* dg_train_log.c — see dg_train_log.h. */
#include "dg_train_log.h"

#include <math.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>

#include "dg_model.h"

double dg_train_log_moe_loss(const dg_model_config *m, double raw, double coeff) {
    if (!(coeff > 0)) return -1;
    int n = 0;
    /* the MTP modules' MoE layers count too, as Megatron's num_moe_layers */
    for (int l = 0; m->num_experts > 0 && l < dg_model_total_layers(m); l++) n += dg_model_layer_is_moe(m, l);
    return raw / coeff / (n > 0 ? n : 1);
}

double dg_train_log_peak_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

void dg_train_log_rss_mb(double *now, double *peak) {
    *peak = dg_train_log_peak_rss_mb();
    *now = -1;
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb;
    while (f && fgets(line, sizeof line, f)) {
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1) *now = (double)kb / 1024.0;
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1) *peak = (double)kb / 1024.0;
    }
    if (f) fclose(f);
    if (*now < 0) *now = *peak;
}

void dg_train_log_timestamp(char *out, size_t cap) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    time_t s = tv.tv_sec;
    struct tm tm;
    localtime_r(&s, &tm);
    char day[32];
    strftime(day, sizeof day, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(out, cap, " [%s.%06ld]", day, (long)tv.tv_usec);
}

/* Append to out at *o, keeping *o the length snprintf would have made. */
#define APPEND(...)                                                                    \
    do {                                                                               \
        size_t at_ = (size_t)o < cap ? (size_t)o : cap;                                \
        o += snprintf(out + at_, cap - at_, __VA_ARGS__);             \
    } while (0)

int dg_train_log_iteration(char *out, size_t cap, const dg_train_log_fields *f) {
    char ts[64];
    dg_train_log_timestamp(ts, sizeof ts);
    int o = 0;
    if (cap) out[0] = 0;
    APPEND("%s iteration %8d/%8d |", ts, f->iteration, f->train_iters);
    APPEND(" consumed samples: %12lld |", (long long)f->consumed_samples);
    APPEND(" elapsed time per iteration (ms): %.1f |", f->ms_per_iteration);
    if (f->log_throughput) APPEND(" throughput per GPU (TFLOP/s/GPU): %.1f |", f->tflops_per_gpu);
    APPEND(" learning rate: %.6E |", f->learning_rate);
    APPEND(" global batch size: %5d |", f->global_batch_size);
    /* Megatron prints a loss only when its average is >= 0 (a NaN is not) */
    for (int i = 0; i < f->n_losses && i < DG_TRAIN_LOG_MAX_LOSSES; i++)
        if (f->loss[i] >= 0) APPEND(" %s: %.6E |", f->loss_name[i], f->loss[i]);
    APPEND(" loss scale: %.1f |", f->loss_scale);
    /* Megatron has no norm for a step its fp16 scaler skipped: left out */
    if (isfinite(f->grad_norm)) APPEND(" grad norm: %.3f |", f->grad_norm);
    APPEND(" number of skipped iterations: %3lld |", (long long)f->skipped_iterations);
    APPEND(" number of nan iterations: %3lld |", (long long)f->nan_iterations);
    APPEND(" tokens per second: %.0f |", f->tokens_per_second);
    if (f->mfu_percent >= 0) APPEND(" MFU: %.1f%% |", f->mfu_percent);
    else APPEND(" MFU: n/a |"); /* no peak known for the device (dg_mfu_peak.h) */
    APPEND(" peak memory (MB): %.0f |", f->peak_memory_mb);
    if (f->has_recompute)
        APPEND(" activation memory (MB): %.1f planned, %.1f saved by recompute |", f->activation_planned_mb,
               f->activation_saved_mb);
    return o;
}

int dg_train_log_memory(char *out, size_t cap, int rank, int iteration, double allocated_mb,
                        double max_allocated_mb, double reserved_mb, double max_reserved_mb) {
    return snprintf(out, cap,
                    "[Rank %d] (after %d iterations) memory (MB) | allocated: %.2f | max allocated: %.2f | "
                    "reserved: %.2f | max reserved: %.2f",
                    rank, iteration, allocated_mb, max_allocated_mb, reserved_mb, max_reserved_mb);
}

void dg_train_log_eval(FILE *f, const char *prefix, double lm_loss) {
    char line[512];
    int n = snprintf(line, sizeof line, " validation loss at %s | lm loss value: %.6E | lm loss PPL: %.6E | ", prefix,
                     lm_loss, exp(lm_loss < 20 ? lm_loss : 20));
    if (n < 0) return;
    if (n >= (int)sizeof line) n = (int)sizeof line - 1;
    char dashes[sizeof line + 1];
    memset(dashes, '-', (size_t)n + 1);
    dashes[n + 1] = 0;
    fprintf(f, "%s\n%s\n%s\n", dashes, line, dashes);
}
