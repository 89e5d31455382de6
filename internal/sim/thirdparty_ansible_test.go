package sim

import (
	"encoding/json"
	"net/url"
	"os/exec"
	"slices"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

// Issue 33: Ansible's standard dynamic inventory for Proxmox VE
// (community.general.proxmox, as Debian 12's ansible ships it) lists the
// emulator's CTs with their facts, their pool and their tags as groups.
// It reads /nodes, /nodes/{node}/lxc and qemu, each guest's
// status/current, config and snapshot, /pools and /pools/{poolid}; with
// /pools answering 501 it used to list no host at all.
func TestThirdParty_ansibleInventory(t *testing.T) {
	t.Parallel()
	inv, err := exec.LookPath("ansible-inventory")
	if err != nil {
		testenv.Lack(t, testenv.Ansible, "ansible-inventory is not installed: apt-get install ansible to run Ansible's proxmox inventory against the emulator (.ci/run does)")
	}
	ansibleOfTheDay(t, 0)
	p := newThirdParty(t)
	t.Run("token", func(t *testing.T) {
		p.sub(t).inventory(inv, "PROXMOX_USER="+p.user, "PROXMOX_TOKEN_ID="+p.tokenID, "PROXMOX_TOKEN_SECRET="+p.secret)
	})
	// With a password the plugin logs in (POST /access/ticket) and reads
	// with the ticket's cookie.
	t.Run("password", func(t *testing.T) {
		p.sub(t).inventory(inv, "PROXMOX_USER=root@pam", "PROXMOX_PASSWORD="+p.srv.Credentials().RootPassword)
	})
}

// inventory runs ansible-inventory --list with auth's variables and
// checks the scene's hosts, facts and groups.
func (p *thirdParty) inventory(inv string, auth ...string) {
	t := p.t
	cmd := exec.Command(inv, "-i", testdataDir(t, "ansible")+"/emulator.proxmox.yml", "--list")
	cmd.Env = append(ansibleEnv(t), append(auth, "PROXMOX_URL="+p.srv.URL(), "REQUESTS_CA_BUNDLE="+p.ca)...)
	var got struct {
		Meta struct {
			Hostvars map[string]map[string]any `json:"hostvars"`
		} `json:"_meta"`
		Groups map[string]any `json:"-"`
	}
	out := p.run(cmd)
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("ansible-inventory --list: %v\n%s", err, out)
	}
	var groups map[string]struct {
		Hosts []string `json:"hosts"`
	}
	if err := json.Unmarshal([]byte(out), &groups); err != nil {
		t.Fatal(err)
	}
	web, db := got.Meta.Hostvars["web1"], got.Meta.Hostvars["db1"]
	if web["proxmox_vmid"] != "101" && web["proxmox_vmid"] != float64(101) || web["proxmox_status"] != "running" ||
		web["proxmox_node"] != "pve" || web["proxmox_vmtype"] != "lxc" || web["proxmox_hostname"] != "web1" {
		t.Errorf("web1's facts: %v", web)
	}
	if tags, _ := web["proxmox_tags_parsed"].([]any); !slices.Equal(tags, []any{"prod", "web"}) {
		t.Errorf("web1's parsed tags %v, want [prod web] (PVE keeps tags sorted)", web["proxmox_tags_parsed"])
	}
	if db["proxmox_status"] != "stopped" || db["proxmox_memory"] != "512" && db["proxmox_memory"] != float64(512) {
		t.Errorf("db1's facts: %v", db)
	}
	for group, want := range map[string][]string{
		"proxmox_all_lxc": {"db1", "web1"}, "proxmox_all_running": {"web1"}, "proxmox_all_stopped": {"db1"},
		"proxmox_pve_lxc": {"db1", "web1"}, "proxmox_pool_apps": {"web1"}, "tag_web": {"web1"}, "tag_prod": {"web1"},
		"proxmox_nodes": {"pve"},
	} {
		if hosts := slices.Sorted(slices.Values(groups[group].Hosts)); !slices.Equal(hosts, want) {
			t.Errorf("group %s: %v, want %v", group, hosts, want)
		}
	}
}

