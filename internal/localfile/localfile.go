// Package localfile reads the user's own files (the manifest, files it
// references, CA certificates, keys) with a size limit: a path that names
// a device (/dev/zero, /dev/urandom), a FIFO or a socket is refused before
// it is opened, so nothing blocks or fills memory, and a regular file
// larger than the limit is refused with its size in the message.
package localfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/corralhq/corral/internal/ui/human"
)

// Read returns the content of the regular file at path, at most max bytes.
func Read(path string, max int64) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := fits(path, fi, max); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAtMost(path, f, fi.Size(), max)
}

// Tail returns at most the last max bytes of the regular file at path:
// a log that grew for months is not read whole to show its end.
func Tail(path string, max int64) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO must not wait for a writer.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := fits(path, fi, -1); err != nil {
		return nil, err
	}
	if off := fi.Size() - max; off > 0 {
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, max))
}

// fits refuses what Read, ReadIn and Tail must not read: anything but a
// regular file, and (max >= 0) a file larger than max, with its size.
// One check, so that each refusal reads the same wherever it is met.
func fits(path string, fi os.FileInfo, max int64) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%s): corral reads only regular files", path, kind(fi.Mode()))
	}
	if max >= 0 && fi.Size() > max {
		return &TooLargeError{Path: path, Size: fi.Size(), Max: max}
	}
	return nil
}

// readAtMost reads f to its end, refusing it past limit bytes: the file
// may have grown since fits saw its size. The buffer is sized from that
// size (plus room to see growth), as os.ReadFile's is: io.ReadAll's
// doublings would hold up to twice a large file at once while copying,
// which counts against a manifest's memory budget (and, under -race,
// made a test of three 20 MiB sources take 5 s).
func readAtMost(path string, f io.Reader, size, limit int64) ([]byte, error) {
	data := make([]byte, 0, min(max(size, 0), limit)+512)
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := f.Read(data[len(data):min(cap(data), int(limit)+1)])
		data = data[:len(data)+n]
		if int64(len(data)) > limit {
			return nil, &TooLargeError{Path: path, Max: limit}
		}
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
	}
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
	// MaxInputTotal bounds everything one manifest reads into containers
	// (file and compose sources, ${file:…} references) together, so that
	// many sources at MaxContent cannot hold gigabytes.
	MaxInputTotal = 64 << 20
	MaxPEM        = 1 << 20  // CA certificates
	MaxKey        = 64 << 10 // SSH keys
	// MaxState bounds corral's own small state files (the local
	// emulator's env file and record), which a user or another program
	// can still replace.
	MaxState = 1 << 20
)

// TooLargeError refuses a file past the limit a reader set.
type TooLargeError struct {
	Path string
	Size int64 // 0 when it grew past Max while it was read
	Max  int64
}

func (e *TooLargeError) Error() string {
	if e.Size == 0 {
		return fmt.Sprintf("%s is more than the %s corral reads from such a file", e.Path, human.Size(e.Max))
	}
	return fmt.Sprintf("%s is %s, more than the %s corral reads from such a file", e.Path, human.Size(e.Size), human.Size(e.Max))
}

// OutsideError refuses a file that is not inside the directory a reader
// is confined to (ReadIn).
type OutsideError struct {
	Path string // as the caller named it
	Root string
	// Link: the path names a place inside Root, but a symbolic link on
	// the way leads out of it.
	Link bool
	// Excluded is the part of Root the file is in that is not readable
	// (".git"), or "".
	Excluded string
}

func (e *OutsideError) Error() string {
	switch {
	case e.Excluded != "":
		return fmt.Sprintf("%s is in %s, which is not readable", e.Path, e.Excluded)
	case e.Link:
		return fmt.Sprintf("%s leads outside %s through a symbolic link", e.Path, e.Root)
	}
	return fmt.Sprintf("%s is outside %s", e.Path, e.Root)
}

// ReadIn is Read confined to the tree of the directory root: path
// (absolute, or relative to the working directory) must name a file
// inside root, every symbolic link on the way must stay inside it, and
// none of exclude (directories relative to root, such as ".git") may hold
// it. Anything else is an *OutsideError.
//
// The file is opened through os.Root, which resolves .. and links
// without leaving root, so a link swapped in between a check and the
// read cannot lead out either; and opened non-blocking, so that a FIFO
// is refused rather than waited on.
func ReadIn(root string, exclude []string, path string, max int64) ([]byte, error) {
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	rel, err := filepath.Rel(absRoot, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, &OutsideError{Path: path, Root: root}
	}
	if ex := excludedBy(rel, exclude); ex != "" {
		return nil, &OutsideError{Path: path, Root: root, Excluded: ex}
	}
	r, err := os.OpenRoot(absRoot)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) && leadsOut(absRoot, abs) {
			return nil, &OutsideError{Path: path, Root: root, Link: true}
		}
		return nil, err
	}
	defer f.Close()
	// Where the file really is: a link inside root may still lead into
	// an excluded directory.
	if real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd()))); err == nil {
		realRoot, err := filepath.EvalSymlinks(absRoot)
		if err != nil {
			return nil, err
		}
		rrel, err := filepath.Rel(realRoot, real)
		if err != nil || rrel == ".." || strings.HasPrefix(rrel, ".."+string(filepath.Separator)) {
			return nil, &OutsideError{Path: path, Root: root, Link: true}
		}
		if ex := excludedBy(rrel, exclude); ex != "" {
			return nil, &OutsideError{Path: path, Root: root, Excluded: ex}
		}
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := fits(path, fi, max); err != nil {
		return nil, err
	}
	return readAtMost(path, f, fi.Size(), max)
}

// excludedBy is the directory of exclude that holds rel, or "".
func excludedBy(rel string, exclude []string) string {
	for _, ex := range exclude {
		if rel == ex || strings.HasPrefix(rel, ex+string(filepath.Separator)) {
			return ex
		}
	}
	return ""
}

// leadsOut reports whether abs, inside root by name, resolves (links
// followed) to a place outside it; for a better message only: os.Root
// is what keeps a read inside.
func leadsOut(root, abs string) bool {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return false
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		// A dangling link, or one into a place this user cannot see:
		// os.Root said no for a reason, and a link is on the way.
		return true
	}
	rel, err := filepath.Rel(realRoot, real)
	return err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
