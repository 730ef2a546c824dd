package anycast

import (
	"fmt"
	"time"
)

// input is one health input: the latest raw signal the agent gave (or the
// probe measured) and the rise/fall hysteresis over samples of it.
type input struct {
	cfg Input

	// raw signal, by kind
	set           bool // anything given yet
	up            bool // bool, http
	detail        string
	fn            func() (bool, string) // bool: polled at each sample
	healthy, size int                   // share
	at            time.Time             // age: the time given; http: when probed

	// hysteresis
	state      bool // debounced: up or down
	lastOK     bool
	lastDetail string
	good, bad  int // consecutive samples
	samples    uint64
	since      time.Time // last change of state
}

func newInput(c Input, now time.Time) *input { return &input{cfg: c, since: now} }

// raw says whether the signal is good right now, and why not.
func (in *input) raw(now time.Time) (bool, string) {
	if !in.set {
		return false, "no value yet"
	}
	switch in.cfg.Kind {
	case KindShare:
		if in.size <= 0 {
			return false, "no local upstreams"
		}
		ok := float64(in.healthy) >= in.cfg.MinShare*float64(in.size)
		return ok, fmt.Sprintf("%d/%d healthy, need %.0f%%", in.healthy, in.size, in.cfg.MinShare*100)
	case KindAge:
		age := now.Sub(in.at)
		limit := time.Duration(in.cfg.MaxAgeMs) * time.Millisecond
		return age <= limit, fmt.Sprintf("age %s, limit %s", age.Round(time.Millisecond), limit)
	}
	return in.up, in.detail
}

// sample takes one sample and reports whether the debounced state changed.
func (in *input) sample(now time.Time) bool {
	ok, detail := in.raw(now)
	in.samples++
	in.lastOK, in.lastDetail = ok, detail
	if ok {
		in.good, in.bad = in.good+1, 0
	} else {
		in.good, in.bad = 0, in.bad+1
	}
	switch {
	case !in.state && in.good >= in.cfg.Rise:
		in.state, in.since = true, now
		return true
	case in.state && in.bad >= in.cfg.Fall:
		in.state, in.since = false, now
		return true
	}
	return false
}

// InputStatus is one input as Status shows it.
type InputStatus struct {
	Name    string    `json:"name"`
	Kind    string    `json:"kind"`
	Global  bool      `json:"global"`
	Up      bool      `json:"up"`          // debounced state
	LastOK  bool      `json:"last_sample"` // the latest raw sample
	Detail  string    `json:"detail,omitempty"`
	Good    int       `json:"good_in_a_row"`
	Bad     int       `json:"bad_in_a_row"`
	Rise    int       `json:"rise"`
	Fall    int       `json:"fall"`
	Samples uint64    `json:"samples"`
	Since   time.Time `json:"since"`
}

func (in *input) status() InputStatus {
	return InputStatus{Name: in.cfg.Name, Kind: in.cfg.Kind, Global: in.cfg.Global, Up: in.state,
		LastOK: in.lastOK, Detail: in.lastDetail, Good: in.good, Bad: in.bad, Rise: in.cfg.Rise,
		Fall: in.cfg.Fall, Samples: in.samples, Since: in.since}
}
