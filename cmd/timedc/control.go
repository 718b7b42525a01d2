package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/timed-project/timed/timed/control"
)

// call sends req to the local daemon's control socket. Where the socket
// or a directory on the way to it refuses us, the error says who may use
// it and how to become one, instead of control.Call's "is timed running?"
// (kept for a socket that is not there or not answering).
func (o *options) call(ctx context.Context, req control.Request) (*control.Response, error) {
	resp, err := control.Call(ctx, o.controlSocket, req)
	if err != nil && errors.Is(err, fs.ErrPermission) {
		return nil, fmt.Errorf("connect to timed at %s: %w: %s", o.controlSocket, fs.ErrPermission, permissionHint(o.controlSocket))
	}
	return resp, err
}

// permissionHint finds what refuses access to the socket at path (a
// directory on the way that we may not search, or the socket that we may
// not write) and says who may use it.
func permissionHint(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	// The directories from the root down, then the socket.
	var chain []string
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		chain = append([]string{d}, chain...)
		if d == filepath.Dir(d) {
			break
		}
	}
	for _, d := range chain {
		if syscall.Access(d, 1) != nil { // X_OK: may we search it?
			return refusal("the directory "+d, d, 0o1)
		}
	}
	if syscall.Access(abs, 2) != nil { // W_OK: connecting writes to the socket
		return refusal("the socket", abs, 0o2)
	}
	return "the file modes allow it: a security policy (SELinux, AppArmor) may refuse it"
}

// refusal says who may use the file at path: what is its owner, group and
// mode, and what to do, for the access bits need (1 search, 2 write).
func refusal(what, path string, need os.FileMode) string {
	fi, err := os.Stat(path)
	if err != nil {
		return what + " cannot be read: " + err.Error()
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return what + " refuses it"
	}
	owner, group := userName(st.Uid), groupName(st.Gid)
	mode := fi.Mode().Perm()
	s := fmt.Sprintf("%s is %s:%s, mode %04o; ", what, owner, group, mode)
	as := "root"
	if st.Uid != 0 {
		as = owner + " or root"
	}
	if mode&(need<<3) != 0 && st.Gid != 0 {
		return s + "add yourself to group " + group + " (then log in again) or run timedc as " + as
	}
	return s + "only " + owner + " may use it: run timedc as " + as
}

func userName(uid uint32) string {
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		return u.Username
	}
	return strconv.FormatUint(uint64(uid), 10)
}

func groupName(gid uint32) string {
	if g, err := user.LookupGroupId(strconv.FormatUint(uint64(gid), 10)); err == nil {
		return g.Name
	}
	return strconv.FormatUint(uint64(gid), 10)
}
