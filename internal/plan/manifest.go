package plan

import (
	"slices"

	"github.com/corralhq/corral/internal/manifest"
)

// FromManifest turns a validated manifest into the planner's desired apps:
// sizes in bytes, memory in MiB, reclaim policies in the planner's terms.
// Secrets stay in the manifest; the plan only knows that a password is set.
func FromManifest(f *manifest.File) []App {
	apps := make([]App, 0, len(f.Apps))
	for _, m := range f.Apps {
		work := GuestWorkOf(m)
		a := App{
			Name:         m.Name,
			Project:      f.Project,
			ProjectSet:   f.ProjectSet,
			Origin:       f.Origin,
			Node:         m.Node,
			Placement:    Placement{Policy: f.Placement.Policy, Nodes: slices.Clone(f.Placement.Nodes)},
			VMID:         m.VMID,
			Template:     m.Template,
			Unprivileged: m.Unprivileged,
			Cores:        m.Cores,
			MemoryMiB:    m.MemoryMiB,
			SwapMiB:      m.SwapMiB,
			RootStorage:  m.RootFS.Storage,
			RootSize:     m.RootFS.Size.Bytes(),
			Nesting:      m.Features.Nesting,
			Bridge:       m.Network.Bridge,
			IP:           m.Network.IP,
			Gateway:      m.Network.Gateway,
			DNS:          append([]string(nil), m.Network.DNS...),
			Tags:         append([]string(nil), m.Tags...),
			OnBoot:       m.OnBoot,
			Description:  m.Description,
			SSHKeys:      append([]string(nil), m.SSH.PublicKeys...),
			HasPassword:  !m.Password.IsZero(),
			GuestDigest:  work.Digest(),
			NeedsKeyctl:  m.NeedsKeyctl,

			SnapshotBeforeChange: m.SnapshotBeforeChange,
			BackupStorage:        m.Backup.Storage,
			BackupMode:           m.Backup.Mode,

			Pool:     m.Pool,
			Firewall: firewallOf(m.Firewall),
			VM:       vmSpecOf(m),
		}
		if m.IsVM() {
			a.Kind = KindVM
		}
		if h := m.HA; h != nil {
			a.HA = &HA{State: h.State, Group: h.Group, Rule: h.Rule, MaxRestart: h.MaxRestart, MaxRelocate: h.MaxRelocate}
		}
		a.Steps = stepsOf(work, len(m.Unresolved) == 0)
		if refs := work.FactRefs(); len(refs) > 0 {
			// Make sets the digest and steps once it knows the facts.
			a.GuestTemplate, a.FactApps = &work, m.FactApps()
		}
		if u := m.Unresolved; len(u) > 0 {
			a.GuestUnknown, a.GuestDigest = u, "unknown"
		}
		for _, v := range m.Volumes {
			r := Retain
			if v.Reclaim == manifest.ReclaimDelete {
				r = DeleteOnDrop
			}
			a.Volumes = append(a.Volumes, Volume{
				Name: v.Name, Storage: v.Storage, Size: v.Size.Bytes(), Mount: v.Mount,
				Backup: v.Backup, Reclaim: r, Adopt: v.Adopt,
			})
		}
		apps = append(apps, a)
	}
	return apps
}
