"""Acceptance 6 of issue 16: HuggingFaceTokenizer (GPT-2, Qwen2.5 and
Llama-3 forms of tokenizer.json), Llama2Tokenizer / SentencePieceTokenizer
and NullTokenizer through `dagatron preprocess`.

  ids    preprocess corpus.jsonl with --append-eod under each tokenizer and
         read the .bin/.idx back (tests/data/megatron_ref.py's reader): every
         document's ids equal expected_ids.json (written once by
         make_test_data.py with hf_reference.py and python3-sentencepiece)
         followed by the tokenizer's end-of-document id (Megatron's: the eos
         token); `tokenizer encode` agrees on one document.
  train  `dagatron train` runs two iterations on each preprocessed dataset,
         with the vocabulary the tokenizer gives (padded to 128).
  variants  tokenizer.json variants built at test time (Split behaviors
         Removed / MergedWithPrevious / MergedWithNext, String patterns,
         Digits, ByteLevel add_prefix_space, NFC in a Sequence, ignore_merges)
         encode the corpus as hf_reference.py does, run live (python3-regex).
  bad    wrong files and unsupported tokenizer.json parts exit 2 with one
         line naming the flag or the part.
  null   NullTokenizer and mock data by Megatron's rule: --vocab-size N is
         N + 1 ids with EOD N, padded from N + 1 (128 at 128 pads to 256),
         as the checkpoint records (issue 25).
"""
import json
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "data"))
sys.path.insert(0, HERE)
import megatron_ref as ref  # noqa: E402

# the MoE architecture this test was written for (Megatron's defaults are a dense GPT)
MOE_ARCH = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common", "moe_arch.flags")).read().split()

CORPUS = os.path.join(HERE, "corpus.jsonl")
TOKENIZERS = {  # name -> (--tokenizer-type, --tokenizer-model)
    "gpt2": ("HuggingFaceTokenizer", os.path.join(HERE, "gpt2", "tokenizer.json")),  # a file
    "qwen": ("HFTokenizer", os.path.join(HERE, "qwen")),  # a folder, Megatron's older spelling
    "llama3": ("HuggingFaceTokenizer", os.path.join(HERE, "llama3")),
    "sp": ("Llama2Tokenizer", os.path.join(HERE, "sp", "tokenizer.model")),
}


def preprocess(exe, tmp, name, typ, model, extra=(), corpus=CORPUS):
    prefix = os.path.join(tmp, name)
    args = [exe, "preprocess", "--input", corpus, "--output-prefix", prefix, "--tokenizer-type", typ,
            "--append-eod", "--workers", "2"]
    if model:
        args += ["--tokenizer-model", model]
    ref.run(args + list(extra))
    return prefix + "_text_document"


def check_ids(exe, tmp):
    expected = json.load(open(os.path.join(HERE, "expected_ids.json")))
    fail = 0
    for name, (typ, model) in TOKENIZERS.items():
        e = expected[name]
        docs = [list(map(int, s)) for s in ref.read_indexed(preprocess(exe, tmp, name, typ, model))[4]]
        want = [ids + [e["eod"]] for ids in e["ids"]]
        bad = [i for i, (a, b) in enumerate(zip(docs, want)) if a != b]
        if len(docs) != len(want) or bad:
            i = bad[0] if bad else 0
            print(f"FAIL: {name}: {len(bad)} of {len(want)} documents differ; document {i}:\n"
                  f"  dagatron {docs[i] if i < len(docs) else None}\n  expected {want[i]}")
            fail = 1
        else:
            print(f"ok: {name} ({typ}): {len(docs)} documents, {sum(map(len, docs))} tokens equal the reference")
        text = json.loads(open(CORPUS, encoding="utf-8").readlines()[14])["text"]
        out = ref.run([exe, "tokenizer", "encode", "--tokenizer-type", typ, "--tokenizer-model", model,
                       "--text", text]).stdout.split()
        if list(map(int, out)) != e["ids"][14]:
            print(f"FAIL: {name}: tokenizer encode differs on document 14"); fail = 1
    # NullTokenizer: ids are the text's integers; Megatron's EOD is --vocab-size itself.
    nums = os.path.join(tmp, "nums.jsonl")
    with open(nums, "w") as f:
        f.write('{"text": "1 2 3 40"}\n{"text": "7  8\\n9"}\n')
    docs = [list(map(int, s)) for s in ref.read_indexed(
        preprocess(exe, tmp, "null", "NullTokenizer", None, ["--vocab-size", "50"], nums))[4]]
    if docs != [[1, 2, 3, 40, 50], [7, 8, 9, 50]]:
        print(f"FAIL: NullTokenizer --vocab-size 50: {docs}"); fail = 1
    else:
        print("ok: NullTokenizer: the text's ids, EOD 50 = --vocab-size")
    return fail


