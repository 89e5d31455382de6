package model

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
)

// Persistence: Dir/state.json is a full snapshot of the State and
// Dir/state.journal an append-only log of the changes made since, one
// JSON line per saveLocked holding every object that change touched.
// Appending a line costs what the change touched, not the size of the
// cluster; when the journal has grown to a few times the snapshot, the
// next save writes a new snapshot (temp file + rename) and empties the
// journal, so the amortized cost per change stays constant.
//
// Crash safety: a kill at any moment leaves a snapshot that loads (it is
// only ever replaced by rename) and a journal whose last line may be
// torn; loading stops at the first line that does not decode, so a
// change is either there whole or not at all. Each line carries a
// sequence number and the snapshot the last number it includes, so a
// crash between writing a snapshot and emptying the journal replays
// nothing twice. Nothing is fsynced (see saveLocked).
//
// Which objects a change touched is recorded by the code that changes
// them (markGuest, markVolume, markTask, markCore). A missed mark would
// lose a change at the next restart, so test binaries check after every
// save that replaying the files gives the state held in memory
// (checkJournal).

// journalEntry is one line of the journal. A nil guest or volume means
// it was removed.
type journalEntry struct {
	Seq     uint64               `json:"seq"`
	NextPID int                  `json:"next_pid"`
	Core    *coreState           `json:"core,omitempty"`
	Guests  map[int]*guestRecord `json:"guests,omitempty"`
	Volumes map[string]*Volume   `json:"volumes,omitempty"`
	Tasks   []*Task              `json:"tasks,omitempty"`
}

// coreState is the small, rarely changed part of the State.
type coreState struct {
	Nodes           []*Node                `json:"nodes"`
	Storages        []*Storage             `json:"storages"`
	Access          *Access                `json:"access"`
	Creds           BootstrapCredential    `json:"creds"`
	Firewall        map[int]*GuestFirewall `json:"firewall,omitempty"`
	ClusterFirewall *ClusterFirewall       `json:"cluster_firewall,omitempty"`
	HA              *HA                    `json:"ha,omitempty"`
	VMs             map[int]*VM            `json:"vms,omitempty"`
}

// guestRecord is a CT with its creation secrets.
type guestRecord struct {
	Guest *Guest      `json:"guest"`
	Extra *GuestExtra `json:"extra,omitempty"`
}

// Compaction: a snapshot is written when the journal exceeds
// journalFactor times the last snapshot's size, and at least
// journalMinBytes.
const (
	journalFactor   = 4
	journalMinBytes = 256 << 10
)

// persistence owns what saving the State needs: what changed since the
// last save, the open journal, its last sequence number and the sizes
// that decide when to write a snapshot. shadow is the test binaries'
// replayed copy. Its fields are p.mu's, like the State it saves.
type persistence struct {
	// What it reaches of the cluster: its directory, the State's lock,
	// the State, and the guests' change counter.
	dir          string
	stateMu      *stateMutex
	state        func() *State
	guestChanged func()

	dirty         dirtySet
	journal       *os.File
	seq           uint64
	journalBytes  int64
	snapshotBytes int64
	shadow        *State
}

// dirtySet is what changed since the last save (p.mu held for writing).
type dirtySet struct {
	core    bool
	guests  map[int]bool
	volumes map[string]bool
	tasks   []*Task // in the order they were marked, once each
	taskSet map[*Task]bool
}

func (d *dirtySet) empty() bool {
	return !d.core && len(d.guests) == 0 && len(d.volumes) == 0 && len(d.tasks) == 0
}

func (d *dirtySet) reset() { *d = dirtySet{} }

// markCore records a change to nodes, storages, access or credentials.
func (p *persistence) markCore() { p.dirty.core = true }

// markGuest records a change to CT vmid's config or state (or its removal).
func (p *persistence) markGuest(vmid int) {
	p.guestChanged()
	if p.dirty.guests == nil {
		p.dirty.guests = map[int]bool{}
	}
	p.dirty.guests[vmid] = true
}

// markVolume records a change to the volume volid on node (or its removal).
func (p *persistence) markVolume(node, volid string) {
	if p.dirty.volumes == nil {
		p.dirty.volumes = map[string]bool{}
	}
	p.dirty.volumes[p.state().volKey(node, volid)] = true
}

// markGuestVolumes marks every volume g's config, pending changes and
// snapshots name.
func (p *persistence) markGuestVolumes(g *Guest) {
	mark := func(conf map[string]string) {
		for k, v := range conf {
			if isVolumeKey(k) {
				if volid := volumeOf(k, v); volid != "" {
					p.markVolume(g.Node, volid)
				}
			}
		}
	}
	mark(g.Config)
	mark(g.Pending)
	for _, s := range g.Snapshots {
		mark(s.Config)
	}
}

