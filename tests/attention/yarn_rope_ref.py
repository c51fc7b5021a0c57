#!/usr/bin/python3
"""YaRN rope against PyTorch: mla_ops_dump's rope outputs against Megatron-
Core's formulas (yarn_rotary_pos_embedding.py: the blended frequencies and
the concentration factor; rope_utils._apply_rotary_pos_emb_bshd: rotate-half,
or MLA's de-interleaving with the output re-interleaved), written here from
those definitions in float64. Exits 1 on a mismatch beyond 1e-5 of the
output's scale.

Usage: yarn_rope_ref.py MLA_OPS_DUMP
"""
import math
import subprocess
import sys
import tempfile

import numpy as np
import torch

# (D, rotary dim (0: D), factor, mscale, mscale_all_dim, interleaved, unrounded): mla_ops_dump.c's k_cases
CASES = [(16, 0, 40.0, 1.0, 0.0, 0, 0), (16, 0, 40.0, 1.0, 0.5, 1, 0), (12, 0, 4.0, 0.707, 0.707, 1, 0),
         (16, 8, 1.0, 1.0, 0.0, 1, 0), (16, 0, 32.0, 1.0, 0.0, 0, 1)]
B, S, NH, BASE, ORIG, BETA_FAST, BETA_SLOW = 2, 40, 3, 10000.0, 64, 32.0, 1.0


def get_mscale(scale, m):
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


def inv_freq(dim, factor, unrounded):
    extra = 1.0 / (BASE ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    if factor <= 1:
        return extra
    inter = extra / factor
    corr = lambda rot: dim * math.log(ORIG / (rot * 2 * math.pi)) / (2 * math.log(BASE))
    low, high = corr(BETA_FAST), corr(BETA_SLOW)
    if not unrounded:  # Megatron's correction_range_round_to_int (its default)
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    mask = 1 - ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    return inter * (1 - mask) + extra * mask


def reference(x, D, R, factor, ms, ms_all, inter, unrounded):
    R = R or D
    m = get_mscale(factor, ms) / get_mscale(factor, ms_all) if factor > 1 else 1.0
    freqs = torch.outer(torch.arange(S, dtype=torch.float64), inv_freq(R, factor, unrounded))
    emb = torch.cat([freqs, freqs], -1)[None, :, None, :]
    t, t_pass = x[..., :R], x[..., R:]
    if inter:
        t = torch.cat([t[..., 0::2], t[..., 1::2]], -1)
    h1, h2 = t.chunk(2, -1)
    t = t * (torch.cos(emb) * m) + torch.cat([-h2, h1], -1) * (torch.sin(emb) * m)
    if inter:  # mla_output_remove_interleaving: back to the input's pairs
        h1, h2 = t.chunk(2, -1)
        t = torch.stack([h1, h2], -1).flatten(-2)
    return torch.cat([t, t_pass], -1)


def main():
    with tempfile.NamedTemporaryFile() as f:
        subprocess.run([sys.argv[1], f.name], check=True)
        raw = np.fromfile(f.name, dtype=np.float32)
    off, bad = 0, 0
    for D, R, factor, ms, ms_all, inter, unrounded in CASES:
        n = B * S * NH * D
        x = torch.from_numpy(raw[off:off + n].astype(np.float64)).reshape(B, S, NH, D)
        y = torch.from_numpy(raw[off + n:off + 2 * n].astype(np.float64)).reshape(B, S, NH, D)
        off += 2 * n
        ref = reference(x, D, R, factor, ms, ms_all, inter, unrounded)
        err = (y - ref).abs().max().item() / ref.abs().max().item()
        ok = err <= 1e-5
        bad += not ok
        print("%-4s D %d R %d factor %g mscale %g/%g interleaved %d unrounded %d: max rel err %.2e"
              % ("ok" if ok else "FAIL", D, R, factor, ms, ms_all, inter, unrounded, err))
    if off != raw.size:
        print("FAIL: dump holds %d floats, the cases %d" % (raw.size, off))
        bad += 1
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
