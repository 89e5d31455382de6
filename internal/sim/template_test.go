package sim

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

// Issue 33: POST /nodes/{node}/lxc/{vmid}/template converts a stopped CT
// as API2/LXC.pm template does: null answer, a vztemplate task, base
// volumes (vm- → base- on LVM-thin) and template: 1; a template, a
// running CT and one with snapshots are refused.
func TestTemplate_convert(t *testing.T) {
	t.Parallel()
	eachVersion(t, func(t *testing.T, k *e2e, v string) {
		root := k.root()
		k.create(root, "101", url.Values{"mp0": {"local-lvm:1,mp=/data"}})
		r := k.do(root, http.MethodPost, "/nodes/pve/lxc/101/template", nil)
		if r.status != 200 || string(r.data) != "null" {
			t.Fatalf("POST template: %d %s %q, PVE answers null", r.status, r.data, r.msg)
		}
		var conf map[string]any
		testenv.WaitFor(t, "template: 1", func() bool {
			conf = k.config("101", false)
			return conf["template"] == float64(1)
		})
		if conf["rootfs"] != "local-lvm:base-101-disk-0,size=1G" || !strings.HasPrefix(conf["mp0"].(string), "local-lvm:base-101-disk-1,") {
			t.Errorf("template's volumes: rootfs %v mp0 %v", conf["rootfs"], conf["mp0"])
		}
		// The task list shows finished tasks (PVE's source=archive): the
		// config may say template: 1 a moment before the task ends.
		var tasks []e2eTask
		testenv.WaitFor(t, "the vztemplate task in the task list", func() bool {
			k.ok(root, http.MethodGet, "/nodes/pve/tasks", url.Values{"typefilter": {"vztemplate"}}, &tasks)
			return len(tasks) > 0
		})
		if len(tasks) != 1 || tasks[0].ID != "101" {
			t.Fatalf("vztemplate tasks: %+v", tasks)
		}
		st := k.wait(root, tasks[0].UPID)
		if st.ExitStatus != "OK" || !st.has(`  Renamed "vm-101-disk-0" to "base-101-disk-0" in volume group "pve"`) {
			t.Errorf("vztemplate task: %s\n%s", st.ExitStatus, strings.Join(st.log, "\n"))
		}
		var content []map[string]any
		k.ok(root, http.MethodGet, "/nodes/pve/storage/local-lvm/content", nil, &content)
		for _, c := range content {
			if c["volid"] == "local-lvm:vm-101-disk-0" {
				t.Errorf("the old volume is still listed: %v", content)
			}
		}
		want(t, "template again", k.do(root, http.MethodPost, "/nodes/pve/lxc/101/template", nil), 500, "you can't convert a template to a template\n", nil)

		k.create(root, "102", url.Values{"start": {"1"}})
		want(t, "running", k.do(root, http.MethodPost, "/nodes/pve/lxc/102/template", nil), 500, "you can't convert a CT to template if the CT is running\n", nil)
		k.mustOK(root, http.MethodPost, "/nodes/pve/lxc/102/status/stop", nil)
		k.mustOK(root, http.MethodPost, "/nodes/pve/lxc/102/snapshot", url.Values{"snapname": {"s1"}})
		want(t, "snapshots", k.do(root, http.MethodPost, "/nodes/pve/lxc/102/template", nil), 500, "unable to create template, because CT contains snapshots\n", nil)

		_, nobody := k.newUserToken("nobody@pve", "tok", false)
		want(t, "no VM.Allocate", k.do(nobody, http.MethodPost, "/nodes/pve/lxc/102/template", nil), 403, "Permission check failed (/vms/102, VM.Allocate)\n", nil)
		// The template's base volumes go with it.
		k.mustOK(root, http.MethodDelete, "/nodes/pve/lxc/101", nil)
		k.ok(root, http.MethodGet, "/nodes/pve/storage/local-lvm/content", url.Values{"vmid": {"101"}}, &content)
		if len(content) != 0 {
			t.Errorf("after destroying the template: %v", content)
		}
	})
}
