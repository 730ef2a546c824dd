package telemetry

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"

	"go.opentelemetry.io/otel/trace"
)

// traceparentLen is the length of a version-00 traceparent value:
// "00-" 32 hex "-" 16 hex "-" 2 hex.
const traceparentLen = 55

// parseTraceparent reads a W3C traceparent value without allocating. It
// accepts exactly what propagation.TraceContext accepts (a differential
// test holds it to that): lower-case hex, version ff refused, version 00
// with no trailing data and no reserved flag bits, later versions with
// optional "-"-separated extra fields; all-zero ids are invalid. Only the
// sampled and random flags are kept.
func parseTraceparent(h string) (tid trace.TraceID, sid trace.SpanID, flags trace.TraceFlags, ok bool) {
	if len(h) < traceparentLen || h[2] != '-' || h[35] != '-' || h[52] != '-' {
		return tid, sid, 0, false
	}
	var ver, fl [1]byte
	bad := decodeHex(ver[:], h[0:2]) | decodeHex(tid[:], h[3:35]) | decodeHex(sid[:], h[36:52]) | decodeHex(fl[:], h[53:55])
	if bad&0xf0 != 0 || ver[0] == 0xff {
		return tid, sid, 0, false
	}
	rest := h[traceparentLen:]
	if ver[0] == 0 {
		// propagation.TraceContext splits on "-", so one trailing "-"
		// leaves nothing after it and passes; mirror that.
		if (rest != "" && rest != "-") || fl[0] > 3 {
			return tid, sid, 0, false
		}
	} else if rest != "" && rest[0] != '-' {
		return tid, sid, 0, false
	}
	if !tid.IsValid() || !sid.IsValid() {
		return tid, sid, 0, false
	}
	return tid, sid, trace.TraceFlags(fl[0]) & (trace.FlagsSampled | trace.FlagsRandom), true
}

// decodeHex decodes lower-case hex src into dst (len(src) == 2*len(dst))
// and returns the OR of all nibble lookups: a result with any of the high
// four bits set means an invalid character.
func decodeHex(dst []byte, src string) byte {
	var mark byte
	for i := range dst {
		hi, lo := unhex[src[2*i]], unhex[src[2*i+1]]
		dst[i] = hi<<4 | lo
		mark |= hi | lo
	}
	return mark
}

var unhex = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = byte(c-'a') + 10
	}
	return t
}()

// formatTraceparent writes a version-00 traceparent (one allocation: the
// string).
func formatTraceparent(tid trace.TraceID, sid trace.SpanID, flags trace.TraceFlags) string {
	var b [traceparentLen]byte
	b[0], b[1], b[2] = '0', '0', '-'
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(flags & (trace.FlagsSampled | trace.FlagsRandom))})
	return string(b[:])
}

// newTraceID and newSpanID draw from math/rand/v2's per-thread ChaCha8
// source: no lock, no allocation (the same source the SDK's generator uses).
func newTraceID() (tid trace.TraceID) {
	for !tid.IsValid() {
		binary.BigEndian.PutUint64(tid[:8], rand.Uint64())
		binary.BigEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid
}

func newSpanID() (sid trace.SpanID) {
	for !sid.IsValid() {
		binary.BigEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}
