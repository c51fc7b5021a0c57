#!/usr/bin/env python3
"""test_megatron_log_window.py — which iterations dagatron logs, what each
line's window holds, which losses it carries and the memory line, against
the rules of Megatron-LM's `training_log` (megatron/training/training.py),
`report_memory` (megatron/training/utils) and the MoE metrics tracker's
`report` (megatron/core/transformer/moe/moe_logging.py), restated here:

- a line when `iteration % log_interval == 0 or is_first_iteration`; the
  last iteration is not logged otherwise. The first line does not reset the
  accumulators (`should_reset = not is_first_iteration`): the next line's
  window starts at the first iteration too.
- the losses are `total_loss_dict`'s keys in insertion order: "lm loss" is
  added by an iteration that was not skipped; the MoE tracker adds its
  losses every iteration (skipped or not), after the lm loss. Each is
  printed as its sum over the window / max(1, advanced iterations) when that
  is >= 0. So a window of skipped iterations prints no lm loss until one
  iteration has advanced, and 0 after; its MoE losses are the skipped
  iterations' values summed.
- the MoE losses tracked (`track_names`): "load_balancing_loss" when
  "aux_loss" is in --moe-router-load-balancing-type (a substring test:
  seq_aux_loss has it), "seq_load_balancing_loss" with seq_aux_loss,
  "z_loss" with a z-loss coefficient; a tracked loss the router never
  records (its coefficient is 0) is 0.
- the learning rate is the scheduler's after the step, which a skipped
  step does not advance: the rate of the updates made so far.
- report_memory after the first logged iteration, and after the next one
  when it is past the first iteration of the run (then no more):
  "[Rank R] (after N iterations) memory (MB) | allocated: {:.2f} | max
  allocated: {:.2f} | reserved: {:.2f} | max reserved: {:.2f}".
"""
import os
import re
import subprocess
import sys

NUM = r"(-?\d\.\d{6}E[-+]\d{2,})"
LOSSES = re.compile(r" ([a-z_ ]+): " + NUM + r" \|")
ITER = re.compile(r"^ \[[^]]+\] iteration +(\d+)/ *(\d+) \|")
MEM = re.compile(r"^\[Rank (\d+)\] \(after (\d+) iterations\) memory \(MB\) \| allocated: (\d+\.\d{2}) \| "
                 r"max allocated: (\d+\.\d{2}) \| reserved: (\d+\.\d{2}) \| max reserved: (\d+\.\d{2})$")

BASE = ["--mock-data", "--vocab-size", "100", "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4",
        "--seq-length", "16", "--micro-batch-size", "2", "--global-batch-size", "4", "--eval-iters", "0",
        "--lr", "3e-3"]
MOE = ["--num-experts", "4", "--moe-router-topk", "2", "--swiglu", "--disable-bias-linear"]

fails = []


def fail(msg):
    fails.append(msg)
    print("FAIL: " + msg)


