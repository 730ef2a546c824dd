package stage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestJSONField(t *testing.T) {
	path := []string{"data", "type"}
	cases := []struct {
		body, want string
		err        error
	}{
		{`{"data":{"type":"a.b"}}`, "a.b", nil},
		{` {"x":[1,{"data":{"type":"no"}}],"data":{"n":null,"type":"\u00e9\"q"}} `, "é\"q", nil},
		{` {"data":{"type":"x"}} trailing`, "", errNotJSON}, // the whole body is checked
		{`{"data":{"type":12.50}}`, "12.50", nil},
		{`{"data":{"type":false}}`, "false", nil},
		{`{"data":{"type":null}}`, "", errFieldMissing},
		{`{"data":{"type":[1]}}`, "", errFieldMissing},
		{`{"data":"type"}`, "", errFieldMissing},
		{`{"data":{}}`, "", errFieldMissing},
		{`[1,2]`, "", errFieldMissing},
		{`{"data":{"type":"first"},"data":{"type":"second"}}`, "first", nil}, // stops at the first
		{`{"data":{"ty`, "", errNotJSON},
		{`{"data" 1}`, "", errNotJSON},
		{`{"a":1,}`, "", errNotJSON},
		{``, "", errNotJSON},
		{`{"data":{"type":"x"} garbage`, "", errNotJSON},
		{`{"data":{"type":"x"},}`, "", errNotJSON},
		{`{"da.ta":{"type":"dot"},"data":{"type":"plain"}}`, "plain", nil}, // keys are not gjson paths
		{`{"data":[{"type":"in array"}]}`, "", errFieldMissing},
		{"{\"data\":{\"type\":\"x\xc3\xff\"}}", "x\ufffd\ufffd", nil}, // as encoding/json decodes it
	}
	for _, c := range cases {
		got, err := jsonField([]byte(c.body), path)
		if got != c.want || !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("jsonField(%q) = %q, %v; want %q, %v", c.body, got, err, c.want, c.err)
		}
	}
}

// reference finds the field with encoding/json.Unmarshal (numbers as
// literals): the value and whether it is a string, number or boolean.
func reference(body []byte, path []string) (string, bool, error) {
	if !json.Valid(body) { // exactly what Unmarshal accepts, trailing bytes included
		return "", false, errors.New("not valid JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", false, err
	}
	for _, k := range path {
		obj, ok := v.(map[string]any)
		if !ok {
			return "", false, nil
		}
		if v, ok = obj[k]; !ok {
			return "", false, nil
		}
	}
	switch x := v.(type) {
	case string:
		return x, true, nil
	case json.Number:
		return string(x), true, nil
	case bool:
		return fmt.Sprint(x), true, nil
	}
	return "", false, nil
}

// hasDuplicateKeys reports an object with a key twice anywhere in a valid
// document (where jsonField, which keeps the first, and Unmarshal, which
// keeps the last, may differ).
func hasDuplicateKeys(body []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	var stack []map[string]bool
	var inObject []bool
	expectKey := func() bool { return len(inObject) > 0 && inObject[len(inObject)-1] }
	keyNext := true
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'):
			stack, inObject, keyNext = append(stack, map[string]bool{}), append(inObject, true), true
			continue
		case json.Delim('['):
			stack, inObject = append(stack, nil), append(inObject, false)
		case json.Delim('}'), json.Delim(']'):
			stack, inObject = stack[:len(stack)-1], inObject[:len(inObject)-1]
		default:
			if s, ok := tok.(string); ok && expectKey() && keyNext {
				if stack[len(stack)-1][s] {
					return true
				}
				stack[len(stack)-1][s] = true
				keyNext = false
				continue
			}
		}
		keyNext = expectKey()
	}
}

// FuzzJSONField checks jsonField against encoding/json: on a document
// Unmarshal accepts, the same value (or the same absence), unless a key
// repeats; on one it refuses, errNotJSON.
func FuzzJSONField(f *testing.F) {
	for _, s := range []string{`{"a":{"b":"x"}}`, `{"a":{"b":1e3},"a":2}`, `{"a":[{"b":1}],"b":true}`, `{"a":{"c":null,"b":"\ud800"}}`, `{"a"`, `"a"`, "{\"a\":{\"b\":\"x\xc3\xff\"}}", `{"a":{"b":"\u0000"}}`} {
		f.Add([]byte(s), "a.b")
	}
	f.Fuzz(func(t *testing.T, body []byte, field string) {
		path := strings.Split(field, ".")
		got, err := jsonField(body, path)
		want, found, refErr := reference(body, path)
		if refErr != nil {
			if !errors.Is(err, errNotJSON) {
				t.Fatalf("jsonField(%q, %q) = %q, %v; encoding/json refuses it (%v)", body, field, got, err, refErr)
			}
			return
		}
		if hasDuplicateKeys(body) {
			return
		}
		switch {
		case errors.Is(err, errNotJSON):
			t.Fatalf("jsonField(%q, %q): %v, but encoding/json reads it", body, field, err)
		case found != (err == nil) || got != want:
			t.Fatalf("jsonField(%q, %q) = %q, %v; encoding/json: %q, found %v", body, field, got, err, want, found)
		}
	})
}

// BenchmarkJSONField: the field last in a body of 1, 16 and 64 KiB of
// sibling fields (the worst case: every byte before it is scanned).
func BenchmarkJSONField(b *testing.B) {
	for _, kib := range []int{1, 16, 64} {
		var buf bytes.Buffer
		buf.WriteString(`{"id":"evt_1","payload":{`)
		for i := 0; buf.Len() < kib<<10-64; i++ {
			fmt.Fprintf(&buf, `"k%d":{"n":%d,"s":"some text here","a":[1,2,true,null]},`, i, i)
		}
		buf.WriteString(`"z":0},"event_type":"order.created"}`)
		body := buf.Bytes()
		b.Run(fmt.Sprintf("%dKiB", kib), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if v, err := jsonField(body, []string{"event_type"}); err != nil || v != "order.created" {
					b.Fatal(v, err)
				}
			}
		})
	}
}
