package cli

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/crypto/ssh"

	"github.com/corralhq/corral/internal/localfile"
)

// identity is corral's own SSH key for logging into the containers it
// creates. Its public key goes into every new container's
// ssh-public-keys; the private key lives in the user's config directory
// (a credential, like ~/.ssh/id_ed25519, not state: nothing about the
// cluster is kept locally).
type identity struct {
	signer        ssh.Signer
	authorizedKey string
	path          string
}

// identityPath is $CORRAL_SSH_KEY, else $XDG_CONFIG_HOME/corral/id_ed25519
// (~/.config/corral/id_ed25519).
func identityPath() (string, error) {
	if p := os.Getenv("CORRAL_SSH_KEY"); p != "" {
		return p, nil
	}
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find corral's SSH key: %w (set CORRAL_SSH_KEY)", err)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "corral", "id_ed25519"), nil
}

// loadIdentity reads corral's key, creating it on first use.
func loadIdentity() (*identity, error) {
	path, err := identityPath()
	if err != nil {
		return nil, err
	}
	data, err := localfile.Read(path, localfile.MaxKey)
	if errors.Is(err, os.ErrNotExist) {
		return createIdentity(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read corral's SSH key: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("corral's SSH key %s: %w (remove it to have a new one made, or point CORRAL_SSH_KEY at an unencrypted OpenSSH key)", path, err)
	}
	return &identity{signer: signer, authorizedKey: authorizedKey(signer.PublicKey()), path: path}, nil
}

func createIdentity(path string) (*identity, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "corral")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create corral's SSH key: %w", err)
	}
	if err := publishKey(path, pem.EncodeToMemory(block)); errors.Is(err, os.ErrExist) {
		return loadIdentity() // another corral run made it first
	} else if err != nil {
		return nil, fmt.Errorf("create corral's SSH key: %w", err)
	}
	spub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, err
	}
	ak := authorizedKey(spub)
	if err := os.WriteFile(path+".pub", []byte(ak+" corral\n"), 0o644); err != nil {
		return nil, err
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, err
	}
	return &identity{signer: signer, authorizedKey: ak, path: path}, nil
}

func authorizedKey(k ssh.PublicKey) string {
	b := ssh.MarshalAuthorizedKey(k)
	return string(b[:len(b)-1])
}

// publishKey puts data at path whole or not at all: it is written to a
// temporary file beside path and hard-linked into place, which fails
// with ErrExist when path exists. Two corral runs starting at once must
// neither overwrite each other's new key nor read one half written.
func publishKey(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".id_ed25519-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Link(tmp, path)
}
