"""hf_reference.py — an independent Python reference of a Hugging Face
tokenizer.json byte-level BPE, used once to write the expected ids the
tokenizer tests compare dagatron with (make_test_data.py).

Written from the tokenizers library's documented pipeline, sharing no code
with dagatron and using other libraries: Python's `regex` module (Debian
python3-regex, which has \\p{L}/\\p{N} classes) for the pre-tokenizer
regexes, and `unicodedata` for NFC:

  added tokens cut out first (leftmost-longest) -> normalizer (NFC) ->
  pre-tokenizer steps (Split Regex/String with its behavior, Digits,
  ByteLevel with GPT-2's regex and add_prefix_space), each splitting every
  piece of the previous one -> GPT-2 byte-to-unicode mapping -> BPE by merge
  rank (ignore_merges: a piece that is a vocabulary token is that token) ->
  the post-processor's TemplateProcessing "single" special tokens.
"""
import json
import os
import sys
import unicodedata

import regex

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data"))
import megatron_ref  # noqa: E402  (GPT-2 byte characters, BPE merging)

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


class Tokenizer:
    def __init__(self, path):
        if os.path.isdir(path):
            path = os.path.join(path, "tokenizer.json")
        j = json.load(open(path, encoding="utf-8"))
        m = j["model"]
        self.vocab = dict(m["vocab"])
        self.ranks = {}
        for r, mg in enumerate(m["merges"]):
            a, b = mg.split(" ", 1) if isinstance(mg, str) else mg
            self.ranks.setdefault((a, b), r)
        self.ignore_merges = bool(m.get("ignore_merges", False))
        self.added = sorted(((t["content"], t["id"]) for t in j.get("added_tokens") or []), key=lambda x: -len(x[0]))
        self.added_re = regex.compile("|".join(regex.escape(c) for c, _ in self.added)) if self.added else None
        self.added_id = dict(self.added)
        self.nfc = self._normalizer(j.get("normalizer"))
        self.steps = []
        self._pretok(j.get("pre_tokenizer"))
        self.prefix, self.suffix = [], []
        self._post(j.get("post_processor"))
        self.b2u = dict(zip(*megatron_ref.byte_chars()))
        self.cache = {}

    def _normalizer(self, n):
        if not n:
            return False
        if n["type"] == "Sequence":
            return any(self._normalizer(x) for x in n["normalizers"])
        assert n["type"] == "NFC", n["type"]
        return True

    def _pretok(self, p):
        if not p:
            return
        t = p["type"]
        if t == "Sequence":
            for x in p["pretokenizers"]:
                self._pretok(x)
        elif t == "ByteLevel":
            rx = regex.compile(GPT2_PATTERN) if p.get("use_regex", True) else None
            self.steps.append((rx, "Isolated", bool(p.get("add_prefix_space", False))))
        elif t == "Split":
            pat = p["pattern"]
            rx = regex.compile(pat["Regex"]) if "Regex" in pat else regex.compile(regex.escape(pat["String"]))
            self.steps.append((rx, p.get("behavior", "Isolated"), False))
        elif t == "Digits":
            self.steps.append((regex.compile(r"\p{N}" if p.get("individual_digits") else r"\p{N}+"), "Isolated", False))
        else:
            raise ValueError(t)

    def _post(self, p):
        if not p:
            return
        if p["type"] == "Sequence":
            for x in p["processors"]:
                self._post(x)
        elif p["type"] == "TemplateProcessing":
            out = self.prefix
            for item in p["single"]:
                if "Sequence" in item:
                    out = self.suffix
                else:
                    out.extend(p["special_tokens"][item["SpecialToken"]["id"]]["ids"])

    @staticmethod
    def _split(s, rx, behavior):
        out, last = [], 0
        for m in rx.finditer(s):
            b, e = m.span()
            if b == e:
                continue
            if behavior == "Isolated":
                out += [s[last:b], s[b:e]]
                last = e
            elif behavior == "Removed":
                out.append(s[last:b])
                last = e
            elif behavior == "MergedWithPrevious":
                out.append(s[last:e])
                last = e
            elif behavior == "MergedWithNext":
                out.append(s[last:b])
                last = b
        out.append(s[last:])
        return [x for x in out if x]

    def _bpe(self, word):
        if word in self.cache:
            return self.cache[word]
        parts = megatron_ref.bpe_merge(list(word), self.ranks)
        ids = [self.vocab[p] for p in parts]
        self.cache[word] = ids
        return ids

    def _segment(self, s):
        if not s:
            return []
        if self.nfc:
            s = unicodedata.normalize("NFC", s)
        pieces = [s]
        for rx, behavior, prefix_space in self.steps:
            nxt = []
            for p in pieces:
                if prefix_space and not p.startswith(" "):
                    p = " " + p
                nxt += self._split(p, rx, behavior) if rx else [p]
            pieces = nxt
        ids = []
        for p in pieces:
            w = "".join(self.b2u[b] for b in p.encode("utf-8"))
            if self.ignore_merges and w in self.vocab:
                ids.append(self.vocab[w])
            else:
                ids += self._bpe(w)
        return ids

    def encode(self, text):
        ids, last = list(self.prefix), 0
        if self.added_re:
            for m in self.added_re.finditer(text):
                ids += self._segment(text[last:m.start()])
                ids.append(self.added_id[m.group(0)])
                last = m.end()
        ids += self._segment(text[last:])
        return ids + self.suffix
