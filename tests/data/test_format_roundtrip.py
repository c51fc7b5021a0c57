"""Acceptance 1: tokens written then read are identical, across
implementations.

 1. The numpy reader/writer (megatron_ref.py, written from the format) writes
    datasets of every integer dtype; `dagatron preprocess --inspect P
    --dump-tokens F` reads them and dumps exactly the tokens written.
 2. `dagatron preprocess` writes JSONL and text input (byte-level tokenizer,
    --append-eod); the numpy reader reads .idx/.bin and finds the documents'
    bytes + EOD, uint16 (dtype code 8), pointers and document indices as the
    format says; dagatron reads its own output back identically (--inspect).
 3. A BPE trained by `dagatron tokenizer train`: preprocessing with
    GPT2BPETokenizer, then decoding the .bin with GPT-2's byte decoder over
    vocab.json (numpy side) gives back every document exactly.
 4. --workers 1 and --workers 2 write byte-identical files; two --json-keys
    write two datasets.
"""
import json
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_ref as ref  # noqa: E402

DOCS = [
    "Hello, world!\n",
    "",
    "Caf\u00e9 \u00fcber \u2014 na\u00efve r\u00e9sum\u00e9 \U0001F600\n",
    "line one\nline two\n\n  indented\ttab\n",
    "x" * 5000,
    "Megatron's indexed dataset; 12345 67890.",
]


def dump_tokens(exe, prefix, tmp):
    out = os.path.join(tmp, "dump.bin")
    ref.run([exe, "preprocess", "--inspect", prefix, "--dump-tokens", out])
    return np.fromfile(out, dtype="<i8")


def main():
    exe = ref.dagatron()
    rng = np.random.RandomState(5)
    with tempfile.TemporaryDirectory() as tmp:
        # 1. numpy writes, dagatron reads.
        for dtype, lo, hi in [(np.uint16, 0, 65535), (np.int32, 0, 2**31 - 1), (np.uint8, 0, 255),
                              (np.int8, -128, 127), (np.int16, -32768, 32767), (np.int64, 0, 2**31 - 1)]:
            prefix = os.path.join(tmp, f"np_{np.dtype(dtype).name}")
            docs = [[list(rng.randint(lo, hi, size=int(rng.randint(0, 50)), dtype=np.int64)) for _ in range(int(rng.randint(0, 4)))]
                    for _ in range(60)]
            ref.write_indexed(prefix, docs, dtype)
            want = np.array([t for d in docs for s in d for t in s], dtype=np.int64)
            got = dump_tokens(exe, prefix, tmp)
            info = ref.run([exe, "preprocess", "--inspect", prefix]).stdout
            nseq = sum(len(d) for d in docs)
            assert np.array_equal(got, want), f"{dtype}: tokens differ"
            assert f"{nseq} sequences, {len(docs)} documents, {len(want)} tokens of {np.dtype(dtype).name}" in info, info
            print(f"numpy wrote {np.dtype(dtype).name}, dagatron read {len(want)} identical tokens")

        # 2. dagatron writes (JSONL and text), numpy reads.
        jsonl = os.path.join(tmp, "docs.jsonl")
        with open(jsonl, "w", encoding="utf-8") as f:
            for d in DOCS:
                f.write(json.dumps({"text": d, "title": d[:3]}) + "\n")
        out = os.path.join(tmp, "byte")
        ref.run([exe, "preprocess", "--input", jsonl, "--output-prefix", out, "--append-eod", "--workers", "2"])
        dtype, lengths, pointers, doc_idx, seqs = ref.read_indexed(out + "_text_document")
        assert dtype == np.uint16
        assert open(out + "_text_document.idx", "rb").read()[17] == 8
        nonempty = [d for d in DOCS if d]
        assert len(seqs) == len(nonempty)
        assert list(doc_idx) == [0, 1, 1, 2, 3, 4, 5], list(doc_idx)  # the empty document holds no sequence
        for s, d in zip(seqs, nonempty):
            assert list(s[:-1]) == list(d.encode("utf-8")) and s[-1] == 256
        assert list(pointers) == list(np.concatenate([[0], np.cumsum(lengths[:-1]) * 2]))
        got = dump_tokens(exe, out + "_text_document", tmp)
        assert np.array_equal(got, np.concatenate(seqs).astype(np.int64))
        print("dagatron wrote JSONL (byte-level, --append-eod): numpy read the exact bytes + EOD; dagatron read it back")

        text = os.path.join(tmp, "corpus.txt")
        with open(text, "w", encoding="utf-8") as f:
            f.write("first\n%\nsecond doc\nwith two lines\n%\n%\nthird\n")
        ref.run([exe, "preprocess", "--input", text, "--doc-separator", "%", "--output-prefix", os.path.join(tmp, "txt")])
        _, _, _, doc_idx, seqs = ref.read_indexed(os.path.join(tmp, "txt_text_document"))
        assert [bytes(s.astype(np.uint8)) for s in seqs] == [b"first\n", b"second doc\nwith two lines\n", b"third\n"]
        print("dagatron wrote text with --doc-separator: numpy read 3 documents exactly")

        # 3. BPE round trip through the files.
        tokdir = os.path.join(tmp, "tok")
        ref.run([exe, "tokenizer", "train", "--vocab-size", "600", "--input", jsonl, "--output-dir", tokdir])
        vocab, merges = os.path.join(tokdir, "vocab.json"), os.path.join(tokdir, "merges.txt")
        assert open(merges, encoding="utf-8").readline().startswith("#version")
        dec = ref.bpe_decoder(vocab)
        out = os.path.join(tmp, "bpe")
        ref.run([exe, "preprocess", "--input", jsonl, "--output-prefix", out, "--append-eod", "--tokenizer-type",
                 "GPT2BPETokenizer", "--vocab-file", vocab, "--merge-file", merges])
        _, _, _, _, seqs = ref.read_indexed(out + "_text_document")
        eod = json.load(open(vocab, encoding="utf-8"))["<|endoftext|>"]
        for s, d in zip(seqs, nonempty):
            assert s[-1] == eod
            assert b"".join(dec[int(t)] for t in s[:-1]) == d.encode("utf-8")
        print("GPT2BPETokenizer: numpy decoded every document exactly through vocab.json")

        # 4. Workers do not change the output; several keys.
        for w in (1, 2):
            ref.run([exe, "preprocess", "--input", jsonl, "--output-prefix", os.path.join(tmp, f"w{w}"), "--append-eod",
                     "--workers", str(w), "--json-keys", "text", "title"])
        for key in ("text", "title"):
            for ext in (".bin", ".idx"):
                a = open(os.path.join(tmp, f"w1_{key}_document{ext}"), "rb").read()
                b = open(os.path.join(tmp, f"w2_{key}_document{ext}"), "rb").read()
                assert a == b, f"--workers changed {key}{ext}"
        _, _, _, _, seqs = ref.read_indexed(os.path.join(tmp, "w1_title_document"))
        assert [bytes(s[:-1].astype(np.uint8)) for s in seqs] == [d[:3].encode() for d in nonempty]
        print("--workers 1 and 2 wrote identical files; --json-keys text title wrote both datasets")
    print("PASS")


if __name__ == "__main__":
    main()
