package auth

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Hash is the hash function of a key's HMAC.
type Hash uint8

// The hashes accepted in a key file. MD5 is refused (see ParseKeys).
const (
	SHA1 Hash = iota + 1
	SHA256
	SHA384
	SHA512
)

var hashNames = map[Hash]string{SHA1: "SHA1", SHA256: "SHA256", SHA384: "SHA384", SHA512: "SHA512"}

func (h Hash) String() string {
	if n, ok := hashNames[h]; ok {
		return n
	}
	return fmt.Sprintf("Hash(%d)", uint8(h))
}

// Size is the length in bytes of the hash's output, which is the length
// of the MAC in the trailer.
func (h Hash) Size() int {
	switch h {
	case SHA1:
		return sha1.Size
	case SHA256:
		return sha256.Size
	case SHA384:
		return sha512.Size384
	case SHA512:
		return sha512.Size
	}
	return 0
}

func (h Hash) new() func() hash.Hash {
	switch h {
	case SHA1:
		return sha1.New
	case SHA256:
		return sha256.New
	case SHA384:
		return sha512.New384
	case SHA512:
		return sha512.New
	}
	return nil
}

// hashBySize maps a MAC length seen on the wire back to the one hash that
// makes it; the four sizes differ.
func hashBySize(n int) (Hash, bool) {
	for _, h := range []Hash{SHA1, SHA256, SHA384, SHA512} {
		if h.Size() == n {
			return h, true
		}
	}
	return 0, false
}

// MinKeyLen is the shortest key material accepted, in bytes (128 bits).
// Every signed packet lets whoever captures it test guesses of the key
// offline, at the speed of HMAC, so a short or guessable key falls to a
// dictionary. Keys as long as the hash's output (Hash.Size) are
// recommended, made by a random generator (chronyc keygen ID SHA256 256, or
// head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n').
const MinKeyLen = 16

// Key is one shared secret. The secret is unexported and never formatted:
// every fmt verb (%v, %+v, %#v, %x, %d…) shows the ID and hash only.
type Key struct {
	ID     uint32
	Hash   Hash
	secret []byte
}

