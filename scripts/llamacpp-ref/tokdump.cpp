// tokdump: llama.cpp's tokenization of each input of a .inp file
// (inputs separated by a line __ggml_vocab_test__), no BOS/EOS, special
// tokens not parsed: one line of space-separated ids per input (the .out
// format of llama.cpp's tokenizer tests). Written for oengine's tests.
#include "llama.h"
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: tokdump VOCAB.gguf INPUTS.inp\n"); return 2; }
    llama_backend_init();
    auto mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) return 1;
    const llama_vocab *vocab = llama_model_get_vocab(model);
    std::ifstream in(argv[2]);
    std::stringstream ss; ss << in.rdbuf();
    std::string all = ss.str();
    const std::string sep = "\n__ggml_vocab_test__\n";
    size_t p = 0;
    std::vector<std::string> inputs;
    while (true) {
        size_t q = all.find(sep, p);
        if (q == std::string::npos) break;
        inputs.push_back(all.substr(p, q - p));
        p = q + sep.size();
    }
    for (auto &s : inputs) {
        std::vector<llama_token> t(s.size() * 4 + 16);
        int n = llama_tokenize(vocab, s.data(), s.size(), t.data(), t.size(), false, false);
        for (int i = 0; i < n; i++) printf(" %d", t[i]);
        printf("\n");
    }
    return 0;
}
