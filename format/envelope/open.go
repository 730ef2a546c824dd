package envelope

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// DefaultMaxFileBytes bounds a file given to Open; OpenLimit takes another
// bound.
const DefaultMaxFileBytes = 512 << 20

// Errors Open fails with; match them with errors.Is. The message says what
// was wrong and where.
var (
	ErrTooLarge  = errors.New("envelope file too large")
	ErrMalformed = errors.New("malformed envelope")
	ErrFormat    = errors.New("wrong document format")
	ErrKeyID     = errors.New("envelope key id is not the verifying key's")
	ErrSignature = errors.New("envelope signature invalid")
	ErrDigest    = errors.New("envelope block digest mismatch")
)

// Opened is a verified envelope. Body and the block table point into the
// file given to Open, which must not be changed afterwards: a later Open
// that gets this one as prev trusts that its blocks still hold the bytes
// that were hashed.
type Opened struct {
	Format   string
	Version  Version
	Created  time.Time
	KeyID    string
	Manifest [32]byte // the digest of the block table, which the signature covers
	Stat     Stat     // the work this Open did

	body   []byte
	blocks []Block
	index  map[[32]byte]int // block hash -> index in blocks
}

// Stat counts the blocks Open hashed and the blocks it took as unchanged
// from prev (equal hash claimed and equal bytes) without hashing them.
type Stat struct {
	Hashed      int
	HashedBytes int64
	Reused      int
	ReusedBytes int64
}

// Body is the document's canonical body, a slice of the file.
func (o *Opened) Body() []byte { return o.body }

// Blocks returns a copy of the block table.
func (o *Opened) Blocks() []Block { return append([]Block(nil), o.blocks...) }

// Cuts returns the body offsets where blocks begin, after the first: what
// Seal takes to cut the body the same way again.
func (o *Opened) Cuts() []int {
	cuts := make([]int, 0, len(o.blocks)-1)
	for _, b := range o.blocks[1:] {
		cuts = append(cuts, b.Offset)
	}
	return cuts
}

// Open verifies an envelope file of at most DefaultMaxFileBytes; see
// OpenLimit.
func Open(file []byte, pub ed25519.PublicKey, format string, prev *Opened) (*Opened, error) {
	return OpenLimit(file, pub, format, prev, DefaultMaxFileBytes)
}

// OpenLimit verifies an envelope file of the given format against pub and
// returns it opened. It checks, cheapest first: the size (ErrTooLarge), the
// canonical framing, byte for byte as Seal writes it (ErrMalformed), the
// format name (ErrFormat), that key_id names pub (ErrKeyID), the signature
// over the header and block table (ErrSignature), then that each block of
// the body hashes to its entry in the table (ErrDigest).
//
// prev, a document opened before (or nil), makes the last step
// incremental: a block whose claimed hash and length equal a block of prev
// and whose bytes equal that block's bytes is not hashed again (those bytes
// are known to hash to that value). Any other block is hashed. The version
// order is not checked here: that is the caller's policy.
func OpenLimit(file []byte, pub ed25519.PublicKey, format string, prev *Opened, maxBytes int) (*Opened, error) {
	if len(file) > maxBytes {
		return nil, fmt.Errorf("%s: %w: %d bytes, over the %d limit", format, ErrTooLarge, len(file), maxBytes)
	}
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%s: verifying key is %d bytes, want %d", format, len(pub), ed25519.PublicKeySize)
	}
	h, err := parse(file, format)
	if err != nil {
		return nil, err
	}
	if want := keyIDBytes(pub); h.keyID != want {
		return nil, fmt.Errorf("%s %s: %w: file names key %x, the verifying key is %x", format, h.version, ErrKeyID, h.keyID, want)
	}
	manifest := manifestDigest(h.blocks)
	if !ed25519.Verify(pub, signedMessage(format, h.version, h.created, h.keyID, manifest), h.sig[:]) {
		return nil, fmt.Errorf("%s %s: %w: not signed by key %x over this header and block table", format, h.version, ErrSignature, h.keyID)
	}
	o := &Opened{
		Format:   format,
		Version:  h.version,
		Created:  time.Unix(0, h.created),
		KeyID:    KeyID(pub),
		Manifest: manifest,
		body:     h.body,
		blocks:   h.blocks,
		index:    make(map[[32]byte]int, len(h.blocks)),
	}
	for i, b := range h.blocks {
		data := h.body[b.Offset : b.Offset+b.Len]
		o.index[b.Hash] = i
		if prev != nil {
			if k, ok := prev.index[b.Hash]; ok {
				pb := prev.blocks[k]
				if pb.Len == b.Len && bytes.Equal(prev.body[pb.Offset:pb.Offset+pb.Len], data) {
					o.Stat.Reused++
					o.Stat.ReusedBytes += int64(b.Len)
					continue
				}
			}
		}
		o.Stat.Hashed++
		o.Stat.HashedBytes += int64(b.Len)
		if sha256.Sum256(data) != b.Hash {
			return nil, fmt.Errorf("%s %s: %w: block %d (%d bytes at body offset %d) does not hash to %x…", format, h.version, ErrDigest, i, b.Len, b.Offset, b.Hash[:8])
		}
	}
	return o, nil
}

