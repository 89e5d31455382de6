package sim

// registerOps adds the VM disk and lifecycle operations (docs/emulator.md
// "Virtual machines"): resize, move_disk, snapshots, template, clone and
// offline migrate, each a task as qemu-server runs it.
func (a *qemuAPI) registerOps(route routeFunc) {
	route("PUT", "/nodes/{node}/qemu/{vmid}/resize", ctTask(a.cluster.ResizeVM))
}