// markTask records a change to t (a new task, a log line, its end). A task
// not in the list (rotated out, or a synchronous call's log) stays out.
func (p *persistence) markTask(t *Task) {
	if !t.listed || p.dirty.taskSet[t] {
		return
	}
	if p.dirty.taskSet == nil {
		p.dirty.taskSet = map[*Task]bool{}
	}
	p.dirty.taskSet[t] = true
	p.dirty.tasks = append(p.dirty.tasks, t)
}

func (p *persistence) journalPath() string { return filepath.Join(p.dir, "state.journal") }

// statePath is the State's snapshot file.
func (p *persistence) statePath() string { return filepath.Join(p.dir, "state.json") }

// entryLocked builds the journal line for what is dirty.
func (p *persistence) entryLocked() *journalEntry {
	st := p.state()
	e := &journalEntry{Seq: p.seq + 1, NextPID: st.NextPID}
	if p.dirty.core {
		e.Core = &coreState{Nodes: st.Nodes, Storages: st.Storages, Access: st.Access, Creds: st.Creds, Firewall: st.Firewall, ClusterFirewall: st.ClusterFirewall, HA: st.HA, VMs: st.VMs}
	}
	if len(p.dirty.guests) > 0 {
		e.Guests = make(map[int]*guestRecord, len(p.dirty.guests))
		for vmid := range p.dirty.guests {
			var r *guestRecord
			if g := st.Guests[vmid]; g != nil {
				r = &guestRecord{Guest: g, Extra: st.Extra[vmid]}
				// A change to a CT may change its volumes too (size,
				// snapshots): they go along.
				p.markGuestVolumes(g)
			}
			e.Guests[vmid] = r
		}
	}
	if len(p.dirty.volumes) > 0 {
		e.Volumes = make(map[string]*Volume, len(p.dirty.volumes))
		for k := range p.dirty.volumes {
			e.Volumes[k] = st.Volumes[k]
		}
	}
	for _, t := range p.dirty.tasks {
		if t.listed {
			e.Tasks = append(e.Tasks, t)
		}
	}
	return e
}

// apply replays e onto st, as the change it records did.
func (e *journalEntry) apply(st *State) {
	st.NextPID = e.NextPID
	if e.Core != nil {
		st.Nodes, st.Storages, st.Access, st.Creds = e.Core.Nodes, e.Core.Storages, e.Core.Access, e.Core.Creds
		st.Firewall, st.ClusterFirewall = e.Core.Firewall, e.Core.ClusterFirewall
		st.HA = e.Core.HA
		st.VMs = e.Core.VMs
	}
	for vmid, r := range e.Guests {
		if r == nil || r.Guest == nil {
			delete(st.Guests, vmid)
			delete(st.Extra, vmid)
			continue
		}
		st.Guests[vmid] = r.Guest
		if r.Extra != nil {
			st.Extra[vmid] = r.Extra
		} else {
			delete(st.Extra, vmid)
		}
	}
	for k, v := range e.Volumes {
		if v == nil {
			delete(st.Volumes, k)
		} else {
			st.Volumes[k] = v
		}
	}
	for _, t := range e.Tasks {
		i := slices.IndexFunc(st.Tasks, func(o *Task) bool { return o.UPID == t.UPID })
		if i >= 0 {
			st.Tasks[i] = t
			continue
		}
		st.Tasks = append(st.Tasks, t)
		if len(st.Tasks) > maxTasks {
			st.Tasks = slices.Delete(st.Tasks, 0, len(st.Tasks)-maxTasks)
		}
	}
	st.fixup()
}