// NewKey makes a key from its material (copied), with the same checks as
// a key file line.
func NewKey(id uint32, h Hash, secret []byte) (*Key, error) {
	if err := checkKey(id, h, len(secret)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	return &Key{ID: id, Hash: h, secret: bytes.Clone(secret)}, nil
}

// checkKey says what is wrong with a key, never showing its material.
func checkKey(id uint32, h Hash, n int) error {
	switch {
	case id == 0:
		return errors.New("key ID 0: IDs are 1 to 4294967295")
	case h.Size() == 0:
		return fmt.Errorf("key %d: unknown hash %v: accept %s", id, h, acceptedHashes)
	case n < MinKeyLen:
		return fmt.Errorf("key %d: %d bytes of key material, need at least %d (%d recommended for %v)", id, n, MinKeyLen, h.Size(), h)
	}
	return nil
}

func (k Key) String() string { return fmt.Sprintf("key %d (%v)", k.ID, k.Hash) }

// Format makes every verb print String, so that no verb reaches the
// secret through reflection.
func (k Key) Format(f fmt.State, _ rune) { io.WriteString(f, k.String()) }

// mac returns HMAC-Hash(secret, parts...).
func (k *Key) mac(dst []byte, parts ...[]byte) []byte {
	m := hmac.New(k.Hash.new(), k.secret)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(dst)
}

// Keyring is the set of keys of a key file, looked up by ID. It is
// read-only once made, so safe for concurrent use.
type Keyring struct {
	keys map[uint32]*Key
	ids  []uint32 // ascending
}

// NewKeyring gathers keys; their IDs must differ.
func NewKeyring(keys ...*Key) (*Keyring, error) {
	kr := &Keyring{keys: make(map[uint32]*Key, len(keys))}
	for _, k := range keys {
		if _, dup := kr.keys[k.ID]; dup {
			return nil, fmt.Errorf("%w: key ID %d given twice", ErrKeyFile, k.ID)
		}
		kr.keys[k.ID] = k
		kr.ids = append(kr.ids, k.ID)
	}
	if len(kr.ids) == 0 {
		return nil, fmt.Errorf("%w: no keys", ErrKeyFile)
	}
	slices.Sort(kr.ids)
	return kr, nil
}

// Lookup returns the key with this ID.
func (kr *Keyring) Lookup(id uint32) (*Key, bool) {
	k, ok := kr.keys[id]
	return k, ok
}

// IDs lists the key IDs, ascending.
func (kr *Keyring) IDs() []uint32 { return slices.Clone(kr.ids) }

// ErrKeyFile is wrapped by every error about a key file or key.
var ErrKeyFile = errors.New("auth key")

// ErrKeyFileMode is wrapped when the key file can be read or written by
// group or others.
var ErrKeyFileMode = errors.New("key file open to group or others")

const (
	acceptedHashes = "SHA1, SHA256, SHA384 or SHA512"
	acceptedKeys   = "HEX:<hex digits>, ASCII:<text> or <text> (ASCII)"
	keyLineForm    = "lines are ID TYPE KEY, e.g. 1 SHA256 HEX:<64 hex digits>"
)

// knownRefused are chrony's other key types, named in the error when a
// file uses one. Any other word in the TYPE column is not echoed: a file
// with its columns out of order could hold key material there.
var knownRefused = map[string]string{
	"MD5":       "MD5 is refused: it is broken as a hash, chrony's default when TYPE is left out, and ruled out by most security policies; HMAC-SHA1 or better costs nothing more here",
	"AES128":    "AES128 (CMAC) is not supported",
	"AES256":    "AES256 (CMAC) is not supported",
	"RMD128":    "RMD128 is not supported",
	"RMD160":    "RMD160 is not supported",
	"RMD256":    "RMD256 is not supported",
	"RMD320":    "RMD320 is not supported",
	"SHA224":    "SHA224 is not supported",
	"SHA3-224":  "SHA3-224 is not supported",
	"SHA3-256":  "SHA3-256 is not supported",
	"SHA3-384":  "SHA3-384 is not supported",
	"SHA3-512":  "SHA3-512 is not supported",
	"TIGER":     "TIGER is not supported",
	"WHIRLPOOL": "WHIRLPOOL is not supported",
}

// LoadKeys reads a key file in chrony's format (see ParseKeys). The file
// must be readable and writable by its owner alone (mode 0600 or
// stricter): a key that other local users can read is no secret, and one
// they can write lets them choose it. It is checked on the opened file.
func LoadKeys(path string) (*Keyring, error) {
	f, perm, err := openStat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	defer f.Close()
	if perm&0o077 != 0 {
		return nil, fmt.Errorf("%w: %w: %s has mode %04o: run chmod 600 %s", ErrKeyFile, ErrKeyFileMode, path, perm, path)
	}
	return ParseKeys(f, path)
}

// ParseKeys reads keys in chrony's key file format, one key a line:
//
//	# comment
//	ID TYPE KEY
//	1 SHA256 HEX:6c1f…(hex digits)
//	2 SHA1 ASCII:a-long-random-passphrase
//	3 SHA512 another-long-random-passphrase
//
// ID is 1 to 4294967295, each ID once. TYPE is SHA1, SHA256, SHA384 or
// SHA512 (any case); chrony's two-column form (ID KEY) means MD5 there
// and is refused here, as is MD5 itself and chrony's other types. KEY is
// HEX: and hex digits, ASCII: and text, or text alone (ASCII); it may not
// hold spaces or start with #, and must give at least MinKeyLen bytes.
// Blank lines and lines starting with # are skipped; # after a key is
// part of it, as in chrony. name (the file's path) prefixes each error
// with name:line. No error repeats any part of a line: a mistake could
// put key material in any column.
func ParseKeys(r io.Reader, name string) (*Keyring, error) {
	var keys []*Key
	lineOf := map[uint32]int{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		k, err := parseKeyLine(line)
		if err != nil {
			return nil, fmt.Errorf("%w: %s:%d: %s", ErrKeyFile, name, n, err)
		}
		if prev, dup := lineOf[k.ID]; dup {
			return nil, fmt.Errorf("%w: %s:%d: key ID %d is already on line %d: each ID once", ErrKeyFile, name, n, k.ID, prev)
		}
		lineOf[k.ID] = n
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		// bufio's errors name no content, only the failure.
		return nil, fmt.Errorf("%w: %s: %w", ErrKeyFile, name, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: %s: no keys (%s)", ErrKeyFile, name, keyLineForm)
	}
	return NewKeyring(keys...)
}

// parseKeyLine returns a message without ErrKeyFile or the position,
// which the caller adds; it never quotes the line.
func parseKeyLine(line string) (*Key, error) {
	f := strings.Fields(line)
	switch {
	case len(f) == 2:
		return nil, errors.New("2 columns: chrony reads ID KEY as an MD5 key, which timed refuses; write ID TYPE KEY with TYPE " + acceptedHashes)
	case len(f) != 3:
		return nil, fmt.Errorf("%d columns: %s (KEY may not hold spaces)", len(f), keyLineForm)
	}
	id64, err := strconv.ParseUint(f[0], 10, 32)
	if err != nil || id64 == 0 {
		// strconv's error quotes the column: not wrapped.
		return nil, errors.New("ID (column 1) is not a number from 1 to 4294967295")
	}
	id := uint32(id64)
	typ := strings.ToUpper(f[1])
	var h Hash
	for hh, n := range hashNames {
		if n == typ {
			h = hh
		}
	}
	if h == 0 {
		if why, ok := knownRefused[typ]; ok {
			return nil, fmt.Errorf("key %d: %s: accept %s", id, why, acceptedHashes)
		}
		return nil, fmt.Errorf("key %d: TYPE (column 2) is not a hash timed knows (not shown, in case it is key material): accept %s", id, acceptedHashes)
	}
	secret, err := decodeKey(f[2])
	if err != nil {
		return nil, fmt.Errorf("key %d: KEY (column 3): %w: accept %s", id, err, acceptedKeys)
	}
	if err := checkKey(id, h, len(secret)); err != nil {
		return nil, err
	}
	return &Key{ID: id, Hash: h, secret: secret}, nil
}

func decodeKey(s string) ([]byte, error) {
	switch {
	case hasPrefixFold(s, "HEX:"):
		h := s[4:]
		if len(h)%2 != 0 {
			return nil, fmt.Errorf("odd number (%d) of hex digits", len(h))
		}
		b, err := hex.DecodeString(h)
		if err != nil {
			// hex's error quotes the offending character: not wrapped.
			return nil, errors.New("HEX: key holds a character that is not a hex digit")
		}
		return b, nil
	case hasPrefixFold(s, "ASCII:"):
		return []byte(s[6:]), nil
	}
	return []byte(s), nil
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
