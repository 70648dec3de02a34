// mmvq.cu: the decode-time matmul on quantized weights with int8
// activations ("matrix-vector, quantized"): activations are quantized once
// per step to q8_1 blocks, then every weight block is multiplied with
// integer dot products (dp4a) and scaled once per block.
//
// q8_1 activations of n tokens of cols values (cols a multiple of 32) are
// rows of q8_row_bytes(cols) bytes (row t starts at t*q8_row_bytes(cols)):
//   qs int8 [cols]          x[c] ≈ d_b * qs[c], b = c/32
//   ds u32  [cols/32]       low half: d_b as f16 = amax_b/127,
//                           high half: s_b as f16 = f16(d_b) * Σ qs of block b
//   zero padding to a multiple of 16 bytes (16-byte aligned qs loads).
// Rounding: q = round-half-even(x * (127/amax)) with the float32 quotient,
// as kernels/cpu quantizes activations (quant_act.go), so the integer
// activations are the CPU engine's.
//
// K-quant weights (Q4_K, Q6_K) take q8_K activations instead, as
// kernels/cpu and llama.cpp's CPU backend pair them: rows of
// q8k_row_bytes(cols) bytes (cols a multiple of 256):
//   qs int8 [cols]          x[c] ≈ d_B * qs[c], B = c/256
//   d  f32  [cols/256]      d_B = 1/iscale, iscale = -127/vmax (vmax: the
//                           first value of largest |x| in the block),
//                           qs = clamp(round-half-even(iscale*x), ±127)
//   zero padding to a multiple of 16 bytes.
//
// Numerics of gemv_q8_*: per 32-block of a row, an exact integer dot of the
// weight's integer values with qs, then one float32 scaling (multiplies
// and adds written with __fmul_rn/__fadd_rn: no FMA contraction, so the
// emulator's twin computes the same bits). The Q4_0 offset of -8 and the
// Q6_K offset of -32 are subtracted in the integer domain (per byte, on
// the weights, once per unit for all tokens); Q4_K's minimum term uses the
// exact integer sum of qs (dp4a with 0x01010101). The q8_1 s field is
// kept for the layout's other users (Q4_1/Q5_1-style weights). K-quant
// units combine their sub-block dots in the integer domain and scale once
// per unit as kernels/cpu scales once per super-block:
// (d_x*d)*isum - (d_x*dmin)*Σ m*bsum (Q4_K), (d_x*d)*Σ sc*dot (Q6_K).

__device__ __forceinline__ int dp4a(int a, int b, int c) {
    int r;
    asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}

// round to nearest, ties to even (math.RoundToEven).
__device__ __forceinline__ int f2i_rn(float f) {
    int i;
    asm("cvt.rni.s32.f32 %0, %1;" : "=r"(i) : "f"(f));
    return i;
}

__device__ __forceinline__ u64 q8_row_bytes(int cols) { return ((u64)cols + (u64)(cols / 8) + 15) & ~(u64)15; }
__device__ __forceinline__ u64 q8k_row_bytes(int cols) { return ((u64)cols + (u64)(cols / 64) + 15) & ~(u64)15; }

// Per-byte b - k for bytes b with b + 128 - k < 256 (no carry between
// bytes): add 128-k to every byte, then flip the top bit.
__device__ __forceinline__ int sub_bytes8(u32 w) { return (int)((w + 0x78787878u) ^ 0x80808080u); }
__device__ __forceinline__ int sub_bytes32(u32 w) { return (int)((w + 0x60606060u) ^ 0x80808080u); }

