"""Issue 25 item 5: Megatron's --train-data-path, --valid-data-path and
--test-data-path (each "[weight] prefix ...", as --data-path) give each split
its own blend; dagatron said "unknown flag".

With per-split paths Megatron builds each split from its own datasets, every
dataset whole (blend_per_split; the --split fractions do not cut them), a
split without a path is not built (no evaluation on it), and it refuses
--data-path or --mock-data beside them; an explicit --split beside them is
ignored, with a note (each split's datasets are read whole). Checked here:

  * the indices each split cached (--data-cache-path) name that split's own
    file, cover all its sequences (the default --split 969,30,1 would cut
    them), and equal Megatron's GPTDataset rule (megatron_ref.gpt_indices);
  * training losses equal a run on --data-path TRAIN --split 100,0,0 (the
    same samples), and the validation losses follow --valid-data-path;
  * without --valid-data-path / --test-data-path: no evaluation on them;
  * the checkpoint's manifest records the three paths (not "" = the default corpus);
  * a weighted --train-data-path asks each dataset for Megatron's
    ceil(ceil(N * w) * 1.005) samples;
  * --split 90,10,0 beside them: a note, and the same losses as without;
  * refusals in one line: --data-path or --mock-data with them,
    valid/test paths without a train path, a per-split dataset without
    documents, weights that do not pair up (naming the per-split flag).
"""
import glob
import json
import math
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_ref as ref  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MOE_ARCH = open(os.path.join(HERE, "..", "common", "moe_arch.flags")).read().split()
SEQ, GBS, SEED, ITERS = 16, 2, 1234, 2
# later flags win: the MoE architecture's --eval-iters and --log-interval are overridden
TINY = MOE_ARCH + ["--num-layers", "1", "--hidden-size", "32", "--num-attention-heads", "2",
                   "--seq-length", str(SEQ), "--num-experts", "2", "--moe-router-topk", "1",
                   "--micro-batch-size", "1", "--global-batch-size", str(GBS), "--log-interval", "1",
                   "--seed", str(SEED), "--train-iters", str(ITERS), "--eval-iters", "1", "--eval-interval", "1"]
