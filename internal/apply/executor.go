package apply

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// Executor carries out plans against one cluster.
type Executor struct {
	Client   *pve.Client
	Observer Observer
	// Secrets holds values sent to PVE that must never be logged (root
	// passwords); they travel only in request bodies.
	Secrets map[string]string // app → password
	// LockWait bounds how long a step waits for a CT lock held by another
	// operation (a create still running after an interrupted apply).
	LockWait time.Duration
	// Guest is the work inside each app's container (by app name), and SSH
	// how corral logs in to do it.
	Guest map[string]GuestWork
	SSH   SSH

	timings []Timing
}

// Timings are the phase durations of the last Apply or Destroy.
func (e *Executor) Timings() []Timing { return e.timings }

func (e *Executor) obs() Observer {
	if e.Observer == nil {
		return nopObserver{}
	}
	return e.Observer
}

// step runs fn as one named phase of app, timing it and reporting it.
func (e *Executor) step(app, phase, detail string, fn func() error) error {
	done := e.obs().Step(app, phase, detail)
	start := time.Now()
	err := fn()
	e.timings = append(e.timings, Timing{App: app, Phase: phase, Elapsed: time.Since(start)})
	done(err)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", app, phase, err)
	}
	return nil
}

// Apply executes p: keepers first, then each app change in order.
func (e *Executor) Apply(ctx context.Context, p *plan.Plan, obs *plan.Observed) error {
	e.timings = nil
	keepers := e.keeperSet(obs)
	for _, kc := range p.Keepers {
		k, err := e.ensureKeeper(ctx, kc, keepers.byVMID(kc.Node, kc.VMID), p, obs)
		if err != nil {
			return err
		}
		if kc.Action == plan.Create {
			keepers.add(k)
		}
	}
	for _, c := range p.Changes {
		if c.Action == plan.NoOp {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := e.applyChange(ctx, c, keepers, obs); err != nil {
			return err
		}
	}
	return keepers.protectAll(ctx)
}

// applyChange carries out one app's change.
func (e *Executor) applyChange(ctx context.Context, c plan.Change, keepers *keeperSet, obs *plan.Observed) error {
	a := c.Desired
	if c.FetchTemplate {
		if err := e.step(c.App, "template", a.Template, func() error { return e.fetchTemplate(ctx, c.App, c.Node, a.Template) }); err != nil {
			return err
		}
	}
	// Volumes first: a failure here changes no container.
	vols, err := e.prepareVolumes(ctx, c, keepers)
	if err != nil {
		return err
	}
	switch c.Action {
	case plan.Create, plan.Replace:
		if c.Action == plan.Replace {
			if err := e.destroyCT(ctx, c.App, c.Node, c.OldVMID); err != nil {
				return err
			}
			c.VMID = c.Desired.VMID
		}
		vmid, err := e.createAndStart(ctx, c, vols)
		if err != nil || !c.Guest {
			return err
		}
		return e.runGuest(ctx, c, vmid, true)
	case plan.Update:
		change := func() error {
			if err := e.update(ctx, c, vols); err != nil {
				return err
			}
			// A protected change is judged by the health checks even when
			// the guest work itself did not change.
			if c.Guest || (c.Desired.SnapshotBeforeChange && len(e.Guest[c.App].Checks) > 0) {
				return e.runGuest(ctx, c, c.VMID, false)
			}
			return nil
		}
		if c.Desired != nil && c.Desired.SnapshotBeforeChange {
			return e.protected(ctx, c, obs, change)
		}
		return change()
	}
	return nil
}

// attachment is a volume ready to be attached to the workload.
type attachment struct {
	name, volid, mount, key string
	backup                  bool
	action                  plan.VolumeAction
}

// prepareVolumes creates, adopts and grows volumes in the keeper, and
// returns every volume the app should have with its final volid.
func (e *Executor) prepareVolumes(ctx context.Context, c plan.Change, keepers *keeperSet) ([]attachment, error) {
	var out []attachment
	for _, v := range c.Volumes {
		if v.Action == plan.VolDetach || v.Action == plan.VolFree {
			continue
		}
		key := plan.VolumeKey{App: c.App, Name: v.Name}
		volid := v.VolID
		var err error
		switch v.Action {
		case plan.VolCreate:
			err = e.step(c.App, "volume", "create "+v.Name+" ("+fmtGiB(v.Size)+" on "+v.Storage+")", func() error {
				k, err := keepers.forNew(c.Node, key, v.Storage)
				if err != nil {
					return err
				}
				volid, err = k.createVolume(ctx, key, v.Storage, v.Size)
				return err
			})
		case plan.VolAdopt:
			err = e.step(c.App, "volume", "adopt "+v.Adopt+" as "+v.Name, func() error {
				k := keepers.byVMID(c.Node, plan.VolumeOwner(v.Adopt)) // finishing an interrupted adoption
				if k == nil {
					if k, err = keepers.forNew(c.Node, key, v.Storage); err != nil {
						return err
					}
				}
				volid, err = k.adopt(ctx, key, v.Adopt)
				return err
			})
		case plan.VolGrow:
			err = e.step(c.App, "volume", "grow "+v.Name+" to "+fmtGiB(v.Size), func() error {
				k := keepers.holder(c.Node, key)
				if k == nil {
					return fmt.Errorf("no keeper on %s records volume %s", c.Node, key)
				}
				return k.grow(ctx, key, volid, v.Size)
			})
		}
		if err != nil {
			return nil, err
		}
		act := v.Action
		if act == plan.VolGrow && v.Key != "" {
			act = plan.VolKeep
		} else if act == plan.VolGrow {
			act = plan.VolAttach
		}
		out = append(out, attachment{name: v.Name, volid: volid, mount: v.Mount, key: v.Key, backup: v.Backup, action: act})
	}
	return out, nil
}

// createAndStart creates the CT, attaches the volumes while it is stopped
// and starts it.
func (e *Executor) createAndStart(ctx context.Context, c plan.Change, vols []attachment) (int, error) {
	a := c.Desired
	vmid := c.VMID
	err := e.step(c.App, "create", "ct on "+c.Node, func() error {
		var err error
		vmid, err = e.create(ctx, c.App, c.Node, vmid, a)
		return err
	})
	if err != nil {
		return 0, err
	}
	if err := e.attach(ctx, c.App, c.Node, vmid, vols, nil); err != nil {
		return 0, err
	}
	return vmid, e.step(c.App, "start", "ct "+strconv.Itoa(vmid), func() error { return e.start(ctx, c.App, c.Node, vmid) })
}

// create posts a new CT for app and waits for the task.
func (e *Executor) create(ctx context.Context, app, node string, vmid int, a *plan.App) (int, error) {
	params := createParams(a, vmid)
	if k := e.SSH.AuthorizedKey; k != "" {
		// corral's own key, for provisioning over SSH.
		params.Set("ssh-public-keys", params.Get("ssh-public-keys")+k+" corral\n")
	}
	if pw := e.Secrets[app]; pw != "" {
		params.Set("password", pw)
	}
	return e.postCT(ctx, app, node, vmid, params)
}

// postCT creates a CT with params and waits for the task. With vmid 0 it
// takes /cluster/nextid, and takes the next one if another client took
// that id meanwhile.
func (e *Executor) postCT(ctx context.Context, app, node string, vmid int, params url.Values) (int, error) {
	const attempts = 5
	for attempt := 1; ; attempt++ {
		id := vmid
		if id == 0 {
			var err error
			if id, err = e.Client.NextID(ctx); err != nil {
				return 0, err
			}
		}
		params.Set("vmid", strconv.Itoa(id))
		var upid string
		err := e.Client.Post(ctx, "/nodes/"+node+"/lxc", params, &upid)
		if vmid == 0 && attempt < attempts && pve.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("create ct %d: %w", id, err)
		}
		if err := e.wait(ctx, app, upid); err != nil {
			return 0, fmt.Errorf("create ct %d: %w", id, err)
		}
		return id, nil
	}
}

