package launch

import (
	"encoding/json"
	"io"

	"golang.org/x/sys/unix"
)

// bwrapStatus is one JSON document of bwrap's --json-status-fd.
type bwrapStatus struct {
	ChildPID *int `json:"child-pid"`
	ExitCode *int `json:"exit-code"`
}

// bwrapOutcome is what bwrap's status fd said, read to EOF.
type bwrapOutcome struct {
	childPID int  // the sandbox's pid 1 (bwrap's reaper), 0 if never said
	exit     *int // the payload's status as bwrap reports it; nil if never said
}

// maxStatusBytes bounds what is read from the status fd.
const maxStatusBytes = 1 << 20

// watchStatus reads bwrap's status fd (fd 5) to EOF (phase "watch
// status"). The first child-pid becomes a pidfd at once, while the process
// is alive, so the fd names that process even if its pid is reused later;
// hp.pidfd gets it, or -1 if none could be opened.
func (hp *helperProc) watchStatus() {
	go func() { hp.status <- watch(hp.pipes.statusR, hp.pidfd) }()
}

func watch(r io.Reader, pidfd chan<- int) bwrapOutcome {
	var out bwrapOutcome
	sent := false
	dec := json.NewDecoder(io.LimitReader(r, maxStatusBytes))
	for {
		var st bwrapStatus
		if err := dec.Decode(&st); err != nil {
			break
		}
		if st.ChildPID != nil && !sent && *st.ChildPID > 0 {
			out.childPID = *st.ChildPID
			if fd, err := unix.PidfdOpen(*st.ChildPID, 0); err == nil {
				pidfd <- fd
				sent = true
			}
		}
		if st.ExitCode != nil {
			out.exit = st.ExitCode
		}
	}
	// Whatever follows (garbage, or more than the bound) is drained, so
	// the writer never blocks on a full pipe.
	_, _ = io.Copy(io.Discard, r)
	if !sent {
		pidfd <- -1
	}
	return out
}
