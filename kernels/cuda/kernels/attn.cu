// attn.cu: paged attention over the F16 KV cache.
//
// KV cache of one layer: kc, vc [slots][Hk*D] F16, slot = page*pageSize + r.
// A sequence's page table lists its pages in position order: position p is
// slot tables[s*maxPages + p/pageSize]*pageSize + p%pageSize.
// Query head h uses KV head h / G with G = Hq/Hk (grouped-query attention):
// heads kh*G .. kh*G+G-1 share KV head kh. Token t attends causally to
// positions 0 .. npos[t]-1 of its sequence seq[t] (npos = pos + 1).
// Scores are scale * q.k accumulated in float; the softmax is the online
// (running max) form; V is accumulated in float.

#define ATT_MAXG 8   // query heads per KV head
#define ATT_MAXDL 8  // D/32, so D <= 256
#define ATT_WARPS 4

// attn_decode_f16 (split-K "flash decoding"): block (t*Hk + kh, split)
// handles positions [split*splitLen, min(npos[t], (split+1)*splitLen)) for the
// G heads of KV head kh and writes unnormalised partial results:
//   pml  [T*Hq][nsplit][2]  (running max m, sum of exp l)
//   pacc [T*Hq][nsplit][D]  (sum of exp * v)
// attn_combine merges the splits. q: [T][Hq][D] f32. Block: 128 threads.
// Requirements: D % 32 == 0, D <= 256, G <= 8.
extern "C" __global__ void attn_decode_f16(const float* q, const u16* kc, const u16* vc,
                                           const i32* tables, int maxPages, const i32* seq,
                                           const i32* npos, int Hq, int Hk, int D, int pageSize,
                                           int splitLen, float scale, float* pml, float* pacc) {
    __shared__ float qs[ATT_MAXG * 256];
    __shared__ float wm[ATT_WARPS][ATT_MAXG], wl[ATT_WARPS][ATT_MAXG];
    __shared__ float wacc[ATT_WARPS][ATT_MAXG * 256];
    int t = blockIdx.x / Hk, kh = blockIdx.x % Hk;
    int split = blockIdx.y, nsplit = gridDim.y;
    int G = Hq / Hk, DL = D / 32;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int n = npos[t];
    int start = split * splitLen, end = min(n, start + splitLen);
    const i32* table = tables + (u64)seq[t] * maxPages;
    const float* qt = q + ((u64)t * Hq + kh * G) * D;
    for (int i = threadIdx.x; i < G * D; i += blockDim.x) qs[i] = qt[i];
    __syncthreads();

    float m[ATT_MAXG], l[ATT_MAXG], acc[ATT_MAXG][ATT_MAXDL];
#pragma unroll
    for (int h = 0; h < ATT_MAXG; h++) {
        m[h] = -INFINITY;
        l[h] = 0.0f;
#pragma unroll
        for (int i = 0; i < ATT_MAXDL; i++) acc[h][i] = 0.0f;
    }
    u64 rowLen = (u64)Hk * D;
    for (int p = start + warp; p < end; p += ATT_WARPS) {
        u64 slot = (u64)table[p / pageSize] * pageSize + p % pageSize;
        const u16* kr = kc + slot * rowLen + kh * D;
        const u16* vr = vc + slot * rowLen + kh * D;
        float kv[ATT_MAXDL], vv[ATT_MAXDL];
#pragma unroll
        for (int i = 0; i < ATT_MAXDL; i++) {
            kv[i] = i < DL ? h2f(kr[lane + 32 * i]) : 0.0f;
            vv[i] = i < DL ? h2f(vr[lane + 32 * i]) : 0.0f;
        }
#pragma unroll
        for (int h = 0; h < ATT_MAXG; h++) {
            if (h < G) {
                float s = 0.0f;
#pragma unroll
                for (int i = 0; i < ATT_MAXDL; i++)
                    if (i < DL) s += qs[h * D + lane + 32 * i] * kv[i];
                s = warp_sum(s) * scale;
                float mn = fmaxf(m[h], s);
                float alpha = expf(m[h] - mn);
                float e = expf(s - mn);
                l[h] = l[h] * alpha + e;
#pragma unroll
                for (int i = 0; i < ATT_MAXDL; i++) acc[h][i] = acc[h][i] * alpha + e * vv[i];
                m[h] = mn;
            }
        }
    }
#pragma unroll
    for (int h = 0; h < ATT_MAXG; h++) {
        if (h < G) {
            if (lane == 0) {
                wm[warp][h] = m[h];
                wl[warp][h] = l[h];
            }
#pragma unroll
            for (int i = 0; i < ATT_MAXDL; i++)
                if (i < DL) wacc[warp][h * D + lane + 32 * i] = acc[h][i];
        }
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < G * D; idx += blockDim.x) {
        int h = idx / D, d = idx % D;
        float M = -INFINITY;
        for (int w = 0; w < ATT_WARPS; w++) M = fmaxf(M, wm[w][h]);
        float L = 0.0f, A = 0.0f;
        if (M != -INFINITY) {
            for (int w = 0; w < ATT_WARPS; w++) {
                float f = expf(wm[w][h] - M);
                L += wl[w][h] * f;
                A += wacc[w][h * D + d] * f;
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

// attn_combine: out[r][d] = sum_s pacc[r][s][d] e^{m_s - M} / sum_s l_s e^{m_s - M}
// with M = max_s m_s, for r < rows = T*Hq. out: [T][Hq][D] f32.
// Grid: rows; block: any (128).
extern "C" __global__ void attn_combine(const float* pml, const float* pacc, float* out, int nsplit, int D) {
    int r = blockIdx.x;
    const float* ml = pml + (u64)r * nsplit * 2;
    float M = -INFINITY;
    for (int s = 0; s < nsplit; s++) M = fmaxf(M, ml[2 * s]);
    float L = 0.0f;
    if (M != -INFINITY)
        for (int s = 0; s < nsplit; s++) L += ml[2 * s + 1] * expf(ml[2 * s] - M);
    float inv = L > 0.0f ? 1.0f / L : 0.0f;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float a = 0.0f;
        if (M != -INFINITY)
            for (int s = 0; s < nsplit; s++) a += pacc[((u64)r * nsplit + s) * D + d] * expf(ml[2 * s] - M);
        out[(u64)r * D + d] = a * inv;
    }
}

#define PRE_KC 32  // keys per chunk (one per lane)

// attn_prefill_f16: tiled causal attention for runs of consecutive tokens of
// one sequence. Tile i covers batch tokens tileStart[i] .. tileStart[i]+
// tileLen[i]-1, all of sequence seq[tileStart[i]] at consecutive positions;
// block (i, kh) computes the tileLen*G query rows of KV head kh, reading
// each chunk of 32 keys/values once into shared memory for all rows.
// Row r of the tile: token tileStart + r/G, head kh*G + r%G. Rows per block
// R = tileLen*G <= 32 and (R * D * 4 + 2 * 32 * (D + 2) * 2) bytes of shared
// memory (dynamic). Warp w owns rows w, w+4, ... . Block: 128 threads.
// q, out: [T][Hq][D] f32.
extern "C" __global__ void attn_prefill_f16(const float* q, const u16* kc, const u16* vc,
                                            const i32* tables, int maxPages, const i32* seq,
                                            const i32* npos, const i32* tileStart,
                                            const i32* tileLen, int Hq, int Hk, int D,
                                            int pageSize, float scale, float* out) {
    extern __shared__ float smem[];
    int tile = blockIdx.x, kh = blockIdx.y;
    int t0 = tileStart[tile], nt = tileLen[tile];
    int G = Hq / Hk, DL = D / 32, R = nt * G;
    int KS = D + 2;  // padded K/V row stride in halves (odd word stride: no bank conflicts)
    float* qs = smem;                        // [R][D]
    u16* ks = (u16*)(smem + R * D);          // [32][KS]
    u16* vs = ks + PRE_KC * KS;              // [32][KS]
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const i32* table = tables + (u64)seq[t0] * maxPages;
    for (int i = threadIdx.x; i < R * D; i += blockDim.x) {
        int r = i / D, d = i % D;
        int tt = t0 + r / G, h = kh * G + r % G;
        qs[i] = q[((u64)tt * Hq + h) * D + d];
    }
    const int RPW = 8;  // rows per warp at most (R <= 32, 4 warps)
    float m[RPW], l[RPW], acc[RPW][ATT_MAXDL];
#pragma unroll
    for (int i = 0; i < RPW; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
#pragma unroll
        for (int j = 0; j < ATT_MAXDL; j++) acc[i][j] = 0.0f;
    }
    int last = npos[t0 + nt - 1];  // keys 0 .. last-1 are needed by the last row
    u64 rowLen = (u64)Hk * D;
    for (int c0 = 0; c0 < last; c0 += PRE_KC) {
        __syncthreads();
        for (int i = threadIdx.x; i < PRE_KC * D; i += blockDim.x) {
            int j = i / D, d = i % D, p = c0 + j;
            u16 kx = 0, vx = 0;
            if (p < last) {
                u64 slot = (u64)table[p / pageSize] * pageSize + p % pageSize;
                kx = kc[slot * rowLen + kh * D + d];
                vx = vc[slot * rowLen + kh * D + d];
            }
            ks[j * KS + d] = kx;
            vs[j * KS + d] = vx;
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < RPW; i++) {
            int r = warp + ATT_WARPS * i;
            if (r >= R) continue;
            int rn = npos[t0 + r / G];  // this row sees keys 0 .. rn-1
            int key = c0 + lane;
            float s = -INFINITY;
            if (key < rn) {
                float a = 0.0f;
                const float* qr = qs + r * D;
                const u16* kr = ks + lane * KS;
                for (int d = 0; d < D; d++) a += qr[d] * h2f(kr[d]);
                s = a * scale;
            }
            float mn = fmaxf(m[i], warp_max(s));
            if (mn == -INFINITY) continue;
            float e = key < rn ? expf(s - mn) : 0.0f;
            float alpha = expf(m[i] - mn);
            l[i] = l[i] * alpha + warp_sum(e);
#pragma unroll
            for (int j = 0; j < ATT_MAXDL; j++) acc[i][j] *= alpha;
            for (int j = 0; j < PRE_KC; j++) {
                float ej = __shfl_sync(FULL_MASK, e, j);
                if (ej == 0.0f) continue;
#pragma unroll
                for (int x = 0; x < ATT_MAXDL; x++)
                    if (x < DL) acc[i][x] += ej * h2f(vs[j * KS + lane + 32 * x]);
            }
            m[i] = mn;
        }
    }
#pragma unroll
    for (int i = 0; i < RPW; i++) {
        int r = warp + ATT_WARPS * i;
        if (r >= R) continue;
        int tt = t0 + r / G, h = kh * G + r % G;
        float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
#pragma unroll
        for (int x = 0; x < ATT_MAXDL; x++)
            if (x < DL) out[((u64)tt * Hq + h) * D + lane + 32 * x] = acc[i][x] * inv;
    }
}
