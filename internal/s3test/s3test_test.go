package s3test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

func TestInstalledNamesTheInstallCommand(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	err := Installed()
	if err == nil || !strings.Contains(err.Error(), "scripts/install-versitygw.sh") {
		t.Fatalf("got %v, want an error naming scripts/install-versitygw.sh", err)
	}
}

// Restart serves the same bucket and objects on the same address.
func TestRestartKeepsAddressAndData(t *testing.T) {
	s := Start(t)
	c, err := s.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := c.PutObject(ctx, s.Bucket, "k", strings.NewReader("v"), 1, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	down, cancelDown := context.WithTimeout(ctx, time.Second)
	defer cancelDown()
	if _, err := c.StatObject(down, s.Bucket, "k", minio.StatObjectOptions{}); err == nil {
		t.Fatal("the stopped server answered")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	info, err := c.StatObject(ctx, s.Bucket, "k", minio.StatObjectOptions{})
	if err != nil || info.Size != 1 || s.Addr != addr {
		t.Fatalf("after restart: %+v, %v at %s; want k of 1 byte at %s", info, err, s.Addr, addr)
	}
}
