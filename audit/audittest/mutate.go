// Package audittest tampers with audit logs for tests: it loads a log (the
// active file, its head file and its rotated predecessors) and produces
// every mutation of a given kind at many positions, so a test can prove
// that `audit.Verify` catches each one.
package audittest

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing/fstest"
)

// Kinds of tampering.
const (
	DeleteRecord  = "delete-record" // one line removed
	EditByte      = "edit-byte"     // one byte changed
	SwapRecords   = "swap-records"  // two lines exchanged
	TruncateTail  = "truncate-tail" // a file cut short, at a line boundary or inside a line
	MissingFile   = "missing-rotated-file"
	DuplicateLine = "duplicate-record" // one line repeated
)

// Kinds lists every kind, in report order.
var Kinds = []string{DeleteRecord, EditByte, SwapRecords, TruncateTail, MissingFile, DuplicateLine}

// Log is a set of files by name: the active log, "<active>.head" and the
// rotated files "<active>.<N>".
type Log map[string][]byte

// Load reads the log whose active file is path, with its head file and
// every rotated file beside it.
func Load(path string) (Log, error) {
	dir, base := filepath.Dir(path), filepath.Base(path)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	l := Log{}
	for _, e := range ents {
		n := e.Name()
		if n != base && n != base+".head" && !isRotated(base, n) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		l[n] = b
	}
	if _, ok := l[base]; !ok {
		return nil, fmt.Errorf("%s: no such log", path)
	}
	return l, nil
}

func isRotated(base, name string) bool {
	rest, ok := strings.CutPrefix(name, base+".")
	if !ok {
		return false
	}
	n, err := strconv.Atoi(rest)
	return err == nil && n > 0
}

// FS returns the log as a file system for audit.Verify.
func (l Log) FS() fs.FS {
	m := fstest.MapFS{}
	for n, b := range l {
		m[n] = &fstest.MapFile{Data: b, Mode: 0o600}
	}
	return m
}

// LogFiles returns the record files (not the head file), rotated ones first
// by number, the active one (base) last.
func (l Log) LogFiles(base string) []string {
	var rot []string
	for n := range l {
		if isRotated(base, n) {
			rot = append(rot, n)
		}
	}
	sort.Slice(rot, func(i, j int) bool {
		a, _ := strconv.Atoi(strings.TrimPrefix(rot[i], base+"."))
		b, _ := strconv.Atoi(strings.TrimPrefix(rot[j], base+"."))
		return a < b
	})
	return append(rot, base)
}

func (l Log) with(name string, data []byte) Log {
	out := make(Log, len(l))
	for n, b := range l {
		out[n] = b
	}
	out[name] = data
	return out
}

func (l Log) without(name string) Log {
	out := make(Log, len(l))
	for n, b := range l {
		if n != name {
			out[n] = b
		}
	}
	return out
}

// Mutation is one tampered copy of a log.
type Mutation struct {
	Kind  string
	Where string // file, line and position, for a failure message
	Log   Log
}

// Options bound how many mutations are made.
type Options struct {
	// MaxEditsPerFile bounds edit-byte mutations per file: every byte of a
	// smaller file is edited, a larger one at evenly spread positions plus
	// the first and last byte of every line. 0 means 4000.
	MaxEditsPerFile int
	// Seed makes the random swaps and edit masks repeatable.
	Seed uint64
}

