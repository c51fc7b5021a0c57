#!/usr/bin/env python3
"""test_megatron_log.py — dagatron's iteration, validation and test lines,
parsed with regexes built from the format strings of Megatron-LM's
`training_log` and `evaluate_and_print_results`
(megatron/training/training.py), must yield every field.

The format strings below are Megatron's, piece by piece, in its order; each
`{:...}` spec becomes the regex of what Python's str.format prints for it.
Pieces Megatron prints only under a condition are optional. After Megatron's
pieces a line may carry dagatron's own fields in the same " key: value |"
shape, and nothing else.
"""
import math
import os
import re
import subprocess
import sys

# (name, Megatron's format string, when printed: True = always, else the
# condition's name)
ITERATION_PIECES = [
    ("timestamp", " [{ts}]", True),
    ("iteration", " iteration {:8d}/{:8d} |", True),
    ("consumed", " consumed samples: {:12d} |", True),
    ("skipped_samples", " skipped samples: {:12d} |", "skipped_samples"),
    ("ms", " elapsed time per iteration (ms): {:.1f} |", True),
    ("throughput", " throughput per GPU (TFLOP/s/GPU): {:.1f} |", "log_throughput"),
    ("lr", " learning rate: {:.6E} |", True),
    ("gbs", " global batch size: {:5d} |", True),
    ("lm_loss", " lm loss: {:.6E} |", True),
    ("load_balancing_loss", " load_balancing_loss: {:.6E} |", "aux"),
    ("seq_load_balancing_loss", " seq_load_balancing_loss: {:.6E} |", "seq_aux"),
    ("z_loss", " z_loss: {:.6E} |", "z"),
    ("loss_scale", " loss scale: {:.1f} |", True),
    ("grad_norm", " grad norm: {:.3f} |", "grad_norm"),  # None on a skipped fp16 step
    ("num_zeros", " num zeros: {} |", "num_zeros"),
    ("params_norm", " params norm: {:.3f} |", "params_norm"),
    ("skipped", " number of skipped iterations: {:3d} |", True),
    ("nan", " number of nan iterations: {:3d} |", True),
]
EVAL_HEAD = " validation{suffix} loss at {prefix} | "
EVAL_LOSS = "{key} value: {:.6E} | {key} PPL: {:.6E} | "

# datetime.now().strftime('%Y-%m-%d %H:%M:%S.%f')
TS = r"(?P<timestamp_0>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6})"


def spec_regex(spec):
    """The regex of what '{' + spec + '}'.format(x) prints, one group."""
    m = re.fullmatch(r":(\d*)d", spec)
    if m:
        w = int(m.group(1) or 0)
        return r"( {0,%d}-?\d+)" % max(w - 1, 0) if w else r"(-?\d+)"
    m = re.fullmatch(r":\.(\d+)f", spec)
    if m:
        return r"(-?\d+\.\d{%s}|nan|inf|-inf)" % m.group(1)
    m = re.fullmatch(r":\.(\d+)E", spec)
    if m:
        return r"(-?\d\.\d{%s}E[-+]\d{2,}|NAN|INF|-INF)" % m.group(1)
    if spec == "":
        return r"([^|]*?)"
    raise ValueError("unhandled format spec " + spec)


def piece_regex(fmt, name, **named):
    """A Megatron format string as a regex; its fields are groups name_0, name_1, ..."""
    out, k, pos = [], 0, 0
    for m in re.finditer(r"\{([a-z]*)(:[^}]*)?\}", fmt):
        out.append(re.escape(fmt[pos:m.start()]))
        field, spec = m.group(1), m.group(2) or ""
        if field:  # a named field substituted as text (ts, key, prefix)
            out.append(named[field])
        else:
            out.append("(?P<%s_%d>%s)" % (name, k, spec_regex(spec)[1:-1]))
            k += 1
        pos = m.end()
    out.append(re.escape(fmt[pos:]))
    return "".join(out)


def iteration_regex(conditions):
    parts = []
    for name, fmt, when in ITERATION_PIECES:
        r = piece_regex(fmt, name, ts=TS)
        parts.append(r if when is True or conditions.get(when) else "(?:%s)?" % r if when not in conditions else "")
    extras = r"(?P<extras>(?: [^|:]+: [^|]+ \|)*)"
    return re.compile("^" + "".join(parts) + extras + "$")


def eval_regex():
    head = piece_regex(EVAL_HEAD, "head", suffix="", prefix=r"(?P<prefix>[^|]+?)")
    loss = piece_regex(EVAL_LOSS, "loss", key="lm loss")
    return re.compile("^" + head + loss + "$")


