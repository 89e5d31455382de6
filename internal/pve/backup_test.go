package pve_test

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/pve"
)

// recorder answers every request with data from answer and remembers the
// requests' methods, paths and parameters.
type recorder struct {
	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	method, path string
	params       url.Values
}

func (rec *recorder) client(t *testing.T, answer func(r recorded) any) *pve.Client {
	t.Helper()
	return newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Errorf("parse form: %v", err)
		}
		got := recorded{r.Method, strings.TrimPrefix(r.URL.Path, "/api2/json"), r.Form}
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, got)
		rec.mu.Unlock()
		writeData(w, answer(got))
	}))
}

func (rec *recorder) last() recorded {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.reqs[len(rec.reqs)-1]
}

const backupUPID = "UPID:pve:0001A2B3:00C0FFEE:6757A1B2:vzdump:101:ctl@pve!ctl:"

func TestClient_Backup_request(t *testing.T) {
	rec := &recorder{}
	c := rec.client(t, func(recorded) any { return backupUPID })
	no := false
	for _, tc := range []struct {
		name string
		opts pve.BackupOptions
		want url.Values
	}{
		{"defaults", pve.BackupOptions{}, url.Values{"vmid": {"101"}}},
		{"everything", pve.BackupOptions{Mode: "stop", Storage: "local", Compress: "zstd", NotesTemplate: "{{guestname}}",
			Protected: true, PruneBackups: "keep-last=3", Remove: &no},
			url.Values{"vmid": {"101"}, "mode": {"stop"}, "storage": {"local"}, "compress": {"zstd"}, "notes-template": {"{{guestname}}"},
				"protected": {"1"}, "prune-backups": {"keep-last=3"}, "remove": {"0"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			upid, err := c.Backup(ctx(t), "pve", 101, tc.opts)
			if err != nil || upid != backupUPID {
				t.Fatalf("Backup = %q, %v", upid, err)
			}
			got := rec.last()
			if got.method != http.MethodPost || got.path != "/nodes/pve/vzdump" {
				t.Errorf("request %s %s", got.method, got.path)
			}
			if diff := cmp.Diff(tc.want, got.params); diff != "" {
				t.Errorf("params (-want +got):\n%s", diff)
			}
		})
	}
}

// A vzdump refused inside its task: the POST succeeds, WaitTask fails
// with the task's 403 (seed 004 §3.5).
func TestClient_Backup_taskPermission(t *testing.T) {
	rec := &recorder{}
	exit := "403 Permission check failed (/vms/101, VM.Backup)"
	c := rec.client(t, func(r recorded) any {
		switch {
		case strings.HasSuffix(r.path, "/status"):
			return map[string]any{"upid": backupUPID, "status": "stopped", "exitstatus": exit, "type": "vzdump", "id": "101", "node": "pve"}
		case strings.HasSuffix(r.path, "/log"):
			return []map[string]any{{"n": 1, "t": "INFO: starting new backup job: vzdump 101"}, {"n": 2, "t": "TASK ERROR: " + exit}}
		}
		return backupUPID
	})
	upid, err := c.Backup(ctx(t), "pve", 101, pve.BackupOptions{Storage: "local"})
	if err != nil {
		t.Fatalf("Backup: %v", err)
	}
	_, err = c.WaitTask(ctx(t), upid, pve.WaitOptions{})
	var te *pve.TaskError
	if !errors.As(err, &te) || te.ExitStatus != exit {
		t.Fatalf("WaitTask = %v, want the task's 403", err)
	}
	if !pve.IsPermission(err) {
		t.Errorf("IsPermission(%v) = false", err)
	}
}

func TestClient_RestoreContainer_request(t *testing.T) {
	rec := &recorder{}
	c := rec.client(t, func(recorded) any { return strings.Replace(backupUPID, "vzdump", "vzrestore", 1) })
	archive := "local:backup/vzdump-lxc-101-2026_05_01-10_04_00.tar.zst"
	_, err := c.RestoreContainer(ctx(t), "pve", 102, archive, pve.RestoreOptions{
		Storage: "local-lvm", Unique: true, Start: true, Force: true, Config: &pve.ConfigUpdate{Hostname: pve.Ptr("web-02"), Digest: "not sent"},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := rec.last()
	want := url.Values{"vmid": {"102"}, "ostemplate": {archive}, "restore": {"1"}, "storage": {"local-lvm"},
		"unique": {"1"}, "start": {"1"}, "force": {"1"}, "hostname": {"web-02"}}
	if got.method != http.MethodPost || got.path != "/nodes/pve/lxc" {
		t.Errorf("request %s %s", got.method, got.path)
	}
	if diff := cmp.Diff(want, got.params); diff != "" {
		t.Errorf("params (-want +got):\n%s", diff)
	}
}

func TestClient_Backups_fixture(t *testing.T) {
	c := cannedServer(t, route{"GET", "/nodes/pve/storage/local/content", fixture(t, "storage-content-backup.json")})
	list, err := c.Backups(ctx(t), "pve", "local", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Subtype != "lxc" || list[0].VMID != 101 || list[0].Notes != "web-01" ||
		list[0].CTime != 1777629840 || !bool(list[1].Protected) || list[1].Format != "tar.zst" {
		t.Errorf("backups = %+v", list)
	}
}

func TestClient_Snapshots(t *testing.T) {
	rec := &recorder{}
	c := rec.client(t, func(r recorded) any {
		switch {
		case r.method == http.MethodGet && strings.HasSuffix(r.path, "/snapshot"):
			return []map[string]any{
				{"name": "pre", "description": "before upgrade", "snaptime": 1777629840},
				{"name": "current", "description": "You are here!", "parent": "pre", "running": 1, "digest": "abc"},
			}
		case strings.HasSuffix(r.path, "/config") && r.method == http.MethodGet:
			return map[string]any{"hostname": "web", "snaptime": 1777629840, "description": "before upgrade", "memory": 512}
		case r.method == http.MethodPut:
			return nil
		}
		return strings.Replace(backupUPID, "vzdump", "vzsnapshot", 1)
	})
	snaps, err := c.Snapshots(ctx(t), "pve", 101)
	if err != nil {
		t.Fatal(err)
	}
	want := []pve.Snapshot{
		{Name: "pre", Description: "before upgrade", SnapTime: 1777629840},
		{Name: "current", Description: "You are here!", Parent: "pre", Running: true, Digest: "abc"},
	}
	if diff := cmp.Diff(want, snaps); diff != "" {
		t.Errorf("snapshots (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		name         string
		do           func() error
		method, path string
		params       url.Values
	}{
		{"create", func() error { _, err := c.CreateSnapshot(ctx(t), "pve", 101, "pre", "before upgrade"); return err },
			http.MethodPost, "/nodes/pve/lxc/101/snapshot", url.Values{"snapname": {"pre"}, "description": {"before upgrade"}}},
		{"rollback", func() error { _, err := c.RollbackSnapshot(ctx(t), "pve", 101, "pre", true); return err },
			http.MethodPost, "/nodes/pve/lxc/101/snapshot/pre/rollback", url.Values{"start": {"1"}}},
		{"delete", func() error { _, err := c.DeleteSnapshot(ctx(t), "pve", 101, "pre", false); return err },
			http.MethodDelete, "/nodes/pve/lxc/101/snapshot/pre", url.Values{}},
		{"describe", func() error { return c.SetSnapshotDescription(ctx(t), "pve", 101, "pre", "kept") },
			http.MethodPut, "/nodes/pve/lxc/101/snapshot/pre/config", url.Values{"description": {"kept"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.do(); err != nil {
				t.Fatal(err)
			}
			got := rec.last()
			if got.method != tc.method || got.path != tc.path {
				t.Errorf("request %s %s, want %s %s", got.method, got.path, tc.method, tc.path)
			}
			if diff := cmp.Diff(tc.params, got.params); diff != "" {
				t.Errorf("params (-want +got):\n%s", diff)
			}
		})
	}
	conf, err := c.SnapshotConfig(ctx(t), "pve", 101, "pre")
	if err != nil || conf.Values["hostname"] != "web" || conf.Values["snaptime"] != "1777629840" {
		t.Errorf("SnapshotConfig = %+v, %v", conf, err)
	}
}

// PVE answers "OK" and starts nothing when the guest is on another node.
func TestClient_Backup_otherNode(t *testing.T) {
	rec := &recorder{}
	c := rec.client(t, func(recorded) any { return "OK" })
	upid, err := c.Backup(ctx(t), "pve1", 101, pve.BackupOptions{})
	if err == nil || upid != "" || !strings.Contains(err.Error(), "not on node pve1") {
		t.Errorf("Backup = %q, %v", upid, err)
	}
}
