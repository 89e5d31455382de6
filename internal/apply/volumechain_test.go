package apply_test

import (
	"context"
	"testing"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pvetest"
)

// TestVolumeMountFromManifestToConfig follows one volume's mount: from the
// YAML to the container's mpN, through the chain docs/architecture.md
// names: manifest.Volume → plan.Volume → plan.VolumeChange (which carries
// that same plan.Volume) → the executor's attachment → PUT …/config.
func TestVolumeMountFromManifestToConfig(t *testing.T) {
	t.Parallel()
	e := pvetest.Start(t)
	ctx := context.Background()
	apps := loadAppsText(t, `apps:
  - name: chain
    template: local:vztmpl/`+debian12+`
    volumes:
      - {name: data, size: 1G, mount: /srv/chain, backup: true}
`)
	want := apps[0].Volumes[0]
	if want.Mount != "/srv/chain" || !want.Backup {
		t.Fatalf("plan.Volume from the manifest = %+v", want)
	}
	obs, err := apply.Observe(ctx, e.Client)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Make(apps, obs)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Changes[0].Volumes[0]; got.Volume != want || got.Action != plan.VolCreate {
		t.Fatalf("the plan's volume change = %+v, want the app's volume %+v to be created", got, want)
	}
	if err := (&apply.Executor{Client: e.Client}).Apply(ctx, p, obs); err != nil {
		t.Fatal(err)
	}
	obs, err = apply.Observe(ctx, e.Client)
	if err != nil {
		t.Fatal(err)
	}
	ct := obs.Apps["chain"][0]
	mp := plan.ParseMountPoint(ct.Config["mp0"])
	if mp.Path != "/srv/chain" || !mp.Backup || mp.Volume == "" {
		t.Errorf("mp0 = %q, want the volume at /srv/chain with backup=1", ct.Config["mp0"])
	}
}
