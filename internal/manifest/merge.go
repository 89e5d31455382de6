package manifest

import (
	"fmt"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/corralhq/corral/internal/localfile"
)

// Override files (corral plan -f BASE -f OVERRIDE …) are merged into the
// first file as YAML, before anything is decoded, the way docker compose
// merges its override files: the merged tree is then checked as one
// manifest, so an override can neither skip a check nor hide a problem.
//
// The rules (docs/manifest.md, "Override files"):
//   - mappings merge key by key; a scalar, and a list without a rule
//     below, is replaced as a whole;
//   - apps and volumes are matched by name and merged key by key;
//   - provision steps and health checks are matched by name (name:, or
//     the name corral derives, such as "file: /etc/app.conf") and a
//     matched one is replaced as a whole: a step is one action, and half
//     of one merged with half of another is an action nobody wrote;
//   - outputs are matched by name and replaced;
//   - an item that matches none is put right after the item written
//     before it in the override (so a new step can go between two of the
//     base's), or at the end when it is the override's first;
//   - project: stays the first file's: it decides which containers
//     corral prunes and who declares them.
//
// Relative paths (${file:…}, source:) stay relative to the file they are
// written in, and every problem names that file and its line.

// Source is one manifest file's name and bytes, for ParseFiles.
type Source struct {
	Name string
	Data []byte
}

// LoadFiles reads the manifest at paths[0] and merges each later file
// into it, in order. One path is Load.
func LoadFiles(paths []string, opts LoadOptions) (*File, error) {
	srcs := make([]Source, len(paths))
	for i, p := range paths {
		data, err := opts.readFile(p, localfile.MaxManifest)
		if err != nil {
			return nil, fmt.Errorf("read manifest: %w", err)
		}
		srcs[i] = Source{Name: p, Data: data}
	}
	return ParseFiles(srcs, opts)
}

// listRule says how a list of a mapping is merged: its items' identity
// and whether a matched item is merged key by key or replaced.
type listRule struct {
	id    func(item *yaml.Node, app string) string
	merge bool
}

var (
	rootLists = map[string]listRule{
		"apps":    {id: nameOf, merge: true},
		"outputs": {id: nameOf},
	}
	appLists = map[string]listRule{
		"volumes":   {id: nameOf, merge: true},
		"provision": {id: stepID},
		"health":    {id: checkID},
	}
)

// merger merges override trees into the first file's tree.
type merger struct {
	d *decoder
}

// mergeRoot merges the override root over into base, the first file's.
func (m merger) mergeRoot(base, over *yaml.Node) {
	over = deref(over)
	if over.Kind != yaml.MappingNode {
		m.d.report(over, "", "an override file must be a mapping like the manifest, got "+describe(over), "")
		return
	}
	if k, v := lookup(over, "project"); k != nil {
		if bk, bv := lookup(base, "project"); bk == nil || deref(bv).Value != deref(v).Value {
			m.d.report(k, "project", "an override cannot change the project: it is the first file's ("+
				m.d.file+"), which decides the containers corral prunes; set project: there, or leave it out here", "")
		}
	}
	m.mapping(base, over, "", rootLists)
}

// mapping merges the mapping over into base, key by key; lists names the
// keys whose lists are matched by identity.
func (m merger) mapping(base, over *yaml.Node, app string, lists map[string]listRule) {
	seen := map[string]bool{}
	for i := 0; i+1 < len(over.Content); i += 2 {
		k, v := over.Content[i], over.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" || seen[k.Value] {
			// Left to the decoder, which reports it at this key.
			base.Content = append(base.Content, k, v)
			continue
		}
		seen[k.Value] = true
		j := keyIndex(base, k.Value)
		if j < 0 {
			base.Content = append(base.Content, k, v)
			continue
		}
		bv, ov := deref(base.Content[j+1]), deref(v)
		rule, listed := lists[k.Value]
		switch {
		case listed && bv.Kind == yaml.SequenceNode && ov.Kind == yaml.SequenceNode:
			m.list(m.own(&base.Content[j+1]), ov, app, rule)
		case !listed && bv.Kind == yaml.MappingNode && ov.Kind == yaml.MappingNode:
			m.mapping(m.own(&base.Content[j+1]), ov, app, nil)
		default:
			base.Content[j], base.Content[j+1] = k, v
		}
	}
}

// list merges the list over into base by rule: a matched item is merged
// or replaced in place, a new one goes after the override's previous
// item (at the end when it is the first).
func (m merger) list(base, over *yaml.Node, app string, rule listRule) {
	at := len(base.Content) - 1
	for _, item := range over.Content {
		id := rule.id(deref(item), app)
		j := -1
		for i, b := range base.Content {
			if id != "" && rule.id(deref(b), app) == id {
				j = i
				break
			}
		}
		switch {
		case j < 0:
			at++
			base.Content = append(base.Content[:at], append([]*yaml.Node{item}, base.Content[at:]...)...)
			continue
		case rule.merge && deref(base.Content[j]).Kind == yaml.MappingNode && deref(item).Kind == yaml.MappingNode:
			b := m.own(&base.Content[j])
			name := app
			if app == "" { // an app: its own lists know its name
				name = id
			}
			m.mapping(b, deref(item), name, appLists)
		default:
			base.Content[j] = item
		}
		at = j
	}
}