// q8_store4 quantizes one block of 32 values held by 8 consecutive lanes
// (4 values each, lane i%8 holding elements 4*(i%8)..+3 of the block) into
// the q8_1 row: element index i (multiple of 4) of cols. Every lane of the
// warp must call it (shuffles); ok=false lanes only take part.
__device__ __forceinline__ void q8_store4(u8* row, int cols, int i, bool ok, float a, float b, float c, float d) {
    float amax = fmaxf(fmaxf(fabsf(a), fabsf(b)), fmaxf(fabsf(c), fabsf(d)));
#pragma unroll
    for (int o = 4; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(FULL_MASK, amax, o));
    float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int q0 = f2i_rn(__fmul_rn(a, id)), q1 = f2i_rn(__fmul_rn(b, id));
    int q2 = f2i_rn(__fmul_rn(c, id)), q3 = f2i_rn(__fmul_rn(d, id));
    int sum = q0 + q1 + q2 + q3;
#pragma unroll
    for (int o = 4; o > 0; o >>= 1) sum += __shfl_xor_sync(FULL_MASK, sum, o);
    if (!ok) return;
    *(u32*)(row + i) = (u32)(q0 & 0xff) | ((u32)(q1 & 0xff) << 8) | ((u32)(q2 & 0xff) << 16) | ((u32)(q3 & 0xff) << 24);
    if ((i & 31) == 0) {
        u16 dh = f2h(amax / 127.0f);
        u16 sh = f2h(__fmul_rn(h2f(dh), (float)sum));
        *(u32*)(row + cols + (i / 32) * 4) = (u32)dh | ((u32)sh << 16);
    }
}

// quantize_q8_1: xq = q8_1(x) for x [rows][cols] f32 (cols a multiple of
// 32). Grid (ceil(cols/4/blockDim), rows); block: a multiple of 32
// threads, each quantizing 4 consecutive values (8 lanes per block of 32).
extern "C" __global__ void quantize_q8_1(const float* x, u8* xq, int rows, int cols) {
    int r = blockIdx.y;
    int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
    bool ok = i < cols && r < rows;
    float4 v;
    v.x = v.y = v.z = v.w = 0.0f;
    if (ok) v = *(const float4*)(x + (u64)r * cols + i);
    q8_store4(xq + (u64)r * q8_row_bytes(cols), cols, i, ok, v.x, v.y, v.z, v.w);
}

// rms_norm_q8_1: RMSNorm with weight (as rms_norm: v = x*scale, then v*w)
// of x [rows][n] f32, quantized to q8_1 rows of xq; out [rows][n] f32
// receives the normalized values too unless it is null. w may be null (no
// weight). Grid: rows; block: a multiple of 32 threads.
extern "C" __global__ void rms_norm_q8_1(u8* xq, float* out, const float* x, const float* w, int n, float eps) {
    __shared__ float sh[32];
    const float* xr = x + (u64)blockIdx.x * n;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss += xr[i] * xr[i];
    ss = block_sum(ss, sh);
    float scale = rsqrtf(ss / (float)n + eps);
    u8* row = xq + (u64)blockIdx.x * q8_row_bytes(n);
    float* o = out ? out + (u64)blockIdx.x * n : 0;
    for (int base = 0; base < n; base += 4 * blockDim.x) { // uniform trip count: every lane shuffles
        int i = base + 4 * threadIdx.x;
        bool ok = i < n;
        float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (ok) {
            float4 a = *(const float4*)(xr + i);
            v[0] = a.x * scale; v[1] = a.y * scale; v[2] = a.z * scale; v[3] = a.w * scale;
            if (w) {
                float4 b = *(const float4*)(w + i);
                v[0] = v[0] * b.x; v[1] = v[1] * b.y; v[2] = v[2] * b.z; v[3] = v[3] * b.w;
            }
            if (o) {
                float4 r4;
                r4.x = v[0]; r4.y = v[1]; r4.z = v[2]; r4.w = v[3];
                *(float4*)(o + i) = r4;
            }
        }
        q8_store4(row, n, i, ok, v[0], v[1], v[2], v[3]);
    }
}

// q8k_store8 quantizes 256-block blk of a q8_K row from the 32 lanes of a
// warp, lane l holding elements 8l..8l+7 in v. Every lane must call it.
__device__ __forceinline__ void q8k_store8(u8* row, int cols, int blk, const float* v) {
    int lane = threadIdx.x & 31;
    float am = 0.0f;
    int idx = 0x7fffffff;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        float a = fabsf(v[i]);
        if (a > am) { am = a; idx = 8 * lane + i; }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) { // largest |x|, first index on ties (cpu absMax)
        float oam = __shfl_xor_sync(FULL_MASK, am, o);
        int oidx = __shfl_xor_sync(FULL_MASK, idx, o);
        if (oam > am || (oam == am && oidx < idx)) { am = oam; idx = oidx; }
    }
    float mine = v[0];
