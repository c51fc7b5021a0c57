"""dist_trace_check.py MODE TRACE — the checks of dist_trace.sh on one trace
(Chrome trace-event JSON written by `dagatron train --trace`; tid 0 is the
compute stream, tid 1 the comm stream, cat the node's phase).

MODE overlap: optimizer-phase nodes are there (optim_sumsq, optim_clip,
optim_adamw on the compute stream, the norm's all_gather on the comm
stream); the parameter all-gathers are forward-phase comm tasks, and the
forward's compute runs while they are under way: forward compute tasks
start after the first one starts and before the last one ends. Whether
they also overlap in wall-clock time depends on the OS giving the comm
thread a core at that moment: the overlap is printed, and exit status 3
says there was none (dist_trace.sh then tries again).
MODE plain: the same optimizer nodes; the parameter all-gathers are
optimizer-phase comm tasks that start after optim_clip has finished, and
no forward compute runs while they are under way."""
import json
import sys

mode, path = sys.argv[1], sys.argv[2]
# rank 0's events (the file holds every rank's, one pid each)
events = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X" and e.get("pid") == 0]
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
# forward compute tasks (the unpacks excluded) started while the gathers were under way
first = min((span(g)[0] for g in gathers), default=0)
last = max((span(g)[1] for g in gathers), default=0)
beside = [f for f in forward if f["args"]["op"] != "dp_unpack" and first < f["ts"] < last]
if mode == "overlap":
    if not gathers or any(g["cat"] != "forward" for g in gathers):
        fail.append("parameter all-gathers: want forward-phase comm tasks, got %s" %
                    sorted({g["cat"] for g in gathers}))
    if not beside:
        fail.append("no forward compute runs while the parameter all-gathers are under way")
else:
    clip_end = max(span(e)[1] for e in pick(tid=0, op="optim_clip")) if pick(tid=0, op="optim_clip") else 0
    if not gathers or any(g["cat"] != "optimizer" or g["ts"] < clip_end for g in gathers):
        fail.append("parameter all-gathers: want optimizer-phase comm tasks after optim_clip")
    if beside or overlap_us > 0:
        fail.append("forward compute runs beside the parameter all-gathers without --overlap-param-gather")

n_opt = len(pick(cat="optimizer"))
retry = not fail and mode == "overlap" and overlap_us <= 0
verdict = "FAIL: " + "; ".join(fail) if fail else "structure ok, no wall-clock overlap in this run" if retry else "ok"
print("%s: %d parameter all-gathers, %d forward compute tasks started while they were under way, "
      "%.0f us of them in wall-clock overlap; %d optimizer tasks: %s"
      % (mode, len(gathers), len(beside), overlap_us, n_opt, verdict))
sys.exit(1 if fail else 3 if retry else 0)
