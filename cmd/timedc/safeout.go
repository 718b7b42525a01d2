package main

import (
	"fmt"
	"io"
	"unicode"
	"unicode/utf8"
)

// safeWriter escapes every control character but newline and tab, and
// every byte that is not UTF-8, on its way to the terminal. Host names and
// other strings in timedc's output come from the network: a forged name
// holding terminal escapes must not reach the admin's screen. The escape
// \u00XX reads as itself in text and is still valid inside a JSON string.
type safeWriter struct{ w io.Writer }

func (s safeWriter) Write(p []byte) (int, error) {
	out := make([]byte, 0, len(p))
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRune(p[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			out = fmt.Appendf(out, `\u%04x`, p[i])
		case r != '\n' && r != '\t' && unicode.IsControl(r):
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, p[i:i+size]...)
		}
		i += size
	}
	if _, err := s.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}
