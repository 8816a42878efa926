package egress

import "encoding/binary"

// testExt is one raw ClientHello extension.
type testExt struct {
	typ  uint16
	data []byte
}

// sniExt is a server_name extension carrying name byte for byte (no
// normalisation: the tests feed it names a client should never send).
func sniExt(name string) testExt {
	entry := append([]byte{nameTypeHost}, u16(len(name))...)
	entry = append(entry, name...)
	return testExt{typ: extServerName, data: append(u16(len(entry)), entry...)}
}

func u16(n int) []byte { return binary.BigEndian.AppendUint16(nil, uint16(n)) }

// rawHello builds one TLS record holding a minimal ClientHello with exts,
// for the cases crypto/tls cannot be made to send (ECH, ESNI, names that
// are not valid host names).
func rawHello(exts ...testExt) []byte {
	body := []byte{3, 3}
	body = append(body, make([]byte, 32)...) // random
	body = append(body, 0)                   // legacy_session_id
	body = append(body, 0, 2, 0x13, 0x01)    // cipher_suites: TLS_AES_128_GCM_SHA256
	body = append(body, 1, 0)                // legacy_compression_methods: null
	var ext []byte
	for _, e := range exts {
		ext = append(ext, u16(int(e.typ))...)
		ext = append(ext, u16(len(e.data))...)
		ext = append(ext, e.data...)
	}
	body = append(body, u16(len(ext))...)
	body = append(body, ext...)
	hs := append([]byte{handshakeHello, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}, body...)
	return append([]byte{recordHandshake, 3, 1, byte(len(hs) >> 8), byte(len(hs))}, hs...)
}