// header is an envelope's fields as parsed, before any check of meaning.
type header struct {
	format  string
	version Version
	created int64
	keyID   [KeyIDSize]byte
	blocks  []Block
	sig     [ed25519.SignatureSize]byte
	body    []byte
}

// Header is what an envelope file claims, read without verifying it.
type Header struct {
	Format   string
	Version  Version
	Created  time.Time
	KeyID    string
	Manifest [32]byte // the digest of the claimed block table
}

// Peek reads an envelope file's header without verifying the signature or
// the body, for reporting only (the version a source offers, the digest a
// builder just wrote). The framing must be well formed (ErrMalformed).
func Peek(file []byte) (*Header, error) {
	h, err := parse(file, "")
	if err != nil {
		return nil, err
	}
	return &Header{Format: h.format, Version: h.version, Created: time.Unix(0, h.created),
		KeyID: hex.EncodeToString(h.keyID[:]), Manifest: manifestDigest(h.blocks)}, nil
}

// parse reads the envelope's framing; format "" takes any format name. It accepts exactly what Seal writes:
// the fields in their order, no whitespace, numbers without leading zeros,
// lower-case hex and padded base64 with clean padding bits.
func parse(file []byte, format string) (*header, error) {
	s := scanner{b: file}
	name := []byte(format) // the file's format name, once read
	bad := func(what string) error {
		if len(name) == 0 {
			return fmt.Errorf("%w: at byte %d: %s", ErrMalformed, s.i, what)
		}
		return fmt.Errorf("%s: %w: at byte %d: %s", name, ErrMalformed, s.i, what)
	}
	if !s.lit(`{"format":"`) {
		return nil, bad(`want {"format":"`)
	}
	got, ok := s.until('"', MaxFormatLen+1)
	if !ok || checkFormatName(string(got)) != nil {
		return nil, bad("format name: want 1 to 128 bytes of [A-Za-z0-9._/-] then a quote")
	}
	name = got
	if format != "" && string(name) != format {
		return nil, fmt.Errorf("%w: the file is format %q, want %q", ErrFormat, name, format)
	}
	h := header{format: string(name)}
	if !s.lit(`","epoch":`) {
		return nil, bad(`want ","epoch":`)
	}
	if h.version.Epoch, ok = s.uint(); !ok {
		return nil, bad("epoch: want a decimal uint64 without leading zeros")
	}
	if !s.lit(`,"sequence":`) {
		return nil, bad(`want ,"sequence":`)
	}
	if h.version.Sequence, ok = s.uint(); !ok {
		return nil, bad("sequence: want a decimal uint64 without leading zeros")
	}
	if !s.lit(`,"created_at_unix_nano":`) {
		return nil, bad(`want ,"created_at_unix_nano":`)
	}
	if h.created, ok = s.int(); !ok {
		return nil, bad("created_at_unix_nano: want a decimal int64 without leading zeros")
	}
	if !s.lit(`,"key_id":"`) {
		return nil, bad(`want ,"key_id":"`)
	}
	if !s.hex(h.keyID[:]) {
		return nil, bad("key_id: want 16 lower-case hex digits")
	}
	if !s.lit(`","blocks":[`) {
		return nil, bad(`want ","blocks":[`)
	}
	off := 0
	for {
		if !s.lit(`[`) {
			return nil, bad("block table: want [length,\"sha256 hex\"]")
		}
		n, ok := s.uint()
		if !ok || n == 0 || n > uint64(len(file)-off) {
			return nil, bad(fmt.Sprintf("block %d: length must be a decimal from 1 to the file size", len(h.blocks)))
		}
		b := Block{Offset: off, Len: int(n)}
		if !s.lit(`,"`) || !s.hex(b.Hash[:]) || !s.lit(`"]`) {
			return nil, bad(fmt.Sprintf("block %d: want ,\"64 lower-case hex digits\"]", len(h.blocks)))
		}
		h.blocks = append(h.blocks, b)
		off += b.Len
		if s.lit(`]`) {
			break
		}
		if !s.lit(`,`) {
			return nil, bad("block table: want , or ]")
		}
	}
	if !s.lit(`,"signature":"`) {
		return nil, bad(`want ,"signature":"`)
	}
	if !s.base64(h.sig[:]) {
		return nil, bad(fmt.Sprintf("signature: want the %d-byte signature in padded base64", ed25519.SignatureSize))
	}
	if !s.lit(`","body":`) {
		return nil, bad(`want ","body":`)
	}
	if !bytes.HasSuffix(file[s.i:], []byte("}\n")) {
		return nil, bad(`the file must end in the body, "}" and a newline`)
	}
	h.body = file[s.i : len(file)-2]
	if len(h.body) != off {
		return nil, bad(fmt.Sprintf("the body is %d bytes but the blocks tile %d", len(h.body), off))
	}
	return &h, nil
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) lit(l string) bool {
	if len(s.b)-s.i < len(l) || string(s.b[s.i:s.i+len(l)]) != l {
		return false
	}
	s.i += len(l)
	return true
}

