package lab

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"
)

// Drill is a failure drill: it acts on the lab, records what happened in
// r, returns an error when the lab did not behave, and leaves the lab as
// it found it (restarts what it stopped).
type Drill func(ctx context.Context, l *Lab, r *Report) error

var drills = struct {
	sync.Mutex
	m map[string]Drill
}{m: map[string]Drill{}}

// Register makes a drill available by name (rampart lab drill NAME). Call
// it from an init() in the drill's file; a second drill of the same name
// panics.
func Register(name string, d Drill) {
	drills.Lock()
	defer drills.Unlock()
	if _, dup := drills.m[name]; dup {
		panic("lab: drill " + name + " registered twice")
	}
	drills.m[name] = d
}

// Drills returns the registered drills' names, sorted.
func Drills() []string {
	drills.Lock()
	defer drills.Unlock()
	var n []string
	for k := range drills.m {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// RunDrill runs the named drill against l; its steps stream to out as they
// happen. The report is returned with the drill's error.
func RunDrill(ctx context.Context, l *Lab, name string, out io.Writer) (*Report, error) {
	drills.Lock()
	d, ok := drills.m[name]
	drills.Unlock()
	if !ok {
		return nil, fmt.Errorf("no drill %q (drills: %s)", name, strings.Join(Drills(), ", "))
	}
	r := NewReport(name, out)
	err := d(ctx, l, r)
	r.finish(err)
	return r, err
}

// Report records a drill's timed steps and figures.
type Report struct {
	Name    string
	Start   time.Time
	Steps   []Step
	Figures []Figure
	Err     error
	Took    time.Duration

	mu   sync.Mutex
	last time.Time
	out  io.Writer
}

// Step is one thing that happened, At after the drill started and Since
// the step before.
type Step struct {
	At, Since time.Duration
	Text      string
}

// Figure is a named measurement (a duration, a count, a rate).
type Figure struct {
	Name  string
	Value any
}

// NewReport starts a report; steps are also written to out (nil: not).
func NewReport(name string, out io.Writer) *Report {
	if out == nil {
		out = io.Discard
	}
	now := time.Now()
	r := &Report{Name: name, Start: now, last: now, out: out}
	fmt.Fprintf(out, "drill %s\n", name)
	return r
}

// Step records that something happened now.
func (r *Report) Step(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	s := Step{At: now.Sub(r.Start), Since: now.Sub(r.last), Text: fmt.Sprintf(format, args...)}
	r.last = now
	r.Steps = append(r.Steps, s)
	fmt.Fprintf(r.out, "  %8s  (+%s)  %s\n", fmtDur(s.At), fmtDur(s.Since), s.Text)
}

// Figure records a measurement; durations print rounded to the millisecond.
func (r *Report) Figure(name string, value any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Figures = append(r.Figures, Figure{Name: name, Value: value})
	fmt.Fprintf(r.out, "  FIGURE %s: %s\n", name, fmtValue(value))
}

// Value returns the last figure of that name (nil when none).
func (r *Report) Value(name string) any {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.Figures) - 1; i >= 0; i-- {
		if r.Figures[i].Name == name {
			return r.Figures[i].Value
		}
	}
	return nil
}

func (r *Report) finish(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Err, r.Took = err, time.Since(r.Start)
	verdict := "ok"
	if err != nil {
		verdict = "FAILED: " + err.Error()
	}
	fmt.Fprintf(r.out, "drill %s: %s after %s\n", r.Name, verdict, fmtDur(r.Took))
}

// Print writes the whole report: steps, then figures, then the verdict.
func (r *Report) Print(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(w, "drill %s\n", r.Name)
	for _, s := range r.Steps {
		fmt.Fprintf(w, "  %8s  (+%s)  %s\n", fmtDur(s.At), fmtDur(s.Since), s.Text)
	}
	for _, f := range r.Figures {
		fmt.Fprintf(w, "  FIGURE %s: %s\n", f.Name, fmtValue(f.Value))
	}
	if r.Err != nil {
		fmt.Fprintf(w, "drill %s: FAILED: %v after %s\n", r.Name, r.Err, fmtDur(r.Took))
	} else {
		fmt.Fprintf(w, "drill %s: ok after %s\n", r.Name, fmtDur(r.Took))
	}
}

func fmtDur(d time.Duration) string { return d.Round(time.Millisecond).String() }

func fmtValue(v any) string {
	if d, ok := v.(time.Duration); ok {
		return fmtDur(d)
	}
	return fmt.Sprint(v)
}
