"""dist_trace_check.py MODE TRACE — the checks of dist_trace.sh on one trace
(Chrome trace-event JSON written by `dagatron train --trace`; tid 0 is the
compute stream, tid 1 the comm stream, cat the node's phase).

MODE overlap: optimizer-phase nodes are there (optim_sumsq, optim_clip,
optim_adamw on the compute stream, the norm's all_gather on the comm
stream); the parameter all-gathers are forward-phase comm tasks, and at
least one of them overlaps in time a forward compute task that runs after
the step's first parameter has arrived.
MODE plain: the same optimizer nodes; the parameter all-gathers are
optimizer-phase comm tasks that start after optim_clip has finished, and
none overlaps a forward task."""
import json
import sys

mode, path = sys.argv[1], sys.argv[2]
events = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]
fail = []


def pick(tid=None, cat=None, op=None, name=None):
    return [e for e in events if (tid is None or e["tid"] == tid) and (cat is None or e["cat"] == cat)
            and (op is None or e["args"]["op"] == op) and (name is None or name in e["name"])]


def span(e):
    return e["ts"], e["ts"] + e["dur"]


for op in ("optim_sumsq", "optim_clip", "optim_adamw"):
    if not pick(tid=0, cat="optimizer", op=op):
        fail.append("no %s task on the compute stream in the optimizer phase" % op)
if not pick(tid=1, cat="optimizer", op="all_gather", name="optim/norm/"):
    fail.append("no all_gather of the gradient norm on the comm stream")

gathers = pick(tid=1, op="all_gather", name="param_all_gather")
forward = pick(tid=0, cat="forward")
overlap_us = sum(max(0.0, min(span(g)[1], span(f)[1]) - max(span(g)[0], span(f)[0]))
                 for g in gathers for f in forward)
if mode == "overlap":
    if not gathers or any(g["cat"] != "forward" for g in gathers):
        fail.append("parameter all-gathers: want forward-phase comm tasks, got %s" %
                    sorted({g["cat"] for g in gathers}))
    if overlap_us <= 0:
        fail.append("no parameter all-gather overlaps forward compute")
else:
    clip_end = max(span(e)[1] for e in pick(tid=0, op="optim_clip")) if pick(tid=0, op="optim_clip") else 0
    if not gathers or any(g["cat"] != "optimizer" or g["ts"] < clip_end for g in gathers):
        fail.append("parameter all-gathers: want optimizer-phase comm tasks after optim_clip")
    if overlap_us > 0:
        fail.append("a parameter all-gather overlaps forward compute without --overlap-param-gather")

n_opt = len(pick(cat="optimizer"))
print("%s: %d parameter all-gathers (%.0f us beside forward compute), %d optimizer tasks: %s"
      % (mode, len(gathers), overlap_us, n_opt, "FAIL: " + "; ".join(fail) if fail else "ok"))
sys.exit(1 if fail else 0)
