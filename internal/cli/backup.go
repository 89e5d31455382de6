package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/ui"
)

// optionalManifest loads the manifest when -f was given or the default
// file exists; the backup verbs work on apps the manifest may not name
// (an app restored --as a new name).
func optionalManifest(cmd *cobra.Command, ff fileFlags) (*manifest.File, error) {
	if !cmd.Flags().Changed("file") {
		if _, err := os.Stat(ff.path); errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
	}
	return ff.load(true)
}

// backupJob is the common start of the backup verbs: output format, the
// optional manifest, a connection and the observed cluster.
type backupJob struct {
	f      *manifest.File
	s      *session
	asJSON bool
	ex     *apply.Executor
}

func openBackupJob(cmd *cobra.Command, st *streams, ff fileFlags, cf connFlags) (*backupJob, error) {
	asJSON, err := ff.json()
	if err != nil {
		return nil, err
	}
	f, err := optionalManifest(cmd, ff)
	if err != nil {
		return nil, err
	}
	s, err := connect(cmd.Context(), st, cf)
	if err != nil {
		return nil, err
	}
	ex := &apply.Executor{Client: s.client, Observer: newRedactObserver(f, &ui.Progress{W: st.err}), Stop: stopOf(cmd.Context())}
	return &backupJob{f: f, s: s, asJSON: asJSON, ex: ex}, nil
}

func (j *backupJob) Close() { j.s.Close() }

func (j *backupJob) app(name string) (*manifest.App, bool) {
	if j.f == nil || name == "" {
		return nil, false
	}
	return j.f.App(name)
}

func (j *backupJob) err(err error) error { return redactErr(j.f, err) }

// lockApp takes corral's lock on the node of app's container ct (found
// in obs) for command, and reads the container again under the lock; the
// caller releases the lock.
func (j *backupJob) lockApp(ctx context.Context, st *streams, obs *plan.Observed, app string, ct *plan.CT, command string, lf lockFlags) (*held, *plan.CT, error) {
	lock, err := lockNodes(ctx, st, j.ex, obs, []string{ct.Node}, command, lf, nil)
	if err != nil {
		return nil, nil, j.err(err)
	}
	_, fresh, err := j.appCT(lock.ctx, app)
	if err != nil {
		lock.release()
		return nil, nil, err
	}
	return lock, fresh, nil
}

// withApp opens a backup job and finds app's one container, for the
// verbs that act on one app: fn gets the job, the cluster as read and
// the container.
func withApp(cmd *cobra.Command, st *streams, ff fileFlags, cf connFlags, app string, fn func(ctx context.Context, j *backupJob, obs *plan.Observed, ct *plan.CT) error) error {
	j, err := openBackupJob(cmd, st, ff, cf)
	if err != nil {
		return err
	}
	defer j.Close()
	ctx := cmd.Context()
	obs, ct, err := j.appCT(ctx, app)
	if err != nil {
		return err
	}
	return fn(ctx, j, obs, ct)
}

// appCT reads the cluster and finds the app's one container.
func (j *backupJob) appCT(ctx context.Context, app string) (*plan.Observed, *plan.CT, error) {
	obs, err := apply.Observe(ctx, j.s.client)
	if err != nil {
		return nil, nil, j.err(err)
	}
	if apply.IsVMApp(obs, app) {
		return nil, nil, fmt.Errorf("app %s is a VM app: this command works on containers only for now; "+
			"`corral backup %s`, `corral restore` and snapshotBeforeChange work for VM apps", app, app)
	}
	ct, err := apply.AppCT(obs, app)
	return obs, ct, err
}

type backupArgs struct {
	ff      fileFlags
	cf      connFlags
	lf      lockFlags
	mode    string
	storage string
	keep    int
}

