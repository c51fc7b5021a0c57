"""megatron_ref.py — an independent Python reference for the data tests.

Written from the format and algorithm descriptions (issue 5 and Megatron-Core's
documented semantics), with numpy only; it shares no code with dagatron:

  * write_indexed / read_indexed: Megatron's MMIDIDX .idx + .bin
  * gpt_indices: the document, sample and shuffle indices of GPTDataset
  * blending_indices: BlendedDataset's weighted dataset index
  * split_ranges: the sequence range of each split for --split
  * bpe_decoder: GPT-2's byte decoder for a vocab.json
"""
import os
import subprocess
import sys

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"
DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32, 8: np.uint16}
CODES = {np.dtype(v): k for k, v in DTYPES.items()}


def write_indexed(prefix, documents, dtype=np.uint16):
    """documents: list of documents, each a list of sequences (lists of ints)."""
    dtype = np.dtype(dtype)
    lengths, pointers, doc_idx = [], [], [0]
    offset = 0
    with open(prefix + ".bin", "wb") as f:
        for doc in documents:
            for seq in doc:
                arr = np.asarray(seq, dtype=dtype)
                f.write(arr.tobytes(order="C"))
                lengths.append(len(seq))
                pointers.append(offset)
                offset += arr.nbytes
            doc_idx.append(len(lengths))
    with open(prefix + ".idx", "wb") as f:
        f.write(MAGIC)
        f.write(np.array([1], dtype="<u8").tobytes())
        f.write(np.array([CODES[dtype]], dtype="<u1").tobytes())
        f.write(np.array([len(lengths)], dtype="<u8").tobytes())
        f.write(np.array([len(doc_idx)], dtype="<u8").tobytes())
        f.write(np.array(lengths, dtype="<i4").tobytes())
        f.write(np.array(pointers, dtype="<i8").tobytes())
        f.write(np.array(doc_idx, dtype="<i8").tobytes())


def read_indexed(prefix):
    """Returns (dtype, lengths, pointers, doc_idx, [token arrays per sequence])."""
    idx = open(prefix + ".idx", "rb").read()
    assert idx[:9] == MAGIC, "magic"
    version = np.frombuffer(idx, "<u8", 1, 9)[0]
    assert version == 1, "version"
    dtype = np.dtype(DTYPES[idx[17]])
    n = int(np.frombuffer(idx, "<u8", 1, 18)[0])
    d = int(np.frombuffer(idx, "<u8", 1, 26)[0])
    off = 34
    lengths = np.frombuffer(idx, "<i4", n, off)
    off += 4 * n
    pointers = np.frombuffer(idx, "<i8", n, off)
    off += 8 * n
    doc_idx = np.frombuffer(idx, "<i8", d, off)
    assert off + 8 * d == len(idx), "idx size"
    bin_ = np.memmap(prefix + ".bin", dtype=np.uint8, mode="r")
    seqs = [np.frombuffer(bin_, dtype, int(lengths[i]), int(pointers[i])) for i in range(n)]
    return dtype, lengths, pointers, doc_idx, seqs


def gpt_indices(lengths, begin, end, seq_length, num_samples, seed):
    """GPTDataset indices for the split [begin, end) (add_extra_token, drop last partial)."""
    docs = np.arange(begin, end, dtype=np.int32)
    tokens_per_epoch = int(np.sum(lengths[docs]))
    epochs = 1
    if num_samples is not None:
        tokens = tokens_per_epoch
        while tokens < num_samples * seq_length + 1:
            tokens += tokens_per_epoch
            epochs += 1
    separate = False
    if epochs > 1:
        sans = ((epochs - 1) * tokens_per_epoch - 1) // seq_length
        per_epoch = (tokens_per_epoch - 1) // seq_length
        # Megatron asserts both bounds; a split shorter than one sample has
        # per_epoch 0 and never a separate final epoch.
        assert 0 <= num_samples - sans <= per_epoch + 1
        separate = (num_samples - sans) < int(0.80 * per_epoch)
    rng = np.random.RandomState(seed)

    def doc_index(n_epochs):
        out = np.tile(docs, n_epochs).astype(np.int32)
        rng.shuffle(out)
        return out

    if separate:
        di = np.concatenate([doc_index(epochs - 1), doc_index(1)])
    else:
        di = doc_index(epochs)
    total = (epochs * tokens_per_epoch - 1) // seq_length
    si = np.zeros((total + 1, 2), dtype=np.int64)
    pos, off = 0, 0
    for s in range(1, total + 1):
        remaining = seq_length + 1
        while remaining != 0:
            length = int(lengths[di[pos]]) - off
            remaining -= length
            if remaining <= 0:
                off += remaining + length - 1
                remaining = 0
            else:
                pos += 1
                off = 0
        si[s] = (pos, off)
    first = sans if separate else total
    a = np.arange(0, first, dtype=np.int64)
    rng.shuffle(a)
    b = np.arange(first, total, dtype=np.int64)
    rng.shuffle(b)
    return di, si, np.concatenate([a, b]), epochs, separate


