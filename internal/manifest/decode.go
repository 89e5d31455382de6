package manifest

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	goccy "github.com/goccy/go-yaml"
	goccyparser "github.com/goccy/go-yaml/parser"
	"gopkg.in/yaml.v3"

	"github.com/corralhq/corral/internal/lazyre"
)

// value is one decoded manifest value, checked on its own but without
// defaults; build.go turns the tree into Apps.
type value struct {
	f    *field
	node *yaml.Node // where the value is written (an alias, not its anchor)
	path string     // apps[0].volumes[1].size
	ok   bool       // well-formed and valid on its own

	str string // kindString (resolved); kindSize as written
	ref string // the ${…} reference str was read through, or ""
	// apps are the apps an output's value names (${app:APP.FACT}).
	apps []string
	// facts are the facts of apps the value names, each as APP.FACT: in
	// an output's value, or in a string that goes into a guest (field
	// guest), whose str is then a template for ExpandOutput.
	facts []string
	// deferred: ref was left unread (LoadOptions.Lazy), str is empty.
	deferred bool
	num      int64
	b        bool
	size     Size
	dur      time.Duration
	mode     os.FileMode
	obj      map[string]*value
	list     []*value
}

// decoder walks a YAML node tree against the field table, collecting
// every problem into diags.
type decoder struct {
	file    string
	dir     string // base for relative ${file:…} paths
	opts    LoadOptions
	diags   Diagnostics
	secrets []Secret // every sensitive value, for (*File).Secrets
	// unresolved are the references Lazy left unread, by app path
	// ("apps[0]").
	unresolved map[string][]string
	// factUses are the ${app:APP.FACT} references of each app's guest
	// strings, checked once every app is known (checkFacts).
	factUses map[string][]factUse
	visited  int
	// origins are the nodes written in an override file, with its name
	// (merge.go); a node not in it is the first file's.
	origins map[*yaml.Node]string
	// paths are the override files, in order.
	paths []string
}

// maxValues bounds the values one manifest may hold. YAML aliases can make
// a small file expand enormously; real manifests hold a few hundred.
const maxValues = 100_000

func (d *decoder) pos(n *yaml.Node) Pos { return Pos{File: d.fileOf(n), Line: n.Line, Col: n.Column} }

func (d *decoder) report(n *yaml.Node, path, msg, allowed string) {
	d.diags.add(d.pos(n), path, msg, allowed)
}

// parseYAML reads the single YAML document in data. YAML syntax errors
// become diagnostics with the line yaml.v3 reports.
func (d *decoder) parseYAML(data []byte) (root *yaml.Node, ok bool) {
	defer func() {
		// yaml.v3 has panicked on malformed input before; a manifest
		// error must stay a diagnostic.
		if r := recover(); r != nil {
			d.diags.add(Pos{File: d.file, Line: 1}, "", "invalid YAML: the parser failed on this input", "")
			root, ok = nil, false
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			d.diags.add(Pos{File: d.file, Line: 1, Col: 1}, "", "the manifest is empty", "a mapping with the key apps")
		} else {
			d.yamlError(err, data)
		}
		return nil, false
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		d.diags.add(Pos{File: d.file, Line: next.Line, Col: next.Column}, "", "only one YAML document is allowed", "")
		return nil, false
	case !errors.Is(err, io.EOF):
		d.yamlError(err, data)
		return nil, false
	}
	if len(doc.Content) == 0 || doc.Content[0].Tag == "!!null" {
		d.diags.add(Pos{File: d.file, Line: 1, Col: 1}, "", "the manifest is empty", "a mapping with the key apps")
		return nil, false
	}
	return doc.Content[0], true
}

var (
	yamlLineRE   = lazyre.New(`^yaml: line (\d+): (.*)$`)
	yamlAnchorRE = lazyre.New(`^yaml: unknown anchor '(.*)' referenced$`)
)

// yamlParserErrors are the messages of yaml.v3's parser (as opposed to
// its scanner). For these, yaml.v3 prints a 0-based line: the start of
// the enclosing block, or the problem itself (decode.go fail()).
var yamlParserErrors = []string{
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected '-' indicator",
	"did not find expected <document start>",
	"did not find expected <stream-start>",
	"did not find expected key",
	"did not find expected node content",
	"found duplicate %TAG directive",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found undefined tag handle",
}