#pragma unroll
    for (int i = 1; i < 8; i++)
        if (i == (idx & 7)) mine = v[i];
    float vmax = __shfl_sync(FULL_MASK, mine, (idx >> 3) & 31);
    u32 w0 = 0, w1 = 0;
    float d = 0.0f;
    if (am != 0.0f) {
        float iscale = -127.0f / vmax;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            int q = max(-127, min(127, f2i_rn(__fmul_rn(iscale, v[i]))));
            if (i < 4) w0 |= (u32)(q & 0xff) << (8 * i);
            else w1 |= (u32)(q & 0xff) << (8 * (i - 4));
        }
        d = 1.0f / iscale;
    }
    uint2 q2;
    q2.x = w0; q2.y = w1;
    *(uint2*)(row + (u64)blk * 256 + 8 * lane) = q2;
    if (lane == 0) ((float*)(row + cols))[blk] = d;
}

// quantize_q8_k: xq = q8_K(x) for x [rows][cols] f32 (cols a multiple of
// 256). Grid (ceil(cols/256 / warps), rows); block: warps of 32 threads,
// warp w of block b quantizing 256-block 4b+w... (blockDim/32 per block).
extern "C" __global__ void quantize_q8_k(const float* x, u8* xq, int rows, int cols) {
    int blk = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (blk >= cols / 256 || (int)blockIdx.y >= rows) return; // whole warps
    const float4* p = (const float4*)(x + (u64)blockIdx.y * cols + (u64)blk * 256 + 8 * lane);
    float4 a = p[0], b = p[1];
    float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    q8k_store8(xq + (u64)blockIdx.y * q8k_row_bytes(cols), cols, blk, v);
}

// rms_norm_q8_k is rms_norm_q8_1 writing q8_K rows (n a multiple of 256).
// Grid: rows; block: a multiple of 32 threads; warp w quantizes 256-blocks
// w, w + warps, ...
extern "C" __global__ void rms_norm_q8_k(u8* xq, float* out, const float* x, const float* w, int n, float eps) {
    __shared__ float sh[32];
    const float* xr = x + (u64)blockIdx.x * n;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss += xr[i] * xr[i];
    ss = block_sum(ss, sh);
    float scale = rsqrtf(ss / (float)n + eps);
    u8* row = xq + (u64)blockIdx.x * q8k_row_bytes(n);
    float* o = out ? out + (u64)blockIdx.x * n : 0;
    int lane = threadIdx.x & 31;
    for (int blk = threadIdx.x >> 5; blk < n / 256; blk += blockDim.x >> 5) {
        int i = blk * 256 + 8 * lane;
        float4 a = *(const float4*)(xr + i), b = *(const float4*)(xr + i + 4);
        float v[8] = {a.x * scale, a.y * scale, a.z * scale, a.w * scale, b.x * scale, b.y * scale, b.z * scale, b.w * scale};
        if (w) {
            float4 c = *(const float4*)(w + i), e = *(const float4*)(w + i + 4);
            v[0] = v[0] * c.x; v[1] = v[1] * c.y; v[2] = v[2] * c.z; v[3] = v[3] * c.w;
            v[4] = v[4] * e.x; v[5] = v[5] * e.y; v[6] = v[6] * e.z; v[7] = v[7] * e.w;
        }
        if (o) {
            float4 r0, r1;
            r0.x = v[0]; r0.y = v[1]; r0.z = v[2]; r0.w = v[3];
            r1.x = v[4]; r1.y = v[5]; r1.z = v[6]; r1.w = v[7];
            *(float4*)(o + i) = r0;
            *(float4*)(o + i + 4) = r1;
        }
        q8k_store8(row, n, blk, v);
    }
}