// until returns the bytes up to (not including) c, looking at most max
// bytes ahead, and leaves s at c.
func (s *scanner) until(c byte, max int) ([]byte, bool) {
	rest := s.b[s.i:]
	if len(rest) > max {
		rest = rest[:max]
	}
	j := bytes.IndexByte(rest, c)
	if j < 0 {
		return nil, false
	}
	out := rest[:j]
	s.i += j
	return out, true
}

// uint reads a canonical decimal uint64: "0" or digits without a leading
// zero, no overflow.
func (s *scanner) uint() (uint64, bool) {
	start := s.i
	var v uint64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		d := uint64(s.b[s.i] - '0')
		if v > (1<<64-1-d)/10 {
			return 0, false
		}
		v = v*10 + d
		s.i++
	}
	n := s.i - start
	if n == 0 || n > 1 && s.b[start] == '0' {
		return 0, false
	}
	return v, true
}

// int reads a canonical decimal int64 (no "-0").
func (s *scanner) int() (int64, bool) {
	neg := s.lit("-")
	v, ok := s.uint()
	switch {
	case !ok:
		return 0, false
	case !neg && v <= 1<<63-1:
		return int64(v), true
	case neg && v != 0 && v <= 1<<63:
		return int64(-v), true
	}
	return 0, false
}

// hex decodes exactly 2*len(dst) lower-case hex digits.
func (s *scanner) hex(dst []byte) bool {
	if len(s.b)-s.i < 2*len(dst) {
		return false
	}
	for k := range dst {
		hi, ok1 := nibble(s.b[s.i+2*k])
		lo, ok2 := nibble(s.b[s.i+2*k+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[k] = hi<<4 | lo
	}
	s.i += 2 * len(dst)
	return true
}

func nibble(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// base64 decodes exactly len(dst) bytes of strict padded standard base64.
func (s *scanner) base64(dst []byte) bool {
	n := base64.StdEncoding.EncodedLen(len(dst))
	if len(s.b)-s.i < n {
		return false
	}
	buf := make([]byte, base64.StdEncoding.DecodedLen(n))
	got, err := base64.StdEncoding.Strict().Decode(buf, s.b[s.i:s.i+n])
	if err != nil || got != len(dst) {
		return false
	}
	copy(dst, buf)
	s.i += n
	return true
}
