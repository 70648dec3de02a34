// rerank_pair.h: a (query, document) pair formed as llama.cpp's server
// forms a rerank input, for embdump and rerankbench: with the model's
// rerank template (tokenizer.chat_template.rerank) every {query}, then
// every {document}, replaced and the text tokenized with special tokens
// parsed and nothing added; without one, [BOS] query [EOS] [SEP] document
// [EOS], each as the vocabulary adds it (EOS falling back to SEP).
#pragma once
#include "llama.h"
#include <string>
#include <vector>

static std::vector<llama_token> rerank_tokenize(const llama_vocab *v, const std::string &s, bool parse_special) {
    std::vector<llama_token> t(s.size() + 16);
    t.resize(llama_tokenize(v, s.c_str(), s.size(), t.data(), t.size(), false, parse_special));
    return t;
}

static std::vector<llama_token> rerank_pair(const llama_model *model, const std::string &query, const std::string &doc) {
    const llama_vocab *vocab = llama_model_get_vocab(model);
    if (const char *tmpl = llama_model_chat_template(model, "rerank")) {
        std::string t = tmpl;
        for (size_t at; (at = t.find("{query}")) != std::string::npos;) t.replace(at, 7, query);
        for (size_t at; (at = t.find("{document}")) != std::string::npos;) t.replace(at, 10, doc);
        return rerank_tokenize(vocab, t, true);
    }
    llama_token eos = llama_vocab_eos(vocab);
    if (eos == LLAMA_TOKEN_NULL) eos = llama_vocab_sep(vocab);
    std::vector<llama_token> q = rerank_tokenize(vocab, query, false), d = rerank_tokenize(vocab, doc, false), toks;
    if (llama_vocab_get_add_bos(vocab)) toks.push_back(llama_vocab_bos(vocab));
    toks.insert(toks.end(), q.begin(), q.end());
    if (llama_vocab_get_add_eos(vocab)) toks.push_back(eos);
    if (llama_vocab_get_add_sep(vocab)) toks.push_back(llama_vocab_sep(vocab));
    toks.insert(toks.end(), d.begin(), d.end());
    if (llama_vocab_get_add_eos(vocab)) toks.push_back(eos);
    return toks;
}
