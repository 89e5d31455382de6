package manifest

import (
	"strconv"

	"github.com/corralhq/corral/internal/lazyre"
)

// kind is the YAML shape a field takes.
type kind int

const (
	kindString   kind = iota // a YAML string, or a ${…} reference
	kindInt                  // a YAML integer
	kindBool                 // true or false
	kindSize                 // a string like 10G (see ParseSize)
	kindObject               // a mapping with the keys in fields
	kindList                 // a sequence of items
	kindDuration             // a string like 30s, 5m or 1h30m (time.ParseDuration), more than 0
	kindMode                 // an octal file mode like "0644" (see parseMode)
)

// field describes one manifest key. The table below is the single source
// of truth: decode.go validates against it, build.go takes defaults from
// it, and schema.go prints it as a JSON Schema.
type field struct {
	key      string
	kind     kind
	doc      string
	def      any // default: string, int64 or bool; nil for none
	required bool

	// Strings (and each string of a list of strings).
	pattern   string              // anchored regexp, valid in RE2 and ECMA-262
	allowed   string              // what is accepted, in words, for diagnostics
	enum      []string            // the only accepted values
	maxLen    int                 // in characters; 0 for no limit
	minLen    int                 // in characters
	check     func(string) string // semantic check before pattern: problem or ""
	forbid    string              // regexp the value must not match (schema: "not")
	forbidMsg string              // what is wrong when forbid matches
	sensitive bool                // a secret even when written literally
	public    bool                // not a secret even when read through ${…}
	// live marks an output's value: it may name apps' live facts
	// (${app:APP.FACT}), which corral output reads (ExpandOutput).
	live bool
	// guest marks a string that goes into a guest as it is (a run
	// script, a file's content, an envFile value): it may name apps'
	// facts (${app:APP.FACT}, GuestFacts), which plan and apply read
	// from the cluster (plan.GuestWork.WithFacts).
	guest bool
	// deferrable marks a value only provisioning (or creating the
	// container) reads: a command that does neither loads the manifest
	// with LoadOptions.Lazy and leaves an unset ${env:…} here unread.
	deferrable bool
	shown      func(string) string // how a diagnostic quotes the value; nil: as written

	// Integers: min is always meaningful; max 0 means no upper bound.
	min, max int64

	// Sizes: the smallest accepted, 0 for any positive size.
	minSize Size
	// minSizeWhy says why, in diagnostics.
	minSizeWhy string

	// Lists and objects.
	items    *field
	minItems int
	maxItems int // 0 for no limit
	fields   []*field
	// oneOf lists keys of an object of which exactly one must be written
	// (the kind of a provision step, the target of a health check).
	oneOf []string
	// anyOf are JSON Schema branches of which at least one must hold,
	// for a rule the field table has no words for (template: is
	// required unless kind: vm); build.go checks the same rule.
	anyOf []any

	// rootOnly marks a key that PVE accepts only from root@pam. corral
	// works with an API token, so the key is always rejected, with the
	// command an administrator can run instead (see build.go).
	rootOnly bool

	re, forbidRE *lazyre.Regexp // pattern and forbid, compiled at first use
}

// facts are the facts of apps the field's strings may name: OutputFacts
// in an output's value, GuestFacts in a string that goes into a guest,
// nil elsewhere.
func (f *field) facts() []string {
	switch {
	case f.live:
		return OutputFacts
	case f.guest:
		return GuestFacts
	}
	return nil
}

// child returns the field for key, or nil.
func (f *field) child(key string) *field {
	for _, c := range f.fields {
		if c.key == key {
			return c
		}
	}
	return nil
}

// keys lists the keys a user may write in an object (root-only keys are
// left out: they are never accepted).
func (f *field) keys() []string {
	var ks []string
	for _, c := range f.fields {
		if !c.rootOnly {
			ks = append(ks, c.key)
		}
	}
	return ks
}

// rangeText says which integers are accepted.
func (f *field) rangeText() string {
	if f.max == 0 {
		return strconv.FormatInt(f.min, 10) + " or more"
	}
	return strconv.FormatInt(f.min, 10) + ".." + strconv.FormatInt(f.max, 10)
}

