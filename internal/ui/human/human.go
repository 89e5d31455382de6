// Package human holds the forms in which corral writes values for people
// to read. It is a leaf, so that plan and apply (whose reasons and
// progress lines are read by people, and which internal/ui imports) use
// the same forms as internal/ui. Forms that PVE reads (size=8G,
// STORAGE:GiB) and the manifest's own size syntax are not here: they are
// wire formats, kept by propstr, plan and manifest.
package human

import "strconv"

// Size is the one human form of a byte count: binary units with at most
// one decimal, and none when it would be .0 ("8 GiB", "3.5 GiB",
// "512 MiB", "17 B"), rounded to the nearest tenth; what rounds to 1024
// of a unit is written as 1 of the next ("1 GiB", never "1024 MiB").
func Size(b int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	if b < 1024 && b > -1024 {
		return strconv.FormatInt(b, 10) + " B"
	}
	v := float64(b)
	u := 0
	for u < len(units)-1 && (v >= 1024 || v <= -1024) {
		v /= 1024
		u++
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	if s == "1024.0" && u < len(units)-1 {
		s, u = "1", u+1
	}
	if len(s) > 2 && s[len(s)-2:] == ".0" {
		s = s[:len(s)-2]
	}
	return s + " " + units[u]
}
