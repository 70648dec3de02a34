// norm.cu: RMSNorm and the element-wise kernels of a transformer block.

// rms_norm: out[r][i] = x[r][i] / sqrt(mean_i(x[r]^2) + eps) * w[i].
// x, out: [rows][n] f32 (out may alias x); w: [n] f32 or null (no weight).
// Grid: rows; block: a multiple of 32 threads (the host gives about n/4).
// The sum of squares is accumulated in float per thread, then reduced.
extern "C" __global__ void rms_norm(float* out, const float* x, const float* w, int n, float eps) {
    __shared__ float sh[32];
    const float* xr = x + (u64)blockIdx.x * n;
    float* o = out + (u64)blockIdx.x * n;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss += xr[i] * xr[i];
    ss = block_sum(ss, sh);
    float scale = rsqrtf(ss / (float)n + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float v = xr[i] * scale;
        o[i] = w ? v * w[i] : v;
    }
}

// add: out[i] = a[i] + b[i] for i < n (residual add; out may alias a or b).
extern "C" __global__ void add_f32(float* out, const float* a, const float* b, u64 n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

// add_bias: x[t][i] += bias[i] for x [rows][n] (qwen2's QKV biases).
extern "C" __global__ void add_bias(float* x, const float* bias, int rows, int n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (u64)rows * n) x[i] += bias[i % n];
}

// silu_mul: out[i] = silu(gate[i]) * up[i] with silu(g) = g / (1 + exp(-g)).
// gate and up may be two halves of one fused buffer; out may alias gate.
extern "C" __global__ void silu_mul(float* out, const float* gate, const float* up, u64 n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

// silu_mul_split: gate/up fused as rows of [gate ffn | up ffn]:
// in [rows][2*ffn], out [rows][ffn]; out[r][i] = silu(in[r][i]) * in[r][ffn+i].
extern "C" __global__ void silu_mul_split(float* out, const float* in, int rows, int ffn) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (u64)rows * ffn) return;
    u64 r = i / ffn, c = i % ffn;
    float g = in[r * 2 * ffn + c];
    out[i] = g / (1.0f + expf(-g)) * in[r * 2 * ffn + ffn + c];
}

// gather_rows_f32: out[i][c] = in[idx[i]][c] for i < n; in [*][cols], out [n][cols].
// Grid: n; block: any.
extern "C" __global__ void gather_rows_f32(float* out, const float* in, const i32* idx, int cols) {
    const float* src = in + (u64)idx[blockIdx.x] * cols;
    float* dst = out + (u64)blockIdx.x * cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) dst[c] = src[c];
}
