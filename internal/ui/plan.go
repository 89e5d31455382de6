package ui

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/ui/human"
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
	// Unchecked are the apps the plan could not compare with the manifest
	// (their node is offline): with one, the cluster is not known to match.
	Unchecked []UncheckedJSON `json:"unchecked,omitempty"`
	// Targets are the apps named on the command line (corral plan
	// APP…): the plan is narrowed to them and what they need. LeftOut
	// names the other apps (and "keeper on NODE") whose changes were
	// left out, LeftOutChanges counts those changes.
	Targets        []string `json:"targets,omitempty"`
	LeftOut        []string `json:"left_out,omitempty"`
	LeftOutChanges int      `json:"left_out_changes,omitempty"`
	// LeftOutCommand is the command that shows the left-out changes
	// (text only): "corral plan", or "corral destroy" for a destroy.
	LeftOutCommand string `json:"-"`
}

// UncheckedJSON is an app a plan could not check, and why.
type UncheckedJSON struct {
	App  string `json:"app"`
	Node string `json:"node"`
	Why  string `json:"why"`
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
	App string `json:"app"`
	// Kind is "vm" for a kind: vm app's change, absent for a container's.
	Kind    string `json:"kind,omitempty"`
	Node    string `json:"node"`
	VMID    int    `json:"vmid,omitempty"`
	OldVMID int    `json:"old_vmid,omitempty"`
	// From is the node a move takes the app from (node is where it goes).
	From    string       `json:"from,omitempty"`
	Action  string       `json:"action"`
	Reasons []string     `json:"reasons"`
	Config  []EditJSON   `json:"config,omitempty"`
	Volumes []VolumeJSON `json:"volumes"`
	Restart bool         `json:"restart,omitempty"`
	Start   bool         `json:"start,omitempty"`
	// Guest: provisioning and health checks run inside the container.
	Guest bool `json:"guest,omitempty"`
	// Steps say which provisioning steps run and why; Restarts which
	// systemd units restart after them, and because of which steps.
	// StepsUnknown says why the plan cannot tell (apply compares in the
	// guest).
	Steps        []StepJSON    `json:"steps,omitempty"`
	Restarts     []RestartJSON `json:"restarts,omitempty"`
	StepsUnknown string        `json:"steps_unknown,omitempty"`
	// Facts are the other apps' facts the guest work reads
	// (${app:APP.FACT}), with their values as the plan knows them; After
	// the apps whose changes apply carries out first.
	Facts []FactJSON `json:"facts,omitempty"`
	After []string   `json:"after,omitempty"`
	// Settings are the container's settings for a create or replace
	// (template, cores, memory, rootfs, network, …), in display order.
	Settings []SettingJSON `json:"settings,omitempty"`
	// RecoverFrom is set on the create of an app whose node is offline
	// (apply --recover): the container there it stands in for.
	RecoverFrom *RecoverJSON `json:"recover_from,omitempty"`
	// Stale: the delete removes the stale copy of a recovered app, before
	// any other change.
	Stale bool `json:"stale,omitempty"`
	// HA is what happens to the container's HA resource (ha:), absent
	// when nothing does.
	HA *HAJSON `json:"ha,omitempty"`
	// Pool and Firewall are the container's pool and firewall changes
	// (pool:, firewall:), absent when nothing changes (plan_firewall.go).
	Pool     *PoolJSON     `json:"pool,omitempty"`
	Firewall *FirewallJSON `json:"firewall,omitempty"`
}

// HAJSON is a change's HA resource: the action (add, update, remove)
// and, unless removed, the resource as it will be.
type HAJSON struct {
	Action      string `json:"action"`
	State       string `json:"state,omitempty"`
	Group       string `json:"group,omitempty"`
	Rule        string `json:"rule,omitempty"`
	MaxRestart  *int   `json:"max_restart,omitempty"`
	MaxRelocate *int   `json:"max_relocate,omitempty"`
}