// createParams are the POST /lxc parameters for a (volumes are attached
// afterwards, while the CT is stopped).
func createParams(a *plan.App, vmid int) url.Values {
	conf := plan.InPlaceConfig(*a)
	v := url.Values{}
	v.Set("vmid", strconv.Itoa(vmid))
	v.Set("ostemplate", a.Template)
	v.Set("rootfs", a.RootStorage+":"+plan.GiB(a.RootSize))
	v.Set("unprivileged", boolParam(a.Unprivileged))
	for _, key := range []string{"hostname", "cores", "memory", "swap", "onboot", "tags", "description", "net0", "features", "nameserver"} {
		if conf[key] != "" {
			v.Set(key, conf[key])
		}
	}
	if len(a.SSHKeys) > 0 {
		v.Set("ssh-public-keys", strings.Join(a.SSHKeys, "\n")+"\n")
	}
	return v
}

func boolParam(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// destroyCT stops the CT, detaches every mount point (keeper volumes
// become unusedN, which a destroy does not free since the keeper owns
// them), and destroys it.
func (e *Executor) destroyCT(ctx context.Context, app, node string, vmid int) error {
	conf, err := containerConfig(ctx, e.Client, node, vmid)
	if pve.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := e.ensureStopped(ctx, app, node, vmid); err != nil {
		return err
	}
	var mps []string
	for k := range conf {
		if isMP(k) {
			mps = append(mps, k)
		}
	}
	if len(mps) > 0 {
		if err := e.step(app, "detach", strings.Join(mps, ","), func() error {
			return e.putConfig(ctx, node, vmid, url.Values{"delete": {strings.Join(mps, ",")}})
		}); err != nil {
			return err
		}
	}
	return e.step(app, "destroy", "ct "+strconv.Itoa(vmid), func() error {
		var upid string
		err := e.retryLocked(ctx, func() error {
			return e.Client.Delete(ctx, fmt.Sprintf("/nodes/%s/lxc/%d", node, vmid), url.Values{"purge": {"1"}}, &upid)
		})
		if pve.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return e.wait(ctx, app, upid)
	})
}

func isMP(k string) bool { return isIndexed(k, "mp") }

func isUnused(k string) bool { return isIndexed(k, "unused") }

func isIndexed(k, prefix string) bool {
	rest, ok := strings.CutPrefix(k, prefix)
	return ok && rest != "" && strings.Trim(rest, "0123456789") == ""
}

// update applies in-place changes, stopping the CT only when the change
// needs it.
func (e *Executor) update(ctx context.Context, c plan.Change, vols []attachment) error {
	node, vmid := c.Node, c.VMID
	if c.Restart {
		if err := e.ensureStopped(ctx, c.App, node, vmid); err != nil {
			return err
		}
	}
	if len(c.Config) > 0 || len(c.Cleanup) > 0 {
		params := url.Values{}
		var dels []string
		var keys []string
		for _, ed := range c.Config {
			keys = append(keys, ed.Key)
			if ed.New == "" {
				if ed.Old != "" {
					dels = append(dels, ed.Key)
				}
				continue
			}
			params.Set(ed.Key, ed.New)
		}
		dels = append(dels, c.Cleanup...)
		if len(dels) > 0 {
			params.Set("delete", strings.Join(dels, ","))
		}
		if len(params) > 0 {
			if err := e.step(c.App, "config", strings.Join(append(keys, c.Cleanup...), ","), func() error {
				return e.putConfig(ctx, node, vmid, params)
			}); err != nil {
				return err
			}
		}
	}
	if c.RootGrow > 0 {
		if err := e.step(c.App, "resize", "rootfs to "+fmtGiB(c.RootGrow), func() error {
			return e.resize(ctx, c.App, node, vmid, "rootfs", c.RootGrow)
		}); err != nil {
			return err
		}
	}
	var detach []string
	for _, v := range c.Volumes {
		if v.Action == plan.VolDetach && v.Key != "" {
			detach = append(detach, v.Key)
		}
	}
	if len(detach) > 0 {
		if err := e.step(c.App, "detach", strings.Join(detach, ","), func() error {
			return e.putConfig(ctx, node, vmid, url.Values{"delete": {strings.Join(detach, ",")}})
		}); err != nil {
			return err
		}
	}
	conf, err := containerConfig(ctx, e.Client, node, vmid)
	if err != nil {
		return err
	}
	if err := e.attach(ctx, c.App, node, vmid, vols, conf); err != nil {
		return err
	}
	if c.Start || c.Restart {
		return e.step(c.App, "start", "ct "+strconv.Itoa(vmid), func() error { return e.start(ctx, c.App, node, vmid) })
	}
	return nil
}

// attach puts every volume that is not attached as wanted on a free mpN
// (or its current key) with PUT mpN=<volid>,mp=<path>,backup=… and no size=.
func (e *Executor) attach(ctx context.Context, app, node string, vmid int, vols []attachment, conf map[string]string) error {
	used := map[string]bool{}
	for k := range conf {
		if isMP(k) {
			used[k] = true
		}
	}
	for _, v := range vols {
		if v.action == plan.VolKeep {
			continue
		}
		key := v.key
		if key == "" {
			for i := 0; ; i++ {
				cand := "mp" + strconv.Itoa(i)
				if !used[cand] {
					key = cand
					break
				}
			}
		}
		used[key] = true
		value := plan.AttachValue(v.volid, v.mount, v.backup)
		if err := e.step(app, "attach", key+"="+value, func() error {
			return e.putConfig(ctx, node, vmid, url.Values{key: {value}})
		}); err != nil {
			return err
		}
	}
	return nil
}

// putConfig is a synchronous PUT .../config, retried while another
// operation holds the CT's lock (the change has not started then).
func (e *Executor) putConfig(ctx context.Context, node string, vmid int, params url.Values) error {
	return e.retryLocked(ctx, func() error {
		return e.Client.Put(ctx, fmt.Sprintf("/nodes/%s/lxc/%d/config", node, vmid), params, nil)
	})
}

// retryLocked retries fn while PVE answers "CT is locked (…)": the call
// was refused before any change, so repeating it is safe.
func (e *Executor) retryLocked(ctx context.Context, fn func() error) error {
	wait := e.LockWait
	if wait == 0 {
		wait = 3 * time.Minute
	}
	deadline := time.Now().Add(wait)
	delay := 200 * time.Millisecond
	for {
		err := fn()
		if err == nil || !pve.IsLocked(err) || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		delay = min(delay*2, 2*time.Second)
	}
}

// ensureStopped shuts the CT down (gracefully, then hard after 60 s) if it
// runs.
func (e *Executor) ensureStopped(ctx context.Context, app, node string, vmid int) error {
	var st struct {
		Status string `json:"status"`
	}
	if err := e.Client.Get(ctx, fmt.Sprintf("/nodes/%s/lxc/%d/status/current", node, vmid), nil, &st); err != nil {
		return fmt.Errorf("status of ct %d: %w", vmid, err)
	}
	if st.Status != "running" {
		return nil
	}
	return e.step(app, "stop", "ct "+strconv.Itoa(vmid), func() error {
		var upid string
		err := e.retryLocked(ctx, func() error {
			return e.Client.Post(ctx, fmt.Sprintf("/nodes/%s/lxc/%d/status/shutdown", node, vmid), url.Values{"timeout": {"60"}, "forceStop": {"1"}}, &upid)
		})
		if err != nil {
			return err
		}
		return e.wait(ctx, app, upid)
	})
}

func (e *Executor) start(ctx context.Context, app, node string, vmid int) error {
	var upid string
	err := e.retryLocked(ctx, func() error {
		return e.Client.Post(ctx, fmt.Sprintf("/nodes/%s/lxc/%d/status/start", node, vmid), nil, &upid)
	})
	if err != nil {
		var apiErr *pve.APIError
		if errors.As(err, &apiErr) && strings.Contains(apiErr.Message, "already running") {
			return nil
		}
		return err
	}
	return e.wait(ctx, app, upid)
}

func (e *Executor) resize(ctx context.Context, app, node string, vmid int, disk string, size int64) error {
	var upid string
	err := e.retryLocked(ctx, func() error {
		return e.Client.Put(ctx, fmt.Sprintf("/nodes/%s/lxc/%d/resize", node, vmid), url.Values{"disk": {disk}, "size": {plan.GiB(size) + "G"}}, &upid)
	})
	if err != nil {
		return err
	}
	return e.wait(ctx, app, upid)
}

// wait waits for a task, streaming its log to an observer that shows it,
// and reports its warnings.
func (e *Executor) wait(ctx context.Context, app, upid string) error {
	var opts pve.WaitOptions
	if wantsTaskLogs(e.obs()) {
		opts.OnLog = func(line string) { e.obs().TaskLog(app, upid, line) }
	}
	res, err := e.Client.WaitTask(ctx, upid, opts)
	if err != nil {
		return err
	}
	for _, w := range res.Warnings {
		e.obs().Warn(app, w)
	}
	return nil
}

// fetchTemplate downloads a missing template from the node's appliance
// index (as the seeds' Terraform download resource did).
func (e *Executor) fetchTemplate(ctx context.Context, app, node, volid string) error {
	sid, name, ok := strings.Cut(volid, ":")
	file := strings.TrimPrefix(name, "vztmpl/")
	if !ok || file == name {
		return fmt.Errorf("template %s is not on node %s and is not a vztmpl volume corral can download", volid, node)
	}
	var upid string
	err := e.Client.Post(ctx, "/nodes/"+node+"/aplinfo", url.Values{"storage": {sid}, "template": {file}}, &upid)
	if err != nil {
		if pve.IsPermission(err) {
			return fmt.Errorf("download template %s: %w (the token needs Datastore.AllocateTemplate on /storage/%s, or upload the template once by hand)", file, err, sid)
		}
		return fmt.Errorf("download template %s: %w", file, err)
	}
	return e.wait(ctx, app, upid)
}

func fmtGiB(b int64) string { return plan.GiB(b) + "G" }
