package envelope

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzOpen feeds Open arbitrary files. It must never panic; a file it
// accepts must re-seal to the identical bytes (one document, one file);
// with a prev document the answer must be the same as without.
func FuzzOpen(f *testing.F) {
	f.Add(seal(f, testBody))
	f.Add(seal(f, testBody, 3, 9, 30))
	f.Add(seal(f, `[1]`))
	f.Add([]byte(`{"format":"rampart.test.v1","epoch":0,"sequence":0,"created_at_unix_nano":-1,"key_id":"0000000000000000","blocks":[[1,"00"]],"signature":"","body":1}` + "\n"))
	f.Add([]byte(`{"format":"rampart.snapshot.v1","version":{"epoch":1,"sequence":2}}`))
	priv, pub := testKey(1)
	prev, err := Open(seal(f, testBody, 3, 9, 30), pub, testFormat, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, file []byte) {
		o, err := Open(file, pub, testFormat, nil)
		oi, erri := Open(file, pub, testFormat, prev)
		if (err == nil) != (erri == nil) {
			t.Fatalf("without prev: %v; with prev: %v", err, erri)
		}
		if err != nil {
			for _, s := range []error{ErrMalformed, ErrFormat, ErrKeyID, ErrSignature, ErrDigest} {
				if errors.Is(err, s) != errors.Is(erri, s) {
					t.Fatalf("without prev: %v; with prev: %v", err, erri)
				}
			}
			return
		}
		if !bytes.Equal(o.Body(), oi.Body()) || o.Manifest != oi.Manifest {
			t.Fatal("with and without prev: different documents")
		}
		again, err := Seal(priv, o.Format, o.Version, o.Created, o.Body(), o.Cuts())
		if err != nil {
			t.Fatalf("accepted file does not re-seal: %v", err)
		}
		if !bytes.Equal(again, file) {
			t.Fatalf("re-seal differs:\n%q\n%q", again, file)
		}
	})
}

// FuzzSealOpen seals arbitrary JSON bodies with arbitrary cuts: what Seal
// writes, Open accepts, with the same body and cuts.
func FuzzSealOpen(f *testing.F) {
	f.Add([]byte(testBody), []byte{3, 9})
	f.Add([]byte(`"x"`), []byte{})
	f.Add([]byte(`[1,2,3,4,5,6,7,8,9]`), []byte{1, 1, 1, 1, 1})
	priv, pub := testKey(1)
	f.Fuzz(func(t *testing.T, body, steps []byte) {
		var cuts []int
		at := 0
		for _, s := range steps {
			at += int(s)
			cuts = append(cuts, at)
		}
		file, err := Seal(priv, testFormat, Version{7, 8}, testCreated, body, cuts)
		if err != nil {
			return // not JSON, a newline, or cuts not inside the body
		}
		o, err := Open(file, pub, testFormat, nil)
		if err != nil {
			t.Fatalf("Open of a sealed file: %v", err)
		}
		if !bytes.Equal(o.Body(), body) || len(o.Cuts()) != len(cuts) {
			t.Fatalf("opened body %q cuts %v, sealed %q cuts %v", o.Body(), o.Cuts(), body, cuts)
		}
		for i, c := range o.Cuts() {
			if c != cuts[i] {
				t.Fatalf("cut %d is %d, sealed %d", i, c, cuts[i])
			}
		}
	})
}
