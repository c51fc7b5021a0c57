#!/usr/bin/env python3
"""tokenizer_ids.py — the generation ids an export should carry, read from
the tokenizer's own files without dagatron (issue 25, item 2): prints
"BOS EOS".

  bpe VOCAB_JSON     GPT-2 BPE (Megatron's GPT2BPETokenizer): eos is
                     <|endoftext|>; GPT-2 has no other BOS, Hugging Face's
                     GPT-2 tokenizer uses <|endoftext|> for both
  hf PATH            a tokenizer.json (or its directory): eos is
                     tokenizer_config.json's eos_token beside it, else
                     <|endoftext|>; bos its bos_token, else (null or no
                     file) the eos
  sp MODEL           a SentencePiece tokenizer.model: its TrainerSpec's
                     bos_id (field 41, default 1) and eos_id (field 42,
                     default 2), read from the protobuf by hand (Debian has
                     no sentencepiece module)
  byte               byte-level: ids 0..255 are the bytes, the end of
                     document is the next id; no BOS
"""
import json
import os
import sys

EOT = "<|endoftext|>"


def bpe(vocab_json):
    eos = json.load(open(vocab_json, encoding="utf-8"))[EOT]
    return eos, eos


def hf(path):
    tok_json = os.path.join(path, "tokenizer.json") if os.path.isdir(path) else path
    t = json.load(open(tok_json, encoding="utf-8"))
    ids = dict(t["model"]["vocab"])
    ids.update({a["content"]: a["id"] for a in t.get("added_tokens", [])})
    cfg_path = os.path.join(os.path.dirname(tok_json), "tokenizer_config.json")
    cfg = json.load(open(cfg_path, encoding="utf-8")) if os.path.exists(cfg_path) else {}

    def content(v):
        return v.get("content") if isinstance(v, dict) else v

    eos = ids[content(cfg.get("eos_token")) or EOT]
    bos_text = content(cfg.get("bos_token"))
    return (ids[bos_text] if bos_text else eos), eos


def varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def fields(b):
    """(field number, wire type, value) of a protobuf message."""
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(b, i)
        elif wire == 1:
            v, i = b[i:i + 8], i + 8
        elif wire == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif wire == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire}")
        yield num, wire, v


def sp(model):
    bos, eos = 1, 2  # TrainerSpec's defaults
    for num, wire, v in fields(open(model, "rb").read()):
        if num == 2 and wire == 2:  # ModelProto.trainer_spec
            for n, w, x in fields(v):
                x = x - (1 << 64) if w == 0 and x >= 1 << 63 else x  # int32 -1 is a 10-byte varint
                if n == 41:
                    bos = x
                elif n == 42:
                    eos = x
    return bos, eos


def main():
    kind = sys.argv[1]
    if kind == "byte":
        bos, eos = 256, 256
    else:
        bos, eos = {"bpe": bpe, "hf": hf, "sp": sp}[kind](sys.argv[2])
    print(bos, eos)


if __name__ == "__main__":
    main()
