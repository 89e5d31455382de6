package apply

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// vmOps carries out the changes of kind: vm apps (issue 34) through the
// runner's client, steps and task waits. Its firewall is written as a
// container's (applyPoolAndFirewall, under the VM's qemu directory); its
// guest work runs as a container's (vmguest.go). corralKey is corral's SSH key, given to every VM it
// creates.
type vmOps struct {
	r         *runner
	corralKey string
}

// applyVM carries out one VM app's change, then its guest work, then
// its HA resource (ha.go), as for a container: added once the new VM
// runs, and on an update removed first when the manifest drops ha: (so
// that a start that follows is corral's), else changed last. obs is the
// plan's observation (the HA rules), nil for a destroy.
func (e *Executor) applyVM(ctx context.Context, c plan.Change, obs *plan.Observed) error {
	v := vmOps{r: e.ops(), corralKey: e.SSH.AuthorizedKey}
	switch c.Action {
	case plan.Delete:
		return v.destroy(ctx, c)
	case plan.Replace:
		if err := v.destroy(ctx, c); err != nil {
			return err
		}
		fallthrough
	case plan.Create:
		if err := v.create(ctx, c); err != nil {
			return err
		}
		p, _ := v.r.whereIs(c.App) // create placed it
		if err := e.vmGuestWork(ctx, c, p.vmid, true, false); err != nil {
			return err
		}
		return e.applyHA(ctx, c, p.vmid, obs)
	case plan.Move:
		after, err := moveVM(ctx, v, c) // vmmove.go: ends in an Update, on the target
		if err != nil {
			return err
		}
		return e.applyVM(ctx, after, obs)
	case plan.Update:
		if c.HA != nil && c.HA.Want == nil {
			if err := e.applyHA(ctx, c, c.VMID, obs); err != nil {
				return err
			}
			c.HA = nil
		}
		// vmsnapshot.go: snapshotBeforeChange covers the guest work too.
		if err := v.updateVM(ctx, c, func() error { return e.vmGuestWork(ctx, c, c.VMID, false, rekeys(c)) }); err != nil {
			return err
		}
		return e.applyHA(ctx, c, c.VMID, obs)
	}
	return nil
}

// create posts the VM (its disk imported from the image, the cloud-init
// drive, the agent), grows the imported disk to the asked size, starts
// it and waits for its address.
func (v vmOps) create(ctx context.Context, c plan.Change) error {
	a := c.Desired
	var vmid int
	err := v.r.step(c.App, "create", "vm on "+c.Node+" from "+a.VM.Image, func() error {
		var err error
		vmid, err = v.post(ctx, c)
		return err
	})
	if err != nil {
		return err
	}
	if err := v.grow(ctx, c.App, c.Node, vmid, a.VM.DiskSize); err != nil {
		return err
	}
	if err := v.attachVolumes(ctx, c, vmid); err != nil { // vmvolumes.go: before the first start
		return err
	}
	// The firewall is in place before the VM first starts (the pool was
	// the create's).
	if err := v.r.applyPoolAndFirewall(ctx, plan.Change{App: c.App, Kind: c.Kind, Node: c.Node, Firewall: c.Firewall}, vmid); err != nil {
		return err
	}
	v.r.placed(c.App, c.Node, vmid)
	if err := v.start(ctx, c.App, c.Node, vmid); err != nil {
		return err
	}
	return v.address(ctx, c.App, c.Node, vmid, a)
}

// post sends the create (with the next free VMID when the app pins
// none, one create at a time as for CTs) and waits for its task.
func (v vmOps) post(ctx context.Context, c plan.Change) (int, error) {
	a := c.Desired
	params := &pve.VMCreate{VMID: c.VMID, Disks: plan.VMCreateDisks(*a), Config: plan.VMConfig(*a), Pool: a.Pool}
	// VMConfig renders the keys the way the plan compares them; the
	// keys are sent typed, encoded by VMCreate.
	delete(params.Config, "sshkeys")
	params.SSHKeys = withCorralKey(a.SSHKeys, v.corralKey)
	const attempts = 5
	for attempt := 1; ; attempt++ {
		v.r.creating.Lock()
		id := c.VMID
		if id == 0 {
			var err error
			if id, err = v.r.client.NextID(ctx); err != nil {
				v.r.creating.Unlock()
				return 0, err
			}
		}
		params.VMID = id
		upid, err := v.r.client.CreateVM(ctx, c.Node, params)
		v.r.creating.Unlock()
		if c.VMID == 0 && attempt < attempts && pve.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return 0, vmImageHint(err, a.VM.Image)
		}
		if err := v.r.wait(ctx, c.App, upid); err != nil {
			return 0, vmImageHint(fmt.Errorf("create vm %d: %w", id, err), a.VM.Image)
		}
		return id, nil
	}
}

