#!/usr/bin/env bash
# generate_cli.sh GEN_CLI — `dagatron generate` end to end on a tiny random
# checkpoint: output starts with the prompt and has max-new-tokens bytes
# after it (byte-level tokenizer), greedy and --top-k 1 agree, the same seed
# gives the same text and another seed other text, 2 threads give the
# 1-thread text, and bad flags / directories fail with one line and exit 2.
# NullTokenizer and mock-data checkpoints take and print token ids.
# When $DG_BUILD/dagatron has the generate command, it is checked the same way.
set -u
GEN="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$GEN" make-ckpt "$tmp/ckpt" || fail "make-ckpt"

check() { # check RUNNER... : the assertions, with RUNNER the generate command
    local g=("$@") prompt="The quick brown fox"
    "${g[@]}" --load "$tmp/ckpt" --prompt "$prompt" --max-new-tokens 30 --greedy > "$tmp/g1" 2>"$tmp/err" || fail "greedy run: $(cat "$tmp/err")"
    "${g[@]}" --load "$tmp/ckpt" --prompt "$prompt" --max-new-tokens 30 --greedy > "$tmp/g2" 2>/dev/null || fail "greedy run 2"
    cmp -s "$tmp/g1" "$tmp/g2" || fail "greedy is not deterministic"
    head -c ${#prompt} "$tmp/g1" | grep -qx "$prompt" || fail "output does not start with the prompt"
    # the end-of-document token (256) may stop it early: at most 30 bytes + newline
    local n=$(( $(stat -c %s "$tmp/g1") - ${#prompt} - 1 ))
    [ "$n" -ge 0 ] && [ "$n" -le 30 ] || fail "greedy made $n bytes, expected <= 30"
    grep -q "iteration 7" "$tmp/err" || fail "no summary line naming the checkpoint's iteration"
    "${g[@]}" --load "$tmp/ckpt" --prompt "$prompt" --max-new-tokens 30 --top-k 1 --seed 9 > "$tmp/k1" 2>/dev/null || fail "top-k 1"
    cmp -s "$tmp/g1" "$tmp/k1" || fail "--top-k 1 differs from --greedy"
    "${g[@]}" --load "$tmp/ckpt" --prompt "$prompt" --max-new-tokens 30 --temperature 0 > "$tmp/t0" 2>/dev/null || fail "temperature 0"
    cmp -s "$tmp/g1" "$tmp/t0" || fail "--temperature 0 differs from --greedy"
    "${g[@]}" --load "$tmp/ckpt" --prompt "$prompt" --max-new-tokens 30 --greedy --threads 2 > "$tmp/g3" 2>/dev/null || fail "threads 2"
    cmp -s "$tmp/g1" "$tmp/g3" || fail "--threads 2 changes the greedy text"
    local s=(--load "$tmp/ckpt" --prompt "$prompt" --max-new-tokens 40 --top-k 40 --top-p 0.9 --temperature 1.2)
    "${g[@]}" "${s[@]}" --seed 5 > "$tmp/s1" 2>/dev/null || fail "sampled run"
    "${g[@]}" "${s[@]}" --seed 5 > "$tmp/s2" 2>/dev/null || fail "sampled run 2"
    "${g[@]}" "${s[@]}" --seed 6 > "$tmp/s3" 2>/dev/null || fail "sampled run 3"
    cmp -s "$tmp/s1" "$tmp/s2" || fail "the same --seed gave different text"
    cmp -s "$tmp/s1" "$tmp/s3" && fail "--seed 5 and --seed 6 gave the same text"
    "${g[@]}" --load "$tmp/ckpt" --prompt "abc" --max-new-tokens 0 > "$tmp/z" 2>/dev/null || fail "max-new-tokens 0"
    [ "$(cat "$tmp/z")" = "abc" ] || fail "--max-new-tokens 0 should print the prompt only"
    "${g[@]}" --load "$tmp/ckpt" --max-new-tokens 5 > /dev/null 2>&1 || fail "no --prompt (start from end-of-document)"
    "${g[@]}" --load "$tmp/ckpt" --ckpt-step 7 --prompt "$prompt" --max-new-tokens 30 --greedy > "$tmp/c7" 2>/dev/null || fail "--ckpt-step 7"
    cmp -s "$tmp/g1" "$tmp/c7" || fail "--ckpt-step 7 (the latest) differs"

    # bad input: one line on stderr, exit 2
    local bad
    for bad in "--ckpt-step 8" "--top-kk 3" "--top-p 1.5" "--temperature -1" "--max-new-tokens abc" "--seed" "--top-k -2"; do
        # shellcheck disable=SC2086
        "${g[@]}" --load "$tmp/ckpt" $bad > /dev/null 2> "$tmp/e"
        local rc=$?
        [ "$rc" -eq 2 ] || fail "'$bad': exit $rc, expected 2"
        [ "$(wc -l < "$tmp/e")" -eq 1 ] || fail "'$bad': expected one line, got: $(cat "$tmp/e")"
    done
    grep -q -- "--top-k" "$tmp/e" || fail "bad --top-k message does not name the flag"
    "${g[@]}" --prompt x > /dev/null 2> "$tmp/e"; [ $? -eq 2 ] || fail "missing --load: expected exit 2"
    "${g[@]}" --load "$tmp/nothing" > /dev/null 2> "$tmp/e"; [ $? -eq 2 ] || fail "missing directory: expected exit 2"
    [ "$(wc -l < "$tmp/e")" -eq 1 ] || fail "missing directory: expected one line"
}

# NullTokenizer checkpoints (--tokenizer-type NullTokenizer, --mock-data):
# token ids in, token ids out, said once; a text prompt is refused with a
# line that says what to pass, not a flag the user never gave.
"$GEN" make-ckpt "$tmp/null" NullTokenizer || fail "make-ckpt NullTokenizer"
"$GEN" make-ckpt "$tmp/mock" NullTokenizer mock || fail "make-ckpt NullTokenizer mock"
check_ids() { # check_ids RUNNER... : the assertions
    local g=("$@")
    "${g[@]}" --load "$tmp/null" --prompt "5 17  3" --max-new-tokens 12 --greedy > "$tmp/i1" 2>"$tmp/ie" ||
        fail "NullTokenizer checkpoint: $(cat "$tmp/ie")"
    [ "$(grep -c 'token ids' "$tmp/ie")" -eq 1 ] || fail "NullTokenizer: no one-line note that the output is ids: $(cat "$tmp/ie")"
    [ "$(wc -l < "$tmp/i1")" -eq 1 ] || fail "NullTokenizer: expected one line of ids"
    grep -Eqx '5 17 3( [0-9]+){0,12}' "$tmp/i1" || fail "NullTokenizer: output is not the prompt ids then up to 12 ids: $(cat "$tmp/i1")"
    local n; n=$(wc -w < "$tmp/i1")
    [ "$n" -ge 4 ] || fail "NullTokenizer: no id generated"
    for id in $(cat "$tmp/i1"); do [ "$id" -lt 300 ] || fail "NullTokenizer: id $id outside [0, 300)"; done
    "${g[@]}" --load "$tmp/null" --prompt "5 17 3" --max-new-tokens 12 --greedy > "$tmp/i2" 2>/dev/null || fail "ids run 2"
    cmp -s "$tmp/i1" "$tmp/i2" || fail "NullTokenizer: greedy is not deterministic"
    "${g[@]}" --load "$tmp/mock" --prompt "1 2" --max-new-tokens 5 --greedy > "$tmp/i3" 2>"$tmp/ie" || fail "mock checkpoint: $(cat "$tmp/ie")"
    grep -Eqx '1 2( [0-9]+){5}' "$tmp/i3" || fail "mock: expected the prompt ids and 5 ids (no end-of-document): $(cat "$tmp/i3")"
    grep -q "mock data" "$tmp/ie" || fail "mock: the note does not say mock data"
    local bad want
    for bad in "hello:is not a token id" "5 x7:'x7' is not a token id" "5 300:token id 300 is outside the vocabulary [0, 300)" \
               "-1:outside the vocabulary" "+3:is not a token id"; do
        want=${bad#*:}
        "${g[@]}" --load "$tmp/null" --prompt "${bad%%:*}" > /dev/null 2> "$tmp/e"
        local rc=$?
        [ "$rc" -eq 2 ] || fail "NullTokenizer --prompt '${bad%%:*}': exit $rc, expected 2"
        [ "$(wc -l < "$tmp/e")" -eq 1 ] && grep -qF -- "$want" "$tmp/e" ||
            fail "NullTokenizer --prompt '${bad%%:*}': expected one line saying '$want', got: $(cat "$tmp/e")"
        grep -q -- "--tokenizer-type" "$tmp/e" && fail "the message blames --tokenizer-type: $(cat "$tmp/e")"
    done
    "${g[@]}" --load "$tmp/mock" > /dev/null 2> "$tmp/e"; [ $? -eq 2 ] || fail "mock, no prompt: expected exit 2"
    grep -q -- "--prompt: required (token ids" "$tmp/e" || fail "mock, no prompt: $(cat "$tmp/e")"
}

check "$GEN" generate
check_ids "$GEN" generate
if [ -n "${DG_BUILD:-}" ] && [ -x "$DG_BUILD/dagatron" ] && "$DG_BUILD/dagatron" --help 2>&1 | grep -q "^  generate "; then
    check "$DG_BUILD/dagatron" generate
    check_ids "$DG_BUILD/dagatron" generate
    # the user's path: a mock-data training run, then generate from it
    "$DG_BUILD/dagatron" train $(cat "$DG_SRC/tests/common/moe_arch.flags") --mock-data --vocab-size 50 --num-layers 1 --hidden-size 32 --num-attention-heads 2 \
        --seq-length 16 --num-experts 2 --moe-router-topk 1 --micro-batch-size 1 --global-batch-size 1 \
        --train-iters 2 --eval-iters 0 --save "$tmp/trained" > "$tmp/t.log" 2>&1 || fail "mock training: $(tail -3 "$tmp/t.log")"
    "$DG_BUILD/dagatron" generate --load "$tmp/trained" --prompt "7 8 9" --max-new-tokens 4 --greedy > "$tmp/tg" 2>"$tmp/e" ||
        fail "generate from a --mock-data checkpoint: $(cat "$tmp/e")"
    grep -Eqx '7 8 9( [0-9]+){4}' "$tmp/tg" || fail "generate from a --mock-data checkpoint printed: $(cat "$tmp/tg")"
    # Megatron's default dense GPT (GeLU, LayerNorm, learned positions, biases):
    # the checkpoint's config record makes generate rebuild that architecture
    "$DG_BUILD/dagatron" train --mock-data --vocab-size 50 --num-layers 1 --hidden-size 32 --num-attention-heads 2 \
        --seq-length 16 --micro-batch-size 1 --global-batch-size 1 \
        --train-iters 2 --eval-iters 0 --save "$tmp/dense" > "$tmp/d.log" 2>&1 || fail "dense training: $(tail -3 "$tmp/d.log")"
    "$DG_BUILD/dagatron" generate --load "$tmp/dense" --prompt "7 8 9" --max-new-tokens 4 --greedy > "$tmp/dg" 2>"$tmp/e" ||
        fail "generate from a dense default checkpoint: $(cat "$tmp/e")"
    grep -Eqx '7 8 9( [0-9]+){4}' "$tmp/dg" || fail "generate from a dense default checkpoint printed: $(cat "$tmp/dg")"
fi
echo "generate_cli: ok"