// yamlTabErrors are yaml.v3's scanner messages about a tab in a line's
// indentation. "found character that cannot start any token" names the
// tab's own line; "found a tab character that violates indentation" names
// the line where the plain scalar it interrupts began (its context), so
// the tab is on that line or a later one.
var yamlTabErrors = []string{
	"found character that cannot start any token",
	"found a tab character that violates indentation",
}

// yamlError turns a yaml.v3 error into a diagnostic with a 1-based line
// and column: a tab in the indentation where the message is about one,
// else where goccy/go-yaml finds the error.
// yaml.v3 leaves the line out when it is the first one, and for an
// unknown anchor, whose use is then found by searching the text.
func (d *decoder) yamlError(err error, data []byte) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line, col := 1, 0
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
		if slices.Contains(yamlParserErrors, msg) {
			line++
		}
	} else if m := yamlAnchorRE.FindStringSubmatch(err.Error()); m != nil {
		if i := bytes.Index(data, []byte("*"+m[1])); i >= 0 {
			line = 1 + bytes.Count(data[:i], []byte("\n"))
			col = i - bytes.LastIndexByte(data[:i], '\n')
		}
	}
	found := col > 0
	if slices.Contains(yamlTabErrors, msg) {
		if l, c, ok := indentTab(data, line); ok {
			line, col, found = l, c, true
		}
	}
	if !found {
		if l, c, ok := syntaxErrorPos(data); ok && l >= line {
			line, col = l, c
		} else {
			col = firstNonBlank(data, line)
		}
	}
	d.diags.add(Pos{File: d.file, Line: line, Col: col}, "", "invalid YAML: "+msg, "")
}

// syntaxErrorPos asks a second YAML parser, goccy/go-yaml, where the
// syntax error is: yaml.v3 keeps the column to itself, and for parser
// errors it names the line where the enclosing block starts. The message
// stays yaml.v3's (the parser whose reading of the manifest counts); the
// position is used only when it is not before the line yaml.v3 names.
func syntaxErrorPos(data []byte) (line, col int, ok bool) {
	defer func() {
		if recover() != nil {
			line, col, ok = 0, 0, false
		}
	}()
	_, err := goccyparser.ParseBytes(data, 0)
	var se *goccy.SyntaxError
	if !errors.As(err, &se) || se.Token == nil || se.Token.Position == nil {
		return 0, 0, false
	}
	p := se.Token.Position
	return p.Line, p.Column, p.Line > 0 && p.Column > 0
}

// firstNonBlank is the 1-based column of the first character of line
// that is not a space or tab (1 for a blank or missing line).
func firstNonBlank(data []byte, line int) int {
	lines := bytes.Split(data, []byte("\n"))
	if line < 1 || line > len(lines) {
		return 1
	}
	text := lines[line-1]
	return len(text) - len(bytes.TrimLeft(text, " \t")) + 1
}

// indentTab finds the first line at or after from (1-based) whose
// indentation holds a tab, and the tab's 1-based column.
func indentTab(data []byte, from int) (line, col int, ok bool) {
	for i, text := range bytes.Split(data, []byte("\n")) {
		if i+1 < from {
			continue
		}
		indent := len(text) - len(bytes.TrimLeft(text, " \t"))
		if t := bytes.IndexByte(text[:indent], '\t'); t >= 0 {
			return i + 1, t + 1, true
		}
	}
	return 0, 0, false
}

// live says that str is a template for ExpandOutput: an output's value,
// or a string that goes into a guest and names an app's fact.
func (v *value) live() bool { return v.f.live || len(v.facts) > 0 }

// walk decodes node n as field f. It always returns a value; ok says
// whether n was well-formed and valid.
func (d *decoder) walk(n *yaml.Node, f *field, path string) *value {
	v := &value{f: f, node: n, path: path}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if d.visited++; d.visited > maxValues {
		if d.visited == maxValues+1 {
			d.report(n, path, fmt.Sprintf("the manifest holds more than %d values; are YAML aliases nested too deeply?", maxValues), "")
		}
		return v
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		d.report(v.node, path, "has no value; set one or remove the key", "")
		return v
	}
	switch f.kind {
	case kindObject:
		d.object(n, v)
	case kindList:
		d.list(n, v)
	case kindString:
		d.string(n, v)
	case kindSize:
		d.size(n, v)
	case kindInt:
		d.int(n, v)
	case kindBool:
		d.bool(n, v)
	case kindDuration:
		d.duration(n, v)
	case kindMode:
		d.mode(n, v)
	}
	return v
}

