package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/corralhq/corral/internal/lazyre"
)

// table is the embedded, generated reduction of one apidoc.json.
type table struct {
	Version string `json:"version"`
	// Privileges are the privilege names of this PVE version, taken from
	// the return schema of GET /access/roles/{roleid}; the pve-priv
	// format verifies against them.
	Privileges []string  `json:"privileges"`
	Methods    []*Method `json:"methods"`
}

// indexCounts gives, for every indexed name the dumps contain ("mp[n]"),
// how many indices PVE defines. The dump keeps only "[n]"; the counts are
// the MAX_* constants of the code that builds the schema.
var indexCounts = map[string]int{
	"mp":         256, // pve-container LXC/Config.pm $MAX_MOUNT_POINTS
	"unused":     256, // pve-container $MAX_UNUSED_DISKS, qemu-server $MAX_UNUSED_DISKS
	"dev":        256, // pve-container $MAX_DEVICES
	"net":        32,  // pve-container $MAX_LXC_NETWORKS, qemu-server $MAX_NETS
	"ipconfig":   32,  // qemu-server, one per net
	"ide":        4,   // qemu-server Drive.pm $MAX_IDE_DISKS
	"sata":       6,   // $MAX_SATA_DISKS
	"scsi":       31,  // $MAX_SCSI_DISKS
	"virtio":     16,  // $MAX_VIRTIO_DISKS
	"hostpci":    16,  // qemu-server PCI.pm $MAX_HOSTPCI_DEVICES
	"usb":        14,  // qemu-server USB.pm $MAX_USB_DEVICES
	"serial":     4,   // $MAX_SERIAL_PORTS
	"parallel":   3,   // $MAX_PARALLEL_PORTS
	"numa":       8,   // $MAX_NUMA
	"virtiofs":   10,  // qemu-server Virtiofs.pm $MAX_VIRTIOFS
	"link":       8,   // pve-cluster corosync link0..link7
	"acmedomain": 5,   // pve-manager NodeConfig.pm $MAX_ACME_DOMAINS
}

// restParamPaths are the templates registered with fragmentDelimiter ”:
// a storage volume, and an IP set entry, whose CIDR has a slash
// (pve-firewall IPSet.pm registers ipset/{name} that way).
var restParamPaths = map[string]bool{
	"/nodes/{node}/storage/{storage}/content/{volume}":       true,
	"/cluster/firewall/ipset/{name}/{cidr}":                  true,
	"/nodes/{node}/lxc/{vmid}/firewall/ipset/{name}/{cidr}":  true,
	"/nodes/{node}/qemu/{vmid}/firewall/ipset/{name}/{cidr}": true,
}

// droppedKeys are schema keys that carry prose or UI hints, not facts.
var droppedKeys = map[string]bool{
	"description": true, "verbose_description": true, "format_description": true,
	"typetext": true, "title": true, "renderer": true, "links": true,
	"print_width": true, "completion": true,
	// "min"/"max" appear on two format keys; JSONSchema.pm ignores them.
	"min": true, "max": true,
}

var indexedName = lazyre.New(`^([a-z]+)\[n\]$`)

// Reduce turns one PVE API dump (the JSON tree of apidoc.json) into the
// table Load reads: sorted, deterministic JSON holding only facts. It
// fails on any schema key it does not know, so a new PVE dump cannot lose
// facts silently.
func Reduce(apidoc []byte, version string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(apidoc))
	dec.UseNumber()
	var tree []any
	if err := dec.Decode(&tree); err != nil {
		return nil, fmt.Errorf("reduce %s: decode: %w", version, err)
	}
	t := &table{Version: version}
	var walk func(node any) error
	walk = func(node any) error {
		n, ok := node.(map[string]any)
		if !ok {
			return fmt.Errorf("tree node is %T", node)
		}
		path, _ := n["path"].(string)
		if info, ok := n["info"].(map[string]any); ok {
			for verb, raw := range info {
				m, err := reduceMethod(path, verb, raw)
				if err != nil {
					return fmt.Errorf("%s %s: %w", verb, path, err)
				}
				t.Methods = append(t.Methods, m)
			}
		}
		children, _ := n["children"].([]any)
		for _, c := range children {
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	for _, n := range tree {
		if err := walk(n); err != nil {
			return nil, fmt.Errorf("reduce %s: %w", version, err)
		}
	}
	sort.Slice(t.Methods, func(i, j int) bool {
		a, b := t.Methods[i], t.Methods[j]
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		return a.HTTPMethod < b.HTTPMethod
	})
	for _, m := range t.Methods {
		if m.Path == "/access/roles/{roleid}" && m.HTTPMethod == "GET" && m.Returns != nil {
			for k := range m.Returns.Properties {
				t.Privileges = append(t.Privileges, k)
			}
		}
	}
	if len(t.Privileges) == 0 {
		return nil, fmt.Errorf("reduce %s: no privilege list (GET /access/roles/{roleid} returns)", version)
	}
	sort.Strings(t.Privileges)
	out, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("reduce %s: encode: %w", version, err)
	}
	return out, nil
}

