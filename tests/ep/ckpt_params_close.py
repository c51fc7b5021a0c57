#!/usr/bin/python3
"""ckpt_params_close.py A B [rtol [atol]] — the model parameters of two
dagatron checkpoints (their latest iterations) agree: for every parameter
tensor, ||a - b|| <= rtol * max(||b||, atol) in the L2 norm (default rtol
1e-5, atol 0), the measure the DP equivalence tests (tests/dist) use; atol
lets a tensor that is zero in exact arithmetic (a key bias: its gradient
cancels, so Adam steers it by rounding noise) be compared absolutely. Optimizer moments are not
compared. Exits 1 on a mismatch or a missing tensor."""
import json
import os
import sys

import numpy as np


def load(d):
    it = int(open(os.path.join(d, "latest_checkpointed_iteration.txt")).read())
    idir = os.path.join(d, "iter_%07d" % it)
    man = json.load(open(os.path.join(idir, "metadata.json")))
    out = {}
    for t in man["tensors"]:
        if t["name"].startswith("optimizer."):
            continue
        raw = np.fromfile(os.path.join(idir, t["file"]), dtype=np.uint8, count=t["nbytes"], offset=t["offset"])
        # a tensor may be stored as several slices (version 2): put each in place
        whole = out.setdefault(t["name"], np.zeros(t["global_shape"], dtype=np.float32))
        box = tuple(slice(s, s + n) for s, n in zip(t["slice_start"], t["shape"]))
        whole[box] = raw.view(np.float32).reshape(t["shape"])
    return it, out


def main():
    rtol = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-5
    atol = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    ia, a = load(sys.argv[1])
    ib, b = load(sys.argv[2])
    bad = 0 if ia == ib and set(a) == set(b) else 1
    if bad:
        print("FAIL: iterations %d vs %d or tensor names differ" % (ia, ib))
    worst = 0.0
    for n in sorted(set(a) & set(b)):
        scale = max(float(np.linalg.norm(b[n].astype(np.float64))), atol, 1e-30)
        rel = float(np.linalg.norm((a[n] - b[n]).astype(np.float64))) / scale
        worst = max(worst, rel)
        if rel > rtol:
            print("FAIL: %s differs: max rel %.3e" % (n, rel))
            bad += 1
    print("final parameters: %d tensors, worst relative L2 difference %.3e (tolerance %.0e)" % (len(b), worst, rtol))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
