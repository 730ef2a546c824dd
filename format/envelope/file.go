package envelope

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces path with data so that a reader sees either the
// old file or the whole new one, never a part: it writes a temporary file
// in the same directory, syncs it, renames it over path and syncs the
// directory, so the new name survives a crash too. The file gets mode perm.
// On failure the temporary file is removed and path is left as it was.
func WriteFileAtomic(path string, data []byte, perm fs.FileMode) error {
	return place(path, data, perm, os.Rename)
}

// WriteFileNew is WriteFileAtomic for a file that must not exist yet: the
// whole file appears at path (link(2)) or, when something is there
// already, nothing changes and the error is fs.ErrExist. Of two writers
// racing to make one file, exactly one wins.
func WriteFileNew(path string, data []byte, perm fs.FileMode) error {
	return place(path, data, perm, func(tmp, path string) error {
		err := os.Link(tmp, path)
		_ = os.Remove(tmp) // linked or not, the temporary name goes
		return err
	})
}

// place writes data to a synced temporary file beside path, puts it at
// path with put, and syncs the directory.
func place(path string, data []byte, perm fs.FileMode, put func(tmp, path string) error) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	werr := f.Chmod(perm)
	if werr == nil {
		_, werr = f.Write(data)
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = put(tmp, path)
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, werr)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("write %s: open directory to sync it: %w", path, err)
	}
	err = d.Sync()
	_ = d.Close()
	if err != nil {
		return fmt.Errorf("write %s: sync directory: %w", path, err)
	}
	return nil
}