func reduceMethod(path, verb string, raw any) (*Method, error) {
	info, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("info is %T", raw)
	}
	m := &Method{Path: path, HTTPMethod: verb, AllowToken: true, RestParam: restParamPaths[path]}
	for k, v := range info {
		var err error
		switch k {
		case "method":
			if s, _ := v.(string); s != verb {
				err = fmt.Errorf("method %v under %s", v, verb)
			}
		case "name":
			m.Name, err = str(v)
		case "allowtoken":
			m.AllowToken = perlTrue(v)
		case "protected":
			m.Protected = perlTrue(v)
		case "parameters":
			m.Parameters, err = reduceProp(v)
		case "returns":
			m.Returns, err = reduceProp(v)
			if err == nil && verb != "GET" && m.Returns != nil {
				m.Returns = &Prop{Type: m.Returns.Type}
			}
		case "permissions":
			m.Perm, err = reducePermission(v)
		case "description", "proxyto", "expose_credentials", "download_allowed":
			// Prose, or cluster and file-download plumbing the emulator
			// does not model.
		default:
			err = fmt.Errorf("unknown method key %q", k)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
	}
	if m.Parameters == nil {
		m.Parameters = &Prop{Type: "object"}
	}
	for name, p := range m.Parameters.Properties {
		if p.IndexCount > 0 && !p.Optional {
			return nil, fmt.Errorf("indexed parameter %s is not optional", name)
		}
	}
	return m, nil
}

func reducePermission(v any) (*Permission, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("is %T", v)
	}
	p := &Permission{}
	for k, val := range obj {
		switch k {
		case "user":
			s, err := str(val)
			if err != nil {
				return nil, err
			}
			if s != "all" && s != "world" {
				return nil, fmt.Errorf("user %q", s)
			}
			p.User = s
		case "check":
			b, err := json.Marshal(val)
			if err != nil {
				return nil, err
			}
			p.Check = &Check{}
			if err := json.Unmarshal(b, p.Check); err != nil {
				return nil, err
			}
		case "description":
		default:
			return nil, fmt.Errorf("unknown permissions key %q", k)
		}
	}
	return p, nil
}

