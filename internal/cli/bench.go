package cli

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/bench"
	"github.com/corralhq/corral/internal/ui"
)

type benchArgs struct {
	output      string
	apps        []int
	timeScale   float64
	parallelism int
	provision   bool
	scale       bool
	scaleApps   int
	scaleNodes  int
	drain       int
	rpsClients  int
	rpsDuration time.Duration
	peerTofu    string
	peerProv    string
	corral      string
	keep        string
}

func newBenchCmd(st *streams) *cobra.Command {
	a := &benchArgs{}
	cmd := &cobra.Command{
		Use:         "bench",
		Annotations: jsonForm(),
		Short:       "Measure corral from the command line against a standalone emulator",
		Long: `bench measures corral the way a user feels it. For each --apps N it starts
a fresh emulator process (corral sim serve, HTTPS) and runs corral itself
as separate processes: apply N apps (each with one 1 GiB volume, started),
a no-op plan, a no-op apply, then destroy. For each command it reports the
wall time, the critical path of the Proxmox tasks the command caused (from
the emulator's task list, to the nanosecond), their ratio (the overhead)
and the API requests per app.

--time-scale 1 (the default) runs tasks at real Proxmox durations: the
figures about waiting need it. --scale instead measures corral and the
emulator at many apps over several nodes at time scale 0 (only their own
cost): apply, no-op plan and no-op apply, the emulator's resident memory
per 1,000 containers and its read throughput, then destroy
--delete-volumes.

--drain N instead measures corral drain: N apps with two retained volumes
each on one node of three, then the drain of that node (--parallelism),
set against the Proxmox task time it cannot go below (the critical path:
one app's chain, the busiest keeper's tasks (its moves, and its create
when the drain made it), or all task time over the parallelism, the
largest; docs/benchmarks.md says how).

With --peer-tofu and --peer-provider, the same workload also runs through
OpenTofu and the bpg/proxmox Terraform provider against the same emulator,
and bench prints the ratio of their wall times.

It asserts nothing: figures on a shared machine vary. docs/benchmarks.md
records a run and how to reproduce it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBench(cmd, st, a) },
	}
	f := cmd.Flags()
	f.StringVarP(&a.output, "output", "o", "text", "output format: text or json")
	f.IntSliceVar(&a.apps, "apps", []int{1, 10, 100}, "workload sizes, one fresh emulator each")
	f.Float64Var(&a.timeScale, "time-scale", 1, "emulated task durations × this (1: real Proxmox durations)")
	f.IntVar(&a.parallelism, "parallelism", 10, "passed to corral and to the peer")
	f.BoolVar(&a.provision, "provision", false, "give each app one provisioning step, so apply also waits for each container's sshd and logs in (the peer does not provision)")
	f.BoolVar(&a.scale, "scale", false, "measure many apps at time scale 0, the emulator's memory and read throughput, instead")
	f.IntVar(&a.scaleApps, "scale-apps", 1000, "apps in the --scale run")
	f.IntVar(&a.scaleNodes, "scale-nodes", 5, "nodes in the --scale run")
	f.IntVar(&a.drain, "drain", 0, "measure corral drain of a node with this many apps instead (three nodes, two volumes per app)")
	f.IntVar(&a.rpsClients, "rps-clients", 8, "concurrent clients of the --scale read throughput run")
	f.DurationVar(&a.rpsDuration, "rps-duration", 5*time.Second, "how long each --scale read throughput mix runs")
	f.StringVar(&a.peerTofu, "peer-tofu", "", "tofu binary: also run the workload through OpenTofu")
	f.StringVar(&a.peerProv, "peer-provider", "", "terraform-provider-proxmox (bpg/proxmox) binary for --peer-tofu")
	f.StringVar(&a.corral, "corral", "", "corral binary to measure (default: this one)")
	f.StringVar(&a.keep, "keep", "", "keep the emulators' state and every command's output in this directory (default: a temporary one, removed)")
	return cmd
}

func runBench(cmd *cobra.Command, st *streams, a *benchArgs) error {
	asJSON, err := (&fileFlags{output: a.output}).json()
	if err != nil {
		return err
	}
	o, err := a.options()
	if err != nil {
		return err
	}
	dir, cleanup, err := bench.WorkDir(a.keep)
	if err != nil {
		return err
	}
	defer cleanup()
	o.Dir = dir
	o.Progress = func(s string) { ui.WriteBenchProgress(st.err, s) }
	r, err := bench.Run(cmd.Context(), o)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(st, r)
	}
	ui.WriteBench(st.out, r)
	return nil
}

// options are the bench's options as the flags give them (all but the
// work directory), refused when they cannot work together.
func (a *benchArgs) options() (bench.Options, error) {
	var err error
	if (a.peerTofu == "") != (a.peerProv == "") {
		return bench.Options{}, errors.New("--peer-tofu and --peer-provider go together: give both binaries or neither")
	}
	if a.timeScale < 0 {
		return bench.Options{}, fmt.Errorf("--time-scale %v: must be 0 or more", a.timeScale)
	}
	for _, n := range a.apps {
		if n < 1 {
			return bench.Options{}, fmt.Errorf("--apps %d: want 1 or more", n)
		}
	}
	o := bench.Options{Corral: a.corral, Apps: a.apps, TimeScale: a.timeScale, Parallelism: a.parallelism, Provision: a.provision}
	if o.Corral == "" {
		if o.Corral, err = os.Executable(); err != nil {
			return o, fmt.Errorf("find corral's own binary: %w (give --corral PATH)", err)
		}
	}
	if a.peerTofu != "" {
		o.Peer = &bench.Peer{Tofu: a.peerTofu, Provider: a.peerProv}
	}
	if a.scale {
		o.Scale = &bench.ScaleOptions{Apps: a.scaleApps, Nodes: a.scaleNodes, Clients: a.rpsClients, Duration: a.rpsDuration}
	}
	if a.drain < 0 || (a.drain > 0 && a.scale) {
		return o, fmt.Errorf("--drain %d: want 1 or more apps, and not with --scale", a.drain)
	}
	if a.drain > 0 {
		o.Drain = &bench.DrainOptions{Apps: a.drain}
	}
	return o, nil
}
