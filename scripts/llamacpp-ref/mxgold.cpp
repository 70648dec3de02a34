// mxgold: writes mxfp4.gguf (tensor t: 16 rows x 256 columns of MXFP4
// blocks quantized by ggml from seeded normal values) and mxfp4.f32 (ggml's
// dequantization of them), and prints ggml's MXFP4 x Q8_0 dot products of
// each row with a seeded activation vector (for an ad-hoc check).
#include "ggml.h"
#include "ggml-cpu.h"
#include "gguf.h"
#include <cstdio>
#include <cmath>
#include <vector>
#include <random>
int main() {
    const int rows = 16, cols = 256;
    std::mt19937 rng(42);
    std::normal_distribution<float> nd(0, 0.05f);
    std::vector<float> w(rows * cols);
    for (auto & v : w) v = nd(rng);
    lm_ggml_init_params ip = { 16 << 20, nullptr, false };
    lm_ggml_context * ctx = lm_ggml_init(ip);
    lm_ggml_tensor * t = lm_ggml_new_tensor_2d(ctx, LM_GGML_TYPE_MXFP4, cols, rows);
    lm_ggml_set_name(t, "t");
    lm_ggml_quantize_chunk(LM_GGML_TYPE_MXFP4, w.data(), t->data, 0, rows, cols, nullptr);
    lm_gguf_context * g = lm_gguf_init_empty();
    lm_gguf_add_tensor(g, t);
    lm_gguf_write_to_file(g, "mxfp4.gguf", false);
    std::vector<float> deq(rows * cols);
    lm_ggml_get_type_traits(LM_GGML_TYPE_MXFP4)->to_float(t->data, deq.data(), rows * cols);
    FILE * f = fopen("mxfp4.f32", "wb");
    fwrite(deq.data(), 4, deq.size(), f);
    fclose(f);
    lm_ggml_cpu_init();
    auto * tr = lm_ggml_get_type_traits_cpu(LM_GGML_TYPE_MXFP4);
    std::normal_distribution<float> nx(0, 1);
    std::vector<float> x(cols);
    for (auto & v : x) v = nx(rng);
    std::vector<uint8_t> xq(cols / 32 * 34);
    lm_ggml_get_type_traits_cpu(tr->vec_dot_type)->from_float(x.data(), xq.data(), cols);
    FILE * fx = fopen("x.f32", "wb"); fwrite(x.data(), 4, cols, fx); fclose(fx);
    for (int r = 0; r < rows; r++) {
        float s;
        tr->vec_dot(cols, &s, 0, (char *) t->data + r * (cols / 32 * 17), 0, xq.data(), 0, 1);
        printf("%.9g\n", s);
    }
    return 0;
}