func reduceProp(v any) (*Prop, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("schema is %T", v)
	}
	p := &Prop{}
	for k, val := range obj {
		if done, err := p.reduceNested(k, val); done {
			if err != nil {
				return nil, err
			}
			continue
		}
		var err error
		switch k {
		case "type":
			p.Type, err = str(val)
		case "optional":
			p.Optional = perlTrue(val)
		case "default":
			if val != nil {
				var s string
				s, err = scalarText(val)
				p.Default = &s
			}
		case "minimum":
			p.Minimum, err = number(val)
		case "maximum":
			p.Maximum, err = number(val)
		case "minLength":
			p.MinLength, err = intPtr(val)
		case "maxLength":
			p.MaxLength, err = intPtr(val)
		case "pattern":
			p.Pattern, err = str(val)
		case "format":
			switch f := val.(type) {
			case string:
				p.Format = f
			case map[string]any:
				if p.PropertyFormat, err = reduceFormatKeys(f); err != nil {
					return nil, err
				}
			default:
				err = fmt.Errorf("format is %T", val)
			}
		case "requires":
			p.Requires, err = str(val)
		case "items":
			p.Items, err = reduceProp(val)
		case "additionalProperties":
			switch a := val.(type) {
			case map[string]any:
				t := true
				p.AdditionalProperties = &t
				p.AdditionalSchema, err = reduceProp(a)
			default:
				b := perlTrue(a)
				p.AdditionalProperties = &b
			}
		case "default_key":
			p.DefaultKey = perlTrue(val)
		case "alias":
			p.Alias, err = str(val)
		case "keyAlias":
			p.KeyAlias, err = str(val)
		case "type-property":
			p.TypeProperty, err = str(val)
		default:
			if !droppedKeys[k] {
				err = fmt.Errorf("unknown schema key %q", k)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
	}
	return p, nil
}

// reduceNested reads the keys that hold lists or properties, whose
// errors carry their own context (reduceProp prefixes the other keys'
// with the key); done is false for any other key.
func (p *Prop) reduceNested(k string, val any) (done bool, err error) {
	switch k {
	case "enum":
		p.Enum, err = reduceEnum(val)
	case "properties":
		p.Properties, err = reduceProperties(val)
	case "instance-types":
		p.InstanceTypes, err = reduceList(k, val, str)
	case "oneOf":
		p.OneOf, err = reduceList(k, val, reduceProp)
	default:
		return false, nil
	}
	return true, err
}

// reduceEnum reads an enum's values as text; nil is no enum.
func reduceEnum(val any) ([]string, error) {
	if val == nil {
		return nil, nil
	}
	return reduceList("enum", val, scalarText)
}

// reduceList reads the list of key with one, failing on the first entry
// one refuses.
func reduceList[T any](key string, val any, one func(any) (T, error)) ([]T, error) {
	list, ok := val.([]any)
	if !ok {
		return nil, fmt.Errorf("%s is %T", key, val)
	}
	var out []T
	for _, e := range list {
		x, err := one(e)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		out = append(out, x)
	}
	return out, nil
}

// reduceFormatKeys reads a property string's format: its keys.
func reduceFormatKeys(f map[string]any) (*Format, error) {
	pf := &Format{Keys: map[string]*Prop{}}
	for fk, fv := range f {
		q, err := reduceProp(fv)
		if err != nil {
			return nil, fmt.Errorf("format key %s: %w", fk, err)
		}
		pf.Keys[fk] = q
	}
	return pf, nil
}

// reduceProperties reads an object's properties; an indexed one (mp[n])
// takes its index count from indexCounts.
func reduceProperties(val any) (map[string]*Prop, error) {
	props, ok := val.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("properties is %T", val)
	}
	out := map[string]*Prop{}
	for name, pv := range props {
		q, err := reduceProp(pv)
		if err != nil {
			return nil, fmt.Errorf("property %s: %w", name, err)
		}
		if m := indexedName.FindStringSubmatch(name); m != nil {
			if q.IndexCount = indexCounts[m[1]]; q.IndexCount == 0 {
				return nil, fmt.Errorf("property %s: index range unknown, add it to indexCounts", name)
			}
		}
		out[name] = q
	}
	return out, nil
}

func str(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("want string, got %T", v)
	}
	return s, nil
}

// scalarText renders a JSON scalar the way Perl would print it.
func scalarText(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool:
		if x {
			return "1", nil
		}
		return "0", nil
	}
	return "", fmt.Errorf("want scalar, got %T", v)
}

func number(v any) (json.Number, error) {
	s, err := scalarText(v)
	if err != nil {
		return "", err
	}
	if !isNumber(s) {
		return "", fmt.Errorf("not a number: %q", s)
	}
	return json.Number(s), nil
}

func intPtr(v any) (*int, error) {
	n, err := number(v)
	if err != nil {
		return nil, err
	}
	i, err := n.Int64()
	if err != nil {
		return nil, err
	}
	x := int(i)
	return &x, nil
}

// perlTrue is Perl truthiness for the dump's flag values (1, "1", 0, "").
func perlTrue(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case json.Number:
		f, err := x.Float64()
		return err != nil || f != 0
	case string:
		return x != "" && x != "0"
	}
	return true
}