// newHAJSON converts a plan's HA change.
func newHAJSON(h *plan.HAChange) *HAJSON {
	switch {
	case h == nil:
		return nil
	case h.Want == nil:
		return &HAJSON{Action: "remove"}
	}
	w := h.Want
	j := &HAJSON{Action: "update", State: w.State, Group: w.Group, Rule: w.Rule, MaxRestart: &w.MaxRestart, MaxRelocate: &w.MaxRelocate}
	if h.Have == nil {
		j.Action = "add"
	}
	return j
}

// FactJSON is one fact of another app a guest work reads: Ref is
// APP.FACT; Value is "" and Known false while only apply can read it.
type FactJSON struct {
	Ref   string `json:"ref"`
	Value string `json:"value,omitempty"`
	Known bool   `json:"known"`
}

// factsJSON lists a's facts, known ones with their values, by reference.
func factsJSON(a *plan.App) []FactJSON {
	if a == nil {
		return nil
	}
	var out []FactJSON
	for ref, v := range a.Facts {
		out = append(out, FactJSON{Ref: ref, Value: v, Known: true})
	}
	for _, ref := range a.FactsUnknown {
		out = append(out, FactJSON{Ref: ref})
	}
	slices.SortFunc(out, func(x, y FactJSON) int { return strings.Compare(x.Ref, y.Ref) })
	return out
}

// RecoverJSON names the container a recovered app stands in for.
type RecoverJSON struct {
	VMID int    `json:"vmid"`
	Node string `json:"node"`
}

// SettingJSON is one setting of a container to be created.
type SettingJSON struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// createSettings lists what a new container is made with.
func createSettings(a *plan.App) []SettingJSON {
	if a == nil {
		return nil
	}
	conf := plan.InPlaceConfig(*a)
	out := []SettingJSON{
		{"template", a.Template},
		{"unprivileged", fmt.Sprint(a.Unprivileged)},
		{"cores", conf["cores"]},
		{"memory", conf["memory"] + " MiB"},
		{"swap", conf["swap"] + " MiB"},
		{"rootfs", human.Size(a.RootSize) + " on " + a.RootStorage},
		{"net0", conf["net0"]},
	}
	if conf["features"] != "" {
		out = append(out, SettingJSON{"features", conf["features"]})
	}
	if conf["nameserver"] != "" {
		out = append(out, SettingJSON{"nameserver", conf["nameserver"]})
	}
	if a.OnBoot {
		out = append(out, SettingJSON{"onboot", "1"})
	}
	if h := a.HA; h != nil {
		out = append(out, SettingJSON{"ha", haSetting(h)})
	}
	return out
}

// haSetting is an HA resource as a create shows it: "started,
// maxRestart 1, maxRelocate 1[, rule R | group G]".
func haSetting(h *plan.HA) string {
	s := fmt.Sprintf("%s, maxRestart %d, maxRelocate %d", h.State, h.MaxRestart, h.MaxRelocate)
	switch {
	case h.Rule != "":
		s += ", rule " + h.Rule
	case h.Group != "":
		s += ", group " + h.Group
	}
	return s
}

// StepJSON is one provisioning step of a change.
type StepJSON struct {
	Name string `json:"name"`
	Run  bool   `json:"run"`
	Why  string `json:"why"`
	// Recreate: a compose step that recreates its services.
	Recreate bool `json:"recreate,omitempty"`
}

