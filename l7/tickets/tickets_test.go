package tickets

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var t0 = time.Unix(1_800_000_000, 0) // a period boundary for a 1 h rotation: 1.8e9 / 3600 = 500000

func TestTwoSourcesShareKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tickets.json")
	a, err := New(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(path)
	if err != nil {
		t.Fatal(err)
	}
	ka, na, err := a.Keys("https/tcp", t0.Add(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	kb, _, err := b.Keys("https/tcp", t0.Add(20*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(ka) != 2 || ka[0] != kb[0] || ka[1] != kb[1] {
		t.Fatal("two sources on one file gave different keys in one period")
	}
	if ka[0] == ka[1] {
		t.Fatal("the current and previous keys are the same")
	}
	if !na.Equal(t0.Add(time.Hour)) {
		t.Fatalf("next change %v, want %v", na, t0.Add(time.Hour))
	}
	other, _, _ := a.Keys("admin/tcp", t0.Add(10*time.Minute))
	quic, _, _ := a.Keys("https/quic", t0.Add(10*time.Minute))
	if other[0] == ka[0] || quic[0] == ka[0] {
		t.Fatal("listeners or transports share a key")
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v mode %v", err, fi.Mode())
	}
}

// TestRotation: the next period's previous key is this period's current
// key (tickets are accepted one more period), and B, reading the file A
// advanced, agrees with A.
func TestRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tickets.json")
	a, _ := New(path)
	b, _ := New(path)
	k1, _, _ := a.Keys("l/tcp", t0.Add(time.Minute))
	k2, _, _ := a.Keys("l/tcp", t0.Add(time.Hour+time.Minute))
	if k2[1] != k1[0] || k2[0] == k1[0] {
		t.Fatal("after one rotation the old current key is not the new previous one")
	}
	kb, _, _ := b.Keys("l/tcp", t0.Add(time.Hour+2*time.Minute))
	if kb[0] != k2[0] || kb[1] != k2[1] {
		t.Fatal("a second source disagrees after the first advanced the file")
	}
	// Ten periods on, in one go, equals stepping there.
	k12, _, _ := a.Keys("l/tcp", t0.Add(12*time.Hour))
	st, err := Parse(mustRead(t, path))
	if err != nil {
		t.Fatal(err)
	}
	if st.Epoch != t0.Unix()/3600+11 {
		t.Fatalf("file epoch %d, want the period before now's (%d)", st.Epoch, t0.Unix()/3600+11)
	}
	if key(st.raw, "l/tcp") != k12[1] {
		t.Fatal("the file does not hold the previous period's state")
	}
}

// TestFileHoldsNoOlderState: after advancing, the file's state cannot give
// an older period's key (the ratchet only goes forward), and it is not the
// state the earlier period used.
func TestFileHoldsNoOlderState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tickets.json")
	a, _ := New(path)
	old, _, _ := a.Keys("l/tcp", t0)
	before, _ := Parse(mustRead(t, path))
	a.Keys("l/tcp", t0.Add(5*time.Hour))
	after, _ := Parse(mustRead(t, path))
	if after.raw == before.raw || key(after.raw, "l/tcp") == old[1] || key(after.raw, "l/tcp") == old[0] {
		t.Fatal("the advanced file still holds an old period's state")
	}
	s := before.raw
	for range after.Epoch - before.Epoch {
		s = step(s)
	}
	if s != after.raw {
		t.Fatal("advancing is not the ratchet")
	}
}

func TestRotationChangeStartsNewChain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tickets.json")
	a, _ := New(path)
	b, _ := New(path)
	v := a.Version()
	k1, _, _ := a.Keys("l/tcp", t0.Add(time.Minute))
	a.SetRotation(10 * time.Minute)
	if a.Version() == v {
		t.Fatal("a new rotation did not bump Version")
	}
	a.SetRotation(10 * time.Minute)
	if a.Version() != v+1 {
		t.Fatal("the same rotation bumped Version again")
	}
	k2, next, _ := a.Keys("l/tcp", t0.Add(time.Minute))
	if k2[0] == k1[0] || !next.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("rotation change: same key or next %v", next)
	}
	b.SetRotation(10 * time.Minute)
	kb, _, _ := b.Keys("l/tcp", t0.Add(2*time.Minute))
	if kb[0] != k2[0] {
		t.Fatal("proxies disagree after both took the new rotation")
	}
	a.SetRotation(time.Second) // bounded
	if time.Duration(a.rotation.Load()) != MinRotation {
		t.Fatalf("rotation %v, want the minimum", time.Duration(a.rotation.Load()))
	}
}

func TestClockBehindFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tickets.json")
	a, _ := New(path)
	ahead, _, _ := a.Keys("l/tcp", t0.Add(3*time.Hour))
	k, _, err := a.Keys("l/tcp", t0) // the clock stepped back
	if err != nil || len(k) != 1 || k[0] != ahead[1] {
		t.Fatalf("clock behind the file: %d keys, err %v", len(k), err)
	}
}