// compileSpec gives every pattern in the tree its Regexp, at package
// init. They compile at the first validation that uses them, not here
// (lazyre): a process that reads no manifest, such as the guest helper's
// re-exec of the binary, never compiles them. A bad pattern still fails
// the tests, which validate every field, and lazyre.CompileAll in the
// cli tests. Fields that share a pattern share its Regexp.
func compileSpec(f *field) *field {
	prepareSpec(f, map[string]*lazyre.Regexp{})
	return f
}

func prepareSpec(f *field, seen map[string]*lazyre.Regexp) {
	lazy := func(pattern string) *lazyre.Regexp {
		if pattern == "" {
			return nil
		}
		if seen[pattern] == nil {
			seen[pattern] = lazyre.New(pattern)
		}
		return seen[pattern]
	}
	f.re, f.forbidRE = lazy(f.pattern), lazy(f.forbid)
	if f.items != nil {
		prepareSpec(f.items, seen)
	}
	for _, c := range f.fields {
		prepareSpec(c, seen)
	}
}

// Patterns shared by several fields. They use only syntax that RE2 and
// ECMA-262 read alike, so the JSON Schema means what the decoder does.
const (
	// PVE's pve-storage-id format.
	storagePattern = `^[a-zA-Z][a-zA-Z0-9._-]*[a-zA-Z0-9]$`
	storageAllowed = "a PVE storage ID: letters, digits, '.', '_' and '-', starting with a letter"
	// Names double as the CT hostname (a DNS label) and appear in corral's
	// tags (corral-app-<name>), so they stay short and lower-case.
	namePattern = `^[a-z]([a-z0-9-]{0,38}[a-z0-9])?$`
	nameAllowed = "lower-case letters, digits and '-', starting with a letter and not ending with '-', at most 40 characters"
	// A project name ends a PVE tag (corral-project-<project>), which PVE
	// stores lower-cased (pve-guest-common get_unique_tags).
	projectPattern = `^[a-z0-9_][a-z0-9_-]{0,39}$`
	projectAllowed = "lower-case letters, digits, '-' and '_', not starting with '-', at most 40 characters"
	// Volume names appear in keeper records "app/name=volid".
	volumeNamePattern = `^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$`
	volumeNameAllowed = "lower-case letters, digits and '-', not starting or ending with '-', at most 40 characters"
	// A top-level PVE pool: pve-poolid with one level, starting with a
	// letter as Pool.pm's create requires.
	poolPattern = `^[A-Za-z][A-Za-z0-9._-]*$`
	poolAllowed = "a PVE pool name: letters, digits, '.', '_' and '-', starting with a letter, at most 64 characters"
	// A dotted quad without leading zeros, as net/netip accepts it.
	ipv4Pattern = `(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])){3}`
)

// Defaults, also printed in the JSON Schema.
const (
	defaultStorage = "local-lvm"
	defaultBridge  = "vmbr0"
	defaultIP      = "dhcp"
	defaultRootfs  = "8G"

	defaultBackupStorage = "local"
)

// sizeAllowed is what a size may look like.
// minRootfs is the smallest root file system corral accepts. PVE
// itself takes any size and then fails the create when tar runs out of
// space unpacking the template: the Debian and Ubuntu standard templates
// of PVE's catalogue take 500-600M, Alpine's about 12M. The floor is not
// a fit check (that depends on the template) but catches what is surely
// a typo, such as 1M for 1G, before anything is created.
const (
	minRootfs    = 256 * MiB
	minRootfsWhy = "the template is unpacked into it: Debian's and Ubuntu's take 500-600M, Alpine's about 12M"
)

const sizeAllowed = "a whole number of MiB written with unit M, G or T, e.g. 512M, 10G, 1.5T"

// durationAllowed is what a duration may look like.
const durationAllowed = "a duration more than 0 with units h, m, s or ms, e.g. 30s, 5m, 1h30m"

// modeAllowed is what a file mode may look like.
const modeAllowed = "an octal file mode of 3 or 4 digits, e.g. \"0644\" or \"0600\""

