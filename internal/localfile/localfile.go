// Package localfile reads the user's own files (the manifest, files it
// references, CA certificates, keys) with a size limit: a path that names
// a device (/dev/zero, /dev/urandom), a FIFO or a socket is refused before
// it is opened, so nothing blocks or fills memory, and a regular file
// larger than the limit is refused with its size in the message.
package localfile

import (
	"fmt"
	"io"
	"os"

	"github.com/corralhq/corral/internal/ui/human"
)

// Read returns the content of the regular file at path, at most max bytes.
func Read(path string, max int64) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s): corral reads only regular files", path, kind(fi.Mode()))
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s is %s, more than the %s corral reads from such a file", path, human.Size(fi.Size()), human.Size(max))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The file may have grown since the stat.
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s is more than the %s corral reads from such a file", path, human.Size(max))
	}
	return data, nil
}

func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return m.Type().String()
}

// Limits for the kinds of file corral reads.
const (
	MaxManifest = 4 << 20  // corral.yaml
	MaxSecret   = 1 << 20  // ${file:…} references
	MaxContent  = 64 << 20 // file: steps' source files, sent into a container
	MaxPEM      = 1 << 20  // CA certificates
	MaxKey      = 64 << 10 // SSH keys
)
