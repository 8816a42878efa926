package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// The hash of a record is the SHA-256 of its line without the hash member:
// the JSON object exactly as written, minus its final `,"hash":"<64 hex>"`.
// Because the writer always puts hash last, an auditor recomputes it from
// the bytes on disk with no JSON canonicalisation at all:
//
//	body = line[:len(line)-75] + "}"      (line without its newline)
//	hash = line[len(line)-66:len(line)-2]
//	sha256(body) == hash
const (
	hashPrefix = `,"hash":"`
	hashSuffix = `"}`
	// hashTailLen is the length of `,"hash":"<64 hex>"}`.
	hashTailLen = len(hashPrefix) + 64 + len(hashSuffix)
)

// encodeRecord returns r's line (newline included) and its hash. r.Hash is
// ignored; every other field must already be final.
func encodeRecord(r Record) (line []byte, hash string, err error) {
	r.Hash = ""
	if raw, ok := r.Facts.(json.RawMessage); ok && len(raw) == 0 {
		r.Facts = nil // a relayed report without facts: no "facts":null
	}
	body, err := json.Marshal(r)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(body)
	hash = hex.EncodeToString(sum[:])
	line = make([]byte, 0, len(body)+hashTailLen+1)
	line = append(line, body[:len(body)-1]...)
	line = append(line, hashPrefix...)
	line = append(line, hash...)
	line = append(line, hashSuffix...)
	line = append(line, '\n')
	return line, hash, nil
}

// splitLine checks that line (without its newline) ends in the hash member
// and returns the hashed body (a copy) and the hash the line states.
func splitLine(line []byte) (body []byte, stated string, ok bool) {
	if len(line) < hashTailLen+2 || line[0] != '{' {
		return nil, "", false
	}
	tail := line[len(line)-hashTailLen:]
	if !bytes.HasPrefix(tail, []byte(hashPrefix)) || !bytes.HasSuffix(tail, []byte(hashSuffix)) {
		return nil, "", false
	}
	h := tail[len(hashPrefix) : len(hashPrefix)+64]
	for _, c := range h {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return nil, "", false
		}
	}
	body = make([]byte, 0, len(line)-hashTailLen+1)
	body = append(body, line[:len(line)-hashTailLen]...)
	body = append(body, '}')
	return body, string(h), true
}

// lineHash returns the SHA-256 (hex) of a hashed body.
func lineHash(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// HeadPath is the head file of the audit log at path: a small fixed-size
// file the writer rewrites in place after every record with the log's last
// seq and hash, so that records removed from the end of the log -- which
// leave a chain that is consistent in itself -- are still detected.
func HeadPath(path string) string { return path + ".head" }

// headSize is the fixed size of the head file; one pwrite at offset 0
// replaces it whole.
const headSize = 256

// head is the content of the head file.
type head struct {
	LogID     string `json:"log_id"`
	File      string `json:"file,omitempty"`
	FileIndex int    `json:"file_index"`
	Seq       uint64 `json:"seq"`
	Hash      string `json:"hash"`
}

func encodeHead(h head) []byte {
	b, _ := json.Marshal(h)
	if len(b) > headSize-1 {
		h.File = ""
		b, _ = json.Marshal(h)
	}
	out := bytes.Repeat([]byte{' '}, headSize)
	copy(out, b)
	out[headSize-1] = '\n'
	return out
}

func parseHead(b []byte) (head, error) {
	var h head
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return h, errors.New("the head file is empty")
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return h, fmt.Errorf("the head file is not valid: %w", err)
	}
	if len(h.Hash) != 64 || h.LogID == "" {
		return h, errors.New("the head file lacks log_id or hash")
	}
	return h, nil
}
