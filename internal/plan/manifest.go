package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/corralhq/corral/internal/manifest"
)

// FromManifest turns a validated manifest into the planner's desired apps:
// sizes in bytes, memory in MiB, reclaim policies in the planner's terms.
// Secrets stay in the manifest; the plan only knows that a password is set.
func FromManifest(f *manifest.File) []App {
	apps := make([]App, 0, len(f.Apps))
	for _, m := range f.Apps {
		a := App{
			Name:         m.Name,
			Project:      f.Project,
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
			GuestDigest:  guestDigest(m),
			NeedsKeyctl:  m.NeedsKeyctl,

			SnapshotBeforeChange: m.SnapshotBeforeChange,
			BackupStorage:        m.Backup.Storage,
		}
		for _, s := range m.Provision {
			st := Step{Name: s.Name, Kind: string(s.Kind), OnChange: s.OnChange, Restart: s.Restart}
			if len(m.Unresolved) == 0 {
				st.Sum = StepSum(s)
			}
			a.Steps = append(a.Steps, st)
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

// guestDigest summarises an app's provisioning and health checks: any
// change to them, secret values included, changes it. Only the hash is
// stored (in the CT description), never a value.
func guestDigest(m manifest.App) string {
	if len(m.Provision) == 0 && len(m.Health) == 0 {
		return ""
	}
	h := sha256.New()
	for _, s := range m.Provision {
		fmt.Fprintf(h, "step\x00%s\x00%s\x00%s\x00%s\x00%s\x00%o\x00%s\x00%s\x00%s\x00",
			s.Kind, s.Name, s.Timeout, s.Run, s.Path, s.Mode, s.Owner, s.Project, s.Content)
		for _, e := range s.Env {
			fmt.Fprintf(h, "env\x00%s\x00%s\x00", e.Name, e.Value.Reveal())
		}
		a := s.Account
		fmt.Fprintf(h, "acct\x00%s\x00%d\x00%s\x00%s\x00%q\x00", a.Name, a.UID, a.Home, a.Shell, a.Groups)
		if len(s.OnChange) > 0 || len(s.Restart) > 0 || s.Pull == manifest.PullAlways {
			// Only when set, so that manifests without triggers keep
			// their digest.
			fmt.Fprintf(h, "triggers\x00%q\x00%q\x00%s\x00", s.OnChange, s.Restart, s.Pull)
		}
	}
	for _, c := range m.Health {
		fmt.Fprintf(h, "check\x00%s\x00%s\x00%s\x00%d\x00%s\x00%s\x00%s\x00%d\x00%s\x00", c.Kind, c.Name, c.URL, c.Expect, c.Address, c.Command, c.Timeout, c.Retries, c.Interval)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