// own makes *slot safe to change in place: an alias, or a node with an
// anchor that aliases elsewhere share, is replaced by a copy of its own.
func (m merger) own(slot **yaml.Node) *yaml.Node {
	n := *slot
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	} else if n.Anchor == "" {
		return n
	}
	c := m.clone(n)
	c.Anchor = ""
	*slot = c
	return c
}

// clone is a deep copy of n (aliases still point at their anchors), with
// the file each node came from.
func (m merger) clone(n *yaml.Node) *yaml.Node {
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, k := range n.Content {
		c.Content[i] = m.clone(k)
	}
	if f, ok := m.d.origins[n]; ok {
		m.d.origins[&c] = f
	}
	return &c
}

// markOrigin records that every node of the tree at n was written in
// file, so that problems and relative paths name it.
func (d *decoder) markOrigin(n *yaml.Node, file string) {
	if n == nil || d.origins[n] != "" {
		return
	}
	d.origins[n] = file
	for _, c := range n.Content {
		d.markOrigin(c, file)
	}
}

// fileOf is the file node n was written in.
func (d *decoder) fileOf(n *yaml.Node) string {
	if f, ok := d.origins[n]; ok {
		return f
	}
	return d.file
}

// dirOf is the base of relative paths written at node n: its file's
// directory.
func (d *decoder) dirOf(n *yaml.Node) string {
	if f, ok := d.origins[n]; ok {
		return filepath.Dir(f)
	}
	return d.dir
}

func deref(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		return n.Alias
	}
	return n
}

// keyIndex is the index of key's key node in mapping n, or -1.
func keyIndex(n *yaml.Node, key string) int {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		return -1
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Value == key {
			return i
		}
	}
	return -1
}

// lookup is key's key and value nodes in mapping n, or nils.
func lookup(n *yaml.Node, key string) (k, v *yaml.Node) {
	i := keyIndex(n, key)
	if i < 0 {
		return nil, nil
	}
	n = deref(n)
	return n.Content[i], n.Content[i+1]
}

// scalarAt is the text of the scalar at key in mapping n, or "".
func scalarAt(n *yaml.Node, key string) string {
	if _, v := lookup(n, key); v != nil && deref(v).Kind == yaml.ScalarNode {
		return deref(v).Value
	}
	return ""
}

// nameOf identifies an app, a volume or an output: its name.
func nameOf(n *yaml.Node, _ string) string { return scalarAt(n, "name") }

// stepID identifies a provision step as buildStep names it: its name:,
// else KIND: SUBJECT from the step as written.
func stepID(n *yaml.Node, app string) string {
	if name := scalarAt(n, "name"); name != "" {
		return name
	}
	for _, kind := range []string{"run", "file", "envFile", "compose", "user"} {
		_, v := lookup(n, kind)
		if v == nil {
			continue
		}
		v = deref(v)
		switch kind {
		case "run":
			return "run: " + scriptSubject(v.Value, GuestFacts)
		case "compose":
			if _, p := lookup(v, "path"); p != nil {
				return "compose: " + shown(deref(p).Value)
			}
			return "compose: /opt/" + app + "/compose.yaml"
		case "user":
			return "user: " + shown(scalarAt(v, "name"))
		}
		return kind + ": " + shown(scalarAt(v, "path"))
	}
	return ""
}

// checkID identifies a health check as buildHealth names it.
func checkID(n *yaml.Node, _ string) string {
	if name := scalarAt(n, "name"); name != "" {
		return name
	}
	for _, kind := range []string{"http", "tcp", "command"} {
		if _, v := lookup(n, kind); v != nil {
			if kind == "command" {
				return kind + ": " + scriptSubject(deref(v).Value, nil)
			}
			return kind + ": " + shown(deref(v).Value)
		}
	}
	return ""
}

// literal is s as a value: its text with $${ read as ${, and whether it
// holds references (to the environment, a file or an app's fact), which
// make a name show s as written.
func literal(s string, facts []string) (text string, refs, appFacts bool) {
	parts, problem := parseTemplate(s, facts)
	if problem != "" {
		return s, true, false
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.lit)
	}
	return b.String(), len(references(parts)) > 0 || len(factRefs(parts)) > 0, len(factRefs(parts)) > 0
}

// shown is a string value as a derived name shows it: as written when it
// holds a reference, else its value.
func shown(s string) string {
	if text, refs, _ := literal(s, nil); !refs {
		return text
	}
	return s
}

// scriptSubject is how a script names its step or check, as buildStep
// and buildHealth do: the first line of its value, or all of it as
// written when it holds a reference (its first line when the reference
// is an app's fact).
func scriptSubject(s string, facts []string) string {
	text, refs, appFacts := literal(s, facts)
	switch {
	case !refs:
		return firstLine(text)
	case appFacts:
		return firstLine(s)
	}
	return s
}