// Mutations returns every mutation of every kind of l, whose active file is
// base.
func Mutations(l Log, base string, o Options) []Mutation {
	if o.MaxEditsPerFile == 0 {
		o.MaxEditsPerFile = 4000
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x5a17))
	var out []Mutation
	files := l.LogFiles(base)
	for _, name := range files {
		data := l[name]
		lines := splitLines(data)
		offsets := lineOffsets(lines)

		// Delete each line; repeat each line.
		for i := range lines {
			out = append(out, Mutation{DeleteRecord, fmt.Sprintf("%s line %d", name, i+1), l.with(name, join(lines, i, -1))})
			out = append(out, Mutation{DuplicateLine, fmt.Sprintf("%s line %d", name, i+1), l.with(name, join(lines, -1, i))})
		}
		// Swap each adjacent pair, and as many random pairs.
		for i := 0; i+1 < len(lines); i++ {
			out = append(out, Mutation{SwapRecords, fmt.Sprintf("%s lines %d and %d", name, i+1, i+2), l.with(name, swapped(lines, i, i+1))})
		}
		for k := 0; k < len(lines) && len(lines) > 2; k++ {
			i, j := rng.IntN(len(lines)), rng.IntN(len(lines))
			if i == j || bytes.Equal(lines[i], lines[j]) {
				continue
			}
			out = append(out, Mutation{SwapRecords, fmt.Sprintf("%s lines %d and %d", name, i+1, j+1), l.with(name, swapped(lines, i, j))})
		}
		// Cut the file at every line boundary (but the very end) and at
		// three places inside every line.
		for i, off := range offsets {
			out = append(out, Mutation{TruncateTail, fmt.Sprintf("%s cut before line %d (byte %d)", name, i+1, off), l.with(name, clone(data[:off]))})
			n := len(lines[i])
			for _, in := range []int{1, n / 2, n - 1} {
				if in > 0 && in < n {
					cut := off + in
					out = append(out, Mutation{TruncateTail, fmt.Sprintf("%s cut inside line %d (byte %d)", name, i+1, cut), l.with(name, clone(data[:cut]))})
				}
			}
		}
		// Edit bytes.
		for _, pos := range editPositions(data, offsets, o.MaxEditsPerFile) {
			mask := byte(1 << rng.IntN(8))
			if rng.IntN(4) == 0 {
				mask = byte(1 + rng.IntN(255))
			}
			b := clone(data)
			b[pos] ^= mask
			out = append(out, Mutation{EditByte, fmt.Sprintf("%s byte %d (line %d) ^ %#02x", name, pos, lineOf(offsets, pos)+1, mask), l.with(name, b)})
		}
	}
	// Swap records between neighbouring files: the last of one with the
	// first of the next, and a line from the middle of each.
	for i := 0; i+1 < len(files); i++ {
		a, b := splitLines(l[files[i]]), splitLines(l[files[i+1]])
		if len(a) == 0 || len(b) == 0 {
			continue
		}
		for _, p := range [][2]int{{len(a) - 1, 0}, {len(a) / 2, len(b) / 2}} {
			na, nb := append([][]byte(nil), a...), append([][]byte(nil), b...)
			na[p[0]], nb[p[1]] = b[p[1]], a[p[0]]
			m := l.with(files[i], join(na, -1, -1)).with(files[i+1], join(nb, -1, -1))
			out = append(out, Mutation{SwapRecords, fmt.Sprintf("%s line %d and %s line %d", files[i], p[0]+1, files[i+1], p[1]+1), m})
		}
	}
	// Remove each rotated file.
	for _, name := range files[:len(files)-1] {
		out = append(out, Mutation{MissingFile, name + " removed", l.without(name)})
	}
	return out
}

func clone(b []byte) []byte { return append([]byte{}, b...) }

// splitLines splits data after each newline, keeping the newlines.
func splitLines(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			out = append(out, data)
			break
		}
		out = append(out, data[:i+1])
		data = data[i+1:]
	}
	return out
}

func lineOffsets(lines [][]byte) []int {
	offs := make([]int, len(lines))
	off := 0
	for i, l := range lines {
		offs[i] = off
		off += len(l)
	}
	return offs
}

func lineOf(offsets []int, pos int) int {
	return sort.SearchInts(offsets, pos+1) - 1
}

// join rebuilds the file without line skip (-1: none), repeating line dup.
func join(lines [][]byte, skip, dup int) []byte {
	var b bytes.Buffer
	for i, l := range lines {
		if i == skip {
			continue
		}
		b.Write(l)
		if i == dup {
			b.Write(l)
		}
	}
	return b.Bytes()
}

func swapped(lines [][]byte, i, j int) []byte {
	cp := append([][]byte(nil), lines...)
	cp[i], cp[j] = cp[j], cp[i]
	return join(cp, -1, -1)
}

func editPositions(data []byte, offsets []int, max int) []int {
	if len(data) <= max {
		pos := make([]int, len(data))
		for i := range pos {
			pos[i] = i
		}
		return pos
	}
	seen := map[int]bool{}
	var pos []int
	add := func(p int) {
		if p >= 0 && p < len(data) && !seen[p] {
			seen[p] = true
			pos = append(pos, p)
		}
	}
	for i, off := range offsets {
		add(off)
		end := len(data)
		if i+1 < len(offsets) {
			end = offsets[i+1]
		}
		add(end - 1) // the newline
		add(end - 2) // the closing brace
	}
	step := len(data) / max
	if step < 1 {
		step = 1
	}
	for p := step / 2; p < len(data); p += step {
		add(p)
	}
	sort.Ints(pos)
	return pos
}
