"""Acceptance 5 of issue 16: `dagatron train --tensorboard-dir DIR` writes a
TensorBoard event file whose scalars equal the log lines'.

The reader here is independent of dagatron: it implements TensorFlow's record
framing (uint64 length, masked CRC32C of the length, data, masked CRC32C of
the data), CRC32C itself, and the protobuf wire format of tensorflow.Event /
Summary / Summary.Value, from their published descriptions. Every record's
two checksums are verified; a corrupted byte must be detected.
"""
import glob
import math
import os
import re
import struct
import subprocess
import sys
import tempfile

# the MoE architecture this test was written for (Megatron's defaults are a dense GPT)
MOE_ARCH = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common", "moe_arch.flags")).read().split()


def crc32c(data):
    r = 0xFFFFFFFF
    for b in data:
        r ^= b
        for _ in range(8):
            r = (r >> 1) ^ (0x82F63B78 if r & 1 else 0)
    return r ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(blob):
    """The data of each record; raises on bad framing or a checksum mismatch."""
    out, off = [], 0
    while off < len(blob):
        if off + 12 > len(blob):
            raise ValueError(f"truncated header at {off}")
        head = blob[off:off + 8]
        (n,) = struct.unpack("<Q", head)
        (hcrc,) = struct.unpack("<I", blob[off + 8:off + 12])
        if hcrc != masked(head):
            raise ValueError(f"length CRC mismatch at {off}")
        data = blob[off + 12:off + 12 + n]
        if len(data) != n or off + 16 + n > len(blob):
            raise ValueError(f"truncated record at {off}")
        (dcrc,) = struct.unpack("<I", blob[off + 12 + n:off + 16 + n])
        if dcrc != masked(data):
            raise ValueError(f"data CRC mismatch at {off}")
        out.append(data)
        off += 16 + n
    return out


def varint(b, i):
    v, s = 0, 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if not c & 0x80:
            return v, i


def fields(b):
    """protobuf message -> list of (field, wire, value)."""
    i, out = 0, []
    while i < len(b):
        key, i = varint(b, i)
        f, w = key >> 3, key & 7
        if w == 0:
            v, i = varint(b, i)
        elif w == 1:
            v, i = b[i:i + 8], i + 8
        elif w == 5:
            v, i = b[i:i + 4], i + 4
        elif w == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        else:
            raise ValueError(f"wire type {w}")
        out.append((f, w, v))
    return out


def event(data):
    """-> dict(wall_time, step, file_version, scalars=[(tag, value)])."""
    e = {"wall_time": None, "step": 0, "file_version": None, "scalars": []}
    for f, w, v in fields(data):
        if f == 1 and w == 1:
            e["wall_time"] = struct.unpack("<d", v)[0]
        elif f == 2 and w == 0:
            e["step"] = v
        elif f == 3 and w == 2:
            e["file_version"] = v.decode()
        elif f == 5 and w == 2:
            for sf, sw, sv in fields(v):
                assert sf == 1 and sw == 2, "Summary.value"
                tag, val = None, None
                for vf, vw, vv in fields(sv):
                    if vf == 1 and vw == 2:
                        tag = vv.decode()
                    elif vf == 2 and vw == 5:
                        val = struct.unpack("<f", vv)[0]
                e["scalars"].append((tag, val))
    return e


def close(logged, stored):
    """The printed value, known to its last printed digit, equals the stored float32."""
    mant = logged.split("E")[0].split("e")[0]
    decimals = len(mant.split(".")[1]) if "." in mant else 0
    exp = int(logged.split("E")[1]) if "E" in logged else 0
    tol = 0.5 * 10 ** (exp - decimals) * 1.01 + abs(float(logged)) * 2e-7
    return abs(float(logged) - stored) <= tol


