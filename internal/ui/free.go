package ui

import (
	"fmt"
	"io"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/ui/human"
)

// FreePlanJSON is the machine form of what corral volumes rm or prune
// frees (the "plan" of their -o json output).
type FreePlanJSON struct {
	Volumes  []plan.VolumeFree `json:"volumes"`
	Warnings []string          `json:"warnings"`
	Refused  []string          `json:"refused"`
	// Reprotect are the keeper VMs whose protection the run sets again.
	Reprotect []plan.KeeperRef `json:"reprotect,omitempty"`
}

// NewFreePlanJSON converts a plan (and the problems that refused it).
func NewFreePlanJSON(p *plan.FreePlan, refused []string) FreePlanJSON {
	out := FreePlanJSON{Volumes: []plan.VolumeFree{}, Warnings: []string{}, Refused: []string{}}
	if p != nil {
		out.Volumes = append(out.Volumes, p.Volumes...)
		out.Warnings = append(out.Warnings, p.Warnings...)
		out.Reprotect = append(out.Reprotect, p.Reprotect...)
	}
	out.Refused = append(out.Refused, refused...)
	return out
}

// WriteFreePlanText prints the volumes to free for a human, one block
// each with the reason, then what was refused and the warnings.
func WriteFreePlanText(w io.Writer, pj FreePlanJSON) {
	var total int64
	for _, v := range pj.Volumes {
		name := "(recorded for no app)"
		if v.App != "" {
			name = v.App + "/" + v.Name
		}
		keeper := "keeper"
		if v.Kind == plan.KindVM {
			keeper = "keeper VM"
		}
		fmt.Fprintf(w, "- volume %s (%s on %s, %s, %s %d): free\n", name, v.VolID, v.Node, human.Size(v.Size), keeper, v.Keeper)
		fmt.Fprintf(w, "      # %s\n", v.Reason)
		total += v.Size
	}
	for _, k := range pj.Reprotect {
		fmt.Fprintf(w, "- keeper VM %d on %s: protection set again\n", k.VMID, k.Node)
		fmt.Fprintf(w, "      # it is off: a free was interrupted between its two writes\n")
	}
	for _, r := range pj.Refused {
		fmt.Fprintf(w, "! refused: %s\n", r)
	}
	for _, wn := range pj.Warnings {
		fmt.Fprintf(w, "! warning: %s\n", wn)
	}
	switch {
	case len(pj.Refused) > 0:
		fmt.Fprintln(w, "\nRefused: nothing will be freed.")
	case len(pj.Volumes) == 0 && len(pj.Reprotect) > 0:
		fmt.Fprintln(w, "\nNo volumes to free; protection is set again on the keeper VMs above.")
	case len(pj.Volumes) == 0:
		fmt.Fprintln(w, "\nNo volumes to free.")
	default:
		fmt.Fprintf(w, "\nPlan: %d volume(s) to free (%s). A freed volume's data cannot be recovered.\n", len(pj.Volumes), human.Size(total))
	}
}
