package model

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corralhq/corral/internal/lazyre"
)

// Backups: POST /nodes/{node}/vzdump (pve-manager API2/VZDump.pm and
// VZDump.pm, pve-container VZDump/LXC.pm; behaviour.md "vzdump", seed 004
// §3.4, §3.5, §4). The archive is a real tar.zst in the backup storage's
// dump directory: ./etc/vzdump/pct.conf and pct.fw first, then the rootfs
// and every mount point whose data vzdump includes, at its mount path.

// vzdump backs CTs up, prunes and removes backups and reads a backup's
// config. Cluster embeds it. It holds no *Cluster: the State's lock and
// the State, and one field per part it calls; each guest's backup
// (guestBackup) gets the Cluster from its Worker, as every task's steps
// do.
type vzdump struct {
	// stateMu guards the State; state is the State (nil until loaded).
	stateMu *stateMutex
	state   func() *State
	nodes   interface{ checkNodeLocked(node string) error }
	storage vzdumpStorage
	// volumes (ctConfig) checks the caller may read a backup volume.
	volumes interface {
		ctCheckVolumeAccessLocked(auth Auth, vmid int, volid, typ string) error
	}
	tasks taskStarter
}

// vzdumpStorage is what vzdump needs of storageLayer: the target's
// check, where a backup lives and its removal.
type vzdumpStorage interface {
	storageCheckEnabledLocked(sid, node string) (*Storage, error)
	parseVolnameLocked(volid string) (s *Storage, name, vtype string, owner int, err error)
	volumePath(node, storage, name string) string
	hostPath(s *Storage, name string) string
	freeVolumeLocked(node, volid string) error
}

// vzdumpRootOnly are the parameters only root@pam may set.
var vzdumpRootOnly = []string{"tmpdir", "dumpdir", "script", "job-id"}

// vzdumpSysModify are the parameters that need Sys.Modify on "/".
var vzdumpSysModify = []string{"bwlimit", "performance", "ionice"}

// vzdumpKeeps are the prune-backups keep options in the order
// prune_mark_backup_group applies them.
var vzdumpKeeps = []string{"keep-last", "keep-hourly", "keep-daily", "keep-weekly", "keep-monthly", "keep-yearly"}

// vzdumpJob is a backup request after its synchronous checks.
type vzdumpJob struct {
	auth     Auth
	node     string
	vmids    []int // local guests and unknown VMIDs, sorted
	skipped  []int // guests on other nodes
	all      bool
	mode     string
	storage  string
	compress string
	notes    string
	protect  bool
	remove   bool
	prune    map[string]int // nil: keep-all
	cmdline  string
}

// Vzdump is POST /nodes/{node}/vzdump: task "vzdump", id the VMID when
// exactly one local guest is selected. params are the request's (vmid,
// all, exclude, mode, storage, compress, notes-template, protected,
// prune-backups, remove, …). The schema lets every user in; the checks
// PVE makes itself run here: root-only parameters, Sys.Modify for
// bwlimit/performance/ionice, Datastore.Allocate for prune-backups and
// Datastore.AllocateSpace on an explicit storage. VM.Backup is checked per
// guest inside the task, so a backup of a guest the caller may not back
// up returns a UPID whose task fails with 403 (seed 004 §3.5). When no
// selected guest is on node, PVE answers "OK" and starts nothing.
func (vz *vzdump) Vzdump(auth Auth, node string, params map[string]string) (string, error) {
	vz.stateMu.Lock()
	defer vz.stateMu.Unlock()
	st := vz.state()
	if err := vz.nodes.checkNodeLocked(node); err != nil {
		return "", err
	}
	job, err := vzdumpReadJob(auth, node, params)
	if err != nil {
		return "", err
	}
	if err := vz.checkJobPermsLocked(auth, job, params); err != nil {
		return "", err
	}
	if err := vz.selectGuestsLocked(&job, params); err != nil {
		return "", err
	}
	if len(job.vmids) == 0 && !job.all {
		return "OK", nil // silent exit if the guests run on other nodes
	}
	if params["storage"] != "" {
		if err := st.Access.Check(auth, "/storage/"+params["storage"], []string{"Datastore.AllocateSpace"}, false); err != nil {
			return "", err
		}
	}
	if job.storage == "" {
		job.storage = "local"
	}
	job.cmdline = vzdumpCommandLine(params)
	id := ""
	if len(job.vmids) == 1 {
		id = strconv.Itoa(job.vmids[0])
	}
	return vz.tasks.spawn(auth, node, "vzdump", id, func(w *Worker) error { return vz.vzdumpTask(w, job) }), nil
}

