package cli

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/pvetest"
)

// These tests drive corral backup, backups, restore, snapshot, snapshots
// and rollback over HTTPS against the emulator (time scale 0) and check
// the files on disk: in the archives, the volumes and the root file
// systems.

// runC runs corral with the connection flags of this emulator.
func (c *cluster) runC(args ...string) result {
	c.t.Helper()
	return c.runToken(c.srv.Credentials().OperatorToken, args...)
}

func (c *cluster) runToken(token string, args ...string) result {
	c.t.Helper()
	full := append(slices.Clone(args), "--endpoint", c.srv.URL(), "--api-token", token, "--fingerprint", c.srv.Fingerprint())
	r := c.run(full...)
	for _, tok := range []string{c.srv.Credentials().OperatorToken, c.srv.Credentials().RootToken, token} {
		_, secret, _ := strings.Cut(tok, "=")
		if secret != "" && (strings.Contains(r.stdout, secret) || strings.Contains(r.stderr, secret)) {
			c.t.Fatalf("corral %s printed a token secret", strings.Join(args, " "))
		}
	}
	return r
}

func (c *cluster) mustC(args ...string) result {
	c.t.Helper()
	r := c.runC(args...)
	if r.code != 0 {
		c.t.Fatalf("corral %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// archiveFiles lists the regular files in a vzdump archive on disk, with
// the contents of those named in read (the others map to ""): a real
// CT's archive holds hundreds of MB, and read whole under -race it took
// the test binary past 3.5 GB.
func (c *cluster) archiveFiles(volid string, read ...string) map[string]string {
	c.t.Helper()
	p, err := c.srv.Cluster().VolumePath("pve", volid)
	if err != nil {
		c.t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		c.t.Fatalf("archive %s: %v", volid, err)
	}
	defer f.Close()
	zr, err := zstd.NewReader(f)
	if err != nil {
		c.t.Fatal(err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			c.t.Fatalf("read archive %s: %v", volid, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := "/" + strings.TrimPrefix(strings.TrimPrefix(h.Name, "."), "/")
		out[name] = ""
		if slices.Contains(read, name) {
			b, err := io.ReadAll(tr)
			if err != nil {
				c.t.Fatalf("read %s in archive %s: %v", name, volid, err)
			}
			out[name] = string(b)
		}
	}
	return out
}

type backupJSON struct {
	App      string `json:"app"`
	VMID     int    `json:"vmid"`
	Archive  string `json:"archive"`
	Size     int64  `json:"size"`
	Excluded []struct {
		Name, Key, Mount, Kind string
	} `json:"excluded"`
	Pruned []string `json:"pruned"`
}

func (c *cluster) backup(m, app string, extra ...string) backupJSON {
	c.t.Helper()
	c.nextArchiveSecond()
	r := c.mustC(append([]string{"backup", app, "-f", m, "-o", "json"}, extra...)...)
	var b backupJSON
	if err := json.Unmarshal([]byte(r.stdout), &b); err != nil {
		c.t.Fatalf("backup -o json: %v\n%s", err, r.stdout)
	}
	return b
}

// setup applies the notes app and writes a file into each volume and the
// root file system; it returns the app's VMID and the volids by name.
func (c *cluster) setupNotes(m string) (int, map[string]string) {
	c.t.Helper()
	c.mustRun("apply", "-f", m, "--auto-approve")
	app := c.status(m).Apps[0]
	vols := map[string]string{}
	for _, v := range app.Volumes {
		vols[v.Name] = v.VolID
	}
	vmid := app.Containers[0].VMID
	for name, content := range map[string]string{"data": "precious", "cache": "scratch"} {
		if err := os.WriteFile(c.file(vols[name], name+".txt"), []byte(content), 0o644); err != nil {
			c.t.Fatal(err)
		}
	}
	if err := os.WriteFile(c.file(c.rootfs(vmid), "root.txt"), []byte("root"), 0o644); err != nil {
		c.t.Fatal(err)
	}
	return vmid, vols
}

func (c *cluster) rootfs(vmid int) string {
	return strings.SplitN(c.config(vmid)["rootfs"], ",", 2)[0]
}

func TestBackup_archiveContents(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := manifestWith(t, "512")
	vmid, _ := c.setupNotes(m)

	r := c.mustC("backup", "notes", "-f", m)
	for _, want := range []string{"Backed up app notes (ct " + strconv.Itoa(vmid), "snapshot mode", "crash-consistent", "archive  local:backup/vzdump-lxc-" + strconv.Itoa(vmid) + "-",
		"NOT in this archive:", "volume cache (mp1 at /var/cache/notes): backup=0", "The container has no bind mounts."} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("backup output lacks %q:\n%s", want, r.stdout)
		}
	}
	b := c.backup(m, "notes", "--mode", "stop")
	if b.App != "notes" || b.VMID != vmid || b.Size <= 0 || len(b.Excluded) != 1 || b.Excluded[0].Name != "cache" || b.Excluded[0].Kind != "volume" {
		t.Errorf("backup -o json: %+v", b)
	}
	files := c.archiveFiles(b.Archive, "/srv/data/data.txt", "/root.txt")
	if files["/srv/data/data.txt"] != "precious" {
		t.Errorf("archive lacks the backup=1 volume's file; files: %v", keys(files))
	}
	if files["/root.txt"] != "root" {
		t.Errorf("archive lacks the rootfs file; files: %v", keys(files))
	}
	if _, ok := files["/var/cache/notes/cache.txt"]; ok {
		t.Errorf("archive holds the backup=0 volume's file")
	}
	// The app keeps running after a stop-mode backup.
	if st := c.status(m).Apps[0].Containers[0].Status; st != "running" {
		t.Errorf("app is %s after a stop-mode backup", st)
	}

	// backups lists both, newest first, attributed by notes.
	r = c.mustC("backups", "notes", "-o", "json")
	var list struct {
		Backups []struct {
			App, VolID string
			Size       int64
			By         string `json:"attributed_by"`
			Corral     bool
		} `json:"backups"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Backups) != 2 || list.Backups[0].VolID != b.Archive || list.Backups[0].By != "notes" || !list.Backups[0].Corral {
		t.Errorf("backups -o json: %+v (newest should be %s)", list.Backups, b.Archive)
	}
	if r := c.mustC("backups"); !strings.Contains(r.stdout, b.Archive) || !strings.HasPrefix(r.stdout, "APP") {
		t.Errorf("backups text:\n%s", r.stdout)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// A backup whose task fails with 403 after an HTTP 200 is a failure, and
// the error says which privilege vzdump checked.
func TestBackup_taskPermissionFailure(t *testing.T) {
	t.Parallel()
	d := newDoctorCluster(t)
	m := manifestWith(t, "512")
	vmid, _ := d.setupNotes(m)
	d.role("AuditOnly", []string{"VM.Audit", "Datastore.Audit", "Datastore.AllocateSpace", "Sys.Audit"})
	tok := d.token("reader@pve", "ro")
	id, _, _ := strings.Cut(tok, "=")
	d.acl("/", "AuditOnly", "reader@pve", id, true)
	r := d.runToken(tok, "backup", "notes", "-f", m, "--storage", "local")
	if r.code != 1 || !strings.Contains(r.stderr, "backup failed") || !strings.Contains(r.stderr, "VM.Backup on /vms/"+strconv.Itoa(vmid)) ||
		!strings.Contains(r.stderr, "HTTP 200") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if r := d.mustC("backups", "notes", "-o", "json"); strings.Contains(r.stdout, "vzdump-lxc") {
		t.Errorf("a failed backup left an archive:\n%s", r.stdout)
	}
}

func TestBackup_keepPrunesOnlyTheAppsArchives(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := writeManifest(t, strings.ReplaceAll(appManifest, "MEMORY", "512")+`    backup:
      keep: 2
  - name: other
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    memory: 256
    rootfs:
      size: 2G
`)
	c.mustRun("apply", "-f", m, "--auto-approve")
	other := c.backup(m, "other")
	// An archive of the same container made outside corral (a PVE backup
	// job, pct vzdump): attributed by its config, never pruned.
	vmid := c.status(m).Apps[0].Containers[0].VMID
	ctx := context.Background()
	pc := pvetest.Client(t, c.srv, c.srv.Credentials().OperatorToken)
	c.nextArchiveSecond()
	upid, err := pc.Backup(ctx, "pve", vmid, pve.BackupOptions{Storage: "local", Compress: "zstd", NotesTemplate: "{{guestname}} nightly"})
	if err == nil {
		_, err = pc.WaitTask(ctx, upid, pve.WaitOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	manual, err := pc.Backups(ctx, "pve", "local", vmid)
	if err != nil || len(manual) != 1 {
		t.Fatalf("manual archive: %v %v", manual, err)
	}
	var made []string
	for i := 0; i < 4; i++ {
		b := c.backup(m, "notes")
		made = append(made, b.Archive)
		if i >= 2 && (len(b.Pruned) != 1 || b.Pruned[0] != made[i-2]) {
			t.Errorf("backup %d pruned %v, want [%s]", i, b.Pruned, made[i-2])
		}
	}
	r := c.mustC("backups", "-o", "json")
	var list struct {
		Backups []struct {
			App, VolID string
			By         string `json:"attributed_by"`
			Corral     bool
		} `json:"backups"`
	}
	json.Unmarshal([]byte(r.stdout), &list)
	var got []string
	for _, b := range list.Backups {
		got = append(got, b.App+" "+b.VolID)
		if b.VolID == manual[0].VolID && (b.By != "config" || b.Corral) {
			t.Errorf("manual archive attributed by %q, corral=%v; want by config, not corral's", b.By, b.Corral)
		}
	}
	want := []string{"notes " + made[3], "notes " + made[2], "notes " + manual[0].VolID, "other " + other.Archive}
	if !slices.Equal(got, want) {
		t.Errorf("archives after keep 2:\n got %v\nwant %v", got, want)
	}
	// --keep on the command line overrides the manifest.
	b := c.backup(m, "notes", "--keep", "1")
	if len(b.Pruned) != 2 {
		t.Errorf("--keep 1 pruned %v, want the two older", b.Pruned)
	}
}

// restore --as runs a copy beside the original: new VMID, MAC and
// hostname, its volume in the keeper under the new app with the restored
// file, the backup=0 volume empty, the original untouched.
func TestRestore_asNewApp(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := manifestWith(t, "512")
	vmid, vols := c.setupNotes(m)
	b := c.backup(m, "notes")
	// Changes after the backup stay with the original only.
	os.WriteFile(c.file(vols["data"], "later.txt"), []byte("later"), 0o644)
	origConf := c.config(vmid)

	if r := c.runC("restore", "other", "--archive", b.Archive, "--auto-approve"); r.code != 1 || !strings.Contains(r.stderr, "is a backup of app notes, not of other") {
		t.Errorf("restore of another app's archive: exit %d\n%s", r.code, r.stderr)
	}
	if r := c.runC("backup", "nosuch"); r.code != 1 || !strings.Contains(r.stderr, "app nosuch has no container") {
		t.Errorf("backup of an unknown app: exit %d\n%s", r.code, r.stderr)
	}
	r := c.runC("restore", "notes", "--archive", b.Archive, "--as", "notes-copy", "-f", m)
	if r.code == 0 || !strings.Contains(r.stderr, "review the restore plan above (`corral restore` prints it and asks) and pass --auto-approve") || strings.Contains(r.stderr, "corral plan") {
		t.Fatalf("restore without approval: exit %d\n%s", r.code, r.stderr)
	}
	r = c.mustC("restore", "notes", "--archive", b.Archive, "--as", "notes-copy", "-f", m, "--auto-approve", "-o", "json")
	var res struct {
		Name     string `json:"name"`
		VMID     int    `json:"vmid"`
		MAC      string `json:"mac"`
		Status   string `json:"status"`
		Hostname string `json:"hostname"`
		Volumes  []struct {
			Name, VolID string
			Empty       bool
		} `json:"volumes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("restore -o json: %v\n%s", err, r.stdout)
	}
	if res.VMID == vmid || res.Status != "running" || res.Name != "notes-copy" {
		t.Fatalf("restore result: %+v", res)
	}
	conf := c.config(res.VMID)
	if conf["hostname"] != "notes-copy" {
		t.Errorf("restored hostname %q", conf["hostname"])
	}
	oldMAC, newMAC := macOf(origConf["net0"]), macOf(conf["net0"])
	if oldMAC == "" || newMAC == oldMAC || res.MAC != newMAC {
		t.Errorf("MAC: original %s, restored %s (reported %s)", oldMAC, newMAC, res.MAC)
	}
	if !strings.Contains(conf["tags"], "corral-app-notes-copy") || strings.Contains(conf["tags"], "corral-app-notes;") {
		t.Errorf("restored tags %q", conf["tags"])
	}
	var inv struct {
		Volumes []struct {
			App, Name, VolID, Holder string
		} `json:"volumes"`
	}
	json.Unmarshal([]byte(c.mustRun("volumes", "-o", "json").stdout), &inv)
	recorded := map[string]string{}
	for _, v := range inv.Volumes {
		recorded[v.App+"/"+v.Name] = v.VolID + " " + v.Holder
	}
	for _, v := range res.Volumes {
		if !strings.HasPrefix(recorded["notes-copy/"+v.Name], v.VolID+" ct "+strconv.Itoa(res.VMID)) {
			t.Errorf("restored volume %s (%s) is recorded as %q", v.Name, v.VolID, recorded["notes-copy/"+v.Name])
		}
		mounted := false
		for k, val := range conf {
			if strings.HasPrefix(k, "mp") && strings.HasPrefix(val, v.VolID+",") {
				mounted = true
			}
		}
		if !mounted {
			t.Errorf("volume %s not attached to the restored CT: %v", v.Name, conf)
		}
		switch v.Name {
		case "data":
			if got, _ := os.ReadFile(c.file(v.VolID, "data.txt")); string(got) != "precious" || v.Empty {
				t.Errorf("restored data volume: data.txt=%q empty=%v", got, v.Empty)
			}
			if _, err := os.Stat(c.file(v.VolID, "later.txt")); err == nil {
				t.Errorf("a file written after the backup is in the restore")
			}
		case "cache":
			if _, err := os.Stat(c.file(v.VolID, "cache.txt")); err == nil || !v.Empty {
				t.Errorf("the backup=0 volume came back with its file (empty=%v)", v.Empty)
			}
		}
	}
	if got, _ := os.ReadFile(c.file(c.rootfs(res.VMID), "root.txt")); string(got) != "root" {
		t.Errorf("restored rootfs root.txt = %q", got)
	}
	// The original is untouched.
	st := c.status(m).Apps[0]
	if len(st.Containers) != 1 || st.Containers[0].VMID != vmid || st.Containers[0].Status != "running" {
		t.Errorf("original after restore --as: %+v", st.Containers)
	}
	for _, v := range st.Volumes {
		if v.VolID != vols[v.Name] {
			t.Errorf("original volume %s is now %s, was %s", v.Name, v.VolID, vols[v.Name])
		}
	}
	if got, _ := os.ReadFile(c.file(vols["data"], "later.txt")); string(got) != "later" {
		t.Errorf("original data volume lost later.txt")
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Errorf("plan after restore --as: exit %d\n%s", r.code, r.stdout)
	}
}

func macOf(net0 string) string {
	for _, p := range strings.Split(net0, ",") {
		if v, ok := strings.CutPrefix(p, "hwaddr="); ok {
			return v
		}
	}
	return ""
}

// restore --replace: the app's name points at the restored CT, the old
// one is gone, and its volumes stay recorded (nothing freed).
func TestRestore_replace(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := manifestWith(t, "512")
	vmid, vols := c.setupNotes(m)
	b := c.backup(m, "notes")
	os.WriteFile(c.file(vols["data"], "data.txt"), []byte("overwritten"), 0o644)

	r := c.mustC("restore", "notes", "--archive", b.Archive, "--replace", "-f", m, "--auto-approve")
	if !strings.Contains(r.stdout, "the old container "+strconv.Itoa(vmid)+" was destroyed") {
		t.Errorf("restore --replace output:\n%s\n%s", r.stdout, r.stderr)
	}
	st := c.status(m).Apps[0]
	if len(st.Containers) != 1 || st.Containers[0].VMID == vmid || st.Containers[0].Status != "running" {
		t.Fatalf("app after replace: %+v", st.Containers)
	}
	newVMID := st.Containers[0].VMID
	var inv struct {
		Volumes []struct{ App, Name, VolID, Holder string } `json:"volumes"`
	}
	json.Unmarshal([]byte(c.mustRun("volumes", "-o", "json").stdout), &inv)
	kept := map[string]bool{}
	for _, v := range inv.Volumes {
		if strings.Contains(v.Name, "-replaced-") {
			kept[v.VolID] = true
			if v.Holder != "keeper" {
				t.Errorf("replaced volume %s held by %s", v.Name, v.Holder)
			}
		}
		if v.Name == "data" {
			if v.Holder != "ct "+strconv.Itoa(newVMID) {
				t.Errorf("data held by %s, want the restored ct %d", v.Holder, newVMID)
			}
			if got, _ := os.ReadFile(c.file(v.VolID, "data.txt")); string(got) != "precious" {
				t.Errorf("restored data.txt = %q", got)
			}
		}
	}
	for name, volid := range vols {
		if !kept[volid] {
			t.Errorf("old volume %s (%s) is no longer recorded as replaced: %+v", name, volid, inv.Volumes)
		}
	}
	if got, _ := os.ReadFile(c.file(vols["data"], "data.txt")); string(got) != "overwritten" {
		t.Errorf("old data volume's content changed: %q", got)
	}
	if _, err := c.srv.Cluster().ConfigText(vmid); err == nil {
		t.Errorf("old ct %d still exists", vmid)
	}
	// The manifest's app is the restored container: nothing to do.
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Errorf("plan after restore --replace: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// The flow: backup, destroy the app, restore it by name.
func TestRestore_afterDestroy(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := manifestWith(t, "512")
	_, vols := c.setupNotes(m)
	b := c.backup(m, "notes")
	c.mustRun("destroy", "-f", m, "--auto-approve")
	c.mustC("restore", "notes", "--archive", b.Archive, "-f", m, "--auto-approve")
	st := c.status(m).Apps[0]
	if len(st.Containers) != 1 || st.Containers[0].Status != "running" {
		t.Fatalf("after restore: %+v", st.Containers)
	}
	for _, v := range st.Volumes {
		if v.Name == "data" {
			if got, _ := os.ReadFile(c.file(v.VolID, "data.txt")); string(got) != "precious" {
				t.Errorf("data.txt = %q", got)
			}
			if v.VolID == vols["data"] {
				t.Errorf("restored data volume is the old one")
			}
		}
	}
	if got, _ := os.ReadFile(c.file(c.rootfs(st.Containers[0].VMID), "root.txt")); string(got) != "root" {
		t.Errorf("rootfs file after restore: %q", got)
	}
}

// The seed's minimal self-backup role can back up, and is told before
// anything changes that it cannot restore.
func TestRestore_backupOnlyTokenRefusedFirst(t *testing.T) {
	t.Parallel()
	d := newDoctorCluster(t)
	m := manifestWith(t, "512")
	vmid, _ := d.setupNotes(m)
	d.role("SelfBackup", []string{"VM.Audit", "VM.Snapshot", "VM.Backup", "Datastore.AllocateSpace", "Datastore.Audit"})
	tok := d.token("guest@pve", "backup")
	id, _, _ := strings.Cut(tok, "=")
	d.acl("/vms/"+strconv.Itoa(vmid), "SelfBackup", "guest@pve", id, false)
	d.acl("/storage/local", "SelfBackup", "guest@pve", id, false)

	r := d.runToken(tok, "backup", "notes", "-f", m, "--storage", "local", "-o", "json")
	if r.code != 0 {
		t.Fatalf("backup with the self-backup token: exit %d\n%s", r.code, r.stderr)
	}
	var b backupJSON
	json.Unmarshal([]byte(r.stdout), &b)
	before := len(d.srv.Cluster().Resources("vm"))
	r = d.runToken(tok, "restore", "notes", "--archive", b.Archive, "--as", "copy", "-f", m, "--auto-approve")
	if r.code != 1 {
		t.Fatalf("restore with the self-backup token: exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"restore refused before any change", "can back app notes up but cannot restore it", "VM.Allocate on /vms/", "Datastore.AllocateSpace on /storage/local-lvm", "SDN.Use on /sdn/zones/localnetwork/vmbr0"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("refusal lacks %q:\n%s", want, r.stderr)
		}
	}
	if after := len(d.srv.Cluster().Resources("vm")); after != before {
		t.Errorf("guests %d → %d: the refused restore changed something", before, after)
	}
}

func TestSnapshotRollback(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := manifestWith(t, "512")
	vmid, vols := c.setupNotes(m)
	c.mustC("snapshot", "notes", "before", "-f", m)
	r := c.mustC("snapshot", "notes", "-f", m)
	if !strings.Contains(r.stdout, "Snapshot corral-") || !strings.Contains(r.stdout, "It covers rootfs, volume cache (/var/cache/notes), volume data (/srv/data)") {
		t.Errorf("default snapshot name: %s", r.stdout)
	}
	os.WriteFile(c.file(vols["data"], "data.txt"), []byte("broken"), 0o644)
	os.Remove(c.file(c.rootfs(vmid), "root.txt"))

	r = c.mustC("snapshots", "notes", "-o", "json")
	var snaps struct {
		Snapshots []struct {
			Name    string
			Current bool
		} `json:"snapshots"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &snaps); err != nil || len(snaps.Snapshots) != 2 || snaps.Snapshots[0].Name != "before" || !snaps.Snapshots[1].Current {
		t.Fatalf("snapshots -o json: %v\n%s", err, r.stdout)
	}
	if r := c.runC("rollback", "notes", "before"); r.code == 0 {
		t.Fatalf("rollback without approval succeeded")
	}
	c.mustC("rollback", "notes", "before", "--auto-approve")
	if got, _ := os.ReadFile(c.file(vols["data"], "data.txt")); string(got) != "precious" {
		t.Errorf("volume file after rollback: %q", got)
	}
	if got, _ := os.ReadFile(c.file(c.rootfs(vmid), "root.txt")); string(got) != "root" {
		t.Errorf("rootfs file after rollback: %q", got)
	}
	if st := c.status(m).Apps[0].Containers[0].Status; st != "running" {
		t.Errorf("app %s after rollback, want running again", st)
	}
	c.mustC("snapshot", "notes", "before", "--delete")
	if r := c.mustC("snapshots", "notes"); strings.Contains(r.stdout, "before") {
		t.Errorf("snapshot before still listed after --delete:\n%s", r.stdout)
	}
}

// A container on a dir storage cannot be snapshotted: corral says why and
// takes none.
func TestSnapshot_dirStorageRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := newClusterIn(t, dir, func(state map[string]any) {
		state["storages"] = append(state["storages"].([]any), map[string]any{
			"id": "vzdir", "type": "dir", "content": []string{"rootdir", "images"}, "path": "/mnt/vzdir", "total": 50 << 30})
	})
	m := writeManifest(t, `apps:
  - name: flat
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    memory: 256
    rootfs:
      storage: vzdir
      size: 2G
`)
	c.mustRun("apply", "-f", m, "--auto-approve")
	r := c.runC("snapshot", "flat", "-f", m)
	if r.code != 1 || !strings.Contains(r.stderr, "cannot be snapshotted: rootfs") || !strings.Contains(r.stderr, "storage vzdir of type dir") || !strings.Contains(r.stderr, "corral backup flat") {
		t.Errorf("exit %d\n%s", r.code, r.stderr)
	}
	if r := c.mustC("snapshots", "flat"); !strings.Contains(r.stdout, "has no snapshots") {
		t.Errorf("snapshots after the refusal:\n%s", r.stdout)
	}
}

// newClusterIn starts an emulator on dir after editing its saved state
// (an administrator changing storage.cfg while it was down).
func newClusterIn(t *testing.T, dir string, edit func(map[string]any)) *cluster {
	t.Helper()
	c := newCluster(t, pvetest.InDir(dir))
	c.srv.Close()
	p := filepath.Join(dir, "state.json")
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var state map[string]any
	if err := json.Unmarshal(raw, &state); err != nil {
		t.Fatal(err)
	}
	edit(state)
	raw, _ = json.Marshal(state)
	if err := os.WriteFile(p, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return newCluster(t, pvetest.InDir(dir))
}

// Scenario 9 of issue 11: the same archive restored in place twice in a
// row (within one second, as a script does). The app ends on the
// archive's data, every displaced copy stays recorded under its own
// name, and the next apply has nothing to do.
func TestRestore_replaceTwice(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := manifestWith(t, "512")
	_, vols := c.setupNotes(m)
	b := c.backup(m, "notes")
	for i := 0; i < 2; i++ {
		c.mustC("restore", "notes", "--archive", b.Archive, "--replace", "-f", m, "--auto-approve")
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("plan after two restores: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var inv struct {
		Volumes []struct{ App, Name, VolID, Holder string } `json:"volumes"`
	}
	json.Unmarshal([]byte(c.mustRun("volumes", "-o", "json").stdout), &inv)
	names := map[string]bool{}
	replaced := 0
	for _, v := range inv.Volumes {
		if names[v.Name] {
			t.Errorf("two records named %s: %+v", v.Name, inv.Volumes)
		}
		names[v.Name] = true
		if strings.Contains(v.Name, "-replaced-") {
			replaced++
		}
		if v.Name == "data" {
			if got, _ := os.ReadFile(c.file(v.VolID, "data.txt")); string(got) != "precious" {
				t.Errorf("data.txt after two restores = %q, want the archive's", got)
			}
		}
	}
	if want := 2 * len(vols); replaced != want {
		t.Errorf("%d replaced records, want %d (each restore displaces every volume): %+v", replaced, want, inv.Volumes)
	}
}

// A copy made by restore --as (as the README shows) carries the project
// of the manifest used and records it as its declarer: the project's
// plans neither warn about it nor delete it, volumes prune leaves its
// volumes, and corral destroy NAME -f MANIFEST removes it, after which
// prune frees its volumes (issue 32 item 3: the copy had no project,
// destroy refused it and every plan warned; its volumes said "recorded
// before projects").
func TestRestoreAsCopyHasAnOwner(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := manifestWith(t, "512")
	c.setupNotes(m)
	b := c.backup(m, "notes")
	r := c.mustC("restore", "notes", "--archive", b.Archive, "--as", "notes-copy", "-f", m, "--auto-approve", "-o", "json")
	var res struct {
		VMID int `json:"vmid"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.VMID == 0 {
		t.Fatalf("restore -o json: %v\n%s", err, r.stdout)
	}
	if conf := c.config(res.VMID); !strings.Contains(conf["tags"], "corral-project-demo") {
		t.Errorf("the copy's tags %q lack the project", conf["tags"])
	}

	r = c.mustRun("plan", "-f", m)
	if strings.Contains(r.stdout+r.stderr, "notes-copy") {
		t.Errorf("plan mentions the copy:\n%s%s", r.stdout, r.stderr)
	}
	r = c.mustRun("apply", "-f", m, "--auto-approve")
	if _, err := c.srv.Cluster().ConfigText(res.VMID); err != nil {
		t.Fatalf("apply removed the copy: %v\n%s%s", err, r.stdout, r.stderr)
	}
	var inv struct {
		Volumes []struct{ App, Name, VolID, Project string } `json:"volumes"`
	}
	json.Unmarshal([]byte(c.mustRun("volumes", "-o", "json").stdout), &inv)
	copyVols := 0
	for _, v := range inv.Volumes {
		if v.App == "notes-copy" {
			copyVols++
			if v.Project != "demo" {
				t.Errorf("copy volume %s/%s: project %q, want demo", v.App, v.Name, v.Project)
			}
		}
	}
	if copyVols != 2 {
		t.Fatalf("%d volumes of the copy, want 2: %+v", copyVols, inv.Volumes)
	}
	out := decodeFree(t, c.mustRun("volumes", "prune", "-f", m, "--auto-approve", "-o", "json"))
	if len(out.Freed) != 0 || strings.Contains(fmt.Sprint(out.Plan.Warnings, out.Plan.Refused), "notes-copy") {
		t.Errorf("prune with the copy running: freed %v, warnings %v, refused %v", out.Freed, out.Plan.Warnings, out.Plan.Refused)
	}

	r = c.mustRun("destroy", "notes-copy", "-f", m, "--auto-approve")
	if _, err := c.srv.Cluster().ConfigText(res.VMID); err == nil {
		t.Fatalf("destroy left the copy:\n%s%s", r.stdout, r.stderr)
	}
	if st := c.status(m).Apps[0]; len(st.Containers) != 1 || st.Containers[0].Status != "running" {
		t.Errorf("the original after destroying the copy: %+v", st.Containers)
	}
	out = decodeFree(t, c.mustRun("volumes", "prune", "-f", m, "--auto-approve", "-o", "json"))
	if len(out.Freed) != 2 {
		t.Errorf("prune after destroying the copy freed %v, want its 2 volumes; warnings %v", out.Freed, out.Plan.Warnings)
	}
}
