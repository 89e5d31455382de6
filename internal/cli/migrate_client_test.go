package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim/model"
)

// TestPVEClient_Migrate drives the emulator's migration through
// internal/pve's client over HTTPS (sim and pve may not import each
// other, so the end-to-end check lives here): a CT moves with its data,
// /cluster/resources follows, and a refused migration is a *TaskError
// "migration aborted" whose log says why.
func TestPVEClient_Migrate(t *testing.T) {
	srv := pvetest.Start(t, pvetest.Nodes(3)).Server
	c := pvetest.Client(t, srv, srv.Credentials().RootToken)
	ctx := context.Background()
	run := func(upid string, err error) error {
		t.Helper()
		if err != nil {
			t.Fatalf("request: %v", err)
		}
		_, err = c.WaitTask(ctx, upid, pve.WaitOptions{})
		return err
	}
	create := func(vmid int, mps map[int]pve.MountPoint) {
		t.Helper()
		p := &pve.ContainerCreate{VMID: vmid, OSTemplate: model.DefaultTemplate, RootFS: pve.MountPoint{Volume: "local-lvm:1"},
			Config: pve.ConfigUpdate{MountPoints: mps}}
		if err := run(c.CreateContainer(ctx, "pve1", p)); err != nil {
			t.Fatalf("create %d: %v", vmid, err)
		}
	}
	create(101, nil)
	dir, err := srv.Cluster().VolumePath("pve1", "local-lvm:vm-101-disk-0")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "marker"), []byte("101"), 0o644); err != nil {
		t.Fatal(err)
	}

	p, err := c.MigratePrecondition(ctx, "pve1", 101)
	if err != nil || bool(p.Running) || !slices.Equal(p.AllowedNodes, []string{"pve2", "pve3"}) {
		t.Fatalf("precondition = %+v, %v", p, err)
	}
	upid, err := c.Migrate(ctx, "pve1", 101, pve.MigrateOptions{Target: "pve3"})
	if err != nil || !strings.HasPrefix(upid, "UPID:pve1:") {
		t.Fatalf("Migrate = %q, %v", upid, err)
	}
	if err := run(upid, nil); err != nil {
		t.Fatalf("migration task: %v", err)
	}
	rs, err := c.ClusterResources(ctx, "vm")
	if err != nil || len(rs) != 1 || rs[0].Node != "pve3" {
		t.Fatalf("resources = %+v, %v", rs, err)
	}
	dir, err = srv.Cluster().VolumePath("pve3", "local-lvm:vm-101-disk-0")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "marker")); string(b) != "101" {
		t.Errorf("marker on pve3 = %q, %v", b, err)
	}

	// A CT using a volume owned by another CT cannot move: the request
	// succeeds, the task fails.
	create(900, nil)
	create(102, map[int]pve.MountPoint{0: {Volume: "local-lvm:vm-900-disk-0", Path: "/pet"}})
	err = run(c.Migrate(ctx, "pve1", 102, pve.MigrateOptions{Target: "pve2"}))
	var te *pve.TaskError
	if !errors.As(err, &te) || te.ExitStatus != "migration aborted" {
		t.Fatalf("migrating 102: %v", err)
	}
	full, _, err := c.TaskLog(ctx, te.UPID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(full, func(l pve.LogLine) bool {
		return strings.HasSuffix(l.T, " can't migrate local volume 'local-lvm:vm-900-disk-0': owned by other guest (owner = 900)")
	}) {
		t.Errorf("log: %+v", full)
	}

	_, err = c.Migrate(ctx, "pve1", 102, pve.MigrateOptions{Target: "pve1"})
	var ae *pve.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Params["target"] != "target is local node." {
		t.Errorf("migrate to self: %v", err)
	}
}
