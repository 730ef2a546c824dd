package envelope

import "testing"

func TestVersionOrderAndText(t *testing.T) {
	vs := []Version{{0, 0}, {0, 1}, {0, 9}, {1, 0}, {1, 2}, {2, 0}}
	for i := range vs {
		for j := range vs {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := vs[i].Compare(vs[j]); got != want {
				t.Errorf("%v.Compare(%v) = %d, want %d", vs[i], vs[j], got, want)
			}
		}
		back, err := ParseVersion(vs[i].String())
		if err != nil || back != vs[i] {
			t.Errorf("ParseVersion(%q) = %v, %v", vs[i].String(), back, err)
		}
	}
	for _, bad := range []string{"", "1", "1.", ".1", "a.1", "1.b", "-1.2", "1.2.3"} {
		if _, err := ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q) accepted", bad)
		}
	}
}
