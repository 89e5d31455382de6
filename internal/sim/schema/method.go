package schema

// Method is one API endpoint: an HTTP method on a path template.
type Method struct {
	// Path is the template as PVE's dump writes it:
	// "/nodes/{node}/lxc/{vmid}/config".
	Path       string `json:"path"`
	HTTPMethod string `json:"method"`
	// Name is PVE's handler name, e.g. "update_vm".
	Name string `json:"name"`
	// AllowToken is false for the few methods API tokens may not call
	// (PVE then answers 403 "... not available with API token ...").
	AllowToken bool `json:"allowtoken"`
	// Protected methods run in pvedaemon (as root) on a real host.
	Protected bool `json:"protected,omitempty"`
	// RestParam marks templates whose last parameter takes the rest of
	// the URI, slashes included (PVE's fragmentDelimiter ''), like
	// {volume} in /nodes/{node}/storage/{storage}/content/{volume}.
	RestParam bool `json:"rest_param,omitempty"`
	// Parameters is the object schema of all parameters, path ones
	// included.
	Parameters *Prop `json:"parameters"`
	// Perm is nil for the methods without a permissions object, which
	// only root@pam may call.
	Perm *Permission `json:"permissions,omitempty"`
	// Returns is the full return schema for GET; for other methods only
	// its type ("string" for a UPID, "null" for synchronous changes…).
	Returns *Prop `json:"returns,omitempty"`

	// Params indexes Parameters.Properties by schema key ("mp[n]").
	Params map[string]*Param `json:"-"`

	api *API
}

// Param is a parameter of a method, under the name it was asked for.
type Param struct {
	// Name is the concrete name, e.g. "mp3"; it prefixes the keys of
	// property-string errors ("mp3.mp: ...").
	Name string
	// Key is the schema key, e.g. "mp[n]"; equal to Name for plain ones.
	Key string
	*Prop

	api *API
}

// Param returns the named parameter, resolving indexed names: "mp3" gives
// the "mp[n]" schema, "unused12" gives "unused[n]", within the index range
// PVE defines (mp0..mp255, net0..net31, …). It returns nil for names the
// method does not take.
func (m *Method) Param(name string) *Param {
	if m.Parameters == nil {
		return nil
	}
	key, prop := m.Parameters.Property(name)
	if prop == nil {
		return nil
	}
	return &Param{Name: name, Key: key, Prop: prop, api: m.api}
}

func (m *Method) link(a *API) {
	m.api = a
	m.Params = map[string]*Param{}
	if m.Parameters == nil {
		return
	}
	for k, p := range m.Parameters.Properties {
		m.Params[k] = &Param{Name: k, Key: k, Prop: p, api: a}
	}
}
