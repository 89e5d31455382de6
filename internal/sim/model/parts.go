package model

// Wiring: each part of the Cluster gets the State's lock, the State and
// the other parts it calls, as the narrow fields and interfaces it
// declares (docs/architecture.md, "How the parts reach each other").
// The wiring functions are plain functions, not Cluster methods: they
// run once, in newCluster, and are nothing a caller of the Cluster
// needs.

// wireParts wires every part that holds no *Cluster. A part's fields
// may point at parts wired after it: each gets the address of the
// Cluster's field, filled in before the Cluster is used.
func wireParts(c *Cluster) {
	wireCore(c)
	wireGuests(c)
	wireMigrator(c)
	wireVzdump(c)
	wireDisks(c)
	wirePower(c)
	wireConfig(c)
	wireCreator(c)
	wireHA(c)
	wirePools(c)
	wireFirewall(c)
	wireQemu(c)
}

// wireCore wires the parts every other one uses: tasks, storage,
// access control, the cluster views and persistence.
func wireCore(c *Cluster) {
	opts, ctx := c.opts, c.ctx
	c.taskRunner = taskRunner{
		stateMu:   &c.mu,
		state:     func() *State { return c.st },
		clock:     c.now,
		durations: opts.Durations,
		timeScale: opts.TimeScale,
		ctx:       ctx,
		wg:        &c.wg,
		log:       c.log,
		journal:   &c.persistence,
		cluster:   c,
	}
	c.storage = storageLayer{
		stateMu:      &c.mu,
		state:        func() *State { return c.st },
		dataDir:      c.DataDir(),
		clock:        c.now,
		ctx:          ctx,
		realTemplate: opts.RealTemplate,
		journal:      &c.persistence,
		tasks:        &c.taskRunner,
		nodes:        &c.guests,
		appliances:   &c.appliances,
	}
	c.storageAPI = &c.storage
	c.accessControl = accessControl{
		stateMu:  &c.mu,
		accessOf: func() *Access { return c.st.Access },
		saveAccess: func() error {
			c.markCore()
			return c.saveLocked()
		},
		clock: c.now,
	}
	c.clusterView = clusterView{
		stateMu: &c.mu,
		state:   func() *State { return c.st },
		clock:   c.now,
		scaled:  c.taskRunner.scale,
		version: opts.Version,
		storage: &c.storage,
		guests:  &c.guests,
	}
	c.persistence = persistence{
		dir:          opts.Dir,
		stateMu:      &c.mu,
		state:        func() *State { return c.st },
		guestChanged: func() { c.guestGen++ },
	}
}

// wireGuests wires the guests and the CT operations that hold no
// *Cluster.
func wireGuests(c *Cluster) {
	opts, ctx := c.opts, c.ctx
	c.guests = guests{
		stateMu:          &c.mu,
		state:            func() *State { return c.st },
		clock:            c.now,
		ctx:              ctx,
		wg:               &c.wg,
		log:              c.log,
		dataDir:          c.DataDir(),
		version:          opts.Version,
		journal:          &c.persistence,
		volumes:          &c.storage,
		guestBlockLocked: c.guestBlockLocked,
		locks:            newConfigLocks(),
		migLocks:         newMigrateLocks(),
	}
	c.ctDestroyer = ctDestroyer{
		stateMu:  &c.mu,
		state:    func() *State { return c.st },
		guests:   &c.guests,
		stopper:  &c.ctPower,
		mounts:   &c.ctConfig,
		storage:  &c.storage,
		firewall: &c.fwConfig,
		tasks:    &c.taskRunner,
		journal:  &c.persistence,
		ha:       &c.ha.guest,
	}
	c.ctSnapshots = ctSnapshots{
		stateMu: &c.mu,
		state:   func() *State { return c.st },
		clock:   c.now,
		guests:  &c.guests,
		stopper: &c.ctPower,
		starter: &c.ctCreator,
		storage: &c.storage,
		tasks:   &c.taskRunner,
		journal: &c.persistence,
	}
}