// vmImageHint adds what to do when PVE does not know the image.
func vmImageHint(err error, image string) error {
	if strings.Contains(err.Error(), image) {
		return fmt.Errorf("%w (the disk is imported from %s: it must be a volume of content import or images on the node; upload a cloud image to a storage's import/ directory, PVE 8.2+, and name it in vm.image)", err, image)
	}
	return err
}

// grow resizes the VM's disk to size when it is smaller (an imported
// disk has the image's size).
func (v vmOps) grow(ctx context.Context, app, node string, vmid int, size int64) error {
	conf, err := v.r.client.VMConfigOf(ctx, node, vmid, true)
	if err != nil {
		return err
	}
	if plan.ParseVMDisk(conf.Values[plan.VMDisk]).Size >= size {
		return nil
	}
	return v.r.step(app, "resize", plan.VMDisk+" to "+plan.GiB(size)+"G", func() error {
		var upid string
		err := v.r.locked().Do(ctx, func() (err error) {
			upid, err = v.r.client.ResizeVM(ctx, node, vmid, plan.VMDisk, plan.GiB(size)+"G")
			return err
		})
		if err != nil {
			return err
		}
		return v.r.wait(ctx, app, upid)
	})
}

// start starts the VM; one that already runs is left as it is.
func (v vmOps) start(ctx context.Context, app, node string, vmid int) error {
	return v.r.step(app, "start", "vm "+strconv.Itoa(vmid), func() error {
		var upid string
		err := v.r.locked().Do(ctx, func() (err error) {
			upid, err = v.r.client.StartVM(ctx, node, vmid)
			return err
		})
		if errors.Is(err, pve.ErrAlreadyRunning) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := v.r.wait(ctx, app, upid); err != nil {
			return err
		}
		return v.r.waitHAPowerOf(ctx, pve.QEMU, upid, node, vmid, true) // an HA VM's start is a request
	})
}

// stop shuts the VM down (through its agent, or ACPI), hard after 60 s.
func (v vmOps) stop(ctx context.Context, app, node string, vmid int) error {
	st, err := v.r.client.VMStatusOf(ctx, node, vmid)
	if err != nil {
		return err
	}
	if st.Status != "running" {
		return nil
	}
	return v.r.step(app, "stop", "vm "+strconv.Itoa(vmid), func() error {
		var upid string
		err := v.r.locked().Do(ctx, func() (err error) {
			upid, err = v.r.client.ShutdownVM(ctx, node, vmid, pve.ShutdownOptions{Timeout: 60, ForceStop: true})
			return err
		})
		if err != nil {
			return err
		}
		if err := v.r.wait(ctx, app, upid); err != nil {
			return err
		}
		return v.r.waitHAPowerOf(ctx, pve.QEMU, upid, node, vmid, false) // an HA VM's shutdown is a request
	})
}

