// Package apikey owns the API keys of sandboxd's TCP listeners: reading the
// operator's keys file (one "name:key" or "name:key:flags" per line, flags
// a comma list of admin and egress) with
// the ownership and mode checks it needs, and telling which key, if any, a
// presented bearer token is.
//
// It must never log, return or format a key: only key names leave it. And
// it must never let the comparison's timing depend on how much of a key was
// right: Match compares HMACs of equal length, in constant time, against
// every key.
package apikey

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/internal/secretfile"
)

// MinKeyLen is the shortest key accepted, in bytes: 32 characters of hex
// carry 128 bits. `openssl rand -hex 24` makes 48 characters (192 bits).
const MinKeyLen = 32

// maxKeyLen bounds a key (and so a line); nothing legitimate is longer.
const maxKeyLen = 512

// maxFileBytes bounds the keys file read into memory.
const maxFileBytes = 1 << 20

var (
	nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	// keyRE is RFC 6750's b64token minus "=" padding mixups: the key must
	// travel unchanged in an Authorization header.
	keyRE = regexp.MustCompile(`^[A-Za-z0-9._~+/-]+=*$`)
)

// Key is one caller's key, by name. The key itself is kept only as an HMAC.
type Key struct {
	Name  string
	Admin bool // "admin": sees every caller's sessions
	// Egress ("egress") may ask for network "egress", as a uid in
	// --egress-allow-uid may.
	Egress bool
	mac    [sha256.Size]byte
}

// Set is the keys of a keys file.
type Set struct {
	secret [32]byte // HMAC key, random per process
	keys   []Key
}

// Names lists the key names, in file order (for logs).
func (s *Set) Names() []string {
	out := make([]string, len(s.keys))
	for i, k := range s.keys {
		out[i] = k.Name
	}
	return out
}

// Lookup returns the key named name, if the file has one (to judge, after
// a reload, whether a key that acted before is still in force and admin).
func (s *Set) Lookup(name string) (Key, bool) {
	for _, k := range s.keys {
		if k.Name == name {
			return k, true
		}
	}
	return Key{}, false
}

// Len is the number of keys.
func (s *Set) Len() int { return len(s.keys) }

// Load reads the keys file at path. The file must be a regular file owned by
// root or by serviceUID (the supervisor's own uid) with no permission for
// group or others (mode 0600 or 0400): anyone who can read it can be any
// caller, and anyone who can write it can add themselves.
func Load(path string, serviceUID int) (*Set, error) {
	f, err := secretfile.Open(path, "api keys file", serviceUID)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(&limitedReader{f: f, n: maxFileBytes + 1}); err != nil {
		return nil, fmt.Errorf("api keys file %s: read: %w", path, err)
	}
	if buf.Len() > maxFileBytes {
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("api keys file %s is larger than %d bytes", path, maxFileBytes), "", nil)
	}
	s, err := Parse(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("api keys file %s: %w", path, err)
	}
	return s, nil
}

type limitedReader struct {
	f *os.File
	n int64
}

func (r *limitedReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errors.New("file too large")
	}
	if int64(len(p)) > r.n {
		p = p[:r.n]
	}
	n, err := r.f.Read(p)
	r.n -= int64(n)
	return n, err
}

// Parse reads keys: one "name:key" or "name:key:admin" per line; blank
// lines and lines starting with "#" are skipped. Names must be unique and
// match [A-Za-z0-9._-]{1,64}; keys must be unique, at least MinKeyLen bytes
// and made of token characters. Errors name the line, never the key.
func Parse(data []byte) (*Set, error) {
	s := &Set{}
	if _, err := rand.Read(s.secret[:]); err != nil {
		return nil, fmt.Errorf("api keys: random HMAC key: %w", err)
	}
	names := map[string]int{}
	macs := map[[sha256.Size]byte]int{}
	var errs []error
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 4096), maxKeyLen+256)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := parseLine(s, line)
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", n, err))
			continue
		}
		if first, dup := names[k.Name]; dup {
			errs = append(errs, fmt.Errorf("line %d: name %q is already used on line %d; names must be unique (a name is a caller's identity)", n, k.Name, first))
			continue
		}
		if first, dup := macs[k.mac]; dup {
			errs = append(errs, fmt.Errorf("line %d: the key is the same as line %d's; every caller needs its own key", n, first))
			continue
		}
		names[k.Name], macs[k.mac] = n, n
		s.keys = append(s.keys, k)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("a line is longer than %d bytes: %w", maxKeyLen+256, err))
	}
	if len(errs) > 0 {
		return nil, errdefs.New(errdefs.ErrInvalid, errors.Join(errs...).Error(), "", nil)
	}
	if len(s.keys) == 0 {
		return nil, errdefs.New(errdefs.ErrInvalid, "no keys: add one name:key per line (make a key with `openssl rand -hex 24`)", "", nil)
	}
	return s, nil
}

func parseLine(s *Set, line string) (Key, error) {
	parts := strings.Split(line, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return Key{}, errors.New(`want "name:key" or "name:key:admin,egress"`)
	}
	name, key := parts[0], parts[1]
	k := Key{Name: name}
	if len(parts) == 3 {
		for _, f := range strings.Split(parts[2], ",") {
			switch f {
			case "admin":
				k.Admin = true
			case "egress":
				k.Egress = true
			default:
				return Key{}, fmt.Errorf("unknown flag %q after the key (flags: admin, egress; comma-separated)", f)
			}
		}
	}
	switch {
	case !nameRE.MatchString(name):
		return Key{}, fmt.Errorf("name %q: use 1 to 64 of [A-Za-z0-9._-]", name)
	case len(key) < MinKeyLen:
		return Key{}, fmt.Errorf("the key of %q is %d bytes; at least %d are required (make one with `openssl rand -hex 24`)", name, len(key), MinKeyLen)
	case len(key) > maxKeyLen:
		return Key{}, fmt.Errorf("the key of %q is longer than %d bytes", name, maxKeyLen)
	case !keyRE.MatchString(key):
		return Key{}, fmt.Errorf("the key of %q has characters that cannot travel in an Authorization header (use hex or base64)", name)
	}
	k.mac = s.sum(key)
	return k, nil
}

func (s *Set) sum(v string) [sha256.Size]byte {
	m := hmac.New(sha256.New, s.secret[:])
	m.Write([]byte(v))
	var out [sha256.Size]byte
	copy(out[:], m.Sum(nil))
	return out
}

// Match returns the key presented is, if any. It hashes the presented
// value once (the HMAC's cost depends only on its length, which the caller
// chose) and compares the fixed-size result with every key's in constant
// time, without stopping at a match: neither how much of a key was right,
// nor which key matched, nor how long the real keys are shows in the time.
func (s *Set) Match(presented string) (Key, bool) {
	got := s.sum(presented)
	found := -1
	for i := range s.keys {
		if subtle.ConstantTimeCompare(got[:], s.keys[i].mac[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Key{}, false
	}
	return s.keys[found], true
}