// wireMigrator wires ctMigrator: the guests' lookups, the storage check,
// ctPower's start, tasks, the HA manager, and the Cluster's own memory
// admission as a function.
func wireMigrator(c *Cluster) {
	c.ctMigrator = ctMigrator{
		stateMu: &c.mu,
		state:   func() *State { return c.st },
		guests:  &c.guests,
		storage: &c.storage,
		starter: &c.ctPower,
		tasks:   &c.taskRunner,
		admit:   c.admitLocked,
		ha:      &c.ha.guest,
	}
}

// wireVzdump wires vzdump: the node check, the storage layer, ctConfig's
// volume access check and tasks.
func wireVzdump(c *Cluster) {
	c.vzdump = vzdump{
		stateMu: &c.mu,
		state:   func() *State { return c.st },
		nodes:   &c.guests,
		storage: &c.storage,
		volumes: &c.ctConfig,
		tasks:   &c.taskRunner,
	}
}

// wireDisks wires ctDisks: the guests' lookups, the storage layer,
// ctCreator's disk allocation, tasks and the journal.
func wireDisks(c *Cluster) {
	c.ctDisks = ctDisks{
		stateMu: &c.mu,
		state:   func() *State { return c.st },
		version: c.opts.Version,
		guests:  &c.guests,
		storage: &c.storage,
		alloc:   &c.ctCreator,
		tasks:   &c.taskRunner,
		journal: &c.persistence,
	}
}

// wirePower wires ctPower: the guests' node check and hooks, the storage
// layer, tasks, the journal, the HA manager, and the Cluster's own
// memory admission as a function.
func wirePower(c *Cluster) {
	c.ctPower = ctPower{
		stateMu: &c.mu,
		state:   func() *State { return c.st },
		clock:   c.now,
		guests:  &c.guests,
		storage: &c.storage,
		tasks:   &c.taskRunner,
		journal: &c.persistence,
		admit:   c.admitLocked,
		ha:      &c.ha.guest,
	}
}

// wireConfig wires ctConfig: the guests' lookups and flock, the storage
// layer, ctCreator's disk allocation, the Cluster's own volume format
// (its id shift) as a function, and the journal.
func wireConfig(c *Cluster) {
	c.ctConfig = ctConfig{
		stateMu:       &c.mu,
		state:         func() *State { return c.st },
		version:       c.opts.Version,
		log:           c.log,
		guests:        &c.guests,
		storage:       &c.storage,
		alloc:         &c.ctCreator,
		formatVolumes: c.ctFormatVolumesLocked,
		journal:       &c.persistence,
		tasks:         &c.taskRunner,
	}
}

// wireCreator wires ctCreator: guests, storage, ctConfig's checks,
// ctPower, the firewall, tasks, the journal, HA, and the Cluster's own
// memory admission and volume format as functions.
func wireCreator(c *Cluster) {
	c.ctCreator = ctCreator{
		stateMu:       &c.mu,
		state:         func() *State { return c.st },
		dataDir:       c.DataDir(),
		version:       c.opts.Version,
		log:           c.log,
		guests:        &c.guests,
		storage:       &c.storage,
		config:        &c.ctConfig,
		power:         &c.ctPower,
		firewall:      &c.fwConfig,
		tasks:         &c.taskRunner,
		journal:       &c.persistence,
		ha:            &c.ha.guest,
		admit:         c.admitLocked,
		formatVolumes: c.ctFormatVolumesLocked,
	}
}

