package pve_test

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/pve"
)

// route is one canned answer: method + path (under /api2/json) → body.
type route struct {
	method, path string
	body         []byte
}

// cannedServer answers each route with its body and fails the test on
// anything else.
func cannedServer(t *testing.T, routes ...route) *pve.Client {
	t.Helper()
	return newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, rt := range routes {
			if r.Method == rt.method && r.URL.Path == "/api2/json"+rt.path {
				writeBody(w, rt.body)
				return
			}
		}
		t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
		writeError(t, w, 501, "Method '"+r.Method+" "+r.URL.Path+"' not implemented", nil)
	}))
}

func TestClient_ListContainers_fixture(t *testing.T) {
	c := cannedServer(t, route{"GET", "/nodes/pve/lxc", fixture(t, "lxc-list.json")})
	cts, err := c.ListContainers(ctx(t), "pve")
	if err != nil {
		t.Fatalf("ListContainers: %v", err)
	}
	type row struct {
		VMID     int
		Status   string
		Lock     string
		Template pve.Bool01
		PID      pve.IntOrString
		Pressure pve.FloatOrString
	}
	var got []row
	for _, ct := range cts {
		got = append(got, row{ct.VMID, ct.Status, ct.Lock, ct.Template, ct.PID, ct.PressureCPUSome})
	}
	want := []row{
		{VMID: 101, Status: "running", PID: 239874},
		{VMID: 900, Status: "stopped"},
		{VMID: 102, Status: "stopped", Lock: "backup"},
		{VMID: 9000, Status: "stopped", Template: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("containers (-want +got):\n%s", diff)
	}
	if !cts[0].Running() || cts[1].Running() {
		t.Errorf("Running() wrong for %v / %v", cts[0].Status, cts[1].Status)
	}
}

func TestClient_ContainerStatus_fixture(t *testing.T) {
	c := cannedServer(t, route{"GET", "/nodes/pve/lxc/101/status/current", fixture(t, "lxc-status-current-running.json")})
	st, err := c.ContainerStatus(ctx(t), "pve", 101)
	if err != nil {
		t.Fatalf("ContainerStatus: %v", err)
	}
	if st.VMID != 101 || st.Status != "running" || st.MaxMem != 1073741824 || st.HA.Managed {
		t.Errorf("status = %+v", st)
	}
}

func TestClient_ContainerConfig_fixtures(t *testing.T) {
	c := cannedServer(t,
		route{"GET", "/nodes/pve/lxc/101/config", fixture(t, "lxc-config-101.json")},
		route{"GET", "/nodes/pve/lxc/900/config", fixture(t, "lxc-config-900-placeholder.json")},
	)
	cfg, err := c.ContainerConfig(ctx(t), "pve", 101, true)
	if err != nil {
		t.Fatalf("ContainerConfig(101): %v", err)
	}
	if got, want := cfg.Digest, "5f1e2a7c9b0d4e3f8a6b1c2d3e4f5a6b7c8d9e0f"; got != want {
		t.Errorf("Digest=%q, want %q", got, want)
	}
	if _, ok := cfg.Get("digest"); ok {
		t.Errorf("digest is also in Values")
	}
	scalars := []any{cfg.Hostname(), cfg.Memory(), cfg.Swap(), cfg.Cores(), cfg.OSType(), cfg.Unprivileged(), cfg.OnBoot(), cfg.Protection(), cfg.Tags()}
	if diff := cmp.Diff([]any{"web-01", int64(1024), int64(512), int64(2), "debian", true, true, false, []string{"app", "web"}}, scalars); diff != "" {
		t.Errorf("accessors (-want +got):\n%s", diff)
	}
	mps, err := cfg.MountPoints()
	if err != nil {
		t.Fatalf("MountPoints: %v", err)
	}
	if got, want := mps[0].String(), "local-lvm:vm-900-disk-1,mp=/srv/data,backup=1,size=8G"; got != want {
		t.Errorf("mp0 = %q, want %q", got, want)
	}
	if got, want := mps[1].Path, "/var/cache/app"; got != want {
		t.Errorf("mp1 path = %q, want %q", got, want)
	}
	root, ok, err := cfg.RootFS()
	if err != nil || !ok || root.Volume != "local-lvm:vm-101-disk-0" || *root.Size != 8<<30 {
		t.Errorf("RootFS() = %+v, %v, %v", root, ok, err)
	}
	nets, err := cfg.Networks()
	if err != nil {
		t.Fatalf("Networks: %v", err)
	}
	if got, want := nets[0].String(), "name=eth0,bridge=vmbr0,firewall=1,hwaddr=BC:24:11:5E:7A:01,ip=dhcp,type=veth"; got != want {
		t.Errorf("net0 = %q, want %q", got, want)
	}
	feat, err := cfg.Features()
	if err != nil || feat["nesting"] != "1" {
		t.Errorf("Features() = %v, %v", feat, err)
	}
	if n, ok := cfg.FreeIndex("mp", pve.MaxMountPoints); !ok || n != 2 {
		t.Errorf("FreeIndex(mp) = %d, %v, want 2", n, ok)
	}
	if k, ok := cfg.VolumeKey("local-lvm:vm-900-disk-1"); !ok || k != "mp0" {
		t.Errorf("VolumeKey = %q, %v, want mp0", k, ok)
	}

	holder, err := c.ContainerConfig(ctx(t), "pve", 900, false)
	if err != nil {
		t.Fatalf("ContainerConfig(900): %v", err)
	}
	if diff := cmp.Diff(map[int]string{0: "local-lvm:vm-900-disk-2"}, holder.Unused()); diff != "" {
		t.Errorf("Unused (-want +got):\n%s", diff)
	}
	if !holder.Protection() || holder.Memory() != 64 || holder.Swap() != 0 {
		t.Errorf("placeholder protection/memory/swap = %v/%d/%d", holder.Protection(), holder.Memory(), holder.Swap())
	}
	if k, ok := holder.VolumeKey("local-lvm:vm-900-disk-2"); !ok || k != "unused0" {
		t.Errorf("VolumeKey = %q, %v, want unused0", k, ok)
	}
}

// ContainerConfig also reads the root-only raw lxc keys and boolean JSON.
func TestContainerConfig_rawValues(t *testing.T) {
	c := cannedServer(t, route{"GET", "/nodes/pve/lxc/5/config",
		[]byte(`{"data":{"digest":"d","cores":4,"cpulimit":1.5,"console":true,"lxc":[["lxc.apparmor.profile","unconfined"]],"mp10":"local:5,mp=/x"}}`)})
	cfg, err := c.ContainerConfig(ctx(t), "pve", 5, false)
	if err != nil {
		t.Fatalf("ContainerConfig: %v", err)
	}
	want := &pve.ContainerConfig{
		Digest: "d",
		Values: map[string]string{"cores": "4", "cpulimit": "1.5", "console": "1", "mp10": "local:5,mp=/x"},
		LXC:    [][2]string{{"lxc.apparmor.profile", "unconfined"}},
	}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{10}, cfg.Indexes("mp")); diff != "" {
		t.Errorf("Indexes(mp) (-want +got):\n%s", diff)
	}
}

