package apply_test

import (
	"context"
	"fmt"
	"github.com/corralhq/corral/internal/testenv"
	"net/http"
	"os"
	"os/exec"
	"testing"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/pvetest"
)

// The restore crash test: corral is killed at every API-call boundary of
// a restore --replace, then the user runs apply. The interrupted restore
// is finished or rolled back, the app has exactly one container, the plan
// converges, the volumes hold their data (the old copy or the restored
// one), and no volume is left unaccounted for (issue 11, scenario 12).

// client is an operator client through k (nil: a healthy one).
func (r *rig) client(k *killer) *pve.Client {
	hc := r.srv.HTTPClient()
	if k != nil {
		hc = &http.Client{Transport: k}
	}
	c := pvetest.Client(r.t, r.srv, r.srv.Credentials().OperatorToken, func(c *pve.Config) { c.HTTPClient = hc }, fastRetry)
	return c
}

// restoreReplace runs restore --replace of archive, killed at request kill
// (0: never), and returns the number of requests it made.
func (r *rig) restoreReplace(archive string, kill int64) (int64, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k := &killer{base: r.srv.HTTPClient().Transport, n: kill, cancel: cancel}
	ex := &apply.Executor{Client: r.client(k)}
	obs, err := apply.Observe(ctx, ex.Client)
	if err != nil {
		return k.count.Load(), err
	}
	rp, err := ex.PlanRestore(ctx, obs, apply.RestoreOptions{App: "db", Archive: archive, Replace: true, Names: map[string]string{}})
	if err != nil {
		return k.count.Load(), err
	}
	_, err = ex.Restore(ctx, obs, rp)
	return k.count.Load(), err
}

// userApply is what the user runs next: corral apply, which first
// finishes or rolls back an interrupted restore.
func (r *rig) userApply(ph phase) error {
	ctx := context.Background()
	ex := &apply.Executor{Client: r.client(nil)}
	obs, err := apply.Observe(ctx, ex.Client)
	if err != nil {
		return err
	}
	if len(obs.Restores) > 0 {
		if err := ex.Recover(ctx, obs); err != nil {
			return err
		}
		if obs, err = apply.Observe(ctx, ex.Client); err != nil {
			return err
		}
	}
	p, err := plan.Make(loadApps(r.t, ph), obs)
	if err != nil {
		return err
	}
	return ex.Apply(ctx, p, obs)
}

func (r *rig) backup() string {
	ctx := context.Background()
	ex := &apply.Executor{Client: r.client(nil)}
	obs, err := apply.Observe(ctx, ex.Client)
	if err != nil {
		r.t.Fatal(err)
	}
	res, err := ex.Backup(ctx, obs, "db", apply.BackupOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	return res.Archive
}

func TestCrashDuringRestoreReplace(t *testing.T) {
	t.Parallel()
	ph := cycle[0]
	setup := func(t *testing.T) (*rig, string) {
		r := newRig(t)
		if _, err := r.run(ph, 0); err != nil {
			t.Fatal(err)
		}
		r.markVolumes()
		return r, r.backup()
	}
	// The state every kill starts from is made once and copied: the
	// setup (a template download, a hand-made CT, an apply, a backup)
	// cost more than the kill and the recovery it is there for.
	seed, archive := setup(t)
	frozen := seed.freeze()
	base := thaw(t, frozen)
	n, err := base.restoreReplace(archive, 0)
	if err != nil {
		t.Fatalf("clean restore --replace: %v", err)
	}
	base.converged(ph, nil)
	t.Logf("a restore --replace makes %d requests", n)

	// A sample of the kill points (testenv.KillPoints); CORRAL_SWEEP=full
	// tries every one.
	for _, kill := range testenv.KillPoints(t, n) {
		t.Run(fmt.Sprintf("kill-at-%d", kill), func(t *testing.T) {
			t.Parallel()
			r := thaw(t, frozen)
			r.restoreReplace(archive, kill)
			var err error
			for try := 0; try < 2; try++ {
				if err = r.userApply(ph); err == nil {
					break
				}
			}
			if err != nil {
				t.Fatalf("apply after the kill: %v", err)
			}
			obs := r.observe()
			if len(obs.Restores) != 0 {
				t.Fatalf("restore still interrupted after apply: %+v", obs.Restores)
			}
			r.converged(ph, nil)
			// The app's data volume holds the app's data, whichever copy.
			recs := records(obs)
			data, err := os.ReadFile(r.marker(recs["db/data"]))
			if err != nil || string(data) != "db/data" {
				t.Fatalf("db/data (%s) holds %q (%v)", recs["db/data"], data, err)
			}
		})
	}
}

// freeze closes r's emulator and returns its state directory, to be
// copied by thaw.
func (r *rig) freeze() string {
	r.t.Helper()
	if err := r.srv.Close(); err != nil {
		r.t.Fatal(err)
	}
	return r.srv.Dir()
}

// thaw starts an emulator on a copy of a frozen state directory: the same
// guests, volumes (with their data) and archives.
func thaw(t *testing.T, frozen string) *rig {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-a", frozen+"/.", dir).CombinedOutput(); err != nil {
		t.Fatalf("copy emulator state: %v\n%s", err, out)
	}
	srv := pvetest.Start(t, pvetest.InDir(dir)).Server
	return &rig{t: t, srv: srv}
}