def main():
    exe = os.environ.get("DG_DAGATRON") or os.path.join(os.environ.get("DG_BUILD", "."), "dagatron")
    fail = 0
    assert crc32c(b"123456789") == 0xE3069283, "CRC32C check value"  # the standard check vector
    with tempfile.TemporaryDirectory() as tmp:
        tbdir = os.path.join(tmp, "tb", "run1")
        args = [exe, "train"] + MOE_ARCH + ["--mock-data", "--vocab-size", "100", "--num-layers", "2", "--hidden-size", "32",
                "--num-attention-heads", "4", "--seq-length", "16", "--num-experts", "4", "--moe-router-topk", "2",
                "--micro-batch-size", "2", "--global-batch-size", "4", "--train-iters", "6", "--log-interval", "1",
                "--eval-interval", "3", "--eval-iters", "1", "--lr", "3e-3", "--lr-warmup-iters", "2",
                "--tensorboard-dir", tbdir, "--wandb-project", "p", "--wandb-exp-name", "e",
                "--wandb-save-dir", os.path.join(tmp, "wandb"), "--mtp-num-layers", "1"]
        p = subprocess.run(args, capture_output=True, text=True)
        print(p.stdout)
        if p.returncode != 0:
            sys.exit(f"FAIL: train exited {p.returncode}: {p.stderr}")
        if len([l for l in p.stdout.splitlines() if "W&B" in l and "not available" in l]) != 1:
            print("FAIL: no one-line note that W&B is not available"); fail = 1
        files = glob.glob(os.path.join(tbdir, "events.out.tfevents.*"))
        if len(files) != 1:
            sys.exit(f"FAIL: expected one event file in {tbdir}, found {files}")
        blob = open(files[0], "rb").read()
        evs = [event(d) for d in records(blob)]
        if evs[0]["file_version"] != "brain.Event:2":
            print(f"FAIL: first record's file_version is {evs[0]['file_version']!r}"); fail = 1
        by = {}
        for e in evs[1:]:
            assert e["wall_time"] and e["wall_time"] > 1e9, "wall_time"
            for tag, val in e["scalars"]:
                by.setdefault(tag, {})[e["step"]] = val
        print("tags:", sorted(by))
        # The log lines: every field Megatron also writes to TensorBoard.
        num = r"([-+0-9.]+(?:[eE][-+]?[0-9]+)?)"
        checks = {"lm loss": r"lm loss: " + num, "learning-rate": r"learning rate: " + num,
                  "grad-norm": r"grad norm: " + num, "load_balancing_loss": r"load_balancing_loss: " + num,
                  "z_loss": r"z_loss: " + num, "mtp_1 loss": r"mtp_1 loss: " + num}
        # The event file holds each iteration's values, as Megatron's; the
        # log line averages the losses over its window, which for the line
        # after the first starts at the first iteration (Megatron's first
        # line leaves its window open).
        averaged = {"lm loss", "load_balancing_loss", "z_loss", "mtp_1 loss"}
        n_checked, start = 0, None
        for line in p.stdout.splitlines():
            m = re.search(r"iteration\s+(\d+)/\s*\d+", line)
            if not m:
                continue
            it = int(m.group(1))
            window = list(range(start if start else it, it + 1))
            start = it + 1 if start else it  # the first line leaves its window open
            consumed = int(re.search(r"consumed samples:\s+(\d+)", line).group(1))
            for tag, rx in checks.items():
                v = re.search(rx, line)
                if not v:
                    print(f"FAIL: log line of iteration {it} lacks {tag}"); fail = 1; continue
                steps = window if tag in averaged else [it]
                vals = [by.get(tag, {}).get(k) for k in steps]
                got = None if None in vals else sum(vals) / len(vals)
                if got is None or not close(v.group(1), got):
                    print(f"FAIL: {tag} at step {it} (window {steps}): log {v.group(1)}, event file {vals}"); fail = 1
                n_checked += 1
            for tag in ("lm loss", "learning-rate", "grad-norm"):
                if by.get(tag + " vs samples", {}).get(consumed) != by.get(tag, {}).get(it):
                    print(f"FAIL: '{tag} vs samples' at {consumed} differs from '{tag}' at {it}"); fail = 1
            if by.get("batch-size", {}).get(it) != 4.0 or by.get("loss-scale", {}).get(it) != 1.0:
                print(f"FAIL: batch-size / loss-scale at {it}"); fail = 1
        if n_checked != 6 * len(checks):
            print(f"FAIL: checked {n_checked} values, expected {6 * len(checks)}"); fail = 1
        # Evaluations at 3 and 6, and the final one on the validation set at
        # 6 (as Megatron, both written at step 6); the test set's is not a
        # "lm loss validation" scalar.
        vals = re.findall(r"validation loss at iteration\s+(\d+)(?: on validation set)? \| lm loss value: " + num,
                          p.stdout)
        if len(vals) != 3:
            print(f"FAIL: expected 3 validation lines, found {vals}"); fail = 1
        stored = [(e["step"], v) for e in evs[1:] for tag, v in e["scalars"] if tag == "lm loss validation"]
        if len(stored) != len(vals):
            print(f"FAIL: {len(stored)} 'lm loss validation' scalars for {len(vals)} log lines"); fail = 1
        for (it, v), (step, got) in zip(vals, stored):
            if int(it) != step or not close(v, got):
                print(f"FAIL: lm loss validation at {it}: log {v}, event file {got} at step {step}"); fail = 1
        # The reader must notice damage: flip one byte of the last record's data.
        bad = bytearray(blob)
        bad[-6] ^= 0x01
        try:
            records(bytes(bad))
            print("FAIL: a flipped byte was not detected"); fail = 1
        except ValueError as e:
            print("flipped byte detected:", e)
    if fail:
        sys.exit(1)
    print(f"PASS: {len(evs)} records, CRC32C verified, {n_checked} training scalars and "
          f"{len(vals)} validation losses equal the log lines'")


if __name__ == "__main__":
    main()
