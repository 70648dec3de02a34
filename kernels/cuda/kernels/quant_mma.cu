// quant_mma.cu: prefill and large-batch matrix products on tensor cores for
// GGML-typed weights, without a full-matrix dequantization buffer. (Named to
// compile after quant.cu, whose block layouts and scale_min_k4 it uses.)
//
// gemm_mma_<type>: y[t][r] = sum_c W[r][c] * x16[t][c] for t < n, r < rows.
//   W [rows][cols] in its GGML type (row r at byte r*rowBytes, decoded in
//   the units of quant.cu by the T* tile decoders below), x16 [n][cols] F16
//   (the activations, converted once per call by f32_to_f16), y [n][rows]
//   f32.
//
// Block tile: MMA_BM (128) weight rows x MMA_BN (128) tokens; K steps of
// MMA_BK (64) columns. Each K step the block decodes its 128x64 weight tile
// straight from the quantized bytes into shared memory as F16 (one 32-element
// unit per thread for Q8_0/Q4_0/Q4_K, two 16-element units for Q6_K, four
// 8-element units for F16) while its 128x64 activation tile arrives by
// 16-byte cp.async copies, and its 8 warps (2 along rows x 4 along tokens) each run 4x4
// m16n8k16 MMAs per 16 columns on a 64-row x 32-token warp tile with f32
// accumulators. Shared memory: two tiles of 128 rows x MMA_LDS (72) halves =
// 36864 bytes (static, under the 48 KiB static limit); __launch_bounds__
// keeps two blocks per SM so that one block's loads overlap the other's MMAs.
// Rows, tokens and columns past the ends are zero-filled in shared memory and
// never stored. Requires sm_80 (the Go side routes here only for CC >= 80).
//
// Fragment layouts relied on (PTX ISA, "Matrix Fragments for mma.m16n8k16
// with floating point type", .f16 A/B, .f32 C/D). With g = laneid >> 2 and
// q = laneid % 4, and element i of an .f16x2 register pair in the low half
// for the lower index:
//   A (16x16, row): reg0 = (a0,a1) at row g,   cols 2q, 2q+1
//                   reg1 = (a2,a3) at row g+8, cols 2q, 2q+1
//                   reg2 = (a4,a5) at row g,   cols 2q+8, 2q+9
//                   reg3 = (a6,a7) at row g+8, cols 2q+8, 2q+9
//   B (16x8, col):  reg0 = (b0,b1) at rows(k) 2q, 2q+1,   col(n) g
//                   reg1 = (b2,b3) at rows(k) 2q+8, 2q+9, col(n) g
//   C/D (16x8 f32): c0,c1 at row g, cols 2q, 2q+1; c2,c3 at row g+8, same cols
// Here A is the weight tile (rows = weight rows, K contiguous in shared
// memory) and B is the activation tile stored token-major (K contiguous per
// token). Both are read with ldmatrix.m8n8.x4 (PTX ISA, "ldmatrix"): lanes
// 8j..8j+7 give the row addresses of 8x8 matrix j, and register j of lane l
// receives row l/4, columns 2(l%4), 2(l%4)+1 of matrix j: with A's four
// matrices at (rows, cols) offsets (0,0), (8,0), (0,8), (8,8) that is
// exactly A's reg0..reg3; B's at (tokens, cols) (0,0), (0,8), (8,0), (8,8)
// give reg0, reg1 of two 8-token tiles. The 144-byte row stride puts the
// 8 rows of each matrix in distinct banks. mma_test.go replays this index
// math in a 32-lane warp simulator that applies the ldmatrix and mma rules
// above and compares with a plain matmul.
//
// f32_to_bf16: y[i] = bf16(x[i]) (nearest, ties to even; NaN stays NaN) for
// the cuBLAS BF16 GEMM's activations.

#define MMA_BM 128
#define MMA_BN 128
#define MMA_BK 64
#define MMA_LDS (MMA_BK + 8) // shared row stride in halves: 144 B, conflict-free fragment loads
#define MMA_THREADS 256

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define MMA_SM80 1
#else
#define MMA_SM80 0
#endif

