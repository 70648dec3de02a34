package scheduler

import "errors"

// ErrNoPages is what an Allocator returns (possibly wrapped) when it cannot
// find enough pages; the scheduler reacts by chunking smaller or preempting.
var ErrNoPages = errors.New("scheduler: no free page")

// Table is an opaque per-sequence page table handed out by the allocator.
// The scheduler only reads its page ids to put them into a plan.
type Table interface {
	// Pages returns the page ids covering positions 0.. of the sequence;
	// page i holds positions [i*pageSize, (i+1)*pageSize). The caller must
	// not modify the slice.
	Pages() []int32
}

// Copy asks the runner to copy the K/V of page Src into page Dst before the
// forward pass (copy-on-write of a shared, partially filled page).
type Copy struct {
	Src, Dst int32
}

// Allocator is the part of the paged KV cache the scheduler needs. It is
// declared here, by its user; package engine adapts kvcache to it.
// All methods are called from the one goroutine that owns the scheduler.
type Allocator interface {
	// PageSize is the number of token positions in one page.
	PageSize() int
	// TotalPages is the size of the pool.
	TotalPages() int
	// Available is the number of pages that can be allocated now (free
	// plus evictable cached pages).
	Available() int
	// Match returns a table referencing the longest cached prefix of
	// tokens made of full pages, limited to at most maxTokens tokens, and
	// the number of tokens it covers (0 with an empty table when nothing
	// matches).
	Match(tokens []int32, salt string, maxTokens int) (Table, int)
	// MatchPrefix is Match for a sequence that brings its own K/V for its
	// first n tokens in prefix (a session's retained pages, see
	// SeqOptions.Prefix): it returns a new table sharing the pages that
	// hold prefix's first min(n, maxTokens) positions, and that count; a
	// page only partly covered is shared and copied by Grow before it is
	// written. When Match over tokens would cover more, it may return that
	// instead. prefix itself is unchanged.
	MatchPrefix(prefix Table, n int, tokens []int32, salt string, maxTokens int) (Table, int)
	// NewTable returns an empty table whose pages are stored under salt.
	NewTable(salt string) Table
	// Fork returns a new table sharing every page of t (reference counted).
	Fork(t Table) (Table, error)
	// Grow makes t cover positions [0, total) where the first `valid`
	// positions already hold K/V. It allocates what is missing and, when
	// the page that position `valid` falls into is shared with another
	// table, replaces it by a private copy, returning the copies the runner
	// must perform. It allocates nothing when it fails (ErrNoPages).
	Grow(t Table, valid, total int) ([]Copy, error)
	// Commit records that positions [0, len(tokens)) of t now hold the K/V
	// of tokens, so full pages can enter the prefix cache (under the salt
	// the table was created or matched with).
	Commit(t Table, tokens []int32)
	// Truncate shrinks t to its first n positions, releasing the pages
	// wholly beyond them (the rollback of rejected draft tokens, see
	// Scheduler.Accept). Pages it releases go through the same path as
	// Release.
	Truncate(t Table, n int)
	// Release drops t's references; safe to call twice.
	Release(t Table)
}
