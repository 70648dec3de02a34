// embbench: embedding throughput of a GGUF encoder (or any model) through
// llama.cpp's C API: each repetition computes SEQS inputs of LEN tokens in
// one llama_decode with embeddings on and mean pooling, as a server would
// batch them. Written for oengine's side-by-side measurements.
#include "llama.h"
#include <chrono>
#include <cstdio>
#include <cstdlib>
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: embbench MODEL LEN SEQS REPS\n"); return 2; }
    int len = atoi(argv[2]), seqs = atoi(argv[3]), reps = atoi(argv[4]);
    llama_backend_init();
    llama_model *model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (!model) return 1;
    int nv = llama_vocab_n_tokens(llama_model_get_vocab(model));
    auto cp = llama_context_default_params();
    cp.n_ctx = len * seqs; cp.n_batch = len * seqs; cp.n_ubatch = len * seqs; cp.n_seq_max = seqs;
    cp.n_threads = 2; cp.n_threads_batch = 2;
    cp.embeddings = true; cp.pooling_type = LLAMA_POOLING_TYPE_MEAN;
    llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) return 1;
    llama_batch b = llama_batch_init(len * seqs, 0, 1);
    for (int r = 0; r <= reps; r++) { // rep 0 warms up
        llama_memory_clear(llama_get_memory(ctx), true);
        b.n_tokens = 0;
        for (int s = 0; s < seqs; s++)
            for (int j = 0; j < len; j++) {
                int k = b.n_tokens++;
                b.token[k] = ((s * len + j) * 7919 + 13 + r) % nv; b.pos[k] = j;
                b.n_seq_id[k] = 1; b.seq_id[k][0] = s; b.logits[k] = 1;
            }
        double t0 = now();
        if (llama_decode(ctx, b)) { fprintf(stderr, "decode failed\n"); return 1; }
        double t1 = now();
        if (!llama_get_embeddings_seq(ctx, seqs - 1)) { fprintf(stderr, "no embedding\n"); return 1; }
        if (r > 0) printf("rep %d: %d inputs of %d tokens: %.2f tok/s (%.1f inputs/s)\n", r, seqs, len, len * seqs / (t1 - t0), seqs / (t1 - t0));
    }
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