// manifestSpec is the whole manifest.
var manifestSpec = compileSpec(&field{
	kind: kindObject,
	doc:  "A corral manifest: the apps corral runs in Proxmox VE LXC containers, each with its persistent volumes.",
	fields: []*field{{
		key: "project", kind: kindString,
		doc: "Name of the project the manifest's apps belong to. Every container corral creates for them carries the tag corral-project-<project>; " +
			"apply destroys a container of this project whose app is no longer in the manifest (its volumes stay in the keeper) and never touches another project's. " +
			"Default: the name of the manifest's directory, lower-cased, with every other character than letters, digits, '-' and '_' turned into '-'; " +
			"under a defaulted project, corral deletes no app and frees no volume that another manifest (another path or machine) declared, since two directories can share a name. " +
			"Set it whenever several manifests, checkouts or machines manage one project.",
		pattern: projectPattern, allowed: projectAllowed, public: true,
	}, {
		key: "pool", kind: kindString,
		doc: "PVE resource pool every app's container joins unless the app names its own; corral creates it when it is missing. " +
			"Default: none (corral leaves pool membership alone).",
		pattern: poolPattern, maxLen: 64, allowed: poolAllowed, public: true,
	}, {
		key: "placement", kind: kindObject,
		doc: "Where corral puts an app that names no node when it creates its container. An app that exists stays on its node, " +
			"and an app whose retained volumes are in a node's keeper goes back to that node.",
		fields: []*field{
			{key: "policy", kind: kindString, def: "spread", enum: []string{"spread", "memory"},
				doc: "spread: the allowed node with the fewest corral apps (of any project); memory: the allowed node with the most memory " +
					"not yet given to guests (its memory less every guest's configured memory). Ties go to the node first in name order."},
			{key: "nodes", kind: kindList, minItems: 1,
				doc: "The nodes corral may place apps on. Default: every online node.",
				items: &field{kind: kindString, doc: "A PVE node name.",
					pattern: `^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$`, maxLen: 63,
					allowed: "a PVE node name: letters, digits and '-'"}},
		},
	}, {
		key: "outputs", kind: kindList, maxItems: maxOutputs,
		doc: "Named values corral output prints after the apps' facts, such as a URL to reach an app; " +
			"${app:APP.FACT} in a value is read from the cluster when corral output runs.",
		items: &field{kind: kindObject,
			doc: "One named value.",
			fields: []*field{
				{key: "name", kind: kindString, required: true,
					doc:     "Name of the value, unique in the manifest.",
					pattern: `^[a-z][a-z0-9_]{0,62}$`, allowed: "lower-case letters, digits and '_', starting with a letter, at most 63 characters"},
				{key: "value", kind: kindString, required: true, live: true, maxLen: 4096,
					doc: "The value: text with ${env:…} and ${file:…} references read when the manifest is loaded, and ${app:APP.FACT} " +
						"read from the cluster by corral output, FACT one of address, vmid, node, status, ssh, health. A secret it read is printed as its reference."},
			}},
	}, {
		key: "apps", kind: kindList, required: true, minItems: 1, maxItems: maxApps,
		doc:   "The apps to run, one LXC container each.",
		items: appSpec,
	}},
})