// destroy stops the planned VM and destroys it with its disks (purge:
// out of pools, ACLs and jobs too), after checking it is still the VM
// the plan saw.
func (v vmOps) destroy(ctx context.Context, c plan.Change) error {
	vmid := c.OldVMID
	if vmid == 0 {
		return v.freeVolumes(ctx, c) // the VM is gone, its freed disks are the keeper VM's
	}
	conf, err := v.r.client.VMConfigOf(ctx, c.Node, vmid, true)
	switch {
	case pve.IsNotFound(err):
		return v.freeVolumes(ctx, c)
	case err != nil:
		return err
	case c.Digest != "" && conf.Digest != c.Digest:
		return &PlanStaleError{App: c.App, VMID: vmid, Reason: "was changed (its config digest differs)"}
	}
	if err := v.guardSnapshotDisks(ctx, c, vmid, detachedDisks(c, conf.Values, true)); err != nil { // vmsnapshots.go
		return err
	}
	if err := v.leaveHA(ctx, c.App, c.Node, vmid); err != nil {
		return err
	}
	if err := v.stop(ctx, c.App, c.Node, vmid); err != nil {
		return err
	}
	if err := v.detachAll(ctx, c, vmid); err != nil { // vmvolumes.go
		return err
	}
	err = v.r.step(c.App, "destroy", "vm "+strconv.Itoa(vmid), func() error {
		var upid string
		err := v.r.locked().Do(ctx, func() (err error) {
			upid, err = v.r.client.DestroyVM(ctx, c.Node, vmid, pve.DestroyOptions{Purge: true, DestroyUnreferencedDisks: pve.Ptr(true)})
			return err
		})
		if pve.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return v.r.wait(ctx, c.App, upid)
	})
	if err != nil {
		return err
	}
	return v.freeVolumes(ctx, c)
}

// leaveHA removes the VM's HA resource before it is destroyed: PVE
// refuses to destroy an HA resource without purge, and while it is one
// a shutdown is only a request to HA (hastop), which HA may answer by
// starting it again. Without a resource, or with one HA ignores, there
// is nothing to do.
func (v vmOps) leaveHA(ctx context.Context, app, node string, vmid int) error {
	st, err := v.r.client.VMStatusOf(ctx, node, vmid)
	if err != nil || !bool(st.HA.Managed) {
		return err
	}
	sid := pve.HASID(pve.QEMU, vmid)
	return v.r.step(app, "ha", "remove "+sid, func() error {
		err := v.r.client.DeleteHAResource(ctx, sid)
		if err != nil && strings.Contains(err.Error(), "not HA managed") {
			return nil // removed meanwhile
		}
		return err
	})
}

// VMAddressPoll is how often apply asks the guest agent for the VM's
// addresses while it waits.
var VMAddressPoll = 2 * time.Second

// address waits, when the VM's address is known only to its guest agent
// (agent on, ip: dhcp), until the agent reports one, for at most
// vm.addressWait. A static address is the config's and not waited for;
// without the agent there is nothing to ask.
func (v vmOps) address(ctx context.Context, app, node string, vmid int, a *plan.App) error {
	if !a.VM.Agent || plan.StaticAddress(a) != "" {
		return nil
	}
	wait := a.VM.AddressWait
	return v.r.step(app, "address", "vm "+strconv.Itoa(vmid)+" guest agent", func() error {
		ctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		var last error
		for {
			ifs, err := v.r.client.AgentInterfaces(ctx, node, vmid)
			if addr := GuestIPv4(ifs); err == nil && addr != "" {
				return nil
			}
			if pve.IsPermission(err) {
				return fmt.Errorf("VM %d runs, but the token may not ask its guest agent for its addresses: %w; grant VM.GuestAgent.Audit (PVE 9) or VM.Monitor (PVE 8) on /vms/%d (corral doctor names it), or give network.ip a static address", vmid, err, vmid)
			}
			if err != nil {
				last = err
			}
			select {
			case <-ctx.Done():
				if last == nil {
					last = errors.New("it lists no IPv4 address besides loopback")
				}
				return fmt.Errorf("VM %d runs, but its guest agent reported no address within %s (%v): the image must run qemu-guest-agent and get an address by DHCP; "+
					"raise vm.addressWait, give network.ip a static address, or set vm.agent: false", vmid, wait, last)
			case <-time.After(VMAddressPoll):
			}
		}
	})
}

// GuestIPv4 is the first IPv4 address of an interface other than lo
// that a guest agent's interfaces list, "" when none. (127.0.0.1 is
// skipped anywhere; another 127/8 address on eth0 is the emulator's VM
// guest, reached on the host's loopback, docs/emulator.md.)
func GuestIPv4(ifs []pve.Interface) string {
	for _, i := range ifs {
		if i.Name == "lo" {
			continue
		}
		for _, a := range i.IPAddresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Is4() && ip != netip.AddrFrom4([4]byte{127, 0, 0, 1}) {
				return ip.String()
			}
		}
	}
	return ""
}
