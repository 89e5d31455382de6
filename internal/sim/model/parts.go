package model

// Wiring: each part of the Cluster gets the State's lock, the State and
// the other parts it calls, as the narrow fields and interfaces it
// declares (docs/architecture.md, "How the parts reach each other").
// Parts still built on the whole Cluster are wired in newCluster.

// wireCore wires the parts every other one uses: tasks, storage,
// access control, the cluster views and persistence.
func (c *Cluster) wireCore() {
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
func (c *Cluster) wireGuests() {
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
		firewall: &c.firewall,
		tasks:    &c.taskRunner,
		journal:  &c.persistence,

		haConfigured: c.haConfiguredLocked,
		purgeHA:      c.purgeHAResourceLocked,
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