func (d *decoder) object(n *yaml.Node, v *value) {
	if n.Kind != yaml.MappingNode {
		d.report(v.node, v.path, "must be a mapping, got "+describe(n), "")
		return
	}
	v.ok = true
	v.obj = map[string]*value{}
	first := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.report(k, v.path, "keys must be plain strings, got "+describe(k), "")
			continue
		}
		path := joinPath(v.path, k.Value)
		if k.Tag == "!!merge" {
			d.report(k, path, "YAML merge keys are not supported; write the keys out", "")
			continue
		}
		if at, dup := first[k.Value]; dup {
			d.report(k, path, fmt.Sprintf("duplicate key (first at line %d)", at.Line), "")
			continue
		}
		first[k.Value] = k
		c := v.f.child(k.Value)
		if c == nil {
			if d.diags.skip(d.pos(k)) { // past the problems kept: no suggestion to compute
				continue
			}
			d.report(k, path, unknownKey(k.Value, v.f.keys()), strings.Join(v.f.keys(), ", "))
			continue
		}
		v.obj[k.Value] = d.walk(val, c, path)
	}
	for _, c := range v.f.fields {
		if c.required && first[c.key] == nil {
			d.report(v.node, joinPath(v.path, c.key), "required key is missing", "")
		}
	}
	d.oneOf(v, first)
}

// oneOf checks that exactly one of the object's oneOf keys is written.
// A second one is reported at its key, so the user sees which to move.
func (d *decoder) oneOf(v *value, written map[string]*yaml.Node) {
	if len(v.f.oneOf) == 0 {
		return
	}
	var present []*yaml.Node
	for _, k := range v.f.oneOf {
		if n := written[k]; n != nil {
			present = append(present, n)
		}
	}
	kinds := strings.Join(v.f.oneOf, ", ")
	switch {
	case len(present) == 0:
		d.report(v.node, v.path, "needs exactly one of the keys "+kinds, kinds)
	case len(present) > 1:
		slices.SortFunc(present, func(a, b *yaml.Node) int { return cmp.Or(a.Line-b.Line, a.Column-b.Column) })
		for _, n := range present[1:] {
			d.report(n, joinPath(v.path, n.Value), "cannot be used together with "+present[0].Value+
				"; write exactly one of the keys "+kinds+" per item", kinds)
		}
	}
}

func (d *decoder) list(n *yaml.Node, v *value) {
	if n.Kind != yaml.SequenceNode {
		d.report(v.node, v.path, "must be a list, got "+describe(n), "")
		return
	}
	if m := v.f.maxItems; m > 0 && len(n.Content) > m {
		// Reported before the items are walked: nothing is built for them.
		d.report(v.node, v.path, fmt.Sprintf("holds %d items, more than the %d corral takes", len(n.Content), m), "")
		return
	}
	v.ok = true
	for i, item := range n.Content {
		v.list = append(v.list, d.walk(item, v.f.items, fmt.Sprintf("%s[%d]", v.path, i)))
	}
	if len(n.Content) < v.f.minItems {
		d.report(v.node, v.path, fmt.Sprintf("needs at least %d item", v.f.minItems), "")
	}
}

// scalar reads a string value, with a ${…} reference resolved. Only YAML
// strings count: a number or a date must be quoted, as the JSON Schema
// says. Sensitive values are recorded in d.secrets.
func (d *decoder) scalar(n *yaml.Node, v *value) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		got := describe(n)
		if v.f.sensitive && n.Kind == yaml.ScalarNode {
			got = "a value tagged " + n.Tag // a password written unquoted
		}
		msg := "must be a string, got " + got
		if n.Kind == yaml.ScalarNode {
			msg += "; quote it to mean the text"
		}
		d.report(v.node, v.path, msg, "")
		return "", false
	}
	parts, problem := parseTemplate(n.Value, v.f.facts())
	if problem != "" {
		d.report(v.node, v.path, problem, referenceAllowed)
		return "", false
	}
	refs := references(parts)
	if v.f.live {
		v.apps = outputApps(parts)
	}
	v.facts = factRefs(parts)
	if len(refs) == 0 && !v.live() {
		if v.f.sensitive {
			d.secrets = append(d.secrets, NewSecret("", parts[0].lit))
		}
		return parts[0].lit, true
	}
	return d.interpolate(n.Value, parts, refs, v)
}

