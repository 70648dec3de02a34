// rope.cu: rotary position embedding fused with the paged KV-cache write.
//
// For token t at position pos[t], head vectors of D values have their first
// nRot values rotated in nRot/2 pairs; pair j turns by
//   theta_j = freqScale * pos * thetaScale^j / factor_j,  thetaScale = base^(-2/nRot)
// where thetaScale^j is built by j float32 multiplications from pos, as
// cpu.RopeCache does, and cos/sin are evaluated in double. Layouts:
//   neox = 0 (llama, adjacent pairs): (x[2j], x[2j+1])
//   neox = 1 (qwen, half split):      (x[j],  x[j + nRot/2])
// The products are rounded separately (no FMA), like cpu.Rope.

__device__ __forceinline__ void rope_pair(float* v, int j, int half, int neox, float c, float s) {
    int i0 = neox ? j : 2 * j;
    int i1 = neox ? j + half : 2 * j + 1;
    float a = v[i0], b = v[i1];
    v[i0] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
    v[i1] = __fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c));
}

__device__ __forceinline__ void rope_angle(int pos, int j, float thetaScale, float freqScale,
                                           const float* factors, float* c, float* s) {
    float theta = (float)pos;
    for (int i = 0; i < j; i++) theta = __fmul_rn(theta, thetaScale);
    if (factors) theta = __fdiv_rn(theta, factors[j]);
    theta = __fmul_rn(freqScale, theta);
    double sd, cd;
    sincos((double)theta, &sd, &cd);
    *c = (float)cd;
    *s = (float)sd;
}

// rope_kv_write: for each token t (one block per token):
//   q [T][Hq*D] f32 rotated in place;
//   k [T][Hk*D] f32 rotated in place, then written as F16 to kc row slot[t];
//   v [T][Hk*D] f32 written as F16 to vc row slot[t].
// kc, vc: [slots][Hk*D] F16 with slot = page*pageSize + pos%pageSize (the host
// resolves page tables into slot[]; a negative slot skips the cache write).
// factors: [nRot/2] or null. Block: any multiple of 32 (128 is typical).
extern "C" __global__ void rope_kv_write(float* q, float* k, const float* v, u16* kc, u16* vc,
                                         const i32* pos, const i32* slot, int Hq, int Hk, int D,
                                         int nRot, float thetaScale, float freqScale,
                                         const float* factors, int neox) {
    int t = blockIdx.x;
    int p = pos[t];
    int half = nRot / 2;
    float* qt = q + (u64)t * Hq * D;
    float* kt = k + (u64)t * Hk * D;
    for (int idx = threadIdx.x; idx < (Hq + Hk) * half; idx += blockDim.x) {
        int h = idx / half, j = idx % half;
        float c, s;
        rope_angle(p, j, thetaScale, freqScale, factors, &c, &s);
        if (h < Hq) rope_pair(qt + h * D, j, half, neox, c, s);
        else rope_pair(kt + (h - Hq) * D, j, half, neox, c, s);
    }
    __syncthreads();
    int sl = slot[t];
    if (sl < 0) return;
    const float* vt = v + (u64)t * Hk * D;
    u16* kr = kc + (u64)sl * Hk * D;
    u16* vr = vc + (u64)sl * Hk * D;
    for (int i = threadIdx.x; i < Hk * D; i += blockDim.x) {
        kr[i] = f2h(kt[i]);
        vr[i] = f2h(vt[i]);
    }
}

// rope_inplace: rotate x [T][H*D] in place (no cache write).
extern "C" __global__ void rope_inplace(float* x, const i32* pos, int H, int D, int nRot,
                                        float thetaScale, float freqScale, const float* factors,
                                        int neox) {
    int t = blockIdx.x;
    int half = nRot / 2;
    float* xt = x + (u64)t * H * D;
    for (int idx = threadIdx.x; idx < H * half; idx += blockDim.x) {
        int h = idx / half, j = idx % half;
        float c, s;
        rope_angle(pos[t], j, thetaScale, freqScale, factors, &c, &s);
        rope_pair(xt + h * D, j, half, neox, c, s);
    }
}
