// sample.cu: token selection on the device, one block per row of logits.
//
// Keys: a float maps to an unsigned key with the same order (larger float,
// larger key), so "the k-th largest value" is found by bisecting the 32 key
// bits with block-wide counts; no sort is needed. NaN logits count as -inf.

__device__ __forceinline__ u32 fkey(float x) {
    if (x != x) x = -INFINITY;
    u32 b = __float_as_uint(x);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// argmax_f32: out[r] = the index of the largest logits[r][i] (the lowest index
// on ties). logits [rows][vocab] f32. Grid: rows; block: 1024 (or any
// multiple of 32).
extern "C" __global__ void argmax_f32(const float* logits, int vocab, i32* out) {
    __shared__ u32 shk[32];
    __shared__ i32 shi[32];
    const float* x = logits + (u64)blockIdx.x * vocab;
    u32 bk = 0;
    i32 bi = 0x7fffffff;
    // Eight loads per thread in flight (one block reads the whole row, so
    // the loop is latency bound); the (key, lowest index) maximum does not
    // depend on the order the values are visited in.
    int i = threadIdx.x, st = blockDim.x;
    for (; i + 7 * st < vocab; i += 8 * st) {
        float v[8];
#pragma unroll
        for (int j = 0; j < 8; j++) v[j] = x[i + j * st];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            u32 k = fkey(v[j]);
            if (k > bk || (k == bk && i + j * st < bi)) { bk = k; bi = i + j * st; }
        }
    }
    for (; i < vocab; i += st) {
        u32 k = fkey(x[i]);
        if (k > bk || (k == bk && i < bi)) { bk = k; bi = i; }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        u32 k2 = __shfl_xor_sync(FULL_MASK, bk, o);
        i32 i2 = __shfl_xor_sync(FULL_MASK, bi, o);
        if (k2 > bk || (k2 == bk && i2 < bi)) { bk = k2; bi = i2; }
    }
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) { shk[w] = bk; shi[w] = bi; }
    __syncthreads();
    if (w == 0) {
        int nw = blockDim.x >> 5;
        bk = lane < nw ? shk[lane] : 0u;
        bi = lane < nw ? shi[lane] : 0x7fffffff;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            u32 k2 = __shfl_xor_sync(FULL_MASK, bk, o);
            i32 i2 = __shfl_xor_sync(FULL_MASK, bi, o);
            if (k2 > bk || (k2 == bk && i2 < bi)) { bk = k2; bi = i2; }
        }
        if (lane == 0) out[blockIdx.x] = bi == 0x7fffffff ? 0 : bi;
    }
}

// count_ge returns how many keys of x are >= key (to every thread).
__device__ u32 count_ge(const float* x, int vocab, u32 key, u32* sh) {
    u32 c = 0;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) c += fkey(x[i]) >= key;
    return block_sum_u32(c, sh);
}

// mass_ge returns sum of exp((x_i - mx) * invT) over keys >= key.
__device__ float mass_ge(const float* x, int vocab, u32 key, float mx, float invT, float* sh) {
    float s = 0.0f;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x)
        if (fkey(x[i]) >= key) s += expf((x[i] - mx) * invT);
    return block_sum(s, sh);
}

// sample_topk_topp: one token per row r from softmax(logits[r] / temp[r])
// restricted to
//   top-k: values >= the topk[r]-th largest (topk <= 0 or >= vocab: off);
//   top-p: then the values >= v*, v* the largest value whose kept mass
//          (values >= v*) is at least topp[r] of the top-k mass (topp >= 1: off).
// Ties at either cut are all kept. The token is the first index i (in index
// order) where the running mass of kept tokens exceeds u[r] * (kept mass),
// u in [0, 1). temp[r] must be > 0 (the host uses argmax_f32 for greedy).
// logits [rows][vocab]; temp, topp, u: [rows] f32; topk: [rows] i32; out [rows].
// Grid: rows; block: 1024 threads.
extern "C" __global__ void sample_topk_topp(const float* logits, int vocab, const float* temp,
                                            const i32* topk, const float* topp, const float* u,
                                            i32* out) {
    __shared__ float shf[32];
    __shared__ u32 shu[32];
    __shared__ float scan[1024];
    __shared__ i32 pick;
    int r = blockIdx.x;
    const float* x = logits + (u64)r * vocab;
    float invT = 1.0f / temp[r];
    int k = topk[r];
    float p = topp[r];

    float mx = -INFINITY;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
        float v = x[i];
        if (v == v) mx = fmaxf(mx, v);
    }
    mx = block_max(mx, shf);

    // Top-k: the largest key tk with count(keys >= tk) >= k.
    u32 tk = 0;
    if (k > 0 && k < vocab) {
        for (int bit = 31; bit >= 0; bit--) {
            u32 cand = tk | (1u << bit);
            if (count_ge(x, vocab, cand, shu) >= (u32)k) tk = cand;
        }
    }
    // Top-p over the top-k set: the largest key tp >= tk whose mass is >= p*Z.
    u32 cut = tk;
    if (p < 1.0f) {
        float Z = mass_ge(x, vocab, tk, mx, invT, shf);
        float need = p * Z;
        u32 tp = 0;
        for (int bit = 31; bit >= 0; bit--) {
            u32 cand = tp | (1u << bit);
            u32 c = cand > tk ? cand : tk;
            if (mass_ge(x, vocab, c, mx, invT, shf) >= need) tp = cand;
        }
        cut = tp > tk ? tp : tk;
    }

    // Inverse CDF in index order: each thread owns a contiguous chunk.
    int chunk = (vocab + blockDim.x - 1) / blockDim.x;
    int lo = threadIdx.x * chunk, hi = min(vocab, lo + chunk);
    float local = 0.0f;
    for (int i = lo; i < hi; i++)
        if (fkey(x[i]) >= cut) local += expf((x[i] - mx) * invT);
    scan[threadIdx.x] = local;
    if (threadIdx.x == 0) pick = -1;
    __syncthreads();
    // Inclusive scan (Hillis-Steele) over the per-thread masses.
    for (int off = 1; off < (int)blockDim.x; off <<= 1) {
        float add = threadIdx.x >= (unsigned)off ? scan[threadIdx.x - off] : 0.0f;
        __syncthreads();
        scan[threadIdx.x] += add;
        __syncthreads();
    }
    float total = scan[blockDim.x - 1];
    float target = u[r] * total;
    float before = scan[threadIdx.x] - local;
    if (local > 0.0f && target >= before && target < before + local) {
        float run = before;
        int last = -1;
        for (int i = lo; i < hi; i++) {
            if (fkey(x[i]) < cut) continue;
            last = i;
            run += expf((x[i] - mx) * invT);
            if (run > target) break;
        }
        atomicMax(&pick, last);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        i32 t = pick;
        if (t < 0) {  // rounding put the target past the end: take the last kept index
            for (int i = vocab - 1; i >= 0; i--)
                if (fkey(x[i]) >= cut) { t = i; break; }
        }
        out[r] = t < 0 ? 0 : t;
    }
}
