package snapdir

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// errTooLarge is a snapshot file over snapshot.MaxFileBytes.
var errTooLarge = errors.New("snapshot file too large")

// readFile reads a snapshot file of at most snapshot.MaxFileBytes. A larger
// one is refused by its size before a byte is read (so a huge or sparse
// file costs no memory), and a file that grows past the bound while it is
// read is cut off at it and refused too. Only regular files are read: the
// open does not block, so a FIFO named *.snap cannot stall the watcher.
func readFile(path string) ([]byte, error) {
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
	if st.Size() > snapshot.MaxFileBytes {
		return nil, fmt.Errorf("%w: %s is %d bytes, over the %d limit", errTooLarge, path, st.Size(), snapshot.MaxFileBytes)
	}
	var buf bytes.Buffer
	buf.Grow(int(st.Size()) + bytes.MinRead)
	if _, err := buf.ReadFrom(io.LimitReader(f, snapshot.MaxFileBytes+1)); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if buf.Len() > snapshot.MaxFileBytes {
		return nil, fmt.Errorf("%w: %s grew past the %d limit while it was read", errTooLarge, path, snapshot.MaxFileBytes)
	}
	return buf.Bytes(), nil
}
