package access_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/internal/s3test"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Two versions of an object: v2 changes a file, adds one, keeps the rest.
var (
	v1Files = map[string][]byte{"a.txt": []byte("alpha\n"), "sub/b.csv": []byte("x,y\n1,2\n"), "c.bin": []byte{0, 1, 2, 3, 255}}
	v2Files = map[string][]byte{"a.txt": []byte("alpha, revised\n"), "sub/b.csv": []byte("x,y\n1,2\n"), "c.bin": []byte{0, 1, 2, 3, 255},
		"d.txt": []byte("new in v2\n")}
)

// End to end on the local stores: an object ingested in two versions, then
// requested whole, as one version and as two of its files, in each format;
// each package, fetched from the daemon's HTTP server, holds exactly the
// stored files, byte for byte (by digest).
func TestPackagesFromLocalStorage(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigConfig{})
	checkPackages(t, r, "/access/")
}

// The same on S3: objects stored as OCFL in a bucket of a real S3 server,
// packages uploaded to another prefix and fetched by presigned URLs
// without credentials.
func TestPackagesOnS3(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t) // not parallel: the AWS_* variables are the process's
	r := newRig(t, rigConfig{storage: []string{srv.URL(srv.Addr, "ocfl")}, to: srv.URL(srv.Addr, "packages")})
	checkPackages(t, r, "X-Amz-Signature=")
}

func checkPackages(t *testing.T, r *rig, urlHas string) {
	ark := r.deposit("obj-1", v1Files)
	if again := r.deposit("obj-1", v2Files); again != ark {
		t.Fatalf("update stored %s, want %s", again, ark)
	}
	stored := r.stored(ark)
	if len(stored) != 2 {
		t.Fatalf("stored versions %v, want 2", stored)
	}
	top := packageTop(ark)
	whole := map[string]string{}
	for i, v := range stored {
		for name, sum := range v {
			whole[fmt.Sprintf("%s/v%d/%s", top, i+1, name)] = sum
		}
	}
	version1 := map[string]string{}
	for name, sum := range stored[0] {
		version1[top+"_v1/"+name] = sum
	}
	two := []string{producer(stored[1], "a.txt"), producer(stored[1], "d.txt")}
	files := map[string]string{top + "/" + two[0]: stored[1][two[0]], top + "/" + two[1]: stored[1][two[1]]}
	// The deposited bytes themselves, beside storage's digests.
	if files[top+"/"+two[0]] != sum(v2Files["a.txt"]) || version1[top+"_v1/"+producer(stored[0], "a.txt")] != sum(v1Files["a.txt"]) {
		t.Fatalf("storage's digests differ from the deposit's: %v %v", files, version1)
	}
	for _, format := range []string{queue.FormatZip, queue.FormatTarGz} {
		for _, c := range []struct {
			what string
			req  ops.AccessRequest
			want map[string]string
		}{
			{"whole", ops.AccessRequest{ARK: ark, Format: format}, whole},
			{"version 1", ops.AccessRequest{ARK: ark, Version: 1, Format: format}, version1},
			{"two files", ops.AccessRequest{ARK: ark, Files: two, Format: format}, files},
		} {
			v, e := r.request(c.req)
			tok := v.Token
			if v.State != queue.Completed || tok.TokenStatus != queue.TokenReady || tok.Package == nil {
				t.Fatalf("%s %s: %s %q, token %+v", c.what, format, v.State, v.Message, tok)
			}
			if !strings.Contains(tok.URL, urlHas) || e.Attrs["url"] != tok.URL || !strings.HasSuffix(tok.Package.Name, "."+format) {
				t.Errorf("%s %s: url %q (event's %v), package %s; want a URL with %q", c.what, format, tok.URL, e.Attrs["url"], tok.Package.Name, urlHas)
			}
			got, pkgSum := r.fetch(tok.URL, format)
			if !maps.Equal(got, c.want) {
				t.Errorf("%s %s: package holds\n%v\nwant\n%v", c.what, format, got, c.want)
			}
			if pkgSum != tok.Package.SHA256 || tok.Package.Entries != len(c.want) {
				t.Errorf("%s %s: package sha256 %s, token says %s with %d entries", c.what, format, pkgSum, tok.Package.SHA256, tok.Package.Entries)
			}
		}
	}
}

// producer is the stored name of a deposited file.
func producer(v map[string]string, name string) string {
	keys := slices.Sorted(maps.Keys(v))
	i := slices.IndexFunc(keys, func(k string) bool { return strings.HasSuffix(k, "/"+name) && strings.HasPrefix(k, "producer/") })
	if i < 0 {
		panic("no stored file for " + name + " in " + fmt.Sprint(keys))
	}
	return keys[i]
}

// packageTop is the folder a package of ark holds its files in, as the
// package names it: the ARK as a folder name (a version's adds _vN).
func packageTop(ark string) string { return strings.NewReplacer(":/", "_", "/", "_").Replace(ark) }
