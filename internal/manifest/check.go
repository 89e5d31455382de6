package manifest

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/robfig/cron/v3"
	"golang.org/x/crypto/ssh"
)

// The check functions take a string value and return what is wrong with
// it, or "". They run before the field's pattern and must accept any input.
// Their messages never repeat the value, which may be sensitive.

// maxDescription leaves room, within PVE's 8192-character description,
// for the marker lines corral appends.
const maxDescription = 7680

func checkIP(s string) string {
	if s == defaultIP {
		return ""
	}
	p, err := netip.ParsePrefix(s)
	switch {
	case err != nil:
		return "not dhcp or an address with prefix length"
	case !p.Addr().Is4():
		return "not an IPv4 address"
	case p.Bits() == 0:
		return "prefix length must be 1 to 32"
	}
	return ""
}

func checkIPv4(s string) string {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return "not an IPv4 address"
	}
	return ""
}

// checkCron accepts what corral agent's scheduler will parse: the five
// standard cron fields or a descriptor (@daily, @every 1h). Checking here
// means a typo fails corral check, not a backup at 3 a.m.
func checkCron(s string) string {
	if _, err := cron.ParseStandard(s); err != nil {
		return "not a cron schedule (five fields: minute hour day-of-month month day-of-week, or a descriptor)"
	}
	return ""
}

func checkAddr(s string) string {
	if _, err := netip.ParseAddr(s); err != nil {
		return "not an IP address"
	}
	return ""
}

// checkPublicKeys accepts one key, or (from a file) several, one a line,
// with blank and # comment lines ignored, as in authorized_keys.
func checkPublicKeys(s string) string {
	keys := splitKeys(s)
	if len(keys) == 0 {
		return "holds no public key"
	}
	for i, k := range keys {
		if _, _, _, rest, err := ssh.ParseAuthorizedKey([]byte(k)); err != nil || len(rest) > 0 {
			if len(keys) == 1 {
				return "not an OpenSSH public key"
			}
			return fmt.Sprintf("key %d is not an OpenSSH public key", i+1)
		}
	}
	return ""
}

// splitKeys returns the key lines of s.
func splitKeys(s string) []string {
	var keys []string
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			keys = append(keys, line)
		}
	}
	return keys
}

// checkMount rejects what PVE's verify_lxc_mp_string rejects (/./, /../,
// a trailing /. or /..; behaviour.md §f) and, more strictly, any path that
// is not in clean form, so that two spellings of one path cannot slip past
// the uniqueness check.
func checkMount(s string) string {
	switch {
	case s == "/":
		return "/ is the root file system (set it with rootfs)"
	case !strings.HasPrefix(s, "/"):
		return "not an absolute path"
	case path.Clean(s) != s:
		return "not a clean path (no '.' or '..' parts, '//' or trailing '/')"
	case strings.ContainsAny(s, ",; \t\n\v\f\r"):
		return "commas, semicolons and spaces cannot be written into a PVE mount point"
	}
	for _, sys := range []string{"/proc", "/sys", "/dev"} {
		if s == sys || strings.HasPrefix(s, sys+"/") {
			return sys + " is the kernel's (LXC mounts its own " + sys + " there at start); a volume there would hide it"
		}
	}
	return ""
}

// checkAdopt explains the one wrong kind of volume users reach for: a host
// path, which PVE treats as a bind mount and allows only to root@pam
// (behaviour.md §b).
func checkAdopt(s string) string {
	if strings.HasPrefix(s, "/") {
		return "a host path is a bind mount, which only root@pam may set; corral works with an API token, so adopt a storage volume"
	}
	return ""
}

// checkOneLine accepts text without control characters, such as a step name.
func checkOneLine(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "holds a line break or control character"
	}
	return ""
}

// checkUnit accepts a systemd unit name that systemctl cannot take for an
// option.
func checkUnit(s string) string {
	if strings.HasPrefix(s, "-") {
		return "starts with '-'"
	}
	return ""
}

// checkGuestPath accepts a clean absolute path inside the container.
func checkGuestPath(s string) string {
	switch {
	case !strings.HasPrefix(s, "/"):
		return "not an absolute path"
	case s == "/":
		return "/ is a directory"
	case path.Clean(s) != s:
		return "not a clean path (no '.' or '..' parts, '//' or trailing '/')"
	}
	return ""
}

// checkSource accepts a local path; whether the file can be read is
// found out when it is read (build.go).
func checkSource(s string) string {
	if s == "" || strings.ContainsRune(s, 0) {
		return "not a file path"
	}
	return ""
}

// checkEnvValue rejects what one NAME=value line cannot hold.
func checkEnvValue(s string) string { return envValueProblem(s) }

// checkHTTPURL accepts an http or https URL with a host.
func checkHTTPURL(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "not a URL"
	case u.Scheme != "http" && u.Scheme != "https":
		return "the scheme must be http or https"
	case u.Host == "" || u.Hostname() == "":
		return "the URL has no host"
	case u.User != nil:
		return "a user or password in the URL would be printed in logs; leave it out"
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "the port must be 1..65535"
		}
	}
	return ""
}

// redactURL hides a password in a URL, for diagnostics. A URL that does
// not parse loses everything between "://" and its last '@', which may be
// user:password (with a '/' in the password, even past the path's start).
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err == nil {
		if u.User != nil {
			return u.Redacted()
		}
		return s
	}
	start := 0
	if i := strings.Index(s, "://"); i >= 0 {
		start = i + len("://")
	}
	if at := strings.LastIndex(s[start:], "@"); at >= 0 {
		return s[:start] + "xxxxx" + s[start+at:]
	}
	return s
}

// checkHostPort accepts HOST:PORT as net.Dial takes it.
func checkHostPort(s string) string {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return "not HOST:PORT"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "the port must be 1..65535"
	}
	return ""
}

// checkAppName refuses the names corral gives its own containers and
// tags (corral, corral-keeper, corral-…): an app called corral-keeper
// would be taken for a keeper.
func checkAppName(s string) string {
	if s == "corral" || strings.HasPrefix(s, "corral-") {
		return "corral and names starting with corral- are corral's own (its keeper containers and tags)"
	}
	return ""
}