var appSpec = &field{
	kind: kindObject,
	doc:  "One app: an LXC container and its persistent volumes.",
	fields: []*field{
		{key: "name", kind: kindString, required: true,
			doc:     "Name of the app, unique in the manifest. It is also the container's hostname.",
			pattern: namePattern, allowed: nameAllowed, check: checkAppName},
		kindSpec,
		{key: "node", kind: kindString,
			doc:     "PVE node to run on. Default: the node the container is on, or one chosen by placement for a new one.",
			pattern: `^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$`, maxLen: 63,
			allowed: "a PVE node name: letters, digits and '-'"},
		{key: "vmid", kind: kindInt, min: 100, max: 999999999,
			doc: "Container ID. Default: keep the container's ID, or ask the cluster for the next free one."},
		{key: "template", kind: kindString,
			doc: "OS template volume, like local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst; required for a kind: ct app. " +
				"A bare file name means local:vztmpl/<name>.",
			pattern: `^([a-zA-Z][a-zA-Z0-9._-]*[a-zA-Z0-9]:vztmpl/)?[^/\s:]+\.tar\.(gz|xz|zst|bz2)$`, maxLen: 255,
			allowed: "STORAGE:vztmpl/FILE or FILE, where FILE ends in .tar.gz, .tar.xz, .tar.zst or .tar.bz2"},
		{key: "unprivileged", kind: kindBool, def: true,
			doc: "Run the container unprivileged (root inside is not root on the host). " +
				"A privileged container cannot have feature flags set by an API token."},
		{key: "cores", kind: kindInt, def: int64(1), min: 1, max: 8192,
			doc: "Number of CPU cores."},
		{key: "memory", kind: kindInt, def: int64(512), min: 16,
			doc: "Memory in MiB."},
		{key: "swap", kind: kindInt, def: int64(512), min: 0,
			doc: "Swap in MiB."},
		{key: "rootfs", kind: kindObject,
			doc: "The root file system. It is replaced with the container, so keep data on volumes.",
			fields: []*field{
				{key: "storage", kind: kindString, def: defaultStorage,
					doc: "PVE storage to allocate the root file system on.", pattern: storagePattern, allowed: storageAllowed},
				{key: "size", kind: kindSize, def: defaultRootfs, minSize: minRootfs, minSizeWhy: minRootfsWhy,
					doc: "Size of the root file system, e.g. 8G, at least 256M. It can grow in place but not shrink."},
			}},
		{key: "features", kind: kindObject,
			doc: "Container feature flags. An API token may set only nesting; the others need root@pam.",
			fields: []*field{
				{key: "nesting", kind: kindBool, def: false,
					doc: "Allow nested containers and namespaces, which systemd and many service managers need."},
				{key: "fuse", kind: kindBool, rootOnly: true},
				{key: "keyctl", kind: kindBool, rootOnly: true},
				{key: "mknod", kind: kindBool, rootOnly: true},
				{key: "force_rw_sys", kind: kindBool, rootOnly: true},
				{key: "mount", kind: kindString, rootOnly: true},
			}},
		{key: "network", kind: kindObject,
			doc: "The container's network interface (net0).",
			fields: []*field{
				{key: "bridge", kind: kindString, def: defaultBridge,
					doc: "Host bridge to attach to.", pattern: `^[a-zA-Z0-9_.-]+$`, maxLen: 15,
					allowed: "a Linux interface name: letters, digits, '.', '_' and '-', at most 15 characters"},
				{key: "ip", kind: kindString, def: defaultIP,
					doc:     "IPv4 address: dhcp, or a static address with prefix length like 192.168.1.50/24.",
					pattern: `^(dhcp|` + ipv4Pattern + `/([1-9]|[12][0-9]|3[0-2]))$`, check: checkIP,
					allowed: "dhcp or an IPv4 address with prefix length, e.g. 192.168.1.50/24"},
				{key: "gateway", kind: kindString,
					doc:     "IPv4 default gateway; only with a static ip.",
					pattern: `^` + ipv4Pattern + `$`, check: checkIPv4,
					allowed: "an IPv4 address, e.g. 192.168.1.1"},
				{key: "dns", kind: kindList,
					doc: "DNS servers. Default: the host's.",
					items: &field{kind: kindString, doc: "A DNS server's IP address.",
						pattern: `^[0-9a-fA-F.:]+$`, check: checkAddr,
						allowed: "an IPv4 or IPv6 address"}},
			}},
		{key: "tags", kind: kindList,
			doc: "PVE tags. corral adds its own (corral, corral-app-<name>).",
			items: &field{kind: kindString, doc: "A PVE tag.",
				pattern: `^[a-zA-Z0-9_][a-zA-Z0-9_+.-]*$`,
				forbid:  `^[cC][oO][rR][rR][aA][lL](-.*)?$`, forbidMsg: "tags corral and corral-… are reserved for corral",
				allowed: "letters, digits, '_', '+', '.' and '-', not starting with '+', '.' or '-'; not corral or corral-…"}},
		{key: "onboot", kind: kindBool, def: false,
			doc: "Start the container when the node boots."},
		{key: "description", kind: kindString, maxLen: maxDescription, check: DescriptionProblem,
			forbid: `(^|\n)[\t\v\f\r ]*corral-`, forbidMsg: "a line starts with corral-, which is reserved for corral's own lines",
			doc: "Free text shown in the PVE web interface. corral appends its own lines, which start with corral-."},
		{key: "password", kind: kindString, minLen: 5, sensitive: true, deferrable: true,
			doc: "Root password inside the container. Prefer a reference: ${env:NAME} or ${file:PATH}."},
		{key: "ssh", kind: kindObject,
			doc: "SSH access to root inside the container.",
			fields: []*field{
				{key: "publicKeys", kind: kindList,
					doc: "OpenSSH public keys for root, or ${file:~/.ssh/id_ed25519.pub}; a file may hold several, one a line.",
					items: &field{kind: kindString, public: true, check: checkPublicKeys,
						doc:     "An OpenSSH public key line, or a ${file:…} reference to a .pub or authorized_keys file.",
						allowed: "an OpenSSH public key like ssh-ed25519 AAAA… comment"}},
			}},
		{key: "volumes", kind: kindList, maxItems: maxVolumes,
			doc:   "Persistent volumes. They outlive the container or VM: corral keeps them when it replaces or destroys the app.",
			items: volumeSpec},
		{key: "provision", kind: kindList,
			doc: "Steps run inside the container (or VM, as vm.user through sudo) over SSH, in order, after it starts. " +
				"corral records a checksum of each step in the guest, so a re-apply skips what is done and re-runs what changed.",
			items: stepSpec},
		{key: "health", kind: kindList,
			doc:   "Checks that say the app is healthy, run from inside the container (or VM) after provisioning. An apply fails when one fails.",
			items: checkSpec},
		{key: "backup", kind: kindObject,
			doc: "How corral backup backs the app up with vzdump, and how many archives it keeps.",
			fields: []*field{
				{key: "keep", kind: kindInt, def: int64(0), min: 0,
					doc: "Archives of this app to keep; older ones are pruned after a backup. 0 keeps all."},
				{key: "storage", kind: kindString, def: defaultBackupStorage,
					doc: "PVE storage for the archives (content type backup).", pattern: storagePattern, allowed: storageAllowed},
				{key: "mode", kind: kindString, def: "snapshot", enum: []string{"snapshot", "stop", "suspend"},
					doc: "vzdump mode: snapshot (no downtime, needs snapshot-capable storage), stop (stops the container) or suspend."},
				{key: "schedule", kind: kindString, maxLen: 200, check: checkCron,
					doc:     "When corral agent backs the app up, in cron syntax (minute hour day-of-month month day-of-week, or @daily, @every 6h); empty: only corral backup does.",
					allowed: "a cron expression like 30 3 * * * or @daily"},
			}},
		{key: "snapshotBeforeChange", kind: kindBool, def: false,
			doc: "Take a snapshot before an in-place change or provisioning, and roll back to it when a health check fails afterwards."},
		// Pool and firewall (issue 33): one block.
		{key: "pool", kind: kindString,
			doc:     "PVE resource pool the container joins (created if missing), instead of the manifest's pool. Default: the manifest's pool.",
			pattern: poolPattern, maxLen: 64, allowed: poolAllowed, public: true},
		firewallSpec,
		haSpec,
		vmSpec,
	},
}

