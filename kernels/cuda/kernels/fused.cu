// fused.cu: element-wise steps of a transformer block fused into one pass
// over the activations (each removes a round trip through device memory).

// add_rms_norm: the residual add then the next RMSNorm, in one kernel:
//   x[r][i] += y[r][i];  h[r][i] = x[r][i] / sqrt(mean_i(x[r]^2) + eps) * w[i].
// x, y, h: [rows][n] f32 (h must not alias x or y); w: [n] f32 or null.
// Grid: rows; block: a multiple of 32 threads. Each thread keeps the sums it
// wrote so the normalisation reads x from registers, not memory, for n up to
// ADDNORM_VPT * blockDim.x values per row; longer rows re-read x.
#define ADDNORM_VPT 16
extern "C" __global__ void add_rms_norm(float* x, const float* y, const float* w, float* h, int n, float eps) {
    __shared__ float sh[32];
    float* xr = x + (u64)blockIdx.x * n;
    const float* yr = y + (u64)blockIdx.x * n;
    float* hr = h + (u64)blockIdx.x * n;
    float keep[ADDNORM_VPT];
    float ss = 0.0f;
    int j = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x, j++) {
        float v = xr[i] + yr[i];
        xr[i] = v;
        ss += v * v;
        if (j < ADDNORM_VPT) keep[j] = v;
    }
    ss = block_sum(ss, sh);
    float scale = rsqrtf(ss / (float)n + eps);
    j = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x, j++) {
        float v = (j < ADDNORM_VPT ? keep[j] : xr[i]) * scale;
        hr[i] = w ? v * w[i] : v;
    }
}
