package docwatch

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/rampart-edge/rampart/format/envelope"
)

// readFile reads a file of at most max bytes. A larger one is refused by
// its size before a byte is read (so a huge or sparse file costs no
// memory), and a file that grows past the bound while it is read is cut off
// at it and refused too; both wrap envelope.ErrTooLarge. Only regular files
// are read: the open does not block, so a FIFO in a watched place cannot
// stall the watcher. The bytes go into into's array when it has room
// (into is overwritten), else into a new one.
func readFile(path string, max int, into []byte) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, st.Mode().Type())
	}
	if st.Size() > int64(max) {
		return nil, fmt.Errorf("%w: %s is %d bytes, over the %d limit", envelope.ErrTooLarge, path, st.Size(), max)
	}
	if need := int(st.Size()) + bytes.MinRead; cap(into) < need {
		// bytes.Buffer would double the capacity it had; a new buffer of
		// the size with some room is enough
		into = make([]byte, 0, spareCap(int(st.Size())))
	}
	buf := bytes.NewBuffer(into[:0])
	if _, err := buf.ReadFrom(io.LimitReader(f, int64(max)+1)); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if buf.Len() > max {
		return nil, fmt.Errorf("%w: %s grew past the %d limit while it was read", envelope.ErrTooLarge, path, max)
	}
	return buf.Bytes(), nil
}

// spareCap is the capacity for a buffer a file of size bytes is read into:
// room for the file growing by 1/16 (and the read's bytes.MinRead) before a
// read needs a bigger one.
func spareCap(size int) int { return size + size/16 + bytes.MinRead }

// prefault touches every page of b, so that reading into it later does not
// take a page fault per 4 KiB (for an 80 MB buffer fresh from the OS about
// 20,000 faults: ~10-25 ms of a read).
func prefault(b []byte) {
	b = b[:cap(b)]
	for i := 0; i < len(b); i += 4096 {
		b[i] = 0
	}
}
