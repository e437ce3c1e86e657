package ocfl

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/handlers/storage/ocfl/ocfltest"
	"github.com/ingestq/ingestq/handlers/storage/place"
)

// killedEnv names the folder a re-run of this test binary writes into
// until it is killed: its storage root ("root") and the object's work files
// ("work"). The parent's: a killed child cannot remove a folder of its own.
const killedEnv = "INGESTQ_OCFL_KILLED_DIR"

// killedFiles is the object the killed process and its retry store.
var killedFiles = map[string]string{"producer/a.txt": "a\n", "producer/b.txt": "b\n"}

// A process killed while a local place writes a file leaves that file's
// temporary beside its key. The next Put of the object must remove it:
// OCFL allows no file the inventory does not name, so a leftover would
// keep the object invalid for good.
func TestKilledMidWriteLeavesNoStrayFile(t *testing.T) {
	if dir := os.Getenv(killedEnv); dir != "" {
		killedChild(t, dir)
		return
	}
	dir := filepath.Join(t.TempDir(), "root")
	openStore(t, dir) // the storage root, made before the child writes into it
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledMidWriteLeavesNoStrayFile$")
	cmd.Env = append(os.Environ(), killedEnv+"="+filepath.Dir(dir))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe() // the child blocks reading it until killed
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if line != "writing\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the child did not start writing: %q, %v", line, err)
	}
	_ = cmd.Process.Kill() // SIGKILL: nothing of the child's cleans up
	_ = cmd.Wait()

	s := openStore(t, dir)
	v, err := s.Put(context.Background(), storage.Object{ARK: testARK, Files: workFiles(t, killedFiles)})
	if err != nil || v.Number != 1 || !v.Changed {
		t.Fatalf("put after the kill = version %d changed %v, %v; want version 1", v.Number, v.Changed, err)
	}
	ocfltest.Validate(t, dir)
}

// killedChild stores the object through a place whose first content
// write stops after its temporary file is made, says so on stdout, and
// waits to be killed.
func killedChild(t *testing.T, dir string) {
	p, err := place.NewLocal(filepath.Join(dir, "root"))
	if err != nil {
		t.Fatal(err)
	}
	s := &Store{p: &stallingPlace{Place: p}}
	_, err = s.Put(context.Background(), storage.Object{ARK: testARK, Files: workFilesIn(t, filepath.Join(dir, "work"), killedFiles)})
	t.Fatalf("put returned (%v); it should have been killed", err)
}

// A depositor's file may have any name a local place gives its temporary
// files: it is stored like any other.
func TestNamesLikeTemporaryFilesAreStored(t *testing.T) {
	s, _ := newStore(t)
	files := workFiles(t, map[string]string{".put-x": "a depositor's name", "producer/.put-y/z": "z"})
	if _, err := s.Put(context.Background(), storage.Object{ARK: testARK, Files: files}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Latest(context.Background(), testARK)
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, got.Files, files)
}

// stallingPlace writes through a real place, but the reader of the first
// content file it writes blocks for ever once the place reads it.
type stallingPlace struct {
	place.Place
	once sync.Once
}

func (s *stallingPlace) Put(ctx context.Context, key string, r io.Reader, size int64, sum string) error {
	if strings.Contains(key, "/content/") {
		s.once.Do(func() { r = stalling{} })
	}
	return s.Place.Put(ctx, key, r, size, sum)
}

type stalling struct{}

func (stalling) Read(b []byte) (int, error) {
	fmt.Println("writing")
	return os.Stdin.Read(b) // the parent never writes: blocks until killed
}

// A binary before decision 238 named its temporary files ".put-…", which
// the place lists as keys. Those a killed write left beside the root
// inventory or a version's are removed by the next Put of the object; a
// depositor's file of such a name, in a content folder, is kept.
func TestOlderBinarysTemporaryFilesAreRemoved(t *testing.T) {
	s, dir := newStore(t)
	ctx := context.Background()
	files := workFiles(t, map[string]string{"producer/.put-123": "a depositor's name", "producer/a.txt": "a\n"})
	if _, err := s.Put(ctx, storage.Object{ARK: testARK, Files: files}); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, filepath.FromSlash(objectRoot(testARK)))
	for _, leftover := range []string{".put-2596996162", "v1/.put-TJ4NPGPGZNVXBU6V4QQT4Z5ZAM"} { // os.CreateTemp's, rand.Text's
		if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(leftover)), []byte("half an inventory"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files = append(files, workFiles(t, map[string]string{"producer/b.txt": "b\n"})...)
	if v, err := s.Put(ctx, storage.Object{ARK: testARK, Files: files}); err != nil || v.Number != 2 {
		t.Fatalf("second put = version %d, %v; want version 2", v.Number, err)
	}
	var stray []string
	for _, k := range keysUnder(t, dir, testARK) {
		if strings.Contains(k, ".put-") {
			stray = append(stray, k)
		}
	}
	if want := []string{"v1/content/producer/.put-123"}; !slices.Equal(stray, want) {
		t.Errorf("keys named .put-…: %q, want only the depositor's %q", stray, want)
	}
}
