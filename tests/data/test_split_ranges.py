"""Issue 10, acceptance 1: with one --data-path prefix, each split is built
from its own sequence range. The indices dagatron's training feed builds
(dg_data_open, through tests/data/data_tool) for the train, valid and test
splits equal megatron_ref.gpt_indices over the range megatron_ref.split_ranges
gives for --split 80,20,0 and 949,50,1; a split of weight 0 is not built.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_ref as ref  # noqa: E402

TOOL = os.path.join(os.environ.get("DG_BUILD", "."), "tests", "data", "data_tool")
SEQ_LENGTH = 16
SEED = 1234


def main():
    rng = np.random.RandomState(5)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "ds")
        docs = [[list(rng.randint(0, 60000, size=int(rng.randint(20, 80))))] for _ in range(2000)]
        ref.write_indexed(prefix, docs, np.uint16)
        lengths = np.array([len(d[0]) for d in docs], dtype=np.int32)
        for split in ["80,20,0", "949,50,1"]:
            cache = os.path.join(tmp, "cache_" + split.replace(",", "_"))
            p = subprocess.run([TOOL, "split", prefix, split, str(SEQ_LENGTH), str(SEED), cache],
                               capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"data_tool split failed: {p.stderr}")
            built = dict(line.split() for line in p.stdout.splitlines())
            for name, rng_ in zip(["train", "valid", "test"], ref.split_ranges(split, len(docs))):
                if rng_ is None:
                    ok = name not in built
                    print(f"--split {split} {name}: not built by the reference; "
                          f"{'not built' if ok else 'BUILT'} by dagatron")
                    failures += not ok
                    continue
                if name not in built:
                    print(f"--split {split} {name}: [{rng_[0]}, {rng_[1]}) in the reference, MISSING in dagatron")
                    failures += 1
                    continue
                base = built[name]
                di = np.load(base + "-document_index.npy")
                si = np.load(base + "-sample_index.npy")
                sh = np.load(base + "-shuffle_index.npy")
                rdi, rsi, rsh, _, _ = ref.gpt_indices(lengths, rng_[0], rng_[1], SEQ_LENGTH, None, SEED)
                ok = np.array_equal(di, rdi) and np.array_equal(si, rsi) and np.array_equal(sh, rsh)
                print(f"--split {split} {name}: sequences [{rng_[0]}, {rng_[1]}), dagatron's sequences "
                      f"[{di.min()}, {di.max() + 1}), {len(sh)} samples: {'same as reference' if ok else 'MISMATCH'}")
                failures += not ok
    ref.finish(failures)


if __name__ == "__main__":
    main()