// XB holds one token's activations for one weight unit of NB q8 blocks:
// the 8*NB ints of qs (element 4k..4k+3 in v[k]), the scales d and, where
// the weight type needs them, the exact integer sums of each block.
template <int NB>
struct XB {
    int v[8 * NB];
    float d[NB];
    int s[NB];
};

// Weight units. Each type reads unit u of a row (UE elements = NB q8
// blocks; unit u covers elements u*UE .. u*UE+UE-1) into registers once
// (load) and multiplies it with any token's XB (dot), updating acc.

// Q4_0 (18 B / 32, only 2-byte aligned): d f16 | qs[16]; byte j holds
// element j (low nibble) and j+16 (high nibble). Loaded as 16-bit halves.
struct MQ4_0 {
    enum { UE = 32, NB = 1, SUMS = 0, XK = 0 };
    int q[8];
    float d;
    __device__ void load(const u8* row, int u) {
        const u16* b = (const u16*)(row + (u64)u * 18);
        d = h2f(b[0]);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            u32 w = (u32)b[1 + 2 * k] | ((u32)b[2 + 2 * k] << 16);
            q[k] = sub_bytes8(w & 0x0f0f0f0fu);
            q[k + 4] = sub_bytes8((w >> 4) & 0x0f0f0f0fu);
        }
    }
    __device__ float dot(const XB<1>& x, float acc) const {
        int s = 0;
#pragma unroll
        for (int k = 0; k < 8; k++) s = dp4a(q[k], x.v[k], s);
        return __fadd_rn(acc, __fmul_rn((float)s, __fmul_rn(d, x.d[0])));
    }
};

// Q8_0 (34 B / 32, 2-byte aligned): d f16 | qs[32] int8.
struct MQ8_0 {
    enum { UE = 32, NB = 1, SUMS = 0, XK = 0 };
    int q[8];
    float d;
    __device__ void load(const u8* row, int u) {
        const u16* b = (const u16*)(row + (u64)u * 34);
        d = h2f(b[0]);
#pragma unroll
        for (int k = 0; k < 8; k++) q[k] = (int)((u32)b[1 + 2 * k] | ((u32)b[2 + 2 * k] << 16));
    }
    __device__ float dot(const XB<1>& x, float acc) const {
        int s = 0;
#pragma unroll
        for (int k = 0; k < 8; k++) s = dp4a(q[k], x.v[k], s);
        return __fadd_rn(acc, __fmul_rn((float)s, __fmul_rn(d, x.d[0])));
    }
};

// kbyte returns byte i (0..11) of the 12 scale bytes held in three words.
__device__ __forceinline__ int kbyte(u32 s0, u32 s1, u32 s2, int i) {
    u32 w = i < 4 ? s0 : (i < 8 ? s1 : s2);
    return (int)((w >> (8 * (i & 3))) & 0xff);
}

