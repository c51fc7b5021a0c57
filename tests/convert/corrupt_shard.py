#!/usr/bin/python3
"""corrupt_shard.py HOW FILE — edit a safetensors file for the import tests.
header: a header length past the end of the file; truncate: the last 100
bytes cut off; shape: the first 2-D tensor's shape transposed (same bytes,
same header length); missing: the file removed; strip_prefix (not a
corruption): names without GPT-2's "transformer." prefix, as Transformers'
own GPT-2 files have them."""
import json
import os
import struct
import sys

how, path = sys.argv[1], sys.argv[2]
raw = open(path, "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
if how == "header":
    raw = struct.pack("<Q", len(raw) * 2) + raw[8:]
elif how == "truncate":
    raw = raw[:-100]
elif how == "shape":
    h = json.loads(raw[8:8 + n])
    name = next(k for k, e in h.items() if k != "__metadata__" and len(e["shape"]) == 2 and e["shape"][0] != e["shape"][1])
    h[name]["shape"] = h[name]["shape"][::-1]
    text = json.dumps(h, separators=(",", ":")).encode()
    assert len(text) <= n
    raw = raw[:8] + text + b" " * (n - len(text)) + raw[8 + n:]
elif how == "strip_prefix":
    h = json.loads(raw[8:8 + n])
    h = {(k[12:] if k.startswith("transformer.") else k): e for k, e in h.items()}
    text = json.dumps(h, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    raw = struct.pack("<Q", len(text)) + text + raw[8 + n:]
elif how == "missing":
    os.remove(path)
    sys.exit(0)
open(path, "wb").write(raw)
