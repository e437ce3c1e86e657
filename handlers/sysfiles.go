package handlers

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"math"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/ingestq/ingestq/handlers/checkm"
	"github.com/ingestq/ingestq/handlers/internal/plainfile"
	"github.com/ingestq/ingestq/internal/durable"
	"github.com/ingestq/ingestq/reactor/queue"
)

// System files Processing writes into system/. Their content depends only
// on the job's identifiers and metadata (no time stamps), so processing a
// job again, or depositing the same object again, stores no new version.
const (
	ercFile = "mrt-erc.txt"
	dcFile  = "mrt-dc.xml"
)

// objectManifest is the object's own manifest among its system files:
// every other file's name, digest and size, without the working folder's
// URLs of the storage manifest. With the PREMIS file, it describes one
// deposit (it lists that file's digest), so neither counts when Storing
// asks whether the content changed.
const objectManifest = "mrt-manifest.txt"

// depositFiles are the system files that differ with every deposit.
var depositFiles = []string{path.Join(systemDir, premisFile), path.Join(systemDir, objectManifest)}

// writeObjectManifest writes the object's manifest into system/ and returns
// entries with its own entry added (an earlier run's dropped).
func writeObjectManifest(work string, rec *digests, entries []manifestEntry) ([]manifestEntry, error) {
	name := path.Join(systemDir, objectManifest)
	entries = slices.DeleteFunc(entries, func(e manifestEntry) bool { return e.Name == name })
	var b bytes.Buffer
	b.WriteString("#%checkm_0.7\n#%profile | http://uc3.cdlib.org/registry/store/manifest/mrt-object-manifest\n")
	b.WriteString("#%prefix | nfo: | http://www.semanticdesktop.org/ontologies/2007/03/22/nfo#\n")
	b.WriteString("#%fields | nfo:fileName | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize\n")
	for _, e := range entries {
		fmt.Fprintf(&b, "%s | sha256 | %s | %d\n", e.Name, e.SHA256, e.Size)
	}
	b.WriteString("#%eof\n")
	e, err := rec.writeHashed(work, name, b.Bytes())
	if err != nil {
		return nil, err
	}
	return append(entries, e), nil
}

// writeSystemFiles writes the ERC and Dublin Core files into system/, at
// once (each waits for its own sync), recording their digests.
func writeSystemFiles(work string, rec *digests, j *queue.Job, ids *queue.Identifiers) error {
	md := queue.Metadata{}
	if j.Metadata != nil {
		md = *j.Metadata
	}
	var g errgroup.Group
	g.Go(func() error {
		_, err := rec.writeHashed(work, path.Join(systemDir, ercFile), erc(md, ids))
		return err
	})
	g.Go(func() error {
		_, err := rec.writeHashed(work, path.Join(systemDir, dcFile), dublinCore(md, ids))
		return err
	})
	return g.Wait()
}

// erc is the object's Electronic Resource Citation (the kernel elements
// who, what, when, where), "(:unav)" for what the depositor did not give.
func erc(md queue.Metadata, ids *queue.Identifiers) []byte {
	var b bytes.Buffer
	b.WriteString("erc:\n")
	for _, kv := range [][2]string{{"who", md.Who}, {"what", md.What}, {"when", md.When}, {"where", ids.PrimaryID}} {
		fmt.Fprintf(&b, "%s: %s\n", kv[0], ercValue(kv[1]))
	}
	if md.Where != "" && md.Where != ids.PrimaryID {
		fmt.Fprintf(&b, "where: %s\n", ercValue(md.Where))
	}
	for _, lid := range ids.LocalIDs {
		fmt.Fprintf(&b, "where: %s\n", ercValue(lid))
	}
	return b.Bytes()
}

// ercValue keeps an ANVL value on one line.
func ercValue(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(:unav)"
	}
	return strings.Join(strings.Fields(s), " ")
}

// dcRecord is the simple Dublin Core record of the object.
type dcRecord struct {
	XMLName    xml.Name `xml:"dc"`
	NS         string   `xml:"xmlns,attr"`
	Creator    string   `xml:"creator,omitempty"`
	Title      string   `xml:"title,omitempty"`
	Date       string   `xml:"date,omitempty"`
	Identifier []string `xml:"identifier"`
}

func dublinCore(md queue.Metadata, ids *queue.Identifiers) []byte {
	rec := dcRecord{NS: "http://purl.org/dc/elements/1.1/", Creator: md.Who, Title: md.What, Date: md.When,
		Identifier: append([]string{ids.PrimaryID}, ids.LocalIDs...)}
	out, _ := xml.MarshalIndent(rec, "", "  ") // plain strings: cannot fail
	return append([]byte(xml.Header), append(out, '\n')...)
}

// writeStorageManifest writes the object's files as an mrt-ingest-manifest
// with file: URLs and SHA-256 digests: what Storing hands to storage.
func writeStorageManifest(path string, entries []manifestEntry) error {
	data, err := storageManifestText(entries, func(e manifestEntry) string {
		u := url.URL{Scheme: "file", Path: filepath.ToSlash(e.Path)}
		return u.String()
	})
	if err != nil {
		return err
	}
	return durable.WriteFile(path, data)
}

// storageManifestText is the storage manifest of entries, each file at
// urlOf(it): a file: URL in the working folder, or the daemon's URL of it.
func storageManifestText(entries []manifestEntry, urlOf func(manifestEntry) string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("#%checkm_0.7\n#%profile | http://uc3.cdlib.org/registry/ingest/manifest/" + checkm.IngestManifest + "\n")
	b.WriteString("#%prefix | nfo: | http://www.semanticdesktop.org/ontologies/2007/03/22/nfo#\n")
	b.WriteString("#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | nfo:fileLastModified | nfo:fileName\n")
	for _, e := range entries {
		if strings.ContainsAny(e.Name, "|\r\n") {
			return nil, fmt.Errorf("file %q: a name with | or a line break cannot be listed in a checkm manifest", e.Name)
		}
		fmt.Fprintf(&b, "%s | sha256 | %s | %d | | %s\n", urlOf(e), e.SHA256, e.Size, e.Name)
	}
	b.WriteString("#%eof\n")
	return b.Bytes(), nil
}

// readStorageManifest reads back what writeStorageManifest wrote.
func readStorageManifest(path string) ([]manifestEntry, error) {
	data, err := plainfile.Read(path, -1) // a request reads it: never a pipe
	if errors.Is(err, plainfile.ErrNotPlain) {
		err = fmt.Errorf("%s: %w", path, err)
	}
	if err != nil {
		return nil, err
	}
	// This daemon wrote it, of every file a deposit may bring (up to the
	// depositor's limits: a zip's or a manifest's 100,000 files) and the
	// system files beside them, so only its lines are bounded: the
	// depositor's limit of entries failed an object at it in Storing.
	m, err := checkm.Parse(bytes.NewReader(data), path, checkm.Limits{MaxEntries: math.MaxInt, MaxBytes: int64(len(data))})
	if err != nil {
		return nil, err
	}
	out := make([]manifestEntry, len(m.Entries))
	for i, e := range m.Entries {
		u, err := url.Parse(e.URL)
		if err != nil || u.Scheme != "file" {
			return nil, fmt.Errorf("%s:%d: not a file: URL: %q", path, e.Line, e.URL)
		}
		out[i] = manifestEntry{Name: e.FileName, Path: filepath.FromSlash(u.Path), Size: e.Size, SHA256: e.HashValue}
	}
	return out, nil
}