// haSpec is an app's ha: (Proxmox VE's HA stack keeps the container
// running and recovers it on another node when its node fails). Its keys
// map to the HA resource's state, group (PVE 8) or node-affinity rule
// (PVE 9), max_restart and max_relocate.
var haSpec = &field{key: "ha", kind: kindObject,
	doc: "Make the container (for a kind: vm app, the VM: resource vm:<vmid>) an HA resource of Proxmox VE (ha-manager): PVE keeps it in the requested state and, when its node fails, starts it on another node. " +
		"The rootfs (a VM's vm.disk) and every volume must be on shared storage (NFS, RBD, …): PVE would not recover a guest whose data is on the dead node. Needs Sys.Console on /.",
	fields: []*field{
		{key: "state", kind: kindString, def: "started", enum: []string{"started", "stopped"},
			doc: "The state HA keeps the container in."},
		{key: "group", kind: kindString, pattern: haIDPattern, allowed: haIDAllowed,
			doc: "PVE 8: the HA group (ha-manager groupadd) that says which nodes the container may run on."},
		{key: "rule", kind: kindString, pattern: haIDPattern, allowed: haIDAllowed,
			doc: "PVE 9: the node-affinity HA rule (ha-manager rules add) the container is added to, which says which nodes it may run on."},
		{key: "maxRestart", kind: kindInt, def: int64(1), min: 0, max: 10,
			doc: "How often HA restarts the container on its node after a failed start (PVE's max_restart)."},
		{key: "maxRelocate", kind: kindInt, def: int64(1), min: 0, max: 10,
			doc: "How often HA moves the container to another node after failed starts (PVE's max_relocate)."},
	}}

