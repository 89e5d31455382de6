package sim

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

// Issue 34: bpg's Terraform provider (proxmox_virtual_environment_vm,
// testdata/thirdparty/bpg/main.tf) applies a basic VM to the emulator,
// then plans nothing (a perpetual diff is a config or status answer that
// is not qemu-server's), raises its memory and destroys it. Terraform
// and the provider are the binaries CORRAL_TEST_TERRAFORM and
// CORRAL_TEST_BPG_PROVIDER name (docs/emulator.md, Third-party clients,
// says how to build them); the provider runs through a dev_overrides CLI
// configuration, so no registry is contacted.
func TestThirdParty_bpgVM(t *testing.T) {
	t.Parallel()
	tf, prov := bpgBinaries(t)
	p := newThirdParty(t)
	dir, work, rc := p.bpgWorkdir(t, prov)
	terraform := func(memory string, args ...string) (string, error) {
		address := map[string]string{"1024": "192.0.2.30/24", "2048": "192.0.2.31/24"}[memory]
		cmd := exec.Command(tf, append(args, "-input=false", "-no-color")...)
		cmd.Dir = work
		// The provider checks the emulator's certificate (SSL_CERT_FILE:
		// Go's roots on Linux) and gets root's token by environment only.
		cmd.Env = []string{"TF_CLI_CONFIG_FILE=" + rc, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "TF_DATA_DIR=" + filepath.Join(dir, "data"),
			"SSL_CERT_FILE=" + p.ca, "PROXMOX_VE_ENDPOINT=" + p.srv.URL() + "/", "PROXMOX_VE_API_TOKEN=" + p.user + "!" + p.tokenID + "=" + p.secret,
			"TF_VAR_memory=" + memory, "TF_VAR_address=" + address, "TF_VAR_ssh_key=" + vmSSHKey, "HOME=" + dir}
		return p.runErr(cmd)
	}
	step := func(memory string, args ...string) string {
		t.Helper()
		out, err := terraform(memory, args...)
		if err != nil {
			t.Fatalf("terraform %s: %v\nthe emulator's tasks that did not end OK:\n%s", args[0], err, p.failedTasks())
		}
		return out
	}
	step("1024", "apply", "-auto-approve")
	p.checkBPGVM(t, "1024")
	p.checkImportedDisk(t)
	noChange := func(memory string) {
		t.Helper()
		if out, err := terraform(memory, "plan", "-detailed-exitcode"); err != nil {
			var exit *exec.ExitError
			if errors.As(err, &exit) && exit.ExitCode() == 2 {
				t.Fatalf("a plan right after the apply is not empty (a config or status answer the provider reads back differently):\n%s", out)
			}
			t.Fatalf("terraform plan: %v", err)
		}
	}
	noChange("1024")
	step("2048", "apply", "-auto-approve")
	p.checkBPGVM(t, "2048")
	noChange("2048")
	step("2048", "destroy", "-auto-approve")
	if r := p.do(p.root(), "GET", "/nodes/pve/qemu/300/config", nil); r.status != 500 {
		t.Errorf("VM 300 after terraform destroy: %d %s", r.status, r.data)
	}
	if files := p.volumeFiles("300"); len(files) != 0 {
		t.Errorf("VM 300's volumes after terraform destroy: %v", files)
	}
}

