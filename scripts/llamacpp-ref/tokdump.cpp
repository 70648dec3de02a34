// tokdump: llama.cpp's tokenization of each input of a .inp file
// (inputs separated by a line __ggml_vocab_test__): one line of
// space-separated ids per input (the .out format of llama.cpp's tokenizer
// tests). By default no BOS/EOS and special tokens not parsed; the
// optional MODE letters change that: a = add_special, p = parse_special,
// d = print llama_detokenize of the ids (remove_special and
// unparse_special off) as one C-quoted string per input instead,
// u = the same with unparse_special on. Written for oengine's tests.
#include "llama.h"
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
static void print_quoted(const std::string &s) {
    putchar('"');
    for (unsigned char c : s) {
        if (c == '\\' || c == '"') printf("\\%c", c);
        else if (c < 0x20 || c == 0x7F) printf("\\x%02x", c);
        else putchar(c);
    }
    printf("\"\n");
}
int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: tokdump VOCAB.gguf INPUTS.inp [MODE: a p d u]\n"); return 2; }
    const std::string mode = argc > 3 ? argv[3] : "";
    const bool add_special = mode.find('a') != std::string::npos;
    const bool parse_special = mode.find('p') != std::string::npos;
    const bool unparse = mode.find('u') != std::string::npos;
    const bool detok = unparse || mode.find('d') != std::string::npos;
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
        int n = llama_tokenize(vocab, s.data(), s.size(), t.data(), t.size(), add_special, parse_special);
        if (detok) {
            std::vector<char> buf(s.size() * 8 + 256);
            int m = llama_detokenize(vocab, t.data(), n, buf.data(), buf.size(), false, unparse);
            print_quoted(std::string(buf.data(), m < 0 ? 0 : m));
            continue;
        }
        for (int i = 0; i < n; i++) printf(" %d", t[i]);
        printf("\n");
    }
    return 0;
}