// vzdumpReadJob reads a vzdump request's parameters into its job, with
// VZDump.pm's checks of them in its order: stdout, the root-only options,
// the conflicting selections, a missing selection, pools, prune-backups
// and maxfiles.
func vzdumpReadJob(auth Auth, node string, params map[string]string) (vzdumpJob, error) {
	if isTrue(params["stdout"]) {
		return vzdumpJob{}, ParamError(map[string]string{"stdout": "option is only allowed on the command line interface."})
	}
	if !auth.IsRoot() {
		for _, k := range vzdumpRootOnly {
			if _, ok := params[k]; ok {
				return vzdumpJob{}, ParamError(map[string]string{k: "Only root may set this option."})
			}
		}
	}
	job := vzdumpJob{auth: auth, node: node, mode: params["mode"], storage: params["storage"],
		compress: params["compress"], notes: params["notes-template"], protect: isTrue(params["protected"]),
		remove: true, all: isTrue(params["all"])}
	if v, ok := params["remove"]; ok {
		job.remove = isTrue(v)
	}
	if job.mode == "" {
		job.mode = "snapshot"
	}
	switch {
	case job.all && params["vmid"] != "":
		return vzdumpJob{}, ParamError(map[string]string{"all": "option conflicts with option 'vmid'"})
	case params["exclude"] != "" && params["vmid"] != "":
		return vzdumpJob{}, ParamError(map[string]string{"exclude": "option conflicts with option 'vmid'"})
	case params["pool"] != "" && params["vmid"] != "":
		return vzdumpJob{}, ParamError(map[string]string{"pool": "option conflicts with option 'vmid'"})
	case strings.Contains(job.notes, "\n"):
		return vzdumpJob{}, ParamError(map[string]string{"notes-template": "contains a line feed"})
	}
	if params["exclude"] != "" && params["pool"] == "" {
		job.all = true
	}
	if !job.all && params["pool"] == "" && params["vmid"] == "" && !isTrue(params["stop"]) {
		return vzdumpJob{}, ParamError(map[string]string{"vmid": "property is missing"})
	}
	_, hasPrune := params["prune-backups"]
	maxfiles, hasMaxfiles := params["maxfiles"]
	if hasPrune && hasMaxfiles {
		return vzdumpJob{}, ParamError(map[string]string{"prune-backups": "option conflicts with option 'maxfiles'"})
	}
	if s := params["prune-backups"]; s != "" {
		keep, err := vzdumpParsePrune(s)
		if err != nil {
			return vzdumpJob{}, err
		}
		job.prune = keep
	}
	if n, err := strconv.Atoi(maxfiles); hasMaxfiles && err == nil && n > 0 {
		job.prune = map[string]int{"keep-last": n} // the deprecated spelling of keep-last
	}
	return job, nil
}

// checkJobPermsLocked is what a vzdump request needs beyond VM.Backup,
// for a caller other than root@pam: Datastore.Allocate on the storage to
// set a retention, Sys.Modify on "/" for the options that change the
// node's behaviour.
func (vz *vzdump) checkJobPermsLocked(auth Auth, job vzdumpJob, params map[string]string) error {
	st := vz.state()
	if auth.IsRoot() {
		return nil
	}
	_, hasPrune := params["prune-backups"]
	_, hasMaxfiles := params["maxfiles"]
	if hasPrune || hasMaxfiles {
		sid := job.storage
		if sid == "" {
			sid = "local"
		}
		if err := st.Access.Check(auth, "/storage/"+sid, []string{"Datastore.Allocate"}, false); err != nil {
			return err
		}
	}
	for _, k := range vzdumpSysModify {
		if _, ok := params[k]; ok {
			return st.Access.Check(auth, "/", []string{"Sys.Modify"}, false)
		}
	}
	return nil
}

// selectGuestsLocked is get_included_guests: it sets job's VMIDs on its
// node (a missing CT among them, to fail visibly in the task) and the
// ones it skips as on other nodes.
func (vz *vzdump) selectGuestsLocked(job *vzdumpJob, params map[string]string) error {
	st := vz.state()
	var selected []int
	if pool := params["pool"]; pool != "" {
		members, err := poolGuestMembersLocked(st, pool)
		if err != nil {
			return err
		}
		selected = members
	} else if job.all {
		excluded := map[int]bool{}
		for _, s := range ctSplitList(params["exclude"]) {
			if n, err := strconv.Atoi(s); err == nil {
				excluded[n] = true
			}
		}
		for vmid := range st.Guests {
			if !excluded[vmid] {
				selected = append(selected, vmid)
			}
		}
		for vmid := range st.VMs {
			if !excluded[vmid] {
				selected = append(selected, vmid)
			}
		}
	} else {
		for _, s := range ctSplitList(params["vmid"]) {
			n, err := strconv.Atoi(s)
			if err != nil || n < 100 {
				return ParamError(map[string]string{"vmid": fmt.Sprintf("value does not look like a valid VM ID: %s", s)})
			}
			selected = append(selected, n)
		}
	}
	sort.Ints(selected)
	selected = slices.Compact(selected)
	for _, vmid := range selected {
		node, ok := guestNodeLocked(st, vmid)
		switch {
		case !ok:
			job.vmids = append(job.vmids, vmid) // fails visibly later
		case node == job.node:
			job.vmids = append(job.vmids, vmid)
		default:
			job.skipped = append(job.skipped, vmid)
		}
	}
	return nil
}

// vzdumpParsePrune parses a prune-backups property string.
func vzdumpParsePrune(s string) (map[string]int, error) {
	p, err := ParseProp(s, "")
	if err != nil {
		return nil, ParamError(map[string]string{"prune-backups": err.Error()})
	}
	keep := map[string]int{}
	for k, v := range p {
		if k == "keep-all" {
			if isTrue(v) {
				if len(p) > 1 {
					return nil, ParamError(map[string]string{"prune-backups": "keep-all cannot be set together with other options."})
				}
				return nil, nil
			}
			continue
		}
		if !slices.Contains(vzdumpKeeps, k) {
			return nil, ParamError(map[string]string{"prune-backups": fmt.Sprintf("invalid key in comma-separated list property: %s", k)})
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, ParamError(map[string]string{"prune-backups": fmt.Sprintf("%s: value must have a minimum value of 1", k)})
		}
		keep[k] = n
	}
	if len(keep) == 0 {
		return nil, nil
	}
	return keep, nil
}

// vzdumpCommandLine is VZDump::Common command_line: "vzdump", the VMIDs,
// then every other parameter as --key value (sorted here; PVE's order is
// that of a Perl hash).
func vzdumpCommandLine(params map[string]string) string {
	var b strings.Builder
	b.WriteString("vzdump")
	for _, s := range ctSplitList(params["vmid"]) {
		b.WriteString(" " + s)
	}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if k == "vmid" || k == "stdout" {
			continue
		}
		v := params[k]
		if strings.ContainsAny(v, " \t") {
			v = "'" + v + "'"
		}
		fmt.Fprintf(&b, " --%s %s", k, v)
	}
	return b.String()
}