// haIDPattern is PVE's pve-configid, the form of HA group and rule ids.
const (
	haIDPattern = `^[A-Za-z][A-Za-z0-9_-]+$`
	haIDAllowed = "a letter, then letters, digits, '_' and '-' (at least 2 characters)"
)

var volumeSpec = &field{
	kind: kindObject,
	doc:  "A persistent volume mounted into the app's container, or attached to the app's VM as a disk.",
	fields: []*field{
		{key: "name", kind: kindString, required: true,
			doc: "Name of the volume, unique within the app.", pattern: volumeNamePattern, allowed: volumeNameAllowed},
		{key: "storage", kind: kindString, def: defaultStorage,
			doc: "PVE storage to allocate on. With adopt, the adopted volume's storage.", pattern: storagePattern, allowed: storageAllowed},
		{key: "size", kind: kindSize,
			doc: "Size, e.g. 10G. Required unless adopting an existing volume."},
		{key: "mount", kind: kindString,
			doc:     "Absolute path inside the container, unique within the app; required for a container app. A kind: vm app's volume takes none: it reaches the guest as a disk with the serial corral gives it (corral status shows it).",
			pattern: `^(/([^/,;\s.][^/,;\s]*|\.[^/,;\s.][^/,;\s]*|\.\.[^/,;\s]+))+$`, maxLen: 255, check: checkMount,
			allowed: "a clean absolute path other than /, without '.' or '..' parts, commas, semicolons or spaces"},
		{key: "backup", kind: kindBool, def: true,
			doc: "Include the volume in vzdump backups of the container."},
		{key: "reclaim", kind: kindString, def: string(ReclaimRetain), enum: []string{string(ReclaimRetain), string(ReclaimDelete)},
			doc: "retain: corral never frees the volume. delete: corral destroy --delete-volumes may free it."},
		{key: "adopt", kind: kindString,
			doc:     "Take over an existing volume by volume ID, like local-lvm:vm-999-disk-1, instead of allocating a new one.",
			pattern: `^[a-zA-Z][a-zA-Z0-9._-]*[a-zA-Z0-9]:[^\s,;:/][^\s,;:]*$`, maxLen: 255, check: checkAdopt,
			allowed: "a volume ID STORAGE:NAME, e.g. local-lvm:vm-999-disk-1"},
	},
}

// Patterns of provisioning keys.
const (
	// An absolute path in the guest: no empty parts, no control characters;
	// checkGuestPath rejects '.' and '..' parts.
	guestPathPattern = `^(/[^/\x00-\x1f]+)+$`
	guestPathAllowed = "a clean absolute path other than /, without '.' or '..' parts"
	// Linux user and group names as useradd accepts them by default.
	userNamePattern = `^[a-z_][a-z0-9_-]{0,31}$`
	userNameAllowed = "a Linux user name: lower-case letters, digits, '_' and '-', starting with a letter or '_', at most 32 characters"
	ownerPattern    = `^([a-z_][a-z0-9_-]{0,31}|[0-9]{1,10})(:([a-z_][a-z0-9_-]{0,31}|[0-9]{1,10}))?$`
	ownerAllowed    = "USER or USER:GROUP, each a Linux name or a numeric ID, e.g. hermes or root:hermes"
	stepNameAllowed = "one line of text, at most 80 characters"
)

// Defaults of provisioning keys.
const (
	defaultStepTimeout   = "10m"
	defaultCheckTimeout  = "5s"
	defaultCheckInterval = "3s"
	defaultShell         = "/bin/bash"
	defaultOwner         = "root"
)

// stepKinds are the keys that give a provision step its kind, in the
// order diagnostics list them.
var stepKinds = []string{string(StepRun), string(StepFile), string(StepEnvFile), string(StepCompose), string(StepUser)}

func stepNameField(doc string) *field {
	return &field{key: "name", kind: kindString, maxLen: 80, check: checkOneLine, pattern: `^[^\x00-\x1f\x7f]+$`,
		doc: doc, allowed: stepNameAllowed}
}

func guestPathField(doc string, required bool) *field {
	return &field{key: "path", kind: kindString, required: required, doc: doc, maxLen: 4096,
		pattern: guestPathPattern, check: checkGuestPath, allowed: guestPathAllowed}
}

func modeField(def string) *field {
	return &field{key: "mode", kind: kindMode, def: def,
		doc: "File mode in octal, quoted, like \"" + def + "\"."}
}

