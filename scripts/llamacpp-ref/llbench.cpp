// llbench: prefill and decode throughput of a GGUF model through llama.cpp's
// C API (pp: one decode of N prompt tokens; tg: N single-token decodes),
// written for oengine's side-by-side measurements.
#include "llama.h"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: llbench MODEL PP TG REPS\n"); return 2; }
    int pp = atoi(argv[2]), tg = atoi(argv[3]), reps = atoi(argv[4]);
    llama_backend_init();
    llama_model *model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (!model) return 1;
    int nv = llama_vocab_n_tokens(llama_model_get_vocab(model));
    for (int r = 0; r <= reps; r++) {
        auto cp = llama_context_default_params();
        cp.n_ctx = pp + tg + 16; cp.n_batch = pp; cp.n_ubatch = pp; cp.n_threads = 2; cp.n_threads_batch = 2;
        llama_context *ctx = llama_init_from_model(model, cp);
        std::vector<llama_token> toks(pp);
        for (int i = 0; i < pp; i++) toks[i] = (i * 7919 + 13) % nv;
        double t0 = now();
        if (llama_decode(ctx, llama_batch_get_one(toks.data(), pp))) return 1;
        double t1 = now();
        llama_token cur = 1;
        for (int i = 0; i < tg; i++) { if (llama_decode(ctx, llama_batch_get_one(&cur, 1))) return 1; cur = (cur * 31 + 7) % nv; }
        double t2 = now();
        if (r > 0) printf("rep %d: pp%d %.2f tok/s, tg%d %.2f tok/s\n", r, pp, pp / (t1 - t0), tg, tg / (t2 - t1));
        llama_free(ctx);
    }
    return 0;
}
