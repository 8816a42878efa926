package e2b

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"sync"
	"time"
)

// sandbox is an E2B sandbox: a sandboxd session, the key that created it
// (presented as the bearer of every call made for it) and its access token.
type sandbox struct {
	id       string // the session id, which is the E2B sandbox id
	key      string
	token    string
	tokenSum [sha256.Size]byte
	template string
	envs     map[string]string
	metadata map[string]string
	started  time.Time

	mu       sync.Mutex
	contexts map[string]bool // by language: true created, false removed
}

// tokenOK reports in constant time whether tok is the sandbox's token. Both
// sides are hashed first, so neither the length nor a prefix leaks.
func (sb *sandbox) tokenOK(tok string) bool {
	sum := sha256.Sum256([]byte(tok))
	return tok != "" && subtle.ConstantTimeCompare(sum[:], sb.tokenSum[:]) == 1
}

// createdBy reports in constant time whether key created the sandbox.
func (sb *sandbox) createdBy(key string) bool {
	a, b := sha256.Sum256([]byte(key)), sha256.Sum256([]byte(sb.key))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// registry maps sandbox ids to sandboxes. It lives in memory: a restarted
// supervisor keeps its sessions but forgets their tokens.
type registry struct {
	mu sync.Mutex
	m  map[string]*sandbox
}

func newRegistry() *registry { return &registry{m: map[string]*sandbox{}} }

func (r *registry) add(sb *sandbox) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[sb.id] = sb
}

func (r *registry) get(id string) *sandbox {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[id]
}

func (r *registry) remove(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, id)
}

// newToken returns a random access token (256 bits, hex).
func newToken() (string, [sha256.Size]byte, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", [sha256.Size]byte{}, err
	}
	tok := hex.EncodeToString(b[:])
	return tok, sha256.Sum256([]byte(tok)), nil
}