def split_ranges(split, n):
    """--split "a,b,c" over n sequences -> [(begin, end) or None] for train, valid, test.

    The fractions are normalized, their running sums bound the splits, and
    each bound is round(bound * n) (Python's round); a split of zero weight
    is None (not built).
    """
    import re

    w = [float(x) for x in re.findall(r"[.0-9]+", split)]
    w += [0.0] * (3 - len(w))
    w = [x / sum(w) for x in w]
    bounds = [0.0]
    for x in w:
        bounds.append(bounds[-1] + x)
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        out.append(None if hi <= lo else (int(round(lo * float(n))), int(round(hi * float(n)))))
    return out


def blending_indices(weights, size):
    weights = np.asarray(weights, dtype=np.float64)
    weights = weights / weights.sum()
    current = np.zeros(len(weights), dtype=np.int64)
    di = np.zeros(size, dtype=np.int64)
    dsi = np.zeros(size, dtype=np.int64)
    for i in range(size):
        x = max(float(i), 1.0)
        errors = weights * x - current
        k = int(np.argmax(errors))  # first maximum on ties
        di[i] = k
        dsi[i] = current[k]
        current[k] += 1
    return di, dsi


def byte_chars():
    """GPT-2's byte -> character table: (bytes, characters), in GPT-2's id order."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return bs, [chr(c) for c in cs]


def bpe_merge(parts, ranks):
    """BPE over a list of symbols: merge every occurrence (left to right) of
    the adjacent pair with the lowest rank in `ranks` until no pair has one."""
    parts = list(parts)
    while len(parts) > 1:
        ranked = [(ranks[(parts[i], parts[i + 1])], i) for i in range(len(parts) - 1) if (parts[i], parts[i + 1]) in ranks]
        if not ranked:
            break
        i = min(ranked)[1]
        first, second = parts[i], parts[i + 1]
        merged, i = [], 0
        while i < len(parts):
            if i + 1 < len(parts) and parts[i] == first and parts[i + 1] == second:
                merged.append(first + second)
                i += 2
            else:
                merged.append(parts[i])
                i += 1
        parts = merged
    return parts


def bpe_decoder(vocab_json):
    """id -> bytes for a GPT-2 byte-level vocab.json."""
    import json

    bs, cs = byte_chars()
    byte_of = {c: b for b, c in zip(bs, cs)}
    vocab = json.load(open(vocab_json, encoding="utf-8"))
    out = {}
    for tok, i in vocab.items():
        if all(ch in byte_of for ch in tok):
            out[i] = bytes(byte_of[ch] for ch in tok)
        else:
            out[i] = tok.encode("utf-8")
    return out


def dagatron():
    """The CLI under test: $DG_DAGATRON, else $DG_BUILD/dagatron."""
    exe = os.environ.get("DG_DAGATRON") or os.path.join(os.environ.get("DG_BUILD", "."), "dagatron")
    if not os.path.exists(exe):
        sys.exit(f"missing {exe}: build the dagatron target first")
    return exe


def run(args, expect=0):
    p = subprocess.run(args, capture_output=True, text=True)
    if expect is not None and p.returncode != expect:
        sys.exit(f"FAIL: {' '.join(args)} exited {p.returncode}, expected {expect}\nstdout: {p.stdout}\nstderr: {p.stderr}")
    return p


def refused(args, words, label=None, **run_kw):
    """Run args (run_kw go to subprocess.run); True when it was refused as bad
    input should be: exit code 2, nothing on stdout, one line on stderr
    holding every one of `words`. Prints the outcome either way."""
    p = subprocess.run(args, capture_output=True, text=True, **run_kw)
    lines = p.stderr.strip().splitlines()
    ok = p.returncode == 2 and p.stdout == "" and len(lines) == 1 and all(w in lines[0] for w in words)
    if label is None:
        label = " ".join(a if len(a) < 40 else "..." + a[-20:] for a in args[1:])
    print(f"{label}: exit {p.returncode}: {p.stderr.strip()[:300]}  [{'ok' if ok else 'FAIL'}]")
    return ok


def finish(failures):
    """End a test script: exit non-zero when any case failed."""
    if failures:
        sys.exit(f"FAIL: {failures} cases")
    print("PASS")