// pack_h2 rounds lo and hi to F16 (nearest even) and packs them, lo in the
// low half. On sm_80 one cvt.rn.f16x2.f32 does both: PTX stores the value
// converted from its first source in the upper half, from the second in the
// lower half.
__device__ __forceinline__ u32 pack_h2(float lo, float hi) {
#if MMA_SM80
    u32 r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
#else
    return (u32)f2h(lo) | ((u32)f2h(hi) << 16);
#endif
}

// smem_addr returns the shared-state-space address of p (for ldmatrix and
// cp.async).
__device__ __forceinline__ u32 smem_addr(const void* p) {
    u32 a;
    asm("{ .reg .u64 s; cvta.to.shared.u64 s, %1; cvt.u32.u64 %0, s; }" : "=r"(a) : "l"(p));
    return a;
}

// ldsm_x4 loads four 8x8 F16 matrices: lanes 8j..8j+7 give the addresses
// of rows 0..7 of matrix j (16 bytes each); register j of lane l receives
// row l/4, columns 2(l%4) and 2(l%4)+1 of matrix j (the lower column in
// the low half).
__device__ __forceinline__ void ldsm_x4(u32* r, u32 addr) {
#if MMA_SM80
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
#else
    __trap();
#endif
}

// mma_16816: d += a·b on one m16n8k16 tile (f16 inputs, f32 accumulators).
__device__ __forceinline__ void mma_16816(float* d, const u32* a, const u32* b) {
#if MMA_SM80
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    __trap();
#endif
}

// Tile decoders: unit u (UE elements, the units of quant.cu) of one row
// straight to UE/2 packed F16 pairs h (element 2i in the low half of h[i]).
// The float32 values before rounding are those of quant.cu's Q*::unit
// (same products, same order), but the small integers become floats with
// the exact 2^23 trick (an integer OR and an FADD, full-rate instructions,
// instead of the conversion unit, which would otherwise rival the MMAs
// for time), bytes come in 16-bit loads (the blocks are only 2-byte
// aligned; Q4_K's nibbles in two 16-byte loads) and pack_h2 rounds two
// values per instruction. F16 weights are copied as they are.

// i2f_off returns (float)v - off exactly, for 0 <= v < 2^23 and integer
// off <= 128 (2^23 + v is exact in float32; so is the difference).
__device__ __forceinline__ float i2f_off(u32 v, float off) {
    return __uint_as_float(0x4B000000u | v) - (8388608.0f + off);
}

struct TF16 {
    enum { UE = 8 };
    __device__ static void half(const u8* row, int u, u32* h) {
        uint4 v = *(const uint4*)(row + (size_t)u * 16);
        h[0] = v.x; h[1] = v.y; h[2] = v.z; h[3] = v.w;
    }
};

struct TQ8_0 {
    enum { UE = 32 };
    __device__ static void half(const u8* row, int u, u32* h) {
        const u8* b = row + (size_t)u * 34;
        float d = h2f(ld16(b));
        const u16* qs = (const u16*)(b + 2);
#pragma unroll
        for (int i = 0; i < 16; i++) {
            u32 w = qs[i] ^ 0x8080u; // int8 q as q + 128
            h[i] = pack_h2(i2f_off(w & 0xff, 128.0f) * d, i2f_off(w >> 8, 128.0f) * d);
        }
    }
};

struct TQ4_0 {
    enum { UE = 32 };
    __device__ static void half(const u8* row, int u, u32* h) {
        const u8* b = row + (size_t)u * 18;
        float d = h2f(ld16(b));
        const u16* qs = (const u16*)(b + 2);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            u32 w = qs[i]; // bytes 2i, 2i+1: elements 2i, 2i+1 (low nibbles), 2i+16, 2i+17 (high)
            h[i] = pack_h2(i2f_off(w & 15, 8.0f) * d, i2f_off((w >> 8) & 15, 8.0f) * d);
            h[8 + i] = pack_h2(i2f_off((w >> 4) & 15, 8.0f) * d, i2f_off((w >> 12) & 15, 8.0f) * d);
        }
    }
};