// Q4_K (144 B / 256, 16-byte aligned rows): one unit is 64 elements, the
// sub-blocks 2c and 2c+1 (c = u%4) of super-block u/4, whose nibbles are
// the low and high halves of the same 32 qs bytes. Loads: the 16-byte
// header (d, dmin, scales[12]) and the 32 qs bytes as 128-bit words.
struct MQ4_K {
    enum { UE = 64, NB = 2, SUMS = 1, XK = 1 };
    int q[16];
    int sc[2], mn[2];
    float d, dmin;
    __device__ void load(const u8* row, int u) {
        const u8* b = row + (u64)(u >> 2) * 144;
        int c = u & 3;
        uint4 h = *(const uint4*)b;
        d = h2f((u16)(h.x & 0xffff));
        dmin = h2f((u16)(h.x >> 16));
        const uint4* qp = (const uint4*)(b + 16 + 32 * c);
        uint4 a0 = qp[0], a1 = qp[1];
        u32 w[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
#pragma unroll
        for (int k = 0; k < 8; k++) {
            q[k] = (int)(w[k] & 0x0f0f0f0fu);
            q[k + 8] = (int)((w[k] >> 4) & 0x0f0f0f0fu);
        }
#pragma unroll
        for (int i = 0; i < 2; i++) {
            int j = 2 * c + i;
            if (j < 4) {
                sc[i] = kbyte(h.y, h.z, h.w, j) & 63;
                mn[i] = kbyte(h.y, h.z, h.w, j + 4) & 63;
            } else {
                sc[i] = (kbyte(h.y, h.z, h.w, j + 4) & 0x0f) | ((kbyte(h.y, h.z, h.w, j - 4) >> 6) << 4);
                mn[i] = (kbyte(h.y, h.z, h.w, j + 4) >> 4) | ((kbyte(h.y, h.z, h.w, j) >> 6) << 4);
            }
        }
    }
    __device__ float dot(const XB<2>& x, float acc) const {
        int isum = 0;
#pragma unroll
        for (int i = 0; i < 2; i++) {
            int s = 0;
#pragma unroll
            for (int k = 0; k < 8; k++) s = dp4a(q[8 * i + k], x.v[8 * i + k], s);
            isum += sc[i] * s;
        }
        int summs = mn[0] * x.s[0] + mn[1] * x.s[1];
        float t = __fsub_rn(__fmul_rn(__fmul_rn(x.d[0], d), (float)isum), __fmul_rn(__fmul_rn(x.d[0], dmin), (float)summs));
        return __fadd_rn(acc, t);
    }
};

// Q6_K (210 B / 256, 2-byte aligned): unit u is 32 elements, j = u%8 of
// super-block u/8; with n = j/4, k = j%4 element 32j + l has its low 4 bits
// in ql[64n + 32(k&1) + l] (nibble k>>1), its high 2 bits in qh[32n + l]
// (bits 2k, 2k+1), scale scales[2j + l/16], value d*scale*(q-32).
struct MQ6_K {
    enum { UE = 32, NB = 1, SUMS = 0, XK = 1 };
    int q[8];
    int sc0, sc1;
    float d;
    __device__ void load(const u8* row, int u) {
        const u8* b = row + (u64)(u >> 3) * 210;
        int j = u & 7, n = j >> 2, k = j & 3;
        const u16* ql = (const u16*)(b + 64 * n + 32 * (k & 1));
        const u16* qh = (const u16*)(b + 128 + 32 * n);
        int lsh = 4 * (k >> 1), hsh = 2 * k;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            u32 lw = (u32)ql[2 * i] | ((u32)ql[2 * i + 1] << 16);
            u32 hw = (u32)qh[2 * i] | ((u32)qh[2 * i + 1] << 16);
            q[i] = sub_bytes32(((lw >> lsh) & 0x0f0f0f0fu) | (((hw >> hsh) & 0x03030303u) << 4));
        }
        sc0 = ((const i8*)b)[192 + 2 * j];
        sc1 = ((const i8*)b)[193 + 2 * j];
        d = h2f(ld16(b + 208));
    }
    __device__ float dot(const XB<1>& x, float acc) const {
        int s0 = 0, s1 = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) s0 = dp4a(q[k], x.v[k], s0);
#pragma unroll
        for (int k = 4; k < 8; k++) s1 = dp4a(q[k], x.v[k], s1);
        return __fadd_rn(acc, __fmul_rn(__fmul_rn(x.d[0], d), (float)(sc0 * s0 + sc1 * s1)));
    }
};

// load_xb reads unit u of token row xt (q8_1, or q8_K for XK types) with
// 128-bit loads; for q8_K every d[b] is the unit's 256-block scale.
template <class Q>
__device__ __forceinline__ void load_xb(XB<Q::NB>& x, const u8* xt, int cols, int u) {
    const uint4* p = (const uint4*)(xt + (u64)u * Q::UE);
#pragma unroll
    for (int i = 0; i < 2 * Q::NB; i++) {
        uint4 a = p[i];
        x.v[4 * i] = (int)a.x; x.v[4 * i + 1] = (int)a.y; x.v[4 * i + 2] = (int)a.z; x.v[4 * i + 3] = (int)a.w;
    }
    const u32* ds = (const u32*)(xt + cols) + u * Q::NB;
    float dk = Q::XK ? ((const float*)(xt + cols))[(u * Q::UE) >> 8] : 0.0f;
#pragma unroll
    for (int b = 0; b < Q::NB; b++) {
        x.d[b] = Q::XK ? dk : h2f((u16)(ds[b] & 0xffff));
        x.s[b] = 0;
        if (Q::SUMS) {
#pragma unroll
            for (int k = 0; k < 8; k++) x.s[b] = dp4a(x.v[8 * b + k], 0x01010101, x.s[b]);
        }
    }
}

