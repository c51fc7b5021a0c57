#!/usr/bin/python3
"""ckpt_tiles.py DIR MIN_FILES — the latest checkpoint in DIR is a sharded
dagatron checkpoint whose stored slices tile every tensor exactly once (no
overlap, nothing missing: replicas were deduplicated) and whose data is
spread over at least MIN_FILES files (every rank wrote). Exits 1 otherwise."""
import json
import os
import sys
from itertools import combinations


def overlap(a, b):
    return all(max(s, t) < min(s + n, t + m) for s, n, t, m in zip(a["slice_start"], a["shape"], b["slice_start"], b["shape"]))


def main():
    d, min_files = sys.argv[1], int(sys.argv[2])
    it = int(open(os.path.join(d, "latest_checkpointed_iteration.txt")).read())
    man = json.load(open(os.path.join(d, "iter_%07d" % it, "metadata.json")))
    by = {}
    for t in man["tensors"]:
        by.setdefault(t["name"], []).append(t)
    bad = 0
    for name, sl in by.items():
        total = 1
        for n in sl[0]["global_shape"]:
            total *= n
        vol = 0
        for t in sl:
            v = 1
            for n in t["shape"]:
                v *= n
            vol += v
        if vol != total or any(overlap(a, b) for a, b in combinations(sl, 2)):
            print("FAIL: %s: slices hold %d elements of %d, or overlap" % (name, vol, total))
            bad += 1
    files = {t["file"] for t in man["tensors"]}
    if len(files) < min_files:
        print("FAIL: %d data files, expected at least %d" % (len(files), min_files))
        bad += 1
    print("%d tensors in %d slices over %d files, each tensor tiled once" % (len(by), len(man["tensors"]), len(files)))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
