package protocol

import (
	"bytes"
	"encoding/base64"
	"testing"
)

// BenchmarkDecodePNG decodes a display frame carrying a 20 MiB PNG, the
// largest artifact a kernel may return.
func BenchmarkDecodePNG(b *testing.B) {
	raw := make([]byte, 20<<20)
	copy(raw, pngMagic)
	line := []byte(`{"type":"display","id":"e1","mime":"image/png","data_base64":"` + base64.StdEncoding.EncodeToString(raw) + "\"}\n")
	b.SetBytes(int64(len(line)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := NewDecoder(bytes.NewReader(line)).Next(); err != nil {
			b.Fatal(err)
		}
	}
}
