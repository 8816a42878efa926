// Package archivetest starts a real S3 server for tests: versitygw, an S3
// gateway over a local directory (github.com/versity/versitygw), built by
// `make tools` into bin/tools. It never fakes S3 and never runs outside
// tests; the credentials it makes up are random per server.
package archivetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/sandboxd/sandboxd/internal/atomicfile"
	"github.com/sandboxd/sandboxd/internal/testutil"
)

// Server is one versitygw process serving an S3 API over a directory.
type Server struct {
	Endpoint  string // http://127.0.0.1:port
	Bucket    string
	AccessKey string
	SecretKey string
	Dir       string // the posix backend's directory (buckets are subdirectories)

	t    testing.TB
	bin  string
	port int
	cmd  *exec.Cmd
}

// Binary finds versitygw: $SANDBOXD_VERSITYGW, else bin/tools/versitygw at
// the repository root. Without it a test fails under CI=true and is
// skipped elsewhere (run `make tools`).
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("SANDBOXD_VERSITYGW"); p != "" {
		return p
	}
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "bin", "tools", "versitygw")
	if _, err := os.Stat(p); err != nil {
		testutil.SkipOrFail(t, "versitygw not found at "+p+": run `make tools`")
	}
	return p
}

// Start starts a server with a fresh directory, random credentials and a
// bucket, and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, bin: Binary(t), Dir: t.TempDir(), Bucket: "sandboxd-archives",
		AccessKey: "AK" + randHex(8), SecretKey: "SK" + randHex(20)}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s.Endpoint = "http://127.0.0.1:" + strconv.Itoa(s.port)
	s.Restart()
	t.Cleanup(s.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Client().MakeBucket(ctx, s.Bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("make bucket: %v", err)
	}
	return s
}

// Restart starts the server again (after Stop) on the same port and data.
func (s *Server) Restart() {
	s.t.Helper()
	cmd := exec.Command(s.bin, "--port", "127.0.0.1:"+strconv.Itoa(s.port), "--quiet", "posix", s.Dir)
	// Credentials through the environment, never on a command line that
	// ps shows.
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.SecretKey)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start versitygw: %v", err)
	}
	s.cmd = cmd
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(s.port), 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			s.Stop()
			s.t.Fatalf("versitygw did not listen on %d: %v", s.port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the server (SIGKILL: as abrupt as a crash or a cut link).
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Client is an S3 client of the server (for the tests' own checks).
func (s *Server) Client() *minio.Client {
	s.t.Helper()
	c, err := minio.New("127.0.0.1:"+strconv.Itoa(s.port), &minio.Options{
		Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""), BucketLookup: minio.BucketLookupPath, Region: "us-east-1"})
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// CredentialsFile writes the credentials in the AWS shared format to a
// 0600 file and returns its path.
func (s *Server) CredentialsFile(dir string) string {
	s.t.Helper()
	p := filepath.Join(dir, "s3-credentials")
	body := fmt.Sprintf("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n", s.AccessKey, s.SecretKey)
	if err := atomicfile.WriteFile(p, []byte(body), 0o600); err != nil {
		s.t.Fatal(err)
	}
	return p
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Signal sends sig to the server (SIGSTOP: a hung server).
func (s *Server) Signal(sig syscall.Signal) error { return s.cmd.Process.Signal(sig) }
