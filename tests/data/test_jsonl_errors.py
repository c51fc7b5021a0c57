"""Issue 10: the JSONL reader of `dagatron preprocess` refuses a line that is
not exactly one JSON object, naming the file, the line and what is wrong
(exit 2, one line): text after the object, a raw NUL or other control byte
inside a string (JSON, and Python's json.loads that Megatron uses, refuse
them; they used to be accepted, and a NUL silently cut the text short), an
escaped NUL, and malformed JSON. Good lines around them, white space after
the object and escaped control characters are accepted.
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_ref as ref  # noqa: E402

GOOD = b'{"text": "first"}\n{"text": "second"}\n'
CASES = [
    # name, bad third line, words the message must hold
    ("trailing_text", b'{"text":"a"} xyz', ["unexpected text after the JSON object", "column 14"]),
    ("second_object", b'{"text":"a"}{"text":"b"}', ["unexpected text after the JSON object"]),
    ("raw_nul", b'{"text":"a\x00b"}', ["raw control byte 0x00", "column 11"]),
    ("raw_tab", b'{"text":"a\tb"}', ["raw control byte 0x09"]),
    ("escaped_nul", b'{"text":"a\\u0000b"}', ["\\u0000"]),
    ("not_json", b'{"text": }', ["not valid JSON"]),
    ("not_an_object", b'["text"]', ["not a JSON object"]),
]


def main():
    exe = ref.dagatron()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        ok_in = os.path.join(tmp, "ok.jsonl")
        with open(ok_in, "wb") as f:
            f.write(GOOD + b'{"text": "tab\\there \\"q\\""}   \r\n')
        r = ref.run([exe, "preprocess", "--input", ok_in, "--output-prefix", os.path.join(tmp, "ok")], expect=None)
        ok = r.returncode == 0 and "3 documents" in r.stdout
        print(f"good lines: exit {r.returncode}: {r.stdout.strip()}{r.stderr.strip()}  [{'ok' if ok else 'FAIL'}]")
        failures += not ok
        for name, line, words in CASES:
            path = os.path.join(tmp, name + ".jsonl")
            with open(path, "wb") as f:
                f.write(GOOD + line + b"\n" + GOOD)
            failures += not ref.refused([exe, "preprocess", "--input", path, "--output-prefix",
                                         os.path.join(tmp, name)], [f"{name}.jsonl:3:"] + words, label=name)
    ref.finish(failures)


if __name__ == "__main__":
    main()
