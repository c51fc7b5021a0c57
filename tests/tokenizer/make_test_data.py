"""make_test_data.py — writes this folder's test data, once (the files are
shipped; tests never rerun this). Needs tools outside dagatron: Debian's
python3-regex (for hf_reference.py), python3-sentencepiece and spm_train
(package sentencepiece).

  /usr/bin/python3 tests/tokenizer/make_test_data.py BUILD/dagatron

writes
  corpus.jsonl           the test corpus, one {"text": ...} document a line
  gpt2/tokenizer.json    GPT-2 form: ByteLevel pre-tokenizer, "a b" merges,
                         <|endoftext|> in the vocabulary (no tokenizer_config.json)
  qwen/                  Qwen2.5 form: NFC, Split(Qwen2.5 regex) + ByteLevel,
                         [a, b] merges, ChatML added tokens, eos <|im_end|>
  llama3/                Llama-3 form: Split(Llama-3 regex) + ByteLevel,
                         ignore_merges, <|begin_of_text|> template, eos <|end_of_text|>
  sp/tokenizer.model     a SentencePiece BPE (Llama-2's options) by spm_train
  expected_ids.json      per tokenizer: ids of every corpus document (by
                         hf_reference.py and python3-sentencepiece), eod, vocab size

The BPE merges come from `dagatron tokenizer train` on the fortunes corpus,
so the vocabularies are small (2000 tokens) but real.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hf_reference  # noqa: E402

LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"

DOCS = [
    "Hello world! This is a test of the tokenizer.",
    "It's what we'll do: they've said I'm sure you'd agree, and he's right.",
    "IT'S LOUD. WE'LL SEE. THEY'VE GONE. I'M HERE. YOU'D KNOW. SHE'S OFF.",
    "Numbers: 0 7 42 123 4096 1234567890 and 3.14159, 2,718 or -17.",
    "Spaces:  two,   three,    four.     Trailing   ",
    "   leading spaces and a tab\there, two tabs\t\tthere.",
    "Line one\nLine two\n\nAfter a blank line\r\nWindows line\r\n\r\nEnd\n",
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber Stra\u00dfe \u00e6\u00f8\u00e5 \u00c5ngstr\u00f6m.",
    "Decomposed: Cafe\u0301 nai\u0308ve re\u0301sume\u0301 (NFC composes these).",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac \u03ba\u03b5\u03af\u03bc\u03b5\u03bd\u03bf.",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3068\u4e2d\u6587\u6587\u672c\u3002\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8.",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 \u05e9\u05dc\u05d5\u05dd \u0939\u093f\u0928\u094d\u0926\u0940",
    "Emoji: \U0001f600\U0001f680 \u2764\ufe0f \U0001f44d\U0001f3fd and flags \U0001f1eb\U0001f1f7.",
    "Non-breaking\u00a0space and ideographic\u3000space.",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>",
    "Text then <|endoftext|>more text after the end token.",
    "A tool: <tool_call>{\"name\": \"f\"}</tool_call> done.",
    "<|begin_of_text|>Already has a BOS, then <|eot_id|> and <|end_of_text|>",
    "Punctuation!!! ??? ... --- *** ((nested)) [brackets] {braces} <angle>",
    "def f(x):\n    return x ** 2  # square\n\nprint(f(3))\n",
    "for (int i = 0; i < n; i++) { a[i] = b[i] + c[i]; }",
    "email@example.com https://example.org/path?q=1&r=2#frag",
    "Mixed123Numbers456and789Letters, x2, 3rd, 21st, 1990s.",
    "Q: Why did the chicken cross the road?\nA: To get to the other side.",
    "\"Quotes\" and 'single quotes' and `backticks` and \u201ccurly\u201d \u2018ones\u2019.",
    "The quick brown fox jumps over the lazy dog. " * 4,
    "Tabs\tand\vvertical\ftabs and form feeds.",
    "Small <|im_start|> inside<|im_end|>text<|im_start|><|im_end|> adjacent.",
    "A long word: Pneumonoultramicroscopicsilicovolcanoconiosis, antidisestablishmentarianism.",
    "Fortune: You will be fortunate in the opinions of others.\n\t\t-- old saying",
    "Math: \u2200x \u2208 \u211d, x\u00b2 \u2265 0; \u03c0 \u2248 3.14; \u221e \u2260 \u2205.",
    "Ligatures and compat: \ufb01ne \u2460 \u00bd \u2163 (NFC keeps these).",
    "Hangul jamo: \u1100\u1161\u11a8 composes under NFC to \uac01.",
    "x",
    " ",
    "\n",
    "Once upon a time, there was a small model that learned to count: one, two, three, four, five.",
    "In 1969, humans walked on the Moon; in 2026, models train on CPUs.",
]


def byte_char_vocab(vocab_json):
    return json.load(open(vocab_json, encoding="utf-8"))


def merges_of(merges_txt):
    return [l.rstrip("\n") for l in open(merges_txt, encoding="utf-8") if l.strip() and not l.startswith("#version")]


def added(content, id_, special=True):
    return {"id": id_, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": not special, "special": special}


def write(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=None if path.endswith("tokenizer.json") else 2)
        f.write("\n")


def make_hf(bpe_dir):
    vocab = byte_char_vocab(os.path.join(bpe_dir, "vocab.json"))
    merges = merges_of(os.path.join(bpe_dir, "merges.txt"))
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    # GPT-2: the vocabulary has <|endoftext|> as its last id, also an added token.
    eot = vocab["<|endoftext|>"]
    write(os.path.join(HERE, "gpt2", "tokenizer.json"), {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [added("<|endoftext|>", eot)],
        "normalizer": None, "pre_tokenizer": byte_level, "post_processor": dict(byte_level, trim_offsets=False),
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                  "merges": merges}})
    base = {k: v for k, v in vocab.items() if k != "<|endoftext|>"}
    n = len(base)
    split = lambda pat: {"type": "Split", "pattern": {"Regex": pat}, "behavior": "Isolated", "invert": False}
    no_regex = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    # Qwen2.5: NFC, list-form merges, ChatML tokens (and a non-special added token).
    q_added = [added("<|endoftext|>", n), added("<|im_start|>", n + 1), added("<|im_end|>", n + 2),
               added("<tool_call>", n + 3, special=False), added("</tool_call>", n + 4, special=False)]
    write(os.path.join(HERE, "qwen", "tokenizer.json"), {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": q_added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [split(QWEN), no_regex]},
        "post_processor": no_regex, "decoder": no_regex,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": base, "merges": [m.split(" ", 1) for m in merges]}})
    write(os.path.join(HERE, "qwen", "tokenizer_config.json"),
          {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": None})
    # Llama-3: ignore_merges, a BOS template. Two whole words join the
    # vocabulary without merges that reach them: only ignore_merges finds them.
    lvocab = dict(base)
    for w in ("\u0120Pneumonoultramicroscopicsilicovolcanoconiosis", "\u0120antidisestablishmentarianism"):
        lvocab[w] = len(lvocab)
    ln = len(lvocab)
    l_added = [added("<|begin_of_text|>", ln), added("<|end_of_text|>", ln + 1),
               added("<|reserved_special_token_0|>", ln + 2), added("<|eot_id|>", ln + 3)]
    write(os.path.join(HERE, "llama3", "tokenizer.json"), {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": l_added, "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [split(LLAMA3), no_regex]},
        "post_processor": {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            {"type": "TemplateProcessing",
             "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                        {"Sequence": {"id": "A", "type_id": 0}}],
             "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                      {"Sequence": {"id": "A", "type_id": 0}},
                      {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}},
                      {"Sequence": {"id": "B", "type_id": 1}}],
             "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [ln],
                                                       "tokens": ["<|begin_of_text|>"]}}}]},
        "decoder": no_regex,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                  "vocab": lvocab, "merges": merges}})
    write(os.path.join(HERE, "llama3", "tokenizer_config.json"),
          {"bos_token": "<|begin_of_text|>", "eos_token": {"content": "<|end_of_text|>", "lstrip": False}})
    return {"gpt2": eot, "qwen": n + 2, "llama3": ln + 1}, {"gpt2": len(vocab), "qwen": n + 5, "llama3": ln + 4}


def make_sp(tmp):
    import sentencepiece as spm
    text = os.path.join(tmp, "fortunes.txt")
    with open(text, "w", encoding="utf-8") as out:
        for f in sorted(glob.glob("/usr/share/games/fortunes/*")):
            if os.path.isfile(f) and not f.endswith(".dat") and not os.path.islink(f):
                out.write(open(f, encoding="utf-8", errors="replace").read().replace("\n%\n", "\n"))
    prefix = os.path.join(HERE, "sp", "tokenizer")
    os.makedirs(os.path.dirname(prefix), exist_ok=True)
    subprocess.run(["spm_train", f"--input={text}", f"--model_prefix={prefix}", "--vocab_size=1000",
                    "--model_type=bpe", "--byte_fallback=true", "--split_digits=true",
                    "--normalization_rule_name=identity", "--remove_extra_whitespaces=false",
                    "--allow_whitespace_only_pieces=true", "--character_coverage=0.9995",
                    "--input_sentence_size=200000", "--shuffle_input_sentence=false", "--minloglevel=2"], check=True)
    os.remove(prefix + ".vocab")
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    return sp


def main():
    exe = sys.argv[1]
    with open(os.path.join(HERE, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for d in DOCS:
            f.write(json.dumps({"text": d}) + "\n")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([exe, "tokenizer", "train", "--vocab-size", "2000", "--output-dir", tmp], check=True)
        eods, sizes = make_hf(tmp)
        sp = make_sp(tmp)
    expected = {}
    for name in ("gpt2", "qwen", "llama3"):
        tok = hf_reference.Tokenizer(os.path.join(HERE, name))
        expected[name] = {"vocab_size": sizes[name], "eod": eods[name], "ids": [tok.encode(d) for d in DOCS]}
    # Megatron's SentencePiece tokenizer: plain Encode (no BOS/EOS), eod = eos id.
    expected["sp"] = {"vocab_size": sp.get_piece_size(), "eod": sp.eos_id(),
                      "ids": [sp.encode(d) for d in DOCS]}
    with open(os.path.join(HERE, "expected_ids.json"), "w") as f:
        json.dump(expected, f, separators=(",", ":"))
        f.write("\n")
    for k, v in expected.items():
        print(k, "vocab", v["vocab_size"], "eod", v["eod"], "tokens", sum(map(len, v["ids"])))


if __name__ == "__main__":
    main()