struct TQ4_K {
    enum { UE = 32 };
    __device__ static void half(const u8* row, int u, u32* h) {
        const u8* b = row + (size_t)(u >> 3) * 144;
        int s = u & 7;
        float d = h2f(ld16(b)), dmin = h2f(ld16(b + 2));
        int sc, m;
        scale_min_k4(s, b + 4, &sc, &m);
        float dl = d * (float)sc, ml = dmin * (float)m;
        const uint4* q = (const uint4*)(b + 16 + 32 * (s >> 1)); // 16-byte aligned: 144-byte blocks
        uint4 v0 = q[0], v1 = q[1];
        u32 w[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
        int shift = (s & 1) * 4;
#pragma unroll
        for (int i = 0; i < 8; i++) { // word i: elements 4i..4i+3
            u32 x = w[i] >> shift;
            h[2 * i] = pack_h2(dl * i2f_off(x & 15, 0.0f) - ml, dl * i2f_off((x >> 8) & 15, 0.0f) - ml);
            h[2 * i + 1] = pack_h2(dl * i2f_off((x >> 16) & 15, 0.0f) - ml, dl * i2f_off((x >> 24) & 15, 0.0f) - ml);
        }
    }
};

struct TQ6_K {
    enum { UE = 16 };
    __device__ static void half(const u8* row, int u, u32* h) {
        const u8* b = row + (size_t)(u >> 4) * 210;
        int g = u & 15;
        int n = g >> 3, k = (g & 7) >> 1, hf = g & 1;
        float d = h2f(ld16(b + 208));
        float dl = d * (float)((const i8*)(b + 192))[g];
        const u16* ql = (const u16*)(b + 64 * n + 32 * (k & 1) + 16 * hf);
        const u16* qh = (const u16*)(b + 128 + 32 * n + 16 * hf);
        int lshift = (k >> 1) * 4, hshift = 2 * k;
#pragma unroll
        for (int i = 0; i < 8; i++) { // elements 2i, 2i+1
            u32 lo = (u32)ql[i] >> lshift, hi = (u32)qh[i] >> hshift;
            u32 q0 = (lo & 15) | ((hi & 3) << 4), q1 = ((lo >> 8) & 15) | (((hi >> 8) & 3) << 4);
            h[i] = pack_h2(dl * i2f_off(q0, 32.0f), dl * i2f_off(q1, 32.0f));
        }
    }
};

// mma_load_w decodes the weight tile rows [m0, m0+BM) x cols [k0, k0+BK)
// into sw [BM][MMA_LDS] as F16; out-of-range rows and units are zeros.
template <class T>
__device__ __forceinline__ void mma_load_w(u16* sw, const u8* W, u64 rowBytes, int rows, int cols, int m0, int k0) {
    const int upr = MMA_BK / T::UE; // units per tile row
    u32 h[T::UE / 2];
    for (int i = threadIdx.x; i < MMA_BM * upr; i += MMA_THREADS) {
        int r = i / upr, j = i % upr;
        int gr = m0 + r, u = k0 / T::UE + j;
        if (gr < rows && u * T::UE < cols) {
            T::half(W + (u64)gr * rowBytes, u, h);
        } else {
#pragma unroll
            for (int e = 0; e < T::UE / 2; e++) h[e] = 0;
        }
        uint4* o = (uint4*)(sw + r * MMA_LDS + j * T::UE);
#pragma unroll
        for (int e = 0; e < T::UE / 8; e++) o[e] = make_uint4(h[4 * e], h[4 * e + 1], h[4 * e + 2], h[4 * e + 3]);
    }
}

// mma_load_x starts copying the activation tile tokens [n0, n0+BN) x cols
// [k0, k0+BK) of x16 [n][cols] into sx [BN][MMA_LDS]: 8 halves (16 bytes)
// per copy, 4 per thread; missing tokens and columns are zeros. On sm_80
// the copies are cp.async (16 bytes, zero-filled when the source size is
// 0), so they run while the thread decodes its weights; mma_wait_x waits
// for them.
__device__ __forceinline__ void mma_load_x(u16* sx, const u16* x16, int n, int cols, int n0, int k0) {
    const int cpr = MMA_BK / 8; // 16-byte chunks per tile row
#pragma unroll
    for (int p = 0; p < MMA_BN * cpr / MMA_THREADS; p++) {
        int i = threadIdx.x + p * MMA_THREADS;
        int t = i / cpr, c = i % cpr;
        int gt = n0 + t, k = k0 + 8 * c;
        bool in = gt < n && k < cols;
        const u16* src = in ? x16 + (u64)gt * cols + k : x16;
#if MMA_SM80
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr(sx + t * MMA_LDS + 8 * c)),
                     "l"(src), "r"(in ? 16 : 0)
                     : "memory");
#else
        *(uint4*)(sx + t * MMA_LDS + 8 * c) = in ? *(const uint4*)src : make_uint4(0, 0, 0, 0);
#endif
    }
}

