package protocol

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
)

// bigStreamLine is a valid stream frame line of about n bytes.
func bigStreamLine(n int) []byte {
	return []byte(`{"type":"stream","id":"e1","name":"stdout","data":"` + strings.Repeat("a", n) + "\"}\n")
}

// TestBudgetBoundsFramesInFlight: decoders sharing one budget hold at
// most its bytes of frame lines together. A second large frame waits
// while the first is held; past the wait it breaks its channel with a
// clear resource-exhausted error; once the first decoder moves on (or
// closes), the bytes are free again. Small frames are never charged.
func TestBudgetBoundsFramesInFlight(t *testing.T) {
	const frame = 3 << 20
	b := NewBudget(4<<20, 200*time.Millisecond)
	first := NewDecoder(io.MultiReader(bytes.NewReader(bigStreamLine(frame)), bytes.NewReader(bigStreamLine(10))))
	first.Budget(b)
	if _, err := first.Next(); err != nil {
		t.Fatal(err)
	}
	if used := b.Used(); used < frame {
		t.Fatalf("a held %d-byte frame charges %d bytes of the budget", frame, used)
	}
	second := NewDecoder(bytes.NewReader(bigStreamLine(frame)))
	second.Budget(b)
	start := time.Now()
	_, err := second.Next()
	if err == nil || !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "budget") {
		t.Fatalf("a frame past the supervisor's budget: %v, want a resource-exhausted refusal", err)
	}
	if took := time.Since(start); took < 150*time.Millisecond {
		t.Fatalf("refused after %s, without waiting for the budget", took)
	}
	if _, err := first.Next(); err != nil { // a small frame: the big one is released
		t.Fatal(err)
	}
	if used := b.Used(); used != 0 {
		t.Fatalf("%d bytes still charged after the big frame was consumed", used)
	}
	third := NewDecoder(bytes.NewReader(bigStreamLine(frame)))
	third.Budget(b)
	if _, err := third.Next(); err != nil {
		t.Fatalf("a frame within the budget once it was freed: %v", err)
	}
	third.Close()
	if used := b.Used(); used != 0 {
		t.Fatalf("%d bytes still charged after Close", used)
	}
}