// gemv_q8: y[t][r] = Σ_c W[r][c] * xq[t][c] for t < ntok ≤ NT (one launch
// for every token of a decode step, so each weight byte is read once).
// W [rows][cols] typed (row r at r*rowBytes), xq [ntok] q8_1 (q8_K) rows, y
// [ntok][ldy] f32. Geometry: blocks of 4 warps; warp w of block b owns rows
// r0 = (4b + w)*RPW .. r0+RPW-1 (grid ceil(rows / (4*RPW))); lane l reads
// units u = l, l+32, l+64, ... of each of its rows, UNR units at a time
// (UNR/2 for Q4_K; all loads first: bytes in flight), and keeps RPW*NT partial sums in
// registers, added in increasing u. The activation words of a unit are
// loaded once per token and used for the RPW rows. A warp-wide xor
// butterfly (offsets 16, 8, 4, 2, 1) sums the lanes; lane t%32 writes y[t].
// Not inlined: the 16-token body is compiled once per type for the 16, 32
// and 64 buckets (ptxas time at start-up).
template <class Q, int NT, int RPW, int UNR>
__device__ __noinline__ void gemv_q8(const u8* W, u64 rowBytes, const u8* xq, float* y, int rows, int cols, int ntok, int ldy) {
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int r0 = (blockIdx.x * (blockDim.x >> 5) + warp) * RPW;
    if (r0 >= rows) return; // whole warps only
    u64 xstride = Q::XK ? q8k_row_bytes(cols) : q8_row_bytes(cols);
    int nunits = cols / Q::UE;
    float acc[RPW][NT];
#pragma unroll
    for (int rr = 0; rr < RPW; rr++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[rr][t] = 0.0f;
    const u8* wrow[RPW];
#pragma unroll
    for (int rr = 0; rr < RPW; rr++) wrow[rr] = W + (u64)min(r0 + rr, rows - 1) * rowBytes;
    // Units of two q8 blocks (Q4_K) carry twice the bytes: half the unroll
    // keeps the bytes in flight and the registers of the other types.
    enum { U = Q::NB == 2 && UNR > 1 ? UNR / 2 : UNR };
    for (int u0 = lane; u0 < nunits; u0 += 32 * U) {
        Q w[U][RPW];
#pragma unroll
        for (int k = 0; k < U; k++)
#pragma unroll
            for (int rr = 0; rr < RPW; rr++)
                if (u0 + 32 * k < nunits) w[k][rr].load(wrow[rr], u0 + 32 * k);
#pragma unroll
        for (int k = 0; k < U; k++) {
            int u = u0 + 32 * k;
            if (u < nunits) {
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    if (t < ntok) {
                        XB<Q::NB> x;
                        load_xb<Q>(x, xq + (u64)t * xstride, cols, u);
#pragma unroll
                        for (int rr = 0; rr < RPW; rr++) acc[rr][t] = w[k][rr].dot(x, acc[rr][t]);
                    }
                }
            }
        }
    }
#pragma unroll
    for (int rr = 0; rr < RPW; rr++) {
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t < ntok) {
                float v = warp_sum(acc[rr][t]);
                if (lane == (t & 31) && r0 + rr < rows) y[(u64)t * ldy + r0 + rr] = v;
            }
        }
    }
}

