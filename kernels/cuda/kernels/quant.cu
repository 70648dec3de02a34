// quant.cu: weight decoding and everything that reads GGML-typed weights:
// GEMV (decode-time matmul) and embedding row gather (the tensor-core GEMM
// of quant_mma.cu decodes the same layouts tile by tile).
//
// A weight matrix W [rows][cols] is stored row-major in its GGML type; row r
// starts at byte r*rowBytes. Each type is decoded in "units" of UE
// consecutive elements of one row; unit u covers elements [u*UE, (u+1)*UE).
// Block layouts (little-endian, as kernels/cpu's quant files):
//   F16/BF16: 2 bytes per element.                        UE 8
//   Q8_0 (34 B / 32): d f16 | qs[32] int8                 UE 32 (one block)
//   Q4_0 (18 B / 32): d f16 | qs[16]; x[j]=d*((qs[j]&15)-8), x[j+16]=d*((qs[j]>>4)-8)   UE 32
//   Q4_K (144 B / 256): d f16 | dmin f16 | scales[12] | qs[128]   UE 32 (one sub-block)
//   Q6_K (210 B / 256): ql[128] | qh[64] | scales[16] int8 | d f16 UE 16 (one scale group)

struct QF32 {
    enum { UE = 8 };
    __device__ static void unit(const u8* row, int u, float* o) {
        const float4* p = (const float4*)(row + (size_t)u * 32);
        float4 a = p[0], b = p[1];
        o[0] = a.x; o[1] = a.y; o[2] = a.z; o[3] = a.w;
        o[4] = b.x; o[5] = b.y; o[6] = b.z; o[7] = b.w;
    }
};

struct QF16 {
    enum { UE = 8 };
    __device__ static void unit(const u8* row, int u, float* o) {
        uint4 v = *(const uint4*)(row + (size_t)u * 16);
        u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            o[2 * i] = h2f((u16)(w[i] & 0xffff));
            o[2 * i + 1] = h2f((u16)(w[i] >> 16));
        }
    }
};

struct QBF16 {
    enum { UE = 8 };
    __device__ static void unit(const u8* row, int u, float* o) {
        uint4 v = *(const uint4*)(row + (size_t)u * 16);
        u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            o[2 * i] = bf2f((u16)(w[i] & 0xffff));
            o[2 * i + 1] = bf2f((u16)(w[i] >> 16));
        }
    }
};

struct QQ8_0 {
    enum { UE = 32 };
    __device__ static void unit(const u8* row, int u, float* o) {
        const u8* b = row + (size_t)u * 34;
        float d = h2f(ld16(b));
        const i8* qs = (const i8*)(b + 2);
#pragma unroll
        for (int j = 0; j < 32; j++) o[j] = (float)qs[j] * d;
    }
};

struct QQ4_0 {
    enum { UE = 32 };
    __device__ static void unit(const u8* row, int u, float* o) {
        const u8* b = row + (size_t)u * 18;
        float d = h2f(ld16(b));
        const u8* qs = b + 2;
#pragma unroll
        for (int j = 0; j < 16; j++) {
            o[j] = (float)((int)(qs[j] & 15) - 8) * d;
            o[j + 16] = (float)((int)(qs[j] >> 4) - 8) * d;
        }
    }
};