func TestClient_Pending_fixture(t *testing.T) {
	c := cannedServer(t, route{"GET", "/nodes/pve/lxc/101/pending", fixture(t, "lxc-pending-101.json")})
	got, err := c.Pending(ctx(t), "pve", 101)
	if err != nil {
		t.Fatalf("Pending: %v", err)
	}
	s := func(v string) *pve.Scalar { x := pve.Scalar(v); return &x }
	want := []pve.PendingEntry{
		{Key: "arch", Value: s("amd64")},
		{Key: "cores", Value: s("2")},
		{Key: "digest", Value: s("5f1e2a7c9b0d4e3f8a6b1c2d3e4f5a6b7c8d9e0f")},
		{Key: "mp0", Value: s("local-lvm:vm-900-disk-1,mp=/srv/data,backup=1,size=8G"), Delete: 1},
		{Key: "mp1", Value: s("local-lvm:vm-101-disk-1,mp=/var/cache/app,size=2G"), Pending: s("local-lvm:vm-101-disk-1,mp=/var/cache/app,ro=1,size=2G")},
		{Key: "nameserver", Pending: s("10.0.0.53")},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}
}

func TestClient_StorageContent_fixtures(t *testing.T) {
	c := cannedServer(t,
		route{"GET", "/nodes/pve/storage/local-lvm/content", fixture(t, "storage-content-lvmthin.json")},
		route{"GET", "/nodes/pve/storage/local/content", fixture(t, "storage-content-backup.json")},
	)
	thin, err := c.StorageContent(ctx(t), "pve", "local-lvm", "", 0)
	if err != nil {
		t.Fatalf("StorageContent(local-lvm): %v", err)
	}
	if got, want := thin[0], (pve.Volume{VolID: "local-lvm:vm-101-disk-0", Format: "raw", Size: 8589934592, VMID: 101, CTime: 1777629600, Content: "rootdir"}); got != want {
		t.Errorf("thin[0] = %+v, want %+v", got, want)
	}
	if got, want := thin[5].Content, "images"; got != want {
		t.Errorf("orphan content = %q, want %q", got, want)
	}
	backups, err := c.StorageContent(ctx(t), "pve", "local", "backup", 0)
	if err != nil {
		t.Fatalf("StorageContent(local): %v", err)
	}
	if got, want := backups[1], (pve.Volume{VolID: "local:backup/vzdump-lxc-900-2026_04_20-02_00_03.tar.zst", Format: "tar.zst", Size: 1234567, VMID: 900, CTime: 1776650403, Content: "backup", Subtype: "lxc", Protected: true}); got != want {
		t.Errorf("backups[1] = %+v, want %+v", got, want)
	}
}

