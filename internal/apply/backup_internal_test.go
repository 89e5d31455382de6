package apply

import "testing"

func TestWithIP(t *testing.T) {
	tests := []struct{ name, net0, ip, want string }{
		{"static to dhcp drops gw and hwaddr", "name=eth0,bridge=vmbr0,gw=10.0.0.1,hwaddr=BC:24:11:00:00:01,ip=10.0.0.5/24,type=veth",
			"dhcp", "name=eth0,bridge=vmbr0,ip=dhcp,type=veth"},
		{"dhcp to static", "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:00:01,ip=dhcp", "10.0.0.6/24", "name=eth0,bridge=vmbr0,ip=10.0.0.6/24"},
		{"no ip yet", "name=eth0,bridge=vmbr0", "dhcp", "name=eth0,bridge=vmbr0,ip=dhcp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := withIP(tt.net0, tt.ip); got != tt.want {
				t.Fatalf("withIP = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestUserDescription(t *testing.T) {
	tests := []struct{ name, desc, want string }{
		{"user text kept, markers dropped", "My notes app\nsecond line\n\nmanaged by corral; lines starting with 'corral-' are read back by corral\ncorral-app: notes\n", "My notes app\nsecond line"},
		{"only markers", "managed by corral; x\ncorral-app: notes\n", ""},
		{"no markers", "hand made", "hand made"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := userDescription(tt.desc); got != tt.want {
				t.Fatalf("userDescription = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseConfigText(t *testing.T) {
	text := "#my app\n#managed by corral\narch: amd64\nhostname: notes\ntags: corral;corral-app-notes\nmp0: local-lvm:vm-100-disk-1,mp=/data,backup=1\n\n[snap1]\nhostname: old\n"
	conf := parseConfigText(text)
	if conf["hostname"] != "notes" || conf["description"] != "my app\nmanaged by corral\n" || conf["mp0"] != "local-lvm:vm-100-disk-1,mp=/data,backup=1" {
		t.Fatalf("parseConfigText = %v", conf)
	}
	if got := configValue(text, "tags"); got != "corral;corral-app-notes" {
		t.Fatalf("tags = %q", got)
	}
}

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{"notes": true, "notes-restored": true, "a1": true, "": false, "Notes": false, "1abc": false, "bad-": false, "a_b": false, "a.b": false} {
		if got := validName(name); got != want {
			t.Errorf("validName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestArchiveVMID(t *testing.T) {
	if got := archiveVMID("local:backup/vzdump-lxc-105-2026_06_07-10_00_00.tar.zst"); got != "105" {
		t.Fatalf("archiveVMID = %q", got)
	}
	if got := archiveVMID("local:backup/other.tar"); got != "" {
		t.Fatalf("archiveVMID of a non-vzdump name = %q", got)
	}
}
