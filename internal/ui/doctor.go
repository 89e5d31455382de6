package ui

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/doctor"
	"github.com/corralhq/corral/internal/sim/prereq"
	"github.com/corralhq/corral/internal/ui/human"
)

// WriteDoctor writes corral doctor's report for people, from the same
// data doctor.WriteJSON writes: the cluster's facts, the findings with
// their fixes, and the verdict.
func WriteDoctor(w io.Writer, r *doctor.Report) {
	fmt.Fprintf(w, "corral doctor: %s as %s\n", Dash(r.Endpoint), r.TokenID)
	if r.Facts.Version != "" {
		fmt.Fprintf(w, "Proxmox VE %s (release %s)\n", r.Facts.Version, r.Facts.Release)
	}
	for _, n := range r.Facts.Nodes {
		writeDoctorNode(w, n)
	}
	for _, a := range r.Facts.Apps {
		writeDoctorApp(w, a, r.Facts.NextVMID)
	}
	if len(r.Requirements) > 0 {
		writeDoctorPrivileges(w, r)
	}
	if len(r.Findings) > 0 {
		fmt.Fprintln(w)
	}
	for _, f := range r.Findings {
		writeDoctorFinding(w, f)
	}
	writeDoctorFixes(w, r.Findings)
	fmt.Fprintln(w)
	writeDoctorVerdict(w, r)
}

// writeDoctorNode writes a node's line, then its templates and storages.
func writeDoctorNode(w io.Writer, n doctor.NodeFacts) {
	line := "node " + n.Name
	if n.Status != "" {
		line += " (" + n.Status + ")"
	}
	if n.Keeper > 0 {
		line += fmt.Sprintf(", keeper ct %d", n.Keeper)
	}
	fmt.Fprintln(w, line)
	for _, t := range n.Templates {
		fmt.Fprintf(w, "  template %s: present\n", t)
	}
	for _, t := range n.MissingTemplates {
		fmt.Fprintf(w, "  template %s: missing\n", t)
	}
	for _, s := range n.Storages {
		fmt.Fprintf(w, "  storage %s (%s; %s): %s free of %s", s.ID, s.Type, strings.Join(s.Content, ","), doctorSize(s.Avail), doctorSize(s.Total))
		if s.Need > 0 {
			fmt.Fprintf(w, "; this manifest allocates %s", doctorSize(s.Need))
		}
		fmt.Fprintln(w)
	}
}

// writeDoctorApp writes where an app is or goes: its container, or the
// next free VMID a new one would take.
func writeDoctorApp(w io.Writer, a doctor.AppFacts, nextVMID int) {
	state := "to create"
	if a.Exists {
		state = "exists"
	}
	id := "next free vmid"
	if nextVMID > 0 {
		id = fmt.Sprintf("next free vmid %d", nextVMID)
	}
	if a.VMID > 0 {
		id = fmt.Sprintf("ct %d", a.VMID)
	}
	fmt.Fprintf(w, "app %s: node %s, %s, %s\n", a.Name, a.Node, id, state)
}

// writeDoctorPrivileges writes how many privilege checks ran on how many
// paths, and how many privileges are missing.
func writeDoctorPrivileges(w io.Writer, r *doctor.Report) {
	paths := map[string]bool{}
	for _, q := range r.Requirements {
		paths[q.Path] = true
	}
	missing := 0
	for _, f := range r.Findings {
		// A warning names a privilege that is held, but only on
		// /vms/<vmid>: it is not missing.
		if f.Privilege != "" && f.Severity == doctor.SevError {
			missing++
		}
	}
	fmt.Fprintf(w, "privileges: %d checks on %d paths, %d missing\n", len(r.Requirements), len(paths), missing)
}

// writeDoctorFinding writes a finding: its severity and message, then
// what needs it, why, and its fixes, indented under it.
func writeDoctorFinding(w io.Writer, f doctor.Finding) {
	head := f.Message
	if f.Path != "" && f.Privilege != "" {
		head = f.Path + ", " + f.Privilege + ": " + f.Message
	}
	fmt.Fprintf(w, "%-7s %s\n", strings.ToUpper(string(f.Severity)), head)
	if f.Privilege != "" && f.Operation != "" {
		fmt.Fprintf(w, "        needed to: %s\n", f.Operation)
	}
	if f.Why != "" {
		fmt.Fprintf(w, "        why: %s\n", f.Why)
	}
	for _, fix := range f.Fix {
		fmt.Fprintf(w, "        fix: %s\n", fix)
	}
}

// writeDoctorFixes writes every fix once, in order, when there are
// several: one block to copy, where the findings repeat some.
func writeDoctorFixes(w io.Writer, findings []doctor.Finding) {
	var fixes []string
	for _, f := range findings {
		for _, fix := range f.Fix {
			if !slices.Contains(fixes, fix) {
				fixes = append(fixes, fix)
			}
		}
	}
	if len(fixes) > 1 {
		fmt.Fprintln(w, "\nAll fixes, once each:")
		for _, fix := range fixes {
			fmt.Fprintln(w, "  "+fix)
		}
	}
}

// writeDoctorVerdict writes whether the manifest can be applied, and if
// not, how many errors and root-only steps stand in the way.
func writeDoctorVerdict(w io.Writer, r *doctor.Report) {
	if r.Applyable {
		fmt.Fprintln(w, "OK: this manifest can be applied with this token.")
		return
	}
	errs, root := 0, 0
	for _, f := range r.Findings {
		switch f.Severity {
		case doctor.SevError:
			errs++
		case doctor.SevRoot:
			root++
		}
	}
	fmt.Fprintf(w, "NOT READY: %d error(s), %d step(s) only root@pam can do. `corral doctor --print-setup` prints a token setup for this manifest.\n", errs, root)
}

// doctorSize is a storage size, "?" when the storage did not say.
func doctorSize(b int64) string {
	if b <= 0 {
		return "?"
	}
	return human.Size(b)
}

// WriteDoctorReport writes corral doctor's report r to w, as JSON or as
// text; machine, when set, are this machine's prerequisites, written
// after the text when the embedded emulator runs its containers here.
func WriteDoctorReport(w io.Writer, r *doctor.Report, machine *prereq.Report, asJSON bool) error {
	if asJSON {
		return doctor.WriteJSON(w, r)
	}
	WriteDoctor(w, r)
	if machine != nil {
		fmt.Fprint(w, "\nThis machine (the embedded emulator runs its containers here; corral sim doctor):\n")
		WriteSimDoctor(w, *machine)
	}
	return nil
}

// WriteDoctorSetup writes corral doctor --print-setup's plan s to w: its
// pveum script, or its JSON form.
func WriteDoctorSetup(w io.Writer, s doctor.SetupPlan, asJSON bool) error {
	if asJSON {
		return doctor.WriteSetupJSON(w, s)
	}
	_, err := io.WriteString(w, s.Script())
	return err
}
