package ctxio

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

func TestCopySHA256(t *testing.T) {
	var out bytes.Buffer
	src := strings.Repeat("abc", 200_000) // more than one buffer
	n, sum, err := CopySHA256(context.Background(), &out, strings.NewReader(src))
	if err != nil || n != int64(len(src)) || out.String() != src {
		t.Fatalf("copied %d bytes, err %v", n, err)
	}
	// sha256 of "" is well known; of src, compare with a second copy's.
	if _, empty, _ := CopySHA256(context.Background(), &out, strings.NewReader("")); empty != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatalf("sha256 of nothing = %s", empty)
	}
	if _, again, _ := CopySHA256(context.Background(), &bytes.Buffer{}, strings.NewReader(src+"x")); again == sum {
		t.Fatal("different bytes, same digest")
	}
}

func TestCanceledCopyStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	n, _, err := CopySHA256(ctx, &out, strings.NewReader("data"))
	if !errors.Is(err, context.Canceled) || n != 0 {
		t.Fatalf("canceled copy: %d bytes, %v", n, err)
	}
}
