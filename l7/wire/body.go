package wire

import (
	"bufio"
	"errors"
	"io"
	"net/http"
)

// Framing is how a message body is delimited (RFC 9112 §6).
type Framing uint8

const (
	NoBody   Framing = iota // no body at all
	Length                  // Content-Length bytes
	Chunked                 // chunked transfer coding, then trailers
	UntilEOF                // until the connection closes (responses only)
)

// Body reads a message body with the framing its head declared. Done
// reports whether it was read to its end, so the connection may be reused.
// The zero Body is not usable; call Reset first. A Body is reused across
// messages on one connection.
type Body struct {
	br        *bufio.Reader
	kind      Framing
	remaining int64 // bytes left: of the whole body, or of the current chunk
	done      bool
	chunkHead bool // at the start of a chunk (size line next)
	trailer   http.Header
	budget    int // bytes allowed for the trailer section
	consumed  int64
}

// Reset prepares b for a new body read from br. length is the
// Content-Length for Length framing. Trailers of a chunked body are added to
// trailer (nil drops them), bounded by maxTrailer bytes.
func (b *Body) Reset(br *bufio.Reader, f Framing, length int64, trailer http.Header, maxTrailer int) {
	*b = Body{br: br, kind: f, trailer: trailer, budget: maxTrailer}
	switch f {
	case NoBody:
		b.done = true
	case Length:
		b.remaining, b.done = length, length == 0
	case Chunked:
		b.chunkHead = true
	}
}

// Consumed is how many body bytes were read so far.
func (b *Body) Consumed() int64 { return b.consumed }

// Done reports whether the body was read completely (for a close-delimited
// body it never is: the connection cannot be reused).
func (b *Body) Done() bool { return b.done && b.kind != UntilEOF }

// Buffered is how many body bytes can be read without blocking (an upper
// bound); the proxy flushes a streamed response when it reaches zero.
func (b *Body) Buffered() int { return b.br.Buffered() }

// ErrUnexpectedEOF is returned when the peer closes before the body's
// declared end.
var ErrUnexpectedEOF = errors.New("connection closed before the end of the body")

func (b *Body) Read(p []byte) (int, error) {
	n, err := b.read(p)
	b.consumed += int64(n)
	return n, err
}

func (b *Body) read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	switch b.kind {
	case Length:
		return b.readLength(p)
	case Chunked:
		return b.readChunked(p)
	default:
		n, err := b.br.Read(p)
		if errors.Is(err, io.EOF) {
			b.done = true
		}
		return n, err
	}
}

func (b *Body) readLength(p []byte) (int, error) {
	if int64(len(p)) > b.remaining {
		p = p[:b.remaining]
	}
	n, err := b.br.Read(p)
	b.remaining -= int64(n)
	if b.remaining == 0 {
		b.done = true
		return n, nil
	}
	if errors.Is(err, io.EOF) {
		err = ErrUnexpectedEOF
	}
	return n, err
}

func (b *Body) readChunked(p []byte) (int, error) {
	if b.chunkHead {
		size, err := b.readChunkSize()
		if err != nil {
			return 0, err
		}
		b.chunkHead = false
		if size == 0 {
			if err := b.readTrailer(); err != nil {
				return 0, err
			}
			b.done = true
			return 0, io.EOF
		}
		b.remaining = size
	}
	if int64(len(p)) > b.remaining {
		p = p[:b.remaining]
	}
	n, err := b.br.Read(p)
	b.remaining -= int64(n)
	if b.remaining == 0 {
		if err := b.readCRLF(); err != nil {
			return n, err
		}
		b.chunkHead = true
		return n, nil
	}
	if errors.Is(err, io.EOF) {
		err = ErrUnexpectedEOF
	}
	return n, err
}

// readChunkSize parses "hex[;ext]" and its CRLF.
func (b *Body) readChunkSize() (int64, error) {
	budget := 4096
	line, err := ReadLine(b.br, &budget)
	if err != nil {
		return 0, eofAsUnexpected(err)
	}
	var size int64
	digits := 0
	for _, c := range line {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		case c == ';' || c == ' ' || c == '\t':
			goto ext
		default:
			return 0, Malformed("bad chunk size line %q", Truncate(line))
		}
		if digits == 15 {
			return 0, Malformed("chunk size too large")
		}
		size = size<<4 | int64(d)
		digits++
	}
ext:
	if digits == 0 {
		return 0, Malformed("bad chunk size line %q", Truncate(line))
	}
	return size, nil
}

func (b *Body) readCRLF() error {
	c, err := b.br.ReadByte()
	if err == nil && c == '\r' {
		c, err = b.br.ReadByte()
	}
	if err != nil {
		return eofAsUnexpected(err)
	}
	if c != '\n' {
		return Malformed("chunk data not followed by CRLF")
	}
	return nil
}

func (b *Body) readTrailer() error {
	for {
		line, err := ReadLine(b.br, &b.budget)
		if err != nil {
			return eofAsUnexpected(err)
		}
		if len(line) == 0 {
			return nil
		}
		name, value, err := SplitField(line)
		if err != nil {
			return err
		}
		if b.trailer != nil {
			key := CanonicalKey(name)
			b.trailer[key] = append(b.trailer[key], string(value))
		}
	}
}

func eofAsUnexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return ErrUnexpectedEOF
	}
	return err
}
