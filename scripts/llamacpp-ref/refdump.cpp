// refdump: writes a reference JSON (oengine model/verify format) of a GGUF
// model's logits as llama.cpp computes them. Written for oengine's tests;
// links llama.cpp's library (built from llama.rn's vendored copy).
#include "llama.h"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

static void topk(const float *l, int n, int k, std::string &out) {
    std::vector<int> idx(n);
    for (int i = 0; i < n; i++) idx[i] = i;
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) {
        return l[a] > l[b] || (l[a] == l[b] && a < b);
    });
    double mx = l[idx[0]], s = 0;
    for (int i = 0; i < n; i++) s += std::exp((double)l[i] - mx);
    double lse = mx + std::log(s);
    out += "[";
    char buf[128];
    for (int j = 0; j < k; j++) {
        snprintf(buf, sizeof buf, "%s[%d,%.6g,%.6g]", j ? "," : "", idx[j], l[idx[j]], (double)l[idx[j]] - lse);
        out += buf;
    }
    out += "]";
}

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
    if (argc < 4) { fprintf(stderr, "usage: refdump MODEL.gguf PROMPTS.txt NAME\n"); return 2; }
    llama_backend_init();
    auto mp = llama_model_default_params();
    llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) return 1;
    const llama_vocab *vocab = llama_model_get_vocab(model);
    int nv = llama_vocab_n_tokens(vocab);
    std::ifstream in(argv[2]);
    std::stringstream ss; ss << in.rdbuf();
    std::string all = ss.str();
    std::vector<std::string> prompts;
    const std::string sep = "\n__prompt__\n";
    size_t p = 0;
    while (true) {
        size_t q = all.find(sep, p);
        if (q == std::string::npos) { std::string last = all.substr(p); if (!last.empty() && last.back() == '\n') last.pop_back(); prompts.push_back(last); break; }
        prompts.push_back(all.substr(p, q - p));
        p = q + sep.size();
    }
    std::string out = "{\"model\":" + jstr(argv[3]) + ",\"n_vocab\":" + std::to_string(nv) + ",\"cases\":[";
    for (size_t c = 0; c < prompts.size(); c++) {
        auto cp = llama_context_default_params();
        cp.n_ctx = 2048; cp.n_batch = 512; cp.n_ubatch = 512; cp.n_threads = 2; cp.n_threads_batch = 2;
        llama_context *ctx = llama_init_from_model(model, cp);
        std::vector<llama_token> toks(prompts[c].size() + 8);
        int n = llama_tokenize(vocab, prompts[c].data(), prompts[c].size(), toks.data(), toks.size(), true, false);
        toks.resize(n);
        std::string ptk = "[";
        for (int i = 0; i < n; i += 512) {
            int m = std::min(512, n - i);
            llama_batch b = llama_batch_init(m, 0, 1);
            for (int j = 0; j < m; j++) { b.token[j] = toks[i + j]; b.pos[j] = i + j; b.n_seq_id[j] = 1; b.seq_id[j][0] = 0; b.logits[j] = 1; }
            b.n_tokens = m;
            if (llama_decode(ctx, b)) { fprintf(stderr, "decode failed\n"); return 1; }
            for (int j = 0; j < m; j++) { if (i + j) ptk += ","; topk(llama_get_logits_ith(ctx, j), nv, 8, ptk); }
            llama_batch_free(b);
        }
        ptk += "]";
        std::string gr = "[", gtk = "[", hex;
        llama_token cur = -1;
        const float *l = llama_get_logits_ith(ctx, -1);
        for (int s = 0; s < 24; s++) {
            int best = 0;
            for (int i = 1; i < nv; i++) if (l[i] > l[best]) best = i;
            if (s) { gr += ","; gtk += ","; }
            gr += std::to_string(best);
            topk(l, nv, 8, gtk);
            char piece[256];
            int pn = llama_token_to_piece(vocab, best, piece, sizeof piece, 0, false);
            for (int i = 0; i < pn; i++) { char h[4]; snprintf(h, sizeof h, "%02x", (unsigned char)piece[i]); hex += h; }
            cur = best;
            llama_batch b = llama_batch_get_one(&cur, 1);
            if (s < 23 && llama_decode(ctx, b)) { fprintf(stderr, "decode failed\n"); return 1; }
            l = llama_get_logits_ith(ctx, -1);
        }
        gr += "]"; gtk += "]";
        std::string ts = "[";
        for (int i = 0; i < n; i++) { if (i) ts += ","; ts += std::to_string(toks[i]); }
        ts += "]";
        if (c) out += ",";
        out += "{\"prompt\":" + jstr(prompts[c]) + ",\"tokens\":" + ts + ",\"prompt_topk\":" + ptk + ",\"greedy\":" + gr + ",\"greedy_topk\":" + gtk + ",\"greedy_text_hex\":\"" + hex + "\"}";
        llama_free(ctx);
    }
    out += "],\"reference\":\"llama.cpp as vendored by mybigday/llama.rn 638383c6 (generic CPU build), 2 threads, n_ctx 2048, F16 KV cache, flash attention auto\"}\n";
    fputs(out.c_str(), stdout);
    llama_model_free(model);
    return 0;
}
