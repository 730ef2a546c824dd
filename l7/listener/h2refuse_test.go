package listener

import (
	"bytes"
	"testing"
)

// The write-side scanner finds a refusal body split across writes and
// frame headers, and ignores other DATA frames.
func TestH2RefusalScannerAcrossWrites(t *testing.T) {
	var got []int
	s := &h2Refusals{onRefusal: func(status int, _, _ string) { got = append(got, status) }}
	frame := func(typ byte, payload []byte) []byte {
		n := len(payload)
		return append([]byte{byte(n >> 16), byte(n >> 8), byte(n), typ, 0, 0, 0, 0, 1}, payload...)
	}
	var wire []byte
	wire = append(wire, frame(0x4, make([]byte, 6))...)                        // SETTINGS
	wire = append(wire, frame(0x1, h2Body431)...)                              // HEADERS with the same bytes: not a body
	wire = append(wire, frame(frameData, []byte("hello"))...)                  // an ordinary body
	wire = append(wire, frame(frameData, h2Body431)...)                        // 431
	wire = append(wire, frame(frameData, bytes.Repeat([]byte("y"), 20000))...) // a long body
	wire = append(wire, frame(frameData, []byte("request header \"Upgrade\" is not valid in HTTP/2\n"))...)
	for i := 0; i < len(wire); i += 7 { // odd-sized writes
		s.scan(wire[i:min(i+7, len(wire))])
	}
	if len(got) != 2 || got[0] != 431 || got[1] != 400 {
		t.Fatalf("refusals seen %v, want [431 400]", got)
	}
}

// Any byte stream, written in any pieces, gives the same refusals as
// written whole, and never panics.
func FuzzH2RefusalScanner(f *testing.F) {
	f.Add(append([]byte{0, 0, byte(len(h2Body431)), 0, 0, 0, 0, 0, 1}, h2Body431...), uint8(3))
	f.Add([]byte{0, 0, 5, 1, 4, 0, 0, 0, 1, 1, 2, 3, 4, 5, 0, 0}, uint8(1))
	f.Fuzz(func(t *testing.T, wire []byte, step uint8) {
		var whole, pieces []int
		a := &h2Refusals{onRefusal: func(status int, _, _ string) { whole = append(whole, status) }}
		a.scan(wire)
		b := &h2Refusals{onRefusal: func(status int, _, _ string) { pieces = append(pieces, status) }}
		n := int(step%32) + 1
		for i := 0; i < len(wire); i += n {
			b.scan(wire[i:min(i+n, len(wire))])
		}
		if len(whole) != len(pieces) {
			t.Fatalf("whole %v, in pieces of %d %v", whole, n, pieces)
		}
		for i := range whole {
			if whole[i] != pieces[i] {
				t.Fatalf("whole %v, in pieces of %d %v", whole, n, pieces)
			}
		}
	})
}