// RestartJSON is a systemd unit restarted after the steps.
type RestartJSON struct {
	Unit    string   `json:"unit"`
	Because []string `json:"because"`
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
	out.Targets, out.LeftOut, out.LeftOutChanges = p.Targets, p.LeftOut, p.LeftOutChanges
	for _, u := range p.Unchecked {
		out.Unchecked = append(out.Unchecked, UncheckedJSON{App: u.App, Node: u.Node, Why: u.Why})
	}
	for _, k := range p.Keepers {
		out.Keepers = append(out.Keepers, KeeperJSON{Node: k.Node, VMID: k.VMID, Action: k.Action.String(), Reasons: k.Reasons})
	}
	for _, c := range p.Changes {
		cj := ChangeJSON{App: c.App, Node: c.Node, VMID: c.VMID, OldVMID: c.OldVMID, From: c.From, Action: c.Action.String(),
			Reasons: c.Reasons, Restart: c.Restart, Start: c.Start, Guest: c.Guest, Volumes: []VolumeJSON{}}
		if cj.Reasons == nil {
			cj.Reasons = []string{}
		}
		if c.Recover != nil {
			cj.RecoverFrom = &RecoverJSON{VMID: c.Recover.VMID, Node: c.Recover.Node}
		}
		cj.Stale = c.Stale
		cj.HA = newHAJSON(c.HA)
		cj.Pool, cj.Firewall = newPoolJSON(c.Pool), newFirewallJSON(c.Firewall)
		if c.Action == plan.Create || c.Action == plan.Replace {
			cj.Settings = createSettings(c.Desired)
		}
		for _, e := range c.Config {
			old, new := e.Old, e.New
			if e.Key == "description" {
				// Only the user's text: corral's own lines (header,
				// markers, step records) are not the manifest's.
				old, new = plan.UserDescription(old), plan.UserDescription(new)
				if old == new {
					continue
				}
			}
			cj.Config = append(cj.Config, EditJSON{Key: e.Key, Old: old, New: new})
		}
		if c.Kind == plan.KindVM {
			cj.Kind = c.Kind
			vmChangeJSON(&cj, c) // plan_vm.go; after cj.Config, whose sshkeys it shortens
		}
		if c.Guest {
			for _, r := range c.Steps {
				cj.Steps = append(cj.Steps, StepJSON{Name: r.Name, Run: r.Run, Why: r.Why, Recreate: r.Recreate})
			}
			for _, r := range c.Restarts {
				cj.Restarts = append(cj.Restarts, RestartJSON{Unit: r.Unit, Because: r.Because})
			}
			cj.StepsUnknown = c.StepsUnknown
			cj.Facts, cj.After = factsJSON(c.Desired), c.After
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

// WritePlan prints the plan as one JSON document (asJSON) or as text. A
// failed write is not returned: w is stdout, and its reader is gone then.
func WritePlan(w io.Writer, pj PlanJSON, asJSON bool) {
	if asJSON {
		WritePlanJSON(w, pj)
		return
	}
	WritePlanText(w, pj)
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
	sym := map[string]string{"create": "+", "update": "~", "replace": "-/+", "delete": "-", "move": ">", "no-op": " "}
	for _, r := range pj.Recover {
		fmt.Fprintf(w, "~ recover: %s\n", r)
	}
	for _, k := range pj.Keepers {
		fmt.Fprintf(w, "%s keeper on %s%s\n", sym[k.Action], k.Node, vmidSuffix(k.VMID))
		for _, r := range k.Reasons {
			fmt.Fprintf(w, "      # %s\n", r)
		}
	}
	unchecked := map[string]string{}
	for _, u := range pj.Unchecked {
		unchecked[u.App] = u.Why
	}
	for _, c := range pj.Changes {
		if why := unchecked[c.App]; why != "" && c.Action == "no-op" {
			fmt.Fprintf(w, "? app %s: not checked: %s\n", c.App, why)
			delete(unchecked, c.App)
			continue
		}
		if c.Action == "no-op" && c.VMID == 0 {
			// A destroy plan's app that has no container.
			fmt.Fprintf(w, "  app %s: no container; no changes\n", c.App)
			continue
		}
		if c.Action == "no-op" {
			fmt.Fprintf(w, "  app %s (%s on %s): no changes\n", c.App, strings.TrimSpace(guestSuffix(c, c.VMID)), c.Node)
			continue
		}
		id := c.VMID
		if c.Action == "delete" || (c.Action == "replace" && c.OldVMID != 0) {
			id = c.OldVMID
		}
		what := c.Action
		switch {
		case c.RecoverFrom != nil:
			what = fmt.Sprintf("recover ct %d from offline %s: %s", c.RecoverFrom.VMID, c.RecoverFrom.Node, c.Action)
		case c.Stale:
			what = "remove stale copy"
		}
		if c.Action == "move" {
			fmt.Fprintf(w, "%s app %s (move%s from %s to %s)\n", sym[c.Action], c.App, guestSuffix(c, id), c.From, c.Node)
		} else {
			fmt.Fprintf(w, "%s app %s (%s%s on %s)\n", sym[c.Action], c.App, what, guestSuffix(c, id), c.Node)
		}
		for _, r := range c.Reasons {
			fmt.Fprintf(w, "      # %s\n", r)
		}
		for _, st := range c.Settings {
			fmt.Fprintf(w, "      + %s: %s\n", st.Key, st.Value)
		}
		for _, e := range c.Config {
			fmt.Fprintf(w, "      ~ %s: %s → %s\n", e.Key, quote(e.Old), quote(e.New))
		}
		writePoolAndFirewall(w, c)
		for _, v := range c.Volumes {
			fmt.Fprintf(w, "      volume %s: %s%s\n", v.Name, v.Action, volumeDetail(v))
		}
		if c.Guest {
			writeSteps(w, c)
		}
	}
	writePlanFooter(w, pj, unchecked)
}

// writePlanFooter prints a plan's refusals, warnings and summary, and
// what a plan narrowed to some apps left out. unchecked are the apps not
// checked that were not among its changes.
func writePlanFooter(w io.Writer, pj PlanJSON, unchecked map[string]string) {
	for _, r := range pj.Refused {
		fmt.Fprintf(w, "! refused: %s\n", r)
	}
	for _, wn := range pj.Warnings {
		fmt.Fprintf(w, "! warning: %s\n", wn)
	}
	if len(pj.Refused) > 0 {
		fmt.Fprintln(w, "\nPlan refused: nothing will be changed until the refused lines above are resolved.")
		return
	}
	for _, u := range pj.Unchecked {
		if unchecked[u.App] != "" { // not among the changes above
			fmt.Fprintf(w, "? app %s: not checked: %s\n", u.App, u.Why)
		}
	}
	if !pj.HasChanges && len(pj.Unchecked) > 0 {
		fmt.Fprintf(w, "\nNot checked: %s. corral cannot tell whether the cluster matches the manifest until the node is back.\n", uncheckedNames(pj.Unchecked))
		return
	}
	if !pj.HasChanges && len(pj.Targets) > 0 {
		fmt.Fprintf(w, "\nNo changes to the named apps: %s.\n", strings.Join(pj.Targets, ", "))
		writeLeftOut(w, pj)
		return
	}
	if !pj.HasChanges {
		fmt.Fprintln(w, "\nNo changes. The cluster matches the manifest.")
		return
	}
	var parts []string
	for _, a := range []string{"create", "update", "replace", "move", "delete"} {
		if n := pj.Summary[a]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d to %s", n, a))
		}
	}
	if len(pj.Keepers) > 0 {
		parts = append(parts, fmt.Sprintf("%d keeper(s) to create or repair", len(pj.Keepers)))
	}
	if len(pj.Recover) > 0 {
		parts = append(parts, fmt.Sprintf("%d interrupted operation(s) to finish or roll back", len(pj.Recover)))
	}
	fmt.Fprintf(w, "\nPlan: %s. Retained volumes are kept in every case.\n", strings.Join(parts, ", "))
	if len(pj.Unchecked) > 0 {
		fmt.Fprintf(w, "Not checked: %s (a node is offline).\n", uncheckedNames(pj.Unchecked))
	}
	writeLeftOut(w, pj)
}

// writeLeftOut says what a plan narrowed to some apps left out.
func writeLeftOut(w io.Writer, pj PlanJSON) {
	if pj.LeftOutChanges > 0 {
		what := "changes"
		if pj.LeftOutChanges == 1 {
			what = "change"
		}
		fmt.Fprintf(w, "%d %s to other apps left out: %s; run `%s` to see them.\n", pj.LeftOutChanges, what, strings.Join(pj.LeftOut, ", "), cmp.Or(pj.LeftOutCommand, "corral plan"))
	}
}

// uncheckedNames is "app a, app b" for the apps a plan could not check.
func uncheckedNames(us []UncheckedJSON) string {
	var names []string
	for _, u := range us {
		names = append(names, "app "+u.App+" (node "+u.Node+")")
	}
	return strings.Join(names, ", ")
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
		d = append(d, human.Size(v.Size))
	}
	if v.OldSize > 0 && v.OldSize != v.Size && v.Size > 0 {
		d = append(d, "was "+human.Size(v.OldSize))
	}
	if v.Mount != "" {
		d = append(d, "at "+v.Mount)
	}
	if len(d) == 0 {
		return ""
	}
	return " (" + strings.Join(d, ", ") + ")"
}

// writeSteps says what happens inside the container: which steps run and
// why, which are skipped, and which units restart because of which step.
func writeSteps(w io.Writer, c ChangeJSON) {
	for _, f := range c.Facts {
		v := "(known after apply)"
		if f.Known {
			v = f.Value
		}
		fmt.Fprintf(w, "      reads ${app:%s} = %s\n", f.Ref, v)
	}
	switch {
	case c.StepsUnknown != "":
		fmt.Fprintf(w, "      provision: %s; then check health\n", c.StepsUnknown)
		return
	case len(c.Steps) == 0:
		fmt.Fprintf(w, "      check health inside the container\n")
		return
	}
	runs, fresh := 0, true
	why := map[string]string{}
	for _, st := range c.Steps {
		if st.Run {
			runs++
		}
		fresh = fresh && st.Why == "new container"
		why[st.Name] = st.Why
	}
	if fresh {
		fmt.Fprintf(w, "      provision: all %d step(s) run (new container), then check health\n", len(c.Steps))
	} else {
		fmt.Fprintf(w, "      provision: %d of %d step(s) run, then check health\n", runs, len(c.Steps))
		for _, st := range c.Steps {
			switch {
			case st.Recreate:
				fmt.Fprintf(w, "        + %s (%s; recreates its services)\n", st.Name, st.Why)
			case st.Run:
				fmt.Fprintf(w, "        + %s (%s)\n", st.Name, st.Why)
			default:
				fmt.Fprintf(w, "          %s (unchanged, skipped)\n", st.Name)
			}
		}
	}
	for _, r := range c.Restarts {
		writeRestart(w, r.Unit, r.Because, why)
	}
}

// maxRestartLine is how long a restart line may grow before its reasons
// go one to a line (issue 32: lines past 200 characters).
const maxRestartLine = 100

// writeRestart says why unit restarts: the steps that ask for it, those
// with the same reason together ("file: a, file: b changed"), on one
// line when it is short, one reason to a line when it is not.
func writeRestart(w io.Writer, unit string, steps []string, why map[string]string) {
	var reasons []string
	names := map[string][]string{}
	for _, s := range steps {
		r := pastTense(why[s])
		if _, seen := names[r]; !seen {
			reasons = append(reasons, r)
		}
		names[r] = append(names[r], s)
	}
	var parts []string
	for _, r := range reasons {
		n := names[r]
		if len(n) > 1 && r == "is new" {
			r = "are new"
		}
		parts = append(parts, strings.Join(n, ", ")+" "+r)
	}
	line := fmt.Sprintf("      restart %s because %s", unit, strings.Join(parts, " and "))
	if len(line) <= maxRestartLine {
		fmt.Fprintln(w, line)
		return
	}
	fmt.Fprintf(w, "      restart %s once, because:\n", unit)
	for _, p := range parts {
		fmt.Fprintf(w, "        - %s\n", p)
	}
}

// pastTense turns a step's reason into why it triggers a restart.
func pastTense(why string) string {
	switch {
	case why == "new container":
		return "runs in the new container"
	case why == "new step":
		return "is new"
	case strings.HasPrefix(why, "changed"):
		return "changed"
	}
	return "runs (" + why + ")"
}