// vzdumpTask is the vzdump worker: exec_backup over the selected guests.
func (vz *vzdump) vzdumpTask(w *Worker, job vzdumpJob) error {
	info := func(format string, args ...any) { w.Log("INFO: "+format, args...) }
	info("starting new backup job: %s", job.cmdline)
	if len(job.skipped) > 0 {
		var s []string
		for _, v := range job.skipped {
			s = append(s, strconv.Itoa(v))
		}
		info("skip external VMs: %s", strings.Join(s, ", "))
	}
	// VZDump->new: the target storage must hold backups.
	var dumpdir string
	err := w.Do(func(st *State) error {
		s := st.storage(job.storage)
		if s == nil {
			return Failf("could not get storage information for '%s': storage '%s' does not exist\n", job.storage, job.storage)
		}
		if !s.HasContent("backup") {
			return Failf("could not get storage information for '%s': can't use storage '%s' for backups - wrong content type\n", job.storage, job.storage)
		}
		if _, err := vz.storage.storageCheckEnabledLocked(job.storage, job.node); err != nil {
			return err
		}
		dumpdir = s.Path + "/dump"
		return nil
	})
	if err != nil {
		return err
	}
	// The task list: VM.Backup per existing guest; without "all" a missing
	// privilege ends the whole job (seed 004 §3.5).
	var vmids []int
	err = w.Do(func(st *State) error {
		for _, vmid := range job.vmids {
			if _, ok := guestNodeLocked(st, vmid); ok {
				if err := st.Access.Check(job.auth, fmt.Sprintf("/vms/%d", vmid), []string{"VM.Backup"}, false); err != nil {
					if job.all {
						continue
					}
					return err
				}
			}
			vmids = append(vmids, vmid)
		}
		return nil
	})
	if err != nil {
		return err
	}
	errs := 0
	for _, vmid := range vmids {
		if err := vz.vzdumpGuest(w, job, vmid, dumpdir); err != nil {
			if w.ctx.Err() != nil {
				return err
			}
			errs++
		}
	}
	if errs > 0 {
		info("Backup job finished with errors")
		return Failf("job errors\n")
	}
	info("Backup job finished successfully")
	return nil
}

// vzdumpDisk is one mount point a backup includes.
type vzdumpDisk struct {
	key, mp, volid string
	dir            string // where its data is read from
	ids            idMap  // the CT's id shift: tar runs in its user namespace (idmap.go)
}

// vzdumpGuest is exec_backup_task for one CT. Its error has been logged
// ("Backup of VM <vmid> failed - …") when it returns.
func (vz *vzdump) vzdumpGuest(w *Worker, job vzdumpJob, vmid int, dumpdir string) error {
	if vz.isVM(vmid) {
		return vz.vzdumpVM(w, job, vmid, dumpdir)
	}
	b := &guestBackup{c: w.c, w: w, job: job, vmid: vmid, dumpdir: dumpdir}
	return b.run()
}

// guestBackup is one guest's backup inside a vzdump task: the job's
// inputs and what the steps learn on the way (the guest's state, the
// archive's name, which clean-ups are due). run reads top-down:
// inspect, lock, prepare and choose the mode, quiesce (stop, suspend or
// snapshot), write the archive, register it; then clean up and report,
// also after a failure.
type guestBackup struct {
	c       *Cluster
	w       *Worker
	job     vzdumpJob
	vmid    int
	dumpdir string

	began     time.Time
	firstLine int // the guest's first line in the task log

	running  bool
	hostname string
	basename string // vzdump-lxc-<vmid>-<time>
	ext      string // ".tar", ".tar.zst" …
	archive  string // basename + ext
	volid    string // the archive's volume ID
	mode     string // stop, suspend or snapshot, after any fallback
	disks    []vzdumpDisk
	conf     map[string]string // the config the archive carries

	locked, restart, snapped bool // clean-ups due
}

func (b *guestBackup) info(format string, args ...any) { b.w.Log("INFO: "+format, args...) }

// run backs the guest up, cleans up and logs the outcome.
func (b *guestBackup) run() error {
	b.w.subject = b.vmid
	defer func() { b.w.subject = 0 }()
	b.began = b.c.now()
	b.firstLine = len(b.w.logSnapshot())
	err := b.backup()
	err = b.cleanup(err)
	b.report(err)
	return err
}

// backup is the steps up to a registered archive.
func (b *guestBackup) backup() error {
	if err := b.inspect(); err != nil {
		return err
	}
	if err := b.name(); err != nil {
		return err
	}
	b.info("Starting Backup of VM %d (lxc)", b.vmid)
	b.info("Backup started at %s", b.began.Format("2006-01-02 15:04:05"))
	status := "stopped"
	if b.running {
		status = "running"
	}
	b.info("status = %s", status)
	if err := b.lock(); err != nil {
		return err
	}
	if err := b.chooseMode(); err != nil {
		return err
	}
	if err := b.w.Phase("vzdump", 0.05); err != nil {
		return err
	}
	if err := b.quiesce(); err != nil {
		return err
	}
	dst, size, err := b.writeArchive()
	if err != nil {
		return err
	}
	return b.register(dst, size)
}

// inspect reads the guest's state and makes the backup-limit check.
func (b *guestBackup) inspect() error {
	return b.w.Do(func(st *State) error {
		g, err := b.c.guestLocked(b.job.node, b.vmid)
		if err != nil {
			return Failf("unable to find VM '%d'\n", b.vmid)
		}
		b.running = g.Running
		b.hostname = g.Config["hostname"]
		if b.job.prune != nil && !b.job.remove || b.job.protect {
			return b.c.vzdumpCheckLimitLocked(b.job, b.vmid)
		}
		return nil
	})
}

