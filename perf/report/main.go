// Command report runs rampart's perf suite and writes perf/out/report.html
// and perf/out/results.json (perf/README.md, "make perf").
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

func main() {
	runs := flag.String("runs", "", "read this runs.tsv (from perf/compare.sh RUNS_DIR) instead of running the suite")
	out := flag.String("out", "perf/out", "output directory")
	target := flag.Float64("p99-target", 50, "p99 target in ms for the capacity figure Q")
	flag.Parse()
	if err := writeFromRuns(*runs, *out, *target); err != nil {
		fmt.Fprintln(os.Stderr, "perf/report:", err)
		os.Exit(1)
	}
}

func writeFromRuns(runsPath, out string, target float64) error {
	rs, err := ReadRuns(runsPath)
	if err != nil && len(rs) == 0 {
		return err
	}
	res := Results{Schema: SchemaVersion, Generated: time.Now().UTC().Format(time.RFC3339)}
	res.Load = LoadSection{Status: statusOK, Series: Aggregate(rs), Runs: rs}
	if err != nil {
		res.Load.Status = "failed: " + err.Error()
	}
	res.Capacity.Capacity = CapacityFrom(res.Load.Series, "h1", "ka", "chain", target)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("results.json: %w", err)
	}
	return os.WriteFile(filepath.Join(out, "results.json"), b, 0o644)
}
