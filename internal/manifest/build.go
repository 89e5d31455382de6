package manifest

import (
	"fmt"
	"strconv"
	"strings"
)

// build turns the decoded tree into a File: it applies defaults from the
// field table and checks what spans several keys (uniqueness, gateway
// with DHCP, adopt vs storage, feature flags). Members that failed their
// own checks are already reported and are skipped here.
func (d *decoder) build(root *value) *File {
	f := &File{Path: d.file}
	names := map[string]*value{}
	vmids := map[int64]*value{}
	adopted := map[string]*value{}
	for _, av := range root.members("apps") {
		if !av.ok {
			continue
		}
		a := d.buildApp(av, adopted)
		if n := av.member("name"); n != nil {
			if first, dup := names[n.str]; dup {
				d.report(n.node, n.path, "duplicate app name (first at line "+strconv.Itoa(first.node.Line)+")", "")
			} else {
				names[n.str] = n
			}
		}
		if id := av.member("vmid"); id != nil {
			if first, dup := vmids[id.num]; dup {
				d.report(id.node, id.path, fmt.Sprintf("vmid %d is already used by %s", id.num, strings.TrimSuffix(first.path, ".vmid")), "")
			} else {
				vmids[id.num] = id
			}
		}
		f.Apps = append(f.Apps, a)
	}
	f.secrets = d.secrets
	return f
}

func (d *decoder) buildApp(v *value, adopted map[string]*value) App {
	a := App{
		Name:         v.strOr("name"),
		Node:         v.strOr("node"),
		VMID:         int(v.intOr("vmid")),
		Template:     v.strOr("template"),
		Unprivileged: v.boolOr("unprivileged"),
		Cores:        int(v.intOr("cores")),
		MemoryMiB:    int(v.intOr("memory")),
		SwapMiB:      int(v.intOr("swap")),
		OnBoot:       v.boolOr("onboot"),
		Description:  v.strOr("description"),
		Pos:          d.pos(v.node),
	}
	if !strings.Contains(a.Template, ":") && a.Template != "" {
		a.Template = "local:vztmpl/" + a.Template
	}
	rootfs := v.object("rootfs")
	a.RootFS = RootFS{Storage: rootfs.strOr("storage"), Size: rootfs.sizeOr("size")}
	if pw := v.member("password"); pw != nil {
		a.Password = NewSecret(pw.ref, pw.str)
	}
	for _, t := range v.members("tags") {
		a.Tags = append(a.Tags, t.str)
	}
	for _, k := range v.object("ssh").members("publicKeys") {
		a.SSH.PublicKeys = append(a.SSH.PublicKeys, splitKeys(k.str)...)
	}
	a.Features = d.buildFeatures(v)
	a.Network = d.buildNetwork(v.object("network"))

	names := map[string]*value{}
	mounts := map[string]*value{}
	for _, vv := range v.members("volumes") {
		if !vv.ok {
			continue
		}
		vol := d.buildVolume(vv, adopted)
		if n := vv.member("name"); n != nil {
			if first, dup := names[n.str]; dup {
				d.report(n.node, n.path, "duplicate volume name (first at line "+strconv.Itoa(first.node.Line)+")", "")
			} else {
				names[n.str] = n
			}
		}
		if m := vv.member("mount"); m != nil {
			if first, dup := mounts[m.str]; dup {
				d.report(m.node, m.path, "mount path is already used by "+strings.TrimSuffix(first.path, ".mount"), "")
			} else {
				mounts[m.str] = m
			}
		}
		a.Volumes = append(a.Volumes, vol)
	}
	return a
}

// buildFeatures rejects what an API token cannot set (behaviour.md §c):
// any flag but nesting, and any flag at all on a privileged container.
// The message gives the pct command an administrator can run instead.
func (d *decoder) buildFeatures(app *value) Features {
	fv := app.object("features")
	feat := Features{Nesting: fv.boolOr("nesting")}
	var rootOnly []*value
	for _, c := range fv.f.fields {
		if m := fv.member(c.key); m != nil && c.rootOnly {
			rootOnly = append(rootOnly, m)
		}
	}
	if len(rootOnly) > 0 {
		flags := []string{"nesting=" + boolDigit(feat.Nesting)}
		for _, m := range rootOnly {
			if m.f.kind == kindBool {
				flags = append(flags, m.f.key+"="+boolDigit(m.b))
			} else {
				flags = append(flags, m.f.key+"="+m.display())
			}
		}
		vmid := "<vmid>"
		if id := app.member("vmid"); id != nil {
			vmid = strconv.FormatInt(id.num, 10)
		}
		cmd := "pct set " + vmid + " -features " + strings.Join(flags, ",")
		for _, m := range rootOnly {
			d.report(m.node, m.path, "only root@pam can set this feature flag, and corral works with an API token; "+
				"leave it out and ask an administrator to run: "+cmd, "nesting")
		}
	}
	if n := fv.member("nesting"); n != nil && n.b {
		if u := app.member("unprivileged"); u != nil && !u.b {
			d.report(n.node, n.path, "on a privileged container (unprivileged: false) only root@pam can set feature flags, "+
				"and corral works with an API token", "")
		}
	}
	return feat
}

