package envelope

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Block is one piece of a body: Len bytes from Offset, with their SHA-256.
// The blocks of a document tile its body in order, without gaps.
type Block struct {
	Offset int
	Len    int
	Hash   [32]byte
}

// MaxFormatLen bounds a format name.
const MaxFormatLen = 128

// Seal signs body as a document of the given format and version and returns
// the envelope file, one line ending in '\n'. cuts are the body offsets
// where a block ends and the next begins, strictly increasing and inside
// the body (0 < cut < len(body)); no cuts make one block. Seal refuses an
// empty body, a body that is not valid JSON or holds a newline byte (the
// file is one line of JSON), and a format name outside [A-Za-z0-9._/-].
func Seal(priv ed25519.PrivateKey, format string, v Version, created time.Time, body []byte, cuts []int) ([]byte, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("seal %s: private key is %d bytes, want %d", format, len(priv), ed25519.PrivateKeySize)
	}
	if err := checkFormatName(format); err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	if len(body) == 0 {
		return nil, fmt.Errorf("seal %s %s: empty body", format, v)
	}
	for i, c := range body {
		if c == '\n' {
			return nil, fmt.Errorf("seal %s %s: body holds a newline at offset %d", format, v, i)
		}
	}
	if !json.Valid(body) {
		return nil, fmt.Errorf("seal %s %s: body is not valid JSON", format, v)
	}
	blocks, err := cutBlocks(body, cuts)
	if err != nil {
		return nil, fmt.Errorf("seal %s %s: %w", format, v, err)
	}
	keyID := keyIDBytes(priv.Public().(ed25519.PublicKey))
	nano := created.UnixNano()
	sig := ed25519.Sign(priv, signedMessage(format, v, nano, keyID, manifestDigest(blocks)))

	out := make([]byte, 0, 256+len(blocks)*(len(`[,""],`)+20+64)+len(body))
	out = append(out, `{"format":"`...)
	out = append(out, format...)
	out = append(out, `","epoch":`...)
	out = strconv.AppendUint(out, v.Epoch, 10)
	out = append(out, `,"sequence":`...)
	out = strconv.AppendUint(out, v.Sequence, 10)
	out = append(out, `,"created_at_unix_nano":`...)
	out = strconv.AppendInt(out, nano, 10)
	out = append(out, `,"key_id":"`...)
	out = hex.AppendEncode(out, keyID[:])
	out = append(out, `","blocks":[`...)
	for i, b := range blocks {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, '[')
		out = strconv.AppendInt(out, int64(b.Len), 10)
		out = append(out, `,"`...)
		out = hex.AppendEncode(out, b.Hash[:])
		out = append(out, `"]`...)
	}
	out = append(out, `],"signature":"`...)
	out = base64.StdEncoding.AppendEncode(out, sig)
	out = append(out, `","body":`...)
	out = append(out, body...)
	return append(out, "}\n"...), nil
}

// cutBlocks splits body at cuts and hashes each block.
func cutBlocks(body []byte, cuts []int) ([]Block, error) {
	blocks := make([]Block, 0, len(cuts)+1)
	start := 0
	for i, c := range cuts {
		if c <= start || c >= len(body) {
			return nil, fmt.Errorf("cut %d at offset %d: cuts must rise strictly inside the %d-byte body (previous cut %d)", i, c, len(body), start)
		}
		blocks = append(blocks, Block{Offset: start, Len: c - start, Hash: sha256.Sum256(body[start:c])})
		start = c
	}
	return append(blocks, Block{Offset: start, Len: len(body) - start, Hash: sha256.Sum256(body[start:])}), nil
}

// manifestDigest is the SHA-256 over each block's length (uint64, big
// endian) and hash, in order: the one value the signature covers for the
// whole body.
func manifestDigest(blocks []Block) [32]byte {
	h := sha256.New()
	var rec [8 + 32]byte
	for _, b := range blocks {
		binary.BigEndian.PutUint64(rec[:8], uint64(b.Len))
		copy(rec[8:], b.Hash[:])
		h.Write(rec[:])
	}
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// signedMessage is what the signature covers: format ‖ 0x00 ‖ epoch ‖
// sequence ‖ created (each uint64 big endian) ‖ key id (its 8 bytes) ‖
// manifest digest. Every field of the envelope is in it, so no byte of a
// file that verifies can be changed.
func signedMessage(format string, v Version, created int64, keyID [KeyIDSize]byte, manifest [32]byte) []byte {
	m := make([]byte, 0, len(format)+1+24+KeyIDSize+32)
	m = append(m, format...)
	m = append(m, 0)
	m = binary.BigEndian.AppendUint64(m, v.Epoch)
	m = binary.BigEndian.AppendUint64(m, v.Sequence)
	m = binary.BigEndian.AppendUint64(m, uint64(created))
	m = append(m, keyID[:]...)
	return append(m, manifest[:]...)
}

var errFormatName = errors.New("format name must be 1 to 128 bytes of [A-Za-z0-9._/-]")

func checkFormatName(f string) error {
	if len(f) == 0 || len(f) > MaxFormatLen {
		return fmt.Errorf("format %q: %w", f, errFormatName)
	}
	for i := 0; i < len(f); i++ {
		if !formatByte(f[i]) {
			return fmt.Errorf("format %q: %w", f, errFormatName)
		}
	}
	return nil
}

func formatByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '/' || c == '-'
}
