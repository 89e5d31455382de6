package manifest

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Comment is a comment a generated manifest carries on the entry at
// Path: keys and list indexes joined by dots ("apps.0.template"); ""
// is the document, whose Head comment stands above it, apart.
type Comment struct {
	Path string
	// Head is written on the lines above the entry, Line at the end of
	// its line; each without its "# " (Head's lines are split on "\n").
	Head, Line string
}

// EncodeCommented encodes v as a manifest's YAML with comments: a
// generated manifest is built as a value, so that the encoder quotes
// every name in it, and what it says to its reader is attached here, not
// spliced into text. The result is not yet in Format's layout.
func EncodeCommented(v any, comments []Comment) ([]byte, error) {
	var doc yaml.Node
	if err := doc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode the manifest: %w", err)
	}
	top := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{&doc}}
	for _, c := range comments {
		n, err := commentTarget(top, c.Path)
		if err != nil {
			return nil, err
		}
		n.HeadComment, n.LineComment = commentText(c.Head), commentText(c.Line)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(top); err != nil {
		return nil, fmt.Errorf("encode the manifest: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode the manifest: %w", err)
	}
	return buf.Bytes(), nil
}

// commentText is text as YAML comment lines ("" stays "").
func commentText(text string) string {
	if text == "" {
		return ""
	}
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight("# "+l, " ")
	}
	return strings.Join(lines, "\n")
}

// commentTarget is the node a comment on path sits on: a mapping's key
// (whose line holds a scalar value too), a list's item, or the document
// top itself for "".
func commentTarget(top *yaml.Node, path string) (*yaml.Node, error) {
	if path == "" {
		return top, nil
	}
	var at *yaml.Node
	val := top.Content[0]
	for _, part := range strings.Split(path, ".") {
		at = nil
		switch val.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(val.Content); i += 2 {
				if val.Content[i].Value == part {
					at, val = val.Content[i], val.Content[i+1]
					break
				}
			}
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(part); err == nil && i >= 0 && i < len(val.Content) {
				at, val = val.Content[i], val.Content[i]
			}
		}
		if at == nil {
			return nil, fmt.Errorf("encode the manifest: no entry %s to comment on (please report this)", path)
		}
	}
	return at, nil
}

// FormatChecked is data in Format's layout, parsed back as the manifest
// at path: what corral generates must validate as written, or nothing is
// written.
func FormatChecked(path string, data []byte) ([]byte, error) {
	text, err := Format(data)
	if err != nil {
		return nil, err
	}
	if _, err := Parse(path, text, LoadOptions{}); err != nil {
		return nil, err
	}
	return text, nil
}

// WriteNew writes text to a new file at path, never over an existing one
// (an error that is os.ErrExist then); a write that fails leaves no file.
func WriteNew(path string, text []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(text); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