// name sets the archive's name from the start time and compression.
func (b *guestBackup) name() error {
	b.basename = fmt.Sprintf("vzdump-lxc-%d-%s", b.vmid, b.began.Format("2006_01_02-15_04_05"))
	b.ext = ".tar"
	switch b.job.compress {
	case "zstd":
		b.ext += ".zst"
	case "gzip":
		b.ext += ".gz"
	case "1", "lzo":
		// lzop has no Go implementation at hand; say so rather than
		// write a file that only looks like one.
		return Failf("lzo compression is not implemented by this emulator - use zstd or gzip\n")
	}
	b.archive = b.basename + b.ext
	b.volid = b.job.storage + ":backup/" + b.archive
	return nil
}

// lock sets the guest's "backup" lock.
func (b *guestBackup) lock() error {
	if err := b.w.doGuest(b.job.node, b.vmid, func(st *State, g *Guest) error {
		if err := checkLock(g); err != nil {
			return err
		}
		g.Config["lock"] = "backup"
		return nil
	}); err != nil {
		return err
	}
	b.locked = true
	return nil
}

// chooseMode settles the mode and prepares. Snapshot mode prepares
// before it logs the mode (and falls back to suspend if a volume cannot
// snapshot); stop and suspend prepare after, so a fallback logs the
// mount points twice.
func (b *guestBackup) chooseMode() error {
	b.mode = b.job.mode
	if !b.running {
		b.mode = "stop"
	}
	if b.mode == "snapshot" {
		snapOK, err := b.prepare()
		if err != nil {
			return err
		}
		if !snapOK {
			b.info("mode failure - some volumes do not support snapshots")
			b.info("trying 'suspend' mode instead")
			b.mode = "suspend"
		}
	}
	b.info("backup mode: %s", b.mode)
	b.info("ionice priority: 7")
	if b.mode != "snapshot" {
		if _, err := b.prepare(); err != nil {
			return err
		}
	}
	return nil
}

// prepare finds the mount points vzdump includes, logged as PVE does,
// and whether all of them can snapshot.
func (b *guestBackup) prepare() (snapOK bool, err error) {
	b.disks, snapOK = nil, true
	err = b.w.doGuest(b.job.node, b.vmid, func(st *State, g *Guest) error {
		w := b.w
		if b.hostname != "" {
			w.logLocked("INFO: CT Name: %s", b.hostname)
		}
		b.conf = ctCloneGuest(g).Config
		for _, mp := range snapshotMounts(g.Config, false) {
			key, mount := mp.Key, mp.Path()
			switch {
			case mp.Type() != "volume":
				w.logLocked("INFO: excluding %s mount point %s ('%s') from backup (not a volume)", mp.Type(), key, mount)
				continue
			case key != "rootfs" && !mp.Backup():
				w.logLocked("INFO: excluding volume mount point %s ('%s') from backup (disabled)", key, mount)
				continue
			}
			w.logLocked("INFO: including mount point %s ('%s') in backup", key, mount)
			sid, name, _ := ParseVolID(mp.Volume())
			b.disks = append(b.disks, vzdumpDisk{key: key, mp: mount, volid: mp.Volume(), dir: b.c.storage.volumePath(b.job.node, sid, name), ids: b.c.ctIDMap(g.Config)})
			if s := st.storage(sid); s == nil || !s.CanSnapshot() {
				snapOK = false
			}
		}
		if snapOK && b.mode == "snapshot" && g.Snapshots["vzdump"] != nil {
			w.logLocked("INFO: found old vzdump snapshot (force removal)")
			for _, l := range b.c.snapshotDropLocked(g, "vzdump") {
				w.logLocked("%s", l)
			}
		}
		return nil
	})
	return snapOK, err
}

// quiesce makes the data still for the archive as the mode says: stop a
// running guest, log suspend mode's syncs, or take the "vzdump" snapshot
// and read the disks from it.
func (b *guestBackup) quiesce() error {
	tmpdir := b.dumpdir + "/" + b.basename + ".tmp"
	switch b.mode {
	case "stop":
		if b.running {
			b.info("stopping virtual guest")
			if err := b.w.Do(func(st *State) error {
				if g := st.Guests[b.vmid]; g != nil {
					b.c.markStoppedLocked(g)
				}
				return nil
			}); err != nil {
				return err
			}
			b.restart = true
			if err := b.w.Phase("vzstop", 1); err != nil {
				return err
			}
		}
	case "suspend":
		var pid int
		b.w.Do(func(st *State) error {
			if g := st.Guests[b.vmid]; g != nil {
				pid = g.PID
			}
			return nil
		})
		b.info("starting first sync /proc/%d/root/ to %s", pid, tmpdir)
		b.info("first sync finished (0 seconds)")
		b.info("suspending guest")
		b.info("starting final sync /proc/%d/root/ to %s", pid, tmpdir)
		b.info("final sync finished (0 seconds)")
		b.info("resuming guest")
		b.info("guest is online again after <1 seconds")
	case "snapshot":
		b.info("create storage snapshot 'vzdump'")
		err := b.w.doGuest(b.job.node, b.vmid, func(st *State, g *Guest) error {
			delete(g.Config, "lock") // snapshot_create runs unlocked
			defer func() { g.Config["lock"] = "backup" }()
			return b.c.snapshotCreateLocked(b.w, g, "vzdump", "vzdump backup snapshot")
		})
		if err != nil {
			return err
		}
		b.snapped = true
		err = b.w.Do(func(st *State) error {
			for i := range b.disks {
				if v := st.Volumes[st.volKey(b.job.node, b.disks[i].volid)]; v != nil {
					b.disks[i].dir = b.c.storage.snapshotPath(b.job.node, v, "vzdump")
				}
			}
			return nil
		})
		if err != nil {
			return err // interrupted: the archive would read the live volumes
		}
	}
	return nil
}

