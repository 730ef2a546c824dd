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
	buf := bytes.NewBuffer(into[:0])
	buf.Grow(int(st.Size()) + bytes.MinRead)
	if _, err := buf.ReadFrom(io.LimitReader(f, int64(max)+1)); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if buf.Len() > max {
		return nil, fmt.Errorf("%w: %s grew past the %d limit while it was read", envelope.ErrTooLarge, path, max)
	}
	return buf.Bytes(), nil
}