func (d *decoder) buildNetwork(nv *value) Network {
	n := Network{
		Bridge:  nv.strOr("bridge"),
		IP:      nv.strOr("ip"),
		Gateway: nv.strOr("gateway"),
	}
	for _, s := range nv.members("dns") {
		n.DNS = append(n.DNS, s.str)
	}
	// Judge the gateway only against an ip that is absent (dhcp) or valid.
	if gw := nv.member("gateway"); gw != nil && n.DHCP() && (nv.obj["ip"] == nil || nv.member("ip") != nil) {
		d.report(gw.node, gw.path, "a gateway needs a static ip; with dhcp the gateway comes from DHCP", "")
	}
	return n
}

func (d *decoder) buildVolume(v *value, adopted map[string]*value) Volume {
	vol := Volume{
		Name:    v.strOr("name"),
		Storage: v.strOr("storage"),
		Size:    v.sizeOr("size"),
		Mount:   v.strOr("mount"),
		Backup:  v.boolOr("backup"),
		Reclaim: Reclaim(v.strOr("reclaim")),
		Adopt:   v.strOr("adopt"),
		Pos:     d.pos(v.node),
	}
	ad := v.member("adopt")
	if ad == nil {
		if v.obj["size"] == nil && v.obj["adopt"] == nil {
			d.report(v.node, joinPath(v.path, "size"), "required key is missing (only an adopted volume may leave it out)", "")
		}
		return vol
	}
	sid, _, _ := strings.Cut(ad.str, ":")
	if st := v.member("storage"); st != nil && st.str != sid {
		d.report(st.node, st.path, "storage "+st.display()+" is not the storage of the adopted volume "+ad.display(), sid)
	}
	vol.Storage = sid
	if first, dup := adopted[ad.str]; dup {
		d.report(ad.node, ad.path, "volume "+ad.display()+" is already adopted by "+strings.TrimSuffix(first.path, ".adopt"), "")
	} else {
		adopted[ad.str] = ad
	}
	return vol
}

func boolDigit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// display shows a value in a message: as written, or as its reference.
func (v *value) display() string {
	if v.ref != "" {
		return v.ref
	}
	return v.str
}

// member returns the valid member key of an object value, or nil.
func (v *value) member(key string) *value {
	if v == nil || v.obj == nil {
		return nil
	}
	if c := v.obj[key]; c != nil && c.ok {
		return c
	}
	return nil
}

// members returns the valid items of the list member key.
func (v *value) members(key string) []*value {
	l := v.member(key)
	if l == nil {
		return nil
	}
	var out []*value
	for _, it := range l.list {
		if it.ok {
			out = append(out, it)
		}
	}
	return out
}

// object returns the object member key, or an empty one of the right
// field, so that its defaults apply when the key is absent.
func (v *value) object(key string) *value {
	if m := v.member(key); m != nil {
		return m
	}
	return &value{f: v.f.child(key), ok: true}
}

// strOr returns the string member key, or the field's default.
func (v *value) strOr(key string) string {
	if m := v.member(key); m != nil {
		return m.str
	}
	s, _ := v.f.child(key).def.(string)
	return s
}

func (v *value) intOr(key string) int64 {
	if m := v.member(key); m != nil {
		return m.num
	}
	i, _ := v.f.child(key).def.(int64)
	return i
}

func (v *value) boolOr(key string) bool {
	if m := v.member(key); m != nil {
		return m.b
	}
	b, _ := v.f.child(key).def.(bool)
	return b
}

func (v *value) sizeOr(key string) Size {
	if m := v.member(key); m != nil {
		return m.size
	}
	def, _ := v.f.child(key).def.(string)
	if def == "" {
		return 0
	}
	s, err := ParseSize(def)
	if err != nil {
		panic("manifest: bad default size " + def) // a bug in spec.go, caught by tests
	}
	return s
}
