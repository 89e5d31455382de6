package model

// appendJSON appends the status's JSON object, the bytes json.Marshal
// makes of Fields() (keys sorted), without the map and reflection: a
// node's list of a thousand CTs was mostly that encoding (issue 30).
// ha, when set, adds status/current's {"ha":{"managed":0}} in its place.
func (s CTStatus) appendJSON(b []byte, ha bool) []byte {
	w := objWriter{b: append(b, '{')}
	w.num("cpu", s.CPU)
	w.num("cpus", s.CPUs)
	w.int("disk", s.Disk)
	w.int("diskread", s.DiskRead)
	w.int("diskwrite", s.DiskWrite)
	if ha {
		w.key("ha")
		switch {
		case !s.HA.Managed:
			w.b = append(w.b, `{"managed":0}`...)
		case s.HA.State == "":
			w.b = append(w.b, `{"managed":1}`...)
		default:
			w.b = append(w.b, `{"managed":1,"state":`...)
			w.b = appendJSONString(w.b, s.HA.State)
			w.b = append(w.b, '}')
		}
	}
	if s.Lock != "" {
		w.str("lock", s.Lock)
	}
	w.int("maxdisk", s.MaxDisk)
	w.int("maxmem", s.MaxMem)
	w.int("maxswap", s.MaxSwap)
	w.int("mem", s.Mem)
	w.str("name", s.Name)
	w.int("netin", s.NetIn)
	w.int("netout", s.NetOut)
	running := s.Status == "running"
	if running {
		w.int("pid", int64(s.PID))
	}
	if running && s.Pressure {
		for _, k := range []string{"pressurecpufull", "pressurecpusome", "pressureiofull", "pressureiosome", "pressurememoryfull", "pressurememorysome"} {
			w.str(k, "0.00")
		}
	}
	w.str("status", s.Status)
	w.int("swap", s.Swap)
	if s.Tags != "" {
		w.str("tags", s.Tags)
	}
	if s.Template {
		w.int("template", 1)
	}
	w.str("type", "lxc")
	w.int("uptime", s.Uptime)
	w.int("vmid", int64(s.VMID))
	return append(w.b, '}')
}

// MarshalJSON writes Fields.
func (s CTStatus) MarshalJSON() ([]byte, error) { return s.appendJSON(nil, false), nil }

// CTStatusCurrent is GET .../status/current's answer: the status with
// PVE's "ha" object: {"managed":0}, or {"managed":1,"state":…} for an
// HA resource.
type CTStatusCurrent CTStatus

// MarshalJSON writes the status and its "ha".
func (s CTStatusCurrent) MarshalJSON() ([]byte, error) {
	return CTStatus(s).appendJSON(nil, true), nil
}

// CTStatusList is GET /nodes/{node}/lxc's answer, encoded in one pass.
type CTStatusList []CTStatus

// MarshalJSON writes the list as a JSON array.
func (l CTStatusList) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 400*len(l)+2)
	b = append(b, '[')
	for i, s := range l {
		if i > 0 {
			b = append(b, ',')
		}
		b = s.appendJSON(b, false)
	}
	return append(b, ']'), nil
}
