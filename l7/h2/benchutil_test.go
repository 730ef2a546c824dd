package h2

import (
	"bufio"
	"bytes"
	"io"

	"golang.org/x/net/http2/hpack"
)

type bytesBuffer = bytes.Buffer

func bufioWriter(w io.Writer) *bufio.Writer { return bufio.NewWriterSize(w, 32<<10) }
func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReaderSize(r, 32<<10) }
func newEncoder(w io.Writer) *hpack.Encoder { return hpack.NewEncoder(w) }

func hpackField(name, value string) hpack.HeaderField {
	return hpack.HeaderField{Name: name, Value: value}
}
