package handlers

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ingestq/ingestq/handlers/checkm"
	"github.com/ingestq/ingestq/handlers/fetch"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/internal/durable"
	"github.com/ingestq/ingestq/internal/redact"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Payload types of a job's configuration: what its payload_url is.
const (
	TypeFile      = "file"            // the object is this one file
	TypeContainer = "container"       // a zip whose files are the object
	TypeManifest  = "object_manifest" // an mrt-ingest-manifest listing the object's files
)

// The working folder of a job: the object's content under producer/ and
// system/, and the pipeline's own files beside them.
const (
	producerDir      = "producer"
	systemDir        = "system"
	manifestCopy     = "object-manifest.checkm" // the job's object manifest, as first fetched
	containerFile    = "container.zip"
	storageManifest  = "storage-manifest.checkm"
	storedRecord     = "stored-version.json"
	maxManifestBytes = 64 << 20
)

// file is one file to download into a job's working folder.
type file struct {
	Name string // relative to the working folder: producer/… or container.zip
	URL  string
	Want fetch.Want
}

// jobFiles lists what a job downloads. An object manifest is fetched once
// and kept in the working folder, so every step (and every retry) sees the
// same list.
func (p *Pipeline) jobFiles(ctx context.Context, j *queue.Job, prof *profile.Profile) ([]file, error) {
	cfg := j.Config
	url := cfg.PayloadURL
	switch typ := cfg.PayloadType; typ {
	case TypeFile, TypeContainer:
		want := fetch.Want{Alg: cfg.HashAlg, Digest: cfg.HashValue, Size: -1}
		if cfg.FileSize != nil {
			want.Size = *cfg.FileSize
		}
		if typ == TypeContainer {
			return []file{{Name: containerFile, URL: url, Want: want}}, nil
		}
		// mrt-zk's Job.createJobConfiguration writes no file name: the
		// URL's last segment is the file's, as a submission's is (single).
		given := cmp.Or(cfg.FileName, urlBase(url))
		name, err := checkm.CleanName(given)
		if err != nil {
			return nil, reactor.Fatal(fmt.Errorf("file name %q: %w", given, err))
		}
		return []file{{Name: path.Join(producerDir, name), URL: url, Want: want}}, nil
	case TypeManifest:
		m, err := p.objectManifest(ctx, j, prof)
		if err != nil {
			return nil, err
		}
		files := make([]file, len(m.Entries))
		for i, e := range m.Entries {
			files[i] = file{Name: path.Join(producerDir, e.FileName), URL: e.URL,
				Want: fetch.Want{Alg: e.HashAlg, Digest: e.HashValue, Size: e.Size}}
		}
		return files, nil
	default:
		if theirs, ok := cfg.Extra["type"]; ok && typ == "" {
			// Merritt's ingest service writes its package type so, for a
			// file on its own disk: not a payload ingestq fetches.
			return nil, reactor.Fatal(fmt.Errorf("configuration: no payload_type, only Merritt's type %s, which is not read as ingestq's: want payload_type %s, %s or %s",
				theirs, TypeFile, TypeContainer, TypeManifest))
		}
		return nil, reactor.Fatal(fmt.Errorf("configuration: payload_type %q: want %s, %s or %s", typ, TypeFile, TypeContainer, TypeManifest))
	}
}

// stepFiles is jobFiles for step s. A depositor's server that answers
// the request of the job's object manifest busy (503, 429) is waited for
// as a download's file is (waitForBusyServer): wait is then the step's
// Result, files nil. Before, the fetch client asked again under the
// step's worker, and Downloading spent the job's attempts on it.
func (p *Pipeline) stepFiles(ctx context.Context, s *reactor.Step, prof *profile.Profile) (files []file, wait *reactor.Result, err error) {
	files, err = p.jobFiles(fetch.WaitsForBusy(ctx), s.Job, prof)
	busy := &busyAnswers{}
	if !busy.add("", err) {
		return files, nil, err
	}
	// Failed or deleted while it waits, it takes no step here again: the
	// watch of its end ends its waits.
	p.tend(s.Job.ID, p.workDir(s.Job))
	res, err := p.waitForBusyServer(ctx, s, busy, nil)
	return nil, &res, err
}

// objectManifest reads the job's object manifest: the kept copy, or the
// payload URL (then kept). A job requeued to a step up to Downloading
// (its retry_count grew since the copy was fetched) fetches it again: the
// depositor may have fixed it, and no file of it has been processed yet.
// Later steps keep the copy their files were downloaded by.
func (p *Pipeline) objectManifest(ctx context.Context, j *queue.Job, prof *profile.Profile) (*checkm.Manifest, error) {
	url := j.Config.PayloadURL
	keep := filepath.Join(p.workDir(j), manifestCopy)
	data, err := os.ReadFile(keep)
	if err == nil && refetchManifest(j, keep) {
		p.log.Info("object manifest fetched again: the job was requeued before its download", "job", j.ID,
			"retry", j.Status.RetryCount, "url", redact.Location(url))
		err = os.ErrNotExist
	}
	if errors.Is(err, os.ErrNotExist) {
		data, err = p.client(prof).Fetch(ctx, url, maxManifestBytes)
		if err != nil {
			return nil, classify(fmt.Errorf("object manifest: %w", err))
		}
		if err := durable.WriteFile(keep, data); err != nil {
			return nil, err
		}
		if err := durable.WriteFile(keep+retrySuffix, []byte(strconv.Itoa(j.Status.RetryCount))); err != nil {
			return nil, err
		}
		// The folder now exists here, and another host may download the
		// job and end it: it goes when the job ends, wherever it ends.
		p.tend(j.ID, p.workDir(j))
	} else if err != nil {
		return nil, err
	}
	m, err := checkm.Parse(bytes.NewReader(data), url, p.cfg.Manifests)
	if err != nil {
		return nil, reactor.Fatal(err)
	}
	if m.Profile != checkm.IngestManifest {
		return nil, reactor.Fatal(fmt.Errorf("%s: an object's manifest must be an %s, not %s", redact.Location(url), checkm.IngestManifest, m.Profile))
	}
	return m, nil
}

// retrySuffix names the file beside the kept manifest that holds the
// retry_count it was fetched at.
const retrySuffix = ".retry"

// refetchManifest tells whether the kept manifest predates a requeue that
// sent the job back to Estimating or Downloading.
func refetchManifest(j *queue.Job, keep string) bool {
	if s := j.State(); s != queue.Estimating && s != queue.Downloading {
		return false
	}
	data, _ := os.ReadFile(keep + retrySuffix)
	at, _ := strconv.Atoi(strings.TrimSpace(string(data))) // none: fetched before any requeue
	return j.Status.RetryCount > at
}

// classify marks a fetch error that retrying cannot fix as fatal.
func classify(err error) error {
	if fetch.Permanent(err) {
		return reactor.Fatal(err)
	}
	return err
}
