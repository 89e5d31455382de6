package cli

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/bounded"
	"github.com/corralhq/corral/internal/localfile"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/ui"
)

// savedPlanFormat is the format of the plan files corral plan --out
// writes (docs/saved-plan.md); a reader refuses any other.
const savedPlanFormat = "corral-plan/1"

// savedPlanMaxBytes and savedPlanLimits bound what apply FILE reads: any
// path can be given, so a device, a FIFO or a file that is not a plan
// must be refused before it fills memory. The largest manifest (10,000
// apps, 4 MiB) makes a plan of about 30 MiB with some 1.5 million values.
const savedPlanMaxBytes = 64 << 20

var savedPlanLimits = bounded.Limits{Size: savedPlanMaxBytes, Depth: 32, Values: 4_000_000}

// savedPlan is a plan written by corral plan --out and carried out by
// corral apply FILE. It holds no secret value: the manifest's secrets are
// read again from their sources when it is applied, and the plan keeps
// only a keyed digest of them (and of the manifest's bytes), so that a
// change is found.
type savedPlan struct {
	Format  string `json:"format"`
	Created string `json:"created"`
	// Manifest is the manifest's absolute path; apply reads it again.
	Manifest string `json:"manifest"`
	// Overrides are the override files merged over it (-f … -f …), as
	// absolute paths in order; apply reads and merges them again.
	Overrides []string `json:"overrides,omitempty"`
	Project   string   `json:"project"`
	Targets   []string `json:"targets,omitempty"`
	Rerun     []string `json:"rerun,omitempty"`
	Recover   bool     `json:"recover,omitempty"`
	// Salt (random, per file) keys the two digests, so that a digest
	// cannot be compared with a guess made elsewhere.
	Salt           string `json:"salt"`
	ManifestDigest string `json:"manifest_digest"`
	SecretsDigest  string `json:"secrets_digest"`
	// Preconditions are the config digests of the containers the plan
	// was made against.
	Preconditions []precondition `json:"preconditions"`
	Plan          ui.PlanJSON    `json:"plan"`
}

// precondition is one container's config as the plan read it.
type precondition struct {
	App    string `json:"app"`
	VMID   int    `json:"vmid"`
	Node   string `json:"node"`
	Digest string `json:"digest"`
}

// isPlanPath reports whether a command-line argument of apply names a
// saved plan file rather than an app: app names have neither a dot nor a
// slash (manifest's name pattern), so "web.plan" and "./web" are files.
func isPlanPath(arg string) bool { return strings.ContainsAny(arg, "./") }

// newSavedPlan records p (pj, as shown) and what it was made from.
func newSavedPlan(f *manifest.File, o planOpts, rerun []string, p *plan.Plan, pj *ui.PlanJSON) (*savedPlan, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return nil, fmt.Errorf("saved plan: salt: %w", err)
	}
	abs, err := absPaths(append([]string{f.Path}, f.Overrides...))
	if err != nil {
		return nil, fmt.Errorf("saved plan: %w", err)
	}
	sp := &savedPlan{Format: savedPlanFormat, Created: time.Now().UTC().Format(time.RFC3339), Manifest: abs[0], Overrides: abs[1:], Project: f.Project,
		Targets: o.targets, Rerun: rerun, Recover: o.recoverOffline, Salt: hex.EncodeToString(salt),
		Preconditions: preconditions(p), Plan: *pj}
	if sp.ManifestDigest, sp.SecretsDigest, err = sp.digests(f); err != nil {
		return nil, err
	}
	return sp, nil
}

func absPaths(paths []string) ([]string, error) {
	out := make([]string, len(paths))
	for i, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		out[i] = abs
	}
	return out, nil
}

// preconditions are the config digests p's changes were planned against.
func preconditions(p *plan.Plan) []precondition {
	out := []precondition{}
	for _, c := range p.Changes {
		if c.Digest != "" {
			out = append(out, precondition{App: c.App, VMID: c.OldVMID, Node: c.Node, Digest: c.Digest})
		}
	}
	return out
}