// writeArchive assembles the archive: the config without lock,
// snapshots, parent and pending, then the disks. It returns the file's
// path and size.
func (b *guestBackup) writeArchive() (dst string, size int64, err error) {
	delete(b.conf, "lock")
	delete(b.conf, "parent")
	var pct strings.Builder
	writeSection(&pct, b.conf, "")

	hostArchive := b.dumpdir + "/" + b.archive
	b.info("creating vzdump archive '%s'", hostArchive)
	dst = b.c.storage.volumePath(b.job.node, b.job.storage, "backup/"+b.archive)
	start := time.Now()
	written, size, err := writeBackupArchive(dst, pct.String(), b.disks, b.job.compress)
	if err != nil {
		os.Remove(dst)
		return "", 0, fmt.Errorf("backup archive: %w", err)
	}
	if err := b.w.Phase("vzdump", 0.85); err != nil {
		os.Remove(dst)
		return "", 0, err
	}
	b.info("Total bytes written: %d (%s, %s/s)", written, ctHumanBytes(float64(written)),
		ctHumanBytes(float64(written)/max(time.Since(start).Seconds(), 1e-3)))
	b.info("archive file size: %s", vzdumpFormatSize(size))
	return dst, size, nil
}

// register adds the notes and the protected flag beside the archive at
// dst and records it as a backup volume, pruning if the job says so.
func (b *guestBackup) register(dst string, size int64) error {
	job := b.job
	notes := ""
	if job.notes != "" {
		b.info("adding notes to backup")
		n, err := b.c.vzdumpNotes(job.notes, b.vmid, job.node, b.hostname)
		if err != nil {
			b.w.Log("WARN: unable to add notes - %s", strings.TrimRight(errText(err), "\n"))
		} else {
			notes = n
			if err := os.WriteFile(dst+".notes", []byte(notes), 0o644); err != nil {
				b.w.Log("WARN: unable to add notes - %s", err)
				notes = ""
			}
		}
	}
	if job.protect {
		b.info("marking backup as protected")
		if err := os.WriteFile(b.c.storage.volumePath(job.node, job.storage, "backup/"+b.basename+".protected"), nil, 0o644); err != nil {
			return Failf("unable to set protected flag - %s\n", err)
		}
	}
	return b.w.Do(func(st *State) error {
		b.c.storage.addVolumeLocked(job.node, &Volume{Node: st.homeNode(job.node, job.storage), Storage: job.storage, Name: "backup/" + b.archive,
			Owner: b.vmid, Size: size, Format: strings.TrimPrefix(b.ext, "."), Content: "backup", Ctime: b.began.Unix(),
			Notes: notes, Protected: job.protect})
		if job.remove {
			b.c.vzdumpPruneLocked(b.w, job, b.vmid)
		}
		return nil
	})
}

// cleanup unlocks, drops the vzdump snapshot and restarts a stopped
// guest, whatever err the backup ended with. The unlock and the snapshot
// go also after an interrupt. It returns the backup's outcome: err, or
// the failure of the last phase.
func (b *guestBackup) cleanup(err error) error {
	if b.locked {
		b.w.cleanup(func(st *State) {
			if g := st.Guests[b.vmid]; g != nil && g.Config["lock"] == "backup" {
				delete(g.Config, "lock")
			}
		})
	}
	if b.snapped {
		b.info("cleanup temporary 'vzdump' snapshot")
		b.w.cleanup(func(st *State) {
			if g := st.Guests[b.vmid]; g != nil {
				if derr := b.c.snapshotDeleteLocked(b.w, g, "vzdump"); derr != nil {
					b.w.logLocked("%s", strings.TrimRight(errText(derr), "\n"))
				}
			}
		})
	}
	if b.restart {
		if perr := b.w.Phase("vzstart", 1); perr != nil && err == nil {
			err = perr
		}
		b.info("restarting vm")
		b.w.Do(func(st *State) error {
			if g := st.Guests[b.vmid]; g != nil && !g.Running {
				b.c.markRunningLocked(g)
			}
			return nil
		})
		b.info("guest is online again after %d seconds", int(b.c.now().Sub(b.began).Seconds()))
	}
	if err == nil {
		if rest := 1 - 0.05 - 0.85; rest > 0 {
			err = b.w.Phase("vzdump", rest)
		}
	}
	return err
}