func ownerField() *field {
	return &field{key: "owner", kind: kindString, def: defaultOwner,
		doc:     "Owner of the file: USER or USER:GROUP. The user must exist (create it with a user step first).",
		pattern: ownerPattern, allowed: ownerAllowed}
}

// guestFactsDoc says, in the doc of each string that goes into a guest,
// how it names another app's facts.
const guestFactsDoc = "${app:APP.FACT} in it is another app's fact (FACT one of address, vmid, node), read from the cluster by plan and apply: " +
	"the app is provisioned after APP's container exists and runs, and again when the fact changes."

func contentFields(what string) []*field {
	return []*field{
		{key: "content", kind: kindString, deferrable: true, guest: true,
			doc: "The " + what + "'s content, written as is. Give content or source, not both. " + guestFactsDoc},
		{key: "source", kind: kindString, maxLen: 4096, check: checkSource,
			doc:     "A local file whose content is written, read when corral loads the manifest; a relative path is relative to the manifest's directory.",
			allowed: "a path to a local file"},
	}
}

var stepSpec = &field{
	kind:  kindObject,
	doc:   "One provisioning step: exactly one of run, file, envFile, compose or user, with an optional name and timeout.",
	oneOf: stepKinds,
	fields: []*field{
		stepNameField("Name shown while the step runs and used to record that it is done, unique within the app. " +
			"Default: derived from the step, like \"run: apt-get update\" or \"file: /etc/app.conf\"."),
		{key: "timeout", kind: kindDuration, def: defaultStepTimeout,
			doc: "How long the step may run, like 30s, 5m or 1h30m."},
		{key: "onChange", kind: kindList,
			doc: "Names of earlier steps of the app: this step also runs whenever one of them runs in an apply (its content changed, it is new, or the container was recreated), " +
				"like an Ansible handler. A compose step run this way recreates its services (docker compose up -d --force-recreate), so they read a changed env file.",
			items: &field{kind: kindString, doc: "The name of an earlier step (its name key, or the derived name like \"envFile: /opt/app/.env\").",
				maxLen: 80, check: checkOneLine, pattern: `^[^\x00-\x1f\x7f]+$`, allowed: "the name of an earlier step of the app"}},
		{key: "restart", kind: kindList,
			doc: "systemd units to restart (systemctl restart) when this step runs. Each unit is restarted once, after the app's last step, however many steps name it, and only when every step succeeded; " +
				"a failed apply keeps the restart pending for the next one.",
			items: &field{kind: kindString, doc: "A systemd unit name, like hermes.service.",
				maxLen: 256, pattern: `^[A-Za-z0-9@_:.\\-]+$`, check: checkUnit,
				allowed: "a systemd unit name of letters, digits, '@', '_', ':', '.', '-' and '\\', like hermes.service"}},
		{key: "run", kind: kindString, minLen: 1, deferrable: true, guest: true,
			doc: "A shell script run as root with bash -euo pipefail (POSIX sh -e, with pipefail where it has it, when the container has no bash); it fails the apply when it exits non-zero. " + guestFactsDoc},
		{key: "file", kind: kindObject, oneOf: []string{"content", "source"},
			doc: "Write a file in the container.",
			fields: append([]*field{
				guestPathField("Absolute path of the file in the container.", true),
			}, append(contentFields("file"), modeField("0644"), ownerField())...)},
		{key: "envFile", kind: kindObject,
			doc: "Write an environment file (NAME=value lines) in the container. The values are secrets: never printed.",
			fields: []*field{
				guestPathField("Absolute path of the file in the container.", true),
				{key: "env", kind: kindList, required: true, minItems: 1,
					doc: "The variables, in order.",
					items: &field{kind: kindObject,
						doc: "One variable.",
						fields: []*field{
							{key: "name", kind: kindString, required: true,
								doc:     "Variable name.",
								pattern: `^[A-Za-z_][A-Za-z0-9_]*$`, maxLen: 255,
								allowed: "letters, digits and '_', not starting with a digit"},
							{key: "value", kind: kindString, required: true, sensitive: true, deferrable: true, guest: true, check: checkEnvValue,
								doc: "Value, always treated as a secret. Prefer a reference: ${env:NAME} or ${file:PATH}. " + guestFactsDoc},
						}}},
				modeField("0600"),
				ownerField(),
			}},
		{key: "compose", kind: kindObject, oneOf: []string{"content", "source"},
			doc: "Write a Docker Compose file in the container and run docker compose up -d. " +
				"Docker needs features.nesting, which corral sets; in an unprivileged container it also needs keyctl, which only root@pam can set.",
			fields: append([]*field{
				guestPathField("Absolute path of the compose file in the container. Default: /opt/<app>/compose.yaml.", false),
			}, append(contentFields("compose file"),
				modeField("0644"),
				&field{key: "project", kind: kindString, maxLen: 63,
					doc:     "Compose project name. Default: the app's name.",
					pattern: `^[a-z0-9][a-z0-9_-]*$`,
					allowed: "lower-case letters, digits, '_' and '-', starting with a letter or digit"},
				&field{key: "pull", kind: kindString, def: string(PullMissing), enum: []string{string(PullMissing), string(PullAlways)},
					doc: "When the step runs, which images docker compose pulls first. missing: only images not on the container yet. " +
						"always: every image again (docker compose pull), so a moving tag like :latest is brought up to date each time the step runs. " +
						"Pulling does not make the step run: an apply runs it when it changed, is new, is notified (onChange) or the container is new, so that plan can say in advance what apply does. " +
						"Re-pull on purpose with corral apply --rerun STEP."})...)},
		{key: "user", kind: kindObject,
			doc: "Create a user (and its group of the same name) in the container, or update its groups.",
			fields: []*field{
				{key: "name", kind: kindString, required: true,
					doc: "User name.", pattern: userNamePattern, allowed: userNameAllowed},
				{key: "uid", kind: kindInt, min: 1, max: 65533,
					doc: "User ID, also its group's ID. Default: the system picks one. Files on retained volumes keep their owner's ID, so fix it for data that outlives the container."},
				{key: "home", kind: kindString, maxLen: 4096,
					doc:     "Home directory. Default: /home/<name>.",
					pattern: guestPathPattern, check: checkGuestPath, allowed: guestPathAllowed},
				{key: "shell", kind: kindString, def: defaultShell, maxLen: 4096,
					doc:     "Login shell.",
					pattern: guestPathPattern, check: checkGuestPath, allowed: guestPathAllowed},
				{key: "groups", kind: kindList,
					doc: "Supplementary groups, which must exist.",
					items: &field{kind: kindString, doc: "A group name.",
						pattern: userNamePattern, allowed: "a Linux group name: lower-case letters, digits, '_' and '-', starting with a letter or '_', at most 32 characters"}},
			}},
	},
}

