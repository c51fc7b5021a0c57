"""Acceptance 3 through the CLI: `dagatron tokenizer train --vocab-size 4096`
on the fortunes corpus (the default corpus) writes vocab.json + merges.txt;
`dagatron tokenizer eval` finds decode(encode(x)) == x for every fortune and
fewer than 0.35 tokens per byte (the figure is printed). `tokenizer encode`
agrees with the numpy-side decoder of vocab.json.
"""
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_ref as ref  # noqa: E402


def main():
    exe = ref.dagatron()
    with tempfile.TemporaryDirectory() as tmp:
        r = ref.run([exe, "tokenizer", "train", "--vocab-size", "4096", "--output-dir", tmp])
        print(r.stdout.strip())
        vocab, merges = os.path.join(tmp, "vocab.json"), os.path.join(tmp, "merges.txt")
        n_merges = sum(1 for _ in open(merges, encoding="utf-8")) - 1
        assert n_merges == 4096 - 257, n_merges
        r = ref.run([exe, "tokenizer", "eval", "--vocab-file", vocab, "--merge-file", merges])
        print(r.stdout.strip())
        m = re.search(r"([0-9.]+) tokens/byte; round trip exact \(0 mismatches\)", r.stdout)
        assert m, "round trip not exact"
        tpb = float(m.group(1))
        assert tpb < 0.35, f"{tpb} tokens/byte"
        r = ref.run([exe, "tokenizer", "eval"])  # byte-level for comparison
        print(r.stdout.strip())
        text = "The quick brown fox -- isn't it? 42\n\u00e9t\u00e9"
        ids = [int(x) for x in ref.run([exe, "tokenizer", "encode", "--vocab-file", vocab, "--merge-file", merges,
                                        "--text", text]).stdout.split()]
        dec = ref.bpe_decoder(vocab)
        assert b"".join(dec[i] for i in ids) == text.encode("utf-8")
        assert len(ids) < len(text.encode("utf-8"))
        r = ref.run([exe, "tokenizer", "train", "--vocab-size", "100", "--output-dir", tmp], expect=2)
        assert "--vocab-size" in r.stderr
        print(f"PASS: BPE 4096 on fortunes: {tpb:.4f} tokens/byte (< 0.35), round trip exact")


if __name__ == "__main__":
    main()
