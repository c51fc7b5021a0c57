#!/usr/bin/python3
"""compare_params.py CKPT_A CKPT_B — are the parameters of two dagatron
checkpoints bitwise identical? Reads each latest iteration's metadata.json and
assembles every parameter (optimizer moments skipped) from its stored slices,
checking each slice's CRC-32 (zlib), with the standard library and numpy.
Exits 1 naming the first parameter that differs or is missing."""
import json
import os
import sys
import zlib

import numpy as np


def params(ckpt):
    it = int(open(os.path.join(ckpt, "latest_checkpointed_iteration.txt")).read())
    d = os.path.join(ckpt, "iter_%07d" % it)
    man = json.load(open(os.path.join(d, "metadata.json")))
    out = {}
    for t in man["tensors"]:
        if t["name"].startswith("optimizer.") or t["dtype"] != "f32":
            continue
        with open(os.path.join(d, t["file"]), "rb") as f:
            f.seek(t["offset"])
            raw = f.read(t["nbytes"])
        assert zlib.crc32(raw) == t["crc32"], "%s: CRC mismatch" % t["name"]
        g = out.setdefault(t["name"], np.zeros(t["global_shape"], dtype="<f4"))
        start = t.get("slice_start", [0] * len(t["global_shape"]))
        box = tuple(slice(s, s + n) for s, n in zip(start, t["shape"]))
        g[box] = np.frombuffer(raw, dtype="<f4").reshape(t["shape"])
    return out


a, b = params(sys.argv[1]), params(sys.argv[2])
if sorted(a) != sorted(b):
    print("FAIL: parameter names differ: %s" % sorted(set(a) ^ set(b))[:5])
    sys.exit(1)
for name in sorted(a):
    if a[name].shape != b[name].shape or a[name].tobytes() != b[name].tobytes():
        print("FAIL: parameter %s differs" % name)
        sys.exit(1)
print("ok: %d parameters bitwise identical (%s, %s)" % (len(a), sys.argv[1], sys.argv[2]))
