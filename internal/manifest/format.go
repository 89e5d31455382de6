package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Format returns a manifest's YAML in corral's canonical layout: two
// spaces of indentation, lists indented under their key, one space after
// a colon, comments kept, the comments at the ends of consecutive lines
// aligned (as gofmt does) and the blank lines between entries kept. Keys
// keep their order and scalars their style (quoted, block, flow), so the
// manifest means exactly what it did.
//
// Format checks its own work: the result must hold the same YAML values
// (anchors and aliases included) and the same comments as data, or it
// returns an error and nothing else, so a caller never writes a file that
// lost content. data must hold one YAML document, as a manifest does.
func Format(data []byte) ([]byte, error) {
	if _, _, problem := checkBounds(data); problem != "" {
		return nil, fmt.Errorf("format: %s", problem)
	}
	doc, err := oneDocument(data)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("format: encode YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("format: encode YAML: %w", err)
	}
	out, err := layout(data, doc, buf.Bytes())
	if err != nil {
		return nil, err
	}
	// At most one blank line in a row, as gofmt writes: yaml.v3 writes
	// two before a comment that follows a block scalar (one more on each
	// run). Squeezing must not reach into a block scalar's blank lines,
	// which are its content: the check says so, and then out stays.
	for _, cand := range [][]byte{squeezeBlank(out), out} {
		if err = sameContent(doc, cand); err == nil {
			return cand, nil
		}
	}
	return nil, err
}

// sameContent says how out, as YAML, differs from doc in values or
// comments, or returns nil.
func sameContent(doc *yaml.Node, out []byte) error {
	again, err := oneDocument(out)
	if err != nil {
		return fmt.Errorf("format: the result does not parse back (%w); the file is left as it is: please report this", err)
	}
	if why := sameNode(doc, again, ""); why != "" {
		return fmt.Errorf("format: the result would change %s; the file is left as it is: please report this", why)
	}
	if a, b := comments(doc), comments(again); !slices.Equal(a, b) {
		return fmt.Errorf("format: the result would lose or change a comment (%d comment lines, %d after); the file is left as it is: please report this", len(a), len(b))
	}
	return nil
}

// squeezeBlank turns every run of blank lines in b into one.
func squeezeBlank(b []byte) []byte {
	for bytes.Contains(b, []byte("\n\n\n")) {
		b = bytes.ReplaceAll(b, []byte("\n\n\n"), []byte("\n\n"))
	}
	return b
}

// oneDocument parses data, which must hold exactly one YAML document.
func oneDocument(data []byte) (doc *yaml.Node, err error) {
	defer func() {
		// yaml.v3 has panicked on malformed input before (see decode).
		if r := recover(); r != nil {
			doc, err = nil, errors.New("invalid YAML: the parser failed on this input")
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	doc = &yaml.Node{}
	if err := dec.Decode(doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the file is empty: nothing to format")
		}
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, fmt.Errorf("line %d: a second YAML document: a manifest holds one", next.Line)
	case !errors.Is(err, io.EOF):
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	return doc, nil
}

// sameNode says where a and b differ as YAML values, or "". Style,
// position and comments do not count; anchors and aliases do. at is the
// path of a and b, for the message.
func sameNode(a, b *yaml.Node, at string) string {
	switch {
	case a.Kind != b.Kind:
		return "the kind of value at " + where(at)
	case a.ShortTag() != b.ShortTag() || a.Value != b.Value || a.Anchor != b.Anchor:
		return "the value at " + where(at)
	case len(a.Content) != len(b.Content):
		return "the number of entries at " + where(at)
	case a.Kind == yaml.AliasNode:
		if a.Alias.Anchor != b.Alias.Anchor {
			return "the alias at " + where(at)
		}
		return ""
	}
	for i := range a.Content {
		sub := at
		switch {
		case a.Kind == yaml.MappingNode && i%2 == 1:
			sub = joinPath(at, a.Content[i-1].Value)
		case a.Kind == yaml.SequenceNode:
			sub = fmt.Sprintf("%s[%d]", at, i)
		}
		if why := sameNode(a.Content[i], b.Content[i], sub); why != "" {
			return why
		}
	}
	return ""
}

func where(path string) string {
	if path == "" {
		return "the top"
	}
	return path
}

// comments are every comment line of the tree, each trimmed, in order.
func comments(n *yaml.Node) []string {
	var out []string
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		for _, c := range []string{n.HeadComment, n.LineComment, n.FootComment} {
			for _, line := range strings.Split(c, "\n") {
				if line = strings.TrimSpace(line); line != "" {
					out = append(out, line)
				}
			}
		}
		if n.Kind == yaml.AliasNode {
			return
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
	return out
}

// layout puts back into out, yaml.v3's encoding of doc (parsed from
// data), what the encoder drops: the blank lines before entries, and
// the alignment of the comments that end consecutive lines.
func layout(data []byte, doc *yaml.Node, out []byte) ([]byte, error) {
	enc, err := oneDocument(out)
	if err != nil {
		return nil, fmt.Errorf("format: the encoding does not parse back (%w); the file is left as it is: please report this", err)
	}
	src := strings.Split(string(data), "\n")
	blank := map[int]bool{} // lines of out that follow a blank line
	var walk func(a, b *yaml.Node)
	walk = func(a, b *yaml.Node) {
		if start := a.Line - lineCount(a.HeadComment); start >= 2 && start-2 < len(src) && strings.TrimSpace(src[start-2]) == "" {
			blank[b.Line-lineCount(b.HeadComment)] = true
		}
		if a.Kind == yaml.AliasNode || len(a.Content) != len(b.Content) {
			return
		}
		for i := range a.Content {
			walk(a.Content[i], b.Content[i])
		}
	}
	walk(doc, enc)
	ends := map[int]string{} // line comments of out, by line
	var mark func(n *yaml.Node)
	mark = func(n *yaml.Node) {
		if n.LineComment != "" {
			ends[n.Line] = n.LineComment
		}
		for _, c := range n.Content {
			mark(c)
		}
	}
	mark(enc)
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	for i := 0; i < len(lines); {
		j := i
		for j < len(lines) && ends[j+1] != "" && strings.HasSuffix(lines[j], " "+ends[j+1]) && (j == i || !blank[j+1]) {
			j++
		}
		alignComments(lines[i:j], ends, i)
		i = max(j, i+1)
	}
	var b strings.Builder
	for i, line := range lines {
		if blank[i+1] && i > 0 && lines[i-1] != "" {
			b.WriteString("\n")
		}
		b.WriteString(line + "\n")
	}
	return []byte(b.String()), nil
}

// alignComments aligns the comments that end run, lines of out from
// first (0-based), to one column.
func alignComments(run []string, ends map[int]string, first int) {
	width := 0
	for k, line := range run {
		width = max(width, utf8.RuneCountInString(strings.TrimSuffix(line, " "+ends[first+k+1])))
	}
	for k, line := range run {
		code := strings.TrimSuffix(line, " "+ends[first+k+1])
		run[k] = code + strings.Repeat(" ", width-utf8.RuneCountInString(code)) + " " + ends[first+k+1]
	}
}

// lineCount is how many lines a comment takes; 0 for none.
func lineCount(c string) int {
	if c == "" {
		return 0
	}
	return strings.Count(c, "\n") + 1
}
