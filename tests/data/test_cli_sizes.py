"""Issue 10: the numbers and sizes of `dagatron preprocess` and `dagatron
tokenizer`.

  * Numbers are parsed strictly, as `train` parses them (dg_arg_parse_int):
    `--workers 2x`, `--workers 4294967297`, `--log-interval abc`,
    `--vocab-size 300abc` used to read as 2, 1, 0 and 300 through atoi.
  * Sizes that cannot fit are refused before allocating, with one line
    "needs X GB, this rank has Y GB": `tokenizer train --vocab-size
    2000000000`, a vocab.json id of 1e9, `preprocess --workers 100000`. They
    run under an address-space limit (RLIMIT_AS, `ulimit -v`) that makes the
    allocations fail, so a regression aborts instead of passing. (An
    AddressSanitizer build cannot run under one, as its shadow memory takes
    terabytes of address space: there ASan's own cap on one allocation plays
    that part, and the limit is the machine's memory.)
Every refusal: exit code 2 and one line on stderr.
"""
import json
import os
import resource
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_ref as ref  # noqa: E402

LIMIT = 3 << 30  # bytes of address space for the oversize cases


def limited():
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def confined(exe):
    """subprocess.run arguments under which an allocation of more than LIMIT fails."""
    if b"__asan_init" not in open(exe, "rb").read():
        return dict(preexec_fn=limited)
    env = dict(os.environ)
    opts = f"max_allocation_size_mb={LIMIT >> 20}:allocator_may_return_null=0"
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":" + opts).lstrip(":")
    return dict(env=env)


def main():
    exe = ref.dagatron()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "in.txt")
        open(text, "w").write("hello world\n")
        out = os.path.join(tmp, "out")
        pre = [exe, "preprocess", "--input", text, "--output-prefix", out]
        tok = [exe, "tokenizer", "train", "--output-dir", os.path.join(tmp, "tk")]
        numbers = [
            (pre + ["--workers", "2x"], ["--workers", "'2x'"]),
            (pre + ["--workers", "4294967297"], ["--workers", "4294967297"]),
            (pre + ["--workers", "0"], ["--workers", "[1, "]),
            (pre + ["--workers", ""], ["--workers"]),
            (pre + ["--log-interval", "abc"], ["--log-interval", "'abc'"]),
            (pre + ["--log-interval", "-1"], ["--log-interval"]),
            (tok + ["--vocab-size", "300abc"], ["--vocab-size", "'300abc'"]),
            (tok + ["--vocab-size", "1e3"], ["--vocab-size", "'1e3'"]),
            (tok + ["--vocab-size", "4294967553"], ["--vocab-size", "4294967553"]),
        ]
        for args, words in numbers:
            failures += not ref.refused(args, words)
        # A byte-level vocabulary with one id of 1e9 (the tables are indexed by id).
        vocab = os.path.join(tmp, "vocab.json")
        merges = os.path.join(tmp, "merges.txt")
        dec = {c: i for i, c in enumerate(ref.byte_chars()[1])}
        dec["<|endoftext|>"] = 10 ** 9
        json.dump(dec, open(vocab, "w"))
        open(merges, "w").write("#version: 0.2\n")
        encode = [exe, "tokenizer", "encode", "--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", vocab,
                  "--merge-file", merges, "--text", "hi"]
        oversize = [
            (tok + ["--vocab-size", "2000000000"], ["--vocab-size 2000000000 needs", "GB, this rank has"]),
            (pre + ["--workers", "100000"], ["--workers 100000 needs", "GB, this rank has"]),
        ]
        run_kw = confined(exe)
        if "preexec_fn" in run_kw:
            oversize.append((encode, ["vocab.json: ids up to 1000000000 needs", "GB, this rank has"]))
        else:  # the machine may hold 60 GB: then the id is refused for lying past the vocabulary
            oversize.append((encode, ["vocab.json", "1000000000"]))
        for args, words in oversize:
            failures += not ref.refused(args, words, **run_kw)
        # The same limit leaves ordinary sizes alone.
        r = subprocess.run(pre + ["--workers", "4"], capture_output=True, text=True, **run_kw)
        ok = r.returncode == 0
        print(f"preprocess --workers 4: exit {r.returncode}  [{'ok' if ok else 'FAIL'}]")
        failures += not ok
    ref.finish(failures)


if __name__ == "__main__":
    main()
