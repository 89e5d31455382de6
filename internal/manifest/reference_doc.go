package manifest

import (
	"fmt"
	"strconv"
	"strings"
)

// ReferenceMarkdown renders the key reference of corral.yaml as Markdown
// from the same field table the decoder validates against and the JSON
// Schema is printed from: one section per object (the top level, apps[],
// apps[].rootfs, apps[].volumes[], each provision step kind, …), each
// with a table of its keys, their type, default and what is accepted, in
// words. docs/manifest.md embeds it between generated-section markers.
func ReferenceMarkdown() []byte {
	var b strings.Builder
	refDocObject(&b, "", "Top level", manifestSpec)
	return []byte(b.String())
}

// refDocObject writes the section of the object f at path, then the
// sections of the objects nested in it, depth first.
func refDocObject(b *strings.Builder, path, title string, f *field) {
	fmt.Fprintf(b, "### %s\n\n", title)
	if f.doc != "" {
		b.WriteString(mdText(f.doc) + "\n\n")
	}
	if f.oneOf != nil {
		b.WriteString("Write exactly one of " + codeList(f.oneOf) + ".\n\n")
	}
	b.WriteString("| Key | Type | Default | Accepted values and meaning |\n")
	b.WriteString("|---|---|---|---|\n")
	type sub struct {
		path string
		f    *field
	}
	var nested []sub
	for _, c := range f.fields {
		p := joinPath(path, c.key)
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", c.key, refDocType(c), refDocDefault(c), refDocMeaning(p, c))
		switch {
		case c.rootOnly:
		case c.kind == kindObject:
			nested = append(nested, sub{p, c})
		case c.kind == kindList && c.items.kind == kindObject:
			nested = append(nested, sub{p + "[]", c.items})
		}
	}
	b.WriteString("\n")
	for _, n := range nested {
		refDocObject(b, n.path, "`"+n.path+"`", n.f)
	}
}

// refDocType names the YAML shape of a field.
func refDocType(f *field) string {
	switch f.kind {
	case kindString:
		return "string"
	case kindInt:
		return "integer"
	case kindBool:
		return "boolean"
	case kindSize:
		return "size"
	case kindObject:
		return "object"
	case kindDuration:
		return "duration"
	case kindMode:
		return "file mode"
	case kindList:
		if f.items.kind == kindObject {
			return "list of objects"
		}
		return "list of " + refDocType(f.items) + "s"
	}
	panic("manifest: unknown kind " + strconv.Itoa(int(f.kind)))
}

// refDocDefault says what applies when the key is left out.
func refDocDefault(f *field) string {
	switch {
	case f.rootOnly:
		return "—"
	case f.required:
		return "**required**"
	case f.def == nil:
		return "—"
	}
	switch v := f.def.(type) {
	case string:
		return "`" + strconv.Quote(v) + "`"
	default:
		return fmt.Sprintf("`%v`", v)
	}
}

// refDocMeaning is the last column: the doc text, then what is accepted.
func refDocMeaning(path string, f *field) string {
	if f.rootOnly {
		return "Rejected: only root@pam can set " + f.key + ", and corral works with an API token. " +
			"The error gives the `pct set` command an administrator can run instead."
	}
	var parts []string
	if f.doc != "" {
		parts = append(parts, mdText(f.doc))
	}
	if a := refDocAllowed(f); a != "" {
		parts = append(parts, "Accepted: "+a+".")
	}
	if f.kind == kindObject {
		parts = append(parts, "Its keys: see `"+path+"` below.")
	}
	if f.kind == kindList {
		if f.minItems > 0 {
			parts = append(parts, fmt.Sprintf("At least %d %s.", f.minItems, plural(f.minItems, "item")))
		}
		if f.maxItems > 0 {
			parts = append(parts, fmt.Sprintf("At most %d.", f.maxItems))
		}
		if f.items.kind != kindObject {
			if a := refDocAllowed(f.items); a != "" {
				parts = append(parts, "Each item: "+a+".")
			}
			if f.items.public {
				parts = append(parts, "Not treated as a secret, even when read through a reference.")
			}
		} else {
			parts = append(parts, "Each item: see `"+path+"[]` below.")
		}
	}
	if f.sensitive {
		parts = append(parts, "Always a secret: never printed, even when written literally.")
	}
	if f.public && f.kind != kindList {
		parts = append(parts, "Not treated as a secret, even when read through a reference.")
	}
	return strings.Join(parts, " ")
}

// refDocAllowed says in words which values a scalar field accepts.
func refDocAllowed(f *field) string {
	var w []string
	switch f.kind {
	case kindInt:
		w = append(w, "an integer "+f.rangeText())
	case kindBool:
		w = append(w, "`true` or `false`")
	case kindSize:
		w = append(w, sizeAllowed)
	case kindDuration:
		w = append(w, durationAllowed)
	case kindMode:
		w = append(w, modeAllowed)
	case kindString:
		switch {
		case f.enum != nil:
			w = append(w, "one of "+codeList(f.enum))
		case f.allowed != "":
			w = append(w, f.allowed)
		}
		switch {
		case f.minLen == 1:
			w = append(w, "not empty")
		case f.minLen > 1:
			w = append(w, fmt.Sprintf("at least %d characters", f.minLen))
		}
		if f.maxLen > 0 && !strings.Contains(f.allowed, "at most") {
			w = append(w, fmt.Sprintf("at most %d characters", f.maxLen))
		}
		if f.forbidMsg != "" && f.allowed == "" {
			w = append(w, "rejected when "+f.forbidMsg)
		}
	}
	return mdText(strings.Join(w, "; "))
}

func plural(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}

// codeList writes keys as `a`, `b` or `c`.
func codeList(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = "`" + k + "`"
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// mdText makes plain text safe in a Markdown table cell: a pipe would end
// the cell and <name> would be read as an HTML tag.
var mdReplacer = strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;", "\n", " ")

func mdText(s string) string { return mdReplacer.Replace(s) }
