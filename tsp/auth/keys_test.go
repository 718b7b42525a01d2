package auth

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeKeyFile writes content to a new file of the given mode.
func writeKeyFile(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "timed.keys")
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	return path
}

const goodKeys = `# timed keys, chrony's format

1 SHA256 HEX:6c1f5a0e9d6b3c2a8f7e4d1c0b9a8f7e6d5c4b3a29180716f5e4d3c2b1a09f8e
  # indented comment
2 sha1 ASCII:correct-horse-battery-staple
3 SHA384 just-ascii-no-prefix-here#1
4 SHA512 hex:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff
`

func TestLoadKeys(t *testing.T) {
	kr, err := LoadKeys(writeKeyFile(t, goodKeys, 0o600))
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint32]struct {
		h   Hash
		len int
	}{1: {SHA256, 32}, 2: {SHA1, 28}, 3: {SHA384, 27}, 4: {SHA512, 32}}
	if got := kr.IDs(); fmt.Sprint(got) != "[1 2 3 4]" {
		t.Fatalf("IDs %v", got)
	}
	for id, w := range want {
		k, ok := kr.Lookup(id)
		if !ok || k.Hash != w.h || len(k.secret) != w.len {
			t.Errorf("key %d: %v (%d bytes), want %v (%d bytes)", id, k, len(k.secret), w.h, w.len)
		}
	}
	if k, _ := kr.Lookup(2); string(k.secret) != "correct-horse-battery-staple" {
		t.Error("ASCII: prefix not cut")
	}
	if k, _ := kr.Lookup(3); string(k.secret) != "just-ascii-no-prefix-here#1" {
		t.Error("a # inside a key is part of it, as in chrony")
	}
	// Formatting a key never shows its material.
	k, _ := kr.Lookup(2)
	for _, s := range []string{fmt.Sprint(k), fmt.Sprintf("%+v", k), fmt.Sprintf("%#v", k), fmt.Sprintf("%v", *k), fmt.Sprintf("%d", *k), fmt.Sprintf("%x", *k), fmt.Sprintf("%+v", kr)} {
		if strings.Contains(s, "horse") || strings.Contains(s, "99 111 114") || strings.Contains(s, "636f7272") {
			t.Errorf("formatted key shows its material: %s", s)
		}
	}
}

func TestLoadKeysPermissions(t *testing.T) {
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o620, 0o602} {
		path := writeKeyFile(t, goodKeys, mode)
		_, err := LoadKeys(path)
		if !errors.Is(err, ErrKeyFileMode) || !errors.Is(err, ErrKeyFile) {
			t.Fatalf("mode %04o: %v, want ErrKeyFileMode", mode, err)
		}
		for _, s := range []string{path, fmt.Sprintf("%04o", mode), "chmod 600 " + path} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("mode %04o: error %q does not say %q", mode, err, s)
			}
		}
	}
	for _, mode := range []os.FileMode{0o600, 0o400} {
		if _, err := LoadKeys(writeKeyFile(t, goodKeys, mode)); err != nil {
			t.Errorf("mode %04o: %v", mode, err)
		}
	}
	_, err := LoadKeys(filepath.Join(t.TempDir(), "absent"))
	if !errors.Is(err, os.ErrNotExist) || !errors.Is(err, ErrKeyFile) {
		t.Errorf("absent file: %v, want it to wrap ErrNotExist", err)
	}
}

func TestLoadKeysBadLines(t *testing.T) {
	const secret = "Sup3rSecretKeyMaterial"
	for _, tc := range []struct {
		name, line, want string
	}{
		{"two columns (chrony's MD5)", "7 " + secret, "2 columns: chrony reads ID KEY as an MD5 key"},
		{"four columns", "7 SHA1 " + secret + " extra", "4 columns"},
		{"MD5", "7 MD5 " + secret, "MD5 is refused"},
		{"AES128", "7 AES128 HEX:00112233445566778899aabbccddeeff", "AES128 (CMAC) is not supported"},
		{"unknown type not echoed", "7 " + secret + " SHA1", "TYPE (column 2) is not a hash timed knows"},
		{"ID not a number", secret + " SHA1 " + secret, "ID (column 1) is not a number"},
		{"ID zero", "0 SHA1 " + secret, "ID (column 1) is not a number from 1"},
		{"ID too big", "4294967296 SHA1 " + secret, "ID (column 1)"},
		{"odd hex", "7 SHA1 HEX:" + "0123456789abcdef0123456789abcdef0", "odd number (33) of hex digits"},
		{"bad hex", "7 SHA1 HEX:" + "0123456789abcdef0123456789abcdeZ", "not a hex digit"},
		{"short ASCII key", "7 SHA1 ASCII:Sup3rShort", "10 bytes of key material, need at least 16 (20 recommended for SHA1)"},
		{"short hex key", "7 SHA256 HEX:00112233", "4 bytes of key material, need at least 16 (32 recommended for SHA256)"},
		{"duplicate ID", "1 SHA1 " + secret, "key ID 1 is already on line 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			content := "# keys\n\n1 SHA256 HEX:00112233445566778899aabbccddeeff\n" + tc.line + "\n"
			path := writeKeyFile(t, content, 0o600)
			_, err := LoadKeys(path)
			if !errors.Is(err, ErrKeyFile) {
				t.Fatalf("%v, want ErrKeyFile", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, path+":4: ") {
				t.Errorf("error %q does not name %s:4", msg, path)
			}
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error %q does not say %q", msg, tc.want)
			}
			for _, leak := range []string{secret, "Sup3r", "0123456789abcdef", "aabbccddeeff"} {
				if strings.Contains(msg, leak) {
					t.Errorf("error %q shows key material %q", msg, leak)
				}
			}
		})
	}
	for _, content := range []string{"", "# only comments\n\n"} {
		if _, err := LoadKeys(writeKeyFile(t, content, 0o600)); !errors.Is(err, ErrKeyFile) || !strings.Contains(err.Error(), "no keys") {
			t.Errorf("%q: %v, want \"no keys\"", content, err)
		}
	}
}

func TestNewKey(t *testing.T) {
	if _, err := NewKey(0, SHA256, make([]byte, 32)); !errors.Is(err, ErrKeyFile) {
		t.Errorf("ID 0: %v", err)
	}
	if _, err := NewKey(1, Hash(9), make([]byte, 32)); !errors.Is(err, ErrKeyFile) {
		t.Errorf("hash 9: %v", err)
	}
	if _, err := NewKey(1, SHA256, make([]byte, MinKeyLen-1)); !errors.Is(err, ErrKeyFile) {
		t.Errorf("short: %v", err)
	}
	m := make([]byte, MinKeyLen)
	k, err := NewKey(1, SHA256, m)
	if err != nil {
		t.Fatal(err)
	}
	m[0] = 1
	if k.secret[0] != 0 {
		t.Error("NewKey does not copy the material")
	}
	if _, err := NewKeyring(k, k); !errors.Is(err, ErrKeyFile) {
		t.Errorf("duplicate IDs: %v", err)
	}
	if _, err := NewKeyring(); !errors.Is(err, ErrKeyFile) {
		t.Errorf("no keys: %v", err)
	}
}
