package manifest_test

import (
	"io/fs"

	"github.com/corralhq/corral/internal/manifest"
)

// Two real OpenSSH public keys (generated for these tests only).
const (
	key1 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEFzE6scGlqSWu4rJhGLAFx8rEmJPfpBTE3akDx77WGC test@corral"
	key2 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIC1YszH/a17hflPkUb5M/MQIDTrkJviwoCCpYtP+MJID second@corral"
)

// The secret values testOptions serves. No diagnostic may contain them.
const (
	envRootPW  = "correct-horse-battery"
	envShortPW = "Zq9!"
	envBadNode = "Bad_Node!"
	filePW     = "s3cret-from-file"
	envAPIKey  = "sk-env-api-key-0123"
	fileAPIKey = "sk-file-api-key-4567"
)

var testEnv = map[string]string{
	"HOME":     "/home/test",
	"ROOT_PW":  envRootPW,
	"SHORT_PW": envShortPW,
	"BAD_NODE": envBadNode,
	"NODE":     "pve2",
	"API_KEY":  envAPIKey,
	"MULTI":    "line1\nline2-secret",
	"NOT_TIME": "soon",
	// What examples/hermes reads, so that the fuzz seed parses.
	"OPENCODE_GO_API_KEY": hermesKey,
}

var testFiles = map[string]string{
	"/home/test/.ssh/id_ed25519.pub":    key1 + "\n",
	"/home/test/.ssh/keys.pub":          "# laptop\n" + key1 + "\n\n" + key2 + "\n",
	"/home/test/.ssh/mixed.pub":         key1 + "\nnot a key\n",
	"/home/test/.config/corral/root.pw": filePW + "\n",
	"/home/test/.config/corral/api.key": fileAPIKey + "\n",
	// Sources of file and compose steps, relative to a manifest in ".".
	"files/app.conf":     "listen 8080\n",
	"files/compose.yaml": "services:\n  web:\n    image: nginx\n",
}

// testOptions resolves references from testEnv and testFiles only.
func testOptions() manifest.LoadOptions {
	return manifest.LoadOptions{
		Getenv: func(name string) (string, bool) {
			v, ok := testEnv[name]
			return v, ok
		},
		ReadFile: func(path string) ([]byte, error) {
			if s, ok := testFiles[path]; ok {
				return []byte(s), nil
			}
			return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
		},
	}
}

// secretValues are the values no output may contain.
var secretValues = []string{envRootPW, envShortPW, envBadNode, filePW, envAPIKey, fileAPIKey, "line2-secret"}