// scale_min_k4 decodes the j-th (0..7) 6-bit scale and min of a Q4_K/Q5_K
// scales[12] field.
__device__ __forceinline__ void scale_min_k4(int j, const u8* q, int* sc, int* m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

struct QQ4_K {
    enum { UE = 32 };
    // Unit u: super-block u/8, sub-block s = u%8 covering elements 32s..32s+31;
    // its nibbles are the low (s even) or high (s odd) halves of qs[32*(s/2) ...].
    __device__ static void unit(const u8* row, int u, float* o) {
        const u8* b = row + (size_t)(u >> 3) * 144;
        int s = u & 7;
        float d = h2f(ld16(b)), dmin = h2f(ld16(b + 2));
        int sc, m;
        scale_min_k4(s, b + 4, &sc, &m);
        float dl = d * (float)sc, ml = dmin * (float)m;
        const u8* q = b + 16 + 32 * (s >> 1);
        int shift = (s & 1) * 4;
#pragma unroll
        for (int l = 0; l < 32; l++) o[l] = dl * (float)((q[l] >> shift) & 15) - ml;
    }
};

struct QQ6_K {
    enum { UE = 16 };
    // Unit u: super-block u/16, group g = u%16 covering elements 16g..16g+15.
    // With n = g/8, k = (g%8)/2, half = g%2 and l = 16*half + i, element
    // 128n + 32k + l has low bits in ql[64n + 32(k&1) + l] (nibble k>>1),
    // high bits in qh[32n + l] (bits 2k, 2k+1), and scale scales[g].
    __device__ static void unit(const u8* row, int u, float* o) {
        const u8* b = row + (size_t)(u >> 4) * 210;
        int g = u & 15;
        int n = g >> 3, k = (g & 7) >> 1, half = g & 1;
        float d = h2f(ld16(b + 208));
        float dl = d * (float)((const i8*)(b + 192))[g];
        const u8* ql = b + 64 * n + 32 * (k & 1) + 16 * half;
        const u8* qh = b + 128 + 32 * n + 16 * half;
        int lshift = (k >> 1) * 4, hshift = 2 * k;
#pragma unroll
        for (int i = 0; i < 16; i++) {
            int q = ((ql[i] >> lshift) & 15) | (((qh[i] >> hshift) & 3) << 4);
            o[i] = dl * (float)(q - 32);
        }
    }
};

#define GEMV_MAXT 8

// gemv: y[t][r] = sum_c W[r][c] * x[t][c] for t < ntok (ntok <= GEMV_MAXT).
// W [rows][cols] typed, x [ntok][cols] f32, y [ntok][rows] f32 (row stride
// ldy). One warp per row; each lane decodes units u = lane, lane+32, ... and
// reuses the decoded weights for every token. Grid: ceil(rows / warps per
// block); block: a multiple of 32 threads.
template <class Q>
__device__ void gemv(const u8* W, u64 rowBytes, const float* x, float* y, int rows, int cols, int ntok, int ldy) {
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int r = blockIdx.x * (blockDim.x >> 5) + warp;
    if (r >= rows) return;
    const u8* row = W + (u64)r * rowBytes;
    int nunits = cols / Q::UE;
    float acc[GEMV_MAXT];
#pragma unroll
    for (int t = 0; t < GEMV_MAXT; t++) acc[t] = 0.0f;
    float w[Q::UE];
    // Small units (F16/BF16/F32: 16-32 bytes per lane) are unrolled so that
    // several loads per lane are in flight: decode GEMV is bandwidth bound.
#pragma unroll(Q::UE == 8 ? 4 : 1)
    for (int u = lane; u < nunits; u += 32) {
        Q::unit(row, u, w);
#pragma unroll
        for (int t = 0; t < GEMV_MAXT; t++) {
            if (t < ntok) {
                const float4* xt = (const float4*)(x + (u64)t * cols + (u64)u * Q::UE);
                float s = 0.0f;
#pragma unroll
                for (int i = 0; i < Q::UE / 4; i++) {
                    float4 v = xt[i];
                    s += w[4 * i] * v.x + w[4 * i + 1] * v.y + w[4 * i + 2] * v.z + w[4 * i + 3] * v.w;
                }
                acc[t] += s;
            }
        }
    }
#pragma unroll
    for (int t = 0; t < GEMV_MAXT; t++) {
        if (t < ntok) {
            float v = warp_sum(acc[t]);
            if (lane == 0) y[(u64)t * ldy + r] = v;
        }
    }
}

// get_rows: out[i][c] = W[ids[i]][c] for i < n (embedding lookup).
// W [rows][cols] typed, ids [n] int32, out [n][cols] f32. Grid: n; block: any.
// An id outside [0, rows) yields a row of zeros (the host validates ids).
template <class Q>
__device__ void get_rows(const u8* W, u64 rowBytes, const i32* ids, float* out, int n, int rows, int cols) {
    int i = blockIdx.x;
    if (i >= n) return;
    int id = ids[i];
    float* o = out + (u64)i * cols;
    int nunits = cols / Q::UE;
    float w[Q::UE];
    for (int u = threadIdx.x; u < nunits; u += blockDim.x) {
        if (id < 0 || id >= rows) {
            for (int e = 0; e < Q::UE; e++) o[u * Q::UE + e] = 0.0f;
            continue;
        }
        Q::unit(W + (u64)id * rowBytes, u, w);
#pragma unroll
        for (int e = 0; e < Q::UE; e++) o[u * Q::UE + e] = w[e];
    }
}

#define QUANT_ENTRIES(SUF, Q)                                                                          \
    extern "C" __global__ void gemv_##SUF(const u8* W, u64 rowBytes, const float* x, float* y,      \
                                          int rows, int cols, int ntok, int ldy) {                  \
        gemv<Q>(W, rowBytes, x, y, rows, cols, ntok, ldy);                                          \
    }                                                                                                \
    extern "C" __global__ void get_rows_##SUF(const u8* W, u64 rowBytes, const i32* ids, float* out, \
                                              int n, int rows, int cols) {                          \
        get_rows<Q>(W, rowBytes, ids, out, n, rows, cols);                                          \
    }

QUANT_ENTRIES(f32, QF32)
QUANT_ENTRIES(f16, QF16)
QUANT_ENTRIES(bf16, QBF16)
QUANT_ENTRIES(q8_0, QQ8_0)
QUANT_ENTRIES(q4_0, QQ4_0)
QUANT_ENTRIES(q4_k, QQ4_K)
QUANT_ENTRIES(q6_k, QQ6_K)

// f32_to_f16: y[i] = f16(x[i]) for i < n (activations for the cuBLAS GEMM).
extern "C" __global__ void f32_to_f16(const float* x, u16* y, u64 n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = f2h(x[i]);
}