func TestClient_Permissions_fixture(t *testing.T) {
	c := cannedServer(t, route{"GET", "/access/permissions", fixture(t, "access-permissions-token.json")})
	p, err := c.Permissions(ctx(t), "", "")
	if err != nil {
		t.Fatalf("Permissions: %v", err)
	}
	checks := []struct {
		path, priv string
		want       bool
	}{
		{"/vms", "VM.Allocate", true},
		{"/storage/local-lvm", "Datastore.AllocateSpace", true},
		{"/storage/local-lvm", "Datastore.Allocate", false},
		{"/nodes/pve", "Sys.Audit", true}, // granted, not propagated
		{"/", "Sys.Audit", false},
	}
	for _, ch := range checks {
		if got := p.Has(ch.path, ch.priv); got != ch.want {
			t.Errorf("Has(%s, %s)=%v, want %v", ch.path, ch.priv, got, ch.want)
		}
	}
}

// Asynchronous calls return the UPID; PUT config returns nothing.
func TestClient_asyncAndSync_fixtures(t *testing.T) {
	upidBody := fixture(t, "post-returns-upid.json")
	const upid = "UPID:pve:0003A1B2:0151C6E4:69F479A0:vzcreate:101:ctl@pve!ctl:"
	c := cannedServer(t,
		route{"POST", "/nodes/pve/lxc", upidBody},
		route{"POST", "/nodes/pve/lxc/101/status/start", upidBody},
		route{"POST", "/nodes/pve/lxc/101/status/stop", upidBody},
		route{"POST", "/nodes/pve/lxc/101/status/shutdown", upidBody},
		route{"POST", "/nodes/pve/lxc/101/status/reboot", upidBody},
		route{"PUT", "/nodes/pve/lxc/101/resize", upidBody},
		route{"POST", "/nodes/pve/lxc/101/move_volume", upidBody},
		route{"DELETE", "/nodes/pve/lxc/101", upidBody},
		route{"POST", "/nodes/pve/aplinfo", upidBody},
		route{"POST", "/nodes/pve/storage/local/download-url", upidBody},
		route{"DELETE", "/nodes/pve/storage/local-lvm/content/local-lvm:vm-555-disk-0", fixture(t, "put-config-returns-null.json")},
		route{"PUT", "/nodes/pve/lxc/101/config", fixture(t, "put-config-returns-null.json")},
		route{"POST", "/nodes/pve/lxc/102/status/start", fixture(t, "put-config-returns-null.json")},
	)
	ctx := ctx(t)
	calls := map[string]func() (string, error){
		"create": func() (string, error) { return c.CreateContainer(ctx, "pve", &pve.ContainerCreate{VMID: 101}) },
		"start":  func() (string, error) { return c.StartContainer(ctx, "pve", 101) },
		"stop":   func() (string, error) { return c.StopContainer(ctx, "pve", 101) },
		"shutdown": func() (string, error) {
			return c.ShutdownContainer(ctx, "pve", 101, pve.ShutdownOptions{Timeout: 30, ForceStop: true})
		},
		"reboot": func() (string, error) { return c.RebootContainer(ctx, "pve", 101) },
		"resize": func() (string, error) { return c.ResizeContainer(ctx, "pve", 101, "rootfs", "+2G") },
		"move": func() (string, error) {
			return c.MoveVolume(ctx, "pve", 101, &pve.VolumeMove{Volume: "mp1", TargetVMID: 900})
		},
		"destroy": func() (string, error) { return c.DestroyContainer(ctx, "pve", 101, pve.DestroyOptions{}) },
		"template": func() (string, error) {
			return c.DownloadAppliance(ctx, "pve", "local", "debian-12-standard_12.7-1_amd64.tar.zst")
		},
		"download": func() (string, error) {
			return c.DownloadURL(ctx, "pve", "local", &pve.Download{Filename: "x.tar.zst"})
		},
	}
	for name, call := range calls {
		got, err := call()
		if err != nil || got != upid {
			t.Errorf("%s = %q, %v, want %q", name, got, err, upid)
		}
	}
	if got, err := c.DeleteVolume(ctx, "pve", "local-lvm", "local-lvm:vm-555-disk-0"); err != nil || got != "" {
		t.Errorf("DeleteVolume with a null answer = %q, %v, want \"\", nil", got, err)
	}
	if err := c.UpdateContainerConfig(ctx, "pve", 101, &pve.ConfigUpdate{Memory: pve.Ptr[int64](2048)}); err != nil {
		t.Errorf("UpdateContainerConfig: %v", err)
	}
	if _, err := c.StartContainer(ctx, "pve", 102); err == nil {
		t.Errorf("StartContainer with a null answer succeeded, want ErrNoUPID")
	}
}