// Issue 33: community.general.proxmox, the module, creates a CT (again:
// no change), starts it, stops another, clones a template and removes
// the clone, as a playbook on this host
// (testdata/thirdparty/ansible/ct.yml); the emulator's state shows it.
func TestThirdParty_ansibleModule(t *testing.T) {
	t.Parallel()
	play, err := exec.LookPath("ansible-playbook")
	if err != nil {
		testenv.Lack(t, testenv.Ansible, "ansible-playbook is not installed: apt-get install ansible to run community.general.proxmox against the emulator (.ci/run does)")
	}
	ansibleOfTheDay(t, 1)
	py := pythonWith(t, "proxmoxer")
	p := newThirdParty(t)
	p.create(p.root(), "103", url.Values{"hostname": {"base"}, "features": {"nesting=1"}})
	p.waitTemplate("103")
	cmd := exec.Command(play, "-i", "localhost,", testdataDir(t, "ansible")+"/ct.yml")
	cmd.Env = append(ansibleEnv(t), "REQUESTS_CA_BUNDLE="+p.ca, "ANSIBLE_PYTHON_INTERPRETER="+py)
	p.run(cmd)
	conf := p.config("110", false)
	if conf["hostname"] != "cache1" || conf["tags"] != "cache" || conf["memory"] != float64(128) || conf["rootfs"] != "local-lvm:vm-110-disk-0,size=2G" {
		t.Errorf("CT 110 after the playbook: %v", conf)
	}
	var st struct {
		Status string `json:"status"`
	}
	p.ok(p.root(), "GET", "/nodes/pve/lxc/110/status/current", nil, &st)
	if st.Status != "running" {
		t.Errorf("CT 110 is %s, the playbook started it", st.Status)
	}
	p.ok(p.root(), "GET", "/nodes/pve/lxc/101/status/current", nil, &st)
	if st.Status != "stopped" {
		t.Errorf("CT 101 is %s, the playbook stopped it", st.Status)
	}
	if r := p.do(p.root(), "GET", "/nodes/pve/lxc/111/config", nil); r.status != 500 {
		t.Errorf("CT 111, which the playbook cloned and removed: %d %s", r.status, r.data)
	}
	var tasks []map[string]any
	p.ok(p.root(), "GET", "/nodes/pve/tasks", url.Values{"vmid": {"111"}, "typefilter": {"vzdestroy"}}, &tasks)
	if len(tasks) != 1 || tasks[0]["status"] != "OK" {
		t.Errorf("CT 111's destroy tasks: %v", tasks)
	}
	var pool struct {
		Members []struct {
			ID string `json:"id"`
		} `json:"members"`
	}
	p.ok(p.root(), "GET", "/pools/apps", nil, &pool)
	if len(pool.Members) != 2 || pool.Members[1].ID != "lxc/110" {
		t.Errorf("pool apps: %v, want lxc/101 and lxc/110", pool.Members)
	}
}

// Issue 33: community.general's proxmox info modules (domains, storage,
// users, groups, tasks) and proxmox_snap read and snapshot the emulator as a
// default PVE install answers them (testdata/thirdparty/ansible/info.yml
// asserts what they return).
func TestThirdParty_ansibleInfo(t *testing.T) {
	t.Parallel()
	play, err := exec.LookPath("ansible-playbook")
	if err != nil {
		testenv.Lack(t, testenv.Ansible, "ansible-playbook is not installed: apt-get install ansible to run community.general's proxmox modules against the emulator (.ci/run does)")
	}
	ansibleOfTheDay(t, 2)
	py := pythonWith(t, "proxmoxer")
	p := newThirdParty(t)
	p.ok(p.root(), "POST", "/access/groups", url.Values{"groupid": {"ops"}, "comment": {"operators"}}, nil)
	cmd := exec.Command(play, "-i", "localhost,", testdataDir(t, "ansible")+"/info.yml")
	cmd.Env = append(ansibleEnv(t), "REQUESTS_CA_BUNDLE="+p.ca, "ANSIBLE_PYTHON_INTERPRETER="+py)
	p.run(cmd)
	var snaps []map[string]any
	p.ok(p.root(), "GET", "/nodes/pve/lxc/101/snapshot", nil, &snaps)
	if len(snaps) != 2 || snaps[0]["name"] != "before_upgrade" || snaps[0]["description"] != "taken by Ansible\n" { // a comment line in the config
		t.Errorf("CT 101's snapshots after the playbook: %v", snaps)
	}
}

// ansibleEnv keeps Ansible's own files in the test's temp dir, and makes
// an inventory source it cannot parse an error rather than a warning and
// an empty inventory.
func ansibleEnv(t *testing.T) []string {
	home := t.TempDir()
	return []string{"ANSIBLE_HOME=" + home, "ANSIBLE_REMOTE_TEMP=" + home + "/remote", "ANSIBLE_LOCAL_TEMP=" + home + "/tmp",
		"ANSIBLE_INVENTORY_UNPARSED_FAILED=true", "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED=true",
		"ANSIBLE_NOCOLOR=1", "ANSIBLE_DEPRECATION_WARNINGS=false"}
}
