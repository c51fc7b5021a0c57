#!/usr/bin/env python3
"""run_examples.py — issue 16, acceptance 1: each flag set of
examples.flags (Megatron-LM's own example scripts, sizes shrunk) runs in
`dagatron train` with no "unknown flag" error.

For each set: the test corpus is preprocessed with the set's tokenizer
(${DATA_PATH}), the placeholders are filled in, and the set runs to its last
iteration. A flag dagatron refuses must be refused as "not supported" (exit
2, one line naming it) and be listed in docs/megatron_compat.md; the test
then drops it (with its values) and runs again, until the set trains. Any
other failure, or an "unknown flag", fails the test. A set whose header says
`refuses=FLAG,...` (or `refuses=none`) may have those flags refused and no
other: the sets dagatron runs whole stay whole (a regression fails).
"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(SRC, "tests", "tokenizer", "corpus.jsonl")
DOCS = open(os.path.join(SRC, "docs", "megatron_compat.md"), encoding="utf-8").read()


def read_sets(path):
    sets, cur = [], None
    for raw in open(path, encoding="utf-8"):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"\[([^\]]+)\]\s*(.*)", line)
        if m:
            cur = {"name": m.group(1), "lines": []}
            cur.update(dict(kv.split("=", 1) for kv in m.group(2).split()))
            sets.append(cur)
        else:
            cur["lines"].append(line)
    return sets


def make_corpus(path, docs=40000):
    """The tokenizer test corpus cut into `docs` short documents: enough that
    every split of the examples' --split (99990,8,2 and the like) holds a few
    (Megatron's split gives whole documents)."""
    text = " ".join(json.loads(l)["text"] for l in open(CORPUS, encoding="utf-8"))
    with open(path, "w", encoding="utf-8") as f:
        for i in range(docs):
            start = (i * 211) % (len(text) - 200)
            f.write(json.dumps({"text": text[start:start + 200]}) + "\n")


def flag_value(args, flag):
    return args[args.index(flag) + 1] if flag in args else None


def gpt2_files(tmp):
    """vocab.json and merges.txt (GPT2BPETokenizer's files) from the test tokenizer.json."""
    tj = json.load(open(os.path.join(SRC, "tests", "tokenizer", "gpt2", "tokenizer.json"), encoding="utf-8"))
    vocab, merges = os.path.join(tmp, "vocab.json"), os.path.join(tmp, "merges.txt")
    json.dump(tj["model"]["vocab"], open(vocab, "w", encoding="utf-8"))
    with open(merges, "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for m in tj["model"]["merges"]:
            f.write((m if isinstance(m, str) else " ".join(m)) + "\n")
    return vocab, merges


def drop(args, flag):
    """args without the first `flag` and the values after it."""
    i = args.index(flag)
    j = i + 1
    while j < len(args) and not args[j].startswith("--"):
        j += 1
    return args[:i] + args[j:]


def run_set(exe, mpirun, tmp, s, subst, corpus):
    words = []
    for line in s["lines"]:
        for k, v in subst.items():
            line = line.replace("${%s}" % k, v)
        words += shlex.split(line)
    # the data: the corpus preprocessed with this set's tokenizer (none named:
    # pretrain_gpt.py's default, GPT2BPETokenizer)
    typ = flag_value(words, "--tokenizer-type") or "GPT2BPETokenizer"
    pre = [exe, "preprocess", "--input", corpus, "--output-prefix", os.path.join(tmp, "corpus"),
           "--tokenizer-type", typ, "--append-eod", "--workers", "2"]
    for f in ("--tokenizer-model", "--vocab-file", "--merge-file"):
        if flag_value(words, f):
            pre += [f, flag_value(words, f)]
    p = subprocess.run(pre, capture_output=True, text=True)
    if p.returncode != 0:
        return ["preprocess with %s failed: %s" % (typ, p.stderr.strip())], []
    np_ = int(s.get("np", "1"))
    cmd = (shlex.split(mpirun) + ["-np", str(np_)] if np_ > 1 else []) + [exe, "train"]
    refused, problems = [], []
    for _ in range(len(words)):
        p = subprocess.run(cmd + words, capture_output=True, text=True)
        err = "\n".join(l for l in p.stderr.splitlines() if l.startswith("dagatron"))
        if p.returncode == 0:
            # the last iteration is logged only at a multiple of --log-interval
            # (Megatron's rule); the summary line says how many ran, after
            # the iteration an upcycling run starts at (it saves the
            # upcycled model as iteration 1)
            iters = re.findall(r"\] iteration\s+(\d+)/\s*(\d+) \|", p.stdout)
            done = re.search(r"dagatron train: done: (\d+) iterations", p.stdout)
            start = 1 if "upcycled checkpoint saved to" in p.stdout else 0
            if not iters or not done or int(done.group(1)) + start != int(iters[-1][1]):
                problems.append("ran but did not reach its last iteration:\n" + p.stdout[-2000:])
            return problems, refused
        if "unknown flag" in err:
            return ["unknown flag: " + err], refused
        m = re.search(r"^dagatron: (--[a-z0-9-]+)[^\n]*not supported", err, re.M)
        if p.returncode != 2 or not m or m.group(1) not in words:
            return ["exit %d, not a 'not supported' refusal of one of its flags: %s\n%s" %
                    (p.returncode, err or p.stderr[-2000:], p.stdout[-1500:])], refused
        flag = m.group(1)
        if not re.search(r"`%s[`\s]" % re.escape(flag), DOCS):
            problems.append("%s is refused but not listed in docs/megatron_compat.md" % flag)
        refused.append(flag)
        words = drop(words, flag)
    return problems + ["did not converge"], refused


def main():
    exe = os.environ.get("DG_DAGATRON") or os.path.join(os.environ.get("DG_BUILD", "."), "dagatron")
    mpirun = os.environ.get("DG_MPIRUN", "mpirun --allow-run-as-root --oversubscribe")
    only = sys.argv[1:]
    sets = read_sets(os.path.join(HERE, "examples.flags"))
    fail = 0
    all_flags, all_refused = set(), set()
    top = tempfile.TemporaryDirectory()
    corpus = os.path.join(top.name, "corpus.jsonl")
    make_corpus(corpus)
    for s in sets:
        if only and s["name"] not in only:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            vocab, merges = gpt2_files(tmp)
            subst = {"CHECKPOINT_PATH": os.path.join(tmp, "ckpt"), "TENSORBOARD_LOGS_PATH": os.path.join(tmp, "tb"),
                     "DATA_PATH": os.path.join(tmp, "corpus_text_document"),
                     "TOKENIZER_MODEL": os.path.join(SRC, s["tokenizer"]), "VOCAB_FILE": vocab,
                     "MERGE_FILE": merges, "DATA_CACHE_PATH": os.path.join(tmp, "cache")}
            flags = {w for l in s["lines"] for w in shlex.split(l) if w.startswith("--")}
            all_flags |= flags
            problems, refused = run_set(exe, mpirun, tmp, s, subst, corpus)
            all_refused |= set(refused)
            if "refuses" in s:
                allowed = set(s["refuses"].split(",")) - {"none"}
                extra = sorted(set(refused) - allowed)
                if extra:
                    problems.append("refused %s; the set's header allows only: %s" %
                                    (" ".join(extra), s["refuses"]))
            if problems:
                fail = 1
                for p in problems:
                    print("FAIL: %s (%s): %s" % (s["name"], s["source"], p))
            else:
                print("ok: %s (%s): %d flags, trained; refused as not supported (listed in the docs): %s" %
                      (s["name"], s["source"], len(flags), " ".join(refused) or "none"))
    print("%d distinct flags over the sets, %d accepted, %d refused as not supported" %
          (len(all_flags), len(all_flags - all_refused), len(all_refused)))
    sys.exit(1 if fail else 0)


if __name__ == "__main__":
    main()