// report logs the outcome; a failed backup's archive is removed, a
// good one gets the guest's part of the task log beside it.
func (b *guestBackup) report(err error) {
	elapsed := b.c.now().Sub(b.began)
	if err != nil {
		if b.archive != "" {
			os.Remove(b.c.storage.volumePath(b.job.node, b.job.storage, "backup/"+b.archive))
		}
		b.w.Log("ERROR: Backup of VM %d failed - %s", b.vmid, strings.TrimRight(TaskMessage(err), "\n"))
		b.info("Failed at %s", b.c.now().Format("2006-01-02 15:04:05"))
	} else {
		b.info("Finished Backup of VM %d (%s)", b.vmid, vzdumpFormatTime(elapsed))
		b.info("Backup finished at %s", b.c.now().Format("2006-01-02 15:04:05"))
	}
	if b.basename != "" && err == nil {
		// The guest's part of the task log goes beside the archive.
		lines := b.w.logSnapshot()[b.firstLine:]
		os.WriteFile(b.c.storage.volumePath(b.job.node, b.job.storage, "backup/"+b.basename+".log"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	}
}

// logSnapshot returns a copy of the task log so far.
func (w *Worker) logSnapshot() []string {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return slices.Clone(w.t.Log)
}

// vzdumpCheckLimitLocked is the backup-limit check before a backup
// without remove or with protected.
func (vz *vzdump) vzdumpCheckLimitLocked(job vzdumpJob, vmid int) error {
	st := vz.state()
	count, protected := 0, 0
	for _, v := range st.Volumes {
		if st.volOn(v, job.node) && v.Storage == job.storage && v.Content == "backup" && v.Owner == vmid {
			if v.Protected {
				protected++
			} else {
				count++
			}
		}
	}
	if job.protect {
		return nil // max-protected-backups is unlimited for root-configured dir storages
	}
	limit := 0
	for _, n := range job.prune {
		limit += n
	}
	if limit > 0 && count >= limit {
		return Failf("There is a max backup limit of %d enforced by the target storage or the vzdump parameters. Either increase the limit or delete old backups.\n", limit)
	}
	return nil
}

// vzdumpPruneLocked is PVE::Storage::prune_backups for the guest's
// backups on the target storage after a backup with remove=1.
func (vz *vzdump) vzdumpPruneLocked(w *Worker, job vzdumpJob, vmid int) {
	st := vz.state()
	keepStr := "keep-all=1"
	if job.prune != nil {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(job.prune)) {
			parts = append(parts, fmt.Sprintf("%s=%d", k, job.prune[k]))
		}
		keepStr = strings.Join(parts, ", ")
	}
	w.logLocked("INFO: prune older backups with retention: %s", keepStr)
	pruned := 0
	if job.prune != nil {
		var group []*Volume
		for _, v := range st.Volumes {
			if st.volOn(v, job.node) && v.Storage == job.storage && v.Content == "backup" && v.Owner == vmid &&
				strings.HasPrefix(v.Name, fmt.Sprintf("backup/vzdump-%s-%d-", vzdumpGuestType(st, vmid), vmid)) {
				group = append(group, v)
			}
		}
		marks := pruneMark(group, job.prune)
		for _, v := range group {
			if marks[v] != "remove" {
				continue
			}
			pruned++
			w.logLocked("INFO: removing backup '%s'", v.VolID())
			vz.removeBackupLocked(job.node, v)
		}
	}
	extra := ""
	if pruned > 0 {
		extra = " not covered by keep-retention policy"
	}
	w.logLocked("INFO: pruned %d backup(s)%s", pruned, extra)
}

// removeBackupLocked is archive_remove: the archive with its notes and log.
func (vz *vzdump) removeBackupLocked(node string, v *Volume) {
	p := vz.storage.volumePath(node, v.Storage, v.Name)
	os.Remove(p + ".notes")
	base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(p, ".zst"), ".gz"), ".lzo"), ".tar")
	base = strings.TrimSuffix(base, ".vma")
	os.Remove(base + ".log")
	os.Remove(base + ".protected")
	vz.storage.freeVolumeLocked(node, v.VolID())
}

// pruneMark is prune_mark_backup_group: protected backups stay, then each
// keep option in turn keeps the newest backup of as many periods as it
// allows (periods already covered by a kept backup are skipped); the rest
// is marked "remove".
func pruneMark(group []*Volume, keep map[string]int) map[*Volume]string {
	sorted := slices.Clone(group)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Ctime > sorted[j].Ctime })
	marks := map[*Volume]string{}
	for _, v := range sorted {
		if v.Protected {
			marks[v] = "protected"
		}
	}
	ids := map[string]func(t time.Time) string{
		"keep-last":    func(t time.Time) string { return strconv.FormatInt(t.UnixNano(), 10) },
		"keep-hourly":  func(t time.Time) string { return t.Format("2006/01/02/15") },
		"keep-daily":   func(t time.Time) string { return t.Format("2006/01/02") },
		"keep-weekly":  func(t time.Time) string { y, w := t.ISOWeek(); return fmt.Sprintf("%d/%d", y, w) },
		"keep-monthly": func(t time.Time) string { return t.Format("2006/01") },
		"keep-yearly":  func(t time.Time) string { return t.Format("2006") },
	}
	for i, opt := range vzdumpKeeps {
		n := keep[opt]
		if n == 0 {
			continue
		}
		idOf := func(v *Volume) string {
			if opt == "keep-last" {
				return strconv.Itoa(i) + "/" + v.VolID()
			}
			return ids[opt](time.Unix(v.Ctime, 0))
		}
		already, fresh := map[string]bool{}, map[string]bool{}
		for _, v := range sorted {
			if marks[v] == "keep" {
				already[idOf(v)] = true
			}
		}
		for _, v := range sorted {
			id := idOf(v)
			if marks[v] != "" || already[id] {
				continue
			}
			if !fresh[id] {
				if len(fresh) >= n {
					break
				}
				fresh[id] = true
				marks[v] = "keep"
			} else {
				marks[v] = "remove"
			}
		}
	}
	for _, v := range sorted {
		if marks[v] == "" {
			marks[v] = "remove"
		}
	}
	return marks
}

var notesVarRE = lazyre.New(`\{\{([^\s{}]+)\}\}`)

