"""Acceptance 4: each kind of bad input gives exit code 2 and a one-line
error naming the file and the problem, through the CLI
(`dagatron preprocess --inspect PREFIX`): truncated .bin, truncated .idx,
wrong magic, version != 1, unknown dtype code, a pointer past the end of
.bin, document indices out of order, missing files.
"""
import os
import shutil
import struct
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_ref as ref  # noqa: E402

S = 4  # sequences in the good dataset
D = 4  # document index entries


def patch(path, offset, data):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def shrink(path, by):
    os.truncate(path, os.path.getsize(path) - by)


CASES = [
    # name, corruption, file the message must name, words it must hold
    ("truncated_bin", lambda p: shrink(p + ".bin", 3), ".bin", "truncated"),
    ("truncated_idx", lambda p: shrink(p + ".idx", 5), ".idx", "truncated"),
    ("wrong_magic", lambda p: patch(p + ".idx", 0, b"NOTMMID"), ".idx", "wrong magic"),
    ("bad_version", lambda p: patch(p + ".idx", 9, struct.pack("<Q", 2)), ".idx", "version 2"),
    ("bad_dtype", lambda p: patch(p + ".idx", 17, bytes([42])), ".idx", "unknown dtype code 42"),
    ("pointer_past_end", lambda p: patch(p + ".idx", 34 + 4 * S + 8 * 2, struct.pack("<q", 10**9)), ".idx",
     "past the end"),
    ("doc_indices_order", lambda p: patch(p + ".idx", 34 + 12 * S + 8 * 2, struct.pack("<q", 0)), ".idx",
     "document indices out of order"),
    ("missing", lambda p: os.remove(p + ".idx"), ".idx", "cannot open"),
]


def main():
    exe = ref.dagatron()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        good = os.path.join(tmp, "good")
        ref.write_indexed(good, [[[1, 2, 3]], [[4, 5], [6]], [[7, 8, 9, 10]]], np.uint16)  # doc idx [0,1,3,4]
        ref.run([exe, "preprocess", "--inspect", good])
        for name, corrupt, fname, words in CASES:
            p = os.path.join(tmp, name)
            for ext in (".idx", ".bin"):
                shutil.copy(good + ext, p + ext)
            corrupt(p)
            r = ref.run([exe, "preprocess", "--inspect", p], expect=None)
            lines = r.stderr.strip().splitlines()
            ok = (r.returncode == 2 and len(lines) == 1 and (os.path.basename(p) + fname) in lines[0]
                  and words in lines[0] and r.stdout == "")
            print(f"{name}: exit {r.returncode}: {r.stderr.strip()}  [{'ok' if ok else 'FAIL'}]")
            failures += not ok
    if failures:
        sys.exit(f"FAIL: {failures} cases")
    print("PASS")


if __name__ == "__main__":
    main()
