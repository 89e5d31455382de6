package plan

import (
	"errors"
	"slices"
	"strings"
)

// Action is what a change does, a rune in the manner of Terraform's
// plans.Action. The rune is only the value's identity: package ui decides
// the symbols a plan is drawn with (a replace is drawn "-/+").
type Action rune

const (
	NoOp    Action = 0
	Create  Action = '+'
	Update  Action = '~'
	Replace Action = '±'
	Delete  Action = '-'
	// Move takes an existing container and its retained volumes to
	// another node (Change.From → Change.Node), then updates it there.
	Move Action = '>'
)

func (a Action) String() string {
	switch a {
	case Create:
		return "create"
	case Update:
		return "update"
	case Replace:
		return "replace"
	case Delete:
		return "delete"
	case Move:
		return "move"
	}
	return "no-op"
}

// Plan is the ordered list of changes corral will make.
type Plan struct {
	// Recover lists interrupted restores that are finished or rolled
	// back first (Observed.Restores), and rescues that are ended first
	// (Observed.Rescues), in words.
	Recover      []string
	RecoverNodes []string
	// Keepers are keeper CTs to create or repair, before any app change.
	Keepers []KeeperChange
	// Changes are per-app changes, in manifest order.
	Changes []Change
	// Warnings are findings that need no change but a human's eye:
	// orphaned volumes, containers outside the manifest.
	Warnings []string
	// Unchecked are apps left alone because a node they need is offline:
	// the plan cannot say they match the manifest.
	Unchecked []Unchecked
	// Targets are the apps the plan was narrowed to (corral plan APP…,
	// see Target); nil for the whole manifest. LeftOut names the apps
	// (and "keeper on NODE") whose changes were left out, LeftOutChanges
	// counts those changes.
	Targets        []string
	LeftOut        []string
	LeftOutChanges int
}

// Converged reports whether the cluster is known to match the manifest:
// nothing to change, and nothing that could not be checked.
func (p *Plan) Converged() bool { return !p.HasChanges() && len(p.Unchecked) == 0 }

// HasChanges reports whether applying the plan would change anything.
func (p *Plan) HasChanges() bool {
	if len(p.Keepers) > 0 || len(p.Recover) > 0 {
		return true
	}
	for _, c := range p.Changes {
		if c.Action != NoOp {
			return true
		}
	}
	return false
}

// FinishesInterrupted reports whether the plan finishes work an earlier,
// interrupted run left (a restore, a move, a recovered app's stale copy).
// Such work is planned on its own, before the manifest's other changes to
// the same app, so apply plans again once it is done and goes on in the
// same run.
func (p *Plan) FinishesInterrupted() bool {
	return len(p.Recover) > 0 || slices.ContainsFunc(p.Changes, func(c Change) bool { return c.Finishing || c.Stale })
}

// KeeperChange creates or repairs a node's keeper.
type KeeperChange struct {
	Node    string
	VMID    int // 0 = allocate
	Action  Action
	Reasons []string
	// Protect restores protection=1.
	Protect bool
	// Remount lists records whose mount point was removed outside corral
	// (the volume stayed as the keeper's unusedN): mounted again.
	Remount map[VolumeKey]string
	// DropIntents are adoption intents to forget (done, or never begun).
	DropIntents []VolumeKey
	// Notes: the Notes lines differ from the records and are written again.
	Notes bool
	// Projects are the corral-project lines to add (app → project) for
	// this project's apps whose records were made before projects, so
	// that their volumes stay this project's after their container goes.
	Projects map[string]string
	// Declared are the corral-declared lines to write (app → OriginID)
	// for this manifest's apps whose records name no declarer (made
	// before declarers were recorded) or, under an explicit project,
	// another one.
	Declared map[string]string
}

