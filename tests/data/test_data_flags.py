"""Issue 10: the data flags of `dagatron train` and `preprocess`.

  * `--data-path ""` is an error (it trained on the fortunes corpus);
  * `--data-path 0.5 X 0.5` says the weights and prefixes do not pair up;
  * `--vocab-file` / `--merge-file` without `--tokenizer-type` are refused,
    as Megatron refuses them (they were silently ignored for byte-level);
  * `--data-cache-path DIR` puts the GPT dataset's index cache in DIR, and
    nothing beside the data (it was accepted and ignored).
Every refusal is one line on stderr and exit code 2.
"""
import glob
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_ref as ref  # noqa: E402

# the MoE architecture this test was written for (Megatron's defaults are a dense GPT)
MOE_ARCH = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common", "moe_arch.flags")).read().split()
TINY = MOE_ARCH + ["--num-layers", "1", "--hidden-size", "32", "--num-attention-heads", "2", "--seq-length", "16",
        "--num-experts", "2", "--moe-router-topk", "1", "--micro-batch-size", "1", "--global-batch-size", "1",
        "--train-iters", "1", "--eval-iters", "1", "--eval-interval", "1", "--log-interval", "1"]


def main():
    exe = ref.dagatron()
    failures = 0
    rng = np.random.RandomState(0)
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data")
        os.mkdir(data)
        ds = os.path.join(data, "ds")
        ref.write_indexed(ds, [[list(rng.randint(0, 256, size=100))] for _ in range(200)], np.uint16)
        text = os.path.join(tmp, "in.txt")
        open(text, "w").write("hello\n")
        vocab = os.path.join(tmp, "vocab.json")
        cases = [
            ([exe, "train", "--data-path", ""] + TINY, ["--data-path", "empty"]),
            ([exe, "train", "--data-path=", "--split", "90,10,0"] + TINY, ["--data-path", "empty"]),
            ([exe, "train", "--data-path", "0.5", ds, "0.5"] + TINY, ["--data-path", "do not pair up", "'0.5'"]),
            ([exe, "train", "--data-path", "0.5", "0.5", ds] + TINY, ["--data-path", "do not pair up"]),
            ([exe, "train", "--data-path", ds, "--split", "90,10,0", "--vocab-file", vocab] + TINY,
             ["--vocab-file", "--tokenizer-type"]),
            ([exe, "train", "--data-path", ds, "--split", "90,10,0", "--merge-file", vocab] + TINY,
             ["--merge-file", "--tokenizer-type"]),
            ([exe, "preprocess", "--input", text, "--output-prefix", os.path.join(tmp, "out"), "--vocab-file", vocab],
             ["--vocab-file", "--tokenizer-type"]),
        ]
        for args, words in cases:
            failures += not ref.refused(args, words)
        cache = os.path.join(tmp, "cache")
        r = ref.run([exe, "train", "--data-path", ds, "--split", "90,10,0", "--data-cache-path", cache] + TINY,
                    expect=None)
        built = sorted(os.path.basename(p) for p in glob.glob(os.path.join(cache, "*-GPTDataset-*")))
        want = [f"{s}-{a}" for s in ("train", "valid")
                for a in ("description.txt", "document_index.npy", "sample_index.npy", "shuffle_index.npy")]
        have = sorted(b.split("-GPTDataset-", 1)[1] for b in built)
        beside = os.listdir(data)
        ok = r.returncode == 0 and have == sorted(want) and sorted(beside) == ["ds.bin", "ds.idx"]
        print(f"--data-cache-path: exit {r.returncode}, cache holds {have}, the data folder holds {beside}  "
              f"[{'ok' if ok else 'FAIL'}]")
        if not ok:
            print(r.stdout[-2000:], r.stderr[-2000:])
        failures += not ok
    ref.finish(failures)


if __name__ == "__main__":
    main()