// vzdumpNotes is generate_notes: {{cluster}}, {{guestname}}, {{node}} and
// {{vmid}} are replaced, "\n" becomes a line break and "\\" a backslash.
func (vz *vzdump) vzdumpNotes(tmpl string, vmid int, node, hostname string) (string, error) {
	if hostname == "" {
		hostname = fmt.Sprintf("CT%d", vmid)
	}
	cluster := ""
	vz.stateMu.Lock()
	if len(vz.state().Nodes) > 1 {
		cluster = ClusterName
	}
	vz.stateMu.Unlock()
	vars := map[string]string{"cluster": cluster, "guestname": hostname, "node": node, "vmid": strconv.Itoa(vmid)}
	var bad error
	out := notesVarRE.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := m[2 : len(m)-2]
		v, ok := vars[name]
		if !ok && bad == nil {
			bad = Failf("unknown variable '%s'\n", name)
		}
		return v
	})
	if bad != nil {
		return "", bad
	}
	var b strings.Builder
	for i := 0; i < len(out); i++ {
		if out[i] == '\\' && i+1 < len(out) {
			switch out[i+1] {
			case 'n':
				b.WriteByte('\n')
				i++
				continue
			case '\\':
				b.WriteByte('\\')
				i++
				continue
			}
		}
		b.WriteByte(out[i])
	}
	return b.String(), nil
}

// vzdumpFormatSize is VZDump.pm format_size.
func vzdumpFormatSize(n int64) string {
	kb := float64(n) / 1024
	if kb < 1024 {
		return fmt.Sprintf("%dKB", int64(kb))
	}
	mb := kb / 1024
	if mb < 1024 {
		return fmt.Sprintf("%dMB", int64(mb))
	}
	gb := mb / 1024
	if gb < 1024 {
		return fmt.Sprintf("%.2fGB", gb)
	}
	return fmt.Sprintf("%.2fTB", gb/1024)
}

// vzdumpFormatTime is VZDump.pm format_time: HH:MM:SS.
func vzdumpFormatTime(d time.Duration) string {
	s := int64(d.Seconds())
	return fmt.Sprintf("%02d:%02d:%02d", s/3600, s/60%60, s%60)
}

// writeBackupArchive writes the vzdump tar, compressed with zstd or gzip
// as compress asks (plain for "0" or ""): ./etc/vzdump/pct.conf,
// ./etc/vzdump/pct.fw, then each disk's
// tree under "."+its mount path. It returns the tar stream's length
// ("Total bytes written") and the file size.
func writeBackupArchive(dst, pctConf string, disks []vzdumpDisk, compress string) (written, size int64, err error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, 0, err
	}
	f, err := os.Create(dst)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	var out io.Writer = f
	var zw io.WriteCloser
	switch compress {
	case "zstd":
		zw, err = newZstdWriter(f)
		if err != nil {
			return 0, 0, err
		}
		out = zw
	case "gzip":
		zw = gzip.NewWriter(f)
		out = zw
	}
	cw := &countingWriter{w: out}
	tw := tar.NewWriter(cw)
	mtime := time.Now()
	for _, d := range []string{"./etc/", "./etc/vzdump/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: mtime}); err != nil {
			return 0, 0, err
		}
	}
	for name, body := range map[string]string{"./etc/vzdump/pct.conf": pctConf} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body)), ModTime: mtime}); err != nil {
			return 0, 0, err
		}
		if _, err := io.WriteString(tw, body); err != nil {
			return 0, 0, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "./etc/vzdump/pct.fw", Mode: 0o644, ModTime: mtime}); err != nil {
		return 0, 0, err
	}
	for _, d := range disks {
		prefix := "." + strings.TrimSuffix(d.mp, "/")
		if err := tarTree(tw, d.dir, prefix, d.ids); err != nil {
			return 0, 0, err
		}
	}
	if err := tw.Close(); err != nil {
		return 0, 0, err
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return 0, 0, err
		}
	}
	if err := f.Close(); err != nil {
		return 0, 0, err
	}
	fi, err := os.Stat(dst)
	if err != nil {
		return 0, 0, err
	}
	return cw.n, fi.Size(), nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// tarTree adds the tree at dir to tw, named below prefix ("." for the
// rootfs, "./data" for a mount point at /data), as vzdump's `tar cpf -
// --numeric-owner --acls --xattrs --xattrs-include=user.*
// --xattrs-include=security.capability` writes it: PAX headers with
// numeric owners only, full modes and mtimes, the second name of a
// hard-linked file as a link entry, FIFOs and device nodes as their tar
// types (sockets are left out), kept xattrs as SCHILY.xattr records and
// ACLs as SCHILY.acl.access and SCHILY.acl.default. A missing dir adds
// only the mount point directory. With an id map (an unprivileged CT)
// owners, ACLs and file capabilities are what tar in the CT's user
// namespace reads (unshiftXattrs).
func tarTree(tw *tar.Writer, dir, prefix string, ids idMap) error {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: prefix + "/", Mode: 0o755, ModTime: time.Now(), Format: tar.FormatPAX})
	}
	links := map[inode]string{}
	return walkVolume(dir, func(p, rel string) error {
		name := prefix
		if rel != "." {
			name = prefix + "/" + rel
		}
		m, err := lstatMeta(p)
		if err != nil {
			return err
		}
		uid, gid := ctOwner(m.uid, m.gid)
		if ids.shifted() {
			uid, gid = ids.toCT(m.uid), ids.toCT(m.gid)
			m.xattrs = unshiftXattrs(m.xattrs, ids)
		}
		h := &tar.Header{Name: name, Mode: int64(m.perm()), Uid: uid, Gid: gid, ModTime: m.mtimeTime(), Format: tar.FormatPAX}
		if h.PAXRecords, err = tarXattrRecords(p, m.xattrs); err != nil {
			return err
		}
		var body bool
		switch m.kind() {
		case unix.S_IFDIR:
			h.Typeflag, h.Name = tar.TypeDir, name+"/"
		case unix.S_IFREG:
			key := inode{m.dev, m.ino}
			if first, ok := links[key]; ok && m.nlink > 1 {
				h.Typeflag, h.Linkname = tar.TypeLink, first
				break
			}
			if m.nlink > 1 {
				links[key] = name
			}
			h.Typeflag, h.Size, body = tar.TypeReg, m.size, true
		case unix.S_IFLNK:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			h.Typeflag, h.Linkname = tar.TypeSymlink, link
		case unix.S_IFIFO:
			h.Typeflag = tar.TypeFifo
		case unix.S_IFCHR, unix.S_IFBLK:
			h.Typeflag = tar.TypeChar
			if m.kind() == unix.S_IFBLK {
				h.Typeflag = tar.TypeBlock
			}
			h.Devmajor, h.Devminor = int64(unix.Major(m.rdev)), int64(unix.Minor(m.rdev))
		default:
			return nil // socket ignored
		}
		var f *os.File
		if body {
			// Opened before its header is written: a file the guest
			// removed since is left out whole, not a header without
			// its body.
			if f, err = os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0); err != nil {
				return err
			}
			defer f.Close()
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !body {
			return nil
		}
		return tarBody(tw, f, m.size)
	})
}