// Change is one app's change.
type Change struct {
	App string
	// Kind is KindVM for a VM app's change (vm.go), "" for a container's.
	Kind    string `json:",omitempty"`
	Node    string
	VMID    int // 0 = allocate with /cluster/nextid
	Action  Action
	Reasons []string
	// OldVMID is the CT being replaced or deleted.
	OldVMID int
	// From is the node a Move takes the app from (Node is where it goes).
	From string
	// Digest is the config digest of the CT (OldVMID) the change was
	// planned against: apply checks it on a fresh read before it changes
	// anything of the app, and stops the app if the config moved.
	Digest string
	// Config is the in-place edits (key → new raw value; "" deletes).
	Config []ConfigEdit
	// Volumes are the app's volumes and what happens to each.
	Volumes []VolumeChange
	// Restart: the CT must be stopped for part of the change.
	Restart bool
	// Start: the CT must be running at the end (it is stopped now).
	Start bool
	// Revert lists keys with pending changes to drop first (PUT
	// revert=…): the plan is made against the current values.
	Revert []string
	// Cleanup lists workload keys (unusedN) that only reference keeper
	// volumes and can be dropped without freeing anything.
	Cleanup []string
	// RootGrow is the new rootfs size when it grows in place (0 = none).
	RootGrow int64
	// FetchTemplate: the template is missing on the node and is
	// downloaded first.
	FetchTemplate bool
	// Guest: the work inside the container (provisioning, health checks)
	// runs after the container change, because it is new or its digest
	// changed.
	Guest bool
	// Steps say, when Guest, which provisioning steps run and why, from
	// the checksums the container's description records; Restarts are
	// the systemd units restarted after them. Both are nil when the plan
	// cannot tell, and StepsUnknown says why.
	Steps        []StepRun
	Restarts     []UnitRestart
	StepsUnknown string
	// After names the apps whose facts the guest work reads
	// (${app:APP.FACT}): apply carries out their changes first, and reads
	// the facts when this app's guest work runs.
	After []string `json:",omitempty"`
	// Recover is set on the create of an app whose node is offline
	// (apply --recover): the container it stands in for.
	Recover *Recovery `json:",omitempty"`
	// Stale: a Delete of the stale copy of a recovered app, done before
	// any other change.
	Stale bool `json:",omitempty"`
	// Finishing: a Move that finishes (or rolls back) a move an earlier
	// run left interrupted; the app's other changes are planned after it.
	Finishing bool `json:",omitempty"`
	// Firewall is what apply writes to the container's firewall, Pool
	// the pool it puts it into; nil for nothing (firewall.go).
	Firewall *FirewallChange `json:",omitempty"`
	Pool     *PoolChange     `json:",omitempty"`
	// HA is what happens to the container's HA resource (ha.go), done
	// after the container change; nil for nothing.
	HA *HAChange `json:",omitempty"`
	// Desired is the app as the manifest wants it (for create/replace).
	Desired *App `json:"-"`
}

// ConfigEdit is one in-place config change.
type ConfigEdit struct {
	Key     string
	Old     string
	New     string
	Restart bool // applied at the next start when running
}

// VolumeAction is what happens to one volume.
type VolumeAction string

const (
	VolKeep    VolumeAction = "keep"    // attached as wanted
	VolCreate  VolumeAction = "create"  // new volume in the keeper, then attach
	VolAdopt   VolumeAction = "adopt"   // move an existing volume to the keeper
	VolAttach  VolumeAction = "attach"  // recorded in the keeper, attach to the CT
	VolRemount VolumeAction = "remount" // attached, but mount path or backup flag differ
	VolGrow    VolumeAction = "grow"    // resize through the keeper
	VolFree    VolumeAction = "free"    // destroy --delete-volumes
	VolDetach  VolumeAction = "detach"  // detach and keep (destroy)
	VolMove    VolumeAction = "move"    // handed to the target node's keeper through a carrier (Move)
)

// VolumeChange is one volume's part of a change: the volume itself (the
// app's desired Volume, passed along as is; for a volume no longer
// wanted, what the workload and the keeper say of it) and what the plan
// does with it. apply attaches it with its Mount and Backup as they are
// here (see docs/architecture.md for the chain from the manifest).
type VolumeChange struct {
	Volume
	Action  VolumeAction
	VolID   string // "" until created
	OldSize int64
	Key     string // mpN on the workload ("" = pick the lowest free)
	// Serial is a VM app's retained disk's serial (vmkeeper.go), which
	// finds the disk on whichever VM holds it; "" for a container's.
	Serial string `json:",omitempty"`
}

// RefusedError lists what the plan cannot do safely (shrinks, moves of a
// retained volume between storages, …). Nothing is changed.
type RefusedError struct{ Problems []string }

// Problems are err's refusals when it is (or wraps) a RefusedError, else
// nil: a refused plan is still shown, with them.
func Problems(err error) []string {
	var r *RefusedError
	if errors.As(err, &r) {
		return r.Problems
	}
	return nil
}

func (e *RefusedError) Error() string {
	return "plan refused:\n  - " + strings.Join(e.Problems, "\n  - ")
}

// Nodes are the nodes whose containers or keepers the plan changes.
func (p *Plan) Nodes() []string {
	out := slices.Clone(p.RecoverNodes)
	for _, k := range p.Keepers {
		out = append(out, k.Node)
	}
	for _, c := range p.Changes {
		if c.Action != NoOp && c.Node != "" {
			out = append(out, c.Node)
		}
		if c.Action == Move && c.From != "" {
			out = append(out, c.From)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
