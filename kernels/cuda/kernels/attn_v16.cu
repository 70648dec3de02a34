// attn_v16.cu: decode attention with 16-byte K/V loads.
//
// attn_decode_v16 computes exactly what attn_decode_f16 (attn.cu) computes
// (same arguments, same split partials pml/pacc for attn_combine) but reads
// each key and value row with 128-bit loads: lane j of a warp holds dims
// [8*(j%LPK), 8*(j%LPK)+8) of the key group j/LPK, with LPK = D/8 lanes
// per key and KPW = 32/LPK keys per warp per iteration (D 64: 4 keys, 128:
// 2, 256: 1). A key group keeps its own online softmax per head; the block
// merges its NG = ATT_WARPS*KPW groups at the end, like attn_decode_f16
// merges its warps. Requirements: D in {32, 64, 128, 256} (LPK divides
// 32), G <= 8; rows are 16-byte aligned (D and Hk*D multiples of 8 halves).
// Grid (T*Hk, nsplit); block: ATT_WARPS*32 = 128 threads.
#define V16_MAXNG 32  // key groups per block: ATT_WARPS * 32 / LPK, LPK >= 4

__device__ __forceinline__ void unpack8(uint4 v, float* o) {
    u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        o[2 * i] = h2f((u16)(w[i] & 0xffff));
        o[2 * i + 1] = h2f((u16)(w[i] >> 16));
    }
}

extern "C" __global__ void attn_decode_v16(const float* q, const u16* kc, const u16* vc,
                                           const i32* tables, int maxPages, const i32* seq,
                                           const i32* npos, int Hq, int Hk, int D, int pageSize,
                                           int splitLen, float scale, float* pml, float* pacc) {
    __shared__ float gm[V16_MAXNG][ATT_MAXG], gl[V16_MAXNG][ATT_MAXG];
    __shared__ float gacc[V16_MAXNG * ATT_MAXG * 32];  // NG*G*D <= 4*32*8*8 floats for any D
    int t = blockIdx.x / Hk, kh = blockIdx.x % Hk;
    int split = blockIdx.y, nsplit = gridDim.y;
    int G = Hq / Hk;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int LPK = D >> 3, KPW = 32 / LPK, NG = ATT_WARPS * KPW;
    int sub = lane / LPK, part = lane % LPK, grp = warp * KPW + sub;
    int n = npos[t];
    int start = split * splitLen, end = min(n, start + splitLen);
    const i32* table = tables + (u64)seq[t] * maxPages;
    const float* qt = q + ((u64)t * Hq + kh * G) * D + part * 8;

    float qv[ATT_MAXG][8], m[ATT_MAXG], l[ATT_MAXG], acc[ATT_MAXG][8];
#pragma unroll
    for (int h = 0; h < ATT_MAXG; h++) {
        m[h] = -INFINITY;
        l[h] = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            qv[h][i] = h < G ? qt[h * D + i] : 0.0f;
            acc[h][i] = 0.0f;
        }
    }
    u64 rowLen = (u64)Hk * D;
    // The loop bound is the same for every lane of a warp (base steps by
    // warp), so the shuffles below always run with the whole warp.
    for (int base = start + warp * KPW; base < end; base += NG) {
        int p = base + sub;
        bool valid = p < end;
        float kf[8], vf[8];
        if (valid) {
            u64 slot = (u64)table[p / pageSize] * pageSize + p % pageSize;
            unpack8(*(const uint4*)(kc + slot * rowLen + kh * D + part * 8), kf);
            unpack8(*(const uint4*)(vc + slot * rowLen + kh * D + part * 8), vf);
        } else {
#pragma unroll
            for (int i = 0; i < 8; i++) kf[i] = vf[i] = 0.0f;
        }
#pragma unroll
        for (int h = 0; h < ATT_MAXG; h++) {
            if (h < G) {
                float s = 0.0f;
#pragma unroll
                for (int i = 0; i < 8; i++) s += qv[h][i] * kf[i];
                for (int o = LPK >> 1; o > 0; o >>= 1) s += __shfl_xor_sync(FULL_MASK, s, o);
                if (valid) {
                    s *= scale;
                    float mn = fmaxf(m[h], s);
                    float alpha = expf(m[h] - mn);
                    float e = expf(s - mn);
                    l[h] = l[h] * alpha + e;
#pragma unroll
                    for (int i = 0; i < 8; i++) acc[h][i] = acc[h][i] * alpha + e * vf[i];
                    m[h] = mn;
                }
            }
        }
    }
#pragma unroll
    for (int h = 0; h < ATT_MAXG; h++) {
        if (h < G) {
            if (part == 0) {
                gm[grp][h] = m[h];
                gl[grp][h] = l[h];
            }
#pragma unroll
            for (int i = 0; i < 8; i++) gacc[((u64)grp * G + h) * D + part * 8 + i] = acc[h][i];
        }
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < G * D; idx += blockDim.x) {
        int h = idx / D, d = idx % D;
        float M = -INFINITY;
        for (int g = 0; g < NG; g++) M = fmaxf(M, gm[g][h]);
        float L = 0.0f, A = 0.0f;
        if (M != -INFINITY) {
            for (int g = 0; g < NG; g++) {
                float f = expf(gm[g][h] - M);
                L += gl[g][h] * f;
                A += gacc[((u64)g * G + h) * D + d] * f;
            }
        }
        u64 row = ((u64)t * Hq + kh * G + h) * nsplit + split;
        pacc[row * D + d] = A;
        if (d == 0) {
            pml[row * 2] = M;
            pml[row * 2 + 1] = L;
        }
    }
}
