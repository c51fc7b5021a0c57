"""Acceptance 2 against an independent reference: dagatron's cached GPT
dataset indices (.npy, read with numpy.load) equal those computed by
megatron_ref.gpt_indices with numpy.random.RandomState, for one epoch,
several epochs with and without a separate final epoch, a sub-range split and
several seeds, and splits with fewer tokens than one sample (their sequences
repeated over many epochs, as Megatron builds them); blending indices equal
the reference for several weightings.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_ref as ref  # noqa: E402

TOOL = os.path.join(os.environ.get("DG_BUILD", "."), "tests", "data", "data_tool")


def main():
    rng = np.random.RandomState(0)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "ds")
        docs = [[list(rng.randint(0, 60000, size=int(rng.randint(0, 300))))] for _ in range(399)]
        # Make the token count 1 (mod 100) so that 100-token samples can end exactly at an epoch.
        short = (1 - sum(len(d[0]) for d in docs)) % 100
        docs.append([list(rng.randint(0, 60000, size=short))])
        ref.write_indexed(prefix, docs, np.uint16)
        lengths = np.array([len(d[0]) for d in docs], dtype=np.int32)
        total = int(lengths.sum())
        per = (total - 1) // 100
        sans2 = (2 * total - 1) // 100
        cases = [
            (100, per, 5, 0, 400),                              # exactly one epoch of tokens
            (100, sans2 + int(0.8 * per) - 1, 11, 0, 400),      # just under the 80% threshold: separate
            (100, sans2 + int(0.8 * per), 11, 0, 400),          # at the threshold: not separate
            # (seq_length, num_samples, seed, begin, end)
            (128, -1, 1234, 0, 400),
            (64, -1, 7, 10, 390),
            (100, (2 * total) // 100 + 5, 1234, 0, 400),        # 3 epochs, separate final epoch
            (100, (3 * total) // 100 - 5, 1234, 0, 400),        # 3 epochs, not separate
            (32, (total * 5) // 32, 42, 0, 400),                # 5+ epochs
            (256, 20, 3, 100, 200),
        ]
        cases = [(prefix, lengths) + c for c in cases]
        # Splits with fewer tokens than one sample (seq_length + 1), from a
        # dataset of short sequences (one of them empty).
        short = os.path.join(tmp, "short")
        short_lengths = np.array([5, 0, 9, 2, 1, 30], dtype=np.int32)
        ref.write_indexed(short, [[list(rng.randint(0, 60000, size=int(k)))] for k in short_lengths], np.uint16)
        cases += [(short, short_lengths) + c for c in [
            (128, 7, 1234, 0, 1),       # one sequence, 5 tokens: 180 epochs
            (16, 3, 99, 0, 3),          # 14 tokens, an empty sequence among them
            (14, 5, 7, 0, 3),           # exactly seq_length tokens: one short of a sample
            (100, 40, 5, 2, 6),         # 42 tokens
            (200, -1, 1234, 0, 6),      # one epoch wanted: no sample at all
            (64, 3, 8, 3, 4),           # 2 tokens per epoch: 97 epochs
            (8, 1, 8, 3, 5),            # 3 tokens
        ]]
        for ds, ds_lengths, L, n, seed, b, e in cases:
            cache = os.path.join(tmp, f"cache_{os.path.basename(ds)}_{L}_{n}_{seed}")
            p = subprocess.run([TOOL, "gpt", ds, str(L), str(n), str(seed), str(b), str(e), cache],
                               capture_output=True, text=True)
            if p.returncode != 0:
                print(f"seq_length={L} num_samples={n} split=[{b},{e}) of {os.path.basename(ds)}: data_tool "
                      f"failed: {p.stderr.strip()}")
                failures += 1
                continue
            base, epochs, separate = p.stdout.split()
            di = np.load(base + "-document_index.npy")
            si = np.load(base + "-sample_index.npy")
            sh = np.load(base + "-shuffle_index.npy")
            rdi, rsi, rsh, repochs, rsep = ref.gpt_indices(ds_lengths, b, e, L, None if n < 0 else n, seed)
            ok = (int(epochs) == repochs and bool(int(separate)) == rsep and np.array_equal(di, rdi)
                  and np.array_equal(si, rsi) and np.array_equal(sh, rsh) and di.dtype == np.int32)
            print(f"{os.path.basename(ds)}: seq_length={L} num_samples={n} seed={seed} split=[{b},{e}): epochs={epochs} "
                  f"separate_final_epoch={separate} samples={len(sh)}: {'same as reference' if ok else 'MISMATCH'}")
            failures += not ok
        for weights, size in [([0.7, 0.3], 1000), ([1, 1, 1], 999), ([0.5, 0.25, 0.125, 0.125], 4321), ([3], 10)]:
            out = os.path.join(tmp, "blend")
            p = subprocess.run([TOOL, "blend", out, str(size)] + [str(w) for w in weights], capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"data_tool blend failed: {p.stderr}")
            di = np.load(out + "-dataset_index.npy")
            dsi = np.load(out + "-dataset_sample_index.npy")
            rdi, rdsi = ref.blending_indices(weights, size)
            ok = np.array_equal(di, rdi) and np.array_equal(dsi, rdsi)
            print(f"blend weights={weights} size={size}: {'same as reference' if ok else 'MISMATCH'}")
            failures += not ok
    if failures:
        sys.exit(f"FAIL: {failures} mismatches")
    print("PASS")


if __name__ == "__main__":
    main()
