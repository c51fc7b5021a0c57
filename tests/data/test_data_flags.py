"""Issue 10: the data flags of `dagatron train` and `preprocess`.

  * `--data-path ""` is an error (it trained on the fortunes corpus);
  * `--data-path 0.5 X 0.5` says the weights and prefixes do not pair up;
  * `--vocab-file` and `--merge-file` without `--tokenizer-type` train a
    GPT2BPETokenizer, as Megatron's pretrain_gpt.py defaults the type (issue
    25, item 3): the same log as with the type named, the checkpoint records
    it, and one line says so (rank 0 alone under mpirun); one of the two
    files alone is refused naming both, and `preprocess` (whose Megatron
    script requires the type) still refuses them without it;
  * `--data-cache-path DIR` puts the GPT dataset's index cache in DIR, and
    nothing beside the data (it was accepted and ignored).
Every refusal is one line on stderr and exit code 2.
"""
import glob
import json
import os
import re
import shlex
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


def gpt2_files(tmp):
    """vocab.json and merges.txt (GPT2BPETokenizer's files) from the test tokenizer.json."""
    tj = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tokenizer", "gpt2",
                                     "tokenizer.json"), encoding="utf-8"))
    vocab, merges = os.path.join(tmp, "vocab.json"), os.path.join(tmp, "merges.txt")
    json.dump(tj["model"]["vocab"], open(vocab, "w", encoding="utf-8"))
    with open(merges, "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for m in tj["model"]["merges"]:
            f.write((m if isinstance(m, str) else " ".join(m)) + "\n")
    return vocab, merges


def check_gpt2_default(exe, tmp, ds):
    """Megatron's pretrain_gpt.py: no --tokenizer-type is GPT2BPETokenizer."""
    vocab, merges = gpt2_files(tmp)
    files = ["--vocab-file", vocab, "--merge-file", merges]
    model = MOE_ARCH + ["--num-layers", "1", "--hidden-size", "32", "--num-attention-heads", "2", "--seq-length",
                        "16", "--num-experts", "2", "--moe-router-topk", "1", "--micro-batch-size", "1",
                        "--train-iters", "2", "--eval-iters", "0", "--log-interval", "1"]
    base = [exe, "train", "--data-path", ds, "--split", "90,10,0"] + model
    losses = lambda out: re.findall(r"iteration\s+\d+/\s*\d+ .*?lm loss: ([0-9.E+-]+)", out)
    named = ref.run(base + ["--tokenizer-type", "GPT2BPETokenizer"] + files)
    ckpt = os.path.join(tmp, "gpt2_default")
    dflt = ref.run(base + files + ["--save", ckpt])
    note = [l for l in dflt.stdout.splitlines() if "tokenizer GPT2BPETokenizer" in l]
    meta = json.load(open(glob.glob(os.path.join(ckpt, "iter_*", "metadata.json"))[0]))["tokenizer"]
    vocab_line = lambda out: re.search(r"vocabulary \d+ \(padded\)", out).group(0)
    ok = (len(losses(named.stdout)) == 2 and losses(dflt.stdout) == losses(named.stdout) and
          vocab_line(dflt.stdout) == vocab_line(named.stdout) and len(note) == 1 and
          "no --tokenizer-type" in note[0] and meta["type"] == "GPT2BPETokenizer" and meta["vocab_file"] == vocab)
    print(f"--vocab-file/--merge-file without --tokenizer-type: losses {losses(dflt.stdout)} "
          f"(named: {losses(named.stdout)}), {vocab_line(dflt.stdout)}, note {note}, "
          f"checkpoint tokenizer {meta['type']}  [{'ok' if ok else 'FAIL'}]")
    failures = not ok
    # under mpirun: the line once (rank 0), the same losses
    mpi = shlex.split(os.environ.get("DG_MPIRUN", "mpirun --allow-run-as-root --oversubscribe"))
    r = ref.run(mpi + ["-np", "2"] + base + ["--global-batch-size", "2"] + files)
    n = r.stdout.count("tokenizer GPT2BPETokenizer")
    ok = n == 1 and len(losses(r.stdout)) == 2
    print(f"  under mpirun -np 2: {n} line(s) naming the tokenizer, {len(losses(r.stdout))} iterations logged  "
          f"[{'ok' if ok else 'FAIL'}]")
    return failures + (not ok)


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
             ["--vocab-file given without --merge-file", "GPT2BPETokenizer"]),
            ([exe, "train", "--data-path", ds, "--split", "90,10,0", "--merge-file", vocab] + TINY,
             ["--merge-file given without --vocab-file", "GPT2BPETokenizer"]),
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
        failures += check_gpt2_default(exe, tmp, ds)  # after the cache check: these runs cache beside the data
    ref.finish(failures)


if __name__ == "__main__":
    main()