def train(exe, prefix, typ, model, extra=()):
    args = [exe, "train"] + MOE_ARCH + ["--data-path", prefix, "--tokenizer-type", typ, "--split", "100,0,0", "--eval-iters", "0",
            "--num-layers", "1", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
            "--num-experts", "2", "--moe-router-topk", "1", "--micro-batch-size", "2", "--global-batch-size", "2",
            "--train-iters", "2", "--log-interval", "1", "--lr", "1e-3"]
    if model:
        args += ["--tokenizer-model", model]
    return ref.run(args + list(extra)).stdout


def check_train(exe, tmp):
    expected = json.load(open(os.path.join(HERE, "expected_ids.json")))
    fail = 0
    runs = dict(TOKENIZERS)
    for name, (typ, model) in runs.items():
        out = train(exe, preprocess(exe, tmp, name, typ, model), typ, model)
        padded = (expected[name]["vocab_size"] + 127) // 128 * 128
        iters = re.findall(r"iteration\s+(\d+)/\s*2 .*lm loss: ([0-9.E+-]+)", out)
        if len(iters) != 2 or f"vocabulary {padded} (padded)" not in out:
            print(f"FAIL: {name}: expected 2 iterations with vocabulary {padded}:\n{out}"); fail = 1
        else:
            print(f"ok: {name}: trained 2 iterations, vocabulary {padded}, lm loss {iters[-1][1]}")
    nums = os.path.join(tmp, "nums.jsonl")
    with open(nums, "w") as f:
        for i in range(20):
            f.write(json.dumps({"text": " ".join(str((i * 7 + k) % 100) for k in range(30))}) + "\n")
    out = train(exe, preprocess(exe, tmp, "null", "NullTokenizer", None, ["--vocab-size", "100"], nums),
                "NullTokenizer", None, ["--vocab-size", "100"])
    if "vocabulary 128 (padded)" not in out or len(re.findall(r"iteration\s+\d+/", out)) != 2:
        print(f"FAIL: NullTokenizer training:\n{out}"); fail = 1
    else:
        print("ok: NullTokenizer --vocab-size 100: trained 2 iterations, vocabulary 128")
    return fail


