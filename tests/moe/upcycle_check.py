#!/usr/bin/python3
"""upcycle_check.py DENSE MOE G TOPK PRE_SOFTMAX — the upcycled checkpoint
MOE (its latest iteration) is the dense checkpoint DENSE upcycled as
Megatron-LM's megatron/core/transformer/moe/upcycling_utils.py does it, with
granularity G: re-derived here from that file's steps (numpy, not
dagatron's code):
  - every tensor the dense model has is copied unchanged;
  - each MoE layer's experts: the dense fc1 (and its bias) scaled by s,
    SwiGLU's gate and linear halves each cut into G slices, expert e taking
    slice e % G of both (the slices listed once per E / G); fc2 scaled by s
    and cut into G column slices alike; fc2's bias copied into every
    expert; s = a^(1/3) for a GLU, a^(1/2) otherwise, a = E G / topk with
    PRE_SOFTMAX (1), G without;
  - the router: rows in groups of G equal (row e is row e // G of the MoE
    model's own init), the groups' rows not all equal;
  - the shared experts are there (they keep their own init).
Exits 1 on a difference or a missing tensor."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ep"))
from ckpt_params_close import load  # noqa: E402  (the checkpoint reader the EP tests use)


def experts(fc1, fc2, b1, b2, E, G, topk, pre_softmax, gated):
    expansion = E // G
    act = (expansion * G * G) / topk if pre_softmax else G
    scale = np.float32(act ** (1.0 / 3.0) if gated else act ** 0.5)

    def split_fc1(p):
        p = p * scale
        if gated:
            gate, lin = np.split(p, 2, axis=0)
            gs, ls = np.array_split(gate, G, axis=0), np.array_split(lin, G, axis=0)
            parts = [np.concatenate([gs[i], ls[i]], axis=0) for i in range(G)]
        else:
            parts = np.array_split(p, G, axis=0)
        return np.stack(parts * expansion)

    out = {"linear_fc1.weight": split_fc1(fc1),
           "linear_fc2.weight": np.stack(np.array_split(fc2 * scale, G, axis=1) * expansion)}
    if b1 is not None:
        out["linear_fc1.bias"] = split_fc1(b1)
    if b2 is not None:
        out["linear_fc2.bias"] = np.tile(b2, (E, 1))
    return out


def main():
    _, dense = load(sys.argv[1])
    it, moe = load(sys.argv[2])
    G, topk, pre = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]) == 1
    bad, checked = 0, 0

    def fail(msg):
        nonlocal bad
        print("FAIL: " + msg)
        bad += 1

    if it != 1:
        fail("the upcycled checkpoint is at iteration %d, expected 1" % it)
    for name, d in dense.items():
        if ".mlp.linear_fc" in name and name.replace(".mlp.", ".mlp.experts.") in moe:
            continue  # an MoE layer's dense MLP: its experts are checked below
        if name not in moe:
            fail("%s of the dense model is missing" % name)
        elif not np.array_equal(moe[name], d):
            fail("%s differs from the dense model's" % name)
        checked += 1
    layers = sorted({n.split(".mlp.experts.")[0] for n in moe if ".mlp.experts." in n})
    for pre_name in layers:
        w1 = dense[pre_name + ".mlp.linear_fc1.weight"]
        E = moe[pre_name + ".mlp.experts.linear_fc1.weight"].shape[0]
        F = moe[pre_name + ".mlp.experts.linear_fc2.weight"].shape[2]
        gated = w1.shape[0] == 2 * F * G
        want = experts(w1, dense[pre_name + ".mlp.linear_fc2.weight"], dense.get(pre_name + ".mlp.linear_fc1.bias"),
                       dense.get(pre_name + ".mlp.linear_fc2.bias"), E, G, topk, pre, gated)
        for k, v in want.items():
            got = moe.get(pre_name + ".mlp.experts." + k)
            if got is None or got.shape != v.shape or not np.array_equal(got, v):
                fail("%s.mlp.experts.%s is not the dense MLP upcycled (%s vs %s)" %
                     (pre_name, k, None if got is None else got.shape, v.shape))
            checked += 1
        r = moe[pre_name + ".mlp.router.weight"]
        if any(not np.array_equal(r[e], r[(e // G) * G]) for e in range(E)):
            fail("%s.mlp.router.weight: rows are not equal in groups of %d" % (pre_name, G))
        if E // G > 1 and np.array_equal(r[0], r[G]):
            fail("%s.mlp.router.weight: the groups' rows are all equal" % pre_name)
        checked += 1
    if not layers:
        fail("no MoE layer in %s" % sys.argv[2])
    print("upcycled checkpoint: %d MoE layers, %d tensors checked against the dense model (granularity %d)" %
          (len(layers), checked, G))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
