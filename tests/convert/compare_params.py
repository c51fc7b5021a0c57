#!/usr/bin/python3
"""compare_params.py CKPT_A CKPT_B — are the parameters of two dagatron
checkpoints bitwise identical? Each latest iteration's parameters are
assembled from their stored slices by tests/ep/ckpt_params_close.py's
loader (optimizer moments skipped); the iterations may differ (an import is
iteration 0). Exits 1 naming the first parameter that differs or is
missing."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ep"))
from ckpt_params_close import load  # noqa: E402

_, a = load(sys.argv[1])
_, b = load(sys.argv[2])
if sorted(a) != sorted(b):
    print("FAIL: parameter names differ: %s" % sorted(set(a) ^ set(b))[:5])
    sys.exit(1)
for name in sorted(a):
    if a[name].shape != b[name].shape or a[name].tobytes() != b[name].tobytes():
        print("FAIL: parameter %s differs" % name)
        sys.exit(1)
print("ok: %d parameters bitwise identical (%s, %s)" % (len(a), sys.argv[1], sys.argv[2]))
