// dg_tok_sp.cc — the C API of dg_tok_sp.h over libsentencepiece. The only
// C++ in dagatron: exceptions and C++ types stay inside this file.
#include "dg_tok_sp.h"

#include <sentencepiece_processor.h>

#include <cstdio>
#include <new>
#include <string>
#include <vector>

struct dg_tok_sp {
    sentencepiece::SentencePieceProcessor proc;
};

extern "C" dg_tok_sp *dg_tok_sp_open(const char *path, char *msg, size_t cap) {
    dg_tok_sp *sp = new (std::nothrow) dg_tok_sp;
    if (!sp) {
        std::snprintf(msg, cap, "%s: out of memory", path);
        return nullptr;
    }
    try {
        const auto st = sp->proc.Load(path);
        if (st.ok()) return sp;
        // The library's messages name its own source lines, which would
        // not help the user: say what went wrong in our words.
        if (st.code() == sentencepiece::util::StatusCode::kNotFound)
            std::snprintf(msg, cap, "%s: cannot open the file", path);
        else
            std::snprintf(msg, cap, "%s: not a SentencePiece model (tokenizer.model)", path);
    } catch (const std::exception &e) {
        std::snprintf(msg, cap, "%s: %s", path, e.what());
    }
    delete sp;
    return nullptr;
}

extern "C" void dg_tok_sp_close(dg_tok_sp *sp) { delete sp; }

extern "C" int64_t dg_tok_sp_vocab_size(const dg_tok_sp *sp) { return sp->proc.GetPieceSize(); }
extern "C" int32_t dg_tok_sp_eos(const dg_tok_sp *sp) { return sp->proc.eos_id(); }
extern "C" int32_t dg_tok_sp_bos(const dg_tok_sp *sp) { return sp->proc.bos_id(); }

extern "C" int64_t dg_tok_sp_encode(const dg_tok_sp *sp, const uint8_t *text, size_t n, int32_t *ids, int64_t cap) {
    std::vector<int> v;
    try {
        if (!sp->proc.Encode(std::string(reinterpret_cast<const char *>(text), n), &v).ok()) return -1;
    } catch (const std::exception &) {
        return -1;
    }
    for (size_t i = 0; i < v.size() && static_cast<int64_t>(i) < cap; i++) ids[i] = v[i];
    return static_cast<int64_t>(v.size());
}

extern "C" int64_t dg_tok_sp_decode(const dg_tok_sp *sp, const int32_t *ids, int64_t n, char *out, int64_t cap) {
    std::vector<int> v(ids, ids + n);
    for (int x : v)
        if (x < 0 || x >= sp->proc.GetPieceSize()) return -1;
    std::string s;
    try {
        if (!sp->proc.Decode(v, &s).ok()) return -1;
    } catch (const std::exception &) {
        return -1;
    }
    if (static_cast<int64_t>(s.size()) < cap) {
        s.copy(out, s.size());
        out[s.size()] = 0;
    }
    return static_cast<int64_t>(s.size());
}
