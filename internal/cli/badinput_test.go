package cli

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testutil/secretscan"
)

// The bad-input table: broken manifests and bad flag combinations, each
// run through the real command line, each with its exit code and the
// exact message (or, where the text holds a port or temp path, a precise
// part of it with FILE:LINE:COL). Nothing here may leak a secret.

const tmpl = "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst"

// goodApp is a valid manifest the flag cases start from.
const goodApp = `apps:
  - name: notes
    template: ` + tmpl + `
    memory: 512
    rootfs:
      size: 4G
    volumes:
      - name: data
        size: 1G
        mount: /srv/data
`

type badCase struct {
	name string
	// manifest, when set, is written to FILE; "{{DIR}}" in it becomes the
	// test's temp directory.
	manifest string
	// args are corral's arguments; FILE is the manifest's path, CONN the
	// connection flags of a live emulator.
	args []string
	env  map[string]string
	code int
	// stderr is the whole of stderr, with <file> for the manifest's path,
	// <dir> for its directory, <addr> for the endpoint's host:port and
	// <fp> for the emulator's certificate fingerprint.
	stderr string
	// stdout, when set, is a line stdout must hold; else stdout is empty.
	stdout string
}

func badCases() []badCase {
	return []badCase{
		// --- manifests ---
		{name: "unknown-key", manifest: strings.Replace(goodApp, "memory: 512", "memroy: 512", 1), args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:4:5: apps[0].memroy: unknown key; did you mean memory? (allowed: name, node, vmid, template, unprivileged, cores, memory, swap, rootfs, features, network, tags, onboot, description, password, ssh, volumes, provision, health, backup, snapshotBeforeChange)` + "\n"},
		{name: "unknown-top-level-key", manifest: goodApp + "version: 2\n", args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:11:1: version: unknown key (allowed: project, placement, apps)` + "\n"},
		{name: "cores-not-integer", manifest: strings.Replace(goodApp, "memory: 512", "memory: 512\n    cores: many", 1), args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:5:12: apps[0].cores: must be an integer, got "many"` + "\n"},
		{name: "memory-with-unit", manifest: strings.Replace(goodApp, "memory: 512", "memory: 4G", 1), args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:4:13: apps[0].memory: must be an integer, got "4G"` + "\n"},
		{name: "onboot-yes", manifest: strings.Replace(goodApp, "memory: 512", "memory: 512\n    onboot: yes", 1), args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:5:13: apps[0].onboot: must be true or false, got "yes"` + "\n"},
		{name: "name-list", manifest: strings.Replace(goodApp, "name: notes", "name: [notes]", 1), args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:2:11: apps[0].name: must be a string, got a list` + "\n"},
		{name: "rootfs-size-GB", manifest: strings.Replace(goodApp, "size: 4G", "size: 20GB", 1), args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:6:13: apps[0].rootfs.size: invalid size "20GB" (allowed: a whole number of MiB written with unit M, G or T, e.g. 512M, 10G, 1.5T)` + "\n"},
		{name: "rootfs-size-no-unit", manifest: strings.Replace(goodApp, "size: 4G", "size: 20", 1), args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:6:13: apps[0].rootfs.size: size 20 has no unit (allowed: a whole number of MiB written with unit M, G or T, e.g. 512M, 10G, 1.5T)` + "\n"},
		{name: "volume-size-zero", manifest: strings.Replace(goodApp, "size: 1G", "size: 0G", 1), args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:9:15: apps[0].volumes[0].size: invalid size "0G": must be more than 0 (allowed: a whole number of MiB written with unit M, G or T, e.g. 512M, 10G, 1.5T)` + "\n"},
		{name: "volume-size-fraction", manifest: strings.Replace(goodApp, "size: 1G", "size: 0.1G", 1), args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:9:15: apps[0].volumes[0].size: invalid size "0.1G": must be a whole number of MiB (allowed: a whole number of MiB written with unit M, G or T, e.g. 512M, 10G, 1.5T)` + "\n"},
		{name: "duplicate-app", manifest: goodApp + "  - name: notes\n    template: " + tmpl + "\n", args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:11:11: apps[1].name: duplicate app name (first at line 2)` + "\n"},
		{name: "duplicate-volume-name", manifest: goodApp + "      - name: data\n        size: 1G\n        mount: /srv/other\n", args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:11:15: apps[0].volumes[1].name: duplicate volume name (first at line 8)` + "\n"},
		{name: "duplicate-mount", manifest: goodApp + "      - name: more\n        size: 1G\n        mount: /srv/data\n", args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:13:16: apps[0].volumes[1].mount: mount path is already used by apps[0].volumes[0]` + "\n"},
		{name: "duplicate-vmid", manifest: "apps:\n  - name: a\n    vmid: 105\n    template: " + tmpl + "\n  - name: b\n    vmid: 105\n    template: " + tmpl + "\n", args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:6:11: apps[1].vmid: vmid 105 is already used by apps[0]` + "\n"},
		{name: "bad-ip", manifest: goodApp + "    network:\n      ip: 192.168.1.300/24\n", args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:12:11: apps[0].network.ip: invalid value "192.168.1.300/24": not dhcp or an address with prefix length (allowed: dhcp or an IPv4 address with prefix length, e.g. 192.168.1.50/24)` + "\n"},
		{name: "ip-without-prefix", manifest: goodApp + "    network:\n      ip: 192.168.1.50\n", args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:12:11: apps[0].network.ip: invalid value "192.168.1.50": not dhcp or an address with prefix length (allowed: dhcp or an IPv4 address with prefix length, e.g. 192.168.1.50/24)` + "\n"},
		{name: "gateway-with-dhcp", manifest: goodApp + "    network:\n      ip: dhcp\n      gateway: 192.168.1.1\n", args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:13:16: apps[0].network.gateway: a gateway needs a static ip; with dhcp the gateway comes from DHCP` + "\n"},
		{name: "bad-gateway", manifest: goodApp + "    network:\n      ip: 192.168.1.50/24\n      gateway: 192.168.1\n", args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:13:16: apps[0].network.gateway: invalid value "192.168.1": not an IPv4 address (allowed: an IPv4 address, e.g. 192.168.1.1)` + "\n"},
		{name: "root-only-feature", manifest: "apps:\n  - name: a\n    vmid: 105\n    template: " + tmpl + "\n    features: {nesting: true, keyctl: true}\n", args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:5:39: apps[0].features.keyctl: only root@pam can set this feature flag, and corral works with an API token; leave it out and ask an administrator to run: pct set 105 -features nesting=1,keyctl=1 (allowed: nesting)` + "\n"},
		{name: "root-only-feature-no-vmid", manifest: "apps:\n  - name: a\n    template: " + tmpl + "\n    features:\n      fuse: true\n", args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:5:13: apps[0].features.fuse: only root@pam can set this feature flag, and corral works with an API token; leave it out and ask an administrator to run: pct set <vmid> -features nesting=0,fuse=1 (allowed: nesting)` + "\n"},
		{name: "env-missing", manifest: goodApp + "    password: ${env:CORRAL_TEST_NO_SUCH_VAR}\n", args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:11:15: apps[0].password: environment variable CORRAL_TEST_NO_SUCH_VAR is not set` + "\n"},
		{name: "file-missing", manifest: goodApp + "    password: ${file:{{DIR}}/no-such-file}\n", args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:11:15: apps[0].password: cannot read ${file:<dir>/no-such-file}: stat <dir>/no-such-file: no such file or directory` + "\n"},
		{name: "file-is-directory", manifest: goodApp + "    password: ${file:{{DIR}}}\n", args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:11:15: apps[0].password: cannot read ${file:<dir>}: <dir> is not a regular file (a directory): corral reads only regular files` + "\n"},
		{name: "template-iso", manifest: strings.Replace(goodApp, tmpl, "local:iso/debian-12.iso", 1), args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:3:15: apps[0].template: invalid value "local:iso/debian-12.iso" (allowed: STORAGE:vztmpl/FILE or FILE, where FILE ends in .tar.gz, .tar.xz, .tar.zst or .tar.bz2)` + "\n"},
		{name: "adopt-bind-mount", manifest: goodApp + "      - name: old\n        mount: /srv/old\n        adopt: /mnt/old\n", args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:13:16: apps[0].volumes[1].adopt: invalid value "/mnt/old": a host path is a bind mount, which only root@pam may set; corral works with an API token, so adopt a storage volume (allowed: a volume ID STORAGE:NAME, e.g. local-lvm:vm-999-disk-1)` + "\n"},
		{name: "yaml-syntax", manifest: "apps:\n  - name: a\n\ttemplate: x\n", args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:3:1: invalid YAML: found a tab character that violates indentation` + "\n"},
		{name: "apps-empty", manifest: "apps: []\n", args: []string{"validate", "-f", "FILE"}, code: 1, stderr: `Error: <file>:1:7: apps: needs at least 1 item` + "\n"},
		{name: "plan-bad-manifest-before-connecting", manifest: strings.Replace(goodApp, "memory: 512", "memory: lots", 1), args: []string{"plan", "-f", "FILE", "--endpoint", "https://127.0.0.1:1"}, code: 1, stderr: `Error: <file>:4:13: apps[0].memory: must be an integer, got "lots"` + "\n"},
		// --- flags ---
		{name: "validate-output-yaml", manifest: goodApp, args: []string{"validate", "-f", "FILE", "-o", "yaml"}, code: 1, stderr: `Error: --output "yaml": want text or json` + "\n"},
		{name: "plan-output-yaml", manifest: goodApp, args: []string{"plan", "-f", "FILE", "-o", "yaml", "CONN"}, code: 1, stderr: `Error: --output "yaml": want text or json` + "\n"},
		{name: "missing-manifest", args: []string{"validate", "-f", "{{DIR}}/corral.yaml"}, code: 1, stderr: `Error: <file> not found: pass -f FILE, or start from examples/quickstart/corral.yaml` + "\n"},
		{name: "log-level", manifest: goodApp, args: []string{"--log-level", "loud", "validate", "-f", "FILE"}, code: 1, stderr: `Error: --log-level "loud": want debug, info, warn or error` + "\n"},
		{name: "unknown-flag", manifest: goodApp, args: []string{"plan", "-f", "FILE", "--frobnicate"}, code: 1, stderr: `Error: unknown flag: --frobnicate` + "\n"},
		{name: "unknown-verb", args: []string{"deploy"}, code: 1, stderr: `Error: unknown command "deploy" for "corral"` + "\n"},
		{name: "validate-extra-arg", manifest: goodApp, args: []string{"validate", "-f", "FILE", "notes"}, code: 1, stderr: `Error: unknown command "notes" for "corral validate"` + "\n"},
		{name: "no-token", manifest: goodApp, args: []string{"plan", "-f", "FILE", "--endpoint", "https://127.0.0.1:8006"}, code: 1, stderr: `Error: no API token: set PROXMOX_VE_API_TOKEN (or --api-token) to user@realm!tokenid=secret` + "\n"},
		{name: "bad-token-format", manifest: goodApp, args: []string{"plan", "-f", "FILE", "--endpoint", "https://127.0.0.1:8006", "--api-token", "corral-op-secret"}, code: 1, stderr: `Error: invalid API token: no '=secret' after the token id; want user@realm!tokenid=secret` + "\n"},
		{name: "bad-endpoint", manifest: goodApp, args: []string{"plan", "-f", "FILE", "--endpoint", "pve:8006", "--api-token", "corral@pve!op=0d9e7a2c-5f1b-4c3e-9a8d-112233445566"}, code: 1, stderr: `Error: endpoint "pve:8006": want a URL like https://pve.example.com:8006` + "\n"},
		{name: "unreachable-endpoint", manifest: goodApp, args: []string{"plan", "-f", "FILE", "--endpoint", "https://CLOSED", "--api-token", "corral@pve!op=0d9e7a2c-5f1b-4c3e-9a8d-112233445566", "--fingerprint", strings.Repeat("AB", 32)}, code: 1, stderr: `Error: list nodes: GET https://<addr>/api2/json/nodes: dial tcp <addr>: connect: connection refused` + "\n"},
		{name: "bad-fingerprint-format", manifest: goodApp, args: []string{"plan", "-f", "FILE", "--endpoint", "https://127.0.0.1:8006", "--api-token", "corral@pve!op=0d9e7a2c-5f1b-4c3e-9a8d-112233445566", "--fingerprint", "AB:CD"}, code: 1, stderr: `Error: fingerprint "AB:CD": want a SHA-256 fingerprint, 64 hex digits optionally separated by colons (pvenode cert info shows it)` + "\n"},
		{name: "wrong-fingerprint", manifest: goodApp, args: []string{"plan", "-f", "FILE", "WRONGFP"}, code: 1, stderr: `Error: list nodes: GET https://<addr>/api2/json/nodes: server certificate fingerprint <fp> does not match the pinned AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB; if the host's certificate was replaced on purpose, pin the new one with --fingerprint <fp> (or PROXMOX_VE_FINGERPRINT)` + "\n"},
		{name: "wrong-token-secret", manifest: goodApp, args: []string{"plan", "-f", "FILE", "WRONGSECRET"}, code: 1, stderr: `Error: list nodes: GET /nodes: 401 authentication failure: PVE does not accept the API token corral@pve!corral; check its id and secret (PROXMOX_VE_API_TOKEN or --api-token) and that the token still exists and has not expired` + "\n"},
		{name: "apply-without-approval", manifest: goodApp, args: []string{"apply", "-f", "FILE", "CONN"}, code: 1, stderr: "Error: refusing to change anything without confirmation: stdin is not a terminal; review `corral plan` and pass --auto-approve" + "\n", stdout: "Plan: 1 to create, 1 keeper(s) to create or repair. Retained volumes are kept in every case."},
		{name: "destroy-unknown-app", manifest: "project: demo\n" + goodApp, args: []string{"destroy", "-f", "FILE", "--auto-approve", "nosuchapp", "CONN"}, code: 1, stderr: `Error: app "nosuchapp" is not in <file>, and no container of project demo (tag corral-project-demo) carries it` + "\n"},
		// Not an error: nothing to destroy needs no approval, and says so.
		{name: "destroy-nothing", manifest: goodApp, args: []string{"destroy", "-f", "FILE", "CONN"}, code: 0, stderr: "", stdout: "  app notes: no container; no changes"},
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestBadInput(t *testing.T) {
	for _, k := range []string{"PROXMOX_VE_ENDPOINT", "PROXMOX_VE_API_TOKEN", "PROXMOX_VE_FINGERPRINT", "PROXMOX_VE_CA_FILE", "PROXMOX_VE_INSECURE", "CORRAL_LOG"} {
		t.Setenv(k, "")
	}
	c := newCluster(t)
	var secrets secretscan.Set
	secrets.AddToken(t, "operator token secret", c.srv.Credentials().OperatorToken)
	token := c.srv.Credentials().OperatorToken
	wrongToken := token[:strings.Index(token, "=")+1] + "00000000-0000-0000-0000-000000000000"
	closed := closedPort(t)
	host := strings.TrimPrefix(c.srv.URL(), "https://")
	for _, tc := range badCases() {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "corral.yaml")
			if tc.manifest != "" {
				if err := os.WriteFile(file, []byte(strings.ReplaceAll(tc.manifest, "{{DIR}}", dir)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var args []string
			for _, a := range tc.args {
				switch a {
				case "FILE":
					args = append(args, file)
				case "CONN":
					args = append(args, c.connArgs()...)
				case "WRONGFP":
					args = append(args, "--endpoint", c.srv.URL(), "--api-token", token, "--fingerprint", strings.Repeat("AB:", 31)+"AB")
				case "WRONGSECRET":
					args = append(args, "--endpoint", c.srv.URL(), "--api-token", wrongToken, "--fingerprint", c.srv.Fingerprint())
				default:
					a = strings.ReplaceAll(a, "{{DIR}}", dir)
					args = append(args, strings.ReplaceAll(a, "CLOSED", closed))
				}
			}
			var out, errb bytes.Buffer
			code := Run(context.Background(), args, strings.NewReader(""), &out, &errb)
			secrets.Check(t, "stdout", out.String())
			secrets.Check(t, "stderr", errb.String())
			norm := strings.NewReplacer(file, "<file>", dir, "<dir>", host, "<addr>", closed, "<addr>", c.srv.Fingerprint(), "<fp>")
			stderr := norm.Replace(errb.String())
			if code != tc.code || stderr != tc.stderr {
				t.Errorf("corral %s\nexit %d, want %d\nstderr:\n%s\nwant:\n%s", strings.Join(tc.args, " "), code, tc.code, stderr, tc.stderr)
			}
			stdout := norm.Replace(out.String())
			switch {
			case tc.stdout == "" && stdout != "":
				t.Errorf("stdout should be empty:\n%s", stdout)
			case tc.stdout != "" && !slices.Contains(strings.Split(stdout, "\n"), tc.stdout):
				t.Errorf("stdout lacks the line %q:\n%s", tc.stdout, stdout)
			}
		})
	}
	if n := len(badCases()); n < 30 {
		t.Errorf("only %d cases; the table promises at least 30", n)
	}
}
