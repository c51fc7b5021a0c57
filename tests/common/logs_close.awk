# Two training logs as "name: value" fields (awk -v a=GOT -v b=WANT -f
# logs_close.awk): exit 0 when they hold the same fields in the same order
# and each value is within 1e-5 relative of the other log's (-v tol=T: T);
# else 1. The
# parallel-vs-one-rank train tests (tests/ep, tests/tp) share it.
BEGIN {
    n = split(a, x, " "); m = split(b, y, " ");
    if (n != m) exit 1;
    for (i = 1; i <= n; i++) {
        if (x[i] ~ /^[0-9.E+-]+$/) {
            d = x[i] - y[i]; if (d < 0) d = -d;
            r = y[i] < 0 ? -y[i] : y[i];
            if (d > (tol ? tol : 1e-5) * r) exit 1;
        } else if (x[i] != y[i]) exit 1;
    }
}
