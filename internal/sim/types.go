package sim

import (
	"strconv"

	"github.com/corralhq/corral/internal/sim/schema"
)

// typedValue converts a stored config string to the JSON type the schema
// declares for key in the method's return value: PVE sends integers and
// booleans as numbers (cores: 2, onboot: 1) and everything else as
// strings (fixtures lxc-config-*.json).
func typedValue(m *schema.Method, key, v string) any {
	if m == nil || m.Returns == nil {
		return v
	}
	ret := m.Returns
	if ret.Items != nil {
		ret = ret.Items
	}
	_, p := ret.Property(key)
	if p == nil {
		return v
	}
	switch p.Type {
	case "integer", "boolean":
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	case "number":
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return f
		}
	}
	return v
}

// typedConfig converts a whole config map.
func typedConfig(m *schema.Method, conf map[string]string) map[string]any {
	out := make(map[string]any, len(conf))
	for k, v := range conf {
		out[k] = typedValue(m, k, v)
	}
	return out
}