// digests are the keyed digests of the bytes on disk of f's files (the
// manifest, then its override files) and of its secret values, read now.
func (sp *savedPlan) digests(f *manifest.File) (manifestDigest, secretsDigest string, err error) {
	salt, err := hex.DecodeString(sp.Salt)
	if err != nil {
		return "", "", fmt.Errorf("saved plan: salt: %w", err)
	}
	var texts [][]byte
	for _, p := range append([]string{f.Path}, f.Overrides...) {
		text, err := localfile.Read(p, localfile.MaxManifest)
		if err != nil {
			return "", "", fmt.Errorf("saved plan: read the manifest: %w", err)
		}
		texts = append(texts, text)
	}
	return keyedDigest(salt, texts), keyedDigest(salt, stringsAsBytes(f.Secrets())), nil
}

// keyedDigest is HMAC-SHA256 under salt of parts, each length-prefixed so
// that no two lists give the same input.
func keyedDigest(salt []byte, parts [][]byte) string {
	h := hmac.New(sha256.New, salt)
	for _, b := range parts {
		_ = binary.Write(h, binary.BigEndian, uint64(len(b)))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func stringsAsBytes(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// write writes the plan to path atomically (a temporary file in the same
// directory, renamed), readable by its owner only.
func (sp *savedPlan) write(path string) error {
	b, err := json.MarshalIndent(sp, "", "  ")
	if err != nil {
		return fmt.Errorf("write plan %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".corral-plan-*")
	if err != nil {
		return fmt.Errorf("write plan %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after the rename, nothing is there
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write plan %s: %w", path, err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write plan %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write plan %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write plan %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write plan %s: %w", path, err)
	}
	return nil
}

// readSavedPlan reads a plan corral plan --out wrote.
func readSavedPlan(path string) (*savedPlan, error) {
	b, err := localfile.Read(path, savedPlanMaxBytes)
	if err != nil {
		return nil, fmt.Errorf("read saved plan: %w (an argument with a dot or a slash is a saved plan file, which `corral plan --out` writes; app names have neither)", err)
	}
	if err := bounded.JSON(b, savedPlanLimits); err != nil {
		return nil, fmt.Errorf("read saved plan %s: %v: not a plan written by `corral plan --out`", path, err)
	}
	var sp savedPlan
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&sp); err != nil || !strings.HasPrefix(sp.Format, "corral-plan/") {
		return nil, fmt.Errorf("read saved plan %s: not a plan written by `corral plan --out` (want format %q)", path, savedPlanFormat)
	}
	if sp.Format != savedPlanFormat {
		return nil, fmt.Errorf("read saved plan %s: format %q, this corral reads %q: run `corral plan --out %s` again", path, sp.Format, savedPlanFormat, path)
	}
	return &sp, nil
}

// staleManifest lists what changed in f (its bytes, its secret values)
// since the plan was saved.
func (sp *savedPlan) staleManifest(f *manifest.File) ([]string, error) {
	md, sd, err := sp.digests(f)
	if err != nil {
		return nil, err
	}
	var diffs []string
	if md != sp.ManifestDigest {
		what := "the manifest " + sp.Manifest
		if len(sp.Overrides) > 0 {
			what += " or an override file (" + strings.Join(sp.Overrides, ", ") + ")"
		}
		diffs = append(diffs, what+" changed")
	}
	if sd != sp.SecretsDigest {
		diffs = append(diffs, "a secret the manifest reads (a password, an ${env:…} or ${file:…} value) changed")
	}
	return diffs, nil
}

// stalePlan lists how a plan made now (p, pj as shown) differs from the
// saved one: a container whose config changed since, an app whose change
// differs, keeper work (unless underLock: taking the lock may have made a
// keeper the plan creates) that differs, an interrupted restore (a saved
// plan has none: savePlan refuses one).
func (sp *savedPlan) stalePlan(p *plan.Plan, pj *ui.PlanJSON, underLock bool) []string {
	var diffs []string
	now := preconditions(p)
	for _, was := range sp.Preconditions {
		i := slices.IndexFunc(now, func(c precondition) bool { return c.VMID == was.VMID })
		switch {
		case i < 0:
			diffs = append(diffs, fmt.Sprintf("container %d (app %s) is no longer planned against", was.VMID, was.App))
		case now[i].Digest != was.Digest:
			diffs = append(diffs, fmt.Sprintf("container %d (app %s) on %s: its config changed since the plan was made (digest %.12s → %.12s)", was.VMID, was.App, was.Node, was.Digest, now[i].Digest))
		}
	}
	diffs = append(diffs, changeDiffs(sp.Plan.Changes, pj.Changes)...)
	if !underLock && !sameJSON(sp.Plan.Keepers, pj.Keepers) {
		diffs = append(diffs, fmt.Sprintf("keeper work: the saved plan has %s, a plan made now %s", keeperWork(sp.Plan.Keepers), keeperWork(pj.Keepers)))
	}
	for _, r := range pj.Recover {
		diffs = append(diffs, "a plan made now first finishes an interrupted restore: "+r)
	}
	return diffs
}

// changeDiffs names the apps whose change differs between two plans.
func changeDiffs(was, now []ui.ChangeJSON) []string {
	var diffs []string
	find := func(cs []ui.ChangeJSON, app string) (ui.ChangeJSON, bool) {
		i := slices.IndexFunc(cs, func(c ui.ChangeJSON) bool { return c.App == app })
		if i < 0 {
			return ui.ChangeJSON{}, false
		}
		return cs[i], true
	}
	for _, w := range was {
		n, ok := find(now, w.App)
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("app %s: the saved plan has a %s, a plan made now nothing", w.App, w.Action))
		case n.Action != w.Action:
			diffs = append(diffs, fmt.Sprintf("app %s: the saved plan has a %s, a plan made now a %s", w.App, w.Action, n.Action))
		case !sameJSON(w.Facts, n.Facts):
			diffs = append(diffs, factDiffs(w, n)...)
		case !sameJSON(w, n):
			diffs = append(diffs, fmt.Sprintf("app %s: the saved plan's %s differs from a plan made now", w.App, w.Action))
		}
	}
	for _, n := range now {
		if _, ok := find(was, n.App); !ok {
			diffs = append(diffs, fmt.Sprintf("app %s: a plan made now has a %s, the saved plan nothing", n.App, n.Action))
		}
	}
	return diffs
}

// factDiffs names the facts of other apps that app's guest work reads
// (${app:APP.FACT}) whose value differs between the saved plan (was) and
// a plan made now: the guest would get other values than those reviewed.
func factDiffs(was, now ui.ChangeJSON) []string {
	shown := func(f ui.FactJSON) string {
		if !f.Known {
			return "known after apply"
		}
		return f.Value
	}
	var diffs []string
	for _, n := range now.Facts {
		w := ui.FactJSON{Ref: n.Ref}
		if i := slices.IndexFunc(was.Facts, func(f ui.FactJSON) bool { return f.Ref == n.Ref }); i >= 0 {
			w = was.Facts[i]
		}
		if w != n {
			diffs = append(diffs, fmt.Sprintf("app %s: ${app:%s} was %s when the plan was made and is %s now", now.App, n.Ref, shown(w), shown(n)))
		}
	}
	if len(diffs) == 0 {
		diffs = append(diffs, fmt.Sprintf("app %s: the saved plan's %s reads other facts of apps than a plan made now", now.App, was.Action))
	}
	return diffs
}

// keeperWork is "create keeper on pve, update keeper 998 on pve2", or
// "none".
func keeperWork(ks []ui.KeeperJSON) string {
	var out []string
	for _, k := range ks {
		id := ""
		if k.VMID != 0 {
			id = fmt.Sprintf(" %d", k.VMID)
		}
		out = append(out, fmt.Sprintf("%s keeper%s on %s", k.Action, id, k.Node))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

func sameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// staleError refuses a saved plan (path) that is not what apply would do
// now; nothing was changed.
func staleError(path string, diffs []string) error {
	return &staleSavedPlanError{Path: path, Diffs: diffs}
}

// staleSavedPlanError is a saved plan refused because the cluster, the
// manifest or its secrets changed since it was made.
type staleSavedPlanError struct {
	Path  string
	Diffs []string
}

func (e *staleSavedPlanError) Error() string {
	return fmt.Sprintf("saved plan %s is stale; nothing was changed:\n  - %s\nrun `corral plan --out %s` again, review it, and apply that",
		e.Path, strings.Join(e.Diffs, "\n  - "), e.Path)
}

var _ error = (*staleSavedPlanError)(nil)

// errPlanAndApps is apply given a saved plan and something else to plan.
var errPlanAndApps = errors.New("apply takes one saved plan file, or app names, not both: the plan file carries its own app names")
