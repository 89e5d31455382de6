package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Peer is the established tool the issue compares corral with: OpenTofu
// driving a Terraform provider for Proxmox (bpg/proxmox), both binaries
// built or downloaded by the user (docs/benchmarks.md says how). corral
// ships neither.
type Peer struct {
	// Tofu is the tofu binary; Provider the terraform-provider-proxmox
	// binary, used through a dev_overrides CLI configuration so no
	// registry is contacted.
	Tofu, Provider string
}

// peerConfig renders the same workload as workload(): n unprivileged
// containers with corral's defaults (1 core, 512 MiB, 8 GiB rootfs on
// local-lvm, DHCP on vmbr0) and one 1 GiB mount point each, started.
//
// Both workloads set nesting, as PVE's web UI does for an unprivileged
// CT: without it PVE ends the create task "WARNINGS: 1" on a systemd
// template ("Systemd N detected. You may need to enable nesting."), which
// corral takes as success and bpg v0.80.0 as a failure (its issue 2700).
//
// Each container also gets a static IPv6 address. The provider reads a
// started container's interfaces until one has a global unicast address,
// for up to 10 s on every create and refresh; the emulator gives a DHCP
// interface a loopback address (127.x, so that guests stay on loopback),
// which never ends that wait, so each refresh would cost the peer 10 s it
// does not spend on a real network. A static address is reported as
// configured and ends the wait at the first read, and costs no task.
func peerConfig(n int) string {
	return fmt.Sprintf(`terraform {
  required_providers {
    proxmox = { source = "bpg/proxmox" }
  }
}

# endpoint, api_token and insecure come from PROXMOX_VE_* in the environment.
provider "proxmox" {}

resource "proxmox_virtual_environment_container" "app" {
  count        = %d
  node_name    = "pve"
  unprivileged = true
  started      = true
  operating_system {
    template_file_id = "local:vztmpl/%s"
    type             = "debian"
  }
  features {
    nesting = true
  }
  cpu {
    cores = 1
  }
  memory {
    dedicated = 512
    swap      = 512
  }
  disk {
    datastore_id = "local-lvm"
    size         = 8
  }
  mount_point {
    volume = "local-lvm"
    size   = "1G"
    path   = "/srv/data"
  }
  network_interface {
    name   = "eth0"
    bridge = "vmbr0"
  }
  initialization {
    hostname = "app${count.index}"
    ip_config {
      ipv4 {
        address = "dhcp"
      }
      # See the note on peerConfig: ends the provider's wait for an address.
      ipv6 {
        address = format("fd00::%%x/64", count.index + 1)
      }
    }
  }
}
`, n, debian12)
}

// runPeer runs the workload through tofu: apply, no-op plan, no-op apply,
// destroy, on the emulator corral has just left empty.
func runPeer(ctx context.Context, o Options, p *simProc, dir string, n int) (*ToolRun, error) {
	tf := filepath.Join(dir, "tofu")
	plugins := filepath.Join(tf, "plugins")
	if err := os.MkdirAll(plugins, 0o755); err != nil {
		return nil, err
	}
	prov, err := filepath.Abs(o.Peer.Provider)
	if err != nil {
		return nil, err
	}
	link := filepath.Join(plugins, "terraform-provider-proxmox")
	os.Remove(link)
	if err := os.Symlink(prov, link); err != nil {
		return nil, err
	}
	rc := filepath.Join(tf, "tofu.rc")
	if err := os.WriteFile(rc, []byte(fmt.Sprintf("provider_installation {\n  dev_overrides {\n    \"bpg/proxmox\" = %q\n  }\n  direct {}\n}\n", plugins)), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tf, "main.tf"), []byte(peerConfig(n)), 0o644); err != nil {
		return nil, err
	}
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "PROXMOX_VE_") || strings.HasPrefix(k, "TF_") {
			continue
		}
		env = append(env, kv)
	}
	// The provider gets root's token: its privilege needs are its own,
	// and the comparison is about time and requests, not permissions.
	env = append(env, "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1",
		"PROXMOX_VE_ENDPOINT="+p.Endpoint()+"/", "PROXMOX_VE_API_TOKEN="+p.env["PVE_ROOT_TOKEN"], "PROXMOX_VE_INSECURE=true")
	par := "-parallelism=" + strconv.Itoa(o.Parallelism)
	run := &ToolRun{Tool: "tofu", Apps: n, Nodes: 1, TimeScale: o.TimeScale, Parallelism: o.Parallelism}
	steps := []struct {
		name string
		args []string
	}{
		{"apply", []string{"apply", "-auto-approve", "-input=false", "-no-color", par}},
		{"noop-plan", []string{"plan", "-detailed-exitcode", "-input=false", "-no-color", par}},
		{"noop-apply", []string{"apply", "-auto-approve", "-input=false", "-no-color", par}},
		{"destroy", []string{"destroy", "-auto-approve", "-input=false", "-no-color", par}},
	}
	for _, s := range steps {
		say(o, fmt.Sprintf("tofu %s, %d apps, time scale %g", s.name, n, o.TimeScale))
		st, err := measure(ctx, p, s.name, n, o.TimeScale, 0, func() error {
			_, err := runLogged(ctx, dir, "tofu-"+s.name, env, tf, o.Peer.Tofu, s.args...)
			return err
		})
		if err != nil {
			return nil, err
		}
		run.Steps = append(run.Steps, *st)
	}
	return run, nil
}
