package ui

import (
	"fmt"
	"io"
	"strconv"

	"github.com/corralhq/corral/internal/bench"
	"github.com/corralhq/corral/internal/ui/human"
)

// WriteBench prints corral bench's report as tables: one row per measured step, the
// peer's ratios, then the many-apps figures.
func WriteBench(w io.Writer, r *bench.Report) {
	fmt.Fprintf(w, "machine: %d CPUs, %s/%s, %s\n", r.Machine.CPUs, r.Machine.GOOS, r.Machine.GOARCH, r.Machine.Date)
	if len(r.Runs) > 0 {
		fmt.Fprintln(w)
		writeBenchRuns(w, r.Runs)
	}
	if len(r.Ratios) > 0 {
		fmt.Fprintln(w, "\npeer wall time / corral wall time:")
		t := NewTable(w, "APPS", "STEP", "PEER/CORRAL")
		for _, x := range r.Ratios {
			t.Row(strconv.Itoa(x.Apps), x.Step, fmt.Sprintf("%.2f", x.Ratio))
		}
		t.Flush()
	}
	if d := r.Drain; d != nil {
		fmt.Fprintf(w, "\ndrain of a node with %d apps (two volumes each) onto %d others, parallelism %d, time scale %g:\n", d.Apps, d.Nodes-1, d.Parallelism, d.TimeScale)
		ratio := "-"
		if d.Ratio > 0 {
			ratio = fmt.Sprintf("%.2f", d.Ratio)
		}
		t := NewTable(w, "WALL", "CRITICAL PATH", "WALL/CRITICAL", "ONE APP'S CHAIN", "BUSIEST KEEPER", "TASK TIME/PARALLELISM", "TASKS", "REQUESTS")
		t.Row(seconds(d.Wall), seconds(d.Critical), ratio, seconds(d.Chain), seconds(d.Keeper), seconds(d.Packed), strconv.Itoa(d.Tasks), strconv.Itoa(d.Requests))
		t.Flush()
	}
	if s := r.Scale; s != nil {
		fmt.Fprintf(w, "\n%d apps on %d nodes, time scale 0:\n", s.Run.Apps, s.Run.Nodes)
		writeBenchRuns(w, []bench.ToolRun{s.Run})
		fmt.Fprintf(w, "\nemulator resident memory (VmRSS): %.1f MiB empty, %.1f MiB with %d containers: %.1f MiB per 1,000 containers\n",
			mebibytes(s.RSSEmpty), mebibytes(s.RSSLoaded), s.Containers, s.RSSPer1000MiB)
		fmt.Fprintf(w, "\nemulator read throughput with %d containers (%s):\n", s.Containers, s.ThroughputNote)
		t := NewTable(w, "MIX", "CLIENTS", "REQUESTS", "FAILED", "REQ/S")
		for _, x := range s.Throughput {
			t.Row(x.Mix, strconv.Itoa(x.Clients), fmt.Sprint(x.Requests), fmt.Sprint(x.Failed), fmt.Sprintf("%.0f", x.PerSec))
		}
		t.Flush()
	}
}

func writeBenchRuns(w io.Writer, runs []bench.ToolRun) {
	t := NewTable(w, "TOOL", "APPS", "SCALE", "STEP", "WALL", "CRITICAL PATH", "OVERHEAD", "TASKS", "REQUESTS", "POLLS/READS/WRITES", "REQ/APP", "MAX RSS")
	for _, r := range runs {
		for _, s := range r.Steps {
			cp, ov := "-", "-"
			if s.CriticalPath > 0 {
				cp = fmt.Sprintf("%.2fs", s.CriticalPath)
			}
			if s.Overhead > 0 {
				ov = fmt.Sprintf("%.3f", s.Overhead)
			}
			tool := r.Tool
			if r.Provision {
				tool += " (provision)"
			}
			t.Row(tool, strconv.Itoa(r.Apps), fmt.Sprintf("%g", r.TimeScale), s.Name,
				seconds(s.Wall), cp, ov, strconv.Itoa(s.Tasks), strconv.Itoa(s.Requests),
				fmt.Sprintf("%d/%d/%d", s.ByKind.Polls, s.ByKind.Reads, s.ByKind.Writes), fmt.Sprintf("%.2f", s.RequestsPerApp), human.Size(s.MaxRSS))
		}
	}
	t.Flush()
}

func seconds(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.3fs", v)
	}
	return fmt.Sprintf("%.1fs", v)
}

func mebibytes(b int64) float64 { return float64(b) / (1 << 20) }
