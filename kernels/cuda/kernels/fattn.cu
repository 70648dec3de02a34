// fattn.cu: prefill attention on tensor cores (flash-attention style) over
// the paged F16 KV cache. Same inputs, tiles and output as attn_prefill_f16
// (attn.cu); the products run as mma.sync m16n8k16 (F16 inputs, f32
// accumulation) and the softmax is the online form over chunks of keys.
//
// Block (x, kh) handles tile ntiles-1-x (longest blocks first): the
// R = tileLen*G query rows of KV head kh for the
// tile's tokens (row r: token tileStart + r/G, head kh*G + r%G), R <= 64.
// 4 warps; warp w owns rows 16w .. 16w+15 (rows >= R are padding: zero
// queries, never written). Per chunk of FA_KC = 64 key positions:
//   1. cp.async gathers the chunk's K and V rows (16-byte copies; slot =
//      table[p/pageSize]*pageSize + p%pageSize) into shared memory
//      ks, vs [FA_KC][D+8] F16 (row stride D+8 halves: 16-byte aligned rows,
//      and the 8 rows an ldmatrix phase reads fall in distinct banks).
//      V of the chunk loads while S is computed; the next chunk's K while
//      P·V is computed.
//   2. S [16][64] = Q·Kᵀ per warp: Q is held as A fragments in registers
//      (rounded to F16 once, see split below), K fragments come from
//      ldmatrix.x4.
//   3. causal mask per row (key < npos of the row's token), scores scaled
//      into the log2 domain (scale*log2 e), online softmax: running max m
//      and running sum l per row in f32; P = 2^(s-m) rounded to F16 (l sums
//      the rounded values, so the normalisation matches what is multiplied).
//   4. O [16][D] += P·V: P's A fragments are S's accumulator fragments
//      (no shuffles), V fragments come from ldmatrix.x4.trans.
// split = 1 keeps float32 precision: Q and P are each carried as two F16
// terms, hi = f16(x) and lo = f16(x - hi), and both products run (Qhi·Kᵀ +
// Qlo·Kᵀ, Phi·V + Plo·V; K and V are F16 in the cache, so exact): twice
// the tensor-core work, scores and weights within about 2^-22 relative
// instead of 2^-11, the precision of attn_prefill_f16 and attn_decode_f16.
// split = 0 is the plain F16 form.
// out = O / l, f32, [T][Hq][D] as attn_prefill_f16. Warps whose rows need
// no key of a chunk skip its products. Head dims 64 and 128.
// Dynamic shared memory: 2 * FA_KC * (D+8) * 2 bytes (18432 for D 64,
// 34816 for D 128). Block: 128 threads. Requires sm_80 (cp.async).
// NVRTC 11.8 / ptxas: 234 registers on sm_80, 223 on sm_90, no stack
// frame (no spills): two blocks (8 warps) per SM.
//
// Fragment layouts relied on (PTX ISA, "Matrix Fragments for mma.m16n8k16
// with floating point type" and "ldmatrix"), with g = lane>>2 (groupID),
// c = lane&3 (threadID_in_group); registers hold two F16, the lower index
// in the low half:
//   A (16x16, row): reg0 = A[g][2c..2c+1], reg1 = A[g+8][2c..], reg2 =
//                   A[g][2c+8..], reg3 = A[g+8][2c+8..]
//   B (16x8, col):  reg0 = B[2c..2c+1][g], reg1 = B[2c+8..2c+9][g]
//   C/D (16x8 f32): c0,c1 = C[g][2c..2c+1], c2,c3 = C[g+8][2c..2c+1]
//   ldmatrix.m8n8.x4: lanes 8i..8i+7 give the row addresses of matrix i;
//                   register i of lane l = M_i[l>>2][2(l&3)..+1], with
//                   .trans = M_i[2(l&3)][l>>2], M_i[2(l&3)+1][l>>2].
// kernels/cuda/fattn_sim_test.go places values in 32 simulated lanes with
// this file's index arithmetic, applies these rules and checks the result
// against plain matrix products.

#define FA_ROWS 64  // query rows per block (4 warps x 16)
#define FA_KC 64    // key positions per chunk
#define FA_LOG2E 1.4426950408889634f

