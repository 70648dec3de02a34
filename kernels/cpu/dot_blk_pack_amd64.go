package cpu

// Panel packing in AVX2 (dot_blk_pack_amd64.s): byte for byte the Go
// twins packQ4_0Panel and packQ8_0Panel (TestPackPanelSIMD). Packing 8 rows
// in Go cost more than computing them against 16 tokens, which made
// batched decode (a few to a few dozen tokens per product) pay about twice
// prefill's cost per token.

//go:noescape
func packQ4_0PanelAVX2(panel, rows, next *byte, rb, nb int, tab *float32)

//go:noescape
func packQ8_0PanelAVX2(panel, rows, next *byte, rb, nb int, tab *float32)

// packPanelSIMD packs 8 rows of bk's type into panel as packPanel does and
// reports true, or reports false (writing nothing) where the blocked
// kernels do not run. It prefetches next (the rows packed after these;
// empty: none) as it goes.
func packPanelSIMD(bk *blkKernel, panel, rows, next []byte, rb, nb int) bool {
	if !blkActive || nb <= 0 {
		return false
	}
	bb := 34
	if bk.q4 {
		bb = 18
	}
	_ = rows[7*rb+nb*bb-1]
	_ = panel[nb*panelBlock-1]
	tab := f16Table()
	pf := &rows[0] // nothing after: prefetch these rows again (no cost)
	if len(next) > 0 {
		pf = &next[0]
	}
	if bk.q4 {
		packQ4_0PanelAVX2(&panel[0], &rows[0], pf, rb, nb, &tab[0])
	} else {
		packQ8_0PanelAVX2(&panel[0], &rows[0], pf, rb, nb, &tab[0])
	}
	return true
}