// wireHA wires the HA stack's parts: each the same haParts (the
// journal and the CRM's wake-up), and the other parts each calls:
// tasks, ctPower's and ctMigrator's API for the LRM, one another.
func wireHA(c *Cluster) {
	hp := haParts{
		stateMu: &c.mu,
		state:   func() *State { return c.st },
		clock:   c.now,
		journal: &c.persistence,
		crm:     &c.ha.crm,
	}
	ha := &c.ha
	ha.resources = haResources{haParts: hp, version: c.opts.Version, rules: &ha.rules}
	ha.rules = haRules{hp}
	ha.groups = haGroups{haParts: hp, version: c.opts.Version}
	ha.status = haStatusView{hp}
	ha.crm = haCRM{haParts: hp, log: c.log, ctx: c.ctx, wg: &c.wg, tasks: &c.taskRunner,
		power: &c.ctPower, lrm: &ha.lrm, rules: &ha.rules}
	ha.lrm = haLRM{haParts: hp, log: c.log, tasks: &c.taskRunner, power: &c.ctPower, migrator: &c.ctMigrator,
		vms: struct {
			*vmPower
			*vmMigrator
		}{&c.vmPower, &c.vmMigrator}}
	ha.guest = haGuest{haParts: hp, tasks: &c.taskRunner, resources: &ha.resources, rules: &ha.rules}
	c.haAPI = haAPIParts{&ha.resources, &ha.rules, &ha.groups, &ha.status}
}

// wirePools wires pools: the cluster view for the members and the
// journal.
func wirePools(c *Cluster) {
	c.pools = pools{
		stateMu: &c.mu,
		state:   func() *State { return c.st },
		view:    &c.clusterView,
		journal: &c.persistence,
	}
}

// wireFirewall wires the firewall's parts: each the same fwParts (the
// node check and the journal), fwConfig the clock besides.
func wireFirewall(c *Cluster) {
	fp := fwParts{
		stateMu: &c.mu,
		state:   func() *State { return c.st },
		nodes:   &c.guests,
		journal: &c.persistence,
	}
	c.fwConfig = fwConfig{fwParts: fp, clock: c.now}
	c.fwAliases = fwAliases{fp}
	c.fwIPSets = fwIPSets{fp}
	c.fwRules = fwRules{fp}
	c.fwGroups = fwGroups{fp}
}

// wireQemu wires the VM parts (qemu-server's API): each the same
// vmParts (the node check, the storage layer, tasks, the journal, the
// config flocks and the runtime), and what else each calls: vmPower's
// start, vmRestorer, vmCreator's drive checks, vmCloner's base volumes,
// ctConfig's access checks, ctCreator's vdisk_create_base, ctDisks'
// rename_volume, and the Cluster's memory admission as a function.
func wireQemu(c *Cluster) {
	vp := vmParts{
		stateMu:       &c.mu,
		state:         func() *State { return c.st },
		clock:         c.now,
		ctx:           c.ctx,
		nodes:         &c.guests,
		storage:       &c.storage,
		tasks:         &c.taskRunner,
		journal:       &c.persistence,
		vmLocks:       &configLocks{m: map[int]chan struct{}{}, file: "/var/lock/qemu-server/lock-%d.conf"},
		vmRuntimeHook: &c.vmRuntimeHook,
	}
	c.vmPower = vmPower{vmParts: vp, version: c.opts.Version, admit: c.admitBytesLocked, ha: &c.ha.guest}
	c.vmMigrator = vmMigrator{vmParts: vp, ha: &c.ha.guest}
	c.vmSnapshots = vmSnapshots{vmParts: vp, power: &c.vmPower}
	c.vmRestorer = vmRestorer{vmParts: vp, volumes: &c.ctConfig, power: &c.vmPower}
	c.vmCloner = vmCloner{vmParts: vp, images: &c.vmCreator, bases: &c.ctCreator, firewall: &c.fwConfig}
	c.vmDisks = vmDisks{vmParts: vp, templates: &c.vmCloner, renames: &c.ctDisks}
	c.vmDestroyer = vmDestroyer{vmParts: vp, bases: &c.vmCloner, ha: &c.ha.guest}
	c.vmConfig = vmConfig{vmParts: vp, drives: &c.vmCreator}
	c.vmCreator = vmCreator{vmParts: vp, power: &c.vmPower, restorer: &c.vmRestorer}
}
