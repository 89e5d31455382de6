package main

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/plan"
)

// The soak's web-UI edits (issue 26): between rounds, before the
// converging apply, one record of corral's is edited as a user of the PVE
// web UI (or pct set) would. An edit corral repairs by itself must be
// repaired by that apply (the check after it and the empty plan prove it);
// an edit corral must refuse is checked to be refused, naming the CT,
// with nothing changed on its node, and is then repaired as the refusal
// says, before the converging apply runs.

// soakEdit is one kind of edit: whether it applies to what obs shows, and
// doing it, which returns the repair of an edit corral refuses (nil for
// one it repairs itself).
type soakEdit struct {
	name string
	// targets lists what the edit can be made to in obs.
	targets func(obs *plan.Observed) []soakTarget
	// do makes the edit to target.
	do func(r *soakRig, t soakTarget) error
	// refused marks an edit corral must refuse until a human repairs it.
	refused bool
}

// soakTarget is one CT an edit can be made to.
type soakTarget struct {
	vmid int
	node string
	app  string // the app of an app CT or of a carrier
}

func appTargets(running bool) func(obs *plan.Observed) []soakTarget {
	return func(obs *plan.Observed) []soakTarget {
		var out []soakTarget
		for _, p := range soakProjects {
			for _, app := range soakApps[p] {
				if cts := obs.Apps[app]; len(cts) == 1 && cts[0].Lock == "" && (!running || cts[0].Status == "running") {
					out = append(out, soakTarget{cts[0].VMID, cts[0].Node, app})
				}
			}
		}
		return out
	}
}

// keeperTargets are the keepers that record volumes (an empty keeper shell
// is no keeper corral can lose data through, see docs/data-safety.md).
func keeperTargets() func(obs *plan.Observed) []soakTarget {
	return func(obs *plan.Observed) []soakTarget {
		var out []soakTarget
		for _, node := range soakNodes {
			for _, k := range obs.Keepers[node] {
				if len(k.Records) > 0 {
					out = append(out, soakTarget{k.VMID, node, ""})
				}
			}
		}
		return out
	}
}

func carrierTargets(obs *plan.Observed) []soakTarget {
	var out []soakTarget
	for app, c := range obs.Carriers {
		if len(c.Holds()) > 0 {
			out = append(out, soakTarget{c.VMID, c.Node, app})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].vmid < out[j].vmid })
	return out
}

var soakEdits = []soakEdit{
	{name: "app tag removed", targets: appTargets(false), do: func(r *soakRig, t soakTarget) error {
		return r.editTags(t, func(tags []string) []string { return without(tags, "corral-app-"+t.app) })
	}},
	{name: "project tag removed", targets: appTargets(false), do: func(r *soakRig, t soakTarget) error {
		return r.editTags(t, func(tags []string) []string {
			return slices.DeleteFunc(tags, func(s string) bool { return strings.HasPrefix(s, "corral-project-") })
		})
	}},
	{name: "declarer line removed from an app's description", targets: appTargets(false), do: func(r *soakRig, t soakTarget) error {
		return r.editDescription(t, func(line string) bool { return strings.HasPrefix(line, "corral-declared:") })
	}},
	{name: "memory changed", targets: appTargets(false), do: func(r *soakRig, t soakTarget) error {
		return r.put(t, url.Values{"memory": {"1024"}})
	}},
	{name: "volume mount point deleted as a pending change", targets: appTargets(true), do: func(r *soakRig, t soakTarget) error {
		return r.put(t, url.Values{"delete": {"mp0"}})
	}},
	{name: "volume line removed from a keeper's Notes", targets: keeperTargets(), do: func(r *soakRig, t soakTarget) error {
		first := true
		return r.editDescription(t, func(line string) bool {
			drop := first && strings.HasPrefix(line, "corral-volume:")
			first = first && !drop
			return drop
		})
	}},
	{name: "keeper protection cleared", targets: keeperTargets(), do: func(r *soakRig, t soakTarget) error {
		return r.put(t, url.Values{"protection": {"0"}})
	}},
	{name: "keeper kind tag removed", refused: true, targets: keeperTargets(), do: func(r *soakRig, t soakTarget) error {
		return r.editTags(t, func(tags []string) []string { return without(tags, "corral-keeper") })
	}},
	{name: "carrier kind tag removed", refused: true, targets: carrierTargets, do: func(r *soakRig, t soakTarget) error {
		return r.editTags(t, func(tags []string) []string { return without(tags, "corral-carrier") })
	}},
}

// edit makes one edit (when one applies) and returns the violations of a
// refusal that did not happen as it must.
func (r *soakRig) edit() []string {
	obs := r.observe()
	type choice struct {
		e soakEdit
		t soakTarget
	}
	var choices []choice
	for _, e := range soakEdits {
		for _, t := range e.targets(obs) {
			choices = append(choices, choice{e, t})
		}
	}
	// A carrier exists only after a killed move: take that rare chance.
	for _, c := range choices {
		if c.e.name == "carrier kind tag removed" && r.rng.IntN(2) == 0 {
			choices = []choice{c}
			break
		}
	}
	if len(choices) == 0 {
		return nil
	}
	c := choices[r.rng.IntN(len(choices))]
	before := r.tags(c.t)
	if err := c.e.do(r, c.t); err != nil {
		r.t.Fatalf("edit %s of ct %d: %v", c.e.name, c.t.vmid, err)
	}
	r.edits[c.e.name]++
	if !c.e.refused {
		return nil
	}
	bad := r.refusedUntilRepaired(c.e.name, c.t)
	if err := r.put(c.t, url.Values{"tags": {strings.Join(before, ";")}}); err != nil {
		r.t.Fatalf("repair of ct %d: %v", c.t.vmid, err)
	}
	r.refusals++
	return bad
}

