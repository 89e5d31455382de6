package ui

import (
	"fmt"
	"io"
	"strconv"

	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/plan"
)

// AppOutput is what `corral output` says of one app: the facts a script or
// a person needs to reach it, read from live state by the same
// observation as `corral status` (apply.Status, with its health checks).
type AppOutput struct {
	App string `json:"app"`
	// VMID, Node, Status and Address are those of the app's container;
	// empty when it has none, or more than one (a move under way: see
	// Note).
	VMID    int    `json:"vmid,omitempty"`
	Node    string `json:"node,omitempty"`
	Status  string `json:"status"`
	Address string `json:"address,omitempty"`
	// SSH logs in as corral does: root, with corral's key; "" without an
	// address.
	SSH          string            `json:"ssh,omitempty"`
	Volumes      []plan.VolumeInfo `json:"volumes"`
	Health       string            `json:"health"`
	HealthDetail string            `json:"health_detail"`
	// Note says why a fact is missing (no container yet, a move).
	Note string `json:"note,omitempty"`
}

// NamedOutput is one of the manifest's outputs, with the apps' facts
// read in; Missing says which fact could not be read, and why.
type NamedOutput struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	Missing string `json:"missing,omitempty"`
}

// WriteOutputs writes corral output to w (stdout): each app's facts as
// a block of aligned "key: value" lines, then the manifest's outputs.
func WriteOutputs(w io.Writer, apps []AppOutput, named []NamedOutput) {
	writeAppOutputs(w, apps)
	writeNamedOutputs(w, named)
}

// writeAppOutputs prints each app's facts as a block of aligned "key: value"
// lines, leaving out the empty ones.
func writeAppOutputs(w io.Writer, apps []AppOutput) {
	for i, o := range apps {
		if i > 0 {
			fmt.Fprintln(w)
		}
		var rows [][2]string
		row := func(k, v string) {
			if v != "" && v != "0" {
				rows = append(rows, [2]string{k + ":", v})
			}
		}
		row("vmid", strconv.Itoa(o.VMID))
		row("node", o.Node)
		row("status", o.Status)
		row("address", o.Address)
		row("ssh", o.SSH)
		row("health", healthText(o.Health, o.HealthDetail))
		for _, v := range o.Volumes {
			row("volume "+v.Name, fmt.Sprintf("%s, %s, at %s (%s)", v.VolID, manifest.Size(v.Size), Dash(v.Mount), v.Holder))
		}
		row("note", o.Note)
		width := 0
		for _, r := range rows {
			width = max(width, len(r[0]))
		}
		fmt.Fprintln(w, o.App)
		for _, r := range rows {
			fmt.Fprintf(w, "  %-*s %s\n", width, r[0], r[1])
		}
	}
}

// healthText is health with its detail, when it says more.
func healthText(health, detail string) string {
	if detail == "" || detail == health {
		return health
	}
	return health + " (" + detail + ")"
}

// writeNamedOutputs prints the manifest's outputs, aligned, after the
// apps.
func writeNamedOutputs(w io.Writer, named []NamedOutput) {
	if len(named) == 0 {
		return
	}
	width := 0
	for _, o := range named {
		width = max(width, len(o.Name)+1)
	}
	fmt.Fprintln(w, "\noutputs")
	for _, o := range named {
		v := o.Value
		if o.Missing != "" {
			v = "(unknown: " + o.Missing + ")"
		}
		fmt.Fprintf(w, "  %-*s %s\n", width, o.Name+":", v)
	}
}
