package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteText prints the report as tables: one row per measured step, the
// peer's ratios, then the many-apps figures.
func WriteText(w io.Writer, r *Report) {
	fmt.Fprintf(w, "machine: %d CPUs, %s/%s, %s\n", r.Machine.CPUs, r.Machine.GOOS, r.Machine.GOARCH, r.Machine.Date)
	if len(r.Runs) > 0 {
		fmt.Fprintln(w)
		writeRuns(w, r.Runs)
	}
	if len(r.Ratios) > 0 {
		fmt.Fprintln(w, "\npeer wall time / corral wall time:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "APPS\tSTEP\tPEER/CORRAL")
		for _, x := range r.Ratios {
			fmt.Fprintf(tw, "%d\t%s\t%.2f\n", x.Apps, x.Step, x.Ratio)
		}
		tw.Flush()
	}
	if s := r.Scale; s != nil {
		fmt.Fprintf(w, "\n%d apps on %d nodes, time scale 0:\n", s.Run.Apps, s.Run.Nodes)
		writeRuns(w, []ToolRun{s.Run})
		fmt.Fprintf(w, "\nemulator resident memory (VmRSS): %.1f MiB empty, %.1f MiB with %d containers: %.1f MiB per 1,000 containers\n",
			mib(s.RSSEmpty), mib(s.RSSLoaded), s.Containers, s.RSSPer1000MiB)
		fmt.Fprintf(w, "\nemulator read throughput with %d containers (%s):\n", s.Containers, s.ThroughputNote)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MIX\tCLIENTS\tREQUESTS\tFAILED\tREQ/S")
		for _, x := range s.Throughput {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.0f\n", x.Mix, x.Clients, x.Requests, x.Failed, x.PerSec)
		}
		tw.Flush()
	}
}

func writeRuns(w io.Writer, runs []ToolRun) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tAPPS\tSCALE\tSTEP\tWALL\tCRITICAL PATH\tOVERHEAD\tTASKS\tREQUESTS\tREQ/APP\tMAX RSS")
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
			fmt.Fprintf(tw, "%s\t%d\t%g\t%s\t%s\t%s\t%s\t%d\t%d\t%.2f\t%.1f MiB\n", tool, r.Apps, r.TimeScale, s.Name,
				secs(s.Wall), cp, ov, s.Tasks, s.Requests, s.RequestsPerApp, mib(s.MaxRSS))
		}
	}
	tw.Flush()
}

func secs(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.3fs", v)
	}
	return fmt.Sprintf("%.1fs", v)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
