package model

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCluster_AllocVolume(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		storage string
		params  map[string]string
		want    string
		size    int64
		wantErr *Error
	}{
		{name: "auto name", storage: "local-lvm", params: map[string]string{"vmid": "900", "filename": "", "size": "4G"},
			want: "local-lvm:vm-900-disk-1", size: 4 * gib},
		{name: "given name", storage: "local-lvm", params: map[string]string{"vmid": "900", "filename": "vm-900-disk-7", "size": "512M"},
			want: "local-lvm:vm-900-disk-7", size: 512 * mib},
		{name: "size in KiB", storage: "local-lvm", params: map[string]string{"vmid": "900", "filename": "vm-900-data", "size": "1024"},
			want: "local-lvm:vm-900-data", size: mib},
		{name: "dir raw", storage: "local", params: map[string]string{"vmid": "900", "filename": "", "size": "1G"},
			want: "local:900/vm-900-disk-0.raw", size: gib},
		{name: "dir format from name", storage: "local", params: map[string]string{"vmid": "900", "filename": "vm-900-disk-3.qcow2", "size": "1G"},
			want: "local:900/vm-900-disk-3.qcow2", size: gib},
		{name: "illegal name", storage: "local-lvm", params: map[string]string{"vmid": "900", "filename": "vm-901-disk-0", "size": "1G"},
			wantErr: Failf("illegal name 'vm-901-disk-0' - should be 'vm-900-*'\n")},
		{name: "name taken", storage: "local-lvm", params: map[string]string{"vmid": "900", "filename": "vm-900-disk-0", "size": "1G"},
			wantErr: Failf("lvcreate 'pve/vm-900-disk-0' error:   Logical Volume \"vm-900-disk-0\" already exists in volume group \"pve\"\n")},
		{name: "qcow2 on thin", storage: "local-lvm", params: map[string]string{"vmid": "900", "filename": "", "size": "1G", "format": "qcow2"},
			wantErr: Failf("unsupported format 'qcow2' at /usr/share/perl5/PVE/Storage/LvmThinPlugin.pm line 70.\n")},
		{name: "format conflict", storage: "local", params: map[string]string{"vmid": "900", "filename": "x.raw", "size": "1G", "format": "qcow2"},
			wantErr: ParamError(map[string]string{"format": "different storage formats (qcow2 != raw)"})},
		{name: "bad size", storage: "local-lvm", params: map[string]string{"vmid": "900", "filename": "", "size": "1T"},
			wantErr: ParamError(map[string]string{"size": "unable to parse size '1T'"})},
		{name: "unknown storage", storage: "nas", params: map[string]string{"vmid": "900", "filename": "", "size": "1G"},
			wantErr: Failf("storage 'nas' does not exist\n")},
		{name: "subvol with size", storage: "local", params: map[string]string{"vmid": "900", "filename": "", "size": "1G", "format": "subvol"},
			wantErr: Failf("storage does not support subvol quotas\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newOpsKit(t)
			k.vol("pve", 900, gib) // vm-900-disk-0
			got, err := k.c.AllocVolume(kitOperator, "pve", tt.storage, tt.params)
			if tt.wantErr != nil {
				if diff := cmp.Diff(tt.wantErr, err); diff != "" {
					t.Fatalf("error (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("AllocVolume = %q, %v; want %q", got, err, tt.want)
			}
			v := k.volume("pve", got)
			if v == nil || v.Size != tt.size || v.Owner != 900 {
				t.Fatalf("volume = %+v, want size %d owner 900", v, tt.size)
			}
			if _, err := k.c.VolumePath("pve", got); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestCluster_DeleteVolume(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		volume   string
		auth     Auth
		running  bool
		wantErr  *Error
		wantID   string
		wantExit string
		wantLog  []string
	}{
		{name: "referenced by a stopped CT is still freed", volume: "vm-101-disk-1", auth: kitOperator,
			wantID: "101@local-lvm", wantExit: "OK",
			wantLog: []string{`  Logical volume "vm-101-disk-1" successfully removed.`, "Removed volume 'local-lvm:vm-101-disk-1'", "TASK OK"}},
		{name: "full volid", volume: "local-lvm:vm-101-disk-1", auth: kitRoot, wantID: "101@local-lvm", wantExit: "OK"},
		{name: "mounted by a running CT", volume: "vm-101-disk-1", auth: kitOperator, running: true, wantID: "101@local-lvm",
			wantExit: "lvremove 'pve/vm-101-disk-1' error:   Logical volume pve/vm-101-disk-1 in use."},
		{name: "missing LV is no error", volume: "vm-101-disk-9", auth: kitOperator, wantID: "101@local-lvm", wantExit: "OK"},
		{name: "storage mismatch", volume: "local:vztmpl/x.tar.zst", auth: kitOperator,
			wantErr: ParamError(map[string]string{"volume": "storage ID mismatch (local != local-lvm)\n"})},
		{name: "bad name", volume: "foo", auth: kitOperator, wantErr: Failf("unable to parse lvm volume name 'foo'\n")},
		{name: "needs Datastore.Allocate", volume: "vm-101-disk-1", auth: kitNobody,
			wantErr: PermError("/storage/local-lvm, Datastore.Allocate")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newOpsKit(t)
			k.ct("pve", 101, nil)
			data := k.vol("pve", 101, gib)
			k.edit(101, func(g *Guest) {
				g.Config["mp0"] = data + ",mp=/data"
				g.Running = tt.running
			})
			upid, err := k.c.DeleteVolume(tt.auth, "pve", "local-lvm", tt.volume, nil)
			if tt.wantErr != nil {
				if diff := cmp.Diff(tt.wantErr, err); diff != "" {
					t.Fatalf("error (-want +got):\n%s", diff)
				}
				return
			}
			task := k.run(upid, err)
			if task.Type != "imgdel" || task.ID != tt.wantID || task.ExitStatus != tt.wantExit {
				t.Fatalf("task %s %s: %q, want id %s %q", task.Type, task.ID, task.ExitStatus, tt.wantID, tt.wantExit)
			}
			if tt.wantLog != nil {
				if diff := cmp.Diff(tt.wantLog, task.Log); diff != "" {
					t.Errorf("log (-want +got):\n%s", diff)
				}
			}
			if gone := k.volume("pve", data) == nil; gone != (tt.wantExit == "OK" && strings.HasSuffix(tt.volume, "disk-1")) {
				t.Errorf("volume gone = %v", gone)
			}
			if got := k.guest(101).Config["mp0"]; got != data+",mp=/data" {
				t.Errorf("config changed: mp0 = %q", got) // nothing checks or updates references
			}
		})
	}
}

func TestCluster_DeleteVolume_template(t *testing.T) {
	t.Parallel()
	k := newOpsKit(t)
	upid, err := k.c.DeleteVolume(kitRoot, "pve", "local", "vztmpl/debian-12-standard_12.12-1_amd64.tar.zst", map[string]string{"delay": "5"})
	if err != nil || upid != "" {
		t.Fatalf("DeleteVolume with delay = %q, %v; want \"\" (null), nil", upid, err)
	}
	if k.volume("pve", DefaultTemplate) != nil {
		t.Error("template still listed")
	}
	tasks := k.c.Tasks("pve")
	if len(tasks) != 1 || tasks[0].ID != "local" || tasks[0].ExitStatus != "OK" {
		t.Errorf("tasks = %+v", tasks)
	}
}

func TestCluster_DownloadAppliance(t *testing.T) {
	t.Parallel()
	k := newOpsKit(t)
	_, err := k.c.DownloadAppliance(kitRoot, "pve", map[string]string{"storage": "local", "template": "nope.tar.zst"})
	if diff := cmp.Diff(ParamError(map[string]string{"template": "no such template"}), err); diff != "" {
		t.Errorf("unknown template (-want +got):\n%s", diff)
	}
	_, err = k.c.DownloadAppliance(kitRoot, "pve", map[string]string{"storage": "local-lvm", "template": "debian-13-standard_13.1-2_amd64.tar.zst"})
	wantError(t, err, 500, "storage 'local-lvm' does not support templates\n")

	const tmpl = "debian-13-standard_13.1-2_amd64.tar.zst"
	task := k.run(k.c.DownloadAppliance(kitRoot, "pve", map[string]string{"storage": "local", "template": tmpl}))
	if task.Type != "download" || task.ID != tmpl || task.ExitStatus != "OK" {
		t.Fatalf("task %s %s: %s %q", task.Type, task.ID, task.ExitStatus, task.Log)
	}
	if got, want := task.Log[0], "downloading http://download.proxmox.com/images/system/"+tmpl+" to /var/lib/vz/template/cache/"+tmpl; got != want {
		t.Errorf("log[0] = %q, want %q", got, want)
	}
	if !contains(task.Log, "calculating checksum...OK, checksum verified") {
		t.Errorf("no checksum line in %q", task.Log)
	}
	v := k.volume("pve", "local:vztmpl/"+tmpl)
	if v == nil || v.Content != "vztmpl" || v.Format != "tzst" || v.Size == 0 {
		t.Fatalf("template volume = %+v", v)
	}
	path, err := k.c.VolumePath("pve", "local:vztmpl/"+tmpl)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if _, err := extractTemplate(path, root, idMap{}); err != nil {
		t.Fatal(err)
	}
	if body, err := os.ReadFile(filepath.Join(root, "etc", "os-release")); err != nil || !strings.Contains(string(body), "trixie") {
		t.Errorf("os-release = %q, %v", body, err)
	}

	// The datacenter's own Debian 12 template counts as the same file.
	task = k.run(k.c.DownloadAppliance(kitRoot, "pve", map[string]string{"storage": "local", "template": "debian-12-standard_12.12-1_amd64.tar.zst"}))
	if task.ExitStatus != "OK" || !contains(task.Log, "calculating checksum of existing file...OK, got correct file already, no need to download") {
		t.Errorf("re-download: %s %q", task.ExitStatus, task.Log)
	}
}

func TestCluster_DownloadURL(t *testing.T) {
	t.Parallel()
	const tmpl = "ubuntu-24.04-standard_24.04-2_amd64.tar.zst"
	a, _ := applianceFor(tmpl)
	sum, err := applianceChecksum(a, "sha256")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		storage  string
		params   map[string]string
		wantErr  *Error
		wantID   string
		wantExit string
		wantVol  string
	}{
		{name: "catalogue URL with checksum", storage: "local", params: map[string]string{"content": "vztmpl", "filename": tmpl, "url": a.URL(),
			"checksum": sum, "checksum-algorithm": "sha256"}, wantID: tmpl, wantExit: "OK", wantVol: "local:vztmpl/" + tmpl},
		{name: "as iso", storage: "local", params: map[string]string{"content": "iso", "filename": "my image.iso", "url": a.URL()},
			wantID: "my_image.iso", wantExit: "OK", wantVol: "local:iso/my_image.iso"},
		{name: "wrong checksum", storage: "local", params: map[string]string{"content": "vztmpl", "filename": tmpl, "url": a.URL(),
			"checksum": "abc", "checksum-algorithm": "sha256"}, wantID: tmpl, wantExit: "checksum mismatch: got '" + sum + "' != expect 'abc'"},
		{name: "no network", storage: "local", params: map[string]string{"content": "vztmpl", "filename": "x.tar.gz", "url": "https://example.com/x.tar.gz"},
			wantID: "x.tar.gz", wantExit: "download failed: wget: unable to resolve host address 'example.com'"},
		{name: "not in the catalogue", storage: "local", params: map[string]string{"content": "vztmpl", "filename": "x.tar.zst", "url": "http://download.proxmox.com/images/system/x.tar.zst"},
			wantID: "x.tar.zst", wantExit: "download failed: 2026-05-01 10:00:00 ERROR 404: Not Found."},
		{name: "existing file", storage: "local", params: map[string]string{"content": "vztmpl", "filename": "debian-12-standard_12.12-1_amd64.tar.zst", "url": a.URL()},
			wantID: "debian-12-standard_12.12-1_amd64.tar.zst", wantExit: "refusing to override existing file '/var/lib/vz/template/cache/debian-12-standard_12.12-1_amd64.tar.zst'"},
		{name: "block storage", storage: "local-lvm", params: map[string]string{"content": "vztmpl", "filename": tmpl, "url": a.URL()},
			wantErr: Failf("can't upload to storage type 'lvmthin', not a file based storage!\n")},
		{name: "content not configured", storage: "local", params: map[string]string{"content": "import", "filename": "x.ova", "url": a.URL()},
			wantErr: Failf("storage 'local' is not configured for content-type 'import'\n")},
		{name: "wrong extension", storage: "local", params: map[string]string{"content": "vztmpl", "filename": "x.zip", "url": a.URL()},
			wantErr: ParamError(map[string]string{"filename": "wrong file extension"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newOpsKitWith(t, Options{Now: fixedClock("2026-05-01T10:00:00")})
			upid, err := k.c.DownloadURL(kitRoot, "pve", tt.storage, tt.params)
			if tt.wantErr != nil {
				if diff := cmp.Diff(tt.wantErr, err); diff != "" {
					t.Fatalf("error (-want +got):\n%s", diff)
				}
				return
			}
			task := k.run(upid, err)
			if task.Type != "download" || task.ID != tt.wantID || task.ExitStatus != tt.wantExit {
				t.Fatalf("task %s %s: %q (log %q), want id %s %q", task.Type, task.ID, task.ExitStatus, task.Log, tt.wantID, tt.wantExit)
			}
			if tt.wantVol != "" && k.volume("pve", tt.wantVol) == nil {
				t.Errorf("%s not created", tt.wantVol)
			}
			if tt.wantExit != "OK" && tt.wantID == tmpl && k.volume("pve", "local:vztmpl/"+tmpl) != nil {
				t.Errorf("failed download left a volume")
			}
		})
	}
}

func TestEncodeText(t *testing.T) {
	t.Parallel()
	if got, want := encodeText("a b:c.iso"), `a\x20b\x3ac.iso`; got != want {
		t.Errorf("encodeText = %q, want %q", got, want)
	}
	if got, want := normalizeFilename("../dir/my file(1).iso"), "my_file_1_.iso"; got != want {
		t.Errorf("normalizeFilename = %q, want %q", got, want)
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// fixedClock is a clock stopped at a local time (wget prints local time).
func fixedClock(s string) func() time.Time {
	t, err := time.ParseInLocation("2006-01-02T15:04:05", s, time.Local)
	if err != nil {
		panic(err)
	}
	return func() time.Time { return t }
}