__device__ __forceinline__ void mma_wait_x() {
#if MMA_SM80
    asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

template <class T>
__device__ void gemm_mma(const u8* W, u64 rowBytes, const u16* x16, float* y, int rows, int cols, int n) {
    __shared__ __align__(16) u16 sw[MMA_BM * MMA_LDS];
    __shared__ __align__(16) u16 sx[MMA_BN * MMA_LDS];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int g = lane >> 2, q = lane & 3;
    int m0 = blockIdx.x * MMA_BM, n0 = blockIdx.y * MMA_BN;
    int wm = (warp >> 2) * 64; // warp tile: rows wm..wm+63
    int wn = (warp & 3) * 32;  //            tokens wn..wn+31
    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;

    // ldmatrix row addresses: lane l gives row l%8 of matrix l/8. For A
    // (16 rows x 16 columns) matrix j covers rows 8(j&1).., columns 8(j>>1)..
    // so that register j is A fragment register j; for B (16 tokens x 16
    // columns) matrix j covers tokens 8(j>>1).., columns 8(j&1).., giving
    // the two B registers of two 8-token tiles.
    int lr = lane & 7, lm = lane >> 3;
    u32 aRow = smem_addr(sw + (wm + lr + 8 * (lm & 1)) * MMA_LDS + 8 * (lm >> 1));
    u32 bRow = smem_addr(sx + (wn + lr + 8 * (lm >> 1)) * MMA_LDS + 8 * (lm & 1));

    for (int k0 = 0; k0 < cols; k0 += MMA_BK) {
        mma_load_x(sx, x16, n, cols, n0, k0);
        mma_load_w<T>(sw, W, rowBytes, rows, cols, m0, k0);
        mma_wait_x();
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < MMA_BK; kk += 16) {
            u32 a[4][4], b[4][2];
#pragma unroll
            for (int mi = 0; mi < 4; mi++) ldsm_x4(a[mi], aRow + 2 * (16 * mi * MMA_LDS + kk));
#pragma unroll
            for (int nj = 0; nj < 2; nj++) {
                u32 r[4];
                ldsm_x4(r, bRow + 2 * (16 * nj * MMA_LDS + kk));
                b[2 * nj][0] = r[0];
                b[2 * nj][1] = r[1];
                b[2 * nj + 1][0] = r[2];
                b[2 * nj + 1][1] = r[3];
            }
#pragma unroll
            for (int mi = 0; mi < 4; mi++)
#pragma unroll
                for (int ni = 0; ni < 4; ni++) mma_16816(acc[mi][ni], a[mi], b[ni]);
        }
        __syncthreads();
    }

#pragma unroll
    for (int mi = 0; mi < 4; mi++) {
#pragma unroll
        for (int ni = 0; ni < 4; ni++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int r = m0 + wm + 16 * mi + g + 8 * (e >> 1);
                int t = n0 + wn + 8 * ni + 2 * q + (e & 1);
                if (r < rows && t < n) y[(u64)t * rows + r] = acc[mi][ni][e];
            }
        }
    }
}

#define MMA_ENTRY(SUF, T)                                                                                   \
    extern "C" __global__ void __launch_bounds__(MMA_THREADS, 2)                                           \
        gemm_mma_##SUF(const u8* W, u64 rowBytes, const u16* x16, float* y, int rows, int cols, int n) { \
        gemm_mma<T>(W, rowBytes, x16, y, rows, cols, n);                                                   \
    }

MMA_ENTRY(f16, TF16)
MMA_ENTRY(q8_0, TQ8_0)
MMA_ENTRY(q4_0, TQ4_0)
MMA_ENTRY(q4_k, TQ4_K)
MMA_ENTRY(q6_k, TQ6_K)

extern "C" __global__ void f32_to_bf16(const float* x, u16* y, u64 n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 b = __float_as_uint(x[i]);
    if ((b & 0x7fffffffu) > 0x7f800000u) {
        y[i] = (u16)(b >> 16) | 0x40; // NaN stays a (quiet) NaN
        return;
    }
    b += 0x7fffu + ((b >> 16) & 1u);
    y[i] = (u16)(b >> 16);
}