// refusedUntilRepaired runs plan and apply of every project with the edit
// in place: some plan must refuse naming the CT, no plan or apply may
// exit 0 while naming it, and the node must not change: no new guest and
// no new volume on it, the edited CT untouched.
func (r *soakRig) refusedUntilRepaired(edit string, t soakTarget) []string {
	var bad []string
	guests, volumes, digest := r.nodeState(t)
	named := false
	vmid := strconv.Itoa(t.vmid)
	names := regexp.MustCompile(`(?i)\bct ` + vmid + `\b`)
	var plans strings.Builder
	for _, p := range soakProjects {
		out, err := r.command("plan", "-f", r.manifest(p)).CombinedOutput()
		fmt.Fprintf(&plans, "plan of %s (%v):\n%s\n", p, err, out)
		if names.Match(out) && strings.Contains(string(out), "pct set "+vmid) {
			named = true
			if err == nil {
				bad = append(bad, fmt.Sprintf("%s (ct %d): plan of %s named it and exited 0:\n%s", edit, t.vmid, p, out))
			}
		}
	}
	if !named {
		bad = append(bad, fmt.Sprintf("%s (ct %d on %s): no plan refused naming the CT and its repair (pct set %s):\n%s", edit, t.vmid, t.node, vmid, plans.String()))
	}
	for _, p := range soakProjects {
		out, err := r.command("apply", "-f", r.manifest(p), "--auto-approve", "--lock-timeout", "30s").CombinedOutput()
		if err == nil && names.Match(out) {
			bad = append(bad, fmt.Sprintf("%s (ct %d): apply of %s named it and exited 0:\n%s", edit, t.vmid, p, out))
		}
	}
	guests2, volumes2, digest2 := r.nodeState(t)
	if t.app == "" {
		// A damaged keeper: nothing on its node changes at all.
		if added := newOnes(guests, guests2); len(added) > 0 {
			bad = append(bad, fmt.Sprintf("%s (ct %d on %s): guests %v were created on its node while it was damaged", edit, t.vmid, t.node, added))
		}
		if added := newOnes(volumes, volumes2); len(added) > 0 {
			bad = append(bad, fmt.Sprintf("%s (ct %d on %s): volumes %v were created on its node while it was damaged", edit, t.vmid, t.node, added))
		}
	} else if cts := r.observe().Apps[t.app]; len(cts) > 0 && !slices.Contains(guests, cts[0].VMID) {
		bad = append(bad, fmt.Sprintf("%s (ct %d, moving %s): a new container %d was made for the app while its carrier was damaged", edit, t.vmid, t.app, cts[0].VMID))
	}
	if digest != digest2 {
		bad = append(bad, fmt.Sprintf("%s (ct %d on %s): its config changed while it was damaged", edit, t.vmid, t.node))
	}
	return bad
}

// nodeState is the VMIDs of every guest on t's node (of the cluster for
// a carrier, whose app may be on either), the volumes of its thin pool,
// and t's config digest.
func (r *soakRig) nodeState(t soakTarget) (guests []int, volumes []string, digest string) {
	ctx := context.Background()
	res, err := r.root.ClusterResources(ctx, "vm")
	if err != nil {
		r.t.Fatal(err)
	}
	for _, g := range res {
		if g.Node == t.node || t.app != "" {
			guests = append(guests, g.VMID)
		}
	}
	var content []struct {
		VolID string `json:"volid"`
	}
	if err := r.root.Get(ctx, "/nodes/"+t.node+"/storage/local-lvm/content", nil, &content); err != nil {
		r.t.Fatal(err)
	}
	for _, c := range content {
		volumes = append(volumes, c.VolID)
	}
	cfg := r.config(t)
	d, _ := cfg["digest"].(string)
	return guests, volumes, d
}

func newOnes[T comparable](before, after []T) []T {
	var out []T
	for _, x := range after {
		if !slices.Contains(before, x) {
			out = append(out, x)
		}
	}
	return out
}

func without(tags []string, tag string) []string {
	return slices.DeleteFunc(tags, func(s string) bool { return s == tag })
}

func (r *soakRig) configPath(t soakTarget) string {
	return fmt.Sprintf("/nodes/%s/lxc/%d/config", t.node, t.vmid)
}

func (r *soakRig) config(t soakTarget) map[string]any {
	var cfg map[string]any
	if err := r.root.Get(context.Background(), r.configPath(t), nil, &cfg); err != nil {
		r.t.Fatalf("config of ct %d: %v", t.vmid, err)
	}
	return cfg
}

func (r *soakRig) put(t soakTarget, v url.Values) error {
	return r.root.Put(context.Background(), r.configPath(t), v, nil)
}

func (r *soakRig) tags(t soakTarget) []string {
	s, _ := r.config(t)["tags"].(string)
	return strings.FieldsFunc(s, func(c rune) bool { return c == ';' || c == ',' || c == ' ' })
}

func (r *soakRig) editTags(t soakTarget, f func([]string) []string) error {
	return r.put(t, url.Values{"tags": {strings.Join(f(r.tags(t)), ";")}})
}

// editDescription removes the description's (Notes') lines drop says.
func (r *soakRig) editDescription(t soakTarget, drop func(line string) bool) error {
	desc, _ := r.config(t)["description"].(string)
	lines := slices.DeleteFunc(strings.Split(desc, "\n"), drop)
	return r.put(t, url.Values{"description": {strings.Join(lines, "\n")}})
}