var checkSpec = &field{
	kind:  kindObject,
	doc:   "One health check: exactly one of http, tcp or command, tried until it passes or its retries run out.",
	oneOf: []string{"http", "tcp", "command"},
	fields: []*field{
		stepNameField("Name shown in progress and errors, unique within the app. Default: derived from the target, like \"http: http://localhost:9119/\"."),
		{key: "http", kind: kindString, maxLen: 2048, check: checkHTTPURL, shown: redactURL,
			doc:     "URL to fetch from inside the container (localhost is the container itself); healthy when it answers with status expect.",
			pattern: `^https?://[^\s/?#]+([/?#]\S*)?$`,
			allowed: "an http:// or https:// URL with a host, e.g. http://localhost:9119/"},
		{key: "tcp", kind: kindString, maxLen: 262, check: checkHostPort,
			doc:     "HOST:PORT to connect to from inside the container; healthy when the connection opens.",
			pattern: `^\S+:[0-9]{1,5}$`,
			allowed: "HOST:PORT with a port 1..65535, e.g. localhost:5432 or [::1]:5432"},
		{key: "command", kind: kindString, minLen: 1,
			doc: "Shell command run as root in the container; healthy when it exits 0."},
		{key: "expect", kind: kindInt, def: int64(200), min: 100, max: 599,
			doc: "HTTP status an http check expects."},
		{key: "timeout", kind: kindDuration, def: defaultCheckTimeout,
			doc: "How long one attempt may take."},
		{key: "retries", kind: kindInt, def: int64(10), min: 0, max: 10000,
			doc: "Attempts after the first failure before the check fails."},
		{key: "interval", kind: kindDuration, def: defaultCheckInterval,
			doc: "Pause between attempts."},
	},
}