// bpgWorkdir offers the image main.tf imports and lays out Terraform's
// directory: the provider behind a dev_overrides CLI configuration (rc)
// and main.tf in work.
func (p *thirdParty) bpgWorkdir(t *testing.T, prov string) (dir, work, rc string) {
	t.Helper()
	dir = t.TempDir()
	// The image bpg's disk imports (import_from): its bytes, not a
	// bootable system; the state-only runtime boots nothing.
	img := filepath.Join(dir, "bpg-test.qcow2")
	if err := os.WriteFile(img, append([]byte("QFI\xfb"), make([]byte, 1<<20)...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.srv.cluster.OfferImportVolume("local", "bpg-test.qcow2", img); err != nil {
		t.Fatal(err)
	}
	plugins := filepath.Join(dir, "plugins")
	if err := os.MkdirAll(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(prov, filepath.Join(plugins, "terraform-provider-proxmox")); err != nil {
		t.Fatal(err)
	}
	rc = filepath.Join(dir, "terraform.rc")
	if err := os.WriteFile(rc, []byte("provider_installation {\n  dev_overrides {\n    \"bpg/proxmox\" = \""+plugins+"\"\n  }\n  direct {}\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	main, err := os.ReadFile(filepath.Join(testdataDir(t, "bpg"), "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	work = filepath.Join(dir, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "main.tf"), main, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, work, rc
}

// checkImportedDisk checks that VM 300's disk holds the image main.tf
// imports, grown to its 4 GiB.
func (p *thirdParty) checkImportedDisk(t *testing.T) {
	t.Helper()
	disk := filepath.Join(p.dir, "data", "pve", "local-lvm", "vm-300-disk-0")
	if f, err := os.Open(disk); err != nil {
		t.Errorf("VM 300's disk: %v", err)
	} else {
		head := make([]byte, 4)
		_, err := f.Read(head)
		fi, _ := f.Stat()
		f.Close()
		if err != nil || string(head) != "QFI\xfb" || fi.Size() != 4<<30 {
			t.Errorf("VM 300's disk starts %q (%v), %d bytes: want the imported image grown to 4 GiB", head, err, fi.Size())
		}
	}
}

// checkBPGVM checks VM 300's config as main.tf asks for it, running.
func (p *thirdParty) checkBPGVM(t *testing.T, memory string) {
	t.Helper()
	var conf map[string]any
	p.ok(p.root(), "GET", "/nodes/pve/qemu/300/config", nil, &conf)
	for key, want := range map[string]any{
		"name": "tf-vm", "memory": memory, "cores": float64(2), "ciuser": "ops", "tags": "corral;test",
		"ipconfig0": map[string]any{"1024": "gw=192.0.2.1,ip=192.0.2.30/24", "2048": "gw=192.0.2.1,ip=192.0.2.31/24"}[memory], "ostype": "l26", "balloon": float64(512), "machine": "q35", "serial0": "socket",
		// bpg sends these property strings with their keys, and
		// qemu-server keeps a value as it was sent.
		"cpu": "cputype=x86-64-v2-AES", "vga": "memory=16,type=serial0",
	} {
		if conf[key] != want {
			t.Errorf("VM 300's %s: %#v, want %#v", key, conf[key], want)
		}
	}
	if scsi0, _ := conf["scsi0"].(string); !strings.HasPrefix(scsi0, "local-lvm:vm-300-disk-0,") || !strings.Contains(scsi0, "size=4G") {
		t.Errorf("VM 300's scsi0: %q", scsi0)
	}
	if efi, _ := conf["efidisk0"].(string); conf["bios"] != "ovmf" || !strings.HasPrefix(efi, "local-lvm:vm-300-disk-") || !strings.Contains(efi, "efitype=4m") || !strings.Contains(efi, "pre-enrolled-keys=1") || !strings.Contains(efi, "size=4M") {
		t.Errorf("VM 300's bios %v, efidisk0 %q", conf["bios"], efi)
	}
	if tpm, _ := conf["tpmstate0"].(string); !strings.HasPrefix(tpm, "local-lvm:vm-300-disk-") || !strings.Contains(tpm, "version=v2.0") || !strings.Contains(tpm, "size=4M") {
		t.Errorf("VM 300's tpmstate0: %q", tpm)
	}
	if net1, _ := conf["net1"].(string); !strings.HasPrefix(net1, "virtio=BC:24:11:") || !strings.HasSuffix(net1, ",bridge=vmbr0,firewall=1,mtu=1400,tag=20") {
		t.Errorf("VM 300's net1: %q", net1)
	}
	if keys, _ := conf["sshkeys"].(string); !strings.Contains(keys, "AAAAC3NzaC1lZDI1NTE5AAAAIPaSlPV5i9PXb8ewVqg4aX2bz1IIqbTKWFY8kzs6HlKT") {
		t.Errorf("VM 300's sshkeys: %q", keys)
	}
	// bpg reboots the VM after an update that left changes pending.
	var pend []map[string]any
	p.ok(p.root(), "GET", "/nodes/pve/qemu/300/pending", nil, &pend)
	for _, e := range pend {
		if _, ok := e["pending"]; ok || e["delete"] != nil {
			t.Errorf("VM 300 after terraform apply has a pending change: %v", e)
		}
	}
	var st struct {
		Status string `json:"status"`
	}
	p.ok(p.root(), "GET", "/nodes/pve/qemu/300/status/current", nil, &st)
	if st.Status != "running" {
		t.Errorf("VM 300 is %s, terraform started it", st.Status)
	}
}

// bpgBinaries are the terraform and provider binaries the environment
// names, or the test's skip (its failure under CORRAL_REQUIRE_BPG).
func bpgBinaries(t *testing.T) (tf, prov string) {
	tf, prov = os.Getenv("CORRAL_TEST_TERRAFORM"), os.Getenv("CORRAL_TEST_BPG_PROVIDER")
	for _, bin := range []string{tf, prov} {
		if fi, err := os.Stat(bin); bin == "" || err != nil || fi.Mode()&0o111 == 0 {
			testenv.Lack(t, testenv.BPG, "set CORRAL_TEST_TERRAFORM and CORRAL_TEST_BPG_PROVIDER to the terraform and terraform-provider-proxmox binaries to run bpg's provider against the emulator (docs/emulator.md, Third-party clients, says how to build them)")
		}
	}
	abs, err := filepath.Abs(prov)
	if err != nil {
		t.Fatal(err)
	}
	return tf, abs
}
