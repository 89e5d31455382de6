package manifest

import (
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrEnvValue is returned by EnvFileValue for a value no quoting makes
// every reader of an env file read the same way.
var ErrEnvValue = errors.New("cannot be written to an env file")

// EnvFileValue returns v as written after NAME= in an env file that a
// POSIX shell sourcing it (set -a; . FILE), systemd's EnvironmentFile=
// and docker compose's env_file all read back as v:
//
//   - plain, when v holds nothing any of them treats specially (a shell
//     takes F=a>/path as a redirect, compose cuts " #" comments and
//     trims Unicode spaces, systemd trims ASCII ones);
//   - else in double quotes with \, " and $ escaped (all three undo
//     exactly those escapes; compose would expand $ and sh would too);
//   - else, when v holds a backquote (sh needs \` in double quotes, and
//     compose keeps that backslash), in single quotes, which all three
//     read literally, unless v holds a single quote or ends with a
//     backslash (compose reads \' as an escaped quote).
//
// What is left (a backquote with a single quote or a trailing backslash,
// line breaks, NUL, invalid UTF-8, which systemd skips) is refused.
func EnvFileValue(v string) (string, error) {
	if p := envValueProblem(v); p != "" {
		return "", errors.New(p)
	}
	if v != "" && !strings.ContainsAny(v, "\"'\\$`#<>|&;()*?[]~{}!") && !strings.ContainsFunc(v, envNeedsQuotes) {
		return v, nil
	}
	if !strings.Contains(v, "`") {
		return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", `\$`).Replace(v) + `"`, nil
	}
	return "'" + v + "'", nil
}

// envNeedsQuotes: spaces (any Unicode space: compose trims them from an
// unquoted value) and control characters.
func envNeedsQuotes(r rune) bool {
	return unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError
}

// envValueProblem says why v cannot be an env-file value, or "". It
// never quotes v, which is usually a secret.
func envValueProblem(v string) string {
	switch {
	case strings.ContainsAny(v, "\n\r\x00"):
		return "holds a line break or NUL, which an environment file cannot hold"
	case !utf8.ValidString(v):
		return "is not valid UTF-8, and systemd's EnvironmentFile= skips such a variable"
	case strings.Contains(v, "`") && strings.Contains(v, "'"):
		return "holds both a backquote (`) and a single quote ('): no quoting makes sh, systemd's EnvironmentFile= and docker compose's env_file read it the same way"
	case strings.Contains(v, "`") && strings.HasSuffix(v, `\`):
		return "holds a backquote (`) and ends with a backslash: no quoting makes sh, systemd's EnvironmentFile= and docker compose's env_file read it the same way"
	}
	return ""
}

// EnvFile renders an envFile step's variables, one NAME=value line each
// with the value quoted by EnvFileValue. A value EnvFileValue refuses
// (only reachable by bypassing the manifest check, which refuses it
// first) is written empty rather than misread.
func EnvFile(env []EnvVar) string {
	var b strings.Builder
	for _, e := range env {
		q, err := EnvFileValue(e.Value.Reveal())
		if err != nil {
			q = `""`
		}
		b.WriteString(e.Name + "=" + q + "\n")
	}
	return b.String()
}
