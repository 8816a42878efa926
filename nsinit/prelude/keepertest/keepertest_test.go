package keepertest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAwaitLifeEnd: the keeper skips its scan only after exactly the clean
// byte and EOF, scans at once after exactly the scan byte, and reads
// anything else -- a bare EOF above all, a helper that died -- as a lost
// helper, to be waited for before the scan.
func TestAwaitLifeEnd(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write []byte
		want  End
	}{
		{"clean end", []byte{Clean}, EndClean},
		{"deliberate end: scan", []byte{Scan}, EndScan},
		{"EOF only: the helper died", nil, EndLost},
		{"another byte", []byte{'x'}, EndLost},
		{"clean twice", []byte{Clean, Clean}, EndLost},
		{"clean then more", []byte{Clean, 'x'}, EndLost},
		{"more then clean", []byte{'x', Clean}, EndLost},
		{"scan then clean", []byte{Scan, Clean}, EndLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if _, err := w.Write(tc.write); err != nil {
				t.Fatal(err)
			}
			w.Close()
			if got := AwaitLifeEnd(int(r.Fd())); got != tc.want {
				t.Fatalf("after %q and EOF: %v, want %v", tc.write, got, tc.want)
			}
		})
	}
}

// The roles a re-executed test binary plays in TestAwaitParentGone.
const (
	roleEnv      = "KEEPERTEST_ROLE"
	parentLifeMS = 200
)

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "parent":
		// Start the waiting child, live a while, exit without waiting.
		c := exec.Command(os.Args[0], "-test.run=^$")
		c.Env = []string{roleEnv + "=child", "KEEPERTEST_PARENT=" + strconv.Itoa(os.Getpid())}
		c.Stdout = os.Stdout
		if err := c.Start(); err != nil {
			fmt.Println("start:", err)
			os.Exit(1)
		}
		time.Sleep(parentLifeMS * time.Millisecond)
		os.Exit(0)
	case "child":
		parent, _ := strconv.Atoi(os.Getenv("KEEPERTEST_PARENT"))
		gone := AwaitParentGone(parent, 10_000)
		// What the parent was when the wait returned: gone, or a zombie
		// (the test has not reaped it yet); anything else is too early.
		state := "gone"
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", parent)); err == nil {
			if i := bytes.LastIndexByte(b, ')'); i > 0 && len(b) > i+2 {
				state = string(b[i+2])
			}
		}
		fmt.Printf("returned=%v parent=%s\n", gone, state)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestAwaitParentGone: the keeper's wait for a lost helper returns only
// once the helper has exited (re-parenting happens in its exit), and is
// bounded when the parent lives on.
func TestAwaitParentGone(t *testing.T) {
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = []string{roleEnv + "=parent"}
	var out bytes.Buffer
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	parent.Stdout = w
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	// Not reaped until the child has reported: the parent's zombie is
	// what the child must see.
	done := make(chan error, 1)
	go func() { _, err := out.ReadFrom(r); done <- err }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting child never reported")
	}
	_ = parent.Wait()
	got := strings.TrimSpace(out.String())
	if got != "returned=true parent=Z" && got != "returned=true parent=gone" {
		t.Fatalf("child reported %q, want the wait to end with its parent exited", got)
	}

	// Its own parent (this test) lives on: the wait gives up at the bound.
	start := time.Now()
	if AwaitParentGone(os.Getppid(), 30) {
		t.Fatal("reported a live parent gone")
	}
	if AwaitParentGone(os.Getpid(), 30) != true {
		t.Fatal("a pid that is not the parent must read as gone at once")
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("the bounded wait took %v", time.Since(start))
	}
}
