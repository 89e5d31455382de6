package cli

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/ui/human"
)

// appStatus is one app in `corral status`.
type appStatus struct {
	App        string            `json:"app"`
	Containers []ctStatus        `json:"containers"`
	Volumes    []plan.VolumeInfo `json:"volumes"`
	// Drift is the plan's action for the app: "no-op" when the cluster
	// matches the manifest.
	Drift   string   `json:"drift"`
	Reasons []string `json:"reasons"`
}

type ctStatus struct {
	VMID   int    `json:"vmid"`
	Node   string `json:"node"`
	Status string `json:"status"`
	Lock   string `json:"lock,omitempty"`
	IP     string `json:"ip,omitempty"`
}

func newStatusCmd(st *streams) *cobra.Command {
	var ff fileFlags
	var cf connFlags
	var exitCode bool
	cmd := &cobra.Command{
		Use:         "status",
		Annotations: jsonForm(),
		Short:       "Show each app's container, volumes and drift from the manifest",
		Args:        cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ff.lazy = true // status compares provisioning only when its values are at hand
			j, err := openJob(cmd.Context(), st, ff, cf)
			if err != nil {
				return err
			}
			defer j.Close()
			f, s, asJSON := j.f, j.s, j.asJSON
			obs, err := apply.Observe(cmd.Context(), s.client)
			if err != nil {
				return err
			}
			apps := plan.FromManifest(f)
			p, perr := plan.Make(apps, obs)
			var refused *plan.RefusedError
			if perr != nil && !errors.As(perr, &refused) {
				return redactErr(f, perr)
			}
			inv := plan.Inventory(obs)
			var out []appStatus
			for _, a := range apps {
				as := appStatus{App: a.Name, Containers: []ctStatus{}, Volumes: []plan.VolumeInfo{}, Drift: "unknown", Reasons: []string{}}
				for _, ct := range obs.Apps[a.Name] {
					ip, err := apply.Address(cmd.Context(), s.client, ct)
					if err != nil {
						return err
					}
					as.Containers = append(as.Containers, ctStatus{VMID: ct.VMID, Node: ct.Node, Status: ct.Status, Lock: ct.Lock, IP: ip})
				}
				for _, v := range inv {
					if v.App == a.Name {
						as.Volumes = append(as.Volumes, v)
					}
				}
				if obs.CannotSeeGuests {
					node := ""
					if len(obs.Nodes) > 0 {
						node = obs.Nodes[0]
					}
					as.Reasons = append(as.Reasons, plan.BlindReason(a.Name, node))
				}
				if p != nil {
					for _, c := range p.Changes {
						if c.App == a.Name {
							as.Drift = c.Action.String()
							for _, r := range c.Reasons {
								as.Reasons = append(as.Reasons, f.Redact(r))
							}
						}
					}
				}
				out = append(out, as)
			}
			keepers := keeperStatus(obs, p)
			// --exit-code: 2 when the cluster drifted from the manifest,
			// as plan says it (a refused plan is drift too).
			drift := refused != nil || (p != nil && p.HasChanges())
			result := func() error {
				if obs.CannotSeeGuests {
					// Not in sync, nor drifted: unknown, which is an error.
					return errors.New("status unknown: the token cannot see guests (it lacks VM.Audit on /vms); run corral doctor")
				}
				if exitCode && drift {
					return &exitError{code: ExitChanges}
				}
				return nil
			}
			if asJSON {
				if err := writeJSON(st, map[string]any{"apps": out, "keepers": keepers, "in_sync": !drift}); err != nil {
					return err
				}
				return result()
			}
			tw := tabwriter.NewWriter(st.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "APP\tCT\tNODE\tSTATUS\tIP\tDRIFT")
			for _, as := range out {
				if len(as.Containers) == 0 {
					state := "not created"
					if obs.CannotSeeGuests {
						state = "cannot see"
					}
					fmt.Fprintf(tw, "%s\t-\t-\t%s\t-\t%s\n", as.App, state, as.Drift)
				}
				for _, ct := range as.Containers {
					status := ct.Status
					if ct.Lock != "" {
						status += " (locked: " + ct.Lock + ")"
					}
					fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", as.App, ct.VMID, ct.Node, status, orDash(ct.IP), as.Drift)
				}
			}
			tw.Flush()
			for _, as := range out {
				for _, r := range as.Reasons {
					fmt.Fprintf(st.out, "  %s: %s\n", as.App, r)
				}
			}
			for _, a := range apps {
				if len(a.GuestUnknown) > 0 {
					fmt.Fprintf(st.out, "  %s: provisioning not compared: %s could not be read (plan and apply need it)\n", a.Name, strings.Join(a.GuestUnknown, ", "))
				}
			}
			for _, k := range keepers {
				for _, r := range k.Problems {
					fmt.Fprintf(st.out, "  keeper %d on %s: %s\n", k.VMID, k.Node, r)
				}
				if k.Lock != "" {
					fmt.Fprintf(st.out, "  keeper %d on %s: locked by %s\n", k.VMID, k.Node, k.Lock)
				}
			}
			if v := volumesOf(out); len(v) > 0 {
				fmt.Fprintln(st.out)
				writeVolumes(st, v)
			}
			return result()
		},
	}
	ff.add(cmd.Flags())
	cf.add(cmd.Flags())
	cmd.Flags().BoolVar(&exitCode, "exit-code", false, "exit 2 when the cluster differs from the manifest (0 in sync, 1 error), like plan")
	return cmd
}

