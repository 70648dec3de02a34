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

// rope_kv_write: for each token t:
//   q [T][Hq*D] f32 rotated in place;
//   k [T][Hk*D] f32 rotated in place, and written as F16 to kc row slot[t];
//   v [T][Hk*D] f32 written as F16 to vc row slot[t].
// kc, vc: [slots][Hk*D] F16 with slot = page*pageSize + pos%pageSize (the host
// resolves page tables into slot[]; a negative slot skips the cache write).
// factors: [nRot/2] or null. Grid (T, blocks): the blocks of token t share
// its (Hq+Hk)*nRot/2 pairs and Hk*D value columns, one item per thread: a
// thread that turns a K pair writes those two K values to the cache, and
// the value threads write V and the K columns past nRot. Block: any.
extern "C" __global__ void rope_kv_write(float* q, float* k, const float* v, u16* kc, u16* vc,
                                         const i32* pos, const i32* slot, int Hq, int Hk, int D,
                                         int nRot, float thetaScale, float freqScale,
                                         const float* factors, int neox) {
    int t = blockIdx.x;
    int half = nRot / 2;
    int pairs = (Hq + Hk) * half;
    int idx = blockIdx.y * blockDim.x + threadIdx.x;
    if (idx >= pairs + Hk * D) return;
    int sl = slot[t];
    float* kt = k + (u64)t * Hk * D;
    u16* kr = kc + (u64)(sl < 0 ? 0 : sl) * Hk * D;
    if (idx < pairs) {
        int h = idx / half, j = idx % half;
        float c, s;
        rope_angle(pos[t], j, thetaScale, freqScale, factors, &c, &s);
        if (h < Hq) {
            rope_pair(q + (u64)t * Hq * D + h * D, j, half, neox, c, s);
            return;
        }
        float* kh = kt + (h - Hq) * D;
        rope_pair(kh, j, half, neox, c, s);
        if (sl >= 0) {
            int i0 = neox ? j : 2 * j, i1 = neox ? j + half : 2 * j + 1;
            kr[(h - Hq) * D + i0] = f2h(kh[i0]);
            kr[(h - Hq) * D + i1] = f2h(kh[i1]);
        }
        return;
    }
    if (sl < 0) return;
    int i = idx - pairs;
    vc[(u64)sl * Hk * D + i] = f2h(v[(u64)t * Hk * D + i]);
    if (i % D >= nRot) kr[i] = f2h(kt[i]);
}

// rope_inplace: rotate x [T][H*D] in place (no cache write). Grid (T,
// blocks): one pair per thread over the token's H*nRot/2 pairs.
extern "C" __global__ void rope_inplace(float* x, const i32* pos, int H, int D, int nRot,
                                        float thetaScale, float freqScale, const float* factors,
                                        int neox) {
    int t = blockIdx.x;
    int half = nRot / 2;
    int idx = blockIdx.y * blockDim.x + threadIdx.x;
    if (idx >= H * half) return;
    int h = idx / half, j = idx % half;
    float c, s;
    rope_angle(pos[t], j, thetaScale, freqScale, factors, &c, &s);
    rope_pair(x + (u64)t * H * D + h * D, j, half, neox, c, s);
}
