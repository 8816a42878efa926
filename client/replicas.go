package client

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"sort"
)

// Replicas routes conversation keys over several supervisors (replicas
// sharing one S3 archive bucket) by rendezvous hashing: each key goes to
// the endpoint with the highest hash of (endpoint, key). While the set of
// endpoints is the same, a key always reaches the same replica (its live
// session is there); when a replica goes away only its keys move, each to
// its next-highest endpoint, where the session is restored from S3. No
// state is shared between clients: any client with the same endpoint list
// picks the same replica.
type Replicas struct {
	endpoints []string
	clients   map[string]*Client
}

// NewReplicas returns a router over endpoints (supervisor sockets; in
// Kubernetes, one per pod of the Deployment). Duplicates are ignored.
func NewReplicas(endpoints []string) (*Replicas, error) {
	r := &Replicas{clients: map[string]*Client{}}
	for _, e := range endpoints {
		if e == "" {
			return nil, errors.New("client: an empty replica endpoint")
		}
		if _, dup := r.clients[e]; dup {
			continue
		}
		r.endpoints = append(r.endpoints, e)
		r.clients[e] = New(e)
	}
	if len(r.endpoints) == 0 {
		return nil, errors.New("client: no replica endpoints")
	}
	return r, nil
}

// score is the rendezvous weight of key on endpoint: the first 8 bytes of
// sha256(len(endpoint) endpoint key), length-prefixed so that no
// (endpoint, key) pair can collide with another by shifting bytes.
func score(endpoint, key string) uint64 {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(endpoint)))
	h.Write(n[:])
	h.Write([]byte(endpoint))
	h.Write([]byte(key))
	return binary.BigEndian.Uint64(h.Sum(nil)[:8])
}

// Rank returns the endpoints in the order key prefers them: the first is
// its replica, the next is where it goes if that one is down, and so on.
func (r *Replicas) Rank(key string) []string {
	out := append([]string(nil), r.endpoints...)
	sort.Slice(out, func(i, j int) bool {
		si, sj := score(out[i], key), score(out[j], key)
		if si != sj {
			return si > sj
		}
		return out[i] < out[j]
	})
	return out
}

// Pick returns the endpoint of key.
func (r *Replicas) Pick(key string) string { return r.Rank(key)[0] }

// For returns the client of key's replica.
func (r *Replicas) For(key string) *Client { return r.clients[r.Pick(key)] }