// gemv_q8_groups runs gemv_q8 over the tokens in groups of TG: buckets
// above 16 tokens re-read their warp's rows (RPW rows, a few KiB) once per
// group from L1/L2 instead of holding NT*RPW sums in registers (which makes
// ptxas minutes slower and spills); DRAM still streams each weight once.
template <class Q, int TG, int RPW, int UNR>
__device__ __forceinline__ void gemv_q8_groups(const u8* W, u64 rowBytes, const u8* xq, float* y, int rows, int cols, int ntok, int ldy) {
    u64 xstride = Q::XK ? q8k_row_bytes(cols) : q8_row_bytes(cols);
    for (int t0 = 0; t0 < ntok; t0 += TG)
        gemv_q8<Q, TG, RPW, UNR>(W, rowBytes, xq + (u64)t0 * xstride, y + (u64)t0 * ldy, rows, cols, min(TG, ntok - t0), ldy);
}

// One entry point per weight type and token bucket NT (the launch picks the
// smallest NT >= ntok), TG tokens per group; TG, RPW and UNR per bucket
// must match q8Buckets in ops_q8.go (a test parses these lines).
#define GEMV_Q8(NAME, Q, NT, TG, RPW, UNR)                                                             \
    extern "C" __global__ void gemv_q8_##NAME(const u8* W, u64 rowBytes, const u8* xq, float* y,     \
                                              int rows, int cols, int ntok, int ldy) {              \
        gemv_q8_groups<Q, TG, RPW, UNR>(W, rowBytes, xq, y, rows, cols, ntok, ldy);                 \
    }

GEMV_Q8(q4_0_t1, MQ4_0, 1, 1, 1, 4)
GEMV_Q8(q4_0_t2, MQ4_0, 2, 2, 1, 4)
GEMV_Q8(q4_0_t4, MQ4_0, 4, 4, 2, 2)
GEMV_Q8(q4_0_t8, MQ4_0, 8, 8, 2, 1)
GEMV_Q8(q4_0_t16, MQ4_0, 16, 16, 2, 1)
GEMV_Q8(q4_0_t32, MQ4_0, 32, 16, 2, 1)
GEMV_Q8(q4_0_t64, MQ4_0, 64, 16, 2, 1)
GEMV_Q8(q8_0_t1, MQ8_0, 1, 1, 1, 4)
GEMV_Q8(q8_0_t2, MQ8_0, 2, 2, 1, 4)
GEMV_Q8(q8_0_t4, MQ8_0, 4, 4, 2, 2)
GEMV_Q8(q8_0_t8, MQ8_0, 8, 8, 2, 1)
GEMV_Q8(q8_0_t16, MQ8_0, 16, 16, 2, 1)
GEMV_Q8(q8_0_t32, MQ8_0, 32, 16, 2, 1)
GEMV_Q8(q8_0_t64, MQ8_0, 64, 16, 2, 1)
GEMV_Q8(q4_k_t1, MQ4_K, 1, 1, 1, 4)
GEMV_Q8(q4_k_t2, MQ4_K, 2, 2, 1, 4)
GEMV_Q8(q4_k_t4, MQ4_K, 4, 4, 2, 2)
GEMV_Q8(q4_k_t8, MQ4_K, 8, 8, 2, 1)
GEMV_Q8(q4_k_t16, MQ4_K, 16, 16, 2, 1)
GEMV_Q8(q4_k_t32, MQ4_K, 32, 16, 2, 1)
GEMV_Q8(q4_k_t64, MQ4_K, 64, 16, 2, 1)
GEMV_Q8(q6_k_t1, MQ6_K, 1, 1, 1, 4)
GEMV_Q8(q6_k_t2, MQ6_K, 2, 2, 1, 4)
GEMV_Q8(q6_k_t4, MQ6_K, 4, 4, 2, 2)
GEMV_Q8(q6_k_t8, MQ6_K, 8, 8, 2, 1)
GEMV_Q8(q6_k_t16, MQ6_K, 16, 16, 2, 1)
GEMV_Q8(q6_k_t32, MQ6_K, 32, 16, 2, 1)
GEMV_Q8(q6_k_t64, MQ6_K, 64, 16, 2, 1)
