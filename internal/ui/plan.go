package ui

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/corralhq/corral/internal/plan"
)

// PlanJSON is the machine form of a plan (corral plan -o json).
type PlanJSON struct {
	FormatVersion string       `json:"format_version"`
	HasChanges    bool         `json:"has_changes"`
	Keepers       []KeeperJSON `json:"keepers"`
	// Recover says what the next changing command finishes or rolls back
	// of an interrupted restore, before anything else.
	Recover  []string       `json:"recover,omitempty"`
	Changes  []ChangeJSON   `json:"changes"`
	Warnings []string       `json:"warnings"`
	Refused  []string       `json:"refused,omitempty"`
	Summary  map[string]int `json:"summary"`
}

// KeeperJSON is a keeper change.
type KeeperJSON struct {
	Node    string   `json:"node"`
	VMID    int      `json:"vmid,omitempty"`
	Action  string   `json:"action"`
	Reasons []string `json:"reasons"`
}

// ChangeJSON is one app's change.
type ChangeJSON struct {
	App     string       `json:"app"`
	Node    string       `json:"node"`
	VMID    int          `json:"vmid,omitempty"`
	OldVMID int          `json:"old_vmid,omitempty"`
	Action  string       `json:"action"`
	Reasons []string     `json:"reasons"`
	Config  []EditJSON   `json:"config,omitempty"`
	Volumes []VolumeJSON `json:"volumes"`
	Restart bool         `json:"restart,omitempty"`
	Start   bool         `json:"start,omitempty"`
	// Guest: provisioning and health checks run inside the container.
	Guest bool `json:"guest,omitempty"`
}

// EditJSON is one in-place config edit.
type EditJSON struct {
	Key string `json:"key"`
	Old string `json:"old"`
	New string `json:"new"`
}

// VolumeJSON is one volume of a change.
type VolumeJSON struct {
	Name    string `json:"name"`
	Action  string `json:"action"`
	VolID   string `json:"volid,omitempty"`
	Storage string `json:"storage,omitempty"`
	Size    int64  `json:"size,omitempty"`
	OldSize int64  `json:"old_size,omitempty"`
	Mount   string `json:"mount,omitempty"`
	Adopt   string `json:"adopt,omitempty"`
	Reclaim string `json:"reclaim,omitempty"`
}

// NewPlanJSON converts a plan (and the problems that refused it).
func NewPlanJSON(p *plan.Plan, refused []string) PlanJSON {
	out := PlanJSON{FormatVersion: "1", HasChanges: p.HasChanges(), Warnings: p.Warnings, Refused: refused,
		Keepers: []KeeperJSON{}, Changes: []ChangeJSON{}, Summary: map[string]int{}}
	if out.Warnings == nil {
		out.Warnings = []string{}
	}
	out.Recover = p.Recover
	for _, k := range p.Keepers {
		out.Keepers = append(out.Keepers, KeeperJSON{Node: k.Node, VMID: k.VMID, Action: k.Action.String(), Reasons: k.Reasons})
	}
	for _, c := range p.Changes {
		cj := ChangeJSON{App: c.App, Node: c.Node, VMID: c.VMID, OldVMID: c.OldVMID, Action: c.Action.String(),
			Reasons: c.Reasons, Restart: c.Restart, Start: c.Start, Guest: c.Guest, Volumes: []VolumeJSON{}}
		if cj.Reasons == nil {
			cj.Reasons = []string{}
		}
		for _, e := range c.Config {
			cj.Config = append(cj.Config, EditJSON{Key: e.Key, Old: e.Old, New: e.New})
		}
		for _, v := range c.Volumes {
			cj.Volumes = append(cj.Volumes, VolumeJSON{Name: v.Name, Action: string(v.Action), VolID: v.VolID, Storage: v.Storage,
				Size: v.Size, OldSize: v.OldSize, Mount: v.Mount, Adopt: v.Adopt, Reclaim: string(v.Reclaim)})
		}
		out.Changes = append(out.Changes, cj)
		out.Summary[cj.Action]++
	}
	return out
}

// WritePlanJSON prints the plan as one JSON document.
func WritePlanJSON(w io.Writer, pj PlanJSON) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(pj)
}

