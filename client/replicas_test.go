package client

import (
	"fmt"
	"testing"
)

func TestReplicasRendezvous(t *testing.T) {
	eps := []string{"/run/a.sock", "/run/b.sock", "/run/c.sock", "/run/d.sock"}
	r, err := NewReplicas(eps)
	if err != nil {
		t.Fatal(err)
	}
	same, _ := NewReplicas([]string{eps[3], eps[1], eps[0], eps[2], eps[0]})
	counts := map[string]int{}
	const n = 8000
	for i := range n {
		k := fmt.Sprintf("conversation-%d", i)
		p := r.Pick(k)
		counts[p]++
		if same.Pick(k) != p {
			t.Fatalf("%s: the order of the endpoints changed its replica", k)
		}
	}
	for _, e := range eps {
		if c := counts[e]; c < n/4*85/100 || c > n/4*115/100 {
			t.Errorf("%s got %d of %d keys: not balanced", e, c, n)
		}
	}
	// A replica goes away: only its keys move, each to its second choice.
	fewer, _ := NewReplicas([]string{eps[0], eps[1], eps[3]})
	for i := range n {
		k := fmt.Sprintf("conversation-%d", i)
		before, after := r.Pick(k), fewer.Pick(k)
		if before != eps[2] && after != before {
			t.Fatalf("%s moved from %s to %s though its replica stayed", k, before, after)
		}
		if before == eps[2] && after != r.Rank(k)[1] {
			t.Fatalf("%s moved to %s, not its second choice %s", k, after, r.Rank(k)[1])
		}
	}
	if _, err := NewReplicas(nil); err == nil {
		t.Fatal("no endpoints accepted")
	}
	if _, err := NewReplicas([]string{""}); err == nil {
		t.Fatal("an empty endpoint accepted")
	}
	if r.For("x") == nil {
		t.Fatal("no client")
	}
}