func TestInProcessSource(t *testing.T) {
	a, err := New("")
	if err != nil || a.Shared() {
		t.Fatal(err)
	}
	k1, _, _ := a.Keys("l/tcp", t0)
	k2, _, _ := a.Keys("l/tcp", t0.Add(time.Minute))
	if k1[0] != k2[0] {
		t.Fatal("an in-process source changed keys within a period")
	}
	k3, _, _ := a.Keys("l/tcp", t0.Add(time.Hour))
	if k3[1] != k1[0] {
		t.Fatal("an in-process source does not rotate")
	}
	b, _ := New("")
	if kb, _, _ := b.Keys("l/tcp", t0); kb[0] == k1[0] {
		t.Fatal("two in-process sources share keys")
	}
}

func TestBadFilesRefused(t *testing.T) {
	dir := t.TempDir()
	good := `{"version":1,"rotation_ms":3600000,"epoch":5,"state":"` + strings.Repeat("ab", 32) + `"}`
	for name, c := range map[string]struct {
		body string
		mode os.FileMode
		want string
	}{
		"world readable": {good, 0o644, "mode 0644"},
		"not json":       {"junk", 0o600, "invalid character"},
		"short state":    {`{"version":1,"rotation_ms":3600000,"epoch":5,"state":"abcd"}`, 0o600, "64 hex"},
		"bad version":    {`{"version":2,"rotation_ms":3600000,"epoch":5,"state":"` + strings.Repeat("ab", 32) + `"}`, 0o600, "version 2"},
		"tiny rotation":  {`{"version":1,"rotation_ms":5,"epoch":5,"state":"` + strings.Repeat("ab", 32) + `"}`, 0o600, "rotation_ms 5"},
		"unknown field":  {`{"version":1,"x":1}`, 0o600, "unknown field"},
		"trailing":       {good + "{}", 0o600, "after the object"},
		"huge":           {strings.Repeat(" ", MaxFileBytes+1), 0o600, "more than"},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(p, []byte(c.body), c.mode); err != nil {
			t.Fatal(err)
		}
		_ = os.Chmod(p, c.mode)
		_, err := New(p)
		if err == nil || !errors.Is(err, ErrState) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrState with %q", name, err, c.want)
		}
		if b, _ := os.ReadFile(p); string(b) != c.body {
			t.Errorf("%s: the refused file was changed", name)
		}
	}
	if _, err := New(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory: %v", err)
	}
	if _, err := New(filepath.Join(dir, "missing-dir", "t.json")); err != nil {
		t.Errorf("a missing directory is made: %v", err)
	}
	if _, err := New(filepath.Join(dir, "world-readable", "t.json")); err == nil {
		t.Error("a file under a regular file was accepted")
	}
	p := filepath.Join(dir, "good")
	_ = os.WriteFile(p, []byte(good), 0o600)
	if _, err := New(p); err != nil {
		t.Errorf("a good file: %v", err)
	}
}

// TestConcurrentCreate: proxies starting at once end with one state.
func TestConcurrentCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tickets.json")
	var wg sync.WaitGroup
	keys := make([][32]byte, 8)
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := New(path)
			if err != nil {
				t.Error(err)
				return
			}
			k, _, err := s.Keys("l/tcp", time.Now())
			if err != nil {
				t.Error(err)
				return
			}
			keys[i] = k[0]
		}()
	}
	wg.Wait()
	for i := range keys {
		if keys[i] != keys[0] {
			t.Fatal("proxies starting at once derived different keys")
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"version":1,"rotation_ms":3600000,"epoch":5,"state":"` + strings.Repeat("ab", 32) + `"}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"version":1,"rotation_ms":60000,"epoch":-1,"state":""}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrState) {
				t.Fatalf("error without ErrState: %v", err)
			}
			return
		}
		again, err := Parse(st.encode())
		if err != nil || again.raw != st.raw || again.Epoch != st.Epoch || again.RotationMs != st.RotationMs {
			t.Fatalf("a parsed state does not survive encoding: %v", err)
		}
	})
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOpenChangesNothing: opening a file another proxy uses (a 10-minute
// rotation) neither rewrites it nor re-bases it to the default.
func TestOpenChangesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tickets.json")
	a, _ := New(path)
	a.SetRotation(10 * time.Minute)
	ka, _, _ := a.Keys("l/tcp", time.Now())
	before := mustRead(t, path)
	b, err := New(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(mustRead(t, path)) != string(before) || b.Rotation() != 10*time.Minute {
		t.Fatalf("opening changed the file or missed its rotation (%v)", b.Rotation())
	}
	kb, _, _ := b.Keys("l/tcp", time.Now())
	if kb[0] != ka[0] {
		t.Fatal("a proxy opening the file later derives other keys")
	}
}
