// embdump: writes llama.cpp's pooled embeddings of a GGUF model for each
// prompt of a file, as JSON. Written for oengine's tests; links llama.cpp's
// library (built from llama.rn's vendored copy, see README.md).
#include "llama.h"
#include "rerank_pair.h"
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

static std::string jstr(const std::string &s) {
    std::string o = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') { o += '\\'; o += (char)c; }
        else if (c < 0x20) { char b[8]; snprintf(b, sizeof b, "\\u%04x", c); o += b; }
        else o += (char)c;
    }
    return o + "\"";
}

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: embdump MODEL.gguf PROMPTS.txt mean|cls|last|rank NAME\n"); return 2; }
    std::string pool = argv[3];
    enum llama_pooling_type pt = pool == "mean" ? LLAMA_POOLING_TYPE_MEAN : pool == "cls" ? LLAMA_POOLING_TYPE_CLS : pool == "last" ? LLAMA_POOLING_TYPE_LAST : pool == "rank" ? LLAMA_POOLING_TYPE_RANK : LLAMA_POOLING_TYPE_UNSPECIFIED;
    if (pt == LLAMA_POOLING_TYPE_UNSPECIFIED) { fprintf(stderr, "pooling must be mean, cls, last or rank\n"); return 2; }
    llama_backend_init();
    llama_model *model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (!model) return 1;
    const llama_vocab *vocab = llama_model_get_vocab(model);
    // rank: the classification head's outputs (a reranker's score).
    int dim = pt == LLAMA_POOLING_TYPE_RANK ? (int) llama_model_n_cls_out(model) : llama_model_n_embd(model);
    std::ifstream in(argv[2]);
    std::stringstream ss; ss << in.rdbuf();
    std::string all = ss.str();
    std::vector<std::string> prompts;
    const std::string sep = "\n__prompt__\n";
    for (size_t p = 0;;) {
        size_t q = all.find(sep, p);
        if (q == std::string::npos) { std::string last = all.substr(p); if (!last.empty() && last.back() == '\n') last.pop_back(); prompts.push_back(last); break; }
        prompts.push_back(all.substr(p, q - p));
        p = q + sep.size();
    }
    auto cp = llama_context_default_params();
    cp.n_ctx = 2048; cp.n_batch = 2048; cp.n_ubatch = 2048;
    cp.n_threads = 2; cp.n_threads_batch = 2;
    cp.embeddings = true; cp.pooling_type = pt;
    llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) return 1;
    printf("{\"model\":%s,\"pooling\":%s,\"dim\":%d,\"prompts\":[", jstr(argv[4]).c_str(), jstr(pool).c_str(), dim);
    for (size_t i = 0; i < prompts.size(); i++) {
        const std::string &pr = prompts[i];
        // rank: a prompt "query<TAB>document" is a pair, formed as
        // llama.cpp's server forms it (rerank_pair.h).
        size_t tab = pr.find('\t');
        std::vector<llama_token> toks;
        if (pt == LLAMA_POOLING_TYPE_RANK && tab != std::string::npos) {
            toks = rerank_pair(model, pr.substr(0, tab), pr.substr(tab + 1));
        } else {
            toks.resize(pr.size() + 16);
            int m = llama_tokenize(vocab, pr.c_str(), pr.size(), toks.data(), toks.size(), true, true);
            if (m < 0) return 1;
            toks.resize(m);
        }
        int n = toks.size();
        llama_memory_clear(llama_get_memory(ctx), true);
        llama_batch b = llama_batch_init(n, 0, 1);
        for (int j = 0; j < n; j++) {
            b.token[j] = toks[j]; b.pos[j] = j; b.n_seq_id[j] = 1; b.seq_id[j][0] = 0; b.logits[j] = 1;
        }
        b.n_tokens = n;
        if (llama_decode(ctx, b) != 0) { fprintf(stderr, "decode failed\n"); return 1; }
        const float *e = llama_get_embeddings_seq(ctx, 0);
        if (!e) { fprintf(stderr, "no embedding\n"); return 1; }
        printf("%s{\"prompt\":%s,\"tokens\":[", i ? "," : "", jstr(prompts[i]).c_str());
        for (int j = 0; j < n; j++) printf("%s%d", j ? "," : "", toks[j]);
        printf("],\"embedding\":[");
        for (int j = 0; j < dim; j++) printf("%s%.9g", j ? "," : "", e[j]);
        printf("]}");
        llama_batch_free(b);
    }
    printf("]}\n");
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