// tarXattrRecords are the PAX records of file p's xattrs: its ACLs as
// SCHILY.acl.access and .default, the xattrs tar keeps as SCHILY.xattr;
// nil when there are none.
func tarXattrRecords(p string, xattrs map[string][]byte) (map[string]string, error) {
	var recs map[string]string
	for k, v := range xattrs {
		switch {
		case k == aclXattrAccess || k == aclXattrDefault:
			text, err := aclToText(v)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", p, k, err)
			}
			if recs == nil {
				recs = map[string]string{}
			}
			recs["SCHILY.acl."+strings.TrimPrefix(k, "system.posix_acl_")] = text
		case tarXattr(k):
			if recs == nil {
				recs = map[string]string{}
			}
			recs["SCHILY.xattr."+k] = string(v)
		}
	}
	return recs, nil
}

// tarBody writes the size bytes its header promised: a file that changed
// since (a running CT) is cut or padded as GNU tar does.
func tarBody(tw *tar.Writer, f *os.File, size int64) error {
	n, err := io.Copy(tw, io.LimitReader(f, size))
	if err != nil {
		return err
	}
	if n < size {
		_, err = io.CopyN(tw, zeroReader{}, size-n)
	}
	return err
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// openBackupTar opens a backup archive's tar stream (zstd by magic,
// else plain tar).
func openBackupTar(p string) (*tar.Reader, func(), error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, nil, err
	}
	magic := make([]byte, 4)
	n, _ := io.ReadFull(f, magic)
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, nil, err
	}
	if n == 4 && string(magic) == "\x28\xb5\x2f\xfd" {
		zr, done, err := newZstdReader(f)
		if err != nil {
			f.Close()
			return nil, nil, err
		}
		return tar.NewReader(zr), func() { done(); f.Close() }, nil
	}
	if n >= 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gr, err := gzip.NewReader(f)
		if err != nil {
			f.Close()
			return nil, nil, err
		}
		return tar.NewReader(gr), func() { gr.Close(); f.Close() }, nil
	}
	return tar.NewReader(f), func() { f.Close() }, nil
}

// maxArchiveConfig bounds the config read from an archive: pmxcfs keeps
// no file over 1 MiB under /etc/pve, so no guest config is larger.
const maxArchiveConfig = 1 << 20

// readBackupConfig returns ./etc/vzdump/pct.conf from an archive; one
// larger than maxArchiveConfig is refused, not cut short.
func readBackupConfig(p string) (string, error) {
	tr, closeFn, err := openBackupTar(p)
	if err != nil {
		return "", err
	}
	defer closeFn()
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", errors.New("unable to extract configuration - no config file in archive")
		}
		if err != nil {
			return "", err
		}
		if path.Clean(h.Name) == "etc/vzdump/pct.conf" {
			b, err := io.ReadAll(io.LimitReader(tr, maxArchiveConfig+1))
			if err == nil && len(b) > maxArchiveConfig {
				return "", fmt.Errorf("the config in the archive is more than %d bytes, more than a guest config can be", maxArchiveConfig)
			}
			return string(b), err
		}
	}
}

// ExtractConfig is GET /nodes/{node}/vzdump/extractconfig: the CT config
// stored in a backup archive. The caller needs access to the volume
// (Datastore.AllocateSpace on its storage and VM.Backup on its guest, or
// Datastore.Allocate) and VM.Backup on the backed-up guest.
func (vz *vzdump) ExtractConfig(auth Auth, node, volume string) (string, error) {
	vz.stateMu.Lock()
	st := vz.state()
	if err := vz.nodes.checkNodeLocked(node); err != nil {
		vz.stateMu.Unlock()
		return "", err
	}
	if err := vz.volumes.ctCheckVolumeAccessLocked(auth, 0, volume, ""); err != nil {
		vz.stateMu.Unlock()
		return "", err
	}
	sid, name, _ := ParseVolID(volume)
	_, _, vtype, owner, err := vz.storage.parseVolnameLocked(volume)
	if err != nil {
		vz.stateMu.Unlock()
		return "", err
	}
	if err := st.Access.Check(auth, fmt.Sprintf("/vms/%d", owner), []string{"VM.Backup"}, false); err != nil {
		vz.stateMu.Unlock()
		return "", err
	}
	s := st.storage(sid)
	p := vz.storage.volumePath(node, sid, name)
	host := vz.storage.hostPath(s, name)
	exists := st.Volumes[st.volKey(node, volume)] != nil
	vz.stateMu.Unlock()
	if vtype != "backup" {
		return "", Failf("cannot extract config from non-backup volume '%s'\n", volume)
	}
	if !exists {
		return "", Failf("file '%s' does not exist\n", host)
	}
	read := readBackupConfig
	if backupIsVM(name) {
		read = func(p string) (string, error) { return readVMArchive(p, nil) }
	}
	conf, err := read(p)
	if err != nil {
		return "", Failf("%s\n", err)
	}
	return conf, nil
}