def megatron_null_padded(n, divisible_by, tp=1):
    """Megatron: _NullTokenizer(n).vocab_size is n + 1 (the ids and the EOD n),
    then _vocab_size_with_padding rounds it up to divisible_by x tp."""
    multiple = divisible_by * tp
    return -(-(n + 1) // multiple) * multiple


def check_null(exe, tmp):
    """Issue 25, item 1: --vocab-size N with NullTokenizer (named, or mock data)
    is N ids before the end of document: N + 1 ids, EOD N, padded from N + 1;
    the checkpoint records both; a dataset holding the EOD N trains."""
    fail = 0
    tiny = ["--num-layers", "1", "--hidden-size", "32", "--num-attention-heads", "2", "--seq-length", "16",
            "--micro-batch-size", "1", "--global-batch-size", "1", "--train-iters", "1", "--eval-iters", "0"]
    nums = os.path.join(tmp, "nums.jsonl")
    with open(nums, "w") as f:  # every id below 128; --append-eod adds 128
        for i in range(20):
            f.write(json.dumps({"text": " ".join(str((i * 7 + k) % 128) for k in range(30))}) + "\n")
    data = preprocess(exe, tmp, "null128", "NullTokenizer", None, ["--vocab-size", "128"], nums)
    eods = sorted({d[-1] for d in map(list, ref.read_indexed(data)[4])})
    cases = [(n, d, ["--mock-data"]) for n, d in ((128, 128), (127, 128), (100, 128), (255, 64), (256, 64),
                                                  (50256, 128))]
    cases.append((128, 128, ["--tokenizer-type", "NullTokenizer", "--data-path", data, "--split", "100,0,0"]))
    for n, div, src in cases:
        ckpt = os.path.join(tmp, f"null_{n}_{div}_{len(src)}")
        out = ref.run([exe, "train"] + src + ["--vocab-size", str(n), "--make-vocab-size-divisible-by", str(div),
                                              "--save", ckpt] + tiny).stdout
        padded = megatron_null_padded(n, div)
        m = re.search(r"vocabulary (\d+) \(padded\)", out)
        meta = json.load(open(os.path.join(ckpt, "iter_0000001", "metadata.json")))["tokenizer"]
        ok = m and int(m.group(1)) == padded and meta.get("vocab_size") == n + 1 and meta.get("eod") == n
        what = f"{'--mock-data' if src[0] == '--mock-data' else 'NullTokenizer data'} --vocab-size {n} " \
               f"--make-vocab-size-divisible-by {div}"
        if not ok:
            print(f"FAIL: {what}: expected vocabulary {padded} (padded) and tokenizer ids {n + 1}, eod {n}; "
                  f"got {m.group(0) if m else None}, checkpoint tokenizer {meta}"); fail = 1
        else:
            print(f"ok: {what}: {n + 1} ids, EOD {n}, vocabulary {padded} (Megatron: {n} + 1 padded)")
    if eods != [128]:
        print(f"FAIL: preprocess --vocab-size 128 ended documents with {eods}, Megatron's EOD is 128"); fail = 1
    return fail


def check_bad(exe, tmp):
    fail = 0
    out = os.path.join(tmp, "x")

    def bad(args, want):
        nonlocal fail
        if not ref.refused([exe, "preprocess", "--input", CORPUS, "--output-prefix", out] + args, [want]):
            fail = 1

    bad(["--tokenizer-type", "HuggingFaceTokenizer"], "needs --tokenizer-model")
    bad(["--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", os.path.join(tmp, "none")],
        "--tokenizer-model: " + os.path.join(tmp, "none") + ": cannot open")
    bad(["--tokenizer-type", "SentencePieceTokenizer", "--tokenizer-model", CORPUS], "not a SentencePiece model")
    bad(["--tokenizer-type", "NullTokenizer"], "--vocab-size")
    bad(["--tokenizer-type", "NoSuchTokenizer"], "unknown 'NoSuchTokenizer'")
    j = json.load(open(os.path.join(HERE, "gpt2", "tokenizer.json"), encoding="utf-8"))
    cases = [("pre_tokenizer", {"type": "Metaspace", "replacement": "\u2581"}, "pre_tokenizer 'Metaspace'"),
             ("normalizer", {"type": "NFKC"}, "normalizer 'NFKC'"),
             ("pre_tokenizer", {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"},
              "pre_tokenizer pattern"),
             ("model", dict(j["model"], type="WordPiece"), "model type 'WordPiece'"),
             ("model", dict(j["model"], merges=j["model"]["merges"] + ["zzz qqq"]), "model.merges[")]
    for key, value, want in cases:
        broken = dict(j)
        broken[key] = value
        path = os.path.join(tmp, "broken.json")
        json.dump(broken, open(path, "w", encoding="utf-8"))
        bad(["--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", path], want)
    # Without tokenizer_config.json and without <|endoftext|>, there is no EOD to append.
    broken = dict(j, added_tokens=[])
    broken["model"] = dict(j["model"], vocab={k: v for k, v in j["model"]["vocab"].items() if k != "<|endoftext|>"})
    json.dump(broken, open(os.path.join(tmp, "noeos.json"), "w", encoding="utf-8"))
    bad(["--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", os.path.join(tmp, "noeos.json"),
         "--append-eod"], "--append-eod")
    return fail


def check_variants(exe, tmp):
    import hf_reference

    j = json.load(open(os.path.join(HERE, "gpt2", "tokenizer.json"), encoding="utf-8"))
    bl = lambda prefix, regex: {"type": "ByteLevel", "add_prefix_space": prefix, "use_regex": regex}
    split = lambda kind, pat, behavior: {"type": "Split", "pattern": {kind: pat}, "behavior": behavior,
                                         "invert": False}
    seq = lambda *steps: {"type": "Sequence", "pretokenizers": list(steps)}
    variants = {
        "digits+prefix": (seq({"type": "Digits", "individual_digits": True}, bl(True, True)), None, False),
        "removed": (seq(split("Regex", r"\s+", "Removed"), bl(False, False)), None, False),
        "merged-prev": (seq(split("String", ",", "MergedWithPrevious"), {"type": "Digits"}, bl(False, True)),
                        None, False),
        "merged-next": (seq(split("Regex", "[.!?]", "MergedWithNext"), bl(True, False)), None, False),
        "nfc+ignore": (bl(False, True), {"type": "Sequence", "normalizers": [{"type": "NFC"}]}, True),
    }
    docs = [json.loads(line)["text"] for line in open(CORPUS, encoding="utf-8")]
    fail = 0
    for name, (pre, norm, ignore) in variants.items():
        v = dict(j, pre_tokenizer=pre, normalizer=norm, model=dict(j["model"], ignore_merges=ignore))
        path = os.path.join(tmp, name + ".json")
        json.dump(v, open(path, "w", encoding="utf-8"))
        # As Megatron's preprocess_data.py: a document without tokens gets no EOD and no sequence.
        tok = hf_reference.Tokenizer(path)
        want = [ids + [j["added_tokens"][0]["id"]] for ids in map(tok.encode, docs) if ids]
        got = [list(map(int, s)) for s in ref.read_indexed(
            preprocess(exe, tmp, name, "HuggingFaceTokenizer", path))[4]]
        bad = [i for i, (a, b) in enumerate(zip(got, want)) if a != b]
        if len(got) != len(want) or bad:
            i = bad[0] if bad else 0
            print(f"FAIL: {name}: {len(bad)} documents differ; document {i}:\n  dagatron {got[i]}\n  reference {want[i]}")
            fail = 1
        else:
            print(f"ok: {name}: {len(got)} documents equal the reference")
    return fail


def main():
    exe = ref.dagatron()
    what = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        fail = {"ids": check_ids, "train": check_train, "bad": check_bad, "variants": check_variants,
                "null": check_null}[what](exe, tmp)
    if fail:
        sys.exit(1)
    print(f"PASS: {what}")


if __name__ == "__main__":
    main()