// interpolate reads the references of a string value written as tmpl
// (split into parts) and records what is secret: a value that read one
// from the environment or a file is secret as a whole, under tmpl, and
// each value read is too, under its reference, so neither is printed
// even where the other is not whole (docs/manifest.md, Secrets).
func (d *decoder) interpolate(tmpl string, parts []part, refs []string, v *value) (string, bool) {
	bad := false
	for _, ref := range refs {
		if name, ok := envName(ref); ok {
			if problem := d.opts.envAllowed(name); problem != "" {
				d.report(v.node, v.path, problem, "")
				bad = true
			}
		}
	}
	if bad {
		return "", false
	}
	in := d.opts.interpolate(parts, d.dirOf(v.node), v.live())
	if len(in.failed) > 0 {
		if d.opts.Lazy && v.f.deferrable {
			// Left unread: the command needs no provisioning value.
			v.ref, v.deferred = tmpl, true
			d.unresolved[appOf(v.path)] = append(d.unresolved[appOf(v.path)], in.failed...)
			return "", true
		}
		d.report(v.node, v.path, strings.Join(in.errs, "; "), "")
		return "", false
	}
	v.ref = tmpl
	switch {
	case v.f.public:
	case len(in.read) == 0 && !v.f.sensitive:
		// Only defaults: written in the manifest, like any literal.
	default:
		d.secrets = append(d.secrets, NewSecret(tmpl, in.value))
		if len(parts) > 1 {
			d.secrets = append(d.secrets, in.read...)
		}
	}
	return in.value, true
}

// appOf is the app part of a value's path: "apps[2]" of
// "apps[2].provision[0].run".
func appOf(path string) string {
	app, _, _ := strings.Cut(path, ".")
	return app
}

// subject names a value in a message: quoted when it was written in the
// manifest, by its reference when it was read through one, and not at all
// when it is sensitive.
func (v *value) subject() string {
	switch {
	case v.ref != "":
		return " from " + v.ref
	case v.f.sensitive:
		return ""
	case v.f.shown != nil:
		return " " + quote(v.f.shown(v.str))
	}
	return " " + quote(v.str)
}

func (d *decoder) string(n *yaml.Node, v *value) {
	s, ok := d.scalar(n, v)
	if !ok {
		return
	}
	v.str = s
	f := v.f
	switch {
	case v.deferred:
		v.ok = true // unread, so not checked
	case f.enum != nil && !slices.Contains(f.enum, s):
		d.report(v.node, v.path, "invalid value"+v.subject(), strings.Join(f.enum, ", "))
	case f.minLen == 1 && s == "":
		d.report(v.node, v.path, "must not be empty", "")
	case utf8.RuneCountInString(s) < f.minLen:
		d.report(v.node, v.path, fmt.Sprintf("must be at least %d characters", f.minLen), "")
	case f.maxLen > 0 && utf8.RuneCountInString(s) > f.maxLen:
		d.report(v.node, v.path, fmt.Sprintf("must be at most %d characters", f.maxLen), "")
	case f.check != nil && f.check(s) != "":
		d.report(v.node, v.path, "invalid value"+v.subject()+": "+f.check(s), f.allowed)
	case f.forbidRE != nil && f.forbidRE.MatchString(s):
		d.report(v.node, v.path, "invalid value"+v.subject()+": "+f.forbidMsg, "")
	case f.re != nil && !f.re.MatchString(s):
		d.report(v.node, v.path, "invalid value"+v.subject(), f.allowed)
	default:
		v.ok = true
	}
}

func (d *decoder) size(n *yaml.Node, v *value) {
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!float") {
		d.report(v.node, v.path, "size "+n.Value+" has no unit", sizeAllowed)
		return
	}
	s, ok := d.scalar(n, v)
	if !ok {
		return
	}
	v.str = s
	size, err := ParseSize(s)
	switch {
	case errors.Is(err, errSizeSyntax):
		d.report(v.node, v.path, "invalid size"+v.subject(), sizeAllowed)
	case err != nil:
		d.report(v.node, v.path, "invalid size"+v.subject()+": "+err.Error(), sizeAllowed)
	case v.f != nil && size < v.f.minSize:
		d.report(v.node, v.path, fmt.Sprintf("size %s is too small: at least %s (%s)", s, v.f.minSize, v.f.minSizeWhy), "")
	default:
		v.size, v.ok = size, true
	}
}