func newBackupCmd(st *streams) *cobra.Command {
	a := &backupArgs{}
	cmd := &cobra.Command{
		Use:         "backup APP",
		Annotations: jsonForm(),
		Short:       "Back up an app's container or VM with vzdump and say what the archive leaves out",
		Long: `backup runs vzdump on the app's container (or, for a kind: vm app, its VM),
waits for the task and checks how it ended: PVE answers a backup request with
200 even when the token may not back the guest up, and fails the task
afterwards.

A running VM with the guest agent (vm.agent: true) has its filesystems frozen
(fs-freeze) while the copy starts and thawed after, so its snapshot-mode
backup is app-consistent; without the agent, or when the agent does not
answer, it is crash-consistent, and backup says which one it got and why.
A container has no guest agent: its snapshot-mode backup is crash-consistent.

The archive holds the root file system and every volume mounted with
backup=1. It does not hold volumes with backup=0 (a restore recreates them
empty) nor bind mounts; backup names each one it leaves out. Its notes read
"corral app APP", which is how corral backups and keep find an app's archives.

Mode, storage and keep come from the app's backup: section in the manifest
(defaults: snapshot, local, keep all); the flags override them. keep N
deletes the app's oldest corral archives beyond N on that storage, and never
touches another app's archives, protected ones or archives corral did not make.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runBackup(cmd, st, a, args[0]) },
	}
	a.ff.add(cmd.Flags())
	a.cf.add(cmd.Flags())
	a.lf.add(cmd.Flags())
	cmd.Flags().StringVar(&a.mode, "mode", "", "vzdump mode: snapshot (no downtime; crash-consistent, or app-consistent for a VM with the guest agent) or stop (consistent, the app stops meanwhile)")
	cmd.Flags().StringVar(&a.storage, "storage", "", "backup storage (content backup); default the manifest's backup.storage or local")
	cmd.Flags().IntVar(&a.keep, "keep", 0, "keep only the newest N corral archives of the app on the storage (0 keeps all); default the manifest's backup.keep")
	return cmd
}

func runBackup(cmd *cobra.Command, st *streams, a *backupArgs, app string) error {
	j, err := openBackupJob(cmd, st, a.ff, a.cf)
	if err != nil {
		return err
	}
	defer j.Close()
	opts := apply.BackupOptions{}
	if m, ok := j.app(app); ok {
		opts = apply.BackupOptions{Mode: m.Backup.Mode, Storage: m.Backup.Storage, Keep: m.Backup.Keep}
	}
	fl := cmd.Flags()
	if fl.Changed("mode") {
		opts.Mode = a.mode
	}
	switch opts.Mode {
	case "", "snapshot", "stop", "suspend":
	default:
		return fmt.Errorf("--mode %q: want snapshot or stop", opts.Mode)
	}
	if fl.Changed("storage") {
		opts.Storage = a.storage
	}
	if fl.Changed("keep") {
		if a.keep < 0 {
			return fmt.Errorf("--keep %d: want 0 (keep all) or more", a.keep)
		}
		opts.Keep = a.keep
	}
	res, err := j.backup(cmd.Context(), st, app, opts, a.lf)
	if err != nil {
		if res != nil && j.asJSON {
			writeJSON(st, res)
		}
		return j.err(fmt.Errorf("backup failed: %w", err))
	}
	if j.asJSON {
		return writeJSON(st, res)
	}
	ui.WriteBackup(st.out, res)
	return nil
}

// backup is corral backup's work, shared with corral agent's scheduled
// backups: vzdump verified by the task's exit status and, with keep,
// pruning under the lock of the app's node (it deletes archives).
func (j *backupJob) backup(ctx context.Context, st *streams, app string, opts apply.BackupOptions, lf lockFlags) (*apply.BackupResult, error) {
	obs, err := apply.Observe(ctx, j.s.client)
	if err != nil {
		return nil, j.err(err)
	}
	if opts.Keep > 0 {
		if node, err := apply.AppNode(obs, app); err == nil {
			lock, err := lockNodes(ctx, st, j.ex, obs, []string{node}, "backup", lf, nil)
			if err != nil {
				return nil, j.err(err)
			}
			defer lock.release()
			ctx = lock.ctx
		}
	}
	return j.ex.Backup(ctx, obs, app, opts)
}

func newBackupsCmd(st *streams) *cobra.Command {
	var ff fileFlags
	var cf connFlags
	cmd := &cobra.Command{
		Use:         "backups [APP]",
		Annotations: jsonForm(),
		Short:       "List the apps' backup archives, newest first",
		Long: `backups lists the container and VM archives on every backup storage, newest first,
with the app each belongs to. An archive belongs to an app by its notes
("corral app APP", written by corral backup) or, for an archive made another
way (pct vzdump, a PVE backup job), by the corral-app tag in the container
config stored inside it. Archives of no corral app are not listed. With -f,
only the manifest's apps are listed.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			j, err := openBackupJob(cmd, st, ff, cf)
			if err != nil {
				return err
			}
			defer j.Close()
			app := ""
			if len(args) == 1 {
				app = args[0]
			}
			ctx := cmd.Context()
			obs, err := apply.Observe(ctx, j.s.client)
			if err != nil {
				return j.err(err)
			}
			list, err := apply.ListBackups(ctx, j.s.client, obs, app)
			if err != nil {
				return j.err(err)
			}
			if app == "" && j.f != nil && cmd.Flags().Changed("file") {
				kept := list[:0]
				for _, a := range list {
					if _, ok := j.f.App(a.App); ok {
						kept = append(kept, a)
					}
				}
				list = kept
			}
			if j.asJSON {
				return writeJSON(st, map[string]any{"backups": list})
			}
			return ui.WriteBackups(st.out, list)
		},
	}
	ff.add(cmd.Flags())
	cf.add(cmd.Flags())
	return cmd
}

