package main

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestCommittedProfilesAreCurrent fails when payload.json or
// kubernetes-worker.json differ from what the generator writes: run
// `go generate ./profiles`.
func TestCommittedProfilesAreCurrent(t *testing.T) {
	files, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		have, err := os.ReadFile(filepath.Join("..", "..", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(have, want) {
			t.Errorf("%s is out of date; run go generate ./profiles", name)
		}
	}
	again, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	for name := range files {
		if !bytes.Equal(files[name], again[name]) {
			t.Errorf("%s: generator output is not deterministic", name)
		}
	}
}

func matches(a specs.LinuxSeccompArg, v uint64) bool {
	switch a.Op {
	case specs.OpEqualTo:
		return v == a.Value
	case specs.OpLessThan:
		return v < a.Value
	case specs.OpGreaterEqual:
		return v >= a.Value
	case specs.OpMaskedEqual:
		return v&a.Value == a.ValueTwo
	}
	panic(a.Op)
}

// TestCoverInterval checks that the comparisons cover exactly the interval.
func TestCoverInterval(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	ivs := []interval{{1, 7}, {9, 0x1ffff}, {0x20009, 0xfffffffe}, {3, 3}, {0, 2}, {46, math.MaxUint64},
		{0, math.MaxUint64}, {1 << 63, math.MaxUint64 - 1}, {5, 6}}
	for range 200 {
		a, b := r.Uint64N(1<<20), r.Uint64N(1<<20)
		ivs = append(ivs, interval{min(a, b), max(a, b)})
	}
	for _, iv := range ivs {
		args := coverInterval(iv, 0)
		probe := []uint64{0, 1, math.MaxUint64, iv.lo, iv.hi, iv.lo - 1, iv.hi + 1}
		for _, a := range args {
			if a.Op == specs.OpMaskedEqual {
				probe = append(probe, a.ValueTwo, a.ValueTwo-1, a.ValueTwo|^a.Value, (a.ValueTwo|^a.Value)+1)
			}
		}
		for range 200 {
			if span := iv.hi - iv.lo; span == math.MaxUint64 {
				probe = append(probe, r.Uint64())
			} else {
				probe = append(probe, iv.lo+r.Uint64N(span+1))
			}
		}
		for _, v := range probe {
			in := v >= iv.lo && v <= iv.hi
			n := 0
			for _, a := range args {
				if matches(a, v) {
					n++
				}
			}
			if in != (n > 0) || n > 1 {
				t.Fatalf("interval [%#x, %#x], value %#x: matched by %d rules (in=%v): %+v", iv.lo, iv.hi, v, n, in, args)
			}
		}
	}
}

func TestComplement(t *testing.T) {
	got := complement([]interval{{0, 2}, {7, 7}, {8, 8}, {10, 12}, {11, 20}})
	want := []interval{{3, 6}, {9, 9}, {21, math.MaxUint64}}
	if len(got) != len(want) {
		t.Fatalf("complement: %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("complement: %v, want %v", got, want)
		}
	}
	if g := complement([]interval{{0, math.MaxUint64}}); len(g) != 0 {
		t.Errorf("complement of everything: %v", g)
	}
	if g := complement([]interval{{5, math.MaxUint64}}); len(g) != 1 || g[0] != (interval{0, 4}) {
		t.Errorf("complement of a tail: %v", g)
	}
}
