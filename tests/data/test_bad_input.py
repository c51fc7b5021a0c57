"""Acceptance 4: each kind of bad input gives exit code 2 and a one-line
error naming the file and the problem, through the CLI
(`dagatron preprocess --inspect PREFIX`): truncated .bin, truncated .idx,
wrong magic, version != 1, unknown dtype code, a pointer past the end of
.bin, document indices out of order, missing files; and (issue 10) pairs
that do not belong together: a dtype code that disagrees with the data,
trailing bytes after the data, an .idx paired with another dataset's .bin.
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


def append(path, data):
    with open(path, "ab") as f:
        f.write(data)


def other_bin(prefix):
    """Pair prefix.idx with the .bin of another dataset (same dtype, more tokens)."""
    other = prefix + "_other"
    ref.write_indexed(other, [[[1, 2, 3, 4, 5, 6]], [[7, 8, 9, 10, 11, 12]]], np.uint16)
    shutil.copy(other + ".bin", prefix + ".bin")


def int32_bin(prefix):
    """The same tokens written as int32, paired with the uint16 .idx."""
    other = prefix + "_i32"
    ref.write_indexed(other, [[[1, 2, 3]], [[4, 5], [6]], [[7, 8, 9, 10]]], np.int32)
    shutil.copy(other + ".bin", prefix + ".bin")


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
    ("dtype_says_int32", lambda p: patch(p + ".idx", 17, bytes([4])), ".idx", "do not match"),
    ("dtype_says_uint8", lambda p: patch(p + ".idx", 17, bytes([1])), ".idx", "do not match"),
    ("bin_is_int32", int32_bin, ".bin", "not a pair"),
    ("trailing_bytes", lambda p: append(p + ".bin", b"\x00\x00"), ".bin", "2 trailing bytes"),
    ("other_datasets_bin", other_bin, ".bin", "not a pair"),
    ("first_pointer_not_0", lambda p: patch(p + ".idx", 34 + 4 * S, struct.pack("<q", 2)), ".idx", "expected 0"),
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
            failures += not ref.refused([exe, "preprocess", "--inspect", p], [os.path.basename(p) + fname, words],
                                        label=name)
    ref.finish(failures)


if __name__ == "__main__":
    main()
