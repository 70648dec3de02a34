package gguf

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
)

// Split models. llama.cpp's gguf-split tool (and the converters behind many
// published GGUF repositories) writes one model as N files named
// PREFIX-00001-of-0000N.gguf to PREFIX-0000N-of-0000N.gguf (five digits
// each). Every file is a whole GGUF file with its own header, tensor infos
// and data section, carrying
//
//	split.no             UINT16  the file's index, from 0
//	split.count          UINT16  N
//	split.tensors.count  INT32   the model's tensor count (all files)
//
// The first file holds the model's metadata; the others hold only their
// tensors (and these keys). Open and OpenCopy take the first file and load
// the others beside it: the File then lists every file's tensors (each
// tensor's Offset is relative to its own file's data section), Size is the
// total of the files, Close releases them all. Opening any other file of
// the set is refused with the name of the first.

// Metadata keys of a split model.
const (
	KeySplitNo      = "split.no"
	KeySplitCount   = "split.count"
	KeySplitTensors = "split.tensors.count"
)

// ErrSplit is matched (errors.Is) by every error about the files of a
// split model: a file opened that is not the first, a file missing or
// misnamed, or files that do not belong together.
var ErrSplit = errors.New("gguf: split model")

// splitName matches a split file's name: the prefix, its number (from 1)
// and the count.
var splitName = regexp.MustCompile(`^(.*)-(\d{5})-of-(\d{5})\.gguf$`)

// splitPath returns the path of file no (0-based) of a split model of
// count files whose first file is first (PREFIX-00001-of-NNNNN.gguf), or
// false when first is not named that way.
func splitPath(first string, no, count int) (string, bool) {
	m := splitName.FindStringSubmatch(first)
	if m == nil || m[2] != "00001" || m[3] != fmt.Sprintf("%05d", count) {
		return "", false
	}
	return fmt.Sprintf("%s-%05d-of-%05d.gguf", m[1], no+1, count), true
}

// splitTotal returns the bytes of all the files of the split model whose
// first file is path, for progress; the size of path alone (or 0) when it
// is not named as a first file or a file is missing (opening reports it).
func splitTotal(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	total := st.Size()
	m := splitName.FindStringSubmatch(path)
	if m == nil || m[2] != "00001" {
		return total
	}
	count, _ := strconv.Atoi(m[3])
	for no := 1; no < count; no++ {
		p, _ := splitPath(path, no, count)
		st, err := os.Stat(p)
		if err != nil {
			return total
		}
		total += st.Size()
	}
	return total
}

// offsetProgress reports a file's progress as part of the whole: done
// bytes of the file after base bytes of the files before it, out of total
// (when known, else the file's own total).
func offsetProgress(progress func(done, total int64), base, total int64) func(done, total int64) {
	if progress == nil {
		return nil
	}
	return func(done, fileTotal int64) {
		progress(base+done, max(total, base+fileTotal))
	}
}

// openSplits loads the other files of a split model whose first file f
// (at path) is, and adds their tensors to f; it does nothing for a model
// in one file. The caller closes f on error.
func (f *File) openSplits(path string, load loadFunc, progress func(done, total int64), total int64) error {
	count, ok := f.Uint(KeySplitCount)
	if !ok || count <= 1 {
		return nil
	}
	if count > 1<<16-1 {
		return fmt.Errorf("%w: %s has %s = %d", ErrSplit, path, KeySplitCount, count)
	}
	n := int(count)
	if no, _ := f.Uint(KeySplitNo); no != 0 {
		first := "the file numbered 00001"
		if m := splitName.FindStringSubmatch(path); m != nil {
			first = fmt.Sprintf("%s-%05d-of-%05d.gguf", m[1], 1, n)
		}
		return fmt.Errorf("%w: %s is file %d of %d; open the first, %s", ErrSplit, path, no+1, n, first)
	}
	if _, ok := splitPath(path, 0, n); !ok {
		return fmt.Errorf("%w: %s is the first of %d files but not named PREFIX-00001-of-%05d.gguf, so the others cannot be found", ErrSplit, path, n, n)
	}
	unmaps := []func() error{f.unmap}
	f.unmap = func() error {
		var errs []error
		for _, u := range unmaps {
			errs = append(errs, u())
		}
		return errors.Join(errs...)
	}
	base := f.size
	for no := 1; no < n; no++ {
		p, _ := splitPath(path, no, n)
		s, err := openOne(p, load, offsetProgress(progress, base, total))
		if err != nil {
			return fmt.Errorf("%w: file %d of %d: %w", ErrSplit, no+1, n, err)
		}
		unmaps = append(unmaps, s.unmap)
		s.unmap = nil // released with f
		if err := f.addSplit(s, p, no, n); err != nil {
			return err
		}
		base += s.size
	}
	if want, ok := f.Int(KeySplitTensors); ok && want != int64(len(f.Tensors)) {
		return fmt.Errorf("%w: %s = %d but the %d files hold %d tensors", ErrSplit, KeySplitTensors, want, n, len(f.Tensors))
	}
	return nil
}

// addSplit checks that s (file no of n, at path) belongs to f's model and
// adds its tensors to f.
func (f *File) addSplit(s *File, path string, no, n int) error {
	if got, ok := s.Uint(KeySplitNo); !ok || got != uint64(no) {
		return fmt.Errorf("%w: %s has %s = %v, want %d", ErrSplit, path, KeySplitNo, s.kv[KeySplitNo], no)
	}
	if got, ok := s.Uint(KeySplitCount); !ok || got != uint64(n) {
		return fmt.Errorf("%w: %s has %s = %v, want %d", ErrSplit, path, KeySplitCount, s.kv[KeySplitCount], n)
	}
	for _, t := range s.Tensors {
		if _, dup := f.byName[t.Name]; dup {
			return fmt.Errorf("%w: tensor %q is in %s and in an earlier file", ErrSplit, t.Name, path)
		}
		f.byName[t.Name] = t
	}
	f.Tensors = append(f.Tensors, s.Tensors...)
	f.size += s.size
	return nil
}