def run(args):
    exe = os.environ.get("DG_DAGATRON") or os.path.join(os.environ.get("DG_BUILD", "."), "dagatron")
    p = subprocess.run([exe, "train"] + args, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("FAIL: dagatron train %s exited %d\n%s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
    return p.stdout.splitlines()


BASE = ["--mock-data", "--vocab-size", "100", "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads",
        "4", "--seq-length", "16", "--micro-batch-size", "2", "--global-batch-size", "4", "--train-iters", "4",
        "--log-interval", "1", "--eval-interval", "2", "--eval-iters", "1", "--lr", "3e-3"]
MOE = ["--num-experts", "4", "--moe-router-topk", "2", "--swiglu", "--disable-bias-linear",
       "--moe-aux-loss-coeff", "1e-2", "--moe-z-loss-coeff", "1e-3"]


def check(name, args, conditions, want_fields):
    fail = 0
    lines = run(args)
    it_rx, ev_rx = iteration_regex(conditions), eval_regex()
    iters = [l for l in lines if re.search(r"\biteration\s+\d+/", l)]
    if [int(re.search(r"iteration\s+(\d+)/", l).group(1)) for l in iters] != [1, 2, 3, 4]:
        print("FAIL: %s: expected iteration lines 1..4, got %d lines" % (name, len(iters)))
        return 1
    for l in iters:
        m = it_rx.match(l)
        if not m:
            print("FAIL: %s: Megatron's training_log regex does not parse:\n  %s" % (name, l))
            fail = 1
            continue
        g = m.groupdict()
        missing = [f for f in want_fields if g.get(f + "_0") is None]
        if missing:
            print("FAIL: %s: fields %s missing in: %s" % (name, missing, l)); fail = 1
        it, total = int(g["iteration_0"]), int(g["iteration_1"])
        if total != 4 or int(g["consumed_0"]) != 4 * it or int(g["gbs_0"]) != 4 or float(g["loss_scale_0"]) != 1.0:
            print("FAIL: %s: iteration/consumed/global batch/loss scale wrong in: %s" % (name, l)); fail = 1
        for f in ("lm_loss", "grad_norm", "lr"):
            if g.get(f + "_0") is None or not math.isfinite(float(g[f + "_0"])):
                print("FAIL: %s: %s not finite" % (name, f)); fail = 1
        extras = dict(re.findall(r" ([^|:]+): ([^|]+) \|", g["extras"]))
        for k in ("tokens per second", "MFU", "peak memory (MB)"):
            if k not in extras:
                print("FAIL: %s: dagatron's field '%s' missing after Megatron's: %s" % (name, k, l)); fail = 1
    # Evaluation blocks: dashes, the line, dashes (len(line) + 1 of them).
    prefixes = []
    for i, l in enumerate(lines):
        if "validation" not in l or "loss at" not in l:
            continue
        m = ev_rx.match(l)
        if not m:
            print("FAIL: %s: Megatron's evaluation regex does not parse:\n  %s" % (name, l)); fail = 1
            continue
        dash = "-" * (len(l) + 1)
        if i == 0 or i + 1 >= len(lines) or lines[i - 1] != dash or lines[i + 1] != dash:
            print("FAIL: %s: evaluation line not framed by %d dashes: %s" % (name, len(l) + 1, l)); fail = 1
        loss, ppl = float(m.group("loss_0")), float(m.group("loss_1"))
        if abs(ppl - math.exp(min(20, loss))) > 1e-5 * ppl:
            print("FAIL: %s: PPL %g is not exp(min(20, %g))" % (name, ppl, loss)); fail = 1
        prefixes.append(m.group("prefix"))
    want = ["iteration 2", "iteration 4", "iteration 4 on validation set", "iteration 4 on test set"]
    if prefixes != want:
        print("FAIL: %s: evaluation prefixes %s, expected %s" % (name, prefixes, want)); fail = 1
    if not fail:
        print("ok: %s: %d iteration lines and %d evaluation lines parsed, fields %s" %
              (name, len(iters), len(prefixes), ", ".join(want_fields)))
    return fail


def main():
    # The regexes themselves: a line written with Megatron's format strings
    # through Python's own str.format parses, and a broken one does not.
    sample = "".join(fmt.replace("{ts}", "2026-01-02 03:04:05.123456").format(*vals) for fmt, vals in [
        (" [{ts}]", ()), (" iteration {:8d}/{:8d} |", (10, 100)), (" consumed samples: {:12d} |", (40,)),
        (" elapsed time per iteration (ms): {:.1f} |", (12.34,)), (" learning rate: {:.6E} |", (3e-4,)),
        (" global batch size: {:5d} |", (4,)), (" lm loss: {:.6E} |", (4.5,)), (" loss scale: {:.1f} |", (1.0,)),
        (" grad norm: {:.3f} |", (0.5,)), (" number of skipped iterations: {:3d} |", (0,)),
        (" number of nan iterations: {:3d} |", (0,))])
    assert iteration_regex({}).match(sample), sample
    assert not iteration_regex({}).match(sample.replace("global batch size", "global batch")), "regex too loose"
    fail = 0
    fail |= check("MoE, --log-throughput", BASE + MOE + ["--log-throughput"],
                  {"log_throughput": 1, "aux": 1, "z": 1},
                  ["timestamp", "iteration", "consumed", "ms", "throughput", "lr", "gbs", "lm_loss",
                   "load_balancing_loss", "z_loss", "loss_scale", "grad_norm", "skipped", "nan"])
    fail |= check("dense GPT (Megatron's defaults)", BASE, {"log_throughput": 0, "aux": 0, "z": 0},
                  ["iteration", "consumed", "ms", "lr", "gbs", "lm_loss", "loss_scale", "grad_norm", "skipped", "nan"])
    sys.exit(1 if fail else 0)


if __name__ == "__main__":
    main()