func TestClient_smallEndpoints(t *testing.T) {
	c := cannedServer(t,
		route{"GET", "/cluster/nextid", []byte(`{"data":"104"}`)},
		route{"GET", "/nodes", []byte(`{"data":[{"node":"pve","status":"online","maxcpu":8,"ssl_fingerprint":"AB:CD"}]}`)},
		route{"GET", "/cluster/status", []byte(`{"data":[{"id":"node/pve","name":"pve","type":"node","local":1,"online":1,"nodeid":1,"ip":"10.0.0.2"}]}`)},
		route{"GET", "/nodes/pve/storage", []byte(`{"data":[{"storage":"local-lvm","type":"lvmthin","content":"rootdir,images","active":1,"enabled":1,"shared":0,"total":100,"used":40,"avail":60,"used_fraction":0.4}]}`)},
		route{"GET", "/nodes/pve/storage/local-lvm/status", []byte(`{"data":{"type":"lvmthin","content":"images,rootdir","active":1,"enabled":1,"total":100,"used":40,"avail":60}}`)},
		route{"POST", "/nodes/pve/storage/local-lvm/content", []byte(`{"data":"local-lvm:vm-900-disk-3"}`)},
		route{"GET", "/nodes/pve/tasks", []byte(`{"data":[{"upid":"UPID:pve:0003A1B2:0151C6E4:69F479A0:vzcreate:101:ctl@pve!ctl:","node":"pve","pid":238002,"pstart":22136548,"starttime":1777629600,"endtime":1777629610,"type":"vzcreate","id":"101","user":"ctl@pve!ctl","status":"OK"}]}`)},
	)
	ctx := ctx(t)
	if id, err := c.NextID(ctx); err != nil || id != 104 {
		t.Errorf("NextID = %d, %v, want 104", id, err)
	}
	if nodes, err := c.Nodes(ctx); err != nil || len(nodes) != 1 || nodes[0].Node != "pve" || nodes[0].MaxCPU != 8 {
		t.Errorf("Nodes = %+v, %v", nodes, err)
	}
	if st, err := c.ClusterStatus(ctx); err != nil || len(st) != 1 || !bool(st[0].Local) || st[0].IP != "10.0.0.2" {
		t.Errorf("ClusterStatus = %+v, %v", st, err)
	}
	if sl, err := c.StorageList(ctx, "pve", "rootdir"); err != nil || len(sl) != 1 || !sl[0].HasContent("rootdir") || sl[0].HasContent("vztmpl") {
		t.Errorf("StorageList = %+v, %v", sl, err)
	}
	if ss, err := c.StorageStatus(ctx, "pve", "local-lvm"); err != nil || ss.Avail != 60 || !ss.HasContent("rootdir") {
		t.Errorf("StorageStatus = %+v, %v", ss, err)
	}
	if v, err := c.AllocVolume(ctx, "pve", "local-lvm", 900, "vm-900-disk-3", "8G"); err != nil || v != "local-lvm:vm-900-disk-3" {
		t.Errorf("AllocVolume = %q, %v", v, err)
	}
	if tl, err := c.TaskList(ctx, "pve", pve.TaskFilter{VMID: 101, Type: "vzcreate"}); err != nil || len(tl) != 1 || tl[0].Status != "OK" || tl[0].EndTime != 1777629610 {
		t.Errorf("TaskList = %+v, %v", tl, err)
	}
}

func TestClient_VMPending(t *testing.T) {
	c := cannedServer(t, route{"GET", "/nodes/pve/qemu/200/pending", []byte(`{"data":[{"key":"scsi0","value":"local-lvm:vm-200-disk-0,size=32G"},{"key":"unused0","pending":"local-lvm:vm-900-disk-1"},{"key":"digest","value":"abc"}]}`)})
	got, err := c.VMPending(ctx(t), "pve", 200)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Key != "scsi0" || string(*got[0].Value) != "local-lvm:vm-200-disk-0,size=32G" || got[1].Pending == nil || string(*got[1].Pending) != "local-lvm:vm-900-disk-1" {
		t.Errorf("VMPending = %+v", got)
	}
}
