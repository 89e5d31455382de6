package manifest

import "fmt"

// Limits on what one manifest may hold, past those of its raw bytes
// (bounds.go), so that what validates also plans within 256 MiB (issue
// 27; TestPlan_largestManifestsBounded in internal/cli). Real manifests
// hold a few apps, volumes and steps each.
const (
	// maxApps bounds the apps: a cluster of 32 nodes holds a few
	// thousand containers, and planning 24,900 apps (the most the
	// raw-bytes scan lets through) allocated 285 MiB.
	maxApps = 10_000
	// maxVolumes bounds one app's volumes: PVE's mount points run from
	// mp0 to mp255.
	maxVolumes = 256
	// maxSteps bounds the provision steps of all apps together: planning
	// 45,000 allocated 267 MiB.
	maxSteps = 10_000
	// maxOutputs bounds the named outputs: a few per app at most.
	maxOutputs = 1_000
)

// checkTotals reports what the apps of f hold together past the limits.
func (d *decoder) checkTotals(root *value, f *File) {
	steps := 0
	for _, a := range f.Apps {
		steps += len(a.Provision)
	}
	if steps > maxSteps {
		if av := root.member("apps"); av != nil {
			d.report(av.node, av.path, fmt.Sprintf("the apps hold %d provision steps in all, more than the %d corral takes", steps, maxSteps), "")
		}
	}
}