type restoreArgs struct {
	ff          fileFlags
	cf          connFlags
	lf          lockFlags
	archive     string
	as          string
	replace     bool
	storage     string
	ip          string
	autoApprove bool
}

func newRestoreCmd(st *streams) *cobra.Command {
	a := &restoreArgs{}
	cmd := &cobra.Command{
		Use:         "restore APP --archive VOLID",
		Annotations: jsonForm(),
		Short:       "Restore an app's backup into a new container, beside the app or in its place",
		Long: `restore recreates the container from a backup archive under a new VMID.
Before the first start it gets a new MAC and the hostname, tags and
description of the app it becomes, and each restored volume moves into the
node's keeper as a retained volume of that app. Volumes that had backup=0
come back empty.

Without --as or --replace the copy is app APP-restored and runs beside APP
(or, when APP has no container, it is APP again). --replace restores in
place of APP: the old container stops only when the new one is ready, and
is destroyed once the new one runs; its volumes stay in the keeper,
recorded as <volume>-replaced-<time> (corral volumes lists them).

--replace restores on the node APP runs on now (after a move too), and an
APP without a container on the node whose keeper records its volumes; an
archive that node cannot read (another node's local backup storage), or an
APP whose move is unfinished, is refused before anything changes, with the
fix (docs/moving.md).

The token's privileges are checked first: a token that can back up but not
restore is told what it lacks before anything changes.

A VM app's archive (vzdump-qemu-…) is restored into a new VM with new MACs
and SMBIOS UUID (unique=1) and the name, tags and Notes of the app it
becomes, then started; its disks come back as they were backed up. --replace
is not there yet for a VM app.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runRestore(cmd, st, a, args[0]) },
	}
	a.ff.add(cmd.Flags())
	a.cf.add(cmd.Flags())
	a.lf.add(cmd.Flags())
	cmd.Flags().StringVar(&a.archive, "archive", "", "backup volid to restore (corral backups lists them)")
	cmd.Flags().StringVar(&a.as, "as", "", "name of the restored app (default APP-restored, or APP with --replace)")
	cmd.Flags().BoolVar(&a.replace, "replace", false, "restore in place of the running app")
	cmd.Flags().StringVar(&a.storage, "storage", "", "storage for the restored rootfs and volumes (default the manifest's rootfs storage, else the archived one)")
	cmd.Flags().StringVar(&a.ip, "ip", "", "net0 address of the restored container: dhcp or a CIDR (default the archived)")
	cmd.Flags().BoolVar(&a.autoApprove, "auto-approve", false, "restore without asking (needed when stdin is not a terminal)")
	cmd.MarkFlagRequired("archive")
	cmd.RegisterFlagCompletionFunc("archive", completeArchives)
	return cmd
}

func runRestore(cmd *cobra.Command, st *streams, a *restoreArgs, app string) error {
	j, err := openBackupJob(cmd, st, a.ff, a.cf)
	if err != nil {
		return err
	}
	defer j.Close()
	opts := j.restoreOptions(a, app)
	if apply.IsVMArchive(a.archive) {
		return runRestoreVM(cmd, st, j, a, opts) // vmbackup.go
	}
	ctx := cmd.Context()
	obs, err := apply.Observe(ctx, j.s.client)
	if err != nil {
		return j.err(err)
	}
	rp, err := j.ex.PlanRestore(ctx, obs, opts)
	if err != nil {
		return j.err(err)
	}
	ui.WriteRestorePlan(st.err, rp)
	if !a.autoApprove {
		if err := confirm(st, ui.RestoreQuestion()); err != nil {
			return err
		}
	}
	res, err := j.restore(ctx, st, obs, rp, opts, a.lf)
	if err != nil {
		return err
	}
	if j.asJSON {
		return writeJSON(st, res)
	}
	ui.WriteRestored(st.out, res)
	if m, ok := j.app(res.Name); ok && m.VMID != 0 && m.VMID != res.VMID {
		ui.WriteRestoredPinNote(st.err, j.f.Path, res.Name, m.VMID, res.VMID)
	}
	return nil
}

// restoreOptions are restore's flags with what the manifest adds: the
// names of the app's volumes by mount point, the storage of the app (or
// of the app it is restored as), the project and the apps it lists.
func (j *backupJob) restoreOptions(a *restoreArgs, app string) apply.RestoreOptions {
	opts := apply.RestoreOptions{App: app, Archive: a.archive, As: a.as, Replace: a.replace, Storage: a.storage, IP: a.ip, Names: map[string]string{}}
	if m, ok := j.app(app); ok {
		for _, v := range m.Volumes {
			opts.Names[v.Mount] = v.Name
			opts.Volumes = append(opts.Volumes, v.Name)
		}
		if opts.Storage == "" {
			opts.Storage = m.RootFS.Storage
		}
	}
	if m, ok := j.app(a.as); ok && a.storage == "" && m.RootFS.Storage != "" {
		opts.Storage = m.RootFS.Storage
	}
	if j.f != nil {
		opts.Project, opts.Origin, opts.Explicit = j.f.Project, j.f.Origin, j.f.ProjectSet
		for _, m := range j.f.Apps {
			opts.Listed = append(opts.Listed, m.Name)
		}
	}
	return opts
}

// restore runs the approved restore plan rp: it plans again under the
// lock of the node the restore changes, and of the nodes of an
// interrupted restore it finishes first (the app may have moved since, or
// that restore was of another app elsewhere).
func (j *backupJob) restore(ctx context.Context, st *streams, obs *plan.Observed, rp *apply.RestorePlan, opts apply.RestoreOptions, lf lockFlags) (*apply.RestoreResult, error) {
	lock, err := lockNodes(ctx, st, j.ex, obs, restoreLockNodes(rp.Node, obs), "restore", lf, nil)
	if err != nil {
		return nil, j.err(err)
	}
	defer lock.release()
	ctx = lock.ctx
	if obs, err = apply.Observe(ctx, j.s.client); err != nil {
		return nil, j.err(err)
	}
	if obs.Interrupted() {
		// An earlier restore was interrupted: finish or undo it first.
		if err := j.ex.Recover(ctx, obs); err != nil {
			return nil, j.err(err)
		}
		if obs, err = apply.Observe(ctx, j.s.client); err != nil {
			return nil, j.err(err)
		}
	}
	if rp, err = j.ex.PlanRestore(ctx, obs, opts); err != nil {
		return nil, j.err(err)
	}
	res, err := j.ex.Restore(ctx, obs, rp)
	if err != nil {
		return nil, j.err(fmt.Errorf("restore stopped: %w", err))
	}
	return res, nil
}

// restoreLockNodes are node and the nodes of obs's interrupted restores
// and rescues, which Recover changes before the restore starts.
func restoreLockNodes(node string, obs *plan.Observed) []string {
	nodes := []string{node}
	for _, r := range obs.Restores {
		for _, ct := range []*plan.CT{r.New, r.Replaced} {
			if ct != nil && !slices.Contains(nodes, ct.Node) {
				nodes = append(nodes, ct.Node)
			}
		}
	}
	for _, r := range obs.VMRestores {
		for _, n := range r.Nodes() {
			if !slices.Contains(nodes, n) {
				nodes = append(nodes, n)
			}
		}
	}
	for _, rs := range obs.Rescues {
		for _, r := range rs {
			if !slices.Contains(nodes, r.Node) {
				nodes = append(nodes, r.Node)
			}
		}
	}
	slices.Sort(nodes)
	return nodes
}

func newSnapshotCmd(st *streams) *cobra.Command {
	var ff fileFlags
	var cf connFlags
	var del bool
	cmd := &cobra.Command{
		Use:         "snapshot APP [NAME]",
		Annotations: jsonForm(),
		Short:       "Snapshot an app's container or VM (its volumes included)",
		Long: `snapshot takes a PVE snapshot of the app's container, running or not
(default name corral-YYYYMMDD-HHMMSS). It covers the root file system and
every volume attached to the container, keeper volumes included. PVE can
snapshot only volumes on LVM-thin, ZFS, Ceph RBD or btrfs storage; on a dir
storage corral says so and takes none (use corral backup there).

` + vmSnapshotHelp,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withAppOrVM(cmd, st, ff, cf, args[0], func(ctx context.Context, j *backupJob, obs *plan.Observed, ct *plan.CT) error {
				return snapshot(ctx, st, j, obs, ct, args, del)
			}, func(ctx context.Context, j *backupJob, _ *plan.Observed, vm *plan.VM) error {
				return snapshotVM(ctx, st, j, vm, args, del)
			})
		},
	}
	ff.add(cmd.Flags())
	cf.add(cmd.Flags())
	cmd.Flags().BoolVar(&del, "delete", false, "remove snapshot NAME instead of taking one")
	cmd.ValidArgsFunction = completeAppThenSnapshot(func(*cobra.Command) bool { return del })
	return cmd
}

// snapshot is corral snapshot once it found the app's container ct:
// take snapshot args[1] (or one named for now), or with del remove it.
func snapshot(ctx context.Context, st *streams, j *backupJob, obs *plan.Observed, ct *plan.CT, args []string, del bool) error {
	if del {
		if len(args) != 2 {
			return errors.New("--delete needs the snapshot NAME (corral snapshots lists them)")
		}
		if err := j.ex.Snapshots().Delete(ctx, ct, args[1]); err != nil {
			return j.err(err)
		}
		if j.asJSON {
			return writeJSON(st, map[string]any{"app": args[0], "vmid": ct.VMID, "deleted": args[1]})
		}
		ui.WriteSnapshotDeleted(st.out, args[0], "ct", ct.VMID, args[1])
		return nil
	}
	if ok, why := apply.CanSnapshot(obs, ct); !ok {
		return fmt.Errorf("app %s (ct %d) cannot be snapshotted: %s; no snapshot was taken — use `corral backup %s` instead", args[0], ct.VMID, why, args[0])
	}
	name := apply.SnapshotName(time.Now())
	if len(args) == 2 {
		name = args[1]
	}
	if err := j.ex.Snapshots().Take(ctx, ct, name); err != nil {
		return j.err(err)
	}
	covers := []string{"rootfs"}
	for _, v := range plan.Inventory(obs) {
		if v.HolderVMID == ct.VMID && v.Mount != "" {
			covers = append(covers, "volume "+v.Name+" ("+v.Mount+")")
		}
	}
	if j.asJSON {
		return writeJSON(st, map[string]any{"app": args[0], "vmid": ct.VMID, "snapshot": name, "covers": covers})
	}
	ui.WriteSnapshotTaken(st.out, args[0], ct.VMID, name, covers)
	return nil
}

func newSnapshotsCmd(st *streams) *cobra.Command {
	var ff fileFlags
	var cf connFlags
	cmd := &cobra.Command{
		Use:         "snapshots APP",
		Annotations: jsonForm(),
		Short:       "List an app's snapshots (of its container or VM), oldest first",
		Long: `snapshots lists the snapshots of the app's container or, for a kind: vm app,
its VM, oldest first; CURRENT marks the one the guest descends from, and for
a VM, RAM says whether the snapshot holds the RAM state (corral's never do).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			vmFn := func(ctx context.Context, j *backupJob, _ *plan.Observed, vm *plan.VM) error {
				return snapshotsVM(ctx, st, j, args[0], vm)
			}
			return withAppOrVM(cmd, st, ff, cf, args[0], func(ctx context.Context, j *backupJob, _ *plan.Observed, ct *plan.CT) error {
				snaps, err := apply.ListSnapshots(ctx, j.s.client, ct)
				if err != nil {
					return j.err(err)
				}
				if j.asJSON {
					return writeJSON(st, map[string]any{"app": args[0], "vmid": ct.VMID, "snapshots": snaps})
				}
				if len(snaps) == 0 {
					ui.WriteNoSnapshots(st.out, args[0], "ct", ct.VMID)
					return nil
				}
				return ui.WriteSnapshots(st.out, snaps)
			}, vmFn)
		},
	}
	ff.add(cmd.Flags())
	cf.add(cmd.Flags())
	return cmd
}

