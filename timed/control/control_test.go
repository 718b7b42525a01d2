package control

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func serve(t *testing.T, h Handler) (*Server, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "timed.sock")
	s, err := Listen(path, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestStatusRoundTrip(t *testing.T) {
	_, path := serve(t, func(_ context.Context, req Request) Response {
		if req.Cmd != CmdStatus {
			return Response{Error: "unknown command " + req.Cmd}
		}
		return Response{OK: true, Status: &Status{State: "master", Hostname: "h1",
			Slaves: []Slave{{Peer: Peer{Name: "h2", Address: "127.0.0.1:1526"}, OffsetSecs: -0.002}}}}
	})
	resp, err := Call(ctx(t), path, Request{Cmd: CmdStatus})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status.State != "master" || len(resp.Status.Slaves) != 1 || resp.Status.Slaves[0].OffsetSecs != -0.002 {
		t.Fatalf("status %+v", resp.Status)
	}
	if _, err := Call(ctx(t), path, Request{Cmd: "bogus"}); err == nil || !strings.Contains(err.Error(), "unknown command bogus") {
		t.Fatalf("failed command: err = %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode %v, %v; want 0660", fi.Mode().Perm(), err)
	}
}

func TestConcurrentClientsAndClose(t *testing.T) {
	s, path := serve(t, func(_ context.Context, req Request) Response {
		return Response{OK: true, Status: &Status{State: "slave", Trace: req.On}}
	})
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := Call(ctx(t), path, Request{Cmd: CmdTrace, On: true})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("socket file left behind: %v", err)
	}
	if _, err := Call(ctx(t), path, Request{Cmd: CmdStatus}); err == nil || !strings.Contains(err.Error(), "is timed running") {
		t.Fatalf("call after close: %v", err)
	}
}

func TestRefusesLiveSocketReplacesStale(t *testing.T) {
	_, path := serve(t, func(context.Context, Request) Response { return Response{OK: true} })
	if _, err := Listen(path, nil); err == nil || !strings.Contains(err.Error(), "another timed") {
		t.Fatalf("second Listen on a live socket: %v", err)
	}
	stale := filepath.Join(t.TempDir(), "stale.sock")
	if err := os.WriteFile(stale, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Listen(stale, func(context.Context, Request) Response { return Response{OK: true} })
	if err != nil {
		t.Fatalf("stale file not replaced: %v", err)
	}
	s.Close()
}

func TestBadRequestLine(t *testing.T) {
	_, path := serve(t, func(context.Context, Request) Response { return Response{OK: true} })
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("{not json\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(buf)
	if err != nil || !strings.Contains(string(buf[:n]), `"ok":false`) || !strings.Contains(string(buf[:n]), "bad request") {
		t.Fatalf("answer %q, %v", buf[:n], err)
	}
}
