// Shared by the float32 kernels that end in a horizontal sum (dot_amd64.s,
// dot_x4_amd64.s, dot_kquant*_amd64.s, dot_f16_2x2_amd64.s,
// dot_f16rows_amd64.s): one definition, so every kernel that must agree
// bit for bit with the one-token dots reduces in the same order.

// HSUM8 sums the 8 float32 lanes of Y into the low lane of X (X is Y's low
// half); T is clobbered. Order: (lo4+hi4), then pairs, then the two halves.
#define HSUM8(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS       T, X, X; \
	VMOVHLPS     X, X, T; \
	VADDPS       T, X, X; \
	VPSHUFD      $1, X, T; \
	VADDSS       T, X, X
