package envelope

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "doc")
	for _, data := range []string{"first", "second, longer than the first", ""} {
		if err := WriteFileAtomic(p, []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != data {
			t.Fatalf("after writing %q: read %q, %v", data, got, err)
		}
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o640 {
			t.Fatalf("mode %v, %v; want 0640", st.Mode(), err)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 1 {
		t.Fatalf("directory holds %v (%v), want only doc: no temporary file left", ents, err)
	}
	// A directory cannot be replaced by a file: the write fails, the
	// directory stays, and no temporary file is left behind.
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(sub, []byte("x"), 0o600); err == nil {
		t.Fatal("a file replaced a directory")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Fatalf("after a failed write the directory holds %v, want doc and sub", ents)
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "doc"), nil, 0o600); err == nil {
		t.Fatal("wrote into a missing directory")
	}
}

func TestWriteFileNew(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := WriteFileNew(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := WriteFileNew(p, []byte("two"), 0o600)
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("a second WriteFileNew: %v, want fs.ErrExist", err)
	}
	b, _ := os.ReadFile(p)
	fi, _ := os.Stat(p)
	if string(b) != "one" || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file %q mode %v after the refused write", b, fi.Mode())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("temporary files left: %v", ents)
	}
}