func volumesOf(as []appStatus) []plan.VolumeInfo {
	var out []plan.VolumeInfo
	for _, a := range as {
		out = append(out, a.Volumes...)
	}
	return out
}

func newVolumesCmd(st *streams) *cobra.Command {
	var output string
	var cf connFlags
	cmd := &cobra.Command{
		Use:         "volumes",
		Annotations: jsonForm(),
		Short:       "List every volume corral keeps, on every node, and where it is attached",
		Args:        cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ff := fileFlags{output: output}
			asJSON, err := ff.json()
			if err != nil {
				return err
			}
			s, err := connect(cmd.Context(), st, cf)
			if err != nil {
				return err
			}
			defer s.Close()
			obs, err := apply.Observe(cmd.Context(), s.client)
			if err != nil {
				return err
			}
			inv := plan.Inventory(obs)
			if inv == nil {
				inv = []plan.VolumeInfo{}
			}
			if asJSON {
				return writeJSON(st, map[string]any{"volumes": inv})
			}
			if len(inv) == 0 {
				fmt.Fprintln(st.out, "No volumes: corral keeps none on this cluster yet.")
				return nil
			}
			writeVolumes(st, inv)
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cf.add(cmd.Flags())
	cmd.AddCommand(newVolumesRmCmd(st), newVolumesPruneCmd(st))
	return cmd
}

func writeVolumes(st *streams, inv []plan.VolumeInfo) {
	tw := tabwriter.NewWriter(st.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "APP\tVOLUME\tVOLID\tNODE\tSIZE\tATTACHED\tMOUNT\tPROJECT")
	for _, v := range inv {
		size := human.Size(v.Size)
		if v.Missing {
			size = "MISSING"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.App, v.Name, v.VolID, v.Node, size, v.Holder, orDash(v.Mount), orDash(v.Project))
	}
	tw.Flush()
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

// keeperInfo is one keeper in `corral status`: what a repair would fix
// (protection left off by a killed corral, Notes edited, a mount point
// removed) and who holds corral's lock on its node.
type keeperInfo struct {
	VMID      int      `json:"vmid"`
	Node      string   `json:"node"`
	Protected bool     `json:"protected"`
	Problems  []string `json:"problems"`
	Lock      string   `json:"lock,omitempty"`
}

func keeperStatus(obs *plan.Observed, p *plan.Plan) []keeperInfo {
	out := []keeperInfo{}
	for _, node := range obs.Nodes {
		for i, k := range obs.Keepers[node] {
			ki := keeperInfo{VMID: k.VMID, Node: node, Protected: k.Protected, Problems: []string{}}
			if p != nil {
				for _, kc := range p.Keepers {
					if kc.VMID == k.VMID {
						for _, r := range kc.Reasons {
							ki.Problems = append(ki.Problems, r+" (corral apply repairs it)")
						}
					}
				}
			} else if !k.Protected {
				ki.Problems = append(ki.Problems, "protection is off (corral apply repairs it)")
			}
			if i == 0 && k.Lease != nil {
				ki.Lock = k.Lease.String() + " until " + k.Lease.Until.UTC().Format(time.RFC3339)
			}
			out = append(out, ki)
		}
	}
	return out
}
