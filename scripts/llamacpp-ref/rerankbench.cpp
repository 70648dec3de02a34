// rerankbench: reranking throughput of a GGUF reranker through llama.cpp's
// C API. PAIRS.txt holds "query<TAB>document" pairs separated by
// "\n__prompt__\n"; each is formed as llama.cpp's server forms a rerank
// input (the file's rerank template with {query} and {document} replaced,
// special tokens parsed, nothing added; without one, [BOS] query [EOS]
// [SEP] document [EOS] as the vocabulary adds each). Each repetition scores
// every pair in one llama_decode (one sequence per pair, rank pooling), as
// a server batches its slots. Written for oengine's side-by-side
// measurements.
#include "llama.h"
#include "rerank_pair.h"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: [UBATCH=N] [SEQUENTIAL=1] [POOL=last] rerankbench MODEL PAIRS.txt REPS\n"); return 2; }
    int reps = atoi(argv[3]);
    llama_backend_init();
    llama_model *model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (!model) return 1;
    std::ifstream in(argv[2]);
    std::stringstream ss; ss << in.rdbuf();
    std::string all = ss.str();
    const std::string sep = "\n__prompt__\n";
    std::vector<std::vector<llama_token>> inputs;
    int total = 0;
    for (size_t p = 0; p < all.size();) {
        size_t q = all.find(sep, p);
        std::string pr = all.substr(p, q == std::string::npos ? std::string::npos : q - p);
        p = q == std::string::npos ? all.size() : q + sep.size();
        while (!pr.empty() && pr.back() == '\n') pr.pop_back();
        size_t tab = pr.find('\t');
        if (tab == std::string::npos) { fprintf(stderr, "a pair without a tab\n"); return 2; }
        std::vector<llama_token> toks = rerank_pair(model, pr.substr(0, tab), pr.substr(tab + 1));
        total += toks.size();
        inputs.push_back(toks);
    }
    int seqs = inputs.size();
    auto cp = llama_context_default_params();
    // n_ubatch: llama.cpp's default 512 unless UBATCH says (one ubatch of
    // every pair attends across all of them through the mask).
    int ub = getenv("UBATCH") ? atoi(getenv("UBATCH")) : 512;
    cp.n_ctx = total + 256; cp.n_batch = total; cp.n_ubatch = ub; cp.n_seq_max = seqs;
    cp.n_threads = 2; cp.n_threads_batch = 2;
    // POOL=last: the last token's state instead of the head (the same
    // forward, for a llama.cpp without the file's head).
    bool last = getenv("POOL") && std::string(getenv("POOL")) == "last";
    cp.embeddings = true; cp.pooling_type = last ? LLAMA_POOLING_TYPE_LAST : LLAMA_POOLING_TYPE_RANK;
    llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) return 1;
    llama_batch b = llama_batch_init(total, 0, 1);
    // SEQUENTIAL=1: one llama_decode per pair (a server with one slot).
    bool sequential = getenv("SEQUENTIAL") && atoi(getenv("SEQUENTIAL"));
    for (int r = 0; r <= reps; r++) { // rep 0 warms up
        double t0 = now();
        float first = 0;
        for (int s0 = 0; s0 < seqs; s0 = sequential ? s0 + 1 : seqs) {
            llama_memory_clear(llama_get_memory(ctx), true);
            b.n_tokens = 0;
            for (int s = s0; s < (sequential ? s0 + 1 : seqs); s++)
                for (size_t j = 0; j < inputs[s].size(); j++) {
                    int k = b.n_tokens++;
                    b.token[k] = inputs[s][j]; b.pos[k] = j;
                    b.n_seq_id[k] = 1; b.seq_id[k][0] = s; b.logits[k] = 1;
                }
            if (llama_decode(ctx, b)) { fprintf(stderr, "decode failed\n"); return 1; }
            const float *e = llama_get_embeddings_seq(ctx, s0);
            if (!e) { fprintf(stderr, "no score\n"); return 1; }
            if (s0 == 0) first = e[0];
        }
        double t1 = now();
        const float *e = &first;
        if (r > 0) printf("rep %d: %d pairs, %d tokens: %.3f s, %.2f pairs/s (%.1f tok/s); pair 0 score %.6f\n", r, seqs, total, t1 - t0, seqs / (t1 - t0), total / (t1 - t0), e[0]);
    }
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