func newRollbackCmd(st *streams) *cobra.Command {
	var ff fileFlags
	var cf connFlags
	var lf lockFlags
	var start, autoApprove bool
	cmd := &cobra.Command{
		Use:         "rollback APP NAME",
		Annotations: jsonForm(),
		Short:       "Roll an app's container or VM back to a snapshot (its volumes included)",
		Long: `rollback returns the app's container to snapshot NAME: its config, root file
system and every volume the snapshot covers (those attached when it was
taken). Whatever changed since is lost. PVE stops a running container for
the rollback; corral starts it again if it was running, or with --start.
It refuses, before changing anything, when a volume the snapshot covers no
longer exists or its volid is now another app's or another guest's.

For a kind: vm app it returns the VM to the snapshot: its config and every
disk the snapshot holds, retained volumes included. PVE stops a running VM
for the rollback (a snapshot without the RAM state, as corral's are, then
boots afresh); corral starts it again if it was running, or with --start.
It refuses, before changing anything, when a disk the snapshot holds no
longer exists, or when the VM holds a retained volume attached after the
snapshot: PVE's rollback would keep that disk only as an unused disk
without its serial, which corral no longer knows as the app's volume and
the VM's destroy would free.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withAppOrVM(cmd, st, ff, cf, args[0], func(ctx context.Context, j *backupJob, obs *plan.Observed, ct *plan.CT) error {
				return rollback(ctx, st, j, obs, ct, args, lf, start, autoApprove)
			}, func(ctx context.Context, j *backupJob, obs *plan.Observed, vm *plan.VM) error {
				return rollbackVMApp(ctx, st, j, obs, vm, args, lf, start, autoApprove)
			})
		},
	}
	ff.add(cmd.Flags())
	cf.add(cmd.Flags())
	lf.add(cmd.Flags())
	cmd.Flags().BoolVar(&start, "start", false, "start the container (or VM) after the rollback even if it was stopped")
	cmd.Flags().BoolVar(&autoApprove, "auto-approve", false, "roll back without asking (needed when stdin is not a terminal)")
	cmd.ValidArgsFunction = completeAppThenSnapshot(func(*cobra.Command) bool { return true })
	return cmd
}

// rollback is corral rollback once it found the app's container ct:
// confirm, then under corral's lock check and roll back to args[1],
// starting the container again if it ran (or with start).
func rollback(ctx context.Context, st *streams, j *backupJob, obs *plan.Observed, ct *plan.CT, args []string, lf lockFlags, start, autoApprove bool) error {
	if !autoApprove {
		if err := confirm(st, ui.RollbackQuestion(args[0], "ct", ct.VMID, args[1])); err != nil {
			return err
		}
	}
	lock, ct, err := j.lockApp(ctx, st, obs, args[0], ct, "rollback", lf)
	if err != nil {
		return err
	}
	defer lock.release()
	ctx = lock.ctx
	if err := j.ex.Snapshots().CheckRollback(ctx, obs, ct, args[1]); err != nil {
		return j.err(err)
	}
	if err := j.ex.Snapshots().RollbackStart(ctx, ct, args[1], start || ct.Status == "running"); err != nil {
		return j.err(err)
	}
	if j.asJSON {
		return writeJSON(st, map[string]any{"app": args[0], "vmid": ct.VMID, "snapshot": args[1]})
	}
	ui.WriteRolledBack(st.out, args[0], "ct", ct.VMID, args[1])
	return nil
}
