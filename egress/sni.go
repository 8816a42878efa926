package egress

import (
	"errors"
	"fmt"
)

// TLS record and handshake constants (RFC 8446 §5.1, §4; RFC 6066 §3).
const (
	recordHandshake   = 0x16
	handshakeHello    = 0x01
	extServerName     = 0x0000
	extECH            = 0xfe0d // encrypted_client_hello (RFC 9849)
	extESNI           = 0xffce // encrypted_server_name (draft-ietf-tls-esni-01..05)
	nameTypeHost      = 0x00
	recordHeaderLen   = 5
	maxRecordLen      = 1 << 14 // a plaintext record's payload bound
	MaxClientHelloLen = recordHeaderLen + maxRecordLen
)

// errNotTLS means the bytes are not a TLS handshake record at all.
var errNotTLS = errors.New("not a TLS handshake")

// ErrEncryptedHello means the ClientHello carries an encrypted inner hello
// (ECH) or an encrypted server name (draft ESNI). Its real server name is
// then hidden and its outer server_name is whatever the client chose, so
// no name in it can be checked.
var ErrEncryptedHello = errors.New("encrypted ClientHello (ECH or ESNI): the real server name is hidden")

// reader is a bounds-checked cursor over untrusted bytes: every read that
// would run past the end fails instead of panicking.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b) {
		r.err = errors.New("truncated ClientHello")
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u8() int {
	b := r.take(1)
	if b == nil {
		return 0
	}
	return int(b[0])
}

func (r *reader) u16() int {
	b := r.take(2)
	if b == nil {
		return 0
	}
	return int(b[0])<<8 | int(b[1])
}

func (r *reader) u24() int {
	b := r.take(3)
	if b == nil {
		return 0
	}
	return int(b[0])<<16 | int(b[1])<<8 | int(b[2])
}

// vec reads a length-prefixed vector (lenBytes of 1 or 2) into a sub-reader.
func (r *reader) vec(lenBytes int) *reader {
	n := r.u8()
	if lenBytes == 2 {
		n = n<<8 | r.u8()
	}
	return &reader{b: r.take(n), err: r.err}
}

// RecordLen returns the total length (header included) of the TLS record
// whose header starts buf, once at least 5 bytes are there. It is how the
// proxy knows how much to peek without reading past the ClientHello.
func RecordLen(hdr []byte) (int, error) {
	if len(hdr) < recordHeaderLen {
		return 0, errors.New("short TLS record header")
	}
	if hdr[0] != recordHandshake || hdr[1] != 3 {
		return 0, errNotTLS
	}
	n := int(hdr[3])<<8 | int(hdr[4])
	if n == 0 || n > maxRecordLen {
		return 0, fmt.Errorf("TLS record length %d out of range", n)
	}
	return recordHeaderLen + n, nil
}

// ParseSNI returns the host_name of the server_name extension of the
// ClientHello in rec, one whole TLS record (header included). It returns
// "" and no error for a ClientHello without SNI. A ClientHello split over
// several records is refused: clients send it in one (it fits: 16 KiB),
// and accepting fragments would let a payload hide the name. A ClientHello
// with an ECH or ESNI extension is ErrEncryptedHello.
func ParseSNI(rec []byte) (string, error) {
	n, err := RecordLen(rec)
	if err != nil {
		return "", err
	}
	if n != len(rec) {
		return "", errors.New("TLS record length does not match the bytes given")
	}
	r := &reader{b: rec[recordHeaderLen:]}
	if r.u8() != handshakeHello {
		return "", errors.New("first handshake message is not a ClientHello")
	}
	body := &reader{b: r.take(r.u24())}
	if r.err != nil {
		return "", errors.New("ClientHello split across TLS records")
	}
	body.take(2 + 32) // legacy_version, random
	body.vec(1)       // legacy_session_id
	body.vec(2)       // cipher_suites
	body.vec(1)       // legacy_compression_methods
	if body.err != nil {
		return "", body.err
	}
	if len(body.b) == 0 {
		return "", nil // no extensions at all
	}
	exts := body.vec(2)
	if body.err != nil {
		return "", body.err
	}
	return findSNI(exts)
}

func findSNI(exts *reader) (string, error) {
	sni, found, encrypted := "", false, false
	for len(exts.b) > 0 && exts.err == nil {
		typ := exts.u16()
		data := exts.vec(2)
		if typ == extECH || typ == extESNI {
			encrypted = true
		}
		if exts.err != nil || typ != extServerName {
			continue
		}
		if found {
			return "", errors.New("duplicate server_name extension")
		}
		found = true
		name, err := parseServerName(data)
		if err != nil {
			return "", err
		}
		sni = name
	}
	if exts.err != nil {
		return "", exts.err
	}
	if encrypted {
		return "", ErrEncryptedHello
	}
	return sni, nil
}

func parseServerName(data *reader) (string, error) {
	list := data.vec(2)
	if data.err != nil || len(data.b) != 0 {
		return "", errors.New("malformed server_name extension")
	}
	name := ""
	for len(list.b) > 0 && list.err == nil {
		typ := list.u8()
		v := list.vec(2)
		if list.err != nil {
			break
		}
		if typ != nameTypeHost {
			continue
		}
		if name != "" {
			// RFC 6066: at most one name of a type.
			return "", errors.New("two host_name entries in server_name")
		}
		if len(v.b) == 0 {
			return "", errors.New("empty host_name in server_name")
		}
		name = string(v.b)
	}
	if list.err != nil {
		return "", list.err
	}
	return name, nil
}