// saveLocked makes the changes marked since the last save durable (for
// every process: a rename or an append, no fsync, see persistence above):
// one journal line, or a new snapshot when the journal has grown enough.
// It does not fsync: a rename or append is atomic for every process, and
// an emulator need not survive a power cut, while an fsync per API write
// made a thousand-container run spend most of its time waiting for the
// disk. p.mu must be held for writing.
func (p *persistence) saveLocked() error {
	if p.dirty.empty() {
		return nil
	}
	if p.journalBytes > max(journalFactor*p.snapshotBytes, journalMinBytes) {
		return p.compactLocked()
	}
	line, err := json.Marshal(p.entryLocked())
	if err != nil {
		return fmt.Errorf("model: encode state change: %w", err)
	}
	line = append(line, '\n')
	if p.journal == nil {
		f, err := os.OpenFile(p.journalPath(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return fmt.Errorf("model: open journal: %w", err)
		}
		p.journal = f
	}
	if _, err := p.journal.Write(line); err != nil {
		// The line may be half written: only a snapshot makes the state
		// whole again.
		p.journal.Close()
		p.journal = nil
		if cerr := p.compactLocked(); cerr != nil {
			return fmt.Errorf("model: append to journal: %w", errors.Join(err, cerr))
		}
		return nil
	}
	p.seq++
	p.journalBytes += int64(len(line))
	p.dirty.reset()
	p.checkJournalLocked(line)
	return nil
}

// compactLocked writes the whole state as a new snapshot and empties the
// journal. p.mu must be held for writing.
func (p *persistence) compactLocked() error {
	p.state().JournalSeq = p.seq
	data, err := json.Marshal(p.state())
	if err != nil {
		return fmt.Errorf("model: encode state: %w", err)
	}
	if err := writeFile(p.statePath(), data, 0o600, false); err != nil {
		return err
	}
	// The snapshot now holds every line's change; a crash before the
	// truncation leaves lines whose seq it already covers.
	if p.journal != nil {
		p.journal.Close()
		p.journal = nil
	}
	if err := os.Truncate(p.journalPath(), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("model: empty journal: %w", err)
	}
	p.snapshotBytes, p.journalBytes = int64(len(data)), 0
	p.dirty.reset()
	p.checkJournalLocked(nil)
	return nil
}

// closeJournal writes a final snapshot, so Dir/state.json alone holds the
// state of a stopped emulator, and closes the journal.
func (p *persistence) closeJournal() error {
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	err := p.compactLocked()
	if p.journal != nil {
		p.journal.Close()
		p.journal = nil
	}
	return err
}

// loadState reads the snapshot and replays the journal lines after it.
// It returns the last sequence number applied.
func loadState(path, journal string) (*State, uint64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, 0, fmt.Errorf("model: decode %s: %w", path, err)
	}
	st.fixup()
	seq := st.JournalSeq
	f, err := os.Open(journal)
	if errors.Is(err, os.ErrNotExist) {
		return &st, seq, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("model: %w", err)
	}
	defer f.Close()
	if seq, err = replay(&st, f, seq); err != nil {
		return nil, 0, fmt.Errorf("model: read %s: %w", journal, err)
	}
	return &st, seq, nil
}

// replay applies the journal lines of r numbered after seq, in order,
// and stops at the first torn line: the change a crash interrupted.
func replay(st *State, r io.Reader, seq uint64) (uint64, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var e journalEntry
			if json.Unmarshal(line, &e) != nil || e.Seq == 0 {
				return seq, nil // torn: the rest was never written
			}
			if e.Seq > seq {
				if e.Seq != seq+1 {
					return seq, fmt.Errorf("journal jumps from change %d to %d", seq, e.Seq)
				}
				e.apply(st)
				seq = e.Seq
			}
		}
		if errors.Is(err, io.EOF) {
			return seq, nil
		}
		if err != nil {
			return seq, err
		}
	}
}

// checkJournal makes test binaries verify, after every save, that the
// files on disk replay to the state in memory, so a change whose code
// forgot to mark what it touched fails the test that made it. The
// benchmarks turn it off.
var checkJournal atomic.Bool

func init() { checkJournal.Store(testing.Testing()) }

// SetJournalCheck turns the after-save check of test binaries on or off
// (benchmarks measure without it). It has no effect outside tests, where
// it is off.
func SetJournalCheck(on bool) { checkJournal.Store(on && testing.Testing()) }

// checkJournalLocked is the check itself: line (the journal line just
// appended, nil after a snapshot) is decoded and replayed onto a State
// read back from the files, whose encoding must be the state in memory's.
func (p *persistence) checkJournalLocked(line []byte) {
	if !checkJournal.Load() {
		p.shadow = nil
		return
	}
	if line == nil || p.shadow == nil {
		st, _, err := loadState(p.statePath(), p.journalPath())
		if err != nil {
			panic(fmt.Sprintf("model: journal check: %v", err))
		}
		p.shadow = st
	} else {
		if _, err := replay(p.shadow, bytes.NewReader(line), p.seq-1); err != nil {
			panic(fmt.Sprintf("model: journal check: %v", err))
		}
	}
	p.shadow.JournalSeq = p.state().JournalSeq
	a, _ := json.Marshal(p.shadow)
	b, _ := json.Marshal(p.state())
	if !bytes.Equal(a, b) {
		panic(fmt.Sprintf("model: the state on disk differs from the state in memory after a save: a change was not marked (markGuest, markVolume, markTask, markCore)\ndisk:   %s\nmemory: %s", firstDiff(a, b), firstDiff(b, a)))
	}
}

// firstDiff returns a's text around its first difference from b.
func firstDiff(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo, hi := max(i-200, 0), min(i+200, len(a))
	return string(a[lo:hi])
}
