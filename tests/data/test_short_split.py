"""Issue 25 item 4: `dagatron train` on a split with fewer tokens than one
sample (seq_length + 1). Megatron's GPTDataset builds it by repeating the
split's sequences over as many epochs as the samples need; dagatron refused it.

  * a train split of 9 tokens (one sequence empty) at --seq-length 16 trains,
    and the indices it cached (--data-cache-path) equal Megatron's rule for
    the samples the run wants (megatron_ref.gpt_indices, independent of
    dagatron's code);
  * a valid split of 8 tokens evaluates, its indices equal the rule too;
  * a split without documents (from --split rounding), or without tokens, is
    refused in one line naming the split and the dataset (Megatron would
    loop forever there).
"""
import glob
import math
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_ref as ref  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MOE_ARCH = open(os.path.join(HERE, "..", "common", "moe_arch.flags")).read().split()
SEQ, GBS, SEED = 16, 2, 1234
# later flags win: the MoE architecture's --eval-iters and --log-interval are overridden
TINY = MOE_ARCH + ["--num-layers", "1", "--hidden-size", "32", "--num-attention-heads", "2",
                   "--seq-length", str(SEQ), "--num-experts", "2", "--moe-router-topk", "1",
                   "--micro-batch-size", "1", "--global-batch-size", str(GBS), "--log-interval", "1",
                   "--seed", str(SEED)]


def cached(cache, split):
    """The three indices dagatron cached for `split` (exactly one build)."""
    bases = glob.glob(os.path.join(cache, f"*-GPTDataset-{split}-description.txt"))
    if len(bases) != 1:
        return None
    base = bases[0][: -len("-description.txt")]
    return [np.load(f"{base}-{k}_index.npy") for k in ("document", "sample", "shuffle")]


def same(got, lengths, b, e, num_samples):
    want = ref.gpt_indices(lengths, b, e, SEQ, num_samples, SEED)
    return got is not None and all(np.array_equal(g, w) for g, w in zip(got, want[:3])), want[3]


def losses(stdout):
    """The lm loss of each training log line, and of each validation line."""
    train = [float(x.split("lm loss:")[1].split("|")[0]) for x in stdout.splitlines() if "| lm loss:" in x]
    valid = [float(x.split("lm loss value:")[1].split("|")[0]) for x in stdout.splitlines()
             if "validation loss at iteration" in x]
    return train, valid


def main():
    exe = ref.dagatron()
    failures = 0
    rng = np.random.RandomState(0)
    with tempfile.TemporaryDirectory() as tmp:
        # 9 tokens in 4 sequences, one of them empty: every sample spans epochs.
        short = os.path.join(tmp, "short")
        short_len = np.array([3, 0, 4, 2], dtype=np.int32)
        ref.write_indexed(short, [[list(rng.randint(0, 256, size=int(k)))] for k in short_len])
        iters = 3
        cache = os.path.join(tmp, "cache_train")
        r = ref.run([exe, "train"] + TINY + ["--data-path", short, "--split", "100,0,0", "--train-iters", str(iters),
                                             "--eval-iters", "0", "--data-cache-path", cache], expect=None)
        train, _ = losses(r.stdout)
        ok_idx, epochs = same(cached(cache, "train"), short_len, 0, 4, iters * GBS)
        ok = r.returncode == 0 and len(train) == iters and all(math.isfinite(x) for x in train) and ok_idx
        print(f"train split of {short_len.sum()} tokens at --seq-length {SEQ}: exit {r.returncode}, "
              f"losses {train}, indices over {epochs} epochs {'equal' if ok_idx else 'DIFFER from'} Megatron's rule"
              f"  [{'ok' if ok else 'FAIL'}]")
        if not ok:
            print(r.stdout[-1500:], r.stderr[-1500:])
        failures += not ok

        # 98 sequences of 40 tokens, then 2 of 4: --split 98,2,0 gives a valid split of 8 tokens.
        big = os.path.join(tmp, "big")
        big_len = np.array([40] * 98 + [4] * 2, dtype=np.int32)
        ref.write_indexed(big, [[list(rng.randint(0, 256, size=int(k)))] for k in big_len])
        iters, eval_iters = 2, 1
        cache = os.path.join(tmp, "cache_valid")
        r = ref.run([exe, "train"] + TINY + ["--data-path", big, "--split", "98,2,0", "--train-iters", str(iters),
                                             "--eval-iters", str(eval_iters), "--eval-interval", "1",
                                             "--data-cache-path", cache], expect=None)
        _, valid = losses(r.stdout)
        wanted = (iters // 1 + 1) * eval_iters * GBS  # Megatron's valid samples: (train // interval + 1) evals
        ok_idx, epochs = same(cached(cache, "valid"), big_len, 98, 100, wanted)
        ok = r.returncode == 0 and len(valid) >= iters and all(math.isfinite(x) for x in valid) and ok_idx
        print(f"valid split of 8 tokens: exit {r.returncode}, validation losses {valid}, indices over {epochs} "
              f"epochs {'equal' if ok_idx else 'DIFFER from'} Megatron's rule  [{'ok' if ok else 'FAIL'}]")
        if not ok:
            print(r.stdout[-1500:], r.stderr[-1500:])
        failures += not ok

        # Refusals: no documents (the rounding of --split), no tokens.
        empty_seqs = os.path.join(tmp, "blank")
        ref.write_indexed(empty_seqs, [[[]], [[]], [[]]])
        cases = [
            (["--data-path", big, "--split", "99.5,0.4,0.1", "--eval-iters", "1"],
             [big, "valid split", "[100, 100)", "no documents", "--split"]),
            (["--data-path", big, "--split", "0.1,99.9,0", "--eval-iters", "1"],
             [big, "train split", "[0, 0)", "no documents"]),
            (["--data-path", empty_seqs, "--split", "100,0,0", "--eval-iters", "0"],
             [empty_seqs, "train split", "0 tokens"]),
        ]
        for extra, words in cases:
            failures += not ref.refused([exe, "train"] + TINY + ["--train-iters", "1"] + extra, words, label=" ".join(
                os.path.basename(x) if x.startswith(tmp) else x for x in extra))
    ref.finish(failures)


if __name__ == "__main__":
    main()