def run(args):
    exe = os.environ.get("DG_DAGATRON") or os.path.join(os.environ.get("DG_BUILD", "."), "dagatron")
    p = subprocess.run([exe, "train"] + args, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("FAIL: dagatron train %s exited %d\n%s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
    return p.stdout.splitlines()


def field(line, name, rx=r"([-+0-9.E]+)"):
    m = re.search(" " + re.escape(name) + ": " + rx + " \\|", line)
    return m.group(1) if m else None


def iteration_lines(lines):
    """[(iteration, ordered [(loss name, value)], line)]"""
    out = []
    for l in lines:
        m = ITER.match(l)
        if m:
            # the losses: between the global batch size and the loss scale
            head = l.split(" global batch size:")[1].split(" loss scale:")[0]
            out.append((int(m.group(1)), [(k, float(v)) for k, v in LOSSES.findall(head)], l))
    return out


def check_iterations_and_memory():
    """5 iterations at --log-interval 2: lines 1, 2, 4; memory after 1 and 2."""
    name = "5 iterations, --log-interval 2"
    lines = run(BASE + ["--train-iters", "5", "--log-interval", "2"])
    its = iteration_lines(lines)
    got = [it for it, _, _ in its]
    if got != [1, 2, 4]:
        fail("%s: logged iterations %s, Megatron logs [1, 2, 4]" % (name, got))
    for it, _, l in its:
        if int(field(l, "consumed samples", r"\s*(\d+)")) != 4 * it:
            fail("%s: consumed samples wrong in: %s" % (name, l))
    mem = [(i, l) for i, l in enumerate(lines) if "memory (MB) |" in l and l.startswith("[Rank")]
    if [int(MEM.match(l).group(2)) if MEM.match(l) else l for _, l in mem] != [1, 2]:
        fail("%s: memory lines %s, Megatron's report_memory prints after iterations 1 and 2"
             % (name, [l for _, l in mem]))
        return
    for i, l in mem:  # each right after its iteration's line
        it = int(MEM.match(l).group(2))
        if i == 0 or not ITER.match(lines[i - 1]) or int(ITER.match(lines[i - 1]).group(1)) != it:
            fail("%s: the memory line does not follow iteration %d's line" % (name, it))
    rank, _, alloc, max_alloc, res, max_res = (float(x) for x in MEM.match(mem[0][1]).groups())
    # allocated holds at least the parameters, gradients and optimizer state
    # the start-up line counts; max allocated adds the activation arena the
    # memory plan prints; reserved is the resident memory, at most its peak.
    rb = [re.search(r"parameters (\d+) bytes, gradients (\d+) bytes, optimizer state (\d+) bytes", l)
          for l in lines]
    rb = [m for m in rb if m]
    arena = [re.search(r"memory plan: .*planned peak [0-9.]+ MiB \((\d+) bytes\)", l) for l in lines]
    arena = [m for m in arena if m]
    if rank != 0 or not rb or not arena:
        fail("%s: rank %s, rank bytes line %s, memory plan line %s" % (name, rank, bool(rb), bool(arena)))
        return
    held = sum(int(x) for x in rb[0].groups()) / 1048576.0
    if not alloc + 0.005 >= held:
        fail("%s: allocated %.2f MB below the parameters, gradients and optimizer state (%.2f MB)"
             % (name, alloc, held))
    if abs((max_alloc - alloc) - int(arena[0].group(1)) / 1048576.0) > 0.011:
        fail("%s: max allocated - allocated = %.2f MB, the planned activation arena is %.2f MB"
             % (name, max_alloc - alloc, int(arena[0].group(1)) / 1048576.0))
    if not (0 < res <= max_res):
        fail("%s: reserved %.2f, max reserved %.2f" % (name, res, max_res))
    if not fails:
        print("ok: %s: lines %s; memory lines after 1 and 2: allocated %.2f, max allocated %.2f (arena %.2f), "
              "reserved %.2f, max reserved %.2f MB" % (name, got, alloc, max_alloc, max_alloc - alloc, res, max_res))


def check_moe_fields():
    """Which MoE losses each balancing type and coefficient prints, in which order."""
    cases = [
        ("dense", BASE, ["lm loss"], {}),
        ("aux_loss at coefficient 0 (the default)", BASE + MOE, ["lm loss", "load_balancing_loss"],
         {"load_balancing_loss": 0.0}),
        ("aux_loss 1e-2, z 1e-3", BASE + MOE + ["--moe-aux-loss-coeff", "1e-2", "--moe-z-loss-coeff", "1e-3"],
         ["lm loss", "load_balancing_loss", "z_loss"], {}),
        ("seq_aux_loss 1e-2", BASE + MOE + ["--moe-router-load-balancing-type", "seq_aux_loss",
                                            "--moe-aux-loss-coeff", "1e-2"],
         ["lm loss", "load_balancing_loss", "seq_load_balancing_loss"], {"load_balancing_loss": 0.0}),
        ("seq_aux_loss at coefficient 0", BASE + MOE + ["--moe-router-load-balancing-type", "seq_aux_loss"],
         ["lm loss", "load_balancing_loss", "seq_load_balancing_loss"],
         {"load_balancing_loss": 0.0, "seq_load_balancing_loss": 0.0}),
        ("none", BASE + MOE + ["--moe-router-load-balancing-type", "none"], ["lm loss"], {}),
    ]
    for name, args, keys, zeros in cases:
        n0 = len(fails)
        its = iteration_lines(run(args + ["--train-iters", "2", "--log-interval", "1"]))
        if [it for it, _, _ in its] != [1, 2]:
            fail("%s: logged iterations %s" % (name, [it for it, _, _ in its]))
        for it, losses, l in its:
            if [k for k, _ in losses] != keys:
                fail("%s: iteration %d logs %s, Megatron %s" % (name, it, [k for k, _ in losses], keys))
            for k, v in losses:
                if k in zeros and v != 0.0:
                    fail("%s: %s is %g, Megatron's untracked value is 0" % (name, k, v))
                if k not in zeros and not v > 0:
                    fail("%s: %s is %g" % (name, k, v))
        if len(fails) == n0:
            print("ok: %s: %s" % (name, " | ".join("%s: %s" % kv for kv in its[-1][1])))


def check_fp16_skipped():
    """--fp16 whose scale overflows at first, and again after clean steps.

    The windows, the skipped counts, the learning rate and the losses of
    every line must follow Megatron's rules given which windows were
    skipped (read from the lines themselves), and the run must show the
    cases: a first window all skipped, and one all skipped after updates."""
    name = "--fp16 with skipped iterations"
    warmup, lr, iters = 4, 3e-3, 16
    args = BASE + MOE + ["--moe-z-loss-coeff", "1e-3", "--train-iters", str(iters), "--log-interval", "2",
                         "--lr-warmup-iters", str(warmup), "--lr-decay-style", "constant", "--fp16",
                         "--initial-loss-scale", str(2 ** 24), "--loss-scale-window", "1", "--hysteresis", "2"]
    its = iteration_lines(run(args))
    want_its = [1] + list(range(2, iters + 1, 2))
    if [it for it, _, _ in its] != want_its:
        fail("%s: logged iterations %s, Megatron logs %s" % (name, [it for it, _, _ in its], want_its))
        return
    start, done_skipped, advanced_ever = 1, 0, False
    seen = {"first all skipped": 0, "all skipped after updates": 0, "mixed": 0}
    z_first = None
    for it, losses, l in its:
        n = it - start + 1  # the window: since the last line that reset it
        skipped = int(field(l, "number of skipped iterations", r"\s*(\d+)"))
        if not 0 <= skipped <= n:
            fail("%s: iteration %d: %d skipped in a window of %d" % (name, it, skipped, n))
            return
        # iterations skipped so far: this window's, plus those of the windows before
        # (the first line's window is counted again by the second)
        skipped_so_far = done_skipped + skipped
        updates = it - skipped_so_far
        want_lr = lr * min(updates / warmup, 1.0)
        got_lr = float(field(l, "learning rate"))
        if abs(got_lr - want_lr) > 1e-9:
            fail("%s: iteration %d: learning rate %g, Megatron's scheduler after %d updates: %g"
                 % (name, it, got_lr, updates, want_lr))
        names = [k for k, _ in losses]
        vals = dict(losses)
        all_skipped = skipped == n
        if all_skipped and not advanced_ever:
            seen["first all skipped"] += 1
            if "lm loss" in names:
                fail("%s: iteration %d: nothing advanced yet, yet an lm loss: %s" % (name, it, l))
        elif all_skipped:
            seen["all skipped after updates"] += 1
            if vals.get("lm loss") != 0.0:
                fail("%s: iteration %d: a window of skipped iterations after updates logs lm loss %s, "
                     "Megatron 0.000000E+00" % (name, it, vals.get("lm loss")))
        else:
            seen["mixed"] += skipped > 0
            if not vals.get("lm loss", -1) > 0:
                fail("%s: iteration %d: no lm loss after %d updates" % (name, it, n - skipped))
        # the MoE losses: every iteration's, from the first line on
        if names[:2] != ["load_balancing_loss", "z_loss"] or vals["load_balancing_loss"] != 0.0:
            fail("%s: iteration %d: losses %s (the first iteration was skipped: Megatron's dict holds the MoE "
                 "losses before the lm loss, load_balancing_loss 0)" % (name, it, losses))
        if all_skipped and it == 1:
            z_first = vals.get("z_loss")
        if all_skipped and it == 2 and z_first:
            # the same parameters over two skipped iterations: their z losses summed, not averaged
            if not 1.5 < vals["z_loss"] / z_first < 2.5:
                fail("%s: z_loss over two skipped iterations %g, over the first %g: not their sum"
                     % (name, vals["z_loss"], z_first))
        advanced_ever = advanced_ever or skipped < n
        if it != 1:  # the first line leaves its window open
            done_skipped = skipped_so_far
            start = it + 1
    missing = [k for k in ("first all skipped", "all skipped after updates") if not seen[k]]
    if missing:
        fail("%s: the run did not show %s (windows: %s): choose another --initial-loss-scale" % (name, missing, seen))
    if not any(f.startswith(name) for f in fails):
        print("ok: %s: %d lines, windows %s; learning rate, lm loss and MoE losses as Megatron's"
              % (name, len(its), seen))


def main():
    check_iterations_and_memory()
    check_moe_fields()
    check_fp16_skipped()
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
