package config

import (
	"bytes"
	"fmt"
	"io"
	"os"
)

// minKeySize and maxKeySize bound --content-key-file. The key is all that
// stands between a short secret and someone trying every value of it: 32
// bytes of `head -c 32 /dev/urandom | base64` are 256 bits.
const (
	minKeySize = 32
	maxKeySize = 4096
)

// ContentKey reads --content-key-file, once, at start: nil without it. The
// file's surrounding white space is not part of the key, so that a key
// written with or without a final newline is the same.
func ContentKey(c *Config) ([]byte, error) {
	if c.ContentKeyFile == "" {
		return nil, nil
	}
	f, err := os.Open(c.ContentKeyFile)
	if err != nil {
		return nil, fmt.Errorf("--content-key-file %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeySize+1))
	if err != nil {
		return nil, fmt.Errorf("--content-key-file %w", err)
	}
	key := bytes.TrimSpace(b)
	switch {
	case len(b) > maxKeySize:
		return nil, fmt.Errorf("--content-key-file %s: larger than %d bytes", c.ContentKeyFile, maxKeySize)
	case len(key) < minKeySize:
		return nil, fmt.Errorf("--content-key-file %s: %d bytes, want at least %d random ones (head -c 32 /dev/urandom | base64)", c.ContentKeyFile, len(key), minKeySize)
	}
	return key, nil
}
