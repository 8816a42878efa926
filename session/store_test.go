package session

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sandboxd/sandboxd/launch"
)

// TestConcurrentPersistsOfOneSession: two requests may persist one
// session's metadata at once (an exec's kernel starting, a file upload
// marking it used). Each write must succeed and the file left must be a
// whole one, the last state: the writers share one temporary name, so
// unserialised they remove each other's file under them.
func TestConcurrentPersistsOfOneSession(t *testing.T) {
	st, err := Open(Config{StateDir: t.TempDir(), MaxSessions: 4, TTLDefault: 60, TTLCap: 60, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := st.Create(launch.Caller{UID: os.Getuid()}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for i := 0; i < 400; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := st.SetEnvironment(s, fmt.Sprintf("env-%d", i)); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a concurrent persist failed: %v", err)
	}
	if err := st.SetEnvironment(s, "last"); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(st.metaDir, s.ID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var got Session
	if err := json.Unmarshal(raw, &got); err != nil || got.Environment != "last" {
		t.Fatalf("metadata %s (%v), want the last state", raw, err)
	}
}
