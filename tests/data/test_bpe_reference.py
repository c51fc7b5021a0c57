"""The BPE encoder follows GPT-2's algorithm: an independent Python
implementation (GPT-2's pre-tokenizer pattern, built for Python's `re` from
unicodedata's letter/number categories, and rank-ordered merging of the
lowest-ranked pair, written from the algorithm's description) produces the
same ids as `dagatron preprocess --tokenizer-type GPT2BPETokenizer` for every
fortune and for mixed-script, whitespace- and punctuation-heavy strings.
"""
import json
import os
import re
import sys
import tempfile
import unicodedata

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_ref as ref  # noqa: E402

WS = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"


def char_class(prefix):
    out, start, prev = [], None, None
    for cp in range(0x110000):
        ok = unicodedata.category(chr(cp)).startswith(prefix)
        if ok and start is None:
            start = cp
        if not ok and start is not None:
            out.append((start, cp - 1))
            start = None
    return "".join(re.escape(chr(a)) + ("-" + re.escape(chr(b)) if b > a else "") for a, b in out)


def pattern():
    L, N = char_class("L"), char_class("N")
    return re.compile(
        rf"'s|'t|'re|'ve|'m|'ll|'d| ?[{L}]+| ?[{N}]+| ?[^{WS}{L}{N}]+|[{WS}]+(?![^{WS}])|[{WS}]+")


class GPT2:
    def __init__(self, vocab_json, merges_txt):
        self.dec = ref.bpe_decoder(vocab_json)
        self.enc = {v: k for k, v in self.dec.items()}
        lines = open(merges_txt, encoding="utf-8").read().split("\n")[1:]
        inv = {}
        vocab = json.load(open(vocab_json, encoding="utf-8"))
        for tok, i in vocab.items():
            inv[tok] = i
        self.ranks = {}
        for r, line in enumerate(l for l in lines if l):
            a, b = line.split(" ")
            self.ranks[(self.dec[inv[a]], self.dec[inv[b]])] = r
        self.pat = pattern()
        self.cache = {}

    def bpe(self, piece):
        if piece in self.cache:
            return self.cache[piece]
        parts = ref.bpe_merge([bytes([b]) for b in piece], self.ranks)
        ids = [self.enc[p] for p in parts]
        self.cache[piece] = ids
        return ids

    def encode(self, text):
        out = []
        for m in self.pat.finditer(text):
            out.extend(self.bpe(m.group(0).encode("utf-8")))
        return out


EXTRA = [
    "Hello,   world!!  \n\n\n  It's   O'Neil's 'quoted' text; we'll see.\t\ttabs\r\nCRLF",
    "Caf\u00e9 na\u00efve \u00fcber \u2014 \u00e6\u00f8\u00e5 \u0391\u03b8\u03ae\u03bd\u03b1 \u041c\u043e\u0441\u043a\u0432\u0430 "
    "\u6771\u4eac\u90fd \U0001F600\U0001F680 \u0663\u0664\u0665 \u00bd \u2167 x\u00b2",
    "   leading and trailing   ",
    "numbers 3.14159 2,718 1e10 0x1F #42 @user $100 100% a+b=c",
    "\u00a0nbsp\u00a0 and\u3000ideographic space\u2003em",
    # Long pieces (dagatron merges pieces over 64 bytes with a heap).
    "".join("ACGT"[i * 7919 % 13 % 4] for i in range(3000)),
    "ab" * 1500 + " " + "a" * 999 + " the" * 50,
    "1234567890" * 120 + " " + "!?" * 300 + "   " + "\u00e9t\u00e9" * 200,
    " " + "theory" * 300,
]


def main():
    exe = ref.dagatron()
    with tempfile.TemporaryDirectory() as tmp:
        ref.run([exe, "tokenizer", "train", "--vocab-size", "1200", "--output-dir", tmp])
        vocab, merges = os.path.join(tmp, "vocab.json"), os.path.join(tmp, "merges.txt")
        docs = []
        base = "/usr/share/games/fortunes"
        for name in sorted(os.listdir(base)):
            p = os.path.join(base, name)
            if "." in name or os.path.islink(p) or not os.path.isfile(p):
                continue
            text = open(p, "rb").read().decode("utf-8", errors="replace")
            docs.extend(d for d in re.split(r"^%\n", text, flags=re.M) if d)
        docs += EXTRA
        jsonl = os.path.join(tmp, "docs.jsonl")
        with open(jsonl, "w", encoding="utf-8") as f:
            for d in docs:
                f.write(json.dumps({"text": d}) + "\n")
        out = os.path.join(tmp, "out")
        ref.run([exe, "preprocess", "--input", jsonl, "--output-prefix", out, "--tokenizer-type", "GPT2BPETokenizer",
                 "--vocab-file", vocab, "--merge-file", merges, "--workers", "2"])
        _, _, _, doc_idx, seqs = ref.read_indexed(out + "_text_document")
        gpt2 = GPT2(vocab, merges)
        bad = 0
        for k, d in enumerate(docs):
            want = gpt2.encode(d)
            got = [int(t) for t in seqs[k]] if doc_idx[k + 1] > doc_idx[k] else []
            if got != want:
                bad += 1
                if bad <= 3:
                    print(f"MISMATCH doc {k}: {d[:60]!r}\n  dagatron {got[:20]}\n  python   {want[:20]}")
        print(f"{len(docs)} documents: {len(docs) - bad} identical to the Python GPT-2 reference")
        if bad:
            sys.exit("FAIL")
    print("PASS")


if __name__ == "__main__":
    main()