// WritePlanText prints the plan for a human, Terraform-style: one block per
// app with a diff symbol, the reasons, and each volume's fate.
func WritePlanText(w io.Writer, pj PlanJSON) {
	sym := map[string]string{"create": "+", "update": "~", "replace": "-/+", "delete": "-", "no-op": " "}
	for _, r := range pj.Recover {
		fmt.Fprintf(w, "~ recover: %s\n", r)
	}
	for _, k := range pj.Keepers {
		fmt.Fprintf(w, "%s keeper on %s%s\n", sym[k.Action], k.Node, vmidSuffix(k.VMID))
		for _, r := range k.Reasons {
			fmt.Fprintf(w, "      # %s\n", r)
		}
	}
	for _, c := range pj.Changes {
		if c.Action == "no-op" && c.VMID == 0 {
			// A destroy plan's app that has no container.
			fmt.Fprintf(w, "  app %s: no container; no changes\n", c.App)
			continue
		}
		if c.Action == "no-op" {
			fmt.Fprintf(w, "  app %s (ct %d on %s): no changes\n", c.App, c.VMID, c.Node)
			continue
		}
		id := c.VMID
		if c.Action == "delete" || (c.Action == "replace" && c.OldVMID != 0) {
			id = c.OldVMID
		}
		fmt.Fprintf(w, "%s app %s (%s%s on %s)\n", sym[c.Action], c.App, c.Action, vmidSuffix(id), c.Node)
		for _, r := range c.Reasons {
			fmt.Fprintf(w, "      # %s\n", r)
		}
		for _, e := range c.Config {
			fmt.Fprintf(w, "      ~ %s: %s → %s\n", e.Key, quote(e.Old), quote(e.New))
		}
		for _, v := range c.Volumes {
			fmt.Fprintf(w, "      volume %s: %s%s\n", v.Name, v.Action, volumeDetail(v))
		}
		if c.Guest {
			fmt.Fprintf(w, "      provision and check health inside the container (steps already done are skipped)\n")
		}
	}
	for _, r := range pj.Refused {
		fmt.Fprintf(w, "! refused: %s\n", r)
	}
	for _, wn := range pj.Warnings {
		fmt.Fprintf(w, "! warning: %s\n", wn)
	}
	if !pj.HasChanges {
		fmt.Fprintln(w, "\nNo changes. The cluster matches the manifest.")
		return
	}
	var parts []string
	for _, a := range []string{"create", "update", "replace", "delete"} {
		if n := pj.Summary[a]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d to %s", n, a))
		}
	}
	if len(pj.Keepers) > 0 {
		parts = append(parts, fmt.Sprintf("%d keeper(s) to create or repair", len(pj.Keepers)))
	}
	fmt.Fprintf(w, "\nPlan: %s. Retained volumes are kept in every case.\n", strings.Join(parts, ", "))
}

func vmidSuffix(id int) string {
	if id == 0 {
		return ""
	}
	return fmt.Sprintf(" ct %d", id)
}

func quote(s string) string {
	if s == "" {
		return "(unset)"
	}
	if strings.Contains(s, "\n") {
		return fmt.Sprintf("%q", s)
	}
	return s
}

func volumeDetail(v VolumeJSON) string {
	var d []string
	if v.VolID != "" {
		d = append(d, v.VolID)
	}
	if v.Adopt != "" {
		d = append(d, "from "+v.Adopt)
	}
	if v.Size > 0 {
		d = append(d, humanBytes(v.Size))
	}
	if v.OldSize > 0 && v.OldSize != v.Size && v.Size > 0 {
		d = append(d, "was "+humanBytes(v.OldSize))
	}
	if v.Mount != "" {
		d = append(d, "at "+v.Mount)
	}
	if len(d) == 0 {
		return ""
	}
	return " (" + strings.Join(d, ", ") + ")"
}

func humanBytes(b int64) string {
	switch {
	case b >= 1<<40 && b%(1<<40) == 0:
		return fmt.Sprintf("%dT", b>>40)
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%dG", b>>30)
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%dM", b>>20)
	case b >= 1<<30:
		return fmt.Sprintf("%.1fG", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%dB", b)
}
