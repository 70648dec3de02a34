package cpu

//go:noescape
func packQ4ZPanelAVX2(panel, grp, next *byte, nb int, tab *float32)

//go:noescape
func packQ8ZPanelAVX2(panel, grp, next *byte, nb int, tab *float32)

//go:noescape
func packIQ4ZPanelAVX2(panel, grp, next *byte, nb int, tab *float32)

// packPanelFromQ4ZSIMD is packPanelFromQ4Z in AVX2
// (blk_decode_pack_amd64.s; TestPackPanelFromBlkZSIMD), prefetching next
// (the group unpacked after this one; empty: none) as it goes. It reports
// false, writing nothing, without AVX2.
func packPanelFromQ4ZSIMD(panel, grp, next []byte, nb int) bool {
	return packGroupPanelSIMD(packQ4ZPanelAVX2, q4zBlock, panel, grp, next, nb)
}

// packPanelFromQ8ZSIMD is packPanelFromQ8Z in AVX2, as
// packPanelFromQ4ZSIMD.
func packPanelFromQ8ZSIMD(panel, grp, next []byte, nb int) bool {
	return packGroupPanelSIMD(packQ8ZPanelAVX2, q8zBlock, panel, grp, next, nb)
}

// packPanelFromIQ4ZSIMD is packPanelFromIQ4Z in AVX2, as
// packPanelFromQ4ZSIMD.
func packPanelFromIQ4ZSIMD(panel, grp, next []byte, nb int) bool {
	return packGroupPanelSIMD(packIQ4ZPanelAVX2, q4zBlock, panel, grp, next, nb)
}

// packGroupPanelSIMD runs the SIMD unpacker f of a layout of block bytes per
// block of 16 rows over nb blocks of grp, prefetching next.
func packGroupPanelSIMD(f func(panel, grp, next *byte, nb int, tab *float32), block int, panel, grp, next []byte, nb int) bool {
	if !hasAVX2 || nb <= 0 {
		return false
	}
	_ = panel[nb*panelBlockZ-1]
	_ = grp[nb*block-1]
	pf := &grp[0]
	if len(next) > 0 {
		pf = &next[0]
	}
	f(&panel[0], &grp[0], pf, nb, &f16Table()[0])
	return true
}
