#!/usr/bin/python3
"""ckpt_verify.py DIR — the checkpoint DIR's tracker names is complete: its
metadata.json parses, every stored slice's bytes are in its file and match
their CRC-32 (zlib's, as the manifest says), and the slices tile each tensor.
Exits 1 with one line otherwise. Standard library only."""
import json
import os
import sys
import zlib


def main():
    d = sys.argv[1]
    it = int(open(os.path.join(d, "latest_checkpointed_iteration.txt")).read())
    idir = os.path.join(d, "iter_%07d" % it)
    man = json.load(open(os.path.join(idir, "metadata.json")))
    if man["iteration"] != it:
        sys.exit("FAIL: %s says iteration %d" % (idir, man["iteration"]))
    vol = {}
    for t in man["tensors"]:
        with open(os.path.join(idir, t["file"]), "rb") as f:
            f.seek(t["offset"])
            b = f.read(t["nbytes"])
        if len(b) != t["nbytes"] or zlib.crc32(b) != t["crc32"]:
            sys.exit("FAIL: %s: tensor %s: truncated or CRC mismatch" % (idir, t["name"]))
        v = 1
        for n in t["shape"]:
            v *= n
        vol[t["name"]] = vol.get(t["name"], 0) + v
    for t in man["tensors"]:
        g = 1
        for n in t["global_shape"]:
            g *= n
        if vol[t["name"]] != g:
            sys.exit("FAIL: %s: tensor %s not covered" % (idir, t["name"]))
    print(it)


if __name__ == "__main__":
    main()
