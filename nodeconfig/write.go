package nodeconfig

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Write puts files into dir, each atomically (a temporary file renamed over
// the old one) and only when its content changed, so a reboot with the same
// node.yaml touches nothing. Secret files are 0640 with dir's group (on a
// node /etc/rampart is root:rampart 0750, so the proxy can read its token);
// the rest 0644. It returns the names it wrote.
func Write(dir string, files []File) ([]string, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("output directory: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("output directory %s: not a directory", dir)
	}
	gid := -1
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		gid = int(s.Gid)
	}
	var wrote []string
	for _, f := range files {
		path := filepath.Join(dir, f.Name)
		mode := os.FileMode(0o644)
		if f.Secret {
			mode = 0o640
		}
		data := f.Data
		old, err := os.ReadFile(path)
		if err != nil && !os.IsNotExist(err) {
			return wrote, fmt.Errorf("read %s: %w", path, err)
		}
		if f.Env && err == nil {
			data = MergeEnv(old, f.Data)
		}
		if err == nil && bytes.Equal(old, data) {
			if fi, err := os.Stat(path); err == nil && fi.Mode().Perm() == mode {
				continue
			}
		}
		if err := writeFile(path, data, mode, gid); err != nil {
			return wrote, err
		}
		wrote = append(wrote, f.Name)
	}
	return wrote, nil
}

// MergeEnv is old with its RAMPART_ARGS line replaced by rendered's (the
// first one; later ones are dropped), or rendered's appended when old has
// none. Every other line of old stays as it was.
func MergeEnv(old, rendered []byte) []byte {
	var line []byte
	for _, l := range bytes.Split(rendered, []byte("\n")) {
		if bytes.HasPrefix(l, []byte(argsKey)) {
			line = l
			break
		}
	}
	var out [][]byte
	done := false
	for _, l := range bytes.Split(bytes.TrimSuffix(old, []byte("\n")), []byte("\n")) {
		if bytes.HasPrefix(bytes.TrimLeft(l, " \t"), []byte(argsKey)) {
			if !done {
				out = append(out, line)
				done = true
			}
			continue
		}
		out = append(out, l)
	}
	if !done {
		out = append(out, line)
	}
	return append(bytes.Join(out, []byte("\n")), '\n')
}

const argsKey = "RAMPART_ARGS="

func writeFile(path string, data []byte, mode os.FileMode, gid int) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	done := false
	defer func() {
		if !done {
			_ = os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if gid >= 0 && os.Getuid() == 0 {
		if err := tmp.Chown(0, gid); err != nil {
			_ = tmp.Close()
			return fmt.Errorf("write %s: chown to group %d: %w", path, gid, err)
		}
	}
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	done = true
	return nil
}