// duration reads a duration like 30s or 1h30m. A bare number has no unit
// and is rejected rather than guessed.
func (d *decoder) duration(n *yaml.Node, v *value) {
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!float") {
		d.report(v.node, v.path, "duration "+n.Value+" has no unit", durationAllowed)
		return
	}
	s, ok := d.scalar(n, v)
	if !ok {
		return
	}
	v.str = s
	dur, err := time.ParseDuration(s)
	switch {
	case err != nil:
		d.report(v.node, v.path, "invalid duration"+v.subject(), durationAllowed)
	case dur <= 0:
		d.report(v.node, v.path, "duration"+v.subject()+" must be more than 0", durationAllowed)
	default:
		v.dur, v.ok = dur, true
	}
}

// mode reads an octal file mode. YAML reads an unquoted 0644 as the
// integer 420, so the digits are taken as written: quoted or not, 0644,
// 644 and 0o644 all mean rw-r--r--.
func (d *decoder) mode(n *yaml.Node, v *value) {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!int") {
		d.report(v.node, v.path, "must be an octal mode, got "+describe(n), modeAllowed)
		return
	}
	m, ok := parseMode(n.Value)
	if !ok {
		d.report(v.node, v.path, "invalid mode "+quote(n.Value), modeAllowed)
		return
	}
	v.str, v.mode, v.ok = n.Value, m, true
}

// modePattern is what parseMode accepts, also used by the JSON Schema.
const modePattern = `^(0o?)?[0-7]{3,4}$`

var modeRE = lazyre.New(modePattern)

// parseMode parses an octal mode like 0644, 644, 0o644 or 2775.
func parseMode(s string) (os.FileMode, bool) {
	if !modeRE.MatchString(s) {
		return 0, false
	}
	digits := strings.TrimPrefix(strings.TrimPrefix(s, "0o"), "0")
	m, err := strconv.ParseUint(digits, 8, 32)
	if err != nil {
		return 0, false
	}
	perm := os.FileMode(m) & os.ModePerm
	if m&0o1000 != 0 {
		perm |= os.ModeSticky
	}
	if m&0o2000 != 0 {
		perm |= os.ModeSetgid
	}
	if m&0o4000 != 0 {
		perm |= os.ModeSetuid
	}
	return perm, true
}

// int reads an integer. A float with no fraction (4096.0) counts, as it
// does in JSON Schema.
func (d *decoder) int(n *yaml.Node, v *value) {
	i, ok := yamlInt(n)
	if !ok {
		msg := "must be an integer, got " + describe(n)
		if n.Kind == yaml.ScalarNode && strings.HasPrefix(n.Value, "${") {
			msg += "; references work only in string values"
		}
		d.report(v.node, v.path, msg, "")
		return
	}
	if i < v.f.min || (v.f.max > 0 && i > v.f.max) {
		d.report(v.node, v.path, strconv.FormatInt(i, 10)+" is out of range", v.f.rangeText())
		return
	}
	v.num, v.ok = i, true
}

func yamlInt(n *yaml.Node) (int64, bool) {
	if n.Kind != yaml.ScalarNode {
		return 0, false
	}
	switch n.Tag {
	case "!!int":
		var i int64
		return i, n.Decode(&i) == nil
	case "!!float":
		// 2.0 and 1.5e2 are floats in YAML and in PVE's schema alike: an
		// integer field refuses them rather than guess.
		return 0, false
	}
	return 0, false
}

func (d *decoder) bool(n *yaml.Node, v *value) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&v.b) != nil {
		d.report(v.node, v.path, "must be true or false, got "+describe(n), "")
		return
	}
	v.ok = true
}

// describe names what a node holds, for "must be X, got Y" messages. The
// text comes from the manifest itself, never from a reference.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	switch n.Tag {
	case "!!str":
		return quote(n.Value)
	case "!!int", "!!float", "!!bool":
		return n.Value
	case "!!null":
		return "nothing"
	}
	return "a value tagged " + n.Tag
}

// quote quotes a manifest value for a message, shortened if long.
func quote(s string) string {
	if r := []rune(s); len(r) > 60 {
		s = string(r[:57]) + "..."
	}
	return strconv.Quote(s)
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// unknownKey says a key is unknown, suggesting the nearest allowed key
// when the difference looks like a typo.
func unknownKey(key string, allowed []string) string {
	best, bestDist := "", 0
	for _, a := range allowed {
		dist := editDistance(strings.ToLower(key), strings.ToLower(a))
		if dist <= max(1, len(a)/3) && (best == "" || dist < bestDist) {
			best, bestDist = a, dist
		}
	}
	if best == "" {
		return "unknown key"
	}
	return "unknown key; did you mean " + best + "?"
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