WANT = {"train": ITERS * GBS, "valid": (ITERS // 1 + 1) * 1 * GBS, "test": 1 * GBS}  # Megatron's sizes


def builds(cache):
    """{(split, dataset_path): (description, [document, sample, shuffle index])} cached in `cache`."""
    out = {}
    for d in glob.glob(os.path.join(cache, "*-description.txt")):
        desc = json.loads(open(d).read())
        base = d[: -len("-description.txt")]
        out[(desc["index_split"], desc["dataset_path"])] = (
            desc, [np.load(f"{base}-{k}_index.npy") for k in ("document", "sample", "shuffle")])
    return out


def equals_rule(got, lengths, num_samples):
    """Whole dataset [0, n): the cached indices equal Megatron's rule."""
    if got is None:
        return False
    desc, idx = got
    want = ref.gpt_indices(lengths, 0, len(lengths), SEQ, num_samples, SEED)
    return desc["split_range"] == [0, len(lengths)] and all(np.array_equal(g, w) for g, w in zip(idx, want[:3]))


def log_losses(stdout):
    """(training lm losses, validation losses, test losses) from the log."""
    lines = stdout.splitlines()
    train = [float(x.split("| lm loss:")[1].split("|")[0]) for x in lines if "| lm loss:" in x]
    valid = [float(x.split("lm loss value:")[1].split("|")[0]) for x in lines
             if "validation loss at iteration" in x and "on test set" not in x]
    test = [float(x.split("lm loss value:")[1].split("|")[0]) for x in lines if "on test set" in x]
    return train, valid, test


def train(exe, extra):
    r = ref.run([exe, "train"] + TINY + extra, expect=None)
    if r.returncode != 0:
        print(f"FAIL: {' '.join(extra)}: exit {r.returncode}\n{r.stdout[-1500:]}\n{r.stderr[-1500:]}")
    return r


def check(label, ok, r=None):
    print(f"{label}  [{'ok' if ok else 'FAIL'}]")
    if not ok and r is not None:
        print(r.stdout[-1500:], r.stderr[-1500:])
    return not ok


def main():
    exe = ref.dagatron()
    failures = 0
    rng = np.random.RandomState(0)
    with tempfile.TemporaryDirectory() as tmp:
        def dataset(name, lengths, lo, hi):
            p = os.path.join(tmp, name)
            ref.write_indexed(p, [[list(rng.randint(lo, hi, size=int(k)))] for k in lengths])
            return p, np.asarray(lengths, dtype=np.int32)

        a, a_len = dataset("a", rng.randint(1, 40, size=60), 0, 100)      # train
        b, b_len = dataset("b", rng.randint(1, 40, size=30), 0, 100)      # a second train dataset
        v, v_len = dataset("v", rng.randint(1, 40, size=12), 100, 200)    # valid
        v2, v2_len = dataset("v2", rng.randint(1, 40, size=12), 200, 256)  # another valid
        t, t_len = dataset("t", rng.randint(1, 40, size=9), 100, 200)     # test
        empty, _ = dataset("empty", [], 0, 1)

        cache = os.path.join(tmp, "c1")
        ckpt = os.path.join(tmp, "ckpt")
        r1 = train(exe, ["--train-data-path", a, "--valid-data-path", v, "--test-data-path", t,
                         "--data-cache-path", cache, "--save", ckpt, "--save-interval", str(ITERS)])
        got = builds(cache)
        tr1, va1, te1 = log_losses(r1.stdout)
        ok = (r1.returncode == 0 and sorted(got) == sorted([("train", a), ("valid", v), ("test", t)])
              and equals_rule(got.get(("train", a)), a_len, WANT["train"])
              and equals_rule(got.get(("valid", v)), v_len, WANT["valid"])
              and equals_rule(got.get(("test", t)), t_len, WANT["test"])
              and len(tr1) == ITERS and len(va1) == ITERS + 1 and len(te1) == 1)
        failures += check(f"per-split paths: built {sorted((s, os.path.basename(p)) for s, p in got)}, each whole "
                          f"and equal to Megatron's rule; losses train {tr1} valid {va1} test {te1}", ok, r1)

        meta = glob.glob(os.path.join(ckpt, "iter_*", "metadata.json"))
        data = json.load(open(meta[0]))["data"] if meta else None
        failures += check(f"the checkpoint records the per-split paths: {data}",
                          data is not None and data["path"] == f"train: {a}; valid: {v}; test: {t}"
                          and data["split"] == "")

        r2 = train(exe, ["--data-path", a, "--split", "100,0,0"])
        tr2, va2, _ = log_losses(r2.stdout)
        failures += check(f"--train-data-path A trains as --data-path A --split 100,0,0: {tr1} == {tr2}",
                          r2.returncode == 0 and tr1 == tr2 and len(tr2) == ITERS and va2 == [], r2)

        r3 = train(exe, ["--train-data-path", a, "--valid-data-path", v2, "--test-data-path", t])
        tr3, va3, te3 = log_losses(r3.stdout)
        failures += check(f"another --valid-data-path: same training {tr3}, other validation {va3} (was {va1}), "
                          f"same test {te3}",
                          r3.returncode == 0 and tr3 == tr1 and te3 == te1 and len(va3) == len(va1)
                          and all(x != y for x, y in zip(va3, va1)), r3)

        r6 = train(exe, ["--split", "90,10,0", "--train-data-path", a, "--valid-data-path", v, "--test-data-path", t])
        tr6, va6, te6 = log_losses(r6.stdout)
        failures += check(f"--split 90,10,0 beside per-split paths: ignored with a note, losses as without it",
                          r6.returncode == 0 and "note: --split 90,10,0 ignored" in r6.stdout
                          and (tr6, va6, te6) == (tr1, va1, te1), r6)

        r4 = train(exe, ["--train-data-path", a])
        tr4, va4, te4 = log_losses(r4.stdout)
        failures += check(f"--train-data-path alone: training {tr4}, no validation {va4}, no test {te4}",
                          r4.returncode == 0 and tr4 == tr1 and va4 == [] and te4 == [], r4)

        cache = os.path.join(tmp, "c5")
        r5 = train(exe, ["--train-data-path", "0.7", a, "0.3", b, "--data-cache-path", cache])
        got = builds(cache)
        asks = [math.ceil(math.ceil(WANT["train"] * w) * 1.005) for w in (0.7, 0.3)]
        ok = (r5.returncode == 0 and sorted(got) == sorted([("train", a), ("train", b)])
              and equals_rule(got.get(("train", a)), a_len, asks[0])
              and equals_rule(got.get(("train", b)), b_len, asks[1])
              and all(math.isfinite(x) for x in log_losses(r5.stdout)[0]))
        failures += check(f"--train-data-path 0.7 A 0.3 B: each asked for {asks} samples of its whole dataset", ok, r5)

        cases = [
            (["--data-path", a, "--train-data-path", a], ["--data-path", "--train-data-path", "exclude"]),
            (["--mock-data", "--vocab-size", "64", "--valid-data-path", v], ["--mock-data", "--valid-data-path"]),
            (["--valid-data-path", v, "--test-data-path", t], ["--valid-data-path", "without --train-data-path"]),
            (["--train-data-path", a, "--valid-data-path", empty], [empty, "--valid-data-path", "no documents"]),
            (["--train-data-path", a, "--test-data-path", "0.5", t, "0.5"], ["--test-data-path", "do not pair up"]),
        ]
        for extra, words in cases:
            failures += not ref.refused([exe, "train"] + TINY + extra, words, label=" ".join(
                os.path.basename(x) if x.startswith(tmp) else x for x in extra))
    ref.finish(failures)


if __name__ == "__main__":
    main()
