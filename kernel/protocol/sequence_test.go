package protocol

import (
	"errors"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
)

const (
	readyLine  = `{"type":"ready","language":"python","version":"3.11.2"}` + "\n"
	streamLine = `{"type":"stream","id":"e1","name":"stdout","data":"x"}` + "\n"
	resultLine = `{"type":"result","id":"e1","exit_code":0,"execution_count":1}` + "\n"
)

func TestConnSequence(t *testing.T) {
	c := NewConn(strings.NewReader(readyLine + streamLine + resultLine))
	if r, err := c.Ready(); err != nil || r.Language != "python" {
		t.Fatalf("Ready = %v, %v", r, err)
	}
	if err := c.Begin("e1"); err != nil {
		t.Fatal(err)
	}
	if f, err := c.Next(); err != nil || f.(*Stream).Data != "x" {
		t.Fatalf("Next = %v, %v", f, err)
	}
	if f, err := c.Next(); err != nil || f.(*Result).ExitCode != 0 {
		t.Fatalf("Next = %v, %v", f, err)
	}
	if _, err := c.Next(); !errors.Is(err, errdefs.ErrInternal) {
		t.Fatalf("Next after the result = %v, want a caller error", err)
	}
}

func TestConnRejects(t *testing.T) {
	cases := []struct{ name, input, want string }{
		{"stream before ready", streamLine, "first frame is stream"},
		{"second ready", readyLine + readyLine, "ready frame inside exec"},
		{"other exec's id", readyLine + strings.Replace(streamLine, "e1", "e2", 1), `frame for exec "e2"`},
		{"output between execs", readyLine + resultLine + streamLine, "frame for exec"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewConn(strings.NewReader(tc.input))
			_, err := c.Ready()
			// exec e1 then exec e2, each read to its result
			for _, id := range []string{"e1", "e2"} {
				if err != nil {
					break
				}
				if err = c.Begin(id); err != nil {
					break
				}
				for err == nil {
					var f Frame
					if f, err = c.Next(); err == nil {
						if _, done := f.(*Result); done {
							break
						}
					}
				}
			}
			if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a protocol error saying %q", err, tc.want)
			}
		})
	}
}
