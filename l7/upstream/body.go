package upstream

import (
	"bufio"
	"errors"
	"io"
	"net/http"
)

// Body reads a response body with the framing its head declared. Done
// reports whether the body was read to its end, so the connection may be
// reused.
type Body struct {
	br        *bufio.Reader
	kind      uint8 // bodyNone, bodyLength, bodyChunked, bodyEOF
	remaining int64 // bytes left: of the whole body, or of the current chunk
	done      bool
	chunkHead bool // at the start of a chunk (size line next)
	trailer   http.Header
	budget    int // bytes allowed for the trailer section
}

const (
	bodyNone = iota
	bodyLength
	bodyChunked
	bodyEOF
)

// NewBody returns the body of a response to a request with the given
// method. Trailers of a chunked body are added to trailer (which may be nil
// to drop them), bounded by maxTrailer bytes.
func NewBody(br *bufio.Reader, method string, rh ResponseHead, trailer http.Header, maxTrailer int) *Body {
	b := &Body{br: br, trailer: trailer, budget: maxTrailer}
	b.reset(method, rh)
	return b
}

func (b *Body) reset(method string, rh ResponseHead) {
	switch {
	case method == "HEAD" || !bodyAllowed(rh.Status):
		b.kind, b.done = bodyNone, true
	case rh.Chunked:
		b.kind, b.chunkHead = bodyChunked, true
	case rh.ContentLength >= 0:
		b.kind, b.remaining, b.done = bodyLength, rh.ContentLength, rh.ContentLength == 0
	default:
		b.kind = bodyEOF
	}
}

// Done reports whether the body was read completely (for a close-delimited
// body it never is: the connection cannot be reused).
func (b *Body) Done() bool { return b.done && b.kind != bodyEOF }

// Buffered is how many body bytes can be read without blocking (an upper
// bound); the proxy flushes a streamed response when it reaches zero.
func (b *Body) Buffered() int { return b.br.Buffered() }

// ErrUnexpectedEOF is returned when the upstream closes before the body's
// declared end.
var ErrUnexpectedEOF = errors.New("upstream closed the connection before the end of the body")

func (b *Body) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	switch b.kind {
	case bodyLength:
		return b.readLength(p)
	case bodyChunked:
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
	line, err := readLine(b.br, &budget)
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
			return 0, malformed("bad chunk size line %q", truncate(line))
		}
		if digits == 15 {
			return 0, malformed("chunk size too large")
		}
		size = size<<4 | int64(d)
		digits++
	}
ext:
	if digits == 0 {
		return 0, malformed("bad chunk size line %q", truncate(line))
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
		return malformed("chunk data not followed by CRLF")
	}
	return nil
}

func (b *Body) readTrailer() error {
	for {
		line, err := readLine(b.br, &b.budget)
		if err != nil {
			return eofAsUnexpected(err)
		}
		if len(line) == 0 {
			return nil
		}
		name, value, err := splitField(line)
		if err != nil {
			return err
		}
		if b.trailer != nil {
			key := canonicalKey(name)
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