__device__ __forceinline__ u32 fa_smem_addr(const void* p) {
    u32 a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

// fa_cp16 copies 16 bytes global -> shared, or writes 16 zero bytes when
// n is 0 (src is then not read).
__device__ __forceinline__ void fa_cp16(u32 dst, const void* src, int n) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(n) : "memory");
}
__device__ __forceinline__ void fa_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void fa_wait1() { asm volatile("cp.async.wait_group 1;" ::: "memory"); }
__device__ __forceinline__ void fa_wait0() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }

__device__ __forceinline__ void fa_ldsm4(u32* r, u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void fa_ldsm4t(u32* r, u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// fa_mma: c += A·B for one m16n8k16 tile (F16 inputs, f32 accumulators).
__device__ __forceinline__ void fa_mma(float* c, const u32* a, u32 b0, u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ u32 fa_pack(u16 lo, u16 hi) { return (u32)lo | ((u32)hi << 16); }

// fa_split rounds x to F16 (hi) and, with split, its remainder to F16 (lo;
// else 0).
__device__ __forceinline__ u16 fa_split(float x, int split, u16* lo) {
    u16 hi = f2h(x);
    *lo = split ? f2h(x - h2f(hi)) : (u16)0;
    return hi;
}

// fa_qpair sets *hi, *lo to q[c], q[c+1] of a query row as F16 pairs
// (fa_split; 0 for padding).
__device__ __forceinline__ void fa_qpair(const float* row, int c, int split, u32* hi, u32* lo) {
    if (row == 0) {
        *hi = *lo = 0;
        return;
    }
    float2 v = *(const float2*)(row + c);
    u16 l0, l1;
    u16 h0 = fa_split(v.x, split, &l0), h1 = fa_split(v.y, split, &l1);
    *hi = fa_pack(h0, h1);
    *lo = fa_pack(l0, l1);
}

// fa_load queues the copies of chunk c0's rows of cache (K or V of KV head
// kh) into the shared buffer at buf; positions >= last are zero-filled.
template <int D>
__device__ __forceinline__ void fa_load(u32 buf, const u16* cache, const i32* table, int pageSize, u64 rowLen,
                                        int kh, int c0, int last) {
    const int SEG = D / 8;  // 16-byte segments per row
    for (int i = threadIdx.x; i < FA_KC * SEG; i += blockDim.x) {
        int j = i / SEG, s = i % SEG, p = c0 + j;
        const u16* src = cache;
        int n = 0;
        if (p < last) {
            u64 slot = (u64)table[p / pageSize] * pageSize + p % pageSize;
            src = cache + slot * rowLen + kh * D + s * 8;
            n = 16;
        }
        fa_cp16(buf + (u32)(j * (D + 8) + s * 8) * 2, src, n);
    }
}

template <int D>
__device__ __forceinline__ void fa_prefill(const float* q, const u16* kc, const u16* vc, const i32* tables,
                                           int maxPages, const i32* seq, const i32* npos, const i32* tileStart,
                                           const i32* tileLen, int Hq, int Hk, int pageSize, float scale, int split,
                                           float* out, u16* sm) {
    const int KS = D + 8;   // shared row stride (halves)
    const int NT = D / 8;   // 8-wide output column tiles
    const int KT = D / 16;  // 16-deep steps over the head dim
    const int ST = FA_KC / 8;
    // Tiles in reverse: the last tiles of a prompt attend to the most keys,
    // so the longest blocks start first and the short ones fill the tail.
    int tile = gridDim.x - 1 - blockIdx.x, kh = blockIdx.y;
    int t0 = tileStart[tile], nt = tileLen[tile];
    int G = Hq / Hk, R = nt * G;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int g = lane >> 2, c = lane & 3;
    const i32* table = tables + (u64)seq[t0] * maxPages;
    int last = npos[t0 + nt - 1];  // keys 0 .. last-1 are needed by the last row
    u64 rowLen = (u64)Hk * D;
    u32 ksb = fa_smem_addr(sm), vsb = ksb + FA_KC * KS * 2;

    // This lane's rows: r0 (fragment elements 0,1) and r1 = r0+8 (2,3).
    int rb = warp * 16, r0 = rb + g, r1 = r0 + 8;
    int n0 = npos[t0 + min(r0 / G, nt - 1)], n1 = npos[t0 + min(r1 / G, nt - 1)];
    int wlast = npos[t0 + min((rb + 15) / G, nt - 1)];  // keys the warp needs
    bool active = rb < R;
    const float* q0 = r0 < R ? q + ((u64)(t0 + r0 / G) * Hq + kh * G + r0 % G) * D : 0;
    const float* q1 = r1 < R ? q + ((u64)(t0 + r1 / G) * Hq + kh * G + r1 % G) * D : 0;
    u32 qa[KT][4], ql[KT][4];  // A fragments of Q (hi) and its remainder (lo)
#pragma unroll
    for (int k = 0; k < KT; k++) {
        int col = k * 16 + 2 * c;
        fa_qpair(q0, col, split, &qa[k][0], &ql[k][0]);
        fa_qpair(q1, col, split, &qa[k][1], &ql[k][1]);
        fa_qpair(q0, col + 8, split, &qa[k][2], &ql[k][2]);
        fa_qpair(q1, col + 8, split, &qa[k][3], &ql[k][3]);
    }
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    float o[NT][4];
#pragma unroll
    for (int j = 0; j < NT; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float sl = scale * FA_LOG2E;
    // ldmatrix row addresses of this lane: matrix i = lane>>3, row lane&7.
    int mi = lane >> 3, mr = lane & 7;
    // K (B of Q·Kᵀ, non-transposed): matrices (keys +0, dims +0), (+0, +8),
    // (+8, +0), (+8, +8) -> regs 0,1 = n-tile of keys 16j, regs 2,3 = 16j+8.
    u32 kaddr = ksb + (u32)(((mi >> 1) * 8 + mr) * KS + (mi & 1) * 8) * 2;
    // V (B of P·V, transposed): matrices (keys +0, dims +0), (+8, +0),
    // (+0, +8), (+8, +8) -> regs 0,1 = dims 16j.., regs 2,3 = dims 16j+8...
    u32 vaddr = vsb + (u32)(((mi & 1) * 8 + mr) * KS + (mi >> 1) * 8) * 2;

    fa_load<D>(ksb, kc, table, pageSize, rowLen, kh, 0, last);
    fa_commit();
    for (int c0 = 0; c0 < last; c0 += FA_KC) {
        fa_load<D>(vsb, vc, table, pageSize, rowLen, kh, c0, last);
        fa_commit();
        fa_wait1();  // K of this chunk has landed
        __syncthreads();
        bool run = active && c0 < wlast;
        u32 pa[FA_KC / 16][4], pl[FA_KC / 16][4];  // P (hi) and remainder (lo)
        if (run) {
            float s[ST][4];
#pragma unroll
            for (int j = 0; j < ST; j++) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
            for (int k = 0; k < KT; k++) {
#pragma unroll
                for (int j = 0; j < FA_KC / 16; j++) {
                    u32 b[4];
                    fa_ldsm4(b, kaddr + (u32)(j * 16 * KS + k * 16) * 2);
                    fa_mma(s[2 * j], qa[k], b[0], b[1]);
                    fa_mma(s[2 * j + 1], qa[k], b[2], b[3]);
                    if (split) {
                        fa_mma(s[2 * j], ql[k], b[0], b[1]);
                        fa_mma(s[2 * j + 1], ql[k], b[2], b[3]);
                    }
                }
            }
            float mx[2] = {m[0], m[1]};
#pragma unroll
            for (int j = 0; j < ST; j++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int key = c0 + j * 8 + 2 * c + (e & 1);
                    float v = key < (e < 2 ? n0 : n1) ? s[j][e] * sl : -INFINITY;
                    s[j][e] = v;
                    mx[e >> 1] = fmaxf(mx[e >> 1], v);
                }
            }
#pragma unroll
            for (int h = 0; h < 2; h++) {
                mx[h] = fmaxf(mx[h], __shfl_xor_sync(FULL_MASK, mx[h], 1));
                mx[h] = fmaxf(mx[h], __shfl_xor_sync(FULL_MASK, mx[h], 2));
            }
            float base[2], alpha[2];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                base[h] = mx[h] == -INFINITY ? 0.0f : mx[h];
                alpha[h] = exp2f(m[h] - base[h]);
                l[h] *= alpha[h];
                m[h] = mx[h];
            }
#pragma unroll
            for (int j = 0; j < NT; j++) {
                o[j][0] *= alpha[0];
                o[j][1] *= alpha[0];
                o[j][2] *= alpha[1];
                o[j][3] *= alpha[1];
            }
#pragma unroll
            for (int j = 0; j < ST; j++) {
                u16 p[4], lo[4];
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    p[e] = fa_split(exp2f(s[j][e] - base[e >> 1]), split, &lo[e]);
                    l[e >> 1] += h2f(p[e]) + h2f(lo[e]);
                }
                // S accumulator tile j = keys 8j..8j+7 is half of P's A
                // fragment for keys 16(j/2)..: regs (j&1)*2 (row r0), +1 (r1).
                pa[j >> 1][(j & 1) * 2] = fa_pack(p[0], p[1]);
                pa[j >> 1][(j & 1) * 2 + 1] = fa_pack(p[2], p[3]);
                pl[j >> 1][(j & 1) * 2] = fa_pack(lo[0], lo[1]);
                pl[j >> 1][(j & 1) * 2 + 1] = fa_pack(lo[2], lo[3]);
            }
        }
        fa_wait0();  // V of this chunk has landed
        __syncthreads();  // and every warp is done reading K
        if (c0 + FA_KC < last) {
            fa_load<D>(ksb, kc, table, pageSize, rowLen, kh, c0 + FA_KC, last);
        }
        fa_commit();
        if (run) {
#pragma unroll
            for (int k = 0; k < FA_KC / 16; k++) {
#pragma unroll
                for (int j = 0; j < NT / 2; j++) {
                    u32 b[4];
                    fa_ldsm4t(b, vaddr + (u32)(k * 16 * KS + j * 16) * 2);
                    fa_mma(o[2 * j], pa[k], b[0], b[1]);
                    fa_mma(o[2 * j + 1], pa[k], b[2], b[3]);
                    if (split) {
                        fa_mma(o[2 * j], pl[k], b[0], b[1]);
                        fa_mma(o[2 * j + 1], pl[k], b[2], b[3]);
                    }
                }
            }
        }
        __syncthreads();  // every warp is done reading V
    }
    fa_wait0();
#pragma unroll
    for (int h = 0; h < 2; h++) {
        l[h] += __shfl_xor_sync(FULL_MASK, l[h], 1);
        l[h] += __shfl_xor_sync(FULL_MASK, l[h], 2);
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int r = h == 0 ? r0 : r1;
        if (r >= R) continue;
        float inv = l[h] > 0.0f ? 1.0f / l[h] : 0.0f;
        float* orow = out + ((u64)(t0 + r / G) * Hq + kh * G + r % G) * D;
#pragma unroll
        for (int j = 0; j < NT; j++) {
            float2 v;
            v.x = o[j][2 * h] * inv;
            v.y = o[j][2 * h + 1] * inv;
            *(float2*)(orow + j * 8 + 2 * c) = v;
        }
    }
}

// attn_prefill_mma: arguments as attn_prefill_f16 plus split (0: F16 Q
// and P; 1: hi+lo F16 pairs, float32 precision); tiles from
// PrefillTilesMMA (tileLen*G <= 64); D is 64 or 128. Grid (ntiles, Hk),
// block 128 threads, dynamic shared memory 2*64*(D+8)*2 bytes.
extern "C" __global__ void attn_prefill_mma(const float* q, const u16* kc, const u16* vc, const i32* tables,
                                            int maxPages, const i32* seq, const i32* npos, const i32* tileStart,
                                            const i32* tileLen, int Hq, int Hk, int D, int pageSize, float scale,
                                            int split, float* out) {
    extern __shared__ uint4 fa_sm[];
    u16* sm = (u16*)fa_sm;
    if (D == 128) {
        fa_prefill<128>(q, kc, vc, tables, maxPages, seq, npos, tileStart, tileLen, Hq, Hk, pageSize, scale, split, out, sm);
    } else if (D == 64) {
        fa_prefill<64>(q, kc, vc, tables, maxPages, seq, npos, tileStart, tileLen, Hq, Hk, pageSize, scale, split, out, sm);
    }
}
